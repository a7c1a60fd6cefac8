//! [`ClusterNode`]: one node's membership in a cluster, wiring the fabric, the metadata group,
//! the layout the node serves by, and replication.
//!
//! How a cluster forms. Every node dials its seeds on the fabric and learns their node ids from
//! the handshake. While no peer reports a formed group (heartbeats carry the metadata version
//! each node applied; 0 before), the node with the highest id among itself and all its seeds
//! bootstraps the metadata group alone, once every seed has answered. Every other node asks a
//! member to add it (`AddNode`, forwarded to the leader). The leader adds each new node as a
//! learner, promotes learners until there are three voters, and commits each namespace's first
//! partition table once the nodes its own seeds named have all joined; later tables follow the
//! roster (the balancer keeps what need not move). Every node applies each committed state to
//! its layout: its partition roles, its claims, its routes.
//!
//! Invariants:
//! - Before the first table is applied, every partition is `Filling` here (it keeps what it
//!   holds and serves no client) and `partition-generation` is -1, so clients ignore the node
//!   and the engine refuses their commands.
//! - Roles come only from committed tables, with their versions: a node never promotes itself.
//!   It takes none until the roster shows its current boot id (a restart may have lost what
//!   it held), and its replication sink learns each table before the roles change.
//! - Only the metadata group's leader changes membership or tables; it declares a node dead
//!   only when neither it nor any node it hears has heard that node for the heartbeat timeout,
//!   and removes one of two members it hears that stopped hearing each other (`links.rs`).
//! - A node hearing fewer than a majority of the group's voters takes no client writes; nor
//!   does one whose map stays older than a peer's (cut off and healed, it may not know yet
//!   that it was removed and its partitions failed over: its answers would be stale).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use cluster::balance::{BalanceInput, balance};
use cluster::metadata::{
    ClusterState, FileDisk, MetaCommand, MetaConfig, MetaDisk, MetaError, MetaGroup, MetaRejection,
    NodeInfo, PartitionAssignment, PartitionTable,
};
use engine::{Namespace, PartitionRole};
use fabric::{Fabric, FabricConfig, Network};
use model::{NodeId, PartitionId};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{info, warn};
use wire_aerospike::cluster_map::{NamespaceClaims, PartitionBitmap, Peer};

use super::config::{ClusterConfig, CommitLevelOverride};
use super::handler::Handler;
use super::layout::{Layout, role_of};
use super::migration::Migrations;
use super::replication::ReplicationSink;
use super::transport::FabricMetaTransport;
use super::view::{ClusterSummary, ClusterView, Route};
use crate::state::ServerState;

mod failover;
mod links;
mod migrating;

/// Most voters of the metadata group; further nodes are learners.
pub(super) const VOTERS_MAX: usize = 3;
/// How often formation and the leader's membership work run.
const FORMATION_PERIOD: Duration = Duration::from_millis(200);

/// What a node needs to join a cluster.
pub struct NodeSetup {
    /// The `[cluster]` section.
    pub config: ClusterConfig,
    /// The cluster's name (nodes of other clusters are refused).
    pub cluster_name: String,
    /// This node's id.
    pub node_id: NodeId,
    /// Where clients reach the Aerospike service and the RESP port.
    pub service_address: String,
    /// Where TLS clients reach the Aerospike service, and the TLS name they check.
    pub tls_service: Option<(String, String)>,
    /// Where Redis clients reach this node, if it serves RESP.
    pub resp_address: Option<String>,
    /// The namespaces, each with its replication factor.
    pub namespaces: Vec<(Arc<Namespace>, usize)>,
    /// Per namespace (in the same order), its `write-commit-level-override`.
    pub commit_levels: Vec<CommitLevelOverride>,
    /// The node's latency histograms, where replication records its replica writes' (none in
    /// tests that do not look).
    pub latencies: Option<Arc<crate::latency::Latencies>>,
    /// Where the metadata group keeps its store.
    pub metadata: MetadataStore,
    /// How the fabric reaches peers (TCP; in memory for tests).
    pub network: Arc<dyn Network>,
}

/// Where a node's metadata group keeps its vote, log and snapshots.
pub enum MetadataStore {
    /// Files in this directory, synced before they are acknowledged.
    Dir(PathBuf),
    /// A disk of the caller's (the simulation's memory disk, whose crash image a restarted
    /// node opens).
    #[cfg_attr(not(test), allow(dead_code))]
    Disk(Arc<dyn MetaDisk>),
}

