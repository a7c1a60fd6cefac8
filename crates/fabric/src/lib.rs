//! The fabric transport: how the nodes of an Osprey cluster talk to each other, on tokio,
//! over an injectable byte-stream [`Network`].
//!
//! What it does: a [`Fabric`] per node listens for peers and dials each peer it knows,
//! keeping one outgoing connection per peer and [`Channel`] for its own requests (bulk
//! transfers on a connection of their own) and heartbeats, and serving
//! the requests that arrive on the connections peers dialed. Every connection opens with
//! `Hello`/`HelloAck` (node ids learnt, another cluster refused). [`Fabric::request`] sends
//! a request and waits for the reply with its id; [`Fabric::send`] sends without waiting; a
//! [`FabricHandler`] serves what arrives and answers through a [`Responder`]. Heartbeats go
//! out every interval, and a peer silent for the interval times the timeout count is
//! *suspect* ([`Fabric::peers`]): only suspicion, since the metadata group decides
//! membership. [`TcpNetwork`] is the real network; [`MemoryNetwork`] runs a cluster in one
//! process, with partitions and delay.
//!
//! Layer: beside the server, the only crates with sockets and tokio. Depends on
//! `wire-fabric` (the codec), tokio, bytes, parking_lot, thiserror and tracing; the cluster
//! crate gives the messages their meaning, and the server wires both together.
//!
//! Invariants:
//! - Every I/O goes through [`Network`]; time through tokio's clock, so tests pause it.
//! - Every buffer and queue is bounded: a connection's reader holds at most one frame of the
//!   configured limit plus one read chunk, and grows only by bytes that arrived, never by a
//!   size a peer declared; a connection's write queue and its pending requests have limits,
//!   and a full one answers [`FabricError::Overloaded`] at once instead of waiting.
//! - Frames sent to one peer through [`Fabric::request`] and [`Fabric::send`] leave in the
//!   order of the calls: both queue their frame before returning.
//! - A request's failure says whether it may have been delivered
//!   ([`FabricError::maybe_delivered`]): "not connected" and "overloaded" mean not sent;
//!   "connection lost" and "timeout" mean maybe.
//! - The handler sees the frames of one connection one at a time, in arrival order.
//! - A peer that sends anything but valid frames, or a frame over the limit, is disconnected;
//!   other connections are unaffected.
//!
//! The cluster design (heartbeats, suspicion, replica writes in order) is in the cluster
//! reference (section 5) and `docs/ARCHITECTURE.md`.

mod acceptor;
mod config;
mod connection;
mod dialer;
mod error;
mod fabric;
mod frame;
mod frame_reader;
mod handler;
mod handshake;
mod heartbeat;
mod network;
mod network_memory;
mod network_tcp;
mod peer_table;
mod write_queue;

pub use config::{
    FabricConfig, HEARTBEAT_INTERVAL_MS_DEFAULT, HEARTBEAT_TIMEOUT_COUNT_DEFAULT,
    INCOMING_CONNECTIONS_MAX, READ_CHUNK_BYTES, RECONNECT_BACKOFF_MS_MAX, RECONNECT_BACKOFF_MS_MIN,
    REQUEST_TIMEOUT_MS_DEFAULT, REQUESTS_PENDING_MAX_DEFAULT, WRITE_BATCH_BYTES_MAX,
    WRITE_BUFFER_BYTES, WRITE_QUEUE_BYTES_MAX_DEFAULT, WRITE_QUEUE_FRAMES_MAX_DEFAULT,
};
pub use error::FabricError;
pub use fabric::Fabric;
pub use frame::OwnedFrame;
pub use handler::{FabricHandler, Responder};
pub use network::{BoxedStream, FabricStream, Network, NetworkFuture, NetworkListener};
pub use network_memory::{MemoryNetwork, STREAM_BUFFER_BYTES};
pub use network_tcp::TcpNetwork;
pub use peer_table::{Channel, PEERS_MAX, PeerStatus};
