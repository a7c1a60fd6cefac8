//! A node's part in failures: the leader removing silent and departed nodes and replacing
//! departed voters, and every node refusing writes without a quorum of the metadata group.

use std::sync::atomic::Ordering;

use cluster::metadata::{ClusterState, MetaCommand};
use tracing::{info, warn};

use super::{ClusterNode, holds_nothing};

impl ClusterNode {
    /// Refuses client writes while this node hears fewer than a majority of the metadata
    /// group's voters (itself included): on a minority side, nothing fails over, and what it
    /// took could be lost when the majority's view wins.
    pub(super) fn refuse_writes_without_quorum(&self, state: &ClusterState) {
        if state.voters.is_empty() {
            return;
        }
        let peers = self.fabric.peers();
        let heard = state
            .voters
            .iter()
            .filter(|voter| {
                **voter == self.me.0
                    || peers
                        .iter()
                        .any(|p| p.node_id == Some(**voter) && p.connected && !p.suspect)
            })
            .count();
        let refused = heard * 2 <= state.voters.len();
        let was_refused = self.writes_refused.swap(refused, Ordering::AcqRel);
        if refused != was_refused {
            match refused {
                true => warn!(
                    heard,
                    voters = state.voters.len(),
                    "cut off from the metadata group's quorum: refusing writes"
                ),
                false => info!("the metadata group's quorum is back: taking writes"),
            }
        }
        for (namespace, _) in &self.namespaces {
            namespace.set_writes_refused(refused);
        }
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
            return false;
        };
        let dead = id != self.me.0 && self.is_dead(id);
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
