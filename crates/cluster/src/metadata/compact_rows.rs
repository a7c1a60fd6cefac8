//! A compact encoding of partition assignments for the metadata log: the first partition table
//! of a namespace, and the rows a `ChangePartitions` changes.
//!
//! In JSON, one assignment took about 100 bytes (node ids of up to 20 digits, field names), so
//! a whole table was about 290 KB: one log entry that an append message could not carry across
//! a link of 8 Mbit/s within openraft's deadline, the heartbeat interval (150 ms), so a node
//! behind such a link never caught up (docs/reliability.md, the bandwidth cap). Here the node
//! ids are listed once and each row is a few bytes: about 8 per row at replication factor 2,
//! 44 KB of base64 for a whole table.
//!
//! The encoded form is a JSON object, `{"nodes": [id, ...], "rows": "<base64>"}`; the rows are,
//! one after the other: the partition id (2 bytes, little-endian), the version and the
//! version since which the master is master (LEB128), then the replicas and the hand-off
//! list, each a count (1 byte) and per entry the node's index in `nodes` (LEB128) and its
//! state (1 byte: 0 full, 1 filling).
//!
//! Invariants:
//! - Decoding reads only what the bytes hold: every count and index is checked against what
//!   remains and against `nodes`, nothing is allocated by a count before its bytes are read,
//!   and trailing bytes are an error.
//! - The older form, a JSON array of rows, still decodes, so logs and snapshots written before
//!   this encoding open.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::NodeId;
use super::command::{PartitionAssignment, ReplicaState};

/// Rows by partition id, as `ChangePartitions` and a whole table carry them.
pub(crate) type Rows = Vec<(u16, PartitionAssignment)>;

/// The encoded form.
#[derive(Serialize, Deserialize)]
pub(crate) struct Compact {
    nodes: Vec<NodeId>,
    rows: String,
}

/// What may be read: the compact form, or the older JSON array.
#[derive(Deserialize)]
#[serde(untagged)]
enum AnyForm {
    Compact(Compact),
    Json(Rows),
}

/// Serializes `rows` in the compact form.
pub(crate) fn serialize<S: Serializer>(rows: &Rows, serializer: S) -> Result<S::Ok, S::Error> {
    encode(rows).serialize(serializer)
}

/// Deserializes rows from either form.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Rows, D::Error> {
    match AnyForm::deserialize(deserializer)? {
        AnyForm::Json(rows) => Ok(rows),
        AnyForm::Compact(compact) => decode(&compact).map_err(serde::de::Error::custom),
    }
}

/// `rows` in the compact form.
pub(crate) fn encode(rows: &Rows) -> Compact {
    let mut nodes: Vec<NodeId> = Vec::new();
    let mut bytes = Vec::with_capacity(rows.len() * 10);
    let mut index_of = |node: NodeId| match nodes.iter().position(|known| *known == node) {
        Some(index) => index,
        None => {
            nodes.push(node);
            nodes.len() - 1
        }
    };
    for (pid, assignment) in rows {
        bytes.extend_from_slice(&pid.to_le_bytes());
        put_varint(&mut bytes, assignment.version);
        put_varint(&mut bytes, assignment.master_since);
        for list in [&assignment.replicas, &assignment.handoff_to] {
            let count = u8::try_from(list.len()).expect("a partition has fewer than 256 replicas");
            bytes.push(count);
            for (node, state) in list {
                put_varint(&mut bytes, index_of(*node) as u64);
                bytes.push(match state {
                    ReplicaState::Full => 0,
                    ReplicaState::Filling => 1,
                });
            }
        }
    }
    Compact {
        nodes,
        rows: BASE64.encode(bytes),
    }
}

/// The rows `compact` holds.
pub(crate) fn decode(compact: &Compact) -> Result<Rows, String> {
    let bytes = BASE64
        .decode(&compact.rows)
        .map_err(|error| format!("partition rows: {error}"))?;
    let mut reader = Reader {
        bytes: &bytes,
        nodes: &compact.nodes,
    };
    let mut rows = Vec::new();
    while !reader.bytes.is_empty() {
        rows.push(reader.row()?);
    }
    Ok(rows)
}

/// Reads rows from the front of `bytes`.
struct Reader<'a> {
    bytes: &'a [u8],
    nodes: &'a [NodeId],
}

