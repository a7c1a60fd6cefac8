//! Read-modify-write of one record by a caller's closure, under the record's partition lock.
//!
//! The Redis front end maps each command onto this: the closure sees the stored record (if
//! any), writes the new bins into a [`BinWriter`] and decides whether to keep, delete or store,
//! all while the partition's write lock is held, so a command such as INCR or APPEND is atomic.
//! Reads use [`Namespace::view`] under the read lock.
//!
//! Invariants:
//! - The closure runs exactly once, with the lock held; nothing changes if it returns an error
//!   or [`Decision::Keep`].
//! - A stored record has at least one bin, at most `max-record-size` bytes, and a generation one
//!   past the record it replaces (or 1).

use model::{Generation, ResultCode, VoidTime};

use crate::ack::Acks;
use crate::clock::Now;
use crate::commit::{ChangeKind, ReadAccess, WriteAccess};
use crate::namespace::Namespace;
use crate::persist::Replaced;
use crate::record::{self, Bins, NativeValue, Record, RecordHeader};
use crate::stats::Counter;
use crate::transaction::RecordMeta;

const STORED: ChangeKind = ChangeKind::Stored;

/// The record a view finds, borrowed under the lock.
#[derive(Clone, Copy, Debug)]
pub struct Current<'a> {
    /// Its generation.
    pub generation: Generation,
    /// When it expires.
    pub void_time: VoidTime,
    record: &'a Record,
}

impl<'a> Current<'a> {
    pub(crate) fn of(record: &'a Record) -> Current<'a> {
        Current {
            generation: record.generation,
            void_time: record.void_time,
            record,
        }
    }

    /// Its bins in stored order (rendered, for a native value).
    pub fn bins(&self) -> Bins<'a> {
        self.record.bins()
    }

    /// The stored user key as (particle type, bytes), if any.
    pub fn user_key(&self) -> Option<(u8, &'a [u8])> {
        self.record.user_key()
    }

    /// Its native value, if it holds one.
    pub fn native(&self) -> Option<&'a dyn NativeValue> {
        self.record.native()
    }

    /// When it was last written, Unix milliseconds.
    pub fn last_update_ms(&self) -> u64 {
        self.record.last_update_ms
    }
}

/// The record a read-modify-write finds, borrowed under the write lock: readable as a
/// [`Current`], and its native value changeable in place.
#[derive(Debug)]
pub struct CurrentMut<'a> {
    record: &'a mut Record,
    /// Whether a bin may change in place: no secondary index could cover it.
    patchable: bool,
}

impl CurrentMut<'_> {
    /// The record as it is now.
    pub fn get(&self) -> Current<'_> {
        Current::of(self.record)
    }

    /// Its native value, to change in place. Whoever changes it must then return
    /// [`Decision::Touch`] (or [`Decision::Delete`]), and no error.
    pub fn native_mut(&mut self) -> Option<&mut dyn NativeValue> {
        self.record.native_mut()
    }

    /// Bin `name` of a packed record, to change in place without changing its length (a
    /// large value that changes a few bytes, such as a bitmap or a HyperLogLog, is not copied
    /// three times). Whoever changes it must then return [`Decision::Touch`], and no error.
    /// `None` for a native record, a record without that bin, or while the namespace has a
    /// secondary index (which would not see the change).
    pub fn packed_bin_mut(&mut self, name: &[u8]) -> Option<crate::record::PackedBinMut<'_>> {
        if !self.patchable {
            return None;
        }
        self.record.packed_bin_mut(name)
    }
}

/// When a stored record expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// As before (never, for a new record).
    Keep,
    /// Never.
    Never,
    /// At this void time.
    At(VoidTime),
}

/// What the closure of [`Namespace::update`] decided.
#[derive(Debug)]
pub enum Decision {
    /// Change nothing.
    Keep,
    /// Delete the record (nothing happens if there is none).
    Delete,
    /// Replace the record's value with the bins written to the [`BinWriter`], expiring as said.
    Store(Expiry),
    /// Replace the record's value with this native value, expiring as said.
    StoreNative(Box<dyn NativeValue>, Expiry),
    /// Keep the value as it now is (a native value may have changed in place) and count a
    /// write: the generation and last-update time advance, the expiry is set as said. Nothing
    /// happens if there is no record.
    Touch(Expiry),
    /// A read-touch: as [`Decision::Touch`], but the generation stays, as in Aerospike (a
    /// touch a read caused must not fail the generation check of the reader's next write).
    ReadTouch(Expiry),
}

