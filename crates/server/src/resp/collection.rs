//! What the Redis collections (hash, list, set, sorted set) share: how a record is found to
//! hold one, and the read and read-modify-write paths every collection command takes.
//!
//! A collection lives in a record as a native value (`engine::NativeValue`), changed in place,
//! so adding an element costs what it costs in Redis rather than a copy of the collection. An
//! Aerospike client sees it as a single bin (`hash`, `list`, `set` or `zset`; see
//! `docs/internals/redis-mapping.md`), and a record an Aerospike client wrote with exactly that
//! one bin, in that layout, is the same collection to Redis: it is decoded on first use and
//! stored natively by the first change.
//!
//! Invariants:
//! - A stored collection is never empty: the change that empties one deletes the record, as
//!   Redis deletes a key whose collection became empty.
//! - A change closure that fails has changed nothing (it checks before it changes), so a failed
//!   command leaves the record as it was.
//! - A change that changes nothing writes nothing: no generation, no watch is touched.

use std::any::Any;

use engine::{Current, Decision, Expiry, NativeValue};
use model::{ParticleType, ResultCode};

use super::After;
use super::glob::Glob;
use super::hashes::HashValue;
use super::keys::{self, Target, WRONGTYPE, Writes};
use super::lists::ListValue;
use super::reply::Reply;
use super::sets::SetValue;
use super::streams::StreamValue;
use super::strings;
use super::zsets::ZSetValue;

/// A Redis collection type stored as a native record value.
pub trait Collection: NativeValue + Default + Sized {
    /// The one bin an Aerospike client sees.
    const BIN: &'static [u8];
    /// The bin's particle type (MAP or LIST).
    const PARTICLE: ParticleType;
    /// Redis's name of the type, as TYPE answers it.
    const TYPE_NAME: &'static str;

    /// Decodes the bin's msgpack as an Aerospike client wrote it; `None` if it does not hold
    /// this type (a nested value, a score that is not a number, ...).
    fn decode(value: &[u8]) -> Option<Self>;

    /// Whether it holds no element.
    fn is_empty(&self) -> bool;
}

/// Why a command failed, answered by [`Failure::reply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The key holds another type.
    WrongType,
    /// The engine refused.
    Engine(ResultCode),
    /// A Redis error reply, code first (`ERR ...`).
    Message(String),
}

impl Failure {
    /// An `ERR`-style failure from Redis's text.
    pub fn message(text: &str) -> Failure {
        Failure::Message(text.to_owned())
    }

    /// Answers it.
    pub fn reply(&self, reply: &mut Reply<'_>) {
        match self {
            Failure::WrongType => reply.error(WRONGTYPE),
            Failure::Engine(code) => keys::engine_error(reply, *code),
            Failure::Message(text) => reply.error(text),
        }
    }
}

/// What a change closure did.
#[derive(Debug)]
pub enum Change<T> {
    /// The collection changed: store it (or delete the key if it is now empty).
    Changed(T),
    /// Nothing changed: write nothing.
    Unchanged(T),
}

impl<T> Change<T> {
    /// `Changed` when `changed`.
    pub fn when(changed: bool, value: T) -> Change<T> {
        if changed {
            Change::Changed(value)
        } else {
            Change::Unchanged(value)
        }
    }

    fn split(self) -> (bool, T) {
        match self {
            Change::Changed(value) => (true, value),
            Change::Unchanged(value) => (false, value),
        }
    }
}

/// Implements `engine::NativeValue` for a collection type that has a `size_bytes` field kept
/// exact and an `encoded(&self) -> Vec<u8>` method giving its bin's msgpack.
macro_rules! native_value {
    ($type:ty) => {
        impl engine::NativeValue for $type {
            fn write_bins(&self, out: &mut engine::BinWriter) {
                out.bin(
                    <$type as $crate::resp::collection::Collection>::BIN,
                    <$type as $crate::resp::collection::Collection>::PARTICLE as u8,
                    &self.encoded(),
                );
            }

            fn size_bytes(&self) -> usize {
                self.size_bytes
            }
        }
    };
}
pub(crate) use native_value;

