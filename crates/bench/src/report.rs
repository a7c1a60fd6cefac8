//! Turning statistics into what operators and machines read: the per-second line, the final
//! summary, and the tables of the scaling and per-connection tests, as text, JSON or CSV.
//!
//! Text is for people (aerospike-benchmark's `write(tps=...)` style); JSON is one object per
//! line (`"type"` says which); CSV has one header, and per window one row per operation kind
//! then one per node.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::routes::RoutedNode;
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
        OpReport {
            op: name,
            count,
            ops_per_s: per_second(count, window),
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

/// The commands one node got over a window of time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeReport {
    /// The node's id (upper-case hex) from the partition map; `None` when the map was not
    /// learned (RESP, or a server that does not answer the cluster's info commands).
    pub node_id: Option<String>,
    /// Where the tool sent its commands.
    pub address: String,
    /// Finished commands sent to it, whatever their outcome.
    pub requests: u64,
    /// `requests` per second of the window.
    pub ops_per_s: f64,
}

impl NodeReport {
    /// The node's id, or its address when the id is unknown.
    pub fn label(&self) -> &str {
        self.node_id.as_deref().unwrap_or(&self.address)
    }
}

/// Reports of every node, in node index order.
pub fn node_reports(nodes: &[RoutedNode], stats: &Stats, window: Duration) -> Vec<NodeReport> {
    let requests_by_node = stats.requests_by_node();
    nodes
        .iter()
        .enumerate()
        .map(|(node_index, node)| {
            let requests = requests_by_node.get(node_index).copied().unwrap_or(0);
            NodeReport {
                node_id: node.id.map(|id| id.to_string()),
                address: node.address.to_string(),
                requests,
                ops_per_s: per_second(requests, window),
            }
        })
        .collect()
}

fn per_second(count: u64, window: Duration) -> f64 {
    let seconds = window.as_secs_f64();
    if seconds > 0.0 {
        round_1(count as f64 / seconds)
    } else {
        0.0
    }
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
    /// Commands per node: each key's partition master under Aerospike, the one server
    /// under RESP.
    pub nodes: Vec<NodeReport>,
    /// Commands not sent because no node claimed their key's partition as master (also
    /// counted as `no master` errors); 0 unless the partition map is incomplete.
    pub keys_without_master: u64,
}

impl WindowReport {
    /// A report of `stats` finished over `window`, ending `elapsed` after the start, with
    /// the requests of each of `nodes`.
    pub fn new(
        kind: &'static str,
        kinds: &[OpKind],
        stats: &Stats,
        nodes: &[RoutedNode],
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
            nodes: node_reports(nodes, stats, window),
            keys_without_master: stats.keys_without_master(),
        }
    }
}

/// The CSV header matching [`csv_rows`].
pub const CSV_HEADER: &str = "type,elapsed_s,op,count,ops_per_s,ok,not_found,timeouts,errors,\
p50_us,p90_us,p99_us,p99_9_us,max_us,mean_us,errors_by_code,node";

/// One CSV row per operation kind of `report` (errors by code as `code:count` joined by `;`,
/// node empty: every node), then one per node (op `all`: its requests and their rate).
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
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},",
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
    for node in &report.nodes {
        let _ = writeln!(
            rows,
            "{},{},all,{},{},,,,,,,,,,,,{}",
            report.kind,
            report.elapsed_s,
            node.requests,
            node.ops_per_s,
            node.label()
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
    if report.nodes.len() > 1 {
        let per_node: Vec<String> = report
            .nodes
            .iter()
            .map(|node| format!("{}={:.0}", node.label(), node.ops_per_s))
            .collect();
        let _ = write!(line, " nodes(tps {})", per_node.join(" "));
    }
    if report.keys_without_master > 0 {
        let _ = write!(line, " no_master={}", report.keys_without_master);
    }
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
    text.push_str(&text_nodes(report));
    text
}

/// The per-node table of the summary, and the keys that had no master.
fn text_nodes(report: &WindowReport) -> String {
    let mut text = format!(
        "\n{:<18}{:>24}{:>11}{:>11}{:>8}\n",
        "node", "address", "requests", "ops/s", "share"
    );
    let requests_total: u64 = report.nodes.iter().map(|node| node.requests).sum();
    for node in &report.nodes {
        let share_percent = if requests_total > 0 {
            100.0 * node.requests as f64 / requests_total as f64
        } else {
            0.0
        };
        let _ = writeln!(
            text,
            "{:<18}{:>24}{:>11}{:>11.0}{:>7.1}%",
            node.node_id.as_deref().unwrap_or("-"),
            node.address,
            node.requests,
            node.ops_per_s,
            share_percent
        );
    }
    let _ = writeln!(
        text,
        "keys without a known master: {}",
        report.keys_without_master
    );
    text
}

/// One scan of `--scan`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScanReport {
    /// Always `scan`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// 1 for the first scan.
    pub repetition: u32,
    /// From sending the request to the LAST message, ms (microsecond precision).
    pub elapsed_ms: f64,
    /// From sending the request to the first reply bytes, ms.
    pub first_byte_ms: f64,
    /// Records received.
    pub records: u64,
    /// Reply bytes received, proto headers included.
    pub bytes: u64,
    /// Reply protos (frames) received.
    pub protos: u64,
    /// Records per second of `elapsed_ms`.
    pub records_per_s: f64,
    /// Reply megabytes (10^6 bytes) per second of `elapsed_ms`.
    pub mb_per_s: f64,
}

