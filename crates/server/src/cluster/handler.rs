//! What a node does with the requests its peers send on the fabric.
//!
//! Frames arrive one at a time, in order, on each connection's reader task. Replica writes are
//! applied right there, so a partition's changes are applied in the order its master sent them;
//! everything that may wait (a metadata-group round, a forwarded client request, a sync before
//! a replica acknowledges) runs on a task of its own and answers through the responder.

use std::sync::{Arc, OnceLock, Weak};

use fabric::{FabricHandler, OwnedFrame, Responder};
use model::ResultCode;
use wire_fabric::Message;

use super::forward;
use super::migration;
use super::node::ClusterNode;
use super::replication::apply_replica_write;

/// The fabric handler of a [`ClusterNode`].
#[derive(Debug, Default)]
pub struct Handler {
    node: OnceLock<Weak<ClusterNode>>,
}

impl Handler {
    /// Serves `node` from now on.
    pub fn attach(&self, node: &Arc<ClusterNode>) {
        let _ = self.node.set(Arc::downgrade(node));
    }

    fn node(&self) -> Option<Arc<ClusterNode>> {
        self.node.get().and_then(Weak::upgrade)
    }
}

impl FabricHandler for Handler {
    fn handle(&self, from: u64, frame: OwnedFrame, reply: Responder) {
        let Some(node) = self.node() else {
            return;
        };
        match frame.message() {
            Message::Raft { payload, .. } => {
                let meta = node.meta().clone();
                let payload = payload.to_vec();
                tokio::spawn(async move {
                    let answer = meta.handle_rpc(&payload).await;
                    let _ = reply.send(&Message::RaftReply {
                        request_id: 0,
                        payload: &answer,
                    });
                });
            }
            Message::ReplicaWrite {
                namespace,
                partition_version,
                record,
                ..
            } => {
                let Some(namespace) = node.namespace(namespace) else {
                    return answer_ack(reply, ResultCode::Namespace);
                };
                let (code, mut acks) = apply_replica_write(namespace, partition_version, &record);
                if acks.is_empty() {
                    return answer_ack(reply, code);
                }
                tokio::spawn(async move {
                    let code = match acks.settled().await {
                        Ok(()) => code,
                        Err(_) => ResultCode::Unknown,
                    };
                    answer_ack(reply, code);
                });
            }
            Message::Forward {
                protocol, payload, ..
            } => {
                let Some(state) = node.server() else {
                    return;
                };
                let payload = payload.to_vec();
                tokio::spawn(async move {
                    let answer = forward::serve(&state, protocol, &payload).await;
                    let _ = reply.send(&Message::ForwardReply {
                        request_id: 0,
                        payload: &answer,
                    });
                });
            }
            Message::PartitionStreamRequest {
                namespace,
                partition,
                after_digest,
                chunk_size_bytes_max,
                ..
            } => {
                let namespace = namespace.to_vec();
                // The walk may read records from the device: off the reader task.
                tokio::task::spawn_blocking(move || {
                    let chunk = node.stream_chunk(
                        from,
                        &namespace,
                        partition,
                        after_digest,
                        chunk_size_bytes_max,
                    );
                    let (done, records) = chunk.unwrap_or_default();
                    let wire = migration::wire_records(&records);
                    let _ = reply.send(&migration::chunk_message(
                        &namespace, partition, done, &wire,
                    ));
                });
            }
            _ => {}
        }
    }

    fn heartbeat(&self, from: u64, map_version: u64, hearing: &[u64]) {
        if let Some(node) = self.node() {
            node.heard(from, map_version, hearing.to_vec());
        }
    }
}

fn answer_ack(reply: Responder, code: ResultCode) {
    let _ = reply.send(&Message::ReplicaAck {
        request_id: 0,
        result_code: code.code(),
    });
}
