//! Synchronous replication: the master's side ([`ReplicationSink`], the namespace's change
//! sink) and the replica's ([`apply_replica_write`]).
//!
//! The engine calls the sink under the partition lock, once per applied change, in the order
//! the changes were applied. The sink queues a `ReplicaWrite` carrying the partition's version
//! and the next sequence number of the partition to every other replica in the committed
//! configuration (every `Full` one, and every `Filling` one that has begun streaming the
//! partition: see `migration.rs`), still under the lock: the fabric queues a frame before
//! `request` returns, and frames to one peer leave in call order, so each replica receives a
//! partition's changes in the master's order. With commit level all, the write's
//! acknowledgement waits on an [`AckLatch`] that every replica's `ReplicaAck` confirms; with
//! commit level master, nobody waits.
//!
//! Invariants:
//! - A change reaches every replica of the committed configuration or its acknowledgement
//!   fails: a replica that refuses (an older version: CLUSTER_KEY_MISMATCH), does not answer
//!   or cannot be reached fails the latch, and the connection then reports the write as failed
//!   or in doubt instead of acknowledging it.
//! - A change a replica did not answer is sent to it again ([`resend_until_answered`]) until
//!   it answers, refuses it, or stops being a replica of the partition here (a master handing
//!   the partition over still counts as its master, so the next master gets it first): a copy
//!   cut off for less than the heartbeat timeout, which stays a replica, does not keep missing
//!   what its master applied (the client was told the write was in doubt). Each resend carries the
//!   record as it is then, read and queued under the partition's lock, so it never overtakes a
//!   later change of the record (an old version sent again after a delete would bring the
//!   record back). Until then the change counts as in flight, so a handover waits for it.
//! - Expiry is not replicated: every replica expires a record by the same void time itself.
//! - A record's last change is *pending* (in `unconfirmed`, by digest) from the moment it is
//!   applied until every replica it was sent to has answered it (first send or resend), left
//!   the table, or this node stopped being the master. A reply that shows the record's state
//!   (a read, a refused condition) joins its gate (`Namespace::join_unconfirmed`): the gate
//!   opens when every replica confirmed the first send, and fails, closing the waiting
//!   connections, as soon as one did not (the write's own reply is then in doubt). So no client
//!   sees a state a failover could lose, and no reply waits longer than a write's would; until
//!   a resend is answered, replies showing that record fail at once.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use cluster::metadata::ReplicaState;
use engine::{AckError, AckLatch, Acks, Change, ChangeKind, ChangeSink, Namespace, RecordVersion};
use fabric::{Fabric, FabricError, OwnedFrame};
use model::{Digest, NodeId, PARTITION_COUNT, PartitionId, ResultCode};
use parking_lot::RwLock;
use tokio::sync::oneshot;
use tracing::warn;
use wire_fabric::{Message, REPLICA_ACK_OK};

use super::config::CommitLevelOverride;
use super::layout::Layout;
use crate::latency::Histogram;

/// The master's side of replication for one namespace.
pub struct ReplicationSink {
    namespace: Arc<str>,
    commit_level: CommitLevelOverride,
    me: NodeId,
    fabric: Arc<Fabric>,
    /// Per partition, the sequence number of its last replicated change.
    sequences: Box<[AtomicU64]>,
    /// `(partition, node)` of the fills that have begun streaming from this node: those
    /// filling replicas receive the partition's writes.
    fills_started: RwLock<HashSet<(u16, u64)>>,
    /// Per partition, replica writes sent and not yet answered (or failed): a master hands a
    /// partition over only once none is left.
    in_flight: Arc<[AtomicU32]>,
    /// Per partition, the replicas of the last two tables prepared, by version: the one a
    /// write's role came from is among them.
    peers: Arc<[RwLock<[Option<Peers>; 2]>]>,
    /// Per partition, the records whose last change is not confirmed yet, with what confirms
    /// it; an entry leaves once its latch settles.
    unconfirmed: Unconfirmed,
    /// Where resends run (the engine may call the sink from threads outside the runtime).
    runtime: tokio::runtime::Handle,
    /// The namespace, which resends read records from (it owns this sink: a weak link).
    source: Weak<Namespace>,
    /// Where the time from sending a replica write to its replica's answer is counted.
    latency: Option<Arc<Histogram>>,
}

