//! What this node claims in the `replicas` reply, from the partition table.

use model::{NodeId, PartitionId};
use wire_aerospike::cluster_map::{NamespaceClaims, PartitionBitmap};

use crate::placement::ReplicaTable;

/// The claims of `node_id` where every node holds exactly what `table` assigns it: one column
/// per effective replica.
pub fn claims_from_replica_table(
    name: &str,
    regime: u32,
    table: &ReplicaTable,
    node_id: NodeId,
) -> NamespaceClaims {
    let mut columns = vec![PartitionBitmap::empty(); table.replication_factor()];
    for (row, pid) in table.rows().zip(PartitionId::all()) {
        if let Some(column) = row.iter().position(|&holder| holder == node_id) {
            columns[column].insert(pid);
        }
    }
    NamespaceClaims {
        name: name.to_owned(),
        regime,
        columns,
    }
}

#[cfg(test)]
mod tests {
    use model::PARTITION_COUNT;

    use super::*;
    use crate::placement::Succession;

    #[test]
    fn claims_from_a_replica_table_cover_every_partition_once_per_column() {
        let node_ids = [NodeId(0xBB9030011AC4202), NodeId(0xBB9020011AC4202)];
        let succession = Succession::new(node_ids).expect("two nodes");
        let table = succession.replica_table(2);
        let per_node: Vec<NamespaceClaims> = node_ids
            .iter()
            .map(|&node_id| claims_from_replica_table("test", 0, &table, node_id))
            .collect();
        for column in 0..2 {
            let total: usize = per_node.iter().map(|c| c.columns[column].count()).sum();
            assert_eq!(total, PARTITION_COUNT);
        }
        for pid in PartitionId::all() {
            let master = table.master(pid).expect("two nodes");
            let master_index = node_ids.iter().position(|&n| n == master).expect("member");
            assert!(per_node[master_index].columns[0].contains(pid));
        }
    }
}
