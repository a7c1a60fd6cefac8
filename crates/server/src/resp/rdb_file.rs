//! Redis's RDB file (what redis-server's SAVE writes, version 10 for Redis 7.0): read as a
//! stream of items, and written.
//!
//! ```text
//! "REDIS" + 4 ASCII digits (the version)
//! then records, each an opcode or a value type:
//!   0xFA AUX name value        0xF5 FUNCTION2 code        0xF7 MODULE_AUX (refused)
//!   0xFE SELECTDB db           0xFB RESIZEDB size expires-size
//!   0xFC EXPIRETIME_MS i64 LE  0xFD EXPIRETIME i32 LE s   0xF9 FREQ u8   0xF8 IDLE length
//!   <type> key value           (the value's encoding is `rdb.rs`'s)
//! 0xFF EOF, then (version 5 and later) the CRC-64 of every byte before it, little-endian;
//! 0 means the writer disabled checksums.
//! ```
//!
//! Invariants:
//! - The file is read through a buffer: memory holds at most the largest single value (and
//!   the buffer), never the file. No length the file declares is allocated before the bytes
//!   behind it have been read (`FileInput::take_vec` grows by chunks as they arrive).
//! - Reading never panics, whatever the bytes (a unit test feeds random and truncated files).
//! - Every refusal names the byte offset, and the key and its database once they are known.
//! - The checksum covers exactly the bytes before it: `FileInput` adds to it every byte it
//!   hands out, and the 8 checksum bytes are read after its value is taken.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};

use super::rdb::{self, Input, RdbValue, Reader, crc64, rdb_opcode, rdb_type};

/// The newest RDB version read, and the one written: Redis 7.0's.
pub const RDB_FILE_VERSION: u32 = rdb::RDB_VERSION as u32;

/// The first RDB version whose files end with a checksum.
const CHECKSUM_VERSION_MIN: u32 = 5;

/// The bytes of a file's magic: "REDIS", then 4 digits.
const MAGIC: &[u8; 5] = b"REDIS";

/// Bytes read from the file at a time.
const READ_BUFFER_BYTES: usize = 1 << 16;

/// A value larger than the buffer grows by at most this much before its bytes are read, so
/// a declared length that the file does not hold is never allocated.
const GROW_CHUNK_BYTES: usize = 1 << 20;

const _: () = assert!(GROW_CHUNK_BYTES >= READ_BUFFER_BYTES);

/// The opcodes of an RDB file (Redis's `rdb.h`).
mod opcode {
    pub const MODULE_AUX: u8 = 0xf7;
    pub const IDLE: u8 = 0xf8;
    pub const FREQ: u8 = 0xf9;
    pub const AUX: u8 = 0xfa;
    pub const RESIZEDB: u8 = 0xfb;
    pub const EXPIRETIME_MS: u8 = 0xfc;
    pub const EXPIRETIME: u8 = 0xfd;
    pub const SELECTDB: u8 = 0xfe;
    pub const EOF: u8 = 0xff;
}

/// One thing an RDB file holds.
#[derive(Debug)]
pub enum Item {
    /// An auxiliary field (`redis-ver`, `ctime`, ...).
    Aux {
        /// Its name.
        name: Vec<u8>,
        /// Its value.
        value: Vec<u8>,
    },
    /// A function library's code (Redis 7's FUNCTION2).
    Function(Vec<u8>),
    /// A key and its value.
    Key(KeyItem),
}

/// A key as the file holds it.
#[derive(Debug)]
pub struct KeyItem {
    /// Its database.
    pub database: u64,
    /// The key.
    pub key: Vec<u8>,
    /// Its value.
    pub value: RdbValue,
    /// When it expires, Unix milliseconds; `None` for never.
    pub expire_at_ms: Option<i64>,
    /// Where its record starts in the file.
    pub offset: u64,
}