/// One node of a cluster.
pub struct ClusterNode {
    me: NodeId,
    config: ClusterConfig,
    info: NodeInfo,
    namespaces: Vec<(Arc<Namespace>, usize)>,
    fabric: Arc<Fabric>,
    meta: MetaGroup,
    layout: Arc<RwLock<Arc<Layout>>>,
    partition_generation: AtomicI64,
    peers_generation: AtomicU64,
    rebalance_generation: AtomicU64,
    /// Per peer, what its last heartbeat reported: the metadata version it applied, and the
    /// nodes it hears.
    heard: Mutex<HashMap<u64, Heard>>,
    /// On the leader, the pairs of members it saw linked, by (lower id, higher id).
    links: Mutex<HashMap<(u64, u64), links::Link>>,
    /// Per namespace (in the order of `namespaces`), its replication sink.
    sinks: Vec<Arc<ReplicationSink>>,
    /// Fills and streams.
    migrations: Migrations,
    /// This node was told to leave: once removed, it does not ask to join again.
    leaving: AtomicBool,
    /// Whether client writes are refused: for want of a quorum, outside the roster, or with a
    /// map older than a peer's.
    writes_refused: AtomicBool,
    /// The newest metadata version a peer reported that this node had not applied, and since
    /// when.
    behind_since: Mutex<Option<(u64, Instant)>>,
    /// When client writes were last refused.
    refused_since: Mutex<Instant>,
    /// When the engine's write lease was last renewed (`None` before the first time).
    lease_renewed_at: Mutex<Option<Instant>>,
    /// Wakes the migration task when a new state is applied (a handover to drain, fills to
    /// start).
    migration_wake: tokio::sync::Notify,
    server: OnceLock<Weak<ServerState>>,
    /// The index definitions of the last state applied, by (namespace, index name).
    applied_sindexes: Mutex<BTreeMap<(String, String), String>>,
    /// The UDF modules of the last metadata state applied here, by file name.
    applied_udfs: Mutex<BTreeMap<String, String>>,
    /// The set-index switches of the last state applied, by (namespace, set).
    applied_set_index_switches: Mutex<BTreeMap<(String, String), bool>>,
    /// Per namespace, the metadata version whose partition table the leader found balanced: a
    /// table depends only on that state, so it is not computed again until the state changes
    /// (4096 rendezvous orders, every formation period, cost the leader milliseconds a second).
    balanced_at_version: Mutex<HashMap<String, u64>>,
    runtime: tokio::runtime::Handle,
    /// Metadata changes made here (index definitions, truncates) waiting to be proposed, in
    /// the order they were made: one task proposes them one after the other, so a drop made
    /// after a create is committed after it.
    proposals: mpsc::Sender<MetaCommand>,
    proposals_waiting: Mutex<Option<mpsc::Receiver<MetaCommand>>>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// What one peer's last heartbeat said.
#[derive(Clone, Debug)]
struct Heard {
    /// The metadata version it applied.
    version: u64,
    /// The nodes it hears (none silent past the heartbeat timeout).
    hearing: Vec<u64>,
    /// When that heartbeat arrived.
    at: Instant,
}

/// Metadata changes that may wait to be proposed; beyond, a change is refused and logged.
/// They are made by administrators (index definitions, truncates), a few at a time.
const PROPOSALS_WAITING_MAX: usize = 1024;

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("node_id", &self.me)
            .finish_non_exhaustive()
    }
}

impl ClusterNode {
    /// Starts the fabric and the metadata group and begins forming or joining the cluster.
    ///
    /// # Errors
    /// The fabric cannot listen, or the metadata store cannot be opened.
    pub async fn start(setup: NodeSetup) -> std::io::Result<Arc<ClusterNode>> {
        let handler = Arc::new(Handler::default());
        let fabric = Arc::new(start_fabric(&setup, handler.clone()).await?);
        let info = NodeInfo {
            fabric_addr: fabric.local_address().to_owned(),
            service_addr: setup.service_address.clone(),
            resp_addr: setup.resp_address.clone().unwrap_or_default(),
            tls_service_addr: setup
                .tls_service
                .as_ref()
                .map(|(address, _)| address.clone())
                .unwrap_or_default(),
            tls_name: setup
                .tls_service
                .as_ref()
                .map(|(_, name)| name.clone())
                .unwrap_or_default(),
            boot_id: new_boot_id(),
        };
        let disk: Arc<dyn MetaDisk> = match &setup.metadata {
            MetadataStore::Dir(dir) => Arc::new(FileDisk::open(dir)?),
            MetadataStore::Disk(disk) => disk.clone(),
        };
        let transport = Arc::new(FabricMetaTransport::new(fabric.clone()));
        let meta = MetaGroup::start(
            setup.node_id.0,
            info.clone(),
            disk,
            transport,
            MetaConfig::default(),
        )
        .await
        .map_err(std::io::Error::other)?;
        let layout = Arc::new(RwLock::new(Arc::new(Layout::default())));
        let runtime = tokio::runtime::Handle::current();
        let mut sinks = Vec::new();
        let namespaces = setup.namespaces.iter().zip(&setup.commit_levels);
        for (index, ((namespace, _), commit_level)) in namespaces.enumerate() {
            for pid in PartitionId::all() {
                // Nothing is served until the first table says what this node holds; what it
                // holds (a restart on device storage) stays until a table says it is not its.
                let _ = namespace.set_partition_role(pid, PartitionRole::Filling, 0, 0);
            }
            let replica_write_latency = setup
                .latencies
                .as_ref()
                .map(|latencies| latencies.histogram(index, crate::latency::Op::WriteReplWrite));
            let sink = Arc::new(
                ReplicationSink::new(namespace, *commit_level, setup.node_id, fabric.clone())
                    .with_latency(replica_write_latency),
            );
            namespace.set_change_sink(sink.clone());
            sinks.push(sink);
        }
        let migrations = Migrations::new(setup.config.migration());
        let (proposals, proposals_waiting) = mpsc::channel(PROPOSALS_WAITING_MAX);
        let node = Arc::new(ClusterNode {
            me: setup.node_id,
            config: setup.config,
            info,
            namespaces: setup.namespaces,
            fabric,
            meta,
            layout,
            partition_generation: AtomicI64::new(-1),
            peers_generation: AtomicU64::new(1),
            rebalance_generation: AtomicU64::new(0),
            heard: Mutex::default(),
            links: Mutex::default(),
            sinks,
            migrations,
            leaving: AtomicBool::new(false),
            writes_refused: AtomicBool::new(false),
            behind_since: Mutex::default(),
            refused_since: Mutex::new(Instant::now()),
            lease_renewed_at: Mutex::default(),
            migration_wake: tokio::sync::Notify::new(),
            server: OnceLock::new(),
            applied_sindexes: Mutex::default(),
            applied_udfs: Mutex::default(),
            applied_set_index_switches: Mutex::default(),
            balanced_at_version: Mutex::default(),
            runtime: runtime.clone(),
            proposals,
            proposals_waiting: Mutex::new(Some(proposals_waiting)),
            stop: watch::channel(false).0,
            tasks: Mutex::default(),
        });
        handler.attach(&node);
        for seed in &node.config.seeds {
            if *seed != node.info.fabric_addr {
                node.fabric.add_peer(seed);
            }
        }
        node.spawn_tasks();
        info!(node = %node.me, fabric = %node.info.fabric_addr, seeds = ?node.config.seeds,
            "cluster node started");
        Ok(node)
    }

