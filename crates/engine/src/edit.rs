//! A record edited by code that runs under its partition's lock: a record UDF. The editor
//! sees the record's bins and metadata, stages bin writes, and commits them with `update` (or
//! `create`), or deletes the record with `remove`; when it returns, what it committed is
//! stored as one write, as Aerospike's `udf_record` does.
//!
//! Invariants:
//! - Nothing the editor does reaches the record until it returns: staged bins live in the
//!   [`RecordEdit`], and only the last committed set of bins is written.
//! - A commit that would break a record rule (a bin name, the bin count, the record size)
//!   fails that commit and leaves the previous one in force; the editor is told.
//! - The edit holds the partition's write lock throughout, like any write.

use model::{BIN_NAME_BYTES_MAX, Digest, Generation, ResultCode, TtlRequest};

use crate::ack::Acks;
use crate::clock::Now;
use crate::deadline::{Deadline, DeadlineWatch};
use crate::exp::{Expression, RecordFacts};
use crate::filter::facts_of;
use crate::namespace::Namespace;
use crate::record::{self, BinRef, Record, RecordHeader};
use crate::stats::{Counter, Origin};
use crate::transaction::RecordMeta;

/// Which record an edit is for, and its conditions.
#[derive(Clone, Copy, Debug)]
pub struct EditRequest<'a> {
    /// The record.
    pub digest: Digest,
    /// The set named in the request (empty = not checked; the set of a record created).
    pub set_name: &'a [u8],
    /// The KEY field as sent: particle type byte, then the key bytes.
    pub key: Option<&'a [u8]>,
    /// A filter expression: an existing record it does not pass answers FILTERED_OUT.
    pub filter: Option<&'a Expression>,
    /// When the client stops waiting.
    pub deadline: Deadline,
    /// The TTL the command asks for, applied to what the editor writes unless it sets one.
    pub ttl: TtlRequest,
}

/// One bin: name, particle type, bytes.
type OwnedBin = (Vec<u8>, u8, Vec<u8>);

/// What the editor decided.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Unchanged,
    Write(Vec<OwnedBin>),
    Delete,
}

/// The record as an editor sees and changes it.
#[derive(Debug)]
pub struct RecordEdit {
    exists: bool,
    bins: Vec<OwnedBin>,
    generation: Generation,
    last_update_ms: u64,
    void_time_epoch_s: u64,
    now_ms: u64,
    set_name: Vec<u8>,
    digest: Digest,
    key: Option<(u8, Vec<u8>)>,
    size_bytes: u64,
    ttl: Option<u32>,
    outcome: Outcome,
    bins_max: usize,
    record_size_max: usize,
}

impl RecordEdit {
    /// Whether the record exists (after the editor's own create or remove).
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// A bin as it stands, staged writes included.
    pub fn bin(&self, name: &[u8]) -> Option<(u8, &[u8])> {
        self.bins
            .iter()
            .find(|(bin, _, _)| bin == name)
            .map(|(_, particle_type, value)| (*particle_type, value.as_slice()))
    }

    /// The names of the bins, in order.
    pub fn bin_names(&self) -> impl Iterator<Item = &[u8]> {
        self.bins.iter().map(|(name, _, _)| name.as_slice())
    }

    /// Stages a bin write (`None`: removes the bin). A GeoJSON value is stored with its cells
    /// (so geo indexes find it); one that is not valid GeoJSON fails the commit.
    pub fn set_bin(&mut self, name: &[u8], value: Option<(u8, Vec<u8>)>) {
        let value = value.map(|(particle_type, bytes)| match particle_type {
            GEOJSON => (GEOJSON, crate::geo::stored_form(&bytes).unwrap_or(bytes)),
            _ => (particle_type, bytes),
        });
        let position = self.bins.iter().position(|(bin, _, _)| bin == name);
        match (position, value) {
            (Some(at), None) => {
                self.bins.remove(at);
            }
            (Some(at), Some((particle_type, bytes))) => {
                self.bins[at].1 = particle_type;
                self.bins[at].2 = bytes;
            }
            (None, Some((particle_type, bytes))) => {
                self.bins.push((name.to_vec(), particle_type, bytes));
            }
            (None, None) => {}
        }
    }

