//! Blocking pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP) and the
//! registry of the clients they block.
//!
//! A blocking command first tries its pop. When it finds nothing and its connection may block
//! (a client's own command: not inside EXEC, not a command another node forwarded), it leaves
//! a [`Request`] in the session and returns [`After::Block`]; the connection registers in
//! [`BlockedClients`] and waits on its socket (for a disconnect), its wake-up and its deadline
//! at once, and on each wake-up runs the command again ([`retry`]). Where blocking is not
//! allowed, the command answers as Redis answers a timeout, at once.
//!
//! Wake-ups: every waiter holds an engine watch on each of its keys' records (through the
//! registry, one watch per key), whose wake-up the engine calls after any write that touches
//! the record, from either protocol: a Redis push, an EXEC, an Aerospike put, a replicated or
//! migrated record, a truncate. A namespace with no watch skips all of it with one atomic
//! load on each write.
//!
//! Fairness (Redis serves blocked clients in arrival order): each key keeps its waiters in
//! arrival order, one queue per kind (list or sorted set). A write wakes only the first waiter
//! of each kind; a waiter that leaves the head of a queue (served, timed out, unblocked, or
//! gone) wakes the next one, which tries in turn; and a blocking command that arrives while
//! others wait on its keys queues behind them without trying first. Unlike Redis, which
//! serves blocked clients before it runs the next command, a non-blocking pop (LPOP) from
//! another client may take an element between the write and the woken client's retry; the
//! woken client then finds nothing and waits again, still first.
//!
//! On a cluster, a blocking command whose keys another node masters is forwarded there in
//! slices: the client's node sends it with its timeout cut to what is left, at most
//! [`FORWARDED_WAIT_MAX`]; the master blocks it for that long at most (its own cap, whatever
//! it is sent), so a forwarded request never holds a fabric request past its timeout; a null
//! answer before the client's deadline is sent again. Between slices the client's node sees
//! whether the client left. A forwarded waiter is queued at the master like any other, but
//! each new slice queues it again at the back.
//!
//! Invariants:
//! - A waiter is in the queue of each of its keys (of its kind) exactly while its
//!   [`Registration`] lives; a key with no waiter has no entry and no watch.
//! - Each connection blocks at most once at a time, so a queue holds at most `maxclients`
//!   waiters and the registry at most `maxclients` entries per key named.
//! - Lock order: a partition lock, then the registry's locks, then the engine's watch lock;
//!   the registry never takes a partition lock.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use engine::{Namespace, Watch};
use model::Digest;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};
use wire_resp::Args;

use super::collection::Failure;
use super::commands::{self, Command};
use super::keys::{self, Target};
use super::lists::End;
use super::pops::{self, MultiPop};
use super::reply::Reply;
use super::{After, Session, parse_double};

/// The blocking commands, with Redis's arities.
pub const COMMANDS: &[Command] = &[
    ("blmove", 6, blmove),
    ("blmpop", -5, blmpop),
    ("blpop", -3, |s, a, r| bpop(s, a, r, End::Head)),
    ("brpop", -3, |s, a, r| bpop(s, a, r, End::Tail)),
    ("brpoplpush", 4, brpoplpush),
    ("bzmpop", -5, bzmpop),
    ("bzpopmax", -3, |s, a, r| bzpop(s, a, r, true)),
    ("bzpopmin", -3, |s, a, r| bzpop(s, a, r, false)),
];

/// Whether `name` (lower case) is one of the blocking commands.
pub fn is_blocking(name: &[u8]) -> bool {
    COMMANDS
        .iter()
        .any(|(command, _, _)| command.as_bytes() == name)
}

/// The longest a master blocks a command another node forwarded: well under the fabric's
/// request timeout, so the forwarding node gets an answer (a null, then it sends again) before
/// its request times out.
pub const FORWARDED_WAIT_MAX: Duration = Duration::from_secs(1);
const _: () =
    assert!(FORWARDED_WAIT_MAX.as_millis() * 2 <= fabric::REQUEST_TIMEOUT_MS_DEFAULT as u128);