    /// Lets forwarded requests reach `state` (set once the server state exists).
    pub fn attach_server(self: &Arc<Self>, state: &Arc<ServerState>) {
        let _ = self.server.set(Arc::downgrade(state));
        self.apply_sindexes(&self.meta.state());
        if let Some(security) = &state.security {
            let node = Arc::downgrade(self);
            security.set_replicator(Box::new(move |tables| {
                if let Some(node) = node.upgrade() {
                    node.replicate_security(tables);
                }
            }));
            self.apply_security(&self.meta.state());
        }
    }

    /// The server state forwarded requests run against, while the server runs.
    pub fn server(&self) -> Option<Arc<ServerState>> {
        self.server.get().and_then(Weak::upgrade)
    }

    /// The fabric.
    pub fn fabric(&self) -> &Arc<Fabric> {
        &self.fabric
    }

    /// The metadata group.
    pub fn meta(&self) -> &MetaGroup {
        &self.meta
    }

    /// The namespace called `name`.
    pub fn namespace(&self, name: &[u8]) -> Option<&Arc<Namespace>> {
        self.namespaces
            .iter()
            .map(|(namespace, _)| namespace)
            .find(|namespace| namespace.name().as_bytes() == name)
    }

    /// A peer's heartbeat reported that it applied metadata version `version` and hears the
    /// nodes `hearing`.
    pub fn heard(&self, from: u64, version: u64, hearing: Vec<u64>) {
        let at = Instant::now();
        let heard = Heard {
            version,
            hearing,
            at,
        };
        self.heard.lock().insert(from, heard);
    }

    /// Commits a truncate made here (cut-off `before_ms`) to the metadata group, so that every
    /// node applies it; in the background, logged if it fails.
    pub fn replicate_truncate(&self, namespace: &str, set: Option<&[u8]>, before_ms: u64) {
        self.propose_in_background(truncate_command(namespace, set, before_ms));
    }

    /// [`ClusterNode::replicate_truncate`], blocking until every node has applied it (or two
    /// seconds passed): Redis's FLUSHDB promises that nothing it removed is read afterwards,
    /// from any node. Callable from a runtime worker or any other thread.
    pub fn replicate_truncate_and_wait(&self, namespace: &str, set: Option<&[u8]>, before_ms: u64) {
        let command = truncate_command(namespace, set, before_ms);
        let waiting = async {
            match self.meta.propose_via_leader(command).await {
                Ok(applied) => self.wait_applied_everywhere(applied.version).await,
                Err(error) => warn!(%error, "a truncate did not reach the other nodes"),
            }
        };
        self.block_on(waiting);
    }

