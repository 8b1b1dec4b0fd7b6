//! What remediation asks of the single writer: a person's approval of a `manual` rule's action
//! ([`Approval`]) and the sender's steps on a stored `apply` attempt ([`SenderStep`]). Both are
//! committed by the writer like every other write (fenced on PostgreSQL by the writer lease), so
//! an attempt is claimed, and its outcome kept, only by the replica that holds the lease.

use drift_model::remediation::Attempt;

/// A person approves the action a `manual` remediation rule offers for a firing drift
/// (`POST /api/v1/drifts/{id}/remediate`): decided by the writer with the rails in force, and the
/// attempt committed like every other write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// The drift.
    pub drift_id: String,
    /// The action approved (`revert`, `rollback`, `restore`, `deleteOrphan`).
    pub action: drift_core::remediate::Action,
    /// Who approved it.
    pub approved_by: String,
}

/// What an [`Approval`] did, once committed.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalOutcome {
    /// No open drift has that id (it never existed, or resolved and left the writer's state).
    Unknown,
    /// The drift is open but not firing (pending), or resolved: nothing to approve now.
    MovedOn(&'static str),
    /// No rule offers this action for this drift (remediation off, no rule, another action,
    /// or an `auto` rule, which decided when the drift fired).
    NotAllowed(String),
    /// The attempt, recorded: `dryRun` or `planned` when the rails let it through, `refused`
    /// with the rail's reason otherwise.
    Recorded(Box<Attempt>),
}

/// A step of the remediation sender on the attempt stored under `seq`.
#[derive(Debug, Clone, PartialEq)]
pub enum SenderStep {
    /// About to send it: the writer checks that the drift is still firing and that no newer
    /// change of the object was seen since the judgement, and marks it `sending` (a stop from
    /// here on leaves it `sending`, which is never sent again).
    Claim {
        /// The row.
        seq: i64,
        /// The attempt as stored (`planned`).
        attempt: Box<Attempt>,
    },
    /// Sent, and answered `409 Conflict` on its `resourceVersion` precondition (nothing was
    /// written): the writer judges it again on the object as it now knows it and, when only a
    /// newer version was seen (a controller's status write), gives the same request on that
    /// version to send again (still `sending`); ends it when the object changed otherwise.
    Reclaim {
        /// The row.
        seq: i64,
        /// The attempt as sent (`sending`, the request and version of that send).
        attempt: Box<Attempt>,
    },
    /// Its final outcome (applied, conflict, failed).
    Settle {
        /// The row.
        seq: i64,
        /// The attempt with its outcome.
        attempt: Box<Attempt>,
    },
}

/// What the writer made of a [`SenderStep`], once committed.
#[derive(Debug, Clone, PartialEq)]
pub enum SenderAnswer {
    /// Claimed: send exactly this request now.
    Send(Box<Attempt>),
    /// Not to be sent: ended as recorded (the drift moved on, a newer change was seen).
    Ended(Box<Attempt>),
    /// The outcome is kept.
    Settled,
    /// A [`SenderStep::Reclaim`] too early: the writer has seen no newer version of the object
    /// yet (its event is on its way); nothing was recorded.
    NotYet,
}
