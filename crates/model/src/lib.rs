//! The data model shared by every layer of Osprey.
//!
//! What it holds: the 20-byte [`Digest`] that addresses a record, the [`PartitionId`] derived
//! from it, user keys, particle types, operations as the wire carries them, generations, void
//! times, result codes and the limits Aerospike clients expect.
//!
//! Layer 1: depends on std and `ripemd` only. No I/O, no async, no allocation on the hot path.
//!
//! Invariants:
//! - A digest is computed exactly as the official Aerospike clients compute it
//!   (RIPEMD-160 over set name, key particle type, key bytes); see `docs/internals/data-model.md`.
//! - A partition id is always below [`PARTITION_COUNT`].
//! - A [`Generation`] stored with a record is never 0; it wraps from `u16::MAX` to 1.

mod digest;
mod limits;
mod node_id;
mod op;
mod particle;
mod result_code;
mod time;
mod user_key;

pub use digest::{Digest, PARTITION_COUNT, PartitionId};
pub use limits::*;
pub use node_id::{NodeId, ParseNodeIdError};
pub use op::{Op, OpCode};
pub use particle::ParticleType;
pub use result_code::ResultCode;
pub use time::{CITRUSLEAF_EPOCH_UNIX_SECONDS, Generation, TtlRequest, VoidTime};
pub use user_key::UserKey;
