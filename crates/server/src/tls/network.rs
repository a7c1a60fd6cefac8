//! [`TlsNetwork`]: the fabric's [`Network`] over mutual TLS.
//!
//! Invariants:
//! - Both ends verify the other: its certificate chains to `ca-file` and carries this node's
//!   TLS name (the dialer checks it as the server name, the acceptor reads it off the client
//!   certificate). A peer that fails either is never handed to the fabric.
//! - Handshakes of incoming streams run on tasks of their own, each within the handshake
//!   timeout: a peer that stalls its handshake holds up no other.

use std::io;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tracing::{debug, warn};

use fabric::{BoxedStream, Network, NetworkFuture, NetworkListener};

use super::{Tls, certificate_names};

/// Incoming streams handshaken and not yet taken by the fabric.
const HANDSHAKEN_QUEUE: usize = 64;

/// The fabric over TLS with this node's certificate.
#[derive(Debug)]
pub struct TlsNetwork {
    tls: Arc<Tls>,
}

impl TlsNetwork {
    /// A network that needs `tls` to have a `ca-file` (checked by the configuration).
    pub fn new(tls: Arc<Tls>) -> TlsNetwork {
        TlsNetwork { tls }
    }
}

fn no_ca() -> io::Error {
    io::Error::other("the fabric's TLS needs tls.ca-file")
}

impl Network for TlsNetwork {
    fn listen<'a>(&'a self, address: &'a str) -> NetworkFuture<'a, Box<dyn NetworkListener>> {
        Box::pin(async move {
            let listener = TcpListener::bind(address).await?;
            let local_address = listener.local_addr()?.to_string();
            let (sender, receiver) = mpsc::channel(HANDSHAKEN_QUEUE);
            let accepting = tokio::spawn(accept_loop(listener, Arc::clone(&self.tls), sender));
            let listener: Box<dyn NetworkListener> = Box::new(TlsListener {
                local_address,
                receiver,
                accepting,
            });
            Ok(listener)
        })
    }

    fn dial<'a>(&'a self, address: &'a str) -> NetworkFuture<'a, BoxedStream> {
        Box::pin(async move {
            let (_, client) = self.tls.fabric_configs().ok_or_else(no_ca)?;
            let name = ServerName::try_from(self.tls.name())
                .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
            let tcp = TcpStream::connect(address).await?;
            tcp.set_nodelay(true)?;
            let handshake = TlsConnector::from(client).connect(name, tcp);
            let stream = tokio::time::timeout(self.tls.handshake_timeout(), handshake)
                .await
                .map_err(|_| {
                    io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out")
                })??;
            let stream: BoxedStream = Box::new(stream);
            Ok(stream)
        })
    }
}

/// A bound fabric listener whose handshakes run behind it.
struct TlsListener {
    local_address: String,
    receiver: mpsc::Receiver<(BoxedStream, String)>,
    accepting: JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl NetworkListener for TlsListener {
    fn local_address(&self) -> String {
        self.local_address.clone()
    }

    fn accept(&mut self) -> NetworkFuture<'_, (BoxedStream, String)> {
        Box::pin(async move {
            self.receiver
                .recv()
                .await
                .ok_or_else(|| io::Error::other("the fabric's TLS listener stopped"))
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Arc<Tls>,
    handshaken: mpsc::Sender<(BoxedStream, String)>,
) {
    loop {
        let (tcp, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                debug!(%error, "fabric accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let (tls, handshaken) = (Arc::clone(&tls), handshaken.clone());
        tokio::spawn(async move {
            match handshake(tcp, &tls).await {
                Ok(stream) => {
                    let _ = handshaken.send((stream, remote.to_string())).await;
                }
                Err(error) => warn!(%remote, %error, "fabric TLS handshake refused"),
            }
        });
    }
}

async fn handshake(tcp: TcpStream, tls: &Tls) -> io::Result<BoxedStream> {
    let (server, _) = tls.fabric_configs().ok_or_else(no_ca)?;
    tcp.set_nodelay(true)?;
    let accepting = TlsAcceptor::from(server).accept(tcp);
    let stream = tokio::time::timeout(tls.handshake_timeout(), accepting)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
    let name = tls.name();
    let carries = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .is_some_and(|certificate| certificate_names(certificate).carries(&name));
    if !carries {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("the peer's certificate does not carry the TLS name {name}"),
        ));
    }
    let stream: BoxedStream = Box::new(stream);
    Ok(stream)
}
