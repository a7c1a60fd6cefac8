//! The flag bits of the as_msg header bytes info1, info2 and info3 (server `proto.h`).

/// Bits of `info1`: what a command reads.
pub mod info1 {
    /// The command contains a read.
    pub const READ: u8 = 0x01;
    /// Read all bins (also required for a read op with an empty bin name).
    pub const GET_ALL: u8 = 0x02;
    /// Short query: may run inline, uses transaction_ttl as its deadline.
    pub const SHORT_QUERY: u8 = 0x04;
    /// Batch parent request.
    pub const BATCH: u8 = 0x08;
    /// The write comes from XDR, not from a client.
    pub const XDR: u8 = 0x10;
    /// Metadata only: no bin data (clients call it NOBINDATA).
    pub const GET_NO_BINS: u8 = 0x20;
    /// Duplicate-resolve reads across replicas (CONSISTENCY_LEVEL_ALL).
    pub const READ_MODE_AP_ALL: u8 = 0x40;
    /// The client asks for a compressed response (enterprise only; may be ignored).
    pub const COMPRESS_RESPONSE: u8 = 0x80;
}

/// Bits of `info2`: what a command writes.
pub mod info2 {
    /// Write path (also set for delete, touch, UDF and background queries).
    pub const WRITE: u8 = 0x01;
    /// Delete the record.
    pub const DELETE: u8 = 0x02;
    /// Apply only if the stored generation equals the message generation.
    pub const GENERATION: u8 = 0x04;
    /// Apply only if the message generation is greater than the stored one.
    pub const GENERATION_GT: u8 = 0x08;
    /// The delete leaves a tombstone (enterprise only).
    pub const DURABLE_DELETE: u8 = 0x10;
    /// Fail with RECORD_EXISTS if the record exists.
    pub const CREATE_ONLY: u8 = 0x20;
    /// A long query may relax its partition reservation.
    pub const RELAX_AP_LONG_QUERY: u8 = 0x40;
    /// Return one result entry per op, in request order.
    pub const RESPOND_ALL_OPS: u8 = 0x80;
}

/// Bits of `info3`: stream markers, record-exists policy and strong-consistency read mode.
pub mod info3 {
    /// Last message of a multi-message response.
    pub const LAST: u8 = 0x01;
    /// Commit level master: don't wait for replicas.
    pub const COMMIT_MASTER: u8 = 0x02;
    /// Request: the client speaks the partition protocol; response: per-partition status.
    pub const PARTITION_DONE: u8 = 0x04;
    /// The record must exist; bins are merged.
    pub const UPDATE_ONLY: u8 = 0x08;
    /// Create the record or completely replace its bins.
    pub const CREATE_OR_REPLACE: u8 = 0x10;
    /// The record must exist; its bins are completely replaced.
    pub const REPLACE_ONLY: u8 = 0x20;
    /// Strong-consistency read mode, low bit.
    pub const SC_READ_TYPE: u8 = 0x40;
    /// Strong-consistency read mode, high bit.
    pub const SC_READ_RELAX: u8 = 0x80;
}
