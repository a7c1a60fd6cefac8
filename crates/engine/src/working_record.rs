//! The bins of a record while a write transaction changes them.
//!
//! Values borrow from the stored record or the request where they can; only values a write
//! computes (an increment, an append) own their bytes. Up to eight bins live on the stack.
//!
//! A bin is found by name by scanning while that is cheap, and through a name → slot map once
//! the scans have cost more than building it ([`crate::bin_lookup`]), so a write of k ops on n
//! bins costs O(n + k). While the map exists, a removed bin leaves an empty slot, so that no
//! other bin moves: the map stays right and removing costs O(1). Either way the bins keep the
//! order they were written in, as they had before.
//!
//! Invariants:
//! - Bin names are unique within a working record.
//! - No bin holds particle type NULL (a NULL write removes the bin instead).
//! - `bin_count` is the number of occupied slots.
//! - Without a map, no slot is empty; with one, it holds exactly the occupied slots' names, each
//!   with its slot.

use std::collections::HashMap;

use smallvec::SmallVec;

use crate::bin_lookup;
use crate::record::{BinIter, BinRef};

/// A bin value during a write.
#[derive(Clone, Debug)]
pub(crate) enum WorkingValue<'a> {
    /// Bytes from the stored record or the request.
    Borrowed(&'a [u8]),
    /// An 8-byte number computed by the write (integer or float).
    Inline([u8; 8]),
    /// Bytes computed by the write (append, prepend): the value is `buffer[start..]`. The room
    /// kept in front makes repeated prepends, like repeated appends, cost amortized O(bytes
    /// added) rather than a copy of the whole value each.
    Owned { buffer: Vec<u8>, start: usize },
}

impl WorkingValue<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            WorkingValue::Borrowed(bytes) => bytes,
            WorkingValue::Inline(bytes) => bytes,
            WorkingValue::Owned { buffer, start } => &buffer[*start..],
        }
    }

    /// Joins `bytes` after the value, or before it if `before`.
    pub(crate) fn concat(&mut self, bytes: &[u8], before: bool) {
        match self {
            WorkingValue::Owned { buffer, .. } if !before => buffer.extend_from_slice(bytes),
            WorkingValue::Owned { buffer, start } if *start >= bytes.len() => {
                *start -= bytes.len();
                buffer[*start..*start + bytes.len()].copy_from_slice(bytes);
            }
            _ => {
                let value = self.bytes();
                let joined_len = value.len() + bytes.len();
                // Room in front for as many bytes as the value then holds, so that the value
                // at most doubles between two copies, whichever end it grows at.
                let room = if before { joined_len } else { 0 };
                let mut buffer = Vec::with_capacity(room + joined_len);
                buffer.resize(room, 0);
                if before {
                    buffer.extend_from_slice(bytes);
                    buffer.extend_from_slice(value);
                } else {
                    buffer.extend_from_slice(value);
                    buffer.extend_from_slice(bytes);
                }
                *self = WorkingValue::Owned {
                    buffer,
                    start: room,
                };
            }
        }
    }
}

#[derive(Clone, Debug)]
struct WorkingBin<'a> {
    name: &'a [u8],
    particle_type: u8,
    value: WorkingValue<'a>,
}

/// The bin set of a record being written.
#[derive(Debug, Default)]
pub(crate) struct WorkingRecord<'a> {
    /// The bins in order; `None` where a bin was removed while `positions` existed.
    slots: SmallVec<[Option<WorkingBin<'a>>; 8]>,
    bin_count: usize,
    /// Name → slot, once scanning has cost more than building it.
    positions: Option<HashMap<&'a [u8], usize>>,
    /// Names compared by scans so far.
    compared_names: usize,
}

impl<'a> WorkingRecord<'a> {
    /// Starts from the bins of a stored record.
    pub(crate) fn from_bins(bins: BinIter<'a>) -> WorkingRecord<'a> {
        let slots: SmallVec<[Option<WorkingBin<'a>>; 8]> = bins
            .map(|bin| {
                Some(WorkingBin {
                    name: bin.name,
                    particle_type: bin.particle_type,
                    value: WorkingValue::Borrowed(bin.value),
                })
            })
            .collect();
        WorkingRecord {
            bin_count: slots.len(),
            slots,
            positions: None,
            compared_names: 0,
        }
    }

    pub(crate) fn get(&mut self, name: &[u8]) -> Option<BinRef<'_>> {
        self.position(name).map(|slot| self.bin_ref(slot))
    }

    /// The particle type and value of the bin called `name`, to change in place.
    pub(crate) fn value_mut(&mut self, name: &[u8]) -> Option<(u8, &mut WorkingValue<'a>)> {
        let slot = self.position(name)?;
        let bin = self.slots[slot]
            .as_mut()
            .expect("a position found by name is occupied");
        Some((bin.particle_type, &mut bin.value))
    }

    /// Sets (creates or overwrites) a bin.
    pub(crate) fn set(&mut self, name: &'a [u8], particle_type: u8, value: WorkingValue<'a>) {
        assert!(particle_type != 0, "NULL removes a bin, it is never stored");
        let bin = WorkingBin {
            name,
            particle_type,
            value,
        };
        match self.position(name) {
            Some(slot) => self.slots[slot] = Some(bin),
            None => {
                if let Some(positions) = &mut self.positions {
                    positions.insert(name, self.slots.len());
                }
                self.slots.push(Some(bin));
                self.bin_count += 1;
            }
        }
    }

    pub(crate) fn remove(&mut self, name: &[u8]) {
        let Some(slot) = self.position(name) else {
            return;
        };
        match &mut self.positions {
            Some(positions) => {
                positions.remove(name);
                self.slots[slot] = None;
            }
            None => {
                self.slots.remove(slot);
                // Shifting the bins after it costs about a comparison each: many removes from
                // a big record build the map (and leave empty slots) however early they find
                // their bins.
                self.compared_names += self.slots.len() - slot;
            }
        }
        self.bin_count -= 1;
    }

    pub(crate) fn clear(&mut self) {
        *self = WorkingRecord::default();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bin_count == 0
    }

    /// How many bins it holds.
    pub(crate) fn bin_count(&self) -> usize {
        self.bin_count
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = BinRef<'_>> + Clone {
        self.slots.iter().flatten().map(WorkingBin::bin_ref)
    }

    fn position(&mut self, name: &[u8]) -> Option<usize> {
        if let Some(positions) = &self.positions {
            return positions.get(name).copied();
        }
        // Without a map no slot is empty, so the first slot holding the name is the only one.
        let found = self
            .slots
            .iter()
            .position(|slot| slot.as_ref().is_some_and(|bin| bin.name == name));
        self.compared_names += found.map_or(self.slots.len(), |slot| slot + 1);
        if bin_lookup::map_pays_off(self.compared_names, self.slots.len()) {
            let positions = self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(slot, bin)| bin.as_ref().map(|bin| (bin.name, slot)))
                .collect();
            self.positions = Some(positions);
        }
        found
    }

