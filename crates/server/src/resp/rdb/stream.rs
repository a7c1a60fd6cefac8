//! A stream in Redis's RDB encoding (`rdb.c`, `t_stream.c`): its entries as listpacks keyed
//! by their master id, then its counters, then its consumer groups with their pending entries
//! and consumers.
//!
//! Each listpack opens with a master entry (live count, deleted count, the master fields,
//! a 0), then holds entries of: flags, id as differences from the master id, the fields and
//! values (or only the values when the entry has the master's fields, `SAMEFIELDS`), and the
//! entry's element count. Entries flagged `DELETED` are skipped.
//!
//! Types read: 15 (Redis 5 to 6.2), 19 (7.0: adds first id, largest deleted id, entries added
//! and each group's read counter) and 21 (7.2: adds each consumer's active time). Written: 19,
//! one listpack per [`NODE_ENTRIES`] entries, every entry with its own fields.
//!
//! Invariants:
//! - Reading checks what can be checked here (listpack shape, counts, ids as 16 raw bytes, a
//!   consumer's pending ids among its group's); the stream's own invariants (ids increasing,
//!   a pending entry naming a consumer) are checked where the value is built
//!   (`StreamValue::from_rdb`).
//! - Nothing is allocated by a declared count: vectors grow as elements are read.

use super::super::streams::StreamId;
use super::{
    Input, ListpackItem, Reader, listpack_items, rdb_type, write_length, write_listpack,
    write_string,
};

/// Entries written in one listpack (Redis's `stream-node-max-entries` default).
const NODE_ENTRIES: usize = 100;

/// An entry flag: the entry is deleted.
const FLAG_DELETED: i64 = 1;
/// An entry flag: the entry has the master entry's fields, and only its values are written.
const FLAG_SAME_FIELDS: i64 = 2;

/// Redis's read counter "unknown" (`SCG_INVALID_ENTRIES_READ`, -1) as an RDB length.
const ENTRIES_READ_UNKNOWN: u64 = u64::MAX;

/// A stream as an RDB file carries it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RdbStream {
    /// Entries in id order: the id, then fields and values alternating.
    pub entries: Vec<(StreamId, Vec<Vec<u8>>)>,
    /// The last id added.
    pub last_id: StreamId,
    /// Entries ever added.
    pub entries_added: i64,
    /// The largest id deleted; `0-0` for none.
    pub max_deleted_id: StreamId,
    /// Consumer groups.
    pub groups: Vec<RdbGroup>,
}

/// A consumer group as an RDB file carries it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RdbGroup {
    /// Its name.
    pub name: Vec<u8>,
    /// The last id delivered to it.
    pub last_id: StreamId,
    /// Entries it has read; `None` when unknown.
    pub entries_read: Option<i64>,
    /// Its pending entries, in id order.
    pub pending: Vec<RdbPending>,
    /// Its consumers.
    pub consumers: Vec<RdbConsumer>,
}

/// A pending entry: delivered and not acknowledged.
#[derive(Clone, Debug, PartialEq)]
pub struct RdbPending {
    /// The entry's id.
    pub id: StreamId,
    /// The consumer holding it.
    pub consumer: Vec<u8>,
    /// When it was last delivered, Unix milliseconds.
    pub delivery_time_ms: i64,
    /// How many times it was delivered.
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Clone, Debug, PartialEq)]
pub struct RdbConsumer {
    /// Its name.
    pub name: Vec<u8>,
    /// Its last attempted interaction, Unix milliseconds.
    pub seen_time_ms: i64,
    /// Its last successful interaction, Unix milliseconds; -1 for never.
    pub active_time_ms: i64,
}

/// Reads a stream of RDB type `value_type` (15, 19 or 21), its type byte already read.
pub(super) fn read<I: Input>(reader: &mut Reader<I>, value_type: u8) -> Option<RdbStream> {
    let mut stream = RdbStream::default();
    for _ in 0..reader.length()? {
        let master = raw_id(&reader.string()?)?;
        read_node(&reader.string()?, master, &mut stream.entries)?;
    }
    let length = reader.length_u64()?;
    if length != stream.entries.len() as u64 {
        return None;
    }
    stream.last_id = id_of_lengths(reader)?;
    if value_type == rdb_type::STREAM_LISTPACKS {
        stream.entries_added = i64::try_from(length).ok()?;
    } else {
        let _first_id = id_of_lengths(reader)?;
        stream.max_deleted_id = id_of_lengths(reader)?;
        stream.entries_added = i64::try_from(reader.length_u64()?).ok()?;
    }
    for _ in 0..reader.length()? {
        stream.groups.push(read_group(reader, value_type)?);
    }
    Some(stream)
}

