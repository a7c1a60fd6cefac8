//! The Redis protocol (RESP2 and RESP3) as a pure codec, both sides of a connection.
//!
//! Server side: [`decode_request`] parses one client request (multibulk, or an inline line
//! split like Redis's `sdssplitargs`) from the start of a byte buffer into a reusable [`Args`],
//! with Redis's limits and exact protocol error texts ([`RequestError`]); [`encode`] writes
//! replies byte for byte as Redis does, in RESP2 or RESP3 ([`RespVersion`]). Client side (for
//! benchmarks and proxies): [`encode_command`] writes a command as an array of bulk strings and
//! [`decode_reply`] frames one reply, reporting its top-level kind and size without building
//! nested values.
//!
//! Layer 3: depends only on std. No I/O, no async. The server's RESP front end owns the
//! sockets, the query buffer and its limit ([`QUERY_BUFFER_LIMIT_BYTES`]), and the mapping of
//! commands onto the engine.
//!
//! Invariants:
//! - Decoding never sizes anything by a length or count the peer declared: a declared bulk
//!   length or element count is only compared with the bytes present, so a huge declaration
//!   yields "need more bytes" (`Ok(None)`) until the caller's own buffer limit gives up. Memory
//!   the decoders hold is bounded by the bytes buffered.
//! - Decoding never recurses: nested reply aggregates are skipped with a counter, and request
//!   parsing is a loop over the buffer, so no input can exhaust the stack.
//! - Decoding a request allocates nothing once a connection's [`Args`] has grown to its usual
//!   request size; encoding allocates only by growing the output `Vec` (numbers are formatted
//!   in stack buffers).
//! - Work is linear in the bytes: a pipeline decodes one request per call on
//!   `&buf[consumed..]`, and a request that arrives in pieces resumes where the last call
//!   stopped instead of starting over.
//! - [`decode_reply`] returns `Ok(Some((reply, size)))` only when all `size` bytes of one
//!   complete reply (attributes included) are at the start of the buffer.
//!
//! Request decoding follows Redis 7.x's `networking.c` exactly, quirks included (a NUL byte
//! before a line end stalls the line; the LF after a CR is not checked). The one known
//! difference in output is in [`encode::double_text`]: the shortest digits for a double, where
//! Redis's Grisu2 sometimes writes a longer or less close form of the same value.
//! `request.rs` and `encode.rs` state their module invariants.

pub mod encode;
mod reply;
mod request;

pub use encode::RespVersion;
pub use reply::{Malformed, Reply, decode_reply};
pub use request::{
    ARGUMENT_COUNT_MAX, Args, ArgsIter, INLINE_BYTES_MAX, QUERY_BUFFER_LIMIT_BYTES, RequestError,
    RequestLimits, UNAUTHENTICATED_ARGUMENT_COUNT_MAX, UNAUTHENTICATED_BULK_LENGTH_MAX_BYTES,
    UNAUTHENTICATED_QUERY_BUFFER_LIMIT_BYTES, decode_request, decode_request_with_limits,
    split_args,
};

pub use reply::{AGGREGATE_LENGTH_MAX, BULK_LENGTH_MAX_BYTES};

/// Appends `args` as one RESP command: `*<n>\r\n` then `$<len>\r\n<arg>\r\n` per argument.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    begin_command(out, args.len());
    for arg in args {
        push_argument(out, arg);
    }
}

/// Appends the header of a command of `argument_count` arguments; exactly that many
/// [`push_argument`] calls must follow. Lets a caller write arguments from different places
/// without collecting them first.
pub fn begin_command(out: &mut Vec<u8>, argument_count: usize) {
    encode::length_header(out, b'*', argument_count);
}

/// Appends one argument of a command begun with [`begin_command`], as a bulk string.
pub fn push_argument(out: &mut Vec<u8>, argument: &[u8]) {
    encode::length_header(out, b'$', argument.len());
    out.extend_from_slice(argument);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_command_writes_an_array_of_bulk_strings() {
        let mut out = Vec::new();
        encode_command(&mut out, &[b"SET", b"key", b""]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n");
        let mut piecewise = Vec::new();
        begin_command(&mut piecewise, 3);
        for argument in [&b"SET"[..], b"key", b""] {
            push_argument(&mut piecewise, argument);
        }
        assert_eq!(piecewise, out);
    }
}
