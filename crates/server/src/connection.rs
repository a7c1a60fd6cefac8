//! One client connection: read what is available, answer every complete frame, write once.
//!
//! Invariants:
//! - The input buffer grows only by bytes that arrived; a declared frame size is checked
//!   against `frame-size-max-bytes` as soon as the 8-byte header is in, and never used to size
//!   an allocation.
//! - Every complete frame gets its reply before the next read, and all replies produced by one
//!   read go out in one write.
//! - A connection with no partial frame is closed after `idle-timeout-ms`; a partial frame must
//!   complete within `frame-read-timeout-ms` of its first byte. A slow or silent peer only ever
//!   costs its own task.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use model::ResultCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{Instant, timeout_at};
use tracing::debug;
use wire_aerospike::{Frame, ProtoType, decode_frame};

use crate::dispatch::{self, Streamed};
use crate::info::{InfoSession, handle_info};
use crate::state::ServerState;

/// How much spare room to ensure before each read: large enough for any common request and
/// reply, small enough that idle connections stay cheap.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Why a connection ended.
#[derive(Debug)]
enum Close {
    PeerClosed,
    Malformed(&'static str),
    Timeout(&'static str),
    Io(std::io::Error),
    Shutdown,
}

impl std::fmt::Display for Close {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Close::PeerClosed => write!(f, "peer closed"),
            Close::Malformed(reason) => write!(f, "malformed frame: {reason}"),
            Close::Timeout(what) => write!(f, "timeout: {what}"),
            Close::Io(error) => write!(f, "i/o error: {error}"),
            Close::Shutdown => write!(f, "server shutting down"),
        }
    }
}

struct Connection {
    stream: TcpStream,
    state: Arc<ServerState>,
    input: BytesMut,
    output: Vec<u8>,
    info: InfoSession,
}

/// Serves `stream` until the peer leaves, misbehaves, times out, or the server shuts down.
pub async fn serve(stream: TcpStream, state: Arc<ServerState>, shutdown: watch::Receiver<bool>) {
    let peer = stream.peer_addr().ok();
    let mut connection = Connection {
        stream,
        state,
        input: BytesMut::with_capacity(READ_CHUNK_BYTES),
        output: Vec::with_capacity(READ_CHUNK_BYTES),
        info: InfoSession::default(),
    };
    let reason = connection.run(shutdown).await;
    debug!(?peer, %reason, "connection closed");
}

impl Connection {
    async fn run(&mut self, mut shutdown: watch::Receiver<bool>) -> Close {
        let service = &self.state.config.service;
        let idle_timeout = Duration::from_millis(service.idle_timeout_ms);
        let frame_timeout = Duration::from_millis(service.frame_read_timeout_ms);
        let mut frame_started: Option<Instant> = None;
        loop {
            let (progressed, streamed) = match self.answer_buffered_frames() {
                Ok(answered) => answered,
                Err(close) => return close,
            };
            if let Err(close) = self.flush_output(frame_timeout).await {
                return close;
            }
            if let Some(streamed) = streamed {
                if let Err(close) = self
                    .send_stream(streamed, frame_timeout, &mut shutdown)
                    .await
                {
                    return close;
                }
                // Frames that arrived behind the streamed request are answered next.
                continue;
            }
            frame_started = match (self.input.is_empty(), progressed) {
                (true, _) => None,
                (false, true) => Some(Instant::now()),
                (false, false) => frame_started.or(Some(Instant::now())),
            };
            if *shutdown.borrow() {
                return Close::Shutdown;
            }
            let deadline = match frame_started {
                Some(started) => Some(started + frame_timeout),
                None if idle_timeout.is_zero() => None,
                None => Some(Instant::now() + idle_timeout),
            };
            self.input.reserve(READ_CHUNK_BYTES);
            let read = self.stream.read_buf(&mut self.input);
            let outcome = tokio::select! {
                result = read_until(read, deadline) => result,
                _ = shutdown.changed() => return Close::Shutdown,
            };
            match outcome {
                Ok(Ok(0)) => return Close::PeerClosed,
                Ok(Ok(_)) => {}
                Ok(Err(error)) => return Close::Io(error),
                Err(()) if frame_started.is_some() => return Close::Timeout("frame incomplete"),
                Err(()) => return Close::Timeout("idle"),
            }
        }
    }

