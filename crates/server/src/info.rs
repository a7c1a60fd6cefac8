//! The info protocol: text commands clients use to validate, tend and inspect a node.
//!
//! Each request line is answered with `<line>\t<value>\n`, in order, so the C client's
//! positional parser stays aligned; an unknown command answers `ERROR:4:unrecognized command`,
//! and a known one Osprey does not implement yet (`udf-put`...) `ERROR:16:<why>`.
//! Values are read from the live state: object counts, memory, configuration.
//!
//! Why build 8.0.0.0: it is the newest version whose client-visible behaviour Osprey matches.
//! Clients switch on `build` at 8.1 to the new secondary-index command syntax and send
//! `user-agent-set` on every new connection (one extra round trip); both are accepted here, but
//! advertising 8.0 keeps clients on the simpler path. Everything >= 6.0 (partition scans and
//! queries, batch-any) stays enabled. See `docs/ARCHITECTURE.md`.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use engine::Namespace;
use wire_aerospike::{info_command_name, info_param, info_request_lines};

use crate::access::Access;
use crate::state::ServerState;
use crate::{admin, sindex_info};

/// The Aerospike server version Osprey presents itself as.
pub const BUILD_VERSION: &str = "8.0.0.0";
/// The edition string clients compare against.
pub const EDITION: &str = "Aerospike Community Edition";
/// Feature tokens. `pscans` is required by the Go and Java clients (they reject the node
/// without it); `pquery`, `batch-any` and `batch-index` select the modern protocol paths for
/// scans, queries and batches; `query-show` lets clients poll job status. Only what Osprey
/// serves is advertised: collection and bit ops, GeoJSON and geo indexes (`geo`), Lua UDFs
/// (`udf`).
pub const FEATURES: &str = "batch-any;batch-index;blob-bits;cdt-list;cdt-map;float;geo;peers;\
pipelining;pquery;pscans;query-show;replicas;replicas-all;replicas-master;replicas-max;sindex-exists;truncate-namespace;udf";

/// The info commands this node answers, as `help` lists them.
const INFO_COMMANDS: [&str; 58] = [
    "build",
    "cluster-leave",
    "cluster-name",
    "cluster-stable",
    "edition",
    "features",
    "get-config",
    "help",
    "latencies",
    "log-set",
    "namespace",
    "namespaces",
    "node",
    "partition-generation",
    "partition-hashes",
    "partition-versions",
    "peers-clear-alt",
    "peers-clear-std",
    "peers-generation",
    "peers-tls-alt",
    "peers-tls-std",
    "query-abort",
    "query-abort-all",
    "query-show",
    "rebalance-generation",
    "replicas",
    "replicas-all",
    "replicas-master",
    "scan-abort",
    "scan-abort-all",
    "scan-show",
    "service",
    "service-clear-alt",
    "service-clear-std",
    "service-tls-alt",
    "service-tls-std",
    "services",
    "services-alternate",
    "services-alumni",
    "set-config",
    "sets",
    "sindex",
    "sindex-create",
    "sindex-delete",
    "sindex-exists",
    "sindex-list",
    "sindex-stat",
    "statistics",
    "status",
    "tls-reload",
    "truncate",
    "truncate-namespace",
    "udf-get",
    "udf-list",
    "udf-put",
    "udf-remove",
    "user-agent-set",
    "version",
];

/// Per-connection info state.
#[derive(Debug, Default)]
pub struct InfoSession {
    user_agent: Option<String>,
}

