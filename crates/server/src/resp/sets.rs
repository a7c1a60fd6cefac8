//! Set commands. A set is a native set of members, shown to Aerospike clients as one LIST bin
//! named `set` (see `docs/internals/redis-mapping.md`).

use engine::{BinWriter, NativeValue};
use indexmap::IndexSet;
use model::ParticleType;

use super::collection::Collection;
use super::commands::Command;
use super::msgpack::{self, Reader};

/// The set commands.
pub const COMMANDS: &[Command] = &[];

/// Bytes one member costs beyond its own bytes: its boxed slice, hash and index slot.
const MEMBER_OVERHEAD_BYTES: usize = 32;

/// A Redis set. An `IndexSet` so that SPOP and SRANDMEMBER pick a random member in O(1).
#[derive(Debug, Default)]
pub struct SetValue {
    members: IndexSet<Box<[u8]>>,
    size_bytes: usize,
}

impl SetValue {
    /// Adds `member`; returns whether it is new.
    pub fn insert(&mut self, member: &[u8]) -> bool {
        let added = self.members.insert(member.into());
        if added {
            self.size_bytes += member.len() + MEMBER_OVERHEAD_BYTES;
        }
        added
    }

    /// The LIST bin's msgpack.
    fn encoded(&self) -> Vec<u8> {
        let mut encoded = Vec::new();
        msgpack::write_array_len(&mut encoded, self.members.len());
        for member in &self.members {
            msgpack::write_bytes(&mut encoded, member);
        }
        encoded
    }
}

impl NativeValue for SetValue {
    fn write_bins(&self, out: &mut BinWriter) {
        out.bin(Self::BIN, Self::PARTICLE as u8, &self.encoded());
    }

    fn size_bytes(&self) -> usize {
        self.size_bytes
    }
}

impl Collection for SetValue {
    const BIN: &'static [u8] = b"set";
    const PARTICLE: ParticleType = ParticleType::List;
    const TYPE_NAME: &'static str = "set";

    fn decode(value: &[u8]) -> Option<SetValue> {
        let mut reader = Reader::new(value);
        let count = reader.array_len()?;
        let mut set = SetValue::default();
        for _ in 0..count {
            set.insert(&reader.scalar()?.to_bytes());
        }
        reader.is_done().then_some(set)
    }

    fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}
