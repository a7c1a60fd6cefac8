//! `cargo xtask local-cluster --nodes N`: N `osprey` nodes on 127.0.0.1 that form one cluster.
//!
//! Node i serves Aerospike clients on port 3000 + i and Redis clients on 6379 + i; its fabric
//! listens on 3100 + i and its admin port on 3200 + i. Each node gets a fresh directory under
//! `<target>/local-cluster/node<i>` (its configuration, log and metadata store). The task builds
//! the release binary, starts the nodes, waits until every node reports a stable cluster of N
//! (`cluster-stable:size=N`), prints `cluster ready`, and stops them all (SIGTERM, then waits)
//! on Ctrl-C or SIGTERM.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

const SERVICE_PORT_BASE: u16 = 3000;
const RESP_PORT_BASE: u16 = 6379;
const FABRIC_PORT_BASE: u16 = 3100;
const ADMIN_PORT_BASE: u16 = 3200;
/// How long the nodes may take to form one cluster.
const FORM_TIMEOUT: Duration = Duration::from_secs(60);
const NODES_MAX: u16 = 64;

/// Runs the task with its arguments (`--nodes N`, default 3).
pub fn run(args: &[String], root: &Path, target_dir: &Path) -> Result<(), String> {
    let nodes = parse_nodes(args)?;
    super::run("cargo", &["build", "--release", "-p", "server"])?;
    let binary = target_dir.join("release/osprey");
    let base = target_dir.join("local-cluster");
    if base.exists() {
        std::fs::remove_dir_all(&base)
            .map_err(|error| format!("cannot clear {}: {error}", base.display()))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (wake, woken) = mpsc::channel::<()>();
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || {
        flag.store(true, Ordering::SeqCst);
        let _ = wake.send(());
    })
    .map_err(|error| format!("cannot handle Ctrl-C: {error}"))?;
    let mut children = Vec::new();
    for index in 0..nodes {
        children.push(start_node(&binary, &base, index, nodes, root)?);
    }
    let outcome = wait_ready(nodes, &stop).map(|elapsed| {
        print_ready(nodes, elapsed, &base);
        // Sleeps until Ctrl-C or SIGTERM.
        let _ = woken.recv();
    });
    stop_all(&mut children);
    outcome
}

fn parse_nodes(args: &[String]) -> Result<u16, String> {
    match args {
        [] => Ok(3),
        [flag, count] if flag == "--nodes" => match count.parse::<u16>() {
            Ok(n) if (1..=NODES_MAX).contains(&n) => Ok(n),
            _ => Err(format!("--nodes {count}: a number from 1 to {NODES_MAX}")),
        },
        _ => Err("usage: cargo xtask local-cluster [--nodes N]".to_owned()),
    }
}

fn config_of(index: u16, nodes: u16, dir: &Path) -> String {
    let seeds: Vec<String> = (0..nodes)
        .map(|i| format!("\"127.0.0.1:{}\"", FABRIC_PORT_BASE + i))
        .collect();
    format!(
        "[service]\nport = {service}\n\n[resp]\nport = {resp}\n\n[admin]\nport = {admin}\n\n\
         [cluster]\nnode-id = \"{id:X}\"\nfabric-port = {fabric}\nseeds = [{seeds}]\n\
         metadata-dir = \"{metadata}\"\n",
        service = SERVICE_PORT_BASE + index,
        resp = RESP_PORT_BASE + index,
        admin = ADMIN_PORT_BASE + index,
        id = 0xA0 + u32::from(index),
        fabric = FABRIC_PORT_BASE + index,
        seeds = seeds.join(", "),
        metadata = dir.join("metadata").display(),
    )
}

fn start_node(
    binary: &Path,
    base: &Path,
    index: u16,
    nodes: u16,
    root: &Path,
) -> Result<Child, String> {
    let dir = base.join(format!("node{index}"));
    std::fs::create_dir_all(&dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    let config = dir.join("osprey.toml");
    std::fs::write(&config, config_of(index, nodes, &dir))
        .map_err(|error| format!("cannot write {}: {error}", config.display()))?;
    let log = std::fs::File::create(dir.join("osprey.log"))
        .map_err(|error| format!("cannot create the log of node {index}: {error}"))?;
    Command::new(binary)
        .arg("--config")
        .arg(&config)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|error| format!("cannot start {}: {error}", binary.display()))
}

/// Waits until every node answers `cluster-stable:size=N` with a cluster key.
fn wait_ready(nodes: u16, stop: &AtomicBool) -> Result<Duration, String> {
    let started = Instant::now();
    while started.elapsed() < FORM_TIMEOUT {
        if stop.load(Ordering::SeqCst) {
            return Err("stopped before the cluster formed".to_owned());
        }
        let stable = (0..nodes).all(|index| {
            info(
                SERVICE_PORT_BASE + index,
                &format!("cluster-stable:size={nodes}"),
            )
            .is_some_and(|reply| !reply.is_empty() && !reply.starts_with("ERROR"))
        });
        if stable {
            return Ok(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "the nodes did not form one cluster within {} s; see their logs",
        FORM_TIMEOUT.as_secs()
    ))
}

/// One info command's value from the node on `port`, if it answers.
fn info(port: u16, command: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let body = format!("{command}\n");
    let header = (2u64 << 56) | (1u64 << 48) | body.len() as u64;
    stream.write_all(&header.to_be_bytes()).ok()?;
    stream.write_all(body.as_bytes()).ok()?;
    let mut header = [0u8; 8];
    stream.read_exact(&mut header).ok()?;
    let size = (u64::from_be_bytes(header) & 0xFFFF_FFFF_FFFF).min(1 << 20) as usize;
    let mut reply = vec![0u8; size];
    stream.read_exact(&mut reply).ok()?;
    let text = String::from_utf8_lossy(&reply);
    let value = text.trim_end().split_once('\t')?.1.to_owned();
    Some(value)
}

fn print_ready(nodes: u16, elapsed: Duration, base: &Path) {
    println!(
        "cluster ready: {nodes} nodes formed in {:.1} s",
        elapsed.as_secs_f64()
    );
    for index in 0..nodes {
        println!(
            "  node {:X}: aerospike 127.0.0.1:{}, redis 127.0.0.1:{}, fabric {}, admin {}, dir {}",
            0xA0 + u32::from(index),
            SERVICE_PORT_BASE + index,
            RESP_PORT_BASE + index,
            FABRIC_PORT_BASE + index,
            ADMIN_PORT_BASE + index,
            base.join(format!("node{index}")).display()
        );
    }
    println!("Ctrl-C stops every node.");
}

/// SIGTERM to every node, then waits for each (a node that will not stop is killed).
fn stop_all(children: &mut [Child]) {
    for child in children.iter() {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    for child in children.iter_mut() {
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !matches!(child.try_wait(), Ok(Some(_))) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    eprintln!("every node stopped");
}
