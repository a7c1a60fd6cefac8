//! A parsed AS_MSG body: header, fields, ops.
//!
//! Invariants:
//! - [`Message::parse`] accepts a body only if it is exactly one header, `field_count` fields and
//!   `op_count` ops with nothing after them; every later accessor is therefore infallible.

use crate::header::MESSAGE_HEADER_SIZE_BYTE;
use crate::{Fields, MESSAGE_HEADER_SIZE_BYTES, Malformed, MessageHeader, OpIter};

/// A parsed AS_MSG body (the bytes after the 8-byte proto header), borrowing from it.
#[derive(Clone, Debug)]
pub struct Message<'a> {
    /// The 22-byte header.
    pub header: MessageHeader,
    /// The fields, gathered by type.
    pub fields: Fields<'a>,
    /// The validated ops, not yet iterated.
    ops: OpIter<'a>,
}

impl<'a> Message<'a> {
    /// Validates the whole body in one pass: header_sz byte 22, at least 22 bytes, exactly
    /// `field_count` fields each with a size of at least 1 inside the body, then exactly
    /// `op_count` ops (at most [`model::OPS_PER_COMMAND_MAX`]) each with `op_sz >= 4`, a name that
    /// fits inside the op and an op code [`model::OpCode::from_u8`] knows, and no bytes after the
    /// last op. Bin name length against [`model::BIN_NAME_BYTES_MAX`] is left to the engine.
    ///
    /// # Errors
    ///
    /// [`Malformed`] on any violation (the server replies PARAMETER).
    pub fn parse(body: &'a [u8]) -> Result<Message<'a>, Malformed> {
        Self::parse_with(body, false)
    }

    /// [`Message::parse`] for a batch parent, whose last BATCH field may overstate its size
    /// (see [`Fields::parse_batch_parent`]).
    ///
    /// # Errors
    /// As [`Message::parse`].
    pub fn parse_batch_parent(body: &'a [u8]) -> Result<Message<'a>, Malformed> {
        Self::parse_with(body, true)
    }

    fn parse_with(body: &'a [u8], batch_parent: bool) -> Result<Message<'a>, Malformed> {
        let (header_bytes, rest) = body
            .split_first_chunk::<MESSAGE_HEADER_SIZE_BYTES>()
            .ok_or(Malformed::new(
                "body is shorter than the 22-byte message header",
            ))?;
        if header_bytes[0] != MESSAGE_HEADER_SIZE_BYTE {
            return Err(Malformed::new("message header size byte is not 22"));
        }
        let header = MessageHeader::decode(header_bytes);
        let (fields, rest) = match batch_parent {
            true => Fields::parse_batch_parent(rest, header.field_count)?,
            false => Fields::parse(rest, header.field_count)?,
        };
        let (ops, rest) = OpIter::parse(rest, header.op_count)?;
        if !rest.is_empty() {
            return Err(Malformed::new("bytes follow the last op"));
        }
        Ok(Message {
            header,
            fields,
            ops,
        })
    }

    /// The ops in order, as [`model::Op`] (infallible: `parse` validated them).
    pub fn ops(&self) -> OpIter<'a> {
        self.ops.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(header: MessageHeader, tail: &[u8]) -> Vec<u8> {
        let mut bytes = header.encode().to_vec();
        bytes.extend_from_slice(tail);
        bytes
    }

    #[test]
    fn parse_accepts_a_bare_header() {
        let header = MessageHeader {
            info1: 1,
            generation: 7,
            ..MessageHeader::default()
        };
        let bytes = body(header, b"");
        let message = Message::parse(&bytes).unwrap();
        assert_eq!(message.header, header);
        assert_eq!(message.fields, Fields::default());
        assert_eq!(message.ops().len(), 0);
    }

    #[test]
    fn parse_rejects_a_short_body_and_a_wrong_header_size_byte() {
        let bytes = body(MessageHeader::default(), b"");
        assert!(Message::parse(&bytes[..21]).is_err());
        let mut wrong = bytes.clone();
        wrong[0] = 21;
        assert!(Message::parse(&wrong).is_err());
    }

    #[test]
    fn parse_rejects_trailing_bytes_and_missing_fields_or_ops() {
        assert!(Message::parse(&body(MessageHeader::default(), b"\0")).is_err());
        let one_field = MessageHeader {
            field_count: 1,
            ..MessageHeader::default()
        };
        assert!(Message::parse(&body(one_field, b"")).is_err());
        let one_op = MessageHeader {
            op_count: 1,
            ..MessageHeader::default()
        };
        assert!(Message::parse(&body(one_op, b"")).is_err());
        assert!(Message::parse(&body(one_op, &[0, 0, 0, 4, 14, 0, 0, 0])).is_ok());
    }
}
