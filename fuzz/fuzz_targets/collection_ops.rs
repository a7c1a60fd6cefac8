//! libFuzzer entry point of target `collection_ops` (see `crates/fuzz-targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::collection_ops::collection_ops(data));