impl std::fmt::Debug for ReplicationSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicationSink")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl ReplicationSink {
    /// Replicates `namespace`'s changes from node `me` over `fabric`, to the replicas of the
    /// tables it is given ([`ReplicationSink::prepare`]).
    pub fn new(
        namespace: &Arc<Namespace>,
        commit_level: CommitLevelOverride,
        me: NodeId,
        fabric: Arc<Fabric>,
    ) -> ReplicationSink {
        ReplicationSink {
            namespace: Arc::from(namespace.name()),
            source: Arc::downgrade(namespace),
            commit_level,
            me,
            fabric,
            sequences: (0..PARTITION_COUNT).map(|_| AtomicU64::new(0)).collect(),
            fills_started: RwLock::default(),
            in_flight: (0..PARTITION_COUNT).map(|_| AtomicU32::new(0)).collect(),
            unconfirmed: (0..PARTITION_COUNT)
                .map(|_| parking_lot::Mutex::default())
                .collect(),
            peers: (0..PARTITION_COUNT)
                .map(|_| RwLock::new([None, None]))
                .collect(),
            runtime: tokio::runtime::Handle::current(),
            latency: None,
        }
    }

    /// Counts each replica write's round trip in `latency`.
    pub fn with_latency(mut self, latency: Option<Arc<Histogram>>) -> ReplicationSink {
        self.latency = latency;
        self
    }

    /// Whether every replica write of `partition` sent from here has been answered.
    pub fn drained(&self, partition: PartitionId) -> bool {
        self.in_flight[partition.index()].load(Ordering::Acquire) == 0
    }

    /// Node `node` began streaming `partition` from here: from now on it receives the
    /// partition's writes. Every write committed before is in the partition as the stream
    /// walks it, since the stream walks under the partition's lock after this call.
    pub fn start_fill(&self, partition: PartitionId, node: u64) {
        let key = (partition.0, node);
        if !self.fills_started.read().contains(&key) {
            self.fills_started.write().insert(key);
        }
    }

    /// Forgets the fills `layout` no longer has (the node filled, or moved on).
    pub fn retain_fills(&self, layout: &Layout) {
        self.fills_started.write().retain(|(partition, node)| {
            layout
                .assignment(&self.namespace, PartitionId(*partition))
                .is_some_and(|a| a.has(*node, ReplicaState::Filling))
        });
    }

    /// Makes the replicas `layout` names known before this node takes roles from it: a write
    /// is replicated to the replicas of the table its partition's role came from (the
    /// partition version it was applied under), never to those of a newer or older one. Call
    /// it before the roles of `layout` are applied, one layout at a time.
    pub fn prepare(&self, layout: &Layout) {
        let Some(table) = layout.table(&self.namespace) else {
            return;
        };
        for (peers, assignment) in self.peers.iter().zip(table.assignments()) {
            let mut peers = peers.write();
            if peers[1]
                .as_ref()
                .is_some_and(|p| p.version == assignment.version)
            {
                continue;
            }
            // A master handing the partition over takes no new writes, but its resends still
            // go out (see `Resend`): the next master must hold every change first.
            let master = assignment.master() == Some(self.me.0);
            let others: Vec<(u64, ReplicaState)> = match master {
                true => assignment
                    .replicas
                    .iter()
                    .copied()
                    .filter(|(n, _)| *n != self.me.0)
                    .collect(),
                false => Vec::new(),
            };
            peers[0] = peers[1].take();
            peers[1] = Some(Peers {
                version: assignment.version,
                others: others.into(),
            });
        }
    }

    /// The other replicas of `change`'s partition in the table its role came from, when this
    /// node was its master there (a replica applying its master's change passes it on to
    /// nobody); filling ones only once they began streaming. `None` when that table is not
    /// known (a bug: the write must then not be acknowledged).
    fn destinations(&self, change: &Change<'_>) -> Option<Vec<u64>> {
        let peers = self.peers[change.partition.index()].read();
        let applied = peers
            .iter()
            .flatten()
            .find(|p| p.version == change.partition_version);
        let Some(applied) = applied else {
            // No table yet (a single node's first writes never reach a sink): nothing to send.
            return peers.iter().all(Option::is_none).then(Vec::new);
        };
        let partition = change.partition.0;
        let destinations = applied
            .others
            .iter()
            .filter(|(node, state)| {
                *state == ReplicaState::Full
                    || self.fills_started.read().contains(&(partition, *node))
            })
            .map(|(node, _)| *node)
            .collect();
        Some(destinations)
    }
}

