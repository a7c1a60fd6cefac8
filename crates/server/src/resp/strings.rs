//! String commands: a Redis string is one bin named `value` (see
//! `docs/internals/redis-mapping.md`).

use std::ops::Range;
use std::sync::Arc;

use engine::{Current, Decision, Expiry, Now};
use model::{ParticleType, ResultCode, VoidTime};
use wire_resp::Args;

use super::commands::Command;
use super::keys::{self, Deadline, ExpiryArg, Target, WRONGTYPE};
use super::reply::Reply;
use super::{After, Session, parse_double};

/// The string commands.
pub const COMMANDS: &[Command] = &[
    ("append", 3, append),
    ("decr", 2, |s, a, r| increment(s, a, r, Some(1), true)),
    ("decrby", 3, |s, a, r| increment(s, a, r, None, true)),
    ("get", 2, get),
    ("getdel", 2, getdel),
    ("getex", -2, getex),
    ("getrange", 4, getrange),
    ("getset", 3, getset),
    ("incr", 2, |s, a, r| increment(s, a, r, Some(1), false)),
    ("incrby", 3, |s, a, r| increment(s, a, r, None, false)),
    ("incrbyfloat", 3, incrbyfloat),
    ("mget", -2, mget),
    ("mset", -3, mset),
    ("msetnx", -3, msetnx),
    ("psetex", 4, |s, a, r| setex(s, a, r, true)),
    ("set", -3, set),
    ("setex", 4, |s, a, r| setex(s, a, r, false)),
    ("setnx", 3, setnx),
    ("setrange", 4, setrange),
    ("strlen", 2, strlen),
    ("substr", 4, getrange),
];

/// The bin holding a string value.
pub const VALUE_BIN: &[u8] = b"value";

/// A string value as stored: bytes, or an integer kept as one after INCR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StringValue {
    /// STRING or BLOB bytes.
    Bytes(Vec<u8>),
    /// An INTEGER bin.
    Integer(i64),
}

impl StringValue {
    /// The value as Redis shows it (an integer as its decimal text).
    pub fn bytes(self) -> Vec<u8> {
        self.into_bytes()
    }

    fn into_bytes(self) -> Vec<u8> {
        match self {
            StringValue::Bytes(bytes) => bytes,
            StringValue::Integer(value) => value.to_string().into_bytes(),
        }
    }
}

/// The string value of a record, or `Err(())` when it holds another type: a string is a
/// record whose only bin is `value` (a record with more bins is left to Aerospike clients, so
/// that no Redis write drops a bin).
pub fn string_of(current: &Current<'_>) -> Result<StringValue, ()> {
    with_string(current, |value| match value {
        StringRef::Bytes(bytes) => StringValue::Bytes(bytes.to_vec()),
        StringRef::Integer(value) => StringValue::Integer(value),
    })
}

/// A string value borrowed from its record.
enum StringRef<'a> {
    Bytes(&'a [u8]),
    Integer(i64),
}

/// Calls `look` with the record's string value in place (no copy), or `Err(())` when the
/// record holds another type.
fn with_string<T>(current: &Current<'_>, look: impl FnOnce(StringRef<'_>) -> T) -> Result<T, ()> {
    if current.native().is_some() {
        // A collection: no need to render it to find it is not a string.
        return Err(());
    }
    let bins = current.bins();
    let mut iter = bins.iter();
    let bin = iter.next().filter(|bin| bin.name == VALUE_BIN).ok_or(())?;
    if iter.next().is_some() {
        return Err(());
    }
    match bin.particle_type {
        t if t == ParticleType::String as u8 || t == ParticleType::Blob as u8 => {
            Ok(look(StringRef::Bytes(bin.value)))
        }
        t if t == ParticleType::Integer as u8 => {
            let bytes: [u8; 8] = bin.value.try_into().map_err(|_| ())?;
            Ok(look(StringRef::Integer(i64::from_be_bytes(bytes))))
        }
        _ => Err(()),
    }
}

