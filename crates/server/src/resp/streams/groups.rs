//! The consumer-group commands: XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, and XINFO (which
//! also describes the stream itself).
//!
//! Idle times are measured on the namespace's clock, in Unix milliseconds, as Redis measures
//! them on its command time.
//!
//! Invariants:
//! - A command that only refreshes a consumer's seen time (a claim that claimed nothing)
//!   writes nothing: the time changes in memory only (see `streams/read.rs` for why).

use wire_resp::Args;

use super::super::collection::{self, Change, Failure, finish};
use super::super::keys::{self, Target};
use super::super::reply::Reply;
use super::super::{After, Session};
use super::id::StreamId;
use super::value::{Entries, Fields, Group, StreamValue};
use super::{INVALID_ID, parse_interval, parse_strict, reply_entry};

/// Redis's reply to a subcommand it does not know, or called with the wrong arguments.
fn subcommand_error(container: &str, sub: &[u8]) -> String {
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {container} HELP.",
        String::from_utf8_lossy(sub)
    )
}

/// Checks a subcommand against its table: `Err` with Redis's text for an unknown one or a
/// wrong argument count.
fn check_subcommand(container: &str, table: &[(&str, i32)], args: &Args) -> Result<String, String> {
    let sub = String::from_utf8_lossy(args.get(1)).to_ascii_lowercase();
    let Some(&(_, arity)) = table.iter().find(|(name, _)| *name == sub) else {
        return Err(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            String::from_utf8_lossy(args.get(1)),
            container.to_ascii_uppercase()
        ));
    };
    let count = i32::try_from(args.len()).unwrap_or(i32::MAX);
    if (arity > 0 && count != arity) || (arity < 0 && count < -arity) {
        return Err(format!(
            "ERR wrong number of arguments for '{}|{sub}' command",
            container.to_ascii_lowercase()
        ));
    }
    Ok(sub)
}