/// Per partition, the pending changes by digest (see the module's invariants).
type Unconfirmed = Arc<[parking_lot::Mutex<rustc_hash::FxHashMap<Digest, Arc<Pending>>>]>;

/// A change not yet answered by every replica it was sent to.
#[derive(Debug)]
struct Pending {
    /// What replies showing the record's state wait on.
    gate: Arc<AckLatch>,
    /// Replicas whose answer (or leaving) is still awaited, resends included.
    outstanding: AtomicU32,
}

impl Pending {
    /// One replica's story ended; the last one forgets the change (unless a later change of
    /// the record replaced it already).
    fn finished(self: &Arc<Pending>, unconfirmed: &Unconfirmed, digest: &Digest) {
        if self.outstanding.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let mut pending = unconfirmed[digest.partition_id().index()].lock();
        if pending
            .get(digest)
            .is_some_and(|kept| Arc::ptr_eq(kept, self))
        {
            pending.remove(digest);
        }
    }
}

/// The replicas of one partition version, seen from its master.
#[derive(Debug)]
struct Peers {
    version: u64,
    /// The other replicas, when this node is the master at `version`; none otherwise.
    others: Arc<[(u64, ReplicaState)]>,
}

impl ChangeSink for ReplicationSink {
    fn changed(&self, change: &Change<'_>, acks: &mut Acks) {
        if change.kind == ChangeKind::Expired {
            return;
        }
        let Some(destinations) = self.destinations(change) else {
            warn!(
                partition = change.partition.0,
                version = change.partition_version,
                "a write under a partition version this node has no replicas for"
            );
            let latch = Arc::new(AckLatch::new(1));
            latch.fail(AckError::NotReplicated(ResultCode::Unavailable));
            acks.add_latch(latch);
            return;
        };
        if destinations.is_empty() {
            return;
        }
        let version = change.version();
        let sequence = self.sequences[change.partition.index()].fetch_add(1, Ordering::Relaxed) + 1;
        let message = Message::ReplicaWrite {
            request_id: 0,
            namespace: self.namespace.as_bytes(),
            partition: change.partition,
            partition_version: change.partition_version,
            sequence,
            record: wire_record(&version),
        };
        let asked_master = !acks.replicas_awaited();
        let latch = self
            .commit_level
            .waits_for_replicas(asked_master)
            .then(|| Arc::new(AckLatch::new(destinations.len() as u32)));
        let index = change.partition.index();
        let pending = Arc::new(Pending {
            gate: Arc::new(AckLatch::new(destinations.len() as u32)),
            outstanding: AtomicU32::new(destinations.len() as u32),
        });
        self.unconfirmed[index]
            .lock()
            .insert(*change.digest, Arc::clone(&pending));
        self.in_flight[index].fetch_add(destinations.len() as u32, Ordering::AcqRel);
        let sent = Instant::now();
        for node in destinations {
            let latch = latch.clone();
            let latency = self.latency.clone();
            let pending = Arc::clone(&pending);
            let resend = Resend {
                fabric: Arc::clone(&self.fabric),
                namespace: Arc::clone(&self.namespace),
                source: Weak::clone(&self.source),
                node,
                partition: change.partition,
                digest: *change.digest,
                sequence,
                peers: Arc::downgrade(&self.peers),
                in_flight: Arc::clone(&self.in_flight),
                pending: Arc::clone(&pending),
                unconfirmed: Arc::clone(&self.unconfirmed),
            };
            let runtime = self.runtime.clone();
            // Runs on the fabric's reader task when the replica answers: no task per write.
            self.fabric.request_then(node, &message, move |reply| {
                let outcome = reply.map_err(|_| ResultCode::Timeout).and_then(ack_result);
                if let (Ok(()), Some(latency)) = (&outcome, &latency) {
                    latency.record(sent.elapsed());
                }
                match (&outcome, latch) {
                    (Ok(()), Some(latch)) => latch.confirm(),
                    (Err(code), Some(latch)) => latch.fail(AckError::NotReplicated(*code)),
                    (Err(code), None) => {
                        warn!(
                            node,
                            ?code,
                            "a replica write for commit level master failed"
                        );
                    }
                    (Ok(()), None) => {}
                }
                match &outcome {
                    Ok(()) => pending.gate.confirm(),
                    Err(code) => pending.gate.fail(AckError::NotReplicated(*code)),
                }
                match outcome {
                    Err(code) if code != ResultCode::ClusterKeyMismatch => {
                        runtime.spawn(resend_until_answered(resend));
                    }
                    _ => {
                        pending.finished(&resend.unconfirmed, &resend.digest);
                        resend.in_flight[index].fetch_sub(1, Ordering::AcqRel);
                    }
                }
            });
        }
        if let Some(latch) = latch {
            acks.add_latch(latch);
        }
    }