/// Writes `bytes` as the record's string value: STRING when valid UTF-8, else BLOB.
pub fn write_string(writer: &mut engine::BinWriter, bytes: &[u8]) {
    writer.bin(VALUE_BIN, particle_of(bytes) as u8, bytes);
}

/// How a string's bytes are stored: STRING when they are UTF-8 (an Aerospike client reads
/// them as a string), BLOB otherwise.
pub fn particle_of(bytes: &[u8]) -> ParticleType {
    if std::str::from_utf8(bytes).is_ok() {
        ParticleType::String
    } else {
        ParticleType::Blob
    }
}

fn write_integer(writer: &mut engine::BinWriter, value: i64) {
    writer.bin(VALUE_BIN, ParticleType::Integer as u8, &value.to_be_bytes());
}

/// GET key
pub fn get(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    // The reply is written under the read lock, straight from the record.
    let found = target.read(|current| {
        current.map(|c| {
            with_string(&c, |value| match value {
                StringRef::Bytes(bytes) => reply.bulk(bytes),
                StringRef::Integer(value) => reply.bulk(value.to_string().as_bytes()),
            })
        })
    });
    match found {
        Ok(None) => reply.null(),
        Ok(Some(Ok(()))) => {}
        Ok(Some(Err(()))) => reply.error(WRONGTYPE),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// Whose options [`parse_string_options`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OptionsOf {
    /// SET: NX, XX, GET, KEEPTTL and the expiry options.
    Set,
    /// GETEX: PERSIST and the expiry options.
    GetEx,
}

/// Options of SET and GETEX.
#[derive(Clone, Copy, Debug, Default)]
struct StringOptions<'a> {
    only_if_missing: bool,
    only_if_present: bool,
    keep_ttl: bool,
    persist: bool,
    return_old: bool,
    /// EX, PX, EXAT or PXAT (upper case) and its value, parsed after every option is known.
    expiry: Option<(&'static [u8], &'a [u8])>,
}

/// Parses options from `start` as Redis does (`parseExtendedStringArgumentsOrReply`): an
/// option may repeat (the last value counts), but NX and XX, and the expiry options, exclude
/// one another.
fn parse_string_options(
    args: &Args,
    start: usize,
    of: OptionsOf,
) -> Result<StringOptions<'_>, &'static str> {
    let set = of == OptionsOf::Set;
    let mut options = StringOptions::default();
    let mut position = start;
    while position < args.len() {
        let word = args.get(position).to_ascii_uppercase();
        match word.as_slice() {
            b"NX" if set && !options.only_if_present => options.only_if_missing = true,
            b"XX" if set && !options.only_if_missing => options.only_if_present = true,
            b"GET" if set => options.return_old = true,
            b"KEEPTTL" if set && options.expiry.is_none() => options.keep_ttl = true,
            b"PERSIST" if !set && options.expiry.is_none() => options.persist = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" => {
                let option = expiry_option(&word);
                let compatible = !options.keep_ttl
                    && !options.persist
                    && options
                        .expiry
                        .is_none_or(|(previous, _)| previous == option);
                if !compatible || position + 1 == args.len() {
                    return Err(keys::SYNTAX_ERROR);
                }
                position += 1;
                options.expiry = Some((option, args.get(position)));
            }
            _ => return Err(keys::SYNTAX_ERROR),
        }
        position += 1;
    }
    Ok(options)
}

/// The expiry option named by upper-case `word` (one of EX, PX, EXAT, PXAT).
fn expiry_option(word: &[u8]) -> &'static [u8] {
    match word {
        b"EX" => b"EX",
        b"PX" => b"PX",
        b"EXAT" => b"EXAT",
        _ => b"PXAT",
    }
}

