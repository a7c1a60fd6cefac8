//! Configuration: built-in defaults, overridden by an optional TOML file.
//!
//! The defaults are the embedded configuration `osprey` runs with when given no file: one
//! in-memory namespace `test`, the service on 127.0.0.1:3000. A file overrides any key it names;
//! an unknown key or a bad value stops start-up with the file, the line and a hint.

use std::path::{Path, PathBuf};

use engine::NamespaceConfig;

use crate::cluster::{ClusterConfig, CommitLevelOverride};
use serde::{Deserialize, Serialize};
use storage::StorageConfig;

/// Most threads one scan may use (Aerospike caps `single-query-threads` at 128).
pub const SCAN_THREADS_MAX: usize = 128;
/// The longest timeout a setting may give: about 100 years (deadlines are instants, which a
/// longer time could overflow).
const DURATION_MAX_MS: u64 = 100 * 365 * 86_400_000;

/// The whole configuration.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// The client-facing Aerospike service.
    pub service: ServiceConfig,
    /// Namespaces; a file that lists any replaces the default list.
    pub namespaces: Vec<NamespaceSection>,
    /// The Redis protocol (RESP) front end.
    pub resp: RespConfig,
    /// The admin port: info commands only, with connections of its own.
    pub admin: AdminConfig,
    /// Membership of a cluster: the fabric, seeds, heartbeats.
    pub cluster: ClusterConfig,
    /// Users, roles and privileges.
    pub security: SecurityConfig,
    /// This node's certificate for the TLS ports and the fabric.
    pub tls: crate::tls::TlsConfig,
    /// The log's levels and format.
    pub logging: crate::logging::LoggingConfig,
}

/// The `[security]` section: access control, off by default. When on, every request of the
/// Aerospike protocol needs a login, and is checked against its user's privileges. The users
/// and roles are kept in `security.json` in `service.work-directory` (in memory only when it
/// is empty); a node that has none starts with Aerospike's default user, `admin`, password
/// `admin`, role `user-admin`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SecurityConfig {
    /// Check logins and privileges at all.
    pub enabled: bool,
    /// How long a login's session token stays valid, in seconds (Aerospike's `session-ttl`).
    pub session_ttl_s: u32,
    /// Where the audit trail goes, one JSON line per event: empty for nowhere, `stdout`, or a
    /// file's path.
    pub audit_log: String,
    /// Enforce the roles' read and write quotas (Aerospike's `enable-quotas`); off, setting a
    /// quota is refused (QUOTAS_NOT_ENABLED).
    pub enable_quotas: bool,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            enabled: false,
            session_ttl_s: security::SESSION_TTL_S_DEFAULT,
            audit_log: String::new(),
            enable_quotas: false,
        }
    }
}

/// Bounds on `session-ttl`: Aerospike's maximum, 10 days; below Aerospike's minimum, 2 minutes,
/// down to a second (the clients renew a token about a minute before it expires, so a shorter
/// one makes them log in at every tend: a setting for short-lived credentials and tests).
const SESSION_TTL_S_RANGE: std::ops::RangeInclusive<u32> = 1..=864_000;

/// The `[admin]` section: Aerospike's admin port. It serves info (and security) frames only,
/// on connections that do not count against `service.connections-max` or `resp.maxclients`,
/// so that an operator can always connect, even while clients hold every other slot.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AdminConfig {
    /// Serve the admin port at all.
    pub enabled: bool,
    /// Address to listen on.
    pub address: String,
    /// Port; 0 picks a free port (logged at start-up).
    pub port: u16,
    /// Most admin connections open at once (Aerospike serves 100).
    pub connections_max: usize,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            enabled: true,
            address: "127.0.0.1".to_owned(),
            // Aerospike's admin port.
            port: 3008,
            connections_max: 100,
        }
    }
}

