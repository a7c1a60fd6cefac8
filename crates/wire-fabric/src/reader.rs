//! A cursor over one whole frame body, reading its fields front to back.
//!
//! Invariants:
//! - The body is complete ([`crate::decode_frame`] found all of its bytes), so a field that
//!   runs past its end is malformed, never "need more bytes".
//! - Every declared length is compared with the bytes left before a slice is taken, and
//!   nothing is ever reserved by a declared length or count.
//! - Every read consumes at least one byte or fails, so a loop over a declared count ends
//!   within as many turns as the body has bytes.

use model::{Digest, PARTITION_COUNT, PartitionId};

use crate::Malformed;
use crate::limits::{DIGEST_SIZE_BYTES, NAMESPACE_NAME_BYTES_MAX, SET_NAME_BYTES_MAX};

/// The not yet read bytes of a body. Public only in name (its module is private), so that the
/// list item trait can mention it; nothing outside the crate can build one.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `body`.
    pub(crate) fn new(body: &'a [u8]) -> Reader<'a> {
        Reader { rest: body }
    }

    /// The bytes not read yet.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// The next `size_bytes` bytes.
    pub(crate) fn take(&mut self, size_bytes: usize) -> Result<&'a [u8], Malformed> {
        if size_bytes > self.rest.len() {
            return Err(Malformed::new("a field runs past the end of the body"));
        }
        let (taken, rest) = self.rest.split_at(size_bytes);
        self.rest = rest;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(Malformed::new("a field runs past the end of the body"))?;
        self.rest = rest;
        Ok(*head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Malformed> {
        let [byte] = self.array::<1>()?;
        Ok(byte)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, Malformed> {
        self.array().map(u16::from_be_bytes)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Malformed> {
        self.array().map(u32::from_be_bytes)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Malformed> {
        self.array().map(u64::from_be_bytes)
    }

    /// A u32 length or count, as a `usize`.
    pub(crate) fn size(&mut self) -> Result<usize, Malformed> {
        let size = self.u32()?;
        usize::try_from(size).map_err(|_| Malformed::new("a length does not fit in memory"))
    }

    /// A u32-length-prefixed byte string of any length the body holds.
    pub(crate) fn blob(&mut self) -> Result<&'a [u8], Malformed> {
        let size_bytes = self.size()?;
        self.take(size_bytes)
    }

    /// A u32-length-prefixed byte string of at most `size_bytes_max` bytes.
    pub(crate) fn name(
        &mut self,
        size_bytes_max: usize,
        too_long: &'static str,
    ) -> Result<&'a [u8], Malformed> {
        let size_bytes = self.size()?;
        if size_bytes > size_bytes_max {
            return Err(Malformed::new(too_long));
        }
        self.take(size_bytes)
    }

    /// A u32-length-prefixed UTF-8 text of at most `size_bytes_max` bytes.
    pub(crate) fn text(
        &mut self,
        size_bytes_max: usize,
        too_long: &'static str,
    ) -> Result<&'a str, Malformed> {
        let bytes = self.name(size_bytes_max, too_long)?;
        std::str::from_utf8(bytes).map_err(|_| Malformed::new("a text field is not UTF-8"))
    }

    /// A namespace name: 1 to 31 bytes.
    pub(crate) fn namespace(&mut self) -> Result<&'a [u8], Malformed> {
        let namespace = self.name(NAMESPACE_NAME_BYTES_MAX, "namespace name over 31 bytes")?;
        if namespace.is_empty() {
            return Err(Malformed::new("namespace name is empty"));
        }
        Ok(namespace)
    }

    /// A set name: 0 to 63 bytes.
    pub(crate) fn set_name(&mut self) -> Result<&'a [u8], Malformed> {
        self.name(SET_NAME_BYTES_MAX, "set name over 63 bytes")
    }

    /// A flag byte: exactly 0 or 1, so that every message has one encoding.
    pub(crate) fn flag(&mut self) -> Result<bool, Malformed> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Malformed::new("a flag byte is neither 0 nor 1")),
        }
    }

    /// A u16 partition id below [`PARTITION_COUNT`].
    pub(crate) fn partition(&mut self) -> Result<PartitionId, Malformed> {
        let partition = self.u16()?;
        if usize::from(partition) >= PARTITION_COUNT {
            return Err(Malformed::new("partition id is not below 4096"));
        }
        Ok(PartitionId(partition))
    }

    /// A 20-byte digest.
    pub(crate) fn digest(&mut self) -> Result<Digest, Malformed> {
        self.array::<DIGEST_SIZE_BYTES>().map(Digest)
    }

    /// Succeeds only when every byte of the body was read: a body with bytes left over is not
    /// the message its type says.
    pub(crate) fn finish(self) -> Result<(), Malformed> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(Malformed::new(
                "bytes left over after the last field of the body",
            ))
        }
    }
}
