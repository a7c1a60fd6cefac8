//! Turns one AS_MSG request into an engine transaction and encodes its reply.
//!
//! Classification follows the Aerospike server (`service.c`, `thr_tsvc.c`): batch flag, then
//! namespace, then "no digest means scan/query", then write (delete or operate) or read.
//! Anything Osprey does not implement yet answers UNSUPPORTED_FEATURE rather than being skipped,
//! and is counted and logged by its kind ([`crate::unsupported`]).
//! Field types it has no use for are ignored, as the Aerospike server ignores them.
//!
//! A single-record command and a batch row run through the same [`execute_record`]: the row is a
//! [`RecordCommand`] too, only counted as a batch sub-transaction and answered inside the batch
//! stream.
//!
//! Invariants:
//! - Exactly one reply frame is appended to `out` per request, unless a stream answers it.
//! - A request with the info1 BATCH bit is always a batch, even when its body is malformed, so
//!   that its refusal carries LAST.
//! - On an error, whatever the engine streamed into the reply is discarded and a bare header
//!   with the result code is sent instead.
//! - A single-record request on the Redis namespace while a Redis script runs (holding that
//!   namespace's gate for as long as it runs) is not run on the runtime's thread, where it
//!   would block at the gate: its connection waits for the script's end on the runtime
//!   ([`Handled::AwaitScript`]), until the request's own deadline (then TIMEOUT, 9).

use engine::{
    Acks, BinRef, DeleteRequest, ExistsPolicy, Expression, GenerationPolicy, Namespace, Origin,
    ReadRequest, RecordMeta, ReplySink, WriteRequest,
};
use model::{Digest, OpCode, ParticleType, ResultCode, TtlRequest};
use wire_aerospike::{
    Fields, MESSAGE_HEADER_SIZE_BYTES, Message, MessageHeader, OpIter, info1, info2, info3,
};

use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::Clock as _;

use crate::access::Access;
use crate::batch::BatchJob;
use crate::latency::{self, HistogramId, Latencies};
use crate::scan::{self, ScanStream};
use crate::state::ServerState;
use crate::udf::{self, UdfOutcome};
use crate::unsupported::Unsupported;

/// Info4 bits that start or take part in a multi-record transaction (Enterprise only).
const INFO4_TRANSACTION_MASK: u8 = 0x1f;
/// Ops from which a single-record command runs on the long-request pool: a few thousand ops
/// cost a millisecond or more, which the runtime's workers must not spend on one client.
const LONG_REQUEST_OPS_MIN: u16 = 1024;
/// Body size from which a single-record command runs on the long-request pool: copying and
/// checking megabytes of values costs as much as thousands of ops.
const LONG_REQUEST_BODY_BYTES_MIN: usize = 1024 * 1024;

/// A request answered by a stream of frames, after the replies before it have been sent.
pub enum Streamed {
    /// A batch, answered chunk by chunk on the connection's task.
    Batch(BatchJob),
    /// A scan, answered by scan threads.
    Scan(ScanStream),
}

/// A single-record command: what one message, or one row of a batch, asks of one record.
#[derive(Clone, Debug)]
pub struct RecordCommand<'a> {
    /// Flags, policies, expected generation and TTL.
    pub header: MessageHeader,
    /// Set, key, and the fields Osprey refuses (UDF, filter expression).
    pub fields: Fields<'a>,
    /// The validated ops.
    pub ops: OpIter<'a>,
    /// The record.
    pub digest: Digest,
    /// When the command must be answered by; past it, TIMEOUT (9).
    pub deadline: engine::Deadline,
}

/// When a request arrived: on the monotonic clock, for the server's own waits, and on the
/// wall clock the namespaces use, so that its deadline reaches the engine without a clock
/// read per request. Read once per read from the socket.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub at: Instant,
    pub unix_ms: u64,
}

impl Received {
    /// Now, on both clocks.
    pub fn now() -> Received {
        Received {
            at: Instant::now(),
            unix_ms: engine::SystemClock.now_unix_ms(),
        }
    }
}

