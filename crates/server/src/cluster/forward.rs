//! Forwarding: a client request that reached a node other than its partition's master is sent
//! to the master over the fabric and answered with the master's own reply bytes, so clients
//! with a stale map (or Redis clients, which know no map) still get the right answer.
//!
//! A forwarded request is timed in the latency histograms of the node that ran it, not the
//! one that forwarded it.
//!
//! A forwarded request is served where it arrives and never forwarded again: if that node is
//! not the master (yet: the map is moving, and the sender applied the change first), it waits
//! a little for its own map to catch up, then answers UNAVAILABLE, which the client treats as
//! it would from any node.

use std::sync::Arc;

use engine::Acks;
use fabric::FabricError;
use model::{NodeId, ResultCode};
use wire_fabric::{ForwardProtocol, Message};

use crate::dispatch;
use crate::state::ServerState;

/// Runs a request another node forwarded here and returns the reply bytes for its client.
pub async fn serve(state: &Arc<ServerState>, protocol: ForwardProtocol, payload: &[u8]) -> Vec<u8> {
    match protocol {
        ForwardProtocol::Aerospike => serve_aerospike(state, payload).await,
        ForwardProtocol::Resp => crate::resp::serve_forwarded(state, payload).await,
    }
}

/// An AS_MSG body: answered as the client's own node would, after its writes are acknowledged.
async fn serve_aerospike(state: &Arc<ServerState>, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut acks = Acks::default();
    let received = dispatch::Received::now();
    let (handled, timed) =
        dispatch::handle_when_ready(state, body, received, &mut out, &mut acks, false).await;
    if matches!(handled, dispatch::Handled::Streamed(_)) {
        // Batches and scans are split by the client, never forwarded whole.
        out.clear();
        dispatch::write_stream_error(&mut out, ResultCode::Parameter);
        return out;
    }
    if acks.settled().await.is_err() {
        out.clear();
        dispatch::reply_error(&mut out, ResultCode::Timeout);
    }
    // Timed here, where it ran, as the node a client sends it to times its own requests.
    if let Some(id) = timed {
        state.latencies.record(id, received.at.elapsed());
    }
    out
}

/// Sends a request to node `owner` and returns its reply bytes.
///
/// # Errors
/// The result code the client should get: TIMEOUT when the owner may have run it (in doubt),
/// UNAVAILABLE when it was not sent.
pub async fn forward(
    state: &ServerState,
    owner: NodeId,
    protocol: ForwardProtocol,
    time_left_ms: u32,
    payload: &[u8],
) -> Result<Vec<u8>, ResultCode> {
    let Some(node) = state.cluster_node() else {
        return Err(ResultCode::Unavailable);
    };
    state
        .cluster_stats
        .forwarded
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let message = Message::Forward {
        request_id: 0,
        protocol,
        time_left_ms,
        payload,
    };
    let frame = node
        .fabric()
        .request(owner.0, &message)
        .await
        .map_err(|error| match error {
            FabricError::Timeout { .. } | FabricError::ConnectionLost { .. } => ResultCode::Timeout,
            FabricError::NotConnected { .. } | FabricError::Overloaded { .. } => {
                ResultCode::Unavailable
            }
        })?;
    match frame.message() {
        Message::ForwardReply { payload, .. } => Ok(payload.to_vec()),
        _ => Err(ResultCode::Unknown),
    }
}
