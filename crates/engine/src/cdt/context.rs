//! Contexts (`CTX`): the path from a bin's value to the nested list or map an op runs on.
//!
//! Each step names an element of the list or map reached so far: by list index, rank or
//! value, or by map index, rank, key or value. A step's type may carry create flags (list
//! index and map key only): a modify then creates the element when it is missing, as an empty
//! list or map of the order the flags name (a list index past the end pads with nils when the
//! flags say unbounded).

use model::ResultCode;

use super::value::{self, List, Map, MapOrder, Value};

const LIST_INDEX: i64 = 0x10;
const LIST_RANK: i64 = 0x11;
const LIST_VALUE: i64 = 0x13;
const MAP_INDEX: i64 = 0x20;
const MAP_RANK: i64 = 0x21;
const MAP_KEY: i64 = 0x22;
const MAP_VALUE: i64 = 0x23;
/// The create flags of a step's type.
const CREATE_MASK: i64 = 0xc0;

/// Pairs the flat `[type, value, type, value, ...]` array of a context into steps.
///
/// # Errors
/// PARAMETER for an odd count, an empty context or an unknown step type.
pub(crate) fn parse_steps(items: Vec<Value>) -> Result<Vec<(i64, Value)>, ResultCode> {
    if items.is_empty() || !items.len().is_multiple_of(2) {
        return Err(ResultCode::Parameter);
    }
    let mut steps = Vec::with_capacity(items.len() / 2);
    let mut items = items.into_iter();
    while let (Some(kind), Some(value)) = (items.next(), items.next()) {
        let kind = kind.as_int().ok_or(ResultCode::Parameter)?;
        let known = matches!(
            kind & !CREATE_MASK,
            LIST_INDEX | LIST_RANK | LIST_VALUE | MAP_INDEX | MAP_RANK | MAP_KEY | MAP_VALUE
        );
        let creates_ok =
            kind & CREATE_MASK == 0 || matches!(kind & !CREATE_MASK, LIST_INDEX | MAP_KEY);
        if !known || !creates_ok {
            return Err(ResultCode::Parameter);
        }
        steps.push((kind, value));
    }
    Ok(steps)
}

/// Whether a step walks a list (else a map).
pub(crate) fn is_list_step(step: &(i64, Value)) -> bool {
    matches!(step.0 & !CREATE_MASK, LIST_INDEX | LIST_RANK | LIST_VALUE)
}

/// An empty list (`list`) or map, of the order a create step's flags name: for a list 0xc0
/// ordered, else unordered; for a map 0x80 by key, 0xc0 by key and value, else unordered.
pub(crate) fn empty(list: bool, create_flags: i64) -> Value {
    let flags = create_flags & CREATE_MASK;
    match list {
        true => Value::List(List {
            ordered: flags == 0xc0,
            items: Vec::new(),
        }),
        false => Value::Map(Map {
            order: match flags {
                0x80 => MapOrder::KeyOrdered,
                0xc0 => MapOrder::KeyValueOrdered,
                _ => MapOrder::Unordered,
            },
            entries: Vec::new(),
        }),
    }
}

/// The element `steps` reach in `top`; `None` when a step finds no element.
///
/// # Errors
/// INCOMPATIBLE_TYPE when a step meets a value that is not of its family (a list step on a
/// map, or on a scalar).
pub(crate) fn reach<'v>(
    top: &'v Value,
    steps: &[(i64, Value)],
) -> Result<Option<&'v Value>, ResultCode> {
    let mut current = top;
    for (kind, key) in steps {
        let position = match position(current, *kind, key)? {
            Some(position) => position,
            None => return Ok(None),
        };
        current = match current {
            Value::List(list) => &list.items[position],
            Value::Map(map) => &map.entries[position].1,
            _ => unreachable!("position checked the family"),
        };
    }
    Ok(Some(current))
}

/// The element `steps` reach in `top`, created on the way where a step's flags allow, and
/// the path to it: the position of each step's element in its list or map (for [`settle`]).
///
/// # Errors
/// As [`reach`]; ELEMENT_NOT_FOUND (OP_NOT_APPLICABLE for a list index out of bounds) when
/// a step finds nothing and may not create it.
/// A created element is a list or a map as the next step (or, after the last, the op:
/// `op_on_list`) needs, of the order the creating step's flags name.
pub(crate) fn reach_mut<'v>(
    top: &'v mut Value,
    steps: &[(i64, Value)],
    op_on_list: bool,
) -> Result<(&'v mut Value, Vec<usize>), ResultCode> {
    let mut current = top;
    let mut path = Vec::with_capacity(steps.len());
    for (at, (kind, key)) in steps.iter().enumerate() {
        let found = position(current, *kind, key)?;
        let child_is_list = steps.get(at + 1).map_or(op_on_list, is_list_step);
        let position = match found {
            Some(position) => position,
            None => create(current, *kind, key, empty(child_is_list, *kind))?,
        };
        path.push(position);
        current = match current {
            Value::List(list) => &mut list.items[position],
            Value::Map(map) => &mut map.entries[position].1,
            _ => unreachable!("position checked the family"),
        };
    }
    Ok((current, path))
}

