//! Randomized model test: the engine against a `HashMap` model of Aerospike's rules.
//!
//! A seeded generator issues puts under every record-exists policy, increments, appends,
//! deletes, touches and reads over a small key space, moves a manual clock forward and runs the
//! sweeper. After every step the engine's result code, bins, generation and void time must match
//! the model, and the object and per-set counters must match the model's record count.
//! The seed is printed; `SEED=<n> cargo test -p engine --test model_fuzz` replays a failure.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use engine::{
    Acks, BinRef, Deadline, DeleteRequest, ExistsPolicy, GenerationPolicy, ManualClock, Namespace,
    NamespaceConfig, ReadRequest, ReplySink, WriteRequest,
};
use model::{
    CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, Generation, Op, OpCode, ParticleType, ResultCode,
    TtlRequest, UserKey, VoidTime,
};

const KEY_COUNT: u64 = 12;
const STEPS: usize = 4_000;
const START_EPOCH_SECONDS: u32 = 500_000;

/// xorshift64*: small, seedable, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Int(i64),
    Str(Vec<u8>),
}

#[derive(Clone, Debug)]
struct ModelRecord {
    bins: BTreeMap<Vec<u8>, Value>,
    generation: u16,
    void_time: u32,
}

#[derive(Default)]
struct Model {
    records: HashMap<u64, ModelRecord>,
    now: u32,
}

impl Model {
    fn live(&self, key: u64) -> Option<&ModelRecord> {
        self.records
            .get(&key)
            .filter(|r| r.void_time == 0 || r.void_time > self.now)
    }

    fn void_time(&self, ttl: Option<u32>, existing: Option<u32>) -> u32 {
        match (ttl, existing) {
            (None, Some(existing)) => existing,
            (None, None) | (Some(0), _) => 0,
            (Some(seconds), _) => self.now + seconds,
        }
    }
}

#[derive(Default)]
struct Collect(Vec<(Vec<u8>, u8, Vec<u8>)>);

impl ReplySink for Collect {
    fn bin(&mut self, _op_code: OpCode, bin: BinRef<'_>) {
        self.0
            .push((bin.name.to_vec(), bin.particle_type, bin.value.to_vec()));
    }
}

const BIN_NAMES: [&[u8]; 3] = [b"a", b"b", b"c"];

fn digest(key: u64) -> Digest {
    Digest::compute(b"fuzz", &UserKey::Integer(key as i64))
}

fn decode(bins: Vec<(Vec<u8>, u8, Vec<u8>)>) -> BTreeMap<Vec<u8>, Value> {
    bins.into_iter()
        .map(|(name, particle_type, value)| {
            let value = match particle_type {
                1 => Value::Int(i64::from_be_bytes(
                    value.try_into().expect("stored integers are 8 bytes"),
                )),
                3 => Value::Str(value),
                other => panic!("unexpected particle type {other}"),
            };
            (name, value)
        })
        .collect()
}

#[test]
fn engine_matches_the_model_under_random_operations() {
    let seed = common::seed("model_fuzz");
    let mut rng = Rng(seed);
    let clock = Arc::new(ManualClock::new(
        (CITRUSLEAF_EPOCH_UNIX_SECONDS + u64::from(START_EPOCH_SECONDS)) * 1000,
    ));
    let namespace = Namespace::new(NamespaceConfig::with_defaults("fuzz"), clock.clone());
    let mut model = Model {
        now: START_EPOCH_SECONDS,
        ..Model::default()
    };
    for step in 0..STEPS {
        let key = rng.below(KEY_COUNT);
        let context = format!("seed {seed} step {step} key {key}");
        match rng.below(10) {
            0..=3 => put(&namespace, &mut model, &mut rng, key, &context),
            4 => incr_or_append(&namespace, &mut model, &mut rng, key, &context),
            5 => delete(&namespace, &mut model, key, &context),
            6 => touch(&namespace, &mut model, &mut rng, key, &context),
            7 => {
                let seconds = rng.below(3);
                clock.advance_ms(seconds * 1000);
                model.now += seconds as u32;
            }
            8 => {
                namespace.sweep_expired();
                let now = model.now;
                model
                    .records
                    .retain(|_, r| r.void_time == 0 || r.void_time > now);
            }
            _ => {}
        }
        check_read(&namespace, &model, key, &context);
        let summary = namespace.summary();
        assert_eq!(
            summary.objects,
            model.records.len() as u64,
            "objects, {context}"
        );
        let set_objects = namespace.sets().first().map_or(0, |set| set.objects);
        assert_eq!(
            set_objects,
            model.records.len() as u64,
            "set objects, {context}"
        );
    }
}

