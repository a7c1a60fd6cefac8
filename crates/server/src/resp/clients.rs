//! The live Redis connections, as CLIENT KILL and CLIENT PAUSE see them.
//!
//! Each connection registers a [`ClientEntry`] when it starts and leaves with its guard. CLIENT
//! KILL closes another connection through that connection's memory account
//! (`client_memory::Closer`): the mechanism by which a connection learns that all clients hold
//! too much, so it closes at its next safe point, or at once while it waits for its client.
//!
//! Invariants:
//! - The registry holds exactly the live Redis connections of this node; the lock is taken
//!   when a connection opens or closes and by CLIENT KILL, never per command.
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
    closer: Closer,
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
        || super::scripting::is_write(name)
}
