//! The target over the Redis protocol codec: client requests (server side) and replies (client
//! side), from the same bytes.
//!
//! Invariants the target asserts, beyond "no panic":
//! - A pipeline decodes to the same requests, bytes and error whether its bytes arrive whole or
//!   one at a time, and the decoder never holds more memory than the buffered bytes warrant.
//! - A decoded request never claims more bytes than it was given, and a strict prefix of it,
//!   decoded afresh, is only ever "need more bytes".
//! - A decoded request re-encodes with [`encode_command`] into bytes that decode to the same
//!   arguments, spanning exactly those bytes.
//! - A decoded reply never claims more bytes than it was given, a strict prefix of it is only
//!   ever "need more bytes", and a scalar reply re-encodes to itself.

use wire_resp::{
    Args, INLINE_BYTES_MAX, Reply, RequestError, RequestLimits, decode_reply,
    decode_request_with_limits, encode, encode_command,
};

use crate::input::Input;

/// Memory the decoder may hold beyond twice the buffered bytes: the arena and argument list a
/// warm [`Args`] keeps between requests.
const ALLOCATION_SLACK_BYTES: usize = 128 * 1024;

/// How many strict prefixes of each decoded request or reply are decoded afresh: enough to
/// cut inside each line and payload of a small request, without making long inputs quadratic.
const PREFIX_CHECKS_MAX: usize = 24;

/// What a connection saw: the requests decoded in order, the bytes they spanned, then the
/// error if one closed the connection.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    requests: Vec<Vec<Vec<u8>>>,
    consumed_bytes: usize,
    error: Option<RequestError>,
}

/// Target `resp`: the first byte picks the request limits (bit 0: the connection must still
/// authenticate); the rest is decoded as a pipeline of requests, and again as replies.
pub fn resp(data: &[u8]) {
    let mut input = Input::new(data);
    let limits = RequestLimits {
        unauthenticated: input.byte() & 1 == 1,
        ..RequestLimits::DEFAULT
    };
    let bytes = input.take_rest();
    // Above the inline limit, whether a line too long is refused depends on how it was read
    // (as in Redis), so the whole-versus-piecewise comparison would not hold.
    if bytes.len() > INLINE_BYTES_MAX {
        return;
    }
    let whole = decode_chunks(&[bytes], limits);
    let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(decode_chunks(&chunks, limits), whole, "byte by byte");
    check_requests_one_by_one(bytes, limits);
    check_replies(bytes);
}

/// Plays a connection: appends each chunk to the query buffer, decodes every complete request,
/// and drops consumed bytes from the front, as the server front end does.
fn decode_chunks(chunks: &[&[u8]], limits: RequestLimits) -> Outcome {
    let mut buffer = Vec::new();
    let mut args = Args::new();
    let mut outcome = Outcome {
        requests: Vec::new(),
        consumed_bytes: 0,
        error: None,
    };
    for chunk in chunks {
        buffer.extend_from_slice(chunk);
        let mut start = 0;
        loop {
            let rest = &buffer[start..];
            let result = decode_request_with_limits(rest, &mut args, limits);
            let allowed_bytes = 2 * buffer.len() + ALLOCATION_SLACK_BYTES;
            assert!(
                args.allocated_bytes() <= allowed_bytes,
                "{} bytes held for a {}-byte buffer",
                args.allocated_bytes(),
                buffer.len()
            );
            match result {
                Ok(Some(consumed)) => {
                    assert!(
                        consumed > 0 && consumed <= rest.len(),
                        "{consumed} of {}",
                        rest.len()
                    );
                    assert!(args.total_bytes() <= consumed);
                    outcome
                        .requests
                        .push(args.iter().map(<[u8]>::to_vec).collect());
                    outcome.consumed_bytes += consumed;
                    start += consumed;
                }
                Ok(None) => break,
                Err(error) => {
                    assert!(args.is_empty(), "an error leaves no arguments behind");
                    outcome.error = Some(error);
                    return outcome;
                }
            }
        }
        buffer.drain(..start);
    }
    outcome
}

