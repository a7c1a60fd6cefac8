//! List operations: Aerospike's list CDT ops (`as/src/base/particle_list.c`) on a decoded
//! [`List`].
//!
//! Every op either selects elements (by index, value, value interval, value list, rank or
//! rank relative to a value) and returns or removes them, or writes (append, insert, set,
//! increment, sort, set order, clear).
//!
//! Invariants:
//! - An ordered list stays sorted by [`value::compare`]: adds go to their sorted position
//!   (after equal elements), and writes by index (insert, set) are refused on it
//!   (OP_NOT_APPLICABLE), as Aerospike refuses them.
//! - Indexes and counts come from the client as any i64: they are normalized with checked or
//!   saturating arithmetic as Aerospike's `calc_index_count` does, and nothing is ever sized
//!   from a count a client merely declared; the only growth a client controls beyond what it
//!   sent is the nil padding of an insert past the end, capped at [`PAD_MAX`].
//! - Ranks are positions in the stable sort of the list (ties by position). A rank an op
//!   reports for an element chosen by index in an unordered list is, as in Aerospike, the
//!   number of elements smaller than it; in an ordered list ranks are indexes.
//! - Sorting never panics whatever the comparison says (a NaN compares equal to every
//!   double, so `compare` is not a total order): it is a merge sort of our own.
//! - A failed op may leave its target half changed; the caller then drops it.

use std::cmp::Ordering;

use model::ResultCode;

use super::result::{ReturnKind, ReturnType};
use super::value::{self, List, Value};

/// The list op codes (Aerospike's `as_cdt_optype`).
mod code {
    pub(super) const SET_TYPE: u8 = 0;
    pub(super) const APPEND: u8 = 1;
    pub(super) const APPEND_ITEMS: u8 = 2;
    pub(super) const INSERT: u8 = 3;
    pub(super) const INSERT_ITEMS: u8 = 4;
    pub(super) const POP: u8 = 5;
    pub(super) const POP_RANGE: u8 = 6;
    pub(super) const REMOVE: u8 = 7;
    pub(super) const REMOVE_RANGE: u8 = 8;
    pub(super) const SET: u8 = 9;
    pub(super) const TRIM: u8 = 10;
    pub(super) const CLEAR: u8 = 11;
    pub(super) const INCREMENT: u8 = 12;
    pub(super) const SORT: u8 = 13;
    pub(super) const SIZE: u8 = 16;
    pub(super) const GET: u8 = 17;
    pub(super) const GET_RANGE: u8 = 18;
    pub(super) const GET_BY_INDEX: u8 = 19;
    pub(super) const GET_BY_VALUE: u8 = 20;
    pub(super) const GET_BY_RANK: u8 = 21;
    pub(super) const GET_ALL_BY_VALUE: u8 = 22;
    pub(super) const GET_ALL_BY_VALUE_LIST: u8 = 23;
    pub(super) const GET_BY_INDEX_RANGE: u8 = 24;
    pub(super) const GET_BY_VALUE_INTERVAL: u8 = 25;
    pub(super) const GET_BY_RANK_RANGE: u8 = 26;
    pub(super) const GET_BY_VALUE_REL_RANK_RANGE: u8 = 27;
    pub(super) const REMOVE_BY_INDEX: u8 = 32;
    pub(super) const REMOVE_BY_VALUE_REL_RANK_RANGE: u8 = 40;
    /// A REMOVE_BY_* code less this is its GET_BY_* twin.
    pub(super) const REMOVE_BY_OFFSET: u8 = REMOVE_BY_INDEX - GET_BY_INDEX;
}

/// Write flags (`as_cdt_list_modify_flags`).
const FLAG_ADD_UNIQUE: u64 = 0x01;
const FLAG_INSERT_BOUNDED: u64 = 0x02;
const FLAG_NO_FAIL: u64 = 0x04;
const FLAG_DO_PARTIAL: u64 = 0x08;

/// List order attribute bits (`AS_PACKED_LIST_FLAG_ORDERED`, `AS_PACKED_PERSIST_INDEX`).
const ORDER_ORDERED: u64 = 0x01;
const ORDER_PERSIST_INDEX: u64 = 0x10;

/// Sort flags (`as_cdt_sort_flags`).
const SORT_DESCENDING: u64 = 0x01;
const SORT_DROP_DUPLICATES: u64 = 0x02;

/// The count a range op assumes when none is given (Aerospike's default, `UINT32_MAX`).
const COUNT_ALL: u64 = u32::MAX as u64;

/// Insert and increment positions above this are refused, as Aerospike refuses them.
const INDEX_MAX: i64 = i32::MAX as i64;

/// The most nils an insert past the end may pad with. Aerospike has no such limit of its own,
/// but a record is bounded (1 MiB by default) and a nil packs in one byte, so a padding above
/// this could never be stored: it is refused (PARAMETER) before any memory is reserved.
const PAD_MAX: usize = 1 << 20;

/// Whether list op `code` modifies its target (`Some(true)`) or only reads it
/// (`Some(false)`); `None` when `code` is not a list op.
pub(crate) fn is_modify(code: u8) -> Option<bool> {
    match code {
        code::SET_TYPE..=code::SORT => Some(true),
        code::SIZE..=code::GET_BY_VALUE_REL_RANK_RANGE => Some(false),
        code::REMOVE_BY_INDEX..=code::REMOVE_BY_VALUE_REL_RANK_RANGE => Some(true),
        _ => None,
    }
}

