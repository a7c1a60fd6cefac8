//! A cluster's partition map, learned from seed nodes the way Aerospike's smart clients learn
//! it (the Go client v7's `cluster.go`, `node.go` and `partition_parser.go`; reply formats in
//! `wire_aerospike::cluster_map`).
//!
//! A tend asks every known node `node`, `peers-generation` and `partition-generation` in one
//! request. A node whose peers generation changed is asked `peers-clear-std`, and every peer it
//! names that is not known yet is connected to, checked (its `node` must be the id the list
//! gave) and tended in the same pass, so one tend follows peer lists until no new node appears.
//! A node whose partition generation changed is asked `partition-generation` and `replicas` in
//! one request, and its claims are merged into the map.
//!
//! Invariants:
//! - A node appears once, by node id, and keeps its index in `nodes` for the life of the map
//!   (nodes are not dropped yet: a node that stops answering keeps its claims until others
//!   claim its partitions, and is reported as a failure at every tend).
//! - An owner changes only when a node claims the partition (a set bit): a clear bit changes
//!   nothing, so a partition keeps pointing at its last claimant (as in the Go and Java
//!   clients since v5).
//! - A claim whose regime is below the highest regime seen for that partition is ignored, so
//!   regimes never go backwards.
//! - When a claim takes a partition from another node, that node's partition generation is
//!   forgotten, so the next tend reads its `replicas` again.
//! - A node's partition generation is recorded only together with the `replicas` value of the
//!   same request, so the map never holds claims older than the generation it recorded.
//! - A reply is parsed whole before anything is merged: a node that answers garbage is
//!   reported and changes nothing. Nothing here panics on what a node sends.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use model::{NodeId, PARTITION_COUNT, PartitionId};
use wire_aerospike::cluster_map::{
    NamespaceClaims, ParseError, ParsedPeer, PeerList, parse_peers, parse_replicas,
};

use crate::{Client, ClientError};

/// How long a tend waits to connect to a node, and then for each reply. Clients tend every
/// second (the Go client's `TendInterval`); a node slower than that is reported, not waited for.
const TEND_TIMEOUT: Duration = Duration::from_secs(1);

/// How much of a node's unexpected value an error keeps, so that garbage stays small.
const VALUE_EXCERPT_CHARS_MAX: usize = 32;

/// Most namespaces a `replicas` reply may carry: Aerospike's limit (`AS_NAMESPACE_SZ`).
const NAMESPACE_COUNT_MAX: usize = 32;

/// Most columns a namespace may carry: the replication factor is at most the cluster size,
/// and Aerospike's clusters have at most 256 nodes (`AS_CLUSTER_SZ`). Each column costs the
/// map one entry per partition, so a node cannot make the map grow without bound.
const COLUMN_COUNT_MAX: usize = 256;

/// A node of the cluster: its id and the service address the map reached it at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    /// The node's id (its `node` answer).
    pub id: NodeId,
    /// Where it serves clients.
    pub address: SocketAddr,
}

/// A node that could not be reached or read during the last tend.
#[derive(Debug)]
pub struct NodeFailure {
    /// The node's id, when known (a seed that never answered has none).
    pub node_id: Option<NodeId>,
    /// The address tried, when there was one (a peer named by an unresolvable host has none).
    pub address: Option<SocketAddr>,
    /// What went wrong.
    pub error: ClusterError,
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("node")?;
        if let Some(node_id) = self.node_id {
            write!(f, " {node_id}")?;
        }
        if let Some(address) = self.address {
            write!(f, " at {address}")?;
        }
        write!(f, ": {}", self.error)
    }
}

