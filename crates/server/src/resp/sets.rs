//! Set commands. A set is a native set of members, shown to Aerospike clients as one LIST bin
//! named `set` (see `docs/internals/redis-mapping.md`).
//!
//! Random picks (SPOP, SRANDMEMBER) cost O(1) per member: the set is an `IndexSet`, so a
//! member is found by a random index and removed by moving the last member into its slot. They
//! draw from a per-thread generator seeded from the standard library's random keys.
//!
//! The commands that read or write several keys (SMOVE, SINTER, SUNION, SDIFF, their STORE
//! forms, SINTERCARD) run in the namespace's exclusive section: no other command interleaves
//! with them, as in Redis.

use std::cell::RefCell;
use std::hash::{BuildHasher as _, RandomState};
use std::sync::Arc;

use indexmap::IndexSet;
use model::ParticleType;
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};
use wire_resp::Args;

use super::collection::{self, Change, Collection, Failure, ScanOptions, finish};
use super::commands::Command;
use super::keys::{self, Target};
use super::msgpack::{self, Reader};
use super::reply::Reply;
use super::{After, Session};

/// The set commands.
pub const COMMANDS: &[Command] = &[
    ("sadd", -3, sadd),
    ("scard", 2, scard),
    ("sdiff", -2, |s, a, r| {
        combine(s, a, r, Operation::Difference)
    }),
    ("sdiffstore", -3, |s, a, r| {
        combine_store(s, a, r, Operation::Difference)
    }),
    ("sinter", -2, |s, a, r| {
        combine(s, a, r, Operation::Intersection)
    }),
    ("sintercard", -3, sintercard),
    ("sinterstore", -3, |s, a, r| {
        combine_store(s, a, r, Operation::Intersection)
    }),
    ("sismember", 3, sismember),
    ("smembers", 2, smembers),
    ("smismember", -3, smismember),
    ("smove", 4, smove),
    ("spop", -2, spop),
    ("srandmember", -2, srandmember),
    ("srem", -3, srem),
    ("sscan", -3, sscan),
    ("sunion", -2, |s, a, r| combine(s, a, r, Operation::Union)),
    ("sunionstore", -3, |s, a, r| {
        combine_store(s, a, r, Operation::Union)
    }),
];

/// Bytes one member costs beyond its own bytes: its boxed slice, hash and index slot.
const MEMBER_OVERHEAD_BYTES: usize = 32;

/// Largest reply SRANDMEMBER with a negative count builds, in bytes: members repeat, so the
/// reply grows with the client's count rather than with the set. Redis's largest bulk string.
const REPEATED_REPLY_BYTES_MAX: usize = 512 * 1024 * 1024;

/// Reply bytes a bulk string costs beyond its content, at the least (`$0\r\n\r\n`).
const BULK_FRAMING_BYTES: usize = 6;

/// Redis's reply to an SPOP count that is negative or not an integer.
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";

/// Redis's reply to an SRANDMEMBER count of -2^63.
const RANDOM_COUNT_OUT_OF_RANGE: &str = "ERR value is out of range, value must between \
                                         -9223372036854775807 and 9223372036854775807";

/// Osprey's reply to an SRANDMEMBER negative count whose reply would pass
/// [`REPEATED_REPLY_BYTES_MAX`].
const REPLY_TOO_LARGE: &str = "ERR value is out of range, the reply would exceed 512 MiB";

/// Redis's reply to SSCAN's cursor when it is not an unsigned integer.
const INVALID_CURSOR: &str = "ERR invalid cursor";

/// A Redis set. An `IndexSet` so that SPOP and SRANDMEMBER pick a random member in O(1).
#[derive(Clone, Debug, Default)]
pub struct SetValue {
    members: IndexSet<Box<[u8]>>,
    size_bytes: usize,
}

fn member_size(member: &[u8]) -> usize {
    member.len() + MEMBER_OVERHEAD_BYTES
}

impl SetValue {
    /// Adds `member`; returns whether it is new.
    pub fn insert(&mut self, member: &[u8]) -> bool {
        let added = self.members.insert(member.into());
        if added {
            self.size_bytes += member_size(member);
        }
        added
    }

