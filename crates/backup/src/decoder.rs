//! The strict decoder: a header, then an iterator of items.
//!
//! Invariants:
//! - The header has been read and checked before the first item is asked for.
//! - Items come back in file order; after the first error the iterator ends (it is fused), so
//!   a caller never sees an item decoded past a place the file was found corrupt.
//! - Once a record has been returned, a global (`*`) line is an error.
//! - Every value is checked against `value_bytes_max` before any of its bytes are read.

use std::io::BufRead;

use model::{Digest, Generation, VoidTime};

use crate::error::{DecodeError, DecodeErrorKind, Found};
use crate::float::{FLOAT_TEXT_BYTES_MAX, parse_float};
use crate::item::{
    BackupKey, Bin, BinValue, BlobKind, FormatVersion, Header, IndexCollection, IndexValueType,
    Item, Record, SecondaryIndex, Udf,
};
use crate::limits::{
    BIN_COUNT_MAX, BIN_NAME_BYTES_MAX, DIGEST_BASE64_CHARS, GENERATION_MAX, LENGTH_MAX,
    NAMESPACE_BYTES_MAX, SET_BYTES_MAX, TOKEN_BYTES_MAX, VALUE_BYTES_MAX_DEFAULT, VOID_TIME_MAX,
};
use crate::tokenizer::{Delimiter, NameRule, Tokenizer};

type Result<T> = std::result::Result<T, DecodeError>;

/// What the decoder accepts beyond the format's own limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// The most bytes one value (bin value, key or UDF body) may hold; a longer declared
    /// length is refused before anything is allocated for it.
    pub value_bytes_max: u64,
}

impl Default for DecodeLimits {
    fn default() -> DecodeLimits {
        DecodeLimits {
            value_bytes_max: VALUE_BYTES_MAX_DEFAULT,
        }
    }
}

/// Reads a backup file: [`Decoder::new`] reads the header, then the decoder iterates over the
/// items. Give it a buffered reader; it reads byte by byte between values.
pub struct Decoder<R> {
    tokenizer: Tokenizer<R>,
    header: Header,
    limits: DecodeLimits,
    /// The bin count of the last record, once one has been read.
    last_bin_count: Option<u16>,
    failed: bool,
}

const NAMESPACE: NameRule = NameRule {
    field: "namespace",
    max_bytes: NAMESPACE_BYTES_MAX,
    empty_allowed: false,
};
const SET: NameRule = NameRule {
    field: "set",
    max_bytes: SET_BYTES_MAX,
    empty_allowed: false,
};
const BIN_NAME: NameRule = NameRule {
    field: "bin name",
    max_bytes: BIN_NAME_BYTES_MAX,
    empty_allowed: false,
};
const INDEX_SET: NameRule = NameRule {
    field: "index set",
    max_bytes: SET_BYTES_MAX,
    empty_allowed: true,
};
const INDEX_NAME: NameRule = NameRule {
    field: "index name",
    max_bytes: TOKEN_BYTES_MAX,
    empty_allowed: false,
};
const UDF_FILE_NAME: NameRule = NameRule {
    field: "UDF file name",
    max_bytes: TOKEN_BYTES_MAX,
    empty_allowed: false,
};
/// Meta keywords are never escaped; this rule only bounds them.
const META_KEYWORD: NameRule = NameRule {
    field: "meta keyword",
    max_bytes: TOKEN_BYTES_MAX,
    empty_allowed: false,
};

/// The bin letters whose values are bytes, written as base64 or, after `!`, raw.
const BYTES_BIN_LETTERS: &[u8] = b"BJCPRHEYML";

impl<R: BufRead> Decoder<R> {
    /// Reads and checks the header with the default limits.
    ///
    /// # Errors
    /// A [`DecodeError`] when the header is not a 3.0 or 3.1 header.
    pub fn new(reader: R) -> Result<Decoder<R>> {
        Decoder::with_limits(reader, DecodeLimits::default())
    }

