//! libFuzzer entry point of target `aerospike_batch` (see `crates/fuzz-targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::aerospike::aerospike_batch(data));
