//! Batch requests (info1 BATCH): many single-record commands in one message, answered as a
//! stream of per-row results ending with a LAST message (protocol reference section 8.1).
//!
//! A [`BatchJob`] runs on its connection's task. Its first call validates the whole request:
//! the BATCH field, the row count against `batch-max-requests`, the batch-level filter, and every
//! row (layout, namespace). Each call after that runs rows in order, each through
//! [`dispatch::execute_record`] exactly as the single-record command it describes, and answers
//! them into one proto of about [`CHUNK_BYTES`]; then it returns so that the connection writes
//! that proto before more rows run.
//!
//! Invariants:
//! - No row runs unless every row parsed and named a known namespace: a malformed batch changes
//!   nothing and is answered by a LAST message alone, as are the other refusals.
//! - Every row that runs gets exactly one reply message, whose `transaction_ttl` is the row's
//!   index. The one exception: without REPORT_ALL_ERRORS, a row result other than OK,
//!   NOT_FOUND and FILTERED_OUT ends the batch; the rows of the unsent proto are dropped, no
//!   further row runs, and the LAST message carries that result.
//! - The reply ends with exactly one LAST message, the last message of the last proto.
//! - At most one proto of the reply is in memory: [`CHUNK_BYTES`] plus the row that crossed it,
//!   and a row's reply is capped as a single-record reply is.
//! - Each job counts once in `initiated` and once in `completed` or `errors`; a job dropped
//!   before its end (the client left) counts as an error.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use engine::{Acks, Origin};
use model::ResultCode;
use wire_aerospike::{
    BatchPosition, BatchRequest, BatchRow, Fields, MESSAGE_HEADER_SIZE_BYTES, Message,
    MessageHeader, PROTO_HEADER_SIZE_BYTES, ProtoType, field_type, info2,
};
use wire_fabric::ForwardProtocol;

use crate::cluster::{Route, forward};
use crate::dispatch::{self, Received, RecordCommand, RequestDeadline};

/// A batch that sent no total timeout has none (Aerospike gives batches none of their own).
const NO_DEADLINE: RequestDeadline = RequestDeadline {
    at: None,
    engine: engine::Deadline::NONE,
};
use crate::state::ServerState;

/// Size at which a proto of rows is handed to the connection: Aerospike's 128 KiB batch block.
const CHUNK_BYTES: usize = 128 * 1024;
/// Time after which a chunk ends after its current row, whatever its size: a long batch runs
/// one chunk per long-request job, so other long work interleaves with it at this grain.
const CHUNK_TIME_MAX: Duration = Duration::from_millis(2);
/// Rows above which a batch runs on the long-request pool rather than its connection's task.
const LONG_BATCH_ROWS_MIN: u32 = 128;
/// Request size above which a batch runs on the long-request pool (rows with many ops).
const LONG_BATCH_BODY_BYTES_MIN: usize = 64 * 1024;

const _: () = assert!(CHUNK_BYTES > PROTO_HEADER_SIZE_BYTES + MESSAGE_HEADER_SIZE_BYTES);

/// Node-wide batch counters, for `statistics`.
#[derive(Debug, Default)]
pub struct BatchStats {
    /// Batches started.
    pub initiated: AtomicU64,
    /// Batches answered to the end.
    pub completed: AtomicU64,
    /// Batches refused or ended early by an error.
    pub errors: AtomicU64,
    /// Batches ended at their total timeout (Aerospike's `batch_index_timeout`); also counted
    /// in `errors`.
    pub timeouts: AtomicU64,
}

/// One batch being answered, a chunk at a time.
pub struct BatchJob {
    state: Arc<ServerState>,
    /// The whole AS_MSG body of the request, header included.
    body: Vec<u8>,
    progress: Progress,
    /// The client's total timeout, if it sent one; rows after it answer nothing and the batch
    /// ends with TIMEOUT (9).
    deadline: RequestDeadline,
}

/// How far a job has come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Progress {
    /// Nothing answered yet; the request is validated first.
    NotStarted,
    /// Rows before this position are answered.
    Answering(BatchPosition),
    /// The LAST message is written.
    Finished,
}

