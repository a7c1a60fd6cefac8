//! Acknowledgement as a value: what must happen before a change may be acknowledged to its
//! client.
//!
//! Every change a client makes hands its caller, through the [`Acks`] the caller passes in, what
//! stands between the change and its acknowledgement: the point its storage's log must reach
//! with `commit-to-device` ([`storage::DurablePoint`]), and the replicas that must confirm it on
//! a cluster ([`AckLatch`], given out by the namespace's change sink). The connection that ran
//! the commands awaits its `Acks` once per batch of replies, then sends them: one flush and one
//! round of replica acknowledgements serve a whole pipeline.
//!
//! Invariants:
//! - `Acks` keeps at most one durable point per storage (the latest), so its size is bounded by
//!   the number of namespaces and latches a batch touched, not by its number of writes.
//! - A latch settles once: when its count of awaited confirmations reaches zero, or at its
//!   first failure. Waiting on a settled latch returns at once, with the same outcome.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use model::ResultCode;
use parking_lot::{Condvar, Mutex};
use storage::DurablePoint;

/// Why a change could not be acknowledged: it was applied here but may not survive.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// The storage failed before the change was durable.
    #[error("the change may not be durable: {0}")]
    NotDurable(String),
    /// A replica did not confirm the change (the result it answered, or TIMEOUT).
    #[error("a replica did not confirm the change (result {0:?})")]
    NotReplicated(ResultCode),
}

/// What a batch of changes waits for before its replies go out.
#[derive(Debug, Default)]
pub struct Acks {
    durable: Vec<DurablePoint>,
    latches: Vec<Arc<AckLatch>>,
    /// The writes being made now were asked for with commit level master: nobody waits for
    /// their replicas.
    commit_level_master: bool,
}

impl Acks {
    /// Whether the writes made from now on wait for their replicas' confirmations (commit
    /// level all, the clients' default) or not (commit level master).
    pub fn set_commit_level_master(&mut self, master: bool) {
        self.commit_level_master = master;
    }

    /// Whether a change made now must wait for its replicas (see
    /// [`Acks::set_commit_level_master`]); a change sink asks.
    pub fn replicas_awaited(&self) -> bool {
        !self.commit_level_master
    }

    /// Whether nothing needs waiting for.
    pub fn is_empty(&self) -> bool {
        self.durable.is_empty() && self.latches.is_empty()
    }

    /// The change is acknowledged only once its storage's log is durable up to `point`.
    pub fn add_durable(&mut self, point: DurablePoint) {
        let mut point = point;
        for kept in &mut self.durable {
            match kept.merge(point) {
                Ok(()) => return,
                Err(other) => point = other,
            }
        }
        self.durable.push(point);
    }

    /// The change is acknowledged only once `latch` settles successfully.
    pub fn add_latch(&mut self, latch: Arc<AckLatch>) {
        if !self.latches.iter().any(|kept| Arc::ptr_eq(kept, &latch)) {
            self.latches.push(latch);
        }
    }

    /// Moves everything `other` waits for into this one.
    pub fn absorb(&mut self, other: Acks) {
        other.durable.into_iter().for_each(|p| self.add_durable(p));
        other.latches.into_iter().for_each(|l| self.add_latch(l));
    }

    /// Waits, without blocking a thread, until every change is acknowledged; leaves this empty.
    ///
    /// # Errors
    /// The first reason a change cannot be acknowledged: its replies must not say it succeeded.
    pub async fn settled(&mut self) -> Result<(), AckError> {
        let (durable, latches) = self.take();
        let mut outcome = Ok(());
        for point in durable {
            if let Err(error) = point.into_durable().await {
                outcome = outcome.and(Err(AckError::NotDurable(error.to_string())));
            }
        }
        for latch in latches {
            outcome = outcome.and(Settled(&latch).await);
        }
        outcome
    }

    /// [`Acks::settled`], blocking the thread (for callers outside an async runtime).
    ///
    /// # Errors
    /// As [`Acks::settled`].
    pub fn wait(&mut self) -> Result<(), AckError> {
        let (durable, latches) = self.take();
        let mut outcome = Ok(());
        for point in durable {
            if let Err(error) = point.into_durable().wait() {
                outcome = outcome.and(Err(AckError::NotDurable(error.to_string())));
            }
        }
        for latch in latches {
            outcome = outcome.and(latch.wait());
        }
        outcome
    }