fn ttl_choice(rng: &mut Rng) -> (TtlRequest, Option<u32>) {
    match rng.below(4) {
        0 => (TtlRequest::NamespaceDefault, Some(0)),
        1 => (TtlRequest::Unchanged, None),
        2 => (TtlRequest::NeverExpire, Some(0)),
        _ => {
            let seconds = 1 + rng.below(4) as u32;
            (TtlRequest::Seconds(seconds), Some(seconds))
        }
    }
}

fn request(key: u64, exists: ExistsPolicy, ttl: TtlRequest) -> WriteRequest<'static> {
    WriteRequest {
        digest: digest(key),
        set_name: b"fuzz",
        key: None,
        exists,
        generation: GenerationPolicy::None,
        ttl,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
        read_all_bins: false,
    }
}

fn put(namespace: &Namespace, model: &mut Model, rng: &mut Rng, key: u64, context: &str) {
    let exists = [
        ExistsPolicy::Update,
        ExistsPolicy::UpdateOnly,
        ExistsPolicy::Replace,
        ExistsPolicy::ReplaceOnly,
        ExistsPolicy::CreateOnly,
    ][rng.below(5) as usize];
    let (ttl, model_ttl) = ttl_choice(rng);
    let name = BIN_NAMES[rng.below(3) as usize];
    let value = rng.below(100) as i64;
    let bytes = value.to_be_bytes();
    let op = Op {
        code: OpCode::Write,
        particle_type: 1,
        bin_name: name,
        value: &bytes,
    };
    let result = namespace.write(
        &request(key, exists, ttl),
        [op].into_iter(),
        &mut Collect::default(),
        &mut Acks::default(),
    );
    let existing = model.live(key).cloned();
    let expected = match (&existing, exists) {
        (None, ExistsPolicy::UpdateOnly | ExistsPolicy::ReplaceOnly) => Err(ResultCode::NotFound),
        (Some(_), ExistsPolicy::CreateOnly) => Err(ResultCode::RecordExists),
        _ => {
            let mut bins = match (&existing, exists) {
                (Some(r), ExistsPolicy::Update | ExistsPolicy::UpdateOnly) => r.bins.clone(),
                _ => BTreeMap::new(),
            };
            bins.insert(name.to_vec(), Value::Int(value));
            let record = ModelRecord {
                bins,
                generation: existing
                    .as_ref()
                    .map_or(1, |r| Generation(r.generation).next().0),
                void_time: model.void_time(model_ttl, existing.as_ref().map(|r| r.void_time)),
            };
            Ok((record.generation, record.void_time, record))
        }
    };
    compare_write(model, key, result, expected, context);
}

