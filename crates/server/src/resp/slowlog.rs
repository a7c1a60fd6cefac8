//! SLOWLOG: the Redis commands that ran longer than `slowlog-log-slower-than` microseconds,
//! newest first, as Redis keeps them (`slowlog.c`).
//!
//! Invariants:
//! - The log holds at most `slowlog-max-len` entries; lowering the length drops the oldest at
//!   the next entry, as in Redis.
//! - An entry holds at most [`ARGS_MAX`] arguments of at most [`ARG_BYTES_MAX`] bytes each
//!   (plus Redis's "... (N more bytes)" suffix), so the log is bounded whatever clients send.
//! - A command is timed only while the log is on (threshold >= 0): one `Instant` pair, and
//!   the lock is taken only for a command that is logged.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use wire_resp::Args;

use super::commands::{Command, subcommand_error};
use super::reply::Reply;
use super::{After, Session};

/// SLOWLOG.
pub const COMMANDS: &[Command] = &[("slowlog", -2, slowlog)];

/// Whether a command is never logged (Redis's `skip_slowlog`: EXEC logs its commands one by
/// one; AUTH and HELLO may carry a password).
pub fn skips(name: &str) -> bool {
    matches!(name, "exec" | "auth" | "hello")
}

/// Arguments an entry keeps (Redis's `SLOWLOG_ENTRY_MAX_ARGC`), the last one replaced by
/// "... (N more arguments)" when there were more.
pub const ARGS_MAX: usize = 32;
/// Bytes an argument keeps (Redis's `SLOWLOG_ENTRY_MAX_STRING`).
pub const ARG_BYTES_MAX: usize = 128;
/// `slowlog-log-slower-than`'s default, in microseconds.
pub const THRESHOLD_US_DEFAULT: i64 = 10_000;
/// `slowlog-max-len`'s default.
pub const LEN_MAX_DEFAULT: usize = 128;
/// Redis caps a client name in an entry at the same length as an argument.
const NAME_BYTES_MAX: usize = ARG_BYTES_MAX;

/// The slow log of the Redis front end.
#[derive(Debug)]
pub struct SlowLog {
    /// `slowlog-log-slower-than`: negative = off, 0 = every command.
    threshold_us: AtomicI64,
    /// `slowlog-max-len`.
    len_max: AtomicUsize,
    next_id: AtomicU64,
    /// Newest first.
    entries: Mutex<VecDeque<Entry>>,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    unix_time_s: u64,
    duration_us: u64,
    args: Vec<Vec<u8>>,
    client_address: String,
    client_name: Vec<u8>,
}

impl Default for SlowLog {
    fn default() -> SlowLog {
        SlowLog {
            threshold_us: AtomicI64::new(THRESHOLD_US_DEFAULT),
            len_max: AtomicUsize::new(LEN_MAX_DEFAULT),
            next_id: AtomicU64::new(0),
            entries: Mutex::new(VecDeque::new()),
        }
    }
}

impl SlowLog {
    /// Whether commands are timed at all.
    pub fn is_on(&self) -> bool {
        self.threshold_us.load(Ordering::Relaxed) >= 0
    }

    pub fn threshold_us(&self) -> i64 {
        self.threshold_us.load(Ordering::Relaxed)
    }

    pub fn set_threshold_us(&self, threshold_us: i64) {
        self.threshold_us.store(threshold_us, Ordering::Relaxed);
    }

    pub fn len_max(&self) -> usize {
        self.len_max.load(Ordering::Relaxed)
    }

    pub fn set_len_max(&self, len_max: usize) {
        self.len_max.store(len_max, Ordering::Relaxed);
    }

    /// Logs the command in `args` if it took `duration` or more than the threshold.
    pub fn record(&self, session: &Session, args: &Args, duration: Duration) {
        let threshold_us = self.threshold_us.load(Ordering::Relaxed);
        let duration_us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        let Ok(threshold_us) = u64::try_from(threshold_us) else {
            return;
        };
        if duration_us < threshold_us {
            return;
        }
        let entry = Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            unix_time_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_secs()),
            duration_us,
            args: kept_args(args),
            client_address: session.peer_address(),
            client_name: session
                .seldom
                .name
                .as_deref()
                .map(|name| name[..name.len().min(NAME_BYTES_MAX)].to_vec())
                .unwrap_or_default(),
        };
        let len_max = self.len_max.load(Ordering::Relaxed);
        let mut entries = self.entries.lock();
        entries.push_front(entry);
        entries.truncate(len_max);
    }

    fn reset(&self) {
        self.entries.lock().clear();
    }

    fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

