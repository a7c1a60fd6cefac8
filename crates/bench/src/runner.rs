//! Runs one workload: worker threads, each a single-threaded tokio runtime driving its share of
//! the connections, and the calling thread collecting an interval of statistics every second.
//!
//! Each connection keeps up to `pipeline` commands in flight: it sends a batch, then reads
//! every reply of the batch before sending the next. Synchronous mode is one connection per
//! thread with a pipeline of 1; `--async` opens `max-inflight / pipeline` connections.
//!
//! Under Aerospike each command goes to its partition's master ([`crate::routes`]): a
//! connection holds one stream per node (a lane), opened when a command first goes there, so
//! every node gets the configured connections. A batch is split over the lanes of its
//! commands' nodes, and their replies are awaited together. A background thread re-tends the
//! partition map every [`REFRESH_INTERVAL`]; connections pick up new routes before their next
//! batch.
//!
//! Latency: unthrottled, from the moment a batch is handed to the socket to its reply.
//! Throttled (`-g`), every command has an intended start on a fixed schedule. A command that
//! leaves late because the connection was still waiting for earlier replies is timed from its
//! intended start, so a stalled server shows up as latency instead of hiding in a lower send
//! rate (coordinated omission). A command that left on time, after the pacer slept, is timed
//! from when it left, so the pacer's 1 ms timer resolution is not charged to the server.
//!
//! Invariants:
//! - Every command that was drawn is recorded exactly once ([`Completion`]): a reply, a
//!   timeout, a connection error when the connection failed before its reply, or `no master`
//!   when no node claims its partition (then it is not sent).
//! - A command is recorded against the node whose lane carried it.
//! - After a timeout or a bad reply the lane's stream is dropped (its reply stream can no
//!   longer be matched to requests) and reopened.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use client::ClusterMap;

use crate::protocol::{Encoder, ErrorLabel, Outcome, Protocol, decode_reply};
use crate::routes::{self, RoutedNode, Routes, SharedRoutes};
use crate::source::{KeyRange, OpKind, OpSource};
use crate::spec::{KeyDistribution, ObjectSpec, Workload};
use crate::stats::{Completion, Stats};

/// How often the reporter collects an interval.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// How often the partition map is tended during a run: the smart clients' tend interval
/// (the Go client's `TendInterval`).
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(1);

/// How often the tend thread checks, between tends, whether the run is over.
const REFRESH_STOP_CHECK: Duration = Duration::from_millis(20);

/// A connection whose unread replies exceed this is dropped (no reply is that large).
const READ_BUFFER_BYTES_MAX: usize = 256 * 1024 * 1024;

/// How much free space a read asks the socket to fill.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// The last stretch of a pacing wait that is timed precisely instead of by tokio's 1 ms timer.
const PRECISE_WAIT: Duration = Duration::from_millis(2);

/// How long a stopped run waits for outstanding replies when there is no timeout.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// Pause before reopening a failed connection.
const RECONNECT_DELAY: Duration = Duration::from_millis(100);

/// Where to connect and how to talk.
#[derive(Clone, Debug)]
pub struct Target {
    /// The server's address: the first host.
    pub address: SocketAddr,
    /// Every host given, the first being `address`: under Aerospike, the seeds the partition
    /// map is learned from.
    pub seeds: Vec<SocketAddr>,
    /// The protocol it speaks.
    pub protocol: Protocol,
    /// Redis only: switch the connection to RESP3 with `HELLO 3`.
    pub resp3: bool,
    /// Aerospike only: the user each connection logs in as, and its credential.
    pub login: Option<Login>,
}

/// A user to log in as (a server with security on).
#[derive(Clone, Debug)]
pub struct Login {
    /// The user's name.
    pub user: String,
    /// The password, as Redis's AUTH sends it.
    pub password: String,
    /// The password's credential (bcrypt with the protocol's salt), as Aerospike clients send
    /// it; empty under Redis.
    pub credential: String,
}

