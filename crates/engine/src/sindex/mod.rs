//! Secondary indexes: for a bin (of one set, or of the whole namespace), the records ordered by
//! that bin's value, for equality and range queries; or the records ordered by their user key
//! (a user-key index), so that a set can be read in key order from any key.
//!
//! Each partition keeps, per index, an ordered set of (value, digest) entries beside its
//! records, under the same lock; each index also keeps all of them in one namespace-wide
//! ordered set (its own lock), for queries in index order. A write changes the record and its
//! entries in one critical section: it computes the entries of the version it replaces and of
//! the new one, then, with the partition still locked, inserts the new ones and removes the
//! stale ones, in both sets. A query walks a partition's entries under the partition's read
//! lock, or the namespace-wide set in pieces, and re-checks every candidate against the record
//! it names, under that record's partition lock, before returning it: against the filter, as
//! SLIK does, so that a record a write moved within the filter since its entry was read still
//! comes back (with its current value). So index and records never disagree where anyone can
//! see (SLIK's guarantee, with the record's lock doing the ordering), and a query:
//! - never returns a record whose current value does not satisfy the filter;
//! - never misses a record whose value satisfied the filter for the whole query, except one
//!   that moved between two pieces of a walk from the part not yet read to the part read
//!   (`docs/queries.md`, "Guarantees").
//!
//! A query for keys alone from a user-key index skips the re-check where it can: a record's
//! user key never changes, so each entry of such an index keeps a [`Stamp`] of its record
//! (void time, set, last update), changed with the record under its partition lock; an entry
//! whose stamp shows its record visible answers for it ([`Namespace::query_ordered_keys`]),
//! read in place under the order's lock rather than copied out first.
//!
//! Invariants:
//! - For every ready index and partition, the entries are exactly the (value, digest) pairs of
//!   the partition's records (visible or not yet reclaimed) whose indexed bin (or stored user
//!   key) has the index's type, and whose set matches; while an index builds, the entries of partitions the build
//!   passed satisfy this, and others hold a subset of them.
//! - The namespace-wide set of a ready index holds exactly the union of its partitions' entries;
//!   a user-key index's entries there carry their records' stamps (see [`Stamp`]).
//! - An index id is never reused, so entries of a dropped index can never be taken for another.
//! - Records holding a native (Redis) value are not in bin indexes (their bins are Redis
//!   structures), but are in user-key indexes: Redis keys are stored string keys.
//! - A collection index (list elements, map keys or map values) has one entry per distinct
//!   item of the index's type; a query returns such a record once, as Aerospike does: at the
//!   first of its entries (in the walk's (value, digest) order) that matches the query
//!   ([`SecondaryIndex::first_match`]), which needs no memory of what the walk returned, so it
//!   holds across pieces, threads and pages.

mod derived;

pub use derived::canonical;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use model::{Digest, PARTITION_COUNT, PartitionId, VoidTime};
use smallvec::SmallVec;

use crate::namespace::Namespace;
use crate::record::{Record, SetId};
use crate::scan::{ScanScope, ScannedRecord};

/// Wire particle types an index can hold.
const PARTICLE_INTEGER: u8 = 1;
const PARTICLE_STRING: u8 = 3;
const PARTICLE_BLOB: u8 = 4;
const PARTICLE_MAP: u8 = 19;
const PARTICLE_GEOJSON: u8 = 23;
const PARTICLE_LIST: u8 = 20;
/// Most indexes a namespace may have (Aerospike's limit).
pub const INDEXES_MAX: usize = 256;
/// Longest index name, in bytes (Aerospike's limit is 63).
pub const INDEX_NAME_MAX_BYTES: usize = 63;
/// Estimated bytes one index entry costs in a B-tree (value, digest and the node's share).
pub const INDEX_ENTRY_SIZE_BYTES: u64 = 56;

/// What an index orders by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexKind {
    /// Integer bins.
    Numeric,
    /// String bins (byte order).
    String,
    /// Blob bins (byte order).
    Blob,
    /// GeoJSON bins (`GEO2DSPHERE`): each value's S2 cells (a point's leaf cell, a region's
    /// covering, as its particle stores them) are its keys, ordered as `i64`.
    Geo2dSphere,
}

impl IndexKind {
    /// The name `sindex-list` shows.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Numeric => "numeric",
            IndexKind::String => "string",
            IndexKind::Blob => "blob",
            IndexKind::Geo2dSphere => "geo2dsphere",
        }
    }

    /// The kind an Aerospike `sindex-create` `type` (any case) names: numeric (or integer),
    /// string, blob or geo2dsphere.
    pub fn named_with_geo(name: &[u8]) -> Option<IndexKind> {
        if name.eq_ignore_ascii_case(b"geo2dsphere") {
            Some(IndexKind::Geo2dSphere)
        } else if name.eq_ignore_ascii_case(b"blob") {
            Some(IndexKind::Blob)
        } else {
            IndexKind::named(name)
        }
    }

    /// The kind a `type` (any case) names: numeric (or integer, from 8.1) or string.
    pub fn named(name: &[u8]) -> Option<IndexKind> {
        if name.eq_ignore_ascii_case(b"numeric") || name.eq_ignore_ascii_case(b"integer") {
            Some(IndexKind::Numeric)
        } else if name.eq_ignore_ascii_case(b"string") {
            Some(IndexKind::String)
        } else {
            None
        }
    }

    fn particle_type(self) -> u8 {
        match self {
            IndexKind::Numeric => PARTICLE_INTEGER,
            IndexKind::String => PARTICLE_STRING,
            IndexKind::Blob => PARTICLE_BLOB,
            IndexKind::Geo2dSphere => PARTICLE_GEOJSON,
        }
    }
}

/// What of a bin an index holds: its value, or the items of the list or map it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexCollection {
    /// The bin's value itself.
    Default,
    /// Each element of a list bin.
    List,
    /// Each key of a map bin.
    MapKeys,
    /// Each value of a map bin.
    MapValues,
}

impl IndexCollection {
    /// The name `sindex-list` shows and `sindex-create` takes (as `indextype`).
    pub fn name(self) -> &'static str {
        match self {
            IndexCollection::Default => "default",
            IndexCollection::List => "list",
            IndexCollection::MapKeys => "mapkeys",
            IndexCollection::MapValues => "mapvalues",
        }
    }

    /// The collection an `indextype` names (any case).
    pub fn named(name: &[u8]) -> Option<IndexCollection> {
        [
            IndexCollection::Default,
            IndexCollection::List,
            IndexCollection::MapKeys,
            IndexCollection::MapValues,
        ]
        .into_iter()
        .find(|collection| name.eq_ignore_ascii_case(collection.name().as_bytes()))
    }

    /// The collection a query's INDEX_TYPE byte names (0 to 3).
    pub fn from_wire(byte: u8) -> Option<IndexCollection> {
        match byte {
            0 => Some(IndexCollection::Default),
            1 => Some(IndexCollection::List),
            2 => Some(IndexCollection::MapKeys),
            3 => Some(IndexCollection::MapValues),
            _ => None,
        }
    }

    fn particle_type(self) -> Option<u8> {
        match self {
            IndexCollection::Default => None,
            IndexCollection::List => Some(PARTICLE_LIST),
            IndexCollection::MapKeys | IndexCollection::MapValues => Some(PARTICLE_MAP),
        }
    }
}

/// A string key's bytes, inline up to 16 of them: the index's B-tree then compares most keys
/// (user keys, names, codes) in its own nodes, without a pointer to chase to another
/// allocation for each comparison and copy.
pub type KeyBytes = SmallVec<[u8; 16]>;

/// An indexed value. Within one index every key has the index's kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IndexKey {
    /// An integer bin's value.
    Int(i64),
    /// A string bin's bytes.
    Str(KeyBytes),
}

