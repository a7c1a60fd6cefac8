//! Running out of room: refusing writes above the memory threshold, and evicting the records
//! soonest to expire above the eviction thresholds.
//!
//! The server samples the machine's memory use and reports it ([`Namespace::note_memory_used_pct`]);
//! the device's use comes from its storage. Eviction, as in Aerospike, only ever removes records
//! that have a TTL: each round removes `evict-tenths-pct` thousandths of them, those with the
//! soonest void times, so that records that would expire first go first and records that never
//! expire are never evicted. An evicted record of a device namespace leaves a tombstone, so it
//! does not come back at a cold start.
//!
//! Invariants:
//! - A record without a TTL is never evicted.
//! - Nothing is evicted while every threshold is 0 (the defaults for eviction).

use std::sync::atomic::Ordering;

use model::VoidTime;

use crate::namespace::Namespace;
use crate::stats::Counter;

impl Namespace {
    /// Records the machine's memory use, sampled by the server.
    pub fn note_memory_used_pct(&self, pct: u8) {
        self.memory_used_pct.store(pct, Ordering::Relaxed);
    }

    /// Whether client writes are refused because the machine's memory use is above
    /// `stop-writes-sys-memory-pct`.
    pub(crate) fn memory_stop_writes(&self) -> bool {
        let limit = self.config.stop_writes_sys_memory_pct;
        limit != 0 && self.memory_used_pct.load(Ordering::Relaxed) >= limit
    }

    /// Whether use is above an eviction threshold.
    pub fn should_evict(&self) -> bool {
        let config = &self.config;
        let memory = config.evict_sys_memory_pct != 0
            && self.memory_used_pct.load(Ordering::Relaxed) >= config.evict_sys_memory_pct;
        let device = config.evict_used_pct != 0
            && self.storage_stats().is_some_and(|stats| {
                stats.used_bytes * 100 >= stats.total_bytes * u64::from(config.evict_used_pct)
            });
        memory || device
    }

    /// Evicts one round of the records soonest to expire if use is above a threshold; returns
    /// how many records went.
    pub fn evict_if_needed(&self) -> u64 {
        if !self.should_evict() {
            return 0;
        }
        let Some(cutoff) = self.eviction_cutoff() else {
            tracing::warn!(
                namespace = self.name(),
                "above the eviction threshold, but no record has a TTL: nothing can be evicted"
            );
            return 0;
        };
        self.remove_everywhere(Counter::EvictedObjects, |record| {
            record.void_time != VoidTime::NEVER && record.void_time <= cutoff
        })
    }

    /// The void time at or before which this round's share of the records with a TTL expires.
    fn eviction_cutoff(&self) -> Option<VoidTime> {
        let mut void_times: Vec<u32> = Vec::new();
        for slot in &self.partitions {
            slot.state.read().each_void_time(|void_time| {
                if void_time != VoidTime::NEVER {
                    void_times.push(void_time.0);
                }
            });
        }
        if void_times.is_empty() {
            return None;
        }
        let share = void_times.len() * usize::from(self.config.evict_tenths_pct) / 1000;
        let last = share.clamp(1, void_times.len()) - 1;
        let (_, cutoff, _) = void_times.select_nth_unstable(last);
        Some(VoidTime(*cutoff))
    }
}
