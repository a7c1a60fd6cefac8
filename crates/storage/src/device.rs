//! Where blocks live: the [`Device`] trait and its file implementation.
//!
//! Every byte the storage layer reads or writes goes through a [`Device`], so tests can swap
//! in a device that loses unsynced writes, tears them, flips bits or fails calls.

use std::fmt::Debug;
use std::io;

/// A fixed-size array of bytes with positioned reads and writes and an explicit sync.
///
/// Contract, which every implementation keeps and the storage layer relies on:
/// - `read_at` returns the bytes of the latest completed `write_at` (synced or not).
/// - A write is durable (survives a crash or power loss) only once a later `sync` returned
///   `Ok`. Until then a crash may keep it whole, lose it, or keep any part of it.
/// - After an error from `write_at` or `sync`, nothing written since the last successful sync
///   may be assumed durable.
/// - `prepare` never changes what `read_at` returns.
pub trait Device: Send + Sync + Debug {
    /// Its name for logs and statistics (the file's path).
    fn name(&self) -> &str;
    /// Bytes it holds; fixed for its lifetime.
    fn size_bytes(&self) -> u64;
    /// Reads exactly `buf.len()` bytes starting at `offset`.
    ///
    /// # Errors
    /// An I/O error, or a range beyond `size_bytes`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes all of `data` starting at `offset`.
    ///
    /// # Errors
    /// An I/O error, or a range beyond `size_bytes`.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes every completed write durable.
    ///
    /// # Errors
    /// An I/O error; the writes since the last successful sync are then in doubt.
    fn sync(&self) -> io::Result<()>;
    /// Readies `len_bytes` bytes at `offset`, which the caller is about to fill with a new
    /// block, so that syncing them later is cheap, without changing what reading them returns.
    /// The default does nothing; see [`crate::FileDevice`] for what a file does.
    ///
    /// # Errors
    /// An I/O error, or a range beyond `size_bytes`; nothing was written then but zeros where
    /// the region read as zeros.
    fn prepare(&self, offset: u64, len_bytes: usize) -> io::Result<()> {
        let _ = (offset, len_bytes);
        Ok(())
    }
}
