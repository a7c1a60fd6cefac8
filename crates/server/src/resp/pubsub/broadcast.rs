//! PUBLISH on a cluster: as Redis Cluster broadcasts a published message, each PUBLISH here
//! is sent to every other node, which delivers it to its own subscribers and sends it no
//! further (it arrives as a forwarded command, which never broadcasts).
//!
//! Invariants:
//! - One task sends, in publish order: it takes what is queued (up to
//!   `BATCH_BYTES_MAX`), sends it as one forwarded payload of PUBLISH commands to every
//!   peer at once, and waits for all of them before the next batch, so a node receives one
//!   node's messages in the order they were published there.
//! - The queue holds at most `QUEUED_BYTES_MAX`; a message that would pass it is dropped and
//!   counted (`Hub::broadcast_dropped`), so a slow or unreachable peer never grows memory.
//! - The task holds the server state weakly between batches: it ends with the server.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tracing::warn;
use wire_fabric::ForwardProtocol;

use crate::state::ServerState;

/// The most bytes of messages waiting for other nodes: beyond it, new ones are dropped.
const QUEUED_BYTES_MAX: usize = 64 << 20;
/// The most bytes sent to the peers in one forwarded payload.
const BATCH_BYTES_MAX: usize = 1 << 20;
/// The RESP version the forwarded PUBLISH commands are run with (their replies are dropped).
const FORWARD_PROTOCOL: u8 = 2;

/// The queue of messages to other nodes; empty until the first PUBLISH on a cluster.
#[derive(Debug, Default)]
pub struct Broadcast {
    sender: Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>,
    queued_bytes: Arc<AtomicUsize>,
}

impl Broadcast {
    /// Queues `PUBLISH channel payload` for every other node of `state`'s cluster. Returns
    /// false when it was dropped (the queue is full, or no runtime runs the sender).
    pub fn publish(&self, state: &Arc<ServerState>, channel: &[u8], payload: &[u8]) -> bool {
        let mut command = Vec::with_capacity(channel.len() + payload.len() + 40);
        wire_resp::encode_command(&mut command, &[b"PUBLISH".as_slice(), channel, payload]);
        let size_bytes = command.len();
        if self.queued_bytes.fetch_add(size_bytes, Ordering::AcqRel) + size_bytes > QUEUED_BYTES_MAX
        {
            self.queued_bytes.fetch_sub(size_bytes, Ordering::AcqRel);
            return false;
        }
        let mut sender = self.sender.lock();
        if sender.is_none() {
            *sender = self.start(state);
        }
        let sent = sender
            .as_ref()
            .is_some_and(|sender| sender.send(command).is_ok());
        if !sent {
            self.queued_bytes.fetch_sub(size_bytes, Ordering::AcqRel);
        }
        sent
    }

    fn start(&self, state: &Arc<ServerState>) -> Option<mpsc::UnboundedSender<Vec<u8>>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (sender, receiver) = mpsc::unbounded_channel();
        let queued_bytes = Arc::clone(&self.queued_bytes);
        runtime.spawn(send_batches(Arc::downgrade(state), receiver, queued_bytes));
        Some(sender)
    }
}

async fn send_batches(
    state: Weak<ServerState>,
    mut receiver: mpsc::UnboundedReceiver<Vec<u8>>,
    queued_bytes: Arc<AtomicUsize>,
) {
    while let Some(first) = receiver.recv().await {
        let mut payload = Vec::with_capacity(first.len() + 1);
        payload.push(FORWARD_PROTOCOL);
        payload.extend_from_slice(&first);
        while payload.len() < BATCH_BYTES_MAX {
            match receiver.try_recv() {
                Ok(command) => payload.extend_from_slice(&command),
                Err(_) => break,
            }
        }
        queued_bytes.fetch_sub(payload.len() - 1, Ordering::AcqRel);
        let Some(state) = state.upgrade() else {
            return;
        };
        send_to_peers(&state, Arc::new(payload)).await;
    }
}

/// Sends one batch to every peer at once and waits for them all.
async fn send_to_peers(state: &Arc<ServerState>, payload: Arc<Vec<u8>>) {
    let mut sends = tokio::task::JoinSet::new();
    for peer in state.cluster_view().peers(false) {
        let (state, payload) = (Arc::clone(state), Arc::clone(&payload));
        sends.spawn(async move {
            let resp = ForwardProtocol::Resp;
            crate::cluster::forward::forward(&state, peer.node_id, resp, 0, &payload).await
        });
    }
    while let Some(sent) = sends.join_next().await {
        if !matches!(sent, Ok(Ok(_))) {
            state
                .pubsub
                .broadcast_dropped
                .fetch_add(1, Ordering::Relaxed);
            warn!("a node did not take published messages; they are lost for its subscribers");
        }
    }
}