/// Runs reading list op `code` on `target` (`None`: nothing there). Returns the result.
///
/// # Errors
/// The op's result code.
pub(crate) fn read(code: u8, args: &[Value], target: Option<&Value>) -> Result<Value, ResultCode> {
    if is_modify(code) != Some(false) {
        return Err(ResultCode::Parameter);
    }
    check_arity(code, args)?;
    let Some(target) = target else {
        return Ok(Value::Nil);
    };
    let Value::List(list) = target else {
        return Err(ResultCode::IncompatibleType);
    };
    if code == code::SIZE {
        return Ok(int(list.items.len()));
    }
    let request = Request::parse(code, args)?;
    let selection = select(list, &request)?;
    shape(&list.items, &selection, request.returns.kind)
}

/// Runs modifying list op `code` on `target` (`None`: nothing there yet; the op may create
/// it). Returns the result.
///
/// # Errors
/// The op's result code; `target` is then unspecified (the caller drops it).
pub(crate) fn modify(
    code: u8,
    args: &[Value],
    target: &mut Option<Value>,
) -> Result<Value, ResultCode> {
    if is_modify(code) != Some(true) {
        return Err(ResultCode::Parameter);
    }
    check_arity(code, args)?;
    if target
        .as_ref()
        .is_some_and(|v| !matches!(v, Value::List(_)))
    {
        return Err(ResultCode::IncompatibleType);
    }
    let args = Args(args);
    match code {
        code::SET_TYPE => set_type(&args, target),
        code::APPEND | code::APPEND_ITEMS => append(code, &args, target),
        code::INSERT | code::INSERT_ITEMS => insert(code, &args, target),
        code::SET => set(&args, target),
        code::INCREMENT => increment(&args, target),
        code::SORT => sort(&args, target),
        code::CLEAR => clear(target),
        _ => remove_selected(code, &args, target),
    }
}

// ---- arguments ---------------------------------------------------------------------------

/// The (required, most) argument counts of op `code` (the op table in `cdt.c`).
fn arity(code: u8) -> (usize, usize) {
    match code {
        code::SET_TYPE => (1, 1),
        code::APPEND | code::APPEND_ITEMS => (1, 3),
        code::INSERT | code::INSERT_ITEMS | code::SET => (2, 3),
        code::POP | code::REMOVE | code::GET => (1, 1),
        code::POP_RANGE | code::REMOVE_RANGE | code::GET_RANGE => (1, 2),
        code::TRIM => (2, 2),
        code::CLEAR | code::SIZE => (0, 0),
        code::INCREMENT => (1, 4),
        code::SORT => (0, 1),
        _ => match get_twin(code) {
            code::GET_BY_INDEX_RANGE | code::GET_BY_RANK_RANGE => (2, 3),
            code::GET_BY_VALUE_INTERVAL => (2, 3),
            code::GET_BY_VALUE_REL_RANK_RANGE => (3, 4),
            _ => (2, 2),
        },
    }
}

/// The GET_BY_* code of a REMOVE_BY_* code; other codes unchanged.
fn get_twin(code: u8) -> u8 {
    match code >= code::REMOVE_BY_INDEX {
        true => code - code::REMOVE_BY_OFFSET,
        false => code,
    }
}

/// Refuses (PARAMETER) too few or too many arguments for op `code`.
fn check_arity(code: u8, args: &[Value]) -> Result<(), ResultCode> {
    let (required, most) = arity(code);
    match (required..=most).contains(&args.len()) {
        true => Ok(()),
        false => Err(ResultCode::Parameter),
    }
}

/// An op's arguments (after its code), read by position.
struct Args<'a>(&'a [Value]);

impl<'a> Args<'a> {
    /// Argument `at`, which must be there.
    fn value(&self, at: usize) -> Result<&'a Value, ResultCode> {
        self.0.get(at).ok_or(ResultCode::Parameter)
    }

    /// Argument `at` as an integer (an index or rank), which must be there.
    fn int(&self, at: usize) -> Result<i64, ResultCode> {
        self.value(at)?.as_int().ok_or(ResultCode::Parameter)
    }

    /// Argument `at` as an unsigned integer (a count or flags, read as Aerospike reads a
    /// uint64: a negative count is huge), or `default` when absent.
    fn unsigned(&self, at: usize, default: u64) -> Result<u64, ResultCode> {
        match self.0.get(at) {
            None => Ok(default),
            Some(value) => Ok(value.as_int().ok_or(ResultCode::Parameter)? as u64),
        }
    }

    /// Argument `at` as a count; absent: to the end.
    fn count(&self, at: usize) -> Result<u64, ResultCode> {
        self.unsigned(at, COUNT_ALL)
    }

    /// Argument `at` as flags; absent: none.
    fn flags(&self, at: usize) -> Result<u64, ResultCode> {
        self.unsigned(at, 0)
    }

    /// The items of a list argument `at` (APPEND_ITEMS, INSERT_ITEMS, value lists).
    fn items(&self, at: usize) -> Result<&'a [Value], ResultCode> {
        match self.value(at)? {
            Value::List(list) => Ok(&list.items),
            _ => Err(ResultCode::Parameter),
        }
    }
}