    /// Removes `member`; returns whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let removed = self.members.swap_remove(member);
        if removed {
            self.size_bytes -= member_size(member);
        }
        removed
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.members.contains(member)
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// The members, in the set's (arbitrary) order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> {
        self.members.iter().map(AsRef::as_ref)
    }

    /// The member at `index` (below `len`).
    fn member_at(&self, index: usize) -> &[u8] {
        self.members
            .get_index(index)
            .expect("callers pass an index below len")
    }

    /// A member drawn at random, `None` when empty.
    pub fn random_member(&self, rng: &mut SmallRng) -> Option<&[u8]> {
        (!self.members.is_empty()).then(|| self.member_at(rng.random_range(0..self.len())))
    }

    /// Removes a member drawn at random, in O(1); `None` when empty.
    pub fn pop_random(&mut self, rng: &mut SmallRng) -> Option<Box<[u8]>> {
        if self.members.is_empty() {
            return None;
        }
        let index = rng.random_range(0..self.len());
        let member = self
            .members
            .swap_remove_index(index)
            .expect("the index is below len");
        self.size_bytes -= member_size(&member);
        Some(member)
    }

    /// Removes every member, returning them.
    pub fn take_all(&mut self) -> Vec<Box<[u8]>> {
        self.size_bytes = 0;
        std::mem::take(&mut self.members).into_iter().collect()
    }

    /// Keeps the members for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let mut removed_bytes = 0;
        self.members.retain(|member| {
            let kept = keep(member);
            if !kept {
                removed_bytes += member_size(member);
            }
            kept
        });
        self.size_bytes -= removed_bytes;
    }

    /// Removes the members of `other`, in O(min(len, other.len)).
    pub fn subtract(&mut self, other: &SetValue) {
        if other.len() < self.len() {
            other.iter().for_each(|member| {
                self.remove(member);
            });
        } else {
            self.retain(|member| !other.contains(member));
        }
    }

    /// The LIST bin's msgpack.
    fn encoded(&self) -> Vec<u8> {
        let mut encoded = Vec::new();
        msgpack::write_array_len(&mut encoded, self.members.len());
        for member in &self.members {
            msgpack::write_bytes(&mut encoded, member);
        }
        encoded
    }
}

collection::native_value!(SetValue);

impl Collection for SetValue {
    const BIN: &'static [u8] = b"set";
    const PARTICLE: ParticleType = ParticleType::List;
    const TYPE_NAME: &'static str = "set";

    fn decode(value: &[u8]) -> Option<SetValue> {
        let mut reader = Reader::new(value);
        let count = reader.array_len()?;
        let mut set = SetValue::default();
        for _ in 0..count {
            set.insert(&reader.scalar()?.to_bytes());
        }
        reader.is_done().then_some(set)
    }

    fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

thread_local! {
    /// This thread's generator for SPOP and SRANDMEMBER.
    static RNG: RefCell<SmallRng> = RefCell::new(SmallRng::seed_from_u64(fresh_seed()));
}

/// A seed from the standard library's per-process random hash keys.
fn fresh_seed() -> u64 {
    RandomState::new().hash_one(std::thread::current().id())
}

/// Runs `draw` with this thread's generator.
pub(super) fn with_rng<T>(draw: impl FnOnce(&mut SmallRng) -> T) -> T {
    RNG.with(|rng| draw(&mut rng.borrow_mut()))
}

/// Runs `run` in the RESP namespace's exclusive section: the keys it reads and writes change
/// together, as one Redis command.
fn isolated<T>(session: &mut Session, run: impl FnOnce(&mut Session) -> T) -> T {
    let state = Arc::clone(&session.state);
    let namespace = state
        .namespace(state.config.resp_namespace().as_bytes())
        .expect("the RESP namespace is validated at start-up");
    namespace.exclusive(|| run(session))
}

/// How a list of members is answered.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// A set (RESP3 `~`, RESP2 an array): SMEMBERS, SPOP with a count, SINTER...
    Set,
    /// An array: SRANDMEMBER with a count.
    Array,
}

