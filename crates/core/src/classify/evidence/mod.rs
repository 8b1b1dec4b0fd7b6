//! Evidence: what the drift classes say about a finding besides "it holds". What changed (field
//! diffs), who changed it (`managedFields`, `lastModifier`) and how to fix it (remediation
//! hints). Part of the engine, called by the drift classes and `check`; the comparison with a
//! desired manifest is its sibling `classify::baseline`.
//! Pure: lookups only in the state handed in.

pub mod actor;
pub mod diff;
pub mod hint;
mod keyed;

pub use actor::{attribute, Attributor};
pub use diff::spec_diff;
