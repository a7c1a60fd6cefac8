//! The command table: name, arity and handler of every Redis command Osprey serves, and the
//! connection and server commands themselves.
//!
//! Arity follows Redis: a positive arity is the exact argument count (command name included),
//! a negative one the minimum.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};

use wire_resp::Args;

use super::cost::{self, Reads};
use super::in_flight::InFlight;
use super::reply::Reply;
use crate::state::ServerState;

use super::{
    After, Session, acl, bitmaps, blocking, client_control, command_stats, databases, diagnostics,
    dump, functions, geo, hashes, hyperloglog, indexes, keys, keyspace, lcs, lifecycle, lists,
    memory_limit, monitor, parameters, pops, pubsub, scripting, server_info, sets, slowlog, sort,
    streams, strings, transactions, zset_algebra, zsets,
};

/// The Redis version Osprey answers as (HELLO, INFO): the command set it follows.
pub const REDIS_VERSION: &str = "7.2.0";

/// A command's handler.
pub type Handler = fn(&mut Session, &Args, &mut Reply<'_>) -> After;

/// A command: lower-case name, arity, handler.
pub type Command = (&'static str, i32, Handler);

/// The connection and server commands.
const SERVER_COMMANDS: &[Command] = &[
    ("client", -2, client),
    ("command", -1, command),
    ("echo", 2, echo),
    ("hello", -1, hello),
    ("ping", -1, ping),
    ("quit", -1, quit),
    ("reset", 1, reset),
    ("time", 1, time),
];

/// Every command table.
const TABLES: &[&[Command]] = &[
    SERVER_COMMANDS,
    acl::COMMANDS,
    databases::COMMANDS,
    dump::COMMANDS,
    keys::COMMANDS,
    keyspace::COMMANDS,
    strings::COMMANDS,
    lcs::COMMANDS,
    bitmaps::COMMANDS,
    hyperloglog::COMMANDS,
    hashes::COMMANDS,
    lists::COMMANDS,
    pops::COMMANDS,
    blocking::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    zset_algebra::COMMANDS,
    geo::COMMANDS,
    streams::COMMANDS,
    sort::COMMANDS,
    transactions::COMMANDS,
    scripting::COMMANDS,
    functions::COMMANDS,
    server_info::COMMANDS,
    parameters::COMMANDS,
    slowlog::COMMANDS,
    diagnostics::COMMANDS,
    indexes::COMMANDS,
    pubsub::COMMANDS,
    monitor::COMMANDS,
    lifecycle::COMMANDS,
];

/// Every command by lower-case name, with where it names the collections it reads whole (for
/// its cost estimate, judged once here rather than per call).
/// The third field is where `command_stats` counts it.
/// Hashed with Fx, not SipHash: every command looks its name up, the table is fixed at start,
/// and a client's names can only miss (no flooding of a table that never grows).
static BY_NAME: LazyLock<rustc_hash::FxHashMap<&'static [u8], Found>> = LazyLock::new(|| {
    let mut by_name = rustc_hash::FxHashMap::default();
    for (slot, &command) in TABLES.iter().copied().flatten().enumerate() {
        let found = (
            command,
            cost::reads(command.0),
            command_stats::CommandSlot::of_rank(slot),
        );
        let previous = by_name.insert(command.0.as_bytes(), found);
        assert!(previous.is_none(), "command {} defined twice", command.0);
    }
    by_name
});

/// A command found in the table: itself, what it reads whole, and where `command_stats`
/// counts it.
type Found = (Command, Reads, command_stats::CommandSlot);

/// Longest command name looked up (longer names are unknown).
const NAME_BYTES_MAX: usize = 32;

/// Runs one request: looks the command up, checks its arity, calls it (or queues it inside
/// MULTI).
pub fn execute(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    // In flight before the check for a script: a connection's step is in already; a command
    // on the pool, forwarded or retried after a wake-up enters here.
    if !InFlight::is_here() && !scripting::in_script() && !transactions::in_exec() {
        let state = Arc::clone(&session.state);
        let _entered = state.scripts.in_flight.enter();
        return execute_in_flight(session, args, reply);
    }
    execute_in_flight(session, args, reply)
}

