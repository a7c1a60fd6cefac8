//! `ClusterMap` against nodes that answer info commands from a table: learning a cluster from
//! one seed through its peer list, a node that answers garbage, a seed that refuses
//! connections, and refreshes that reload only what changed. The nodes are info responders
//! only (no records): they test the client's tend, not a clustered server.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use client::{ClusterError, ClusterMap};
use model::{NodeId, PartitionId};
use wire_aerospike::cluster_map::{NamespaceClaims, PartitionBitmap, format_replicas};

/// A node that answers each info command from its table, and counts the commands it got.
#[derive(Clone)]
struct InfoNode {
    address: SocketAddr,
    answers: Arc<Mutex<HashMap<String, String>>>,
    asked: Arc<Mutex<HashMap<String, u32>>>,
}

impl InfoNode {
    fn start(node_id: NodeId) -> InfoNode {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let node = InfoNode {
            address: listener.local_addr().expect("address"),
            answers: Arc::default(),
            asked: Arc::default(),
        };
        node.set("node", &node_id.to_string());
        node.set("peers-generation", "1");
        node.set("peers-clear-std", "1,3000,[]");
        node.set("partition-generation", "1");
        let serving = node.clone();
        thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let connection = serving.clone();
                thread::spawn(move || connection.serve(stream));
            }
        });
        node
    }

    fn set(&self, command: &str, value: &str) {
        let mut answers = self.answers.lock().expect("answers");
        answers.insert(command.to_owned(), value.to_owned());
    }

    fn asked(&self, command: &str) -> u32 {
        let asked = self.asked.lock().expect("asked");
        asked.get(command).copied().unwrap_or(0)
    }

    /// Claims `master` in column 0 and `replica` in column 1 of namespace `test`.
    fn claim(&self, generation: u32, master: &[u16], replica: &[u16]) {
        let claims = NamespaceClaims {
            name: "test".to_owned(),
            regime: 0,
            columns: vec![bitmap_of(master), bitmap_of(replica)],
        };
        self.set("replicas", &format_replicas(&[claims], None));
        self.set("partition-generation", &generation.to_string());
    }

    /// Lists `peers` (their ids and addresses) under `generation`.
    fn list_peers(&self, generation: u32, peers: &[(NodeId, SocketAddr)]) {
        let listed: Vec<String> = peers
            .iter()
            .map(|(node_id, address)| format!("[{node_id},,[{address}]]"))
            .collect();
        let reply = format!("{generation},3000,[{}]", listed.join(","));
        self.set("peers-clear-std", &reply);
        self.set("peers-generation", &generation.to_string());
    }

    /// Answers info requests until the client hangs up.
    fn serve(&self, mut stream: TcpStream) {
        let mut header = [0u8; 8];
        while stream.read_exact(&mut header).is_ok() {
            let mut size = [0u8; 8];
            size[2..].copy_from_slice(&header[2..]);
            let mut body = vec![0u8; u64::from_be_bytes(size) as usize];
            if stream.read_exact(&mut body).is_err() {
                return;
            }
            let reply = self.answer(&String::from_utf8_lossy(&body));
            if stream.write_all(&reply).is_err() {
                return;
            }
        }
    }

    fn answer(&self, request: &str) -> Vec<u8> {
        let answers = self.answers.lock().expect("answers").clone();
        let mut text = String::new();
        for command in request.lines() {
            *self
                .asked
                .lock()
                .expect("asked")
                .entry(command.to_owned())
                .or_default() += 1;
            let value = answers
                .get(command)
                .map_or("ERROR:4:unrecognized command", String::as_str);
            text.push_str(&format!("{command}\t{value}\n"));
        }
        if answers.contains_key("raw") {
            return b"\x02\x03garbage bytes, not an info proto".to_vec();
        }
        let mut reply = vec![2, 1];
        reply.extend_from_slice(&(text.len() as u64).to_be_bytes()[2..]);
        reply.extend_from_slice(text.as_bytes());
        reply
    }
}

fn bitmap_of(pids: &[u16]) -> PartitionBitmap {
    let mut bitmap = PartitionBitmap::empty();
    for &pid in pids {
        bitmap.insert(PartitionId(pid));
    }
    bitmap
}

fn master(map: &ClusterMap, pid: u16) -> Option<NodeId> {
    map.master_of("test", PartitionId(pid))
        .map(|(node_id, _)| node_id)
}

const NODE_A: NodeId = NodeId(0xA1);
const NODE_B: NodeId = NodeId(0xB2);

/// Two nodes that name each other; A masters 0 and 2 and is replica of 1, B the reverse.
fn two_nodes() -> (InfoNode, InfoNode) {
    let (a, b) = (InfoNode::start(NODE_A), InfoNode::start(NODE_B));
    a.list_peers(1, &[(NODE_B, b.address)]);
    b.list_peers(1, &[(NODE_A, a.address)]);
    a.claim(1, &[0, 2], &[1]);
    b.claim(1, &[1], &[0, 2]);
    (a, b)
}

