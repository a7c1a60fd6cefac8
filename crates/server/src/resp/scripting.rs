//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD | EXISTS | FLUSH | KILL,
//! on the Lua runtime the Aerospike UDFs use (`udf::redis`). Functions (FCALL, `functions.rs`)
//! run through the same run registration, so BUSY and the kill rules cover both.
//!
//! - A script runs atomically, as in Redis: inside the namespace's exclusive section
//!   (`Namespace::exclusive`, as EXEC), so no other command of either protocol interleaves
//!   with it. Its `redis.call`s go through `commands::execute`, the dispatch every command
//!   takes, so a command behaves in a script exactly as it does alone (`script_host.rs`: the
//!   host that runs them, Redis's checks before each, and the reply conversions).
//! - A request that checked for a script before one started and has not reached the gate yet
//!   is waited for: the run waits for the requests in flight (`in_flight.rs`) before it takes
//!   the section.
//! - A script runs on the runtime worker that read it, as any command; one that runs on past
//!   a millisecond gives the worker's other tasks to another thread (`script_worker`), so a
//!   long script holds one thread, not the connections of a worker.
//! - While a script runs, another connection's command does not block a thread at the gate:
//!   it waits on the runtime (`After::AwaitScript`) until the script ends or has run past
//!   `busy-reply-threshold`; past it, every command but the few Redis allows gets `BUSY`, and
//!   SCRIPT KILL stops a script that has not written (one that has is `UNKILLABLE`). A script
//!   that finds another running waits so too; only where it may not (inside EXEC, on the
//!   long-request pool) does it wait for its turn on its thread.
//! - Each run may allocate `SCRIPT_MEMORY_BYTES_MAX` of Lua memory; past it the script ends
//!   with `not enough memory`, which `pcall` cannot swallow.
//!
//! Invariants:
//! - At most one script runs at a time (they all take the exclusive section), and
//!   `Scripts::running` is `Some` exactly while one runs; the run's guard clears it even when
//!   the run panics.
//! - The cache holds at most `SCRIPT_CACHE_BYTES_MAX` bytes of bodies: past it, the scripts
//!   EVAL cached are dropped (those SCRIPT LOAD cached stay), as Redis 7.4 evicts EVAL's.
//! - The engine's compiled functions are the cache's scripts of its generation: SCRIPT FLUSH
//!   bumps the generation, and the engine is rebuilt before its next use.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use udf::redis::{Checkpoint, ParsedScript, RedisScripting, RedisValue, ScriptRun};
use wire_resp::Args;

use super::commands::Command;
use super::keys;
use super::memory_limit;
use super::reply::Reply;
use super::script_host::{SessionHost, write_value};
use super::{After, Session};
use super::{monitor, script_worker};
use crate::state::ServerState;

/// The scripting commands.
pub const COMMANDS: &[Command] = &[
    ("eval", -3, eval),
    ("eval_ro", -3, eval_ro),
    ("evalsha", -3, evalsha),
    ("evalsha_ro", -3, evalsha_ro),
    ("script", -2, script),
];