/// Redis's replies to a timeout it cannot take (`getTimeoutFromObjectOrReply`).
const TIMEOUT_NOT_A_FLOAT: &str = "ERR timeout is not a float or out of range";
const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";
const TIMEOUT_OUT_OF_RANGE: &str = "ERR timeout is out of range";
/// The error a client unblocked by `CLIENT UNBLOCK id ERROR` gets.
pub const UNBLOCKED: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";

/// What a blocked client waits for values of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP.
    List = 0,
    /// BZPOPMIN, BZPOPMAX, BZMPOP.
    ZSet = 1,
    /// XREAD and XREADGROUP with BLOCK: readers take nothing from one another, so a write
    /// wakes every one of them, not only the first.
    Stream = 2,
}

/// Kinds of waiters, one queue each per key.
const KIND_COUNT: usize = 3;

/// What a blocking command that found nothing waits for; the connection takes it.
#[derive(Debug)]
pub struct Request {
    /// Its keys' records, without repeats.
    pub digests: Vec<Digest>,
    /// The type of value it waits for.
    pub kind: Kind,
    /// How long to wait; `None` for ever.
    pub timeout: Option<Duration>,
}

/// A session's blocking state.
#[derive(Debug, Default)]
pub struct Blocking {
    /// Whether a blocking command may block: a client's own connection, or a single command
    /// another node forwarded. Inside EXEC it may not (`Session::may_offload` is off there).
    pub allowed: bool,
    /// Set while the connection runs a blocked command again after a wake-up.
    pub retry: bool,
    /// Left by a blocking command that found nothing and blocks.
    pub request: Option<Request>,
    /// Arguments a blocked command reads in place of its own on each retry, by position, as
    /// Redis rewrites a blocked XREAD's `$` into the id it stood for. A command clears them
    /// when it runs afresh (not as a retry).
    pub rewritten: Vec<(usize, Vec<u8>)>,
}

impl Blocking {
    /// The state of a client's own connection, or of a command another node forwarded (which
    /// blocks at most [`FORWARDED_WAIT_MAX`]).
    pub fn allowed() -> Blocking {
        Blocking {
            allowed: true,
            ..Blocking::default()
        }
    }
}

/// Parses a blocking command's timeout in seconds, as Redis does: a double, rounded up to
/// whole milliseconds; 0 for ever.
///
/// # Errors
/// Redis's text for a timeout that is not a number, is negative, or is out of range.
pub fn parse_timeout(bytes: &[u8]) -> Result<Option<Duration>, &'static str> {
    let seconds = parse_double(bytes).ok_or(TIMEOUT_NOT_A_FLOAT)?;
    let milliseconds = (seconds * 1000.0).ceil();
    if milliseconds > i64::MAX as f64 {
        return Err(TIMEOUT_OUT_OF_RANGE);
    }
    if milliseconds < 0.0 {
        return Err(TIMEOUT_NEGATIVE);
    }
    // A timeout beyond what a deadline can hold waits for ever, which is as long.
    let milliseconds = milliseconds as u64;
    Ok((milliseconds > 0).then(|| Duration::from_millis(milliseconds)))
}

/// Runs a blocked command (in `args`) again after a wake-up; `After::Block` when it still
/// finds nothing (it has then answered nothing).
pub fn retry(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Ok(handler) = commands::check(&session.state, args) else {
        unreachable!("a blocked command was checked before it blocked");
    };
    session.blocking.retry = true;
    let started = std::time::Instant::now();
    let after = handler(session, args, reply);
    session.blocking.retry = false;
    if after != After::Block {
        // Counted when it answers, as Redis counts a blocked command when it is unblocked.
        super::command_stats::record_call(args, started.elapsed(), reply.errors_since_mark());
    }
    after
}

