//! Turning statistics into what operators and machines read: the per-second line, the final
//! summary, and the tables of the scaling and per-connection tests, as text, JSON or CSV.
//!
//! Text is for people (aerospike-benchmark's `write(tps=...)` style); JSON is one object per
//! line (`"type"` says which); CSV has one header and one row per operation kind per line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::source::OpKind;
use crate::stats::{OpStats, Stats};

/// How results are printed (`--output`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// Lines for people.
    Text,
    /// One JSON object per line.
    Json,
    /// Comma-separated values with a header row.
    Csv,
}

/// Latency percentiles in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencyReport {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    #[serde(rename = "p99.9")]
    pub p99_9: f64,
    /// Largest sample.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl LatencyReport {
    fn from_stats(stats: &OpStats) -> LatencyReport {
        let histogram = &stats.latency_ns;
        let micros = |ns: u64| round_1(ns as f64 / 1000.0);
        if histogram.is_empty() {
            return LatencyReport {
                p50: 0.0,
                p90: 0.0,
                p99: 0.0,
                p99_9: 0.0,
                max: 0.0,
                mean: 0.0,
            };
        }
        LatencyReport {
            p50: micros(histogram.value_at_quantile(0.50)),
            p90: micros(histogram.value_at_quantile(0.90)),
            p99: micros(histogram.value_at_quantile(0.99)),
            p99_9: micros(histogram.value_at_quantile(0.999)),
            max: micros(histogram.max()),
            mean: round_1(histogram.mean() / 1000.0),
        }
    }
}

fn round_1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// One operation kind over a window of time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpReport {
    /// `read`, `write` or `delete`.
    pub op: &'static str,
    /// Finished commands.
    pub count: u64,
    /// Finished commands per second of the window.
    pub ops_per_s: f64,
    /// Answered as asked.
    pub ok: u64,
    /// Reads and deletes of missing keys.
    pub not_found: u64,
    /// Commands without a reply in time.
    pub timeouts: u64,
    /// Failed commands.
    pub errors: u64,
    /// Failed commands by result code (Aerospike), error word (Redis) or `connection`.
    pub errors_by_code: BTreeMap<String, u64>,
    /// Latency of replied commands.
    pub latency_us: LatencyReport,
}

impl OpReport {
    /// The report of `kind` in `stats` over a window of `window`.
    pub fn new(kind: OpKind, stats: &Stats, window: Duration) -> OpReport {
        OpReport::of(kind.name(), stats.of(kind), window)
    }

    /// The report of the commands in `op`, named `name`, over a window of `window`.
    pub fn of(name: &'static str, op: &OpStats, window: Duration) -> OpReport {
        let count = op.finished();
        let seconds = window.as_secs_f64();
        OpReport {
            op: name,
            count,
            ops_per_s: if seconds > 0.0 {
                round_1(count as f64 / seconds)
            } else {
                0.0
            },
            ok: op.ok,
            not_found: op.not_found,
            timeouts: op.timeouts,
            errors: op.error_count(),
            errors_by_code: op
                .errors
                .iter()
                .map(|(label, count)| (label.to_string(), *count))
                .collect(),
            latency_us: LatencyReport::from_stats(op),
        }
    }
}

/// Reports of the kinds a workload uses (or any kind that finished a command).
pub fn op_reports(kinds: &[OpKind], stats: &Stats, window: Duration) -> Vec<OpReport> {
    OpKind::ALL
        .iter()
        .filter(|kind| kinds.contains(kind) || stats.of(**kind).finished() > 0)
        .map(|kind| OpReport::new(*kind, stats, window))
        .collect()
}

/// A per-second line or the final summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowReport {
    /// `interval` or `summary`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Seconds since the run started, at the end of the window.
    pub elapsed_s: f64,
    /// Length of the window in seconds.
    pub window_s: f64,
    /// Every operation kind.
    pub ops: Vec<OpReport>,
    /// All finished commands per second.
    pub total_ops_per_s: f64,
    /// All finished commands.
    pub total_count: u64,
}

