//! The stored shapes of what the store keeps as JSON text: one serializable type per stored
//! column, apart from the core types, so that a field added to a core type changes no stored row
//! by accident. Each shape belongs to a schema version (`sqlite/schema.rs`); changing one is a
//! migration. Every shape here is the one schema versions 1 and 2 store (the layout before
//! versions were recorded wrote exactly these), and decoding is lenient where older rows may lack
//! a field (`#[serde(default)]`).
//!
//! | column | shape |
//! |---|---|
//! | `objects.body` | [`ObjectRow`] (written from a borrowed [`ObjectRowRef`]) |
//! | `drifts.body` | [`DriftRow`] |
//! | `drift_history.evidence` | [`EvidenceRow`] |
//! | `outbox.payload` | [`NoticeRow`] ([`encode_notice`], [`decode_notice`]) |
//! | `silences.body` | [`SilenceRow`] |

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::classify::state::{ManagerStamp, Serialized};
use crate::classify::ObjectState;
use crate::decode::OwnerReference;
use crate::model::{
    Actor, Drift, DriftState, Evidence, FieldChange, Millis, Notice, NoticeKind, OwnerChain,
    Severity, Silence,
};

/// A stored severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SeverityRow {
    /// `info`.
    Info,
    /// `warning`.
    Warning,
    /// `critical`.
    Critical,
}

impl From<Severity> for SeverityRow {
    fn from(severity: Severity) -> SeverityRow {
        match severity {
            Severity::Info => SeverityRow::Info,
            Severity::Warning => SeverityRow::Warning,
            Severity::Critical => SeverityRow::Critical,
        }
    }
}

impl From<SeverityRow> for Severity {
    fn from(row: SeverityRow) -> Severity {
        match row {
            SeverityRow::Info => Severity::Info,
            SeverityRow::Warning => Severity::Warning,
            SeverityRow::Critical => Severity::Critical,
        }
    }
}

/// A stored drift state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum StateRow {
    /// `pending`.
    Pending,
    /// `firing`.
    Firing,
    /// `resolved`.
    Resolved,
}

impl From<DriftState> for StateRow {
    fn from(state: DriftState) -> StateRow {
        match state {
            DriftState::Pending => StateRow::Pending,
            DriftState::Firing => StateRow::Firing,
            DriftState::Resolved => StateRow::Resolved,
        }
    }
}

impl From<StateRow> for DriftState {
    fn from(row: StateRow) -> DriftState {
        match row {
            StateRow::Pending => DriftState::Pending,
            StateRow::Firing => DriftState::Firing,
            StateRow::Resolved => DriftState::Resolved,
        }
    }
}

/// A present value, `null` included (`Some(Null)`), as opposed to an absent one (`None`, by
/// `#[serde(default)]`): a field that was `null` is not a field that was added.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// One changed field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FieldChangeRow {
    /// JSON pointer.
    pub path: String,
    /// Value before; absent when the field was added.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub before: Option<Value>,
    /// Value after; absent when the field was removed.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub after: Option<Value>,
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ActorRow {
    /// Field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// Subresource written, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// When the manager wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Knative's `lastModifier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// In `trustedManagers`.
    #[serde(default)]
    pub trusted: bool,
}

/// `drift_history.evidence`, and the evidence inside a [`DriftRow`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EvidenceRow {
    /// One sentence.
    #[serde(default)]
    pub summary: String,
    /// The field diff.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChangeRow>,
    /// Who changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<ActorRow>,
    /// How to fix it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The class's severity for this finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<SeverityRow>,
    /// Structured facts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, String>,
}

