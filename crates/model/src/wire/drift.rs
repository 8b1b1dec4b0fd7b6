//! A drift as the API shows it (`GET /api/v1/drifts`, `/drifts/{id}`): the drift record with
//! times as RFC 3339 strings. Absent optional fields are left out, as they always were.

use std::collections::BTreeMap;

use serde::Serialize;

use super::DiffEntry;
use crate::time::format_time;
use crate::{Actor, Drift, Evidence};

/// A drift in the API.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftView {
    /// Episode id.
    pub id: String,
    /// Class id.
    pub class: String,
    /// The rule of an `invariant` drift.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// `info`, `warning` or `critical`.
    pub severity: &'static str,
    /// `pending`, `firing` or `resolved`.
    pub state: &'static str,
    /// Cluster name.
    pub cluster: String,
    /// Object uid.
    pub uid: String,
    /// Object `apiVersion`.
    pub api_version: String,
    /// Object kind.
    pub kind: String,
    /// Object namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// Object labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Knative owner chain.
    pub owner: OwnerView,
    /// What was found.
    pub evidence: EvidenceView,
    /// When the condition was first seen.
    pub since: String,
    /// When the drift fires if the condition holds.
    pub fire_at: String,
    /// When it fired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fired_at: Option<String>,
    /// When it resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<String>,
    /// Why it resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
}

/// The Knative owner chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OwnerView {
    /// Knative Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configuration: Option<String>,
    /// Revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// The evidence of a drift (or of one of its state changes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvidenceView {
    /// One sentence: what is wrong.
    pub summary: String,
    /// The field diff.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<DiffEntry>,
    /// Who changed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<ActorView>,
    /// How to fix it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The class's severity for this finding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<&'static str>,
    /// Structured facts.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, String>,
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActorView {
    /// Field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// Subresource written, if any.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// When the manager wrote.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Knative's `lastModifier`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// In `trustedManagers`.
    pub trusted: bool,
}

impl From<&Actor> for ActorView {
    fn from(actor: &Actor) -> ActorView {
        ActorView {
            manager: actor.manager.clone(),
            operation: actor.operation.clone(),
            subresource: actor.subresource.clone(),
            time: actor.time.clone(),
            user: actor.user.clone(),
            trusted: actor.trusted,
        }
    }
}

impl From<&Evidence> for EvidenceView {
    fn from(evidence: &Evidence) -> EvidenceView {
        EvidenceView {
            summary: evidence.summary.clone(),
            changes: super::diff::entries(&evidence.changes),
            actor: evidence.actor.as_ref().map(ActorView::from),
            hint: evidence.hint.clone(),
            severity: evidence.severity.map(|severity| severity.as_str()),
            facts: evidence.facts.clone(),
        }
    }
}

impl From<&Drift> for DriftView {
    fn from(drift: &Drift) -> DriftView {
        DriftView {
            id: drift.id.clone(),
            class: drift.class.clone(),
            rule: drift.rule.clone(),
            severity: drift.severity.as_str(),
            state: drift.state.as_str(),
            cluster: drift.cluster.clone(),
            uid: drift.uid.clone(),
            api_version: drift.api_version.clone(),
            kind: drift.kind.clone(),
            namespace: drift.namespace.clone(),
            name: drift.name.clone(),
            labels: drift.labels.clone(),
            owner: OwnerView {
                service: drift.owner.service.clone(),
                configuration: drift.owner.configuration.clone(),
                revision: drift.owner.revision.clone(),
            },
            evidence: EvidenceView::from(&drift.evidence),
            since: format_time(drift.since),
            fire_at: format_time(drift.fire_at),
            fired_at: drift.fired_at.map(format_time),
            resolved_at: drift.resolved_at.map(format_time),
            resolution: drift.resolution.clone(),
        }
    }
}
