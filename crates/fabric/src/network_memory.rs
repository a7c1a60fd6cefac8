//! [`MemoryNetwork`]: a [`Network`] inside one process, for tests, with the faults a real
//! network has: partitions between two addresses, one-way drops, and a fixed one-way delay.
//!
//! A stream is two bounded `tokio::io::duplex` pipes, one per end, joined by a link task
//! that relays bytes both ways (holding each chunk until its delay has passed). Cutting a
//! stream ends its link task: both ends then read end-of-stream and their writes fail, as
//! after a reset TCP connection.
//!
//! Invariants:
//! - A dial between two partitioned addresses is refused, and starting a partition cuts every
//!   live stream between them; healing only allows new dials.
//! - A one-way drop from `a` to `b` holds every byte `a` sends `b` on live streams (as TCP
//!   does when its segments are lost: the sender's buffers fill, nothing arrives) while bytes
//!   from `b` to `a` flow; a dial between them is refused (a handshake needs both ways).
//!   Healing it lets the held bytes through.
//! - Memory per stream is bounded: two duplex buffers of [`STREAM_BUFFER_BYTES`] per end,
//!   and at most [`LINK_CHUNKS_IN_FLIGHT_MAX`] chunks of [`LINK_CHUNK_BYTES_MAX`] bytes held
//!   by each direction of the link.
//! - The registry holds only live things: ended links and dropped listeners are pruned on
//!   every dial and partition, and accepted streams wait in a backlog of
//!   [`ACCEPT_BACKLOG_MAX`].

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, sleep, sleep_until};

use crate::network::{BoxedStream, Network, NetworkFuture, NetworkListener};

/// Bytes each duplex pipe buffers: small, so that back-pressure shows up in tests as it
/// would on a socket, and large enough that a heartbeat or a small request fits at once.
pub const STREAM_BUFFER_BYTES: usize = 64 * 1024;

/// Most bytes the link task moves at once in one direction.
const LINK_CHUNK_BYTES_MAX: usize = 16 * 1024;

/// Most chunks one direction of a link holds while their delay passes.
const LINK_CHUNKS_IN_FLIGHT_MAX: usize = 64;

/// Most dialed streams a listener has not accepted yet; a dial beyond is refused, as a full
/// TCP backlog would.
const ACCEPT_BACKLOG_MAX: usize = 64;

/// The address reported for a dial from a network without a local address.
const ANONYMOUS_ADDRESS: &str = "memory-anonymous";

const _: () = assert!(LINK_CHUNK_BYTES_MAX <= STREAM_BUFFER_BYTES);

/// An in-process network: a registry of listeners by address, shared by every clone.
///
/// Each node takes its own view with [`MemoryNetwork::endpoint`], so that its dials carry its
/// address and partitions can tell who dials whom.
#[derive(Clone, Default)]
pub struct MemoryNetwork {
    registry: Arc<Mutex<Registry>>,
    /// The address this view dials from; empty for none.
    local_address: Arc<str>,
}

#[derive(Default)]
struct Registry {
    listeners: HashMap<String, mpsc::Sender<(BoxedStream, String)>>,
    /// Partitioned address pairs, the smaller address first.
    partitions: HashSet<(String, String)>,
    /// One-way drops: (from, to).
    drops: HashSet<(String, String)>,
    links: Vec<Link>,
    delay: Duration,
}

/// A live stream between `ends`; dropping `cut` ends its link task.
struct Link {
    ends: (String, String),
    /// The dialer's address, then the listener's.
    dialer_to_listener: (String, String),
    cut: oneshot::Sender<()>,
    /// Whether bytes from the dialer to the listener, and the other way, are held.
    held: [watch::Sender<bool>; 2],
}

impl Link {
    /// Holds (or lets through) the bytes this link carries from `from` to `to`, if it joins
    /// them.
    fn hold(&self, from: &str, to: &str, held: bool) {
        let (dialer, listener) = &self.dialer_to_listener;
        let direction = if (dialer.as_str(), listener.as_str()) == (from, to) {
            0
        } else if (listener.as_str(), dialer.as_str()) == (from, to) {
            1
        } else {
            return;
        };
        self.held[direction].send_replace(held);
    }
}