/// [`execute`] once the command is in flight.
fn execute_in_flight(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let arrived = !scripting::in_script() && !transactions::in_exec();
    if arrived {
        // Redis's rule for a failed call: an error written since the last command ended.
        reply.errors_since_mark();
    }
    if let Some(after) = scripting::while_busy(session, args, reply) {
        if after == After::Continue {
            // Answered BUSY or EXECABORT; a command that waits for the script's turn runs later.
            command_stats::reject(args);
        }
        if after == After::Continue && args.is_command(b"exec") {
            // Answered EXECABORT: the transaction is over, as Redis's `execCommandAbort` ends it.
            transactions::discard_all(session);
        } else if after == After::Continue {
            // Answered BUSY: inside MULTI the refusal dooms the transaction, as any command
            // Redis rejects before queuing it does (EXEC then answers EXECABORT).
            transactions::doom(session);
        }
        return after;
    }
    if arrived && memory_limit::refuses(&session.state, args, session.transaction.is_some()) {
        // Inside MULTI the refusal dooms the transaction, as Redis's `rejectCommand` does.
        reply.error(memory_limit::OOM);
        command_stats::reject(args);
        transactions::doom(session);
        return After::Continue;
    }
    if let Some(after) = transactions::queue_if_in_multi(session, args, reply) {
        return after;
    }
    let ((name, _, handler), reads, slot) = match checked(&session.state, args) {
        Ok(found) => found,
        Err(message) => {
            reply.error(&message);
            command_stats::reject(args);
            return After::Continue;
        }
    };
    if let Some(refusal) = pubsub::refusal(session, name) {
        reply.error(&refusal);
        command_stats::reject(args);
        return After::Continue;
    }
    if let Some(refusal) = monitor::refusal(session, args) {
        reply.error(refusal);
        command_stats::reject(args);
        return After::Continue;
    }
    if session.may_offload && session.should_offload(cost::estimate(session, name, reads, args)) {
        return After::Offload;
    }
    let notifying = pubsub::notify::before(session, name, args);
    let started = std::time::Instant::now();
    let after = handler(session, args, reply);
    let stat_slot = slot.resolve(args);
    if arrived
        && after != After::Offload
        && after != After::AwaitScript
        && let Some(stat_slot) = stat_slot
    {
        // A blocked command shows too, as Redis's CLIENT LIST shows it while it waits.
        let shown = match slot.is_container() {
            true => command_stats::name(stat_slot),
            false => name,
        };
        session.last_command = Some((shown, started));
    }
    if matches!(after, After::Continue | After::Close | After::Block) {
        // Shown once it has run (a blocked command when it first blocks, as Redis shows it).
        monitor::feed(session, args);
    }
    if matches!(after, After::Continue | After::Close) {
        let elapsed = started.elapsed();
        let failed = reply.errors_since_mark();
        if let Some(slot) = stat_slot {
            command_stats::record(slot, elapsed, failed);
        }
        if session.state.resp_slowlog.is_on() && !slowlog::skips(name) {
            session.state.resp_slowlog.record(session, args, elapsed);
        }
    }
    if let Some(pending) = notifying.filter(|_| after != After::Offload) {
        pubsub::notify::after(session, args, pending);
    }
    // A handler that sends itself to the pool (a long range, KEYS) is counted when it runs.
    if !matches!(after, After::Offload | After::AwaitScript) {
        session.state.resp_commands.fetch_add(1, Ordering::Relaxed);
    }
    after
}

/// The handler of a known command called with a valid argument count, or Redis's error (an
/// unknown command is counted in `state`).
pub fn check(state: &ServerState, args: &Args) -> Result<Handler, String> {
    checked(state, args).map(|((_, _, handler), _, _)| handler)
}

/// A known command called with a valid argument count, and where it reads collections whole.
/// An unknown command (one of Redis's that Osprey does not serve yet, or a typo) is counted in
/// INFO's `rejected_unknown_commands`.
fn checked(state: &ServerState, args: &Args) -> Result<Found, String> {
    let Some(found @ ((command, arity, _), _, _)) = lookup(args.get(0)) else {
        state.resp_unknown_commands.fetch_add(1, Ordering::Relaxed);
        return Err(unknown_command(args));
    };
    let count = i32::try_from(args.len()).unwrap_or(i32::MAX);
    if (arity > 0 && count != arity) || (arity < 0 && count < -arity) {
        return Err(format!(
            "ERR wrong number of arguments for '{command}' command"
        ));
    }
    Ok(found)
}

/// The name of every command served, in table order.
pub(super) fn names() -> impl Iterator<Item = &'static str> {
    TABLES.iter().copied().flatten().map(|command| command.0)
}

/// The table's name and arity of the command named `name` (lower case).
pub(super) fn arity_of(name: &str) -> Option<(&'static str, i32)> {
    lookup(name.as_bytes()).map(|((name, arity, _), _, _)| (name, arity))
}