impl ScanReport {
    /// The report of repetition `repetition`.
    pub fn new(repetition: u32, run: &crate::scan::ScanRun) -> ScanReport {
        let seconds = run.elapsed.as_secs_f64();
        let per_second = |count: u64| {
            if seconds > 0.0 {
                count as f64 / seconds
            } else {
                0.0
            }
        };
        ScanReport {
            kind: "scan",
            repetition,
            elapsed_ms: round_3(run.elapsed.as_secs_f64() * 1e3),
            first_byte_ms: round_3(run.first_byte.as_secs_f64() * 1e3),
            records: run.counts.records,
            bytes: run.counts.bytes,
            protos: run.counts.protos,
            records_per_s: round_1(per_second(run.counts.records)),
            mb_per_s: round_3(per_second(run.counts.bytes) / 1e6),
        }
    }
}

/// The medians of every scan of `--scan`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScanSummary {
    /// Always `scan_summary`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Scans run.
    pub repetitions: u32,
    /// Median time from request to LAST, ms.
    pub elapsed_ms: f64,
    /// Fastest scan, ms.
    pub elapsed_ms_min: f64,
    /// Slowest scan, ms.
    pub elapsed_ms_max: f64,
    /// Median time to the first reply bytes, ms.
    pub first_byte_ms: f64,
    /// Median records per scan.
    pub records: f64,
    /// Fewest records of a scan.
    pub records_min: u64,
    /// Most records of a scan.
    pub records_max: u64,
    /// Median reply bytes per scan.
    pub bytes: f64,
    /// Median records per second.
    pub records_per_s: f64,
    /// Median reply megabytes per second.
    pub mb_per_s: f64,
}

impl ScanSummary {
    /// The summary of `scans`; `None` when there are none.
    pub fn new(scans: &[ScanReport]) -> Option<ScanSummary> {
        let of = |value: fn(&ScanReport) -> f64| median(scans.iter().map(value).collect());
        let elapsed: Vec<f64> = scans.iter().map(|scan| scan.elapsed_ms).collect();
        Some(ScanSummary {
            kind: "scan_summary",
            repetitions: u32::try_from(scans.len()).unwrap_or(u32::MAX),
            elapsed_ms: round_3(median(elapsed.clone())?),
            elapsed_ms_min: elapsed.iter().copied().fold(f64::INFINITY, f64::min),
            elapsed_ms_max: elapsed.iter().copied().fold(0.0, f64::max),
            first_byte_ms: round_3(of(|scan| scan.first_byte_ms)?),
            records: of(|scan| scan.records as f64)?,
            records_min: scans.iter().map(|scan| scan.records).min()?,
            records_max: scans.iter().map(|scan| scan.records).max()?,
            bytes: of(|scan| scan.bytes as f64)?,
            records_per_s: round_1(of(|scan| scan.records_per_s)?),
            mb_per_s: round_3(of(|scan| scan.mb_per_s)?),
        })
    }
}

/// The median: the middle value, or the mean of the two middle values; `None` when empty.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        length if length % 2 == 1 => Some(values[middle]),
        _ => Some((values[middle - 1] + values[middle]) / 2.0),
    }
}

