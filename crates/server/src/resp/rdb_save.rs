//! Writing the Redis namespace as a Redis RDB file: SAVE, BGSAVE and LASTSAVE, and the
//! state INFO's persistence section reports.
//!
//! The file goes to `dbfilename` (CONFIG SET, `[resp] dbfilename`, `dump.rdb`) in the work
//! directory (CONFIG `dir`; the current directory without one). It is written to a temporary
//! file in the same directory, synced, then renamed over the old one, and the directory is
//! synced, so a reader sees the old file or the new one, never part of one. SAVE writes it
//! on the connection's thread; BGSAVE on a thread of its own while the server goes on.
//!
//! Each database is walked partition by partition, a piece at a time, as SCAN walks it: a
//! key is written as it was when its piece was read. Unlike Redis's fork, the file is not
//! one instant's picture: a key changed during the walk may be written before or after the
//! change. Records that hold no Redis value (an Aerospike client's bins) are left out.
//!
//! Invariants:
//! - At most one save runs at a time (`running`, taken by SAVE and BGSAVE alike).
//! - `dbfilename` is a file name, never a path (checked by [`check_dbfilename`]).
//! - No partition lock is held while the file is written: a piece's records are encoded
//!   under the lock, and written after it.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use engine::{Namespace, ScanScope};
use model::VoidTime;
use model::{CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, PARTITION_COUNT, ParticleType, PartitionId};
use parking_lot::Mutex;
use wire_resp::Args;

use super::databases::Database;
use super::dump;
use super::keys;
use super::rdb_file::RdbFileWriter;
use super::reply::Reply;
use super::{After, Session};
use crate::state::ServerState;

/// Index entries encoded per partition lock.
const PIECE_ENTRIES: usize = 256;

/// Buffered bytes between writes to the file.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Redis's reply to a save while one runs.
const SAVE_IN_PROGRESS: &str = "ERR Background save already in progress";

/// Saves: whether one runs, and what the last ones did.
#[derive(Debug)]
pub struct Saves {
    running: AtomicBool,
    /// The last successful save, Unix seconds (the start time before any).
    last_save_unix_s: AtomicI64,
    /// Whether the last BGSAVE succeeded (true before any).
    last_bgsave_ok: AtomicBool,
    /// The namespace's client writes and deletes at the last successful save.
    changes_at_last_save: AtomicU64,
    dbfilename: Mutex<String>,
}

impl Saves {
    /// No save yet; files are named `dbfilename`.
    pub fn new(dbfilename: &str) -> Saves {
        Saves {
            running: AtomicBool::new(false),
            last_save_unix_s: AtomicI64::new(unix_now_s()),
            last_bgsave_ok: AtomicBool::new(true),
            changes_at_last_save: AtomicU64::new(0),
            dbfilename: Mutex::new(dbfilename.to_owned()),
        }
    }

    /// The file saves write, in the work directory.
    pub fn dbfilename(&self) -> String {
        self.dbfilename.lock().clone()
    }

    /// Sets the file saves write.
    ///
    /// # Errors
    /// Redis's reason when `name` is a path.
    pub fn set_dbfilename(&self, name: &str) -> Result<(), &'static str> {
        check_dbfilename(name)?;
        *self.dbfilename.lock() = name.to_owned();
        Ok(())
    }

    /// Whether a BGSAVE (or SAVE) runs now.
    pub fn in_progress(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// The last successful save, Unix seconds.
    pub fn last_save_unix_s(&self) -> i64 {
        self.last_save_unix_s.load(Ordering::Relaxed)
    }

    /// Whether the last BGSAVE succeeded.
    pub fn last_bgsave_ok(&self) -> bool {
        self.last_bgsave_ok.load(Ordering::Relaxed)
    }

    /// Writes and deletes since the last successful save, given the count now.
    pub fn changes_since(&self, changes_now: u64) -> u64 {
        changes_now.saturating_sub(self.changes_at_last_save.load(Ordering::Relaxed))
    }

    /// Takes the right to save; `false` while another save runs.
    fn begin(&self) -> bool {
        self.running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn end(&self, outcome: Option<u64>) {
        if let Some(changes) = outcome {
            self.last_save_unix_s.store(unix_now_s(), Ordering::Relaxed);
            self.changes_at_last_save.store(changes, Ordering::Relaxed);
        }
        let was_running = self.running.swap(false, Ordering::AcqRel);
        assert!(was_running, "a save ends only after it began");
    }
}

/// Redis's check of `dbfilename`: a file name, not a path.
///
/// # Errors
/// Redis's reason.
pub fn check_dbfilename(name: &str) -> Result<(), &'static str> {
    let is_base_name = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
    if is_base_name {
        Ok(())
    } else {
        Err("dbfilename can't be a path, just a filename")
    }
}