/// How one chunk of the reply ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkEnd {
    /// The proto is full; rows from this position remain.
    More(BatchPosition),
    /// The batch is over with this status; the chunk ends with the LAST message.
    Last(ResultCode),
}

impl BatchJob {
    /// A batch over the request `body` (a whole AS_MSG, header included) received at
    /// `received`.
    pub fn new(state: Arc<ServerState>, body: Vec<u8>, received: Received) -> BatchJob {
        state.batch.initiated.fetch_add(1, Ordering::Relaxed);
        let deadline = body
            .first_chunk::<MESSAGE_HEADER_SIZE_BYTES>()
            .map_or(NO_DEADLINE, |header| {
                dispatch::deadline(&state, &MessageHeader::decode(header), received, false)
            });
        BatchJob {
            state,
            body,
            progress: Progress::NotStarted,
            deadline,
        }
    }

    /// Whether the batch is large enough to run on the long-request pool.
    pub fn is_long(&self) -> bool {
        let rows = parse_request(&self.body).map_or(0, |(_, request)| request.row_count);
        rows > LONG_BATCH_ROWS_MIN || self.body.len() > LONG_BATCH_BODY_BYTES_MIN
    }

    /// Appends the next complete proto frames of the reply to `out`, and what its rows' writes
    /// wait for to `acks`; returns true once the reply, LAST message included, is complete.
    pub fn next_chunk(&mut self, out: &mut Vec<u8>, acks: &mut Acks) -> bool {
        let position = match self.progress {
            Progress::Finished => return true,
            Progress::Answering(position) => position,
            Progress::NotStarted => match validate(&self.state, &self.body) {
                Ok(()) => BatchPosition::START,
                Err(code) => {
                    dispatch::write_stream_error(out, code);
                    self.finish(code);
                    return true;
                }
            },
        };
        match answer_chunk(&self.state, &self.body, position, self.deadline, out, acks) {
            ChunkEnd::More(position) => {
                self.progress = Progress::Answering(position);
                false
            }
            ChunkEnd::Last(code) => {
                self.finish(code);
                true
            }
        }
    }