/// Where a blocking command has its timeout; `None` for other commands.
pub fn timeout_position(args: &Args) -> Option<usize> {
    let name = args.command()?.to_ascii_lowercase();
    match name.as_slice() {
        b"blpop" | b"brpop" | b"bzpopmin" | b"bzpopmax" => Some(args.len() - 1),
        b"blmove" => Some(5),
        b"brpoplpush" => Some(3),
        b"blmpop" | b"bzmpop" => Some(1),
        _ => None,
    }
}

/// A blocking command forwarded to its keys' master in slices (see the module docs).
#[derive(Debug)]
pub struct ForwardedBlock {
    timeout_position: usize,
    /// The client's deadline; `None` for ever.
    deadline: Option<Instant>,
}

impl ForwardedBlock {
    /// For a blocking command with a valid timeout; `None` otherwise (it is forwarded once,
    /// and the master answers it, or its error).
    pub fn of(args: &Args) -> Option<ForwardedBlock> {
        let timeout_position = timeout_position(args)?;
        let timeout = parse_timeout(args.get(timeout_position)).ok()?;
        Some(ForwardedBlock {
            timeout_position,
            deadline: timeout.and_then(|timeout| Instant::now().checked_add(timeout)),
        })
    }

    /// The command for the next slice, its timeout cut to what is left (at most
    /// [`FORWARDED_WAIT_MAX`]), as a forward payload; `None` once the deadline has passed.
    pub fn next_payload(
        &self,
        protocol: u8,
        database: super::databases::Database,
        args: &Args,
    ) -> Option<Vec<u8>> {
        let left = match self.deadline {
            Some(deadline) => deadline.checked_duration_since(Instant::now())?,
            None => FORWARDED_WAIT_MAX,
        };
        // Whole milliseconds, at least one: a timeout of 0 would wait for ever.
        let milliseconds = left.min(FORWARDED_WAIT_MAX).as_millis().max(1);
        let timeout = format!("{}.{:03}", milliseconds / 1000, milliseconds % 1000);
        let words: Vec<&[u8]> = (0..args.len())
            .map(|position| match position {
                p if p == self.timeout_position => timeout.as_bytes(),
                p => args.get(p),
            })
            .collect();
        let mut payload = super::routing::payload_start(protocol, database);
        wire_resp::encode_command(&mut payload, &words);
        Some(payload)
    }
}

/// Whether a forwarded blocking command's reply is its timeout's (null): the next slice is
/// sent if the client's deadline has not passed.
pub fn is_timeout_reply(reply: &[u8]) -> bool {
    reply == b"*-1\r\n" || reply == b"_\r\n"
}

/// At the master: blocks a forwarded command that found nothing (`session.blocking.request`)
/// for its timeout, at most [`FORWARDED_WAIT_MAX`], and returns its reply.
pub async fn wait_forwarded(mut session: Session, args: &Args) -> (Session, Vec<u8>) {
    let request = session
        .blocking
        .request
        .take()
        .expect("a blocked command says why");
    let state = Arc::clone(&session.state);
    let wait = request
        .timeout
        .map_or(FORWARDED_WAIT_MAX, |t| t.min(FORWARDED_WAIT_MAX));
    let deadline = Instant::now() + wait;
    // Its own id among the waiters (a forwarded session has none).
    let waiter_id = state.resp_client_ids.fetch_add(1, Ordering::Relaxed) + 1;
    let namespace = keys::namespace_of(&state);
    let registration = state
        .blocked_clients
        .register(namespace, waiter_id, &request);
    let mut out = Vec::new();
    loop {
        tokio::select! {
            biased;
            () = registration.waiter().woken() => {}
            () = sleep_until(deadline) => {
                Reply::new(&mut out, session.protocol).null_array();
                return (session, out);
            }
        }
        session.may_offload = true;
        let protocol = session.protocol;
        let after = retry(&mut session, args, &mut Reply::new(&mut out, protocol));
        session.may_offload = false;
        if after != After::Block {
            return (session, out);
        }
    }
}

/// What a pop attempt found.
enum Attempt {
    /// It answered (an element, or an error).
    Answered,
    /// Nothing to pop.
    Nothing,
}

