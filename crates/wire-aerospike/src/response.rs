//! Encoding AS_MSG messages into a caller-owned buffer: header slots first, patched at the end.
//!
//! Usage: `let start = begin_response(out); write_op(out, ...)*; finish_response(out, start,
//! &header)`. Requests are built the same way ([`crate::encode_message`]).
//!
//! Invariants:
//! - Functions only append to `out` or patch the header slots reserved at `start`; bytes before
//!   `start` are never touched, so many messages can be batched into one buffer.
//! - Nothing allocates beyond the growth of `out`.
//! - A finished message parses back with [`crate::Message::parse`] (checked in debug builds):
//!   the caller's field and op counts match what was written.

use crate::ops::OP_HEADER_SIZE_BYTES;
use crate::{
    MESSAGE_HEADER_SIZE_BYTES, MessageHeader, PROTO_HEADER_SIZE_BYTES, ProtoType, begin_proto,
    finish_proto,
};

/// Reserves the 8-byte proto header and the 22-byte as_msg header at the end of `out`, and
/// returns where the message starts (to pass to [`finish_response`]).
pub fn begin_response(out: &mut Vec<u8>) -> usize {
    let start = begin_proto(out);
    begin_message(out);
    start
}

/// Reserves a 22-byte as_msg header at the end of `out` without a proto header, and returns
/// where it starts (to pass to [`finish_message`]). Batch and scan replies put many messages in
/// one proto: [`crate::begin_proto`], then `begin_message`/`finish_message` per record, then
/// [`crate::finish_proto`].
pub fn begin_message(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; MESSAGE_HEADER_SIZE_BYTES]);
    start
}

/// Appends one op: `op_sz`, op code, particle type, flags 0, name length, name, value.
///
/// # Panics
///
/// If `bin_name` is longer than 255 bytes or the op is larger than `u32::MAX` bytes: callers
/// only echo names and values that arrived in (size-limited) requests or records.
pub fn write_op(out: &mut Vec<u8>, op_code: u8, particle_type: u8, bin_name: &[u8], value: &[u8]) {
    let name_size_bytes = u8::try_from(bin_name.len()).expect("bin names are under 256 bytes");
    let op_size_bytes = OP_HEADER_SIZE_BYTES + bin_name.len() + value.len();
    let op_size_bytes = u32::try_from(op_size_bytes).expect("an op value is under 4 GiB");
    out.extend_from_slice(&op_size_bytes.to_be_bytes());
    out.extend_from_slice(&[op_code, particle_type, 0, name_size_bytes]);
    out.extend_from_slice(bin_name);
    out.extend_from_slice(value);
}

/// Appends one field: `size` (1 + data length), field type, data. Fields must precede ops.
///
/// # Panics
///
/// If `data` is `u32::MAX` bytes or longer.
pub fn write_field(out: &mut Vec<u8>, field_type: u8, data: &[u8]) {
    let size_bytes = u32::try_from(1 + data.len()).expect("a field is under 4 GiB");
    out.extend_from_slice(&size_bytes.to_be_bytes());
    out.push(field_type);
    out.extend_from_slice(data);
}

/// Patches the proto header (version 2, type 3, size = bytes after the 8-byte header) and the
/// as_msg header at `start`. `header.field_count` and `header.op_count` must be what was
/// written.
///
/// # Panics
///
/// If no message was begun at `start` (fewer than 30 bytes after it).
pub fn finish_response(out: &mut [u8], start: usize, header: &MessageHeader) {
    finish_message(out, start + PROTO_HEADER_SIZE_BYTES, header);
    finish_proto(out, start, ProtoType::Message);
}

/// Patches the as_msg header reserved at `start` by [`begin_message`]; the message is
/// everything after it. `header.field_count` and `header.op_count` must be what was written.
///
/// # Panics
///
/// If fewer than 22 bytes follow `start` (no header was reserved there).
pub fn finish_message(out: &mut [u8], start: usize, header: &MessageHeader) {
    let header_end = start + MESSAGE_HEADER_SIZE_BYTES;
    assert!(
        header_end <= out.len(),
        "no message header reserved at {start}"
    );
    out[start..header_end].copy_from_slice(&header.encode());
    debug_assert!(
        crate::Message::parse(&out[start..]).is_ok(),
        "message at {start} does not parse: its header counts do not match what was written"
    );
}

/// Appends a complete bare-header reply (no fields, no ops) with a result code, a generation and
/// a void time.
pub fn write_bare_response(out: &mut Vec<u8>, result_code: u8, generation: u32, void_time: u32) {
    let start = begin_response(out);
    let header = MessageHeader {
        result_code,
        generation,
        record_ttl: void_time,
        ..MessageHeader::default()
    };
    finish_response(out, start, &header);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, decode_frame};

    #[test]
    fn write_bare_response_is_a_30_byte_frame() {
        let mut out = b"previous".to_vec();
        write_bare_response(&mut out, 2, 0, 0);
        assert_eq!(&out[..8], b"previous");
        let frame = &out[8..];
        assert_eq!(frame[..8], [2, 3, 0, 0, 0, 0, 0, 22]);
        assert_eq!(frame[8..14], [22, 0, 0, 0, 0, 2]);
        assert_eq!(frame.len(), 30);
    }

    #[test]
    fn a_response_with_a_field_and_ops_decodes_back() {
        let mut out = Vec::new();
        let start = begin_response(&mut out);
        write_field(&mut out, crate::field_type::DIGEST, &[7; 20]);
        write_op(&mut out, 1, 3, b"s", b"hi");
        write_op(&mut out, 1, 0, b"", b"");
        let header = MessageHeader {
            field_count: 1,
            op_count: 2,
            ..MessageHeader::default()
        };
        finish_response(&mut out, start, &header);
        let frame = decode_frame(&out, u64::MAX).unwrap().unwrap();
        assert_eq!(frame.size_bytes(), out.len());
        let message = Message::parse(frame.body).unwrap();
        assert_eq!(message.fields.digest, Some(&[7; 20][..]));
        assert_eq!(message.ops().len(), 2);
    }

    #[test]
    fn a_stream_proto_carries_several_messages_back_to_back() {
        let mut out = Vec::new();
        let proto_start = begin_proto(&mut out);
        let first = begin_message(&mut out);
        write_op(&mut out, 1, 4, b"b", b"x");
        finish_message(
            &mut out,
            first,
            &MessageHeader {
                op_count: 1,
                ..MessageHeader::default()
            },
        );
        let last = begin_message(&mut out);
        let trailer = MessageHeader {
            info3: crate::info3::LAST,
            ..MessageHeader::default()
        };
        finish_message(&mut out, last, &trailer);
        finish_proto(&mut out, proto_start, ProtoType::Message);

        let frame = decode_frame(&out, u64::MAX).unwrap().unwrap();
        assert_eq!(frame.size_bytes(), out.len());
        let (first_body, last_body) = frame.body.split_at(last - PROTO_HEADER_SIZE_BYTES);
        assert_eq!(Message::parse(first_body).unwrap().ops().len(), 1);
        assert_eq!(Message::parse(last_body).unwrap().header, trailer);
    }
}
