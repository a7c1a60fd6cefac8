//! Memory that client connections hold in their buffers, bounded server-wide by
//! `service.client-memory-max` (Redis's `maxmemory-clients`).
//!
//! Every connection of either protocol owns an [`Account`] and reports, at its safe points
//! (after a read, after answering requests, after a write), how many bytes its input and output
//! buffers hold. A report is rounded down to [`CHARGE_STEP_BYTES`], so an ordinary connection
//! charges nothing and touches no shared state; the total is the sum of every charge. When a
//! charge takes the total over the limit, the accounts holding the most are told to close,
//! largest first, until the rest fits: the charging connection itself when it is the largest.
//! A connection told to close stops producing its reply and closes at its next safe point, or
//! at once if it is waiting for its client to read.
//!
//! Invariants:
//! - `total_bytes` is the sum of the charges of the live accounts; an account returns its
//!   charge when dropped.
//! - An account is in `tracked` exactly while it charges anything (it holds at least
//!   [`CHARGE_STEP_BYTES`]); only tracked accounts are told to close. What no account charges
//!   is bounded by the connection limits instead (`connections × CHARGE_STEP_BYTES` at most).
//! - A reply being built charges its growth to the total directly (`charge_reply`) and
//!   returns it when done (`release_reply`); it is never told to close, it is cut instead.
//! - Once told to close, an account stays told.
//! - Another connection may tell an account to close through its [`Closer`] (CLIENT KILL):
//!   the account learns it as it learns an eviction, at its next charge or while it waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Granularity of charges: a connection holding less charges nothing.
pub const CHARGE_STEP_BYTES: usize = 64 * 1024;

/// The server-wide account of client buffers, and the statistics of the limits on them.
#[derive(Debug)]
pub struct ClientMemory {
    /// `client-memory-max` in bytes; 0 = no limit.
    limit_bytes: usize,
    total_bytes: AtomicUsize,
    tracked: Mutex<Vec<Arc<Shared>>>,
    /// Connections closed because all clients together held more than the limit (Redis's
    /// `evicted_clients`).
    pub evicted: AtomicU64,
    /// Connections closed because their own unsent replies passed their limit, or were not
    /// read within the drain timeout (Redis's `client_output_buffer_limit_disconnections`).
    pub output_limit_closed: AtomicU64,
}

/// What an account shares with whoever may tell it to close.
#[derive(Debug, Default)]
struct Shared {
    charged_bytes: AtomicUsize,
    told_to_close: AtomicBool,
    /// Told by a [`Closer`] rather than for memory.
    killed: AtomicBool,
    wake: Notify,
}

/// Closes one connection from another (CLIENT KILL).
#[derive(Clone, Debug)]
pub struct Closer(Arc<Shared>);

impl Closer {
    /// Tells the connection to close; it stays told.
    pub fn close(&self) {
        self.0.killed.store(true, Ordering::Relaxed);
        self.0.told_to_close.store(true, Ordering::Relaxed);
        self.0.wake.notify_one();
    }
}

/// One connection's share of [`ClientMemory`].
#[derive(Debug)]
pub struct Account {
    memory: Arc<ClientMemory>,
    shared: Arc<Shared>,
    tracked: bool,
    /// Whether it was ever tracked (and so may have been told to close).
    ever_tracked: bool,
}

/// The connection must close: all clients together hold more than `client-memory-max`, and it
/// holds the most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted;

impl ClientMemory {
    /// An account of client memory limited to `limit_bytes` (0 = no limit).
    pub fn new(limit_bytes: u64) -> ClientMemory {
        ClientMemory {
            limit_bytes: usize::try_from(limit_bytes).unwrap_or(usize::MAX),
            total_bytes: AtomicUsize::new(0),
            tracked: Mutex::new(Vec::new()),
            evicted: AtomicU64::new(0),
            output_limit_closed: AtomicU64::new(0),
        }
    }

    /// The limit in bytes; 0 = none.
    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    /// Bytes all accounts hold now (Redis's `mem_clients_normal`).
    pub fn total_bytes(&self) -> usize {
        self.total_bytes.load(Ordering::Relaxed)
    }

