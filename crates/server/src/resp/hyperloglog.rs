//! HyperLogLog commands (PFADD, PFCOUNT, PFMERGE, and Redis's PFDEBUG and PFSELFTEST). A HyperLogLog is a string value holding
//! Redis's own representation (`encoding.rs`), so GET returns the bytes redis-server would
//! hold, and bytes redis-server produced can be SET here and counted. It is stored like any
//! string (`docs/internals/redis-mapping.md`).
//!
//! Invariants:
//! - A value is checked (header, then opcodes as they are read) before it is used; bytes that
//!   are not a HyperLogLog answer Redis's WRONGTYPE text, malformed registers INVALIDOBJ, and
//!   nothing is written in either case.
//! - PFCOUNT of several keys and PFMERGE read (and PFMERGE writes) in the namespace's
//!   exclusive section, so they see one state of all their keys.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use engine::{Decision, Expiry};
use model::ResultCode;
use wire_resp::Args;

use super::bitmaps::{owned_string, patch_string_bytes, with_string_bytes};
use super::commands::Command;
use super::keys::{self, Target};
use super::reply::Reply;
use super::strings;
use super::{After, Session};

mod encoding;

use encoding::{Encoding, REGISTER_COUNT};

pub use encoding::SPARSE_BYTES_MAX_DEFAULT;

/// The HyperLogLog commands.
pub const COMMANDS: &[Command] = &[
    ("pfadd", -2, pfadd),
    ("pfcount", -2, pfcount),
    ("pfdebug", 3, pfdebug),
    ("pfmerge", -2, pfmerge),
    ("pfselftest", 1, pfselftest),
];

/// Redis's reply to a string that is not a HyperLogLog.
const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";

/// Redis's reply to a HyperLogLog whose registers are malformed.
const CORRUPTED: &str = "INVALIDOBJ Corrupted HLL object detected";

/// Why a HyperLogLog command fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failure {
    /// The engine's refusal (WRONGTYPE for a key of another type, record too big...).
    Engine(ResultCode),
    /// A string that is not a HyperLogLog.
    NotHll,
    /// Malformed sparse registers.
    Corrupted,
}

impl From<ResultCode> for Failure {
    fn from(code: ResultCode) -> Failure {
        Failure::Engine(code)
    }
}

impl From<encoding::NotHll> for Failure {
    fn from(_: encoding::NotHll) -> Failure {
        Failure::NotHll
    }
}

impl From<encoding::Corrupted> for Failure {
    fn from(_: encoding::Corrupted) -> Failure {
        Failure::Corrupted
    }
}

