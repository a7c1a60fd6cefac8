//! The query workloads (`--query <kind>`): secondary-index reads against Redis's usual
//! substitutes, each timed per command with HDR histograms over `-t` seconds on `-z` threads
//! (one connection each).
//!
//! - `lookup` (Aerospike protocol, Osprey): on one connection, alternately a get of a random
//!   key and an index lookup (equality query on `testbin`, one record): both latencies from
//!   the same run, and their ratio.
//! - `range` (both protocols): 10 records with their bins by value. Osprey: a query of
//!   `testbin` in `[s, s + 9]`. Redis: `ZRANGEBYSCORE osprey-bench:testbin s s+9 LIMIT 0 10`,
//!   then the ten `HGETALL`s in one pipeline (two round trips).
//! - `ordered` (RESP, both servers): 10 keys in key order from a random start key, `--pipeline`
//!   commands per round trip. Osprey: `SINDEX.QUERY osprey_bench_keys [k<start> + LIMIT 0 10`
//!   over its user-key index. Redis: `ZRANGEBYLEX osprey-bench:keys [k<start> + LIMIT 0 10`.
//!
//! The records come from a normal load (`-w I -o I,...`: `testbin` holds the key's number);
//! this mode creates what it reads from when missing: Osprey's index on `testbin`, Redis's
//! sorted set by `testbin` (from the key numbers), and for `ordered` the keys `k%010d` with
//! Osprey's user-key index or Redis's sorted set of them.
//!
//! Every reply is checked: a query that returns another number of records than the keys in
//! its range fails the run, so a fast wrong answer cannot pass for a fast one.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use client::{Client, Query, QueryRange, Value};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wire_resp::Reply;

use crate::protocol::Protocol;

/// Which query workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueryKind {
    /// Index lookup against get, same connection, alternating.
    Lookup,
    /// 10 records by value range.
    Range,
    /// 10 keys in order from a random start key (RESP).
    Ordered,
}

/// The index Osprey's `lookup` and `range` read.
const BIN_INDEX: &str = "osprey_bench_testbin";
/// The user-key index of `ordered`.
const KEY_INDEX: &str = "osprey_bench_keys";
/// Redis's sorted set by `testbin`.
const REDIS_BY_VALUE: &str = "osprey-bench:testbin";
/// Redis's sorted set of the `ordered` keys.
const REDIS_KEYS: &str = "osprey-bench:keys";
/// Records (or keys) each range or ordered read returns.
const RANGE_SIZE: u64 = 10;
/// Commands per pipeline while creating data.
const LOAD_BATCH: u64 = 1000;

/// What one run does.
#[derive(Clone, Debug)]
pub struct QueryPlan {
    /// Which workload.
    pub kind: QueryKind,
    /// Server.
    pub address: SocketAddr,
    /// Protocol (`ordered` is always RESP).
    pub protocol: Protocol,
    /// Namespace and set of the Aerospike records.
    pub namespace: String,
    /// Set.
    pub set: String,
    /// Keys `start..start + count`.
    pub start_key: u64,
    /// How many keys.
    pub keys: u64,
    /// Threads (one connection each).
    pub threads: usize,
    /// Commands per round trip (`ordered` only).
    pub pipeline: usize,
    /// How long to measure.
    pub duration: Duration,
    /// Seed of the random start keys.
    pub seed: u64,
}

/// Latencies of one kind of command.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Measured {
    /// What was timed.
    pub name: &'static str,
    /// Commands completed.
    pub commands: u64,
    /// Per second over the run.
    pub per_second: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
}

