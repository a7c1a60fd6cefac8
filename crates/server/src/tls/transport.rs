//! A client connection's byte stream, in clear or in TLS, with the calls the connections make:
//! read into a buffer, write what the socket takes now, wait for input or for room.
//!
//! TLS is driven by hand, rustls's `ServerConnection` over the socket's non-blocking reads and
//! writes, rather than through an `AsyncRead`/`AsyncWrite` wrapper: the clear path stays what
//! it was (tokio's `read_buf`, which learns from a short read that the socket is drained, and
//! `try_write`), and both paths have one shape.
//!
//! Invariants:
//! - Bounded: rustls holds at most one TLS record of input beyond what the connection took,
//!   and at most [`TLS_BUFFER_BYTES`] of output not yet on the socket; past that,
//!   [`Transport::try_write`] takes nothing.
//! - Cancel safe: what was read or written so far lives in `self`, never in a future, so any
//!   wait may be dropped (a timeout, a shutdown) and begun again.
//! - Bytes `try_write` took reach the socket as it takes them: every wait of a TLS stream
//!   also writes the records still held ([`Transport::has_unflushed`] tells whether any are).

use std::io::{self, BufRead, Read, Write};
use std::net::SocketAddr;

use bytes::BytesMut;
use rustls::ServerConnection;
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::TcpStream;

use super::{ClientAuth, Tls, certificate_names};

/// Most TLS output a connection holds that the socket has not taken (rustls's default).
pub const TLS_BUFFER_BYTES: usize = 64 * 1024;

/// A client connection's stream.
#[derive(Debug)]
pub enum Transport {
    /// Clear text.
    Clear(TcpStream),
    /// TLS, its handshake done.
    Tls(Box<TlsStream>),
}

/// A TLS session over its socket.
#[derive(Debug)]
pub struct TlsStream {
    tcp: TcpStream,
    session: ServerConnection,
    /// The common name of the client's certificate, verified by the handshake.
    certificate_name: Option<String>,
}

/// What a wait ended with.
#[derive(Debug)]
pub enum Event {
    /// Bytes were read into the buffer (0: the peer closed).
    Read(io::Result<usize>),
    /// The stream may take more output.
    Writable(io::Result<()>),
}

/// Why a TLS handshake did not complete.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// Not within `handshake-timeout-ms`.
    #[error("handshake not finished in time")]
    Timeout,
    /// The socket failed, the peer left, or sent what is not TLS.
    #[error("handshake failed: {0}")]
    Io(#[from] io::Error),
    /// rustls refused to start a session.
    #[error("handshake not started: {0}")]
    Tls(#[from] rustls::Error),
    /// The certificate is valid but names none of those `authenticate-client` lists.
    #[error("client certificate names none of tls.authenticate-client's names")]
    NameNotAllowed,
}

/// The socket as `std::io`'s writer, without waiting.
struct Socket<'a>(&'a TcpStream);

/// The socket as `std::io`'s reader, without waiting, noting a read that left the socket
/// drained (it filled less than the room it was given).
struct Reading<'a> {
    tcp: &'a TcpStream,
    drained: bool,
}

impl Read for Reading<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.tcp.try_read(buf)?;
        self.drained = read < buf.len();
        Ok(read)
    }
}

impl Write for Socket<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn would_block(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::WouldBlock
}

impl Transport {
    /// Completes a TLS handshake on `tcp` within `tls`'s timeout, checking the client's
    /// certificate against `authenticate-client`.
    ///
    /// # Errors
    /// Why the handshake failed; the caller closes the socket.
    pub async fn accept_tls(tcp: TcpStream, tls: &Tls) -> Result<Transport, HandshakeError> {
        let mut session = ServerConnection::new(tls.client_config())?;
        session.set_buffer_limit(Some(TLS_BUFFER_BYTES));
        let mut stream = TlsStream {
            tcp,
            session,
            certificate_name: None,
        };
        tokio::time::timeout(tls.handshake_timeout(), stream.handshake())
            .await
            .map_err(|_| HandshakeError::Timeout)??;
        let names = stream
            .session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(certificate_names);
        if let ClientAuth::Named(allowed) = tls.client_auth() {
            let carried = names
                .as_ref()
                .is_some_and(|names| allowed.iter().any(|name| names.carries(name)));
            if !carried {
                return Err(HandshakeError::NameNotAllowed);
            }
        }
        stream.certificate_name = names.and_then(|names| names.common_name);
        Ok(Transport::Tls(Box::new(stream)))
    }

