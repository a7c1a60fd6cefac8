//! [`MetaGroup`]: one node's member of the metadata group, the facade the server uses.
//!
//! Invariants:
//! - [`MetaGroup::bootstrap`] initializes only a store that was empty when the node started; a
//!   restarted node recovers from its store and rejoins without it.
//! - A member that started with an empty store stands for election only once its log names this
//!   incarnation as a member (see [`stand_for_election_once_named`]).
//! - Every wait has a deadline ([`MetaConfig::propose_timeout_ms`]): a node cut off from the
//!   majority reports [`MetaError::Timeout`] instead of hanging. A timed-out command is in doubt:
//!   it may still commit.
//! - Only [`MetaError::ForwardToLeader`] and an unreachable leader are retried, because only
//!   then is the command known not to have been handled.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, Fatal, InitializeError, RaftError};
use openraft::raft::ClientWriteResponse;
use openraft::{Raft, RaftMetrics, SnapshotPolicy};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use super::cluster_state::ClusterState;
use super::command::{MetaCommand, MetaRejection};
use super::disk::MetaDisk;
use super::log_store::MetaLogStore;
use super::network::{
    self, MetaNetworkFactory, MetaRpc, MetaRpcReply, MetaTransport, TransportError,
};
use super::node_info::NodeInfo;
use super::state_machine::MetaStateMachine;
use super::{NodeId, TypeConfig};

/// Leader heartbeat period: Aerospike's heartbeat interval, and 3x openraft's default, which is
/// too tight for a loaded 2-core machine.
const HEARTBEAT_INTERVAL_MS_DEFAULT: u64 = 150;
/// Election timeouts: a follower waits a random time in this range without hearing a leader,
/// after the leader's lease (openraft makes it the maximum) ran out: 1.6 to 2 s after a dead
/// leader's last heartbeat, so that a failover it delays still ends within 3 s of the death
/// (with 1 to 2 s, failovers after a leader's death took 3.4 to 4.8 s).
const ELECTION_TIMEOUT_MIN_MS_DEFAULT: u64 = 600;
const ELECTION_TIMEOUT_MAX_MS_DEFAULT: u64 = 1_000;
/// How long a proposal or membership change may wait for its commit.
const PROPOSE_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// How long sending and installing a whole snapshot may take.
const INSTALL_SNAPSHOT_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// Log entries between snapshots; a partition table is ~150 KiB of JSON, so this bounds memory.
const SNAPSHOT_AFTER_LOGS_DEFAULT: u64 = 500;
/// Entries kept behind a snapshot, so a briefly lagging follower catches up without one.
const LOGS_KEPT_AFTER_SNAPSHOT_DEFAULT: u64 = 100;
/// Entries per append message; few, because one entry may hold a whole partition table
/// (about 290 KB) and a change of rows up to about 50 KB, and openraft gives every append
/// message the heartbeat interval (150 ms) to be answered: 32 such entries are over a
/// megabyte, too much for a link of tens of Mbit/s (docs/reliability.md, the bandwidth cap).
const ENTRIES_PER_MESSAGE_MAX: u64 = 4;

const _: () = assert!(3 * HEARTBEAT_INTERVAL_MS_DEFAULT < ELECTION_TIMEOUT_MIN_MS_DEFAULT);
const _: () = assert!(ELECTION_TIMEOUT_MIN_MS_DEFAULT < ELECTION_TIMEOUT_MAX_MS_DEFAULT);
const _: () = assert!(ELECTION_TIMEOUT_MAX_MS_DEFAULT < PROPOSE_TIMEOUT_MS_DEFAULT);
const _: () = assert!(LOGS_KEPT_AFTER_SNAPSHOT_DEFAULT < SNAPSHOT_AFTER_LOGS_DEFAULT);

/// Timing and snapshot settings of the metadata group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaConfig {
    /// Leader heartbeat period; also the deadline of one append message.
    pub heartbeat_interval_ms: u64,
    /// Lower bound of the randomized election timeout.
    pub election_timeout_min_ms: u64,
    /// Upper bound of the randomized election timeout.
    pub election_timeout_max_ms: u64,
    /// Deadline of a proposal or a membership change.
    pub propose_timeout_ms: u64,
    /// Deadline of sending and installing a whole snapshot.
    pub install_snapshot_timeout_ms: u64,
    /// Applied entries after which a new snapshot is built.
    pub snapshot_after_logs: u64,
    /// Entries kept in the log behind the last snapshot.
    pub logs_kept_after_snapshot: u64,
}

