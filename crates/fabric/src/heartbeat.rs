//! The heartbeat sender: every interval, one `Heartbeat` on each outgoing connection.
//!
//! Suspicion is computed where it is read ([`crate::Fabric::peers`]), from when each peer was
//! last heard; this task only keeps this node heard by its peers.
//!
//! Invariants:
//! - A heartbeat names at most `PEERS_PER_HEARTBEAT_MAX` peers: the table holds no more.
//! - A heartbeat that finds a write queue full is skipped for that peer: the queue is full of
//!   frames that prove this node alive just as well.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior, interval};
use tracing::debug;
use wire_fabric::{List, Message};

use crate::fabric::Shared;
use crate::frame::encode_with_request_id;

/// Sends heartbeats until shutdown.
pub(crate) async fn run_heartbeats(shared: Arc<Shared>) {
    let interval_ms = shared.config().heartbeat_interval_ms;
    let mut ticks = interval(Duration::from_millis(interval_ms));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => send_heartbeats(&shared),
            () = shared.wait_shutdown() => return,
        }
    }
}

fn send_heartbeats(shared: &Shared) {
    let now = Instant::now();
    let suspect_after_ms = shared.config().suspect_after_ms();
    let (connections, peer_node_ids) = {
        let peers = shared.peers().lock();
        let hearing = peers.hearing_node_ids(now, suspect_after_ms);
        (peers.connections(), hearing)
    };
    if connections.is_empty() {
        return;
    }
    let heartbeat = Message::Heartbeat {
        node_id: shared.config().node_id,
        sent_at_ms: shared.unix_ms(now),
        map_version: shared.map_version(),
        peer_node_ids: List::from_items(&peer_node_ids),
    };
    let frame = encode_with_request_id(&heartbeat, 0);
    for connection in connections {
        if let Err(error) = connection.push(frame.clone()) {
            debug!(%error, "fabric heartbeat skipped");
        }
    }
}
