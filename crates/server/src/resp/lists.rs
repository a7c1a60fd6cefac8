//! List commands. A list is a native double-ended queue of elements, shown to Aerospike
//! clients as one LIST bin named `list` (see `docs/internals/redis-mapping.md`).
//!
//! Pushes and pops change the stored deque in place: O(1) per element, as in Redis, however
//! long the list. Commands answer with Redis 7.2's replies and error texts, and check their
//! arguments in Redis's order (so an argument error wins over WRONGTYPE where Redis's does).

use std::collections::VecDeque;

use model::ParticleType;
use wire_resp::Args;

use super::collection::{self, Change, Collection, Failure, finish};
use super::commands::Command;
use super::keys::{self, Target};
use super::msgpack::{self, Reader};
use super::reply::Reply;
use super::{After, Session};

/// The list commands, with Redis's arities.
pub const COMMANDS: &[Command] = &[
    ("lindex", 3, lindex),
    ("linsert", 5, linsert),
    ("llen", 2, llen),
    ("lpop", -2, |s, a, r| pop(s, a, r, End::Head)),
    ("lpos", -3, lpos),
    ("lpush", -3, |s, a, r| push(s, a, r, End::Head, false)),
    ("lpushx", -3, |s, a, r| push(s, a, r, End::Head, true)),
    ("lrange", 4, lrange),
    ("lrem", 4, lrem),
    ("lset", 4, lset),
    ("ltrim", 4, ltrim),
    ("rpop", -2, |s, a, r| pop(s, a, r, End::Tail)),
    ("rpush", -3, |s, a, r| push(s, a, r, End::Tail, false)),
    ("rpushx", -3, |s, a, r| push(s, a, r, End::Tail, true)),
];

/// Redis's reply to a count that must not be negative (LPOP, RPOP).
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";

/// Bytes one element costs beyond its own bytes: its boxed slice in the deque.
const ELEMENT_OVERHEAD_BYTES: usize = 16;

/// A Redis list.
#[derive(Debug, Default)]
pub struct ListValue {
    elements: VecDeque<Box<[u8]>>,
    /// Sum of `element_size` over `elements`.
    size_bytes: usize,
}

/// Which end of a list a command works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The head (index 0): LPUSH, LPOP.
    Head,
    /// The tail (index -1): RPUSH, RPOP.
    Tail,
}

fn element_size(element: &[u8]) -> usize {
    element.len() + ELEMENT_OVERHEAD_BYTES
}

impl ListValue {
    /// Adds `element` at `end`.
    pub fn push(&mut self, end: End, element: &[u8]) {
        self.size_bytes += element_size(element);
        match end {
            End::Head => self.elements.push_front(element.into()),
            End::Tail => self.elements.push_back(element.into()),
        }
    }

    /// Appends `element` at the tail.
    pub fn push_back(&mut self, element: &[u8]) {
        self.push(End::Tail, element);
    }

    /// Removes and returns the element at `end`.
    pub fn pop(&mut self, end: End) -> Option<Box<[u8]>> {
        let element = match end {
            End::Head => self.elements.pop_front(),
            End::Tail => self.elements.pop_back(),
        }?;
        self.size_bytes -= element_size(&element);
        Some(element)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.elements.len()
    }