/// The `command_stats` slot of the command named `name` (any case).
pub(super) fn slot_of(name: &[u8]) -> Option<command_stats::CommandSlot> {
    lookup(name).map(|(_, _, slot)| slot)
}

fn lookup(name: &[u8]) -> Option<Found> {
    let mut lower = [0u8; NAME_BYTES_MAX];
    let lower = lower.get_mut(..name.len())?;
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    BY_NAME.get(&*lower).copied()
}

/// Redis's text: `ERR unknown command 'x', with args beginning with: 'a' 'b' `. As in Redis's
/// `processCommand`, arguments are listed until their text reaches [`ARGS_TEXT_BYTES_MAX`], the
/// last one cut to what room is left.
fn unknown_command(args: &Args) -> String {
    let mut text = format!(
        "ERR unknown command '{}', with args beginning with: ",
        printable(args.get(0))
    );
    let args_start = text.len();
    for position in 1..args.len() {
        let listed_bytes = text.len() - args_start;
        if listed_bytes >= ARGS_TEXT_BYTES_MAX {
            break;
        }
        let arg = args.get(position);
        let shown = &arg[..arg.len().min(ARGS_TEXT_BYTES_MAX - listed_bytes)];
        let _ = write!(text, "'{}' ", printable(shown));
    }
    text
}

/// Redis 7's error for a subcommand of `command` that is not in `known` (lower case), or one
/// of them called with the wrong argument count.
pub fn subcommand_error(command: &str, known: &[&str], args: &Args) -> String {
    let subcommand = String::from_utf8_lossy(args.get(1)).to_ascii_lowercase();
    if known.contains(&subcommand.as_str()) {
        return format!("ERR wrong number of arguments for '{command}|{subcommand}' command");
    }
    format!(
        "ERR unknown subcommand '{}'. Try {} HELP.",
        printable(args.get(1)),
        command.to_ascii_uppercase()
    )
}

/// How much of the arguments an unknown-command error lists (Redis's 128).
const ARGS_TEXT_BYTES_MAX: usize = 128;

/// At most 128 bytes of an argument, without line breaks, for an error message.
fn printable(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(128)];
    String::from_utf8_lossy(shown).replace(['\r', '\n'], " ")
}

fn ping(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    if pubsub::ping_when_subscribed(session, args, reply) {
        return After::Continue;
    }
    match args.len() {
        1 => reply.simple("PONG"),
        2 => reply.bulk(args.get(1)),
        _ => reply.error("ERR wrong number of arguments for 'ping' command"),
    }
    After::Continue
}

fn echo(_: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    reply.bulk(args.get(1));
    After::Continue
}

fn quit(_: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    reply.ok();
    After::Close
}

fn reset(session: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    session.protocol = 2;
    session.seldom.name = None;
    session.database = databases::Database::default();
    session.transaction = None;
    session.watched.clear();
    session.pubsub.clear();
    session.reply_mode = client_control::ReplyMode::On;
    (session.no_evict, session.no_touch) = (false, false);
    acl::log_out(session);
    reply.set_protocol(2);
    reply.simple("RESET");
    After::Continue
}

fn time(_: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    reply.array(2);
    reply.bulk(now.as_secs().to_string().as_bytes());
    reply.bulk(now.subsec_micros().to_string().as_bytes());
    After::Continue
}

