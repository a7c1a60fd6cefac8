//! Pub/sub: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, their UNSUBSCRIBEs, PUBLISH, SPUBLISH and
//! PUBSUB, with Redis 7.2's replies; how a connection's subscriptions live in its session and
//! how the messages queued for it reach its output (`docs/internals/redis-mapping.md`).
//!
//! A publisher never writes to a subscriber's socket: it queues the message in the
//! subscriber's bounded mailbox (`hub.rs`) and wakes its connection, which moves the messages
//! to its output in arrival order, before the replies of the commands it reads next.
//!
//! Invariants:
//! - A session lists a channel (pattern, shard channel) exactly while the hub has its
//!   mailbox registered under it; dropping the session unregisters them all.
//! - A session has a mailbox from its first subscription on, and keeps it.
//! - In RESP2, a session with a subscription runs only the commands of
//!   [`ALLOWED_WHEN_SUBSCRIBED`]; RESP3 runs any.
//! - A PUBLISH that arrived from another node is delivered here only, never sent on.

mod broadcast;
pub mod hub;
pub mod notify;

use std::collections::HashSet;
use std::sync::Arc;

use wire_resp::Args;

use self::hub::{Delivery, Hub, Kind, Mailbox, Message, Overflowed};
use super::commands::Command;
use super::reply::Reply;
use super::{After, Session};

/// The pub/sub commands.
pub const COMMANDS: &[Command] = &[
    ("psubscribe", -2, psubscribe),
    ("publish", 3, publish),
    ("pubsub", -2, pubsub),
    ("punsubscribe", -1, punsubscribe),
    ("spublish", 3, spublish),
    ("ssubscribe", -2, ssubscribe),
    ("subscribe", -2, subscribe),
    ("sunsubscribe", -1, sunsubscribe),
    ("unsubscribe", -1, unsubscribe),
];

/// The commands a RESP2 connection with a subscription may run, as in Redis.
pub const ALLOWED_WHEN_SUBSCRIBED: &[&str] = &[
    "ping",
    "psubscribe",
    "punsubscribe",
    "quit",
    "reset",
    "ssubscribe",
    "subscribe",
    "sunsubscribe",
    "unsubscribe",
];

/// The most a mailbox holds when neither the `pubsub` class's hard limit nor
/// `client-memory-max` bounds it: a subscriber is never unbounded.
const MAILBOX_BYTES_MAX_UNLIMITED: usize = 1 << 30;

/// One connection's subscriptions.
#[derive(Debug, Default)]
pub struct Subscriptions {
    hub: Option<Arc<Hub>>,
    mailbox: Option<Arc<Mailbox>>,
    channels: HashSet<Arc<[u8]>>,
    patterns: HashSet<Arc<[u8]>>,
    shard_channels: HashSet<Arc<[u8]>>,
    /// In MONITOR mode (`resp/monitor.rs`): the mailbox is in the hub's monitors.
    monitoring: bool,
}

impl Subscriptions {
    /// Whether the connection is in MONITOR mode.
    pub fn is_monitoring(&self) -> bool {
        self.monitoring
    }

    /// Enters MONITOR mode, with a mailbox of `limit_bytes` if it has none yet.
    pub fn start_monitoring(&mut self, hub: &Arc<Hub>, limit_bytes: usize) {
        let mailbox = self.mailbox.get_or_insert_with(|| hub.mailbox(limit_bytes));
        hub.add_monitor(mailbox);
        self.hub.get_or_insert_with(|| Arc::clone(hub));
        self.monitoring = true;
    }

    /// Whether the connection listens to anything (Redis's `CLIENT_PUBSUB`).
    pub fn is_subscribed(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty())
    }

    /// Channels, patterns and shard channels subscribed to (CLIENT LIST's sub, psub, ssub).
    pub fn counts(&self) -> (usize, usize, usize) {
        (
            self.channels.len(),
            self.patterns.len(),
            self.shard_channels.len(),
        )
    }

    /// The mailbox to wait on, while the connection listens to anything or monitors.
    pub fn mailbox(&self) -> Option<&Arc<Mailbox>> {
        self.mailbox
            .as_ref()
            .filter(|_| self.is_subscribed() || self.monitoring)
    }

    /// Channels plus patterns: the count SUBSCRIBE and PSUBSCRIBE replies carry.
    fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    fn names_mut(&mut self, kind: Kind) -> &mut HashSet<Arc<[u8]>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    fn count_of(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.shard_channels.len(),
            Kind::Channel | Kind::Pattern => self.count(),
        }
    }

    /// Drops every subscription, and MONITOR mode, without a reply (RESET).
    pub fn clear(&mut self) {
        if !self.is_subscribed() && !self.monitoring {
            // Most sessions (and a script's stand-in, dropped each run): nothing to drop.
            return;
        }
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            let names: Vec<_> = self.names_mut(kind).drain().collect();
            if let (Some(hub), Some(mailbox)) = (&self.hub, &self.mailbox) {
                for name in names {
                    hub.unsubscribe(kind, &name, mailbox);
                }
            }
        }
        if std::mem::take(&mut self.monitoring)
            && let (Some(hub), Some(mailbox)) = (&self.hub, &self.mailbox)
        {
            hub.remove_monitor(mailbox);
        }
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Redis's refusal of `name` on a RESP2 connection with a subscription, if it is refused.
pub fn refusal(session: &Session, name: &str) -> Option<String> {
    if session.protocol != 2
        || !session.pubsub.is_subscribed()
        || ALLOWED_WHEN_SUBSCRIBED.contains(&name)
    {
        return None;
    }
    Some(format!(
        "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
         RESET are allowed in this context"
    ))
}

