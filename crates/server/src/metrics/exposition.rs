//! What the metrics endpoint answers: every statistic of this node in Prometheus's text format
//! (version 0.0.4), named and labelled as Aerospike's Prometheus exporter names them where the
//! statistic exists there, so that dashboards made for it work unchanged:
//!
//! - `aerospike_node_stats_<stat>{cluster_name, service}` from `statistics`;
//! - `aerospike_namespace_<stat>{cluster_name, service, ns, storage_engine}` from
//!   `namespace/<ns>`;
//! - `aerospike_sets_<stat>{cluster_name, service, ns, set}` from `sets`;
//! - `aerospike_sindex_<stat>{cluster_name, service, ns, sindex}` from `sindex-stat`;
//! - `aerospike_latencies_<op>_<ms|us>_bucket{..., le}` and `_count`: as the exporter reads
//!   `latencies:`, the operations per second of the last tick interval faster than each
//!   threshold (gauges);
//! - `aerospike_node_up{build, cluster_name, node_id, service}`.
//!
//! The exporter's rules: `-` and `.` in a name become `_`; a value is a number, or `true`/`false`
//! as 1/0, and any other value (names, keys) is left out; a statistic is a gauge when its name
//! has a `-` (a configuration value) or it is one of the gauges listed here, a counter
//! otherwise.
//!
//! Osprey's own, which the exporter has no name for:
//! - `osprey_latency_seconds{ns, op}`: the same histograms as cumulative Prometheus
//!   histograms since start (`rate()` and `histogram_quantile()` work on them);
//! - `osprey_resp_command_*{command}`: per Redis command, calls, failures, refusals, and the
//!   duration histogram (`osprey_resp_command_duration_seconds`);
//! - `osprey_resp_commands_processed_total`, `osprey_resp_unknown_commands_total`.
//!
//! Invariant: every family is written once, its samples together after its `# HELP` and
//! `# TYPE` lines, as the format requires (families are gathered first, then written).

use std::fmt::Write as _;

use indexmap::IndexMap;

use crate::info;
use crate::latency::Snapshot;
use crate::resp::command_stats;
use crate::state::ServerState;

