#![no_main]
//! Fuzz target `cel`: see `drift_sentinel_fuzz::harness::cel` for the input format.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    drift_sentinel_fuzz::harness::cel(data);
});
