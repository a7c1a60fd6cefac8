//! The encoder: writes a header, then global lines and records, as asbackup writes them.
//!
//! Invariants:
//! - The header is written exactly once, by the constructor.
//! - Global lines (`* i`, `* u`) are written only in a first file and only before any record.
//! - An item is checked whole before any of it is written, so an invalid item leaves the
//!   stream unchanged; every item written is one the decoder reads back equal.
//! - `bytes_written` counts every byte handed to the writer.

use std::io::{self, Write};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use base64::write::EncoderWriter;

use crate::error::EncodeError;
use crate::float::format_float;
use crate::item::{
    BackupKey, Bin, BinValue, FormatVersion, Header, Item, Record, SecondaryIndex, Udf,
};
use crate::limits::{
    BIN_COUNT_MAX, BIN_NAME_BYTES_MAX, LENGTH_MAX, NAMESPACE_BYTES_MAX, SET_BYTES_MAX,
    TOKEN_BYTES_MAX,
};

type Result<T> = std::result::Result<T, EncodeError>;

/// How the encoder writes bytes values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// asbackup's `--compact`: bytes values (blobs, HLLs, lists, maps) and bytes keys are
    /// written raw after a `!` instead of as base64. Smaller, and only the C tool and this
    /// crate read it for keys (the Go tool reads it too, for bins and keys).
    pub compact: bool,
}

/// Writes one backup file. Give it a buffered writer: it writes a line in several pieces.
pub struct Encoder<W: Write> {
    writer: W,
    options: EncodeOptions,
    first_file: bool,
    record_written: bool,
    bytes_written: u64,
}

impl<W: Write> Encoder<W> {
    /// Writes `header` and returns an encoder for the items that follow.
    ///
    /// # Errors
    /// [`EncodeError::InvalidHeader`] unless the header is version 3.1 with a namespace;
    /// [`EncodeError::InvalidName`] for a namespace the format cannot hold; I/O errors.
    pub fn new(writer: W, header: &Header, options: EncodeOptions) -> Result<Encoder<W>> {
        let Some(namespace) = &header.namespace else {
            return Err(EncodeError::InvalidHeader);
        };
        if header.version != FormatVersion::V3_1 {
            return Err(EncodeError::InvalidHeader);
        }
        check_name(namespace, "namespace", NAMESPACE_BYTES_MAX)?;
        let mut encoder = Encoder {
            writer,
            options,
            first_file: header.first_file,
            record_written: false,
            bytes_written: 0,
        };
        encoder.put(b"Version 3.1\n# namespace ")?;
        encoder.put_escaped(namespace)?;
        encoder.put(b"\n")?;
        if header.first_file {
            encoder.put(b"# first-file\n")?;
        }
        Ok(encoder)
    }

    /// The bytes written so far, header included: what a caller that splits a backup into
    /// files of a size limit compares against.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Writes any item.
    ///
    /// # Errors
    /// As the `write_*` function for the item's kind.
    pub fn write_item(&mut self, item: &Item) -> Result<()> {
        match item {
            Item::SecondaryIndex(index) => self.write_secondary_index(index),
            Item::Udf(udf) => self.write_udf(udf),
            Item::Record(record) => self.write_record(record),
        }
    }

    /// Writes a `* i` line.
    ///
    /// # Errors
    /// [`EncodeError::GlobalOutsideFirstFile`], [`EncodeError::GlobalAfterRecord`], an invalid
    /// name, or an I/O error.
    pub fn write_secondary_index(&mut self, index: &SecondaryIndex) -> Result<()> {
        self.check_global_allowed()?;
        check_secondary_index(index)?;
        self.put(b"* i ")?;
        self.put_escaped(&index.namespace)?;
        self.put(b" ")?;
        self.put_escaped(index.set.as_deref().unwrap_or_default())?;
        self.put(b" ")?;
        self.put_escaped(&index.name)?;
        self.put(&[b' ', index.collection.letter(), b' ', b'1', b' '])?;
        self.put_escaped(&index.bin)?;
        self.put(&[b' ', index.value_type.letter()])?;
        if let Some(context) = &index.context {
            self.put(b" ")?;
            self.put(STANDARD.encode(context).as_bytes())?;
        }
        self.put(b"\n")
    }

    /// Writes a `* u` line.
    ///
    /// # Errors
    /// [`EncodeError::GlobalOutsideFirstFile`], [`EncodeError::GlobalAfterRecord`], an invalid
    /// file name, content over 4 GiB, or an I/O error.
    pub fn write_udf(&mut self, udf: &Udf) -> Result<()> {
        self.check_global_allowed()?;
        check_name(&udf.file_name, "UDF file name", TOKEN_BYTES_MAX)?;
        check_length(udf.content.len(), "UDF content")?;
        self.put(b"* u L ")?;
        self.put_escaped(&udf.file_name)?;
        self.put(b" ")?;
        self.put_raw_with_length(&udf.content)
    }