/// Everything one run needs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The server.
    pub target: Target,
    /// Aerospike namespace.
    pub namespace: String,
    /// Aerospike set.
    pub set: String,
    /// The bins of each write.
    pub object: ObjectSpec,
    /// What to do.
    pub workload: Workload,
    /// Which keys.
    pub keys: KeyRange,
    /// How random workloads pick keys.
    pub distribution: KeyDistribution,
    /// Worker threads (each a single-threaded runtime).
    pub threads: usize,
    /// Connections, spread over the threads.
    pub connections: usize,
    /// Commands in flight per connection.
    pub pipeline: usize,
    /// Stop after this long (count-based workloads also stop when every key was visited).
    pub duration: Option<Duration>,
    /// Target rate over all connections; 0 is unthrottled.
    pub throughput_ops_per_s: u64,
    /// Per-command timeout; `None` waits forever.
    pub timeout: Option<Duration>,
    /// Seed of every random choice.
    pub seed: u64,
}

/// One collected interval, handed to the caller's reporter.
#[derive(Debug)]
pub struct Interval<'a> {
    /// Time since the run started, at the end of this interval.
    pub elapsed: Duration,
    /// Length of this interval.
    pub length: Duration,
    /// Commands finished in this interval.
    pub stats: &'a Stats,
    /// Commands finished since the start.
    pub totals: &'a Stats,
    /// The nodes, by the index the stats count their requests under.
    pub nodes: &'a [RoutedNode],
}

/// The outcome of a whole run.
#[derive(Debug)]
pub struct RunResult {
    /// From the first command to the last reply (or the stop).
    pub elapsed: Duration,
    /// Every finished command.
    pub totals: Stats,
    /// The nodes, by the index the stats count their requests under.
    pub nodes: Vec<RoutedNode>,
}

/// State shared by all connections of a run.
#[derive(Debug)]
struct Shared {
    plan: Plan,
    stop: AtomicBool,
    next_offset: Arc<AtomicU64>,
    started: Instant,
    routes: SharedRoutes,
}

