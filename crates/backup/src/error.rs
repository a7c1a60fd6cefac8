//! The errors of encoding and decoding.

use std::fmt;

/// Why a backup file could not be decoded, and on which line.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct DecodeError {
    /// The 1-based line the problem was found on. Lines are counted by every LF byte in the
    /// file, those inside raw values included, so `sed -n '<line>p'` shows the place.
    pub line: u64,
    /// What was wrong.
    pub kind: DecodeErrorKind,
}

/// What was wrong with a backup file.
#[derive(Debug, thiserror::Error)]
pub enum DecodeErrorKind {
    /// Reading the underlying stream failed.
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes at this place are not what the format allows here.
    #[error("expected {expected}, found {found}")]
    Unexpected {
        /// What the format allows here.
        expected: &'static str,
        /// What the file holds instead.
        found: Found,
    },
    /// The version line names a version this crate does not read.
    #[error("expected \"Version 3.1\" or \"Version 3.0\", found {found}")]
    UnsupportedVersion {
        /// The version line's bytes.
        found: Found,
    },
    /// A meta line (`#`) that is unknown, repeated or out of order.
    #[error("unexpected meta line {found}")]
    UnexpectedMeta {
        /// The meta line's keyword.
        found: Found,
    },
    /// A backslash followed by a byte other than backslash, space or LF.
    #[error("invalid escape: backslash followed by {found}")]
    InvalidEscape {
        /// The byte after the backslash.
        found: Found,
    },
    /// A name or token that is empty where it may not be.
    #[error("{field} is empty")]
    EmptyToken {
        /// Which field.
        field: &'static str,
    },
    /// A name or token longer than its limit.
    #[error("{field} is longer than {max_bytes} bytes")]
    TokenTooLong {
        /// Which field.
        field: &'static str,
        /// The limit.
        max_bytes: usize,
    },
    /// A NUL byte inside a name, which the format forbids.
    #[error("{field} contains a NUL byte")]
    NulInToken {
        /// Which field.
        field: &'static str,
    },
    /// A number too large for its field, or with too many digits.
    #[error("{field} is out of range (at most {max})")]
    NumberOutOfRange {
        /// Which field.
        field: &'static str,
        /// The largest value allowed.
        max: u64,
    },
    /// A value whose declared length is over the decoder's limit; nothing was allocated for it.
    #[error("value of {length_bytes} bytes is over the limit of {max_bytes} bytes")]
    ValueTooLarge {
        /// The length the file declares (for base64, the most bytes it can decode to).
        length_bytes: u64,
        /// The decoder's limit.
        max_bytes: u64,
    },
    /// A base64 length that is not a multiple of 4.
    #[error("base64 length {length} is not a multiple of 4")]
    Base64Length {
        /// The declared length in characters.
        length: u64,
    },
    /// Base64 text that does not decode under the standard padded alphabet.
    #[error("{field} is not valid base64")]
    InvalidBase64 {
        /// Which field.
        field: &'static str,
    },
    /// A digest that does not decode to exactly 20 bytes.
    #[error("digest is {length_bytes} bytes, not 20")]
    DigestLength {
        /// The decoded length.
        length_bytes: usize,
    },
    /// A float that neither reader of the format accepts.
    #[error("invalid float {found}")]
    InvalidFloat {
        /// The text.
        found: Found,
    },
    /// A bin type letter the format does not have.
    #[error("unknown bin type {found}")]
    UnknownBinType {
        /// The letter.
        found: Found,
    },
    /// A bin of type `U`: large data types, which no server since 3.15 has.
    #[error("the backup contains an LDT bin (type \"U\"), which cannot be restored")]
    LargeDataType,
    /// A `!` (raw bytes) marker on a bin or key type that is always written one way.
    #[error("\"!\" is not allowed after type {found}")]
    CompactNotAllowed {
        /// The type letter.
        found: Found,
    },
    /// A secondary index with a path count other than 1.
    #[error("secondary index has {path_count} paths; only 1 is supported")]
    PathCount {
        /// The count in the file.
        path_count: u64,
    },
    /// A `*` line after the first record.
    #[error("a global (\"*\") line after a record")]
    GlobalAfterRecord,
    /// A `*` line in a file without `# first-file`, or in a version 3.0 file.
    #[error("a global (\"*\") line in a file that is not the first file of a 3.1 backup")]
    GlobalOutsideFirstFile,
    /// A record ended before the bin count its `+ b` line declared.
    #[error("record declares {declared} bins but has {found}")]
    BinCountMismatch {
        /// The count from `+ b`.
        declared: u16,
        /// The bin lines before the next element or the end of the file.
        found: u16,
    },
    /// A bin line after a record's declared bins.
    #[error("bin line after the record's {declared} declared bins")]
    ExtraBinLine {
        /// The count from `+ b`.
        declared: u16,
    },
}

/// The bytes found where others were expected: a short prefix, and whether the file ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The bytes read at the place, at most [`Found::BYTES_MAX`].
    pub bytes: Vec<u8>,
    /// Whether the file ended right after them.
    pub end_of_file: bool,
}

impl Found {
    /// The most bytes an error shows: enough to recognize a line, short enough for a log.
    pub const BYTES_MAX: usize = 32;

    /// The file ended here.
    pub fn end_of_file() -> Found {
        Found {
            bytes: Vec::new(),
            end_of_file: true,
        }
    }

    /// `bytes`, cut to [`Found::BYTES_MAX`].
    pub fn bytes(bytes: &[u8]) -> Found {
        Found {
            bytes: bytes[..bytes.len().min(Found::BYTES_MAX)].to_vec(),
            end_of_file: false,
        }
    }
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.bytes.is_empty(), self.end_of_file) {
            (true, true) => write!(f, "end of file"),
            (false, true) => write!(f, "\"{}\" then end of file", self.bytes.escape_ascii()),
            _ => write!(f, "\"{}\"", self.bytes.escape_ascii()),
        }
    }
}

/// Why an item could not be encoded. An item refused as invalid wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// Writing to the underlying stream failed; the stream may hold part of an item.
    #[error("write failed: {0}")]
    Io(#[from] std::io::Error),
    /// A header the encoder cannot write: only version 3.1 with a namespace is written.
    #[error("only a version 3.1 header with a namespace can be written")]
    InvalidHeader,
    /// A name that is empty, too long or holds a NUL.
    #[error("{field} is {problem}")]
    InvalidName {
        /// Which field.
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A value longer than the format's 32-bit length field.
    #[error("{field} of {length_bytes} bytes does not fit the format's length field")]
    ValueTooLong {
        /// Which field.
        field: &'static str,
        /// Its length.
        length_bytes: usize,
    },
    /// More bins than the format's bin count allows.
    #[error("{bin_count} bins; a record may have at most 65535")]
    TooManyBins {
        /// The record's bin count.
        bin_count: usize,
    },
    /// A secondary index or UDF after a record has been written.
    #[error("a secondary index or UDF after a record")]
    GlobalAfterRecord,
    /// A secondary index or UDF in a file whose header lacks `first_file`.
    #[error("a secondary index or UDF in a file that is not the first file")]
    GlobalOutsideFirstFile,
}
