//! Placement of partitions on nodes: Aerospike's rendezvous (highest-random-weight) hashing.
//!
//! Every node computes, for each of the 4096 partitions, the same ordered list of all cluster
//! nodes, the *node sequence*: element 0 is the partition's master, elements 1.. are its
//! replicas (Aerospike's "proles") in order. This is Aerospike CE's `fill_global_tables`
//! (`as/src/fabric/partition_balance.c`), reproduced bit for bit so that an Osprey cluster
//! places partitions where an Aerospike cluster with the same node ids would:
//!
//! ```text
//! hashed_pid       = FNV-1a 64 (le32(pid))
//! hashed_node[n]   = FNV-1a 64 (le64(node_id[n]))     n = position in the succession list
//! key(pid, n)      = (Jenkins one-at-a-time 64 (le64(hashed_node[n]) ++ le64(hashed_pid))
//!                     & !(CLUSTER_SIZE_MAX - 1)) + n
//! node_sequence    = nodes sorted by key(pid, n), descending
//! ```
//!
//! Invariants:
//! - A [`Succession`] holds distinct node ids sorted in descending order, at most
//!   [`CLUSTER_SIZE_MAX`] of them; the position of a node in it is its succession index.
//! - The node sequence of a partition depends only on the set of node ids, never on the order
//!   in which they were given.
//! - Removing a node changes a partition's node sequence only by taking that node out; adding a
//!   node only inserts it. So a membership change of one node moves only the partitions in
//!   whose first replication-factor slots that node sits (barring ties of 57-bit hashes).
//! - A [`ReplicaTable`] has exactly `min(replication factor, node count)` nodes per partition,
//!   all distinct, for every one of the [`PARTITION_COUNT`] partitions.
//! - A partition id given to this module is below [`PARTITION_COUNT`] (`model`'s invariant);
//!   one that is not is a bug, and indexing panics on it.

use model::{NodeId, PARTITION_COUNT, PartitionId};

/// The largest number of nodes a cluster can hold.
///
/// The placement key keeps the node's succession index in its low `log2(CLUSTER_SIZE_MAX)`
/// bits, so this must be a power of two. Aerospike CE uses 8 (its node limit). We need larger
/// clusters, so we reserve 7 bits: that only changes which low hash bits are overwritten by
/// the index. The order among nodes is the order of the upper 57 hash bits either way, so for
/// clusters of 8 nodes or fewer it matches CE's order except when two nodes' hashes agree in
/// all of those bits (about 2^-57 per pair of nodes and partition).
pub const CLUSTER_SIZE_MAX: usize = 128;

const _: () = assert!(CLUSTER_SIZE_MAX.is_power_of_two());
// The index must fit in the bits the mask clears.
const _: () = assert!(CLUSTER_SIZE_MAX <= 1 << 16);

/// The mask that clears the low bits of a placement key, where the succession index goes.
const KEY_HASH_MASK: u64 = !(CLUSTER_SIZE_MAX as u64 - 1);

/// FNV-1a 64-bit offset basis (the hash of no bytes).
const FNV1A_64_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a 64-bit prime.
const FNV1A_64_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Why a succession list cannot be built.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum PlacementError {
    /// More distinct nodes than the placement key has room to index.
    #[error("{node_count} nodes exceed the cluster size limit of {CLUSTER_SIZE_MAX}")]
    TooManyNodes {
        /// How many distinct node ids were given.
        node_count: usize,
    },
}

/// The cluster's members in succession order (node ids descending), with each node's hash
/// precomputed once for the 4096 placements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Succession {
    node_ids: Vec<NodeId>,
    /// Per node, the Jenkins state after absorbing `le64(hashed_node)`: the first half of
    /// every placement key hash for that node, the same for all partitions.
    node_hash_states: Vec<u64>,
}

impl Succession {
    /// Builds the succession list from node ids in any order; duplicates count once.
    ///
    /// # Errors
    /// [`PlacementError::TooManyNodes`] past [`CLUSTER_SIZE_MAX`] distinct nodes.
    pub fn new(node_ids: impl IntoIterator<Item = NodeId>) -> Result<Succession, PlacementError> {
        let mut node_ids: Vec<NodeId> = node_ids.into_iter().collect();
        node_ids.sort_unstable_by(|a, b| b.cmp(a));
        node_ids.dedup();
        if node_ids.len() > CLUSTER_SIZE_MAX {
            return Err(PlacementError::TooManyNodes {
                node_count: node_ids.len(),
            });
        }
        let node_hash_states = node_ids
            .iter()
            .map(|node_id| {
                let hashed_node = fnv1a_64(&node_id.0.to_le_bytes());
                jenkins_absorb(0, &hashed_node.to_le_bytes())
            })
            .collect();
        Ok(Succession {
            node_ids,
            node_hash_states,
        })
    }

