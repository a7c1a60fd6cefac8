//! The dialer of one peer and channel: keeps one outgoing connection to it up while it stays
//! in the peer table, redialing with bounded exponential backoff.
//!
//! Invariants:
//! - One dialer per peer entry and channel, hence at most one outgoing connection per peer
//!   and channel.
//! - Between two dials the dialer waits at least [`RECONNECT_BACKOFF_MS_MIN`] and at most
//!   [`RECONNECT_BACKOFF_MS_MAX`]; the wait doubles after each failed dial and starts over
//!   after a handshake succeeds.
//! - The dialer ends when its entry is removed (its `stop` is notified) or at shutdown, and
//!   closes its connection as it goes.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::sleep;
use tracing::{debug, info, warn};

use crate::config::{RECONNECT_BACKOFF_MS_MAX, RECONNECT_BACKOFF_MS_MIN};
use crate::connection::{Connection, Direction};
use crate::fabric::Shared;
use crate::handshake::{self, HandshakeError};
use crate::peer_table::{Channel, Learned, PeerSlot};

/// Why a dial gave no connection.
enum DialFailed {
    /// Try again after the backoff.
    Retry,
    /// The entry is gone: the dialer ends.
    Removed,
}

/// Keeps the outgoing connection of entry `slot` on `channel` up until `stop` or shutdown.
pub(crate) async fn run_dialer(
    shared: Arc<Shared>,
    slot: PeerSlot,
    channel: Channel,
    stop: Arc<Notify>,
) {
    let mut backoff_ms = RECONNECT_BACKOFF_MS_MIN;
    loop {
        let Some(address) = shared.peers().lock().address_of(slot) else {
            return;
        };
        let dialed = tokio::select! {
            dialed = connect(&shared, slot, channel, &address) => dialed,
            () = stop.notified() => return,
            () = shared.wait_shutdown() => return,
        };
        match dialed {
            Ok(connection) => {
                backoff_ms = RECONNECT_BACKOFF_MS_MIN;
                let stopping = tokio::select! {
                    () = connection.wait_closed() => false,
                    () = stop.notified() => true,
                    () = shared.wait_shutdown() => true,
                };
                connection.close();
                shared.peers().lock().detach(slot, channel, &connection);
                if stopping {
                    return;
                }
                debug!(
                    node_id = connection.peer_node_id(),
                    ?channel,
                    "fabric connection lost, redialing"
                );
            }
            Err(DialFailed::Removed) => return,
            Err(DialFailed::Retry) => {}
        }
        tokio::select! {
            () = sleep(Duration::from_millis(backoff_ms)) => {}
            () = stop.notified() => return,
            () = shared.wait_shutdown() => return,
        }
        backoff_ms = backoff_ms_next(backoff_ms);
    }
}

/// Dials, handshakes, and attaches the connection to the entry's `channel`.
async fn connect(
    shared: &Arc<Shared>,
    slot: PeerSlot,
    channel: Channel,
    address: &str,
) -> Result<Arc<Connection>, DialFailed> {
    let own_node_id = shared.config().node_id;
    let handshaken = match handshake::dial(shared, address).await {
        Ok(handshaken) => handshaken,
        Err(HandshakeError::BadNodeId { node_id }) if node_id == own_node_id => {
            debug!(address, "fabric peer address is this node's own, dropped");
            shared.peers().lock().remove_slot(slot);
            return Err(DialFailed::Removed);
        }
        Err(error) => {
            log_dial_failure(address, &error);
            return Err(DialFailed::Retry);
        }
    };
    let node_id = handshaken.node_id;
    let learned = shared
        .peers()
        .lock()
        .learn_node_id(slot, node_id, own_node_id);
    if learned == Learned::Removed {
        debug!(
            node_id,
            address, "fabric peer entry dropped: duplicate or gone"
        );
        return Err(DialFailed::Removed);
    }
    let connection = Connection::start(
        shared,
        node_id,
        Direction::Outgoing,
        handshaken.reader,
        handshaken.writer,
    );
    if !shared.peers().lock().attach(slot, channel, &connection) {
        connection.close();
        return Err(DialFailed::Removed);
    }
    shared.heard_from(node_id);
    info!(node_id, address, ?channel, "fabric connected");
    Ok(connection)
}

fn log_dial_failure(address: &str, error: &HandshakeError) {
    match error {
        HandshakeError::OtherCluster { cluster_name } => warn!(
            address,
            cluster_name, "fabric peer belongs to another cluster, refused"
        ),
        HandshakeError::BadNodeId { node_id } => {
            warn!(
                address,
                node_id, "fabric peer claims a bad node id, refused"
            );
        }
        _ => debug!(address, %error, "fabric dial failed"),
    }
}

fn backoff_ms_next(backoff_ms: u64) -> u64 {
    backoff_ms.saturating_mul(2).min(RECONNECT_BACKOFF_MS_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_minimum_up_to_the_maximum() {
        let mut backoff_ms = RECONNECT_BACKOFF_MS_MIN;
        let mut waits_ms = vec![backoff_ms];
        while backoff_ms < RECONNECT_BACKOFF_MS_MAX {
            backoff_ms = backoff_ms_next(backoff_ms);
            waits_ms.push(backoff_ms);
        }
        assert_eq!(waits_ms, [50, 100, 200, 400, 800, 1600, 2000]);
        assert_eq!(
            backoff_ms_next(RECONNECT_BACKOFF_MS_MAX),
            RECONNECT_BACKOFF_MS_MAX
        );
    }
}
