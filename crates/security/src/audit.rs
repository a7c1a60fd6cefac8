//! The audit trail: one JSON line per security event (a login accepted or refused, a request
//! refused, a change to the users and roles), written to a sink (a file, standard output, or a
//! test's memory).
//!
//! Invariants:
//! - Logins and changes are always written. Refused requests are written at most
//!   [`DENIALS_PER_SECOND_MAX`] a second, the rest counted in `suppressed`: a client that
//!   loops on a forbidden command cannot fill the disk.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde_json::json;

/// Refused requests written per second at most.
pub const DENIALS_PER_SECOND_MAX: u64 = 100;

/// Where audit lines go.
pub trait AuditSink: Send + Sync + std::fmt::Debug {
    /// Writes one line (without its newline).
    fn write_line(&self, line: &str);
}

/// Audit lines appended to a file (created if missing, owner-only), each flushed as written.
#[derive(Debug)]
pub struct FileSink {
    file: Mutex<File>,
}

impl FileSink {
    /// Opens `path` for appending.
    ///
    /// # Errors
    /// The file cannot be opened.
    pub fn open(path: &Path) -> io::Result<FileSink> {
        let mut options = OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        Ok(FileSink {
            file: Mutex::new(options.open(path)?),
        })
    }
}

impl AuditSink for FileSink {
    fn write_line(&self, line: &str) {
        let mut file = self.file.lock();
        if let Err(error) = writeln!(file, "{line}") {
            tracing::warn!(%error, "an audit line could not be written");
        }
    }
}

/// Audit lines on standard output.
#[derive(Debug)]
pub struct StdoutSink;

impl AuditSink for StdoutSink {
    fn write_line(&self, line: &str) {
        let mut stdout = io::stdout().lock();
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }
}

/// Audit lines kept in memory, for tests.
#[derive(Debug, Default)]
pub struct MemorySink {
    /// The lines written.
    pub lines: Mutex<Vec<String>>,
}

impl AuditSink for MemorySink {
    fn write_line(&self, line: &str) {
        self.lines.lock().push(line.to_owned());
    }
}

/// Which port an event came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// The Aerospike protocol.
    Aerospike,
    /// The Redis protocol.
    Redis,
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Protocol::Aerospike => "aerospike",
            Protocol::Redis => "redis",
        }
    }
}

/// Who did it, from where, through which port.
#[derive(Clone, Copy, Debug)]
pub struct Origin<'a> {
    /// The port.
    pub protocol: Protocol,
    /// The client's address.
    pub client: IpAddr,
    /// The user (the one logging in, or logged in); empty when none.
    pub user: &'a str,
}

/// The audit trail of one node.
#[derive(Debug, Default)]
pub struct Audit {
    sink: Option<Box<dyn AuditSink>>,
    /// The second of the Unix epoch the denial count is for.
    denial_second: AtomicU64,
    denials_in_second: AtomicU64,
    /// Refused requests not written, over the limit.
    pub suppressed: AtomicU64,
}

impl Audit {
    /// An audit trail writing to `sink` (none: nothing is written).
    pub fn new(sink: Option<Box<dyn AuditSink>>) -> Audit {
        Audit {
            sink,
            ..Audit::default()
        }
    }

    /// A login (LOGIN, AUTHENTICATE, AUTH): `refused` names why it was, if it was.
    pub fn login(&self, now_ms: u64, origin: Origin<'_>, method: &str, refused: Option<&str>) {
        let result = if refused.is_some() { "refused" } else { "ok" };
        self.write(json!({
            "time_ms": now_ms,
            "event": "login",
            "protocol": origin.protocol.name(),
            "client": origin.client.to_string(),
            "user": origin.user,
            "method": method,
            "result": result,
            "reason": refused,
        }));
    }

    /// A request refused: `what` names it (`read test/demo`, `set-config`, `config|set`).
    pub fn denied(&self, now_ms: u64, origin: Origin<'_>, what: &str) {
        let second = now_ms / 1000;
        if self.denial_second.swap(second, Ordering::Relaxed) != second {
            self.denials_in_second.store(0, Ordering::Relaxed);
        }
        if self.denials_in_second.fetch_add(1, Ordering::Relaxed) >= DENIALS_PER_SECOND_MAX {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.write(json!({
            "time_ms": now_ms,
            "event": "denied",
            "protocol": origin.protocol.name(),
            "client": origin.client.to_string(),
            "user": origin.user,
            "request": what,
        }));
    }

    /// A change to the users and roles (`create-user alice`), by `origin`'s user.
    pub fn changed(&self, now_ms: u64, origin: Origin<'_>, change: &str, target: &str) {
        self.write(json!({
            "time_ms": now_ms,
            "event": "change",
            "protocol": origin.protocol.name(),
            "client": origin.client.to_string(),
            "user": origin.user,
            "change": change,
            "target": target,
        }));
    }

    fn write(&self, event: serde_json::Value) {
        if let Some(sink) = &self.sink {
            sink.write_line(&event.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::sync::Arc;

    use super::*;

    #[derive(Debug)]
    struct Shared(Arc<MemorySink>);

    impl AuditSink for Shared {
        fn write_line(&self, line: &str) {
            self.0.write_line(line);
        }
    }

    const ORIGIN: Origin<'static> = Origin {
        protocol: Protocol::Redis,
        client: IpAddr::V4(Ipv4Addr::LOCALHOST),
        user: "alice",
    };

    #[test]
    fn events_are_json_lines() {
        let memory = Arc::new(MemorySink::default());
        let audit = Audit::new(Some(Box::new(Shared(Arc::clone(&memory)))));
        audit.login(1, ORIGIN, "auth", Some("invalid credential"));
        audit.changed(2, ORIGIN, "create-user", "bob");
        let lines = memory.lines.lock();
        let login: serde_json::Value = serde_json::from_str(&lines[0]).expect("json");
        assert_eq!(login["event"], "login");
        assert_eq!(login["result"], "refused");
        assert_eq!(login["reason"], "invalid credential");
        assert_eq!(login["protocol"], "redis");
        let change: serde_json::Value = serde_json::from_str(&lines[1]).expect("json");
        assert_eq!(change["target"], "bob");
    }

    #[test]
    fn denials_past_the_limit_in_a_second_are_counted_not_written() {
        let memory = Arc::new(MemorySink::default());
        let audit = Audit::new(Some(Box::new(Shared(Arc::clone(&memory)))));
        for _ in 0..DENIALS_PER_SECOND_MAX + 50 {
            audit.denied(5_000, ORIGIN, "set");
        }
        assert_eq!(memory.lines.lock().len() as u64, DENIALS_PER_SECOND_MAX);
        assert_eq!(audit.suppressed.load(Ordering::Relaxed), 50);
        audit.denied(6_000, ORIGIN, "set");
        assert_eq!(memory.lines.lock().len() as u64, DENIALS_PER_SECOND_MAX + 1);
        audit.login(6_001, ORIGIN, "login", None);
        assert_eq!(memory.lines.lock().len() as u64, DENIALS_PER_SECOND_MAX + 2);
    }
}
