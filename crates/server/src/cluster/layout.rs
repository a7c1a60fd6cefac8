//! The map as this node uses it: the committed state of the metadata group, turned into routes,
//! claims and roles for this node.
//!
//! Invariants:
//! - A layout is immutable once built; a new committed state gives a new layout, swapped in
//!   whole, so a reader never sees half of a change.
//! - This node claims a column of a partition only where the table makes it a `Full` replica
//!   in that position: a filling replica claims nothing, so clients never read from it.
//! - While a partition's master hands it over, no node's role is `Master` for it and no
//!   node routes its writes anywhere: writes wait for the next map.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cluster::balance::master_of;
use cluster::metadata::{
    ClusterState, NodeInfo, PartitionAssignment, PartitionTable, ReplicaState,
};
use engine::PartitionRole;
use model::{NodeId, PartitionId};
use wire_aerospike::cluster_map::{NamespaceClaims, PartitionBitmap};

use super::view::Route;

/// One committed state, seen from one node.
#[derive(Debug, Default)]
pub struct Layout {
    /// The metadata version it was built from (0: none yet).
    pub version: u64,
    /// The roster.
    pub nodes: BTreeMap<u64, NodeInfo>,
    /// Per namespace, its committed table.
    pub tables: HashMap<String, Arc<PartitionTable>>,
    /// Per namespace, what this node claims.
    pub claims: HashMap<String, NamespaceClaims>,
    /// Partition moves the balancer holds back, over every namespace.
    moves_waiting: u64,
    /// Roster nodes leaving the cluster.
    leaving_count: usize,
    /// Per namespace (a handful: found by comparing names), where each partition's requests
    /// run, worked out once per state so that routing a request is an index.
    routes: Vec<(String, Box<[PartitionRoutes]>)>,
    /// Per namespace, the counts the statistics and the migration task ask for often (every
    /// info request, every 2 ms while a handover drains): worked out once per state.
    moves: HashMap<String, TableMoves>,
}

/// What moves in one namespace's table, seen from one node.
#[derive(Debug, Default)]
struct TableMoves {
    /// Partitions with a replica filling or a master handing over.
    moving: u64,
    /// Partitions this node fills.
    incoming: u64,
    /// The partitions this node fills from a known master, with that master and the
    /// version since which it is master.
    filling_here: Vec<(PartitionId, u64, u64)>,
    /// Partitions this node masters that another node fills.
    outgoing: u64,
    /// Partitions by how many copies they have.
    by_copies: BTreeMap<usize, u64>,
    /// Partitions this node masters and hands over, with their versions.
    handing_off: Vec<(PartitionId, u64)>,
}

impl TableMoves {
    fn of(table: &PartitionTable, me: u64) -> TableMoves {
        let mut moves = TableMoves::default();
        for (pid, assignment) in PartitionId::all().zip(table.assignments()) {
            let filling = assignment
                .replicas
                .iter()
                .any(|(_, s)| *s == ReplicaState::Filling);
            let mastered = assignment.master() == Some(me);
            moves.moving += u64::from(filling || assignment.is_handing_off());
            if assignment.has(me, ReplicaState::Filling) {
                moves.incoming += 1;
                if let Some(master) = assignment.master() {
                    moves
                        .filling_here
                        .push((pid, master, assignment.master_since));
                }
            }
            moves.outgoing += u64::from(filling && mastered);
            *moves
                .by_copies
                .entry(assignment.replicas.len())
                .or_default() += 1;
            if mastered && assignment.is_handing_off() {
                moves.handing_off.push((pid, assignment.version));
            }
        }
        moves
    }
}

/// Where requests on one partition run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PartitionRoutes {
    /// A write: on the master.
    write: Route,
    /// A read: on any full copy, here if this node holds one.
    read: Route,
}

