//! Where the tables are kept: a file written whole and renamed into place, so a crash leaves
//! the old tables or the new ones, never a mix; or, for tests and nodes without a work
//! directory, memory.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::tables::Tables;

/// What is kept: the tables and the key that seals session tokens (so a restart keeps the
/// sessions of the clients that are logged in).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The token key's bytes, as hex.
    pub token_key: String,
    /// The users and roles.
    pub tables: Tables,
}

/// A place to keep the tables.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// The tables kept, if any were.
    fn load(&self) -> io::Result<Option<Snapshot>>;
    /// Keeps `snapshot` in place of what was kept; durable when it returns.
    fn save(&self, snapshot: &Snapshot) -> io::Result<()>;
}

/// The tables in a JSON file.
#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    /// A store at `path` (created at the first save).
    pub fn new(path: PathBuf) -> FileStore {
        FileStore { path }
    }
}

impl Store for FileStore {
    fn load(&self) -> io::Result<Option<Snapshot>> {
        let text = match fs::read(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        serde_json::from_slice(&text).map(Some).map_err(|error| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {error}", self.path.display()),
            )
        })
    }

    fn save(&self, snapshot: &Snapshot) -> io::Result<()> {
        let text = serde_json::to_vec_pretty(snapshot).map_err(io::Error::other)?;
        let temporary = self.path.with_extension("json.new");
        let mut file = owner_only_file(&temporary)?;
        file.write_all(&text)?;
        file.sync_all()?;
        fs::rename(&temporary, &self.path)?;
        if let Some(directory) = self.path.parent() {
            File::open(directory)?.sync_all()?;
        }
        Ok(())
    }
}

/// A new file (replacing any) that only its owner may read: it holds password verifiers and
/// the token key.
fn owner_only_file(path: &PathBuf) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// The tables in memory: gone at a restart.
#[derive(Debug, Default)]
pub struct MemoryStore {
    kept: Mutex<Option<Snapshot>>,
}

impl Store for MemoryStore {
    fn load(&self) -> io::Result<Option<Snapshot>> {
        Ok(self.kept.lock().clone())
    }

    fn save(&self, snapshot: &Snapshot) -> io::Result<()> {
        *self.kept.lock() = Some(snapshot.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_store_keeps_what_it_saved_and_only_its_owner_reads_it() {
        let directory =
            std::env::temp_dir().join(format!("osprey-security-{}", std::process::id()));
        fs::create_dir_all(&directory).expect("directory");
        let store = FileStore::new(directory.join("security.json"));
        assert_eq!(store.load().expect("loads"), None);
        let snapshot = Snapshot {
            token_key: "00".repeat(32),
            tables: Tables::default(),
        };
        store.save(&snapshot).expect("saves");
        assert_eq!(store.load().expect("loads"), Some(snapshot));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(directory.join("security.json"))
                .expect("exists")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        fs::write(directory.join("security.json"), b"{ not json").expect("written");
        assert!(
            store.load().is_err(),
            "a damaged file is an error, not empty tables"
        );
        fs::remove_dir_all(&directory).expect("removed");
    }
}
