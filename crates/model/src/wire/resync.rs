//! Resync's status as the API shows it (`GET /api/v1/resync`, and the body of a `202` to
//! `POST /api/v1/resync`): whether resync runs, the pass running now and its progress, the last
//! pass and its counts, and when the next scheduled pass is due. Times are RFC 3339.

use std::collections::BTreeMap;

use serde::Serialize;

/// The status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResyncView {
    /// False when resync is off (no cluster access): `POST` answers `409` `resync_off`.
    pub enabled: bool,
    /// The pass running now (`null` when none).
    pub running: Option<RunningView>,
    /// The last pass that ended (`null` before the first).
    pub last_pass: Option<PassView>,
    /// When the next scheduled pass is due (`null` while one runs or when resync is off).
    pub next_pass_at: Option<String>,
}

/// The pass running now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunningView {
    /// `schedule` or `api`.
    pub trigger: &'static str,
    /// When it started (an API pass: when it was requested).
    pub started_at: String,
    /// Resources it lists (0 until the loop has begun it).
    pub resources: usize,
    /// Resources listed so far.
    pub resources_done: usize,
    /// Objects listed so far.
    pub listed: usize,
}

/// A pass that ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassView {
    /// `schedule` or `api`.
    pub trigger: &'static str,
    /// When it started.
    pub started_at: String,
    /// When it ended.
    pub finished_at: String,
    /// `complete` (every resource listed), `incomplete` (some could not be listed; nothing was
    /// deleted) or `failed` (the store could not take its work).
    pub outcome: &'static str,
    /// Objects listed.
    pub listed: usize,
    /// Listed objects whose state no event had delivered.
    pub missed: usize,
    /// Objects deleted because a complete list no longer contained them.
    pub deleted: usize,
    /// Drifts the pass opened.
    pub drifts_found: usize,
    /// The same, by class id.
    pub drifts_found_by_class: BTreeMap<String, usize>,
    /// Listed items the decoder rejected.
    pub rejected: usize,
    /// Listed objects events track under another cluster name (not filed).
    pub conflicts: usize,
    /// Error kinds (`forbidden`, `not_found`, `api`, `store`, ...) and how often each occurred.
    pub errors: BTreeMap<String, usize>,
    /// The first error's message (`null` when none).
    pub first_error: Option<String>,
}
