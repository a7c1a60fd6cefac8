//! Seeded simulation of a changing cluster in one process.
//!
//! Nodes run on the in-memory network (`fabric::MemoryNetwork`) with memory disks for the
//! metadata group, on a single-threaded runtime whose clock is virtual: whenever every task
//! waits, time jumps to the next timer, so seconds of heartbeats, timeouts and migrations
//! take milliseconds. A client writes new keys and deletes acknowledged ones, recording each
//! outcome (acknowledged, failed, in doubt), while the scenario drawn from the seed crashes
//! and restarts nodes, cuts one off the network, adds nodes, crashes the source or the
//! target of a migration while it streams, and makes a node leave. After the faults heal and
//! the cluster settles, the checkers demand:
//! - every partition has one master and as many full copies as the replication factor;
//! - every acknowledged write reads back on its partition's master, and no acknowledged
//!   delete comes back;
//! - every partition's copies hold the same versions (`partition_content_hash`).
//!
//! A crash cuts the node off the network before it stops, so nothing it does afterwards
//! reaches the others, and it restarts empty (its storage was memory) with the synced part of
//! its metadata disk (`MemoryDisk::crash_image`). At most one node is down or cut off at a
//! time, and each fault starts once the previous one settled: with two copies, two
//! overlapping failures may lose what both copies held, which no promise covers.
//!
//! `OSPREY_SIM_SEEDS=N` runs N seeds from a random first one (default 2, as many at once as
//! there are cores); `OSPREY_SIM_SEED=S` replays seed S alone (with `OSPREY_SIM_SEEDS=N`, the N
//! seeds from S); `OSPREY_SIM_LOG=info` prints the nodes' logs. The seed draws the scenario,
//! the victims, the network delay, the timings and the client's choices. The runtime has one
//! thread, so a seed replays the same sequence of faults and client operations; the
//! interleaving is not bit for bit the same from run to run (hash maps iterate in a per-process
//! order, and fills read on the blocking pool).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cluster::metadata::{MemoryDisk, MetaDisk};
use engine::{
    Acks, BinRef, Deadline, DeleteRequest, GenerationPolicy, Namespace, NamespaceConfig,
    PartitionRole, ReplySink, SystemClock,
};
use fabric::MemoryNetwork;
use model::{Digest, NodeId, Op, OpCode, PartitionId, ResultCode, UserKey};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::time::{Instant, sleep};

use super::config::{ClusterConfig, CommitLevelOverride};
use super::node::{ClusterNode, MetadataStore, NodeSetup};
use super::tests::{read_request, write_request};
use super::view::ClusterView;

const NAMESPACE: &str = "test";
const REPLICATION_FACTOR: usize = 2;
/// Nodes the cluster forms with; the scenarios add a fourth (a node leaves first when four
/// run).
const FIRST_NODES: usize = 3;
/// Virtual time a client waits for a write's replicas before calling it in doubt.
const ACK_WAIT: Duration = Duration::from_secs(3);
/// Virtual time the cluster has to settle after a fault.
const SETTLE_WITHIN: Duration = Duration::from_secs(120);
/// Seeds a plain `cargo test` runs: a seed costs about 10 s of CPU in a debug build (a second
/// in an optimized one, where `cargo xtask simulate` runs hundreds, as CI does).
const SEEDS_DEFAULT: u64 = 2;
/// Real time one seed may take before the test calls it hung.
const SEED_REAL_TIME_MAX: Duration = Duration::from_secs(120);

/// One simulated run: the network, the nodes, the client's record and the fault log.
struct Sim {
    network: MemoryNetwork,
    nodes: Vec<SimNode>,
    rng: SmallRng,
    started: Instant,
    log: Vec<String>,
    /// What went wrong while a fault was on (the checkers after it see only the outcome).
    problems: Vec<String>,
}

/// One node's slot: its address and id stay across restarts, its metadata disk survives
/// crashes (as much of it as was synced).
struct SimNode {
    address: String,
    id: NodeId,
    disk: Arc<MemoryDisk>,
    running: Option<Arc<ClusterNode>>,
    /// Cut off the network by a fault (not by a crash).
    isolated: bool,
}

