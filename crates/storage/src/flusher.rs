//! The flusher thread: writes sealed blocks and, when due, the current block's new bytes, then
//! syncs and advances the durable seq.
//!
//! A flush is due when a writer waits for durability (group commit: whatever was appended by
//! then goes in the same sync), `flush-max-ms` after the oldest append not yet due, or at
//! shutdown. A block sealed in between is written at once (it leaves the write queue and the
//! page cache has it) but, without `commit-to-device` and while free space is plentiful, not
//! synced before the next due flush: one sync then covers every block written since, as an
//! append-only file with `appendfsync everysec` does. With `commit-to-device`, or once free
//! blocks fall below the defragmentation threshold (blocks are released only by syncs), every
//! flush syncs. Before the first flush that writes a block only in part (the block still being
//! filled), the device readies the block's region (`Device::prepare`), so that the syncs of the
//! flushes filling it write data alone.
//!
//! Invariants:
//! - One flush at a time per storage (`flush_lock`), so flushes happen in append order and
//!   `durable_seq` is advanced only past entries whose bytes were written and synced.
//! - What a flush wrote without syncing is in [`Unsynced`] until a sync: no block becomes
//!   durable, or released, on the strength of an unsynced write.
//! - The bytes written for a block never overwrite bytes of that block already written in this
//!   use, except the 8-byte end marker: a torn flush can only damage entries no one was told
//!   are durable.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::StorageError;
use crate::format::END_MARKER_SIZE_BYTES;
use crate::store::{SealedBlock, Shared};

/// Bytes to write at one place of a block: `buf[range]` at `offset_bytes`, then an end
/// marker right after them if `end_marker_after`. A sealed block's buffer is written as it is,
/// shared with the cache, not copied.
#[derive(Debug)]
struct Span {
    block: u32,
    use_seq: u64,
    offset_bytes: usize,
    buf: Arc<Vec<u8>>,
    range: Range<usize>,
    end_marker_after: bool,
    /// The block is still being filled: later flushes write after this span.
    open: bool,
}

/// One flush: spans in order, then (if due or required) a sync, then what becomes true.
#[derive(Debug, Default)]
struct Job {
    spans: Vec<Span>,
    sealed: Vec<u32>,
    durable_seq: u64,
    due: bool,
}

/// What flushes wrote and only a sync makes durable. Lives under `flush_lock`.
#[derive(Debug, Default)]
pub(crate) struct Unsynced {
    /// Blocks whose first bytes of their current use were written: (block, use_seq).
    first_writes: Vec<(u32, u64)>,
    /// Sealed blocks written in full.
    sealed: Vec<u32>,
    /// Every entry up to this seq was written.
    written_seq: u64,
    /// Which devices were written to, by index.
    devices_written: Vec<bool>,
}

/// Runs until the storage shuts down and everything was flushed.
pub(crate) fn run(shared: &Shared) {
    loop {
        let flush_now = shared.durability.wakeup.sleep(next_wait(shared));
        let shutting_down = shared.shutdown.load(Ordering::Acquire);
        // The error reached every waiter; the loop goes on so that shutdown still ends it.
        let _ = flush(shared, flush_now || shutting_down);
        if shutting_down {
            return;
        }
    }
}

/// Flushes everything appended so far, on the caller's thread.
pub(crate) fn flush_now(shared: &Shared) -> Result<(), StorageError> {
    if let Some(reason) = shared.durability.failure() {
        return Err(StorageError::Failed(reason));
    }
    flush(shared, true)
}

fn flush(shared: &Shared, flush_current: bool) -> Result<(), StorageError> {
    let mut unsynced = shared.flush_lock.lock();
    let Some(job) = take_job(shared, flush_current) else {
        return Ok(());
    };
    execute(shared, job, &mut unsynced).map_err(|reason| {
        tracing::error!("storage write failed, writes stop: {reason}");
        shared.failed.store(true, Ordering::Release);
        shared.durability.fail(reason.clone());
        StorageError::Failed(reason)
    })
}

/// How long to sleep: until the oldest unflushed append is `flush-max-ms` old.
fn next_wait(shared: &Shared) -> Duration {
    let max = Duration::from_millis(shared.config.flush_max_ms);
    match shared.writer.lock().unflushed_since {
        Some(since) => max.saturating_sub(since.elapsed()),
        None => max,
    }
}

