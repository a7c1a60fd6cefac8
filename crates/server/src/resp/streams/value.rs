//! The stream value: entries in id order, the stream's counters, and its consumer groups with
//! their pending entries and consumers, held as one native record value (see
//! `docs/internals/redis-mapping.md`, "Streams").
//!
//! Invariants:
//! - Entry ids strictly increase, and every entry id is at most `last_id`.
//! - Every entry holds at least one field, with a value for each (an even, non-zero count).
//! - A group's pending entry names a consumer of that group, and that consumer's `pending`
//!   holds its id; a consumer's `pending` holds only ids of its group's pending entries.
//! - `size_bytes` equals the sum of the estimates below for what the value holds; every change
//!   goes through the methods here, which keep it so.

use std::collections::{BTreeMap, BTreeSet};

use model::ParticleType;

use super::super::collection::Collection;
use super::super::msgpack::{self, Reader, Scalar};
use super::super::rdb::{RdbConsumer, RdbGroup, RdbPending, RdbStream};
use super::id::StreamId;

/// Bytes an entry costs beyond its fields' and values' bytes: its tree slot, id and boxes.
const ENTRY_OVERHEAD_BYTES: usize = 64;
/// Bytes each field or value costs beyond its bytes (a boxed slice).
const ELEMENT_OVERHEAD_BYTES: usize = 16;
/// Bytes a pending entry costs beyond its consumer's name: two tree slots, times, count.
const PENDING_OVERHEAD_BYTES: usize = 96;
/// Bytes a consumer costs beyond its name.
const CONSUMER_OVERHEAD_BYTES: usize = 64;
/// Bytes a group costs beyond its name.
const GROUP_OVERHEAD_BYTES: usize = 96;
/// Entries Redis keeps in one radix-tree node (`stream-node-max-entries`'s default):
/// approximate trimming (`~`) removes whole nodes only, so the stream keeps Redis's node
/// boundaries (see [`Node`]).
pub const NODE_ENTRIES: usize = 100;

/// One of Redis's radix-tree nodes, as far as trimming sees it: a run of consecutive entries,
/// started by an append when the last node had taken `stream-node-max-entries` appends (the
/// setting when the entry is appended; deleted ones included, as Redis counts them; 0 for no
/// bound), and dropped when its last live entry goes.
///
/// Redis also starts a node at `stream-node-max-bytes` (4096 bytes); only the entry count is
/// kept here. Boundaries are kept in the bin ([`KEY_NODES`]); a bin without them has its
/// entries cut into nodes of [`NODE_ENTRIES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Node {
    /// Appends it took, deleted entries included.
    appended: usize,
    /// Its entries not deleted.
    live: usize,
    /// The last id appended to it (deleted or not): MINID removes the node whole below it.
    last: StreamId,
}

/// One entry's fields and values, alternating.
pub type Fields = Box<[Box<[u8]>]>;

/// An entry delivered to a consumer and not yet acknowledged.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The consumer it was last delivered to.
    pub consumer: Box<[u8]>,
    /// When it was last delivered, Unix milliseconds.
    pub delivery_time_ms: i64,
    /// How many times it was delivered.
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Debug, Clone, Default)]
pub struct Consumer {
    /// Its last attempted interaction (read, claim), Unix milliseconds.
    pub seen_time_ms: i64,
    /// Its last successful interaction, Unix milliseconds; -1 for never.
    pub active_time_ms: i64,
    /// The ids of the group's pending entries it holds.
    pub pending: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Debug, Clone, Default)]
pub struct Group {
    /// The last id delivered to the group.
    pub last_id: StreamId,
    /// Entries the group has read (its logical read counter); `None` when unknown.
    pub entries_read: Option<i64>,
    /// Pending entries, by id.
    pub pending: BTreeMap<StreamId, Pending>,
    /// Consumers, by name (Redis orders them bytewise, as its radix tree does).
    pub consumers: BTreeMap<Box<[u8]>, Consumer>,
    size_bytes: usize,
}

impl Group {
    /// A group whose last delivered id is `last_id`.
    pub fn new(last_id: StreamId, entries_read: Option<i64>) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// Creates consumer `name` (seen now, never active) if it does not exist; whether it did
    /// not.
    pub fn create_consumer(&mut self, name: &[u8], now_ms: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        let consumer = Consumer {
            seen_time_ms: now_ms,
            active_time_ms: -1,
            pending: BTreeSet::new(),
        };
        self.consumers.insert(name.into(), consumer);
        self.size_bytes += CONSUMER_OVERHEAD_BYTES + name.len();
        true
    }