/// Answers one info request body into `out` (a complete type-1 frame).
pub fn handle_info(
    state: &ServerState,
    session: &mut InfoSession,
    access: &mut Access,
    body: &[u8],
    out: &mut Vec<u8>,
) {
    let start = wire_aerospike::begin_info_response(out);
    let mut lines = info_request_lines(body).peekable();
    if lines.peek().is_none() {
        write_summary(state, out);
    }
    for line in lines {
        out.extend_from_slice(line);
        out.push(b'\t');
        let mut value = String::new();
        let (name, params) = info_command_name(line);
        match access.info_refusal(name, params) {
            Some(refusal) => value = refusal,
            None => answer(state, session, line, &mut value),
        }
        debug_assert!(
            !value.contains(['\t', '\n']),
            "info values never contain tab or newline"
        );
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    wire_aerospike::finish_info_response(out, start);
}

fn answer(state: &ServerState, session: &mut InfoSession, line: &[u8], value: &mut String) {
    let (name, rest) = info_command_name(line);
    match name {
        b"node" => value.push_str(&state.node_id),
        b"cluster-stable" => write_cluster_stable(state, rest, value),
        b"cluster-leave" => write_cluster_leave(state, rest, value),
        b"partition-hashes" => write_partition_hashes(state, rest, value),
        b"partition-versions" => write_partition_versions(state, rest, value),
        b"build" => value.push_str(BUILD_VERSION),
        b"version" => {
            let _ = write!(value, "{EDITION} build {BUILD_VERSION}");
        }
        b"edition" => value.push_str(EDITION),
        b"features" => value.push_str(FEATURES),
        b"status" => value.push_str("ok"),
        b"partition-generation" => {
            let _ = write!(value, "{}", state.cluster_view().partition_generation());
        }
        b"peers-generation" => {
            let _ = write!(value, "{}", state.cluster_view().peers_generation());
        }
        b"rebalance-generation" => {
            let _ = write!(value, "{}", state.cluster_view().rebalance_generation());
        }
        b"cluster-name" => value.push_str(&state.config.service.cluster_name),
        b"peers-clear-std" => write_peers(state, Some(false), value),
        b"peers-tls-std" => write_peers(state, Some(true), value),
        // No alternate addresses: every peer is left out, as Aerospike leaves out peers
        // without such an address.
        b"peers-clear-alt" | b"peers-tls-alt" => write_peers(state, None, value),
        b"service-clear-std" | b"service-clear-alt" | b"service" => {
            value.push_str(&state.access_address);
        }
        b"service-tls-std" | b"service-tls-alt" => value.push_str(&state.tls_access_address),
        // Legacy peer lists: a single node has none.
        b"services" | b"services-alumni" | b"services-alternate" => {}
        b"replicas" => write_replicas(state, rest, value, Replicas::WithRegime),
        b"replicas-all" => write_replicas(state, rest, value, Replicas::All),
        b"replicas-master" => write_replicas(state, rest, value, Replicas::Master),
        b"namespaces" => {
            let names: Vec<&str> = state.namespaces.iter().map(|ns| ns.name()).collect();
            value.push_str(&names.join(";"));
        }
        b"namespace" => match state.namespace(rest) {
            Some(namespace) => write_namespace(state, namespace, value),
            None => value.push_str("type=unknown"),
        },
        b"sets" => write_sets(state, rest, value),
        b"statistics" => write_statistics(state, value),
        b"latencies" => value.push_str(&state.latencies.info(rest)),
        b"log-set" => value.push_str(&crate::logging::log_set(&String::from_utf8_lossy(rest))),
        b"user-agent-set" => user_agent_set(session, rest, value),
        b"set-config" => admin::set_config(state, rest, value),
        b"tls-reload" => write_tls_reload(state, value),
        b"get-config" => admin::get_config(state, rest, value),
        b"truncate" => admin::truncate(state, rest, value),
        b"truncate-namespace" => admin::truncate_namespace(state, rest, value),
        b"query-show" | b"scan-show" => admin::query_show(state, rest, value),
        b"query-abort" | b"scan-abort" => admin::query_abort(state, rest, value),
        b"query-abort-all" | b"scan-abort-all" => admin::query_abort_all(state, value),
        b"sindex-create" => sindex_info::create(state, rest, value),
        b"sindex-delete" => sindex_info::delete(state, rest, value),
        b"sindex-exists" => sindex_info::exists(state, rest, value),
        b"sindex-list" => sindex_info::list(state, rest, value),
        b"sindex" => sindex_info::by_path(state, rest, value),
        b"sindex-stat" => sindex_info::stat(state, rest, value),
        b"udf-put" => state
            .udf
            .put(state.cluster_node().map(|node| &**node), rest, value),
        b"udf-get" => state.udf.get(rest, value),
        b"udf-list" => state.udf.list(value),
        b"udf-remove" => state
            .udf
            .remove(state.cluster_node().map(|node| &**node), rest, value),
        b"racks" | b"rack-ids" => value.push_str("ERROR:25:enterprise only"),
        b"help" => value.push_str(&INFO_COMMANDS.join(";")),
        _ => value.push_str("ERROR:4:unrecognized command"),
    }
}

/// The value `line` answers a connection with no session of its own (the metrics endpoint
/// reads the statistics this way, so that both always agree).
pub fn value_of(state: &ServerState, line: &[u8]) -> String {
    let mut value = String::new();
    answer(state, &mut InfoSession::default(), line, &mut value);
    value
}

fn write_summary(state: &ServerState, out: &mut Vec<u8>) {
    let summary_commands: [&[u8]; 9] = [
        b"features",
        b"node",
        b"edition",
        b"build",
        b"version",
        b"statistics",
        b"services-alumni",
        b"services",
        b"partition-generation",
    ];
    for name in summary_commands {
        let value = value_of(state, name);
        out.extend_from_slice(name);
        out.push(b'\t');
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Replicas {
    WithRegime,
    All,
    Master,
}

/// `replicas` (and its older forms): what this node claims, per namespace and column;
/// `replicas:max=<k>` keeps the first k columns.
fn write_replicas(state: &ServerState, params: &[u8], value: &mut String, shape: Replicas) {
    use wire_aerospike::cluster_map::{
        format_replicas, format_replicas_all, format_replicas_master,
    };
    let claims: Vec<_> = state
        .namespaces
        .iter()
        .map(|namespace| state.cluster_view().claims(namespace.name()))
        .collect();
    let columns_max =
        info_param(params, b"max").and_then(|max| std::str::from_utf8(max).ok()?.parse().ok());
    value.push_str(&match shape {
        Replicas::WithRegime => format_replicas(&claims, columns_max),
        Replicas::All => format_replicas_all(&claims),
        Replicas::Master => format_replicas_master(&claims),
    });
}

/// `peers-clear-std` (`Some(false)`), `peers-tls-std` (`Some(true)`), or a peer list with no
/// addresses (`None`: the `-alt` lists).
fn write_peers(state: &ServerState, tls: Option<bool>, value: &mut String) {
    use wire_aerospike::cluster_map::format_peers;
    let view = state.cluster_view();
    let peers = match tls {
        Some(tls) => view.peers(tls),
        None => Vec::new(),
    };
    value.push_str(&format_peers(
        view.peers_generation(),
        view.node_id(),
        &peers,
    ));
}

/// `cluster-leave[:node=ID]`: the node (this one if none is named) leaves the cluster
/// gracefully: no partition is placed on it any more, its copies move to the other nodes,
/// and once it holds none the metadata group removes it. `ok` once the request is queued.
fn write_cluster_leave(state: &ServerState, params: &[u8], value: &mut String) {
    let Some(node) = state.cluster_node() else {
        return value.push_str("ERROR:4:not part of a cluster");
    };
    let id = match info_param(params, b"node") {
        None => Ok(state.cluster_view().node_id()),
        Some(text) => std::str::from_utf8(text)
            .map_err(|_| ())
            .and_then(|text| text.parse::<model::NodeId>().map_err(|_| ())),
    };
    let Ok(id) = id else {
        return value.push_str("ERROR:4:node is not a node id (1 to 16 hex digits)");
    };
    match node.leave(id) {
        Ok(()) => value.push_str("ok"),
        Err(problem) => {
            let _ = write!(value, "ERROR:4:{problem}");
        }
    }
}

/// `cluster-stable[:size=N;ignore-migrations=B]`: the cluster key when every member sees the
/// others, the size is N (if given) and no partition is moving (unless ignored).
fn write_cluster_stable(state: &ServerState, params: &[u8], value: &mut String) {
    let summary = state.cluster_view().summary();
    let size_wanted: Option<usize> =
        info_param(params, b"size").and_then(|size| std::str::from_utf8(size).ok()?.parse().ok());
    let ignore_migrations = info_param(params, b"ignore-migrations") == Some(b"true");
    let stable = summary.integrity
        && size_wanted.is_none_or(|size| size == summary.size)
        && (ignore_migrations || summary.migrate_partitions_remaining == 0)
        && state.cluster_view().partition_generation() >= 0;
    match stable {
        true => {
            let _ = write!(value, "{:X}", summary.key);
        }
        false => value.push_str("ERROR:7:unstable cluster"),
    }
}

/// `partition-hashes:namespace=<ns>` (Osprey's own, for checking replicas): for every partition
/// this node holds as master or replica, `<pid>:<records>:<content hash in hex>`, joined by `;`.
fn write_partition_hashes(state: &ServerState, params: &[u8], value: &mut String) {
    let name = info_param(params, b"namespace").or_else(|| info_param(params, b"ns"));
    let Some(namespace) = name.and_then(|name| state.namespace(name)) else {
        value.push_str("ERROR:20:namespace not found");
        return;
    };
    let mut first = true;
    for pid in model::PartitionId::all() {
        if !namespace.partition_role(pid).0.serves_reads() {
            continue;
        }
        let (records, hash) = namespace.partition_content_hash(pid);
        if !first {
            value.push(';');
        }
        first = false;
        let _ = write!(value, "{}:{records}:{hash:X}", pid.0);
    }
}

/// Records a `partition-versions` answer lists at most.
const PARTITION_VERSIONS_MAX: usize = 10_000;

/// `partition-versions:namespace=<ns>;pid=<n>` (Osprey's own, for finding where two copies of a
/// partition differ): `<digest hex>:<generation>:<last-update ms>` for each record this node
/// holds of the partition (at most [`PARTITION_VERSIONS_MAX`]), joined by `,`.
fn write_partition_versions(state: &ServerState, params: &[u8], value: &mut String) {
    let name = info_param(params, b"namespace").or_else(|| info_param(params, b"ns"));
    let Some(namespace) = name.and_then(|name| state.namespace(name)) else {
        value.push_str("ERROR:20:namespace not found");
        return;
    };
    let pid = info_param(params, b"pid")
        .and_then(|pid| std::str::from_utf8(pid).ok()?.parse::<u16>().ok())
        .filter(|pid| usize::from(*pid) < model::PARTITION_COUNT);
    let Some(pid) = pid else {
        value.push_str("ERROR:4:pid must be a partition id");
        return;
    };
    let versions = namespace.partition_versions(model::PartitionId(pid), PARTITION_VERSIONS_MAX);
    for (index, (digest, generation, last_update_ms)) in versions.iter().enumerate() {
        if index > 0 {
            value.push(',');
        }
        for byte in digest.0 {
            let _ = write!(value, "{byte:02x}");
        }
        let _ = write!(value, ":{generation}:{last_update_ms}");
    }
}

fn section_of<'c>(
    state: &'c ServerState,
    namespace: &Namespace,
) -> Option<&'c crate::config::NamespaceSection> {
    state
        .config
        .namespaces
        .iter()
        .find(|section| section.name == namespace.name())
}

/// Copies of each record now: the configured factor, capped by the cluster's size.
fn effective_replication_factor(state: &ServerState, namespace: &Namespace) -> usize {
    match state.is_clustered() {
        true => {
            let configured = section_of(state, namespace).map_or(1, |s| s.replication_factor);
            usize::from(configured).min(state.cluster_view().summary().size)
        }
        false => 1,
    }
}

fn write_namespace(state: &ServerState, namespace: &Namespace, value: &mut String) {
    let summary = namespace.summary();
    let config = namespace.config();
    let (master_objects, prole_objects) = namespace.objects_by_role();
    let _ = write!(
        value,
        "objects={objects};master_objects={master_objects};prole_objects={prole_objects};\
         expired_objects={expired};evicted_objects={evicted};truncated_records={truncated};\
         data_used_bytes={data};index_used_bytes={index};set_index_used_bytes={set_index};\
         memory_used_bytes={memory};\
         client_read_success={rs};client_read_not_found={rn};client_read_error={re};\
         client_read_timeout={rt};\
         client_write_success={ws};client_write_error={we};client_write_timeout={wt};\
         client_delete_success={ds};client_delete_not_found={dn};client_delete_error={de};\
         client_delete_timeout={dt};\
         batch_sub_read_success={brs};batch_sub_read_not_found={brn};batch_sub_read_error={bre};\
         batch_sub_read_timeout={brt};\
         batch_sub_write_success={bws};batch_sub_write_error={bwe};\
         batch_sub_write_timeout={bwt};\
         batch_sub_delete_success={bds};batch_sub_delete_not_found={bdn};\
         batch_sub_delete_error={bde};batch_sub_delete_timeout={bdt};\
         pi_query_long_basic_complete={sc};pi_query_long_basic_abort={sa};\
         pi_query_long_basic_error={sf};\
         ns_cluster_size={cluster_size};effective_replication_factor={effective_rf};\
         replication-factor={rf};write-commit-level-override={commit_level};\
         strong-consistency=false;default-ttl={ttl};nsup-period={nsup};\
         allow-ttl-without-nsup={allow};max-record-size={max};default-read-touch-ttl-pct=0",
        objects = summary.objects,
        cluster_size = state.cluster_view().summary().size,
        effective_rf = effective_replication_factor(state, namespace),
        rf = section_of(state, namespace).map_or(1, |s| s.replication_factor),
        commit_level =
            section_of(state, namespace).map_or("off", |s| s.write_commit_level_override.name()),
        expired = summary.expired_objects,
        evicted = summary.evicted_objects,
        truncated = summary.truncated_objects,
        data = summary.data_used_bytes,
        index = summary.index_used_bytes,
        set_index = summary.set_index_used_bytes,
        memory = summary.data_used_bytes + summary.index_used_bytes + summary.set_index_used_bytes,
        rs = summary.client_read_success,
        rn = summary.client_read_not_found,
        re = summary.client_read_error,
        rt = summary.client_read_timeout,
        ws = summary.client_write_success,
        we = summary.client_write_error,
        wt = summary.client_write_timeout,
        ds = summary.client_delete_success,
        dn = summary.client_delete_not_found,
        de = summary.client_delete_error,
        dt = summary.client_delete_timeout,
        brs = summary.batch_sub_read_success,
        brn = summary.batch_sub_read_not_found,
        bre = summary.batch_sub_read_error,
        brt = summary.batch_sub_read_timeout,
        bws = summary.batch_sub_write_success,
        bwe = summary.batch_sub_write_error,
        bwt = summary.batch_sub_write_timeout,
        bds = summary.batch_sub_delete_success,
        bdn = summary.batch_sub_delete_not_found,
        bde = summary.batch_sub_delete_error,
        bdt = summary.batch_sub_delete_timeout,
        sc = summary.scans_complete,
        sa = summary.scans_aborted,
        sf = summary.scans_failed,
        ttl = config.default_ttl_seconds,
        nsup = config.nsup_period_seconds,
        allow = config.allow_ttl_without_nsup,
        max = config.max_record_size_bytes,
    );
    write_storage(namespace, value);
}

/// The storage statistics, named as Aerospike names them.
fn write_storage(namespace: &Namespace, value: &mut String) {
    let Some(stats) = namespace.storage_stats() else {
        let _ = write!(
            value,
            ";storage-engine=memory;tombstones=0;stop_writes={}",
            namespace.stop_writes()
        );
        return;
    };
    let config = namespace.config().storage.as_ref();
    let _ = write!(
        value,
        ";storage-engine=device;device_total_bytes={total};device_used_bytes={used};\
         device_free_pct={free};device_available_pct={free};defrag_q={defrag_q};write_q={write_q};\
         defrag_reads={defrag_reads};defrag_writes={defrag_writes};\
         device_write_amplification={wamp:.2};tombstones={tombstones};\
         device_flushes={flushes};stop_writes={stop};commit-to-device={commit};\
         write-block-size={block};defrag-lwm-pct={lwm};data-in-memory={in_memory};\
         cache_read_pct={cache_read_pct};device_reads={device_reads};\
         device_read_errors={read_errors}",
        total = stats.total_bytes,
        used = stats.used_bytes,
        free = stats.available_pct(),
        defrag_q = stats.defrag_queue_blocks,
        write_q = stats.write_queue_blocks,
        defrag_reads = stats.defrag_blocks_read,
        defrag_writes = stats.defrag_entries_copied,
        wamp = stats.write_amplification(),
        tombstones = stats.tombstones,
        flushes = stats.flushes,
        stop = namespace.stop_writes() || stats.failure.is_some(),
        commit = config.is_some_and(|c| c.commit_to_device),
        block = config.map_or(0, |c| c.write_block_size_bytes),
        lwm = config.map_or(0, |c| c.defrag_lwm_pct),
        in_memory = config.is_some_and(|c| c.data_in_memory),
        cache_read_pct = stats.cache_read_pct(),
        device_reads = stats.reads_from_device,
        read_errors = stats.read_errors,
    );
}

/// `sets`, `sets/<ns>` or `sets/<ns>/<set>`: one `ns=..:set=..:objects=..;` entry per set.
fn write_sets(state: &ServerState, filter: &[u8], value: &mut String) {
    let mut parts = filter.splitn(2, |&b| b == b'/');
    let namespace_filter = parts.next().filter(|part| !part.is_empty());
    let set_filter = parts.next().filter(|part| !part.is_empty());
    for namespace in &state.namespaces {
        if namespace_filter.is_some_and(|name| name != namespace.name().as_bytes()) {
            continue;
        }
        for set in namespace.sets() {
            if set_filter.is_some_and(|name| name != set.name.as_bytes()) {
                continue;
            }
            let _ = write!(
                value,
                "ns={}:set={}:objects={}:tombstones=0:data_used_bytes={}:truncate_lut={}:\
                 sindexes={}:index_populating={}:disable-eviction=false:enable-index={}:\
                 stop-writes-count=0:stop-writes-size=0;",
                namespace.name(),
                set.name,
                set.objects,
                set.data_used_bytes,
                set.truncate_before_ms,
                namespace
                    .indexes()
                    .iter()
                    .filter(|i| i.definition().set_name.as_deref() == Some(set.name.as_bytes()))
                    .count(),
                set.index_populating,
                set.index_enabled,
            );
        }
    }
}

fn write_statistics(state: &ServerState, value: &mut String) {
    let objects: u64 = state.namespaces.iter().map(|ns| ns.summary().objects).sum();
    let connections = &state.connections;
    let cluster = state.cluster_view().summary();
    let _ = write!(
        value,
        "cluster_size={size};cluster_key={key:X};cluster_integrity={integrity};\
         cluster_is_member=true;cluster_name={name};uptime={uptime};\
         objects={objects};client_connections={open};client_connections_opened={opened};\
         client_connections_closed={closed};client_connections_refused={refused};\
         migrate_allowed=true;migrate_partitions_remaining={remaining};\
         migrate_rx_partitions_active={rx_active};migrate_rx_partitions_remaining={rx_remaining};\
         migrate_tx_partitions_remaining={tx_remaining};migrate_rx_partitions_done={rx_done};\
         migrate_tx_partitions_done={tx_done};migrate_records_received={rx_records};\
         migrate_records_transmitted={tx_records};\
         forwarded_requests={forwarded};process_rss_bytes={rss}",
        size = cluster.size,
        key = cluster.key,
        integrity = cluster.integrity,
        name = state.config.service.cluster_name,
        remaining = cluster.migrate_partitions_remaining,
        rx_active = cluster.migration.rx_partitions_active,
        rx_remaining = cluster.migration.rx_partitions_remaining,
        tx_remaining = cluster.migration.tx_partitions_remaining,
        rx_done = cluster.migration.rx_partitions_done,
        tx_done = cluster.migration.tx_partitions_done,
        rx_records = cluster.migration.records_received,
        tx_records = cluster.migration.records_transmitted,
        forwarded = state.cluster_stats.forwarded.load(Ordering::Relaxed),
        uptime = state.started.elapsed().as_secs(),
        open = connections.open_now(),
        opened = connections.opened.load(Ordering::Relaxed),
        closed = connections.closed.load(Ordering::Relaxed),
        refused = connections.refused.load(Ordering::Relaxed),
        rss = resident_set_bytes(),
    );
    crate::batch::write_batch_statistics(&state.batch, value);
    write_limit_statistics(state, value);
    write_security_statistics(state, value);
    write_tls_statistics(state, value);
    state.unsupported.write_statistics(value);
}

/// Handshakes and reloads, when TLS is configured (Osprey's own names).
fn write_tls_statistics(state: &ServerState, value: &mut String) {
    let Some(tls) = &state.tls else {
        return;
    };
    let stats = &tls.stats;
    let _ = write!(
        value,
        ";tls_handshakes={};tls_handshake_failures={};tls_reloads={};tls_reload_failures={}",
        stats.handshakes.load(Ordering::Relaxed),
        stats.handshake_failures.load(Ordering::Relaxed),
        stats.reloads.load(Ordering::Relaxed),
        stats.reload_failures.load(Ordering::Relaxed),
    );
}

/// `tls-reload` (Osprey's own): loads the certificate files again now; `ok`, or why the old
/// certificate is kept.
fn write_tls_reload(state: &ServerState, value: &mut String) {
    let Some(tls) = &state.tls else {
        return value.push_str("ERROR:4:TLS is not configured");
    };
    match tls.reload() {
        Ok(()) => value.push_str("ok"),
        Err(problem) => {
            let _ = write!(value, "ERROR:4:{}", problem.replace([';', ':', '\n'], " "));
        }
    }
}

/// Logins, when security is on (Osprey's own names).
fn write_security_statistics(state: &ServerState, value: &mut String) {
    let Some(security) = &state.security else {
        return;
    };
    let stats = &security.stats;
    let _ = write!(
        value,
        ";security_logins={};security_logins_refused={};security_logins_throttled={};\
         security_audit_suppressed={}",
        stats.accepted.load(Ordering::Relaxed),
        stats.refused.load(Ordering::Relaxed),
        stats.throttled.load(Ordering::Relaxed),
        security.audit.suppressed.load(Ordering::Relaxed),
    );
}

/// The statistics of the limits on clients (Osprey's own names; see `docs/reliability.md`).
fn write_limit_statistics(state: &ServerState, value: &mut String) {
    let memory = &state.client_memory;
    let (resp, admin) = (&state.resp_connections, &state.admin_connections);
    let _ = write!(
        value,
        ";client_connections_idle_closed={};resp_connections={};resp_connections_refused={};\
         resp_connections_idle_closed={};admin_connections={};admin_connections_refused={};\
         client_memory_bytes={};client_memory_max_bytes={};client_memory_evicted={};\
         client_output_limit_closed={};query_timeout={};long_request_jobs={}",
        state.connections.idle_closed.load(Ordering::Relaxed),
        resp.open_now(),
        resp.refused.load(Ordering::Relaxed),
        resp.idle_closed.load(Ordering::Relaxed),
        admin.open_now(),
        admin.refused.load(Ordering::Relaxed),
        memory.total_bytes(),
        memory.limit_bytes(),
        memory.evicted.load(Ordering::Relaxed),
        memory.output_limit_closed.load(Ordering::Relaxed),
        state.scan_jobs.timeouts.load(Ordering::Relaxed),
        state.long_requests.jobs.load(Ordering::Relaxed),
    );
}

/// `user-agent-set:value=<base64>`: remembered per connection; a second call is an error, as
/// in Aerospike's `cmd_user_agent_set`.
fn user_agent_set(session: &mut InfoSession, params: &[u8], value: &mut String) {
    use base64::Engine as _;
    if session.user_agent.is_some() {
        value.push_str("ERROR:4:already set");
        return;
    }
    let decoded = info_param(params, b"value").and_then(|encoded| {
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
    });
    match decoded {
        Some(agent) => {
            session.user_agent = Some(String::from_utf8_lossy(&agent).into_owned());
            value.push_str("ok");
        }
        None => value.push_str("ERROR:4:bad value"),
    }
}

/// Resident set size of this process, from `/proc/self/statm` (0 where unavailable).
pub fn resident_set_bytes() -> u64 {
    const PAGE_SIZE_BYTES: u64 = 4096;
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let resident_pages = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok());
    resident_pages.unwrap_or(0) * PAGE_SIZE_BYTES
}
