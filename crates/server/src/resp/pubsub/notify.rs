//! Keyspace notifications (`notify-keyspace-events`): after a Redis command changes a key,
//! a message on `__keyspace@<db>__:<key>` (the event name) and on
//! `__keyevent@<db>__:<event>` (the key), with the session's database, Redis's event names
//! and classes.
//!
//! Whether a command changed a key is what the engine says: before the command runs, an
//! engine watch is set on each key it may change (only while notifications are on, and only
//! for the commands of [`EVENTS`]); a key whose watch turned dirty was written or deleted.
//! A key a write left absent (a collection emptied, an expiry in the past) also gets `del`.
//!
//! Invariants:
//! - With `notify-keyspace-events` empty, a command costs one atomic load here.
//! - Notifications are published on this node only, as Redis Cluster's are.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use engine::{ChangeKind, RemovalListener, Watch};
use model::ParticleType;
use wire_resp::Args;

use super::hub::Hub;
use crate::resp::Databases;

use super::Session;
use crate::resp::keys::Target;
use crate::resp::streams::StreamValue;

/// Redis's notification classes (`server.h`'s `NOTIFY_*`).
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: `__keyevent@<db>__:<event>` channels.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, ...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: expired keys.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: evicted keys.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: key misses (not in `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events.
pub const MODULE: u32 = 1 << 13;
/// `n`: new keys.
pub const NEW: u32 = 1 << 14;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Redis's error for a class character it does not know.
pub const INVALID_CLASS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// Parses Redis's class characters (`KEA`, `Kx`, ...); `None` for an unknown one.
pub fn parse_flags(text: &[u8]) -> Option<u32> {
    text.iter().try_fold(0, |flags, byte| {
        let class = match byte {
            b'A' => ALL,
            b'g' => GENERIC,
            b'$' => STRING,
            b'l' => LIST,
            b's' => SET,
            b'h' => HASH,
            b'z' => ZSET,
            b'x' => EXPIRED,
            b'e' => EVICTED,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => STREAM,
            b'm' => KEY_MISS,
            b'd' => MODULE,
            b'n' => NEW,
            _ => return None,
        };
        Some(flags | class)
    })
}

/// The flags as CONFIG GET prints them (Redis's `keyspaceEventsFlagsToString`).
pub fn flags_text(flags: u32) -> String {
    let mut text = String::new();
    if flags & ALL == ALL {
        text.push('A');
    } else {
        for (class, letter) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & class != 0 {
                text.push(letter);
            }
        }
    }
    for (class, letter) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & class != 0 {
            text.push(letter);
        }
    }
    text
}

/// Which arguments of a command are the keys an event is about.
#[derive(Clone, Copy, Debug)]
enum Keys {
    /// Argument `n`.
    At(usize),
    /// Every argument from `n` on.
    From(usize),
    /// Every other argument from `n` on (MSET's keys).
    EveryOtherFrom(usize),
}

/// A command that may change keys: its class, and the event of each key.
struct Events {
    command: &'static str,
    class: u32,
    keys: &'static [(Keys, &'static str)],
}

const fn events(
    command: &'static str,
    class: u32,
    keys: &'static [(Keys, &'static str)],
) -> Events {
    Events {
        command,
        class,
        keys,
    }
}

/// The commands that notify, with Redis's event names (`notifyKeyspaceEvent` calls in
/// `t_*.c`, `db.c`, `expire.c`).
const EVENTS: &[Events] = &[
    events("set", STRING, &[(Keys::At(1), "set")]),
    events("setnx", STRING, &[(Keys::At(1), "set")]),
    events("setex", STRING, &[(Keys::At(1), "set")]),
    events("psetex", STRING, &[(Keys::At(1), "set")]),
    events("getset", STRING, &[(Keys::At(1), "set")]),
    events("mset", STRING, &[(Keys::EveryOtherFrom(1), "set")]),
    events("msetnx", STRING, &[(Keys::EveryOtherFrom(1), "set")]),
    events("append", STRING, &[(Keys::At(1), "append")]),
    events("setrange", STRING, &[(Keys::At(1), "setrange")]),
    events("incr", STRING, &[(Keys::At(1), "incrby")]),
    events("incrby", STRING, &[(Keys::At(1), "incrby")]),
    events("decr", STRING, &[(Keys::At(1), "decrby")]),
    events("decrby", STRING, &[(Keys::At(1), "decrby")]),
    events("incrbyfloat", STRING, &[(Keys::At(1), "incrbyfloat")]),
    events("getdel", GENERIC, &[(Keys::At(1), "del")]),
    events("setbit", STRING, &[(Keys::At(1), "setbit")]),
    events("bitfield", STRING, &[(Keys::At(1), "setbit")]),
    events("bitop", STRING, &[(Keys::At(2), "set")]),
    events("pfadd", STRING, &[(Keys::At(1), "pfadd")]),
    events("pfmerge", STRING, &[(Keys::At(1), "pfadd")]),
    events("del", GENERIC, &[(Keys::From(1), "del")]),
    events("unlink", GENERIC, &[(Keys::From(1), "del")]),
    events("expire", GENERIC, &[(Keys::At(1), "expire")]),
    events("pexpire", GENERIC, &[(Keys::At(1), "expire")]),
    events("expireat", GENERIC, &[(Keys::At(1), "expire")]),
    events("pexpireat", GENERIC, &[(Keys::At(1), "expire")]),
    events("persist", GENERIC, &[(Keys::At(1), "persist")]),
    events(
        "rename",
        GENERIC,
        &[(Keys::At(1), "rename_from"), (Keys::At(2), "rename_to")],
    ),
    events(
        "renamenx",
        GENERIC,
        &[(Keys::At(1), "rename_from"), (Keys::At(2), "rename_to")],
    ),
    events("copy", GENERIC, &[(Keys::At(2), "copy_to")]),
    events("lpush", LIST, &[(Keys::At(1), "lpush")]),
    events("lpushx", LIST, &[(Keys::At(1), "lpush")]),
    events("rpush", LIST, &[(Keys::At(1), "rpush")]),
    events("rpushx", LIST, &[(Keys::At(1), "rpush")]),
    events("lpop", LIST, &[(Keys::At(1), "lpop")]),
    events("rpop", LIST, &[(Keys::At(1), "rpop")]),
    events("linsert", LIST, &[(Keys::At(1), "linsert")]),
    events("lset", LIST, &[(Keys::At(1), "lset")]),
    events("lrem", LIST, &[(Keys::At(1), "lrem")]),
    events("ltrim", LIST, &[(Keys::At(1), "ltrim")]),
    events("hset", HASH, &[(Keys::At(1), "hset")]),
    events("hmset", HASH, &[(Keys::At(1), "hset")]),
    events("hsetnx", HASH, &[(Keys::At(1), "hset")]),
    events("hdel", HASH, &[(Keys::At(1), "hdel")]),
    events("hincrby", HASH, &[(Keys::At(1), "hincrby")]),
    events("hincrbyfloat", HASH, &[(Keys::At(1), "hincrbyfloat")]),
    events("sadd", SET, &[(Keys::At(1), "sadd")]),
    events("srem", SET, &[(Keys::At(1), "srem")]),
    events("spop", SET, &[(Keys::At(1), "spop")]),
    events(
        "smove",
        SET,
        &[(Keys::At(1), "srem"), (Keys::At(2), "sadd")],
    ),
    events("sinterstore", SET, &[(Keys::At(1), "sinterstore")]),
    events("sunionstore", SET, &[(Keys::At(1), "sunionstore")]),
    events("sdiffstore", SET, &[(Keys::At(1), "sdiffstore")]),
    events("zadd", ZSET, &[(Keys::At(1), "zadd")]),
    events("geoadd", ZSET, &[(Keys::At(1), "zadd")]),
    events("zincrby", ZSET, &[(Keys::At(1), "zincr")]),
    events("zrem", ZSET, &[(Keys::At(1), "zrem")]),
    events("zpopmin", ZSET, &[(Keys::At(1), "zpopmin")]),
    events("zpopmax", ZSET, &[(Keys::At(1), "zpopmax")]),
    events(
        "zremrangebyscore",
        ZSET,
        &[(Keys::At(1), "zremrangebyscore")],
    ),
    events("zremrangebyrank", ZSET, &[(Keys::At(1), "zremrangebyrank")]),
    events("zremrangebylex", ZSET, &[(Keys::At(1), "zremrangebylex")]),
    events("zunionstore", ZSET, &[(Keys::At(1), "zunionstore")]),
    events("zinterstore", ZSET, &[(Keys::At(1), "zinterstore")]),
    events("zdiffstore", ZSET, &[(Keys::At(1), "zdiffstore")]),
    events("zrangestore", ZSET, &[(Keys::At(1), "zrangestore")]),
];

/// The stream commands whose event does not depend on what they did (`t_stream.c`). XADD's
/// trimming (`xtrim` after `xadd` in Redis) is not told.
const STREAM_EVENTS: &[Events] = &[
    events("xadd", STREAM, &[(Keys::At(1), "xadd")]),
    events("xdel", STREAM, &[(Keys::At(1), "xdel")]),
    events("xtrim", STREAM, &[(Keys::At(1), "xtrim")]),
    events("xsetid", STREAM, &[(Keys::At(1), "xsetid")]),
];

/// XGROUP's subcommands and their events, about the key (argument 2).
const XGROUP_EVENTS: &[(&[u8], Events)] = &[
    (
        b"create",
        events("xgroup", STREAM, &[(Keys::At(2), "xgroup-create")]),
    ),
    (
        b"createconsumer",
        events("xgroup", STREAM, &[(Keys::At(2), "xgroup-createconsumer")]),
    ),
    (
        b"delconsumer",
        events("xgroup", STREAM, &[(Keys::At(2), "xgroup-delconsumer")]),
    ),
    (
        b"destroy",
        events("xgroup", STREAM, &[(Keys::At(2), "xgroup-destroy")]),
    ),
    (
        b"setid",
        events("xgroup", STREAM, &[(Keys::At(2), "xgroup-setid")]),
    ),
];

/// The commands that create their consumer when it is new, telling `xgroup-createconsumer`
/// then (and nothing else: what they read or claim is not an event).
const CONSUMER_CREATING: Events = events("xreadgroup", STREAM, &[]);

/// Events whose key, once gone, is told as `del` alone (an expiry in the past deletes; a
/// STORE command whose result is empty deletes its destination, and Redis then tells `del`
/// only).
const DELETING_ALONE: &[&str] = &[
    "expire",
    "del",
    "sinterstore",
    "sunionstore",
    "sdiffstore",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
    "zrangestore",
];

/// The watches of a command that may notify, taken before it runs.
pub struct Pending {
    events: &'static Events,
    watched: Vec<(usize, &'static str, Watch)>,
    /// With class `n` on: whether each watched key existed before the command.
    existed: Vec<bool>,
    /// XREADGROUP, XCLAIM, XAUTOCLAIM: each stream key's position, with whether the consumer
    /// existed in its group before the command.
    consumers: Vec<(usize, bool)>,
}

/// The group and consumer a consumer-creating command names, and its stream keys' positions.
fn consumer_of(name: &str, args: &Args) -> Option<(usize, usize, Vec<usize>)> {
    match name {
        "xclaim" | "xautoclaim" if args.len() > 3 => Some((2, 3, vec![1])),
        "xreadgroup" if args.len() > 3 && args.get(1).eq_ignore_ascii_case(b"group") => {
            let streams =
                (4..args.len()).find(|&p| args.get(p).eq_ignore_ascii_case(b"streams"))?;
            let count = (args.len() - streams - 1) / 2;
            Some((2, 3, (streams + 1..streams + 1 + count).collect()))
        }
        _ => None,
    }
}

/// Whether `consumer` exists in `group` of the stream at `key`.
fn has_consumer(session: &Session, key: &[u8], group: &[u8], consumer: &[u8]) -> bool {
    let target = Target::of(&session.state, session.database, key);
    crate::resp::collection::read(&target, |stream: Option<&StreamValue>| {
        stream
            .and_then(|stream| stream.group(group))
            .is_some_and(|group| group.consumers.contains_key(consumer))
    })
    .unwrap_or(false)
}

/// Sets the watches for a command about to run, when notifications of its class are on.
pub fn before(session: &Session, name: &str, args: &Args) -> Option<Pending> {
    let flags = session.state.pubsub.notify_flags.load(Ordering::Relaxed);
    if flags & (KEYSPACE | KEYEVENT) == 0 {
        return None;
    }
    if let Some((group, consumer, keys)) = consumer_of(name, args) {
        if flags & STREAM == 0 {
            return None;
        }
        let (group, consumer) = (args.get(group), args.get(consumer));
        let consumers = keys
            .into_iter()
            .map(|p| (p, has_consumer(session, args.get(p), group, consumer)))
            .collect();
        return Some(Pending {
            events: &CONSUMER_CREATING,
            watched: Vec::new(),
            existed: Vec::new(),
            consumers,
        });
    }
    let events = if name == "xgroup" {
        let subcommand = args.get(1).to_ascii_lowercase();
        let (_, events) = XGROUP_EVENTS.iter().find(|(s, _)| *s == subcommand)?;
        events
    } else {
        EVENTS
            .iter()
            .chain(STREAM_EVENTS)
            .find(|events| events.command == name)?
    };
    if flags & (events.class | GENERIC | NEW) == 0 {
        return None;
    }
    let namespace = crate::resp::keys::namespace_of(&session.state);
    let mut watched = Vec::new();
    let mut existed = Vec::new();
    for &(keys, event) in events.keys {
        for position in key_positions(keys, args.len()) {
            let target = Target::of(&session.state, session.database, args.get(position));
            watched.push((position, event, namespace.watch(target.digest())));
            if flags & NEW != 0 {
                existed.push(target.view(|current| current.is_some()).unwrap_or(false));
            }
        }
    }
    Some(Pending {
        events,
        watched,
        existed,
        consumers: Vec::new(),
    })
}

/// Publishes the events of the keys the command changed.
pub fn after(session: &Session, args: &Args, pending: Pending) {
    let flags = session.state.pubsub.notify_flags.load(Ordering::Relaxed);
    for &(position, existed) in &pending.consumers {
        let key = args.get(position);
        if !existed && has_consumer(session, key, args.get(2), args.get(3)) {
            notify(session, flags, STREAM, "xgroup-createconsumer", key);
        }
    }
    let exists: Vec<Option<bool>> = pending
        .watched
        .iter()
        .map(|(position, _, watch)| {
            let target = Target::of(&session.state, session.database, args.get(*position));
            watch
                .is_dirty()
                .then(|| target.view(|current| current.is_some()).unwrap_or(false))
        })
        .collect();
    // `new` comes first, as Redis tells it when the key is added, before the command's events.
    for (index, (position, _, _)) in pending.watched.iter().enumerate() {
        if exists[index] == Some(true) && pending.existed.get(index) == Some(&false) {
            notify(session, flags, NEW, "new", args.get(*position));
        }
    }
    for (index, (position, event, _)) in pending.watched.iter().enumerate() {
        let Some(exists) = exists[index] else {
            continue;
        };
        let key = args.get(*position);
        let gone = !exists;
        if !(gone && DELETING_ALONE.contains(event)) {
            notify(session, flags, pending.events.class, event, key);
            if exists && *event == "set" && sets_expiry(pending.events.command, args) {
                notify(session, flags, GENERIC, "expire", key);
            }
        }
        if gone && *event != "rename_from" {
            notify(session, flags, GENERIC, "del", key);
        }
    }
}

/// Whether a string write also set an expiry (SET ... EX, SETEX, PSETEX).
fn sets_expiry(command: &str, args: &Args) -> bool {
    match command {
        "setex" | "psetex" => true,
        "set" => (3..args.len()).any(|position| {
            let option = args.get(position);
            [b"ex".as_slice(), b"px", b"exat", b"pxat"]
                .iter()
                .any(|word| option.eq_ignore_ascii_case(word))
        }),
        _ => false,
    }
}

/// A read command's lookup of `key` in `database` found nothing: `keymiss` (class `m`).
pub fn key_miss(
    state: &crate::state::ServerState,
    database: crate::resp::databases::Database,
    key: &[u8],
) {
    let flags = state.pubsub.notify_flags.load(Ordering::Relaxed);
    if flags & KEY_MISS != 0 {
        publish(&state.pubsub, flags, KEY_MISS, "keymiss", database.0, key);
    }
}

/// Publishes one event of class `class` about `key`, on the channels `flags` ask for.
fn notify(session: &Session, flags: u32, class: u32, event: &str, key: &[u8]) {
    publish(
        &session.state.pubsub,
        flags,
        class,
        event,
        session.database.0,
        key,
    );
}

/// Publishes one event of class `class` about `key` of `database` on `hub`, on the channels
/// `flags` ask for.
fn publish(hub: &Hub, flags: u32, class: u32, event: &str, database: u16, key: &[u8]) {
    if flags & class == 0 {
        return;
    }
    if flags & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{database}__:").into_bytes();
        channel.extend_from_slice(key);
        hub.publish(&channel, event.as_bytes(), false);
    }
    if flags & KEYEVENT != 0 {
        let channel = format!("__keyevent@{database}__:{event}");
        hub.publish(channel.as_bytes(), key, false);
    }
}

/// A change an Aerospike client made to a record of the Redis namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AerospikeChange {
    /// A write (put, operate, touch) that succeeded; `created` when the record was new.
    Written { created: bool },
    /// A delete of a record that existed.
    Deleted,
}

/// The events of a change an Aerospike client made to a record of database `set_name`, sent
/// with its key (`key_field`: particle type, then the key; Redis's events name the key, so a
/// record sent by digest alone has none): `new` (class `n`) for a record it created, then
/// `write` (class `g`, Osprey's event: no Redis command names an Aerospike write) or `del`
/// (class `g`, as Redis's DEL). The RESP commands' writes have their own events (above).
pub fn aerospike_change(
    hub: &Hub,
    databases: &Databases,
    (set_name, key_field): (&[u8], Option<&[u8]>),
    change: AerospikeChange,
) {
    let flags = hub.notify_flags.load(Ordering::Relaxed);
    if flags & (KEYSPACE | KEYEVENT) == 0 || flags & (GENERIC | NEW) == 0 {
        return;
    }
    let Some((&particle_type, key)) = key_field.and_then(<[u8]>::split_first) else {
        return;
    };
    let Some((database, _)) = databases
        .iter()
        .find(|(_, name)| name.as_bytes() == set_name)
    else {
        return;
    };
    let key = key_text(particle_type, key);
    match change {
        AerospikeChange::Written { created } => {
            if created {
                publish(hub, flags, NEW, "new", database.0, &key);
            }
            publish(hub, flags, GENERIC, "write", database.0, &key);
        }
        AerospikeChange::Deleted => publish(hub, flags, GENERIC, "del", database.0, &key),
    }
}

/// A record's key as Redis names it: its bytes, or the decimal text of a key an Aerospike
/// client wrote as an integer.
fn key_text(particle_type: u8, key: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match <[u8; 8]>::try_from(key) {
        Ok(bytes) if particle_type == ParticleType::Integer as u8 => {
            std::borrow::Cow::Owned(i64::from_be_bytes(bytes).to_string().into_bytes())
        }
        _ => std::borrow::Cow::Borrowed(key),
    }
}

/// The events of the keys the server removes itself, which no command names: `expired`
/// (class `x`) when the expiry sweep reclaims a key, `evicted` (class `e`) when eviction
/// does; published on the node master of the key's partition, for the database its set is.
#[derive(Debug)]
pub struct Removals {
    hub: Arc<Hub>,
    databases: Arc<Databases>,
}

impl Removals {
    /// Events on `hub` for the databases `databases`.
    pub fn new(hub: Arc<Hub>, databases: Arc<Databases>) -> Removals {
        Removals { hub, databases }
    }
}

impl RemovalListener for Removals {
    fn listening(&self) -> bool {
        let flags = self.hub.notify_flags.load(Ordering::Relaxed);
        flags & (KEYSPACE | KEYEVENT) != 0 && flags & (EXPIRED | EVICTED) != 0
    }

    fn removed(&self, set_name: &[u8], (particle_type, key): (u8, &[u8]), kind: ChangeKind) {
        let (class, event) = match kind {
            ChangeKind::Expired => (EXPIRED, "expired"),
            ChangeKind::Evicted => (EVICTED, "evicted"),
            ChangeKind::Stored | ChangeKind::Deleted => return,
        };
        let Some((database, _)) = self
            .databases
            .iter()
            .find(|(_, name)| name.as_bytes() == set_name)
        else {
            return;
        };
        // A key written as an integer by an Aerospike client reads as its decimal text.
        let key = key_text(particle_type, key);
        let flags = self.hub.notify_flags.load(Ordering::Relaxed);
        publish(&self.hub, flags, class, event, database.0, &key);
    }
}

fn key_positions(keys: Keys, arg_count: usize) -> impl Iterator<Item = usize> {
    let (start, step) = match keys {
        Keys::At(position) => (position, arg_count),
        Keys::From(position) => (position, 1),
        Keys::EveryOtherFrom(position) => (position, 2),
    };
    (start..arg_count).step_by(step.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_print_as_redis_does() {
        assert_eq!(parse_flags(b"KEA").map(flags_text).as_deref(), Some("AKE"));
        assert_eq!(parse_flags(b"Kg$").map(flags_text).as_deref(), Some("g$K"));
        assert_eq!(parse_flags(b"").map(flags_text).as_deref(), Some(""));
        assert_eq!(
            parse_flags(b"KEAm").map(flags_text).as_deref(),
            Some("AKEm")
        );
        assert_eq!(parse_flags(b"Kq"), None);
    }

    #[test]
    fn every_notifying_command_is_listed_once() {
        let mut names: Vec<&str> = EVENTS.iter().map(|events| events.command).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}