/// How a blocking command answers a timeout where it may not block: Redis answers BLMOVE and
/// BRPOPLPUSH with a null bulk string, the others with a null array (alike in RESP3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NullReply {
    Bulk,
    Array,
}

/// The common course of a blocking command: try `attempt` (unless clients already wait on
/// these keys and this one must queue behind them), then block or answer the timeout.
fn serve_or_block(
    session: &mut Session,
    reply: &mut Reply<'_>,
    (keys, kind, timeout): (&[&[u8]], Kind, Option<Duration>),
    null: NullReply,
    attempt: impl FnOnce(&mut Session, &mut Reply<'_>, bool) -> Result<Attempt, Failure>,
) -> After {
    let may_block = session.may_offload && session.blocking.allowed;
    let retry = session.blocking.retry;
    let mut digests: Vec<Digest> = keys
        .iter()
        .map(|key| Target::of(&session.state, session.database, key).digest())
        .collect();
    digests.sort_unstable();
    digests.dedup();
    let queue_behind =
        may_block && !retry && session.state.blocked_clients.any_waiting(kind, &digests);
    if !queue_behind {
        match attempt(session, reply, retry) {
            Ok(Attempt::Answered) => return After::Continue,
            Ok(Attempt::Nothing) => {}
            Err(failure) => {
                failure.reply(reply);
                return After::Continue;
            }
        }
    }
    if !may_block {
        match null {
            NullReply::Bulk => reply.null(),
            NullReply::Array => reply.null_array(),
        }
        return After::Continue;
    }
    session.blocking.request = Some(Request {
        digests,
        kind,
        timeout,
    });
    After::Block
}

/// Answers an argument error.
fn fail(reply: &mut Reply<'_>, text: &str) -> After {
    reply.error(text);
    After::Continue
}

/// BLPOP/BRPOP key [key ...] timeout: `[key, element]`.
fn bpop(session: &mut Session, args: &Args, reply: &mut Reply<'_>, end: End) -> After {
    let timeout = match parse_timeout(args.get(args.len() - 1)) {
        Ok(timeout) => timeout,
        Err(text) => return fail(reply, text),
    };
    let keys: Vec<&[u8]> = (1..args.len() - 1)
        .map(|position| args.get(position))
        .collect();
    let wait = (keys.as_slice(), Kind::List, timeout);
    serve_or_block(
        session,
        reply,
        wait,
        NullReply::Array,
        |session, reply, retry| {
            let Some((key_index, elements)) = pops::pop_first_list(session, &keys, end, 1, retry)?
            else {
                return Ok(Attempt::Nothing);
            };
            reply.array(2);
            reply.bulk(keys[key_index]);
            reply.bulk(&elements[0]);
            Ok(Attempt::Answered)
        },
    )
}

/// BLMOVE source destination <LEFT | RIGHT> <LEFT | RIGHT> timeout: the element moved.
fn blmove(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let parsed = pops::parse_end(args.get(3))
        .and_then(|from| Ok((from, pops::parse_end(args.get(4))?)))
        .and_then(|ends| Ok((ends, parse_timeout(args.get(5))?)));
    match parsed {
        Ok((ends, timeout)) => block_move(session, args, reply, ends, timeout),
        Err(text) => fail(reply, text),
    }
}

/// BRPOPLPUSH source destination timeout: BLMOVE source destination RIGHT LEFT timeout.
fn brpoplpush(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    match parse_timeout(args.get(3)) {
        Ok(timeout) => block_move(session, args, reply, (End::Tail, End::Head), timeout),
        Err(text) => fail(reply, text),
    }
}

fn block_move(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    ends: (End, End),
    timeout: Option<Duration>,
) -> After {
    let (source, destination) = (args.get(1), args.get(2));
    let wait = (&[source][..], Kind::List, timeout);
    serve_or_block(
        session,
        reply,
        wait,
        NullReply::Bulk,
        |session, reply, retry| match pops::move_element(
            session,
            (source, destination),
            ends,
            retry,
        )? {
            Some(element) => {
                reply.bulk(&element);
                Ok(Attempt::Answered)
            }
            None => Ok(Attempt::Nothing),
        },
    )
}

/// BLMPOP timeout numkeys key [key ...] <LEFT | RIGHT> [COUNT count]: `[key, [element ...]]`.
fn blmpop(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let parsed = MultiPop::parse(args, 2, (b"LEFT", b"RIGHT"))
        .and_then(|request| Ok((request, parse_timeout(args.get(1))?)));
    let (request, timeout) = match parsed {
        Ok(parsed) => parsed,
        Err(text) => return fail(reply, text),
    };
    let keys = request.keys(args);
    let end = if request.from_first {
        End::Head
    } else {
        End::Tail
    };
    let wait = (keys.as_slice(), Kind::List, timeout);
    serve_or_block(
        session,
        reply,
        wait,
        NullReply::Array,
        |session, reply, retry| {
            let popped = pops::pop_first_list(session, &keys, end, request.count, retry)?;
            let Some((key_index, elements)) = popped else {
                return Ok(Attempt::Nothing);
            };
            pops::reply_list_popped(reply, keys[key_index], &elements);
            Ok(Attempt::Answered)
        },
    )
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout: `[key, member, score]`.
fn bzpop(session: &mut Session, args: &Args, reply: &mut Reply<'_>, max: bool) -> After {
    let timeout = match parse_timeout(args.get(args.len() - 1)) {
        Ok(timeout) => timeout,
        Err(text) => return fail(reply, text),
    };
    let keys: Vec<&[u8]> = (1..args.len() - 1)
        .map(|position| args.get(position))
        .collect();
    let wait = (keys.as_slice(), Kind::ZSet, timeout);
    serve_or_block(
        session,
        reply,
        wait,
        NullReply::Array,
        |session, reply, retry| {
            let Some((key_index, entries)) = pops::pop_first_zset(session, &keys, max, 1, retry)?
            else {
                return Ok(Attempt::Nothing);
            };
            reply.array(3);
            reply.bulk(keys[key_index]);
            reply.bulk(entries[0].member());
            reply.double(entries[0].score());
            Ok(Attempt::Answered)
        },
    )
}

/// BZMPOP timeout numkeys key [key ...] <MIN | MAX> [COUNT count]:
/// `[key, [[member, score] ...]]`.
fn bzmpop(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let parsed = MultiPop::parse(args, 2, (b"MIN", b"MAX"))
        .and_then(|request| Ok((request, parse_timeout(args.get(1))?)));
    let (request, timeout) = match parsed {
        Ok(parsed) => parsed,
        Err(text) => return fail(reply, text),
    };
    let keys = request.keys(args);
    let max = !request.from_first;
    let wait = (keys.as_slice(), Kind::ZSet, timeout);
    serve_or_block(
        session,
        reply,
        wait,
        NullReply::Array,
        |session, reply, retry| {
            let popped = pops::pop_first_zset(session, &keys, max, request.count, retry)?;
            let Some((key_index, entries)) = popped else {
                return Ok(Attempt::Nothing);
            };
            pops::reply_zset_popped(reply, keys[key_index], &entries);
            Ok(Attempt::Answered)
        },
    )
}

/// CLIENT UNBLOCK client-id [TIMEOUT | ERROR]: 1 if that client was blocked and is now
/// unblocked (answered as by its timeout, or with the UNBLOCKED error), else 0.
pub fn client_unblock(session: &Session, args: &Args, reply: &mut Reply<'_>) {
    let reason = match args.len() {
        3 => Unblock::Timeout,
        _ => match args.get(3).to_ascii_uppercase().as_slice() {
            b"TIMEOUT" => Unblock::Timeout,
            b"ERROR" => Unblock::Error,
            _ => return reply.error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
        },
    };
    let Ok(client_id) = keys::parse_i64(args.get(2)) else {
        return reply.error(keys::NOT_AN_INTEGER);
    };
    let unblocked = u64::try_from(client_id)
        .is_ok_and(|client_id| session.state.blocked_clients.unblock(client_id, reason));
    reply.integer(i64::from(unblocked));
}

/// Why a waiter was woken other than by a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unblock {
    /// CLIENT UNBLOCK id [TIMEOUT]: answered as by its timeout.
    Timeout = 1,
    /// CLIENT UNBLOCK id ERROR: answered with [`UNBLOCKED`].
    Error = 2,
}

/// One blocked client.
#[derive(Debug)]
pub struct Waiter {
    client_id: u64,
    kind: Kind,
    /// Holds one wake-up at most (a permit), so wake-ups never queue up.
    wake: Notify,
    /// 0, or the [`Unblock`] that CLIENT UNBLOCK set (only once).
    unblocked: AtomicU8,
}

impl Waiter {
    /// Waits for the next wake-up (a write to one of its keys, its turn, or CLIENT UNBLOCK).
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Whether CLIENT UNBLOCK woke it, and how it is to answer.
    pub fn unblocked(&self) -> Option<Unblock> {
        match self.unblocked.load(Ordering::Acquire) {
            1 => Some(Unblock::Timeout),
            2 => Some(Unblock::Error),
            _ => None,
        }
    }
}

/// The waiters of one key.
struct KeyWaiters {
    /// Per [`Kind`], in arrival order.
    queues: [VecDeque<Arc<Waiter>>; KIND_COUNT],
    /// Calls the registry's wake-up on every write to the key's record.
    _watch: Watch,
}

impl KeyWaiters {
    fn is_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }

    /// Wakes the first waiter of each kind, and every stream reader.
    fn wake_heads(&self) {
        for queue in &self.queues[..Kind::Stream as usize] {
            if let Some(head) = queue.front() {
                head.wake.notify_one();
            }
        }
        for reader in &self.queues[Kind::Stream as usize] {
            reader.wake.notify_one();
        }
    }
}

