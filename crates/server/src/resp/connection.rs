//! One Redis connection: read what arrives, answer complete requests in order, write what the
//! client takes, and keep both buffers within their limits.
//!
//! As in Redis, a connection goes on reading and answering while its client is slow to read
//! its replies (a client may write a whole pipeline before it reads anything), and its unsent
//! replies are bounded instead: by the `normal` class of `client-output-buffer-limit` (hard:
//! closed at once; soft: closed once over it for its seconds), and by `client-memory-max`
//! across all clients, where the connection holding the most is closed first.
//!
//! Invariants:
//! - Every request gets exactly one reply, in request order.
//! - Requests are answered a step at a time: a step ends once `OUTPUT_FLUSH_BYTES` of replies
//!   wait, then what the socket takes is written; the task yields to others after
//!   `SLICE_TIME` of steps, so one connection's pipeline never holds a runtime worker long.
//! - A command whose reply passes the connection's limit stops producing it and the
//!   connection closes (`Reply` drops everything past the limit).
//! - A command that asks to run on the long-request pool (`After::Offload`) runs there with
//!   the session, arguments and output, which come back before the next request is read.
//! - Messages published to a subscriber wait in its bounded mailbox (`pubsub/hub.rs`) until
//!   the connection moves them to its output, before it answers what it reads next; while
//!   it subscribes, the `pubsub` class of `client-output-buffer-limit` bounds its output.
//! - The input buffer holds only bytes that arrived and never more than
//!   `QUERY_BUFFER_MAX_BYTES` of an incomplete request.
//! - While CLIENT PAUSE holds a command back, the connection waits before it runs it (the
//!   requests after it wait too), for the pause to end, CLIENT KILL, or shutdown.
//! - A connection told to close (CLIENT KILL, or for client memory) closes at its next safe
//!   point, or at once while it waits.
//! - A blocked command (`After::Block`) holds back the requests after it: the connection
//!   waits for a wake-up, its deadline, CLIENT UNBLOCK, or the client leaving (its input is
//!   still read, within the same limit), and answers it before the next request.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tracing::{debug, warn};

use wire_fabric::ForwardProtocol;

use crate::tls::transport::{Event, Transport};

use super::blocking::{self, Unblock};
use super::reply::Reply;
use super::routing::{self, Routing};
use super::{After, Session, commands};
use crate::client_memory::{Account, ClientMemory, Evicted};
use crate::connection::{BUFFER_KEEP_BYTES, OUTPUT_FLUSH_BYTES};
use crate::limits::{OutputBufferLimit, OutputBufferLimits};
use crate::state::ServerState;

/// Redis's `client-query-buffer-limit`: a client whose unparsed input grows past this is closed.
const QUERY_BUFFER_MAX_BYTES: usize = wire_resp::QUERY_BUFFER_LIMIT_BYTES;
/// Spare room ensured before each read.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Work a connection does before it lets the runtime's other tasks run.
const SLICE_TIME: Duration = Duration::from_micros(500);
/// How long a closing connection waits for the socket to take what TLS still holds.
const TLS_CLOSE_FLUSH: Duration = Duration::from_secs(1);

/// Why a connection ended.
#[derive(Debug)]
enum Close {
    /// QUIT, a protocol error, or the peer left.
    Done,
    /// The query buffer passed its limit.
    QueryBufferLimit,
    /// Its unsent replies passed the hard limit, or stayed over the soft one too long.
    OutputLimit,
    /// All clients together held more than `client-memory-max`, this one the most.
    Evicted,
    /// Nothing from the client for `timeout` seconds.
    Idle,
    /// Writes could not be made durable.
    NotDurable,
    /// A command on the long-request pool failed (a bug, logged).
    JobFailed,
    /// The server is shutting down.
    Shutdown,
}

impl From<Evicted> for Close {
    fn from(_: Evicted) -> Close {
        Close::Evicted
    }
}

/// Replies waiting for the client: whole chunks queued in order, then the one being filled.
#[derive(Debug, Default)]
struct Output {
    queued: VecDeque<Vec<u8>>,
    /// Bytes of the first queued chunk already written.
    front_written: usize,
    /// Unsent bytes in `queued`.
    queued_bytes: usize,
    /// Where replies are appended.
    filling: Vec<u8>,
}

impl Output {
    fn unsent_bytes(&self) -> usize {
        self.queued_bytes + self.filling.len()
    }

    /// Memory the replies hold.
    fn held_bytes(&self) -> usize {
        self.queued.iter().map(Vec::capacity).sum::<usize>() + self.filling.capacity()
    }

    /// Queues the chunk being filled, so that new replies start a fresh one.
    fn seal(&mut self) {
        if self.filling.is_empty() {
            return;
        }
        let chunk = std::mem::replace(&mut self.filling, Vec::with_capacity(READ_CHUNK_BYTES));
        self.queued_bytes += chunk.len();
        self.queued.push_back(chunk);
    }

