//! INFO's `commandstats`: for every command, and every subcommand of a container command
//! (`config|get`), its calls, the microseconds they took, and its rejected and failed calls,
//! as Redis 7 counts them:
//! - a call is counted once it ran: a command that blocks when it ran, when it answers; one
//!   sent to the long-request pool or to wait for a script's turn, where it then runs;
//! - rejected: refused before it ran (wrong argument count, `maxmemory`, BUSY, a command not
//!   allowed in a subscribed context, a script's call that Redis's `scriptCall` refuses);
//! - failed: it ran and answered an error of its own (Redis's rule: an error reply written
//!   since the last command ended, so EXEC fails only for its own error, not its commands').
//!
//! An unknown command or subcommand is not counted (Redis has no entry to count it in).
//!
//! With `latency-tracking` on (the default, as in Redis), a call's duration also goes into the
//! command's latency histogram, for `LATENCY HISTOGRAM` and INFO's `latencystats`.
//!
//! Counted per thread, summed when INFO asks: each command then touches only counters its own
//! thread writes, and no cache line moves between cores with every call (a single set of
//! counters would make the busiest commands' lines bounce between every core serving them).
//! A thread's counters fold into [`RETIRED`] when the thread ends, so nothing counted is lost
//! with the pool's threads that come and go.
//!
//! Invariants:
//! - Slot `i < commands::names().count()` is the command of that rank in the command table;
//!   the slots after are the documented subcommands, in `docs` order; every table has
//!   [`slot_count`] cells.
//! - A thread's table is in [`REGISTRY`] from its first count until the thread ends, then its
//!   counts are in [`RETIRED`]: a sum over both sees every count once.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use parking_lot::Mutex;
use wire_resp::Args;

use super::{commands, docs};
use crate::latency::{LazyBuckets, Snapshot};

/// One command's counters.
#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    nanoseconds: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    /// The calls' durations, while `latency-tracking` is on.
    latency: LazyBuckets,
}

/// `latency-tracking`: whether calls' durations go into the histograms.
static LATENCY_TRACKING: AtomicBool = AtomicBool::new(true);

/// `latency-tracking-info-percentiles`: the percentiles INFO's `latencystats` shows, once set.
static INFO_PERCENTILES: Mutex<Option<Vec<f64>>> = Mutex::new(None);

/// Redis's default `latency-tracking-info-percentiles`.
const DEFAULT_INFO_PERCENTILES: [f64; 3] = [50.0, 99.0, 99.9];

/// One thread's counters (or the retired threads'), one cell per slot.
struct Table {
    cells: Box<[Counters]>,
}

impl Table {
    fn new() -> Table {
        Table {
            cells: (0..slot_count()).map(|_| Counters::default()).collect(),
        }
    }