/// An integer result.
fn int(number: usize) -> Value {
    Value::Int(number as i64)
}

// ---- selecting ---------------------------------------------------------------------------

/// Which elements a selecting op names.
enum Selector<'a> {
    /// `count` elements from `index`.
    IndexRange(i64, u64),
    /// Elements equal to the value.
    Value(&'a Value),
    /// Elements in `[begin, end)`; no end: to the largest value.
    ValueInterval(&'a Value, Option<&'a Value>),
    /// Elements equal to any of the values.
    ValueList(&'a [Value]),
    /// `count` elements from rank `rank`.
    RankRange(i64, u64),
    /// `count` elements from rank `rank` relative to where the value ranks.
    RelRankRange(&'a Value, i64, u64),
}

/// A selecting op, parsed: what it selects, whether it may return several elements, and what
/// it returns.
struct Request<'a> {
    selector: Selector<'a>,
    multi: bool,
    returns: ReturnType,
}

impl<'a> Request<'a> {
    /// Parses the arguments of selecting op `code` (GET*, POP*, REMOVE*, TRIM).
    fn parse(code: u8, args: &'a [Value]) -> Result<Request<'a>, ResultCode> {
        let args = Args(args);
        let fixed = |kind, inverted| ReturnType { kind, inverted };
        let (selector, multi, returns) = match code {
            code::GET | code::POP => {
                let selector = Selector::IndexRange(args.int(0)?, 1);
                (selector, false, fixed(ReturnKind::Value, false))
            }
            code::GET_RANGE | code::POP_RANGE => {
                let selector = Selector::IndexRange(args.int(0)?, args.count(1)?);
                (selector, true, fixed(ReturnKind::Value, false))
            }
            code::REMOVE => {
                let selector = Selector::IndexRange(args.int(0)?, 1);
                (selector, false, fixed(ReturnKind::Count, false))
            }
            code::REMOVE_RANGE => {
                let selector = Selector::IndexRange(args.int(0)?, args.count(1)?);
                (selector, true, fixed(ReturnKind::Count, false))
            }
            code::TRIM => {
                let selector = Selector::IndexRange(args.int(0)?, args.count(1)?);
                (selector, true, fixed(ReturnKind::Count, true))
            }
            _ => {
                let returns = ReturnType::parse(args.value(0)?)?;
                let (selector, multi) = Self::by_selector(get_twin(code), &args)?;
                (selector, multi, returns)
            }
        };
        if returns.inverted && !multi {
            return Err(ResultCode::OpNotApplicable);
        }
        Ok(Request {
            selector,
            multi,
            returns,
        })
    }

    /// The selector of a GET_BY_* op (`code`), from its arguments after the return type.
    fn by_selector(code: u8, args: &Args<'a>) -> Result<(Selector<'a>, bool), ResultCode> {
        Ok(match code {
            code::GET_BY_INDEX => (Selector::IndexRange(args.int(1)?, 1), false),
            code::GET_BY_VALUE => (Selector::Value(args.value(1)?), false),
            code::GET_BY_RANK => (Selector::RankRange(args.int(1)?, 1), false),
            code::GET_ALL_BY_VALUE => (Selector::Value(args.value(1)?), true),
            code::GET_ALL_BY_VALUE_LIST => (Selector::ValueList(args.items(1)?), true),
            code::GET_BY_INDEX_RANGE => (Selector::IndexRange(args.int(1)?, args.count(2)?), true),
            code::GET_BY_VALUE_INTERVAL => {
                (Selector::ValueInterval(args.value(1)?, args.0.get(2)), true)
            }
            code::GET_BY_RANK_RANGE => (Selector::RankRange(args.int(1)?, args.count(2)?), true),
            code::GET_BY_VALUE_REL_RANK_RANGE => {
                let selector = Selector::RelRankRange(args.value(1)?, args.int(2)?, args.count(3)?);
                (selector, true)
            }
            _ => return Err(ResultCode::Parameter),
        })
    }
}

/// How a selection reports the ranks of its elements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RankRule {
    /// The index (ordered lists).
    Index,
    /// The number of smaller elements, in index order (elements chosen by index).
    LessCount,
    /// The positions in the stable sort, ascending (elements chosen by value or rank).
    SortPosition,
}

/// The elements an op selected.
struct Selection {
    /// Their indexes, ascending.
    indexes: Vec<usize>,
    /// Whether a VALUE result lists them by rank (else by index).
    values_by_rank: bool,
    ranks: RankRule,
    /// Whether the result is a list (else one element, or none).
    multi: bool,
}

/// Selects the elements `request` names in `list`.
///
/// # Errors
/// OP_NOT_APPLICABLE for a single index or rank out of bounds.
fn select(list: &List, request: &Request<'_>) -> Result<Selection, ResultCode> {
    let items = &list.items;
    let inverted = request.returns.inverted;
    let multi = request.multi;
    let (picked, by_rank, by_index) = match request.selector {
        Selector::IndexRange(index, count) => {
            let (start, len) = span(items.len(), index, count, multi)?;
            ((start..start + len).collect(), false, true)
        }
        Selector::Value(wanted) => {
            let picked = matching(items, |x| value::equal(x, wanted), multi);
            (picked, false, false)
        }
        Selector::ValueInterval(begin, end) => {
            let picked = matching(items, |x| in_interval(x, begin, end), true);
            (picked, false, false)
        }
        Selector::ValueList(wanted) => {
            let picked = matching(items, |x| wanted.iter().any(|w| value::equal(x, w)), true);
            (picked, false, false)
        }
        Selector::RankRange(rank, count) => (rank_range(items, rank, count, multi)?, true, false),
        Selector::RelRankRange(anchor, rank, count) => {
            let (rank, count) = relative(rank, count, less_count(items, anchor));
            (rank_range(items, rank, count, true)?, true, false)
        }
    };
    let mut indexes = picked;
    indexes.sort_unstable();
    if inverted {
        indexes = complement(items.len(), &indexes);
    }
    let ranks = match (list.ordered, by_index) {
        (true, _) => RankRule::Index,
        (false, true) => RankRule::LessCount,
        (false, false) => RankRule::SortPosition,
    };
    Ok(Selection {
        indexes,
        values_by_rank: by_rank && !inverted,
        ranks,
        multi,
    })
}

/// The start and length an index (or rank) range covers in a list of `size` elements, as
/// Aerospike's `calc_index_count`: a negative index counts from the end; a multi range clips
/// to the list (a start before the beginning shortens it), a single one out of bounds is
/// OP_NOT_APPLICABLE.
fn span(size: usize, index: i64, count: u64, multi: bool) -> Result<(usize, usize), ResultCode> {
    let size64 = size as i64;
    let out_of_bounds = match multi {
        true => Ok((size, 0)),
        false => Err(ResultCode::OpNotApplicable),
    };
    if index >= size64 {
        return out_of_bounds;
    }
    // `index` < 0 here, or `index` < `size64`: neither overflows.
    let start = if index < 0 { size64 + index } else { index };
    if start < 0 {
        if !multi {
            return out_of_bounds;
        }
        let before = start.unsigned_abs();
        let len = count.saturating_sub(before).min(size as u64);
        return Ok((0, len as usize));
    }
    let start = start as usize;
    let len = count.min((size - start) as u64) as usize;
    Ok((start, len))
}

/// The indexes of the elements that `wanted` accepts, ascending; only the first unless
/// `multi`.
fn matching(items: &[Value], wanted: impl Fn(&Value) -> bool, multi: bool) -> Vec<usize> {
    let found = items.iter().enumerate().filter(|(_, x)| wanted(x));
    match multi {
        true => found.map(|(i, _)| i).collect(),
        false => found.map(|(i, _)| i).take(1).collect(),
    }
}

/// Whether `x` lies in `[begin, end)` (no end: no upper bound).
fn in_interval(x: &Value, begin: &Value, end: Option<&Value>) -> bool {
    value::compare(x, begin) != Ordering::Less
        && end.is_none_or(|end| value::compare(x, end) == Ordering::Less)
}

/// The number of elements smaller than `anchor` (where it would rank).
fn less_count(items: &[Value], anchor: &Value) -> usize {
    items
        .iter()
        .filter(|x| value::compare(x, anchor) == Ordering::Less)
        .count()
}

/// A rank range relative to `anchor_rank`, made absolute as Aerospike's
/// `calc_rel_index_count`: a start below zero moves to zero and shortens the count.
fn relative(rank: i64, count: u64, anchor_rank: usize) -> (i64, u64) {
    let start = rank.saturating_add(anchor_rank as i64);
    match start < 0 {
        true => (0, count.saturating_sub(start.unsigned_abs())),
        false => (start, count),
    }
}

/// The indexes of the elements of ranks `rank..rank + count`, in rank order.
fn rank_range(
    items: &[Value],
    rank: i64,
    count: u64,
    multi: bool,
) -> Result<Vec<usize>, ResultCode> {
    let (start, len) = span(items.len(), rank, count, multi)?;
    let order = sorted_order(items);
    Ok(order[start..start + len].to_vec())
}

/// Every index below `size` not in `indexes` (ascending), ascending.
fn complement(size: usize, indexes: &[usize]) -> Vec<usize> {
    let mut picked = indexes.iter().peekable();
    (0..size)
        .filter(|i| match picked.peek() {
            Some(&&next) if next == *i => {
                picked.next();
                false
            }
            _ => true,
        })
        .collect()
}

// ---- results -----------------------------------------------------------------------------

/// The result of `selection` over `items` for return type `kind`.
///
/// # Errors
/// OP_NOT_APPLICABLE for a map-only return type (key, key-value, map).
fn shape(items: &[Value], selection: &Selection, kind: ReturnKind) -> Result<Value, ResultCode> {
    let size = items.len();
    let indexes = &selection.indexes;
    Ok(match kind {
        ReturnKind::None => Value::Nil,
        ReturnKind::Count => int(indexes.len()),
        ReturnKind::Exists => Value::Bool(!indexes.is_empty()),
        ReturnKind::Index => ints(indexes.clone(), selection.multi),
        ReturnKind::ReverseIndex => ints(reversed(indexes.clone(), size), selection.multi),
        ReturnKind::Rank => ints(ranks(items, selection), selection.multi),
        ReturnKind::ReverseRank => ints(reversed(ranks(items, selection), size), selection.multi),
        ReturnKind::Value => values(items, selection),
        ReturnKind::Key
        | ReturnKind::KeyValue
        | ReturnKind::UnorderedMap
        | ReturnKind::OrderedMap => return Err(ResultCode::OpNotApplicable),
    })
}

/// Positions counted from the end instead (`size - 1 - position`).
fn reversed(positions: Vec<usize>, size: usize) -> Vec<usize> {
    positions.into_iter().map(|p| size - 1 - p).collect()
}

/// A list of integers, or for a single result the first one (-1 when there is none).
fn ints(numbers: Vec<usize>, multi: bool) -> Value {
    match multi {
        true => Value::List(List {
            ordered: false,
            items: numbers.into_iter().map(int).collect(),
        }),
        false => numbers.first().map_or(Value::Int(-1), |&n| int(n)),
    }
}

/// The ranks of the selected elements, as the selection's rule says.
fn ranks(items: &[Value], selection: &Selection) -> Vec<usize> {
    match selection.ranks {
        RankRule::Index => selection.indexes.clone(),
        RankRule::LessCount => {
            let order = sorted_order(items);
            let rank_of = |i: usize| {
                order.partition_point(|&j| value::compare(&items[j], &items[i]) == Ordering::Less)
            };
            selection.indexes.iter().map(|&i| rank_of(i)).collect()
        }
        RankRule::SortPosition => {
            let positions = sort_positions(items);
            let mut ranks: Vec<usize> = selection.indexes.iter().map(|&i| positions[i]).collect();
            ranks.sort_unstable();
            ranks
        }
    }
}

/// The selected elements: a list (by rank or by index, as the selection says), or for a
/// single result the element (nil when there is none).
fn values(items: &[Value], selection: &Selection) -> Value {
    let mut indexes = selection.indexes.clone();
    if selection.values_by_rank {
        let positions = sort_positions(items);
        indexes.sort_unstable_by_key(|&i| positions[i]);
    }
    let mut picked = indexes.into_iter().map(|i| items[i].clone());
    match selection.multi {
        true => Value::List(List {
            ordered: false,
            items: picked.collect(),
        }),
        false => picked.next().unwrap_or(Value::Nil),
    }
}

// ---- sorting -----------------------------------------------------------------------------

/// The indexes of `items` in the stable ascending order of [`value::compare`].
fn sorted_order(items: &[Value]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    merge_sort(&mut order, |&a, &b| value::compare(&items[a], &items[b]));
    order
}

/// For each element, its position in the stable sort (its rank).
fn sort_positions(items: &[Value]) -> Vec<usize> {
    let mut positions = vec![0; items.len()];
    for (position, index) in sorted_order(items).into_iter().enumerate() {
        positions[index] = position;
    }
    positions
}

/// A stable bottom-up merge sort that never panics, whatever `order` answers.
fn merge_sort<T: Copy>(slots: &mut Vec<T>, order: impl Fn(&T, &T) -> Ordering) {
    let size = slots.len();
    let mut buffer = slots.clone();
    let mut width = 1;
    while width < size {
        let mut start = 0;
        while start < size {
            let middle = start.saturating_add(width).min(size);
            let end = start.saturating_add(width.saturating_mul(2)).min(size);
            merge(
                &slots[start..middle],
                &slots[middle..end],
                &mut buffer[start..end],
                &order,
            );
            start = end;
        }
        std::mem::swap(slots, &mut buffer);
        width = width.saturating_mul(2);
    }
}

/// Merges sorted runs `left` and `right` into `out` (their total length), `left` first on
/// ties.
fn merge<T: Copy>(left: &[T], right: &[T], out: &mut [T], order: &impl Fn(&T, &T) -> Ordering) {
    let (mut l, mut r) = (0, 0);
    for slot in out.iter_mut() {
        let take_left = match (left.get(l), right.get(r)) {
            (Some(a), Some(b)) => order(a, b) != Ordering::Greater,
            (Some(_), None) => true,
            _ => false,
        };
        if take_left {
            *slot = left[l];
            l += 1;
        } else if let Some(&b) = right.get(r) {
            *slot = b;
            r += 1;
        }
    }
}

/// Sorts `items` by [`value::compare`], stably, descending if asked.
fn sort_values(items: &mut Vec<Value>, descending: bool) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    merge_sort(&mut order, |&a, &b| {
        let ascending = value::compare(&items[a], &items[b]);
        if descending {
            ascending.reverse()
        } else {
            ascending
        }
    });
    let mut old: Vec<Option<Value>> = std::mem::take(items).into_iter().map(Some).collect();
    *items = order
        .into_iter()
        .filter_map(|i| old.get_mut(i).and_then(Option::take))
        .collect();
}

