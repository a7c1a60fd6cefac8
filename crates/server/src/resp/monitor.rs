//! MONITOR: a connection that watches every command the server runs, one line each, as
//! Redis writes them (`+<unix time with µs> [<db> <client addr>] "<arg>" "<arg>" ...`).
//!
//! - A command is shown once it has run (so a transaction shows MULTI, its commands at EXEC,
//!   then EXEC), with the arguments it arrived with; a script or function is shown as it
//!   starts (EVAL, EVALSHA, FCALL), so that the commands it calls, shown as `[<db> lua]`,
//!   come after it. Commands rejected before they run (unknown, wrong arity, queued in MULTI)
//!   are not shown, nor Redis's `admin` commands (CONFIG, DEBUG, CLIENT KILL, ...). The
//!   arguments of AUTH, of HELLO's AUTH and of MIGRATE's AUTH and AUTH2 show as
//!   `(redacted)`.
//! - Lines reach a monitor through the same bounded mailbox as published messages
//!   (`pubsub/hub.rs`), within the `normal` class's hard limit (else `client-memory-max`): a
//!   monitor that does not keep up is disconnected, never grows memory without bound.
//! - A monitor may still send commands that touch no data (PING, CLIENT, INFO, RESET, QUIT);
//!   any other gets Redis's `Replica can't interact with the keyspace`. RESET ends the mode.
//!
//! Invariants:
//! - A connection is registered in the hub's monitors exactly while its `Subscriptions` say
//!   it monitors; the registration goes with the connection (its `Subscriptions` drop).
//! - With no monitor, a command pays one atomic load (`Hub::has_monitors`).

use std::fmt::Write as _;
use wire_resp::Args;

use super::commands::Command;
use super::reply::Reply;
use super::{After, Session, scripting, transactions};

/// The MONITOR command.
pub const COMMANDS: &[Command] = &[("monitor", 1, monitor)];

/// MONITOR
fn monitor(session: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    if transactions::in_exec() || scripting::in_script() {
        // Redis's CLIENT_DENY_BLOCKING: a reply per command is expected here.
        reply.error("ERR MONITOR isn't allowed for DENY BLOCKING client");
        return After::Continue;
    }
    if session.pubsub.is_monitoring() {
        // Redis ignores it, without a reply.
        return After::Continue;
    }
    let limit_bytes = mailbox_limit_bytes(session);
    session
        .pubsub
        .start_monitoring(&session.state.pubsub, limit_bytes);
    reply.ok();
    After::Continue
}

/// Where a command came from, as a monitor line names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// A client's command.
    Client,
    /// A command a script or function called.
    Script,
}

/// Shows the command in `args`, which `session` has run (see the module docs for which are
/// shown); a script's own call shows as `lua`.
pub fn feed(session: &Session, args: &Args) {
    let hub = &session.state.pubsub;
    if !hub.has_monitors() || args.is_empty() {
        return;
    }
    let name = args.get(0).to_ascii_lowercase();
    if is_admin(&name, args) || scripting::is_script(args) {
        return;
    }
    let source = match scripting::in_script() {
        true => Source::Script,
        false => Source::Client,
    };
    hub.feed_monitors(line(session, args, &name, source));
}

/// Shows a script or function command (EVAL, EVALSHA, FCALL, their read-only forms) as it
/// starts, or as it is refused, so that the commands it calls come after it.
pub fn feed_script_start(session: &Session, args: &Args) {
    let hub = &session.state.pubsub;
    if hub.has_monitors() {
        let name = args.get(0).to_ascii_lowercase();
        hub.feed_monitors(line(session, args, &name, Source::Client));
    }
}

