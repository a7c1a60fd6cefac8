//! How a script's commands run: the host that runs them as the caller's session's
//! (`SessionHost`), the checks Redis makes before each (`scriptCall`), and the conversions
//! between a command's RESP reply and the values a script sees (`parse_reply`,
//! `write_value`).

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::Ordering;

use rustc_hash::FxHashSet;
use udf::redis::{RedisValue, ScriptHost};
use wire_resp::Args;

use super::Session;
use super::blocking;
use super::commands;
use super::memory_limit;
use super::reply::Reply;
use super::routing::{self, Routing};
use super::scripting::{Running, SCRIPT_MEMORY_BYTES_MAX, is_script};

/// Runs a script's commands with the caller's session, as Redis runs them with its script
/// client: the same dispatch as every command, after the checks Redis makes in a script.
pub(super) struct SessionHost {
    pub(super) session: Session,
    pub(super) running: Arc<Running>,
    pub(super) read_only: bool,
    /// `allow-oom`: its calls pass `maxmemory`.
    pub(super) allow_oom: bool,
}

impl ScriptHost for SessionHost {
    fn call(&mut self, argv: Vec<Vec<u8>>, resp: u8) -> RedisValue {
        let args: Args = argv.iter().collect();
        if let Some(refusal) = self.refusal(&args) {
            super::command_stats::reject(&args);
            // Counted here, where Redis's `scriptCall` counts it: the script's reply that
            // passes it on is not counted again.
            super::error_stats::record(refusal.as_bytes());
            return RedisValue::Error(refusal.as_bytes().to_vec());
        }
        self.session.protocol = resp;
        let mut out = Vec::new();
        let mut reply = Reply::with_limit(&mut out, resp, SCRIPT_MEMORY_BYTES_MAX);
        commands::execute(&mut self.session, &args, &mut reply);
        if reply.overflowed() {
            return RedisValue::Error(b"ERR the reply passed the script's memory cap".to_vec());
        }
        drop(reply);
        parse_reply(&out).unwrap_or_else(|| {
            RedisValue::Error(b"ERR a command called from script answered malformed".to_vec())
        })
    }
}

impl SessionHost {
    /// Redis's checks before a command a script calls (`scriptCall`).
    fn refusal(&self, args: &Args) -> Option<&'static str> {
        let state = &self.session.state;
        let name = args.get(0).to_ascii_lowercase();
        if let Err(message) = commands::check(state, args) {
            return Some(if not_allowed_from_script(&name, args) {
                // Redis knows the command; Osprey may not serve it yet.
                "ERR This Redis command is not allowed from script"
            } else if message.starts_with("ERR unknown command") {
                "ERR Unknown Redis command called from script"
            } else {
                "ERR Wrong number of args calling Redis command from script"
            });
        }
        let deny_lifted = state
            .resp_settings
            .scripts_may_call_noscript
            .load(Ordering::Relaxed)
            && !is_script(args)
            && !blocking::is_blocking(&name);
        if not_allowed_from_script(&name, args) && !deny_lifted {
            return Some("ERR This Redis command is not allowed from script");
        }
        // Redis's order: a read-only script's write is refused as such before `maxmemory` is
        // looked at (a read-only script never meets the limit).
        if is_write(&name) && self.read_only {
            return Some("ERR Write commands are not allowed from read-only scripts.");
        }
        // Redis's `scriptVerifyOOM`: past `maxmemory`, a call that may grow the data set fails
        // until the script has written (then it is not stopped halfway).
        if !self.allow_oom
            && !self.running.wrote.load(Ordering::Relaxed)
            && memory_limit::may_grow(args)
            && state.resp_settings.memory_limit.exceeded(state)
        {
            return Some(memory_limit::OOM);
        }
        if is_write(&name) {
            self.running.wrote.store(true, Ordering::Relaxed);
        }
        if state.is_clustered()
            && routing::route(state, self.session.database, args) != Routing::Local
        {
            return Some("ERR Script attempted to access a non local key in a cluster node");
        }
        None
    }
}

