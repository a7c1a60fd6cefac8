//! SORT and SORT_RO over lists, sets and sorted sets, as Redis's `sort.c`: BY a pattern (or a
//! constant, `nosort`, which keeps the collection's order), LIMIT, GET patterns (`#`, `key`
//! with one `*`, `key->field` of a hash), ASC or DESC, ALPHA, and STORE into a list.
//!
//! Invariants:
//! - The elements are copied out under the source's read lock, and that lock is released
//!   before any other key is read: no partition lock is held while another is taken.
//! - A SORT that reads other keys (BY or GET patterns) or writes one (STORE) runs whole in the
//!   namespace's exclusive section, so the keys it reads and writes change together, as in
//!   Redis.
//! - A SORT whose work (elements times the keys each one reads) reaches
//!   [`super::LONG_COMMAND_COST_MIN`] asks for the long-request pool before it does anything.
//! - The sort is stable: elements that compare equal keep the collection's order, as the C
//!   library's merge sort keeps them for Redis.

use std::cmp::Ordering;

use wire_resp::Args;

use super::collection::{self, Failure};
use super::commands::Command;
use super::geo::isolated;
use super::hashes::HashValue;
use super::keys::{self, Target};
use super::lists::ListValue;
use super::reply::Reply;
use super::sets::SetValue;
use super::strings::{self, StringValue};
use super::zsets::{self, ZSetValue};
use super::{After, Session};

/// SORT and SORT_RO.
pub const COMMANDS: &[Command] = &[
    ("sort", -2, |s, a, r| sort(s, a, r, false)),
    ("sort_ro", -2, |s, a, r| sort(s, a, r, true)),
];

/// Redis's reply when a numeric sort meets a weight that is no number.
const NOT_A_DOUBLE: &str = "ERR One or more scores can't be converted into double";

/// A parsed SORT.
#[derive(Debug, Default)]
struct Request<'a> {
    descending: bool,
    alpha: bool,
    /// LIMIT's offset and count (count -1: all).
    offset: i64,
    count: i64,
    store: Option<&'a [u8]>,
    /// BY's pattern, when it has a `*`.
    by: Option<&'a [u8]>,
    /// BY named a constant: keep the collection's order.
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
}

impl<'a> Request<'a> {
    /// Parses the options as Redis's `sortCommandGeneric` does.
    fn parse(args: &'a Args, read_only: bool) -> Result<Request<'a>, Failure> {
        let mut request = Request {
            count: -1,
            ..Request::default()
        };
        let mut position = 2;
        while position < args.len() {
            let after = args.len() - position - 1;
            let value = |offset: usize| args.get(position + offset);
            match args.get(position).to_ascii_lowercase().as_slice() {
                b"asc" => request.descending = false,
                b"desc" => request.descending = true,
                b"alpha" => request.alpha = true,
                b"limit" if after >= 2 => {
                    let parse = |bytes| {
                        keys::parse_i64(bytes).map_err(|()| Failure::message(keys::NOT_AN_INTEGER))
                    };
                    request.offset = parse(value(1))?;
                    request.count = parse(value(2))?;
                    position += 2;
                }
                b"store" if after >= 1 && !read_only => {
                    request.store = Some(value(1));
                    position += 1;
                }
                b"by" if after >= 1 => {
                    // A constant pattern means no sort, and stays so past a later BY.
                    if value(1).contains(&b'*') {
                        request.by = Some(value(1));
                    } else {
                        request.dont_sort = true;
                    }
                    position += 1;
                }
                b"get" if after >= 1 => {
                    request.gets.push(value(1));
                    position += 1;
                }
                _ => return Err(Failure::message(keys::SYNTAX_ERROR)),
            }
            position += 1;
        }
        Ok(request)
    }

    /// Whether it reads keys other than the source or writes one.
    fn touches_other_keys(&self) -> bool {
        self.store.is_some()
            || (self.by.is_some() && !self.dont_sort)
            || self.gets.iter().any(|pattern| *pattern != b"#")
    }
}

/// The kinds of collection SORT reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    List,
    Set,
    SortedSet,
}