/// Why a node, or the whole tend, failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The connection failed, timed out, or did not carry an info reply.
    #[error("{0}")]
    Client(#[from] ClientError),
    /// A `replicas` or `peers-clear-std` value is not in the format clients expect.
    #[error("bad {command} reply: {error}")]
    Reply {
        /// The info command.
        command: &'static str,
        /// What the parser found.
        error: ParseError,
    },
    /// A `node` or generation value is not a number of the expected kind (or is an error
    /// answer such as `ERROR:4:unrecognized command`).
    #[error("bad {command} value {value:?}")]
    BadValue {
        /// The info command.
        command: &'static str,
        /// The start of the value.
        value: String,
    },
    /// A `replicas` reply carries more namespaces or columns than a cluster can have.
    #[error("a replicas reply with {count} {what}, more than a cluster can have")]
    TooMany {
        /// `namespaces` or `columns`.
        what: &'static str,
        /// How many it carried.
        count: usize,
    },
    /// `partition-generation` is -1: the node has not balanced its partitions yet.
    #[error("the node is not ready (partition-generation -1)")]
    NotReady,
    /// The node at this address answers with another node id than expected.
    #[error("expected node {expected}, found node {found}")]
    NodeIdMismatch {
        /// The id the map (or a peer list) knew for this address.
        expected: NodeId,
        /// The id the node gave.
        found: NodeId,
    },
    /// A peer's host name resolves to no address.
    #[error("peer host {host}:{port} resolves to no address")]
    Unresolvable {
        /// The host name from the peer list.
        host: String,
        /// Its port.
        port: u16,
    },
    /// No seed and no known node answered.
    #[error("no node answered: {}", join_failures(.failures))]
    NoNodeAnswered {
        /// Each node's failure.
        failures: Vec<NodeFailure>,
    },
}

/// The partition map of one cluster, and the connections it tends it through.
#[derive(Debug)]
pub struct ClusterMap {
    seeds: Vec<SocketAddr>,
    nodes: Vec<NodeState>,
    namespaces: BTreeMap<String, PartitionOwners>,
    /// Failures of the last tend.
    failures: Vec<NodeFailure>,
    /// Counts every change of the map (a new node, a partition that moved), so that a tend
    /// can say whether it changed anything.
    change_count: u64,
}

/// What the map knows of one node.
#[derive(Debug)]
struct NodeState {
    node: Node,
    /// Dropped after any error, reopened at the next tend.
    connection: Option<Client>,
    /// The generation of the claims merged from this node; `None`: read them next tend.
    partition_generation: Option<i64>,
    /// The generation of the peer list read from this node; `None`: read it next tend.
    peers_generation: Option<u64>,
}

/// Who owns each partition of one namespace, per column.
#[derive(Debug)]
struct PartitionOwners {
    /// Per partition, the highest regime claimed (0 for AP namespaces).
    regimes: Vec<u32>,
    /// Per column (0 = master), per partition: the owner's index in `nodes`.
    columns: Vec<Vec<Option<usize>>>,
}

/// What one set bit did to the map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claim {
    /// The node already owned the partition there (or its regime was stale).
    Unchanged,
    /// The node took the partition, from the node at this index or from nobody.
    Taken { previous: Option<usize> },
}

impl ClusterMap {
    /// Learns the map from `seeds`: asks each seed, then each peer they name (until no new
    /// node appears), for its node id, peers, partition generation and claims.
    ///
    /// # Errors
    /// [`ClusterError::NoNodeAnswered`] when no seed answered. Nodes that failed while
    /// others answered are not errors: [`ClusterMap::failures`] lists them.
    pub fn learn(seeds: &[SocketAddr]) -> Result<ClusterMap, ClusterError> {
        let mut map = ClusterMap {
            seeds: seeds.to_vec(),
            nodes: Vec::new(),
            namespaces: BTreeMap::new(),
            failures: Vec::new(),
            change_count: 0,
        };
        map.refresh()?;
        Ok(map)
    }