impl IndexKey {
    /// The key of a bin holding `value` (wire encoding) of `particle_type`, for an index of
    /// `kind`; `None` when the bin has another type.
    fn of_bin(kind: IndexKind, particle_type: u8, value: &[u8]) -> Option<IndexKey> {
        if particle_type != kind.particle_type() {
            return None;
        }
        match kind {
            IndexKind::Numeric => <[u8; 8]>::try_from(value)
                .ok()
                .map(|bytes| IndexKey::Int(i64::from_be_bytes(bytes))),
            IndexKind::String | IndexKind::Blob => Some(IndexKey::Str(value.into())),
            // A geo value has several keys (see `geo_keys`).
            IndexKind::Geo2dSphere => None,
        }
    }

    /// The key of one item of a list or map, for an index of `kind`.
    fn of_item(kind: IndexKind, item: &[u8]) -> Option<IndexKey> {
        match kind {
            IndexKind::Numeric => crate::msgpack::item_int(item).map(IndexKey::Int),
            IndexKind::String => crate::msgpack::item_string(item).map(|s| IndexKey::Str(s.into())),
            IndexKind::Blob => match crate::cdt::value::decode(item) {
                Ok(crate::cdt::value::Value::Bytes { kind, data }) if kind == PARTICLE_BLOB => {
                    Some(IndexKey::Str(data.as_slice().into()))
                }
                _ => None,
            },
            IndexKind::Geo2dSphere => None,
        }
    }
}

/// The values a query wants, between two bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// Lower bound.
    pub begin: Bound<IndexKey>,
    /// Upper bound.
    pub end: Bound<IndexKey>,
}

impl KeyRange {
    /// The values `begin..=end`.
    pub fn inclusive(begin: IndexKey, end: IndexKey) -> KeyRange {
        KeyRange {
            begin: Bound::Included(begin),
            end: Bound::Included(end),
        }
    }

    /// Every value.
    pub fn everything() -> KeyRange {
        KeyRange {
            begin: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// Whether `key` lies in it.
    pub fn contains(&self, key: &IndexKey) -> bool {
        std::ops::RangeBounds::contains(&(self.begin.as_ref(), self.end.as_ref()), &key)
    }

    /// Whether no value lies in it (so a query can answer at once).
    pub fn is_empty(&self) -> bool {
        match (&self.begin, &self.end) {
            (Bound::Included(b), Bound::Included(e)) => b > e,
            (Bound::Included(b) | Bound::Excluded(b), Bound::Excluded(e))
            | (Bound::Excluded(b), Bound::Included(e)) => b >= e,
            _ => false,
        }
    }
}

/// The key of a geo index for an S2 cell id: its bits as `i64` (see [`IndexKind::Geo2dSphere`]).
fn cell_key(cell: u64) -> IndexKey {
    IndexKey::Int(cell as i64)
}

/// What a query wants from its index: the values in one range, or (a geo index query) the
/// records whose GeoJSON matches a geometry, found through the cell ranges that hold every
/// candidate and then checked exactly ([`crate::geo::compare`]).
#[derive(Clone, Debug)]
pub struct QueryFilter {
    /// Sorted, disjoint.
    ranges: Vec<KeyRange>,
    geo: Option<GeoFilter>,
}

/// A geo query's geometry, with its text (what equality compares).
#[derive(Clone, Debug)]
struct GeoFilter {
    json: Vec<u8>,
    geometry: crate::geo::Geometry,
}

impl PartialEq for QueryFilter {
    fn eq(&self, other: &QueryFilter) -> bool {
        self.ranges == other.ranges
            && self.geo.as_ref().map(|g| &g.json) == other.geo.as_ref().map(|g| &g.json)
    }
}

impl Eq for QueryFilter {}

impl From<KeyRange> for QueryFilter {
    fn from(range: KeyRange) -> QueryFilter {
        QueryFilter {
            ranges: vec![range],
            geo: None,
        }
    }
}

impl QueryFilter {
    /// A geo index query for the GeoJSON text `json` (a point: the regions containing it; a
    /// polygon, multipolygon or `AeroCircle`: the points within it).
    ///
    /// # Errors
    /// PARAMETER when `json` is not valid GeoJSON.
    pub fn geo(json: &[u8]) -> Result<QueryFilter, model::ResultCode> {
        let geometry = crate::geo::parse(json)?;
        let ranges = crate::geo::query_cell_ranges(&geometry)
            .into_iter()
            .map(|(begin, end)| KeyRange::inclusive(cell_key(begin), cell_key(end)))
            .collect::<Vec<_>>();
        let mut ranges = ranges;
        ranges.sort_by(|a, b| match (&a.begin, &b.begin) {
            (Bound::Included(x), Bound::Included(y)) => x.cmp(y),
            _ => std::cmp::Ordering::Equal,
        });
        Ok(QueryFilter {
            ranges,
            geo: Some(GeoFilter {
                json: json.to_vec(),
                geometry,
            }),
        })
    }

    /// Its one range, unless it is a geo query.
    pub fn single_range(&self) -> Option<&KeyRange> {
        match (&self.geo, self.ranges.as_slice()) {
            (None, [range]) => Some(range),
            _ => None,
        }
    }

    /// Whether it is a geo query.
    pub fn is_geo(&self) -> bool {
        self.geo.is_some()
    }
}

/// A borrowed [`QueryFilter`], or a single [`KeyRange`]: what the query functions take.
#[derive(Clone, Copy, Debug)]
pub struct FilterRef<'a> {
    ranges: &'a [KeyRange],
    geo: Option<&'a crate::geo::Geometry>,
}

impl<'a> From<&'a KeyRange> for FilterRef<'a> {
    fn from(range: &'a KeyRange) -> FilterRef<'a> {
        FilterRef {
            ranges: std::slice::from_ref(range),
            geo: None,
        }
    }
}

impl<'a> From<&'a QueryFilter> for FilterRef<'a> {
    fn from(filter: &'a QueryFilter) -> FilterRef<'a> {
        FilterRef {
            ranges: &filter.ranges,
            geo: filter.geo.as_ref().map(|g| &g.geometry),
        }
    }
}

/// What an index orders its records by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexSource {
    /// The value of the bin of this name (or the items of the collection in it).
    Bin(Vec<u8>),
    /// The element a CDT context reaches inside the bin's list or map (or the items of the
    /// collection there).
    BinContext {
        /// The bin.
        bin: Vec<u8>,
        /// The context: a packed msgpack array `[type, value, ...]`, canonical ([`canonical`]).
        context: Vec<u8>,
    },
    /// The value of an expression over the record (packed, canonical).
    Expression(Vec<u8>),
    /// The record's stored user key: a set read in key order (records stored without their
    /// key are not in it).
    UserKey,
}

impl IndexSource {
    /// The bin it reads, if any.
    pub fn bin(&self) -> Option<&[u8]> {
        match self {
            IndexSource::Bin(bin) | IndexSource::BinContext { bin, .. } => Some(bin),
            IndexSource::Expression(_) | IndexSource::UserKey => None,
        }
    }

    /// Its context (packed), if it has one.
    pub fn context(&self) -> Option<&[u8]> {
        match self {
            IndexSource::BinContext { context, .. } => Some(context),
            _ => None,
        }
    }

    /// Its expression (packed), if it is one.
    pub fn expression(&self) -> Option<&[u8]> {
        match self {
            IndexSource::Expression(packed) => Some(packed),
            _ => None,
        }
    }
}

/// What an index covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDefinition {
    /// Its name, unique in the namespace.
    pub name: String,
    /// The set whose records it covers; `None` = every record of the namespace.
    pub set_name: Option<Vec<u8>>,
    /// What it orders by: a bin, or the user key.
    pub source: IndexSource,
    /// The value type it holds.
    pub kind: IndexKind,
    /// Whether it holds the bin's value or the items of the collection in it.
    pub collection: IndexCollection,
}

