//! Map operations: Aerospike's map (CDT) op codes 64..=110 on a decoded [`Map`].
//!
//! Terms, as Aerospike defines them:
//! - the *index* of an entry is its position in key order, for every map (an unordered map
//!   is sorted by key on the fly); a negative index counts from the end;
//! - the *rank* of an entry is its position in value order, ties broken by key;
//! - the *storage position* is where an entry sits in [`Map::entries`]: key order for an
//!   ordered map, insertion order for an unordered one.
//!
//! Invariants:
//! - A map whose order [`MapOrder::is_key_sorted`] keeps its entries sorted by key
//!   ([`value::compare`]); an unordered one keeps insertion order (PUT_ITEMS and friends
//!   sort it by key first, as Aerospike does). Keys are unique.
//! - Keys are integers, strings or blobs (Aerospike's `map_is_key`); anything else is
//!   PARAMETER.
//! - A failed op may leave its target half-changed: the caller drops it on error.
//! - Nothing is sized from a count a client declared: counts are clipped to the map's size
//!   before use, and client integers are combined with checked or saturating arithmetic.
//! - Multi-element results follow Aerospike's order: key order for index and key
//!   selections, rank order for rank selections, storage order for inverted selections,
//!   value intervals and key or value lists.

use std::cmp::Ordering;

use model::ResultCode;

use super::result::{ReturnKind, ReturnType};
use super::value::{self, KIND_BLOB, KIND_STRING, List, Map, MapOrder, Value};

// ---- op codes ----------------------------------------------------------------------------

const SET_TYPE: u8 = 64;
const ADD: u8 = 65;
const ADD_ITEMS: u8 = 66;
const PUT: u8 = 67;
const PUT_ITEMS: u8 = 68;
const REPLACE: u8 = 69;
const REPLACE_ITEMS: u8 = 70;
const INCREMENT: u8 = 73;
const DECREMENT: u8 = 74;
const CLEAR: u8 = 75;
const REMOVE_BY_KEY: u8 = 76;
const REMOVE_BY_INDEX: u8 = 77;
const REMOVE_BY_VALUE: u8 = 78;
const REMOVE_BY_RANK: u8 = 79;
const REMOVE_BY_KEY_LIST: u8 = 81;
const REMOVE_ALL_BY_VALUE: u8 = 82;
const REMOVE_BY_VALUE_LIST: u8 = 83;
const REMOVE_BY_KEY_INTERVAL: u8 = 84;
const REMOVE_BY_INDEX_RANGE: u8 = 85;
const REMOVE_BY_VALUE_INTERVAL: u8 = 86;
const REMOVE_BY_RANK_RANGE: u8 = 87;
const REMOVE_BY_KEY_REL_INDEX_RANGE: u8 = 88;
const REMOVE_BY_VALUE_REL_RANK_RANGE: u8 = 89;
const SIZE: u8 = 96;
const GET_BY_KEY: u8 = 97;
const GET_BY_INDEX: u8 = 98;
const GET_BY_VALUE: u8 = 99;
const GET_BY_RANK: u8 = 100;
const GET_ALL_BY_VALUE: u8 = 102;
const GET_BY_KEY_INTERVAL: u8 = 103;
const GET_BY_INDEX_RANGE: u8 = 104;
const GET_BY_VALUE_INTERVAL: u8 = 105;
const GET_BY_RANK_RANGE: u8 = 106;
const GET_BY_KEY_LIST: u8 = 107;
const GET_BY_VALUE_LIST: u8 = 108;
const GET_BY_KEY_REL_INDEX_RANGE: u8 = 109;
const GET_BY_VALUE_REL_RANK_RANGE: u8 = 110;

/// Write flags (PUT, PUT_ITEMS): fail when the key exists.
const CREATE_ONLY: i64 = 0x01;
/// ... fail when the key is missing.
const UPDATE_ONLY: i64 = 0x02;
/// ... turn those failures into no-ops.
const NO_FAIL: i64 = 0x04;
/// ... with NO_FAIL, write the items that pass (PUT_ITEMS).
const DO_PARTIAL: i64 = 0x08;

/// The order attribute bits SET_TYPE accepts: key-value ordered and persist-index.
const SET_TYPE_VALID: i64 = 0x13;

/// The count a range op means when it names none (Aerospike's `UINT32_MAX`).
const COUNT_ALL: u64 = u32::MAX as u64;