/// A committed command: where it is in the log and the state version it produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// Its log index.
    pub log_index: u64,
    /// [`ClusterState::version`] right after it.
    pub version: u64,
}

/// Why a metadata-group operation failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum MetaError {
    /// This node is not the leader; `leader_id` is the leader it knows, if any.
    #[error("not the metadata leader; the leader is {leader_id:?}")]
    ForwardToLeader {
        /// The known leader.
        leader_id: Option<NodeId>,
    },
    /// The state machine refused the command; it changed nothing.
    #[error("command rejected: {0}")]
    Rejected(MetaRejection),
    /// No commit before the deadline; the command may still commit.
    #[error("no commit within {timeout_ms} ms; the outcome is unknown")]
    Timeout {
        /// The deadline that passed.
        timeout_ms: u64,
    },
    /// The group stopped on this node (storage error, panic or shutdown).
    #[error("the metadata group stopped: {0}")]
    Fatal(Box<Fatal<NodeId>>),
    /// A message to another node got no reply.
    #[error(transparent)]
    Transport(TransportError),
    /// `bootstrap` on a node whose store was not empty at start.
    #[error("this node's metadata store is not empty: it was initialized before")]
    AlreadyInitialized,
    /// openraft refused to initialize.
    #[error("initialize failed: {0}")]
    Initialize(InitializeError<NodeId, NodeInfo>),
    /// openraft refused a membership change.
    #[error("membership change failed: {0}")]
    ChangeMembership(ChangeMembershipError<NodeId>),
    /// The store could not be opened or recovered.
    #[error("metadata store: {0}")]
    Storage(Box<openraft::StorageError<NodeId>>),
    /// Timeouts that openraft would refuse (heartbeat < election min < election max).
    #[error(
        "invalid timeouts: heartbeat {heartbeat_interval_ms} ms, \
         election {election_timeout_min_ms}..{election_timeout_max_ms} ms"
    )]
    InvalidConfig {
        /// As configured.
        heartbeat_interval_ms: u64,
        /// As configured.
        election_timeout_min_ms: u64,
        /// As configured.
        election_timeout_max_ms: u64,
    },
}

/// This node's member of the metadata group. Clones share it.
#[derive(Clone)]
pub struct MetaGroup {
    inner: Arc<GroupInner>,
}

struct GroupInner {
    node_id: NodeId,
    info: NodeInfo,
    raft: Raft<TypeConfig>,
    transport: Arc<dyn MetaTransport>,
    states: watch::Receiver<Arc<ClusterState>>,
    pristine_at_start: bool,
    config: MetaConfig,
}

impl Default for MetaConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS_DEFAULT,
            election_timeout_min_ms: ELECTION_TIMEOUT_MIN_MS_DEFAULT,
            election_timeout_max_ms: ELECTION_TIMEOUT_MAX_MS_DEFAULT,
            propose_timeout_ms: PROPOSE_TIMEOUT_MS_DEFAULT,
            install_snapshot_timeout_ms: INSTALL_SNAPSHOT_TIMEOUT_MS_DEFAULT,
            snapshot_after_logs: SNAPSHOT_AFTER_LOGS_DEFAULT,
            logs_kept_after_snapshot: LOGS_KEPT_AFTER_SNAPSHOT_DEFAULT,
        }
    }
}

impl MetaConfig {
    fn to_raft_config(&self) -> Result<openraft::Config, MetaError> {
        let config = openraft::Config {
            cluster_name: "osprey-metadata".to_owned(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            install_snapshot_timeout: self.install_snapshot_timeout_ms,
            max_payload_entries: ENTRIES_PER_MESSAGE_MAX,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_after_logs),
            max_in_snapshot_log_to_keep: self.logs_kept_after_snapshot,
            ..openraft::Config::default()
        };
        config.validate().map_err(|_| MetaError::InvalidConfig {
            heartbeat_interval_ms: self.heartbeat_interval_ms,
            election_timeout_min_ms: self.election_timeout_min_ms,
            election_timeout_max_ms: self.election_timeout_max_ms,
        })
    }

    fn propose_timeout(&self) -> Duration {
        Duration::from_millis(self.propose_timeout_ms)
    }
}

