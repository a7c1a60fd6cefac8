//! Latency: the histograms ([`histogram`]), the Aerospike ones by namespace and operation with
//! their `latencies:` info command ([`aerospike`]), and what Redis's `LATENCY HISTOGRAM` and
//! INFO `latencystats` answer from the per-command histograms ([`redis`]).

pub mod aerospike;
mod histogram;
pub mod redis;

pub use aerospike::{HistogramId, Latencies, Op};
pub use histogram::{Histogram, LazyBuckets, Snapshot};
