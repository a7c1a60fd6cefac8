//! What the transport tests share: a recording handler, fabrics on a memory network with
//! small timings, waiting on tokio's (paused) clock, and a raw peer that speaks bytes.

use std::sync::Arc;
use std::time::Duration;

use fabric::{Fabric, FabricConfig, FabricHandler, MemoryNetwork, Network, OwnedFrame, Responder};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, sleep, timeout};
use wire_fabric::{FRAME_HEADER_SIZE_BYTES, Hello, List, Message, decode_frame, encode};

/// The cluster name of the test fabrics.
pub const CLUSTER: &str = "test-cluster";

/// Heartbeat interval of the test fabrics: small, so suspicion comes quickly.
pub const HEARTBEAT_INTERVAL_MS: u64 = 10;

/// Silent intervals before suspicion in the test fabrics.
pub const HEARTBEAT_TIMEOUT_COUNT: u32 = 5;

/// Request timeout of the test fabrics.
pub const REQUEST_TIMEOUT_MS: u64 = 1_000;

/// How long [`wait_until`] waits, on the test's clock, before failing.
const WAIT_MS_MAX: u64 = 30_000;

/// Records what arrives, and answers: a `Forward` with a `ForwardReply` carrying the same
/// payload after `time_left_ms` (0: at once, on the reader task), anything else not at all.
#[derive(Default)]
pub struct Recorder {
    /// Each `Forward` payload, in arrival order, with its sender.
    pub forwards: Mutex<Vec<(u64, Vec<u8>)>>,
    /// Each heartbeat: sender and map version.
    pub heartbeats: Mutex<Vec<(u64, u64)>>,
}

impl FabricHandler for Recorder {
    fn handle(&self, from: u64, frame: OwnedFrame, reply: Responder) {
        let Message::Forward {
            payload,
            time_left_ms,
            ..
        } = frame.message()
        else {
            return;
        };
        self.forwards.lock().push((from, payload.to_vec()));
        let payload = payload.to_vec();
        if time_left_ms == 0 {
            let _ = reply.send(&forward_reply(&payload));
            return;
        }
        tokio::spawn(async move {
            sleep(Duration::from_millis(u64::from(time_left_ms))).await;
            let _ = reply.send(&forward_reply(&payload));
        });
    }

    fn heartbeat(&self, from: u64, map_version: u64, _hearing: &[u64]) {
        self.heartbeats.lock().push((from, map_version));
    }
}

/// A `Forward` whose reply comes `delay_ms` after it arrives.
pub fn forward(payload: &[u8], delay_ms: u32) -> Message<'_> {
    Message::Forward {
        request_id: 0,
        protocol: wire_fabric::ForwardProtocol::Resp,
        time_left_ms: delay_ms,
        payload,
    }
}

fn forward_reply(payload: &[u8]) -> Message<'_> {
    Message::ForwardReply {
        request_id: 0,
        payload,
    }
}

/// The payload of a `ForwardReply` frame.
pub fn reply_payload(frame: &OwnedFrame) -> Vec<u8> {
    match frame.message() {
        Message::ForwardReply { payload, .. } => payload.to_vec(),
        other => panic!("expected a ForwardReply, got {other:?}"),
    }
}

/// The config of test node `node_id` listening on `address`.
pub fn config(node_id: u64, address: &str) -> FabricConfig {
    let mut config = FabricConfig::new(node_id, CLUSTER, address);
    config.heartbeat_interval_ms = HEARTBEAT_INTERVAL_MS;
    config.heartbeat_timeout_count = HEARTBEAT_TIMEOUT_COUNT;
    config.request_timeout_ms = REQUEST_TIMEOUT_MS;
    config
}

/// A fabric with `config` on `network`, dialing from its listen address.
pub async fn start_with(network: &MemoryNetwork, config: FabricConfig) -> (Fabric, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let endpoint: Arc<dyn Network> = Arc::new(network.endpoint(&config.listen_address));
    let handler: Arc<dyn FabricHandler> = Arc::clone(&recorder) as Arc<dyn FabricHandler>;
    let fabric = Fabric::start(config, endpoint, handler)
        .await
        .expect("a test fabric starts");
    (fabric, recorder)
}

/// Test node `node_id` on `network` at `address`.
pub async fn start(
    network: &MemoryNetwork,
    node_id: u64,
    address: &str,
) -> (Fabric, Arc<Recorder>) {
    start_with(network, config(node_id, address)).await
}

/// Waits until `condition` holds, checking every few ms of the test's clock.
///
/// # Panics
///
/// If it does not hold within 30 s of that clock.
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < Duration::from_millis(WAIT_MS_MAX),
            "timed out waiting until {what}"
        );
        sleep(Duration::from_millis(5)).await;
    }
}

/// Whether `fabric` has node `node_id` as a peer, with the outgoing connection up.
pub fn connected_to(fabric: &Fabric, node_id: u64) -> bool {
    fabric
        .peers()
        .iter()
        .any(|peer| peer.node_id == Some(node_id) && peer.connected)
}

/// Whether `fabric` suspects node `node_id`.
pub fn suspects(fabric: &Fabric, node_id: u64) -> bool {
    fabric
        .peers()
        .iter()
        .any(|peer| peer.node_id == Some(node_id) && peer.suspect)
}

/// The encoded `Hello` of a raw peer: node `node_id` of `cluster_name`, announcing no fabric
/// address (so the fabric it greets does not dial it back).
pub fn raw_hello(node_id: u64, cluster_name: &str) -> Vec<u8> {
    let hello = Hello {
        node_id,
        cluster_name,
        service_addresses: List::from_items(&[]),
        resp_addresses: List::from_items(&[]),
        fabric_address: "",
    };
    let mut out = Vec::new();
    encode(&Message::Hello(hello), &mut out);
    out
}

/// Reads one whole frame from a raw stream; `None` if it ends first.
pub async fn read_raw_frame(stream: &mut fabric::BoxedStream) -> Option<Vec<u8>> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 4096];
    loop {
        if let Ok(Some((_, size_bytes))) = decode_frame(&buffer, u32::MAX) {
            return Some(buffer[..size_bytes].to_vec());
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(read_bytes) => buffer.extend_from_slice(&chunk[..read_bytes]),
        }
    }
}

/// Whether the far end closes a raw stream within a second of the test's clock, reading
/// and dropping whatever arrives before.
pub async fn closed_by_peer(stream: &mut fabric::BoxedStream) -> bool {
    let drained = async {
        let mut chunk = [0_u8; 4096];
        while let Ok(1..) = stream.read(&mut chunk).await {}
    };
    timeout(Duration::from_secs(1), drained).await.is_ok()
}

/// Writes `bytes` on a raw stream.
pub async fn write_raw(stream: &mut fabric::BoxedStream, bytes: &[u8]) {
    stream.write_all(bytes).await.expect("raw write");
    stream.flush().await.expect("raw flush");
}

/// A frame header of `message_type` declaring `body_size_bytes`, with no body.
pub fn raw_header(message_type: u8, body_size_bytes: u32) -> [u8; FRAME_HEADER_SIZE_BYTES] {
    let mut header = [0_u8; FRAME_HEADER_SIZE_BYTES];
    header[..2].copy_from_slice(&wire_fabric::FRAME_MAGIC);
    header[2] = wire_fabric::FABRIC_VERSION;
    header[3] = message_type;
    header[4..].copy_from_slice(&body_size_bytes.to_be_bytes());
    header
}
