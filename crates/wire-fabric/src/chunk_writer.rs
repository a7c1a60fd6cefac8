//! [`PartitionChunkWriter`]: encodes a [`crate::Message::PartitionChunk`] record by record,
//! straight from a partition walk, without collecting the records first.
//!
//! Invariants:
//! - The output buffer holds a whole, valid frame after [`PartitionChunkWriter::finish`], and
//!   exactly what it held before [`PartitionChunkWriter::begin`] if the writer is dropped
//!   unfinished: never half a frame.
//! - The record count and the done flag are patched in place; nothing is encoded twice.

use model::PartitionId;

use crate::frame::{begin_frame, finish_frame};
use crate::list::ListItem;
use crate::writer::{put_flag, put_namespace, put_partition, put_u32, put_u64};
use crate::{MessageType, RecordVersion};

/// A partition chunk being appended to an output buffer.
#[derive(Debug)]
pub struct PartitionChunkWriter<'o> {
    out: &'o mut Vec<u8>,
    frame_start: usize,
    /// Where the done flag byte is.
    done_position: usize,
    /// Where the u32 record count is.
    count_position: usize,
    record_count: u32,
    finished: bool,
}

impl<'o> PartitionChunkWriter<'o> {
    /// Starts a chunk frame at the end of `out`: header, request id, namespace, partition.
    ///
    /// # Panics
    ///
    /// If `namespace` is empty or over 31 bytes, or `partition` is not below 4096.
    pub fn begin(
        out: &'o mut Vec<u8>,
        request_id: u64,
        namespace: &[u8],
        partition: PartitionId,
    ) -> PartitionChunkWriter<'o> {
        let frame_start = begin_frame(out, MessageType::PartitionChunk);
        put_u64(out, request_id);
        put_namespace(out, namespace);
        put_partition(out, partition);
        let done_position = out.len();
        put_flag(out, false);
        let count_position = out.len();
        put_u32(out, 0);
        PartitionChunkWriter {
            out,
            frame_start,
            done_position,
            count_position,
            record_count: 0,
            finished: false,
        }
    }

    /// Appends one record.
    ///
    /// # Panics
    ///
    /// If the record's set name is over 63 bytes, or the chunk already holds `u32::MAX`
    /// records.
    pub fn push(&mut self, record: &RecordVersion<'_>) {
        self.record_count = self
            .record_count
            .checked_add(1)
            .expect("a chunk holds at most u32::MAX records");
        record.write(self.out);
    }

    /// How many records were pushed.
    pub fn record_count(&self) -> u32 {
        self.record_count
    }

    /// How many bytes the frame takes so far, header included: what a stream compares with
    /// the requested chunk size.
    pub fn frame_size_bytes(&self) -> usize {
        self.out.len() - self.frame_start
    }

    /// Completes the frame; `done` says no record of the partition follows these.
    ///
    /// # Panics
    ///
    /// If the body is over `u32::MAX` bytes.
    pub fn finish(mut self, done: bool) {
        self.out[self.done_position] = u8::from(done);
        let count = self.record_count.to_be_bytes();
        self.out[self.count_position..self.count_position + 4].copy_from_slice(&count);
        finish_frame(self.out, self.frame_start);
        self.finished = true;
    }
}

impl Drop for PartitionChunkWriter<'_> {
    /// An unfinished chunk is removed, so the buffer never holds half a frame.
    fn drop(&mut self) {
        if !self.finished {
            self.out.truncate(self.frame_start);
        }
    }
}