/// The position after every element not greater than `item` (sorted `items`).
fn upper_bound(items: &[Value], item: &Value) -> usize {
    items.partition_point(|x| value::compare(x, item) != Ordering::Greater)
}

/// Whether `items` holds an element equal to `item`.
fn contains(items: &[Value], item: &Value) -> bool {
    items.iter().any(|x| value::equal(x, item))
}

// ---- modifying ---------------------------------------------------------------------------

/// The list in `target`, created empty (ordered if asked) when there is none.
fn list_or_create(target: &mut Option<Value>, ordered: bool) -> Result<&mut List, ResultCode> {
    let value = target.get_or_insert_with(|| {
        Value::List(List {
            ordered,
            items: Vec::new(),
        })
    });
    match value {
        Value::List(list) => Ok(list),
        _ => Err(ResultCode::IncompatibleType),
    }
}

/// Write flags of an add, insert, set or increment.
#[derive(Clone, Copy)]
struct WriteFlags(u64);

impl WriteFlags {
    fn unique(self) -> bool {
        self.0 & FLAG_ADD_UNIQUE != 0
    }

    fn bounded(self) -> bool {
        self.0 & FLAG_INSERT_BOUNDED != 0
    }

    fn no_fail(self) -> bool {
        self.0 & FLAG_NO_FAIL != 0
    }