/// Runs `plan`; returns one [`Measured`] per kind of command timed.
///
/// # Errors
/// A message when a server cannot be reached, refuses a command, or answers wrongly.
pub fn run(plan: &QueryPlan, stop: &Arc<AtomicBool>) -> Result<Vec<Measured>, String> {
    match (plan.kind, plan.protocol) {
        (QueryKind::Lookup, Protocol::Aerospike) => lookup(plan, stop),
        (QueryKind::Lookup, Protocol::Redis) => {
            Err("--query lookup speaks the Aerospike protocol".to_owned())
        }
        (QueryKind::Range, Protocol::Aerospike) => {
            prepare_bin_index(plan)?;
            let name = "range";
            threads(plan, stop, name, |mut rng| {
                let mut client = connect(plan.address)?;
                Ok(move || aerospike_range(plan, &mut client, &mut rng))
            })
        }
        (QueryKind::Range, Protocol::Redis) => {
            prepare_redis_by_value(plan)?;
            threads(plan, stop, "range", |mut rng| {
                let mut connection = Resp::connect(plan.address)?;
                Ok(move || redis_range(plan, &mut connection, &mut rng))
            })
        }
        (QueryKind::Ordered, _) => {
            let osprey = prepare_ordered(plan)?;
            threads(plan, stop, "ordered", |mut rng| {
                let mut connection = Resp::connect(plan.address)?;
                Ok(move || ordered(plan, &mut connection, osprey, &mut rng))
            })
        }
    }
}

fn connect(address: SocketAddr) -> Result<Client, String> {
    Client::connect(address).map_err(|error| format!("{address}: {error}"))
}

/// Index lookups and gets, alternating on one connection.
fn lookup(plan: &QueryPlan, stop: &Arc<AtomicBool>) -> Result<Vec<Measured>, String> {
    prepare_bin_index(plan)?;
    let mut client = connect(plan.address)?;
    let mut rng = SmallRng::seed_from_u64(plan.seed);
    let (mut gets, mut lookups) = (histogram(), histogram());
    let started = Instant::now();
    while started.elapsed() < plan.duration && !stop.load(Ordering::Relaxed) {
        let key = plan.start_key + rng.random_range(0..plan.keys);
        let begin = Instant::now();
        let record = client
            .get(&plan.namespace, &plan.set, &Value::Int(as_i64(key)))
            .map_err(|error| format!("get: {error}"))?;
        record_us(&mut gets, begin);
        if record.is_none() {
            return Err(format!("key {key} is missing: load the keys first (-w I)"));
        }
        let value = as_i64(plan.start_key + rng.random_range(0..plan.keys));
        let range = QueryRange::Int {
            begin: value,
            end: value,
        };
        let query = Query {
            short: true,
            ..Query::new(&plan.namespace, &plan.set, "testbin", range)
        };
        let begin = Instant::now();
        let found = client
            .query(&query)
            .map_err(|error| format!("lookup: {error}"))?;
        record_us(&mut lookups, begin);
        expect_count("lookup", found.len() as u64, 1)?;
    }
    let elapsed = started.elapsed();
    Ok(vec![
        measured("get", &gets, elapsed),
        measured("lookup", &lookups, elapsed),
    ])
}

fn aerospike_range(
    plan: &QueryPlan,
    client: &mut Client,
    rng: &mut SmallRng,
) -> Result<(), String> {
    let begin = as_i64(plan.start_key + rng.random_range(0..plan.keys - RANGE_SIZE + 1));
    let range = QueryRange::Int {
        begin,
        end: begin + as_i64(RANGE_SIZE) - 1,
    };
    let query = Query {
        short: true,
        ..Query::new(&plan.namespace, &plan.set, "testbin", range)
    };
    let found = client
        .query(&query)
        .map_err(|error| format!("range query: {error}"))?;
    expect_count("range query", found.len() as u64, RANGE_SIZE)
}

fn redis_range(plan: &QueryPlan, connection: &mut Resp, rng: &mut SmallRng) -> Result<(), String> {
    let begin = plan.start_key + rng.random_range(0..plan.keys - RANGE_SIZE + 1);
    let end = (begin + RANGE_SIZE - 1).to_string();
    let begin = begin.to_string();
    let count = RANGE_SIZE.to_string();
    connection.send(&[
        "ZRANGEBYSCORE",
        REDIS_BY_VALUE,
        &begin,
        &end,
        "LIMIT",
        "0",
        &count,
    ]);
    let members = connection.read_array()?;
    expect_count("ZRANGEBYSCORE", members.len() as u64, RANGE_SIZE)?;
    for member in &members {
        connection.send(&["HGETALL", member]);
    }
    for _ in &members {
        let fields = connection.read_array()?;
        if fields.is_empty() {
            return Err("HGETALL found no hash: load the keys first (-w I -o I,...)".to_owned());
        }
    }
    Ok(())
}

