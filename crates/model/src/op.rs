//! Operations on a record's bins, as a command carries them.

/// An operation code, numbered as on the Aerospike wire (`AS_MSG_OP_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpCode {
    /// Read one bin, or all bins when the name is empty.
    Read = 1,
    /// Write one bin; particle type NULL deletes it.
    Write = 2,
    /// Collection (list/map) read.
    CdtRead = 3,
    /// Collection (list/map) modify.
    CdtModify = 4,
    /// Add to an integer or float bin, creating it if missing.
    Incr = 5,
    /// Expression read.
    ExpRead = 7,
    /// Expression modify.
    ExpModify = 8,
    /// Append to a string or blob bin.
    Append = 9,
    /// Prepend to a string or blob bin.
    Prepend = 10,
    /// Bump the generation and reset the TTL; the record must exist.
    Touch = 11,
    /// Bitwise read.
    BitRead = 12,
    /// Bitwise modify.
    BitModify = 13,
    /// Delete the whole record.
    Delete = 14,
    /// HyperLogLog read.
    HllRead = 15,
    /// HyperLogLog modify.
    HllModify = 16,
}

impl OpCode {
    /// The op code for a wire byte, or `None` for a value no client sends.
    pub fn from_u8(byte: u8) -> Option<OpCode> {
        Some(match byte {
            1 => OpCode::Read,
            2 => OpCode::Write,
            3 => OpCode::CdtRead,
            4 => OpCode::CdtModify,
            5 => OpCode::Incr,
            7 => OpCode::ExpRead,
            8 => OpCode::ExpModify,
            9 => OpCode::Append,
            10 => OpCode::Prepend,
            11 => OpCode::Touch,
            12 => OpCode::BitRead,
            13 => OpCode::BitModify,
            14 => OpCode::Delete,
            15 => OpCode::HllRead,
            16 => OpCode::HllModify,
            _ => return None,
        })
    }

    /// Whether the op changes the record (Aerospike's `OP_IS_MODIFY`).
    pub fn is_write(self) -> bool {
        !matches!(
            self,
            OpCode::Read | OpCode::CdtRead | OpCode::ExpRead | OpCode::BitRead | OpCode::HllRead
        )
    }
}

/// One operation of a command, borrowing its bin name and value from the request bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op<'a> {
    /// What to do.
    pub code: OpCode,
    /// The raw particle type byte of `value` (0 when the op carries no value).
    pub particle_type: u8,
    /// The bin name (empty for read-all, touch and delete).
    pub bin_name: &'a [u8],
    /// The value bytes, encoded per `particle_type`.
    pub value: &'a [u8],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_u8_round_trips_every_known_code() {
        for byte in 0..=u8::MAX {
            if let Some(code) = OpCode::from_u8(byte) {
                assert_eq!(code as u8, byte);
            }
        }
        assert_eq!(OpCode::from_u8(6), None);
    }

    #[test]
    fn only_read_family_ops_are_not_writes() {
        assert!(!OpCode::Read.is_write());
        assert!(!OpCode::CdtRead.is_write());
        assert!(OpCode::Touch.is_write());
        assert!(OpCode::Delete.is_write());
    }
}
