#![no_main]
//! Fuzz target `managed_fields`: see `drift_sentinel_fuzz::harness::managed_fields` for the input format.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    drift_sentinel_fuzz::harness::managed_fields(data);
});