/// Whether a command that arrived on a monitoring connection is refused there: one that
/// reads or writes data (Redis's read, write and may-replicate commands).
pub fn refusal(session: &Session, args: &Args) -> Option<&'static str> {
    if !session.pubsub.is_monitoring() || scripting::in_script() || transactions::in_exec() {
        return None;
    }
    let name = args.get(0).to_ascii_lowercase();
    let has_keys = {
        let line: Vec<&[u8]> = args.iter().collect();
        super::command_keys::key_positions(&line).is_ok_and(|keys| !keys.is_empty())
    };
    if name == b"function" {
        // Its subcommands that change the libraries; LIST, STATS and DUMP are served.
        let changes = args.len() > 1
            && matches!(
                args.get(1).to_ascii_lowercase().as_slice(),
                b"load" | b"delete" | b"flush" | b"restore"
            );
        return changes.then_some("ERR Replica can't interact with the keyspace");
    }
    let touches_data = has_keys
        || super::script_host::is_write(&name)
        || scripting::is_script(args)
        || matches!(
            name.as_slice(),
            b"keys" | b"scan" | b"dbsize" | b"randomkey" | b"publish" | b"spublish"
        );
    touches_data.then_some("ERR Replica can't interact with the keyspace")
}

/// The line of one command: `<secs>.<µs> [<db> <addr or lua>] "<arg>" ...`, as Redis's
/// `replicationFeedMonitors` writes it (without the `+` and the line end, which the reply
/// adds).
fn line(session: &Session, args: &Args, name: &[u8], source: Source) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut text = String::new();
    let from = match source {
        Source::Client => session.peer_address(),
        Source::Script => "lua".to_owned(),
    };
    let _ = write!(
        text,
        "{}.{:06} [{} {from}]",
        now.as_secs(),
        now.subsec_micros(),
        session.database.0
    );
    let mut line = text.into_bytes();
    let redacted = redacted_positions(name, args);
    for (position, arg) in args.iter().enumerate() {
        line.push(b' ');
        if redacted.contains(&position) {
            line.extend_from_slice(b"\"(redacted)\"");
        } else {
            quote_into(&mut line, arg);
        }
    }
    line
}

/// `bytes` quoted as Redis's `sdscatrepr` quotes them: `\\`, `\"`, `\n`, `\r`, `\t`, `\a`,
/// `\b`, other unprintable bytes as `\xHH`.
fn quote_into(line: &mut Vec<u8>, bytes: &[u8]) {
    line.push(b'"');
    for &byte in bytes {
        match byte {
            b'\\' | b'"' => line.extend_from_slice(&[b'\\', byte]),
            b'\n' => line.extend_from_slice(b"\\n"),
            b'\r' => line.extend_from_slice(b"\\r"),
            b'\t' => line.extend_from_slice(b"\\t"),
            0x07 => line.extend_from_slice(b"\\a"),
            0x08 => line.extend_from_slice(b"\\b"),
            0x20..=0x7e => line.push(byte),
            _ => line.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
        }
    }
    line.push(b'"');
}

/// The positions whose arguments a monitor sees as `(redacted)`: AUTH's, HELLO's AUTH pair,
/// MIGRATE's AUTH password and AUTH2 pair (Redis's `redactClientCommandArgument` callers).
fn redacted_positions(name: &[u8], args: &Args) -> Vec<usize> {
    let after = |word: &[u8], count: usize| -> Vec<usize> {
        (1..args.len())
            .find(|&position| args.get(position).eq_ignore_ascii_case(word))
            .map(|position| (position + 1..args.len()).take(count).collect())
            .unwrap_or_default()
    };
    match name {
        b"auth" => (1..args.len()).collect(),
        b"hello" => after(b"auth", 2),
        b"migrate" => {
            let mut positions = after(b"auth", 1);
            positions.extend(after(b"auth2", 2));
            positions
        }
        _ => Vec::new(),
    }
}