/// A request's deadline on both clocks (see [`Received`]); none where it has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestDeadline {
    pub at: Option<Instant>,
    pub engine: engine::Deadline,
}

/// Whether the AS_MSG `body` must run on the long-request pool: a single-record command with
/// many ops or a large body. Batches are not: they run chunk by chunk (`BatchJob`), and scans
/// on threads of their own.
pub fn is_long(body: &[u8]) -> bool {
    let Some(header) = body.first_chunk::<MESSAGE_HEADER_SIZE_BYTES>() else {
        return false;
    };
    let header = MessageHeader::decode(header);
    header.info1 & info1::BATCH == 0
        && (header.op_count >= LONG_REQUEST_OPS_MIN || body.len() >= LONG_REQUEST_BODY_BYTES_MIN)
}

/// When a request received at `received` must be answered by: its total timeout, or
/// `transaction-max-ms` for a single-record command that sends none (Aerospike gives batches,
/// scans and queries no deadline of their own).
pub fn deadline(
    state: &ServerState,
    header: &MessageHeader,
    received: Received,
    single_record: bool,
) -> RequestDeadline {
    let timeout_ms = match header.transaction_ttl {
        0 if single_record => state.config.service.transaction_max_ms,
        0 => {
            return RequestDeadline {
                at: None,
                engine: engine::Deadline::NONE,
            };
        }
        ms => u64::from(ms),
    };
    RequestDeadline {
        at: Some(received.at + Duration::from_millis(timeout_ms)),
        // A request that waited past it (behind others) is past to the engine too, which then
        // answers TIMEOUT before touching the record, as Aerospike's "timed out in queue".
        engine: engine::Deadline::at_unix_ms(received.unix_ms.saturating_add(timeout_ms)),
    }
}

/// The latency histogram a request answered here is timed in, once its reply may go (or its
/// stream has ended); `None` for one that is not timed (refused before it was parsed, sent to
/// another node, or to be asked again).
pub type Timed = Option<HistogramId>;

/// What became of a client's request.
pub enum Handled {
    /// Its reply is in the output.
    Answered,
    /// A stream will answer it.
    Streamed(Streamed),
    /// Another node should serve it (see [`forward_target`]); nothing was run or written.
    Forward(model::NodeId),
    /// On a cluster, this node's map says the request runs here, but the partition's role
    /// here says otherwise (the map is changing, and this node has applied only part of the
    /// change, or applied it before or after the node that sent the request): nothing was run
    /// or written; ask again once the map has moved ([`handle_when_ready`]).
    Unready,
    /// A Redis script holds the request's namespace: nothing was run; ask again once it has
    /// ended ([`handle_when_ready`]).
    AwaitScript,
}

/// What [`handle`] may answer besides a reply: whether it may name another node to serve the
/// request, and whether it may have the caller wait ([`Handled::AwaitScript`]; only callers
/// on the runtime, where the wait holds no thread).
#[derive(Clone, Copy)]
pub struct May {
    /// It may answer [`Handled::Forward`] (a client's request, on a cluster).
    pub forward: bool,
    /// It may answer [`Handled::AwaitScript`].
    pub wait: bool,
}

/// How long a request waits for this node's map to catch up before it is answered
/// UNAVAILABLE (11).
const MAP_CATCH_UP_MS: u64 = 500;

/// [`handle`] of a single-record request, waiting while this node's map catches up with a
/// change in progress ([`Handled::Unready`]), for at most [`MAP_CATCH_UP_MS`], then answering
/// UNAVAILABLE; and while a Redis script holds its namespace ([`Handled::AwaitScript`]), until
/// the request's deadline, then answering TIMEOUT. `may_forward` as for
/// [`handle_client_message`].
pub async fn handle_when_ready(
    state: &Arc<ServerState>,
    body: &[u8],
    received: Received,
    out: &mut Vec<u8>,
    acks: &mut Acks,
    may_forward: bool,
) -> (Handled, Timed) {
    let map_deadline = tokio::time::Instant::now() + Duration::from_millis(MAP_CATCH_UP_MS);
    let may = May {
        forward: may_forward,
        wait: true,
    };
    loop {
        let seen = state.cluster_node().map_or(0, |node| node.layout_version());
        // Checked for access when it first came (it waits for a map or a script only after).
        match handle(state, body, received, out, acks, may, None) {
            (Handled::Unready, _) => {
                let caught_up = match state.cluster_node() {
                    Some(node) => node.wait_layout_after(seen, map_deadline).await,
                    None => false,
                };
                if !caught_up {
                    reply_error(out, ResultCode::Unavailable);
                    return (Handled::Answered, None);
                }
            }
            (Handled::AwaitScript, _) => {
                if !wait_for_script_end(state, body, received).await {
                    reply_error(out, ResultCode::Timeout);
                    return (Handled::Answered, None);
                }
            }
            handled => return handled,
        }
    }
}

