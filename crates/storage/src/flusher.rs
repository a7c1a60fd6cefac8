//! The flusher thread: writes sealed blocks and, when due, the current block's new bytes, then
//! syncs and advances the durable seq.
//!
//! A flush is due when a block is sealed, when a writer waits for durability (group commit:
//! whatever was appended by then goes in the same sync), or `flush-max-ms` after the oldest
//! unflushed append.
//!
//! Invariants:
//! - One flush at a time per storage (`flush_lock`), so flushes happen in append order and `durable_seq` is advanced
//!   only past entries whose bytes were written and synced.
//! - The bytes written for a block never overwrite bytes of that block already written in this
//!   use, except the 8-byte end marker: a torn flush can only damage entries no one was told
//!   are durable.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::StorageError;
use crate::format::END_MARKER_SIZE_BYTES;
use crate::store::{SealedBlock, Shared};

/// Bytes to write at one place of a block.
#[derive(Debug)]
struct Span {
    block: u32,
    use_seq: u64,
    offset_bytes: usize,
    bytes: Vec<u8>,
}

/// One flush: spans in order, then a sync, then what becomes true.
#[derive(Debug, Default)]
struct Job {
    spans: Vec<Span>,
    sealed: Vec<u32>,
    durable_seq: u64,
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
    let _one_at_a_time = shared.flush_lock.lock();
    let Some(job) = take_job(shared, flush_current) else {
        return Ok(());
    };
    execute(shared, &job).map_err(|reason| {
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
                bytes,
            });
            open.flushed_len = open.buf.len();
        }
    }
    (job.durable_seq > shared.durability.durable_seq() || !job.spans.is_empty()).then_some(job)
}

/// The bytes of a sealed block not yet written, with an end marker if there is room.
fn tail_span(full: SealedBlock, block_size: usize) -> Span {
    let tail = &full.buf[full.flushed_len..];
    let mut bytes = Vec::with_capacity(tail.len() + END_MARKER_SIZE_BYTES);
    bytes.extend_from_slice(tail);
    if full.buf.len() + END_MARKER_SIZE_BYTES <= block_size {
        bytes.extend_from_slice(&[0; END_MARKER_SIZE_BYTES]);
    }
    Span {
        block: full.block,
        use_seq: full.use_seq,
        offset_bytes: full.flushed_len,
        bytes,
    }
}

fn execute(shared: &Shared, job: &Job) -> Result<(), String> {
    let mut touched = vec![false; shared.devices.len()];
    for span in &job.spans {
        let (device, offset) = shared.address(span.block, span.offset_bytes);
        device
            .write_at(offset, &span.bytes)
            .map_err(|e| format!("write to {} at {offset}: {e}", device.name()))?;
        touched[(span.block / shared.blocks_per_device) as usize] = true;
    }
    for (device, _) in shared.devices.iter().zip(&touched).filter(|(_, t)| **t) {
        device
            .sync()
            .map_err(|e| format!("sync of {}: {e}", device.name()))?;
    }
    for span in job.spans.iter().filter(|span| span.offset_bytes == 0) {
        shared.blocks.first_flush_durable(span.block, span.use_seq);
    }
    for &block in &job.sealed {
        shared.blocks.sealed_durable(block);
        shared.recent.written(block);
    }
    shared.counters.flushes.fetch_add(1, Ordering::Relaxed);
    shared.durability.advance(job.durable_seq);
    let freed = shared.blocks.release_durable(job.durable_seq);
    shared
        .counters
        .blocks_freed
        .fetch_add(freed as u64, Ordering::Relaxed);
    Ok(())
}