impl Layout {
    /// The layout of `state` for node `me`, for the namespaces named.
    pub fn of(state: &ClusterState, me: NodeId, namespaces: &[String]) -> Layout {
        let mut tables = HashMap::new();
        let mut claims = HashMap::new();
        let mut routes = Vec::new();
        let mut moves = HashMap::new();
        let mut moves_waiting = unplaced_nodes(state);
        for name in namespaces {
            moves_waiting += state.namespace(name).map_or(0, |meta| meta.moves_waiting);
            let Some(table) = state
                .namespace(name)
                .and_then(|meta| meta.partitions.clone())
            else {
                continue;
            };
            claims.insert(name.clone(), claims_of(name, &table, me));
            let table_routes = table.assignments().iter().map(|a| routes_of(a, me));
            routes.push((name.clone(), table_routes.collect()));
            moves.insert(name.clone(), TableMoves::of(&table, me.0));
            tables.insert(name.clone(), table);
        }
        Layout {
            version: state.version,
            nodes: state.nodes.clone(),
            tables,
            claims,
            moves_waiting,
            leaving_count: state.leaving.len(),
            routes,
            moves,
        }
    }

    /// The layout of a node outside the cluster at metadata version `version`: no roster, no
    /// table, no claim; every request is unavailable here.
    pub fn outside(version: u64) -> Layout {
        Layout {
            version,
            ..Layout::default()
        }
    }

    /// Partitions of `namespace` whose copies are not `replication_factor` (capped by the
    /// nodes partitions are placed on): fewer after a node left, until the balancer places the
    /// copies that restore the factor; more once a move filled, until it drops the old copy.
    pub fn copies_off_target(&self, namespace: &str, replication_factor: usize) -> u64 {
        let placing = self.nodes.len().saturating_sub(self.leaving_count).max(1);
        let wanted = replication_factor.min(placing);
        self.moves.get(namespace).map_or(0, |moves| {
            let total: u64 = moves.by_copies.values().sum();
            total - moves.by_copies.get(&wanted).copied().unwrap_or(0)
        })
    }

    /// Partition moves the balancer holds back, over every namespace.
    pub fn moves_waiting(&self) -> u64 {
        self.moves_waiting
    }

    /// This node's migrations to come: partitions it fills, and partitions it masters that
    /// another node fills.
    pub fn migrations(&self) -> (u64, u64) {
        let incoming = self.moves.values().map(|m| m.incoming).sum();
        let outgoing = self.moves.values().map(|m| m.outgoing).sum();
        (incoming, outgoing)
    }

    /// The partitions of `namespace` this node fills from a known master, with that master
    /// and the version since which it is master.
    pub fn filling_here(&self, namespace: &str) -> &[(PartitionId, u64, u64)] {
        self.moves
            .get(namespace)
            .map_or(&[], |moves| moves.filling_here.as_slice())
    }

    /// The partitions of `namespace` this node masters and hands over, with their versions.
    pub fn handing_off(&self, namespace: &str) -> &[(PartitionId, u64)] {
        self.moves
            .get(namespace)
            .map_or(&[], |moves| moves.handing_off.as_slice())
    }

    /// Where a write (or, with `read`, a read) of `partition` in `namespace` runs.
    pub fn route(&self, namespace: &str, partition: PartitionId, read: bool) -> Route {
        let routes = self.routes.iter().find(|(name, _)| name == namespace);
        let partition_routes = routes.and_then(|(_, routes)| routes.get(usize::from(partition.0)));
        match partition_routes {
            Some(routes) if read => routes.read,
            Some(routes) => routes.write,
            None => Route::Unavailable,
        }
    }

    /// `namespace`'s table, once one exists: loops over every partition take it once rather
    /// than look the namespace up 4096 times.
    pub fn table(&self, namespace: &str) -> Option<&PartitionTable> {
        self.tables.get(namespace).map(|table| &**table)
    }

