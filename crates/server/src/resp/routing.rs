//! Redis commands on a cluster: every node's RESP port serves every key. A command whose keys'
//! partitions all have another master is forwarded there whole and answered with the master's
//! reply; one whose keys have masters on different nodes gets Redis Cluster's CROSSSLOT error.
//!
//! Commands over the whole data set see it all from any node: KEYS, DBSIZE and RANDOMKEY run
//! on every node, each over the partitions it masters, and the node the client asked merges
//! the parts ([`Routing::Gather`]); SCAN's cursor is a partition number, so a call runs on the
//! cursor partition's master, walks the partitions that node masters from there, and returns
//! the first partition it does not as the next cursor. FLUSHDB truncates cluster-wide through
//! the metadata group. Other keyless commands (PING, INFO, the index commands) run where they
//! arrive.

use std::sync::Arc;

use model::{PARTITION_COUNT, PartitionId};
use wire_resp::Args;

use super::databases::Database;
use super::reply::Reply;
use super::{After, Session, commands, keys, keyspace};
use crate::cluster::{ClusterView, Route};
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
    /// On every node, each over the partitions it masters, then merged
    /// ([`merge_gathered`]): KEYS, DBSIZE, RANDOMKEY.
    Gather,
    /// Not served on a cluster: the error says why.
    Refused(&'static str),
}

/// Redis Cluster's words for a command over keys of several masters.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Where `args` should run, by its keys' partitions in `database` (clustered servers only).
pub fn route(state: &ServerState, database: Database, args: &Args) -> Routing {
    let view = state.cluster_view();
    if !view.is_clustered() {
        return Routing::Local;
    }
    // Compared in place: this runs for every command, and key_arguments lowercases already.
    let name = args.command().unwrap_or_default();
    let is = |word: &[u8]| name.eq_ignore_ascii_case(word);
    if is(b"keys") || is(b"dbsize") || is(b"randomkey") {
        return Routing::Gather;
    }
    if is(b"scan") {
        return scan_route(view, keys::namespace_of(state).name(), args);
    }
    if (is(b"sort") || is(b"sort_ro"))
        && let Some(refusal) = sort_pattern_refusal(args)
    {
        return Routing::Refused(refusal);
    }
    if is(b"ssubscribe") {
        // A shard channel's messages are published on its partition's master (SPUBLISH is
        // routed there), as Redis Cluster's are on its slot's shard.
        return match keys_route(state, database, args) {
            None | Some(Routing::Local) => Routing::Local,
            Some(Routing::Forward(_)) => Routing::Refused(SSUBSCRIBE_ELSEWHERE),
            Some(other) => other,
        };
    }
    if is(b"watch") {
        // A watch lives in this connection's session, on this node's records: a key another
        // node masters changes there, unseen here.
        return match keys_route(state, database, args) {
            None | Some(Routing::Local) => Routing::Local,
            Some(Routing::Unavailable) => Routing::Unavailable,
            Some(_) => Routing::Refused(WATCH_ELSEWHERE),
        };
    }
    keys_route(state, database, args).unwrap_or(Routing::Local)
}

/// Where the commands a transaction queued should run when EXEC comes (clustered servers
/// only): here, or whole on the one other node that masters all their keys (when nothing is
/// watched here); keys of several masters get CROSSSLOT, as in Redis Cluster. Commands
/// without keys run wherever the others do.
pub fn route_transaction(
    state: &ServerState,
    mut database: Database,
    queued: &[Args],
    watching: bool,
) -> Routing {
    let mut routing = None;
    for args in queued {
        // A queued SELECT changes the database of the commands after it.
        if args
            .command()
            .is_some_and(|name| name.eq_ignore_ascii_case(b"select"))
            && let Ok(selected) = state.resp_databases.parse(args.get(1))
        {
            database = selected;
        }
        match keys_route(state, database, args) {
            None => {}
            Some(here @ (Routing::CrossSlot | Routing::Unavailable)) => return here,
            Some(here) if routing.is_none_or(|seen| seen == here) => routing = Some(here),
            Some(_) => return Routing::CrossSlot,
        }
    }
    match routing.unwrap_or(Routing::Local) {
        Routing::Forward(_) if watching => Routing::CrossSlot,
        routing => routing,
    }
}

/// WATCH's error for a key another node masters.
pub const WATCH_ELSEWHERE: &str = "ERR WATCH on a cluster takes keys the connected node masters; this key's master is another node";

/// SSUBSCRIBE's error for a shard channel another node masters.
pub const SSUBSCRIBE_ELSEWHERE: &str = "ERR SSUBSCRIBE on a cluster takes shard channels the connected node masters; this channel's master is another node";

