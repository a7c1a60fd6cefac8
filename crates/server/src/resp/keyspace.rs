//! Commands over the whole key space: KEYS, SCAN and RANDOMKEY. They walk the records of the
//! session database's set partition by partition, a piece at a time
//! (`engine::Namespace::scan_piece`), and answer the user keys stored with them.
//!
//! SCAN's cursor is the next partition to walk (0 starts and ends an iteration). Each call
//! walks whole partitions, in order, until it has examined at least COUNT keys or reached the
//! last partition. So a full iteration returns every key present throughout it exactly once,
//! a key added or deleted meanwhile at most once, and the cursor stays valid across writes.
//! MATCH and TYPE filter what a call examined, so a call may answer fewer keys than COUNT,
//! or none, before the iteration ends, as in Redis.
//!
//! On a cluster each node walks only the partitions it masters, so that every key is seen on
//! exactly one node: the connection gathers KEYS and RANDOMKEY from every node, and sends
//! SCAN to its cursor partition's master, where a call stops at the first partition another
//! node masters and returns it as the next cursor (`routing.rs`).
//!
//! Invariants:
//! - A partition's lock is held for one piece (`PIECE_ENTRIES` index entries) at most.
//! - Only records with a stored STRING key are Redis keys here: a record an Aerospike client
//!   wrote without its key, or with an integer or bytes key, cannot be named by Redis.

use std::hash::BuildHasher;

use engine::{Namespace, ScanScope};
use model::{Digest, PARTITION_COUNT, ParticleType, PartitionId};
use wire_resp::Args;

use super::collection;
use super::commands::Command;
use super::databases::Database;
use super::glob::Glob;
use super::keys::{self, Target};
use super::reply::Reply;
use super::{After, Session};
use crate::cluster::Route;
use crate::state::ServerState;

/// The key-space commands.
pub const COMMANDS: &[Command] = &[
    ("keys", 2, keys_matching),
    ("randomkey", 1, randomkey),
    ("scan", -2, scan),
];

/// Index entries examined per partition lock.
const PIECE_ENTRIES: usize = 256;

/// SCAN's COUNT when none is given.
const SCAN_COUNT_DEFAULT: u64 = 10;

/// The RESP namespace and the scope of `database`'s set.
fn resp_scope(state: &ServerState, database: Database) -> (&Namespace, ScanScope) {
    let namespace = keys::namespace_of(state);
    let scope = namespace.scan_scope(state.resp_databases.set_name(database).as_bytes());
    (namespace, scope)
}

/// Whether this node walks `partition`: every partition on a single node, those it masters on
/// a cluster.
fn walks(state: &ServerState, namespace: &Namespace, partition: u16) -> bool {
    let view = state.cluster_view();
    !view.is_clustered()
        || view.route(namespace.name(), PartitionId(partition), false) == Route::Local
}

/// Calls `visit` with each Redis key in `partition`, in digest order, until it returns false.
fn walk_partition(
    namespace: &Namespace,
    scope: ScanScope,
    partition: u16,
    mut visit: impl FnMut(&[u8]) -> bool,
) {
    let mut after: Option<Digest> = None;
    let mut stopped = false;
    while !stopped {
        let end = namespace.scan_piece(
            PartitionId(partition),
            scope,
            after.as_ref(),
            PIECE_ENTRIES,
            |record| match record.user_key() {
                Some((particle_type, key)) if particle_type == ParticleType::String as u8 => {
                    stopped = !visit(key);
                    !stopped
                }
                _ => true,
            },
        );
        if end.exhausted {
            return;
        }
        after = end.last;
    }
}

/// Calls `visit` with every Redis key of `database` this node walks, a partition at a time:
/// a partition's keys are listed under its lock (a piece at a time), then visited after it, so
/// `visit` may read the keys' records.
pub(super) fn for_each_key(state: &ServerState, database: Database, mut visit: impl FnMut(&[u8])) {
    let (namespace, scope) = resp_scope(state, database);
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for partition in (0..partition_count()).filter(|p| walks(state, namespace, *p)) {
        keys.clear();
        walk_partition(namespace, scope, partition, |key| {
            keys.push(key.to_vec());
            true
        });
        keys.iter().for_each(|key| visit(key));
    }
}

