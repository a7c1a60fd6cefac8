//! Encoding complete AS_MSG requests (for tests, the Rust client and the bench tool).

use model::Op;

use crate::{MessageHeader, begin_response, finish_response, write_field, write_op};

/// Appends a full request frame (proto header included) to `out`: `header` with its
/// `field_count` and `op_count` set from the slices, then `fields` as `(type, data)` pairs in
/// order, then `ops` in order.
///
/// # Panics
///
/// If there are more than `u16::MAX` fields or ops, or an op's bin name is longer than 255
/// bytes: the message cannot be expressed on the wire.
pub fn encode_message(
    out: &mut Vec<u8>,
    header: &MessageHeader,
    fields: &[(u8, &[u8])],
    ops: &[Op<'_>],
) {
    let header = MessageHeader {
        field_count: u16::try_from(fields.len()).expect("at most u16::MAX fields"),
        op_count: u16::try_from(ops.len()).expect("at most u16::MAX ops"),
        ..*header
    };
    let start = begin_response(out);
    for (field_type, data) in fields {
        write_field(out, *field_type, data);
    }
    for op in ops {
        write_op(out, op.code as u8, op.particle_type, op.bin_name, op.value);
    }
    finish_response(out, start, &header);
}