/// Redis's `addReplyHelp`: a header, the lines, and HELP's own.
fn reply_help(reply: &mut Reply<'_>, container: &str, lines: &[&str]) {
    reply.array(lines.len() + 3);
    reply.simple(&format!(
        "{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    lines.iter().for_each(|line| reply.simple(line));
    reply.simple("HELP");
    reply.simple("    Print this help.");
}

fn now_ms_of(session: &Session) -> i64 {
    i64::try_from(keys::now_of(session).unix_ms).unwrap_or(i64::MAX)
}

fn nogroup_for_key(group: &[u8], key: &[u8]) -> Failure {
    Failure::Message(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    ))
}

fn nogroup_key_or_group(key: &[u8], group: &[u8]) -> Failure {
    Failure::Message(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

const XGROUP_SUBCOMMANDS: &[(&str, i32)] = &[
    ("create", -5),
    ("createconsumer", 5),
    ("delconsumer", 5),
    ("destroy", 4),
    ("help", 2),
    ("setid", -5),
];

const XGROUP_HELP: &[&str] = &[
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
];

/// XGROUP's options after position 4 (CREATE and SETID): MKSTREAM, ENTRIESREAD.
fn parse_xgroup_options(args: &Args, sub: &str) -> Result<(bool, Option<i64>), Failure> {
    let (mut mkstream, mut entries_read) = (false, None);
    let mut position = 5;
    while position < args.len() {
        let option = args.get(position).to_ascii_lowercase();
        if sub == "create" && option == b"mkstream" {
            mkstream = true;
            position += 1;
        } else if (sub == "create" || sub == "setid")
            && option == b"entriesread"
            && position + 1 < args.len()
        {
            let read = keys::parse_i64(args.get(position + 1))
                .map_err(|()| Failure::message(keys::NOT_AN_INTEGER))?;
            if read < -1 {
                return Err(Failure::message(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            entries_read = (read >= 0).then_some(read);
            position += 2;
        } else {
            return Err(Failure::Message(subcommand_error("XGROUP", args.get(1))));
        }
    }
    Ok((mkstream, entries_read))
}

/// XGROUP CREATE | SETID | DESTROY | CREATECONSUMER | DELCONSUMER | HELP
pub fn xgroup(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let sub = match check_subcommand("xgroup", XGROUP_SUBCOMMANDS, args) {
        Ok(sub) => sub,
        Err(text) => return super::fail(reply, &text),
    };
    if sub == "help" {
        reply_help(reply, "XGROUP", XGROUP_HELP);
        return After::Continue;
    }
    let (mkstream, entries_read) = match parse_xgroup_options(args, &sub) {
        Ok(options) => options,
        Err(failure) => return finish(reply, Err::<(), _>(failure), |_, ()| {}),
    };
    let count = args.len();
    let shape_ok = match sub.as_str() {
        "create" => (5..=8).contains(&count),
        "setid" => count == 5 || count == 7,
        _ => true,
    };
    let (key, group) = (args.get(2), args.get(3));
    let now_ms = now_ms_of(session);
    let target = Target::of(&session.state, session.database, key);
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        sub == "create" && mkstream,
        |stream: &mut StreamValue| {
            let needs_group = matches!(sub.as_str(), "setid" | "createconsumer" | "delconsumer");
            if needs_group && stream.group(group).is_none() {
                return Err(nogroup_for_key(group, key));
            }
            if !shape_ok {
                return Err(Failure::Message(subcommand_error("XGROUP", args.get(1))));
            }
            xgroup_change(stream, &sub, args, entries_read, now_ms)
        },
    );
    match outcome {
        Ok(Some(answer)) => answer.reply(reply),
        Ok(None) => reply.error(
            "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
        ),
        Err(failure) => failure.reply(reply),
    }
    After::Continue
}

/// What an XGROUP subcommand answers.
enum Answer {
    Ok,
    Integer(i64),
}

impl Answer {
    fn reply(self, reply: &mut Reply<'_>) {
        match self {
            Answer::Ok => reply.ok(),
            Answer::Integer(value) => reply.integer(value),
        }
    }
}

fn xgroup_change(
    stream: &mut StreamValue,
    sub: &str,
    args: &Args,
    entries_read: Option<i64>,
    now_ms: i64,
) -> Result<Change<Answer>, Failure> {
    let group = args.get(3);
    match sub {
        "create" => {
            let id = match args.get(4) {
                b"$" => stream.last_id,
                id => parse_strict(id)?,
            };
            if !stream.create_group(group, Group::new(id, entries_read)) {
                return Err(Failure::message(
                    "BUSYGROUP Consumer Group name already exists",
                ));
            }
            Ok(Change::Changed(Answer::Ok))
        }
        "setid" => {
            let id = match args.get(4) {
                b"$" => stream.last_id,
                id => StreamId::parse(id, 0, false).map_err(|()| Failure::message(INVALID_ID))?,
            };
            stream.with_group(group, |group, _| {
                group.last_id = id;
                group.entries_read = entries_read;
            });
            Ok(Change::Changed(Answer::Ok))
        }
        "destroy" => {
            let destroyed = stream.destroy_group(group);
            Ok(Change::when(
                destroyed,
                Answer::Integer(i64::from(destroyed)),
            ))
        }
        "createconsumer" => {
            let created = stream
                .with_group(group, |group, _| group.create_consumer(args.get(4), now_ms))
                .unwrap_or(false);
            Ok(Change::when(created, Answer::Integer(i64::from(created))))
        }
        _ => {
            let deleted = stream
                .with_group(group, |group, _| group.delete_consumer(args.get(4)))
                .flatten();
            let pending = deleted.map_or(0, |held| i64::try_from(held).unwrap_or(i64::MAX));
            Ok(Change::when(deleted.is_some(), Answer::Integer(pending)))
        }
    }
}

/// XACK key group id [id ...]: the entries acknowledged.
pub fn xack(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |stream: &mut StreamValue| {
            if stream.group(args.get(2)).is_none() {
                return Ok(Change::Unchanged(0));
            }
            let ids = (3..args.len())
                .map(|position| parse_strict(args.get(position)))
                .collect::<Result<Vec<_>, _>>()?;
            let acked = stream
                .with_group(args.get(2), |group, _| {
                    ids.iter()
                        .filter(|&&id| group.remove_pending(id).is_some())
                        .count()
                })
                .unwrap_or(0);
            Ok(Change::when(acked > 0, acked))
        },
    );
    finish(reply, outcome, |reply, acked| {
        reply.integer(i64::try_from(acked.unwrap_or(0)).unwrap_or(i64::MAX));
    })
}

/// XPENDING's range form.
struct PendingRange<'a> {
    idle_min_ms: i64,
    start: StreamId,
    end: StreamId,
    count: usize,
    consumer: Option<&'a [u8]>,
}

fn parse_pending_range(args: &Args) -> Result<Option<PendingRange<'_>>, Failure> {
    let count = args.len();
    if count == 3 {
        return Ok(None);
    }
    if !(6..=9).contains(&count) {
        return Err(Failure::message(keys::SYNTAX_ERROR));
    }
    let mut first = 3;
    let mut idle_min_ms = 0;
    if args.get(3).eq_ignore_ascii_case(b"idle") {
        idle_min_ms =
            keys::parse_i64(args.get(4)).map_err(|()| Failure::message(keys::NOT_AN_INTEGER))?;
        if count < 8 {
            return Err(Failure::message(keys::SYNTAX_ERROR));
        }
        first += 2;
    }
    let entries = super::parse_count(args.get(first + 2))?;
    let start = parse_interval(args.get(first), 0, false)?;
    let end = parse_interval(args.get(first + 1), u64::MAX, true)?;
    Ok(Some(PendingRange {
        idle_min_ms,
        start,
        end,
        count: usize::try_from(entries).unwrap_or(usize::MAX),
        consumer: (first + 3 < count).then(|| args.get(first + 3)),
    }))
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
pub fn xpending(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let range = match parse_pending_range(args) {
        Ok(range) => range,
        Err(failure) => return finish(reply, Err::<(), _>(failure), |_, ()| {}),
    };
    let (key, group_name) = (args.get(1), args.get(2));
    let now_ms = now_ms_of(session);
    let target = Target::of(&session.state, session.database, key);
    let outcome = collection::read(&target, |stream: Option<&StreamValue>| {
        let Some(group) = stream.and_then(|stream| stream.group(group_name)) else {
            return Err(nogroup_key_or_group(key, group_name));
        };
        match &range {
            None => reply_pending_summary(reply, group),
            Some(range) => {
                if session.should_offload(range.count.min(group.pending.len())) {
                    return Ok(After::Offload);
                }
                reply_pending_range(reply, group, range, now_ms);
            }
        }
        Ok(After::Continue)
    });
    match outcome.and_then(|outcome| outcome) {
        Ok(after) => after,
        Err(failure) => finish(reply, Err::<(), _>(failure), |_, ()| {}),
    }
}

fn reply_pending_summary(reply: &mut Reply<'_>, group: &Group) {
    reply.array(4);
    reply.integer(i64::try_from(group.pending.len()).unwrap_or(i64::MAX));
    let (Some((first, _)), Some((last, _))) = (
        group.pending.first_key_value(),
        group.pending.last_key_value(),
    ) else {
        reply.null();
        reply.null();
        reply.null_array();
        return;
    };
    reply.bulk(&first.text_bytes());
    reply.bulk(&last.text_bytes());
    let holders: Vec<_> = group
        .consumers
        .iter()
        .filter(|(_, consumer)| !consumer.pending.is_empty())
        .collect();
    reply.array(holders.len());
    for (name, consumer) in holders {
        reply.array(2);
        reply.bulk(name);
        reply.bulk(consumer.pending.len().to_string().as_bytes());
    }
}

fn reply_pending_range(
    reply: &mut Reply<'_>,
    group: &Group,
    range: &PendingRange<'_>,
    now_ms: i64,
) {
    let ids: Box<dyn Iterator<Item = StreamId>> = match range.consumer {
        None => Box::new(group.pending.keys().copied()),
        Some(name) => match group.consumers.get(name) {
            Some(consumer) => Box::new(consumer.pending.iter().copied()),
            None => {
                reply.array(0);
                return;
            }
        },
    };
    let rows: Vec<(StreamId, &[u8], i64, u64)> = ids
        .skip_while(|&id| id < range.start)
        .take_while(|&id| id <= range.end)
        .filter_map(|id| {
            let pending = &group.pending[&id];
            let idle_ms = now_ms - pending.delivery_time_ms;
            (range.idle_min_ms == 0 || idle_ms >= range.idle_min_ms).then_some((
                id,
                pending.consumer.as_ref(),
                idle_ms.max(0),
                pending.delivery_count,
            ))
        })
        .take(range.count)
        .collect();
    reply.array(rows.len());
    for (id, consumer, idle_ms, delivery_count) in rows {
        reply.array(4);
        reply.bulk(&id.text_bytes());
        reply.bulk(consumer);
        reply.integer(idle_ms);
        reply.integer(i64::try_from(delivery_count).unwrap_or(i64::MAX));
    }
}

/// XCLAIM's options.
#[derive(Debug, Default)]
struct ClaimOptions {
    force: bool,
    justid: bool,
    /// IDLE or TIME as a delivery time.
    delivery_time_ms: Option<i64>,
    retry_count: Option<u64>,
    last_id: StreamId,
}

fn parse_claim_options(args: &Args, from: usize, now_ms: i64) -> Result<ClaimOptions, Failure> {
    let mut options = ClaimOptions::default();
    let mut position = from;
    let number = |position: usize, what: &str| {
        keys::parse_i64(args.get(position)).map_err(|()| {
            Failure::Message(format!("ERR Invalid {what} option argument for XCLAIM"))
        })
    };
    while position < args.len() {
        let more = args.len() - 1 - position;
        let option = args.get(position).to_ascii_lowercase();
        match option.as_slice() {
            b"force" => options.force = true,
            b"justid" => options.justid = true,
            b"idle" if more > 0 => {
                position += 1;
                options.delivery_time_ms = Some(now_ms.saturating_sub(number(position, "IDLE")?));
            }
            b"time" if more > 0 => {
                position += 1;
                options.delivery_time_ms = Some(number(position, "TIME")?);
            }
            b"retrycount" if more > 0 => {
                position += 1;
                options.retry_count = u64::try_from(number(position, "RETRYCOUNT")?).ok();
            }
            b"lastid" if more > 0 => {
                position += 1;
                options.last_id = parse_strict(args.get(position))?;
            }
            _ => {
                return Err(Failure::Message(format!(
                    "ERR Unrecognized XCLAIM option '{}'",
                    String::from_utf8_lossy(args.get(position))
                )));
            }
        }
        position += 1;
    }
    Ok(options)
}

/// What a claim answers: ids alone (JUSTID), or entries.
type Claimed = Vec<(StreamId, Option<Fields>)>;

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-ms]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
pub fn xclaim(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let (key, group_name, consumer) = (args.get(1), args.get(2), args.get(3));
    let now_ms = now_ms_of(session);
    let target = Target::of(&session.state, session.database, key);
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |stream: &mut StreamValue| {
            if stream.group(group_name).is_none() {
                return Err(nogroup_key_or_group(key, group_name));
            }
            let idle_min_ms = keys::parse_i64(args.get(4))
                .map_err(|()| Failure::message("ERR Invalid min-idle-time argument for XCLAIM"))?
                .max(0);
            let ids: Vec<StreamId> = (5..args.len())
                .map_while(|position| StreamId::parse(args.get(position), 0, true).ok())
                .collect();
            let options = parse_claim_options(args, 5 + ids.len(), now_ms)?;
            let claim = Claim {
                consumer,
                idle_min_ms,
                now_ms,
                options,
            };
            let outcome =
                stream.with_group(group_name, |group, entries| claim.run(group, entries, &ids));
            let (changed, claimed) = outcome.expect("the group was checked");
            Ok(Change::when(changed, claimed))
        },
    );
    match outcome {
        Ok(Some(claimed)) => reply_claimed(reply, &claimed),
        Ok(None) => nogroup_key_or_group(key, group_name).reply(reply),
        Err(failure) => failure.reply(reply),
    }
    After::Continue
}

fn reply_claimed(reply: &mut Reply<'_>, claimed: &Claimed) {
    reply.array(claimed.len());
    for (id, fields) in claimed {
        match fields {
            Some(fields) => reply_entry(reply, *id, fields),
            None => reply.bulk(&id.text_bytes()),
        }
    }
}

struct Claim<'a> {
    consumer: &'a [u8],
    idle_min_ms: i64,
    now_ms: i64,
    options: ClaimOptions,
}