impl MemoryNetwork {
    /// An empty network.
    pub fn new() -> MemoryNetwork {
        MemoryNetwork::default()
    }

    /// A view of the same network whose dials come from `local_address` (the node's listen
    /// address), so that [`MemoryNetwork::partition`] applies to them.
    pub fn endpoint(&self, local_address: &str) -> MemoryNetwork {
        MemoryNetwork {
            registry: Arc::clone(&self.registry),
            local_address: Arc::from(local_address),
        }
    }

    /// Separates `a` from `b`: dials between them are refused and their live streams cut,
    /// until [`MemoryNetwork::heal`].
    pub fn partition(&self, a: &str, b: &str) {
        let mut registry = self.registry.lock();
        let ends = ordered_pair(a, b);
        // Dropping a link's `cut` sender ends its task, which drops both pipes.
        registry.links.retain(|link| link.ends != ends);
        registry.partitions.insert(ends);
    }

    /// Lets `a` and `b` dial each other again. Streams cut by the partition stay cut.
    pub fn heal(&self, a: &str, b: &str) {
        self.registry.lock().partitions.remove(&ordered_pair(a, b));
    }

    /// Drops what `from` sends `to` (what `to` sends `from` still arrives), until
    /// [`MemoryNetwork::heal_one_way`].
    pub fn drop_one_way(&self, from: &str, to: &str) {
        let mut registry = self.registry.lock();
        registry.drops.insert((from.to_owned(), to.to_owned()));
        for link in &registry.links {
            link.hold(from, to, true);
        }
    }

    /// Ends a one-way drop: the bytes held meanwhile arrive, and the two may dial again.
    pub fn heal_one_way(&self, from: &str, to: &str) {
        let mut registry = self.registry.lock();
        registry.drops.remove(&(from.to_owned(), to.to_owned()));
        for link in &registry.links {
            link.hold(from, to, false);
        }
    }

    /// Delays every byte of streams dialed from now on by `delay_ms` in each direction, and
    /// each dial by as much.
    pub fn set_delay_ms(&self, delay_ms: u64) {
        self.registry.lock().delay = Duration::from_millis(delay_ms);
    }

    fn dialer_address(&self) -> String {
        if self.local_address.is_empty() {
            ANONYMOUS_ADDRESS.to_owned()
        } else {
            self.local_address.to_string()
        }
    }

    fn connect(&self, address: &str) -> io::Result<BoxedStream> {
        let dialer_address = self.dialer_address();
        let mut registry = self.registry.lock();
        registry.links.retain(|link| !link.cut.is_closed());
        let ends = ordered_pair(&dialer_address, address);
        if registry.partitions.contains(&ends) {
            return Err(refused(
                "the network is partitioned between the two addresses",
            ));
        }
        let dropped =
            |from: &str, to: &str| registry.drops.contains(&(from.to_owned(), to.to_owned()));
        if dropped(&dialer_address, address) || dropped(address, &dialer_address) {
            return Err(refused(
                "packets between the two addresses are dropped one way",
            ));
        }
        let Some(incoming) = registry.listeners.get(address) else {
            return Err(refused("nobody listens on this address"));
        };
        let (dialer_end, dialer_link_end) = tokio::io::duplex(STREAM_BUFFER_BYTES);
        let (listener_end, listener_link_end) = tokio::io::duplex(STREAM_BUFFER_BYTES);
        let listener_stream: BoxedStream = Box::new(listener_end);
        if incoming
            .try_send((listener_stream, dialer_address.clone()))
            .is_err()
        {
            return Err(refused("the listener is gone or its backlog is full"));
        }
        let (cut, cut_signal) = oneshot::channel();
        let (to_listener_held, to_listener_gate) = watch::channel(false);
        let (to_dialer_held, to_dialer_gate) = watch::channel(false);
        registry.links.push(Link {
            ends,
            dialer_to_listener: (dialer_address, address.to_owned()),
            cut,
            held: [to_listener_held, to_dialer_held],
        });
        let delay = registry.delay;
        tokio::spawn(run_link(
            (dialer_link_end, to_listener_gate),
            (listener_link_end, to_dialer_gate),
            delay,
            cut_signal,
        ));
        Ok(Box::new(dialer_end))
    }
}