/// What the client knows of each key it touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// An acknowledged write, no delete tried since.
    Present,
    /// An acknowledged delete, no write since.
    Absent,
    /// The last change's outcome is unknown (in doubt).
    Either,
}

/// The client's record, shared with the checker.
#[derive(Default)]
struct History {
    keys: BTreeMap<u64, Expect>,
    acknowledged: u64,
    in_doubt: u64,
    failed: u64,
    /// Acknowledged keys a delete found missing on their master: lost writes, seen early.
    lost_seen: Vec<(u64, String)>,
}

/// The nodes the client can reach, as it would learn them.
type Running = Arc<Mutex<Vec<Arc<ClusterNode>>>>;

struct NoSink;

impl ReplySink for NoSink {
    fn bin(&mut self, _: OpCode, _: BinRef<'_>) {}
}

/// The faults a seed draws from.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// A node crashes, stays down a while (shorter or longer than the heartbeat timeout), and
    /// restarts empty.
    CrashRestart,
    /// A node is cut off from every other for a while, then healed.
    Isolate,
    /// A node joins; while it fills, it crashes; it restarts.
    JoinCrashTarget,
    /// A node joins; while it fills, the master it streams from crashes; it restarts.
    JoinCrashSource,
    /// A node joins, the cluster settles, then a node leaves gracefully.
    JoinThenLeave,
    /// What one node sends another is dropped (the other way still arrives) for longer than
    /// the group needs to remove one of the two, then healed.
    OneWayDrop,
}

const FAULTS: [Fault; 6] = [
    Fault::CrashRestart,
    Fault::Isolate,
    Fault::JoinCrashTarget,
    Fault::JoinCrashSource,
    Fault::JoinThenLeave,
    Fault::OneWayDrop,
];

/// How long a one-way drop lasts: past the heartbeat timeout twice (the receiver stops
/// hearing the sender, then the leader waits as long again before it removes one), with time
/// for the commit.
const ONE_WAY_DROP_MS: std::ops::Range<u64> = 4_500..7_000;

/// How much longer a one-way drop may last, past [`ONE_WAY_DROP_MS`], before the roster must
/// have lost one of the two nodes (seed 700443462: elections set off by the cut delayed it past
/// 6.4 s).
const ONE_WAY_REMOVAL_WITHIN: Duration = Duration::from_secs(10);

