//! One Aerospike connection (a client's, or the admin port's): read what is available, answer
//! the complete frames, write the replies.
//!
//! Requests that can take long (many ops, a large body, a large batch) run on the
//! long-request pool while this task waits, so that the runtime's worker serves others.
//!
//! Invariants:
//! - The input buffer grows only by bytes that arrived; a declared frame size is checked
//!   against `frame-size-max-bytes` as soon as the 8-byte header is in, and never used to size
//!   an allocation.
//! - Every complete frame gets its reply before the next read, in order. Replies are gathered
//!   up to `OUTPUT_FLUSH_BYTES` and then written, so unsent replies never exceed that plus one
//!   reply (itself bounded by the record size, or a batch or scan chunk).
//! - While the client does not read, the connection's buffers count against
//!   `client-memory-max`; a reply not taken within `frame-read-timeout-ms` (a scan's: the
//!   client's socket timeout) closes the connection, logged and counted.
//! - A connection with no partial frame is closed after `idle-timeout-ms`; a partial frame must
//!   complete within `frame-read-timeout-ms` of its first byte. A slow or silent peer only ever
//!   costs its own task.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use engine::Acks;
use model::ResultCode;
use smallvec::SmallVec;
use tokio::sync::watch;
use tokio::time::{Instant, timeout_at};
use tracing::{debug, warn};
use wire_aerospike::{Frame, ProtoType, decode_frame};

use crate::access::Access;
use crate::client_memory::{Account, Evicted};
use crate::dispatch::{self, Streamed};
use crate::info::{InfoSession, handle_info};
use crate::latency::HistogramId;
use crate::state::ServerState;
use crate::tls::transport::Transport;

/// How much spare room to ensure before each read: large enough for any common request and
/// reply, small enough that idle connections stay cheap.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Replies gathered before they are written: pipelined requests stop being answered until the
/// client takes what is there, so unsent replies stay below this plus one reply.
pub const OUTPUT_FLUSH_BYTES: usize = 128 * 1024;
/// A buffer grown beyond this by a large request or reply is given back once empty, so that a
/// connection keeps only what ordinary requests need.
pub const BUFFER_KEEP_BYTES: usize = 256 * 1024;

/// Work a connection does before it lets the runtime's other tasks run.
pub const SLICE_TIME: Duration = Duration::from_micros(500);

const _: () =
    assert!(READ_CHUNK_BYTES <= BUFFER_KEEP_BYTES && OUTPUT_FLUSH_BYTES <= BUFFER_KEEP_BYTES);

/// What a connection serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Aerospike clients: every frame type.
    Client,
    /// The admin port: info and security frames only, as Aerospike's admin port.
    Admin,
}

/// Why a connection ended.
#[derive(Debug)]
enum Close {
    PeerClosed,
    Malformed(&'static str),
    Timeout(&'static str),
    Io(std::io::Error),
    Shutdown,
    /// All clients together held more than `client-memory-max`, this one the most.
    Evicted,
    /// A frame type the admin port does not serve.
    NotAdmin,
    /// A long request's job failed (a bug, logged).
    JobFailed,
}

impl std::fmt::Display for Close {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Close::PeerClosed => write!(f, "peer closed"),
            Close::Malformed(reason) => write!(f, "malformed frame: {reason}"),
            Close::Timeout(what) => write!(f, "timeout: {what}"),
            Close::Io(error) => write!(f, "i/o error: {error}"),
            Close::Shutdown => write!(f, "server shutting down"),
            Close::Evicted => write!(f, "evicted: clients hold more than client-memory-max"),
            Close::NotAdmin => write!(f, "the admin port serves info frames only"),
            Close::JobFailed => write!(f, "a long request failed"),
        }
    }
}

impl From<Evicted> for Close {
    fn from(_: Evicted) -> Close {
        Close::Evicted
    }
}

