//! The stored shapes of what the store keeps as JSON text: one serializable type per stored
//! column, apart from the core types, so that a field added to a core type changes no stored row
//! by accident. Each shape belongs to a schema version (`sqlite/schema.rs`); changing one is a
//! migration. Every shape here is the one schema versions 1 and 2 store (the layout before
//! versions were recorded wrote exactly these), and decoding is lenient where older rows may lack
//! a field (`#[serde(default)]`).
//!
//! | column | shape |
//! |---|---|
//! | `objects.body` | the engine's (`drift-core`'s `classify::stored`): the store keeps it as text |
//! | `drifts.body` | [`DriftRow`] ([`encode_drift`]) |
//! | `drift_history.evidence` | [`EvidenceRow`] ([`encode_evidence`]) |
//! | `outbox.payload` | [`NoticeRow`] ([`encode_notice`], [`decode_notice`]) |
//!
//! Rows are written from borrowed `…Ref` shapes with the same fields (writing copies nothing of
//! the engine's state) and read into the owned shapes; a unit test checks that the two agree.
//! | `silences.body` | [`SilenceRow`] |

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use drift_model::{
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
    /// The rule of an `invariant` drift (absent in rows written before invariants existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
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

/// The payload text of a notice.
pub fn encode_notice(notice: &Notice) -> Result<String, serde_json::Error> {
    serde_json::to_string(&NoticeRowRef {
        kind: match notice.kind {
            NoticeKind::Firing => NoticeKindRow::Firing,
            NoticeKind::Resolved => NoticeKindRow::Resolved,
            NoticeKind::Repeat => NoticeKindRow::Repeat,
        },
        drift: DriftRowRef::from(&notice.drift),
        at: notice.at,
        resend: notice.resend,
    })
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

/// [`FieldChangeRow`], as written (borrowed).
#[derive(Debug, Serialize)]
pub(crate) struct FieldChangeRowRef<'a> {
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    before: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<&'a Value>,
}

/// [`ActorRow`], as written (borrowed).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ActorRowRef<'a> {
    manager: &'a str,
    operation: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    subresource: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    time: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    trusted: bool,
}

/// [`EvidenceRow`], as written (borrowed).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EvidenceRowRef<'a> {
    summary: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    changes: Vec<FieldChangeRowRef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    actor: Option<ActorRowRef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    severity: Option<SeverityRow>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    facts: &'a BTreeMap<String, String>,
}

/// [`OwnerRow`], as written (borrowed).
#[derive(Debug, Serialize)]
pub(crate) struct OwnerRowRef<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    configuration: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<&'a str>,
}

/// [`DriftRow`], as written (borrowed): writing a drift copies nothing of it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DriftRowRef<'a> {
    id: &'a str,
    class: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'a str>,
    severity: SeverityRow,
    state: StateRow,
    cluster: &'a str,
    uid: &'a str,
    api_version: &'a str,
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: &'a BTreeMap<String, String>,
    owner: OwnerRowRef<'a>,
    evidence: EvidenceRowRef<'a>,
    since: Millis,
    fire_at: Millis,
    #[serde(skip_serializing_if = "Option::is_none")]
    fired_at: Option<Millis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolved_at: Option<Millis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolution: Option<&'a str>,
}

/// [`NoticeRow`], as written (borrowed).
#[derive(Debug, Serialize)]
pub(crate) struct NoticeRowRef<'a> {
    kind: NoticeKindRow,
    drift: DriftRowRef<'a>,
    at: Millis,
    #[serde(skip_serializing_if = "is_zero")]
    resend: u32,
}

impl<'a> From<&'a Evidence> for EvidenceRowRef<'a> {
    fn from(evidence: &'a Evidence) -> EvidenceRowRef<'a> {
        EvidenceRowRef {
            summary: &evidence.summary,
            changes: evidence
                .changes
                .iter()
                .map(|change| FieldChangeRowRef {
                    path: &change.path,
                    before: change.before.as_ref(),
                    after: change.after.as_ref(),
                })
                .collect(),
            actor: evidence.actor.as_ref().map(|actor| ActorRowRef {
                manager: &actor.manager,
                operation: &actor.operation,
                subresource: &actor.subresource,
                time: actor.time.as_deref(),
                user: actor.user.as_deref(),
                trusted: actor.trusted,
            }),
            hint: evidence.hint.as_deref(),
            severity: evidence.severity.map(SeverityRow::from),
            facts: &evidence.facts,
        }
    }
}

