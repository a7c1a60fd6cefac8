//! Several cluster nodes in one process, on a simulated network (`fabric::MemoryNetwork`): the
//! metadata group forms, every node converges on the same map, a write on a partition's master
//! reaches its replica before it is acknowledged, and a replica refuses a change that carries an
//! older partition version. The network's delay comes from a seed, printed, and replayed from
//! `CLUSTER_SEED`.

use std::sync::Arc;
use std::time::Duration;

use engine::{
    Acks, BinRef, Deadline, ExistsPolicy, GenerationPolicy, Namespace, NamespaceConfig,
    PartitionRole, ReadRequest, RecordVersion, ReplySink, SystemClock, WriteRequest,
};
use fabric::MemoryNetwork;
use model::{Digest, Op, OpCode, PartitionId, ResultCode, TtlRequest, UserKey};

use super::config::{ClusterConfig, CommitLevelOverride};
use super::node::{ClusterNode, MetadataStore, NodeSetup};
use super::view::ClusterView;

const NODES: usize = 3;

pub(super) struct NoSink;

impl ReplySink for NoSink {
    fn bin(&mut self, _: OpCode, _: BinRef<'_>) {}
}

fn seed() -> u64 {
    let seed = std::env::var("CLUSTER_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.subsec_nanos().into())
        });
    println!("CLUSTER_SEED={seed}");
    seed
}

async fn start_nodes(network: &MemoryNetwork, dir: &std::path::Path) -> Vec<Arc<ClusterNode>> {
    let mut nodes = Vec::new();
    for i in 0..NODES {
        nodes.push(start_node(network, dir, i).await);
    }
    nodes
}

/// Node `i` (id `0xA0 + i`, at `node<i>:1`, metadata under `dir/node<i>`), seeded with the
/// first [`NODES`] nodes' addresses.
async fn start_node(network: &MemoryNetwork, dir: &std::path::Path, i: usize) -> Arc<ClusterNode> {
    let seeds: Vec<String> = (0..NODES).map(|i| format!("node{i}:1")).collect();
    let namespace = Arc::new(Namespace::new(
        NamespaceConfig::with_defaults("test"),
        Arc::new(SystemClock),
    ));
    let setup = NodeSetup {
        config: ClusterConfig {
            fabric_address: format!("node{i}"),
            fabric_port: 1,
            seeds,
            ..ClusterConfig::default()
        },
        cluster_name: "sim".to_owned(),
        node_id: model::NodeId(0xA0 + i as u64),
        service_address: format!("127.0.0.1:{}", 3000 + i),
        resp_address: None,
        tls_service: None,
        namespaces: vec![(namespace, 2)],
        commit_levels: vec![CommitLevelOverride::Off],
        latencies: None,
        metadata: MetadataStore::Dir(dir.join(format!("node{i}"))),
        network: Arc::new(network.endpoint(&format!("node{i}:1"))),
    };
    ClusterNode::start(setup).await.expect("node starts")
}

/// Waits until every node has a map with every node in it.
async fn wait_converged(nodes: &[Arc<ClusterNode>]) {
    assert!(
        wait_size(nodes, nodes.len(), Duration::from_secs(30)).await,
        "the simulated cluster did not form within 30 s"
    );
}