    /// The assignment of `partition` in `namespace`, once a table exists.
    pub fn assignment(
        &self,
        namespace: &str,
        partition: PartitionId,
    ) -> Option<&PartitionAssignment> {
        self.tables.get(namespace)?.get(partition.0)
    }

    /// Partitions still moving, over every namespace: a replica filling, or a master handing
    /// over.
    pub fn moving_partitions(&self) -> u64 {
        self.moves.values().map(|moves| moves.moving).sum()
    }
}

/// Roster nodes the tables do not reflect yet: a node that joined and holds nothing (the
/// leader has not placed partitions on it yet), and a node leaving that is still a member.
/// Each counts as one move to come, so that `cluster-stable` waits for them.
fn unplaced_nodes(state: &ClusterState) -> u64 {
    let tables: Vec<&PartitionTable> = state
        .namespaces
        .values()
        .filter_map(|meta| meta.partitions.as_deref())
        .collect();
    if tables.is_empty() {
        return 0;
    }
    let holds_some = |id: u64| {
        tables.iter().any(|table| {
            table
                .assignments()
                .iter()
                .any(|a| a.replicas.iter().any(|(n, _)| *n == id))
        })
    };
    let unplaced = state
        .nodes
        .keys()
        .filter(|id| state.leaving.contains(id) || !holds_some(**id))
        .count() as u64;
    // Too few voters (a learner not yet promoted, a departed voter not yet replaced): one
    // more failure could leave the metadata group without a quorum.
    let voters_wanted = state.nodes.len().min(super::node::VOTERS_MAX);
    let voters_missing = voters_wanted.saturating_sub(state.voters.len()) as u64;
    unplaced + voters_missing + u64::from(state.voters_changing)
}

/// This node's role for a partition with `assignment`.
pub fn role_of(assignment: Option<&PartitionAssignment>, me: NodeId) -> (PartitionRole, u64) {
    let Some(assignment) = assignment else {
        return (PartitionRole::Absent, 0);
    };
    let role = match assignment.replicas.iter().find(|(node, _)| *node == me.0) {
        None => PartitionRole::Absent,
        Some((_, ReplicaState::Filling)) => PartitionRole::Filling,
        // A master handing the partition over takes no new writes.
        Some(_) if master_of(assignment) == Some(me.0) && !assignment.is_handing_off() => {
            PartitionRole::Master
        }
        Some(_) => PartitionRole::Replica,
    };
    (role, assignment.version)
}

/// Where requests on a partition with `assignment` run, seen from node `me`.
fn routes_of(assignment: &PartitionAssignment, me: NodeId) -> PartitionRoutes {
    let (role, _) = role_of(Some(assignment), me);
    let elsewhere = master_of(assignment).map_or(Route::Unavailable, |m| Route::Forward(NodeId(m)));
    let route_if = |here: bool| if here { Route::Local } else { elsewhere };
    // While the master hands over, no node takes writes: a write waits for the next map.
    let write = match assignment.is_handing_off() {
        true => Route::Unavailable,
        false => route_if(role == PartitionRole::Master),
    };
    PartitionRoutes {
        write,
        read: route_if(matches!(
            role,
            PartitionRole::Master | PartitionRole::Replica
        )),
    }
}

/// What node `me` claims for `name`: column k holds the partitions where `me` is the k-th
/// full replica (column 0: master).
fn claims_of(name: &str, table: &PartitionTable, me: NodeId) -> NamespaceClaims {
    let columns_count = table
        .assignments()
        .iter()
        .map(|a| a.replicas.len())
        .max()
        .unwrap_or(1)
        .max(1);
    let mut columns = vec![PartitionBitmap::empty(); columns_count];
    for (assignment, pid) in table.assignments().iter().zip(PartitionId::all()) {
        let full = assignment
            .replicas
            .iter()
            .filter(|(_, state)| *state == ReplicaState::Full);
        if let Some(column) = full.map(|(node, _)| *node).position(|node| node == me.0) {
            columns[column].insert(pid);
        }
    }
    NamespaceClaims {
        name: name.to_owned(),
        regime: 0,
        columns,
    }
}