/// The Knative owner chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct OwnerRow {
    /// Knative Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<String>,
    /// Revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// `drifts.body`, and the drift inside a [`NoticeRow`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DriftRow {
    /// Episode id.
    pub id: String,
    /// Class id.
    pub class: String,
    /// Severity.
    pub severity: SeverityRow,
    /// State.
    pub state: StateRow,
    /// Cluster.
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
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Owner chain.
    #[serde(default)]
    pub owner: OwnerRow,
    /// Evidence.
    pub evidence: EvidenceRow,
    /// First seen.
    pub since: Millis,
    /// Fires at.
    pub fire_at: Millis,
    /// Fired at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fired_at: Option<Millis>,
    /// Resolved at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<Millis>,
    /// Why it resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
}

/// A stored notice kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NoticeKindRow {
    /// `firing`.
    Firing,
    /// `resolved`.
    Resolved,
    /// `repeat`.
    Repeat,
}

/// `outbox.payload`: the notice as queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct NoticeRow {
    /// Firing, resolved or a reminder.
    pub kind: NoticeKindRow,
    /// The drift at that moment.
    pub drift: DriftRow,
    /// When the transition happened.
    pub at: Millis,
    /// Re-sends so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resend: u32,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// The stored text of an object's state (`objects.body`).
pub fn encode_object(object: &ObjectState) -> Result<String, serde_json::Error> {
    serde_json::to_string(&ObjectRowRef::from(object))
}

/// The payload text of a notice.
pub fn encode_notice(notice: &Notice) -> Result<String, serde_json::Error> {
    serde_json::to_string(&NoticeRow::from(notice))
}

/// The notice of a payload text.
pub fn decode_notice(payload: &str) -> Result<Notice, serde_json::Error> {
    serde_json::from_str::<NoticeRow>(payload).map(Notice::from)
}

/// `silences.body`: matchers, expiry and comment, as `rules.silences` has them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SilenceRow {
    /// Matchers.
    pub matchers: BTreeMap<String, String>,
    /// RFC 3339 expiry, as given.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// Why.
    #[serde(default)]
    pub comment: Option<String>,
}

/// One owner reference of an object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OwnerReferenceRow {
    /// Owner `apiVersion`.
    pub api_version: String,
    /// Owner kind.
    pub kind: String,
    /// Owner name.
    pub name: String,
    /// Owner uid.
    pub uid: String,
    /// The managing controller.
    #[serde(default)]
    pub controller: bool,
}

/// A field manager and its last write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ManagerRow {
    /// Field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// Subresource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// Last write time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// `objects.body`, as read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectRow {
    cluster: String,
    uid: String,
    api_version: String,
    kind: String,
    namespace: String,
    name: String,
    resource_version: String,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    creation_timestamp: Option<String>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    owners: Vec<OwnerReferenceRow>,
    #[serde(default)]
    managers: Vec<ManagerRow>,
    #[serde(default)]
    spec: Option<Box<RawValue>>,
    #[serde(default)]
    status: Option<Box<RawValue>>,
    #[serde(default)]
    data: Option<BTreeMap<String, String>>,
    #[serde(default)]
    deleted: bool,
    first_seen: Millis,
    last_seen: Millis,
}

/// `objects.body`, as written: borrowed from the engine's state, so writing a changed object
/// copies nothing but its owner and manager lists.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectRowRef<'a> {
    cluster: &'a str,
    uid: &'a str,
    api_version: &'a str,
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
    resource_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    creation_timestamp: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deletion_timestamp: Option<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    owners: Vec<OwnerReferenceRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    managers: Vec<ManagerRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deleted: bool,
    first_seen: Millis,
    last_seen: Millis,
}

