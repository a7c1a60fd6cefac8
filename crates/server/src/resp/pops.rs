//! The pops that take from one of several keys or move between two: LMOVE, RPOPLPUSH, LMPOP
//! and ZMPOP, and the pop attempts their blocking forms (`blocking.rs`) repeat.
//!
//! - A command naming more than one key runs in the namespace's exclusive section (as SMOVE
//!   does), so it sees one state of all its keys: the key it pops from is the first, in
//!   argument order, holding a value at that moment, and LMOVE's element is never seen in
//!   both lists or in neither.
//! - Keys are checked in Redis's order: a key of another type met before a key holding
//!   elements answers WRONGTYPE; a blocked client's retry (`skip_wrong_type`) passes over it
//!   instead, as Redis does not wake a client blocked on a list for a key that became a string.
//! - LMOVE pushes the element onto the destination before it leaves the source, so a failed
//!   write can duplicate it but never lose it.

use std::ops::Range;
use std::sync::Arc;

use wire_resp::Args;

use super::collection::{self, Change, Failure, finish};
use super::commands::Command;
use super::keys::{self, Target};
use super::lists::{End, ListValue};
use super::reply::Reply;
use super::zsets::{Entry, ZSetValue};
use super::{After, Session};

/// The commands of this module, with Redis's arities.
pub const COMMANDS: &[Command] = &[
    ("lmove", 5, lmove),
    ("lmpop", -4, lmpop),
    ("rpoplpush", 3, rpoplpush),
    ("zmpop", -4, zmpop),
];

/// Redis's reply to a key count below 1 or not an integer (LMPOP, ZMPOP and their blocking
/// forms).
const NUMKEYS_INVALID: &str = "ERR numkeys should be greater than 0";
/// Redis's reply to a COUNT below 1 or not an integer (the same commands).
const COUNT_INVALID: &str = "ERR count should be greater than 0";

/// What LMPOP, ZMPOP, BLMPOP and BZMPOP were asked.
#[derive(Debug)]
pub struct MultiPop {
    /// The positions of the keys in the arguments.
    pub keys: Range<usize>,
    /// LEFT (lists) or MIN (sorted sets); else RIGHT or MAX.
    pub from_first: bool,
    /// How many elements to pop at most (1 without COUNT).
    pub count: usize,
}

impl MultiPop {
    /// Parses `numkeys key [key ...] <first | second> [COUNT count]` with `numkeys` at
    /// `numkeys_position`; `first` and `second` are the two words (upper case) of the end.
    ///
    /// # Errors
    /// Redis's text, in Redis's order of checks.
    pub fn parse(
        args: &Args,
        numkeys_position: usize,
        (first, second): (&[u8], &[u8]),
    ) -> Result<MultiPop, &'static str> {
        let key_count = match keys::parse_i64(args.get(numkeys_position)) {
            Ok(count) if count >= 1 => usize::try_from(count).unwrap_or(usize::MAX),
            _ => return Err(NUMKEYS_INVALID),
        };
        let keys_start = numkeys_position + 1;
        let end_position = keys_start.saturating_add(key_count);
        if end_position >= args.len() {
            return Err(keys::SYNTAX_ERROR);
        }
        let from_first = match args.get(end_position).to_ascii_uppercase() {
            word if word == first => true,
            word if word == second => false,
            _ => return Err(keys::SYNTAX_ERROR),
        };
        let mut count = None;
        let mut position = end_position + 1;
        while position < args.len() {
            let more = position + 1 < args.len();
            if count.is_none() && more && args.get(position).eq_ignore_ascii_case(b"count") {
                count = match keys::parse_i64(args.get(position + 1)) {
                    Ok(count) if count >= 1 => Some(usize::try_from(count).unwrap_or(usize::MAX)),
                    _ => return Err(COUNT_INVALID),
                };
                position += 2;
            } else {
                return Err(keys::SYNTAX_ERROR);
            }
        }
        Ok(MultiPop {
            keys: keys_start..end_position,
            from_first,
            count: count.unwrap_or(1),
        })
    }

    /// The keys, in argument order.
    pub fn keys<'a>(&self, args: &'a Args) -> Vec<&'a [u8]> {
        self.keys
            .clone()
            .map(|position| args.get(position))
            .collect()
    }
}

/// Runs `run` in the RESP namespace's exclusive section when `key_count` is more than one, so
/// that it sees one state of all its keys.
pub fn isolated_if_several<T>(
    session: &mut Session,
    key_count: usize,
    run: impl FnOnce(&mut Session) -> T,
) -> T {
    if key_count <= 1 {
        return run(session);
    }
    let state = Arc::clone(&session.state);
    keys::namespace_of(&state).exclusive(|| run(session))
}

/// What a list pop took: the key's position among the keys, and the elements in pop order.
pub type ListPopped = (usize, Vec<Box<[u8]>>);

