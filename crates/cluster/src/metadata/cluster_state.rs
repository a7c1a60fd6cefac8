//! The value of the metadata group's state machine, and how a command changes it.
//!
//! Invariants:
//! - `version` rises by exactly one per accepted command and per membership entry; a rejected
//!   command changes nothing, `version` included.
//! - A command is checked completely before anything is changed, so it applies all or nothing.
//! - Namespaces and partition tables sit behind `Arc`s and are copied on write, so publishing a
//!   new state to readers costs a shallow copy, not a copy of every table.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use openraft::Membership;
use serde::{Deserialize, Serialize};

use super::NodeId;
use super::command::{
    MetaCommand, MetaRejection, PartitionAssignment, PartitionTable, check_version,
};
use super::node_info::NodeInfo;
use crate::balance;

/// The cluster's shared state as committed by the metadata group.
///
/// Readers get it as an immutable `Arc` from [`super::MetaGroup::state`] or a subscription.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// Number of accepted commands and membership changes so far: the map version.
    pub version: u64,
    /// The group's voters (both halves of a joint configuration while one is in progress).
    pub voters: BTreeSet<NodeId>,
    /// The group's learners.
    pub learners: BTreeSet<NodeId>,
    /// Whether a joint configuration (a change of voters) is in progress.
    #[serde(default)]
    pub voters_changing: bool,
    /// The node roster, by `AddNode` / `RemoveNode`.
    pub nodes: BTreeMap<NodeId, NodeInfo>,
    /// Per-namespace metadata, by namespace name.
    pub namespaces: BTreeMap<String, Arc<NamespaceMeta>>,
    /// Roster nodes on their way out: no partition is placed on them, and once they hold
    /// none the leader removes them.
    #[serde(default)]
    pub leaving: BTreeSet<NodeId>,
    /// Registered UDF modules: file name to Lua source.
    #[serde(default)]
    pub udf_modules: BTreeMap<String, String>,
    /// The users, roles and session-token key, as the last node that changed them kept them
    /// (opaque here); `None` until a change was made on a cluster.
    #[serde(default)]
    pub security: Option<String>,
}

/// What the cluster agreed about one namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceMeta {
    /// The partition table, once one was committed.
    pub partitions: Option<Arc<PartitionTable>>,
    /// Secondary-index definitions, by index name (opaque to this crate).
    pub sindexes: BTreeMap<String, String>,
    /// Namespace-wide truncate mark, milliseconds since the Unix epoch (0: none).
    pub truncate_before_ms: u64,
    /// Per-set truncate marks, milliseconds since the Unix epoch.
    pub set_truncate_before_ms: BTreeMap<String, u64>,
    /// Per-set set-index switches.
    pub set_index_enabled: BTreeMap<String, bool>,
    /// Partitions whose move the balancer held back when it committed the table.
    #[serde(default)]
    pub moves_waiting: u64,
}

impl ClusterState {
    /// The metadata of `namespace`, if any command named it.
    pub fn namespace(&self, namespace: &str) -> Option<&NamespaceMeta> {
        self.namespaces.get(namespace).map(|meta| meta.as_ref())
    }

    /// The partition table of `namespace`, once one was committed.
    pub fn partition_table(&self, namespace: &str) -> Option<&PartitionTable> {
        self.namespace(namespace)?.partitions.as_deref()
    }

    /// Applies one command; on success the version rises by one.
    ///
    /// # Errors
    /// The [`MetaRejection`] that made the command change nothing.
    pub(crate) fn apply(&mut self, command: &MetaCommand) -> Result<(), MetaRejection> {
        self.apply_command(command)?;
        self.version += 1;
        Ok(())
    }

    /// Records a committed membership; the version rises by one.
    pub(crate) fn apply_membership(&mut self, membership: &Membership<NodeId, NodeInfo>) {
        self.voters = membership.voter_ids().collect();
        self.learners = membership.learner_ids().collect();
        self.voters_changing = membership.get_joint_config().len() > 1;
        self.version += 1;
    }

