//! The bins of a record while a write transaction changes them.
//!
//! Values borrow from the stored record or the request where they can; only values a write
//! computes (an increment, an append) own their bytes. Up to eight bins live on the stack.
//!
//! Invariants:
//! - Bin names are unique within a working record.
//! - No bin holds particle type NULL (a NULL write removes the bin instead).

use smallvec::SmallVec;

use crate::record::{BinIter, BinRef};

/// A bin value during a write.
#[derive(Clone, Debug)]
pub(crate) enum WorkingValue<'a> {
    /// Bytes from the stored record or the request.
    Borrowed(&'a [u8]),
    /// An 8-byte number computed by the write (integer or float).
    Inline([u8; 8]),
    /// Bytes computed by the write (append, prepend).
    Owned(Vec<u8>),
}

impl WorkingValue<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            WorkingValue::Borrowed(bytes) => bytes,
            WorkingValue::Inline(bytes) => bytes,
            WorkingValue::Owned(bytes) => bytes,
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
    bins: SmallVec<[WorkingBin<'a>; 8]>,
}

impl<'a> WorkingRecord<'a> {
    /// Starts from the bins of a stored record.
    pub(crate) fn from_bins(bins: BinIter<'a>) -> WorkingRecord<'a> {
        let bins = bins
            .map(|bin| WorkingBin {
                name: bin.name,
                particle_type: bin.particle_type,
                value: WorkingValue::Borrowed(bin.value),
            })
            .collect();
        WorkingRecord { bins }
    }

    pub(crate) fn get(&self, name: &[u8]) -> Option<BinRef<'_>> {
        self.position(name).map(|index| self.bin_ref(index))
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
            Some(index) => self.bins[index] = bin,
            None => self.bins.push(bin),
        }
    }

    pub(crate) fn remove(&mut self, name: &[u8]) {
        if let Some(index) = self.position(name) {
            self.bins.remove(index);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.bins.clear();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bins.is_empty()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = BinRef<'_>> + Clone {
        (0..self.bins.len()).map(|index| self.bin_ref(index))
    }

    fn position(&self, name: &[u8]) -> Option<usize> {
        self.bins.iter().position(|bin| bin.name == name)
    }

    fn bin_ref(&self, index: usize) -> BinRef<'_> {
        let bin = &self.bins[index];
        BinRef {
            name: bin.name,
            particle_type: bin.particle_type,
            value: bin.value.bytes(),
        }
    }
}
