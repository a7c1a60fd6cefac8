//! The target over the engine's request entry points: a sequence of reads, writes (put and
//! operate with every record-exists and generation policy, TTLs and key fields), deletes,
//! clock moves and expiry sweeps on a few records, checked against a model.
//!
//! Invariants the target asserts, beyond "no panic":
//! - Every request gets the result code the model predicts (Aerospike's order of checks:
//!   ops, request shape, key field, record-exists policy, generation, key, then the ops).
//! - After every step each record reads back exactly as the model holds it: bins in order,
//!   generation and void time; a failed request changed nothing.
//! - The namespace counts exactly the records the model has not seen reclaimed.

use std::collections::BTreeMap;

use engine::{
    Acks, DeleteRequest, ExistsPolicy, GenerationPolicy, ManualClock, Namespace, ReadRequest,
    WriteRequest,
};
use model::{Generation, Op, OpCode, ParticleType, ResultCode, TtlRequest, VoidTime};

use crate::fixture::{self, Collect, OwnedBin};
use crate::input::Input;
use crate::particle;

/// Records the target touches: few, so that operations meet on the same ones.
const KEY_COUNT: u8 = 4;

/// Most ops one write carries.
const OPS_PER_WRITE_MAX: usize = 4;

/// Most steps one input runs; each step reads every record back.
const STEPS_MAX: usize = 64;

/// Bin names most ops use, so that ops meet on the same bins.
const BIN_NAMES: [&[u8]; 3] = [b"a", b"b", b"c"];

const EXISTS_POLICIES: [ExistsPolicy; 5] = [
    ExistsPolicy::Update,
    ExistsPolicy::UpdateOnly,
    ExistsPolicy::Replace,
    ExistsPolicy::ReplaceOnly,
    ExistsPolicy::CreateOnly,
];

/// A record as the model holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ModelRecord {
    bins: Vec<OwnedBin>,
    generation: Generation,
    void_time: VoidTime,
    /// The KEY field stored with it: particle type, then the key bytes.
    key: Option<Vec<u8>>,
}

/// The records, including expired ones not yet reclaimed, and the time in seconds since 2010.
struct Model {
    records: BTreeMap<u8, ModelRecord>,
    now_seconds: u32,
}

impl Model {
    fn live(&self, key: u8) -> Option<&ModelRecord> {
        let now = self.now_seconds;
        self.records
            .get(&key)
            .filter(|record| !record.void_time.is_expired_at(now))
    }
}

/// One request's parts, borrowed from the input.
struct Write<'a> {
    key: u8,
    exists: ExistsPolicy,
    generation: GenerationPolicy,
    ttl: TtlRequest,
    key_field: Option<Vec<u8>>,
    respond_all_ops: bool,
    ops: Vec<Op<'a>>,
}

/// Target `engine_ops`: each step's first byte picks a request, the bytes after it its parts.
pub fn engine_ops(data: &[u8]) {
    let mut input = Input::new(data);
    let (namespace, clock) = fixture::namespace();
    let mut model = Model {
        records: BTreeMap::new(),
        now_seconds: epoch_seconds(fixture::START_UNIX_MS),
    };
    for _ in 0..STEPS_MAX {
        if input.is_empty() {
            break;
        }
        match input.byte() % 8 {
            0..=3 => step_write(&namespace, &mut model, &mut input),
            4 => step_delete(&namespace, &mut model, &mut input),
            5 => step_read(&namespace, &mut model, &mut input),
            6 => step_clock(&clock, &mut model, &mut input),
            _ => {
                namespace.sweep_expired();
                let now = model.now_seconds;
                model
                    .records
                    .retain(|_, record| !record.void_time.is_expired_at(now));
            }
        }
        check_everything(&namespace, &model);
    }
}

fn epoch_seconds(unix_ms: u64) -> u32 {
    let seconds = unix_ms / 1000 - model::CITRUSLEAF_EPOCH_UNIX_SECONDS;
    u32::try_from(seconds).expect("the start is within u32 seconds of 2010")
}