/// Lua memory one script run may allocate: enough for scripts that build replies of a few
/// million elements, small enough that a runaway one cannot take the node's memory.
pub(super) const SCRIPT_MEMORY_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Bytes of script bodies the cache holds (Redis 7.2 has no bound; 7.4 evicts EVAL's).
const SCRIPT_CACHE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Redis's default `busy-reply-threshold` (`lua-time-limit`), in milliseconds.
const BUSY_REPLY_THRESHOLD_MS_DEFAULT: u64 = 5000;

const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
pub(super) const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// BUSY while a function runs (Redis's `slowscripterr`).
pub(super) const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against \
                          the dataset. You can either wait the script termination or kill the \
                          server in a hard way using the SHUTDOWN NOSAVE command.";

thread_local! {
    /// Whether this thread runs a script now: its commands pass the busy check.
    static IN_SCRIPT: Cell<bool> = const { Cell::new(false) };
}

/// A cached script.
#[derive(Debug)]
struct Script {
    body: Vec<u8>,
    parsed: ParsedScript,
    /// Cached by SCRIPT LOAD (kept when EVAL's scripts are evicted).
    loaded: bool,
}

/// The script running now.
#[derive(Debug)]
pub(super) struct Running {
    pub(super) started: Instant,
    killed: Arc<AtomicBool>,
    /// Whether it called a write command: then SCRIPT KILL refuses it (UNKILLABLE).
    pub(super) wrote: AtomicBool,
    pub(super) kind: RunKind,
    /// The thread running it: a script a transaction runs is part of the transaction's run.
    thread: std::thread::ThreadId,
}

impl Running {
    fn new(kind: RunKind) -> Running {
        Running {
            started: Instant::now(),
            killed: Arc::new(AtomicBool::new(false)),
            wrote: AtomicBool::new(false),
            kind,
            thread: std::thread::current().id(),
        }
    }
}

/// What runs: an EVAL script, or a function (FCALL), which SCRIPT KILL does not stop and
/// FUNCTION STATS describes.
#[derive(Debug)]
pub(super) enum RunKind {
    Eval,
    Function {
        /// The function's name.
        name: String,
        /// The FCALL command that runs it.
        command: Vec<Vec<u8>>,
    },
}

impl RunKind {
    fn is_eval(&self) -> bool {
        matches!(self, RunKind::Eval)
    }

    /// The BUSY error others get while this runs past the threshold.
    pub(super) fn busy(&self) -> &'static str {
        if self.is_eval() { BUSY } else { BUSY_FUNCTION }
    }
}

/// The server's scripting state: the script cache, the Lua engine, and the script running.
pub struct Scripts {
    cache: Mutex<ScriptCache>,
    /// The engine and the cache generation its functions belong to; built on first use.
    engine: Mutex<Option<(u64, RedisScripting)>>,
    /// The engine's Lua state's bytes when last seen: as each run starts, and whenever INFO
    /// or `maxmemory` finds no run holding it (a run that holds it counts what it was).
    lua_bytes_seen: AtomicU64,
    generation: AtomicU64,
    running: Mutex<Option<Arc<Running>>>,
    /// Whether a script runs: the cheap check every command makes.
    active: AtomicBool,
    /// The requests in flight, which a script waits for before it takes the namespace.
    pub in_flight: super::in_flight::InFlight,
    /// Woken when a script ends: connections waiting on the runtime.
    ended: tokio::sync::Notify,
    /// Notified when a script ends: pool threads waiting for their turn.
    turn: parking_lot::Condvar,
    busy_reply_threshold_ms: AtomicU64,
    /// The function libraries (FUNCTION LOAD).
    pub(super) functions: super::functions::Functions,
}

#[derive(Debug, Default)]
struct ScriptCache {
    /// By SHA1, hashed with Fx (a lookup per EVALSHA).
    scripts: FxHashMap<String, Arc<Script>>,
    bytes: usize,
}

impl std::fmt::Debug for Scripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripts")
            .field("cached", &self.cache.lock().scripts.len())
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for Scripts {
    fn default() -> Scripts {
        Scripts {
            cache: Mutex::default(),
            engine: Mutex::new(None),
            lua_bytes_seen: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            running: Mutex::new(None),
            active: AtomicBool::new(false),
            in_flight: super::in_flight::InFlight::default(),
            ended: tokio::sync::Notify::new(),
            turn: parking_lot::Condvar::new(),
            busy_reply_threshold_ms: AtomicU64::new(BUSY_REPLY_THRESHOLD_MS_DEFAULT),
            functions: super::functions::Functions::default(),
        }
    }
}

impl Scripts {
    /// INFO's figures: the cached scripts, their bytes, and the Lua state's bytes (`None`
    /// while a script holds the state, or before the first script built it).
    pub(super) fn cache_figures(&self) -> (usize, usize, u64) {
        let (count, bytes) = {
            let cache = self.cache.lock();
            (cache.scripts.len(), cache.bytes)
        };
        if let Some(engine) = self.engine.try_lock()
            && let Some((_, scripting)) = engine.as_ref()
        {
            self.see_lua_bytes(scripting);
        }
        (count, bytes, self.lua_bytes_seen.load(Ordering::Relaxed))
    }

