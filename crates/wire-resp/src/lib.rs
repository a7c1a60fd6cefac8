//! The Redis protocol (RESP2 and RESP3) as a pure codec.
//!
//! What it does today: encodes a command as an array of bulk strings ([`encode_command`]) and
//! frames one reply at the start of a byte buffer ([`decode_reply`]), reporting its top-level
//! kind and how many bytes it spans, without building nested values. That is what a benchmark
//! or proxy client needs; the server side (request parsing, reply encoding) joins it with the
//! RESP front end.
//!
//! Layer 3: depends only on std. No I/O, no async.
//!
//! Invariants:
//! - Decoding never allocates and never sizes anything by a length the peer declared: a declared
//!   bulk length or element count is only compared with the bytes present, so a huge declaration
//!   yields "need more bytes" (`Ok(None)`) until the caller's own buffer limit gives up.
//! - Nested aggregates are skipped with a counter, not recursion, so nesting depth cannot
//!   exhaust the stack.
//! - [`decode_reply`] returns `Ok(Some((reply, size)))` only when all `size` bytes of one
//!   complete reply (attributes included) are at the start of the buffer.

mod reply;

pub use reply::{Malformed, Reply, decode_reply};

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
    write_length_line(out, b'*', argument_count);
}

/// Appends one argument of a command begun with [`begin_command`], as a bulk string.
pub fn push_argument(out: &mut Vec<u8>, argument: &[u8]) {
    write_length_line(out, b'$', argument.len());
    out.extend_from_slice(argument);
    out.extend_from_slice(b"\r\n");
}

fn write_length_line(out: &mut Vec<u8>, prefix: u8, length: usize) {
    out.push(prefix);
    out.extend_from_slice(length.to_string().as_bytes());
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