    /// Writes a record: its `+` lines and its bins.
    ///
    /// # Errors
    /// [`EncodeError::InvalidName`], [`EncodeError::ValueTooLong`],
    /// [`EncodeError::TooManyBins`], or an I/O error.
    pub fn write_record(&mut self, record: &Record) -> Result<()> {
        check_record(record)?;
        self.record_written = true;
        if let Some(key) = &record.user_key {
            self.put_key(key)?;
        }
        self.put(b"+ n ")?;
        self.put_escaped(&record.namespace)?;
        self.put(b"\n+ d ")?;
        self.put(STANDARD.encode(record.digest.0).as_bytes())?;
        self.put(b"\n")?;
        if let Some(set) = &record.set {
            self.put(b"+ s ")?;
            self.put_escaped(set)?;
            self.put(b"\n")?;
        }
        let counters = format!(
            "+ g {}\n+ t {}\n+ b {}\n",
            record.generation.0,
            record.void_time.0,
            record.bins.len()
        );
        self.put(counters.as_bytes())?;
        for bin in &record.bins {
            self.put_bin(bin)?;
        }
        Ok(())
    }

    /// Flushes and returns the writer. A compressing writer still needs its own finish.
    ///
    /// # Errors
    /// The flush's I/O error.
    pub fn finish(mut self) -> Result<W> {
        self.writer.flush()?;
        Ok(self.writer)
    }

    fn check_global_allowed(&self) -> Result<()> {
        if !self.first_file {
            return Err(EncodeError::GlobalOutsideFirstFile);
        }
        if self.record_written {
            return Err(EncodeError::GlobalAfterRecord);
        }
        Ok(())
    }

    fn put_key(&mut self, key: &BackupKey) -> Result<()> {
        match key {
            BackupKey::Integer(value) => self.put(format!("+ k I {value}\n").as_bytes()),
            BackupKey::Float(value) => {
                self.put(format!("+ k D {}\n", format_float(*value)).as_bytes())
            }
            BackupKey::String(bytes) => {
                self.put(b"+ k S ")?;
                self.put_raw_with_length(bytes)
            }
            BackupKey::Bytes(bytes) if self.options.compact => {
                self.put(b"+ k B! ")?;
                self.put_raw_with_length(bytes)
            }
            BackupKey::Bytes(bytes) => {
                self.put(b"+ k B ")?;
                self.put_base64_with_length(bytes)
            }
        }
    }

    fn put_bin(&mut self, bin: &Bin) -> Result<()> {
        let (letter, bytes) = match &bin.value {
            BinValue::Nil => return self.put_bin_start(b"N", &bin.name, b"\n"),
            BinValue::Bool(value) => {
                let text: &[u8] = if *value { b" T\n" } else { b" F\n" };
                return self.put_bin_start(b"Z", &bin.name, text);
            }
            BinValue::Integer(value) => {
                let text = format!(" {value}\n");
                return self.put_bin_start(b"I", &bin.name, text.as_bytes());
            }
            BinValue::Float(value) => {
                let text = format!(" {}\n", format_float(*value));
                return self.put_bin_start(b"D", &bin.name, text.as_bytes());
            }
            BinValue::String(bytes) => {
                self.put_bin_start(b"S", &bin.name, b" ")?;
                return self.put_raw_with_length(bytes);
            }
            BinValue::GeoJson(bytes) => {
                self.put_bin_start(b"G", &bin.name, b" ")?;
                return self.put_raw_with_length(bytes);
            }
            BinValue::Blob { kind, bytes } => (kind.letter(), bytes),
            BinValue::Hll(bytes) => (b'Y', bytes),
            BinValue::List(bytes) => (b'L', bytes),
            BinValue::Map(bytes) => (b'M', bytes),
        };
        if self.options.compact {
            self.put_bin_start(&[letter, b'!'], &bin.name, b" ")?;
            self.put_raw_with_length(bytes)
        } else {
            self.put_bin_start(&[letter], &bin.name, b" ")?;
            self.put_base64_with_length(bytes)
        }
    }

    /// `- <type> <escaped name>` then `after`.
    fn put_bin_start(&mut self, type_letters: &[u8], name: &[u8], after: &[u8]) -> Result<()> {
        self.put(b"- ")?;
        self.put(type_letters)?;
        self.put(b" ")?;
        self.put_escaped(name)?;
        self.put(after)
    }

    /// `<length> SP <bytes> LF`.
    fn put_raw_with_length(&mut self, bytes: &[u8]) -> Result<()> {
        assert!(bytes.len() as u64 <= LENGTH_MAX, "checked before writing");
        self.put(format!("{} ", bytes.len()).as_bytes())?;
        self.put(bytes)?;
        self.put(b"\n")
    }