    /// Deletes consumer `name` and its pending entries; how many it held, `None` if there is
    /// no such consumer.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let consumer = self.consumers.remove(name)?;
        self.size_bytes -= CONSUMER_OVERHEAD_BYTES + name.len();
        for id in &consumer.pending {
            self.pending.remove(id);
            self.size_bytes -= PENDING_OVERHEAD_BYTES + name.len();
        }
        Some(consumer.pending.len())
    }

    /// Makes `id` pending for `consumer` (which exists), delivered at `time_ms` with
    /// `delivery_count`, taking it from another consumer that held it.
    pub fn deliver(&mut self, id: StreamId, consumer: &[u8], time_ms: i64, delivery_count: u64) {
        self.remove_pending(id);
        let holder = self
            .consumers
            .get_mut(consumer)
            .expect("a delivery names an existing consumer");
        holder.pending.insert(id);
        self.pending.insert(
            id,
            Pending {
                consumer: consumer.into(),
                delivery_time_ms: time_ms,
                delivery_count,
            },
        );
        self.size_bytes += PENDING_OVERHEAD_BYTES + consumer.len();
    }

    /// Removes `id` from the pending entries (XACK); the entry it was, if it was pending.
    pub fn remove_pending(&mut self, id: StreamId) -> Option<Pending> {
        let pending = self.pending.remove(&id)?;
        let holder = self
            .consumers
            .get_mut(&pending.consumer)
            .expect("a pending entry names an existing consumer");
        let held = holder.pending.remove(&id);
        assert!(held, "a consumer holds the pending entries naming it");
        self.size_bytes -= PENDING_OVERHEAD_BYTES + pending.consumer.len();
        Some(pending)
    }
}

/// A Redis stream.
#[derive(Debug, Default)]
pub struct StreamValue {
    entries: BTreeMap<StreamId, Fields>,
    /// The last id added (or set by XSETID); ids only grow.
    pub last_id: StreamId,
    /// Entries ever added.
    pub entries_added: i64,
    /// The largest id XDEL deleted; `0-0` for none.
    pub max_deleted_id: StreamId,
    groups: BTreeMap<Box<[u8]>, Group>,
    entries_size_bytes: usize,
    groups_size_bytes: usize,
    /// The nodes by their first id; their live counts sum to `entries.len()`, and each
    /// node's live entries are the entries from its first id to the next node's.
    nodes: BTreeMap<StreamId, Node>,
}