    /// Charges `bytes` more for a reply being built, unless that would take the total over
    /// the limit; returns whether it did. The reply returns its charge with
    /// [`ClientMemory::release_reply`].
    pub fn charge_reply(&self, bytes: usize) -> bool {
        let total = self.total_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if self.limit_bytes != 0 && total > self.limit_bytes {
            self.total_bytes.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Returns what [`ClientMemory::charge_reply`] charged for a reply.
    pub fn release_reply(&self, bytes: usize) {
        if bytes != 0 {
            self.total_bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
    }

    /// A new connection's account, charging nothing yet.
    pub fn open(self: &Arc<Self>) -> Account {
        Account {
            memory: Arc::clone(self),
            shared: Arc::new(Shared::default()),
            tracked: false,
            ever_tracked: false,
        }
    }

    /// Tells the tracked accounts holding the most to close, largest first, until the total
    /// without them is within the limit. Accounts already told count as gone.
    fn evict(&self) {
        let tracked = self.tracked.lock();
        let total = self.total_bytes.load(Ordering::Relaxed);
        let leaving: usize = tracked
            .iter()
            .filter(|account| account.told_to_close.load(Ordering::Relaxed))
            .map(|account| account.charged_bytes.load(Ordering::Relaxed))
            .sum();
        let mut over = total
            .saturating_sub(leaving)
            .saturating_sub(self.limit_bytes);
        let mut candidates: Vec<&Arc<Shared>> = tracked
            .iter()
            .filter(|account| !account.told_to_close.load(Ordering::Relaxed))
            .collect();
        candidates.sort_by_key(|account| {
            std::cmp::Reverse(account.charged_bytes.load(Ordering::Relaxed))
        });
        for account in candidates {
            if over == 0 {
                break;
            }
            account.told_to_close.store(true, Ordering::Relaxed);
            account.wake.notify_one();
            self.evicted.fetch_add(1, Ordering::Relaxed);
            over = over.saturating_sub(account.charged_bytes.load(Ordering::Relaxed));
        }
    }
}

impl Account {
    /// Reports that the connection's buffers hold `held_bytes`; tells the largest accounts to
    /// close when all of them together hold more than the limit.
    ///
    /// # Errors
    /// [`Evicted`] when this connection was told to close, now or before.
    pub fn charge(&mut self, held_bytes: usize) -> Result<(), Evicted> {
        let charge = held_bytes / CHARGE_STEP_BYTES * CHARGE_STEP_BYTES;
        if charge == 0 && !self.ever_tracked {
            // An ordinary connection: never tracked, so told only by a `Closer`.
            return self.check();
        }
        let before = self.shared.charged_bytes.load(Ordering::Relaxed);
        if charge != before {
            self.set_charge(before, charge);
        }
        self.check()
    }

    /// Whether this connection was told to close.
    ///
    /// # Errors
    /// [`Evicted`] when it was.
    pub fn check(&self) -> Result<(), Evicted> {
        match self.shared.told_to_close.load(Ordering::Relaxed) {
            true => Err(Evicted),
            false => Ok(()),
        }
    }

    /// Whether this connection may be told to close for memory while it waits: only tracked
    /// accounts are (so an ordinary Aerospike connection's wait registers no waker here).
    pub fn may_be_told(&self) -> bool {
        self.tracked
    }

    /// What closes this connection from another one.
    pub fn closer(&self) -> Closer {
        Closer(Arc::clone(&self.shared))
    }

    /// Whether this connection was told to close by a [`Closer`] (not for memory).
    pub fn was_killed(&self) -> bool {
        self.shared.killed.load(Ordering::Relaxed)
    }

    /// Completes once this connection is told to close.
    pub async fn told_to_close(&self) {
        while self.check().is_ok() {
            self.shared.wake.notified().await;
        }
    }

    /// What this account charges now, in bytes.
    pub fn charged_bytes(&self) -> usize {
        self.shared.charged_bytes.load(Ordering::Relaxed)
    }

    fn set_charge(&mut self, before: usize, charge: usize) {
        let memory = &*self.memory;
        self.shared.charged_bytes.store(charge, Ordering::Relaxed);
        let total = if charge > before {
            memory
                .total_bytes
                .fetch_add(charge - before, Ordering::Relaxed)
                + (charge - before)
        } else {
            memory
                .total_bytes
                .fetch_sub(before - charge, Ordering::Relaxed)
                - (before - charge)
        };
        let track = charge > 0;
        if track != self.tracked {
            let mut tracked = memory.tracked.lock();
            match track {
                true => tracked.push(Arc::clone(&self.shared)),
                false => tracked.retain(|account| !Arc::ptr_eq(account, &self.shared)),
            }
            self.tracked = track;
            self.ever_tracked |= track;
        }
        if charge > before && memory.limit_bytes != 0 && total > memory.limit_bytes {
            memory.evict();
        }
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        let before = self.shared.charged_bytes.load(Ordering::Relaxed);
        self.set_charge(before, 0);
        debug_assert!(!self.tracked, "an account with no charge is not tracked");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn small_buffers_charge_nothing_and_charges_return_when_dropped() {
        let memory = Arc::new(ClientMemory::new(0));
        let mut a = memory.open();
        a.charge(CHARGE_STEP_BYTES - 1).unwrap();
        assert_eq!(memory.total_bytes(), 0);
        a.charge(3 * MIB + 5).unwrap();
        assert_eq!(memory.total_bytes(), 3 * MIB);
        let mut b = memory.open();
        b.charge(MIB).unwrap();
        assert_eq!(memory.total_bytes(), 4 * MIB);
        a.charge(0).unwrap();
        assert_eq!(memory.total_bytes(), MIB);
        drop(b);
        assert_eq!(memory.total_bytes(), 0);
        assert!(memory.tracked.lock().is_empty());
    }

    #[test]
    fn over_the_limit_the_largest_accounts_are_told_to_close_until_the_rest_fits() {
        let memory = Arc::new(ClientMemory::new(10 * MIB as u64));
        let mut small = memory.open();
        let mut big = memory.open();
        let mut middle = memory.open();
        small.charge(2 * MIB).unwrap();
        big.charge(6 * MIB).unwrap();
        middle.charge(2 * MIB).unwrap();
        assert_eq!(memory.evicted.load(Ordering::Relaxed), 0, "10 MiB fits");
        // 13 MiB: telling the 6 MiB account to close leaves 7 MiB, within the limit.
        let mut growing = memory.open();
        assert_eq!(growing.charge(3 * MIB), Ok(()));
        assert_eq!(big.check(), Err(Evicted));
        assert_eq!(small.check(), Ok(()));
        assert_eq!(middle.check(), Ok(()));
        assert_eq!(memory.evicted.load(Ordering::Relaxed), 1);
        // Until the told account leaves, its bytes count as gone: no one else is told.
        growing.charge(4 * MIB).unwrap();
        assert_eq!(memory.evicted.load(Ordering::Relaxed), 1);
        drop(big);
        // Growing on its own past the limit: the grower holds the most, so it goes.
        assert_eq!(growing.charge(20 * MIB), Err(Evicted));
        assert_eq!(small.check(), Ok(()));
    }

    #[test]
    fn an_account_told_to_close_stays_told_after_its_buffers_shrink() {
        let memory = Arc::new(ClientMemory::new(MIB as u64));
        let mut ordinary = memory.open();
        assert_eq!(ordinary.charge(100), Ok(()));
        let mut big = memory.open();
        assert_eq!(big.charge(2 * MIB), Err(Evicted));
        // Its buffers freed, it charges nothing, yet it must still learn it was told.
        assert_eq!(big.charge(0), Err(Evicted));
        assert_eq!(ordinary.charge(0), Ok(()));
        assert_eq!(memory.total_bytes(), 0);
    }

    #[test]
    fn a_connection_waiting_on_its_client_wakes_when_told_to_close() {
        let memory = Arc::new(ClientMemory::new(3 * MIB as u64));
        let mut waiting = memory.open();
        waiting.charge(2 * MIB).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let wait = tokio::spawn(async move { waiting.told_to_close().await });
            tokio::task::yield_now().await;
            // Two accounts of 2 MiB: the first one tracked is told, and that is enough.
            let mut other = memory.open();
            assert_eq!(other.charge(2 * MIB), Ok(()));
            tokio::time::timeout(std::time::Duration::from_secs(5), wait)
                .await
                .expect("woken")
                .expect("no panic");
        });
    }
}