    /// DO_PARTIAL counts only with NO_FAIL, as in Aerospike.
    fn partial(self) -> bool {
        self.0 & (FLAG_NO_FAIL | FLAG_DO_PARTIAL) == FLAG_NO_FAIL | FLAG_DO_PARTIAL
    }

    /// A unique write met an existing element: nothing happens (`None`) under NO_FAIL, else
    /// ELEMENT_EXISTS.
    fn exists<T>(self) -> Result<Option<T>, ResultCode> {
        match self.no_fail() {
            true => Ok(None),
            false => Err(ResultCode::ElementExists),
        }
    }
}

/// SET_TYPE `[flags]`: makes the list ordered (sorting it) or unordered; creates it when
/// missing. Returns nil.
fn set_type(args: &Args<'_>, target: &mut Option<Value>) -> Result<Value, ResultCode> {
    let flags = args.unsigned(0, 0)?;
    if flags & !(ORDER_ORDERED | ORDER_PERSIST_INDEX) != 0 {
        return Err(ResultCode::OpNotApplicable);
    }
    let ordered = flags & ORDER_ORDERED != 0;
    let list = list_or_create(target, ordered)?;
    if ordered && !list.ordered {
        sort_values(&mut list.items, false);
    }
    list.ordered = ordered;
    Ok(Value::Nil)
}

