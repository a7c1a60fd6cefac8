//! Secondary-index commands, Osprey's own (Redis has none): create, drop and list indexes, and
//! read records in index order. The same indexes serve Aerospike queries; `docs/queries.md`
//! documents the commands.
//!
//! - `SINDEX.CREATE index KEY NUMERIC|STRING [SET set | ALLSETS] [NAMESPACE ns]`: an index of
//!   the records' user keys, so a set reads in key order from any key.
//! - `SINDEX.CREATE index BIN bin NUMERIC|STRING [DEFAULT|LIST|MAPKEYS|MAPVALUES]
//!   [SET set | ALLSETS] [NAMESPACE ns]`: an index of a bin's value (or of the items of the
//!   list or map in it).
//! - `SINDEX.DROP index [NAMESPACE ns]`: 1 if it existed, else 0.
//! - `SINDEX.LIST [NAMESPACE ns]`: one line per index, as `sindex-list` writes it.
//! - `SINDEX.QUERY index min max [LIMIT offset count] [WITHBINS] [NAMESPACE ns]`: the keys of
//!   the records whose indexed value lies in `[min, max]`, in (value, digest) order. Bounds are
//!   written as ZRANGEBYSCORE's for a numeric index (`5`, `(5`, `-inf`, `+inf`; integers) and
//!   as ZRANGEBYLEX's for a string index (`[a`, `(a`, `-`, `+`).
//!
//! Without `NAMESPACE`, a command works in the RESP namespace, and a new index covers the RESP
//! set (where Redis keys live) unless `SET` or `ALLSETS` says otherwise.
//!
//! Every record a query returns was re-checked against the index under its partition's lock:
//! the guarantees of `engine::sindex` hold (never a record that does not match now, never a
//! miss of one that matched for the whole query).

use std::ops::Bound;
use std::sync::Arc;

use engine::{
    IndexCollection, IndexDefinition, IndexKey, IndexKind, IndexSource, KeyRange, Namespace,
    ScannedRecord, SecondaryIndex,
};
use wire_resp::Args;

use super::commands::Command;
use super::reply::Reply;
use super::{After, Session};
use crate::sindex_info;

/// The index commands.
pub const COMMANDS: &[Command] = &[
    ("sindex.create", -4, create),
    ("sindex.drop", -2, drop),
    ("sindex.list", -1, list),
    ("sindex.query", -4, query),
];

/// Entries a query examines per piece of the index walk.
const PIECE_ENTRIES: usize = 256;

/// Redis's text for a bad option.
const SYNTAX: &str = "ERR syntax error";

/// SINDEX.CREATE: see the module documentation.
fn create(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let state = &session.state;
    let outcome = parse_create(session, args).and_then(|(namespace, definition)| {
        sindex_info::create_defined(state, &namespace, definition)
            .map_err(|failure| format!("ERR {}", failure.message))
    });
    match outcome {
        Ok(()) => reply.ok(),
        Err(message) => reply.error(&message),
    }
    After::Continue
}

fn parse_create(
    session: &Session,
    args: &Args,
) -> Result<(Arc<Namespace>, IndexDefinition), String> {
    let name = std::str::from_utf8(args.get(1)).map_err(|_| "ERR invalid index name")?;
    let mut position = 2;
    let source = match args.get(position).to_ascii_lowercase().as_slice() {
        b"key" => IndexSource::UserKey,
        b"bin" if args.len() > 4 => {
            position += 1;
            IndexSource::Bin(args.get(position).to_vec())
        }
        _ => return Err(SYNTAX.to_owned()),
    };
    position += 1;
    let kind = IndexKind::named(&args.get(position).to_ascii_lowercase())
        .ok_or("ERR index type must be NUMERIC or STRING")?;
    position += 1;
    let mut collection = IndexCollection::Default;
    let database_set = session.state.resp_databases.set_name(session.database);
    let mut set_name = Some(database_set.as_bytes().to_vec());
    let mut namespace_name = None;
    while position < args.len() {
        let word = args.get(position).to_ascii_lowercase();
        let value = (position + 1 < args.len()).then(|| args.get(position + 1));
        match (word.as_slice(), value) {
            (b"set", Some(set)) => set_name = Some(set.to_vec()),
            (b"namespace", Some(namespace)) => namespace_name = Some(namespace),
            (b"allsets", _) => {
                set_name = None;
                position += 1;
                continue;
            }
            (other, _) => match IndexCollection::named(other) {
                Some(named) if matches!(source, IndexSource::Bin(_)) => {
                    collection = named;
                    position += 1;
                    continue;
                }
                _ => return Err(SYNTAX.to_owned()),
            },
        }
        position += 2;
    }
    let namespace = namespace_named(session, namespace_name)?;
    let definition = IndexDefinition {
        name: name.to_owned(),
        set_name: set_name.filter(|set| !set.is_empty()),
        source,
        kind,
        collection,
    };
    Ok((namespace, definition))
}

