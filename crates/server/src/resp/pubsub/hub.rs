//! The node's pub/sub registry: which connections listen to which channels, patterns and
//! shard channels, and the bounded mailbox through which a publisher hands each one its
//! messages; and the connections in MONITOR mode, whose mailboxes take the lines of the
//! commands the server runs (`resp/monitor.rs`).
//!
//! Invariants:
//! - A mailbox is registered under a channel (pattern, shard channel) exactly while its
//!   connection's `Subscriptions` lists that channel; an empty subscriber map is removed, so
//!   the registry holds no channel without a subscriber.
//! - Publishing never waits on a subscriber: it takes the registry's read lock and, per
//!   receiver, the mailbox's own lock for one push. A mailbox whose queued bytes would pass
//!   its limit takes nothing more and is marked overflowed; its connection then closes.
//! - A mailbox's queued bytes are the sum of its queued deliveries' `size_bytes`.
//! - `monitor_count` is the number of mailboxes in `monitors`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use crate::resp::glob::Glob;

/// What kind of subscription a message reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE: `message`.
    Channel,
    /// PSUBSCRIBE: `pmessage`.
    Pattern,
    /// SSUBSCRIBE: `smessage`.
    Shard,
}

/// One published message on its way to one or more subscribers.
#[derive(Debug)]
pub struct Message {
    /// How it reached the subscriber.
    pub kind: Kind,
    /// The pattern it matched (`Kind::Pattern` only).
    pub pattern: Option<Arc<[u8]>>,
    /// The channel it was published to.
    pub channel: Arc<[u8]>,
    /// What was published.
    pub payload: Arc<[u8]>,
}

/// Framing around a message's bytes, counted with them: the array header and the bulk
/// headers of the kind, channel, pattern and payload.
const MESSAGE_FRAMING_BYTES: usize = 64;

impl Message {
    /// The bytes it costs a mailbox, about what it takes on the wire.
    pub fn size_bytes(&self) -> usize {
        MESSAGE_FRAMING_BYTES
            + self.channel.len()
            + self.payload.len()
            + self.pattern.as_ref().map_or(0, |pattern| pattern.len())
    }
}

/// What a mailbox holds: a published message, or the line of a command for a monitor.
#[derive(Debug, Clone)]
pub enum Delivery {
    /// A published message.
    Message(Arc<Message>),
    /// A monitor's line, without the `+` and the line end.
    MonitorLine(Arc<[u8]>),
}

impl Delivery {
    /// The bytes it costs a mailbox, about what it takes on the wire.
    fn size_bytes(&self) -> usize {
        match self {
            Delivery::Message(message) => message.size_bytes(),
            Delivery::MonitorLine(line) => line.len() + 3,
        }
    }
}

/// One subscribed (or monitoring) connection's queue of deliveries not yet moved to its
/// output.
#[derive(Debug)]
pub struct Mailbox {
    id: u64,
    queue: Mutex<Queue>,
    /// Wakes the connection when the queue turns non-empty or overflows.
    wake: Notify,
    /// The most bytes the queue holds.
    limit_bytes: usize,
}

#[derive(Debug, Default)]
struct Queue {
    messages: VecDeque<Delivery>,
    queued_bytes: usize,
    overflowed: bool,
}

impl Mailbox {
    /// Queues `delivery`, unless it would pass the limit: then the mailbox overflows and takes
    /// nothing more. Returns whether it was queued.
    fn push(&self, delivery: Delivery) -> bool {
        let size_bytes = delivery.size_bytes();
        let mut queue = self.queue.lock();
        if queue.overflowed {
            return false;
        }
        let was_empty = queue.messages.is_empty();
        if queue.queued_bytes + size_bytes > self.limit_bytes {
            queue.overflowed = true;
            queue.messages.clear();
            queue.queued_bytes = 0;
            drop(queue);
            self.wake.notify_one();
            return false;
        }
        queue.queued_bytes += size_bytes;
        queue.messages.push_back(delivery);
        drop(queue);
        if was_empty {
            self.wake.notify_one();
        }
        true
    }

