//! Which node each command goes to. Under Aerospike the tool learns the partition map from the
//! seed hosts as a smart client does (`client::ClusterMap`), and flattens the namespace's
//! masters into one table, so routing costs one array lookup per command. Under RESP any node
//! serves any key (forwarding is the server's job), so every command goes to the first host.
//!
//! Invariants:
//! - A node keeps its index for the whole run: routes rebuilt after a refresh keep every node
//!   of the routes before them, in the same order, and append new ones (per-node counters and
//!   each connection's per-node streams are kept by index).
//! - `masters` has one entry per partition, each `None` or the index of a node in `nodes`.
//! - Under RESP, or when no seed answers the info commands, there is one node (the first host)
//!   and it serves every key.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use client::ClusterMap;
use model::{NodeId, PARTITION_COUNT, PartitionId};
use parking_lot::Mutex;

use crate::protocol::{KeyedOp, Protocol};
use crate::runner::Target;

/// A node commands go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoutedNode {
    /// Its id from the partition map; `None` when the map was not learned (RESP, or a server
    /// that does not answer the cluster's info commands).
    pub id: Option<NodeId>,
    /// Where the tool connects to it.
    pub address: SocketAddr,
}

/// The nodes, and the master of each partition of the run's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routes {
    nodes: Vec<RoutedNode>,
    masters: Vec<Option<usize>>,
}

impl Routes {
    /// One node, of unknown id, serving every partition.
    pub fn single(address: SocketAddr) -> Routes {
        Routes {
            nodes: vec![RoutedNode { id: None, address }],
            masters: vec![Some(0); PARTITION_COUNT],
        }
    }

    /// The routes of `namespace` in `map`, keeping the nodes (and their indexes) of
    /// `previous`.
    pub fn from_map(map: &ClusterMap, namespace: &str, previous: Option<&Routes>) -> Routes {
        let mut nodes = previous.map_or_else(Vec::new, |routes| routes.nodes.clone());
        for node in map.nodes() {
            match nodes.iter_mut().find(|known| known.id == Some(node.id)) {
                Some(known) => known.address = node.address,
                None => nodes.push(RoutedNode {
                    id: Some(node.id),
                    address: node.address,
                }),
            }
        }
        Routes::with_masters(nodes, |partition| {
            map.master_of(namespace, partition)
                .map(|(node_id, _)| node_id)
        })
    }

    /// The routes to `nodes`, where `master_of` names each partition's master (a node id
    /// that is not among `nodes` counts as no master).
    pub fn with_masters(
        nodes: Vec<RoutedNode>,
        master_of: impl Fn(PartitionId) -> Option<NodeId>,
    ) -> Routes {
        let masters = PartitionId::all()
            .map(|partition| {
                let master = master_of(partition)?;
                nodes.iter().position(|node| node.id == Some(master))
            })
            .collect();
        Routes { nodes, masters }
    }

    /// Every node, by index.
    pub fn nodes(&self) -> &[RoutedNode] {
        &self.nodes
    }

    /// The index of the node that `keyed` goes to: its partition's master under Aerospike,
    /// the only node under RESP; `None` when no node claims the partition.
    pub fn node_index(&self, keyed: &KeyedOp) -> Option<usize> {
        match keyed.partition() {
            Some(partition) => self.masters[partition.index()],
            None => Some(0),
        }
    }

    /// Partitions that no node claims as master.
    pub fn partitions_without_master(&self) -> usize {
        self.masters
            .iter()
            .filter(|master| master.is_none())
            .count()
    }
}

/// The routes every connection of a run follows, replaced whole when the map changes.
#[derive(Debug)]
pub struct SharedRoutes {
    current: Mutex<Arc<Routes>>,
    /// Raised by every [`SharedRoutes::publish`]: connections compare it before each batch,
    /// one atomic load, and take the lock only when it moved.
    version: AtomicU64,
}

impl SharedRoutes {
    /// Shares `routes` as version 0.
    pub fn new(routes: Routes) -> SharedRoutes {
        SharedRoutes {
            current: Mutex::new(Arc::new(routes)),
            version: AtomicU64::new(0),
        }
    }

    /// The version of the current routes.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The current routes and their version.
    pub fn load(&self) -> (u64, Arc<Routes>) {
        let current = self.current.lock();
        (self.version(), current.clone())
    }

    /// Replaces the routes.
    pub fn publish(&self, routes: Routes) {
        let mut current = self.current.lock();
        *current = Arc::new(routes);
        self.version.fetch_add(1, Ordering::Release);
    }
}

