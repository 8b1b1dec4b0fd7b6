//! Enrich: what changed (field diff), who changed it (`managedFields`, `lastModifier`), and how to
//! fix it (remediation hints). Pure: lookups only in the state handed in.

pub mod actor;
pub mod diff;
pub mod hint;

pub use actor::attribute;
pub use diff::{metadata_diff, spec_diff};
