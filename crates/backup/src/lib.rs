//! Aerospike's `asbackup` text format, version 3.1: an [`Encoder`] that writes it as asbackup
//! does and a strict [`Decoder`] that reads what asbackup (C) and backup-go write, so a backup
//! taken from an Aerospike cluster restores into Osprey and the other way round.
//!
//! Layer: a codec beside the wire crates. Depends on `model` (digests, generations, void times,
//! particle types), `base64` and `zstd`; no I/O of its own beyond the `Read`/`Write` it is
//! given, no async. The backup and restore commands (scans, files, progress) sit above it.
//!
//! # The format
//!
//! A byte stream, not text in any encoding. Each element ends with LF; values with a length
//! prefix are raw bytes that may hold LF or NUL, so the decoder reads by length and never
//! splits on LF.
//!
//! ```text
//! Version 3.1
//! # namespace <ns>
//! # first-file                                  only in the one file with the global lines
//! * i <ns> <set> <name> <N|L|K|V> 1 <bin> <S|N|G|B> [<base64 ctx>]
//! * u L <file name> <length> <raw bytes>
//! + k I <int> | D <float> | S <len> <raw> | B <b64len> <b64> | B! <len> <raw>   (optional)
//! + n <ns>
//! + d <base64 digest>
//! + s <set>                                     (optional)
//! + g <generation>
//! + t <void time, seconds since 2010-01-01 UTC; 0 = never>
//! + b <bin count>
//! - <type>[!] <bin name> [<value>]              bin count times
//! ```
//!
//! Names (namespaces, sets, bins, index and UDF names) are escaped: `\` goes before every `\`,
//! space and LF. Bin types: `N` nil, `Z` bool (`T`/`F`), `I` integer, `D` float, `S` string and
//! `G` GeoJSON (always raw with a length), `B J C P R H E` blobs by language, `Y` HLL, `L` list
//! and `M` map (the server's msgpack, passed through opaque): base64 with its length, or raw
//! after `!` in compact mode.
//!
//! # Invariants
//!
//! - What the encoder writes, the decoder reads back equal (with limits that admit its
//!   values); floats compare equal when their bits are, or both are NaN.
//! - The decoder never panics on any input, refuses anything outside the grammar with the
//!   1-based line and what it expected, and never allocates for a declared length above
//!   [`DecodeLimits::value_bytes_max`]; below it, memory grows only as bytes arrive.
//! - After an error the decoder yields nothing more.
//!
//! # Where the C and Go tools differ, and what this crate does
//!
//! - Floats: C writes `%.17g` (`0.10000000000000001`, `1e+21`, `nan`, `-nan`, `inf`); Go
//!   writes `0.1`, `NaN`, `+Inf`. The C reader refuses an uppercase `E`, the Go reader `-nan`.
//!   Written here: `nan`, `inf`, `-inf`, or the shortest round-trip decimal with a lowercase
//!   `e`, which both read. Read here: both tools' forms.
//! - Compact `!`: the C reader allows it only on a `B` key and the bytes bin types; the Go
//!   reader allows it anywhere and ignores it. Read here: as C. Written with
//!   [`EncodeOptions::compact`].
//! - Digest: C reads exactly 28 base64 characters, Go anything to the end of the line. Read
//!   here: 28 characters that decode to 20 bytes. Neither the tools nor this crate check it
//!   against the key.
//! - Numbers: C reads an empty number as 0; Go has no int64 overflow check. Read here: at
//!   least one digit, in range, no `+`.
//! - Escapes: both readers take `\` + any byte as that byte. Read here: only `\\`, `\ ` and
//!   `\` + LF, the three a writer produces.
//! - Versions: C reads 3.0 (no escaping, no global lines) and 3.1; Go reads up to 3.2, which
//!   only its separate metadata file with expression indexes (`* e`) uses. Read here: 3.0 and
//!   3.1; written: 3.1.
//! - Legacy `X` (a string as base64), for keys and bins: read by both tools, written by
//!   neither; read here as a string.
//! - `U` (LDT) bins: refused by both, and here.
//! - Bin order: C keeps the server's, Go's is random. Kept here as given.
//!
//! Stricter than both tools, because writers never produce it: `# namespace` is required in
//! 3.1 and comes first; global lines appear only in a `# first-file` file and before every
//! record; a secondary index has exactly one path; a record's set is never empty; names are
//! non-empty (except an index's set) and within the server's limits (namespace 31 bytes, set
//! 63, bin 15).
//!
//! # Verification: checksums, compression, encryption
//!
//! The text format has no checksum, trailer or record count. What verifies a plain backup is
//! the decoder's strictness: every length is followed by a required LF, every count by exactly
//! that many elements, every token by a checked delimiter, so a truncated or altered file fails
//! at the line where it stops making sense. A truncation exactly at an element boundary is not
//! detectable from the text alone; a restore that needs to know compares its record count
//! with the backup's own log. Compressed with [`zstd_writer`], each zstd frame carries a
//! content checksum that [`zstd_reader`] verifies, and a stream cut short fails to read.
//! asbackup's C writer sets no zstd checksum, so its compressed backups are verified only by
//! the decoder.
//!
//! Encryption (asbackup's `--encrypt aes128|aes256`: AES-CTR keyed by SHA-256 of the DER of a
//! private key, with no authentication tag) is not implemented: the key derivation depends on
//! each tool's DER form of the key, which needs a PEM and PKCS parser besides the cipher.
//!
//! Read `docs/internals/glossary.md` for the words key, digest, set and void time.

mod compression;
mod decoder;
mod encoder;
mod error;
mod float;
mod item;
mod limits;
mod tokenizer;

pub use compression::{
    ZSTD_LEVEL_DEFAULT, ZSTD_MAGIC, ZstdReader, ZstdWriter, zstd_reader, zstd_writer,
};
pub use decoder::{DecodeLimits, Decoder};
pub use encoder::{EncodeOptions, Encoder};
pub use error::{DecodeError, DecodeErrorKind, EncodeError, Found};
pub use float::{format_float, parse_float};
pub use item::{
    BackupKey, Bin, BinValue, BlobKind, FormatVersion, Header, IndexCollection, IndexValueType,
    Item, Record, SecondaryIndex, Udf,
};
pub use limits::{
    BIN_COUNT_MAX, BIN_NAME_BYTES_MAX, LENGTH_MAX, NAMESPACE_BYTES_MAX, SET_BYTES_MAX,
    TOKEN_BYTES_MAX, VALUE_BYTES_MAX_DEFAULT,
};
