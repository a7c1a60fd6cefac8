//! The Redis protocol front end (RESP2 and RESP3): connections, command dispatch, and the
//! mapping of Redis values onto records (`docs/internals/redis-mapping.md`).
//!
//! A connection (`connection.rs`) reads what is available, answers the complete requests in
//! order, and writes the replies the client takes, within the limits on what it may hold.
//!
//! Invariants:
//! - The request decoder never allocates by a declared length.
//! - Every request gets exactly one reply, in request order.
//! - A protocol error is answered with Redis's text, then the connection closes, as Redis does.
//! - A command that may visit many elements asks to run on the long-request pool
//!   ([`After::Offload`]) before it does anything, when [`Session::should_offload`] says so.

mod acl;
mod acl_log;
mod bitmaps;
mod blocking;
mod client_control;
mod clients;
mod collection;
mod command_keys;
pub(crate) mod command_stats;
mod commands;
mod connection;
mod cost;
mod databases;
mod diagnostics;
mod digest;
mod docs;
mod dump;
mod error_stats;
mod functions;
mod geo;
mod geohash;
mod glob;
mod hashes;
mod hyperloglog;
pub(crate) mod in_flight;
mod indexes;
mod keys;
mod keyspace;
mod lcs;
mod lifecycle;
mod lists;
mod memory_limit;
mod monitor;
mod msgpack;
mod parameters;
mod pops;
pub mod pubsub;
mod rdb;
mod rdb_file;
mod rdb_load;
mod rdb_save;
mod recent_digests;
pub(crate) mod reply;
mod routing;
mod script_host;
pub(crate) mod script_worker;
mod scripting;
mod server_info;
mod sets;
mod slowlog;
mod sort;
mod streams;
mod strings;
mod transactions;
mod zset_algebra;
mod zsets;

use std::sync::Arc;

use crate::tls::transport::Transport;
use tokio::sync::watch;

use crate::state::ServerState;

/// Loads the RDB file at `path` into the Redis namespace (start-up, before connections are
/// accepted), and logs what it loaded.
///
/// # Errors
/// The file's name and why it was refused.
pub fn load_rdb_at_start(state: &ServerState, path: &std::path::Path) -> std::io::Result<()> {
    tracing::info!(file = %path.display(), "loading the RDB file");
    let report = rdb_load::load(state, path).map_err(std::io::Error::other)?;
    let keys: u64 = report.keys_by_database.values().sum();
    tracing::info!(
        file = %path.display(),
        rdb_version = report.version,
        written_by = report.redis_version.as_deref().unwrap_or("unknown"),
        keys,
        by_database = %rdb_load::summary(&report),
        expired_skipped = report.expired,
        function_libraries = report.libraries,
        check_seconds = report.check_elapsed.as_secs_f64(),
        seconds = report.elapsed.as_secs_f64(),
        "RDB file loaded"
    );
    Ok(())
}