/// Pops up to `count` elements from `end` of the first of `keys` holding a list; `None` when
/// none does.
///
/// # Errors
/// WRONGTYPE for a key of another type met first (unless `skip_wrong_type`); an engine failure.
pub fn pop_first_list(
    session: &mut Session,
    keys: &[&[u8]],
    end: End,
    count: usize,
    skip_wrong_type: bool,
) -> Result<Option<ListPopped>, Failure> {
    isolated_if_several(session, keys.len(), |session| {
        for (key_index, key) in keys.iter().enumerate() {
            let target = Target::of(&session.state, session.database, key);
            let popped = collection::modify(
                &target,
                &mut session.writes,
                false,
                |list: &mut ListValue| {
                    let popped: Vec<_> = (0..count).map_while(|_| list.pop(end)).collect();
                    Ok(Change::when(!popped.is_empty(), popped))
                },
            );
            match popped {
                Ok(Some(popped)) if !popped.is_empty() => return Ok(Some((key_index, popped))),
                Ok(_) => {}
                Err(Failure::WrongType) if skip_wrong_type => {}
                Err(failure) => return Err(failure),
            }
        }
        Ok(None)
    })
}

/// What a sorted-set pop took: the key's position among the keys, and the members in pop
/// order.
pub type ZSetPopped = (usize, Vec<Entry>);

/// Pops up to `count` members (the lowest scores, or the highest when `max`) from the first
/// of `keys` holding a sorted set; `None` when none does.
///
/// # Errors
/// WRONGTYPE for a key of another type met first (unless `skip_wrong_type`); an engine failure.
pub fn pop_first_zset(
    session: &mut Session,
    keys: &[&[u8]],
    max: bool,
    count: usize,
    skip_wrong_type: bool,
) -> Result<Option<ZSetPopped>, Failure> {
    isolated_if_several(session, keys.len(), |session| {
        for (key_index, key) in keys.iter().enumerate() {
            let target = Target::of(&session.state, session.database, key);
            let popped = collection::modify(
                &target,
                &mut session.writes,
                false,
                |zset: &mut ZSetValue| {
                    let popped: Vec<Entry> = (0..count).map_while(|_| zset.pop(max)).collect();
                    Ok(Change::when(!popped.is_empty(), popped))
                },
            );
            match popped {
                Ok(Some(popped)) if !popped.is_empty() => return Ok(Some((key_index, popped))),
                Ok(_) => {}
                Err(Failure::WrongType) if skip_wrong_type => {}
                Err(failure) => return Err(failure),
            }
        }
        Ok(None)
    })
}

/// Moves the element at `from` of list `source` to `to` of list `destination` (LMOVE); `None`
/// when `source` does not exist.
///
/// # Errors
/// WRONGTYPE when either key holds another type (the source's checked first; with
/// `skip_wrong_type`, a source of another type counts as missing); an engine failure.
pub fn move_element(
    session: &mut Session,
    (source, destination): (&[u8], &[u8]),
    (from, to): (End, End),
    skip_wrong_type: bool,
) -> Result<Option<Box<[u8]>>, Failure> {
    isolated_if_several(session, 2, |session| {
        let source_target = Target::of(&session.state, session.database, source);
        let peek = |list: Option<&ListValue>| {
            let list = list?;
            let element = match from {
                End::Head => list.iter().next(),
                End::Tail => list.iter().next_back(),
            };
            element.map(Box::<[u8]>::from)
        };
        let element = match collection::peek(&source_target, peek) {
            Ok(Some(element)) => element,
            Ok(None) => return Ok(None),
            Err(Failure::WrongType) if skip_wrong_type => return Ok(None),
            Err(failure) => return Err(failure),
        };
        let destination_target = Target::of(&session.state, session.database, destination);
        collection::read(&destination_target, |_: Option<&ListValue>| ())?;
        if source == destination {
            collection::modify(
                &source_target,
                &mut session.writes,
                false,
                |list: &mut ListValue| {
                    let popped = list.pop(from).expect("the peeked element is there");
                    list.push(to, &popped);
                    Ok(Change::Changed(()))
                },
            )?;
            return Ok(Some(element));
        }
        collection::modify(
            &destination_target,
            &mut session.writes,
            true,
            |list: &mut ListValue| {
                list.push(to, &element);
                Ok(Change::Changed(()))
            },
        )?;
        collection::modify(
            &source_target,
            &mut session.writes,
            false,
            |list: &mut ListValue| Ok(Change::when(list.pop(from).is_some(), ())),
        )?;
        Ok(Some(element))
    })
}

/// LEFT or RIGHT, as LMOVE takes them.
///
/// # Errors
/// Redis's syntax error for any other word.
pub fn parse_end(word: &[u8]) -> Result<End, &'static str> {
    match word.to_ascii_uppercase().as_slice() {
        b"LEFT" => Ok(End::Head),
        b"RIGHT" => Ok(End::Tail),
        _ => Err(keys::SYNTAX_ERROR),
    }
}

