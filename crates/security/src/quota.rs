//! Rate quotas (with `enable-quotas`): the reads and the writes per second a user may make on
//! one node, from its roles' quotas. A user's quota is the largest of its roles' (a role with
//! none, 0, leaves it unlimited). Each single-record request and each batch row counts one; a
//! scan or query counts one read. Past the quota in a second, requests get QUOTA_EXCEEDED.
//!
//! Invariants:
//! - One meter per user, shared by its connections on both protocols; a meter counts within
//!   one second of the Unix clock, and starts again at 0 in the next (approximately, under
//!   concurrent requests at the turn of the second: a few may count in either).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::privilege::Action;

/// What a request counts as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A read (a get, a scan, a query, a UDF reading).
    Read,
    /// A write.
    Write,
}

impl Kind {
    /// What `action` counts as; `None` for administration, which quotas leave alone.
    pub fn of(action: Action) -> Option<Kind> {
        match action {
            Action::Read => Some(Kind::Read),
            Action::Write | Action::Udf => Some(Kind::Write),
            _ => None,
        }
    }
}

/// One user's counts in the current second.
#[derive(Debug, Default)]
pub struct Meter {
    second: AtomicU64,
    reads: AtomicU32,
    writes: AtomicU32,
}

impl Meter {
    /// Counts `count` requests of `kind` at `now_s`; false when that goes past `quota`
    /// (0: no quota).
    pub fn take(&self, kind: Kind, count: u32, quota: u32, now_s: u64) -> bool {
        self.turn(now_s);
        let counter = self.counter(kind);
        let before = counter.fetch_add(count, Ordering::Relaxed);
        quota == 0 || before.saturating_add(count) <= quota
    }

    /// Requests of `kind` counted in the second `now_s`.
    pub fn rate(&self, kind: Kind, now_s: u64) -> u32 {
        if self.second.load(Ordering::Relaxed) != now_s {
            return 0;
        }
        self.counter(kind).load(Ordering::Relaxed)
    }

    fn turn(&self, now_s: u64) {
        if self.second.load(Ordering::Relaxed) != now_s
            && self.second.swap(now_s, Ordering::Relaxed) != now_s
        {
            self.reads.store(0, Ordering::Relaxed);
            self.writes.store(0, Ordering::Relaxed);
        }
    }

    fn counter(&self, kind: Kind) -> &AtomicU32 {
        match kind {
            Kind::Read => &self.reads,
            Kind::Write => &self.writes,
        }
    }
}

/// A user's quotas and its meter, as its grants carry them.
#[derive(Clone, Debug)]
pub struct UserQuota {
    /// Reads per second; 0: no limit.
    pub read: u32,
    /// Writes per second; 0: no limit.
    pub write: u32,
    /// The user's meter.
    pub meter: Arc<Meter>,
}

impl PartialEq for UserQuota {
    fn eq(&self, other: &UserQuota) -> bool {
        (self.read, self.write) == (other.read, other.write)
            && Arc::ptr_eq(&self.meter, &other.meter)
    }
}

impl Eq for UserQuota {}

impl UserQuota {
    /// Counts `count` requests of `kind`; false when past the quota.
    pub fn take(&self, kind: Kind, count: u32, now_s: u64) -> bool {
        let quota = match kind {
            Kind::Read => self.read,
            Kind::Write => self.write,
        };
        self.meter.take(kind, count, quota, now_s)
    }
}

/// The meters of every user that made a request with quotas on.
#[derive(Debug, Default)]
pub struct Meters {
    by_user: Mutex<HashMap<String, Arc<Meter>>>,
}

impl Meters {
    /// `user`'s meter (made at its first use).
    pub fn of(&self, user: &str) -> Arc<Meter> {
        let mut by_user = self.by_user.lock();
        if let Some(meter) = by_user.get(user) {
            return Arc::clone(meter);
        }
        let meter = Arc::new(Meter::default());
        by_user.insert(user.to_owned(), Arc::clone(&meter));
        meter
    }

    /// Forgets the meter of a user that is gone.
    pub fn forget(&self, user: &str) {
        self.by_user.lock().remove(user);
    }
}

/// The effective quota of a user whose roles have `quotas`: the largest, and none (0) when
/// any role has none.
pub fn effective(quotas: impl IntoIterator<Item = u32>) -> u32 {
    let mut largest = None;
    for quota in quotas {
        if quota == 0 {
            return 0;
        }
        largest = Some(largest.map_or(quota, |largest: u32| largest.max(quota)));
    }
    largest.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_refuses_past_its_quota_until_the_next_second() {
        let meter = Meter::default();
        for _ in 0..3 {
            assert!(meter.take(Kind::Read, 1, 3, 10));
        }
        assert!(!meter.take(Kind::Read, 1, 3, 10));
        assert!(
            meter.take(Kind::Write, 1, 3, 10),
            "writes count apart from reads"
        );
        assert_eq!(meter.rate(Kind::Read, 10), 4);
        assert!(meter.take(Kind::Read, 1, 3, 11));
        assert_eq!(meter.rate(Kind::Read, 11), 1);
        assert!(
            !meter.take(Kind::Read, 5, 3, 11),
            "a batch of rows counts each"
        );
        assert!(meter.take(Kind::Read, 1_000, 0, 11), "no quota: no limit");
    }

    #[test]
    fn the_effective_quota_is_the_largest_and_a_role_without_one_lifts_it() {
        assert_eq!(effective([100, 500]), 500);
        assert_eq!(effective([100, 0]), 0);
        assert_eq!(effective([]), 0);
    }
}