/// SINDEX.DROP index [NAMESPACE ns]
fn drop(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    match trailing_namespace(session, args, 2) {
        Ok(namespace) => {
            let name = String::from_utf8_lossy(args.get(1));
            let dropped = sindex_info::drop_named(&session.state, &namespace, &name);
            reply.integer(i64::from(dropped));
        }
        Err(message) => reply.error(&message),
    }
    After::Continue
}

/// SINDEX.LIST [NAMESPACE ns]
fn list(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    match trailing_namespace(session, args, 1) {
        Ok(namespace) => {
            let indexes = namespace.indexes();
            reply.array(indexes.len());
            for index in indexes {
                let mut line = String::new();
                sindex_info::describe(namespace.name(), &index, &mut line);
                reply.bulk(line.as_bytes());
            }
        }
        Err(message) => reply.error(&message),
    }
    After::Continue
}

/// What one SINDEX.QUERY asks for.
struct QueryRequest {
    namespace: Arc<Namespace>,
    index: Arc<SecondaryIndex>,
    range: KeyRange,
    offset: usize,
    /// `None`: every record in range.
    count: Option<usize>,
    with_bins: bool,
}

/// SINDEX.QUERY: see the module documentation.
fn query(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let request = match parse_query(session, args) {
        Ok(request) => request,
        Err(message) => {
            reply.error(&message);
            return After::Continue;
        }
    };
    // Room for a page of short keys, so that a usual reply is not reallocated as it grows.
    let mut found = Vec::with_capacity(request.count.unwrap_or(64).min(64) * 32);
    let mut page = Page {
        offset: request.offset,
        skipped: 0,
        wanted: request.count.unwrap_or(usize::MAX),
        taken: 0,
    };
    let mut after = None;
    let mut body = Reply::new(&mut found, if reply.is_resp3() { 3 } else { 2 });
    // Keys alone from a user-key index come from its entries (no record lookup).
    let keys_alone =
        !request.with_bins && request.index.definition().source == IndexSource::UserKey;
    let (namespace, index, range) = (&request.namespace, &request.index, &request.range);
    let mut examined = 0usize;
    while page.taken < page.wanted {
        // A query that goes on past what a worker may spend runs again, whole, on the pool
        // (nothing is in the reply yet).
        if session.should_offload(examined) {
            return After::Offload;
        }
        let piece = (page.wanted - page.taken).saturating_add(page.offset - page.skipped);
        let examine = piece.clamp(1, PIECE_ENTRIES);
        examined += examine;
        let end = if keys_alone {
            namespace.query_ordered_keys(index, range, after.as_ref(), examine, |key, _| {
                page.offer(&mut body, |body| reply_index_key(body, key))
            })
        } else {
            namespace.query_ordered_piece(index, range, after.as_ref(), examine, |record, _| {
                page.offer(&mut body, |body| {
                    reply_record(body, record, request.with_bins);
                })
            })
        };
        after = end.last;
        // The answer is gathered before its count is known: it stops where the reply would
        // pass the connection's limits.
        if end.exhausted || !reply.has_room_for(body.buffer_len()) {
            break;
        }
    }
    std::mem::drop(body);
    if reply.overflowed() {
        return After::Continue;
    }
    request.index.count_query();
    let records = page.taken;
    reply.array(records);
    reply.encoded(&found);
    After::Continue
}

