//! The seams a cluster builds on (`engine/src/commit.rs`): every change reaches the change sink
//! in order, acknowledgements wait on what the sink hands out, partition roles gate client
//! commands under the partition lock, replica writes are fenced by the partition's version,
//! and partitions stream out and merge in without losing a change made during the fill.

use std::sync::Arc;

use engine::{
    AckError, AckLatch, Acks, BinWriter, Change, ChangeKind, ChangeSink, Deadline, Decision,
    DeleteRequest, ExistsPolicy, Expiry, GenerationPolicy, ManualClock, Namespace, NamespaceConfig,
    PartitionRole, ReadRequest, RecordAddress, RecordVersion, ReplySink, WriteRequest,
};
use model::{
    CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, Op, OpCode, PARTITION_COUNT, PartitionId, ResultCode,
    TtlRequest, UserKey,
};
use parking_lot::Mutex;

const START_UNIX_MS: u64 = (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000;
const STRING: u8 = 3;

/// What a sink saw: (kind, digest, generation) per change, and truncates.
#[derive(Debug, Default)]
struct Recorder {
    changes: Mutex<Vec<(ChangeKind, Digest, u16)>>,
    truncates: Mutex<Vec<(Vec<u8>, u64)>>,
    /// When set, every change waits for this latch.
    latch: Mutex<Option<Arc<AckLatch>>>,
}

impl ChangeSink for Recorder {
    fn changed(&self, change: &Change<'_>, acks: &mut Acks) {
        let version = change.version();
        self.changes
            .lock()
            .push((change.kind, *change.digest, version.generation.0));
        if let Some(latch) = self.latch.lock().clone() {
            acks.add_latch(latch);
        }
    }

    fn truncated(&self, set_name: &[u8], before_ms: u64) {
        self.truncates.lock().push((set_name.to_vec(), before_ms));
    }
}

struct NoSink;

impl ReplySink for NoSink {
    fn bin(&mut self, _: OpCode, _: engine::BinRef<'_>) {}
}

fn namespace(clock: &Arc<ManualClock>) -> Namespace {
    let config = NamespaceConfig {
        allow_ttl_without_nsup: true,
        ..NamespaceConfig::with_defaults("test")
    };
    Namespace::new(config, clock.clone())
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(START_UNIX_MS))
}

fn digest(key: &str) -> Digest {
    Digest::compute(b"demo", &UserKey::String(key.as_bytes()))
}

fn put(ns: &Namespace, key: &str, value: &[u8], ttl: TtlRequest, acks: &mut Acks) -> ResultCode {
    let request = WriteRequest {
        digest: digest(key),
        set_name: b"demo",
        key: None,
        exists: ExistsPolicy::Update,
        generation: GenerationPolicy::None,
        ttl,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
        read_all_bins: false,
    };
    let op = Op {
        code: OpCode::Write,
        particle_type: STRING,
        bin_name: b"v",
        value,
    };
    match ns.write(&request, std::iter::once(op), &mut NoSink, acks) {
        Ok(_) => ResultCode::Ok,
        Err(code) => code,
    }
}

fn delete(ns: &Namespace, key: &str) -> ResultCode {
    let request = DeleteRequest {
        digest: digest(key),
        set_name: b"",
        key: None,
        generation: GenerationPolicy::None,
        deadline: Deadline::NONE,
        filter: None,
    };
    match ns.delete(&request, &mut Acks::default()) {
        Ok(_) => ResultCode::Ok,
        Err(code) => code,
    }
}

fn get(ns: &Namespace, key: &str) -> Result<u16, ResultCode> {
    let request = ReadRequest {
        digest: digest(key),
        set_name: b"",
        key: None,
        read_all_bins: true,
        header_only: false,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
    };
    ns.read(&request, std::iter::empty(), &mut NoSink)
        .map(|meta| meta.generation.0)
}

fn append(ns: &Namespace, key: &str) -> Result<(), ResultCode> {
    let address = RecordAddress {
        digest: digest(key),
        set_name: b"demo",
        key: None,
    };
    ns.update(
        &address,
        &mut BinWriter::default(),
        &mut Acks::default(),
        |current, out| {
            let mut value = current.map_or_else(Vec::new, |c| {
                c.get()
                    .bins()
                    .iter()
                    .next()
                    .map_or(Vec::new(), |b| b.value.to_vec())
            });
            value.push(b'!');
            out.bin(b"v", STRING, &value);
            Ok((Decision::Store(Expiry::Keep), ()))
        },
    )
}

/// Every kind of change reaches the sink once, in the order it was applied, with the version
/// it left: writes, read-modify-writes, deletes, expiry; and truncates as truncates.
#[test]
fn every_change_reaches_the_sink_in_order() {
    let clock = clock();
    let ns = namespace(&clock);
    let recorder = Arc::new(Recorder::default());
    assert!(ns.set_change_sink(recorder.clone()));
    let mut acks = Acks::default();
    assert_eq!(
        put(&ns, "a", b"1", TtlRequest::NeverExpire, &mut acks),
        ResultCode::Ok
    );
    assert_eq!(
        put(&ns, "a", b"2", TtlRequest::NeverExpire, &mut acks),
        ResultCode::Ok
    );
    append(&ns, "a").expect("appended");
    assert_eq!(
        put(&ns, "b", b"1", TtlRequest::Seconds(10), &mut acks),
        ResultCode::Ok
    );
    assert_eq!(delete(&ns, "a"), ResultCode::Ok);
    assert_eq!(
        delete(&ns, "a"),
        ResultCode::NotFound,
        "a failed change is not one"
    );
    clock.advance_ms(11_000);
    assert_eq!(ns.sweep_expired(), 1);
    ns.truncate(Some(b"demo"), None).expect("truncated");
    let (a, b) = (digest("a"), digest("b"));
    assert_eq!(
        *recorder.changes.lock(),
        vec![
            (ChangeKind::Stored, a, 1),
            (ChangeKind::Stored, a, 2),
            (ChangeKind::Stored, a, 3),
            (ChangeKind::Stored, b, 1),
            (ChangeKind::Deleted, a, 0),
            (ChangeKind::Expired, b, 0),
        ]
    );
    let truncates = recorder.truncates.lock();
    assert_eq!(truncates.len(), 1);
    assert_eq!(truncates[0].0, b"demo");
}

/// A write's acknowledgement waits for what the sink handed out (the replicas' confirmations):
/// the `Acks` value settles only once the latch does, and reports its failure.
#[test]
fn acknowledgements_wait_for_the_sink_s_latches() {
    let clock = clock();
    let ns = namespace(&clock);
    let recorder = Arc::new(Recorder::default());
    ns.set_change_sink(recorder.clone());
    let latch = Arc::new(AckLatch::new(1));
    *recorder.latch.lock() = Some(latch.clone());
    let mut acks = Acks::default();
    assert_eq!(
        put(&ns, "k", b"1", TtlRequest::NeverExpire, &mut acks),
        ResultCode::Ok
    );
    assert_eq!(
        put(&ns, "k", b"2", TtlRequest::NeverExpire, &mut acks),
        ResultCode::Ok
    );
    assert!(!acks.is_empty());
    let waiter = std::thread::spawn(move || acks.wait());
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!waiter.is_finished(), "no replica confirmed yet");
    latch.confirm();
    assert_eq!(waiter.join().expect("no panic"), Ok(()));

    let failing = Arc::new(AckLatch::new(1));
    *recorder.latch.lock() = Some(failing.clone());
    let mut acks = Acks::default();
    put(&ns, "k", b"3", TtlRequest::NeverExpire, &mut acks);
    failing.fail(AckError::NotReplicated(ResultCode::Timeout));
    assert_eq!(
        acks.wait(),
        Err(AckError::NotReplicated(ResultCode::Timeout))
    );
}