impl<'a> From<&'a ObjectState> for ObjectRowRef<'a> {
    fn from(object: &'a ObjectState) -> ObjectRowRef<'a> {
        let raw = |value: &'a Serialized| (!value.is_null()).then(|| value.raw());
        ObjectRowRef {
            cluster: &object.cluster,
            uid: &object.uid,
            api_version: &object.api_version,
            kind: &object.kind,
            namespace: &object.namespace,
            name: &object.name,
            resource_version: &object.resource_version,
            generation: object.generation,
            creation_timestamp: object.creation_timestamp.as_deref(),
            deletion_timestamp: object.deletion_timestamp.as_deref(),
            labels: &object.labels,
            annotations: &object.annotations,
            owners: object
                .owners
                .iter()
                .map(|owner| OwnerReferenceRow {
                    api_version: owner.api_version.clone(),
                    kind: owner.kind.clone(),
                    name: owner.name.clone(),
                    uid: owner.uid.clone(),
                    controller: owner.controller,
                })
                .collect(),
            managers: object
                .managers
                .iter()
                .map(|stamp| ManagerRow {
                    manager: stamp.manager.clone(),
                    operation: stamp.operation.clone(),
                    subresource: stamp.subresource.clone(),
                    time: stamp.time.clone(),
                })
                .collect(),
            spec: raw(&object.spec),
            status: raw(&object.status),
            data: object.data.as_ref(),
            deleted: object.deleted,
            first_seen: object.first_seen,
            last_seen: object.last_seen,
        }
    }
}

impl From<ObjectRow> for ObjectState {
    fn from(row: ObjectRow) -> ObjectState {
        let serialized =
            |raw: Option<Box<RawValue>>| raw.map(Serialized::from_raw).unwrap_or_default();
        ObjectState {
            cluster: row.cluster,
            uid: row.uid,
            api_version: row.api_version,
            kind: row.kind,
            namespace: row.namespace,
            name: row.name,
            resource_version: row.resource_version,
            generation: row.generation,
            creation_timestamp: row.creation_timestamp,
            deletion_timestamp: row.deletion_timestamp,
            labels: row.labels,
            annotations: row.annotations,
            owners: row
                .owners
                .into_iter()
                .map(|owner| OwnerReference {
                    api_version: owner.api_version,
                    kind: owner.kind,
                    name: owner.name,
                    uid: owner.uid,
                    controller: owner.controller,
                })
                .collect(),
            managers: row
                .managers
                .into_iter()
                .map(|stamp| ManagerStamp {
                    manager: stamp.manager,
                    operation: stamp.operation,
                    subresource: stamp.subresource,
                    time: stamp.time,
                })
                .collect(),
            spec: serialized(row.spec),
            status: serialized(row.status),
            data: row.data,
            deleted: row.deleted,
            first_seen: row.first_seen,
            last_seen: row.last_seen,
        }
    }
}

impl From<&FieldChange> for FieldChangeRow {
    fn from(change: &FieldChange) -> FieldChangeRow {
        FieldChangeRow {
            path: change.path.clone(),
            before: change.before.clone(),
            after: change.after.clone(),
        }
    }
}

impl From<FieldChangeRow> for FieldChange {
    fn from(row: FieldChangeRow) -> FieldChange {
        FieldChange {
            path: row.path,
            before: row.before,
            after: row.after,
        }
    }
}

impl From<&Evidence> for EvidenceRow {
    fn from(evidence: &Evidence) -> EvidenceRow {
        EvidenceRow {
            summary: evidence.summary.clone(),
            changes: evidence.changes.iter().map(FieldChangeRow::from).collect(),
            actor: evidence.actor.as_ref().map(|actor| ActorRow {
                manager: actor.manager.clone(),
                operation: actor.operation.clone(),
                subresource: actor.subresource.clone(),
                time: actor.time.clone(),
                user: actor.user.clone(),
                trusted: actor.trusted,
            }),
            hint: evidence.hint.clone(),
            severity: evidence.severity.map(SeverityRow::from),
            facts: evidence.facts.clone(),
        }
    }
}

impl From<EvidenceRow> for Evidence {
    fn from(row: EvidenceRow) -> Evidence {
        Evidence {
            summary: row.summary,
            changes: row.changes.into_iter().map(FieldChange::from).collect(),
            actor: row.actor.map(|actor| Actor {
                manager: actor.manager,
                operation: actor.operation,
                subresource: actor.subresource,
                time: actor.time,
                user: actor.user,
                trusted: actor.trusted,
            }),
            hint: row.hint,
            severity: row.severity.map(Severity::from),
            facts: row.facts,
        }
    }
}

