//! Single-record transactions: read, write (put, operate, touch) and delete.
//!
//! Each runs under its partition's lock from the first look at the record to the last change,
//! so an `operate` is atomic: it applies every op or, on the first failing op, none.
//! Checks run in the Aerospike server's order (`write.c` `write_master`): record-exists policy,
//! generation, set, key; then the ops; then the record size and TTL.
//!
//! Results stream into a [`ReplySink`] while the lock is held, so replies are encoded straight
//! from the stored record without copying it. On an error the caller discards what the sink got.

use model::{
    Digest, Generation, Op, OpCode, ParticleType, ResultCode, SET_NAME_BYTES_MAX, TtlRequest,
    UserKey, VoidTime,
};

use crate::ack::Acks;
use crate::bin_lookup::BinFinder;
use crate::clock::Now;
use crate::commit::WriteAccess;
use crate::deadline::{Deadline, DeadlineWatch};
use crate::exp::{Expression, RecordFacts};
use crate::filter::{StoredView, facts_of};
use crate::namespace::Namespace;
use crate::ops::{self, OpsSummary};
use crate::persist::Loaded;
use crate::record::{self, BinRef, Record, RecordHeader};
use crate::stats::{Counter, Origin};
use crate::working_record::WorkingRecord;

/// Receives result bins, in op order, while a transaction runs.
pub trait ReplySink {
    /// One result: a bin read, or with `respond_all_ops` an empty entry for a write op
    /// (particle type 0, no value). `op_code` is the op that produced it.
    fn bin(&mut self, op_code: OpCode, bin: BinRef<'_>);
}

/// What a successful transaction reports about the record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMeta {
    /// Generation after the transaction (0 after a delete).
    pub generation: Generation,
    /// Void time after the transaction (0 after a delete).
    pub void_time: VoidTime,
    /// Last-update time after the transaction, in milliseconds since the Unix epoch (0 after
    /// a delete).
    pub last_update_ms: u64,
}

impl RecordMeta {
    pub(crate) const DELETED: RecordMeta = RecordMeta {
        generation: Generation(0),
        void_time: VoidTime::NEVER,
        last_update_ms: 0,
    };

    pub(crate) fn of(record: &Record) -> RecordMeta {
        RecordMeta {
            generation: record.generation,
            void_time: record.void_time,
            last_update_ms: record.last_update_ms,
        }
    }

    /// The TTL of the last write, in seconds (its void time less its last-update time);
    /// `None` for a record that never expires.
    pub fn write_ttl_seconds(&self) -> Option<u32> {
        if self.void_time == VoidTime::NEVER {
            return None;
        }
        let written = Now {
            unix_ms: self.last_update_ms,
        }
        .epoch_seconds();
        Some(self.void_time.0.saturating_sub(written))
    }

    /// Aerospike's read-touch rule: a read asking for `percent` (1 to 100) of the last write's
    /// TTL touches a record once its remaining TTL is within that share of it, resetting the
    /// TTL to the last write's. Returns that TTL when a touch is due at `now`.
    pub fn read_touch_due(&self, percent: u32, now: Now) -> Option<u32> {
        let write_ttl = self.write_ttl_seconds()?;
        let threshold = u32::try_from(u64::from(write_ttl) * u64::from(percent) / 100).ok()?;
        let touch_from = self.void_time.0.saturating_sub(threshold);
        (now.epoch_seconds() >= touch_from).then_some(write_ttl)
    }
}

/// A read: all bins, header only, or the bins named by the READ ops passed alongside.
#[derive(Clone, Copy, Debug)]
pub struct ReadRequest<'a> {
    /// The record.
    pub digest: Digest,
    /// The set named in the request (empty = not checked).
    pub set_name: &'a [u8],
    /// The KEY field as sent, if any; checked against a stored key.
    pub key: Option<&'a [u8]>,
    /// Answer every READ op, with an empty entry for a missing bin (info2 RESPOND_ALL_OPS).
    pub respond_all_ops: bool,
    /// Return every bin (info1 GET_ALL).
    pub read_all_bins: bool,
    /// Return no bins (info1 GET_NO_BINS): exists and get-header.
    pub header_only: bool,
    /// When the client stops waiting: past it the read ends with TIMEOUT.
    pub deadline: Deadline,
    /// A filter expression (FILTER_EXP): an existing record it does not pass is left alone
    /// and the command answers FILTERED_OUT (27).
    pub filter: Option<&'a Expression>,
}

