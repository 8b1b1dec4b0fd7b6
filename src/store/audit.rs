//! The audit side of the store: read-only queries for the drift API, the dashboard and the
//! report. Backend-neutral types and the [`AuditRead`] trait every backend implements.
//!
//! Architecture invariant: the audit reader never writes. Silences and every other write go
//! through the single writer (`pipeline`).

use super::{Error, OutboxState, StoredSilence};
use crate::model::{Drift, Evidence, Millis};

/// Filters of `GET /api/v1/drifts`.
#[derive(Debug, Clone, Default)]
pub struct DriftFilter {
    /// `pending`, `firing`, `resolved`, or `open` (pending or firing).
    pub state: Option<String>,
    /// Class id.
    pub class: Option<String>,
    /// Severity.
    pub severity: Option<String>,
    /// Cluster.
    pub cluster: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// Only drifts whose state changed at or after this time.
    pub since: Option<Millis>,
    /// Page size.
    pub limit: usize,
    /// Continue after this cursor (from the previous page).
    pub cursor: Option<Cursor>,
}

/// Where the next page starts: (since, id) of the last drift returned.
pub type Cursor = (Millis, String);

/// One state change of a drift.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// State before.
    pub from: Option<String>,
    /// State after.
    pub to: String,
    /// When.
    pub at: Millis,
    /// Evidence at that moment (diff, actor, hint).
    pub evidence: Option<Evidence>,
}

/// One delivery attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptView {
    /// When.
    pub at: Millis,
    /// State after the attempt.
    pub state: String,
    /// What happened.
    pub detail: String,
    /// How long it took.
    pub duration_ms: i64,
}

/// A notification and its delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryView {
    /// Notification id (the idempotency key).
    pub id: String,
    /// Channel endpoint.
    pub channel: String,
    /// Drift id.
    pub drift_id: String,
    /// firing, resolved, repeat.
    pub kind: String,
    /// pending, delivered, rejected, expired.
    pub state: String,
    /// Attempts made.
    pub attempts: u32,
    /// Last error.
    pub last_error: Option<String>,
    /// Queued at.
    pub created_at: Millis,
    /// Next attempt (pending rows).
    pub next_attempt_at: Millis,
    /// Ended at.
    pub finished_at: Option<Millis>,
    /// Every attempt, oldest first (detail views only).
    pub attempt_log: Vec<AttemptView>,
}

/// Read queries for the API, the dashboard and the report. Each call may block on I/O: call it
/// off the async runtime.
pub trait AuditRead: Send + Sync {
    /// A page of drifts, newest first, and the cursor of the next page.
    fn drifts(&self, filter: &DriftFilter) -> Result<(Vec<Drift>, Option<Cursor>), Error>;
    /// One drift.
    fn drift(&self, id: &str) -> Result<Option<Drift>, Error>;
    /// A drift's state changes, oldest first.
    fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, Error>;
    /// Deliveries of one drift, with their attempts.
    fn deliveries_of(&self, drift_id: &str) -> Result<Vec<DeliveryView>, Error>;
    /// Deliveries in a state (newest first), optionally of one channel.
    fn deliveries(
        &self,
        state: Option<OutboxState>,
        channel: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeliveryView>, Error>;
    /// Silences created through the API.
    fn silences(&self) -> Result<Vec<StoredSilence>, Error>;
    /// Drifts that fired and resolved at or after `since`.
    fn resolved_since(&self, since: Millis) -> Result<Vec<Drift>, Error>;
    /// Open drifts (pending or firing), newest first.
    fn open_drifts(&self) -> Result<Vec<Drift>, Error> {
        let (drifts, _) = self.drifts(&DriftFilter {
            state: Some("open".into()),
            limit: 500,
            ..DriftFilter::default()
        })?;
        Ok(drifts)
    }
}
