//! openraft's network for the metadata group, over the [`MetaTransport`] seam.
//!
//! Every message is one request and one reply, both JSON (`MetaRpc` and `MetaRpcReply`),
//! carried as bytes by the transport; the server carries them over the node-to-node fabric and
//! hands incoming requests to [`super::MetaGroup::handle_rpc`]. Snapshots travel whole in one
//! message (the metadata state is small), not in chunks.
//!
//! Invariants:
//! - Every call has a deadline (openraft's time-to-live for the message kind), so a lost message
//!   or reply costs a timeout, never a stuck replication.
//! - A transport failure before sending is [`TransportError::Unreachable`] (openraft backs off);
//!   a missing reply is a timeout, because the request may have been handled.

use std::future::Future;
use std::io::Cursor;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed,
    StreamingError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{RPCTypes, Snapshot, SnapshotMeta, Vote};
use serde::{Deserialize, Serialize};

use super::command::MetaCommand;
use super::group::{Applied, MetaError};
use super::node_info::NodeInfo;
use super::{NodeId, TypeConfig};

/// The future of one [`MetaTransport::send`]: the reply bytes, or why there are none.
pub type TransportFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>, TransportError>> + Send>>;

/// Carries metadata-group messages between nodes (the server: over the fabric).
pub trait MetaTransport: Send + Sync + 'static {
    /// Sends `request` to node `target` and resolves to the bytes that the target's
    /// [`super::MetaGroup::handle_rpc`] returned. Callers put a deadline on the future, so an
    /// implementation need not.
    fn send(&self, target: NodeId, target_info: &NodeInfo, request: Vec<u8>) -> TransportFuture;
}

/// Why a message got no reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum TransportError {
    /// Not sent: the node cannot be reached now. Safe to retry.
    #[error("node {target} is unreachable")]
    Unreachable {
        /// The node.
        target: NodeId,
    },
    /// Sent, but no reply in time: the request may or may not have been handled.
    #[error("no reply from node {target} within {timeout_ms} ms")]
    Timeout {
        /// The node.
        target: NodeId,
        /// The deadline that passed.
        timeout_ms: u64,
    },
    /// A message that does not decode.
    #[error("malformed metadata message for or from node {target}: {reason}")]
    Malformed {
        /// The node at the other end.
        target: NodeId,
        /// What the decoder said.
        reason: String,
    },
}

/// A request between metadata-group members.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum MetaRpc {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    FullSnapshot {
        vote: Vote<NodeId>,
        meta: SnapshotMeta<NodeId, NodeInfo>,
        /// The snapshot data, base64 (JSON would spell each byte as a number).
        data_base64: String,
    },
    /// A command forwarded to the node believed to be the leader.
    Propose(MetaCommand),
}

/// The reply to a [`MetaRpc`] of the same kind.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum MetaRpcReply {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    FullSnapshot(Result<SnapshotResponse<NodeId>, Fatal<NodeId>>),
    Propose(Result<Applied, MetaError>),
    /// The request did not decode.
    Malformed {
        reason: String,
    },
}

/// Makes a [`MetaNetwork`] per peer (openraft's network factory).
pub struct MetaNetworkFactory {
    node_id: NodeId,
    transport: Arc<dyn MetaTransport>,
}

/// openraft's client for one peer.
pub struct MetaNetwork {
    node_id: NodeId,
    target: NodeId,
    target_info: NodeInfo,
    transport: Arc<dyn MetaTransport>,
}

impl MetaNetworkFactory {
    /// A factory for node `node_id`'s messages.
    pub fn new(node_id: NodeId, transport: Arc<dyn MetaTransport>) -> Self {
        Self { node_id, transport }
    }
}

impl RaftNetworkFactory<TypeConfig> for MetaNetworkFactory {
    type Network = MetaNetwork;

    async fn new_client(&mut self, target: NodeId, node: &NodeInfo) -> Self::Network {
        MetaNetwork {
            node_id: self.node_id,
            target,
            target_info: node.clone(),
            transport: self.transport.clone(),
        }
    }
}

/// Sends `rpc` to `target` and decodes its reply, within `timeout`.
///
/// # Errors
/// The [`TransportError`] that left the call without a reply.
pub(crate) async fn call(
    transport: &dyn MetaTransport,
    target: NodeId,
    target_info: &NodeInfo,
    rpc: &MetaRpc,
    timeout: Duration,
) -> Result<MetaRpcReply, TransportError> {
    let malformed = |e: serde_json::Error| TransportError::Malformed {
        target,
        reason: e.to_string(),
    };
    let request = serde_json::to_vec(rpc).map_err(malformed)?;
    let sending = transport.send(target, target_info, request);
    let Ok(reply) = tokio::time::timeout(timeout, sending).await else {
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        return Err(TransportError::Timeout { target, timeout_ms });
    };
    let reply: MetaRpcReply = serde_json::from_slice(&reply?).map_err(malformed)?;
    if let MetaRpcReply::Malformed { reason } = reply {
        return Err(TransportError::Malformed { target, reason });
    }
    Ok(reply)
}

