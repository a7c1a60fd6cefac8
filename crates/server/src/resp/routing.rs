//! Redis commands on a cluster: every node's RESP port serves every key. A command whose keys'
//! partitions all have another master is forwarded there whole and answered with the master's
//! reply; one whose keys have masters on different nodes gets Redis Cluster's CROSSSLOT error.
//!
//! Keyless commands (PING, KEYS, SCAN, DBSIZE, FLUSHDB, the index commands) run where they
//! arrive and see only the partitions this node is master of; see the README's support table.

use std::sync::Arc;

use model::{Digest, PartitionId, UserKey};
use wire_resp::Args;

use super::reply::Reply;
use super::{Session, commands, keys};
use crate::cluster::Route;
use crate::state::ServerState;

/// Where a command runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// Here (a single node, keys mastered here, or no keys).
    Local,
    /// On node `0`, the master of every key it names.
    Forward(model::NodeId),
    /// Its keys have masters on several nodes.
    CrossSlot,
    /// A key's partition has no master now.
    Unavailable,
}

/// Redis Cluster's words for a command over keys of several masters.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Where `args` should run, by its keys' partitions (clustered servers only).
pub fn route(state: &ServerState, args: &Args) -> Routing {
    let view = state.cluster_view();
    if !view.is_clustered() {
        return Routing::Local;
    }
    let namespace = keys::namespace_of(state).name();
    let set = state.config.resp.set.as_bytes();
    let mut routing = None;
    for key in key_arguments(args) {
        let partition = partition_of(set, key);
        let here = match view.route(namespace, partition, false) {
            Route::Local => Routing::Local,
            Route::Forward(node) => Routing::Forward(node),
            Route::Unavailable => return Routing::Unavailable,
        };
        match routing {
            None => routing = Some(here),
            Some(seen) if seen != here => return Routing::CrossSlot,
            Some(_) => {}
        }
    }
    routing.unwrap_or(Routing::Local)
}

fn partition_of(set: &[u8], key: &[u8]) -> PartitionId {
    Digest::compute(set, &UserKey::String(key)).partition_id()
}

/// The arguments of `args` that name keys, as Redis's command table places them.
fn key_arguments(args: &Args) -> impl Iterator<Item = &[u8]> {
    let name = args.command().unwrap_or_default().to_ascii_lowercase();
    let count = args.len();
    let (first, end, step) = match name.as_slice() {
        b"client" | b"command" | b"echo" | b"hello" | b"ping" | b"quit" | b"reset" | b"select"
        | b"time" | b"dbsize" | b"flushall" | b"flushdb" | b"keys" | b"randomkey" | b"scan"
        | b"multi" | b"exec" | b"discard" | b"unwatch" | b"info" | b"config" | b"sindex.create"
        | b"sindex.drop" | b"sindex.list" | b"sindex.query" => (1, 1, 1),
        b"del" | b"exists" | b"touch" | b"unlink" | b"mget" | b"sdiff" | b"sinter" | b"sunion"
        | b"watch" | b"sdiffstore" | b"sinterstore" | b"sunionstore" => (1, count, 1),
        b"mset" | b"msetnx" => (1, count, 2),
        b"rename" | b"renamenx" | b"smove" | b"copy" => (1, count.min(3), 1),
        b"sintercard" => {
            let keys = std::str::from_utf8(args.get(1.min(count - 1)))
                .ok()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            (2, count.min(2 + keys), 1)
        }
        _ => (1, count.min(2), 1),
    };
    (first..end.max(first))
        .step_by(step)
        .map(|index| args.get(index))
}

/// Runs a command forwarded by another node: `payload` is the client's RESP version (one
/// byte), then the command as RESP. Returns the reply, once its writes are acknowledged.
pub async fn serve_forwarded(state: &Arc<ServerState>, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let Some((&protocol, command)) = payload.split_first() else {
        return out;
    };
    let mut args = Args::new();
    if !matches!(wire_resp::decode_request(command, &mut args), Ok(Some(_))) {
        Reply::new(&mut out, protocol).error("ERR malformed forwarded command");
        return out;
    }
    let mut session = Session::forwarded(Arc::clone(state), protocol);
    let mut reply = Reply::new(&mut out, protocol);
    commands::execute(&mut session, &args, &mut reply);
    drop(reply);
    if session.writes.acks.settled().await.is_err() {
        out.clear();
        Reply::new(&mut out, protocol)
            .error("ERR the write could not be confirmed by its replicas");
    }
    out
}

/// The payload forwarding `args` for a client speaking RESP `protocol`.
pub fn forward_payload(protocol: u8, args: &Args) -> Vec<u8> {
    let arguments: Vec<&[u8]> = (0..args.len()).map(|index| args.get(index)).collect();
    let mut payload = vec![protocol];
    wire_resp::encode_command(&mut payload, &arguments);
    payload
}