/// Answers `members` as `shape`.
fn reply_members<'m>(
    reply: &mut Reply<'_>,
    shape: Shape,
    members: impl ExactSizeIterator<Item = &'m [u8]>,
) {
    match shape {
        Shape::Set => reply.set(members.len()),
        Shape::Array => reply.array(members.len()),
    }
    members.for_each(|member| reply.bulk(member));
}

/// A count as a `usize`, saturating (it is only ever compared with a set's size).
fn saturating_usize(count: u64) -> usize {
    usize::try_from(count).unwrap_or(usize::MAX)
}

/// SADD key member [member ...]: members added.
pub fn sadd(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(&target, &mut session.writes, true, |set: &mut SetValue| {
        let added: i64 = (2..args.len())
            .map(|position| i64::from(set.insert(args.get(position))))
            .sum();
        Ok(Change::when(added > 0, added))
    });
    finish(reply, outcome, |reply, added| {
        reply.integer(added.unwrap_or(0))
    })
}

/// SREM key member [member ...]: members removed.
pub fn srem(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(&target, &mut session.writes, false, |set: &mut SetValue| {
        let removed: i64 = (2..args.len())
            .map(|position| i64::from(set.remove(args.get(position))))
            .sum();
        Ok(Change::when(removed > 0, removed))
    });
    finish(reply, outcome, |reply, removed| {
        reply.integer(removed.unwrap_or(0))
    })
}

/// SMEMBERS key: every member (a set reply).
pub fn smembers(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    // Written under the read lock, straight from the set: no copy of the members.
    let outcome = collection::read(&target, |set: Option<&SetValue>| match set {
        Some(set) => reply_members(reply, Shape::Set, set.iter()),
        None => reply.set(0),
    });
    finish(reply, outcome, |_, ()| {})
}

/// SISMEMBER key member: 1 if `member` is in the set.
pub fn sismember(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |set: Option<&SetValue>| {
        set.is_some_and(|set| set.contains(args.get(2)))
    });
    finish(reply, outcome, |reply, found| {
        reply.integer(i64::from(found))
    })
}

/// SMISMEMBER key member [member ...]: 1 or 0 per member.
pub fn smismember(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |set: Option<&SetValue>| {
        (2..args.len())
            .map(|position| set.is_some_and(|set| set.contains(args.get(position))))
            .collect::<Vec<_>>()
    });
    finish(reply, outcome, |reply, found| {
        reply.array(found.len());
        found
            .into_iter()
            .for_each(|found| reply.integer(i64::from(found)));
    })
}

/// SCARD key: the number of members.
pub fn scard(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |set: Option<&SetValue>| {
        set.map_or(0, SetValue::len)
    });
    finish(reply, outcome, |reply, len| {
        reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
    })
}

/// SPOP key [count]: a random member, removed (null if none); with a count, that many
/// distinct members (a set reply), the whole set when it has no more.
pub fn spop(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    match args.len() {
        2 => spop_one(session, args, reply),
        3 => spop_count(session, args, reply),
        _ => {
            reply.error(keys::SYNTAX_ERROR);
            After::Continue
        }
    }
}

/// SPOP key
fn spop_one(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(&target, &mut session.writes, false, |set: &mut SetValue| {
        let member = with_rng(|rng| set.pop_random(rng));
        Ok(Change::when(member.is_some(), member))
    });
    finish(reply, outcome, |reply, member| match member.flatten() {
        Some(member) => reply.bulk(&member),
        None => reply.null(),
    })
}

/// SPOP key count
fn spop_count(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    // Redis answers the same text to a negative count and to one that is not an integer.
    let Ok(Ok(count)) = keys::parse_i64(args.get(2)).map(u64::try_from) else {
        reply.error(NOT_POSITIVE);
        return After::Continue;
    };
    let count = saturating_usize(count);
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(&target, &mut session.writes, false, |set: &mut SetValue| {
        let popped = if count >= set.len() {
            set.take_all()
        } else {
            with_rng(|rng| (0..count).filter_map(|_| set.pop_random(rng)).collect())
        };
        Ok(Change::when(!popped.is_empty(), popped))
    });
    finish(reply, outcome, |reply, popped| {
        let popped = popped.unwrap_or_default();
        reply_members(reply, Shape::Set, popped.iter().map(AsRef::as_ref));
    })
}

