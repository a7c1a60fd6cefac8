//! The live Redis connections, as CLIENT LIST, CLIENT KILL and CLIENT PAUSE see them.
//!
//! Each connection registers a [`ClientEntry`] when it starts and leaves with its guard. CLIENT
//! KILL closes another connection through that connection's memory account
//! (`client_memory::Closer`): the mechanism by which a connection learns that all clients hold
//! too much, so it closes at its next safe point, or at once while it waits for its client.
//!
//! Invariants:
//! - The registry holds exactly the live Redis connections of this node; the lock is taken
//!   when a connection opens or closes and by CLIENT KILL and LIST, never per command.
//! - An entry's `shown` is written only by its own connection (after each step of commands,
//!   not per command) and read by CLIENT LIST: its lock is uncontended but for a listing.
//! - A pause ends at its deadline without anyone lifting it: a command checks it with one
//!   atomic load while no pause is set, and a paused command waits, it never fails.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use wire_resp::Args;

use crate::client_memory::Closer;

/// Every live Redis connection, and the pause CLIENT PAUSE set.
#[derive(Debug, Default)]
pub struct Clients {
    by_id: Mutex<HashMap<u64, Arc<ClientEntry>>>,
    pause: Pause,
}

/// What other connections may know of one connection.
#[derive(Debug)]
pub struct ClientEntry {
    pub id: u64,
    /// The client's `ip:port`, as CLIENT LIST's `addr`.
    pub peer_address: String,
    /// This server's `ip:port` the client reached, as CLIENT LIST's `laddr`.
    pub local_address: String,
    pub connected_at: Instant,
    /// Whether it subscribes to anything (CLIENT KILL TYPE pubsub), kept by the connection.
    pub subscribed: AtomicBool,
    /// What CLIENT LIST shows of it, as the connection last published it (after each step of
    /// commands, and before a CLIENT LIST or INFO of its own).
    pub shown: Mutex<Shown>,
    closer: Closer,
}

/// A connection's state as CLIENT LIST and CLIENT INFO show it.
#[derive(Clone, Debug, Default)]
pub struct Shown {
    pub name: Option<Vec<u8>>,
    pub database: usize,
    pub protocol: u8,
    /// Channels, patterns and shard channels subscribed to.
    pub subscriptions: (usize, usize, usize),
    /// Commands queued since MULTI; `None` outside MULTI.
    pub queued: Option<usize>,
    pub blocked: bool,
    /// In MONITOR mode.
    pub monitoring: bool,
    pub no_evict: bool,
    pub no_touch: bool,
    /// The input buffer: bytes unparsed, and room left before it grows.
    pub query_buffer: (usize, usize),
    /// Reply bytes not yet sent, and the memory the reply buffers hold.
    pub output: (usize, usize),
    /// The last command run (`container|subcommand` for a subcommand), and when.
    pub last_command: Option<(&'static str, std::time::Instant)>,
}

/// Which clients CLIENT KILL closes: every criterion given must hold.
#[derive(Debug, Default)]
pub struct KillFilter {
    pub id: Option<u64>,
    pub peer_address: Option<Vec<u8>>,
    pub local_address: Option<Vec<u8>>,
    /// `Some(true)`: pubsub clients only; `Some(false)`: normal ones only.
    pub pubsub: Option<bool>,
    /// A type no Osprey client has (master, replica): matches none.
    pub matches_none: bool,
    pub older_than: Option<Duration>,
    /// The calling connection, unless SKIPME no.
    pub skip_id: Option<u64>,
}

/// Which commands a pause holds back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseMode {
    /// Writes and commands that may write (EVAL, PUBLISH, EXEC of writes).
    Write = 1,
    All = 2,
}

#[derive(Debug, Default)]
struct Pause {
    /// 0: none; else a [`PauseMode`] as u8 (read per command).
    mode: AtomicU8,
    deadline: Mutex<Option<Instant>>,
    lifted: Notify,
}

