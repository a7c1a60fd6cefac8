//! The format's limits, each from the tool or server that imposes it.

/// Longest token (a name or a float's text), in bytes after unescaping: asbackup reads tokens
/// into a 1000-byte buffer that keeps a NUL terminator (`MAX_TOKEN_SIZE`).
pub const TOKEN_BYTES_MAX: usize = 999;

/// Longest namespace name: the server's limit, which asbackup's reader also applies.
pub const NAMESPACE_BYTES_MAX: usize = model::NAMESPACE_NAME_BYTES_MAX;

/// Longest set name: the server's limit, which asbackup's reader also applies.
pub const SET_BYTES_MAX: usize = model::SET_NAME_BYTES_MAX;

/// Longest bin name: the server's limit; a longer one could not be restored.
pub const BIN_NAME_BYTES_MAX: usize = model::BIN_NAME_BYTES_MAX;

/// Longest length prefix: both readers refuse a size above 32 bits.
pub const LENGTH_MAX: u64 = u32::MAX as u64;

/// Most bins in a record: the `+ b` count is 16 bits in asbackup's reader.
pub const BIN_COUNT_MAX: u64 = u16::MAX as u64;

/// Largest generation: 16 bits, as the server stores it.
pub const GENERATION_MAX: u64 = u16::MAX as u64;

/// Largest expiration: a 32-bit void time.
pub const VOID_TIME_MAX: u64 = u32::MAX as u64;

/// Characters of a digest in base64: 20 bytes padded to 21, four characters per three bytes.
pub const DIGEST_BASE64_CHARS: usize = 28;

/// The default limit on one value's bytes (a bin value, a key or a UDF body): 128 MiB, far
/// above the server's largest record (8 MiB) so that no real backup hits it, and low enough
/// that a corrupt length cannot make a restore allocate gigabytes.
pub const VALUE_BYTES_MAX_DEFAULT: u64 = 128 * 1024 * 1024;

/// How much of a long value is read (and allocated) at a time, so that memory grows only as
/// the value's bytes arrive.
pub const VALUE_CHUNK_BYTES: usize = 64 * 1024;

const _: () = assert!(NAMESPACE_BYTES_MAX < TOKEN_BYTES_MAX);
const _: () = assert!(SET_BYTES_MAX < TOKEN_BYTES_MAX);
const _: () = assert!(BIN_NAME_BYTES_MAX < TOKEN_BYTES_MAX);
const _: () = assert!(VALUE_BYTES_MAX_DEFAULT <= LENGTH_MAX);
const _: () = assert!(
    VALUE_CHUNK_BYTES.is_multiple_of(4),
    "base64 chunks must hold whole quanta"
);
const _: () = assert!(DIGEST_BASE64_CHARS == 20_usize.div_ceil(3) * 4);