    fn finish(&mut self, code: ResultCode) {
        self.progress = Progress::Finished;
        let counter = match code {
            ResultCode::Ok => &self.state.batch.completed,
            _ => &self.state.batch.errors,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if code == ResultCode::Timeout {
            self.state.batch.timeouts.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for BatchJob {
    fn drop(&mut self) {
        // The connection dropped the job before its LAST message: the client is gone.
        if self.progress != Progress::Finished {
            self.state.batch.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Appends the batch counters to a `statistics` answer, each as `;name=value`.
pub fn write_batch_statistics(stats: &BatchStats, value: &mut String) {
    let _ = write!(
        value,
        ";batch_index_initiate={};batch_index_complete={};batch_index_error={};\
         batch_index_timeout={}",
        stats.initiated.load(Ordering::Relaxed),
        stats.completed.load(Ordering::Relaxed),
        stats.errors.load(Ordering::Relaxed),
        stats.timeouts.load(Ordering::Relaxed),
    );
}

/// The parent message's fields and its batch body.
fn parse_request(body: &[u8]) -> Result<(Fields<'_>, BatchRequest<'_>), ResultCode> {
    let message = Message::parse_batch_parent(body).map_err(|_| ResultCode::Parameter)?;
    let batch_field = message.fields.batch.ok_or(ResultCode::Parameter)?;
    let request = BatchRequest::parse(batch_field).map_err(|_| ResultCode::Parameter)?;
    Ok((message.fields, request))
}

/// Everything Aerospike checks before it dispatches a row, and the rows themselves, so that a
/// batch either runs or changes nothing.
fn validate(state: &ServerState, body: &[u8]) -> Result<(), ResultCode> {
    let (fields, request) = parse_request(body)?;
    if request.row_count == 0 {
        return Err(ResultCode::Parameter);
    }
    if request.row_count > state.config.service.batch_max_requests {
        return Err(ResultCode::BatchMaxRequests);
    }
    // A batch-level filter expression applies to every row without one of its own: a
    // malformed one fails the whole batch before any row runs.
    if let Some(packed) = fields.filter_expression {
        engine::Expression::parse_filter(packed)?;
    }
    for row in request.rows() {
        let row = row.map_err(|_| ResultCode::Parameter)?;
        // Aerospike stops at a row naming an unknown namespace and fails the batch with
        // PARAMETER, not NAMESPACE.
        if !row.repeated && namespace_name_is_unknown(state, &row) {
            return Err(ResultCode::Parameter);
        }
    }
    Ok(())
}

fn namespace_name_is_unknown(state: &ServerState, row: &BatchRow<'_>) -> bool {
    row.fields
        .namespace
        .is_none_or(|name| state.namespace(name).is_none())
}

/// Answers rows from `position` into one proto appended to `out`.
fn answer_chunk(
    state: &ServerState,
    body: &[u8],
    position: BatchPosition,
    deadline: RequestDeadline,
    out: &mut Vec<u8>,
    acks: &mut Acks,
) -> ChunkEnd {
    let (parent, request) = match parse_request(body) {
        Ok(parsed) => parsed,
        // Validation parsed the same bytes, so this cannot happen; answer rather than panic.
        Err(code) => {
            dispatch::write_stream_error(out, code);
            return ChunkEnd::Last(code);
        }
    };
    let proto_start = wire_aerospike::begin_proto(out);
    let batch = Batch {
        request: &request,
        filter: parent.filter_expression,
    };
    let end = answer_rows(state, &batch, position, deadline, proto_start, out, acks);
    if let ChunkEnd::Last(code) = end {
        let last_start = wire_aerospike::begin_message(out);
        wire_aerospike::finish_message(out, last_start, &dispatch::last_header(code));
    }
    wire_aerospike::finish_proto(out, proto_start, ProtoType::Message);
    end
}

/// Answers rows until the proto begun at `proto_start` is full or has taken
/// [`CHUNK_TIME_MAX`], the rows run out, the deadline passes, or a row error ends the batch.
fn answer_rows(
    state: &ServerState,
    batch: &Batch<'_>,
    position: BatchPosition,
    deadline: RequestDeadline,
    proto_start: usize,
    out: &mut Vec<u8>,
    acks: &mut Acks,
) -> ChunkEnd {
    let started = Instant::now();
    let request = batch.request;
    let mut rows = request.rows_from(position);
    while let Some(row) = rows.next() {
        let Ok(row) = row else {
            return ChunkEnd::Last(ResultCode::Parameter);
        };
        let now = Instant::now();
        if deadline.at.is_some_and(|deadline| now >= deadline) {
            // Aerospike ends a batch at its deadline: the rows not answered get nothing.
            return ChunkEnd::Last(ResultCode::Timeout);
        }
        let row = with_batch_filter(row, batch.filter);
        let code = answer_row(state, &row, deadline, out, acks);
        if ends_batch(code) && !request.reports_all_errors() {
            // Aerospike drops the output it has not sent yet, and so does this.
            out.truncate(proto_start + PROTO_HEADER_SIZE_BYTES);
            return ChunkEnd::Last(code);
        }
        if out.len() - proto_start >= CHUNK_BYTES || started.elapsed() >= CHUNK_TIME_MAX {
            return ChunkEnd::More(rows.position());
        }
    }
    ChunkEnd::Last(ResultCode::Ok)
}

/// A batch request and its batch-level filter expression.
struct Batch<'a> {
    request: &'a BatchRequest<'a>,
    filter: Option<&'a [u8]>,
}

/// `row`, filtered by the batch's expression unless it carries its own.
fn with_batch_filter<'a>(mut row: BatchRow<'a>, filter: Option<&'a [u8]>) -> BatchRow<'a> {
    if row.fields.filter_expression.is_none() {
        row.fields.filter_expression = filter;
    }
    row
}

/// Runs one row and appends its reply message; returns its result code.
fn answer_row(
    state: &ServerState,
    row: &BatchRow<'_>,
    deadline: RequestDeadline,
    out: &mut Vec<u8>,
    acks: &mut Acks,
) -> ResultCode {
    if let Some(code) = forward_row(state, row, deadline, out) {
        return code;
    }
    let start = wire_aerospike::begin_message(out);
    let (code, header) = match execute_row(state, row, deadline, out, acks) {
        Ok(answer) => (answer.result_code, dispatch::answer_header(&answer)),
        Err(code) => {
            // Bins the engine streamed before the error are not part of the answer.
            out.truncate(start + MESSAGE_HEADER_SIZE_BYTES);
            let header = MessageHeader {
                result_code: code.code(),
                ..MessageHeader::default()
            };
            (code, header)
        }
    };
    let header = MessageHeader {
        transaction_ttl: row.index,
        ..header
    };
    wire_aerospike::finish_message(out, start, &header);
    code
}

/// On a cluster, a row whose partition another node masters (the client's map is stale) runs
/// there, as the single-record command it describes, and its reply becomes the row's; `None`
/// when the row runs here. Returns the row's result for [`ends_batch`]: OK, NOT_FOUND, or
/// UNKNOWN standing for any other code (the row's reply carries the real one).
fn forward_row(
    state: &ServerState,
    row: &BatchRow<'_>,
    deadline: RequestDeadline,
    out: &mut Vec<u8>,
) -> Option<ResultCode> {
    let node = state.cluster_node()?;
    let namespace = std::str::from_utf8(row.fields.namespace?).ok()?;
    let read = row.header.info2 & info2::WRITE == 0;
    let partition = row.digest.partition_id();
    let Route::Forward(owner) = state.cluster_view().route(namespace, partition, read) else {
        return None;
    };
    let time_left_ms = deadline.at.map_or(0, |at| {
        let left = at.saturating_duration_since(Instant::now()).as_millis();
        u32::try_from(left).unwrap_or(u32::MAX).max(1)
    });
    let body = row_as_message(row, time_left_ms);
    let forwarding = forward::forward(
        state,
        owner,
        ForwardProtocol::Aerospike,
        time_left_ms,
        &body,
    );
    let reply = node.block_on(forwarding);
    let start = out.len();
    let code = match reply {
        Ok(frame) if frame.len() >= PROTO_HEADER_SIZE_BYTES + MESSAGE_HEADER_SIZE_BYTES => {
            out.extend_from_slice(&frame[PROTO_HEADER_SIZE_BYTES..]);
            match out[start + RESULT_CODE_OFFSET] {
                0 => ResultCode::Ok,
                2 => ResultCode::NotFound,
                _ => ResultCode::Unknown,
            }
        }
        Ok(_) => {
            bare_message(out, ResultCode::Unknown);
            ResultCode::Unknown
        }
        Err(code) => {
            bare_message(out, code);
            code
        }
    };
    // The row's index goes where the client looks for it.
    out[start + TRANSACTION_TTL_OFFSET..start + TRANSACTION_TTL_OFFSET + 4]
        .copy_from_slice(&row.index.to_be_bytes());
    Some(code)
}

/// A row reply with a result code and nothing else.
fn bare_message(out: &mut Vec<u8>, code: ResultCode) {
    let start = wire_aerospike::begin_message(out);
    let header = MessageHeader {
        result_code: code.code(),
        ..MessageHeader::default()
    };
    wire_aerospike::finish_message(out, start, &header);
}

/// Where an AS_MSG header keeps its result code and its transaction TTL (a batch row's index
/// in a batch reply).
const RESULT_CODE_OFFSET: usize = 5;
const TRANSACTION_TTL_OFFSET: usize = 14;

/// The single-record command a batch row describes, as an AS_MSG body.
fn row_as_message(row: &BatchRow<'_>, time_left_ms: u32) -> Vec<u8> {
    let mut fields: Vec<(u8, &[u8])> = Vec::with_capacity(4);
    fields.extend(row.fields.namespace.map(|ns| (field_type::NAMESPACE, ns)));
    fields.extend(row.fields.set.map(|set| (field_type::SET, set)));
    fields.extend(row.fields.key.map(|key| (field_type::KEY, key)));
    fields.push((field_type::DIGEST, &row.digest.0));
    fields.extend(
        row.fields
            .filter_expression
            .map(|packed| (field_type::FILTER_EXP, packed)),
    );
    let ops: Vec<model::Op<'_>> = row.ops().collect();
    let header = MessageHeader {
        transaction_ttl: time_left_ms,
        ..row.header
    };
    let mut frame = Vec::new();
    wire_aerospike::encode_message(&mut frame, &header, &fields, &ops);
    frame.split_off(PROTO_HEADER_SIZE_BYTES)
}

fn execute_row(
    state: &ServerState,
    row: &BatchRow<'_>,
    deadline: RequestDeadline,
    out: &mut Vec<u8>,
    acks: &mut Acks,
) -> Result<dispatch::Answer, ResultCode> {
    dispatch::check_ops_count(state, &row.header)?;
    let namespace = row
        .fields
        .namespace
        .and_then(|name| state.namespace(name))
        .ok_or(ResultCode::Namespace)?;
    let command = RecordCommand {
        header: row.header,
        fields: row.fields,
        ops: row.ops(),
        digest: row.digest,
        deadline: deadline.engine,
    };
    dispatch::execute_record(state, namespace, &command, Origin::Batch, out, acks)
}

/// Whether a row result ends a batch that does not report all errors (Aerospike's
/// `as_batch_reserve`: anything but OK, NOT_FOUND and FILTERED_OUT).
fn ends_batch(code: ResultCode) -> bool {
    !matches!(
        code,
        ResultCode::Ok | ResultCode::NotFound | ResultCode::FilteredOut
    )
}

#[cfg(test)]
mod tests {

    use engine::{Namespace, SystemClock};
    use model::{Digest, Op, OpCode, UserKey};
    use wire_aerospike::{
        OpIter, batch_parent_flags, decode_frame, encode_batch_header, encode_batch_repeat_row,
        encode_batch_row, encode_message, field_type, info1, info2, info3,
    };

    use super::*;
    use crate::config::Config;

    const NS: &[u8] = b"test";

    fn test_state(batch_max_requests: u32) -> Arc<ServerState> {
        let mut config = Config::default();
        config.service.batch_max_requests = batch_max_requests;
        let clock = Arc::new(SystemClock);
        let namespaces = config
            .namespaces
            .iter()
            .map(|section| Arc::new(Namespace::new(section.to_engine(), clock.clone())))
            .collect();
        Arc::new(
            ServerState::new(config, namespaces, "1".to_owned(), String::new())
                .expect("the long-request threads start"),
        )
    }

    fn digest(key: i64) -> Digest {
        Digest::compute(b"", &UserKey::Integer(key))
    }

    fn int_value(value: i64) -> [u8; 8] {
        value.to_be_bytes()
    }

    /// One row as the tests describe it: header flags and ops; namespace `test`, no set.
    struct Row<'a> {
        key: i64,
        header: MessageHeader,
        ops: Vec<Op<'a>>,
    }

    fn read_all(key: i64) -> Row<'static> {
        let header = MessageHeader {
            info1: info1::READ | info1::GET_ALL,
            ..MessageHeader::default()
        };
        Row {
            key,
            header,
            ops: Vec::new(),
        }
    }

    fn write_int<'a>(key: i64, value: &'a [u8; 8], generation: Option<u32>) -> Row<'a> {
        let (gen_flag, expected) = generation.map_or((0, 0), |g| (info2::GENERATION, g));
        let header = MessageHeader {
            info2: info2::WRITE | gen_flag,
            generation: expected,
            ..MessageHeader::default()
        };
        let op = Op {
            code: OpCode::Write,
            particle_type: 1,
            bin_name: b"v",
            value,
        };
        Row {
            key,
            header,
            ops: vec![op],
        }
    }

    /// A whole batch request body (AS_MSG header included) over `rows`.
    fn batch_body(parent_flags: u8, rows: &[Row<'_>]) -> Vec<u8> {
        let mut field = Vec::new();
        let row_count = u32::try_from(rows.len()).unwrap();
        encode_batch_header(&mut field, row_count, parent_flags);
        for (index, row) in rows.iter().enumerate() {
            let fields: [(u8, &[u8]); 1] = [(field_type::NAMESPACE, NS)];
            let index = u32::try_from(index).unwrap();
            encode_batch_row(
                &mut field,
                index,
                &digest(row.key),
                &row.header,
                &fields,
                &row.ops,
            );
        }
        parent_with_field(&field)
    }

    fn parent_with_field(field: &[u8]) -> Vec<u8> {
        let header = MessageHeader {
            info1: info1::BATCH,
            ..MessageHeader::default()
        };
        let mut frame = Vec::new();
        encode_message(&mut frame, &header, &[(field_type::BATCH, field)], &[]);
        frame.split_off(PROTO_HEADER_SIZE_BYTES)
    }

    /// Runs a job to its end; returns each proto's messages (header and op count).
    fn run(state: &Arc<ServerState>, body: Vec<u8>) -> Vec<Vec<(MessageHeader, usize)>> {
        let mut job = BatchJob::new(state.clone(), body, Received::now());
        let mut protos = Vec::new();
        loop {
            let mut out = Vec::new();
            let complete = job.next_chunk(&mut out, &mut Acks::default());
            protos.extend(split_protos(&out));
            if complete {
                return protos;
            }
            assert!(protos.len() < 10_000, "a batch that never ends");
        }
    }

    fn split_protos(mut out: &[u8]) -> Vec<Vec<(MessageHeader, usize)>> {
        let mut protos = Vec::new();
        while !out.is_empty() {
            let frame = decode_frame(out, u64::MAX).unwrap().unwrap();
            assert!(
                frame.body.len() <= CHUNK_BYTES + 64 * 1024,
                "proto too large"
            );
            protos.push(split_messages(frame.body));
            out = &out[frame.size_bytes()..];
        }
        protos
    }

    fn split_messages(mut body: &[u8]) -> Vec<(MessageHeader, usize)> {
        let mut messages = Vec::new();
        while let Some((header, rest)) = body.split_first_chunk::<MESSAGE_HEADER_SIZE_BYTES>() {
            let header = MessageHeader::decode(header);
            let (_, rest) = Fields::parse(rest, header.field_count).unwrap();
            let (ops, rest) = OpIter::parse(rest, header.op_count).unwrap();
            messages.push((header, ops.len()));
            body = rest;
        }
        assert!(body.is_empty());
        messages
    }

    /// The rows' (index, result code) and the LAST status, checking that LAST comes once, at the
    /// very end.
    fn outcome(protos: &[Vec<(MessageHeader, usize)>]) -> (Vec<(u32, u8)>, u8) {
        let messages: Vec<_> = protos.iter().flatten().collect();
        let (last, rows) = messages.split_last().unwrap();
        assert_eq!(last.0.info3, info3::LAST);
        assert!(
            rows.iter()
                .all(|(header, _)| header.info3 & info3::LAST == 0)
        );
        let rows = rows
            .iter()
            .map(|(header, _)| (header.transaction_ttl, header.result_code))
            .collect();
        (rows, last.0.result_code)
    }

    const ALL: u8 = batch_parent_flags::REPORT_ALL_ERRORS;

    #[test]
    fn rows_run_in_order_with_their_index_and_missing_keys_are_row_results() {
        let state = test_state(5000);
        let one = int_value(1);
        let rows = [write_int(1, &one, None), read_all(1), read_all(2)];
        let protos = run(&state, batch_body(ALL, &rows));
        assert_eq!(outcome(&protos), (vec![(0, 0), (1, 0), (2, 2)], 0));
        let read = protos[0][1];
        assert_eq!((read.0.generation, read.1), (1, 1), "generation 1, one bin");
        assert_eq!(state.batch.completed.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_row_error_ends_the_batch_unless_all_errors_are_reported() {
        // Row 1 expects generation 5 of a record at generation 1. Reporting all errors, it is a
        // row result and row 2 still runs; otherwise the LAST message carries it and row 2,
        // a write, never runs.
        let state = test_state(5000);
        let one = int_value(1);
        let rows = [
            write_int(1, &one, None),
            write_int(1, &one, Some(5)),
            write_int(3, &one, None),
        ];
        let (results, status) = outcome(&run(&state, batch_body(ALL, &rows)));
        assert_eq!((results, status), (vec![(0, 0), (1, 3), (2, 0)], 0));
        let rows = [
            write_int(4, &one, None),
            write_int(1, &one, Some(99)),
            write_int(5, &one, None),
        ];
        let (results, status) = outcome(&run(&state, batch_body(0, &rows)));
        assert_eq!((results, status), (vec![], 3));
        let (results, _) = outcome(&run(&state, batch_body(ALL, &[read_all(4), read_all(5)])));
        assert_eq!(results, [(0, 0), (1, 2)], "row 0 ran, row 2 did not");
        assert_eq!(state.batch.errors.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_large_batch_is_answered_in_protos_of_about_128_kib() {
        // 300 rows of 1 KiB each make three protos or more: the job returns after each.
        let state = test_state(5000);
        let value = vec![7u8; 1024];
        let write = |key| Row {
            key,
            header: MessageHeader {
                info2: info2::WRITE,
                ..MessageHeader::default()
            },
            ops: vec![Op {
                code: OpCode::Write,
                particle_type: 4,
                bin_name: b"b",
                value: &value,
            }],
        };
        let writes: Vec<Row<'_>> = (0..300).map(write).collect();
        outcome(&run(&state, batch_body(ALL, &writes)));
        let reads: Vec<Row<'_>> = (0..300).map(read_all).collect();
        let protos = run(&state, batch_body(ALL, &reads));
        assert!(protos.len() >= 3, "{} protos", protos.len());
        let (results, status) = outcome(&protos);
        assert_eq!(status, 0);
        let expected: Vec<(u32, u8)> = (0..300).map(|index| (index, 0)).collect();
        assert_eq!(results, expected);
    }

    #[test]
    fn refusals_before_any_row_are_a_lone_last_message() {
        let state = test_state(2);
        let one = int_value(1);
        let last_only = |body: Vec<u8>| {
            let protos = run(&state, body);
            assert_eq!(protos.len(), 1);
            assert_eq!(protos[0].len(), 1);
            outcome(&protos).1
        };
        let three = [read_all(1), read_all(2), read_all(3)];
        assert_eq!(last_only(batch_body(ALL, &three)), 151);
        assert_eq!(last_only(batch_body(ALL, &[])), 4, "0 rows");
        assert_eq!(
            last_only(parent_with_field(&[0, 0])),
            4,
            "short batch field"
        );
        let mut no_batch_field = parent_with_field(&[]);
        no_batch_field[MESSAGE_HEADER_SIZE_BYTES + 4] = field_type::SET;
        assert_eq!(last_only(no_batch_field), 4);
        let mut truncated = batch_body(ALL, &[write_int(7, &one, None), read_all(1)]);
        truncated.truncate(truncated.len() - 3);
        assert_eq!(last_only(truncated), 4, "truncated body");
        assert_eq!(state.batch.errors.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn a_bad_row_anywhere_means_no_row_runs() {
        // Row 0 is a valid write; row 1 names an unknown namespace, then a REPEAT comes first
        // in another batch. Each is refused with PARAMETER and the write never happens.
        let state = test_state(5000);
        let one = int_value(1);
        let mut field = Vec::new();
        encode_batch_header(&mut field, 2, ALL);
        let write = write_int(8, &one, None);
        let ns: [(u8, &[u8]); 1] = [(field_type::NAMESPACE, NS)];
        encode_batch_row(&mut field, 0, &digest(8), &write.header, &ns, &write.ops);
        let other: [(u8, &[u8]); 1] = [(field_type::NAMESPACE, b"nope")];
        encode_batch_row(&mut field, 1, &digest(9), &read_all(9).header, &other, &[]);
        assert_eq!(
            outcome(&run(&state, parent_with_field(&field))),
            (vec![], 4)
        );
        let mut repeat_first = Vec::new();
        encode_batch_header(&mut repeat_first, 1, ALL);
        encode_batch_repeat_row(&mut repeat_first, 0, &digest(8));
        assert_eq!(
            outcome(&run(&state, parent_with_field(&repeat_first))),
            (vec![], 4)
        );
        let (results, _) = outcome(&run(&state, batch_body(ALL, &[read_all(8)])));
        assert_eq!(results, [(0, 2)]);
    }

    #[test]
    fn malformed_row_filters_and_udf_calls_fail_their_row_and_a_malformed_batch_filter_the_batch() {
        let state = test_state(5000);
        let mut field = Vec::new();
        encode_batch_header(&mut field, 3, ALL);
        let header = read_all(1).header;
        let filtered: [(u8, &[u8]); 2] = [
            (field_type::NAMESPACE, NS),
            (field_type::FILTER_EXP, b"\x93"),
        ];
        let udf: [(u8, &[u8]); 2] = [
            (field_type::NAMESPACE, NS),
            (field_type::UDF_FILENAME, b"m"),
        ];
        encode_batch_row(&mut field, 0, &digest(1), &header, &filtered, &[]);
        encode_batch_row(&mut field, 1, &digest(1), &header, &udf, &[]);
        encode_batch_row(&mut field, 2, &digest(1), &header, &filtered[..1], &[]);
        let results = outcome(&run(&state, parent_with_field(&field)));
        // The row with a filter that is no expression answers PARAMETER, and so does the UDF
        // row that names no function; the plain row finds no record.
        assert_eq!(results, (vec![(0, 4), (1, 4), (2, 2)], 0));
        let mut body = parent_with_field(&field);
        let filter = [
            (field_type::FILTER_EXP, &b"\x93"[..]),
            (field_type::BATCH, &field[..]),
        ];
        let mut frame = Vec::new();
        let parent = MessageHeader::decode(body.first_chunk().unwrap());
        encode_message(&mut frame, &parent, &filter, &[]);
        body = frame.split_off(PROTO_HEADER_SIZE_BYTES);
        assert_eq!(outcome(&run(&state, body)), (vec![], 4));
    }

    #[test]
    fn a_batch_past_its_total_timeout_ends_with_timeout_and_runs_no_more_rows() {
        let state = test_state(5000);
        let value = int_value(1);
        let rows: Vec<Row<'_>> = (0..3).map(|key| write_int(key, &value, None)).collect();
        let mut body = batch_body(ALL, &rows);
        // transaction_ttl (bytes 14..18 of the header): 50 ms.
        body[14..18].copy_from_slice(&50u32.to_be_bytes());
        let now = Received::now();
        let received = Received {
            at: now.at - Duration::from_millis(100),
            unix_ms: now.unix_ms - 100,
        };
        let mut job = BatchJob::new(state.clone(), body, received);
        let mut out = Vec::new();
        assert!(job.next_chunk(&mut out, &mut Acks::default()));
        assert_eq!(
            outcome(&split_protos(&out)),
            (vec![], ResultCode::Timeout.code())
        );
        let mut value = String::new();
        write_batch_statistics(&state.batch, &mut value);
        assert!(
            value.ends_with(";batch_index_error=1;batch_index_timeout=1"),
            "{value}"
        );
        let (rows, _) = outcome(&run(&state, batch_body(ALL, &[read_all(0)])));
        assert_eq!(
            rows,
            vec![(0, ResultCode::NotFound.code())],
            "no row was written"
        );
    }

    #[test]
    fn large_batches_run_on_the_long_request_pool_and_small_ones_inline() {
        let state = test_state(5000);
        let small: Vec<Row<'_>> = (0..16).map(read_all).collect();
        let large: Vec<Row<'_>> = (0..200).map(read_all).collect();
        let job =
            |rows: &[Row<'_>]| BatchJob::new(state.clone(), batch_body(ALL, rows), Received::now());
        assert!(!job(&small).is_long());
        assert!(job(&large).is_long());
    }

    #[test]
    fn a_job_dropped_before_its_end_counts_as_an_error() {
        let state = test_state(5000);
        let reads: Vec<Row<'_>> = (0..2).map(read_all).collect();
        drop(BatchJob::new(
            state.clone(),
            batch_body(ALL, &reads),
            Received::now(),
        ));
        let mut value = String::new();
        write_batch_statistics(&state.batch, &mut value);
        assert_eq!(
            value,
            ";batch_index_initiate=1;batch_index_complete=0;batch_index_error=1;\
             batch_index_timeout=0"
        );
    }
}