/// After an op changed the element at the end of `path` (from [`reach_mut`]), moves each
/// changed element of an ordered list on the way, deepest first, to where the list's order
/// now puts it, as Aerospike's `cdt_context_unwind_list` (`particle_list.c`) does: an
/// element still in order (its new value's lower bound among the list as it was is its own
/// position or the next) stays; else it moves before the first element not less than it.
/// A created element, put at the end of an ordered list, so lands in order too. Maps need
/// nothing: a value change never moves a key.
pub(crate) fn settle(top: &mut Value, path: &[usize]) {
    let Some((&at, rest)) = path.split_first() else {
        return;
    };
    match top {
        Value::List(list) => {
            settle(&mut list.items[at], rest);
            if list.ordered {
                reorder_one(&mut list.items, at);
            }
        }
        Value::Map(map) => settle(&mut map.entries[at].1, rest),
        _ => {}
    }
}

/// Moves `items[at]` of an otherwise sorted list to its place (see [`settle`]).
fn reorder_one(items: &mut Vec<Value>, at: usize) {
    let changed = &items[at];
    // Its lower bound among the others, counted as `cdt_context_unwind_list` counts it
    // among the list as it was, whose element at `at` sorted between its neighbours.
    let before = items[..at].partition_point(|item| value::compare(item, changed).is_lt());
    let after = items[at + 1..].partition_point(|item| value::compare(item, changed).is_lt());
    if before < at {
        let element = items.remove(at);
        items.insert(before, element);
    } else if after > 0 {
        let element = items.remove(at);
        items.insert(at + after, element);
    }
}

/// Where in `collection` a step's element is.
fn position(collection: &Value, kind: i64, key: &Value) -> Result<Option<usize>, ResultCode> {
    match (kind & !CREATE_MASK, collection) {
        (LIST_INDEX, Value::List(list)) => Ok(wrap_index(key, list.items.len())?),
        (LIST_RANK, Value::List(list)) => {
            let rank = wrap_index(key, list.items.len())?;
            Ok(rank.map(|rank| by_rank(list.items.iter(), rank)))
        }
        (LIST_VALUE, Value::List(list)) => {
            Ok(list.items.iter().position(|item| value::equal(item, key)))
        }
        (MAP_INDEX, Value::Map(map)) => {
            let index = wrap_index(key, map.entries.len())?;
            Ok(index.map(|index| by_key_index(map, index)))
        }
        (MAP_RANK, Value::Map(map)) => {
            let rank = wrap_index(key, map.entries.len())?;
            Ok(rank.map(|rank| by_rank(map.entries.iter().map(|(_, v)| v), rank)))
        }
        (MAP_KEY, Value::Map(map)) => Ok(map
            .entries
            .iter()
            .position(|(k, _)| value::compare(k, key).is_eq())),
        (MAP_VALUE, Value::Map(map)) => {
            Ok(map.entries.iter().position(|(_, v)| value::equal(v, key)))
        }
        _ => Err(ResultCode::IncompatibleType),
    }
}

/// An index as Aerospike counts it (negative from the end), within `len`; `None` outside.
fn wrap_index(key: &Value, len: usize) -> Result<Option<usize>, ResultCode> {
    let index = key.as_int().ok_or(ResultCode::Parameter)?;
    let wrapped = if index < 0 {
        i64::try_from(len).map_or(-1, |len| len + index)
    } else {
        index
    };
    Ok(usize::try_from(wrapped).ok().filter(|&i| i < len))
}

/// The position of the element of `rank` (0: the smallest; equal values by position).
fn by_rank<'v>(values: impl Iterator<Item = &'v Value>, rank: usize) -> usize {
    let mut order: Vec<(usize, &Value)> = values.enumerate().collect();
    order.sort_by(|(i, a), (j, b)| value::compare(a, b).then(i.cmp(j)));
    order[rank].0
}