/// APPEND `[value, order?, flags?]` and APPEND_ITEMS `[items, order?, flags?]`: adds at the
/// end (an ordered list: at the sorted positions); creates the list, of the order asked, when
/// missing. Returns the new size.
fn append(code: u8, args: &Args<'_>, target: &mut Option<Value>) -> Result<Value, ResultCode> {
    let payload = match code == code::APPEND_ITEMS {
        true => args.items(0)?,
        false => std::slice::from_ref(args.value(0)?),
    };
    let order = args.flags(1)?;
    let flags = WriteFlags(args.flags(2)?);
    let list = list_or_create(target, order & ORDER_ORDERED != 0)?;
    if !list.ordered {
        let end = list.items.len() as i64;
        return insert_at(list, end, payload, flags);
    }
    match code == code::APPEND_ITEMS {
        true => add_items_ordered(list, payload, flags),
        false => add_ordered(list, args.value(0)?, flags),
    }
}

/// INSERT `[index, value, flags?]` and INSERT_ITEMS `[index, items, flags?]`: not for
/// ordered lists. Returns the new size.
fn insert(code: u8, args: &Args<'_>, target: &mut Option<Value>) -> Result<Value, ResultCode> {
    let index = args.int(0)?;
    let payload = match code == code::INSERT_ITEMS {
        true => args.items(1)?,
        false => std::slice::from_ref(args.value(1)?),
    };
    let flags = WriteFlags(args.flags(2)?);
    let list = list_or_create(target, false)?;
    if list.ordered {
        return Err(ResultCode::OpNotApplicable);
    }
    insert_at(list, index, payload, flags)
}

/// The position an insert at `index` writes to in a list of `size` (may be past the end).
fn insert_position(size: usize, index: i64) -> Result<usize, ResultCode> {
    if index > INDEX_MAX {
        return Err(ResultCode::OpNotApplicable);
    }
    let position = if index < 0 {
        (size as i64).checked_add(index)
    } else {
        Some(index)
    };
    match position {
        Some(position) if position >= 0 => Ok(position as usize),
        _ => Err(ResultCode::OpNotApplicable),
    }
}

/// Inserts `payload` at `index` of an unordered list (Aerospike's `packed_list_insert`),
/// padding with nils past the end. Returns the new size (the old one when nothing happens).
fn insert_at(
    list: &mut List,
    index: i64,
    payload: &[Value],
    flags: WriteFlags,
) -> Result<Value, ResultCode> {
    let size = list.items.len();
    if payload.is_empty() {
        return Ok(int(size));
    }
    let at = insert_position(size, index)?;
    if flags.bounded() && at > size {
        return match flags.no_fail() {
            true => Ok(int(size)),
            false => Err(ResultCode::OpNotApplicable),
        };
    }
    let adding = match flags.unique() {
        true => match admit_unique(&list.items, payload, flags)? {
            Some(adding) => adding,
            None => return Ok(int(size)),
        },
        false => payload.iter().collect(),
    };
    if at.saturating_sub(size) > PAD_MAX {
        return Err(ResultCode::Parameter);
    }
    if at > size {
        list.items.resize(at, Value::Nil);
    }
    list.items.splice(at..at, adding.into_iter().cloned());
    Ok(int(list.items.len()))
}