impl StreamValue {
    /// Its entry count.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entries from `start` to `end` inclusive, forward or (`rev`) backward; none when
    /// `start > end`.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
    ) -> Box<dyn Iterator<Item = (StreamId, &Fields)> + '_> {
        if start > end {
            return Box::new(std::iter::empty());
        }
        let range = self.entries.range(start..=end).map(|(id, f)| (*id, f));
        if rev {
            Box::new(range.rev())
        } else {
            Box::new(range)
        }
    }

    /// The first entry.
    pub fn first(&self) -> Option<(StreamId, &Fields)> {
        self.entries.first_key_value().map(|(id, f)| (*id, f))
    }

    /// The last entry.
    pub fn last(&self) -> Option<(StreamId, &Fields)> {
        self.entries.last_key_value().map(|(id, f)| (*id, f))
    }

    /// The id of the first entry, `0-0` when there is none (Redis's `first_id`).
    pub fn first_id(&self) -> StreamId {
        self.first().map_or(StreamId::MIN, |(id, _)| id)
    }

    /// Appends an entry; `id` must be above `last_id`. A node takes at most
    /// `node_entries_max` appends (0: no bound), `stream-node-max-entries`.
    pub fn append(&mut self, id: StreamId, fields: Fields, node_entries_max: usize) {
        assert!(id > self.last_id, "stream ids only grow");
        self.insert_last(id, fields, node_entries_max);
        self.last_id = id;
        self.entries_added += 1;
    }

    /// Inserts entry `id`, above every entry and node, into the last node or a new one.
    fn insert_last(&mut self, id: StreamId, fields: Fields, node_entries_max: usize) {
        self.entries_size_bytes += entry_size(&fields);
        self.entries.insert(id, fields);
        match self.nodes.last_entry() {
            Some(mut node) if node_entries_max == 0 || node.get().appended < node_entries_max => {
                let node = node.get_mut();
                node.appended += 1;
                node.live += 1;
                node.last = id;
            }
            _ => {
                let node = Node {
                    appended: 1,
                    live: 1,
                    last: id,
                };
                self.nodes.insert(id, node);
            }
        }
    }

    /// Notes that entry `id` of the node that starts at `first` was removed; drops the
    /// node when it was its last live one.
    fn note_removed(&mut self, first: StreamId) {
        let node = self.nodes.get_mut(&first).expect("an entry is in a node");
        node.live -= 1;
        if node.live == 0 {
            self.nodes.remove(&first);
        }
    }

    /// Deletes entry `id` (XDEL); whether it was there.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some(fields) = self.entries.remove(&id) else {
            return false;
        };
        self.entries_size_bytes -= entry_size(&fields);
        self.max_deleted_id = self.max_deleted_id.max(id);
        let (&first, _) = self
            .nodes
            .range(..=id)
            .next_back()
            .expect("an entry is in a node");
        self.note_removed(first);
        true
    }

    /// Trims by `trim` (see [`Trim`]); the entries removed. As Redis's `streamTrim`: whole
    /// nodes from the front while the strategy allows removing all of one (and LIMIT its
    /// entries); then, unless approximate, the first node's entries one by one.
    pub fn trim(&mut self, trim: &Trim) -> u64 {
        let mut deleted = 0_u64;
        while let Some((&first, &node)) = self.nodes.first_key_value() {
            let len = self.entries.len() as u64;
            if matches!(trim.strategy, Strategy::MaxLen(max_len) if len <= max_len) {
                break;
            }
            let live = node.live as u64;
            if trim.limit > 0 && deleted + live > trim.limit {
                break;
            }
            let remove_node = match trim.strategy {
                Strategy::MaxLen(max_len) => len - live >= max_len,
                Strategy::MinId(min_id) => node.last < min_id,
            };
            if remove_node {
                for _ in 0..node.live {
                    self.pop_first();
                }
                self.nodes.remove(&first);
                deleted += live;
                continue;
            }
            if trim.approx {
                break;
            }
            while let Some((&id, _)) = self.entries.first_key_value() {
                let more = match trim.strategy {
                    Strategy::MaxLen(max_len) => self.entries.len() as u64 > max_len,
                    Strategy::MinId(min_id) => id < min_id,
                };
                if !more {
                    break;
                }
                self.pop_first();
                self.note_removed(first);
                deleted += 1;
            }
            break;
        }
        deleted
    }

    /// How many nodes Redis would hold the entries in.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Removes the first entry (its node is the caller's to note).
    fn pop_first(&mut self) {
        let (_, fields) = self.entries.pop_first().expect("the node has live entries");
        self.entries_size_bytes -= entry_size(&fields);
    }

    /// The group named `name`.
    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.get(name)
    }

    /// The groups, by name.
    pub fn groups(&self) -> impl ExactSizeIterator<Item = (&[u8], &Group)> {
        self.groups
            .iter()
            .map(|(name, group)| (name.as_ref(), group))
    }

    /// Adds group `name`; false if it exists.
    pub fn create_group(&mut self, name: &[u8], group: Group) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        self.groups_size_bytes += GROUP_OVERHEAD_BYTES + name.len() + group.size_bytes;
        self.groups.insert(name.into(), group);
        true
    }

    /// Removes group `name`; whether it existed.
    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        let Some(group) = self.groups.remove(name) else {
            return false;
        };
        self.groups_size_bytes -= GROUP_OVERHEAD_BYTES + name.len() + group.size_bytes;
        true
    }

    /// Calls `change` with group `name` and the stream's entries (read-only), keeping the
    /// size exact; `None` if there is no such group.
    pub fn with_group<T>(
        &mut self,
        name: &[u8],
        change: impl FnOnce(&mut Group, &Entries<'_>) -> T,
    ) -> Option<T> {
        let group = self.groups.get_mut(name)?;
        let before = group.size_bytes;
        let entries = Entries {
            entries: &self.entries,
            last_id: self.last_id,
            entries_added: self.entries_added,
            max_deleted_id: self.max_deleted_id,
        };
        let outcome = change(group, &entries);
        self.groups_size_bytes = self.groups_size_bytes - before + group.size_bytes;
        Some(outcome)
    }

    /// The stream's entries and counters, read-only.
    pub fn entries(&self) -> Entries<'_> {
        Entries {
            entries: &self.entries,
            last_id: self.last_id,
            entries_added: self.entries_added,
            max_deleted_id: self.max_deleted_id,
        }
    }
}

/// A stream's entries and counters, read-only: what a group change may look at.
#[derive(Debug)]
pub struct Entries<'a> {
    entries: &'a BTreeMap<StreamId, Fields>,
    /// The stream's last id.
    pub last_id: StreamId,
    /// Entries ever added.
    pub entries_added: i64,
    /// The largest id XDEL deleted.
    pub max_deleted_id: StreamId,
}

