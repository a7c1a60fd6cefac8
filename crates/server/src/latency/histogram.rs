//! Latency histograms: what the `latencies:` info command, Redis's `LATENCY HISTOGRAM` and
//! `INFO latencystats`, and the metrics endpoint answer from.
//!
//! A histogram counts durations in a unit of its own (a millisecond, a microsecond, or 1024 ns
//! for Redis's), as ticks of 1/1024 of that unit, in log-linear buckets: everything under one
//! unit (2^10 ticks) in one bucket, then each power of two from 1 to 2^26 units cut in
//! [`SUB_BUCKETS`] equal parts, then one bucket for all that is longer. A power of two units
//! is always a bucket's edge, so the counts Aerospike and Redis report (at least 2^i ms, under
//! 2^i × 1024 ns) are exact, and a percentile is the top of its bucket: at most 12.5% above
//! the truth.
//!
//! Recording is one atomic add to a bucket and one to the sum, on the recording thread's own
//! stripe of the histogram: threads rarely write the same cache line, and a read sums the
//! stripes.
//!
//! Invariants:
//! - `bucket_of(ns)` is the one bucket with `floor(b) <= ns < ceiling(b)`, where
//!   `floor(b) = ceiling(b - 1)` and bucket 0 starts at 0; the last bucket's ceiling is
//!   `u64::MAX`.
//! - A [`Snapshot`]'s counts are monotonic between resets, so the difference of two snapshots
//!   in time order counts what was recorded between them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

/// Buckets per power of two.
pub const SUB_BUCKETS: usize = 8;
const SUB_BUCKET_BITS: u32 = SUB_BUCKETS.trailing_zeros();
/// Ticks per unit, as a power of two: the first bucket holds everything under one unit.
const FLOOR_EXPONENT: u32 = 10;
/// Ticks in one unit.
pub const TICKS_PER_UNIT: u64 = 1 << FLOOR_EXPONENT;
/// 2^36 ticks (2^26 units): everything longer shares the last bucket.
const CEILING_EXPONENT: u32 = 36;
const OCTAVES: usize = (CEILING_EXPONENT - FLOOR_EXPONENT) as usize;
/// The first bucket, the octaves' buckets, and the overflow bucket.
pub const BUCKET_COUNT: usize = 2 + OCTAVES * SUB_BUCKETS;

/// Redis's unit: 1024 ns, so that a tick is a nanosecond.
pub const REDIS_UNIT_NS: u64 = TICKS_PER_UNIT;

fn nanoseconds(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
}

/// `nanoseconds` in ticks of a `unit_ns` unit (in 64 bits: a duration past 2^54 ns, 208
/// days, counts as the longest).
fn ticks_of_ns(nanoseconds: u64, unit_ns: u64) -> u64 {
    nanoseconds.saturating_mul(TICKS_PER_UNIT) / unit_ns.max(1)
}

/// The bucket a duration of `ticks` is counted in.
pub fn bucket_of(ticks: u64) -> usize {
    if ticks < TICKS_PER_UNIT {
        return 0;
    }
    let exponent = u64::BITS - 1 - ticks.leading_zeros();
    if exponent >= CEILING_EXPONENT {
        return BUCKET_COUNT - 1;
    }
    let sub = (ticks >> (exponent - SUB_BUCKET_BITS)) as usize & (SUB_BUCKETS - 1);
    1 + (exponent - FLOOR_EXPONENT) as usize * SUB_BUCKETS + sub
}

/// The first duration, in ticks, above bucket `bucket` (`u64::MAX` for the last).
pub fn ceiling_ticks(bucket: usize) -> u64 {
    if bucket == 0 {
        return 1 << FLOOR_EXPONENT;
    }
    if bucket >= BUCKET_COUNT - 1 {
        return u64::MAX;
    }
    let exponent = FLOOR_EXPONENT + ((bucket - 1) / SUB_BUCKETS) as u32;
    let sub = ((bucket - 1) % SUB_BUCKETS) as u64;
    (SUB_BUCKETS as u64 + sub + 1) << (exponent - SUB_BUCKET_BITS)
}

/// One set of bucket counters and the sum of the durations counted.
pub struct Buckets {
    counts: [AtomicU64; BUCKET_COUNT],
    sum_ns: AtomicU64,
}