/// The clients blocked now, by key and by client id (see the module docs).
#[derive(Default)]
pub struct BlockedClients {
    /// Waiters registered now: 0 spares a blocking command's first try the lock.
    blocked_count: AtomicUsize,
    by_key: Mutex<HashMap<Digest, KeyWaiters>>,
    by_client: Mutex<HashMap<u64, Arc<Waiter>>>,
}

impl std::fmt::Debug for BlockedClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockedClients")
            .field("blocked_count", &self.blocked_count)
            .finish_non_exhaustive()
    }
}

/// A client's place in the registry; dropping it takes the client out and passes its turn on.
pub struct Registration {
    registry: Arc<BlockedClients>,
    waiter: Arc<Waiter>,
    digests: Vec<Digest>,
}

impl Registration {
    /// The waiter, to wait on.
    pub fn waiter(&self) -> &Waiter {
        &self.waiter
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.unregister(&self.waiter, &self.digests);
    }
}

impl BlockedClients {
    /// How many clients are blocked now (INFO's `blocked_clients`).
    pub fn blocked_count(&self) -> usize {
        self.blocked_count.load(Ordering::Relaxed)
    }

    /// Registers client `client_id` as waiting on `request`'s keys of `namespace`, behind
    /// those already there. A client first in some queue is woken at once, to try again: a
    /// write between its first try and now would otherwise go unseen.
    pub fn register(
        self: &Arc<Self>,
        namespace: &Namespace,
        client_id: u64,
        request: &Request,
    ) -> Registration {
        let waiter = Arc::new(Waiter {
            client_id,
            kind: request.kind,
            wake: Notify::new(),
            unblocked: AtomicU8::new(0),
        });
        let mut first_somewhere = false;
        let mut by_key = self.by_key.lock();
        for digest in &request.digests {
            let key = by_key.entry(*digest).or_insert_with(|| KeyWaiters {
                queues: Default::default(),
                _watch: namespace.watch_waking(*digest, self.wake_for(*digest)),
            });
            let queue = &mut key.queues[request.kind as usize];
            first_somewhere |= queue.is_empty();
            queue.push_back(Arc::clone(&waiter));
        }
        drop(by_key);
        let previous = self.by_client.lock().insert(client_id, Arc::clone(&waiter));
        assert!(previous.is_none(), "a client blocks once at a time");
        self.blocked_count.fetch_add(1, Ordering::Relaxed);
        if first_somewhere {
            waiter.wake.notify_one();
        }
        Registration {
            registry: Arc::clone(self),
            waiter,
            digests: request.digests.clone(),
        }
    }

