//! The Aerospike client wire protocol as a pure codec.
//!
//! What it does: finds proto frames at the start of a byte buffer ([`decode_frame`]), parses an
//! AS_MSG body into its header, fields and ops as borrowed views ([`Message::parse`]), and the
//! rows of a batch request likewise ([`BatchRequest`]), encodes responses and requests into a
//! caller-owned `Vec<u8>` ([`begin_response`], [`write_op`], [`finish_response`],
//! [`encode_message`]), and splits and answers the text info protocol ([`info_request_lines`],
//! [`info_command_name`], [`info_param`]).
//!
//! Layer 3: depends only on `model` and std. No I/O, no async, no engine types.
//!
//! Invariants:
//! - Decoding never allocates and never sizes anything by a length the peer declared: it takes a
//!   slice and returns "need more bytes" (`Ok(None)`), a view borrowing from the slice, or
//!   [`Malformed`]. Every declared length is checked against the bytes actually present.
//! - A frame header is judged as soon as its 8 bytes are present, before the body arrives, so a
//!   hostile peer can be dropped without buffering what it announced.
//! - A [`Message`] that parsed is valid through and through: iterating its ops cannot fail.
//! - Encoding only appends to the output buffer and patches headers it wrote itself.
//! - All multi-byte integers are big-endian; this crate's codec modules are the only place that
//!   converts them.
//!
//! The byte layouts are in `docs/internals/wire-aerospike.md` and, with sources, in the protocol
//! reference (`aerospike-protocol.md` sections 1 to 7).

mod batch;
pub mod cluster_map;
mod fields;
mod flags;
mod frame;
mod header;
mod info;
mod malformed;
mod message;
mod ops;
mod request;
mod response;
pub mod security;

pub mod field_type;

pub use batch::{
    BatchPosition, BatchRequest, BatchRow, BatchRows, batch_parent_flags, batch_row_flags,
    encode_batch_header, encode_batch_repeat_row, encode_batch_row,
};
pub use fields::{Fields, ScanFields, UdfFields};
pub use flags::{info1, info2, info3};
pub use frame::{
    Frame, PROTO_BODY_SIZE_BYTES_MAX, PROTO_HEADER_SIZE_BYTES, PROTO_VERSION, ProtoType,
    begin_proto, decode_frame, encode_proto_header, finish_proto,
};
pub use header::{MESSAGE_HEADER_SIZE_BYTES, MessageHeader};
pub use info::{
    begin_info_response, encode_info_request, finish_info_response, info_command_name, info_param,
    info_request_lines,
};
pub use malformed::Malformed;
pub use message::Message;
pub use ops::OpIter;
pub use request::encode_message;
pub use response::{
    begin_message, begin_response, finish_message, finish_response, write_bare_response,
    write_field, write_op,
};
pub use security::{SECURITY_HEADER_SIZE_BYTES, write_security_response};
