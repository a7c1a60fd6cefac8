//! libFuzzer entry point of target `aerospike_message` (see `crates/fuzz-targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::aerospike::aerospike_message(data));
