//! Limits Aerospike clients and operators expect, kept identical so clients behave the same.

/// Longest bin name (server `AS_BIN_NAME_MAX_SZ` is 16 including the NUL).
pub const BIN_NAME_BYTES_MAX: usize = 15;

/// Longest set name (server `AS_SET_NAME_MAX_SIZE` is 64 including the NUL).
pub const SET_NAME_BYTES_MAX: usize = 63;

/// Most sets a namespace may hold (set id 0 means "no set", ids run 1..=1023).
pub const SETS_PER_NAMESPACE_MAX: usize = 1023;

/// Longest namespace name (server `AS_ID_NAMESPACE_SZ` is 32 including the NUL).
pub const NAMESPACE_NAME_BYTES_MAX: usize = 31;

/// Most bins one record may hold (server `RECORD_MAX_BINS`).
pub const BINS_PER_RECORD_MAX: usize = 32_767;

/// Most ops in one command (server `MAX_N_OPS`).
pub const OPS_PER_COMMAND_MAX: usize = 32_768;

/// Longest TTL a write may ask for: ten years (server `MAX_ALLOWED_TTL`).
pub const TTL_SECONDS_MAX: u32 = 10 * 365 * 24 * 60 * 60;

const _: () = assert!(TTL_SECONDS_MAX == 315_360_000);
const _: () = assert!(BIN_NAME_BYTES_MAX < u8::MAX as usize);
const _: () = assert!(SETS_PER_NAMESPACE_MAX < u16::MAX as usize);
