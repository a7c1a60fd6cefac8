//! Transactions through the engine's public API, with a manual clock.
//!
//! Each test states one Aerospike behaviour; the expected result codes come from the server's
//! `write.c`, `read.c` and `delete.c` (see `docs/internals/data-model.md`).

use std::sync::Arc;

use engine::{
    Acks, BinRef, Clock, Deadline, DeleteRequest, ExistsPolicy, GenerationPolicy, ManualClock,
    Namespace, NamespaceConfig, Origin, ReadRequest, RecordMeta, ReplySink, WriteRequest,
};
use model::{
    CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, Generation, Op, OpCode, ParticleType, ResultCode,
    TtlRequest, UserKey, VoidTime,
};

const START_UNIX_MS: u64 = (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000;
const START_EPOCH_SECONDS: u32 = 1_000_000;

#[derive(Default)]
struct Collect(Vec<(OpCode, Vec<u8>, u8, Vec<u8>)>);

impl ReplySink for Collect {
    fn bin(&mut self, op_code: OpCode, bin: BinRef<'_>) {
        self.0.push((
            op_code,
            bin.name.to_vec(),
            bin.particle_type,
            bin.value.to_vec(),
        ));
    }
}

/// A bin as (name, value bytes).
type NamedValue = (Vec<u8>, Vec<u8>);

struct Fixture {
    clock: Arc<ManualClock>,
    namespace: Namespace,
}

fn fixture_with(config: NamespaceConfig) -> Fixture {
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let namespace = Namespace::new(config, clock.clone());
    Fixture { clock, namespace }
}

fn fixture() -> Fixture {
    fixture_with(NamespaceConfig::with_defaults("test"))
}

fn digest(key: &str) -> Digest {
    Digest::compute(b"demo", &UserKey::String(key.as_bytes()))
}

fn write_op<'a>(name: &'a str, value: &'a [u8]) -> Op<'a> {
    Op {
        code: OpCode::Write,
        particle_type: 3,
        bin_name: name.as_bytes(),
        value,
    }
}

/// A read of each of `names`, in order.
fn read_ops<'a>(names: impl Iterator<Item = &'a String>) -> Vec<Op<'a>> {
    names
        .map(|name| Op {
            code: OpCode::Read,
            particle_type: 0,
            bin_name: name.as_bytes(),
            value: b"",
        })
        .collect()
}

fn int_op(code: OpCode, name: &'static str, value: i64) -> Op<'static> {
    // Leaked so ops can be built inline in tests; a few bytes per test.
    let bytes: &'static [u8] = Box::leak(Box::new(value.to_be_bytes()));
    Op {
        code,
        particle_type: ParticleType::Integer as u8,
        bin_name: name.as_bytes(),
        value: bytes,
    }
}

/// An op that carries no value: a read, a touch, or a write of NULL (bin delete).
fn no_value_op(code: OpCode, name: &'static [u8]) -> Op<'static> {
    Op {
        code,
        particle_type: 0,
        bin_name: name,
        value: b"",
    }
}

fn put_request(key: &str) -> WriteRequest<'static> {
    WriteRequest {
        digest: digest(key),
        set_name: b"demo",
        key: None,
        exists: ExistsPolicy::Update,
        generation: GenerationPolicy::None,
        ttl: TtlRequest::NamespaceDefault,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
        read_all_bins: false,
    }
}

impl Fixture {
    fn write(&self, request: WriteRequest<'_>, ops: &[Op<'_>]) -> Result<RecordMeta, ResultCode> {
        self.namespace.write(
            &request,
            ops.iter().copied(),
            &mut Collect::default(),
            &mut Acks::default(),
        )
    }

    fn operate(&self, request: WriteRequest<'_>, ops: &[Op<'_>]) -> Result<Collect, ResultCode> {
        let mut sink = Collect::default();
        self.namespace.write(
            &request,
            ops.iter().copied(),
            &mut sink,
            &mut Acks::default(),
        )?;
        Ok(sink)
    }

    fn get_all(&self, key: &str) -> Result<(RecordMeta, Vec<NamedValue>), ResultCode> {
        let request = ReadRequest {
            digest: digest(key),
            set_name: b"",
            key: None,
            respond_all_ops: false,
            read_all_bins: true,
            header_only: false,
            deadline: Deadline::NONE,
            filter: None,
        };
        let mut sink = Collect::default();
        let meta = self
            .namespace
            .read(&request, std::iter::empty(), &mut sink)?;
        Ok((
            meta,
            sink.0
                .into_iter()
                .map(|(_, name, _, value)| (name, value))
                .collect(),
        ))
    }
}

