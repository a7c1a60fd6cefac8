//! A namespace: configuration, 4096 partitions and the set registry.
//!
//! Invariants:
//! - `partitions.len() == PARTITION_COUNT`, and a digest's record lives only in the partition
//!   its `partition_id()` names.
//! - `truncate_before_ms` only grows, like each set's cut-off; a record is stamped with a last
//!   update time no older than the cut-offs of its namespace and set, so a write that follows
//!   a truncate always survives it.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use model::{Digest, PARTITION_COUNT};
use parking_lot::Mutex;

use crate::ack::Acks;
use crate::clock::{Clock, Now};
use crate::commit::{ChangeKind, ChangeSink, PartitionRole};
use crate::config::NamespaceConfig;
use crate::exclusive::{Gate, Watch, WatchRegistry};
use crate::partition::{PartitionSlot, Visibility};
use crate::record::{Record, SetId};
use crate::scan::ScanCounters;
use crate::sets::{SetRegistry, SetSummary};
use crate::sindex::SecondaryIndexes;
use crate::stats::{Counter, NamespaceSummary};

/// Estimated bytes one primary index entry costs: the digest, the record's fixed fields and
/// the B-tree's share (measured at about 80 bytes; see the design brief).
pub const INDEX_ENTRY_SIZE_BYTES: u64 = 80;
/// Estimated bytes one set index entry costs: a digest in a B-tree node (about 32 bytes).
pub const SET_INDEX_ENTRY_SIZE_BYTES: u64 = 32;

/// One namespace and everything it stores.
pub struct Namespace {
    pub(crate) config: NamespaceConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) partitions: Box<[PartitionSlot]>,
    pub(crate) sets: SetRegistry,
    /// Records last updated before this (Unix ms) were truncated; 0 = never.
    pub(crate) truncate_before_ms: AtomicU64,
    /// Serializes enabling and disabling set indexes (rare; builds run outside it).
    pub(crate) set_index_lock: Mutex<()>,
    pub(crate) scan_counters: ScanCounters,
    /// Isolation for multi-key transactions ([`Namespace::exclusive`]).
    pub(crate) gate: Gate,
    /// Watches on keys ([`Namespace::watch`]).
    pub(crate) watches: Arc<WatchRegistry>,
    /// Device storage, if the namespace has it (see `persist.rs`).
    pub(crate) storage: Option<storage::Storage>,
    /// The machine's memory use in percent, as last sampled by the server (see `evict.rs`).
    pub(crate) memory_used_pct: AtomicU8,
    /// Secondary indexes (see `sindex.rs`).
    pub(crate) sindexes: SecondaryIndexes,
    /// Where committed changes go (see `commit.rs`); unset on a single node.
    pub(crate) change_sink: OnceLock<Arc<dyn ChangeSink>>,
    /// Told of the records the server removes itself (see `commit.rs`); unset but for the
    /// namespace Redis commands use.
    pub(crate) removal_listener: OnceLock<Arc<dyn crate::commit::RemovalListener>>,
    /// On a cluster, set while this node cannot reach a quorum of the metadata group: client
    /// writes are refused (UNAVAILABLE) rather than applied on a side that may be failed over.
    /// Client writes are taken until this Unix time (ms); 0: refused; `u64::MAX`: always.
    pub(crate) writes_allowed_until_ms: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Namespace")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A removed record's set name and stored key (particle type, bytes).
type NamedRemoval = (Vec<u8>, (u8, Vec<u8>));

impl Namespace {
    /// An empty namespace, in memory ([`Namespace::open`] opens one with storage).
    ///
    /// # Panics
    /// If `config` does not validate; callers validate it when loading configuration.
    pub fn new(config: NamespaceConfig, clock: Arc<dyn Clock>) -> Namespace {
        if let Err(reason) = config.validate() {
            panic!("invalid namespace config: {reason}");
        }
        let partitions = (0..PARTITION_COUNT)
            .map(|_| PartitionSlot::default())
            .collect();
        let namespace = Namespace {
            config,
            clock,
            partitions,
            sets: SetRegistry::new(),
            truncate_before_ms: AtomicU64::new(0),
            set_index_lock: Mutex::new(()),
            scan_counters: ScanCounters::default(),
            gate: Gate::default(),
            watches: Arc::default(),
            storage: None,
            memory_used_pct: AtomicU8::new(0),
            sindexes: SecondaryIndexes::default(),
            change_sink: OnceLock::new(),
            removal_listener: OnceLock::new(),
            writes_allowed_until_ms: std::sync::atomic::AtomicU64::new(u64::MAX),
        };
        for set_name in &namespace.config.indexed_sets {
            // Validation checked the names; the partitions are empty, so the build is quick.
            if let Ok(Some(build)) = namespace.enable_set_index(set_name.as_bytes()) {
                namespace.build_set_index(build);
            }
        }
        namespace
    }

    /// The namespace name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Its configuration.
    pub fn config(&self) -> &NamespaceConfig {
        &self.config
    }

    /// Statistics summed over every partition.
    pub fn summary(&self) -> NamespaceSummary {
        let mut summary = NamespaceSummary::default();
        let mut set_index_entries = 0;
        for slot in &self.partitions {
            let partition = slot.state.read();
            summary.objects += partition.object_count();
            summary.data_used_bytes += partition.data_used_bytes();
            set_index_entries += partition.set_index_entries();
            drop(partition);
            summary.add_counters(&slot.counters);
        }
        summary.index_used_bytes = summary.objects * INDEX_ENTRY_SIZE_BYTES;
        summary.set_index_used_bytes = set_index_entries * SET_INDEX_ENTRY_SIZE_BYTES;
        (
            summary.scans_complete,
            summary.scans_aborted,
            summary.scans_failed,
        ) = self.scan_counters.get();
        summary
    }

