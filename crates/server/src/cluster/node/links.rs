//! Links between members: the leader removes one node of a pair that stopped hearing each
//! other while it still hears both (a one-way drop, or a partition that splits two members
//! but not the leader from either), and a node cut off from a live member does not ask to
//! join.
//!
//! Without this, a one-way drop between a master and its replica stalls every write of their
//! partitions for as long as it lasts: the master waits for acknowledgements that cannot
//! come, and neither node is silent to the group, so neither is declared dead (the fault
//! suite's one-way test). Aerospike's clustering does the same: the cluster it forms is a
//! clique of nodes that all hear each other, evicting the others.
//!
//! Every member watches the links every formation period, on a task of its own that never
//! waits for a commit, so that a node that becomes the leader during a cut (the cut may be what
//! made the leader step down) knows which pairs were linked before it.
//!
//! Invariants:
//! - Only a pair this node has seen linked both ways, while both stayed live to it without a
//!   break, can be judged cut: a node just joined or just restarted, whose peers have not
//!   dialled it yet, is not removed for it.
//! - A pair is cut only after neither direction came back for the heartbeat timeout, on top
//!   of the timeout that already passed before a node stopped listing the other as heard.
//! - The leader never removes itself, and removes one node per formation period.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::time::Duration;

use cluster::metadata::ClusterState;
use tokio::time::Instant;

use super::ClusterNode;

/// What the leader knows of one pair of members (lower id first) it has seen linked.
#[derive(Clone, Copy, Debug)]
pub(super) struct Link {
    /// Since when one of the two has not heard the other; `None` while both hear each other.
    cut_since: Option<Instant>,
    /// When this node, as leader, last looked at the pair.
    checked_at: Instant,
}

/// Per live member (heard here, or reported heard by a member heard here), the members it
/// hears, when known: this node's own, and those of each member whose heartbeat arrived here
/// within the heartbeat timeout.
pub(super) type Hearing = BTreeMap<u64, Option<BTreeSet<u64>>>;

impl ClusterNode {
    /// Watches the links now. Run every formation period on a task of its own
    /// ([`ClusterNode::every_formation_period`]), not in the formation loop: that one waits
    /// for commits (an election, a proposal through a new leader), and a pause past the
    /// heartbeat timeout there would forget the links seen before a cut (seed 612425161: the
    /// node elected during a one-way drop had dropped the cut pair while it campaigned, and
    /// never removed either node).
    pub(super) fn watch_links_now(&self) {
        self.watch_links(&self.meta.state());
    }

    /// On the leader: a member to remove because it and another live member have not heard
    /// each other (one way or both) for the heartbeat timeout. Of the two, the one fewer
    /// members hear goes (the larger id on a tie), never this node.
    pub(super) fn cut_off_member(&self, state: &ClusterState) -> Option<u64> {
        let (hearing, cut) = self.watch_links(state);
        let (x, y) = cut?;
        let heard_by = |id: u64| {
            hearing
                .values()
                .flatten()
                .filter(|heard| heard.contains(&id))
                .count()
        };
        let remove = if x == self.me.0 {
            y
        } else if y == self.me.0 {
            x
        } else {
            match heard_by(x).cmp(&heard_by(y)) {
                std::cmp::Ordering::Less => x,
                _ => y,
            }
        };
        Some(remove)
    }

    /// Looks at who hears whom among the members now: what this node knows of it, and a pair
    /// cut for the heartbeat timeout, if one is.
    pub(super) fn watch_links(&self, state: &ClusterState) -> (Hearing, Option<(u64, u64)>) {
        let now = Instant::now();
        let timeout = Duration::from_millis(self.write_lease_ms());
        let hearing = self.hearing_of_members(state, now, timeout);
        let cut = self.update_links(&hearing, now, timeout);
        (hearing, cut)
    }

