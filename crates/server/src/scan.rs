//! Partition scans (a query with no digest and no index range) and secondary-index queries
//! (with an INDEX_RANGE), answered by scan threads.
//!
//! A query walks, in each partition, the index's (value, digest) entries in the range instead
//! of the records, and resumes after the (BVAL_ARRAY value, DIGEST_ARRAY digest) the client
//! last received; each record it returns carries its index value in a BVAL_ARRAY field.
//!
//! The request names partitions to scan from the start (PID_ARRAY) and partitions to resume
//! strictly after a digest (DIGEST_ARRAY). Scan threads (`single-scan-threads`, settable at
//! runtime) take partitions from a shared list and walk each in digest order, a piece of at most
//! `PIECE_ENTRIES` index entries per partition lock, encoding records straight into ~128 KiB
//! protos that a bounded channel carries to the connection's task.
//!
//! An aggregation (a stream UDF, UDF_OP 1) walks the same partitions, each one a run of the
//! stream function whose values go out in `SUCCESS` bins (see [`aggregate`]).
//!
//! MAX_RECORDS is spread across partitions as Aerospike does: each partition first gives at
//! most `ceil(max / partitions)` records; partitions cut short are continued afterwards while the
//! total stays below the maximum. So a scan that returns fewer records than its maximum has
//! walked every partition to the end, which is what clients assume when they paginate.
//!
//! Invariants:
//! - One thread walks a partition at a time, and its records reach the channel in digest order.
//! - No more than MAX_RECORDS records are sent: each is claimed before it is encoded.
//! - The final LAST message goes out only after every scan thread has exited (the channel
//!   closes when the last sender is dropped). A query of every partition in index order that
//!   wants few records (`INLINE_RECORDS_MAX`, or the client's short-query flag), unthrottled,
//!   runs inline on the connection's task instead: no thread, and its reply goes out with the
//!   LAST message in one write.
//! - A departed client or an abort stops every thread at its next piece; nothing waits forever
//!   on a full channel because dropping the receiver fails the blocked send.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use engine::{
    Acks, BinRef, Deadline, EditRequest, Expression, IndexCollection, IndexKey, IndexKind,
    IndexSource, KeyRange, Namespace, Origin, PartitionRole, QueryFilter, ReplySink, ScanOutcome,
    ScanScope, ScannedRecord, SecondaryIndex,
};
use model::{Digest, OpCode, PARTITION_COUNT, PartitionId, ResultCode, TtlRequest};
use tokio::sync::mpsc;
use wire_aerospike::{Message, MessageHeader, ScanFields, field_type, info1, info2, info3};

use crate::jobs::{JobState, ScanJob};
use crate::state::ServerState;
use crate::udf::{UdfCall, UdfOutcome};
use crate::unsupported::Unsupported;

mod aggregate;

use aggregate::{Aggregation, UDF_OP_AGGREGATE, aggregation};

/// Size at which a scan thread hands its proto to the connection (Aerospike's 128 KiB).
const CHUNK_BYTES: usize = 128 * 1024;
/// What an inline query's proto reserves first.
const INLINE_CHUNK_START_BYTES: usize = 8 * 1024;
/// Index entries examined per partition lock: a few microseconds of lock hold.
const PIECE_ENTRIES: usize = 256;
/// Protos each scan thread may have queued for the connection before it waits.
const QUEUED_CHUNKS_PER_THREAD: usize = 2;
/// A query that walks its index's order over every partition and wants at most this many
/// records (MAX_RECORDS) is answered inline, on the connection's task: starting a thread would
/// cost more than the walk. (The client's short-query flag asks for the same.)
const INLINE_RECORDS_MAX: u64 = 1000;
/// Bytes of records a query answered inline may produce before the rest of it moves to a
/// thread: an inline walk runs on the connection's task, so it must stay short.
const INLINE_BYTES_MAX: usize = 256 * 1024;
/// Pieces of index entries an inline walk may read before the rest moves to a thread (a query
/// restricted to a set may read many entries for few records).
const INLINE_PIECES_MAX: usize = 16;
/// Socket timeout when the client sends none (the clients' default).
const SOCKET_TIMEOUT_DEFAULT_MS: u32 = 30_000;
/// Records reached through a set index that justify one more scan thread.
const RECORDS_PER_SCAN_THREAD: u64 = 2_000;
/// Longest sleep between checks for an abort while throttled.
const THROTTLE_SLEEP_MAX: Duration = Duration::from_millis(50);

/// A running scan as its connection sees it: chunks to send, then a final message.
pub struct ScanStream {
    /// Chunks from the scan threads; `None` for a query answered inline.
    chunks: Option<mpsc::Receiver<Vec<u8>>>,
    /// Chunks already produced (a query answered inline), sent before any from `chunks`.
    ready: std::collections::VecDeque<Vec<u8>>,
    job: Arc<ScanJob>,
    namespace: Arc<Namespace>,
    state: Arc<ServerState>,
    /// How long one chunk may take to reach the client before the scan is abandoned.
    pub write_timeout: Duration,
}

impl ScanStream {
    /// The next chunk of complete proto frames; `None` once every scan thread has finished.
    pub async fn next_chunk(&mut self) -> Option<Vec<u8>> {
        if let Some(chunk) = self.ready.pop_front() {
            return Some(chunk);
        }
        match &mut self.chunks {
            Some(chunks) => chunks.recv().await,
            None => None,
        }
    }

    /// The chunks a query answered inline produced, to send before any from the threads.
    pub fn take_ready(&mut self) -> Vec<Vec<u8>> {
        self.ready.drain(..).collect()
    }

    /// Whether scan threads produce (part of) the reply. Without them (a query answered
    /// inline, nothing left to wait for), the connection sends the ready chunks with the LAST
    /// message in one write.
    pub fn has_threads(&self) -> bool {
        self.chunks.is_some()
    }