/// One secondary index: its definition, build progress, counters and namespace-wide order. Its
/// per-partition entries live in the partitions.
#[derive(Debug)]
pub struct SecondaryIndex {
    id: u32,
    definition: IndexDefinition,
    /// How its value is computed, when it is not a bin's or the user key's.
    derivation: Option<derived::Derivation>,
    /// Partitions the build has passed.
    built_partitions: AtomicUsize,
    ready: AtomicBool,
    dropped: AtomicBool,
    queries: AtomicU64,
    /// Index entries queries looked up (each re-checked against its record, or answered from
    /// a user-key entry's stamp).
    lookups: AtomicU64,
    /// Records a query returned through it.
    records_returned: AtomicU64,
    /// Every partition's entries together, in (value, digest) order: queries in index order
    /// across the namespace read it. Changed under the partition lock of the entry's record,
    /// with the partition's own entries.
    ordered: parking_lot::RwLock<Order>,
}

impl SecondaryIndex {
    /// Its definition.
    pub fn definition(&self) -> &IndexDefinition {
        &self.definition
    }

    /// Whether queries may use it (its build finished).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Build progress in percent.
    pub fn load_pct(&self) -> u8 {
        if self.is_ready() {
            return 100;
        }
        let done = self.built_partitions.load(Ordering::Relaxed);
        u8::try_from(done * 100 / PARTITION_COUNT)
            .unwrap_or(100)
            .min(99)
    }

    /// Queries started on it.
    pub fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }

    /// Entries its queries looked up, returned or not: candidates re-checked against their
    /// records, or (keys-only queries of a user-key index) answered from their stamps.
    pub fn lookups(&self) -> u64 {
        self.lookups.load(Ordering::Relaxed)
    }

    /// Records its queries returned.
    pub fn records_returned(&self) -> u64 {
        self.records_returned.load(Ordering::Relaxed)
    }

    /// Entries in its namespace-wide order (equal to the sum over partitions).
    pub fn ordered_entry_count(&self) -> u64 {
        self.ordered.read().len() as u64
    }

    /// Counts a query starting.
    pub fn count_query(&self) {
        self.queries.fetch_add(1, Ordering::Relaxed);
    }

    /// The keys `record` has in this index, sorted, each once: none, one, or (for a
    /// collection index) one per distinct matching item.
    fn keys_of(&self, namespace: &Namespace, digest: &Digest, record: &Record) -> Vec<IndexKey> {
        if !self.covers_set_of(namespace, record) {
            return Vec::new();
        }
        if matches!(self.definition.source, IndexSource::UserKey) {
            return self.user_key_of(record).into_iter().collect();
        }
        if record.native().is_some() {
            return Vec::new();
        }
        if let Some(value) = self.derived_value(namespace, digest, record) {
            return derived::keys_of_value(
                self.definition.kind,
                self.definition.collection,
                &value,
            );
        }
        let IndexSource::Bin(bin_name) = &self.definition.source else {
            return Vec::new();
        };
        let bins = record.bins();
        let Some(bin) = bins.iter().find(|bin| bin.name == *bin_name) else {
            return Vec::new();
        };
        let kind = self.definition.kind;
        let collection = self.definition.collection;
        if kind == IndexKind::Geo2dSphere {
            let mut keys: Vec<IndexKey> = geo_values(collection, bin.particle_type, bin.value)
                .into_iter()
                .flat_map(|value| value.cells)
                .map(cell_key)
                .collect();
            keys.sort_unstable();
            keys.dedup();
            return keys;
        }
        let Some(container_type) = collection.particle_type() else {
            return IndexKey::of_bin(kind, bin.particle_type, bin.value)
                .into_iter()
                .collect();
        };
        if bin.particle_type != container_type {
            return Vec::new();
        }
        let mut keys: Vec<IndexKey> = chosen_items(collection, bin.value)
            .into_iter()
            .filter_map(|item| IndexKey::of_item(kind, item))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Whether `record` has `key` in this geo index through a GeoJSON value that matches
    /// `query` ([`crate::geo::compare`]): a query's exact check of a candidate.
    fn geo_holds(
        &self,
        namespace: &Namespace,
        digest: &Digest,
        record: &Record,
        key: &IndexKey,
        query: &crate::geo::Geometry,
    ) -> bool {
        let IndexKey::Int(cell) = *key else {
            return false;
        };
        if self.definition.kind != IndexKind::Geo2dSphere
            || record.native().is_some()
            || !self.covers_set_of(namespace, record)
        {
            return false;
        }
        if let Some(value) = self.derived_value(namespace, digest, record) {
            return derived::geo_holds(self.definition.collection, &value, cell as u64, query);
        }
        let IndexSource::Bin(bin_name) = &self.definition.source else {
            return false;
        };
        let bins = record.bins();
        let Some(bin) = bins.iter().find(|bin| bin.name == *bin_name) else {
            return false;
        };
        geo_values(self.definition.collection, bin.particle_type, bin.value)
            .into_iter()
            .any(|value| {
                value.cells.contains(&(cell as u64))
                    && value
                        .geometry()
                        .is_some_and(|geometry| crate::geo::compare(&geometry, query))
            })
    }
}

/// The items of a list or map bin's value an index of `collection` holds: every element of a
/// list, the keys or the values of a map.
fn chosen_items(collection: IndexCollection, value: &[u8]) -> Vec<&[u8]> {
    let items = crate::msgpack::container_items(value).unwrap_or_default();
    items
        .into_iter()
        .enumerate()
        .filter(|(position, _)| match collection {
            IndexCollection::MapKeys => position % 2 == 0,
            IndexCollection::MapValues => position % 2 == 1,
            IndexCollection::List | IndexCollection::Default => true,
        })
        .map(|(_, item)| item)
        .collect()
}

/// One GeoJSON value a geo index holds, with its cells.
struct GeoValue<'a> {
    cells: Vec<u64>,
    /// The stored particle (a bin) or the JSON text (an item of a list or map).
    bytes: &'a [u8],
}

impl GeoValue<'_> {
    fn geometry(&self) -> Option<crate::geo::Geometry> {
        crate::geo::geometry_of_value(self.bytes).ok()
    }
}

/// The GeoJSON values of a bin (of `particle_type`, holding `value`) an index of `collection`
/// holds: the bin's own GeoJSON particle, or the GeoJSON items of the list or map it holds
/// (a msgpack str or bin whose first byte is the GEOJSON particle type, then the JSON text).
fn geo_values(collection: IndexCollection, particle_type: u8, value: &[u8]) -> Vec<GeoValue<'_>> {
    let Some(container_type) = collection.particle_type() else {
        if particle_type != PARTICLE_GEOJSON {
            return Vec::new();
        }
        let cells = crate::geo::cells_of_particle(value).unwrap_or_default();
        return vec![GeoValue {
            cells,
            bytes: value,
        }];
    };
    if particle_type != container_type {
        return Vec::new();
    }
    chosen_items(collection, value)
        .into_iter()
        .filter_map(geo_item_json)
        .filter_map(|json| {
            let (_, cells) = crate::geo::cells_of_json(json)?;
            Some(GeoValue { cells, bytes: json })
        })
        .collect()
}

/// The JSON text of a GeoJSON item of a list or map: a msgpack str or bin whose payload starts
/// with the GEOJSON particle type.
fn geo_item_json(item: &[u8]) -> Option<&[u8]> {
    let (&marker, rest) = item.split_first()?;
    let (len_bytes, rest) = match marker {
        0xa0..=0xbf => (&[marker & 0x1f][..], rest),
        0xd9 | 0xc4 => rest.split_at_checked(1)?,
        0xda | 0xc5 => rest.split_at_checked(2)?,
        0xdb | 0xc6 => rest.split_at_checked(4)?,
        _ => return None,
    };
    let len = len_bytes
        .iter()
        .fold(0usize, |len, &byte| len << 8 | usize::from(byte));
    match rest.get(..len)? {
        [PARTICLE_GEOJSON, json @ ..] => Some(json),
        _ => None,
    }
}