/// Why a file, or something in it, was refused.
#[derive(Debug)]
pub enum Problem {
    /// The file could not be read.
    Io(io::Error),
    /// It does not start with `REDIS` and 4 digits.
    NotAnRdbFile,
    /// Its version is newer than [`RDB_FILE_VERSION`] (or 0).
    Version(u32),
    /// It ends before its EOF record.
    Truncated,
    /// Its bytes are not what the format allows here.
    Malformed(&'static str),
    /// Its checksum does not match its bytes.
    Checksum {
        /// The checksum the file ends with.
        stored: u64,
        /// The checksum of its bytes.
        computed: u64,
    },
    /// A module's value, by the module type's name.
    ModuleType(String),
    /// A module's auxiliary data, by the module type's name.
    ModuleAux(String),
    /// Redis 7.0's release candidates' function record.
    FunctionPreGa,
    /// The zipmap hash of Redis before 2.6.
    Zipmap,
    /// A value type byte Redis 7.0 does not write.
    ValueType(u8),
    /// A database number at or above `resp.databases`.
    Database {
        /// How many databases the server has.
        databases: u16,
    },
    /// An expiry further away than a record's longest TTL.
    ExpiryTooFar,
    /// The engine refused to store the key.
    Store(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Io(error) => write!(f, "cannot read it: {error}"),
            Problem::NotAnRdbFile => write!(f, "not an RDB file (no REDIS header)"),
            Problem::Version(version) => write!(
                f,
                "RDB version {version} is newer than the newest Osprey reads \
                 ({RDB_FILE_VERSION}, Redis 7.0's)"
            ),
            Problem::Truncated => write!(f, "the file ends before its EOF record (truncated)"),
            Problem::Malformed(what) => write!(f, "malformed {what}"),
            Problem::Checksum { stored, computed } => write!(
                f,
                "wrong checksum: the file says {stored:016x}, its bytes give {computed:016x}"
            ),
            Problem::ModuleType(name) => {
                write!(f, "module type '{name}' is not something Osprey stores")
            }
            Problem::ModuleAux(name) => write!(
                f,
                "auxiliary data of module '{name}': Osprey loads no Redis modules"
            ),
            Problem::FunctionPreGa => write!(
                f,
                "the function format of Redis 7.0's release candidates is not supported"
            ),
            Problem::Zipmap => write!(f, "the zipmap hash of Redis before 2.6 is not supported"),
            Problem::ValueType(value_type) => write!(f, "unknown value type {value_type}"),
            Problem::Database { databases } => write!(
                f,
                "the server has {databases} databases (resp.databases): raise it to load this \
                 file"
            ),
            Problem::ExpiryTooFar => write!(
                f,
                "expires more than ten years from now, beyond a record's longest TTL"
            ),
            Problem::Store(reason) => write!(f, "could not be stored: {reason}"),
        }
    }
}

/// A refusal, where it happened.
#[derive(Debug)]
pub struct RdbError {
    /// The byte of the file where the record being read starts.
    pub offset: u64,
    /// The database and key, once known.
    pub key: Option<(u64, Vec<u8>)>,
    /// What is wrong.
    pub problem: Problem,
}

impl RdbError {
    fn at(offset: u64, problem: Problem) -> RdbError {
        RdbError {
            offset,
            key: None,
            problem,
        }
    }
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((database, key)) = &self.key {
            write!(f, "key \"{}\" in db {database}: ", shown_key(key))?;
        }
        write!(f, "{} (at byte {})", self.problem, self.offset)
    }
}

/// A key as an error shows it: printable ASCII as it is, other bytes escaped, at most
/// [`SHOWN_KEY_BYTES`].
fn shown_key(key: &[u8]) -> String {
    let shown = &key[..key.len().min(SHOWN_KEY_BYTES)];
    let mut text: String = shown
        .iter()
        .flat_map(|byte| std::ascii::escape_default(*byte))
        .map(char::from)
        .collect();
    if key.len() > shown.len() {
        text.push_str("...");
    }
    text
}

/// The most bytes of a key an error shows.
const SHOWN_KEY_BYTES: usize = 128;

/// The name of a module type by its 64-bit id: 9 characters of 6 bits, then 10 bits of
/// encoding version (Redis's `moduleTypeNameByID`).
fn module_type_name(module_id: u64) -> String {
    const CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut name = [0u8; 9];
    let mut bits = module_id >> 10;
    for slot in name.iter_mut().rev() {
        *slot = CHARSET[(bits & 63) as usize];
        bits >>= 6;
    }
    String::from_utf8_lossy(&name).into_owned()
}

/// A file's bytes through a buffer, with the running checksum and offset of what was taken.
pub(super) struct FileInput<R> {
    source: BufReader<R>,
    /// Bytes of the buffer handed out by the last `take`, consumed at the next call.
    consume_next: usize,
    /// Where a `take` larger than what the buffer holds is gathered.
    scratch: Vec<u8>,
    crc: u64,
    offset: u64,
    /// The file ended before a `take` was satisfied.
    ended: bool,
    /// The read that failed.
    failure: Option<io::Error>,
}

impl<R: Read> FileInput<R> {
    fn new(source: R) -> FileInput<R> {
        FileInput {
            source: BufReader::with_capacity(READ_BUFFER_BYTES, source),
            consume_next: 0,
            scratch: Vec::new(),
            crc: 0,
            offset: 0,
            ended: false,
            failure: None,
        }
    }

