//! Fuzz targets: one function per target, each taking the fuzzer's bytes and exercising one
//! decoder or entry point while asserting the properties it promises.
//!
//! What it does: [`TARGETS`] lists every target by name. libFuzzer drives them from the
//! separate `fuzz/` package (one binary per target, each a one-line call into this crate, built
//! with coverage instrumentation by `cargo xtask fuzz`), and this crate's own tests replay every
//! file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` through the same functions,
//! so every past finding is a regression test of plain `cargo test`.
//!
//! Layer: test support, above `engine`, `storage`, `wire-aerospike`, `wire-resp`, `wire-fabric`
//! and `model`; nothing depends on it. It is a library so that the fuzzer and `cargo test`
//! share one definition of each target.
//!
//! Invariants:
//! - A target is a pure function of its input: fresh state (a new namespace on a stopped
//!   clock, a new device), no randomness, no wall clock, so any input replays exactly.
//! - A target fails only by panicking (a failed assertion or a panic in the code under test);
//!   it never allocates by a length its input declares.
//! - Inputs are small (libFuzzer's default maximum is 4 KiB), and frame sizes are limited to
//!   [`aerospike::FRAME_BODY_SIZE_BYTES_MAX`] and [`fabric::FRAME_BODY_SIZE_BYTES_MAX`], so
//!   that a declared length can be satisfied.
//!
//! Read `docs/internals/fuzzing.md`: what each target asserts, how to run the fuzzer, and how a
//! finding becomes a regression test.

pub mod aerospike;
pub mod collection_ops;
pub mod engine_ops;
pub mod expressions;
pub mod fabric;
mod fixture;
pub mod generate;
pub mod input;
pub mod msgpack;
pub mod particle;
pub mod resp;
pub mod storage_record;

/// A fuzz target: takes any bytes, panics on a finding.
pub type Target = fn(&[u8]);

/// Every target by name; the name is its folder under `fuzz/corpus/` and `fuzz/regressions/`
/// and its binary in `fuzz/`.
pub const TARGETS: [(&str, Target); 10] = [
    ("aerospike_message", aerospike::aerospike_message),
    ("aerospike_batch", aerospike::aerospike_batch),
    ("resp", resp::resp),
    ("fabric", fabric::fabric),
    ("msgpack", msgpack::msgpack),
    ("particle", particle::particle),
    ("engine_ops", engine_ops::engine_ops),
    ("storage_record", storage_record::storage_record),
    ("collection_ops", collection_ops::collection_ops),
    ("expressions", expressions::expressions),
];

/// The target called `name`, if there is one.
pub fn target(name: &str) -> Option<Target> {
    TARGETS
        .iter()
        .find(|(target_name, _)| *target_name == name)
        .map(|(_, target)| *target)
}
