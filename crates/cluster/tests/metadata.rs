//! Metadata-group tests: three or four members on the simulated network, and one on real files.
//!
//! Each scenario runs on a current-thread tokio runtime with a paused clock, so elections and
//! timeouts cost no wall time. A randomized scenario draws the network's delays and losses and
//! its commands from one seed; a failing run prints `META_SEED=<n>`, and
//! `META_SEED=<n> cargo test -p cluster --test metadata` runs that seed alone. openraft's
//! election jitter is not seeded, so a replay repeats the network's decisions and the commands,
//! not necessarily every timing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cluster::metadata::{
    ClusterState, FileDisk, MemoryDisk, MetaCommand, MetaConfig, MetaDisk, MetaError, MetaGroup,
    MetaLogStore, MetaRejection, MetaStateMachine, NodeId, NodeInfo, PartitionAssignment,
    PartitionTable, ReplicaState, SimConfig, SimNetwork, TypeConfig,
};
use openraft::ServerState;
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::testing::{StoreBuilder, Suite};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Seeds per randomized scenario when `META_SEED` is not set.
const SEEDS_DEFAULT: usize = 20;
/// The longest a test waits (on the paused clock) for an election or for convergence.
const WAIT_MS_MAX: u64 = 60_000;
/// How often waiting tests look again.
const POLL_MS: u64 = 20;
const NAMESPACE: &str = "test";

// ---------------------------------------------------------------------------------------------
// Seeds and runtime

