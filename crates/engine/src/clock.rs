//! Where transactions get the time from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use model::CITRUSLEAF_EPOCH_UNIX_SECONDS;

/// A source of wall-clock time; the simulator and tests supply their own.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_unix_ms(&self) -> u64;

    /// The time as one transaction sees it.
    fn now(&self) -> Now {
        Now {
            unix_ms: self.now_unix_ms(),
        }
    }
}

/// One instant, read once per transaction so every check in it agrees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Milliseconds since the Unix epoch.
    pub unix_ms: u64,
}

impl Now {
    /// Whole seconds since Aerospike's epoch (2010-01-01), the unit of void times.
    pub fn epoch_seconds(self) -> u32 {
        let unix_seconds = self.unix_ms / 1000;
        let since_epoch = unix_seconds.saturating_sub(CITRUSLEAF_EPOCH_UNIX_SECONDS);
        u32::try_from(since_epoch).unwrap_or(u32::MAX)
    }
}

/// The operating system's clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_ms(&self) -> u64 {
        let since_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        u64::try_from(since_unix.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug)]
pub struct ManualClock {
    unix_ms: AtomicU64,
}

impl ManualClock {
    /// A clock stopped at `unix_ms`.
    pub fn new(unix_ms: u64) -> ManualClock {
        ManualClock {
            unix_ms: AtomicU64::new(unix_ms),
        }
    }

    /// Moves the clock forward by `ms`.
    pub fn advance_ms(&self, ms: u64) {
        self.unix_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_unix_ms(&self) -> u64 {
        self.unix_ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_seconds_count_from_2010() {
        let now = Now {
            unix_ms: (CITRUSLEAF_EPOCH_UNIX_SECONDS + 42) * 1000 + 999,
        };
        assert_eq!(now.epoch_seconds(), 42);
        assert_eq!(Now { unix_ms: 0 }.epoch_seconds(), 0);
    }
}