impl<'a> From<&'a Drift> for DriftRowRef<'a> {
    fn from(drift: &'a Drift) -> DriftRowRef<'a> {
        DriftRowRef {
            id: &drift.id,
            class: &drift.class,
            rule: drift.rule.as_deref(),
            severity: drift.severity.into(),
            state: drift.state.into(),
            cluster: &drift.cluster,
            uid: &drift.uid,
            api_version: &drift.api_version,
            kind: &drift.kind,
            namespace: &drift.namespace,
            name: &drift.name,
            labels: &drift.labels,
            owner: OwnerRowRef {
                service: drift.owner.service.as_deref(),
                configuration: drift.owner.configuration.as_deref(),
                revision: drift.owner.revision.as_deref(),
            },
            evidence: EvidenceRowRef::from(&drift.evidence),
            since: drift.since,
            fire_at: drift.fire_at,
            fired_at: drift.fired_at,
            resolved_at: drift.resolved_at,
            resolution: drift.resolution.as_deref(),
        }
    }
}

/// The stored text of a drift (`drifts.body`).
pub fn encode_drift(drift: &Drift) -> Result<String, serde_json::Error> {
    serde_json::to_string(&DriftRowRef::from(drift))
}

/// The stored text of a drift's evidence at one of its moves (`drift_history.evidence`).
pub fn encode_evidence(evidence: &Evidence) -> Result<String, serde_json::Error> {
    serde_json::to_string(&EvidenceRowRef::from(evidence))
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

impl From<DriftRow> for Drift {
    fn from(row: DriftRow) -> Drift {
        Drift {
            id: row.id,
            class: row.class,
            rule: row.rule,
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

    fn full_drift() -> Drift {
        Drift {
            id: "d1".into(),
            class: "manual_edit".into(),
            rule: None,
            severity: Severity::Critical,
            state: DriftState::Resolved,
            cluster: "prod".into(),
            uid: "u1".into(),
            api_version: "serving.knative.dev/v1".into(),
            kind: "Service".into(),
            namespace: "pay".into(),
            name: "checkout".into(),
            labels: BTreeMap::from([("app".into(), "checkout".into())]),
            owner: OwnerChain {
                service: Some("checkout".into()),
                configuration: None,
                revision: Some("checkout-00001".into()),
            },
            evidence: Evidence {
                summary: "edited".into(),
                changes: vec![
                    FieldChange {
                        path: "/spec/a".into(),
                        before: None,
                        after: Some(json!(1)),
                    },
                    FieldChange {
                        path: "/spec/b".into(),
                        before: Some(Value::Null),
                        after: None,
                    },
                ],
                actor: Some(Actor {
                    manager: "kubectl-edit".into(),
                    operation: "Update".into(),
                    subresource: String::new(),
                    time: Some("2026-11-29T10:00:00Z".into()),
                    user: None,
                    trusted: false,
                }),
                hint: Some("kubectl ...".into()),
                severity: Some(Severity::Info),
                facts: BTreeMap::from([("k".into(), "v".into())]),
            },
            since: 1,
            fire_at: 2,
            fired_at: Some(3),
            resolved_at: Some(4),
            resolution: Some("reverted".into()),
        }
    }

    #[test]
    fn what_is_written_reads_back_whole_and_in_the_owned_shape() {
        let drift = full_drift();
        let written = encode_drift(&drift).unwrap();
        let row: DriftRow = serde_json::from_str(&written).unwrap();
        // The borrowed and the owned shape write the same JSON.
        assert_eq!(
            serde_json::to_value(&row).unwrap(),
            serde_json::from_str::<Value>(&written).unwrap()
        );
        assert_eq!(Drift::from(row), drift);
        let notice = Notice {
            kind: NoticeKind::Repeat,
            drift: drift.clone(),
            at: 9,
            resend: 2,
        };
        let payload = encode_notice(&notice).unwrap();
        let row: NoticeRow = serde_json::from_str(&payload).unwrap();
        assert_eq!(
            serde_json::to_value(&row).unwrap(),
            serde_json::from_str::<Value>(&payload).unwrap()
        );
        assert_eq!(decode_notice(&payload).unwrap(), notice);
        let evidence = encode_evidence(&drift.evidence).unwrap();
        let row: EvidenceRow = serde_json::from_str(&evidence).unwrap();
        assert_eq!(Evidence::from(row), drift.evidence);
    }

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
