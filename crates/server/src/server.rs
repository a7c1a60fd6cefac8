//! The listener, background sweepers and graceful shutdown.
//!
//! Three listeners: Aerospike clients (`service`), Redis clients (`resp`) and the admin port
//! (`admin`), each with its own connection limit and optional limit per client address, so
//! that clients of one protocol can never lock out the other, nor an operator. A protocol's
//! TLS port (`tls-port`) shares its clear port's limits; its connections complete their
//! handshake on their own task before they are served (`crate::tls`).
//!
//! Shutdown (SIGTERM or SIGINT): stop accepting, tell every connection to finish (a command
//! already received is answered; an idle connection closes at once), wait for them, stop the
//! long-request threads and the sweepers, return.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use engine::{Namespace, SystemClock};
use parking_lot::Mutex;
use storage::{Device, FileDevice, Flushing, StorageConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tracing::{debug, info, warn};

use crate::cluster::{ClusterNode, MetadataStore, NodeSetup};
use crate::config::Config;
use crate::connection::{self, Role};
use crate::latency::Latencies;
use crate::resp;
use crate::state::{ServerState, node_id};
use crate::tls::Tls;
use crate::tls::network::TlsNetwork;
use crate::tls::transport::{HandshakeError, Transport};

/// How long shutdown waits for open connections before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Runs the server until `shutdown_signal` completes.
///
/// # Errors
/// When an address cannot be bound, or the server's threads cannot start.
pub async fn run(config: Config, shutdown_signal: impl Future<Output = ()>) -> std::io::Result<()> {
    crate::resp::script_worker::install_gate_wait_hook();
    let tls = match config.tls.is_configured() {
        true => Some(Arc::new(
            Tls::load(&config.tls).map_err(std::io::Error::other)?,
        )),
        false => None,
    };
    let mut listeners = Listeners::bind(&config).await?;
    let addresses = listeners.addresses()?;
    let namespaces = open_namespaces(&config)?;
    let advertised = |bound: Option<SocketAddr>| {
        bound.map_or_else(String::new, |bound| {
            access_address(&config.service.access_address, bound)
        })
    };
    let (access_address, tls_access_address) = (
        advertised(addresses.service),
        advertised(addresses.service_tls),
    );
    let configured_id = match config.cluster.node_id.is_empty() {
        true => &config.service.node_id,
        false => &config.cluster.node_id,
    };
    let service_port = addresses
        .service
        .or(addresses.service_tls)
        .map_or(0, |a| a.port());
    let node_id = node_id(configured_id, service_port);
    let latencies = Arc::new(Latencies::new(
        namespaces.iter().map(|namespace| namespace.name()),
        config.service.microsecond_histograms,
    ));
    let cluster_node = match config.cluster.is_clustered() {
        true => {
            let advertised = Advertised {
                service: &access_address,
                service_tls: &tls_access_address,
                tls: tls.as_ref(),
            };
            let joined = join_cluster(
                &config,
                &node_id,
                &advertised,
                &addresses,
                &namespaces,
                &latencies,
            );
            Some(joined.await?)
        }
        false => None,
    };
    let mut state = ServerState::new(config, namespaces, node_id, access_address)?
        .with_tls(tls.clone(), tls_access_address)
        .with_latencies(latencies);
    if let Some(node) = &cluster_node {
        state = state.in_cluster(Arc::clone(node));
    }
    let state = Arc::new(state);
    if let Some(path) = state.config.resp.load_rdb.clone() {
        let loading = Arc::clone(&state);
        tokio::task::spawn_blocking(move || resp::load_rdb_at_start(&loading, &path))
            .await
            .map_err(std::io::Error::other)??;
    }
    let reloading = tls
        .as_ref()
        .map(|tls| tokio::spawn(watch_tls_files(Arc::clone(tls))));
    if let Some(node) = &cluster_node {
        node.attach_server(&state);
    }
    let ticker = tokio::spawn(tick_latencies(Arc::clone(&state)));
    let sweepers = Sweepers::start(&state.namespaces);
    log_ready(&state, &addresses);
    let (shutdown_sender, shutdown_receiver) = watch::channel(false);
    let metrics = listeners.metrics.take().map(|listener| {
        let serving =
            crate::metrics::serve(listener, Arc::clone(&state), shutdown_receiver.clone());
        tokio::spawn(serving)
    });
    let service = &state.config.service;
    let aerospike = Door::new(
        Protocol::Aerospike,
        service.connections_max,
        service.connections_max_per_address,
    );
    let resp = Door::new(
        Protocol::Resp,
        state.config.resp.maxclients,
        state.config.resp.connections_max_per_address,
    );
    let admin = Door::new(Protocol::Admin, state.config.admin.connections_max, 0);
    let tls_of = |listener: &Option<TcpListener>| tls.clone().filter(|_| listener.is_some());
    let (service_tls, resp_tls) = (tls_of(&listeners.service_tls), tls_of(&listeners.resp_tls));
    let shutdown = &shutdown_receiver;
    tokio::select! {
        () = accept_optional(listeners.service.as_ref(), &state, &aerospike, None, shutdown.clone()) => {}
        () = accept_optional(listeners.service_tls.as_ref(), &state, &aerospike, service_tls, shutdown.clone()) => {}
        () = accept_optional(listeners.resp.as_ref(), &state, &resp, None, shutdown.clone()) => {}
        () = accept_optional(listeners.resp_tls.as_ref(), &state, &resp, resp_tls, shutdown.clone()) => {}
        () = accept_optional(listeners.admin.as_ref(), &state, &admin, None, shutdown.clone()) => {}
        () = shutdown_signal => info!("shutdown requested"),
        () = state.shutdown_requested.notified() => info!("shutdown requested by SHUTDOWN"),
    }
    drop(listeners);
    if let Some(reloading) = reloading {
        reloading.abort();
    }
    ticker.abort();
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    let _ = shutdown_sender.send(true);
    // A script still running would hold its connection, and the pool, past the grace period.
    state.scripts.stop_for_shutdown();
    let all_closed = async {
        for door in [&aerospike, &resp, &admin] {
            door.all_closed().await;
        }
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, all_closed)
        .await
        .is_err()
    {
        warn!("connections still open after the shutdown grace period");
    }
    if let Some(node) = &cluster_node {
        node.shutdown().await;
    }
    state.long_requests.stop();
    sweepers.stop();
    for namespace in &state.namespaces {
        namespace.close();
    }
    info!("osprey stopped");
    Ok(())
}

/// Starts this node's membership of the cluster its `[cluster]` seeds name.
///
/// # Errors
/// The fabric cannot listen, or the metadata store cannot be opened.
async fn join_cluster(
    config: &Config,
    node_id: &str,
    advertised: &Advertised<'_>,
    addresses: &Addresses,
    namespaces: &[Arc<Namespace>],
    latencies: &Arc<Latencies>,
) -> std::io::Result<Arc<ClusterNode>> {
    let node_id: model::NodeId = node_id
        .parse()
        .map_err(|_| std::io::Error::other(format!("node id {node_id:?} is not hex")))?;
    let metadata_dir = match (&config.cluster.metadata_dir, &config.service.work_directory) {
        (dir, _) if !dir.as_os_str().is_empty() => dir.clone(),
        (_, work) if !work.as_os_str().is_empty() => work.join("cluster"),
        _ => std::path::PathBuf::from(format!("cluster-{node_id}")),
    };
    let replication_factors = config
        .namespaces
        .iter()
        .map(|section| section.replication_factor);
    let setup = NodeSetup {
        config: config.cluster.clone(),
        cluster_name: config.service.cluster_name.clone(),
        node_id,
        service_address: advertised.service.to_owned(),
        tls_service: advertised
            .tls
            .filter(|_| !advertised.service_tls.is_empty())
            .map(|tls| (advertised.service_tls.to_owned(), tls.name())),
        resp_address: addresses
            .resp
            .or(addresses.resp_tls)
            .map(|address| address.to_string()),
        namespaces: namespaces
            .iter()
            .cloned()
            .zip(replication_factors.map(usize::from))
            .collect(),
        commit_levels: config
            .namespaces
            .iter()
            .map(|section| section.write_commit_level_override)
            .collect(),
        latencies: Some(Arc::clone(latencies)),
        metadata: MetadataStore::Dir(metadata_dir),
        network: match (config.cluster.tls, advertised.tls) {
            (true, Some(tls)) => Arc::new(TlsNetwork::new(Arc::clone(tls))),
            _ => Arc::new(fabric::TcpNetwork),
        },
    };
    ClusterNode::start(setup).await
}

/// A listener on `address:port`, the settings of config section `section`.
///
/// # Errors
/// When the address cannot be bound: the error names the address and the setting to change,
/// `osprey: cannot listen on 127.0.0.1:3000 (service.port): address already in use`, rather
/// than the operating system's bare "Address already in use".
async fn bind(address: &str, port: u16, section: &str) -> std::io::Result<TcpListener> {
    TcpListener::bind((address, port)).await.map_err(|error| {
        let (setting, reason) = match error.kind() {
            std::io::ErrorKind::AddrInUse => ("port", "address already in use".to_owned()),
            std::io::ErrorKind::AddrNotAvailable => (
                "address",
                "address not available on this machine".to_owned(),
            ),
            _ => ("address", error.to_string()),
        };
        std::io::Error::new(
            error.kind(),
            format!("cannot listen on {address}:{port} ({section}.{setting}): {reason}"),
        )
    })
}

/// The addresses the server listens on.
/// The addresses bound; `None` where a port is off.
struct Addresses {
    service: Option<SocketAddr>,
    service_tls: Option<SocketAddr>,
    resp: Option<SocketAddr>,
    resp_tls: Option<SocketAddr>,
    admin: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
}

/// What this node tells clients and peers about its service ports.
struct Advertised<'a> {
    /// The clear service address (empty when off).
    service: &'a str,
    /// The TLS service address (empty when off).
    service_tls: &'a str,
    /// The certificate, whose name TLS clients check.
    tls: Option<&'a Arc<Tls>>,
}