/// Client commands are gated by the partition's role, under its lock: a replica serves reads
/// but no writes, a filling or absent partition serves nothing (UNAVAILABLE, which the server
/// forwards), and a partition that stops being held here is emptied.
#[test]
fn partition_roles_gate_client_commands() {
    let clock = clock();
    let ns = namespace(&clock);
    put(
        &ns,
        "k",
        b"1",
        TtlRequest::NeverExpire,
        &mut Acks::default(),
    );
    let pid = digest("k").partition_id();
    ns.set_partition_role(pid, PartitionRole::Replica, 1, 1)
        .expect("newer version");
    assert_eq!(get(&ns, "k"), Ok(1));
    let mut acks = Acks::default();
    assert_eq!(
        put(&ns, "k", b"2", TtlRequest::NeverExpire, &mut acks),
        ResultCode::Unavailable
    );
    assert_eq!(delete(&ns, "k"), ResultCode::Unavailable);
    assert_eq!(append(&ns, "k"), Err(ResultCode::Unavailable));
    assert_eq!(get(&ns, "k"), Ok(1), "nothing changed");
    ns.set_partition_role(pid, PartitionRole::Filling, 2, 2)
        .expect("newer version");
    assert_eq!(get(&ns, "k"), Err(ResultCode::Unavailable));
    ns.set_partition_role(pid, PartitionRole::Absent, 3, 3)
        .expect("newer version");
    assert_eq!(ns.summary().objects, 0, "an absent partition holds nothing");
    assert_eq!(
        ns.set_partition_role(pid, PartitionRole::Master, 2, 2),
        Err(ResultCode::ClusterKeyMismatch),
        "versions never go back"
    );
    ns.set_partition_role(pid, PartitionRole::Master, 4, 4)
        .expect("newer version");
    assert_eq!(get(&ns, "k"), Err(ResultCode::NotFound));
    assert_eq!(
        put(&ns, "k", b"3", TtlRequest::NeverExpire, &mut acks),
        ResultCode::Ok
    );
}

