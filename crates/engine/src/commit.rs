//! The seams a cluster builds on: one access path for client commands, one commit path for
//! every change, and partitions streamed out and merged in.
//!
//! **Access.** Every single-record client command enters through [`Namespace::read_access`] or
//! [`Namespace::write_access`], which take the partition's lock and, under it, check the
//! partition's [`PartitionRole`] on this node: a write needs the master, a read the master or
//! a full replica. Anything else is UNAVAILABLE (11), the signal for the server to forward the
//! command to the partition's owner. Because the role is checked under the same lock as the
//! operation, a role change (which takes the write lock) falls wholly before or after it.
//!
//! **Commit.** Every change to a record (write, delete, touch, an in-place change of a native
//! value, expiry, eviction) ends in [`Namespace::committed`] while the partition lock is still
//! held, which hands it to the namespace's [`ChangeSink`] (none on a single node). So the order
//! in which a sink sees one partition's changes is the order they were applied: the order a
//! master replicates them in. Truncates, which are namespace-wide, reach the sink as
//! [`ChangeSink::truncated`].
//!
//! **Streams.** [`Namespace::stream_out`] walks a partition in digest order in bounded pieces,
//! handing out every record's full version (including ones clients no longer see: a replica
//! must hide them by the same rules). [`Namespace::merge_in`] applies a version streamed from
//! another node, keeping whichever is newer by generation, then last-update time, as
//! Aerospike's `as_record_replace_if_better` does; while a partition fills, a record the master
//! changed since the fill began (written or deleted) keeps that change, so an older copy
//! streamed afterwards can neither overwrite it nor bring it back.
//! [`Namespace::merge_replicated`] applies the master's changes in the master's order.
//!
//! Invariants:
//! - A client command touches a partition only if the role check passed under its lock.
//! - The sink is called under the partition's write lock, exactly once per applied change, and
//!   never for a change that failed.
//! - A partition's version only grows; [`Namespace::merge_replicated`] refuses a change carrying
//!   an older version than the partition's (CLUSTER_KEY_MISMATCH, 7).

use std::borrow::Cow;
use std::fmt::Debug;

use model::{Digest, Generation, PartitionId, ResultCode, VoidTime};
use parking_lot::{RwLockReadGuard, RwLockWriteGuard};

use crate::ack::Acks;
use crate::clock::Now;
use crate::exclusive::SharedGuard;
use crate::namespace::Namespace;
use crate::partition::{Partition, PartitionSlot, Visibility};
use crate::record::{self, Record, RecordHeader};
use crate::stats::Counter;

/// What this node is for one partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PartitionRole {
    /// It orders and applies the partition's writes and serves its reads (a single node is
    /// master of every partition).
    #[default]
    Master,
    /// It holds a full copy, applies the master's changes and may serve reads.
    Replica,
    /// It is receiving a copy and serves no client.
    Filling,
    /// It holds nothing of the partition.
    Absent,
}

impl PartitionRole {
    /// Whether clients may read the partition here.
    pub fn serves_reads(self) -> bool {
        matches!(self, PartitionRole::Master | PartitionRole::Replica)
    }

    /// Whether the node keeps the partition's records (and applies replicated changes).
    pub fn holds_data(self) -> bool {
        !matches!(self, PartitionRole::Absent)
    }
}

/// What happened to a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// A new version was stored (write, touch, in-place change).
    Stored,
    /// A client deleted it.
    Deleted,
    /// Its void time passed and it was reclaimed.
    Expired,
    /// It was evicted to free memory.
    Evicted,
}

impl ChangeKind {
    /// The kind of a removal the server makes itself, by the statistic it counts in; `None`
    /// for a truncate's reclaim (the truncate itself reached the sink).
    pub(crate) fn removal(counter: Counter) -> Option<ChangeKind> {
        match counter {
            Counter::ExpiredObjects => Some(ChangeKind::Expired),
            Counter::EvictedObjects => Some(ChangeKind::Evicted),
            _ => None,
        }
    }
}