impl Claim<'_> {
    /// Redis's `xclaimCommand` once its arguments are read: whether the group changed (to
    /// be written), and what was claimed.
    fn run(&self, group: &mut Group, entries: &Entries<'_>, ids: &[StreamId]) -> (bool, Claimed) {
        let mut changed = false;
        if self.options.last_id > group.last_id {
            group.last_id = self.options.last_id;
            changed = true;
        }
        let delivery_time_ms = match self.options.delivery_time_ms {
            Some(time) if (0..=self.now_ms).contains(&time) => time,
            _ => self.now_ms,
        };
        changed |= group.create_consumer(self.consumer, self.now_ms);
        set_seen(group, self.consumer, self.now_ms);
        let mut claimed = Vec::new();
        for &id in ids {
            let Some(fields) = entries.get(id) else {
                changed |= group.remove_pending(id).is_some();
                continue;
            };
            let existing = group.pending.get(&id).cloned();
            let (count, check_idle) = match &existing {
                Some(pending) => (pending.delivery_count, true),
                None if self.options.force => (1, false),
                None => continue,
            };
            if check_idle && self.idle_min_ms > 0 {
                let idle_ms = self.now_ms - existing.as_ref().map_or(0, |p| p.delivery_time_ms);
                if idle_ms < self.idle_min_ms {
                    continue;
                }
            }
            let count = match self.options.retry_count {
                Some(retry_count) => retry_count,
                None if !self.options.justid => count.saturating_add(1),
                None => count,
            };
            group.deliver(id, self.consumer, delivery_time_ms, count);
            set_active(group, self.consumer, self.now_ms);
            claimed.push((id, (!self.options.justid).then(|| fields.clone())));
            changed = true;
        }
        (changed, claimed)
    }
}