impl From<&Drift> for DriftRow {
    fn from(drift: &Drift) -> DriftRow {
        DriftRow {
            id: drift.id.clone(),
            class: drift.class.clone(),
            severity: drift.severity.into(),
            state: drift.state.into(),
            cluster: drift.cluster.clone(),
            uid: drift.uid.clone(),
            api_version: drift.api_version.clone(),
            kind: drift.kind.clone(),
            namespace: drift.namespace.clone(),
            name: drift.name.clone(),
            labels: drift.labels.clone(),
            owner: OwnerRow {
                service: drift.owner.service.clone(),
                configuration: drift.owner.configuration.clone(),
                revision: drift.owner.revision.clone(),
            },
            evidence: EvidenceRow::from(&drift.evidence),
            since: drift.since,
            fire_at: drift.fire_at,
            fired_at: drift.fired_at,
            resolved_at: drift.resolved_at,
            resolution: drift.resolution.clone(),
        }
    }
}

impl From<DriftRow> for Drift {
    fn from(row: DriftRow) -> Drift {
        Drift {
            id: row.id,
            class: row.class,
            severity: row.severity.into(),
            state: row.state.into(),
            cluster: row.cluster,
            uid: row.uid,
            api_version: row.api_version,
            kind: row.kind,
            namespace: row.namespace,
            name: row.name,
            labels: row.labels,
            owner: OwnerChain {
                service: row.owner.service,
                configuration: row.owner.configuration,
                revision: row.owner.revision,
            },
            evidence: row.evidence.into(),
            since: row.since,
            fire_at: row.fire_at,
            fired_at: row.fired_at,
            resolved_at: row.resolved_at,
            resolution: row.resolution,
        }
    }
}

impl From<&Notice> for NoticeRow {
    fn from(notice: &Notice) -> NoticeRow {
        NoticeRow {
            kind: match notice.kind {
                NoticeKind::Firing => NoticeKindRow::Firing,
                NoticeKind::Resolved => NoticeKindRow::Resolved,
                NoticeKind::Repeat => NoticeKindRow::Repeat,
            },
            drift: DriftRow::from(&notice.drift),
            at: notice.at,
            resend: notice.resend,
        }
    }
}

impl From<NoticeRow> for Notice {
    fn from(row: NoticeRow) -> Notice {
        Notice {
            kind: match row.kind {
                NoticeKindRow::Firing => NoticeKind::Firing,
                NoticeKindRow::Resolved => NoticeKind::Resolved,
                NoticeKindRow::Repeat => NoticeKind::Repeat,
            },
            drift: row.drift.into(),
            at: row.at,
            resend: row.resend,
        }
    }
}

impl From<&Silence> for SilenceRow {
    fn from(silence: &Silence) -> SilenceRow {
        SilenceRow {
            matchers: silence.matchers.clone(),
            expires_at: silence.expires_at.clone(),
            comment: silence.comment.clone(),
        }
    }
}

impl From<SilenceRow> for Silence {
    fn from(row: SilenceRow) -> Silence {
        Silence {
            matchers: row.matchers,
            expires_at: row.expires_at,
            comment: row.comment,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_that_was_null_is_not_a_field_that_was_added() {
        let row: FieldChangeRow =
            serde_json::from_value(json!({"path": "/spec/x", "before": null, "after": 1})).unwrap();
        assert_eq!(row.before, Some(Value::Null));
        let row: FieldChangeRow =
            serde_json::from_value(json!({"path": "/spec/x", "after": 1})).unwrap();
        assert_eq!(row.before, None);
        let text = serde_json::to_string(&FieldChangeRow {
            path: "/spec/x".into(),
            before: Some(Value::Null),
            after: None,
        })
        .unwrap();
        assert_eq!(text, r#"{"path":"/spec/x","before":null}"#);
    }
}
