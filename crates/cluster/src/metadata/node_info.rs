//! A node's addresses, as the metadata group records them (openraft's `Node` type).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a node can be reached: `host:port` of each of its listeners.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node-to-node fabric listener; metadata-group messages travel there.
    pub fabric_addr: String,
    /// The Aerospike-protocol service listener, as clients are told in `peers-*`.
    pub service_addr: String,
    /// The RESP listener.
    pub resp_addr: String,
    /// The Aerospike-protocol TLS listener (`peers-tls-std`); empty: none.
    #[serde(default)]
    pub tls_service_addr: String,
    /// The name its certificate carries, which TLS clients check.
    #[serde(default)]
    pub tls_name: String,
    /// Chosen at random each time the node starts: a member that comes back with another one
    /// restarted, and may have lost what it held (see `ClusterState::apply`).
    #[serde(default)]
    pub boot_id: u64,
}

impl fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fabric={} service={} resp={}",
            self.fabric_addr, self.service_addr, self.resp_addr
        )
    }
}
