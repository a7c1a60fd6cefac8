//! The metadata group: one openraft (0.9) group that decides the cluster's shared state.
//!
//! It holds the node roster, each namespace's partition table (ordered replicas per partition,
//! each replica's state, a version per partition that fences stale masters) and cluster-wide
//! metadata (secondary-index definitions, truncate marks, set-index switches). Three voters
//! (five from five nodes up) decide; every other node is a learner that receives the state.
//!
//! Parts:
//! - [`command`]: the commands the group commits ([`MetaCommand`]) and their outcome.
//! - [`cluster_state`]: the state machine's value ([`ClusterState`]) and how a command changes it.
//! - [`disk`], [`record`], [`log_store`], [`state_machine`]: durable storage of vote, log and
//!   snapshots in one directory, through the injectable [`MetaDisk`] seam.
//! - [`network`]: openraft's network over the [`MetaTransport`] seam, which the server carries
//!   over the node-to-node fabric; [`sim_network`] is an in-process one for tests.
//! - [`group`]: the [`MetaGroup`] facade the server uses.
//!
//! Invariants:
//! - A vote or a log entry is on stable storage before openraft learns that it was saved.
//! - `initialize` runs only on a node whose store was empty when it started; a restart recovers
//!   from the store and never initializes again.
//! - [`ClusterState::version`] increases by one for every accepted command or membership change and
//!   is part of the snapshot, so every node that applied the same log prefix has the same version.
//! - A partition's version never decreases, and an assignment that changes must raise it.

pub mod cluster_state;
pub mod command;
mod compact_rows;
pub mod disk;
pub mod group;
pub mod log_store;
pub mod network;
pub mod node_info;
pub mod record;
pub mod sim_network;
pub mod state_machine;

pub use cluster_state::{ClusterState, NamespaceMeta};
pub use command::{
    MetaCommand, MetaRejection, MetaResponse, PartitionAssignment, PartitionTable, ReplicaState,
};
pub use disk::{FileDisk, MemoryDisk, MetaDisk};
pub use group::{Applied, MetaConfig, MetaError, MetaGroup};
pub use log_store::MetaLogStore;
pub use network::{MetaTransport, TransportError, TransportFuture};
pub use node_info::NodeInfo;
pub use sim_network::{SimConfig, SimNetwork};
pub use state_machine::MetaStateMachine;

/// The id of a node in the cluster; the same id names it in the metadata group.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The openraft type configuration of the metadata group.
    pub TypeConfig:
        D = MetaCommand,
        R = MetaResponse,
        NodeId = NodeId,
        Node = NodeInfo,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = std::io::Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);
