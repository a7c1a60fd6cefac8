//! The wire form of a [`RecordVersion`]: `digest[20]`, set name (u32 length, at most 63
//! bytes), generation u16, last-update time u64 (ms), void time u32, then a flag byte (0 for a
//! tombstone, 1 for data) followed, for data, by the data with a u32 length.
//!
//! Invariants:
//! - A record is at least 39 bytes on the wire, so a declared record count cannot make a
//!   decoder loop longer than the body allows.

use model::{Generation, VoidTime};

use crate::list::ListItem;
use crate::reader::Reader;
use crate::writer::{put_blob, put_flag, put_set_name, put_u16, put_u32, put_u64};
use crate::{Malformed, RecordVersion};

/// The smallest encoded record: a tombstone without a set name.
pub(crate) const RECORD_SIZE_BYTES_MIN: usize = 20 + 4 + 2 + 8 + 4 + 1;

const _: () = assert!(RECORD_SIZE_BYTES_MIN == 39);

impl<'a> ListItem<'a> for RecordVersion<'a> {
    fn read(reader: &mut Reader<'a>) -> Result<RecordVersion<'a>, Malformed> {
        let digest = reader.digest()?;
        let set_name = reader.set_name()?;
        let generation = Generation(reader.u16()?);
        let last_update_ms = reader.u64()?;
        let void_time = VoidTime(reader.u32()?);
        let data = if reader.flag()? {
            Some(reader.blob()?)
        } else {
            None
        };
        Ok(RecordVersion {
            digest,
            set_name,
            generation,
            last_update_ms,
            void_time,
            data,
        })
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.digest.0);
        put_set_name(out, self.set_name);
        put_u16(out, self.generation.0);
        put_u64(out, self.last_update_ms);
        put_u32(out, self.void_time.0);
        put_flag(out, self.data.is_some());
        if let Some(data) = self.data {
            put_blob(out, data);
        }
    }
}

impl RecordVersion<'_> {
    /// How many bytes this record takes on the wire, so a stream can fill a chunk up to its
    /// size limit without encoding twice.
    pub fn encoded_size_bytes(&self) -> usize {
        let data_size_bytes = self.data.map_or(0, |data| 4 + data.len());
        RECORD_SIZE_BYTES_MIN + self.set_name.len() + data_size_bytes
    }
}
