//! The engine: namespaces, partitions and the transactions that run on them.
//!
//! What it does: owns every namespace's 4096 partitions, each holding its slice of the primary
//! index behind its own lock, and executes single-record reads, writes (put, operate, touch) and
//! deletes with Aerospike's semantics: record-exists and generation policies, TTL and void time,
//! the bin and set limits, and the result code Aerospike returns for each failure. It also walks
//! partitions for scans in short pieces ([`Namespace::scan_piece`]), keeps set indexes
//! ([`Namespace::enable_set_index`]) and hides truncated records at once
//! ([`Namespace::truncate`]). Background callers drive [`Namespace::sweep_expired`],
//! [`Namespace::reclaim_truncated`] and [`Namespace::build_set_index`].
//!
//! Layer 3: depends on `index`, `model` and std (plus `parking_lot`, `smallvec`, `rmp`,
//! `thiserror`). No tokio, no
//! sockets: time comes from a [`Clock`], so tests are deterministic.
//!
//! Invariants:
//! - No lock is global: a transaction locks exactly one partition, for its whole duration,
//!   which is what makes a multi-op `operate` atomic.
//! - An expired or truncated record is never visible: every lookup and scan checks the void
//!   time and the truncate cut-offs, whether or not the record has been reclaimed yet.
//! - A scan holds a partition's lock for at most one piece (a bounded number of entries).
//! - A stored record has at least one bin and a generation of at least 1.
//!
//! Read `docs/ARCHITECTURE.md` (life of a read and of a write) and
//! `docs/internals/data-model.md` (record layout) first.

mod ack;
mod bin_lookup;
mod bits;
pub(crate) mod cdt;
mod clock;
mod commit;
mod config;
mod deadline;
mod edit;
mod evict;
mod exclusive;
pub mod exp;
mod filter;
mod geo;
mod hll;
mod msgpack;
mod namespace;
mod ops;
mod partition;
mod persist;
mod record;
mod scan;
mod set_index;
mod sets;
mod sindex;
mod stats;
mod transaction;
mod truncate;
mod update;
mod working_record;

pub use ack::{AckError, AckLatch, Acks};
/// Collection values (msgpack as Aerospike packs lists and maps) and bin particles.
pub use cdt::value as collection;
pub use clock::{Clock, ManualClock, Now, SystemClock};
pub use commit::{Change, ChangeKind, ChangeSink, PartitionRole, RecordVersion, RemovalListener};
pub use config::NamespaceConfig;
pub use deadline::Deadline;
pub use edit::{EditRequest, RecordEdit};
pub use exclusive::{WaitHook, Wake, Watch, set_wait_hook};
pub use exp::{Expression, RecordFacts};
pub use namespace::Namespace;
pub use partition::PieceEnd;
pub use persist::OpenError;
pub use record::{BinIter, BinRef, Bins, NativeValue, PackedBinMut};
pub use scan::{ScanOutcome, ScanScope, ScannedRecord};
pub use set_index::SetIndexBuild;
pub use sets::SetSummary;
pub use sindex::{
    FilterRef, INDEX_ENTRY_SIZE_BYTES as SINDEX_ENTRY_SIZE_BYTES, IndexCollection, IndexDefinition,
    IndexError, IndexKey, IndexKind, IndexSource, KeyRange, QueryFilter, QueryPieceEnd,
    SecondaryIndex, canonical as sindex_canonical,
};
pub use stats::{NamespaceSummary, Origin};
pub use transaction::{
    DeleteRequest, ExistsPolicy, GenerationPolicy, ReadRequest, RecordMeta, ReplySink, WriteRequest,
};
pub use truncate::TruncateError;
pub use update::{BinWriter, Current, CurrentMut, Decision, Expiry, RecordAddress};
