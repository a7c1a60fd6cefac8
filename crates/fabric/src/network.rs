//! The network seam: how a fabric listens and dials, as a trait, so that tests run whole
//! clusters in one process ([`crate::MemoryNetwork`]) and the server runs on TCP
//! ([`crate::TcpNetwork`]).
//!
//! Invariants:
//! - A stream is a plain ordered byte stream, both ways; the fabric frames it itself.
//! - A refused or failed dial is an `io::Error`, never a panic; the fabric retries with
//!   backoff.

use std::future::Future;
use std::io;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// A byte stream between two nodes: what a [`Network`] dials and a [`NetworkListener`]
/// accepts.
pub trait FabricStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> FabricStream for T {}

/// A boxed [`FabricStream`], whatever the network.
pub type BoxedStream = Box<dyn FabricStream>;

/// The future of a network call: boxed, so that [`Network`] stays object safe.
pub type NetworkFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// Where nodes listen and how they dial each other.
pub trait Network: Send + Sync + 'static {
    /// Starts listening on `address` (`host:port`; a TCP port 0 picks a free port, see
    /// [`NetworkListener::local_address`]).
    ///
    /// # Errors
    ///
    /// When the address is malformed or taken.
    fn listen<'a>(&'a self, address: &'a str) -> NetworkFuture<'a, Box<dyn NetworkListener>>;

    /// Opens a stream to whoever listens on `address`.
    ///
    /// # Errors
    ///
    /// When nobody listens there, the network refuses (a partition), or the dial fails.
    fn dial<'a>(&'a self, address: &'a str) -> NetworkFuture<'a, BoxedStream>;
}

/// A listening endpoint of a [`Network`].
pub trait NetworkListener: Send + 'static {
    /// The address actually bound (with the port a port 0 picked), as peers dial it.
    fn local_address(&self) -> String;

    /// Waits for the next incoming stream, and returns it with the remote address (for logs).
    ///
    /// # Errors
    ///
    /// When the listener failed; the fabric logs it and keeps accepting.
    fn accept(&mut self) -> NetworkFuture<'_, (BoxedStream, String)>;
}