impl Entries<'_> {
    /// The fields of entry `id`.
    pub fn get(&self, id: StreamId) -> Option<&Fields> {
        self.entries.get(&id)
    }

    /// Ids and fields after `after`, in order.
    pub fn after(&self, after: StreamId) -> impl Iterator<Item = (StreamId, &Fields)> {
        let start = after.next();
        let range = match start {
            Some(start) => self.entries.range(start..),
            None => self.entries.range(StreamId::MAX..StreamId::MAX),
        };
        range.map(|(id, f)| (*id, f))
    }

    fn first_id(&self) -> StreamId {
        self.entries
            .first_key_value()
            .map_or(StreamId::MIN, |(id, _)| *id)
    }

    /// Whether a deleted entry may lie at or after `start` (Redis's
    /// `streamRangeHasTombstones` with no end).
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted_id == StreamId::MIN {
            return false;
        }
        if self.first_id() > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// The logical read counter of `id`, when it can be known (Redis's
    /// `streamEstimateDistanceFromFirstEverEntry`).
    pub fn read_counter_of(&self, id: StreamId) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.entries.is_empty() && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        let first = self.first_id();
        let length = i64::try_from(self.entries.len()).expect("fewer than 2^63 entries");
        if self.max_deleted_id == StreamId::MIN || self.max_deleted_id < first {
            if id < first {
                return Some(self.entries_added - length);
            }
            if id == first {
                return Some(self.entries_added - length + 1);
            }
        }
        None
    }

    /// A group's lag, when it can be known (Redis's `streamReplyWithCGLag`).
    pub fn lag_of(&self, group: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if let Some(read) = group.entries_read
            && !self.has_tombstones_from(group.last_id)
        {
            return Some(self.entries_added - read);
        }
        self.read_counter_of(group.last_id)
            .map(|read| self.entries_added - read)
    }

    /// Advances `group`'s last delivered id to `id`, keeping its read counter as Redis does.
    pub fn advance(&self, group: &mut Group, id: StreamId) {
        if id <= group.last_id {
            return;
        }
        match group.entries_read {
            Some(read) if !self.has_tombstones_from(id) => group.entries_read = Some(read + 1),
            _ if self.entries_added != 0 => group.entries_read = self.read_counter_of(id),
            _ => {}
        }
        group.last_id = id;
    }
}

/// How XADD and XTRIM trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Remove entries below this id.
    MinId(StreamId),
}

/// A trim: its strategy, whether approximate (`~`: whole nodes only), and its
/// LIMIT on entries removed (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    /// What to keep.
    pub strategy: Strategy,
    /// `~`.
    pub approx: bool,
    /// Most entries to remove; 0 for no limit.
    pub limit: u64,
}

fn entry_size(fields: &Fields) -> usize {
    ENTRY_OVERHEAD_BYTES
        + fields
            .iter()
            .map(|element| element.len() + ELEMENT_OVERHEAD_BYTES)
            .sum::<usize>()
}

// The rendering: one MAP bin, `stream`, documented in `docs/internals/redis-mapping.md`.
const KEY_ENTRIES: &[u8] = b"entries";
const KEY_LAST_ID: &[u8] = b"last-id";
const KEY_ENTRIES_ADDED: &[u8] = b"entries-added";
const KEY_MAX_DELETED_ID: &[u8] = b"max-deleted-id";
const KEY_GROUPS: &[u8] = b"groups";
/// Where Redis's nodes begin: `[first id, appends taken, last id appended]` per node. A value
/// written before it was kept has none: its entries are cut into nodes of [`NODE_ENTRIES`].
const KEY_NODES: &[u8] = b"nodes";

impl StreamValue {
    /// The MAP bin's msgpack.
    fn encoded(&self) -> Vec<u8> {
        self.encoded_with(true)
    }

    /// The MAP bin's msgpack; `with_nodes: false` writes it as before node boundaries were
    /// kept.
    fn encoded_with(&self, with_nodes: bool) -> Vec<u8> {
        let mut out = Vec::new();
        msgpack::write_map_len(&mut out, if with_nodes { 6 } else { 5 });
        msgpack::write_bytes(&mut out, KEY_ENTRIES);
        msgpack::write_array_len(&mut out, self.entries.len());
        for (id, fields) in &self.entries {
            msgpack::write_array_len(&mut out, 2);
            msgpack::write_bytes(&mut out, &id.text_bytes());
            msgpack::write_array_len(&mut out, fields.len());
            fields
                .iter()
                .for_each(|f| msgpack::write_bytes(&mut out, f));
        }
        msgpack::write_bytes(&mut out, KEY_LAST_ID);
        msgpack::write_bytes(&mut out, &self.last_id.text_bytes());
        msgpack::write_bytes(&mut out, KEY_ENTRIES_ADDED);
        write_int(&mut out, self.entries_added);
        msgpack::write_bytes(&mut out, KEY_MAX_DELETED_ID);
        msgpack::write_bytes(&mut out, &self.max_deleted_id.text_bytes());
        if with_nodes {
            msgpack::write_bytes(&mut out, KEY_NODES);
            msgpack::write_array_len(&mut out, self.nodes.len());
            for (first, node) in &self.nodes {
                msgpack::write_array_len(&mut out, 3);
                msgpack::write_bytes(&mut out, &first.text_bytes());
                write_int(&mut out, i64::try_from(node.appended).unwrap_or(i64::MAX));
                msgpack::write_bytes(&mut out, &node.last.text_bytes());
            }
        }
        msgpack::write_bytes(&mut out, KEY_GROUPS);
        msgpack::write_array_len(&mut out, self.groups.len());
        for (name, group) in &self.groups {
            encode_group(&mut out, name, group);
        }
        out
    }

