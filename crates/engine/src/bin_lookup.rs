//! Finding bins by name in O(1) once scanning would cost more, so that a request of k ops on a
//! record of n bins costs O(n + k) rather than O(n × k), while a record of a few bins pays
//! nothing for it.
//!
//! Lookups scan the bins in order and count the names they compare. Once that count passes
//! what building a name map would cost ([`map_pays_off`]), the caller builds the map and looks
//! names up in it from then on. The scanning done before is at most a constant times the bins
//! plus the one scan that crossed the threshold, so the total stays linear.
//!
//! The maps use the standard library's randomly keyed hasher: bin names come from clients, and
//! a hasher whose collisions a client can choose would bring the quadratic cost back.

use std::collections::HashMap;

use crate::record::{BinIter, BinRef};

/// About how many name comparisons one insert into a name map costs: comparing a name of at
/// most 15 bytes is a few nanoseconds, hashing and inserting it a few tens.
const MAP_COST_IN_COMPARISONS_PER_BIN: usize = 8;

/// Records of up to this many bins are scanned until their scans have cost as much as a map
/// of this many bins would: a scan of a handful of names is cheaper than hashing one.
const SCANNED_BINS_MIN: usize = 8;

/// Whether scans that have compared `compared_names` names, in a record of `bin_count` bins,
/// have cost more than building a name map of it would.
pub(crate) fn map_pays_off(compared_names: usize, bin_count: usize) -> bool {
    compared_names > MAP_COST_IN_COMPARISONS_PER_BIN * bin_count.max(SCANNED_BINS_MIN)
}

/// Finds bins of a stored record by name, for a read of many named bins.
#[derive(Debug)]
pub(crate) struct BinFinder<'a> {
    bins: BinIter<'a>,
    /// Names compared by scans so far.
    compared_names: usize,
    /// The most bins a scan has passed: the record has at least this many.
    bins_seen: usize,
    by_name: Option<HashMap<&'a [u8], BinRef<'a>>>,
}

impl<'a> BinFinder<'a> {
    pub(crate) fn new(bins: BinIter<'a>) -> BinFinder<'a> {
        BinFinder {
            bins,
            compared_names: 0,
            bins_seen: 0,
            by_name: None,
        }
    }

    /// The bin called `name`, if the record has one.
    pub(crate) fn find(&mut self, name: &[u8]) -> Option<BinRef<'a>> {
        if let Some(by_name) = &self.by_name {
            return by_name.get(name).copied();
        }
        let mut compared = 0;
        let found = self.bins.clone().find(|bin| {
            compared += 1;
            bin.name == name
        });
        self.compared_names += compared;
        self.bins_seen = self.bins_seen.max(compared);
        if map_pays_off(self.compared_names, self.bins_seen) {
            // Names are unique within a record, so no bin hides another.
            self.by_name = Some(self.bins.clone().map(|bin| (bin.name, bin)).collect());
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Record, RecordHeader, encode, encoded_size_bytes};
    use model::{Generation, VoidTime};

    #[test]
    fn a_finder_answers_the_same_before_and_after_it_builds_its_map() {
        let names: Vec<Vec<u8>> = (0..100).map(|i| format!("bin{i}").into_bytes()).collect();
        let bins: Vec<BinRef<'_>> = names
            .iter()
            .map(|name| BinRef {
                name,
                particle_type: 3,
                value: name,
            })
            .collect();
        let size = encoded_size_bytes(None, bins.iter().copied());
        let header = RecordHeader {
            last_update_ms: 1,
            void_time: VoidTime::NEVER,
            generation: Generation::FIRST,
            set_id: 0,
        };
        let record = Record::new(header, encode(None, bins.iter().copied(), size));
        let stored = record.bins();
        let mut finder = BinFinder::new(stored.iter());
        for round in 0..20 {
            for name in names.iter().rev() {
                assert_eq!(finder.find(name).map(|bin| bin.value), Some(&name[..]));
            }
            assert_eq!(finder.find(b"missing"), None, "round {round}");
        }
        assert!(
            finder.by_name.is_some(),
            "20 rounds of 100 lookups build the map"
        );
    }
}