/// The seeds to run: `META_SEED` alone, or `count` fresh ones.
fn seeds(count: usize) -> Vec<u64> {
    if let Ok(text) = std::env::var("META_SEED") {
        let seed = text.trim().parse().expect("META_SEED must be a u64");
        return vec![seed];
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    let mut rng = SmallRng::seed_from_u64(now.as_nanos() as u64);
    (0..count).map(|_| rng.random()).collect()
}

/// Runs `scenario` once per seed, each on a fresh paused current-thread runtime.
fn run_seeded<F, Fut>(test: &str, count: usize, scenario: F)
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = ()>,
{
    for seed in seeds(count) {
        eprintln!("{test}: seed {seed}; replay with META_SEED={seed}");
        paused_runtime().block_on(scenario(seed));
    }
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds")
}

fn info(id: NodeId) -> NodeInfo {
    NodeInfo {
        fabric_addr: format!("10.0.0.{id}:3001"),
        service_addr: format!("10.0.0.{id}:3000"),
        resp_addr: format!("10.0.0.{id}:6379"),
        boot_id: 1,
        ..NodeInfo::default()
    }
}

/// Polls `check` on the paused clock until it holds; panics with `what` after `WAIT_MS_MAX`.
async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let polls = WAIT_MS_MAX / POLL_MS;
    for _ in 0..polls {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    panic!("{what}: not reached within {WAIT_MS_MAX} ms");
}

// ---------------------------------------------------------------------------------------------
// A simulated cluster

struct Cluster {
    network: SimNetwork,
    config: MetaConfig,
    disks: BTreeMap<NodeId, Arc<MemoryDisk>>,
    groups: BTreeMap<NodeId, MetaGroup>,
}

impl Cluster {
    fn new(seed: u64, drop_per_mille: u64, config: MetaConfig) -> Self {
        let sim = SimConfig {
            drop_per_mille,
            ..SimConfig::default()
        };
        Self {
            network: SimNetwork::new(seed, sim),
            config,
            disks: BTreeMap::new(),
            groups: BTreeMap::new(),
        }
    }

    /// Starts (or restarts) node `id` on its disk, creating an empty one the first time.
    async fn start(&mut self, id: NodeId) {
        let disk = self
            .disks
            .entry(id)
            .or_insert_with(|| Arc::new(MemoryDisk::new()));
        let disk: Arc<dyn MetaDisk> = disk.clone();
        let transport = self.network.transport(id);
        let group = MetaGroup::start(id, info(id), disk, transport, self.config.clone())
            .await
            .expect("a member starts");
        self.network.attach(&group);
        self.groups.insert(id, group);
    }

    /// Starts node `id` again on an empty disk, as a new incarnation (another boot id): what
    /// a node that left the group and lost its store looks like when it comes back.
    async fn start_wiped(&mut self, id: NodeId, boot_id: u64) {
        self.disks.insert(id, Arc::new(MemoryDisk::new()));
        let disk: Arc<dyn MetaDisk> = self.disks[&id].clone();
        let transport = self.network.transport(id);
        let info = NodeInfo {
            boot_id,
            ..info(id)
        };
        let group = MetaGroup::start(id, info, disk, transport, self.config.clone())
            .await
            .expect("a member starts");
        self.network.attach(&group);
        self.groups.insert(id, group);
    }

    /// Starts `voters` and forms the group on the first of them.
    async fn with_voters(seed: u64, drop_per_mille: u64, voters: &[NodeId]) -> Self {
        let mut cluster = Self::new(seed, drop_per_mille, MetaConfig::default());
        for &id in voters {
            cluster.start(id).await;
        }
        let members = voters.iter().map(|&id| (id, info(id))).collect();
        cluster
            .group(voters[0])
            .bootstrap(members)
            .await
            .expect("bootstrap once");
        cluster
    }

    fn group(&self, id: NodeId) -> &MetaGroup {
        self.groups.get(&id).expect("a started node")
    }

    /// Power loss of node `id`: its disk keeps only what was durable.
    async fn crash(&mut self, id: NodeId) {
        self.network.detach(id);
        let disk = self.disks.get(&id).expect("a started node");
        let image = Arc::new(disk.crash_image());
        self.disks.insert(id, image);
        let group = self.groups.remove(&id).expect("a started node");
        group.shutdown().await.expect("a clean stop");
    }

    async fn shutdown(&mut self) {
        for (id, group) in std::mem::take(&mut self.groups) {
            self.network.detach(id);
            group.shutdown().await.expect("a clean stop");
        }
    }

    /// Waits until every node in `among` names the same leader, which is among them and leads.
    async fn wait_leader(&self, among: &[NodeId]) -> NodeId {
        let mut leader = None;
        wait_until("one leader", || {
            leader = self.agreed_leader(among);
            leader.is_some()
        })
        .await;
        leader.expect("wait_until returned")
    }

    fn agreed_leader(&self, among: &[NodeId]) -> Option<NodeId> {
        let candidate = self.group(among[0]).current_leader()?;
        let agreed = among
            .iter()
            .all(|&id| self.group(id).current_leader() == Some(candidate));
        let leads = self
            .groups
            .get(&candidate)
            .is_some_and(|group| group.metrics().borrow().state == ServerState::Leader);
        (agreed && among.contains(&candidate) && leads).then_some(candidate)
    }

    /// Waits until every node in `ids` has the same state, at `version_min` or later.
    async fn wait_converged(&self, ids: &[NodeId], version_min: u64) -> Arc<ClusterState> {
        let mut converged = None;
        wait_until("states converge", || {
            let first = self.group(ids[0]).state();
            let equal = ids.iter().all(|&id| *self.group(id).state() == *first);
            if equal && first.version >= version_min {
                converged = Some(first);
            }
            converged.is_some()
        })
        .await;
        converged.expect("wait_until returned")
    }
}

// ---------------------------------------------------------------------------------------------
// Random commands and a model of what the state machine accepts

/// What the test expects the state machine to hold, for the command kinds it generates.
#[derive(Default)]
struct Model {
    nodes: BTreeSet<NodeId>,
    sindexes: BTreeSet<String>,
    /// Per partition: whether its two replicas are swapped, and its version.
    partitions: Option<Vec<(bool, u64)>>,
}

/// Partition replicas are nodes 101 and 102, outside the ids the roster commands use: a
/// `RemoveNode` takes its node out of every table, which this model does not follow.
fn replicas(swapped: bool) -> Vec<(NodeId, ReplicaState)> {
    let (first, second) = if swapped { (102, 101) } else { (101, 102) };
    vec![(first, ReplicaState::Full), (second, ReplicaState::Filling)]
}

impl Model {
    /// A random command and whether the state machine must accept it.
    fn next_command(&self, rng: &mut SmallRng) -> (MetaCommand, bool) {
        let namespace = NAMESPACE.to_owned();
        match rng.random_range(0..7) {
            0 => {
                let id = rng.random_range(1..=6);
                (MetaCommand::AddNode { id, info: info(id) }, true)
            }
            1 => {
                let id = rng.random_range(1..=6);
                (MetaCommand::RemoveNode { id }, self.nodes.contains(&id))
            }
            2 => {
                let name = format!("idx{}", rng.random_range(0..4));
                let definition = format!("{{\"bin\":\"{name}\"}}");
                let command = MetaCommand::PutSindex {
                    namespace,
                    name,
                    definition,
                };
                (command, true)
            }
            3 => {
                let name = format!("idx{}", rng.random_range(0..4));
                let known = self.sindexes.contains(&name);
                (MetaCommand::DropSindex { namespace, name }, known)
            }
            4 => {
                let set = rng
                    .random_bool(0.5)
                    .then(|| format!("s{}", rng.random_range(0..3)));
                let before_ms = rng.random_range(0..1_000_000);
                let command = MetaCommand::Truncate {
                    namespace,
                    set,
                    before_ms,
                };
                (command, true)
            }
            5 => {
                let set = format!("s{}", rng.random_range(0..3));
                let enabled = rng.random_bool(0.5);
                let command = MetaCommand::SetIndexSwitch {
                    namespace,
                    set,
                    enabled,
                };
                (command, true)
            }
            _ => self.partition_command(rng),
        }
    }

    fn partition_command(&self, rng: &mut SmallRng) -> (MetaCommand, bool) {
        let namespace = NAMESPACE.to_owned();
        let Some(partitions) = &self.partitions else {
            let assignment = PartitionAssignment {
                replicas: replicas(false),
                version: 1,
                master_since: 1,
                handoff_to: Vec::new(),
            };
            let all = vec![assignment; model::PARTITION_COUNT];
            let table = PartitionTable::new(all).expect("PARTITION_COUNT assignments");
            let command = MetaCommand::SetPartitionTable {
                namespace,
                table,
                moves_waiting: 0,
            };
            return (command, true);
        };
        let stale = rng.random_bool(0.2);
        let mut pids = BTreeSet::new();
        while pids.len() < 3 {
            pids.insert(rng.random_range(0..model::PARTITION_COUNT as u16));
        }
        let changes = pids
            .into_iter()
            .map(|pid| {
                let (swapped, version) = partitions[usize::from(pid)];
                let version = if stale { version } else { version + 1 };
                let replicas = replicas(!swapped);
                let master_since = version;
                let assignment = PartitionAssignment {
                    replicas,
                    version,
                    master_since,
                    handoff_to: Vec::new(),
                };
                (pid, assignment)
            })
            .collect();
        let command = MetaCommand::ChangePartitions {
            namespace,
            changes,
            moves_waiting: None,
        };
        (command, !stale)
    }

    /// Records an accepted command.
    fn accept(&mut self, command: &MetaCommand) {
        match command {
            MetaCommand::AddNode { id, .. } => {
                self.nodes.insert(*id);
            }
            MetaCommand::RemoveNode { id } => {
                self.nodes.remove(id);
            }
            MetaCommand::PutSindex { name, .. } => {
                self.sindexes.insert(name.clone());
            }
            MetaCommand::DropSindex { name, .. } => {
                self.sindexes.remove(name);
            }
            MetaCommand::SetPartitionTable { .. } => {
                self.partitions = Some(vec![(false, 1); model::PARTITION_COUNT]);
            }
            MetaCommand::ChangePartitions { changes, .. } => {
                let partitions = self.partitions.as_mut().expect("a table exists");
                for (pid, assignment) in changes {
                    let slot = &mut partitions[usize::from(*pid)];
                    *slot = (!slot.0, assignment.version);
                }
            }
            _ => {}
        }
    }

    fn check(&self, state: &ClusterState) {
        let nodes: BTreeSet<NodeId> = state.nodes.keys().copied().collect();
        assert_eq!(nodes, self.nodes, "node roster");
        let namespace = state.namespace(NAMESPACE);
        let sindexes: BTreeSet<String> = namespace
            .map(|meta| meta.sindexes.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(sindexes, self.sindexes, "secondary indexes");
        let Some(expected) = &self.partitions else {
            assert!(state.partition_table(NAMESPACE).is_none());
            return;
        };
        let table = state
            .partition_table(NAMESPACE)
            .expect("a table was committed");
        for (assignment, (swapped, version)) in table.assignments().iter().zip(expected) {
            assert_eq!(assignment.version, *version, "partition version");
            assert_eq!(
                assignment.replicas,
                replicas(*swapped),
                "partition replicas"
            );
        }
    }
}

/// Proposes `count` random commands through random members; checks each outcome against the
/// model and that versions rise. Returns the last version.
async fn propose_random(
    cluster: &Cluster,
    members: &[NodeId],
    model: &mut Model,
    rng: &mut SmallRng,
    count: usize,
) -> u64 {
    let mut version_last = 0;
    for _ in 0..count {
        let (command, accepted) = model.next_command(rng);
        let via = members[rng.random_range(0..members.len())];
        let (outcome, in_doubt) = propose_until_known(cluster.group(via), &command).await;
        match outcome {
            Ok(version) => {
                assert!(accepted, "{command:?} was accepted, the model refuses it");
                assert!(version > version_last, "versions rise");
                version_last = version;
                model.accept(&command);
            }
            // A retried removal is refused when its first attempt had applied.
            Err(MetaRejection::UnknownNode { .. } | MetaRejection::UnknownSindex { .. })
                if accepted && in_doubt =>
            {
                model.accept(&command);
            }
            Err(rejection) => {
                assert!(!accepted, "{command:?} was rejected: {rejection}");
            }
        }
    }
    version_last
}

/// Proposes `command` until its outcome is known: the version it produced or its rejection, and
/// whether an earlier attempt was in doubt (a lost message). Commands are idempotent in effect,
/// so proposing one again that did apply is harmless.
async fn propose_until_known(
    group: &MetaGroup,
    command: &MetaCommand,
) -> (Result<u64, MetaRejection>, bool) {
    let mut in_doubt = false;
    for _ in 0..10 {
        match group.propose_via_leader(command.clone()).await {
            Ok(applied) => return (Ok(applied.version), in_doubt),
            Err(MetaError::Rejected(rejection)) => return (Err(rejection), in_doubt),
            Err(MetaError::Timeout { .. } | MetaError::Transport(_)) => in_doubt = true,
            Err(error) => panic!("{command:?} through node {}: {error}", group.node_id()),
        }
    }
    panic!(
        "{command:?} through node {}: no outcome after 10 tries",
        group.node_id()
    );
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// Three voters on a network with random delays and 2% message loss elect one leader and commit
/// a random sequence of commands proposed through any member; each outcome matches the model,
/// versions rise, and all three end with the same state.
#[test]
fn three_voters_elect_one_leader_and_agree_on_every_command() {
    run_seeded("three_voters", SEEDS_DEFAULT, |seed| async move {
        let voters = [1, 2, 3];
        let mut cluster = Cluster::with_voters(seed, 20, &voters).await;
        cluster.wait_leader(&voters).await;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut model = Model::default();
        let version = propose_random(&cluster, &voters, &mut model, &mut rng, 25).await;
        let state = cluster.wait_converged(&voters, version).await;
        model.check(&state);
        assert_eq!(state.voters, BTreeSet::from(voters));
        cluster.shutdown().await;
    });
}

/// A node added as a learner after the log was compacted gets the state by snapshot, then
/// follows new commands; it never votes.
#[test]
fn a_learner_receives_the_state_by_snapshot_and_then_by_log() {
    run_seeded("learner", 5, |seed| async move {
        let voters = [1, 2, 3];
        let config = MetaConfig {
            snapshot_after_logs: 5,
            logs_kept_after_snapshot: 0,
            ..MetaConfig::default()
        };
        let mut cluster = Cluster::new(seed, 0, config);
        for id in voters {
            cluster.start(id).await;
        }
        let members = voters.iter().map(|&id| (id, info(id))).collect();
        cluster
            .group(1)
            .bootstrap(members)
            .await
            .expect("bootstrap once");
        let leader = cluster.wait_leader(&voters).await;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut model = Model::default();
        propose_random(&cluster, &voters, &mut model, &mut rng, 20).await;
        cluster.start(4).await;
        cluster
            .group(leader)
            .add_learner(4, info(4))
            .await
            .expect("learner added");
        let learner = cluster.group(4).clone();
        wait_until("the learner installs a snapshot", || {
            learner.metrics().borrow().snapshot.is_some()
        })
        .await;
        let version = propose_random(&cluster, &[1, 2, 3, 4], &mut model, &mut rng, 5).await;
        let all = [1, 2, 3, 4];
        let state = cluster.wait_converged(&all, version).await;
        model.check(&state);
        assert_eq!(state.learners, BTreeSet::from([4]));
        cluster.shutdown().await;
    });
}

/// With the leader cut off, its proposal cannot commit; the other two elect a new leader and go
/// on; after healing, the old leader drops its uncommitted entry and converges.
#[test]
fn a_partitioned_leader_is_replaced_and_converges_after_healing() {
    run_seeded("leader_partition", 10, |seed| async move {
        let voters = [1, 2, 3];
        let mut cluster = Cluster::with_voters(seed, 0, &voters).await;
        let old_leader = cluster.wait_leader(&voters).await;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut model = Model::default();
        propose_random(&cluster, &voters, &mut model, &mut rng, 5).await;
        cluster.network.isolate(old_leader);
        let lost = MetaCommand::PutSindex {
            namespace: NAMESPACE.to_owned(),
            name: "never-committed".to_owned(),
            definition: String::new(),
        };
        let stranded = cluster.group(old_leader).clone();
        let proposal = tokio::spawn(async move { stranded.propose(lost).await });
        let others: Vec<NodeId> = voters.into_iter().filter(|&id| id != old_leader).collect();
        let new_leader = cluster.wait_leader(&others).await;
        assert_ne!(new_leader, old_leader);
        let version = propose_random(&cluster, &others, &mut model, &mut rng, 5).await;
        let outcome = proposal.await.expect("the proposal task ends");
        assert!(
            outcome.is_err(),
            "a cut-off leader cannot commit: {outcome:?}"
        );
        cluster.network.heal();
        let state = cluster.wait_converged(&voters, version).await;
        model.check(&state);
        cluster.shutdown().await;
    });
}

/// A leader whose followers are both cut off cannot commit (the proposal times out, in doubt);
/// neither can a lone follower. After healing the group commits again and converges.
#[test]
fn a_minority_cannot_commit() {
    run_seeded("minority", 10, |seed| async move {
        let voters = [1, 2, 3];
        let mut cluster = Cluster::with_voters(seed, 0, &voters).await;
        let leader = cluster.wait_leader(&voters).await;
        let followers: Vec<NodeId> = voters.into_iter().filter(|&id| id != leader).collect();
        for &id in &followers {
            cluster.network.isolate(id);
        }
        let command = MetaCommand::AddNode {
            id: 9,
            info: info(9),
        };
        let outcome = cluster.group(leader).propose(command.clone()).await;
        assert!(
            matches!(outcome, Err(MetaError::Timeout { .. })),
            "{outcome:?}"
        );
        let outcome = cluster
            .group(followers[0])
            .propose_via_leader(command)
            .await;
        assert!(
            outcome.is_err(),
            "a lone follower cannot commit: {outcome:?}"
        );
        cluster.network.heal();
        let command = MetaCommand::AddNode {
            id: 7,
            info: info(7),
        };
        let applied = cluster
            .group(followers[1])
            .propose_via_leader(command)
            .await;
        let applied = applied.expect("a healed group commits");
        let state = cluster.wait_converged(&voters, applied.version).await;
        assert!(state.nodes.contains_key(&7));
        cluster.shutdown().await;
    });
}

/// A member that loses power restarts from what its disk kept: it re-applies its committed log
/// alone (while still cut off), refuses to be initialized again and catches up after rejoining.
/// Then all three lose power at once and the group resumes from their disks.
#[test]
fn restarted_members_recover_their_state_without_initializing_again() {
    run_seeded("restart", 10, |seed| async move {
        let voters = [1, 2, 3];
        let mut cluster = Cluster::with_voters(seed, 0, &voters).await;
        cluster.wait_leader(&voters).await;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut model = Model::default();
        let version = propose_random(&cluster, &voters, &mut model, &mut rng, 10).await;
        let before = cluster.wait_converged(&voters, version).await;
        cluster.crash(2).await;
        propose_random(&cluster, &[1, 3], &mut model, &mut rng, 5).await;
        cluster.network.isolate(2);
        cluster.start(2).await;
        let restarted = cluster.group(2).clone();
        wait_until("local recovery", || {
            restarted.state().version >= before.version
        })
        .await;
        let error = restarted
            .bootstrap(voters.iter().map(|&id| (id, info(id))).collect())
            .await;
        assert_eq!(error, Err(MetaError::AlreadyInitialized));
        cluster.network.heal();
        let version = propose_random(&cluster, &voters, &mut model, &mut rng, 3).await;
        let state = cluster.wait_converged(&voters, version).await;
        model.check(&state);
        for id in voters {
            cluster.crash(id).await;
        }
        for id in voters {
            cluster.start(id).await;
        }
        cluster.wait_leader(&voters).await;
        let version = propose_random(&cluster, &voters, &mut model, &mut rng, 3).await;
        let state = cluster.wait_converged(&voters, version).await;
        model.check(&state);
        cluster.shutdown().await;
    });
}

/// A one-voter group whose disk starts failing its syncs refuses the next proposal instead of
/// acknowledging it, and after a power loss the store holds every earlier command and not that
/// one.
#[test]
fn a_failed_sync_is_an_error_and_the_command_is_not_acknowledged() {
    paused_runtime().block_on(async {
        let mut cluster = Cluster::with_voters(0, 0, &[1]).await;
        cluster.wait_leader(&[1]).await;
        let kept = MetaCommand::AddNode {
            id: 5,
            info: info(5),
        };
        cluster
            .group(1)
            .propose(kept)
            .await
            .expect("a healthy disk commits");
        cluster.disks[&1].set_syncs_failing(true);
        let failed = MetaCommand::AddNode {
            id: 6,
            info: info(6),
        };
        let outcome = cluster.group(1).propose(failed).await;
        assert!(
            outcome.is_err(),
            "a failed sync must not be acknowledged: {outcome:?}"
        );
        cluster.network.detach(1);
        let image = Arc::new(cluster.disks[&1].crash_image());
        cluster.disks.insert(1, image);
        cluster.groups.remove(&1);
        cluster.start(1).await;
        cluster.wait_leader(&[1]).await;
        let state = cluster.group(1).state();
        assert!(state.nodes.contains_key(&5));
        assert!(!state.nodes.contains_key(&6));
        cluster.shutdown().await;
    });
}

/// The log store reports a failed vote sync as an error and then refuses every write, appends
/// included, until it is reopened.
#[test]
fn the_log_store_stops_after_a_failed_sync() {
    paused_runtime().block_on(async {
        let disk = Arc::new(MemoryDisk::new());
        let mut store = MetaLogStore::open(disk.clone()).expect("an empty store opens");
        let vote = openraft::Vote::new(1, 1);
        store.save_vote(&vote).await.expect("a healthy disk saves");
        disk.set_syncs_failing(true);
        assert!(store.save_vote(&openraft::Vote::new(2, 1)).await.is_err());
        disk.set_syncs_failing(false);
        let entry = openraft::Entry::<TypeConfig> {
            log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), 0),
            payload: openraft::EntryPayload::Blank,
        };
        assert!(store.blocking_append([entry]).await.is_err());
        let mut reopened = MetaLogStore::open(disk.clone()).expect("the store reopens");
        assert_eq!(reopened.read_vote().await.expect("readable"), Some(vote));
    });
}

// ---------------------------------------------------------------------------------------------
// Real files

/// A directory under the system temporary directory, removed when dropped.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new(label: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("osprey-meta-{label}-{}-{count}", std::process::id());
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&path);
        Self { path }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A one-voter group on real files commits commands (a whole partition table among them), stops,
