//! Aggregations: a scan or query with a stream UDF (UDF_OP 1). As Aerospike's server does,
//! each partition this node masters that has selected records is one run of the stream
//! function over those records, and every value a run emits goes to the client in a message with no
//! fields and one bin, `SUCCESS`. The client runs the final reduce over the values of every
//! run and node.
//!
//! Invariants:
//! - A run reads its partition in pieces of at most `PIECE_ENTRIES` index entries, copying the
//!   selected records out under the partition's lock; Lua runs with no lock held.
//! - Only records of the queried set, in the index range and passing the filter expression
//!   reach a stream; the bins the message selects do not restrict what a stream sees.
//! - Each run is bounded by the UDF limits (time and memory); between pieces it stops at an
//!   abort, a departed client or the client's total timeout.
//! - The first failing run writes one `FAILURE` message and fails the job: every thread stops
//!   at its next piece, and the final message carries UDF_BAD_RESPONSE (100).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use engine::{PartitionRole, ScannedRecord};
use model::{CITRUSLEAF_EPOCH_UNIX_SECONDS, OpCode, ParticleType, ResultCode, VoidTime};
use udf::UdfRecord;
use wire_aerospike::{Message, MessageHeader, info1};

use super::{
    PartitionWork, ScanShared, WalkEnd, WorkList, Worker, deliver, throttle_sleep,
    write_partition_unavailable,
};
use crate::state::ServerState;
use crate::udf::UdfCall;

/// UDF_OP of an aggregation (Aerospike's `AS_UDF_OP_AGGREGATE`).
pub(super) const UDF_OP_AGGREGATE: u8 = 1;

/// The bin of each value an aggregation emits.
const SUCCESS_BIN: &[u8] = b"SUCCESS";
/// The bin of the message that reports a failed stream UDF.
const FAILURE_BIN: &[u8] = b"FAILURE";

/// What an aggregation runs, and where its modules are.
pub(super) struct Aggregation {
    call: UdfCall,
    state: Arc<ServerState>,
}

/// The aggregation a message asks for, if any.
///
/// A set this node does not know is answered as an empty one: Aerospike answers NOT_FOUND
/// without LAST, which the clients take as an empty answer.
///
/// # Errors
/// PARAMETER for malformed UDF fields or a short query (Aerospike runs aggregations as long
/// queries only).
pub(super) fn aggregation(
    state: &Arc<ServerState>,
    message: &Message<'_>,
    udf_op: Option<u8>,
) -> Result<Option<Aggregation>, ResultCode> {
    if udf_op != Some(UDF_OP_AGGREGATE) {
        return Ok(None);
    }
    if message.header.info1 & info1::SHORT_QUERY != 0 {
        return Err(ResultCode::Parameter);
    }
    let call = UdfCall::from_fields(&message.fields.udf_call)?;
    Ok(Some(Aggregation {
        call,
        state: state.clone(),
    }))
}

