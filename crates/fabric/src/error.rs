//! [`FabricError`]: why a request or send failed, split by whether the peer may have
//! received it.

/// Why a [`crate::Fabric::request`], [`crate::Fabric::send`] or [`crate::Responder::send`]
/// failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    /// Not sent: no connection to the node is up (unknown node, connecting, or shut down).
    /// Safe to retry.
    #[error("no connection to node {node_id}")]
    NotConnected {
        /// The node.
        node_id: u64,
    },
    /// Not sent: the connection's write queue or its table of pending requests is full.
    /// Safe to retry later.
    #[error("the connection to node {node_id} is overloaded")]
    Overloaded {
        /// The node.
        node_id: u64,
    },
    /// Maybe delivered: the connection dropped while the request waited for its reply.
    #[error("the connection to node {node_id} was lost before the reply")]
    ConnectionLost {
        /// The node.
        node_id: u64,
    },
    /// Maybe delivered: no reply within the request timeout.
    #[error("no reply from node {node_id} within {timeout_ms} ms")]
    Timeout {
        /// The node.
        node_id: u64,
        /// The timeout that passed.
        timeout_ms: u64,
    },
}

impl FabricError {
    /// Whether the peer may have received the message: the caller must not assume it was
    /// not applied.
    pub fn maybe_delivered(&self) -> bool {
        match self {
            FabricError::NotConnected { .. } | FabricError::Overloaded { .. } => false,
            FabricError::ConnectionLost { .. } | FabricError::Timeout { .. } => true,
        }
    }
}