fn version(key: &str, generation: u16, last_update_ms: u64, value: &[u8]) -> RecordVersion {
    // A record's data: no user key (flag byte 0, as `record::encode` writes it), one bin.
    let source = namespace(&clock());
    put(
        &source,
        key,
        value,
        TtlRequest::NeverExpire,
        &mut Acks::default(),
    );
    let mut data = None;
    source.stream_out(digest(key).partition_id(), None, usize::MAX, |v| {
        data = v.data;
        false
    });
    RecordVersion {
        digest: digest(key),
        set_name: b"demo".to_vec(),
        generation: model::Generation(generation),
        last_update_ms,
        void_time: model::VoidTime::NEVER,
        data,
    }
}

/// A replica applies its master's changes only when they carry the partition's version or a
/// newer one: a deposed master (older version) is refused with CLUSTER_KEY_MISMATCH.
#[test]
fn a_replica_refuses_changes_from_an_older_partition_version() {
    let clock = clock();
    let replica = namespace(&clock);
    let pid = digest("k").partition_id();
    replica
        .set_partition_role(pid, PartitionRole::Replica, 7, 7)
        .expect("set");
    let mut acks = Acks::default();
    let v1 = version("k", 1, START_UNIX_MS, b"one");
    assert_eq!(
        replica.merge_replicated(6, &v1, &mut acks),
        Err(ResultCode::ClusterKeyMismatch)
    );
    assert_eq!(get(&replica, "k"), Err(ResultCode::NotFound));
    replica
        .merge_replicated(7, &v1, &mut acks)
        .expect("current version");
    assert_eq!(get(&replica, "k"), Ok(1));
    replica
        .merge_replicated(8, &RecordVersion::tombstone(digest("k")), &mut acks)
        .expect("a newer version is a newer master");
    assert_eq!(get(&replica, "k"), Err(ResultCode::NotFound));
}

/// The fence is the version since which the master is master, not the partition's version:
/// a change of the replica list that keeps the master (a replica added or filled) leaves the
/// master's writes in flight, which carry the previous version, welcome; a write from before
/// the master changed is refused.
#[test]
fn a_replica_takes_the_same_masters_older_versions_but_not_a_deposed_masters() {
    let clock = clock();
    let replica = namespace(&clock);
    let pid = digest("k").partition_id();
    replica
        .set_partition_role(pid, PartitionRole::Replica, 9, 7)
        .expect("set");
    let mut acks = Acks::default();
    let v1 = version("k", 1, START_UNIX_MS, b"one");
    assert_eq!(
        replica.merge_replicated(6, &v1, &mut acks),
        Err(ResultCode::ClusterKeyMismatch),
        "sent by the master before the current one"
    );
    replica
        .merge_replicated(8, &v1, &mut acks)
        .expect("sent by the current master before the list last changed");
    assert_eq!(get(&replica, "k"), Ok(1));
}

/// A node cut off from its cluster's quorum refuses client writes (UNAVAILABLE) and still
/// serves reads; writes come back with the quorum.
#[test]
fn refused_writes_are_unavailable_until_allowed_again() {
    let clock = clock();
    let ns = namespace(&clock);
    put(
        &ns,
        "k",
        b"1",
        TtlRequest::NeverExpire,
        &mut Acks::default(),
    );
    ns.set_writes_refused(true);
    assert_eq!(
        put(
            &ns,
            "k",
            b"2",
            TtlRequest::NeverExpire,
            &mut Acks::default()
        ),
        ResultCode::Unavailable
    );
    assert_eq!(delete(&ns, "k"), ResultCode::Unavailable);
    assert_eq!(get(&ns, "k"), Ok(1), "reads go on");
    ns.set_writes_refused(false);
    assert_eq!(
        put(
            &ns,
            "k",
            b"2",
            TtlRequest::NeverExpire,
            &mut Acks::default()
        ),
        ResultCode::Ok
    );
}