    fn apply_command(&mut self, command: &MetaCommand) -> Result<(), MetaRejection> {
        match command {
            MetaCommand::AddNode { id, info } => {
                let restarted = self
                    .nodes
                    .get(id)
                    .is_some_and(|known| known.boot_id != info.boot_id);
                self.nodes.insert(*id, info.clone());
                if restarted {
                    self.change_every_table(|assignment| balance::demoted(assignment, *id));
                }
                Ok(())
            }
            MetaCommand::RemoveNode { id } => match self.nodes.remove(id) {
                Some(_) => {
                    self.leaving.remove(id);
                    self.change_every_table(|assignment| balance::without(assignment, *id));
                    Ok(())
                }
                None => Err(MetaRejection::UnknownNode { id: *id }),
            },
            MetaCommand::SetPartitionTable {
                namespace,
                table,
                moves_waiting,
            } => {
                self.set_partition_table(namespace, table)?;
                self.namespace_mut(namespace).moves_waiting = *moves_waiting;
                Ok(())
            }
            MetaCommand::PartitionsFilled {
                namespace,
                node,
                partitions,
            } => self.change_reported(namespace, *node, partitions, balance::filled),
            MetaCommand::HandedOver {
                namespace,
                node,
                partitions,
            } => self.change_reported(namespace, *node, partitions, balance::handed_over),
            MetaCommand::SetNodeLeaving { id, leaving } => {
                if !self.nodes.contains_key(id) {
                    return Err(MetaRejection::UnknownNode { id: *id });
                }
                match leaving {
                    true => self.leaving.insert(*id),
                    false => self.leaving.remove(id),
                };
                Ok(())
            }
            MetaCommand::ChangePartitions {
                namespace,
                changes,
                moves_waiting,
            } => {
                self.change_partitions(namespace, changes)?;
                if let Some(moves_waiting) = moves_waiting {
                    self.namespace_mut(namespace).moves_waiting = *moves_waiting;
                }
                Ok(())
            }
            MetaCommand::PutSindex {
                namespace,
                name,
                definition,
            } => {
                let meta = self.namespace_mut(namespace);
                meta.sindexes.insert(name.clone(), definition.clone());
                Ok(())
            }
            MetaCommand::DropSindex { namespace, name } => self.drop_sindex(namespace, name),
            MetaCommand::PutUdf { name, source } => {
                self.udf_modules.insert(name.clone(), source.clone());
                Ok(())
            }
            MetaCommand::PutSecurity { tables } => {
                self.security = Some(tables.clone());
                Ok(())
            }
            MetaCommand::RemoveUdf { name } => {
                self.udf_modules.remove(name);
                Ok(())
            }
            MetaCommand::Truncate {
                namespace,
                set,
                before_ms,
            } => {
                self.truncate(namespace, set.as_deref(), *before_ms);
                Ok(())
            }
            MetaCommand::SetIndexSwitch {
                namespace,
                set,
                enabled,
            } => {
                let meta = self.namespace_mut(namespace);
                meta.set_index_enabled.insert(set.clone(), *enabled);
                Ok(())
            }
        }
    }

    fn set_partition_table(
        &mut self,
        namespace: &str,
        table: &PartitionTable,
    ) -> Result<(), MetaRejection> {
        if let Some(current) = self.partition_table(namespace) {
            let pairs = current.assignments().iter().zip(table.assignments());
            for (pid, (old, new)) in (0u16..).zip(pairs) {
                check_version(pid, old, new)?;
            }
        } else {
            let unassigned = PartitionAssignment::default();
            for (pid, new) in (0u16..).zip(table.assignments()) {
                check_version(pid, &unassigned, new)?;
            }
        }
        self.namespace_mut(namespace).partitions = Some(Arc::new(table.clone()));
        Ok(())
    }

    fn change_partitions(
        &mut self,
        namespace: &str,
        changes: &[(u16, PartitionAssignment)],
    ) -> Result<(), MetaRejection> {
        let Some(current) = self.partition_table(namespace) else {
            return Err(MetaRejection::NoPartitionTable {
                namespace: namespace.to_owned(),
            });
        };
        check_changes(current, changes)?;
        let meta = self.namespace_mut(namespace);
        let table = meta
            .partitions
            .as_mut()
            .expect("check_changes ran against this namespace's table");
        let table = Arc::make_mut(table);
        for (pid, assignment) in changes {
            table.set(*pid, assignment.clone());
        }
        Ok(())
    }

