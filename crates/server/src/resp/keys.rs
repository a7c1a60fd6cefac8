//! Key commands and what every Redis command shares: where a key lives, expiry arguments,
//! and Redis's error texts.

use engine::{BinWriter, Current, CurrentMut, Decision, Expiry, Namespace, Now, RecordAddress};
use model::{Digest, ParticleType, ResultCode, UserKey, VoidTime};
use wire_resp::Args;

use super::collection;
use super::commands::Command;
use super::reply::Reply;
use super::{After, Session};
use crate::state::ServerState;

/// Redis's reply to an operation on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// Redis's reply to an option it does not understand.
pub const SYNTAX_ERROR: &str = "ERR syntax error";
/// Redis's reply to an argument that must be a 64-bit integer.
pub const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";
/// Redis's reply to an expiry that is not positive or overflows.
const INVALID_EXPIRE: &str = "ERR invalid expire time in 'set' command";

/// The key commands.
pub const COMMANDS: &[Command] = &[
    ("dbsize", 1, dbsize),
    ("del", -2, del),
    ("exists", -2, exists),
    ("flushall", -1, flushdb),
    ("flushdb", -1, flushdb),
    ("pttl", 2, |s, a, r| ttl(s, a, r, true)),
    ("ttl", 2, |s, a, r| ttl(s, a, r, false)),
    ("type", 2, type_of),
    ("unlink", -2, del),
];

/// Longest TTL a record can hold, in seconds (Aerospike's ten years).
const TTL_SECONDS_MAX: u64 = model::TTL_SECONDS_MAX as u64;

/// One Redis key as a record of the configured namespace and set.
pub struct Target<'s> {
    namespace: &'s Namespace,
    address: RecordAddress<'s>,
}

impl<'s> Target<'s> {
    /// The record for Redis key `key`.
    pub fn of(state: &'s ServerState, key: &'s [u8]) -> Target<'s> {
        let namespace = state
            .namespace(state.config.resp_namespace().as_bytes())
            .expect("the RESP namespace is validated at start-up");
        let set = state.config.resp.set.as_bytes();
        Target {
            namespace,
            address: RecordAddress {
                digest: Digest::compute(set, &UserKey::String(key)),
                set_name: set,
                key: Some((ParticleType::String as u8, key)),
            },
        }
    }

    /// The record's digest.
    pub fn digest(&self) -> Digest {
        self.address.digest
    }

    /// Calls `look` with the record, under its partition's read lock.
    pub fn view<T>(&self, look: impl FnOnce(Option<Current<'_>>) -> T) -> Result<T, ResultCode> {
        self.namespace.view(&self.address, look)
    }

    /// Read-modify-write of the record, under its partition's write lock.
    pub fn update<T>(
        &self,
        writer: &mut BinWriter,
        decide: impl FnOnce(Option<CurrentMut<'_>>, &mut BinWriter) -> Result<(Decision, T), ResultCode>,
    ) -> Result<T, ResultCode> {
        self.namespace.update(&self.address, writer, decide)
    }
}

/// The clock of the RESP namespace.
pub fn now_of(session: &Session) -> Now {
    let state = &session.state;
    state
        .namespace(state.config.resp_namespace().as_bytes())
        .expect("the RESP namespace is validated at start-up")
        .now()
}

/// Answers an engine failure in Redis's words.
pub fn engine_error(reply: &mut Reply<'_>, code: ResultCode) {
    match code {
        ResultCode::IncompatibleType => reply.error(WRONGTYPE),
        ResultCode::RecordTooBig => reply.error("ERR string exceeds maximum allowed size"),
        ResultCode::Parameter => {
            reply.error("ERR the key's record belongs to another Aerospike set")
        }
        other => reply.error(&format!("ERR storage error {}", other.code())),
    }
}

/// A 64-bit signed integer as Redis parses one (`string2ll`: no spaces, no plus sign).
pub fn parse_i64(bytes: &[u8]) -> Result<i64, ()> {
    let text = std::str::from_utf8(bytes).map_err(|_| ())?;
    if text.starts_with('+') || text.is_empty() || (text.len() > 1 && text.starts_with('0')) {
        return Err(());
    }
    text.parse().map_err(|_| ())
}

/// An expiry given to SET or a SETEX-like command.
#[derive(Clone, Copy, Debug)]
pub enum ExpiryArg {
    /// EX: seconds from now.
    Seconds(i64),
    /// PX: milliseconds from now.
    Milliseconds(i64),
    /// EXAT: a Unix time in seconds.
    UnixSeconds(i64),
    /// PXAT: a Unix time in milliseconds.
    UnixMilliseconds(i64),
}

impl ExpiryArg {
    /// `option` is EX, PX, EXAT or PXAT (upper case).
    pub fn parse(option: &[u8], value: &[u8]) -> Result<ExpiryArg, &'static str> {
        let value = parse_i64(value).map_err(|()| NOT_AN_INTEGER)?;
        Ok(match option {
            b"EX" => ExpiryArg::Seconds(value),
            b"PX" => ExpiryArg::Milliseconds(value),
            b"EXAT" => ExpiryArg::UnixSeconds(value),
            _ => ExpiryArg::UnixMilliseconds(value),
        })
    }

    /// The void time this expiry means at `now`: Redis refuses values of 0 or less.
    /// Milliseconds round up to the next whole second (void times are seconds).
    pub fn void_time(self, now: Now) -> Result<VoidTime, &'static str> {
        let now_ms = i128::from(now.unix_ms);
        let at_ms = match self {
            ExpiryArg::Seconds(s) if s > 0 => now_ms + i128::from(s) * 1000,
            ExpiryArg::Milliseconds(ms) if ms > 0 => now_ms + i128::from(ms),
            ExpiryArg::UnixSeconds(s) if s > 0 => i128::from(s) * 1000,
            ExpiryArg::UnixMilliseconds(ms) if ms > 0 => i128::from(ms),
            _ => return Err(INVALID_EXPIRE),
        };
        let ttl_ms = (at_ms - now_ms).max(1);
        let ttl_seconds = u64::try_from((ttl_ms + 999) / 1000).map_err(|_| INVALID_EXPIRE)?;
        if ttl_seconds > TTL_SECONDS_MAX {
            return Err(INVALID_EXPIRE);
        }
        let ttl_seconds = u32::try_from(ttl_seconds).map_err(|_| INVALID_EXPIRE)?;
        Ok(VoidTime::after(now.epoch_seconds(), ttl_seconds))
    }
}