/// The record-exists policy of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExistsPolicy {
    /// Create or merge bins into the existing record.
    Update,
    /// The record must exist; merge bins.
    UpdateOnly,
    /// Create, or replace every bin of the existing record.
    Replace,
    /// The record must exist; replace every bin.
    ReplaceOnly,
    /// The record must not exist.
    CreateOnly,
}

impl ExistsPolicy {
    fn replaces_bins(self) -> bool {
        matches!(self, ExistsPolicy::Replace | ExistsPolicy::ReplaceOnly)
    }

    fn requires_record(self) -> bool {
        matches!(self, ExistsPolicy::UpdateOnly | ExistsPolicy::ReplaceOnly)
    }
}

/// The generation condition of a write or delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenerationPolicy {
    /// No condition.
    None,
    /// Apply only if the stored generation equals this one.
    Equal(u32),
    /// Apply only if this generation is greater than the stored one.
    Greater(u32),
}

/// A write: put, operate or touch, with its ops passed alongside.
#[derive(Clone, Copy, Debug)]
pub struct WriteRequest<'a> {
    /// The record.
    pub digest: Digest,
    /// The set named in the request (empty = no set).
    pub set_name: &'a [u8],
    /// The KEY field as sent: particle type byte, then the key bytes.
    pub key: Option<&'a [u8]>,
    /// Record-exists policy.
    pub exists: ExistsPolicy,
    /// Generation condition.
    pub generation: GenerationPolicy,
    /// Requested TTL.
    pub ttl: TtlRequest,
    /// Return one result per op, in order (info2 RESPOND_ALL_OPS).
    pub respond_all_ops: bool,
    /// info1 GET_ALL: a READ op with no bin name returns every bin (without it, it names the
    /// bin "", which a record never has: Aerospike's `op_is_read_all`).
    pub read_all_bins: bool,
    /// When the client stops waiting: past it the write ends with TIMEOUT, changing nothing.
    pub deadline: Deadline,
    /// A filter expression (FILTER_EXP): an existing record it does not pass is left alone
    /// and the command answers FILTERED_OUT (27).
    pub filter: Option<&'a Expression>,
}

/// A delete.
#[derive(Clone, Copy, Debug)]
pub struct DeleteRequest<'a> {
    /// The record.
    pub digest: Digest,
    /// The set named in the request (empty = not checked).
    pub set_name: &'a [u8],
    /// The KEY field as sent, if any.
    pub key: Option<&'a [u8]>,
    /// Generation condition.
    pub generation: GenerationPolicy,
    /// When the client stops waiting: past it, before the delete starts, TIMEOUT.
    pub deadline: Deadline,
    /// A filter expression (FILTER_EXP): an existing record it does not pass is left alone
    /// and the command answers FILTERED_OUT (27).
    pub filter: Option<&'a Expression>,
}