fn unix_now_s() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX)
}

/// SAVE
pub fn save(session: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    let state = &session.state;
    if let Err(message) = refused_on_cluster(state) {
        reply.error(message);
        return After::Continue;
    }
    if !state.resp_saves.begin() {
        reply.error(SAVE_IN_PROGRESS);
        return After::Continue;
    }
    let outcome = save_file(state);
    state.resp_saves.end(outcome.as_ref().ok().copied());
    match outcome {
        Ok(_) => reply.ok(),
        Err(error) => {
            tracing::warn!(%error, "SAVE failed");
            reply.error(&format!("ERR {error}"));
        }
    }
    After::Continue
}

/// BGSAVE [SCHEDULE]
pub fn bgsave(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    if args.len() > 2 || (args.len() == 2 && !args.get(1).eq_ignore_ascii_case(b"schedule")) {
        reply.error(keys::SYNTAX_ERROR);
        return After::Continue;
    }
    let state = Arc::clone(&session.state);
    if let Err(message) = refused_on_cluster(&state) {
        reply.error(message);
        return After::Continue;
    }
    if !state.resp_saves.begin() {
        reply.error(SAVE_IN_PROGRESS);
        return After::Continue;
    }
    let saving = Arc::clone(&state);
    let started = std::thread::Builder::new()
        .name("bgsave".to_owned())
        .spawn(move || background_save(&saving));
    match started {
        Ok(_) => reply.simple("Background saving started"),
        Err(error) => {
            state.resp_saves.end(None);
            reply.error(&format!("ERR cannot start the background save: {error}"));
        }
    }
    After::Continue
}

fn background_save(state: &ServerState) {
    let outcome = save_file(state);
    if let Err(error) = &outcome {
        tracing::warn!(%error, "BGSAVE failed");
    }
    let saves = &state.resp_saves;
    saves
        .last_bgsave_ok
        .store(outcome.is_ok(), Ordering::Relaxed);
    saves.end(outcome.ok());
}

/// LASTSAVE: the Unix time of the last successful save.
pub fn lastsave(session: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    reply.integer(session.state.resp_saves.last_save_unix_s());
    After::Continue
}

fn refused_on_cluster(state: &ServerState) -> Result<(), &'static str> {
    if state.is_clustered() {
        return Err(
            "ERR SAVE and BGSAVE are not supported on a clustered node: each node \
                    holds only some partitions",
        );
    }
    Ok(())
}

/// The namespace's client writes and deletes so far (INFO's changes since the last save).
pub fn changes_now(state: &ServerState) -> u64 {
    let summary = keys::namespace_of(state).summary();
    summary.client_write_success + summary.client_delete_success
}

/// Where saves write: `dbfilename` in the work directory.
fn save_path(state: &ServerState) -> PathBuf {
    let directory = &state.config.service.work_directory;
    let directory = if directory.as_os_str().is_empty() {
        Path::new(".")
    } else {
        directory.as_path()
    };
    directory.join(state.resp_saves.dbfilename())
}