impl Default for Buckets {
    fn default() -> Buckets {
        Buckets {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for Buckets {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Buckets")
            .field("count", &self.snapshot().count())
            .finish()
    }
}

impl Buckets {
    /// Counts one duration, in ticks of a `unit_ns` unit.
    pub fn record(&self, elapsed: Duration, unit_ns: u64) {
        self.record_many(elapsed, unit_ns, 1);
    }

    /// Counts `count` operations that each took `elapsed`.
    pub fn record_many(&self, elapsed: Duration, unit_ns: u64, count: u64) {
        let nanoseconds = nanoseconds(elapsed);
        let ticks = ticks_of_ns(nanoseconds, unit_ns);
        self.counts[bucket_of(ticks)].fetch_add(count, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(nanoseconds.saturating_mul(count), Ordering::Relaxed);
    }

    /// Adds these counts to `snapshot`.
    pub fn add_to(&self, snapshot: &mut Snapshot) {
        for (total, count) in snapshot.counts.iter_mut().zip(&self.counts) {
            *total += count.load(Ordering::Relaxed);
        }
        snapshot.sum_ns += self.sum_ns.load(Ordering::Relaxed);
    }

    /// These counts alone.
    pub fn snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot::default();
        self.add_to(&mut snapshot);
        snapshot
    }

    /// Adds `other`'s counts to these.
    pub fn absorb(&self, other: &Buckets) {
        for (count, from) in self.counts.iter().zip(&other.counts) {
            count.fetch_add(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.sum_ns
            .fetch_add(other.sum_ns.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Forgets everything counted.
    pub fn reset(&self) {
        for count in &self.counts {
            count.store(0, Ordering::Relaxed);
        }
        self.sum_ns.store(0, Ordering::Relaxed);
    }
}

/// How many stripes a [`Histogram`] has: the machine's threads, rounded up to a power of two.
static STRIPES: LazyLock<usize> = LazyLock::new(|| {
    std::thread::available_parallelism()
        .map_or(1, usize::from)
        .next_power_of_two()
        .min(64)
});

/// The last stripe handed to a thread.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe, handed round-robin on first use.
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed);
}

/// A histogram recorded from many threads: one [`Buckets`] per stripe.
#[derive(Debug)]
pub struct Histogram {
    unit_ns: u64,
    stripes: Box<[Buckets]>,
}

impl Histogram {
    /// A histogram of durations in a unit of `unit_ns` nanoseconds.
    pub fn new(unit_ns: u64) -> Histogram {
        Histogram {
            unit_ns,
            stripes: (0..*STRIPES).map(|_| Buckets::default()).collect(),
        }
    }

    /// Its unit, in nanoseconds.
    pub fn unit_ns(&self) -> u64 {
        self.unit_ns
    }

    /// Counts one duration on this thread's stripe.
    pub fn record(&self, elapsed: Duration) {
        self.record_many(elapsed, 1);
    }

    /// Counts `count` operations that each took `elapsed`, on this thread's stripe.
    pub fn record_many(&self, elapsed: Duration, count: u64) {
        let stripe = STRIPE.with(|stripe| *stripe) & (self.stripes.len() - 1);
        self.stripes[stripe].record_many(elapsed, self.unit_ns, count);
    }

    /// The sum of every stripe.
    pub fn snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for stripe in &self.stripes {
            stripe.add_to(&mut snapshot);
        }
        snapshot
    }
}

/// A histogram in Redis's unit, made when first recorded in (most Redis commands are never
/// called).
#[derive(Debug, Default)]
pub struct LazyBuckets(OnceLock<Box<Buckets>>);

impl LazyBuckets {
    /// Counts one duration.
    pub fn record(&self, elapsed: Duration) {
        self.0
            .get_or_init(Box::default)
            .record(elapsed, REDIS_UNIT_NS);
    }

    /// Adds the counts, if any, to `snapshot`.
    pub fn add_to(&self, snapshot: &mut Snapshot) {
        if let Some(buckets) = self.0.get() {
            buckets.add_to(snapshot);
        }
    }

    /// Adds `other`'s counts, if any, to these.
    pub fn absorb(&self, other: &LazyBuckets) {
        if let Some(from) = other.0.get() {
            self.0.get_or_init(Box::default).absorb(from);
        }
    }

    /// Forgets everything counted.
    pub fn reset(&self) {
        if let Some(buckets) = self.0.get() {
            buckets.reset();
        }
    }
}

/// A histogram's counts at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Count per bucket.
    pub counts: [u64; BUCKET_COUNT],
    /// The sum of the durations counted.
    pub sum_ns: u64,
}

impl Default for Snapshot {
    fn default() -> Snapshot {
        Snapshot {
            counts: [0; BUCKET_COUNT],
            sum_ns: 0,
        }
    }
}

impl Snapshot {
    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Durations counted that were at least `threshold` ticks, which must be a bucket's edge
    /// (a power of two from [`TICKS_PER_UNIT`] up is).
    pub fn count_at_least(&self, threshold: u64) -> u64 {
        let first = bucket_of(threshold);
        debug_assert!(first == 0 || ceiling_ticks(first - 1) == threshold);
        self.counts[first..].iter().sum()
    }

    /// Durations counted that were under `bound` ticks, a bucket's edge.
    pub fn count_below(&self, bound: u64) -> u64 {
        self.count() - self.count_at_least(bound)
    }

    /// The duration in ticks at quantile `quantile` (0 to 1), as the top of its bucket: `None`
    /// when nothing was counted.
    pub fn quantile_ticks(&self, quantile: f64) -> Option<u64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = ((quantile.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, bucket_count) in self.counts.iter().enumerate() {
            seen += bucket_count;
            if seen >= rank {
                return Some(ceiling_ticks(bucket).min(self.largest_bound_ns()));
            }
        }
        None
    }

    /// What was counted since `earlier`, a snapshot of the same histogram taken before this
    /// one (a reset between them counts from zero).
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let mut delta = Snapshot::default();
        for (bucket, (now, then)) in self.counts.iter().zip(&earlier.counts).enumerate() {
            delta.counts[bucket] = now.saturating_sub(*then);
        }
        delta.sum_ns = self.sum_ns.saturating_sub(earlier.sum_ns);
        delta
    }

    /// The overflow bucket's reported top: its floor, since it has no ceiling.
    fn largest_bound_ns(&self) -> u64 {
        ceiling_ticks(BUCKET_COUNT - 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bucket_holds_exactly_the_durations_between_its_edges() {
        let mut floor = 0;
        for bucket in 0..BUCKET_COUNT - 1 {
            let ceiling = ceiling_ticks(bucket);
            assert!(ceiling > floor, "bucket {bucket}");
            assert_eq!(bucket_of(floor), bucket, "floor of {bucket}");
            assert_eq!(bucket_of(ceiling - 1), bucket, "top of {bucket}");
            floor = ceiling;
        }
        assert_eq!(bucket_of(u64::MAX), BUCKET_COUNT - 1);
        assert_eq!(bucket_of(floor), BUCKET_COUNT - 1);
    }

    #[test]
    fn powers_of_two_are_edges_so_threshold_counts_are_exact() {
        let histogram = Histogram::new(REDIS_UNIT_NS);
        for micros in [1, 900, 1_000, 1_024, 1_500, 2_047, 2_048, 9_000, 70_000] {
            histogram.record(Duration::from_micros(micros));
        }
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count(), 9);
        // 2^20 ns is 1.048576 ms.
        assert_eq!(snapshot.count_at_least(1 << 20), 5);
        assert_eq!(snapshot.count_at_least(1 << 23), 2);
        // 1 µs is under 2^10 ns.
        assert_eq!(snapshot.count_below(1 << 10), 1);
        assert_eq!(snapshot.count_below(1 << 20), 4);
        assert_eq!(snapshot.sum_ns, 87_520_000);
    }

    #[test]
    fn a_quantile_is_the_top_of_its_bucket_within_an_eighth() {
        let histogram = Histogram::new(REDIS_UNIT_NS);
        for micros in 1..=1_000u64 {
            histogram.record(Duration::from_micros(micros));
        }
        let snapshot = histogram.snapshot();
        for (quantile, truth_ns) in [(0.5, 500_000.0), (0.99, 990_000.0), (0.999, 999_000.0)] {
            let reported = snapshot.quantile_ticks(quantile).expect("counted") as f64;
            assert!(
                reported >= truth_ns && reported <= truth_ns * 1.125,
                "q{quantile}: {reported} for {truth_ns}"
            );
        }
        assert_eq!(Snapshot::default().quantile_ticks(0.5), None);
    }

    #[test]
    fn a_later_snapshot_less_an_earlier_one_counts_what_came_between() {
        let histogram = Histogram::new(REDIS_UNIT_NS);
        histogram.record(Duration::from_millis(3));
        let earlier = histogram.snapshot();
        histogram.record(Duration::from_millis(20));
        let delta = histogram.snapshot().since(&earlier);
        assert_eq!(delta.count(), 1);
        assert_eq!(delta.count_at_least(1 << 24), 1);
    }

    #[test]
    fn a_millisecond_histogram_counts_whole_milliseconds_exactly() {
        let histogram = Histogram::new(1_000_000);
        for micros in [999, 1_000, 1_999, 2_000, 8_000] {
            histogram.record(Duration::from_micros(micros));
        }
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count_at_least(TICKS_PER_UNIT), 4);
        assert_eq!(snapshot.count_at_least(2 * TICKS_PER_UNIT), 2);
        assert_eq!(snapshot.count_at_least(8 * TICKS_PER_UNIT), 1);
    }

    #[test]
    fn stripes_of_other_threads_are_summed() {
        let histogram = std::sync::Arc::new(Histogram::new(REDIS_UNIT_NS));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let histogram = std::sync::Arc::clone(&histogram);
                std::thread::spawn(move || {
                    (0..100).for_each(|_| histogram.record(Duration::from_micros(5)));
                })
            })
            .collect();
        threads
            .into_iter()
            .for_each(|thread| thread.join().expect("recorder ends"));
        assert_eq!(histogram.snapshot().count(), 400);
    }
}