    /// Decodes [`StreamValue::encoded`]'s layout, checking every invariant; `None` for
    /// anything else.
    fn decode_checked(value: &[u8]) -> Option<StreamValue> {
        let mut reader = Reader::new(value);
        let mut stream = StreamValue::default();
        let pairs = reader.map_len()?;
        let mut entries_added = None;
        let mut groups = Vec::new();
        let mut nodes = None;
        for _ in 0..pairs {
            let Scalar::Bytes(key) = reader.scalar()? else {
                return None;
            };
            match key {
                KEY_ENTRIES => decode_entries(&mut reader, &mut stream)?,
                KEY_LAST_ID => stream.last_id = read_id(&mut reader)?,
                KEY_ENTRIES_ADDED => entries_added = Some(read_int(&mut reader)?),
                KEY_MAX_DELETED_ID => stream.max_deleted_id = read_id(&mut reader)?,
                KEY_GROUPS => {
                    for _ in 0..reader.array_len()? {
                        groups.push(decode_group(&mut reader)?);
                    }
                }
                KEY_NODES => nodes = Some(decode_nodes(&mut reader)?),
                _ => return None,
            }
        }
        if !reader.is_done() || stream.last().is_some_and(|(id, _)| id > stream.last_id) {
            return None;
        }
        if let Some(nodes) = nodes {
            stream.restore_nodes(nodes)?;
        }
        stream.entries_added = entries_added.filter(|&added| added >= 0)?;
        for (name, group) in groups {
            if !stream.create_group(&name, group) {
                return None;
            }
        }
        Some(stream)
    }
}

fn write_int(out: &mut Vec<u8>, value: i64) {
    rmp::encode::write_sint(out, value).expect("writing to a Vec cannot fail");
}

fn read_int(reader: &mut Reader<'_>) -> Option<i64> {
    match reader.scalar()? {
        Scalar::Integer(value) => Some(value),
        _ => None,
    }
}

fn read_bytes(reader: &mut Reader<'_>) -> Option<Box<[u8]>> {
    match reader.scalar()? {
        Scalar::Bytes(bytes) => Some(bytes.into()),
        _ => None,
    }
}

fn read_id(reader: &mut Reader<'_>) -> Option<StreamId> {
    StreamId::parse(&read_bytes(reader)?, 0, true).ok()
}

fn decode_entries(reader: &mut Reader<'_>, stream: &mut StreamValue) -> Option<()> {
    for _ in 0..reader.array_len()? {
        if reader.array_len()? != 2 {
            return None;
        }
        let id = read_id(reader)?;
        let count = reader.array_len()?;
        if count == 0 || !count.is_multiple_of(2) {
            return None;
        }
        let fields = (0..count)
            .map(|_| read_bytes(reader))
            .collect::<Option<Fields>>()?;
        if stream.last().is_some_and(|(last, _)| last >= id) {
            return None;
        }
        stream.insert_last(id, fields, NODE_ENTRIES);
    }
    Some(())
}

/// The nodes of [`KEY_NODES`]: first id, appends taken, last id appended.
fn decode_nodes(reader: &mut Reader<'_>) -> Option<Vec<(StreamId, usize, StreamId)>> {
    (0..reader.array_len()?)
        .map(|_| {
            if reader.array_len()? != 3 {
                return None;
            }
            let first = read_id(reader)?;
            let appended = usize::try_from(read_int(reader)?).ok()?;
            Some((first, appended, read_id(reader)?))
        })
        .collect()
}