/// One applied change, as the sink sees it (borrowed under the partition lock).
pub struct Change<'a> {
    /// The record's partition.
    pub partition: PartitionId,
    /// The partition's version when the change was applied.
    pub partition_version: u64,
    /// The record.
    pub digest: &'a Digest,
    /// What happened.
    pub kind: ChangeKind,
    /// The new version, for [`ChangeKind::Stored`].
    stored: Option<(&'a Record, &'a [u8])>,
    namespace: &'a Namespace,
}

impl Debug for Change<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Change")
            .field("partition", &self.partition)
            .field("digest", self.digest)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Change<'_> {
    /// The record as it now is: its stored version, or a tombstone for a removal.
    pub fn version(&self) -> RecordVersion {
        match self.stored {
            Some((record, data)) => self.namespace.version_of(self.digest, record, data),
            None => RecordVersion::tombstone(*self.digest),
        }
    }
}

/// Receives every change of a namespace, in each partition's order (see the module doc).
pub trait ChangeSink: Send + Sync + Debug {
    /// `change` was applied, under its partition's lock. Whatever must confirm it before its
    /// client is answered goes into `acks`.
    fn changed(&self, change: &Change<'_>, acks: &mut Acks);

    /// Records of `set_name` (empty: of the namespace) last updated before `before_ms` were
    /// truncated.
    fn truncated(&self, set_name: &[u8], before_ms: u64);

    /// What the last change of `digest` still awaits from the replicas it was sent to, if it
    /// is not confirmed yet (a cluster's sink knows; none otherwise). A reply that shows that
    /// record's state waits on it ([`Namespace::join_unconfirmed`]).
    fn unconfirmed(&self, _digest: &Digest) -> Option<std::sync::Arc<crate::ack::AckLatch>> {
        None
    }
}

/// Told of the records the server removes itself (expired, evicted) from the partitions it is
/// master of, with their set and stored key: what Redis's keyspace notifications of class `x`
/// and `e` name. Called after the partition's lock is released, in the order of the removals.
pub trait RemovalListener: Send + Sync + Debug {
    /// Whether it wants removals now: checked before any key is read (a record on a device
    /// would be read back for its key).
    fn listening(&self) -> bool;

    /// A record of `set_name` stored with `key` (its particle type and bytes) was removed.
    fn removed(&self, set_name: &[u8], key: (u8, &[u8]), kind: ChangeKind);
}

/// A record's full version, owned: what streams and replica writes carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordVersion {
    /// The record.
    pub digest: Digest,
    /// Its set (empty: none).
    pub set_name: Vec<u8>,
    /// Its generation (0 for a tombstone).
    pub generation: Generation,
    /// Its last-update time (Unix ms).
    pub last_update_ms: u64,
    /// When it expires.
    pub void_time: VoidTime,
    /// Its stored data (user key and bins, in the record layout); `None` for a tombstone.
    pub data: Option<Box<[u8]>>,
}

impl RecordVersion {
    /// The version of a deleted record.
    pub fn tombstone(digest: Digest) -> RecordVersion {
        RecordVersion {
            digest,
            set_name: Vec::new(),
            generation: Generation(0),
            last_update_ms: 0,
            void_time: VoidTime::NEVER,
            data: None,
        }
    }

    /// Whether this version should replace one with `generation` and `last_update_ms`
    /// (generation, then last-update time): Aerospike's default conflict resolution.
    fn beats(&self, generation: Generation, last_update_ms: u64) -> bool {
        (self.generation.0, self.last_update_ms) > (generation.0, last_update_ms)
    }
}

/// A client command's way into a partition for reading (see the module doc).
pub(crate) struct ReadAccess<'n> {
    pub(crate) visibility: Visibility<'n>,
    pub(crate) slot: &'n PartitionSlot,
    pub(crate) partition: RwLockReadGuard<'n, Partition>,
    _gate: SharedGuard<'n>,
}