    /// Tends the map again: re-reads every node's generations, reloads the peers of nodes
    /// whose peers generation changed and the claims of nodes whose partition generation
    /// changed. With no node known, asks the seeds again. Returns whether the map changed.
    ///
    /// # Errors
    /// [`ClusterError::NoNodeAnswered`], carrying every failure, when no node answered this
    /// tend (the map keeps what it knew). While some node answers, the failing ones are only
    /// listed by [`ClusterMap::failures`].
    pub fn refresh(&mut self) -> Result<bool, ClusterError> {
        self.failures.clear();
        let change_count_before = self.change_count;
        if self.nodes.is_empty() {
            self.add_seeds();
        }
        let mut answered_count = 0;
        // Peers found while tending are appended, and tended in this same pass.
        let mut node_index = 0;
        while node_index < self.nodes.len() {
            match self.tend_node(node_index) {
                Ok(()) => answered_count += 1,
                Err(error) => self.fail_node(node_index, error),
            }
            node_index += 1;
        }
        if answered_count == 0 {
            return Err(ClusterError::NoNodeAnswered {
                failures: std::mem::take(&mut self.failures),
            });
        }
        Ok(self.change_count != change_count_before)
    }

    /// The master of `partition` in `namespace`: the last node that claimed it in column 0.
    pub fn master_of(
        &self,
        namespace: &str,
        partition: PartitionId,
    ) -> Option<(NodeId, SocketAddr)> {
        self.replica_of(namespace, partition, 0)
    }

    /// The owner of `partition` in `namespace` in `column` (0 = master, k = k-th replica).
    pub fn replica_of(
        &self,
        namespace: &str,
        partition: PartitionId,
        column: usize,
    ) -> Option<(NodeId, SocketAddr)> {
        let owners = self.namespaces.get(namespace)?;
        let node_index = (*owners.columns.get(column)?.get(partition.index())?)?;
        let node = self.nodes[node_index].node;
        Some((node.id, node.address))
    }

