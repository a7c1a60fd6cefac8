//! [`List`]: a sequence field of a message (peer ids, addresses, records), read lazily from
//! the decoded bytes or taken from the caller's slice for encoding.
//!
//! Wire form: a u32 count, then that many items back to back, each self-delimiting.
//!
//! Invariants:
//! - A list in wire form exists only over bytes that decoding validated: exactly its count of
//!   items, each within its limits. Iterating therefore cannot fail, and allocates nothing.
//! - Two lists are equal when they yield equal items in the same order, whichever form each
//!   is in.

use crate::Malformed;
use crate::limits::ADDRESS_BYTES_MAX;
use crate::reader::Reader;
use crate::writer::{put_name, put_size, put_u64};

/// A sequence of `T` inside a message. Decoding yields the wire form, a view over the frame's
/// bytes; [`List::from_items`] wraps a slice for encoding. Either form iterates with
/// [`List::iter`].
#[derive(Clone, Copy)]
pub struct List<'a, T> {
    repr: Repr<'a, T>,
}

#[derive(Clone, Copy)]
enum Repr<'a, T> {
    /// Validated encoded items (without the count).
    Wire { bytes: &'a [u8], count: usize },
    /// The caller's items.
    Items(&'a [T]),
}

/// An item a [`List`] can hold: a peer node id (`u64`), an address (`&str`, at most
/// [`ADDRESS_BYTES_MAX`] bytes) or a [`crate::RecordVersion`]. Sealed: its module is private.
pub trait ListItem<'a>: Copy + PartialEq + std::fmt::Debug + 'a {
    /// Reads one item, checking its limits.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when the item runs past the body or breaks a limit.
    fn read(reader: &mut Reader<'a>) -> Result<Self, Malformed>;

    /// Appends one item.
    ///
    /// # Panics
    ///
    /// If the item breaks a limit the decoder enforces.
    fn write(&self, out: &mut Vec<u8>);
}

impl<'a, T> List<'a, T> {
    /// A list of the caller's `items`, for encoding.
    pub const fn from_items(items: &'a [T]) -> List<'a, T> {
        List {
            repr: Repr::Items(items),
        }
    }

    /// How many items the list holds.
    pub fn len(&self) -> usize {
        match self.repr {
            Repr::Wire { count, .. } => count,
            Repr::Items(items) => items.len(),
        }
    }

    /// Whether the list holds no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a, T: ListItem<'a>> List<'a, T> {
    /// The items in order. Cheap: a cursor over the bytes or the slice.
    pub fn iter(&self) -> ListIter<'a, T> {
        let repr = match self.repr {
            Repr::Wire { bytes, count } => IterRepr::Wire {
                reader: Reader::new(bytes),
                count_remaining: count,
            },
            Repr::Items(items) => IterRepr::Items(items.iter()),
        };
        ListIter { repr }
    }

    /// Reads a count (at most `count_max`) and validates that many items.
    pub(crate) fn read(
        reader: &mut Reader<'a>,
        count_max: usize,
        too_many: &'static str,
    ) -> Result<List<'a, T>, Malformed> {
        let count = reader.size()?;
        if count > count_max {
            return Err(Malformed::new(too_many));
        }
        let start = reader.rest();
        // Each item read consumes bytes or fails, so a count larger than the body can hold
        // ends in an error after at most one turn per byte, and nothing is reserved by it.
        for _ in 0..count {
            T::read(reader)?;
        }
        let size_bytes = start.len() - reader.rest().len();
        let bytes = &start[..size_bytes];
        Ok(List {
            repr: Repr::Wire { bytes, count },
        })
    }

    /// Appends the count and the items.
    ///
    /// # Panics
    ///
    /// If the list holds more than `count_max` items, or an item breaks its limits.
    pub(crate) fn write(&self, out: &mut Vec<u8>, count_max: usize, what: &str) {
        assert!(
            self.len() <= count_max,
            "{what} holds {} items, over the limit of {count_max}",
            self.len()
        );
        put_size(out, self.len());
        match self.repr {
            // Decoding validated these bytes, so they are re-sent as they came.
            Repr::Wire { bytes, .. } => out.extend_from_slice(bytes),
            Repr::Items(items) => items.iter().for_each(|item| item.write(out)),
        }
    }
}

impl<'a, T: ListItem<'a>> PartialEq for List<'a, T> {
    fn eq(&self, other: &List<'a, T>) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<'a, T: ListItem<'a> + Eq> Eq for List<'a, T> {}

impl<'a, T: ListItem<'a>> std::fmt::Debug for List<'a, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a, T> From<&'a [T]> for List<'a, T> {
    fn from(items: &'a [T]) -> List<'a, T> {
        List::from_items(items)
    }
}

/// The items of a [`List`], in order.
#[derive(Clone, Debug)]
pub struct ListIter<'a, T> {
    repr: IterRepr<'a, T>,
}

#[derive(Clone, Debug)]
enum IterRepr<'a, T> {
    Wire {
        reader: Reader<'a>,
        count_remaining: usize,
    },
    Items(std::slice::Iter<'a, T>),
}

impl<'a, T: ListItem<'a>> Iterator for ListIter<'a, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match &mut self.repr {
            IterRepr::Wire {
                reader,
                count_remaining,
            } => {
                if *count_remaining == 0 {
                    return None;
                }
                *count_remaining -= 1;
                let item = T::read(reader).expect("a decoded list holds only items it validated");
                Some(item)
            }
            IterRepr::Items(items) => items.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let remaining = match &self.repr {
            IterRepr::Wire {
                count_remaining, ..
            } => *count_remaining,
            IterRepr::Items(items) => items.len(),
        };
        (remaining, Some(remaining))
    }
}

impl<'a, T: ListItem<'a>> ExactSizeIterator for ListIter<'a, T> {}

impl<'a, T: ListItem<'a>> std::iter::FusedIterator for ListIter<'a, T> {}

/// A peer node id: 8 bytes.
impl<'a> ListItem<'a> for u64 {
    fn read(reader: &mut Reader<'a>) -> Result<u64, Malformed> {
        reader.u64()
    }

    fn write(&self, out: &mut Vec<u8>) {
        put_u64(out, *self);
    }
}

/// An address, `host:port`: a u32-length-prefixed UTF-8 text of at most
/// [`ADDRESS_BYTES_MAX`] bytes.
impl<'a> ListItem<'a> for &'a str {
    fn read(reader: &mut Reader<'a>) -> Result<&'a str, Malformed> {
        reader.text(ADDRESS_BYTES_MAX, "address over 259 bytes")
    }

    fn write(&self, out: &mut Vec<u8>) {
        put_name(out, self.as_bytes(), ADDRESS_BYTES_MAX, "address");
    }
}

/// Writes an address outside a list (a `Hello`'s fabric address), with the same limit.
pub(crate) fn put_address(out: &mut Vec<u8>, address: &str) {
    address.write(out);
}
