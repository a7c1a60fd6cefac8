//! The four things the tool can do: one workload with per-second lines and a summary, the
//! scaling test (`--scaling`), the per-connection test (`--per-connection`) and the scan test
//! (`--scan`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::options::Options;
use crate::report::{
    CSV_HEADER, LatencyReport, OpReport, OutputFormat, SCAN_CSV_HEADER, ScanReport, ScanSummary,
    WindowReport, csv_rows, op_reports, scan_csv_row, scan_summary_csv_row, scan_text_header,
    scan_text_row, scan_text_summary, text_line, text_summary,
};
use crate::runner::{self, Plan, RunResult};
use crate::source::OpKind;
use crate::spec::Workload;

/// The operation kinds a workload sends.
pub fn workload_kinds(workload: Workload) -> &'static [OpKind] {
    match workload {
        Workload::Insert => &[OpKind::Write],
        Workload::Delete => &[OpKind::Delete],
        Workload::ReadAll => &[OpKind::Read],
        Workload::ReadUpdate { .. } | Workload::ReadReplace { .. } => {
            &[OpKind::Write, OpKind::Read]
        }
    }
}

/// What a run was, for the first line of JSON output and the text header.
#[derive(Debug, Serialize)]
struct ConfigReport<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    address: String,
    protocol: crate::protocol::Protocol,
    namespace: &'a str,
    set: &'a str,
    workload: String,
    object_spec: String,
    start_key: u64,
    keys: u64,
    key_distribution: String,
    threads: usize,
    connections: usize,
    pipeline: usize,
    duration_s: Option<u64>,
    throughput_ops_per_s: u64,
    timeout_ms: Option<u128>,
    seed: u64,
}

impl<'a> ConfigReport<'a> {
    fn new(plan: &'a Plan) -> ConfigReport<'a> {
        ConfigReport {
            kind: "config",
            address: plan.target.address.to_string(),
            protocol: plan.target.protocol,
            namespace: &plan.namespace,
            set: &plan.set,
            workload: plan.workload.to_string(),
            object_spec: plan.object.to_string(),
            start_key: plan.keys.start,
            keys: plan.keys.count,
            key_distribution: plan.distribution.to_string(),
            threads: plan.threads,
            connections: plan.connections,
            pipeline: plan.pipeline,
            duration_s: plan.duration.map(|duration| duration.as_secs()),
            throughput_ops_per_s: plan.throughput_ops_per_s,
            timeout_ms: plan.timeout.map(|timeout| timeout.as_millis()),
            seed: plan.seed,
        }
    }

    fn text(&self) -> String {
        format!(
            "osprey-bench: {} workload {} on {} ({:?}), namespace {} set {}, keys {}..{}, \
             object {}, {} keys, {} threads, {} connections, pipeline {}, {}, seed {}",
            match self.duration_s {
                Some(seconds) => format!("{seconds} s of"),
                None => "every key once,".to_owned(),
            },
            self.workload,
            self.address,
            self.protocol,
            self.namespace,
            self.set,
            self.start_key,
            self.start_key + self.keys,
            self.object_spec,
            self.key_distribution,
            self.threads,
            self.connections,
            self.pipeline,
            match self.throughput_ops_per_s {
                0 => "unthrottled".to_owned(),
                rate => format!("throttled to {rate}/s"),
            },
            self.seed
        )
    }
}

/// `println!` through [`emit`].
macro_rules! out {
    ($($arg:tt)*) => {
        emit(&format!($($arg)*))
    };
}

/// Prints `text` and a newline to stdout. When stdout is gone (a closed pipe, as with
/// `| head`), exits with 141 as a process killed by SIGPIPE would, instead of panicking.
fn emit(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        std::process::exit(141);
    }
}

fn print_json(value: &impl Serialize) {
    match serde_json::to_string(value) {
        Ok(line) => emit(&line),
        Err(error) => eprintln!("osprey-bench: cannot encode JSON: {error}"),
    }
}

/// A progress bar for runs that visit every key once; hidden when stderr is not a terminal.
fn progress_bar(plan: &Plan) -> Option<ProgressBar> {
    if !plan.workload.is_count_based() {
        return None;
    }
    let bar = ProgressBar::new(plan.keys.count);
    let style = ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} keys, eta {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    Some(bar)
}

