//! Loading a Redis RDB file into the Redis namespace at start-up (`osprey --load-rdb FILE`,
//! or `[resp] load-rdb`), before the server accepts connections.
//!
//! The file is read twice. The first pass reads and checks all of it (format, checksum,
//! database numbers, expiries, streams, function libraries) and stores nothing; the second
//! stores each key straight into the engine, RDB database n into Osprey's database n. So a
//! file that cannot be taken stops start-up with nothing changed. Loading merges: a key of
//! the file replaces the key of that name (as RESTORE ... REPLACE), other keys stay. Keys
//! already expired are skipped. Function libraries replace libraries of the same name.
//!
//! Invariants:
//! - Nothing is stored before the whole file has been read and checked.
//! - Memory holds a few batches of decoded values (`BATCHES_IN_FLIGHT` + 2, each at most
//!   `BATCH_KEYS` keys or about `BATCH_VALUE_BYTES`, plus one value), never the file.
//! - A batch's acknowledgements (durability on a device) are awaited before the next batch
//!   is stored.
//! - Not on a clustered node: its keys belong to partitions other nodes master.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::time::{Duration, Instant};

use engine::{Expiry, Now};
use model::ResultCode;

use super::databases::Database;
use super::dump;
use super::keys::{self, Deadline, Target, Writes};
use super::rdb::RdbValue;
use super::rdb_file::{Item, KeyItem, Problem, RdbError, RdbFileReader};
use super::streams::StreamValue;
use crate::state::ServerState;

/// What a load did.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Keys stored, by database.
    pub keys_by_database: BTreeMap<u64, u64>,
    /// Keys skipped because they had expired.
    pub expired: u64,
    /// Function libraries loaded.
    pub libraries: usize,
    /// The file's RDB version.
    pub version: u32,
    /// The Redis version that wrote it (its `redis-ver` field), if it says.
    pub redis_version: Option<String>,
    /// How long the load took, both passes.
    pub elapsed: Duration,
    /// How long the first pass (checking, storing nothing) took.
    pub check_elapsed: Duration,
}

/// What the first pass learns.
struct Checked {
    libraries: Vec<Vec<u8>>,
    redis_version: Option<String>,
}

/// Loads the RDB file at `path` into the Redis namespace.
///
/// # Errors
/// The file's name and why it was refused (`dump.rdb: key "x" in db 0: ...`); nothing was
/// stored then, unless the engine refused a key in the second pass (storage full), which the
/// message says.
pub fn load(state: &ServerState, path: &Path) -> Result<LoadReport, String> {
    let shown = path.display();
    if state.is_clustered() {
        return Err(format!(
            "{shown}: loading an RDB file on a clustered node is not supported: load it on a \
             single node, then let the node join the cluster"
        ));
    }
    let started = Instant::now();
    let checked = check_file(state, path).map_err(|e| format!("{shown}: {e}"))?;
    let check_elapsed = started.elapsed();
    super::functions::restore_libraries(&state.scripts.functions, &checked.libraries)
        .map_err(|reason| format!("{shown}: function libraries refused: {reason}"))?;
    let mut report = store_file(state, path)
        .map_err(|e| format!("{shown}: {e}; the keys before it in the file were stored"))?;
    report.libraries = checked.libraries.len();
    report.redis_version = checked.redis_version;
    report.elapsed = started.elapsed();
    report.check_elapsed = check_elapsed;
    Ok(report)
}

fn open(path: &Path) -> Result<RdbFileReader<File>, RdbError> {
    let file = File::open(path).map_err(|error| RdbError {
        offset: 0,
        key: None,
        problem: Problem::Io(error),
    })?;
    RdbFileReader::new(file)
}

/// The first pass: reads the whole file and checks each key as the second pass will store
/// it, storing nothing.
fn check_file(state: &ServerState, path: &Path) -> Result<Checked, RdbError> {
    let mut reader = open(path)?;
    let now = keys::namespace_of(state).now();
    let databases = state.resp_databases.count();
    let mut checked = Checked {
        libraries: Vec::new(),
        redis_version: None,
    };
    while let Some(item) = reader.next_item()? {
        match item {
            Item::Aux { name, value } if name == b"redis-ver" => {
                checked.redis_version = Some(String::from_utf8_lossy(&value).into_owned());
            }
            Item::Aux { .. } => {}
            Item::Function(code) => checked.libraries.push(code),
            Item::Key(key) => check_key(key, databases, now)?,
        }
    }
    Ok(checked)
}

fn check_key(item: KeyItem, databases: u16, now: Now) -> Result<(), RdbError> {
    let refuse = |problem| RdbError {
        offset: item.offset,
        key: Some((item.database, item.key.clone())),
        problem,
    };
    if item.database >= u64::from(databases) {
        return Err(refuse(Problem::Database { databases }));
    }
    if expiry_of(item.expire_at_ms, now).is_err() {
        return Err(refuse(Problem::ExpiryTooFar));
    }
    if let RdbValue::Stream(stream) = item.value
        && StreamValue::from_rdb(*stream).is_none()
    {
        return Err(refuse(Problem::Malformed(
            "stream (ids, groups or consumers)",
        )));
    }
    Ok(())
}