/// Unregisters a connection when dropped.
#[derive(Debug)]
pub struct Registration {
    clients: Arc<crate::state::ServerState>,
    pub entry: Arc<ClientEntry>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.clients
            .resp_clients
            .by_id
            .lock()
            .remove(&self.entry.id);
    }
}

impl ClientEntry {
    /// Its CLIENT LIST line (newline-terminated), with Redis 7.0's fields in Redis's order.
    /// Fields Osprey has no counterpart for answer what a Redis client of the same kind would
    /// (`fd` is not shown by Osprey: -1; `user` is `default`, there are no ACLs yet).
    pub fn line(&self) -> String {
        let shown = self.shown.lock().clone();
        let now = std::time::Instant::now();
        let name = shown
            .name
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        let idle_s = shown
            .last_command
            .map_or(self.connected_at.elapsed(), |(_, at)| {
                now.duration_since(at)
            })
            .as_secs();
        let (sub, psub, ssub) = shown.subscriptions;
        let multi = shown.queued.map_or(-1, |queued| queued as i64);
        let (qbuf, qbuf_free) = shown.query_buffer;
        let (obl, omem) = shown.output;
        let command = shown.last_command.map_or("NULL", |(name, _)| name);
        format!(
            "id={} addr={} laddr={} fd=-1 name={name} age={} idle={idle_s} flags={} db={} \
             sub={sub} psub={psub} ssub={ssub} multi={multi} qbuf={qbuf} qbuf-free={qbuf_free} \
             argv-mem=0 multi-mem=0 rbs={} rbp={} obl={obl} oll=0 omem={omem} tot-mem={} \
             events=r cmd={command} user=default redir=-1 resp={}\n",
            self.id,
            self.peer_address,
            self.local_address,
            self.connected_at.elapsed().as_secs(),
            flags(&shown, self.subscribed.load(Ordering::Relaxed)),
            shown.database,
            qbuf + qbuf_free,
            qbuf + qbuf_free,
            qbuf + qbuf_free + omem,
            shown.protocol,
        )
    }
}

/// CLIENT LIST's `flags`, in Redis's order: O (monitor), P (subscribed), x (in MULTI), b
/// (blocked), e (no-evict), T (no-touch); N for none.
fn flags(shown: &Shown, subscribed: bool) -> String {
    let flags: String = [
        (shown.monitoring, 'O'),
        (subscribed, 'P'),
        (shown.queued.is_some(), 'x'),
        (shown.blocked, 'b'),
        (shown.no_evict, 'e'),
        (shown.no_touch, 'T'),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, flag)| *flag)
    .collect();
    if flags.is_empty() {
        "N".to_owned()
    } else {
        flags
    }
}

impl Clients {
    /// Registers a new connection of `state`; it leaves when the registration drops.
    pub fn register(
        state: &Arc<crate::state::ServerState>,
        id: u64,
        peer_address: String,
        local_address: String,
        closer: Closer,
    ) -> Registration {
        let entry = Arc::new(ClientEntry {
            id,
            peer_address,
            local_address,
            connected_at: Instant::now(),
            subscribed: AtomicBool::new(false),
            shown: Mutex::new(Shown {
                protocol: 2,
                ..Shown::default()
            }),
            closer,
        });
        state
            .resp_clients
            .by_id
            .lock()
            .insert(id, Arc::clone(&entry));
        Registration {
            clients: Arc::clone(state),
            entry,
        }
    }

    /// CLIENT LIST's lines of every connection (or those of `ids`; with `pubsub`, those that
    /// subscribe, or those that do not), by id.
    pub fn list(&self, ids: Option<&[u64]>, pubsub: Option<bool>) -> String {
        let mut entries: Vec<Arc<ClientEntry>> = {
            let by_id = self.by_id.lock();
            by_id
                .values()
                .filter(|entry| ids.is_none_or(|ids| ids.contains(&entry.id)))
                .filter(|entry| {
                    pubsub.is_none_or(|pubsub| entry.subscribed.load(Ordering::Relaxed) == pubsub)
                })
                .cloned()
                .collect()
        };
        entries.sort_unstable_by_key(|entry| entry.id);
        entries.iter().map(|entry| entry.line()).collect()
    }