/// The `[resp]` section: where Redis clients connect and where their keys live.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct RespConfig {
    /// Serve the Redis protocol at all.
    pub enabled: bool,
    /// Address to listen on.
    pub address: String,
    /// Port; 0 picks a free port (logged at start-up).
    pub port: u16,
    /// A second port that serves Redis clients over TLS (Redis's `tls-port`; 0 picks a free
    /// one); absent: none. Needs `[tls]`.
    pub tls_port: Option<u16>,
    /// Serve only the TLS port: the clear `port` is not opened.
    pub tls_only: bool,
    /// Valkey's `tls-auth-clients-user`: `"CN"` logs a TLS connection whose verified client
    /// certificate's common name is a user in as that user; `"off"` does not.
    pub tls_auth_clients_user: String,
    /// Namespace holding Redis keys; empty means the first configured namespace.
    pub namespace: String,
    /// Set holding Redis keys (see `docs/internals/redis-mapping.md`).
    pub set: String,
    /// Most Redis connections open at once (Redis's `maxclients`); one more is told
    /// `ERR max number of clients reached` and closed.
    pub maxclients: usize,
    /// Most Redis connections from one client address; 0 = no limit.
    pub connections_max_per_address: usize,
    /// Close a Redis connection that sends nothing for this many seconds (Redis's `timeout`);
    /// 0 never closes it, as in Redis.
    pub timeout: u64,
    /// Redis's `client-output-buffer-limit`: per class, a hard limit, a soft limit and its
    /// seconds, as Redis writes them (`normal 0 0 0 ...`). Only `normal` applies today.
    pub client_output_buffer_limit: String,
    /// Redis's `notify-keyspace-events` at start-up (`KEA`, `Kx`, ...; empty: none); CONFIG
    /// SET changes it while the server runs.
    pub notify_keyspace_events: String,
    /// Redis's `databases`: how many numbered databases SELECT may choose, each a set of the
    /// namespace (`docs/internals/redis-mapping.md`), 1 to 256.
    pub databases: u16,
    /// A Redis RDB file to load into the namespace at start-up, before connections are
    /// accepted (`osprey --load-rdb FILE` sets it too); absent: none.
    pub load_rdb: Option<std::path::PathBuf>,
    /// Redis's `dbfilename`: the file SAVE and BGSAVE write in the work directory (Redis's
    /// `dir`); CONFIG SET changes it while the server runs.
    pub dbfilename: String,
}

impl Default for RespConfig {
    fn default() -> Self {
        RespConfig {
            enabled: true,
            address: "127.0.0.1".to_owned(),
            port: 6379,
            tls_port: None,
            tls_only: false,
            tls_auth_clients_user: "off".to_owned(),
            namespace: String::new(),
            set: "redis".to_owned(),
            maxclients: 10_000,
            connections_max_per_address: 0,
            timeout: 0,
            client_output_buffer_limit: crate::limits::OUTPUT_BUFFER_LIMITS_DEFAULT.to_owned(),
            notify_keyspace_events: String::new(),
            databases: 16,
            load_rdb: None,
            dbfilename: "dump.rdb".to_owned(),
        }
    }
}

/// The `[service]` section.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServiceConfig {
    /// Address to listen on.
    pub address: String,
    /// Aerospike service port; 0 picks a free port (logged at start-up).
    pub port: u16,
    /// A second port that serves Aerospike clients over TLS (Aerospike's `tls-port`, 4333 by
    /// custom; 0 picks a free one); absent: none. Needs `[tls]`.
    pub tls_port: Option<u16>,
    /// Serve only the TLS port: the clear `port` is not opened (clients learn no clear
    /// address: `service-clear-std` and `peers-clear-std` answer none).
    pub tls_only: bool,
    /// Address clients should use to reach this node (Aerospike's `access-address`); empty
    /// means the bound address. Set it when `address` is a wildcard such as 0.0.0.0.
    pub access_address: String,
    /// Name reported by the `cluster-name` info command.
    pub cluster_name: String,
    /// Node id reported by `node` (hex); empty derives a stable one from host name and port.
    pub node_id: String,
    /// Worker threads; 0 means one per core.
    pub threads: usize,
    /// Close a connection that sends no request for this long; 0 never closes it.
    pub idle_timeout_ms: u64,
    /// A frame whose first byte arrived must be complete within this long.
    pub frame_read_timeout_ms: u64,
    /// Largest frame body accepted; a larger declared size closes the connection at once.
    pub frame_size_max_bytes: u64,
    /// Most Aerospike client connections open at once (Aerospike's `proto-fd-max`); further
    /// ones are closed on accept. Redis connections have their own limit, `resp.maxclients`.
    pub connections_max: usize,
    /// Most Aerospike client connections from one client address; 0 = no limit.
    pub connections_max_per_address: usize,
    /// Memory all client connections of both protocols may hold in their input and output
    /// buffers together (Redis's `maxmemory-clients`): bytes (`"512mb"`) or a percentage of
    /// the machine's memory (`"5%"`). Over it, the connections holding the most are closed.
    pub client_memory_max: String,
    /// Deadline of a single-record command that carries no total timeout of its own
    /// (Aerospike's `transaction-max-ms`); a command past its deadline answers TIMEOUT (9).
    pub transaction_max_ms: u64,
    /// Most ops one command (or batch row) may carry (Aerospike's 32,768); more answer
    /// PARAMETER (4).
    pub ops_per_request_max: u32,
    /// Threads that run long requests (large batches, commands with many ops, KEYS and other
    /// whole-keyspace Redis commands) at a lower priority, so that they never hold the
    /// threads serving ordinary requests; 0 = one per core.
    pub long_request_threads: usize,
    /// Most rows one batch request may carry; a larger batch is refused with
    /// BATCH_MAX_REQUESTS (151) before any row runs (Aerospike's `batch-max-requests`).
    pub batch_max_requests: u32,
    /// Threads one scan runs on (Aerospike's `single-query-threads`); settable at runtime.
    pub single_scan_threads: usize,
    /// Where the server keeps what must outlive it but belongs to no data file (Aerospike's
    /// `work-directory`): the secondary-index definitions of in-memory namespaces. Created if
    /// missing; empty keeps nothing (an in-memory namespace then restarts without indexes).
    pub work_directory: PathBuf,
    /// Seconds between two looks at the latency histograms (Aerospike's `ticker-interval`):
    /// `latencies:` answers the rates of the last interval.
    pub ticker_interval_s: u64,
    /// Whether the Aerospike latency histograms count microseconds rather than milliseconds
    /// (Aerospike's `microsecond-histograms`).
    pub microsecond_histograms: bool,
    /// The port of the HTTP endpoint serving metrics in Prometheus's text format, on
    /// `address`; none (the default) serves none.
    pub metrics_port: Option<u16>,
}