    /// The node ids, highest first; a node's position here is its succession index.
    pub fn node_ids(&self) -> &[NodeId] {
        &self.node_ids
    }

    /// How many nodes the cluster has.
    pub fn len(&self) -> usize {
        self.node_ids.len()
    }

    /// Whether the cluster has no node.
    pub fn is_empty(&self) -> bool {
        self.node_ids.is_empty()
    }

    /// The principal: the node with the highest id, which drives cluster changes.
    pub fn principal(&self) -> Option<NodeId> {
        self.node_ids.first().copied()
    }

    /// The succession index of `node_id`, if it is a member.
    pub fn position(&self, node_id: NodeId) -> Option<usize> {
        self.node_ids
            .binary_search_by(|probe| node_id.cmp(probe))
            .ok()
    }

    /// Every node, in the order they take the partition: master first, then replicas.
    pub fn node_sequence(&self, pid: PartitionId) -> Vec<NodeId> {
        let mut keys = Vec::with_capacity(self.len());
        self.fill_sorted_keys(pid, &mut keys);
        keys.iter().map(|&key| self.node_id_of_key(key)).collect()
    }

    /// The first `min(replication_factor, node count)` nodes of every partition's sequence.
    pub fn replica_table(&self, replication_factor: usize) -> ReplicaTable {
        let replication_factor = replication_factor.min(self.len());
        let mut node_ids = Vec::with_capacity(PARTITION_COUNT * replication_factor);
        let mut keys = Vec::with_capacity(self.len());
        for pid in PartitionId::all() {
            self.fill_sorted_keys(pid, &mut keys);
            let row = keys[..replication_factor].iter();
            node_ids.extend(row.map(|&key| self.node_id_of_key(key)));
        }
        ReplicaTable {
            replication_factor,
            node_ids,
        }
    }

    /// Fills `keys` with the placement key of every node for `pid`, highest first.
    fn fill_sorted_keys(&self, pid: PartitionId, keys: &mut Vec<u64>) {
        let hashed_pid = fnv1a_64(&u32::from(pid.0).to_le_bytes()).to_le_bytes();
        keys.clear();
        for (succession_index, &node_state) in self.node_hash_states.iter().enumerate() {
            let hash = jenkins_finish(jenkins_absorb(node_state, &hashed_pid));
            // The index is below CLUSTER_SIZE_MAX (checked in `new`), so it fits the cleared
            // bits and keys of different nodes never tie.
            keys.push((hash & KEY_HASH_MASK) + succession_index as u64);
        }
        keys.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// The node whose succession index sits in the key's low bits.
    fn node_id_of_key(&self, key: u64) -> NodeId {
        // The masked value is below CLUSTER_SIZE_MAX, so it is a valid index.
        self.node_ids[(key & !KEY_HASH_MASK) as usize]
    }
}

/// For every partition, the nodes that hold it: master first, then replicas in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaTable {
    replication_factor: usize,
    /// `PARTITION_COUNT` rows of `replication_factor` nodes, row `pid` first at
    /// `pid * replication_factor`.
    node_ids: Vec<NodeId>,
}

impl ReplicaTable {
    /// The effective replication factor: nodes per partition, `min(configured, node count)`.
    pub fn replication_factor(&self) -> usize {
        self.replication_factor
    }

    /// The nodes that hold `pid`, master first.
    pub fn replicas(&self, pid: PartitionId) -> &[NodeId] {
        let start = pid.index() * self.replication_factor;
        &self.node_ids[start..start + self.replication_factor]
    }

    /// The master of `pid`, or `None` when the cluster has no node.
    pub fn master(&self, pid: PartitionId) -> Option<NodeId> {
        self.replicas(pid).first().copied()
    }

    /// Every row in partition order, each master first.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = &[NodeId]> + '_ {
        let width = self.replication_factor;
        (0..PARTITION_COUNT).map(move |pid| &self.node_ids[pid * width..(pid + 1) * width])
    }
}