/// The listeners; `None` where a port is off.
struct Listeners {
    service: Option<TcpListener>,
    service_tls: Option<TcpListener>,
    resp: Option<TcpListener>,
    resp_tls: Option<TcpListener>,
    admin: Option<TcpListener>,
    metrics: Option<TcpListener>,
}

impl Listeners {
    async fn bind(config: &Config) -> std::io::Result<Listeners> {
        let (service, resp) = (&config.service, &config.resp);
        let serve_resp = resp.enabled;
        Ok(Listeners {
            service: bind_unless(service.tls_only, &service.address, service.port, "service")
                .await?,
            service_tls: bind_optional(&service.address, service.tls_port, "service.tls-port")
                .await?,
            resp: bind_unless(
                !serve_resp || resp.tls_only,
                &resp.address,
                resp.port,
                "resp",
            )
            .await?,
            resp_tls: match serve_resp {
                true => bind_optional(&resp.address, resp.tls_port, "resp.tls-port").await?,
                false => None,
            },
            admin: match config.admin.enabled {
                true => bind_admin(&config.admin).await,
                false => None,
            },
            metrics: bind_optional(
                &service.address,
                service.metrics_port,
                "service.metrics-port",
            )
            .await?,
        })
    }

    fn addresses(&self) -> std::io::Result<Addresses> {
        let address = |listener: &Option<TcpListener>| {
            listener.as_ref().map(TcpListener::local_addr).transpose()
        };
        Ok(Addresses {
            service: address(&self.service)?,
            service_tls: address(&self.service_tls)?,
            resp: address(&self.resp)?,
            resp_tls: address(&self.resp_tls)?,
            admin: address(&self.admin)?,
            metrics: address(&self.metrics)?,
        })
    }
}