/// Whether map op `code` modifies its target (`Some(true)`) or only reads it
/// (`Some(false)`); `None` when `code` is not a map op.
pub(crate) fn is_modify(code: u8) -> Option<bool> {
    match code {
        SET_TYPE..=REPLACE_ITEMS
        | INCREMENT..=REMOVE_BY_RANK
        | REMOVE_BY_KEY_LIST..=REMOVE_BY_VALUE_REL_RANK_RANGE => Some(true),
        SIZE..=GET_BY_RANK | GET_ALL_BY_VALUE..=GET_BY_VALUE_REL_RANK_RANGE => Some(false),
        _ => None,
    }
}

/// Runs reading map op `code` on `target` (`None`: nothing there). Returns the result.
///
/// # Errors
/// The op's result code.
pub(crate) fn read(code: u8, args: &[Value], target: Option<&Value>) -> Result<Value, ResultCode> {
    if is_modify(code) != Some(false) {
        return Err(ResultCode::Parameter);
    }
    let Some(map) = existing_map(target)? else {
        return Ok(Value::Nil);
    };
    if code == SIZE {
        check_arity(args, 0, 0)?;
        return Ok(Value::Int(len_i64(map.entries.len())));
    }
    let (request, selection) = select_for(code, args, map)?;
    Ok(shape(map, &request, &selection))
}

/// Runs modifying map op `code` on `target` (`None`: nothing there yet; the op may create
/// it). Returns the result.
///
/// # Errors
/// The op's result code; `target` is then unspecified (the caller drops it).
pub(crate) fn modify(
    code: u8,
    args: &[Value],
    target: &mut Option<Value>,
) -> Result<Value, ResultCode> {
    existing_map(target.as_ref())?;
    match code {
        SET_TYPE => set_type(args, target),
        ADD | PUT | REPLACE => put_one(code, args, target),
        ADD_ITEMS | PUT_ITEMS | REPLACE_ITEMS => put_items(code, args, target),
        INCREMENT | DECREMENT => increment(code == DECREMENT, args, target),
        CLEAR => clear(args, target),
        _ if is_modify(code) == Some(true) => remove(code, args, target),
        _ => Err(ResultCode::Parameter),
    }
}

// ---- arguments ---------------------------------------------------------------------------

/// Refuses fewer than `required` or more than `most` arguments (PARAMETER).
fn check_arity(args: &[Value], required: usize, most: usize) -> Result<(), ResultCode> {
    match (required..=most).contains(&args.len()) {
        true => Ok(()),
        false => Err(ResultCode::Parameter),
    }
}

/// The integer argument at `at`, `default` when absent; PARAMETER for a non-integer.
fn int_arg(args: &[Value], at: usize, default: i64) -> Result<i64, ResultCode> {
    match args.get(at) {
        None => Ok(default),
        Some(value) => value.as_int().ok_or(ResultCode::Parameter),
    }
}

/// A count argument at `at` (all when absent); a negative count is PARAMETER.
fn count_arg(args: &[Value], at: usize) -> Result<u64, ResultCode> {
    match args.get(at) {
        None => Ok(COUNT_ALL),
        Some(value) => {
            let count = value.as_int().ok_or(ResultCode::Parameter)?;
            u64::try_from(count).map_err(|_| ResultCode::Parameter)
        }
    }
}

/// The argument at `at`, which must be there.
fn required(args: &[Value], at: usize) -> Result<&Value, ResultCode> {
    args.get(at).ok_or(ResultCode::Parameter)
}

/// The items of a list argument.
fn list_arg(value: &Value) -> Result<&[Value], ResultCode> {
    match value {
        Value::List(list) => Ok(&list.items),
        _ => Err(ResultCode::Parameter),
    }
}

/// The entries of a map argument.
fn map_arg(value: &Value) -> Result<&[(Value, Value)], ResultCode> {
    match value {
        Value::Map(map) => Ok(&map.entries),
        _ => Err(ResultCode::Parameter),
    }
}

/// Whether `key` may be a map key: an integer, a string or a blob.
fn is_valid_key(key: &Value) -> bool {
    matches!(
        key,
        Value::Int(_)
            | Value::Bytes {
                kind: KIND_STRING | KIND_BLOB,
                ..
            }
    )
}

/// The order a creating op's attribute argument at `at` names (unordered when absent).
fn order_arg(args: &[Value], at: usize) -> Result<MapOrder, ResultCode> {
    let attr = int_arg(args, at, 0)?;
    Ok(MapOrder::from_flags((attr & 0x03) as u8))
}

