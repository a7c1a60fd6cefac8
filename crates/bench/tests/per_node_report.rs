//! `osprey-bench` against a real single `osprey` on free ports. A server that is not clustered
//! answers as a one-node cluster (no peers, every partition mastered by itself), so the tool
//! must learn one node, route every command to it, and report that node by the id its `node`
//! info command gives, with every request and no key without a master.
//!
//! The server binary is found as the black-box suite finds it: `OSPREY_BIN`, else `osprey` in
//! this test's own target folder (built by `cargo build -p server`, and by a workspace
//! `cargo test`); without one the test fails and says how to build it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The server process and its folder; killed and removed when dropped.
struct Server {
    child: Child,
    port: u16,
    directory: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// `OSPREY_BIN`, else `<target>/<profile>/osprey` beside `<target>/<profile>/deps/<this test>`.
fn osprey_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("OSPREY_BIN") {
        return Some(PathBuf::from(path));
    }
    let test = std::env::current_exe().ok()?;
    let binary = test.parent()?.parent()?.join("osprey");
    binary.exists().then_some(binary)
}

fn start_server(binary: &PathBuf) -> Server {
    let directory = std::env::temp_dir().join(format!("osprey-bench-test-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("a temporary directory");
    let config = directory.join("osprey.toml");
    std::fs::write(
        &config,
        "[service]\naddress = \"127.0.0.1\"\nport = 0\n\n[resp]\nport = 0\n\n\
         [[namespaces]]\nname = \"test\"\n",
    )
    .expect("config written");
    let mut child = Command::new(binary)
        .arg("--config")
        .arg(&config)
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("osprey starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let port = ready_port(BufReader::new(stderr));
    Server {
        child,
        port,
        directory,
    }
}

/// The service port from the `osprey ready ... service=127.0.0.1:<port>` line. The log keeps
/// being drained afterwards, so the server never blocks on a full pipe.
fn ready_port(log: impl BufRead + Send + 'static) -> u16 {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in log.lines().map_while(Result::ok) {
            if line.contains("osprey ready") {
                let _ = sender.send(service_port(&line));
            }
        }
    });
    receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("osprey logs that it is ready")
        .expect("the ready line names the service port")
}

fn service_port(line: &str) -> Option<u16> {
    let address = line.split("service=").nth(1)?.trim_start_matches('"');
    let port = address.split(':').nth(1)?;
    port.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Runs osprey-bench against the server with `args`; returns its stdout.
fn bench(server: &Server, args: &[&str]) -> String {
    let port = server.port.to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_osprey-bench"))
        .args(["-h", "127.0.0.1", "-p", &port])
        .args(args)
        .output()
        .expect("osprey-bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "osprey-bench {args:?} failed:\n{stderr}"
    );
    assert!(stderr.is_empty(), "no warning expected:\n{stderr}");
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

#[test]
fn the_per_node_report_names_the_single_node_with_every_request() {
    let binary = osprey_binary().expect(
        "an osprey binary: run the workspace's tests, `cargo build -p server`, or set OSPREY_BIN",
    );
    let server = start_server(&binary);
    let mut client = client::Client::connect(("127.0.0.1", server.port)).expect("connects");
    let node_id = client.info("node").expect("the node answers its id");

    let stdout = bench(
        &server,
        &["-w", "I", "-k", "2000", "-z", "2", "--output", "json"],
    );
    let summary: Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["type"] == "summary")
        .expect("a summary line");
    assert_eq!(summary["total_count"], 2000);
    assert_eq!(summary["keys_without_master"], 0);
    let nodes = summary["nodes"].as_array().expect("a nodes array");
    assert_eq!(nodes.len(), 1, "{summary}");
    assert_eq!(nodes[0]["node_id"], Value::String(node_id.clone()));
    assert_eq!(nodes[0]["address"], format!("127.0.0.1:{}", server.port));
    assert_eq!(nodes[0]["requests"], 2000);

    let text = bench(
        &server,
        &["-w", "RU,50", "-k", "2000", "-z", "2", "-t", "1"],
    );
    let node_line = text
        .lines()
        .find(|line| line.starts_with(&node_id))
        .unwrap_or_else(|| panic!("a line for node {node_id}:\n{text}"));
    assert!(node_line.trim_end().ends_with("100.0%"), "{node_line}");
    assert!(text.contains("keys without a known master: 0"), "{text}");
}