    /// Every node known, in the order first learned.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = &Node> {
        self.nodes.iter().map(|state| &state.node)
    }

    /// The nodes that failed during the last tend (learn or refresh).
    pub fn failures(&self) -> &[NodeFailure] {
        &self.failures
    }

    /// Connects to each seed not known yet and adds the node it answers for.
    fn add_seeds(&mut self) {
        for address in self.seeds.clone() {
            match connect_and_identify(address) {
                Ok((node_id, connection)) => self.add_node(node_id, address, connection),
                Err(error) => self.failures.push(NodeFailure {
                    node_id: None,
                    address: Some(address),
                    error,
                }),
            }
        }
    }

    /// Adds a node unless its id is known (two seeds, or a seed and a peer, may be one node).
    fn add_node(&mut self, node_id: NodeId, address: SocketAddr, connection: Client) {
        if self.position(node_id).is_some() {
            return;
        }
        self.nodes.push(NodeState {
            node: Node {
                id: node_id,
                address,
            },
            connection: Some(connection),
            partition_generation: None,
            peers_generation: None,
        });
        self.change_count += 1;
    }

    fn position(&self, node_id: NodeId) -> Option<usize> {
        self.nodes.iter().position(|state| state.node.id == node_id)
    }

    /// One node's tend: its generations, then its peers and claims where they changed.
    fn tend_node(&mut self, node_index: usize) -> Result<(), ClusterError> {
        let values = self.ask(
            node_index,
            &["node", "peers-generation", "partition-generation"],
        )?;
        let found = parse_node_id(&values[0])?;
        let expected = self.nodes[node_index].node.id;
        if found != expected {
            return Err(ClusterError::NodeIdMismatch { expected, found });
        }
        let peers_generation = parse_value::<u64>("peers-generation", &values[1])?;
        let partition_generation = parse_partition_generation(&values[2])?;
        if self.nodes[node_index].peers_generation != Some(peers_generation) {
            let values = self.ask(node_index, &["peers-clear-std"])?;
            let peers = parse_peers(&values[0]).map_err(|error| ClusterError::Reply {
                command: "peers-clear-std",
                error,
            })?;
            self.add_peers(&peers);
            self.nodes[node_index].peers_generation = Some(peers.generation);
        }
        if self.nodes[node_index].partition_generation != Some(partition_generation) {
            let values = self.ask(node_index, &["partition-generation", "replicas"])?;
            let generation = parse_partition_generation(&values[0])?;
            self.apply_replicas(node_index, &values[1])?;
            self.nodes[node_index].partition_generation = Some(generation);
        }
        Ok(())
    }

    /// Sends `commands` to the node in one request; its connection is opened if needed and
    /// dropped on any error.
    fn ask(&mut self, node_index: usize, commands: &[&str]) -> Result<Vec<String>, ClusterError> {
        let state = &mut self.nodes[node_index];
        let mut connection = match state.connection.take() {
            Some(connection) => connection,
            None => Client::connect_timeout(&state.node.address, TEND_TIMEOUT)?,
        };
        let values = connection.info_values(commands)?;
        state.connection = Some(connection);
        Ok(values)
    }

    /// Forgets what the node said, so that all of it is read again when it answers.
    fn fail_node(&mut self, node_index: usize, error: ClusterError) {
        let state = &mut self.nodes[node_index];
        state.connection = None;
        state.partition_generation = None;
        state.peers_generation = None;
        self.failures.push(NodeFailure {
            node_id: Some(state.node.id),
            address: Some(state.node.address),
            error,
        });
    }

    /// Connects to every peer not known yet, through the first of its addresses that answers
    /// with the peer's id.
    fn add_peers(&mut self, peers: &PeerList) {
        for peer in &peers.peers {
            if self.position(peer.node_id).is_some() {
                continue;
            }
            match connect_to_peer(peer) {
                Ok((address, connection)) => self.add_node(peer.node_id, address, connection),
                Err((address, error)) => self.failures.push(NodeFailure {
                    node_id: Some(peer.node_id),
                    address,
                    error,
                }),
            }
        }
    }

    /// Parses a `replicas` value and merges the node's claims into the map.
    fn apply_replicas(&mut self, node_index: usize, reply: &str) -> Result<(), ClusterError> {
        let claims = parse_replicas(reply).map_err(|error| ClusterError::Reply {
            command: "replicas",
            error,
        })?;
        check_claim_counts(&claims)?;
        for namespace in &claims {
            self.merge_namespace(node_index, namespace);
        }
        Ok(())
    }

    /// For each set bit, the node becomes the owner of that partition in that column.
    fn merge_namespace(&mut self, node_index: usize, claims: &NamespaceClaims) {
        let owners = self
            .namespaces
            .entry(claims.name.clone())
            .or_insert_with(PartitionOwners::new);
        let mut displaced = Vec::new();
        for (column, bitmap) in claims.columns.iter().enumerate() {
            owners.ensure_columns(column + 1);
            for partition in bitmap.partition_ids() {
                let claim = owners.claim(partition, column, node_index, claims.regime);
                if let Claim::Taken { previous } = claim {
                    self.change_count += 1;
                    displaced.extend(previous);
                }
            }
        }
        for previous in displaced {
            self.nodes[previous].partition_generation = None;
        }
    }
}

impl PartitionOwners {
    fn new() -> PartitionOwners {
        PartitionOwners {
            regimes: vec![0; PARTITION_COUNT],
            columns: Vec::new(),
        }
    }

    fn ensure_columns(&mut self, column_count: usize) {
        while self.columns.len() < column_count {
            self.columns.push(vec![None; PARTITION_COUNT]);
        }
    }

    /// Applies one set bit: the Go client's rule, `regime == 0 || regime >= regimes[pid]`, and the
    /// partition's regime rises to the claim's.
    fn claim(
        &mut self,
        partition: PartitionId,
        column: usize,
        node_index: usize,
        regime: u32,
    ) -> Claim {
        let pid = partition.index();
        if regime != 0 && regime < self.regimes[pid] {
            return Claim::Unchanged;
        }
        self.regimes[pid] = self.regimes[pid].max(regime);
        let owner = &mut self.columns[column][pid];
        if *owner == Some(node_index) {
            return Claim::Unchanged;
        }
        let previous = owner.replace(node_index);
        Claim::Taken { previous }
    }
}

