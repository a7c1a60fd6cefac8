//! [`TcpNetwork`]: the [`Network`] of a real node, over `tokio::net`.
//!
//! Invariants:
//! - Every stream has `TCP_NODELAY` set: the fabric batches its own writes, so Nagle's
//!   algorithm would only add latency to requests.

use std::io;

use tokio::net::{TcpListener, TcpStream};

use crate::network::{BoxedStream, Network, NetworkFuture, NetworkListener};

/// The TCP network: listen and dial with `tokio::net`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpNetwork;

impl Network for TcpNetwork {
    fn listen<'a>(&'a self, address: &'a str) -> NetworkFuture<'a, Box<dyn NetworkListener>> {
        Box::pin(async move {
            let listener = TcpListener::bind(address).await?;
            let local_address = listener.local_addr()?.to_string();
            let listener: Box<dyn NetworkListener> = Box::new(TcpNetworkListener {
                listener,
                local_address,
            });
            Ok(listener)
        })
    }

    fn dial<'a>(&'a self, address: &'a str) -> NetworkFuture<'a, BoxedStream> {
        Box::pin(async move {
            let stream = TcpStream::connect(address).await?;
            stream.set_nodelay(true)?;
            let stream: BoxedStream = Box::new(stream);
            Ok(stream)
        })
    }
}

/// A bound TCP listener.
struct TcpNetworkListener {
    listener: TcpListener,
    local_address: String,
}

impl NetworkListener for TcpNetworkListener {
    fn local_address(&self) -> String {
        self.local_address.clone()
    }

    fn accept(&mut self) -> NetworkFuture<'_, (BoxedStream, String)> {
        Box::pin(async move {
            let (stream, remote_address) = self.listener.accept().await?;
            stream.set_nodelay(true)?;
            let stream: BoxedStream = Box::new(stream);
            io::Result::Ok((stream, remote_address.to_string()))
        })
    }
}