    /// The element at `index` (from 0 at the head).
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        self.elements.get(index).map(AsRef::as_ref)
    }

    /// Replaces the element at `index`; returns whether there is one.
    pub fn set(&mut self, index: usize, element: &[u8]) -> bool {
        let Some(slot) = self.elements.get_mut(index) else {
            return false;
        };
        self.size_bytes = self.size_bytes + element.len() - slot.len();
        *slot = element.into();
        true
    }

    /// The elements from the head.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator {
        self.elements.iter().map(AsRef::as_ref)
    }

    /// Inserts `element` at `index` (0..=len).
    fn insert(&mut self, index: usize, element: &[u8]) {
        self.size_bytes += element_size(element);
        self.elements.insert(index, element.into());
    }

    /// Removes `head` elements from the head and `tail` from the tail (at most all of them).
    fn trim(&mut self, head: usize, tail: usize) {
        let head = head.min(self.len());
        let removed: usize = self.elements.drain(..head).map(|e| element_size(&e)).sum();
        self.size_bytes -= removed;
        let keep = self.len().saturating_sub(tail);
        let removed: usize = self.elements.drain(keep..).map(|e| element_size(&e)).sum();
        self.size_bytes -= removed;
    }

    /// Removes the elements equal to `element`: the first `limit` from the head (`Head`) or
    /// the tail (`Tail`), every one when `limit` is 0. Returns how many it removed.
    fn remove(&mut self, element: &[u8], limit: usize, from: End) -> usize {
        let limit = if limit == 0 { usize::MAX } else { limit };
        // The matches removed are the first `limit` at or after position `first`: from the
        // head, `first` is 0; from the tail, it is the position of the `limit`-th match
        // counted from the tail (so exactly the last `limit` matches follow it).
        let first = match from {
            End::Head => 0,
            End::Tail => {
                let mut found = 0;
                let mut first = self.len();
                for (index, candidate) in self.elements.iter().enumerate().rev() {
                    if found == limit {
                        break;
                    }
                    if **candidate == *element {
                        found += 1;
                        first = index;
                    }
                }
                first
            }
        };
        let mut index = 0;
        let mut removed = 0;
        let mut removed_bytes = 0;
        self.elements.retain(|candidate| {
            let drop = index >= first && removed < limit && **candidate == *element;
            index += 1;
            if drop {
                removed += 1;
                removed_bytes += element_size(candidate);
            }
            !drop
        });
        self.size_bytes -= removed_bytes;
        removed
    }

    /// The LIST bin's msgpack.
    fn encoded(&self) -> Vec<u8> {
        let mut encoded = Vec::new();
        msgpack::write_array_len(&mut encoded, self.elements.len());
        for element in &self.elements {
            msgpack::write_bytes(&mut encoded, element);
        }
        encoded
    }
}

collection::native_value!(ListValue);

impl Collection for ListValue {
    const BIN: &'static [u8] = b"list";
    const PARTICLE: ParticleType = ParticleType::List;
    const TYPE_NAME: &'static str = "list";

    fn decode(value: &[u8]) -> Option<ListValue> {
        let mut reader = Reader::new(value);
        let count = reader.array_len()?;
        let mut list = ListValue::default();
        for _ in 0..count {
            list.push_back(&reader.scalar()?.to_bytes());
        }
        reader.is_done().then_some(list)
    }

    fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }
}

/// Answers `text` as an error.
fn fail(reply: &mut Reply<'_>, text: &str) -> After {
    reply.error(text);
    After::Continue
}

fn integer(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// A Redis list index (negative from the tail) as a position in a list of `len` elements.
fn position(index: i64, len: usize) -> Option<usize> {
    let len = integer(len);
    let index = if index < 0 { index + len } else { index };
    (0..len).contains(&index).then_some(index as usize)
}

/// A Redis range `start..=stop` (negative indexes from the tail) clamped to a list of `len`
/// elements, as LRANGE and LTRIM take it; `None` when it selects nothing.
fn clamp_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = integer(len);
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let stop = if stop < 0 { stop + len } else { stop };
    if start > stop || start >= len {
        return None;
    }
    Some((start as usize, stop.min(len - 1) as usize))
}

/// LPUSH/RPUSH key element [element ...], and LPUSHX/RPUSHX (`only_existing`): the length
/// after the push (0 when `only_existing` and the key does not exist).
pub fn push(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    end: End,
    only_existing: bool,
) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        !only_existing,
        |list: &mut ListValue| {
            for position in 2..args.len() {
                list.push(end, args.get(position));
            }
            Ok(Change::Changed(list.len()))
        },
    );
    finish(reply, outcome, |reply, len| {
        reply.integer(integer(len.unwrap_or(0)))
    })
}