/// A statistic's Prometheus type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A series' labels: names and values.
type Labels = Vec<(&'static str, String)>;

/// One sample: its name's suffix after the family's (`_bucket`, or empty), labels, value.
type Sample = (&'static str, Labels, f64);

/// One family's samples.
#[derive(Debug)]
struct Family {
    kind: Kind,
    help: String,
    samples: Vec<Sample>,
}

/// The families gathered, in first-seen order.
#[derive(Debug, Default)]
struct Families(IndexMap<String, Family>);

impl Families {
    fn add(&mut self, name: String, kind: Kind, help: impl FnOnce() -> String, sample: Sample) {
        self.0
            .entry(name)
            .or_insert_with(|| Family {
                kind,
                help: help(),
                samples: Vec::new(),
            })
            .samples
            .push(sample);
    }

    fn write(&self, out: &mut String) {
        for (name, family) in &self.0 {
            let _ = writeln!(out, "# HELP {name} {}", family.help);
            let _ = writeln!(out, "# TYPE {name} {}", family.kind.name());
            for (suffix, labels, value) in &family.samples {
                out.push_str(name);
                out.push_str(suffix);
                write_labels(out, labels);
                let _ = writeln!(out, " {}", number(*value));
            }
        }
    }
}

/// `{a="x",b="y"}`, values escaped as the format asks (backslash, quote, newline).
fn write_labels(out: &mut String, labels: &[(&'static str, String)]) {
    if labels.is_empty() {
        return;
    }
    out.push('{');
    for (position, (name, value)) in labels.iter().enumerate() {
        if position > 0 {
            out.push(',');
        }
        let escaped = value
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let _ = write!(out, "{name}=\"{escaped}\"");
    }
    out.push('}');
}

/// A sample value as the format writes it.
fn number(value: f64) -> String {
    match value {
        value if value.is_nan() => "NaN".to_owned(),
        value if value == f64::INFINITY => "+Inf".to_owned(),
        value if value == f64::NEG_INFINITY => "-Inf".to_owned(),
        value => value.to_string(),
    }
}

/// `aerospike_<context>_<stat>` with every character outside `[a-zA-Z0-9_]` made `_`.
fn metric_name(context: &str, stat: &str) -> String {
    let sanitized: String = stat
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c,
            false => '_',
        })
        .collect();
    format!("aerospike_{context}_{sanitized}")
}

/// A statistic's value as the exporter reads it: a number, or a boolean as 1/0.
fn stat_value(text: &str) -> Option<f64> {
    match text {
        "true" => Some(1.0),
        "false" => Some(0.0),
        _ => text.parse().ok().filter(|value: &f64| value.is_finite()),
    }
}

/// Node statistics that measure a level rather than count events.
const NODE_GAUGES: &[&str] = &[
    "cluster_size",
    "cluster_integrity",
    "cluster_is_member",
    "uptime",
    "objects",
    "client_connections",
    "migrate_allowed",
    "migrate_partitions_remaining",
    "migrate_rx_partitions_active",
    "migrate_rx_partitions_remaining",
    "migrate_tx_partitions_remaining",
    "process_rss_bytes",
    "resp_connections",
    "admin_connections",
    "client_memory_bytes",
    "client_memory_max_bytes",
    "long_request_jobs",
];

/// Namespace statistics that measure a level.
const NAMESPACE_GAUGES: &[&str] = &[
    "objects",
    "master_objects",
    "prole_objects",
    "data_used_bytes",
    "index_used_bytes",
    "set_index_used_bytes",
    "memory_used_bytes",
    "ns_cluster_size",
    "effective_replication_factor",
    "tombstones",
    "stop_writes",
];

/// Secondary-index statistics that count events (the rest measure a level).
const SINDEX_COUNTERS: &[&str] = &["query_basic_complete", "query_basic_error"];

/// The labels every series of this node carries.
fn node_labels(state: &ServerState) -> Labels {
    vec![
        ("cluster_name", state.config.service.cluster_name.clone()),
        ("service", service(state)),
    ]
}

/// Where clients reach this node: its clear address, or its TLS one.
fn service(state: &ServerState) -> String {
    match state.access_address.is_empty() {
        true => state.tls_access_address.clone(),
        false => state.access_address.clone(),
    }
}

/// The `key=value` pairs of an info value, split on `separator`.
fn pairs(value: &str, separator: char) -> impl Iterator<Item = (&str, &str)> {
    value
        .split(separator)
        .filter_map(|pair| pair.split_once('='))
}

/// Adds one statistic of `context` as a sample with `labels`, typed by `is_gauge`.
fn add_stat(
    families: &mut Families,
    context: &str,
    (stat, text): (&str, &str),
    labels: &[(&'static str, String)],
    is_gauge: impl Fn(&str) -> bool,
) {
    let Some(value) = stat_value(text) else {
        return;
    };
    let kind = match stat.contains('-') || is_gauge(stat) {
        true => Kind::Gauge,
        false => Kind::Counter,
    };
    let help = || stat.replace(['_', '-', '.'], " ");
    families.add(
        metric_name(context, stat),
        kind,
        help,
        ("", labels.to_vec(), value),
    );
}

/// Everything the endpoint answers.
pub fn render(state: &ServerState) -> String {
    let mut families = Families::default();
    add_node(state, &mut families);
    add_namespaces(state, &mut families);
    add_sets(state, &mut families);
    add_sindexes(state, &mut families);
    add_latency_rates(state, &mut families);
    add_latency_histograms(state, &mut families);
    add_resp(state, &mut families);
    let mut out = String::new();
    families.write(&mut out);
    out
}

fn add_node(state: &ServerState, families: &mut Families) {
    let labels = node_labels(state);
    let mut up_labels = vec![("build", info::BUILD_VERSION.to_owned())];
    up_labels.extend(labels.iter().cloned());
    up_labels.push(("node_id", state.node_id.clone()));
    families.add(
        "aerospike_node_up".to_owned(),
        Kind::Gauge,
        || "node up".to_owned(),
        ("", up_labels, 1.0),
    );
    let statistics = info::value_of(state, b"statistics");
    for pair in pairs(&statistics, ';').filter(|(stat, _)| *stat != "cluster_key") {
        add_stat(families, "node_stats", pair, &labels, |stat| {
            NODE_GAUGES.contains(&stat)
        });
    }
}

fn add_namespaces(state: &ServerState, families: &mut Families) {
    for namespace in &state.namespaces {
        let name = namespace.name();
        let statistics = info::value_of(state, format!("namespace/{name}").as_bytes());
        let storage_engine = pairs(&statistics, ';')
            .find(|(stat, _)| *stat == "storage-engine")
            .map_or("memory", |(_, engine)| engine)
            .to_owned();
        let mut labels = node_labels(state);
        labels.push(("ns", name.to_owned()));
        labels.push(("storage_engine", storage_engine));
        for pair in pairs(&statistics, ';') {
            add_stat(families, "namespace", pair, &labels, |stat| {
                NAMESPACE_GAUGES.contains(&stat)
            });
        }
    }
}

fn add_sets(state: &ServerState, families: &mut Families) {
    let sets = info::value_of(state, b"sets");
    for set in sets.split(';').filter(|set| !set.is_empty()) {
        let field = |wanted: &str| {
            pairs(set, ':')
                .find(|(stat, _)| *stat == wanted)
                .map(|(_, value)| value.to_owned())
        };
        let (Some(namespace), Some(set_name)) = (field("ns"), field("set")) else {
            continue;
        };
        let mut labels = node_labels(state);
        labels.push(("ns", namespace));
        labels.push(("set", set_name));
        for pair in pairs(set, ':') {
            add_stat(families, "sets", pair, &labels, |_| true);
        }
    }
}

fn add_sindexes(state: &ServerState, families: &mut Families) {
    let list = info::value_of(state, b"sindex-list:");
    for index in list.split(';').filter(|index| !index.is_empty()) {
        let field = |wanted: &str| {
            pairs(index, ':')
                .find(|(stat, _)| *stat == wanted)
                .map(|(_, value)| value.to_owned())
        };
        let (Some(namespace), Some(name)) = (field("ns"), field("indexname")) else {
            continue;
        };
        let statistics = info::value_of(
            state,
            format!("sindex-stat:namespace={namespace};indexname={name}").as_bytes(),
        );
        let mut labels = node_labels(state);
        labels.push(("ns", namespace));
        labels.push(("sindex", name));
        for pair in pairs(&statistics, ';') {
            add_stat(families, "sindex", pair, &labels, |stat| {
                !SINDEX_COUNTERS.contains(&stat)
            });
        }
    }
}

/// The exporter's view of `latencies:`: per threshold 2^i units, the operations per second of
/// the last interval that took less (`le`), all of them under `+Inf` and in `_count`.
fn add_latency_rates(state: &ServerState, families: &mut Families) {
    let latencies = &state.latencies;
    let unit = match latencies.unit_name() {
        "usec" => "us",
        _ => "ms",
    };
    let windows = latencies.windows();
    for (entry, window) in latencies.entries().iter().zip(windows) {
        let Some(window) = window else { continue };
        let mut labels = node_labels(state);
        if let Some(namespace) = &entry.namespace {
            labels.push(("ns", namespace.clone()));
        }
        let name = format!(
            "aerospike_latencies_{}_{unit}",
            entry.operation.replace('-', "_")
        );
        let help = || format!("{} {unit} bucket", entry.operation.replace('-', " "));
        let bucket = |le: String, value: f64| {
            let mut labels = labels.clone();
            labels.push(("le", le));
            ("", labels, value)
        };
        let bucket_name = format!("{name}_bucket");
        families.add(
            bucket_name.clone(),
            Kind::Gauge,
            help,
            bucket("+Inf".to_owned(), window.ops_per_sec),
        );
        for (exponent, percent) in window.percent_at_least.iter().enumerate() {
            let faster = window.ops_per_sec - percent * window.ops_per_sec / 100.0;
            let le = (1u64 << exponent).to_string();
            families.add(bucket_name.clone(), Kind::Gauge, help, bucket(le, faster));
        }
        families.add(
            format!("{name}_count"),
            Kind::Gauge,
            || format!("{} {unit} count", entry.operation.replace('-', " ")),
            ("", labels.clone(), window.ops_per_sec),
        );
    }
}

/// The same histograms, cumulative since start, as Prometheus histograms in seconds.
fn add_latency_histograms(state: &ServerState, families: &mut Families) {
    let latencies = &state.latencies;
    for entry in latencies.entries() {
        let mut labels = node_labels(state);
        if let Some(namespace) = &entry.namespace {
            labels.push(("ns", namespace.clone()));
        }
        labels.push(("op", entry.operation.to_owned()));
        let unit_seconds = entry.histogram.unit_ns() as f64 / 1e9;
        // 2^i units is 2^(i + 10) ticks.
        let bounds = (0..crate::latency::aerospike::THRESHOLD_COUNT as u32)
            .map(|exponent| (f64::from(1u32 << exponent) * unit_seconds, exponent + 10));
        add_histogram(
            families,
            "osprey_latency_seconds",
            "time from a request's arrival to its reply, by namespace and operation",
            &labels,
            &entry.histogram.snapshot(),
            bounds,
        );
    }
}

/// A cumulative histogram: for each `(le in seconds, exponent)`, the count under
/// 2^exponent ticks; then `+Inf`, `_sum` and `_count`.
fn add_histogram(
    families: &mut Families,
    name: &str,
    help: &str,
    labels: &[(&'static str, String)],
    snapshot: &Snapshot,
    bounds: impl Iterator<Item = (f64, u32)>,
) {
    let help = || help.to_owned();
    for (le_seconds, exponent) in bounds {
        let mut bucket_labels = labels.to_vec();
        bucket_labels.push(("le", number(le_seconds)));
        let under = snapshot.count_below(1u64 << exponent) as f64;
        families.add(
            name.to_owned(),
            Kind::Histogram,
            help,
            ("_bucket", bucket_labels, under),
        );
    }
    let mut infinity = labels.to_vec();
    infinity.push(("le", "+Inf".to_owned()));
    let count = snapshot.count() as f64;
    let family = name.to_owned();
    families.add(
        family.clone(),
        Kind::Histogram,
        help,
        ("_bucket", infinity, count),
    );
    let sum_seconds = snapshot.sum_ns as f64 / 1e9;
    families.add(
        family.clone(),
        Kind::Histogram,
        help,
        ("_sum", labels.to_vec(), sum_seconds),
    );
    families.add(
        family,
        Kind::Histogram,
        help,
        ("_count", labels.to_vec(), count),
    );
}

fn add_resp(state: &ServerState, families: &mut Families) {
    use std::sync::atomic::Ordering;
    let labels = node_labels(state);
    let processed = state.resp_commands.load(Ordering::Relaxed) as f64;
    families.add(
        "osprey_resp_commands_processed_total".to_owned(),
        Kind::Counter,
        || "Redis commands run".to_owned(),
        ("", labels.clone(), processed),
    );
    let unknown = state.resp_unknown_commands.load(Ordering::Relaxed) as f64;
    families.add(
        "osprey_resp_unknown_commands_total".to_owned(),
        Kind::Counter,
        || "Redis commands refused as unknown".to_owned(),
        ("", labels.clone(), unknown),
    );
    for (command, [calls, nanoseconds, rejected, failed]) in command_stats::counts() {
        let mut labels = labels.clone();
        labels.push(("command", command.to_owned()));
        let counters = [
            ("osprey_resp_command_calls_total", "calls run", calls as f64),
            (
                "osprey_resp_command_seconds_total",
                "seconds spent running",
                nanoseconds as f64 / 1e9,
            ),
            (
                "osprey_resp_command_rejected_calls_total",
                "calls refused before running",
                rejected as f64,
            ),
            (
                "osprey_resp_command_failed_calls_total",
                "calls that answered an error",
                failed as f64,
            ),
        ];
        for (name, help, value) in counters {
            let help = || format!("Redis command {help}");
            families.add(
                name.to_owned(),
                Kind::Counter,
                help,
                ("", labels.clone(), value),
            );
        }
    }
    // A tick of Redis's unit is a nanosecond: bounds from 2^10 ns (about 1 µs) up.
    for latency in command_stats::latencies(|_| true) {
        let mut labels = labels.clone();
        labels.push(("command", latency.name.to_owned()));
        let bounds = (10..=36).map(|exponent| ((1u64 << exponent) as f64 / 1e9, exponent));
        add_histogram(
            families,
            "osprey_resp_command_duration_seconds",
            "Redis command durations (latency-tracking)",
            &labels,
            &latency.histogram,
            bounds,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_follow_the_exporter() {
        assert_eq!(
            metric_name("namespace", "write-commit-level.override"),
            "aerospike_namespace_write_commit_level_override"
        );
        assert_eq!(stat_value("true"), Some(1.0));
        assert_eq!(stat_value("12.5"), Some(12.5));
        assert_eq!(stat_value("memory"), None);
        assert_eq!(stat_value("NaN"), None);
    }

    #[test]
    fn a_family_is_written_once_with_its_samples_together_and_labels_escaped() {
        let mut families = Families::default();
        let labelled = |value: &str| vec![("ns", value.to_owned())];
        families.add(
            "a".to_owned(),
            Kind::Gauge,
            || "first".to_owned(),
            ("", labelled("x"), 1.0),
        );
        families.add(
            "b".to_owned(),
            Kind::Counter,
            || "b".to_owned(),
            ("", Vec::new(), 2.5),
        );
        families.add(
            "a".to_owned(),
            Kind::Gauge,
            || "again".to_owned(),
            ("", labelled("q\"\\\n"), 3.0),
        );
        let mut out = String::new();
        families.write(&mut out);
        assert_eq!(
            out,
            "# HELP a first\n# TYPE a gauge\na{ns=\"x\"} 1\na{ns=\"q\\\"\\\\\\n\"} 3\n\
             # HELP b b\n# TYPE b counter\nb 2.5\n"
        );
    }
}
