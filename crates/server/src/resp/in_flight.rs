//! Requests in flight, so that a script waits for them before it takes the Redis namespace.
//!
//! A request checks whether a script runs (and waits on the runtime, or gets BUSY) before it
//! reaches the namespace's gate. Between that check and the gate a script could start and
//! take the gate: the request, past its check, would then wait at the gate until the script
//! ended, holding its thread and never answered BUSY (a runaway script: never answered).
//! So a request enters here before its check and leaves when it is done, and a script, once
//! registered, waits for the requests that entered before it to leave before it takes the
//! gate: either the request saw the script, or the script waits for the request.
//!
//! Invariants:
//! - The Dekker pair: a request increments its counter and then loads the script flag; a
//!   script stores the flag and then loads the counters; all four are `SeqCst`, so at least
//!   one of the two sees the other.
//! - A thread is in at most once (`HERE` is 0 or 1): a request inside another (a script's
//!   calls, a step's commands) does not enter again, and a script does not wait for its own
//!   thread.
//! - A thread that waits for a script's turn while in ([`InFlight::away`]) is out meanwhile,
//!   or the script would wait for it as it waits for the script.
//! - An [`Entered`] leaves on the thread that entered (it is not `Send`).

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counters; threads beyond this share one, which costs only contention.
const STRIPE_COUNT: usize = 32;

/// How long a script's wait for the requests in flight spins and yields before it gives its
/// runtime worker's other tasks to another thread (a request in flight is mostly one step of
/// a pipeline, microseconds).
const QUICK_WAIT: Duration = Duration::from_millis(1);

thread_local! {
    /// How many times this thread is in: 0 or 1.
    static HERE: Cell<usize> = const { Cell::new(0) };
    /// This thread's counter.
    static STRIPE: usize = next_stripe();
}

fn next_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed) % STRIPE_COUNT
}

/// A counter on its own cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(AtomicUsize);

/// The requests in flight (see the module docs).
#[derive(Debug)]
pub struct InFlight {
    stripes: Box<[Stripe]>,
}

impl Default for InFlight {
    fn default() -> InFlight {
        InFlight {
            stripes: (0..STRIPE_COUNT).map(|_| Stripe::default()).collect(),
        }
    }
}

/// This thread's entry; it leaves when dropped.
#[must_use = "the request is in only while this lives"]
#[derive(Debug)]
pub struct Entered<'a> {
    in_flight: &'a InFlight,
    /// Not `Send`: it leaves on the thread that entered.
    _thread: PhantomData<*const ()>,
}