impl SecondaryIndex {
    /// Whether `record` has `key` in this index: [`SecondaryIndex::keys_of`] contains it,
    /// decided without building that list where one value is all there is to compare (a query
    /// re-checks every candidate this way).
    fn holds(
        &self,
        namespace: &Namespace,
        digest: &Digest,
        record: &Record,
        key: &IndexKey,
    ) -> bool {
        let single = self.definition.collection == IndexCollection::Default
            && self.definition.kind != IndexKind::Geo2dSphere
            && self.derivation.is_none()
            && (matches!(self.definition.source, IndexSource::UserKey)
                || record.native().is_none());
        if !single {
            return self
                .keys_of(namespace, digest, record)
                .binary_search(key)
                .is_ok();
        }
        if !self.covers_set_of(namespace, record) {
            return false;
        }
        let (particle_type, bytes) = match &self.definition.source {
            IndexSource::UserKey => match record.user_key() {
                Some((PARTICLE_BLOB, bytes)) => (PARTICLE_STRING, bytes),
                Some(found) => found,
                None => return false,
            },
            IndexSource::Bin(bin_name) => {
                let bins = record.bins();
                let Some(bin) = bins.iter().find(|bin| bin.name == *bin_name) else {
                    return false;
                };
                return same_value(self.definition.kind, bin.particle_type, bin.value, key);
            }
            // Derived indexes took the general path above.
            IndexSource::BinContext { .. } | IndexSource::Expression(_) => return false,
        };
        same_value(self.definition.kind, particle_type, bytes, key)
    }

    /// The value a derived index (context or expression) computes for `record`; `None` for
    /// other indexes, and when the record yields none.
    fn derived_value(
        &self,
        namespace: &Namespace,
        digest: &Digest,
        record: &Record,
    ) -> Option<crate::cdt::value::Value> {
        self.derivation.as_ref()?.value(namespace, digest, record)
    }

    /// Whether `key` is the first of `record`'s values in this index, in index order, that
    /// matches `filter` (lies in one of its ranges and, for a geo query, belongs to a GeoJSON
    /// value that matches its geometry): where a query returns a record the index holds under
    /// several matching values.
    fn first_match(
        &self,
        namespace: &Namespace,
        digest: &Digest,
        record: &Record,
        key: &IndexKey,
        filter: &FilterRef<'_>,
    ) -> bool {
        let first = self
            .keys_of(namespace, digest, record)
            .into_iter()
            .filter(|candidate| filter.ranges.iter().any(|range| range.contains(candidate)))
            .find(|candidate| match filter.geo {
                Some(query) => self.geo_holds(namespace, digest, record, candidate, query),
                None => true,
            });
        first.as_ref() == Some(key)
    }

    /// Whether the index covers `record`'s set (every set, or the one it names).
    fn covers_set_of(&self, namespace: &Namespace, record: &Record) -> bool {
        self.definition.set_name.as_ref().is_none_or(|set_name| {
            namespace.sets.name_of(record.set_id) == Some(set_name.as_slice())
        })
    }

    /// The key of a user-key index for `record`: its stored key, when it has the index's type
    /// (a string index takes string and blob keys, as Redis keys are either).
    fn user_key_of(&self, record: &Record) -> Option<IndexKey> {
        let (particle_type, bytes) = record.user_key()?;
        match (self.definition.kind, particle_type) {
            (IndexKind::String, PARTICLE_STRING | PARTICLE_BLOB) => {
                Some(IndexKey::Str(bytes.into()))
            }
            (IndexKind::Numeric, PARTICLE_INTEGER) => {
                IndexKey::of_bin(IndexKind::Numeric, particle_type, bytes)
            }
            _ => None,
        }
    }
}

/// Whether a value of `particle_type` with wire bytes `bytes` is `key` in an index of `kind`.
fn same_value(kind: IndexKind, particle_type: u8, bytes: &[u8], key: &IndexKey) -> bool {
    if particle_type != kind.particle_type() {
        return false;
    }
    match key {
        IndexKey::Int(value) => {
            <[u8; 8]>::try_from(bytes).is_ok_and(|be| i64::from_be_bytes(be) == *value)
        }
        IndexKey::Str(text) => text[..] == *bytes,
    }
}

/// What a user-key index keeps beside each entry of its namespace-wide order, so that a query
/// for keys alone can answer from the entry, without looking up its record
/// ([`Namespace::query_ordered_keys`]).
///
/// Invariants (for every entry of a user-key index, whenever its record's partition lock is
/// free): the entry is there exactly while its record is stored with that key; `void_time` and
/// `set_id` are the record's; `stored_ms` is at most the record's `last_update_ms` (a rewrite
/// only raises it, unless the clock went back, which restamps). A write changes the record,
/// its entries and their stamps in one critical section under the record's partition lock,
/// and every reader of a record takes that lock; so an entry read under the order's lock agrees
/// with its record as any reader of the record can see it, before or after each write (the
/// order of the steps inside the critical section does not matter). A stamp older than a
/// truncate's cut-off is not enough to call the record visible: that candidate is re-checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    void_time: VoidTime,
    stored_ms: u64,
    set_id: SetId,
}

impl Stamp {
    /// The stamp of `record` as it is now.
    pub(crate) fn of(record: &Record) -> Stamp {
        Stamp {
            void_time: record.void_time,
            stored_ms: record.last_update_ms,
            set_id: record.set_id,
        }
    }

    /// Whether replacing a record stamped as `old` by `new` must restamp the entries both
    /// versions have: the void time changed, or the last update went back (a clock step).
    pub(crate) fn must_restamp(old: &Record, new: &Record) -> bool {
        old.void_time != new.void_time || new.last_update_ms < old.last_update_ms
    }
}

/// The stamp a write gives its record's user-key entries: to new ones always, and to the ones
/// both versions have when `restamp_kept` ([`Stamp::must_restamp`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewStamp {
    pub(crate) stamp: Stamp,
    pub(crate) restamp_kept: bool,
}

/// An index's namespace-wide order: its entries, each with a [`Stamp`] for a user-key index
/// (bin indexes' queries always look up the record, so they keep none).
#[derive(Debug)]
enum Order {
    Plain(BTreeSet<Entry>),
    Stamped(BTreeMap<Entry, Stamp>),
}