    /// Consumes what the last `take` handed out, and fills the buffer when it is empty.
    fn settle(&mut self) -> Option<()> {
        self.source.consume(self.consume_next);
        self.consume_next = 0;
        if self.source.buffer().is_empty()
            && let Err(error) = self.source.fill_buf()
        {
            self.failure = Some(error);
            return None;
        }
        Some(())
    }

    /// Reads `count` bytes onto the end of `out`, growing it a chunk at a time as the bytes
    /// arrive; `false` at the end of the file or on a failed read.
    fn read_growing(&mut self, count: usize, out: &mut Vec<u8>) -> bool {
        let mut left = count;
        while left > 0 {
            let chunk = left.min(GROW_CHUNK_BYTES);
            let start = out.len();
            out.resize(start + chunk, 0);
            if let Err(error) = self.source.read_exact(&mut out[start..]) {
                if error.kind() == io::ErrorKind::UnexpectedEof {
                    self.ended = true;
                } else {
                    self.failure = Some(error);
                }
                return false;
            }
            left -= chunk;
        }
        true
    }

    fn account(&mut self, count: usize, from_scratch: bool) {
        let bytes = if from_scratch {
            &self.scratch[..]
        } else {
            &self.source.buffer()[..count]
        };
        self.crc = crc64(self.crc, bytes);
        self.offset += count as u64;
    }
}

impl<R: Read> Input for FileInput<R> {
    fn take(&mut self, count: usize) -> Option<&[u8]> {
        self.settle()?;
        if self.source.buffer().len() >= count {
            self.account(count, false);
            self.consume_next = count;
            return Some(&self.source.buffer()[..count]);
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let read = self.read_growing(count, &mut scratch);
        self.scratch = scratch;
        if !read {
            return None;
        }
        self.account(count, true);
        Some(&self.scratch)
    }

    fn take_vec(&mut self, count: usize) -> Option<Vec<u8>> {
        self.settle()?;
        if self.source.buffer().len() >= count {
            self.account(count, false);
            self.consume_next = count;
            return Some(self.source.buffer()[..count].to_vec());
        }
        let mut out = Vec::new();
        if !self.read_growing(count, &mut out) {
            return None;
        }
        self.crc = crc64(self.crc, &out);
        self.offset += count as u64;
        Some(out)
    }
}

/// Reads an RDB file's items in order, and checks its checksum at its end.
pub struct RdbFileReader<R> {
    reader: Reader<FileInput<R>>,
    version: u32,
    database: u64,
    finished: bool,
}

impl<R: Read> RdbFileReader<R> {
    /// Reads the header of the file `source` holds.
    ///
    /// # Errors
    /// Not an RDB file, a version newer than [`RDB_FILE_VERSION`], or a failed read.
    pub fn new(source: R) -> Result<RdbFileReader<R>, RdbError> {
        let mut reader = RdbFileReader {
            reader: Reader::new(FileInput::new(source)),
            version: 0,
            database: 0,
            finished: false,
        };
        let header: Option<[u8; 9]> = reader.reader.array();
        let Some(header) = header else {
            // Shorter than a header: not an RDB file, unless the read itself failed.
            let problem = match reader.reader.input.failure.take() {
                Some(error) => Problem::Io(error),
                None => Problem::NotAnRdbFile,
            };
            return Err(RdbError::at(0, problem));
        };
        let digits = &header[MAGIC.len()..];
        if &header[..MAGIC.len()] != MAGIC || !digits.iter().all(u8::is_ascii_digit) {
            return Err(RdbError::at(0, Problem::NotAnRdbFile));
        }
        let version = digits
            .iter()
            .fold(0, |version, digit| version * 10 + u32::from(digit - b'0'));
        if version == 0 || version > RDB_FILE_VERSION {
            return Err(RdbError::at(0, Problem::Version(version)));
        }
        reader.version = version;
        Ok(reader)
    }

    /// The file's RDB version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.reader.input.offset
    }