impl Namespace {
    /// Reads a record.
    ///
    /// # Errors
    /// NOT_FOUND for a missing or expired record; PARAMETER for a set mismatch or a modifying
    /// op; UNSUPPORTED_FEATURE for collection, bit, HLL or expression reads.
    pub fn read<'a>(
        &self,
        request: &ReadRequest<'a>,
        ops: impl Iterator<Item = Op<'a>> + Clone,
        sink: &mut impl ReplySink,
    ) -> Result<RecordMeta, ResultCode> {
        self.read_as(Origin::Client, request, ops, sink)
    }

    /// [`Namespace::read`], counted in `origin`'s statistics (a batch row's own counters).
    ///
    /// # Errors
    /// As [`Namespace::read`].
    pub fn read_as<'a>(
        &self,
        origin: Origin,
        request: &ReadRequest<'a>,
        ops: impl Iterator<Item = Op<'a>> + Clone,
        sink: &mut impl ReplySink,
    ) -> Result<RecordMeta, ResultCode> {
        let slot = self.slot(&request.digest);
        let result = self.read_locked(request, ops, sink);
        let outcome = match result {
            Ok(_) => Counter::ReadSuccess,
            Err(ResultCode::NotFound) => Counter::ReadNotFound,
            Err(ResultCode::Timeout) => Counter::ReadTimeout,
            Err(_) => Counter::ReadError,
        };
        slot.counters.add(origin.counter(outcome), 1);
        result
    }

    fn read_locked<'a>(
        &self,
        request: &ReadRequest<'a>,
        ops: impl Iterator<Item = Op<'a>> + Clone,
        sink: &mut impl ReplySink,
    ) -> Result<RecordMeta, ResultCode> {
        let now = self.clock.now();
        let mut deadline = DeadlineWatch::start(request.deadline, &*self.clock, now)?;
        let summary = ops::summarize(ops.clone())?;
        if summary.has_write {
            return Err(ResultCode::Parameter);
        }
        let request_key = request.key.map(parse_key).transpose()?;
        let access = self.read_access(&request.digest, now)?;
        let record = access
            .partition
            .live(&request.digest, &access.visibility)
            .ok_or(ResultCode::NotFound)?;
        self.check_set(request.set_name, record)?;
        if request.filter.is_some() {
            let loaded = self.load(&request.digest, record)?;
            self.check_filter(request.filter, &request.digest, &loaded, now)?;
        }
        if request.header_only {
            check_key(request_key, record)?;
            return Ok(RecordMeta::of(record));
        }
        let record = self.load(&request.digest, record)?;
        check_key(request_key, &record)?;
        let bins = record.bins();
        if request.read_all_bins || summary.has_read_all {
            for bin in bins.iter() {
                deadline.step()?;
                sink.bin(OpCode::Read, bin);
            }
        } else {
            let mut finder = BinFinder::new(bins.iter());
            for op in ops {
                deadline.step()?;
                if op.code == OpCode::ExpRead {
                    let view = StoredView {
                        record: &record,
                        bins: record.bins(),
                        digest: &request.digest,
                        set_name: self.sets.name_of(record.set_id).unwrap_or_default(),
                        now,
                    };
                    let (particle_type, value) = ops::read_expression(&op, &view)?;
                    send_result(sink, &op, particle_type, &value, request.respond_all_ops);
                    continue;
                }
                if matches!(op.code, OpCode::CdtRead | OpCode::BitRead | OpCode::HllRead) {
                    let bin = finder.find(op.bin_name);
                    let stored = bin.map(|bin| (bin.particle_type, bin.value));
                    let (particle_type, value) = ops::read_module(&op, stored)?;
                    send_result(sink, &op, particle_type, &value, request.respond_all_ops);
                    continue;
                }
                match finder.find(op.bin_name) {
                    Some(bin) => sink.bin(OpCode::Read, bin),
                    None if request.respond_all_ops => sink.bin(op.code, empty_result(op.bin_name)),
                    None => {}
                }
            }
        }
        Ok(RecordMeta::of(&record))
    }

    /// Writes a record: applies `ops` in order, atomically.
    ///
    /// # Errors
    /// The Aerospike result code of the first check or op that fails; the record is then
    /// unchanged.
    pub fn write<'a>(
        &self,
        request: &WriteRequest<'a>,
        ops: impl Iterator<Item = Op<'a>> + Clone,
        sink: &mut impl ReplySink,
        acks: &mut Acks,
    ) -> Result<RecordMeta, ResultCode> {
        self.write_as(Origin::Client, request, ops, sink, acks)
    }

    /// [`Namespace::write`], counted in `origin`'s statistics.
    ///
    /// # Errors
    /// As [`Namespace::write`].
    pub fn write_as<'a>(
        &self,
        origin: Origin,
        request: &WriteRequest<'a>,
        ops: impl Iterator<Item = Op<'a>> + Clone,
        sink: &mut impl ReplySink,
        acks: &mut Acks,
    ) -> Result<RecordMeta, ResultCode> {
        let result = self.write_locked(request, ops, sink, acks);
        let outcome = match result {
            Ok(_) => Counter::WriteSuccess,
            Err(ResultCode::Timeout) => Counter::WriteTimeout,
            Err(_) => Counter::WriteError,
        };
        self.slot(&request.digest)
            .counters
            .add(origin.counter(outcome), 1);
        result
    }

    fn write_locked<'a>(
        &self,
        request: &WriteRequest<'a>,
        ops: impl Iterator<Item = Op<'a>> + Clone,
        sink: &mut impl ReplySink,
        acks: &mut Acks,
    ) -> Result<RecordMeta, ResultCode> {
        let now = self.clock.now();
        let mut deadline = DeadlineWatch::start(request.deadline, &*self.clock, now)?;
        let summary = ops::summarize(ops.clone())?;
        check_write_shape(request, &summary)?;
        let request_key = request.key.map(parse_key).transpose()?;
        let WriteAccess {
            visibility,
            slot,
            mut partition,
            ..
        } = self.write_access(&request.digest, now)?;
        let existing = partition.live(&request.digest, &visibility);
        match existing {
            None if request.exists.requires_record() || summary.has_touch => {
                return Err(ResultCode::NotFound);
            }
            Some(_) if request.exists == ExistsPolicy::CreateOnly => {
                return Err(ResultCode::RecordExists);
            }
            _ => {}
        }
        // A replace with the key in hand needs nothing of the old version but its metadata,
        // so with data on the device it is not read back (nor is the key compared).
        let reads_old =
            !request.exists.replaces_bins() || request_key.is_none() || request.filter.is_some();
        let existing = match existing {
            Some(record) if reads_old => Some(self.load(&request.digest, record)?),
            Some(record) => Some(Loaded::Indexed(record)),
            None => None,
        };
        let existing = existing.as_deref();
        if let Some(record) = existing {
            check_generation(request.generation, record)?;
            self.check_set(request.set_name, record)?;
            check_key(request_key, record)?;
            self.check_filter(request.filter, &request.digest, record, now)?;
        }
        let set_id = match existing {
            Some(record) => record.set_id,
            None => self.sets.id_or_create(request.set_name)?,
        };
        let existing_bins = existing
            .filter(|_| !request.exists.replaces_bins())
            .map(Record::bins);
        let mut working = match &existing_bins {
            Some(bins) => WorkingRecord::from_bins(bins.iter()),
            None => WorkingRecord::default(),
        };
        let set_name = self.sets.name_of(set_id).unwrap_or_default();
        let facts = match existing {
            Some(record) => facts_of(record, &request.digest, set_name, now),
            None => RecordFacts {
                last_update_ms: 0,
                void_time_epoch_s: 0,
                now_ms: now.unix_ms,
                set_name,
                digest: &request.digest.0,
                key: request_key,
                size_bytes: 0,
            },
        };
        // Past its deadline, the write returns here with nothing stored: the ops changed only
        // the working copy.
        apply_ops(&mut working, ops, request, facts, sink, &mut deadline)?;
        // Aerospike's `write_master_bin_ops` checks the count the ops leave, not each step.
        if working.bin_count() > self.config.max_bins_per_record as usize {
            return Err(ResultCode::Parameter);
        }
        if working.is_empty() {
            drop(working);
            return match existing {
                Some(_) => {
                    self.unstore(&mut partition, &request.digest, acks)?;
                    self.watches.touched(&request.digest);
                    Ok(RecordMeta::DELETED)
                }
                None => Err(ResultCode::NotFound),
            };
        }
        let key = existing
            .filter(|record| record.has_data())
            .and_then(Record::user_key)
            .or(request_key);
        let size_bytes = record::encoded_size_bytes(key, working.iter());
        if size_bytes > self.config.max_record_size_bytes as usize {
            return Err(ResultCode::RecordTooBig);
        }
        let header = RecordHeader {
            last_update_ms: self.last_update_ms_for(set_id, now),
            void_time: self.void_time_for(request.ttl, existing.map(|r| r.void_time), now)?,
            generation: existing.map_or(Generation::FIRST, |r| r.generation.next()),
            set_id,
        };
        let data = record::encode(key, working.iter(), size_bytes);
        drop(working);
        let stored = Record::new(header, data);
        let meta = RecordMeta::of(&stored);
        let replaced = self.store(&mut partition, request.digest, stored, acks)?;
        self.watches.touched(&request.digest);
        if let Some(replaced) = replaced {
            // An invisible record the write replaced still counts as expired or truncated.
            if replaced.void_time.is_expired_at(now.epoch_seconds()) {
                slot.counters.add(Counter::ExpiredObjects, 1);
            } else if visibility.truncated(&replaced) {
                slot.counters.add(Counter::TruncatedObjects, 1);
            }
        }
        Ok(meta)
    }

    /// Deletes a record.
    ///
    /// # Errors
    /// NOT_FOUND if it does not exist or has expired; GENERATION, PARAMETER (set mismatch) or
    /// KEY_MISMATCH when a condition fails.
    pub fn delete(
        &self,
        request: &DeleteRequest<'_>,
        acks: &mut Acks,
    ) -> Result<RecordMeta, ResultCode> {
        self.delete_as(Origin::Client, request, acks)
    }

    /// [`Namespace::delete`], counted in `origin`'s statistics.
    ///
    /// # Errors
    /// As [`Namespace::delete`].
    pub fn delete_as(
        &self,
        origin: Origin,
        request: &DeleteRequest<'_>,
        acks: &mut Acks,
    ) -> Result<RecordMeta, ResultCode> {
        let result = self.delete_locked(request, acks);
        let outcome = match result {
            Ok(_) => Counter::DeleteSuccess,
            Err(ResultCode::NotFound) => Counter::DeleteNotFound,
            Err(ResultCode::Timeout) => Counter::DeleteTimeout,
            Err(_) => Counter::DeleteError,
        };
        self.slot(&request.digest)
            .counters
            .add(origin.counter(outcome), 1);
        result
    }

    fn delete_locked(
        &self,
        request: &DeleteRequest<'_>,
        acks: &mut Acks,
    ) -> Result<RecordMeta, ResultCode> {
        let now = self.clock.now();
        // A delete's work is constant once started: one look at the deadline suffices.
        DeadlineWatch::start(request.deadline, &*self.clock, now)?;
        let request_key = request.key.map(parse_key).transpose()?;
        let mut access = self.write_access(&request.digest, now)?;
        let record = access
            .partition
            .live(&request.digest, &access.visibility)
            .ok_or(ResultCode::NotFound)?;
        check_generation(request.generation, record)?;
        self.check_set(request.set_name, record)?;
        check_key(request_key, record)?;
        if request.filter.is_some() {
            let loaded = self.load(&request.digest, record)?;
            self.check_filter(request.filter, &request.digest, &loaded, now)?;
        }
        self.unstore(&mut access.partition, &request.digest, acks)?;
        self.watches.touched(&request.digest);
        Ok(RecordMeta::DELETED)
    }

    /// Aerospike's `set_name_check`: a request naming a set must name the record's set.
    pub(crate) fn check_set(&self, set_name: &[u8], record: &Record) -> Result<(), ResultCode> {
        if set_name.is_empty() {
            return Ok(());
        }
        // Compares with the record's own set by id: O(1), however many sets exist.
        match self.sets.name_of(record.set_id) {
            Some(record_set) if record_set == set_name => Ok(()),
            _ => Err(ResultCode::Parameter),
        }
    }

    pub(crate) fn void_time_for(
        &self,
        ttl: TtlRequest,
        existing: Option<VoidTime>,
        now: Now,
    ) -> Result<VoidTime, ResultCode> {
        let ttl_seconds = match (ttl, existing) {
            (TtlRequest::NeverExpire, _) => return Ok(VoidTime::NEVER),
            (TtlRequest::Unchanged, Some(void_time)) => return Ok(void_time),
            (TtlRequest::Seconds(seconds), _) => seconds,
            (TtlRequest::NamespaceDefault | TtlRequest::Unchanged, _) => {
                self.config.default_ttl_seconds
            }
        };
        // Aerospike's `is_ttl_disallowed`: without a sweeper, expiring records would pile up.
        let sweeper_off = self.config.nsup_period_seconds == 0;
        if ttl_seconds > 0 && sweeper_off && !self.config.allow_ttl_without_nsup {
            return Err(ResultCode::Forbidden);
        }
        Ok(VoidTime::after(now.epoch_seconds(), ttl_seconds))
    }
}