    fn take(&mut self) -> (Vec<DurablePoint>, Vec<Arc<AckLatch>>) {
        (
            std::mem::take(&mut self.durable),
            std::mem::take(&mut self.latches),
        )
    }
}

#[derive(Debug, Default)]
struct LatchState {
    awaited: u32,
    outcome: Option<Result<(), AckError>>,
    wakers: Vec<Waker>,
}

/// A count of confirmations still awaited (replica acknowledgements), which settles at zero or
/// at the first failure. Waited on blocking ([`AckLatch::wait`]) or from [`Acks::settled`].
#[derive(Debug, Default)]
pub struct AckLatch {
    state: Mutex<LatchState>,
    settled: Condvar,
}

impl AckLatch {
    /// A latch awaiting `awaited` confirmations (settled at once when 0).
    pub fn new(awaited: u32) -> AckLatch {
        let outcome = (awaited == 0).then_some(Ok(()));
        AckLatch {
            state: Mutex::new(LatchState {
                awaited,
                outcome,
                wakers: Vec::new(),
            }),
            settled: Condvar::new(),
        }
    }

    /// One more confirmation is awaited (a latch already settled stays settled).
    pub fn expect_one(&self) {
        let mut state = self.state.lock();
        if state.outcome.is_none() {
            state.awaited += 1;
        }
    }

    /// One awaited confirmation arrived.
    pub fn confirm(&self) {
        let mut state = self.state.lock();
        if state.outcome.is_some() {
            return;
        }
        state.awaited = state.awaited.saturating_sub(1);
        if state.awaited == 0 {
            self.settle(state, Ok(()));
        }
    }

    /// A confirmation will never arrive: the latch settles with `error`.
    pub fn fail(&self, error: AckError) {
        let state = self.state.lock();
        if state.outcome.is_none() {
            self.settle(state, Err(error));
        }
    }

    /// The outcome, once settled.
    pub fn outcome(&self) -> Option<Result<(), AckError>> {
        self.state.lock().outcome.clone()
    }

    /// Blocks until settled.
    ///
    /// # Errors
    /// The failure it settled with.
    pub fn wait(&self) -> Result<(), AckError> {
        let mut state = self.state.lock();
        loop {
            if let Some(outcome) = &state.outcome {
                return outcome.clone();
            }
            self.settled.wait(&mut state);
        }
    }

    fn settle(
        &self,
        mut state: parking_lot::MutexGuard<'_, LatchState>,
        outcome: Result<(), AckError>,
    ) {
        state.outcome = Some(outcome);
        let wakers = std::mem::take(&mut state.wakers);
        drop(state);
        self.settled.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// Resolves when a latch settles.
struct Settled<'a>(&'a AckLatch);

impl Future for Settled<'_> {
    type Output = Result<(), AckError>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        // Checked under the lock `settle` takes, so no wake-up is missed.
        let mut state = self.0.state.lock();
        if let Some(outcome) = &state.outcome {
            return Poll::Ready(outcome.clone());
        }
        state.wakers.push(context.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latch_settles_when_every_confirmation_arrived() {
        let latch = Arc::new(AckLatch::new(1));
        latch.expect_one();
        let waiter = {
            let latch = Arc::clone(&latch);
            std::thread::spawn(move || latch.wait())
        };
        latch.confirm();
        assert_eq!(latch.outcome(), None, "one confirmation is still awaited");
        latch.confirm();
        assert_eq!(waiter.join().expect("no panic"), Ok(()));
    }

    #[test]
    fn the_first_failure_settles_a_latch_for_good() {
        let latch = AckLatch::new(2);
        latch.fail(AckError::NotReplicated(ResultCode::Timeout));
        latch.confirm();
        latch.confirm();
        assert_eq!(
            latch.wait(),
            Err(AckError::NotReplicated(ResultCode::Timeout))
        );
    }

    #[test]
    fn acks_keep_each_latch_once_and_empty_when_waited() {
        let latch = Arc::new(AckLatch::new(1));
        let mut acks = Acks::default();
        acks.add_latch(Arc::clone(&latch));
        acks.add_latch(Arc::clone(&latch));
        assert_eq!(acks.latches.len(), 1);
        latch.confirm();
        assert_eq!(acks.wait(), Ok(()));
        assert!(acks.is_empty());
    }
}