    fn see_lua_bytes(&self, scripting: &RedisScripting) {
        let bytes = scripting.used_memory_bytes() as u64;
        self.lua_bytes_seen.store(bytes, Ordering::Relaxed);
    }

    /// The script or function running now.
    pub(super) fn running(&self) -> Option<Arc<Running>> {
        if !self.is_running() {
            return None;
        }
        self.running.lock().clone()
    }

    /// Whether a script or function runs now (one load: the check every request makes).
    pub fn is_running(&self) -> bool {
        // SeqCst: one half of the pair with `InFlight` (see its module docs).
        self.active.load(Ordering::SeqCst)
    }

    /// Waits until no script or function runs (whether or not it ran past the threshold).
    pub async fn wait_until_none_runs(&self) {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if !self.is_running() {
                return;
            }
            ended.await;
        }
    }

    fn threshold(&self) -> Option<Duration> {
        match self.busy_reply_threshold_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Waits until no script runs, or the one running has run past `busy-reply-threshold`
    /// (then commands get `BUSY`).
    pub async fn wait_for_turn(&self) {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let Some(running) = self.running() else {
                return;
            };
            let Some(threshold) = self.threshold() else {
                ended.await;
                continue;
            };
            let deadline = running.started + threshold;
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                () = ended => {}
                () = tokio::time::sleep_until(deadline.into()) => return,
            }
        }
    }

    /// At shutdown: stops the script running, at its next check, whether it wrote or not (as
    /// Redis's SHUTDOWN NOSAVE does): what it wrote is already applied, as it would be after
    /// a kill of the process, and the pool can then stop instead of waiting for it forever.
    pub fn stop_for_shutdown(&self) {
        if let Some(running) = self.running() {
            if running.wrote.load(Ordering::Relaxed) {
                tracing::warn!("stopping a script that wrote, at shutdown: its writes stay");
            }
            running.killed.store(true, Ordering::Relaxed);
        }
    }

    fn cached(&self, sha: &str) -> Option<Arc<Script>> {
        self.cache.lock().scripts.get(sha).cloned()
    }

    fn insert(&self, sha: String, script: Script) {
        let mut cache = self.cache.lock();
        if cache.bytes + script.body.len() > SCRIPT_CACHE_BYTES_MAX {
            cache.scripts.retain(|_, cached| cached.loaded);
            cache.bytes = cache.scripts.values().map(|s| s.body.len()).sum();
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        cache.bytes += script.body.len();
        if let Some(previous) = cache.scripts.insert(sha, Arc::new(script)) {
            cache.bytes -= previous.body.len();
        }
    }

    fn flush(&self) {
        let mut cache = self.cache.lock();
        cache.scripts.clear();
        cache.bytes = 0;
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Runs `run` with the engine of the current generation (built or rebuilt as needed).
    fn with_engine<T>(&self, run: impl FnOnce(&mut RedisScripting) -> T) -> Result<T, String> {
        let mut slot = self.engine.lock();
        let generation = self.generation.load(Ordering::Acquire);
        let engine = engine_in(&mut slot, generation)?;
        // Seen before the run holds it: `maxmemory` counts it during the run.
        self.see_lua_bytes(engine);
        Ok(run(engine))
    }
}

/// The engine of `generation` in `slot`, built when missing or of an older generation.
fn engine_in(
    slot: &mut Option<(u64, RedisScripting)>,
    generation: u64,
) -> Result<&mut RedisScripting, String> {
    if slot.as_ref().is_none_or(|(built, _)| *built != generation) {
        let fresh = RedisScripting::new().map_err(|e| format!("ERR {e}"))?;
        *slot = Some((generation, fresh));
    }
    Ok(&mut slot.as_mut().expect("the engine was just built").1)
}

/// Why a script did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NotRun {
    /// Another run passed `busy-reply-threshold`: its BUSY error.
    Busy(&'static str),
    /// Another run is on: wait for it on the runtime (`After::AwaitScript`), then run again.
    AwaitTurn,
}

/// Clears the running script when its run ends, also on a panic.
pub(super) struct RunGuard<'a> {
    scripts: &'a Scripts,
}