struct Connection {
    stream: Transport,
    state: Arc<ServerState>,
    input: BytesMut,
    output: Vec<u8>,
    info: InfoSession,
    /// Its login and the checks of its requests (boxed: an idle connection's size counts).
    access: Box<Access>,
    account: Account,
    role: Role,
    /// When the last read completed: the arrival time of the frames it completed, from which
    /// their deadlines count.
    received: dispatch::Received,
    /// What the writes answered in `output` wait for before it may be sent.
    acks: Acks,
    /// The requests answered in `output`, with when each was received: timed in their
    /// latency histograms once their replies may be sent.
    timed: Vec<(HistogramId, std::time::Instant)>,
    /// The request a stream answers, timed when the stream ends.
    stream_timed: Option<(HistogramId, std::time::Instant)>,
}

/// What answering the buffered frames left to do.
enum Next {
    /// Read more.
    Read,
    /// Complete frames remain, held back until the replies so far are written.
    Answer,
    /// A request answered by a stream, after the replies before it.
    Stream(Streamed),
    /// A request to run on the long-request pool: the frame's body, and when it was received.
    Long(Vec<u8>, dispatch::Received),
    /// A request for a partition another node is master of: the frame's body, and that node.
    Forward(Vec<u8>, model::NodeId),
    /// A request to run once this node's map catches up or no script holds its namespace (see
    /// `dispatch::Handled::Unready` and `AwaitScript`).
    Unready(Vec<u8>, dispatch::Received),
}

/// Serves `stream` until the peer leaves, misbehaves, times out, or the server shuts down.
pub async fn serve(
    stream: Transport,
    state: Arc<ServerState>,
    shutdown: watch::Receiver<bool>,
    account: Account,
    role: Role,
) {
    let peer = stream.peer_addr().ok();
    let mut connection = Connection {
        access: Box::new(
            Access::new(
                state.security.clone(),
                peer.map(|peer| peer.ip()),
                security::Protocol::Aerospike,
            )
            .with_certificate(stream.certificate_name()),
        ),
        stream,
        state,
        input: BytesMut::with_capacity(READ_CHUNK_BYTES),
        output: Vec::with_capacity(READ_CHUNK_BYTES),
        info: InfoSession::default(),
        account,
        role,
        received: dispatch::Received::now(),
        acks: Acks::default(),
        timed: Vec::new(),
        stream_timed: None,
    };
    let reason = connection.run(shutdown).await;
    match reason {
        Close::Evicted => warn!(
            ?peer,
            held_bytes = connection.account.charged_bytes(),
            "client closed: all clients hold more than client-memory-max, it the most"
        ),
        Close::Timeout(what @ ("reply not drained" | "scan reply not drained")) => {
            connection
                .state
                .client_memory
                .output_limit_closed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            warn!(?peer, what, "client closed: it does not read its replies");
        }
        Close::Timeout("idle") => {
            let counters = match connection.role {
                Role::Client => &connection.state.connections,
                Role::Admin => &connection.state.admin_connections,
            };
            counters
                .idle_closed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            debug!(?peer, %reason, "connection closed");
        }
        reason => debug!(?peer, %reason, "connection closed"),
    }
}

