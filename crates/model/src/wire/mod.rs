//! Wire: the public JSON, as serializable types of its own. The webhook body and the data of the
//! `cloudevents` channel ([`notice`]), a drift as the API shows it ([`drift`]), the fleet view
//! ([`fleet`]), a silence as the API takes and shows it ([`silence`]) and resync's status
//! ([`resync`]). Core types
//! are never serialized directly (rust-analyzer's rule: make a serializable counterpart), so a
//! field added to `model::Drift` changes no public contract by accident.
//!
//! The contract is documented in the README ("Webhook JSON") and as JSON Schema files in
//! `docs/schemas/` (`webhook-v1.schema.json`, `api-drift-v1.schema.json`); the process tests
//! validate what the binary sends and answers against them, so changing it is a deliberate act.
//! Fields are only ever added. Every diff entry carries `path`, `op` (`add`, `remove`,
//! `replace`) and explicit `before`/`after` (`null` where absent).

pub mod diff;
pub mod drift;
pub mod fleet;
pub mod notice;
pub mod resync;
pub mod silence;

pub use diff::{DiffEntry, DiffOp};