    /// Reads and checks the header, with `limits` for the values to come.
    ///
    /// # Errors
    /// A [`DecodeError`] when the header is not a 3.0 or 3.1 header.
    pub fn with_limits(reader: R, limits: DecodeLimits) -> Result<Decoder<R>> {
        let mut tokenizer = Tokenizer::new(reader);
        let header = read_header(&mut tokenizer)?;
        Ok(Decoder {
            tokenizer,
            header,
            limits,
            last_bin_count: None,
            failed: false,
        })
    }

    /// The header read by the constructor.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The line the decoder has reached (1-based).
    pub fn line(&self) -> u64 {
        self.tokenizer.line()
    }

    /// The bytes consumed so far: after an item, the offset where the next one starts. For
    /// progress reports, and to tell where a file cut at an item boundary stopped.
    pub fn bytes_read(&self) -> u64 {
        self.tokenizer.offset()
    }

    /// The underlying reader.
    pub fn into_inner(self) -> R {
        self.tokenizer.into_inner()
    }

    /// The next item, `None` at a clean end of the file.
    fn read_item(&mut self) -> Result<Option<Item>> {
        match self.tokenizer.peek()? {
            None => Ok(None),
            Some(b'*') => self.read_global().map(Some),
            Some(b'+') => self.read_record().map(|record| Some(Item::Record(record))),
            Some(b'-') => Err(match self.last_bin_count {
                Some(declared) => self
                    .tokenizer
                    .error(DecodeErrorKind::ExtraBinLine { declared }),
                None => self.unexpected_element_start(b'-'),
            }),
            Some(byte) => Err(self.unexpected_element_start(byte)),
        }
    }

    fn unexpected_element_start(&self, byte: u8) -> DecodeError {
        self.tokenizer.error(DecodeErrorKind::Unexpected {
            expected: "\"*\", \"+\" or end of file",
            found: Found::bytes(&[byte]),
        })
    }

    fn read_global(&mut self) -> Result<Item> {
        if self.last_bin_count.is_some() {
            return Err(self.tokenizer.error(DecodeErrorKind::GlobalAfterRecord));
        }
        let global_allowed = self.header.first_file && self.header.version == FormatVersion::V3_1;
        if !global_allowed {
            return Err(self
                .tokenizer
                .error(DecodeErrorKind::GlobalOutsideFirstFile));
        }
        let tag = self
            .tokenizer
            .expect_one_of(&[b"* i ", b"* u "], "\"* i\" or \"* u\"")?;
        if tag == 0 {
            read_secondary_index(&mut self.tokenizer).map(Item::SecondaryIndex)
        } else {
            self.read_udf().map(Item::Udf)
        }
    }

    fn read_udf(&mut self) -> Result<Udf> {
        self.tokenizer.expect(b"L ", "UDF type \"L\"")?;
        let file_name = read_name_ending(&mut self.tokenizer, UDF_FILE_NAME, Delimiter::Space)?;
        let content = self.read_length_prefixed_raw("UDF content")?;
        Ok(Udf { file_name, content })
    }

    fn read_record(&mut self) -> Result<Record> {
        let first = self
            .tokenizer
            .expect_one_of(&[b"+ k ", b"+ n "], "\"+ k\" or \"+ n\"")?;
        let user_key = if first == 0 {
            let key = self.read_key()?;
            self.tokenizer.expect(b"+ n ", "\"+ n\"")?;
            Some(key)
        } else {
            None
        };
        let namespace = read_name_ending(&mut self.tokenizer, NAMESPACE, Delimiter::LineFeed)?;
        self.tokenizer.expect(b"+ d ", "\"+ d\"")?;
        let digest = read_digest(&mut self.tokenizer)?;
        let set_tag = self
            .tokenizer
            .expect_one_of(&[b"+ s ", b"+ g "], "\"+ s\" or \"+ g\"")?;
        let set = if set_tag == 0 {
            let set = read_name_ending(&mut self.tokenizer, SET, Delimiter::LineFeed)?;
            self.tokenizer.expect(b"+ g ", "\"+ g\"")?;
            Some(set)
        } else {
            None
        };
        let (generation, void_time, bin_count) = read_record_counters(&mut self.tokenizer)?;
        self.last_bin_count = Some(bin_count);
        let bins = self.read_bins(bin_count)?;
        Ok(Record {
            namespace,
            digest,
            user_key,
            set,
            generation,
            void_time,
            bins,
        })
    }