/// One `[[namespaces]]` entry.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct NamespaceSection {
    /// Namespace name, 1..=31 bytes.
    pub name: String,
    /// TTL for writes that ask for the default, seconds; 0 = never expire.
    pub default_ttl: u32,
    /// Seconds between expiry sweeps; 0 disables sweeping.
    pub nsup_period: u32,
    /// Allow TTLs although `nsup-period` is 0.
    pub allow_ttl_without_nsup: bool,
    /// Largest record, bytes.
    pub max_record_size: u32,
    /// Most bins a write may leave in a record: 1 to 32,767 (Aerospike's `RECORD_MAX_BINS`).
    pub max_bins_per_record: u32,
    /// Per-set settings (`[[namespaces.sets]]`).
    pub sets: Vec<SetSection>,
    /// Where records are kept (`[namespaces.storage-engine]`): memory, or files.
    pub storage_engine: StorageEngineSection,
    /// Evict (soonest to expire first) when the device's use exceeds this %; 0 = never.
    pub evict_used_pct: u8,
    /// Evict when the machine's memory use exceeds this %; 0 = never.
    pub evict_sys_memory_pct: u8,
    /// Refuse writes when the machine's memory use exceeds this %; 0 = never.
    pub stop_writes_sys_memory_pct: u8,
    /// Thousandths of the records with a TTL evicted per round.
    pub evict_tenths_pct: u16,
    /// Copies of each record on a cluster (master and replicas), capped by the node count.
    pub replication_factor: u8,
    /// Whether writes wait for their replicas whatever the client asks: `off` (as each write
    /// asks; clients ask for all by default), `all` or `master`.
    pub write_commit_level_override: CommitLevelOverride,
}

/// Which storage engine a namespace uses.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum StorageEngineType {
    /// Records live in memory only.
    #[default]
    Memory,
    /// Records are written to files or block devices (see `docs/internals/on-disk-format.md`).
    Device,
}

/// The `[namespaces.storage-engine]` table (Aerospike's `storage-engine device { ... }`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct StorageEngineSection {
    /// `memory` or `device`.
    #[serde(rename = "type")]
    pub engine_type: StorageEngineType,
    /// Files (or block devices) holding the data; created if missing.
    pub files: Vec<PathBuf>,
    /// Bytes per file.
    pub filesize: u64,
    /// Bytes per write block: a power of two from 64 KiB to 8 MiB.
    pub write_block_size: u32,
    /// A partly filled block is flushed after this long.
    pub flush_max_ms: u64,
    /// Acknowledge writes only once durable.
    pub commit_to_device: bool,
    /// Blocks below this live percentage are defragmented.
    pub defrag_lwm_pct: u8,
    /// Defragmentation runs only while fewer than this percentage of blocks are free.
    pub defrag_start_avail_pct: u8,
    /// Pause between defragmented blocks, microseconds.
    pub defrag_sleep_us: u64,
    /// Bytes of full blocks that may wait for the device before writes fail with
    /// DEVICE_OVERLOAD.
    pub max_write_cache: u64,
    /// Writes stop when fewer than this percentage of blocks are free.
    pub stop_writes_avail_pct: u8,
    /// Keep records' data in memory as well (reads never touch the files); false keeps only
    /// the index in memory.
    pub data_in_memory: bool,
    /// Written blocks kept in memory for reads of recent writes.
    pub post_write_queue: u32,
}