    /// The socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Clear(tcp) => tcp,
            Transport::Tls(tls) => &tls.tcp,
        }
    }

    /// The client's address.
    ///
    /// # Errors
    /// The socket's.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp().peer_addr()
    }

    /// The common name of the client certificate the handshake verified, if any.
    pub fn certificate_name(&self) -> Option<&str> {
        match self {
            Transport::Clear(_) => None,
            Transport::Tls(tls) => tls.certificate_name.as_deref(),
        }
    }

    /// Waits for input and appends it to `buf`; 0 when the peer closed.
    ///
    /// # Errors
    /// The socket's, or TLS the peer broke.
    pub async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        match self {
            Transport::Clear(tcp) => tcp.read_buf(buf).await,
            Transport::Tls(tls) => loop {
                // Not asked for room, a TLS wait ends only with a read.
                if let Event::Read(read) = tls.wait(buf, true, false).await {
                    return read;
                }
            },
        }
    }

    /// Waits for input (read into `buf`) when `reading`, or for room to write when `writing`;
    /// never ends when neither is asked.
    pub async fn read_or_writable(
        &mut self,
        buf: &mut BytesMut,
        reading: bool,
        writing: bool,
    ) -> Event {
        match self {
            Transport::Clear(tcp) => {
                let (mut reader, writer) = tcp.split();
                tokio::select! {
                    biased;
                    read = reader.read_buf(buf), if reading => Event::Read(read),
                    ready = writer.as_ref().writable(), if writing => Event::Writable(ready),
                    else => std::future::pending().await,
                }
            }
            Transport::Tls(tls) => tls.wait(buf, reading, writing).await,
        }
    }

    /// Writes what the stream takes of `bytes` now.
    ///
    /// # Errors
    /// `WouldBlock` when it takes nothing; the socket's.
    pub fn try_write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Clear(tcp) => tcp.try_write(bytes),
            Transport::Tls(tls) => tls.try_write(bytes),
        }
    }

    /// Writes the TLS records still held.
    ///
    /// # Errors
    /// `WouldBlock` while some remain; the socket's.
    pub fn try_flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Clear(_) => Ok(()),
            Transport::Tls(tls) => {
                tls.push()?;
                match tls.session.wants_write() {
                    true => Err(io::ErrorKind::WouldBlock.into()),
                    false => Ok(()),
                }
            }
        }
    }

    /// Whether TLS records wait for the socket.
    pub fn has_unflushed(&self) -> bool {
        match self {
            Transport::Clear(_) => false,
            Transport::Tls(tls) => tls.session.wants_write(),
        }
    }

    /// Waits until the socket may take more.
    ///
    /// # Errors
    /// The socket's.
    pub async fn writable(&self) -> io::Result<()> {
        self.tcp().writable().await
    }

    /// Writes the TLS records still held, waiting for the socket (the caller bounds the wait).
    ///
    /// # Errors
    /// The socket's.
    pub async fn flush(&mut self) -> io::Result<()> {
        loop {
            match self.try_flush() {
                Err(error) if would_block(&error) => self.writable().await?,
                done => return done,
            }
        }
    }
}

impl TlsStream {
    async fn handshake(&mut self) -> io::Result<()> {
        while self.session.is_handshaking() {
            self.push()?;
            let interest = match self.session.wants_write() {
                true => Interest::READABLE | Interest::WRITABLE,
                false => Interest::READABLE,
            };
            if !self.tcp.ready(interest).await?.is_readable() {
                continue;
            }
            match self.pull() {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => self.process()?,
                Err(error) if would_block(&error) => {}
                Err(error) => return Err(error),
            }
        }
        self.push()
    }