/// A size as the i64 results carry (maps never hold anywhere near `i64::MAX` entries).
fn len_i64(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

// ---- targets -----------------------------------------------------------------------------

/// The map `target` holds, `None` when there is none; INCOMPATIBLE_TYPE for another value.
fn existing_map(target: Option<&Value>) -> Result<Option<&Map>, ResultCode> {
    match target {
        None => Ok(None),
        Some(Value::Map(map)) => Ok(Some(map)),
        Some(_) => Err(ResultCode::IncompatibleType),
    }
}

/// The map `target` holds, created empty with `order` when there is none.
fn map_or_create(target: &mut Option<Value>, order: MapOrder) -> Result<&mut Map, ResultCode> {
    let value = target.get_or_insert_with(|| {
        Value::Map(Map {
            order,
            entries: Vec::new(),
        })
    });
    match value {
        Value::Map(map) => Ok(map),
        _ => Err(ResultCode::IncompatibleType),
    }
}

/// The map `target` holds, `None` when there is none.
fn map_mut(target: &mut Option<Value>) -> Result<Option<&mut Map>, ResultCode> {
    match target {
        None => Ok(None),
        Some(Value::Map(map)) => Ok(Some(map)),
        Some(_) => Err(ResultCode::IncompatibleType),
    }
}

// ---- storage -----------------------------------------------------------------------------

/// Where `key` is stored (`Ok`), or where it would be inserted (`Err`): in key order for an
/// ordered map; for an unordered one, as Aerospike's `packed_map_find_key_maybe_unordered`
/// does, before the first greater key of the leading ascending run, else at the end (so an
/// unordered map that happens to be sorted stays sorted).
fn find_key(map: &Map, key: &Value) -> Result<usize, usize> {
    if map.order.is_key_sorted() {
        return map
            .entries
            .binary_search_by(|(stored, _)| value::compare(stored, key));
    }
    if let Some(at) = map
        .entries
        .iter()
        .position(|(stored, _)| value::equal(stored, key))
    {
        return Ok(at);
    }
    Err(unordered_insertion_point(&map.entries, key))
}

/// The insertion point of a new `key` in unordered `entries` (see [`find_key`]).
fn unordered_insertion_point(entries: &[(Value, Value)], key: &Value) -> usize {
    for (at, (stored, _)) in entries.iter().enumerate() {
        let ascending = at == 0 || value::compare(&entries[at - 1].0, stored).is_lt();
        if !ascending {
            break;
        }
        if value::compare(key, stored).is_lt() {
            return at;
        }
    }
    entries.len()
}

/// Sets `key` to `value`: replaced in place when present, else inserted.
fn store(map: &mut Map, key: Value, value: Value) {
    match find_key(map, &key) {
        Ok(at) => map.entries[at].1 = value,
        Err(at) => map.entries.insert(at, (key, value)),
    }
}

/// Sorts an unordered map's entries by key (Aerospike does before adding items).
fn sort_by_key(map: &mut Map) {
    map.entries.sort_by(|a, b| value::compare(&a.0, &b.0));
}

/// Storage positions in key order.
fn key_order(map: &Map) -> Vec<usize> {
    let mut order: Vec<usize> = (0..map.entries.len()).collect();
    if !map.order.is_key_sorted() {
        order.sort_by(|&a, &b| value::compare(&map.entries[a].0, &map.entries[b].0));
    }
    order
}

/// Storage positions in rank order: by value, ties by key.
fn rank_order(map: &Map) -> Vec<usize> {
    let mut order: Vec<usize> = (0..map.entries.len()).collect();
    order.sort_by(|&a, &b| {
        let (ka, va) = &map.entries[a];
        let (kb, vb) = &map.entries[b];
        value::compare(va, vb).then_with(|| value::compare(ka, kb))
    });
    order
}

/// For each storage position, its position in `order` (the inverse permutation).
fn positions_of(order: &[usize]) -> Vec<usize> {
    let mut positions = vec![0; order.len()];
    for (place, &at) in order.iter().enumerate() {
        positions[at] = place;
    }
    positions
}

// ---- writes ------------------------------------------------------------------------------

/// What a write may do to a key: overwrite it when present, create it when missing, turn a
/// refusal into a no-op, and (items) skip the refused items only.
#[derive(Clone, Copy)]
struct WriteControl {
    overwrite: bool,
    create: bool,
    no_fail: bool,
    partial: bool,
}

impl WriteControl {
    /// The control of a PUT or PUT_ITEMS with write `flags`.
    fn from_flags(flags: i64) -> WriteControl {
        WriteControl {
            overwrite: flags & CREATE_ONLY == 0,
            create: flags & UPDATE_ONLY == 0,
            no_fail: flags & NO_FAIL != 0,
            partial: flags & DO_PARTIAL != 0,
        }
    }

    /// ADD: create only, failing on an existing key.
    const ADD: WriteControl = WriteControl {
        overwrite: false,
        create: true,
        no_fail: false,
        partial: false,
    };

    /// REPLACE: update only, failing on a missing key.
    const REPLACE: WriteControl = WriteControl {
        overwrite: true,
        create: false,
        no_fail: false,
        partial: false,
    };

    /// Whether a write to a key that `exists` is allowed; `Ok(false)` when refused quietly.
    fn allows(self, exists: bool) -> Result<bool, ResultCode> {
        let refusal = match (exists, self.overwrite, self.create) {
            (true, false, _) => ResultCode::ElementExists,
            (false, _, false) => ResultCode::ElementNotFound,
            _ => return Ok(true),
        };
        match self.no_fail {
            true => Ok(false),
            false => Err(refusal),
        }
    }
}

/// SET_TYPE [attr]: sets the map's order, re-sorting it; creates an empty map when missing.
fn set_type(args: &[Value], target: &mut Option<Value>) -> Result<Value, ResultCode> {
    check_arity(args, 1, 1)?;
    let attr = int_arg(args, 0, 0)?;
    if attr & !SET_TYPE_VALID != 0 {
        return Err(ResultCode::OpNotApplicable);
    }
    let order = MapOrder::from_flags((attr & 0x03) as u8);
    let map = map_or_create(target, order)?;
    if order.is_key_sorted() && !map.order.is_key_sorted() {
        sort_by_key(map);
    }
    map.order = order;
    Ok(Value::Nil)
}

/// The arguments of an ADD, PUT or REPLACE: what the write may do, the order of a map it
/// creates, and the entry.
struct PutOne<'a> {
    control: WriteControl,
    order: MapOrder,
    key: &'a Value,
    value: &'a Value,
}