    /// `<base64 length> SP <base64> LF`, encoded as it is written.
    fn put_base64_with_length(&mut self, bytes: &[u8]) -> Result<()> {
        let encoded_length = base64_length(bytes.len());
        assert!(encoded_length <= LENGTH_MAX, "checked before writing");
        self.put(format!("{encoded_length} ").as_bytes())?;
        let mut counter = CountingWriter {
            writer: &mut self.writer,
            bytes_written: 0,
        };
        {
            let mut encoder = EncoderWriter::new(&mut counter, &STANDARD);
            encoder.write_all(bytes)?;
            encoder.finish()?;
        }
        assert_eq!(counter.bytes_written, encoded_length);
        self.bytes_written += encoded_length;
        self.put(b"\n")
    }

    /// `bytes` with `\` before every `\`, space and LF.
    fn put_escaped(&mut self, bytes: &[u8]) -> Result<()> {
        let mut escaped = Vec::with_capacity(bytes.len() + 4);
        for &byte in bytes {
            if matches!(byte, b'\\' | b' ' | b'\n') {
                escaped.push(b'\\');
            }
            escaped.push(byte);
        }
        self.put(&escaped)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.write_all(bytes)?;
        self.bytes_written += bytes.len() as u64;
        Ok(())
    }
}

/// Counts what passes through, for the base64 writer whose output length is checked.
struct CountingWriter<'a, W> {
    writer: &'a mut W,
    bytes_written: u64,
}

impl<W: Write> Write for CountingWriter<'_, W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let written = self.writer.write(bytes)?;
        self.bytes_written += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

/// Characters of padded base64 for `length_bytes` bytes.
fn base64_length(length_bytes: usize) -> u64 {
    (length_bytes as u64).div_ceil(3) * 4
}

fn check_record(record: &Record) -> Result<()> {
    check_name(&record.namespace, "namespace", NAMESPACE_BYTES_MAX)?;
    if let Some(set) = &record.set {
        check_name(set, "set", SET_BYTES_MAX)?;
    }
    if let Some(BackupKey::String(bytes) | BackupKey::Bytes(bytes)) = &record.user_key {
        check_bytes_value_length(bytes.len(), "key")?;
    }
    if record.bins.len() as u64 > BIN_COUNT_MAX {
        return Err(EncodeError::TooManyBins {
            bin_count: record.bins.len(),
        });
    }
    for bin in &record.bins {
        check_name(&bin.name, "bin name", BIN_NAME_BYTES_MAX)?;
        check_bin_value(&bin.value)?;
    }
    Ok(())
}

fn check_bin_value(value: &BinValue) -> Result<()> {
    match value {
        BinValue::Nil | BinValue::Bool(_) | BinValue::Integer(_) | BinValue::Float(_) => Ok(()),
        BinValue::String(bytes) | BinValue::GeoJson(bytes) => check_length(bytes.len(), "value"),
        BinValue::Blob { bytes, .. }
        | BinValue::Hll(bytes)
        | BinValue::List(bytes)
        | BinValue::Map(bytes) => check_bytes_value_length(bytes.len(), "value"),
    }
}

fn check_secondary_index(index: &SecondaryIndex) -> Result<()> {
    check_name(&index.namespace, "index namespace", NAMESPACE_BYTES_MAX)?;
    if let Some(set) = &index.set {
        check_name(set, "index set", SET_BYTES_MAX)?;
    }
    check_name(&index.name, "index name", TOKEN_BYTES_MAX)?;
    check_name(&index.bin, "index bin", BIN_NAME_BYTES_MAX)?;
    if let Some(context) = &index.context {
        let too_long = base64_length(context.len()) > TOKEN_BYTES_MAX as u64;
        if context.is_empty() || too_long {
            return Err(EncodeError::InvalidName {
                field: "index context",
                problem: "empty or longer than a token",
            });
        }
    }
    Ok(())
}

/// A name the decoder accepts: not empty, no NUL, at most `max_bytes`.
fn check_name(name: &[u8], field: &'static str, max_bytes: usize) -> Result<()> {
    let problem = if name.is_empty() {
        "empty"
    } else if name.contains(&0) {
        "holding a NUL byte"
    } else if name.len() > max_bytes {
        "too long"
    } else {
        return Ok(());
    };
    Err(EncodeError::InvalidName { field, problem })
}

fn check_length(length_bytes: usize, field: &'static str) -> Result<()> {
    if length_bytes as u64 > LENGTH_MAX {
        return Err(EncodeError::ValueTooLong {
            field,
            length_bytes,
        });
    }
    Ok(())
}

/// A bytes value fits the length field both raw and as base64, so the mode cannot matter.
fn check_bytes_value_length(length_bytes: usize, field: &'static str) -> Result<()> {
    if base64_length(length_bytes) > LENGTH_MAX {
        return Err(EncodeError::ValueTooLong {
            field,
            length_bytes,
        });
    }
    Ok(())
}
