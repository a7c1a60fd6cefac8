//! MULTI, EXEC, DISCARD, WATCH and UNWATCH with Redis's semantics on one node. On a cluster,
//! EXEC runs the queue here when this node masters its keys, or sends it whole to the one node
//! that does (`routing::route_transaction`); WATCH takes keys this node masters.
//!
//! - Between MULTI and EXEC, commands are checked (known, right arity) and queued; one that
//!   fails the check, or is answered BUSY while a script runs, is answered with its error and
//!   dooms the transaction (EXECABORT).
//! - EXEC runs the queue inside the namespace's exclusive section (`Namespace::exclusive`), so
//!   no other command, from either protocol, interleaves with it: all-or-nothing visibility.
//!   A command that fails at run time does not undo the others, as in Redis.
//! - WATCH registers an engine watch on each key's record, which every write, delete and
//!   truncate of that record dirties. EXEC, inside the exclusive section, aborts (null reply)
//!   when a watch is dirty or a key watched while present has since expired.
//!
//! Invariants:
//! - `Session::transaction` is `Some` exactly between MULTI and EXEC/DISCARD/RESET.
//! - Watches end with EXEC, DISCARD, UNWATCH, RESET and the connection.
//! - The queue holds at most `QUEUED_BYTES_MAX` bytes of arguments; past it the connection
//!   closes, as Redis closes a client over its query buffer limit.

use std::cell::Cell;

use engine::Watch;
use wire_resp::Args;

use super::commands::{self, Command};
use super::keys::Target;
use super::memory_limit;
use super::reply::Reply;
use super::{After, Session};

/// Bytes of queued arguments a transaction may hold (Redis's query buffer limit).
const QUEUED_BYTES_MAX: usize = wire_resp::QUERY_BUFFER_LIMIT_BYTES;

/// The transaction commands.
pub const COMMANDS: &[Command] = &[
    ("discard", 1, discard),
    ("exec", 1, exec),
    ("multi", 1, multi),
    ("unwatch", 1, unwatch),
    ("watch", -2, watch),
];

/// Commands that run at once even inside MULTI (as in Redis).
const NOT_QUEUED: &[&[u8]] = &[b"exec", b"discard", b"multi", b"watch", b"quit", b"reset"];

/// A transaction being queued.
#[derive(Debug, Default)]
pub struct Transaction {
    queued: Vec<Args>,
    queued_bytes: usize,
    /// A queued command failed its check: EXEC will refuse.
    doomed: bool,
}

impl Transaction {
    /// The commands queued so far.
    pub fn queued(&self) -> &[Args] {
        &self.queued
    }

    /// Whether EXEC will refuse it (a queued command failed its check).
    pub fn doomed(&self) -> bool {
        self.doomed
    }
}

/// A watched key.
#[derive(Debug)]
pub struct WatchedKey {
    watch: Watch,
    /// The record the key was when watched (SWAPDB may make it another).
    digest: model::Digest,
    /// Whether the key existed when watched (its expiry then aborts EXEC).
    existed: bool,
    /// The database the key was watched in.
    database: super::databases::Database,
    key: Vec<u8>,
}