impl<'a> RunGuard<'a> {
    /// Registers `fresh` as the run, once no other runs. A run that another thread has
    /// registered (two connections' scripts can pass `while_busy` together) is waited for
    /// here when `waits` (inside EXEC, on the pool), until it ends or passes
    /// `busy-reply-threshold` (then its BUSY error); otherwise the caller is told to wait on
    /// the runtime. A run this thread registered already (a transaction holding scripts) is
    /// the one its scripts belong to: no guard.
    fn claim(
        scripts: &'a Scripts,
        fresh: Arc<Running>,
        waits: bool,
    ) -> Result<(Option<RunGuard<'a>>, Arc<Running>), NotRun> {
        let mut slot = scripts.running.lock();
        loop {
            let Some(current) = slot.as_ref() else {
                *slot = Some(Arc::clone(&fresh));
                scripts.active.store(true, Ordering::SeqCst);
                IN_SCRIPT.with(|flag| flag.set(true));
                let guard = RunGuard { scripts };
                drop(slot);
                // A request that passed its check for a script before this one was
                // registered goes on to the namespace's gate: it finishes first.
                let wait_off_worker = super::script_worker::wait_off_the_worker;
                scripts.in_flight.wait_for_others(wait_off_worker);
                return Ok((Some(guard), fresh));
            };
            if current.thread == std::thread::current().id() {
                return Ok((None, Arc::clone(current)));
            }
            let deadline = scripts
                .threshold()
                .map(|threshold| current.started + threshold);
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Err(NotRun::Busy(current.kind.busy()));
            }
            if !waits {
                return Err(NotRun::AwaitTurn);
            }
            // Out of the requests in flight while it waits: the run it waits for may be
            // waiting for them.
            scripts.in_flight.away(|| match deadline {
                Some(deadline) => _ = scripts.turn.wait_until(&mut slot, deadline),
                None => scripts.turn.wait(&mut slot),
            });
        }
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        IN_SCRIPT.with(|flag| flag.set(false));
        *self.scripts.running.lock() = None;
        self.scripts.active.store(false, Ordering::Release);
        self.scripts.ended.notify_waiters();
        self.scripts.turn.notify_all();
    }
}

/// Registers a transaction that holds scripts as the run (for BUSY and SCRIPT KILL), before
/// it takes the exclusive section: its scripts run as part of it. `Err` is the BUSY error of
/// a run on another thread past `busy-reply-threshold`.
pub(super) fn claim_for_transaction(
    state: &ServerState,
) -> Result<Option<RunGuard<'_>>, &'static str> {
    let fresh = Arc::new(Running::new(RunKind::Eval));
    match RunGuard::claim(&state.scripts, fresh, true) {
        Ok((guard, _)) => Ok(guard),
        Err(NotRun::Busy(busy)) => Err(busy),
        Err(NotRun::AwaitTurn) => unreachable!("a claim that waits waits"),
    }
}

/// Whether this thread runs a script now (its commands are the script's calls).
pub fn in_script() -> bool {
    IN_SCRIPT.with(Cell::get)
}

