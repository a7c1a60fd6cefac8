//! Command-line options, spelled as aerospike-benchmark spells them, and their validation into
//! a [`Plan`].

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::{ArgAction, Parser};

use crate::protocol::Protocol;
use crate::query::{QueryKind, QueryPlan};
use crate::report::OutputFormat;
use crate::runner::{Login, Plan, Target};
use crate::scan::ScanRequest;
use crate::source::KeyRange;
use crate::spec::{KeyDistribution, ObjectSpec, Workload};

/// How long a timed workload runs when `-t` is not given.
pub const DEFAULT_DURATION_S: u64 = 10;

/// Benchmark Osprey through the Aerospike protocol, or any Redis server through RESP, with the
/// same workloads. With no options: 16 threads of 50% reads and 50% updates of integer records
/// over 100,000 keys on 127.0.0.1:3000 for 10 seconds.
#[derive(Clone, Debug, Parser)]
#[command(name = "osprey-bench", version, disable_help_flag = true)]
pub struct Options {
    /// Print help (`-h` is the host, as in aerospike-benchmark).
    #[arg(long, action = ArgAction::Help)]
    help: Option<bool>,

    /// Server hosts, comma-separated `host[:port]`. Aerospike: the seeds the partition map is
    /// learned from (each command goes to its partition's master); Redis: the first only.
    #[arg(short = 'h', long, default_value = "127.0.0.1")]
    pub hosts: String,

    /// Port of hosts given without one [default: 3000 for aerospike, 6379 for redis].
    #[arg(short = 'p', long)]
    pub port: Option<u16>,

    /// Wire protocol.
    #[arg(long, value_enum, default_value_t = Protocol::Aerospike)]
    pub protocol: Protocol,

    /// RESP version for `--protocol redis`: 3 sends `HELLO 3` on each connection.
    #[arg(long = "resp", value_name = "VERSION", default_value_t = 2, value_parser = clap::value_parser!(u8).range(2..=3))]
    pub resp_version: u8,

    /// Aerospike namespace.
    #[arg(short = 'n', long, default_value = "test")]
    pub namespace: String,

    /// Aerospike set.
    #[arg(short = 's', long, default_value = "testset")]
    pub set: String,

    /// Number of keys.
    #[arg(short = 'k', long, default_value_t = 100_000)]
    pub keys: u64,

    /// First key.
    #[arg(short = 'K', long = "start-key", default_value_t = 0)]
    pub start_key: u64,

    /// Bins of each record: `I` integer, `S:<size>` string, `B:<size>` bytes, comma-separated.
    #[arg(short = 'o', long = "object-spec", default_value = "I")]
    pub object_spec: ObjectSpec,

    /// `I` insert every key in order, `RU,<read%>` reads and updates, `RR,<read%>` reads and
    /// replaces, `DB` delete every key in order.
    #[arg(short = 'w', long, default_value = "RU,50")]
    pub workload: Workload,

    /// Worker threads (synchronous mode: one connection each).
    #[arg(short = 'z', long, default_value_t = 16)]
    pub threads: usize,

    /// Seconds to run [default: 10 for RU/RR; I and DB run until every key is done].
    #[arg(short = 't', long = "duration", value_name = "SECONDS")]
    pub duration_s: Option<u64>,