    fn truncated(&self, _: &[u8], _: u64) {
        // Truncates are cluster-wide metadata: the node that ran one committed it to the
        // metadata group, and every node applies it from there.
    }

    fn unconfirmed(&self, digest: &Digest) -> Option<Arc<AckLatch>> {
        let pending = self.unconfirmed[digest.partition_id().index()].lock();
        pending.get(digest).map(|pending| Arc::clone(&pending.gate))
    }
}

/// Shortest and longest pause between two sends of a replica write nobody answered.
const RESEND_PAUSE_MIN: Duration = Duration::from_millis(20);
const RESEND_PAUSE_MAX: Duration = Duration::from_secs(1);

/// A replica write to send again: which record, where, and what tells when to stop.
struct Resend {
    fabric: Arc<Fabric>,
    namespace: Arc<str>,
    source: Weak<Namespace>,
    node: u64,
    partition: PartitionId,
    digest: Digest,
    sequence: u64,
    /// The sink's replicas per partition; gone with the sink.
    peers: Weak<[RwLock<[Option<Peers>; 2]>]>,
    in_flight: Arc<[AtomicU32]>,
    /// The change, pending until this and every other replica's story ends.
    pending: Arc<Pending>,
    unconfirmed: Unconfirmed,
}

impl Resend {
    /// Whether `node` is still a replica of the partition in the newest table this master
    /// prepared (none when this node is no longer its master there; a master handing the
    /// partition over still is, until the handover completes).
    fn still_wanted(&self) -> bool {
        self.wanted_at(None)
    }

    /// Whether `node` is a replica of the partition, this node its master, in the table of
    /// `version` (`None`: the newest prepared).
    fn wanted_at(&self, version: Option<u64>) -> bool {
        let Some(peers) = self.peers.upgrade() else {
            return false;
        };
        let tables = peers[self.partition.index()].read();
        let table = match version {
            None => tables[1].as_ref(),
            Some(version) => tables.iter().flatten().find(|p| p.version == version),
        };
        table.is_some_and(|p| p.others.iter().any(|(n, _)| *n == self.node))
    }

    /// Queues the record as it is now to the replica, under the partition's lock; `None` when
    /// this node no longer masters the partition (or it cannot be read now).
    fn send_current(&self) -> Option<oneshot::Receiver<Result<OwnedFrame, FabricError>>> {
        let namespace = self.source.upgrade()?;
        let sent = namespace.with_current_version(&self.digest, |version, _, partition_version| {
            // By the table the partition's role came from: a master handing the
            // partition over is a replica to the engine, and still sends.
            if !self.wanted_at(Some(partition_version)) {
                return None;
            }
            let message = Message::ReplicaWrite {
                request_id: 0,
                namespace: self.namespace.as_bytes(),
                partition: self.partition,
                partition_version,
                sequence: self.sequence,
                record: wire_record(&version),
            };
            let (answered, answer) = oneshot::channel();
            self.fabric.request_then(self.node, &message, move |reply| {
                let _ = answered.send(reply);
            });
            Some(answer)
        });
        sent.flatten()
    }
}