impl PutOne<'_> {
    /// Parses ADD [key, value, attr?], PUT [key, value, attr?, flags?] or REPLACE [key, value].
    fn parse(code: u8, args: &[Value]) -> Result<PutOne<'_>, ResultCode> {
        let (control, most) = match code {
            ADD => (WriteControl::ADD, 3),
            PUT => (WriteControl::from_flags(int_arg(args, 3, 0)?), 4),
            _ => (WriteControl::REPLACE, 2),
        };
        check_arity(args, 2, most)?;
        let order = order_arg(args, 2)?;
        let (key, value) = (required(args, 0)?, required(args, 1)?);
        if !is_valid_key(key) {
            return Err(ResultCode::Parameter);
        }
        Ok(PutOne {
            control,
            order,
            key,
            value,
        })
    }
}

/// ADD, PUT or REPLACE (see [`PutOne::parse`]): writes one entry; returns the map's size.
fn put_one(code: u8, args: &[Value], target: &mut Option<Value>) -> Result<Value, ResultCode> {
    let put = PutOne::parse(code, args)?;
    let map = map_or_create(target, put.order)?;
    if put.control.allows(find_key(map, put.key).is_ok())? {
        store(map, put.key.clone(), put.value.clone());
    }
    Ok(Value::Int(len_i64(map.entries.len())))
}

/// ADD_ITEMS [items, attr?], PUT_ITEMS [items, attr?, flags?], REPLACE_ITEMS [items]:
/// writes every entry of `items` or, refused, none (DO_PARTIAL: those allowed); returns
/// the map's size.
fn put_items(code: u8, args: &[Value], target: &mut Option<Value>) -> Result<Value, ResultCode> {
    let (control, most) = match code {
        ADD_ITEMS => (WriteControl::ADD, 2),
        PUT_ITEMS => (WriteControl::from_flags(int_arg(args, 2, 0)?), 3),
        _ => (WriteControl::REPLACE, 1),
    };
    check_arity(args, 1, most)?;
    let items = map_arg(required(args, 0)?)?;
    if items.iter().any(|(key, _)| !is_valid_key(key)) {
        return Err(ResultCode::Parameter);
    }
    if code == REPLACE_ITEMS && target.is_none() {
        return Err(ResultCode::ElementNotFound);
    }
    let order = order_arg(args, 1)?;
    let map = map_or_create(target, order)?;
    let mut accepted = Vec::with_capacity(items.len());
    for (key, value) in items {
        if control.allows(find_key(map, key).is_ok())? {
            accepted.push((key, value));
        } else if !control.partial {
            return Ok(Value::Int(len_i64(map.entries.len())));
        }
    }
    if !accepted.is_empty() && !map.order.is_key_sorted() {
        sort_by_key(map);
    }
    for (key, value) in accepted {
        store(map, key.clone(), value.clone());
    }
    Ok(Value::Int(len_i64(map.entries.len())))
}