impl InFlight {
    /// Enters this thread, unless it is in already (then `None`: the outer entry covers it).
    /// The caller checks for a script after this.
    pub fn enter(&self) -> Option<Entered<'_>> {
        if HERE.with(Cell::get) > 0 {
            return None;
        }
        self.add_here();
        Some(Entered {
            in_flight: self,
            _thread: PhantomData,
        })
    }

    /// Whether this thread is in (then a request inside needs no entry of its own).
    pub fn is_here() -> bool {
        HERE.with(Cell::get) > 0
    }

    /// Runs `wait` with this thread out (if it was in): a wait for a script's turn.
    pub(super) fn away<T>(&self, wait: impl FnOnce() -> T) -> T {
        if HERE.with(Cell::get) == 0 {
            return wait();
        }
        self.remove_here();
        let waited = wait();
        self.add_here();
        waited
    }

    /// Waits until no thread but this one is in: called by a script registered as running,
    /// before it takes the namespace. A long wait (a long request on the pool) goes through
    /// `wait_off_worker`, which lets a runtime worker's other tasks go on meanwhile.
    pub(super) fn wait_for_others(&self, wait_off_worker: fn(&mut dyn FnMut())) {
        let started = Instant::now();
        while self.others() > 0 {
            if started.elapsed() >= QUICK_WAIT {
                wait_off_worker(&mut || {
                    while self.others() > 0 {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                });
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Threads in, other than this one.
    fn others(&self) -> usize {
        let total: usize = self
            .stripes
            .iter()
            .map(|stripe| stripe.0.load(Ordering::SeqCst))
            .sum();
        let here = HERE.with(Cell::get);
        debug_assert!(total >= here, "this thread is counted where it entered");
        total - here
    }

    fn stripe(&self) -> &AtomicUsize {
        &self.stripes[STRIPE.with(|stripe| *stripe)].0
    }

    fn add_here(&self) {
        self.stripe().fetch_add(1, Ordering::SeqCst);
        HERE.with(|here| here.set(here.get() + 1));
    }

    fn remove_here(&self) {
        HERE.with(|here| here.set(here.get() - 1));
        self.stripe().fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.in_flight.remove_here();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Barrier};

    fn plain_wait(wait: &mut dyn FnMut()) {
        wait();
    }

    /// The story: a request passed its check for a script and had not yet reached the gate
    /// when a script started; the script must wait for it, not take the gate in front of it.
    #[test]
    fn a_script_waits_for_the_request_that_entered_before_it() {
        let in_flight = Arc::new(InFlight::default());
        let entered = Arc::new(Barrier::new(2));
        let left = Arc::new(AtomicBool::new(false));
        let request = {
            let (in_flight, entered, left) = (
                Arc::clone(&in_flight),
                Arc::clone(&entered),
                Arc::clone(&left),
            );
            std::thread::spawn(move || {
                let entry = in_flight.enter().expect("a first entry");
                entered.wait();
                std::thread::sleep(Duration::from_millis(100));
                left.store(true, Ordering::SeqCst);
                drop(entry);
            })
        };
        entered.wait();
        in_flight.wait_for_others(plain_wait);
        assert!(
            left.load(Ordering::SeqCst),
            "the script went on before the request left"
        );
        request.join().expect("the request thread");
    }

    #[test]
    fn a_thread_enters_once_and_does_not_wait_for_itself() {
        let in_flight = InFlight::default();
        let outer = in_flight.enter().expect("a first entry");
        assert!(
            in_flight.enter().is_none(),
            "an inner request is covered by the outer"
        );
        assert_eq!(in_flight.others(), 0);
        in_flight.wait_for_others(plain_wait);
        drop(outer);
        assert_eq!(HERE.with(Cell::get), 0);
        assert!(in_flight.enter().is_some());
    }

    /// A thread waiting for a script's turn while in is out meanwhile: the script it waits
    /// for does not wait for it.
    #[test]
    fn a_thread_away_is_not_waited_for() {
        let in_flight = Arc::new(InFlight::default());
        let _entry = in_flight.enter().expect("a first entry");
        let checked = in_flight.away(|| {
            let in_flight = Arc::clone(&in_flight);
            std::thread::spawn(move || in_flight.others())
                .join()
                .expect("the other thread")
        });
        assert_eq!(checked, 0);
        let counted = {
            let in_flight = Arc::clone(&in_flight);
            std::thread::spawn(move || in_flight.others())
                .join()
                .expect("the other thread")
        };
        assert_eq!(counted, 1, "back in after the wait");
    }

    /// A long wait goes through the hook it is given (the server's hands a runtime worker's
    /// tasks to another thread).
    #[test]
    fn a_long_wait_goes_through_the_hook() {
        static HOOKED: AtomicBool = AtomicBool::new(false);
        fn hook(wait: &mut dyn FnMut()) {
            HOOKED.store(true, Ordering::SeqCst);
            wait();
        }
        let in_flight = Arc::new(InFlight::default());
        let entered = Arc::new(Barrier::new(2));
        let request = {
            let (in_flight, entered) = (Arc::clone(&in_flight), Arc::clone(&entered));
            std::thread::spawn(move || {
                let _entry = in_flight.enter();
                entered.wait();
                std::thread::sleep(Duration::from_millis(20));
            })
        };
        entered.wait();
        in_flight.wait_for_others(hook);
        assert!(HOOKED.load(Ordering::SeqCst));
        request.join().expect("the request thread");
    }
}