    /// Closes the connections `filter` matches; returns how many, and whether the caller
    /// (`caller_id`) is one of them (it closes after its reply).
    pub fn kill(&self, filter: &KillFilter, caller_id: u64) -> (usize, bool) {
        let by_id = self.by_id.lock();
        let mut killed = 0;
        let mut caller_killed = false;
        for entry in by_id.values().filter(|entry| filter.matches(entry)) {
            if entry.id == caller_id {
                caller_killed = true;
            } else {
                entry.closer.close();
            }
            killed += 1;
        }
        (killed, caller_killed)
    }

    /// Pauses the commands `mode` names until `deadline`; a later pause extends an earlier one
    /// and ALL wins over WRITE while both last, as in Redis.
    pub fn pause(&self, mode: PauseMode, deadline: Instant) {
        let mut current = self.pause.deadline.lock();
        let mode_now = self.pause.mode.load(Ordering::Relaxed);
        let longer = current.is_none_or(|until| until < deadline);
        if longer {
            *current = Some(deadline);
        }
        self.pause
            .mode
            .store(mode_now.max(mode as u8), Ordering::Relaxed);
    }

    /// Ends the pause: every waiting command runs.
    pub fn unpause(&self) {
        *self.pause.deadline.lock() = None;
        self.pause.mode.store(0, Ordering::Relaxed);
        self.pause.lifted.notify_waiters();
    }

    /// Whether the command in `args` must wait for the pause to end (`pending` holds the
    /// commands an EXEC would run).
    pub fn holds(&self, args: &Args, pending: Option<&[Args]>) -> bool {
        let mode = self.pause.mode.load(Ordering::Relaxed);
        if mode == 0 {
            return false;
        }
        if self
            .pause
            .deadline
            .lock()
            .is_none_or(|until| until <= Instant::now())
        {
            self.unpause();
            return false;
        }
        if mode == PauseMode::All as u8 {
            return true;
        }
        let name = args.get(0).to_ascii_lowercase();
        may_write(&name)
            || (name == b"exec"
                && pending.is_some_and(|queued| {
                    queued
                        .iter()
                        .any(|args| may_write(&args.get(0).to_ascii_lowercase()))
                }))
    }

    /// Completes when the pause ends (lifted, or its deadline passed).
    pub async fn pause_lifted(&self) {
        let lifted = self.pause.lifted.notified();
        tokio::pin!(lifted);
        lifted.as_mut().enable();
        let Some(deadline) = *self.pause.deadline.lock() else {
            return;
        };
        tokio::select! {
            () = lifted => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

impl KillFilter {
    fn matches(&self, entry: &ClientEntry) -> bool {
        !self.matches_none
            && self.id.is_none_or(|id| id == entry.id)
            && self
                .peer_address
                .as_deref()
                .is_none_or(|address| address == entry.peer_address.as_bytes())
            && self
                .local_address
                .as_deref()
                .is_none_or(|address| address == entry.local_address.as_bytes())
            && self
                .pubsub
                .is_none_or(|pubsub| pubsub == entry.subscribed.load(Ordering::Relaxed))
            && self
                .older_than
                .is_none_or(|age| entry.connected_at.elapsed() > age)
            && self.skip_id != Some(entry.id)
    }
}

/// Commands Redis flags `write` or `may-replicate`: those a WRITE pause holds back.
fn may_write(name: &[u8]) -> bool {
    matches!(name, b"eval" | b"evalsha" | b"fcall" | b"function")
        || super::script_host::is_write(name)
}
