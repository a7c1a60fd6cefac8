//! Stream commands: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID here; XREAD and
//! XREADGROUP in `streams/read.rs`; the consumer-group commands in `streams/groups.rs`. A
//! stream is a native record value ([`StreamValue`]), shown to Aerospike clients as one MAP
//! bin named `stream` (see `docs/internals/redis-mapping.md`, "Streams").
//!
//! Replies follow Redis 7.2's `t_stream.c`: the same checks in the same order, so a command
//! with several faults answers the error Redis answers.
//!
//! Invariants:
//! - A command checks all its arguments before it changes anything; a failed command changes
//!   nothing.
//! - A reply of entries that may reach `LONG_COMMAND_COST_MIN` elements is built on the
//!   long-request pool (`After::Offload`), never on a runtime worker.

mod groups;
mod id;
mod read;
mod value;

use wire_resp::Args;

use super::collection::{self, Change, Failure, finish};
use super::commands::Command;
use super::keys::{self, Target};
use super::reply::Reply;
use super::{After, LONG_COMMAND_COST_MIN, Session};

pub use value::StreamValue;
/// `stream-node-max-entries`'s default.
pub const NODE_ENTRIES_DEFAULT: usize = value::NODE_ENTRIES;
pub use id::StreamId;
use value::{Fields, Strategy, Trim};

/// The stream commands, with Redis 7.2's arities.
pub const COMMANDS: &[Command] = &[
    ("xack", -4, groups::xack),
    ("xadd", -5, xadd),
    ("xautoclaim", -6, groups::xautoclaim),
    ("xclaim", -6, groups::xclaim),
    ("xdel", -3, xdel),
    ("xgroup", -2, groups::xgroup),
    ("xinfo", -2, groups::xinfo),
    ("xlen", 2, xlen),
    ("xpending", -3, groups::xpending),
    ("xrange", -4, |s, a, r| xrange(s, a, r, false)),
    ("xread", -4, |s, a, r| read::xread(s, a, r, false)),
    ("xreadgroup", -7, |s, a, r| read::xread(s, a, r, true)),
    ("xrevrange", -4, |s, a, r| xrange(s, a, r, true)),
    ("xsetid", -3, xsetid),
    ("xtrim", -4, xtrim),
];

/// Redis's error for an id it cannot parse.
const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// Answers an argument error.
fn fail(reply: &mut Reply<'_>, text: &str) -> After {
    reply.error(text);
    After::Continue
}

/// A strict id (no `-` or `+`).
fn parse_strict(bytes: &[u8]) -> Result<StreamId, Failure> {
    StreamId::parse(bytes, 0, true).map_err(|()| Failure::message(INVALID_ID))
}

/// An interval bound: `(id` is exclusive (and strict); `-`, `+` and partial ids are taken,
/// the sequence of a partial one being `missing_seq`. Returns the inclusive bound, stepped
/// past an exclusive one; `None` when there is none (`(` of the last id at the end).
fn parse_interval(bytes: &[u8], missing_seq: u64, end: bool) -> Result<StreamId, Failure> {
    let exclusive = bytes.len() > 1 && bytes[0] == b'(';
    if !exclusive {
        return StreamId::parse(bytes, missing_seq, false)
            .map_err(|()| Failure::message(INVALID_ID));
    }
    let id = StreamId::parse(&bytes[1..], missing_seq, true)
        .map_err(|()| Failure::message(INVALID_ID))?;
    let stepped = if end { id.prev() } else { id.next() };
    stepped.ok_or_else(|| {
        Failure::message(if end {
            "ERR invalid end ID for the interval"
        } else {
            "ERR invalid start ID for the interval"
        })
    })
}

/// Writes one entry: `[id, [field, value, ...]]`.
fn reply_entry(reply: &mut Reply<'_>, id: StreamId, fields: &Fields) {
    reply.array(2);
    reply.bulk(&id.text_bytes());
    reply.array(fields.len());
    fields.iter().for_each(|element| reply.bulk(element));
}

/// The elements (entries and their fields) the first `count` entries of `entries` hold,
/// counted until they reach [`LONG_COMMAND_COST_MIN`].
fn reply_cost<'a>(entries: impl Iterator<Item = (StreamId, &'a Fields)>, count: usize) -> usize {
    let mut cost = 0_usize;
    for (_, fields) in entries.take(count) {
        cost += 1 + fields.len();
        if cost >= LONG_COMMAND_COST_MIN {
            break;
        }
    }
    cost
}

