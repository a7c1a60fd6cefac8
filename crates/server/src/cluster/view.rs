//! What the rest of the server asks of the cluster, behind one trait: who this node is, who its
//! peers are, what it claims for clients (`replicas`), and where a partition's master is.
//!
//! A server without seeds has a [`SingleNode`] view: it owns every partition and has no peers,
//! exactly as before clustering existed. A clustered server's view is its `ClusterNode`. Tests
//! can give a server any implementation.

use std::fmt::Debug;

use model::{NodeId, PartitionId};
use wire_aerospike::cluster_map::{NamespaceClaims, PartitionBitmap, Peer};

/// Cluster-wide facts for `statistics` and `cluster-stable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterSummary {
    /// Nodes in the cluster (1 on a single node).
    pub size: usize,
    /// Changes whenever the cluster's membership or map changes (Aerospike's cluster key).
    pub key: u64,
    /// Whether every member sees the same cluster (no suspected member).
    pub integrity: bool,
    /// Partitions still to move before the map settles, over the cluster: those with a
    /// replica filling, and those whose move waits for them.
    pub migrate_partitions_remaining: u64,
    /// This node's migrations.
    pub migration: MigrationSummary,
}

/// One node's migrations, as `statistics` shows them (Aerospike's names where it has them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MigrationSummary {
    /// Partitions this node fills now.
    pub rx_partitions_active: u64,
    /// Partitions this node is to fill (the table makes it `Filling`).
    pub rx_partitions_remaining: u64,
    /// Partitions this node masters that a replica is filling.
    pub tx_partitions_remaining: u64,
    /// Partitions this node finished filling since it started.
    pub rx_partitions_done: u64,
    /// Partitions this node streamed out to their end since it started.
    pub tx_partitions_done: u64,
    /// Records this node received in fills.
    pub records_received: u64,
    /// Records this node streamed out.
    pub records_transmitted: u64,
}

/// Where a single-record command on a partition should run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Here.
    Local,
    /// On this node, its master.
    Forward(NodeId),
    /// Nowhere now (no map yet, or no master): UNAVAILABLE.
    Unavailable,
}

/// The server's view of the cluster.
pub trait ClusterView: Send + Sync + Debug {
    /// This node's id.
    fn node_id(&self) -> NodeId;

    /// Whether the node is part of a multi-node cluster (has seeds).
    fn is_clustered(&self) -> bool;

    /// Changes whenever the peer list does (`peers-generation`).
    fn peers_generation(&self) -> u64;

    /// The other nodes and the service addresses clients should use for them: their TLS
    /// addresses and names with `tls`, else their clear ones.
    fn peers(&self, tls: bool) -> Vec<Peer>;

    /// Changes whenever this node's claims do (`partition-generation`); -1 before the node has
    /// a map (clients then ignore the node).
    fn partition_generation(&self) -> i64;

    /// Rebalances this node has applied (`rebalance-generation`).
    fn rebalance_generation(&self) -> u64;

    /// What this node claims for `namespace`, column by column (`replicas`).
    fn claims(&self, namespace: &str) -> NamespaceClaims;

    /// Cluster-wide facts.
    fn summary(&self) -> ClusterSummary;

    /// Where a write (or, with `read`, a read) of `partition` in `namespace` should run.
    fn route(&self, namespace: &str, partition: PartitionId, read: bool) -> Route;
}

/// A node alone: master of everything, no peers.
#[derive(Debug)]
pub struct SingleNode {
    node_id: NodeId,
    /// Random per start, as Aerospike makes a new cluster key per cluster change.
    key: u64,
}

impl SingleNode {
    /// The view of node `node_id` alone.
    pub fn new(node_id: NodeId) -> SingleNode {
        SingleNode {
            node_id,
            key: start_key(),
        }
    }
}

/// A cluster key for this start: the clock's nanoseconds and the process id, mixed.
fn start_key() -> u64 {
    use rand::{RngCore, SeedableRng};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    let seed = nanos ^ u64::from(std::process::id()) << 32;
    rand::rngs::SmallRng::seed_from_u64(seed).next_u64() >> 16
}

/// `peers-generation` and `partition-generation` of a node alone: it never changes.
const SINGLE_NODE_GENERATION: u64 = 1;

impl ClusterView for SingleNode {
    fn node_id(&self) -> NodeId {
        self.node_id
    }

    fn is_clustered(&self) -> bool {
        false
    }

    fn peers_generation(&self) -> u64 {
        SINGLE_NODE_GENERATION
    }

    fn peers(&self, _tls: bool) -> Vec<Peer> {
        Vec::new()
    }

    fn partition_generation(&self) -> i64 {
        SINGLE_NODE_GENERATION as i64
    }

    fn rebalance_generation(&self) -> u64 {
        SINGLE_NODE_GENERATION
    }

    fn claims(&self, namespace: &str) -> NamespaceClaims {
        NamespaceClaims {
            name: namespace.to_owned(),
            regime: 0,
            columns: vec![PartitionBitmap::full()],
        }
    }

    fn summary(&self) -> ClusterSummary {
        ClusterSummary {
            size: 1,
            key: self.key.max(1),
            integrity: true,
            migrate_partitions_remaining: 0,
            migration: MigrationSummary::default(),
        }
    }

    fn route(&self, _: &str, _: PartitionId, _: bool) -> Route {
        Route::Local
    }
}