/// LPOP/RPOP key [count]: one element as a bulk string; with a count, an array of up to
/// `count` elements (in pop order), a null array for a missing key.
pub fn pop(session: &mut Session, args: &Args, reply: &mut Reply<'_>, end: End) -> After {
    let count = match args.len() {
        2 => None,
        3 => match keys::parse_i64(args.get(2)) {
            Ok(count) if count >= 0 => Some(count as usize),
            _ => return fail(reply, NOT_POSITIVE),
        },
        _ => {
            let name = String::from_utf8_lossy(args.get(0)).to_ascii_lowercase();
            return fail(
                reply,
                &format!("ERR wrong number of arguments for '{name}' command"),
            );
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |list: &mut ListValue| {
            let Some(count) = count else {
                // A stored list is never empty.
                return Ok(Change::Changed(Popped::One(list.pop(end))));
            };
            let count = count.min(list.len());
            let popped: Vec<_> = (0..count).map_while(|_| list.pop(end)).collect();
            Ok(Change::when(count > 0, Popped::Many(popped)))
        },
    );
    finish(reply, outcome, |reply, popped| match popped {
        Some(Popped::One(Some(element))) => reply.bulk(&element),
        Some(Popped::One(None)) => reply.null(),
        Some(Popped::Many(popped)) => {
            reply.array(popped.len());
            popped.iter().for_each(|element| reply.bulk(element));
        }
        None if count.is_some() => reply.null_array(),
        None => reply.null(),
    })
}

/// What LPOP and RPOP took.
enum Popped {
    /// Without a count: the element.
    One(Option<Box<[u8]>>),
    /// With a count: the elements, in pop order.
    Many(Vec<Box<[u8]>>),
}

/// LLEN key
pub fn llen(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |list: Option<&ListValue>| {
        list.map_or(0, ListValue::len)
    });
    finish(reply, outcome, |reply, len| reply.integer(integer(len)))
}

/// Parses the two indexes of LRANGE and LTRIM (arguments 2 and 3).
fn parse_range(args: &Args) -> Result<(i64, i64), ()> {
    Ok((keys::parse_i64(args.get(2))?, keys::parse_i64(args.get(3))?))
}

/// LRANGE key start stop
pub fn lrange(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Ok((start, stop)) = parse_range(args) else {
        return fail(reply, keys::NOT_AN_INTEGER);
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    // The elements are written straight from the stored list, under its read lock; a long
    // range writes nothing and goes to the long-request pool instead.
    let outcome = collection::read(&target, |list: Option<&ListValue>| {
        let range = list.and_then(|list| Some((list, clamp_range(start, stop, list.len())?)));
        match range {
            None => reply.array(0),
            Some((_, (first, last))) if session.should_offload(last - first + 1) => {
                return After::Offload;
            }
            Some((list, (first, last))) => {
                reply.array(last - first + 1);
                list.elements
                    .range(first..=last)
                    .for_each(|element| reply.bulk(element));
            }
        }
        After::Continue
    });
    if let Ok(After::Offload) = outcome {
        return After::Offload;
    }
    finish(reply, outcome, |_, _| {})
}

/// LINDEX key index
pub fn lindex(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    // Redis looks the key up first: a missing key answers null whatever the index.
    let outcome = collection::read(&target, |list: Option<&ListValue>| {
        list.map(|list| {
            keys::parse_i64(args.get(2)).map(|index| {
                position(index, list.len())
                    .and_then(|position| list.get(position))
                    .map(<[u8]>::to_vec)
            })
        })
    });
    finish(reply, outcome, |reply, found| match found {
        None | Some(Ok(None)) => reply.null(),
        Some(Ok(Some(element))) => reply.bulk(&element),
        Some(Err(())) => reply.error(keys::NOT_AN_INTEGER),
    })
}

/// LSET key index element
pub fn lset(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |list: &mut ListValue| {
            let index = keys::parse_i64(args.get(2))
                .map_err(|()| Failure::message(keys::NOT_AN_INTEGER))?;
            let position = position(index, list.len())
                .ok_or_else(|| Failure::message("ERR index out of range"))?;
            list.set(position, args.get(3));
            Ok(Change::Changed(()))
        },
    );
    finish(reply, outcome, |reply, set| match set {
        Some(()) => reply.ok(),
        None => reply.error("ERR no such key"),
    })
}