fn ordered(
    plan: &QueryPlan,
    connection: &mut Resp,
    osprey: bool,
    rng: &mut SmallRng,
) -> Result<(), String> {
    let count = RANGE_SIZE.to_string();
    for _ in 0..plan.pipeline {
        let start = plan.start_key + rng.random_range(0..plan.keys - RANGE_SIZE + 1);
        let start = format!("[{}", ordered_key(start));
        if osprey {
            connection.send(&["SINDEX.QUERY", KEY_INDEX, &start, "+", "LIMIT", "0", &count]);
        } else {
            connection.send(&["ZRANGEBYLEX", REDIS_KEYS, &start, "+", "LIMIT", "0", &count]);
        }
    }
    for _ in 0..plan.pipeline {
        let keys = connection.read_array()?;
        expect_count("ordered read", keys.len() as u64, RANGE_SIZE)?;
    }
    Ok(())
}

/// The key of number `n` in the `ordered` workload: zero-padded, so key order is number order.
fn ordered_key(number: u64) -> String {
    format!("k{number:010}")
}

/// Runs, on every thread, the operation `make` builds (given the thread's random generator)
/// until the duration ends; each call's time is recorded once per command it sent (a pipeline
/// of P commands records P samples of its round trip).
fn threads<F, O>(
    plan: &QueryPlan,
    stop: &Arc<AtomicBool>,
    name: &'static str,
    make: F,
) -> Result<Vec<Measured>, String>
where
    F: Fn(SmallRng) -> Result<O, String> + Sync,
    O: FnMut() -> Result<(), String>,
{
    let per_call = match plan.kind {
        QueryKind::Ordered => plan.pipeline as u64,
        _ => 1,
    };
    let started = Instant::now();
    let results: Vec<Result<Histogram<u64>, String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..plan.threads)
            .map(|thread| {
                let make = &make;
                scope.spawn(move || {
                    let rng = SmallRng::seed_from_u64(plan.seed.wrapping_add(thread as u64));
                    let mut histogram = histogram();
                    let mut operation = make(rng)?;
                    while started.elapsed() < plan.duration && !stop.load(Ordering::Relaxed) {
                        let begin = Instant::now();
                        operation()?;
                        let us = elapsed_us(begin);
                        histogram
                            .record_n(us, per_call)
                            .map_err(|error| error.to_string())?;
                    }
                    Ok(histogram)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|_| Err("a thread panicked".to_owned()))
            })
            .collect()
    });
    let elapsed = started.elapsed();
    let mut total = histogram();
    for result in results {
        total.add(result?).map_err(|error| error.to_string())?;
    }
    Ok(vec![measured(name, &total, elapsed)])
}

/// `--testbin-index`: creates Osprey's index on `testbin` (and waits for its build) or drops
/// it.
///
/// # Errors
/// A message when the server cannot be reached or refuses.
pub fn testbin_index(
    address: SocketAddr,
    namespace: &str,
    set: &str,
    action: crate::options::IndexAction,
) -> Result<(), String> {
    match action {
        crate::options::IndexAction::Create => create_bin_index(address, namespace, set),
        crate::options::IndexAction::Drop => {
            let mut client = connect(address)?;
            let drop = format!("sindex-delete:namespace={namespace};indexname={BIN_INDEX}");
            let answer = client.info(&drop).map_err(|e| e.to_string())?;
            if answer == "ok" {
                Ok(())
            } else {
                Err(format!("{drop}: {answer}"))
            }
        }
    }
}

fn prepare_bin_index(plan: &QueryPlan) -> Result<(), String> {
    create_bin_index(plan.address, &plan.namespace, &plan.set)
}