/// FNV-1a, 64-bit: Aerospike's `cf_hash_fnv64`.
fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV1A_64_OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV1A_64_PRIME)
    })
}

/// Feeds bytes into a Jenkins one-at-a-time hash held in 64 bits (Aerospike's
/// `cf_hash_jen64` before its final mix). The state starts at 0.
fn jenkins_absorb(state: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(state, |mut hash, &byte| {
        hash = hash.wrapping_add(u64::from(byte));
        hash = hash.wrapping_add(hash << 10);
        hash ^ (hash >> 6)
    })
}

/// The final mix of the Jenkins one-at-a-time hash.
fn jenkins_finish(state: u64) -> u64 {
    let mut hash = state.wrapping_add(state << 3);
    hash ^= hash >> 11;
    hash.wrapping_add(hash << 15)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The node ids Aerospike's docs and `cluster.md` use for a three-node example.
    fn three_reference_nodes() -> Vec<NodeId> {
        vec![
            NodeId(0xBB9030011AC4202),
            NodeId(0xBB9020011AC4202),
            NodeId(0xBB9010011AC4202),
        ]
    }

    /// Node ids shaped like Aerospike's defaults (MAC and port), varied in the middle.
    fn nodes(count: u64) -> Vec<NodeId> {
        (1..=count)
            .map(|n| NodeId(0xBB90000_11AC4202 | (n * 0x1_0011_0000)))
            .collect()
    }

    fn succession(node_ids: &[NodeId]) -> Succession {
        Succession::new(node_ids.iter().copied()).expect("within the cluster size limit")
    }

    fn master_counts(table: &ReplicaTable) -> HashMap<NodeId, usize> {
        let mut counts = HashMap::new();
        for pid in PartitionId::all() {
            let master = table.master(pid).expect("a non-empty cluster");
            *counts.entry(master).or_insert(0) += 1;
        }
        counts
    }

    fn jenkins_64(bytes: &[u8]) -> u64 {
        jenkins_finish(jenkins_absorb(0, bytes))
    }

    #[test]
    fn fnv1a_64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn jenkins_64_keeps_the_32_bit_published_vector_in_its_low_bits_when_nothing_overflows() {
        // For "a" no intermediate value reaches 2^32 before the last shift, so the 64-bit
        // variant equals the published 32-bit one (0xca2e9442) plus the bits above 32.
        assert_eq!(jenkins_64(b"a"), 0x6_ca2e_9442);
        assert_eq!(jenkins_64(b""), 0);
    }

    /// `cluster.md` quotes these counts from an independent re-implementation of Aerospike's
    /// `fill_global_tables` with the hash functions of aerospike-common.
    #[test]
    fn three_reference_nodes_get_the_master_counts_aerospike_gives_them() {
        let table = succession(&three_reference_nodes()).replica_table(1);
        let counts = master_counts(&table);
        assert_eq!(counts[&NodeId(0xBB9030011AC4202)], 1385);
        assert_eq!(counts[&NodeId(0xBB9020011AC4202)], 1370);
        assert_eq!(counts[&NodeId(0xBB9010011AC4202)], 1341);
    }

    #[test]
    fn third_reference_node_leaving_moves_exactly_its_1341_masters() {
        let nodes = three_reference_nodes();
        let before = succession(&nodes).replica_table(1);
        let after = succession(&nodes[..2]).replica_table(1);
        let moved: Vec<PartitionId> = PartitionId::all()
            .filter(|&pid| before.master(pid) != after.master(pid))
            .collect();
        assert_eq!(moved.len(), 1341);
        assert!(
            moved
                .iter()
                .all(|&pid| before.master(pid) == Some(NodeId(0xBB9010011AC4202)))
        );
    }

    #[test]
    fn three_nodes_share_masters_within_five_percent_of_an_even_split() {
        let even = PARTITION_COUNT as f64 / 3.0;
        for node_ids in [three_reference_nodes(), nodes(3)] {
            let counts = master_counts(&succession(&node_ids).replica_table(2));
            assert_eq!(counts.len(), 3);
            for (node_id, count) in counts {
                let deviation = (count as f64 - even).abs() / even;
                assert!(deviation <= 0.05, "{node_id} masters {count} partitions");
            }
        }
    }

    /// Rendezvous hashing's promise: a departing node vacates its slots and every other
    /// node keeps its relative order, so only rows where it sat among the first RF change.
    #[test]
    fn removing_a_node_changes_only_the_rows_where_it_held_a_copy() {
        let node_ids = nodes(5);
        let removed = node_ids[2];
        let remaining: Vec<NodeId> = node_ids.iter().copied().filter(|&n| n != removed).collect();
        let (full, reduced) = (succession(&node_ids), succession(&remaining));
        for replication_factor in [1, 2] {
            let before = full.replica_table(replication_factor);
            let after = reduced.replica_table(replication_factor);
            let mut changed = 0;
            for pid in PartitionId::all() {
                let held = before.replicas(pid).contains(&removed);
                assert_eq!(held, before.replicas(pid) != after.replicas(pid), "{pid:?}");
                changed += usize::from(held);
            }
            assert!(changed > 0);
        }
        for pid in PartitionId::all() {
            let mut expected = full.node_sequence(pid);
            expected.retain(|&n| n != removed);
            assert_eq!(reduced.node_sequence(pid), expected, "{pid:?}");
        }
    }

    #[test]
    fn adding_a_node_moves_about_one_nth_of_masters_all_to_the_new_node() {
        let node_ids = nodes(5);
        let added = node_ids[4];
        let before = succession(&node_ids[..4]).replica_table(1);
        let after = succession(&node_ids).replica_table(1);
        let moved: Vec<PartitionId> = PartitionId::all()
            .filter(|&pid| before.master(pid) != after.master(pid))
            .collect();
        assert!(moved.iter().all(|&pid| after.master(pid) == Some(added)));
        let even = PARTITION_COUNT as f64 / 5.0;
        let deviation = (moved.len() as f64 - even).abs() / even;
        assert!(deviation <= 0.1, "{} masters moved", moved.len());
    }

    #[test]
    fn placement_ignores_the_order_and_repeats_of_the_given_node_ids() {
        let node_ids = nodes(6);
        let mut shuffled = node_ids.clone();
        shuffled.reverse();
        shuffled.swap(1, 4);
        shuffled.push(node_ids[3]);
        let (a, b) = (succession(&node_ids), succession(&shuffled));
        assert_eq!(a, b);
        assert_eq!(a.replica_table(3), b.replica_table(3));
        assert!(a.node_ids().windows(2).all(|pair| pair[0] > pair[1]));
        assert_eq!(a.principal(), Some(node_ids[5]));
        assert_eq!(a.position(node_ids[5]), Some(0));
        assert_eq!(a.position(NodeId(1)), None);
    }

    #[test]
    fn every_row_holds_distinct_nodes_and_the_effective_replication_factor_caps_at_node_count() {
        let node_ids = nodes(3);
        let succession = succession(&node_ids);
        assert_eq!(succession.replica_table(2).replication_factor(), 2);
        let table = succession.replica_table(5);
        assert_eq!(table.replication_factor(), 3);
        assert_eq!(table.rows().len(), PARTITION_COUNT);
        for (row, pid) in table.rows().zip(PartitionId::all()) {
            assert_eq!(row, succession.node_sequence(pid));
            let mut sorted = row.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 3);
        }
    }

    #[test]
    fn an_empty_cluster_places_nothing() {
        let succession = succession(&[]);
        let table = succession.replica_table(2);
        assert_eq!(table.replication_factor(), 0);
        assert_eq!(table.master(PartitionId(7)), None);
        assert_eq!(table.rows().len(), PARTITION_COUNT);
        assert!(table.rows().all(|row| row.is_empty()));
        assert!(succession.node_sequence(PartitionId(0)).is_empty());
    }

    #[test]
    fn more_nodes_than_the_cluster_size_limit_are_refused() {
        let too_many = (1..=CLUSTER_SIZE_MAX as u64 + 1).map(NodeId);
        assert_eq!(
            Succession::new(too_many),
            Err(PlacementError::TooManyNodes {
                node_count: CLUSTER_SIZE_MAX + 1
            })
        );
        let largest = (1..=CLUSTER_SIZE_MAX as u64).map(NodeId);
        let succession = Succession::new(largest).expect("exactly at the limit");
        let table = succession.replica_table(2);
        let counts = master_counts(&table);
        assert_eq!(counts.len(), CLUSTER_SIZE_MAX);
    }
}
