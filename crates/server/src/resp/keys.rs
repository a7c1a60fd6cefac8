//! Key commands and what every Redis command shares: where a key lives, expiry arguments,
//! and Redis's error texts.
//!
//! RENAME, RENAMENX and COPY run inside the namespace's exclusive section, so no command sees
//! the value at both keys or at neither. A collection is copied by rendering it as the bins an
//! Aerospike client sees and decoding those again (O(n)): native values cannot be cloned.

use std::any::Any;

use engine::{
    Acks, BinWriter, Current, CurrentMut, Decision, Expiry, Namespace, NativeValue, Now,
    RecordAddress, RecordMeta,
};
use model::{CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, ParticleType, ResultCode, VoidTime};
use wire_resp::Args;

use super::collection::{self, Collection};
use super::commands::Command;
use super::databases::Database;
use super::hashes::HashValue;
use super::lists::ListValue;
use super::reply::Reply;
use super::sets::SetValue;
use super::zsets::ZSetValue;
use super::{After, Session};
use crate::state::ServerState;

/// Redis's reply to an operation on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// Redis's reply to an option it does not understand.
pub const SYNTAX_ERROR: &str = "ERR syntax error";
/// Redis's reply to an argument that must be a 64-bit integer.
pub const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

/// The key commands.
pub const COMMANDS: &[Command] = &[
    ("copy", -3, copy),
    ("dbsize", 1, dbsize),
    ("del", -2, del),
    ("exists", -2, exists),
    ("expire", -3, |s, a, r| expire(s, a, r, ExpireForm::EXPIRE)),
    ("expireat", -3, |s, a, r| {
        expire(s, a, r, ExpireForm::EXPIREAT)
    }),
    ("expiretime", 2, |s, a, r| expiretime(s, a, r, false)),
    ("flushall", -1, flushall),
    ("flushdb", -1, flushdb),
    ("persist", 2, persist),
    ("pexpire", -3, |s, a, r| {
        expire(s, a, r, ExpireForm::PEXPIRE)
    }),
    ("pexpireat", -3, |s, a, r| {
        expire(s, a, r, ExpireForm::PEXPIREAT)
    }),
    ("pexpiretime", 2, |s, a, r| expiretime(s, a, r, true)),
    ("pttl", 2, |s, a, r| ttl(s, a, r, true)),
    ("rename", 3, |s, a, r| rename(s, a, r, false)),
    ("renamenx", 3, |s, a, r| rename(s, a, r, true)),
    ("touch", -2, exists),
    ("ttl", 2, |s, a, r| ttl(s, a, r, false)),
    ("type", 2, type_of),
    ("unlink", -2, del),
];

/// Longest TTL a record can hold, in seconds (Aerospike's ten years).
const TTL_SECONDS_MAX: u64 = model::TTL_SECONDS_MAX as u64;

/// What a connection's writes need: scratch space for the bins a write builds, and what the
/// writes made so far wait for before their replies may go out (the connection awaits it).
#[derive(Debug, Default)]
pub struct Writes {
    /// The bins a write builds.
    pub bins: BinWriter,
    /// Durability and replica confirmations the replies wait for.
    pub acks: Acks,
}

impl Writes {
    /// Stores `bytes` as the string value of the record at `address`, without expiry.
    ///
    /// # Errors
    /// The engine's refusal.
    pub fn store_string(
        &mut self,
        namespace: &Namespace,
        address: &RecordAddress<'_>,
        bytes: &[u8],
    ) -> Result<(), ResultCode> {
        namespace.update(address, &mut self.bins, &mut self.acks, |_, writer| {
            super::strings::write_string(writer, bytes);
            Ok((Decision::Store(Expiry::Never), ()))
        })
    }
}

/// One Redis key as a record of the configured namespace and set.
pub struct Target<'s> {
    state: &'s ServerState,
    database: Database,
    namespace: &'s Namespace,
    address: RecordAddress<'s>,
}