/// Creates Osprey's index on `testbin` unless it exists, and waits until it is built.
fn create_bin_index(address: SocketAddr, namespace: &str, set: &str) -> Result<(), String> {
    let mut client = connect(address)?;
    let create = format!(
        "sindex-create:namespace={namespace};set={set};indexname={BIN_INDEX};bin=testbin;\
         type=numeric"
    );
    let answer = client.info(&create).map_err(|e| e.to_string())?;
    if answer != "ok" {
        return Err(format!("{create}: {answer}"));
    }
    let stats = format!("sindex/{namespace}/{BIN_INDEX}");
    wait_until(|| {
        let answer = client.info(&stats).map_err(|e| e.to_string())?;
        Ok(answer.contains("load_pct=100"))
    })
}

/// Creates Redis's sorted set by `testbin` (score = member = the key's number) unless it holds
/// every key.
fn prepare_redis_by_value(plan: &QueryPlan) -> Result<(), String> {
    let mut connection = Resp::connect(plan.address)?;
    connection.send(&["ZCARD", REDIS_BY_VALUE]);
    if connection.read_integer()? == plan.keys as i64 {
        return Ok(());
    }
    load(&mut connection, plan, |n| {
        let text = n.to_string();
        vec![
            "ZADD".to_owned(),
            REDIS_BY_VALUE.to_owned(),
            text.clone(),
            text,
        ]
    })
}

/// Loads the `ordered` keys (and Redis's sorted set of them, or Osprey's user-key index);
/// returns whether the server is Osprey.
fn prepare_ordered(plan: &QueryPlan) -> Result<bool, String> {
    let mut connection = Resp::connect(plan.address)?;
    connection.send(&["SINDEX.LIST"]);
    let osprey = connection.read_reply()?.is_ok();
    connection.send(&["EXISTS", &ordered_key(plan.start_key + plan.keys - 1)]);
    if connection.read_integer()? == 0 {
        load(&mut connection, plan, |n| {
            vec!["SET".to_owned(), ordered_key(n), "v".repeat(100)]
        })?;
    }
    if osprey {
        connection.send(&["SINDEX.CREATE", KEY_INDEX, "KEY", "STRING"]);
        connection
            .read_reply()?
            .map_err(|error| format!("SINDEX.CREATE: {error}"))?;
        let probe = ["SINDEX.QUERY", KEY_INDEX, "-", "+", "LIMIT", "0", "0"];
        wait_until(|| {
            connection.send(&probe);
            Ok(connection.read_reply()?.is_ok())
        })?;
        return Ok(true);
    }
    connection.send(&["ZCARD", REDIS_KEYS]);
    if connection.read_integer()? != plan.keys as i64 {
        load(&mut connection, plan, |n| {
            vec![
                "ZADD".to_owned(),
                REDIS_KEYS.to_owned(),
                "0".to_owned(),
                ordered_key(n),
            ]
        })?;
    }
    Ok(false)
}

/// Sends `command(n)` for every key number, pipelined in batches.
fn load(
    connection: &mut Resp,
    plan: &QueryPlan,
    command: impl Fn(u64) -> Vec<String>,
) -> Result<(), String> {
    let end = plan.start_key + plan.keys;
    let mut next = plan.start_key;
    while next < end {
        let batch_end = (next + LOAD_BATCH).min(end);
        for n in next..batch_end {
            let args = command(n);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            connection.send(&args);
        }
        for _ in next..batch_end {
            connection
                .read_reply()?
                .map_err(|error| format!("loading: {error}"))?;
        }
        next = batch_end;
    }
    Ok(())
}