/// Whether every node of `nodes` served by a map of `size` nodes, all of one version,
/// within `wait`.
async fn wait_size(nodes: &[Arc<ClusterNode>], size: usize, wait: Duration) -> bool {
    let deadline = std::time::Instant::now() + wait;
    while std::time::Instant::now() < deadline {
        let version = nodes[0].layout_version();
        let formed = nodes.iter().all(|node| {
            node.partition_generation() > 0
                && node.summary().size == size
                && node.layout_version() == version
        });
        if formed {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// An upsert of `digest` in set `s`, with no condition and no deadline.
pub(super) fn write_request(digest: Digest) -> WriteRequest<'static> {
    WriteRequest {
        digest,
        set_name: b"s",
        key: None,
        exists: ExistsPolicy::Update,
        generation: GenerationPolicy::None,
        ttl: TtlRequest::NeverExpire,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
        read_all_bins: false,
    }
}

/// A read of every bin of `digest` (or, with `header_only`, of its metadata), with no
/// deadline.
pub(super) fn read_request(digest: Digest, header_only: bool) -> ReadRequest<'static> {
    ReadRequest {
        digest,
        set_name: b"",
        key: None,
        read_all_bins: true,
        header_only,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
    }
}

fn read_generation(namespace: &Namespace, digest: Digest) -> Result<u16, ResultCode> {
    let request = read_request(digest, false);
    namespace
        .read(&request, std::iter::empty(), &mut NoSink)
        .map(|meta| meta.generation.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_agree_on_one_map_and_replicate_before_acknowledging() {
    let seed = seed();
    let network = MemoryNetwork::new();
    network.set_delay_ms(seed % 4);
    let dir =
        std::env::temp_dir().join(format!("osprey-cluster-sim-{seed}-{}", std::process::id()));
    let nodes = start_nodes(&network, &dir).await;
    wait_converged(&nodes).await;

    // One map: every node sees the same master for every partition, and claims it only there.
    for pid in PartitionId::all() {
        let masters = nodes
            .iter()
            .filter(|node| {
                node.namespace(b"test").expect("test").partition_role(pid).0
                    == PartitionRole::Master
            })
            .count();
        assert_eq!(masters, 1, "partition {pid:?}");
    }

    // A write on the master is on the replica once its acknowledgement settles.
    let digest = Digest::compute(b"s", &UserKey::String(b"k"));
    let pid = digest.partition_id();
    let role =
        |node: &Arc<ClusterNode>| node.namespace(b"test").expect("test").partition_role(pid).0;
    let master = nodes
        .iter()
        .find(|n| role(n) == PartitionRole::Master)
        .expect("a master");
    let replica = nodes
        .iter()
        .find(|n| role(n) == PartitionRole::Replica)
        .expect("a replica");
    let op = Op {
        code: OpCode::Write,
        particle_type: 3,
        bin_name: b"v",
        value: b"one",
    };
    let mut acks = Acks::default();
    let master_ns = master.namespace(b"test").expect("test");
    master_ns
        .write(
            &write_request(digest),
            std::iter::once(op),
            &mut NoSink,
            &mut acks,
        )
        .expect("written");
    assert!(!acks.is_empty(), "the write waits for its replica");
    acks.settled().await.expect("the replica confirmed");
    let replica_ns = replica.namespace(b"test").expect("test");
    assert_eq!(read_generation(replica_ns, digest), Ok(1));

    // The replica refuses a change carrying an older partition version (a deposed master).
    let (_, version) = replica_ns.partition_role(pid);
    let stale = RecordVersion::tombstone(digest);
    assert_eq!(
        replica_ns.merge_replicated(version - 1, &stale, &mut Acks::default()),
        Err(ResultCode::ClusterKeyMismatch)
    );
    assert_eq!(read_generation(replica_ns, digest), Ok(1));

    // Index definitions made one after the other on a node are committed in that order: a
    // drop right after a create never resurrects the index (each used to be proposed from a
    // task of its own, which could reach the leader first).
    let before = nodes[0].meta().state().version;
    let pairs = 40;
    for _ in 0..pairs {
        nodes[0].replicate_sindex_put("test", "ix", "definition".to_owned());
        nodes[0].replicate_sindex_drop("test", "ix");
    }
    for _ in 0..600 {
        if nodes
            .iter()
            .all(|n| n.meta().state().version >= before + 2 * pairs)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for node in &nodes {
        let state = node.meta().state();
        assert!(
            state.version >= before + 2 * pairs,
            "every change committed"
        );
        let sindexes = &state.namespace("test").expect("test").sindexes;
        assert!(sindexes.is_empty(), "{sindexes:?}");
    }

    for node in &nodes {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The story of simulation seed 885327473: a node left, was restarted at once with empty
/// metadata, found every seed answering its dials, and, hearing no heartbeat yet (the seeds
/// dial it back only after their reconnect backoff), took them for an unformed cluster and
/// bootstrapped a group of its own. Its vote outranked the real leader's and the cluster
/// never settled. A node now forms a group only after every seed's heartbeat said it has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_right_after_leaving_joins_the_group_instead_of_forming_one() {
    let network = MemoryNetwork::new();
    let dir = std::env::temp_dir().join(format!("osprey-cluster-rejoin-{}", std::process::id()));
    let mut nodes = start_nodes(&network, &dir).await;
    wait_converged(&nodes).await;
    // It joins a formed group, whose leader is elected in term 1: the group it would form
    // alone would elect it in term 1 too, with a vote that outranks the leader's (a higher id).
    nodes.push(start_node(&network, &dir, NODES).await);
    wait_converged(&nodes).await;

    let leaving = nodes.pop().expect("the fourth node");
    nodes[0]
        .leave(model::NodeId(0xA0 + NODES as u64))
        .expect("may leave");
    assert!(
        wait_size(&nodes, NODES, Duration::from_secs(30)).await,
        "the node left"
    );
    leaving.shutdown().await;
    // Long enough for the members' dials to the departed node to back off to their longest.
    tokio::time::sleep(Duration::from_millis(2 * fabric::RECONNECT_BACKOFF_MS_MAX)).await;

    // The group's leader and term: a node that joins leaves both as they are.
    let leader_and_term = |nodes: &[Arc<ClusterNode>]| -> Vec<(Option<u64>, u64)> {
        let term = |node: &ClusterNode| node.meta().metrics().borrow().current_term;
        nodes
            .iter()
            .map(|node| (node.meta().current_leader(), term(node)))
            .collect()
    };
    let before = leader_and_term(&nodes)[0];

    let _ = std::fs::remove_dir_all(dir.join(format!("node{NODES}")));
    nodes.push(start_node(&network, &dir, NODES).await);
    let joined = wait_size(&nodes, NODES + 1, Duration::from_secs(30)).await;
    let after = leader_and_term(&nodes);
    for node in &nodes {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(joined, "the restarted node joined within 30 s");
    assert!(
        after.iter().all(|seen| *seen == before),
        "{before:?} then {after:?}"
    );
}