/// An id as two RDB lengths (milliseconds, sequence).
fn id_of_lengths<I: Input>(reader: &mut Reader<I>) -> Option<StreamId> {
    Some(StreamId {
        ms: reader.length_u64()?,
        seq: reader.length_u64()?,
    })
}

/// An id as 16 raw bytes, both parts big-endian (a node's key, a pending entry's id).
fn raw_id(bytes: &[u8]) -> Option<StreamId> {
    let bytes: [u8; 16] = bytes.try_into().ok()?;
    let (ms, seq) = bytes.split_at(8);
    Some(StreamId {
        ms: u64::from_be_bytes(ms.try_into().ok()?),
        seq: u64::from_be_bytes(seq.try_into().ok()?),
    })
}

fn write_raw_id(out: &mut Vec<u8>, id: StreamId) {
    out.extend_from_slice(&id.ms.to_be_bytes());
    out.extend_from_slice(&id.seq.to_be_bytes());
}

/// Walks a node's listpack items in order; every method answers `None` past the end.
struct Items<'a> {
    items: std::vec::IntoIter<ListpackItem<'a>>,
}

impl Items<'_> {
    fn integer(&mut self) -> Option<i64> {
        match self.items.next()? {
            ListpackItem::Integer(value) => Some(value),
            ListpackItem::Bytes(_) => None,
        }
    }

    fn count(&mut self) -> Option<usize> {
        usize::try_from(self.integer()?).ok()
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        Some(self.items.next()?.into_bytes())
    }
}

/// Appends the live entries of one node (its listpack `bytes`, master id `master`).
fn read_node(
    bytes: &[u8],
    master: StreamId,
    entries: &mut Vec<(StreamId, Vec<Vec<u8>>)>,
) -> Option<()> {
    let mut items = Items {
        items: listpack_items(bytes)?.into_iter(),
    };
    let live = items.count()?;
    let deleted = items.count()?;
    let master_field_count = items.count()?;
    let master_fields = (0..master_field_count)
        .map(|_| items.bytes())
        .collect::<Option<Vec<_>>>()?;
    if items.integer()? != 0 {
        return None;
    }
    let mut live_seen = 0;
    for _ in 0..live.checked_add(deleted)? {
        let flags = items.integer()?;
        // Differences from the master id, added as Redis adds them (unsigned, wrapping: an
        // entry's sequence may be below the master's).
        let id = StreamId {
            ms: master.ms.wrapping_add(items.integer()? as u64),
            seq: master.seq.wrapping_add(items.integer()? as u64),
        };
        let fields = if flags & FLAG_SAME_FIELDS != 0 {
            let mut fields = Vec::new();
            for field in &master_fields {
                fields.push(field.clone());
                fields.push(items.bytes()?);
            }
            fields
        } else {
            let count = items.count()?;
            (0..count.checked_mul(2)?)
                .map(|_| items.bytes())
                .collect::<Option<Vec<_>>>()?
        };
        let _element_count = items.integer()?;
        if flags & FLAG_DELETED == 0 {
            live_seen += 1;
            entries.push((id, fields));
        }
    }
    (items.items.next().is_none() && live_seen == live).then_some(())
}

fn read_group<I: Input>(reader: &mut Reader<I>, value_type: u8) -> Option<RdbGroup> {
    let mut group = RdbGroup {
        name: reader.string()?,
        last_id: id_of_lengths(reader)?,
        ..RdbGroup::default()
    };
    if value_type != rdb_type::STREAM_LISTPACKS {
        group.entries_read = match reader.length_u64()? {
            ENTRIES_READ_UNKNOWN => None,
            read => Some(i64::try_from(read).ok()?),
        };
    }
    for _ in 0..reader.length()? {
        let id = raw_id(reader.take(16)?)?;
        let delivery_time_ms = i64::from_le_bytes(reader.array()?);
        let delivery_count = reader.length_u64()?;
        group.pending.push(RdbPending {
            id,
            consumer: Vec::new(),
            delivery_time_ms,
            delivery_count,
        });
    }
    for _ in 0..reader.length()? {
        let name = reader.string()?;
        let seen_time_ms = i64::from_le_bytes(reader.array()?);
        let active_time_ms = if value_type == rdb_type::STREAM_LISTPACKS_3 {
            i64::from_le_bytes(reader.array()?)
        } else {
            // Redis 7.2's estimate for a file without it.
            seen_time_ms
        };
        for _ in 0..reader.length()? {
            let id = raw_id(reader.take(16)?)?;
            let index = group.pending.binary_search_by(|p| p.id.cmp(&id)).ok()?;
            let pending = &mut group.pending[index];
            if !pending.consumer.is_empty() {
                return None;
            }
            pending.consumer.clone_from(&name);
        }
        group.consumers.push(RdbConsumer {
            name,
            seen_time_ms,
            active_time_ms,
        });
    }
    // Redis writes the pending entries in id order; one no consumer holds is corrupt.
    let sorted = group.pending.windows(2).all(|pair| pair[0].id < pair[1].id);
    (sorted && group.pending.iter().all(|p| !p.consumer.is_empty())).then_some(group)
}