fn wait_until(mut ready: impl FnMut() -> Result<bool, String>) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(600);
    while !ready()? {
        if Instant::now() > deadline {
            return Err("the index was not built within 10 minutes".to_owned());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn expect_count(what: &str, got: u64, wanted: u64) -> Result<(), String> {
    if got == wanted {
        Ok(())
    } else {
        Err(format!(
            "{what} returned {got} records where {wanted} were expected: load the keys first \
             (-w I over the same -k/-K)"
        ))
    }
}

fn as_i64(number: u64) -> i64 {
    i64::try_from(number).unwrap_or(i64::MAX)
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

fn elapsed_us(begin: Instant) -> u64 {
    u64::try_from(begin.elapsed().as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

fn record_us(histogram: &mut Histogram<u64>, begin: Instant) {
    histogram.saturating_record(elapsed_us(begin));
}

fn measured(name: &'static str, histogram: &Histogram<u64>, elapsed: Duration) -> Measured {
    Measured {
        name,
        commands: histogram.len(),
        per_second: histogram.len() as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE),
        p50_us: histogram.value_at_quantile(0.5) as f64,
        p99_us: histogram.value_at_quantile(0.99) as f64,
    }
}

/// A blocking RESP connection: commands out, replies in, in order.
struct Resp {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    /// Bytes read and not yet decoded.
    pending: Vec<u8>,
    out: Vec<u8>,
}

impl Resp {
    fn connect(address: SocketAddr) -> Result<Resp, String> {
        let stream = TcpStream::connect(address).map_err(|error| format!("{address}: {error}"))?;
        stream
            .set_nodelay(true)
            .map_err(|error| error.to_string())?;
        let reader = stream.try_clone().map_err(|error| error.to_string())?;
        Ok(Resp {
            writer: stream,
            reader: BufReader::new(reader),
            pending: Vec::new(),
            out: Vec::new(),
        })
    }

    /// Queues a command; it goes out with the next read.
    fn send(&mut self, args: &[&str]) {
        self.out
            .extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in args {
            self.out
                .extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
        }
    }

    /// The next reply: `Ok` with its bulk strings (an array's elements, or one bulk string or
    /// integer as text), or `Err` with a Redis error's text.
    fn read_reply(&mut self) -> Result<Result<Vec<String>, String>, String> {
        if !self.out.is_empty() {
            self.writer
                .write_all(&self.out)
                .map_err(|error| error.to_string())?;
            self.out.clear();
        }
        loop {
            match wire_resp::decode_reply(&self.pending) {
                Ok(Some((reply, size))) => {
                    let decoded = flatten(&reply, &self.pending[..size]);
                    self.pending.drain(..size);
                    return Ok(decoded);
                }
                Ok(None) => {}
                Err(error) => return Err(format!("malformed reply: {error}")),
            }
            let available = self.reader.fill_buf().map_err(|error| error.to_string())?;
            if available.is_empty() {
                return Err("the server closed the connection".to_owned());
            }
            self.pending.extend_from_slice(available);
            let consumed = available.len();
            self.reader.consume(consumed);
        }
    }

    fn read_array(&mut self) -> Result<Vec<String>, String> {
        self.read_reply()?
    }

    fn read_integer(&mut self) -> Result<i64, String> {
        let reply = self.read_reply()??;
        reply
            .first()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| "expected an integer reply".to_owned())
    }
}

/// A reply's strings (see [`Resp::read_reply`]); `bytes` is the whole reply, which the
/// decoder checked complete, so each element of a flat array decodes on its own.
fn flatten(reply: &Reply<'_>, bytes: &[u8]) -> Result<Vec<String>, String> {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match reply {
        Reply::Error(message) => Err(text(message)),
        Reply::Aggregate { element_count, .. } => {
            let header_end = bytes
                .windows(2)
                .position(|pair| pair == b"\r\n")
                .map_or(bytes.len(), |position| position + 2);
            let mut rest = &bytes[header_end..];
            let mut items = Vec::with_capacity((*element_count).min(1024));
            while let Ok(Some((item, size))) = wire_resp::decode_reply(rest) {
                items.push(flatten(&item, &rest[..size])?.concat());
                rest = &rest[size..];
            }
            Ok(items)
        }
        Reply::Bulk(value) | Reply::Simple(value) | Reply::Number(value) => Ok(vec![text(value)]),
        Reply::Integer(value) => Ok(vec![value.to_string()]),
        Reply::Null | Reply::Boolean(_) => Ok(Vec::new()),
    }
}
