//! XREAD and XREADGROUP, blocking or not.
//!
//! A read first checks every key (type, group, ids) and sums what its reply would hold,
//! under each key's read lock; a reply that may reach `LONG_COMMAND_COST_MIN` elements goes
//! to the long-request pool before anything changes. It then serves each key in turn (under
//! its write lock for XREADGROUP, which moves the group's last id and pending entries).
//!
//! A read that finds nothing and may block leaves a `blocking::Request` of kind
//! [`Kind::Stream`]; the connection retries it on each write to one of its keys. As Redis
//! 7.2 rewrites a blocked XREAD's `$` into the stream's last id, the ids `$` stood for at the
//! first try are kept in the session (`Blocking::rewritten`) and used on every retry.
//!
//! Invariants:
//! - XREADGROUP that delivers nothing writes nothing, unless it created its consumer (once),
//!   so a blocked XREADGROUP retried on every write never wakes itself again.

use std::time::Duration;

use model::Digest;
use wire_resp::Args;

use super::super::blocking::{Kind, Request};
use super::super::collection::{self, Change, Failure};
use super::super::keys::{self, Target};
use super::super::reply::Reply;
use super::super::{After, Session};
use super::id::StreamId;
use super::value::{Fields, StreamValue};
use super::{INVALID_ID, count_or_all, fail, parse_count, reply_cost, reply_entry};

/// A blocked XREADGROUP's answer when its key was deleted or became another type while it
/// waited (Redis's `unblockDeletedStreamReadgroupClients`).
const STREAM_GONE: &str = "UNBLOCKED the stream key no longer exists";
/// A blocked XREADGROUP's answer when its group was destroyed while it waited.
const GROUP_GONE: &str = "NOGROUP the consumer group this client was blocked on no longer exists";

/// What XREAD or XREADGROUP was asked.
struct ReadArgs<'a> {
    /// BLOCK's timeout: `None` without BLOCK, `Some(None)` for ever.
    block: Option<Option<Duration>>,
    /// Entries per key, 0 for all.
    count: u64,
    noack: bool,
    /// XREADGROUP's group and consumer.
    group: Option<(&'a [u8], &'a [u8])>,
    /// Where the keys start; the ids follow them.
    streams_position: usize,
    key_count: usize,
}

