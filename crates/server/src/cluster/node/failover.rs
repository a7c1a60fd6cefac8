//! A node's part in failures: the leader removing silent and departed nodes and replacing
//! departed voters, and every node refusing writes without a quorum of the metadata group.

use std::sync::atomic::Ordering;
use std::time::Duration;

use cluster::metadata::{ClusterState, MetaCommand};
use tracing::{info, warn};

use super::{ClusterNode, holds_nothing};

/// How long a node may lag behind the metadata version its peers report before it asks to
/// join again: a member applies each commit within milliseconds, and even a lagging one
/// catches up within a few heartbeats.
const LEFT_BEHIND_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

impl ClusterNode {
    /// Decides whether client writes may be taken here, renewing the engine's write lease
    /// while they may. Run every formation period on a task of its own
    /// ([`ClusterNode::every_formation_period`]), so that a slow commit on the leader never
    /// lets the lease lapse.
    pub(super) fn guard_writes(&self) {
        self.refuse_writes_without_quorum(&self.meta.state());
    }

    /// Asks a member to add this node again: removed from the roster and the group while cut
    /// off, it learns nothing the group commits since, its removal included.
    pub(super) async fn rejoin(&self) {
        if self.cut_from_a_peer() {
            return;
        }
        warn!(node = %self.me, "left behind by the metadata group: asking to join again");
        // Once per `LEFT_BEHIND_AFTER`, not every formation period: each ask is a commit.
        if let Some((_, since)) = self.behind_since.lock().as_mut() {
            *since = tokio::time::Instant::now();
        }
        let add_me = MetaCommand::AddNode {
            id: self.me.0,
            info: self.info.clone(),
        };
        self.ask_members(&add_me).await;
    }

    /// Refuses client writes while this node hears fewer than a majority of the metadata
    /// group's voters (itself included): on a minority side, nothing fails over, and what it
    /// took could be lost when the majority's view wins.
    pub(super) fn refuse_writes_without_quorum(&self, state: &ClusterState) {
        if state.voters.is_empty() {
            return;
        }
        // A node outside the roster (restarted, or removed while cut off) is no one's master.
        if !self.is_member_now(state) {
            return self.refuse_writes(true, 0, state.voters.len());
        }
        // A lease that lapsed (the process was paused, SIGSTOP, or starved past it) is a
        // refusal: the heartbeats its peers sent meanwhile, read from the sockets on waking,
        // would make them look heard at once, before this node's map caught up (the fault
        // suite's pause test: NOT_FOUND answered from a stale copy, seed 2073160356).
        let lapsed = self
            .lease_renewed_at
            .lock()
            .is_some_and(|at| at.elapsed() >= Duration::from_millis(self.write_lease_ms()));
        if lapsed && !self.writes_refused.swap(true, Ordering::AcqRel) {
            *self.refused_since.lock() = tokio::time::Instant::now();
            warn!("the write lease lapsed (the process was paused or starved): refusing writes");
        }
        let peers = self.fabric.peers();
        // Once refused, a voter counts again only after a heartbeat received since (it carries the
        // map version that tells whether this node's map is stale).
        let heard_since = match self.writes_refused.load(Ordering::Acquire) {
            true => Some(*self.refused_since.lock()),
            false => None,
        };
        let heartbeats = self.heard.lock();
        let heard = state
            .voters
            .iter()
            .filter(|voter| {
                let fresh = heard_since
                    .is_none_or(|since| heartbeats.get(voter).is_some_and(|h| h.at > since));
                **voter == self.me.0
                    || (fresh
                        && peers
                            .iter()
                            .any(|p| p.node_id == Some(**voter) && p.connected && !p.suspect))
            })
            .count();
        drop(heartbeats);
        let without_quorum = heard * 2 <= state.voters.len();
        let refused = without_quorum || self.map_is_stale(state);
        self.refuse_writes(refused, heard, state.voters.len());
    }