/// The payload items an ADD_UNIQUE insert adds, in order; `None` when nothing happens.
///
/// # Errors
/// ELEMENT_EXISTS for an item already in the list (unless NO_FAIL or DO_PARTIAL);
/// OP_NOT_APPLICABLE for an item repeated in the payload without NO_FAIL (as Aerospike).
fn admit_unique<'p>(
    items: &[Value],
    payload: &'p [Value],
    flags: WriteFlags,
) -> Result<Option<Vec<&'p Value>>, ResultCode> {
    let mut adding = Vec::new();
    for (i, item) in payload.iter().enumerate() {
        if contains(items, item) {
            if flags.partial() {
                continue;
            }
            return flags.exists();
        }
        if contains(&payload[..i], item) {
            if !flags.no_fail() {
                return Err(ResultCode::OpNotApplicable);
            }
            if !flags.partial() {
                return Ok(None);
            }
            continue;
        }
        adding.push(item);
    }
    match adding.is_empty() {
        true => flags.exists(),
        false => Ok(Some(adding)),
    }
}

/// Adds `item` to an ordered list at its sorted position. Returns the new size.
fn add_ordered(list: &mut List, item: &Value, flags: WriteFlags) -> Result<Value, ResultCode> {
    let size = list.items.len();
    if flags.unique() && contains(&list.items, item) {
        return flags.exists::<()>().map(|_| int(size));
    }
    let at = upper_bound(&list.items, item);
    list.items.insert(at, item.clone());
    Ok(int(list.items.len()))
}

/// Adds `payload` to an ordered list (Aerospike's `packed_list_add_items_ordered`). Returns
/// the new size (the old one when nothing happens).
fn add_items_ordered(
    list: &mut List,
    payload: &[Value],
    flags: WriteFlags,
) -> Result<Value, ResultCode> {
    let size = list.items.len();
    let mut order: Vec<usize> = (0..payload.len()).collect();
    merge_sort(&mut order, |&a, &b| {
        value::compare(&payload[a], &payload[b])
    });
    let mut sorted: Vec<&Value> = order.into_iter().map(|i| &payload[i]).collect();
    if flags.unique() {
        let before = sorted.len();
        sorted.dedup_by(|later, earlier| value::equal(later, earlier));
        if sorted.len() != before {
            if !flags.no_fail() {
                return Err(ResultCode::OpNotApplicable);
            }
            if !flags.partial() {
                return Ok(int(size));
            }
        }
    }
    let mut adding = Vec::with_capacity(sorted.len());
    for item in sorted {
        if flags.unique() && contains(&list.items, item) {
            if flags.partial() {
                continue;
            }
            return flags.exists::<()>().map(|_| int(size));
        }
        adding.push(item);
    }
    merge_into(&mut list.items, adding);
    Ok(int(list.items.len()))
}

/// Merges sorted `adding` into sorted `items`, each after the elements equal to it.
fn merge_into(items: &mut Vec<Value>, adding: Vec<&Value>) {
    let old = std::mem::take(items);
    items.reserve(old.len() + adding.len());
    let mut old = old.into_iter().peekable();
    for item in adding {
        while let Some(x) = old.next_if(|x| value::compare(x, item) != Ordering::Greater) {
            items.push(x);
        }
        items.push(item.clone());
    }
    items.extend(old);
}

/// SET `[index, value, flags?]`: not for ordered lists; past the end it inserts (padding).
/// Returns nil.
fn set(args: &Args<'_>, target: &mut Option<Value>) -> Result<Value, ResultCode> {
    let index = args.int(0)?;
    let item = args.value(1)?;
    let flags = WriteFlags(args.flags(2)?);
    let list = list_or_create(target, false)?;
    if list.ordered {
        return Err(ResultCode::OpNotApplicable);
    }
    set_at(list, index, item, flags)?;
    Ok(Value::Nil)
}

/// Replaces the element at `index` of an unordered list (Aerospike's `list_set`).
fn set_at(list: &mut List, index: i64, item: &Value, flags: WriteFlags) -> Result<(), ResultCode> {
    let size = list.items.len();
    if index >= size as i64 {
        insert_at(list, index, std::slice::from_ref(item), flags)?;
        return Ok(());
    }
    let at = match index < 0 {
        true => size as i64 + index,
        false => index,
    };
    let at = usize::try_from(at).map_err(|_| ResultCode::OpNotApplicable)?;
    if flags.unique() {
        let elsewhere = list
            .items
            .iter()
            .enumerate()
            .any(|(i, x)| i != at && value::equal(x, item));
        if elsewhere {
            return flags.exists::<()>().map(|_| ());
        }
    }
    list.items[at] = item.clone();
    Ok(())
}

/// An increment's delta: an integer, a double, or none given (1).
#[derive(Clone, Copy)]
enum Delta {
    One,
    Int(i64),
    Float(f64),
}