    /// The metadata an expression or `record.*` function reads.
    pub fn facts(&self) -> RecordFacts<'_> {
        RecordFacts {
            last_update_ms: self.last_update_ms,
            void_time_epoch_s: self.void_time_epoch_s,
            now_ms: self.now_ms,
            set_name: &self.set_name,
            digest: &self.digest.0,
            key: self.key.as_ref().map(|(t, k)| (*t, k.as_slice())),
            size_bytes: self.size_bytes,
        }
    }

    /// The generation (0 for a record that does not exist).
    pub fn generation(&self) -> u16 {
        self.generation.0
    }

    /// Sets the TTL (seconds; Aerospike's special values too) the next write applies.
    pub fn set_ttl(&mut self, ttl: u32) {
        self.ttl = Some(ttl);
    }

    /// Commits the staged bins as the record's, creating it if needed.
    ///
    /// # Errors
    /// BIN_NAME, PARAMETER (too many bins) or RECORD_TOO_BIG; the previous commit stands.
    pub fn update(&mut self) -> Result<(), ResultCode> {
        self.check_commit()?;
        self.outcome = Outcome::Write(self.bins.clone());
        self.exists = true;
        Ok(())
    }

    /// Commits the staged bins as a new record.
    ///
    /// # Errors
    /// RECORD_EXISTS when the record exists; else as [`RecordEdit::update`].
    pub fn create(&mut self) -> Result<(), ResultCode> {
        if self.exists {
            return Err(ResultCode::RecordExists);
        }
        self.update()
    }

    /// Deletes the record.
    ///
    /// # Errors
    /// NOT_FOUND when it does not exist.
    pub fn remove(&mut self) -> Result<(), ResultCode> {
        if !self.exists {
            return Err(ResultCode::NotFound);
        }
        self.outcome = Outcome::Delete;
        self.exists = false;
        self.bins.clear();
        Ok(())
    }

    fn check_commit(&self) -> Result<(), ResultCode> {
        let names_ok = self
            .bins
            .iter()
            .all(|(name, _, _)| !name.is_empty() && name.len() <= BIN_NAME_BYTES_MAX);
        if !names_ok {
            return Err(ResultCode::BinName);
        }
        if self.bins.len() > self.bins_max {
            return Err(ResultCode::Parameter);
        }
        let geo_valid = self
            .bins
            .iter()
            .filter(|(_, particle_type, _)| *particle_type == GEOJSON)
            .all(|(_, _, bytes)| crate::geo::geometry_of_particle(bytes).is_ok());
        if !geo_valid {
            return Err(ResultCode::GeoInvalidGeojson);
        }
        let key = self.key.as_ref().map(|(t, k)| (*t, k.as_slice()));
        if record::encoded_size_bytes(key, bin_refs(&self.bins)) > self.record_size_max {
            return Err(ResultCode::RecordTooBig);
        }
        Ok(())
    }
}

/// The GeoJSON particle type.
const GEOJSON: u8 = model::ParticleType::GeoJson as u8;

fn bin_refs(bins: &[OwnedBin]) -> impl Iterator<Item = BinRef<'_>> + Clone {
    bins.iter().map(|(name, particle_type, value)| BinRef {
        name,
        particle_type: *particle_type,
        value,
    })
}

impl Namespace {
    /// Edits one record under its partition's write lock: `editor` sees it as a
    /// [`RecordEdit`]; what it committed is then stored (or the record deleted).
    ///
    /// # Errors
    /// TIMEOUT past the deadline; PARAMETER for a set mismatch; KEY_MISMATCH; FILTERED_OUT;
    /// the storage's errors. The editor's own failures are its result, `T`.
    pub fn edit<T>(
        &self,
        origin: Origin,
        request: &EditRequest<'_>,
        acks: &mut Acks,
        editor: impl FnOnce(&mut RecordEdit) -> T,
    ) -> Result<(T, RecordMeta), ResultCode> {
        let result = self.edit_locked(request, acks, editor);
        let outcome = match &result {
            Ok(_) => Counter::WriteSuccess,
            Err(ResultCode::Timeout) => Counter::WriteTimeout,
            Err(_) => Counter::WriteError,
        };
        self.slot(&request.digest)
            .counters
            .add(origin.counter(outcome), 1);
        result
    }

