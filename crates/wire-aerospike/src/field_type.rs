//! Field type numbers of the AS_MSG field layout (server `AS_MSG_FIELD_TYPE_*`).
//!
//! Several fields carry little-endian integers (RECORD_VERSION, MRT_ID, MRT_DEADLINE,
//! PID_ARRAY, BVAL_ARRAY); decoding their data is the caller's business.

/// Namespace name bytes (mandatory on every command).
pub const NAMESPACE: u8 = 0;
/// Set name bytes; empty means no set.
pub const SET: u8 = 1;
/// User key: particle type byte, then the key bytes.
pub const KEY: u8 = 2;
/// Record version for transactions (7 bytes little-endian).
pub const RECORD_VERSION: u8 = 3;
/// The 20-byte RIPEMD-160 digest of the record (DIGEST_RIPE).
pub const DIGEST: u8 = 4;
/// Transaction id (8 bytes little-endian).
pub const MRT_ID: u8 = 5;
/// Transaction deadline (4 bytes little-endian).
pub const MRT_DEADLINE: u8 = 6;
/// Scan/query task id (u64 big-endian).
pub const TRID: u8 = 7;
/// Scan/query server-side send timeout in ms (u32 big-endian).
pub const SOCKET_TIMEOUT: u8 = 9;
/// Scan/query throttle (u32 big-endian).
pub const RECORDS_PER_SECOND: u8 = 10;
/// Partition ids to scan (u16 little-endian each).
pub const PID_ARRAY: u8 = 11;
/// Resume digests, one per partition (20 bytes each).
pub const DIGEST_ARRAY: u8 = 12;
/// Scan/query record limit (u64 big-endian).
pub const MAX_RECORDS: u8 = 13;
/// Secondary-index resume values (i64 little-endian each).
pub const BVAL_ARRAY: u8 = 15;
/// Secondary index name.
pub const INDEX_NAME: u8 = 21;
/// Secondary-index filter.
pub const INDEX_RANGE: u8 = 22;
/// Msgpack CDT context of the indexed element.
pub const INDEX_CONTEXT: u8 = 23;
/// Packed expression of an expression index.
pub const INDEX_EXPRESSION: u8 = 24;
/// Collection index type (u8).
pub const INDEX_TYPE: u8 = 26;
/// UDF module name (without `.lua`).
pub const UDF_FILENAME: u8 = 30;
/// UDF function name.
pub const UDF_FUNCTION: u8 = 31;
/// Msgpack array of UDF arguments.
pub const UDF_ARGLIST: u8 = 32;
/// Query UDF kind (u8).
pub const UDF_OP: u8 = 33;
/// Legacy secondary-index query bin list.
pub const QUERY_BINLIST: u8 = 40;
/// Batch body (batch-index protocol).
pub const BATCH: u8 = 41;
/// Batch body; the server treats it exactly as [`BATCH`].
pub const BATCH_WITH_SET: u8 = 42;
/// Packed filter expression.
pub const FILTER_EXP: u8 = 43;
