//! INFO's `errorstats` and `total_error_replies`: every error reply Redis's clients are sent,
//! counted by its prefix (the word before the first space, as Redis's `afterErrorReply`).
//!
//! The counts are the process's: Osprey runs one server per process, and an error reply is
//! written by a [`super::reply::Reply`] that knows no server, so the counters are a static
//! rather than a field of `ServerState` (only unit tests run several servers in one process,
//! and none of them reads these counts).
//!
//! Invariants:
//! - At most [`PREFIXES_MAX`] distinct prefixes are kept, each at most [`PREFIX_BYTES_MAX`]
//!   bytes long: a script can return any error text, and the table must not grow with them.
//!   An error past that is still counted in `total_error_replies`.
//! - A prefix is kept as INFO prints it: `:`, `#`, CR and LF become `_`, as Redis's
//!   `getSafeInfoString`, so that an INFO line cannot be forged.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Distinct prefixes kept (Redis 7.2's `ERROR_STATS_NUMBER`).
pub const PREFIXES_MAX: usize = 128;

/// Redis looks for the space ending the prefix in the first 32 bytes.
const PREFIX_BYTES_MAX: usize = 32;

struct ErrorStats {
    total: AtomicU64,
    by_prefix: Mutex<BTreeMap<String, u64>>,
}

static STATS: ErrorStats = ErrorStats {
    total: AtomicU64::new(0),
    by_prefix: Mutex::new(BTreeMap::new()),
};

/// Counts one error reply whose text (without the leading `-`) is `text`.
pub fn record(text: &[u8]) {
    STATS.total.fetch_add(1, Ordering::Relaxed);
    let prefix = prefix_of(text);
    let mut by_prefix = STATS.by_prefix.lock();
    if let Some(count) = by_prefix.get_mut(prefix.as_str()) {
        *count += 1;
    } else if by_prefix.len() < PREFIXES_MAX {
        by_prefix.insert(prefix, 1);
    }
}

/// The prefix an error is counted under: the bytes before a space in its first 32, else
/// `ERR`.
fn prefix_of(text: &[u8]) -> String {
    let head = &text[..text.len().min(PREFIX_BYTES_MAX)];
    let Some(space) = head.iter().position(|&byte| byte == b' ') else {
        return "ERR".to_owned();
    };
    String::from_utf8_lossy(&head[..space])
        .chars()
        .map(|c| {
            if matches!(c, ':' | '#' | '\r' | '\n') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// `total_error_replies`.
pub fn total() -> u64 {
    STATS.total.load(Ordering::Relaxed)
}

/// The `errorstat_<prefix>:count=<n>` lines, in prefix order (Redis's rax order).
pub fn lines() -> String {
    let by_prefix = STATS.by_prefix.lock();
    by_prefix
        .iter()
        .map(|(prefix, count)| format!("errorstat_{prefix}:count={count}\r\n"))
        .collect()
}

/// CONFIG RESETSTAT.
pub fn reset() {
    STATS.total.store(0, Ordering::Relaxed);
    STATS.by_prefix.lock().clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_the_first_word_within_32_bytes_made_safe_for_info() {
        assert_eq!(prefix_of(b"WRONGTYPE Operation against a key"), "WRONGTYPE");
        assert_eq!(prefix_of(b"ERR syntax error"), "ERR");
        assert_eq!(prefix_of(b"NOSPACE"), "ERR");
        assert_eq!(prefix_of(&[b'A'; 40]), "ERR");
        assert_eq!(prefix_of(b"MY:ERR#X text"), "MY_ERR_X");
        assert_eq!(prefix_of(b"a\r\nb c"), "a__b");
    }
}
