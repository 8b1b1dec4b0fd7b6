//! The fleet view as the API shows it (`GET /api/v1/fleet`): each fleet group with its members
//! (and when each last sent an event), the objects it compares with every member's value per
//! path, and the open drift of each divergent object. Times are RFC 3339; a value a member does
//! not hold is `null`. Documented in `docs/schemas/api-fleet-v1.schema.json`; built by
//! `api::fleet` from the engine's view (this layer sits below the engine's types).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// The whole view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetView {
    /// The groups, in config order.
    pub groups: Vec<FleetGroupView>,
}

/// One group.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetGroupView {
    /// Its name.
    pub name: String,
    /// Its cluster globs.
    pub clusters: Vec<String>,
    /// The severity of its drifts.
    pub severity: &'static str,
    /// Its grace, in seconds.
    pub grace_seconds: u64,
    /// The members seen, sorted by name.
    pub members: Vec<FleetMemberView>,
    /// How many compared objects differ (the ones left out past the cap too).
    pub divergent: usize,
    /// How many compared objects are left out past the cap (500 per group).
    pub truncated: usize,
    /// The compared objects that a member holds: divergent ones first, each part sorted.
    pub objects: Vec<FleetObjectView>,
}

/// One member.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetMemberView {
    /// Cluster name.
    pub cluster: String,
    /// When an event of it was last applied (`null`: none since the service started).
    pub last_event: Option<String>,
}

/// One compared object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetObjectView {
    /// `Kind.group/namespace/name`: the uid of its fleet drift.
    pub key: String,
    /// `apiVersion` (as one member holds it).
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// True when the members that report the object do not all hold the same desired state.
    pub divergent: bool,
    /// The members that never reported the object (unknown, not missing): they have no value
    /// in the rows.
    pub not_reported: Vec<String>,
    /// The open drift about it, if any.
    pub drift: Option<FleetDriftRef>,
    /// Path by path, every member's value (differing rows first).
    pub rows: Vec<FleetRowView>,
}

/// The open drift of an object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetDriftRef {
    /// Drift id (`/api/v1/drifts/{id}`).
    pub id: String,
    /// `pending` or `firing`.
    pub state: &'static str,
}

/// One row of an object's table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetRowView {
    /// JSON pointer; empty for the row that says which members hold the object (`"present"`).
    pub path: String,
    /// True when the members' values differ.
    pub differs: bool,
    /// Each member's value (`null`: absent); a member that never reported the object is left
    /// out.
    pub values: BTreeMap<String, Value>,
    /// The members whose value differs from what most members hold (every compared member
    /// when no value has a majority).
    pub highlighted: Vec<String>,
}