    /// Writes what the socket takes without waiting; returns the bytes written.
    fn write_available(&mut self, stream: &mut Transport) -> std::io::Result<usize> {
        let mut written_total = 0;
        loop {
            let pending = match self.queued.front() {
                Some(front) => &front[self.front_written..],
                None if self.filling.is_empty() => return Ok(written_total),
                None => &self.filling[..],
            };
            let written = match stream.try_write(pending) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(written) => written,
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    return Ok(written_total);
                }
                Err(error) => return Err(error),
            };
            written_total += written;
            if self.queued.is_empty() {
                self.filling_written(written);
            } else {
                self.front_written += written;
                self.queued_bytes -= written;
                if self.front_written == self.queued[0].len() {
                    self.queued.pop_front();
                    self.front_written = 0;
                }
            }
        }
    }

    fn filling_written(&mut self, written: usize) {
        if written == self.filling.len() {
            self.filling.clear();
            if self.filling.capacity() > BUFFER_KEEP_BYTES {
                self.filling = Vec::with_capacity(READ_CHUNK_BYTES);
            }
        } else {
            // Rare (the socket took part of the chunk): keep the rest in order, once.
            self.filling.drain(..written);
            self.seal();
        }
    }
}

/// What one step of answering left to do.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// No complete request is left in the input.
    Drained,
    /// Complete requests remain; replies reached `OUTPUT_FLUSH_BYTES` first.
    Flush,
    /// The last command asked to run on the long-request pool; it has not run.
    Offload,
    /// The last command waits for a script to end (or to pass `busy-reply-threshold`); it has
    /// not run.
    AwaitScript,
    /// The last command's keys are mastered by this other node; it has not run here.
    Forward(model::NodeId),
    /// The last command reads the whole data set, which every node holds a part of; it has
    /// not run here.
    Gather,
    /// The last command is an EXEC whose queued commands' keys this other node masters; the
    /// transaction has not run here.
    ForwardTransaction(model::NodeId),
    /// The last command blocks until its keys get a value (BLPOP...); it has answered nothing.
    Block,
    /// Send what is there, then close (QUIT, a protocol error).
    Close,
    /// CLIENT PAUSE holds the last command back; it has not run.
    Paused,
    /// The last command's reply passed the connection's limit.
    OverLimit,
    /// On a cluster, the last command's keys are mastered here by this node's map, but not
    /// yet by its partitions' roles (a change is half applied here); it has not run. It runs
    /// again once the map moves past version `0`, or after [`MAP_CATCH_UP`].
    Unready(u64),
}

/// How long a command whose partitions' roles lag this node's map (or whose map has no master
/// for a key) waits for them; then it runs, or is refused, and that is its answer.
const MAP_CATCH_UP: Duration = routing::MAP_CATCH_UP;

/// Whether a wait reads what the client sends (not once the connection is closing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    Yes,
    No,
}

struct Connection {
    stream: Transport,
    session: Option<Session>,
    input: BytesMut,
    args: Option<wire_resp::Args>,
    output: Output,
    account: Account,
    limit: OutputBufferLimit,
    /// Every class's limits: `limit` is the `pubsub` class's while the client subscribes.
    limits: OutputBufferLimits,
    over_soft_since: Option<Instant>,
    last_activity: Instant,
    idle_timeout: Option<Duration>,
    /// Where replies charge their growth while a command builds them.
    memory: Arc<ClientMemory>,
    /// The last command's reply was cut because all clients' memory could not take it.
    over_budget: bool,
    /// Since when the command waiting in `args` has waited for its partitions' roles.
    unready_since: Option<Instant>,
}

/// Serves one Redis client until it quits, misbehaves, breaks a limit, or the server shuts
/// down.
pub async fn serve(
    stream: Transport,
    session: Session,
    shutdown: watch::Receiver<bool>,
    account: Account,
) {
    let state = Arc::clone(&session.state);
    let client_id = session.client_id;
    let peer = stream.peer_addr().ok();
    let resp = &state.config.resp;
    let mut connection = Connection {
        stream,
        session: Some(session),
        input: BytesMut::with_capacity(READ_CHUNK_BYTES),
        args: Some(wire_resp::Args::default()),
        output: Output::default(),
        account,
        limit: resp.output_buffer_limits().unwrap_or_default().normal,
        limits: resp.output_buffer_limits().unwrap_or_default(),
        over_soft_since: None,
        last_activity: Instant::now(),
        idle_timeout: (resp.timeout > 0).then(|| Duration::from_secs(resp.timeout)),
        memory: Arc::clone(&state.client_memory),
        over_budget: false,
        unready_since: None,
    };
    let reason = connection.run(shutdown).await;
    let unsent_bytes = connection.output.unsent_bytes();
    match reason {
        Close::OutputLimit => {
            state
                .client_memory
                .output_limit_closed
                .fetch_add(1, Ordering::Relaxed);
            warn!(
                client_id,
                ?peer,
                unsent_bytes,
                "client closed for overcoming of output buffer limits"
            );
        }
        Close::Evicted if connection.account.was_killed() => {
            debug!(client_id, ?peer, "client killed by CLIENT KILL");
        }
        Close::Evicted => warn!(
            client_id,
            ?peer,
            held_bytes = connection.account.charged_bytes(),
            "client evicted: all clients hold more than client-memory-max, it the most"
        ),
        Close::Idle => {
            state
                .resp_connections
                .idle_closed
                .fetch_add(1, Ordering::Relaxed);
            debug!(client_id, "idle client closed");
        }
        Close::QueryBufferLimit => {
            warn!(
                client_id,
                ?peer,
                "client closed: query buffer limit reached"
            );
        }
        reason => debug!(client_id, ?reason, "connection closed"),
    }
}

