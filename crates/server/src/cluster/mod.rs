//! The server's side of a cluster: membership through the metadata group, the fabric to the
//! other nodes, synchronous replication, and forwarding of misrouted requests.
//!
//! A server without seeds in `[cluster]` uses [`SingleNode`] and none of the rest: it behaves
//! exactly as it did before clusters existed. Read `docs/ARCHITECTURE.md` ("A cluster") first.

pub mod config;
pub mod forward;
mod handler;
mod layout;
mod migration;
mod node;
mod replication;
mod transport;
mod view;

use std::sync::atomic::AtomicU64;

pub use config::{ClusterConfig, CommitLevelOverride};
pub use node::{ClusterNode, MetadataStore, NodeSetup};
pub use view::{ClusterView, Route, SingleNode};

/// Counters of the cluster's data path, for `statistics`.
#[derive(Debug, Default)]
pub struct ClusterStats {
    /// Client requests this node forwarded to their partition's master (Aerospike's
    /// `proxy_initiate`); 0 in a steady state with smart clients.
    pub forwarded: AtomicU64,
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod sim;