/// The number of partitions, as a partition number.
fn partition_count() -> u16 {
    u16::try_from(PARTITION_COUNT).expect("the partition count fits a partition number")
}

/// KEYS pattern: every key matching the glob pattern, in no particular order. It visits every
/// key, so beyond a few thousand it runs on the long-request pool; it stops gathering keys
/// once its reply could not fit the connection's limit.
fn keys_matching(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let pattern = args.get(1);
    if session.should_offload(match_cost(
        key_count(&session.state, session.database),
        pattern,
    )) {
        return After::Offload;
    }
    let match_all = pattern == b"*";
    let glob = Glob::new(pattern);
    let (namespace, scope) = resp_scope(&session.state, session.database);
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut found_bytes = 0;
    for partition in (0..partition_count()).filter(|p| walks(&session.state, namespace, *p)) {
        walk_partition(namespace, scope, partition, |key| {
            if match_all || glob.matches(key) {
                // A bulk string's header and its CRLF: at most 16 bytes.
                found_bytes += key.len() + 16;
                found.push(key.to_vec());
            }
            reply.has_room_for(found_bytes)
        });
    }
    reply.array(found.len());
    found.iter().for_each(|key| reply.bulk(key));
    After::Continue
}

/// Keys in `database` now.
fn key_count(state: &ServerState, database: Database) -> usize {
    usize::try_from(keys::database_size(state, database)).unwrap_or(usize::MAX)
}

/// The cost of matching `keys` keys against `pattern`: one step per key, and one more per 64
/// bytes of pattern (matching is linear in the pattern and the key).
fn match_cost(keys: usize, pattern: &[u8]) -> usize {
    keys.saturating_mul(1 + pattern.len() / 64)
}

/// Options of SCAN.
#[derive(Debug)]
struct ScanRequest<'a> {
    /// The first partition to walk; `PARTITION_COUNT` or more: the iteration is over.
    cursor: u64,
    /// Keys to examine before answering (at least).
    count: u64,
    /// MATCH's glob pattern.
    pattern: Option<&'a [u8]>,
    /// TYPE's type name.
    type_name: Option<&'a [u8]>,
}

impl<'a> ScanRequest<'a> {
    /// Parses `cursor [MATCH pattern] [COUNT count] [TYPE type]`; an option may repeat (the
    /// last counts).
    fn parse(args: &'a Args) -> Result<ScanRequest<'a>, &'static str> {
        let cursor = parse_cursor(args.get(1)).ok_or("ERR invalid cursor")?;
        let mut request = ScanRequest {
            cursor,
            count: SCAN_COUNT_DEFAULT,
            pattern: None,
            type_name: None,
        };
        let mut position = 2;
        while position < args.len() {
            let word = args.get(position).to_ascii_uppercase();
            if position + 1 == args.len() {
                return Err(keys::SYNTAX_ERROR);
            }
            let value = args.get(position + 1);
            match word.as_slice() {
                b"COUNT" => match keys::parse_i64(value) {
                    Ok(count) if count >= 1 => request.count = count.unsigned_abs(),
                    Ok(_) => return Err(keys::SYNTAX_ERROR),
                    Err(()) => return Err(keys::NOT_AN_INTEGER),
                },
                b"MATCH" => request.pattern = (value != b"*").then_some(value),
                b"TYPE" => request.type_name = Some(value),
                _ => return Err(keys::SYNTAX_ERROR),
            }
            position += 2;
        }
        Ok(request)
    }
}