fn digest_of(key: u64) -> Digest {
    Digest::compute(b"sim", &UserKey::Integer(key as i64))
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let network = MemoryNetwork::new();
        let mut rng = SmallRng::seed_from_u64(seed);
        // At least a millisecond: with none, virtual time stands still while partitions move,
        // so a fault meant for the middle of a migration could never land there.
        network.set_delay_ms(rng.random_range(1..4));
        let nodes = (0..FIRST_NODES + 1)
            .map(|i| SimNode {
                address: format!("node{i}:1"),
                id: NodeId(0xB0 + i as u64),
                disk: Arc::new(MemoryDisk::new()),
                running: None,
                isolated: false,
            })
            .collect();
        Sim {
            network,
            nodes,
            rng,
            started: Instant::now(),
            log: Vec::new(),
            problems: Vec::new(),
        }
    }

    fn note(&mut self, event: String) {
        let at_ms = self.started.elapsed().as_millis();
        tracing::info!(at_ms, "simulation: {event}");
        self.log.push(format!("{at_ms:>7} ms  {event}"));
    }

    async fn start_node(&mut self, index: usize, running: &Running) {
        let seeds: Vec<String> = (0..FIRST_NODES).map(|i| format!("node{i}:1")).collect();
        let slot = &self.nodes[index];
        let namespace = Arc::new(Namespace::new(
            NamespaceConfig::with_defaults(NAMESPACE),
            Arc::new(SystemClock),
        ));
        let disk: Arc<dyn MetaDisk> = slot.disk.clone();
        let setup = NodeSetup {
            config: ClusterConfig {
                fabric_address: format!("node{index}"),
                fabric_port: 1,
                seeds,
                ..ClusterConfig::default()
            },
            cluster_name: "sim".to_owned(),
            node_id: slot.id,
            service_address: format!("127.0.0.1:{}", 3000 + index),
            resp_address: None,
            tls_service: None,
            namespaces: vec![(namespace, REPLICATION_FACTOR)],
            commit_levels: vec![CommitLevelOverride::Off],
            latencies: None,
            metadata: MetadataStore::Disk(disk),
            network: Arc::new(self.network.endpoint(&slot.address)),
        };
        let node = ClusterNode::start(setup)
            .await
            .expect("a simulated node starts");
        running.lock().push(node.clone());
        self.nodes[index].running = Some(node);
        self.note(format!("node {index} started"));
    }

    /// Cuts node `index` off the network, stops it, and keeps what its metadata disk synced.
    async fn crash(&mut self, index: usize, running: &Running) {
        self.cut(index);
        let node = self.nodes[index].running.take().expect("a running node");
        running.lock().retain(|n| !Arc::ptr_eq(n, &node));
        node.shutdown().await;
        let image = self.nodes[index].disk.crash_image();
        self.nodes[index].disk = Arc::new(image);
        self.note(format!("node {index} crashed"));
    }

    fn cut(&self, index: usize) {
        let address = &self.nodes[index].address;
        for other in self.nodes.iter().filter(|n| n.address != *address) {
            self.network.partition(address, &other.address);
        }
    }

    fn heal(&self, index: usize) {
        let address = &self.nodes[index].address;
        for other in self
            .nodes
            .iter()
            .filter(|n| n.address != *address && !n.isolated)
        {
            self.network.heal(address, &other.address);
        }
    }

    fn running_indexes(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|i| self.nodes[*i].running.is_some())
            .collect()
    }

    fn pick_running(&mut self) -> usize {
        let running = self.running_indexes();
        running[self.rng.random_range(0..running.len())]
    }

    fn pause(&mut self, from_ms: u64, to_ms: u64) -> Duration {
        Duration::from_millis(self.rng.random_range(from_ms..to_ms))
    }

    /// Waits until every running node serves the same map of exactly the running nodes,
    /// with nothing moving and nothing missing.
    async fn settle(&mut self) {
        let deadline = Instant::now() + SETTLE_WITHIN;
        while Instant::now() < deadline {
            if self.settled() {
                self.note("settled".to_owned());
                return;
            }
            sleep(Duration::from_millis(100)).await;
        }
        let remaining: Vec<String> = self
            .nodes
            .iter()
            .filter_map(|slot| slot.running.as_ref())
            .map(|node| {
                let summary = node.summary();
                format!(
                    "{}: size {} version {} remaining {}",
                    node.node_id(),
                    summary.size,
                    node.layout_version(),
                    summary.migrate_partitions_remaining
                )
            })
            .collect();
        panic!(
            "not settled within {SETTLE_WITHIN:?} of virtual time: {remaining:?}\n{}",
            self.log.join("\n")
        );
    }

    fn settled(&self) -> bool {
        let nodes: Vec<&Arc<ClusterNode>> = self
            .nodes
            .iter()
            .filter_map(|slot| slot.running.as_ref())
            .collect();
        let versions: Vec<u64> = nodes.iter().map(|n| n.layout_version()).collect();
        nodes.iter().all(|node| {
            let summary = node.summary();
            node.partition_generation() > 0
                && summary.size == nodes.len()
                && summary.migrate_partitions_remaining == 0
                && node.replication_drained()
        }) && versions.windows(2).all(|pair| pair[0] == pair[1])
    }

    async fn inject(&mut self, fault: Fault, running: &Running) {
        self.note(format!("fault {fault:?}"));
        match fault {
            Fault::CrashRestart => {
                let victim = self.pick_running();
                self.crash(victim, running).await;
                let down_for = self.pause(10, 4000);
                sleep(down_for).await;
                self.heal(victim);
                self.start_node(victim, running).await;
            }
            Fault::Isolate => {
                let victim = self.pick_running();
                self.nodes[victim].isolated = true;
                self.cut(victim);
                self.note(format!("node {victim} cut off"));
                let cut_for = self.pause(200, 4000);
                sleep(cut_for).await;
                self.nodes[victim].isolated = false;
                self.heal(victim);
                self.note(format!("node {victim} healed"));
            }
            Fault::JoinCrashTarget | Fault::JoinCrashSource => {
                self.join_then_crash(fault, running).await;
            }
            Fault::JoinThenLeave => {
                self.join(running).await;
                self.settle().await;
                self.leave(running).await;
            }
            Fault::OneWayDrop => self.drop_one_way().await,
        }
        self.settle().await;
    }

    /// Drops what one node sends another for [`ONE_WAY_DROP_MS`], then checks that the group
    /// removed one of the two meanwhile: with both members, the writes of the partitions they
    /// share would wait for acknowledgements that cannot come for as long as the drop lasts.
    async fn drop_one_way(&mut self) {
        let from = self.pick_running();
        let to = loop {
            let to = self.pick_running();
            if to != from {
                break to;
            }
        };
        let (from_address, to_address) = (
            self.nodes[from].address.clone(),
            self.nodes[to].address.clone(),
        );
        self.network.drop_one_way(&from_address, &to_address);
        self.note(format!("what node {from} sends node {to} is dropped"));
        let drop_for = self.pause(ONE_WAY_DROP_MS.start, ONE_WAY_DROP_MS.end);
        sleep(drop_for).await;
        let (from_id, to_id) = (self.nodes[from].id.0, self.nodes[to].id.0);
        let third = self
            .running_indexes()
            .into_iter()
            .find(|i| ![from, to].contains(i));
        if let Some(node) = third.and_then(|i| self.nodes[i].running.clone()) {
            // Elections the cut sets off (a leader whose messages the other node misses) can
            // delay the removal: the drop lasts until it, within a bound.
            let both_in = || {
                let state = node.meta().state();
                state.nodes.contains_key(&from_id) && state.nodes.contains_key(&to_id)
            };
            let deadline = Instant::now() + ONE_WAY_REMOVAL_WITHIN;
            while both_in() && Instant::now() < deadline {
                sleep(Duration::from_millis(100)).await;
            }
            if both_in() {
                self.problems.push(format!(
                    "after {:?} of a one-way drop from node {from} to node {to}, both are still \
                     in the roster: their shared partitions take no writes",
                    drop_for + ONE_WAY_REMOVAL_WITHIN
                ));
            }
        }
        self.network.heal_one_way(&from_address, &to_address);
        self.note(format!("the drop from node {from} to node {to} healed"));
    }

    /// Starts the spare node if it is not running; returns its index.
    async fn join(&mut self, running: &Running) -> usize {
        if self.nodes.iter().all(|slot| slot.running.is_some()) {
            self.leave(running).await;
            self.settle().await;
        }
        let spare = self.nodes.iter().position(|slot| slot.running.is_none());
        let index = spare.expect("a node slot is free");
        self.start_node(index, running).await;
        index
    }

    async fn join_then_crash(&mut self, fault: Fault, running: &Running) {
        let target = self.join(running).await;
        let node = self.nodes[target].running.clone().expect("running");
        let deadline = Instant::now() + SETTLE_WITHIN;
        // Crash once the new node is filling and has received something (or, with nothing
        // to receive, once it fills at all).
        while Instant::now() < deadline {
            let summary = node.summary().migration;
            if summary.rx_partitions_active > 0 && self.rng.random_bool(0.3) {
                break;
            }
            sleep(Duration::from_millis(self.rng.random_range(5..50))).await;
        }
        let victim = match fault {
            Fault::JoinCrashTarget => target,
            _ => self.source_of_a_fill(&node).unwrap_or(target),
        };
        match Instant::now() < deadline {
            true => self.note(format!("crash node {victim} mid-migration")),
            false => self.note(format!(
                "crash node {victim}: no fill seen in {SETTLE_WITHIN:?}"
            )),
        }
        self.crash(victim, running).await;
        let down_for = self.pause(200, 3000);
        sleep(down_for).await;
        self.heal(victim);
        self.start_node(victim, running).await;
    }

    /// A node that masters a partition `filling` fills.
    fn source_of_a_fill(&self, filling: &Arc<ClusterNode>) -> Option<usize> {
        let namespace = filling.namespace(NAMESPACE.as_bytes())?;
        let pid = PartitionId::all()
            .find(|pid| namespace.partition_role(*pid).0 == PartitionRole::Filling)?;
        (0..self.nodes.len()).find(|i| {
            self.nodes[*i].running.as_ref().is_some_and(|node| {
                node.namespace(NAMESPACE.as_bytes())
                    .is_some_and(|ns| ns.partition_role(pid).0 == PartitionRole::Master)
            })
        })
    }

    /// Asks the cluster to let a random node leave; once the roster no longer has it, stops
    /// it (its partitions moved away first).
    async fn leave(&mut self, running: &Running) {
        let leaving = self.pick_running();
        let id = self.nodes[leaving].id;
        // Another node asks and watches: once out of the metadata group, the leaving node no
        // longer learns what the group commits, its own removal included.
        let others: Vec<usize> = self
            .running_indexes()
            .into_iter()
            .filter(|i| *i != leaving)
            .collect();
        let asked = others[self.rng.random_range(0..others.len())];
        let asker = self.nodes[asked].running.clone().expect("running");
        asker.leave(id).expect("a member may leave");
        self.note(format!("node {leaving} asked to leave"));
        let deadline = Instant::now() + SETTLE_WITHIN;
        while asker.meta().state().nodes.contains_key(&id.0) {
            assert!(
                Instant::now() < deadline,
                "node {leaving} never left\n{}",
                self.log.join("\n")
            );
            sleep(Duration::from_millis(100)).await;
        }
        let node = self.nodes[leaving].running.take().expect("running");
        running.lock().retain(|n| !Arc::ptr_eq(n, &node));
        node.shutdown().await;
        // A node that left starts afresh if it ever comes back.
        self.nodes[leaving].disk = Arc::new(MemoryDisk::new());
        self.note(format!("node {leaving} left"));
    }
}