/// What an entry keeps of a command's arguments, as Redis's `slowlogCreateEntry`.
fn kept_args(args: &Args) -> Vec<Vec<u8>> {
    let count = args.len();
    let kept_count = count.min(ARGS_MAX);
    (0..kept_count)
        .map(|position| {
            if kept_count != count && position == kept_count - 1 {
                return format!("... ({} more arguments)", count - kept_count + 1).into_bytes();
            }
            let arg = args.get(position);
            if arg.len() <= ARG_BYTES_MAX {
                return arg.to_vec();
            }
            let mut kept = arg[..ARG_BYTES_MAX].to_vec();
            kept.extend_from_slice(
                format!("... ({} more bytes)", arg.len() - ARG_BYTES_MAX).as_bytes(),
            );
            kept
        })
        .collect()
}

const HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Print this help.",
];

/// SLOWLOG GET [count] | LEN | RESET | HELP
fn slowlog(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let log = &session.state.resp_slowlog;
    let subcommand = args.get(1).to_ascii_uppercase();
    match (subcommand.as_slice(), args.len()) {
        (b"HELP", 2) => {
            reply.array(HELP.len());
            HELP.iter().for_each(|line| reply.simple(line));
        }
        (b"RESET", 2) => {
            log.reset();
            reply.ok();
        }
        (b"LEN", 2) => reply.integer(i64::try_from(log.len()).unwrap_or(i64::MAX)),
        (b"GET", 2 | 3) => slowlog_get(log, args, reply),
        _ => reply.error(&subcommand_error(
            "slowlog",
            &["get", "len", "reset", "help"],
            args,
        )),
    }
    After::Continue
}

fn slowlog_get(log: &SlowLog, args: &Args, reply: &mut Reply<'_>) {
    let mut count = 10usize;
    if args.len() == 3 {
        match super::keys::parse_i64(args.get(2)) {
            Ok(-1) => count = usize::MAX,
            Ok(wanted) if wanted >= 0 => count = usize::try_from(wanted).unwrap_or(usize::MAX),
            // Redis gives one text for both.
            Ok(_) | Err(()) => {
                return reply.error("ERR count should be greater than or equal to -1");
            }
        }
    }
    let entries = log.entries.lock();
    let shown = count.min(entries.len());
    reply.array(shown);
    for entry in entries.iter().take(shown) {
        reply.array(6);
        reply.integer(i64::try_from(entry.id).unwrap_or(i64::MAX));
        reply.integer(i64::try_from(entry.unix_time_s).unwrap_or(i64::MAX));
        reply.integer(i64::try_from(entry.duration_us).unwrap_or(i64::MAX));
        reply.array(entry.args.len());
        entry.args.iter().for_each(|arg| reply.bulk(arg));
        reply.bulk(entry.client_address.as_bytes());
        reply.bulk(&entry.client_name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(parts: &[&[u8]]) -> Args {
        let mut frame = format!("*{}\r\n", parts.len()).into_bytes();
        for part in parts {
            frame.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
            frame.extend_from_slice(part);
            frame.extend_from_slice(b"\r\n");
        }
        let mut args = Args::default();
        wire_resp::decode_request(&frame, &mut args).expect("a valid frame");
        args
    }

    #[test]
    fn long_arguments_are_cut_as_redis_cuts_them() {
        let long = vec![b'x'; 200];
        let kept = kept_args(&args_of(&[b"set", b"k", &long]));
        assert_eq!(kept.len(), 3);
        assert_eq!(&kept[2][..ARG_BYTES_MAX], &long[..ARG_BYTES_MAX]);
        assert_eq!(&kept[2][ARG_BYTES_MAX..], b"... (72 more bytes)");
    }

    #[test]
    fn many_arguments_end_with_how_many_more_there_were() {
        let parts: Vec<Vec<u8>> = (0..40).map(|n| n.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let kept = kept_args(&args_of(&refs));
        assert_eq!(kept.len(), ARGS_MAX);
        assert_eq!(kept[30], b"30");
        assert_eq!(kept[31], b"... (9 more arguments)");
    }
}
