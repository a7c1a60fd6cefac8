//! The file-system seam of the metadata group's store: one flat directory of small files.
//!
//! [`FileDisk`] is the real directory; [`MemoryDisk`] keeps the files in memory, models what a
//! power loss keeps ([`MemoryDisk::crash_image`]) and fails syncs on demand, so tests can check
//! that nothing is acknowledged before it is durable.
//!
//! Invariants:
//! - [`MetaDisk::write_synced`] returns only after the file's bytes reached stable storage (or
//!   with the error); it writes and syncs through the same open file, so a failed writeback cannot
//!   hide behind a second descriptor.
//! - A name, a rename or a removal is durable only after [`MetaDisk::sync_dir`].
//! - [`replace_durably`] never truncates the file it replaces: it writes a temporary file, syncs
//!   it, renames it over the old one and syncs the directory, so a crash leaves old or new.
//! - The calls block; the store makes few and small ones (metadata changes are rare).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;

use parking_lot::Mutex;

/// Suffix of a file being written by [`replace_durably`]; such files are garbage after a crash.
pub const TEMP_SUFFIX: &str = ".tmp";

/// A flat directory of files, the only way the store touches storage.
pub trait MetaDisk: Send + Sync + 'static {
    /// The names of the files in the directory, in no particular order.
    ///
    /// # Errors
    /// The I/O error of listing the directory.
    fn list(&self) -> io::Result<Vec<String>>;

    /// The whole content of `name`, or `None` when there is no such file.
    ///
    /// # Errors
    /// The I/O error of reading it.
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>>;

    /// Creates or replaces `name` with `bytes` and syncs the file before returning.
    ///
    /// # Errors
    /// The I/O error of writing or syncing; the content is then unknown.
    fn write_synced(&self, name: &str, bytes: &[u8]) -> io::Result<()>;

    /// Renames `from` to `to`, atomically replacing `to`.
    ///
    /// # Errors
    /// The I/O error of renaming.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;

    /// Removes `name`; a missing file is not an error.
    ///
    /// # Errors
    /// The I/O error of removing.
    fn remove(&self, name: &str) -> io::Result<()>;

    /// Makes every earlier creation, rename and removal durable.
    ///
    /// # Errors
    /// The I/O error of syncing the directory.
    fn sync_dir(&self) -> io::Result<()>;
}

/// Replaces `name` with `bytes` so that a crash at any point leaves the old or the new content.
///
/// # Errors
/// The first I/O error; the old content may then still be in place.
pub fn replace_durably(disk: &dyn MetaDisk, name: &str, bytes: &[u8]) -> io::Result<()> {
    let temp = format!("{name}{TEMP_SUFFIX}");
    disk.write_synced(&temp, bytes)?;
    disk.rename(&temp, name)?;
    disk.sync_dir()
}

/// A real directory.
#[derive(Debug)]
pub struct FileDisk {
    dir: PathBuf,
}

impl FileDisk {
    /// Opens `dir`, creating it (and its parents) if needed.
    ///
    /// # Errors
    /// The I/O error of creating the directory.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir)?;
        Ok(Self { dir })
    }

    fn path(&self, name: &str) -> PathBuf {
        assert!(!name.contains('/'), "file name {name:?} must be flat");
        self.dir.join(name)
    }
}

impl MetaDisk for FileDisk {
    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        match fs::read(self.path(name)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn write_synced(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.path(name))?;
        file.write_all(bytes)?;
        file.sync_all()
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        fs::rename(self.path(from), self.path(to))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match fs::remove_file(self.path(name)) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }
}

/// A directory in memory that remembers what a power loss would keep.
///
/// Model: a synced file's bytes survive a crash; an unsynced file comes back torn (its first
/// half); a name exists after a crash only as of the last [`MetaDisk::sync_dir`].
#[derive(Debug, Default)]
pub struct MemoryDisk {
    inner: Mutex<MemoryInner>,
}

#[derive(Clone, Debug, Default)]
struct MemoryInner {
    inode_next: u64,
    inodes: BTreeMap<u64, Inode>,
    names_live: BTreeMap<String, u64>,
    names_durable: BTreeMap<String, u64>,
    syncs_failing: bool,
}