    /// Answers the complete frames in the input, up to and including the first one answered by
    /// a stream; returns whether any frame was consumed, and that stream.
    fn answer_buffered_frames(&mut self) -> Result<(bool, Option<Streamed>), Close> {
        let body_size_bytes_max = self.state.config.service.frame_size_max_bytes;
        let mut consumed = 0;
        let mut streamed = None;
        while streamed.is_none() {
            let frame = match decode_frame(&self.input[consumed..], body_size_bytes_max) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(malformed) => return Err(Close::Malformed(malformed.reason)),
            };
            consumed += frame.size_bytes();
            streamed = answer_frame(&self.state, &mut self.info, frame, &mut self.output)?;
        }
        self.input.advance(consumed);
        Ok((consumed > 0, streamed))
    }

    async fn flush_output(&mut self, write_timeout: Duration) -> Result<(), Close> {
        if self.output.is_empty() {
            return Ok(());
        }
        if let Err(error) = writes_durable().await {
            // The replies would acknowledge writes the device may not keep: close instead.
            return Err(Close::Io(std::io::Error::other(error)));
        }
        let write = self.stream.write_all(&self.output);
        match timeout_at(Instant::now() + write_timeout, write).await {
            Ok(Ok(())) => {
                self.output.clear();
                Ok(())
            }
            Ok(Err(error)) => Err(Close::Io(error)),
            Err(_) => Err(Close::Timeout("reply not drained")),
        }
    }

    /// Sends a streamed reply to its end. No request is read meanwhile: clients wait for a
    /// batch or scan to finish before reusing the connection.
    async fn send_stream(
        &mut self,
        streamed: Streamed,
        write_timeout: Duration,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), Close> {
        match streamed {
            Streamed::Batch(mut job) => loop {
                let complete = job.next_chunk(&mut self.output);
                self.flush_output(write_timeout).await?;
                if complete {
                    return Ok(());
                }
            },
            Streamed::Scan(mut scan) => {
                // A scan stalls on its client's socket timeout, not the server's frame timeout.
                let write_timeout = scan.write_timeout;
                if let Some(chunks) = scan.take_inline() {
                    for chunk in chunks {
                        self.output.extend_from_slice(&chunk);
                    }
                    scan.finish(&mut self.output);
                    return self.flush_output(write_timeout).await;
                }
                loop {
                    let chunk = tokio::select! {
                        chunk = scan.next_chunk() => chunk,
                        _ = shutdown.changed() => {
                            scan.abandon(false);
                            return Err(Close::Shutdown);
                        }
                    };
                    let Some(chunk) = chunk else { break };
                    let write = self.stream.write_all(&chunk);
                    let written = match timeout_at(Instant::now() + write_timeout, write).await {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(error)) => Err(Close::Io(error)),
                        Err(_) => Err(Close::Timeout("scan reply not drained")),
                    };
                    if let Err(close) = written {
                        scan.abandon(matches!(close, Close::Timeout(_)));
                        return Err(close);
                    }
                }
                scan.finish(&mut self.output);
                self.flush_output(write_timeout).await
            }
        }
    }
}

/// Waits until every write this thread made since the last call is durable, for namespaces
/// with `commit-to-device` (group commit: one sync serves every connection waiting for it).
/// Call it after answering requests synchronously and before sending the replies.
///
/// # Errors
/// The device failed: the writes may be lost, so they must not be acknowledged.
pub(crate) async fn writes_durable() -> Result<(), storage::StorageError> {
    for pending in storage::take_pending() {
        pending.await?;
    }
    Ok(())
}

fn answer_frame(
    state: &Arc<ServerState>,
    info: &mut InfoSession,
    frame: Frame<'_>,
    out: &mut Vec<u8>,
) -> Result<Option<Streamed>, Close> {
    match frame.proto_type {
        ProtoType::Info => handle_info(state, info, frame.body, out),
        ProtoType::Message => return Ok(dispatch::handle_message(state, frame.body, out)),
        ProtoType::Security => {
            wire_aerospike::write_security_response(out, ResultCode::SecurityNotSupported.code());
        }
        // Aerospike Community Edition answers compressed requests this way.
        ProtoType::Compressed => dispatch::reply_error(out, ResultCode::EnterpriseOnly),
        ProtoType::InternalXdr => return Err(Close::Malformed("XDR frames are not for clients")),
    }
    Ok(None)
}

async fn read_until<F: Future>(read: F, deadline: Option<Instant>) -> Result<F::Output, ()> {
    match deadline {
        Some(deadline) => timeout_at(deadline, read).await.map_err(|_| ()),
        None => Ok(read.await),
    }
}