fn step_write(namespace: &Namespace, model: &mut Model, input: &mut Input<'_>) {
    let write = read_write(input);
    let request = WriteRequest {
        digest: fixture::digest(write.key),
        set_name: fixture::SET_NAME,
        key: write.key_field.as_deref(),
        exists: write.exists,
        generation: write.generation,
        ttl: write.ttl,
        respond_all_ops: write.respond_all_ops,
        deadline: engine::Deadline::NONE,
        filter: None,
        read_all_bins: false,
    };
    let got = namespace.write(
        &request,
        write.ops.iter().copied(),
        &mut Collect::default(),
        &mut Acks::default(),
    );
    let expected = predict_write(model, &write);
    let context = format!(
        "write {:?} {:?} {:?}",
        write.exists, write.generation, write.ops
    );
    match expected {
        Ok(Some(record)) => {
            let meta = got.unwrap_or_else(|code| panic!("{context}: {code:?}"));
            assert_eq!(
                (meta.generation, meta.void_time),
                (record.generation, record.void_time)
            );
            model.records.insert(write.key, record);
        }
        Ok(None) => {
            assert!(got.is_ok(), "{context}: {got:?}, expected a delete");
            model.records.remove(&write.key);
        }
        Err(code) => assert_eq!(got.map(|_| ()), Err(code), "{context}"),
    }
}

fn read_write<'a>(input: &mut Input<'a>) -> Write<'a> {
    let key = input.byte() % KEY_COUNT;
    let exists = input.pick(&EXISTS_POLICIES);
    let generation = read_generation_policy(input);
    let ttl = match input.byte() % 5 {
        0 => TtlRequest::NamespaceDefault,
        1 => TtlRequest::NeverExpire,
        2 => TtlRequest::Unchanged,
        _ => TtlRequest::Seconds(1 + u32::from(input.byte() % 4)),
    };
    let key_field = read_key_field(input);
    let flags = input.byte();
    let op_count = 1 + input.below(OPS_PER_WRITE_MAX);
    let ops = (0..op_count).map(|_| read_op(input)).collect();
    Write {
        key,
        exists,
        generation,
        ttl,
        key_field,
        respond_all_ops: flags & 1 == 1,
        ops,
    }
}

fn read_generation_policy(input: &mut Input<'_>) -> GenerationPolicy {
    match input.byte() % 4 {
        0 => GenerationPolicy::Equal(u32::from(input.byte() % 4)),
        1 => GenerationPolicy::Greater(u32::from(input.byte() % 4)),
        _ => GenerationPolicy::None,
    }
}

/// No key, an integer or string key of one of a few values, or any bytes.
fn read_key_field(input: &mut Input<'_>) -> Option<Vec<u8>> {
    match input.byte() % 6 {
        0 | 1 => None,
        2 => {
            let mut field = vec![ParticleType::Integer as u8];
            field.extend_from_slice(&i64::from(input.byte() % 2).to_be_bytes());
            Some(field)
        }
        3 | 4 => Some(vec![
            ParticleType::String as u8,
            b'k',
            b'0' + input.byte() % 2,
        ]),
        _ => Some(input.short_bytes().to_vec()),
    }
}

/// CDT payloads that are not an op: empty, a reserved byte, an array without an op code, an
/// empty array.
const MALFORMED_CDT_PAYLOADS: [&[u8]; 4] = [b"", b"\xc1", b"\x91\xc0", b"\x90"];

fn read_op<'a>(input: &mut Input<'a>) -> Op<'a> {
    let code = match input.byte() % 10 {
        0 | 1 => OpCode::Write,
        2 => OpCode::Read,
        3 => OpCode::Incr,
        4 => OpCode::Append,
        5 => OpCode::Prepend,
        6 => OpCode::Touch,
        7 => OpCode::Delete,
        8 => OpCode::CdtModify,
        _ => OpCode::Write,
    };
    let name_choice = input.byte();
    let bin_name = match name_choice % 8 {
        0 if code == OpCode::Read => b"",
        7 => input.short_bytes(),
        choice => BIN_NAMES[usize::from(choice) % BIN_NAMES.len()],
    };
    let particle_type = match input.byte() % 4 {
        0 => ParticleType::Integer as u8,
        1 => ParticleType::String as u8,
        2 => ParticleType::Null as u8,
        _ => particle::not_geojson(input.byte()),
    };
    let value = match particle_type {
        // A list or map op with a payload that is no op at all: the model does not predict
        // collection semantics (the `cdt` targets and unit tests do), only that such an op is
        // refused before the record changes.
        _ if code == OpCode::CdtModify => input.pick(&MALFORMED_CDT_PAYLOADS),
        1 if input.byte().is_multiple_of(2) => &[0, 0, 0, 0, 0, 0, 0, 1][..],
        _ => input.short_bytes(),
    };
    let no_bin = matches!(code, OpCode::Touch | OpCode::Delete);
    Op {
        code,
        particle_type: if no_bin { 0 } else { particle_type },
        bin_name: if no_bin { b"" } else { bin_name },
        value: if no_bin { b"" } else { value },
    }
}

