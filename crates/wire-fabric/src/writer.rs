//! Appending fields to a body being encoded.
//!
//! Invariants:
//! - Every writer asserts the limit the decoder enforces, so a frame this node encodes is one
//!   the receiver accepts; breaking a limit is a programmer error and panics.
//! - Writers only append to the output buffer.

use model::{PARTITION_COUNT, PartitionId};

use crate::limits::{NAMESPACE_NAME_BYTES_MAX, SET_NAME_BYTES_MAX};

pub(crate) fn put_u8(out: &mut Vec<u8>, value: u8) {
    out.push(value);
}

pub(crate) fn put_u16(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_be_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_be_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_be_bytes());
}

/// A length or count as a u32.
///
/// # Panics
///
/// If `size` does not fit in a u32.
pub(crate) fn put_size(out: &mut Vec<u8>, size: usize) {
    let size = u32::try_from(size).expect("a fabric length or count fits in a u32");
    put_u32(out, size);
}

/// A u32-length-prefixed byte string.
pub(crate) fn put_blob(out: &mut Vec<u8>, bytes: &[u8]) {
    put_size(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// A u32-length-prefixed byte string of at most `size_bytes_max` bytes.
pub(crate) fn put_name(out: &mut Vec<u8>, bytes: &[u8], size_bytes_max: usize, what: &str) {
    assert!(
        bytes.len() <= size_bytes_max,
        "{what} of {} bytes is over the limit of {size_bytes_max}",
        bytes.len()
    );
    put_blob(out, bytes);
}

/// A namespace name: 1 to 31 bytes.
pub(crate) fn put_namespace(out: &mut Vec<u8>, namespace: &[u8]) {
    assert!(!namespace.is_empty(), "a namespace name is never empty");
    put_name(out, namespace, NAMESPACE_NAME_BYTES_MAX, "namespace name");
}

/// A set name: 0 to 63 bytes.
pub(crate) fn put_set_name(out: &mut Vec<u8>, set_name: &[u8]) {
    put_name(out, set_name, SET_NAME_BYTES_MAX, "set name");
}

pub(crate) fn put_flag(out: &mut Vec<u8>, flag: bool) {
    put_u8(out, u8::from(flag));
}

pub(crate) fn put_partition(out: &mut Vec<u8>, partition: PartitionId) {
    assert!(
        usize::from(partition.0) < PARTITION_COUNT,
        "partition id {} is not below {PARTITION_COUNT}",
        partition.0
    );
    put_u16(out, partition.0);
}