/// The client: writes new keys and deletes acknowledged ones on the node that claims each
/// key's partition as master (any of them, when a stale node still claims it), until `stop`.
async fn run_client(
    seed: u64,
    running: Running,
    history: Arc<Mutex<History>>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed);
    let mut next_key = 0_u64;
    let mut present: Vec<u64> = Vec::new();
    while !*stop.borrow() {
        let delete = !present.is_empty() && rng.random_bool(0.2);
        let key = if delete {
            present.swap_remove(rng.random_range(0..present.len()))
        } else {
            next_key += 1;
            next_key
        };
        let outcome = operate(&running, &mut rng, key, delete).await;
        record(&history, &mut present, key, delete, &outcome);
        sleep(Duration::from_millis(rng.random_range(1..6))).await;
    }
}

/// Notes `outcome` of the write (or `delete`) of `key` in `history`; `present` is what the
/// client may delete next.
fn record(
    history: &Mutex<History>,
    present: &mut Vec<u64>,
    key: u64,
    delete: bool,
    outcome: &Outcome,
) {
    let mut history = history.lock();
    let expect = history.keys.get(&key).copied();
    match (outcome, delete) {
        (Outcome::Acknowledged, false) => {
            history.acknowledged += 1;
            history.keys.insert(key, Expect::Present);
            present.push(key);
        }
        (Outcome::Acknowledged, true) => {
            history.acknowledged += 1;
            history.keys.insert(key, Expect::Absent);
        }
        (Outcome::NotFound(at), true) if expect == Some(Expect::Present) => {
            history.lost_seen.push((key, at.clone()));
        }
        (Outcome::InDoubt, _) => {
            history.in_doubt += 1;
            history.keys.insert(key, Expect::Either);
        }
        (Outcome::Failed | Outcome::NotFound(_), _) => {
            history.failed += 1;
            if delete && expect == Some(Expect::Present) {
                present.push(key);
            }
        }
    }
}

