//! The engine: namespaces, partitions and the transactions that run on them.
//!
//! What it does: owns every namespace's 4096 partitions, each holding its slice of the primary
//! index behind its own lock, and executes single-record reads, writes (put, operate, touch) and
//! deletes with Aerospike's semantics: record-exists and generation policies, TTL and void time,
//! the bin and set limits, and the result code Aerospike returns for each failure. A background
//! caller drives [`Namespace::sweep_expired`] to reclaim expired records.
//!
//! Layer 3: depends on `index`, `model` and std (plus `parking_lot`, `smallvec`). No tokio, no
//! sockets: time comes from a [`Clock`], so tests are deterministic.
//!
//! Invariants:
//! - No lock is global: a transaction locks exactly one partition, for its whole duration,
//!   which is what makes a multi-op `operate` atomic.
//! - An expired record is never visible: every lookup checks the void time against the clock,
//!   whether or not the sweeper has run.
//! - A stored record has at least one bin and a generation of at least 1.
//!
//! Read `docs/ARCHITECTURE.md` (life of a read and of a write) and
//! `docs/internals/data-model.md` (record layout) first.

mod clock;
mod config;
mod msgpack;
mod namespace;
mod ops;
mod partition;
mod record;
mod scan;
mod set_index;
mod sets;
mod stats;
mod transaction;
mod truncate;
mod working_record;

pub use clock::{Clock, ManualClock, Now, SystemClock};
pub use config::NamespaceConfig;
pub use namespace::Namespace;
pub use partition::PieceEnd;
pub use record::{BinIter, BinRef};
pub use scan::{ScanOutcome, ScanScope, ScannedRecord};
pub use set_index::SetIndexBuild;
pub use sets::SetSummary;
pub use stats::{NamespaceSummary, Origin};
pub use transaction::{
    DeleteRequest, ExistsPolicy, GenerationPolicy, ReadRequest, RecordMeta, ReplySink, WriteRequest,
};
pub use truncate::TruncateError;