/// Sends the record of `resend` again, as it is at each try, with growing pauses, until the
/// replica answers or refuses it (a newer master: CLUSTER_KEY_MISMATCH), or stops being a
/// replica here, or this node stops being the master; then the write no longer counts as in
/// flight.
async fn resend_until_answered(resend: Resend) {
    let mut pause = RESEND_PAUSE_MIN;
    while resend.still_wanted() {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RESEND_PAUSE_MAX);
        let Some(reply) = resend.send_current() else {
            break;
        };
        // A dropped callback means no answer, as a lost connection does.
        let answered = reply.await.ok().and_then(Result::ok);
        match answered.ok_or(ResultCode::Timeout).and_then(ack_result) {
            Ok(()) | Err(ResultCode::ClusterKeyMismatch) => break,
            Err(_) => {}
        }
    }
    resend.pending.finished(&resend.unconfirmed, &resend.digest);
    resend.in_flight[resend.partition.index()].fetch_sub(1, Ordering::AcqRel);
}

/// The result a replica answered, as an outcome.
fn ack_result(frame: OwnedFrame) -> Result<(), ResultCode> {
    match frame.message() {
        Message::ReplicaAck { result_code, .. } if result_code == REPLICA_ACK_OK => Ok(()),
        Message::ReplicaAck { result_code, .. } => Err(match result_code {
            7 => ResultCode::ClusterKeyMismatch,
            9 => ResultCode::Timeout,
            11 => ResultCode::Unavailable,
            _ => ResultCode::Unknown,
        }),
        _ => Err(ResultCode::Unknown),
    }
}

/// The fabric's view of a record version.
pub fn wire_record(version: &RecordVersion) -> wire_fabric::RecordVersion<'_> {
    wire_fabric::RecordVersion {
        digest: version.digest,
        set_name: &version.set_name,
        generation: version.generation,
        last_update_ms: version.last_update_ms,
        void_time: version.void_time,
        data: version.data.as_deref(),
    }
}

/// The engine's view of a record version received from the fabric.
pub fn engine_record(record: &wire_fabric::RecordVersion<'_>) -> RecordVersion {
    RecordVersion {
        digest: record.digest,
        set_name: record.set_name.to_vec(),
        generation: record.generation,
        last_update_ms: record.last_update_ms,
        void_time: record.void_time,
        data: record.data.map(Into::into),
    }
}

/// The replica's side: applies a replicated change in arrival order; returns the result to
/// answer and what must happen first (durability on this node).
pub fn apply_replica_write(
    namespace: &Namespace,
    partition_version: u64,
    record: &wire_fabric::RecordVersion<'_>,
) -> (ResultCode, Acks) {
    let mut acks = Acks::default();
    let result = namespace.merge_replicated(partition_version, &engine_record(record), &mut acks);
    match result {
        Ok(()) => (ResultCode::Ok, acks),
        Err(code) => (code, Acks::default()),
    }
}

#[cfg(test)]
mod tests {
    //! The story of simulation seed 716654827: a master cut off from its replica for less
    //! than the heartbeat timeout applied a write the replica never got (in doubt). The
    //! balancer then had it hand the partition over to that replica; the handover stopped the
    //! resend, so the new master took over without the record, and the copies differed.

    use std::sync::Arc;
    use std::time::Duration;

    use cluster::metadata::{
        ClusterState, NamespaceMeta, PartitionAssignment, PartitionTable, ReplicaState,
    };
    use engine::{Acks, Namespace, NamespaceConfig, PartitionRole, SystemClock};
    use fabric::{Fabric, FabricConfig, FabricHandler, MemoryNetwork, OwnedFrame, Responder};
    use model::{Digest, NodeId, Op, OpCode, PARTITION_COUNT, UserKey};
    use parking_lot::Mutex;
    use wire_fabric::{Message, REPLICA_ACK_OK};

    use super::super::config::CommitLevelOverride;
    use super::super::layout::Layout;
    use super::super::tests::write_request;
    use super::ReplicationSink;

    const MASTER: u64 = 0xA1;
    const REPLICA: u64 = 0xA2;

    /// A replica that notes every record it is sent and acknowledges it.
    #[derive(Default)]
    struct NotingReplica {
        received: Mutex<Vec<Digest>>,
    }