/// A COUNT argument as Redis reads one: an integer, negative taken as 0.
fn parse_count(bytes: &[u8]) -> Result<u64, Failure> {
    let count = keys::parse_i64(bytes).map_err(|()| Failure::message(keys::NOT_AN_INTEGER))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// `count` as a number of entries, 0 meaning all.
fn count_or_all(count: u64) -> usize {
    match usize::try_from(count) {
        Ok(0) | Err(_) => usize::MAX,
        Ok(count) => count,
    }
}

/// What XADD or XTRIM was asked, before the id and fields.
#[derive(Debug, Default)]
struct AddArgs {
    trim: Option<Trim>,
    no_mkstream: bool,
    /// XADD's id and whether its sequence was given; `None` for `*`.
    id: Option<(StreamId, bool)>,
    /// Where XADD's id is (the fields follow it).
    id_position: usize,
}

/// `stream-node-max-entries` now.
fn node_entries_max(session: &Session) -> usize {
    let settings = &session.state.resp_settings;
    let entries = settings
        .stream_node_entries_max
        .load(std::sync::atomic::Ordering::Relaxed);
    usize::try_from(entries).unwrap_or(usize::MAX)
}

/// Parses XADD's or XTRIM's options (Redis's `streamParseAddOrTrimArgsOrReply`).
fn parse_add_or_trim(args: &Args, xadd: bool, node_entries_max: usize) -> Result<AddArgs, Failure> {
    let mut parsed = AddArgs::default();
    let (mut strategy, mut approx, mut limit) = (None, false, None);
    let mut position = 2;
    while position < args.len() {
        let more = args.len() - 1 - position;
        let word = args.get(position);
        let option = word.to_ascii_lowercase();
        if xadd && word == b"*" {
            break;
        } else if (option == b"maxlen" || option == b"minid") && more > 0 {
            if strategy.is_some() {
                return Err(Failure::message(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            approx = false;
            let next = args.get(position + 1);
            if more >= 2 && (next == b"~" || next == b"=") {
                approx = next == b"~";
                position += 1;
            }
            let value = args.get(position + 1);
            strategy = Some(if option == b"maxlen" {
                let max_len =
                    keys::parse_i64(value).map_err(|()| Failure::message(keys::NOT_AN_INTEGER))?;
                let max_len = u64::try_from(max_len)
                    .map_err(|_| Failure::message("ERR The MAXLEN argument must be >= 0."))?;
                Strategy::MaxLen(max_len)
            } else {
                Strategy::MinId(parse_strict(value)?)
            });
            position += 2;
            continue;
        } else if option == b"limit" && more > 0 {
            let value = keys::parse_i64(args.get(position + 1))
                .map_err(|()| Failure::message(keys::NOT_AN_INTEGER))?;
            let value = u64::try_from(value)
                .map_err(|_| Failure::message("ERR The LIMIT argument must be >= 0."))?;
            limit = Some(value);
            position += 2;
            continue;
        } else if xadd && option == b"nomkstream" {
            parsed.no_mkstream = true;
        } else if xadd {
            let id = id::parse_add_id(word).map_err(|()| Failure::message(INVALID_ID))?;
            parsed.id = Some(id);
            break;
        } else {
            return Err(Failure::message(keys::SYNTAX_ERROR));
        }
        position += 1;
    }
    parsed.id_position = position;
    if limit.is_some_and(|limit| limit > 0) && strategy.is_none() {
        return Err(Failure::message(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && strategy.is_none() {
        return Err(Failure::message(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit.is_some() && !approx {
        return Err(Failure::message(
            "ERR syntax error, LIMIT cannot be used without the special ~ option",
        ));
    }
    // Redis bounds an approximate trim to 100 nodes unless told otherwise.
    let limit = limit.unwrap_or(if approx {
        100 * node_entries_max as u64
    } else {
        0
    });
    parsed.trim = strategy.map(|strategy| Trim {
        strategy,
        approx,
        limit,
    });
    Ok(parsed)
}

/// Why XADD could not add.
const ID_TOO_SMALL: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";

/// XADD key [NOMKSTREAM] [<MAXLEN | MINID> [= | ~] threshold [LIMIT count]] <* | id> field
/// value [field value ...]: the id added, or null with NOMKSTREAM and no stream.
pub fn xadd(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let node_entries_max = node_entries_max(session);
    let parsed = match parse_add_or_trim(args, true, node_entries_max) {
        Ok(parsed) => parsed,
        Err(failure) => return finish(reply, Err::<(), _>(failure), |_, ()| {}),
    };
    let field_position = parsed.id_position + 1;
    let field_count = args.len().saturating_sub(field_position);
    if field_position > args.len() || field_count < 2 || !field_count.is_multiple_of(2) {
        return fail(reply, "ERR wrong number of arguments for 'xadd' command");
    }
    if let Some((id, true)) = parsed.id
        && id == StreamId::MIN
    {
        return fail(
            reply,
            "ERR The ID specified in XADD must be greater than 0-0",
        );
    }
    let fields: Fields = (field_position..args.len())
        .map(|position| Box::from(args.get(position)))
        .collect();
    let now_ms = keys::now_of(session).unix_ms;
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        !parsed.no_mkstream,
        |stream: &mut StreamValue| {
            let id = next_id(stream, parsed.id, now_ms)?;
            stream.append(id, fields, node_entries_max);
            if let Some(trim) = &parsed.trim {
                stream.trim(trim);
            }
            Ok(Change::Changed(id))
        },
    );
    finish(reply, outcome, |reply, id| match id {
        Some(id) => reply.bulk(&id.text_bytes()),
        None => reply.null(),
    })
}

/// The id XADD adds with (Redis's `streamAppendItem` and `streamNextID`).
fn next_id(
    stream: &StreamValue,
    asked: Option<(StreamId, bool)>,
    now_ms: u64,
) -> Result<StreamId, Failure> {
    let last = stream.last_id;
    if last == StreamId::MAX {
        return Err(Failure::message(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let id = match asked {
        Some((id, true)) => Some(id),
        Some((id, false)) if id.ms == last.ms => last.next().filter(|next| next.ms == last.ms),
        Some((id, false)) => Some(id),
        None if now_ms > last.ms => Some(StreamId { ms: now_ms, seq: 0 }),
        None => last.next(),
    }
    .ok_or_else(|| Failure::message(ID_TOO_SMALL))?;
    if id <= last {
        return Err(Failure::message(ID_TOO_SMALL));
    }
    Ok(id)
}

/// XRANGE key start end [COUNT count], XREVRANGE key end start [COUNT count].
pub fn xrange(session: &mut Session, args: &Args, reply: &mut Reply<'_>, rev: bool) -> After {
    let (start_arg, end_arg) = if rev {
        (args.get(3), args.get(2))
    } else {
        (args.get(2), args.get(3))
    };
    let parsed = parse_interval(start_arg, 0, false)
        .and_then(|start| Ok((start, parse_interval(end_arg, u64::MAX, true)?)))
        .and_then(|bounds| Ok((bounds, parse_range_count(args)?)));
    let ((start, end), count) = match parsed {
        Ok(parsed) => parsed,
        Err(failure) => return finish(reply, Err::<(), _>(failure), |_, ()| {}),
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |stream: Option<&StreamValue>| {
        let Some(stream) = stream else {
            reply.array(0);
            return After::Continue;
        };
        let limit = match count {
            Some(0) => {
                reply.null_array();
                return After::Continue;
            }
            Some(count) => count_or_all(count),
            None => usize::MAX,
        };
        if session.should_offload(reply_cost(stream.range(start, end, rev), limit)) {
            return After::Offload;
        }
        let entries: Vec<_> = stream.range(start, end, rev).take(limit).collect();
        reply.array(entries.len());
        entries
            .into_iter()
            .for_each(|(id, fields)| reply_entry(reply, id, fields));
        After::Continue
    });
    match outcome {
        Ok(after) => after,
        Err(failure) => finish(reply, Err::<(), _>(failure), |_, ()| {}),
    }
}

/// XRANGE's options from position 4: `COUNT n`, repeatable; `None` without.
fn parse_range_count(args: &Args) -> Result<Option<u64>, Failure> {
    let mut count = None;
    let mut position = 4;
    while position < args.len() {
        if !args.get(position).eq_ignore_ascii_case(b"count") || position + 1 >= args.len() {
            return Err(Failure::message(keys::SYNTAX_ERROR));
        }
        count = Some(parse_count(args.get(position + 1))?);
        position += 2;
    }
    Ok(count)
}

/// XLEN key
pub fn xlen(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |stream: Option<&StreamValue>| {
        stream.map_or(0, StreamValue::len)
    });
    finish(reply, outcome, |reply, len| {
        reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
    })
}

/// XDEL key id [id ...]: the entries deleted.
pub fn xdel(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |stream: &mut StreamValue| {
            let ids = (2..args.len())
                .map(|position| parse_strict(args.get(position)))
                .collect::<Result<Vec<_>, _>>()?;
            let deleted = ids.into_iter().filter(|&id| stream.delete(id)).count();
            Ok(Change::when(deleted > 0, deleted))
        },
    );
    finish(reply, outcome, |reply, deleted| {
        reply.integer(i64::try_from(deleted.unwrap_or(0)).unwrap_or(i64::MAX));
    })
}

/// XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count]: the entries removed.
pub fn xtrim(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let trim = match parse_add_or_trim(args, false, node_entries_max(session)) {
        Ok(AddArgs {
            trim: Some(trim), ..
        }) => trim,
        Ok(_) => unreachable!("XTRIM's parse insists on a strategy"),
        Err(failure) => return finish(reply, Err::<(), _>(failure), |_, ()| {}),
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |stream: &mut StreamValue| {
            let deleted = stream.trim(&trim);
            Ok(Change::when(deleted > 0, deleted))
        },
    );
    finish(reply, outcome, |reply, deleted| {
        reply.integer(i64::try_from(deleted.unwrap_or(0)).unwrap_or(i64::MAX));
    })
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
pub fn xsetid(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let parsed = parse_strict(args.get(2)).and_then(|id| Ok((id, parse_setid_options(args, id)?)));
    let (id, (entries_added, max_deleted_id)) = match parsed {
        Ok(parsed) => parsed,
        Err(failure) => return finish(reply, Err::<(), _>(failure), |_, ()| {}),
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |stream: &mut StreamValue| {
            if id < stream.max_deleted_id {
                return Err(Failure::message(
                    "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id",
                ));
            }
            if let Some((top, _)) = stream.last() {
                if id < top {
                    return Err(Failure::message(
                        "ERR The ID specified in XSETID is smaller than the target stream top item",
                    ));
                }
                let len = i64::try_from(stream.len()).unwrap_or(i64::MAX);
                if entries_added.is_some_and(|added| added < len) {
                    return Err(Failure::message(
                        "ERR The entries_added specified in XSETID is smaller than the target stream length",
                    ));
                }
            }
            stream.last_id = id;
            if let Some(added) = entries_added {
                stream.entries_added = added;
            }
            if max_deleted_id != StreamId::MIN {
                stream.max_deleted_id = max_deleted_id;
            }
            Ok(Change::Changed(()))
        },
    );
    match outcome {
        Ok(Some(())) => reply.ok(),
        Ok(None) => reply.error("ERR no such key"),
        Err(failure) => failure.reply(reply),
    }
    After::Continue
}

/// XSETID's options from position 3.
fn parse_setid_options(args: &Args, id: StreamId) -> Result<(Option<i64>, StreamId), Failure> {
    let (mut entries_added, mut max_deleted_id) = (None, StreamId::MIN);
    let mut position = 3;
    while position < args.len() {
        let option = args.get(position).to_ascii_lowercase();
        if position + 1 >= args.len() {
            return Err(Failure::message(keys::SYNTAX_ERROR));
        }
        let value = args.get(position + 1);
        if option == b"entriesadded" {
            let added =
                keys::parse_i64(value).map_err(|()| Failure::message(keys::NOT_AN_INTEGER))?;
            if added < 0 {
                return Err(Failure::message("ERR entries_added must be positive"));
            }
            entries_added = Some(added);
        } else if option == b"maxdeletedid" {
            max_deleted_id = parse_strict(value)?;
            if id < max_deleted_id {
                return Err(Failure::message(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(Failure::message(keys::SYNTAX_ERROR));
        }
        position += 2;
    }
    Ok((entries_added, max_deleted_id))
}