/// Per-connection state that commands read and change.
#[derive(Debug)]
pub struct Session {
    state: Arc<ServerState>,
    /// RESP protocol version: 2, or 3 after `HELLO 3`.
    protocol: u8,
    /// Unique per connection, as `CLIENT ID`.
    client_id: u64,
    /// The database SELECT chose (`databases.rs`): the set its keys live in.
    database: databases::Database,
    /// Scratch space for writes, and what they wait for before their replies go out.
    writes: keys::Writes,
    /// The transaction being queued, between MULTI and EXEC.
    transaction: Option<transactions::Transaction>,
    /// Keys watched by WATCH.
    watched: Vec<transactions::WatchedKey>,
    /// Whether a command may ask to run on the long-request pool (`After::Offload`): not while
    /// it already runs there, nor inside EXEC.
    may_offload: bool,
    /// The channels and patterns this connection listens to.
    pubsub: pubsub::Subscriptions,
    /// Whether a blocking command (BLPOP...) may block here, and what it waits for.
    blocking: blocking::Blocking,
    /// This connection in the registry of live ones (none for a forwarded command).
    registration: Option<clients::Registration>,
    /// CLIENT REPLY: which replies the client gets.
    reply_mode: client_control::ReplyMode,
    /// CLIENT NO-EVICT and NO-TOUCH, as CLIENT INFO shows them.
    no_evict: bool,
    no_touch: bool,
    /// Set while a script or function runs the session's commands (Redis's `CLIENT_SCRIPT`):
    /// SORT then orders a set it would leave unsorted, and XREAD refuses BLOCK.
    in_script: bool,
    /// The last command run (its `command_stats` name), and when it started: CLIENT LIST's
    /// `cmd` and `idle`.
    last_command: Option<(&'static str, std::time::Instant)>,
    /// What most commands never touch, boxed: a session is held in several states of its
    /// connection's future, so each byte in it counts several times per idle connection
    /// (10,000 of them must stay under 8 KiB each, `docs/reliability.md`).
    seldom: Box<Seldom>,
}

/// The parts of a [`Session`] most commands never touch.
#[derive(Debug)]
struct Seldom {
    /// Set by `CLIENT SETNAME` or `HELLO ... SETNAME`.
    name: Option<Vec<u8>>,
    /// The connection's login and the checks of its commands (`acl.rs`).
    acl: acl::ConnectionAcl,
}

impl Seldom {
    fn new(access: crate::access::Access) -> Box<Seldom> {
        Box::new(Seldom {
            name: None,
            acl: acl::ConnectionAcl::new(access),
        })
    }
}

/// What the connection does after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// Go on with the next request.
    Continue,
    /// Send the replies so far, then close (QUIT).
    Close,
    /// The command did nothing and wrote nothing: it may take long, so it asks to run again,
    /// whole, on the long-request pool. Only when `Session::may_offload` allows it.
    Offload,
    /// A blocking command found nothing and wrote nothing: the connection waits for its keys
    /// (`blocking.rs`), then runs it again. Only a client's own command outside EXEC.
    Block,
    /// A script runs (on another connection): the command did nothing and wrote nothing; it
    /// runs again, whole, once the script ends or has run past `busy-reply-threshold`
    /// ([`Scripts::wait_for_turn`]). Only when `Session::may_offload` allows it.
    AwaitScript,
}

pub use acl_log::AclLog;
pub use blocking::BlockedClients;
pub use clients::Clients;
pub use databases::{DATABASES_MAX, Databases, database_set_name};
pub use parameters::Settings;
pub use rdb_save::{Saves, check_dbfilename};
pub use routing::serve_forwarded;
pub use scripting::Scripts;
pub use slowlog::SlowLog;

impl Session {
    /// A session for one command another node forwarded here (see `routing.rs`).
    pub fn forwarded(state: Arc<ServerState>, protocol: u8) -> Session {
        Session {
            state,
            protocol,
            client_id: 0,
            database: databases::Database::default(),
            writes: keys::Writes::default(),
            transaction: None,
            watched: Vec::new(),
            may_offload: false,
            pubsub: pubsub::Subscriptions::default(),
            blocking: blocking::Blocking::allowed(),
            registration: None,
            reply_mode: client_control::ReplyMode::On,
            no_evict: false,
            no_touch: false,
            in_script: false,
            last_command: None,
            seldom: Seldom::new(crate::access::Access::trusted()),
        }
    }

    /// The client's `ip:port` (empty for a forwarded command).
    pub fn peer_address(&self) -> String {
        self.registration
            .as_ref()
            .map(|registration| registration.entry.peer_address.clone())
            .unwrap_or_default()
    }

    /// Publishes what CLIENT LIST shows of this connection; `buffers` are its input buffer's
    /// (unparsed bytes, room left) and its replies' (unsent bytes, memory held), when the
    /// connection knows them (else the last published stand).
    pub fn publish_shown(&self, buffers: Option<((usize, usize), (usize, usize))>) {
        let Some(registration) = &self.registration else {
            return;
        };
        let mut shown = registration.entry.shown.lock();
        shown.name.clone_from(&self.seldom.name);
        shown.database = self.database.0 as usize;
        shown.protocol = self.protocol;
        shown.subscriptions = self.pubsub.counts();
        shown.queued = self
            .transaction
            .as_ref()
            .map(|transaction| transaction.queued().len());
        shown.blocked = self.blocking.request.is_some();
        shown.monitoring = self.pubsub.is_monitoring();
        (shown.no_evict, shown.no_touch) = (self.no_evict, self.no_touch);
        shown.last_command = self.last_command;
        if let Some((query_buffer, output)) = buffers {
            (shown.query_buffer, shown.output) = (query_buffer, output);
        }
    }

    /// Whether a command that may take long should ask for the long-request pool: it asks
    /// when `cost` (in elements it would visit) reaches `LONG_COMMAND_COST_MIN` and it may.
    pub fn should_offload(&self, cost: usize) -> bool {
        self.may_offload && cost >= LONG_COMMAND_COST_MIN
    }
}