    fn read_key(&mut self) -> Result<BackupKey> {
        const FORMS: [&[u8]; 6] = [b"I ", b"D ", b"S ", b"B ", b"B! ", b"X "];
        let expected = "a key type (\"I\", \"D\", \"S\", \"B\", \"B!\" or \"X\")";
        Ok(match self.tokenizer.expect_one_of(&FORMS, expected)? {
            0 => {
                let value = self.tokenizer.read_signed("integer key", "an integer")?;
                self.tokenizer.expect(b"\n", "end of line")?;
                BackupKey::Integer(value)
            }
            1 => BackupKey::Float(read_float_to_line_end(&mut self.tokenizer)?),
            2 => BackupKey::String(self.read_length_prefixed_raw("key")?),
            3 => BackupKey::Bytes(self.read_length_prefixed_base64("key")?),
            4 => BackupKey::Bytes(self.read_length_prefixed_raw("key")?),
            _ => BackupKey::String(self.read_length_prefixed_base64("key")?),
        })
    }

    fn read_bins(&mut self, bin_count: u16) -> Result<Vec<Bin>> {
        let mut bins = Vec::with_capacity(usize::from(bin_count).min(64));
        for bin_index in 0..bin_count {
            if matches!(self.tokenizer.peek()?, None | Some(b'+' | b'*')) {
                return Err(self.tokenizer.error(DecodeErrorKind::BinCountMismatch {
                    declared: bin_count,
                    found: bin_index,
                }));
            }
            bins.push(self.read_bin()?);
        }
        assert_eq!(bins.len(), usize::from(bin_count));
        Ok(bins)
    }

    fn read_bin(&mut self) -> Result<Bin> {
        self.tokenizer.expect(b"- ", "\"- \" (a bin line)")?;
        let letter = self.read_bin_letter()?;
        let compact = self.read_compact_marker(letter)?;
        self.tokenizer.expect(b" ", "a space after the bin type")?;
        let name_end = if letter == b'N' {
            Delimiter::LineFeed
        } else {
            Delimiter::Space
        };
        let name = read_name_ending(&mut self.tokenizer, BIN_NAME, name_end)?;
        let value = self.read_bin_value(letter, compact)?;
        Ok(Bin { name, value })
    }

    fn read_bin_letter(&mut self) -> Result<u8> {
        let letter = self.tokenizer.peek()?;
        match letter {
            Some(letter) if b"NZIDSXG".contains(&letter) || BYTES_BIN_LETTERS.contains(&letter) => {
                self.tokenizer.next_byte("a bin type")
            }
            Some(b'U') => Err(self.tokenizer.error(DecodeErrorKind::LargeDataType)),
            Some(byte) => Err(self.tokenizer.error(DecodeErrorKind::UnknownBinType {
                found: Found::bytes(&[byte]),
            })),
            None => Err(self.tokenizer.error(DecodeErrorKind::UnknownBinType {
                found: Found::end_of_file(),
            })),
        }
    }

    /// Whether a `!` follows `letter`; it may only follow the bytes types.
    fn read_compact_marker(&mut self, letter: u8) -> Result<bool> {
        if self.tokenizer.peek()? != Some(b'!') {
            return Ok(false);
        }
        if !BYTES_BIN_LETTERS.contains(&letter) {
            return Err(self.tokenizer.error(DecodeErrorKind::CompactNotAllowed {
                found: Found::bytes(&[letter]),
            }));
        }
        self.tokenizer.next_byte("\"!\"")?;
        Ok(true)
    }

    fn read_bin_value(&mut self, letter: u8, compact: bool) -> Result<BinValue> {
        let value = match letter {
            b'N' => return Ok(BinValue::Nil),
            b'Z' => read_bool(&mut self.tokenizer)?,
            b'I' => BinValue::Integer(self.tokenizer.read_signed("integer", "an integer")?),
            b'D' => {
                return Ok(BinValue::Float(read_float_to_line_end(
                    &mut self.tokenizer,
                )?));
            }
            b'S' => return Ok(BinValue::String(self.read_length_prefixed_raw("string")?)),
            b'X' => {
                return Ok(BinValue::String(
                    self.read_length_prefixed_base64("string")?,
                ));
            }
            b'G' => return Ok(BinValue::GeoJson(self.read_length_prefixed_raw("GeoJSON")?)),
            bytes_letter => return self.read_bytes_value(bytes_letter, compact),
        };
        self.tokenizer.expect(b"\n", "end of line")?;
        Ok(value)
    }

