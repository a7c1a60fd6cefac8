//! [`FabricConfig`] and the fixed limits of the transport.
//!
//! Invariants:
//! - Every queue, buffer and backoff of the transport has a named limit here or in the
//!   config; the relations between them are asserted at compile time or by
//!   [`FabricConfig::validate`].

use std::io;

use wire_fabric::{
    ADDRESS_BYTES_MAX, ADDRESSES_PER_LIST_MAX, CLUSTER_NAME_BYTES_MAX,
    FRAME_BODY_SIZE_BYTES_MAX_DEFAULT, PEERS_PER_HEARTBEAT_MAX,
};

/// Aerospike's heartbeat interval default (`cfg.c`), in milliseconds.
pub const HEARTBEAT_INTERVAL_MS_DEFAULT: u64 = 150;

/// Aerospike's heartbeat timeout default, in intervals: a peer silent for 1.5 s is suspect.
pub const HEARTBEAT_TIMEOUT_COUNT_DEFAULT: u32 = 10;

/// How long a request waits for its reply by default: well above a heartbeat timeout, so a
/// slow peer is suspected before its requests time out.
pub const REQUEST_TIMEOUT_MS_DEFAULT: u64 = 5_000;

/// Default bound on the bytes queued for one connection's writer: a few large replica writes,
/// or many thousands of small ones.
pub const WRITE_QUEUE_BYTES_MAX_DEFAULT: usize = 64 * 1024 * 1024;

/// Default bound on the frames queued for one connection's writer.
pub const WRITE_QUEUE_FRAMES_MAX_DEFAULT: usize = 16 * 1024;

/// Default bound on the requests waiting for a reply on one connection: every queued request
/// may be waiting, and as many more already written.
pub const REQUESTS_PENDING_MAX_DEFAULT: usize = 2 * WRITE_QUEUE_FRAMES_MAX_DEFAULT;

/// First delay before redialing a peer, doubled after each failure.
pub const RECONNECT_BACKOFF_MS_MIN: u64 = 50;

/// Longest delay between two dials of one peer: a healed peer is found within 2 s.
pub const RECONNECT_BACKOFF_MS_MAX: u64 = 2_000;

/// Most incoming connections served at once. Each peer keeps one outgoing connection to us
/// per channel (two), and a replaced connection lingers until its end is noticed, hence
/// four times the largest cluster a heartbeat describes.
pub const INCOMING_CONNECTIONS_MAX: usize = 4 * PEERS_PER_HEARTBEAT_MAX;

/// Most bytes a connection's reader asks the stream for at once.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Most bytes a writer takes from its queue for one batch (one frame at least, whatever its
/// size); the batch goes out in as few writes as the buffer allows.
pub const WRITE_BATCH_BYTES_MAX: usize = 256 * 1024;

/// The buffer a writer copies small frames into, so that many frames make one write.
pub const WRITE_BUFFER_BYTES: usize = 64 * 1024;

const _: () = assert!(RECONNECT_BACKOFF_MS_MIN > 0);
const _: () = assert!(RECONNECT_BACKOFF_MS_MIN <= RECONNECT_BACKOFF_MS_MAX);
const _: () = assert!(WRITE_BUFFER_BYTES <= WRITE_BATCH_BYTES_MAX);
const _: () = assert!(WRITE_BATCH_BYTES_MAX <= WRITE_QUEUE_BYTES_MAX_DEFAULT);
const _: () = assert!(REQUESTS_PENDING_MAX_DEFAULT >= WRITE_QUEUE_FRAMES_MAX_DEFAULT);