/// Where a key's read starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum From {
    /// Entries after this id (XREAD; XREADGROUP's history of its consumer).
    After(StreamId),
    /// XREADGROUP's `>`: entries the group has not had.
    New,
}

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...], and
/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS key
/// [key ...] id [id ...].
pub fn xread(session: &mut Session, args: &Args, reply: &mut Reply<'_>, grouped: bool) -> After {
    if !session.blocking.retry {
        session.blocking.rewritten.clear();
    }
    let parsed = match parse(args, grouped, session.in_script) {
        Ok(parsed) => parsed,
        Err(text) => return fail(reply, &text),
    };
    let checked = match check_keys(session, args, &parsed) {
        Ok(checked) => checked,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let (froms, cost) = checked;
    if session.should_offload(cost) {
        return After::Offload;
    }
    let served = match serve_keys(session, args, &parsed, &froms) {
        Ok(served) => served,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    if !served.is_empty() {
        reply_served(reply, &served);
        return After::Continue;
    }
    let Some(timeout) = parsed.block else {
        reply.null_array();
        return After::Continue;
    };
    if !(session.may_offload && session.blocking.allowed) {
        reply.null_array();
        return After::Continue;
    }
    block(session, args, &parsed, &froms, timeout)
}

/// Leaves the blocking request, keeping what `$` stood for.
fn block(
    session: &mut Session,
    args: &Args,
    parsed: &ReadArgs<'_>,
    froms: &[From],
    timeout: Option<Duration>,
) -> After {
    let ids_position = parsed.streams_position + parsed.key_count;
    for (index, from) in froms.iter().enumerate() {
        let position = ids_position + index;
        if let (From::After(id), b"$") = (from, args.get(position)) {
            session
                .blocking
                .rewritten
                .push((position, id.text().into_bytes()));
        }
    }
    let mut digests: Vec<Digest> = (0..parsed.key_count)
        .map(|index| {
            Target::of(
                &session.state,
                session.database,
                args.get(parsed.streams_position + index),
            )
            .digest()
        })
        .collect();
    digests.sort_unstable();
    digests.dedup();
    session.blocking.request = Some(Request {
        digests,
        kind: Kind::Stream,
        timeout,
    });
    After::Block
}

/// Parses the options (Redis's `xreadCommand`), up to the ids; `in_script`: called from a
/// script, which may not block (Redis 7.0 refuses BLOCK there rather than answer at once).
fn parse(args: &Args, grouped: bool, in_script: bool) -> Result<ReadArgs<'_>, String> {
    let mut parsed = ReadArgs {
        block: None,
        count: 0,
        noack: false,
        group: None,
        streams_position: 0,
        key_count: 0,
    };
    let name = if grouped { "xreadgroup" } else { "xread" };
    let mut position = 1;
    while position < args.len() {
        let more = args.len() - position - 1;
        let option = args.get(position).to_ascii_lowercase();
        match option.as_slice() {
            b"block" if more > 0 && in_script => {
                return Err(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(args.get(0))
                ));
            }
            b"block" if more > 0 => {
                parsed.block = Some(parse_block(args.get(position + 1))?);
                position += 1;
            }
            b"count" if more > 0 => {
                parsed.count = parse_count(args.get(position + 1)).map_err(text_of)?;
                position += 1;
            }
            b"streams" if more > 0 => {
                let streams = args.len() - position - 1;
                if !streams.is_multiple_of(2) {
                    let symbol = if grouped { '>' } else { '$' };
                    return Err(format!(
                        "ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{symbol}' must be specified."
                    ));
                }
                parsed.streams_position = position + 1;
                parsed.key_count = streams / 2;
                break;
            }
            b"group" if more >= 2 => {
                if !grouped {
                    return Err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.".to_owned());
                }
                parsed.group = Some((args.get(position + 1), args.get(position + 2)));
                position += 2;
            }
            b"noack" => {
                if !grouped {
                    return Err("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.".to_owned());
                }
                parsed.noack = true;
            }
            _ => return Err(keys::SYNTAX_ERROR.to_owned()),
        }
        position += 1;
    }
    if parsed.streams_position == 0 {
        return Err(keys::SYNTAX_ERROR.to_owned());
    }
    if grouped && parsed.group.is_none() {
        return Err("ERR Missing GROUP option for XREADGROUP".to_owned());
    }
    Ok(parsed)
}

fn text_of(failure: Failure) -> String {
    match failure {
        Failure::Message(text) => text,
        Failure::WrongType => keys::WRONGTYPE.to_owned(),
        Failure::Engine(_) => "ERR the command failed".to_owned(),
    }
}

/// BLOCK's milliseconds (Redis's `getTimeoutFromObjectOrReply` in milliseconds): `None` for
/// 0, which waits for ever.
fn parse_block(bytes: &[u8]) -> Result<Option<Duration>, String> {
    let milliseconds = keys::parse_i64(bytes)
        .map_err(|()| "ERR timeout is not an integer or out of range".to_owned())?;
    let milliseconds =
        u64::try_from(milliseconds).map_err(|_| "ERR timeout is negative".to_owned())?;
    Ok((milliseconds > 0).then(|| Duration::from_millis(milliseconds)))
}