/// What the model predicts for a write: the record after it (`None`: the write deleted it),
/// or the result code of the first check that fails.
fn predict_write(model: &Model, write: &Write<'_>) -> Result<Option<ModelRecord>, ResultCode> {
    let summary = check_ops(&write.ops)?;
    let replaces = matches!(
        write.exists,
        ExistsPolicy::Replace | ExistsPolicy::ReplaceOnly
    );
    if !summary.has_write
        || (summary.has_read_all && write.respond_all_ops)
        || (replaces && summary.has_non_replace_op)
    {
        return Err(ResultCode::Parameter);
    }
    check_key_field(write.key_field.as_deref())?;
    let existing = model.live(write.key);
    let requires_record = matches!(
        write.exists,
        ExistsPolicy::UpdateOnly | ExistsPolicy::ReplaceOnly
    );
    match existing {
        None if requires_record || summary.has_touch => return Err(ResultCode::NotFound),
        Some(_) if write.exists == ExistsPolicy::CreateOnly => {
            return Err(ResultCode::RecordExists);
        }
        _ => {}
    }
    if let Some(record) = existing {
        check_generation(write.generation, record)?;
        check_key(write.key_field.as_deref(), record)?;
    }
    let mut bins = match existing {
        Some(record) if !replaces => record.bins.clone(),
        _ => Vec::new(),
    };
    for op in &write.ops {
        bins = match op.code {
            OpCode::Read | OpCode::Touch => bins,
            OpCode::Delete => Vec::new(),
            _ => particle::apply_checked(bins, op)?,
        };
    }
    if bins.is_empty() {
        return match existing {
            Some(_) => Ok(None),
            None => Err(ResultCode::NotFound),
        };
    }
    let void_time = match (write.ttl, existing) {
        (TtlRequest::Unchanged, Some(record)) => record.void_time,
        (TtlRequest::Seconds(seconds), _) => VoidTime::after(model.now_seconds, seconds),
        _ => VoidTime::NEVER,
    };
    Ok(Some(ModelRecord {
        bins,
        generation: existing.map_or(Generation::FIRST, |record| record.generation.next()),
        void_time,
        key: existing
            .and_then(|record| record.key.clone())
            .or_else(|| write.key_field.clone()),
    }))
}

/// What the engine's pre-pass over the ops learns.
#[derive(Default)]
struct OpsSummary {
    has_write: bool,
    has_touch: bool,
    has_read_all: bool,
    has_non_replace_op: bool,
}

