//! Evidence: what the drift classes say about a finding besides "it holds". What changed (field
//! diffs), who changed it (`managedFields`, `lastModifier`), how to fix it (remediation hints),
//! and how a live object differs from its desired manifest (the baseline comparison shared by
//! `baseline_drift` and `check`). Part of the engine, called only by drift classes and `check`.
//! Pure: lookups only in the state handed in.

pub mod actor;
pub mod baseline;
pub mod diff;
pub mod hint;

pub use actor::attribute;
pub use diff::{metadata_diff, spec_diff};