/// and restarts from the directory with the same state, without initializing again.
#[test]
fn the_file_store_survives_a_restart() {
    paused_runtime().block_on(async {
        let dir = TempDir::new("restart");
        let network = SimNetwork::new(0, SimConfig::default());
        let start = async || {
            let disk: Arc<dyn MetaDisk> = Arc::new(FileDisk::open(&dir.path).expect("temp dir"));
            let group = MetaGroup::start(
                1,
                info(1),
                disk,
                network.transport(1),
                MetaConfig::default(),
            );
            let group = group.await.expect("a member starts");
            network.attach(&group);
            group
        };
        let group = start().await;
        group
            .bootstrap(BTreeMap::from([(1, info(1))]))
            .await
            .expect("bootstrap once");
        let mut model = Model::default();
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..10 {
            let (command, accepted) = model.next_command(&mut rng);
            match group.propose_via_leader(command.clone()).await {
                Ok(_) => model.accept(&command),
                Err(MetaError::Rejected(_)) => assert!(!accepted),
                Err(error) => panic!("{command:?}: {error}"),
            }
        }
        let assignment = PartitionAssignment {
            replicas: replicas(true),
            version: 3,
            master_since: 3,
            handoff_to: Vec::new(),
        };
        let all = vec![assignment; model::PARTITION_COUNT];
        let table = PartitionTable::new(all).expect("PARTITION_COUNT assignments");
        let namespace = "big".to_owned();
        let command = MetaCommand::SetPartitionTable {
            namespace,
            table,
            moves_waiting: 0,
        };
        group
            .propose_via_leader(command)
            .await
            .expect("a table commits");
        let before = group.state();
        group.shutdown().await.expect("a clean stop");
        network.detach(1);
        let names: Vec<String> = std::fs::read_dir(&dir.path)
            .expect("the store directory exists")
            .map(|entry| {
                entry
                    .expect("readable")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        for name in ["vote", "committed", "log-00000000000000000000"] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
        let group = start().await;
        let again = group.bootstrap(BTreeMap::from([(1, info(1))])).await;
        assert_eq!(again, Err(MetaError::AlreadyInitialized));
        wait_until("recovered", || group.state().version >= before.version).await;
        assert_eq!(*group.state(), *before);
        model.check(&group.state());
        let command = MetaCommand::AddNode {
            id: 3,
            info: info(3),
        };
        group
            .propose_via_leader(command)
            .await
            .expect("commits after restart");
        group.shutdown().await.expect("a clean stop");
        network.detach(1);
    });
}

// ---------------------------------------------------------------------------------------------
// openraft's own storage conformance suite

struct MemoryStoreBuilder;

impl StoreBuilder<TypeConfig, MetaLogStore, MetaStateMachine, ()> for MemoryStoreBuilder {
    async fn build(
        &self,
    ) -> Result<((), MetaLogStore, MetaStateMachine), openraft::StorageError<NodeId>> {
        let disk: Arc<dyn MetaDisk> = Arc::new(MemoryDisk::new());
        let log_store = MetaLogStore::open(disk.clone())?;
        Ok(((), log_store, MetaStateMachine::open(disk)?))
    }
}

struct FileStoreBuilder;

impl StoreBuilder<TypeConfig, MetaLogStore, MetaStateMachine, TempDir> for FileStoreBuilder {
    async fn build(
        &self,
    ) -> Result<(TempDir, MetaLogStore, MetaStateMachine), openraft::StorageError<NodeId>> {
        let dir = TempDir::new("suite");
        let disk: Arc<dyn MetaDisk> = Arc::new(FileDisk::open(&dir.path).expect("temp dir"));
        let log_store = MetaLogStore::open(disk.clone())?;
        Ok((dir, log_store, MetaStateMachine::open(disk)?))
    }
}

/// Runs every test of openraft's storage suite against stores from `builder`, on a paused clock
/// (the suite sleeps a second in several tests to let lazy purges finish).
fn run_storage_suite<B, G>(builder: B)
where
    B: StoreBuilder<TypeConfig, MetaLogStore, MetaStateMachine, G>,
    G: Send + Sync,
{
    type Tests<B, G> = Suite<TypeConfig, MetaLogStore, MetaStateMachine, B, G>;
    macro_rules! run {
        ($($test:ident),* $(,)?) => {$(
            let (_guard, store, state_machine) = builder.build().await.expect("a store builds");
            let result = Tests::<B, G>::$test(store, state_machine).await;
            result.unwrap_or_else(|error| panic!("{}: {error}", stringify!($test)));
        )*};
    }
    paused_runtime().block_on(async {
        run!(
            last_membership_in_log_initial,
            last_membership_in_log,
            last_membership_in_log_multi_step,
            get_membership_initial,
            get_membership_from_log_and_empty_sm,
            get_membership_from_empty_log_and_sm,
            get_membership_from_log_le_sm_last_applied,
            get_membership_from_log_gt_sm_last_applied_1,
            get_membership_from_log_gt_sm_last_applied_2,
            get_initial_state_without_init,
            get_initial_state_membership_from_log_and_sm,
            get_initial_state_with_state,
            get_initial_state_last_log_gt_sm,
            get_initial_state_last_log_lt_sm,
            get_initial_state_log_ids,
            get_initial_state_re_apply_committed,
            save_vote,
            get_log_entries,
            limited_get_log_entries,
            try_get_log_entry,
            initial_logs,
            get_log_state,
            get_log_id,
            last_id_in_log,
            last_applied_state,
            purge_logs_upto_0,
            purge_logs_upto_5,
            purge_logs_upto_20,
            delete_logs_since_11,
            delete_logs_since_0,
            append_to_log,
            snapshot_meta,
            apply_single,
            apply_multiple,
        );
        let result = Tests::<B, G>::transfer_snapshot(&builder).await;
        result.expect("transfer_snapshot");
    });
}

/// The store passes openraft's storage suite, in memory and on files.
#[test]
fn the_store_passes_openraft_storage_suite() {
    run_storage_suite(MemoryStoreBuilder);
    run_storage_suite(FileStoreBuilder);
}

/// Rejections travel back to the proposer through the leader.
#[test]
fn a_rejection_reaches_a_proposer_that_is_not_the_leader() {
    paused_runtime().block_on(async {
        let voters = [1, 2, 3];
        let mut cluster = Cluster::with_voters(1, 0, &voters).await;
        let leader = cluster.wait_leader(&voters).await;
        let follower = voters
            .into_iter()
            .find(|&id| id != leader)
            .expect("two followers");
        let command = MetaCommand::RemoveNode { id: 42 };
        let direct = cluster.group(follower).propose(command.clone()).await;
        assert_eq!(
            direct,
            Err(MetaError::ForwardToLeader {
                leader_id: Some(leader)
            })
        );
        let forwarded = cluster.group(follower).propose_via_leader(command).await;
        let rejection = MetaRejection::UnknownNode { id: 42 };
        assert_eq!(forwarded, Err(MetaError::Rejected(rejection)));
        cluster.shutdown().await;
    });
}

/// The story: node 1 formed the group alone (the log's first membership names it as the only
/// voter), nodes 2 and 3 joined, node 1 left and came back with an empty store. Catching up a
/// few entries per message, it passed through that first membership, saw itself as the only
/// voter and elected itself at once, at a higher term than the real leader's: the others
/// followed it, and their committed log was overwritten (openraft then panicked applying it).
/// A member that started empty now stands for election only once its log names this
/// incarnation (its boot id) as a member.
#[test]
fn a_wiped_member_coming_back_does_not_elect_itself_from_an_old_membership() {
    run_seeded("wiped_member", 5, |seed| async move {
        let mut cluster = Cluster::new(seed, 0, MetaConfig::default());
        for id in [1, 2, 3] {
            cluster.start(id).await;
        }
        let alone = BTreeMap::from([(1, info(1))]);
        cluster
            .group(1)
            .bootstrap(alone)
            .await
            .expect("bootstrap once");
        cluster.wait_leader(&[1]).await;
        for id in [2, 3] {
            cluster
                .group(1)
                .add_learner(id, info(id))
                .await
                .expect("learner added");
        }
        let all = BTreeSet::from([1, 2, 3]);
        cluster
            .group(1)
            .change_voters(all, false)
            .await
            .expect("three voters");
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut model = Model::default();
        propose_random(&cluster, &[1, 2, 3], &mut model, &mut rng, 40).await;
        let leader = cluster.group(1).clone();
        leader
            .change_voters(BTreeSet::from([2, 3]), false)
            .await
            .expect("node 1 leaves");
        let others = [2, 3];
        let new_leader = cluster.wait_leader(&others).await;
        let term = cluster.group(new_leader).metrics().borrow().current_term;
        cluster.network.detach(1);
        leader.shutdown().await.expect("a clean stop");
        cluster.groups.remove(&1);

        cluster.start_wiped(1, 2).await;
        // Lost messages leave node 1 waiting between batches, past election ticks.
        cluster.network.set_drop_per_mille(300);
        let new_info = NodeInfo {
            boot_id: 2,
            ..info(1)
        };
        cluster
            .group(new_leader)
            .add_learner(1, new_info)
            .await
            .expect("learner added");
        let version = propose_random(&cluster, &others, &mut model, &mut rng, 5).await;
        cluster.network.set_drop_per_mille(0);
        let state = cluster.wait_converged(&[1, 2, 3], version).await;
        model.check(&state);
        assert_eq!(state.voters, BTreeSet::from(others));
        assert_eq!(cluster.agreed_leader(&[1, 2, 3]), Some(new_leader));
        let metrics = cluster.group(new_leader).metrics().borrow().clone();
        assert_eq!(
            metrics.current_term, term,
            "no election since node 1 came back"
        );
        cluster.shutdown().await;
    });
}