impl StringOptions<'_> {
    /// The deadline the expiry option asks for at `now`, if one was given.
    ///
    /// # Errors
    /// Redis's text, naming `command` for an invalid expire time.
    fn deadline(&self, now: Now, command: &str) -> Result<Option<Deadline>, String> {
        let Some((option, value)) = self.expiry else {
            return Ok(None);
        };
        let arg = ExpiryArg::parse(option, value).map_err(str::to_owned)?;
        match arg.deadline(now) {
            Ok(deadline) => Ok(Some(deadline)),
            Err(()) => Err(keys::invalid_expire(command)),
        }
    }
}

/// How a SET-like command writes: its conditions, and the expiry of the value it stores.
#[derive(Clone, Copy, Debug)]
struct SetRequest<'a> {
    key: &'a [u8],
    value: &'a [u8],
    only_if_missing: bool,
    only_if_present: bool,
    /// Whether the old value is wanted (then a key of another type is WRONGTYPE).
    return_old: bool,
    /// The stored value's expiry; `None`: a time already past, so the key is deleted.
    expiry: Option<Expiry>,
}

impl<'a> SetRequest<'a> {
    /// Stores `value` at `key`, never expiring, whatever the key held.
    fn plain(key: &'a [u8], value: &'a [u8]) -> SetRequest<'a> {
        SetRequest {
            key,
            value,
            only_if_missing: false,
            only_if_present: false,
            return_old: false,
            expiry: Some(Expiry::Never),
        }
    }
}

/// What [`set_value`] did: whether it wrote, and the old value (`None`: no key; `Some(None)`:
/// a key of another type).
type SetOutcome = (bool, Option<Option<StringValue>>);

/// Writes as `request` says, atomically.
fn set_value(session: &mut Session, request: SetRequest<'_>) -> Result<SetOutcome, ResultCode> {
    let target = Target::of(&session.state, session.database, request.key);
    if !request.return_old {
        // Only whether the key exists matters: a value kept on the device is not read back.
        return target.overwrite(&mut session.writes, |existing, writer| {
            let decision = set_decision(&request, existing.is_some(), writer);
            let written = !matches!(decision, Decision::Keep);
            Ok((decision, (written, None)))
        });
    }
    target.update(&mut session.writes, |current, writer| {
        let old = match current.map(|c| string_of(&c.get())) {
            Some(Err(())) => return Err(ResultCode::IncompatibleType),
            Some(Ok(old)) => Some(Some(old)),
            None => None,
        };
        let decision = set_decision(&request, old.is_some(), writer);
        let written = !matches!(decision, Decision::Keep);
        Ok((decision, (written, old)))
    })
}

