//! Whole-namespace isolation for multi-key transactions (Redis's MULTI/EXEC and atomic MSET),
//! and the watches that WATCH sets on keys.
//!
//! [`Gate`]: every command takes one stripe of the gate shared before its partition lock; an
//! exclusive holder takes every stripe, so no other command of the namespace runs until it is
//! done. Stripes are per thread (chosen once per thread), so the shared side costs an
//! uncontended lock on a cache line the thread mostly has to itself.
//!
//! [`WatchRegistry`]: a write marks every watch on its digest dirty, under the partition lock
//! and inside the gate, so an exclusive holder that finds a watch clean knows no write touched
//! the key since it was watched. A watch may also carry a wake-up ([`Wake`]), called after the
//! write, still under the partition lock (so whoever it wakes reads the record only once the
//! write is done): Redis's blocked clients wait on those. A wake-up must be cheap and must not
//! take a partition lock or the registry's lock (it is called with neither of the registry's).
//!
//! A command that finds the gate held waits [`QUICK_WAIT`] (long enough for MSET or a plain
//! EXEC); past that the holder is a long one (a Redis script), and the rest of the wait goes
//! through the [`WaitHook`] the server installs ([`set_wait_hook`]), which lets an async
//! runtime's worker hand its other tasks to another thread instead of stalling them.
//!
//! Invariants:
//! - Lock order: gate, then partition locks. An exclusive holder takes the stripes in index
//!   order; a thread holding the gate exclusively passes through the shared side (it already
//!   excludes everyone), so the commands it runs do not deadlock on it.
//! - `active` equals the number of live [`Watch`] handles; when it is 0 a write skips the
//!   registry entirely.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use model::Digest;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Stripes of the gate; threads beyond this share stripes, which only costs contention.
const STRIPE_COUNT: usize = 32;

/// How long a command waits for the gate before the rest of its wait goes through the
/// [`WaitHook`].
const QUICK_WAIT: Duration = Duration::from_millis(1);

/// Runs a wait that may be long (its argument blocks until the gate is free): the server's
/// lets an async runtime's worker give its other tasks to another thread meanwhile.
pub type WaitHook = fn(&mut dyn FnMut());

static WAIT_HOOK: OnceLock<WaitHook> = OnceLock::new();

/// Installs the process's [`WaitHook`]; the first call wins. Without one, a long wait simply
/// blocks its thread.
pub fn set_wait_hook(hook: WaitHook) {
    let _ = WAIT_HOOK.set(hook);
}

thread_local! {
    /// This thread's stripe.
    static STRIPE: usize = next_stripe();
    /// Whether this thread holds some gate exclusively.
    static HOLDS_EXCLUSIVE: Cell<bool> = const { Cell::new(false) };
}

fn next_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed) % STRIPE_COUNT
}

/// A lock on its own cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(RwLock<()>);

/// The namespace's gate (see the module docs).
#[derive(Debug)]
pub(crate) struct Gate {
    stripes: Box<[Stripe]>,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate {
            stripes: (0..STRIPE_COUNT).map(|_| Stripe::default()).collect(),
        }
    }
}

/// Held by a command for its duration; `None` inside an exclusive section.
pub(crate) type SharedGuard<'a> = Option<RwLockReadGuard<'a, ()>>;

impl Gate {
    /// Enters as one command among many.
    pub(crate) fn shared(&self) -> SharedGuard<'_> {
        if HOLDS_EXCLUSIVE.with(Cell::get) {
            return None;
        }
        let stripe = &self.stripes[STRIPE.with(|stripe| *stripe)].0;
        if let Some(guard) = stripe.try_read_for(QUICK_WAIT) {
            return Some(guard);
        }
        let mut guard = None;
        let mut wait = || guard = Some(stripe.read());
        match WAIT_HOOK.get() {
            Some(hook) => hook(&mut wait),
            None => wait(),
        }
        Some(guard.expect("a wait hook runs the wait it is given"))
    }

    /// Runs `run` while no other command of the namespace runs.
    pub(crate) fn exclusive<T>(&self, run: impl FnOnce() -> T) -> T {
        if HOLDS_EXCLUSIVE.with(Cell::get) {
            return run();
        }
        // An array, not a Vec: no allocation per exclusive section (a script's run).
        let guards: [RwLockWriteGuard<'_, ()>; STRIPE_COUNT] =
            std::array::from_fn(|index| self.stripes[index].0.write());
        HOLDS_EXCLUSIVE.with(|holds| holds.set(true));
        let reset = ResetOnDrop;
        let result = run();
        drop(reset);
        drop(guards);
        result
    }
}

/// Clears the thread's exclusive mark, also when `run` panics.
struct ResetOnDrop;

impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        HOLDS_EXCLUSIVE.with(|holds| holds.set(false));
    }
}

/// Called when a write touches a watched digest (see the module docs).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// Watches by digest (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct WatchRegistry {
    active: AtomicUsize,
    flags: Mutex<HashMap<Digest, Vec<Arc<Flag>>>>,
}

/// One watch's state in the registry.
struct Flag {
    dirty: AtomicBool,
    wake: Option<Wake>,
}

impl std::fmt::Debug for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flag")
            .field("dirty", &self.dirty)
            .field("wakes", &self.wake.is_some())
            .finish()
    }
}

/// A watch on one digest: dirty once a write touched it. Dropping it unregisters it.
#[derive(Debug)]
pub struct Watch {
    registry: Arc<WatchRegistry>,
    digest: Digest,
    dirty: Arc<Flag>,
}