#[test]
fn put_then_get_returns_the_bins_with_generation_one() {
    let f = fixture();
    let meta = f
        .write(
            put_request("k"),
            &[write_op("a", b"x"), write_op("b", b"y")],
        )
        .unwrap();
    assert_eq!(meta.generation, Generation(1));
    let (meta, bins) = f.get_all("k").unwrap();
    assert_eq!(meta.generation, Generation(1));
    assert_eq!(
        bins,
        vec![
            (b"a".to_vec(), b"x".to_vec()),
            (b"b".to_vec(), b"y".to_vec())
        ]
    );
}

#[test]
fn update_merges_bins_and_replace_drops_the_others() {
    let f = fixture();
    f.write(
        put_request("k"),
        &[write_op("a", b"1"), write_op("b", b"2")],
    )
    .unwrap();
    f.write(put_request("k"), &[write_op("b", b"3")]).unwrap();
    let (meta, bins) = f.get_all("k").unwrap();
    assert_eq!(meta.generation, Generation(2));
    assert_eq!(
        bins,
        vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"3".to_vec())
        ]
    );
    let replace = WriteRequest {
        exists: ExistsPolicy::Replace,
        ..put_request("k")
    };
    f.write(replace, &[write_op("c", b"4")]).unwrap();
    assert_eq!(
        f.get_all("k").unwrap().1,
        vec![(b"c".to_vec(), b"4".to_vec())]
    );
}

#[test]
fn exists_policies_return_aerospike_result_codes() {
    let f = fixture();
    let only = |exists| WriteRequest {
        exists,
        ..put_request("k")
    };
    let ops = [write_op("a", b"1")];
    assert_eq!(
        f.write(only(ExistsPolicy::UpdateOnly), &ops),
        Err(ResultCode::NotFound)
    );
    assert_eq!(
        f.write(only(ExistsPolicy::ReplaceOnly), &ops),
        Err(ResultCode::NotFound)
    );
    assert!(f.write(only(ExistsPolicy::CreateOnly), &ops).is_ok());
    assert_eq!(
        f.write(only(ExistsPolicy::CreateOnly), &ops),
        Err(ResultCode::RecordExists)
    );
    assert!(f.write(only(ExistsPolicy::UpdateOnly), &ops).is_ok());
    assert!(f.write(only(ExistsPolicy::ReplaceOnly), &ops).is_ok());
}

#[test]
fn replace_policies_reject_modify_ops_and_bin_deletes() {
    let f = fixture();
    f.write(put_request("k"), &[write_op("a", b"1")]).unwrap();
    let replace = WriteRequest {
        exists: ExistsPolicy::Replace,
        ..put_request("k")
    };
    let incr = int_op(OpCode::Incr, "n", 1);
    assert_eq!(f.write(replace, &[incr]), Err(ResultCode::Parameter));
    let delete_bin = no_value_op(OpCode::Write, b"a");
    assert_eq!(f.write(replace, &[delete_bin]), Err(ResultCode::Parameter));
}

#[test]
fn generation_policies_compare_with_the_stored_generation() {
    let f = fixture();
    f.write(put_request("k"), &[write_op("a", b"1")]).unwrap();
    let with = |generation| WriteRequest {
        generation,
        ..put_request("k")
    };
    let ops = [write_op("a", b"2")];
    assert_eq!(
        f.write(with(GenerationPolicy::Equal(2)), &ops),
        Err(ResultCode::Generation)
    );
    assert!(f.write(with(GenerationPolicy::Equal(1)), &ops).is_ok());
    assert_eq!(
        f.write(with(GenerationPolicy::Greater(2)), &ops),
        Err(ResultCode::Generation)
    );
    assert!(f.write(with(GenerationPolicy::Greater(3)), &ops).is_ok());
    assert_eq!(f.get_all("k").unwrap().0.generation, Generation(3));
}

#[test]
fn generation_wraps_from_65535_to_1() {
    let f = fixture();
    for _ in 0..u16::MAX {
        f.write(put_request("k"), &[write_op("a", b"1")]).unwrap();
    }
    assert_eq!(f.get_all("k").unwrap().0.generation, Generation(u16::MAX));
    let meta = f.write(put_request("k"), &[write_op("a", b"1")]).unwrap();
    assert_eq!(meta.generation, Generation(1));
}

