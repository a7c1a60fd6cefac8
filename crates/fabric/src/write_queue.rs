//! [`WriteQueue`]: the frames waiting for one connection's writer task.
//!
//! Pushing never waits: a caller learns at once that the queue is full, and the frames that
//! were accepted go out in the order they were pushed.
//!
//! Invariants:
//! - At most `frames_max` frames and `bytes_max` bytes are queued, except that an empty queue
//!   accepts one frame of any size (a frame the codec allows must be sendable).
//! - Frames leave in push order; one batch is at most [`WRITE_BATCH_BYTES_MAX`] bytes unless
//!   its single frame is larger.
//! - Once closed, the queue accepts nothing and its writer drains nothing more.

use std::collections::VecDeque;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::config::WRITE_BATCH_BYTES_MAX;

/// Why a frame was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PushRefused {
    /// The connection is closing.
    Closed,
    /// The queue is at its limit.
    Full,
}

/// Frames waiting for one writer, bounded in count and bytes.
pub(crate) struct WriteQueue {
    state: Mutex<QueueState>,
    /// Wakes the writer; a notification with no waiter is kept for its next wait.
    frames_ready: Notify,
    bytes_max: usize,
    frames_max: usize,
}

struct QueueState {
    frames: VecDeque<Bytes>,
    queued_bytes: usize,
    closed: bool,
}

impl WriteQueue {
    /// An empty queue with the given limits.
    pub(crate) fn new(bytes_max: usize, frames_max: usize) -> WriteQueue {
        assert!(bytes_max > 0, "a write queue holds at least one byte");
        assert!(frames_max > 0, "a write queue holds at least one frame");
        WriteQueue {
            state: Mutex::new(QueueState {
                frames: VecDeque::new(),
                queued_bytes: 0,
                closed: false,
            }),
            frames_ready: Notify::new(),
            bytes_max,
            frames_max,
        }
    }

    /// Queues `frame` behind every frame pushed before it.
    ///
    /// # Errors
    ///
    /// [`PushRefused`] when the queue is closed or full.
    pub(crate) fn push(&self, frame: Bytes) -> Result<(), PushRefused> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(PushRefused::Closed);
        }
        let fits = state.frames.is_empty()
            || (state.frames.len() < self.frames_max
                && state.queued_bytes + frame.len() <= self.bytes_max);
        if !fits {
            return Err(PushRefused::Full);
        }
        state.queued_bytes += frame.len();
        state.frames.push_back(frame);
        drop(state);
        self.frames_ready.notify_one();
        Ok(())
    }

    /// Waits for frames and moves the next batch into `batch`, oldest first. Returns `false`,
    /// with `batch` untouched, once the queue is closed.
    #[cfg(test)]
    pub(crate) async fn pop_batch(&self, batch: &mut Vec<Bytes>) -> bool {
        self.wait_frames().await && self.take_batch(batch)
    }

    /// Waits until frames are queued (`true`) or the queue is closed (`false`).
    pub(crate) async fn wait_frames(&self) -> bool {
        loop {
            {
                let state = self.state.lock();
                if state.closed {
                    return false;
                }
                if !state.frames.is_empty() {
                    return true;
                }
            }
            self.frames_ready.notified().await;
        }
    }

    /// Moves the next batch into `batch`, oldest first (none when the queue is empty).
    /// Returns `false`, with `batch` untouched, once the queue is closed.
    pub(crate) fn take_batch(&self, batch: &mut Vec<Bytes>) -> bool {
        let mut state = self.state.lock();
        if state.closed {
            return false;
        }
        take_batch(&mut state, batch);
        true
    }

    /// Closes the queue: frames still queued are dropped, and the writer stops.
    pub(crate) fn close(&self) {
        let mut state = self.state.lock();
        state.closed = true;
        state.frames.clear();
        state.queued_bytes = 0;
        drop(state);
        self.frames_ready.notify_one();
    }
}

fn take_batch(state: &mut QueueState, batch: &mut Vec<Bytes>) {
    let mut batch_bytes = 0;
    while let Some(frame) = state.frames.front() {
        let over = batch_bytes + frame.len() > WRITE_BATCH_BYTES_MAX;
        if over && batch_bytes > 0 {
            break;
        }
        batch_bytes += frame.len();
        state.queued_bytes -= frame.len();
        if let Some(frame) = state.frames.pop_front() {
            batch.push(frame);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_leave_in_push_order_and_limits_refuse_at_once() {
        let queue = WriteQueue::new(10, 3);
        assert_eq!(queue.push(Bytes::from_static(b"0123456789ab")), Ok(()));
        assert_eq!(queue.push(Bytes::from_static(b"c")), Err(PushRefused::Full));
        let mut batch = Vec::new();
        assert!(queue.pop_batch(&mut batch).await);
        assert_eq!(batch, [Bytes::from_static(b"0123456789ab")]);
        batch.clear();
        for frame in [&b"a"[..], b"b", b"c"] {
            assert_eq!(queue.push(Bytes::copy_from_slice(frame)), Ok(()));
        }
        assert_eq!(queue.push(Bytes::from_static(b"d")), Err(PushRefused::Full));
        assert!(queue.pop_batch(&mut batch).await);
        assert_eq!(batch, [&b"a"[..], b"b", b"c"]);
        queue.close();
        assert_eq!(
            queue.push(Bytes::from_static(b"e")),
            Err(PushRefused::Closed)
        );
        assert!(!queue.pop_batch(&mut batch).await);
    }
}