/// Waits on the runtime until no Redis script runs; false if the request in `body` reached its
/// deadline first.
pub async fn wait_for_script_end(state: &ServerState, body: &[u8], received: Received) -> bool {
    let deadline = body
        .first_chunk::<MESSAGE_HEADER_SIZE_BYTES>()
        .and_then(|header| deadline(state, &MessageHeader::decode(header), received, true).at);
    let ended = state.scripts.wait_until_none_runs();
    match deadline {
        Some(at) => tokio::time::timeout_at(at.into(), ended).await.is_ok(),
        None => {
            ended.await;
            true
        }
    }
}

/// Whether a Redis script holds the namespace named `namespace` now (see the module docs).
fn held_by_script(state: &ServerState, namespace: Option<&[u8]>) -> bool {
    state.scripts.is_running() && namespace == Some(state.config.resp_namespace().as_bytes())
}

/// Whether a Redis script holds the namespace of the AS_MSG `body` now.
pub fn body_held_by_script(state: &ServerState, body: &[u8]) -> bool {
    state.scripts.is_running()
        && Message::parse(body).is_ok_and(|message| held_by_script(state, message.fields.namespace))
}

/// Handles one AS_MSG body received at `received`: appends exactly one reply frame to `out`,
/// or returns the stream that will answer it. Never forwards: for requests another node
/// forwarded here, and for long requests (checked before they went to the pool).
pub fn handle_message(
    state: &Arc<ServerState>,
    body: &[u8],
    received: Received,
    out: &mut Vec<u8>,
    acks: &mut Acks,
) -> (Option<Streamed>, Timed) {
    let may = May {
        forward: false,
        wait: false,
    };
    let (handled, timed) = handle(state, body, received, out, acks, may, None);
    let streamed = match handled {
        Handled::Streamed(streamed) => Some(streamed),
        Handled::Unready => {
            reply_error(out, ResultCode::Unavailable);
            None
        }
        Handled::Answered | Handled::Forward(_) => None,
        Handled::AwaitScript => unreachable!("a request on the pool is not told to wait"),
    };
    (streamed, timed)
}

/// [`handle_message`] for a request a client sent this node: on a cluster, one that another
/// node should serve is not run but named, from the same parse of its message.
pub fn handle_client_message(
    state: &Arc<ServerState>,
    body: &[u8],
    received: Received,
    out: &mut Vec<u8>,
    acks: &mut Acks,
    access: &mut Access,
) -> (Handled, Timed) {
    let may = May {
        forward: state.is_clustered(),
        wait: true,
    };
    handle(state, body, received, out, acks, may, Some(access))
}