/// Commands Redis 7.0 flags `noscript` (its `src/commands/*.json`), which scripts may not call:
/// whether Osprey serves them or not. Among them the blocking pops BLPOP, BRPOP, BLMOVE,
/// BRPOPLPUSH, BZPOPMIN and BZPOPMAX (7.2 lets scripts call them, answering at once; BLMPOP,
/// BZMPOP, XREAD and XREADGROUP were never refused, and answer at once as Redis's do).
fn not_allowed_from_script(name: &[u8], args: &Args) -> bool {
    // Lower-cased only for the commands whose subcommand decides (not for each GET's key).
    let subcommand = || {
        if args.len() > 1 {
            args.get(1).to_ascii_lowercase()
        } else {
            Vec::new()
        }
    };
    match name {
        b"auth" | b"bgrewriteaof" | b"bgsave" | b"blmove" | b"blpop" | b"brpop" | b"brpoplpush"
        | b"bzpopmax" | b"bzpopmin" | b"debug" | b"discard" | b"eval" | b"eval_ro" | b"evalsha"
        | b"evalsha_ro" | b"exec" | b"failover" | b"fcall" | b"fcall_ro" | b"hello"
        | b"monitor" | b"multi" | b"psubscribe" | b"psync" | b"punsubscribe" | b"quit"
        | b"replconf" | b"replicaof" | b"reset" | b"role" | b"save" | b"shutdown" | b"slaveof"
        | b"ssubscribe" | b"subscribe" | b"sunsubscribe" | b"sync" | b"unsubscribe"
        | b"unwatch" | b"wait" | b"watch" => true,
        b"acl" | b"function" | b"latency" => subcommand() != b"help",
        b"client" => matches!(
            subcommand().as_slice(),
            b"caching"
                | b"getname"
                | b"getredir"
                | b"id"
                | b"info"
                | b"kill"
                | b"list"
                | b"no-evict"
                | b"no-touch"
                | b"pause"
                | b"reply"
                | b"setname"
                | b"tracking"
                | b"trackinginfo"
                | b"unblock"
                | b"unpause"
        ),
        b"cluster" => subcommand() == b"reset",
        b"config" => matches!(
            subcommand().as_slice(),
            b"get" | b"resetstat" | b"rewrite" | b"set"
        ),
        b"module" => matches!(
            subcommand().as_slice(),
            b"list" | b"load" | b"loadex" | b"unload"
        ),
        b"script" => matches!(
            subcommand().as_slice(),
            b"debug" | b"exists" | b"flush" | b"kill" | b"load"
        ),
        _ => false,
    }
}

/// Commands Redis flags `write` or `may-replicate`: refused in read-only scripts, and once
/// called they make the script unkillable.
pub(super) fn is_write(name: &[u8]) -> bool {
    const WRITES: &[&str] = &[
        "append",
        "bitfield",
        "bitop",
        "blmove",
        "blmpop",
        "blpop",
        "brpop",
        "brpoplpush",
        "bzmpop",
        "bzpopmax",
        "bzpopmin",
        "copy",
        "decr",
        "decrby",
        "del",
        "expire",
        "expireat",
        "flushall",
        "flushdb",
        "geoadd",
        "georadius",
        "georadiusbymember",
        "geosearchstore",
        "getdel",
        "getex",
        "getset",
        "hdel",
        "hincrby",
        "hincrbyfloat",
        "hmset",
        "hset",
        "hsetnx",
        "incr",
        "incrby",
        "incrbyfloat",
        "linsert",
        "lmove",
        "lmpop",
        "lpop",
        "lpush",
        "lpushx",
        "lrem",
        "lset",
        "ltrim",
        "migrate",
        "move",
        "mset",
        "msetnx",
        "persist",
        "pexpire",
        "pexpireat",
        "pfadd",
        "pfcount",
        "pfdebug",
        "pfmerge",
        "psetex",
        "publish",
        "rename",
        "renamenx",
        "restore",
        "rpop",
        "rpoplpush",
        "rpush",
        "rpushx",
        "sadd",
        "sdiffstore",
        "set",
        "setbit",
        "setex",
        "setnx",
        "setrange",
        "sinterstore",
        "smove",
        "sort",
        "spop",
        "spublish",
        "srem",
        "sunionstore",
        "swapdb",
        "unlink",
        "xack",
        "xadd",
        "xautoclaim",
        "xclaim",
        "xdel",
        "xreadgroup",
        "xsetid",
        "xtrim",
        "zadd",
        "zdiffstore",
        "zincrby",
        "zinterstore",
        "zmpop",
        "zpopmax",
        "zpopmin",
        "zrangestore",
        "zrem",
        "zremrangebylex",
        "zremrangebyrank",
        "zremrangebyscore",
        "zunionstore",
    ];
    static BY_NAME: LazyLock<FxHashSet<&'static [u8]>> =
        LazyLock::new(|| WRITES.iter().map(|write| write.as_bytes()).collect());
    BY_NAME.contains(name)
}

/// A command's RESP reply as a script sees it.
pub(super) fn parse_reply(bytes: &[u8]) -> Option<RedisValue> {
    let (value, used) = parse_value(bytes, 0)?;
    (used == bytes.len()).then_some(value)
}

/// The value at `bytes[position..]` and the position after it.
fn parse_value(bytes: &[u8], position: usize) -> Option<(RedisValue, usize)> {
    let rest = &bytes[position..];
    let (head, size_bytes) = wire_resp::decode_reply(rest).ok()??;
    let kind = *rest.first()?;
    let end = position + size_bytes;
    let value = match head {
        wire_resp::Reply::Simple(text) => RedisValue::Status(text.to_vec()),
        wire_resp::Reply::Error(text) => RedisValue::Error(text.to_vec()),
        wire_resp::Reply::Integer(i) => RedisValue::Integer(i),
        wire_resp::Reply::Bulk(text) if kind == b'=' => {
            let (format, text) = text.split_at(text.len().min(4));
            RedisValue::Verbatim {
                format: format[..format.len().saturating_sub(1)].to_vec(),
                text: text.to_vec(),
            }
        }
        wire_resp::Reply::Bulk(text) => RedisValue::Bulk(text.to_vec()),
        wire_resp::Reply::Null if kind == b'_' => RedisValue::Null,
        wire_resp::Reply::Null => RedisValue::NullBulk,
        wire_resp::Reply::Boolean(b) => RedisValue::Boolean(b),
        wire_resp::Reply::Number(text) if kind == b',' => {
            RedisValue::Double(super::parse_double(text).unwrap_or(f64::NAN))
        }
        wire_resp::Reply::Number(text) => RedisValue::BigNumber(text.to_vec()),
        wire_resp::Reply::Aggregate {
            kind,
            element_count,
        } => {
            let header_end = position + rest.iter().position(|&b| b == b'\n')? + 1;
            return parse_aggregate(bytes, header_end, kind, element_count)
                .filter(|(_, after)| *after == end);
        }
    };
    Some((value, end))
}

