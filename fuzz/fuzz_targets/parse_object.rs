#![no_main]
//! Fuzz target `parse_object`: see `drift_sentinel_fuzz::harness::parse_object` for the input format.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    drift_sentinel_fuzz::harness::parse_object(data);
});