/// [`handle_client_message`] and the others, with the latency histogram the request is timed
/// in, judged from the parse the request needed anyway.
fn handle(
    state: &Arc<ServerState>,
    body: &[u8],
    received: Received,
    out: &mut Vec<u8>,
    acks: &mut Acks,
    may: May,
    mut access: Option<&mut Access>,
) -> (Handled, Timed) {
    if is_batch(body) {
        if let Some(access) = access
            && let Err(code) = access.check_batch(body)
        {
            write_stream_error(out, code);
            return (Handled::Answered, None);
        }
        let job = BatchJob::new(state.clone(), body.to_vec(), received);
        return (
            Handled::Streamed(Streamed::Batch(job)),
            Some(Latencies::BATCH_INDEX),
        );
    }
    if access
        .as_ref()
        .is_some_and(|access| !access.is_authenticated())
    {
        crate::access::write_refusal(out, body, ResultCode::NotAuthenticated);
        return (Handled::Answered, None);
    }
    let Ok(message) = Message::parse(body) else {
        reply_error(out, ResultCode::Parameter);
        return (Handled::Answered, None);
    };
    if let Some(access) = access.as_mut()
        && let Err(code) = access.check_parsed(&message.header, &message.fields)
    {
        match message.fields.digest {
            Some(_) => reply_error(out, code),
            None => write_stream_error(out, code),
        }
        return (Handled::Answered, None);
    }
    if may.forward
        && let Some(owner) = forward_target(state, &message)
    {
        return (Handled::Forward(owner), None);
    }
    let timed = timed_of(state, &message);
    if message.fields.digest.is_none() {
        let handled = match scan::start(state, &message, body) {
            Ok(Some(stream)) => Handled::Streamed(Streamed::Scan(stream)),
            Ok(None) => {
                // A background job: answered at once, it runs on.
                write_stream_error(out, ResultCode::Ok);
                Handled::Answered
            }
            Err(code) => {
                write_stream_error(out, code);
                Handled::Answered
            }
        };
        return (handled, timed);
    }
    let on_script_namespace =
        message.fields.namespace == Some(state.config.resp_namespace().as_bytes());
    // In flight before the check for a script: one that starts after it waits for this.
    let _entered = on_script_namespace.then(|| state.scripts.in_flight.enter());
    if may.wait && on_script_namespace && state.scripts.is_running() {
        return (Handled::AwaitScript, None);
    }
    let deadline = deadline(state, &message.header, received, true);
    let start = wire_aerospike::begin_response(out);
    match execute(state, &message, deadline.engine, out, acks) {
        Ok(answer) => {
            wire_aerospike::finish_response(out, start, &answer_header(&answer));
        }
        Err(ResultCode::Unavailable) if state.is_clustered() => {
            out.truncate(start);
            return (Handled::Unready, None);
        }
        Err(code) => {
            out.truncate(start);
            reply_error(out, code);
        }
    }
    (Handled::Answered, timed)
}

/// On a cluster, the node a single-record request should go to when this node is not the one
/// to serve it (the master of its partition, or for a read, a full replica); `None` to serve
/// it here (scans are never forwarded: clients split them by node).
fn forward_target(state: &ServerState, message: &Message<'_>) -> Option<model::NodeId> {
    let digest = Digest::from_slice(message.fields.digest?)?;
    let namespace = std::str::from_utf8(message.fields.namespace?).ok()?;
    let read = message.header.info2 & info2::WRITE == 0;
    match state
        .cluster_view()
        .route(namespace, digest.partition_id(), read)
    {
        crate::cluster::Route::Forward(owner) => Some(owner),
        crate::cluster::Route::Local | crate::cluster::Route::Unavailable => None,
    }
}

/// [`forward_target`] of an AS_MSG body (batches are never forwarded whole).
pub fn forward_target_of_body(state: &ServerState, body: &[u8]) -> Option<model::NodeId> {
    if is_batch(body) {
        return None;
    }
    forward_target(state, &Message::parse(body).ok()?)
}

/// Batch and scan replies are streams that end at a LAST message; a refusal must carry LAST or
/// the client waits for rows until its own timeout.
pub fn write_stream_error(out: &mut Vec<u8>, code: ResultCode) {
    let start = wire_aerospike::begin_response(out);
    wire_aerospike::finish_response(out, start, &last_header(code));
}

/// The header of the message that ends a stream with `code` as its status.
pub fn last_header(code: ResultCode) -> MessageHeader {
    MessageHeader {
        info3: info3::LAST,
        result_code: code.code(),
        ..MessageHeader::default()
    }
}

/// What a single-record command answers when it ran: its result code (OK, or a UDF's failure
/// with its `FAILURE` bin), the record's metadata and how many ops (bins) follow.
#[derive(Clone, Copy, Debug)]
pub struct Answer {
    /// The reply's result code.
    pub result_code: ResultCode,
    /// The record's generation and void time after the command.
    pub meta: RecordMeta,
    /// How many ops (bins) the reply carries.
    pub op_count: u16,
}