thread_local! {
    /// Whether this thread runs the commands of an EXEC now.
    static IN_EXEC: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread runs the commands of an EXEC now (they were checked as they queued).
pub fn in_exec() -> bool {
    IN_EXEC.with(Cell::get)
}

/// Ends the transaction and its watches, as an aborted EXEC does.
pub fn discard_all(session: &mut Session) {
    if session.transaction.take().is_some() {
        session.watched.clear();
    }
}

/// Inside MULTI, makes EXEC refuse the transaction (a command was refused before queuing).
pub fn doom(session: &mut Session) {
    if let Some(transaction) = session.transaction.as_mut() {
        transaction.doomed = true;
    }
}

/// Inside MULTI, queues `args` instead of running it (answering `+QUEUED` or the check's
/// error); `None` when the command is not to be queued.
pub fn queue_if_in_multi(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
) -> Option<After> {
    let transaction = session.transaction.as_mut()?;
    let name = args.get(0).to_ascii_lowercase();
    if NOT_QUEUED.contains(&name.as_slice()) {
        return None;
    }
    if super::lifecycle::NOT_IN_MULTI.contains(&name.as_slice()) {
        // Redis's `no-multi`: refused, and the transaction with it.
        transaction.doomed = true;
        reply.error("ERR Command not allowed inside a transaction");
        super::command_stats::reject(args);
        return Some(After::Continue);
    }
    if let Err(message) = commands::check(&session.state, args) {
        transaction.doomed = true;
        reply.error(&message);
        super::command_stats::reject(args);
        return Some(After::Continue);
    }
    transaction.queued_bytes += args.total_bytes();
    if transaction.queued_bytes > QUEUED_BYTES_MAX {
        return Some(After::Close);
    }
    transaction.queued.push(args.clone());
    reply.simple("QUEUED");
    Some(After::Continue)
}

/// MULTI
fn multi(session: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    if session.transaction.is_some() {
        reply.error("ERR MULTI calls can not be nested");
    } else {
        session.transaction = Some(Transaction::default());
        reply.ok();
    }
    After::Continue
}

/// DISCARD
fn discard(session: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    if session.transaction.take().is_some() {
        session.watched.clear();
        reply.ok();
    } else {
        reply.error("ERR DISCARD without MULTI");
    }
    After::Continue
}

/// EXEC: the queued replies, or null when a watched key changed.
fn exec(session: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    // A queued script may run long: the whole transaction runs on the long-request pool.
    if session.may_offload
        && session
            .transaction
            .as_ref()
            .is_some_and(|transaction| transaction.queued.iter().any(super::scripting::is_script))
    {
        return After::Offload;
    }
    let Some(transaction) = session.transaction.take() else {
        reply.error("ERR EXEC without MULTI");
        return After::Continue;
    };
    let watched = std::mem::take(&mut session.watched);
    if transaction.doomed {
        reply.error("EXECABORT Transaction discarded because of previous errors.");
        return After::Continue;
    }
    let limit = &session.state.resp_settings.memory_limit;
    if transaction.queued.iter().any(memory_limit::may_grow) && limit.exceeded(&session.state) {
        reply.error(&format!(
            "EXECABORT Transaction discarded because of: {}",
            memory_limit::OOM
        ));
        return After::Continue;
    }
    let state = session.state.clone();
    let namespace = state
        .namespace(state.config.resp_namespace().as_bytes())
        .expect("the RESP namespace is validated at start-up");
    // A transaction holding scripts runs as one script run, registered before it takes the
    // section (see `scripting::claim_for_transaction`).
    let _run = if transaction.queued.iter().any(super::scripting::is_script) {
        match super::scripting::claim_for_transaction(&state) {
            Ok(guard) => guard,
            Err(busy) => {
                reply.error(busy);
                return After::Continue;
            }
        }
    } else {
        None
    };
    namespace.exclusive(|| {
        if watched.iter().any(|key| changed(session, key)) {
            reply.null_array();
            return After::Continue;
        }
        reply.array(transaction.queued.len());
        let mut after = After::Continue;
        // A transaction runs whole where it is: its commands may not move to the pool.
        let may_offload = std::mem::replace(&mut session.may_offload, false);
        IN_EXEC.with(|flag| flag.set(true));
        for args in &transaction.queued {
            if commands::execute(session, args, reply) == After::Close {
                after = After::Close;
            }
        }
        IN_EXEC.with(|flag| flag.set(false));
        session.may_offload = may_offload;
        after
    })
}

/// Whether a watched key was written, deleted or has expired since WATCH; or, its database
/// swapped with another (SWAPDB), whether it exists in either, as Redis's SWAPDB touches
/// such keys.
fn changed(session: &Session, key: &WatchedKey) -> bool {
    if key.watch.is_dirty() {
        return true;
    }
    let target = Target::of(&session.state, key.database, &key.key);
    let exists = target.view(|current| current.is_some()).unwrap_or(false);
    if target.digest() != key.digest {
        return exists || key.existed;
    }
    key.existed && !exists
}

/// WATCH key [key ...]
fn watch(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    if session.transaction.is_some() {
        reply.error("ERR WATCH inside MULTI is not allowed");
        return After::Continue;
    }
    let state = session.state.clone();
    let database = session.database;
    let namespace = state
        .namespace(state.config.resp_namespace().as_bytes())
        .expect("the RESP namespace is validated at start-up");
    for position in 1..args.len() {
        let key = args.get(position);
        let target = Target::of(&state, database, key);
        // Watch first, then look: a write in between dirties the watch.
        let watch = namespace.watch(target.digest());
        let existed = target.view(|current| current.is_some()).unwrap_or(false);
        session.watched.push(WatchedKey {
            watch,
            digest: target.digest(),
            existed,
            database,
            key: key.to_vec(),
        });
    }
    reply.ok();
    After::Continue
}

/// UNWATCH
fn unwatch(session: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    session.watched.clear();
    reply.ok();
    After::Continue
}
