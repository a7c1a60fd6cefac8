//! DUMP, RESTORE, OBJECT and MEMORY USAGE: a key's value in Redis's serialization format
//! (`rdb.rs`), and what Redis tells about how a value is kept.
//!
//! RESTORE decodes and checks the whole payload before it takes the key's lock, then stores
//! the value in one write; with REPLACE it replaces whatever the key held. IDLETIME and FREQ
//! are checked as Redis checks them and otherwise ignored: Osprey keeps no LRU clock or LFU
//! counter (OBJECT IDLETIME answers the time since the record's last write).
//!
//! Invariants:
//! - A payload that fails its version, checksum or format check changes nothing.
//! - A restored collection is never empty (`rdb::decode` refuses empty ones).

use std::any::Any;

use engine::{Current, Decision, Expiry};
use wire_resp::Args;

use super::collection::Collection;
use super::commands::Command;
use super::hashes::HashValue;
use super::keys::{self, Deadline, Target, engine_error, now_of};
use super::lists::ListValue;
use super::rdb::{self, RdbValue};
use super::reply::Reply;
use super::sets::SetValue;
use super::streams::StreamValue;
use super::strings::{self, StringValue};
use super::zsets::ZSetValue;
use super::{After, Session};

/// The commands of this module.
pub const COMMANDS: &[Command] = &[
    ("dump", 2, dump),
    ("memory", -2, memory),
    ("object", -2, object),
    ("restore", -4, restore),
];

/// DUMP key: the serialized value, or nil for a missing key.
fn dump(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    match target.read(|current| current.map(|c| value_of(&c))) {
        Ok(None) => reply.null(),
        Ok(Some(Some(value))) => reply.bulk(&rdb::encode(&value)),
        Ok(Some(None)) => reply.error(keys::WRONGTYPE),
        Err(code) => engine_error(reply, code),
    }
    After::Continue
}

/// The value of a record as a dump carries it; `None` for an Aerospike record that is no
/// Redis value.
pub(super) fn value_of(current: &Current<'_>) -> Option<RdbValue> {
    if let Ok(string) = strings::string_of(current) {
        return Some(RdbValue::String(match string {
            StringValue::Bytes(bytes) => bytes,
            StringValue::Integer(value) => value.to_string().into_bytes(),
        }));
    }
    let copied = |elements: &mut dyn Iterator<Item = &[u8]>| elements.map(<[u8]>::to_vec).collect();
    None.or_else(|| {
        with_collection(current, |hash: &HashValue| {
            RdbValue::Hash(hash.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect())
        })
    })
    .or_else(|| {
        with_collection(current, |list: &ListValue| {
            RdbValue::List(copied(&mut list.iter()))
        })
    })
    .or_else(|| {
        with_collection(current, |set: &SetValue| {
            RdbValue::Set(copied(&mut set.iter()))
        })
    })
    .or_else(|| {
        with_collection(current, |stream: &StreamValue| {
            RdbValue::Stream(Box::new(stream.to_rdb()))
        })
    })
    .or_else(|| {
        with_collection(current, |zset: &ZSetValue| {
            let entries = zset
                .iter()
                .map(|e| (e.member().to_vec(), e.score()))
                .collect();
            RdbValue::ZSet(entries)
        })
    })
}

/// Calls `look` with the collection `C` a record holds, natively or as the bin an Aerospike
/// client wrote; `None` when it holds no `C`.
fn with_collection<C: Collection, T>(
    current: &Current<'_>,
    look: impl FnOnce(&C) -> T,
) -> Option<T> {
    if let Some(native) = current.native() {
        let native: &dyn Any = native;
        return native.downcast_ref::<C>().map(look);
    }
    let bins = current.bins();
    let mut iter = bins.iter();
    let bin = iter.next()?;
    let only_bin = iter.next().is_none();
    if !(only_bin && bin.name == C::BIN && bin.particle_type == C::PARTICLE as u8) {
        return None;
    }
    C::decode(bin.value).map(|collection| look(&collection))
}