async fn bind_unless(
    off: bool,
    address: &str,
    port: u16,
    section: &str,
) -> std::io::Result<Option<TcpListener>> {
    match off {
        true => Ok(None),
        false => bind(address, port, section).await.map(Some),
    }
}

/// Binds `address:port` when a port is set (a TLS port, the metrics port).
async fn bind_optional(
    address: &str,
    port: Option<u16>,
    setting: &str,
) -> std::io::Result<Option<TcpListener>> {
    match port {
        Some(port) => bind(address, port, setting).await.map(Some),
        None => Ok(None),
    }
}

/// Looks at the certificate files now and then, and loads them again when they changed.
async fn watch_tls_files(tls: Arc<Tls>) {
    let Some(period) = tls.reload_period() else {
        return;
    };
    let mut ticks = tokio::time::interval(period);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let tls = Arc::clone(&tls);
        // File reads and key parsing: off the runtime's threads.
        let _ = tokio::task::spawn_blocking(move || tls.reload_if_changed()).await;
    }
}

/// Opens every configured namespace; those with device storage are rebuilt from their files.
fn open_namespaces(config: &Config) -> std::io::Result<Vec<Arc<Namespace>>> {
    let work_directory = &config.service.work_directory;
    if !work_directory.as_os_str().is_empty() {
        std::fs::create_dir_all(work_directory).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("work-directory {}: {e}", work_directory.display()),
            )
        })?;
    }
    let clock: Arc<SystemClock> = Arc::new(SystemClock);
    let mut namespaces = Vec::new();
    for section in &config.namespaces {
        let engine_config = section.to_engine();
        let devices = match &engine_config.storage {
            Some(storage) => open_devices(storage)?,
            None => Vec::new(),
        };
        let started = Instant::now();
        let (namespace, report) =
            Namespace::open(engine_config, clock.clone(), devices, Flushing::Background)
                .map_err(std::io::Error::other)?;
        if let Some(report) = report {
            let summary = namespace.summary();
            info!(
                bad_block_headers = report.bad_block_headers,
                corrupt_blocks = report.corrupt_blocks,
                "cold start: namespace {} loaded {} records from {} blocks in {} ms",
                namespace.name(),
                summary.objects,
                report.blocks_read,
                started.elapsed().as_millis()
            );
        }
        let namespace = Arc::new(namespace);
        crate::sindex_store::restore(&config.service.work_directory, section, &namespace);
        namespaces.push(namespace);
    }
    Ok(namespaces)
}