/// The store expiry for a void time.
pub fn expiry_at(void_time: VoidTime) -> Expiry {
    Expiry::At(void_time)
}

/// DEL key [key ...] (also UNLINK): how many existed.
pub fn del(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let mut removed = 0;
    for position in 1..args.len() {
        let target = Target::of(&session.state, args.get(position));
        let existed = target.update(&mut session.writer, |current, _| {
            Ok((Decision::Delete, current.is_some()))
        });
        match existed {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(code) => {
                engine_error(reply, code);
                return After::Continue;
            }
        }
    }
    reply.integer(removed);
    After::Continue
}

/// EXISTS key [key ...]: how many of the keys exist (a key named twice counts twice).
pub fn exists(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let mut found = 0;
    for position in 1..args.len() {
        let target = Target::of(&session.state, args.get(position));
        if target.view(|current| current.is_some()) == Ok(true) {
            found += 1;
        }
    }
    reply.integer(found);
    After::Continue
}

/// TYPE key
pub fn type_of(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, args.get(1));
    let name = target.view(|current| current.map_or("none", |c| collection::type_name(&c)));
    reply.simple(name.unwrap_or("none"));
    After::Continue
}

/// TTL key (`in_ms` false) and PTTL key (`in_ms` true): -2 missing, -1 no expiry.
pub fn ttl(session: &mut Session, args: &Args, reply: &mut Reply<'_>, in_ms: bool) -> After {
    let now = now_of(session);
    let target = Target::of(&session.state, args.get(1));
    let void_time = target.view(|current| current.map(|c| c.void_time));
    let value = match void_time {
        Ok(None) | Err(_) => -2,
        Ok(Some(void_time)) if void_time == VoidTime::NEVER => -1,
        Ok(Some(void_time)) => {
            let remaining_ms = remaining_ms(void_time, now);
            if in_ms {
                remaining_ms
            } else {
                (remaining_ms + 500) / 1000
            }
        }
    };
    reply.integer(value);
    After::Continue
}

fn remaining_ms(void_time: VoidTime, now: Now) -> i64 {
    let expires_unix_ms =
        (i64::from(void_time.0) + model::CITRUSLEAF_EPOCH_UNIX_SECONDS as i64) * 1000;
    (expires_unix_ms - now.unix_ms as i64).max(0)
}

/// DBSIZE: the records of the RESP set.
pub fn dbsize(session: &mut Session, _args: &Args, reply: &mut Reply<'_>) -> After {
    let state = &session.state;
    let set = state.config.resp.set.as_str();
    let objects = state
        .namespace(state.config.resp_namespace().as_bytes())
        .map_or(0, |ns| {
            ns.sets()
                .into_iter()
                .find(|s| s.name == set)
                .map_or(0, |s| s.objects)
        });
    reply.integer(i64::try_from(objects).unwrap_or(i64::MAX));
    After::Continue
}

/// FLUSHDB and FLUSHALL [ASYNC|SYNC]: truncate the RESP set, then reclaim its records.
pub fn flushdb(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    if args.len() > 2
        || (args.len() == 2
            && !matches!(
                args.get(1).to_ascii_uppercase().as_slice(),
                b"ASYNC" | b"SYNC"
            ))
    {
        reply.error(SYNTAX_ERROR);
        return After::Continue;
    }
    let state = &session.state;
    let Some(namespace) = state.namespace(state.config.resp_namespace().as_bytes()) else {
        reply.error("ERR no namespace");
        return After::Continue;
    };
    match namespace.truncate(Some(state.config.resp.set.as_bytes()), None) {
        Ok(_) => {
            namespace.reclaim_truncated();
            reply.ok();
        }
        Err(error) => reply.error(&format!("ERR {error}")),
    }
    After::Continue
}