/// PING on a RESP2 connection with a subscription answers as a message: `pong` and the
/// argument (or an empty string). Returns whether it answered.
pub fn ping_when_subscribed(session: &Session, args: &Args, reply: &mut Reply<'_>) -> bool {
    if session.protocol != 2 || !session.pubsub.is_subscribed() || args.len() > 2 {
        return false;
    }
    reply.array(2);
    reply.bulk(b"pong");
    reply.bulk(if args.len() == 2 { args.get(1) } else { b"" });
    true
}

/// Moves the messages waiting for the session to `out`, at most `len_max` bytes long in all.
///
/// # Errors
/// The subscriber fell behind: its mailbox overflowed, or the messages would pass `len_max`.
pub fn deliver(session: &Session, out: &mut Vec<u8>, len_max: usize) -> Result<(), Overflowed> {
    let Some(mailbox) = &session.pubsub.mailbox else {
        return Ok(());
    };
    let deliveries = mailbox.take()?;
    let mut reply = Reply::with_limit(out, session.protocol, len_max);
    for delivery in &deliveries {
        write_delivery(&mut reply, delivery);
    }
    if reply.overflowed() {
        return Err(Overflowed);
    }
    Ok(())
}

/// Writes the messages that arrived before a subscription command's own replies, so that
/// they keep their order with them (a message published before an UNSUBSCRIBE comes first).
fn deliver_before_reply(session: &Session, reply: &mut Reply<'_>) {
    let Some(mailbox) = &session.pubsub.mailbox else {
        return;
    };
    // An overflowed mailbox stays so: the connection sees it after this command.
    if let Ok(deliveries) = mailbox.take() {
        for delivery in &deliveries {
            write_delivery(reply, delivery);
        }
    }
}

fn write_delivery(reply: &mut Reply<'_>, delivery: &Delivery) {
    match delivery {
        Delivery::Message(message) => write_message(reply, message),
        Delivery::MonitorLine(line) => reply.simple_bytes(line),
    }
}

fn write_message(reply: &mut Reply<'_>, message: &Message) {
    match message.kind {
        Kind::Channel | Kind::Shard => {
            reply.push(3);
            let kind: &[u8] = if message.kind == Kind::Channel {
                b"message"
            } else {
                b"smessage"
            };
            reply.bulk(kind);
        }
        Kind::Pattern => {
            reply.push(4);
            reply.bulk(b"pmessage");
            reply.bulk(message.pattern.as_deref().unwrap_or_default());
        }
    }
    reply.bulk(&message.channel);
    reply.bulk(&message.payload);
}

fn subscribe(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    subscribe_to(session, args, reply, Kind::Channel)
}

fn psubscribe(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    subscribe_to(session, args, reply, Kind::Pattern)
}

fn ssubscribe(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    subscribe_to(session, args, reply, Kind::Shard)
}

fn unsubscribe(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    unsubscribe_from(session, args, reply, Kind::Channel)
}

fn punsubscribe(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    unsubscribe_from(session, args, reply, Kind::Pattern)
}

fn sunsubscribe(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    unsubscribe_from(session, args, reply, Kind::Shard)
}

/// The word a (un)subscription reply starts with.
fn reply_word(kind: Kind, subscribing: bool) -> &'static [u8] {
    match (kind, subscribing) {
        (Kind::Channel, true) => b"subscribe",
        (Kind::Pattern, true) => b"psubscribe",
        (Kind::Shard, true) => b"ssubscribe",
        (Kind::Channel, false) => b"unsubscribe",
        (Kind::Pattern, false) => b"punsubscribe",
        (Kind::Shard, false) => b"sunsubscribe",
    }
}

fn subscribe_to(session: &mut Session, args: &Args, reply: &mut Reply<'_>, kind: Kind) -> After {
    deliver_before_reply(session, reply);
    let hub = Arc::clone(&session.state.pubsub);
    if session.pubsub.mailbox.is_none() {
        session.pubsub.mailbox = Some(hub.mailbox(mailbox_limit_bytes(session)));
    }
    let subscriptions = &mut session.pubsub;
    let mailbox = Arc::clone(subscriptions.mailbox.as_ref().expect("set above"));
    subscriptions.hub.get_or_insert_with(|| Arc::clone(&hub));
    for position in 1..args.len() {
        let name: Arc<[u8]> = Arc::from(args.get(position));
        if subscriptions.names_mut(kind).insert(Arc::clone(&name)) {
            hub.subscribe(kind, &name, &mailbox);
        }
        reply.push(3);
        reply.bulk(reply_word(kind, true));
        reply.bulk(&name);
        reply.integer(subscriptions.count_of(kind) as i64);
    }
    After::Continue
}

