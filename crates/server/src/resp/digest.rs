//! DEBUG DIGEST and DEBUG DIGEST-VALUE: a SHA-1 digest of the data set and of single values,
//! as Redis's test suite uses them to compare data before and after an operation.
//!
//! The same data gives the same digest and any change (a member, a score, an expiry, a key)
//! gives another; an empty data set, or a missing key, gives 40 zeros, as in Redis. The
//! numbers are Osprey's own, not Redis's: they are SHA-1 over Osprey's canonical form of each
//! value, in the same spirit as Redis's `xorObjectDigest` (ordered elements are hashed in
//! order; the elements of a set or a hash are hashed one by one and XORed, so their order does
//! not count).
//!
//! The data set's digest XORs one digest per key, each over the key's database, name, value
//! and expiry, so the order keys are visited in does not count. It covers every database; on
//! a cluster, the partitions this node masters.
//!
//! Invariant: a partition's lock is held to list its keys, then each key's value is read under
//! its own read lock; nothing is held across partitions.

use engine::Current;

use super::dump;
use super::keys::Target;
use super::rdb::RdbValue;
use super::reply::Reply;
use super::{After, Session, keyspace};

/// A SHA-1 digest.
type Digest = [u8; 20];

/// The digest of an empty data set or a missing key.
const ZERO: Digest = [0; 20];

/// SHA-1 of `bytes`.
fn sha1(bytes: &[u8]) -> Digest {
    let hex = udf::redis::sha1_hex(bytes);
    let mut digest = ZERO;
    for (index, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[index * 2..index * 2 + 2], 16).unwrap_or(0);
    }
    digest
}

fn xor_into(target: &mut Digest, other: &Digest) {
    target
        .iter_mut()
        .zip(other)
        .for_each(|(byte, other)| *byte ^= other);
}

/// Appends `bytes` with its length first, so that no two sequences of parts run together.
fn push_part(buffer: &mut Vec<u8>, bytes: &[u8]) {
    buffer.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    buffer.extend_from_slice(bytes);
}

/// The digest of one value: its type, then its elements (see the module's notes).
pub fn value_digest(current: &Current<'_>) -> Digest {
    let mut buffer = Vec::new();
    match dump::value_of(current) {
        Some(RdbValue::String(bytes)) => {
            push_part(&mut buffer, b"string");
            push_part(&mut buffer, &bytes);
        }
        Some(RdbValue::List(items)) => {
            push_part(&mut buffer, b"list");
            items.iter().for_each(|item| push_part(&mut buffer, item));
        }
        Some(RdbValue::ZSet(entries)) => {
            push_part(&mut buffer, b"zset");
            for (member, score) in &entries {
                push_part(&mut buffer, member);
                push_part(&mut buffer, &score.to_bits().to_be_bytes());
            }
        }
        Some(RdbValue::Set(members)) => {
            push_part(&mut buffer, b"set");
            let mut unordered = ZERO;
            for member in &members {
                xor_into(&mut unordered, &sha1(member));
            }
            push_part(&mut buffer, &unordered);
        }
        Some(RdbValue::Hash(pairs)) => {
            push_part(&mut buffer, b"hash");
            let mut unordered = ZERO;
            let mut pair_bytes = Vec::new();
            for (field, value) in &pairs {
                pair_bytes.clear();
                push_part(&mut pair_bytes, field);
                push_part(&mut pair_bytes, value);
                xor_into(&mut unordered, &sha1(&pair_bytes));
            }
            push_part(&mut buffer, &unordered);
        }
        Some(RdbValue::Stream(_)) | None => {
            // A stream, or a record an Aerospike client wrote: its bins as stored.
            push_part(&mut buffer, b"record");
            for bin in current.bins().iter() {
                push_part(&mut buffer, bin.name);
                push_part(&mut buffer, &[bin.particle_type]);
                push_part(&mut buffer, bin.value);
            }
        }
    }
    sha1(&buffer)
}

/// Lower-case hex of a digest, as Redis shows one.
fn hex(digest: &Digest) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// DEBUG DIGEST-VALUE key [key ...]: each value's digest (40 zeros for a missing key).
pub fn debug_digest_value(
    session: &Session,
    keys: impl Iterator<Item = Vec<u8>>,
    reply: &mut Reply<'_>,
) {
    let digests: Vec<String> = keys
        .map(|key| {
            let target = Target::of(&session.state, session.database, &key);
            let digest = target
                .view(|current| current.map(|current| value_digest(&current)))
                .ok()
                .flatten()
                .unwrap_or(ZERO);
            hex(&digest)
        })
        .collect();
    reply.array(digests.len());
    digests.iter().for_each(|digest| reply.simple(digest));
}

/// DEBUG DIGEST: the data set's digest (40 zeros when it is empty). It visits every key, so
/// beyond a few thousand it runs on the long-request pool.
pub fn debug_digest(session: &Session, reply: &mut Reply<'_>) -> After {
    let state = &session.state;
    let key_count: u64 = state
        .resp_databases
        .iter()
        .map(|(database, _)| super::keys::database_size(state, database))
        .sum();
    if session.should_offload(usize::try_from(key_count).unwrap_or(usize::MAX)) {
        return After::Offload;
    }
    let mut total = ZERO;
    for (database, _) in state.resp_databases.iter() {
        keyspace::for_each_key(state, database, |key| {
            let target = Target::of(state, database, key);
            let Ok(Some((value, void_time))) = target.view(|current| {
                current.map(|current| (value_digest(&current), current.void_time.0))
            }) else {
                return;
            };
            let mut buffer = Vec::new();
            push_part(&mut buffer, &database.0.to_be_bytes());
            push_part(&mut buffer, key);
            push_part(&mut buffer, &value);
            push_part(&mut buffer, &void_time.to_be_bytes());
            xor_into(&mut total, &sha1(&buffer));
        });
    }
    reply.simple(&hex(&total));
    After::Continue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_matches_the_known_vector() {
        assert_eq!(
            hex(&sha1(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(hex(&ZERO), "0".repeat(40));
    }

    #[test]
    fn xor_is_order_free_and_parts_do_not_run_together() {
        let (a, b) = (sha1(b"a"), sha1(b"b"));
        let mut forward = ZERO;
        xor_into(&mut forward, &a);
        xor_into(&mut forward, &b);
        let mut backward = ZERO;
        xor_into(&mut backward, &b);
        xor_into(&mut backward, &a);
        assert_eq!(forward, backward);
        let (mut ab_c, mut a_bc) = (Vec::new(), Vec::new());
        push_part(&mut ab_c, b"ab");
        push_part(&mut ab_c, b"c");
        push_part(&mut a_bc, b"a");
        push_part(&mut a_bc, b"bc");
        assert_ne!(sha1(&ab_c), sha1(&a_bc));
    }
}