fn round_3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// The CSV header of `--scan`, matching [`scan_csv_row`] and [`scan_summary_csv_row`].
pub const SCAN_CSV_HEADER: &str =
    "type,repetition,elapsed_ms,first_byte_ms,records,bytes,protos,records_per_s,mb_per_s";

/// One CSV row of a scan.
pub fn scan_csv_row(scan: &ScanReport) -> String {
    format!(
        "scan,{},{},{},{},{},{},{},{}",
        scan.repetition,
        scan.elapsed_ms,
        scan.first_byte_ms,
        scan.records,
        scan.bytes,
        scan.protos,
        scan.records_per_s,
        scan.mb_per_s
    )
}

/// The CSV row of the medians (repetition holds the number of scans; protos is empty).
pub fn scan_summary_csv_row(summary: &ScanSummary) -> String {
    format!(
        "median,{},{},{},{},{},,{},{}",
        summary.repetitions,
        summary.elapsed_ms,
        summary.first_byte_ms,
        summary.records,
        summary.bytes,
        summary.records_per_s,
        summary.mb_per_s
    )
}

/// The column titles of the text table of `--scan`.
pub fn scan_text_header() -> String {
    format!(
        "{:>6} {:>12} {:>14} {:>11} {:>14} {:>13} {:>9}",
        "scan", "time ms", "first byte ms", "records", "records/s", "bytes", "MB/s"
    )
}

/// One text row of a scan.
pub fn scan_text_row(scan: &ScanReport) -> String {
    format!(
        "{:>6} {:>12.3} {:>14.3} {:>11} {:>14.0} {:>13} {:>9.1}",
        scan.repetition,
        scan.elapsed_ms,
        scan.first_byte_ms,
        scan.records,
        scan.records_per_s,
        scan.bytes,
        scan.mb_per_s
    )
}