/// Redis's commands flagged `admin`, never shown.
fn is_admin(name: &[u8], args: &Args) -> bool {
    let subcommand = || match args.len() {
        0 | 1 => Vec::new(),
        _ => args.get(1).to_ascii_lowercase(),
    };
    match name {
        b"bgrewriteaof" | b"bgsave" | b"debug" | b"failover" | b"lastsave" | b"monitor"
        | b"pfdebug" | b"pfselftest" | b"psync" | b"replconf" | b"replicaof" | b"role"
        | b"save" | b"shutdown" | b"slaveof" | b"sync" | b"sentinel" => true,
        b"acl" => !matches!(
            subcommand().as_slice(),
            b"cat" | b"genpass" | b"help" | b"whoami"
        ),
        b"client" => matches!(
            subcommand().as_slice(),
            b"kill" | b"list" | b"no-evict" | b"pause" | b"unblock" | b"unpause"
        ),
        b"config" => matches!(
            subcommand().as_slice(),
            b"get" | b"resetstat" | b"rewrite" | b"set"
        ),
        b"latency" => subcommand() != b"help",
        b"module" => matches!(
            subcommand().as_slice(),
            b"list" | b"load" | b"loadex" | b"unload"
        ),
        b"slowlog" => matches!(subcommand().as_slice(), b"get" | b"len" | b"reset"),
        b"cluster" => !matches!(
            subcommand().as_slice(),
            b"help"
                | b"info"
                | b"keyslot"
                | b"myid"
                | b"nodes"
                | b"shards"
                | b"slots"
                | b"countkeysinslot"
                | b"getkeysinslot"
                | b"links"
        ),
        _ => false,
    }
}

/// A monitor's mailbox bound: the `normal` class's hard limit, else `client-memory-max`.
fn mailbox_limit_bytes(session: &Session) -> usize {
    super::pubsub::mailbox_bound(session, |limits| limits.normal.hard_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(bytes: &[u8]) -> String {
        let mut line = Vec::new();
        quote_into(&mut line, bytes);
        String::from_utf8(line).expect("quoted text is ASCII")
    }

    #[test]
    fn arguments_are_quoted_as_redis_quotes_them() {
        assert_eq!(quoted(b"foo"), "\"foo\"");
        assert_eq!(quoted(b"a \"b\" \\c"), "\"a \\\"b\\\" \\\\c\"");
        assert_eq!(quoted(b"\n\r\t\x07\x08"), "\"\\n\\r\\t\\a\\b\"");
        assert_eq!(quoted(b"\x00\xff\x7f"), "\"\\x00\\xff\\x7f\"");
        assert_eq!(quoted(b""), "\"\"");
    }

    #[test]
    fn passwords_are_redacted_where_redis_redacts_them() {
        let args = |words: &[&str]| -> Args { words.iter().collect() };
        assert_eq!(redacted_positions(b"auth", &args(&["AUTH", "pw"])), [1]);
        assert_eq!(
            redacted_positions(b"auth", &args(&["AUTH", "u", "pw"])),
            [1, 2]
        );
        let hello = args(&["HELLO", "2", "AUTH", "u", "pw", "SETNAME", "n"]);
        assert_eq!(redacted_positions(b"hello", &hello), [3, 4]);
        let migrate = args(&["MIGRATE", "h", "1", "k", "0", "5", "AUTH2", "u", "pw"]);
        assert_eq!(redacted_positions(b"migrate", &migrate), [7, 8]);
        assert!(redacted_positions(b"set", &args(&["SET", "auth", "x"])).is_empty());
    }

    #[test]
    fn admin_commands_are_told_by_their_subcommand() {
        let args = |words: &[&str]| -> Args { words.iter().collect() };
        assert!(is_admin(b"config", &args(&["CONFIG", "SET", "a", "b"])));
        assert!(is_admin(b"client", &args(&["CLIENT", "KILL", "x"])));
        assert!(!is_admin(b"client", &args(&["CLIENT", "SETNAME", "x"])));
        assert!(!is_admin(b"get", &args(&["GET", "k"])));
    }
}