    fn read_bytes_value(&mut self, letter: u8, compact: bool) -> Result<BinValue> {
        let bytes = if compact {
            self.read_length_prefixed_raw("bytes")?
        } else {
            self.read_length_prefixed_base64("bytes")?
        };
        Ok(match letter {
            b'Y' => BinValue::Hll(bytes),
            b'L' => BinValue::List(bytes),
            b'M' => BinValue::Map(bytes),
            blob_letter => BinValue::Blob {
                kind: BlobKind::from_letter(blob_letter)
                    .expect("read_bin_letter admits only known letters"),
                bytes,
            },
        })
    }

    /// `<length> SP <length raw bytes> LF`.
    fn read_length_prefixed_raw(&mut self, field: &'static str) -> Result<Vec<u8>> {
        let length = self.read_length(field)?;
        self.check_value_length(length)?;
        let bytes = self.tokenizer.read_raw(length, "the rest of a value")?;
        self.tokenizer.expect(b"\n", "end of line after a value")?;
        Ok(bytes)
    }

    /// `<base64 length> SP <base64> LF`.
    fn read_length_prefixed_base64(&mut self, field: &'static str) -> Result<Vec<u8>> {
        let length = self.read_length(field)?;
        if !length.is_multiple_of(4) {
            return Err(self
                .tokenizer
                .error(DecodeErrorKind::Base64Length { length }));
        }
        self.check_value_length(length / 4 * 3)?;
        let bytes = self
            .tokenizer
            .read_base64(length, field, "the rest of a base64 value")?;
        self.tokenizer.expect(b"\n", "end of line after a value")?;
        Ok(bytes)
    }

    fn read_length(&mut self, field: &'static str) -> Result<u64> {
        let length = self
            .tokenizer
            .read_unsigned(field, "a length", LENGTH_MAX)?;
        self.tokenizer.expect(b" ", "a space after the length")?;
        Ok(length)
    }

    fn check_value_length(&self, length_bytes: u64) -> Result<()> {
        let max_bytes = self.limits.value_bytes_max;
        if length_bytes > max_bytes {
            return Err(self.tokenizer.error(DecodeErrorKind::ValueTooLarge {
                length_bytes,
                max_bytes,
            }));
        }
        Ok(())
    }
}

impl<R: BufRead> Iterator for Decoder<R> {
    type Item = Result<Item>;

    fn next(&mut self) -> Option<Result<Item>> {
        if self.failed {
            return None;
        }
        let item = self.read_item();
        self.failed = item.is_err();
        item.transpose()
    }
}

impl<R: BufRead> std::iter::FusedIterator for Decoder<R> {}

fn read_header<R: BufRead>(tokenizer: &mut Tokenizer<R>) -> Result<Header> {
    let version = read_version(tokenizer)?;
    tokenizer.set_escaping(version == FormatVersion::V3_1);
    let mut header = Header {
        version,
        namespace: None,
        first_file: false,
    };
    while tokenizer.peek()? == Some(b'#') {
        read_meta_line(tokenizer, &mut header)?;
    }
    if version == FormatVersion::V3_1 && header.namespace.is_none() {
        let found = found_at(tokenizer)?;
        return Err(tokenizer.error(DecodeErrorKind::Unexpected {
            expected: "\"# namespace\"",
            found,
        }));
    }
    Ok(header)
}

fn read_version<R: BufRead>(tokenizer: &mut Tokenizer<R>) -> Result<FormatVersion> {
    let tag = tokenizer.expect_one_of(
        &[b"Version 3.1\n", b"Version 3.0\n"],
        "\"Version 3.1\" or \"Version 3.0\"",
    );
    match tag {
        Ok(0) => Ok(FormatVersion::V3_1),
        Ok(_) => Ok(FormatVersion::V3_0),
        Err(DecodeError {
            line,
            kind: DecodeErrorKind::Unexpected { found, .. },
        }) => Err(DecodeError {
            line,
            kind: DecodeErrorKind::UnsupportedVersion { found },
        }),
        Err(error) => Err(error),
    }
}