/// How one node's fabric runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FabricConfig {
    /// This node's id; never 0.
    pub node_id: u64,
    /// The cluster this node belongs to (at most 64 bytes); peers of another cluster are
    /// refused.
    pub cluster_name: String,
    /// Where the fabric listens, `host:port`.
    pub listen_address: String,
    /// Where peers reach this node's fabric, sent in `Hello`; empty means the address the
    /// listener actually bound (set it when listening on a wildcard address).
    pub fabric_address: String,
    /// Where Aerospike clients reach this node, sent in `Hello`.
    pub service_addresses: Vec<String>,
    /// Where Redis clients reach this node, sent in `Hello`.
    pub resp_addresses: Vec<String>,
    /// How long a request waits for its reply, and a handshake for its answer, in ms.
    pub request_timeout_ms: u64,
    /// How often heartbeats go out, in ms.
    pub heartbeat_interval_ms: u64,
    /// How many heartbeat intervals of silence make a peer suspect.
    pub heartbeat_timeout_count: u32,
    /// The largest frame body accepted from a peer; a larger declared size closes the
    /// connection before the body is read.
    pub frame_body_size_bytes_max: u32,
    /// Most bytes queued for one connection's writer; beyond, sends fail with
    /// [`crate::FabricError::Overloaded`]. One frame is always accepted by an empty queue.
    pub write_queue_bytes_max: usize,
    /// Most frames queued for one connection's writer.
    pub write_queue_frames_max: usize,
    /// Most requests waiting for replies on one connection.
    pub requests_pending_max: usize,
}

impl FabricConfig {
    /// A config with the defaults: heartbeats every 150 ms, suspect after 10 silent
    /// intervals, requests time out after 5 s, the codec's default frame limit, and the fabric
    /// address the listener binds.
    pub fn new(node_id: u64, cluster_name: &str, listen_address: &str) -> FabricConfig {
        FabricConfig {
            node_id,
            cluster_name: cluster_name.to_owned(),
            listen_address: listen_address.to_owned(),
            fabric_address: String::new(),
            service_addresses: Vec::new(),
            resp_addresses: Vec::new(),
            request_timeout_ms: REQUEST_TIMEOUT_MS_DEFAULT,
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS_DEFAULT,
            heartbeat_timeout_count: HEARTBEAT_TIMEOUT_COUNT_DEFAULT,
            frame_body_size_bytes_max: FRAME_BODY_SIZE_BYTES_MAX_DEFAULT,
            write_queue_bytes_max: WRITE_QUEUE_BYTES_MAX_DEFAULT,
            write_queue_frames_max: WRITE_QUEUE_FRAMES_MAX_DEFAULT,
            requests_pending_max: REQUESTS_PENDING_MAX_DEFAULT,
        }
    }

    /// How long a peer may stay silent before it is suspect, in ms.
    pub fn suspect_after_ms(&self) -> u64 {
        self.heartbeat_interval_ms
            .saturating_mul(u64::from(self.heartbeat_timeout_count))
    }

    /// Checks what the codec would refuse to encode, and that every interval and limit is
    /// positive.
    ///
    /// # Errors
    ///
    /// `InvalidInput`, naming the field.
    pub fn validate(&self) -> io::Result<()> {
        let checks = [
            (self.node_id != 0, "node_id is 0"),
            (
                self.cluster_name.len() <= CLUSTER_NAME_BYTES_MAX,
                "cluster_name is over 64 bytes",
            ),
            (
                address_fits(&self.fabric_address),
                "fabric_address is too long",
            ),
            (
                addresses_fit(&self.service_addresses),
                "service_addresses: too many or too long",
            ),
            (
                addresses_fit(&self.resp_addresses),
                "resp_addresses: too many or too long",
            ),
            (self.request_timeout_ms > 0, "request_timeout_ms is 0"),
            (self.heartbeat_interval_ms > 0, "heartbeat_interval_ms is 0"),
            (
                self.heartbeat_timeout_count > 0,
                "heartbeat_timeout_count is 0",
            ),
            (self.write_queue_bytes_max > 0, "write_queue_bytes_max is 0"),
            (
                self.write_queue_frames_max > 0,
                "write_queue_frames_max is 0",
            ),
            (self.requests_pending_max > 0, "requests_pending_max is 0"),
        ];
        match checks.into_iter().find(|(ok, _)| !ok) {
            Some((_, reason)) => Err(io::Error::new(io::ErrorKind::InvalidInput, reason)),
            None => Ok(()),
        }
    }
}

fn address_fits(address: &str) -> bool {
    address.len() <= ADDRESS_BYTES_MAX
}

fn addresses_fit(addresses: &[String]) -> bool {
    addresses.len() <= ADDRESSES_PER_LIST_MAX && addresses.iter().all(|a| address_fits(a))
}