    /// Whether a client waits for a value of `kind` at any of `digests`.
    fn any_waiting(&self, kind: Kind, digests: &[Digest]) -> bool {
        if self.blocked_count.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let by_key = self.by_key.lock();
        digests.iter().any(|digest| {
            by_key
                .get(digest)
                .is_some_and(|key| !key.queues[kind as usize].is_empty())
        })
    }

    /// Unblocks client `client_id` if it is blocked; whether it was.
    pub fn unblock(&self, client_id: u64, reason: Unblock) -> bool {
        let Some(waiter) = self.by_client.lock().get(&client_id).cloned() else {
            return false;
        };
        let set =
            waiter
                .unblocked
                .compare_exchange(0, reason as u8, Ordering::AcqRel, Ordering::Acquire);
        waiter.wake.notify_one();
        set.is_ok()
    }

    /// Wakes every blocked client to look again (SWAPDB: the keys they wait on may hold values
    /// now, or be other records): each runs its command again, and waits where its keys are.
    pub fn wake_all(&self) {
        let waiters: Vec<Arc<Waiter>> = self.by_client.lock().values().cloned().collect();
        for waiter in waiters {
            waiter.wake.notify_one();
        }
    }

    /// The wake-up the engine calls on a write to `digest`.
    fn wake_for(self: &Arc<Self>, digest: Digest) -> engine::Wake {
        let registry = Arc::downgrade(self);
        Arc::new(move || {
            if let Some(registry) = registry.upgrade()
                && let Some(key) = registry.by_key.lock().get(&digest)
            {
                key.wake_heads();
            }
        })
    }