/// Redis Cluster's refusals of SORT patterns, whose keys may be mastered anywhere (Osprey has
/// no hash tags to pin them to the sorted key's partition).
const SORT_BY_ELSEWHERE: &str = "ERR BY option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.";
const SORT_GET_ELSEWHERE: &str = "ERR GET option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.";

/// Why a SORT is refused on a cluster, as Redis Cluster refuses it: a BY pattern with a `*`
/// (one without sorts nothing and reads no key), or a GET pattern other than `#`.
fn sort_pattern_refusal(args: &Args) -> Option<&'static str> {
    let mut index = 2;
    while index + 1 < args.len() {
        let (option, value) = (args.get(index), args.get(index + 1));
        if option.eq_ignore_ascii_case(b"by") && value.contains(&b'*') {
            return Some(SORT_BY_ELSEWHERE);
        }
        if option.eq_ignore_ascii_case(b"get") && value != b"#" {
            return Some(SORT_GET_ELSEWHERE);
        }
        index += 1;
    }
    None
}

/// The key a STORE (or STOREDIST) option names, for the commands that take one after their
/// other arguments: SORT, GEORADIUS, GEORADIUSBYMEMBER.
fn store_key<'a>(name: &[u8], args: &'a Args) -> Option<&'a [u8]> {
    if !matches!(name, b"sort" | b"georadius" | b"georadiusbymember") {
        return None;
    }
    (2..args.len().saturating_sub(1))
        .find(|index| {
            let option = args.get(*index);
            option.eq_ignore_ascii_case(b"store") || option.eq_ignore_ascii_case(b"storedist")
        })
        .map(|index| args.get(index + 1))
}

/// The destination of the commands that name it before a key count: ZUNIONSTORE,
/// ZINTERSTORE, ZDIFFSTORE.
fn destination_key<'a>(name: &[u8], args: &'a Args) -> Option<&'a [u8]> {
    matches!(name, b"zunionstore" | b"zinterstore" | b"zdiffstore").then(|| args.get(1))
}

/// Whether this node's engine masters the partition of every key of `args`: its map may say
/// so before the roles are applied (a change in progress), and a command run then would be
/// refused.
pub fn masters_here(state: &ServerState, database: Database, args: &Args) -> bool {
    let namespace = keys::namespace_of(state);
    let set = state.resp_databases.set_name(database).as_bytes();
    key_arguments(args).all(|key| {
        namespace.partition_role(partition_of(set, key)).0 == engine::PartitionRole::Master
    })
}

/// Whether a command the engine refused with UNAVAILABLE may run again: one that names at most
/// one key was refused before it changed anything (the refusal comes when it enters the
/// partition); one over several keys may have changed some.
pub fn runs_again_safely(args: &Args) -> bool {
    key_arguments(args).nth(1).is_none()
}

/// How long a command whose partitions' roles here lag the map waits for them, as an
/// Aerospike request does (`dispatch::handle_when_ready`).
pub const MAP_CATCH_UP: std::time::Duration = std::time::Duration::from_millis(500);

/// [`execute_off_the_runtime_if_long`] of a command another node forwarded here by a map
/// newer than this node's roles, or refused for an instant (UNAVAILABLE): held back, at most
/// [`MAP_CATCH_UP`] in all, until this node masters every key's partition
/// ([`masters_here`]) and the command is not refused, as the client's own node would hold it.
async fn execute_when_ready(session: Session, args: &Args) -> Option<(Session, Vec<u8>)> {
    let state = Arc::clone(&session.state);
    let Some(node) = state.cluster_node() else {
        return execute_off_the_runtime_if_long(session, args).await;
    };
    let deadline = tokio::time::Instant::now() + MAP_CATCH_UP;
    let mut session = session;
    loop {
        let seen = node.layout_version();
        if !masters_here(&state, session.database, args)
            && node.wait_layout_after(seen, deadline).await
        {
            continue;
        }
        let (ran, out, unavailable) = execute_off_the_runtime_if_long_noting(session, args).await?;
        session = ran;
        let again = unavailable && runs_again_safely(args);
        if !again || !node.wait_layout_after(seen, deadline).await {
            return Some((session, out));
        }
    }
}