    /// Whether this node has lagged behind a version its peers reported for
    /// [`LEFT_BEHIND_AFTER`]: the group no longer sends it what it commits (it was removed
    /// while cut off), or cannot.
    pub(super) fn left_behind(&self) -> bool {
        self.behind_since
            .lock()
            .is_some_and(|(_, since)| since.elapsed() >= LEFT_BEHIND_AFTER)
    }

    /// Whether a peer reported a metadata version this node has not applied: at once while
    /// writes are refused here (a node back from a partition takes none until it has caught
    /// up), else once it has lagged behind that version for a formation period (a healthy node
    /// applies each commit within milliseconds of its peers).
    fn map_is_stale(&self, state: &ClusterState) -> bool {
        let newest_heard = self
            .heard
            .lock()
            .values()
            .map(|heard| heard.version)
            .max()
            .unwrap_or(0);
        let mut behind_since = self.behind_since.lock();
        if newest_heard <= state.version {
            *behind_since = None;
            return false;
        }
        let now = tokio::time::Instant::now();
        let record = behind_since.get_or_insert((newest_heard, now));
        if state.version >= record.0 {
            // Caught up with what was newest then: time the lag from the newest now.
            *record = (newest_heard, now);
        }
        let lagging = now - record.1 >= super::FORMATION_PERIOD;
        self.writes_refused.load(Ordering::Acquire) || lagging
    }

    fn refuse_writes(&self, refused: bool, heard: usize, voters: usize) {
        let was_refused = self.writes_refused.swap(refused, Ordering::AcqRel);
        if refused && !was_refused {
            *self.refused_since.lock() = tokio::time::Instant::now();
        }
        if refused != was_refused {
            match refused {
                true => warn!(
                    heard,
                    voters,
                    "outside the cluster or cut off from the metadata group's quorum: refusing writes"
                ),
                false => info!("back in the cluster with its quorum: taking writes"),
            }
        }
        // Allowed for a lease only, renewed every formation period: after a pause longer than
        // the heartbeat timeout (SIGSTOP), the majority may have failed over meanwhile.
        let lease_ms = self.write_lease_ms();
        for (namespace, _) in &self.namespaces {
            match refused {
                true => namespace.set_writes_refused(true),
                false => namespace.allow_writes_for(lease_ms),
            }
        }
        if !refused {
            *self.lease_renewed_at.lock() = Some(tokio::time::Instant::now());
        }
    }

    /// How long client writes are allowed after each decision that they may be: the heartbeat
    /// timeout, after which the majority may declare this node dead.
    pub(super) fn write_lease_ms(&self) -> u64 {
        self.config.heartbeat_interval_ms * u64::from(self.config.heartbeat_timeout_count)
    }

    /// Removes from the roster one node that is dead or has left: dead when this leader has
    /// not heard it for the heartbeat timeout and no node this leader hears has either (the
    /// group's view, not one node's); left when it was leaving and holds no partition any
    /// more. Returns whether it removed one (the state changed).
    pub(super) async fn remove_departed(&self, state: &ClusterState) -> bool {
        let departed = state.nodes.keys().copied().find(|id| {
            let dead = *id != self.me.0 && self.is_dead(*id);
            dead || (state.leaving.contains(id) && holds_nothing(state, *id))
        });
        let Some(id) = departed else {
            return self.remove_cut_off(state).await;
        };
        let dead = id != self.me.0 && self.is_dead(id);
        if !dead && self.leave_the_group(state, id).await {
            return true;
        }
        match self.meta.propose(MetaCommand::RemoveNode { id }).await {
            Ok(applied) if dead => warn!(
                node = id,
                version = applied.version,
                "declared a silent node dead; its partitions fail over to their replicas"
            ),
            Ok(applied) => info!(
                node = id,
                version = applied.version,
                "a node left the cluster"
            ),
            Err(error) => warn!(node = id, %error, "could not remove a node"),
        }
        true
    }

