//! Failed logins, counted per client address: past [`FAILURES_MAX`] in a window of
//! [`WINDOW_S`], every login from that address is refused until the window ends, right
//! credential or not, so guessing passwords costs an attacker a window per ten guesses.
//!
//! Invariants:
//! - At most [`ADDRESSES_MAX`] addresses are tracked: a flood from many addresses costs
//!   bounded memory (past it, windows that ended are dropped, then the oldest).

use std::collections::HashMap;
use std::net::IpAddr;

use parking_lot::Mutex;

/// Failed logins an address may make in one window.
pub const FAILURES_MAX: u32 = 10;
/// The window, in seconds.
pub const WINDOW_S: u64 = 60;
/// Addresses tracked at most.
const ADDRESSES_MAX: usize = 16_384;

/// Failed logins by client address.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<IpAddr, Failures>>,
}

#[derive(Clone, Copy, Debug)]
struct Failures {
    count: u32,
    window_start_s: u64,
}

impl LoginThrottle {
    /// Whether `client` may try to log in at `now_s`.
    pub fn allows(&self, client: IpAddr, now_s: u64) -> bool {
        self.failures
            .lock()
            .get(&client)
            .is_none_or(|failures| failures.window_ended(now_s) || failures.count < FAILURES_MAX)
    }

    /// Counts a failed login from `client` at `now_s`.
    pub fn failed(&self, client: IpAddr, now_s: u64) {
        let mut failures = self.failures.lock();
        if failures.len() >= ADDRESSES_MAX && !failures.contains_key(&client) {
            make_room(&mut failures, now_s);
        }
        let entry = failures.entry(client).or_insert(Failures {
            count: 0,
            window_start_s: now_s,
        });
        if entry.window_ended(now_s) {
            *entry = Failures {
                count: 0,
                window_start_s: now_s,
            };
        }
        entry.count = entry.count.saturating_add(1);
        debug_assert!(failures.len() <= ADDRESSES_MAX);
    }

    /// Forgets `client`'s failures after it logged in.
    pub fn succeeded(&self, client: IpAddr) {
        self.failures.lock().remove(&client);
    }
}

impl Failures {
    fn window_ended(&self, now_s: u64) -> bool {
        now_s >= self.window_start_s.saturating_add(WINDOW_S)
    }
}

fn make_room(failures: &mut HashMap<IpAddr, Failures>, now_s: u64) {
    failures.retain(|_, entry| !entry.window_ended(now_s));
    if failures.len() >= ADDRESSES_MAX {
        let oldest = failures
            .iter()
            .min_by_key(|(_, entry)| entry.window_start_s)
            .map(|(address, _)| *address);
        if let Some(oldest) = oldest {
            failures.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn an_address_past_its_failures_waits_for_the_window_and_others_do_not() {
        let throttle = LoginThrottle::default();
        for _ in 0..FAILURES_MAX {
            assert!(throttle.allows(ATTACKER, 100));
            throttle.failed(ATTACKER, 100);
        }
        assert!(!throttle.allows(ATTACKER, 100));
        assert!(!throttle.allows(ATTACKER, 100 + WINDOW_S - 1));
        assert!(throttle.allows(OTHER, 100));
        assert!(throttle.allows(ATTACKER, 100 + WINDOW_S));
        throttle.failed(ATTACKER, 100 + WINDOW_S);
        assert!(
            throttle.allows(ATTACKER, 100 + WINDOW_S),
            "a new window starts again at one"
        );
    }

    #[test]
    fn a_login_clears_the_failures() {
        let throttle = LoginThrottle::default();
        for _ in 0..FAILURES_MAX - 1 {
            throttle.failed(ATTACKER, 0);
        }
        throttle.succeeded(ATTACKER);
        throttle.failed(ATTACKER, 0);
        assert!(throttle.allows(ATTACKER, 0));
    }

    #[test]
    fn a_flood_from_many_addresses_stays_bounded() {
        let throttle = LoginThrottle::default();
        for index in 0..(ADDRESSES_MAX as u32 + 100) {
            throttle.failed(IpAddr::V4(Ipv4Addr::from(index)), u64::from(index));
        }
        assert!(throttle.failures.lock().len() <= ADDRESSES_MAX);
    }
}
