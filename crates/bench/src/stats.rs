//! Counters and latency histograms per operation kind.
//!
//! Each worker thread records into its own [`Stats`] behind a mutex that only the reporter
//! contends for, once per interval: it adds the thread's interval into the run's totals and
//! resets it.
//!
//! Invariants:
//! - Every finished command is counted exactly once: as ok, not found, timeout or one error.
//! - Every command that got a reply (ok, not found or error) has one latency sample; timeouts
//!   have none (their time is the timeout), nor do commands never sent for want of a master.
//! - Every command sent to a node counts once in that node's requests, whatever its outcome;
//!   a command never sent counts in no node's.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::protocol::{ErrorLabel, Outcome};
use crate::source::OpKind;

/// Highest latency the histograms hold: 100 s in nanoseconds (larger samples are clamped).
const LATENCY_NS_MAX: u64 = 100_000_000_000;

/// Significant decimal digits kept by the histograms (0.1% resolution).
const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

/// What happened to one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    /// A reply arrived after `latency_ns` (from the intended start when throttled).
    Replied {
        /// How the server answered.
        outcome: Outcome,
        /// Nanoseconds from start to the complete reply.
        latency_ns: u64,
    },
    /// No reply within the timeout (`-T`).
    TimedOut,
    /// Not sent: no node claims the key's partition as master. Counted as an error
    /// ([`ErrorLabel::NoMaster`]) without a latency sample.
    NoMaster,
}

/// Counters and latency of one operation kind.
#[derive(Clone, Debug)]
pub struct OpStats {
    /// Commands answered as asked.
    pub ok: u64,
    /// Reads and deletes of missing keys.
    pub not_found: u64,
    /// Commands without a reply in time.
    pub timeouts: u64,
    /// Failed commands, by cause.
    pub errors: BTreeMap<ErrorLabel, u64>,
    /// Latency of every replied command, in nanoseconds.
    pub latency_ns: Histogram<u64>,
}

impl Default for OpStats {
    fn default() -> OpStats {
        OpStats {
            ok: 0,
            not_found: 0,
            timeouts: 0,
            errors: BTreeMap::new(),
            latency_ns: Histogram::new_with_bounds(1, LATENCY_NS_MAX, LATENCY_SIGNIFICANT_DIGITS)
                .expect("constant histogram bounds are valid"),
        }
    }
}

impl OpStats {
    /// Counts one finished command.
    pub fn record(&mut self, completion: Completion) {
        match completion {
            Completion::TimedOut => self.timeouts += 1,
            Completion::NoMaster => *self.errors.entry(ErrorLabel::NoMaster).or_default() += 1,
            Completion::Replied {
                outcome,
                latency_ns,
            } => {
                self.latency_ns.saturating_record(latency_ns.max(1));
                match outcome {
                    Outcome::Ok => self.ok += 1,
                    Outcome::NotFound => self.not_found += 1,
                    Outcome::Error(label) => *self.errors.entry(label).or_default() += 1,
                }
            }
        }
    }

    /// Every finished command, whatever its outcome.
    pub fn finished(&self) -> u64 {
        self.ok + self.not_found + self.timeouts + self.error_count()
    }

    /// Failed commands (timeouts not included).
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &OpStats) {
        self.ok += other.ok;
        self.not_found += other.not_found;
        self.timeouts += other.timeouts;
        for (label, count) in &other.errors {
            *self.errors.entry(label.clone()).or_default() += count;
        }
        self.latency_ns
            .add(&other.latency_ns)
            .expect("histograms with the same bounds always add");
    }

    /// Back to zero, keeping the histogram's allocation.
    pub fn reset(&mut self) {
        self.ok = 0;
        self.not_found = 0;
        self.timeouts = 0;
        self.errors.clear();
        self.latency_ns.reset();
    }
}

/// Counters of every operation kind, and of the commands sent to each node.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    by_kind: [OpStats; OpKind::ALL.len()],
    /// Finished commands per node, by the node's index in the run's routes.
    requests_by_node: Vec<u64>,
}

impl Stats {
    /// The stats of one kind.
    pub fn of(&self, kind: OpKind) -> &OpStats {
        &self.by_kind[kind as usize]
    }

    /// Counts one finished command of `kind` that was not sent to any node.
    pub fn record(&mut self, kind: OpKind, completion: Completion) {
        self.by_kind[kind as usize].record(completion);
    }

    /// Counts one finished command of `kind` sent to the node at `node_index`.
    pub fn record_at_node(&mut self, node_index: usize, kind: OpKind, completion: Completion) {
        if self.requests_by_node.len() <= node_index {
            self.requests_by_node.resize(node_index + 1, 0);
        }
        self.requests_by_node[node_index] += 1;
        self.record(kind, completion);
    }