fn parse_aggregate(
    bytes: &[u8],
    mut position: usize,
    kind: u8,
    element_count: usize,
) -> Option<(RedisValue, usize)> {
    let mut next = || {
        let (value, after) = parse_value(bytes, position)?;
        position = after;
        Some(value)
    };
    let value = match kind {
        b'%' => {
            let mut pairs = Vec::with_capacity(element_count.min(bytes.len()));
            for _ in 0..element_count {
                let field = next()?;
                pairs.push((field, next()?));
            }
            RedisValue::Map(pairs)
        }
        _ => {
            let mut items = Vec::with_capacity(element_count.min(bytes.len()));
            for _ in 0..element_count {
                items.push(next()?);
            }
            if kind == b'~' {
                RedisValue::Set(items)
            } else {
                RedisValue::Array(items)
            }
        }
    };
    Some((value, position))
}

/// Writes a script's reply for the caller's protocol.
pub(super) fn write_value(reply: &mut Reply<'_>, value: &RedisValue) {
    match value {
        RedisValue::Status(text) => reply.encoded(&line(b'+', text)),
        RedisValue::Error(text) => reply.error_line(&line(b'-', text), false),
        RedisValue::PassedError(text) => reply.error_line(&line(b'-', text), true),
        RedisValue::Integer(i) => reply.integer(*i),
        RedisValue::Bulk(bytes) => reply.bulk(bytes),
        RedisValue::NullBulk | RedisValue::Null => reply.null(),
        RedisValue::Boolean(b) if reply.is_resp3() => {
            reply.encoded(if *b { b"#t\r\n" } else { b"#f\r\n" });
        }
        RedisValue::Boolean(b) => reply.integer(i64::from(*b)),
        RedisValue::Double(d) => reply.double(*d),
        RedisValue::BigNumber(text) if reply.is_resp3() => reply.encoded(&line(b'(', text)),
        RedisValue::BigNumber(text) => reply.bulk(text),
        RedisValue::Verbatim { format, text } if reply.is_resp3() && format.len() == 3 => {
            let mut encoded = format!("={}\r\n", text.len() + 4).into_bytes();
            encoded.extend_from_slice(format);
            encoded.push(b':');
            encoded.extend_from_slice(text);
            encoded.extend_from_slice(b"\r\n");
            reply.encoded(&encoded);
        }
        RedisValue::Verbatim { text, .. } => reply.bulk(text),
        RedisValue::Array(items) => {
            reply.array(items.len());
            items.iter().for_each(|item| write_value(reply, item));
        }
        RedisValue::Set(items) => {
            reply.set(items.len());
            items.iter().for_each(|item| write_value(reply, item));
        }
        RedisValue::Map(pairs) => {
            reply.map(pairs.len());
            for (field, value) in pairs {
                write_value(reply, field);
                write_value(reply, value);
            }
        }
    }
}

/// A one-line reply (`+text` or `-text`), its line breaks made spaces.
fn line(prefix: u8, text: &[u8]) -> Vec<u8> {
    let mut encoded = Vec::with_capacity(text.len() + 3);
    encoded.push(prefix);
    encoded.extend(
        text.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    encoded.extend_from_slice(b"\r\n");
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_into_the_values_scripts_see() {
        let parsed = parse_reply(b"*3\r\n:1\r\n$-1\r\n*2\r\n+OK\r\n-ERR x\r\n");
        assert_eq!(
            parsed,
            Some(RedisValue::Array(vec![
                RedisValue::Integer(1),
                RedisValue::NullBulk,
                RedisValue::Array(vec![
                    RedisValue::Status(b"OK".to_vec()),
                    RedisValue::Error(b"ERR x".to_vec()),
                ]),
            ]))
        );
        let parsed = parse_reply(b"%1\r\n$1\r\na\r\n,1.5\r\n");
        assert_eq!(
            parsed,
            Some(RedisValue::Map(vec![(
                RedisValue::Bulk(b"a".to_vec()),
                RedisValue::Double(1.5)
            )]))
        );
        assert_eq!(parse_reply(b"_\r\n"), Some(RedisValue::Null));
        assert_eq!(parse_reply(b"*2\r\n:1\r\n"), None);
    }
}
