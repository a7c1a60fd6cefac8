//! [`FabricHandler`]: what a node does with the requests and heartbeats its peers send, and
//! [`Responder`]: how it answers.
//!
//! Invariants:
//! - A reply travels on the connection its request arrived on, under the request's id.
//! - A request is answered at most once: [`Responder::send`] consumes the responder.

use std::sync::Arc;

use wire_fabric::Message;

use crate::connection::Connection;
use crate::error::FabricError;
use crate::frame::{OwnedFrame, encode_with_request_id};

/// Serves what peers send. Called on the connection's reader task, one frame at a time in
/// arrival order, so a call must not block: a handler that needs time (a disk write, a
/// consensus round) spawns and answers later through the [`Responder`].
pub trait FabricHandler: Send + Sync + 'static {
    /// A request from node `from`: `Raft`, `Forward`, `ReplicaWrite`, `ReplicaTruncate` or
    /// `PartitionStreamRequest`. Answer through `reply`, or drop it to leave the request
    /// unanswered (the sender times out).
    fn handle(&self, from: u64, frame: OwnedFrame, reply: Responder);

    /// A heartbeat from node `from`, with the metadata version it has applied and the nodes
    /// it hears (those not silent past the heartbeat timeout).
    fn heartbeat(&self, from: u64, map_version: u64, hearing: &[u64]) {
        let _ = (from, map_version, hearing);
    }
}

/// The way back to the node that sent one request.
pub struct Responder {
    connection: Arc<Connection>,
    request_id: u64,
}

impl Responder {
    pub(crate) fn new(connection: Arc<Connection>, request_id: u64) -> Responder {
        Responder {
            connection,
            request_id,
        }
    }

    /// The id of the request this answers.
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// The node the request came from.
    pub fn node_id(&self) -> u64 {
        self.connection.peer_node_id()
    }

    /// Queues `message` as the reply; its request id is replaced by the request's.
    ///
    /// # Errors
    ///
    /// [`FabricError::NotConnected`] when the connection is gone (the requester sees
    /// `ConnectionLost`), [`FabricError::Overloaded`] when its write queue is full.
    ///
    /// # Panics
    ///
    /// If `message` carries no request id (`Hello`, `HelloAck`, `Heartbeat`).
    pub fn send(self, message: &Message<'_>) -> Result<(), FabricError> {
        assert!(
            message.request_id().is_some(),
            "a reply carries a request id, and {:?} does not",
            message.message_type(),
        );
        let frame = encode_with_request_id(message, self.request_id);
        self.connection.push(frame)
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("node_id", &self.node_id())
            .field("request_id", &self.request_id)
            .finish()
    }
}