impl Connection {
    fn session(&mut self) -> &mut Session {
        self.session
            .as_mut()
            .expect("the session is away only while a command runs on the pool")
    }

    async fn run(&mut self, mut shutdown: watch::Receiver<bool>) -> Close {
        // When the current run of steps without a wait began; read only for deep pipelines.
        let mut slice_started: Option<Instant> = None;
        let state = Arc::clone(&self.session().state);
        loop {
            if let Err(close) = self.deliver_messages() {
                return close;
            }
            let step = {
                // One entry for the step's commands, before their checks for a script.
                let _entered = state.scripts.in_flight.enter();
                self.answer_step()
            };
            self.note_subscribed();
            self.publish_shown();
            if step == Step::OverLimit {
                // The cut reply must not reach the client: close without writing it.
                return self.over_limit();
            }
            if let Err(close) = self.after_step(&step).await {
                return close;
            }
            if let Err(close) = self.write_and_check() {
                return close;
            }
            match step {
                Step::Close | Step::OverLimit => return self.close_after(&mut shutdown).await,
                Step::Offload => {
                    if let Err(close) = self.run_on_pool().await {
                        return close;
                    }
                    continue;
                }
                Step::AwaitScript => {
                    let state = Arc::clone(&self.session().state);
                    state.scripts.wait_for_turn().await;
                    continue;
                }
                Step::Forward(owner) => {
                    if let Err(close) = self.run_forwarded(owner, &shutdown).await {
                        return close;
                    }
                    continue;
                }
                Step::Block => {
                    if let Err(close) = self.run_blocked(&mut shutdown).await {
                        return close;
                    }
                    continue;
                }
                Step::ForwardTransaction(owner) => {
                    self.run_forwarded_transaction(owner).await;
                    continue;
                }
                Step::Unready(seen) => {
                    self.wait_for_map(seen).await;
                    continue;
                }
                Step::Paused => {
                    if let Err(close) = self.wait_for_unpause(&mut shutdown).await {
                        return close;
                    }
                    continue;
                }
                Step::Gather => {
                    if let Err(close) = self.run_gathered().await {
                        // The cut reply must not reach the client.
                        return close;
                    }
                    continue;
                }
                Step::Flush => {
                    let started = *slice_started.get_or_insert_with(Instant::now);
                    if started.elapsed() >= SLICE_TIME {
                        tokio::task::yield_now().await;
                        slice_started = None;
                    }
                    continue;
                }
                Step::Drained => {}
            }
            if *shutdown.borrow() {
                return Close::Shutdown;
            }
            if let Err(close) = self.wait(&mut shutdown, Reading::Yes).await {
                return close;
            }
            slice_started = None;
        }
    }