fn set_seen(group: &mut Group, consumer: &[u8], now_ms: i64) {
    if let Some(consumer) = group.consumers.get_mut(consumer) {
        consumer.seen_time_ms = now_ms;
    }
}

fn set_active(group: &mut Group, consumer: &[u8], now_ms: i64) {
    if let Some(consumer) = group.consumers.get_mut(consumer) {
        consumer.active_time_ms = now_ms;
    }
}

/// The most XAUTOCLAIM's COUNT may be (Redis: `LONG_MAX / max(sizeof(streamID), 10)`).
const AUTOCLAIM_COUNT_MAX: i64 = i64::MAX / 16;
/// PEL entries XAUTOCLAIM may look at per entry it may claim.
const AUTOCLAIM_ATTEMPTS_FACTOR: usize = 10;

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]:
/// `[next-start, claimed, deleted]`.
pub fn xautoclaim(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let parsed = parse_autoclaim(args);
    let (idle_min_ms, start, count, justid) = match parsed {
        Ok(parsed) => parsed,
        Err(failure) => return finish(reply, Err::<(), _>(failure), |_, ()| {}),
    };
    let (key, group_name, consumer) = (args.get(1), args.get(2), args.get(3));
    let now_ms = now_ms_of(session);
    let may_offload = session.may_offload;
    let target = Target::of(&session.state, session.database, key);
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |stream: &mut StreamValue| {
            let Some(group) = stream.group(group_name) else {
                return Err(nogroup_key_or_group(key, group_name));
            };
            if may_offload && count.min(group.pending.len()) >= super::LONG_COMMAND_COST_MIN {
                return Ok(Change::Unchanged(None));
            }
            let auto = AutoClaim {
                consumer,
                idle_min_ms,
                now_ms,
                count,
                justid,
            };
            let outcome =
                stream.with_group(group_name, |group, entries| auto.run(group, entries, start));
            let (changed, answer) = outcome.expect("the group was checked");
            Ok(Change::when(changed, Some(answer)))
        },
    );
    match outcome {
        Ok(Some(None)) => return After::Offload,
        Ok(Some(Some((next, claimed, deleted)))) => {
            reply.array(3);
            reply.bulk(&next.text_bytes());
            reply_claimed(reply, &claimed);
            reply.array(deleted.len());
            deleted.iter().for_each(|id| reply.bulk(&id.text_bytes()));
        }
        Ok(None) => nogroup_key_or_group(key, group_name).reply(reply),
        Err(failure) => failure.reply(reply),
    }
    After::Continue
}

