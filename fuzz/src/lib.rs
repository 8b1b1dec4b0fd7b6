//! Fuzz harnesses for drift-sentinel; the targets in `fuzz_targets/` call [`harness`].
pub mod harness;
