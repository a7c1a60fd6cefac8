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

use crate::dispatch;
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
            let progressed = match self.answer_buffered_frames() {
                Ok(progressed) => progressed,
                Err(close) => return close,
            };
            if !self.output.is_empty() {
                let write = self.stream.write_all(&self.output);
                match timeout_at(Instant::now() + frame_timeout, write).await {
                    Ok(Ok(())) => self.output.clear(),
                    Ok(Err(error)) => return Close::Io(error),
                    Err(_) => return Close::Timeout("reply not drained"),
                }
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

    /// Answers every complete frame in the input; returns whether any was consumed.
    fn answer_buffered_frames(&mut self) -> Result<bool, Close> {
        let body_size_bytes_max = self.state.config.service.frame_size_max_bytes;
        let mut consumed = 0;
        loop {
            let frame = match decode_frame(&self.input[consumed..], body_size_bytes_max) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(malformed) => return Err(Close::Malformed(malformed.reason)),
            };
            consumed += frame.size_bytes();
            answer_frame(&self.state, &mut self.info, frame, &mut self.output)?;
        }
        self.input.advance(consumed);
        Ok(consumed > 0)
    }
}

fn answer_frame(
    state: &ServerState,
    info: &mut InfoSession,
    frame: Frame<'_>,
    out: &mut Vec<u8>,
) -> Result<(), Close> {
    match frame.proto_type {
        ProtoType::Info => handle_info(state, info, frame.body, out),
        ProtoType::Message => dispatch::handle_message(state, frame.body, out),
        ProtoType::Security => {
            wire_aerospike::write_security_response(out, ResultCode::SecurityNotSupported.code());
        }
        // Aerospike Community Edition answers compressed requests this way.
        ProtoType::Compressed => dispatch::reply_error(out, ResultCode::EnterpriseOnly),
        ProtoType::InternalXdr => return Err(Close::Malformed("XDR frames are not for clients")),
    }
    Ok(())
}

async fn read_until<F: Future>(read: F, deadline: Option<Instant>) -> Result<F::Output, ()> {
    match deadline {
        Some(deadline) => timeout_at(deadline, read).await.map_err(|_| ()),
        None => Ok(read.await),
    }
}