/// HELLO [protover [AUTH user pass] [SETNAME name]]
fn hello(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let mut protocol = session.protocol;
    let mut position = 1;
    if args.len() > 1 {
        match keys::parse_i64(args.get(1)) {
            Ok(version @ (2 | 3)) => protocol = version as u8,
            Ok(_) => {
                reply.error("NOPROTO unsupported protocol version");
                return After::Continue;
            }
            Err(()) => {
                reply.error("ERR Protocol version is not an integer or out of range");
                return After::Continue;
            }
        }
        position = 2;
    }
    let mut login = None;
    let mut name = None;
    while position < args.len() {
        let option = args.get(position).to_ascii_uppercase();
        match option.as_slice() {
            b"AUTH" if position + 2 < args.len() => {
                login = Some((position + 1, position + 2));
                position += 3;
            }
            b"SETNAME" if position + 1 < args.len() => {
                name = Some(args.get(position + 1).to_vec());
                position += 2;
            }
            _ => {
                reply.error(&format!(
                    "ERR Syntax error in HELLO option '{}'",
                    printable(args.get(position))
                ));
                return After::Continue;
            }
        }
    }
    match login {
        Some((user, password)) => match acl::log_in(session, args.get(user), args.get(password)) {
            acl::Login::Done => {}
            acl::Login::Offload => return After::Offload,
            acl::Login::Refused(message) => {
                reply.error(message);
                return After::Continue;
            }
        },
        None => {
            if let Some(refusal) = acl::hello_refusal(session) {
                reply.error(refusal);
                return After::Continue;
            }
        }
    }
    if name.is_some() {
        session.seldom.name = name;
    }
    session.protocol = protocol;
    reply.set_protocol(protocol);
    reply.map(7);
    for (field, value) in [("server", "redis"), ("version", REDIS_VERSION)] {
        reply.bulk(field.as_bytes());
        reply.bulk(value.as_bytes());
    }
    reply.bulk(b"proto");
    reply.integer(i64::from(protocol));
    reply.bulk(b"id");
    reply.integer(i64::try_from(session.client_id).unwrap_or(i64::MAX));
    for (field, value) in [("mode", "standalone"), ("role", "master")] {
        reply.bulk(field.as_bytes());
        reply.bulk(value.as_bytes());
    }
    reply.bulk(b"modules");
    reply.array(0);
    After::Continue
}

/// CLIENT ID | SETNAME name | GETNAME | SETINFO attr value | INFO | LIST | UNBLOCK id [reason]
fn client(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = args.get(1).to_ascii_uppercase();
    match (subcommand.as_slice(), args.len()) {
        (b"ID", 2) => reply.integer(i64::try_from(session.client_id).unwrap_or(i64::MAX)),
        (b"GETNAME", 2) => match &session.seldom.name {
            Some(name) => reply.bulk(name),
            None => reply.null(),
        },
        (b"SETNAME", 3) => {
            let name = args.get(2);
            if name.iter().any(|&b| b <= b' ' || b > b'~') {
                reply.error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            } else {
                session.seldom.name = (!name.is_empty()).then(|| name.to_vec());
                reply.ok();
            }
        }
        (b"SETINFO", 4) => reply.ok(),
        (b"INFO", 2) => {
            let line = session.registration.as_ref().map(|registration| {
                session.publish_shown(None);
                registration.entry.line()
            });
            reply.bulk(line.unwrap_or_default().as_bytes());
        }
        (b"LIST", _) => client_list(session, args, reply),
        (b"UNBLOCK", 3 | 4) => blocking::client_unblock(session, args, reply),
        _ => {
            if let Some(after) = client_control::client(session, args, reply) {
                return after;
            }
            reply.error(&subcommand_error("client", CLIENT_SUBCOMMANDS, args));
        }
    }
    After::Continue
}

/// The CLIENT subcommands Osprey knows (for their arity errors).
const CLIENT_SUBCOMMANDS: &[&str] = &[
    "caching",
    "getname",
    "getredir",
    "help",
    "id",
    "info",
    "kill",
    "list",
    "no-evict",
    "no-touch",
    "pause",
    "reply",
    "setinfo",
    "setname",
    "tracking",
    "trackinginfo",
    "unblock",
    "unpause",
];

/// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id [id ...]]: a line per connection.
fn client_list(session: &mut Session, args: &Args, reply: &mut Reply<'_>) {
    let mut ids: Option<Vec<u64>> = None;
    let mut kind: Option<Vec<u8>> = None;
    let mut position = 2;
    while position < args.len() {
        let option = args.get(position).to_ascii_uppercase();
        match option.as_slice() {
            b"TYPE" if position + 1 < args.len() => {
                kind = Some(args.get(position + 1).to_ascii_lowercase());
                position += 2;
            }
            b"ID" if position + 1 < args.len() => {
                let mut found = Vec::new();
                for arg in (position + 1..args.len()).map(|p| args.get(p)) {
                    match std::str::from_utf8(arg)
                        .ok()
                        .and_then(|t| t.parse::<u64>().ok())
                    {
                        Some(id) if id > 0 => found.push(id),
                        _ => return reply.error("ERR Invalid client ID"),
                    }
                }
                ids = Some(found);
                position = args.len();
            }
            _ => return reply.error("ERR syntax error"),
        }
    }
    let pubsub = match kind.as_deref() {
        None => None,
        Some(b"normal") => Some(false),
        Some(b"pubsub") => Some(true),
        // Osprey has no replication clients: none is listed.
        Some(b"master" | b"replica" | b"slave") => return reply.bulk(b""),
        Some(other) => {
            let text = String::from_utf8_lossy(other);
            return reply.error(&format!("ERR Unknown client type '{text}'"));
        }
    };
    session.publish_shown(None);
    let lines = session.state.resp_clients.list(ids.as_deref(), pubsub);
    reply.bulk(lines.as_bytes());
}