    /// Replaces every assignment, in every namespace, that `change` gives a new one for.
    fn change_every_table(
        &mut self,
        change: impl Fn(&PartitionAssignment) -> Option<PartitionAssignment>,
    ) {
        for meta in self.namespaces.values_mut() {
            let Some(table) = meta.partitions.as_ref() else {
                continue;
            };
            let changes: Vec<(u16, PartitionAssignment)> = (0u16..)
                .zip(table.assignments())
                .filter_map(|(pid, assignment)| change(assignment).map(|next| (pid, next)))
                .collect();
            if changes.is_empty() {
                continue;
            }
            let meta = Arc::make_mut(meta);
            let table = Arc::make_mut(meta.partitions.as_mut().expect("checked above"));
            for (pid, assignment) in changes {
                table.set(pid, assignment);
            }
        }
    }

    /// Applies a node's report on some partitions (`PartitionsFilled`, `HandedOver`): each
    /// `(partition, number)` that `change` accepts changes; the others are skipped.
    fn change_reported(
        &mut self,
        namespace: &str,
        node: NodeId,
        partitions: &[(u16, u64)],
        change: fn(&PartitionAssignment, u64, u64) -> Option<PartitionAssignment>,
    ) -> Result<(), MetaRejection> {
        if !self.nodes.contains_key(&node) {
            return Err(MetaRejection::UnknownNode { id: node });
        }
        let Some(current) = self.partition_table(namespace) else {
            return Err(MetaRejection::NoPartitionTable {
                namespace: namespace.to_owned(),
            });
        };
        let mut changes = Vec::new();
        for &(pid, number) in partitions {
            let Some(assignment) = current.get(pid) else {
                return Err(MetaRejection::PartitionOutOfRange { pid });
            };
            if changes.iter().any(|(seen, _)| *seen == pid) {
                return Err(MetaRejection::DuplicatePartition { pid });
            }
            if let Some(next) = change(assignment, node, number) {
                changes.push((pid, next));
            }
        }
        let meta = self.namespace_mut(namespace);
        let table = Arc::make_mut(meta.partitions.as_mut().expect("checked above"));
        for (pid, assignment) in changes {
            table.set(pid, assignment);
        }
        Ok(())
    }

    fn drop_sindex(&mut self, namespace: &str, name: &str) -> Result<(), MetaRejection> {
        let known = self
            .namespace(namespace)
            .is_some_and(|meta| meta.sindexes.contains_key(name));
        if !known {
            return Err(MetaRejection::UnknownSindex {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            });
        }
        self.namespace_mut(namespace).sindexes.remove(name);
        Ok(())
    }

    fn truncate(&mut self, namespace: &str, set: Option<&str>, before_ms: u64) {
        let meta = self.namespace_mut(namespace);
        let mark = match set {
            Some(set) => meta
                .set_truncate_before_ms
                .entry(set.to_owned())
                .or_default(),
            None => &mut meta.truncate_before_ms,
        };
        // A truncate never brings deleted records back, so the mark only moves forward.
        *mark = (*mark).max(before_ms);
    }

    fn namespace_mut(&mut self, namespace: &str) -> &mut NamespaceMeta {
        let shared = self.namespaces.entry(namespace.to_owned()).or_default();
        Arc::make_mut(shared)
    }
}