/// The header of an answer.
pub fn answer_header(answer: &Answer) -> MessageHeader {
    MessageHeader {
        result_code: answer.result_code.code(),
        ..success_header(&answer.meta, answer.op_count)
    }
}

/// The header of a successful single-record reply: the record's generation and void time, and
/// how many ops (bins) follow.
pub fn success_header(meta: &RecordMeta, op_count: u16) -> MessageHeader {
    MessageHeader {
        generation: u32::from(meta.generation.0),
        record_ttl: meta.void_time.0,
        op_count,
        ..MessageHeader::default()
    }
}

/// Appends a bare reply with `code`, for requests that never reach the engine.
pub fn reply_error(out: &mut Vec<u8>, code: ResultCode) {
    wire_aerospike::write_bare_response(out, code.code(), 0, 0);
}

/// Runs one single-record command on `namespace`, counted in `origin`'s statistics, and appends
/// its result bins to `out` as ops. Returns the record's meta and how many ops were appended.
/// A command refused for a feature Osprey lacks is counted in `unsupported`.
///
/// # Errors
///
/// The command's result code; the caller then discards whatever was appended to `out`.
pub fn execute_record(
    state: &ServerState,
    namespace: &Namespace,
    command: &RecordCommand<'_>,
    origin: Origin,
    out: &mut Vec<u8>,
    acks: &mut Acks,
) -> Result<Answer, ResultCode> {
    let header = &command.header;
    let fields = &command.fields;
    if header.info4 & INFO4_TRANSACTION_MASK != 0 {
        return Err(ResultCode::EnterpriseOnly);
    }
    if fields.udf {
        return run_udf(state, namespace, command, origin, out, acks);
    }
    let reply_start = out.len();
    let mut sink = OpSink {
        out,
        reply_start,
        op_count: 0,
        reply_size_bytes_max: reply_size_bytes_max(namespace.config().max_record_size_bytes),
        overflowed: false,
    };
    let meta = run_in_engine(namespace, command, origin, &mut sink, acks).map_err(|code| {
        let kind = (code == ResultCode::UnsupportedFeature).then(|| unsupported_kind(command));
        match kind.flatten() {
            Some(kind) => state.unsupported.refuse(kind),
            None => code,
        }
    })?;
    if sink.overflowed {
        return Err(ResultCode::Parameter);
    }
    if header.info2 & info2::WRITE != 0 {
        notify_redis_subscribers(state, namespace, command, &meta);
    }
    Ok(Answer {
        result_code: ResultCode::Ok,
        meta,
        op_count: sink.op_count,
    })
}

/// Keyspace notifications of an Aerospike client's write or delete to a record of the Redis
/// namespace, for Redis clients that subscribe to them (one atomic load when none does).
fn notify_redis_subscribers(
    state: &ServerState,
    namespace: &Namespace,
    command: &RecordCommand<'_>,
    meta: &RecordMeta,
) {
    use crate::resp::pubsub::notify::{self, AerospikeChange};
    if state
        .pubsub
        .notify_flags
        .load(std::sync::atomic::Ordering::Relaxed)
        == 0
        || namespace.name() != state.config.resp_namespace()
    {
        return;
    }
    let change = match command.header.info2 & info2::DELETE != 0 {
        true => AerospikeChange::Deleted,
        // A record's first write gives it generation 1.
        false => AerospikeChange::Written {
            created: meta.generation.0 == 1,
        },
    };
    let record = (command.fields.set.unwrap_or_default(), command.fields.key);
    notify::aerospike_change(&state.pubsub, &state.resp_databases, record, change);
}

