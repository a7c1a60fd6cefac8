//! [`FileDevice`]: a [`Device`] on a regular file or a block device, with positioned I/O.
//!
//! Invariants:
//! - The underlying file holds at least `size_bytes` bytes for the device's lifetime; a regular
//!   file is created or extended to that length, never truncated (a longer file is an error,
//!   since shrinking it would destroy data).
//! - The file is locked exclusively (`flock`-style, per open file description) while the device
//!   lives, so two Osprey processes never write the same file.
//! - Every read and write is checked against `size_bytes` before it reaches the OS, so nothing
//!   is ever read or written past the configured size.
//! - A newly created file's directory entry is synced before `open` returns, so the file
//!   survives a crash together with anything later synced into it.
//! - `prepare` writes zeros only where the file has a hole (reads as zeros already), so it
//!   never changes what a read returns.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::Path;

use crate::Device;

/// A [`Device`] backed by a regular file or a block device.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    name: String,
    size_bytes: u64,
    /// A regular file (which may have holes), not a block device.
    regular_file: bool,
}

impl FileDevice {
    /// Opens (creating if needed) the file or block device at `path` as a device of
    /// `size_bytes` bytes, and locks it exclusively.
    ///
    /// A missing regular file is created with length `size_bytes`; a shorter one is extended.
    /// A block device must hold at least `size_bytes`; only the first `size_bytes` are used.
    ///
    /// # Errors
    /// - `InvalidInput` if a regular file is longer than `size_bytes` (Osprey refuses to
    ///   truncate it), a block device is smaller than `size_bytes`, or the path is neither a
    ///   regular file nor a block device.
    /// - `ResourceBusy` if another process (or another open of the same file) holds the lock.
    /// - Any I/O error from opening, sizing or syncing, with the path in its message.
    pub fn open(path: &Path, size_bytes: u64) -> io::Result<FileDevice> {
        let name = path.display().to_string();
        let (file, created) = open_or_create(path).map_err(|error| with_name(&name, error))?;
        lock_exclusive(&file, &name)?;
        let file_type = file
            .metadata()
            .map_err(|e| with_name(&name, e))?
            .file_type();
        if file_type.is_block_device() {
            check_block_device_size(&file, &name, size_bytes)?;
        } else if file_type.is_file() {
            size_regular_file(&file, &name, size_bytes)?;
            if created {
                sync_parent_dir(path).map_err(|e| with_name(&name, e))?;
            }
        } else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name}: neither a regular file nor a block device"),
            ));
        }
        Ok(FileDevice {
            file,
            name,
            size_bytes,
            regular_file: file_type.is_file(),
        })
    }
}

impl Device for FileDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(&self.name, self.size_bytes, offset, buf.len())?;
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(&self.name, self.size_bytes, offset, data.len())?;
        self.file.write_all_at(data, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Fills the region with zeros if it is a hole of a regular file (a new file is sized
    /// without being written). Each sync of a write into a hole also commits the space it
    /// allocated to the filesystem's journal; once the region holds written zeros, a sync
    /// writes the data alone (on ext4 here, about a fifth less time per group commit; see
    /// docs/benchmarks.md). A region holding any data is left as it is.
    fn prepare(&self, offset: u64, len_bytes: usize) -> io::Result<()> {
        check_range(&self.name, self.size_bytes, offset, len_bytes)?;
        if !self.regular_file || !self.is_hole(offset, len_bytes) {
            return Ok(());
        }
        write_zeros(&self.file, offset, len_bytes).map_err(|e| with_name(&self.name, e))
    }
}

impl FileDevice {
    /// Whether no byte of the region was ever written (as far as the filesystem tells: one
    /// that cannot says everything is data, and the region is left alone).
    fn is_hole(&self, offset: u64, len_bytes: usize) -> bool {
        match rustix::fs::seek(&self.file, rustix::fs::SeekFrom::Data(offset)) {
            Ok(next_data) => next_data >= offset + len_bytes as u64,
            // No data at or after `offset`.
            Err(rustix::io::Errno::NXIO) => true,
            Err(_) => false,
        }
    }
}

/// Writes `len_bytes` zeros at `offset`, a chunk at a time.
fn write_zeros(file: &File, offset: u64, len_bytes: usize) -> io::Result<()> {
    static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
    let mut written = 0;
    while written < len_bytes {
        let chunk = (len_bytes - written).min(ZEROS.len());
        file.write_all_at(&ZEROS[..chunk], offset + written as u64)?;
        written += chunk;
    }
    Ok(())
}

/// Checks that `len_bytes` bytes at `offset` lie within a device of `size_bytes`.
///
/// Shared with the test device so both reject the same ranges with the same error.
///
/// # Errors
/// `InvalidInput` naming the device and the range when it ends past `size_bytes` (or the end
/// overflows `u64`).
pub(crate) fn check_range(
    name: &str,
    size_bytes: u64,
    offset: u64,
    len_bytes: usize,
) -> io::Result<()> {
    let end = u64::try_from(len_bytes)
        .ok()
        .and_then(|len| offset.checked_add(len));
    match end {
        Some(end) if end <= size_bytes => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{name}: {len_bytes} bytes at offset {offset} lie beyond the device's \
                 {size_bytes} bytes"
            ),
        )),
    }
}