impl StreamValue {
    /// Puts back the node boundaries a value kept, in place of those its entries were cut
    /// into as they were decoded; `None` when they do not fit the entries (each node begins
    /// above the last one's last id, holds at least one live entry and no more than it took,
    /// and every entry falls in one).
    fn restore_nodes(&mut self, kept: Vec<(StreamId, usize, StreamId)>) -> Option<()> {
        let mut nodes = BTreeMap::new();
        let mut previous_last = None;
        for (first, appended, last) in kept {
            if previous_last.is_some_and(|previous| first <= previous) || last < first {
                return None;
            }
            let live = self.entries.range(first..=last).count();
            if live == 0 || live > appended {
                return None;
            }
            nodes.insert(
                first,
                Node {
                    appended,
                    live,
                    last,
                },
            );
            previous_last = Some(last);
        }
        let covered: usize = nodes.values().map(|node: &Node| node.live).sum();
        if covered != self.entries.len() {
            return None;
        }
        self.nodes = nodes;
        Some(())
    }
}

fn encode_group(out: &mut Vec<u8>, name: &[u8], group: &Group) {
    msgpack::write_array_len(out, 5);
    msgpack::write_bytes(out, name);
    msgpack::write_bytes(out, &group.last_id.text_bytes());
    write_int(out, group.entries_read.unwrap_or(-1));
    msgpack::write_array_len(out, group.pending.len());
    for (id, pending) in &group.pending {
        msgpack::write_array_len(out, 4);
        msgpack::write_bytes(out, &id.text_bytes());
        msgpack::write_bytes(out, &pending.consumer);
        write_int(out, pending.delivery_time_ms);
        write_int(
            out,
            i64::try_from(pending.delivery_count).unwrap_or(i64::MAX),
        );
    }
    msgpack::write_array_len(out, group.consumers.len());
    for (name, consumer) in &group.consumers {
        msgpack::write_array_len(out, 3);
        msgpack::write_bytes(out, name);
        write_int(out, consumer.seen_time_ms);
        write_int(out, consumer.active_time_ms);
    }
}

fn decode_group(reader: &mut Reader<'_>) -> Option<(Box<[u8]>, Group)> {
    if reader.array_len()? != 5 {
        return None;
    }
    let name = read_bytes(reader)?;
    let last_id = read_id(reader)?;
    let entries_read = match read_int(reader)? {
        -1 => None,
        read if read >= 0 => Some(read),
        _ => return None,
    };
    let mut group = Group::new(last_id, entries_read);
    let mut pending = Vec::new();
    for _ in 0..reader.array_len()? {
        if reader.array_len()? != 4 {
            return None;
        }
        let id = read_id(reader)?;
        let consumer = read_bytes(reader)?;
        let time_ms = read_int(reader)?;
        let count = u64::try_from(read_int(reader)?).ok()?;
        pending.push((id, consumer, time_ms, count));
    }
    for _ in 0..reader.array_len()? {
        if reader.array_len()? != 3 {
            return None;
        }
        let name = read_bytes(reader)?;
        let seen_time_ms = read_int(reader)?;
        let active_time_ms = read_int(reader)?;
        if !group.create_consumer(&name, seen_time_ms) {
            return None;
        }
        group
            .consumers
            .get_mut(&name)
            .expect("just created")
            .active_time_ms = active_time_ms;
    }
    for (id, consumer, time_ms, count) in pending {
        if !group.consumers.contains_key(&consumer) || group.pending.contains_key(&id) {
            return None;
        }
        group.deliver(id, &consumer, time_ms, count);
    }
    Some((name, group))
}

impl StreamValue {
    /// The stream an RDB file or dump carries; `None` when it breaks an invariant of this
    /// module (ids not increasing or above the last id, an entry without fields, a pending
    /// entry of an unknown consumer, two groups or consumers of one name).
    pub fn from_rdb(rdb: RdbStream) -> Option<StreamValue> {
        let mut stream = StreamValue::default();
        for (id, fields) in rdb.entries {
            if fields.is_empty() || !fields.len().is_multiple_of(2) {
                return None;
            }
            if stream.last().is_some_and(|(last, _)| last >= id) {
                return None;
            }
            let fields: Fields = fields.into_iter().map(Vec::into_boxed_slice).collect();
            stream.insert_last(id, fields, NODE_ENTRIES);
        }
        if stream.last().is_some_and(|(id, _)| id > rdb.last_id) || rdb.entries_added < 0 {
            return None;
        }
        stream.last_id = rdb.last_id;
        stream.entries_added = rdb.entries_added;
        stream.max_deleted_id = rdb.max_deleted_id;
        for rdb_group in rdb.groups {
            let name = rdb_group.name.clone();
            if !stream.create_group(&name, group_from_rdb(rdb_group)?) {
                return None;
            }
        }
        Some(stream)
    }