impl Default for StorageEngineSection {
    fn default() -> Self {
        let defaults = StorageConfig::with_defaults(Vec::new(), 0);
        StorageEngineSection {
            engine_type: StorageEngineType::Memory,
            files: Vec::new(),
            filesize: 0,
            write_block_size: defaults.write_block_size_bytes,
            flush_max_ms: defaults.flush_max_ms,
            commit_to_device: defaults.commit_to_device,
            defrag_lwm_pct: defaults.defrag_lwm_pct,
            defrag_start_avail_pct: defaults.defrag_start_avail_pct,
            defrag_sleep_us: defaults.defrag_sleep_us,
            max_write_cache: u64::from(defaults.write_queue_blocks_max)
                * u64::from(defaults.write_block_size_bytes),
            stop_writes_avail_pct: defaults.stop_writes_avail_pct,
            data_in_memory: defaults.data_in_memory,
            post_write_queue: defaults.post_write_queue_blocks,
        }
    }
}

impl StorageEngineSection {
    /// The storage's view of this table; `None` for memory.
    pub fn to_storage(&self) -> Option<StorageConfig> {
        if self.engine_type == StorageEngineType::Memory {
            return None;
        }
        let block = u64::from(self.write_block_size.max(1));
        Some(StorageConfig {
            files: self.files.clone(),
            file_size_bytes: self.filesize,
            write_block_size_bytes: self.write_block_size,
            flush_max_ms: self.flush_max_ms,
            commit_to_device: self.commit_to_device,
            defrag_lwm_pct: self.defrag_lwm_pct,
            defrag_start_avail_pct: self.defrag_start_avail_pct,
            defrag_sleep_us: self.defrag_sleep_us,
            write_queue_blocks_max: u32::try_from(self.max_write_cache / block).unwrap_or(u32::MAX),
            stop_writes_avail_pct: self.stop_writes_avail_pct,
            data_in_memory: self.data_in_memory,
            post_write_queue_blocks: self.post_write_queue,
        })
    }
}

/// One `[[namespaces.sets]]` entry.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetSection {
    /// Set name.
    pub name: String,
    /// Keep a set index for this set (Aerospike 5.6's `enable-index`).
    pub enable_index: bool,
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema (the message names line and column).
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message, with line, column and the expected keys.
        message: String,
    },
    /// A value is out of range.
    #[error("config {origin}: {message}")]
    Invalid {
        /// The file, or "defaults".
        origin: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            address: "127.0.0.1".to_owned(),
            port: 3000,
            tls_port: None,
            tls_only: false,
            access_address: String::new(),
            cluster_name: "osprey".to_owned(),
            node_id: String::new(),
            threads: 0,
            // Aerospike's classic proto-fd-idle-ms; clients recycle pooled sockets before it.
            idle_timeout_ms: 60_000,
            frame_read_timeout_ms: 10_000,
            frame_size_max_bytes: wire_aerospike::PROTO_BODY_SIZE_BYTES_MAX,
            connections_max: 10_000,
            connections_max_per_address: 0,
            client_memory_max: crate::limits::CLIENT_MEMORY_MAX_DEFAULT.to_owned(),
            transaction_max_ms: 1_000,
            ops_per_request_max: model::OPS_PER_COMMAND_MAX as u32,
            long_request_threads: 0,
            // Aerospike's default: it bounds the rows one request can make a connection run.
            batch_max_requests: 5_000,
            single_scan_threads: 4,
            work_directory: PathBuf::new(),
            ticker_interval_s: 10,
            microsecond_histograms: false,
            metrics_port: None,
        }
    }
}