fn incr_or_append(
    namespace: &Namespace,
    model: &mut Model,
    rng: &mut Rng,
    key: u64,
    context: &str,
) {
    let name = BIN_NAMES[rng.below(3) as usize];
    let delta = rng.below(10) as i64;
    let delta_bytes = delta.to_be_bytes();
    let append = rng.below(2) == 0;
    let op = if append {
        Op {
            code: OpCode::Append,
            particle_type: ParticleType::String as u8,
            bin_name: name,
            value: b"x",
        }
    } else {
        Op {
            code: OpCode::Incr,
            particle_type: 1,
            bin_name: name,
            value: &delta_bytes,
        }
    };
    let request = request(key, ExistsPolicy::Update, TtlRequest::Unchanged);
    let result = namespace.write(
        &request,
        [op].into_iter(),
        &mut Collect::default(),
        &mut Acks::default(),
    );
    let existing = model.live(key).cloned();
    let mut bins = existing
        .as_ref()
        .map(|r| r.bins.clone())
        .unwrap_or_default();
    let updated = match (bins.get(name), append) {
        (None, true) => Ok(Value::Str(b"x".to_vec())),
        (Some(Value::Str(s)), true) => Ok(Value::Str([s.as_slice(), b"x"].concat())),
        (None, false) => Ok(Value::Int(delta)),
        (Some(Value::Int(i)), false) => Ok(Value::Int(i + delta)),
        _ => Err(ResultCode::IncompatibleType),
    };
    let expected = updated.map(|value| {
        bins.insert(name.to_vec(), value);
        let record = ModelRecord {
            bins,
            generation: existing
                .as_ref()
                .map_or(1, |r| Generation(r.generation).next().0),
            void_time: model.void_time(None, existing.as_ref().map(|r| r.void_time)),
        };
        (record.generation, record.void_time, record)
    });
    compare_write(model, key, result, expected, context);
}

fn touch(namespace: &Namespace, model: &mut Model, rng: &mut Rng, key: u64, context: &str) {
    let (ttl, model_ttl) = ttl_choice(rng);
    let op = Op {
        code: OpCode::Touch,
        particle_type: 0,
        bin_name: b"",
        value: b"",
    };
    let request = request(key, ExistsPolicy::Update, ttl);
    let result = namespace.write(
        &request,
        [op].into_iter(),
        &mut Collect::default(),
        &mut Acks::default(),
    );
    let expected = match model.live(key).cloned() {
        None => Err(ResultCode::NotFound),
        Some(existing) => {
            let record = ModelRecord {
                generation: Generation(existing.generation).next().0,
                void_time: model.void_time(model_ttl, Some(existing.void_time)),
                bins: existing.bins,
            };
            Ok((record.generation, record.void_time, record))
        }
    };
    compare_write(model, key, result, expected, context);
}

fn compare_write(
    model: &mut Model,
    key: u64,
    result: Result<engine::RecordMeta, ResultCode>,
    expected: Result<(u16, u32, ModelRecord), ResultCode>,
    context: &str,
) {
    match expected {
        Ok((generation, void_time, record)) => {
            let meta =
                result.unwrap_or_else(|code| panic!("expected success, got {code:?}, {context}"));
            assert_eq!(
                meta.generation,
                Generation(generation),
                "generation, {context}"
            );
            assert_eq!(meta.void_time, VoidTime(void_time), "void time, {context}");
            model.records.insert(key, record);
        }
        Err(code) => assert_eq!(result.err(), Some(code), "result code, {context}"),
    }
}

fn delete(namespace: &Namespace, model: &mut Model, key: u64, context: &str) {
    let request = DeleteRequest {
        digest: digest(key),
        set_name: b"fuzz",
        key: None,
        generation: GenerationPolicy::None,
        deadline: Deadline::NONE,
        filter: None,
    };
    let result = namespace.delete(&request, &mut Acks::default());
    if model.live(key).is_some() {
        assert!(result.is_ok(), "delete of a live record, {context}");
        model.records.remove(&key);
    } else {
        assert_eq!(
            result.err(),
            Some(ResultCode::NotFound),
            "delete of a missing record, {context}"
        );
    }
}

fn check_read(namespace: &Namespace, model: &Model, key: u64, context: &str) {
    let request = ReadRequest {
        digest: digest(key),
        set_name: b"fuzz",
        key: None,
        respond_all_ops: false,
        read_all_bins: true,
        header_only: false,
        deadline: Deadline::NONE,
        filter: None,
    };
    let mut sink = Collect::default();
    let result = namespace.read(&request, std::iter::empty(), &mut sink);
    match model.live(key) {
        None => assert_eq!(result.err(), Some(ResultCode::NotFound), "read, {context}"),
        Some(record) => {
            let meta = result.unwrap_or_else(|code| panic!("read failed with {code:?}, {context}"));
            assert_eq!(
                meta.generation,
                Generation(record.generation),
                "read generation, {context}"
            );
            assert_eq!(decode(sink.0), record.bins, "read bins, {context}");
        }
    }
}