/// Runs `plan` with a per-second line (unless `quiet`) and returns the result.
fn run_with_lines(
    plan: &Plan,
    output: OutputFormat,
    quiet: bool,
    stop: &Arc<AtomicBool>,
) -> Result<RunResult, String> {
    let kinds = workload_kinds(plan.workload);
    let bar = progress_bar(plan);
    let result = runner::run(plan, stop, |interval| {
        if let Some(bar) = &bar {
            bar.set_position(interval.totals.finished());
        }
        // A tail shorter than a tenth of an interval (the drain after the stop) has no
        // meaningful rate; its commands still count in the summary.
        if quiet || interval.length < runner::REPORT_INTERVAL / 10 {
            return;
        }
        let report = WindowReport::new(
            "interval",
            kinds,
            interval.stats,
            interval.nodes,
            interval.elapsed,
            interval.length,
        );
        let print = || match output {
            OutputFormat::Text => emit(&text_line(&report)),
            OutputFormat::Json => print_json(&report),
            OutputFormat::Csv => emit(csv_rows(&report).trim_end()),
        };
        match &bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result
}

/// One workload: a header, a line per second, a summary.
///
/// # Errors
///
/// When the options are invalid or the server cannot be reached.
pub fn single(options: &Options, seed: u64, stop: &Arc<AtomicBool>) -> Result<(), String> {
    let plan = options.plan(seed)?;
    let config = ConfigReport::new(&plan);
    match options.output {
        OutputFormat::Text => emit(&config.text()),
        OutputFormat::Json => print_json(&config),
        OutputFormat::Csv => emit(CSV_HEADER),
    }
    let result = run_with_lines(&plan, options.output, false, stop)?;
    let summary = WindowReport::new(
        "summary",
        workload_kinds(plan.workload),
        &result.totals,
        &result.nodes,
        result.elapsed,
        result.elapsed,
    );
    match options.output {
        OutputFormat::Text => emit(text_summary(&summary).trim_end()),
        OutputFormat::Json => print_json(&summary),
        OutputFormat::Csv => emit(csv_rows(&summary).trim_end()),
    }
    Ok(())
}

/// One row of the scaling table.
#[derive(Debug, Serialize)]
struct ScalingRow {
    threads: usize,
    write_ops_per_s: f64,
    read_ops_per_s: f64,
    write_errors: u64,
    read_errors: u64,
    read_not_found: u64,
    write_latency_us: LatencyReport,
    read_latency_us: LatencyReport,
}

/// The Index64 scaling test: for T = 1..=threads, insert every key over T threads (one
/// connection each), then read every key back, and report both rates per T.
///
/// # Errors
///
/// When the options are invalid or the server cannot be reached.
pub fn scaling(options: &Options, seed: u64, stop: &Arc<AtomicBool>) -> Result<(), String> {
    let base = options.plan(seed)?;
    let mut rows = Vec::new();
    for threads in 1..=options.threads {
        let phase = |workload| Plan {
            workload,
            threads,
            connections: threads,
            duration: None,
            throughput_ops_per_s: 0,
            ..base.clone()
        };
        let write = run_with_lines(&phase(Workload::Insert), options.output, true, stop)?;
        let read = run_with_lines(&phase(Workload::ReadAll), options.output, true, stop)?;
        let write = &op_reports(&[OpKind::Write], &write.totals, write.elapsed)[0];
        let read = &op_reports(&[OpKind::Read], &read.totals, read.elapsed)[0];
        let row = ScalingRow {
            threads,
            write_ops_per_s: write.ops_per_s,
            read_ops_per_s: read.ops_per_s,
            write_errors: write.errors + write.timeouts,
            read_errors: read.errors + read.timeouts,
            read_not_found: read.not_found,
            write_latency_us: write.latency_us,
            read_latency_us: read.latency_us,
        };
        if options.output == OutputFormat::Text && rows.is_empty() {
            emit(&scaling_header(&base));
            out!(
                "{:>7} {:>14} {:>14} {:>12} {:>12}",
                "threads",
                "write ops/s",
                "read ops/s",
                "write p50 µs",
                "read p50 µs"
            );
        }
        match options.output {
            OutputFormat::Text => out!(
                "{:>7} {:>14.0} {:>14.0} {:>12} {:>12}{}",
                row.threads,
                row.write_ops_per_s,
                row.read_ops_per_s,
                row.write_latency_us.p50,
                row.read_latency_us.p50,
                scaling_problems(&row)
            ),
            OutputFormat::Json => print_json(&row),
            OutputFormat::Csv => {
                if rows.is_empty() {
                    out!(
                        "threads,write_ops_per_s,read_ops_per_s,write_errors,read_errors,read_not_found,write_p50_us,read_p50_us,write_p99_us,read_p99_us"
                    );
                }
                out!(
                    "{},{},{},{},{},{},{},{},{},{}",
                    row.threads,
                    row.write_ops_per_s,
                    row.read_ops_per_s,
                    row.write_errors,
                    row.read_errors,
                    row.read_not_found,
                    row.write_latency_us.p50,
                    row.read_latency_us.p50,
                    row.write_latency_us.p99,
                    row.read_latency_us.p99
                );
            }
        }
        rows.push(row);
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
    }
    Ok(())
}

fn scaling_header(plan: &Plan) -> String {
    format!(
        "osprey-bench scaling: {} keys of {} on {} ({:?}), written then read back per thread count",
        plan.keys.count, plan.object, plan.target.address, plan.target.protocol
    )
}

fn scaling_problems(row: &ScalingRow) -> String {
    let mut text = String::new();
    if row.write_errors + row.read_errors > 0 {
        let _ = write!(
            text,
            "  errors: write {} read {}",
            row.write_errors, row.read_errors
        );
    }
    if row.read_not_found > 0 {
        let _ = write!(text, "  not found: {}", row.read_not_found);
    }
    text
}

/// One row of the per-connection table.
#[derive(Debug, Serialize)]
struct ConnectionRow {
    connections: usize,
    ops_per_s: f64,
    ops_per_s_per_connection: f64,
    latency_us: LatencyReport,
    timeouts: u64,
    errors_by_code: BTreeMap<String, u64>,
}

/// The per-connection test: the workload over each connection count, with throughput per
/// connection and errors by result code (a hot key shows as KEY_BUSY or timeouts).
///
/// # Errors
///
/// When the options are invalid or the server cannot be reached.
pub fn per_connection(options: &Options, seed: u64, stop: &Arc<AtomicBool>) -> Result<(), String> {
    let base = options.plan(seed)?;
    if options.output == OutputFormat::Text {
        out!(
            "osprey-bench per-connection: {} of workload {} per connection count on {} ({:?}), \
             pipeline {}, {} keys, seed {}",
            base.duration
                .map_or("every key".to_owned(), |d| format!("{} s", d.as_secs())),
            base.workload,
            base.target.address,
            base.target.protocol,
            base.pipeline,
            base.distribution,
            base.seed
        );
        out!(
            "{:>11} {:>12} {:>16} {:>9} {:>9} {:>9}  errors",
            "connections",
            "ops/s",
            "ops/s per conn",
            "p50 µs",
            "p99 µs",
            "timeouts"
        );
    } else if options.output == OutputFormat::Csv {
        out!(
            "connections,ops_per_s,ops_per_s_per_connection,p50_us,p99_us,timeouts,errors_by_code"
        );
    }
    for &connections in &options.connection_counts {
        let plan = Plan {
            threads: options.threads.min(connections),
            connections,
            duration: base.duration.or(Some(Duration::from_secs(
                crate::options::DEFAULT_DURATION_S,
            ))),
            ..base.clone()
        };
        let result = run_with_lines(&plan, options.output, true, stop)?;
        let row = connection_row(&plan, &result);
        let errors = row
            .errors_by_code
            .iter()
            .map(|(code, count)| format!("{code}:{count}"))
            .collect::<Vec<_>>()
            .join(";");
        match options.output {
            OutputFormat::Text => out!(
                "{:>11} {:>12.0} {:>16.0} {:>9} {:>9} {:>9}  {}",
                row.connections,
                row.ops_per_s,
                row.ops_per_s_per_connection,
                row.latency_us.p50,
                row.latency_us.p99,
                row.timeouts,
                if errors.is_empty() { "none" } else { &errors }
            ),
            OutputFormat::Json => print_json(&row),
            OutputFormat::Csv => out!(
                "{},{},{},{},{},{},{}",
                row.connections,
                row.ops_per_s,
                row.ops_per_s_per_connection,
                row.latency_us.p50,
                row.latency_us.p99,
                row.timeouts,
                errors
            ),
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
    }
    Ok(())
}

/// Sums every kind of a run into one row: all commands count toward the connection's rate.
fn connection_row(plan: &Plan, result: &RunResult) -> ConnectionRow {
    let mut all = crate::stats::OpStats::default();
    for kind in OpKind::ALL {
        all.merge(result.totals.of(kind));
    }
    let report = OpReport::of("all", &all, result.elapsed);
    ConnectionRow {
        connections: plan.connections,
        ops_per_s: report.ops_per_s,
        ops_per_s_per_connection: (report.ops_per_s / plan.connections as f64).round(),
        latency_us: report.latency_us,
        timeouts: report.timeouts,
        errors_by_code: report.errors_by_code,
    }
}

/// What a scan test is, for the first line of its output.
#[derive(Debug, Serialize)]
struct ScanConfigReport<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    address: String,
    namespace: &'a str,
    /// `None`: the whole namespace.
    set: Option<&'a str>,
    no_bins: bool,
    repeat: u32,
    socket_timeout_ms: u32,
    seed: u64,
}

/// The scan test: `--scan-repeat` scans of the namespace or set, one after the other on one
/// connection, each timed from the request to its LAST message, then the medians.
///
/// # Errors
///
/// When the options are invalid, the server cannot be reached, or a scan fails (a non-zero
/// result code, a malformed stream, a closed or silent connection): a failed scan is never
/// reported as a result.
pub fn scan(options: &Options, seed: u64, stop: &Arc<AtomicBool>) -> Result<(), String> {
    let plan = options.scan_plan(seed)?;
    let config = ScanConfigReport {
        kind: "scan_config",
        address: plan.address.to_string(),
        namespace: &plan.request.namespace,
        set: (!plan.request.set.is_empty()).then_some(plan.request.set.as_str()),
        no_bins: plan.request.no_bins,
        repeat: plan.repeat,
        socket_timeout_ms: plan.request.socket_timeout_ms,
        seed,
    };
    match options.output {
        OutputFormat::Text => {
            out!(
                "osprey-bench scan: namespace {} {} on {}, {}, {} scan{}, socket timeout {}",
                config.namespace,
                config
                    .set
                    .map_or("(every set)".to_owned(), |set| format!("set {set}")),
                config.address,
                if config.no_bins {
                    "no bins"
                } else {
                    "all bins"
                },
                config.repeat,
                if config.repeat == 1 { "" } else { "s" },
                match config.socket_timeout_ms {
                    0 => "none".to_owned(),
                    ms => format!("{ms} ms"),
                }
            );
            emit(&scan_text_header());
        }
        OutputFormat::Json => print_json(&config),
        OutputFormat::Csv => emit(SCAN_CSV_HEADER),
    }
    let idle_timeout = match plan.request.socket_timeout_ms {
        0 => None,
        ms => Some(Duration::from_millis(u64::from(ms))),
    };
    let mut client = crate::scan::ScanClient::connect(plan.address, idle_timeout)?;
    let mut scans = Vec::new();
    for repetition in 1..=plan.repeat {
        let request = crate::scan::ScanRequest {
            task_id: seed.wrapping_add(u64::from(repetition)),
            ..plan.request.clone()
        };
        let run = client
            .scan(&request)
            .map_err(|error| format!("scan {repetition}: {error}"))?;
        let report = ScanReport::new(repetition, &run);
        match options.output {
            OutputFormat::Text => emit(&scan_text_row(&report)),
            OutputFormat::Json => print_json(&report),
            OutputFormat::Csv => emit(&scan_csv_row(&report)),
        }
        scans.push(report);
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
    }
    if let Some(summary) = ScanSummary::new(&scans) {
        match options.output {
            OutputFormat::Text => emit(&scan_text_summary(&summary)),
            OutputFormat::Json => print_json(&summary),
            OutputFormat::Csv => emit(&scan_summary_csv_row(&summary)),
        }
    }
    Ok(())
}

/// `--query`: one query workload, reported per kind of command timed.
pub fn query(
    options: &Options,
    kind: crate::query::QueryKind,
    seed: u64,
    stop: &Arc<AtomicBool>,
) -> Result<(), String> {
    let plan = options.query_plan(kind, seed)?;
    if options.output == OutputFormat::Text {
        out!(
            "osprey-bench query {kind:?} on {} ({:?}): {} keys from {}, {} thread(s), pipeline \
             {}, {} s, seed {seed}",
            plan.address,
            plan.protocol,
            plan.keys,
            plan.start_key,
            plan.threads,
            plan.pipeline,
            plan.duration.as_secs(),
        );
    }
    let results = crate::query::run(&plan, stop)?;
    for result in &results {
        match options.output {
            OutputFormat::Json => print_json(result),
            OutputFormat::Text | OutputFormat::Csv => out!(
                "{}: {} commands, {:.0}/s, p50 {} us, p99 {} us",
                result.name,
                result.commands,
                result.per_second,
                result.p50_us,
                result.p99_us
            ),
        }
    }
    if let [get, lookup] = results.as_slice()
        && options.output == OutputFormat::Text
    {
        out!(
            "lookup / get: p50 {:.2}x, p99 {:.2}x",
            lookup.p50_us / get.p50_us,
            lookup.p99_us / get.p99_us
        );
    }
    Ok(())
}