/// Runs `plan` to its end (count, duration, or `stop` set by the caller, e.g. on Ctrl-C),
/// calling `on_interval` about once per second and once at the end.
///
/// # Errors
///
/// When the server cannot be reached before the run starts, or a worker thread cannot start.
pub fn run(
    plan: &Plan,
    stop: &Arc<AtomicBool>,
    mut on_interval: impl FnMut(&Interval<'_>),
) -> Result<RunResult, String> {
    check_reachable(&plan.target)?;
    let (routes, map) = routes::discover(&plan.target, &plan.namespace);
    let shared = Arc::new(Shared {
        plan: plan.clone(),
        stop: AtomicBool::new(false),
        next_offset: Arc::default(),
        started: Instant::now(),
        routes: SharedRoutes::new(routes),
    });
    let tender = map.and_then(|map| spawn_tender(map, shared.clone()));
    let thread_stats: Vec<Arc<Mutex<Stats>>> = (0..plan.threads)
        .map(|_| Arc::new(Mutex::new(Stats::default())))
        .collect();
    let (workers, done) = spawn_workers(&shared, &thread_stats)
        // Stops the workers already started and the tend thread.
        .inspect_err(|_| shared.stop.store(true, Ordering::Relaxed))?;

    let mut totals = Stats::default();
    let mut interval = Stats::default();
    let mut running = plan.threads;
    let mut last_report = shared.started;
    while running > 0 {
        let next_report = last_report + REPORT_INTERVAL;
        let wait = next_report.saturating_duration_since(Instant::now());
        match done.recv_timeout(wait) {
            Ok(()) => running -= 1,
            Err(mpsc::RecvTimeoutError::Disconnected) => running = 0,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        let duration_over = plan.duration.is_some_and(|d| now - shared.started >= d);
        if duration_over || stop.load(Ordering::Relaxed) {
            shared.stop.store(true, Ordering::Relaxed);
        }
        if now >= next_report || running == 0 {
            collect(&thread_stats, &mut interval);
            totals.merge(&interval);
            let (_, routes) = shared.routes.load();
            on_interval(&Interval {
                elapsed: now - shared.started,
                length: now - last_report,
                stats: &interval,
                totals: &totals,
                nodes: routes.nodes(),
            });
            interval.reset();
            last_report = now;
        }
    }
    let elapsed = last_report - shared.started;
    // Count-based runs end without the stop flag; the tend thread waits for it.
    shared.stop.store(true, Ordering::Relaxed);
    for worker in workers.into_iter().chain(tender) {
        worker
            .join()
            .map_err(|_| "a worker or the partition map thread panicked".to_owned())?;
    }
    let (_, routes) = shared.routes.load();
    Ok(RunResult {
        elapsed,
        totals,
        nodes: routes.nodes().to_vec(),
    })
}

/// Starts one worker thread per stats slot; each sends on the returned channel when done.
fn spawn_workers(
    shared: &Arc<Shared>,
    thread_stats: &[Arc<Mutex<Stats>>],
) -> Result<(Vec<std::thread::JoinHandle<()>>, mpsc::Receiver<()>), String> {
    let (done_sender, done) = mpsc::channel::<()>();
    let mut workers = Vec::with_capacity(thread_stats.len());
    for (thread_index, stats) in thread_stats.iter().enumerate() {
        let (shared, stats, done_sender) = (shared.clone(), stats.clone(), done_sender.clone());
        let worker = std::thread::Builder::new()
            .name(format!("bench-{thread_index}"))
            .spawn(move || {
                run_thread(&shared, thread_index, &stats);
                // The reporter may have returned already; nobody to tell then.
                let _ = done_sender.send(());
            })
            .map_err(|error| format!("cannot start a worker thread: {error}"))?;
        workers.push(worker);
    }
    Ok((workers, done))
}

/// Starts the thread that tends `map` every [`REFRESH_INTERVAL`] until the run stops, and
/// warns on stderr when the nodes that fail change. Without the thread (it could not
/// start) the run keeps the routes it learned.
fn spawn_tender(mut map: ClusterMap, shared: Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    let spawned = std::thread::Builder::new()
        .name("bench-tend".to_owned())
        .spawn(move || {
            let mut last_warning = String::new();
            while sleep_unless_stopped(&shared, REFRESH_INTERVAL) {
                let warning = routes::refresh(&mut map, &shared.plan.namespace, &shared.routes);
                if !warning.is_empty() && warning != last_warning {
                    eprintln!("osprey-bench: {warning}");
                }
                last_warning = warning;
            }
        });
    match spawned {
        Ok(handle) => Some(handle),
        Err(error) => {
            eprintln!("osprey-bench: the partition map will not be refreshed: {error}");
            None
        }
    }
}

/// Sleeps `duration` unless the run stops first; returns whether it is still running.
fn sleep_unless_stopped(shared: &Shared, duration: Duration) -> bool {
    let until = Instant::now() + duration;
    while !shared.stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(REFRESH_STOP_CHECK));
    }
    false
}

/// Moves every thread's counters into `interval`.
fn collect(thread_stats: &[Arc<Mutex<Stats>>], interval: &mut Stats) {
    for stats in thread_stats {
        let mut stats = stats.lock();
        interval.merge(&stats);
        stats.reset();
    }
}

/// Fails fast with a clear message when nothing listens at the target.
fn check_reachable(target: &Target) -> Result<(), String> {
    std::net::TcpStream::connect_timeout(&target.address, Duration::from_secs(5))
        .map(drop)
        .map_err(|error| format!("cannot connect to {}: {error}", target.address))
}

/// One worker thread: a single-threaded runtime driving connections `thread_index`,
/// `thread_index + threads`, ...
fn run_thread(shared: &Arc<Shared>, thread_index: usize, stats: &Arc<Mutex<Stats>>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("osprey-bench: cannot start a runtime: {error}");
            return;
        }
    };
    runtime.block_on(async {
        let mut connections = tokio::task::JoinSet::new();
        let plan = &shared.plan;
        let indexes: Vec<usize> = (thread_index..plan.connections)
            .step_by(plan.threads)
            .collect();
        let alone_on_thread = indexes.len() == 1;
        for index in indexes {
            let mut driver =
                ConnectionDriver::new(shared.clone(), index, stats.clone(), alone_on_thread);
            connections.spawn(async move { driver.run().await });
        }
        while connections.join_next().await.is_some() {}
    });
}