/// LTRIM key start stop
pub fn ltrim(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Ok((start, stop)) = parse_range(args) else {
        return fail(reply, keys::NOT_AN_INTEGER);
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |list: &mut ListValue| {
            let len = list.len();
            let (head, tail) = match clamp_range(start, stop, len) {
                None => (len, 0),
                Some((first, last)) => (first, len - 1 - last),
            };
            list.trim(head, tail);
            Ok(Change::when(head + tail > 0, ()))
        },
    );
    finish(reply, outcome, |reply, _| reply.ok())
}

/// LREM key count element: removes the first `count` matches from the head (`count` > 0),
/// the last `-count` from the tail (`count` < 0), or all (0); answers how many.
pub fn lrem(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Ok(count) = keys::parse_i64(args.get(2)) else {
        return fail(reply, keys::NOT_AN_INTEGER);
    };
    let from = if count < 0 { End::Tail } else { End::Head };
    let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |list: &mut ListValue| {
            let removed = list.remove(args.get(3), limit, from);
            Ok(Change::when(removed > 0, removed))
        },
    );
    finish(reply, outcome, |reply, removed| {
        reply.integer(integer(removed.unwrap_or(0)));
    })
}

/// LINSERT key BEFORE|AFTER pivot element: the length after the insert, -1 when the pivot is
/// not in the list, 0 when the key does not exist.
pub fn linsert(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let after = match args.get(2).to_ascii_uppercase().as_slice() {
        b"AFTER" => true,
        b"BEFORE" => false,
        _ => return fail(reply, keys::SYNTAX_ERROR),
    };
    let (pivot, element) = (args.get(3), args.get(4));
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |list: &mut ListValue| {
            let Some(found) = list.iter().position(|candidate| candidate == pivot) else {
                return Ok(Change::Unchanged(-1));
            };
            list.insert(found + usize::from(after), element);
            Ok(Change::Changed(integer(list.len())))
        },
    );
    finish(reply, outcome, |reply, len| reply.integer(len.unwrap_or(0)))
}

/// LPOS's options.
#[derive(Debug)]
struct PosOptions {
    /// Which match is the first answered: 1 the first from the head, -1 the first from the
    /// tail; never 0.
    rank: i64,
    /// COUNT: how many matches to answer (0: all); `None` without COUNT (one, not an array).
    count: Option<usize>,
    /// MAXLEN: how many elements to compare at most (0: all).
    max_len: usize,
}

impl PosOptions {
    /// Parses `[RANK rank] [COUNT num-matches] [MAXLEN len]` from position 3.
    fn parse(args: &Args) -> Result<PosOptions, String> {
        let mut options = PosOptions {
            rank: 1,
            count: None,
            max_len: 0,
        };
        let mut position = 3;
        while position < args.len() {
            if position + 1 >= args.len() {
                return Err(keys::SYNTAX_ERROR.to_owned());
            }
            let value = keys::parse_i64(args.get(position + 1));
            match args.get(position).to_ascii_uppercase().as_slice() {
                b"RANK" => {
                    let rank = value.map_err(|()| keys::NOT_AN_INTEGER.to_owned())?;
                    if rank == i64::MIN {
                        return Err(format!(
                            "ERR value is out of range, value must between {} and {}",
                            -i64::MAX,
                            i64::MAX
                        ));
                    }
                    if rank == 0 {
                        return Err("ERR RANK can't be zero: use 1 to start from the first \
                                    match, 2 from the second ... or use negative to start \
                                    from the end of the list"
                            .to_owned());
                    }
                    options.rank = rank;
                }
                b"COUNT" => match value {
                    Ok(count) if count >= 0 => options.count = Some(count as usize),
                    _ => return Err("ERR COUNT can't be negative".to_owned()),
                },
                b"MAXLEN" => match value {
                    Ok(max_len) if max_len >= 0 => options.max_len = max_len as usize,
                    _ => return Err("ERR MAXLEN can't be negative".to_owned()),
                },
                _ => return Err(keys::SYNTAX_ERROR.to_owned()),
            }
            position += 2;
        }
        Ok(options)
    }