enum Outcome {
    Acknowledged,
    /// Not applied: refused before any change.
    Failed,
    /// A delete found no record on the node named, with its role and version.
    NotFound(String),
    /// Applied on the master; whether its replicas have it is unknown.
    InDoubt,
}

async fn operate(running: &Running, rng: &mut SmallRng, key: u64, delete: bool) -> Outcome {
    let digest = digest_of(key);
    let pid = digest.partition_id();
    let masters: Vec<Arc<ClusterNode>> = running
        .lock()
        .iter()
        .filter(|node| role_at(node, pid) == PartitionRole::Master)
        .cloned()
        .collect();
    if masters.is_empty() {
        return Outcome::Failed;
    }
    let node = &masters[rng.random_range(0..masters.len())];
    let namespace = node.namespace(NAMESPACE.as_bytes()).expect("namespace");
    let mut acks = Acks::default();
    let applied = if delete {
        let request = DeleteRequest {
            digest,
            set_name: b"",
            key: None,
            generation: GenerationPolicy::None,
            deadline: Deadline::NONE,
            filter: None,
        };
        namespace.delete(&request, &mut acks).map(drop)
    } else {
        let op = Op {
            code: OpCode::Write,
            particle_type: 1,
            bin_name: b"v",
            value: &key.to_be_bytes(),
        };
        namespace
            .write(
                &write_request(digest),
                std::iter::once(op),
                &mut NoSink,
                &mut acks,
            )
            .map(drop)
    };
    match applied {
        Err(ResultCode::NotFound) => Outcome::NotFound(format!(
            "on {} as {:?} at {:?}",
            node.node_id(),
            namespace.partition_role(pid),
            tokio::time::Instant::now()
        )),
        Err(_) => Outcome::Failed,
        Ok(()) => match tokio::time::timeout(ACK_WAIT, acks.settled()).await {
            Ok(Ok(())) => Outcome::Acknowledged,
            _ => Outcome::InDoubt,
        },
    }
}