/// COMMAND [COUNT | DOCS | INFO ...]: enough for redis-cli and client libraries.
fn command(_: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = if args.len() > 1 {
        args.get(1).to_ascii_uppercase()
    } else {
        Vec::new()
    };
    match subcommand.as_slice() {
        b"COUNT" => reply.integer(BY_NAME.len() as i64),
        b"DOCS" => super::docs::command_docs(args, reply),
        b"GETKEYS" | b"GETKEYSANDFLAGS" if args.len() < 4 => {
            reply.error(&format!(
                "ERR wrong number of arguments for 'command|{}' command",
                String::from_utf8_lossy(&subcommand).to_ascii_lowercase()
            ));
        }
        b"GETKEYS" => super::command_keys::command_getkeys(args, reply, false),
        b"GETKEYSANDFLAGS" => super::command_keys::command_getkeys(args, reply, true),
        b"INFO" => {
            reply.array(args.len() - 2);
            for position in 2..args.len() {
                match lookup(args.get(position)) {
                    Some(((name, arity, _), _, _)) => command_info(reply, name, arity),
                    None => reply.null(),
                }
            }
        }
        b"" => {
            reply.array(BY_NAME.len());
            for ((name, arity, _), _, _) in BY_NAME.values() {
                command_info(reply, name, *arity);
            }
        }
        _ => reply.error(&format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            printable(args.get(1))
        )),
    }
    After::Continue
}

/// One entry of COMMAND, in Redis 7's shape (see the body).
fn command_info(reply: &mut Reply<'_>, name: &str, arity: i32) {
    // Redis 7's ten fields: name, arity, flags, first key, last key, step, ACL categories,
    // tips, key specifications, subcommands (clients index all ten).
    reply.array(10);
    reply.bulk(name.as_bytes());
    reply.integer(i64::from(arity));
    reply.array(0);
    let (first, last, step) = key_positions(name);
    reply.integer(first);
    reply.integer(last);
    reply.integer(step);
    for _ in 0..4 {
        reply.array(0);
    }
}

/// Where a command's keys are, as COMMAND reports them: first, last (-1 = the last argument)
/// and step; (0, 0, 0) for a command without keys.
pub(super) fn key_positions(name: &str) -> (i64, i64, i64) {
    match name {
        "client" | "command" | "config" | "dbsize" | "discard" | "echo" | "exec" | "flushall"
        | "flushdb" | "hello" | "info" | "keys" | "multi" | "ping" | "quit" | "randomkey"
        | "reset" | "scan" | "select" | "time" | "unwatch" | "publish" | "pubsub" | "subscribe"
        | "psubscribe" | "unsubscribe" | "punsubscribe" | "sunsubscribe" | "script" | "swapdb"
        | "slowlog" | "latency" | "debug" | "wait" | "waitaof" | "pfselftest" | "monitor"
        | "save" | "bgsave" | "lastsave" | "shutdown" => (0, 0, 0),
        "ssubscribe" => (1, -1, 1),
        // Their keys follow a key count or a keyword: Redis reports them as movable keys.
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "zunion"
        | "zinter" | "zdiff" | "zintercard" | "xread" | "xreadgroup" => (0, 0, 0),
        // The destination; the keys after the count are movable.
        "zunionstore" | "zinterstore" | "zdiffstore" => (1, 1, 1),
        "del" | "exists" | "mget" | "sdiff" | "sdiffstore" | "sinter" | "sinterstore"
        | "sunion" | "sunionstore" | "touch" | "unlink" | "watch" | "pfcount" | "pfmerge" => {
            (1, -1, 1)
        }
        "sintercard" => (2, -1, 1),
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => (1, -2, 1),
        "lmove" | "rpoplpush" | "blmove" | "brpoplpush" => (1, 2, 1),
        // A key count comes first: Redis reports these as keyless here too.
        "lmpop" | "zmpop" | "blmpop" | "bzmpop" => (0, 0, 0),
        "bitop" => (2, -1, 1),
        "object" | "memory" | "pfdebug" => (2, 2, 1),
        "mset" | "msetnx" => (1, -1, 2),
        "copy" | "rename" | "renamenx" | "smove" | "geosearchstore" | "lcs" | "zrangestore" => {
            (1, 2, 1)
        }
        _ => (1, 1, 1),
    }
}