    impl FabricHandler for NotingReplica {
        fn handle(&self, _: u64, frame: OwnedFrame, reply: Responder) {
            if let Message::ReplicaWrite { record, .. } = frame.message() {
                self.received.lock().push(record.digest);
                let ack = Message::ReplicaAck {
                    request_id: 0,
                    result_code: REPLICA_ACK_OK,
                };
                let _ = reply.send(&ack);
            }
        }
    }

    /// The master's layout with every partition `assignment`.
    fn layout_of(assignment: &PartitionAssignment) -> Layout {
        let table = PartitionTable::new(vec![assignment.clone(); PARTITION_COUNT]).expect("table");
        let mut state = ClusterState::default();
        let meta = NamespaceMeta {
            partitions: Some(Arc::new(table)),
            ..Default::default()
        };
        state.namespaces.insert("test".to_owned(), Arc::new(meta));
        Layout::of(&state, NodeId(MASTER), &["test".to_owned()])
    }

    async fn fabric(network: &MemoryNetwork, id: u64, handler: Arc<dyn FabricHandler>) -> Fabric {
        let address = format!("node{id}:1");
        let config = FabricConfig::new(id, "sim", &address);
        let endpoint = Arc::new(network.endpoint(&address));
        Fabric::start(config, endpoint, handler)
            .await
            .expect("fabric")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_handover_waits_for_the_resends_its_master_owes() {
        let network = MemoryNetwork::new();
        let replica = Arc::new(NotingReplica::default());
        let _replica_fabric = fabric(&network, REPLICA, replica.clone()).await;
        let master_fabric =
            Arc::new(fabric(&network, MASTER, Arc::new(NotingReplica::default())).await);
        master_fabric.add_peer_node(REPLICA, &format!("node{REPLICA}:1"));
        let namespace = Arc::new(Namespace::new(
            NamespaceConfig::with_defaults("test"),
            Arc::new(SystemClock),
        ));
        let sink = Arc::new(ReplicationSink::new(
            &namespace,
            CommitLevelOverride::Off,
            NodeId(MASTER),
            Arc::clone(&master_fabric),
        ));
        assert!(namespace.set_change_sink(sink.clone()));
        let owned = PartitionAssignment {
            replicas: vec![(MASTER, ReplicaState::Full), (REPLICA, ReplicaState::Full)],
            version: 1,
            master_since: 1,
            handoff_to: Vec::new(),
        };
        let digest = Digest::compute(b"", &UserKey::Integer(996));
        let pid = digest.partition_id();
        sink.prepare(&layout_of(&owned));
        namespace
            .set_partition_role(pid, PartitionRole::Master, 1, 1)
            .expect("role");

        // Cut off from its replica, the master applies a write: in doubt, owed to the replica.
        network.partition(&format!("node{MASTER}:1"), &format!("node{REPLICA}:1"));
        let op = Op {
            code: OpCode::Write,
            particle_type: 1,
            bin_name: b"v",
            value: &996_u64.to_be_bytes(),
        };
        let mut acks = Acks::default();
        let mut no_reply = super::super::tests::NoSink;
        namespace
            .write(
                &write_request(digest),
                std::iter::once(op),
                &mut no_reply,
                &mut acks,
            )
            .expect("applied on the master");
        assert!(
            acks.settled().await.is_err(),
            "the replica cannot have acknowledged"
        );

        // The balancer has the master hand the partition over to that replica; then the link
        // heals.
        let handing_off = owned.handing_off_to(vec![
            (REPLICA, ReplicaState::Full),
            (MASTER, ReplicaState::Full),
        ]);
        sink.prepare(&layout_of(&handing_off));
        namespace
            .set_partition_role(pid, PartitionRole::Replica, 2, 1)
            .expect("role");
        network.heal(&format!("node{MASTER}:1"), &format!("node{REPLICA}:1"));

        // The handover may complete only once drained, and then the replica has the record.
        for _ in 0..100 {
            if sink.drained(pid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(sink.drained(pid), "the resend never ended");
        assert_eq!(
            *replica.received.lock(),
            vec![digest],
            "the next master must receive the write its old master kept"
        );
    }
}