fn role_at(node: &ClusterNode, pid: PartitionId) -> PartitionRole {
    node.namespace(NAMESPACE.as_bytes())
        .map_or(PartitionRole::Absent, |ns| ns.partition_role(pid).0)
}

fn found(namespace: &Namespace, digest: Digest) -> Result<bool, ResultCode> {
    let request = read_request(digest, true);
    match namespace.read(&request, std::iter::empty(), &mut NoSink) {
        Ok(_) => Ok(true),
        Err(ResultCode::NotFound) => Ok(false),
        Err(code) => Err(code),
    }
}

/// Says which node holds what of a partition whose copies differ, and where each key the
/// client wrote there is found.
fn copies_differ(
    pid: PartitionId,
    holders: &[(&Arc<ClusterNode>, PartitionRole)],
    hashes: &[(u64, u64)],
    history: &History,
) -> String {
    let copies: Vec<String> = holders
        .iter()
        .zip(hashes)
        .map(|((node, role), (count, _))| format!("{} {role:?}: {count} records", node.node_id()))
        .collect();
    let keys: Vec<String> = history
        .keys
        .iter()
        .filter(|(key, _)| digest_of(**key).partition_id() == pid)
        .map(|(key, expect)| {
            let digest = digest_of(*key);
            let on: Vec<String> = holders
                .iter()
                .map(|(node, _)| {
                    let namespace = node.namespace(NAMESPACE.as_bytes()).expect("namespace");
                    format!("{}: {:?}", node.node_id(), found(namespace, digest))
                })
                .collect();
            format!("key {key} {expect:?} {on:?}")
        })
        .collect();
    format!("partition {}: copies differ {copies:?}; {keys:?}", pid.0)
}

