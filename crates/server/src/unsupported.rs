//! Requests for features Osprey does not implement yet: answered UNSUPPORTED_FEATURE (16),
//! counted per kind in `statistics`, and named in the log.
//!
//! Invariants:
//! - Each refused request is counted exactly once, under the one [`Unsupported`] kind that
//!   refused it (the first unsupported thing the request asks for).
//! - Each kind is logged at warn level at most once per [`LOG_INTERVAL_MS`], whatever the
//!   clients send, so a client repeating a refused request cannot flood the log; the line
//!   carries the count so far, and the counter keeps every one.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use model::ResultCode;
use tracing::warn;

/// The least time between two log lines about one kind: often enough that an operator sees a
/// client still asking, rarely enough that a client in a loop adds one line a minute.
pub const LOG_INTERVAL_MS: u64 = 60_000;

/// What a refused request asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// An expression (a filter or an op) using what Osprey cannot evaluate yet: a regular
    /// expression or a geo comparison.
    ExpressionOp,
    /// A scan or query outside the partition protocol (clients before 6.0).
    LegacyScan,
}

/// How many kinds there are: the size of the counter arrays.
const KIND_COUNT: usize = Unsupported::ALL.len();

impl Unsupported {
    /// Every kind, in the order `statistics` lists them.
    pub const ALL: [Unsupported; 2] = [Unsupported::ExpressionOp, Unsupported::LegacyScan];

    /// The name of this kind's counter in the `statistics` info reply.
    pub fn statistic_name(self) -> &'static str {
        match self {
            Unsupported::ExpressionOp => "unsupported_expression_ops",
            Unsupported::LegacyScan => "unsupported_legacy_scans",
        }
    }

    /// What was asked for, for people.
    pub fn description(self) -> &'static str {
        match self {
            Unsupported::ExpressionOp => "expressions with regular expressions",
            Unsupported::LegacyScan => "scans without partitions (clients before 6.0)",
        }
    }

    fn position(self) -> usize {
        self as usize
    }
}

/// The counters of refused requests, one per kind, and when each kind may be logged next.
#[derive(Debug)]
pub struct UnsupportedStats {
    counts: [AtomicU64; KIND_COUNT],
    /// Milliseconds after `epoch` from which the kind may be logged again (0: at once).
    next_log_ms: [AtomicU64; KIND_COUNT],
    epoch: Instant,
}

impl Default for UnsupportedStats {
    fn default() -> UnsupportedStats {
        UnsupportedStats {
            counts: Default::default(),
            next_log_ms: Default::default(),
            epoch: Instant::now(),
        }
    }
}

impl UnsupportedStats {
    /// Counts one request refused for `kind`, logs it unless that kind was logged less than
    /// [`LOG_INTERVAL_MS`] ago, and returns the result code to answer with.
    pub fn refuse(&self, kind: Unsupported) -> ResultCode {
        let count = self.counts[kind.position()].fetch_add(1, Ordering::Relaxed) + 1;
        if self.may_log(kind) {
            warn!(
                count,
                statistic = kind.statistic_name(),
                "{} are not supported yet: answered UNSUPPORTED_FEATURE (16) \
                 (logged at most once a minute per kind)",
                kind.description(),
            );
        }
        ResultCode::UnsupportedFeature
    }

    /// How many requests were refused for `kind`.
    pub fn count(&self, kind: Unsupported) -> u64 {
        self.counts[kind.position()].load(Ordering::Relaxed)
    }

    /// Appends `;name=count` for every kind to a `statistics` value.
    pub fn write_statistics(&self, value: &mut String) {
        for kind in Unsupported::ALL {
            let _ = write!(value, ";{}={}", kind.statistic_name(), self.count(kind));
        }
    }

    /// Whether `kind` may be logged now; if so, no other caller may until the interval passed.
    fn may_log(&self, kind: Unsupported) -> bool {
        let now_ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let next_log_ms = &self.next_log_ms[kind.position()];
        let next = next_log_ms.load(Ordering::Relaxed);
        // Of callers racing past the same deadline, only the one whose exchange lands logs.
        now_ms >= next
            && next_log_ms
                .compare_exchange(
                    next,
                    now_ms.saturating_add(LOG_INTERVAL_MS),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_position_and_statistic_name() {
        for (position, kind) in Unsupported::ALL.into_iter().enumerate() {
            assert_eq!(kind.position(), position, "{kind:?}");
            assert!(kind.statistic_name().starts_with("unsupported_"));
        }
        let mut names: Vec<&str> = Unsupported::ALL.map(Unsupported::statistic_name).to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KIND_COUNT);
    }

    /// A client in a loop must not write a log line per request: after the first refusal of a
    /// kind, the next log line of that kind waits a full interval, while every refusal counts.
    #[test]
    fn refusals_all_count_but_a_kind_logs_once_per_interval() {
        let stats = UnsupportedStats::default();
        assert!(stats.may_log(Unsupported::LegacyScan));
        assert!(!stats.may_log(Unsupported::LegacyScan));
        assert!(
            stats.may_log(Unsupported::ExpressionOp),
            "kinds are logged apart"
        );
        for _ in 0..1000 {
            assert_eq!(
                stats.refuse(Unsupported::LegacyScan),
                ResultCode::UnsupportedFeature
            );
        }
        assert_eq!(stats.count(Unsupported::LegacyScan), 1000);
        assert_eq!(stats.count(Unsupported::ExpressionOp), 0);
        let mut value = String::new();
        stats.write_statistics(&mut value);
        assert!(value.contains(";unsupported_legacy_scans=1000"));
    }
}
