//! [`Fabric`]: one node's transport, and the state its tasks share.
//!
//! Tasks: one acceptor (serves incoming connections), one heartbeat sender, one dialer per
//! peer and [`Channel`] (keeps that outgoing connection up), and a reader and a writer per
//! connection.
//!
//! Invariants:
//! - Every frame this node sends with a request id carries an id picked here from one
//!   counter, unique for the fabric's life; so a reply matches only the request it answers.
//! - [`Fabric::request`] and [`Fabric::send`] queue their frame before they return: frames to
//!   one peer on one channel leave in the order of the calls, whenever their futures are
//!   polled.
//! - Every task the fabric spawns watches the shutdown signal, and [`Fabric::shutdown`]
//!   returns only after all of them ended.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::Instant;
use wire_fabric::{ADDRESS_BYTES_MAX, Message};

use crate::acceptor::run_acceptor;
use crate::config::{FabricConfig, INCOMING_CONNECTIONS_MAX};
use crate::connection::{Connection, PendingReply};
use crate::dialer::run_dialer;
use crate::error::FabricError;
use crate::frame::{FrameRole, OwnedFrame, encode_with_request_id};
use crate::handler::FabricHandler;
use crate::handshake::HelloFrames;
use crate::heartbeat::run_heartbeats;
use crate::network::Network;
use crate::peer_table::{Channel, NewPeer, PeerStatus, PeerTable};

/// One node's fabric: its listener, its connections to peers, and its heartbeats.
///
/// Dropping it signals every task to stop, without waiting; [`Fabric::shutdown`] waits.
pub struct Fabric {
    shared: Arc<Shared>,
}

/// What the fabric's tasks share.
pub(crate) struct Shared {
    config: FabricConfig,
    network: Arc<dyn Network>,
    handler: Arc<dyn FabricHandler>,
    hello_frames: HelloFrames,
    local_address: String,
    peers: Mutex<PeerTable>,
    request_id_last: AtomicU64,
    map_version: AtomicU64,
    shutdown: watch::Sender<bool>,
    /// Cloned into every task; once all clones are dropped, `tasks_done` yields `None`.
    tasks_alive: Mutex<Option<mpsc::Sender<()>>>,
    tasks_done: tokio::sync::Mutex<mpsc::Receiver<()>>,
    incoming_permits: Arc<Semaphore>,
    clock_origin: Instant,
    clock_origin_unix_ms: u64,
}

impl Fabric {
    /// Listens on `config.listen_address` and starts the acceptor and the heartbeats. Peers
    /// are added afterwards ([`Fabric::add_peer`], [`Fabric::add_peer_node`]).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a config the codec could not announce (see
    /// [`FabricConfig::validate`]), or the listener's error.
    pub async fn start(
        config: FabricConfig,
        network: Arc<dyn Network>,
        handler: Arc<dyn FabricHandler>,
    ) -> io::Result<Fabric> {
        config.validate()?;
        let listener = network.listen(&config.listen_address).await?;
        let local_address = listener.local_address();
        let fabric_address = match config.fabric_address.as_str() {
            "" => local_address.clone(),
            announced => announced.to_owned(),
        };
        if fabric_address.len() > ADDRESS_BYTES_MAX {
            let reason = "the bound fabric address is too long to announce";
            return Err(io::Error::new(io::ErrorKind::InvalidInput, reason));
        }
        let (tasks_alive, tasks_done) = mpsc::channel(1);
        let shared = Arc::new(Shared {
            hello_frames: HelloFrames::new(&config, &fabric_address),
            config,
            network,
            handler,
            local_address,
            peers: Mutex::new(PeerTable::default()),
            request_id_last: AtomicU64::new(0),
            map_version: AtomicU64::new(0),
            shutdown: watch::Sender::new(false),
            tasks_alive: Mutex::new(Some(tasks_alive)),
            tasks_done: tokio::sync::Mutex::new(tasks_done),
            incoming_permits: Arc::new(Semaphore::new(INCOMING_CONNECTIONS_MAX)),
            clock_origin: Instant::now(),
            clock_origin_unix_ms: unix_now_ms(),
        });
        shared.spawn(run_acceptor(Arc::clone(&shared), listener));
        shared.spawn(run_heartbeats(Arc::clone(&shared)));
        Ok(Fabric { shared })
    }

    /// This node's id.
    pub fn node_id(&self) -> u64 {
        self.shared.config.node_id
    }

    /// The address the listener bound (with the port a port 0 picked).
    pub fn local_address(&self) -> &str {
        &self.shared.local_address
    }

    /// Adds a seed: a peer known by address only, whose node id the handshake tells. Ignored
    /// if a peer has that address already, or the peer table is full.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (the peer's dialer is spawned).
    pub fn add_peer(&self, address: &str) {
        self.shared.add_seed(address);
    }

    /// Adds node `node_id` at `address`, or updates a known node's address (used from its
    /// next dial on).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (the peer's dialer is spawned).
    pub fn add_peer_node(&self, node_id: u64, address: &str) {
        self.shared.add_node(node_id, address);
    }

