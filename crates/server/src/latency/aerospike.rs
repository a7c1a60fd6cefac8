//! Aerospike's latency histograms and its `latencies:` info command.
//!
//! Histograms, as Aerospike 6 names them: `batch-index` (a whole batch), and per namespace
//! `{ns}-read`, `{ns}-write` (deletes too), `{ns}-udf`, `{ns}-pi-query` (scans),
//! `{ns}-si-query` (secondary-index queries), each from the moment the request was read to
//! the moment its reply was handed to the socket (after the replicas it waits for answered);
//! and `{ns}-write-repl-write`, a master's wait for one replica to answer a replica write,
//! answered when named (`latencies:hist={ns}-write-repl-write`, or Aerospike's
//! `{ns}-benchmarks-write`), as Aerospike answers its benchmark histograms.
//!
//! `latencies:` answers the interval between the last two ticks (`ticker-interval-s`, 10 s):
//! `name:msec,<ops/sec>,<17 percentages>`, the percentage of that interval's operations that
//! took at least 2^i units (i from 0 to 16); a histogram with no tick behind it yet answers
//! `name:` alone, as Aerospike answers one it has not dumped yet.
//!
//! Invariants:
//! - Entry 0 is `batch-index`; namespace `n`'s entry for operation `op` is
//!   `1 + n * Op::ALL.len() + op as usize` ([`Latencies::id`]).
//! - Every entry's histogram counts in the same unit (ms, or µs with
//!   `microsecond-histograms`).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::histogram::{Histogram, Snapshot, TICKS_PER_UNIT};

/// The thresholds Aerospike reports: at least 2^0 to 2^16 units.
pub const THRESHOLD_COUNT: usize = 17;

/// What a namespace's histogram times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Single-record reads.
    Read,
    /// Single-record writes and deletes.
    Write,
    /// Record UDFs.
    Udf,
    /// Scans (primary-index queries).
    PiQuery,
    /// Secondary-index queries.
    SiQuery,
    /// A replica's answer to a replica write, seen from the master.
    WriteReplWrite,
}

impl Op {
    /// Every operation, in the order `latencies:` lists them.
    pub const ALL: [Op; 6] = [
        Op::Read,
        Op::Write,
        Op::Udf,
        Op::PiQuery,
        Op::SiQuery,
        Op::WriteReplWrite,
    ];

    /// The name after `{ns}-`.
    pub fn suffix(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Udf => "udf",
            Op::PiQuery => "pi-query",
            Op::SiQuery => "si-query",
            Op::WriteReplWrite => "write-repl-write",
        }
    }

    /// Whether `latencies:` with no name lists it (Aerospike lists its benchmark histograms
    /// only when named).
    fn listed(self) -> bool {
        self != Op::WriteReplWrite
    }
}

/// One histogram's place among [`Latencies`]' entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistogramId(usize);

/// One histogram with its name.
#[derive(Debug)]
pub struct Entry {
    /// Aerospike's name: `batch-index`, `{test}-read`.
    pub name: String,
    /// Its namespace, for a namespace's histogram.
    pub namespace: Option<String>,
    /// What it times: `batch-index`, `read`, `write-repl-write`.
    pub operation: &'static str,
    /// Whether `latencies:` lists it unnamed.
    pub listed: bool,
    /// The counts since start.
    pub histogram: Arc<Histogram>,
}

/// The rates of one tick interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Per threshold 2^i units, the percentage of operations that took at least that long.
    pub percent_at_least: [f64; THRESHOLD_COUNT],
}

/// The last tick: when, every entry's counts then, and the rates of the interval it ended.
#[derive(Debug)]
struct Ticks {
    at: Instant,
    counts: Vec<Snapshot>,
    windows: Vec<Option<Window>>,
}

/// Every Aerospike latency histogram of this node.
#[derive(Debug)]
pub struct Latencies {
    entries: Vec<Entry>,
    /// `msec` or `usec`.
    unit_name: &'static str,
    ticks: Mutex<Ticks>,
}