/// Opens `path` read-write, creating it if it does not exist; says whether it was created.
fn open_or_create(path: &Path) -> io::Result<(File, bool)> {
    // create_new first, so "created" is exact even if another process races us.
    match OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => Ok((file, true)),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
            let file = OpenOptions::new().read(true).write(true).open(path)?;
            Ok((file, false))
        }
        Err(error) => Err(error),
    }
}

fn lock_exclusive(file: &File, name: &str) -> io::Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!("{name}: another process is using it (it is locked by another open)"),
        )),
        Err(TryLockError::Error(error)) => Err(with_name(name, error)),
    }
}

fn check_block_device_size(file: &File, name: &str, size_bytes: u64) -> io::Result<()> {
    // A block device's metadata length is 0; seeking to the end gives its real size.
    let mut handle = file;
    let device_bytes = handle
        .seek(SeekFrom::End(0))
        .map_err(|e| with_name(name, e))?;
    if device_bytes < size_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{name}: block device holds {device_bytes} bytes, fewer than the configured \
                 {size_bytes}"
            ),
        ));
    }
    Ok(())
}

fn size_regular_file(file: &File, name: &str, size_bytes: u64) -> io::Result<()> {
    let file_bytes = file.metadata().map_err(|e| with_name(name, e))?.len();
    if file_bytes > size_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{name}: file is larger ({file_bytes} bytes) than the configured size \
                 ({size_bytes} bytes); Osprey refuses to truncate it"
            ),
        ));
    }
    if file_bytes < size_bytes {
        file.set_len(size_bytes).map_err(|e| with_name(name, e))?;
        // The length is metadata, so sync_all rather than sync_data.
        file.sync_all().map_err(|e| with_name(name, e))?;
    }
    Ok(())
}

/// Syncs the directory holding `path`, so a newly created entry survives a crash.
fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}