/// A command sent and not yet answered.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    kind: OpKind,
    /// Where its latency is measured from.
    start: Instant,
    /// With `-g`: when it was due.
    intended: Option<Instant>,
}

/// Why a batch's exchange ended early; the stream is dropped either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ExchangeFailure {
    /// No reply before the timeout.
    TimedOut,
    /// The connection failed or carried bytes that are not a reply.
    Broken,
}

/// Paces one connection's commands on a fixed schedule (`-g`).
#[derive(Debug)]
struct Pacer {
    interval: Duration,
    next_start: Instant,
}

impl Pacer {
    /// The due time of the next command.
    fn next_slot(&mut self) -> Instant {
        let intended = self.next_start;
        self.next_start += self.interval;
        intended
    }
}

/// One connection's loop: batch, route, send, read replies, record.
struct ConnectionDriver {
    shared: Arc<Shared>,
    stats: Arc<Mutex<Stats>>,
    source: OpSource,
    encoder: Encoder,
    pacer: Option<Pacer>,
    /// The routes this connection follows, and their version in `shared.routes`.
    routes: Arc<Routes>,
    routes_version: u64,
    /// One per node of `routes`, by node index.
    lanes: Vec<Lane>,
    /// With `-g`: when the last command of the batch is due.
    batch_due: Option<Instant>,
    /// Whether no other connection shares this worker thread (blocking waits are harmless).
    alone_on_thread: bool,
}

/// One node's share of a connection's batches, on the connection's own stream to that node.
struct Lane {
    node_index: usize,
    stream: Option<TcpStream>,
    request: Vec<u8>,
    replies: Vec<u8>,
    in_flight: Vec<InFlight>,
}

/// What every lane of a connection needs for one batch.
struct LaneContext<'a> {
    shared: &'a Shared,
    stats: &'a Mutex<Stats>,
    routes: &'a Routes,
    /// Whether the batch waited for its schedule (its commands left on time).
    slept: bool,
}