    /// Runs `future` to its end from synchronous code: on a runtime worker (letting the
    /// runtime move its other tasks away meanwhile) or on any other thread (the long-request
    /// pool). For the rare requests that must wait on another node inline.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => tokio::task::block_in_place(|| handle.block_on(future)),
            Err(_) => self.runtime.block_on(future),
        }
    }

    /// Waits until every node's heartbeat reports metadata version `version` applied.
    async fn wait_applied_everywhere(&self, version: u64) {
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let nodes = self
                .layout
                .read()
                .nodes
                .keys()
                .copied()
                .collect::<Vec<u64>>();
            let heard = self.heard.lock().clone();
            let behind = nodes.iter().filter(|id| **id != self.me.0).any(|id| {
                heard
                    .get(id)
                    .is_none_or(|applied| applied.version < version)
            });
            if !behind {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        warn!(
            version,
            "not every node applied a metadata change within 2 s"
        );
    }

    /// The layout this node serves by.
    #[cfg(test)]
    pub(super) fn layout(&self) -> Arc<Layout> {
        self.layout.read().clone()
    }

    /// Whether every replica write this node sent as a master has been answered (or given up:
    /// the replica left).
    #[cfg(test)]
    pub(super) fn replication_drained(&self) -> bool {
        self.sinks
            .iter()
            .all(|sink| PartitionId::all().all(|pid| sink.drained(pid)))
    }

    /// The metadata version of the layout this node serves by.
    pub fn layout_version(&self) -> u64 {
        self.layout.read().version
    }

    /// Waits until this node serves by a layout newer than `seen`; false if `deadline` came
    /// first.
    pub async fn wait_layout_after(&self, seen: u64, deadline: Instant) -> bool {
        while Instant::now() < deadline {
            if self.layout_version() > seen {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        false
    }

    /// Asks the cluster to let node `id` leave: its partitions move to the other nodes, then
    /// the leader removes it. In the background, behind earlier metadata changes made here.
    ///
    /// # Errors
    /// The node is not a member, or is the last one.
    pub fn leave(&self, id: NodeId) -> Result<(), String> {
        let state = self.meta.state();
        if !state.nodes.contains_key(&id.0) {
            return Err(format!("node {id} is not a member of the cluster"));
        }
        let staying = state
            .nodes
            .keys()
            .filter(|node| **node != id.0 && !state.leaving.contains(node))
            .count();
        if staying == 0 {
            return Err("the last node cannot leave".to_owned());
        }
        self.propose_in_background(MetaCommand::SetNodeLeaving {
            id: id.0,
            leaving: true,
        });
        Ok(())
    }

    /// Commits a secondary-index definition created here, so that every node creates it.
    pub fn replicate_sindex_put(&self, namespace: &str, name: &str, definition: String) {
        self.propose_in_background(MetaCommand::PutSindex {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            definition,
        });
    }

    /// Commits a set-index switch made here (`set-config ... enable-index`), so that every
    /// node keeps (or drops) the set's index.
    pub fn replicate_set_index_switch(&self, namespace: &str, set: &[u8], enabled: bool) {
        self.propose_in_background(MetaCommand::SetIndexSwitch {
            namespace: namespace.to_owned(),
            set: String::from_utf8_lossy(set).into_owned(),
            enabled,
        });
    }

    /// Commits a UDF module registered here, so that every node registers it.
    pub fn replicate_udf_put(&self, name: &str, source: &str) {
        self.propose_in_background(MetaCommand::PutUdf {
            name: name.to_owned(),
            source: source.to_owned(),
        });
    }

    /// Commits the security tables as this node just changed them, so that every node holds
    /// the same users, roles and token key.
    pub fn replicate_security(&self, tables: String) {
        self.propose_in_background(MetaCommand::PutSecurity { tables });
    }

    /// Takes the cluster's security tables when they differ from this node's.
    fn apply_security(&self, state: &ClusterState) {
        let (Some(server), Some(tables)) = (self.server(), &state.security) else {
            return;
        };
        let Some(security) = &server.security else {
            return;
        };
        if let Err(error) = security.replace(tables) {
            warn!(%error, "the cluster's security tables could not be applied here");
        }
    }

    /// Commits the removal of a UDF module, so that every node removes it.
    pub fn replicate_udf_remove(&self, name: &str) {
        self.propose_in_background(MetaCommand::RemoveUdf {
            name: name.to_owned(),
        });
    }

    /// Registers the cluster's UDF modules this node does not hold as they are, and removes
    /// those the cluster removed since the last state applied here.
    fn apply_udfs(&self, state: &ClusterState) {
        let Some(server) = self.server() else {
            return;
        };
        let mut applied = self.applied_udfs.lock();
        for (name, source) in &state.udf_modules {
            if server.udf.source(name).as_deref() != Some(source.as_str()) {
                server.udf.put_local(name, source);
            }
        }
        for name in applied.keys() {
            if !state.udf_modules.contains_key(name) {
                server.udf.remove_local(name);
            }
        }
        *applied = state.udf_modules.clone();
    }

    /// Commits the drop of a secondary index, so that every node drops it.
    pub fn replicate_sindex_drop(&self, namespace: &str, name: &str) {
        self.propose_in_background(MetaCommand::DropSindex {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
    }

    /// Queues `command` behind the changes made here before it; the proposing task commits
    /// them in order, logging those that fail.
    fn propose_in_background(&self, command: MetaCommand) {
        if let Err(error) = self.proposals.try_send(command) {
            warn!(%error, "a metadata change was not queued for the other nodes");
        }
    }

    /// Proposes the queued metadata changes one after the other, until the node stops.
    async fn propose_queued(self: Arc<Self>, mut queued: mpsc::Receiver<MetaCommand>) {
        let mut stop = self.stop.subscribe();
        loop {
            let command = tokio::select! {
                command = queued.recv() => match command {
                    Some(command) => command,
                    None => return,
                },
                _ = stop.changed() => return,
            };
            match self.meta.propose_via_leader(command).await {
                Ok(_) => {}
                // Dropping an index the cluster does not define changes nothing, as on one
                // node.
                Err(MetaError::Rejected(MetaRejection::UnknownSindex { .. })) => {}
                Err(error) => warn!(%error, "a metadata change did not reach the other nodes"),
            }
        }
    }

    /// Creates the indexes the cluster defines and this node lacks, and drops those the
    /// cluster dropped since the last state this node applied.
    fn apply_sindexes(&self, state: &ClusterState) {
        let Some(server) = self.server() else {
            return;
        };
        let mut applied = self.applied_sindexes.lock();
        let mut now = BTreeMap::new();
        for (namespace, _) in &self.namespaces {
            let Some(meta) = state.namespace(namespace.name()) else {
                continue;
            };
            for (name, text) in &meta.sindexes {
                now.insert((namespace.name().to_owned(), name.clone()), text.clone());
                if namespace.index_named(name).is_some() {
                    continue;
                }
                let Some(definition) = crate::sindex_store::definition_from_text(text) else {
                    warn!(
                        index = name,
                        "an index definition from the cluster is not understood"
                    );
                    continue;
                };
                if let Err(failure) =
                    crate::sindex_info::create_local(&server, namespace, definition)
                {
                    warn!(
                        index = name,
                        message = failure.message,
                        "a cluster index was not created here"
                    );
                }
            }
        }
        for (namespace_name, name) in applied.keys() {
            if !now.contains_key(&(namespace_name.clone(), name.clone()))
                && let Some(namespace) = self.namespace(namespace_name.as_bytes())
            {
                crate::sindex_info::drop_local(&server, namespace, name);
            }
        }
        *applied = now;
    }

    /// Applies the cluster's truncate marks this node has not applied yet.
    fn apply_truncates(&self, state: &ClusterState) {
        for (namespace, _) in &self.namespaces {
            let Some(meta) = state.namespace(namespace.name()) else {
                continue;
            };
            let marks = std::iter::once((None, meta.truncate_before_ms)).chain(
                meta.set_truncate_before_ms
                    .iter()
                    .map(|(set, before_ms)| (Some(set.as_bytes()), *before_ms)),
            );
            for (set, before_ms) in marks {
                if before_ms > namespace.truncate_cutoff_ms(set) {
                    match namespace.apply_truncate(set, before_ms) {
                        Ok(_) => crate::admin::reclaim_in_background(namespace.clone()),
                        Err(error) => {
                            warn!(namespace = namespace.name(), %error, "a cluster truncate failed here");
                        }
                    }
                }
            }
        }
    }

    /// Switches the set indexes whose switch changed since the last state applied (a switch
    /// in this node's configuration file stays until the cluster sets that set's switch).
    fn apply_set_index_switches(&self, state: &ClusterState) {
        let mut applied = self.applied_set_index_switches.lock();
        for (namespace, _) in &self.namespaces {
            let Some(meta) = state.namespace(namespace.name()) else {
                continue;
            };
            for (set, enabled) in &meta.set_index_enabled {
                let key = (namespace.name().to_owned(), set.clone());
                if applied.get(&key) == Some(enabled) {
                    continue;
                }
                if crate::admin::switch_set_index(namespace, set.as_bytes(), *enabled).is_err() {
                    warn!(
                        namespace = namespace.name(),
                        set, "a cluster set-index switch failed here"
                    );
                }
                applied.insert(key, *enabled);
            }
        }
    }

    /// Stops the node's tasks, the metadata group and the fabric.
    pub async fn shutdown(&self) {
        let _ = self.stop.send(true);
        let tasks: Vec<JoinHandle<()>> = self.tasks.lock().drain(..).collect();
        for task in tasks {
            let _ = task.await;
        }
        if let Err(error) = self.meta.shutdown().await {
            warn!(%error, "metadata group shutdown");
        }
        self.fabric.shutdown().await;
    }

    fn spawn_tasks(self: &Arc<Self>) {
        let applying = tokio::spawn(Arc::clone(self).apply_states());
        let forming = tokio::spawn(Arc::clone(self).form_and_manage());
        let migrating = tokio::spawn(Arc::clone(self).migrate());
        let guarding = tokio::spawn(Arc::clone(self).every_formation_period(Self::guard_writes));
        let watching = tokio::spawn(Arc::clone(self).every_formation_period(Self::watch_links_now));
        let queued = self.proposals_waiting.lock().take();
        let proposing = queued.map(|queued| tokio::spawn(Arc::clone(self).propose_queued(queued)));
        self.tasks.lock().extend(
            [applying, forming, migrating, guarding, watching]
                .into_iter()
                .chain(proposing),
        );
    }

    /// Applies every state the metadata group commits.
    async fn apply_states(self: Arc<Self>) {
        let mut states = self.meta.subscribe();
        let mut stop = self.stop.subscribe();
        loop {
            let state = states.borrow_and_update().clone();
            self.apply(&state);
            tokio::select! {
                changed = states.changed() => if changed.is_err() { return },
                _ = stop.changed() => return,
            }
        }
    }

    /// Makes `state` this node's layout: roles, claims, peers.
    fn apply(&self, state: &ClusterState) {
        let names: Vec<String> = self
            .namespaces
            .iter()
            .map(|(namespace, _)| namespace.name().to_owned())
            .collect();
        // Until the roster shows this start of the node (a restart may have lost what the
        // node held before), or once it no longer does (removed while cut off), the node is
        // outside the cluster: it claims nothing, takes no roles and no client writes, and
        // reports a cluster of one.
        let member_now = self.is_member_now(state);
        let layout = Arc::new(match member_now {
            true => Layout::of(state, self.me, &names),
            false => Layout::outside(state.version),
        });
        let before = self.layout.read().clone();
        if state.leaving.contains(&self.me.0) {
            self.leaving.store(true, Ordering::Release);
        }
        if member_now {
            for ((namespace, _), sink) in self.namespaces.iter().zip(&self.sinks) {
                sink.prepare(&layout);
                self.apply_roles(namespace, &layout, &before);
            }
        }
        self.apply_truncates(state);
        self.apply_sindexes(state);
        self.apply_udfs(state);
        self.apply_security(state);
        self.apply_set_index_switches(state);
        let peers_changed = before.nodes != layout.nodes;
        let claims_changed = before.claims != layout.claims;
        *self.layout.write() = layout.clone();
        for sink in &self.sinks {
            sink.retain_fills(&layout);
        }
        self.migrations.reported(&layout, self.me.0);
        self.migration_wake.notify_one();
        self.fabric.set_map_version(state.version);
        for (id, info) in &state.nodes {
            if *id != self.me.0 && !self.fabric.peers().iter().any(|p| p.node_id == Some(*id)) {
                self.fabric.add_peer_node(*id, &info.fabric_addr);
            }
        }
        if peers_changed {
            self.peers_generation.fetch_add(1, Ordering::AcqRel);
        }
        if claims_changed {
            let generation = self.partition_generation.load(Ordering::Acquire).max(0) + 1;
            self.partition_generation
                .store(generation, Ordering::Release);
            self.rebalance_generation.fetch_add(1, Ordering::AcqRel);
            info!(node = %self.me, version = state.version, nodes = layout.nodes.len(),
                "applied a new partition map");
        }
    }

    /// Whether `state`'s roster holds this node as started now (not as it was before a
    /// restart).
    pub(super) fn is_member_now(&self, state: &ClusterState) -> bool {
        state
            .nodes
            .get(&self.me.0)
            .is_some_and(|info| info.boot_id == self.info.boot_id)
    }

    /// Gives each partition of `namespace` the role `layout` gives it. A row whose version
    /// is the one `before` applied is skipped: a version names one list of replicas, so
    /// the role is the one already applied (and most commits change a few rows of 4096).
    fn apply_roles(&self, namespace: &Namespace, layout: &Layout, before: &Layout) {
        let table = layout.table(namespace.name());
        let applied = before.table(namespace.name());
        for pid in PartitionId::all() {
            let assignment = table.and_then(|table| table.get(pid.0));
            let applied_version = applied.and_then(|t| t.get(pid.0)).map(|a| a.version);
            if applied_version.is_some() && applied_version == assignment.map(|a| a.version) {
                continue;
            }
            let (role, version) = role_of(assignment, self.me);
            let fence = assignment.map_or(0, |a| a.master_since.min(a.version));
            if namespace.partition_role(pid) == (role, version) {
                continue;
            }
            tracing::debug!(node = %self.me, partition = pid.0, ?role, version, fence, "role");
            if let Err(code) = namespace.set_partition_role(pid, role, version, fence) {
                warn!(
                    namespace = namespace.name(),
                    partition = pid.0,
                    ?code,
                    "a partition role from the metadata group went back in version"
                );
            }
        }
    }

    /// Runs `step` every formation period until the node stops: work that must not wait
    /// behind the formation loop's commits.
    async fn every_formation_period(self: Arc<Self>, step: fn(&ClusterNode)) {
        let mut stop = self.stop.subscribe();
        loop {
            step(&self);
            tokio::select! {
                () = tokio::time::sleep(FORMATION_PERIOD) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// Joins the cluster, and on the leader, manages membership and tables.
    async fn form_and_manage(self: Arc<Self>) {
        let mut stop = self.stop.subscribe();
        let mut seeds_answered_at = None;
        loop {
            let state = self.meta.state();
            let leaving = self.leaving.load(Ordering::Acquire);
            if !self.is_member_now(&state) {
                if !leaving {
                    self.join(&mut seeds_answered_at).await;
                }
            } else if self.left_behind() && !leaving {
                self.rejoin().await;
            } else if self.meta.current_leader() == Some(self.me.0) {
                self.manage().await;
            }
            tokio::select! {
                () = tokio::time::sleep(FORMATION_PERIOD) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// One attempt to become a member: bootstrap, or ask a member to add this node.
    async fn join(&self, seeds_answered_at: &mut Option<Instant>) {
        if self.cut_from_a_peer() {
            return;
        }
        let add_me = MetaCommand::AddNode {
            id: self.me.0,
            info: self.info.clone(),
        };
        if self.meta.current_leader().is_some() {
            if let Err(error) = self.meta.propose_via_leader(add_me).await {
                warn!(%error, "could not add this node to the cluster yet");
            }
            return;
        }
        let formed = self.heard.lock().values().any(|heard| heard.version > 0);
        if formed {
            self.ask_members(&add_me).await;
            return;
        }
        if self.may_bootstrap(seeds_answered_at) {
            let voters = BTreeMap::from([(self.me.0, self.info.clone())]);
            match self.meta.bootstrap(voters).await {
                Ok(()) => info!(node = %self.me, "bootstrapped the metadata group"),
                Err(error) => warn!(%error, "bootstrap"),
            }
        }
    }

    /// Whether this node should form the group: every seed answered a while ago and sent
    /// heartbeats, none has a group, and this node's id is the highest of them all.
    ///
    /// A seed's heartbeats come on the connection it dials, which may lag this node's own
    /// dial by the seed's reconnect backoff (a node that restarts soon after leaving): until
    /// one arrives, its metadata version is unknown, and it may lead a formed group.
    fn may_bootstrap(&self, seeds_answered_at: &mut Option<Instant>) -> bool {
        let peers = self.fabric.peers();
        let heard = self.heard.lock();
        let answered = self
            .config
            .seeds
            .iter()
            .filter(|seed| **seed != self.info.fabric_addr)
            .all(|seed| {
                peers.iter().any(|p| {
                    p.address == *seed
                        && p.connected
                        && p.node_id.is_some_and(|id| heard.contains_key(&id))
                })
            });
        drop(heard);
        if !answered {
            *seeds_answered_at = None;
            return false;
        }
        let since = *seeds_answered_at.get_or_insert_with(Instant::now);
        // Long enough for a formed group's heartbeats to have arrived.
        let settle = Duration::from_millis(3 * self.config.heartbeat_interval_ms);
        let highest = peers
            .iter()
            .filter_map(|p| p.node_id)
            .all(|id| id < self.me.0);
        since.elapsed() >= settle && highest
    }

    /// Asks each reachable peer, then the leader it names, to add this node.
    async fn ask_members(&self, add_me: &MetaCommand) {
        let peers = self.fabric.peers();
        for peer in peers.iter().filter(|p| p.connected) {
            let Some(id) = peer.node_id else { continue };
            match self
                .meta
                .propose_through(id, &reached_at(&peer.address), add_me)
                .await
            {
                Ok(_) => return,
                Err(MetaError::ForwardToLeader {
                    leader_id: Some(leader),
                }) => {
                    let Some(address) = peers.iter().find(|p| p.node_id == Some(leader)) else {
                        continue;
                    };
                    let leader_info = reached_at(&address.address);
                    if self
                        .meta
                        .propose_through(leader, &leader_info, add_me)
                        .await
                        .is_ok()
                    {
                        return;
                    }
                }
                Err(_) => {}
            }
        }
    }

    /// The leader's work: members for new nodes, dead and departed nodes out, three voters,
    /// and tables for the roster.
    async fn manage(&self) {
        let state = self.meta.state();
        let members: BTreeSet<u64> = state.voters.union(&state.learners).copied().collect();
        for (id, info) in &state.nodes {
            // A leaving node leaves the group before the roster: it is not added back.
            if !members.contains(id)
                && !state.leaving.contains(id)
                && let Err(error) = self.meta.add_learner(*id, info.clone()).await
            {
                warn!(node = id, %error, "could not add a learner");
                return;
            }
        }
        // The learners just added are in the state from now on: promote them before placing.
        let state = self.meta.state();
        if self.remove_departed(&state).await {
            return;
        }
        if self.replace_departed_voter(&state).await {
            return;
        }
        self.promote_voters(&state).await;
        if self.waiting_for_seeds(&state) {
            return;
        }
        let roster: BTreeSet<u64> = state.nodes.keys().copied().collect();
        let placing: Vec<NodeId> = roster
            .iter()
            .filter(|id| !state.leaving.contains(id))
            .map(|&id| NodeId(id))
            .collect();
        for (namespace, replication_factor) in &self.namespaces {
            let input = BalanceInput {
                placing: &placing,
                roster: &roster,
                replication_factor: *replication_factor,
                previous: state.partition_table(namespace.name()),
                moves_max: self.config.migrate_partitions_moving_max,
            };
            self.balance(&state, namespace.name(), &input).await;
        }
    }

    async fn promote_voters(&self, state: &ClusterState) {
        if state.voters.len() >= VOTERS_MAX {
            return;
        }
        let mut voters = state.voters.clone();
        for learner in &state.learners {
            let staying = state.nodes.contains_key(learner) && !state.leaving.contains(learner);
            if voters.len() < VOTERS_MAX && staying {
                voters.insert(*learner);
            }
        }
        if voters != state.voters
            && let Err(error) = self.meta.change_voters(voters, true).await
        {
            warn!(%error, "could not promote a learner to voter");
        }
    }

    /// Before the first table: whether a node this leader's seeds named has not joined yet.
    fn waiting_for_seeds(&self, state: &ClusterState) -> bool {
        if state
            .namespaces
            .values()
            .any(|meta| meta.partitions.is_some())
        {
            return false;
        }
        self.fabric.peers().iter().any(|peer| {
            self.config.seeds.contains(&peer.address)
                && peer.node_id.is_none_or(|id| !state.nodes.contains_key(&id))
        })
    }

    async fn balance(&self, state: &ClusterState, namespace: &str, input: &BalanceInput<'_>) {
        if self.balanced_at_version.lock().get(namespace) == Some(&state.version) {
            return;
        }
        let balanced = match balance(input) {
            Ok(balanced) => balanced,
            Err(error) => return warn!(namespace, %error, "no partition table"),
        };
        let waiting_before = state
            .namespace(namespace)
            .map_or(0, |meta| meta.moves_waiting);
        if input.previous == Some(&balanced.table) && waiting_before == balanced.moves_waiting {
            self.balanced_at_version
                .lock()
                .insert(namespace.to_owned(), state.version);
            return;
        }
        let moves_waiting = balanced.moves_waiting;
        // Only the rows that change travel: a whole table is ~150 KiB of JSON in the log and
        // in every append message, and a move changes a few rows at a time.
        let command = match input.previous {
            Some(previous) => MetaCommand::ChangePartitions {
                namespace: namespace.to_owned(),
                changes: changed_rows(previous, &balanced.table),
                moves_waiting: Some(moves_waiting),
            },
            None => MetaCommand::SetPartitionTable {
                namespace: namespace.to_owned(),
                table: balanced.table,
                moves_waiting,
            },
        };
        match self.meta.propose(command).await {
            Ok(applied) => info!(
                namespace,
                version = applied.version,
                moves_waiting,
                "committed a partition table"
            ),
            Err(error) => warn!(namespace, %error, "could not commit a partition table"),
        }
    }
}

/// The rows of `next` that differ from `previous`, by partition id.
fn changed_rows(
    previous: &PartitionTable,
    next: &PartitionTable,
) -> Vec<(u16, PartitionAssignment)> {
    (0_u16..)
        .zip(previous.assignments().iter().zip(next.assignments()))
        .filter(|(_, (before, after))| before != after)
        .map(|(pid, (_, after))| (pid, after.clone()))
        .collect()
}

/// Whether node `id` holds no partition in any table.
fn holds_nothing(state: &ClusterState, id: u64) -> bool {
    state.namespaces.values().all(|meta| {
        meta.partitions.as_ref().is_none_or(|table| {
            table
                .assignments()
                .iter()
                .all(|a| a.replicas.iter().all(|(node, _)| *node != id))
        })
    })
}

/// A number that differs from one start of the process to the next.
fn new_boot_id() -> u64 {
    use std::hash::BuildHasher;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((now, std::process::id()))
}

/// The metadata command of a truncate of `set` (the namespace for `None`) at `before_ms`.
fn truncate_command(namespace: &str, set: Option<&[u8]>, before_ms: u64) -> MetaCommand {
    MetaCommand::Truncate {
        namespace: namespace.to_owned(),
        set: set.map(|set| String::from_utf8_lossy(set).into_owned()),
        before_ms,
    }
}

/// How to reach a node known only by its fabric address (a peer not yet in the roster).
fn reached_at(fabric_addr: &str) -> NodeInfo {
    NodeInfo {
        fabric_addr: fabric_addr.to_owned(),
        ..NodeInfo::default()
    }
}

async fn start_fabric(setup: &NodeSetup, handler: Arc<Handler>) -> std::io::Result<Fabric> {
    let config = &setup.config;
    let listen = format!("{}:{}", config.fabric_address, config.fabric_port);
    let mut fabric_config = FabricConfig::new(setup.node_id.0, &setup.cluster_name, &listen);
    fabric_config.service_addresses = vec![setup.service_address.clone()];
    fabric_config.resp_addresses = setup.resp_address.iter().cloned().collect();
    fabric_config.heartbeat_interval_ms = config.heartbeat_interval_ms;
    fabric_config.heartbeat_timeout_count = config.heartbeat_timeout_count;
    fabric_config.validate()?;
    Fabric::start(fabric_config, setup.network.clone(), handler).await
}

impl ClusterView for ClusterNode {
    fn node_id(&self) -> NodeId {
        self.me
    }

    fn is_clustered(&self) -> bool {
        true
    }

    fn peers_generation(&self) -> u64 {
        self.peers_generation.load(Ordering::Acquire)
    }

    fn peers(&self, tls: bool) -> Vec<Peer> {
        let layout = self.layout.read().clone();
        layout
            .nodes
            .iter()
            .filter(|(id, _)| **id != self.me.0)
            .map(|(id, info)| {
                let (address, tls_name) = match tls {
                    true => (&info.tls_service_addr, info.tls_name.clone()),
                    false => (&info.service_addr, String::new()),
                };
                Peer {
                    node_id: NodeId(*id),
                    addresses: address.parse().into_iter().collect(),
                    tls_name,
                }
            })
            .collect()
    }

    fn partition_generation(&self) -> i64 {
        self.partition_generation.load(Ordering::Acquire)
    }

    fn rebalance_generation(&self) -> u64 {
        self.rebalance_generation.load(Ordering::Acquire)
    }

    fn claims(&self, namespace: &str) -> NamespaceClaims {
        let layout = self.layout.read().clone();
        layout
            .claims
            .get(namespace)
            .cloned()
            .unwrap_or_else(|| NamespaceClaims {
                name: namespace.to_owned(),
                regime: 0,
                columns: vec![PartitionBitmap::empty()],
            })
    }

    fn summary(&self) -> ClusterSummary {
        let layout = self.layout.read().clone();
        let peers = self.fabric.peers();
        let integrity = layout
            .nodes
            .keys()
            .filter(|id| **id != self.me.0)
            .all(|id| {
                peers
                    .iter()
                    .any(|p| p.node_id == Some(*id) && p.connected && !p.suspect)
            });
        ClusterSummary {
            size: layout.nodes.len().max(1),
            key: cluster_key(&layout),
            integrity,
            migrate_partitions_remaining: layout.moving_partitions()
                + layout.moves_waiting()
                + self
                    .namespaces
                    .iter()
                    .map(|(ns, rf)| layout.copies_off_target(ns.name(), *rf))
                    .sum::<u64>(),
            migration: self.migration_summary(&layout),
        }
    }

    fn route(&self, namespace: &str, partition: PartitionId, read: bool) -> Route {
        // Read under the guard: cloning the Arc would make every request of every thread
        // write to one shared counter.
        self.layout.read().route(namespace, partition, read)
    }
}

/// A 48-bit key that changes with the map version and the roster, as Aerospike's cluster key
/// changes with every cluster change.
fn cluster_key(layout: &Layout) -> u64 {
    let mut key = 0xcbf2_9ce4_8422_2325_u64 ^ layout.version;
    for id in layout.nodes.keys() {
        key = (key ^ id).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (key >> 16).max(1)
}