fn open_devices(storage: &StorageConfig) -> std::io::Result<Vec<Arc<dyn Device>>> {
    storage
        .files
        .iter()
        .map(|path| {
            create_missing_directory(path)?;
            let device = FileDevice::open(path, storage.file_size_bytes)?;
            Ok(Arc::new(device) as Arc<dyn Device>)
        })
        .collect()
}

/// Creates the directory of device file `path` when it is missing, as `files = ["data/test.dat"]`
/// on a fresh checkout asks, and logs that it did. Each directory created is synced into its
/// parent, so that the data file created in it next survives a crash.
///
/// # Errors
/// When a directory cannot be created or synced; the error names it.
fn create_missing_directory(path: &std::path::Path) -> std::io::Result<()> {
    let Some(directory) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) else {
        return Ok(());
    };
    if directory.exists() {
        return Ok(());
    }
    let named = |error: std::io::Error| {
        std::io::Error::new(
            error.kind(),
            format!(
                "cannot create directory {} for device file {}: {error}",
                directory.display(),
                path.display()
            ),
        )
    };
    let missing: Vec<&std::path::Path> = directory
        .ancestors()
        .take_while(|ancestor| !ancestor.as_os_str().is_empty() && !ancestor.exists())
        .collect();
    std::fs::create_dir_all(directory).map_err(named)?;
    for created in missing.iter().rev() {
        let parent = created
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        std::fs::File::open(parent)
            .and_then(|parent| parent.sync_all())
            .map_err(named)?;
    }
    info!(
        directory = %directory.display(),
        file = %path.display(),
        "created the missing directory of a device file"
    );
    Ok(())
}