#[test]
fn a_different_stored_key_is_key_mismatch() {
    let f = fixture();
    let with_key = |key| WriteRequest {
        key: Some(key),
        ..put_request("k")
    };
    f.write(with_key(b"\x03alpha"), &[write_op("a", b"1")])
        .unwrap();
    assert!(
        f.write(with_key(b"\x03alpha"), &[write_op("a", b"2")])
            .is_ok()
    );
    assert_eq!(
        f.write(with_key(b"\x03beta"), &[write_op("a", b"3")]),
        Err(ResultCode::KeyMismatch)
    );
    assert_eq!(
        f.write(with_key(b"\x01abc"), &[write_op("a", b"3")]),
        Err(ResultCode::Parameter)
    );
    // Reads check a sent key too (Aerospike's read.c `check_msg_key`).
    let read = |key| ReadRequest {
        digest: digest("k"),
        set_name: b"",
        key: Some(key),
        respond_all_ops: false,
        read_all_bins: true,
        header_only: false,
        deadline: Deadline::NONE,
        filter: None,
    };
    let result = f.namespace.read(
        &read(b"\x03beta"),
        std::iter::empty(),
        &mut Collect::default(),
    );
    assert_eq!(result, Err(ResultCode::KeyMismatch));
    assert!(
        f.namespace
            .read(
                &read(b"\x03alpha"),
                std::iter::empty(),
                &mut Collect::default()
            )
            .is_ok()
    );
}

#[test]
fn a_request_naming_another_set_is_a_parameter_error() {
    let f = fixture();
    f.write(put_request("k"), &[write_op("a", b"1")]).unwrap();
    let other = WriteRequest {
        set_name: b"other",
        ..put_request("k")
    };
    assert_eq!(
        f.write(other, &[write_op("a", b"2")]),
        Err(ResultCode::Parameter)
    );
    let read = ReadRequest {
        digest: digest("k"),
        set_name: b"other",
        key: None,
        respond_all_ops: false,
        read_all_bins: true,
        header_only: false,
        deadline: Deadline::NONE,
        filter: None,
    };
    let result = f
        .namespace
        .read(&read, std::iter::empty(), &mut Collect::default());
    assert_eq!(result, Err(ResultCode::Parameter));
}

#[test]
fn operate_is_atomic_when_a_later_op_fails() {
    let f = fixture();
    f.write(
        put_request("k"),
        &[write_op("s", b"text"), write_op("a", b"1")],
    )
    .unwrap();
    let ops = [write_op("a", b"changed"), int_op(OpCode::Incr, "s", 1)];
    assert_eq!(
        f.write(put_request("k"), &ops),
        Err(ResultCode::IncompatibleType)
    );
    let (meta, bins) = f.get_all("k").unwrap();
    assert_eq!(meta.generation, Generation(1));
    assert_eq!(bins[1], (b"a".to_vec(), b"1".to_vec()));
}

#[test]
fn reads_inside_operate_see_earlier_ops_and_respond_all_ops_answers_each_op() {
    let f = fixture();
    let request = WriteRequest {
        respond_all_ops: true,
        ..put_request("k")
    };
    let read = no_value_op(OpCode::Read, b"n");
    let ops = [
        read,
        int_op(OpCode::Incr, "n", 5),
        read,
        int_op(OpCode::Incr, "n", 2),
        read,
    ];
    let results = f.operate(request, &ops).unwrap().0;
    let values: Vec<_> = results
        .iter()
        .map(|(code, _, kind, value)| (*code, *kind, value.clone()))
        .collect();
    assert_eq!(
        values,
        vec![
            (OpCode::Read, 0, vec![]),
            (OpCode::Incr, 0, vec![]),
            (OpCode::Read, 1, 5i64.to_be_bytes().to_vec()),
            (OpCode::Incr, 0, vec![]),
            (OpCode::Read, 1, 7i64.to_be_bytes().to_vec()),
        ]
    );
}

#[test]
fn touch_needs_an_existing_record_and_bumps_generation() {
    let f = fixture();
    let touch = no_value_op(OpCode::Touch, b"");
    assert_eq!(
        f.write(put_request("k"), &[touch]),
        Err(ResultCode::NotFound)
    );
    f.write(put_request("k"), &[write_op("a", b"1")]).unwrap();
    let request = WriteRequest {
        ttl: TtlRequest::Seconds(100),
        ..put_request("k")
    };
    let meta = f.write(request, &[touch]).unwrap();
    assert_eq!(meta.generation, Generation(2));
    assert_eq!(meta.void_time, VoidTime(START_EPOCH_SECONDS + 100));
}