impl Order {
    fn for_source(source: &IndexSource) -> Order {
        match source {
            IndexSource::Bin(_) | IndexSource::BinContext { .. } | IndexSource::Expression(_) => {
                Order::Plain(BTreeSet::new())
            }
            IndexSource::UserKey => Order::Stamped(BTreeMap::new()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Order::Plain(entries) => entries.len(),
            Order::Stamped(entries) => entries.len(),
        }
    }

    fn insert(&mut self, entry: Entry, stamp: Stamp) {
        match self {
            Order::Plain(entries) => {
                entries.insert(entry);
            }
            Order::Stamped(entries) => {
                entries.insert(entry, stamp);
            }
        }
    }

    fn remove(&mut self, entry: &Entry) {
        match self {
            Order::Plain(entries) => {
                entries.remove(entry);
            }
            Order::Stamped(entries) => {
                entries.remove(entry);
            }
        }
    }

    /// Gives `entry`, if present, `stamp`.
    fn restamp(&mut self, entry: &Entry, stamp: Stamp) {
        if let Order::Stamped(entries) = self
            && let Some(kept) = entries.get_mut(entry)
        {
            *kept = stamp;
        }
    }

    fn clear(&mut self) {
        *self = match self {
            Order::Plain(_) => Order::Plain(BTreeSet::new()),
            Order::Stamped(_) => Order::Stamped(BTreeMap::new()),
        };
    }

    /// Up to `count` entries within `bounds`, in order, with their stamps (none in a plain
    /// order).
    fn candidates(&self, bounds: (Bound<Entry>, Bound<Entry>), count: usize) -> Vec<Candidate> {
        let mut found = Vec::with_capacity(count.min(CANDIDATES_RESERVED));
        if count > 0 {
            self.walk(bounds, |entry, stamp| {
                found.push((entry.clone(), stamp));
                found.len() < count
            });
        }
        found
    }

    /// Offers the entries within `bounds`, in order, with their stamps (none in a plain order),
    /// to `offer` until it returns false or the bounds end. One descent of the tree, to the
    /// lower bound; the upper one is checked while walking (a two-sided range descends once per
    /// bound).
    fn walk<'a>(
        &'a self,
        (lower, upper): (Bound<Entry>, Bound<Entry>),
        mut offer: impl FnMut(&'a Entry, Option<Stamp>) -> bool,
    ) {
        let below_upper = |entry: &Entry| match &upper {
            Bound::Included(end) => entry <= end,
            Bound::Excluded(end) => entry < end,
            Bound::Unbounded => true,
        };
        let from_lower = (lower, Bound::Unbounded);
        match self {
            Order::Plain(entries) => {
                for entry in entries.range(from_lower) {
                    if !below_upper(entry) || !offer(entry, None) {
                        return;
                    }
                }
            }
            Order::Stamped(entries) => {
                for (entry, stamp) in entries.range(from_lower) {
                    if !below_upper(entry) || !offer(entry, Some(*stamp)) {
                        return;
                    }
                }
            }
        }
    }
}

/// Candidates a piece reserves room for at once (a query's pages are usually small).
const CANDIDATES_RESERVED: usize = 64;

/// Why an index cannot be created.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// An index of that name exists with another definition (Aerospike's 200).
    #[error("index {0} already exists with another definition")]
    NameTaken(String),
    /// An index with that definition exists under another name (Aerospike's 200).
    #[error("an index on that bin already exists: {0}")]
    DefinitionTaken(String),
    /// The namespace has as many indexes as it may (Aerospike's 206).
    #[error("too many indexes")]
    TooMany,
    /// A name or bin the index cannot have (Aerospike's 4).
    #[error("{0}")]
    Invalid(&'static str),
}

/// The indexes of one namespace.
#[derive(Debug, Default)]
pub(crate) struct SecondaryIndexes {
    list: parking_lot::RwLock<Vec<Arc<SecondaryIndex>>>,
    next_id: AtomicU32,
    /// Whether `list` is non-empty: writes skip all index work when it is not.
    any: AtomicBool,
}

impl SecondaryIndexes {
    /// The indexes now (empty, without taking the lock, when there are none). A write takes
    /// one snapshot, under its partition's lock, for both versions it indexes.
    pub(crate) fn snapshot(&self) -> Vec<Arc<SecondaryIndex>> {
        if !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.list.read().clone()
    }

    /// Whether the namespace has any index (one load).
    pub(crate) fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }
}

/// One partition's index entries, by index id.
#[derive(Debug, Default)]
pub(crate) struct PartitionEntries {
    by_index: Vec<(u32, BTreeSet<(IndexKey, Digest)>)>,
}

impl PartitionEntries {
    fn entries_mut(&mut self, id: u32) -> &mut BTreeSet<(IndexKey, Digest)> {
        let position = match self.by_index.iter().position(|(i, _)| *i == id) {
            Some(position) => position,
            None => {
                self.by_index.push((id, BTreeSet::new()));
                self.by_index.len() - 1
            }
        };
        &mut self.by_index[position].1
    }

    /// The entries of index `id`, if this partition has a set for it (never creates one, so
    /// removing entries of a dropped index leaves nothing behind).
    fn existing_mut(&mut self, id: u32) -> Option<&mut BTreeSet<(IndexKey, Digest)>> {
        self.by_index
            .iter_mut()
            .find(|(i, _)| *i == id)
            .map(|(_, entries)| entries)
    }

    fn entries(&self, id: u32) -> Option<&BTreeSet<(IndexKey, Digest)>> {
        self.by_index
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, entries)| entries)
    }

    fn drop_index(&mut self, id: u32) {
        self.by_index.retain(|(i, _)| *i != id);
    }

    pub(crate) fn len(&self, id: u32) -> usize {
        self.entries(id).map_or(0, BTreeSet::len)
    }
}

/// The keys one version of a record has, per index.
pub(crate) type IndexedKeys = Vec<(u32, IndexKey)>;

/// Where a piece of a query ended in a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryPieceEnd {
    /// The last entry examined; resume strictly after it.
    pub last: Option<(IndexKey, Digest)>,
    /// Whether the partition has no entry left in the range.
    pub exhausted: bool,
}

impl Namespace {
    /// Creates an index (not yet built: run [`Namespace::build_index`] next). Creating one
    /// that exists with the same definition returns it again, as Aerospike answers `ok`.
    ///
    /// # Errors
    /// See [`IndexError`].
    pub fn create_index(
        &self,
        definition: IndexDefinition,
    ) -> Result<(Arc<SecondaryIndex>, bool), IndexError> {
        if definition.name.is_empty() || definition.name.len() > INDEX_NAME_MAX_BYTES {
            return Err(IndexError::Invalid("invalid index name"));
        }
        match &definition.source {
            IndexSource::Bin(bin) | IndexSource::BinContext { bin, .. }
                if bin.is_empty() || bin.len() > 15 =>
            {
                return Err(IndexError::Invalid("invalid bin name"));
            }
            IndexSource::UserKey if definition.collection != IndexCollection::Default => {
                return Err(IndexError::Invalid(
                    "a user-key index has indextype default",
                ));
            }
            IndexSource::UserKey
                if matches!(definition.kind, IndexKind::Geo2dSphere | IndexKind::Blob) =>
            {
                return Err(IndexError::Invalid("a user-key index is numeric or string"));
            }
            _ => {}
        }
        let derivation = derived::Derivation::compile(
            &definition.source,
            definition.kind,
            definition.collection,
        )
        .map_err(IndexError::Invalid)?;
        let mut list = self.sindexes.list.write();
        if let Some(existing) = list.iter().find(|i| i.definition.name == definition.name) {
            if existing.definition == definition {
                return Ok((existing.clone(), false));
            }
            return Err(IndexError::NameTaken(definition.name));
        }
        if let Some(existing) = list.iter().find(|i| {
            i.definition.set_name == definition.set_name
                && i.definition.source == definition.source
                && i.definition.kind == definition.kind
                && i.definition.collection == definition.collection
        }) {
            return Err(IndexError::DefinitionTaken(
                existing.definition.name.clone(),
            ));
        }
        if list.len() >= INDEXES_MAX {
            return Err(IndexError::TooMany);
        }
        let index = Arc::new(SecondaryIndex {
            id: self.sindexes.next_id.fetch_add(1, Ordering::Relaxed),
            built_partitions: AtomicUsize::new(0),
            ready: AtomicBool::new(false),
            dropped: AtomicBool::new(false),
            queries: AtomicU64::new(0),
            lookups: AtomicU64::new(0),
            records_returned: AtomicU64::new(0),
            ordered: parking_lot::RwLock::new(Order::for_source(&definition.source)),
            definition,
            derivation,
        });
        list.push(index.clone());
        self.sindexes.any.store(true, Ordering::Release);
        Ok((index, true))
    }

    /// Adds the entries of every record already stored, a partition at a time, then marks the
    /// index ready. Writes keep the index up to date meanwhile (it is registered), so a
    /// partition passed stays right. Stops early if the index is dropped.
    pub fn build_index(&self, index: &SecondaryIndex) {
        for slot in &self.partitions {
            let mut partition = slot.state.write();
            // Checked under the lock: a drop marks the index before it clears each partition
            // under that partition's lock, so nothing is added after its clearing.
            if index.dropped.load(Ordering::Acquire) {
                return;
            }
            let keys: Vec<(Entry, Stamp)> = partition
                .all_records()
                .filter_map(|(digest, record)| Some((digest, self.load(digest, record).ok()?)))
                .flat_map(|(digest, loaded)| {
                    let stamp = Stamp::of(&loaded);
                    index
                        .keys_of(self, digest, &loaded)
                        .into_iter()
                        .map(move |key| ((key, *digest), stamp))
                })
                .collect();
            let mut ordered = index.ordered.write();
            for (entry, stamp) in &keys {
                ordered.insert(entry.clone(), *stamp);
            }
            drop(ordered);
            let entries = keys.into_iter().map(|(entry, _)| entry);
            partition
                .index_entries
                .entries_mut(index.id)
                .extend(entries);
            drop(partition);
            index.built_partitions.fetch_add(1, Ordering::Relaxed);
        }
        index.ready.store(true, Ordering::Release);
    }