/// One `#` line. `# namespace` must come first and once; `# first-file` at most once.
fn read_meta_line<R: BufRead>(tokenizer: &mut Tokenizer<R>, header: &mut Header) -> Result<()> {
    tokenizer.expect(b"# ", "\"# \"")?;
    let line = tokenizer.line();
    let (keyword, delimiter) = tokenizer.read_name(META_KEYWORD)?;
    let namespace_expected = header.namespace.is_none() && !header.first_file;
    let namespace_read = header.namespace.is_some() || header.version == FormatVersion::V3_0;
    match (keyword.as_slice(), delimiter) {
        (b"namespace", Delimiter::Space) if namespace_expected => {
            let namespace = read_name_ending(tokenizer, NAMESPACE, Delimiter::LineFeed)?;
            header.namespace = Some(namespace);
            Ok(())
        }
        (b"first-file", Delimiter::LineFeed) if namespace_read && !header.first_file => {
            header.first_file = true;
            Ok(())
        }
        _ => Err(DecodeError {
            line,
            kind: DecodeErrorKind::UnexpectedMeta {
                found: Found::bytes(&keyword),
            },
        }),
    }
}

/// `escape(ns) SP escape(set) SP escape(name) SP itype SP npaths SP escape(bin) SP ptype
/// [SP base64(ctx)] LF`, after `* i `.
fn read_secondary_index<R: BufRead>(tokenizer: &mut Tokenizer<R>) -> Result<SecondaryIndex> {
    let namespace = read_name_ending(tokenizer, NAMESPACE, Delimiter::Space)?;
    let set = read_name_ending(tokenizer, INDEX_SET, Delimiter::Space)?;
    let name = read_name_ending(tokenizer, INDEX_NAME, Delimiter::Space)?;
    let collection = read_letter(tokenizer, IndexCollection::from_letter, "N, L, K or V")?;
    tokenizer.expect(b" ", "a space after the index type")?;
    let path_count = tokenizer.read_unsigned("path count", "a path count", LENGTH_MAX)?;
    if path_count != 1 {
        return Err(tokenizer.error(DecodeErrorKind::PathCount { path_count }));
    }
    tokenizer.expect(b" ", "a space after the path count")?;
    let bin = read_name_ending(tokenizer, BIN_NAME, Delimiter::Space)?;
    let value_type = read_letter(tokenizer, IndexValueType::from_letter, "S, N, G or B")?;
    let context = match tokenizer.expect_one_of(&[b"\n", b" "], "end of line or a context")? {
        0 => None,
        _ => Some(read_context(tokenizer)?),
    };
    Ok(SecondaryIndex {
        namespace,
        set: (!set.is_empty()).then_some(set),
        name,
        collection,
        bin,
        value_type,
        context,
    })
}

/// The base64 CDT context at the end of a `* i` line, and its LF.
fn read_context<R: BufRead>(tokenizer: &mut Tokenizer<R>) -> Result<Vec<u8>> {
    let field = "index context";
    let text = tokenizer.read_to_line_end(field, TOKEN_BYTES_MAX)?;
    let decoded = decode_base64_token(&text);
    decoded
        .filter(|context| !context.is_empty())
        .ok_or_else(|| line_before(tokenizer, DecodeErrorKind::InvalidBase64 { field }))
}

/// `base64(digest) LF`, after `+ d `.
fn read_digest<R: BufRead>(tokenizer: &mut Tokenizer<R>) -> Result<Digest> {
    let field = "digest";
    let text = tokenizer.read_to_line_end(field, DIGEST_BASE64_CHARS)?;
    let bytes = decode_base64_token(&text)
        .ok_or_else(|| line_before(tokenizer, DecodeErrorKind::InvalidBase64 { field }))?;
    Digest::from_slice(&bytes).ok_or_else(|| {
        line_before(
            tokenizer,
            DecodeErrorKind::DigestLength {
                length_bytes: bytes.len(),
            },
        )
    })
}