/// Before any command: while a script runs (on another thread), a command Redis refuses then
/// gets `BUSY` once the script has run past `busy-reply-threshold`, and before that waits for
/// its turn (`After::AwaitScript`) where it may; `None` lets the command run.
pub fn while_busy(session: &Session, args: &Args, reply: &mut Reply<'_>) -> Option<After> {
    if IN_SCRIPT.with(Cell::get) {
        return None;
    }
    let scripts = &session.state.scripts;
    let running = scripts.running()?;
    if allowed_while_busy(args) {
        return None;
    }
    if scripts
        .threshold()
        .is_some_and(|threshold| running.started.elapsed() >= threshold)
    {
        if session.transaction.is_some() && args.is_command(b"exec") {
            // Redis's `rejectCommand` of EXEC aborts the transaction, naming why.
            reply.error(&format!(
                "EXECABORT Transaction discarded because of: {}",
                running.kind.busy()
            ));
        } else {
            reply.error(running.kind.busy());
        }
        return Some(After::Continue);
    }
    // On the pool or inside EXEC the command waits at the namespace's gate instead.
    session.may_offload.then_some(After::AwaitScript)
}

/// Whether `args` runs a script (EXEC runs a transaction holding one on the pool).
pub fn is_script(args: &Args) -> bool {
    let name = args.get(0);
    [
        &b"eval"[..],
        b"eval_ro",
        b"evalsha",
        b"evalsha_ro",
        b"fcall",
        b"fcall_ro",
    ]
    .iter()
    .any(|script| name.eq_ignore_ascii_case(script))
}

/// Commands Redis serves while a script is busy (`CMD_ALLOW_BUSY`).
fn allowed_while_busy(args: &Args) -> bool {
    let name = args.get(0).to_ascii_lowercase();
    match name.as_slice() {
        b"auth" | b"hello" | b"multi" | b"discard" | b"watch" | b"unwatch" | b"quit" | b"reset"
        | b"shutdown" => true,
        b"script" => args.len() == 2 && args.get(1).eq_ignore_ascii_case(b"kill"),
        b"function" => {
            args.len() == 2
                && (args.get(1).eq_ignore_ascii_case(b"kill")
                    || args.get(1).eq_ignore_ascii_case(b"stats"))
        }
        _ => false,
    }
}

/// EVAL script numkeys [key ...] [arg ...]
fn eval(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    eval_generic(session, args, reply, Lookup::Body, Access::ReadWrite)
}

/// EVAL_RO script numkeys [key ...] [arg ...]
fn eval_ro(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    eval_generic(session, args, reply, Lookup::Body, Access::ReadOnly)
}

/// EVALSHA sha1 numkeys [key ...] [arg ...]
fn evalsha(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    eval_generic(session, args, reply, Lookup::Sha, Access::ReadWrite)
}

/// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
fn evalsha_ro(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    eval_generic(session, args, reply, Lookup::Sha, Access::ReadOnly)
}

/// How EVAL finds its script: by body (cached on first use) or by SHA1.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lookup {
    Body,
    Sha,
}

/// Whether the script may write: the `_RO` commands run it read-only.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    ReadWrite,
    ReadOnly,
}

/// The key count of an EVAL, checked against its arguments, or Redis's error.
fn key_count(args: &Args) -> Result<usize, &'static str> {
    let count = keys::parse_i64(args.get(2)).map_err(|()| keys::NOT_AN_INTEGER)?;
    if count < 0 {
        return Err("ERR Number of keys can't be negative");
    }
    match usize::try_from(count) {
        Ok(count) if count <= args.len() - 3 => Ok(count),
        _ => Err("ERR Number of keys can't be greater than number of args"),
    }
}