/// Where the keys of `args` are mastered: here, on one other node, on several (CROSSSLOT), or
/// nowhere now; `None` when the command names no key.
fn keys_route(state: &ServerState, database: Database, args: &Args) -> Option<Routing> {
    let view = state.cluster_view();
    let namespace = keys::namespace_of(state).name();
    let set = state.resp_databases.set_name(database).as_bytes();
    let mut routing = None;
    for key in key_arguments(args) {
        let partition = partition_of(set, key);
        let here = match view.route(namespace, partition, false) {
            Route::Local => Routing::Local,
            Route::Forward(node) => Routing::Forward(node),
            Route::Unavailable => return Some(Routing::Unavailable),
        };
        match routing {
            None => routing = Some(here),
            Some(seen) if seen != here => return Some(Routing::CrossSlot),
            Some(_) => {}
        }
    }
    routing
}

/// The payload forwarding a transaction: MULTI, the queued commands, EXEC, for a client
/// speaking RESP `protocol`; the node that serves it answers with EXEC's reply alone.
pub fn forward_transaction_payload(protocol: u8, database: Database, queued: &[Args]) -> Vec<u8> {
    let mut payload = payload_start(protocol, database);
    wire_resp::encode_command(&mut payload, &[b"MULTI".as_slice()]);
    for args in queued {
        encode_args(&mut payload, args);
    }
    wire_resp::encode_command(&mut payload, &[b"EXEC".as_slice()]);
    payload
}

/// SCAN runs on its cursor partition's master (an invalid or finished cursor: here, which
/// answers it as a single server would).
fn scan_route(view: &dyn ClusterView, namespace: &str, args: &Args) -> Routing {
    let cursor = (args.len() > 1)
        .then(|| keyspace::parse_cursor(args.get(1)))
        .flatten();
    let Some(partition) = cursor.and_then(|c| u16::try_from(c).ok()) else {
        return Routing::Local;
    };
    if usize::from(partition) >= PARTITION_COUNT {
        return Routing::Local;
    }
    match view.route(namespace, PartitionId(partition), false) {
        Route::Local => Routing::Local,
        Route::Forward(node) => Routing::Forward(node),
        Route::Unavailable => Routing::Unavailable,
    }
}

/// Merges the replies every node gave a gathered command (`command`, lower case) into `reply`:
/// DBSIZE sums, KEYS concatenates, RANDOMKEY picks one of the keys found. A node's error is
/// the answer.
pub fn merge_gathered(command: &[u8], parts: &[Vec<u8>], reply: &mut Reply<'_>) {
    let mut values = Vec::new();
    for part in parts {
        match decode_part(part) {
            Ok(part_values) => values.extend(part_values),
            Err(message) => return reply.error(&message),
        }
    }
    match command {
        b"dbsize" => {
            let total = values.iter().map(|value| match value {
                GatheredValue::Integer(count) => *count,
                GatheredValue::Key(_) | GatheredValue::Null => 0,
            });
            reply.integer(total.sum());
        }
        b"keys" => {
            reply.array(values.len());
            for value in &values {
                if let GatheredValue::Key(key) = value {
                    reply.bulk(key);
                }
            }
        }
        _ => {
            let keys: Vec<&[u8]> = values
                .iter()
                .filter_map(|value| match value {
                    GatheredValue::Key(key) => Some(*key),
                    _ => None,
                })
                .collect();
            match keys.len() {
                0 => reply.null(),
                count => reply.bulk(keys[keyspace::random_below(count)]),
            }
        }
    }
}

/// One value of a node's reply to a gathered command.
enum GatheredValue<'a> {
    Integer(i64),
    Key(&'a [u8]),
    Null,
}

/// The values of one node's reply: an integer, a bulk string, a null, or an array of bulk
/// strings; an error reply's message as the error.
fn decode_part(part: &[u8]) -> Result<Vec<GatheredValue<'_>>, String> {
    let malformed = || "ERR a node answered its part malformed".to_owned();
    let (head, head_len) = match wire_resp::decode_reply(part) {
        Ok(Some((head, _))) => (
            head,
            part.iter().position(|b| *b == b'\n').map_or(0, |p| p + 1),
        ),
        _ => return Err(malformed()),
    };
    match head {
        wire_resp::Reply::Integer(count) => Ok(vec![GatheredValue::Integer(count)]),
        wire_resp::Reply::Bulk(key) => Ok(vec![GatheredValue::Key(key)]),
        wire_resp::Reply::Null => Ok(vec![GatheredValue::Null]),
        wire_resp::Reply::Error(message) => Err(String::from_utf8_lossy(message).into_owned()),
        wire_resp::Reply::Aggregate { element_count, .. } => {
            let mut keys = Vec::with_capacity(element_count.min(part.len() / 4));
            let mut position = head_len;
            for _ in 0..element_count {
                match wire_resp::decode_reply(&part[position..]) {
                    Ok(Some((wire_resp::Reply::Bulk(key), used))) => {
                        keys.push(GatheredValue::Key(key));
                        position += used;
                    }
                    _ => return Err(malformed()),
                }
            }
            Ok(keys)
        }
        _ => Err(malformed()),
    }
}