impl Delta {
    /// The delta argument (absent or nil: 1).
    fn parse(argument: Option<&Value>) -> Result<Delta, ResultCode> {
        match argument {
            None | Some(Value::Nil) => Ok(Delta::One),
            Some(Value::Int(delta)) => Ok(Delta::Int(*delta)),
            Some(Value::Float(delta)) => Ok(Delta::Float(*delta)),
            Some(_) => Err(ResultCode::Parameter),
        }
    }

    /// `current` plus the delta, of `current`'s type (Aerospike's `cdt_calc_delta_add`: an
    /// integer plus a double adds the double truncated; integers wrap); no element: the delta.
    fn apply(self, current: Option<&Value>) -> Result<Value, ResultCode> {
        Ok(match (current, self) {
            (Some(Value::Int(x)), Delta::One) => Value::Int(x.wrapping_add(1)),
            (Some(Value::Int(x)), Delta::Int(d)) => Value::Int(x.wrapping_add(d)),
            (Some(Value::Int(x)), Delta::Float(d)) => Value::Int(x.wrapping_add(d as i64)),
            (Some(Value::Float(x)), Delta::One) => Value::Float(x + 1.0),
            (Some(Value::Float(x)), Delta::Int(d)) => Value::Float(x + d as f64),
            (Some(Value::Float(x)), Delta::Float(d)) => Value::Float(x + d),
            (Some(_), _) => return Err(ResultCode::Parameter),
            (None, Delta::One) => Value::Int(1),
            (None, Delta::Int(d)) => Value::Int(d),
            (None, Delta::Float(d)) => Value::Float(d),
        })
    }
}

/// INCREMENT `[index, delta?, order?, flags?]`: adds the delta to the number at `index` (past
/// the end: stores the delta there); creates the list, of the order asked, when missing.
/// Returns the new value.
fn increment(args: &Args<'_>, target: &mut Option<Value>) -> Result<Value, ResultCode> {
    let index = args.int(0)?;
    let delta = Delta::parse(args.0.get(1))?;
    let order = args.flags(2)?;
    let flags = WriteFlags(args.flags(3)?);
    let list = list_or_create(target, order & ORDER_ORDERED != 0)?;
    let at = insert_position(list.items.len(), index)?;
    let updated = delta.apply(list.items.get(at))?;
    match list.ordered {
        true => replace_ordered(list, at, &updated, flags)?,
        false => set_at(list, at as i64, &updated, flags)?,
    }
    Ok(updated)
}

/// Replaces the element at `at` of an ordered list with `item`, at its sorted position
/// (Aerospike's `packed_list_replace_ordered`); `at` may be the size (an add).
fn replace_ordered(
    list: &mut List,
    at: usize,
    item: &Value,
    flags: WriteFlags,
) -> Result<(), ResultCode> {
    let size = list.items.len();
    if at > size {
        return Err(ResultCode::OpNotApplicable);
    }
    if flags.unique()
        && let Some(found) = list.items.iter().position(|x| value::equal(x, item))
    {
        if found == at {
            return Ok(());
        }
        return flags.exists::<()>().map(|_| ());
    }
    if at < size {
        list.items.remove(at);
    }
    let position = upper_bound(&list.items, item);
    list.items.insert(position, item.clone());
    Ok(())
}

/// SORT `[flags?]`: sorts an unordered list (descending if asked), dropping duplicates if
/// asked; a missing list is INCOMPATIBLE_TYPE, as in Aerospike. Returns nil.
fn sort(args: &Args<'_>, target: &mut Option<Value>) -> Result<Value, ResultCode> {
    let flags = args.flags(0)?;
    let Some(Value::List(list)) = target else {
        return Err(ResultCode::IncompatibleType);
    };
    if list.items.len() <= 1 {
        return Ok(Value::Nil);
    }
    if !list.ordered {
        sort_values(&mut list.items, flags & SORT_DESCENDING != 0);
    }
    if flags & SORT_DROP_DUPLICATES != 0 {
        list.items
            .dedup_by(|later, earlier| value::equal(later, earlier));
    }
    Ok(Value::Nil)
}

/// CLEAR: empties the list (keeping its order); nothing for a missing one. Returns nil.
fn clear(target: &mut Option<Value>) -> Result<Value, ResultCode> {
    if let Some(Value::List(list)) = target {
        list.items.clear();
    }
    Ok(Value::Nil)
}

/// POP*, REMOVE*, TRIM and REMOVE_BY_*: removes the selected elements and returns what the
/// op asks for; nothing (nil) for a missing list.
fn remove_selected(
    code: u8,
    args: &Args<'_>,
    target: &mut Option<Value>,
) -> Result<Value, ResultCode> {
    let request = Request::parse(code, args.0)?;
    let Some(Value::List(list)) = target else {
        return Ok(Value::Nil);
    };
    let selection = select(list, &request)?;
    let result = shape(&list.items, &selection, request.returns.kind)?;
    remove_indexes(&mut list.items, &selection.indexes);
    Ok(result)
}

/// Removes the elements at `indexes` (ascending).
fn remove_indexes(items: &mut Vec<Value>, indexes: &[usize]) {
    if indexes.is_empty() {
        return;
    }
    let mut doomed = indexes.iter().peekable();
    let mut position = 0;
    items.retain(|_| {
        let remove = doomed.next_if_eq(&&position).is_some();
        position += 1;
        !remove
    });
}

#[cfg(test)]
mod tests;