/// Checks every change of a `ChangePartitions` before any is applied.
fn check_changes(
    current: &PartitionTable,
    changes: &[(u16, PartitionAssignment)],
) -> Result<(), MetaRejection> {
    let mut seen = BTreeSet::new();
    for (pid, proposed) in changes {
        let Some(committed) = current.get(*pid) else {
            return Err(MetaRejection::PartitionOutOfRange { pid: *pid });
        };
        if !seen.insert(*pid) {
            return Err(MetaRejection::DuplicatePartition { pid: *pid });
        }
        check_version(*pid, committed, proposed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::command::ReplicaState;

    fn assignment(nodes: &[NodeId], version: u64) -> PartitionAssignment {
        PartitionAssignment {
            replicas: nodes.iter().map(|&n| (n, ReplicaState::Full)).collect(),
            version,
            master_since: version,
            handoff_to: Vec::new(),
        }
    }

    fn table_on(nodes: &[NodeId], version: u64) -> PartitionTable {
        let all = vec![assignment(nodes, version); model::PARTITION_COUNT];
        PartitionTable::new(all).expect("PARTITION_COUNT assignments")
    }

    #[test]
    fn accepted_commands_raise_the_version_and_rejected_ones_change_nothing() {
        let mut state = ClusterState::default();
        let add = MetaCommand::AddNode {
            id: 1,
            info: NodeInfo::default(),
        };
        assert_eq!(state.apply(&add), Ok(()));
        assert_eq!(state.version, 1);
        let before = state.clone();
        let remove_unknown = MetaCommand::RemoveNode { id: 9 };
        assert_eq!(
            state.apply(&remove_unknown),
            Err(MetaRejection::UnknownNode { id: 9 })
        );
        assert_eq!(state, before);
    }

    #[test]
    fn change_partitions_is_all_or_nothing_and_fenced_by_versions() {
        let mut state = ClusterState::default();
        let set = MetaCommand::SetPartitionTable {
            namespace: "test".into(),
            table: table_on(&[1, 2], 1),
            moves_waiting: 0,
        };
        assert_eq!(state.apply(&set), Ok(()));
        let before = state.clone();
        let mixed = MetaCommand::ChangePartitions {
            namespace: "test".into(),
            changes: vec![(0, assignment(&[2, 1], 2)), (1, assignment(&[2, 1], 1))],
            moves_waiting: None,
        };
        assert!(state.apply(&mixed).is_err());
        assert_eq!(state, before);
        let good = MetaCommand::ChangePartitions {
            namespace: "test".into(),
            changes: vec![(0, assignment(&[2, 1], 2))],
            moves_waiting: Some(3),
        };
        assert_eq!(state.apply(&good), Ok(()));
        assert_eq!(
            state.namespace("test").map(|meta| meta.moves_waiting),
            Some(3)
        );
        let table = state.partition_table("test").expect("table set above");
        assert_eq!(table.get(0), Some(&assignment(&[2, 1], 2)));
        assert_eq!(table.get(1), Some(&assignment(&[1, 2], 1)));
        // The earlier published state still shows the old table: copy on write.
        let old = before.partition_table("test").expect("table set above");
        assert_eq!(old.get(0), Some(&assignment(&[1, 2], 1)));
    }

    #[test]
    fn truncate_marks_only_move_forward_and_sindexes_drop_once() {
        let mut state = ClusterState::default();
        let truncate = |before_ms| MetaCommand::Truncate {
            namespace: "test".into(),
            set: Some("s".into()),
            before_ms,
        };
        assert_eq!(state.apply(&truncate(50)), Ok(()));
        assert_eq!(state.apply(&truncate(20)), Ok(()));
        let meta = state.namespace("test").expect("named above");
        assert_eq!(meta.set_truncate_before_ms.get("s"), Some(&50));
        let put = MetaCommand::PutSindex {
            namespace: "test".into(),
            name: "idx".into(),
            definition: "{}".into(),
        };
        let drop = MetaCommand::DropSindex {
            namespace: "test".into(),
            name: "idx".into(),
        };
        assert_eq!(state.apply(&put), Ok(()));
        assert_eq!(state.apply(&drop), Ok(()));
        assert!(state.apply(&drop).is_err());
    }

    /// Removing a node takes it out of every table in the same command (its partitions'
    /// next full copy is master at once, under a new fence); a member that comes back with
    /// another boot id fills again wherever another full copy exists.
    #[test]
    fn remove_node_strips_it_and_a_restart_makes_it_fill_again() {
        let mut state = ClusterState::default();
        for id in [1, 2] {
            let info = NodeInfo {
                boot_id: 7,
                ..NodeInfo::default()
            };
            assert_eq!(state.apply(&MetaCommand::AddNode { id, info }), Ok(()));
        }
        let set = MetaCommand::SetPartitionTable {
            namespace: "test".into(),
            table: table_on(&[1, 2], 1),
            moves_waiting: 0,
        };
        assert_eq!(state.apply(&set), Ok(()));
        let restarted = NodeInfo {
            boot_id: 8,
            ..NodeInfo::default()
        };
        let add = MetaCommand::AddNode {
            id: 1,
            info: restarted,
        };
        assert_eq!(state.apply(&add), Ok(()));
        let after_restart = state.partition_table("test").expect("set").get(0).cloned();
        let after_restart = after_restart.expect("partition 0");
        assert!(after_restart.has(1, ReplicaState::Filling));
        assert_eq!(after_restart.master(), Some(2));
        assert_eq!(after_restart.master_since, after_restart.version);
        assert_eq!(state.apply(&MetaCommand::RemoveNode { id: 2 }), Ok(()));
        let after_remove = state.partition_table("test").expect("set").get(0).cloned();
        let after_remove = after_remove.expect("partition 0");
        assert_eq!(after_remove.replicas, vec![(1, ReplicaState::Filling)]);
        assert_eq!(
            after_remove.master(),
            None,
            "no full copy left: nothing serves"
        );
    }
}