impl WindowReport {
    /// A report of `stats` finished over `window`, ending `elapsed` after the start.
    pub fn new(
        kind: &'static str,
        kinds: &[OpKind],
        stats: &Stats,
        elapsed: Duration,
        window: Duration,
    ) -> WindowReport {
        let ops = op_reports(kinds, stats, window);
        WindowReport {
            kind,
            elapsed_s: round_1(elapsed.as_secs_f64()),
            window_s: round_1(window.as_secs_f64()),
            total_ops_per_s: round_1(ops.iter().map(|op| op.ops_per_s).sum()),
            total_count: ops.iter().map(|op| op.count).sum(),
            ops,
        }
    }
}

/// The CSV header matching [`csv_rows`].
pub const CSV_HEADER: &str = "type,elapsed_s,op,count,ops_per_s,ok,not_found,timeouts,errors,\
p50_us,p90_us,p99_us,p99_9_us,max_us,mean_us,errors_by_code";

/// One CSV row per operation kind of `report`; errors by code as `code:count` joined by `;`.
pub fn csv_rows(report: &WindowReport) -> String {
    let mut rows = String::new();
    for op in &report.ops {
        let latency = &op.latency_us;
        let errors: Vec<String> = op
            .errors_by_code
            .iter()
            .map(|(code, count)| format!("{code}:{count}"))
            .collect();
        let _ = writeln!(
            rows,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            report.kind,
            report.elapsed_s,
            op.op,
            op.count,
            op.ops_per_s,
            op.ok,
            op.not_found,
            op.timeouts,
            op.errors,
            latency.p50,
            latency.p90,
            latency.p99,
            latency.p99_9,
            latency.max,
            latency.mean,
            errors.join(";")
        );
    }
    rows
}

/// The per-second text line, in aerospike-benchmark's style with latency in microseconds:
/// `[3s] write(tps=... timeouts=0 errors=0 p50=... max=...) read(...) total(tps=...)`.
pub fn text_line(report: &WindowReport) -> String {
    let mut line = format!("[{:>5.1}s]", report.elapsed_s);
    for op in &report.ops {
        let latency = &op.latency_us;
        let _ = write!(line, " {}(tps={:.0}", op.op, op.ops_per_s);
        if op.not_found > 0 {
            let _ = write!(line, " notfound={}", op.not_found);
        }
        let _ = write!(line, " timeouts={} errors={}", op.timeouts, op.errors);
        if !op.errors_by_code.is_empty() {
            let _ = write!(line, "{{{}}}", errors_text(&op.errors_by_code));
        }
        let _ = write!(
            line,
            " p50={} p90={} p99={} p99.9={} max={})",
            latency.p50, latency.p90, latency.p99, latency.p99_9, latency.max
        );
    }
    let _ = write!(line, " total(tps={:.0})", report.total_ops_per_s);
    line
}