/// A record UDF (`apply`): its return value in bin `SUCCESS`, or UDF_BAD_RESPONSE (100) with
/// its error in bin `FAILURE`, as Aerospike answers.
fn run_udf(
    state: &ServerState,
    namespace: &Namespace,
    command: &RecordCommand<'_>,
    origin: Origin,
    out: &mut Vec<u8>,
    acks: &mut Acks,
) -> Result<Answer, ResultCode> {
    let (outcome, meta) = udf::apply(&state.udf, namespace, command, origin, acks)?;
    let (result_code, name, (particle_type, value)) = match outcome {
        UdfOutcome::Returned(value) => (
            ResultCode::Ok,
            &b"SUCCESS"[..],
            engine::collection::to_particle(&value),
        ),
        UdfOutcome::Failed(message) => (
            ResultCode::UdfBadResponse,
            &b"FAILURE"[..],
            (ParticleType::String as u8, message.into_bytes()),
        ),
    };
    wire_aerospike::write_op(out, OpCode::Read as u8, particle_type, name, &value);
    Ok(Answer {
        result_code,
        meta,
        op_count: 1,
    })
}

/// Why the engine answered a command UNSUPPORTED_FEATURE: an expression (filter or op) using
/// what Osprey cannot evaluate yet. Judged only after the refusal, so that commands that run
/// pay nothing for it.
fn unsupported_kind(command: &RecordCommand<'_>) -> Option<Unsupported> {
    let has_expression = command.fields.filter_expression.is_some()
        || command
            .ops
            .clone()
            .any(|op| matches!(op.code, OpCode::ExpRead | OpCode::ExpModify));
    has_expression.then_some(Unsupported::ExpressionOp)
}

/// The latency histogram a request is timed in (besides a batch's, `batch-index`): its
/// namespace's read, write, udf, pi-query or si-query; `None` for a namespace this node lacks.
fn timed_of(state: &ServerState, message: &Message<'_>) -> Timed {
    let fields = &message.fields;
    let namespace_index = state.namespace_index(fields.namespace?)?;
    let op = match (fields.digest, fields.scan.index_range) {
        (None, None) => latency::Op::PiQuery,
        (None, Some(_)) => latency::Op::SiQuery,
        (Some(_), _) if fields.udf => latency::Op::Udf,
        (Some(_), _) if message.header.info2 & info2::WRITE != 0 => latency::Op::Write,
        (Some(_), _) => latency::Op::Read,
    };
    Some(state.latencies.id(namespace_index, op))
}

/// Whether `body` is a batch parent request (info1 BATCH), judged from its header alone.
fn is_batch(body: &[u8]) -> bool {
    body.first_chunk::<MESSAGE_HEADER_SIZE_BYTES>()
        .is_some_and(|header| MessageHeader::decode(header).info1 & info1::BATCH != 0)
}

fn execute(
    state: &ServerState,
    message: &Message<'_>,
    deadline: engine::Deadline,
    out: &mut Vec<u8>,
    acks: &mut Acks,
) -> Result<Answer, ResultCode> {
    check_ops_count(state, &message.header)?;
    let fields = &message.fields;
    let namespace_name = fields.namespace.ok_or(ResultCode::Namespace)?;
    let namespace = state
        .namespace(namespace_name)
        .ok_or(ResultCode::Namespace)?;
    let digest_field = fields.digest.ok_or(ResultCode::UnsupportedFeature)?;
    let digest = Digest::from_slice(digest_field).ok_or(ResultCode::Parameter)?;
    let command = RecordCommand {
        header: message.header,
        fields: message.fields,
        ops: message.ops(),
        digest,
        deadline,
    };
    execute_record(state, namespace, &command, Origin::Client, out, acks)
}

/// `ops-per-request-max`: a command (or batch row) with more ops answers PARAMETER, as
/// Aerospike answers one with more than its 32,768.
///
/// # Errors
/// PARAMETER over the limit.
pub fn check_ops_count(state: &ServerState, header: &MessageHeader) -> Result<(), ResultCode> {
    match u32::from(header.op_count) > state.config.service.ops_per_request_max {
        true => Err(ResultCode::Parameter),
        false => Ok(()),
    }
}

