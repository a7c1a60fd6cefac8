//! The CLIENT subcommands that act on connections: KILL, PAUSE, UNPAUSE, REPLY, NO-EVICT,
//! NO-TOUCH, and HELP (ID, GETNAME, SETNAME, INFO, LIST and UNBLOCK are in `commands.rs`).

use std::time::Duration;

use tokio::time::Instant;
use wire_resp::Args;

use super::clients::{KillFilter, PauseMode};
use super::reply::Reply;
use super::{After, Session, keys};

/// Which replies the client gets (CLIENT REPLY).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    /// No reply until CLIENT REPLY ON.
    Off,
    /// No reply to the next command, then On.
    SkipNext,
}

impl ReplyMode {
    /// After a command ran whole, with `before` the mode it ran under and `self` the mode
    /// it left: whether its reply is dropped. A SKIP is spent on the command after it.
    pub fn drops_reply(&mut self, before: ReplyMode) -> bool {
        let skipped = before == ReplyMode::SkipNext;
        if skipped && *self == ReplyMode::SkipNext {
            *self = ReplyMode::On;
        }
        skipped || *self == ReplyMode::Off
    }
}

const SYNTAX_ERROR: &str = "ERR syntax error";

/// The CLIENT subcommands of this file; `None` for any other.
pub fn client(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> Option<After> {
    let subcommand = args.get(1).to_ascii_uppercase();
    match (subcommand.as_slice(), args.len()) {
        (b"KILL", 3..) => return Some(kill(session, args, reply)),
        (b"PAUSE", 3 | 4) => pause(session, args, reply),
        (b"UNPAUSE", 2) => {
            session.state.resp_clients.unpause();
            reply.ok();
        }
        (b"REPLY", 3) => reply_mode(session, args.get(2), reply),
        (b"NO-EVICT", 3) => match on_off(args.get(2)) {
            Some(on) => {
                session.no_evict = on;
                reply.ok();
            }
            None => reply.error(SYNTAX_ERROR),
        },
        (b"NO-TOUCH", 3) => match on_off(args.get(2)) {
            Some(on) => {
                session.no_touch = on;
                reply.ok();
            }
            None => reply.error(SYNTAX_ERROR),
        },
        (b"TRACKING" | b"CACHING" | b"GETREDIR" | b"TRACKINGINFO", _) => reply.error(
            "ERR client-side caching (CLIENT TRACKING) is not served by Osprey: it sends no \
             invalidation messages",
        ),
        (b"HELP", 2) => {
            reply.array(HELP.len());
            HELP.iter().for_each(|line| reply.simple(line));
        }
        _ => return None,
    }
    Some(After::Continue)
}

fn on_off(value: &[u8]) -> Option<bool> {
    if value.eq_ignore_ascii_case(b"on") {
        Some(true)
    } else if value.eq_ignore_ascii_case(b"off") {
        Some(false)
    } else {
        None
    }
}

/// CLIENT REPLY ON|OFF|SKIP: only ON answers (OK).
fn reply_mode(session: &mut Session, value: &[u8], reply: &mut Reply<'_>) {
    if value.eq_ignore_ascii_case(b"on") {
        session.reply_mode = ReplyMode::On;
        reply.ok();
    } else if value.eq_ignore_ascii_case(b"off") {
        session.reply_mode = ReplyMode::Off;
    } else if value.eq_ignore_ascii_case(b"skip") {
        if session.reply_mode != ReplyMode::Off {
            session.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        reply.error(SYNTAX_ERROR);
    }
}

/// CLIENT PAUSE timeout-ms [WRITE|ALL]
fn pause(session: &Session, args: &Args, reply: &mut Reply<'_>) {
    let mode = match args.len() {
        3 => PauseMode::All,
        _ if args.get(3).eq_ignore_ascii_case(b"write") => PauseMode::Write,
        _ if args.get(3).eq_ignore_ascii_case(b"all") => PauseMode::All,
        _ => return reply.error("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let timeout_ms = match keys::parse_i64(args.get(2)) {
        Ok(ms) if ms < 0 => return reply.error("ERR timeout is negative"),
        Ok(ms) => ms.unsigned_abs(),
        Err(()) => return reply.error("ERR timeout is not an integer or out of range"),
    };
    let Some(deadline) = Instant::now().checked_add(Duration::from_millis(timeout_ms)) else {
        return reply.error("ERR timeout is out of range");
    };
    session.state.resp_clients.pause(mode, deadline);
    reply.ok();
}

/// CLIENT KILL ip:port | CLIENT KILL [ID id] [ADDR ip:port] [LADDR ip:port]
/// [TYPE normal|pubsub|master|replica|slave] [USER name] [SKIPME yes|no] [MAXAGE seconds]
fn kill(session: &Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let old_form = args.len() == 3;
    let filter = if old_form {
        KillFilter {
            peer_address: Some(args.get(2).to_vec()),
            ..KillFilter::default()
        }
    } else {
        match kill_filter(session, args) {
            Ok(filter) => filter,
            Err(message) => {
                reply.error(&message);
                return After::Continue;
            }
        }
    };
    let clients = &session.state.resp_clients;
    let (killed, caller_killed) = clients.kill(&filter, session.client_id);
    match (old_form, killed) {
        (true, 0) => reply.error("ERR No such client"),
        (true, _) => reply.ok(),
        (false, _) => reply.integer(i64::try_from(killed).unwrap_or(i64::MAX)),
    }
    if caller_killed {
        After::Close
    } else {
        After::Continue
    }
}

fn kill_filter(session: &Session, args: &Args) -> Result<KillFilter, String> {
    let mut filter = KillFilter {
        skip_id: Some(session.client_id),
        ..KillFilter::default()
    };
    let mut position = 2;
    while position < args.len() {
        if position + 1 >= args.len() {
            return Err(SYNTAX_ERROR.to_owned());
        }
        let (option, value) = (
            args.get(position).to_ascii_uppercase(),
            args.get(position + 1),
        );
        match option.as_slice() {
            b"ID" => match keys::parse_i64(value) {
                Ok(id) if id >= 1 => filter.id = Some(id.unsigned_abs()),
                Ok(_) => return Err("ERR client-id should be greater than 0".to_owned()),
                Err(()) => return Err("ERR value is not an integer or out of range".to_owned()),
            },
            b"TYPE" => match value.to_ascii_lowercase().as_slice() {
                b"normal" => filter.pubsub = Some(false),
                b"pubsub" => filter.pubsub = Some(true),
                b"master" | b"replica" | b"slave" => filter.matches_none = true,
                _ => {
                    return Err(format!(
                        "ERR Unknown client type '{}'",
                        String::from_utf8_lossy(value)
                    ));
                }
            },
            b"ADDR" => filter.peer_address = Some(value.to_vec()),
            b"LADDR" => filter.local_address = Some(value.to_vec()),
            // Osprey has one user, Redis's `default`.
            b"USER" if value == b"default" => {}
            b"USER" => {
                return Err(format!(
                    "ERR No such user '{}'",
                    String::from_utf8_lossy(value)
                ));
            }
            b"SKIPME" if value.eq_ignore_ascii_case(b"yes") => {
                filter.skip_id = Some(session.client_id);
            }
            b"SKIPME" if value.eq_ignore_ascii_case(b"no") => filter.skip_id = None,
            b"MAXAGE" => match keys::parse_i64(value) {
                Ok(seconds) => {
                    filter.older_than = Some(Duration::from_secs(seconds.max(0).unsigned_abs()));
                }
                Err(()) => return Err("ERR value is not an integer or out of range".to_owned()),
            },
            _ => return Err(SYNTAX_ERROR.to_owned()),
        }
        position += 2;
    }
    Ok(filter)
}

const HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * MAXAGE <maxage>",
    "      Kill connections older than the specified age.",
    "LIST",
    "    Return information about client connections.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
    "HELP",
    "    Print this help.",
];