#[derive(Clone, Debug)]
struct Inode {
    bytes: Vec<u8>,
    synced: bool,
}

impl MemoryDisk {
    /// An empty directory.
    pub fn new() -> Self {
        Self::default()
    }

    /// While `failing`, every file sync and directory sync fails with an I/O error (the write
    /// itself happens, but is not durable).
    pub fn set_syncs_failing(&self, failing: bool) {
        self.inner.lock().syncs_failing = failing;
    }

    /// A new disk holding what a power loss at this moment would leave.
    pub fn crash_image(&self) -> MemoryDisk {
        let inner = self.inner.lock();
        let mut image = MemoryInner {
            inode_next: inner.inode_next,
            ..MemoryInner::default()
        };
        for (name, inode_id) in &inner.names_durable {
            let Some(inode) = inner.inodes.get(inode_id) else {
                continue;
            };
            let bytes = if inode.synced {
                inode.bytes.clone()
            } else {
                inode.bytes[..inode.bytes.len() / 2].to_vec()
            };
            let survivor = Inode {
                bytes,
                synced: true,
            };
            image.inodes.insert(*inode_id, survivor);
            image.names_live.insert(name.clone(), *inode_id);
            image.names_durable.insert(name.clone(), *inode_id);
        }
        MemoryDisk {
            inner: Mutex::new(image),
        }
    }

    fn sync_error() -> io::Error {
        io::Error::other("injected sync failure")
    }
}

impl MetaDisk for MemoryDisk {
    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.inner.lock().names_live.keys().cloned().collect())
    }

    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        let inner = self.inner.lock();
        let inode = inner
            .names_live
            .get(name)
            .and_then(|id| inner.inodes.get(id));
        Ok(inode.map(|inode| inode.bytes.clone()))
    }

    fn write_synced(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let mut inner = self.inner.lock();
        let synced = !inner.syncs_failing;
        let inode = Inode {
            bytes: bytes.to_vec(),
            synced,
        };
        // Like `O_TRUNC`: an existing file keeps its inode, a new name gets a new one.
        let inode_id = match inner.names_live.get(name) {
            Some(id) => *id,
            None => {
                inner.inode_next += 1;
                inner.inode_next
            }
        };
        inner.inodes.insert(inode_id, inode);
        inner.names_live.insert(name.to_owned(), inode_id);
        if synced {
            Ok(())
        } else {
            Err(Self::sync_error())
        }
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut inner = self.inner.lock();
        let Some(inode_id) = inner.names_live.remove(from) else {
            return Err(io::Error::new(io::ErrorKind::NotFound, from.to_owned()));
        };
        inner.names_live.insert(to.to_owned(), inode_id);
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.lock().names_live.remove(name);
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut inner = self.inner.lock();
        if inner.syncs_failing {
            return Err(Self::sync_error());
        }
        inner.names_durable = inner.names_live.clone();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_image_keeps_synced_files_and_loses_unsynced_names() {
        let disk = MemoryDisk::new();
        replace_durably(&disk, "vote", b"v1").expect("memory disk");
        disk.write_synced("log-1", b"entry").expect("memory disk");
        let image = disk.crash_image();
        assert_eq!(image.read("vote").expect("memory"), Some(b"v1".to_vec()));
        assert_eq!(image.read("log-1").expect("memory"), None);
        disk.sync_dir().expect("memory disk");
        let image = disk.crash_image();
        assert_eq!(
            image.read("log-1").expect("memory"),
            Some(b"entry".to_vec())
        );
    }

    #[test]
    fn a_failed_sync_leaves_the_old_content_after_a_crash() {
        let disk = MemoryDisk::new();
        replace_durably(&disk, "vote", b"old!").expect("memory disk");
        disk.set_syncs_failing(true);
        assert!(replace_durably(&disk, "vote", b"new!").is_err());
        let image = disk.crash_image();
        assert_eq!(image.read("vote").expect("memory"), Some(b"old!".to_vec()));
    }
}