/// Writes `stream` as type 19 (its type byte already written).
pub(super) fn write(out: &mut Vec<u8>, stream: &RdbStream) {
    let nodes = stream.entries.chunks(NODE_ENTRIES);
    write_length(out, nodes.len() as u64);
    for node in nodes {
        let mut key = Vec::with_capacity(16);
        write_raw_id(&mut key, node[0].0);
        write_string(out, &key);
        write_string(out, &node_listpack(node));
    }
    write_length(out, stream.entries.len() as u64);
    write_id_lengths(out, stream.last_id);
    write_id_lengths(
        out,
        stream.entries.first().map_or(StreamId::MIN, |(id, _)| *id),
    );
    write_id_lengths(out, stream.max_deleted_id);
    write_length(out, u64::try_from(stream.entries_added).unwrap_or(0));
    write_length(out, stream.groups.len() as u64);
    for group in &stream.groups {
        write_group(out, group);
    }
}

fn write_id_lengths(out: &mut Vec<u8>, id: StreamId) {
    write_length(out, id.ms);
    write_length(out, id.seq);
}

/// The listpack of a node's entries (at least one): the first entry's id is the master id,
/// its fields the master fields; every entry is written with its own fields.
fn node_listpack(node: &[(StreamId, Vec<Vec<u8>>)]) -> Vec<u8> {
    let master = node[0].0;
    let master_fields: Vec<&[u8]> = node[0].1.iter().step_by(2).map(Vec::as_slice).collect();
    let mut items = vec![
        ListpackItem::Integer(node.len() as i64),
        ListpackItem::Integer(0),
        ListpackItem::Integer(master_fields.len() as i64),
    ];
    items.extend(master_fields.iter().map(|f| ListpackItem::Bytes(f)));
    items.push(ListpackItem::Integer(0));
    for (id, fields) in node {
        let field_count = fields.len() / 2;
        items.push(ListpackItem::Integer(0));
        items.push(ListpackItem::Integer(id_difference(id.ms, master.ms)));
        items.push(ListpackItem::Integer(id_difference(id.seq, master.seq)));
        items.push(ListpackItem::Integer(field_count as i64));
        items.extend(fields.iter().map(|f| ListpackItem::Bytes(f)));
        // The entry's element count after the flags: id (2), field count, fields and values.
        items.push(ListpackItem::Integer(3 + fields.len() as i64));
    }
    write_listpack(&items)
}

/// A part of an id less the master's, as Redis writes it (a 64-bit integer in the listpack,
/// wrapping as Redis's unsigned subtraction does).
fn id_difference(part: u64, master: u64) -> i64 {
    part.wrapping_sub(master) as i64
}

fn write_group(out: &mut Vec<u8>, group: &RdbGroup) {
    write_string(out, &group.name);
    write_id_lengths(out, group.last_id);
    let entries_read = group
        .entries_read
        .and_then(|read| u64::try_from(read).ok())
        .unwrap_or(ENTRIES_READ_UNKNOWN);
    write_length(out, entries_read);
    write_length(out, group.pending.len() as u64);
    for pending in &group.pending {
        write_raw_id(out, pending.id);
        out.extend_from_slice(&pending.delivery_time_ms.to_le_bytes());
        write_length(out, pending.delivery_count);
    }
    write_length(out, group.consumers.len() as u64);
    for consumer in &group.consumers {
        write_string(out, &consumer.name);
        out.extend_from_slice(&consumer.seen_time_ms.to_le_bytes());
        let held: Vec<StreamId> = group
            .pending
            .iter()
            .filter(|p| p.consumer == consumer.name)
            .map(|p| p.id)
            .collect();
        write_length(out, held.len() as u64);
        held.iter().for_each(|id| write_raw_id(out, *id));
    }
}
