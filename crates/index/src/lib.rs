//! Index structures for Osprey.
//!
//! What it holds: the primary index of one partition, mapping a [`model::Digest`] to an entry.
//! Set indexes and secondary indexes will live here too.
//!
//! Layer 2: depends on `model` and std only; never on `storage` (on a cold start the engine
//! rebuilds indexes from what storage yields). No locking here: the engine owns one primary
//! index per partition behind that partition's lock.
//!
//! Invariants:
//! - Iteration is in ascending digest order, so a partition scan can resume strictly after a
//!   digest it handed out earlier (see `docs/internals/data-model.md`).
//!
//! Why a `BTreeMap`: it keeps digest order at about 80 bytes per entry and serves over 2M
//! lookups per second on two cores (measurements in the dependency report); a hash table is
//! faster per lookup but costs more memory and needs a sort before every scan.

mod primary_index;

pub use primary_index::PrimaryIndex;