/// Refuses replies with more namespaces or columns than any cluster has.
fn check_claim_counts(claims: &[NamespaceClaims]) -> Result<(), ClusterError> {
    if claims.len() > NAMESPACE_COUNT_MAX {
        return Err(ClusterError::TooMany {
            what: "namespaces",
            count: claims.len(),
        });
    }
    let column_count = claims.iter().map(|claims| claims.columns.len()).max();
    match column_count {
        Some(count) if count > COLUMN_COUNT_MAX => Err(ClusterError::TooMany {
            what: "columns",
            count,
        }),
        _ => Ok(()),
    }
}

/// Connects to `address` and asks which node it is.
fn connect_and_identify(address: SocketAddr) -> Result<(NodeId, Client), ClusterError> {
    let mut connection = Client::connect_timeout(&address, TEND_TIMEOUT)?;
    let values = connection.info_values(&["node"])?;
    Ok((parse_node_id(&values[0])?, connection))
}

/// Tries the peer's addresses in order; returns the first that answers with the peer's id,
/// or the last failure (with the address it concerned).
fn connect_to_peer(
    peer: &ParsedPeer,
) -> Result<(SocketAddr, Client), (Option<SocketAddr>, ClusterError)> {
    let no_address = ParseError::Malformed {
        expected: "a peer address",
        excerpt: peer.node_id.to_string(),
    };
    let mut last_failure = (
        None,
        ClusterError::Reply {
            command: "peers-clear-std",
            error: no_address,
        },
    );
    for peer_address in &peer.addresses {
        let resolved = match peer_address.socket_addr() {
            Some(address) => Some(address),
            None => (peer_address.host.as_str(), peer_address.port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut addresses| addresses.next()),
        };
        let Some(address) = resolved else {
            let error = ClusterError::Unresolvable {
                host: peer_address.host.clone(),
                port: peer_address.port,
            };
            last_failure = (None, error);
            continue;
        };
        match connect_and_identify(address) {
            Ok((found, connection)) if found == peer.node_id => return Ok((address, connection)),
            Ok((found, _)) => {
                let error = ClusterError::NodeIdMismatch {
                    expected: peer.node_id,
                    found,
                };
                last_failure = (Some(address), error);
            }
            Err(error) => last_failure = (Some(address), error),
        }
    }
    Err(last_failure)
}

fn parse_node_id(value: &str) -> Result<NodeId, ClusterError> {
    parse_value::<NodeId>("node", value)
}

/// A partition generation; -1 means the node is not ready (clients reject it).
fn parse_partition_generation(value: &str) -> Result<i64, ClusterError> {
    match parse_value::<i64>("partition-generation", value)? {
        -1 => Err(ClusterError::NotReady),
        generation if generation < 0 => Err(bad_value("partition-generation", value)),
        generation => Ok(generation),
    }
}

fn parse_value<T: std::str::FromStr>(
    command: &'static str,
    value: &str,
) -> Result<T, ClusterError> {
    value.parse().map_err(|_| bad_value(command, value))
}

fn bad_value(command: &'static str, value: &str) -> ClusterError {
    ClusterError::BadValue {
        command,
        value: value.chars().take(VALUE_EXCERPT_CHARS_MAX).collect(),
    }
}

