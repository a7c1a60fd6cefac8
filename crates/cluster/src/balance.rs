//! The balancer: which nodes should hold each partition, as a partition table to commit.
//!
//! The target of every partition is Aerospike's rendezvous order over the cluster's placing
//! nodes ([`crate::placement`]), cut at the effective replication factor, so a join or a leave
//! changes only the rows the node enters or leaves. The balancer proposes; the metadata group
//! commits, and every node then takes its roles from the committed table.
//!
//! A move is made in steps, each one committed table: the new replica joins as `Filling`
//! (its master streams the partition to it and sends it every write meanwhile), the filled
//! node reports itself (`PartitionsFilled`) and becomes `Full`, and only when every wanted
//! replica is `Full` does the table take the target order, handing the master role over and
//! dropping the copies no longer wanted. Until then the partition's master stays where it was
//! and the old copies stay in the list, so the partition never has fewer full copies than
//! before the move began. Where the master changes, it hands over first: the table marks the
//! handover (`handoff_to`), the old master stops taking writes and reports once its writes in
//! flight are settled (`HandedOver`), and only then does the list change.
//!
//! Invariants:
//! - A partition's version rises (by one) exactly when its replica list changes, and never
//!   falls: it is the fencing token replica writes carry. `master_since` is the version at
//!   which the master last changed ([`PartitionAssignment::followed_by`]).
//! - In a namespace's first table every replica is `Full` (there is no data yet to fill); in
//!   later tables a node new to a partition is `Filling` until it reports itself filled.
//! - Only roster nodes hold partitions; a node leaving the roster leaves every list at once
//!   (the metadata group strips it when it removes the node).
//! - While any wanted replica fills, the master does not change (if it is still a member) and
//!   no `Full` copy is dropped.
//! - At most `moves_max` partitions have a replica filling at once; further moves wait.

use std::collections::BTreeSet;

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

/// What the balancer works from.
#[derive(Clone, Debug)]
pub struct BalanceInput<'a> {
    /// The nodes partitions are placed on (the roster less the nodes leaving it).
    pub placing: &'a [NodeId],
    /// Every roster node: nodes outside it hold nothing.
    pub roster: &'a BTreeSet<u64>,
    /// Copies per partition (capped by the number of placing nodes).
    pub replication_factor: usize,
    /// The committed table, if any.
    pub previous: Option<&'a PartitionTable>,
    /// Most partitions with a replica filling at once.
    pub moves_max: usize,
}

/// A table to commit, and how many moves it holds back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Balanced {
    /// The table.
    pub table: PartitionTable,
    /// Partitions whose move waits for moves in progress to finish.
    pub moves_waiting: u64,
}

/// The table that places every partition of a namespace on `nodes` with `replication_factor`
/// copies (capped by the node count), starting from `previous` (the committed table, if any),
/// with no limit on moves and every node a roster member.
///
/// # Errors
/// Too many nodes to place.
pub fn balanced_table(
    nodes: &[NodeId],
    replication_factor: usize,
    previous: Option<&PartitionTable>,
) -> Result<PartitionTable, BalanceError> {
    let roster: BTreeSet<u64> = nodes.iter().map(|n| n.0).collect();
    let input = BalanceInput {
        placing: nodes,
        roster: &roster,
        replication_factor,
        previous,
        moves_max: usize::MAX,
    };
    Ok(balance(&input)?.table)
}

/// The next table for `input`.
///
/// # Errors
/// Too many nodes to place.
pub fn balance(input: &BalanceInput<'_>) -> Result<Balanced, BalanceError> {
    let succession = Succession::new(input.placing.iter().copied())?;
    let target = succession.replica_table(input.replication_factor);
    let filling_now = input.previous.map_or(0, |table| {
        table
            .assignments()
            .iter()
            .filter(|a| a.replicas.iter().any(|(_, s)| *s == ReplicaState::Filling))
            .count()
    });
    let mut budget = input.moves_max.saturating_sub(filling_now);
    let mut moves_waiting = 0;
    let assignments = PartitionId::all()
        .map(|pid| {
            let wanted = target.replicas(pid);
            let before = input.previous.and_then(|table| table.get(pid.0));
            let Some(before) = before.filter(|before| !before.replicas.is_empty()) else {
                return first_assignment(wanted);
            };
            let (next, waited) = assignment(wanted, before, input.roster, &mut budget);
            moves_waiting += u64::from(waited);
            next
        })
        .collect();
    Ok(Balanced {
        table: PartitionTable::new(assignments)?,
        moves_waiting,
    })
}