/// Runs the ops of a write in order; reads see the bins as the earlier ops left them. Each op,
/// and each bin a read-all op sends, is a step of `deadline`.
fn apply_ops<'w, 'a: 'w>(
    working: &mut WorkingRecord<'w>,
    ops: impl Iterator<Item = Op<'a>>,
    request: &WriteRequest<'_>,
    facts: RecordFacts<'_>,
    sink: &mut impl ReplySink,
    deadline: &mut DeadlineWatch<'_>,
) -> Result<(), ResultCode> {
    let respond_all_ops = request.respond_all_ops;
    for op in ops {
        deadline.step()?;
        match op.code {
            OpCode::Read if op.bin_name.is_empty() && request.read_all_bins => {
                for bin in working.iter() {
                    deadline.step()?;
                    sink.bin(op.code, bin);
                }
            }
            OpCode::Read => match working.get(op.bin_name) {
                Some(bin) => sink.bin(op.code, bin),
                None if respond_all_ops => sink.bin(op.code, empty_result(op.bin_name)),
                None => {}
            },
            OpCode::Touch => {
                if respond_all_ops {
                    sink.bin(op.code, empty_result(op.bin_name));
                }
            }
            OpCode::ExpRead => {
                let view = ops::WorkingView { working, facts };
                let (particle_type, value) = ops::read_expression(&op, &view)?;
                send_result(sink, &op, particle_type, &value, respond_all_ops);
            }
            OpCode::ExpModify => {
                ops::write_expression(working, &op, facts)?;
                if respond_all_ops {
                    sink.bin(op.code, empty_result(op.bin_name));
                }
            }
            OpCode::CdtRead
            | OpCode::CdtModify
            | OpCode::BitRead
            | OpCode::BitModify
            | OpCode::HllRead
            | OpCode::HllModify => {
                let (particle_type, value) = ops::apply_module(working, &op)?;
                send_result(sink, &op, particle_type, &value, respond_all_ops);
            }
            _ => {
                ops::apply_modify(working, &op)?;
                if respond_all_ops {
                    sink.bin(op.code, empty_result(op.bin_name));
                }
            }
        }
    }
    Ok(())
}