/// Checks each key in order (type, group, id) and resolves its id; returns where each read
/// starts and the elements the reply may hold.
fn check_keys(
    session: &Session,
    args: &Args,
    parsed: &ReadArgs<'_>,
) -> Result<(Vec<From>, usize), Failure> {
    let ids_position = parsed.streams_position + parsed.key_count;
    let mut froms = Vec::with_capacity(parsed.key_count);
    let mut cost = 0_usize;
    for index in 0..parsed.key_count {
        let key = args.get(parsed.streams_position + index);
        let position = ids_position + index;
        let id_arg = session
            .blocking
            .rewritten
            .iter()
            .find(|(p, _)| *p == position)
            .map_or(args.get(position), |(_, text)| text.as_slice());
        let target = Target::of(&session.state, session.database, key);
        let retry = session.blocking.retry;
        let looked = collection::read(&target, |stream: Option<&StreamValue>| {
            check_key(stream, key, id_arg, parsed, retry)
        });
        let (from, key_cost) = match looked {
            Ok(outcome) => outcome?,
            // A key that became another type leaves a blocked XREAD waiting, as in Redis, and
            // ends a blocked XREADGROUP, whose group went with the stream.
            Err(Failure::WrongType) if retry && parsed.group.is_none() => {
                (From::After(StreamId::MAX), 0)
            }
            Err(Failure::WrongType) if retry => return Err(Failure::message(STREAM_GONE)),
            Err(failure) => return Err(failure),
        };
        froms.push(from);
        cost = cost.saturating_add(key_cost);
    }
    Ok((froms, cost))
}