/// The new bins of a record, encoded as they are written (the record's own bin layout).
#[derive(Debug, Default)]
pub struct BinWriter {
    encoded: Vec<u8>,
    bin_count: usize,
}

impl BinWriter {
    /// Appends a bin. Names must be 1 to 15 bytes and unique; the particle type not NULL.
    ///
    /// # Panics
    /// On a name or particle type that breaks those rules: callers write bins they define.
    pub fn bin(&mut self, name: &[u8], particle_type: u8, value: &[u8]) {
        self.bin_with(name, particle_type, value.len(), |out| {
            out.extend_from_slice(value);
        });
    }

    /// Appends a bin whose `value_len` value bytes `write` appends (for values encoded in
    /// place, such as msgpack).
    ///
    /// # Panics
    /// As [`BinWriter::bin`], or if `write` appends other than `value_len` bytes.
    pub fn bin_with(
        &mut self,
        name: &[u8],
        particle_type: u8,
        value_len: usize,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        record::write_bin_header(&mut self.encoded, name, particle_type, value_len);
        let before = self.encoded.len();
        write(&mut self.encoded);
        assert_eq!(
            self.encoded.len() - before,
            value_len,
            "a bin's value is as long as declared"
        );
        self.bin_count += 1;
    }

    /// The bins written, in the record's bin layout.
    pub(crate) fn into_encoded(self) -> Vec<u8> {
        self.encoded
    }

    fn clear(&mut self) {
        self.encoded.clear();
        self.bin_count = 0;
    }
}

/// Which record an update or a view addresses.
#[derive(Clone, Copy, Debug)]
pub struct RecordAddress<'a> {
    /// The record.
    pub digest: model::Digest,
    /// Its set (empty = none); a stored record of another set is a PARAMETER error.
    pub set_name: &'a [u8],
    /// The user key to store with a new record: (particle type, bytes).
    pub key: Option<(u8, &'a [u8])>,
}

impl Namespace {
    /// The clock's current time, as transactions see it.
    pub fn now(&self) -> Now {
        self.clock.now()
    }