/// SRANDMEMBER key [count]: a random member (null if none); with a positive count, that many
/// distinct members (the whole set when it has no more); with a negative one, that many
/// members drawn independently, so they may repeat. Counts answer an array.
pub fn srandmember(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    match args.len() {
        2 => srandmember_one(session, args, reply),
        3 => srandmember_count(session, args, reply),
        _ => {
            reply.error(keys::SYNTAX_ERROR);
            After::Continue
        }
    }
}

/// SRANDMEMBER key
fn srandmember_one(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |set: Option<&SetValue>| {
        match set.and_then(|set| with_rng(|rng| set.random_member(rng))) {
            Some(member) => reply.bulk(member),
            None => reply.null(),
        }
    });
    finish(reply, outcome, |_, ()| {})
}

/// SRANDMEMBER key count
fn srandmember_count(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let count = match keys::parse_i64(args.get(2)) {
        Ok(i64::MIN) => {
            reply.error(RANDOM_COUNT_OUT_OF_RANGE);
            return After::Continue;
        }
        Ok(count) => count,
        Err(()) => {
            reply.error(keys::NOT_AN_INTEGER);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    // Written under the read lock, straight from the set: no copy of the members.
    let outcome = collection::read(&target, |set: Option<&SetValue>| match set {
        Some(set) => reply_random(reply, set, count),
        None => {
            reply.array(0);
            Ok(())
        }
    });
    finish(reply, outcome.and_then(|answered| answered), |_, ()| {})
}

/// Answers SRANDMEMBER's `count` members of `set`.
///
/// # Errors
/// A negative count whose reply would pass [`REPEATED_REPLY_BYTES_MAX`]; nothing is written.
fn reply_random(reply: &mut Reply<'_>, set: &SetValue, count: i64) -> Result<(), Failure> {
    let wanted = saturating_usize(count.unsigned_abs());
    if count < 0 {
        return reply_repeated(reply, set, wanted);
    }
    if wanted >= set.len() {
        reply_members(reply, Shape::Array, set.iter());
        return Ok(());
    }
    let indices = with_rng(|rng| rand::seq::index::sample(rng, set.len(), wanted));
    reply.array(indices.len());
    indices
        .into_iter()
        .for_each(|index| reply.bulk(set.member_at(index)));
    Ok(())
}

/// Answers `count` members of `set` drawn independently. A first pass adds up the reply's
/// size, a second draws the same members again from the same seed and writes them, so nothing
/// is allocated by the count.
///
/// # Errors
/// When the reply would pass [`REPEATED_REPLY_BYTES_MAX`]; nothing is written.
fn reply_repeated(reply: &mut Reply<'_>, set: &SetValue, count: usize) -> Result<(), Failure> {
    if count.saturating_mul(BULK_FRAMING_BYTES) > REPEATED_REPLY_BYTES_MAX {
        return Err(Failure::message(REPLY_TOO_LARGE));
    }
    let seed = with_rng(|rng| rng.random::<u64>());
    let draws = || {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..count).map(move |_| set.member_at(rng.random_range(0..set.len())))
    };
    let mut reply_bytes = 0;
    for member in draws() {
        reply_bytes += member.len() + BULK_FRAMING_BYTES;
        if reply_bytes > REPEATED_REPLY_BYTES_MAX {
            return Err(Failure::message(REPLY_TOO_LARGE));
        }
    }
    reply.array(count);
    draws().for_each(|member| reply.bulk(member));
    Ok(())
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]: the whole set in one reply, cursor 0.
/// As in Redis, a bad cursor is answered first, then the key's type, and a missing key
/// answers an empty scan before the options are looked at.
pub fn sscan(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let options = ScanOptions::parse(args);
    if let Err(failure @ Failure::Message(text)) = &options
        && text == INVALID_CURSOR
    {
        failure.reply(reply);
        return After::Continue;
    }
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |set: Option<&SetValue>| {
        let Some(set) = set else {
            return Ok(Vec::new());
        };
        let options = options.as_ref().map_err(Clone::clone)?;
        Ok(set
            .iter()
            .filter(|member| options.keeps_under_lock(member))
            .map(<[u8]>::to_vec)
            .collect::<Vec<_>>())
    });
    let outcome = outcome.and_then(|members| members).map(|mut members| {
        if let Ok(options) = &options {
            members.retain(|member| options.matches_late(member));
        }
        members
    });
    finish(reply, outcome, |reply, members| {
        collection::reply_scan(reply, 1, &members);
    })
}

