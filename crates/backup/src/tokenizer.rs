//! The byte-level reader under the decoder: literals, numbers, escaped names, and values read
//! by their length.
//!
//! Invariants:
//! - `line` is 1 plus the number of LF bytes consumed so far, raw values included.
//! - `offset` is the number of bytes consumed so far.
//! - A byte is consumed only after it has been checked, so an error's line is the line of the
//!   offending byte, not the next one.
//! - No read allocates more than the bytes that have arrived, rounded up to one chunk; a
//!   declared length is checked against the limit before anything is read.

use std::io::{BufRead, ErrorKind};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::error::{DecodeError, DecodeErrorKind, Found};
use crate::limits::{LENGTH_MAX, VALUE_CHUNK_BYTES};

/// Most digits read for a 64-bit number: 20 for `u64::MAX`; more means a malformed field.
const NUMBER_DIGITS_MAX: usize = 20;

/// How a name token ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delimiter {
    /// An unescaped space, consumed.
    Space,
    /// An unescaped LF, consumed.
    LineFeed,
}

/// What a name token may be.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NameRule {
    /// The field's name, for errors.
    pub field: &'static str,
    /// Longest value after unescaping.
    pub max_bytes: usize,
    /// Whether an empty name is allowed.
    pub empty_allowed: bool,
}

pub(crate) struct Tokenizer<R> {
    reader: R,
    line: u64,
    offset: u64,
    /// Whether `\` escapes the next byte (version 3.1) or is an ordinary byte (3.0).
    escaping: bool,
}

type Result<T> = std::result::Result<T, DecodeError>;

impl<R: BufRead> Tokenizer<R> {
    pub(crate) fn new(reader: R) -> Tokenizer<R> {
        Tokenizer {
            reader,
            line: 1,
            offset: 0,
            escaping: true,
        }
    }

    pub(crate) fn line(&self) -> u64 {
        self.line
    }

    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    pub(crate) fn set_escaping(&mut self, escaping: bool) {
        self.escaping = escaping;
    }

    pub(crate) fn into_inner(self) -> R {
        self.reader
    }