#[cfg(test)]
mod tests {
    use cluster::balance::balanced_table;

    use super::*;

    #[test]
    fn every_partition_has_one_master_and_full_replicas_claim_their_columns() {
        let nodes = [NodeId(0xA1), NodeId(0xA2), NodeId(0xA3)];
        let table = balanced_table(&nodes, 2, None).expect("placed");
        let claims: Vec<NamespaceClaims> = nodes
            .iter()
            .map(|&n| claims_of("test", &table, n))
            .collect();
        for column in 0..2 {
            let mut seen = PartitionBitmap::empty();
            for claim in &claims {
                for pid in claim.columns[column].partition_ids() {
                    assert!(!seen.contains(pid), "claimed twice");
                    seen.insert(pid);
                }
            }
            assert_eq!(seen.count(), 4096);
        }
        for (assignment, pid) in table.assignments().iter().zip(PartitionId::all()) {
            let masters = nodes
                .iter()
                .filter(|&&n| role_of(Some(assignment), n).0 == PartitionRole::Master)
                .count();
            assert_eq!(masters, 1, "partition {pid:?}");
        }
    }

    #[test]
    fn a_filling_replica_claims_nothing_and_serves_nothing() {
        let assignment = PartitionAssignment {
            replicas: vec![(0xA1, ReplicaState::Filling), (0xA2, ReplicaState::Full)],
            version: 3,
            master_since: 3,
            handoff_to: Vec::new(),
        };
        assert_eq!(
            role_of(Some(&assignment), NodeId(0xA1)),
            (PartitionRole::Filling, 3)
        );
        assert_eq!(
            role_of(Some(&assignment), NodeId(0xA2)),
            (PartitionRole::Master, 3)
        );
        assert_eq!(role_of(None, NodeId(0xA2)), (PartitionRole::Absent, 0));
        let routes = |me| routes_of(&assignment, NodeId(me));
        let to_master = Route::Forward(NodeId(0xA2));
        assert_eq!(
            routes(0xA1),
            PartitionRoutes {
                write: to_master,
                read: to_master
            }
        );
        let here = Route::Local;
        assert_eq!(
            routes(0xA2),
            PartitionRoutes {
                write: here,
                read: here
            }
        );
    }

    /// The routes worked out once per state say what the roles say: writes on the master,
    /// reads on any full copy, elsewhere forwarded to the master; no table, no route.
    #[test]
    fn routes_follow_the_roles_of_every_partition() {
        let nodes = [NodeId(0xA1), NodeId(0xA2), NodeId(0xA3)];
        let mut state = ClusterState::default();
        let table = balanced_table(&nodes, 2, None).expect("placed");
        let meta = cluster::metadata::NamespaceMeta {
            partitions: Some(Arc::new(table.clone())),
            ..Default::default()
        };
        state.namespaces.insert("test".to_owned(), Arc::new(meta));
        let me = NodeId(0xA2);
        let layout = Layout::of(&state, me, &["test".to_owned()]);
        for (assignment, pid) in table.assignments().iter().zip(PartitionId::all()) {
            let (role, _) = role_of(Some(assignment), me);
            let master = Route::Forward(NodeId(master_of(assignment).expect("a master")));
            let write = if role == PartitionRole::Master {
                Route::Local
            } else {
                master
            };
            let read = if role == PartitionRole::Absent {
                master
            } else {
                Route::Local
            };
            assert_eq!(layout.route("test", pid, false), write, "{pid:?}");
            assert_eq!(layout.route("test", pid, true), read, "{pid:?}");
        }
        let unknown = layout.route("other", PartitionId(0), false);
        assert_eq!(unknown, Route::Unavailable);
        let empty = Layout::default().route("test", PartitionId(0), true);
        assert_eq!(empty, Route::Unavailable);
    }
}
