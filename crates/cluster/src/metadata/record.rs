//! The checksummed record that every metadata-group file is made of.
//!
//! A file holds one or more records back to back:
//!
//! ```text
//! offset  size  field
//! 0       4     magic, b"OMR1" (Osprey metadata record, format 1)
//! 4       4     body length in bytes, little-endian u32
//! 8       8     FNV-1a 64 of the body, little-endian u64
//! 16      n     body: one JSON value
//! ```
//!
//! Invariants:
//! - A record is checked (magic, length, checksum) before its body is parsed, so a torn or
//!   corrupted file is reported as such and never half-read.
//! - The checksum guards against torn and stale writes, not against an adversary.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The first bytes of every record; the trailing digit is the format version.
const MAGIC: [u8; 4] = *b"OMR1";

/// Magic, body length and checksum.
const HEADER_SIZE_BYTES: usize = 16;

const _: () = assert!(HEADER_SIZE_BYTES == MAGIC.len() + 4 + 8);

/// FNV-1a 64 offset basis and prime (the published constants).
const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Why a file's bytes are not a sequence of valid records.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The bytes end inside a record (a torn write).
    #[error("record at offset {offset} is truncated")]
    Truncated {
        /// Where the record starts in the file.
        offset: usize,
    },
    /// The magic is wrong: not a record, or a newer format.
    #[error("record at offset {offset} has a bad magic")]
    BadMagic {
        /// Where the record starts in the file.
        offset: usize,
    },
    /// The body does not match its checksum.
    #[error("record at offset {offset} fails its checksum")]
    ChecksumMismatch {
        /// Where the record starts in the file.
        offset: usize,
    },
    /// A body too large for the length field.
    #[error("record body of {size_bytes} bytes is too large")]
    TooLarge {
        /// The body size.
        size_bytes: usize,
    },
    /// A valid record whose JSON body does not parse as the expected value.
    #[error("record body does not parse: {0}")]
    Json(#[from] serde_json::Error),
    /// A different number of records than expected.
    #[error("expected {expected} records, found {found}")]
    RecordCount {
        /// Records expected.
        expected: usize,
        /// Records found.
        found: usize,
    },
}

/// Appends one record holding `body` to `out`.
///
/// # Errors
/// [`RecordError::TooLarge`] when `body` does not fit the 32-bit length.
pub fn encode(body: &[u8], out: &mut Vec<u8>) -> Result<(), RecordError> {
    let size_bytes = body.len();
    let body_len = u32::try_from(size_bytes).map_err(|_| RecordError::TooLarge { size_bytes })?;
    out.reserve(HEADER_SIZE_BYTES + size_bytes);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&body_len.to_le_bytes());
    out.extend_from_slice(&fnv1a64(body).to_le_bytes());
    out.extend_from_slice(body);
    Ok(())
}

/// Splits a file's bytes into record bodies, checking each.
///
/// # Errors
/// The first [`RecordError`] met; nothing is returned from a file with any bad record.
pub fn decode_all(bytes: &[u8]) -> Result<Vec<&[u8]>, RecordError> {
    let mut bodies = Vec::new();
    let mut offset = 0;
    while offset < bytes.len() {
        let (body, next) = decode_one(bytes, offset)?;
        bodies.push(body);
        offset = next;
    }
    Ok(bodies)
}

/// One record holding `value` as JSON.
///
/// # Errors
/// [`RecordError::Json`] if `value` does not serialize, [`RecordError::TooLarge`].
pub fn encode_json<T: Serialize>(value: &T) -> Result<Vec<u8>, RecordError> {
    let body = serde_json::to_vec(value)?;
    let mut out = Vec::new();
    encode(&body, &mut out)?;
    Ok(out)
}

/// The value of a file that holds exactly one JSON record.
///
/// # Errors
/// Any [`RecordError`], including a file with more or fewer than one record.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, RecordError> {
    let bodies = decode_all(bytes)?;
    let [body] = bodies.as_slice() else {
        return Err(RecordError::RecordCount {
            expected: 1,
            found: bodies.len(),
        });
    };
    Ok(serde_json::from_slice(body)?)
}

fn decode_one(bytes: &[u8], offset: usize) -> Result<(&[u8], usize), RecordError> {
    let header_end = offset + HEADER_SIZE_BYTES;
    let header = bytes
        .get(offset..header_end)
        .ok_or(RecordError::Truncated { offset })?;
    let (magic, rest) = header.split_at(MAGIC.len());
    if magic != MAGIC {
        return Err(RecordError::BadMagic { offset });
    }
    let (len_bytes, sum_bytes) = rest.split_at(4);
    let body_len = u32::from_le_bytes(len_bytes.try_into().expect("split at 4"));
    let checksum = u64::from_le_bytes(sum_bytes.try_into().expect("8 bytes remain"));
    let body_end = header_end + body_len as usize;
    let body = bytes
        .get(header_end..body_end)
        .ok_or(RecordError::Truncated { offset })?;
    if fnv1a64(body) != checksum {
        return Err(RecordError::ChecksumMismatch { offset });
    }
    Ok((body, body_end))
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_every_torn_prefix_is_refused() {
        let mut file = Vec::new();
        encode(b"{\"a\":1}", &mut file).expect("small body");
        encode(b"[2]", &mut file).expect("small body");
        let bodies = decode_all(&file).expect("two valid records");
        assert_eq!(bodies, vec![&b"{\"a\":1}"[..], &b"[2]"[..]]);
        let first_len = HEADER_SIZE_BYTES + 7;
        for cut in 1..file.len() {
            if cut == first_len {
                continue;
            }
            assert!(decode_all(&file[..cut]).is_err(), "prefix of {cut} bytes");
        }
    }

    #[test]
    fn a_flipped_body_bit_fails_the_checksum() {
        let mut file = encode_json(&vec![1u64, 2, 3]).expect("serializes");
        let last = file.len() - 2;
        file[last] ^= 0x01;
        assert!(matches!(
            decode_json::<Vec<u64>>(&file),
            Err(RecordError::ChecksumMismatch { offset: 0 })
        ));
    }
}