    /// An error of `kind` at the current line.
    pub(crate) fn error(&self, kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            line: self.line,
            kind,
        }
    }

    /// The next byte without consuming it, or `None` at the end of the stream.
    pub(crate) fn peek(&mut self) -> Result<Option<u8>> {
        loop {
            match self.reader.fill_buf() {
                Ok(buffer) => return Ok(buffer.first().copied()),
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(error) => return Err(self.error(DecodeErrorKind::Io(error))),
            }
        }
    }

    /// Consumes one byte that `peek` returned.
    fn consume_peeked(&mut self, byte: u8) {
        self.reader.consume(1);
        self.offset += 1;
        if byte == b'\n' {
            self.line += 1;
        }
    }

    /// The next byte, consumed, or an `Unexpected` error naming `expected` at the end of the
    /// stream.
    pub(crate) fn next_byte(&mut self, expected: &'static str) -> Result<u8> {
        match self.peek()? {
            Some(byte) => {
                self.consume_peeked(byte);
                Ok(byte)
            }
            None => Err(self.unexpected(expected, &[], true)),
        }
    }

    fn unexpected(&self, expected: &'static str, prefix: &[u8], end_of_file: bool) -> DecodeError {
        let mut found = Found::bytes(prefix);
        found.end_of_file = end_of_file;
        self.error(DecodeErrorKind::Unexpected { expected, found })
    }

    /// Consumes exactly `literal`, or fails naming `expected` and what was there instead.
    pub(crate) fn expect(&mut self, literal: &[u8], expected: &'static str) -> Result<()> {
        self.expect_one_of(&[literal], expected).map(|_| ())
    }

    /// Consumes one of `literals` and returns its position in the slice. No literal may be a
    /// prefix of another (each ends in the space or LF that separates it from what follows).
    pub(crate) fn expect_one_of(
        &mut self,
        literals: &[&[u8]],
        expected: &'static str,
    ) -> Result<usize> {
        debug_assert!(
            literals.iter().enumerate().all(|(a, first)| {
                literals
                    .iter()
                    .enumerate()
                    .all(|(b, second)| a == b || !second.starts_with(first))
            }),
            "no literal may be a prefix of another"
        );
        let mut prefix: Vec<u8> = Vec::new();
        loop {
            if let Some(done) = literals.iter().position(|literal| *literal == prefix) {
                return Ok(done);
            }
            let Some(byte) = self.peek()? else {
                return Err(self.unexpected(expected, &prefix, true));
            };
            prefix.push(byte);
            if !literals.iter().any(|literal| literal.starts_with(&prefix)) {
                return Err(self.unexpected(expected, &prefix, false));
            }
            self.consume_peeked(byte);
        }
    }

    /// An unsigned decimal of at least one digit, at most `max`; the byte after it is not
    /// consumed.
    pub(crate) fn read_unsigned(
        &mut self,
        field: &'static str,
        expected: &'static str,
        max: u64,
    ) -> Result<u64> {
        let digits = self.read_digits(expected)?;
        let mut value: u64 = 0;
        for digit in digits {
            value = value
                .checked_mul(10)
                .and_then(|value| value.checked_add(u64::from(digit - b'0')))
                .ok_or_else(|| self.error(DecodeErrorKind::NumberOutOfRange { field, max }))?;
        }
        if value > max {
            return Err(self.error(DecodeErrorKind::NumberOutOfRange { field, max }));
        }
        Ok(value)
    }

    /// A signed 64-bit decimal: an optional `-` (never `+`), then at least one digit.
    pub(crate) fn read_signed(
        &mut self,
        field: &'static str,
        expected: &'static str,
    ) -> Result<i64> {
        let negative = self.peek()? == Some(b'-');
        if negative {
            self.consume_peeked(b'-');
        }
        let magnitude_max = if negative {
            i64::MIN.unsigned_abs()
        } else {
            i64::MAX.unsigned_abs()
        };
        let magnitude = self.read_unsigned(field, expected, magnitude_max)?;
        Ok(if negative {
            0_i64.wrapping_sub_unsigned(magnitude)
        } else {
            i64::try_from(magnitude).expect("magnitude was checked against i64::MAX")
        })
    }

    /// One or more ASCII digits, at most [`NUMBER_DIGITS_MAX`].
    fn read_digits(&mut self, expected: &'static str) -> Result<Vec<u8>> {
        let mut digits = Vec::new();
        while let Some(byte) = self.peek()? {
            if !byte.is_ascii_digit() {
                break;
            }
            if digits.len() == NUMBER_DIGITS_MAX {
                return Err(self.unexpected(expected, &digits, false));
            }
            digits.push(byte);
            self.consume_peeked(byte);
        }
        if digits.is_empty() {
            let found = self.peek()?;
            let prefix: &[u8] = match &found {
                Some(byte) => std::slice::from_ref(byte),
                None => &[],
            };
            return Err(self.unexpected(expected, prefix, found.is_none()));
        }
        Ok(digits)
    }

    /// A name up to an unescaped space or LF, which is consumed and returned. `\` escapes the
    /// next byte, which must be `\`, space or LF (3.1 only). NUL is refused.
    pub(crate) fn read_name(&mut self, rule: NameRule) -> Result<(Vec<u8>, Delimiter)> {
        let mut name = Vec::new();
        loop {
            let byte = self.next_byte(rule.field)?;
            let literal = match byte {
                b' ' => return self.finish_name(rule, name, Delimiter::Space),
                b'\n' => return self.finish_name(rule, name, Delimiter::LineFeed),
                b'\\' if self.escaping => self.read_escaped_byte()?,
                0 => return Err(self.error(DecodeErrorKind::NulInToken { field: rule.field })),
                other => other,
            };
            if name.len() == rule.max_bytes {
                return Err(self.error(DecodeErrorKind::TokenTooLong {
                    field: rule.field,
                    max_bytes: rule.max_bytes,
                }));
            }
            name.push(literal);
        }
    }

    fn read_escaped_byte(&mut self) -> Result<u8> {
        match self.peek()? {
            Some(byte @ (b'\\' | b' ' | b'\n')) => {
                self.consume_peeked(byte);
                Ok(byte)
            }
            Some(byte) => Err(self.error(DecodeErrorKind::InvalidEscape {
                found: Found::bytes(&[byte]),
            })),
            None => Err(self.error(DecodeErrorKind::InvalidEscape {
                found: Found::end_of_file(),
            })),
        }
    }

    fn finish_name(
        &self,
        rule: NameRule,
        name: Vec<u8>,
        delimiter: Delimiter,
    ) -> Result<(Vec<u8>, Delimiter)> {
        if name.is_empty() && !rule.empty_allowed {
            // The delimiter was consumed; an LF moved the count to the next line.
            let line = self.line - u64::from(delimiter == Delimiter::LineFeed);
            return Err(DecodeError {
                line,
                kind: DecodeErrorKind::EmptyToken { field: rule.field },
            });
        }
        Ok((name, delimiter))
    }

    /// Bytes up to the next LF, which is consumed; none of them may be a space. For tokens
    /// that are never escaped: floats, digests, base64 contexts.
    pub(crate) fn read_to_line_end(
        &mut self,
        field: &'static str,
        max_bytes: usize,
    ) -> Result<Vec<u8>> {
        let mut text = Vec::new();
        loop {
            let byte = self.next_byte(field)?;
            if byte == b'\n' {
                return Ok(text);
            }
            if text.len() == max_bytes {
                return Err(self.error(DecodeErrorKind::TokenTooLong { field, max_bytes }));
            }
            text.push(byte);
        }
    }

    /// Exactly `length` raw bytes; the caller has checked `length` against its limit. Memory
    /// grows with the bytes that arrive, never ahead of them by more than one chunk.
    pub(crate) fn read_raw(&mut self, length: u64, expected: &'static str) -> Result<Vec<u8>> {
        assert!(
            length <= LENGTH_MAX,
            "length {length} was checked by the caller"
        );
        let length = usize::try_from(length).expect("a 32-bit length fits usize");
        let mut bytes = Vec::with_capacity(length.min(VALUE_CHUNK_BYTES));
        while bytes.len() < length {
            let available = match self.reader.fill_buf() {
                Ok(available) => available,
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(error) => return Err(self.error(DecodeErrorKind::Io(error))),
            };
            if available.is_empty() {
                return Err(self.unexpected(expected, &[], true));
            }
            let take = available.len().min(length - bytes.len());
            let chunk = &available[..take];
            let line_feeds = chunk.iter().filter(|&&byte| byte == b'\n').count();
            reserve_within(&mut bytes, take, length);
            bytes.extend_from_slice(chunk);
            self.reader.consume(take);
            self.offset += take as u64;
            self.line += line_feeds as u64;
        }
        assert_eq!(bytes.len(), length);
        Ok(bytes)
    }

    /// Exactly `length` characters of padded standard base64, decoded. `length` is a multiple
    /// of 4 the caller has checked against its limit; padding may appear only at the end.
    pub(crate) fn read_base64(
        &mut self,
        length: u64,
        field: &'static str,
        expected: &'static str,
    ) -> Result<Vec<u8>> {
        assert!(
            length.is_multiple_of(4),
            "base64 length {length} was checked by the caller"
        );
        let mut decoded = Vec::new();
        let mut remaining = length;
        while remaining > 0 {
            let chunk_length = remaining.min(VALUE_CHUNK_BYTES as u64);
            let text = self.read_raw(chunk_length, expected)?;
            remaining -= chunk_length;
            let padding_inside = remaining > 0 && text.contains(&b'=');
            if padding_inside || STANDARD.decode_vec(&text, &mut decoded).is_err() {
                return Err(self.error(DecodeErrorKind::InvalidBase64 { field }));
            }
        }
        Ok(decoded)
    }
}