/// The address clients are told to connect to: the configured `access-address`, else the bound
/// address. A wildcard bind without an access address is advertised as it is, with a warning,
/// because no single interface address is right for every client.
fn access_address(configured: &str, bound: SocketAddr) -> String {
    if !configured.is_empty() {
        return format!("{configured}:{}", bound.port());
    }
    if bound.ip().is_unspecified() {
        warn!(%bound, "bound to a wildcard address: set service.access-address for clients");
    }
    bound.to_string()
}

fn log_ready(state: &ServerState, addresses: &Addresses) {
    let names: Vec<&str> = state.namespaces.iter().map(|ns| ns.name()).collect();
    let shown = |address: Option<SocketAddr>| {
        address.map_or_else(|| "off".to_owned(), |address| address.to_string())
    };
    info!(
        service = %shown(addresses.service),
        service_tls = %shown(addresses.service_tls),
        resp = %shown(addresses.resp),
        resp_tls = %shown(addresses.resp_tls),
        admin = %shown(addresses.admin),
        metrics = %shown(addresses.metrics),
        node = %state.node_id,
        namespaces = %names.join(","),
        "osprey ready"
    );
}

/// Which protocol a listener speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    /// Aerospike clients.
    Aerospike,
    /// Redis clients.
    Resp,
    /// The admin port: the Aerospike protocol, info and security frames only.
    Admin,
}

/// What a listener lets in: at most `connections_max` connections, and at most
/// `per_address_max` from one client address (0 = no such limit).
///
/// Invariant: a connection holds one permit of `permits` and, where the per-address limit is
/// on, one count of its address, from accept until it closes.
struct Door {
    protocol: Protocol,
    connections_max: usize,
    permits: Arc<Semaphore>,
    per_address_max: usize,
    per_address: Arc<AddressCounts>,
}

/// Connections open per client address.
type AddressCounts = Mutex<HashMap<IpAddr, usize>>;

/// A connection's place through a [`Door`]; dropping it frees the place.
struct Admitted {
    _permit: OwnedSemaphorePermit,
    address: Option<(IpAddr, Arc<AddressCounts>)>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some((ip, counts)) = &self.address {
            let mut counts = counts.lock();
            if let Some(count) = counts.get_mut(ip) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(ip);
                }
            }
        }
    }
}

/// Why a connection was not let in.
#[derive(Clone, Copy, Debug)]
enum Refusal {
    /// The protocol's connection limit.
    Full,
    /// The limit per client address.
    AddressFull,
}