/// Answers a command's outcome: `answer` on success, the failure's error otherwise.
pub fn finish<T>(
    reply: &mut Reply<'_>,
    outcome: Result<T, Failure>,
    answer: impl FnOnce(&mut Reply<'_>, T),
) -> After {
    match outcome {
        Ok(value) => answer(reply, value),
        Err(failure) => failure.reply(reply),
    }
    After::Continue
}

/// Calls `look` with the collection at `target` (`None` when the key does not exist), under
/// the partition's read lock.
///
/// # Errors
/// [`Failure::WrongType`] when the key holds another type; an engine failure.
pub fn read<C: Collection, T>(
    target: &Target<'_>,
    look: impl FnOnce(Option<&C>) -> T,
) -> Result<T, Failure> {
    read_as(target, true, look)
}

/// [`read`] by a write command (Redis's `lookupKeyWrite`): a missing key fires no `keymiss`.
///
/// # Errors
/// As [`read`].
pub fn peek<C: Collection, T>(
    target: &Target<'_>,
    look: impl FnOnce(Option<&C>) -> T,
) -> Result<T, Failure> {
    read_as(target, false, look)
}

fn read_as<C: Collection, T>(
    target: &Target<'_>,
    by_read_command: bool,
    look: impl FnOnce(Option<&C>) -> T,
) -> Result<T, Failure> {
    let decode = |current: Option<Current<'_>>| match current {
        None => Ok(look(None)),
        Some(current) => match current.native() {
            Some(native) => {
                let native: &dyn Any = native;
                native
                    .downcast_ref::<C>()
                    .map(|collection| look(Some(collection)))
                    .ok_or(Failure::WrongType)
            }
            None => decode_packed::<C>(&current)
                .map(|collection| look(Some(&collection)))
                .ok_or(Failure::WrongType),
        },
    };
    let outcome = match by_read_command {
        true => target.read(decode),
        false => target.view(decode),
    };
    outcome.map_err(Failure::Engine)?
}

/// Read-modify-write of the collection at `target` under the partition's write lock. A missing
/// key starts as an empty collection when `create`, else `change` is not called and the result
/// is `Ok(None)`.
///
/// # Errors
/// [`Failure::WrongType`] when the key holds another type; `change`'s failure; an engine
/// failure. Nothing changes on any of them.
pub fn modify<C: Collection, T>(
    target: &Target<'_>,
    writes: &mut Writes,
    create: bool,
    change: impl FnOnce(&mut C) -> Result<Change<T>, Failure>,
) -> Result<Option<T>, Failure> {
    let outcome = target.update(writes, |current, _| {
        let Some(mut current) = current else {
            if !create {
                return Ok((Decision::Keep, Ok(None)));
            }
            return Ok(store_changed(C::default(), change));
        };
        if let Some(native) = current.native_mut() {
            let native: &mut dyn Any = native;
            let Some(collection) = native.downcast_mut::<C>() else {
                return Ok((Decision::Keep, Err(Failure::WrongType)));
            };
            return Ok(match change(collection) {
                Err(failure) => (Decision::Keep, Err(failure)),
                Ok(outcome) => {
                    let (changed, value) = outcome.split();
                    let decision = match (changed, collection.is_empty()) {
                        (false, _) => Decision::Keep,
                        (true, true) => Decision::Delete,
                        (true, false) => Decision::Touch(Expiry::Keep),
                    };
                    (decision, Ok(Some(value)))
                }
            });
        }
        match decode_packed::<C>(&current.get()) {
            Some(decoded) => Ok(store_changed(decoded, change)),
            None => Ok((Decision::Keep, Err(Failure::WrongType))),
        }
    });
    outcome.map_err(Failure::Engine)?
}