fn check_ops(ops: &[Op<'_>]) -> Result<OpsSummary, ResultCode> {
    let mut summary = OpsSummary::default();
    for op in ops {
        match op.code {
            OpCode::Read if op.bin_name.is_empty() => summary.has_read_all = true,
            OpCode::Read | OpCode::Delete => {}
            OpCode::Touch => summary.has_touch = true,
            OpCode::Write | OpCode::Incr | OpCode::Append | OpCode::Prepend => {
                particle::check_op(op)?;
                summary.has_non_replace_op |=
                    op.code == OpCode::Write && op.particle_type == ParticleType::Null as u8;
            }
            OpCode::CdtModify => {
                let name = op.bin_name;
                if name.is_empty() || name.len() > model::BIN_NAME_BYTES_MAX || name.contains(&0) {
                    return Err(ResultCode::BinName);
                }
                return Err(ResultCode::Parameter);
            }
            _ => return Err(ResultCode::UnsupportedFeature),
        }
        summary.has_write |= op.code.is_write();
        summary.has_non_replace_op |= !matches!(op.code, OpCode::Read | OpCode::Write);
    }
    Ok(summary)
}

/// A KEY field must be a key particle type with a value that type allows.
fn check_key_field(field: Option<&[u8]>) -> Result<(), ResultCode> {
    let Some(field) = field else {
        return Ok(());
    };
    let valid = match field.split_first() {
        Some((&1, bytes)) => bytes.len() == 8,
        Some((&3 | &4, _)) => true,
        _ => false,
    };
    if valid {
        Ok(())
    } else {
        Err(ResultCode::Parameter)
    }
}

fn check_generation(policy: GenerationPolicy, record: &ModelRecord) -> Result<(), ResultCode> {
    let stored = u32::from(record.generation.0);
    match policy {
        GenerationPolicy::Equal(expected) if expected != stored => Err(ResultCode::Generation),
        GenerationPolicy::Greater(sent) if sent <= stored => Err(ResultCode::Generation),
        _ => Ok(()),
    }
}

fn check_key(field: Option<&[u8]>, record: &ModelRecord) -> Result<(), ResultCode> {
    match (field, &record.key) {
        (Some(sent), Some(stored)) if sent != stored.as_slice() => Err(ResultCode::KeyMismatch),
        _ => Ok(()),
    }
}

fn step_delete(namespace: &Namespace, model: &mut Model, input: &mut Input<'_>) {
    let key = input.byte() % KEY_COUNT;
    let generation = read_generation_policy(input);
    let key_field = read_key_field(input);
    let request = DeleteRequest {
        digest: fixture::digest(key),
        set_name: fixture::SET_NAME,
        key: key_field.as_deref(),
        generation,
        deadline: engine::Deadline::NONE,
        filter: None,
    };
    let got = namespace.delete(&request, &mut Acks::default()).map(|_| ());
    let expected = check_key_field(key_field.as_deref()).and_then(|()| {
        let record = model.live(key).ok_or(ResultCode::NotFound)?;
        check_generation(generation, record)?;
        check_key(key_field.as_deref(), record)
    });
    assert_eq!(got, expected, "delete {generation:?} {key_field:?}");
    if expected.is_ok() {
        model.records.remove(&key);
    }
}

fn step_read(namespace: &Namespace, model: &mut Model, input: &mut Input<'_>) {
    let key = input.byte() % KEY_COUNT;
    let key_field = read_key_field(input);
    let name = input.pick(&BIN_NAMES);
    let op = Op {
        code: OpCode::Read,
        particle_type: 0,
        bin_name: name,
        value: b"",
    };
    let request = ReadRequest {
        digest: fixture::digest(key),
        set_name: b"",
        key: key_field.as_deref(),
        respond_all_ops: false,
        read_all_bins: false,
        header_only: false,
        deadline: engine::Deadline::NONE,
        filter: None,
    };
    let mut sink = Collect::default();
    let got = namespace.read(&request, std::iter::once(op), &mut sink);
    let expected = check_key_field(key_field.as_deref()).and_then(|()| {
        let record = model.live(key).ok_or(ResultCode::NotFound)?;
        check_key(key_field.as_deref(), record)?;
        Ok(record)
    });
    match expected {
        Ok(record) => {
            let meta = got.unwrap_or_else(|code| panic!("read {key_field:?}: {code:?}"));
            assert_eq!(meta.generation, record.generation);
            let wanted: Vec<OwnedBin> = record
                .bins
                .iter()
                .filter(|(bin_name, _, _)| bin_name == name)
                .cloned()
                .collect();
            assert_eq!(sink.0, wanted, "bin {name:?}");
        }
        Err(code) => assert_eq!(got.map(|_| ()), Err(code), "read {key_field:?}"),
    }
}

fn step_clock(clock: &ManualClock, model: &mut Model, input: &mut Input<'_>) {
    let seconds = input.byte() % 4;
    clock.advance_ms(u64::from(seconds) * 1000);
    model.now_seconds += u32::from(seconds);
}

/// Every record reads back as the model holds it, and the namespace counts what it keeps.
fn check_everything(namespace: &Namespace, model: &Model) {
    for key in 0..KEY_COUNT {
        let got = fixture::read_all(namespace, fixture::digest(key));
        match model.live(key) {
            Some(record) => {
                let (meta, bins) = got.unwrap_or_else(|code| panic!("record {key}: {code:?}"));
                assert_eq!(bins, record.bins, "record {key}");
                assert_eq!(meta.generation, record.generation, "record {key}");
                assert_eq!(meta.void_time, record.void_time, "record {key}");
            }
            None => assert_eq!(got.map(|_| ()), Err(ResultCode::NotFound), "record {key}"),
        }
    }
    let stored = model.records.len() as u64;
    assert_eq!(namespace.summary().objects, stored, "objects");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_then_a_read_agree_with_the_model() {
        // Step 0 (write): key 1, update, no generation check, TTL 2 s, no key field, flags 0,
        // one op: write integer 1 to bin "a". Then read it, move the clock 3 s, sweep.
        let data = [
            0, 1, 0, 2, 3, 1, 0, 0, 0, 1, 0, 0, 0, //
            5, 1, 0, 1, //
            6, 3, //
            7,
        ];
        engine_ops(&data);
    }
}