    /// The stream as an RDB file carries it.
    pub fn to_rdb(&self) -> RdbStream {
        let entries = self
            .entries
            .iter()
            .map(|(id, fields)| (*id, fields.iter().map(|f| f.to_vec()).collect()))
            .collect();
        let groups = self
            .groups
            .iter()
            .map(|(name, group)| group_to_rdb(name, group));
        RdbStream {
            entries,
            last_id: self.last_id,
            entries_added: self.entries_added,
            max_deleted_id: self.max_deleted_id,
            groups: groups.collect(),
        }
    }
}

fn group_from_rdb(rdb: RdbGroup) -> Option<Group> {
    let mut group = Group::new(rdb.last_id, rdb.entries_read);
    for consumer in &rdb.consumers {
        if !group.create_consumer(&consumer.name, consumer.seen_time_ms) {
            return None;
        }
        let created = group.consumers.get_mut(consumer.name.as_slice());
        created.expect("just created").active_time_ms = consumer.active_time_ms;
    }
    for pending in rdb.pending {
        let known = group.consumers.contains_key(pending.consumer.as_slice());
        if !known || group.pending.contains_key(&pending.id) {
            return None;
        }
        let (id, consumer) = (pending.id, &pending.consumer);
        group.deliver(
            id,
            consumer,
            pending.delivery_time_ms,
            pending.delivery_count,
        );
    }
    Some(group)
}

fn group_to_rdb(name: &[u8], group: &Group) -> RdbGroup {
    let pending = group.pending.iter().map(|(id, pending)| RdbPending {
        id: *id,
        consumer: pending.consumer.to_vec(),
        delivery_time_ms: pending.delivery_time_ms,
        delivery_count: pending.delivery_count,
    });
    let consumers = group.consumers.iter().map(|(name, consumer)| RdbConsumer {
        name: name.to_vec(),
        seen_time_ms: consumer.seen_time_ms,
        active_time_ms: consumer.active_time_ms,
    });
    RdbGroup {
        name: name.to_vec(),
        last_id: group.last_id,
        entries_read: group.entries_read,
        pending: pending.collect(),
        consumers: consumers.collect(),
    }
}

impl engine::NativeValue for StreamValue {
    fn write_bins(&self, out: &mut engine::BinWriter) {
        out.bin(Self::BIN, Self::PARTICLE as u8, &self.encoded());
    }

    fn size_bytes(&self) -> usize {
        self.size_bytes_estimate()
    }
}

impl StreamValue {
    /// Bytes it occupies, by the estimates above.
    fn size_bytes_estimate(&self) -> usize {
        self.entries_size_bytes + self.groups_size_bytes
    }
}

impl Collection for StreamValue {
    const BIN: &'static [u8] = b"stream";
    const PARTICLE: ParticleType = ParticleType::Map;
    const TYPE_NAME: &'static str = "stream";

    fn decode(value: &[u8]) -> Option<StreamValue> {
        StreamValue::decode_checked(value)
    }

    /// A stream is a value even with no entry (after XDEL, or XGROUP CREATE ... MKSTREAM), as
    /// in Redis: emptying one never deletes the key.
    fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    fn fields(pairs: &[&[u8]]) -> Fields {
        pairs.iter().map(|&b| Box::from(b)).collect()
    }

    #[test]
    fn a_stream_with_groups_round_trips_through_its_bin() {
        let mut stream = StreamValue::default();
        stream.append(id(1, 0), fields(&[b"a", b"1"]), NODE_ENTRIES);
        stream.append(id(2, 0), fields(&[b"b", &[0xff]]), NODE_ENTRIES);
        stream.delete(id(1, 0));
        let mut group = Group::new(id(2, 0), Some(2));
        group.create_consumer(b"alice", 10);
        group.deliver(id(2, 0), b"alice", 11, 3);
        assert!(stream.create_group(b"g", group));
        let size = stream.size_bytes_estimate();
        let decoded = StreamValue::decode(&stream.encoded()).expect("decodes");
        assert_eq!(decoded.encoded(), stream.encoded());
        assert_eq!(decoded.size_bytes_estimate(), size);
        assert_eq!(decoded.max_deleted_id, id(1, 0));
        let group = decoded.group(b"g").expect("group");
        assert_eq!(group.consumers[&b"alice"[..]].pending.len(), 1);
    }

    /// COPY, a restart and a replica decode a stream from its bin: its node boundaries used
    /// to be cut afresh at 100 entries, so a copy of a stream with small nodes answered XINFO
    /// (and approximate trims) unlike the original. They are kept in the bin now.
    #[test]
    fn node_boundaries_round_trip_through_the_bin() {
        let stream = stream_in_nodes_of_two(7);
        let decoded = StreamValue::decode(&stream.encoded()).expect("decodes");
        assert_eq!(decoded.nodes, stream.nodes);
        assert_eq!(decoded.node_count(), 4);
        // A bin without nodes (written before they were kept) still decodes, cut at 100.
        let decoded = StreamValue::decode(&stream.encoded_with(false)).expect("decodes");
        assert_eq!(decoded.node_count(), 1);
    }