/// SMOVE source destination member: 1 if `member` moved (or is in `source` when both keys are
/// the same), 0 if `source` does not hold it.
pub fn smove(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let (source, destination, member) = (args.get(1), args.get(2), args.get(3));
    let outcome = isolated(session, |session| {
        move_member(session, source, destination, member)
    });
    finish(reply, outcome, |reply, moved| {
        reply.integer(i64::from(moved))
    })
}

/// SMOVE's work, in Redis's order: a missing source answers 0 before the destination's type
/// is checked. The member is added to the destination before it leaves the source, so a
/// failed write can duplicate it but never lose it.
fn move_member(
    session: &mut Session,
    source: &[u8],
    destination: &[u8],
    member: &[u8],
) -> Result<bool, Failure> {
    let source_target = Target::of(&session.state, session.database, source);
    let holds = |set: Option<&SetValue>| set.map(|set| set.contains(member));
    let Some(present) = collection::peek(&source_target, holds)? else {
        return Ok(false);
    };
    let destination_target = Target::of(&session.state, session.database, destination);
    collection::peek(&destination_target, |_: Option<&SetValue>| ())?;
    if source == destination || !present {
        return Ok(present);
    }
    collection::modify(
        &destination_target,
        &mut session.writes,
        true,
        |set: &mut SetValue| Ok(Change::when(set.insert(member), ())),
    )?;
    collection::modify(
        &source_target,
        &mut session.writes,
        false,
        |set: &mut SetValue| Ok(Change::when(set.remove(member), ())),
    )?;
    Ok(true)
}

/// How SINTER, SUNION and SDIFF combine their sets.
#[derive(Clone, Copy, Debug)]
enum Operation {
    /// The members in every set.
    Intersection,
    /// The members in any set.
    Union,
    /// The members of the first set in none of the others.
    Difference,
}

/// SINTER key [key ...], SUNION key [key ...], SDIFF key [key ...]: the resulting set (a missing
/// key is an empty set).
fn combine(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    operation: Operation,
) -> After {
    let keys: Vec<&[u8]> = (1..args.len()).map(|position| args.get(position)).collect();
    let outcome = isolated(session, |session| combined(session, &keys, operation));
    finish(reply, outcome, |reply, set| {
        reply_members(reply, Shape::Set, set.iter());
    })
}

