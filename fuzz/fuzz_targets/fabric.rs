//! libFuzzer entry point of target `fabric` (see `crates/fuzz-targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::fabric::fabric(data));