fn eval_generic(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    lookup: Lookup,
    access: Access,
) -> After {
    let key_count = match key_count(args) {
        Ok(count) => count,
        Err(message) => return refuse_run(session, args, reply, message),
    };
    let scripts = &session.state.scripts;
    let (sha, cached) = match lookup {
        Lookup::Sha => {
            let sha = args.get(1).to_ascii_lowercase();
            let sha = String::from_utf8_lossy(&sha).into_owned();
            match scripts.cached(&sha).filter(|_| sha.len() == 40) {
                Some(script) => (sha, Some(script)),
                None => return refuse_run(session, args, reply, NOSCRIPT),
            }
        }
        Lookup::Body => {
            let sha = udf::redis::sha1_hex(args.get(1));
            let cached = scripts.cached(&sha);
            (sha, cached)
        }
    };
    let parsed = match &cached {
        Some(script) => script.parsed,
        None => match udf::redis::parse_shebang(args.get(1)) {
            Ok(parsed) => parsed,
            Err(message) => return refuse_run(session, args, reply, &format!("ERR {message}")),
        },
    };
    if let Some(refusal) = refusal(session, parsed, access) {
        return refuse_run(session, args, reply, refusal);
    }
    // Where no long script could give its worker away, scripts run on the long-request pool.
    if session.may_offload && !script_worker::on_runtime_worker() {
        return After::Offload;
    }
    let read_only = access == Access::ReadOnly || parsed.flags.no_writes;
    let body = cached.as_ref().map_or(args.get(1), |script| &script.body);
    let keys: Vec<&[u8]> = (3..3 + key_count).map(|i| args.get(i)).collect();
    let argv: Vec<&[u8]> = (3 + key_count..args.len()).map(|i| args.get(i)).collect();
    let run = ScriptRun {
        sha: &sha,
        body,
        keys: &keys,
        args: &argv,
        memory_bytes_max: SCRIPT_MEMORY_BYTES_MAX,
    };
    match run_exclusive(session, args, run, parsed, read_only, cached.is_none()) {
        Some(value) => write_value(reply, &value),
        None => return After::AwaitScript,
    }
    After::Continue
}

/// Answers `message` for a script or function command that does not run: shown to monitors
/// first, as Redis shows EVAL, EVALSHA and FCALL as they start.
pub(super) fn refuse_run(
    session: &Session,
    args: &Args,
    reply: &mut Reply<'_>,
    message: &str,
) -> After {
    monitor::feed_script_start(session, args);
    reply.error(message);
    After::Continue
}

/// Why a script may not run here, as Redis words it.
pub(super) fn refusal(
    session: &Session,
    parsed: ParsedScript,
    access: Access,
) -> Option<&'static str> {
    if session.state.is_clustered() && parsed.flags.no_cluster {
        return Some("ERR Can not run script on cluster, 'no-cluster' flag is set.");
    }
    if access == Access::ReadOnly && !parsed.flags.compat && !parsed.flags.no_writes {
        return Some("ERR Can not execute a script with write flag using *_ro command.");
    }
    // A script with flags that may write is refused whole past `maxmemory` (one without
    // flags is checked at its calls).
    let flags = parsed.flags;
    if !flags.compat
        && !flags.no_writes
        && !flags.allow_oom
        && session
            .state
            .resp_settings
            .memory_limit
            .exceeded(&session.state)
    {
        return Some(memory_limit::OOM);
    }
    None
}

/// Runs a script inside the exclusive section: compiles (and caches) a new body, registers
/// the run for BUSY and SCRIPT KILL, and runs it with this session as its commands' client.
/// `None` when it must wait for another script's run on the runtime first.
fn run_exclusive(
    session: &mut Session,
    command: &Args,
    run: ScriptRun<'_>,
    parsed: ParsedScript,
    read_only: bool,
    new_body: bool,
) -> Option<RedisValue> {
    let state = Arc::clone(&session.state);
    let scripts = &state.scripts;
    let limits = (read_only, parsed.flags.allow_oom);
    let outcome = run_registered(
        session,
        command,
        RunKind::Eval,
        limits,
        |host, checkpoint| {
            let mut host = Some(host);
            let outcome = scripts.with_engine(|engine| {
                if new_body {
                    engine.compile(run.sha, run.body, parsed.code_offset)?;
                }
                let taken = host.take().expect("the host is here until the run");
                let (value, back) = engine.run(run, parsed.code_offset, taken, checkpoint);
                host = Some(back);
                Ok::<_, String>(value)
            });
            (outcome, host.expect("the run gives its host back"))
        },
    );
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(NotRun::AwaitTurn) => return None,
        Err(NotRun::Busy(busy)) => Err(busy.to_owned()),
    };
    Some(match outcome {
        Ok(Ok(value)) => {
            if new_body {
                let script = Script {
                    body: run.body.to_vec(),
                    parsed,
                    loaded: false,
                };
                scripts.insert(run.sha.to_owned(), script);
            }
            value
        }
        Ok(Err(message)) | Err(message) => RedisValue::Error(message.into_bytes()),
    })
}

