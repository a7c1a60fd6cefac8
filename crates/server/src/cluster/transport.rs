//! The metadata group's messages over the fabric: each is one `Raft` request answered by one
//! `RaftReply`.

use std::sync::Arc;

use cluster::metadata::{MetaTransport, NodeId, NodeInfo, TransportError, TransportFuture};
use fabric::{Fabric, FabricError};
use wire_fabric::{Message, RaftKind};

/// [`MetaTransport`] on a node's fabric.
#[derive(Debug)]
pub struct FabricMetaTransport {
    fabric: Arc<Fabric>,
}

impl FabricMetaTransport {
    /// Carries the metadata group's messages on `fabric`.
    pub fn new(fabric: Arc<Fabric>) -> FabricMetaTransport {
        FabricMetaTransport { fabric }
    }
}

impl MetaTransport for FabricMetaTransport {
    fn send(&self, target: NodeId, target_info: &NodeInfo, request: Vec<u8>) -> TransportFuture {
        if !self
            .fabric
            .peers()
            .iter()
            .any(|p| p.node_id == Some(target))
        {
            self.fabric.add_peer_node(target, &target_info.fabric_addr);
        }
        // The payload says what it is; the kind only labels the frame.
        let message = Message::Raft {
            request_id: 0,
            kind: RaftKind::AppendEntries,
            payload: &request,
        };
        let reply = self.fabric.request(target, &message);
        Box::pin(async move {
            let frame = reply
                .await
                .map_err(|error| transport_error(target, error))?;
            match frame.message() {
                Message::RaftReply { payload, .. } => Ok(payload.to_vec()),
                _ => Err(TransportError::Malformed {
                    target,
                    reason: "a metadata request was answered with another message".to_owned(),
                }),
            }
        })
    }
}

fn transport_error(target: NodeId, error: FabricError) -> TransportError {
    match error {
        FabricError::Timeout { .. } | FabricError::ConnectionLost { .. } => {
            TransportError::Timeout {
                target,
                timeout_ms: 0,
            }
        }
        _ => TransportError::Unreachable { target },
    }
}