impl Watch {
    /// Whether a write touched the digest since the watch began.
    pub fn is_dirty(&self) -> bool {
        self.dirty.dirty.load(Ordering::Acquire)
    }

    /// The digest watched.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut flags = self.registry.flags.lock();
        if let Some(list) = flags.get_mut(&self.digest) {
            list.retain(|flag| !Arc::ptr_eq(flag, &self.dirty));
            if list.is_empty() {
                flags.remove(&self.digest);
            }
        }
        self.registry.active.fetch_sub(1, Ordering::Release);
    }
}

impl Flag {
    /// Marks it dirty and collects its wake-up.
    fn touch(&self, wakes: &mut Vec<Wake>) {
        self.dirty.store(true, Ordering::Release);
        if let Some(wake) = &self.wake {
            wakes.push(Arc::clone(wake));
        }
    }
}

impl WatchRegistry {
    /// Starts watching `digest`; `wake`, if any, is called on every write that touches it.
    pub(crate) fn watch(self: &Arc<Self>, digest: Digest, wake: Option<Wake>) -> Watch {
        let dirty = Arc::new(Flag {
            dirty: AtomicBool::new(false),
            wake,
        });
        let mut flags = self.flags.lock();
        flags.entry(digest).or_default().push(Arc::clone(&dirty));
        self.active.fetch_add(1, Ordering::Release);
        Watch {
            registry: Arc::clone(self),
            digest,
            dirty,
        }
    }

    /// A write changed (or deleted) the record at `digest`.
    pub(crate) fn touched(&self, digest: &Digest) {
        if self.active.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut wakes = Vec::new();
        if let Some(list) = self.flags.lock().get(digest) {
            list.iter().for_each(|flag| flag.touch(&mut wakes));
        }
        // Called without the registry's lock: a wake-up may drop watches.
        wakes.iter().for_each(|wake| wake());
    }

    /// The digests watched now (none without a live watch).
    pub(crate) fn watched(&self) -> Vec<Digest> {
        if self.active.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        self.flags.lock().keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(byte: u8) -> Digest {
        Digest([byte; 20])
    }

    #[test]
    fn a_write_dirties_only_the_watches_on_its_digest() {
        let registry = Arc::new(WatchRegistry::default());
        let first = registry.watch(digest(1), None);
        let second = registry.watch(digest(2), None);
        registry.touched(&digest(1));
        assert!(first.is_dirty());
        assert!(!second.is_dirty());
        let mut watched = registry.watched();
        watched.sort_by_key(|digest| digest.0);
        assert_eq!(watched, vec![digest(1), digest(2)]);
    }

    #[test]
    fn a_write_calls_the_wake_ups_on_its_digest() {
        let registry = Arc::new(WatchRegistry::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let wake: Wake = Arc::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
        });
        let waking = registry.watch(digest(3), Some(wake));
        registry.touched(&digest(4));
        assert_eq!(calls.load(Ordering::Relaxed), 0);
        registry.touched(&digest(3));
        registry.touched(&digest(3));
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        assert!(waking.is_dirty());
        drop(waking);
        registry.touched(&digest(3));
        assert_eq!(calls.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn dropping_every_watch_empties_the_registry() {
        let registry = Arc::new(WatchRegistry::default());
        let watches: Vec<Watch> = (0..3).map(|_| registry.watch(digest(7), None)).collect();
        assert_eq!(registry.active.load(Ordering::Relaxed), 3);
        drop(watches);
        assert_eq!(registry.active.load(Ordering::Relaxed), 0);
        assert!(registry.flags.lock().is_empty());
    }

    #[test]
    fn the_exclusive_holder_passes_through_the_shared_side() {
        let gate = Gate::default();
        let inner = gate.exclusive(|| gate.shared().is_none());
        assert!(inner, "nested commands run inside the exclusive section");
        assert!(
            gate.shared().is_some(),
            "outside it, commands take a stripe"
        );
    }

    #[test]
    fn a_long_wait_for_the_gate_goes_through_the_wait_hook() {
        static HOOKED: AtomicUsize = AtomicUsize::new(0);
        set_wait_hook(|wait| {
            HOOKED.fetch_add(1, Ordering::Relaxed);
            wait();
        });
        let gate = Arc::new(Gate::default());
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let holder = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || {
                gate.exclusive(|| {
                    entered_tx.send(()).expect("test thread waits");
                    std::thread::sleep(QUICK_WAIT * 20);
                });
            })
        };
        entered_rx.recv().expect("holder entered");
        let before = HOOKED.load(Ordering::Relaxed);
        assert!(
            gate.shared().is_some(),
            "the waiter entered once the holder left"
        );
        assert_eq!(HOOKED.load(Ordering::Relaxed), before + 1);
        holder.join().expect("holder thread");
        assert!(gate.shared().is_some());
        assert_eq!(
            HOOKED.load(Ordering::Relaxed),
            before + 1,
            "an open gate is entered without the hook"
        );
    }

    #[test]
    fn exclusive_waits_for_commands_in_flight() {
        let gate = Arc::new(Gate::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let shared = gate.shared();
        let thread = {
            let (gate, order) = (Arc::clone(&gate), Arc::clone(&order));
            std::thread::spawn(move || gate.exclusive(|| order.lock().push("exclusive")))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        order.lock().push("shared done");
        drop(shared);
        thread.join().expect("exclusive thread");
        assert_eq!(*order.lock(), vec!["shared done", "exclusive"]);
    }
}