/// Runs `body` as the script or function running now (for BUSY, SCRIPT KILL and FUNCTION
/// KILL), with a host that runs its commands as this session's; the session's protocol and
/// database are its own again afterwards (a script's SELECT lasts until it ends, as in
/// Redis 7).
///
/// The run is registered before it enters the namespace's exclusive section, where it runs:
/// a command that arrives meanwhile sees it and waits on the runtime (or gets BUSY), rather
/// than wait at the section's gate on a runtime thread, where, with every thread of a small
/// machine blocked so, nothing could serve SCRIPT KILL.
///
/// On a runtime worker (`Session::may_offload`), a run that finds another on is not run
/// (`NotRun::AwaitTurn`); elsewhere it waits for its turn, and `NotRun::Busy` is the BUSY
/// error of a run on another thread that passed `busy-reply-threshold` meanwhile. The
/// script's own commands never leave its thread. `command` (the EVAL or FCALL) is shown to
/// monitors once the run has its turn, before the commands it calls.
pub(super) fn run_registered<T>(
    session: &mut Session,
    command: &Args,
    kind: RunKind,
    (read_only, allow_oom): (bool, bool),
    body: impl FnOnce(SessionHost, &Checkpoint) -> (T, SessionHost),
) -> Result<T, NotRun> {
    let state = Arc::clone(&session.state);
    let namespace = keys::namespace_of(&state);
    let on_worker = session.may_offload;
    let fresh = Arc::new(Running::new(kind));
    let (_guard, running) = RunGuard::claim(&state.scripts, fresh, !on_worker)?;
    monitor::feed_script_start(session, command);
    let checkpoint = script_worker::checkpoint(&running.killed, running.started, on_worker);
    let (saved_protocol, saved_database) = (session.protocol, session.database);
    // The Lua state keeps the run's host until the run ends, so the host owns the caller's
    // session meanwhile; a stand-in holds its place.
    let stand_in = Session::forwarded(Arc::clone(&state), session.protocol);
    let mut caller = std::mem::replace(session, stand_in);
    caller.in_script = true;
    caller.may_offload = false;
    let host = SessionHost {
        session: caller,
        running,
        read_only,
        allow_oom,
    };
    let (outcome, host) = namespace.exclusive(|| body(host, &checkpoint));
    *session = host.session;
    session.protocol = saved_protocol;
    session.database = saved_database;
    session.in_script = false;
    session.may_offload = on_worker;
    Ok(outcome)
}

/// SCRIPT LOAD script | EXISTS sha1 [sha1 ...] | FLUSH [ASYNC | SYNC] | KILL | HELP
fn script(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = args.get(1).to_ascii_uppercase();
    let scripts = &session.state.scripts;
    match (subcommand.as_slice(), args.len()) {
        (b"LOAD", 3) => script_load(scripts, args.get(2), reply),
        (b"EXISTS", count) if count >= 3 => {
            reply.array(count - 2);
            for position in 2..count {
                let sha =
                    String::from_utf8_lossy(&args.get(position).to_ascii_lowercase()).into_owned();
                reply.integer(i64::from(scripts.cached(&sha).is_some()));
            }
        }
        (b"FLUSH", 2) => {
            scripts.flush();
            reply.ok();
        }
        (b"FLUSH", 3) => {
            let mode = args.get(2);
            if mode.eq_ignore_ascii_case(b"sync") || mode.eq_ignore_ascii_case(b"async") {
                scripts.flush();
                reply.ok();
            } else {
                reply.error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
        }
        (b"KILL", 2) => kill(scripts, Killer::Script, reply),
        (b"DEBUG", 3) => reply.error("ERR SCRIPT DEBUG is not supported by Osprey"),
        (b"HELP", 2) => script_help(reply),
        _ => reply.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SCRIPT HELP.",
            String::from_utf8_lossy(&args.get(1)[..args.get(1).len().min(128)])
        )),
    }
    After::Continue
}