/// Turns the command's flags into an engine request and runs it: delete, write or read.
fn run_in_engine(
    namespace: &Namespace,
    command: &RecordCommand<'_>,
    origin: Origin,
    sink: &mut OpSink<'_>,
    acks: &mut Acks,
) -> Result<RecordMeta, ResultCode> {
    let header = &command.header;
    let digest = command.digest;
    let set_name = command.fields.set.unwrap_or_default();
    let key = command.fields.key;
    let ops = command.ops.clone();
    let deadline = command.deadline;
    let filter = command
        .fields
        .filter_expression
        .map(Expression::parse_filter)
        .transpose()?;
    let filter = filter.as_ref();
    if header.info2 & info2::WRITE != 0 {
        // Commit level master: the reply does not wait for the replicas.
        acks.set_commit_level_master(header.info3 & info3::COMMIT_MASTER != 0);
        let written = match header.info2 & info2::DELETE != 0 {
            true => {
                let mut request = delete_request(header, digest, set_name, key, deadline)?;
                request.filter = filter;
                namespace.delete_as(origin, &request, acks)
            }
            false => {
                let mut request = write_request(header, digest, set_name, key, deadline)?;
                request.filter = filter;
                namespace.write_as(origin, &request, ops, sink, acks)
            }
        };
        if written
            .as_ref()
            .is_err_and(|code| shows_record_state(*code))
        {
            namespace.join_unconfirmed(&digest, acks);
        }
        return written;
    }
    if header.info1 & info1::READ == 0 {
        return Err(ResultCode::Parameter);
    }
    let touch_percent = read_touch_percent(header.record_ttl)?;
    let request = ReadRequest {
        digest,
        set_name,
        key,
        respond_all_ops: header.info2 & info2::RESPOND_ALL_OPS != 0,
        read_all_bins: header.info1 & info1::GET_ALL != 0,
        header_only: header.info1 & info1::GET_NO_BINS != 0,
        deadline,
        filter,
    };
    let read = namespace.read_as(origin, &request, ops, sink);
    if read
        .as_ref()
        .err()
        .is_none_or(|code| shows_record_state(*code))
    {
        namespace.join_unconfirmed(&digest, acks);
    }
    let meta = read?;
    if let Some(percent) = touch_percent {
        touch_after_read(namespace, digest, set_name, percent, meta);
    }
    Ok(meta)
}

/// Whether a refusal tells the client something of the record's state (that it exists, its
/// generation, its bins), so that its reply must wait, as a read's, until that state is
/// confirmed by the replicas (`Namespace::join_unconfirmed`). Refusals of the request itself
/// (UNAVAILABLE from a node that may not take writes, TIMEOUT, PARAMETER...) do not.
fn shows_record_state(code: ResultCode) -> bool {
    matches!(
        code,
        ResultCode::NotFound
            | ResultCode::Generation
            | ResultCode::RecordExists
            | ResultCode::BinExists
            | ResultCode::BinNotFound
            | ResultCode::IncompatibleType
            | ResultCode::ElementNotFound
            | ResultCode::ElementExists
            | ResultCode::FilteredOut
    )
}

/// Aerospike's read-touch after a read that asked for it: when the record's remaining TTL has
/// fallen within `percent` of its last write's TTL, that TTL starts again
/// ([`RecordMeta::read_touch_due`]). Like Aerospike's, the touch is the server's own write,
/// done after the read: the reader's reply neither waits for it nor reports it, and a touch
/// that cannot be made (the record changed, this node does not master the partition) is
/// dropped, since the next read asks again.
fn touch_after_read(
    namespace: &Namespace,
    digest: Digest,
    set_name: &[u8],
    percent: u32,
    meta: RecordMeta,
) {
    let Some(write_ttl_seconds) = meta.read_touch_due(percent, namespace.now()) else {
        return;
    };
    let address = engine::RecordAddress {
        digest,
        set_name,
        key: None,
    };
    let mut acks = Acks::default();
    acks.set_commit_level_master(true);
    let _ = namespace.read_touch(&address, write_ttl_seconds, &mut acks);
}

/// The largest reply one command may produce: room for the whole record twice (say a read-all
/// next to reads of single bins) plus headers. Without a cap, a small request repeating a read
/// of a large bin thousands of times would make the server build a reply of gigabytes.
fn reply_size_bytes_max(max_record_size_bytes: u32) -> usize {
    const HEADROOM_BYTES: usize = 1024 * 1024;
    2 * max_record_size_bytes as usize + HEADROOM_BYTES
}