impl Default for NamespaceSection {
    fn default() -> Self {
        let defaults = NamespaceConfig::with_defaults("test");
        NamespaceSection {
            name: defaults.name,
            default_ttl: defaults.default_ttl_seconds,
            nsup_period: defaults.nsup_period_seconds,
            allow_ttl_without_nsup: defaults.allow_ttl_without_nsup,
            max_record_size: defaults.max_record_size_bytes,
            max_bins_per_record: defaults.max_bins_per_record,
            sets: Vec::new(),
            storage_engine: StorageEngineSection::default(),
            evict_used_pct: defaults.evict_used_pct,
            evict_sys_memory_pct: defaults.evict_sys_memory_pct,
            stop_writes_sys_memory_pct: defaults.stop_writes_sys_memory_pct,
            evict_tenths_pct: defaults.evict_tenths_pct,
            replication_factor: 2,
            write_commit_level_override: CommitLevelOverride::Off,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            service: ServiceConfig::default(),
            namespaces: vec![NamespaceSection::default()],
            resp: RespConfig::default(),
            admin: AdminConfig::default(),
            cluster: ClusterConfig::default(),
            security: SecurityConfig::default(),
            tls: crate::tls::TlsConfig::default(),
            logging: crate::logging::LoggingConfig::default(),
        }
    }
}

impl NamespaceSection {
    /// The engine's view of this section.
    pub fn to_engine(&self) -> NamespaceConfig {
        NamespaceConfig {
            name: self.name.clone(),
            default_ttl_seconds: self.default_ttl,
            nsup_period_seconds: self.nsup_period,
            allow_ttl_without_nsup: self.allow_ttl_without_nsup,
            max_record_size_bytes: self.max_record_size,
            max_bins_per_record: self.max_bins_per_record,
            indexed_sets: self
                .sets
                .iter()
                .filter(|set| set.enable_index)
                .map(|set| set.name.clone())
                .collect(),
            storage: self.storage_engine.to_storage(),
            evict_used_pct: self.evict_used_pct,
            evict_sys_memory_pct: self.evict_sys_memory_pct,
            stop_writes_sys_memory_pct: self.stop_writes_sys_memory_pct,
            evict_tenths_pct: self.evict_tenths_pct,
        }
    }
}

impl RespConfig {
    /// `client-output-buffer-limit` parsed over Redis's defaults.
    ///
    /// # Errors
    /// What does not parse (the configuration is validated at load, so not after it).
    pub fn output_buffer_limits(&self) -> Result<crate::limits::OutputBufferLimits, String> {
        crate::limits::OutputBufferLimits::default()
            .parse_over(crate::limits::OUTPUT_BUFFER_LIMITS_DEFAULT)?
            .parse_over(&self.client_output_buffer_limit)
    }
}

impl ServiceConfig {
    /// `client-memory-max` in bytes on this machine; 0 = no limit.
    pub fn client_memory_max_bytes(&self) -> u64 {
        let limit = crate::limits::MemoryLimit::parse(&self.client_memory_max)
            .unwrap_or(crate::limits::MemoryLimit::Bytes(0));
        // Where the machine's memory is unknown, a share of it bounds nothing.
        limit.bytes(crate::limits::machine_memory_bytes().unwrap_or(0))
    }
}

impl Config {
    /// The namespace Redis keys live in.
    pub fn resp_namespace(&self) -> &str {
        if self.resp.namespace.is_empty() {
            self.namespaces.first().map_or("", |n| n.name.as_str())
        } else {
            &self.resp.namespace
        }
    }