/// INCREMENT / DECREMENT [key, delta?, attr?]: adds `delta` (1 when absent or nil) to the
/// number at `key` (0 when missing); returns the new number.
fn increment(
    decrement: bool,
    args: &[Value],
    target: &mut Option<Value>,
) -> Result<Value, ResultCode> {
    check_arity(args, 1, 3)?;
    let key = required(args, 0)?;
    if !is_valid_key(key) {
        return Err(ResultCode::Parameter);
    }
    let delta = match args.get(1) {
        None | Some(Value::Nil) => Value::Int(1),
        Some(number @ (Value::Int(_) | Value::Float(_))) => number.clone(),
        Some(_) => return Err(ResultCode::Parameter),
    };
    let delta = match (delta, decrement) {
        (Value::Int(n), true) => Value::Int(n.wrapping_neg()),
        (Value::Float(x), true) => Value::Float(-x),
        (other, _) => other,
    };
    let order = order_arg(args, 2)?;
    let map = map_or_create(target, order)?;
    let current = find_key(map, key).ok().map(|at| &map.entries[at].1);
    let sum = add_delta(current, &delta)?;
    store(map, key.clone(), sum.clone());
    Ok(sum)
}

/// `current` (missing: a zero of the delta's type) plus `delta`, Aerospike's way: an
/// integer stays an integer (a float delta truncated), a float stays a float.
fn add_delta(current: Option<&Value>, delta: &Value) -> Result<Value, ResultCode> {
    Ok(match (current, delta) {
        (None, number) => number.clone(),
        (Some(Value::Int(n)), Value::Int(d)) => Value::Int(n.wrapping_add(*d)),
        (Some(Value::Int(n)), Value::Float(d)) => Value::Int(n.wrapping_add(*d as i64)),
        (Some(Value::Float(x)), Value::Int(d)) => Value::Float(x + *d as f64),
        (Some(Value::Float(x)), Value::Float(d)) => Value::Float(x + d),
        _ => return Err(ResultCode::Parameter),
    })
}

/// CLEAR []: removes every entry (a missing map stays missing).
fn clear(args: &[Value], target: &mut Option<Value>) -> Result<Value, ResultCode> {
    check_arity(args, 0, 0)?;
    if let Some(map) = map_mut(target)? {
        map.entries.clear();
    }
    Ok(Value::Nil)
}

/// The REMOVE_BY_* ops: select as the matching GET_BY_* op, remove what was selected and
/// return it shaped. A missing map is a no-op returning nil.
fn remove(code: u8, args: &[Value], target: &mut Option<Value>) -> Result<Value, ResultCode> {
    let Some(map) = map_mut(target)? else {
        return Ok(Value::Nil);
    };
    let read_code = match code {
        REMOVE_BY_KEY => GET_BY_KEY,
        REMOVE_BY_INDEX => GET_BY_INDEX,
        REMOVE_BY_VALUE => GET_BY_VALUE,
        REMOVE_BY_RANK => GET_BY_RANK,
        REMOVE_BY_KEY_LIST => GET_BY_KEY_LIST,
        REMOVE_ALL_BY_VALUE => GET_ALL_BY_VALUE,
        REMOVE_BY_VALUE_LIST => GET_BY_VALUE_LIST,
        REMOVE_BY_KEY_INTERVAL => GET_BY_KEY_INTERVAL,
        REMOVE_BY_INDEX_RANGE => GET_BY_INDEX_RANGE,
        REMOVE_BY_VALUE_INTERVAL => GET_BY_VALUE_INTERVAL,
        REMOVE_BY_RANK_RANGE => GET_BY_RANK_RANGE,
        REMOVE_BY_KEY_REL_INDEX_RANGE => GET_BY_KEY_REL_INDEX_RANGE,
        REMOVE_BY_VALUE_REL_RANK_RANGE => GET_BY_VALUE_REL_RANK_RANGE,
        _ => return Err(ResultCode::Parameter),
    };
    let (request, selection) = select_for(read_code, args, map)?;
    let result = shape(map, &request, &selection);
    let mut doomed = vec![false; map.entries.len()];
    for &at in &selection.positions {
        doomed[at] = true;
    }
    let mut at = 0;
    map.entries.retain(|_| {
        let keep = !doomed[at];
        at += 1;
        keep
    });
    Ok(result)
}