impl<'s> Target<'s> {
    /// The record for Redis key `key` in `database`.
    pub fn of(state: &'s ServerState, database: Database, key: &'s [u8]) -> Target<'s> {
        let namespace = namespace_of(state);
        let set = state.resp_databases.set_name(database).as_bytes();
        Target {
            state,
            database,
            namespace,
            address: RecordAddress {
                digest: super::recent_digests::digest_of(set, key),
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

    /// [`Target::view`] as a read command's lookup of its key (Redis's `lookupKeyRead`): a key
    /// that is not there also fires the `keymiss` notification.
    pub fn read<T>(&self, look: impl FnOnce(Option<Current<'_>>) -> T) -> Result<T, ResultCode> {
        let mut missed = false;
        let seen = self.namespace.view(&self.address, |current| {
            missed = current.is_none();
            look(current)
        })?;
        if missed {
            let key = self.address.key.map_or(&[][..], |(_, key)| key);
            super::pubsub::notify::key_miss(self.state, self.database, key);
        }
        Ok(seen)
    }

    /// A write that needs only whether the record exists and its metadata, under its
    /// partition's write lock (a value kept on the device is not read back).
    pub fn overwrite<T>(
        &self,
        writes: &mut Writes,
        decide: impl FnOnce(Option<RecordMeta>, &mut BinWriter) -> Result<(Decision, T), ResultCode>,
    ) -> Result<T, ResultCode> {
        let Writes { bins, acks } = writes;
        self.namespace.overwrite(&self.address, bins, acks, decide)
    }

    /// Read-modify-write of the record, under its partition's write lock.
    pub fn update<T>(
        &self,
        writes: &mut Writes,
        decide: impl FnOnce(Option<CurrentMut<'_>>, &mut BinWriter) -> Result<(Decision, T), ResultCode>,
    ) -> Result<T, ResultCode> {
        let Writes { bins, acks } = writes;
        self.namespace.update(&self.address, bins, acks, decide)
    }
}

/// The namespace Redis keys live in.
pub fn namespace_of(state: &ServerState) -> &Namespace {
    state
        .namespace(state.config.resp_namespace().as_bytes())
        .expect("the RESP namespace is validated at start-up")
}

/// The clock of the RESP namespace.
pub fn now_of(session: &Session) -> Now {
    namespace_of(&session.state).now()
}

/// Answers an engine failure in Redis's words.
pub fn engine_error(reply: &mut Reply<'_>, code: ResultCode) {
    match code {
        ResultCode::IncompatibleType => reply.error(WRONGTYPE),
        ResultCode::RecordTooBig => reply.error("ERR string exceeds maximum allowed size"),
        ResultCode::Parameter => {
            reply.error("ERR the key's record belongs to another Aerospike set")
        }
        // Redis's words for a write refused for lack of room (maxmemory with noeviction).
        ResultCode::OutOfSpace => reply
            .error("OOM command not allowed when the namespace's storage is full (stop-writes)"),
        ResultCode::DeviceOverload => reply.error("BUSY the storage device is overloaded, retry"),
        // On a cluster: this node is cut off from the metadata group's quorum, or its map is
        // changing (Redis Cluster's words for a node that cannot serve the slot).
        ResultCode::Unavailable => {
            reply.mark_unavailable();
            reply.error("CLUSTERDOWN The cluster is down");
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

/// Redis's reply to an expiry that is not positive or overflows, naming the command.
pub fn invalid_expire(command: &str) -> String {
    format!("ERR invalid expire time in '{command}' command")
}

/// When a key is to expire: already, or at a void time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// The time asked for is not after now: the key goes at once.
    Past,
    /// At this void time (never [`VoidTime::NEVER`]).
    At(VoidTime),
}

impl Deadline {
    /// The deadline of the Unix time `at_ms` at `now`. Void times are whole seconds: the
    /// second `at_ms` falls in, as Aerospike's TTLs count (up to a second early, never late),
    /// but at least the next one, so that a key with a future expiry exists now.
    ///
    /// # Errors
    /// When it is further than a record's longest TTL (Aerospike's ten years) from now.
    pub fn at_unix_ms(at_ms: i128, now: Now) -> Result<Deadline, ()> {
        let now_ms = i128::from(now.unix_ms);
        if at_ms <= now_ms {
            return Ok(Deadline::Past);
        }
        if at_ms - now_ms > i128::from(TTL_SECONDS_MAX) * 1000 {
            return Err(());
        }
        let epoch_ms = i128::from(CITRUSLEAF_EPOCH_UNIX_SECONDS) * 1000;
        let floor_seconds = (at_ms - epoch_ms).div_euclid(1000);
        let earliest_seconds = i128::from(now.epoch_seconds()) + 1;
        let seconds = u32::try_from(floor_seconds.max(earliest_seconds)).map_err(|_| ())?;
        Ok(Deadline::At(VoidTime(seconds)))
    }

    /// The void time to compare with a record's (GT, LT): a past deadline is before any.
    fn void_time(self) -> VoidTime {
        match self {
            Deadline::Past => VoidTime::NEVER,
            Deadline::At(void_time) => void_time,
        }
    }
}

/// An expiry given to SET, GETEX or a SETEX-like command.
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
    ///
    /// # Errors
    /// Redis's text when `value` is not an integer.
    pub fn parse(option: &[u8], value: &[u8]) -> Result<ExpiryArg, &'static str> {
        let value = parse_i64(value).map_err(|()| NOT_AN_INTEGER)?;
        Ok(match option {
            b"EX" => ExpiryArg::Seconds(value),
            b"PX" => ExpiryArg::Milliseconds(value),
            b"EXAT" => ExpiryArg::UnixSeconds(value),
            _ => ExpiryArg::UnixMilliseconds(value),
        })
    }

    /// What this expiry means at `now` (a Unix time in the past: [`Deadline::Past`]).
    ///
    /// # Errors
    /// For a value of 0 or less, as Redis, or beyond a record's longest TTL; answer it with
    /// [`invalid_expire`].
    pub fn deadline(self, now: Now) -> Result<Deadline, ()> {
        let now_ms = i128::from(now.unix_ms);
        let at_ms = match self {
            ExpiryArg::Seconds(s) if s > 0 => now_ms + i128::from(s) * 1000,
            ExpiryArg::Milliseconds(ms) if ms > 0 => now_ms + i128::from(ms),
            ExpiryArg::UnixSeconds(s) if s > 0 => i128::from(s) * 1000,
            ExpiryArg::UnixMilliseconds(ms) if ms > 0 => i128::from(ms),
            _ => return Err(()),
        };
        Deadline::at_unix_ms(at_ms, now)
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
        let target = Target::of(&session.state, session.database, args.get(position));
        let existed = target.update(&mut session.writes, |current, _| {
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
        let target = Target::of(&session.state, session.database, args.get(position));
        if target.read(|current| current.is_some()) == Ok(true) {
            found += 1;
        }
    }
    reply.integer(found);
    After::Continue
}

/// TYPE key
pub fn type_of(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let name = target.read(|current| current.map_or("none", |c| collection::type_name(&c)));
    reply.simple(name.unwrap_or("none"));
    After::Continue
}

/// TTL key (`in_ms` false) and PTTL key (`in_ms` true): -2 missing, -1 no expiry. TTL rounds
/// the remaining time up to whole seconds, so it reads back what EXPIRE set even though the
/// void time is the whole second at or before the expiry asked for.
pub fn ttl(session: &mut Session, args: &Args, reply: &mut Reply<'_>, in_ms: bool) -> After {
    let now = now_of(session);
    let target = Target::of(&session.state, session.database, args.get(1));
    let void_time = target.read(|current| current.map(|c| c.void_time));
    let value = match void_time {
        Ok(None) | Err(_) => -2,
        Ok(Some(void_time)) if void_time == VoidTime::NEVER => -1,
        Ok(Some(void_time)) => {
            let remaining_ms = remaining_ms(void_time, now);
            if in_ms {
                remaining_ms
            } else {
                seconds_rounded_up(remaining_ms)
            }
        }
    };
    reply.integer(value);
    After::Continue
}

fn seconds_rounded_up(ms: i64) -> i64 {
    (ms + 999) / 1000
}

fn remaining_ms(void_time: VoidTime, now: Now) -> i64 {
    (unix_seconds(void_time) * 1000 - i64::try_from(now.unix_ms).unwrap_or(i64::MAX)).max(0)
}

/// The Unix time of a void time, in seconds.
fn unix_seconds(void_time: VoidTime) -> i64 {
    i64::from(void_time.0) + i64::try_from(CITRUSLEAF_EPOCH_UNIX_SECONDS).unwrap_or(0)
}

/// DBSIZE: the records of the session database's set; on a cluster, those in the partitions
/// this node masters (the connection adds up every node's).
pub fn dbsize(session: &mut Session, _args: &Args, reply: &mut Reply<'_>) -> After {
    let objects = database_size(&session.state, session.database);
    reply.integer(i64::try_from(objects).unwrap_or(i64::MAX));
    After::Continue
}

/// The keys of `database` (on a cluster, in the partitions this node masters).
pub fn database_size(state: &ServerState, database: Database) -> u64 {
    let set = state.resp_databases.set_name(database);
    let namespace = namespace_of(state);
    if state.is_clustered() {
        return namespace.set_master_objects(set.as_bytes());
    }
    namespace
        .sets()
        .into_iter()
        .find(|s| s.name == set)
        .map_or(0, |s| s.objects)
}

/// FLUSHDB [ASYNC|SYNC]: truncate the session database's set, then reclaim its records.
pub fn flushdb(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    if let Err(message) = check_flush_options(args) {
        reply.error(message);
        return After::Continue;
    }
    match truncate_database(&session.state, session.database) {
        Ok(()) => reply.ok(),
        Err(message) => reply.error(&message),
    }
    After::Continue
}

/// FLUSHALL [ASYNC|SYNC]: FLUSHDB of every database.
pub fn flushall(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    if let Err(message) = check_flush_options(args) {
        reply.error(message);
        return After::Continue;
    }
    let state = std::sync::Arc::clone(&session.state);
    for (database, _) in state.resp_databases.iter() {
        if let Err(message) = truncate_database(&state, database) {
            reply.error(&message);
            return After::Continue;
        }
    }
    reply.ok();
    After::Continue
}

fn check_flush_options(args: &Args) -> Result<(), &'static str> {
    let valid = args.len() == 1
        || (args.len() == 2
            && matches!(
                args.get(1).to_ascii_uppercase().as_slice(),
                b"ASYNC" | b"SYNC"
            ));
    if valid { Ok(()) } else { Err(SYNTAX_ERROR) }
}

/// Truncates the set of `database` (cluster-wide on a cluster) and reclaims its records.
fn truncate_database(state: &ServerState, database: Database) -> Result<(), String> {
    let namespace = namespace_of(state);
    let set = Some(state.resp_databases.set_name(database).as_bytes());
    namespace
        .truncate(set, None)
        .map_err(|error| format!("ERR {error}"))?;
    if let Some(node) = state.cluster_node() {
        let cutoff_ms = namespace.truncate_cutoff_ms(set);
        node.replicate_truncate_and_wait(namespace.name(), set, cutoff_ms);
    }
    namespace.reclaim_truncated();
    Ok(())
}

/// How EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT read their time argument.
#[derive(Clone, Copy, Debug)]
pub struct ExpireForm {
    /// The command's name, for its error text.
    name: &'static str,
    /// Whether the time is in milliseconds (else seconds).
    in_ms: bool,
    /// Whether the time is a Unix time (else from now).
    absolute: bool,
}

impl ExpireForm {
    const EXPIRE: ExpireForm = ExpireForm {
        name: "expire",
        in_ms: false,
        absolute: false,
    };
    const PEXPIRE: ExpireForm = ExpireForm {
        name: "pexpire",
        in_ms: true,
        absolute: false,
    };
    const EXPIREAT: ExpireForm = ExpireForm {
        name: "expireat",
        in_ms: false,
        absolute: true,
    };
    const PEXPIREAT: ExpireForm = ExpireForm {
        name: "pexpireat",
        in_ms: true,
        absolute: true,
    };

    /// The Unix time `value` names at `now`, in milliseconds; `None` where Redis finds it
    /// overflows.
    fn unix_ms(self, value: i64, now: Now) -> Option<i128> {
        let ms = if self.in_ms {
            value
        } else {
            value.checked_mul(1000)?
        };
        let base_ms = if self.absolute {
            0
        } else {
            i64::try_from(now.unix_ms).ok()?
        };
        ms.checked_add(base_ms).map(i128::from)
    }
}

/// The conditions of EXPIRE and its variants.
#[derive(Clone, Copy, Debug, Default)]
struct ExpireConditions {
    /// NX: only a key without an expiry.
    nx: bool,
    /// XX: only a key with an expiry.
    xx: bool,
    /// GT: only a later expiry (no expiry counts as the latest).
    gt: bool,
    /// LT: only an earlier expiry.
    lt: bool,
}

impl ExpireConditions {
    /// The options after the time (position 3 on).
    fn parse(args: &Args) -> Result<ExpireConditions, String> {
        let mut conditions = ExpireConditions::default();
        for position in 3..args.len() {
            match args.get(position).to_ascii_uppercase().as_slice() {
                b"NX" => conditions.nx = true,
                b"XX" => conditions.xx = true,
                b"GT" => conditions.gt = true,
                b"LT" => conditions.lt = true,
                _ => {
                    let option = String::from_utf8_lossy(args.get(position));
                    return Err(format!(
                        "ERR Unsupported option {}",
                        option.replace(['\r', '\n'], " ")
                    ));
                }
            }
        }
        if conditions.nx && (conditions.xx || conditions.gt || conditions.lt) {
            return Err(
                "ERR NX and XX, GT or LT options at the same time are not compatible".to_owned(),
            );
        }
        if conditions.gt && conditions.lt {
            return Err("ERR GT and LT options at the same time are not compatible".to_owned());
        }
        Ok(conditions)
    }

    /// Whether a key expiring at `current` takes the deadline `new`. Both are compared as
    /// stored, in whole seconds.
    fn allow(self, current: VoidTime, new: Deadline) -> bool {
        let new = new.void_time();
        if current == VoidTime::NEVER {
            return !self.xx && !self.gt;
        }
        let later = new > current;
        let earlier = new < current;
        !self.nx && (!self.gt || later) && (!self.lt || earlier)
    }
}

/// EXPIRE key seconds, PEXPIRE key ms, EXPIREAT key unix-s, PEXPIREAT key unix-ms, each
/// [NX | XX | GT | LT]: 1 if the expiry was set (a time not in the future deletes the key),
/// 0 if the key is missing or a condition failed.
fn expire(session: &mut Session, args: &Args, reply: &mut Reply<'_>, form: ExpireForm) -> After {
    let conditions = match ExpireConditions::parse(args) {
        Ok(conditions) => conditions,
        Err(text) => {
            reply.error(&text);
            return After::Continue;
        }
    };
    let Ok(value) = parse_i64(args.get(2)) else {
        reply.error(NOT_AN_INTEGER);
        return After::Continue;
    };
    let now = now_of(session);
    let deadline = form
        .unix_ms(value, now)
        .ok_or(())
        .and_then(|at_ms| Deadline::at_unix_ms(at_ms, now));
    let Ok(deadline) = deadline else {
        reply.error(&invalid_expire(form.name));
        return After::Continue;
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let result = target.update(&mut session.writes, |current, _| {
        let Some(current) = current else {
            return Ok((Decision::Keep, 0));
        };
        if !conditions.allow(current.get().void_time, deadline) {
            return Ok((Decision::Keep, 0));
        }
        let decision = match deadline {
            Deadline::Past => Decision::Delete,
            Deadline::At(void_time) => Decision::Touch(Expiry::At(void_time)),
        };
        Ok((decision, 1))
    });
    match result {
        Ok(value) => reply.integer(value),
        Err(code) => engine_error(reply, code),
    }
    After::Continue
}

/// EXPIRETIME key (`in_ms` false) and PEXPIRETIME key (`in_ms` true): the Unix time the key
/// expires at; -2 missing, -1 no expiry.
fn expiretime(session: &mut Session, args: &Args, reply: &mut Reply<'_>, in_ms: bool) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let value = match target.read(|current| current.map(|c| c.void_time)) {
        Ok(None) | Err(_) => -2,
        Ok(Some(VoidTime::NEVER)) => -1,
        Ok(Some(void_time)) if in_ms => unix_seconds(void_time) * 1000,
        Ok(Some(void_time)) => unix_seconds(void_time),
    };
    reply.integer(value);
    After::Continue
}

/// PERSIST key: 1 if the key had an expiry and now has none.
fn persist(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let result = target.update(&mut session.writes, |current, _| match current {
        Some(current) if current.get().void_time != VoidTime::NEVER => {
            Ok((Decision::Touch(Expiry::Never), 1))
        }
        _ => Ok((Decision::Keep, 0)),
    });
    match result {
        Ok(value) => reply.integer(value),
        Err(code) => engine_error(reply, code),
    }
    After::Continue
}

/// A record's value and expiry, copied out to be stored under another key.
struct Copied {
    /// The collection rebuilt, when the record holds one natively.
    native: Option<Box<dyn NativeValue>>,
    /// Otherwise its bins: name, particle type, value.
    bins: Vec<(Vec<u8>, u8, Vec<u8>)>,
    /// When it expires.
    void_time: VoidTime,
}

impl Copied {
    fn of(current: &Current<'_>) -> Copied {
        let native = rebuilt_native(current);
        let bins = if native.is_some() {
            Vec::new()
        } else {
            let bins = current.bins();
            let copied = bins
                .iter()
                .map(|bin| (bin.name.to_vec(), bin.particle_type, bin.value.to_vec()));
            copied.collect()
        };
        Copied {
            native,
            bins,
            void_time: current.void_time,
        }
    }

    /// Stores the copy: the decision for the destination's update.
    fn store(self, writer: &mut BinWriter) -> Decision {
        let expiry = match self.void_time {
            VoidTime::NEVER => Expiry::Never,
            void_time => Expiry::At(void_time),
        };
        if let Some(native) = self.native {
            return Decision::StoreNative(native, expiry);
        }
        for (name, particle_type, value) in &self.bins {
            writer.bin(name, *particle_type, value);
        }
        Decision::Store(expiry)
    }
}

/// A copy of the record's native collection, rebuilt from the bins it renders.
fn rebuilt_native(current: &Current<'_>) -> Option<Box<dyn NativeValue>> {
    let native: &dyn Any = current.native()?;
    let bins = current.bins();
    let bin = bins.iter().next()?;
    if native.is::<HashValue>() {
        decoded::<HashValue>(bin.value)
    } else if native.is::<ListValue>() {
        decoded::<ListValue>(bin.value)
    } else if native.is::<SetValue>() {
        decoded::<SetValue>(bin.value)
    } else if native.is::<ZSetValue>() {
        decoded::<ZSetValue>(bin.value)
    } else {
        None
    }
}

fn decoded<C: Collection>(value: &[u8]) -> Option<Box<dyn NativeValue>> {
    let collection = C::decode(value).filter(|collection| !collection.is_empty())?;
    Some(Box::new(collection))
}

/// Copies `source`'s value and expiry to `destination` (each a database and a key), over what
/// it holds when `replace`. `None`: no source; `Some(false)`: the destination exists and is
/// kept.
pub fn copy_key(
    session: &mut Session,
    (source_database, source): (Database, &[u8]),
    (destination_database, destination): (Database, &[u8]),
    replace: bool,
) -> Result<Option<bool>, ResultCode> {
    let state = std::sync::Arc::clone(&session.state);
    let source_target = Target::of(&state, source_database, source);
    let copied = source_target.view(|c| c.map(|c| Copied::of(&c)))?;
    let Some(copied) = copied else {
        return Ok(None);
    };
    let target = Target::of(&state, destination_database, destination);
    let stored = target.update(&mut session.writes, |current, writer| {
        if current.is_some() && !replace {
            return Ok((Decision::Keep, false));
        }
        Ok((copied.store(writer), true))
    })?;
    Ok(Some(stored))
}

/// RENAME key newkey (`only_if_missing` false) and RENAMENX key newkey (true): moves the
/// value with its expiry, whatever its type; RENAMENX keeps an existing `newkey`.
fn rename(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    only_if_missing: bool,
) -> After {
    let (source, destination) = (args.get(1), args.get(2));
    let state = std::sync::Arc::clone(&session.state);
    let database = session.database;
    let moved = namespace_of(&state).exclusive(|| {
        if source == destination {
            let exists = Target::of(&state, database, source).view(|c| c.is_some())?;
            return Ok(exists.then_some(!only_if_missing));
        }
        let stored = copy_key(
            session,
            (database, source),
            (database, destination),
            !only_if_missing,
        )?;
        if stored == Some(true) {
            let target = Target::of(&state, database, source);
            target.update(&mut session.writes, |_, _| Ok((Decision::Delete, ())))?;
        }
        Ok(stored)
    });
    match moved {
        Ok(None) => reply.error("ERR no such key"),
        Ok(Some(_)) if !only_if_missing => reply.ok(),
        Ok(Some(moved)) => reply.integer(i64::from(moved)),
        Err(code) => engine_error(reply, code),
    }
    After::Continue
}

/// COPY source destination [DB destination-db] [REPLACE]: 1 if copied (value and expiry), 0
/// if the source is missing or the destination exists without REPLACE. Another database is
/// refused on a cluster, as Redis Cluster refuses it.
fn copy(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let (destination_database, replace) = match parse_copy_options(session, args) {
        Ok(options) => options,
        Err(message) => {
            reply.error(message);
            return After::Continue;
        }
    };
    let (source, destination) = (args.get(1), args.get(2));
    if source == destination && destination_database == session.database {
        reply.error("ERR source and destination objects are the same");
        return After::Continue;
    }
    if destination_database != session.database && session.state.is_clustered() {
        reply.error("ERR Copying to another database is not allowed in cluster mode");
        return After::Continue;
    }
    let state = std::sync::Arc::clone(&session.state);
    let source = (session.database, source);
    let destination = (destination_database, destination);
    let copied = namespace_of(&state).exclusive(|| copy_key(session, source, destination, replace));
    match copied {
        Ok(copied) => reply.integer(i64::from(copied == Some(true))),
        Err(code) => engine_error(reply, code),
    }
    After::Continue
}

/// COPY's options from position 3: the destination database (the session's by default) and
/// whether REPLACE was given.
fn parse_copy_options(session: &Session, args: &Args) -> Result<(Database, bool), &'static str> {
    let mut replace = false;
    let mut database = session.database;
    let mut position = 3;
    while position < args.len() {
        match args.get(position).to_ascii_uppercase().as_slice() {
            b"REPLACE" => replace = true,
            b"DB" if position + 1 < args.len() => {
                position += 1;
                database = session.state.resp_databases.parse(args.get(position))?;
            }
            _ => return Err(SYNTAX_ERROR),
        }
        position += 1;
    }
    Ok((database, replace))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix milliseconds of a fixed instant, 2025-01-01, plus `ms`.
    fn now_at(ms: u64) -> Now {
        Now {
            unix_ms: 1_735_689_600_000 + ms,
        }
    }

    /// Builds a request's arguments.
    fn args_of(words: &[&str]) -> Args {
        words.iter().collect()
    }

    fn ttl_shown(deadline: Deadline, now: Now) -> i64 {
        let Deadline::At(void_time) = deadline else {
            panic!("a future deadline");
        };
        seconds_rounded_up(remaining_ms(void_time, now))
    }

    #[test]
    fn whole_seconds_read_back_exactly_whatever_the_milliseconds_of_now() {
        for fraction_ms in [0, 1, 499, 500, 501, 999] {
            let now = now_at(fraction_ms);
            for seconds in [1, 2, 100, 86_400] {
                let deadline = ExpiryArg::Seconds(seconds).deadline(now).expect("valid");
                assert_eq!(
                    ttl_shown(deadline, now),
                    seconds,
                    "EX {seconds} at +{fraction_ms}ms"
                );
                let Deadline::At(void_time) = deadline else {
                    panic!("a future deadline");
                };
                let aerospike_ttl = void_time.0 - now.epoch_seconds();
                assert_eq!(i64::from(aerospike_ttl), seconds, "as Aerospike counts it");
                assert!(remaining_ms(void_time, now) <= seconds * 1000, "never late");
            }
        }
    }

    #[test]
    fn a_future_deadline_is_never_already_expired() {
        for fraction_ms in [0, 400, 999] {
            let now = now_at(fraction_ms);
            let Ok(Deadline::At(void_time)) = ExpiryArg::Milliseconds(1).deadline(now) else {
                panic!("PX 1 is in the future");
            };
            assert!(!void_time.is_expired_at(now.epoch_seconds()));
        }
    }

    #[test]
    fn past_zero_and_too_far_deadlines() {
        let now = now_at(0);
        assert_eq!(ExpiryArg::UnixSeconds(1).deadline(now), Ok(Deadline::Past));
        assert_eq!(ExpiryArg::Seconds(0).deadline(now), Err(()));
        assert_eq!(ExpiryArg::Milliseconds(-5).deadline(now), Err(()));
        let ten_years = i64::from(model::TTL_SECONDS_MAX);
        assert!(ExpiryArg::Seconds(ten_years).deadline(now).is_ok());
        assert_eq!(ExpiryArg::Seconds(ten_years + 1).deadline(now), Err(()));
        assert_eq!(ExpiryArg::Seconds(i64::MAX).deadline(now), Err(()));
    }

    #[test]
    fn expire_forms_overflow_as_redis_checks() {
        let now = now_at(0);
        assert_eq!(ExpireForm::EXPIRE.unix_ms(i64::MAX / 1000 + 1, now), None);
        assert_eq!(ExpireForm::PEXPIRE.unix_ms(i64::MAX, now), None);
        assert_eq!(
            ExpireForm::EXPIREAT.unix_ms(5, now),
            Some(5000),
            "absolute seconds"
        );
        assert_eq!(
            ExpireForm::PEXPIRE.unix_ms(-10, now),
            Some(i128::from(now.unix_ms) - 10)
        );
    }

    #[test]
    fn expire_conditions_parse_with_redis_errors() {
        let parse = |words: &[&str]| ExpireConditions::parse(&args_of(words));
        assert!(parse(&["EXPIRE", "k", "1", "nx"]).is_ok());
        assert!(parse(&["EXPIRE", "k", "1", "xx", "gt"]).is_ok());
        let incompatible = "ERR NX and XX, GT or LT options at the same time are not compatible";
        assert_eq!(
            parse(&["EXPIRE", "k", "1", "NX", "LT"]).err().as_deref(),
            Some(incompatible)
        );
        assert_eq!(
            parse(&["EXPIRE", "k", "1", "gt", "lt"]).err().as_deref(),
            Some("ERR GT and LT options at the same time are not compatible")
        );
        assert_eq!(
            parse(&["EXPIRE", "k", "1", "soon"]).err().as_deref(),
            Some("ERR Unsupported option soon")
        );
    }

    #[test]
    fn expire_conditions_compare_with_the_current_expiry() {
        let all = |nx, xx, gt, lt| ExpireConditions { nx, xx, gt, lt };
        let (none, at_10, at_20) = (VoidTime::NEVER, VoidTime(10), VoidTime(20));
        let new_15 = Deadline::At(VoidTime(15));
        assert!(all(true, false, false, false).allow(none, new_15));
        assert!(!all(true, false, false, false).allow(at_10, new_15));
        assert!(!all(false, true, false, false).allow(none, new_15));
        assert!(all(false, true, false, false).allow(at_10, new_15));
        assert!(
            !all(false, false, true, false).allow(none, new_15),
            "no expiry is the latest"
        );
        assert!(all(false, false, true, false).allow(at_10, new_15));
        assert!(!all(false, false, true, false).allow(at_20, new_15));
        assert!(all(false, false, false, true).allow(none, new_15));
        assert!(all(false, false, false, true).allow(at_20, new_15));
        assert!(!all(false, false, false, true).allow(at_10, new_15));
        assert!(all(false, false, false, true).allow(at_10, Deadline::Past));
        assert!(!all(false, false, true, false).allow(at_10, Deadline::Past));
    }
}
