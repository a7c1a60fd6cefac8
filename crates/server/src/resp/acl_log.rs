//! ACL LOG: the recent security events of the Redis port, as Redis keeps them: a command
//! refused (`reason` command), an AUTH refused (`reason` auth). An event like the newest one
//! (same reason, context, object and user) within a minute of it adds to its count instead of
//! making an entry.
//!
//! Invariants:
//! - At most [`ENTRIES_MAX`] entries (Redis's `acllog-max-len` default), newest first; the
//!   oldest goes when a new one comes.
//! - Entry ids grow by one per entry made, never reused (until RESET, as Redis).

use std::collections::VecDeque;

use parking_lot::Mutex;

use super::reply::Reply;

/// Entries kept at most.
pub const ENTRIES_MAX: usize = 128;

/// How long an event folds into a like one, in milliseconds (Redis's 60 s).
const GROUPING_MS: u64 = 60_000;

/// Why an event was logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A command the user may not run.
    Command,
    /// A failed AUTH (or HELLO ... AUTH).
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Auth => "auth",
        }
    }
}

/// One logged event.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    count: u64,
    reason: Reason,
    /// `toplevel`, `multi` or `lua`, as Redis names where the command ran.
    context: &'static str,
    /// The command (`get`, `config|set`), or `AUTH`.
    object: String,
    username: String,
    client_info: String,
    entry_id: u64,
    created_ms: u64,
    updated_ms: u64,
}

/// The log.
#[derive(Debug, Default)]
pub struct AclLog {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    newest_first: VecDeque<Entry>,
    next_id: u64,
}

/// An event to log.
pub struct Event<'a> {
    /// Why.
    pub reason: Reason,
    /// Where the command ran.
    pub context: &'static str,
    /// What was refused.
    pub object: &'a str,
    /// Who.
    pub username: &'a str,
    /// The client's CLIENT INFO line.
    pub client_info: String,
    /// When, in milliseconds since the Unix epoch.
    pub now_ms: u64,
}

impl AclLog {
    /// Logs `event`, or counts it in the newest entry when it is like it.
    pub fn record(&self, event: Event<'_>) {
        let mut entries = self.inner.lock();
        if let Some(newest) = entries.newest_first.front_mut()
            && newest.reason == event.reason
            && newest.context == event.context
            && newest.object == event.object
            && newest.username == event.username
            && event.now_ms.saturating_sub(newest.updated_ms) < GROUPING_MS
        {
            newest.count += 1;
            newest.updated_ms = event.now_ms;
            newest.client_info = event.client_info;
            return;
        }
        let entry_id = entries.next_id;
        entries.next_id += 1;
        entries.newest_first.push_front(Entry {
            count: 1,
            reason: event.reason,
            context: event.context,
            object: event.object.to_owned(),
            username: event.username.to_owned(),
            client_info: event.client_info,
            entry_id,
            created_ms: event.now_ms,
            updated_ms: event.now_ms,
        });
        entries.newest_first.truncate(ENTRIES_MAX);
    }

    /// Empties the log (ACL LOG RESET).
    pub fn reset(&self) {
        *self.inner.lock() = Entries::default();
    }

    /// Writes the newest `count` entries (all when `None`) as ACL LOG answers them at `now_ms`.
    pub fn write(&self, count: Option<usize>, now_ms: u64, reply: &mut Reply<'_>) {
        let entries = self.inner.lock();
        let shown = count.unwrap_or(usize::MAX).min(entries.newest_first.len());
        reply.array(shown);
        for entry in entries.newest_first.iter().take(shown) {
            reply.map(10);
            reply.bulk(b"count");
            reply.integer(i64::try_from(entry.count).unwrap_or(i64::MAX));
            for (field, value) in [
                ("reason", entry.reason.name()),
                ("context", entry.context),
                ("object", entry.object.as_str()),
                ("username", entry.username.as_str()),
            ] {
                reply.bulk(field.as_bytes());
                reply.bulk(value.as_bytes());
            }
            reply.bulk(b"age-seconds");
            reply.double(now_ms.saturating_sub(entry.created_ms) as f64 / 1000.0);
            reply.bulk(b"client-info");
            reply.bulk(entry.client_info.as_bytes());
            for (field, value) in [
                ("entry-id", entry.entry_id),
                ("timestamp-created", entry.created_ms),
                ("timestamp-last-updated", entry.updated_ms),
            ] {
                reply.bulk(field.as_bytes());
                reply.integer(i64::try_from(value).unwrap_or(i64::MAX));
            }
        }
    }

    #[cfg(test)]
    fn counts(&self) -> Vec<(String, u64)> {
        let entries = self.inner.lock();
        entries
            .newest_first
            .iter()
            .map(|entry| (entry.object.clone(), entry.count))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(object: &str, now_ms: u64) -> Event<'_> {
        Event {
            reason: Reason::Command,
            context: "toplevel",
            object,
            username: "alice",
            client_info: String::new(),
            now_ms,
        }
    }

    #[test]
    fn like_events_within_a_minute_fold_into_one_entry() {
        let log = AclLog::default();
        log.record(event("set", 0));
        log.record(event("set", 59_000));
        log.record(event("get", 59_500));
        log.record(event("get", 200_000));
        assert_eq!(
            log.counts(),
            [
                ("get".to_owned(), 1),
                ("get".to_owned(), 1),
                ("set".to_owned(), 2)
            ]
        );
        log.reset();
        assert!(log.counts().is_empty());
    }

    #[test]
    fn the_log_keeps_its_newest_entries_only() {
        let log = AclLog::default();
        for index in 0..ENTRIES_MAX + 10 {
            let object = format!("command{index}");
            log.record(event(&object, 0));
        }
        let counts = log.counts();
        assert_eq!(counts.len(), ENTRIES_MAX);
        assert_eq!(counts[0].0, format!("command{}", ENTRIES_MAX + 9));
    }
}