// ---- selection ---------------------------------------------------------------------------

/// What a selecting op asked for: its return type and whether it selects one element.
struct Request {
    returns: ReturnType,
    multi: bool,
}

/// The order a selection's elements come back in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ResultOrder {
    Key,
    Rank,
    Storage,
}

/// The entries an op selected (after inversion): storage positions, in result order.
struct Selection {
    positions: Vec<usize>,
    order: ResultOrder,
}

/// Parses a selecting read op's arguments and selects in `map`.
fn select_for(code: u8, args: &[Value], map: &Map) -> Result<(Request, Selection), ResultCode> {
    let (least, most, multi) = match code {
        GET_BY_KEY | GET_BY_INDEX | GET_BY_VALUE | GET_BY_RANK => (2, 2, false),
        GET_ALL_BY_VALUE | GET_BY_KEY_LIST | GET_BY_VALUE_LIST => (2, 2, true),
        GET_BY_KEY_INTERVAL | GET_BY_VALUE_INTERVAL => (2, 3, true),
        GET_BY_INDEX_RANGE | GET_BY_RANK_RANGE => (2, 3, true),
        GET_BY_KEY_REL_INDEX_RANGE | GET_BY_VALUE_REL_RANK_RANGE => (3, 4, true),
        _ => return Err(ResultCode::Parameter),
    };
    check_arity(args, least, most)?;
    let returns = ReturnType::parse(required(args, 0)?)?;
    if returns.inverted && !multi {
        return Err(ResultCode::OpNotApplicable);
    }
    let request = Request { returns, multi };
    let operand = required(args, 1)?;
    let (positions, order) = match code {
        GET_BY_KEY => (by_key_interval(map, operand, None, true), ResultOrder::Key),
        GET_BY_KEY_INTERVAL => {
            let end = args.get(2).unwrap_or(&Value::Infinity);
            (
                by_key_interval(map, operand, Some(end), true),
                key_interval_order(map),
            )
        }
        GET_BY_VALUE | GET_ALL_BY_VALUE => (
            by_value_interval(map, operand, None, multi),
            ResultOrder::Storage,
        ),
        GET_BY_VALUE_INTERVAL => {
            let end = args.get(2).unwrap_or(&Value::Infinity);
            (
                by_value_interval(map, operand, Some(end), true),
                ResultOrder::Storage,
            )
        }
        GET_BY_INDEX | GET_BY_INDEX_RANGE => {
            let index = int_arg(args, 1, 0)?;
            let count = if multi { count_arg(args, 2)? } else { 1 };
            let range = clip_range(index, count, map.entries.len(), multi)?;
            (key_order(map)[range].to_vec(), ResultOrder::Key)
        }
        GET_BY_RANK | GET_BY_RANK_RANGE => {
            let rank = int_arg(args, 1, 0)?;
            let count = if multi { count_arg(args, 2)? } else { 1 };
            let range = clip_range(rank, count, map.entries.len(), multi)?;
            (rank_order(map)[range].to_vec(), ResultOrder::Rank)
        }
        GET_BY_KEY_LIST => (by_key_list(map, list_arg(operand)?), ResultOrder::Storage),
        GET_BY_VALUE_LIST => (by_value_list(map, list_arg(operand)?), ResultOrder::Storage),
        GET_BY_KEY_REL_INDEX_RANGE => {
            let below = key_order(map)
                .iter()
                .filter(|&&at| value::compare(&map.entries[at].0, operand).is_lt())
                .count();
            let range = relative_range(below, int_arg(args, 2, 0)?, count_arg(args, 3)?, map)?;
            (key_order(map)[range].to_vec(), ResultOrder::Key)
        }
        _ => {
            let below = map
                .entries
                .iter()
                .filter(|(_, stored)| value::compare(stored, operand).is_lt())
                .count();
            let range = relative_range(below, int_arg(args, 2, 0)?, count_arg(args, 3)?, map)?;
            (rank_order(map)[range].to_vec(), ResultOrder::Rank)
        }
    };
    let selection = match returns.inverted {
        false => Selection { positions, order },
        true => invert(map, &positions),
    };
    Ok((request, selection))
}