    /// The indexes (from the head) of the matches of `element` in `list` it selects.
    fn find(&self, list: &ListValue, element: &[u8]) -> Vec<usize> {
        let skip = usize::try_from(self.rank.unsigned_abs() - 1).unwrap_or(usize::MAX);
        let wanted = match self.count {
            None => 1,
            Some(0) => usize::MAX,
            Some(count) => count,
        };
        let compared = if self.max_len == 0 {
            list.len()
        } else {
            self.max_len.min(list.len())
        };
        let matches = |(_, candidate): &(usize, &[u8])| *candidate == element;
        if self.rank > 0 {
            list.iter()
                .enumerate()
                .take(compared)
                .filter(matches)
                .skip(skip)
                .take(wanted)
                .map(|(index, _)| index)
                .collect()
        } else {
            list.iter()
                .enumerate()
                .rev()
                .take(compared)
                .filter(matches)
                .skip(skip)
                .take(wanted)
                .map(|(index, _)| index)
                .collect()
        }
    }
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]: the index of the match
/// (null if none); with COUNT, an array of the matches' indexes.
pub fn lpos(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let options = match PosOptions::parse(args) {
        Ok(options) => options,
        Err(text) => return fail(reply, &text),
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |list: Option<&ListValue>| {
        list.map_or_else(Vec::new, |list| options.find(list, args.get(2)))
    });
    finish(reply, outcome, |reply, found| match options.count {
        Some(_) => {
            reply.array(found.len());
            found
                .iter()
                .for_each(|&index| reply.integer(integer(index)));
        }
        None => match found.first() {
            Some(&index) => reply.integer(integer(index)),
            None => reply.null(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::NativeValue as _;

    fn list_of(elements: &[&str]) -> ListValue {
        let mut list = ListValue::default();
        elements.iter().for_each(|e| list.push_back(e.as_bytes()));
        list
    }

    fn contents(list: &ListValue) -> Vec<String> {
        list.iter()
            .map(|e| String::from_utf8(e.to_vec()).unwrap())
            .collect()
    }

    fn exact_size(list: &ListValue) -> usize {
        list.iter().map(element_size).sum()
    }

    #[test]
    fn size_follows_every_change() {
        let mut list = ListValue::default();
        list.push(End::Head, b"bb");
        list.push(End::Tail, b"c");
        list.push(End::Head, b"aaa");
        assert_eq!(contents(&list), ["aaa", "bb", "c"]);
        assert_eq!(list.size_bytes(), exact_size(&list));
        assert!(list.set(1, b"longer"));
        assert!(!list.set(3, b"x"));
        assert_eq!(list.size_bytes(), exact_size(&list));
        list.insert(1, b"ins");
        assert_eq!(list.size_bytes(), exact_size(&list));
        assert_eq!(list.pop(End::Tail).as_deref(), Some(&b"c"[..]));
        assert_eq!(list.size_bytes(), exact_size(&list));
        list.trim(1, 1);
        assert_eq!(contents(&list), ["ins"]);
        assert_eq!(list.size_bytes(), exact_size(&list));
        assert_eq!(list.pop(End::Head).as_deref(), Some(&b"ins"[..]));
        assert_eq!(list.pop(End::Head), None);
        assert_eq!(list.size_bytes(), 0);
        assert!(list.is_empty());
    }

    #[test]
    fn remove_counts_from_either_end() {
        let mut list = list_of(&["a", "b", "a", "c", "a", "a"]);
        assert_eq!(list.remove(b"a", 2, End::Tail), 2);
        assert_eq!(contents(&list), ["a", "b", "a", "c"]);
        assert_eq!(list.remove(b"a", 1, End::Head), 1);
        assert_eq!(contents(&list), ["b", "a", "c"]);
        assert_eq!(list.remove(b"x", 0, End::Head), 0);
        assert_eq!(list.size_bytes(), exact_size(&list));
        let mut list = list_of(&["a", "b", "a", "a"]);
        assert_eq!(list.remove(b"a", 0, End::Tail), 3);
        assert_eq!(contents(&list), ["b"]);
        assert_eq!(list.size_bytes(), exact_size(&list));
        let mut list = list_of(&["a", "b", "a"]);
        assert_eq!(list.remove(b"a", 5, End::Tail), 2);
        assert_eq!(contents(&list), ["b"]);
    }

    #[test]
    fn trim_beyond_the_length_empties() {
        let mut list = list_of(&["a", "b"]);
        list.trim(5, 0);
        assert!(list.is_empty());
        assert_eq!(list.size_bytes(), 0);
        let mut list = list_of(&["a", "b"]);
        list.trim(1, 5);
        assert!(list.is_empty());
        assert_eq!(list.size_bytes(), 0);
    }

    #[test]
    fn indexes_and_ranges_follow_redis() {
        assert_eq!(position(0, 3), Some(0));
        assert_eq!(position(-1, 3), Some(2));
        assert_eq!(position(-3, 3), Some(0));
        assert_eq!(position(-4, 3), None);
        assert_eq!(position(3, 3), None);
        assert_eq!(position(i64::MIN, 3), None);
        assert_eq!(position(0, 0), None);
        assert_eq!(clamp_range(0, -1, 3), Some((0, 2)));
        assert_eq!(clamp_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(clamp_range(2, 1, 3), None);
        assert_eq!(clamp_range(3, 5, 3), None);
        assert_eq!(clamp_range(-2, -2, 3), Some((1, 1)));
        assert_eq!(clamp_range(0, -4, 3), None);
        assert_eq!(clamp_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(clamp_range(0, -1, 0), None);
    }

    #[test]
    fn lpos_ranks_counts_and_max_len() {
        let list = list_of(&["a", "b", "c", "1", "2", "3", "c", "c"]);
        let find = |rank, count, max_len| {
            PosOptions {
                rank,
                count,
                max_len,
            }
            .find(&list, b"c")
        };
        assert_eq!(find(1, None, 0), [2]);
        assert_eq!(find(2, None, 0), [6]);
        assert_eq!(find(-1, None, 0), [7]);
        assert_eq!(find(-3, None, 0), [2]);
        assert_eq!(find(-4, None, 0), Vec::<usize>::new());
        assert_eq!(find(1, Some(0), 0), [2, 6, 7]);
        assert_eq!(find(2, Some(2), 0), [6, 7]);
        assert_eq!(find(-1, Some(2), 0), [7, 6]);
        assert_eq!(find(1, Some(0), 3), [2]);
        assert_eq!(find(-1, Some(0), 2), [7, 6]);
        assert_eq!(find(1, None, 2), Vec::<usize>::new());
    }

    #[test]
    fn the_rendered_bin_decodes_to_the_same_list() {
        let mut list = list_of(&["x", "", "yz"]);
        list.push(End::Head, &[0xff, 0x00]);
        let decoded = ListValue::decode(&list.encoded()).expect("decodes");
        assert_eq!(
            decoded.iter().collect::<Vec<_>>(),
            list.iter().collect::<Vec<_>>()
        );
        assert_eq!(decoded.size_bytes(), list.size_bytes());
    }
}