/// The checkers, on a settled cluster: one master and full copies everywhere, every
/// acknowledged key as the client last left it, and equal copies. Returns what is wrong.
fn check(nodes: &[Arc<ClusterNode>], history: &History) -> Vec<String> {
    let mut problems = Vec::new();
    for (key, at) in &history.lost_seen {
        let partition = digest_of(*key).partition_id().0;
        problems.push(format!(
            "key {key} (partition {partition}): acknowledged, then a delete found it missing {at}"
        ));
    }
    let mut masters: Vec<Option<&Arc<ClusterNode>>> = vec![None; model::PARTITION_COUNT];
    for pid in PartitionId::all() {
        let holders: Vec<(&Arc<ClusterNode>, PartitionRole)> = nodes
            .iter()
            .map(|node| (node, role_at(node, pid)))
            .filter(|(_, role)| matches!(role, PartitionRole::Master | PartitionRole::Replica))
            .collect();
        let master_count = holders
            .iter()
            .filter(|(_, r)| *r == PartitionRole::Master)
            .count();
        if master_count != 1 || holders.len() != REPLICATION_FACTOR.min(nodes.len()) {
            let roles: Vec<String> = nodes
                .iter()
                .map(|node| {
                    let namespace = node.namespace(NAMESPACE.as_bytes()).expect("namespace");
                    let assignment = node.layout().assignment(NAMESPACE, pid).cloned();
                    format!(
                        "{}: {:?} table {assignment:?}",
                        node.node_id(),
                        namespace.partition_role(pid)
                    )
                })
                .collect();
            problems.push(format!(
                "partition {}: {master_count} masters, {} copies; {roles:?}",
                pid.0,
                holders.len()
            ));
            continue;
        }
        masters[pid.index()] = holders
            .iter()
            .find(|(_, r)| *r == PartitionRole::Master)
            .map(|(node, _)| *node);
        let hashes: Vec<(u64, u64)> = holders
            .iter()
            .map(|(node, _)| {
                let namespace = node.namespace(NAMESPACE.as_bytes()).expect("namespace");
                namespace.partition_content_hash(pid)
            })
            .collect();
        if hashes.windows(2).any(|pair| pair[0] != pair[1]) {
            problems.push(copies_differ(pid, &holders, &hashes, history));
        }
    }
    for (key, expect) in &history.keys {
        let digest = digest_of(*key);
        let Some(master) = masters[digest.partition_id().index()] else {
            continue;
        };
        let namespace = master.namespace(NAMESPACE.as_bytes()).expect("namespace");
        let is_found = found(namespace, digest);
        match (expect, is_found) {
            (Expect::Present, Ok(false)) => {
                problems.push(format!("key {key}: acknowledged write lost"))
            }
            (Expect::Absent, Ok(true)) => {
                problems.push(format!("key {key}: acknowledged delete came back"))
            }
            (_, Err(code)) => {
                problems.push(format!("key {key}: read on its master failed: {code:?}"))
            }
            _ => {}
        }
    }
    problems
}