/// The result order of a key interval: key order on an ordered map (Aerospike reads it as
/// an index range), storage order on an unordered one.
fn key_interval_order(map: &Map) -> ResultOrder {
    match map.order.is_key_sorted() {
        false => ResultOrder::Storage,
        true => ResultOrder::Key,
    }
}

/// Every entry not in `positions`, in storage order.
fn invert(map: &Map, positions: &[usize]) -> Selection {
    let mut chosen = vec![false; map.entries.len()];
    for &at in positions {
        chosen[at] = true;
    }
    let rest = (0..map.entries.len()).filter(|&at| !chosen[at]).collect();
    Selection {
        positions: rest,
        order: ResultOrder::Storage,
    }
}

/// Entries whose key is in `[begin, end)` (`end` `None`: equal to `begin`), in key order;
/// `multi` false keeps the first only.
fn by_key_interval(map: &Map, begin: &Value, end: Option<&Value>, multi: bool) -> Vec<usize> {
    let mut found: Vec<usize> = key_order(map)
        .into_iter()
        .filter(|&at| in_interval(&map.entries[at].0, begin, end))
        .collect();
    if !multi {
        found.truncate(1);
    }
    found
}

/// Entries whose value is in `[begin, end)` (`end` `None`: equal to `begin`), in storage
/// order; `multi` false keeps the first only.
fn by_value_interval(map: &Map, begin: &Value, end: Option<&Value>, multi: bool) -> Vec<usize> {
    let matching = map
        .entries
        .iter()
        .enumerate()
        .filter(|(_, (_, stored))| in_interval(stored, begin, end))
        .map(|(at, _)| at);
    match multi {
        true => matching.collect(),
        false => matching.take(1).collect(),
    }
}

/// Whether `item` is in `[begin, end)`, or equals `begin` when `end` is `None`.
fn in_interval(item: &Value, begin: &Value, end: Option<&Value>) -> bool {
    match end {
        None => value::equal(item, begin),
        Some(end) => {
            value::compare(item, begin) != Ordering::Less
                && value::compare(item, end) == Ordering::Less
        }
    }
}

/// Entries whose key is in `keys`, in storage order.
fn by_key_list(map: &Map, keys: &[Value]) -> Vec<usize> {
    (0..map.entries.len())
        .filter(|&at| keys.iter().any(|key| value::equal(&map.entries[at].0, key)))
        .collect()
}

/// Entries whose value is in `values`, in storage order.
fn by_value_list(map: &Map, values: &[Value]) -> Vec<usize> {
    (0..map.entries.len())
        .filter(|&at| values.iter().any(|v| value::equal(&map.entries[at].1, v)))
        .collect()
}

/// The positions `[index, index + count)` of a map of `len` entries, clipped as
/// Aerospike's `calc_index_count` clips them: a negative index counts from the end; a
/// single-element op out of bounds is OP_NOT_APPLICABLE, a range one selects what
/// overlaps.
fn clip_range(
    index: i64,
    count: u64,
    len: usize,
    multi: bool,
) -> Result<std::ops::Range<usize>, ResultCode> {
    let len64 = len_i64(len);
    let start = if index < 0 {
        index.saturating_add(len64)
    } else {
        index
    };
    if !multi && (start < 0 || start >= len64) {
        return Err(ResultCode::OpNotApplicable);
    }
    if start >= len64 {
        return Ok(len..len);
    }
    let (start, count) = match start < 0 {
        // Only the part of the range from position 0 on remains.
        true => (0, count.saturating_sub(start.unsigned_abs())),
        false => (start, count),
    };
    let start = usize::try_from(start).map_err(|_| ResultCode::Parameter)?;
    let room = len - start;
    let taken = usize::try_from(count).unwrap_or(usize::MAX).min(room);
    Ok(start..start + taken)
}

/// The range `[below + offset, ... + count)` of a relative range op (Aerospike's
/// `calc_rel_index_count`), clipped to the map.
fn relative_range(
    below: usize,
    offset: i64,
    count: u64,
    map: &Map,
) -> Result<std::ops::Range<usize>, ResultCode> {
    let start = offset.saturating_add(len_i64(below));
    let (start, count) = match start < 0 {
        true => (0, count.saturating_sub(start.unsigned_abs())),
        false => (start, count),
    };
    clip_range(start, count, map.entries.len(), true)
}

