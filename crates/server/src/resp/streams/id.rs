//! Stream entry ids: `<ms>-<seq>` pairs, their text, and how Redis parses them (XADD's
//! `<ms>-*` included).

/// A stream entry id: milliseconds and sequence number, ordered as a pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

/// Longest text of an id: two 20-digit numbers and a dash.
const ID_TEXT_BYTES: usize = 41;

/// An id's text in place ([`StreamId::text_bytes`]).
pub struct IdText {
    bytes: [u8; ID_TEXT_BYTES],
    len: usize,
}

impl std::ops::Deref for IdText {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl StreamId {
    /// The smallest id, `0-0` (also "none" for `max_deleted_id`).
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest id.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// The next id, `None` after [`StreamId::MAX`].
    pub fn next(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId { ms: ms + 1, seq: 0 }),
            (ms, seq) => Some(StreamId { ms, seq: seq + 1 }),
        }
    }

    /// The previous id, `None` before [`StreamId::MIN`].
    pub fn prev(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId {
                ms: ms - 1,
                seq: u64::MAX,
            }),
            (ms, seq) => Some(StreamId { ms, seq: seq - 1 }),
        }
    }

    /// Its text, `<ms>-<seq>`.
    pub fn text(self) -> String {
        format!("{}-{}", self.ms, self.seq)
    }

    /// Its text's bytes, without allocating (an entry's id in every reply).
    pub fn text_bytes(self) -> IdText {
        use std::io::Write as _;
        let mut bytes = [0u8; ID_TEXT_BYTES];
        let mut cursor = std::io::Cursor::new(&mut bytes[..]);
        write!(cursor, "{}-{}", self.ms, self.seq).expect("two u64s and a dash fit");
        let len = cursor.position() as usize;
        IdText { bytes, len }
    }

    /// Parses `<ms>-<seq>`, or `<ms>` with `missing_seq`; `-` and `+` are the smallest and
    /// largest ids unless `strict`. `Err` on anything else (Redis's
    /// `streamGenericParseIDOrReply`, without its `<ms>-*` form: see [`parse_add_id`]).
    pub fn parse(bytes: &[u8], missing_seq: u64, strict: bool) -> Result<StreamId, ()> {
        match bytes {
            b"-" if !strict => return Ok(StreamId::MIN),
            b"+" if !strict => return Ok(StreamId::MAX),
            _ if bytes.len() > ID_TEXT_BYTES_MAX => return Err(()),
            _ => {}
        }
        match bytes.iter().position(|&b| b == b'-') {
            None => Ok(StreamId {
                ms: parse_u64(bytes)?,
                seq: missing_seq,
            }),
            Some(dash) => Ok(StreamId {
                ms: parse_u64(&bytes[..dash])?,
                seq: parse_u64(&bytes[dash + 1..])?,
            }),
        }
    }
}

/// Longest id text Redis parses (its 128-byte buffer, less the terminator).
const ID_TEXT_BYTES_MAX: usize = 127;

/// An XADD id: `<ms>-<seq>`, or `<ms>-*` / `<ms>` with the sequence to generate
/// (`seq_given` false for `<ms>-*` only; a bare `<ms>` means `<ms>-0`).
pub fn parse_add_id(bytes: &[u8]) -> Result<(StreamId, bool), ()> {
    if bytes.len() > ID_TEXT_BYTES_MAX {
        return Err(());
    }
    if let Some(ms) = bytes.strip_suffix(b"-*") {
        return Ok((
            StreamId {
                ms: parse_u64(ms)?,
                seq: 0,
            },
            false,
        ));
    }
    Ok((StreamId::parse(bytes, 0, true)?, true))
}

/// An unsigned decimal as Redis's `string2ull` takes one: digits (leading zeros and a `+`
/// allowed), at most `u64::MAX`.
fn parse_u64(bytes: &[u8]) -> Result<u64, ()> {
    let digits = bytes.strip_prefix(b"+").unwrap_or(bytes);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(());
    }
    std::str::from_utf8(digits)
        .map_err(|_| ())?
        .parse()
        .map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    #[test]
    fn ids_parse_as_redis_parses_them() {
        assert_eq!(StreamId::parse(b"5", 0, true), Ok(id(5, 0)));
        assert_eq!(StreamId::parse(b"5", u64::MAX, true), Ok(id(5, u64::MAX)));
        assert_eq!(StreamId::parse(b"5-3", 0, true), Ok(id(5, 3)));
        assert_eq!(StreamId::parse(b"007-+1", 0, true), Ok(id(7, 1)));
        assert_eq!(StreamId::parse(b"-", 0, false), Ok(StreamId::MIN));
        assert_eq!(StreamId::parse(b"+", 0, false), Ok(StreamId::MAX));
        assert!(StreamId::parse(b"-", 0, true).is_err());
        assert!(StreamId::parse(b"5-", 0, true).is_err());
        assert!(StreamId::parse(b"a-1", 0, true).is_err());
        assert!(StreamId::parse(b"18446744073709551616", 0, true).is_err());
        assert_eq!(parse_add_id(b"5-*"), Ok((id(5, 0), false)));
        assert_eq!(parse_add_id(b"5"), Ok((id(5, 0), true)));
    }

    #[test]
    fn ids_step_across_their_parts() {
        assert_eq!(id(1, u64::MAX).next(), Some(id(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(id(2, 0).prev(), Some(id(1, u64::MAX)));
        assert_eq!(StreamId::MIN.prev(), None);
    }
}