pub(crate) fn write_request<'a>(
    header: &MessageHeader,
    digest: Digest,
    set_name: &'a [u8],
    key: Option<&'a [u8]>,
    deadline: engine::Deadline,
) -> Result<WriteRequest<'a>, ResultCode> {
    let exists = if header.info2 & info2::CREATE_ONLY != 0 {
        ExistsPolicy::CreateOnly
    } else if header.info3 & info3::UPDATE_ONLY != 0 {
        ExistsPolicy::UpdateOnly
    } else if header.info3 & info3::CREATE_OR_REPLACE != 0 {
        ExistsPolicy::Replace
    } else if header.info3 & info3::REPLACE_ONLY != 0 {
        ExistsPolicy::ReplaceOnly
    } else {
        ExistsPolicy::Update
    };
    Ok(WriteRequest {
        digest,
        set_name,
        key,
        exists,
        generation: generation_policy(header),
        ttl: TtlRequest::from_wire(header.record_ttl)?,
        respond_all_ops: header.info2 & info2::RESPOND_ALL_OPS != 0,
        deadline,
        filter: None,
        read_all_bins: header.info1 & info1::GET_ALL != 0,
    })
}

fn delete_request<'a>(
    header: &MessageHeader,
    digest: Digest,
    set_name: &'a [u8],
    key: Option<&'a [u8]>,
    deadline: engine::Deadline,
) -> Result<DeleteRequest<'a>, ResultCode> {
    // Durable deletes (tombstones) are Enterprise-only in Aerospike Community Edition; the
    // in-memory engine keeps no tombstones yet, so say so rather than pretend.
    if header.info2 & info2::DURABLE_DELETE != 0 {
        return Err(ResultCode::EnterpriseOnly);
    }
    Ok(DeleteRequest {
        digest,
        set_name,
        key,
        generation: generation_policy(header),
        deadline,
        filter: None,
    })
}

fn generation_policy(header: &MessageHeader) -> GenerationPolicy {
    if header.info2 & info2::GENERATION != 0 {
        GenerationPolicy::Equal(header.generation)
    } else if header.info2 & info2::GENERATION_GT != 0 {
        GenerationPolicy::Greater(header.generation)
    } else {
        GenerationPolicy::None
    }
}

/// Reads carry `read-touch-ttl-percent` in the TTL slot: 1..=100 asks for a read-touch at
/// that percent; 0 (the namespace default, which is off in Osprey as in Aerospike's default
/// configuration) and -1 (never) ask for none; anything else is a bad parameter, as in
/// Aerospike's `read_touch.c`.
fn read_touch_percent(record_ttl: u32) -> Result<Option<u32>, ResultCode> {
    match record_ttl {
        0 | u32::MAX => Ok(None),
        1..=100 => Ok(Some(record_ttl)),
        _ => Err(ResultCode::Parameter),
    }
}

/// Encodes result bins straight into the reply buffer while the engine holds the record.
///
/// Invariant: once `overflowed` is set nothing more is written, and the caller answers
/// PARAMETER instead of sending the partial reply.
struct OpSink<'o> {
    out: &'o mut Vec<u8>,
    /// Where this reply's ops begin: replies to earlier pipelined requests do not count.
    reply_start: usize,
    op_count: u16,
    reply_size_bytes_max: usize,
    overflowed: bool,
}

impl ReplySink for OpSink<'_> {
    fn bin(&mut self, op_code: OpCode, bin: BinRef<'_>) {
        let reply_size_bytes = self.out.len() - self.reply_start + bin.value.len();
        let too_big = reply_size_bytes > self.reply_size_bytes_max;
        if self.overflowed || too_big || self.op_count == u16::MAX {
            self.overflowed = true;
            return;
        }
        wire_aerospike::write_op(
            self.out,
            op_code as u8,
            bin.particle_type,
            bin.name,
            bin.value,
        );
        self.op_count += 1;
    }
}