fn errors_text(errors: &BTreeMap<String, u64>) -> String {
    errors
        .iter()
        .map(|(code, count)| format!("{code}: {count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The final summary as a table for people.
pub fn text_summary(report: &WindowReport) -> String {
    let mut text = format!(
        "\nSummary: {} commands in {:.1} s, {:.0} per second\n",
        report.total_count, report.elapsed_s, report.total_ops_per_s
    );
    let _ = writeln!(
        text,
        "{:<7}{:>11}{:>11}{:>11}{:>10}{:>9}{:>8}{:>9}{:>9}{:>9}{:>9}{:>10}",
        "op",
        "count",
        "ops/s",
        "ok",
        "notfound",
        "timeouts",
        "errors",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs"
    );
    for op in &report.ops {
        let latency = &op.latency_us;
        let _ = writeln!(
            text,
            "{:<7}{:>11}{:>11.0}{:>11}{:>10}{:>9}{:>8}{:>9}{:>9}{:>9}{:>9}{:>10}",
            op.op,
            op.count,
            op.ops_per_s,
            op.ok,
            op.not_found,
            op.timeouts,
            op.errors,
            latency.p50,
            latency.p90,
            latency.p99,
            latency.p99_9,
            latency.max
        );
    }
    for op in report.ops.iter().filter(|op| op.errors > 0) {
        let _ = writeln!(
            text,
            "{} errors by code: {}",
            op.op,
            errors_text(&op.errors_by_code)
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ErrorLabel, Outcome};
    use crate::stats::Completion;

    fn sample_stats() -> Stats {
        let mut stats = Stats::default();
        for micros in 1..=100u64 {
            let completion = Completion::Replied {
                outcome: Outcome::Ok,
                latency_ns: micros * 1000,
            };
            stats.record(OpKind::Read, completion);
        }
        let busy = Completion::Replied {
            outcome: Outcome::Error(ErrorLabel::ResultCode(14)),
            latency_ns: 5_000,
        };
        stats.record(OpKind::Write, busy);
        stats.record(OpKind::Write, Completion::TimedOut);
        stats
    }

    fn sample_report() -> WindowReport {
        let window = Duration::from_secs(2);
        WindowReport::new(
            "summary",
            &[OpKind::Write, OpKind::Read],
            &sample_stats(),
            window,
            window,
        )
    }

    #[test]
    fn percentiles_and_rates_come_from_the_histogram_and_window() {
        let report = sample_report();
        assert_eq!(report.ops.len(), 2);
        let read = &report.ops[1];
        assert_eq!((read.op, read.count, read.ops_per_s), ("read", 100, 50.0));
        assert_eq!(read.latency_us.p50, 50.0);
        assert_eq!(read.latency_us.p90, 90.0);
        assert_eq!(read.latency_us.p99, 99.0);
        assert_eq!(read.latency_us.p99_9, 100.0);
        assert_eq!(read.latency_us.max, 100.0);
        assert_eq!(read.latency_us.mean, 50.5);
        let write = &report.ops[0];
        assert_eq!((write.count, write.timeouts, write.errors), (2, 1, 1));
        assert_eq!(write.errors_by_code.get("14 KEY_BUSY"), Some(&1));
        assert_eq!(report.total_count, 102);
        assert_eq!(report.total_ops_per_s, 51.0);
    }

    #[test]
    fn kinds_without_commands_are_left_out_unless_the_workload_uses_them() {
        let stats = sample_stats();
        let window = Duration::from_secs(1);
        let names: Vec<_> = op_reports(&[OpKind::Delete], &stats, window)
            .iter()
            .map(|op| op.op)
            .collect();
        assert_eq!(names, ["write", "read", "delete"]);
        let names: Vec<_> = op_reports(&[], &Stats::default(), window)
            .iter()
            .map(|op| op.op)
            .collect();
        assert!(names.is_empty());
    }

    #[test]
    fn json_names_every_field() {
        let json = serde_json::to_value(sample_report()).unwrap();
        assert_eq!(json["type"], "summary");
        assert_eq!(json["ops"][1]["latency_us"]["p99.9"], 100.0);
        assert_eq!(json["ops"][0]["errors_by_code"]["14 KEY_BUSY"], 1);
        assert_eq!(json["total_count"], 102);
    }

    #[test]
    fn csv_rows_line_up_with_the_header() {
        let rows = csv_rows(&sample_report());
        let columns = CSV_HEADER.split(',').count();
        let lines: Vec<&str> = rows.lines().collect();
        assert_eq!(lines.len(), 2);
        for line in &lines {
            assert_eq!(line.split(',').count(), columns, "{line}");
        }
        assert_eq!(
            lines[1],
            "summary,2,read,100,50,100,0,0,0,50,90,99,100,100,50.5,"
        );
        assert!(lines[0].ends_with(",14 KEY_BUSY:1"), "{}", lines[0]);
    }

    #[test]
    fn text_line_and_summary_show_rates_errors_and_percentiles() {
        let report = sample_report();
        let line = text_line(&report);
        assert!(
            line.contains("write(tps=1 timeouts=1 errors=1{14 KEY_BUSY: 1}"),
            "{line}"
        );
        assert!(
            line.contains("read(tps=50 timeouts=0 errors=0 p50=50 p90=90 p99=99"),
            "{line}"
        );
        assert!(line.ends_with("total(tps=51)"), "{line}");
        let summary = text_summary(&report);
        assert!(summary.contains("102 commands in 2.0 s"), "{summary}");
        assert!(
            summary.contains("write errors by code: 14 KEY_BUSY: 1"),
            "{summary}"
        );
    }
}