/// The error for a reply of the wrong kind.
pub(crate) fn unexpected_reply(target: NodeId) -> TransportError {
    TransportError::Malformed {
        target,
        reason: "reply of another kind than the request".to_owned(),
    }
}

impl MetaNetwork {
    async fn call(&self, rpc: &MetaRpc, timeout: Duration) -> Result<MetaRpcReply, TransportError> {
        let transport = self.transport.as_ref();
        call(transport, self.target, &self.target_info, rpc, timeout).await
    }

    fn rpc_error<E: std::error::Error>(
        &self,
        error: TransportError,
        action: RPCTypes,
        timeout: Duration,
    ) -> RPCError<NodeId, NodeInfo, E> {
        match error {
            TransportError::Unreachable { .. } => RPCError::Unreachable(Unreachable::new(&error)),
            TransportError::Timeout { .. } => RPCError::Timeout(Timeout {
                action,
                id: self.node_id,
                target: self.target,
                timeout,
            }),
            TransportError::Malformed { .. } => RPCError::Network(NetworkError::new(&error)),
        }
    }

    fn remote<E: std::error::Error>(&self, error: E) -> RPCError<NodeId, NodeInfo, E> {
        let remote = RemoteError::new_with_node(self.target, self.target_info.clone(), error);
        RPCError::RemoteError(remote)
    }

    async fn send_full_snapshot(
        &self,
        vote: Vote<NodeId>,
        snapshot: Snapshot<TypeConfig>,
        timeout: Duration,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        let data = snapshot.snapshot.into_inner();
        let rpc = MetaRpc::FullSnapshot {
            vote,
            meta: snapshot.meta,
            data_base64: BASE64.encode(data),
        };
        let reply = self.call(&rpc, timeout).await;
        let error = match reply {
            Ok(MetaRpcReply::FullSnapshot(Ok(response))) => return Ok(response),
            Ok(MetaRpcReply::FullSnapshot(Err(fatal))) => {
                let remote =
                    RemoteError::new_with_node(self.target, self.target_info.clone(), fatal);
                return Err(StreamingError::RemoteError(remote));
            }
            Ok(_) => unexpected_reply(self.target),
            Err(error) => error,
        };
        Err(
            match self.rpc_error::<Fatal<NodeId>>(error, RPCTypes::InstallSnapshot, timeout) {
                RPCError::Timeout(e) => StreamingError::Timeout(e),
                RPCError::Unreachable(e) => StreamingError::Unreachable(e),
                RPCError::Network(e) => StreamingError::Network(e),
                RPCError::PayloadTooLarge(e) => StreamingError::Network(NetworkError::new(&e)),
                RPCError::RemoteError(e) => StreamingError::RemoteError(e),
            },
        )
    }
}

impl RaftNetwork<TypeConfig> for MetaNetwork {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        let timeout = option.hard_ttl();
        match self.call(&MetaRpc::AppendEntries(rpc), timeout).await {
            Ok(MetaRpcReply::AppendEntries(Ok(response))) => Ok(response),
            Ok(MetaRpcReply::AppendEntries(Err(error))) => Err(self.remote(error)),
            Ok(_) => Err(RPCError::Network(NetworkError::new(&unexpected_reply(
                self.target,
            )))),
            Err(error) => Err(self.rpc_error(error, RPCTypes::AppendEntries, timeout)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, NodeInfo, RaftError<NodeId, InstallSnapshotError>>,
    > {
        let timeout = option.hard_ttl();
        match self.call(&MetaRpc::InstallSnapshot(rpc), timeout).await {
            Ok(MetaRpcReply::InstallSnapshot(Ok(response))) => Ok(response),
            Ok(MetaRpcReply::InstallSnapshot(Err(error))) => Err(self.remote(error)),
            Ok(_) => Err(RPCError::Network(NetworkError::new(&unexpected_reply(
                self.target,
            )))),
            Err(error) => Err(self.rpc_error(error, RPCTypes::InstallSnapshot, timeout)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        let timeout = option.hard_ttl();
        match self.call(&MetaRpc::Vote(rpc), timeout).await {
            Ok(MetaRpcReply::Vote(Ok(response))) => Ok(response),
            Ok(MetaRpcReply::Vote(Err(error))) => Err(self.remote(error)),
            Ok(_) => Err(RPCError::Network(NetworkError::new(&unexpected_reply(
                self.target,
            )))),
            Err(error) => Err(self.rpc_error(error, RPCTypes::Vote, timeout)),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote<NodeId>,
        snapshot: Snapshot<TypeConfig>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        let timeout = option.hard_ttl();
        tokio::select! {
            result = self.send_full_snapshot(vote, snapshot, timeout) => result,
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
    }
}

/// The snapshot a [`MetaRpc::FullSnapshot`] carries.
///
/// # Errors
/// The base64 error when the data does not decode.
pub(crate) fn decode_full_snapshot(
    meta: SnapshotMeta<NodeId, NodeInfo>,
    data_base64: &str,
) -> Result<Snapshot<TypeConfig>, base64::DecodeError> {
    let data = BASE64.decode(data_base64)?;
    Ok(Snapshot {
        meta,
        snapshot: Box::new(Cursor::new(data)),
    })
}