/// RESTORE's options after the payload.
#[derive(Debug, Default)]
struct RestoreOptions {
    replace: bool,
    absolute_ttl: bool,
}

/// Parses RESTORE's options as Redis does: REPLACE, ABSTTL, IDLETIME seconds (not with
/// FREQ), FREQ frequency (not with IDLETIME).
fn parse_restore_options(args: &Args) -> Result<RestoreOptions, &'static str> {
    let mut options = RestoreOptions::default();
    let (mut idle_given, mut freq_given) = (false, false);
    let mut position = 4;
    while position < args.len() {
        let has_value = position + 1 < args.len();
        match args.get(position).to_ascii_uppercase().as_slice() {
            b"REPLACE" => options.replace = true,
            b"ABSTTL" => options.absolute_ttl = true,
            b"IDLETIME" if has_value && !freq_given => {
                let idle = keys::parse_i64(args.get(position + 1));
                match idle {
                    Err(()) => return Err(keys::NOT_AN_INTEGER),
                    Ok(i) if i < 0 => return Err("ERR Invalid IDLETIME value, must be >= 0"),
                    Ok(_) => {}
                }
                idle_given = true;
                position += 1;
            }
            b"FREQ" if has_value && !idle_given => {
                match keys::parse_i64(args.get(position + 1)) {
                    Err(()) => return Err(keys::NOT_AN_INTEGER),
                    Ok(0..=255) => {}
                    Ok(_) => return Err("ERR Invalid FREQ value, must be >= 0 and <= 255"),
                }
                freq_given = true;
                position += 1;
            }
            _ => return Err(keys::SYNTAX_ERROR),
        }
        position += 1;
    }
    Ok(options)
}