/// Which command asks to kill: each stops only its own kind of run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Killer {
    Script,
    Function,
}

/// SCRIPT KILL and FUNCTION KILL: stop the run at its next check, unless it wrote or is of
/// the other kind (Redis's `scriptKill`).
pub(super) fn kill(scripts: &Scripts, killer: Killer, reply: &mut Reply<'_>) {
    let Some(running) = scripts.running() else {
        return reply.error(NOTBUSY);
    };
    if running.wrote.load(Ordering::Relaxed) {
        return reply.error(UNKILLABLE);
    }
    match (killer, running.kind.is_eval()) {
        (Killer::Script, false) => reply.error(BUSY_FUNCTION),
        (Killer::Function, true) => reply.error(BUSY),
        _ => {
            running.killed.store(true, Ordering::Relaxed);
            reply.ok();
        }
    }
}

/// SCRIPT LOAD: compiles and caches the script, answers its SHA1.
fn script_load(scripts: &Scripts, body: &[u8], reply: &mut Reply<'_>) {
    let sha = udf::redis::sha1_hex(body);
    if scripts.cached(&sha).is_none() {
        let parsed = match udf::redis::parse_shebang(body) {
            Ok(parsed) => parsed,
            Err(message) => return reply.error(&format!("ERR {message}")),
        };
        // The engine is busy only while a script runs (a race with the busy check).
        let Some(mut slot) = scripts.engine.try_lock() else {
            return reply.error(BUSY);
        };
        let generation = scripts.generation.load(Ordering::Acquire);
        let compiled = engine_in(&mut slot, generation)
            .and_then(|engine| engine.compile(&sha, body, parsed.code_offset));
        drop(slot);
        if let Err(message) = compiled {
            return reply.error(&message);
        }
        let script = Script {
            body: body.to_vec(),
            parsed,
            loaded: true,
        };
        scripts.insert(sha.clone(), script);
    }
    reply.bulk(sha.as_bytes());
}

fn script_help(reply: &mut Reply<'_>) {
    const LINES: &[&str] = &[
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Very dangerous on replicas.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Print this help.",
    ];
    reply.array(LINES.len());
    for text in LINES {
        reply.simple(text);
    }
}

/// `busy-reply-threshold` (alias `lua-time-limit`) for CONFIG GET.
pub fn parameters(state: &ServerState) -> [(&'static str, String); 2] {
    let ms = state
        .scripts
        .busy_reply_threshold_ms
        .load(Ordering::Relaxed);
    [
        ("busy-reply-threshold", ms.to_string()),
        ("lua-time-limit", ms.to_string()),
    ]
}

/// CONFIG SET of a scripting parameter: `None` when `name` is not one.
pub fn set_parameter(state: &ServerState, name: &[u8], value: &[u8]) -> Option<Result<(), String>> {
    if name != b"busy-reply-threshold" && name != b"lua-time-limit" {
        return None;
    }
    let printable = String::from_utf8_lossy(name);
    Some(
        match keys::parse_i64(value)
            .ok()
            .and_then(|v| u64::try_from(v).ok())
        {
            Some(ms) => {
                state
                    .scripts
                    .busy_reply_threshold_ms
                    .store(ms, Ordering::Relaxed);
                Ok(())
            }
            None => Err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{printable}') - argument \
             couldn't be parsed into an integer"
            )),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_counts_are_checked_against_the_arguments() {
        let args: Args = ["eval", "return 1", "2", "k"].iter().collect();
        assert_eq!(
            key_count(&args),
            Err("ERR Number of keys can't be greater than number of args")
        );
        let args: Args = ["eval", "return 1", "-1"].iter().collect();
        assert_eq!(
            key_count(&args),
            Err("ERR Number of keys can't be negative")
        );
        let args: Args = ["eval", "return 1", "1", "k"].iter().collect();
        assert_eq!(key_count(&args), Ok(1));
    }
}