    /// Drops the index named `name`; false if there is none.
    pub fn drop_index(&self, name: &str) -> bool {
        let mut list = self.sindexes.list.write();
        let Some(position) = list.iter().position(|i| i.definition.name == name) else {
            return false;
        };
        let index = list.remove(position);
        self.sindexes.any.store(!list.is_empty(), Ordering::Release);
        drop(list);
        index.dropped.store(true, Ordering::Release);
        for slot in &self.partitions {
            slot.state.write().index_entries.drop_index(index.id);
        }
        // A writer holding an older list may still add an entry here: it dies with the index.
        index.ordered.write().clear();
        true
    }

    /// Every index, in creation order.
    pub fn indexes(&self) -> Vec<Arc<SecondaryIndex>> {
        self.sindexes.list.read().clone()
    }

    /// The index named `name`.
    pub fn index_named(&self, name: &str) -> Option<Arc<SecondaryIndex>> {
        self.sindexes
            .list
            .read()
            .iter()
            .find(|i| i.definition.name == name)
            .cloned()
    }

    /// The index a query on `source` (a bin, a bin and context, or an expression, in
    /// canonical bytes) of `kind` (and `collection`) in `set_name` (empty = none) uses: one
    /// on that set, else one on the whole namespace.
    pub fn index_for(
        &self,
        set_name: &[u8],
        source: &IndexSource,
        kind: IndexKind,
        collection: IndexCollection,
    ) -> Option<Arc<SecondaryIndex>> {
        let list = self.sindexes.list.read();
        let on = |set: Option<&[u8]>| {
            list.iter()
                .find(|i| {
                    i.definition.source == *source
                        && i.definition.kind == kind
                        && i.definition.collection == collection
                        && i.definition.set_name.as_deref() == set
                })
                .cloned()
        };
        let on_set = (!set_name.is_empty()).then(|| on(Some(set_name))).flatten();
        on_set.or_else(|| on(None))
    }

    /// Entries of `index` over every partition.
    pub fn index_entry_count(&self, index: &SecondaryIndex) -> u64 {
        self.partitions
            .iter()
            .map(|slot| slot.state.read().index_entries.len(index.id) as u64)
            .sum()
    }

    /// The keys `record` (the index's current version at `digest`, if any) has in each of
    /// `indexes`. Reads the record back from the device when its data is not in memory and an
    /// index needs it. Called under the partition's lock.
    pub(crate) fn indexed_keys(
        &self,
        indexes: &[Arc<SecondaryIndex>],
        digest: &Digest,
        record: Option<&Record>,
    ) -> IndexedKeys {
        let Some(record) = record else {
            return Vec::new();
        };
        if indexes.is_empty() {
            return Vec::new();
        }
        let Ok(loaded) = self.load(digest, record) else {
            return Vec::new();
        };
        indexes
            .iter()
            .flat_map(|index| {
                let keys = index.keys_of(self, digest, &loaded);
                keys.into_iter().map(|key| (index.id, key))
            })
            .collect()
    }

    /// The keys of the version of `digest` that `partition` holds in `indexes` (no lookup
    /// when there are none).
    pub(crate) fn current_keys(
        &self,
        indexes: &[Arc<SecondaryIndex>],
        partition: &crate::partition::Partition,
        digest: &Digest,
    ) -> IndexedKeys {
        if indexes.is_empty() {
            return Vec::new();
        }
        self.indexed_keys(indexes, digest, partition.any_record(digest))
    }