// ---- results -----------------------------------------------------------------------------

/// Shapes `selection` as `request` asks (the result of a GET_BY_* or REMOVE_BY_* op).
fn shape(map: &Map, request: &Request, selection: &Selection) -> Value {
    let positions = &selection.positions;
    let len = map.entries.len();
    let count = positions.len();
    if !request.multi && count == 0 {
        return not_found(request.returns.kind);
    }
    match request.returns.kind {
        ReturnKind::None => Value::Nil,
        ReturnKind::Count => Value::Int(len_i64(count)),
        ReturnKind::Exists => Value::Bool(count != 0),
        ReturnKind::Index | ReturnKind::ReverseIndex => {
            let reverse = request.returns.kind == ReturnKind::ReverseIndex;
            let places = positions_of(&key_order(map));
            numbers(request, selection, &places, len, reverse)
        }
        ReturnKind::Rank | ReturnKind::ReverseRank => {
            let reverse = request.returns.kind == ReturnKind::ReverseRank;
            let places = positions_of(&rank_order(map));
            numbers(request, selection, &places, len, reverse)
        }
        ReturnKind::Key | ReturnKind::Value => {
            let keys = request.returns.kind == ReturnKind::Key;
            let mut items = positions.iter().map(|&at| {
                let (key, stored) = &map.entries[at];
                if keys { key.clone() } else { stored.clone() }
            });
            match request.multi {
                true => list(items.collect()),
                false => items.next().unwrap_or(Value::Nil),
            }
        }
        ReturnKind::KeyValue | ReturnKind::UnorderedMap | ReturnKind::OrderedMap => {
            key_values(map, request.returns.kind, positions)
        }
    }
}

/// The result of a single-element op that found nothing.
fn not_found(kind: ReturnKind) -> Value {
    match kind {
        ReturnKind::Index | ReturnKind::ReverseIndex | ReturnKind::Rank => Value::Int(-1),
        ReturnKind::ReverseRank => Value::Int(-1),
        ReturnKind::Count => Value::Int(0),
        ReturnKind::Exists => Value::Bool(false),
        ReturnKind::KeyValue | ReturnKind::UnorderedMap | ReturnKind::OrderedMap => {
            key_values(&Map::default(), kind, &[])
        }
        ReturnKind::None | ReturnKind::Key | ReturnKind::Value => Value::Nil,
    }
}

/// Index or rank numbers of the selected entries (`places`: each storage position's index
/// or rank), counted from the end when `reverse`. A selection in storage order comes back
/// sorted; one in key or rank order as it is.
fn numbers(
    request: &Request,
    selection: &Selection,
    places: &[usize],
    len: usize,
    reverse: bool,
) -> Value {
    let mut found: Vec<usize> = selection.positions.iter().map(|&at| places[at]).collect();
    if selection.order == ResultOrder::Storage {
        found.sort_unstable();
    }
    let number = |place: usize| match reverse {
        true => len_i64(len - 1 - place),
        false => len_i64(place),
    };
    match request.multi {
        true => list(
            found
                .into_iter()
                .map(|place| Value::Int(number(place)))
                .collect(),
        ),
        false => found
            .first()
            .map_or(Value::Int(-1), |&place| Value::Int(number(place))),
    }
}

/// The selected entries as a map, as Aerospike's `result_map_type_to_map_flags` and
/// `cdt_map_builder_start` build it (`particle_map.c`, `cdt.h`): KEY_VALUE in result order
/// with the preserve-order header (flags 0x08), whatever the map's own order and however
/// many entries (none too: `result_data_set_not_found`); UNORDERED_MAP in result order
/// without a header; ORDERED_MAP sorted by key with the key-ordered header.
fn key_values(map: &Map, kind: ReturnKind, positions: &[usize]) -> Value {
    let mut result = Map {
        order: MapOrder::Unordered,
        entries: positions
            .iter()
            .map(|&at| map.entries[at].clone())
            .collect(),
    };
    match kind {
        ReturnKind::OrderedMap => {
            sort_by_key(&mut result);
            result.order = MapOrder::KeyOrdered;
        }
        ReturnKind::KeyValue => result.order = MapOrder::PreserveOrder,
        _ => {}
    }
    Value::Map(result)
}

/// An unordered list of `items`.
fn list(items: Vec<Value>) -> Value {
    Value::List(List {
        ordered: false,
        items,
    })
}

pub(crate) mod packed;

#[cfg(test)]
mod tests;
