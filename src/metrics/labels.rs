//! The metrics' label sets: each a bounded set of values (class ids, states, kinds, channel and
//! shard names from the config), never object names, URLs or ids.

use prometheus_client::encoding::EncodeLabelSet;

/// A label set with one `kind` label (error kinds).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// A bounded error kind.
    pub kind: String,
}

impl KindLabel {
    /// A label set for `kind`.
    pub fn new(kind: &str) -> KindLabel {
        KindLabel {
            kind: kind.to_string(),
        }
    }
}

/// `outcome` label (what became of an event).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// applied, stale, duplicate, ignored, reference.
    pub outcome: String,
}

/// `code` label (HTTP status of ingest responses).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    /// HTTP status code.
    pub code: String,
}

/// `class` and `state` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabel {
    /// Drift class id.
    pub class: String,
    /// Drift state entered.
    pub state: String,
}

/// `channel` and `outcome` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeliveryLabel {
    /// Channel name (from the config: bounded).
    pub channel: String,
    /// delivered, retried, throttled, rejected, expired.
    pub outcome: String,
}

/// `channel` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChannelLabel {
    /// Channel name.
    pub channel: String,
}

/// `state` label (outbox dead rows).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    /// rejected or expired.
    pub state: String,
}

/// `class` and `severity` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClassSeverityLabel {
    /// Drift class id.
    pub class: String,
    /// Severity.
    pub severity: String,
}

/// `class`, `severity` and `namespace` labels (namespaces capped, see [`Metrics::namespace_label`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FiringLabel {
    /// Drift class id.
    pub class: String,
    /// Severity.
    pub severity: String,
    /// Namespace, or `_other` past the cap.
    pub namespace: String,
    /// The object's API group family (`serving`, `eventing`, `networking`, `operator`,
    /// `kubernetes`, or `other`): a bounded label to break drifts down by part of Knative.
    pub group: String,
}

/// `cluster` and `part` of drift-sentinel's own event path.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PipelinePartLabel {
    /// The cluster the part lives in.
    pub cluster: String,
    /// apiserversource, broker or trigger.
    pub part: String,
}

/// `rule` and `kind` of an invariant's failed evaluations.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleErrorLabel {
    /// The invariant's name.
    pub rule: String,
    /// `evaluation` (a missing field, a type mismatch) or `budget` (stopped by its budget).
    pub kind: String,
}

/// `trigger` and `outcome` of a resync pass.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResyncPassLabel {
    /// `schedule` or `api`.
    pub trigger: String,
    /// `complete`, `incomplete` or `failed`.
    pub outcome: String,
}

/// `type` and `mode` of received events.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventTypeLabel {
    /// add, update, delete, or other (a type this service ignores).
    pub r#type: String,
    /// resource, reference, or none.
    pub mode: String,
}

/// `shard` label (`shard.name`, from the config: bounded).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShardLabel {
    /// The shard's name.
    pub shard: String,
}

/// `shard` and `reason` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShardReasonLabel {
    /// The shard's name.
    pub shard: String,
    /// taken_over, unrenewed or commit_unknown.
    pub reason: String,
}

/// `shard` and `outcome` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShardOutcomeLabel {
    /// The shard's name.
    pub shard: String,
    /// owned, refused or refused_with_batch.
    pub outcome: String,
}

/// `reason` label (why a connection closed).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// closed (by the client, after `Connection: close`, or idle past `server.idleTimeout`),
    /// timeout (no complete request head within `server.headerReadTimeout`), cap (closed to make
    /// room at `server.maxConnections`), shutdown, error.
    pub reason: String,
}

/// `class` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClassLabel {
    /// Drift class id.
    pub class: String,
}

/// `action` and `outcome` labels (remediation attempts).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RemediationLabel {
    /// revert, rollback, restore, deleteOrphan.
    pub action: String,
    /// planned, applied, dryRun, conflict, refused, failed.
    pub outcome: String,
}

/// `cluster` label (a cluster name from the config: `traffic.cluster`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabel {
    /// The cluster name.
    pub cluster: String,
}