    /// Target commands per second over all connections (0: as fast as possible).
    #[arg(
        short = 'g',
        long = "throughput",
        value_name = "OPS_PER_S",
        default_value_t = 0
    )]
    pub throughput_ops_per_s: u64,

    /// Keep `--max-inflight` commands in flight instead of one per thread.
    #[arg(long = "async")]
    pub async_mode: bool,

    /// With `--async`: commands in flight over all connections.
    #[arg(long = "max-inflight", default_value_t = 128)]
    pub max_inflight: usize,

    /// Commands each connection sends before reading their replies.
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,

    /// Connections [default: threads, or max-inflight / pipeline with --async].
    #[arg(long)]
    pub connections: Option<usize>,

    /// Log each connection in as this user (a server with security on): LOGIN under
    /// Aerospike, AUTH under Redis. Key-value workloads only (not --scan or --query).
    #[arg(long, requires = "password", conflicts_with_all = ["scan", "query"])]
    pub user: Option<String>,

    /// The password of --user.
    #[arg(long, requires = "user")]
    pub password: Option<String>,

    /// Per-command timeout in milliseconds (0: none).
    #[arg(
        short = 'T',
        long = "timeout",
        value_name = "MS",
        default_value_t = 1000
    )]
    pub timeout_ms: u64,

    /// Key choice of RU and RR: `uniform`, `zipf` (exponent 0.99) or `zipf:<exponent>`.
    #[arg(long = "key-distribution", default_value = "uniform")]
    pub key_distribution: KeyDistribution,

    /// Output for people (text) or machines (json lines, csv).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    /// Seed of all random choices [default: from the clock; printed at the start].
    #[arg(long)]
    pub seed: Option<u64>,

    /// The scaling test: for T = 1 to --threads, write the keys over T threads, read them
    /// back, and report write and read throughput per T.
    #[arg(long, conflicts_with = "per_connection")]
    pub scaling: bool,

    /// The per-connection test: run the workload over each connection count of
    /// --connection-counts and report throughput per connection.
    #[arg(long = "per-connection")]
    pub per_connection: bool,

    /// Connection counts of --per-connection.
    #[arg(
        long = "connection-counts",
        value_delimiter = ',',
        default_value = "1,2,4,8"
    )]
    pub connection_counts: Vec<usize>,

    /// The scan test: scan the set of -s (`-s ""`: the whole namespace) with one partition
    /// scan of all 4096 partitions, as Aerospike clients send it, and report the time from the
    /// request to the LAST message, records, records/s and MB/s per repetition and the median.
    #[arg(long, conflicts_with_all = ["scaling", "per_connection"])]
    pub scan: bool,

    /// With --scan: ask for digests and metadata only, no bin data.
    #[arg(long = "scan-no-bins")]
    pub scan_no_bins: bool,

    /// With --scan: scans to run one after the other on one connection.
    #[arg(long = "scan-repeat", value_name = "N", default_value_t = 1)]
    pub scan_repeat: u32,

    /// With --scan: the socket timeout sent to the server, and how long the client waits for
    /// the next reply bytes before it fails the scan (0: no limit).
    #[arg(
        long = "scan-socket-timeout",
        value_name = "MS",
        default_value_t = 30_000
    )]
    pub scan_socket_timeout_ms: u32,

    /// A query workload instead of the key-value one: `lookup` (index lookup against get, one
    /// connection), `range` (10 records by value: an index query, or Redis's ZRANGEBYSCORE
    /// then pipelined HGETALL) or `ordered` (10 keys in order from a random start key, over
    /// RESP: SINDEX.QUERY or ZRANGEBYLEX). Load the keys first with `-w I`.
    #[arg(long, value_enum, conflicts_with_all = ["scan", "scaling", "per_connection"])]
    pub query: Option<QueryKind>,

    /// Before a key-value run: `create` Osprey's index on `testbin` (and wait until it is
    /// built) or `drop` it, to compare indexed with unindexed writes.
    #[arg(long = "testbin-index", value_enum, value_name = "ACTION")]
    pub testbin_index: Option<IndexAction>,
}

/// What `--testbin-index` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IndexAction {
    /// Create the index (a no-op when it exists) and wait for its build.
    Create,
    /// Drop the index (a no-op when there is none).
    Drop,
}

/// What `--scan` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanPlan {
    /// The server.
    pub address: SocketAddr,
    /// The request of every repetition, but for its task id.
    pub request: ScanRequest,
    /// Scans to run.
    pub repeat: u32,
}

impl Options {
    /// The login of --user and --password (its credential computed once, here).
    fn login(&self) -> Result<Option<Login>, String> {
        let (Some(user), Some(password)) = (&self.user, &self.password) else {
            return Ok(None);
        };
        let credential = match self.protocol {
            Protocol::Aerospike => security::credential_of(password.as_bytes()),
            Protocol::Redis => String::new(),
        };
        Ok(Some(Login {
            user: user.clone(),
            password: password.clone(),
            credential,
        }))
    }

