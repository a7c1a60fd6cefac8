//! The commands the metadata group commits, and what applying one returns.
//!
//! Invariants:
//! - A [`PartitionTable`] always has exactly [`PARTITION_COUNT`] assignments; deserializing one of
//!   another length fails.
//! - Commands are deterministic: applying the same command to the same state gives the same state
//!   and the same outcome on every node.
//! - Commands are idempotent in effect (setting a value, not adding to it), so a proposal retried
//!   after an unclear failure does no harm beyond one more version.

use model::PARTITION_COUNT;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::NodeId;
use super::compact_rows;
use super::node_info::NodeInfo;

/// A replica's role in its partition's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReplicaState {
    /// Holds every acknowledged write; may serve reads and become master.
    Full,
    /// Receiving the partition (migration); takes replica writes but is not yet complete.
    Filling,
}

/// One partition's configuration: its replicas in order and the version that fences it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionAssignment {
    /// The replicas in order; the first `Full` one is the master.
    pub replicas: Vec<(NodeId, ReplicaState)>,
    /// The configuration version, carried by every replica write; never decreases.
    pub version: u64,
    /// The version at which the current master became master: replicas take replica writes
    /// carrying this version or a later one, so changes that keep the master (a replica
    /// added, filled or dropped) do not fail the master's writes in flight, while a deposed
    /// master's writes (older versions) are refused.
    #[serde(default)]
    pub master_since: u64,
    /// While not empty, the master hands the partition over: it takes no new writes, and
    /// once the writes it has in flight are settled it reports itself drained
    /// (`HandedOver`), and the assignment becomes this list. So a master never changes while
    /// the old one has writes half replicated, which would leave copies that differ.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handoff_to: Vec<(NodeId, ReplicaState)>,
}

impl PartitionAssignment {
    /// The master: the first `Full` replica.
    pub fn master(&self) -> Option<NodeId> {
        self.replicas
            .iter()
            .find(|(_, state)| *state == ReplicaState::Full)
            .map(|(node, _)| *node)
    }

    /// Whether the master is handing the partition over.
    pub fn is_handing_off(&self) -> bool {
        !self.handoff_to.is_empty()
    }

    /// This assignment with the master handing the partition over to `next`: the same
    /// replicas under a new version, the master unchanged.
    pub fn handing_off_to(&self, next: Vec<(NodeId, ReplicaState)>) -> PartitionAssignment {
        PartitionAssignment {
            replicas: self.replicas.clone(),
            version: self.version + 1,
            master_since: self.master_since,
            handoff_to: next,
        }
    }

    /// Whether `node` is a replica here in `state`.
    pub fn has(&self, node: NodeId, state: ReplicaState) -> bool {
        self.replicas.contains(&(node, state))
    }

    /// `replicas` as the assignment that follows this one: the version rises if the list
    /// changed, and `master_since` moves to the new version if the master changed.
    pub fn followed_by(&self, replicas: Vec<(NodeId, ReplicaState)>) -> PartitionAssignment {
        if replicas == self.replicas {
            return self.clone();
        }
        let version = self.version + 1;
        let mut next = PartitionAssignment {
            replicas,
            version,
            master_since: self.master_since,
            handoff_to: Vec::new(),
        };
        if next.master() != self.master() {
            next.master_since = version;
        }
        next
    }
}

/// A namespace's partition table: one assignment per partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionTable {
    assignments: Vec<PartitionAssignment>,
}