/// Where a SINDEX.QUERY's reply stands: entries skipped for its LIMIT offset, records taken.
struct Page {
    offset: usize,
    skipped: usize,
    wanted: usize,
    taken: usize,
}

impl Page {
    /// Skips the entry offered (true), takes it with `write` (true), or, when the page is
    /// full, stops the walk before it (false).
    fn offer(&mut self, body: &mut Reply<'_>, write: impl FnOnce(&mut Reply<'_>)) -> bool {
        if self.skipped < self.offset {
            self.skipped += 1;
            return true;
        }
        if self.taken == self.wanted {
            return false;
        }
        write(body);
        self.taken += 1;
        true
    }
}

fn parse_query(session: &Session, args: &Args) -> Result<QueryRequest, String> {
    let (mut offset, mut count, mut with_bins, mut namespace_name) = (0, None, false, None);
    let mut position = 4;
    while position < args.len() {
        let word = args.get(position).to_ascii_lowercase();
        match word.as_slice() {
            b"limit" if position + 2 < args.len() => {
                let number = |at: usize| super::keys::parse_i64(args.get(at));
                let (Ok(first), Ok(size)) = (number(position + 1), number(position + 2)) else {
                    return Err(super::keys::NOT_AN_INTEGER.to_owned());
                };
                // As ZRANGEBYSCORE: a negative offset returns nothing, a negative count all.
                offset = usize::try_from(first).unwrap_or(usize::MAX);
                count = usize::try_from(size).ok();
                position += 3;
            }
            b"withbins" => {
                with_bins = true;
                position += 1;
            }
            b"namespace" if position + 1 < args.len() => {
                namespace_name = Some(args.get(position + 1));
                position += 2;
            }
            _ => return Err(SYNTAX.to_owned()),
        }
    }
    let namespace = namespace_named(session, namespace_name)?;
    let name = String::from_utf8_lossy(args.get(1));
    let index = namespace
        .index_named(&name)
        .ok_or_else(|| format!("ERR no such index '{name}'"))?;
    if !index.is_ready() {
        return Err(format!("BUSY index '{name}' is still building"));
    }
    let kind = index.definition().kind;
    let begin = parse_bound(kind, args.get(2), Side::Min)?;
    let end = parse_bound(kind, args.get(3), Side::Max)?;
    let (range, count) = match begin.zip(end) {
        Some((begin, end)) => {
            let range = KeyRange { begin, end };
            let nothing = range.is_empty() || offset == usize::MAX;
            (range, if nothing { Some(0) } else { count })
        }
        None => (KeyRange::everything(), Some(0)),
    };
    Ok(QueryRequest {
        namespace,
        index,
        range,
        offset,
        count,
        with_bins,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Min,
    Max,
}

/// One bound, written as ZRANGEBYSCORE's (numeric index) or ZRANGEBYLEX's (string index);
/// `None` when it selects nothing (`+inf` or `+` as the min, `-inf` or `-` as the max).
fn parse_bound(
    kind: IndexKind,
    bytes: &[u8],
    side: Side,
) -> Result<Option<Bound<IndexKey>>, String> {
    if kind == IndexKind::Geo2dSphere {
        return Err("ERR a geo2dsphere index has no ranges".to_owned());
    }
    let named = |name: &[u8]| bytes.eq_ignore_ascii_case(name);
    let infinity = match kind {
        IndexKind::Numeric if named(b"-inf") => Some(Side::Min),
        IndexKind::Numeric if named(b"+inf") || named(b"inf") => Some(Side::Max),
        IndexKind::String | IndexKind::Blob if bytes == b"-" => Some(Side::Min),
        IndexKind::String | IndexKind::Blob if bytes == b"+" => Some(Side::Max),
        _ => None,
    };
    if let Some(infinite_side) = infinity {
        return Ok((infinite_side == side).then_some(Bound::Unbounded));
    }
    let (exclusive, text) = match (kind, bytes.split_first()) {
        (_, Some((b'(', rest))) => (true, rest),
        (IndexKind::String | IndexKind::Blob, Some((b'[', rest))) => (false, rest),
        (IndexKind::String | IndexKind::Blob, _) => {
            return Err("ERR min or max not valid string range item".to_owned());
        }
        (IndexKind::Numeric | IndexKind::Geo2dSphere, _) => (false, bytes),
    };
    let key = match kind {
        IndexKind::Numeric | IndexKind::Geo2dSphere => IndexKey::Int(
            super::keys::parse_i64(text)
                .map_err(|()| "ERR min or max is not an integer".to_owned())?,
        ),
        IndexKind::String | IndexKind::Blob => IndexKey::Str(text.into()),
    };
    Ok(Some(if exclusive {
        Bound::Excluded(key)
    } else {
        Bound::Included(key)
    }))
}

/// The namespace of a command whose `fixed` first arguments are followed by nothing or by
/// `NAMESPACE ns`.
fn trailing_namespace(
    session: &Session,
    args: &Args,
    fixed: usize,
) -> Result<Arc<Namespace>, String> {
    let name = match args.len() - fixed {
        0 => None,
        2 if args.get(fixed).eq_ignore_ascii_case(b"namespace") => Some(args.get(fixed + 1)),
        _ => return Err(SYNTAX.to_owned()),
    };
    namespace_named(session, name)
}

fn namespace_named(session: &Session, name: Option<&[u8]>) -> Result<Arc<Namespace>, String> {
    let name = name.unwrap_or(session.state.config.resp_namespace().as_bytes());
    session
        .state
        .namespace_arc(name)
        .cloned()
        .ok_or_else(|| format!("ERR no such namespace '{}'", String::from_utf8_lossy(name)))
}

/// One record of a query's reply: its key (nil when it was stored without one), or with
/// `WITHBINS` a pair of the key and a map of its bins.
fn reply_record(reply: &mut Reply<'_>, record: &ScannedRecord<'_>, with_bins: bool) {
    if with_bins {
        reply.array(2);
    }
    match record.user_key() {
        Some((1, bytes)) => match <[u8; 8]>::try_from(bytes) {
            Ok(be) => reply.bulk(i64::from_be_bytes(be).to_string().as_bytes()),
            Err(_) => reply.null(),
        },
        Some((_, bytes)) => reply.bulk(bytes),
        None => reply.null(),
    }
    if !with_bins {
        return;
    }
    let bins = record.bins();
    let count = bins.iter().count();
    reply.map(count);
    for bin in bins.iter() {
        reply.bulk(bin.name);
        reply_bin_value(reply, bin.particle_type, bin.value);
    }
}

/// A user key as SINDEX.QUERY answers it without bins (as [`reply_record`] does from the
/// record): an integer in decimal, a string or blob as its bytes.
fn reply_index_key(reply: &mut Reply<'_>, key: &IndexKey) {
    match key {
        IndexKey::Int(value) => reply.bulk(value.to_string().as_bytes()),
        IndexKey::Str(bytes) => reply.bulk(bytes),
    }
}

/// A bin's value: integers as integers, doubles as doubles, strings and blobs as bulk
/// strings, booleans as 0 or 1, anything else (lists, maps, GeoJSON) as its msgpack bytes.
fn reply_bin_value(reply: &mut Reply<'_>, particle_type: u8, value: &[u8]) {
    match (particle_type, value.len()) {
        (1, 8) => {
            let be = <[u8; 8]>::try_from(value).unwrap_or_default();
            reply.integer(i64::from_be_bytes(be));
        }
        (2, 8) => {
            let be = <[u8; 8]>::try_from(value).unwrap_or_default();
            reply.double(f64::from_be_bytes(be));
        }
        (17, 1) => reply.integer(i64::from(value[0] != 0)),
        _ => reply.bulk(value),
    }
}