/// Sends an op's result (a NULL one only when every op answers).
fn send_result(
    sink: &mut impl ReplySink,
    op: &Op<'_>,
    particle_type: u8,
    value: &[u8],
    respond_all_ops: bool,
) {
    if particle_type == ParticleType::Null as u8 && !respond_all_ops {
        return;
    }
    let result = BinRef {
        name: op.bin_name,
        particle_type,
        value,
    };
    sink.bin(op.code, result);
}

fn empty_result(name: &[u8]) -> BinRef<'_> {
    BinRef {
        name,
        particle_type: ParticleType::Null as u8,
        value: &[],
    }
}

/// Rules on which ops a write may combine, from Aerospike's `write.c`.
fn check_write_shape(request: &WriteRequest<'_>, summary: &OpsSummary) -> Result<(), ResultCode> {
    if !summary.has_write {
        return Err(ResultCode::Parameter);
    }
    if request.set_name.len() > SET_NAME_BYTES_MAX {
        return Err(ResultCode::Parameter);
    }
    if summary.has_read_all && request.respond_all_ops {
        return Err(ResultCode::Parameter);
    }
    if request.exists.replaces_bins() && summary.has_non_replace_op {
        return Err(ResultCode::Parameter);
    }
    Ok(())
}

/// Validates the KEY field: a key particle type and, for integers, exactly 8 bytes.
pub(crate) fn parse_key(field: &[u8]) -> Result<(u8, &[u8]), ResultCode> {
    let (&particle_type, bytes) = field.split_first().ok_or(ResultCode::Parameter)?;
    UserKey::from_particle(particle_type, bytes).ok_or(ResultCode::Parameter)?;
    Ok((particle_type, bytes))
}