impl Reader<'_> {
    fn row(&mut self) -> Result<(u16, PartitionAssignment), String> {
        let pid = u16::from_le_bytes([self.byte()?, self.byte()?]);
        let version = self.varint()?;
        let master_since = self.varint()?;
        let replicas = self.list()?;
        let handoff_to = self.list()?;
        let assignment = PartitionAssignment {
            replicas,
            version,
            master_since,
            handoff_to,
        };
        Ok((pid, assignment))
    }

    fn list(&mut self) -> Result<Vec<(NodeId, ReplicaState)>, String> {
        let count = self.byte()?;
        // Each entry takes at least two bytes: a count the bytes cannot hold is refused before
        // anything is allocated for it.
        if usize::from(count) * 2 > self.bytes.len() {
            return Err("partition rows: a replica count runs past the end".to_owned());
        }
        let mut list = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let index = usize::try_from(self.varint()?).unwrap_or(usize::MAX);
            let node = *self
                .nodes
                .get(index)
                .ok_or_else(|| format!("partition rows: node index {index} is not listed"))?;
            let state = match self.byte()? {
                0 => ReplicaState::Full,
                1 => ReplicaState::Filling,
                other => return Err(format!("partition rows: replica state {other}")),
            };
            list.push((node, state));
        }
        Ok(list)
    }

    fn byte(&mut self) -> Result<u8, String> {
        let (&first, rest) = self
            .bytes
            .split_first()
            .ok_or_else(|| "partition rows: cut short".to_owned())?;
        self.bytes = rest;
        Ok(first)
    }

    /// An unsigned LEB128 number of at most 10 bytes.
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0_u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("partition rows: a number runs past 64 bits".to_owned())
    }
}

fn put_varint(bytes: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        bytes.push((value as u8) | 0x80);
        value >>= 7;
    }
    bytes.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        pid: u16,
        version: u64,
        replicas: &[(NodeId, ReplicaState)],
    ) -> (u16, PartitionAssignment) {
        let assignment = PartitionAssignment {
            replicas: replicas.to_vec(),
            version,
            master_since: version.saturating_sub(1),
            handoff_to: replicas.iter().rev().copied().collect(),
        };
        (pid, assignment)
    }

    #[test]
    fn rows_round_trip_through_the_compact_form() {
        let rows = vec![
            row(
                0,
                1,
                &[(u64::MAX, ReplicaState::Full), (7, ReplicaState::Filling)],
            ),
            row(4095, 300_000, &[(7, ReplicaState::Full)]),
            row(17, 0, &[]),
        ];
        let json = serde_json::to_value(Compact::from_rows(&rows)).unwrap();
        assert_eq!(
            decode(&serde_json::from_value(json).unwrap()).unwrap(),
            rows
        );
    }

    #[test]
    fn the_older_json_array_still_decodes() {
        let rows = vec![row(
            3,
            2,
            &[(1, ReplicaState::Full), (2, ReplicaState::Full)],
        )];
        let old = serde_json::to_string(&rows).unwrap();
        let mut deserializer = serde_json::Deserializer::from_str(&old);
        assert_eq!(deserialize(&mut deserializer).unwrap(), rows);
    }

    #[test]
    fn a_whole_table_is_a_few_bytes_per_partition() {
        let nodes = [0xA1_u64 << 40, 0xB2 << 40, 0xC3 << 40];
        let rows: Rows = (0..4096_u16)
            .map(|pid| {
                let pair = [
                    (nodes[usize::from(pid) % 3], ReplicaState::Full),
                    (nodes[(usize::from(pid) + 1) % 3], ReplicaState::Full),
                ];
                let (pid, mut assignment) = row(pid, 1, &pair);
                assignment.handoff_to.clear();
                (pid, assignment)
            })
            .collect();
        let text = serde_json::to_string(&Compact::from_rows(&rows)).unwrap();
        let old = serde_json::to_string(&rows).unwrap();
        assert!(text.len() < 64 * 1024, "{} bytes", text.len());
        assert!(
            text.len() * 4 < old.len(),
            "{} against {}",
            text.len(),
            old.len()
        );
    }

    #[test]
    fn damaged_rows_are_refused_without_a_panic() {
        let rows = vec![row(
            9,
            5,
            &[(1, ReplicaState::Full), (2, ReplicaState::Filling)],
        )];
        let compact = Compact::from_rows(&rows);
        let bytes = BASE64.decode(&compact.rows).unwrap();
        for cut in 0..bytes.len() {
            let damaged = Compact {
                nodes: compact.nodes.clone(),
                rows: BASE64.encode(&bytes[..cut]),
            };
            if cut > 0 {
                assert!(decode(&damaged).is_err(), "cut at {cut} decoded");
            }
        }
        let mut bad_index = bytes.clone();
        bad_index[5] = 0x7f;
        let damaged = Compact {
            nodes: compact.nodes.clone(),
            rows: BASE64.encode(&bad_index),
        };
        assert!(decode(&damaged).is_err());
        let huge_count = Compact {
            nodes: vec![1],
            rows: BASE64.encode([1, 0, 1, 1, 0xff]),
        };
        assert!(decode(&huge_count).is_err());
    }

    impl Compact {
        fn from_rows(rows: &Rows) -> Compact {
            encode(rows)
        }
    }
}