/// A client command's way into a partition for writing.
pub(crate) struct WriteAccess<'n> {
    pub(crate) now: Now,
    pub(crate) visibility: Visibility<'n>,
    pub(crate) slot: &'n PartitionSlot,
    pub(crate) partition: RwLockWriteGuard<'n, Partition>,
    _gate: SharedGuard<'n>,
}

impl Namespace {
    /// Enters the partition of `digest` to read, if this node serves its reads.
    ///
    /// # Errors
    /// UNAVAILABLE when it does not (the partition is elsewhere or still filling).
    pub(crate) fn read_access(
        &self,
        digest: &Digest,
        now: Now,
    ) -> Result<ReadAccess<'_>, ResultCode> {
        let visibility = self.visibility(now);
        let slot = self.slot(digest);
        let gate = self.gate.shared();
        let partition = slot.state.read();
        if !partition.role.serves_reads() {
            return Err(ResultCode::Unavailable);
        }
        Ok(ReadAccess {
            visibility,
            slot,
            partition,
            _gate: gate,
        })
    }

    /// Enters the partition of `digest` to write, if this node is its master.
    ///
    /// # Errors
    /// UNAVAILABLE when it is not.
    pub(crate) fn write_access(
        &self,
        digest: &Digest,
        now: Now,
    ) -> Result<WriteAccess<'_>, ResultCode> {
        let visibility = self.visibility(now);
        let slot = self.slot(digest);
        let gate = self.gate.shared();
        let partition = slot.state.write();
        let refused = now.unix_ms
            > self
                .writes_allowed_until_ms
                .load(std::sync::atomic::Ordering::Relaxed);
        if partition.role != PartitionRole::Master || refused {
            return Err(ResultCode::Unavailable);
        }
        Ok(WriteAccess {
            now,
            visibility,
            slot,
            partition,
            _gate: gate,
        })
    }

    /// Records of set `set_name` in the partitions this node is master of: on a cluster, each
    /// record is counted on exactly one node. Unknown sets hold none.
    pub fn set_master_objects(&self, set_name: &[u8]) -> u64 {
        let Some(set_id) = self.sets.id_of(set_name) else {
            return 0;
        };
        self.partitions
            .iter()
            .map(|slot| slot.state.read())
            .filter(|partition| partition.role == PartitionRole::Master)
            .map(|partition| partition.set_object_count(set_id))
            .sum()
    }

    /// Records in partitions this node is master of, and in those it holds as a replica (or
    /// fills): Aerospike's `master_objects` and `prole_objects`.
    pub fn objects_by_role(&self) -> (u64, u64) {
        let (mut master, mut prole) = (0, 0);
        for slot in self.partitions.iter() {
            let partition = slot.state.read();
            match partition.role {
                PartitionRole::Master => master += partition.object_count(),
                PartitionRole::Replica | PartitionRole::Filling => {
                    prole += partition.object_count()
                }
                PartitionRole::Absent => {}
            }
        }
        (master, prole)
    }

    /// How many records `partition` holds and a hash of their content (FNV-1a over each
    /// record's digest, generation, last-update time, void time and data, in digest order):
    /// equal on two nodes exactly when they hold the same versions. For checking replicas.
    pub fn partition_content_hash(&self, partition: PartitionId) -> (u64, u64) {
        const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut hash = FNV_OFFSET;
        let mut absorb = |bytes: &[u8]| {
            for &byte in bytes {
                hash = (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
            }
        };
        let state = self.partitions[partition.index()].state.read();
        let mut count = 0;
        for (digest, record) in state.records_after(None) {
            let Ok(loaded) = self.load(digest, record) else {
                continue;
            };
            count += 1;
            absorb(&digest.0);
            absorb(&record.generation.0.to_le_bytes());
            absorb(&record.last_update_ms.to_le_bytes());
            absorb(&record.void_time.0.to_le_bytes());
            absorb(&loaded.packed_data());
        }
        (count, hash)
    }

    /// The first `max` records of `partition` held here (expired ones included), in digest
    /// order: digest, generation and last-update time, for comparing copies record by record.
    pub fn partition_versions(
        &self,
        partition: PartitionId,
        max: usize,
    ) -> Vec<(Digest, u32, u64)> {
        let state = self.partitions[partition.index()].state.read();
        state
            .records_after(None)
            .take(max)
            .map(|(digest, record)| {
                (
                    *digest,
                    u32::from(record.generation.0),
                    record.last_update_ms,
                )
            })
            .collect()
    }

    /// Refuses every client write (UNAVAILABLE) while `refused`: a node cut off from its
    /// cluster's quorum must not take writes the other side may never see.
    pub fn set_writes_refused(&self, refused: bool) {
        let until_ms = if refused { 0 } else { u64::MAX };
        self.writes_allowed_until_ms
            .store(until_ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// Takes client writes for `lease_ms` from now only: a node that decides again and again
    /// that it may take writes (it hears a quorum) lets the permission lapse when it stops
    /// deciding (a paused process, resumed, refuses writes until it has looked again).
    pub fn allow_writes_for(&self, lease_ms: u64) {
        let until_ms = self.clock.now_unix_ms().saturating_add(lease_ms);
        self.writes_allowed_until_ms
            .store(until_ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// Begins (or begins again) filling `partition` from its master: drops every record held
    /// here, so that what remains afterwards is exactly what the master streams from now on and
    /// replicates meanwhile. Nothing held before can be trusted: a copy left from before, or
    /// even one the master replicated to this node under an older table, may be of a record
    /// changed or deleted since, and a master sends a filling node its changes only once the
    /// stream began (the stream that follows carries the record as it is). Returns how many
    /// records were dropped.
    ///
    /// # Errors
    /// UNAVAILABLE when this node does not fill the partition.
    pub fn begin_fill(&self, partition: PartitionId) -> Result<u64, ResultCode> {
        let mut state = self.partitions[partition.index()].state.write();
        if state.role != PartitionRole::Filling {
            return Err(ResultCode::Unavailable);
        }
        state.replicated_during_fill.clear();
        Ok(self.remove_records(&mut state, |_| true))
    }

    /// This node's role for `partition` and the partition's version.
    pub fn partition_role(&self, partition: PartitionId) -> (PartitionRole, u64) {
        let state = self.partitions[partition.index()].state.read();
        (state.role, state.version)
    }

    /// Sets this node's role for `partition` at `version`, taking replicated changes that
    /// carry `fence_version` or later (the version since which the partition's master is
    /// master). A partition that stops holding data here is emptied; a change of role forgets
    /// which records were replicated during a fill.
    ///
    /// # Errors
    /// CLUSTER_KEY_MISMATCH when `version` is older than the partition's.
    pub fn set_partition_role(
        &self,
        partition: PartitionId,
        role: PartitionRole,
        version: u64,
        fence_version: u64,
    ) -> Result<(), ResultCode> {
        debug_assert!(fence_version <= version);
        let mut state = self.partitions[partition.index()].state.write();
        if version < state.version {
            return Err(ResultCode::ClusterKeyMismatch);
        }
        // What a fill took from one master says nothing of what the next one holds: a fill
        // under a new master starts from nothing replicated (see `begin_fill`).
        if role != state.role || fence_version != state.fence_version {
            state.replicated_during_fill.clear();
        }
        state.fence_version = fence_version;
        if !role.holds_data() && state.role.holds_data() {
            self.empty_partition(&mut state);
        }
        state.role = role;
        state.version = version;
        Ok(())
    }

    /// Removes every record of a partition this node no longer holds (under its write lock).
    fn empty_partition(&self, partition: &mut Partition) {
        self.remove_records(partition, |_| true);
    }

    /// Removes the records whose digest is `doomed`, with their index entries (under the
    /// partition's write lock). Returns how many.
    fn remove_records(&self, partition: &mut Partition, doomed: impl Fn(&Digest) -> bool) -> u64 {
        let indexes = self.sindexes.snapshot();
        let mut unindexed = Vec::new();
        let removed = partition.remove_where(
            |digest: &Digest, _: &Record| doomed(digest),
            &self.sets,
            |digest, record| {
                let keys = self.indexed_keys(&indexes, digest, Some(record));
                if !keys.is_empty() {
                    unindexed.push((*digest, keys));
                }
                self.forget(digest, record, Counter::TruncatedObjects);
            },
        );
        for (digest, keys) in unindexed {
            Self::reindex(&indexes, partition, &digest, keys, Vec::new(), None);
        }
        removed
    }

    /// The commit point of every change: hands it to the sink, under the partition lock.
    /// `stored` is the new version with its packed data, for [`ChangeKind::Stored`].
    pub(crate) fn committed(
        &self,
        partition_version: u64,
        digest: &Digest,
        kind: ChangeKind,
        stored: Option<(&Record, &[u8])>,
        acks: &mut Acks,
    ) {
        debug_assert_eq!(kind == ChangeKind::Stored, stored.is_some());
        let Some(sink) = self.change_sink.get() else {
            return;
        };
        sink.changed(
            &Change {
                partition: digest.partition_id(),
                partition_version,
                digest,
                kind,
                stored,
                namespace: self,
            },
            acks,
        );
    }

    /// Tells `listener` of the records the server removes itself from now on (once; later
    /// calls are ignored and return false).
    pub fn set_removal_listener(&self, listener: std::sync::Arc<dyn RemovalListener>) -> bool {
        self.removal_listener.set(listener).is_ok()
    }

    /// Makes `acks` wait until the state of `digest` that a reply shows (a read's record, a
    /// failed condition's generation) is confirmed by the replicas its last change was sent
    /// to, so that no reply shows a state a failover could lose. Call it after the read or the
    /// refused write: a change applied since is waited for too, which only delays the reply.
    pub fn join_unconfirmed(&self, digest: &Digest, acks: &mut Acks) {
        let latch = self
            .change_sink
            .get()
            .and_then(|sink| sink.unconfirmed(digest));
        if let Some(latch) = latch {
            acks.add_latch(latch);
        }
    }

    /// Sends every change from now on to `sink` (once; later calls are ignored and return
    /// false).
    pub fn set_change_sink(&self, sink: std::sync::Arc<dyn ChangeSink>) -> bool {
        self.change_sink.set(sink).is_ok()
    }

    fn version_of(&self, digest: &Digest, record: &Record, data: &[u8]) -> RecordVersion {
        RecordVersion {
            digest: *digest,
            set_name: self
                .sets
                .name_of(record.set_id)
                .unwrap_or_default()
                .to_vec(),
            generation: record.generation,
            last_update_ms: record.last_update_ms,
            void_time: record.void_time,
            data: Some(data.into()),
        }
    }

    /// Runs `then` with `digest`'s current version (a tombstone when there is no record), this
    /// node's role for its partition and the partition's version, under the partition's read
    /// lock: a replica write `then` queues goes out before that of any later change, which
    /// needs the write lock. `None` when the record cannot be read now (a device error).
    pub fn with_current_version<T>(
        &self,
        digest: &Digest,
        then: impl FnOnce(RecordVersion, PartitionRole, u64) -> T,
    ) -> Option<T> {
        let partition = self.slot(digest).state.read();
        let version = match partition.any_record(digest) {
            Some(record) => {
                let loaded = self.load(digest, record).ok()?;
                self.version_of(digest, record, &loaded.packed_data())
            }
            None => RecordVersion::tombstone(*digest),
        };
        Some(then(version, partition.role, partition.version))
    }

    /// Walks `partition` in digest order strictly after `after`, handing `emit` each record's
    /// full version, until `examine_max` records were visited or `emit` returns false. Holds
    /// the partition's read lock for the piece only. Returns where the piece ended.
    pub fn stream_out(
        &self,
        partition: PartitionId,
        after: Option<&Digest>,
        examine_max: usize,
        mut emit: impl FnMut(RecordVersion) -> bool,
    ) -> crate::PieceEnd {
        let state = self.partitions[partition.index()].state.read();
        let mut last = after.copied();
        for (examined, (digest, record)) in state.records_after(after).enumerate() {
            if examined == examine_max {
                return crate::PieceEnd {
                    last,
                    exhausted: false,
                };
            }
            last = Some(*digest);
            let data: Cow<'_, [u8]> = match self.load(digest, record) {
                Ok(loaded) => Cow::Owned(loaded.packed_data().into_owned()),
                // Logged and counted by the storage; the receiver asks again later.
                Err(_) => continue,
            };
            if !emit(self.version_of(digest, record, &data)) {
                return crate::PieceEnd {
                    last,
                    exhausted: false,
                };
            }
        }
        crate::PieceEnd {
            last,
            exhausted: true,
        }
    }

    /// Merges a version streamed from another node (a partition's snapshot, while it fills
    /// here): stored if the partition holds no newer version of the record. A record the master
    /// changed since filling began keeps that change: the master replicates every change to a
    /// filling partition before it walks the partition, so the snapshot's copy is older.
    /// Returns whether it was applied.
    ///
    /// # Errors
    /// UNAVAILABLE when the partition is not held here; PARAMETER for malformed data; the
    /// storage's error when it refuses the version.
    pub fn merge_in(&self, version: &RecordVersion) -> Result<bool, ResultCode> {
        let slot = self.slot(&version.digest);
        let mut partition = slot.state.write();
        if !partition.role.holds_data() {
            return Err(ResultCode::Unavailable);
        }
        let digest = &version.digest;
        let newer_here = partition.replicated_during_fill.contains(digest)
            || partition
                .any_record(digest)
                .is_some_and(|record| !version.beats(record.generation, record.last_update_ms));
        if newer_here || version.data.is_none() {
            return Ok(false);
        }
        self.apply_version(&mut partition, version, &mut Acks::default())?;
        Ok(true)
    }

    /// Applies a change the partition's master replicated, in the master's order, if it
    /// carries the partition's current version (or a newer one): a replica never takes writes
    /// from a deposed master.
    ///
    /// # Errors
    /// CLUSTER_KEY_MISMATCH for an older version or a partition not held here; PARAMETER for
    /// malformed data; the storage's error when it refuses the version.
    pub fn merge_replicated(
        &self,
        partition_version: u64,
        version: &RecordVersion,
        acks: &mut Acks,
    ) -> Result<(), ResultCode> {
        let slot = self.slot(&version.digest);
        let mut partition = slot.state.write();
        if !partition.role.holds_data() || partition_version < partition.fence_version {
            return Err(ResultCode::ClusterKeyMismatch);
        }
        if partition.role == PartitionRole::Filling {
            partition.replicated_during_fill.insert(version.digest);
        }
        self.apply_version(&mut partition, version, acks)
    }

    /// Makes `version` the record's current version (a tombstone removes it).
    fn apply_version(
        &self,
        partition: &mut Partition,
        version: &RecordVersion,
        acks: &mut Acks,
    ) -> Result<(), ResultCode> {
        let digest = &version.digest;
        let Some(data) = &version.data else {
            if partition.any_record(digest).is_some() {
                self.unstore(partition, digest, acks)?;
                self.watches.touched(digest);
            }
            return Ok(());
        };
        if !record::is_well_formed(data) || version.generation.0 == 0 {
            return Err(ResultCode::Parameter);
        }
        let header = RecordHeader {
            last_update_ms: version.last_update_ms,
            void_time: version.void_time,
            generation: version.generation,
            set_id: self.sets.id_or_create(&version.set_name)?,
        };
        self.store(partition, *digest, Record::new(header, data.clone()), acks)?;
        self.watches.touched(digest);
        Ok(())
    }
}