fn parse_autoclaim(args: &Args) -> Result<(i64, StreamId, usize, bool), Failure> {
    let idle_min_ms = keys::parse_i64(args.get(4))
        .map_err(|()| Failure::message("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let start = parse_interval(args.get(5), 0, false)?;
    let (mut count, mut justid) = (100_usize, false);
    let mut position = 6;
    while position < args.len() {
        let more = args.len() - 1 - position;
        let option = args.get(position).to_ascii_lowercase();
        if option == b"count" && more > 0 {
            let asked = keys::parse_i64(args.get(position + 1))
                .ok()
                .filter(|asked| (1..=AUTOCLAIM_COUNT_MAX).contains(asked))
                .ok_or_else(|| Failure::message("ERR COUNT must be > 0"))?;
            count = usize::try_from(asked).unwrap_or(usize::MAX);
            position += 1;
        } else if option == b"justid" {
            justid = true;
        } else {
            return Err(Failure::message(keys::SYNTAX_ERROR));
        }
        position += 1;
    }
    Ok((idle_min_ms, start, count, justid))
}

struct AutoClaim<'a> {
    consumer: &'a [u8],
    idle_min_ms: i64,
    now_ms: i64,
    count: usize,
    justid: bool,
}

impl AutoClaim<'_> {
    /// Redis's `xautoclaimCommand` once its arguments are read: whether the group changed,
    /// and (next start, claimed, deleted ids).
    fn run(
        &self,
        group: &mut Group,
        entries: &Entries<'_>,
        start: StreamId,
    ) -> (bool, (StreamId, Claimed, Vec<StreamId>)) {
        let mut changed = group.create_consumer(self.consumer, self.now_ms);
        set_seen(group, self.consumer, self.now_ms);
        let mut attempts = self.count.saturating_mul(AUTOCLAIM_ATTEMPTS_FACTOR);
        let mut count = self.count;
        let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
        let mut cursor = Some(start);
        while attempts > 0 && count > 0 {
            let Some(id) = cursor.and_then(|from| next_pending(group, from)) else {
                cursor = None;
                break;
            };
            attempts -= 1;
            cursor = id.next();
            let Some(fields) = entries.get(id) else {
                group.remove_pending(id);
                deleted.push(id);
                count -= 1;
                changed = true;
                continue;
            };
            let pending = &group.pending[&id];
            if self.idle_min_ms > 0 && self.now_ms - pending.delivery_time_ms < self.idle_min_ms {
                continue;
            }
            let delivery_count = if self.justid {
                pending.delivery_count
            } else {
                pending.delivery_count.saturating_add(1)
            };
            group.deliver(id, self.consumer, self.now_ms, delivery_count);
            set_active(group, self.consumer, self.now_ms);
            claimed.push((id, (!self.justid).then(|| fields.clone())));
            count -= 1;
            changed = true;
        }
        let next = cursor
            .and_then(|from| next_pending(group, from))
            .unwrap_or(StreamId::MIN);
        (changed, (next, claimed, deleted))
    }
}

