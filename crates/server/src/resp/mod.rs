//! The Redis protocol front end (RESP2 and RESP3): connections, command dispatch, and the
//! mapping of Redis values onto records (`docs/internals/redis-mapping.md`).
//!
//! A connection reads what is available, answers every complete request in order into one
//! output buffer, and writes it once: pipelines of any depth cost one write per read.
//!
//! Invariants:
//! - The input buffer grows only by bytes that arrived and never beyond
//!   `QUERY_BUFFER_MAX_BYTES`; the request decoder never allocates by a declared length.
//! - Every request gets exactly one reply, in request order.
//! - A protocol error is answered with Redis's text, then the connection closes, as Redis does.

mod collection;
mod commands;
mod docs;
mod glob;
mod hashes;
mod indexes;
mod keys;
mod keyspace;
mod lists;
mod msgpack;
mod reply;
mod server_info;
mod sets;
mod strings;
mod transactions;
mod zsets;

use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::debug;

use crate::state::ServerState;
use reply::Reply;

/// Redis's `client-query-buffer-limit`: a client whose unparsed input grows past this is closed.
const QUERY_BUFFER_MAX_BYTES: usize = wire_resp::QUERY_BUFFER_LIMIT_BYTES;
/// Spare room ensured before each read.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Per-connection state that commands read and change.
#[derive(Debug)]
pub struct Session {
    state: Arc<ServerState>,
    /// RESP protocol version: 2, or 3 after `HELLO 3`.
    protocol: u8,
    /// Unique per connection, as `CLIENT ID`.
    client_id: u64,
    /// Set by `CLIENT SETNAME` or `HELLO ... SETNAME`.
    name: Option<Vec<u8>>,
    /// Scratch space for the bins a write builds.
    writer: engine::BinWriter,
    /// The transaction being queued, between MULTI and EXEC.
    transaction: Option<transactions::Transaction>,
    /// Keys watched by WATCH.
    watched: Vec<transactions::WatchedKey>,
}

/// What the connection does after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// Go on with the next request.
    Continue,
    /// Send the replies so far, then close (QUIT).
    Close,
}

/// Serves one Redis client until it quits, misbehaves, or the server shuts down.
pub async fn serve(
    mut stream: TcpStream,
    state: Arc<ServerState>,
    mut shutdown: watch::Receiver<bool>,
) {
    let client_id = state
        .resp_client_ids
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1;
    let _connected = ConnectedGuard::new(&state);
    let mut session = Session {
        state,
        protocol: 2,
        client_id,
        name: None,
        writer: engine::BinWriter::default(),
        transaction: None,
        watched: Vec::new(),
    };
    let mut input = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut output = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut args = wire_resp::Args::default();
    loop {
        let after = answer_buffered(&mut session, &mut input, &mut args, &mut output);
        if !output.is_empty() {
            if let Err(error) = crate::connection::writes_durable().await {
                debug!(client_id, %error, "writes not durable, closing");
                return;
            }
            if stream.write_all(&output).await.is_err() {
                return;
            }
            output.clear();
        }
        if after == After::Close || *shutdown.borrow() {
            return;
        }
        if input.len() > QUERY_BUFFER_MAX_BYTES {
            debug!(client_id, "query buffer limit reached, closing");
            return;
        }
        input.reserve(READ_CHUNK_BYTES);
        tokio::select! {
            read = stream.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = shutdown.changed() => return,
        }
    }
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

/// Answers every complete request in `input`, consuming it.
fn answer_buffered(
    session: &mut Session,
    input: &mut BytesMut,
    args: &mut wire_resp::Args,
    output: &mut Vec<u8>,
) -> After {
    let mut consumed = 0;
    let mut after = After::Continue;
    while after == After::Continue {
        match wire_resp::decode_request(&input[consumed..], args) {
            Ok(Some(size_bytes)) => {
                consumed += size_bytes;
                if !args.is_empty() {
                    let mut reply = Reply::new(output, session.protocol);
                    after = commands::execute(session, args, &mut reply);
                }
            }
            Ok(None) => break,
            Err(error) => {
                error.write_reply(output);
                after = After::Close;
            }
        }
    }
    input.advance(consumed);
    after
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