/// SINTERSTORE, SUNIONSTORE, SDIFFSTORE destination key [key ...]: stores the resulting set
/// at `destination` (replacing whatever it held, with no expiry; deleting it when the result
/// is empty) and answers its size.
fn combine_store(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    operation: Operation,
) -> After {
    let keys: Vec<&[u8]> = (2..args.len()).map(|position| args.get(position)).collect();
    let outcome = isolated(session, |session| {
        let set = combined(session, &keys, operation)?;
        store(session, args.get(1), set)
    });
    finish(reply, outcome, |reply, len| {
        reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
    })
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the intersection, at most
/// `limit` when it is not 0.
pub fn sintercard(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let (keys, limit) = match sintercard_arguments(args) {
        Ok(parsed) => parsed,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let outcome = isolated(session, |session| {
        combined(session, &keys, Operation::Intersection)
    });
    finish(reply, outcome, |reply, set| {
        let len = if limit == 0 {
            set.len()
        } else {
            set.len().min(limit)
        };
        reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
    })
}

/// SINTERCARD's keys and limit (0: none), checked in Redis's order and with its texts.
fn sintercard_arguments(args: &Args) -> Result<(Vec<&[u8]>, usize), Failure> {
    let key_count = match keys::parse_i64(args.get(1)).map(u64::try_from) {
        Ok(Ok(count)) if count >= 1 => saturating_usize(count),
        _ => return Err(Failure::message("ERR numkeys should be greater than 0")),
    };
    if key_count > args.len() - 2 {
        return Err(Failure::message(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let mut limit = 0;
    let mut position = 2 + key_count;
    while position < args.len() {
        let has_value = position + 1 < args.len();
        if !(has_value && args.get(position).eq_ignore_ascii_case(b"LIMIT")) {
            return Err(Failure::message(keys::SYNTAX_ERROR));
        }
        limit = match keys::parse_i64(args.get(position + 1)).map(u64::try_from) {
            Ok(Ok(limit)) => saturating_usize(limit),
            _ => return Err(Failure::message("ERR LIMIT can't be negative")),
        };
        position += 2;
    }
    let keys = (2..2 + key_count)
        .map(|position| args.get(position))
        .collect();
    Ok((keys, limit))
}

/// The set `operation` makes of the sets at `keys`. Every key's type is checked first, so a
/// key of another type answers WRONGTYPE even after a missing key, as in Redis.
///
/// # Errors
/// [`Failure::WrongType`] when a key holds another type; an engine failure.
fn combined(session: &Session, keys: &[&[u8]], operation: Operation) -> Result<SetValue, Failure> {
    let sizes = keys
        .iter()
        .map(|key| {
            let target = Target::of(&session.state, session.database, key);
            collection::read(&target, |set: Option<&SetValue>| set.map(SetValue::len))
        })
        .collect::<Result<Vec<_>, _>>()?;
    match operation {
        Operation::Intersection => intersection(session, keys, &sizes),
        Operation::Union => union(session, keys),
        Operation::Difference => difference(session, keys),
    }
}

/// A copy of the set at `key` (empty when missing).
fn copy_of(session: &Session, key: &[u8]) -> Result<SetValue, Failure> {
    let target = Target::of(&session.state, session.database, key);
    collection::read(&target, |set: Option<&SetValue>| {
        set.cloned().unwrap_or_default()
    })
}

/// Calls `look` with the set at `key`, if there is one.
fn with_set(session: &Session, key: &[u8], look: impl FnOnce(&SetValue)) -> Result<(), Failure> {
    let target = Target::of(&session.state, session.database, key);
    collection::read(&target, |set: Option<&SetValue>| set.map(look)).map(|_| ())
}

/// The intersection: the smallest set, less what each other set lacks. O(N*M), N the smallest
/// set's size, M the number of keys.
fn intersection(
    session: &Session,
    keys: &[&[u8]],
    sizes: &[Option<usize>],
) -> Result<SetValue, Failure> {
    let Some(sizes) = sizes.iter().copied().collect::<Option<Vec<usize>>>() else {
        return Ok(SetValue::default());
    };
    let Some((smallest, _)) = sizes.iter().enumerate().min_by_key(|&(_, size)| size) else {
        return Ok(SetValue::default());
    };
    let mut result = copy_of(session, keys[smallest])?;
    for (position, key) in keys.iter().enumerate() {
        if position == smallest || result.is_empty() {
            continue;
        }
        let mut found = false;
        with_set(session, key, |set| {
            found = true;
            result.retain(|member| set.contains(member));
        })?;
        if !found {
            return Ok(SetValue::default());
        }
    }
    Ok(result)
}

/// The union: every member of every set. O(N), N the total number of members.
fn union(session: &Session, keys: &[&[u8]]) -> Result<SetValue, Failure> {
    let mut result = SetValue::default();
    for key in keys {
        with_set(session, key, |set| {
            set.iter().for_each(|member| {
                result.insert(member);
            });
        })?;
    }
    Ok(result)
}

/// The difference: the first set less every other. O(N), N the total number of members.
fn difference(session: &Session, keys: &[&[u8]]) -> Result<SetValue, Failure> {
    let Some((first, others)) = keys.split_first() else {
        return Ok(SetValue::default());
    };
    let mut result = copy_of(session, first)?;
    for key in others {
        if result.is_empty() {
            break;
        }
        with_set(session, key, |set| result.subtract(set))?;
    }
    Ok(result)
}

/// Stores `set` at `destination`, replacing what was there (with no expiry), or deletes
/// `destination` when `set` is empty; returns the set's size.
fn store(session: &mut Session, destination: &[u8], mut set: SetValue) -> Result<usize, Failure> {
    let len = set.len();
    set.members.shrink_to_fit();
    collection::store_replacing(session, destination, Box::new(set), len)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use engine::NativeValue as _;

    fn set_of(members: &[&[u8]]) -> SetValue {
        let mut set = SetValue::default();
        members.iter().for_each(|member| {
            set.insert(member);
        });
        set
    }

    fn expected_size(set: &SetValue) -> usize {
        set.iter().map(member_size).sum()
    }

    #[test]
    fn size_follows_every_change() {
        let mut set = set_of(&[b"a", b"bb", b"ccc"]);
        assert!(!set.insert(b"a"));
        assert_eq!(set.size_bytes(), expected_size(&set));
        assert!(set.remove(b"bb"));
        assert!(!set.remove(b"bb"));
        assert_eq!(set.size_bytes(), expected_size(&set));
        set.retain(|member| member != b"a");
        assert_eq!(set.size_bytes(), expected_size(&set));
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(set.pop_random(&mut rng).as_deref(), Some(&b"ccc"[..]));
        assert_eq!(set.pop_random(&mut rng), None);
        assert_eq!(set.size_bytes(), 0);
        assert!(set.is_empty());
    }

    #[test]
    fn the_rendered_bin_decodes_to_the_same_set() {
        let set = set_of(&[b"one", &[0xff, 0x00], b""]);
        let decoded = SetValue::decode(&set.encoded()).expect("decodes");
        assert_eq!(decoded.len(), 3);
        assert!(
            decoded.contains(b"one") && decoded.contains(&[0xff, 0x00]) && decoded.contains(b"")
        );
        assert_eq!(decoded.size_bytes(), set.size_bytes());
    }

    #[test]
    fn a_list_with_repeats_and_numbers_decodes_to_distinct_members() {
        let mut bin = Vec::new();
        msgpack::write_array_len(&mut bin, 4);
        msgpack::write_bytes(&mut bin, b"7");
        rmp::encode::write_sint(&mut bin, 7).expect("vec");
        msgpack::write_bytes(&mut bin, b"x");
        msgpack::write_f64(&mut bin, 1.5);
        let set = SetValue::decode(&bin).expect("decodes");
        assert_eq!(set.len(), 3);
        assert!(set.contains(b"7") && set.contains(b"x") && set.contains(b"1.5"));
    }

    #[test]
    fn subtract_and_take_all_keep_the_size() {
        let mut set = set_of(&[b"a", b"b", b"c", b"d"]);
        set.subtract(&set_of(&[b"a", b"z"]));
        assert_eq!(set.len(), 3);
        set.subtract(&set_of(&[b"b", b"c", b"d", b"e", b"f"]));
        assert!(set.is_empty());
        assert_eq!(set.size_bytes(), 0);
        let mut set = set_of(&[b"x", b"y"]);
        assert_eq!(set.take_all().len(), 2);
        assert_eq!((set.len(), set.size_bytes()), (0, 0));
    }

    /// Reads a RESP2 array of bulk strings.
    fn bulk_items(out: &[u8]) -> Vec<Vec<u8>> {
        fn line<'a>(rest: &mut &'a [u8]) -> &'a [u8] {
            let end = rest.windows(2).position(|w| w == b"\r\n").expect("a line");
            let (line, after) = rest.split_at(end);
            *rest = &after[2..];
            line
        }
        let number = |text: &[u8]| -> usize {
            std::str::from_utf8(text)
                .expect("ascii")
                .parse()
                .expect("a length")
        };
        let mut rest = out;
        let header = line(&mut rest);
        assert_eq!(header[0], b'*');
        let items = (0..number(&header[1..]))
            .map(|_| {
                let header = line(&mut rest);
                assert_eq!(header[0], b'$');
                let (item, after) = rest.split_at(number(&header[1..]));
                rest = &after[2..];
                item.to_vec()
            })
            .collect();
        assert!(rest.is_empty());
        items
    }

    fn random_reply(set: &SetValue, count: i64) -> Result<Vec<Vec<u8>>, Failure> {
        let mut out = Vec::new();
        let mut reply = Reply::new(&mut out, 2);
        reply_random(&mut reply, set, count)?;
        drop(reply);
        Ok(bulk_items(&out))
    }

    #[test]
    fn srandmember_counts_pick_distinct_or_repeated_members() {
        let members: Vec<Vec<u8>> = (0..50).map(|i| format!("m{i}").into_bytes()).collect();
        let set = set_of(&members.iter().map(Vec::as_slice).collect::<Vec<_>>());
        for count in [1, 5, 16, 40, 49] {
            let picked = random_reply(&set, count).expect("answers");
            let distinct: HashSet<_> = picked.iter().collect();
            assert_eq!(
                (picked.len(), distinct.len()),
                (count as usize, count as usize)
            );
            assert!(picked.iter().all(|member| set.contains(member)));
        }
        assert_eq!(random_reply(&set, 1000).expect("answers").len(), 50);
        assert_eq!(random_reply(&set, 0).expect("answers").len(), 0);
        let repeated = random_reply(&set, -500).expect("answers");
        assert_eq!(repeated.len(), 500);
        assert!(repeated.iter().collect::<HashSet<_>>().len() < 500);
    }

    #[test]
    fn a_repeated_reply_beyond_the_limit_is_refused_before_anything_is_written() {
        let set = set_of(&[&[b'x'; 1024][..]]);
        let mut out = Vec::new();
        let mut reply = Reply::new(&mut out, 2);
        let outcome = reply_random(&mut reply, &set, -(1 << 20));
        drop(reply);
        assert_eq!(outcome, Err(Failure::message(REPLY_TOO_LARGE)));
        assert!(out.is_empty());
    }

    /// Random operations against a `HashSet` model; `OSPREY_SETS_SEED` replays a seed.
    #[test]
    fn random_changes_match_a_model() {
        let seed = std::env::var("OSPREY_SETS_SEED")
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or_else(fresh_seed);
        println!("seed {seed} (replay with OSPREY_SETS_SEED={seed})");
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut set = SetValue::default();
        let mut model: HashSet<Vec<u8>> = HashSet::new();
        for _ in 0..20_000 {
            let member = format!("{}", rng.random_range(0..300)).into_bytes();
            match rng.random_range(0..6) {
                0 | 1 => assert_eq!(set.insert(&member), model.insert(member)),
                2 => assert_eq!(set.remove(&member), model.remove(&member)),
                3 => match set.pop_random(&mut rng) {
                    Some(popped) => assert!(model.remove(&*popped), "seed {seed}"),
                    None => assert!(model.is_empty(), "seed {seed}"),
                },
                4 => {
                    let other = set_of(&[&member, b"1", b"2"]);
                    set.subtract(&other);
                    model.retain(|m| !other.contains(m));
                }
                _ => {
                    let modulus = rng.random_range(2..9);
                    let keep = |m: &[u8]| !m.len().is_multiple_of(modulus);
                    set.retain(keep);
                    model.retain(|m| keep(m));
                }
            }
            assert_eq!(set.len(), model.len(), "seed {seed}");
            assert_eq!(set.size_bytes(), expected_size(&set), "seed {seed}");
        }
        assert!(
            set.iter().all(|member| model.contains(member)),
            "seed {seed}"
        );
    }
}