/// The first pending id at or after `from`.
fn next_pending(group: &Group, from: StreamId) -> Option<StreamId> {
    group.pending.range(from..).next().map(|(id, _)| *id)
}

const XINFO_SUBCOMMANDS: &[(&str, i32)] =
    &[("consumers", 4), ("groups", 3), ("help", 2), ("stream", -3)];

const XINFO_HELP: &[&str] = &[
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
];

/// XINFO STREAM key [FULL [COUNT count]] | GROUPS key | CONSUMERS key group | HELP
pub fn xinfo(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let sub = match check_subcommand("xinfo", XINFO_SUBCOMMANDS, args) {
        Ok(sub) => sub,
        Err(text) => return super::fail(reply, &text),
    };
    if sub == "help" {
        reply_help(reply, "XINFO", XINFO_HELP);
        return After::Continue;
    }
    let key = args.get(2);
    let now_ms = now_ms_of(session);
    let target = Target::of(&session.state, session.database, key);
    let outcome = collection::read(&target, |stream: Option<&StreamValue>| {
        let Some(stream) = stream else {
            return Err(Failure::message("ERR no such key"));
        };
        match sub.as_str() {
            "consumers" => {
                let group = stream
                    .group(args.get(3))
                    .ok_or_else(|| nogroup_for_key(args.get(3), key))?;
                reply_consumers(reply, group, now_ms);
            }
            "groups" => reply_groups(reply, stream),
            _ => return reply_stream_info(session, args, reply, stream),
        }
        Ok(After::Continue)
    });
    match outcome.and_then(|outcome| outcome) {
        Ok(after) => after,
        Err(failure) => finish(reply, Err::<(), _>(failure), |_, ()| {}),
    }
}