/// A cursor as Redis reads one (`strtoull`): an unsigned decimal; a negative one wraps around
/// to a huge cursor, here one past the last partition.
pub(super) fn parse_cursor(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    match text.strip_prefix('-') {
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            Some(u64::MAX)
        }
        Some(_) => None,
        None => text.parse().ok(),
    }
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]: the next cursor and the keys of
/// the partitions walked (see the module docs).
fn scan(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let request = match ScanRequest::parse(args) {
        Ok(request) => request,
        Err(message) => {
            reply.error(message);
            return After::Continue;
        }
    };
    let pattern = request.pattern.unwrap_or_default();
    let count = usize::try_from(request.count).unwrap_or(usize::MAX);
    if session.should_offload(match_cost(count, pattern)) {
        return After::Offload;
    }
    let (next, mut found) = scan_partitions(&session.state, session.database, &request);
    if let Some(type_name) = request.type_name {
        found.retain(|key| {
            type_of(&session.state, session.database, key)
                .is_some_and(|t| t.as_bytes().eq_ignore_ascii_case(type_name))
        });
    }
    reply.array(2);
    reply.bulk(next.to_string().as_bytes());
    reply.array(found.len());
    found.iter().for_each(|key| reply.bulk(key));
    After::Continue
}

/// Walks partitions from the request's cursor until COUNT keys were examined or none is left:
/// the next cursor (0 when done) and the keys that passed MATCH.
fn scan_partitions(
    state: &ServerState,
    database: Database,
    request: &ScanRequest<'_>,
) -> (u16, Vec<Vec<u8>>) {
    let (namespace, scope) = resp_scope(state, database);
    let glob = request.pattern.map(Glob::new);
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut examined: u64 = 0;
    let mut partition = u16::try_from(request.cursor).unwrap_or(u16::MAX);
    while partition < partition_count()
        && examined < request.count
        && walks(state, namespace, partition)
    {
        walk_partition(namespace, scope, partition, |key| {
            examined += 1;
            if glob.as_ref().is_none_or(|glob| glob.matches(key)) {
                found.push(key.to_vec());
            }
            true
        });
        partition += 1;
    }
    let next = if partition < partition_count() {
        partition
    } else {
        0
    };
    (next, found)
}

/// The type of the value at `key`, as TYPE names it; `None` if it is gone.
fn type_of(state: &ServerState, database: Database, key: &[u8]) -> Option<&'static str> {
    let target = Target::of(state, database, key);
    target
        .view(|current| current.map(|c| collection::type_name(&c)))
        .ok()
        .flatten()
}

/// RANDOMKEY: a key from the first partition holding any, starting at a random one (one of
/// at most `PIECE_ENTRIES` keys there, at random); nil when there are none.
fn randomkey(session: &mut Session, _args: &Args, reply: &mut Reply<'_>) -> After {
    let (namespace, scope) = resp_scope(&session.state, session.database);
    let random = random_u64();
    let start = (random % u64::from(partition_count())) as u16;
    let mut candidates: Vec<Vec<u8>> = Vec::new();
    for step in 0..partition_count() {
        let partition = (start + step) % partition_count();
        if !walks(&session.state, namespace, partition) {
            continue;
        }
        walk_partition(namespace, scope, partition, |key| {
            candidates.push(key.to_vec());
            candidates.len() < PIECE_ENTRIES
        });
        if !candidates.is_empty() {
            break;
        }
    }
    let chosen = (random >> 12) as usize % candidates.len().max(1);
    match candidates.get(chosen) {
        Some(key) => reply.bulk(key),
        None => reply.null(),
    }
    After::Continue
}

/// A random number, from the standard library's randomly keyed hasher.
fn random_u64() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now())
}

/// A random number below `bound` (not 0).
pub(super) fn random_below(bound: usize) -> usize {
    (random_u64() % bound as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_as_redis_reads_them() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"4095"), Some(4095));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"-"), None);
        assert_eq!(parse_cursor(b"abc"), None);
        assert_eq!(parse_cursor(b""), None);
    }

    #[test]
    fn random_numbers_differ() {
        let draws: std::collections::HashSet<u64> = (0..16).map(|_| random_u64()).collect();
        assert!(draws.len() > 1);
    }
}
