//! The audit side of the store: read-only queries for the drift API, the dashboard and the
//! report. Backend-neutral types and the [`AuditRead`] trait every backend implements.
//!
//! Architecture invariant: the audit reader never writes. Silences and every other write go
//! through the single writer (`pipeline`).

use super::{Error, OutboxState, StoredSilence};
use drift_model::{Drift, Evidence, Millis};

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
    /// API groups, exact (`""` is the core group): drifts of an object in any of them. The API
    /// turns a family (`model::group`) into its groups; the store knows no families.
    pub groups: Option<Vec<String>>,
    /// Only drifts whose state changed at or after this time.
    pub since: Option<Millis>,
    /// Page size.
    pub limit: usize,
    /// Continue after this cursor (from the previous page).
    pub cursor: Option<Cursor>,
}

/// Where the next page starts: (since, id) of the last drift returned.
pub type Cursor = (Millis, String);

/// How many drifts fire now with one severity, on objects of one API group in one namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FiringCount {
    /// `info`, `warning` or `critical`.
    pub severity: String,
    /// The API group (`""` is the core group).
    pub group: String,
    /// The namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// Firing drifts.
    pub count: u64,
}

/// One day's moves of recorded drifts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayMoves {
    /// Start of the day.
    pub start: Millis,
    /// Drifts that fired that day.
    pub fired: u64,
    /// Drifts that resolved that day after firing.
    pub resolved: u64,
}

/// A day in milliseconds.
pub const DAY_MILLIS: Millis = 24 * 3600 * 1000;

/// `days` consecutive days from `start`, each with the moves `counted` gives for it: (day
/// index from `start`, fired, resolved); indexes outside the days are ignored. Every backend
/// answers [`AuditRead::moves_per_day`] through it.
pub fn dense_days(
    start: Millis,
    days: usize,
    counted: impl IntoIterator<Item = (i64, u64, u64)>,
) -> Vec<DayMoves> {
    let mut out: Vec<DayMoves> = (0..days)
        .map(|index| DayMoves {
            start: start + DAY_MILLIS * index as i64,
            fired: 0,
            resolved: 0,
        })
        .collect();
    for (index, fired, resolved) in counted {
        if let Some(day) = usize::try_from(index).ok().and_then(|i| out.get_mut(i)) {
            day.fired += fired;
            day.resolved += resolved;
        }
    }
    out
}

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
    /// A drift's remediation attempts, oldest first.
    fn remediations(&self, id: &str) -> Result<Vec<drift_model::remediation::Attempt>, Error>;
    /// Remediation attempts of `cluster` with `outcome`, oldest first, at most `limit`, with their
    /// `seq` (the sender's work: `planned` ones, and `sending` ones a stop left).
    fn remediations_by_outcome(
        &self,
        outcome: drift_model::remediation::Outcome,
        cluster: &str,
        limit: usize,
    ) -> Result<Vec<(i64, drift_model::remediation::Attempt)>, Error>;
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
    /// A page of the silences created through the API, by creation time then id (as
    /// [`AuditRead::silences`]): at most `limit` (1 to 1,000) after `after`, and the cursor of
    /// the next page when there are more.
    fn silences_page(
        &self,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<StoredSilence>, Option<Cursor>), Error>;
    /// Drifts that fired and resolved at or after `since` (at most 5,000, the latest first), of
    /// objects in `groups` when given (as [`DriftFilter::groups`]).
    fn resolved_since(&self, since: Millis, groups: Option<&[String]>)
        -> Result<Vec<Drift>, Error>;
    /// Firing drifts counted by severity, API group and namespace (the dashboard's overview),
    /// in that order; counting reads no drift's body.
    fn firing_counts(&self) -> Result<Vec<FiringCount>, Error>;
    /// For `days` days of [`DAY_MILLIS`] from `start`: how many recorded drifts fired (a move to
    /// `firing` from anything else) and how many resolved after firing (`firing` → `resolved`),
    /// from the drifts' history (so within the audit retention), counted per day by the store.
    fn moves_per_day(&self, start: Millis, days: usize) -> Result<Vec<DayMoves>, Error>;
    /// Open drifts (pending or firing), newest first, of objects in `groups` when given.
    fn open_drifts(&self, groups: Option<&[String]>) -> Result<Vec<Drift>, Error> {
        let (drifts, _) = self.drifts(&DriftFilter {
            state: Some("open".into()),
            groups: groups.map(<[String]>::to_vec),
            limit: 500,
            ..DriftFilter::default()
        })?;
        Ok(drifts)
    }
}

/// The parameters of a silences page's query after `after`: the first page's time comes before
/// every silence's (creation times are milliseconds since the epoch).
pub(crate) fn silence_cursor(after: Option<&Cursor>) -> (Millis, String) {
    match after {
        Some((at, id)) => (*at, id.clone()),
        None => (Millis::MIN, String::new()),
    }
}

/// A silences page from the `limit + 1` rows its query read: the first `limit`, and the cursor
/// of the next page when there was one more.
pub(crate) fn silence_page(
    mut rows: Vec<StoredSilence>,
    limit: usize,
) -> (Vec<StoredSilence>, Option<Cursor>) {
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next = more
        .then(|| rows.last().map(|last| (last.created_at, last.id.clone())))
        .flatten();
    (rows, next)
}