fn with_name(name: &str, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{name}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A directory under the system temp dir, unique to this process and test, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(label: &str) -> TempDir {
            static COUNTER: AtomicU64 = AtomicU64::new(0);
            let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!(
                "osprey-file-device-{label}-{}-{unique}",
                std::process::id()
            ));
            std::fs::create_dir_all(&path).expect("create temp dir");
            TempDir(path)
        }

        fn file(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn create_write_read_back() {
        let dir = TempDir::new("create");
        let path = dir.file("data");
        let device = FileDevice::open(&path, 8192).expect("open");
        assert_eq!(device.size_bytes(), 8192);
        assert_eq!(device.name(), path.display().to_string());
        assert_eq!(std::fs::metadata(&path).expect("metadata").len(), 8192);

        device.write_at(4000, b"hello device").expect("write");
        device.sync().expect("sync");
        let mut buf = [0u8; 12];
        device.read_at(4000, &mut buf).expect("read");
        assert_eq!(&buf, b"hello device");

        let mut fresh = [0xFFu8; 16];
        device.read_at(0, &mut fresh).expect("read zeroes");
        assert_eq!(fresh, [0u8; 16], "a new file reads as zeroes");
    }

    #[test]
    fn reopen_preserves_data() {
        let dir = TempDir::new("reopen");
        let path = dir.file("data");
        {
            let device = FileDevice::open(&path, 4096).expect("open");
            device.write_at(4090, b"tail!!").expect("write");
            device.sync().expect("sync");
        }
        let device = FileDevice::open(&path, 4096).expect("reopen");
        let mut buf = [0u8; 6];
        device.read_at(4090, &mut buf).expect("read");
        assert_eq!(&buf, b"tail!!");
    }

    #[test]
    fn reopen_with_smaller_size_fails() {
        let dir = TempDir::new("smaller");
        let path = dir.file("data");
        drop(FileDevice::open(&path, 4096).expect("open"));
        let error = FileDevice::open(&path, 1024).expect_err("smaller size must fail");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        let message = error.to_string();
        assert!(message.contains("larger"), "{message}");
        assert!(message.contains("refuses to truncate"), "{message}");
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert_eq!(
            std::fs::metadata(&path).expect("metadata").len(),
            4096,
            "the file is left untouched"
        );
    }

    #[test]
    fn reopen_with_larger_size_extends() {
        let dir = TempDir::new("larger");
        let path = dir.file("data");
        {
            let device = FileDevice::open(&path, 1024).expect("open");
            device.write_at(0, b"keep").expect("write");
            device.sync().expect("sync");
        }
        let device = FileDevice::open(&path, 3000).expect("reopen larger");
        assert_eq!(device.size_bytes(), 3000);
        assert_eq!(std::fs::metadata(&path).expect("metadata").len(), 3000);
        let mut head = [0u8; 4];
        device.read_at(0, &mut head).expect("read head");
        assert_eq!(&head, b"keep");
        let mut tail = [0xFFu8; 8];
        device.read_at(2992, &mut tail).expect("read extension");
        assert_eq!(tail, [0u8; 8]);
    }

    #[test]
    fn out_of_range_reads_and_writes_fail() {
        let dir = TempDir::new("range");
        let device = FileDevice::open(&dir.file("data"), 1024).expect("open");
        let mut buf = [0u8; 8];
        let cases: [(u64, usize); 4] = [(1020, 8), (1024, 1), (u64::MAX, 8), (u64::MAX - 3, 8)];
        for (offset, len) in cases {
            let error = device
                .read_at(offset, &mut buf[..len])
                .expect_err("read beyond size");
            assert_eq!(
                error.kind(),
                io::ErrorKind::InvalidInput,
                "read {offset}+{len}"
            );
            let error = device
                .write_at(offset, &buf[..len])
                .expect_err("write beyond size");
            assert_eq!(
                error.kind(),
                io::ErrorKind::InvalidInput,
                "write {offset}+{len}"
            );
            let error = device
                .prepare(offset, len)
                .expect_err("prepare beyond size");
            assert_eq!(
                error.kind(),
                io::ErrorKind::InvalidInput,
                "prepare {offset}+{len}"
            );
        }
        device
            .write_at(1016, &buf)
            .expect("write ending exactly at the end");
        device
            .read_at(1024, &mut [])
            .expect("empty read at the end");
    }

    /// 512-byte units the file occupies on its filesystem.
    fn allocated_sectors(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).expect("metadata").blocks()
    }

    const MIB: usize = 1024 * 1024;

    #[test]
    fn prepare_fills_a_hole_with_written_zeros() {
        let dir = TempDir::new("prepare-hole");
        let path = dir.file("data");
        let device = FileDevice::open(&path, 4 * MIB as u64).expect("open");
        let sparse = allocated_sectors(&path) == 0;
        device.prepare(MIB as u64, MIB).expect("prepare");
        let mut region = vec![0xFF; MIB];
        device.read_at(MIB as u64, &mut region).expect("read");
        assert!(
            region.iter().all(|&b| b == 0),
            "a prepared hole reads as zeros"
        );
        if sparse {
            device.sync().expect("sync");
            assert!(
                allocated_sectors(&path) >= (MIB / 512) as u64,
                "the region is allocated: {} sectors",
                allocated_sectors(&path)
            );
            assert!(!device.is_hole(MIB as u64, MIB), "no longer a hole");
            assert!(device.is_hole(2 * MIB as u64, 2 * MIB), "the rest still is");
        } else {
            eprintln!("this filesystem made no sparse file: allocation not checked");
        }
    }

    #[test]
    fn prepare_leaves_a_region_holding_data_as_it_is() {
        let dir = TempDir::new("prepare-data");
        let path = dir.file("data");
        let device = FileDevice::open(&path, 4 * MIB as u64).expect("open");
        device.write_at(MIB as u64 + 100, b"kept").expect("write");
        device.sync().expect("sync");
        let sectors_before = allocated_sectors(&path);
        device.prepare(MIB as u64, MIB).expect("prepare");
        let mut kept = [0; 4];
        device.read_at(MIB as u64 + 100, &mut kept).expect("read");
        assert_eq!(&kept, b"kept");
        device.sync().expect("sync");
        assert_eq!(
            allocated_sectors(&path),
            sectors_before,
            "nothing written over a region with data"
        );
    }

    #[test]
    fn second_open_fails_while_first_is_alive() {
        let dir = TempDir::new("lock");
        let path = dir.file("data");
        let first = FileDevice::open(&path, 1024).expect("first open");
        let error = FileDevice::open(&path, 1024).expect_err("second open must fail");
        let message = error.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("another process"), "{message}");
        drop(first);
        FileDevice::open(&path, 1024).expect("open after the first closed");
    }

    #[test]
    fn a_directory_is_rejected() {
        let dir = TempDir::new("dir");
        let error = FileDevice::open(&dir.0, 1024).expect_err("a directory is no device");
        assert!(
            error.to_string().contains(&dir.0.display().to_string()),
            "{error}"
        );
    }
}