/// Answers LMPOP's and BLMPOP's pop: `[key, [element ...]]`.
pub fn reply_list_popped(reply: &mut Reply<'_>, key: &[u8], elements: &[Box<[u8]>]) {
    reply.array(2);
    reply.bulk(key);
    reply.array(elements.len());
    elements.iter().for_each(|element| reply.bulk(element));
}

/// Answers ZMPOP's and BZMPOP's pop: `[key, [[member, score] ...]]`.
pub fn reply_zset_popped(reply: &mut Reply<'_>, key: &[u8], entries: &[Entry]) {
    reply.array(2);
    reply.bulk(key);
    reply.array(entries.len());
    for entry in entries {
        reply.array(2);
        reply.bulk(entry.member());
        reply.double(entry.score());
    }
}

/// LMOVE source destination <LEFT | RIGHT> <LEFT | RIGHT>: the element moved, or null.
fn lmove(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let ends = parse_end(args.get(3)).and_then(|from| Ok((from, parse_end(args.get(4))?)));
    match ends {
        Ok(ends) => move_and_reply(session, args, reply, ends),
        Err(text) => {
            reply.error(text);
            After::Continue
        }
    }
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
fn rpoplpush(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    move_and_reply(session, args, reply, (End::Tail, End::Head))
}

fn move_and_reply(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    ends: (End, End),
) -> After {
    let keys = (args.get(1), args.get(2));
    let outcome = move_element(session, keys, ends, false);
    finish(reply, outcome, |reply, moved| match moved {
        Some(element) => reply.bulk(&element),
        None => reply.null(),
    })
}

/// LMPOP numkeys key [key ...] <LEFT | RIGHT> [COUNT count]: `[key, [element ...]]` from the
/// first key holding a list, or a null array.
fn lmpop(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let request = match MultiPop::parse(args, 1, (b"LEFT", b"RIGHT")) {
        Ok(request) => request,
        Err(text) => {
            reply.error(text);
            return After::Continue;
        }
    };
    let keys = request.keys(args);
    let end = if request.from_first {
        End::Head
    } else {
        End::Tail
    };
    let outcome = pop_first_list(session, &keys, end, request.count, false);
    finish(reply, outcome, |reply, popped| match popped {
        Some((key_index, elements)) => reply_list_popped(reply, keys[key_index], &elements),
        None => reply.null_array(),
    })
}

/// ZMPOP numkeys key [key ...] <MIN | MAX> [COUNT count]: `[key, [[member, score] ...]]`
/// from the first key holding a sorted set, or a null array.
fn zmpop(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let request = match MultiPop::parse(args, 1, (b"MIN", b"MAX")) {
        Ok(request) => request,
        Err(text) => {
            reply.error(text);
            return After::Continue;
        }
    };
    let keys = request.keys(args);
    let outcome = pop_first_zset(session, &keys, !request.from_first, request.count, false);
    finish(reply, outcome, |reply, popped| match popped {
        Some((key_index, entries)) => reply_zset_popped(reply, keys[key_index], &entries),
        None => reply.null_array(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::resp::args_of as args;

    #[test]
    fn multi_pop_arguments_are_checked_in_redis_order() {
        let parse = |words: &[&str]| MultiPop::parse(&args(words), 1, (b"LEFT", b"RIGHT"));
        let parsed = parse(&["lmpop", "2", "a", "b", "left", "COUNT", "3"]).expect("valid");
        assert_eq!(parsed.keys, 2..4);
        assert!(parsed.from_first);
        assert_eq!(parsed.count, 3);
        assert_eq!(
            parse(&["lmpop", "1", "a", "RIGHT"]).expect("valid").count,
            1
        );
        assert_eq!(
            parse(&["lmpop", "0", "a", "LEFT"]).unwrap_err(),
            NUMKEYS_INVALID
        );
        assert_eq!(
            parse(&["lmpop", "x", "a", "LEFT"]).unwrap_err(),
            NUMKEYS_INVALID
        );
        let huge = i64::MAX.to_string();
        assert_eq!(
            parse(&["lmpop", &huge, "a", "LEFT"]).unwrap_err(),
            keys::SYNTAX_ERROR
        );
        assert_eq!(
            parse(&["lmpop", "2", "a", "LEFT"]).unwrap_err(),
            keys::SYNTAX_ERROR
        );
        assert_eq!(
            parse(&["lmpop", "1", "a", "UP"]).unwrap_err(),
            keys::SYNTAX_ERROR
        );
        let zero = parse(&["lmpop", "1", "a", "LEFT", "COUNT", "0"]);
        assert_eq!(zero.unwrap_err(), COUNT_INVALID);
        let twice = parse(&["lmpop", "1", "a", "LEFT", "COUNT", "1", "COUNT", "2"]);
        assert_eq!(twice.unwrap_err(), keys::SYNTAX_ERROR);
        let dangling = parse(&["lmpop", "1", "a", "LEFT", "COUNT"]);
        assert_eq!(dangling.unwrap_err(), keys::SYNTAX_ERROR);
    }
}