    fn unregister(&self, waiter: &Arc<Waiter>, digests: &[Digest]) {
        let mut emptied = Vec::new();
        let mut by_key = self.by_key.lock();
        for digest in digests {
            let Some(key) = by_key.get_mut(digest) else {
                continue;
            };
            let queue = &mut key.queues[waiter.kind as usize];
            let Some(position) = queue.iter().position(|w| Arc::ptr_eq(w, waiter)) else {
                continue;
            };
            queue.remove(position);
            if key.is_empty() {
                emptied.extend(by_key.remove(digest));
            } else if position == 0
                && let Some(next) = key.queues[waiter.kind as usize].front()
            {
                // Its turn passes on: the next may find what this one left (or was woken
                // for and did not take).
                next.wake.notify_one();
            }
        }
        drop(by_key);
        // The watches go after the lock (the engine's watch lock comes after the registry's).
        drop(emptied);
        self.by_client.lock().remove(&waiter.client_id);
        self.blocked_count.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_as_redis_parses_them() {
        assert_eq!(parse_timeout(b"0"), Ok(None));
        assert_eq!(parse_timeout(b"0.2"), Ok(Some(Duration::from_millis(200))));
        assert_eq!(parse_timeout(b"1"), Ok(Some(Duration::from_secs(1))));
        // Rounded up to whole milliseconds.
        assert_eq!(parse_timeout(b"0.0001"), Ok(Some(Duration::from_millis(1))));
        assert_eq!(parse_timeout(b"-1"), Err(TIMEOUT_NEGATIVE));
        assert_eq!(parse_timeout(b"-0.0001"), Ok(None));
        assert_eq!(parse_timeout(b"abc"), Err(TIMEOUT_NOT_A_FLOAT));
        assert_eq!(parse_timeout(b""), Err(TIMEOUT_NOT_A_FLOAT));
        assert_eq!(parse_timeout(b"inf"), Err(TIMEOUT_OUT_OF_RANGE));
        assert_eq!(parse_timeout(b"1e300"), Err(TIMEOUT_OUT_OF_RANGE));
    }
}