/// Applies `change` to a collection not yet stored natively, and stores it if it changed.
fn store_changed<C: Collection, T>(
    mut collection: C,
    change: impl FnOnce(&mut C) -> Result<Change<T>, Failure>,
) -> (Decision, Result<Option<T>, Failure>) {
    match change(&mut collection) {
        Err(failure) => (Decision::Keep, Err(failure)),
        Ok(outcome) => {
            let (changed, value) = outcome.split();
            let decision = match (changed, collection.is_empty()) {
                (false, _) => Decision::Keep,
                (true, true) => Decision::Delete,
                (true, false) => Decision::StoreNative(Box::new(collection), Expiry::Keep),
            };
            (decision, Ok(Some(value)))
        }
    }
}

/// The collection an Aerospike client wrote: exactly one bin, named and typed as `C`'s.
fn decode_packed<C: Collection>(current: &Current<'_>) -> Option<C> {
    let bins = current.bins();
    let mut iter = bins.iter();
    let bin = iter.next()?;
    let only_bin = iter.next().is_none();
    (only_bin && bin.name == C::BIN && bin.particle_type == C::PARTICLE as u8)
        .then(|| C::decode(bin.value))
        .flatten()
        .filter(|collection| !collection.is_empty())
}

/// Stores `value` (of `len` elements) at `destination` in the session's database, replacing
/// what was there, with no expiry, or deletes `destination` when `len` is 0, as Redis's STORE
/// commands do; returns `len`.
pub fn store_replacing(
    session: &mut super::Session,
    destination: &[u8],
    value: Box<dyn NativeValue>,
    len: usize,
) -> Result<usize, Failure> {
    let decision = match len {
        0 => Decision::Delete,
        _ => Decision::StoreNative(value, Expiry::Never),
    };
    let target = Target::of(&session.state, session.database, destination);
    target
        .update(&mut session.writes, |_, _| Ok((decision, ())))
        .map_err(Failure::Engine)?;
    Ok(len)
}