    /// Appends the final LAST message (with the scan's outcome) to `out`.
    pub fn finish(self, out: &mut Vec<u8>) {
        let (state, code, outcome) = if self.job.failed() {
            // Aerospike ends a failed aggregation with result 1; every client reports the
            // FAILURE bin sent before, and a raw reader of this code learns the UDF failed.
            (
                JobState::AbandonedUnknown,
                ResultCode::UdfBadResponse,
                ScanOutcome::Failed,
            )
        } else if self.job.timed_out() {
            (
                JobState::TimedOut,
                ResultCode::Timeout,
                ScanOutcome::Aborted,
            )
        } else if self.job.abort_requested() {
            (
                JobState::UserAborted,
                ResultCode::QueryAborted,
                ScanOutcome::Aborted,
            )
        } else {
            (JobState::Complete, ResultCode::Ok, ScanOutcome::Complete)
        };
        if self.job.finish(state) {
            self.namespace.count_scan(outcome);
            if state == JobState::TimedOut {
                self.state
                    .scan_jobs
                    .timeouts
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        crate::dispatch::write_stream_error(out, code);
    }

    /// Stops the scan because its client is gone, stopped reading for longer than the socket
    /// timeout (`timed_out`), or the server is shutting down. Aerospike counts these as errors.
    pub fn abandon(self, timed_out: bool) {
        self.job.request_abort();
        let state = if timed_out {
            JobState::AbandonedTimeout
        } else {
            JobState::AbandonedError
        };
        if self.job.finish(state) {
            self.namespace.count_scan(ScanOutcome::Failed);
        }
    }
}

/// Which bins each record carries.
#[derive(Debug)]
enum BinSelection {
    All,
    NoBins,
    Named(Vec<Vec<u8>>),
}

impl BinSelection {
    /// Aerospike skips a record that has none of the projected bins.
    fn wants(&self, record: &ScannedRecord<'_>) -> bool {
        match self {
            BinSelection::All | BinSelection::NoBins => true,
            BinSelection::Named(names) => record
                .bins()
                .iter()
                .any(|bin| names.iter().any(|n| n == bin.name)),
        }
    }
}

/// A partition to walk, from the start or after a digest.
#[derive(Clone, Debug)]
struct PartitionWork {
    partition: PartitionId,
    after: Option<Digest>,
    /// For a query: the index value `after` was returned with.
    after_key: Option<IndexKey>,
}

/// The partitions a scan walks.
enum WorkList {
    /// Every partition, from its start, in order: what clients send for every first page,
    /// kept without a list (a short query would otherwise spend more building and dropping
    /// 4096 items than reading its records).
    Every,
    /// These, each at most once.
    Listed(Vec<PartitionWork>),
}

impl WorkList {
    fn len(&self) -> usize {
        match self {
            WorkList::Every => PARTITION_COUNT,
            WorkList::Listed(work) => work.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Item `index` of the list.
    fn get(&self, index: usize) -> Option<PartitionWork> {
        match self {
            WorkList::Every => (index < PARTITION_COUNT).then(|| PartitionWork {
                partition: PartitionId(u16::try_from(index).expect("below 4096")),
                after: None,
                after_key: None,
            }),
            WorkList::Listed(work) => work.get(index).cloned(),
        }
    }

    /// Per partition, whether it is listed; `None` when every one is.
    fn wanted(&self) -> Option<Vec<bool>> {
        let WorkList::Listed(work) = self else {
            return None;
        };
        let mut wanted = vec![false; PARTITION_COUNT];
        for item in work {
            wanted[item.partition.index()] = true;
        }
        Some(wanted)
    }
}

/// What a secondary-index query reads.
struct IndexQuery {
    index: Arc<SecondaryIndex>,
    /// The values wanted: one range, or a geo query's cell ranges and geometry.
    range: QueryFilter,
    /// Records must be in this set (the index may cover the whole namespace).
    set_name: Option<Vec<u8>>,
    /// Whether no partition resumes: then one walk of the index's namespace-wide order serves
    /// the query, in index order (see [`Worker::walk_ordered`]).
    ordered: bool,
}

/// What every scan thread of one scan shares.
struct ScanShared {
    namespace: Arc<Namespace>,
    namespace_name: Vec<u8>,
    scope: ScanScope,
    bins: BinSelection,
    work: WorkList,
    next_work: AtomicUsize,
    max_records: u64,
    quota_per_partition: Option<u64>,
    claimed: AtomicU64,
    job: Arc<ScanJob>,
    query: Option<IndexQuery>,
    /// The client's total timeout, if it sent one: threads stop at their next piece after it.
    deadline: Option<Instant>,
    /// The filter expression (FILTER_EXP): records it does not pass are skipped.
    filter: Option<Expression>,
    /// For a background job: what it writes to each record it selects.
    background: Option<Background>,
    /// For an aggregation: the stream UDF each partition's records go through.
    aggregation: Option<Aggregation>,
}

/// What a background job (a query or scan with write ops, or with a background UDF) writes,
/// and who finishes it.
///
/// Invariant: `holds` counts the job's running threads plus one for the thread starting them;
/// whoever releases the last hold finishes the job, so it ends once, after every write.
struct Background {
    write: BackgroundWrite,
    state: Arc<ServerState>,
    holds: AtomicUsize,
}

/// What a background job does to each record it selects.
enum BackgroundWrite {
    /// The message's write ops under its write policy (the body is kept and its ops read again
    /// for each record).
    Ops { body: Vec<u8> },
    /// A record UDF, with the TTL the message asks for.
    Udf(UdfCall, TtlRequest),
}

/// What a background job's write did to one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    Succeeded,
    /// The filter expression left the record out (it changed since it was selected).
    Filtered,
    Failed,
}

impl Written {
    /// A write's result, as the job counts it.
    fn of(result: Result<(), ResultCode>) -> Written {
        match result {
            Ok(()) => Written::Succeeded,
            Err(ResultCode::FilteredOut) => Written::Filtered,
            Err(_) => Written::Failed,
        }
    }
}

/// A reply sink that keeps nothing: a background write answers no one.
struct Discard;

impl ReplySink for Discard {
    fn bin(&mut self, _op_code: OpCode, _bin: BinRef<'_>) {}
}

/// Validates a scan request and starts its threads.
///
/// # Errors
/// The result code to answer with, before any record is sent.
pub fn start(
    state: &Arc<ServerState>,
    message: &Message<'_>,
    body: &[u8],
) -> Result<Option<ScanStream>, ResultCode> {
    let fields = &message.fields;
    let scan_fields = &fields.scan;
    let namespace_name = fields.namespace.ok_or(ResultCode::Namespace)?;
    let namespace = state
        .namespace_arc(namespace_name)
        .ok_or(ResultCode::Namespace)?
        .clone();
    let udf_op = udf_op(message)?;
    if let Some(kind) = unsupported_kind(message) {
        return Err(state.unsupported.refuse(kind));
    }
    if scan_fields.bin_list.is_some() {
        // Pre-6.0 projection: the current protocol sends READ ops instead.
        return Err(ResultCode::Parameter);
    }
    let set_name = fields.set.unwrap_or_default();
    let filter = fields
        .filter_expression
        .map(Expression::parse_filter)
        .transpose()?;
    let aggregation = aggregation(state, message, udf_op)?;
    let mut query = index_query(&namespace, scan_fields, set_name)?;
    if let (Some(query), Some(_)) = (&mut query, &aggregation) {
        // Each partition is one run of the stream UDF, as in Aerospike: no namespace-wide walk.
        query.ordered = false;
    }
    let is_background = is_background(message);
    let unlisted = scan_fields.partition_ids.is_none() && scan_fields.resume_digests.is_none();
    let work = if (is_background || aggregation.is_some()) && unlisted {
        // Clients send a background job (and an aggregation) to every node without
        // partitions: each node covers the partitions it masters.
        WorkList::Every
    } else {
        partition_work(scan_fields, query.as_ref()).map_err(|code| match code {
            ResultCode::UnsupportedFeature => state.unsupported.refuse(Unsupported::LegacyScan),
            other => other,
        })?
    };
    let background = background_write(message, body)?;
    let bins = match (&background, &aggregation) {
        (Some(_), _) => BinSelection::NoBins,
        // A stream UDF sees whole records, whatever the message selects.
        (None, Some(_)) => BinSelection::All,
        (None, None) => bin_selection(message)?,
    };
    // Aerospike's aggregations read every selected record: MAX_RECORDS does not apply.
    let max_records = match aggregation {
        Some(_) => 0,
        None => read_u64(scan_fields.max_records)?.unwrap_or(0),
    };
    let records_per_second = read_u32(scan_fields.records_per_second)?.unwrap_or(0);
    let socket_timeout_ms = read_u32(scan_fields.socket_timeout)?
        .filter(|ms| *ms > 0)
        .unwrap_or(SOCKET_TIMEOUT_DEFAULT_MS);
    let task_id = read_u64(scan_fields.task_id)?.unwrap_or(0);
    // Aerospike gives scans and queries no deadline of its own: only the client's (whose
    // timeout, for a background job, is for the answer that it started).
    let total_timeout_ms = match background {
        Some(_) => 0,
        None => message.header.transaction_ttl,
    };
    let deadline = (total_timeout_ms > 0)
        .then(|| Instant::now() + Duration::from_millis(u64::from(total_timeout_ms)));
    let job_type = match (&background, &aggregation) {
        (None, None) => "basic",
        (None, Some(_)) => "aggregation",
        (Some(BackgroundWrite::Ops { .. }), _) => "background-ops",
        (Some(BackgroundWrite::Udf(..)), _) => "background-udf",
    };
    let job = Arc::new(
        ScanJob::new(
            task_id,
            namespace.name().to_owned(),
            String::from_utf8_lossy(set_name).into_owned(),
            work.len(),
            records_per_second,
        )
        .with_type(job_type),
    );
    let quota_per_partition =
        (max_records > 0 && !work.is_empty()).then(|| max_records.div_ceil(work.len() as u64));
    let scope = match &query {
        Some(query) => namespace.index_scope(&query.index),
        None => namespace.scan_scope(set_name),
    };
    if let Some(query) = &query {
        query.index.count_query();
    }
    let thread_count = match &query {
        Some(query) if query.ordered => 1,
        _ => scan_thread_count(
            state.scan_threads.load(Ordering::Relaxed),
            work.len(),
            namespace.set_index_scan_size(scope),
        ),
    };
    let shared = Arc::new(ScanShared {
        scope,
        namespace: namespace.clone(),
        namespace_name: namespace_name.to_vec(),
        bins,
        work,
        next_work: AtomicUsize::new(0),
        max_records,
        quota_per_partition,
        claimed: AtomicU64::new(0),
        job: job.clone(),
        query,
        deadline,
        filter,
        background: background.map(|write| Background {
            write,
            state: state.clone(),
            holds: AtomicUsize::new(1),
        }),
        aggregation,
    });
    state.scan_jobs.register(job.clone());
    if shared.background.is_some() {
        start_background(&shared, thread_count, records_per_second);
        return Ok(None);
    }
    let short = message.header.info1 & info1::SHORT_QUERY != 0
        || (1..=INLINE_RECORDS_MAX).contains(&max_records);
    let inline = shared.query.as_ref().is_some_and(|q| q.ordered)
        && matches!(shared.work, WorkList::Every)
        && short
        && shared.aggregation.is_none();
    let write_timeout = Duration::from_millis(u64::from(socket_timeout_ms));
    let mut stream = ScanStream {
        chunks: None,
        ready: std::collections::VecDeque::new(),
        job: job.clone(),
        namespace: namespace.clone(),
        state: state.clone(),
        write_timeout,
    };
    let mut resume = Resume::AtStart;
    if inline && records_per_second == 0 {
        let mut worker = Worker::new(&shared, Sink::Inline(Vec::new()), 0);
        let spilled = worker.run_inline();
        stream.ready = worker.sink.into_kept().into();
        match spilled {
            None => return Ok(Some(stream)),
            Some(after) => resume = Resume::After(after),
        }
    }
    let thread_count = match resume {
        Resume::AtStart => thread_count,
        Resume::After(_) => 1,
    };
    let (sender, chunks) = mpsc::channel(thread_count * QUEUED_CHUNKS_PER_THREAD);
    if let Err(code) = spawn_threads(&shared, thread_count, &sender, records_per_second, resume) {
        job.finish(JobState::AbandonedError);
        namespace.count_scan(ScanOutcome::Failed);
        return Err(code);
    }
    stream.chunks = Some(chunks);
    Ok(Some(stream))
}

/// What a background job writes, if the message asks for one: info2 WRITE with write ops, or
/// a UDF with UDF_OP background (a UDF otherwise was refused before).
///
/// # Errors
/// PARAMETER for a job without ops, with a read op, with a malformed write policy, or with
/// malformed UDF fields.
fn background_write(
    message: &Message<'_>,
    body: &[u8],
) -> Result<Option<BackgroundWrite>, ResultCode> {
    if !is_background(message) {
        return Ok(None);
    }
    if message.fields.udf {
        let call = UdfCall::from_fields(&message.fields.udf_call)?;
        let ttl = TtlRequest::from_wire(message.header.record_ttl)?;
        return Ok(Some(BackgroundWrite::Udf(call, ttl)));
    }
    let mut ops = message.ops().peekable();
    if ops.peek().is_none() || ops.any(|op| op.code == OpCode::Read) {
        return Err(ResultCode::Parameter);
    }
    // The write policy must make a request: a malformed TTL is refused now, not per record.
    crate::dispatch::write_request(
        &message.header,
        Digest([0; Digest::SIZE_BYTES]),
        b"",
        None,
        Deadline::NONE,
    )?;
    Ok(Some(BackgroundWrite::Ops {
        body: body.to_vec(),
    }))
}

/// Starts a background job's threads; the job runs on after the client was answered, and the
/// last thread to end finishes it.
fn start_background(shared: &Arc<ScanShared>, thread_count: usize, records_per_second: u32) {
    let background = shared.background.as_ref().expect("a background job");
    let resume = Resume::AtStart;
    for thread_index in 0..thread_count {
        let shared_for_thread = shared.clone();
        background.holds.fetch_add(1, Ordering::AcqRel);
        shared.job.active_threads.fetch_add(1, Ordering::Relaxed);
        let resume = resume.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("bg-{}-{thread_index}", shared.job.task_id))
            .spawn(move || {
                let shared = shared_for_thread;
                crate::long_requests::lower_this_thread_priority();
                let mut worker = Worker::new(&shared, Sink::Discard, records_per_second);
                match resume {
                    Resume::AtStart => worker.run(),
                    Resume::After(after) => worker.run_ordered_after(after),
                }
                shared.job.active_threads.fetch_sub(1, Ordering::Relaxed);
                release_background(&shared);
            });
        if spawned.is_err() {
            // Out of threads: the job runs on those already started, or ends if none.
            shared.job.active_threads.fetch_sub(1, Ordering::Relaxed);
            background.holds.fetch_sub(1, Ordering::AcqRel);
            break;
        }
    }
    release_background(shared);
}

/// Releases one hold on a background job; the last finishes it.
fn release_background(shared: &ScanShared) {
    let Some(background) = &shared.background else {
        return;
    };
    if background.holds.fetch_sub(1, Ordering::AcqRel) != 1 {
        return;
    }
    let (state, outcome) = if shared.job.abort_requested() {
        (JobState::UserAborted, ScanOutcome::Aborted)
    } else {
        (JobState::Complete, ScanOutcome::Complete)
    };
    if shared.job.finish(state) {
        shared.namespace.count_scan(outcome);
    }
}

/// Where the scan threads start: at the beginning, or (an ordered query that outgrew its
/// inline walk) after the index entry the inline walk reached.
#[derive(Clone)]
enum Resume {
    AtStart,
    After((IndexKey, Digest)),
}

fn spawn_threads(
    shared: &Arc<ScanShared>,
    thread_count: usize,
    sender: &mpsc::Sender<Vec<u8>>,
    records_per_second: u32,
    resume: Resume,
) -> Result<(), ResultCode> {
    for thread_index in 0..thread_count {
        let shared = shared.clone();
        let sender = sender.clone();
        let resume = resume.clone();
        shared.job.active_threads.fetch_add(1, Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name(format!("scan-{}-{thread_index}", shared.job.task_id))
            .spawn(move || {
                crate::long_requests::lower_this_thread_priority();
                let mut worker = Worker::new(&shared, Sink::Channel(sender), records_per_second);
                match resume {
                    Resume::AtStart => worker.run(),
                    Resume::After(after) => worker.run_ordered_after(after),
                }
                shared.job.active_threads.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            // Out of threads: the scan runs on those already started, or fails if none.
            if thread_index == 0 {
                return Err(ResultCode::Unknown);
            }
            break;
        }
    }
    Ok(())
}

/// Walks the next piece of `work`'s partition after where it stopped: the scan's records, or
/// the query's index entries (each record visited with its index value), at most
/// `PIECE_ENTRIES` of them; moves `work` on and returns whether the partition is exhausted.
fn walk_piece(
    shared: &ScanShared,
    work: &mut PartitionWork,
    mut visit: impl FnMut(&ScannedRecord<'_>, Option<&IndexKey>) -> bool,
) -> bool {
    match &shared.query {
        None => {
            let end = shared.namespace.scan_piece(
                work.partition,
                shared.scope,
                work.after.as_ref(),
                PIECE_ENTRIES,
                |record| visit(record, None),
            );
            work.after = end.last;
            end.exhausted
        }
        Some(query) => {
            let after = work.after.zip(work.after_key.clone()).map(|(d, k)| (k, d));
            let end = shared.namespace.query_piece(
                work.partition,
                &query.index,
                &query.range,
                after.as_ref(),
                PIECE_ENTRIES,
                |record, key| visit(record, Some(key)),
            );
            (work.after_key, work.after) = end.last.unzip();
            end.exhausted
        }
    }
}

/// Threads for one scan: `single-scan-threads`, but no more than the partitions to walk, and
/// one per `RECORDS_PER_SCAN_THREAD` records when the set index serves a small set. Starting a
/// thread costs about 50 µs, as much as reaching a few hundred records through the index:
/// measured, a 100-record set scanned in 0.73 ms on 4 threads and 1.13 ms on 16.
fn scan_thread_count(configured: usize, partitions: usize, indexed_records: Option<u64>) -> usize {
    let by_size = indexed_records.map_or(usize::MAX, |records| {
        usize::try_from(records.div_ceil(RECORDS_PER_SCAN_THREAD)).unwrap_or(usize::MAX)
    });
    configured.min(partitions).min(by_size).max(1)
}

/// The query an INDEX_RANGE asks for, if any: its index (by INDEX_NAME, else by set, type and
/// what it reads: the INDEX_EXPRESSION, or the bin with its INDEX_CONTEXT if any) and range.
///
/// # Errors
/// PARAMETER for a malformed range or INDEX_TYPE, INDEX_NOT_FOUND (201) with no such index
/// (of that collection type), INDEX_NOT_READABLE (203) while it builds.
fn index_query(
    namespace: &Namespace,
    fields: &ScanFields<'_>,
    set_name: &[u8],
) -> Result<Option<IndexQuery>, ResultCode> {
    let Some(range_field) = fields.index_range else {
        return Ok(None);
    };
    let collection = match fields.index_type {
        None => IndexCollection::Default,
        Some(&[byte]) => IndexCollection::from_wire(byte).ok_or(ResultCode::Parameter)?,
        Some(_) => return Err(ResultCode::Parameter),
    };
    let filter = parse_index_range(range_field).ok_or(ResultCode::Parameter)?;
    let by_name = fields
        .index_name
        .map(|name| std::str::from_utf8(name).map_err(|_| ResultCode::Parameter))
        .transpose()?;
    let index = match by_name {
        Some(name) => namespace.index_named(name),
        None => {
            let source = query_source(fields, filter.bin)?;
            namespace.index_for(set_name, &source, filter.kind, collection)
        }
    }
    .filter(|index| {
        let definition = index.definition();
        definition.kind == filter.kind && definition.collection == collection
    })
    .ok_or(ResultCode::IndexNotFound)?;
    if !index.is_ready() {
        return Err(ResultCode::IndexNotReadable);
    }
    Ok(Some(IndexQuery {
        index,
        range: filter.range,
        set_name: (!set_name.is_empty()).then(|| set_name.to_vec()),
        ordered: fields.resume_digests.is_none(),
    }))
}

/// What the index a query names by its definition reads: the INDEX_EXPRESSION, else the
/// filter's bin, with the INDEX_CONTEXT if there is one (both compared in canonical form).
///
/// # Errors
/// PARAMETER for a context or expression that is not one msgpack value.
fn query_source(fields: &ScanFields<'_>, bin: Vec<u8>) -> Result<IndexSource, ResultCode> {
    let canonical =
        |packed: &[u8]| engine::sindex_canonical(packed).map_err(|_| ResultCode::Parameter);
    Ok(match (fields.index_expression, fields.index_context) {
        (Some(expression), _) => IndexSource::Expression(canonical(expression)?),
        (None, Some(context)) => IndexSource::BinContext {
            bin,
            context: canonical(context)?,
        },
        (None, None) => IndexSource::Bin(bin),
    })
}

/// An INDEX_RANGE field, decoded.
#[derive(Debug, PartialEq, Eq)]
struct IndexFilter {
    bin: Vec<u8>,
    kind: IndexKind,
    range: QueryFilter,
}

/// Decodes `n_filters (1) | bin_len | bin | particle type | begin_len (u32 BE) | begin |
/// end_len | end`. Integers are i64 big-endian with begin <= end. Strings: the official
/// clients send an equality as begin = end; Osprey also takes a range `begin..=end` (begin <=
/// end), and an empty end after a non-empty begin as no upper bound. GeoJSON (23): the query's
/// region or point as begin (the clients send it as end too), for a geo2dsphere index: a point
/// finds the regions containing it, a region (polygon, multipolygon, AeroCircle) the points
/// within it. The bin may be empty when INDEX_NAME names the index (a user-key index has no
/// bin).
fn parse_index_range(field: &[u8]) -> Option<IndexFilter> {
    let (&count, rest) = field.split_first()?;
    if count != 1 {
        return None;
    }
    let (&bin_len, rest) = rest.split_first()?;
    let (bin, rest) = rest.split_at_checked(usize::from(bin_len))?;
    let (&particle_type, rest) = rest.split_first()?;
    let (begin, rest) = length_prefixed(rest)?;
    let (end, rest) = length_prefixed(rest)?;
    if !rest.is_empty() {
        return None;
    }
    let (kind, range) = match particle_type {
        1 => {
            let begin = i64::from_be_bytes(begin.try_into().ok()?);
            let end = i64::from_be_bytes(end.try_into().ok()?);
            let range = KeyRange::inclusive(IndexKey::Int(begin), IndexKey::Int(end));
            (IndexKind::Numeric, range)
        }
        3 if end.is_empty() && !begin.is_empty() => {
            let range = KeyRange {
                begin: Bound::Included(IndexKey::Str(begin.into())),
                end: Bound::Unbounded,
            };
            (IndexKind::String, range)
        }
        3 => {
            let range = KeyRange::inclusive(IndexKey::Str(begin.into()), IndexKey::Str(end.into()));
            (IndexKind::String, range)
        }
        // A blob: equality with `begin`, as Aerospike reads it.
        4 => {
            let range =
                KeyRange::inclusive(IndexKey::Str(begin.into()), IndexKey::Str(begin.into()));
            (IndexKind::Blob, range)
        }
        23 => {
            let range = QueryFilter::geo(begin).ok()?;
            return Some(IndexFilter {
                bin: bin.to_vec(),
                kind: IndexKind::Geo2dSphere,
                range,
            });
        }
        _ => return None,
    };
    if range.is_empty() {
        return None;
    }
    Some(IndexFilter {
        bin: bin.to_vec(),
        kind,
        range: range.into(),
    })
}

fn length_prefixed(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = bytes.split_at_checked(4)?;
    let len = u32::from_be_bytes(len.try_into().ok()?);
    rest.split_at_checked(usize::try_from(len).ok()?)
}

/// The index value a record goes out with in BVAL_ARRAY, and comes back with on resume: the
/// integer for a numeric index; 0 for a string index, whose queries match one value.
fn bval_of(key: &IndexKey) -> i64 {
    match key {
        IndexKey::Int(value) => *value,
        IndexKey::Str(_) => 0,
    }
}

/// UDF_OP of a background UDF query or scan (Aerospike's `AS_UDF_OP_BACKGROUND`).
const UDF_OP_BACKGROUND: u8 = 2;

/// The UDF_OP of a message with UDF fields: aggregate or background.
///
/// # Errors
/// PARAMETER for UDF fields without a UDF_OP, or with another one (as Aerospike answers).
fn udf_op(message: &Message<'_>) -> Result<Option<u8>, ResultCode> {
    let fields = &message.fields;
    if !fields.udf {
        return Ok(None);
    }
    match fields.udf_call.op {
        Some(&[op @ (UDF_OP_AGGREGATE | UDF_OP_BACKGROUND)]) => Ok(Some(op)),
        _ => Err(ResultCode::Parameter),
    }
}

/// Whether a scan or query message asks for a background job: a UDF with UDF_OP background
/// (which the Go client sends without the WRITE flag), or info2 WRITE without a UDF (ops).
fn is_background(message: &Message<'_>) -> bool {
    let fields = &message.fields;
    if fields.udf {
        return fields.udf_call.op == Some(&[UDF_OP_BACKGROUND]);
    }
    message.header.info2 & info2::WRITE != 0
}

/// Whether a scan or query message asks for an aggregation (UDF_OP aggregate).
fn is_aggregation(message: &Message<'_>) -> bool {
    let fields = &message.fields;
    fields.udf && fields.udf_call.op == Some(&[UDF_OP_AGGREGATE])
}

/// What a scan asks for that Osprey does not implement yet, if anything.
fn unsupported_kind(message: &Message<'_>) -> Option<Unsupported> {
    let node_wide = is_background(message) || is_aggregation(message);
    if !node_wide && message.header.info3 & info3::PARTITION_DONE == 0 {
        // Aerospike 8 serves only the partition protocol, whose clients always set this flag.
        Some(Unsupported::LegacyScan)
    } else {
        None
    }
}

/// The partitions to walk: PID_ARRAY from the start, DIGEST_ARRAY after its digest (and, for
/// a query, after the BVAL_ARRAY value at the same position). Aerospike requires at least one
/// of them (a scan without is an old client's: UNSUPPORTED_FEATURE) and each partition at most
/// once.
fn partition_work(
    fields: &ScanFields<'_>,
    query: Option<&IndexQuery>,
) -> Result<WorkList, ResultCode> {
    if fields.partition_ids.is_none() && fields.resume_digests.is_none() {
        return Err(ResultCode::UnsupportedFeature);
    }
    let ids = fields.partition_ids.unwrap_or_default();
    let digests = fields.resume_digests.unwrap_or_default();
    if !ids.len().is_multiple_of(2) || !digests.len().is_multiple_of(Digest::SIZE_BYTES) {
        return Err(ResultCode::Parameter);
    }
    if digests.is_empty() && is_every_partition_in_order(ids) {
        // What clients send for every first page: no lookups, no duplicates to check.
        return Ok(WorkList::Every);
    }
    let mut seen = vec![false; PARTITION_COUNT];
    let mut work = Vec::with_capacity(
        (ids.len() / 2 + digests.len() / Digest::SIZE_BYTES).min(PARTITION_COUNT),
    );
    let from_start = ids.chunks_exact(2).map(|pair| {
        let id = u16::from_le_bytes([pair[0], pair[1]]);
        (usize::from(id) < PARTITION_COUNT).then_some(PartitionWork {
            partition: PartitionId(id),
            after: None,
            after_key: None,
        })
    });
    let resume_keys = resume_keys(fields, query, digests.len() / Digest::SIZE_BYTES)?;
    let resumed = digests
        .chunks_exact(Digest::SIZE_BYTES)
        .zip(resume_keys)
        .map(|(bytes, after_key)| {
            Digest::from_slice(bytes).map(|digest| PartitionWork {
                partition: digest.partition_id(),
                after: Some(digest),
                after_key,
            })
        });
    if ids.is_empty() && digests.is_empty() {
        return Err(ResultCode::Parameter);
    }
    for item in from_start.chain(resumed) {
        let item = item.ok_or(ResultCode::Parameter)?;
        let seen_before = std::mem::replace(&mut seen[item.partition.index()], true);
        if seen_before {
            return Err(ResultCode::Parameter);
        }
        work.push(item);
    }
    Ok(WorkList::Listed(work))
}

/// Whether PID_ARRAY `ids` lists partitions 0 to 4095 in order.
fn is_every_partition_in_order(ids: &[u8]) -> bool {
    ids == EVERY_PARTITION_IN_ORDER
}

/// PID_ARRAY listing partitions 0 to 4095 in order (little-endian u16s): one comparison of
/// memory tells a first page from any other list.
const EVERY_PARTITION_IN_ORDER: &[u8; PARTITION_COUNT * 2] = &{
    let mut ids = [0u8; PARTITION_COUNT * 2];
    let mut index = 0;
    while index < PARTITION_COUNT {
        ids[index * 2] = (index & 0xff) as u8;
        ids[index * 2 + 1] = (index >> 8) as u8;
        index += 1;
    }
    ids
};

/// For each resumed partition, the index value its digest came with: from BVAL_ARRAY for a
/// numeric index, the queried value for a string equality; nothing for a scan.
///
/// # Errors
/// PARAMETER for a string range: BVAL_ARRAY carries integers only, so where a partition
/// stopped in a range of strings cannot be said (such queries read the index's order instead,
/// with no DIGEST_ARRAY, resuming from their last value).
fn resume_keys(
    fields: &ScanFields<'_>,
    query: Option<&IndexQuery>,
    resumed: usize,
) -> Result<Vec<Option<IndexKey>>, ResultCode> {
    let Some(query) = query else {
        return Ok(vec![None; resumed]);
    };
    if query.index.definition().kind == IndexKind::String {
        let single = query.range.single_range();
        return match single.map(|range| (&range.begin, &range.end)) {
            Some((Bound::Included(begin), Bound::Included(end))) if begin == end => {
                Ok(vec![Some(begin.clone()); resumed])
            }
            _ if resumed == 0 => Ok(Vec::new()),
            _ => Err(ResultCode::Parameter),
        };
    }
    let values = fields.resume_values.unwrap_or_default();
    if values.len() != resumed * 8 {
        return Err(ResultCode::Parameter);
    }
    Ok(values
        .chunks_exact(8)
        .map(|bytes| {
            let value = i64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            Some(IndexKey::Int(value))
        })
        .collect())
}

fn bin_selection(message: &Message<'_>) -> Result<BinSelection, ResultCode> {
    if message.header.info1 & info1::GET_NO_BINS != 0 {
        return Ok(BinSelection::NoBins);
    }
    let mut names = Vec::new();
    for op in message.ops() {
        if op.code != OpCode::Read {
            return Err(ResultCode::Parameter);
        }
        names.push(op.bin_name.to_vec());
    }
    Ok(if names.is_empty() {
        BinSelection::All
    } else {
        BinSelection::Named(names)
    })
}

fn read_u64(field: Option<&[u8]>) -> Result<Option<u64>, ResultCode> {
    field
        .map(|bytes| {
            <[u8; 8]>::try_from(bytes)
                .map(u64::from_be_bytes)
                .map_err(|_| ResultCode::Parameter)
        })
        .transpose()
}

fn read_u32(field: Option<&[u8]>) -> Result<Option<u32>, ResultCode> {
    field
        .map(|bytes| {
            <[u8; 4]>::try_from(bytes)
                .map(u32::from_be_bytes)
                .map_err(|_| ResultCode::Parameter)
        })
        .transpose()
}

/// A proto being filled with record messages.
struct Chunk {
    bytes: Vec<u8>,
    proto_start: usize,
    /// What each new proto reserves.
    reserve_bytes: usize,
    /// A background job's records selected in the current piece (digest, set), written once
    /// the piece has released its partition.
    pending: Vec<(Digest, Vec<u8>)>,
}

impl Chunk {
    /// A proto for a scan thread: room for a full chunk and the record that overflows it.
    fn for_thread() -> Chunk {
        Chunk::reserving(CHUNK_BYTES + 64 * 1024)
    }

    /// A proto for a query answered inline: most hold a few records, so it starts small (a
    /// full chunk's reservation cost more than such a query's walk) and grows as needed.
    fn for_inline() -> Chunk {
        Chunk::reserving(INLINE_CHUNK_START_BYTES)
    }

    fn reserving(reserve_bytes: usize) -> Chunk {
        let mut bytes = Vec::with_capacity(reserve_bytes);
        let proto_start = wire_aerospike::begin_proto(&mut bytes);
        Chunk {
            bytes,
            proto_start,
            reserve_bytes,
            pending: Vec::new(),
        }
    }

    fn has_records(&self) -> bool {
        self.bytes.len() > self.proto_start + wire_aerospike::PROTO_HEADER_SIZE_BYTES
    }

    fn is_full(&self) -> bool {
        self.bytes.len() >= CHUNK_BYTES
    }

    /// The finished proto, leaving a fresh one behind.
    fn take(&mut self) -> Vec<u8> {
        wire_aerospike::finish_proto(
            &mut self.bytes,
            self.proto_start,
            wire_aerospike::ProtoType::Message,
        );
        let pending = std::mem::take(&mut self.pending);
        let taken = std::mem::replace(self, Chunk::reserving(self.reserve_bytes));
        self.pending = pending;
        taken.bytes
    }
}

/// Paces records at `records_per_second` from the job's start (0 = unthrottled).
struct Throttle {
    records_per_second: u32,
    started: Instant,
}

impl Throttle {
    fn new(records_per_second: u32, started: Instant) -> Throttle {
        Throttle {
            records_per_second,
            started,
        }
    }

    /// When record number `sent` may go, if that is later than now.
    fn wait_until(&self, sent: u64) -> Option<Instant> {
        if self.records_per_second == 0 {
            return None;
        }
        let due_ns = u128::from(sent) * 1_000_000_000 / u128::from(self.records_per_second);
        let due = self.started + Duration::from_nanos(u64::try_from(due_ns).unwrap_or(u64::MAX));
        (due > Instant::now()).then_some(due)
    }
}

/// Why a walk of one partition stopped.
enum WalkEnd {
    /// The partition is done, or was put aside for later; take the next one.
    Next,
    /// The scan is over for every thread: maximum reached, aborted or client gone.
    Stop,
}

/// One scan thread.
struct Worker<'s> {
    shared: &'s ScanShared,
    sink: Sink,
    chunk: Chunk,
    /// Partitions this thread cut short at their first-pass quota. The same thread continues
    /// them, so a partition's records reach the client in digest order (a record still in this
    /// thread's unsent proto must not be overtaken by a later one sent by another thread).
    leftovers: Vec<PartitionWork>,
    throttle: Throttle,
}

/// Where a worker's chunks go.
enum Sink {
    /// To the connection, from a scan thread.
    Channel(mpsc::Sender<Vec<u8>>),
    /// Kept, for a query answered inline on the connection's task.
    Inline(Vec<Vec<u8>>),
    /// Nowhere: a background job answers no one.
    Discard,
}

impl Sink {
    /// The chunks an inline sink kept (none for a channel).
    fn into_kept(self) -> Vec<Vec<u8>> {
        match self {
            Sink::Inline(kept) => kept,
            Sink::Channel(_) | Sink::Discard => Vec::new(),
        }
    }
}

impl<'s> Worker<'s> {
    fn new(shared: &'s ScanShared, sink: Sink, records_per_second: u32) -> Worker<'s> {
        let chunk = match sink {
            Sink::Channel(_) => Chunk::for_thread(),
            Sink::Inline(_) | Sink::Discard => Chunk::for_inline(),
        };
        Worker {
            shared,
            sink,
            chunk,
            leftovers: Vec::new(),
            throttle: Throttle::new(records_per_second, shared.job.started()),
        }
    }

    fn run(&mut self) {
        if let Some(aggregation) = &self.shared.aggregation {
            self.run_aggregation(aggregation);
            return;
        }
        if let Some(query) = self.shared.query.as_ref().filter(|q| q.ordered) {
            self.walk_ordered(query, None, usize::MAX);
            if self.chunk.has_records() {
                self.send_chunk();
            }
            return;
        }
        while let Some((work, quota)) = self.next_work() {
            if let WalkEnd::Stop = self.walk(work, quota) {
                break;
            }
        }
        if self.chunk.has_records() {
            self.send_chunk();
        }
    }

    /// Walks an ordered query on the connection's task for at most `INLINE_PIECES_MAX` pieces
    /// and `INLINE_BYTES_MAX` bytes; returns the entry to resume after when it stopped short.
    fn run_inline(&mut self) -> Option<(IndexKey, Digest)> {
        let query = self.shared.query.as_ref().filter(|q| q.ordered)?;
        let spilled = self.walk_ordered(query, None, INLINE_PIECES_MAX);
        if self.chunk.has_records() {
            self.send_chunk();
        }
        spilled
    }

    /// Continues an ordered query after `after`, on a scan thread.
    fn run_ordered_after(&mut self, after: (IndexKey, Digest)) {
        if let Some(query) = self.shared.query.as_ref().filter(|q| q.ordered) {
            self.walk_ordered(query, Some(after), usize::MAX);
        }
        if self.chunk.has_records() {
            self.send_chunk();
        }
    }

    /// Bytes of records this worker produced and has not handed to a channel.
    fn kept_bytes(&self) -> usize {
        let kept = match &self.sink {
            Sink::Inline(kept) => kept.iter().map(Vec::len).sum(),
            Sink::Channel(_) | Sink::Discard => 0,
        };
        kept + self.chunk.bytes.len()
    }

    /// First every requested partition with its quota, then the ones cut short, unbounded.
    fn next_work(&mut self) -> Option<(PartitionWork, Option<u64>)> {
        let shared = self.shared;
        let index = shared.next_work.fetch_add(1, Ordering::Relaxed);
        if let Some(work) = shared.work.get(index) {
            return Some((work, shared.quota_per_partition));
        }
        self.leftovers.pop().map(|work| (work, None))
    }

    fn stopping(&self) -> bool {
        self.shared.stopping()
    }

    fn walk(&mut self, mut work: PartitionWork, quota: Option<u64>) -> WalkEnd {
        let shared = self.shared;
        if shared.namespace.partition_role(work.partition).0 != PartitionRole::Master {
            // Not this node's to serve (a cluster whose map the client has not caught up
            // with): Aerospike's partition-done message with UNAVAILABLE, so that the client
            // asks the partition's master for it.
            write_partition_unavailable(&mut self.chunk.bytes, work.partition);
            shared.job.partitions_done.fetch_add(1, Ordering::Relaxed);
            return WalkEnd::Next;
        }
        let mut taken: u64 = 0;
        loop {
            if self.stopping() {
                return WalkEnd::Stop;
            }
            let mut quota_reached = false;
            let mut throttled_until = None;
            let (chunk, throttle) = (&mut self.chunk, &self.throttle);
            let mut take = |record: &ScannedRecord<'_>, bval: Option<i64>| {
                if quota.is_some_and(|quota| taken >= quota) {
                    quota_reached = true;
                    return false;
                }
                match shared.offer(chunk, throttle, record, bval) {
                    Offer::Taken => {
                        taken += 1;
                        true
                    }
                    Offer::Skipped => true,
                    Offer::Throttled(until) => {
                        throttled_until = Some(until);
                        false
                    }
                    Offer::MaxReached => false,
                }
            };
            let exhausted = walk_piece(shared, &mut work, |record, key| {
                take(record, key.map(bval_of))
            });
            self.write_pending();
            if (self.chunk.is_full() || throttled_until.is_some()) && !self.send_chunk() {
                return WalkEnd::Stop;
            }
            if quota_reached {
                self.leftovers.push(work);
                return WalkEnd::Next;
            }
            if exhausted {
                shared.job.partitions_done.fetch_add(1, Ordering::Relaxed);
                return WalkEnd::Next;
            }
            if let Some(until) = throttled_until {
                throttle_sleep(shared, until);
            }
        }
    }

    /// A query over every requested partition from its start: one walk of the index's
    /// namespace-wide order, so records go out in (value, digest) order and MAX_RECORDS keeps
    /// the smallest values. Runs on one thread.
    /// Walks the query's order from the start or after `after`, for at most `pieces_max`
    /// pieces and, answering inline, `INLINE_BYTES_MAX` bytes; returns where to resume when it
    /// stopped for either bound with entries left.
    fn walk_ordered(
        &mut self,
        query: &IndexQuery,
        mut after: Option<(IndexKey, Digest)>,
        pieces_max: usize,
    ) -> Option<(IndexKey, Digest)> {
        let shared = self.shared;
        let wanted = shared.work.wanted();
        let inline = matches!(self.sink, Sink::Inline(_));
        let mut pieces = 0;
        loop {
            if self.stopping() {
                return None;
            }
            if pieces == pieces_max || (inline && self.kept_bytes() >= INLINE_BYTES_MAX) {
                return after;
            }
            pieces += 1;
            let mut throttled_until = None;
            let (chunk, throttle) = (&mut self.chunk, &self.throttle);
            let end = shared.namespace.query_ordered_piece(
                &query.index,
                &query.range,
                after.as_ref(),
                PIECE_ENTRIES,
                |record, key| {
                    let partition = record.digest.partition_id().index();
                    if wanted.as_ref().is_some_and(|wanted| !wanted[partition]) {
                        return true;
                    }
                    match shared.offer(chunk, throttle, record, Some(bval_of(key))) {
                        Offer::Taken | Offer::Skipped => true,
                        Offer::Throttled(until) => {
                            throttled_until = Some(until);
                            false
                        }
                        Offer::MaxReached => false,
                    }
                },
            );
            after = end.last;
            self.write_pending();
            if (self.chunk.is_full() || throttled_until.is_some()) && !self.send_chunk() {
                return None;
            }
            if end.exhausted {
                let partitions = shared.work.len() as u64;
                shared
                    .job
                    .partitions_done
                    .fetch_add(partitions, Ordering::Relaxed);
                return None;
            }
            if let Some(until) = throttled_until {
                throttle_sleep(shared, until);
            }
        }
    }

    /// A background job: writes the records the last piece selected (outside its partition's
    /// lock), counting each in the job, until an abort.
    fn write_pending(&mut self) {
        let shared = self.shared;
        let Some(background) = &shared.background else {
            return;
        };
        let mut pending = std::mem::take(&mut self.chunk.pending);
        for (digest, set_name) in pending.drain(..) {
            if shared.job.abort_requested() {
                break;
            }
            let counter = match shared.write_record(background, digest, &set_name) {
                None => continue,
                Some(Written::Succeeded) => &shared.job.records_sent,
                Some(Written::Filtered) => &shared.job.records_filtered,
                Some(Written::Failed) => &shared.job.records_failed,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        self.chunk.pending = pending;
    }

    /// Hands the current proto to the connection; false if the connection is gone.
    fn send_chunk(&mut self) -> bool {
        deliver(&mut self.chunk, &mut self.sink, &self.shared.job)
    }
}

/// Hands `chunk`'s proto to `sink`, leaving a fresh one; false if the connection is gone
/// (the job is then aborted).
fn deliver(chunk: &mut Chunk, sink: &mut Sink, job: &ScanJob) -> bool {
    if !chunk.has_records() {
        return true;
    }
    let bytes = chunk.take();
    if let Sink::Discard = sink {
        return true;
    }
    job.bytes_sent
        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
    match sink {
        Sink::Channel(sender) => {
            if sender.blocking_send(bytes).is_err() {
                job.request_abort();
                return false;
            }
        }
        Sink::Inline(ready) => ready.push(bytes),
        Sink::Discard => {}
    }
    true
}

/// What became of a record offered to a scan's output.
enum Offer {
    /// Encoded into the chunk.
    Taken,
    /// Not wanted (no selected bin, or another set): go on.
    Skipped,
    /// Over the records-per-second rate: stop until then.
    Throttled(Instant),
    /// MAX_RECORDS were sent: stop.
    MaxReached,
}

fn throttle_sleep(shared: &ScanShared, until: Instant) {
    shared.job.throttled.fetch_add(1, Ordering::Relaxed);
    let now = Instant::now();
    std::thread::sleep(until.saturating_duration_since(now).min(THROTTLE_SLEEP_MAX));
}

impl ScanShared {
    /// Whether the scan is over for every thread: MAX_RECORDS reached, aborted, client gone,
    /// or past the client's total timeout (which this call notes).
    fn stopping(&self) -> bool {
        let max_reached =
            self.max_records > 0 && self.claimed.load(Ordering::Relaxed) >= self.max_records;
        if self
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            self.job.time_out();
        }
        max_reached || self.job.abort_requested()
    }

    /// Sends `record` (with `bval` for a query) if the scan wants it and may take it.
    fn offer(
        &self,
        chunk: &mut Chunk,
        throttle: &Throttle,
        record: &ScannedRecord<'_>,
        bval: Option<i64>,
    ) -> Offer {
        if !self.bins.wants(record) || !self.in_queried_set(record) || !self.passes(record) {
            return Offer::Skipped;
        }
        let sent = self.job.records_sent.load(Ordering::Relaxed);
        if let Some(until) = throttle.wait_until(sent) {
            return Offer::Throttled(until);
        }
        if !claim(self) {
            return Offer::MaxReached;
        }
        if self.background.is_some() {
            let set_name = record.set_name.unwrap_or_default().to_vec();
            chunk.pending.push((*record.digest, set_name));
            return Offer::Taken;
        }
        encode_record(
            &mut chunk.bytes,
            &self.namespace_name,
            record,
            &self.bins,
            bval,
        );
        self.job.records_sent.fetch_add(1, Ordering::Relaxed);
        Offer::Taken
    }

    /// Writes one record a background job selected, as a client's command would on this node
    /// (its replicas are sent the change; nobody waits for them). `None` for a record whose
    /// partition this node does not master: another node's job writes it.
    fn write_record(
        &self,
        background: &Background,
        digest: Digest,
        set_name: &[u8],
    ) -> Option<Written> {
        let namespace = &self.namespace;
        if namespace.partition_role(digest.partition_id()).0 != PartitionRole::Master {
            return None;
        }
        let mut acks = Acks::default();
        acks.set_commit_level_master(true);
        let result = match &background.write {
            BackgroundWrite::Ops { body } => write_ops(
                namespace,
                body,
                digest,
                set_name,
                self.filter.as_ref(),
                &mut acks,
            ),
            BackgroundWrite::Udf(call, ttl) => {
                let request = EditRequest {
                    digest,
                    set_name,
                    key: None,
                    filter: self.filter.as_ref(),
                    deadline: Deadline::NONE,
                    ttl: *ttl,
                };
                let modules = &background.state.udf;
                match crate::udf::apply_call(
                    modules,
                    namespace,
                    call.clone(),
                    &request,
                    Origin::Client,
                    &mut acks,
                ) {
                    Ok((UdfOutcome::Returned(_), _)) => Ok(()),
                    Ok((UdfOutcome::Failed(_), _)) => Err(ResultCode::UdfBadResponse),
                    Err(code) => Err(code),
                }
            }
        };
        Some(Written::of(result))
    }

    /// Whether `record` passes the scan's filter expression (a record the expression cannot
    /// be evaluated on is left out, as one it filters).
    fn passes(&self, record: &ScannedRecord<'_>) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|filter| record.passes(filter))
    }

    /// Whether `record` is in the set a query names (always, for a scan: its scope did that).
    fn in_queried_set(&self, record: &ScannedRecord<'_>) -> bool {
        match &self.query {
            Some(IndexQuery {
                set_name: Some(set),
                ..
            }) => record.set_name == Some(set.as_slice()),
            _ => true,
        }
    }
}

/// Applies a background job's write ops (in `body`, the job's message) to one record under
/// the message's write policy. The default record-exists policy becomes update-only: the job
/// changes the records it selected, and does not bring back one deleted since.
fn write_ops(
    namespace: &Namespace,
    body: &[u8],
    digest: Digest,
    set_name: &[u8],
    filter: Option<&Expression>,
    acks: &mut Acks,
) -> Result<(), ResultCode> {
    let message = Message::parse(body).map_err(|_| ResultCode::Parameter)?;
    let mut request =
        crate::dispatch::write_request(&message.header, digest, set_name, None, Deadline::NONE)?;
    if request.exists == engine::ExistsPolicy::Update {
        request.exists = engine::ExistsPolicy::UpdateOnly;
    }
    request.filter = filter;
    namespace
        .write_as(Origin::Client, &request, message.ops(), &mut Discard, acks)
        .map(|_| ())
}

/// Claims one record against MAX_RECORDS; false once the maximum is reached.
fn claim(shared: &ScanShared) -> bool {
    shared.max_records == 0 || shared.claimed.fetch_add(1, Ordering::Relaxed) < shared.max_records
}

/// Appends one record message: NAMESPACE, DIGEST, SET, KEY and (for a query) BVAL_ARRAY
/// fields, then one READ op per bin.
fn encode_record(
    out: &mut Vec<u8>,
    namespace_name: &[u8],
    record: &ScannedRecord<'_>,
    bins: &BinSelection,
    bval: Option<i64>,
) {
    let start = wire_aerospike::begin_message(out);
    wire_aerospike::write_field(out, field_type::NAMESPACE, namespace_name);
    wire_aerospike::write_field(out, field_type::DIGEST, &record.digest.0);
    let mut field_count = 2;
    if let Some(set_name) = record.set_name {
        wire_aerospike::write_field(out, field_type::SET, set_name);
        field_count += 1;
    }
    if let Some((particle_type, key)) = record.user_key() {
        write_key_field(out, particle_type, key);
        field_count += 1;
    }
    if let Some(bval) = bval {
        wire_aerospike::write_field(out, field_type::BVAL_ARRAY, &bval.to_le_bytes());
        field_count += 1;
    }
    let mut op_count: u16 = 0;
    for bin in record.bins().iter() {
        let selected = match bins {
            BinSelection::All => true,
            BinSelection::NoBins => false,
            BinSelection::Named(names) => names.iter().any(|name| name == bin.name),
        };
        if selected {
            wire_aerospike::write_op(
                out,
                OpCode::Read as u8,
                bin.particle_type,
                bin.name,
                bin.value,
            );
            op_count += 1;
        }
    }
    let header = MessageHeader {
        info1: match bins {
            BinSelection::NoBins => info1::GET_NO_BINS,
            _ => 0,
        },
        generation: u32::from(record.generation.0),
        record_ttl: record.void_time.0,
        field_count,
        op_count,
        ..MessageHeader::default()
    };
    wire_aerospike::finish_message(out, start, &header);
}

/// The partition-done message for a partition this node does not serve: info3 PARTITION_DONE,
/// result UNAVAILABLE (11), the partition id in the generation field (as Aerospike sends it).
fn write_partition_unavailable(out: &mut Vec<u8>, partition: PartitionId) {
    let start = wire_aerospike::begin_message(out);
    let header = MessageHeader {
        info3: info3::PARTITION_DONE,
        result_code: ResultCode::Unavailable.code(),
        generation: u32::from(partition.0),
        ..MessageHeader::default()
    };
    wire_aerospike::finish_message(out, start, &header);
}

fn write_key_field(out: &mut Vec<u8>, particle_type: u8, key: &[u8]) {
    let size_bytes = u32::try_from(2 + key.len()).expect("a stored key is under 4 GiB");
    out.extend_from_slice(&size_bytes.to_be_bytes());
    out.push(field_type::KEY);
    out.push(particle_type);
    out.extend_from_slice(key);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_partitions_0_to_4095_in_order_make_a_first_page() {
        let in_order: Vec<u8> = (0..4096u16).flat_map(u16::to_le_bytes).collect();
        assert!(is_every_partition_in_order(&in_order));
        let mut swapped = in_order.clone();
        swapped.swap(0, 2);
        assert!(!is_every_partition_in_order(&swapped));
        assert!(!is_every_partition_in_order(&in_order[..8190]));
        assert!(!is_every_partition_in_order(&[]));
    }

    #[test]
    fn a_background_write_counts_filtered_records_apart_from_failures() {
        assert_eq!(Written::of(Ok(())), Written::Succeeded);
        assert_eq!(Written::of(Err(ResultCode::FilteredOut)), Written::Filtered);
        assert_eq!(Written::of(Err(ResultCode::NotFound)), Written::Failed);
        assert_eq!(
            Written::of(Err(ResultCode::UdfBadResponse)),
            Written::Failed
        );
    }

    #[test]
    fn udf_queries_name_aggregate_or_background_and_none_is_refused_as_unsupported() {
        let message = |info2: u8, info3: u8, udf_op: Option<&'static [u8]>| {
            let mut message = Message::parse(&[
                22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ])
            .expect("a bare header");
            message.header.info2 = info2;
            message.header.info3 = info3;
            message.fields.udf = udf_op.is_some();
            message.fields.udf_call.op = udf_op;
            message
        };
        let background_udf = message(info2::WRITE, 0, Some(&[UDF_OP_BACKGROUND]));
        assert_eq!(unsupported_kind(&background_udf), None);
        assert!(is_background(&background_udf));
        let background_ops = message(info2::WRITE, 0, None);
        assert_eq!(unsupported_kind(&background_ops), None);
        assert!(is_background(&background_ops));
        // Aggregations run, with or without the partition protocol (the C client sends them to
        // each node without partitions), and are never background jobs, even with WRITE.
        for info3 in [0, info3::PARTITION_DONE] {
            let aggregation = message(0, info3, Some(&[UDF_OP_AGGREGATE]));
            assert_eq!(unsupported_kind(&aggregation), None);
            assert_eq!(udf_op(&aggregation), Ok(Some(UDF_OP_AGGREGATE)));
            assert!(is_aggregation(&aggregation));
        }
        let written = message(info2::WRITE, 0, Some(&[UDF_OP_AGGREGATE]));
        assert!(!is_background(&written));
        // The Go client's ExecuteUDF: UDF_OP background without info2 WRITE.
        let udf_without_write = message(0, info3::PARTITION_DONE, Some(&[UDF_OP_BACKGROUND]));
        assert_eq!(unsupported_kind(&udf_without_write), None);
        assert!(is_background(&udf_without_write));
        // Another UDF_OP, or none, is malformed: PARAMETER, as Aerospike answers.
        let unknown = message(0, info3::PARTITION_DONE, Some(&[3]));
        assert_eq!(udf_op(&unknown), Err(ResultCode::Parameter));
        let mut missing = message(0, info3::PARTITION_DONE, None);
        missing.fields.udf = true;
        assert_eq!(udf_op(&missing), Err(ResultCode::Parameter));
        let legacy = message(0, 0, None);
        assert_eq!(unsupported_kind(&legacy), Some(Unsupported::LegacyScan));
    }

    #[test]
    fn small_indexed_scans_start_fewer_threads() {
        assert_eq!(scan_thread_count(16, 4096, None), 16);
        assert_eq!(scan_thread_count(16, 3, None), 3);
        assert_eq!(scan_thread_count(16, 0, None), 1);
        assert_eq!(scan_thread_count(16, 4096, Some(100)), 1);
        assert_eq!(scan_thread_count(16, 4096, Some(0)), 1);
        assert_eq!(scan_thread_count(16, 4096, Some(10_000)), 5);
        assert_eq!(scan_thread_count(4, 4096, Some(1_000_000)), 4);
    }
}
