//! Zstandard around a whole backup stream, as asbackup's `--compress zstd` writes it.
//!
//! The text, header included, is one zstd stream; a reader decompresses, then decodes. The
//! writers here set zstd's content checksum (asbackup's C writer does not; the Go tool's does),
//! so a stream written here carries a 4-byte checksum per frame that the reader verifies at the
//! end of each frame. Streams from asbackup without one still read.

use std::io::{self, BufReader, Read, Write};

/// The first four bytes of every zstd frame (RFC 8878, section 3.1.1), for a restore that
/// wants to tell a compressed file from a plain one without being told.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// zstd's default level, which asbackup also uses when `--compression-level` is not given.
pub const ZSTD_LEVEL_DEFAULT: i32 = 3;

/// A writer that compresses everything written to it into `writer`.
pub type ZstdWriter<W> = zstd::stream::write::Encoder<'static, W>;

/// A buffered reader of the decompressed bytes of `reader`, ready for the decoder.
pub type ZstdReader<R> = BufReader<zstd::stream::read::Decoder<'static, BufReader<R>>>;

/// Starts a zstd stream into `writer` at `level`, with the content checksum on. Call
/// `finish()` on the result when done, or the stream is left without its end.
///
/// # Errors
/// zstd's error for a level it refuses.
pub fn zstd_writer<W: Write>(writer: W, level: i32) -> io::Result<ZstdWriter<W>> {
    let mut encoder = zstd::stream::write::Encoder::new(writer, level)?;
    encoder.include_checksum(true)?;
    Ok(encoder)
}

/// A reader that decompresses the zstd stream in `reader`, one or more frames, verifying each
/// frame's checksum where it has one. A stream cut short or corrupted makes a read fail.
///
/// # Errors
/// zstd's error when its decoder cannot be created.
pub fn zstd_reader<R: Read>(reader: R) -> io::Result<ZstdReader<R>> {
    let decoder = zstd::stream::read::Decoder::new(reader)?;
    Ok(BufReader::new(decoder))
}
