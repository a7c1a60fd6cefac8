//! State shared by every connection: configuration, namespaces, identity and counters.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use engine::Namespace;

use crate::batch::BatchStats;
use crate::client_memory::ClientMemory;
use crate::cluster::{ClusterNode, ClusterStats, ClusterView, SingleNode};
use crate::config::Config;
use crate::jobs::ScanJobs;
use crate::long_requests::LongRequests;
use crate::udf::UdfModules;
use crate::unsupported::UnsupportedStats;

/// Everything a connection needs, shared read-only (counters are atomics).
#[derive(Debug)]
pub struct ServerState {
    /// The loaded configuration.
    pub config: Config,
    /// Namespaces in configuration order.
    pub namespaces: Vec<Arc<Namespace>>,
    /// This node's id, upper-case hex without leading zeros.
    pub node_id: String,
    /// `ip:port` clients are told to use (`service-clear-std`); empty when the clear port is
    /// off (`tls-only`).
    pub access_address: String,
    /// `ip:port` TLS clients are told to use (`service-tls-std`); empty without a TLS port.
    pub tls_access_address: String,
    /// This node's certificate, when `[tls]` is configured.
    pub tls: Option<Arc<crate::tls::Tls>>,
    /// When the server started.
    pub started: Instant,
    /// Aerospike client connection counters.
    pub connections: ConnectionCounters,
    /// Redis connection counters.
    pub resp_connections: ConnectionCounters,
    /// Admin-port connection counters.
    pub admin_connections: ConnectionCounters,
    /// Memory client connections hold in their buffers, and the limits' statistics.
    pub client_memory: Arc<ClientMemory>,
    /// Threads that run long requests.
    pub long_requests: LongRequests,
    /// Batch counters.
    pub batch: BatchStats,
    /// Threads each new scan runs on (`single-scan-threads`, settable at runtime).
    pub scan_threads: AtomicUsize,
    /// Scan jobs, for `query-show` and `query-abort`.
    pub scan_jobs: ScanJobs,
    /// The last `CLIENT ID` handed to a Redis connection.
    pub resp_client_ids: AtomicU64,
    /// Redis commands run (INFO's `total_commands_processed`).
    pub resp_commands: AtomicU64,
    /// Redis connections open now (INFO's `connected_clients`).
    pub resp_connected: AtomicU64,
    /// Redis commands refused because Osprey does not know them (INFO's
    /// `rejected_unknown_commands`).
    pub resp_unknown_commands: AtomicU64,
    /// Redis's numbered databases: the set each lives in.
    pub resp_databases: Arc<crate::resp::Databases>,
    /// Redis clients blocked in BLPOP and the like, by key.
    pub blocked_clients: Arc<crate::resp::BlockedClients>,
    /// Aerospike requests refused because they use a feature Osprey does not implement yet.
    pub unsupported: UnsupportedStats,
    /// The cluster as this node sees it: itself alone, without seeds.
    cluster: Arc<dyn ClusterView>,
    /// This node's membership in a cluster, when it has seeds.
    cluster_node: Option<Arc<ClusterNode>>,
    /// The cluster data path's counters.
    pub cluster_stats: ClusterStats,
    /// The registered UDF modules.
    pub udf: UdfModules,
    /// Redis pub/sub: subscriptions, and the keyspace notifications asked for.
    pub pubsub: Arc<crate::resp::pubsub::hub::Hub>,
    /// Redis scripting: the script cache, the Lua engine, and the script running.
    pub scripts: crate::resp::Scripts,
    /// SLOWLOG's entries and settings.
    pub resp_slowlog: crate::resp::SlowLog,
    /// The live Redis connections (CLIENT KILL) and CLIENT PAUSE.
    pub resp_clients: crate::resp::Clients,
    /// The Redis parameters CONFIG SET keeps that nothing else holds.
    pub resp_settings: crate::resp::Settings,
    /// SAVE and BGSAVE: the one running, the last ones' outcomes, `dbfilename`.
    pub resp_saves: crate::resp::Saves,
    /// Notified by a Redis client's SHUTDOWN: the server stops as on SIGTERM.
    pub shutdown_requested: tokio::sync::Notify,
    /// Users, roles and privileges; `None` when security is off.
    pub security: Option<Arc<security::Security>>,
    /// The Redis port's recent security events (ACL LOG).
    pub resp_acl_log: crate::resp::AclLog,
    /// The Aerospike latency histograms (`latencies:`).
    pub latencies: Arc<crate::latency::Latencies>,
}

