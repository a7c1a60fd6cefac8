//! libFuzzer entry point of target `expressions` (see `crates/fuzz-targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::expressions::expressions(data));