/// Answers `outcome`: `answer` for a success, Redis's text for a failure.
fn finish<T>(
    reply: &mut Reply<'_>,
    outcome: Result<T, Failure>,
    answer: impl FnOnce(&mut Reply<'_>, T),
) {
    match outcome {
        Ok(value) => answer(reply, value),
        Err(Failure::Engine(code)) => keys::engine_error(reply, code),
        Err(Failure::NotHll) => reply.error(NOT_HLL),
        Err(Failure::Corrupted) => reply.error(CORRUPTED),
    }
}

/// Flattens the engine's result around a command's own.
fn flatten<T>(result: Result<Result<T, Failure>, ResultCode>) -> Result<T, Failure> {
    result.map_err(Failure::Engine)?
}

/// `hll-sparse-max-bytes`: past it, a sparse value turns dense.
fn sparse_bytes_max(session: &Session) -> usize {
    let settings = &session.state.resp_settings;
    usize::try_from(settings.hll_sparse_bytes_max.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
}

/// PFADD key [element ...]: 1 if the estimate may have changed (or the key was created).
fn pfadd(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let sparse_bytes_max = sparse_bytes_max(session);
    let target = Target::of(&session.state, session.database, args.get(1));
    let result = target.update(&mut session.writes, |mut current, writer| {
        // A dense value: an add that raises no register changes nothing, one that does
        // changes the value in place (most adds, once a value is dense, are the first kind).
        let elements = || (2..args.len()).map(|position| args.get(position));
        // `Some(whether an element raises a register)` for a dense value, in one look.
        let dense_raises = |bytes: &[u8]| {
            (encoding::check(bytes) == Ok(Encoding::Dense))
                .then(|| elements().any(|e| encoding::dense_raises(bytes, e)))
        };
        if let Some(current) = &mut current
            && let Ok(Some(raises)) = with_string_bytes(&current.get(), dense_raises)
        {
            if !raises {
                return Ok((Decision::Keep, Ok(false)));
            }
            let add_all = |bytes: &mut [u8]| {
                elements().fold(false, |raised, e| encoding::dense_add(bytes, e) | raised)
            };
            if let Some(raised) = patch_string_bytes(current, add_all) {
                return Ok((Decision::Touch(Expiry::Keep), Ok(raised)));
            }
        }
        let current = current.as_ref().map(|c| c.get());
        let old = owned_string(current.as_ref())?;
        let (mut value, mut updated) = match old {
            None => (encoding::empty(), true),
            Some(bytes) if encoding::check(&bytes).is_ok() => (bytes, false),
            Some(_) => return Ok((Decision::Keep, Err(Failure::NotHll))),
        };
        for position in 2..args.len() {
            match encoding::add(&mut value, args.get(position), sparse_bytes_max) {
                Ok(changed) => updated |= changed,
                Err(corrupted) => return Ok((Decision::Keep, Err(corrupted.into()))),
            }
        }
        if !updated {
            return Ok((Decision::Keep, Ok(false)));
        }
        encoding::invalidate_cached_count(&mut value);
        strings::write_string(writer, &value);
        Ok((Decision::Store(Expiry::Keep), Ok(true)))
    });
    finish(reply, flatten(result), |reply, updated| {
        reply.integer(i64::from(updated));
    });
    After::Continue
}

/// Answers an estimate as Redis does: a 64-bit pattern as a signed integer, so the out-of-range
/// estimate reads as `i64::MIN` (see `encoding::ESTIMATE_OUT_OF_RANGE`).
fn reply_estimate(reply: &mut Reply<'_>, estimate: u64) {
    reply.integer(estimate as i64);
}

/// PFCOUNT key [key ...]: the estimate of one key (cached in the value, as Redis does), or of
/// the union of several, computed without writing.
fn pfcount(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let outcome = if args.len() == 2 {
        count_one(session, args.get(1))
    } else {
        let state = Arc::clone(&session.state);
        keys::namespace_of(&state).exclusive(|| {
            let mut registers = Box::new([0u8; REGISTER_COUNT]);
            merge_keys(session, args, 1, &mut registers)?;
            Ok(encoding::count_registers(&registers))
        })
    };
    finish(reply, outcome, reply_estimate);
    After::Continue
}

/// PFCOUNT of one key: the cached estimate, or a fresh one, which is then cached (a write, as
/// in Redis).
fn count_one(session: &mut Session, key: &[u8]) -> Result<u64, Failure> {
    let target = Target::of(&session.state, session.database, key);
    let result = target.update(&mut session.writes, |current, writer| {
        let Some(mut value) = owned_string(current.as_ref().map(|c| c.get()).as_ref())? else {
            return Ok((Decision::Keep, Ok(0)));
        };
        if encoding::check(&value).is_err() {
            return Ok((Decision::Keep, Err(Failure::NotHll)));
        }
        if let Some(cached) = encoding::cached_count(&value) {
            return Ok((Decision::Keep, Ok(cached)));
        }
        let estimate = match encoding::count(&value) {
            Ok(estimate) => estimate,
            Err(corrupted) => return Ok((Decision::Keep, Err(corrupted.into()))),
        };
        encoding::set_cached_count(&mut value, estimate);
        strings::write_string(writer, &value);
        Ok((Decision::Store(Expiry::Keep), Ok(estimate)))
    });
    flatten(result)
}

/// Raises `registers` to those of every HyperLogLog named from argument `from` on (a missing
/// key counts as empty): whether any of them is dense.
fn merge_keys(
    session: &Session,
    args: &Args,
    from: usize,
    registers: &mut [u8; REGISTER_COUNT],
) -> Result<bool, Failure> {
    let mut any_dense = false;
    for position in from..args.len() {
        let target = Target::of(&session.state, session.database, args.get(position));
        let merged = target.view(|current| {
            let Some(current) = current else {
                return Ok(Ok(false));
            };
            with_string_bytes(&current, |bytes| {
                let dense = encoding::check(bytes)? == Encoding::Dense;
                encoding::merge_into(registers, bytes)?;
                Ok::<bool, Failure>(dense)
            })
        });
        match merged? {
            Ok(dense) => any_dense |= dense?,
            Err(()) => return Err(Failure::Engine(ResultCode::IncompatibleType)),
        }
    }
    Ok(any_dense)
}

/// PFMERGE destkey [sourcekey ...]: stores at `destkey` the union of every key named, itself
/// included. The result is dense when any of them is, as in Redis.
fn pfmerge(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let state = Arc::clone(&session.state);
    let outcome = keys::namespace_of(&state).exclusive(|| {
        let mut registers = Box::new([0u8; REGISTER_COUNT]);
        let dense = merge_keys(session, args, 1, &mut registers)?;
        store_merged(session, args.get(1), &registers, dense)
    });
    finish(reply, outcome, |reply, ()| reply.ok());
    After::Continue
}

/// Writes `registers` into the HyperLogLog at `key` (created when missing), first made dense
/// when `dense`.
fn store_merged(
    session: &mut Session,
    key: &[u8],
    registers: &[u8; REGISTER_COUNT],
    dense: bool,
) -> Result<(), Failure> {
    let sparse_bytes_max = sparse_bytes_max(session);
    let target = Target::of(&session.state, session.database, key);
    let result = target.update(&mut session.writes, |current, writer| {
        let old = owned_string(current.as_ref().map(|c| c.get()).as_ref())?;
        let merged = merged_value(old, registers, dense, sparse_bytes_max);
        let Ok(value) = merged else {
            return Ok((Decision::Keep, merged.map(|_| ())));
        };
        strings::write_string(writer, &value);
        Ok((Decision::Store(Expiry::Keep), Ok(())))
    });
    flatten(result)
}

/// The value PFMERGE stores: `old` (or a new value) raised to `registers`, its cache stale.
fn merged_value(
    old: Option<Vec<u8>>,
    registers: &[u8; REGISTER_COUNT],
    dense: bool,
    sparse_bytes_max: usize,
) -> Result<Vec<u8>, Failure> {
    let mut value = match old {
        None => encoding::empty(),
        Some(bytes) => {
            encoding::check(&bytes)?;
            bytes
        }
    };
    if dense {
        encoding::to_dense(&mut value)?;
    }
    for (index, &register) in registers.iter().enumerate() {
        if register != 0 {
            encoding::set_register(&mut value, index, register, sparse_bytes_max)?;
        }
    }
    encoding::invalidate_cached_count(&mut value);
    Ok(value)
}

/// What PFDEBUG answers with, once the value is read (and maybe rewritten).
enum Debugged {
    /// GETREG: every register.
    Registers(Box<[u8; REGISTER_COUNT]>),
    /// DECODE: the sparse opcodes as text.
    Decoded(String),
    Encoding(&'static str),
    /// TODENSE: whether it converted.
    Converted(bool),
    /// An error reply of Redis's.
    Refused(String),
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key: Redis's views of a HyperLogLog's encoding.
/// GETREG and TODENSE turn a sparse value dense and store it, as Redis does.
fn pfdebug(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = args.get(1).to_ascii_lowercase();
    let target = Target::of(&session.state, session.database, args.get(2));
    let result = target.update(&mut session.writes, |current, writer| {
        let Some(mut value) = owned_string(current.as_ref().map(|c| c.get()).as_ref())? else {
            let refused = "ERR The specified key does not exist".to_owned();
            return Ok((Decision::Keep, Ok(Debugged::Refused(refused))));
        };
        let Ok(encoding) = encoding::check(&value) else {
            return Ok((Decision::Keep, Err(Failure::NotHll)));
        };
        let sparse = encoding == Encoding::Sparse;
        let debugged = match subcommand.as_slice() {
            b"getreg" | b"todense" if sparse => {
                if encoding::to_dense(&mut value).is_err() {
                    return Ok((Decision::Keep, Err(Failure::Corrupted)));
                }
                strings::write_string(writer, &value);
                let debugged = if subcommand == b"todense" {
                    Debugged::Converted(true)
                } else {
                    Debugged::Registers(encoding::registers(&value))
                };
                return Ok((Decision::Store(Expiry::Keep), Ok(debugged)));
            }
            b"getreg" => Debugged::Registers(encoding::registers(&value)),
            b"todense" => Debugged::Converted(false),
            b"decode" if sparse => Debugged::Decoded(encoding::decode_sparse(&value)),
            b"decode" => Debugged::Refused("ERR HLL encoding is not sparse".to_owned()),
            b"encoding" => Debugged::Encoding(if sparse { "sparse" } else { "dense" }),
            _ => Debugged::Refused(format!(
                "ERR Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(args.get(1))
            )),
        };
        Ok((Decision::Keep, Ok(debugged)))
    });
    finish(reply, flatten(result), |reply, debugged| match debugged {
        Debugged::Registers(registers) => {
            reply.array(REGISTER_COUNT);
            registers
                .iter()
                .for_each(|&register| reply.integer(i64::from(register)));
        }
        Debugged::Decoded(text) => reply.bulk(text.as_bytes()),
        Debugged::Encoding(name) => reply.simple(name),
        Debugged::Converted(converted) => reply.integer(i64::from(converted)),
        Debugged::Refused(text) => reply.error(&text),
    });
    After::Continue
}

/// PFSELFTEST: Redis's self-test of the encoding (registers, then the estimate's error, dense
/// and sparse side by side); OK, or Redis's TESTFAILED text. It adds ten million elements,
/// so it runs on the long-request pool.
fn pfselftest(session: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    if session.may_offload {
        return After::Offload;
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    match encoding::self_test(seed, sparse_bytes_max(session)) {
        Ok(()) => reply.ok(),
        Err(failure) => reply.error(&format!("TESTFAILED {failure}")),
    }
    After::Continue
}