#[test]
fn removing_the_last_bin_deletes_the_record() {
    let f = fixture();
    let delete_bin = no_value_op(OpCode::Write, b"a");
    assert_eq!(
        f.write(put_request("k"), &[delete_bin]),
        Err(ResultCode::NotFound)
    );
    f.write(put_request("k"), &[write_op("a", b"1")]).unwrap();
    assert!(f.write(put_request("k"), &[delete_bin]).is_ok());
    assert_eq!(f.get_all("k").unwrap_err(), ResultCode::NotFound);
    assert_eq!(f.namespace.summary().objects, 0);
}

#[test]
fn delete_checks_generation_and_reports_missing_records() {
    let f = fixture();
    let delete = |generation| DeleteRequest {
        digest: digest("k"),
        set_name: b"",
        key: None,
        generation,
        deadline: Deadline::NONE,
        filter: None,
    };
    assert_eq!(
        f.namespace
            .delete(&delete(GenerationPolicy::None), &mut Acks::default()),
        Err(ResultCode::NotFound)
    );
    f.write(put_request("k"), &[write_op("a", b"1")]).unwrap();
    assert_eq!(
        f.namespace
            .delete(&delete(GenerationPolicy::Equal(5)), &mut Acks::default()),
        Err(ResultCode::Generation)
    );
    assert!(
        f.namespace
            .delete(&delete(GenerationPolicy::Equal(1)), &mut Acks::default())
            .is_ok()
    );
    assert_eq!(f.get_all("k").unwrap_err(), ResultCode::NotFound);
    let summary = f.namespace.summary();
    assert_eq!(
        (
            summary.client_delete_success,
            summary.client_delete_not_found
        ),
        (1, 1)
    );
}

#[test]
fn record_size_limit_is_record_too_big() {
    let config = NamespaceConfig {
        max_record_size_bytes: 100,
        ..NamespaceConfig::with_defaults("t")
    };
    let f = fixture_with(config);
    assert!(
        f.write(put_request("k"), &[write_op("a", &[b'x'; 80])])
            .is_ok()
    );
    assert_eq!(
        f.write(put_request("k"), &[write_op("a", &[b'x'; 100])]),
        Err(ResultCode::RecordTooBig)
    );
}

#[test]
fn ttl_special_values_and_default_ttl() {
    let config = NamespaceConfig {
        default_ttl_seconds: 50,
        ..NamespaceConfig::with_defaults("t")
    };
    let f = fixture_with(config);
    let with_ttl = |ttl| WriteRequest {
        ttl,
        ..put_request("k")
    };
    let ops = [write_op("a", b"1")];
    let default = f
        .write(with_ttl(TtlRequest::NamespaceDefault), &ops)
        .unwrap();
    assert_eq!(default.void_time, VoidTime(START_EPOCH_SECONDS + 50));
    f.clock.advance_ms(10_000);
    let unchanged = f.write(with_ttl(TtlRequest::Unchanged), &ops).unwrap();
    assert_eq!(unchanged.void_time, default.void_time);
    let never = f.write(with_ttl(TtlRequest::NeverExpire), &ops).unwrap();
    assert_eq!(never.void_time, VoidTime::NEVER);
    let explicit = f.write(with_ttl(TtlRequest::Seconds(7)), &ops).unwrap();
    assert_eq!(explicit.void_time, VoidTime(START_EPOCH_SECONDS + 17));
}

#[test]
fn ttl_without_a_sweeper_is_forbidden_unless_allowed() {
    let config = NamespaceConfig {
        nsup_period_seconds: 0,
        ..NamespaceConfig::with_defaults("t")
    };
    let f = fixture_with(config);
    let with_ttl = |ttl| WriteRequest {
        ttl,
        ..put_request("k")
    };
    let ops = [write_op("a", b"1")];
    assert_eq!(
        f.write(with_ttl(TtlRequest::Seconds(5)), &ops),
        Err(ResultCode::Forbidden)
    );
    assert!(f.write(with_ttl(TtlRequest::NeverExpire), &ops).is_ok());
    assert!(
        f.write(with_ttl(TtlRequest::NamespaceDefault), &ops)
            .is_ok()
    );
}