/// The expiry a key gets: `None` when it has already passed.
///
/// # Errors
/// Further than a record's longest TTL from now.
fn expiry_of(expire_at_ms: Option<i64>, now: Now) -> Result<Option<Expiry>, ()> {
    let Some(at_ms) = expire_at_ms else {
        return Ok(Some(Expiry::Never));
    };
    Ok(match Deadline::at_unix_ms(i128::from(at_ms), now)? {
        Deadline::Past => None,
        Deadline::At(void_time) => Some(keys::expiry_at(void_time)),
    })
}

/// Keys decoded ahead of the engine are handed over in batches of at most this many keys...
const BATCH_KEYS: usize = 256;
/// ... or this many bytes of values, whichever comes first.
const BATCH_VALUE_BYTES: usize = 1 << 20;
/// Batches decoded and not yet stored, at most (besides the one being stored).
const BATCHES_IN_FLIGHT: usize = 2;

/// A batch of decoded keys, or why the file was refused.
type Batch = Result<Vec<KeyItem>, RdbError>;

/// The second pass: a thread decodes the file while this one stores every key not yet
/// expired, so decoding and storing overlap (each about half of the work).
fn store_file(state: &ServerState, path: &Path) -> Result<LoadReport, RdbError> {
    let reader = open(path)?;
    let version = reader.version();
    let (sender, receiver) = mpsc::sync_channel::<Batch>(BATCHES_IN_FLIGHT);
    std::thread::scope(|scope| {
        scope.spawn(move || read_batches(reader, &sender));
        // `receiver` is moved in and dropped on any return, which ends the reading thread.
        store_batches(state, receiver, version)
    })
}

/// Decodes the file's keys into batches; stops at the end, at the first refusal (sent on),
/// or when the storing side has gone.
fn read_batches(mut reader: RdbFileReader<File>, sender: &SyncSender<Batch>) {
    let mut batch = Vec::new();
    let mut batch_bytes = 0;
    loop {
        let item = match reader.next_item() {
            Ok(Some(Item::Key(item))) => item,
            Ok(Some(_)) => continue,
            Ok(None) => {
                let _ = sender.send(Ok(batch));
                return;
            }
            Err(error) => {
                let _ = sender.send(Err(error));
                return;
            }
        };
        batch_bytes += item.value.size_bytes_estimate();
        batch.push(item);
        if batch.len() >= BATCH_KEYS || batch_bytes >= BATCH_VALUE_BYTES {
            batch_bytes = 0;
            if sender.send(Ok(std::mem::take(&mut batch))).is_err() {
                return;
            }
        }
    }
}

/// Stores the batches `receiver` gets, until the last.
fn store_batches(
    state: &ServerState,
    receiver: Receiver<Batch>,
    version: u32,
) -> Result<LoadReport, RdbError> {
    let mut report = LoadReport {
        version,
        ..LoadReport::default()
    };
    let namespace = keys::namespace_of(state);
    let mut writes = Writes::default();
    let mut last_offset = 0;
    // The reading thread sends until the file ends (or fails), then hangs up.
    for batch in receiver {
        let now = namespace.now();
        for item in batch? {
            last_offset = item.offset;
            store_item(state, &mut writes, item, now, &mut report)?;
        }
        writes.acks.wait().map_err(|error| RdbError {
            offset: last_offset,
            key: None,
            problem: Problem::Store(error.to_string()),
        })?;
    }
    Ok(report)
}

/// Stores one decoded key, unless it has expired; counts it in `report`.
fn store_item(
    state: &ServerState,
    writes: &mut Writes,
    item: KeyItem,
    now: Now,
    report: &mut LoadReport,
) -> Result<(), RdbError> {
    let KeyItem {
        database,
        key,
        value,
        expire_at_ms,
        offset,
    } = item;
    let refuse = |key, problem| RdbError {
        offset,
        key: Some((database, key)),
        problem,
    };
    let expiry = match expiry_of(expire_at_ms, now) {
        Ok(Some(expiry)) => expiry,
        Ok(None) => {
            report.expired += 1;
            return Ok(());
        }
        Err(()) => return Err(refuse(key, Problem::ExpiryTooFar)),
    };
    if let Err(code) = store_key(state, writes, database, &key, value, expiry) {
        return Err(refuse(key, Problem::Store(format!("{code:?}"))));
    }
    *report.keys_by_database.entry(database).or_default() += 1;
    Ok(())
}

/// Stores one key, replacing what its record held.
fn store_key(
    state: &ServerState,
    writes: &mut Writes,
    database: u64,
    key: &[u8],
    value: RdbValue,
    expiry: Expiry,
) -> Result<(), ResultCode> {
    let database = u16::try_from(database).map_err(|_| ResultCode::Parameter)?;
    let target = Target::of(state, Database(database), key);
    target.update(writes, |_, writer| {
        // The first pass checked every stream; a refusal here would be a broken invariant
        // of `StreamValue::from_rdb`, answered as a parameter error rather than a crash.
        let decision = dump::stored_decision(value, expiry, writer).ok_or(ResultCode::Parameter)?;
        Ok((decision, ()))
    })
}

/// The log line's summary of a load: keys by database.
pub fn summary(report: &LoadReport) -> String {
    let by_database: Vec<String> = report
        .keys_by_database
        .iter()
        .map(|(database, keys)| format!("db{database}={keys}"))
        .collect();
    by_database.join(",")
}