/// Redis's reply to RESTORE over an existing key without REPLACE.
const BUSYKEY: &str = "BUSYKEY Target key name already exists.";

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
fn restore(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let options = match parse_restore_options(args) {
        Ok(options) => options,
        Err(message) => {
            reply.error(message);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    // Redis's order of checks: the key, then the TTL, then the payload.
    if !options.replace && target.view(|c| c.is_some()) == Ok(true) {
        reply.error(BUSYKEY);
        return After::Continue;
    }
    let ttl_ms = match keys::parse_i64(args.get(2)) {
        Ok(ttl_ms) if ttl_ms >= 0 => ttl_ms,
        Ok(_) => return error(reply, "ERR Invalid TTL value, must be >= 0"),
        Err(()) => return error(reply, keys::NOT_AN_INTEGER),
    };
    let value = match rdb::decode(args.get(3)) {
        Ok(value) => value,
        Err(failure) => return error(reply, failure.text()),
    };
    let expiry = match restore_expiry(session, ttl_ms, options.absolute_ttl) {
        Ok(expiry) => expiry,
        Err(()) => return error(reply, &keys::invalid_expire("restore")),
    };
    let stored = target.update(&mut session.writes, |current, writer| {
        if current.is_some() && !options.replace {
            return Ok((Decision::Keep, Err(BUSYKEY)));
        }
        let Some(expiry) = expiry else {
            // Already expired: the key is removed, and the reply is still OK, as in Redis.
            return Ok((Decision::Delete, Ok(())));
        };
        match stored_decision(value, expiry, writer) {
            Some(decision) => Ok((decision, Ok(()))),
            None => Ok((Decision::Keep, Err(rdb::DumpError::BadFormat.text()))),
        }
    });
    match stored {
        Ok(Ok(())) => reply.ok(),
        Ok(Err(message)) => reply.error(message),
        Err(code) => engine_error(reply, code),
    }
    After::Continue
}

fn error(reply: &mut Reply<'_>, message: &str) -> After {
    reply.error(message);
    After::Continue
}

/// The expiry of a restored key: `None` when it is already past.
fn restore_expiry(session: &Session, ttl_ms: i64, absolute: bool) -> Result<Option<Expiry>, ()> {
    if ttl_ms == 0 {
        return Ok(Some(Expiry::Never));
    }
    let now = now_of(session);
    let at_ms = if absolute {
        i128::from(ttl_ms)
    } else {
        i128::from(now.unix_ms) + i128::from(ttl_ms)
    };
    Ok(match Deadline::at_unix_ms(at_ms, now)? {
        Deadline::Past => None,
        Deadline::At(void_time) => Some(keys::expiry_at(void_time)),
    })
}

/// How a decoded value is stored: a string as its bin, a collection natively; `None` for a
/// stream that breaks a stream's invariants.
pub(super) fn stored_decision(
    value: RdbValue,
    expiry: Expiry,
    writer: &mut engine::BinWriter,
) -> Option<Decision> {
    Some(match value {
        RdbValue::String(bytes) => {
            strings::write_string(writer, &bytes);
            Decision::Store(expiry)
        }
        RdbValue::List(elements) => {
            let mut list = ListValue::default();
            elements.iter().for_each(|e| list.push_back(e));
            Decision::StoreNative(Box::new(list), expiry)
        }
        RdbValue::Set(members) => {
            let mut set = SetValue::default();
            members.iter().for_each(|m| {
                set.insert(m);
            });
            Decision::StoreNative(Box::new(set), expiry)
        }
        RdbValue::ZSet(entries) => {
            let mut zset = ZSetValue::default();
            entries.iter().for_each(|(member, score)| {
                zset.insert(member, *score);
            });
            Decision::StoreNative(Box::new(zset), expiry)
        }
        RdbValue::Hash(pairs) => {
            let mut hash = HashValue::default();
            pairs.iter().for_each(|(field, value)| {
                hash.insert(field, value);
            });
            Decision::StoreNative(Box::new(hash), expiry)
        }
        RdbValue::Stream(stream) => {
            Decision::StoreNative(Box::new(StreamValue::from_rdb(*stream)?), expiry)
        }
    })
}

/// What OBJECT and MEMORY USAGE read about a record.
struct Facts {
    encoding: &'static str,
    last_update_ms: u64,
    size_bytes: usize,
}

fn facts_of(current: &Current<'_>) -> Facts {
    let size_bytes = match current.native() {
        Some(native) => native.size_bytes(),
        None => current
            .bins()
            .iter()
            .map(|bin| bin.name.len() + bin.value.len())
            .sum(),
    };
    Facts {
        encoding: encoding_of(current),
        last_update_ms: current.last_update_ms(),
        size_bytes,
    }
}

/// Osprey's name for how a value is kept (`docs/internals/redis-mapping.md`).
fn encoding_of(current: &Current<'_>) -> &'static str {
    if let Some(native) = current.native() {
        let native: &dyn Any = native;
        return if native.is::<ListValue>() {
            "deque"
        } else if native.is::<ZSetValue>() {
            "btree"
        } else {
            // A hash or a set: an insertion-ordered hash table.
            "hashtable"
        };
    }
    match strings::string_of(current) {
        Ok(StringValue::Integer(_)) => "int",
        Ok(StringValue::Bytes(_)) => "raw",
        // A collection kept packed (device storage, or as an Aerospike client wrote it).
        Err(()) => "msgpack",
    }
}

/// OBJECT ENCODING | FREQ | IDLETIME | REFCOUNT key, OBJECT HELP
fn object(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = args.get(1).to_ascii_uppercase();
    if subcommand == b"HELP" && args.len() == 2 {
        reply.array(OBJECT_HELP.len());
        OBJECT_HELP.iter().for_each(|line| reply.simple(line));
        return After::Continue;
    }
    if !matches!(
        subcommand.as_slice(),
        b"ENCODING" | b"FREQ" | b"IDLETIME" | b"REFCOUNT" | b"HELP"
    ) {
        return error(reply, &unknown_subcommand("OBJECT", args.get(1)));
    }
    if args.len() != 3 {
        let name = String::from_utf8_lossy(&subcommand).to_ascii_lowercase();
        return error(
            reply,
            &format!("ERR wrong number of arguments for 'object|{name}' command"),
        );
    }
    let target = Target::of(&session.state, session.database, args.get(2));
    let facts = match target.view(|current| current.map(|c| facts_of(&c))) {
        Ok(Some(facts)) => facts,
        Ok(None) => {
            reply.null();
            return After::Continue;
        }
        Err(code) => {
            engine_error(reply, code);
            return After::Continue;
        }
    };
    match subcommand.as_slice() {
        b"ENCODING" => reply.bulk(facts.encoding.as_bytes()),
        b"REFCOUNT" => reply.integer(1),
        b"FREQ" => reply.error(FREQ_WITHOUT_LFU),
        _ => {
            let now_ms = now_of(session).unix_ms;
            let idle_s = now_ms.saturating_sub(facts.last_update_ms) / 1000;
            reply.integer(i64::try_from(idle_s).unwrap_or(i64::MAX));
        }
    }
    After::Continue
}

/// DEBUG OBJECT key: Redis's line, with Osprey's encoding and the value's size in memory as
/// its serialized length.
pub(super) fn debug_object(session: &Session, key: &[u8], reply: &mut Reply<'_>) {
    let target = Target::of(&session.state, session.database, key);
    match target.view(|current| current.map(|c| facts_of(&c))) {
        Ok(Some(facts)) => {
            let now_ms = now_of(session).unix_ms;
            let idle_s = now_ms.saturating_sub(facts.last_update_ms) / 1000;
            reply.simple(&format!(
                "Value at:0x0 refcount:1 encoding:{} serializedlength:{} lru:0 \
                 lru_seconds_idle:{idle_s}",
                facts.encoding, facts.size_bytes
            ));
        }
        Ok(None) => reply.error("ERR no such key"),
        Err(code) => {
            engine_error(reply, code);
        }
    }
}

/// Redis 7's reply to a subcommand it does not know.
fn unknown_subcommand(command: &str, subcommand: &[u8]) -> String {
    let shown = &subcommand[..subcommand.len().min(128)];
    format!(
        "ERR unknown subcommand '{}'. Try {command} HELP.",
        String::from_utf8_lossy(shown)
    )
}

/// Redis's reply to OBJECT FREQ without an LFU policy (Osprey has none).
const FREQ_WITHOUT_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency \
     not tracked. Please note that when switching between policies at runtime LRU and LFU data \
     will take some time to adjust.";

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// Bytes Redis counts for a key beyond its value (its dictionary entry and object header).
const KEY_OVERHEAD_BYTES: usize = 48;

/// MEMORY USAGE key [SAMPLES count]: an estimate of the bytes the key and its value take
/// (the value's own estimate, `docs/internals/redis-mapping.md`), nil for a missing key.
fn memory(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = args.get(1).to_ascii_uppercase();
    if subcommand != b"USAGE" {
        return error(reply, &unknown_subcommand("MEMORY", args.get(1)));
    }
    if args.len() < 3 {
        return error(
            reply,
            "ERR wrong number of arguments for 'memory|usage' command",
        );
    }
    if args.len() != 3 && args.len() != 5 {
        return error(reply, keys::SYNTAX_ERROR);
    }
    if args.len() == 5 {
        if !args.get(3).eq_ignore_ascii_case(b"SAMPLES") {
            return error(reply, keys::SYNTAX_ERROR);
        }
        if keys::parse_i64(args.get(4)).is_err() {
            return error(reply, keys::NOT_AN_INTEGER);
        }
    }
    let key = args.get(2);
    let target = Target::of(&session.state, session.database, key);
    match target.view(|current| current.map(|c| facts_of(&c).size_bytes)) {
        Ok(Some(size_bytes)) => {
            let total = size_bytes + key.len() + KEY_OVERHEAD_BYTES;
            reply.integer(i64::try_from(total).unwrap_or(i64::MAX));
        }
        Ok(None) => reply.null(),
        Err(code) => engine_error(reply, code),
    }
    After::Continue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_help_is_redis_text() {
        assert_eq!(OBJECT_HELP.len(), 15);
        assert!(OBJECT_HELP[0].starts_with("OBJECT <subcommand>"));
    }
}