    /// Finished commands sent to each node, by node index (nodes past the end got none).
    pub fn requests_by_node(&self) -> &[u64] {
        &self.requests_by_node
    }

    /// Commands not sent because no node claimed their key's partition as master.
    pub fn keys_without_master(&self) -> u64 {
        let no_master = |stats: &OpStats| stats.errors.get(&ErrorLabel::NoMaster).copied();
        self.by_kind.iter().filter_map(no_master).sum()
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Stats) {
        for (mine, theirs) in self.by_kind.iter_mut().zip(&other.by_kind) {
            mine.merge(theirs);
        }
        if self.requests_by_node.len() < other.requests_by_node.len() {
            self.requests_by_node
                .resize(other.requests_by_node.len(), 0);
        }
        for (mine, theirs) in self
            .requests_by_node
            .iter_mut()
            .zip(&other.requests_by_node)
        {
            *mine += theirs;
        }
    }

    /// Back to zero.
    pub fn reset(&mut self) {
        self.by_kind.iter_mut().for_each(OpStats::reset);
        self.requests_by_node
            .iter_mut()
            .for_each(|count| *count = 0);
    }

    /// Finished commands of every kind.
    pub fn finished(&self) -> u64 {
        self.by_kind.iter().map(OpStats::finished).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replied(outcome: Outcome, latency_ns: u64) -> Completion {
        Completion::Replied {
            outcome,
            latency_ns,
        }
    }

    #[test]
    fn every_completion_is_counted_once_and_replies_are_timed() {
        let mut stats = Stats::default();
        stats.record(OpKind::Read, replied(Outcome::Ok, 1_000));
        stats.record(OpKind::Read, replied(Outcome::NotFound, 2_000));
        stats.record(OpKind::Read, Completion::TimedOut);
        let busy = Outcome::Error(ErrorLabel::ResultCode(14));
        stats.record(OpKind::Write, replied(busy.clone(), 3_000));
        stats.record(OpKind::Write, replied(busy, 3_000));
        let read = stats.of(OpKind::Read);
        assert_eq!((read.ok, read.not_found, read.timeouts), (1, 1, 1));
        assert_eq!(read.latency_ns.len(), 2);
        let write = stats.of(OpKind::Write);
        assert_eq!(write.errors.get(&ErrorLabel::ResultCode(14)), Some(&2));
        assert_eq!(write.error_count(), 2);
        assert_eq!(stats.finished(), 5);
    }

    #[test]
    fn merge_adds_counts_and_histograms_and_reset_empties() {
        let mut total = Stats::default();
        let mut interval = Stats::default();
        for latency_ns in 1..=1000 {
            interval.record(OpKind::Write, replied(Outcome::Ok, latency_ns * 1000));
        }
        total.merge(&interval);
        total.merge(&interval);
        interval.reset();
        assert_eq!(interval.finished(), 0);
        assert_eq!(interval.of(OpKind::Write).latency_ns.len(), 0);
        let write = total.of(OpKind::Write);
        assert_eq!(write.ok, 2000);
        let p50_ns = write.latency_ns.value_at_quantile(0.5);
        assert!((499_000..=501_000).contains(&p50_ns), "p50 {p50_ns}");
        assert!(write.latency_ns.max() >= 999_000);
    }

    #[test]
    fn requests_count_per_node_and_unsent_commands_count_as_keys_without_master() {
        let mut interval = Stats::default();
        interval.record_at_node(1, OpKind::Read, replied(Outcome::Ok, 1_000));
        interval.record_at_node(1, OpKind::Write, Completion::TimedOut);
        interval.record_at_node(0, OpKind::Write, replied(Outcome::Ok, 1_000));
        interval.record(OpKind::Read, Completion::NoMaster);
        assert_eq!(interval.requests_by_node(), [1, 2]);
        assert_eq!(interval.keys_without_master(), 1);
        assert_eq!(
            interval.of(OpKind::Read).latency_ns.len(),
            1,
            "no sample when unsent"
        );
        assert_eq!(interval.finished(), 4);
        let mut total = Stats::default();
        total.merge(&interval);
        total.merge(&interval);
        interval.reset();
        assert_eq!(interval.requests_by_node(), [0, 0]);
        assert_eq!(total.requests_by_node(), [2, 4]);
        assert_eq!(total.keys_without_master(), 2);
    }

    #[test]
    fn huge_latencies_are_clamped_not_lost() {
        let mut stats = OpStats::default();
        stats.record(replied(Outcome::Ok, u64::MAX));
        stats.record(replied(Outcome::Ok, 0));
        assert_eq!(stats.latency_ns.len(), 2);
        assert_eq!(stats.ok, 2);
    }
}
