//! The acceptor: takes incoming streams, handshakes, and serves each connection until it
//! closes. A node that dials in becomes a peer (at the fabric address its `Hello` names), so
//! that this node dials it back for its own requests and heartbeats.
//!
//! Invariants:
//! - At most [`INCOMING_CONNECTIONS_MAX`] incoming connections are served at once; a stream
//!   beyond is dropped at once.
//! - A stream whose handshake fails is closed without any other frame read or written.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::sleep;
use tracing::{debug, warn};

use crate::config::{INCOMING_CONNECTIONS_MAX, RECONNECT_BACKOFF_MS_MIN};
use crate::connection::{Connection, Direction};
use crate::fabric::Shared;
use crate::handshake::{self, HandshakeError};
use crate::network::{BoxedStream, NetworkListener};

/// Accepts streams until shutdown.
pub(crate) async fn run_acceptor(shared: Arc<Shared>, mut listener: Box<dyn NetworkListener>) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shared.wait_shutdown() => return,
        };
        match accepted {
            Ok((stream, remote_address)) => admit(&shared, stream, remote_address),
            Err(error) => {
                warn!(%error, "fabric accept failed");
                // Failures like running out of descriptors repeat at once; pause a little so
                // that the loop does not spin.
                sleep(Duration::from_millis(RECONNECT_BACKOFF_MS_MIN)).await;
            }
        }
    }
}

fn admit(shared: &Arc<Shared>, stream: BoxedStream, remote_address: String) {
    match Arc::clone(shared.incoming_permits()).try_acquire_owned() {
        Ok(permit) => shared.spawn(serve(Arc::clone(shared), stream, remote_address, permit)),
        Err(_) => warn!(
            remote_address,
            connections_max = INCOMING_CONNECTIONS_MAX,
            "fabric refuses a connection: too many incoming connections"
        ),
    }
}

/// Handshakes and serves one incoming connection; the permit is held until it closes.
async fn serve(
    shared: Arc<Shared>,
    stream: BoxedStream,
    remote_address: String,
    _permit: OwnedSemaphorePermit,
) {
    let handshaken = tokio::select! {
        handshaken = handshake::accept(&shared, stream) => handshaken,
        () = shared.wait_shutdown() => return,
    };
    let handshaken = match handshaken {
        Ok(handshaken) => handshaken,
        Err(error) => {
            log_refusal(&remote_address, &error);
            return;
        }
    };
    let node_id = handshaken.node_id;
    if !handshaken.fabric_address.is_empty() {
        shared.add_node(node_id, &handshaken.fabric_address);
    }
    shared.heard_from(node_id);
    debug!(node_id, remote_address, "fabric peer connected in");
    let connection = Connection::start(
        &shared,
        node_id,
        Direction::Incoming,
        handshaken.reader,
        handshaken.writer,
    );
    connection.wait_closed().await;
}

fn log_refusal(remote_address: &str, error: &HandshakeError) {
    match error {
        HandshakeError::OtherCluster { cluster_name } => warn!(
            remote_address,
            cluster_name, "fabric refuses a peer of another cluster"
        ),
        HandshakeError::Read(_) | HandshakeError::Unexpected(_) => warn!(
            remote_address,
            %error,
            "fabric refuses a peer that did not start with a Hello"
        ),
        _ => debug!(remote_address, %error, "fabric handshake failed"),
    }
}