/// KEY_MISMATCH when the request's key is not the stored one; not checked when the record's
/// data is on the device only and was not read (a delete, a replace, a header read).
pub(crate) fn check_key(
    request_key: Option<(u8, &[u8])>,
    record: &Record,
) -> Result<(), ResultCode> {
    if request_key.is_none() || !record.has_data() {
        return Ok(());
    }
    match (request_key, record.user_key()) {
        (Some(sent), Some(stored)) if sent != stored => Err(ResultCode::KeyMismatch),
        _ => Ok(()),
    }
}

fn check_generation(policy: GenerationPolicy, record: &Record) -> Result<(), ResultCode> {
    let stored = u32::from(record.generation.0);
    match policy {
        GenerationPolicy::Equal(expected) if expected != stored => Err(ResultCode::Generation),
        GenerationPolicy::Greater(sent) if sent <= stored => Err(ResultCode::Generation),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::CITRUSLEAF_EPOCH_UNIX_SECONDS;

    /// Aerospike's example: a write with a TTL of 10 hours and a read asking for 80% touches
    /// from 2 hours after the write (8 hours before its end), not before.
    #[test]
    fn a_read_touch_is_due_once_the_remaining_ttl_is_within_the_percent() {
        const HOUR_S: u64 = 3600;
        let written = Now {
            unix_ms: (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000,
        };
        let meta = RecordMeta {
            generation: Generation(1),
            void_time: VoidTime(written.epoch_seconds() + 10 * 3600),
            last_update_ms: written.unix_ms,
        };
        let at = |after_s: u64| Now {
            unix_ms: written.unix_ms + after_s * 1000,
        };
        assert_eq!(meta.write_ttl_seconds(), Some(36_000));
        assert_eq!(meta.read_touch_due(80, at(2 * HOUR_S - 1)), None);
        assert_eq!(meta.read_touch_due(80, at(2 * HOUR_S)), Some(36_000));
        assert_eq!(meta.read_touch_due(100, at(0)), Some(36_000));
        assert_eq!(meta.read_touch_due(1, at(9 * HOUR_S)), None);
        let forever = RecordMeta {
            void_time: VoidTime::NEVER,
            ..meta
        };
        assert_eq!(forever.read_touch_due(100, at(HOUR_S)), None);
    }
}