/// `retry`: the command runs again after a wake-up, blocked on its group.
fn check_key(
    stream: Option<&StreamValue>,
    key: &[u8],
    id_arg: &[u8],
    parsed: &ReadArgs<'_>,
    retry: bool,
) -> Result<(From, usize), Failure> {
    let count = count_or_all(parsed.count);
    let Some((group_name, consumer_name)) = parsed.group else {
        let from = match id_arg {
            b"$" => stream.map_or(StreamId::MIN, |s| s.last_id),
            b">" => {
                return Err(Failure::message(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            _ => StreamId::parse(id_arg, 0, true).map_err(|()| Failure::message(INVALID_ID))?,
        };
        let cost = stream.map_or(0, |s| reply_cost(s.entries().after(from), count));
        return Ok((From::After(from), cost));
    };
    let group = stream.and_then(|s| s.group(group_name));
    match (stream, group) {
        (None, _) if retry => return Err(Failure::message(STREAM_GONE)),
        (Some(_), None) if retry => return Err(Failure::message(GROUP_GONE)),
        _ => {}
    }
    let (Some(stream), Some(group)) = (stream, group) else {
        return Err(Failure::Message(format!(
            "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(group_name)
        )));
    };
    match id_arg {
        b"$" => Err(Failure::message(
            "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
        )),
        b">" => Ok((
            From::New,
            reply_cost(stream.entries().after(group.last_id), count),
        )),
        _ => {
            let from =
                StreamId::parse(id_arg, 0, true).map_err(|()| Failure::message(INVALID_ID))?;
            let held = group
                .consumers
                .get(consumer_name)
                .map_or(0, |consumer| consumer.pending.len());
            Ok((From::After(from), held.min(count)))
        }
    }
}

/// One key's part of the reply: its name and entries (a history entry deleted since has no
/// fields).
type Served = (Vec<u8>, Vec<(StreamId, Option<Fields>)>);

/// Serves each key in turn; the keys that had something (XREADGROUP's history always has).
fn serve_keys(
    session: &mut Session,
    args: &Args,
    parsed: &ReadArgs<'_>,
    froms: &[From],
) -> Result<Vec<Served>, Failure> {
    let count = count_or_all(parsed.count);
    let now_ms = i64::try_from(keys::now_of(session).unix_ms).unwrap_or(i64::MAX);
    let mut served = Vec::new();
    for (index, &from) in froms.iter().enumerate() {
        let key = args.get(parsed.streams_position + index);
        let target = Target::of(&session.state, session.database, key);
        let entries = match parsed.group {
            None => {
                let From::After(after) = from else {
                    unreachable!("XREAD reads after an id");
                };
                let read = collection::read(&target, |stream: Option<&StreamValue>| {
                    stream.map(|stream| {
                        stream
                            .entries()
                            .after(after)
                            .take(count)
                            .map(|(id, fields)| (id, Some(fields.clone())))
                            .collect::<Vec<_>>()
                    })
                });
                match read {
                    Err(Failure::WrongType) if session.blocking.retry => None,
                    read => read?.filter(|entries| !entries.is_empty()),
                }
            }
            Some((group, consumer)) => {
                let read = GroupRead {
                    group,
                    consumer,
                    from,
                    count,
                    noack: parsed.noack,
                    now_ms,
                };
                let outcome = collection::modify(
                    &target,
                    &mut session.writes,
                    false,
                    |stream: &mut StreamValue| read.serve(stream, key),
                )?;
                outcome.ok_or_else(|| read.no_group(key))?
            }
        };
        if let Some(entries) = entries {
            served.push((key.to_vec(), entries));
        }
    }
    Ok(served)
}

/// One key's XREADGROUP.
struct GroupRead<'a> {
    group: &'a [u8],
    consumer: &'a [u8],
    from: From,
    count: usize,
    noack: bool,
    now_ms: i64,
}

type Delivered = Option<Vec<(StreamId, Option<Fields>)>>;

impl GroupRead<'_> {
    fn no_group(&self, key: &[u8]) -> Failure {
        Failure::Message(format!(
            "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(self.group)
        ))
    }

    /// Delivers to the consumer (created if new); `None` when `>` found nothing new.
    fn serve(&self, stream: &mut StreamValue, key: &[u8]) -> Result<Change<Delivered>, Failure> {
        let outcome = stream.with_group(self.group, |group, entries| {
            let created = group.create_consumer(self.consumer, self.now_ms);
            let consumer = group
                .consumers
                .get_mut(self.consumer)
                .expect("created above");
            consumer.seen_time_ms = self.now_ms;
            match self.from {
                From::New => {
                    let new: Vec<(StreamId, Fields)> = entries
                        .after(group.last_id)
                        .take(self.count)
                        .map(|(id, fields)| (id, fields.clone()))
                        .collect();
                    if new.is_empty() {
                        return Change::when(created, None);
                    }
                    for (id, _) in &new {
                        entries.advance(group, *id);
                        if !self.noack {
                            group.deliver(*id, self.consumer, self.now_ms, 1);
                            let consumer = group.consumers.get_mut(self.consumer);
                            consumer.expect("exists").active_time_ms = self.now_ms;
                        }
                    }
                    let delivered = new.into_iter().map(|(id, f)| (id, Some(f))).collect();
                    Change::Changed(Some(delivered))
                }
                From::After(after) => {
                    let history = self.history(group, entries, after);
                    Change::when(created || !history.is_empty(), Some(history))
                }
            }
        });
        outcome.ok_or_else(|| self.no_group(key))
    }

    /// The consumer's pending entries after `after`, delivered again.
    fn history(
        &self,
        group: &mut super::value::Group,
        entries: &super::value::Entries<'_>,
        after: StreamId,
    ) -> Vec<(StreamId, Option<Fields>)> {
        let Some(start) = after.next() else {
            return Vec::new();
        };
        let consumer = &group.consumers[self.consumer];
        let ids: Vec<StreamId> = consumer
            .pending
            .range(start..)
            .take(self.count)
            .copied()
            .collect();
        ids.into_iter()
            .map(|id| {
                let fields = entries.get(id).cloned();
                if fields.is_some() {
                    let pending = group.pending.get_mut(&id).expect("held ids are pending");
                    pending.delivery_time_ms = self.now_ms;
                    pending.delivery_count = pending.delivery_count.saturating_add(1);
                }
                (id, fields)
            })
            .collect()
    }
}

/// Writes the served keys: RESP2 `[[key, entries] ...]`, RESP3 a map of key to entries.
fn reply_served(reply: &mut Reply<'_>, served: &[Served]) {
    let resp3 = reply.is_resp3();
    if resp3 {
        reply.map(served.len());
    } else {
        reply.array(served.len());
    }
    for (key, entries) in served {
        if !resp3 {
            reply.array(2);
        }
        reply.bulk(key);
        reply.array(entries.len());
        for (id, fields) in entries {
            match fields {
                Some(fields) => reply_entry(reply, *id, fields),
                None => {
                    reply.array(2);
                    reply.bulk(&id.text_bytes());
                    reply.null_array();
                }
            }
        }
    }
}
