//! List commands. A list is a native double-ended queue of elements, shown to Aerospike
//! clients as one LIST bin named `list` (see `docs/internals/redis-mapping.md`).

use std::collections::VecDeque;

use engine::{BinWriter, NativeValue};
use model::ParticleType;

use super::collection::Collection;
use super::commands::Command;
use super::msgpack::{self, Reader};

/// The list commands.
pub const COMMANDS: &[Command] = &[];

/// Bytes one element costs beyond its own bytes: its boxed slice in the deque.
const ELEMENT_OVERHEAD_BYTES: usize = 16;

/// A Redis list.
#[derive(Debug, Default)]
pub struct ListValue {
    elements: VecDeque<Box<[u8]>>,
    size_bytes: usize,
}

impl ListValue {
    /// Appends `element` at the tail.
    pub fn push_back(&mut self, element: &[u8]) {
        self.size_bytes += element.len() + ELEMENT_OVERHEAD_BYTES;
        self.elements.push_back(element.into());
    }

    /// The LIST bin's msgpack.
    fn encoded(&self) -> Vec<u8> {
        let mut encoded = Vec::new();
        msgpack::write_array_len(&mut encoded, self.elements.len());
        for element in &self.elements {
            msgpack::write_bytes(&mut encoded, element);
        }
        encoded
    }
}

impl NativeValue for ListValue {
    fn write_bins(&self, out: &mut BinWriter) {
        out.bin(Self::BIN, Self::PARTICLE as u8, &self.encoded());
    }

    fn size_bytes(&self) -> usize {
        self.size_bytes
    }
}

impl Collection for ListValue {
    const BIN: &'static [u8] = b"list";
    const PARTICLE: ParticleType = ParticleType::List;
    const TYPE_NAME: &'static str = "list";

    fn decode(value: &[u8]) -> Option<ListValue> {
        let mut reader = Reader::new(value);
        let count = reader.array_len()?;
        let mut list = ListValue::default();
        for _ in 0..count {
            list.push_back(&reader.scalar()?.to_bytes());
        }
        reader.is_done().then_some(list)
    }

    fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }
}
