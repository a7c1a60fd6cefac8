//! Deadlines: when a request must be answered by, checked on the namespace's clock while the
//! request runs.
//!
//! A transaction looks at its deadline before it touches the record, then after every
//! [`DEADLINE_CHECK_INTERVAL_STEPS`] steps of work (an op applied, a bin sent), so a request
//! whose client has stopped waiting ends within a few microseconds of work more, answering
//! TIMEOUT (9). A write that ends so has changed nothing: its ops run on a working copy that
//! is stored only once they have all run.
//!
//! Invariants:
//! - [`Deadline::NONE`] never passes, and a watch over it never reads the clock.
//! - A watch reads the clock at most once per [`DEADLINE_CHECK_INTERVAL_STEPS`] steps.

use model::ResultCode;

use crate::clock::{Clock, Now};

/// Steps of work (ops applied, bins sent) between two looks at the clock. Reading the clock
/// costs about as much as one cheap op (tens of nanoseconds), so looking every 64 steps costs
/// under 2 % of the work, while a request that has passed its deadline stops after at most 64
/// more steps: microseconds, where the deadlines clients send are milliseconds.
pub(crate) const DEADLINE_CHECK_INTERVAL_STEPS: u32 = 64;

const _: () = assert!(DEADLINE_CHECK_INTERVAL_STEPS > 0);

/// When a request must be answered by, in milliseconds since the Unix epoch on the namespace's
/// clock; `Deadline::NONE` never passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deadline(Option<u64>);

impl Deadline {
    /// No deadline: the request runs to its end however long it takes.
    pub const NONE: Deadline = Deadline(None);

    /// The deadline `unix_ms` milliseconds after the Unix epoch, on the namespace's clock.
    pub fn at_unix_ms(unix_ms: u64) -> Deadline {
        Deadline(Some(unix_ms))
    }

    /// Its instant in milliseconds since the Unix epoch; `None` for [`Deadline::NONE`].
    pub fn unix_ms(self) -> Option<u64> {
        self.0
    }

    /// Whether it has passed at `now_unix_ms`: strictly after it, as Aerospike's
    /// `as_transaction_has_timed_out` compares (`now > end_time`).
    pub fn has_passed(self, now_unix_ms: u64) -> bool {
        self.0.is_some_and(|deadline_ms| now_unix_ms > deadline_ms)
    }
}

/// A deadline being watched while one transaction runs.
pub(crate) struct DeadlineWatch<'c> {
    deadline: Deadline,
    clock: &'c dyn Clock,
    steps_until_check: u32,
}

impl<'c> DeadlineWatch<'c> {
    /// Starts watching `deadline` at `now`, the instant the transaction read.
    ///
    /// # Errors
    /// TIMEOUT if the deadline has already passed.
    pub(crate) fn start(
        deadline: Deadline,
        clock: &'c dyn Clock,
        now: Now,
    ) -> Result<DeadlineWatch<'c>, ResultCode> {
        if deadline.has_passed(now.unix_ms) {
            return Err(ResultCode::Timeout);
        }
        Ok(DeadlineWatch {
            deadline,
            clock,
            steps_until_check: DEADLINE_CHECK_INTERVAL_STEPS,
        })
    }

    /// Counts one step of work, and every [`DEADLINE_CHECK_INTERVAL_STEPS`] steps looks at the
    /// clock.
    ///
    /// # Errors
    /// TIMEOUT once a look finds the deadline passed.
    pub(crate) fn step(&mut self) -> Result<(), ResultCode> {
        if self.deadline == Deadline::NONE {
            return Ok(());
        }
        self.steps_until_check -= 1;
        if self.steps_until_check > 0 {
            return Ok(());
        }
        self.steps_until_check = DEADLINE_CHECK_INTERVAL_STEPS;
        if self.deadline.has_passed(self.clock.now_unix_ms()) {
            return Err(ResultCode::Timeout);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn a_deadline_passes_strictly_after_its_instant_and_none_never_does() {
        let deadline = Deadline::at_unix_ms(1_000);
        assert_eq!(deadline.unix_ms(), Some(1_000));
        assert!(!deadline.has_passed(999));
        assert!(!deadline.has_passed(1_000));
        assert!(deadline.has_passed(1_001));
        assert!(!Deadline::NONE.has_passed(u64::MAX));
        assert_eq!(Deadline::default(), Deadline::NONE);
        assert_eq!(Deadline::NONE.unix_ms(), None);
    }

    #[test]
    fn a_watch_times_out_at_the_first_look_after_the_deadline() {
        let clock = ManualClock::new(1_000);
        let deadline = Deadline::at_unix_ms(1_000);
        let start = |ms| DeadlineWatch::start(deadline, &clock, Now { unix_ms: ms });
        assert_eq!(start(1_001).err(), Some(ResultCode::Timeout));
        let mut watch = start(1_000).unwrap();
        clock.advance_ms(1);
        for _ in 1..DEADLINE_CHECK_INTERVAL_STEPS {
            watch.step().unwrap();
        }
        assert_eq!(watch.step(), Err(ResultCode::Timeout));
    }
}