    /// Removes node `node_id`: its dialer stops and the outgoing connection closes (its
    /// waiting requests fail with `ConnectionLost`). Returns whether it was a peer. A node
    /// that dials this one again is added again.
    pub fn remove_peer(&self, node_id: u64) -> bool {
        let removed = self.shared.peers.lock().remove_node(node_id);
        removed.inspect(|entry| entry.stop()).is_some()
    }

    /// Every peer's status, known nodes by id, then seeds.
    pub fn peers(&self) -> Vec<PeerStatus> {
        let suspect_after_ms = self.shared.config.suspect_after_ms();
        let peers = self.shared.peers.lock();
        peers.statuses(Instant::now(), suspect_after_ms)
    }

    /// Sets the metadata version that heartbeats announce.
    pub fn set_map_version(&self, map_version: u64) {
        self.shared
            .map_version
            .store(map_version, Ordering::Relaxed);
    }

    /// Sends a request to node `node_id` and waits for its reply. The frame is queued before
    /// this returns, under a request id the fabric picks (the message's own is replaced); the
    /// reply is the frame that comes back with that id on the same connection.
    ///
    /// # Errors
    ///
    /// Not sent: [`FabricError::NotConnected`], [`FabricError::Overloaded`]. Maybe
    /// delivered: [`FabricError::ConnectionLost`], [`FabricError::Timeout`] (after the
    /// config's request timeout, counted from this call).
    ///
    /// # Panics
    ///
    /// If `message` is not a request (`Raft`, `Forward`, `ReplicaWrite`, `ReplicaTruncate`,
    /// `PartitionStreamRequest`).
    pub fn request(
        &self,
        node_id: u64,
        message: &Message<'_>,
    ) -> impl Future<Output = Result<OwnedFrame, FabricError>> + Send + 'static + use<> {
        self.request_on(Channel::General, node_id, message)
    }

    /// [`Fabric::request`] on the connection of `channel`: a bulk transfer's requests take
    /// [`Channel::Bulk`], so that their large answers never hold back the other traffic.
    ///
    /// # Errors
    ///
    /// As [`Fabric::request`].
    ///
    /// # Panics
    ///
    /// As [`Fabric::request`].
    pub fn request_on(
        &self,
        channel: Channel,
        node_id: u64,
        message: &Message<'_>,
    ) -> impl Future<Output = Result<OwnedFrame, FabricError>> + Send + 'static + use<> {
        let started = self.start_request(channel, node_id, message);
        async move { started?.wait().await }
    }

    /// Sends a request to node `node_id` like [`Fabric::request`], and hands its outcome to
    /// `on_reply` instead of a future: on the connection's reader task when the reply arrives,
    /// at most a tenth of the timeout (100 ms at most) after the deadline, when the connection
    /// closes, or here at once when the request cannot be sent. `on_reply` runs exactly once,
    /// so it must be short and must not block (it may be called from this call, under the
    /// caller's locks).
    ///
    /// This costs no task and no timer per request, where [`Fabric::request`]'s future needs
    /// both: it is the path of every replicated write.
    ///
    /// # Panics
    ///
    /// As [`Fabric::request`].
    pub fn request_then(
        &self,
        node_id: u64,
        message: &Message<'_>,
        on_reply: impl FnOnce(Result<OwnedFrame, FabricError>) + Send + 'static,
    ) {
        let outgoing = match self.outgoing_request(Channel::General, node_id, message) {
            Ok(outgoing) => outgoing,
            Err(error) => return on_reply(Err(error)),
        };
        let OutgoingRequest {
            connection,
            request_id,
            frame,
            deadline,
            timeout_ms,
        } = outgoing;
        let registered =
            connection.register_callback(request_id, deadline, timeout_ms, Box::new(on_reply));
        if let Err((error, on_reply)) = registered {
            return on_reply(Err(error));
        }
        if let Err(error) = connection.push(frame) {
            connection.fail_callback(request_id, error);
        }
    }

    /// Queues `message` for node `node_id` without waiting for anything. A message with a
    /// request id gets a fresh one, so that its reply, if any, matches no request.
    ///
    /// # Errors
    ///
    /// [`FabricError::NotConnected`], [`FabricError::Overloaded`]: not sent.
    ///
    /// # Panics
    ///
    /// If `message` is a `Hello` or `HelloAck`: only the handshake sends those.
    pub fn send(&self, node_id: u64, message: &Message<'_>) -> Result<(), FabricError> {
        let role = FrameRole::of(message.message_type());
        assert!(
            role != FrameRole::Handshake,
            "only the handshake sends a Hello"
        );
        let connection = self.connection_of(node_id, Channel::General)?;
        let frame = encode_with_request_id(message, self.shared.next_request_id());
        connection.push(frame)
    }

    /// Stops every task and closes every connection; waits until all tasks ended. Waiting
    /// requests fail with `ConnectionLost`.
    pub async fn shutdown(&self) {
        self.shared.begin_shutdown();
        let alive = self.shared.tasks_alive.lock().take();
        drop(alive);
        let mut tasks_done = self.shared.tasks_done.lock().await;
        // `None` once every task dropped its clone of `tasks_alive`; nothing is ever sent.
        let _ = tasks_done.recv().await;
    }

    fn start_request(
        &self,
        channel: Channel,
        node_id: u64,
        message: &Message<'_>,
    ) -> Result<PendingReply, FabricError> {
        let outgoing = self.outgoing_request(channel, node_id, message)?;
        let pending = outgoing.connection.register_request(
            outgoing.request_id,
            outgoing.deadline,
            outgoing.timeout_ms,
        )?;
        // On error `pending` is dropped, which forgets the request.
        pending.connection().push(outgoing.frame)?;
        Ok(pending)
    }

    /// A request to node `node_id`, encoded under a fresh id, with its connection on
    /// `channel` and its deadline.
    ///
    /// # Panics
    ///
    /// If `message` is not a request.
    fn outgoing_request(
        &self,
        channel: Channel,
        node_id: u64,
        message: &Message<'_>,
    ) -> Result<OutgoingRequest, FabricError> {
        let role = FrameRole::of(message.message_type());
        assert!(
            role == FrameRole::Request,
            "{:?} is not a request",
            message.message_type()
        );
        let connection = self.connection_of(node_id, channel)?;
        let timeout_ms = self.shared.config.request_timeout_ms;
        let request_id = self.shared.next_request_id();
        Ok(OutgoingRequest {
            connection,
            request_id,
            frame: encode_with_request_id(message, request_id),
            deadline: Instant::now() + Duration::from_millis(timeout_ms),
            timeout_ms,
        })
    }

    fn connection_of(
        &self,
        node_id: u64,
        channel: Channel,
    ) -> Result<Arc<Connection>, FabricError> {
        let connection = self.shared.peers.lock().connection_of(node_id, channel);
        connection.ok_or(FabricError::NotConnected { node_id })
    }
}