    /// The next item; `None` after the EOF record, whose checksum then held.
    ///
    /// # Errors
    /// What the file holds that cannot be taken, or a failed read: see [`Problem`].
    pub fn next_item(&mut self) -> Result<Option<Item>, RdbError> {
        if self.finished {
            return Ok(None);
        }
        let mut expire_at_ms = None;
        loop {
            let offset = self.offset();
            let Some(code) = self.reader.byte() else {
                return Err(self.failure(offset, Problem::Truncated));
            };
            let read = match code {
                opcode::AUX => self.aux(),
                rdb_opcode::FUNCTION_2 => self.reader.string().map(Item::Function),
                rdb_opcode::FUNCTION_PRE_GA => {
                    return Err(RdbError::at(offset, Problem::FunctionPreGa));
                }
                opcode::MODULE_AUX => return Err(self.module_aux(offset)),
                opcode::EOF => return self.end(offset).map(|()| None),
                opcode::SELECTDB => {
                    self.database = self.expect(offset, "SELECTDB", Reader::length_u64)?;
                    continue;
                }
                opcode::RESIZEDB => {
                    self.expect(offset, "RESIZEDB", Reader::length_u64)?;
                    self.expect(offset, "RESIZEDB", Reader::length_u64)?;
                    continue;
                }
                opcode::EXPIRETIME_MS => {
                    let at = self.expect(offset, "expiry", Reader::array::<8>)?;
                    expire_at_ms = Some(i64::from_le_bytes(at));
                    continue;
                }
                opcode::EXPIRETIME => {
                    let at = self.expect(offset, "expiry", Reader::array::<4>)?;
                    expire_at_ms = Some(i64::from(i32::from_le_bytes(at)) * 1000);
                    continue;
                }
                opcode::FREQ => {
                    self.expect(offset, "FREQ", Reader::byte)?;
                    continue;
                }
                opcode::IDLE => {
                    self.expect(offset, "IDLE", Reader::length_u64)?;
                    continue;
                }
                value_type => return self.key(offset, value_type, expire_at_ms).map(Some),
            };
            return match read {
                Some(item) => Ok(Some(item)),
                None => Err(self.failure(offset, Problem::Malformed("auxiliary record"))),
            };
        }
    }

    fn aux(&mut self) -> Option<Item> {
        let name = self.reader.string()?;
        let value = self.reader.string()?;
        Some(Item::Aux { name, value })
    }

    /// Reads with `read`; a failure is refused as a malformed `what` (or truncation).
    fn expect<T>(
        &mut self,
        offset: u64,
        what: &'static str,
        read: impl FnOnce(&mut Reader<FileInput<R>>) -> Option<T>,
    ) -> Result<T, RdbError> {
        read(&mut self.reader).ok_or_else(|| self.failure(offset, Problem::Malformed(what)))
    }

    fn module_aux(&mut self, offset: u64) -> RdbError {
        match self.reader.length_u64() {
            Some(module_id) => {
                RdbError::at(offset, Problem::ModuleAux(module_type_name(module_id)))
            }
            None => self.failure(offset, Problem::Malformed("module auxiliary record")),
        }
    }

    /// A key record of `value_type`, its type byte read.
    fn key(
        &mut self,
        offset: u64,
        value_type: u8,
        expire_at_ms: Option<i64>,
    ) -> Result<Item, RdbError> {
        let key = self.expect(offset, "key", Reader::string)?;
        let database = self.database;
        let located = |problem| RdbError {
            offset,
            key: Some((database, key.clone())),
            problem,
        };
        let value = match value_type {
            rdb_type::MODULE_PRE_GA | rdb_type::MODULE_2 => {
                let problem = match self.reader.length_u64() {
                    Some(module_id) => Problem::ModuleType(module_type_name(module_id)),
                    None => Problem::Malformed("module value"),
                };
                return Err(located(problem));
            }
            rdb_type::HASH_ZIPMAP => return Err(located(Problem::Zipmap)),
            _ if !rdb::is_value_type(value_type) => {
                return Err(located(Problem::ValueType(value_type)));
            }
            _ => self.reader.value_of_type(value_type),
        };
        let Some(value) = value else {
            let problem = self.short_or(Problem::Malformed("value"));
            return Err(located(problem));
        };
        Ok(Item::Key(KeyItem {
            database: self.database,
            key,
            value,
            expire_at_ms,
            offset,
        }))
    }

    /// The EOF record: the checksum, when the version has one and the writer computed it.
    fn end(&mut self, offset: u64) -> Result<(), RdbError> {
        self.finished = true;
        if self.version < CHECKSUM_VERSION_MIN {
            return Ok(());
        }
        let computed = self.reader.input.crc;
        let stored = self.expect(offset, "checksum", Reader::array::<8>)?;
        let stored = u64::from_le_bytes(stored);
        if stored != 0 && stored != computed {
            return Err(RdbError::at(offset, Problem::Checksum { stored, computed }));
        }
        Ok(())
    }

