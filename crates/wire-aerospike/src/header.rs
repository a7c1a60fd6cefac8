//! The 22-byte as_msg header that opens every AS_MSG body.
//!
//! Layout (big-endian): header_sz u8 (always 22), info1..info4 u8, result_code u8,
//! generation u32, record_ttl u32, transaction_ttl u32, field_count u16, op_count u16.
//!
//! Invariants:
//! - [`MessageHeader::encode`] always writes header_sz 22; [`MessageHeader::decode`] does not
//!   judge it (that is [`crate::Message::parse`]'s job), so the pair round-trips every field.

/// Size of the as_msg header (server `as_msg` without its proto header).
pub const MESSAGE_HEADER_SIZE_BYTES: usize = 22;

/// The header_sz byte every as_msg header carries.
pub(crate) const MESSAGE_HEADER_SIZE_BYTE: u8 = 22;

// Offsets of the multi-byte fields inside the header.
const GENERATION_OFFSET: usize = 6;
const RECORD_TTL_OFFSET: usize = 10;
const TRANSACTION_TTL_OFFSET: usize = 14;
const FIELD_COUNT_OFFSET: usize = 18;
const OP_COUNT_OFFSET: usize = 20;

const _: () = assert!(MESSAGE_HEADER_SIZE_BYTE as usize == MESSAGE_HEADER_SIZE_BYTES);
const _: () = assert!(GENERATION_OFFSET == 1 + 4 + 1);
const _: () = assert!(RECORD_TTL_OFFSET == GENERATION_OFFSET + 4);
const _: () = assert!(TRANSACTION_TTL_OFFSET == RECORD_TTL_OFFSET + 4);
const _: () = assert!(FIELD_COUNT_OFFSET == TRANSACTION_TTL_OFFSET + 4);
const _: () = assert!(OP_COUNT_OFFSET == FIELD_COUNT_OFFSET + 2);
const _: () = assert!(MESSAGE_HEADER_SIZE_BYTES == OP_COUNT_OFFSET + 2);

/// The 22-byte as_msg header (all big-endian on the wire).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MessageHeader {
    /// Read flags ([`crate::info1`]).
    pub info1: u8,
    /// Write flags ([`crate::info2`]).
    pub info2: u8,
    /// Stream markers and record-exists policy ([`crate::info3`]).
    pub info3: u8,
    /// Transaction flags.
    pub info4: u8,
    /// Request: 0. Response: the result code.
    pub result_code: u8,
    /// Request: expected generation. Response: the record's generation.
    pub generation: u32,
    /// Request: TTL (writes) or read-touch percent (reads). Response: the void time.
    pub record_ttl: u32,
    /// Request: total timeout in ms. Response: 0, or the row index in batch responses.
    pub transaction_ttl: u32,
    /// How many fields follow the header.
    pub field_count: u16,
    /// How many ops follow the fields.
    pub op_count: u16,
}

impl MessageHeader {
    /// Reads a header from its 22 bytes. The header_sz byte is not checked here.
    pub fn decode(bytes: &[u8; MESSAGE_HEADER_SIZE_BYTES]) -> MessageHeader {
        let u32_at = |offset: usize| {
            u32::from_be_bytes([
                bytes[offset],
                bytes[offset + 1],
                bytes[offset + 2],
                bytes[offset + 3],
            ])
        };
        let u16_at = |offset: usize| u16::from_be_bytes([bytes[offset], bytes[offset + 1]]);
        MessageHeader {
            info1: bytes[1],
            info2: bytes[2],
            info3: bytes[3],
            info4: bytes[4],
            result_code: bytes[5],
            generation: u32_at(GENERATION_OFFSET),
            record_ttl: u32_at(RECORD_TTL_OFFSET),
            transaction_ttl: u32_at(TRANSACTION_TTL_OFFSET),
            field_count: u16_at(FIELD_COUNT_OFFSET),
            op_count: u16_at(OP_COUNT_OFFSET),
        }
    }

    /// The 22 wire bytes of this header, with header_sz 22.
    pub fn encode(&self) -> [u8; MESSAGE_HEADER_SIZE_BYTES] {
        let mut bytes = [0; MESSAGE_HEADER_SIZE_BYTES];
        bytes[..6].copy_from_slice(&[
            MESSAGE_HEADER_SIZE_BYTE,
            self.info1,
            self.info2,
            self.info3,
            self.info4,
            self.result_code,
        ]);
        bytes[GENERATION_OFFSET..][..4].copy_from_slice(&self.generation.to_be_bytes());
        bytes[RECORD_TTL_OFFSET..][..4].copy_from_slice(&self.record_ttl.to_be_bytes());
        bytes[TRANSACTION_TTL_OFFSET..][..4].copy_from_slice(&self.transaction_ttl.to_be_bytes());
        bytes[FIELD_COUNT_OFFSET..][..2].copy_from_slice(&self.field_count.to_be_bytes());
        bytes[OP_COUNT_OFFSET..][..2].copy_from_slice(&self.op_count.to_be_bytes());
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_places_every_field_at_its_offset_and_decode_reads_it_back() {
        let header = MessageHeader {
            info1: 0x11,
            info2: 0x22,
            info3: 0x33,
            info4: 0x44,
            result_code: 0x55,
            generation: 0x0102_0304,
            record_ttl: 0x0506_0708,
            transaction_ttl: 0x090a_0b0c,
            field_count: 0x0d0e,
            op_count: 0x0f10,
        };
        let bytes = header.encode();
        assert_eq!(
            bytes,
            [
                22, 0x11, 0x22, 0x33, 0x44, 0x55, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                15, 16
            ]
        );
        assert_eq!(MessageHeader::decode(&bytes), header);
    }
}