impl Worker<'_> {
    /// Runs the stream UDF over each partition this thread takes.
    pub(super) fn run_aggregation(&mut self, aggregation: &Aggregation) {
        while let Some((work, _)) = self.next_work() {
            if let WalkEnd::Stop = self.aggregate_partition(aggregation, work) {
                break;
            }
        }
        if self.chunk.has_records() {
            self.send_chunk();
        }
    }

    /// One run of the stream UDF over one partition's records.
    fn aggregate_partition(&mut self, aggregation: &Aggregation, work: PartitionWork) -> WalkEnd {
        let shared = self.shared;
        if shared.namespace.partition_role(work.partition).0 != PartitionRole::Master {
            // A partition the client named goes back to it as UNAVAILABLE, so that it asks
            // the master; a node-wide request leaves it to the master's own run.
            if let WorkList::Listed(_) = shared.work {
                write_partition_unavailable(&mut self.chunk.bytes, work.partition);
            }
            shared.job.partitions_done.fetch_add(1, Ordering::Relaxed);
            return WalkEnd::Next;
        }
        if !self.wait_for_throttle() {
            return WalkEnd::Stop;
        }
        let mut input = PartitionInput {
            shared,
            work,
            buffered: VecDeque::new(),
            exhausted: false,
        };
        if !input.has_records() {
            // As Aerospike, a partition with no selected record runs no stream: an `aggregate`
            // would otherwise emit its initial value for it.
            return self.partition_walked();
        }
        let (chunk, sink) = (&mut self.chunk, &mut self.sink);
        let mut delivered = true;
        let mut emit = |value: udf::Value| {
            if !delivered {
                return;
            }
            let (particle_type, bytes) = crate::udf::success_particle(value);
            write_value(&mut chunk.bytes, SUCCESS_BIN, particle_type, &bytes);
            if chunk.is_full() {
                delivered = deliver(chunk, sink, &shared.job);
            }
        };
        let mut next = || input.next();
        let ran = crate::udf::aggregate(
            &aggregation.state.udf,
            &aggregation.call,
            &mut next,
            &mut emit,
        );
        match ran {
            Ok(()) => self.partition_walked(),
            Err(error) => {
                // Runs failing at once on several threads report the first failure only.
                if shared.job.fail() {
                    let message = error.stream_failure_message();
                    tracing::debug!(task = shared.job.task_id, %message, "aggregation failed");
                    write_value(
                        &mut self.chunk.bytes,
                        FAILURE_BIN,
                        ParticleType::String as u8,
                        message.as_bytes(),
                    );
                }
                WalkEnd::Stop
            }
        }
    }

    /// The end of a partition's run: the next partition, unless the scan stopped meanwhile
    /// (then the partition is not done).
    fn partition_walked(&self) -> WalkEnd {
        let shared = self.shared;
        if shared.stopping() {
            return WalkEnd::Stop;
        }
        shared.job.partitions_done.fetch_add(1, Ordering::Relaxed);
        WalkEnd::Next
    }

    /// Waits until the records-per-second throttle lets the records read so far through;
    /// false if the scan stopped meanwhile. (An aggregation is throttled between partitions:
    /// a stream runs within its time limit, so it must not sleep.)
    fn wait_for_throttle(&self) -> bool {
        let shared = self.shared;
        loop {
            if shared.stopping() {
                return false;
            }
            let read = shared.job.records_sent.load(Ordering::Relaxed);
            match self.throttle.wait_until(read) {
                Some(until) => throttle_sleep(shared, until),
                None => return true,
            }
        }
    }
}

/// Appends a message with no fields and one bin holding a value (Aerospike's
/// `as_msg_make_val_response_bufbuilder`).
fn write_value(out: &mut Vec<u8>, bin_name: &[u8], particle_type: u8, value: &[u8]) {
    let start = wire_aerospike::begin_message(out);
    wire_aerospike::write_op(out, OpCode::Read as u8, particle_type, bin_name, value);
    let header = MessageHeader {
        op_count: 1,
        ..MessageHeader::default()
    };
    wire_aerospike::finish_message(out, start, &header);
}

/// One partition's selected records, read a piece at a time as a stream asks for them.
struct PartitionInput<'s> {
    shared: &'s ScanShared,
    work: PartitionWork,
    /// Records of the last piece not yet handed to the stream.
    buffered: VecDeque<StreamedRecord>,
    exhausted: bool,
}

impl PartitionInput<'_> {
    /// The next selected record, `None` at the partition's end or when the scan stops.
    fn next(&mut self) -> Option<Box<dyn UdfRecord + Send + Sync>> {
        if !self.has_records() {
            return None;
        }
        let record = self.buffered.pop_front()?;
        self.shared.job.records_sent.fetch_add(1, Ordering::Relaxed);
        Some(Box::new(record))
    }

    /// Whether a selected record is left, reading pieces until one is buffered; false at the
    /// partition's end or when the scan stops.
    fn has_records(&mut self) -> bool {
        loop {
            if !self.buffered.is_empty() {
                return true;
            }
            if self.exhausted || self.shared.stopping() {
                return false;
            }
            self.read_piece();
        }
    }

    /// Copies out the selected records of the next piece of the partition.
    fn read_piece(&mut self) {
        let shared = self.shared;
        let buffered = &mut self.buffered;
        let mut keep = |record: &ScannedRecord<'_>| {
            if shared.in_queried_set(record) && shared.passes(record) {
                buffered.push_back(StreamedRecord::copy_of(record));
            }
            true
        };
        self.exhausted = super::walk_piece(shared, &mut self.work, |record, _| keep(record));
    }
}