    /// `problem`, unless the input ran out or failed, which is the real reason.
    fn short_or(&mut self, problem: Problem) -> Problem {
        let input = &mut self.reader.input;
        if let Some(error) = input.failure.take() {
            return Problem::Io(error);
        }
        if input.ended || input.source.buffer().is_empty() {
            return Problem::Truncated;
        }
        problem
    }

    fn failure(&mut self, offset: u64, problem: Problem) -> RdbError {
        let problem = self.short_or(problem);
        RdbError::at(offset, problem)
    }
}

/// A [`Write`] that keeps the CRC-64 of what passed through it.
pub struct ChecksumWriter<W> {
    inner: W,
    crc: u64,
}

impl<W: Write> ChecksumWriter<W> {
    /// Writes to `inner`.
    pub fn new(inner: W) -> ChecksumWriter<W> {
        ChecksumWriter { inner, crc: 0 }
    }

    /// The CRC-64 of everything written so far.
    pub fn crc(&self) -> u64 {
        self.crc
    }

    /// The writer it wraps.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for ChecksumWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(bytes)?;
        self.crc = crc64(self.crc, &bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes an RDB file: header, then what the caller adds, then [`RdbFileWriter::finish`].
pub struct RdbFileWriter<W: Write> {
    out: ChecksumWriter<W>,
    /// One record's bytes, reused.
    record: Vec<u8>,
}

impl<W: Write> RdbFileWriter<W> {
    /// Writes the version 10 header and Redis 7.0's auxiliary fields to `out`.
    ///
    /// # Errors
    /// A failed write.
    pub fn new(out: W, ctime_unix_s: i64) -> io::Result<RdbFileWriter<W>> {
        let mut writer = RdbFileWriter {
            out: ChecksumWriter::new(out),
            record: Vec::new(),
        };
        writer
            .out
            .write_all(format!("REDIS{RDB_FILE_VERSION:04}").as_bytes())?;
        let ctime = ctime_unix_s.to_string();
        for (name, value) in [
            ("redis-ver", REDIS_VERSION_WRITTEN),
            ("redis-bits", "64"),
            ("ctime", &ctime),
            ("used-mem", "0"),
            ("aof-base", "0"),
        ] {
            writer.record.push(opcode::AUX);
            rdb::write_string(&mut writer.record, name.as_bytes());
            rdb::write_string(&mut writer.record, value.as_bytes());
        }
        writer.flush_record()?;
        Ok(writer)
    }

    fn flush_record(&mut self) -> io::Result<()> {
        self.out.write_all(&self.record)?;
        self.record.clear();
        Ok(())
    }

    /// A function library's code.
    ///
    /// # Errors
    /// A failed write.
    pub fn function(&mut self, code: &[u8]) -> io::Result<()> {
        self.record.push(rdb_opcode::FUNCTION_2);
        rdb::write_string(&mut self.record, code);
        self.flush_record()
    }

    /// Starts database `database`, which holds about `keys` keys (a hint for the reader).
    ///
    /// # Errors
    /// A failed write.
    pub fn select_database(&mut self, database: u16, keys: u64) -> io::Result<()> {
        self.record.push(opcode::SELECTDB);
        rdb::write_length(&mut self.record, u64::from(database));
        self.record.push(opcode::RESIZEDB);
        rdb::write_length(&mut self.record, keys);
        rdb::write_length(&mut self.record, 0);
        self.flush_record()
    }

    /// The bytes of one key record, to hand to [`RdbFileWriter::write_encoded`] (they can be
    /// made while a lock is held and written after).
    pub fn encode_key(out: &mut Vec<u8>, key: &[u8], value: &RdbValue, expire_at_ms: Option<i64>) {
        if let Some(at_ms) = expire_at_ms {
            out.push(opcode::EXPIRETIME_MS);
            out.extend_from_slice(&at_ms.to_le_bytes());
        }
        out.push(rdb::value_type_of(value));
        rdb::write_string(out, key);
        rdb::write_value_body(out, value);
    }

    /// Key records made by [`RdbFileWriter::encode_key`].
    ///
    /// # Errors
    /// A failed write.
    pub fn write_encoded(&mut self, records: &[u8]) -> io::Result<()> {
        self.out.write_all(records)
    }

    /// Writes the EOF record and the checksum; the writer it wrote to.
    ///
    /// # Errors
    /// A failed write.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&[opcode::EOF])?;
        let crc = self.out.crc();
        self.out.write_all(&crc.to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out.into_inner())
    }
}

/// The Redis version an RDB file Osprey writes claims: the one whose format it follows.
const REDIS_VERSION_WRITTEN: &str = "7.0.15";

#[cfg(test)]
mod tests;