impl Door {
    fn new(protocol: Protocol, connections_max: usize, per_address_max: usize) -> Door {
        Door {
            protocol,
            connections_max,
            permits: Arc::new(Semaphore::new(connections_max)),
            per_address_max,
            per_address: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn admit(&self, peer: SocketAddr) -> Result<Admitted, Refusal> {
        let permit = Arc::clone(&self.permits)
            .try_acquire_owned()
            .map_err(|_| Refusal::Full)?;
        if self.per_address_max == 0 {
            return Ok(Admitted {
                _permit: permit,
                address: None,
            });
        }
        let ip = peer.ip();
        let mut counts = self.per_address.lock();
        let count = counts.entry(ip).or_insert(0);
        if *count >= self.per_address_max {
            return Err(Refusal::AddressFull);
        }
        *count += 1;
        Ok(Admitted {
            _permit: permit,
            address: Some((ip, Arc::clone(&self.per_address))),
        })
    }

    /// Completes once every connection let in has closed.
    async fn all_closed(&self) {
        let all = u32::try_from(self.connections_max).unwrap_or(u32::MAX);
        let _ = self.permits.acquire_many(all).await;
    }
}

/// The admin port's listener, or none when its address is taken: the admin port is a
/// convenience that is on by default, and a second server on one machine (or any other
/// program on port 3008) must not keep the server from starting. Logged either way.
async fn bind_admin(admin: &crate::config::AdminConfig) -> Option<TcpListener> {
    match TcpListener::bind((admin.address.as_str(), admin.port)).await {
        Ok(listener) => Some(listener),
        Err(error) => {
            warn!(
                address = %admin.address,
                port = admin.port,
                %error,
                "admin port not opened; set [admin] port (0 picks a free one) or enabled = false"
            );
            None
        }
    }
}

async fn accept_optional(
    listener: Option<&TcpListener>,
    state: &Arc<ServerState>,
    door: &Door,
    tls: Option<Arc<Tls>>,
    shutdown: watch::Receiver<bool>,
) {
    match listener {
        Some(listener) => accept_loop(listener, state, door, tls, shutdown).await,
        None => std::future::pending().await,
    }
}

/// Accepts connections on `listener` through `door`, over TLS with `tls`.
async fn accept_loop(
    listener: &TcpListener,
    state: &Arc<ServerState>,
    door: &Door,
    tls: Option<Arc<Tls>>,
    shutdown: watch::Receiver<bool>,
) {
    let counters = counters_of(state, door.protocol);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Typically out of file descriptors; back off instead of spinning.
                warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let admitted = match door.admit(peer) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                counters.refused.fetch_add(1, Ordering::Relaxed);
                refuse(&stream, door.protocol, refusal);
                continue;
            }
        };
        // Requests and replies are small and latency-bound: never wait to coalesce.
        let _ = stream.set_nodelay(true);
        counters.opened.fetch_add(1, Ordering::Relaxed);
        let state = state.clone();
        let mut shutdown = shutdown.clone();
        let protocol = door.protocol;
        let tls = tls.clone();
        tokio::spawn(async move {
            let stream = match tls {
                None => Some(Transport::Clear(stream)),
                Some(tls) => tokio::select! {
                    accepted = Transport::accept_tls(stream, &tls) => handshaken(&tls, peer, accepted),
                    _ = shutdown.changed() => None,
                },
            };
            let Some(stream) = stream else {
                counters_of(&state, protocol)
                    .closed
                    .fetch_add(1, Ordering::Relaxed);
                drop(admitted);
                return;
            };
            let account = state.client_memory.open();
            match protocol {
                Protocol::Aerospike => {
                    connection::serve(stream, state.clone(), shutdown, account, Role::Client).await;
                }
                Protocol::Admin => {
                    connection::serve(stream, state.clone(), shutdown, account, Role::Admin).await;
                }
                Protocol::Resp => resp::serve(stream, state.clone(), shutdown, account).await,
            }
            counters_of(&state, protocol)
                .closed
                .fetch_add(1, Ordering::Relaxed);
            drop(admitted);
        });
    }
}

fn counters_of(state: &ServerState, protocol: Protocol) -> &crate::state::ConnectionCounters {
    match protocol {
        Protocol::Aerospike => &state.connections,
        Protocol::Resp => &state.resp_connections,
        Protocol::Admin => &state.admin_connections,
    }
}

/// The stream of a finished handshake, counted; `None` (logged) where it failed.
fn handshaken(
    tls: &Tls,
    peer: SocketAddr,
    accepted: Result<Transport, HandshakeError>,
) -> Option<Transport> {
    match accepted {
        Ok(stream) => {
            tls.stats.handshakes.fetch_add(1, Ordering::Relaxed);
            Some(stream)
        }
        Err(error) => {
            tls.stats.handshake_failures.fetch_add(1, Ordering::Relaxed);
            debug!(%peer, %error, "TLS handshake refused");
            None
        }
    }
}