/// Client connection counters for `statistics`.
#[derive(Debug, Default)]
pub struct ConnectionCounters {
    /// Connections accepted and served.
    pub opened: AtomicU64,
    /// Connections closed (by either side).
    pub closed: AtomicU64,
    /// Connections refused at accept: the protocol's limit, or its limit per address.
    pub refused: AtomicU64,
    /// Connections closed because they sent nothing for the idle timeout.
    pub idle_closed: AtomicU64,
}

impl ConnectionCounters {
    /// Connections open now.
    pub fn open_now(&self) -> u64 {
        let opened = self.opened.load(Ordering::Relaxed);
        opened.saturating_sub(self.closed.load(Ordering::Relaxed))
    }
}

/// The security tables when `[security]` is enabled: kept in the work directory, or in memory
/// when there is none.
fn open_security(config: &Config) -> std::io::Result<Option<Arc<security::Security>>> {
    if !config.security.enabled {
        return Ok(None);
    }
    let directory = &config.service.work_directory;
    let store: Box<dyn security::Store> = if directory.as_os_str().is_empty() {
        tracing::warn!(
            "security is enabled without service.work-directory: users and roles are kept in \
             memory only, and a restart starts again from the default admin"
        );
        Box::new(security::MemoryStore::default())
    } else {
        std::fs::create_dir_all(directory)?;
        Box::new(security::FileStore::new(directory.join("security.json")))
    };
    let opened = security::Security::open(store, config.security.session_ttl_s)?
        .with_quotas(config.security.enable_quotas);
    let opened = match config.security.audit_log.as_str() {
        "" => opened,
        "stdout" => opened.with_audit(Box::new(security::audit::StdoutSink)),
        path => opened.with_audit(Box::new(security::audit::FileSink::open(
            std::path::Path::new(path),
        )?)),
    };
    Ok(Some(Arc::new(opened)))
}