fn partition_of(set: &[u8], key: &[u8]) -> PartitionId {
    super::recent_digests::digest_of(set, key).partition_id()
}

/// The arguments of `args` that name keys, as Redis's command table places them.
fn key_arguments(args: &Args) -> impl Iterator<Item = &[u8]> {
    let name = args.command().unwrap_or_default().to_ascii_lowercase();
    let count = args.len();
    let (first, end, step) = match name.as_slice() {
        b"client" | b"command" | b"echo" | b"hello" | b"ping" | b"quit" | b"reset" | b"select"
        | b"time" | b"dbsize" | b"flushall" | b"flushdb" | b"keys" | b"randomkey" | b"scan"
        | b"multi" | b"exec" | b"discard" | b"unwatch" | b"info" | b"config" | b"sindex.create"
        | b"sindex.drop" | b"sindex.list" | b"sindex.query" | b"publish" | b"pubsub"
        | b"subscribe" | b"psubscribe" | b"unsubscribe" | b"punsubscribe" | b"sunsubscribe"
        | b"script" | b"swapdb" | b"slowlog" | b"latency" | b"debug" | b"wait" | b"waitaof" => {
            (1, 1, 1)
        }
        b"del" | b"exists" | b"touch" | b"unlink" | b"mget" | b"sdiff" | b"sinter" | b"sunion"
        | b"watch" | b"sdiffstore" | b"sinterstore" | b"sunionstore" | b"ssubscribe" => {
            (1, count, 1)
        }
        b"mset" | b"msetnx" => (1, count, 2),
        b"rename" | b"renamenx" | b"smove" | b"copy" | b"geosearchstore" => (1, count.min(3), 1),
        b"pfcount" | b"pfmerge" => (1, count, 1),
        b"bitop" => (2, count, 1),
        // OBJECT ENCODING key, MEMORY USAGE key: the key follows the subcommand.
        b"object" | b"memory" | b"pfdebug" => (2, count.min(3), 1),
        b"blpop" | b"brpop" | b"bzpopmin" | b"bzpopmax" => (1, count - 1, 1),
        b"lmove" | b"rpoplpush" | b"blmove" | b"brpoplpush" => (1, count.min(3), 1),
        b"lmpop" | b"zmpop" | b"zunion" | b"zinter" | b"zdiff" | b"zintercard" => {
            counted_keys(args, 1)
        }
        // Their destination comes first: `destination_key` adds it.
        b"zunionstore" | b"zinterstore" | b"zdiffstore" => counted_keys(args, 2),
        b"zrangestore" | b"lcs" => (1, count.min(3), 1),
        b"blmpop" | b"bzmpop" => counted_keys(args, 2),
        b"eval" | b"evalsha" | b"eval_ro" | b"evalsha_ro" => {
            let keys = std::str::from_utf8(args.get(2.min(count - 1)))
                .ok()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            (3, count.min(3 + keys), 1)
        }
        b"xread" | b"xreadgroup" => streams_keys(args),
        b"xgroup" | b"xinfo" => (2, count.min(3), 1),
        b"sintercard" => {
            let keys = std::str::from_utf8(args.get(1.min(count - 1)))
                .ok()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            (2, count.min(2 + keys), 1)
        }
        _ => (1, count.min(2), 1),
    };
    let store = store_key(&name, args).or_else(|| destination_key(&name, args));
    (first..end.max(first))
        .step_by(step)
        .map(|index| args.get(index))
        .chain(store)
}

/// Where the keys are in a command that gives their count at `count_position` and the keys
/// right after it (LMPOP, ZMPOP, BLMPOP, BZMPOP): as many as it says, at most the rest.
fn counted_keys(args: &Args, count_position: usize) -> (usize, usize, usize) {
    let count = args.len();
    let keys = std::str::from_utf8(args.get(count_position.min(count - 1)))
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    let first = count_position + 1;
    (first, count.min(first.saturating_add(keys)), 1)
}

/// Where XREAD's and XREADGROUP's keys are: after STREAMS, the first half of what follows.
fn streams_keys(args: &Args) -> (usize, usize, usize) {
    let count = args.len();
    // XREADGROUP's group and consumer come first (GROUP g c), and may be named STREAMS.
    let search_from = if args.get(0).eq_ignore_ascii_case(b"xreadgroup") {
        4
    } else {
        1
    };
    let streams =
        (search_from..count).find(|&position| args.get(position).eq_ignore_ascii_case(b"streams"));
    match streams {
        Some(position) => {
            let first = position + 1;
            (first, first + (count - first) / 2, 1)
        }
        None => (1, 1, 1),
    }
}