    /// What this node knows of who hears whom among the members.
    fn hearing_of_members(&self, state: &ClusterState, now: Instant, timeout: Duration) -> Hearing {
        let heard_here: BTreeSet<u64> = self
            .fabric
            .peers()
            .iter()
            .filter(|peer| !peer.suspect)
            .filter_map(|peer| peer.node_id)
            .filter(|id| state.nodes.contains_key(id))
            .collect();
        let heartbeats = self.heard.lock();
        let mut hearing = Hearing::new();
        for id in &heard_here {
            let fresh = heartbeats
                .get(id)
                .filter(|heard| now.saturating_duration_since(heard.at) < timeout);
            let Some(heard) = fresh else {
                continue;
            };
            let theirs: BTreeSet<u64> = heard
                .hearing
                .iter()
                .copied()
                .filter(|other| state.nodes.contains_key(other))
                .collect();
            for other in &theirs {
                hearing.entry(*other).or_insert(None);
            }
            hearing.insert(*id, Some(theirs));
        }
        hearing.insert(self.me.0, Some(heard_here));
        hearing
    }

    /// Records which pairs are linked and which were cut; returns a pair cut for `timeout`.
    fn update_links(
        &self,
        hearing: &Hearing,
        now: Instant,
        timeout: Duration,
    ) -> Option<(u64, u64)> {
        let mut links = self.links.lock();
        // A node no longer live starts afresh: its links must be seen again; so do all after a
        // time not leading, when they were not watched.
        links.retain(|(x, y), link| {
            hearing.contains_key(x)
                && hearing.contains_key(y)
                && now.saturating_duration_since(link.checked_at) < timeout
        });
        let mut cut = None;
        for (&x, x_hears) in hearing {
            for (&y, y_hears) in hearing.range((Bound::Excluded(x), Bound::Unbounded)) {
                let hears =
                    |heard: &Option<BTreeSet<u64>>, id| heard.as_ref().map(|h| h.contains(&id));
                let (x_hears_y, y_hears_x) = (hears(x_hears, y), hears(y_hears, x));
                if x_hears_y == Some(true) && y_hears_x == Some(true) {
                    let link = Link {
                        cut_since: None,
                        checked_at: now,
                    };
                    links.insert((x, y), link);
                    continue;
                }
                let Some(link) = links.get_mut(&(x, y)) else {
                    continue;
                };
                link.checked_at = now;
                if x_hears_y != Some(false) && y_hears_x != Some(false) {
                    // Undecided (a heartbeat missing): what was seen stands.
                    continue;
                }
                let since = *link.cut_since.get_or_insert(now);
                if cut.is_none() && now.saturating_duration_since(since) >= timeout {
                    cut = Some((x, y));
                }
            }
        }
        cut
    }

    /// Whether this node is cut off from a live peer: a peer it hears reports not hearing it,
    /// or hearing a peer this node does not hear. Such a node does not ask to join: the leader
    /// would remove it again once it saw the link cut (the nodes of a cluster all hear each
    /// other). A node new to the cluster is heard by its seeds (each dials back a node whose
    /// handshake it answered), and knows no other member yet.
    pub(super) fn cut_from_a_peer(&self) -> bool {
        let heard: HashMap<u64, bool> = self
            .fabric
            .peers()
            .iter()
            .filter_map(|peer| Some((peer.node_id?, !peer.suspect)))
            .collect();
        let heartbeats = self.heard.lock();
        let timeout = Duration::from_millis(self.write_lease_ms());
        let now = Instant::now();
        heard.iter().filter(|(_, heard)| **heard).any(|(id, _)| {
            heartbeats.get(id).is_some_and(|theirs| {
                let hears_one_not_heard_here = || {
                    theirs
                        .hearing
                        .iter()
                        .any(|other| heard.get(other) == Some(&false))
                };
                now.saturating_duration_since(theirs.at) < timeout
                    && (!theirs.hearing.contains(&self.me.0) || hears_one_not_heard_here())
            })
        })
    }
}