/// Elements (keys, members, fields, list items) a command visits from which it runs on the
/// long-request pool: about a millisecond of work at tens of nanoseconds an element, more
/// than the hand-off to a pool thread costs (tens of microseconds).
pub const LONG_COMMAND_COST_MIN: usize = 20_000;

/// Serves one Redis client until it quits, misbehaves, breaks a limit, or the server shuts
/// down.
pub async fn serve(
    stream: Transport,
    state: Arc<ServerState>,
    shutdown: watch::Receiver<bool>,
    account: crate::client_memory::Account,
) {
    let client_id = state
        .resp_client_ids
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1;
    let _connected = ConnectedGuard::new(&state);
    let address = |address: std::io::Result<std::net::SocketAddr>| {
        address
            .map(|address| address.to_string())
            .unwrap_or_default()
    };
    let mut access = crate::access::Access::new(
        state.security.clone(),
        stream.peer_addr().ok().map(|address| address.ip()),
        security::Protocol::Redis,
    )
    .with_certificate(stream.certificate_name());
    if state.config.resp.tls_auth_clients_user == "CN" && access.certificate_user().is_some() {
        // As Valkey: a certificate that names no user leaves the connection to AUTH.
        let _ = access.log_in_with_certificate();
    }
    let seldom = Seldom::new(access);
    let registration = Clients::register(
        &state,
        client_id,
        address(stream.peer_addr()),
        address(stream.tcp().local_addr()),
        account.closer(),
    );
    let session = Session {
        state,
        protocol: 2,
        client_id,
        database: databases::Database::default(),
        writes: keys::Writes::default(),
        transaction: None,
        watched: Vec::new(),
        may_offload: true,
        pubsub: pubsub::Subscriptions::default(),
        blocking: blocking::Blocking::allowed(),
        registration: Some(registration),
        reply_mode: client_control::ReplyMode::On,
        no_evict: false,
        no_touch: false,
        in_script: false,
        last_command: None,
        seldom,
    };
    connection::serve(stream, session, shutdown, account).await;
}

/// Counts a Redis connection in `resp_connected` while it lives.
struct ConnectedGuard(Arc<ServerState>);

impl ConnectedGuard {
    fn new(state: &Arc<ServerState>) -> ConnectedGuard {
        state
            .resp_connected
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ConnectedGuard(Arc::clone(state))
    }
}

impl Drop for ConnectedGuard {
    fn drop(&mut self) {
        self.0
            .resp_connected
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A double as Redis 7.2 prints one (`wire_resp::encode::double_text`): the shortest text
/// that reads back as the same value, `inf` and `-inf`.
pub fn format_double(value: f64) -> String {
    let mut text = Vec::new();
    wire_resp::encode::double_text(&mut text, value);
    String::from_utf8(text).expect("a double's text is ASCII")
}

/// A double as Redis parses one (`string2d`): decimal or exponent notation, `inf`, `+inf`,
/// `-inf`; no spaces, no NaN.
pub fn parse_double(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty()
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace)
    {
        return None;
    }
    let value: f64 = match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => text.parse().ok()?,
    };
    (!value.is_nan()).then_some(value)
}

/// A request of `words`, as the connection decodes one (for unit tests).
#[cfg(test)]
pub(crate) fn args_of(words: &[&str]) -> wire_resp::Args {
    let mut args = wire_resp::Args::default();
    let mut request = Vec::new();
    let words: Vec<&[u8]> = words.iter().map(|word| word.as_bytes()).collect();
    wire_resp::encode_command(&mut request, &words);
    wire_resp::decode_request(&request, &mut args).expect("decodes");
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_redis_prints_them() {
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(-2.5), "-2.5");
        assert_eq!(format_double(0.1), "0.1");
        assert_eq!(format_double(1e17), "100000000000000000");
        assert_eq!(format_double(0.00001), "0.00001");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn doubles_parse_as_redis_parses_them() {
        assert_eq!(parse_double(b"1.5"), Some(1.5));
        assert_eq!(parse_double(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_double(b"1e3"), Some(1000.0));
        assert_eq!(parse_double(b"nan"), None);
        assert_eq!(parse_double(b" 1"), None);
        assert_eq!(parse_double(b""), None);
        assert_eq!(parse_double(b"abc"), None);
    }
}