/// Learns the routes before a run, warning on stderr about nodes that failed. Returns the map
/// too when there is one to keep tending.
pub fn discover(target: &Target, namespace: &str) -> (Routes, Option<ClusterMap>) {
    if target.protocol == Protocol::Redis {
        return (Routes::single(target.address), None);
    }
    match ClusterMap::learn(&target.seeds) {
        Ok(map) => {
            for failure in map.failures() {
                eprintln!("osprey-bench: partition map: {failure}");
            }
            let routes = Routes::from_map(&map, namespace, None);
            warn_of_partitions_without_master(&routes, namespace);
            (routes, Some(map))
        }
        Err(error) => {
            eprintln!(
                "osprey-bench: cannot learn the partition map ({error}); every command goes \
                 to {}",
                target.address
            );
            (Routes::single(target.address), None)
        }
    }
}

/// One tend of `map`; publishes new routes when the map changed. Returns the failures of the
/// tend as one line, empty when every node answered.
pub fn refresh(map: &mut ClusterMap, namespace: &str, shared: &SharedRoutes) -> String {
    match map.refresh() {
        Ok(true) => {
            let (_, previous) = shared.load();
            shared.publish(Routes::from_map(map, namespace, Some(&previous)));
        }
        Ok(false) => {}
        Err(error) => return format!("partition map refresh: {error}"),
    }
    let failures: Vec<String> = map.failures().iter().map(ToString::to_string).collect();
    if failures.is_empty() {
        String::new()
    } else {
        format!("partition map refresh: {}", failures.join("; "))
    }
}

fn warn_of_partitions_without_master(routes: &Routes, namespace: &str) {
    let count = routes.partitions_without_master();
    if count > 0 {
        eprintln!(
            "osprey-bench: {count} of {PARTITION_COUNT} partitions of namespace {namespace} \
             have no known master; their commands are not sent (counted as `no master`)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Encoder;
    use crate::source::{Op, OpKind};

    fn node(id: u64, port: u16) -> RoutedNode {
        RoutedNode {
            id: Some(NodeId(id)),
            address: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    fn encoder(protocol: Protocol) -> Encoder {
        Encoder::new(protocol, "test", "testset", &"I".parse().unwrap(), 0, 1)
    }

    fn keyed(encoder: &Encoder, key: u64) -> KeyedOp {
        encoder.key(Op {
            kind: OpKind::Read,
            key,
            replace: false,
        })
    }

    #[test]
    fn a_key_goes_to_its_partitions_master() {
        // Node B masters exactly the partition of key 7; node A masters every other one but
        // the partition of key 8, which has no master.
        let aerospike = encoder(Protocol::Aerospike);
        let partition_of = |key| keyed(&aerospike, key).partition().unwrap();
        let (of_7, of_8) = (partition_of(7), partition_of(8));
        assert_ne!(of_7, of_8, "keys 7 and 8 share no partition");
        let routes =
            Routes::with_masters(vec![node(0xA, 3000), node(0xB, 3001)], |pid| match pid {
                pid if pid == of_7 => Some(NodeId(0xB)),
                pid if pid == of_8 => None,
                _ => Some(NodeId(0xA)),
            });
        assert_eq!(routes.node_index(&keyed(&aerospike, 7)), Some(1));
        assert_eq!(routes.node_index(&keyed(&aerospike, 8)), None);
        let others = (0..1000).filter(|&key| ![of_7, of_8].contains(&partition_of(key)));
        for key in others {
            assert_eq!(routes.node_index(&keyed(&aerospike, key)), Some(0));
        }
        assert_eq!(routes.partitions_without_master(), 1);
    }

    #[test]
    fn a_master_outside_the_nodes_is_no_master_and_resp_keys_go_to_the_only_node() {
        let (aerospike, redis) = (encoder(Protocol::Aerospike), encoder(Protocol::Redis));
        let routes = Routes::with_masters(vec![node(0xA, 3000)], |_| Some(NodeId(0xC)));
        assert_eq!(routes.partitions_without_master(), PARTITION_COUNT);
        assert_eq!(routes.node_index(&keyed(&aerospike, 7)), None);
        assert_eq!(routes.node_index(&keyed(&redis, 7)), Some(0));
        let single = Routes::single(SocketAddr::from(([127, 0, 0, 1], 3000)));
        assert_eq!(single.partitions_without_master(), 0);
        assert_eq!(single.node_index(&keyed(&aerospike, 7)), Some(0));
    }

    #[test]
    fn published_routes_raise_the_version() {
        let shared = SharedRoutes::new(Routes::single(SocketAddr::from(([127, 0, 0, 1], 1))));
        assert_eq!(shared.version(), 0);
        let next = Routes::with_masters(vec![node(0xA, 3000), node(0xB, 3001)], |_| None);
        shared.publish(next.clone());
        let (version, routes) = shared.load();
        assert_eq!((version, routes.as_ref()), (1, &next));
    }
}