/// A partition's first assignment: every wanted replica full, at version one.
fn first_assignment(wanted: &[NodeId]) -> PartitionAssignment {
    PartitionAssignment {
        replicas: wanted.iter().map(|n| (n.0, ReplicaState::Full)).collect(),
        version: 1,
        master_since: 1,
        handoff_to: Vec::new(),
    }
}

/// One partition's next assignment towards `wanted` (target order), given `before`; and
/// whether a move it needs was held back for want of `budget`.
fn assignment(
    wanted: &[NodeId],
    before: &PartitionAssignment,
    roster: &BTreeSet<u64>,
    budget: &mut usize,
) -> (PartitionAssignment, bool) {
    if before.is_handing_off() {
        // The master drains first; the list changes when it reports (`HandedOver`).
        return (before.clone(), false);
    }
    let kept: Vec<(u64, ReplicaState)> = before
        .replicas
        .iter()
        .copied()
        .filter(|(node, _)| roster.contains(node))
        .collect();
    let state_before = |node: NodeId| kept.iter().find(|(id, _)| *id == node.0).map(|(_, s)| *s);
    let target: Vec<(u64, ReplicaState)> = wanted
        .iter()
        .map(|&node| (node.0, state_before(node).unwrap_or(ReplicaState::Filling)))
        .collect();
    let adds_a_fill = wanted.iter().any(|&node| state_before(node).is_none());
    if adds_a_fill && *budget == 0 {
        return (before.followed_by(kept), true);
    }
    if adds_a_fill {
        *budget -= 1;
    }
    let all_full = target.iter().all(|(_, s)| *s == ReplicaState::Full);
    let master_moves = target.first().map(|(node, _)| *node) != before.master();
    if all_full && master_moves && target != before.replicas {
        return (before.handing_off_to(target), false);
    }
    if all_full {
        return (before.followed_by(target), false);
    }
    (before.followed_by(while_filling(target, &kept)), false)
}

/// The list while some wanted replica fills: the current master first (if it is still a
/// member), then the wanted replicas, then every other full copy, kept until the fills end.
fn while_filling(
    target: Vec<(u64, ReplicaState)>,
    kept: &[(u64, ReplicaState)],
) -> Vec<(u64, ReplicaState)> {
    let master = kept.iter().find(|(_, s)| *s == ReplicaState::Full).copied();
    let mut replicas: Vec<(u64, ReplicaState)> = master.into_iter().collect();
    let mut push = |entry: (u64, ReplicaState)| {
        if !replicas.iter().any(|(node, _)| *node == entry.0) {
            replicas.push(entry);
        }
    };
    target.into_iter().for_each(&mut push);
    kept.iter()
        .copied()
        .filter(|(_, s)| *s == ReplicaState::Full)
        .for_each(push);
    replicas
}

/// `node` restarted and may have lost what it held: where another full copy exists, it fills
/// again (the master moves on if it was the master). `None` when nothing changes.
pub fn demoted(assignment: &PartitionAssignment, node: u64) -> Option<PartitionAssignment> {
    let others_full = assignment
        .replicas
        .iter()
        .any(|(id, s)| *id != node && *s == ReplicaState::Full);
    if !others_full || !assignment.has(node, ReplicaState::Full) {
        return None;
    }
    Some(assignment.followed_by(with_state(assignment, node, ReplicaState::Filling)))
}

/// `node` left the roster: the assignment without it. `None` when it held no copy.
pub fn without(assignment: &PartitionAssignment, node: u64) -> Option<PartitionAssignment> {
    if !assignment.replicas.iter().any(|(id, _)| *id == node) {
        return None;
    }
    let replicas = assignment
        .replicas
        .iter()
        .copied()
        .filter(|(id, _)| *id != node)
        .collect();
    Some(assignment.followed_by(replicas))
}

/// `node` filled the partition under the master of `master_since`: it becomes `Full`, after
/// the master if it stood before it. `None` when it does not fill it or the master changed
/// since.
///
/// The master never changes here: it changes only through a handover, which waits until
/// the old master's replica writes in flight are answered. A node that restarted while it was
/// master fills again where it stood, first in the list (`demoted`); becoming `Full` there
/// made it master at once, the fence rose, and a write the old master was still replicating
/// to it was refused by the new fence and stayed on the old master alone: the two copies
/// differed for good (the fault suite's bandwidth-cap test, restart variant, seed
/// 2041149876). The balancer then hands the master role over, with the drain.
pub fn filled(
    assignment: &PartitionAssignment,
    node: u64,
    master_since: u64,
) -> Option<PartitionAssignment> {
    if assignment.master_since != master_since || !assignment.has(node, ReplicaState::Filling) {
        return None;
    }
    let mut replicas = with_state(assignment, node, ReplicaState::Full);
    if let Some(master) = assignment.master()
        && first_full(&replicas) != Some(master)
    {
        let at = replicas.iter().position(|(id, _)| *id == node)?;
        let entry = replicas.remove(at);
        let master_at = replicas.iter().position(|(id, _)| *id == master)?;
        replicas.insert(master_at + 1, entry);
    }
    Some(assignment.followed_by(replicas))
}