    fn add(&self, other: &Table) {
        for (cell, from) in self.cells.iter().zip(other.cells.iter()) {
            for (to, from) in cell.fields().into_iter().zip(from.fields()) {
                to.fetch_add(from.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            cell.latency.absorb(&from.latency);
        }
    }
}

impl Counters {
    fn fields(&self) -> [&AtomicU64; 4] {
        [&self.calls, &self.nanoseconds, &self.rejected, &self.failed]
    }
}

/// Every slot's name: the commands in table order, then the documented subcommands.
struct Names {
    by_slot: Vec<&'static str>,
    /// `container|subcommand` to its slot.
    subcommands: HashMap<&'static str, usize>,
    /// Per command slot, whether it has documented subcommands (counted under them).
    is_container: Vec<bool>,
}

static NAMES: LazyLock<Names> = LazyLock::new(|| {
    let mut by_slot: Vec<&'static str> = commands::names().collect();
    let command_count = by_slot.len();
    let mut subcommands = HashMap::new();
    for name in docs::subcommand_names() {
        subcommands.insert(name, by_slot.len());
        by_slot.push(name);
    }
    let is_container = by_slot[..command_count]
        .iter()
        .map(|command| {
            let prefix = format!("{command}|");
            subcommands.keys().any(|name| name.starts_with(&prefix))
        })
        .collect();
    Names {
        by_slot,
        subcommands,
        is_container,
    }
});

fn slot_count() -> usize {
    NAMES.by_slot.len()
}

/// Every live thread's table.
static REGISTRY: Mutex<Vec<Arc<Table>>> = Mutex::new(Vec::new());

/// The counts of threads that ended.
static RETIRED: LazyLock<Table> = LazyLock::new(Table::new);

/// This thread's table, registered on first use and folded into [`RETIRED`] when it ends.
struct Local(Arc<Table>);

impl Local {
    fn register() -> Local {
        let table = Arc::new(Table::new());
        REGISTRY.lock().push(Arc::clone(&table));
        Local(table)
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let mut registry = REGISTRY.lock();
        registry.retain(|table| !Arc::ptr_eq(table, &self.0));
        // Folded while the registry is held, so that a sum never sees these counts twice or
        // not at all.
        RETIRED.add(&self.0);
    }
}

thread_local! {
    static LOCAL: Local = Local::register();
}

/// Where a command of the table is counted: its slot, and whether it is counted under its
/// subcommands instead. Judged once per command when the table is built, so that counting a
/// call of a plain command looks nothing up.
#[derive(Clone, Copy, Debug)]
pub struct CommandSlot {
    slot: usize,
    container: bool,
}

impl CommandSlot {
    /// The command of rank `rank` in the command table.
    pub fn of_rank(rank: usize) -> CommandSlot {
        CommandSlot {
            slot: rank,
            container: NAMES.is_container[rank],
        }
    }

    /// The slot a call with `args` is counted in: its subcommand's for a container command
    /// (`None` for a subcommand Redis does not know).
    pub fn resolve(self, args: &Args) -> Option<usize> {
        if !self.container || args.len() < 2 {
            return Some(self.slot);
        }
        let names = &*NAMES;
        let name = format!(
            "{}|{}",
            names.by_slot[self.slot],
            String::from_utf8_lossy(args.get(1)).to_ascii_lowercase()
        );
        names.subcommands.get(name.as_str()).copied()
    }

    /// Whether calls are counted under their subcommands.
    pub fn is_container(self) -> bool {
        self.container
    }
}

/// The name `slot` is counted under (`config|get` for a subcommand).
pub fn name(slot: usize) -> &'static str {
    NAMES.by_slot[slot]
}

/// Counts one call of the command in `slot` that took `elapsed`, failed or not.
pub fn record(slot: usize, elapsed: Duration, failed: bool) {
    let nanoseconds = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    // A thread that is ending (its locals already dropped) counts nothing more.
    let _ = LOCAL.try_with(|local| {
        let cell = &local.0.cells[slot];
        cell.calls.fetch_add(1, Ordering::Relaxed);
        cell.nanoseconds.fetch_add(nanoseconds, Ordering::Relaxed);
        if failed {
            cell.failed.fetch_add(1, Ordering::Relaxed);
        }
        if LATENCY_TRACKING.load(Ordering::Relaxed) {
            cell.latency.record(elapsed);
        }
    });
}

/// Counts one call of the command `args` name (one Osprey knows) that took `elapsed`: a
/// blocked command that answered.
pub fn record_call(args: &Args, elapsed: Duration, failed: bool) {
    if let Some(slot) = commands::slot_of(args.get(0)).and_then(|command| command.resolve(args)) {
        record(slot, elapsed, failed);
    }
}

/// Counts a rejection of the command `args` name, when it is one Osprey knows.
pub fn reject(args: &Args) {
    let Some(slot) = commands::slot_of(args.get(0)).and_then(|command| command.resolve(args))
    else {
        return;
    };
    let _ = LOCAL.try_with(|local| local.0.cells[slot].rejected.fetch_add(1, Ordering::Relaxed));
}

/// The `cmdstat_<name>:calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..`
/// lines of every command counted since the last reset, by name.
pub fn lines() -> String {
    let mut text = String::new();
    for (name, [calls, nanoseconds, rejected, failed]) in counts() {
        let usec = nanoseconds / 1_000;
        let per_call = if calls == 0 {
            0.0
        } else {
            usec as f64 / calls as f64
        };
        let _ = write!(
            text,
            "cmdstat_{name}:calls={calls},usec={usec},usec_per_call={per_call:.2},\
             rejected_calls={rejected},failed_calls={failed}\r\n"
        );
    }
    text
}

/// Every command counted since the last reset, by name, with its
/// `[calls, nanoseconds, rejected, failed]`.
pub fn counts() -> Vec<(&'static str, [u64; 4])> {
    let sum = summed();
    let mut counted: Vec<(&str, [u64; 4])> = NAMES
        .by_slot
        .iter()
        .zip(sum.cells.iter())
        .map(|(name, cell)| {
            (
                *name,
                cell.fields().map(|field| field.load(Ordering::Relaxed)),
            )
        })
        .filter(|(_, [calls, _, rejected, failed])| calls + rejected + failed > 0)
        .collect();
    counted.sort_unstable_by_key(|(name, _)| *name);
    counted
}

/// Every thread's counts, live and retired, in one table.
fn summed() -> Table {
    let sum = Table::new();
    let registry = REGISTRY.lock();
    for table in registry.iter() {
        sum.add(table);
    }
    sum.add(&RETIRED);
    sum
}

/// CONFIG RESETSTAT.
pub fn reset() {
    let registry = REGISTRY.lock();
    for table in registry.iter().map(Arc::as_ref).chain([&*RETIRED]) {
        for cell in table.cells.iter() {
            for field in cell.fields() {
                field.store(0, Ordering::Relaxed);
            }
            cell.latency.reset();
        }
    }
}

/// One command's latency, as `LATENCY HISTOGRAM` and `latencystats` show it.
#[derive(Debug)]
pub struct CommandLatency {
    /// The name it is counted under (`config|get` for a subcommand).
    pub name: &'static str,
    /// Calls whose duration was recorded.
    pub calls: u64,
    /// Their durations.
    pub histogram: Snapshot,
}

/// The latency of every command with a recorded call, by name; only those `wanted` accepts.
pub fn latencies(wanted: impl Fn(&str) -> bool) -> Vec<CommandLatency> {
    let sum = summed();
    let mut found: Vec<CommandLatency> = NAMES
        .by_slot
        .iter()
        .zip(sum.cells.iter())
        .filter(|(name, _)| wanted(name))
        .filter_map(|(name, cell)| {
            let mut histogram = Snapshot::default();
            cell.latency.add_to(&mut histogram);
            let calls = histogram.count();
            (calls > 0).then_some(CommandLatency {
                name,
                calls,
                histogram,
            })
        })
        .collect();
    found.sort_unstable_by_key(|latency| latency.name);
    found
}

/// `latency-tracking`.
pub fn latency_tracking() -> bool {
    LATENCY_TRACKING.load(Ordering::Relaxed)
}

/// Sets `latency-tracking`.
pub fn set_latency_tracking(on: bool) {
    LATENCY_TRACKING.store(on, Ordering::Relaxed);
}

/// `latency-tracking-info-percentiles`.
pub fn info_percentiles() -> Vec<f64> {
    INFO_PERCENTILES
        .lock()
        .clone()
        .unwrap_or_else(|| DEFAULT_INFO_PERCENTILES.to_vec())
}

/// Sets `latency-tracking-info-percentiles`: each from 0 to 100.
///
/// # Errors
/// Redis's message for a value that is not a number in that range.
pub fn set_info_percentiles(text: &str) -> Result<(), String> {
    let percentiles = text
        .split_ascii_whitespace()
        .map(|word| match word.parse::<f64>() {
            Ok(value) if (0.0..=100.0).contains(&value) => Ok(value),
            _ => Err("latency-tracking-info-percentiles should be between 0.0 and 100.0"),
        })
        .collect::<Result<Vec<f64>, _>>()?;
    *INFO_PERCENTILES.lock() = Some(percentiles);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Args {
        words.iter().collect()
    }

    #[test]
    fn a_container_command_is_counted_under_its_subcommand_and_an_unknown_one_not_at_all() {
        let config = commands::slot_of(b"CONFIG").expect("config is served");
        assert!(config.is_container());
        let get = config
            .resolve(&args(&["config", "GET", "x"]))
            .expect("config|get");
        assert_eq!(NAMES.by_slot[get], "config|get");
        assert_eq!(config.resolve(&args(&["config", "nope"])), None);
        let set = commands::slot_of(b"set").expect("set is served");
        assert!(!set.is_container());
        let plain = set.resolve(&args(&["set", "k", "v"])).expect("set");
        assert_eq!(NAMES.by_slot[plain], "set");
    }

    #[test]
    fn counts_of_a_thread_that_ended_are_kept() {
        let echo = commands::slot_of(b"echo")
            .and_then(|echo| echo.resolve(&args(&["echo", "x"])))
            .expect("echo is served");
        std::thread::spawn(move || record(echo, Duration::from_micros(3), true))
            .join()
            .expect("the thread ends");
        let after = lines();
        assert!(after.contains("cmdstat_echo:calls="), "{after}");
    }
}