fn reply_consumers(reply: &mut Reply<'_>, group: &Group, now_ms: i64) {
    reply.array(group.consumers.len());
    for (name, consumer) in &group.consumers {
        reply.map(4);
        reply.bulk(b"name");
        reply.bulk(name);
        reply.bulk(b"pending");
        reply.integer(i64::try_from(consumer.pending.len()).unwrap_or(i64::MAX));
        reply.bulk(b"idle");
        reply.integer((now_ms - consumer.seen_time_ms).max(0));
        reply.bulk(b"inactive");
        reply.integer(match consumer.active_time_ms {
            -1 => -1,
            active => now_ms - active,
        });
    }
}

fn reply_entries_read(reply: &mut Reply<'_>, read: Option<i64>) {
    match read {
        Some(read) => reply.integer(read),
        None => reply.null(),
    }
}

fn reply_groups(reply: &mut Reply<'_>, stream: &StreamValue) {
    let entries = stream.entries();
    reply.array(stream.groups().len());
    for (name, group) in stream.groups() {
        reply.map(6);
        reply.bulk(b"name");
        reply.bulk(name);
        reply.bulk(b"consumers");
        reply.integer(i64::try_from(group.consumers.len()).unwrap_or(i64::MAX));
        reply.bulk(b"pending");
        reply.integer(i64::try_from(group.pending.len()).unwrap_or(i64::MAX));
        reply.bulk(b"last-delivered-id");
        reply.bulk(&group.last_id.text_bytes());
        reply.bulk(b"entries-read");
        reply_entries_read(reply, group.entries_read);
        reply.bulk(b"lag");
        reply_entries_read(reply, entries.lag_of(group));
    }
}

/// XINFO STREAM's head: the fields both forms share.
fn reply_stream_head(reply: &mut Reply<'_>, stream: &StreamValue) {
    // Osprey has no radix tree: these count the nodes Redis would keep (`value::Node`).
    let blocks = stream.node_count();
    let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    reply.bulk(b"length");
    reply.integer(as_i64(stream.len()));
    reply.bulk(b"radix-tree-keys");
    reply.integer(as_i64(blocks));
    reply.bulk(b"radix-tree-nodes");
    reply.integer(as_i64(blocks + 1));
    reply.bulk(b"last-generated-id");
    reply.bulk(&stream.last_id.text_bytes());
    reply.bulk(b"max-deleted-entry-id");
    reply.bulk(&stream.max_deleted_id.text_bytes());
    reply.bulk(b"entries-added");
    reply.integer(stream.entries_added);
    reply.bulk(b"recorded-first-entry-id");
    reply.bulk(stream.first_id().text().as_bytes());
}