    /// Takes the queued deliveries, or `Err` once the mailbox overflowed.
    ///
    /// # Errors
    /// The mailbox overflowed: its connection must close.
    pub fn take(&self) -> Result<VecDeque<Delivery>, Overflowed> {
        let mut queue = self.queue.lock();
        if queue.overflowed {
            return Err(Overflowed);
        }
        queue.queued_bytes = 0;
        Ok(std::mem::take(&mut queue.messages))
    }

    /// Resolves once a message arrived (or the mailbox overflowed) since the last wake.
    pub async fn arrived(&self) {
        self.wake.notified().await;
    }
}

/// A mailbox overflowed: its subscriber did not keep up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflowed;

type Subscribers = HashMap<u64, Arc<Mailbox>>;

#[derive(Debug, Default)]
struct Registry {
    channels: HashMap<Arc<[u8]>, Subscribers>,
    shard_channels: HashMap<Arc<[u8]>, Subscribers>,
    patterns: HashMap<Arc<[u8]>, (Glob, Subscribers)>,
}

/// The node's pub/sub registry and its counters.
#[derive(Debug, Default)]
pub struct Hub {
    registry: RwLock<Registry>,
    next_mailbox_id: AtomicU64,
    /// `notify-keyspace-events` as Redis's flags (see `notify.rs`).
    pub notify_flags: AtomicU32,
    /// Messages published here (PUBLISH, SPUBLISH, notifications, other nodes' PUBLISH).
    pub published: AtomicU64,
    /// Messages to other nodes dropped: their queue was full, or a node did not answer.
    pub broadcast_dropped: AtomicU64,
    /// The queue of messages to other nodes, started by the first PUBLISH on a cluster.
    pub broadcast: super::broadcast::Broadcast,
    /// The mailboxes of the connections in MONITOR mode.
    monitors: RwLock<Subscribers>,
    /// How many there are: the one load a command makes when nobody monitors.
    monitor_count: AtomicUsize,
}

impl Hub {
    /// A hub with `notify-keyspace-events` set to `classes` (ignored when it does not parse:
    /// the configuration is validated at load).
    pub fn with_notify_flags(classes: &str) -> Hub {
        let hub = Hub::default();
        let flags = super::notify::parse_flags(classes.as_bytes()).unwrap_or(0);
        hub.notify_flags.store(flags, Ordering::Relaxed);
        hub
    }

    /// A new mailbox holding at most `limit_bytes`.
    pub fn mailbox(&self, limit_bytes: usize) -> Arc<Mailbox> {
        Arc::new(Mailbox {
            id: self.next_mailbox_id.fetch_add(1, Ordering::Relaxed),
            queue: Mutex::default(),
            wake: Notify::new(),
            limit_bytes,
        })
    }

    /// Registers `mailbox` under `name` of `kind`.
    pub fn subscribe(&self, kind: Kind, name: &Arc<[u8]>, mailbox: &Arc<Mailbox>) {
        let mut registry = self.registry.write();
        let subscribers = match kind {
            Kind::Channel => registry.channels.entry(Arc::clone(name)).or_default(),
            Kind::Shard => registry.shard_channels.entry(Arc::clone(name)).or_default(),
            Kind::Pattern => {
                &mut registry
                    .patterns
                    .entry(Arc::clone(name))
                    .or_insert_with(|| (Glob::new(name), Subscribers::new()))
                    .1
            }
        };
        subscribers.insert(mailbox.id, Arc::clone(mailbox));
    }

    /// Removes `mailbox` from `name` of `kind`, and the name once nobody listens.
    pub fn unsubscribe(&self, kind: Kind, name: &[u8], mailbox: &Mailbox) {
        let mut registry = self.registry.write();
        let emptied = match kind {
            Kind::Channel => remove_from(registry.channels.get_mut(name), mailbox.id),
            Kind::Shard => remove_from(registry.shard_channels.get_mut(name), mailbox.id),
            Kind::Pattern => remove_from(
                registry
                    .patterns
                    .get_mut(name)
                    .map(|(_, subscribers)| subscribers),
                mailbox.id,
            ),
        };
        if emptied {
            match kind {
                Kind::Channel => registry.channels.remove(name),
                Kind::Shard => registry.shard_channels.remove(name),
                Kind::Pattern => registry
                    .patterns
                    .remove(name)
                    .map(|(_, subscribers)| subscribers),
            };
        }
    }

