//! How far the log is durable, and waiting for it: group commit's other half.
//!
//! The flusher advances `durable_seq` after each successful sync; a writer that must not
//! acknowledge before its entry is durable waits for `durable_seq >= its seq`, blocking
//! ([`Durable::wait`]) or as a future (`Durable` implements [`Future`]). One sync serves every
//! waiter whose entry it covered.
//!
//! Invariants:
//! - `durable_seq` only grows, and every entry with a seq at most `durable_seq` is durable.
//! - Once `failure` is set it stays set: after a failed write or sync nothing later can be
//!   called durable, and every waiter not yet satisfied gets the failure.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

use crate::StorageError;

#[derive(Debug, Default)]
struct State {
    durable_seq: u64,
    failure: Option<String>,
    wakers: Vec<(u64, Waker)>,
}

/// The durable point of one storage and who waits for it.
#[derive(Debug, Default)]
pub(crate) struct Durability {
    state: Mutex<State>,
    changed: Condvar,
    /// Wakes the flusher: someone waits for a flush, or a block was sealed.
    pub(crate) wakeup: Wakeup,
}

/// Flags the flusher sleeps on. They stay raised until it wakes: a raise while it is busy
/// is not lost.
#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    flags: Mutex<Raised>,
    raised: Condvar,
}

#[derive(Debug, Default)]
struct Raised {
    /// Something to do: a block was sealed, or a flush is wanted.
    work: bool,
    /// A waiter wants the current block flushed now rather than after flush-max-ms.
    flush_wanted: bool,
}

impl Wakeup {
    /// Wakes the flusher; `flush_now` also asks it to flush the current block.
    pub(crate) fn raise(&self, flush_now: bool) {
        let mut flags = self.flags.lock();
        flags.work = true;
        flags.flush_wanted |= flush_now;
        drop(flags);
        self.raised.notify_one();
    }

    /// Sleeps until raised (now or since the last sleep) or `timeout` passes; returns (and
    /// clears) whether a flush is wanted.
    pub(crate) fn sleep(&self, timeout: std::time::Duration) -> bool {
        let mut flags = self.flags.lock();
        if !flags.work {
            self.raised.wait_for(&mut flags, timeout);
        }
        flags.work = false;
        std::mem::take(&mut flags.flush_wanted)
    }
}

impl Durability {
    pub(crate) fn durable_seq(&self) -> u64 {
        self.state.lock().durable_seq
    }

    /// Everything up to `seq` is durable.
    pub(crate) fn advance(&self, seq: u64) {
        let mut state = self.state.lock();
        if seq > state.durable_seq {
            state.durable_seq = seq;
        }
        let durable = state.durable_seq;
        let (ready, waiting) = std::mem::take(&mut state.wakers)
            .into_iter()
            .partition(|(wanted, _)| *wanted <= durable);
        state.wakers = waiting;
        drop(state);
        self.changed.notify_all();
        ready
            .into_iter()
            .for_each(|(_, waker): (u64, Waker)| waker.wake());
    }

    /// Nothing more will become durable.
    pub(crate) fn fail(&self, reason: String) {
        let mut state = self.state.lock();
        state.failure.get_or_insert(reason);
        let wakers = std::mem::take(&mut state.wakers);
        drop(state);
        self.changed.notify_all();
        wakers.into_iter().for_each(|(_, waker)| waker.wake());
    }

    pub(crate) fn failure(&self) -> Option<String> {
        self.state.lock().failure.clone()
    }
}

/// A promise that every entry up to a seq will be durable: wait for it before acknowledging.
#[derive(Debug)]
pub struct Durable {
    durability: Arc<Durability>,
    seq: u64,
}

impl Durable {
    pub(crate) fn new(durability: Arc<Durability>, seq: u64) -> Durable {
        if durability.durable_seq() < seq {
            durability.wakeup.raise(true);
        }
        Durable { durability, seq }
    }

    /// The seq waited for.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Blocks until the entries are durable.
    ///
    /// # Errors
    /// [`StorageError::Failed`] if a write or sync failed first: the entries may be lost.
    pub fn wait(&self) -> Result<(), StorageError> {
        let mut state = self.durability.state.lock();
        loop {
            if state.durable_seq >= self.seq {
                return Ok(());
            }
            if let Some(reason) = &state.failure {
                return Err(StorageError::Failed(reason.clone()));
            }
            self.durability.changed.wait(&mut state);
        }
    }
}

impl Future for Durable {
    type Output = Result<(), StorageError>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        // Checked under the lock the flusher advances under, so no wake-up is missed.
        let mut state = self.durability.state.lock();
        if state.durable_seq >= self.seq {
            return Poll::Ready(Ok(()));
        }
        if let Some(reason) = &state.failure {
            return Poll::Ready(Err(StorageError::Failed(reason.clone())));
        }
        state.wakers.push((self.seq, context.waker().clone()));
        Poll::Pending
    }
}

/// A point in one storage's log that must be durable before a write is acknowledged: the
/// value a write hands its caller with `commit-to-device`. Cheap to keep and merge; waiting
/// starts only with [`DurablePoint::into_durable`], so a pipeline of writes asks the flusher for
/// one flush, not one each.
#[derive(Clone, Debug)]
pub struct DurablePoint {
    durability: Arc<Durability>,
    seq: u64,
}

impl DurablePoint {
    pub(crate) fn new(durability: &Arc<Durability>, seq: u64) -> DurablePoint {
        DurablePoint {
            durability: Arc::clone(durability),
            seq,
        }
    }

    /// Folds `other` into this point when both are in the same log (keeping the later seq);
    /// hands it back otherwise.
    ///
    /// # Errors
    /// `other`, untouched, when it belongs to another storage.
    pub fn merge(&mut self, other: DurablePoint) -> Result<(), DurablePoint> {
        if !Arc::ptr_eq(&self.durability, &other.durability) {
            return Err(other);
        }
        self.seq = self.seq.max(other.seq);
        Ok(())
    }

    /// The seq to wait for.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Starts waiting: wakes the flusher if the point is not durable yet.
    pub fn into_durable(self) -> Durable {
        Durable::new(self.durability, self.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_wake_when_their_seq_is_durable() {
        let durability = Arc::new(Durability::default());
        let waiter = Durable::new(Arc::clone(&durability), 5);
        let handle = std::thread::spawn(move || waiter.wait());
        durability.advance(4);
        durability.advance(5);
        assert!(handle.join().expect("no panic").is_ok());
    }

    #[test]
    fn a_failure_reaches_every_waiter_not_yet_durable() {
        let durability = Arc::new(Durability::default());
        durability.advance(3);
        durability.fail("disk gone".to_owned());
        assert!(Durable::new(Arc::clone(&durability), 3).wait().is_ok());
        assert!(matches!(
            Durable::new(durability, 4).wait(),
            Err(StorageError::Failed(_))
        ));
    }

    #[test]
    fn points_merge_within_one_log_only() {
        let (a, b) = (
            Arc::new(Durability::default()),
            Arc::new(Durability::default()),
        );
        let mut point = DurablePoint::new(&a, 3);
        assert!(point.merge(DurablePoint::new(&a, 7)).is_ok());
        assert!(point.merge(DurablePoint::new(&a, 5)).is_ok());
        assert_eq!(point.seq(), 7);
        let other = point
            .merge(DurablePoint::new(&b, 2))
            .expect_err("another log");
        assert_eq!((point.seq(), other.seq()), (7, 2));
    }
}