fn join_failures(failures: &[NodeFailure]) -> String {
    let texts: Vec<String> = failures.iter().map(NodeFailure::to_string).collect();
    texts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire_aerospike::cluster_map::{PartitionBitmap, format_replicas};

    const NODE_A: NodeId = NodeId(0xA1);
    const NODE_B: NodeId = NodeId(0xB2);

    /// A map of nodes that are never connected to: claims are applied by hand.
    fn map_of(node_ids: &[NodeId]) -> ClusterMap {
        let nodes = node_ids
            .iter()
            .enumerate()
            .map(|(position, &id)| NodeState {
                node: Node {
                    id,
                    address: SocketAddr::from(([127, 0, 0, 1], 3000 + position as u16)),
                },
                connection: None,
                partition_generation: Some(1),
                peers_generation: Some(1),
            })
            .collect();
        ClusterMap {
            seeds: Vec::new(),
            nodes,
            namespaces: BTreeMap::new(),
            failures: Vec::new(),
            change_count: 0,
        }
    }

    fn bitmap_of(pids: &[u16]) -> PartitionBitmap {
        let mut bitmap = PartitionBitmap::empty();
        for &pid in pids {
            bitmap.insert(PartitionId(pid));
        }
        bitmap
    }

    fn replicas(namespace: &str, regime: u32, columns: &[&[u16]]) -> String {
        let claims = NamespaceClaims {
            name: namespace.to_owned(),
            regime,
            columns: columns.iter().map(|pids| bitmap_of(pids)).collect(),
        };
        format_replicas(&[claims], None)
    }

    fn master(map: &ClusterMap, pid: u16) -> Option<NodeId> {
        map.master_of("test", PartitionId(pid)).map(|(id, _)| id)
    }

    #[test]
    fn two_nodes_claims_merge_into_one_map_per_column() {
        let mut map = map_of(&[NODE_A, NODE_B]);
        let from_a = replicas("test", 0, &[&[0, 2], &[1]]);
        let from_b = replicas("test", 0, &[&[1], &[0, 2]]);
        map.apply_replicas(0, &from_a).expect("a valid reply");
        map.apply_replicas(1, &from_b).expect("a valid reply");
        assert_eq!(master(&map, 0), Some(NODE_A));
        assert_eq!(master(&map, 1), Some(NODE_B));
        assert_eq!(master(&map, 2), Some(NODE_A));
        assert_eq!(master(&map, 3), None);
        let replica = map.replica_of("test", PartitionId(1), 1);
        assert_eq!(replica, Some((NODE_A, map.nodes[0].node.address)));
        assert_eq!(
            map.replica_of("test", PartitionId(0), 1).map(|r| r.0),
            Some(NODE_B)
        );
        assert_eq!(map.replica_of("test", PartitionId(0), 2), None);
        assert_eq!(map.master_of("other", PartitionId(0)), None);
    }

    #[test]
    fn a_newer_claim_takes_the_partition_and_the_old_owner_is_read_again() {
        let mut map = map_of(&[NODE_A, NODE_B]);
        map.apply_replicas(0, &replicas("test", 0, &[&[5, 6]]))
            .expect("valid");
        map.apply_replicas(1, &replicas("test", 0, &[&[5]]))
            .expect("valid");
        assert_eq!(master(&map, 5), Some(NODE_B));
        assert_eq!(master(&map, 6), Some(NODE_A));
        assert_eq!(
            map.nodes[0].partition_generation, None,
            "A is re-read next tend"
        );
        assert_eq!(map.nodes[1].partition_generation, Some(1));
        // A's new claims no longer hold 5: a clear bit changes nothing.
        map.apply_replicas(0, &replicas("test", 0, &[&[6]]))
            .expect("valid");
        assert_eq!(master(&map, 5), Some(NODE_B));
    }

    #[test]
    fn a_claim_with_an_older_regime_is_ignored() {
        let mut map = map_of(&[NODE_A, NODE_B]);
        map.apply_replicas(0, &replicas("test", 3, &[&[7]]))
            .expect("valid");
        map.apply_replicas(1, &replicas("test", 2, &[&[7]]))
            .expect("valid");
        assert_eq!(master(&map, 7), Some(NODE_A));
        map.apply_replicas(1, &replicas("test", 3, &[&[7]]))
            .expect("valid");
        assert_eq!(master(&map, 7), Some(NODE_B));
    }

    #[test]
    fn a_garbage_replicas_reply_is_an_error_and_changes_nothing() {
        let mut map = map_of(&[NODE_A, NODE_B]);
        map.apply_replicas(0, &replicas("test", 0, &[&[1]]))
            .expect("valid");
        let valid_then_garbage = format!("{};test:0,1,garbage", replicas("test", 0, &[&[2]]));
        for garbage in [
            "garbage",
            "ERROR:4:unrecognized command",
            &valid_then_garbage,
        ] {
            let error = map
                .apply_replicas(1, garbage)
                .expect_err("garbage is refused");
            assert!(
                matches!(
                    error,
                    ClusterError::Reply {
                        command: "replicas",
                        ..
                    }
                ),
                "{error}"
            );
        }
        assert_eq!(master(&map, 1), Some(NODE_A));
        assert_eq!(master(&map, 2), None);
        assert_eq!(map.change_count, 1);
    }

    #[test]
    fn a_reply_with_more_columns_or_namespaces_than_a_cluster_has_is_refused() {
        let mut map = map_of(&[NODE_A]);
        let columns: Vec<&[u16]> = vec![&[1]; COLUMN_COUNT_MAX + 1];
        let too_wide = replicas("test", 0, &columns);
        let error = map
            .apply_replicas(0, &too_wide)
            .expect_err("too many columns");
        assert!(matches!(
            error,
            ClusterError::TooMany {
                what: "columns",
                count: 257
            }
        ));
        let too_many: Vec<String> = (0..=NAMESPACE_COUNT_MAX)
            .map(|index| replicas(&format!("ns{index}"), 0, &[&[1]]))
            .collect();
        let error = map
            .apply_replicas(0, &too_many.join(";"))
            .expect_err("too many namespaces");
        assert!(matches!(
            error,
            ClusterError::TooMany {
                what: "namespaces",
                ..
            }
        ));
        assert_eq!(map.change_count, 0);
    }

    #[test]
    fn generations_and_node_ids_refuse_what_clients_refuse() {
        assert_eq!(parse_partition_generation("42").ok(), Some(42));
        let not_ready = parse_partition_generation("-1");
        assert!(
            matches!(not_ready, Err(ClusterError::NotReady)),
            "{not_ready:?}"
        );
        for garbage in ["-2", "", "x", "ERROR:4:unrecognized command"] {
            assert!(parse_partition_generation(garbage).is_err(), "{garbage:?}");
        }
        let node_id = parse_node_id("BB9020011AC4202").ok();
        assert_eq!(node_id, Some(NodeId(0xBB9020011AC4202)));
        let long = "Z".repeat(100);
        let Err(ClusterError::BadValue { value, .. }) = parse_node_id(&long) else {
            panic!("a bad node id is a BadValue");
        };
        assert_eq!(value.len(), VALUE_EXCERPT_CHARS_MAX);
    }

    /// Random text and random cuts of a valid reply, merged into a map: errors or claims,
    /// never a panic. `SEED=<n>` replays a run.
    #[test]
    fn merging_random_replies_never_panics() {
        let seed = test_seed();
        eprintln!("merging_random_replies_never_panics: SEED={seed}");
        let mut random = SplitMix64(seed);
        let valid = replicas("test", 0, &[&[1, 2, 4095], &[3]]);
        let alphabet = b"test:0,1;=/+AZaz09\xff";
        let mut map = map_of(&[NODE_A, NODE_B]);
        for _ in 0..2_000 {
            let cut = random.below(valid.len() + 1);
            let noise: Vec<u8> = (0..random.below(12))
                .map(|_| alphabet[random.below(alphabet.len())])
                .collect();
            let text = format!("{}{}", &valid[..cut], String::from_utf8_lossy(&noise));
            let node_index = random.below(2);
            let _ = map.apply_replicas(node_index, &text);
            let _ = parse_partition_generation(&text);
            let _ = parse_node_id(&text);
        }
    }

    fn test_seed() -> u64 {
        match std::env::var("SEED") {
            Ok(text) => text.parse().expect("SEED is a number"),
            Err(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |since| since.as_nanos() as u64),
        }
    }

    /// A small generator, so the test needs no dependency.
    struct SplitMix64(u64);

    impl SplitMix64 {
        fn below(&mut self, bound: usize) -> usize {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) % bound.max(1) as u64) as usize
        }
    }
}