/// A request ready to be registered and queued on its connection.
struct OutgoingRequest {
    connection: Arc<Connection>,
    request_id: u64,
    frame: bytes::Bytes,
    deadline: Instant,
    timeout_ms: u64,
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.shared.begin_shutdown();
    }
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("node_id", &self.shared.config.node_id)
            .field("local_address", &self.shared.local_address)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn config(&self) -> &FabricConfig {
        &self.config
    }

    pub(crate) fn network(&self) -> &dyn Network {
        &*self.network
    }

    pub(crate) fn handler(&self) -> &dyn FabricHandler {
        &*self.handler
    }

    pub(crate) fn hello_frames(&self) -> &HelloFrames {
        &self.hello_frames
    }

    pub(crate) fn peers(&self) -> &Mutex<PeerTable> {
        &self.peers
    }

    pub(crate) fn incoming_permits(&self) -> &Arc<Semaphore> {
        &self.incoming_permits
    }

    pub(crate) fn map_version(&self) -> u64 {
        self.map_version.load(Ordering::Relaxed)
    }

    /// Milliseconds since the Unix epoch at `now`, on a clock that follows tokio's (so that
    /// a paused test clock pauses it too).
    pub(crate) fn unix_ms(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.clock_origin);
        let elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        self.clock_origin_unix_ms.saturating_add(elapsed_ms)
    }

    /// Runs `task` on the runtime, counted by [`Fabric::shutdown`]; after shutdown began,
    /// drops it instead.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let Some(alive) = self.tasks_alive.lock().clone() else {
            return;
        };
        tokio::spawn(async move {
            task.await;
            drop(alive);
        });
    }

    /// Waits until shutdown begins.
    pub(crate) async fn wait_shutdown(&self) {
        let mut shutdown = self.shutdown.subscribe();
        // The sender lives in `self`, so `wait_for` cannot fail while we borrow it.
        let _ = shutdown.wait_for(|stopping| *stopping).await;
    }

    /// Notes that a frame arrived from node `node_id`.
    pub(crate) fn heard_from(&self, node_id: u64) {
        self.peers.lock().heard(node_id, Instant::now());
    }

    pub(crate) fn add_seed(self: &Arc<Self>, address: &str) {
        if self.is_shutting_down() {
            return;
        }
        let added = self.peers.lock().insert_seed(address, Instant::now());
        if let Some(peer) = added {
            self.spawn_dialers(peer);
        }
    }

    pub(crate) fn add_node(self: &Arc<Self>, node_id: u64, address: &str) {
        if node_id == self.config.node_id || node_id == 0 || self.is_shutting_down() {
            return;
        }
        let added = self
            .peers
            .lock()
            .insert_node(node_id, address, Instant::now());
        if let Some(peer) = added {
            self.spawn_dialers(peer);
        }
    }

    fn spawn_dialers(self: &Arc<Self>, peer: NewPeer) {
        for (channel, stop) in peer.stops {
            self.spawn(run_dialer(Arc::clone(self), peer.slot, channel, stop));
        }
    }

    fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    fn next_request_id(&self) -> u64 {
        self.request_id_last.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
        let entries = self.peers.lock().remove_all();
        for entry in entries {
            entry.stop();
        }
    }
}

fn unix_now_ms() -> u64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}
