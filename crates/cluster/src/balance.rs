//! The balancer: which nodes should hold each partition, as a partition table to commit.
//!
//! The target of every partition is Aerospike's rendezvous order over the cluster's nodes
//! ([`crate::placement`]), cut at the effective replication factor, so a join or a leave
//! changes only the rows the node enters or leaves. The balancer proposes; the metadata group
//! commits, and every node then takes its roles from the committed table.
//!
//! Invariants:
//! - A partition's version rises (by one) exactly when its replica list changes, and never
//!   falls: it is the fencing token replica writes carry.
//! - In a namespace's first table every replica is `Full` (there is no data yet to fill); in
//!   later tables a node new to a partition is `Filling` until a migration fills it, and a
//!   partition keeps its first `Full` replica (the one holding every acknowledged write) at the
//!   head while any `Filling` node precedes it in the target order.

use model::{NodeId, PartitionId};

use crate::metadata::{MetaRejection, PartitionAssignment, PartitionTable, ReplicaState};
use crate::placement::{PlacementError, Succession};

/// Why no table could be computed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BalanceError {
    /// The nodes cannot be placed.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// The computed table is invalid (a bug).
    #[error("invalid table: {0}")]
    Table(#[from] MetaRejection),
}

/// The table that places every partition of a namespace on `nodes` with `replication_factor`
/// copies (capped by the node count), starting from `previous` (the committed table, if any).
///
/// # Errors
/// Too many nodes to place.
pub fn balanced_table(
    nodes: &[NodeId],
    replication_factor: usize,
    previous: Option<&PartitionTable>,
) -> Result<PartitionTable, BalanceError> {
    let succession = Succession::new(nodes.iter().copied())?;
    let target = succession.replica_table(replication_factor);
    let assignments = PartitionId::all()
        .map(|pid| {
            let wanted = target.replicas(pid);
            let before = previous.and_then(|table| table.get(pid.0));
            assignment(wanted, before)
        })
        .collect();
    Ok(PartitionTable::new(assignments)?)
}

/// One partition's assignment: `wanted` (target order), given what it was.
fn assignment(wanted: &[NodeId], before: Option<&PartitionAssignment>) -> PartitionAssignment {
    let Some(before) = before.filter(|before| !before.replicas.is_empty()) else {
        return PartitionAssignment {
            replicas: wanted.iter().map(|n| (n.0, ReplicaState::Full)).collect(),
            version: 1,
        };
    };
    let state_before = |node: NodeId| {
        before
            .replicas
            .iter()
            .find(|(id, _)| *id == node.0)
            .map(|(_, state)| *state)
    };
    let mut replicas: Vec<(u64, ReplicaState)> = wanted
        .iter()
        .map(|&node| (node.0, state_before(node).unwrap_or(ReplicaState::Filling)))
        .collect();
    keep_a_full_master(&mut replicas, before);
    let version = match replicas == before.replicas {
        true => before.version,
        false => before.version + 1,
    };
    PartitionAssignment { replicas, version }
}

/// If no wanted replica is `Full`, the previous master (the first full one) stays on as master
/// until a migration fills the new ones: it alone holds every acknowledged write.
fn keep_a_full_master(replicas: &mut Vec<(u64, ReplicaState)>, before: &PartitionAssignment) {
    if replicas
        .iter()
        .any(|(_, state)| *state == ReplicaState::Full)
    {
        return;
    }
    if let Some(master) = before
        .replicas
        .iter()
        .find(|(_, state)| *state == ReplicaState::Full)
    {
        replicas.insert(0, *master);
    }
}

/// The master of an assignment: its first `Full` replica.
pub fn master_of(assignment: &PartitionAssignment) -> Option<u64> {
    assignment
        .replicas
        .iter()
        .find(|(_, state)| *state == ReplicaState::Full)
        .map(|(node, _)| *node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(ids: &[u64]) -> Vec<NodeId> {
        ids.iter().map(|&id| NodeId(id)).collect()
    }

    #[test]
    fn a_first_table_places_full_replicas_at_version_one() {
        let table = balanced_table(&nodes(&[0xA1, 0xA2, 0xA3]), 2, None).expect("placed");
        let mut masters = [0usize; 3];
        for assignment in table.assignments() {
            assert_eq!(assignment.version, 1);
            assert_eq!(assignment.replicas.len(), 2);
            assert!(
                assignment
                    .replicas
                    .iter()
                    .all(|(_, s)| *s == ReplicaState::Full)
            );
            let master = master_of(assignment).expect("a master");
            masters[(master - 0xA1) as usize] += 1;
        }
        assert_eq!(masters.iter().sum::<usize>(), 4096);
        assert!(masters.iter().all(|&count| count > 1200), "{masters:?}");
    }

    #[test]
    fn the_replication_factor_is_capped_by_the_node_count() {
        let table = balanced_table(&nodes(&[0xA1]), 2, None).expect("placed");
        assert!(table.assignments().iter().all(|a| a.replicas.len() == 1));
    }

    #[test]
    fn rebalancing_the_same_nodes_changes_nothing() {
        let first = balanced_table(&nodes(&[0xA1, 0xA2, 0xA3]), 2, None).expect("placed");
        let again = balanced_table(&nodes(&[0xA3, 0xA1, 0xA2]), 2, Some(&first)).expect("placed");
        assert_eq!(first, again);
    }

    /// A node joining takes only its rows, as `Filling`, under a new version; where it would be
    /// the only copy wanted in front, the old full master stays at the head.
    #[test]
    fn a_joining_node_fills_only_its_rows_under_new_versions() {
        let first = balanced_table(&nodes(&[0xA1, 0xA2]), 2, None).expect("placed");
        let joined = balanced_table(&nodes(&[0xA1, 0xA2, 0xA3]), 2, Some(&first)).expect("placed");
        let mut changed = 0;
        for (before, after) in first.assignments().iter().zip(joined.assignments()) {
            let has_new = after.replicas.iter().any(|(node, _)| *node == 0xA3);
            assert_eq!(has_new, after != before);
            if has_new {
                changed += 1;
                assert_eq!(after.version, before.version + 1);
                assert!(after.replicas.contains(&(0xA3, ReplicaState::Filling)));
                let master = master_of(after).expect("a full master remains");
                assert!(before.replicas.contains(&(master, ReplicaState::Full)));
            }
        }
        assert!(
            (2000..3500).contains(&changed),
            "{changed} of 4096 rows changed"
        );
    }
}