/// The text row of the medians, with the spread of the time.
pub fn scan_text_summary(summary: &ScanSummary) -> String {
    format!(
        "{:>6} {:>12.3} {:>14.3} {:>11} {:>14.0} {:>13} {:>9.1}  (time min {:.3}, max {:.3} ms, \
         {} scans)",
        "median",
        summary.elapsed_ms,
        summary.first_byte_ms,
        summary.records,
        summary.records_per_s,
        summary.bytes,
        summary.mb_per_s,
        summary.elapsed_ms_min,
        summary.elapsed_ms_max,
        summary.repetitions
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ErrorLabel, Outcome};
    use crate::stats::Completion;

    /// 100 reads on node 0, a busy write and a timed-out write on node 1.
    fn sample_stats() -> Stats {
        let mut stats = Stats::default();
        for micros in 1..=100u64 {
            let completion = Completion::Replied {
                outcome: Outcome::Ok,
                latency_ns: micros * 1000,
            };
            stats.record_at_node(0, OpKind::Read, completion);
        }
        let busy = Completion::Replied {
            outcome: Outcome::Error(ErrorLabel::ResultCode(14)),
            latency_ns: 5_000,
        };
        stats.record_at_node(1, OpKind::Write, busy);
        stats.record_at_node(1, OpKind::Write, Completion::TimedOut);
        stats
    }

    fn sample_nodes() -> Vec<RoutedNode> {
        vec![
            RoutedNode {
                id: Some(model::NodeId(0xBB9020011AC4202)),
                address: "127.0.0.1:3000".parse().unwrap(),
            },
            RoutedNode {
                id: None,
                address: "127.0.0.1:3001".parse().unwrap(),
            },
        ]
    }

    fn sample_report() -> WindowReport {
        let window = Duration::from_secs(2);
        WindowReport::new(
            "summary",
            &[OpKind::Write, OpKind::Read],
            &sample_stats(),
            &sample_nodes(),
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
        assert_eq!(json["nodes"][0]["node_id"], "BB9020011AC4202");
        assert_eq!(json["nodes"][0]["requests"], 100);
        assert_eq!(json["nodes"][0]["ops_per_s"], 50.0);
        assert_eq!(json["nodes"][1]["node_id"], serde_json::Value::Null);
        assert_eq!(json["nodes"][1]["address"], "127.0.0.1:3001");
        assert_eq!(json["keys_without_master"], 0);
    }

    #[test]
    fn commands_without_a_master_are_counted_and_shown() {
        let mut stats = sample_stats();
        stats.record(OpKind::Read, Completion::NoMaster);
        let window = Duration::from_secs(1);
        let report = WindowReport::new("interval", &[], &stats, &sample_nodes(), window, window);
        assert_eq!(report.keys_without_master, 1);
        assert_eq!(
            report.nodes[0].requests, 100,
            "an unsent command counts on no node"
        );
        assert_eq!(report.ops[1].errors_by_code.get("no master"), Some(&1));
        assert!(
            text_line(&report).ends_with(" no_master=1"),
            "{}",
            text_line(&report)
        );
        assert!(text_summary(&report).contains("keys without a known master: 1"));
    }

    #[test]
    fn csv_rows_line_up_with_the_header() {
        let rows = csv_rows(&sample_report());
        let columns = CSV_HEADER.split(',').count();
        let lines: Vec<&str> = rows.lines().collect();
        assert_eq!(lines.len(), 4);
        for line in &lines {
            assert_eq!(line.split(',').count(), columns, "{line}");
        }
        assert_eq!(
            lines[1],
            "summary,2,read,100,50,100,0,0,0,50,90,99,100,100,50.5,,"
        );
        assert!(lines[0].ends_with(",14 KEY_BUSY:1,"), "{}", lines[0]);
        assert_eq!(lines[2], "summary,2,all,100,50,,,,,,,,,,,,BB9020011AC4202");
        assert_eq!(lines[3], "summary,2,all,2,1,,,,,,,,,,,,127.0.0.1:3001");
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
        assert!(
            line.ends_with("total(tps=51) nodes(tps BB9020011AC4202=50 127.0.0.1:3001=1)"),
            "{line}"
        );
        let summary = text_summary(&report);
        assert!(summary.contains("102 commands in 2.0 s"), "{summary}");
        assert!(
            summary.contains("write errors by code: 14 KEY_BUSY: 1"),
            "{summary}"
        );
        let node_line = summary
            .lines()
            .find(|line| line.starts_with("BB9020011AC4202"))
            .unwrap();
        let columns: Vec<&str> = node_line.split_whitespace().collect();
        assert_eq!(
            columns,
            ["BB9020011AC4202", "127.0.0.1:3000", "100", "50", "98.0%"]
        );
        assert!(
            summary.contains("keys without a known master: 0"),
            "{summary}"
        );
    }

    fn scan_run(elapsed_us: u64, records: u64) -> crate::scan::ScanRun {
        crate::scan::ScanRun {
            elapsed: Duration::from_micros(elapsed_us),
            first_byte: Duration::from_micros(elapsed_us / 2),
            counts: crate::scan::StreamCounts {
                records,
                partitions_done: 0,
                protos: 2,
                bytes: records * 100,
            },
        }
    }

    #[test]
    fn scan_reports_keep_microseconds_and_rates() {
        let scan = ScanReport::new(1, &scan_run(12_345, 1000));
        assert_eq!(scan.elapsed_ms, 12.345);
        assert_eq!(scan.first_byte_ms, 6.172);
        assert_eq!(scan.records_per_s, 81_004.5);
        assert_eq!(scan.mb_per_s, 8.1);
        let json = serde_json::to_value(&scan).unwrap();
        assert_eq!(json["type"], "scan");
        assert_eq!(json["records"], 1000);
        assert_eq!(
            scan_csv_row(&scan).split(',').count(),
            SCAN_CSV_HEADER.split(',').count()
        );
    }

    #[test]
    fn scan_summary_takes_medians_and_the_spread() {
        let scans: Vec<ScanReport> = [(3000, 10), (1000, 10), (2000, 12), (9000, 10)]
            .iter()
            .enumerate()
            .map(|(index, (us, records))| {
                ScanReport::new(index as u32 + 1, &scan_run(*us, *records))
            })
            .collect();
        let summary = ScanSummary::new(&scans).unwrap();
        assert_eq!(summary.elapsed_ms, 2.5);
        assert_eq!((summary.elapsed_ms_min, summary.elapsed_ms_max), (1.0, 9.0));
        assert_eq!(summary.records, 10.0);
        assert_eq!((summary.records_min, summary.records_max), (10, 12));
        assert_eq!(summary.repetitions, 4);
        assert_eq!(
            scan_summary_csv_row(&summary).split(',').count(),
            SCAN_CSV_HEADER.split(',').count()
        );
        assert!(scan_text_summary(&summary).contains("max 9.000 ms, 4 scans"));
        assert_eq!(ScanSummary::new(&[]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
    }
}