impl Connection {
    async fn run(&mut self, mut shutdown: watch::Receiver<bool>) -> Close {
        let service = &self.state.config.service;
        let idle_timeout = Duration::from_millis(service.idle_timeout_ms);
        let frame_timeout = Duration::from_millis(service.frame_read_timeout_ms);
        let mut frame_started: Option<Instant> = None;
        // When the current run of answers without a read began; read only for deep pipelines.
        let mut slice_started: Option<Instant> = None;
        // Whether any frame was answered since the last read: rounds that end to flush,
        // stream or run a long request count too.
        let mut progressed = false;
        loop {
            let (answered, next) = match self.answer_buffered_frames() {
                Ok(answered) => answered,
                Err(close) => return close,
            };
            progressed |= answered;
            if let Err(close) = self.flush_output(frame_timeout).await {
                return close;
            }
            match next {
                Next::Read => {}
                Next::Answer => {
                    // A deep pipeline yields to the runtime's other tasks now and then.
                    let started = *slice_started.get_or_insert_with(Instant::now);
                    if started.elapsed() >= SLICE_TIME {
                        tokio::task::yield_now().await;
                        slice_started = None;
                    }
                    continue;
                }
                Next::Stream(streamed) => {
                    if let Err(close) = self
                        .send_stream(streamed, frame_timeout, &mut shutdown)
                        .await
                    {
                        return close;
                    }
                    // Frames that arrived behind the streamed request are answered next.
                    continue;
                }
                Next::Long(body, received) => {
                    if let Err(close) = self.run_long(body, received, &mut shutdown).await {
                        return close;
                    }
                    continue;
                }
                Next::Forward(body, owner) => {
                    self.run_forwarded(&body, owner).await;
                    continue;
                }
                Next::Unready(body, received) => {
                    let handled = dispatch::handle_when_ready(
                        &self.state,
                        &body,
                        received,
                        &mut self.output,
                        &mut self.acks,
                        true,
                    )
                    .await;
                    match handled {
                        (dispatch::Handled::Forward(owner), _) => {
                            self.run_forwarded(&body, owner).await;
                        }
                        (dispatch::Handled::Answered, timed) => {
                            self.timed.extend(timed.map(|id| (id, received.at)));
                        }
                        _ => {}
                    }
                    continue;
                }
            }
            frame_started = match (self.input.is_empty(), progressed) {
                (true, _) => None,
                (false, true) => Some(Instant::now()),
                (false, false) => frame_started.or(Some(Instant::now())),
            };
            progressed = false;
            if *shutdown.borrow() {
                return Close::Shutdown;
            }
            let deadline = match frame_started {
                Some(started) => Some(started + frame_timeout),
                None if idle_timeout.is_zero() => None,
                None => Some(Instant::now() + idle_timeout),
            };
            self.input.reserve(READ_CHUNK_BYTES);
            if let Err(evicted) = self.account.charge(self.held_bytes()) {
                return evicted.into();
            }
            let read = self.stream.read_buf(&mut self.input);
            let may_be_told = self.account.may_be_told();
            let outcome = tokio::select! {
                biased;
                result = read_until(read, deadline) => result,
                _ = shutdown.changed() => return Close::Shutdown,
                () = self.account.told_to_close(), if may_be_told => return Close::Evicted,
            };
            slice_started = None;
            self.received = dispatch::Received::now();
            match outcome {
                Ok(Ok(0)) => return Close::PeerClosed,
                Ok(Ok(_)) => {}
                Ok(Err(error)) => return Close::Io(error),
                Err(()) if frame_started.is_some() => return Close::Timeout("frame incomplete"),
                Err(()) => return Close::Timeout("idle"),
            }
        }
    }