/// A record as a stream UDF reads it: a copy taken under its partition's lock, so that the
/// stream runs with no lock held.
struct StreamedRecord {
    digest: [u8; 20],
    set_name: Option<String>,
    key: Option<(u8, Vec<u8>)>,
    generation: u32,
    void_time: VoidTime,
    now_ms: u64,
    last_update_ms: u64,
    size_bytes: u64,
    bins: Vec<StreamedBin>,
}

/// One bin of a [`StreamedRecord`], as stored: decoded only if the stream reads it.
struct StreamedBin {
    name: Vec<u8>,
    particle_type: u8,
    value: Vec<u8>,
}

impl StreamedRecord {
    fn copy_of(record: &ScannedRecord<'_>) -> StreamedRecord {
        StreamedRecord {
            digest: record.digest.0,
            set_name: record
                .set_name
                .map(|name| String::from_utf8_lossy(name).into_owned()),
            key: record
                .user_key()
                .map(|(particle_type, key)| (particle_type, key.to_vec())),
            generation: u32::from(record.generation.0),
            void_time: record.void_time,
            now_ms: record.now_ms(),
            last_update_ms: record.last_update_ms(),
            size_bytes: record.size_bytes() as u64,
            bins: record
                .bins()
                .iter()
                .map(|bin| StreamedBin {
                    name: bin.name.to_vec(),
                    particle_type: bin.particle_type,
                    value: bin.value.to_vec(),
                })
                .collect(),
        }
    }
}

/// Read-only: the UDF runtime refuses every write to a stream's record before it reaches
/// here, so the writing methods change nothing and report failure.
impl UdfRecord for StreamedRecord {
    fn exists(&self) -> bool {
        true
    }

    fn bin(&self, name: &str) -> Option<udf::Value> {
        let bin = self.bins.iter().find(|bin| bin.name == name.as_bytes())?;
        Some(crate::udf::particle_to_udf(bin.particle_type, &bin.value))
    }

    fn set_bin(&mut self, _name: &str, _value: udf::Value) {}

    fn bin_names(&self) -> Vec<String> {
        self.bins
            .iter()
            .map(|bin| String::from_utf8_lossy(&bin.name).into_owned())
            .collect()
    }

    fn ttl(&self) -> u32 {
        let void_time_epoch_s = match self.void_time.0 {
            0 => 0,
            seconds => u64::from(seconds) + CITRUSLEAF_EPOCH_UNIX_SECONDS,
        };
        crate::udf::ttl_left_seconds(void_time_epoch_s, self.now_ms)
    }

    fn set_ttl(&mut self, _ttl: u32) {}

    fn generation(&self) -> u32 {
        self.generation
    }

    fn last_update_ms(&self) -> u64 {
        self.last_update_ms
    }

    fn set_name(&self) -> Option<String> {
        self.set_name.clone()
    }

    fn digest(&self) -> [u8; 20] {
        self.digest
    }

    fn key(&self) -> Option<udf::Value> {
        let (particle_type, key) = self.key.as_ref()?;
        Some(crate::udf::particle_to_udf(*particle_type, key))
    }

    fn device_size(&self) -> u64 {
        self.size_bytes
    }

    fn create(&mut self) -> i32 {
        1
    }

    fn update(&mut self) -> i32 {
        1
    }

    fn remove(&mut self) -> i32 {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_message_has_no_fields_and_one_bin() {
        let mut out = Vec::new();
        write_value(
            &mut out,
            SUCCESS_BIN,
            ParticleType::Integer as u8,
            &7i64.to_be_bytes(),
        );
        let message = Message::parse(&out).expect("a well-formed message");
        assert_eq!(message.header.field_count, 0);
        assert_eq!(message.header.op_count, 1);
        assert_eq!(message.header.result_code, 0);
        let ops: Vec<_> = message.ops().collect();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].bin_name, SUCCESS_BIN);
        assert_eq!(ops[0].value, &7i64.to_be_bytes()[..]);
    }
}