/// What one command changes; sent as the Raft request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaCommand {
    /// Adds a node to the roster, or updates its addresses.
    AddNode {
        /// The node.
        id: NodeId,
        /// Its addresses.
        info: NodeInfo,
    },
    /// Removes a node from the roster.
    RemoveNode {
        /// The node.
        id: NodeId,
    },
    /// Replaces a namespace's whole partition table (committed only when it changes).
    SetPartitionTable {
        /// The namespace.
        namespace: String,
        /// The new table.
        table: PartitionTable,
        /// Partitions whose move the balancer holds back until moves in progress finish.
        #[serde(default)]
        moves_waiting: u64,
    },
    /// A node finished filling partitions: each `(partition, master_since)` whose node is
    /// still `Filling` there under the same master becomes `Full`; others (the master changed
    /// since the fill began, or the node no longer fills it) are skipped.
    PartitionsFilled {
        /// The namespace.
        namespace: String,
        /// The node that filled them.
        node: NodeId,
        /// `(partition id, master_since of the assignment the fill began under)`.
        partitions: Vec<(u16, u64)>,
    },
    /// A master drained partitions it was handing over: each `(partition, version)` whose
    /// assignment is still that version, handing over from `node`, takes its `handoff_to`
    /// list; others are skipped.
    HandedOver {
        /// The namespace.
        namespace: String,
        /// The master that drained them.
        node: NodeId,
        /// `(partition id, version of the handing-over assignment)`.
        partitions: Vec<(u16, u64)>,
    },
    /// Marks a node as leaving (its partitions move away, then it is removed) or not.
    SetNodeLeaving {
        /// The node.
        id: NodeId,
        /// Whether it leaves.
        leaving: bool,
    },
    /// Changes some partitions of a namespace that already has a table, all or none.
    ChangePartitions {
        /// The namespace.
        namespace: String,
        /// `(partition id, new assignment)`; each partition at most once.
        #[serde(with = "compact_rows")]
        changes: Vec<(u16, PartitionAssignment)>,
        /// The balancer's count of held-back moves after this change (`None`: unchanged).
        #[serde(default)]
        moves_waiting: Option<u64>,
    },
    /// Adds or replaces a secondary-index definition.
    PutSindex {
        /// The namespace.
        namespace: String,
        /// The index name, unique in the namespace.
        name: String,
        /// The definition, opaque to the metadata group.
        definition: String,
    },
    /// Drops a secondary index.
    DropSindex {
        /// The namespace.
        namespace: String,
        /// The index name.
        name: String,
    },
    /// Registers (or replaces) a UDF module.
    PutUdf {
        /// The module's file name.
        name: String,
        /// Its Lua source, compiled by the node that took the `udf-put`.
        source: String,
    },
    /// Replaces the users, roles and session-token key with those a node just changed: its
    /// security tables in their kept form (opaque to the metadata group). The last committed
    /// wins whole.
    PutSecurity {
        /// The tables, as the `security` crate keeps them.
        tables: String,
    },
    /// Removes a UDF module (nothing when it is not registered).
    RemoveUdf {
        /// The module's file name.
        name: String,
    },
    /// Marks records last updated before `before_ms` as deleted, in a set or the namespace.
    Truncate {
        /// The namespace.
        namespace: String,
        /// The set, or `None` for the whole namespace.
        set: Option<String>,
        /// Milliseconds since the Unix epoch; a lower mark than the current one changes nothing.
        before_ms: u64,
    },
    /// Turns a set's set index on or off.
    SetIndexSwitch {
        /// The namespace.
        namespace: String,
        /// The set.
        set: String,
        /// Whether the set index is kept.
        enabled: bool,
    },
}

/// Why the state machine refused a command (it then changes nothing).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum MetaRejection {
    /// `RemoveNode` of a node that is not in the roster.
    #[error("node {id} is not in the roster")]
    UnknownNode {
        /// The node.
        id: NodeId,
    },
    /// A partition table whose length is not the partition count.
    #[error("a partition table needs {PARTITION_COUNT} assignments, got {count}")]
    PartitionCountMismatch {
        /// The length given.
        count: usize,
    },
    /// A partition id at or above the partition count.
    #[error("partition {pid} is out of range")]
    PartitionOutOfRange {
        /// The partition id.
        pid: u16,
    },
    /// The same partition twice in one `ChangePartitions`.
    #[error("partition {pid} appears twice in one change")]
    DuplicatePartition {
        /// The partition id.
        pid: u16,
    },
    /// `ChangePartitions` on a namespace without a table.
    #[error("namespace {namespace} has no partition table")]
    NoPartitionTable {
        /// The namespace.
        namespace: String,
    },
    /// An assignment that changes without raising the version, or that lowers it.
    #[error("partition {pid}: version {proposed} does not follow {current}")]
    VersionNotRaised {
        /// The partition id.
        pid: u16,
        /// The committed version.
        current: u64,
        /// The proposed version.
        proposed: u64,
    },
    /// An assignment whose `master_since` is not its version when the master changes, or not
    /// the committed one when it does not.
    #[error("partition {pid}: master_since {proposed} does not follow the master")]
    FenceNotFollowed {
        /// The partition id.
        pid: u16,
        /// The proposed `master_since`.
        proposed: u64,
    },
    /// `DropSindex` of an index that does not exist.
    #[error("namespace {namespace} has no secondary index {name}")]
    UnknownSindex {
        /// The namespace.
        namespace: String,
        /// The index name.
        name: String,
    },
}

/// What applying one log entry returned (openraft's response type).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaResponse {
    /// [`super::ClusterState::version`] after the entry.
    pub version: u64,
    /// Whether the command was accepted.
    pub outcome: Result<(), MetaRejection>,
}

impl PartitionTable {
    /// A table from one assignment per partition.
    ///
    /// # Errors
    /// [`MetaRejection::PartitionCountMismatch`] unless there are exactly [`PARTITION_COUNT`].
    pub fn new(assignments: Vec<PartitionAssignment>) -> Result<Self, MetaRejection> {
        if assignments.len() != PARTITION_COUNT {
            return Err(MetaRejection::PartitionCountMismatch {
                count: assignments.len(),
            });
        }
        Ok(Self { assignments })
    }

