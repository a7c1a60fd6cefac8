//! `maxmemory` with Redis's `noeviction` policy: once the RESP namespace's memory passes the
//! limit, the commands that may grow the data set are refused with Redis's OOM error; reads,
//! deletes and the rest go on.
//!
//! The memory compared is INFO's `used_memory`: the namespace's data, primary-index and
//! set-index bytes, the clients' buffers and the scripts' memory. Summing it takes every
//! partition's lock, so the figure is kept and summed
//! again at most every [`MEASURE_PERIOD_MS`] (and at once after CONFIG SET maxmemory): a limit
//! is enforced within that period of being passed. With no limit (0, the default) a command
//! pays one atomic load.
//!
//! Where Redis checks, Osprey checks (`processCommand`, `scriptVerifyOOM`): a command as it
//! arrives, and inside MULTI every command but EXEC, DISCARD, QUIT and RESET (the refusal
//! dooms the transaction); EXEC of a transaction holding such a command (EXECABORT); a script's
//! call of such a command before the script has written anything (once it has, it is not
//! stopped halfway); FCALL of a function, and EVAL of a script with a shebang, without
//! `no-writes` or `allow-oom`. The commands a transaction or script runs are not checked again.
//!
//! Invariants:
//! - `measured_at_ms` is 0 or the time (ms since `epoch`) `used_bytes` was summed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use wire_resp::Args;

use crate::state::ServerState;

/// Redis's error.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// How old the summed memory may be when a command is checked.
const MEASURE_PERIOD_MS: u64 = 100;

/// The limit and the last measure.
#[derive(Debug)]
pub struct MemoryLimit {
    limit_bytes: AtomicU64,
    used_bytes: AtomicU64,
    measured_at_ms: AtomicU64,
    epoch: Instant,
}

impl Default for MemoryLimit {
    fn default() -> MemoryLimit {
        MemoryLimit {
            limit_bytes: AtomicU64::new(0),
            used_bytes: AtomicU64::new(0),
            measured_at_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl MemoryLimit {
    /// `maxmemory` in bytes; 0 for none.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes.load(Ordering::Relaxed)
    }

    /// Sets `maxmemory`; the next check measures afresh.
    pub fn set_limit_bytes(&self, limit_bytes: u64) {
        self.limit_bytes.store(limit_bytes, Ordering::Relaxed);
        self.measured_at_ms.store(0, Ordering::Relaxed);
    }

    /// Whether the RESP namespace's memory is past a limit.
    pub fn exceeded(&self, state: &ServerState) -> bool {
        let limit_bytes = self.limit_bytes();
        limit_bytes > 0 && self.used_bytes(state) > limit_bytes
    }

    fn used_bytes(&self, state: &ServerState) -> u64 {
        // Never 0, so that 0 can mean "not measured".
        let now_ms = (self.epoch.elapsed().as_millis() as u64).max(1);
        let measured_at_ms = self.measured_at_ms.load(Ordering::Acquire);
        if measured_at_ms != 0 && now_ms - measured_at_ms.min(now_ms) < MEASURE_PERIOD_MS {
            return self.used_bytes.load(Ordering::Relaxed);
        }
        let used_bytes = super::server_info::used_memory_bytes(state);
        self.used_bytes.store(used_bytes, Ordering::Relaxed);
        self.measured_at_ms.store(now_ms, Ordering::Release);
        used_bytes
    }
}

/// Whether `args` may grow the data set: Redis 7.0's commands flagged `denyoom`.
pub fn may_grow(args: &Args) -> bool {
    if args.is_empty() {
        return false;
    }
    let name = args.get(0).to_ascii_lowercase();
    let subcommand = || (args.len() > 1).then(|| args.get(1).to_ascii_lowercase());
    match name.as_slice() {
        b"function" => subcommand().is_some_and(|s| s == b"load" || s == b"restore"),
        b"xgroup" => subcommand().is_some_and(|s| s == b"create" || s == b"createconsumer"),
        _ => GROWING.contains(&name.as_slice()),
    }
}

/// Redis 7.0's `denyoom` commands without subcommands.
const GROWING: &[&[u8]] = &[
    b"append",
    b"bitfield",
    b"bitop",
    b"blmove",
    b"brpoplpush",
    b"copy",
    b"decr",
    b"decrby",
    b"geoadd",
    b"georadius",
    b"georadiusbymember",
    b"geosearchstore",
    b"getset",
    b"hincrby",
    b"hincrbyfloat",
    b"hmset",
    b"hset",
    b"hsetnx",
    b"incr",
    b"incrby",
    b"incrbyfloat",
    b"linsert",
    b"lmove",
    b"lpush",
    b"lpushx",
    b"lset",
    b"mset",
    b"msetnx",
    b"pfadd",
    b"pfdebug",
    b"pfmerge",
    b"psetex",
    b"restore",
    b"restore-asking",
    b"rpoplpush",
    b"rpush",
    b"rpushx",
    b"sadd",
    b"sdiffstore",
    b"set",
    b"setbit",
    b"setex",
    b"setnx",
    b"setrange",
    b"sinterstore",
    b"sort",
    b"sunionstore",
    b"xadd",
    b"xsetid",
    b"zadd",
    b"zdiffstore",
    b"zincrby",
    b"zinterstore",
    b"zrangestore",
    b"zunionstore",
];

/// Whether a command that arrives (not one a transaction or script runs) is refused: one that
/// may grow the data set, or any but EXEC, DISCARD, QUIT and RESET inside MULTI.
pub fn refuses(state: &ServerState, args: &Args, in_multi: bool) -> bool {
    let limit = &state.resp_settings.memory_limit;
    if limit.limit_bytes() == 0 || args.is_empty() {
        return false;
    }
    let queues = in_multi && !ALWAYS_IN_MULTI.iter().any(|name| args.is_command(name));
    (queues || may_grow(args)) && limit.exceeded(state)
}

/// What MULTI lets through past the limit (Redis's `processCommand`).
const ALWAYS_IN_MULTI: [&[u8]; 4] = [b"exec", b"discard", b"quit", b"reset"];

#[cfg(test)]
mod tests {
    use super::*;

    use crate::resp::args_of as args;

    #[test]
    fn the_commands_that_may_grow_are_redis_denyoom_ones() {
        for words in [
            &["SET", "k", "v"][..],
            &["lpush", "l", "x"],
            &["FUNCTION", "load", "x"],
        ] {
            assert!(may_grow(&args(words)), "{words:?}");
        }
        for words in [
            &["GET", "k"][..],
            &["DEL", "k"],
            &["FUNCTION", "LIST"],
            &["EXPIRE", "k", "1"],
        ] {
            assert!(!may_grow(&args(words)), "{words:?}");
        }
        assert!(may_grow(&args(&["xgroup", "CREATE", "s", "g", "$"])));
        assert!(!may_grow(&args(&["xgroup", "DESTROY", "s", "g"])));
    }
}
