//! String commands: a Redis string is one bin named `value` (see
//! `docs/internals/redis-mapping.md`).

use engine::{Current, Decision, Expiry};
use model::{ParticleType, ResultCode};
use wire_resp::Args;

use super::commands::Command;
use super::keys::{self, Target, WRONGTYPE};
use super::reply::Reply;
use super::{After, Session};

/// The string commands.
pub const COMMANDS: &[Command] = &[
    ("append", 3, append),
    ("decr", 2, |s, a, r| increment(s, a, r, Some(1), true)),
    ("decrby", 3, |s, a, r| increment(s, a, r, None, true)),
    ("get", 2, get),
    ("getdel", 2, getdel),
    ("incr", 2, |s, a, r| increment(s, a, r, Some(1), false)),
    ("incrby", 3, |s, a, r| increment(s, a, r, None, false)),
    ("mget", -2, mget),
    ("mset", -3, mset),
    ("set", -3, set),
    ("strlen", 2, strlen),
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
    let bins = current.bins();
    let mut iter = bins.iter();
    let bin = iter.next().filter(|bin| bin.name == VALUE_BIN).ok_or(())?;
    if iter.next().is_some() {
        return Err(());
    }
    match bin.particle_type {
        t if t == ParticleType::String as u8 || t == ParticleType::Blob as u8 => {
            Ok(StringValue::Bytes(bin.value.to_vec()))
        }
        t if t == ParticleType::Integer as u8 => {
            let bytes: [u8; 8] = bin.value.try_into().map_err(|_| ())?;
            Ok(StringValue::Integer(i64::from_be_bytes(bytes)))
        }
        _ => Err(()),
    }
}

/// Writes `bytes` as the record's string value: STRING when valid UTF-8, else BLOB.
pub fn write_string(writer: &mut engine::BinWriter, bytes: &[u8]) {
    let particle = if std::str::from_utf8(bytes).is_ok() {
        ParticleType::String
    } else {
        ParticleType::Blob
    };
    writer.bin(VALUE_BIN, particle as u8, bytes);
}

fn write_integer(writer: &mut engine::BinWriter, value: i64) {
    writer.bin(VALUE_BIN, ParticleType::Integer as u8, &value.to_be_bytes());
}

/// GET key
pub fn get(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, args.get(1));
    match target.view(|current| current.map(|c| string_of(&c))) {
        Ok(None) => reply.null(),
        Ok(Some(Ok(value))) => reply.bulk(&value.into_bytes()),
        Ok(Some(Err(()))) => reply.error(WRONGTYPE),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// Options of SET.
#[derive(Clone, Copy, Debug, Default)]
struct SetOptions {
    only_if_missing: bool,
    only_if_present: bool,
    keep_ttl: bool,
    return_old: bool,
    expiry: Option<keys::ExpiryArg>,
}

fn parse_set_options(args: &Args, start: usize) -> Result<SetOptions, &'static str> {
    let mut options = SetOptions::default();
    let mut position = start;
    while position < args.len() {
        let word = args.get(position).to_ascii_uppercase();
        match word.as_slice() {
            b"NX" if !options.only_if_present => options.only_if_missing = true,
            b"XX" if !options.only_if_missing => options.only_if_present = true,
            b"GET" => options.return_old = true,
            b"KEEPTTL" if options.expiry.is_none() => options.keep_ttl = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if !options.keep_ttl && options.expiry.is_none() => {
                position += 1;
                if position == args.len() {
                    return Err(keys::SYNTAX_ERROR);
                }
                options.expiry = Some(keys::ExpiryArg::parse(&word, args.get(position))?);
            }
            _ => return Err(keys::SYNTAX_ERROR),
        }
        position += 1;
    }
    Ok(options)
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]
pub fn set(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let options = match parse_set_options(args, 3) {
        Ok(options) => options,
        Err(message) => {
            reply.error(message);
            return After::Continue;
        }
    };
    let value = args.get(2);
    let now = keys::now_of(session);
    let expiry = match options.expiry.map(|arg| arg.void_time(now)) {
        Some(Ok(void_time)) => keys::expiry_at(void_time),
        Some(Err(message)) => {
            reply.error(message);
            return After::Continue;
        }
        None if options.keep_ttl => Expiry::Keep,
        None => Expiry::Never,
    };
    let target = Target::of(&session.state, args.get(1));
    let result = target.update(&mut session.writer, |current, writer| {
        let old = match current.map(|c| string_of(&c.get())) {
            Some(Err(())) if options.return_old => return Err(ResultCode::IncompatibleType),
            Some(old) => Some(old.ok()),
            None => None,
        };
        let exists = old.is_some();
        if (options.only_if_missing && exists) || (options.only_if_present && !exists) {
            return Ok((Decision::Keep, (false, old)));
        }
        write_string(writer, value);
        Ok((Decision::Store(expiry), (true, old)))
    });
    match result {
        Ok((_, old)) if options.return_old => match old.flatten() {
            Some(old) => reply.bulk(&old.into_bytes()),
            None => reply.null(),
        },
        Ok((true, _)) => reply.ok(),
        Ok((false, _)) => reply.null(),
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
    let target = Target::of(&session.state, args.get(1));
    let result = target.update(&mut session.writer, |current, writer| {
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
    let target = Target::of(&session.state, args.get(1));
    let result = target.update(&mut session.writer, |current, writer| {
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
    let target = Target::of(&session.state, args.get(1));
    match target.view(|current| current.map(|c| string_of(&c))) {
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
        let target = Target::of(&session.state, args.get(position));
        match target.view(|current| current.and_then(|c| string_of(&c).ok())) {
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
    for position in (1..args.len()).step_by(2) {
        let value = args.get(position + 1);
        let target = Target::of(&session.state, args.get(position));
        let stored = target.update(&mut session.writer, |_, writer| {
            write_string(writer, value);
            Ok((Decision::Store(Expiry::Never), ()))
        });
        if let Err(code) = stored {
            keys::engine_error(reply, code);
            return After::Continue;
        }
    }
    reply.ok();
    After::Continue
}

/// GETDEL key
pub fn getdel(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, args.get(1));
    let result = target.update(&mut session.writer, |current, _| {
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