/// The position of the map entry of `index`: indexes count in key order, for an unordered
/// map too (which is kept in insertion order).
fn by_key_index(map: &Map, index: usize) -> usize {
    if map.order.is_key_sorted() {
        return index;
    }
    let mut order: Vec<usize> = (0..map.entries.len()).collect();
    order.sort_by(|&i, &j| value::compare(&map.entries[i].0, &map.entries[j].0));
    order[index]
}

/// Creates the element a create step names (`fresh`); returns its position.
fn create(
    collection: &mut Value,
    kind: i64,
    key: &Value,
    fresh: Value,
) -> Result<usize, ResultCode> {
    let flags = kind & CREATE_MASK;
    match (kind & !CREATE_MASK, collection) {
        (LIST_INDEX, Value::List(list)) if flags != 0 => create_in_list(list, flags, key, fresh),
        (MAP_KEY, Value::Map(map)) if flags != 0 => Ok(insert_in_map(map, key.clone(), fresh)),
        (LIST_INDEX, _) => Err(ResultCode::OpNotApplicable),
        _ => Err(ResultCode::ElementNotFound),
    }
}

/// Appends `fresh` where a list-index create step asks: at the end (index -1 of an empty
/// list, or the length), or past it, padded with nils, when unbounded (0x80); an ordered
/// list takes it at the end.
fn create_in_list(
    list: &mut List,
    flags: i64,
    key: &Value,
    fresh: Value,
) -> Result<usize, ResultCode> {
    let index = key.as_int().ok_or(ResultCode::Parameter)?;
    let len = list.items.len() as i64;
    let at = match index {
        -1 if len == 0 => 0,
        index if index == len => len,
        index if index > len && list.ordered => len,
        index if index > len && flags == 0x80 => index,
        _ => return Err(ResultCode::OpNotApplicable),
    };
    let at = usize::try_from(at).map_err(|_| ResultCode::OpNotApplicable)?;
    list.items.resize(at, Value::Nil);
    list.items.push(fresh);
    Ok(at)
}

/// Inserts an entry where the map's order puts it (at the end when unordered).
fn insert_in_map(map: &mut Map, key: Value, entry: Value) -> usize {
    let position = match map.order.is_key_sorted() {
        false => map.entries.len(),
        true => map
            .entries
            .partition_point(|(k, _)| value::compare(k, &key).is_lt()),
    };
    map.entries.insert(position, (key, entry));
    position
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: Vec<Value>) -> Value {
        Value::List(List {
            ordered: false,
            items,
        })
    }

    #[test]
    fn steps_reach_nested_elements_by_index_rank_and_key() {
        let inner = list(vec![Value::Int(5), Value::Int(1)]);
        let map = Value::Map(Map {
            order: MapOrder::Unordered,
            entries: vec![(Value::string(b"a"), inner)],
        });
        let top = list(vec![Value::Int(0), map]);
        let steps = vec![
            (LIST_INDEX, Value::Int(-1)),
            (MAP_KEY, Value::string(b"a")),
            (LIST_RANK, Value::Int(0)),
        ];
        let found = reach(&top, &steps).unwrap().unwrap();
        assert_eq!(found.as_int(), Some(1));
        let missing = vec![(LIST_INDEX, Value::Int(7))];
        assert!(reach(&top, &missing).unwrap().is_none());
        let wrong_family = vec![(MAP_KEY, Value::Int(0))];
        assert_eq!(
            reach(&top, &wrong_family).unwrap_err(),
            ResultCode::IncompatibleType
        );
    }

    #[test]
    fn create_flags_make_missing_elements_and_plain_steps_do_not() {
        let mut top = Value::Map(Map::default());
        let plain = vec![(MAP_KEY, Value::string(b"x"))];
        assert_eq!(
            reach_mut(&mut top, &plain, true).unwrap_err(),
            ResultCode::ElementNotFound
        );
        let create = vec![
            (MAP_KEY | 0x80, Value::string(b"x")),
            (LIST_INDEX | 0x80, Value::Int(2)),
        ];
        let (created, path) = reach_mut(&mut top, &create, true).unwrap();
        assert!(matches!(created, Value::List(_)));
        assert_eq!(path, [0, 2], "the positions the steps took");
        // The key's new element is a list (the next step walks a list), padded to index 2.
        let Value::Map(map) = &top else {
            panic!("a map")
        };
        let Value::List(inner) = &map.entries[0].1 else {
            panic!("a list")
        };
        assert_eq!(inner.items.len(), 3);
        assert!(matches!(inner.items[0], Value::Nil));
    }
}