#[test]
fn learning_from_one_seed_finds_its_peer_and_merges_both_claims() {
    let (a, b) = two_nodes();
    let map = ClusterMap::learn(&[a.address]).expect("the seed answers");
    assert!(map.failures().is_empty(), "{:?}", map.failures());
    let nodes: Vec<(NodeId, SocketAddr)> =
        map.nodes().map(|node| (node.id, node.address)).collect();
    assert_eq!(nodes, [(NODE_A, a.address), (NODE_B, b.address)]);
    assert_eq!(
        map.master_of("test", PartitionId(1)),
        Some((NODE_B, b.address))
    );
    assert_eq!(
        (master(&map, 0), master(&map, 2)),
        (Some(NODE_A), Some(NODE_A))
    );
    assert_eq!(
        map.replica_of("test", PartitionId(1), 1),
        Some((NODE_A, a.address))
    );
    assert_eq!(
        map.replica_of("test", PartitionId(0), 1),
        Some((NODE_B, b.address))
    );
    assert_eq!(master(&map, 3), None);
}

#[test]
fn a_node_answering_garbage_is_reported_while_the_other_answers() {
    let (a, b) = two_nodes();
    b.set("replicas", "test:0,1,not-a-bitmap");
    let map = ClusterMap::learn(&[a.address]).expect("the seed answers");
    let [failure] = map.failures() else {
        panic!("one failure expected: {:?}", map.failures());
    };
    assert_eq!(
        (failure.node_id, failure.address),
        (Some(NODE_B), Some(b.address))
    );
    assert!(matches!(
        failure.error,
        ClusterError::Reply {
            command: "replicas",
            ..
        }
    ));
    assert_eq!(master(&map, 0), Some(NODE_A));
    assert_eq!(master(&map, 1), None, "B's claims were never merged");

    // Bytes that are not an info reply at all: the node fails, the map keeps what it knew.
    b.claim(2, &[1], &[0, 2]);
    let mut map = ClusterMap::learn(&[a.address, b.address]).expect("both answer");
    assert!(map.failures().is_empty(), "{:?}", map.failures());
    a.set("raw", "yes");
    assert!(map.refresh().is_ok(), "B still answers");
    let failed: Vec<Option<NodeId>> = map.failures().iter().map(|f| f.node_id).collect();
    assert_eq!(failed, [Some(NODE_A)]);
    assert_eq!(
        master(&map, 0),
        Some(NODE_A),
        "A keeps its claims until others take them"
    );
}

#[test]
fn a_seed_that_refuses_connections_is_reported_and_no_answer_at_all_is_an_error() {
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address")
    };
    let Err(ClusterError::NoNodeAnswered { failures }) = ClusterMap::learn(&[closed]) else {
        panic!("learning from a closed port is an error");
    };
    assert_eq!(failures.len(), 1);
    assert_eq!(
        (failures[0].node_id, failures[0].address),
        (None, Some(closed))
    );
    let a = InfoNode::start(NODE_A);
    a.claim(1, &[0], &[]);
    let map = ClusterMap::learn(&[closed, a.address]).expect("A answers");
    assert_eq!(map.failures().len(), 1);
    assert_eq!(master(&map, 0), Some(NODE_A));
}

#[test]
fn refresh_reloads_claims_only_from_nodes_whose_generation_changed() {
    let (a, b) = two_nodes();
    let mut map = ClusterMap::learn(&[a.address]).expect("learned");
    assert_eq!(map.refresh().ok(), Some(false), "nothing changed");
    assert_eq!((a.asked("replicas"), b.asked("replicas")), (1, 1));
    // Partition 0 moves from A to B; both bump their generations.
    a.claim(2, &[2], &[1]);
    b.claim(2, &[0, 1], &[2]);
    assert_eq!(map.refresh().ok(), Some(true));
    assert_eq!(master(&map, 0), Some(NODE_B));
    assert_eq!((a.asked("replicas"), b.asked("replicas")), (2, 2));
    // B took a partition A held, so A is read once more; then nothing is reloaded.
    assert_eq!(map.refresh().ok(), Some(false));
    assert_eq!(map.refresh().ok(), Some(false));
    assert_eq!((a.asked("replicas"), b.asked("replicas")), (3, 2));
    assert_eq!(master(&map, 0), Some(NODE_B));
}

#[test]
fn a_peer_that_appears_later_is_found_when_the_peers_generation_changes() {
    let a = InfoNode::start(NODE_A);
    a.claim(1, &[0], &[]);
    let mut map = ClusterMap::learn(&[a.address]).expect("learned");
    assert_eq!(map.nodes().len(), 1);
    let b = InfoNode::start(NODE_B);
    b.claim(1, &[1], &[]);
    b.list_peers(1, &[(NODE_A, a.address)]);
    a.list_peers(2, &[(NODE_B, b.address)]);
    assert_eq!(map.refresh().ok(), Some(true));
    assert_eq!(map.nodes().len(), 2);
    assert_eq!(master(&map, 1), Some(NODE_B));
    assert_eq!(a.asked("peers-clear-std"), 2);
    assert_eq!(map.refresh().ok(), Some(false));
    assert_eq!(
        a.asked("peers-clear-std"),
        2,
        "same generation: not read again"
    );
}

#[test]
fn a_peer_answering_with_another_node_id_is_not_added() {
    let (a, b) = two_nodes();
    a.list_peers(1, &[(NodeId(0xC3), b.address)]);
    let map = ClusterMap::learn(&[a.address]).expect("learned");
    assert_eq!(map.nodes().len(), 1);
    let [failure] = map.failures() else {
        panic!("one failure expected: {:?}", map.failures());
    };
    assert!(
        matches!(
            failure.error,
            ClusterError::NodeIdMismatch {
                expected: NodeId(0xC3),
                found: NODE_B
            }
        ),
        "{failure}"
    );
}