    /// Delivers `payload` on `channel` to this node's subscribers of the channel and of the
    /// patterns it matches (`sharded`: to shard channel subscribers only). Returns the
    /// receivers, as PUBLISH answers; a mailbox that overflowed counts as one.
    pub fn publish(&self, channel: &[u8], payload: &[u8], sharded: bool) -> usize {
        self.published.fetch_add(1, Ordering::Relaxed);
        let registry = self.registry.read();
        let direct = if sharded {
            registry.shard_channels.get(channel)
        } else {
            registry.channels.get(channel)
        };
        let matching_patterns = || {
            registry
                .patterns
                .iter()
                .filter(|(_, (glob, _))| glob.matches(channel))
        };
        if direct.is_none() && (sharded || matching_patterns().next().is_none()) {
            return 0;
        }
        let channel: Arc<[u8]> = Arc::from(channel);
        let payload: Arc<[u8]> = Arc::from(payload);
        let mut receivers = 0;
        if let Some(subscribers) = direct {
            let kind = if sharded { Kind::Shard } else { Kind::Channel };
            let message = Arc::new(Message {
                kind,
                pattern: None,
                channel: Arc::clone(&channel),
                payload: Arc::clone(&payload),
            });
            receivers += deliver(subscribers, &message);
        }
        if sharded {
            return receivers;
        }
        for (pattern, (_, subscribers)) in matching_patterns() {
            let message = Arc::new(Message {
                kind: Kind::Pattern,
                pattern: Some(Arc::clone(pattern)),
                channel: Arc::clone(&channel),
                payload: Arc::clone(&payload),
            });
            receivers += deliver(subscribers, &message);
        }
        receivers
    }

    /// Channels (or shard channels) with a subscriber whose name matches `pattern` (all
    /// without one).
    pub fn channels(&self, sharded: bool, pattern: Option<&[u8]>) -> Vec<Arc<[u8]>> {
        let glob = pattern.map(Glob::new);
        let registry = self.registry.read();
        let channels = if sharded {
            &registry.shard_channels
        } else {
            &registry.channels
        };
        channels
            .keys()
            .filter(|name| glob.as_ref().is_none_or(|glob| glob.matches(name)))
            .cloned()
            .collect()
    }

    /// How many connections subscribe to `channel` (patterns not counted), as NUMSUB counts.
    pub fn subscriber_count(&self, sharded: bool, channel: &[u8]) -> usize {
        let registry = self.registry.read();
        let channels = if sharded {
            &registry.shard_channels
        } else {
            &registry.channels
        };
        channels.get(channel).map_or(0, HashMap::len)
    }

    /// Adds `mailbox` to the monitors.
    pub fn add_monitor(&self, mailbox: &Arc<Mailbox>) {
        let mut monitors = self.monitors.write();
        monitors.insert(mailbox.id, Arc::clone(mailbox));
        self.monitor_count.store(monitors.len(), Ordering::Release);
    }

    /// Removes `mailbox` from the monitors.
    pub fn remove_monitor(&self, mailbox: &Mailbox) {
        let mut monitors = self.monitors.write();
        monitors.remove(&mailbox.id);
        self.monitor_count.store(monitors.len(), Ordering::Release);
    }

    /// Whether any connection monitors.
    pub fn has_monitors(&self) -> bool {
        self.monitor_count.load(Ordering::Acquire) > 0
    }

    /// Hands `line` to every monitor.
    pub fn feed_monitors(&self, line: Vec<u8>) {
        let line: Arc<[u8]> = Arc::from(line);
        for mailbox in self.monitors.read().values() {
            mailbox.push(Delivery::MonitorLine(Arc::clone(&line)));
        }
    }