/// Closes a connection the door did not let in. A Redis client is told why first, as Redis
/// does (a best-effort write that never waits); Aerospike clients are closed without a word.
fn refuse(stream: &TcpStream, protocol: Protocol, refusal: Refusal) {
    debug!(?protocol, ?refusal, "connection refused at accept");
    if protocol == Protocol::Resp {
        let message: &[u8] = match refusal {
            Refusal::Full => b"-ERR max number of clients reached\r\n",
            Refusal::AddressFull => b"-ERR max number of clients from this address reached\r\n",
        };
        let _ = stream.try_write(message);
    }
}

/// Background threads per namespace: an expiry sweeper where `nsup-period` is non-zero, a
/// defragmenter where the namespace has device storage, and a watch on memory and device use
/// that evicts above the thresholds.
/// Ends an interval of the latency histograms every `ticker-interval-s`, for `latencies:`.
async fn tick_latencies(state: Arc<ServerState>) {
    let period = Duration::from_secs(state.config.service.ticker_interval_s);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        state.latencies.tick();
    }
}

struct Sweepers {
    stop: Vec<mpsc::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

/// How often the defragmenter looks for blocks to rewrite when it found none.
const DEFRAG_IDLE_PERIOD: Duration = Duration::from_millis(100);
/// Blocks one defragmentation round takes on before looking again.
const DEFRAG_BLOCKS_PER_ROUND: usize = 16;

impl Sweepers {
    fn start(namespaces: &[Arc<Namespace>]) -> Sweepers {
        let mut sweepers = Sweepers {
            stop: Vec::new(),
            threads: Vec::new(),
        };
        for namespace in namespaces {
            let period_seconds = namespace.config().nsup_period_seconds;
            if period_seconds != 0 {
                let period = Duration::from_secs(u64::from(period_seconds));
                sweepers.spawn("nsup", namespace, period, sweep_expired);
            }
            if namespace.has_storage() {
                sweepers.spawn("defrag", namespace, DEFRAG_IDLE_PERIOD, defragment);
            }
            sweepers.spawn("evict", namespace, MEMORY_SAMPLE_PERIOD, watch_room);
        }
        sweepers
    }

    /// Runs `work` on its own thread every `period` until stopped.
    fn spawn(
        &mut self,
        kind: &str,
        namespace: &Arc<Namespace>,
        period: Duration,
        work: fn(&Namespace),
    ) {
        let (sender, receiver) = mpsc::channel::<()>();
        let namespace = namespace.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{kind}-{}", namespace.name()))
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = receiver.recv_timeout(period) {
                    work(&namespace);
                }
            })
            .expect("the OS can start two threads per namespace at start-up");
        self.stop.push(sender);
        self.threads.push(thread);
    }

    fn stop(self) {
        drop(self.stop);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

fn sweep_expired(namespace: &Namespace) {
    let started = Instant::now();
    let expired = namespace.sweep_expired();
    if expired > 0 {
        info!(
            namespace = namespace.name(),
            expired,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "expired records reclaimed"
        );
    }
}

/// How often memory use is sampled and the eviction thresholds checked.
const MEMORY_SAMPLE_PERIOD: Duration = Duration::from_secs(1);

/// Samples the machine's memory use for the namespace's thresholds, and evicts above them.
fn watch_room(namespace: &Namespace) {
    if let Some(pct) = system_memory_used_pct() {
        namespace.note_memory_used_pct(pct);
    }
    let evicted = namespace.evict_if_needed();
    if evicted > 0 {
        warn!(
            namespace = namespace.name(),
            evicted, "above the eviction threshold: records evicted"
        );
    }
}

/// The machine's memory in use, in percent: 100 - MemAvailable / MemTotal (Linux).
fn system_memory_used_pct() -> Option<u8> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = meminfo.lines().find(|line| line.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let (total, available) = (field("MemTotal:")?, field("MemAvailable:")?);
    let used_pct = 100 - available.min(total) * 100 / total.max(1);
    u8::try_from(used_pct).ok()
}

/// Defragments until no block is below the low-water mark.
fn defragment(namespace: &Namespace) {
    while namespace.defragment(DEFRAG_BLOCKS_PER_ROUND) == DEFRAG_BLOCKS_PER_ROUND {}
}
