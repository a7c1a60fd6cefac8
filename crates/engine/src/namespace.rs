//! A namespace: configuration, 4096 partitions and the set registry.
//!
//! Invariants:
//! - `partitions.len() == PARTITION_COUNT`, and a digest's record lives only in the partition
//!   its `partition_id()` names.

use std::sync::Arc;

use model::{Digest, PARTITION_COUNT};

use crate::clock::Clock;
use crate::config::NamespaceConfig;
use crate::partition::PartitionSlot;
use crate::sets::{SetRegistry, SetSummary};
use crate::stats::{Counter, NamespaceSummary};

/// One namespace and everything it stores.
pub struct Namespace {
    pub(crate) config: NamespaceConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) partitions: Box<[PartitionSlot]>,
    pub(crate) sets: SetRegistry,
}

impl std::fmt::Debug for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Namespace")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Namespace {
    /// An empty namespace.
    ///
    /// # Panics
    /// If `config` does not validate; callers validate it when loading configuration.
    pub fn new(config: NamespaceConfig, clock: Arc<dyn Clock>) -> Namespace {
        if let Err(reason) = config.validate() {
            panic!("invalid namespace config: {reason}");
        }
        let partitions = (0..PARTITION_COUNT)
            .map(|_| PartitionSlot::default())
            .collect();
        Namespace {
            config,
            clock,
            partitions,
            sets: SetRegistry::new(),
        }
    }

    /// The namespace name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Its configuration.
    pub fn config(&self) -> &NamespaceConfig {
        &self.config
    }

    /// Statistics summed over every partition.
    pub fn summary(&self) -> NamespaceSummary {
        let mut summary = NamespaceSummary::default();
        for slot in &self.partitions {
            let partition = slot.state.read();
            summary.objects += partition.object_count();
            summary.data_used_bytes += partition.data_used_bytes();
            drop(partition);
            summary.add_counters(&slot.counters);
        }
        summary
    }

    /// Every set with its record count, in creation order.
    pub fn sets(&self) -> Vec<SetSummary> {
        self.sets.summaries()
    }

    /// Reclaims every expired record, one partition at a time; returns how many.
    pub fn sweep_expired(&self) -> u64 {
        let now = self.clock.now();
        let mut total = 0;
        for slot in &self.partitions {
            // Readers are only blocked for partitions that really hold expired records.
            if !slot.state.read().has_expired(now) {
                continue;
            }
            let removed = slot.state.write().remove_expired(now, &self.sets);
            slot.counters.add(Counter::ExpiredObjects, removed);
            total += removed;
        }
        total
    }

    pub(crate) fn slot(&self, digest: &Digest) -> &PartitionSlot {
        &self.partitions[digest.partition_id().index()]
    }
}