/// Keeps a member that started with an empty store out of elections until its log names this
/// incarnation (`boot_id`) as a member.
///
/// Such a member catches up from the leader a few entries at a time, and passes through every
/// old membership of the log. If one of them made this node id a voter (a node that formed the
/// group alone, left it, and came back without its store), openraft would see a voter and stand
/// for election from an old state: alone in a one-voter membership it wins at once, at a term
/// above the real leader's, and the others' committed entries get overwritten. A membership
/// that carries this incarnation's boot id was written after it was added, so it is current.
fn stand_for_election_once_named(raft: &Raft<TypeConfig>, node_id: NodeId, boot_id: u64) {
    raft.runtime_config().elect(false);
    let raft = raft.clone();
    let mut metrics = raft.metrics();
    tokio::spawn(async move {
        loop {
            let named = metrics
                .borrow_and_update()
                .membership_config
                .membership()
                .get_node(&node_id)
                .is_some_and(|info| info.boot_id == boot_id);
            if named {
                raft.runtime_config().elect(true);
                return;
            }
            if metrics.changed().await.is_err() {
                return;
            }
        }
    });
}

impl MetaGroup {
    /// Starts node `node_id`'s member on the store in `disk`, recovering whatever it holds.
    ///
    /// A node with an empty store waits to be bootstrapped or added by the leader.
    ///
    /// # Errors
    /// [`MetaError::Storage`] when the store cannot be recovered, [`MetaError::InvalidConfig`],
    /// [`MetaError::Fatal`] when openraft fails to start.
    pub async fn start(
        node_id: NodeId,
        info: NodeInfo,
        disk: Arc<dyn MetaDisk>,
        transport: Arc<dyn MetaTransport>,
        config: MetaConfig,
    ) -> Result<Self, MetaError> {
        let raft_config = Arc::new(config.to_raft_config()?);
        let log_store =
            MetaLogStore::open(disk.clone()).map_err(|e| MetaError::Storage(Box::new(e)))?;
        let state_machine =
            MetaStateMachine::open(disk).map_err(|e| MetaError::Storage(Box::new(e)))?;
        let pristine_at_start = log_store.is_pristine();
        let states = state_machine.subscribe();
        let network = MetaNetworkFactory::new(node_id, transport.clone());
        let raft = Raft::new(node_id, raft_config, network, log_store, state_machine)
            .await
            .map_err(|e| MetaError::Fatal(Box::new(e)))?;
        if pristine_at_start {
            stand_for_election_once_named(&raft, node_id, info.boot_id);
        }
        let inner = GroupInner {
            node_id,
            info,
            raft,
            transport,
            states,
            pristine_at_start,
            config,
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// Forms the group with `voters` (this node among them). Call it once, on one node, the
    /// first time the cluster starts.
    ///
    /// # Errors
    /// [`MetaError::AlreadyInitialized`] when this node's store was not empty at start or the
    /// group is already formed; [`MetaError::Initialize`], [`MetaError::Fatal`].
    pub async fn bootstrap(&self, voters: BTreeMap<NodeId, NodeInfo>) -> Result<(), MetaError> {
        if !self.inner.pristine_at_start {
            return Err(MetaError::AlreadyInitialized);
        }
        match self.inner.raft.initialize(voters).await {
            Ok(()) => Ok(()),
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {
                Err(MetaError::AlreadyInitialized)
            }
            Err(RaftError::APIError(error)) => Err(MetaError::Initialize(error)),
            Err(RaftError::Fatal(fatal)) => Err(MetaError::Fatal(Box::new(fatal))),
        }
    }

    /// Commits `command` if this node is the leader.
    ///
    /// # Errors
    /// [`MetaError::ForwardToLeader`] on a follower (see [`MetaGroup::propose_via_leader`]),
    /// [`MetaError::Rejected`], [`MetaError::Timeout`] (in doubt), [`MetaError::Fatal`].
    pub async fn propose(&self, command: MetaCommand) -> Result<Applied, MetaError> {
        let writing = self.inner.raft.client_write(command);
        let response = self.with_deadline(writing).await?;
        let response = response.map_err(map_client_write_error)?;
        applied_of(response)
    }

    /// Commits `command` through whichever node leads, retrying while the leader is unknown or
    /// changes, until [`MetaConfig::propose_timeout_ms`] has passed.
    ///
    /// # Errors
    /// As [`MetaGroup::propose`], plus [`MetaError::Transport`] when the leader did not answer.
    pub async fn propose_via_leader(&self, command: MetaCommand) -> Result<Applied, MetaError> {
        let timeout = self.inner.config.propose_timeout();
        let deadline = Instant::now() + timeout;
        loop {
            let result = match self.propose(command.clone()).await {
                Err(MetaError::ForwardToLeader {
                    leader_id: Some(leader),
                }) if leader != self.inner.node_id => self.propose_at(leader, &command).await,
                other => other,
            };
            let retryable = matches!(
                result,
                Err(MetaError::ForwardToLeader { .. })
                    | Err(MetaError::Transport(TransportError::Unreachable { .. }))
            );
            if !retryable {
                return result;
            }
            if Instant::now() >= deadline {
                return Err(self.timeout_error());
            }
            let pause = Duration::from_millis(self.inner.config.heartbeat_interval_ms);
            tokio::time::sleep(pause).await;
        }
    }

    /// Adds node `id` as a learner and waits until it has caught up with the log.
    ///
    /// # Errors
    /// [`MetaError::ForwardToLeader`] when not run on the leader, [`MetaError::Timeout`],
    /// [`MetaError::ChangeMembership`], [`MetaError::Fatal`].
    pub async fn add_learner(&self, id: NodeId, info: NodeInfo) -> Result<Applied, MetaError> {
        let adding = self.inner.raft.add_learner(id, info, true);
        let response = self.with_deadline(adding).await?;
        applied_of(response.map_err(map_client_write_error)?)
    }

    /// Makes `voters` the voter set (through a joint configuration). Voters that leave stay
    /// learners when `keep_removed_as_learners`, else they leave the group. Change one node at
    /// a time and wait for the result before the next change.
    ///
    /// # Errors
    /// As [`MetaGroup::add_learner`].
    pub async fn change_voters(
        &self,
        voters: BTreeSet<NodeId>,
        keep_removed_as_learners: bool,
    ) -> Result<Applied, MetaError> {
        let changing = self
            .inner
            .raft
            .change_membership(voters, keep_removed_as_learners);
        let response = self.with_deadline(changing).await?;
        applied_of(response.map_err(map_client_write_error)?)
    }

    /// Removes learner `id` from the group (a voter must first stop being one).
    ///
    /// # Errors
    /// As [`MetaGroup::add_learner`].
    pub async fn remove_learner(&self, id: NodeId) -> Result<Applied, MetaError> {
        let removing = self.inner.raft.change_membership(
            openraft::ChangeMembers::RemoveNodes(BTreeSet::from([id])),
            false,
        );
        let response = self.with_deadline(removing).await?;
        applied_of(response.map_err(map_client_write_error)?)
    }

    /// The leader this node knows of, if any.
    pub fn current_leader(&self) -> Option<NodeId> {
        self.inner.raft.metrics().borrow().current_leader
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.inner.node_id
    }

    /// This node's addresses, as given at start.
    pub fn info(&self) -> &NodeInfo {
        &self.inner.info
    }

    /// The state as this node has applied it.
    pub fn state(&self) -> Arc<ClusterState> {
        self.inner.states.borrow().clone()
    }

    /// A receiver that is told of every state this node applies after this call.
    pub fn subscribe(&self) -> watch::Receiver<Arc<ClusterState>> {
        let mut receiver = self.inner.states.clone();
        receiver.mark_unchanged();
        receiver
    }

    /// openraft's metrics of this node (role, term, leader, log indexes, membership).
    pub fn metrics(&self) -> watch::Receiver<RaftMetrics<NodeId, NodeInfo>> {
        self.inner.raft.metrics()
    }

    /// Handles a message that arrived from another member, and returns the reply to send back.
    pub async fn handle_rpc(&self, request: &[u8]) -> Vec<u8> {
        let reply = match serde_json::from_slice::<MetaRpc>(request) {
            Ok(rpc) => self.dispatch(rpc).await,
            Err(error) => MetaRpcReply::Malformed {
                reason: error.to_string(),
            },
        };
        serde_json::to_vec(&reply).unwrap_or_else(|error| {
            let malformed = MetaRpcReply::Malformed {
                reason: error.to_string(),
            };
            serde_json::to_vec(&malformed).expect("a reply of one string field serializes")
        })
    }

    /// Stops this node's member; the store keeps what was durable.
    ///
    /// # Errors
    /// [`MetaError::Fatal`] when openraft's task had panicked.
    pub async fn shutdown(&self) -> Result<(), MetaError> {
        match self.inner.raft.shutdown().await {
            Ok(()) => Ok(()),
            Err(_) => Err(MetaError::Fatal(Box::new(Fatal::Panicked))),
        }
    }

    async fn dispatch(&self, rpc: MetaRpc) -> MetaRpcReply {
        let raft = &self.inner.raft;
        match rpc {
            MetaRpc::AppendEntries(request) => {
                MetaRpcReply::AppendEntries(raft.append_entries(request).await)
            }
            MetaRpc::Vote(request) => MetaRpcReply::Vote(raft.vote(request).await),
            MetaRpc::InstallSnapshot(request) => {
                MetaRpcReply::InstallSnapshot(raft.install_snapshot(request).await)
            }
            MetaRpc::FullSnapshot {
                vote,
                meta,
                data_base64,
            } => match network::decode_full_snapshot(meta, &data_base64) {
                Ok(snapshot) => {
                    MetaRpcReply::FullSnapshot(raft.install_full_snapshot(vote, snapshot).await)
                }
                Err(error) => MetaRpcReply::Malformed {
                    reason: error.to_string(),
                },
            },
            // A member that does not lead passes the proposal on to its leader: the asker
            // (a node joining through one seed) may not know the leader's address.
            MetaRpc::Propose(command) => {
                let result = match self.current_leader() {
                    Some(leader) if leader != self.inner.node_id => {
                        self.propose_at(leader, &command).await
                    }
                    _ => self.propose(command).await,
                };
                MetaRpcReply::Propose(result)
            }
        }
    }

    async fn propose_at(
        &self,
        leader: NodeId,
        command: &MetaCommand,
    ) -> Result<Applied, MetaError> {
        let known = self
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&leader)
            .cloned();
        let Some(leader_info) = known else {
            return Err(MetaError::ForwardToLeader { leader_id: None });
        };
        self.propose_through(leader, &leader_info, command).await
    }

    /// Asks node `target` (at `target_info`) to commit `command`: how a node outside the
    /// group (a joining node, which knows no leader yet) reaches it. A member that is not
    /// the leader answers [`MetaError::ForwardToLeader`] naming the leader it knows.
    ///
    /// # Errors
    /// As [`MetaGroup::propose`], plus [`MetaError::Transport`].
    pub async fn propose_through(
        &self,
        target: NodeId,
        target_info: &NodeInfo,
        command: &MetaCommand,
    ) -> Result<Applied, MetaError> {
        let (leader, leader_info) = (target, target_info);
        let rpc = MetaRpc::Propose(command.clone());
        let transport = self.inner.transport.as_ref();
        let timeout = self.inner.config.propose_timeout();
        let reply = network::call(transport, leader, leader_info, &rpc, timeout).await;
        match reply.map_err(MetaError::Transport)? {
            MetaRpcReply::Propose(result) => result,
            _ => Err(MetaError::Transport(network::unexpected_reply(leader))),
        }
    }

    async fn with_deadline<T>(&self, work: impl Future<Output = T>) -> Result<T, MetaError> {
        let timeout = self.inner.config.propose_timeout();
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| self.timeout_error())
    }

    fn timeout_error(&self) -> MetaError {
        MetaError::Timeout {
            timeout_ms: self.inner.config.propose_timeout_ms,
        }
    }
}

fn applied_of(response: ClientWriteResponse<TypeConfig>) -> Result<Applied, MetaError> {
    response.data.outcome.map_err(MetaError::Rejected)?;
    Ok(Applied {
        log_index: response.log_id.index,
        version: response.data.version,
    })
}

fn map_client_write_error(
    error: RaftError<NodeId, ClientWriteError<NodeId, NodeInfo>>,
) -> MetaError {
    match error {
        RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
            MetaError::ForwardToLeader {
                leader_id: forward.leader_id,
            }
        }
        RaftError::APIError(ClientWriteError::ChangeMembershipError(error)) => {
            MetaError::ChangeMembership(error)
        }
        RaftError::Fatal(fatal) => MetaError::Fatal(Box::new(fatal)),
    }
}