/// A fill starts from nothing: a record left here from before is dropped (the master may
/// have deleted it meanwhile), and so is one the master replicated to this node while it was
/// filling but before its stream began. That one told the cluster simulation's story (seed
/// 551959178): a node restarted within the heartbeat timeout took a write its master sent under
/// the table that still called it a full replica, the master deleted the record before this
/// node's stream began (and so sent it nothing), and the kept copy came back once the node
/// became master. What the master replicates after the fill began is kept.
#[test]
fn beginning_a_fill_drops_everything_held_before() {
    let clock = clock();
    let target = namespace(&clock);
    for key in ["stale-1", "stale-2"] {
        put(
            &target,
            key,
            b"old",
            TtlRequest::NeverExpire,
            &mut Acks::default(),
        );
    }
    let early = version("early", 3, START_UNIX_MS, b"early");
    let fresh = version("fresh", 3, START_UNIX_MS, b"new");
    let fresh_pid = digest("fresh").partition_id();
    for pid in model::PartitionId::all() {
        target
            .set_partition_role(pid, PartitionRole::Filling, 2, 2)
            .expect("set");
    }
    target
        .merge_replicated(2, &early, &mut Acks::default())
        .expect("replicated while filling, before the stream began");
    let mut dropped = 0;
    for pid in model::PartitionId::all() {
        dropped += target.begin_fill(pid).expect("filling");
    }
    assert_eq!(dropped, 3, "the two stale records and the early one");
    target
        .merge_replicated(2, &fresh, &mut Acks::default())
        .expect("replicated during the fill");
    let older_fresh = version("fresh", 2, START_UNIX_MS - 1, b"old");
    assert_eq!(
        target.merge_in(&older_fresh),
        Ok(false),
        "the stream's older copy"
    );
    target
        .set_partition_role(fresh_pid, PartitionRole::Replica, 3, 2)
        .expect("set");
    assert_eq!(get(&target, "fresh"), Ok(3));
    assert_eq!(target.summary().objects, 1);
    assert_eq!(
        target.begin_fill(fresh_pid),
        Err(ResultCode::Unavailable),
        "not filling"
    );
}

/// A partition streamed out of one namespace and merged into another arrives whole, with each
/// record's generation, last-update time and data; changes the master replicated during the
/// fill (a delete, a newer write) are not undone by the snapshot's older copies.
#[test]
fn partitions_stream_out_and_merge_in_without_undoing_changes_made_during_the_fill() {
    let clock = clock();
    let source = namespace(&clock);
    let mut acks = Acks::default();
    for i in 0..2_000 {
        put(
            &source,
            &format!("k{i}"),
            b"old",
            TtlRequest::NeverExpire,
            &mut acks,
        );
    }
    put(&source, "k7", b"newer", TtlRequest::NeverExpire, &mut acks);
    let target = namespace(&clock);
    for pid in 0..PARTITION_COUNT as u16 {
        target
            .set_partition_role(PartitionId(pid), PartitionRole::Filling, 1, 1)
            .expect("set");
    }
    // During the fill the master deletes k1 and rewrites k2; both reach the target first.
    let deleted = RecordVersion::tombstone(digest("k1"));
    target
        .merge_replicated(1, &deleted, &mut acks)
        .expect("applied");
    let rewritten = version("k2", 9, START_UNIX_MS + 5, b"during");
    target
        .merge_replicated(1, &rewritten, &mut acks)
        .expect("applied");
    let mut streamed = 0;
    for pid in 0..PARTITION_COUNT as u16 {
        let mut after = None;
        loop {
            let end = source.stream_out(PartitionId(pid), after.as_ref(), 64, |v| {
                streamed += 1;
                target.merge_in(&v).expect("merged");
                true
            });
            if end.exhausted {
                break;
            }
            after = end.last;
        }
        target
            .set_partition_role(PartitionId(pid), PartitionRole::Replica, 2, 2)
            .expect("full");
    }
    assert_eq!(streamed, 2_000);
    assert_eq!(
        get(&target, "k1"),
        Err(ResultCode::NotFound),
        "no resurrection"
    );
    assert_eq!(
        get(&target, "k2"),
        Ok(9),
        "the change made during the fill stays"
    );
    assert_eq!(get(&target, "k7"), Ok(2));
    assert_eq!(get(&target, "k1999"), Ok(1));
    assert_eq!(target.summary().objects, 1_999);
    // A second pass of the same snapshot changes nothing: merging is idempotent.
    let applied = target.merge_in(&version("k5", 1, START_UNIX_MS, b"old"));
    assert_eq!(applied, Ok(false));
}