impl Latencies {
    /// The histograms of a node with these namespaces, in milliseconds or microseconds.
    pub fn new<'a>(namespaces: impl IntoIterator<Item = &'a str>, microseconds: bool) -> Latencies {
        let unit_ns = match microseconds {
            true => 1_000,
            false => 1_000_000,
        };
        let mut entries = vec![Entry {
            name: "batch-index".to_owned(),
            namespace: None,
            operation: "batch-index",
            listed: true,
            histogram: Arc::new(Histogram::new(unit_ns)),
        }];
        for namespace in namespaces {
            entries.extend(Op::ALL.iter().map(|op| Entry {
                name: format!("{{{namespace}}}-{}", op.suffix()),
                namespace: Some(namespace.to_owned()),
                operation: op.suffix(),
                listed: op.listed(),
                histogram: Arc::new(Histogram::new(unit_ns)),
            }));
        }
        let count = entries.len();
        Latencies {
            entries,
            unit_name: if microseconds { "usec" } else { "msec" },
            ticks: Mutex::new(Ticks {
                at: Instant::now(),
                counts: vec![Snapshot::default(); count],
                windows: vec![None; count],
            }),
        }
    }

    /// The whole-batch histogram.
    pub const BATCH_INDEX: HistogramId = HistogramId(0);

    /// The histogram of `op` on the namespace at `namespace_index` in configuration order.
    pub fn id(&self, namespace_index: usize, op: Op) -> HistogramId {
        // `Op::ALL` lists the operations in declaration order.
        debug_assert_eq!(Op::ALL[op as usize], op);
        let id = HistogramId(1 + namespace_index * Op::ALL.len() + op as usize);
        debug_assert!(id.0 < self.entries.len());
        id
    }

    /// Counts one operation of `id` that took `elapsed`.
    pub fn record(&self, id: HistogramId, elapsed: Duration) {
        self.record_many(id, elapsed, 1);
    }

    /// Counts `count` operations of `id` that each took `elapsed`.
    pub fn record_many(&self, id: HistogramId, elapsed: Duration, count: u64) {
        self.entries[id.0].histogram.record_many(elapsed, count);
    }

    /// The histogram of `op` on the namespace at `namespace_index`, shared (the replication of
    /// a cluster node records into its own).
    pub fn histogram(&self, namespace_index: usize, op: Op) -> Arc<Histogram> {
        Arc::clone(&self.entries[self.id(namespace_index, op).0].histogram)
    }

    /// Every histogram, in `latencies:` order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The unit every histogram counts in: `msec` or `usec`.
    pub fn unit_name(&self) -> &'static str {
        self.unit_name
    }

    /// Ends a tick interval: every entry's rates over it, for `latencies:` to answer until the
    /// next tick.
    pub fn tick(&self) {
        let now = Instant::now();
        let counts: Vec<Snapshot> = self
            .entries
            .iter()
            .map(|entry| entry.histogram.snapshot())
            .collect();
        let mut ticks = self.ticks.lock();
        let seconds = now.duration_since(ticks.at).as_secs_f64().max(1e-3);
        ticks.windows = counts
            .iter()
            .zip(&ticks.counts)
            .map(|(now, then)| Some(window(&now.since(then), seconds)))
            .collect();
        ticks.counts = counts;
        ticks.at = now;
    }

    /// Every entry's rates over the last tick interval; `None` before the first tick.
    pub fn windows(&self) -> Vec<Option<Window>> {
        self.ticks.lock().windows.clone()
    }

    /// The value of `latencies:` with `argument` (empty, or `hist=<name>`).
    pub fn info(&self, argument: &[u8]) -> String {
        let argument = String::from_utf8_lossy(argument);
        let wanted = argument
            .split(';')
            .find_map(|parameter| parameter.strip_prefix("hist="));
        let chosen: Vec<usize> = match wanted {
            None => (0..self.entries.len())
                .filter(|index| self.entries[*index].listed)
                .collect(),
            Some("") => return "ERROR:4:missing 'hist' value".to_owned(),
            Some(name) => match self.named(name) {
                Some(index) => vec![index],
                None => return "ERROR:4:bad hist name".to_owned(),
            },
        };
        let windows = self.windows();
        let mut value = String::new();
        for index in chosen {
            if !value.is_empty() {
                value.push(';');
            }
            let _ = write!(value, "{}:", self.entries[index].name);
            if let Some(window) = &windows[index] {
                let _ = write!(value, "{},{:.1}", self.unit_name, window.ops_per_sec);
                for percent in window.percent_at_least {
                    let _ = write!(value, ",{percent:.2}");
                }
            }
        }
        value
    }

    /// The entry `name` names: its own name, or Aerospike's `{ns}-benchmarks-write` for the
    /// replica-write histogram.
    fn named(&self, name: &str) -> Option<usize> {
        let name = match name.strip_suffix("-benchmarks-write") {
            Some(namespace) => format!("{namespace}-write-repl-write"),
            None => name.to_owned(),
        };
        self.entries.iter().position(|entry| entry.name == name)
    }
}

/// The rates of `counted` over `seconds`.
fn window(counted: &Snapshot, seconds: f64) -> Window {
    let count = counted.count();
    let percent_at_least = std::array::from_fn(|exponent| match count {
        0 => 0.0,
        _ => {
            let at_least = counted.count_at_least(TICKS_PER_UNIT << exponent);
            100.0 * at_least as f64 / count as f64
        }
    });
    Window {
        ops_per_sec: count as f64 / seconds,
        percent_at_least,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_the_first_tick_every_listed_histogram_answers_its_name_alone() {
        let latencies = Latencies::new(["test", "bar"], false);
        assert_eq!(
            latencies.info(b""),
            "batch-index:;{test}-read:;{test}-write:;{test}-udf:;{test}-pi-query:;\
             {test}-si-query:;{bar}-read:;{bar}-write:;{bar}-udf:;{bar}-pi-query:;\
             {bar}-si-query:"
        );
        assert_eq!(
            latencies.info(b"hist={bar}-benchmarks-write"),
            "{bar}-write-repl-write:"
        );
        assert_eq!(latencies.info(b"hist={nope}-read"), "ERROR:4:bad hist name");
        assert_eq!(latencies.info(b"hist="), "ERROR:4:missing 'hist' value");
    }

    #[test]
    fn a_tick_answers_the_rate_and_the_share_above_each_power_of_two() {
        let latencies = Latencies::new(["test"], false);
        let read = latencies.id(0, Op::Read);
        for millis in [0, 0, 1, 3] {
            latencies.record(read, Duration::from_micros(millis * 1_000 + 10));
        }
        latencies.tick();
        let value = latencies.info(b"hist={test}-read");
        let fields: Vec<&str> = value
            .strip_prefix("{test}-read:msec,")
            .expect("named, in ms")
            .split(',')
            .collect();
        assert_eq!(fields.len(), 1 + THRESHOLD_COUNT, "{value}");
        assert!(fields[0].parse::<f64>().expect("a rate") > 0.0);
        assert_eq!(&fields[1..4], ["50.00", "25.00", "0.00"], "{value}");
        // The next interval counts only what came after the tick.
        latencies.tick();
        let value = latencies.info(b"hist={test}-read");
        assert!(value.starts_with("{test}-read:msec,0.0,0.00,"), "{value}");
    }
}
