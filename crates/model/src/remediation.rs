//! Remediation attempts: what drift-sentinel did (or would have done, or refused to do) about a
//! firing drift, as part of the drift's history. The planner (`drift_core::remediate`) makes
//! them, the store keeps them beside the drift's moves, the API shows them.

use super::Millis;

/// How an attempt ended (or that it has not yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Planned and allowed in `apply` mode, not sent yet.
    Planned,
    /// Claimed by the sender, which is sending it: a row left so by a stop is never sent
    /// again (its outcome is unknown: it ends as `failed`).
    Sending,
    /// Sent, and the API server accepted it.
    Applied,
    /// `dryRun`: the exact request is recorded, nothing was sent.
    DryRun,
    /// The object moved on (409, 422 of a `test`, or a newer change seen first): ended, never
    /// retried blindly.
    Conflict,
    /// A rail or the planner refused; nothing was sent.
    Refused,
    /// Sent, and the API server refused it for another reason (or never answered).
    Failed,
}

impl Outcome {
    /// Every outcome, in the order above.
    pub const ALL: [Outcome; 7] = [
        Outcome::Planned,
        Outcome::Sending,
        Outcome::Applied,
        Outcome::DryRun,
        Outcome::Conflict,
        Outcome::Refused,
        Outcome::Failed,
    ];

    /// The stable name (API, store, metrics).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Planned => "planned",
            Outcome::Sending => "sending",
            Outcome::Applied => "applied",
            Outcome::DryRun => "dryRun",
            Outcome::Conflict => "conflict",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
        }
    }

    /// Parses [`Outcome::as_str`] output.
    pub fn parse(text: &str) -> Option<Outcome> {
        Outcome::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == text)
    }
}

/// The exact Kubernetes request of an attempt, as planned (and sent, unless dry run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRequest {
    /// `PATCH`, `POST` or `DELETE`.
    pub method: String,
    /// Path and query (`?fieldManager=drift-sentinel`).
    pub path: String,
    /// `Content-Type` of the body.
    pub content_type: String,
    /// The body, as sent (JSON text).
    pub body: String,
}

/// One remediation attempt on a drift.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The drift it is about.
    pub drift_id: String,
    /// The drift's cluster (the one the request goes to).
    pub cluster: String,
    /// The object as the rails know it (`apiVersion/kind/namespace/name`, which a re-created
    /// object keeps).
    pub object: String,
    /// The fields a revert puts back (JSON pointers; empty for the other actions): once it is
    /// applied, setting them back again counts towards a fight.
    pub fields: Vec<String>,
    /// When it was decided.
    pub at: Millis,
    /// `dryRun` or `apply` (the mode in force when it was decided).
    pub mode: String,
    /// `revert`, `rollback`, `restore` or `deleteOrphan`.
    pub action: String,
    /// The rule that asked for it.
    pub rule: String,
    /// Who approved it; `None` for a rule with `approval: auto`.
    pub approved_by: Option<String>,
    /// The request; `None` when it was refused before one could be made.
    pub request: Option<PlannedRequest>,
    /// The object's `resourceVersion` the judgement was made on (the precondition).
    pub resource_version: Option<String>,
    /// A digest of what the judgement saw of the object besides its status (spec, labels,
    /// annotations, data): a claim finds a newer change by it, while a status write in between
    /// only refreshes the precondition.
    pub judged: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// The API server's answer, once sent.
    pub status: Option<u16>,
    /// The object's `resourceVersion` after an applied request.
    pub resource_version_after: Option<String>,
    /// A refusal's or a failure's stable kind (`budget`, `cooldown`, `stale`, …).
    pub reason: Option<String>,
    /// What to tell a person: the refusal or the failure, in words.
    pub detail: Option<String>,
}