fn take_job(shared: &Shared, flush_current: bool) -> Option<Job> {
    let mut writer = shared.writer.lock();
    let due = flush_current
        || writer.unflushed_since.is_some_and(|since| {
            since.elapsed().as_millis() >= u128::from(shared.config.flush_max_ms)
        });
    let mut job = Job::default();
    let block_size = shared.block_size() as usize;
    while let Some(full) = writer.sealed.pop_front() {
        job.durable_seq = full.last_seq;
        job.sealed.push(full.block);
        job.spans.push(tail_span(full, block_size));
    }
    if due {
        job.due = true;
        writer.unflushed_since = None;
        job.durable_seq = writer.next_seq - 1;
        if let Some(open) = writer.current.as_mut()
            && open.buf.len() > open.flushed_len
        {
            let tail = &open.buf[open.flushed_len..];
            let mut bytes = Vec::with_capacity(tail.len() + END_MARKER_SIZE_BYTES);
            bytes.extend_from_slice(tail);
            if open.buf.len() + END_MARKER_SIZE_BYTES <= block_size {
                bytes.extend_from_slice(&[0; END_MARKER_SIZE_BYTES]);
            }
            job.spans.push(Span {
                block: open.block,
                use_seq: open.use_seq,
                offset_bytes: open.flushed_len,
                range: 0..bytes.len(),
                buf: Arc::new(bytes),
                end_marker_after: false,
                open: true,
            });
            open.flushed_len = open.buf.len();
        }
    }
    // A due job with nothing new to write still syncs what earlier flushes wrote: the durable
    // seq lags behind it.
    (job.durable_seq > shared.durability.durable_seq() || !job.spans.is_empty()).then_some(job)
}

/// The bytes of a sealed block not yet written, with an end marker if there is room.
fn tail_span(full: SealedBlock, block_size: usize) -> Span {
    Span {
        block: full.block,
        use_seq: full.use_seq,
        offset_bytes: full.flushed_len,
        range: full.flushed_len..full.buf.len(),
        end_marker_after: full.buf.len() + END_MARKER_SIZE_BYTES <= block_size,
        buf: full.buf,
        open: false,
    }
}

fn execute(shared: &Shared, job: Job, unsynced: &mut Unsynced) -> Result<(), String> {
    write_spans(shared, &job.spans, unsynced)?;
    for &block in &job.sealed {
        // The file has its bytes (the page cache at least): reads may go there from now on.
        shared.recent.written(block);
    }
    unsynced.sealed.extend(job.sealed);
    unsynced.written_seq = unsynced.written_seq.max(job.durable_seq);
    if job.due || shared.config.commit_to_device || space_is_short(shared) {
        sync(shared, std::mem::take(unsynced))?;
    }
    Ok(())
}

fn write_spans(shared: &Shared, spans: &[Span], unsynced: &mut Unsynced) -> Result<(), String> {
    unsynced.devices_written.resize(shared.devices.len(), false);
    for span in spans {
        let (device, offset) = shared.address(span.block, span.offset_bytes);
        let write = |offset: u64, bytes: &[u8]| {
            device
                .write_at(offset, bytes)
                .map_err(|e| format!("write to {} at {offset}: {e}", device.name()))
        };
        if span.open && span.offset_bytes == 0 {
            // The syncs of the block's later flushes then write data alone.
            let block_start = shared.address(span.block, 0).1;
            device
                .prepare(block_start, shared.block_size() as usize)
                .map_err(|e| format!("preparing block {}: {e}", span.block))?;
        }
        let bytes = &span.buf[span.range.clone()];
        write(offset, bytes)?;
        if span.end_marker_after {
            write(offset + bytes.len() as u64, &[0; END_MARKER_SIZE_BYTES])?;
        }
        unsynced.devices_written[(span.block / shared.blocks_per_device) as usize] = true;
        if span.offset_bytes == 0 {
            unsynced.first_writes.push((span.block, span.use_seq));
        }
    }
    Ok(())
}

/// Whether free blocks fell below the defragmentation threshold: blocks come back only once
/// a sync made their copies durable, so every flush syncs.
fn space_is_short(shared: &Shared) -> bool {
    let threshold = shared.blocks.count() * usize::from(shared.config.defrag_start_pct()) / 100;
    shared.blocks.free_count() < threshold
}

/// Syncs the devices written to, then makes true what the writes promised.
fn sync(shared: &Shared, written: Unsynced) -> Result<(), String> {
    let written_devices = shared.devices.iter().zip(&written.devices_written);
    for (device, _) in written_devices.filter(|(_, written)| **written) {
        device
            .sync()
            .map_err(|e| format!("sync of {}: {e}", device.name()))?;
    }
    for (block, use_seq) in written.first_writes {
        shared.blocks.first_flush_durable(block, use_seq);
    }
    for block in written.sealed {
        shared.blocks.sealed_durable(block);
    }
    shared.counters.flushes.fetch_add(1, Ordering::Relaxed);
    shared.durability.advance(written.written_seq);
    let freed = shared.blocks.release_durable(written.written_seq);
    shared
        .counters
        .blocks_freed
        .fetch_add(freed as u64, Ordering::Relaxed);
    Ok(())
}