    /// How many distinct patterns have a subscriber (NUMPAT).
    pub fn pattern_count(&self) -> usize {
        self.registry.read().patterns.len()
    }
}

/// Removes `id` from `subscribers`; whether they are now empty.
fn remove_from(subscribers: Option<&mut Subscribers>, id: u64) -> bool {
    subscribers.is_some_and(|subscribers| {
        subscribers.remove(&id);
        subscribers.is_empty()
    })
}

fn deliver(subscribers: &Subscribers, message: &Arc<Message>) -> usize {
    for mailbox in subscribers.values() {
        mailbox.push(Delivery::Message(Arc::clone(message)));
    }
    subscribers.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> Arc<[u8]> {
        Arc::from(text.as_bytes())
    }

    #[test]
    fn publish_reaches_channel_and_pattern_subscribers_and_counts_them() {
        let hub = Hub::default();
        let first = hub.mailbox(1 << 20);
        let second = hub.mailbox(1 << 20);
        hub.subscribe(Kind::Channel, &name("news"), &first);
        hub.subscribe(Kind::Pattern, &name("n*"), &second);
        hub.subscribe(Kind::Pattern, &name("x*"), &second);
        assert_eq!(hub.publish(b"news", b"hi", false), 2);
        assert_eq!(hub.publish(b"news", b"hi", true), 0);
        let got = second.take().unwrap();
        assert_eq!(got.len(), 1);
        let Delivery::Message(message) = &got[0] else {
            panic!("a message, got {got:?}");
        };
        assert_eq!(message.kind, Kind::Pattern);
        assert_eq!(message.pattern.as_deref(), Some(b"n*".as_slice()));
        let Delivery::Message(message) = &first.take().unwrap()[0] else {
            panic!("a message");
        };
        assert_eq!(message.payload.as_ref(), b"hi");
    }

    #[test]
    fn unsubscribing_the_last_subscriber_removes_the_channel() {
        let hub = Hub::default();
        let mailbox = hub.mailbox(1 << 20);
        hub.subscribe(Kind::Channel, &name("a"), &mailbox);
        hub.subscribe(Kind::Pattern, &name("a*"), &mailbox);
        assert_eq!(hub.channels(false, None).len(), 1);
        assert_eq!(hub.pattern_count(), 1);
        hub.unsubscribe(Kind::Channel, b"a", &mailbox);
        hub.unsubscribe(Kind::Pattern, b"a*", &mailbox);
        assert!(hub.channels(false, None).is_empty());
        assert_eq!(hub.pattern_count(), 0);
        assert_eq!(hub.publish(b"a", b"x", false), 0);
    }

    #[test]
    fn a_mailbox_past_its_limit_overflows_and_takes_nothing_more() {
        let hub = Hub::default();
        let mailbox = hub.mailbox(1000);
        hub.subscribe(Kind::Channel, &name("c"), &mailbox);
        let payload = [0u8; 400];
        hub.publish(b"c", &payload, false);
        hub.publish(b"c", &payload, false);
        hub.publish(b"c", &payload, false);
        assert!(matches!(mailbox.take(), Err(Overflowed)));
        assert_eq!(mailbox.queue.lock().queued_bytes, 0);
    }

    #[test]
    fn monitors_get_every_line_until_removed() {
        let hub = Hub::default();
        assert!(!hub.has_monitors());
        let (first, second) = (hub.mailbox(1 << 20), hub.mailbox(1 << 20));
        hub.add_monitor(&first);
        hub.add_monitor(&second);
        assert!(hub.has_monitors());
        hub.feed_monitors(b"1.000001 [0 lua] \"get\"".to_vec());
        hub.remove_monitor(&first);
        hub.feed_monitors(b"second only".to_vec());
        assert_eq!(first.take().unwrap().len(), 1);
        let lines: Vec<_> = second.take().unwrap().into_iter().collect();
        assert!(matches!(&lines[1], Delivery::MonitorLine(line) if &line[..] == b"second only"));
        hub.remove_monitor(&second);
        assert!(!hub.has_monitors());
    }
}
