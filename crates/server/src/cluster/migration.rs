//! Migrations: this node fills the partitions the committed table makes it `Filling` for, each
//! from its master, and as a master streams partitions out to the nodes filling them.
//!
//! A fill (one partition): the node drops all it held of the partition
//! (`Namespace::begin_fill`: a copy left from before, or one replicated under an older table,
//! perhaps of a record deleted since, cannot come back), asks the master for the partition in
//! digest order a chunk at a time (`PartitionStreamRequest`, answered by `PartitionChunk`), and
//! merges each record (`Namespace::merge_in`: the newer version wins, and nothing the master
//! replicated during the fill is undone). When the last chunk is merged it reports the
//! partition filled to the metadata group (`PartitionsFilled`), which makes it `Full`.
//!
//! The master sends a filling replica its writes from the first stream request on
//! ([`super::replication::ReplicationSink::start_fill`]): a write committed before it is in the
//! partition when the stream walks it, and every write after reaches the replica in the
//! master's order. A chunk with no records that is not the last means "not yet" (the master
//! has not applied the table that makes the asker fill the partition): the filler asks again.
//!
//! Throttles: at most `migrate-max-num-incoming` fills run on a node at once, each with one
//! chunk of about `migrate-chunk-bytes` in flight; the balancer bounds how many partitions move
//! at once over the cluster (`migrate-partitions-moving-max`).
//!
//! Invariants:
//! - A partition is reported filled only under the master (`master_since`) it was filled
//!   from; the metadata group ignores a report for a partition whose master changed since.
//! - A master streams a partition only to a node its applied table makes `Filling` for it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cluster::metadata::{MetaCommand, ReplicaState};
use engine::{Namespace, PartitionRole, RecordVersion};
use model::{Digest, PartitionId};
use parking_lot::Mutex;
use tracing::{debug, warn};
use wire_fabric::{List, Message};

use super::layout::Layout;
use super::replication::{engine_record, wire_record};

/// How long a filler waits before asking a master that is not ready again.
const NOT_READY_RETRY: Duration = Duration::from_millis(100);
/// Records a master examines per stream piece while it gathers one chunk.
const STREAM_PIECE_RECORDS: usize = 256;
/// What a record costs a chunk beyond its data and set name (digest, generation, times).
const RECORD_OVERHEAD_BYTES: usize = 64;

/// Migration settings (the `[cluster]` section).
#[derive(Clone, Copy, Debug)]
pub struct MigrationConfig {
    /// Fills running at once on this node.
    pub incoming_max: usize,
    /// About how many bytes of records one chunk carries.
    pub chunk_bytes: u32,
}

/// Counters, as `statistics` shows them.
#[derive(Debug, Default)]
pub struct MigrationStats {
    /// Partitions this node finished filling.
    pub rx_partitions_done: AtomicU64,
    /// Records this node received in fills.
    pub rx_records: AtomicU64,
    /// Partitions this node streamed out to their end.
    pub tx_partitions_done: AtomicU64,
    /// Records this node streamed out.
    pub tx_records: AtomicU64,
}

/// A fill that runs, or a partition filled and not yet reported.
type FillKey = (String, u16);

/// This node's migrations.
#[derive(Debug)]
pub struct Migrations {
    config: MigrationConfig,
    /// Fills running: the `master_since` each runs under.
    active: Mutex<HashMap<FillKey, u64>>,
    /// Partitions filled and not yet reported, with the `master_since` they were filled under.
    filled: Mutex<HashMap<FillKey, u64>>,
    /// Counters.
    pub stats: MigrationStats,
}

/// One fill to start.
#[derive(Clone, Debug)]
pub struct Fill {
    /// The namespace.
    pub namespace: Arc<Namespace>,
    /// The partition.
    pub partition: PartitionId,
    /// The node streaming it: the partition's master.
    pub master: u64,
    /// The version since which that node is master.
    pub master_since: u64,
}