/// `+ g`, `+ t` and `+ b`, after `+ g `.
fn read_record_counters<R: BufRead>(
    tokenizer: &mut Tokenizer<R>,
) -> Result<(Generation, VoidTime, u16)> {
    let generation = tokenizer.read_unsigned("generation", "a generation", GENERATION_MAX)?;
    tokenizer.expect(b"\n+ t ", "\"+ t\"")?;
    let void_time = tokenizer.read_unsigned("expiration", "an expiration", VOID_TIME_MAX)?;
    tokenizer.expect(b"\n+ b ", "\"+ b\"")?;
    let bin_count = tokenizer.read_unsigned("bin count", "a bin count", BIN_COUNT_MAX)?;
    tokenizer.expect(b"\n", "end of line")?;
    Ok((
        Generation(u16::try_from(generation).expect("checked against GENERATION_MAX")),
        VoidTime(u32::try_from(void_time).expect("checked against VOID_TIME_MAX")),
        u16::try_from(bin_count).expect("checked against BIN_COUNT_MAX"),
    ))
}

fn read_bool<R: BufRead>(tokenizer: &mut Tokenizer<R>) -> Result<BinValue> {
    let value = tokenizer.expect_one_of(&[b"T", b"F"], "\"T\" or \"F\"")?;
    Ok(BinValue::Bool(value == 0))
}

/// A float's text and its LF.
fn read_float_to_line_end<R: BufRead>(tokenizer: &mut Tokenizer<R>) -> Result<f64> {
    let text = tokenizer.read_to_line_end("float", FLOAT_TEXT_BYTES_MAX)?;
    parse_float(&text).ok_or_else(|| {
        line_before(
            tokenizer,
            DecodeErrorKind::InvalidFloat {
                found: Found::bytes(&text),
            },
        )
    })
}

/// A one-letter field that `from_letter` maps to a value.
fn read_letter<R: BufRead, T>(
    tokenizer: &mut Tokenizer<R>,
    from_letter: fn(u8) -> Option<T>,
    expected: &'static str,
) -> Result<T> {
    let found = tokenizer.peek()?;
    match found.and_then(from_letter) {
        Some(value) => {
            tokenizer.next_byte(expected)?;
            Ok(value)
        }
        None => Err(tokenizer.error(DecodeErrorKind::Unexpected {
            expected,
            found: found.map_or_else(Found::end_of_file, |byte| Found::bytes(&[byte])),
        })),
    }
}

/// A name that must end with `delimiter`.
fn read_name_ending<R: BufRead>(
    tokenizer: &mut Tokenizer<R>,
    rule: NameRule,
    delimiter: Delimiter,
) -> Result<Vec<u8>> {
    let (name, found) = tokenizer.read_name(rule)?;
    if found == delimiter {
        return Ok(name);
    }
    let (expected, found_bytes): (_, &[u8]) = match delimiter {
        Delimiter::Space => ("a space after the name", b"\n"),
        Delimiter::LineFeed => ("end of line after the name", b" "),
    };
    // The wrong delimiter was consumed; an LF moved the count to the next line.
    let line = tokenizer.line() - u64::from(found == Delimiter::LineFeed);
    Err(DecodeError {
        line,
        kind: DecodeErrorKind::Unexpected {
            expected,
            found: Found::bytes(found_bytes),
        },
    })
}

/// Decodes a base64 token with no length prefix, which must be a whole number of quanta.
fn decode_base64_token(text: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine as _;
    if !text.len().is_multiple_of(4) {
        return None;
    }
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// An error on the line just finished: for a check made after its LF was consumed.
fn line_before<R: BufRead>(tokenizer: &Tokenizer<R>, kind: DecodeErrorKind) -> DecodeError {
    DecodeError {
        line: tokenizer.line() - 1,
        kind,
    }
}

/// What the next bytes are, for an error: one byte, or the end of the file.
fn found_at<R: BufRead>(tokenizer: &mut Tokenizer<R>) -> Result<Found> {
    Ok(match tokenizer.peek()? {
        Some(byte) => Found::bytes(&[byte]),
        None => Found::end_of_file(),
    })
}