    /// Checks the options and resolves the host into a [`Plan`] for the main run.
    ///
    /// # Errors
    ///
    /// A message naming the option that is wrong.
    pub fn plan(&self, seed: u64) -> Result<Plan, String> {
        if self.keys == 0 {
            return Err("-k/--keys must be at least 1".to_owned());
        }
        if self
            .start_key
            .checked_add(self.keys)
            .is_none_or(|end| end > i64::MAX as u64)
        {
            return Err("-K/--start-key plus -k/--keys must fit in a 64-bit signed key".to_owned());
        }
        if self.threads == 0 || self.pipeline == 0 || self.max_inflight == 0 {
            return Err(
                "-z/--threads, --pipeline and --max-inflight must be at least 1".to_owned(),
            );
        }
        if self.connections == Some(0) || self.connection_counts.contains(&0) {
            return Err("connection counts must be at least 1".to_owned());
        }
        let connections = self.connections.unwrap_or(if self.async_mode {
            self.max_inflight.div_ceil(self.pipeline)
        } else {
            self.threads
        });
        let duration_s = match self.duration_s {
            Some(seconds) => Some(seconds),
            None if self.workload.is_count_based() => None,
            None => Some(DEFAULT_DURATION_S),
        };
        let address = self.address()?;
        let seeds = match self.protocol {
            Protocol::Aerospike => self.seeds()?,
            Protocol::Redis => vec![address],
        };
        Ok(Plan {
            target: Target {
                address,
                seeds,
                protocol: self.protocol,
                resp3: self.resp_version == 3,
                login: self.login()?,
            },
            namespace: self.namespace.clone(),
            set: self.set.clone(),
            object: self.object_spec.clone(),
            workload: self.workload,
            keys: KeyRange {
                start: self.start_key,
                count: self.keys,
            },
            distribution: self.key_distribution,
            threads: self.threads.min(connections),
            connections,
            pipeline: self.pipeline,
            duration: duration_s.map(Duration::from_secs),
            throughput_ops_per_s: self.throughput_ops_per_s,
            timeout: (self.timeout_ms > 0).then(|| Duration::from_millis(self.timeout_ms)),
            seed,
        })
    }

    /// Checks the options of `--scan` and resolves the host.
    ///
    /// # Errors
    ///
    /// A message naming the option that is wrong.
    pub fn scan_plan(&self, seed: u64) -> Result<ScanPlan, String> {
        if self.protocol != Protocol::Aerospike {
            return Err("--scan needs --protocol aerospike".to_owned());
        }
        if self.scan_repeat == 0 {
            return Err("--scan-repeat must be at least 1".to_owned());
        }
        Ok(ScanPlan {
            address: self.address()?,
            request: ScanRequest {
                namespace: self.namespace.clone(),
                set: self.set.clone(),
                no_bins: self.scan_no_bins,
                task_id: seed,
                socket_timeout_ms: self.scan_socket_timeout_ms,
            },
            repeat: self.scan_repeat,
        })
    }

    /// Checks the options of `--query` into a [`QueryPlan`].
    ///
    /// # Errors
    ///
    /// A message naming the option that is wrong.
    pub fn query_plan(&self, kind: QueryKind, seed: u64) -> Result<QueryPlan, String> {
        if self.keys < 10 {
            return Err("--query needs -k/--keys of at least 10".to_owned());
        }
        if self.threads == 0 || self.pipeline == 0 {
            return Err("-z/--threads and --pipeline must be at least 1".to_owned());
        }
        Ok(QueryPlan {
            kind,
            address: self.address()?,
            protocol: self.protocol,
            namespace: self.namespace.clone(),
            set: self.set.clone(),
            start_key: self.start_key,
            keys: self.keys,
            threads: self.threads,
            pipeline: self.pipeline,
            duration: Duration::from_secs(self.duration_s.unwrap_or(DEFAULT_DURATION_S)),
            seed,
        })
    }