    /// Reads what the socket holds into rustls (one read); 0 at the end of the stream.
    ///
    /// A read that leaves the socket drained clears its readiness, as tokio's own reads do
    /// on epoll, so that the next wait sleeps at once instead of beginning with a read that
    /// finds nothing: the readiness observed before the read is what is cleared, so a byte
    /// that arrives after it wakes the wait as it should.
    fn pull(&mut self) -> io::Result<usize> {
        let (tcp, session) = (&self.tcp, &mut self.session);
        let mut read = 0;
        let outcome = tcp.try_io(Interest::READABLE, || {
            let mut reading = Reading {
                tcp,
                drained: false,
            };
            read = session.read_tls(&mut reading)?;
            match read > 0 && reading.drained {
                true => Err(io::ErrorKind::WouldBlock.into()),
                false => Ok(read),
            }
        });
        match outcome {
            Err(error) if would_block(&error) && read > 0 => Ok(read),
            outcome => outcome,
        }
    }

    /// Decrypts what was read; on a protocol error, tells the peer (best effort) and fails.
    fn process(&mut self) -> io::Result<()> {
        if let Err(error) = self.session.process_new_packets() {
            let _ = self.push();
            return Err(io::Error::new(io::ErrorKind::InvalidData, error));
        }
        Ok(())
    }

    async fn wait(&mut self, buf: &mut BytesMut, reading: bool, writing: bool) -> Event {
        let fail = |error| match reading {
            true => Event::Read(Err(error)),
            false => Event::Writable(Err(error)),
        };
        loop {
            if reading && let Some(read) = self.take_plaintext(buf) {
                return Event::Read(read);
            }
            if let Err(error) = self.push() {
                return fail(error);
            }
            let holding = self.session.wants_write();
            if writing && !holding {
                return Event::Writable(Ok(()));
            }
            let interest = match (reading, holding) {
                (true, true) => Interest::READABLE | Interest::WRITABLE,
                (true, false) => Interest::READABLE,
                (false, true) => Interest::WRITABLE,
                (false, false) => std::future::pending().await,
            };
            let ready = match self.tcp.ready(interest).await {
                Ok(ready) => ready,
                Err(error) => return fail(error),
            };
            if reading && ready.is_readable() {
                match self.pull() {
                    // The end of the stream: the reader reports it once the plaintext is taken.
                    Ok(_) => {
                        if let Err(error) = self.process() {
                            return Event::Read(Err(error));
                        }
                    }
                    Err(error) if would_block(&error) => {}
                    Err(error) => return Event::Read(Err(error)),
                }
            }
        }
    }

    /// Moves decrypted input into `buf`, record after record while its spare capacity lasts
    /// (at least a byte); `None` when there is none yet.
    fn take_plaintext(&mut self, buf: &mut BytesMut) -> Option<io::Result<usize>> {
        let mut reader = self.session.reader();
        let mut taken_total = 0;
        loop {
            let spare = buf.capacity() - buf.len();
            if taken_total > 0 && spare == 0 {
                return Some(Ok(taken_total));
            }
            match reader.fill_buf() {
                Ok([]) if taken_total > 0 => return Some(Ok(taken_total)),
                Ok(chunk) => {
                    let taken = chunk.len().min(spare.max(1));
                    buf.extend_from_slice(&chunk[..taken]);
                    reader.consume(taken);
                    if taken == 0 {
                        // close_notify: the end, once what came before it is taken.
                        return Some(Ok(0));
                    }
                    taken_total += taken;
                }
                // Nothing more yet, or the end or a failure, which the next call reports
                // after these bytes.
                Err(_) if taken_total > 0 => return Some(Ok(taken_total)),
                Err(error) if would_block(&error) => return None,
                // Closed without close_notify: as a clear socket's end.
                Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Some(Ok(0)),
                Err(error) => return Some(Err(error)),
            }
        }
    }

    fn try_write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.push()?;
        let taken = self.session.writer().write(bytes)?;
        self.push()?;
        match taken {
            0 if !bytes.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            taken => Ok(taken),
        }
    }

    /// Writes held records to the socket, as many as it takes now.
    fn push(&mut self) -> io::Result<()> {
        while self.session.wants_write() {
            match self.session.write_tls(&mut Socket(&self.tcp)) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(error) if would_block(&error) => return Ok(()),
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}