/// One seed: forms the cluster, runs the client through two faults, settles, checks.
async fn run_seed(seed: u64) -> Result<String, String> {
    let mut sim = Sim::new(seed);
    let running: Running = Arc::default();
    for index in 0..FIRST_NODES {
        sim.start_node(index, &running).await;
    }
    sim.settle().await;
    let history = Arc::new(Mutex::new(History::default()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let client = tokio::spawn(run_client(seed, running.clone(), history.clone(), stopped));
    let warm_up = sim.pause(200, 1000);
    sleep(warm_up).await;
    let faults = faults_drawn();
    for _ in 0..2 {
        let fault = faults[sim.rng.random_range(0..faults.len())];
        sim.inject(fault, &running).await;
    }
    let _ = stop.send(true);
    client
        .await
        .map_err(|error| format!("the client panicked: {error}"))?;
    sim.settle().await;
    let nodes: Vec<Arc<ClusterNode>> = running.lock().clone();
    let (problems, summary) = {
        let history = history.lock();
        let summary = format!(
            "seed {seed}: {} acknowledged, {} in doubt, {} failed, {} keys, {:?} virtual",
            history.acknowledged,
            history.in_doubt,
            history.failed,
            history.keys.len(),
            sim.started.elapsed()
        );
        let mut problems = std::mem::take(&mut sim.problems);
        problems.extend(check(&nodes, &history));
        (problems, summary)
    };
    for node in &nodes {
        node.shutdown().await;
    }
    if problems.is_empty() {
        Ok(summary)
    } else {
        Err(format!(
            "{summary}\nproblems ({}):\n{}\nevents:\n{}",
            problems.len(),
            problems
                .iter()
                .take(20)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n"),
            sim.log.join("\n")
        ))
    }
}

/// Runs `seed` on a fresh single-threaded runtime with a virtual clock, on a thread of its
/// own so that a hang is reported with its seed instead of stalling the test run.
fn simulate(seed: u64) -> Result<String, String> {
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a runtime");
        let run = std::panic::AssertUnwindSafe(|| runtime.block_on(run_seed(seed)));
        let result = std::panic::catch_unwind(run).unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()));
            Err(format!(
                "seed {seed} panicked: {}",
                message.unwrap_or_default()
            ))
        });
        let _ = done.send(result);
    });
    outcome
        .recv_timeout(SEED_REAL_TIME_MAX)
        .unwrap_or_else(|_| {
            Err(format!(
                "seed {seed} still ran after {SEED_REAL_TIME_MAX:?} of real time"
            ))
        })
}

/// The faults seeds draw from: [`FAULTS`], or those `OSPREY_SIM_FAULTS` names (comma
/// separated, as `Fault`'s variants are spelled), to look at one kind of fault.
fn faults_drawn() -> Vec<Fault> {
    let Ok(names) = std::env::var("OSPREY_SIM_FAULTS") else {
        return FAULTS.to_vec();
    };
    let faults: Vec<Fault> = FAULTS
        .into_iter()
        .filter(|fault| {
            names
                .split(',')
                .any(|name| name.trim() == format!("{fault:?}"))
        })
        .collect();
    assert!(
        !faults.is_empty(),
        "OSPREY_SIM_FAULTS={names} names none of {FAULTS:?}"
    );
    faults
}

/// `OSPREY_SIM_SEED=S` alone: seed S; with `OSPREY_SIM_SEEDS=N`: N seeds from S; N alone:
/// N seeds from a random first one ([`SEEDS_DEFAULT`] without either).
fn seeds() -> Vec<u64> {
    let var = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    let (first, count) = match (var("OSPREY_SIM_SEED"), var("OSPREY_SIM_SEEDS")) {
        (Some(first), count) => (first, count.unwrap_or(1)),
        (None, count) => {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            let first = now.map_or(0, |since| since.as_nanos() as u64 % 1_000_000_000);
            (first, count.unwrap_or(SEEDS_DEFAULT))
        }
    };
    (first..first + count).collect()
}

#[test]
fn simulated_faults_lose_no_acknowledged_write() {
    // `OSPREY_SIM_LOG=info` (any filter) prints the nodes' logs, for replaying one seed.
    if let Ok(filter) = std::env::var("OSPREY_SIM_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
    let seeds = seeds();
    println!("OSPREY_SIM_SEEDS: {} seeds from {}", seeds.len(), seeds[0]);
    // Seeds run side by side, each on a thread (and runtime) of its own.
    let parallel = std::thread::available_parallelism().map_or(1, usize::from);
    let queue = Mutex::new(seeds.into_iter());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| {
                while let Some(seed) = queue.lock().next() {
                    let started = std::time::Instant::now();
                    match simulate(seed) {
                        Ok(summary) => println!("{summary}, {:?} real", started.elapsed()),
                        Err(failure) => {
                            println!("FAILED (replay with OSPREY_SIM_SEED={seed}): {failure}");
                            failures.lock().push(seed);
                        }
                    }
                }
            });
        }
    });
    let failures = failures.into_inner();
    assert!(failures.is_empty(), "seeds that failed: {failures:?}");
}
