//! The `[cluster]` section and the per-namespace replication settings.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The `[cluster]` section. A node with no seeds is a one-node cluster that behaves exactly as
/// a server without this section.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClusterConfig {
    /// This node's id (hex); empty takes `service.node-id`, or derives a stable one from the
    /// host name and the service port.
    pub node_id: String,
    /// Address the node-to-node fabric listens on.
    pub fabric_address: String,
    /// Fabric port (Aerospike's fabric port is 3001); 0 picks a free port.
    pub fabric_port: u16,
    /// Fabric addresses (`host:port`) of other nodes to join; empty: a one-node cluster.
    pub seeds: Vec<String>,
    /// Milliseconds between heartbeats to each peer (Aerospike's `interval`).
    pub heartbeat_interval_ms: u64,
    /// Heartbeat intervals without a word from a peer before it is suspected (Aerospike's
    /// `timeout`); the metadata group, not one node, then decides.
    pub heartbeat_timeout_count: u32,
    /// Where the metadata group keeps its vote, log and snapshots (synced before they are
    /// acknowledged); empty: `<service.work-directory>/cluster`, or `cluster-<node id>` in the
    /// current directory when there is no work directory.
    pub metadata_dir: PathBuf,
    /// Partitions this node fills at once (Aerospike's `migrate-max-num-incoming`).
    pub migrate_max_num_incoming: usize,
    /// About how many bytes of records one migration chunk carries: with one chunk in flight
    /// per fill, the bytes in flight to a node are at most this times the fills at once.
    pub migrate_chunk_bytes: u32,
    /// Partitions with a replica filling at once over the cluster; further moves wait for
    /// them (the leader's setting counts).
    pub migrate_partitions_moving_max: usize,
    /// The fabric speaks mutual TLS with `[tls]`'s certificate (every node of the cluster
    /// alike): peers must present a certificate signed by `tls.ca-file` carrying the same TLS
    /// name.
    pub tls: bool,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            node_id: String::new(),
            fabric_address: "127.0.0.1".to_owned(),
            fabric_port: 3001,
            seeds: Vec::new(),
            heartbeat_interval_ms: 150,
            heartbeat_timeout_count: 10,
            metadata_dir: PathBuf::new(),
            migrate_max_num_incoming: 4,
            migrate_chunk_bytes: 256 * 1024,
            migrate_partitions_moving_max: 512,
            tls: false,
        }
    }
}

impl ClusterConfig {
    /// Whether this node joins others (it has seeds).
    pub fn is_clustered(&self) -> bool {
        !self.seeds.is_empty()
    }

    /// The migration settings.
    pub fn migration(&self) -> super::migration::MigrationConfig {
        super::migration::MigrationConfig {
            incoming_max: self.migrate_max_num_incoming,
            chunk_bytes: self.migrate_chunk_bytes,
        }
    }

    /// What is wrong with the section, if anything.
    pub fn problem(&self) -> Option<String> {
        if !(1..=256).contains(&self.migrate_max_num_incoming) {
            return Some(format!(
                "cluster.migrate-max-num-incoming = {} is outside 1..=256",
                self.migrate_max_num_incoming
            ));
        }
        if !(4096..=64 * 1024 * 1024).contains(&self.migrate_chunk_bytes) {
            return Some(format!(
                "cluster.migrate-chunk-bytes = {} is outside 4096..=67108864",
                self.migrate_chunk_bytes
            ));
        }
        if self.migrate_partitions_moving_max == 0 {
            return Some("cluster.migrate-partitions-moving-max must be at least 1".to_owned());
        }
        if !(50..=10_000).contains(&self.heartbeat_interval_ms) {
            return Some(format!(
                "cluster.heartbeat-interval-ms = {} is outside 50..=10000",
                self.heartbeat_interval_ms
            ));
        }
        if !(3..=100).contains(&self.heartbeat_timeout_count) {
            return Some(format!(
                "cluster.heartbeat-timeout-count = {} is outside 3..=100",
                self.heartbeat_timeout_count
            ));
        }
        if !self.node_id.is_empty() && self.node_id.parse::<model::NodeId>().is_err() {
            return Some(format!(
                "cluster.node-id = {:?} is not 1 to 16 hex digits",
                self.node_id
            ));
        }
        self.seeds
            .iter()
            .find(|seed| !seed.contains(':'))
            .map(|seed| format!("cluster.seeds: {seed:?} needs a port (host:port)"))
    }
}

/// How a namespace's writes wait for replicas, over what the client asks (Aerospike's
/// `write-commit-level-override`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CommitLevelOverride {
    /// As each write asks (the clients' default is all).
    #[default]
    Off,
    /// Every write waits for every replica.
    All,
    /// Every write is answered once the master applied it; replicas follow.
    Master,
}

impl CommitLevelOverride {
    /// Whether a write whose client asked for commit level master (`asked_master`) waits
    /// for its replicas.
    pub fn waits_for_replicas(self, asked_master: bool) -> bool {
        match self {
            CommitLevelOverride::Off => !asked_master,
            CommitLevelOverride::All => true,
            CommitLevelOverride::Master => false,
        }
    }

    /// The name `namespace/<ns>` reports.
    pub fn name(self) -> &'static str {
        match self {
            CommitLevelOverride::Off => "off",
            CommitLevelOverride::All => "all",
            CommitLevelOverride::Master => "master",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_levels_follow_the_client_unless_overridden() {
        assert!(CommitLevelOverride::Off.waits_for_replicas(false));
        assert!(!CommitLevelOverride::Off.waits_for_replicas(true));
        assert!(CommitLevelOverride::All.waits_for_replicas(true));
        assert!(!CommitLevelOverride::Master.waits_for_replicas(false));
    }

    #[test]
    fn bad_cluster_settings_are_named() {
        let bad_interval = ClusterConfig {
            heartbeat_interval_ms: 10,
            ..ClusterConfig::default()
        };
        assert!(bad_interval.problem().is_some());
        let bad_seed = ClusterConfig {
            seeds: vec!["127.0.0.1".to_owned()],
            ..ClusterConfig::default()
        };
        assert!(
            bad_seed
                .problem()
                .is_some_and(|p| p.contains("needs a port"))
        );
        assert_eq!(ClusterConfig::default().problem(), None);
    }
}
