//! Per-state limit bookkeeping shared by the instruction hook, the
//! container functions and the `pcall` wrappers.
//!
//! Lua's own allocations are bounded by `Lua::set_memory_limit`; the Rust
//! heap behind `list`, `map` and `bytes` is not, so container growth is
//! charged here against the same per-call budget (growth only: freed
//! elements are not credited back within a call, which errs on the safe
//! side). Once a call is aborted (time or memory), `aborted()` stays true
//! until the next call, so the Lua `pcall`/`xpcall` wrappers re-raise
//! instead of letting a script swallow the abort.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use mlua::Lua;

/// No abort.
const NONE: u8 = 0;
/// Aborted for running past the time limit.
pub(crate) const TIMEOUT: u8 = 1;
/// Aborted for going past the memory limit.
pub(crate) const MEMORY: u8 = 2;

/// Approximate heap cost of one container slot.
pub(crate) const SLOT_COST: usize = 48;

/// The Lua message for memory exhaustion.
pub(crate) const OOM_MESSAGE: &str = "not enough memory";

/// Limit state of one Lua state, kept as its app data.
#[derive(Default)]
pub(crate) struct Guard {
    abort: AtomicU8,
    used: AtomicUsize,
    limit: AtomicUsize,
}

impl Guard {
    /// Starts a call: clears the abort flag and the container budget.
    pub(crate) fn reset(&self, limit: usize) {
        self.abort.store(NONE, Ordering::Relaxed);
        self.used.store(0, Ordering::Relaxed);
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Marks the current call aborted with `why` (first reason wins).
    pub(crate) fn abort(&self, why: u8) {
        let _ = self
            .abort
            .compare_exchange(NONE, why, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Why the current call was aborted, if it was (0 when not).
    pub(crate) fn aborted(&self) -> u8 {
        self.abort.load(Ordering::Relaxed)
    }
}

/// Charges `bytes` of container growth to the current call; past the
/// budget the call is aborted with a memory error.
pub(crate) fn charge(lua: &Lua, bytes: usize) -> mlua::Result<()> {
    let Some(guard) = lua.app_data_ref::<Guard>() else {
        return Ok(());
    };
    let limit = guard.limit.load(Ordering::Relaxed);
    let used = guard.used.fetch_add(bytes, Ordering::Relaxed);
    if limit != 0 && used.saturating_add(bytes) > limit {
        guard.abort(MEMORY);
        return Err(mlua::Error::MemoryError(OOM_MESSAGE.to_owned()));
    }
    Ok(())
}

/// Whether the current call is aborted (for the `pcall` wrappers).
pub(crate) fn is_aborted(lua: &Lua) -> bool {
    lua.app_data_ref::<Guard>()
        .is_some_and(|g| g.aborted() != NONE)
}