    fn bin_ref(&self, slot: usize) -> BinRef<'_> {
        self.slots[slot]
            .as_ref()
            .expect("a position found by name is occupied")
            .bin_ref()
    }
}

impl WorkingBin<'_> {
    fn bin_ref(&self) -> BinRef<'_> {
        BinRef {
            name: self.name,
            particle_type: self.particle_type,
            value: self.value.bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(working: &WorkingRecord<'_>) -> Vec<Vec<u8>> {
        working.iter().map(|bin| bin.name.to_vec()).collect()
    }

    /// The same sets and removes, on a record small enough to be scanned and on one big enough
    /// to get a map, leave the bins in the same order: written order, a removed and rewritten
    /// bin last.
    #[test]
    fn bins_keep_their_written_order_with_or_without_a_map() {
        let owned: Vec<Vec<u8>> = (0..200).map(|i| format!("b{i}").into_bytes()).collect();
        for bin_count in [3, 200] {
            let mut working = WorkingRecord::default();
            for name in &owned[..bin_count] {
                working.set(name, 3, WorkingValue::Borrowed(name));
            }
            for _ in 0..5 {
                assert!(working.get(&owned[bin_count - 1]).is_some());
            }
            working.remove(&owned[0]);
            working.remove(b"absent");
            working.set(&owned[0], 3, WorkingValue::Borrowed(b"again"));
            working.set(&owned[1], 3, WorkingValue::Borrowed(b"changed"));
            let mut expected: Vec<Vec<u8>> = owned[1..bin_count].to_vec();
            expected.push(owned[0].clone());
            assert_eq!(names(&working), expected);
            assert_eq!(working.bin_count(), bin_count);
            assert_eq!(working.get(&owned[0]).unwrap().value, b"again");
            assert_eq!(working.get(&owned[1]).unwrap().value, b"changed");
            assert_eq!(working.positions.is_some(), bin_count == 200);
        }
    }

    /// The bug: each lookup scanned every bin, so a put of 32,767 distinct bins compared about
    /// 5 × 10^8 names (2 s), and so did an operate reading them all back. Now the scans stop
    /// paying once they cost more than a map; this would take minutes the old way in a debug
    /// build.
    #[test]
    fn writing_removing_and_reading_32k_bins_stays_linear() {
        let owned: Vec<Vec<u8>> = (0..32_767).map(|i| format!("{i}").into_bytes()).collect();
        let mut working = WorkingRecord::default();
        for name in &owned {
            working.set(name, 3, WorkingValue::Borrowed(name));
        }
        for name in owned.iter().rev() {
            assert_eq!(working.get(name).unwrap().value, &name[..]);
        }
        for name in owned.iter().step_by(2) {
            working.remove(name);
        }
        assert_eq!(working.bin_count(), 16_383);
        let left: Vec<Vec<u8>> = owned.iter().skip(1).step_by(2).cloned().collect();
        assert_eq!(names(&working), left);
        working.clear();
        assert!(working.is_empty());
        assert_eq!(working.iter().count(), 0);
    }

    /// The bug's second half: removes that each found their bin at once (the first of a big
    /// stored record, in order) never made the scans costly, but each shifted every bin after
    /// it: 16,384 removes from a 32,767-bin record took half a second. Shifting now counts
    /// towards building the map, after which a remove leaves an empty slot.
    #[test]
    fn removing_bins_from_the_front_of_a_big_stored_record_stays_linear() {
        let owned: Vec<Vec<u8>> = (0..32_767).map(|i| format!("{i}").into_bytes()).collect();
        let slots: SmallVec<[Option<WorkingBin<'_>>; 8]> = owned
            .iter()
            .map(|name| {
                Some(WorkingBin {
                    name,
                    particle_type: 3,
                    value: WorkingValue::Borrowed(name),
                })
            })
            .collect();
        let mut working = WorkingRecord {
            bin_count: slots.len(),
            slots,
            positions: None,
            compared_names: 0,
        };
        for name in &owned[..16_384] {
            working.remove(name);
        }
        assert!(working.positions.is_some());
        assert_eq!(names(&working), owned[16_384..].to_vec());
    }
}