    /// Removes a member cut off from another member while this leader hears both
    /// ([`ClusterNode::cut_off_member`]), as a dead one is: its partitions fail over to
    /// their other copies. Returns whether it removed one.
    async fn remove_cut_off(&self, state: &ClusterState) -> bool {
        let Some(id) = self.cut_off_member(state) else {
            return false;
        };
        match self.meta.propose(MetaCommand::RemoveNode { id }).await {
            Ok(applied) => warn!(
                node = id,
                version = applied.version,
                "removed a node that another member has not heard for the heartbeat timeout \
                 (a one-way or partial cut); its partitions fail over to their replicas"
            ),
            Err(error) => warn!(node = id, %error, "could not remove a cut-off node"),
        }
        true
    }

    /// Takes node `id`, which is leaving and holds nothing, out of the metadata group before
    /// it leaves the roster, one change at a time: a voter is replaced by a learner if one is
    /// in the roster, else the group shrinks (with the node gone for good, two voters of three
    /// would be the quorum anyway); a learner is removed. So a node that left holds no vote,
    /// and may come back later, even with its metadata directory wiped, as a new learner.
    /// Returns whether it changed anything (or a change is in progress).
    async fn leave_the_group(&self, state: &ClusterState, id: u64) -> bool {
        if state.voters_changing {
            return true;
        }
        let outcome = if state.voters.contains(&id) {
            let mut voters = state.voters.clone();
            voters.remove(&id);
            let replacement = state.learners.iter().find(|learner| {
                state.nodes.contains_key(learner) && !state.leaving.contains(learner)
            });
            voters.extend(replacement);
            self.meta.change_voters(voters, false).await
        } else if state.learners.contains(&id) {
            self.meta.remove_learner(id).await
        } else {
            return false;
        };
        match outcome {
            Ok(applied) => {
                info!(
                    node = id,
                    version = applied.version,
                    "a leaving node left the metadata group"
                )
            }
            Err(error) => {
                warn!(node = id, %error, "a leaving node could not leave the metadata group yet")
            }
        }
        true
    }

    /// Whether node `id` is silent: suspected here, and heard by none of the nodes this
    /// node hears.
    fn is_dead(&self, id: u64) -> bool {
        let peers = self.fabric.peers();
        let suspect_here = peers
            .iter()
            .find(|p| p.node_id == Some(id))
            .is_some_and(|p| p.suspect);
        if !suspect_here {
            return false;
        }
        let heard = self.heard.lock();
        let heard_by_others = peers
            .iter()
            .filter(|p| p.node_id.is_some_and(|other| other != id) && !p.suspect)
            .filter_map(|p| heard.get(&p.node_id?))
            .any(|theirs| theirs.hearing.contains(&id));
        !heard_by_others
    }

    /// Replaces a voter that left the roster (dead, or gone) by a learner that is in it, one
    /// change at a time. A departed voter with no replacement stays a voter: it counts against
    /// the quorum only as one of three, where shrinking the group to two voters would make the
    /// next change pass through a joint configuration that one more failure could leave
    /// without a quorum for good. A node that comes back under its id is a voter again at once.
    /// Returns whether it changed anything.
    pub(super) async fn replace_departed_voter(&self, state: &ClusterState) -> bool {
        let Some(&gone) = state.voters.iter().find(|id| !state.nodes.contains_key(id)) else {
            return false;
        };
        let replacement = state
            .learners
            .iter()
            .find(|id| state.nodes.contains_key(id) && !state.voters.contains(id));
        let Some(&learner) = replacement else {
            return false;
        };
        let mut voters = state.voters.clone();
        voters.remove(&gone);
        voters.insert(learner);
        match self.meta.change_voters(voters, false).await {
            Ok(_) => info!(
                gone,
                learner, "a learner replaced a departed voter of the metadata group"
            ),
            Err(error) => warn!(gone, %error, "could not replace a departed voter"),
        }
        true
    }
}
