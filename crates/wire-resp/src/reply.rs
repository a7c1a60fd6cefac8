//! Framing one RESP2/RESP3 reply: its top-level kind and its size in bytes.

/// Largest bulk string accepted, as Redis's default `proto-max-bulk-len` (512 MiB).
pub const BULK_LENGTH_MAX_BYTES: u64 = 512 * 1024 * 1024;

/// Largest element count accepted in one aggregate (Redis limits a multibulk to 2^31 - 1).
pub const AGGREGATE_LENGTH_MAX: u64 = i32::MAX as u64;

/// Bytes that cannot be a valid RESP reply. `reason` is a static human string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// What is wrong, for logs and error messages.
    pub reason: &'static str,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed RESP reply: {}", self.reason)
    }
}

impl std::error::Error for Malformed {}

const fn malformed(reason: &'static str) -> Malformed {
    Malformed { reason }
}

/// The top level of one reply, borrowing from the buffer. Aggregates are not materialized:
/// their elements were checked and skipped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reply<'a> {
    /// `+OK`: the text after the prefix.
    Simple(&'a [u8]),
    /// `-ERR ...` or a RESP3 bulk error `!`: the message.
    Error(&'a [u8]),
    /// `:42`.
    Integer(i64),
    /// `$3\r\nfoo` or a RESP3 verbatim string `=` (with its `txt:` prefix).
    Bulk(&'a [u8]),
    /// `$-1`, `*-1` or the RESP3 `_`.
    Null,
    /// RESP3 `#t` / `#f`.
    Boolean(bool),
    /// RESP3 `,` double or `(` big number, as text.
    Number(&'a [u8]),
    /// `*` array, `~` set, `>` push (`element_count` values) or `%` map (`element_count`
    /// key-value pairs).
    Aggregate {
        /// The type byte: `*`, `~`, `>` or `%`.
        kind: u8,
        /// Elements, or pairs for a map.
        element_count: usize,
    },
}

/// One parsed type header and what must be skipped after it.
enum Head<'a> {
    /// A complete value.
    Value(Reply<'a>),
    /// An aggregate value whose `children` values follow.
    Aggregate(Reply<'a>, u64),
    /// An attribute map: `children` values follow, then the value it annotates.
    Attribute(u64),
}

/// Frames the reply at the start of `buf`: `Ok(None)` when more bytes are needed, else the
/// top-level reply (after any RESP3 attributes) and the number of bytes it spans.
///
/// # Errors
///
/// [`Malformed`] on an unknown type byte, a bad length or number, a missing CRLF after a bulk
/// payload, or a length above [`BULK_LENGTH_MAX_BYTES`] / [`AGGREGATE_LENGTH_MAX`].
pub fn decode_reply(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, Malformed> {
    let mut position = 0;
    loop {
        let Some((head, next)) = parse_head(buf, position)? else {
            return Ok(None);
        };
        position = next;
        match head {
            Head::Attribute(children) => match skip_values(buf, position, children)? {
                Some(next) => position = next,
                None => return Ok(None),
            },
            Head::Value(reply) => return Ok(Some((reply, position))),
            Head::Aggregate(reply, children) => {
                return Ok(skip_values(buf, position, children)?.map(|end| (reply, end)));
            }
        }
    }
}

/// Skips `pending` complete values starting at `position`; returns the position after them.
fn skip_values(
    buf: &[u8],
    mut position: usize,
    mut pending: u64,
) -> Result<Option<usize>, Malformed> {
    while pending > 0 {
        let Some((head, next)) = parse_head(buf, position)? else {
            return Ok(None);
        };
        position = next;
        pending -= 1;
        match head {
            Head::Value(_) => {}
            Head::Aggregate(_, children) => pending = pending.saturating_add(children),
            // The attribute is not a value: its pairs and the value it annotates follow.
            Head::Attribute(children) => pending = pending.saturating_add(children + 1),
        }
    }
    Ok(Some(position))
}

/// Parses the type byte and header line at `position` (and a bulk payload).
fn parse_head(buf: &[u8], position: usize) -> Result<Option<(Head<'_>, usize)>, Malformed> {
    let Some(&kind) = buf.get(position) else {
        return Ok(None);
    };
    let Some((line, after_line)) = split_line(buf, position + 1) else {
        return Ok(None);
    };
    let value = |reply| Ok(Some((Head::Value(reply), after_line)));
    match kind {
        b'+' => value(Reply::Simple(line)),
        b'-' => value(Reply::Error(line)),
        b':' => value(Reply::Integer(parse_integer(line)?)),
        b',' | b'(' => value(Reply::Number(line)),
        b'_' if line.is_empty() => value(Reply::Null),
        b'#' => match line {
            b"t" => value(Reply::Boolean(true)),
            b"f" => value(Reply::Boolean(false)),
            _ => Err(malformed("boolean is neither t nor f")),
        },
        b'$' | b'=' | b'!' => parse_bulk(buf, kind, line, after_line),
        b'*' | b'~' | b'>' | b'%' | b'|' => parse_aggregate(kind, line, after_line),
        _ => Err(malformed("unknown reply type byte")),
    }
}

fn parse_bulk<'a>(
    buf: &'a [u8],
    kind: u8,
    line: &[u8],
    after_line: usize,
) -> Result<Option<(Head<'a>, usize)>, Malformed> {
    let length = parse_integer(line)?;
    if length == -1 && kind == b'$' {
        return Ok(Some((Head::Value(Reply::Null), after_line)));
    }
    let length = u64::try_from(length).map_err(|_| malformed("negative bulk length"))?;
    if length > BULK_LENGTH_MAX_BYTES {
        return Err(malformed("bulk length above 512 MiB"));
    }
    // Compared, never allocated: the payload must already be in `buf`.
    let available = (buf.len() - after_line) as u64;
    if available < length + 2 {
        return Ok(None);
    }
    let end = after_line + length as usize;
    if &buf[end..end + 2] != b"\r\n" {
        return Err(malformed("bulk payload not followed by CRLF"));
    }
    let payload = &buf[after_line..end];
    let reply = if kind == b'!' {
        Reply::Error(payload)
    } else {
        Reply::Bulk(payload)
    };
    Ok(Some((Head::Value(reply), end + 2)))
}

fn parse_aggregate<'a>(
    kind: u8,
    line: &[u8],
    after_line: usize,
) -> Result<Option<(Head<'a>, usize)>, Malformed> {
    let length = parse_integer(line)?;
    if length == -1 && kind == b'*' {
        return Ok(Some((Head::Value(Reply::Null), after_line)));
    }
    let length = u64::try_from(length).map_err(|_| malformed("negative aggregate length"))?;
    if length > AGGREGATE_LENGTH_MAX {
        return Err(malformed("aggregate length above 2^31 - 1"));
    }
    let children = if matches!(kind, b'%' | b'|') {
        length * 2
    } else {
        length
    };
    if kind == b'|' {
        return Ok(Some((Head::Attribute(children), after_line)));
    }
    let element_count = usize::try_from(length).map_err(|_| malformed("aggregate too long"))?;
    let reply = Reply::Aggregate {
        kind,
        element_count,
    };
    Ok(Some((Head::Aggregate(reply, children), after_line)))
}

/// The bytes from `start` up to the next CRLF, and the position after the CRLF.
fn split_line(buf: &[u8], start: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(start..)?;
    let end = rest.windows(2).position(|pair| pair == b"\r\n")?;
    Some((&rest[..end], start + end + 2))
}

fn parse_integer(text: &[u8]) -> Result<i64, Malformed> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .ok_or(malformed("not an integer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Option<(Reply<'_>, usize)> {
        decode_reply(bytes).unwrap()
    }

    #[test]
    fn scalars_decode_with_their_size() {
        assert_eq!(decode(b"+OK\r\n"), Some((Reply::Simple(b"OK"), 5)));
        assert_eq!(
            decode(b"-ERR nope\r\nxx"),
            Some((Reply::Error(b"ERR nope"), 11))
        );
        assert_eq!(decode(b":-42\r\n"), Some((Reply::Integer(-42), 6)));
        assert_eq!(decode(b"$3\r\nfoo\r\n"), Some((Reply::Bulk(b"foo"), 9)));
        assert_eq!(decode(b"$0\r\n\r\n"), Some((Reply::Bulk(b""), 6)));
        assert_eq!(decode(b"$-1\r\n"), Some((Reply::Null, 5)));
        assert_eq!(decode(b"*-1\r\n"), Some((Reply::Null, 5)));
        assert_eq!(decode(b"_\r\n"), Some((Reply::Null, 3)));
        assert_eq!(decode(b"#t\r\n"), Some((Reply::Boolean(true), 4)));
        assert_eq!(decode(b",1.5\r\n"), Some((Reply::Number(b"1.5"), 6)));
        assert_eq!(decode(b"!3\r\nERR\r\n"), Some((Reply::Error(b"ERR"), 9)));
    }

    #[test]
    fn aggregates_span_all_their_nested_elements() {
        let array = b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n";
        let expected = Reply::Aggregate {
            kind: b'*',
            element_count: 2,
        };
        assert_eq!(decode(array), Some((expected, array.len())));
        let map = b"%1\r\n+k\r\n~2\r\n:1\r\n:2\r\n+next";
        let (reply, size) = decode(map).unwrap();
        assert_eq!(
            reply,
            Reply::Aggregate {
                kind: b'%',
                element_count: 1
            }
        );
        assert_eq!(&map[size..], b"+next");
    }

    #[test]
    fn attributes_are_skipped_and_counted_in_the_size() {
        let bytes = b"|1\r\n+key\r\n+value\r\n:7\r\n";
        assert_eq!(decode(bytes), Some((Reply::Integer(7), bytes.len())));
    }

    #[test]
    fn every_proper_prefix_needs_more_bytes() {
        let reply = b"*3\r\n$5\r\nhello\r\n%1\r\n+a\r\n:1\r\n|1\r\n+x\r\n+y\r\n_\r\n";
        assert_eq!(decode(reply).unwrap().1, reply.len());
        for end in 0..reply.len() {
            assert_eq!(
                decode_reply(&reply[..end]),
                Ok(None),
                "prefix of {end} bytes"
            );
        }
    }

    #[test]
    fn huge_declared_lengths_are_never_allocated() {
        assert_eq!(decode_reply(b"$536870912\r\nabc"), Ok(None));
        assert!(decode_reply(b"$536870913\r\n").is_err());
        assert_eq!(decode_reply(b"*2147483647\r\n:1\r\n"), Ok(None));
        assert!(decode_reply(b"*2147483648\r\n").is_err());
    }

    #[test]
    fn malformed_replies_are_rejected() {
        for bad in [
            &b"?x\r\n"[..],
            b":12a\r\n",
            b"$-2\r\n",
            b"$3\r\nfooXY",
            b"*-2\r\n",
            b"#x\r\n",
            b"_x\r\n",
            b"%-1\r\n",
        ] {
            assert!(
                decode_reply(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let mut bytes = b"*1\r\n".repeat(100_000);
        bytes.extend_from_slice(b":1\r\n");
        let (_, size) = decode(&bytes).unwrap();
        assert_eq!(size, bytes.len());
    }
}