fn unsubscribe_from(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    kind: Kind,
) -> After {
    deliver_before_reply(session, reply);
    let hub = Arc::clone(&session.state.pubsub);
    let subscriptions = &mut session.pubsub;
    let names: Vec<Arc<[u8]>> = if args.len() == 1 {
        subscriptions.names_mut(kind).iter().cloned().collect()
    } else {
        (1..args.len())
            .map(|position| Arc::from(args.get(position)))
            .collect()
    };
    if names.is_empty() {
        reply.push(3);
        reply.bulk(reply_word(kind, false));
        reply.null();
        reply.integer(subscriptions.count_of(kind) as i64);
    }
    for name in names {
        if subscriptions.names_mut(kind).remove(&name)
            && let Some(mailbox) = &subscriptions.mailbox
        {
            hub.unsubscribe(kind, &name, mailbox);
        }
        reply.push(3);
        reply.bulk(reply_word(kind, false));
        reply.bulk(&name);
        reply.integer(subscriptions.count_of(kind) as i64);
    }
    After::Continue
}

/// A subscriber's mailbox bound: see [`mailbox_bound`], with the `pubsub` class.
fn mailbox_limit_bytes(session: &Session) -> usize {
    mailbox_bound(session, |limits| limits.pubsub.hard_bytes)
}

/// A mailbox's bound: the hard limit of the client class `hard_bytes_of` picks, else
/// `client-memory-max`, else [`MAILBOX_BYTES_MAX_UNLIMITED`].
pub(super) fn mailbox_bound(
    session: &Session,
    hard_bytes_of: impl Fn(&crate::limits::OutputBufferLimits) -> u64,
) -> usize {
    let state = &session.state;
    let limits = state.config.resp.output_buffer_limits().unwrap_or_default();
    let hard_bytes = usize::try_from(hard_bytes_of(&limits)).unwrap_or(usize::MAX);
    [hard_bytes, state.client_memory.limit_bytes()]
        .into_iter()
        .find(|bytes| *bytes > 0)
        .unwrap_or(MAILBOX_BYTES_MAX_UNLIMITED)
}

/// Whether the session runs a command another node forwarded (`Session::forwarded`), whose
/// client id is 0: client connections' ids start at 1.
fn is_forwarded(session: &Session) -> bool {
    session.client_id == 0
}

/// PUBLISH channel message: delivered to this node's subscribers, and on a cluster sent to
/// every other node, as Redis Cluster does; answers this node's receivers, as Redis Cluster
/// answers.
fn publish(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let (channel, payload) = (args.get(1), args.get(2));
    let receivers = session.state.pubsub.publish(channel, payload, false);
    if session.state.is_clustered() && !is_forwarded(session) {
        let state = &session.state;
        if !state.pubsub.broadcast.publish(state, channel, payload) {
            state
                .pubsub
                .broadcast_dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    reply.integer(receivers as i64);
    After::Continue
}

/// SPUBLISH shardchannel message: delivered to this node's shard channel subscribers (on a
/// cluster, the command runs on the master of the channel's partition, see `routing.rs`).
fn spublish(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let receivers = session.state.pubsub.publish(args.get(1), args.get(2), true);
    reply.integer(receivers as i64);
    After::Continue
}

/// PUBSUB's help, as Redis 7.2 words it.
const PUBSUB_HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Print this help.",
];

/// PUBSUB CHANNELS | NUMSUB | NUMPAT | SHARDCHANNELS | SHARDNUMSUB | HELP, over this node's
/// subscribers (as Redis Cluster answers over one node's).
fn pubsub(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let hub = &session.state.pubsub;
    let subcommand = args.get(1).to_ascii_lowercase();
    let count = args.len();
    match subcommand.as_slice() {
        b"channels" | b"shardchannels" if count <= 3 => {
            let pattern = (count == 3).then(|| args.get(2));
            let channels = hub.channels(subcommand == b"shardchannels", pattern);
            reply.array(channels.len());
            for channel in &channels {
                reply.bulk(channel);
            }
        }
        b"numsub" | b"shardnumsub" => {
            let sharded = subcommand == b"shardnumsub";
            reply.array((count - 2) * 2);
            for position in 2..count {
                reply.bulk(args.get(position));
                reply.integer(hub.subscriber_count(sharded, args.get(position)) as i64);
            }
        }
        b"numpat" if count == 2 => reply.integer(hub.pattern_count() as i64),
        b"help" if count == 2 => {
            reply.array(PUBSUB_HELP.len());
            for line in PUBSUB_HELP {
                reply.simple(line);
            }
        }
        b"numpat" | b"help" => reply.error(&format!(
            "ERR wrong number of arguments for 'pubsub|{}' command",
            String::from_utf8_lossy(&subcommand)
        )),
        b"channels" | b"shardchannels" => reply.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(args.get(1))
        )),
        _ => reply.error(&format!(
            "ERR unknown subcommand '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(&args.get(1)[..args.get(1).len().min(128)])
        )),
    }
    After::Continue
}