/// Makes room for `additional` more bytes, doubling as a `Vec` does but never past `limit`.
fn reserve_within(bytes: &mut Vec<u8>, additional: usize, limit: usize) {
    let needed = bytes.len() + additional;
    if needed <= bytes.capacity() {
        return;
    }
    let target = needed.max(bytes.capacity() * 2).min(limit);
    bytes.reserve_exact(target - bytes.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: NameRule = NameRule {
        field: "a name",
        max_bytes: 8,
        empty_allowed: false,
    };

    #[test]
    fn names_unescape_and_report_their_delimiter() {
        let mut tokenizer = Tokenizer::new(&b"a\\ b\\\\c\\\nd rest\n"[..]);
        let (name, delimiter) = tokenizer.read_name(NAME).expect("valid name");
        assert_eq!(name, b"a b\\c\nd");
        assert_eq!(delimiter, Delimiter::Space);
        assert_eq!(tokenizer.line(), 2);
    }

    #[test]
    fn names_refuse_bad_escapes_nul_and_excess_length() {
        let kinds = [&b"a\\tb "[..], b"a\0b ", b"abcdefghi ", b" "].map(|input| {
            Tokenizer::new(input)
                .read_name(NAME)
                .map_err(|error| error.kind)
        });
        assert!(matches!(
            kinds[0],
            Err(DecodeErrorKind::InvalidEscape { .. })
        ));
        assert!(matches!(kinds[1], Err(DecodeErrorKind::NulInToken { .. })));
        assert!(matches!(
            kinds[2],
            Err(DecodeErrorKind::TokenTooLong { .. })
        ));
        assert!(matches!(kinds[3], Err(DecodeErrorKind::EmptyToken { .. })));
    }

    #[test]
    fn unescaped_names_take_backslashes_literally() {
        let mut tokenizer = Tokenizer::new(&b"a\\b\n"[..]);
        tokenizer.set_escaping(false);
        let (name, _) = tokenizer.read_name(NAME).expect("valid 3.0 name");
        assert_eq!(name, b"a\\b");
    }

    #[test]
    fn numbers_check_range_digits_and_sign() {
        let read = |input: &[u8]| Tokenizer::new(input).read_signed("n", "a number").ok();
        assert_eq!(read(b"-9223372036854775808 "), Some(i64::MIN));
        assert_eq!(read(b"9223372036854775807\n"), Some(i64::MAX));
        assert_eq!(read(b"9223372036854775808\n"), None);
        assert_eq!(read(b"+1\n"), None);
        assert_eq!(read(b"-\n"), None);
        assert_eq!(read(b"000000000000000000001\n"), None);
        let unsigned = Tokenizer::new(&b"65536\n"[..]).read_unsigned("n", "a number", 65535);
        assert!(matches!(
            unsigned.map_err(|error| error.kind),
            Err(DecodeErrorKind::NumberOutOfRange { max: 65535, .. })
        ));
    }

    #[test]
    fn expect_one_of_reports_the_prefix_it_found() {
        let mut tokenizer = Tokenizer::new(&b"+ x 1\n"[..]);
        let error = tokenizer
            .expect_one_of(&[b"+ s ", b"+ g "], "\"+ s\" or \"+ g\"")
            .expect_err("no literal matches");
        assert_eq!(
            error.to_string(),
            "line 1: expected \"+ s\" or \"+ g\", found \"+ x\""
        );
        let mut tokenizer = Tokenizer::new(&b"B! 3"[..]);
        let position = tokenizer.expect_one_of(&[b"B ", b"B! "], "a key type");
        assert_eq!(position.ok(), Some(1));
    }

    #[test]
    fn raw_reads_count_line_feeds_and_detect_truncation() {
        let mut tokenizer = Tokenizer::new(&b"a\nb\nc"[..]);
        assert_eq!(
            tokenizer.read_raw(4, "bytes").ok(),
            Some(b"a\nb\n".to_vec())
        );
        assert_eq!(tokenizer.line(), 3);
        let error = tokenizer
            .read_raw(2, "bytes")
            .expect_err("only one byte left");
        assert_eq!(error.line, 3);
    }

    #[test]
    fn base64_refuses_padding_before_the_last_chunk() {
        let mut text = b"AA==".to_vec();
        text.extend(std::iter::repeat_n(b'A', VALUE_CHUNK_BYTES));
        let length = text.len() as u64;
        let result = Tokenizer::new(&text[..]).read_base64(length, "blob", "base64");
        assert!(matches!(
            result.map_err(|error| error.kind),
            Err(DecodeErrorKind::InvalidBase64 { .. })
        ));
        let decoded = Tokenizer::new(&b"AAH/"[..]).read_base64(4, "blob", "base64");
        assert_eq!(decoded.ok(), Some(vec![0, 1, 255]));
    }
}