    /// A table where no partition has replicas, every version 0.
    pub fn unassigned() -> Self {
        Self {
            assignments: vec![PartitionAssignment::default(); PARTITION_COUNT],
        }
    }

    /// The assignment of partition `pid`, or `None` when `pid` is out of range.
    pub fn get(&self, pid: u16) -> Option<&PartitionAssignment> {
        self.assignments.get(usize::from(pid))
    }

    /// Every assignment, indexed by partition id.
    pub fn assignments(&self) -> &[PartitionAssignment] {
        &self.assignments
    }

    /// Replaces one assignment; the caller has checked `pid` and the version rule.
    pub(crate) fn set(&mut self, pid: u16, assignment: PartitionAssignment) {
        let slot = self
            .assignments
            .get_mut(usize::from(pid))
            .expect("the caller checked the partition id against PARTITION_COUNT");
        *slot = assignment;
    }
}

/// A table is written in the compact form (`compact_rows.rs`): about 44 KB instead of 290 KB
/// of JSON, small enough for an append message to cross a slow link in time.
impl Serialize for PartitionTable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let rows: compact_rows::Rows = (0_u16..).zip(self.assignments.iter().cloned()).collect();
        compact_rows::encode(&rows).serialize(serializer)
    }
}

/// What a table may be read from: the compact form, or the JSON array of assignments written
/// before it.
#[derive(Deserialize)]
#[serde(untagged)]
enum TableForm {
    Compact(compact_rows::Compact),
    Json(Vec<PartitionAssignment>),
}

impl<'de> Deserialize<'de> for PartitionTable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let assignments = match TableForm::deserialize(deserializer)? {
            TableForm::Json(assignments) => assignments,
            TableForm::Compact(compact) => {
                let rows = compact_rows::decode(&compact).map_err(serde::de::Error::custom)?;
                let in_order = rows
                    .iter()
                    .enumerate()
                    .all(|(i, (pid, _))| usize::from(*pid) == i);
                if !in_order {
                    return Err(serde::de::Error::custom("a table's rows are out of order"));
                }
                rows.into_iter().map(|(_, assignment)| assignment).collect()
            }
        };
        PartitionTable::new(assignments).map_err(serde::de::Error::custom)
    }
}

/// Checks that `proposed` may follow `current` for partition `pid`: an unchanged assignment
/// keeps its version or raises it; a changed one must raise it.
pub(crate) fn check_version(
    pid: u16,
    current: &PartitionAssignment,
    proposed: &PartitionAssignment,
) -> Result<(), MetaRejection> {
    let unchanged = current.replicas == proposed.replicas;
    let raised = proposed.version > current.version;
    let kept = proposed.version == current.version;
    let master_changed = proposed.master() != current.master();
    let fence_follows = match master_changed {
        true => proposed.master_since == proposed.version,
        false => proposed.master_since == current.master_since,
    };
    if !(raised || (unchanged && kept)) {
        return Err(MetaRejection::VersionNotRaised {
            pid,
            current: current.version,
            proposed: proposed.version,
        });
    }
    if !fence_follows {
        return Err(MetaRejection::FenceNotFollowed {
            pid,
            proposed: proposed.master_since,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(nodes: &[NodeId], version: u64) -> PartitionAssignment {
        PartitionAssignment {
            replicas: nodes.iter().map(|&n| (n, ReplicaState::Full)).collect(),
            version,
            master_since: version,
            handoff_to: Vec::new(),
        }
    }

    #[test]
    fn partition_table_rejects_a_wrong_length_and_round_trips_through_json() {
        let short = PartitionTable::new(vec![PartitionAssignment::default(); 3]);
        assert_eq!(
            short,
            Err(MetaRejection::PartitionCountMismatch { count: 3 })
        );
        let mut table = PartitionTable::unassigned();
        table.set(7, assignment(&[1, 2], 3));
        let json = serde_json::to_string(&table).expect("a table serializes");
        let back: PartitionTable = serde_json::from_str(&json).expect("and deserializes");
        assert_eq!(back, table);
        let bad: Result<PartitionTable, _> = serde_json::from_str("[]");
        assert!(bad.is_err());
    }

    #[test]
    fn version_rule_accepts_raises_and_unchanged_and_refuses_silent_changes() {
        let current = assignment(&[1, 2], 5);
        assert!(check_version(0, &current, &assignment(&[1, 2], 5)).is_ok());
        assert!(check_version(0, &current, &assignment(&[2, 1], 6)).is_ok());
        assert!(check_version(0, &current, &assignment(&[2, 1], 5)).is_err());
        assert!(check_version(0, &current, &assignment(&[1, 2], 4)).is_err());
    }
}