/// Writes the file; the change count it covers.
fn save_file(state: &ServerState) -> io::Result<u64> {
    let started = Instant::now();
    let changes = changes_now(state);
    let path = save_path(state);
    let temporary = path.with_file_name(format!("temp-{}.rdb", std::process::id()));
    let written = write_file(state, &temporary).and_then(|keys| {
        std::fs::rename(&temporary, &path)?;
        sync_directory(&path)?;
        Ok(keys)
    });
    let keys = match written {
        Ok(keys) => keys,
        Err(error) => {
            let _ = std::fs::remove_file(&temporary);
            return Err(error);
        }
    };
    tracing::info!(
        file = %path.display(),
        keys,
        seconds = started.elapsed().as_secs_f64(),
        "DB saved on disk"
    );
    Ok(changes)
}

fn sync_directory(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => File::open(parent)?.sync_all(),
        _ => File::open(".")?.sync_all(),
    }
}

/// Writes every database to `path`, synced; the keys written.
fn write_file(state: &ServerState, path: &Path) -> io::Result<u64> {
    let file = File::create(path)?;
    let mut writer = RdbFileWriter::new(
        BufWriter::with_capacity(WRITE_BUFFER_BYTES, file),
        unix_now_s(),
    )?;
    for code in super::functions::library_codes(&state.scripts.functions) {
        writer.function(&code)?;
    }
    let namespace = keys::namespace_of(state);
    let mut keys = 0;
    for (database, set_name) in state.resp_databases.iter() {
        keys += write_database(&mut writer, namespace, database, set_name)?;
    }
    let file = writer
        .finish()?
        .into_inner()
        .map_err(io::IntoInnerError::into_error)?;
    file.sync_all()?;
    Ok(keys)
}

/// Writes one database's keys, after its SELECTDB when it has any; how many.
fn write_database<W: Write>(
    writer: &mut RdbFileWriter<W>,
    namespace: &Namespace,
    database: Database,
    set_name: &str,
) -> io::Result<u64> {
    let scope = namespace.scan_scope(set_name.as_bytes());
    if scope == ScanScope::NoSuchSet {
        return Ok(0);
    }
    let size_hint = namespace
        .sets()
        .iter()
        .find(|set| set.name == set_name)
        .map_or(0, |set| set.objects);
    let mut selected = false;
    let mut keys = 0;
    let mut piece = Vec::new();
    for partition in 0..PARTITION_COUNT as u16 {
        let mut after: Option<Digest> = None;
        loop {
            piece.clear();
            let (end, encoded) =
                encode_piece(namespace, scope, partition, after.as_ref(), &mut piece);
            if encoded > 0 && !selected {
                writer.select_database(database.0, size_hint)?;
                selected = true;
            }
            writer.write_encoded(&piece)?;
            keys += encoded;
            if end.exhausted {
                break;
            }
            after = end.last;
        }
    }
    Ok(keys)
}

/// Encodes the Redis keys of one piece of `partition` into `out`, under its lock; where the
/// piece ended and how many keys it encoded.
fn encode_piece(
    namespace: &Namespace,
    scope: ScanScope,
    partition: u16,
    after: Option<&Digest>,
    out: &mut Vec<u8>,
) -> (engine::PieceEnd, u64) {
    let mut encoded = 0;
    let end = namespace.scan_piece(
        PartitionId(partition),
        scope,
        after,
        PIECE_ENTRIES,
        |record| {
            let Some((particle_type, key)) = record.user_key() else {
                return true;
            };
            if particle_type != ParticleType::String as u8 {
                return true;
            }
            if let Some(value) = dump::value_of(&record.current()) {
                RdbFileWriter::<File>::encode_key(out, key, &value, expire_at_ms(record.void_time));
                encoded += 1;
            }
            true
        },
    );
    (end, encoded)
}

/// A void time as Unix milliseconds; `None` for never.
fn expire_at_ms(void_time: VoidTime) -> Option<i64> {
    if void_time == VoidTime::NEVER {
        return None;
    }
    let unix_s = u64::from(void_time.0) + CITRUSLEAF_EPOCH_UNIX_SECONDS;
    i64::try_from(unix_s).ok().map(|s| s * 1000)
}