    #[test]
    fn node_boundaries_that_do_not_fit_the_entries_are_refused() {
        // A node that took fewer appends than it holds live entries.
        let mut broken = stream_in_nodes_of_two(4);
        broken.nodes.values_mut().for_each(|node| node.appended = 1);
        assert!(StreamValue::decode(&broken.encoded()).is_none());
        // An entry no node holds.
        let mut broken = stream_in_nodes_of_two(4);
        broken.nodes.pop_first();
        assert!(StreamValue::decode(&broken.encoded()).is_none());
    }

    /// `count` entries in nodes of two, the third entry deleted.
    fn stream_in_nodes_of_two(count: u64) -> StreamValue {
        let mut stream = StreamValue::default();
        for ms in 1..=count {
            stream.append(id(ms, 0), fields(&[b"f", b"v"]), 2);
        }
        stream.delete(id(3, 0));
        stream
    }

    #[test]
    fn bins_that_break_an_invariant_are_refused() {
        let mut stream = StreamValue::default();
        stream.append(id(1, 0), fields(&[b"a", b"1"]), NODE_ENTRIES);
        stream.last_id = id(0, 5);
        assert!(StreamValue::decode(&stream.encoded()).is_none());
        assert!(StreamValue::decode(&[0x80]).is_none());
        assert!(StreamValue::decode(b"\x91\x01").is_none());
    }

    #[test]
    fn nodes_are_cut_at_the_node_size_in_force_when_an_entry_is_appended() {
        let mut stream = StreamValue::default();
        for ms in 1..=10 {
            stream.append(id(ms, 0), fields(&[b"f", b"v"]), 3);
        }
        assert_eq!(stream.node_count(), 4);
        for ms in 11..=20 {
            stream.append(id(ms, 0), fields(&[b"f", b"v"]), 0);
        }
        // The last node (one entry of size 3) took the ten appends without a bound.
        assert_eq!(stream.node_count(), 4);
    }

    #[test]
    fn trimming_keeps_what_it_must_and_sizes_stay_exact() {
        let mut stream = StreamValue::default();
        for ms in 1..=250 {
            stream.append(id(ms, 0), fields(&[b"f", b"v"]), NODE_ENTRIES);
        }
        let approx = Trim {
            strategy: Strategy::MaxLen(120),
            approx: true,
            limit: 0,
        };
        assert_eq!(stream.trim(&approx), 100);
        let exact = Trim {
            approx: false,
            ..approx
        };
        assert_eq!(stream.trim(&exact), 30);
        let min_id = Trim {
            strategy: Strategy::MinId(id(200, 0)),
            approx: false,
            limit: 0,
        };
        assert_eq!(stream.trim(&min_id), 69);
        assert_eq!(stream.len(), 51);
        assert_eq!(stream.node_count(), 2);
        let expected: usize = stream
            .range(StreamId::MIN, StreamId::MAX, false)
            .map(|(_, f)| entry_size(f))
            .sum();
        assert_eq!(stream.size_bytes_estimate(), expected);
    }

    #[test]
    fn approximate_trimming_removes_whole_nodes_as_redis_keeps_them() {
        // type/stream.tcl "XTRIM with MAXLEN option basic test": exact trims leave the first
        // node part deleted; `~` then counts only its live entries.
        let mut stream = StreamValue::default();
        for ms in 1..=1000 {
            stream.append(id(ms, 0), fields(&[b"f", b"v"]), NODE_ENTRIES);
        }
        let trim = |strategy, approx| Trim {
            strategy,
            approx,
            limit: 0,
        };
        assert_eq!(stream.trim(&trim(Strategy::MaxLen(666), false)), 334);
        assert_eq!(stream.trim(&trim(Strategy::MaxLen(555), false)), 111);
        assert_eq!(stream.trim(&trim(Strategy::MaxLen(444), true)), 55);
        assert_eq!(stream.len(), 500);
        assert_eq!(stream.trim(&trim(Strategy::MaxLen(400), true)), 100);
        assert_eq!(stream.len(), 400);
        // A node emptied by XDEL goes; appends fill the last node to its count of appends.
        for ms in 601..=700 {
            assert!(stream.delete(id(ms, 0)));
        }
        assert_eq!(stream.node_count(), 3);
        stream.append(id(1001, 0), fields(&[b"f", b"v"]), NODE_ENTRIES);
        assert_eq!(stream.node_count(), 4);
    }
}