    /// Answers complete requests until the input has none, replies reach
    /// `OUTPUT_FLUSH_BYTES`, or a command closes, overflows or asks for the pool.
    fn answer_step(&mut self) -> Step {
        // The queued replies do not change within a step, so one cap on the filling chunk's
        // length holds for every command of it.
        let filling_len_max = self.filling_len_max();
        let mut args = self.args.take().expect("arguments are home between steps");
        let mut consumed = 0;
        let mut step = Step::Drained;
        while self.output.filling.len() < OUTPUT_FLUSH_BYTES {
            match wire_resp::decode_request(&self.input[consumed..], &mut args) {
                Ok(Some(size_bytes)) => {
                    consumed += size_bytes;
                    if args.is_empty() {
                        continue;
                    }
                    step = self.answer(&args, filling_len_max, true);
                    if matches!(step, Step::Unready(_) | Step::Paused | Step::AwaitScript) {
                        // Not run: decoded and answered again once the map has moved, the
                        // pause has ended, or the running script has ended or passed
                        // `busy-reply-threshold`.
                        self.args = Some(args);
                        self.input.advance(consumed - size_bytes);
                        return step;
                    }
                    self.unready_since = None;
                    if step != Step::Drained {
                        if matches!(
                            step,
                            Step::Offload
                                | Step::Block
                                | Step::Forward(_)
                                | Step::Gather
                                | Step::ForwardTransaction(_)
                        ) {
                            // Not run: it runs again, whole, on the pool.
                            self.args = Some(args);
                            self.input.advance(consumed);
                            return step;
                        }
                        break;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    error.write_reply(&mut self.output.filling);
                    step = Step::Close;
                    break;
                }
            }
        }
        if step == Step::Drained && self.output.filling.len() >= OUTPUT_FLUSH_BYTES {
            step = Step::Flush;
        }
        self.args = Some(args);
        self.input.advance(consumed);
        step
    }

    /// Moves the messages published to this client into its output, ahead of the replies to
    /// what it sends next; while it subscribes, its limits are the `pubsub` class's.
    fn deliver_messages(&mut self) -> Result<(), Close> {
        let subscribed = self
            .session
            .as_ref()
            .is_some_and(|session| session.pubsub.is_subscribed());
        self.limit = if subscribed {
            self.limits.pubsub
        } else {
            self.limits.normal
        };
        let len_max = self.filling_len_max();
        let session = self.session.as_ref().expect("the session is home");
        super::pubsub::deliver(session, &mut self.output.filling, len_max)
            .map_err(|_| Close::OutputLimit)
    }

    /// Tells the registry whether the client subscribes now (CLIENT KILL TYPE pubsub).
    fn note_subscribed(&self) {
        let Some(session) = self.session.as_ref() else {
            return;
        };
        if let Some(registration) = &session.registration {
            let subscribed = session.pubsub.is_subscribed();
            let entry = &registration.entry;
            if entry.subscribed.load(Ordering::Relaxed) != subscribed {
                entry.subscribed.store(subscribed, Ordering::Relaxed);
            }
        }
    }

    /// Publishes what CLIENT LIST shows of this connection, buffers included.
    fn publish_shown(&self) {
        let Some(session) = self.session.as_ref() else {
            return;
        };
        let query_buffer = (self.input.len(), self.input.capacity() - self.input.len());
        let output = (self.output.unsent_bytes(), self.output.held_bytes());
        session.publish_shown(Some((query_buffer, output)));
    }

    /// Runs one command into the output.
    fn answer(
        &mut self,
        args: &wire_resp::Args,
        filling_len_max: usize,
        may_offload: bool,
    ) -> Step {
        let filling_before = self.output.filling.len();
        let session = self
            .session
            .as_mut()
            .expect("the session is home between commands");
        session.may_offload = may_offload;
        let pending = session.transaction.as_ref().map(|t| t.queued());
        if session.state.resp_clients.holds(args, pending) {
            return Step::Paused;
        }
        let reply_mode = session.reply_mode;
        let mut reply =
            Reply::with_limit(&mut self.output.filling, session.protocol, filling_len_max)
                .charged_to(&self.memory);
        if session.state.is_clustered()
            && let Some(transaction) = &session.transaction
            && args
                .command()
                .is_some_and(|name| name.eq_ignore_ascii_case(b"exec"))
            && !transaction.doomed()
        {
            let watching = !session.watched.is_empty();
            match routing::route_transaction(
                &session.state,
                session.database,
                transaction.queued(),
                watching,
            ) {
                Routing::Forward(owner) => return Step::ForwardTransaction(owner),
                Routing::CrossSlot | Routing::Unavailable | Routing::Refused(_) => {
                    session.transaction = None;
                    session.watched.clear();
                    reply.error(routing::CROSSSLOT);
                    return Step::Drained;
                }
                Routing::Local | Routing::Gather => {}
            }
        }
        if session.state.security.is_some()
            && let Some(refusal) = super::acl::refusal(session, args)
        {
            reply.error(&refusal);
            super::command_stats::reject(args);
            return Step::Drained;
        }
        if session.state.is_clustered() && session.transaction.is_none() {
            let seen = session
                .state
                .cluster_node()
                .map_or(0, |node| node.layout_version());
            let may_wait = self
                .unready_since
                .is_none_or(|since| since.elapsed() < MAP_CATCH_UP);
            match routing::route(&session.state, session.database, args) {
                Routing::Local => {
                    if may_wait && !routing::masters_here(&session.state, session.database, args) {
                        return Step::Unready(seen);
                    }
                }
                Routing::Unavailable if may_wait => return Step::Unready(seen),
                Routing::Forward(owner) => return Step::Forward(owner),
                Routing::Gather => return Step::Gather,
                Routing::CrossSlot => {
                    reply.error(routing::CROSSSLOT);
                    return Step::Drained;
                }
                Routing::Unavailable => {
                    reply.error("CLUSTERDOWN Hash slot not served");
                    return Step::Drained;
                }
                Routing::Refused(message) => {
                    reply.error(message);
                    return Step::Drained;
                }
            }
        }
        let seen = session
            .state
            .cluster_node()
            .map_or(0, |node| node.layout_version());
        let after = commands::execute(session, args, &mut reply);
        let overflowed = reply.overflowed();
        let pushed = reply.pushed();
        self.over_budget = reply.over_budget();
        let retry = reply.was_unavailable()
            && session.transaction.is_none()
            && routing::runs_again_safely(args)
            && self
                .unready_since
                .is_none_or(|since| since.elapsed() < MAP_CATCH_UP);
        drop(reply);
        if retry {
            // Refused before it changed anything: held back and run again, as an Aerospike
            // request is, rather than answered with the refusal.
            self.output.filling.truncate(filling_before);
            return Step::Unready(seen);
        }
        if matches!(after, After::Continue | After::Close)
            && session.reply_mode.drops_reply(reply_mode)
            && !pushed
        {
            self.output.filling.truncate(filling_before);
        }
        match after {
            _ if overflowed => Step::OverLimit,
            After::Offload => {
                self.output.filling.truncate(filling_before);
                Step::Offload
            }
            After::Block => Step::Block,
            After::AwaitScript => {
                self.output.filling.truncate(filling_before);
                Step::AwaitScript
            }
            After::Close => Step::Close,
            After::Continue => Step::Drained,
        }
    }

    /// Why a reply passed its limit: the class's hard limit, or `client-memory-max`, which
    /// this connection alone would pass, or all clients with this reply's growth: it is
    /// evicted, as Redis evicts the client holding the most past `maxmemory-clients`.
    fn over_limit(&self) -> Close {
        if self.over_budget || self.limit.hard_bytes == 0 {
            let memory = &self.session_state().client_memory;
            memory.evicted.fetch_add(1, Ordering::Relaxed);
            return Close::Evicted;
        }
        Close::OutputLimit
    }

    /// The longest the filling chunk may grow: what the hard limit (else `client-memory-max`)
    /// leaves of the unsent replies.
    fn filling_len_max(&self) -> usize {
        self.output
            .filling
            .len()
            .saturating_add(self.reply_len_max())
    }

    /// The most bytes the replies may add: what the hard limit leaves, else `client-memory-max`.
    fn reply_len_max(&self) -> usize {
        let limit_bytes = match self.limit.hard_bytes {
            0 => self.session_state().client_memory.limit_bytes(),
            hard => usize::try_from(hard).unwrap_or(usize::MAX),
        };
        match limit_bytes {
            0 => usize::MAX,
            limit => limit.saturating_sub(self.output.unsent_bytes()),
        }
    }

    fn session_state(&self) -> &ServerState {
        &self
            .session
            .as_ref()
            .expect("the session is home between commands")
            .state
    }

    /// Waits until the writes the step acknowledges are durable, and queues a full chunk.
    async fn after_step(&mut self, step: &Step) -> Result<(), Close> {
        if self.session().writes.acks.settled().await.is_err() {
            return Err(Close::NotDurable);
        }
        if *step == Step::Flush {
            self.output.seal();
        }
        Ok(())
    }

    /// Writes what the client takes now, then checks the limits.
    fn write_and_check(&mut self) -> Result<(), Close> {
        match self.output.write_available(&mut self.stream) {
            Ok(0) => {}
            Ok(_) => self.note_activity(),
            Err(_) => return Err(Close::Done),
        }
        if self.input.is_empty() && self.input.capacity() > BUFFER_KEEP_BYTES {
            self.input = BytesMut::with_capacity(READ_CHUNK_BYTES);
        }
        let args_bytes = self
            .args
            .as_ref()
            .map_or(0, wire_resp::Args::allocated_bytes);
        self.account
            .charge(self.input.capacity() + args_bytes + self.output.held_bytes())?;
        let unsent = self.output.unsent_bytes() as u64;
        let limit = self.limit;
        if limit.hard_bytes > 0 && unsent >= limit.hard_bytes {
            return Err(Close::OutputLimit);
        }
        if limit.soft_bytes > 0 && unsent >= limit.soft_bytes {
            // As Redis: never closed when first seen over it, then once over it for longer
            // than its seconds.
            match self.over_soft_since {
                None => self.over_soft_since = Some(Instant::now()),
                Some(since) if since.elapsed() > Duration::from_secs(limit.soft_seconds) => {
                    return Err(Close::OutputLimit);
                }
                Some(_) => {}
            }
        } else {
            self.over_soft_since = None;
        }
        Ok(())
    }

    /// After QUIT or a protocol error: the replies so far go out, then the connection
    /// closes (or sooner, at a limit: the client that does not read them is not waited for
    /// longer than one that goes on sending).
    async fn close_after(&mut self, shutdown: &mut watch::Receiver<bool>) -> Close {
        while self.output.unsent_bytes() > 0 {
            if let Err(close) = self.wait(shutdown, Reading::No).await {
                return close;
            }
            if let Err(close) = self.write_and_check() {
                return close;
            }
        }
        // What TLS still holds of the last replies, within the same bounds.
        if self.stream.has_unflushed() {
            let flushed = tokio::time::timeout(TLS_CLOSE_FLUSH, self.stream.flush());
            tokio::select! {
                _ = flushed => {}
                _ = shutdown.changed() => return Close::Shutdown,
            }
        }
        Close::Done
    }

    /// Waits for CLIENT PAUSE to end (lifted, or past its deadline), CLIENT KILL, or shutdown.
    async fn wait_for_unpause(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), Close> {
        let state = Arc::clone(&self.session().state);
        tokio::select! {
            () = state.resp_clients.pause_lifted() => Ok(()),
            () = self.account.told_to_close() => Err(Close::Evicted),
            _ = shutdown.changed() => Err(Close::Shutdown),
        }
    }

    /// Waits until this node's map moves past version `seen`, or until the command waiting in
    /// `args` has waited [`MAP_CATCH_UP`] in all.
    async fn wait_for_map(&mut self, seen: u64) {
        let since = *self.unready_since.get_or_insert_with(Instant::now);
        let state = Arc::clone(&self.session().state);
        if let Some(node) = state.cluster_node() {
            node.wait_layout_after(seen, since + MAP_CATCH_UP).await;
        }
    }

    /// Sends the command waiting in `args` to `owner`, the master of its keys, and queues the
    /// reply it answers (or an error saying why there is none).
    ///
    /// # Errors
    /// Why the connection closes instead (a forwarded blocking command's client left).
    async fn run_forwarded(
        &mut self,
        owner: model::NodeId,
        shutdown: &watch::Receiver<bool>,
    ) -> Result<(), Close> {
        let args = self.args.take().expect("the arguments are home");
        let (protocol, database) = (self.session().protocol, self.session().database);
        if let Some(block) = blocking::ForwardedBlock::of(&args) {
            self.args = Some(args);
            return self.run_forwarded_blocking(owner, &block, shutdown).await;
        }
        let payload = routing::forward_payload(protocol, database, &args);
        self.args = Some(args);
        self.forward_and_queue_reply(owner, &payload).await;
        Ok(())
    }

    /// Forwards the blocking command in `args` in slices (`blocking.rs`) until it is answered
    /// or its deadline passes, and queues its reply; between slices, sees whether the client
    /// left or the server is shutting down.
    async fn run_forwarded_blocking(
        &mut self,
        owner: model::NodeId,
        block: &blocking::ForwardedBlock,
        shutdown: &watch::Receiver<bool>,
    ) -> Result<(), Close> {
        let (protocol, database) = (self.session().protocol, self.session().database);
        loop {
            let args = self.args.as_ref().expect("the arguments are home");
            let Some(payload) = block.next_payload(protocol, database, args) else {
                Reply::new(&mut self.output.filling, protocol).null_array();
                return Ok(());
            };
            let state = Arc::clone(&self.session().state);
            let resp = ForwardProtocol::Resp;
            match crate::cluster::forward::forward(&state, owner, resp, 0, &payload).await {
                Ok(reply) if blocking::is_timeout_reply(&reply) => {}
                Ok(reply) => {
                    self.output.filling.extend_from_slice(&reply);
                    return Ok(());
                }
                Err(code) => {
                    queue_forward_error(&mut self.output.filling, protocol, code);
                    return Ok(());
                }
            }
            if *shutdown.borrow() {
                return Err(Close::Shutdown);
            }
            self.read_without_waiting().await?;
        }
    }

    /// Reads what the client sent, if anything, without waiting: sees whether it left.
    async fn read_without_waiting(&mut self) -> Result<(), Close> {
        if self.input.len() > QUERY_BUFFER_MAX_BYTES {
            return Err(Close::QueryBufferLimit);
        }
        self.input.reserve(READ_CHUNK_BYTES);
        let read = self.stream.read_buf(&mut self.input);
        match tokio::time::timeout(Duration::ZERO, read).await {
            Err(_nothing_yet) => Ok(()),
            Ok(read) => self.after_read(read),
        }
    }

    /// Ends the transaction being queued (its EXEC is waiting in `args`) by sending it whole
    /// to `owner`, the master of its keys, and queues EXEC's reply from there.
    async fn run_forwarded_transaction(&mut self, owner: model::NodeId) {
        let session = self.session();
        let transaction = session.transaction.take().expect("EXEC ends a transaction");
        session.watched.clear();
        let payload = routing::forward_transaction_payload(
            session.protocol,
            session.database,
            transaction.queued(),
        );
        self.forward_and_queue_reply(owner, &payload).await;
    }

    /// Sends a forward `payload` to `owner` and queues the reply it answers (or an error
    /// saying why there is none).
    async fn forward_and_queue_reply(&mut self, owner: model::NodeId, payload: &[u8]) {
        let session = self.session();
        let state = Arc::clone(&session.state);
        let protocol = session.protocol;
        let forwarded =
            crate::cluster::forward::forward(&state, owner, ForwardProtocol::Resp, 0, payload)
                .await;
        match forwarded {
            Ok(reply) => self.output.filling.extend_from_slice(&reply),
            Err(code) => queue_forward_error(&mut self.output.filling, protocol, code),
        }
    }

    /// Runs the command waiting in `args` on every node (here on the partitions this node
    /// masters, on each other node over the fabric) and queues the merged reply: what a
    /// single server would answer over the whole data set.
    ///
    /// # Errors
    /// The reason to close when the merged reply passed the connection's limit.
    async fn run_gathered(&mut self) -> Result<(), Close> {
        let args = self.args.take().expect("the arguments are home");
        let session = self.session.take().expect("the session is home");
        let state = Arc::clone(&session.state);
        let (protocol, database) = (session.protocol, session.database);
        let Some((session, local_part)) =
            routing::execute_off_the_runtime_if_long(session, &args).await
        else {
            warn!("a Redis command failed on the long-request pool; closing its connection");
            return Err(Close::JobFailed);
        };
        self.session = Some(session);
        let mut parts = vec![local_part];
        let payload = Arc::new(routing::forward_payload(protocol, database, &args));
        let command = args.command().unwrap_or_default().to_ascii_lowercase();
        self.args = Some(args);
        let mut answers = tokio::task::JoinSet::new();
        for peer in state.cluster_view().peers(false) {
            let (state, payload) = (Arc::clone(&state), Arc::clone(&payload));
            answers.spawn(async move {
                let resp = ForwardProtocol::Resp;
                crate::cluster::forward::forward(&state, peer.node_id, resp, 0, &payload).await
            });
        }
        let mut unreachable = false;
        while let Some(answer) = answers.join_next().await {
            match answer {
                Ok(Ok(part)) => parts.push(part),
                _ => unreachable = true,
            }
        }
        if unreachable {
            Reply::new(&mut self.output.filling, protocol)
                .error("CLUSTERDOWN a node holding part of the data set cannot be reached");
            return Ok(());
        }
        let filling_len_max = self.filling_len_max();
        let mut reply = Reply::with_limit(&mut self.output.filling, protocol, filling_len_max)
            .charged_to(&self.memory);
        routing::merge_gathered(&command, &parts, &mut reply);
        let overflowed = reply.overflowed();
        self.over_budget = reply.over_budget();
        drop(reply);
        if overflowed {
            return Err(self.over_limit());
        }
        Ok(())
    }

    /// Runs the command that asked for the pool there, with the session, its arguments and
    /// the output, and takes them back.
    async fn run_on_pool(&mut self) -> Result<(), Close> {
        let filling_len_max = self.filling_len_max();
        let mut session = self.session.take().expect("the session is home");
        let args = self.args.take().expect("the arguments are home");
        let mut filling = std::mem::take(&mut self.output.filling);
        let state = Arc::clone(&session.state);
        let memory = Arc::clone(&self.memory);
        let job = move || {
            session.may_offload = false;
            let limit = (filling_len_max, &*memory);
            let ran = execute_into(&mut session, &args, &mut filling, limit);
            (session, args, filling, ran)
        };
        let Ok((session, args, filling, (after, (overflowed, over_budget)))) =
            state.long_requests.run(job).await
        else {
            warn!("a Redis command failed on the long-request pool; closing its connection");
            return Err(Close::JobFailed);
        };
        self.session = Some(session);
        self.args = Some(args);
        self.output.filling = filling;
        self.over_budget = over_budget;
        if self.session().writes.acks.settled().await.is_err() {
            return Err(Close::NotDurable);
        }
        self.session().may_offload = true;
        match after {
            _ if overflowed => Err(self.over_limit()),
            After::Close => {
                self.write_and_check()?;
                Err(Close::Done)
            }
            After::Continue | After::Offload | After::Block | After::AwaitScript => Ok(()),
        }
    }

    /// Waits for the blocked command in `args` to find a value (running it again on each
    /// wake-up), for its deadline, CLIENT UNBLOCK, the client leaving, or shutdown, and
    /// queues its reply.
    ///
    /// # Errors
    /// Why the connection closes instead.
    async fn run_blocked(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<(), Close> {
        let session = self.session();
        let request = session
            .blocking
            .request
            .take()
            .expect("a blocked command says why");
        let (state, protocol) = (Arc::clone(&session.state), session.protocol);
        let namespace = super::keys::namespace_of(&state);
        let client_id = session.client_id;
        let mut digests = request.digests.clone();
        let mut registration = Some(
            state
                .blocked_clients
                .register(namespace, client_id, &request),
        );
        let deadline = request
            .timeout
            .and_then(|timeout| Instant::now().checked_add(timeout));
        loop {
            let waiter = registration.as_ref().expect("registered").waiter();
            let unblocked = match self.wait_blocked(waiter, deadline, shutdown).await? {
                false => Some(Unblock::Timeout),
                true => waiter.unblocked(),
            };
            if let Some(unblocked) = unblocked {
                let failed = unblocked == Unblock::Error;
                let mut reply = Reply::new(&mut self.output.filling, protocol);
                match failed {
                    true => reply.error(blocking::UNBLOCKED),
                    false => reply.null_array(),
                }
                let args = self.args.as_ref().expect("the arguments are home");
                super::command_stats::record_call(args, Duration::ZERO, failed);
                return Ok(());
            }
            if self.retry_blocked()? {
                return Ok(());
            }
            // Its keys are other records now (SWAPDB): it waits where they are.
            let again = self.session().blocking.request.take();
            if let Some(again) = again.filter(|again| again.digests != digests) {
                // Unregistered first: a client is registered once at a time.
                drop(registration.take());
                digests.clone_from(&again.digests);
                registration = Some(state.blocked_clients.register(namespace, client_id, &again));
            }
        }
    }

    /// Runs the blocked command in `args` again; whether it answered.
    fn retry_blocked(&mut self) -> Result<bool, Close> {
        let filling_len_max = self.filling_len_max();
        let args = self.args.take().expect("the arguments are home");
        let session = self.session.as_mut().expect("the session is home");
        let mut reply =
            Reply::with_limit(&mut self.output.filling, session.protocol, filling_len_max)
                .charged_to(&self.memory);
        let after = blocking::retry(session, &args, &mut reply);
        let overflowed = reply.overflowed();
        self.over_budget = reply.over_budget();
        drop(reply);
        self.args = Some(args);
        if overflowed {
            return Err(self.over_limit());
        }
        Ok(after != After::Block)
    }

    /// Waits, blocked, for a wake-up (true) or the deadline (false), reading what the client
    /// sends (so that its leaving is seen) and writing what it takes meanwhile.
    ///
    /// # Errors
    /// Why the connection closes instead.
    async fn wait_blocked(
        &mut self,
        waiter: &blocking::Waiter,
        deadline: Option<Instant>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<bool, Close> {
        loop {
            if self.input.len() > QUERY_BUFFER_MAX_BYTES {
                return Err(Close::QueryBufferLimit);
            }
            self.input.reserve(READ_CHUNK_BYTES);
            let unsent = self.output.unsent_bytes() > 0;
            let event = tokio::select! {
                biased;
                _ = shutdown.changed() => return Err(Close::Shutdown),
                () = self.account.told_to_close() => return Err(Close::Evicted),
                () = waiter.woken() => return Ok(true),
                () = sleep_until_or_never(deadline) => return Ok(false),
                event = self.stream.read_or_writable(&mut self.input, true, unsent) => event,
            };
            match event {
                Event::Read(read) => self.after_read(read)?,
                Event::Writable(ready) => {
                    ready.map_err(|_| Close::Done)?;
                    self.write_and_check()?;
                }
            }
        }
    }

    /// Waits for the client (input, or room for output), a limit, or shutdown; reads what
    /// arrived.
    async fn wait(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
        reading: Reading,
    ) -> Result<(), Close> {
        let reading = reading == Reading::Yes;
        if reading && self.input.len() > QUERY_BUFFER_MAX_BYTES {
            return Err(Close::QueryBufferLimit);
        }
        let unsent = self.output.unsent_bytes() > 0;
        let soft_deadline = self.over_soft_since.map(|since| {
            since + Duration::from_secs(self.limit.soft_seconds) + Duration::from_millis(1)
        });
        let mailbox = self
            .session
            .as_ref()
            .and_then(|session| session.pubsub.mailbox().cloned());
        // As in Redis, `timeout` does not close a subscriber, which may only listen.
        let idle_deadline = self
            .idle_timeout
            .filter(|_| mailbox.is_none())
            .map(|timeout| self.last_activity + timeout);
        if reading {
            self.input.reserve(READ_CHUNK_BYTES);
        }
        // `read_buf` rather than `readable` and `try_read`: a read that leaves the socket empty
        // clears its readiness, so the next wait does not begin with a read that finds nothing.
        let watched =
            unsent || soft_deadline.is_some() || idle_deadline.is_some() || mailbox.is_some();
        if reading && !watched {
            // The usual wait of an ordinary client: its next request, CLIENT KILL, or
            // shutdown.
            let read = tokio::select! {
                biased;
                read = self.stream.read_buf(&mut self.input) => read,
                () = self.account.told_to_close() => return Err(Close::Evicted),
                _ = shutdown.changed() => return Err(Close::Shutdown),
            };
            return self.after_read(read);
        }
        let read = tokio::select! {
            biased;
            event = self.stream.read_or_writable(&mut self.input, reading, unsent) => match event {
                Event::Read(read) => read,
                Event::Writable(ready) => return ready.map_err(|_| Close::Done),
            },
            () = self.account.told_to_close() => return Err(Close::Evicted),
            () = message_arrived(mailbox.as_deref()), if mailbox.is_some() => {
                // The other tasks ready now (publishers among them) run first: what they
                // publish goes out in the same write, as Redis writes a subscriber's output
                // once per turn of its event loop, not once per PUBLISH it serves.
                tokio::task::yield_now().await;
                return Ok(());
            }
            () = sleep_until_or_never(soft_deadline) => return Err(Close::OutputLimit),
            () = sleep_until_or_never(idle_deadline) => return Err(Close::Idle),
            _ = shutdown.changed() => return Err(Close::Shutdown),
        };
        self.after_read(read)
    }

    fn after_read(&mut self, read: std::io::Result<usize>) -> Result<(), Close> {
        match read {
            Ok(0) | Err(_) => Err(Close::Done),
            Ok(_) => {
                self.note_activity();
                Ok(())
            }
        }
    }

    /// The client sent or took bytes: its idle time starts again (read only with `timeout`).
    fn note_activity(&mut self) {
        if self.idle_timeout.is_some() {
            self.last_activity = Instant::now();
        }
    }
}

async fn message_arrived(mailbox: Option<&super::pubsub::hub::Mailbox>) {
    match mailbox {
        Some(mailbox) => mailbox.arrived().await,
        None => std::future::pending().await,
    }
}

/// Queues the error a client gets when its forwarded command got no answer (`code`).
fn queue_forward_error(filling: &mut Vec<u8>, protocol: u8, code: model::ResultCode) {
    let message = match code {
        model::ResultCode::Timeout => "TIMEOUT the key's master did not answer in time",
        _ => "CLUSTERDOWN the key's master cannot be reached",
    };
    Reply::new(filling, protocol).error(message);
}

async fn sleep_until_or_never(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// What one command did on the pool: how it ended, and whether its reply overflowed the
/// connection's limit (and was over the client-memory budget).
type PoolRun = (After, (bool, bool));

/// Runs one command into `filling` on the long-request pool, as `Connection::answer` does on a
/// runtime worker: its reply within `limit` (the longest the filling may grow, and the
/// account it is charged to), dropped where CLIENT REPLY says so.
fn execute_into(
    session: &mut Session,
    args: &wire_resp::Args,
    filling: &mut Vec<u8>,
    (filling_len_max, memory): (usize, &ClientMemory),
) -> PoolRun {
    let (filling_before, reply_mode) = (filling.len(), session.reply_mode);
    let mut reply =
        Reply::with_limit(filling, session.protocol, filling_len_max).charged_to(memory);
    let after = commands::execute(session, args, &mut reply);
    let overflow = (reply.overflowed(), reply.over_budget());
    // Push messages (subscription confirmations) go out whatever CLIENT REPLY says.
    let pushed = reply.pushed();
    drop(reply);
    if session.reply_mode.drops_reply(reply_mode) && !pushed {
        filling.truncate(filling_before);
    }
    (after, overflow)
}