    /// The first host, with `-p` or the protocol's port where it names none.
    pub fn address(&self) -> Result<SocketAddr, String> {
        self.resolve(self.hosts.split(',').next().unwrap_or_default())
    }

    /// Every host, in order, with `-p` or the protocol's port where one names none.
    pub fn seeds(&self) -> Result<Vec<SocketAddr>, String> {
        self.hosts
            .split(',')
            .filter(|host| !host.trim().is_empty())
            .map(|host| self.resolve(host))
            .collect()
    }

    /// One `host[:port]` of `--hosts`.
    fn resolve(&self, host: &str) -> Result<SocketAddr, String> {
        let first = host.trim();
        let port = self.port.unwrap_or(self.protocol.default_port());
        let with_port =
            if first.contains(':') && !first.starts_with('[') && first.matches(':').count() > 1 {
                // A bare IPv6 address.
                format!("[{first}]:{port}")
            } else if first
                .rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
            {
                first.to_owned()
            } else {
                format!("{first}:{port}")
            };
        with_port
            .to_socket_addrs()
            .map_err(|error| format!("-h/--hosts `{first}`: {error}"))?
            .next()
            .ok_or(format!("-h/--hosts `{first}` resolves to no address"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Options {
        let mut all = vec!["osprey-bench"];
        all.extend_from_slice(args);
        Options::try_parse_from(all).unwrap()
    }

    #[test]
    fn no_flags_gives_sensible_defaults() {
        let plan = parse(&[]).plan(1).unwrap();
        assert_eq!(plan.target.address, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(plan.target.protocol, Protocol::Aerospike);
        assert_eq!(
            (plan.namespace.as_str(), plan.set.as_str()),
            ("test", "testset")
        );
        assert_eq!(
            plan.keys,
            KeyRange {
                start: 0,
                count: 100_000
            }
        );
        assert_eq!(plan.workload, Workload::ReadUpdate { read_percent: 50 });
        assert_eq!((plan.threads, plan.connections, plan.pipeline), (16, 16, 1));
        assert_eq!(plan.duration, Some(Duration::from_secs(10)));
        assert_eq!(plan.timeout, Some(Duration::from_secs(1)));
        assert_eq!(plan.throughput_ops_per_s, 0);
        assert_eq!(plan.distribution, KeyDistribution::Uniform);
    }

    #[test]
    fn aerospike_benchmark_short_flags_parse() {
        let options = parse(&[
            "-h",
            "localhost",
            "-p",
            "3100",
            "-n",
            "bar",
            "-s",
            "demo",
            "-k",
            "500",
            "-K",
            "10",
            "-o",
            "S:100,I",
            "-w",
            "RR,80",
            "-z",
            "4",
            "-t",
            "3",
            "-g",
            "1000",
            "-T",
            "50",
        ]);
        let plan = options.plan(1).unwrap();
        assert_eq!(plan.target.address.port(), 3100);
        assert_eq!(
            (plan.namespace.as_str(), plan.set.as_str()),
            ("bar", "demo")
        );
        assert_eq!(
            plan.keys,
            KeyRange {
                start: 10,
                count: 500
            }
        );
        assert_eq!(plan.object.to_string(), "S:100,I");
        assert_eq!(plan.workload, Workload::ReadReplace { read_percent: 80 });
        assert_eq!((plan.threads, plan.connections), (4, 4));
        assert_eq!(plan.duration, Some(Duration::from_secs(3)));
        assert_eq!(plan.throughput_ops_per_s, 1000);
        assert_eq!(plan.timeout, Some(Duration::from_millis(50)));
    }

    #[test]
    fn async_mode_opens_max_inflight_over_pipeline_connections() {
        let plan = parse(&[
            "--async",
            "--max-inflight",
            "100",
            "--pipeline",
            "16",
            "-z",
            "2",
        ])
        .plan(1)
        .unwrap();
        assert_eq!((plan.threads, plan.connections, plan.pipeline), (2, 7, 16));
        let plan = parse(&["--connections", "3", "-z", "8"]).plan(1).unwrap();
        assert_eq!((plan.threads, plan.connections), (3, 3));
    }

    #[test]
    fn count_based_workloads_have_no_default_duration() {
        assert_eq!(parse(&["-w", "I"]).plan(1).unwrap().duration, None);
        assert_eq!(
            parse(&["-w", "DB", "-t", "2"]).plan(1).unwrap().duration,
            Some(Duration::from_secs(2))
        );
    }

    #[test]
    fn redis_protocol_defaults_to_port_6379_and_hosts_may_carry_ports() {
        let plan = parse(&["--protocol", "redis", "--resp", "3"])
            .plan(1)
            .unwrap();
        assert_eq!(plan.target.address.port(), 6379);
        assert!(plan.target.resp3);
        let plan = parse(&["-h", "127.0.0.1:4000, 10.0.0.1,"]).plan(1).unwrap();
        assert_eq!(plan.target.address.port(), 4000);
        let seeds: Vec<String> = plan.target.seeds.iter().map(ToString::to_string).collect();
        assert_eq!(seeds, ["127.0.0.1:4000", "10.0.0.1:3000"]);
        let plan = parse(&[
            "--protocol",
            "redis",
            "-h",
            "127.0.0.1,no.such.host.invalid",
        ])
        .plan(1)
        .unwrap();
        assert_eq!(
            plan.target.seeds,
            [plan.target.address],
            "RESP uses the first host"
        );
        let plan = parse(&["-h", "::1"]).plan(1).unwrap();
        assert_eq!(plan.target.address, "[::1]:3000".parse().unwrap());
        let options = parse(&["--per-connection", "--connection-counts", "1,3"]);
        assert_eq!(options.connection_counts, vec![1, 3]);
    }

    #[test]
    fn scan_options_make_a_scan_plan() {
        let plan = parse(&["--scan", "-n", "bar", "-s", "s100"])
            .scan_plan(7)
            .unwrap();
        assert_eq!(plan.address, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(plan.repeat, 1);
        let expected = ScanRequest {
            namespace: "bar".to_owned(),
            set: "s100".to_owned(),
            no_bins: false,
            task_id: 7,
            socket_timeout_ms: 30_000,
        };
        assert_eq!(plan.request, expected);
        let plan = parse(&[
            "--scan",
            "-s",
            "",
            "--scan-no-bins",
            "--scan-repeat",
            "5",
            "--scan-socket-timeout",
            "0",
        ])
        .scan_plan(1)
        .unwrap();
        assert_eq!(plan.request.set, "");
        assert!(plan.request.no_bins);
        assert_eq!((plan.repeat, plan.request.socket_timeout_ms), (5, 0));
        let error = parse(&["--scan", "--scan-repeat", "0"])
            .scan_plan(1)
            .unwrap_err();
        assert!(error.contains("--scan-repeat"), "{error}");
        let error = parse(&["--scan", "--protocol", "redis"])
            .scan_plan(1)
            .unwrap_err();
        assert!(error.contains("--protocol"), "{error}");
    }

    #[test]
    fn bad_values_are_refused_with_the_option_named() {
        for args in [
            &["-w", "XX"][..],
            &["-o", "S"],
            &["--protocol", "memcached"],
            &["--resp", "4"],
            &["--key-distribution", "zipf:-1"],
            &["--output", "xml"],
            &["--scaling", "--per-connection"],
            &["--scan", "--scaling"],
            &["--scan", "--per-connection"],
            &["--scan", "--scan-repeat", "-1"],
        ] {
            let mut all = vec!["osprey-bench"];
            all.extend_from_slice(args);
            assert!(Options::try_parse_from(all).is_err(), "{args:?}");
        }
        for (args, needle) in [
            (&["-k", "0"][..], "--keys"),
            (&["-z", "0"], "--threads"),
            (&["--connections", "0"], "connection counts"),
            (&["-K", "9223372036854775807", "-k", "2"], "--start-key"),
            (&["-h", "no.such.host.invalid"], "--hosts"),
        ] {
            let error = parse(args).plan(1).unwrap_err();
            assert!(error.contains(needle), "{args:?}: {error}");
        }
    }
}
