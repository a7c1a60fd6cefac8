//! The metadata group's state machine (openraft's `RaftStateMachine`) and its snapshots.
//!
//! The state lives in memory and is rebuilt at start from the last snapshot, then from the log
//! (openraft re-applies the committed entries the log store still holds). A snapshot is the file
//! `snapshot` in the store's directory: two records, the snapshot's metadata (JSON of openraft's
//! `SnapshotMeta`) and the data (JSON of [`ClusterState`]).
//!
//! Invariants:
//! - Every snapshot this node built or installed is durable before openraft learns of it, so a
//!   purge of the log it covers can never lose state.
//! - The snapshot file only ever moves forward: a snapshot older than the current one is not
//!   written over it.
//! - Readers see a new state once per applied batch, through a watch channel of immutable `Arc`s.

// openraft's storage traits return `StorageError` (224 bytes) by value; the helpers return it
// too, so `?` needs no conversion. Such an error stops the node, so its size costs nothing.
#![allow(clippy::result_large_err)]

use std::io::Cursor;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, EntryPayload, ErrorSubject, ErrorVerb, LogId, RaftSnapshotBuilder, Snapshot,
    SnapshotMeta, StorageError, StorageIOError, StoredMembership,
};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::cluster_state::ClusterState;
use super::command::MetaResponse;
use super::disk::{MetaDisk, replace_durably};
use super::log_store::read_error;
use super::node_info::NodeInfo;
use super::{NodeId, TypeConfig, record};

const SNAPSHOT_FILE: &str = "snapshot";

type StoreResult<T> = Result<T, StorageError<NodeId>>;

/// The state machine; openraft owns it, readers use [`MetaStateMachine::subscribe`].
pub struct MetaStateMachine {
    state: Arc<ClusterState>,
    last_applied: Option<LogId<NodeId>>,
    last_membership: StoredMembership<NodeId, NodeInfo>,
    snapshots: Arc<SnapshotSlot>,
    published: watch::Sender<Arc<ClusterState>>,
}

/// Builds a snapshot of the state as of one applied log id.
pub struct MetaSnapshotBuilder {
    state: Arc<ClusterState>,
    last_applied: Option<LogId<NodeId>>,
    last_membership: StoredMembership<NodeId, NodeInfo>,
    snapshots: Arc<SnapshotSlot>,
}

/// The current snapshot, shared by the state machine and its builders.
struct SnapshotSlot {
    disk: Arc<dyn MetaDisk>,
    current: Mutex<Option<StoredSnapshot>>,
    built_count: AtomicU64,
}

#[derive(Clone)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, NodeInfo>,
    data: Vec<u8>,
}

impl MetaStateMachine {
    /// Opens the state machine in `disk`, starting from its last snapshot if there is one.
    ///
    /// # Errors
    /// A [`StorageError`] when the snapshot cannot be read or is corrupted.
    pub fn open(disk: Arc<dyn MetaDisk>) -> StoreResult<Self> {
        let stored = read_snapshot(disk.as_ref())?;
        let (state, last_applied, last_membership) = match &stored {
            Some(snapshot) => (
                decode_state(&snapshot.data, &snapshot.meta)?,
                snapshot.meta.last_log_id,
                snapshot.meta.last_membership.clone(),
            ),
            None => Default::default(),
        };
        let state = Arc::new(state);
        let (published, _) = watch::channel(state.clone());
        let snapshots = SnapshotSlot {
            disk,
            current: Mutex::new(stored),
            built_count: AtomicU64::new(0),
        };
        Ok(Self {
            state,
            last_applied,
            last_membership,
            snapshots: Arc::new(snapshots),
            published,
        })
    }

    /// A receiver of every state this machine publishes, starting with the current one.
    pub fn subscribe(&self) -> watch::Receiver<Arc<ClusterState>> {
        self.published.subscribe()
    }

    fn publish(&self) {
        self.published.send_replace(self.state.clone());
    }
}