    fn edit_locked<T>(
        &self,
        request: &EditRequest<'_>,
        acks: &mut Acks,
        editor: impl FnOnce(&mut RecordEdit) -> T,
    ) -> Result<(T, RecordMeta), ResultCode> {
        let now = self.clock.now();
        DeadlineWatch::start(request.deadline, &*self.clock, now)?;
        let request_key = request.key.map(crate::transaction::parse_key).transpose()?;
        let mut access = self.write_access(&request.digest, now)?;
        let existing = access.partition.live(&request.digest, &access.visibility);
        let loaded = existing
            .map(|record| self.load(&request.digest, record))
            .transpose()?;
        let loaded = loaded.as_deref();
        if let Some(record) = loaded {
            self.check_set(request.set_name, record)?;
            crate::transaction::check_key(request_key, record)?;
            self.check_filter(request.filter, &request.digest, record, now)?;
        }
        let mut edit = self.record_edit(request, loaded, request_key, now);
        let result = editor(&mut edit);
        let meta = match std::mem::replace(&mut edit.outcome, Outcome::Unchanged) {
            Outcome::Unchanged => loaded.map_or(RecordMeta::DELETED, RecordMeta::of),
            Outcome::Delete => {
                self.unstore(&mut access.partition, &request.digest, acks)?;
                self.watches.touched(&request.digest);
                RecordMeta::DELETED
            }
            Outcome::Write(bins) => {
                let stored = self.edited_record(request, loaded, &edit, &bins, now)?;
                let meta = RecordMeta::of(&stored);
                self.store(&mut access.partition, request.digest, stored, acks)?;
                self.watches.touched(&request.digest);
                meta
            }
        };
        Ok((result, meta))
    }

    /// The edit's starting point: the record's bins and metadata, or an empty record.
    fn record_edit(
        &self,
        request: &EditRequest<'_>,
        record: Option<&Record>,
        request_key: Option<(u8, &[u8])>,
        now: Now,
    ) -> RecordEdit {
        let set_name = record
            .and_then(|r| self.sets.name_of(r.set_id))
            .unwrap_or(request.set_name);
        let facts = record.map(|r| facts_of(r, &request.digest, set_name, now));
        let bins = record.map_or_else(Vec::new, |r| {
            r.bins()
                .iter()
                .map(|bin| (bin.name.to_vec(), bin.particle_type, bin.value.to_vec()))
                .collect()
        });
        let key = facts.and_then(|f| f.key).or(request_key);
        RecordEdit {
            exists: record.is_some(),
            bins,
            generation: record.map_or(Generation(0), |r| r.generation),
            last_update_ms: facts.map_or(0, |f| f.last_update_ms),
            void_time_epoch_s: facts.map_or(0, |f| f.void_time_epoch_s),
            now_ms: now.unix_ms,
            set_name: set_name.to_vec(),
            digest: request.digest,
            key: key.map(|(t, k)| (t, k.to_vec())),
            size_bytes: facts.map_or(0, |f| f.size_bytes),
            ttl: None,
            outcome: Outcome::Unchanged,
            bins_max: self.config.max_bins_per_record as usize,
            record_size_max: self.config.max_record_size_bytes as usize,
        }
    }

    /// The record an edit's committed bins make.
    fn edited_record(
        &self,
        request: &EditRequest<'_>,
        existing: Option<&Record>,
        edit: &RecordEdit,
        bins: &[OwnedBin],
        now: Now,
    ) -> Result<Record, ResultCode> {
        let set_id = match existing {
            Some(record) => record.set_id,
            None => self.sets.id_or_create(request.set_name)?,
        };
        let ttl = match edit.ttl {
            Some(ttl) => TtlRequest::from_wire(ttl)?,
            None => request.ttl,
        };
        let header = RecordHeader {
            last_update_ms: self.last_update_ms_for(set_id, now),
            void_time: self.void_time_for(ttl, existing.map(|r| r.void_time), now)?,
            generation: existing.map_or(Generation::FIRST, |r| r.generation.next()),
            set_id,
        };
        let key = edit.key.as_ref().map(|(t, k)| (*t, k.as_slice()));
        let size_bytes = record::encoded_size_bytes(key, bin_refs(bins));
        let data = record::encode(key, bin_refs(bins), size_bytes);
        Ok(Record::new(header, data))
    }
}