/// What a SET does to a key that `exists` or not: keep it (NX/XX unmet), delete it (a past
/// expiry), or store the value written into `writer`.
fn set_decision(
    request: &SetRequest<'_>,
    exists: bool,
    writer: &mut engine::BinWriter,
) -> Decision {
    if (request.only_if_missing && exists) || (request.only_if_present && !exists) {
        return Decision::Keep;
    }
    let Some(expiry) = request.expiry else {
        return Decision::Delete;
    };
    write_string(writer, request.value);
    Decision::Store(expiry)
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]. A Unix time already past
/// deletes the key, as the value would expire at once.
pub fn set(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let options = match parse_string_options(args, 3, OptionsOf::Set) {
        Ok(options) => options,
        Err(message) => {
            reply.error(message);
            return After::Continue;
        }
    };
    let now = keys::now_of(session);
    let expiry = match options.deadline(now, "set") {
        Ok(Some(Deadline::At(void_time))) => Some(keys::expiry_at(void_time)),
        Ok(Some(Deadline::Past)) => None,
        Ok(None) if options.keep_ttl => Some(Expiry::Keep),
        Ok(None) => Some(Expiry::Never),
        Err(message) => {
            reply.error(&message);
            return After::Continue;
        }
    };
    let request = SetRequest {
        only_if_missing: options.only_if_missing,
        only_if_present: options.only_if_present,
        return_old: options.return_old,
        expiry,
        ..SetRequest::plain(args.get(1), args.get(2))
    };
    match set_value(session, request) {
        Ok((_, old)) if options.return_old => reply_old(reply, old),
        Ok((true, _)) => reply.ok(),
        Ok((false, _)) => reply.null(),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// Answers an old value: its bytes, or nil.
fn reply_old(reply: &mut Reply<'_>, old: Option<Option<StringValue>>) {
    match old.flatten() {
        Some(old) => reply.bulk(&old.into_bytes()),
        None => reply.null(),
    }
}

/// SETNX key value: 1 if the key was missing and is now set, else 0.
fn setnx(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let request = SetRequest {
        only_if_missing: true,
        ..SetRequest::plain(args.get(1), args.get(2))
    };
    match set_value(session, request) {
        Ok((written, _)) => reply.integer(i64::from(written)),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// SETEX key seconds value (`in_ms` false) and PSETEX key milliseconds value (`in_ms` true).
fn setex(session: &mut Session, args: &Args, reply: &mut Reply<'_>, in_ms: bool) -> After {
    let (option, command): (&[u8], &str) = if in_ms {
        (b"PX", "psetex")
    } else {
        (b"EX", "setex")
    };
    let deadline = match ExpiryArg::parse(option, args.get(2)) {
        Ok(arg) => arg.deadline(keys::now_of(session)),
        Err(message) => {
            reply.error(message);
            return After::Continue;
        }
    };
    let Ok(Deadline::At(void_time)) = deadline else {
        reply.error(&keys::invalid_expire(command));
        return After::Continue;
    };
    let request = SetRequest {
        expiry: Some(keys::expiry_at(void_time)),
        ..SetRequest::plain(args.get(1), args.get(3))
    };
    match set_value(session, request) {
        Ok(_) => reply.ok(),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// GETSET key value: the old value (nil if none); the new one never expires.
fn getset(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let request = SetRequest {
        return_old: true,
        ..SetRequest::plain(args.get(1), args.get(2))
    };
    match set_value(session, request) {
        Ok((_, old)) => reply_old(reply, old),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// What GETEX found and answers.
enum GetExOutcome {
    /// No key: nil.
    Missing,
    /// The value, whose expiry has been dealt with.
    Value(StringValue),
    /// An error reply (the expiry argument), nothing changed.
    Error(String),
}

/// GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]: the value, after setting or removing its
/// expiry (a Unix time already past deletes the key). As in Redis, the expiry's value is
/// checked only once the key is found to hold a string.
fn getex(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let options = match parse_string_options(args, 2, OptionsOf::GetEx) {
        Ok(options) => options,
        Err(message) => {
            reply.error(message);
            return After::Continue;
        }
    };
    let now = keys::now_of(session);
    let target = Target::of(&session.state, session.database, args.get(1));
    let result = target.update(&mut session.writes, |current, _| {
        let Some(current) = current else {
            return Ok((Decision::Keep, GetExOutcome::Missing));
        };
        let value = string_of(&current.get()).map_err(|()| ResultCode::IncompatibleType)?;
        let had_expiry = current.get().void_time != VoidTime::NEVER;
        let decision = match options.deadline(now, "getex") {
            Err(message) => return Ok((Decision::Keep, GetExOutcome::Error(message))),
            Ok(Some(Deadline::Past)) => Decision::Delete,
            Ok(Some(Deadline::At(void_time))) => Decision::Touch(keys::expiry_at(void_time)),
            Ok(None) if options.persist && had_expiry => Decision::Touch(Expiry::Never),
            Ok(None) => Decision::Keep,
        };
        Ok((decision, GetExOutcome::Value(value)))
    });
    match result {
        Ok(GetExOutcome::Missing) => reply.null(),
        Ok(GetExOutcome::Value(value)) => reply.bulk(&value.into_bytes()),
        Ok(GetExOutcome::Error(message)) => reply.error(&message),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// INCR, DECR, INCRBY, DECRBY: `delta` from the command (`None`: read it from argument 2).
pub fn increment(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    delta: Option<i64>,
    negate: bool,
) -> After {
    let delta = match delta.map_or_else(|| keys::parse_i64(args.get(2)), Ok) {
        Ok(delta) if negate => delta.checked_neg(),
        Ok(delta) => Some(delta),
        Err(()) => None,
    };
    let Some(delta) = delta else {
        reply.error(keys::NOT_AN_INTEGER);
        return After::Continue;
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let result = target.update(&mut session.writes, |current, writer| {
        let old = match current.map(|c| string_of(&c.get())) {
            None => 0,
            Some(Ok(StringValue::Integer(value))) => value,
            Some(Ok(StringValue::Bytes(bytes))) => {
                keys::parse_i64(&bytes).map_err(|()| ResultCode::Parameter)?
            }
            Some(Err(())) => return Err(ResultCode::IncompatibleType),
        };
        let new = old.checked_add(delta).ok_or(ResultCode::BinExists)?;
        write_integer(writer, new);
        Ok((Decision::Store(Expiry::Keep), new))
    });
    match result {
        Ok(value) => reply.integer(value),
        Err(ResultCode::Parameter) => reply.error(keys::NOT_AN_INTEGER),
        Err(ResultCode::BinExists) => reply.error("ERR increment or decrement would overflow"),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// APPEND key value
pub fn append(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let suffix = args.get(2);
    let target = Target::of(&session.state, session.database, args.get(1));
    let result = target.update(&mut session.writes, |current, writer| {
        let mut bytes = match current.map(|c| string_of(&c.get())) {
            None => Vec::new(),
            Some(Ok(value)) => value.into_bytes(),
            Some(Err(())) => return Err(ResultCode::IncompatibleType),
        };
        bytes.extend_from_slice(suffix);
        write_string(writer, &bytes);
        Ok((Decision::Store(Expiry::Keep), bytes.len()))
    });
    match result {
        Ok(length) => reply.integer(i64::try_from(length).unwrap_or(i64::MAX)),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// STRLEN key
pub fn strlen(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    match target.read(|current| current.map(|c| string_of(&c))) {
        Ok(None) => reply.integer(0),
        Ok(Some(Ok(value))) => reply.integer(value.into_bytes().len() as i64),
        Ok(Some(Err(()))) => reply.error(WRONGTYPE),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// MGET key [key ...]: a missing key or one of another type answers nil.
pub fn mget(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    reply.array(args.len() - 1);
    for position in 1..args.len() {
        let target = Target::of(&session.state, session.database, args.get(position));
        match target.read(|current| current.and_then(|c| string_of(&c).ok())) {
            Ok(Some(value)) => reply.bulk(&value.into_bytes()),
            _ => reply.null(),
        }
    }
    After::Continue
}

/// MSET key value [key value ...]. Each key is written atomically; the command as a whole is
/// not isolated from concurrent readers of several of its keys (one partition lock per key).
pub fn mset(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    if args.len().is_multiple_of(2) {
        reply.error("ERR wrong number of arguments for 'mset' command");
        return After::Continue;
    }
    let state = session.state.clone();
    let database = session.database;
    // In the exclusive section: no command sees some of the keys set and not the others.
    let stored = keys::namespace_of(&state).exclusive(|| {
        for position in (1..args.len()).step_by(2) {
            let value = args.get(position + 1);
            let target = Target::of(&state, database, args.get(position));
            target.update(&mut session.writes, |_, writer| {
                write_string(writer, value);
                Ok((Decision::Store(Expiry::Never), ()))
            })?;
        }
        Ok(())
    });
    match stored {
        Ok(()) => reply.ok(),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// GETDEL key
pub fn getdel(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let result = target.update(&mut session.writes, |current, _| {
        match current.map(|c| string_of(&c.get())) {
            None => Ok((Decision::Keep, None)),
            Some(Ok(value)) => Ok((Decision::Delete, Some(value))),
            Some(Err(())) => Err(ResultCode::IncompatibleType),
        }
    });
    match result {
        Ok(Some(value)) => reply.bulk(&value.into_bytes()),
        Ok(None) => reply.null(),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// MSETNX key value [key value ...]: 1 if no key existed and all are now set, else 0 and
/// nothing changes. All or nothing, inside the namespace's exclusive section: if a write
/// fails, the keys written before it (all missing before) are deleted again.
fn msetnx(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    if args.len().is_multiple_of(2) {
        reply.error("ERR wrong number of arguments for 'msetnx' command");
        return After::Continue;
    }
    let state = Arc::clone(&session.state);
    let database = session.database;
    let stored = keys::namespace_of(&state).exclusive(|| {
        for position in (1..args.len()).step_by(2) {
            if Target::of(&state, database, args.get(position)).view(|c| c.is_some())? {
                return Ok(false);
            }
        }
        for position in (1..args.len()).step_by(2) {
            let request = SetRequest::plain(args.get(position), args.get(position + 1));
            if let Err(code) = set_value(session, request) {
                undo_msetnx(session, args, position);
                return Err(code);
            }
        }
        Ok(true)
    });
    match stored {
        Ok(stored) => reply.integer(i64::from(stored)),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// Deletes the keys MSETNX wrote before the one at `failed`.
fn undo_msetnx(session: &mut Session, args: &Args, failed: usize) {
    for position in (1..failed).step_by(2) {
        let target = Target::of(&session.state, session.database, args.get(position));
        // The key was written by this section a moment ago; deleting it cannot fail.
        let _ = target.update(&mut session.writes, |_, _| Ok((Decision::Delete, ())));
    }
}

/// Redis's reply to a float argument or value it cannot read.
const NOT_A_FLOAT: &str = "ERR value is not a valid float";

/// INCRBYFLOAT key increment: the new value, stored as its text. Computed in doubles (Redis
/// uses long doubles), printed as [`human_double`] does.
fn incrbyfloat(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let increment = args.get(2);
    let target = Target::of(&session.state, session.database, args.get(1));
    let result = target.update(&mut session.writes, |current, writer| {
        let old = match current.map(|c| string_of(&c.get())) {
            None => Some(0.0),
            Some(Ok(StringValue::Integer(value))) => Some(value as f64),
            Some(Ok(StringValue::Bytes(bytes))) => parse_double(&bytes),
            Some(Err(())) => return Err(ResultCode::IncompatibleType),
        };
        let (Some(old), Some(increment)) = (old, parse_double(increment)) else {
            return Ok((Decision::Keep, Err(NOT_A_FLOAT)));
        };
        let new = old + increment;
        if !new.is_finite() {
            return Ok((
                Decision::Keep,
                Err("ERR increment would produce NaN or Infinity"),
            ));
        }
        let text = human_double(new);
        write_string(writer, text.as_bytes());
        Ok((Decision::Store(Expiry::Keep), Ok(text)))
    });
    match result {
        Ok(Ok(text)) => reply.bulk(text.as_bytes()),
        Ok(Err(message)) => reply.error(message),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// Decimals Redis prints a float result with (`%.17Lf`, trailing zeros trimmed).
const HUMAN_DECIMALS: usize = 17;

/// A double as INCRBYFLOAT prints it: plain decimal, no exponent, at most 17 decimals, no
/// negative zero. Redis's long doubles hide the noise of binary fractions (0.1 + 0.2 prints
/// 0.3); in doubles, a result within 4 units in the last place of a 15-digit decimal prints
/// as that decimal, which does the same.
pub fn human_double(value: f64) -> String {
    let rounded: f64 = format!("{value:.14e}").parse().unwrap_or(value);
    let close = (rounded - value).abs() <= value.abs() * 4.0 * f64::EPSILON;
    let shown = if close { rounded } else { value };
    let mut text = format!("{shown}");
    if let Some(dot) = text.find('.')
        && text.len() - dot - 1 > HUMAN_DECIMALS
    {
        text = format!("{shown:.HUMAN_DECIMALS$}");
        let kept = text.trim_end_matches('0').trim_end_matches('.').len();
        text.truncate(kept);
    }
    if text == "-0" {
        text = "0".to_owned();
    }
    text
}

/// GETRANGE key start end (also SUBSTR): the bytes from `start` to `end` inclusive, negative
/// offsets counting from the end; a missing key reads as the empty string.
fn getrange(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let (Ok(start), Ok(end)) = (keys::parse_i64(args.get(2)), keys::parse_i64(args.get(3))) else {
        reply.error(keys::NOT_AN_INTEGER);
        return After::Continue;
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    match target.read(|current| current.map(|c| string_of(&c))) {
        Ok(None) => reply.bulk(b""),
        Ok(Some(Ok(value))) => {
            let bytes = value.into_bytes();
            let range = byte_range(bytes.len(), start, end);
            reply.bulk(range.map_or(&[][..], |range| &bytes[range]));
        }
        Ok(Some(Err(()))) => reply.error(WRONGTYPE),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// The bytes GETRANGE answers of a string of `length` bytes (Redis's `getrangeCommand`).
fn byte_range(length: usize, start: i64, end: i64) -> Option<Range<usize>> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let length = i64::try_from(length).unwrap_or(i64::MAX);
    let start = if start < 0 { length + start } else { start }.max(0);
    let end = if end < 0 { length + end } else { end }.clamp(0, (length - 1).max(0));
    if start > end || length == 0 {
        return None;
    }
    let start = usize::try_from(start).ok()?;
    let end = usize::try_from(end).ok()?;
    Some(start..end + 1)
}

/// Redis's longest string (`proto-max-bulk-len`), in bytes.
const STRING_BYTES_MAX: u64 = 512 * 1024 * 1024;

/// SETRANGE key offset value: overwrites from `offset`, padding with zero bytes; the new
/// length. A string longer than the namespace's largest record is refused before it is built.
fn setrange(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let offset = match keys::parse_i64(args.get(2)).map(u64::try_from) {
        Ok(Ok(offset)) => offset,
        Ok(Err(_)) => {
            reply.error("ERR offset is out of range");
            return After::Continue;
        }
        Err(()) => {
            reply.error(keys::NOT_AN_INTEGER);
            return After::Continue;
        }
    };
    let value = args.get(3);
    let state = Arc::clone(&session.state);
    let database = session.database;
    let record_bytes_max = u64::from(keys::namespace_of(&state).config().max_record_size_bytes);
    let target = Target::of(&state, database, args.get(1));
    let result = target.update(&mut session.writes, |current, writer| {
        let old = match current.map(|c| string_of(&c.get())) {
            None => None,
            Some(Ok(old)) => Some(old.into_bytes()),
            Some(Err(())) => return Err(ResultCode::IncompatibleType),
        };
        if value.is_empty() {
            return Ok((Decision::Keep, Ok(old.map_or(0, |old| old.len()))));
        }
        let end = offset + value.len() as u64;
        if end > STRING_BYTES_MAX {
            return Ok((Decision::Keep, Err(STRING_TOO_LONG)));
        }
        if end > record_bytes_max {
            return Err(ResultCode::RecordTooBig);
        }
        let bytes = overwritten(old.unwrap_or_default(), offset as usize, value);
        write_string(writer, &bytes);
        Ok((Decision::Store(Expiry::Keep), Ok(bytes.len())))
    });
    match result {
        Ok(Ok(length)) => reply.integer(i64::try_from(length).unwrap_or(i64::MAX)),
        Ok(Err(message)) => reply.error(message),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// Redis's reply to a string that would grow past `STRING_BYTES_MAX`.
const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// `bytes` with `value` written at `offset`, zero-padded up to it.
fn overwritten(mut bytes: Vec<u8>, offset: usize, value: &[u8]) -> Vec<u8> {
    let end = offset + value.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[offset..end].copy_from_slice(value);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(words: &[&str]) -> Args {
        words.iter().collect()
    }

    #[test]
    fn float_results_print_as_redis_prints_them() {
        assert_eq!(human_double(10.5 + 0.1), "10.6");
        assert_eq!(human_double(0.1 + 0.2), "0.3");
        assert_eq!(human_double(3.0), "3");
        assert_eq!(human_double(-0.0), "0");
        assert_eq!(human_double(1e20), "100000000000000000000");
        assert_eq!(human_double(3_000.000_000_15), "3000.00000015");
        assert_eq!(human_double(1e-20), "0");
        assert_eq!(human_double(-1e-20), "0");
        assert_eq!(human_double(1_234_567_890_123_456.0), "1234567890123456");
        assert_eq!(
            human_double(0.123_456_789_012_345_67),
            "0.12345678901234566"
        );
        assert_eq!(human_double(-2.5), "-2.5");
    }

    #[test]
    fn setrange_pads_and_overwrites() {
        assert_eq!(
            overwritten(b"Hello World".to_vec(), 6, b"Redis"),
            b"Hello Redis"
        );
        assert_eq!(overwritten(b"ab".to_vec(), 4, b"x"), b"ab\0\0x");
        assert_eq!(overwritten(Vec::new(), 0, b"new"), b"new");
        assert_eq!(overwritten(b"abcdef".to_vec(), 1, b"Z"), b"aZcdef");
    }

    #[test]
    fn getrange_offsets_follow_redis() {
        assert_eq!(byte_range(11, 0, 3), Some(0..4));
        assert_eq!(byte_range(11, -3, -1), Some(8..11));
        assert_eq!(byte_range(11, 0, -1), Some(0..11));
        assert_eq!(byte_range(11, 10, 100), Some(10..11));
        assert_eq!(byte_range(11, 11, 100), None);
        assert_eq!(byte_range(11, -100, -50), Some(0..1));
        assert_eq!(byte_range(11, -1, -5), None);
        assert_eq!(byte_range(11, 5, 3), None);
        assert_eq!(byte_range(11, i64::MIN, i64::MAX), Some(0..11));
        assert_eq!(byte_range(0, 0, -1), None);
        assert_eq!(byte_range(0, 0, 0), None);
    }

    #[test]
    fn string_options_repeat_but_do_not_mix() {
        let parse = |words: &[&str], of| {
            let args = args_of(words);
            parse_string_options(&args, 3, of).map(|options| {
                (
                    options
                        .expiry
                        .map(|(option, value)| (option, value.to_vec())),
                    options.persist,
                )
            })
        };
        let set = OptionsOf::Set;
        assert_eq!(
            parse(&["SET", "k", "v", "EX", "10", "ex", "20"], set),
            Ok((Some((&b"EX"[..], b"20".to_vec())), false))
        );
        assert!(parse(&["SET", "k", "v", "EX", "10", "PX", "20"], set).is_err());
        assert!(parse(&["SET", "k", "v", "EX", "10", "KEEPTTL"], set).is_err());
        assert!(parse(&["SET", "k", "v", "KEEPTTL", "keepttl"], set).is_ok());
        assert!(parse(&["SET", "k", "v", "NX", "XX"], set).is_err());
        assert!(parse(&["SET", "k", "v", "EX"], set).is_err());
        assert!(parse(&["SET", "k", "v", "PERSIST"], set).is_err());
        let getex = OptionsOf::GetEx;
        assert_eq!(
            parse(&["GETEX", "k", "x", "PERSIST"], getex),
            Ok((None, true))
        );
        assert!(parse(&["GETEX", "k", "x", "PERSIST", "EX", "1"], getex).is_err());
        assert!(parse(&["GETEX", "k", "x", "NX"], getex).is_err());
        assert!(parse(&["GETEX", "k", "x", "GET"], getex).is_err());
    }
}
