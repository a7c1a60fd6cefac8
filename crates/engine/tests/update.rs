//! Read-modify-write by closure (`Namespace::update`) and reads by closure (`Namespace::view`),
//! as the Redis front end uses them.

use std::any::Any;
use std::sync::Arc;

use engine::{
    Acks, BinRef, BinWriter, Current, Deadline, Decision, ExistsPolicy, Expiry, GenerationPolicy,
    ManualClock, Namespace, NamespaceConfig, NativeValue, ReadRequest, RecordAddress, ReplySink,
    WriteRequest,
};
use model::{
    CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, Op, OpCode, ResultCode, TtlRequest, UserKey, VoidTime,
};

const START_UNIX_MS: u64 = (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000;
const STRING: u8 = 3;

fn namespace(max_record_size_bytes: u32) -> Namespace {
    let config = NamespaceConfig {
        max_record_size_bytes,
        allow_ttl_without_nsup: true,
        ..NamespaceConfig::with_defaults("test")
    };
    Namespace::new(config, Arc::new(ManualClock::new(START_UNIX_MS)))
}

fn address<'a>(set: &'a [u8], key: &'a [u8]) -> RecordAddress<'a> {
    RecordAddress {
        digest: Digest::compute(set, &UserKey::String(key)),
        set_name: set,
        key: Some((STRING, key)),
    }
}

/// The record's single bin value, or None.
fn value(ns: &Namespace, at: &RecordAddress<'_>) -> Option<Vec<u8>> {
    ns.view(at, |current| current.map(|c| first_value(&c)))
        .expect("same set")
}

fn first_value(current: &Current<'_>) -> Vec<u8> {
    current
        .bins()
        .iter()
        .next()
        .expect("one bin")
        .value
        .to_vec()
}

/// Adds `by` to the decimal number in bin "value", as Redis INCRBY does.
fn increment(ns: &Namespace, at: &RecordAddress<'_>, writer: &mut BinWriter, by: i64) -> i64 {
    ns.update(at, writer, &mut Acks::default(), |current, out| {
        let old: i64 = current.map_or(0, |c| {
            String::from_utf8(first_value(&c.get()))
                .expect("utf8")
                .parse()
                .expect("a number")
        });
        let new = old + by;
        out.bin(b"value", STRING, new.to_string().as_bytes());
        Ok((Decision::Store(Expiry::Keep), new))
    })
    .expect("increment succeeds")
}

#[test]
fn concurrent_increments_are_atomic() {
    let ns = Arc::new(namespace(1024 * 1024));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let ns = ns.clone();
            std::thread::spawn(move || {
                let mut writer = BinWriter::default();
                let at = address(b"redis", b"counter");
                for _ in 0..1000 {
                    increment(&ns, &at, &mut writer, 1);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("no panic");
    }
    assert_eq!(
        value(&ns, &address(b"redis", b"counter")),
        Some(b"4000".to_vec())
    );
    let generation = ns
        .view(&address(b"redis", b"counter"), |c| {
            c.map(|c| c.generation.0)
        })
        .expect("same set");
    assert_eq!(generation, Some(4000));
}

#[test]
fn keep_delete_and_an_empty_store_decide_what_happens() {
    let ns = namespace(1024 * 1024);
    let at = address(b"redis", b"k");
    let mut writer = BinWriter::default();
    increment(&ns, &at, &mut writer, 5);
    let kept: Result<u8, ResultCode> =
        ns.update(&at, &mut writer, &mut Acks::default(), |current, out| {
            assert!(current.is_some());
            out.bin(b"value", STRING, b"ignored");
            Ok((Decision::Keep, 1))
        });
    assert_eq!(kept, Ok(1));
    assert_eq!(value(&ns, &at), Some(b"5".to_vec()));
    let failed: Result<(), ResultCode> =
        ns.update(&at, &mut writer, &mut Acks::default(), |_, _| {
            Err(ResultCode::IncompatibleType)
        });
    assert_eq!(failed, Err(ResultCode::IncompatibleType));
    assert_eq!(value(&ns, &at), Some(b"5".to_vec()));
    ns.update(&at, &mut writer, &mut Acks::default(), |_, _| {
        Ok((Decision::Store(Expiry::Keep), ()))
    })
    .expect("storing no bins deletes");
    assert_eq!(value(&ns, &at), None);
    increment(&ns, &at, &mut writer, 1);
    ns.update(&at, &mut writer, &mut Acks::default(), |_, _| {
        Ok((Decision::Delete, ()))
    })
    .expect("delete");
    assert_eq!(value(&ns, &at), None);
    assert_eq!(ns.summary().objects, 0);
}

#[test]
fn expiry_key_set_and_size_rules() {
    let ns = namespace(64);
    let at = address(b"redis", b"k");
    let mut writer = BinWriter::default();
    let void_time = VoidTime::after(ns.now().epoch_seconds(), 100);
    ns.update(&at, &mut writer, &mut Acks::default(), |_, out| {
        out.bin(b"value", STRING, b"v");
        Ok((Decision::Store(Expiry::At(void_time)), ()))
    })
    .expect("store");
    let seen = ns
        .view(&at, |c| {
            c.map(|c| (c.void_time, c.user_key().map(|k| k.1.to_vec())))
        })
        .expect("same set");
    assert_eq!(seen, Some((void_time, Some(b"k".to_vec()))));
    increment_keeps_expiry(&ns, &at, &mut writer, void_time);
    let too_big: Result<(), ResultCode> =
        ns.update(&at, &mut writer, &mut Acks::default(), |_, out| {
            out.bin(b"value", STRING, &[b'x'; 100]);
            Ok((Decision::Store(Expiry::Never), ()))
        });
    assert_eq!(too_big, Err(ResultCode::RecordTooBig));
    let other_set = RecordAddress {
        set_name: b"other",
        ..at
    };
    assert_eq!(
        ns.view(&other_set, |c| c.is_some()),
        Err(ResultCode::Parameter)
    );
}

fn increment_keeps_expiry(
    ns: &Namespace,
    at: &RecordAddress<'_>,
    writer: &mut BinWriter,
    void_time: VoidTime,
) {
    ns.update(at, writer, &mut Acks::default(), |_, out| {
        out.bin(b"value", STRING, b"7");
        Ok((Decision::Store(Expiry::Keep), ()))
    })
    .expect("store");
    let after = ns.view(at, |c| c.map(|c| c.void_time)).expect("same set");
    assert_eq!(after, Some(void_time), "Expiry::Keep keeps the void time");
}

/// A native value for the tests: a list of bytes rendered as one BLOB bin, "items".
#[derive(Debug, Default)]
struct Items(Vec<u8>);

impl NativeValue for Items {
    fn write_bins(&self, out: &mut BinWriter) {
        out.bin(b"items", BLOB, &self.0);
    }

    fn size_bytes(&self) -> usize {
        self.0.len()
    }
}

const BLOB: u8 = 4;

/// Appends `byte` to the native Items at `at`, creating it; returns its length.
fn push(ns: &Namespace, at: &RecordAddress<'_>, writer: &mut BinWriter, byte: u8) -> usize {
    ns.update(at, writer, &mut Acks::default(), |current, _| {
        let Some(mut current) = current else {
            return Ok((
                Decision::StoreNative(Box::new(Items(vec![byte])), Expiry::Keep),
                1,
            ));
        };
        let native = current.native_mut().expect("a native record");
        let items = (native as &mut dyn Any)
            .downcast_mut::<Items>()
            .expect("Items");
        items.0.push(byte);
        Ok((Decision::Touch(Expiry::Keep), items.0.len()))
    })
    .expect("push")
}

struct Collect(Vec<(Vec<u8>, u8, Vec<u8>)>);

impl ReplySink for Collect {
    fn bin(&mut self, _op_code: OpCode, bin: BinRef<'_>) {
        self.0
            .push((bin.name.to_vec(), bin.particle_type, bin.value.to_vec()));
    }
}

#[test]
fn a_native_value_changes_in_place_and_reads_as_bins() {
    let ns = namespace(1024 * 1024);
    let at = address(b"redis", b"list");
    let mut writer = BinWriter::default();
    for byte in 1..=3 {
        assert_eq!(push(&ns, &at, &mut writer, byte), usize::from(byte));
    }
    let generation = ns.view(&at, |c| c.map(|c| c.generation.0)).expect("view");
    assert_eq!(generation, Some(3), "each change in place is a write");
    assert_eq!(value(&ns, &at), Some(vec![1, 2, 3]), "rendered bins");
    let key_bytes = 1 + 1 + b"list".len();
    assert_eq!(ns.summary().data_used_bytes, (key_bytes + 3) as u64);
    let mut sink = Collect(Vec::new());
    let request = ReadRequest {
        digest: at.digest,
        set_name: b"redis",
        key: None,
        read_all_bins: true,
        header_only: false,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
    };
    ns.read(&request, std::iter::empty(), &mut sink)
        .expect("read");
    assert_eq!(sink.0, vec![(b"items".to_vec(), BLOB, vec![1, 2, 3])]);
}

#[test]
fn a_native_value_emptied_in_place_and_deleted_leaves_no_bytes_counted() {
    let ns = namespace(1024 * 1024);
    let at = address(b"redis", b"list");
    let mut writer = BinWriter::default();
    for byte in 1..=3 {
        push(&ns, &at, &mut writer, byte);
    }
    assert!(ns.summary().data_used_bytes > 0);
    // As LPOP of the last elements does: empty the value in place, then delete the record.
    ns.update(&at, &mut writer, &mut Acks::default(), |current, _| {
        let mut current = current.expect("exists");
        let native = current.native_mut().expect("a native record");
        let items = (native as &mut dyn Any)
            .downcast_mut::<Items>()
            .expect("Items");
        items.0.clear();
        Ok((Decision::Delete, ()))
    })
    .expect("delete");
    assert_eq!(value(&ns, &at), None);
    assert_eq!(ns.summary().data_used_bytes, 0);
}

#[test]
fn an_aerospike_write_to_a_native_record_keeps_its_bins_packed() {
    let ns = namespace(1024 * 1024);
    let at = address(b"redis", b"list");
    let mut writer = BinWriter::default();
    push(&ns, &at, &mut writer, 9);
    let request = WriteRequest {
        digest: at.digest,
        set_name: b"redis",
        key: None,
        exists: ExistsPolicy::Update,
        generation: GenerationPolicy::None,
        ttl: TtlRequest::NeverExpire,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
        read_all_bins: false,
    };
    let op = Op {
        code: OpCode::Write,
        particle_type: STRING,
        bin_name: b"other",
        value: b"x",
    };
    ns.write(
        &request,
        std::iter::once(op),
        &mut Collect(Vec::new()),
        &mut Acks::default(),
    )
    .expect("write");
    let (native, bins) = ns
        .view(&at, |c| {
            let c = c.expect("exists");
            let bins: Vec<Vec<u8>> = c.bins().iter().map(|b| b.name.to_vec()).collect();
            (c.native().is_some(), bins)
        })
        .expect("view");
    assert!(!native, "an Aerospike write stores packed bins");
    assert_eq!(bins, vec![b"items".to_vec(), b"other".to_vec()]);
}

#[test]
fn a_watch_turns_dirty_on_any_write_to_its_key_only() {
    let ns = namespace(1024 * 1024);
    let at = address(b"redis", b"w");
    let other = address(b"redis", b"other");
    let mut writer = BinWriter::default();
    let watch = ns.watch(at.digest);
    increment(&ns, &other, &mut writer, 1);
    assert!(!watch.is_dirty(), "another key");
    let kept: () = ns
        .update(&at, &mut writer, &mut Acks::default(), |_, _| {
            Ok((Decision::Keep, ()))
        })
        .expect("keep");
    let () = kept;
    assert!(!watch.is_dirty(), "a decision to keep writes nothing");
    increment(&ns, &at, &mut writer, 1);
    assert!(watch.is_dirty(), "an update");
    let watch = ns.watch(at.digest);
    ns.update(&at, &mut writer, &mut Acks::default(), |_, _| {
        Ok((Decision::Delete, ()))
    })
    .expect("delete");
    assert!(watch.is_dirty(), "a delete");
    let absent = ns.watch(at.digest);
    let elsewhere = address(b"other-set", b"w2");
    increment(&ns, &elsewhere, &mut writer, 1);
    let in_another_set = ns.watch(elsewhere.digest);
    increment(&ns, &other, &mut writer, 1);
    let removed = ns.watch(other.digest);
    ns.truncate(Some(b"redis"), None).expect("truncate");
    assert!(removed.is_dirty(), "a truncate that removes the key");
    // As Redis's FLUSHDB: a watched key it does not remove stays clean.
    assert!(!absent.is_dirty(), "a truncate where the key did not exist");
    assert!(!in_another_set.is_dirty(), "a truncate of another set");
    ns.truncate(None, None).expect("truncate");
    assert!(in_another_set.is_dirty(), "a truncate of the namespace");
}

#[test]
fn an_exclusive_section_holds_off_other_commands() {
    let ns = Arc::new(namespace(1024 * 1024));
    let at = address(b"redis", b"x");
    let writer_thread = ns.exclusive(|| {
        let thread = {
            let ns = Arc::clone(&ns);
            std::thread::spawn(move || {
                increment(
                    &ns,
                    &address(b"redis", b"x"),
                    &mut BinWriter::default(),
                    100,
                )
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut writer = BinWriter::default();
        // Inside the section: two commands see only each other.
        assert_eq!(increment(&ns, &at, &mut writer, 1), 1);
        assert_eq!(increment(&ns, &at, &mut writer, 1), 2);
        thread
    });
    assert_eq!(writer_thread.join().expect("thread"), 102);
}

/// Flips byte `at` of bin "value" in place; returns whether the record offered its bin.
fn flip_in_place(
    ns: &Namespace,
    at: &RecordAddress<'_>,
    writer: &mut BinWriter,
    byte: usize,
) -> bool {
    ns.update(at, writer, &mut Acks::default(), |current, _| {
        let mut current = current.expect("the record exists");
        let Some(bin) = current.packed_bin_mut(b"value") else {
            return Ok((Decision::Keep, false));
        };
        bin.value[byte] ^= 0xff;
        *bin.particle_type = BLOB;
        Ok((Decision::Touch(Expiry::Keep), true))
    })
    .expect("update succeeds")
}

/// Stores the string "abcd" in bin "value".
fn store_abcd(ns: &Namespace, at: &RecordAddress<'_>, writer: &mut BinWriter) {
    ns.update(at, writer, &mut Acks::default(), |_, out| {
        out.bin(b"value", STRING, b"abcd");
        Ok((Decision::Store(Expiry::Keep), ()))
    })
    .expect("stored");
}

#[test]
fn a_packed_bin_changes_in_place_and_counts_as_a_write() {
    let ns = namespace(1024 * 1024);
    let at = address(b"redis", b"bitmap");
    let mut writer = BinWriter::default();
    store_abcd(&ns, &at, &mut writer);
    let generation = |ns: &Namespace| {
        ns.view(&at, |c| c.expect("exists").generation)
            .expect("view")
    };
    let before = generation(&ns);
    assert!(flip_in_place(&ns, &at, &mut writer, 1));
    assert_eq!(value(&ns, &at), Some(vec![b'a', !b'b', b'c', b'd']));
    let particle = ns
        .view(&at, |c| {
            c.expect("exists")
                .bins()
                .iter()
                .next()
                .expect("a bin")
                .particle_type
        })
        .expect("view");
    assert_eq!(particle, BLOB);
    assert_ne!(generation(&ns), before, "a change in place is a write");
}

#[test]
fn no_bin_changes_in_place_while_a_secondary_index_exists() {
    use engine::{IndexCollection, IndexDefinition, IndexKind, IndexSource};
    let ns = namespace(1024 * 1024);
    let at = address(b"redis", b"bitmap");
    let mut writer = BinWriter::default();
    store_abcd(&ns, &at, &mut writer);
    let definition = IndexDefinition {
        name: "by_value".to_owned(),
        set_name: Some(b"redis".to_vec()),
        source: IndexSource::Bin(b"value".to_vec()),
        kind: IndexKind::String,
        collection: IndexCollection::Default,
    };
    let (index, _) = ns.create_index(definition).expect("created");
    ns.build_index(&index);
    assert!(
        !flip_in_place(&ns, &at, &mut writer, 1),
        "the index would miss the change"
    );
    assert_eq!(value(&ns, &at), Some(b"abcd".to_vec()));
}
