//! The Rust client against the real `osprey` binary on a free port: puts and gets, a numeric
//! range query in index order with a limit, a string range, and a user-key index read in key
//! order from any start key.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use client::{Client, ClientError, Query, QueryRange, Record, Value};

/// The server process; killed when dropped.
struct Server {
    child: Child,
    port: u16,
    directory: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

fn start_server() -> Server {
    let directory = std::env::temp_dir().join(format!("osprey-client-test-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("a temporary directory");
    let config = directory.join("osprey.toml");
    std::fs::write(
        &config,
        "[service]\naddress = \"127.0.0.1\"\nport = 0\n\n[resp]\nport = 0\n\n\
         [[namespaces]]\nname = \"test\"\n",
    )
    .expect("config written");
    let mut child = Command::new(env!("CARGO_BIN_EXE_osprey"))
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

fn wait_built(client: &mut Client, index: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !client
        .info(&format!("sindex/test/{index}"))
        .expect("stats")
        .contains("load_pct=100")
    {
        assert!(Instant::now() < deadline, "index {index} never built");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn keys(records: &[Record]) -> Vec<Value> {
    records
        .iter()
        .map(|record| record.key.clone().expect("keys are stored"))
        .collect()
}

#[test]
fn the_client_puts_gets_and_queries_in_index_order() {
    let server = start_server();
    let mut client = Client::connect(("127.0.0.1", server.port)).expect("connects");
    for i in 0..100i64 {
        let key = Value::Str(format!("user:{i:03}"));
        let bins = [
            ("age", Value::Int(i % 25)),
            ("name", Value::Str(format!("n{i}"))),
        ];
        client.put("test", "people", &key, &bins).expect("put");
    }
    let record = client
        .get("test", "people", &Value::from("user:042"))
        .expect("get")
        .expect("found");
    assert_eq!(record.bins[0], ("age".to_owned(), Value::Int(17)));
    let missing = client.get("test", "people", &Value::from("nobody"));
    assert_eq!(missing.expect("get"), None);

    for create in [
        "sindex-create:namespace=test;set=people;indexname=by_age;bin=age;type=numeric",
        "sindex-create:namespace=test;set=people;indexname=by_key;source=key;type=string",
    ] {
        assert_eq!(client.info(create).expect("info"), "ok");
    }
    wait_built(&mut client, "by_age");
    wait_built(&mut client, "by_key");

    // Ages 3..=4 in index order; a limit keeps the smallest.
    let range = QueryRange::Int { begin: 3, end: 4 };
    let query = Query::new("test", "people", "age", range);
    let found = client.query(&query).expect("query");
    let ages: Vec<&Value> = found.iter().map(|r| &r.bins[0].1).collect();
    let expected_ages: Vec<&Value> = [&Value::Int(3); 4]
        .into_iter()
        .chain([&Value::Int(4); 4])
        .collect();
    assert_eq!(ages, expected_ages);
    let limited = Query {
        max_records: 5,
        ..query
    };
    assert_eq!(client.query(&limited).expect("query")[..], found[..5]);

    // The user-key index: ten keys in order from any start key, and a closed string range.
    let from = |start: &str, count: u64| Query {
        index_name: Some("by_key"),
        max_records: count,
        no_bins: true,
        ..Query::new("test", "people", "", QueryRange::from(start))
    };
    let expected: Vec<Value> = (50..60)
        .map(|i| Value::Str(format!("user:{i:03}")))
        .collect();
    let mut read =
        |start: &str, count: u64| keys(&client.query(&from(start, count)).expect("query"));
    assert_eq!(read("user:05", 10), expected);
    assert_eq!(read("user:050", 10), expected);
    assert!(read("user:1", 10).is_empty());
    assert_eq!(read("", 0).len(), 100);
    let closed = Query {
        index_name: Some("by_key"),
        ..Query::new(
            "test",
            "people",
            "",
            QueryRange::Str {
                begin: "user:010".to_owned(),
                end: Some("user:012".to_owned()),
            },
        )
    };
    let closed = client.query(&closed).expect("query");
    let expected = ["user:010", "user:011", "user:012"].map(Value::from);
    assert_eq!(keys(&closed), expected);
    assert_eq!(closed[0].bins.len(), 2, "bins come with the records");

    // Errors keep their result codes, and the connection stays usable.
    let no_index = Query::new(
        "test",
        "people",
        "height",
        QueryRange::Int { begin: 0, end: 1 },
    );
    assert!(matches!(
        client.query(&no_index),
        Err(ClientError::ResultCode(201))
    ));
    let again = client.get("test", "people", &Value::from("user:000"));
    assert!(again.expect("get").is_some());
}