impl ConnectionDriver {
    fn new(
        shared: Arc<Shared>,
        index: usize,
        stats: Arc<Mutex<Stats>>,
        alone_on_thread: bool,
    ) -> ConnectionDriver {
        let plan = &shared.plan;
        let seed = plan.seed.wrapping_add(index as u64);
        let source = OpSource::new(
            plan.workload,
            plan.keys,
            plan.distribution,
            shared.next_offset.clone(),
            seed,
        );
        let timeout_ms = plan.timeout.map_or(0, |timeout| {
            u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX)
        });
        let encoder = Encoder::new(
            plan.target.protocol,
            &plan.namespace,
            &plan.set,
            &plan.object,
            timeout_ms,
            seed,
        );
        let pacer = (plan.throughput_ops_per_s > 0).then(|| {
            let per_connection_ops_per_s =
                plan.throughput_ops_per_s as f64 / plan.connections as f64;
            let interval = Duration::from_secs_f64(1.0 / per_connection_ops_per_s);
            // Stagger the connections across one interval so they do not fire together.
            let offset = interval.mul_f64(index as f64 / plan.connections as f64);
            Pacer {
                interval,
                next_start: shared.started + offset,
            }
        });
        let (routes_version, routes) = shared.routes.load();
        let mut driver = ConnectionDriver {
            shared,
            stats,
            source,
            encoder,
            pacer,
            routes,
            routes_version,
            lanes: Vec::new(),
            batch_due: None,
            alone_on_thread,
        };
        driver.add_lanes();
        driver
    }

    async fn run(&mut self) {
        while !self.shared.stop.load(Ordering::Relaxed) {
            self.follow_routes();
            let exhausted = self.fill_batch();
            let slept = self.wait_for_schedule().await;
            let busy_count = self.lanes.iter().filter(|lane| lane.is_busy()).count();
            if busy_count == 0 {
                if exhausted {
                    return;
                }
                continue;
            }
            self.exchange_batch(slept, busy_count).await;
        }
    }

    /// Takes the shared routes when they changed since the last batch.
    fn follow_routes(&mut self) {
        if self.shared.routes.version() == self.routes_version {
            return;
        }
        (self.routes_version, self.routes) = self.shared.routes.load();
        self.add_lanes();
    }

    /// A lane for every node of the routes (nodes keep their indexes, so lanes only grow).
    fn add_lanes(&mut self) {
        while self.lanes.len() < self.routes.nodes().len() {
            self.lanes.push(Lane {
                node_index: self.lanes.len(),
                stream: None,
                request: Vec::new(),
                replies: Vec::with_capacity(READ_CHUNK_BYTES),
                in_flight: Vec::new(),
            });
        }
    }

    /// Takes up to `pipeline` ops and encodes each into the lane of its node, noting their
    /// intended start times when throttled. Returns whether the source is exhausted.
    fn fill_batch(&mut self) -> bool {
        for lane in &mut self.lanes {
            lane.request.clear();
            lane.in_flight.clear();
        }
        self.batch_due = None;
        let filled_at = Instant::now();
        for _ in 0..self.shared.plan.pipeline {
            let Some(op) = self.source.next_op() else {
                return true;
            };
            let intended = self.pacer.as_mut().map(Pacer::next_slot);
            self.batch_due = intended;
            let keyed = self.encoder.key(op);
            let Some(node_index) = self.routes.node_index(&keyed) else {
                self.stats.lock().record(op.kind, Completion::NoMaster);
                continue;
            };
            let lane = &mut self.lanes[node_index];
            self.encoder.encode(&keyed, &mut lane.request);
            lane.in_flight.push(InFlight {
                kind: op.kind,
                start: filled_at,
                intended,
            });
        }
        false
    }

    /// Waits until the last command of the batch is due; returns whether it waited.
    ///
    /// tokio's timer has 1 ms resolution, too coarse for sub-millisecond intervals, so the
    /// last millisecond is waited precisely: with `std::thread::sleep` when this connection has
    /// its thread to itself (synchronous mode), else by yielding to the thread's other
    /// connections until the time comes.
    async fn wait_for_schedule(&self) -> bool {
        let Some(due) = self.batch_due else {
            return false;
        };
        if due <= Instant::now() {
            return false;
        }
        if due - Instant::now() > PRECISE_WAIT {
            tokio::time::sleep_until((due - PRECISE_WAIT).into()).await;
        }
        loop {
            let remaining = due.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return true;
            }
            if self.alone_on_thread {
                std::thread::sleep(remaining);
            } else {
                tokio::task::yield_now().await;
            }
        }
    }

    /// Runs the batch on every busy lane. Several nodes' replies are awaited together, so that
    /// each reply is timed when it arrives rather than after another node's.
    async fn exchange_batch(&mut self, slept: bool, busy_count: usize) {
        let context = LaneContext {
            shared: &self.shared,
            stats: &self.stats,
            routes: &self.routes,
            slept,
        };
        let mut batches = self
            .lanes
            .iter_mut()
            .filter(|lane| lane.is_busy())
            .map(|lane| lane.run_batch(&context));
        if busy_count == 1 {
            if let Some(batch) = batches.next() {
                batch.await;
            }
            return;
        }
        let mut pending: Vec<Pin<Box<_>>> = batches.map(Box::pin).collect();
        std::future::poll_fn(|cx| {
            pending.retain_mut(|batch| batch.as_mut().poll(cx).is_pending());
            if pending.is_empty() {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
    }
}

impl Lane {
    fn is_busy(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Connects if needed, sends the lane's share of the batch and reads its replies.
    async fn run_batch(&mut self, context: &LaneContext<'_>) {
        if self.ensure_connected(context).await.is_err() {
            self.fail_from(0, context);
            tokio::time::sleep(RECONNECT_DELAY).await;
            return;
        }
        let sent_at = Instant::now();
        for in_flight in &mut self.in_flight {
            in_flight.start = match in_flight.intended {
                Some(intended) if !context.slept => intended,
                _ => sent_at,
            };
        }
        if let Err(failure) = self.exchange(sent_at, context).await {
            self.stream = None;
            if failure == ExchangeFailure::Broken {
                tokio::time::sleep(RECONNECT_DELAY).await;
            }
        }
    }

    async fn ensure_connected(&mut self, context: &LaneContext<'_>) -> std::io::Result<()> {
        if self.stream.is_none() {
            let address = context.routes.nodes()[self.node_index].address;
            let stream = open_connection(address, &context.shared.plan.target).await?;
            self.replies.clear();
            self.stream = Some(stream);
        }
        Ok(())
    }

    /// Sends the lane's requests and reads their replies, recording each command.
    async fn exchange(
        &mut self,
        sent_at: Instant,
        context: &LaneContext<'_>,
    ) -> Result<(), ExchangeFailure> {
        // Taken for the exchange and put back only if it ends cleanly.
        let Some(mut stream) = self.stream.take() else {
            return Err(self.fail_from(0, context));
        };
        if stream.write_all(&self.request).await.is_err() {
            return Err(self.fail_from(0, context));
        }
        let deadline = context.shared.plan.timeout.map(|timeout| sent_at + timeout);
        let protocol = context.shared.plan.target.protocol;
        let mut answered = 0;
        let mut consumed = 0;
        while answered < self.in_flight.len() {
            let kind = self.in_flight[answered].kind;
            match decode_reply(protocol, kind, &self.replies[consumed..]) {
                Ok(Some((outcome, size))) => {
                    consumed += size;
                    self.record_reply(answered, outcome, context);
                    answered += 1;
                    continue;
                }
                Ok(None) => {}
                Err(_) => return Err(self.fail_from(answered, context)),
            }
            self.replies.drain(..consumed);
            consumed = 0;
            if self.replies.len() > READ_BUFFER_BYTES_MAX {
                return Err(self.fail_from(answered, context));
            }
            self.replies.reserve(READ_CHUNK_BYTES);
            let read = match self.read_more(&mut stream, deadline, context.shared).await {
                Some(read) => read,
                None => return Err(self.time_out_from(answered, context)),
            };
            if !matches!(read, Ok(count) if count > 0) {
                return Err(self.fail_from(answered, context));
            }
        }
        self.replies.drain(..consumed);
        self.stream = Some(stream);
        Ok(())
    }

    /// Reads more reply bytes. `None` when the timeout passed, or when the run was stopped and
    /// the server stayed silent for another [`STOP_GRACE`] (so that a run without a timeout
    /// still ends).
    async fn read_more(
        &mut self,
        stream: &mut TcpStream,
        deadline: Option<Instant>,
        shared: &Shared,
    ) -> Option<std::io::Result<usize>> {
        loop {
            let check_at = Instant::now() + STOP_GRACE;
            let wake_at = deadline.map_or(check_at, |deadline| deadline.min(check_at));
            let read = stream.read_buf(&mut self.replies);
            if let Ok(read) = tokio::time::timeout_at(wake_at.into(), read).await {
                return Some(read);
            }
            let timed_out = deadline.is_some_and(|deadline| Instant::now() >= deadline);
            if timed_out || shared.stop.load(Ordering::Relaxed) {
                return None;
            }
        }
    }

    fn record_reply(&self, index: usize, outcome: Outcome, context: &LaneContext<'_>) {
        let in_flight = self.in_flight[index];
        let completion = Completion::Replied {
            outcome,
            latency_ns: nanos_since(in_flight.start),
        };
        let mut stats = context.stats.lock();
        stats.record_at_node(self.node_index, in_flight.kind, completion);
    }

    /// Records every unanswered command from `index` on as a connection error.
    fn fail_from(&self, index: usize, context: &LaneContext<'_>) -> ExchangeFailure {
        let mut stats = context.stats.lock();
        for in_flight in &self.in_flight[index..] {
            let completion = Completion::Replied {
                outcome: Outcome::Error(ErrorLabel::Connection),
                latency_ns: nanos_since(in_flight.start),
            };
            stats.record_at_node(self.node_index, in_flight.kind, completion);
        }
        ExchangeFailure::Broken
    }

    /// Records every unanswered command from `index` on as timed out.
    fn time_out_from(&self, index: usize, context: &LaneContext<'_>) -> ExchangeFailure {
        let mut stats = context.stats.lock();
        for in_flight in &self.in_flight[index..] {
            stats.record_at_node(self.node_index, in_flight.kind, Completion::TimedOut);
        }
        ExchangeFailure::TimedOut
    }
}

/// Nanoseconds from `start` to now, saturating at `u64::MAX` (584 years).
fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Sends LOGIN on a new Aerospike connection; the server must accept it (or have no
/// security: result 52, as the official clients take it).
async fn log_in(stream: &mut TcpStream, login: &Login) -> std::io::Result<()> {
    use wire_aerospike::security::{command, field, write_security_request};
    let mut request = Vec::new();
    let fields: [(u8, &[u8]); 2] = [
        (field::USER, login.user.as_bytes()),
        (field::CREDENTIAL, login.credential.as_bytes()),
    ];
    write_security_request(&mut request, command::LOGIN, &fields);
    stream.write_all(&request).await?;
    let mut header = [0u8; 8];
    stream.read_exact(&mut header).await?;
    let size = u64::from_be_bytes(header) & 0xFFFF_FFFF_FFFF;
    if size > LOGIN_REPLY_BYTES_MAX {
        return Err(std::io::Error::other("the login reply is too large"));
    }
    let mut body = vec![0u8; usize::try_from(size).unwrap_or(0)];
    stream.read_exact(&mut body).await?;
    match body.get(1) {
        Some(0 | 52) => Ok(()),
        Some(code) => Err(std::io::Error::other(format!(
            "the server refused the login of {}: result code {code}",
            login.user
        ))),
        None => Err(std::io::Error::other("the login reply is too short")),
    }
}

/// Sends AUTH on a new Redis connection; the server must answer OK.
async fn authenticate(stream: &mut TcpStream, login: &Login) -> std::io::Result<()> {
    let words: [&[u8]; 3] = [b"AUTH", login.user.as_bytes(), login.password.as_bytes()];
    one_command(stream, &words).await?.map_err(|error| {
        std::io::Error::other(format!(
            "the server refused AUTH of {}: {error}",
            login.user
        ))
    })
}

/// Sends one command on a new Redis connection and reads its reply: `Ok(Err(text))` when it
/// is an error.
async fn one_command(
    stream: &mut TcpStream,
    words: &[&[u8]],
) -> std::io::Result<Result<(), String>> {
    let mut request = Vec::new();
    wire_resp::encode_command(&mut request, words);
    stream.write_all(&request).await?;
    let mut reply = Vec::with_capacity(4096);
    loop {
        if stream.read_buf(&mut reply).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        match wire_resp::decode_reply(&reply) {
            Ok(Some((wire_resp::Reply::Error(error), _))) => {
                return Ok(Err(String::from_utf8_lossy(error).into_owned()));
            }
            Ok(Some(_)) => return Ok(Ok(())),
            Ok(None) if reply.len() < SETUP_REPLY_BYTES_MAX => reply.reserve(4096),
            _ => return Err(std::io::Error::other("a reply that is not RESP")),
        }
    }
}

/// The largest reply to AUTH or HELLO accepted.
const SETUP_REPLY_BYTES_MAX: usize = 64 * 1024;

/// The largest login reply accepted (a token and its TTL take about a hundred bytes).
const LOGIN_REPLY_BYTES_MAX: u64 = 16 * 1024;

/// Opens a connection to `address`: no Nagle delay, a login where one is given, and `HELLO 3` first when RESP3 is asked
/// for.
async fn open_connection(address: SocketAddr, target: &Target) -> std::io::Result<TcpStream> {
    let mut stream = TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    match (&target.login, target.protocol) {
        (Some(login), Protocol::Aerospike) => log_in(&mut stream, login).await?,
        (Some(login), Protocol::Redis) => authenticate(&mut stream, login).await?,
        (None, _) => {}
    }
    if target.protocol == Protocol::Redis && target.resp3 {
        let words: [&[u8]; 2] = [b"HELLO", b"3"];
        one_command(&mut stream, &words)
            .await?
            .map_err(|_| std::io::Error::other("the server refused HELLO 3"))?;
    }
    Ok(stream)
}