#[test]
fn expired_records_are_invisible_at_once_and_swept_later() {
    let f = fixture();
    let request = WriteRequest {
        ttl: TtlRequest::Seconds(2),
        ..put_request("k")
    };
    f.write(request, &[write_op("a", b"1")]).unwrap();
    f.write(put_request("keep"), &[write_op("a", b"1")])
        .unwrap();
    f.clock.advance_ms(2_000);
    assert_eq!(f.get_all("k").unwrap_err(), ResultCode::NotFound);
    assert_eq!(
        f.namespace.summary().objects,
        2,
        "not reclaimed before the sweeper runs"
    );
    assert_eq!(f.namespace.sweep_expired(), 1);
    let summary = f.namespace.summary();
    assert_eq!((summary.objects, summary.expired_objects), (1, 1));
    assert_eq!(f.namespace.sets()[0].objects, 1);
}

#[test]
fn writing_over_an_expired_record_creates_a_fresh_one() {
    let f = fixture();
    let request = WriteRequest {
        ttl: TtlRequest::Seconds(1),
        ..put_request("k")
    };
    f.write(request, &[write_op("old", b"1")]).unwrap();
    f.clock.advance_ms(1_000);
    let create = WriteRequest {
        exists: ExistsPolicy::CreateOnly,
        ..put_request("k")
    };
    let meta = f.write(create, &[write_op("new", b"2")]).unwrap();
    assert_eq!(meta.generation, Generation(1));
    assert_eq!(
        f.get_all("k").unwrap().1,
        vec![(b"new".to_vec(), b"2".to_vec())]
    );
    assert_eq!(f.namespace.summary().expired_objects, 1);
}

#[test]
fn a_failing_collection_op_leaves_the_record_as_it_was() {
    let f = fixture();
    f.write(put_request("k"), &[write_op("a", b"1")]).unwrap();
    // A list append ([1, 1]) on the string bin "a", after a write of bin "b".
    let append_to_a = Op {
        code: OpCode::CdtModify,
        particle_type: 4,
        bin_name: b"a",
        value: b"\x92\x01\x01",
    };
    assert_eq!(
        f.write(put_request("k"), &[write_op("b", b"2"), append_to_a]),
        Err(ResultCode::IncompatibleType)
    );
    let (meta, bins) = f.get_all("k").unwrap();
    assert_eq!(meta.generation, Generation(1));
    assert_eq!(bins, vec![(b"a".to_vec(), b"1".to_vec())]);
}

#[test]
fn set_counts_follow_creates_and_deletes() {
    let f = fixture();
    for key in ["a", "b", "c"] {
        f.write(put_request(key), &[write_op("x", b"1")]).unwrap();
    }
    let delete = DeleteRequest {
        digest: digest("b"),
        set_name: b"demo",
        key: None,
        generation: GenerationPolicy::None,
        deadline: Deadline::NONE,
        filter: None,
    };
    f.namespace.delete(&delete, &mut Acks::default()).unwrap();
    let sets = f.namespace.sets();
    assert_eq!((sets[0].name.as_str(), sets[0].objects), ("demo", 2));
    assert_eq!(f.namespace.summary().objects, 2);
}

/// The bug: every op looked its bin up by scanning the record, so a put of 32,767 distinct bins
/// and an operate reading them all back by name each compared about 5 × 10^8 names (2 s each
/// in a release build, minutes in a debug one). Lookups go through a name map once scanning
/// costs more, so each of these requests is linear in its ops and bins.
#[test]
fn a_put_of_32k_bins_and_reads_of_each_by_name_stay_linear() {
    let f = fixture();
    let names: Vec<String> = (0..32_767).map(|i| format!("bin{i}")).collect();
    let writes: Vec<Op<'_>> = names
        .iter()
        .map(|name| write_op(name, name.as_bytes()))
        .collect();
    f.write(put_request("wide"), &writes).unwrap();
    let reads = read_ops(names.iter().rev());
    let request = ReadRequest {
        digest: digest("wide"),
        set_name: b"",
        key: None,
        respond_all_ops: false,
        read_all_bins: false,
        header_only: false,
        deadline: Deadline::NONE,
        filter: None,
    };
    let mut sink = Collect::default();
    f.namespace
        .read(&request, reads.iter().copied(), &mut sink)
        .unwrap();
    let read_back: Vec<Vec<u8>> = sink.0.into_iter().map(|(_, _, _, value)| value).collect();
    let expected: Vec<Vec<u8>> = names.iter().rev().map(|n| n.clone().into_bytes()).collect();
    assert_eq!(read_back, expected);
    // The same reads inside an operate go through the working record's lookups.
    let mut operate = vec![write_op("bin0", b"changed")];
    operate.extend(reads.iter().copied());
    let sink = f.operate(put_request("wide"), &operate).unwrap();
    assert_eq!(sink.0.len(), 32_767);
    assert_eq!(sink.0.last().unwrap().3, b"changed");
    assert_eq!(f.get_all("wide").unwrap().1.len(), 32_767);
}