impl Migrations {
    /// No migration yet.
    pub fn new(config: MigrationConfig) -> Migrations {
        Migrations {
            config,
            active: Mutex::default(),
            filled: Mutex::default(),
            stats: MigrationStats::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> MigrationConfig {
        self.config
    }

    /// Fills running now.
    pub fn active_count(&self) -> usize {
        self.active.lock().len()
    }

    /// The fills to start now under `layout`, within the limit of fills at once: partitions
    /// this node fills, not running and not reported filled, whose master is known. Each one
    /// returned is marked running.
    pub fn to_start(&self, layout: &Layout, namespaces: &[Arc<Namespace>]) -> Vec<Fill> {
        let mut active = self.active.lock();
        let filled = self.filled.lock();
        let mut fills = Vec::new();
        if active.len() >= self.config.incoming_max {
            return fills;
        }
        for namespace in namespaces {
            // Called as each fill ends: one key per namespace, its partition changed in place,
            // keeps the loop free of allocations.
            let mut key: FillKey = (namespace.name().to_owned(), 0);
            for &(partition, master, master_since) in layout.filling_here(namespace.name()) {
                if active.len() >= self.config.incoming_max {
                    return fills;
                }
                key.1 = partition.0;
                let reported = filled.get(&key) == Some(&master_since);
                if reported || active.contains_key(&key) {
                    continue;
                }
                active.insert(key.clone(), master_since);
                fills.push(Fill {
                    namespace: Arc::clone(namespace),
                    partition,
                    master,
                    master_since,
                });
            }
        }
        fills
    }

    /// A fill ended (filled or not).
    pub fn finished(&self, fill: &Fill, filled: bool) {
        let key = (fill.namespace.name().to_owned(), fill.partition.0);
        self.active.lock().remove(&key);
        if filled {
            self.filled.lock().insert(key, fill.master_since);
            self.stats
                .rx_partitions_done
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The reports to send, one command per namespace; they stay pending until
    /// [`Migrations::reported`] forgets them.
    pub fn reports(&self, me: u64) -> Vec<MetaCommand> {
        let filled = self.filled.lock();
        let mut by_namespace: BTreeMap<&str, Vec<(u16, u64)>> = BTreeMap::new();
        for ((namespace, partition), master_since) in filled.iter() {
            by_namespace
                .entry(namespace)
                .or_default()
                .push((*partition, *master_since));
        }
        by_namespace
            .into_iter()
            .map(|(namespace, mut partitions)| {
                // In partition order, whatever order the map holds them in.
                partitions.sort_unstable();
                MetaCommand::PartitionsFilled {
                    namespace: namespace.to_owned(),
                    node: me,
                    partitions,
                }
            })
            .collect()
    }

    /// Forgets reported partitions that `layout` no longer shows this node filling (it took
    /// the report, or the table moved on).
    pub fn reported(&self, layout: &Layout, me: u64) {
        self.filled
            .lock()
            .retain(|(namespace, partition), master_since| {
                layout
                    .assignment(namespace, PartitionId(*partition))
                    .is_some_and(|a| {
                        a.has(me, ReplicaState::Filling) && a.master_since == *master_since
                    })
            });
    }
}

/// Why a fill stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum FillError {
    /// The table no longer makes this node fill the partition from that master.
    #[error("the partition table moved on")]
    Superseded,
    /// The master could not be asked or did not answer.
    #[error("the master did not answer: {0}")]
    Fabric(#[from] fabric::FabricError),
    /// The master answered something else than a chunk.
    #[error("the master answered something else than a chunk")]
    Unexpected,
    /// A record could not be merged here.
    #[error("a record could not be merged (result {0:?})")]
    Merge(model::ResultCode),
}

/// Runs one fill to its end: returns how many records were merged.
///
/// `still_filling` tells whether the table still makes this node fill the partition from the
/// same master, asked over `fabric`.
pub async fn run_fill(
    fill: &Fill,
    chunk_bytes: u32,
    stats: &MigrationStats,
    still_filling: impl Fn() -> bool,
    fabric: &fabric::Fabric,
) -> Result<u64, FillError> {
    fill.namespace
        .begin_fill(fill.partition)
        .map_err(|_| FillError::Superseded)?;
    let mut after: Option<Digest> = None;
    let mut merged = 0;
    loop {
        if !still_filling() {
            return Err(FillError::Superseded);
        }
        let request = Message::PartitionStreamRequest {
            request_id: 0,
            namespace: fill.namespace.name().as_bytes(),
            partition: fill.partition,
            after_digest: after,
            chunk_size_bytes_max: chunk_bytes,
        };
        // On the bulk channel: a chunk is hundreds of KiB, and on a slow link the metadata
        // group's messages must not wait behind it.
        let reply = fabric
            .request_on(fabric::Channel::Bulk, fill.master, &request)
            .await?;
        let Message::PartitionChunk { done, records, .. } = reply.message() else {
            return Err(FillError::Unexpected);
        };
        if records.is_empty() && !done {
            tokio::time::sleep(NOT_READY_RETRY).await;
            continue;
        }
        for record in records.iter() {
            fill.namespace
                .merge_in(&engine_record(&record))
                .map_err(FillError::Merge)?;
            after = Some(record.digest);
            merged += 1;
        }
        stats
            .rx_records
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        if done {
            return Ok(merged);
        }
    }
}

/// The master's side: the next chunk of `partition` after `after` for node `asker`, or an
/// empty, unfinished chunk ("not yet") when this node's applied table does not make it the
/// master with `asker` filling. Walks the partition under its read lock a piece at a time.
pub fn next_chunk(
    namespace: &Namespace,
    layout: &Layout,
    me: u64,
    asker: u64,
    partition: PartitionId,
    after: Option<Digest>,
    chunk_bytes: u32,
) -> (bool, Vec<RecordVersion>) {
    let streams = layout
        .assignment(namespace.name(), partition)
        .is_some_and(|a| a.master() == Some(me) && a.has(asker, ReplicaState::Filling));
    if !streams || namespace.partition_role(partition).0 != PartitionRole::Master {
        return (false, Vec::new());
    }
    let chunk_bytes = chunk_bytes as usize;
    let mut records = Vec::new();
    let mut bytes = 0usize;
    let mut after = after;
    loop {
        let end =
            namespace.stream_out(partition, after.as_ref(), STREAM_PIECE_RECORDS, |version| {
                bytes += version.data.as_ref().map_or(0, |d| d.len()) + version.set_name.len();
                bytes += RECORD_OVERHEAD_BYTES;
                records.push(version);
                bytes < chunk_bytes
            });
        if end.exhausted {
            return (true, records);
        }
        if bytes >= chunk_bytes {
            return (false, records);
        }
        after = end.last;
    }
}

/// The frame answering a stream request with `records`.
pub fn chunk_message<'a>(
    namespace: &'a [u8],
    partition: PartitionId,
    done: bool,
    wire: &'a [wire_fabric::RecordVersion<'a>],
) -> Message<'a> {
    Message::PartitionChunk {
        request_id: 0,
        namespace,
        partition,
        done,
        records: List::from(wire),
    }
}

/// The fabric's view of each record of a chunk.
pub fn wire_records(records: &[RecordVersion]) -> Vec<wire_fabric::RecordVersion<'_>> {
    records.iter().map(wire_record).collect()
}

/// Logs a fill's end.
pub fn log_fill_end(fill: &Fill, outcome: &Result<u64, FillError>) {
    let namespace = fill.namespace.name();
    let partition = fill.partition.0;
    match outcome {
        Ok(records) => debug!(
            namespace,
            partition,
            master = fill.master,
            records,
            "filled a partition"
        ),
        Err(FillError::Superseded) => debug!(namespace, partition, "a fill was superseded"),
        // A master out of reach is what failover is for: the fill starts again after it.
        Err(error @ FillError::Fabric(_)) => debug!(namespace, partition, master = fill.master,
            %error, "a fill stopped; it starts again"),
        Err(error) => warn!(namespace, partition, master = fill.master, %error,
            "a fill stopped; it starts again"),
    }
}