impl ServerState {
    /// The state of a server that runs `config` with these namespaces, before any request.
    ///
    /// # Errors
    /// When the long-request threads cannot be started.
    pub fn new(
        config: Config,
        namespaces: Vec<Arc<Namespace>>,
        node_id: String,
        access_address: String,
    ) -> std::io::Result<ServerState> {
        let long_request_threads = match config.service.long_request_threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            threads => threads,
        };
        let pubsub = Arc::new(crate::resp::pubsub::hub::Hub::with_notify_flags(
            &config.resp.notify_keyspace_events,
        ));
        let resp_databases = Arc::new(crate::resp::Databases::new(
            &config.resp.set,
            config.resp.databases,
        ));
        if let Some(namespace) = namespaces
            .iter()
            .find(|namespace| namespace.name() == config.resp_namespace())
        {
            // As the last SWAPDB left them, before any client connects.
            resp_databases.load_order(namespace);
            let removals = crate::resp::pubsub::notify::Removals::new(
                Arc::clone(&pubsub),
                Arc::clone(&resp_databases),
            );
            namespace.set_removal_listener(Arc::new(removals));
        }
        let latencies = Arc::new(crate::latency::Latencies::new(
            namespaces.iter().map(|namespace| namespace.name()),
            config.service.microsecond_histograms,
        ));
        Ok(ServerState {
            latencies,
            access_address,
            tls_access_address: String::new(),
            tls: None,
            namespaces,
            started: Instant::now(),
            connections: ConnectionCounters::default(),
            resp_connections: ConnectionCounters::default(),
            admin_connections: ConnectionCounters::default(),
            client_memory: Arc::new(ClientMemory::new(config.service.client_memory_max_bytes())),
            long_requests: LongRequests::start(long_request_threads)?,
            batch: BatchStats::default(),
            scan_threads: AtomicUsize::new(config.service.single_scan_threads),
            scan_jobs: ScanJobs::default(),
            resp_client_ids: AtomicU64::new(0),
            resp_commands: AtomicU64::new(0),
            resp_connected: AtomicU64::new(0),
            resp_unknown_commands: AtomicU64::new(0),
            resp_databases,
            blocked_clients: Arc::default(),
            unsupported: UnsupportedStats::default(),
            cluster: Arc::new(SingleNode::new(node_id.parse().unwrap_or(model::NodeId(1)))),
            cluster_node: None,
            cluster_stats: ClusterStats::default(),
            udf: UdfModules::load(&config.service.work_directory),
            pubsub,
            scripts: crate::resp::Scripts::default(),
            resp_slowlog: crate::resp::SlowLog::default(),
            resp_clients: crate::resp::Clients::default(),
            resp_settings: crate::resp::Settings::default(),
            resp_saves: crate::resp::Saves::new(&config.resp.dbfilename),
            shutdown_requested: tokio::sync::Notify::new(),
            security: open_security(&config)?,
            resp_acl_log: crate::resp::AclLog::default(),
            node_id,
            config,
        })
    }

    /// This state with TLS: `tls`, served at `tls_access_address` (empty: no TLS port).
    pub fn with_tls(
        self,
        tls: Option<Arc<crate::tls::Tls>>,
        tls_access_address: String,
    ) -> ServerState {
        ServerState {
            tls,
            tls_access_address,
            ..self
        }
    }

    /// This state counting latencies in `latencies` (shared with the cluster's replication).
    pub fn with_latencies(self, latencies: Arc<crate::latency::Latencies>) -> ServerState {
        ServerState { latencies, ..self }
    }

    /// The position of the namespace called `name` in configuration order.
    pub fn namespace_index(&self, name: &[u8]) -> Option<usize> {
        self.namespaces
            .iter()
            .position(|namespace| namespace.name().as_bytes() == name)
    }

    /// This state on a node of a cluster: `node` is its view and its membership.
    pub fn in_cluster(self, node: Arc<ClusterNode>) -> ServerState {
        ServerState {
            node_id: node.node_id().to_string(),
            cluster: node.clone(),
            cluster_node: Some(node),
            ..self
        }
    }

    /// The cluster as this node sees it.
    pub fn cluster_view(&self) -> &dyn ClusterView {
        self.cluster.as_ref()
    }

    /// This node's membership, on a clustered server.
    pub fn cluster_node(&self) -> Option<&Arc<ClusterNode>> {
        self.cluster_node.as_ref()
    }

    /// Whether this node is part of a multi-node cluster.
    pub fn is_clustered(&self) -> bool {
        self.cluster_node.is_some()
    }

    /// The namespace called `name`.
    pub fn namespace(&self, name: &[u8]) -> Option<&Namespace> {
        self.namespace_arc(name).map(Arc::as_ref)
    }

    /// The namespace called `name`, shared (for work that outlives the request).
    pub fn namespace_arc(&self, name: &[u8]) -> Option<&Arc<Namespace>> {
        self.namespaces
            .iter()
            .find(|ns| ns.name().as_bytes() == name)
    }
}

/// A stable node id: configured, or derived from the host name and service port so that a
/// restarted node keeps its identity (Aerospike derives it from a MAC address and the port).
pub fn node_id(configured: &str, port: u16) -> String {
    if !configured.is_empty() {
        let value = u64::from_str_radix(configured, 16).unwrap_or(1);
        return format!("{value:X}");
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let seed = format!("{}:{port}", host.trim());
    let digest = model::Digest::compute(b"osprey-node", &model::UserKey::String(seed.as_bytes()));
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.0[..8]);
    // Never 0: clients treat an empty or zero node name as invalid.
    format!("{:X}", u64::from_be_bytes(first).max(1))
}