/// Decodes the pipeline one request at a time, checking each against its prefixes and its
/// re-encoding.
fn check_requests_one_by_one(bytes: &[u8], limits: RequestLimits) {
    let mut args = Args::new();
    let mut again = Args::new();
    let mut start = 0;
    while let Ok(Some(consumed)) = decode_request_with_limits(&bytes[start..], &mut args, limits) {
        let request = &bytes[start..start + consumed];
        for prefix_size_bytes in prefix_sizes(consumed) {
            let mut fresh = Args::new();
            let prefix = &request[..prefix_size_bytes];
            assert_eq!(
                decode_request_with_limits(prefix, &mut fresh, limits),
                Ok(None),
                "a strict prefix of {prefix_size_bytes} bytes of {:?}",
                request.escape_ascii().to_string()
            );
        }
        if !args.is_empty() {
            let arguments: Vec<&[u8]> = args.iter().collect();
            let mut encoded = Vec::new();
            encode_command(&mut encoded, &arguments);
            // Re-decoded under the default limits: the encoding may be longer than the
            // inline form that an unauthenticated connection accepted.
            let decoded = decode_request_with_limits(&encoded, &mut again, RequestLimits::DEFAULT);
            assert_eq!(
                decoded,
                Ok(Some(encoded.len())),
                "an encoded command decodes whole"
            );
            assert_eq!(again.iter().collect::<Vec<_>>(), arguments);
        }
        start += consumed;
    }
}

/// Decodes the bytes as a stream of replies, checking each against its prefixes and, for a
/// scalar, its re-encoding.
fn check_replies(bytes: &[u8]) {
    let mut start = 0;
    while let Ok(Some((reply, size_bytes))) = decode_reply(&bytes[start..]) {
        let rest = &bytes[start..];
        assert!(
            size_bytes > 0 && size_bytes <= rest.len(),
            "{size_bytes} of {}",
            rest.len()
        );
        for prefix_size_bytes in prefix_sizes(size_bytes) {
            assert_eq!(
                decode_reply(&rest[..prefix_size_bytes]),
                Ok(None),
                "a strict prefix of {prefix_size_bytes} bytes of a reply"
            );
        }
        check_reply_round_trip(reply);
        start += size_bytes;
    }
}

fn check_reply_round_trip(reply: Reply<'_>) {
    let line_safe = |text: &[u8]| !text.iter().any(|byte| matches!(byte, b'\r' | b'\n'));
    let mut encoded = Vec::new();
    match reply {
        Reply::Simple(text) if line_safe(text) => encode::simple_string(&mut encoded, text),
        Reply::Error(text) if line_safe(text) => encode::error(&mut encoded, text),
        Reply::Integer(value) => encode::integer(&mut encoded, value),
        Reply::Bulk(bytes) => encode::bulk_string(&mut encoded, bytes),
        _ => return,
    }
    assert_eq!(
        decode_reply(&encoded),
        Ok(Some((reply, encoded.len()))),
        "a scalar reply re-encodes to itself"
    );
}

/// Up to [`PREFIX_CHECKS_MAX`] strict prefix lengths of a `size_bytes` span: every length for a
/// short span, else evenly spread ones plus the last few.
fn prefix_sizes(size_bytes: usize) -> impl Iterator<Item = usize> {
    let step = size_bytes.div_ceil(PREFIX_CHECKS_MAX / 2).max(1);
    let spread = (0..size_bytes).step_by(step);
    let tail = size_bytes.saturating_sub(PREFIX_CHECKS_MAX / 2)..size_bytes;
    spread.chain(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_sizes_are_strict_and_include_the_last_byte() {
        let sizes: Vec<usize> = prefix_sizes(1000).collect();
        assert!(sizes.len() <= PREFIX_CHECKS_MAX + 1);
        assert!(sizes.iter().all(|&size| size < 1000));
        assert!(sizes.contains(&999) && sizes.contains(&0));
        assert_eq!(prefix_sizes(3).collect::<Vec<_>>(), [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn a_pipeline_of_both_forms_passes_every_check() {
        resp(b"\0SET a b\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n\"x\\x41\" 'y'\n");
        resp(b"\x01+OK\r\n:-12\r\n$3\r\nabc\r\n*2\r\n$1\r\na\r\n:1\r\n");
    }
}