    /// Answers the complete frames in the input until the replies reach
    /// [`OUTPUT_FLUSH_BYTES`], up to and including the first one answered by a stream or
    /// that must run on the long-request pool; returns whether any frame was consumed, and
    /// what is left to do.
    fn answer_buffered_frames(&mut self) -> Result<(bool, Next), Close> {
        let body_size_bytes_max = self.state.config.service.frame_size_max_bytes;
        let mut consumed = 0;
        let mut next = Next::Read;
        while matches!(next, Next::Read) {
            if self.output.len() >= OUTPUT_FLUSH_BYTES {
                next = Next::Answer;
                break;
            }
            let frame = match decode_frame(&self.input[consumed..], body_size_bytes_max) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(malformed) => return Err(Close::Malformed(malformed.reason)),
            };
            consumed += frame.size_bytes();
            if self.role == Role::Admin
                && !matches!(frame.proto_type, ProtoType::Info | ProtoType::Security)
            {
                return Err(Close::NotAdmin);
            }
            let received = self.received;
            let body = frame.body;
            if frame.proto_type == ProtoType::Message && dispatch::is_long(body) {
                // Checked here: the pool's run is not (the others are, as they are parsed).
                if let Err(code) = self.access.check_message(body) {
                    crate::access::write_refusal(&mut self.output, body, code);
                    continue;
                }
                let clustered = self.state.is_clustered();
                next = match clustered.then(|| dispatch::forward_target_of_body(&self.state, body))
                {
                    Some(Some(owner)) => Next::Forward(body.to_vec(), owner),
                    _ => Next::Long(body.to_vec(), received),
                };
                break;
            }
            let (handled, timed) = answer_frame(
                &self.state,
                &mut self.info,
                &mut self.access,
                frame,
                received,
                &mut self.output,
                &mut self.acks,
            )?;
            let timed = timed.map(|id| (id, received.at));
            next = match handled {
                dispatch::Handled::Answered => {
                    self.timed.extend(timed);
                    Next::Read
                }
                dispatch::Handled::Streamed(streamed) => {
                    self.stream_timed = timed;
                    Next::Stream(streamed)
                }
                dispatch::Handled::Forward(owner) => Next::Forward(body.to_vec(), owner),
                dispatch::Handled::Unready | dispatch::Handled::AwaitScript => {
                    Next::Unready(body.to_vec(), received)
                }
            };
        }
        self.input.advance(consumed);
        Ok((consumed > 0, next))
    }

    /// Times the requests whose replies may now be sent. The requests of one read share
    /// their arrival, and a pipeline's are of few kinds: each kind and arrival is counted
    /// once, with how many requests it had.
    fn record_timed(&mut self) {
        if self.timed.is_empty() {
            return;
        }
        let mut groups: SmallVec<[(HistogramId, std::time::Instant, u64); 4]> = SmallVec::new();
        for (id, received) in self.timed.drain(..) {
            match groups
                .iter_mut()
                .find(|(kind, at, _)| (*kind, *at) == (id, received))
            {
                Some((_, _, count)) => *count += 1,
                None => groups.push((id, received, 1)),
            }
        }
        let now = std::time::Instant::now();
        for (id, received, count) in groups {
            let elapsed = now.saturating_duration_since(received);
            self.state.latencies.record_many(id, elapsed, count);
        }
    }

    /// Times the request a stream answered, once the stream has ended.
    fn record_stream_timed(&mut self) {
        if let Some((id, received)) = self.stream_timed.take() {
            self.state.latencies.record(id, received.elapsed());
        }
    }

    /// Sends a request to `owner`, its partition's master, and queues the reply it answers.
    async fn run_forwarded(&mut self, body: &[u8], owner: model::NodeId) {
        let time_left_ms =
            u32::try_from(self.state.config.service.transaction_max_ms).unwrap_or(u32::MAX);
        let forwarded = crate::cluster::forward::forward(
            &self.state,
            owner,
            wire_fabric::ForwardProtocol::Aerospike,
            time_left_ms,
            body,
        )
        .await;
        match forwarded {
            Ok(reply) => self.output.extend_from_slice(&reply),
            Err(code) => dispatch::reply_error(&mut self.output, code),
        }
    }

    /// Runs one long request on the long-request pool and gathers its reply.
    async fn run_long(
        &mut self,
        body: Vec<u8>,
        received: dispatch::Received,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), Close> {
        let state = Arc::clone(&self.state);
        // Behind a script, the request would block a pool thread at its namespace's gate.
        if dispatch::body_held_by_script(&state, &body)
            && !dispatch::wait_for_script_end(&state, &body, received).await
        {
            dispatch::reply_error(&mut self.output, model::ResultCode::Timeout);
            return Ok(());
        }
        let mut output = std::mem::take(&mut self.output);
        let job = move || {
            let mut acks = Acks::default();
            let (streamed, timed) =
                dispatch::handle_message(&state, &body, received, &mut output, &mut acks);
            (output, streamed, acks, timed)
        };
        let Ok((output, streamed, acks, timed)) = self.state.long_requests.run(job).await else {
            warn!("a long request failed; closing its connection");
            return Err(Close::JobFailed);
        };
        self.output = output;
        self.acks.absorb(acks);
        let timed = timed.map(|id| (id, received.at));
        match streamed {
            Some(_) => self.stream_timed = timed,
            None => self.timed.extend(timed),
        }
        match streamed {
            // A long batch or scan streams like any other.
            Some(streamed) => {
                let frame_timeout = self.frame_timeout();
                self.flush_output(frame_timeout).await?;
                self.send_stream(streamed, frame_timeout, shutdown).await
            }
            None => Ok(()),
        }
    }

    fn frame_timeout(&self) -> Duration {
        Duration::from_millis(self.state.config.service.frame_read_timeout_ms)
    }

    /// Bytes this connection's buffers hold.
    fn held_bytes(&self) -> usize {
        self.input.capacity() + self.output.capacity()
    }

    /// Writes the replies gathered so far, once the writes they acknowledge are durable.
    async fn flush_output(&mut self, drain_timeout: Duration) -> Result<(), Close> {
        if self.output.is_empty() {
            return Ok(());
        }
        if let Err(error) = self.acks.settled().await {
            // The replies would acknowledge writes that may not survive: close instead.
            return Err(Close::Io(std::io::Error::other(error)));
        }
        self.record_timed();
        let held_bytes = self.held_bytes();
        send(
            &mut self.stream,
            &self.output,
            &mut self.account,
            held_bytes,
            drain_timeout,
            "reply not drained",
        )
        .await?;
        self.output.clear();
        if self.output.capacity() > BUFFER_KEEP_BYTES {
            self.output = Vec::with_capacity(READ_CHUNK_BYTES);
        }
        if self.input.is_empty() && self.input.capacity() > BUFFER_KEEP_BYTES {
            self.input = BytesMut::with_capacity(READ_CHUNK_BYTES);
        }
        self.account.charge(self.held_bytes())?;
        Ok(())
    }

    /// Sends a streamed reply to its end. No request is read meanwhile: clients wait for a
    /// batch or scan to finish before reusing the connection.
    async fn send_stream(
        &mut self,
        streamed: Streamed,
        write_timeout: Duration,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), Close> {
        let sent = self.send_streamed(streamed, write_timeout, shutdown).await;
        if sent.is_ok() {
            self.record_stream_timed();
        }
        sent
    }

    /// [`Connection::send_stream`], untimed.
    async fn send_streamed(
        &mut self,
        streamed: Streamed,
        write_timeout: Duration,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), Close> {
        match streamed {
            Streamed::Batch(job) => self.send_batch(job, write_timeout).await,
            Streamed::Scan(mut scan) => {
                // A scan stalls on its client's socket timeout, not the server's frame timeout.
                let write_timeout = scan.write_timeout;
                for chunk in scan.take_ready() {
                    self.output.extend_from_slice(&chunk);
                }
                if !scan.has_threads() {
                    scan.finish(&mut self.output);
                    return self.flush_output(write_timeout).await;
                }
                self.flush_output(write_timeout).await?;
                loop {
                    let chunk = tokio::select! {
                        chunk = scan.next_chunk() => chunk,
                        _ = shutdown.changed() => {
                            scan.abandon(false);
                            return Err(Close::Shutdown);
                        }
                    };
                    let Some(chunk) = chunk else { break };
                    let held_bytes = self.held_bytes() + chunk.len();
                    let written = send(
                        &mut self.stream,
                        &chunk,
                        &mut self.account,
                        held_bytes,
                        write_timeout,
                        "scan reply not drained",
                    )
                    .await;
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

    /// Answers a batch chunk by chunk: a small batch on this task, a large one on the
    /// long-request pool, one chunk per job, so that other long work interleaves with it.
    async fn send_batch(
        &mut self,
        mut job: crate::batch::BatchJob,
        write_timeout: Duration,
    ) -> Result<(), Close> {
        if !job.is_long() {
            loop {
                let complete = job.next_chunk(&mut self.output, &mut self.acks);
                self.flush_output(write_timeout).await?;
                if complete {
                    return Ok(());
                }
            }
        }
        let mut job = Some(job);
        loop {
            let (mut running, mut output) = (job.take(), std::mem::take(&mut self.output));
            let run = move || {
                let mut acks = Acks::default();
                let complete = running
                    .as_mut()
                    .is_none_or(|job| job.next_chunk(&mut output, &mut acks));
                (running, output, complete, acks)
            };
            let Ok((running, output, complete, acks)) = self.state.long_requests.run(run).await
            else {
                warn!("a batch chunk failed; closing its connection");
                return Err(Close::JobFailed);
            };
            (job, self.output) = (running, output);
            self.acks.absorb(acks);
            self.flush_output(write_timeout).await?;
            if complete {
                return Ok(());
            }
        }
    }
}

/// Writes `bytes` whole. While the client does not take them, they count (with the rest of
/// the connection's buffers, `held_bytes` in all) against `client-memory-max`, and the wait
/// ends at `drain_timeout` (closing with `what`) or when the connection is told to close.
async fn send(
    stream: &mut Transport,
    bytes: &[u8],
    account: &mut Account,
    held_bytes: usize,
    drain_timeout: Duration,
    what: &'static str,
) -> Result<(), Close> {
    let mut written = 0;
    let mut deadline: Option<Instant> = None;
    loop {
        // The bytes, then what TLS still holds of them.
        let step = match written < bytes.len() {
            true => stream.try_write(&bytes[written..]),
            false => match stream.try_flush() {
                Ok(()) => return Ok(()),
                Err(error) => Err(error),
            },
        };
        match step {
            Ok(0) => return Err(Close::PeerClosed),
            Ok(count) => written += count,
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                account.charge(held_bytes)?;
                let deadline = *deadline.get_or_insert_with(|| Instant::now() + drain_timeout);
                let may_be_told = account.may_be_told();
                tokio::select! {
                    biased;
                    ready = timeout_at(deadline, stream.writable()) => match ready {
                        Ok(Ok(())) => {}
                        Ok(Err(error)) => return Err(Close::Io(error)),
                        Err(_) => return Err(Close::Timeout(what)),
                    },
                    () = account.told_to_close(), if may_be_told => return Err(Close::Evicted),
                }
            }
            Err(error) => return Err(Close::Io(error)),
        }
    }
}

fn answer_frame(
    state: &Arc<ServerState>,
    info: &mut InfoSession,
    access: &mut Access,
    frame: Frame<'_>,
    received: dispatch::Received,
    out: &mut Vec<u8>,
    acks: &mut Acks,
) -> Result<(dispatch::Handled, dispatch::Timed), Close> {
    match frame.proto_type {
        ProtoType::Info if !access.is_authenticated() => {
            let start = wire_aerospike::begin_info_response(out);
            out.extend_from_slice(crate::access::NOT_AUTHENTICATED_INFO);
            wire_aerospike::finish_info_response(out, start);
        }
        ProtoType::Info => handle_info(state, info, access, frame.body, out),
        ProtoType::Message => {
            return Ok(dispatch::handle_client_message(
                state, frame.body, received, out, acks, access,
            ));
        }
        ProtoType::Security => access.answer_security(frame.body, out),
        // Aerospike Community Edition answers compressed requests this way.
        ProtoType::Compressed => dispatch::reply_error(out, ResultCode::EnterpriseOnly),
        ProtoType::InternalXdr => return Err(Close::Malformed("XDR frames are not for clients")),
    }
    Ok((dispatch::Handled::Answered, None))
}

async fn read_until<F: Future>(read: F, deadline: Option<Instant>) -> Result<F::Output, ()> {
    match deadline {
        Some(deadline) => timeout_at(deadline, read).await.map_err(|_| ()),
        None => Ok(read.await),
    }
}