impl Network for MemoryNetwork {
    fn listen<'a>(&'a self, address: &'a str) -> NetworkFuture<'a, Box<dyn NetworkListener>> {
        Box::pin(async move {
            let mut registry = self.registry.lock();
            registry
                .listeners
                .retain(|_, incoming| !incoming.is_closed());
            if address.is_empty() || registry.listeners.contains_key(address) {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("memory address {address:?} is empty or taken"),
                ));
            }
            let (sender, incoming) = mpsc::channel(ACCEPT_BACKLOG_MAX);
            registry.listeners.insert(address.to_owned(), sender);
            let listener: Box<dyn NetworkListener> = Box::new(MemoryListener {
                address: address.to_owned(),
                incoming,
            });
            Ok(listener)
        })
    }

    fn dial<'a>(&'a self, address: &'a str) -> NetworkFuture<'a, BoxedStream> {
        Box::pin(async move {
            let delay = self.registry.lock().delay;
            if !delay.is_zero() {
                sleep(delay).await;
            }
            self.connect(address)
        })
    }
}

/// A listening address of a [`MemoryNetwork`].
struct MemoryListener {
    address: String,
    incoming: mpsc::Receiver<(BoxedStream, String)>,
}

impl NetworkListener for MemoryListener {
    fn local_address(&self) -> String {
        self.address.clone()
    }

    fn accept(&mut self) -> NetworkFuture<'_, (BoxedStream, String)> {
        Box::pin(async move {
            // The registry keeps the sender while this listener lives, so `None` cannot
            // happen; answer it as an error rather than trust that.
            self.incoming
                .recv()
                .await
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "listener closed"))
        })
    }
}

/// Relays both directions between the two link ends until both are done or the stream is
/// cut. Each end comes with the gate of the bytes it sends (held while it reads `true`).
async fn run_link(
    (dialer_link_end, to_listener_gate): (DuplexStream, watch::Receiver<bool>),
    (listener_link_end, to_dialer_gate): (DuplexStream, watch::Receiver<bool>),
    delay: Duration,
    cut_signal: oneshot::Receiver<()>,
) {
    let (dialer_read, dialer_write) = tokio::io::split(dialer_link_end);
    let (listener_read, listener_write) = tokio::io::split(listener_link_end);
    let both_ways = async {
        tokio::join!(
            relay(dialer_read, listener_write, delay, to_listener_gate),
            relay(listener_read, dialer_write, delay, to_dialer_gate),
        )
    };
    tokio::select! {
        _ = cut_signal => {}
        _ = both_ways => {}
    }
}

/// Moves bytes from `from` to `to`, each chunk no earlier than `delay` after it was read and
/// only while `gate` is open (`false`).
async fn relay(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    delay: Duration,
    mut gate: watch::Receiver<bool>,
) {
    let (chunks_sender, mut chunks) = mpsc::channel::<(Instant, Bytes)>(LINK_CHUNKS_IN_FLIGHT_MAX);
    let read_side = async move {
        let mut buffer = vec![0_u8; LINK_CHUNK_BYTES_MAX];
        while let Ok(size_bytes @ 1..) = from.read(&mut buffer).await {
            let chunk = Bytes::copy_from_slice(&buffer[..size_bytes]);
            if chunks_sender
                .send((Instant::now() + delay, chunk))
                .await
                .is_err()
            {
                return;
            }
        }
    };
    let write_side = async move {
        while let Some((deliver_at, chunk)) = chunks.recv().await {
            sleep_until(deliver_at).await;
            // The sender is in the link's entry: while the link lives, the wait ends only
            // when the gate opens.
            if gate.wait_for(|held| !held).await.is_err() {
                return;
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        // End-of-stream travels on: the far end reads 0 bytes. It may be gone already.
        let _ = to.shutdown().await;
    };
    tokio::join!(read_side, write_side);
}

fn ordered_pair(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_owned(), b.to_owned())
    } else {
        (b.to_owned(), a.to_owned())
    }
}

fn refused(reason: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionRefused, reason)
}
