//! libFuzzer entry point of target `storage_record` (see `crates/fuzz-targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::storage_record::storage_record(data));