/// Aerospike's `write_master_bin_ops` refuses a write whose ops leave more than
/// `RECORD_MAX_BINS` bins with PARAMETER; `max-bins-per-record` sets that limit, and the record
/// stays as it was. The count is what the ops leave, so a write that adds and removes is judged
/// by its end.
#[test]
fn a_write_leaving_more_bins_than_the_limit_is_parameter_and_changes_nothing() {
    let config = NamespaceConfig {
        max_bins_per_record: 3,
        ..NamespaceConfig::with_defaults("t")
    };
    let f = fixture_with(config);
    f.write(
        put_request("k"),
        &[write_op("a", b"1"), write_op("b", b"2")],
    )
    .unwrap();
    assert_eq!(
        f.write(
            put_request("k"),
            &[write_op("c", b"3"), write_op("d", b"4")]
        ),
        Err(ResultCode::Parameter)
    );
    let (meta, bins) = f.get_all("k").unwrap();
    assert_eq!(meta.generation, Generation(1));
    assert_eq!(bins.len(), 2);
    let remove_a = no_value_op(OpCode::Write, b"a");
    f.write(
        put_request("k"),
        &[write_op("c", b"3"), write_op("d", b"4"), remove_a],
    )
    .unwrap();
    let names: Vec<Vec<u8>> = f.get_all("k").unwrap().1.into_iter().map(|b| b.0).collect();
    assert_eq!(names, [b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
    let default = NamespaceConfig::with_defaults("t").max_bins_per_record;
    assert_eq!(default, 32_767);
}

/// A clock that moves one millisecond forward each time it is read, so that time passes while a
/// long request runs.
struct TickingClock(std::sync::atomic::AtomicU64);

impl Clock for TickingClock {
    fn now_unix_ms(&self) -> u64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }
}

fn read_request(key: &str, deadline: Deadline) -> ReadRequest<'static> {
    ReadRequest {
        digest: digest(key),
        set_name: b"",
        key: None,
        respond_all_ops: false,
        read_all_bins: true,
        header_only: false,
        deadline,
        filter: None,
    }
}

fn delete_request(key: &str, deadline: Deadline) -> DeleteRequest<'static> {
    DeleteRequest {
        digest: digest(key),
        set_name: b"",
        key: None,
        generation: GenerationPolicy::None,
        deadline,
        filter: None,
    }
}

