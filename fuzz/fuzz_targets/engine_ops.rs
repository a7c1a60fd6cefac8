//! libFuzzer entry point of target `engine_ops` (see `crates/fuzz-targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::engine_ops::engine_ops(data));