    /// Every set with its record count, in creation order.
    pub fn sets(&self) -> Vec<SetSummary> {
        self.sets.summaries()
    }

    /// Reclaims every expired record, one partition at a time; returns how many.
    pub fn sweep_expired(&self) -> u64 {
        let now_seconds = self.clock.now().epoch_seconds();
        self.remove_everywhere(Counter::ExpiredObjects, |record| {
            record.void_time.is_expired_at(now_seconds)
        })
    }

    /// Reclaims every record hidden by a truncate, one partition at a time; returns how many.
    /// Truncated records are invisible from the moment of the truncate; this frees them.
    pub fn reclaim_truncated(&self) -> u64 {
        let visibility = self.visibility(self.clock.now());
        self.remove_everywhere(Counter::TruncatedObjects, |record| {
            visibility.truncated(record)
        })
    }

    pub(crate) fn remove_everywhere(
        &self,
        counter: Counter,
        doomed: impl Fn(&Record) -> bool,
    ) -> u64 {
        let mut total = 0;
        let kind = ChangeKind::removal(counter);
        let listener = self
            .removal_listener
            .get()
            .filter(|listener| kind.is_some() && listener.listening());
        for slot in &self.partitions {
            // Readers are only blocked for partitions that really hold such records.
            if !slot.state.read().any(&doomed) {
                continue;
            }
            let mut partition = slot.state.write();
            let indexes = self.sindexes.snapshot();
            let mut unindexed = Vec::new();
            let mut gone = Vec::new();
            let mut named = Vec::new();
            // A replica's removals are its master's to announce.
            let announced = listener.is_some() && partition.role == PartitionRole::Master;
            let removed = partition.remove_where(
                |_, r| doomed(r),
                &self.sets,
                |digest, record| {
                    let keys = self.indexed_keys(&indexes, digest, Some(record));
                    if !keys.is_empty() {
                        unindexed.push((*digest, keys));
                    }
                    if announced {
                        named.extend(self.set_and_key(digest, record));
                    }
                    self.forget(digest, record, counter);
                    gone.push(*digest);
                },
            );
            for (digest, keys) in unindexed {
                Self::reindex(&indexes, &mut partition, &digest, keys, Vec::new(), None);
            }
            if let Some(kind) = ChangeKind::removal(counter) {
                // Nobody is answered for a removal the server made itself.
                let mut acks = Acks::default();
                for digest in &gone {
                    self.committed(partition.version, digest, kind, None, &mut acks);
                }
            }
            drop(partition);
            if let (Some(listener), Some(kind)) = (listener, kind) {
                for (set_name, (particle_type, key)) in &named {
                    listener.removed(set_name, (*particle_type, key), kind);
                }
            }
            slot.counters.add(counter, removed);
            total += removed;
        }
        total
    }

    /// A removed record's set name and stored key (read back from the device if need be);
    /// `None` for a record stored without its key, or one that cannot be read.
    fn set_and_key(&self, digest: &Digest, record: &Record) -> Option<NamedRemoval> {
        let loaded = self.load(digest, record).ok()?;
        let (particle_type, key) = loaded.user_key()?;
        let set_name = self
            .sets
            .name_of(record.set_id)
            .unwrap_or_default()
            .to_vec();
        Some((set_name, (particle_type, key.to_vec())))
    }

    pub(crate) fn slot(&self, digest: &Digest) -> &PartitionSlot {
        &self.partitions[digest.partition_id().index()]
    }

    pub(crate) fn visibility(&self, now: Now) -> Visibility<'_> {
        Visibility {
            now,
            namespace_truncate_before_ms: self.truncate_before_ms.load(Ordering::Acquire),
            sets: &self.sets,
        }
    }

    /// Runs `run` with no other command of this namespace running: the commands `run` issues
    /// (on this thread) see and make changes no one else interleaves with. Every other
    /// command, from either protocol, waits.
    pub fn exclusive<T>(&self, run: impl FnOnce() -> T) -> T {
        self.gate.exclusive(run)
    }

    /// Starts watching the record at `digest`: the watch turns dirty when any write, delete or
    /// truncate touches it. Register the watch before reading the record, so that a write in
    /// between is not missed.
    pub fn watch(&self, digest: Digest) -> Watch {
        self.watches.watch(digest, None)
    }

    /// A watch that also calls `wake` after every write, delete or truncate that touches the
    /// record at `digest`, from whichever thread wrote, under the record's partition lock:
    /// `wake` must be cheap and take no partition lock (Redis's blocked clients use it).
    pub fn watch_waking(&self, digest: Digest, wake: crate::Wake) -> Watch {
        self.watches.watch(digest, Some(wake))
    }

    /// The last-update time to stamp on a write: now, or the newest truncate cut-off of the
    /// namespace and the set if the clock is behind it (a write after a truncate survives it).
    pub(crate) fn last_update_ms_for(&self, set_id: SetId, now: Now) -> u64 {
        now.unix_ms
            .max(self.truncate_before_ms.load(Ordering::Acquire))
            .max(self.sets.truncate_before_ms(set_id))
    }
}