/// Redis's name for the type of the record (TYPE): `string`, `hash`, `list`, `set`, `zset`,
/// or `record` for an Aerospike record that is none of these.
pub fn type_name(current: &Current<'_>) -> &'static str {
    if let Some(native) = current.native() {
        let native: &dyn Any = native;
        return if native.is::<HashValue>() {
            HashValue::TYPE_NAME
        } else if native.is::<ListValue>() {
            ListValue::TYPE_NAME
        } else if native.is::<SetValue>() {
            SetValue::TYPE_NAME
        } else if native.is::<ZSetValue>() {
            ZSetValue::TYPE_NAME
        } else if native.is::<StreamValue>() {
            StreamValue::TYPE_NAME
        } else {
            "record"
        };
    }
    if strings::string_of(current).is_ok() {
        "string"
    } else if decode_packed::<HashValue>(current).is_some() {
        HashValue::TYPE_NAME
    } else if decode_packed::<ListValue>(current).is_some() {
        ListValue::TYPE_NAME
    } else if decode_packed::<SetValue>(current).is_some() {
        SetValue::TYPE_NAME
    } else if decode_packed::<ZSetValue>(current).is_some() {
        ZSetValue::TYPE_NAME
    } else if decode_packed::<StreamValue>(current).is_some() {
        StreamValue::TYPE_NAME
    } else {
        "record"
    }
}

/// How many elements the value at `current` holds, as a command that visits them all would
/// pay: a collection's length; for a value stored packed (a string, or a record an Aerospike
/// client wrote) its size in bytes, which bounds the elements it can decode to.
pub fn element_count(current: &Current<'_>) -> usize {
    if let Some(native) = current.native() {
        let native: &dyn Any = native;
        if let Some(hash) = native.downcast_ref::<HashValue>() {
            return hash.len();
        }
        if let Some(list) = native.downcast_ref::<ListValue>() {
            return list.len();
        }
        if let Some(set) = native.downcast_ref::<SetValue>() {
            return set.len();
        }
        if let Some(zset) = native.downcast_ref::<ZSetValue>() {
            return zset.len();
        }
        if let Some(stream) = native.downcast_ref::<StreamValue>() {
            return stream.len();
        }
    }
    current.bins().iter().map(|bin| bin.value.len()).sum()
}

/// Pattern length from which HSCAN, SSCAN and ZSCAN match after the partition's lock: each
/// element then costs more to match than to copy, and the partition's writers must not wait
/// for a pattern a client made as long as it liked.
const PATTERN_MATCHED_UNDER_LOCK_BYTES_MAX: usize = 64;

/// Options of HSCAN, SSCAN and ZSCAN: `cursor [MATCH pattern] [COUNT count]`.
#[derive(Debug)]
pub struct ScanOptions {
    /// MATCH's glob pattern, compiled once for every element, if given.
    pub pattern: Option<Glob>,
    /// Whether MATCH's pattern is long enough to be matched after the lock, on copies.
    pub match_after_lock: bool,
}

impl ScanOptions {
    /// Parses `args` from position 2 (after the key): the cursor must be an unsigned integer,
    /// COUNT a positive one.
    ///
    /// # Errors
    /// Redis's error text.
    pub fn parse(args: &wire_resp::Args) -> Result<ScanOptions, Failure> {
        let cursor = std::str::from_utf8(args.get(2))
            .ok()
            .and_then(|text| text.parse::<u64>().ok());
        if cursor.is_none() {
            return Err(Failure::message("ERR invalid cursor"));
        }
        let mut options = ScanOptions {
            pattern: None,
            match_after_lock: false,
        };
        let mut position = 3;
        while position < args.len() {
            let word = args.get(position).to_ascii_uppercase();
            let Some(value) = (position + 1 < args.len()).then(|| args.get(position + 1)) else {
                return Err(Failure::message(keys::SYNTAX_ERROR));
            };
            match word.as_slice() {
                b"MATCH" => {
                    options.pattern = Some(Glob::new(value));
                    options.match_after_lock = value.len() > PATTERN_MATCHED_UNDER_LOCK_BYTES_MAX;
                }
                b"COUNT" => match keys::parse_i64(value) {
                    Ok(count) if count >= 1 => {}
                    Ok(_) => return Err(Failure::message(keys::SYNTAX_ERROR)),
                    Err(()) => return Err(Failure::message(keys::NOT_AN_INTEGER)),
                },
                _ => return Err(Failure::message(keys::SYNTAX_ERROR)),
            }
            position += 2;
        }
        Ok(options)
    }

    /// Whether `element` passes MATCH.
    pub fn matches(&self, element: &[u8]) -> bool {
        self.pattern
            .as_ref()
            .is_none_or(|pattern| pattern.matches(element))
    }

    /// Whether to copy `element` out under the lock: when it passes MATCH, or when MATCH
    /// waits until after the lock ([`ScanOptions::matches_late`] decides then).
    pub fn keeps_under_lock(&self, element: &[u8]) -> bool {
        self.match_after_lock || self.matches(element)
    }

    /// Whether a copied `element` passes MATCH, when matching waited until after the lock.
    pub fn matches_late(&self, element: &[u8]) -> bool {
        !self.match_after_lock || self.matches(element)
    }
}

/// Replies to HSCAN/SSCAN/ZSCAN: cursor 0 (the whole collection in one reply, as Redis does
/// for its compact encodings; COUNT is a hint) and the matching elements, `width` bulk
/// strings per element (1 for a set, 2 for a hash or sorted set).
pub fn reply_scan(reply: &mut Reply<'_>, width: usize, elements: &[Vec<u8>]) {
    reply.array(2);
    reply.bulk(b"0");
    reply.array(elements.len());
    debug_assert_eq!(elements.len() % width, 0, "whole elements only");
    elements.iter().for_each(|element| reply.bulk(element));
}