    /// Loads `path` over the defaults, or the defaults alone when `path` is `None`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, and the line where the parser can tell.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            let config = Config::default();
            config.validate("defaults")?;
            return Ok(config);
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let config = Config::parse(&text).map_err(|message| ConfigError::Parse {
            path: shown.clone(),
            message,
        })?;
        config.validate(&shown)?;
        Ok(config)
    }

    /// Parses TOML text over the defaults.
    ///
    /// # Errors
    /// The parser's message (line, column, expected keys).
    pub fn parse(text: &str) -> Result<Config, String> {
        toml::from_str(text).map_err(|error| error.to_string())
    }

    /// The configuration as TOML, for `--print-config`.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|error| format!("# cannot render config: {error}"))
    }

    /// What is wrong with TLS and the ports that serve it, if anything.
    fn tls_problem(&self) -> Option<String> {
        let (service, resp) = (&self.service, &self.resp);
        for (section, tls_only, tls_port) in [
            ("service", service.tls_only, service.tls_port),
            ("resp", resp.tls_only, resp.tls_port),
        ] {
            if tls_only && tls_port.is_none() {
                return Some(format!("{section}.tls-only needs {section}.tls-port"));
            }
        }
        if !["off", "CN"].contains(&resp.tls_auth_clients_user.as_str()) {
            return Some(format!(
                "resp.tls-auth-clients-user = {:?}: \"off\" or \"CN\"",
                resp.tls_auth_clients_user
            ));
        }
        let used_by = [
            service.tls_port.map(|_| "service.tls-port"),
            resp.tls_port.map(|_| "resp.tls-port"),
            self.cluster.tls.then_some("cluster.tls"),
        ];
        let used_by = used_by.into_iter().flatten().next();
        if self.cluster.tls && self.tls.ca_file.as_os_str().is_empty() {
            return Some("cluster.tls needs tls.ca-file: the fabric's TLS is mutual".to_owned());
        }
        self.tls.problem(used_by)
    }

    fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin.to_owned(),
            message,
        };
        if self.namespaces.is_empty() {
            return Err(invalid(
                "at least one [[namespaces]] entry is required".to_owned(),
            ));
        }
        self.logging.validate().map_err(invalid)?;
        if self.service.ticker_interval_s == 0 {
            return Err(invalid(
                "service.ticker-interval-s must be at least 1".to_owned(),
            ));
        }
        if !SESSION_TTL_S_RANGE.contains(&self.security.session_ttl_s) {
            return Err(invalid(format!(
                "security.session-ttl-s = {} is outside {SESSION_TTL_S_RANGE:?}",
                self.security.session_ttl_s
            )));
        }
        for (position, section) in self.namespaces.iter().enumerate() {
            section
                .to_engine()
                .validate()
                .map_err(|reason| invalid(format!("namespaces[{position}]: {reason}")))?;
            let duplicate = self.namespaces[..position]
                .iter()
                .any(|n| n.name == section.name);
            if duplicate {
                return Err(invalid(format!(
                    "namespace {:?} is listed twice",
                    section.name
                )));
            }
            if !(1..=8).contains(&section.replication_factor) {
                return Err(invalid(format!(
                    "namespaces[{position}].replication-factor = {} is outside 1..=8",
                    section.replication_factor
                )));
            }
        }
        if let Some(problem) = self.cluster.problem() {
            return Err(invalid(problem));
        }
        if let Some(problem) = self.tls_problem() {
            return Err(invalid(problem));
        }
        let service = &self.service;
        if service.frame_size_max_bytes < wire_aerospike::MESSAGE_HEADER_SIZE_BYTES as u64
            || service.frame_size_max_bytes > wire_aerospike::PROTO_BODY_SIZE_BYTES_MAX
        {
            return Err(invalid(format!(
                "service.frame-size-max-bytes must be between {} and {}",
                wire_aerospike::MESSAGE_HEADER_SIZE_BYTES,
                wire_aerospike::PROTO_BODY_SIZE_BYTES_MAX
            )));
        }
        if service.connections_max == 0 {
            return Err(invalid(
                "service.connections-max must be positive".to_owned(),
            ));
        }
        crate::limits::MemoryLimit::parse(&service.client_memory_max).map_err(|reason| {
            invalid(format!(
                "service.client-memory-max: {reason} (a size such as \"512mb\" or a share such as \"10%\")"
            ))
        })?;
        if service.transaction_max_ms == 0 {
            return Err(invalid(
                "service.transaction-max-ms must be positive".to_owned(),
            ));
        }
        let ops_max = model::OPS_PER_COMMAND_MAX;
        if !(1..=ops_max).contains(&(service.ops_per_request_max as usize)) {
            return Err(invalid(format!(
                "service.ops-per-request-max must be between 1 and {ops_max}"
            )));
        }
        if !(1..=SCAN_THREADS_MAX).contains(&service.single_scan_threads) {
            return Err(invalid(format!(
                "service.single-scan-threads must be between 1 and {SCAN_THREADS_MAX}"
            )));
        }
        if service.batch_max_requests == 0 {
            return Err(invalid(
                "service.batch-max-requests must be positive".to_owned(),
            ));
        }
        if service.frame_read_timeout_ms == 0 {
            return Err(invalid(
                "service.frame-read-timeout-ms must be positive".to_owned(),
            ));
        }
        let durations_ms = [
            ("service.idle-timeout-ms", service.idle_timeout_ms),
            (
                "service.frame-read-timeout-ms",
                service.frame_read_timeout_ms,
            ),
            ("service.transaction-max-ms", service.transaction_max_ms),
            ("resp.timeout", self.resp.timeout.saturating_mul(1000)),
        ];
        for (name, duration_ms) in durations_ms {
            // Deadlines are instants: a longer time would overflow them.
            if duration_ms > DURATION_MAX_MS {
                return Err(invalid(format!(
                    "{name} must be at most {} days (0 where it means never)",
                    DURATION_MAX_MS / 86_400_000
                )));
            }
        }
        let bad_name = |s: &str| s.is_empty() || s.bytes().any(|b| b"\t\n;:,".contains(&b));
        if bad_name(&service.cluster_name) {
            return Err(invalid(
                "service.cluster-name must be a non-empty token".to_owned(),
            ));
        }
        let resp = &self.resp;
        let resp_namespace_known =
            resp.namespace.is_empty() || self.namespaces.iter().any(|n| n.name == resp.namespace);
        if !resp_namespace_known {
            return Err(invalid(format!(
                "resp.namespace {:?} is not a configured namespace",
                resp.namespace
            )));
        }
        if resp.maxclients == 0 {
            return Err(invalid("resp.maxclients must be positive".to_owned()));
        }
        self.resp
            .output_buffer_limits()
            .map_err(|reason| invalid(format!("resp.client-output-buffer-limit: {reason}")))?;
        if crate::resp::pubsub::notify::parse_flags(resp.notify_keyspace_events.as_bytes())
            .is_none()
        {
            return Err(invalid(format!(
                "resp.notify-keyspace-events: {}",
                crate::resp::pubsub::notify::INVALID_CLASS
            )));
        }
        if self.admin.connections_max == 0 {
            return Err(invalid("admin.connections-max must be positive".to_owned()));
        }
        if let Err(reason) = crate::resp::check_dbfilename(&resp.dbfilename) {
            return Err(invalid(format!("resp.dbfilename: {reason}")));
        }
        if resp.databases == 0 || resp.databases > crate::resp::DATABASES_MAX {
            return Err(invalid(format!(
                "resp.databases must be 1 to {}",
                crate::resp::DATABASES_MAX
            )));
        }
        // The last database's set, `<set>-<n>`, is the longest name.
        let last_set = crate::resp::database_set_name(&resp.set, resp.databases - 1);
        if resp.set.is_empty() || last_set.len() > model::SET_NAME_BYTES_MAX {
            return Err(invalid(format!(
                "resp.set must be 1 to {} bytes, with its databases' suffix (`{last_set}`)",
                model::SET_NAME_BYTES_MAX
            )));
        }
        let node_id_ok = service.node_id.is_empty()
            || (service.node_id.len() <= 16
                && service.node_id.bytes().all(|b| b.is_ascii_hexdigit()));
        if !node_id_ok {
            return Err(invalid(
                "service.node-id must be up to 16 hex digits".to_owned(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_means_the_defaults() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
    }

    #[test]
    fn a_file_overrides_only_what_it_names() {
        let config = Config::parse("[service]\nport = 4000\n").unwrap();
        assert_eq!(config.service.port, 4000);
        assert_eq!(config.service.address, "127.0.0.1");
        assert_eq!(config.namespaces, vec![NamespaceSection::default()]);
    }

    #[test]
    fn namespaces_replace_the_default_list() {
        let text = "[[namespaces]]\nname = \"a\"\ndefault-ttl = 5\n[[namespaces]]\nname = \"b\"\n";
        let config = Config::parse(text).unwrap();
        let names: Vec<_> = config.namespaces.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(config.namespaces[0].default_ttl, 5);
        assert_eq!(config.namespaces[1].nsup_period, 120);
    }

    #[test]
    fn unknown_keys_are_rejected_with_line_and_expected_keys() {
        let error = Config::parse("[service]\nport = 1\nprot = 2\n").unwrap_err();
        assert!(error.contains("line 3"), "{error}");
        assert!(error.contains("unknown field `prot`"), "{error}");
        assert!(error.contains("port"), "hint lists valid keys: {error}");
    }

    #[test]
    fn bad_values_are_rejected() {
        let error = Config::parse("[service]\nport = 70000\n").unwrap_err();
        assert!(error.contains("line 2"), "{error}");
        let config = Config::parse("[[namespaces]]\nname = \"\"\n").unwrap();
        assert!(config.validate("f").is_err());
        let twice = Config::parse("[[namespaces]]\nname = \"a\"\n[[namespaces]]\nname = \"a\"\n");
        assert!(twice.unwrap().validate("f").is_err());
    }

    #[test]
    fn max_bins_per_record_defaults_to_aerospikes_limit_and_stays_within_it() {
        let config = Config::parse("[[namespaces]]\nname = \"a\"\n").unwrap();
        assert_eq!(config.namespaces[0].to_engine().max_bins_per_record, 32_767);
        let lower = Config::parse("[[namespaces]]\nname = \"a\"\nmax-bins-per-record = 100\n");
        let lower = lower.unwrap();
        assert!(lower.validate("f").is_ok());
        assert_eq!(lower.namespaces[0].to_engine().max_bins_per_record, 100);
        for bad in [0, 32_768] {
            let text = format!("[[namespaces]]\nname = \"a\"\nmax-bins-per-record = {bad}\n");
            let error = Config::parse(&text).unwrap().validate("f").unwrap_err();
            assert!(error.to_string().contains("max-bins-per-record"), "{error}");
        }
    }

    #[test]
    fn a_device_namespace_maps_onto_storage_settings() {
        let text = "[[namespaces]]\nname = \"d\"\n[namespaces.storage-engine]\ntype = \"device\"\n\
                    files = [\"a.dat\"]\nfilesize = 8388608\ncommit-to-device = true\n";
        let config = Config::parse(text).unwrap();
        let storage = config.namespaces[0].to_engine().storage.unwrap();
        assert_eq!(storage.files, vec![PathBuf::from("a.dat")]);
        assert!(storage.commit_to_device);
        assert_eq!(storage.write_queue_blocks_max, 64);
        assert!(config.validate("f").is_ok());
    }

    #[test]
    fn bad_device_settings_name_the_setting() {
        let no_files =
            "[[namespaces]]\nname = \"d\"\n[namespaces.storage-engine]\ntype = \"device\"\n";
        let error = Config::parse(no_files).unwrap().validate("f").unwrap_err();
        assert!(error.to_string().contains("file"), "{error}");
        let odd_block = "[[namespaces]]\nname = \"d\"\n[namespaces.storage-engine]\ntype = \"device\"\n\
                         files = [\"a\"]\nfilesize = 8388608\nwrite-block-size = 100000\n";
        let error = Config::parse(odd_block).unwrap().validate("f").unwrap_err();
        assert!(error.to_string().contains("write-block-size"), "{error}");
        let typo = "[[namespaces]]\nname = \"d\"\n[namespaces.storage-engine]\ntype = \"disk\"\n";
        assert!(Config::parse(typo).unwrap_err().contains("device"));
    }

    #[test]
    fn client_limits_parse_and_bad_ones_name_the_setting() {
        let text = "[service]\nclient-memory-max = \"64mb\"\nconnections-max-per-address = 4\n\
                    [resp]\nmaxclients = 50\ntimeout = 30\n\
                    client-output-buffer-limit = \"normal 1mb 512kb 10\"\n[admin]\nport = 0\n";
        let config = Config::parse(text).unwrap();
        assert!(config.validate("f").is_ok());
        assert_eq!(config.service.client_memory_max_bytes(), 64 << 20);
        let normal = config.resp.output_buffer_limits().unwrap().normal;
        assert_eq!((normal.hard_bytes, normal.soft_seconds), (1 << 20, 10));
        let bad = |text: &str, setting: &str| {
            let error = Config::parse(text).unwrap().validate("f").unwrap_err();
            assert!(error.to_string().contains(setting), "{error}");
        };
        bad(
            "[service]\nclient-memory-max = \"lots\"\n",
            "client-memory-max",
        );
        bad(
            "[service]\nclient-memory-max = \"0%\"\n",
            "client-memory-max",
        );
        bad(
            "[service]\nops-per-request-max = 40000\n",
            "ops-per-request-max",
        );
        bad("[service]\ntransaction-max-ms = 0\n", "transaction-max-ms");
        bad("[resp]\nmaxclients = 0\n", "maxclients");
        bad(
            "[resp]\nclient-output-buffer-limit = \"normal 1\"\n",
            "client-output-buffer-limit",
        );
        bad("[admin]\nconnections-max = 0\n", "admin.connections-max");
        // "Never" written as the largest number TOML allows would overflow the deadlines.
        let never = i64::MAX;
        bad(
            &format!("[service]\ntransaction-max-ms = {never}\n"),
            "transaction-max-ms",
        );
        bad(
            &format!("[service]\nidle-timeout-ms = {never}\n"),
            "idle-timeout-ms",
        );
        bad(&format!("[resp]\ntimeout = {never}\n"), "resp.timeout");
    }

    #[test]
    fn defaults_render_as_toml_that_parses_back() {
        let config = Config::default();
        assert_eq!(Config::parse(&config.to_toml()).unwrap(), config);
    }
}