/// The first `Full` node of `replicas`: the master of a list.
fn first_full(replicas: &[(u64, ReplicaState)]) -> Option<u64> {
    replicas
        .iter()
        .find(|(_, state)| *state == ReplicaState::Full)
        .map(|(id, _)| *id)
}

/// `assignment`'s replicas, in order, with `node` in `state`.
fn with_state(
    assignment: &PartitionAssignment,
    node: u64,
    state: ReplicaState,
) -> Vec<(u64, ReplicaState)> {
    assignment
        .replicas
        .iter()
        .map(|&(id, was)| (id, if id == node { state } else { was }))
        .collect()
}

/// `node`, the master, drained the partition it was handing over in `version`: the
/// assignment takes its `handoff_to` list. `None` when that handover is not the one pending.
pub fn handed_over(
    assignment: &PartitionAssignment,
    node: u64,
    version: u64,
) -> Option<PartitionAssignment> {
    let pending = assignment.is_handing_off()
        && assignment.version == version
        && assignment.master() == Some(node);
    pending.then(|| assignment.followed_by(assignment.handoff_to.clone()))
}

/// The master of an assignment: its first `Full` replica.
pub fn master_of(assignment: &PartitionAssignment) -> Option<u64> {
    assignment.master()
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

    /// Marks every filling replica of `table` full, as the nodes' reports would.
    fn fill_everything(table: &PartitionTable) -> PartitionTable {
        let assignments = table
            .assignments()
            .iter()
            .map(|a| {
                let mut next = a.clone();
                for (node, state) in &a.replicas {
                    if *state == ReplicaState::Filling {
                        next = filled(&next, *node, next.master_since).expect("filling");
                    }
                }
                next
            })
            .collect();
        PartitionTable::new(assignments).expect("4096")
    }

    /// A join moves a partition in steps: the new node fills while the old master and every
    /// old full copy stay; once it is full the table takes the target order, and the master
    /// (with `master_since`) changes only then, at most once.
    #[test]
    fn a_move_keeps_the_master_and_the_old_copies_until_the_new_replica_is_full() {
        let first = balanced_table(&nodes(&[0xA1, 0xA2]), 2, None).expect("placed");
        let during = balanced_table(&nodes(&[0xA1, 0xA2, 0xA3]), 2, Some(&first)).expect("placed");
        let filled_table = fill_everything(&during);
        let handing =
            balanced_table(&nodes(&[0xA1, 0xA2, 0xA3]), 2, Some(&filled_table)).expect("placed");
        let again = balanced_table(&nodes(&[0xA1, 0xA2, 0xA3]), 2, Some(&handing)).expect("placed");
        assert_eq!(again, handing, "a handover waits for the master to drain");
        let drained = handing
            .assignments()
            .iter()
            .map(|a| match a.is_handing_off() {
                true => handed_over(a, a.master().unwrap(), a.version).expect("pending"),
                false => a.clone(),
            })
            .collect();
        let after = PartitionTable::new(drained).expect("4096");
        let target = balanced_table(&nodes(&[0xA1, 0xA2, 0xA3]), 2, None).expect("placed");
        for pid in 0..4096u16 {
            let (b, d, f, a) = (
                first.get(pid).unwrap(),
                during.get(pid).unwrap(),
                filled_table.get(pid).unwrap(),
                after.get(pid).unwrap(),
            );
            assert_eq!(
                d.master(),
                b.master(),
                "pid {pid}: the master stays while filling"
            );
            assert_eq!(d.master_since, b.master_since);
            for full in b.replicas.iter().filter(|(_, s)| *s == ReplicaState::Full) {
                assert!(
                    d.replicas.contains(full),
                    "pid {pid}: a full copy was dropped early"
                );
            }
            assert_eq!(f.master(), b.master());
            let h = handing.get(pid).unwrap();
            assert_eq!(
                h.master(),
                b.master(),
                "pid {pid}: the master stays while it drains"
            );
            assert_eq!(h.master_since, b.master_since);
            if h.is_handing_off() {
                assert_eq!(
                    h.replicas, f.replicas,
                    "pid {pid}: nothing moves during a handover"
                );
                assert_eq!(
                    handed_over(h, h.master().unwrap(), h.version - 1),
                    None,
                    "stale report"
                );
            }
            let wanted: Vec<u64> = target
                .get(pid)
                .unwrap()
                .replicas
                .iter()
                .map(|(n, _)| *n)
                .collect();
            let now: Vec<u64> = a.replicas.iter().map(|(n, _)| *n).collect();
            assert_eq!(now, wanted, "pid {pid}: the target order once filled");
            assert!(a.replicas.iter().all(|(_, s)| *s == ReplicaState::Full));
            match a.master() == b.master() {
                true => assert_eq!(a.master_since, b.master_since),
                false => assert_eq!(a.master_since, a.version),
            }
        }
    }

    /// At most `moves_max` partitions fill at once; the rest wait, counted.
    #[test]
    fn moves_wait_for_the_budget() {
        let first = balanced_table(&nodes(&[0xA1, 0xA2]), 2, None).expect("placed");
        let roster = BTreeSet::from([0xA1, 0xA2, 0xA3]);
        let placing = nodes(&[0xA1, 0xA2, 0xA3]);
        let input = BalanceInput {
            placing: &placing,
            roster: &roster,
            replication_factor: 2,
            previous: Some(&first),
            moves_max: 100,
        };
        let batch = balance(&input).expect("placed");
        let filling = |t: &PartitionTable| {
            t.assignments()
                .iter()
                .filter(|a| a.replicas.iter().any(|(_, s)| *s == ReplicaState::Filling))
                .count()
        };
        assert_eq!(filling(&batch.table), 100);
        assert!(batch.moves_waiting > 1000, "{}", batch.moves_waiting);
        let again = balance(&BalanceInput {
            previous: Some(&batch.table),
            ..input.clone()
        })
        .expect("placed");
        assert_eq!(
            again.table, batch.table,
            "nothing more moves while 100 fill"
        );
        let filled_table = fill_everything(&batch.table);
        let next = balance(&BalanceInput {
            previous: Some(&filled_table),
            ..input
        })
        .expect("placed");
        assert_eq!(filling(&next.table), 100);
        assert_eq!(next.moves_waiting, batch.moves_waiting - 100);
    }

    /// A node that leaves the roster leaves every list at once: its partitions' first full
    /// copy is master under a new `master_since`, and the balancer then adds a filling copy.
    #[test]
    fn a_removed_master_is_replaced_by_its_full_replica_under_a_new_fence() {
        let first = balanced_table(&nodes(&[0xA1, 0xA2, 0xA3]), 2, None).expect("placed");
        for a in first.assignments() {
            let Some(next) = without(a, 0xA1) else {
                assert!(a.replicas.iter().all(|(n, _)| *n != 0xA1));
                continue;
            };
            assert_eq!(next.version, a.version + 1);
            assert_eq!(next.replicas.len(), 1);
            match a.master() == Some(0xA1) {
                true => assert_eq!(next.master_since, next.version),
                false => assert_eq!(next.master_since, a.master_since),
            }
        }
    }

    /// A restarted node fills again where another full copy exists, and keeps a partition
    /// it alone holds.
    #[test]
    fn a_restarted_node_fills_again_unless_it_holds_the_only_copy() {
        let both = first_assignment(&nodes(&[0xA1, 0xA2]));
        let demoted_master = demoted(&both, 0xA1).expect("another full copy exists");
        assert!(demoted_master.has(0xA1, ReplicaState::Filling));
        assert_eq!(demoted_master.master(), Some(0xA2));
        assert_eq!(demoted_master.master_since, demoted_master.version);
        let alone = first_assignment(&nodes(&[0xA1]));
        assert_eq!(demoted(&alone, 0xA1), None);
        let refilled = filled(&demoted_master, 0xA1, demoted_master.master_since).expect("fills");
        assert!(refilled.has(0xA1, ReplicaState::Full));
        // Filled, it does not take the master role back at once: the replica writes the
        // master still has in flight to it would be refused by a new fence.
        assert_eq!(refilled.master(), Some(0xA2));
        assert_eq!(refilled.master_since, demoted_master.master_since);
        // The balancer moves it back through a handover, which drains those writes first.
        let roster = BTreeSet::from([0xA1, 0xA2]);
        let (next, _) = assignment(&nodes(&[0xA1, 0xA2]), &refilled, &roster, &mut 1);
        assert!(next.is_handing_off());
        assert_eq!(next.master(), Some(0xA2));
        let handed = handed_over(&next, 0xA2, next.version).expect("the pending handover");
        assert_eq!(handed.master(), Some(0xA1));
        assert_eq!(
            filled(&demoted_master, 0xA1, 1),
            None,
            "a fill under an older master"
        );
    }
}
