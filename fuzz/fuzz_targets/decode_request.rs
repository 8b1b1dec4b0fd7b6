#![no_main]
//! Fuzz target `decode_request`: see `drift_sentinel_fuzz::harness::decode_request` for the input format.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    drift_sentinel_fuzz::harness::decode_request(data);
});