/// Aerospike answers TIMEOUT (9) to a request whose total timeout has passed, and counts it as
/// a timeout, not an error. A read, a write and a delete past their deadline each answer so,
/// from a client and from a batch, and the record stays exactly as it was; with the deadline
/// still ahead they succeed.
#[test]
fn requests_past_their_deadline_answer_timeout_are_counted_and_change_nothing() {
    let f = fixture();
    f.write(put_request("k"), &[write_op("a", b"1")]).unwrap();
    let deadline = Deadline::at_unix_ms(START_UNIX_MS + 10);
    f.clock.advance_ms(11);
    let write = WriteRequest {
        deadline,
        ..put_request("k")
    };
    let namespace = &f.namespace;
    for origin in [Origin::Client, Origin::Batch] {
        let mut sink = Collect::default();
        let read = namespace.read_as(
            origin,
            &read_request("k", deadline),
            std::iter::empty(),
            &mut sink,
        );
        assert_eq!(read, Err(ResultCode::Timeout));
        let ops = [write_op("a", b"2"), write_op("b", b"3")];
        let written = namespace.write_as(
            origin,
            &write,
            ops.iter().copied(),
            &mut sink,
            &mut Acks::default(),
        );
        assert_eq!(written, Err(ResultCode::Timeout));
        let deleted =
            namespace.delete_as(origin, &delete_request("k", deadline), &mut Acks::default());
        assert_eq!(deleted, Err(ResultCode::Timeout));
    }
    let (meta, bins) = f.get_all("k").unwrap();
    assert_eq!(meta.generation, Generation(1));
    assert_eq!(bins, vec![(b"a".to_vec(), b"1".to_vec())]);
    let summary = namespace.summary();
    let timeouts = [
        summary.client_read_timeout,
        summary.client_write_timeout,
        summary.client_delete_timeout,
        summary.batch_sub_read_timeout,
        summary.batch_sub_write_timeout,
        summary.batch_sub_delete_timeout,
    ];
    assert_eq!(timeouts, [1; 6]);
    let errors = [
        summary.client_read_error,
        summary.client_write_error,
        summary.client_delete_error,
    ];
    assert_eq!(errors, [0; 3]);

    let ahead = Deadline::at_unix_ms(START_UNIX_MS + 1_000);
    let write = WriteRequest {
        deadline: ahead,
        ..put_request("k")
    };
    f.write(write, &[write_op("a", b"2")]).unwrap();
    let mut sink = Collect::default();
    namespace
        .read(&read_request("k", ahead), std::iter::empty(), &mut sink)
        .unwrap();
    assert_eq!(sink.0[0].3, b"2");
    namespace
        .delete(&delete_request("k", ahead), &mut Acks::default())
        .unwrap();
}

/// The bug: a batch whose rows each read 32,767 bins of a 32,767-bin record, sent with a total
/// timeout of 1 s, ran for many seconds, since no deadline was looked at once a request had
/// started. Now the engine looks every 64 ops or bins: on a clock that moves 1 ms per look, a
/// long operate, a read of every bin and a read of many named bins each stop midway with
/// TIMEOUT, and the operate leaves the record as it was.
#[test]
fn long_requests_stop_at_their_deadline_midway_and_a_write_leaves_nothing_behind() {
    let clock = Arc::new(TickingClock(START_UNIX_MS.into()));
    let namespace = Namespace::new(NamespaceConfig::with_defaults("test"), clock.clone());
    let names: Vec<String> = (0..10_000).map(|i| format!("b{i}")).collect();
    let writes: Vec<Op<'_>> = names.iter().map(|n| write_op(n, b"v")).collect();
    let mut sink = Collect::default();
    namespace
        .write(
            &put_request("wide"),
            writes.iter().copied(),
            &mut sink,
            &mut Acks::default(),
        )
        .unwrap();

    // About 100 looks at the clock fit before each deadline: 6,400 of the 10,000 steps.
    let soon = || Deadline::at_unix_ms(clock.now_unix_ms() + 100);
    let incr = int_op(OpCode::Incr, "n", 1);
    let mut operate = vec![write_op("b0", b"changed")];
    operate.extend(std::iter::repeat_n(incr, 10_000));
    let write = WriteRequest {
        deadline: soon(),
        ..put_request("wide")
    };
    let mut sink = Collect::default();
    let result = namespace.write(
        &write,
        operate.iter().copied(),
        &mut sink,
        &mut Acks::default(),
    );
    assert_eq!(result, Err(ResultCode::Timeout));
    let mut sink = Collect::default();
    let read_all = namespace.read(&read_request("wide", soon()), std::iter::empty(), &mut sink);
    assert_eq!(read_all, Err(ResultCode::Timeout));
    assert!(
        sink.0.len() > 1_000 && sink.0.len() < 10_000,
        "stopped midway"
    );
    let reads = read_ops(names.iter());
    let named = ReadRequest {
        read_all_bins: false,
        ..read_request("wide", soon())
    };
    let mut sink = Collect::default();
    let read_named = namespace.read(&named, reads.iter().copied(), &mut sink);
    assert_eq!(read_named, Err(ResultCode::Timeout));
    assert!(
        sink.0.len() > 1_000 && sink.0.len() < 10_000,
        "stopped midway"
    );

    let mut sink = Collect::default();
    let unchanged = namespace.read(
        &read_request("wide", Deadline::NONE),
        std::iter::empty(),
        &mut sink,
    );
    assert_eq!(unchanged.unwrap().generation, Generation(1));
    assert_eq!(sink.0.len(), 10_000);
    assert_eq!(sink.0[0].3, b"v");
    assert!(sink.0.iter().all(|(_, name, _, _)| name != b"n"));
}
