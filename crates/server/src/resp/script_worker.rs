//! Where a script runs: on the runtime worker that read its command, as any command. Most
//! scripts run for microseconds, and sending each to another thread cost more than running
//! it (a thread hand-over and a wake-up per trip, measured at most of the server's CPU per
//! EVALSHA). One that runs on past [`FIRST_RELEASE`] gives the worker's other tasks to a
//! fresh thread and goes on where it is, so the connections that worker served are served
//! meanwhile: SCRIPT KILL among them, and BUSY replies past `busy-reply-threshold`.
//!
//! The hand-over is tokio's `block_in_place`, called from the script's hook (its
//! [`Checkpoint`]): the worker's core (its queue of tasks, its turn at the I/O driver) moves
//! to a new thread, and this thread, with the script on its stack, goes on without one. The
//! core passes when the new thread takes it; `block_in_place` takes it back if it is still
//! there when its closure returns, so the closure waits [`HAND_OVER_WAIT`] for the new
//! thread, and in case that was not enough the hand-over is made again each time the run's
//! time doubles (on a thread that has none left, it only waits).
//!
//! The same hand-over serves a command of either protocol that finds a namespace's gate held
//! by a script ([`install_gate_wait_hook`]): its worker's other tasks go on on another thread
//! while it waits, so even requests that reach the gate cannot wedge the runtime behind a
//! runaway script (SCRIPT KILL must still be served).
//!
//! Invariants:
//! - A hand-over happens only on a worker of a multi-threaded runtime ([`on_runtime_worker`]);
//!   elsewhere (the long-request pool, a single-threaded runtime) the checkpoint is the kill
//!   switch alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, RuntimeFlavor};
use udf::redis::Checkpoint;

/// How long a script holds its runtime worker before it gives the worker's other tasks away.
const FIRST_RELEASE: Duration = Duration::from_millis(1);

/// How long the hand-over waits for the new thread to take the worker's core.
const HAND_OVER_WAIT: Duration = Duration::from_millis(1);

/// Whether this thread is a worker of a multi-threaded runtime, where a long script can give
/// the worker's tasks away.
pub(super) fn on_runtime_worker() -> bool {
    Handle::try_current().is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Makes a long wait at a namespace's gate (behind a script) on a runtime worker hand the
/// worker's other tasks to another thread (see the module docs).
pub(crate) fn install_gate_wait_hook() {
    engine::set_wait_hook(wait_off_the_worker);
}

pub(super) fn wait_off_the_worker(wait: &mut dyn FnMut()) {
    if on_runtime_worker() {
        tokio::task::block_in_place(wait);
    } else {
        wait();
    }
}

/// The checkpoint of a run that started at `started`: `killed` is its kill switch; `on_worker`
/// when it runs on a runtime worker (see the module docs).
pub(super) fn checkpoint(
    killed: &Arc<AtomicBool>,
    started: Instant,
    on_worker: bool,
) -> Checkpoint {
    let killed = Arc::clone(killed);
    if !on_worker {
        return Arc::new(move || killed.load(Ordering::Relaxed));
    }
    let release = WorkerRelease {
        started,
        next_after_us: AtomicU64::new(duration_us(FIRST_RELEASE)),
    };
    Arc::new(move || {
        release.at_checkpoint();
        killed.load(Ordering::Relaxed)
    })
}

/// When a run on a runtime worker next hands the worker's tasks away.
struct WorkerRelease {
    started: Instant,
    /// Microseconds into the run.
    next_after_us: AtomicU64,
}

impl WorkerRelease {
    fn at_checkpoint(&self) {
        let ran_us = duration_us(self.started.elapsed());
        let next_after_us = self.next_after_us.load(Ordering::Relaxed);
        if ran_us < next_after_us {
            return;
        }
        self.next_after_us
            .store(ran_us.saturating_mul(2), Ordering::Relaxed);
        tokio::task::block_in_place(|| std::thread::sleep(HAND_OVER_WAIT));
    }
}

fn duration_us(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The story: a script spinning on the only worker of a runtime would starve every other
    /// task of that runtime; once it has run past the first release, they run again.
    #[test]
    fn a_long_run_on_the_only_worker_lets_other_tasks_run() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let spinning = Arc::new(AtomicBool::new(false));
            let other_ran = Arc::new(AtomicBool::new(false));
            let spinner = {
                let (spinning, other_ran) = (Arc::clone(&spinning), Arc::clone(&other_ran));
                tokio::spawn(async move {
                    assert!(on_runtime_worker());
                    spinning.store(true, Ordering::Relaxed);
                    let never_killed = Arc::new(AtomicBool::new(false));
                    let checkpoint = checkpoint(&never_killed, Instant::now(), true);
                    let deadline = Instant::now() + Duration::from_secs(10);
                    // The script's loop: a checkpoint now and then, until the other task ran.
                    while !other_ran.load(Ordering::Relaxed) {
                        assert!(Instant::now() < deadline, "the other task never ran");
                        assert!(!checkpoint());
                    }
                })
            };
            // This future runs on the thread that called `block_on`, not on the worker.
            while !spinning.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let other = {
                let other_ran = Arc::clone(&other_ran);
                tokio::spawn(async move { other_ran.store(true, Ordering::Relaxed) })
            };
            spinner.await.expect("the spinner ends");
            other.await.expect("the other task ends");
        });
    }

    #[test]
    fn the_checkpoint_answers_the_kill_switch() {
        let killed = Arc::new(AtomicBool::new(false));
        let checkpoint = checkpoint(&killed, Instant::now(), false);
        assert!(!checkpoint());
        killed.store(true, Ordering::Relaxed);
        assert!(checkpoint());
        assert!(!on_runtime_worker());
    }
}
