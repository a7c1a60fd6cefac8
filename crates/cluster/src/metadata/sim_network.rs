//! An in-process network for metadata-group tests: a hub that routes each message to the
//! target's [`MetaGroup::handle_rpc`] after a seeded random delay, and can cut links, isolate
//! nodes and drop messages.
//!
//! Run it under tokio's paused clock (a current-thread runtime with `start_paused`): delays and
//! timeouts then cost no wall time, and elections of a second take microseconds.
//!
//! Invariants:
//! - Every random choice (delays, drops) comes from one generator seeded by the test, drawn in
//!   the order messages are sent. The same seed and the same task interleaving replay the same
//!   run; openraft's own election jitter and tokio's `select!` draw from unseeded generators, so
//!   a replay is faithful in its network decisions, not always in every timing.
//! - A cut link refuses messages ([`TransportError::Unreachable`]) after the delay; a message in
//!   flight when its link is cut, or a randomly dropped one, is lost silently and the sender's
//!   deadline expires.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::NodeId;
use super::group::MetaGroup;
use super::network::{MetaTransport, TransportError, TransportFuture};
use super::node_info::NodeInfo;

/// Delays and losses of the simulated network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Shortest one-way delay.
    pub delay_ms_min: u64,
    /// Longest one-way delay (inclusive).
    pub delay_ms_max: u64,
    /// Messages lost per thousand sent, on open links.
    pub drop_per_mille: u64,
}

/// The hub; clones share it.
#[derive(Clone)]
pub struct SimNetwork {
    inner: Arc<Mutex<SimInner>>,
}

struct SimInner {
    rng: SplitMix64,
    config: SimConfig,
    groups: BTreeMap<NodeId, MetaGroup>,
    isolated: BTreeSet<NodeId>,
    cut_links: BTreeSet<(NodeId, NodeId)>,
    messages_sent: u64,
    messages_dropped: u64,
}

/// What happens to one message.
enum Fate {
    Deliver {
        request_delay: Duration,
        reply_delay: Duration,
    },
    Refuse {
        delay: Duration,
    },
    Lose,
}

/// The transport of one node on the hub.
struct SimTransport {
    from: NodeId,
    network: SimNetwork,
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, seedable, good enough for test decisions.
struct SplitMix64 {
    state: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            delay_ms_min: 1,
            delay_ms_max: 20,
            drop_per_mille: 0,
        }
    }
}

impl SimNetwork {
    /// An empty hub whose random choices follow `seed`.
    pub fn new(seed: u64, config: SimConfig) -> Self {
        assert!(
            config.delay_ms_min <= config.delay_ms_max,
            "delay range {}..={} is empty",
            config.delay_ms_min,
            config.delay_ms_max
        );
        let inner = SimInner {
            rng: SplitMix64 { state: seed },
            config,
            groups: BTreeMap::new(),
            isolated: BTreeSet::new(),
            cut_links: BTreeSet::new(),
            messages_sent: 0,
            messages_dropped: 0,
        };
        Self {
            inner: Arc::new(Mutex::new(inner)),
        }
    }

    /// The transport for node `from`'s messages.
    pub fn transport(&self, from: NodeId) -> Arc<dyn MetaTransport> {
        Arc::new(SimTransport {
            from,
            network: self.clone(),
        })
    }

    /// Makes `group` reachable under its node id (replacing an earlier one: a restart).
    pub fn attach(&self, group: &MetaGroup) {
        let mut inner = self.inner.lock();
        inner.groups.insert(group.node_id(), group.clone());
    }

    /// Makes node `id` unreachable, as if it crashed; returns its group, if it was attached.
    pub fn detach(&self, id: NodeId) -> Option<MetaGroup> {
        self.inner.lock().groups.remove(&id)
    }

    /// Cuts node `id` off from every other node, both ways.
    pub fn isolate(&self, id: NodeId) {
        self.inner.lock().isolated.insert(id);
    }

    /// Cuts the link between `a` and `b`, both ways.
    pub fn cut(&self, a: NodeId, b: NodeId) {
        let mut inner = self.inner.lock();
        inner.cut_links.insert((a, b));
        inner.cut_links.insert((b, a));
    }

    /// Restores every link and every isolated node.
    pub fn heal(&self) {
        let mut inner = self.inner.lock();
        inner.isolated.clear();
        inner.cut_links.clear();
    }

    /// Sets the share of messages lost on open links, per thousand.
    pub fn set_drop_per_mille(&self, drop_per_mille: u64) {
        self.inner.lock().config.drop_per_mille = drop_per_mille;
    }

    /// Messages sent and messages randomly lost so far.
    pub fn message_counts(&self) -> (u64, u64) {
        let inner = self.inner.lock();
        (inner.messages_sent, inner.messages_dropped)
    }

    fn fate(&self, from: NodeId, to: NodeId) -> Fate {
        let mut inner = self.inner.lock();
        inner.messages_sent += 1;
        let request_delay = inner.delay();
        if !inner.link_open(from, to) {
            return Fate::Refuse {
                delay: request_delay,
            };
        }
        let drop_per_mille = inner.config.drop_per_mille;
        if inner.rng.below(1_000) < drop_per_mille {
            inner.messages_dropped += 1;
            return Fate::Lose;
        }
        let reply_delay = inner.delay();
        Fate::Deliver {
            request_delay,
            reply_delay,
        }
    }

    fn reachable_group(&self, from: NodeId, to: NodeId) -> Option<MetaGroup> {
        let inner = self.inner.lock();
        if !inner.link_open(from, to) {
            return None;
        }
        inner.groups.get(&to).cloned()
    }

    fn link_open(&self, from: NodeId, to: NodeId) -> bool {
        self.inner.lock().link_open(from, to)
    }
}

impl SimInner {
    fn link_open(&self, from: NodeId, to: NodeId) -> bool {
        let isolated = self.isolated.contains(&from) || self.isolated.contains(&to);
        !isolated && !self.cut_links.contains(&(from, to))
    }

    fn delay(&mut self) -> Duration {
        let span = self.config.delay_ms_max - self.config.delay_ms_min + 1;
        Duration::from_millis(self.config.delay_ms_min + self.rng.below(span))
    }
}

impl MetaTransport for SimTransport {
    fn send(&self, target: NodeId, _target_info: &NodeInfo, request: Vec<u8>) -> TransportFuture {
        let from = self.from;
        let network = self.network.clone();
        Box::pin(async move {
            let (request_delay, reply_delay) = match network.fate(from, target) {
                Fate::Deliver {
                    request_delay,
                    reply_delay,
                } => (request_delay, reply_delay),
                Fate::Refuse { delay } => {
                    tokio::time::sleep(delay).await;
                    return Err(TransportError::Unreachable { target });
                }
                Fate::Lose => return std::future::pending().await,
            };
            tokio::time::sleep(request_delay).await;
            let Some(group) = network.reachable_group(from, target) else {
                return std::future::pending().await;
            };
            let reply = group.handle_rpc(&request).await;
            tokio::time::sleep(reply_delay).await;
            if !network.link_open(target, from) {
                return std::future::pending().await;
            }
            Ok(reply)
        })
    }
}

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound`; `bound` must be positive.
    fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "below(0) has no value");
        self.next_u64() % bound
    }
}
