//! Redis's views of the per-command latency histograms (kept by `resp::command_stats`):
//! `LATENCY HISTOGRAM` and INFO's `latencystats` section.
//!
//! `LATENCY HISTOGRAM` answers, per command, its calls and the cumulative count of calls under
//! each power of two of nanoseconds from 2^10 (about 1 µs) up, keyed by that bound in whole
//! microseconds, where the count grew, as Redis answers from its HdrHistogram (whose keys are
//! a little above the powers of two: 33 and 66 where Osprey's are 32 and 65). `latencystats`
//! answers `latency_percentiles_usec_<command>:p50=..,p99=..,p99.9=..` in microseconds with
//! three decimals, each the top of its bucket (within 12.5% above the truth).

use std::fmt::Write as _;

use super::histogram::Snapshot;
use crate::resp::command_stats::{self, CommandLatency};
use crate::resp::reply::Reply;

/// The first and last powers of two (in ns) that `LATENCY HISTOGRAM` reports under.
const FIRST_EXPONENT: u32 = 10;
const LAST_EXPONENT: u32 = 37;

/// The cumulative counts of `histogram` under each power of two of nanoseconds where the
/// count grew: `(bound in µs, calls under it)`.
pub fn cumulative_usec(histogram: &Snapshot) -> Vec<(u64, u64)> {
    let total = histogram.count();
    let mut previous = 0;
    let mut points = Vec::new();
    for exponent in FIRST_EXPONENT..=LAST_EXPONENT {
        let bound_ns = 1u64 << exponent;
        let under = match exponent == LAST_EXPONENT {
            true => total,
            false => histogram.count_below(bound_ns),
        };
        if under > previous {
            points.push((bound_ns / 1_000, under));
            previous = under;
        }
    }
    points
}

/// LATENCY HISTOGRAM [command ...]: every command with calls, or the named ones (a container
/// command names its subcommands too); unknown names are skipped, as in Redis.
pub fn reply_histogram(names: &[String], reply: &mut Reply<'_>) {
    let wanted = |counted: &str| {
        names.is_empty()
            || names.iter().any(|name| {
                counted == name
                    || counted
                        .strip_prefix(name.as_str())
                        .is_some_and(|rest| rest.starts_with('|'))
            })
    };
    let latencies = command_stats::latencies(wanted);
    reply.map(latencies.len());
    for CommandLatency {
        name,
        calls,
        histogram,
    } in latencies
    {
        reply.bulk(name.as_bytes());
        reply.map(2);
        reply.bulk(b"calls");
        reply.integer(i64::try_from(calls).unwrap_or(i64::MAX));
        reply.bulk(b"histogram_usec");
        let points = cumulative_usec(&histogram);
        reply.map(points.len());
        for (bound_usec, under) in points {
            reply.integer(i64::try_from(bound_usec).unwrap_or(i64::MAX));
            reply.integer(i64::try_from(under).unwrap_or(i64::MAX));
        }
    }
}

/// INFO's `latencystats` section: a line per command with calls, with the percentiles of
/// `latency-tracking-info-percentiles`.
pub fn latencystats() -> String {
    let mut text = String::from("# Latencystats\r\n");
    if !command_stats::latency_tracking() {
        return text;
    }
    let percentiles = command_stats::info_percentiles();
    for latency in command_stats::latencies(|_| true) {
        let _ = write!(text, "latency_percentiles_usec_{}:", latency.name);
        for (position, percentile) in percentiles.iter().enumerate() {
            let ticks = latency
                .histogram
                .quantile_ticks(percentile / 100.0)
                .unwrap_or(0);
            if position > 0 {
                text.push(',');
            }
            // A tick of Redis's unit is a nanosecond.
            let _ = write!(text, "p{percentile}={:.3}", ticks as f64 / 1_000.0);
        }
        text.push_str("\r\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::histogram::REDIS_UNIT_NS;
    use super::*;
    use crate::latency::Histogram;

    #[test]
    fn cumulative_counts_grow_at_powers_of_two_and_end_at_the_total() {
        let histogram = Histogram::new(REDIS_UNIT_NS);
        for nanoseconds in [500, 900, 1_500, 3_000, 3_500, 40_000] {
            histogram.record(Duration::from_nanos(nanoseconds));
        }
        assert_eq!(
            cumulative_usec(&histogram.snapshot()),
            [(1, 2), (2, 3), (4, 5), (65, 6)]
        );
    }
}