impl RaftStateMachine<TypeConfig> for MetaStateMachine {
    type SnapshotBuilder = MetaSnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> StoreResult<(Option<LogId<NodeId>>, StoredMembership<NodeId, NodeInfo>)> {
        Ok((self.last_applied, self.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StoreResult<Vec<MetaResponse>>
    where
        I: IntoIterator<Item = openraft::Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut responses = Vec::new();
        let state = Arc::make_mut(&mut self.state);
        for entry in entries {
            self.last_applied = Some(entry.log_id);
            let outcome = match entry.payload {
                EntryPayload::Blank => Ok(()),
                EntryPayload::Normal(command) => state.apply(&command),
                EntryPayload::Membership(membership) => {
                    state.apply_membership(&membership);
                    self.last_membership = StoredMembership::new(Some(entry.log_id), membership);
                    Ok(())
                }
            };
            let version = state.version;
            responses.push(MetaResponse { version, outcome });
        }
        self.publish();
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        MetaSnapshotBuilder {
            state: self.state.clone(),
            last_applied: self.last_applied,
            last_membership: self.last_membership.clone(),
            snapshots: self.snapshots.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> StoreResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, NodeInfo>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StoreResult<()> {
        let data = snapshot.into_inner();
        let state = decode_state(&data, meta)?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        self.snapshots.save(stored)?;
        self.state = Arc::new(state);
        self.last_applied = meta.last_log_id;
        self.last_membership = meta.last_membership.clone();
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StoreResult<Option<Snapshot<TypeConfig>>> {
        let current = self.snapshots.current.lock().clone();
        Ok(current.map(|stored| Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(stored.data)),
        }))
    }
}

impl RaftSnapshotBuilder<TypeConfig> for MetaSnapshotBuilder {
    async fn build_snapshot(&mut self) -> StoreResult<Snapshot<TypeConfig>> {
        let data = serde_json::to_vec(self.state.as_ref()).map_err(|e| {
            StorageIOError::new(
                ErrorSubject::Snapshot(None),
                ErrorVerb::Write,
                AnyError::new(&e),
            )
        })?;
        let built = self.snapshots.built_count.fetch_add(1, Ordering::Relaxed) + 1;
        let snapshot_id = match self.last_applied {
            Some(log_id) => format!("{}-{}-{built}", log_id.leader_id, log_id.index),
            None => format!("none-{built}"),
        };
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.last_membership.clone(),
            snapshot_id,
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        };
        self.snapshots.save(stored)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl SnapshotSlot {
    /// Makes `stored` the current snapshot, on disk first, unless a newer one is current.
    fn save(&self, stored: StoredSnapshot) -> StoreResult<()> {
        let mut current = self.current.lock();
        let newer_exists = current
            .as_ref()
            .is_some_and(|c| c.meta.last_log_id > stored.meta.last_log_id);
        if newer_exists {
            return Ok(());
        }
        let signature = Some(stored.meta.signature());
        let write_error = |e: &(dyn std::error::Error + 'static)| {
            StorageIOError::write_snapshot(signature.clone(), AnyError::from_dyn(e, None))
        };
        let mut bytes = record::encode_json(&stored.meta).map_err(|e| write_error(&e))?;
        record::encode(&stored.data, &mut bytes).map_err(|e| write_error(&e))?;
        replace_durably(self.disk.as_ref(), SNAPSHOT_FILE, &bytes).map_err(|e| write_error(&e))?;
        *current = Some(stored);
        Ok(())
    }
}

fn read_snapshot(disk: &dyn MetaDisk) -> StoreResult<Option<StoredSnapshot>> {
    let subject = ErrorSubject::Snapshot(None);
    let Some(bytes) = disk
        .read(SNAPSHOT_FILE)
        .map_err(|e| read_error(subject.clone(), e))?
    else {
        return Ok(None);
    };
    let corrupted = |e: &(dyn std::error::Error + 'static)| {
        tracing::error!(error = %e, "metadata snapshot file is corrupted");
        StorageIOError::read_snapshot(None, AnyError::from_dyn(e, None))
    };
    let bodies = record::decode_all(&bytes).map_err(|e| corrupted(&e))?;
    let [meta_json, data] = bodies.as_slice() else {
        let count = record::RecordError::RecordCount {
            expected: 2,
            found: bodies.len(),
        };
        return Err(corrupted(&count).into());
    };
    let meta = serde_json::from_slice(meta_json).map_err(|e| corrupted(&e))?;
    Ok(Some(StoredSnapshot {
        meta,
        data: data.to_vec(),
    }))
}

fn decode_state(data: &[u8], meta: &SnapshotMeta<NodeId, NodeInfo>) -> StoreResult<ClusterState> {
    serde_json::from_slice(data).map_err(|e| {
        StorageIOError::read_snapshot(Some(meta.signature()), AnyError::new(&e)).into()
    })
}