    /// Calls `look` with the visible record at `address` (or `None`) under the read lock.
    ///
    /// # Errors
    /// PARAMETER when the record belongs to another set; UNKNOWN when its data cannot be read
    /// back from the device.
    pub fn view<T>(
        &self,
        address: &RecordAddress<'_>,
        look: impl FnOnce(Option<Current<'_>>) -> T,
    ) -> Result<T, ResultCode> {
        let ReadAccess {
            visibility,
            slot,
            partition,
            ..
        } = self.read_access(&address.digest, self.clock.now())?;
        let record = partition.live(&address.digest, &visibility);
        if let Some(record) = record {
            self.check_set(address.set_name, record)?;
        }
        let record = record
            .map(|record| self.load(&address.digest, record))
            .transpose()?;
        let counter = match record {
            Some(_) => Counter::ReadSuccess,
            None => Counter::ReadNotFound,
        };
        slot.counters.add(counter, 1);
        Ok(look(record.as_deref().map(Current::of)))
    }

    /// Runs `decide` on the visible record at `address` (or `None`) under the partition's
    /// write lock, and applies its decision; returns what `decide` returned alongside it.
    ///
    /// # Errors
    /// `decide`'s error (nothing changes); PARAMETER when the record belongs to another set or
    /// a new set cannot be created; RECORD_TOO_BIG when the new bins exceed `max-record-size`;
    /// UNKNOWN when the record's data cannot be read back from the device.
    pub fn update<T>(
        &self,
        address: &RecordAddress<'_>,
        writer: &mut BinWriter,
        acks: &mut Acks,
        decide: impl FnOnce(Option<CurrentMut<'_>>, &mut BinWriter) -> Result<(Decision, T), ResultCode>,
    ) -> Result<T, ResultCode> {
        self.update_with(address, writer, acks, true, decide)
    }

    /// Aerospike's read-touch of the record at `address` (see [`RecordMeta::read_touch_due`]):
    /// its TTL reset to `write_ttl_seconds` from now and its last-update time advanced, its
    /// generation kept; nothing when it is gone, never expires, or a write already extended it
    /// as far. Returns whether it touched.
    ///
    /// # Errors
    /// As [`Namespace::update`].
    pub fn read_touch(
        &self,
        address: &RecordAddress<'_>,
        write_ttl_seconds: u32,
        acks: &mut Acks,
    ) -> Result<bool, ResultCode> {
        let new_void_time = VoidTime::after(self.clock.now().epoch_seconds(), write_ttl_seconds);
        self.update(address, &mut BinWriter::default(), acks, |current, _| {
            let void_time = current.map_or(VoidTime::NEVER, |current| current.get().void_time);
            if void_time == VoidTime::NEVER || new_void_time.0 <= void_time.0 {
                return Ok((Decision::Keep, false));
            }
            Ok((Decision::ReadTouch(Expiry::At(new_void_time)), true))
        })
    }

    /// [`Namespace::update`] for a decision that needs only whether the record exists, its
    /// generation and expiry (a plain overwrite): a record whose data is on the device is not
    /// read back.
    ///
    /// # Errors
    /// As [`Namespace::update`].
    pub fn overwrite<T>(
        &self,
        address: &RecordAddress<'_>,
        writer: &mut BinWriter,
        acks: &mut Acks,
        decide: impl FnOnce(Option<RecordMeta>, &mut BinWriter) -> Result<(Decision, T), ResultCode>,
    ) -> Result<T, ResultCode> {
        self.update_with(address, writer, acks, false, |current, writer| {
            decide(current.map(|c| RecordMeta::of(c.record)), writer)
        })
    }

    /// [`Namespace::update`]; `decide` sees the record's data only if `reads_data`.
    fn update_with<T>(
        &self,
        address: &RecordAddress<'_>,
        writer: &mut BinWriter,
        acks: &mut Acks,
        reads_data: bool,
        decide: impl FnOnce(Option<CurrentMut<'_>>, &mut BinWriter) -> Result<(Decision, T), ResultCode>,
    ) -> Result<T, ResultCode> {
        let WriteAccess {
            now,
            visibility,
            slot,
            mut partition,
            ..
        } = self.write_access(&address.digest, self.clock.now())?;
        let partition_version = partition.version;
        let mut existing = partition.live_mut(&address.digest, &visibility);
        if let Some(record) = existing.as_deref() {
            self.check_set(address.set_name, record)?;
        }
        // With data on the device, `decide` sees a copy read back: such records are never
        // native, so nothing changes in place that the index would miss.
        let mut read_back = match existing.as_deref() {
            Some(record) if reads_data && !record.has_data() => {
                Some(self.read_back(&address.digest, record)?)
            }
            _ => None,
        };
        let size_before_bytes = existing.as_deref().map(Record::data_size_bytes);
        writer.clear();
        // A bin changed in place is safe where nothing must be put back if the device refuses
        // the new version: a copy read back, or a record kept in memory only.
        let no_index = !self.sindexes.any();
        let current = match read_back.as_mut() {
            Some(copy) => Some(CurrentMut {
                record: copy,
                patchable: no_index,
            }),
            None => existing.as_deref_mut().map(|record| CurrentMut {
                record,
                patchable: no_index && self.storage.is_none(),
            }),
        };
        let (decision, result) = decide(current, writer)?;
        let expiry = match decision {
            Decision::Keep => return Ok(result),
            decision @ (Decision::Touch(_) | Decision::ReadTouch(_)) => {
                let (expiry, advances_generation) = match decision {
                    Decision::Touch(expiry) => (expiry, true),
                    Decision::ReadTouch(expiry) => (expiry, false),
                    _ => unreachable!("matched above"),
                };
                if let (Some(record), Some(before_bytes)) = (existing, size_before_bytes) {
                    if self.storage.is_some() && !record.has_data() && read_back.is_none() {
                        read_back = Some(self.read_back(&address.digest, record)?);
                    }
                    let set_id = record.set_id;
                    let before = (record.generation, record.last_update_ms, record.void_time);
                    if advances_generation {
                        record.generation = record.generation.next();
                    }
                    record.last_update_ms = self.last_update_ms_for(set_id, now);
                    record.void_time = expiry.void_time(record.void_time);
                    if let Some(storage) = &self.storage {
                        // Records of a namespace with storage are packed, so only the metadata
                        // changed in place: put it back if the device refuses the new version.
                        let replaced = record.location().map(|location| Replaced {
                            location,
                            last_update_ms: before.1,
                        });
                        let data = read_back.as_ref().unwrap_or(record).packed_data();
                        let appended = self.append_version(
                            storage,
                            &address.digest,
                            record,
                            &data,
                            replaced,
                            acks,
                        );
                        if appended.is_ok() {
                            let stored = Some((&*record, &*data));
                            self.committed(
                                partition_version,
                                &address.digest,
                                STORED,
                                stored,
                                acks,
                            );
                        }
                        drop(data);
                        match appended {
                            Ok(location) => record.location = location.to_bits(),
                            Err(code) => {
                                (record.generation, record.last_update_ms, record.void_time) =
                                    before;
                                return Err(code);
                            }
                        }
                    } else if self.change_sink.get().is_some() {
                        let data = record.packed_data();
                        let stored = Some((&*record, &*data));
                        self.committed(partition_version, &address.digest, STORED, stored, acks);
                    }
                    // What user-key entries keep of the record (see `sindex::Stamp`).
                    let (_, last_update_before_ms, void_time_before) = before;
                    if record.void_time != void_time_before
                        || record.last_update_ms < last_update_before_ms
                    {
                        self.restamp(&self.sindexes.snapshot(), &address.digest, record);
                    }
                    let after_bytes = record.data_size_bytes();
                    partition.resized(set_id, before_bytes, after_bytes, &self.sets);
                    self.watches.touched(&address.digest);
                    slot.counters.add(Counter::WriteSuccess, 1);
                }
                return Ok(result);
            }
            Decision::StoreNative(_, expiry) => expiry,
            Decision::Store(expiry) if writer.bin_count > 0 => expiry,
            // A record has at least one bin: storing none is deleting.
            Decision::Delete | Decision::Store(_) => {
                if let (Some(record), Some(before_bytes)) = (existing, size_before_bytes) {
                    // A native value emptied in place is smaller now than the partition and
                    // set have it: account that before removing it, or they keep the rest.
                    let (set_id, after_bytes) = (record.set_id, record.data_size_bytes());
                    partition.resized(set_id, before_bytes, after_bytes, &self.sets);
                    if let Err(code) = self.unstore(&mut partition, &address.digest, acks) {
                        partition.resized(set_id, after_bytes, before_bytes, &self.sets);
                        return Err(code);
                    }
                    self.watches.touched(&address.digest);
                    slot.counters.add(Counter::DeleteSuccess, 1);
                }
                return Ok(result);
            }
        };
        let existing = existing.as_deref();
        let set_id = match existing {
            Some(record) => record.set_id,
            None => self.sets.id_or_create(address.set_name)?,
        };
        let header = RecordHeader {
            last_update_ms: self.last_update_ms_for(set_id, now),
            void_time: expiry.void_time(existing.map_or(VoidTime::NEVER, |r| r.void_time)),
            generation: existing.map_or(Generation::FIRST, |r| r.generation.next()),
            set_id,
        };
        // The stored key, where the data is at hand (an overwrite of a record on the device
        // stores the key it was addressed by, which is the same key).
        let key = read_back
            .as_ref()
            .or(existing.filter(|record| record.has_data()))
            .and_then(Record::user_key)
            .or(address.key);
        let record = match decision {
            // A native value is kept packed where the device must have every version first.
            Decision::StoreNative(value, _) if self.storage.is_some() => {
                let mut bins = BinWriter::default();
                value.write_bins(&mut bins);
                Record::new(header, record::encode_prepared(key, &bins.encoded))
            }
            Decision::StoreNative(value, _) => Record::new_native(header, key, value),
            _ => {
                let data = record::encode_prepared(key, &writer.encoded);
                if data.len() > self.config.max_record_size_bytes as usize {
                    return Err(ResultCode::RecordTooBig);
                }
                Record::new(header, data)
            }
        };
        self.store(&mut partition, address.digest, record, acks)?;
        self.watches.touched(&address.digest);
        slot.counters.add(Counter::WriteSuccess, 1);
        Ok(result)
    }
}

impl Expiry {
    /// The void time of a record that had `before`.
    fn void_time(self, before: VoidTime) -> VoidTime {
        match self {
            Expiry::Keep => before,
            Expiry::Never => VoidTime::NEVER,
            Expiry::At(void_time) => void_time,
        }
    }
}
