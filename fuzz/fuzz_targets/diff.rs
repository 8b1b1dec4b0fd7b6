#![no_main]
//! Fuzz target `diff`: see `drift_sentinel_fuzz::harness::diff` for the input format.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    drift_sentinel_fuzz::harness::diff(data);
});