/// Runs commands forwarded by another node: `payload` is the client's RESP version (one
/// byte), then one command as RESP, or a whole transaction (MULTI, its commands, EXEC).
/// Returns the last command's reply, once its writes are acknowledged.
pub async fn serve_forwarded(state: &Arc<ServerState>, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let Some((&protocol, mut commands_left)) = payload.split_first() else {
        return out;
    };
    let mut session = Session::forwarded(Arc::clone(state), protocol);
    let mut args = Args::new();
    loop {
        match wire_resp::decode_request(commands_left, &mut args) {
            Ok(Some(size_bytes)) if !args.is_empty() => {
                commands_left = &commands_left[size_bytes..];
                // Only the last reply goes back: a transaction's +OK and +QUEUED were answered
                // by the node the client is connected to.
                let ran = execute_when_ready(session, &args).await;
                (session, out) = match ran {
                    // A blocking command that found nothing waits here, for a bounded time.
                    Some((session, _)) if session.blocking.request.is_some() => {
                        super::blocking::wait_forwarded(session, &args).await
                    }
                    Some(ran) => ran,
                    None => {
                        out.clear();
                        Reply::new(&mut out, protocol).error("ERR the command failed");
                        return out;
                    }
                };
            }
            Ok(None) if commands_left.is_empty() && !out.is_empty() => break,
            _ => {
                out.clear();
                Reply::new(&mut out, protocol).error("ERR malformed forwarded command");
                return out;
            }
        }
    }
    if session.writes.acks.settled().await.is_err() {
        out.clear();
        Reply::new(&mut out, protocol)
            .error("ERR the write could not be confirmed by its replicas");
    }
    out
}

/// Runs `args` in `session` and returns its reply: here, or on the long-request pool when
/// the command may take long (a KEYS over many keys), so that it never holds a runtime worker;
/// `None` if the pool's job failed.
pub async fn execute_off_the_runtime_if_long(
    session: Session,
    args: &Args,
) -> Option<(Session, Vec<u8>)> {
    let (session, out, _) = execute_off_the_runtime_if_long_noting(session, args).await?;
    Some((session, out))
}

/// [`execute_off_the_runtime_if_long`], also telling whether the engine refused the command
/// with UNAVAILABLE ([`Reply::was_unavailable`]).
async fn execute_off_the_runtime_if_long_noting(
    mut session: Session,
    args: &Args,
) -> Option<(Session, Vec<u8>, bool)> {
    let protocol = session.protocol;
    let mut out = Vec::new();
    session.may_offload = true;
    let mut reply = Reply::new(&mut out, protocol);
    let mut after = commands::execute(&mut session, args, &mut reply);
    let mut unavailable = reply.was_unavailable();
    drop(reply);
    while after == After::AwaitScript {
        session.state.scripts.wait_for_turn().await;
        out.clear();
        let mut reply = Reply::new(&mut out, protocol);
        after = commands::execute(&mut session, args, &mut reply);
        unavailable = reply.was_unavailable();
    }
    session.may_offload = false;
    if after != After::Offload {
        return Some((session, out, unavailable));
    }
    let state = Arc::clone(&session.state);
    let args = args.clone();
    let job = move || {
        let mut out = Vec::new();
        let mut reply = Reply::new(&mut out, protocol);
        commands::execute(&mut session, &args, &mut reply);
        let unavailable = reply.was_unavailable();
        drop(reply);
        (session, out, unavailable)
    };
    state.long_requests.run(job).await.ok()
}

/// The start of every forward payload: the client's RESP version, then, for a database other
/// than 0, a SELECT of it (the node that serves the payload answers with the last command's
/// reply only, so the SELECT's +OK is not seen).
pub fn payload_start(protocol: u8, database: Database) -> Vec<u8> {
    let mut payload = vec![protocol];
    if database != Database::default() {
        let number = database.0.to_string();
        wire_resp::encode_command(&mut payload, &[b"SELECT".as_slice(), number.as_bytes()]);
    }
    payload
}

/// The payload forwarding `args` for a client speaking RESP `protocol` in `database`.
pub fn forward_payload(protocol: u8, database: Database, args: &Args) -> Vec<u8> {
    let mut payload = payload_start(protocol, database);
    encode_args(&mut payload, args);
    payload
}

/// Appends `args` to `out` as one RESP command.
fn encode_args(out: &mut Vec<u8>, args: &Args) {
    let arguments: Vec<&[u8]> = (0..args.len()).map(|index| args.get(index)).collect();
    wire_resp::encode_command(out, &arguments);
}
