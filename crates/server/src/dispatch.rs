//! Turns one AS_MSG request into an engine transaction and encodes its reply.
//!
//! Classification follows the Aerospike server (`service.c`, `thr_tsvc.c`): batch flag, then
//! namespace, then "no digest means scan/query", then write (delete or operate) or read.
//! Anything Osprey does not implement yet answers UNSUPPORTED_FEATURE rather than being skipped.
//! Field types it has no use for are ignored, as the Aerospike server ignores them.
//!
//! Invariants:
//! - Exactly one reply frame is appended to `out` per request.
//! - On an error, whatever the engine streamed into the reply is discarded and a bare header
//!   with the result code is sent instead.

use engine::{
    BinRef, DeleteRequest, ExistsPolicy, GenerationPolicy, ReadRequest, RecordMeta, ReplySink,
    WriteRequest,
};
use model::{Digest, OpCode, ResultCode, TtlRequest};
use wire_aerospike::{Message, MessageHeader, info1, info2, info3};

use std::sync::Arc;

use crate::batch::BatchJob;
use crate::scan::{self, ScanStream};
use crate::state::ServerState;

/// Info4 bits that start or take part in a multi-record transaction (Enterprise only).
const INFO4_TRANSACTION_MASK: u8 = 0x1f;

/// A request answered by a stream of frames, after the replies before it have been sent.
pub enum Streamed {
    /// A batch, answered chunk by chunk on the connection's task.
    Batch(BatchJob),
    /// A scan, answered by scan threads.
    Scan(ScanStream),
}

/// Handles one AS_MSG body: appends exactly one reply frame to `out`, or returns the stream
/// that will answer it.
pub fn handle_message(
    state: &Arc<ServerState>,
    body: &[u8],
    out: &mut Vec<u8>,
) -> Option<Streamed> {
    let parsed = Message::parse(body);
    if let Ok(message) = &parsed {
        if message.header.info1 & info1::BATCH != 0 {
            return Some(Streamed::Batch(BatchJob::new(state.clone(), body.to_vec())));
        }
        if message.fields.digest.is_none() {
            match scan::start(state, message) {
                Ok(stream) => return Some(Streamed::Scan(stream)),
                Err(code) => {
                    write_stream_error(out, code);
                    return None;
                }
            }
        }
    }
    let start = wire_aerospike::begin_response(out);
    let (result, streamed) = match parsed {
        Ok(message) => (execute(state, &message, out), is_multi_record(&message)),
        Err(_) => (Err(ResultCode::Parameter), false),
    };
    match result {
        Ok((meta, op_count)) => {
            let header = MessageHeader {
                generation: u32::from(meta.generation.0),
                record_ttl: meta.void_time.0,
                op_count,
                ..MessageHeader::default()
            };
            wire_aerospike::finish_response(out, start, &header);
        }
        Err(code) => {
            out.truncate(start);
            if streamed {
                write_stream_error(out, code);
            } else {
                wire_aerospike::write_bare_response(out, code.code(), 0, 0);
            }
        }
    }
    None
}

/// Batch and scan replies are streams that end at a LAST message; a refusal must carry LAST or
/// the client waits for rows until its own timeout.
pub fn write_stream_error(out: &mut Vec<u8>, code: ResultCode) {
    let start = wire_aerospike::begin_response(out);
    let header = MessageHeader {
        info3: info3::LAST,
        result_code: code.code(),
        ..MessageHeader::default()
    };
    wire_aerospike::finish_response(out, start, &header);
}

/// Appends a bare reply with `code`, for requests that never reach the engine.
pub fn reply_error(out: &mut Vec<u8>, code: ResultCode) {
    wire_aerospike::write_bare_response(out, code.code(), 0, 0);
}

/// Batch (info1 BATCH) and scan/query (no digest) requests are answered with a stream.
fn is_multi_record(message: &Message<'_>) -> bool {
    message.header.info1 & info1::BATCH != 0 || message.fields.digest.is_none()
}

fn execute(
    state: &ServerState,
    message: &Message<'_>,
    out: &mut Vec<u8>,
) -> Result<(RecordMeta, u16), ResultCode> {
    let header = &message.header;
    let fields = &message.fields;
    if header.info1 & info1::BATCH != 0 {
        return Err(ResultCode::UnsupportedFeature);
    }
    let namespace_name = fields.namespace.ok_or(ResultCode::Namespace)?;
    let namespace = state
        .namespace(namespace_name)
        .ok_or(ResultCode::Namespace)?;
    let digest_field = fields.digest.ok_or(ResultCode::UnsupportedFeature)?;
    let digest = Digest::from_slice(digest_field).ok_or(ResultCode::Parameter)?;
    if fields.udf || fields.filter_expression.is_some() {
        return Err(ResultCode::UnsupportedFeature);
    }
    if header.info4 & INFO4_TRANSACTION_MASK != 0 {
        return Err(ResultCode::EnterpriseOnly);
    }
    let set_name = fields.set.unwrap_or_default();
    let reply_size_bytes_max = reply_size_bytes_max(namespace.config().max_record_size_bytes);
    let reply_start = out.len();
    let mut sink = OpSink {
        out,
        reply_start,
        op_count: 0,
        reply_size_bytes_max,
        overflowed: false,
    };
    let meta = if header.info2 & info2::WRITE != 0 {
        if header.info2 & info2::DELETE != 0 {
            namespace.delete(&delete_request(header, digest, set_name, fields.key)?)?
        } else {
            let request = write_request(header, digest, set_name, fields.key)?;
            namespace.write(&request, message.ops(), &mut sink)?
        }
    } else if header.info1 & info1::READ != 0 {
        check_read_touch(header.record_ttl)?;
        let request = ReadRequest {
            digest,
            set_name,
            key: fields.key,
            respond_all_ops: header.info2 & info2::RESPOND_ALL_OPS != 0,
            read_all_bins: header.info1 & info1::GET_ALL != 0,
            header_only: header.info1 & info1::GET_NO_BINS != 0,
        };
        namespace.read(&request, message.ops(), &mut sink)?
    } else {
        return Err(ResultCode::Parameter);
    };
    if sink.overflowed {
        return Err(ResultCode::Parameter);
    }
    Ok((meta, sink.op_count))
}

/// The largest reply one command may produce: room for the whole record twice (say a read-all
/// next to reads of single bins) plus headers. Without a cap, a small request repeating a read
/// of a large bin thousands of times would make the server build a reply of gigabytes.
fn reply_size_bytes_max(max_record_size_bytes: u32) -> usize {
    const HEADROOM_BYTES: usize = 1024 * 1024;
    2 * max_record_size_bytes as usize + HEADROOM_BYTES
}

fn write_request<'a>(
    header: &MessageHeader,
    digest: Digest,
    set_name: &'a [u8],
    key: Option<&'a [u8]>,
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
    })
}

fn delete_request<'a>(
    header: &MessageHeader,
    digest: Digest,
    set_name: &'a [u8],
    key: Option<&'a [u8]>,
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

/// Reads carry `read-touch-ttl-percent` in the TTL slot: 0 (namespace default, which is off)
/// and -1 (never) are honoured; 1..=100 asks for read-touch, which Osprey does not implement
/// yet; anything else is a bad parameter, as in Aerospike's `read_touch.c`.
fn check_read_touch(record_ttl: u32) -> Result<(), ResultCode> {
    match record_ttl {
        0 | u32::MAX => Ok(()),
        1..=100 => Err(ResultCode::UnsupportedFeature),
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
