#![no_main]
//! Fuzz target `config`: see `drift_sentinel_fuzz::harness::config` for the input format.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    drift_sentinel_fuzz::harness::config(data);
});