/// The window of a LIMIT over `len` elements, as Redis computes it: ranks `start..=end`
/// (empty when `end < start`).
fn window(len: usize, offset: i64, count: i64) -> (i64, i64) {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let mut start = offset.clamp(0, len);
    let count = count.clamp(-1, len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    (start, end.min(len - 1))
}

/// The source's elements: all of them in the collection's order, or (`range`: constant BY on
/// a list or sorted set with a LIMIT) only ranks `start..=end` from the head, or from the tail
/// when `descending`.
struct Source {
    kind: Kind,
    elements: Vec<Vec<u8>>,
    /// Whether `elements` is already the LIMIT's window, in output order.
    windowed: bool,
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC | DESC] [ALPHA]
/// [STORE destination]; SORT_RO without STORE.
fn sort(session: &mut Session, args: &Args, reply: &mut Reply<'_>, read_only: bool) -> After {
    let mut request = match Request::parse(args, read_only) {
        Ok(request) => request,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let outcome = if request.touches_other_keys() {
        isolated(session, |session| run(session, args, &mut request))
    } else {
        run(session, args, &mut request)
    };
    match outcome {
        Ok(Some(Output::Reply(values))) => {
            reply.array(values.len());
            for value in values {
                match value {
                    Some(value) => reply.bulk(&value),
                    None => reply.null(),
                }
            }
            After::Continue
        }
        Ok(Some(Output::Stored(count))) => {
            reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
            After::Continue
        }
        Ok(None) => After::Offload,
        Err(failure) => {
            failure.reply(reply);
            After::Continue
        }
    }
}

/// What a SORT answers.
enum Output {
    /// The values to reply, null where a GET found nothing.
    Reply(Vec<Option<Vec<u8>>>),
    /// How many values STORE stored.
    Stored(usize),
}

/// Reads, sorts, and answers or stores; `None` when it should run on the long-request pool.
fn run(
    session: &mut Session,
    args: &Args,
    request: &mut Request<'_>,
) -> Result<Option<Output>, Failure> {
    let Some(source) = load(session, args.get(1), request)? else {
        return Ok(None);
    };
    let (elements, start, end) = ordered(session, request, source)?;
    let chosen = elements
        .get(usize::try_from(start).unwrap_or(0)..usize::try_from(end + 1).unwrap_or(0))
        .unwrap_or_default();
    let mut values = Vec::with_capacity(chosen.len() * request.gets.len().max(1));
    for element in chosen {
        if request.gets.is_empty() {
            values.push(Some(element.clone()));
        }
        for pattern in &request.gets {
            values.push(lookup(session, pattern, element));
        }
    }
    let Some(destination) = request.store else {
        return Ok(Some(Output::Reply(values)));
    };
    store(session, destination, values).map(|count| Some(Output::Stored(count)))
}

/// The elements in output order, with the window to output (`start..=end`).
///
/// # Errors
/// A numeric sort that meets a weight that is no number.
fn ordered(
    session: &Session,
    request: &Request<'_>,
    source: Source,
) -> Result<(Vec<Vec<u8>>, i64, i64), Failure> {
    let Source {
        kind,
        mut elements,
        windowed,
    } = source;
    if windowed {
        let len = i64::try_from(elements.len()).unwrap_or(i64::MAX);
        return Ok((elements, 0, len - 1));
    }
    let (start, end) = window(elements.len(), request.offset, request.count);
    if request.dont_sort {
        // A set in its iteration order (a list or sorted set is loaded as its window), or a
        // missing key.
        debug_assert!(
            kind != Kind::SortedSet,
            "a sorted set is loaded as its window"
        );
        return Ok((elements, start, end));
    }
    let weights = weights_of(session, request, &elements)?;
    let mut order: Vec<usize> = (0..elements.len()).collect();
    order.sort_by(|&a, &b| {
        let ordering = compare(
            request,
            &weights[a],
            &weights[b],
            &elements[a],
            &elements[b],
        );
        if request.descending {
            ordering.reverse()
        } else {
            ordering
        }
    });
    let mut sorted = Vec::with_capacity(elements.len());
    for position in order {
        sorted.push(std::mem::take(&mut elements[position]));
    }
    Ok((sorted, start, end))
}

/// What an element is sorted by.
#[derive(Debug)]
enum Weight {
    /// A number (a missing BY key counts 0).
    Number(f64),
    /// ALPHA BY a pattern: the value found, or nothing.
    Text(Option<Vec<u8>>),
    /// ALPHA without BY: the element itself.
    Element,
}

/// Each element's weight.
///
/// # Errors
/// [`NOT_A_DOUBLE`] when a numeric sort meets a weight that is no number.
fn weights_of(
    session: &Session,
    request: &Request<'_>,
    elements: &[Vec<u8>],
) -> Result<Vec<Weight>, Failure> {
    let mut weights = Vec::with_capacity(elements.len());
    let mut not_a_number = false;
    for element in elements {
        let found = request.by.map(|pattern| lookup(session, pattern, element));
        let weight = match (request.alpha, found) {
            (true, Some(found)) => Weight::Text(found),
            (true, None) => Weight::Element,
            (false, Some(None)) => Weight::Number(0.0),
            (false, Some(Some(value))) => number(&value, &mut not_a_number),
            (false, None) => number(element, &mut not_a_number),
        };
        weights.push(weight);
    }
    if not_a_number {
        return Err(Failure::message(NOT_A_DOUBLE));
    }
    Ok(weights)
}

fn number(bytes: &[u8], not_a_number: &mut bool) -> Weight {
    let parsed = sort_number(bytes);
    *not_a_number |= parsed.is_none();
    Weight::Number(parsed.unwrap_or(0.0))
}

/// A weight as Redis's SORT reads one (`strtod` that must reach the end): leading white space
/// is allowed, the empty text is 0; no NaN, nothing out of a double's range.
fn sort_number(bytes: &[u8]) -> Option<f64> {
    if bytes.is_empty() {
        return Some(0.0);
    }
    let start = bytes
        .iter()
        .position(|byte| !matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    zsets::parse_score(&bytes[start..])
}

/// Redis's `sortCompare` in ascending order.
fn compare(
    request: &Request<'_>,
    weight_a: &Weight,
    weight_b: &Weight,
    element_a: &[u8],
    element_b: &[u8],
) -> Ordering {
    match (weight_a, weight_b) {
        // Equal numbers fall back to the elements' bytes, so the order is deterministic.
        (Weight::Number(a), Weight::Number(b)) => a
            .partial_cmp(b)
            .unwrap_or(Ordering::Equal)
            .then_with(|| element_a.cmp(element_b)),
        // A missing value sorts first.
        (Weight::Text(a), Weight::Text(b)) => match (a, b) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(a), Some(b)) => a.cmp(b),
        },
        _ => {
            debug_assert!(request.alpha && request.by.is_none());
            element_a.cmp(element_b)
        }
    }
}

/// Copies the source's elements out under its read lock, or `None` when the work is long
/// enough for the long-request pool.
///
/// # Errors
/// WRONGTYPE when the key holds a type SORT cannot sort; an engine failure.
fn load(
    session: &Session,
    key: &[u8],
    request: &mut Request<'_>,
) -> Result<Option<Source>, Failure> {
    let target = Target::of(&session.state, session.database, key);
    // Each element reads the BY key and each GET key.
    let keys_per_element = 1 + usize::from(request.by.is_some()) + request.gets.len();
    let long = |len: usize| session.should_offload(len.saturating_mul(keys_per_element));
    let list = collection::read(&target, |list: Option<&ListValue>| {
        let list = list?;
        Some((!long(list.len())).then(|| list_elements(list, request)))
    });
    match list {
        Ok(None) => return Ok(Some(empty_list())),
        Ok(Some(elements)) => return Ok(elements),
        Err(Failure::WrongType) => {}
        Err(failure) => return Err(failure),
    }
    let set = collection::read(&target, |set: Option<&SetValue>| {
        let set = set?;
        Some((!long(set.len())).then(|| set.iter().map(<[u8]>::to_vec).collect::<Vec<_>>()))
    });
    match set {
        Ok(Some(Some(elements))) => {
            if request.dont_sort && (request.store.is_some() || session.in_script) {
                // Redis sorts a set it stores, or answers to a script, so the stored order
                // and the script's reply (replicated as the script) do not depend on how the
                // set is laid out.
                request.dont_sort = false;
                request.alpha = true;
                request.by = None;
            }
            return Ok(Some(Source {
                kind: Kind::Set,
                elements,
                windowed: false,
            }));
        }
        Ok(Some(None)) => return Ok(None),
        Ok(None) => return Ok(Some(empty_list())),
        Err(Failure::WrongType) => {}
        Err(failure) => return Err(failure),
    }
    let zset = collection::read(&target, |zset: Option<&ZSetValue>| {
        let zset = zset?;
        Some((!long(zset.len())).then(|| zset_elements(zset, request)))
    })?;
    Ok(zset.unwrap_or_else(|| Some(empty_list())))
}

fn empty_list() -> Source {
    Source {
        kind: Kind::List,
        elements: Vec::new(),
        windowed: false,
    }
}

/// A list's elements: with a constant BY, its LIMIT window, from the tail when DESC.
fn list_elements(list: &ListValue, request: &Request<'_>) -> Source {
    if !request.dont_sort {
        return Source {
            kind: Kind::List,
            elements: list.iter().map(<[u8]>::to_vec).collect(),
            windowed: false,
        };
    }
    let (start, end) = window(list.len(), request.offset, request.count);
    let skip = usize::try_from(start).unwrap_or(0);
    let take = usize::try_from(end - start + 1).unwrap_or(0);
    let elements = if request.descending {
        list.iter()
            .rev()
            .skip(skip)
            .take(take)
            .map(<[u8]>::to_vec)
            .collect()
    } else {
        list.iter()
            .skip(skip)
            .take(take)
            .map(<[u8]>::to_vec)
            .collect()
    };
    Source {
        kind: Kind::List,
        elements,
        windowed: true,
    }
}

/// A sorted set's members: with a constant BY, its LIMIT window in score order (reversed when
/// DESC); otherwise all of them.
fn zset_elements(zset: &ZSetValue, request: &Request<'_>) -> Source {
    if !request.dont_sort {
        return Source {
            kind: Kind::SortedSet,
            elements: zset.iter().map(|entry| entry.member().to_vec()).collect(),
            windowed: false,
        };
    }
    let len = zset.len();
    let (start, end) = window(len, request.offset, request.count);
    let mut elements = Vec::new();
    if end >= start {
        let (first, last) = (
            usize::try_from(start).unwrap_or(0),
            usize::try_from(end).unwrap_or(0),
        );
        let (first, last) = if request.descending {
            (len - 1 - last, len - 1 - first)
        } else {
            (first, last)
        };
        let mut entries = zset.by_rank(first, last);
        if request.descending {
            entries.reverse();
        }
        elements = entries
            .into_iter()
            .map(|entry| entry.member().to_vec())
            .collect();
    }
    Source {
        kind: Kind::SortedSet,
        elements,
        windowed: true,
    }
}

/// The value a pattern names for `element` (Redis's `lookupKeyByPattern`): `#` is the
/// element; otherwise the first `*` is replaced by the element and the key read, a string,
/// or with `->field` after the `*` a hash's field. Nothing when the pattern has no `*`, the
/// key is missing, or it holds another type.
fn lookup(session: &Session, pattern: &[u8], element: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(element.to_vec());
    }
    let star = pattern.iter().position(|&byte| byte == b'*')?;
    let after_star = &pattern[star + 1..];
    let (suffix, field) = match after_star.windows(2).position(|pair| pair == b"->") {
        Some(arrow) if arrow + 2 < after_star.len() => {
            (&after_star[..arrow], Some(&after_star[arrow + 2..]))
        }
        _ => (after_star, None),
    };
    let mut key = Vec::with_capacity(star + element.len() + suffix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(suffix);
    let target = Target::of(&session.state, session.database, &key);
    match field {
        Some(field) => collection::read(&target, |hash: Option<&HashValue>| {
            hash.and_then(|hash| hash.get(field)).map(<[u8]>::to_vec)
        })
        .ok()
        .flatten(),
        None => target
            .read(|current| current.and_then(|current| strings::string_of(&current).ok()))
            .ok()
            .flatten()
            .map(|value| match value {
                StringValue::Bytes(bytes) => bytes,
                StringValue::Integer(value) => value.to_string().into_bytes(),
            }),
    }
}

/// Stores the values as a list at `destination` (a missing value as the empty string),
/// replacing what was there, with no expiry; deletes `destination` when there are none.
fn store(
    session: &mut Session,
    destination: &[u8],
    values: Vec<Option<Vec<u8>>>,
) -> Result<usize, Failure> {
    let count = values.len();
    let mut list = ListValue::default();
    for value in values {
        list.push_back(&value.unwrap_or_default());
    }
    collection::store_replacing(session, destination, Box::new(list), count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_windows_follow_redis() {
        assert_eq!(window(5, 0, -1), (0, 4));
        assert_eq!(window(5, 1, 2), (1, 2));
        assert_eq!(window(5, -3, 2), (0, 1));
        assert_eq!(window(5, 3, 100), (3, 4));
        assert_eq!(window(5, 10, 2), (4, 3));
        assert_eq!(window(5, 0, 0), (0, -1));
        assert_eq!(window(0, 0, -1), (-1, -2));
        assert_eq!(window(5, i64::MAX, i64::MAX), (4, 3));
    }

    #[test]
    fn weights_read_as_strtod_to_the_end() {
        assert_eq!(sort_number(b""), Some(0.0));
        assert_eq!(sort_number(b" 3.5"), Some(3.5));
        assert_eq!(sort_number(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_number(b"  "), None);
        assert_eq!(sort_number(b"3 "), None);
        assert_eq!(sort_number(b"nan"), None);
        assert_eq!(sort_number(b"1e400"), None);
        assert_eq!(sort_number(b"abc"), None);
    }

    #[test]
    fn numbers_tie_on_bytes_and_missing_texts_sort_first() {
        let request = Request::default();
        let (one, other) = (Weight::Number(1.0), Weight::Number(1.0));
        assert_eq!(
            compare(&request, &one, &other, b"b", b"a"),
            Ordering::Greater
        );
        let missing = Weight::Text(None);
        let found = Weight::Text(Some(b"a".to_vec()));
        assert_eq!(
            compare(&request, &missing, &found, b"x", b"y"),
            Ordering::Less
        );
        assert_eq!(
            compare(&request, &missing, &Weight::Text(None), b"x", b"y"),
            Ordering::Equal
        );
    }
}