    /// Replaces the entries of `digest` in `partition` and in each index's namespace-wide
    /// order: adds those of `new` not in `old` (first, as SLIK orders it), then removes those
    /// of `old` not in `new`; a user-key index's new entries get `stamp`'s stamp, and so do
    /// those both versions have when it says so. `old` and `new` come from `indexes`; `stamp`
    /// is `None` for a delete. Called under the partition's write lock, in the same critical
    /// section as the record's change (see [`Stamp`]).
    pub(crate) fn reindex(
        indexes: &[Arc<SecondaryIndex>],
        partition: &mut crate::partition::Partition,
        digest: &Digest,
        mut old: IndexedKeys,
        mut new: IndexedKeys,
        stamp: Option<NewStamp>,
    ) {
        // Sorted, so that a long list's items are looked up, not scanned for each. Entries
        // in both versions stay as they are: a write that leaves the indexed value alone takes
        // no index lock (unless a user-key entry's stamp changes).
        old.sort_unstable();
        new.sort_unstable();
        let missing_from = |keys: &IndexedKeys, (id, key): &(u32, IndexKey)| {
            keys.binary_search_by(|(i, k)| (*i, k).cmp(&(*id, key)))
                .is_err()
        };
        let (stale, kept): (IndexedKeys, IndexedKeys) =
            old.iter().cloned().partition(|e| missing_from(&new, e));
        let fresh: IndexedKeys = new
            .iter()
            .filter(|e| missing_from(&old, e))
            .cloned()
            .collect();
        let restamp = stamp.filter(|s| s.restamp_kept).map(|s| s.stamp);
        for index in indexes {
            let of_index = |keys: &'_ IndexedKeys| {
                let id = index.id;
                keys.iter()
                    .filter(move |(i, _)| *i == id)
                    .map(|(_, key)| (key.clone(), *digest))
                    .collect::<Vec<_>>()
            };
            let (adds, removes) = (of_index(&fresh), of_index(&stale));
            let restamped = match (restamp, &index.definition.source) {
                (Some(stamp), IndexSource::UserKey) => Some((stamp, of_index(&kept))),
                _ => None,
            }
            .filter(|(_, entries)| !entries.is_empty());
            if adds.is_empty() && removes.is_empty() && restamped.is_none() {
                continue;
            }
            assert!(
                stamp.is_some() || adds.is_empty(),
                "a write that adds entries stamps them"
            );
            let mut ordered = index.ordered.write();
            if let Some(NewStamp { stamp, .. }) = stamp {
                for entry in &adds {
                    ordered.insert(entry.clone(), stamp);
                }
            }
            for entry in &removes {
                ordered.remove(entry);
            }
            if let Some((stamp, entries)) = &restamped {
                for entry in entries {
                    ordered.restamp(entry, *stamp);
                }
            }
            drop(ordered);
            let entries = &mut partition.index_entries;
            if let Some(existing) = entries.existing_mut(index.id) {
                for entry in &removes {
                    existing.remove(entry);
                }
            }
            if !adds.is_empty() {
                entries.entries_mut(index.id).extend(adds);
            }
        }
    }

    /// Restamps the user-key entries of `record` (at `digest`), changed in place: its void
    /// time, or its last update back in time (see [`Stamp::must_restamp`]). Called under the
    /// partition's write lock.
    pub(crate) fn restamp(
        &self,
        indexes: &[Arc<SecondaryIndex>],
        digest: &Digest,
        record: &Record,
    ) {
        let is_stamped =
            |index: &&Arc<SecondaryIndex>| index.definition.source == IndexSource::UserKey;
        if !indexes.iter().any(|index| is_stamped(&index)) {
            return;
        }
        let Ok(loaded) = self.load(digest, record) else {
            return;
        };
        let stamp = Stamp::of(&loaded);
        for index in indexes.iter().filter(is_stamped) {
            for key in index.keys_of(self, digest, &loaded) {
                index.ordered.write().restamp(&(key, *digest), stamp);
            }
        }
    }

    /// Visits the visible records of `partition` whose value in `index` lies in `range`, in
    /// (value, digest) order, strictly after `after`, examining at most `examine_max` entries
    /// under the partition's read lock. Each candidate is re-checked against its record: only
    /// a record whose current value is the entry's value, and within the range, is visited
    /// (with that value). `visit` returns false to stop before taking a record.
    pub fn query_piece<'f>(
        &self,
        partition: PartitionId,
        index: &SecondaryIndex,
        range: impl Into<FilterRef<'f>>,
        after: Option<&(IndexKey, Digest)>,
        examine_max: usize,
        mut visit: impl FnMut(&ScannedRecord<'_>, &IndexKey) -> bool,
    ) -> QueryPieceEnd {
        assert!(examine_max > 0, "a piece examines at least one entry");
        let filter = range.into();
        let _gate = self.gate.shared();
        let visibility = self.visibility(self.clock.now());
        let guard = self.partitions[partition.index()].state.read();
        let mut end = QueryPieceEnd {
            last: after.cloned(),
            exhausted: true,
        };
        let Some(entries) = guard.index_entries.entries(index.id) else {
            return end;
        };
        let window = Window {
            filter,
            later_pieces_after: None,
        };
        let mut examined = 0;
        for range in filter.ranges {
            let Some(bounds) = bounds(range, after) else {
                continue;
            };
            for entry in entries.range(bounds) {
                if examined == examine_max {
                    end.exhausted = false;
                    return end;
                }
                examined += 1;
                if !self.recheck(index, &guard, entry, &window, &visibility, &mut visit) {
                    end.exhausted = false;
                    return end;
                }
                end.last = Some(entry.clone());
            }
        }
        end
    }

    /// Visits, in (value, digest) order across the whole namespace, the visible records whose
    /// value in `index` lies in `range`, strictly after `after`, examining at most
    /// `examine_max` entries. The candidates are read under the index's lock, then each is
    /// re-checked against its record under its partition's read lock, as in
    /// [`Namespace::query_piece`]. `visit` returns false to stop before taking a record.
    pub fn query_ordered_piece<'f>(
        &self,
        index: &SecondaryIndex,
        range: impl Into<FilterRef<'f>>,
        after: Option<&(IndexKey, Digest)>,
        examine_max: usize,
        mut visit: impl FnMut(&ScannedRecord<'_>, &IndexKey) -> bool,
    ) -> QueryPieceEnd {
        self.walk_piece(
            index,
            range.into(),
            after,
            examine_max,
            |(entry, _), window, visibility| {
                let guard = self.slot(&entry.1).state.read();
                self.recheck(index, &guard, entry, window, visibility, &mut visit)
            },
        )
    }

    /// [`Namespace::query_ordered_piece`] for a query that wants only the keys of a user-key
    /// index: a candidate whose stamp (see `Stamp`) shows its record visible is answered from the entry
    /// alone, one whose stamp shows it expired is skipped, and one whose stamp is older than a
    /// truncate is re-checked against its record, as every candidate of a bin index is.
    /// `visit` gets each key with its record's digest, and returns false to stop before
    /// taking it.
    ///
    /// The entries the stamps decide are visited in place, under the order's lock (no copy);
    /// from the first that needs its record, the rest of the piece is read and re-checked as
    /// [`Namespace::query_ordered_piece`] does, since a partition lock cannot be taken under
    /// the order's (writers take them the other way round).
    pub fn query_ordered_keys(
        &self,
        index: &SecondaryIndex,
        range: &KeyRange,
        after: Option<&(IndexKey, Digest)>,
        examine_max: usize,
        mut visit: impl FnMut(&IndexKey, &Digest) -> bool,
    ) -> QueryPieceEnd {
        assert!(
            index.definition.source == IndexSource::UserKey,
            "only a user-key index answers with keys alone"
        );
        let mut tally = Tally {
            index,
            lookups: 0,
            records_returned: 0,
        };
        let (resume_after, examined) =
            match self.keys_by_stamp(index, range, after, examine_max, &mut tally, &mut visit) {
                StampPass::Ended(end) => return end,
                StampPass::Recheck {
                    last_decided,
                    examined,
                } => (last_decided.or_else(|| after.cloned()), examined),
            };
        self.walk_piece(
            index,
            range.into(),
            resume_after.as_ref(),
            examine_max - examined,
            |(entry, stamp), window, visibility| {
                let now_seconds = visibility.now.epoch_seconds();
                match stamp {
                    Some(s) if visibility.shows_meta(s.void_time, s.stored_ms, s.set_id) => {
                        tally.lookups += 1;
                        let taken = visit(&entry.0, &entry.1);
                        tally.records_returned += u64::from(taken);
                        taken
                    }
                    Some(s) if s.void_time.is_expired_at(now_seconds) => {
                        tally.lookups += 1;
                        true
                    }
                    _ => {
                        let guard = self.slot(&entry.1).state.read();
                        let mut visit_record =
                            |record: &ScannedRecord<'_>, key: &IndexKey| visit(key, record.digest);
                        self.recheck(index, &guard, entry, window, visibility, &mut visit_record)
                    }
                }
            },
        )
    }

    /// The first part of a keys-only piece ([`Namespace::query_ordered_keys`]): visits, under
    /// the order's read lock, the entries whose stamps decide them, until the piece ends or an
    /// entry needs its record re-checked.
    fn keys_by_stamp(
        &self,
        index: &SecondaryIndex,
        range: &KeyRange,
        after: Option<&Entry>,
        examine_max: usize,
        tally: &mut Tally<'_>,
        visit: &mut impl FnMut(&IndexKey, &Digest) -> bool,
    ) -> StampPass {
        assert!(examine_max > 0, "a piece examines at least one entry");
        // Lock order: the gate, then the order's lock (a writer holds the gate shared too).
        let _gate = self.gate.shared();
        let visibility = self.visibility(self.clock.now());
        let now_seconds = visibility.now.epoch_seconds();
        let order = index.ordered.read();
        let (mut examined, mut last_decided, mut stop) = (0, None, None);
        let Some(bounds) = bounds(range, after) else {
            return StampPass::Ended(QueryPieceEnd {
                last: after.cloned(),
                exhausted: true,
            });
        };
        order.walk(bounds, |entry, stamp| {
            if examined == examine_max {
                stop = Some(PassStop::PieceFull);
                return false;
            }
            let Some(stamp) = stamp else {
                stop = Some(PassStop::Recheck);
                return false;
            };
            if visibility.shows_meta(stamp.void_time, stamp.stored_ms, stamp.set_id) {
                tally.lookups += 1;
                if !visit(&entry.0, &entry.1) {
                    stop = Some(PassStop::Visitor);
                    return false;
                }
                tally.records_returned += 1;
            } else if stamp.void_time.is_expired_at(now_seconds) {
                tally.lookups += 1;
            } else {
                stop = Some(PassStop::Recheck);
                return false;
            }
            examined += 1;
            last_decided = Some(entry);
            true
        });
        let last_decided = last_decided.cloned();
        match stop {
            Some(PassStop::Recheck) => StampPass::Recheck {
                last_decided,
                examined,
            },
            stop => StampPass::Ended(QueryPieceEnd {
                last: last_decided.or_else(|| after.cloned()),
                exhausted: stop.is_none(),
            }),
        }
    }

    /// One piece of a walk of `index`'s namespace-wide order: reads its candidates, then offers
    /// each, in order, to `take` (with the piece's window and the visibility of this moment),
    /// which returns false to stop before taking it. Runs under the namespace's shared gate.
    fn walk_piece(
        &self,
        index: &SecondaryIndex,
        filter: FilterRef<'_>,
        after: Option<&Entry>,
        examine_max: usize,
        mut take: impl FnMut(&Candidate, &Window<'_>, &crate::partition::Visibility<'_>) -> bool,
    ) -> QueryPieceEnd {
        let PieceStart {
            candidates,
            mut end,
            next_piece_after,
        } = PieceStart::read(index, filter, after, examine_max);
        let window = Window {
            filter,
            later_pieces_after: next_piece_after.as_ref(),
        };
        let _gate = self.gate.shared();
        let visibility = self.visibility(self.clock.now());
        for candidate in candidates {
            if !take(&candidate, &window, &visibility) {
                end.exhausted = false;
                return end;
            }
            end.last = Some(candidate.0);
        }
        end
    }

    /// Checks a candidate entry (within the query's range) against its record in `partition`,
    /// which the caller holds locked, and visits the record (with the entry's value: where the
    /// walk is, which is where a resumed walk goes on) if it is visible and either still holds
    /// the entry's value or has another in the window's range: a write moved it since the
    /// candidate was read (SLIK's re-check is against the filter, not the entry; only a
    /// single-valued index can tell which value replaced the entry's), and no later piece will
    /// find it there. False only when `visit` asked to stop before taking it.
    fn recheck(
        &self,
        index: &SecondaryIndex,
        partition: &crate::partition::Partition,
        (key, digest): &Entry,
        window: &Window<'_>,
        visibility: &crate::partition::Visibility<'_>,
        visit: &mut impl FnMut(&ScannedRecord<'_>, &IndexKey) -> bool,
    ) -> bool {
        index.lookups.fetch_add(1, Ordering::Relaxed);
        let Some(record) = partition.live(digest, visibility) else {
            return true;
        };
        let Ok(loaded) = self.load(digest, record) else {
            return true;
        };
        let takes = if index.definition.collection != IndexCollection::Default {
            // A record an index holds under several matching values goes out once, at the
            // first: this check covers `holds` too, from one computation of its keys.
            index.first_match(self, digest, &loaded, key, &window.filter)
        } else {
            let held = match window.filter.geo {
                Some(query) => index.geo_holds(self, digest, &loaded, key, query),
                None => index.holds(self, digest, &loaded, key),
            };
            held || (window.filter.geo.is_none()
                && index
                    .keys_of(self, digest, &loaded)
                    .first()
                    .is_some_and(|moved| window.takes_moved(moved, digest)))
        };
        if !takes {
            return true;
        }
        let set_name = self.sets.name_of(loaded.set_id);
        let scanned = ScannedRecord::new(digest, &loaded, set_name, self.clock.now());
        if !visit(&scanned, key) {
            return false;
        }
        index.records_returned.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// The scope a query of `index` covers.
    pub fn index_scope(&self, index: &SecondaryIndex) -> ScanScope {
        self.scan_scope(index.definition.set_name.as_deref().unwrap_or_default())
    }
}

/// Counts a keys-only query piece adds to its index's statistics, once when the piece ends
/// rather than once per entry: the counters are shared by every query of the index.
struct Tally<'a> {
    index: &'a SecondaryIndex,
    lookups: u64,
    records_returned: u64,
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        let index = self.index;
        index.lookups.fetch_add(self.lookups, Ordering::Relaxed);
        index
            .records_returned
            .fetch_add(self.records_returned, Ordering::Relaxed);
    }
}

