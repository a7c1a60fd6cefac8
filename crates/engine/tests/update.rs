//! Read-modify-write by closure (`Namespace::update`) and reads by closure (`Namespace::view`),
//! as the Redis front end uses them.

use std::sync::Arc;

use engine::{
    BinWriter, Current, Decision, Expiry, ManualClock, Namespace, NamespaceConfig, RecordAddress,
};
use model::{CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, ResultCode, UserKey, VoidTime};

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
    current.bins().next().expect("one bin").value.to_vec()
}

/// Adds `by` to the decimal number in bin "value", as Redis INCRBY does.
fn increment(ns: &Namespace, at: &RecordAddress<'_>, writer: &mut BinWriter, by: i64) -> i64 {
    ns.update(at, writer, |current, out| {
        let old: i64 = current.map_or(0, |c| {
            String::from_utf8(first_value(&c))
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
    let kept: Result<u8, ResultCode> = ns.update(&at, &mut writer, |current, out| {
        assert!(current.is_some());
        out.bin(b"value", STRING, b"ignored");
        Ok((Decision::Keep, 1))
    });
    assert_eq!(kept, Ok(1));
    assert_eq!(value(&ns, &at), Some(b"5".to_vec()));
    let failed: Result<(), ResultCode> =
        ns.update(&at, &mut writer, |_, _| Err(ResultCode::IncompatibleType));
    assert_eq!(failed, Err(ResultCode::IncompatibleType));
    assert_eq!(value(&ns, &at), Some(b"5".to_vec()));
    ns.update(&at, &mut writer, |_, _| {
        Ok((Decision::Store(Expiry::Keep), ()))
    })
    .expect("storing no bins deletes");
    assert_eq!(value(&ns, &at), None);
    increment(&ns, &at, &mut writer, 1);
    ns.update(&at, &mut writer, |_, _| Ok((Decision::Delete, ())))
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
    ns.update(&at, &mut writer, |_, out| {
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
    let too_big: Result<(), ResultCode> = ns.update(&at, &mut writer, |_, out| {
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
    ns.update(at, writer, |_, out| {
        out.bin(b"value", STRING, b"7");
        Ok((Decision::Store(Expiry::Keep), ()))
    })
    .expect("store");
    let after = ns.view(at, |c| c.map(|c| c.void_time)).expect("same set");
    assert_eq!(after, Some(void_time), "Expiry::Keep keeps the void time");
}