fn reply_stream_info(
    session: &Session,
    args: &Args,
    reply: &mut Reply<'_>,
    stream: &StreamValue,
) -> Result<After, Failure> {
    let options = args.len() - 3;
    if options == 0 {
        reply.map(10);
        reply_stream_head(reply, stream);
        reply.bulk(b"groups");
        reply.integer(i64::try_from(stream.groups().len()).unwrap_or(i64::MAX));
        for (name, entry) in [
            (&b"first-entry"[..], stream.first()),
            (&b"last-entry"[..], stream.last()),
        ] {
            reply.bulk(name);
            match entry {
                Some((id, fields)) => reply_entry(reply, id, fields),
                None => reply.null(),
            }
        }
        return Ok(After::Continue);
    }
    let syntax = || Failure::Message(subcommand_error("XINFO", args.get(1)));
    if (options != 1 && options != 3) || !args.get(3).eq_ignore_ascii_case(b"full") {
        return Err(syntax());
    }
    let mut count = 10_i64;
    if options == 3 {
        if !args.get(4).eq_ignore_ascii_case(b"count") {
            return Err(syntax());
        }
        count =
            keys::parse_i64(args.get(5)).map_err(|()| Failure::message(keys::NOT_AN_INTEGER))?;
        if count < 0 {
            count = 10;
        }
    }
    let limit = super::count_or_all(u64::try_from(count).unwrap_or(0));
    if session.should_offload(stream.len().min(limit)) {
        return Ok(After::Offload);
    }
    reply_stream_full(reply, stream, limit);
    Ok(After::Continue)
}

fn reply_stream_full(reply: &mut Reply<'_>, stream: &StreamValue, limit: usize) {
    reply.map(9);
    reply_stream_head(reply, stream);
    reply.bulk(b"entries");
    let entries: Vec<_> = stream
        .range(StreamId::MIN, StreamId::MAX, false)
        .take(limit)
        .collect();
    reply.array(entries.len());
    entries
        .into_iter()
        .for_each(|(id, fields)| reply_entry(reply, id, fields));
    reply.bulk(b"groups");
    let counters = stream.entries();
    reply.array(stream.groups().len());
    for (name, group) in stream.groups() {
        reply.map(7);
        reply.bulk(b"name");
        reply.bulk(name);
        reply.bulk(b"last-delivered-id");
        reply.bulk(&group.last_id.text_bytes());
        reply.bulk(b"entries-read");
        reply_entries_read(reply, group.entries_read);
        reply.bulk(b"lag");
        reply_entries_read(reply, counters.lag_of(group));
        reply.bulk(b"pel-count");
        reply.integer(i64::try_from(group.pending.len()).unwrap_or(i64::MAX));
        reply.bulk(b"pending");
        let pending: Vec<_> = group.pending.iter().take(limit).collect();
        reply.array(pending.len());
        for (id, entry) in pending {
            reply.array(4);
            reply.bulk(&id.text_bytes());
            reply.bulk(&entry.consumer);
            reply.integer(entry.delivery_time_ms);
            reply.integer(i64::try_from(entry.delivery_count).unwrap_or(i64::MAX));
        }
        reply.bulk(b"consumers");
        reply.array(group.consumers.len());
        for (name, consumer) in &group.consumers {
            reply.map(5);
            reply.bulk(b"name");
            reply.bulk(name);
            reply.bulk(b"seen-time");
            reply.integer(consumer.seen_time_ms);
            reply.bulk(b"active-time");
            reply.integer(consumer.active_time_ms);
            reply.bulk(b"pel-count");
            reply.integer(i64::try_from(consumer.pending.len()).unwrap_or(i64::MAX));
            reply.bulk(b"pending");
            let held: Vec<_> = consumer.pending.iter().take(limit).collect();
            reply.array(held.len());
            for id in held {
                let entry = &group.pending[id];
                reply.array(3);
                reply.bulk(&id.text_bytes());
                reply.integer(entry.delivery_time_ms);
                reply.integer(i64::try_from(entry.delivery_count).unwrap_or(i64::MAX));
            }
        }
    }
}