/// How the stamp-decided part of a keys-only piece ended ([`Namespace::query_ordered_keys`]).
enum StampPass {
    /// The whole piece.
    Ended(QueryPieceEnd),
    /// The entry after `last_decided` (the piece's start when `None`), `examined` entries into
    /// the piece, needs its record re-checked.
    Recheck {
        last_decided: Option<Entry>,
        examined: usize,
    },
}

/// Why the stamp-decided walk stopped before its bounds ended.
enum PassStop {
    /// The piece examined as many entries as it may, and another follows.
    PieceFull,
    /// The visitor asked to stop before an entry.
    Visitor,
    /// An entry's stamp does not decide it.
    Recheck,
}

/// The start of one piece of a walk of an index's namespace-wide order.
struct PieceStart {
    /// The first entries of the range strictly after the piece's start, with their stamps.
    candidates: Vec<Candidate>,
    /// The piece's end as far as the candidates tell: exhausted when no entry follows them.
    end: QueryPieceEnd,
    /// When another piece will follow, the entry it will start after (the last candidate).
    next_piece_after: Option<Entry>,
}

impl PieceStart {
    /// Reads the first `examine_max` entries of `index` in `range` strictly after `after`.
    fn read(
        index: &SecondaryIndex,
        filter: FilterRef<'_>,
        after: Option<&Entry>,
        examine_max: usize,
    ) -> PieceStart {
        assert!(examine_max > 0, "a piece examines at least one entry");
        let mut candidates = Vec::new();
        let order = index.ordered.read();
        for range in filter.ranges {
            let wanted = examine_max + 1 - candidates.len();
            if wanted == 0 {
                break;
            }
            if let Some(bounds) = bounds(range, after) {
                candidates.extend(order.candidates(bounds, wanted));
            }
        }
        drop(order);
        let exhausted = candidates.len() <= examine_max;
        candidates.truncate(examine_max);
        let next_piece_after = candidates
            .last()
            .filter(|_| !exhausted)
            .map(|(entry, _)| entry.clone());
        let end = QueryPieceEnd {
            last: after.cloned(),
            exhausted,
        };
        PieceStart {
            candidates,
            end,
            next_piece_after,
        }
    }
}

/// An entry a piece examines, with its stamp in a user-key index.
type Candidate = (Entry, Option<Stamp>);

/// One index entry: a value and the digest of a record holding it.
type Entry = (IndexKey, Digest);

/// What a piece of a query re-checks its candidates against.
struct Window<'a> {
    /// The query's values.
    filter: FilterRef<'a>,
    /// Where the next piece of the walk will start (strictly after), if there is one: a record
    /// that moved beyond it is left for that piece to find, so that it is not returned twice.
    later_pieces_after: Option<&'a Entry>,
}

impl Window<'_> {
    /// Whether a record (at `digest`) whose entry was a candidate but whose value is now
    /// `moved` is returned with `moved` here.
    fn takes_moved(&self, moved: &IndexKey, digest: &Digest) -> bool {
        self.filter.ranges.iter().any(|range| range.contains(moved))
            && self
                .later_pieces_after
                .is_none_or(|(key, last)| (moved, digest) <= (key, last))
    }
}

/// Smallest and largest digests: the ends of one value's entries.
const DIGEST_FIRST: Digest = Digest([0; 20]);
const DIGEST_LAST: Digest = Digest([0xff; 20]);

/// The entries of `range` strictly after `after`; `None` when there can be none (`after` at
/// or beyond the range's end).
fn bounds(range: &KeyRange, after: Option<&Entry>) -> Option<(Bound<Entry>, Bound<Entry>)> {
    let lower = match &range.begin {
        Bound::Included(begin) => Bound::Included((begin.clone(), DIGEST_FIRST)),
        Bound::Excluded(begin) => Bound::Excluded((begin.clone(), DIGEST_LAST)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let lower = match after {
        Some(entry) if entry_after_bound(entry, &lower) => Bound::Excluded(entry.clone()),
        _ => lower,
    };
    let upper = match &range.end {
        Bound::Included(end) => Bound::Included((end.clone(), DIGEST_LAST)),
        Bound::Excluded(end) => Bound::Excluded((end.clone(), DIGEST_FIRST)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let empty = match (&lower, &upper) {
        (Bound::Included(low), Bound::Included(high)) => low > high,
        (Bound::Included(low) | Bound::Excluded(low), Bound::Excluded(high))
        | (Bound::Excluded(low), Bound::Included(high)) => low >= high,
        _ => false,
    };
    (!empty).then_some((lower, upper))
}

/// Whether `entry` lies at or beyond the lower bound `lower` (so resuming after it narrows the
/// range).
fn entry_after_bound(entry: &Entry, lower: &Bound<Entry>) -> bool {
    match lower {
        Bound::Included(bound) | Bound::Excluded(bound) => entry >= bound,
        Bound::Unbounded => true,
    }
}
