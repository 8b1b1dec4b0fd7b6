//! The stored shapes of what the store keeps as JSON text: one serializable type per stored
//! column, apart from the core types, so that a field added to a core type changes no stored row
//! by accident. Each shape belongs to a schema version (`sqlite/schema.rs`); changing one is a
//! migration. Every shape here is the one schema versions 1 to 4 store (the layout before
//! versions were recorded wrote exactly these), and decoding is lenient where older rows may lack
//! a field (`#[serde(default)]`).
//!
//! | column | shape |
//! |---|---|
//! | `objects.body` | the engine's (`drift-core`'s `classify::stored`): the store keeps it as text |
//! | `drifts.body` | `DriftRow` (`drift_body`, `decode_drift`) |
//! | `drift_history.evidence` | `EvidenceRow` (`evidence_text`, `decode_evidence`) |
//! | `outbox.payload` | `NoticeRow` (`encode_notice`, `decode_notice`) |
//! | `silences.body` | `SilenceRow` (`silence_body`, `decode_silence`) |
//! | `remediations.body` (version 5) | `AttemptRow` (`attempt_body`, `decode_attempt`) |
//!
//! Each shape is written once, with `Cow` fields: a row is written borrowing the core type
//! (writing copies nothing of the engine's state) and read owning its text. The JSON is the same
//! either way; a unit test (`rows/tests.rs`) holds both to fixed expected text. Reading does not
//! borrow from the text (`#[serde(borrow)]`): every decoded row becomes an owned core type at
//! once, so a borrowed string would only be copied a moment later.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::Error;
use drift_model::{
    Actor, Drift, DriftState, Evidence, FieldChange, Millis, Notice, NoticeKind, OwnerChain,
    Severity, Silence,
};

mod attempt;
#[cfg(test)]
mod tests;

pub(crate) use attempt::{attempt_body, decode_attempt};

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
    /// `remediation` (schema version 5).
    Remediation,
}

/// A present value, `null` included (`Some(Null)`), as opposed to an absent one (`None`, by
/// `#[serde(default)]`): a field that was `null` is not a field that was added.
fn present<'de, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'a, Value>>, D::Error> {
    Value::deserialize(deserializer).map(|value| Some(Cow::Owned(value)))
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// One changed field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FieldChangeRow<'a> {
    /// JSON pointer.
    pub(crate) path: Cow<'a, str>,
    /// Value before; absent when the field was added.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) before: Option<Cow<'a, Value>>,
    /// Value after; absent when the field was removed.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) after: Option<Cow<'a, Value>>,
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ActorRow<'a> {
    /// Field manager.
    pub(crate) manager: Cow<'a, str>,
    /// `Apply` or `Update`.
    pub(crate) operation: Cow<'a, str>,
    /// Subresource written, if any.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub(crate) subresource: Cow<'a, str>,
    /// When the manager wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) time: Option<Cow<'a, str>>,
    /// Knative's `lastModifier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) user: Option<Cow<'a, str>>,
    /// In `trustedManagers`.
    #[serde(default)]
    pub(crate) trusted: bool,
}

/// `drift_history.evidence`, and the evidence inside a [`DriftRow`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EvidenceRow<'a> {
    /// One sentence.
    #[serde(default)]
    pub(crate) summary: Cow<'a, str>,
    /// The field diff.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) changes: Vec<FieldChangeRow<'a>>,
    /// Who changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) actor: Option<ActorRow<'a>>,
    /// How to fix it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) hint: Option<Cow<'a, str>>,
    /// The class's severity for this finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) severity: Option<SeverityRow>,
    /// Structured facts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) facts: Cow<'a, BTreeMap<String, String>>,
}

/// The Knative owner chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct OwnerRow<'a> {
    /// Knative Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) service: Option<Cow<'a, str>>,
    /// Configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) configuration: Option<Cow<'a, str>>,
    /// Revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) revision: Option<Cow<'a, str>>,
}

/// `drifts.body`, and the drift inside a [`NoticeRow`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DriftRow<'a> {
    /// Episode id.
    pub(crate) id: Cow<'a, str>,
    /// Class id.
    pub(crate) class: Cow<'a, str>,
    /// The rule of an `invariant` drift (absent in rows written before invariants existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rule: Option<Cow<'a, str>>,
    /// Severity.
    pub(crate) severity: SeverityRow,
    /// State.
    pub(crate) state: StateRow,
    /// Cluster.
    pub(crate) cluster: Cow<'a, str>,
    /// Object uid.
    pub(crate) uid: Cow<'a, str>,
    /// Object `apiVersion`.
    pub(crate) api_version: Cow<'a, str>,
    /// Object kind.
    pub(crate) kind: Cow<'a, str>,
    /// Object namespace.
    pub(crate) namespace: Cow<'a, str>,
    /// Object name.
    pub(crate) name: Cow<'a, str>,
    /// Object labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) labels: Cow<'a, BTreeMap<String, String>>,
    /// Owner chain.
    #[serde(default)]
    pub(crate) owner: OwnerRow<'a>,
    /// Evidence.
    pub(crate) evidence: EvidenceRow<'a>,
    /// First seen.
    pub(crate) since: Millis,
    /// Fires at.
    pub(crate) fire_at: Millis,
    /// Fired at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fired_at: Option<Millis>,
    /// Resolved at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) resolved_at: Option<Millis>,
    /// Why it resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) resolution: Option<Cow<'a, str>>,
}

/// `outbox.payload`: the notice as queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct NoticeRow<'a> {
    /// Firing, resolved or a reminder.
    pub(crate) kind: NoticeKindRow,
    /// The drift at that moment.
    pub(crate) drift: DriftRow<'a>,
    /// When the transition happened.
    pub(crate) at: Millis,
    /// Re-sends so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) resend: u32,
    /// The attempt of a `remediation` notice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) remediation: Option<attempt::AttemptRow<'a>>,
}

/// `silences.body`: matchers, expiry and comment, as `rules.silences` has them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SilenceRow<'a> {
    /// Matchers.
    pub(crate) matchers: Cow<'a, BTreeMap<String, String>>,
    /// RFC 3339 expiry, as given (written as `null` when absent).
    #[serde(default)]
    pub(crate) expires_at: Option<Cow<'a, str>>,
    /// Why (written as `null` when absent).
    #[serde(default)]
    pub(crate) comment: Option<Cow<'a, str>>,
}

/// A borrowed text, or none.
fn borrowed(text: &Option<String>) -> Option<Cow<'_, str>> {
    text.as_deref().map(Cow::Borrowed)
}

/// An owned text, or none.
fn owned(text: Option<Cow<'_, str>>) -> Option<String> {
    text.map(Cow::into_owned)
}

impl<'a> From<&'a Evidence> for EvidenceRow<'a> {
    fn from(evidence: &'a Evidence) -> EvidenceRow<'a> {
        EvidenceRow {
            summary: Cow::Borrowed(&evidence.summary),
            changes: (evidence.changes.iter())
                .map(|change| FieldChangeRow {
                    path: Cow::Borrowed(&change.path),
                    before: change.before.as_ref().map(Cow::Borrowed),
                    after: change.after.as_ref().map(Cow::Borrowed),
                })
                .collect(),
            actor: evidence.actor.as_ref().map(|actor| ActorRow {
                manager: Cow::Borrowed(&actor.manager),
                operation: Cow::Borrowed(&actor.operation),
                subresource: Cow::Borrowed(&actor.subresource),
                time: borrowed(&actor.time),
                user: borrowed(&actor.user),
                trusted: actor.trusted,
            }),
            hint: borrowed(&evidence.hint),
            severity: evidence.severity.map(SeverityRow::from),
            facts: Cow::Borrowed(&evidence.facts),
        }
    }
}

impl From<EvidenceRow<'_>> for Evidence {
    fn from(row: EvidenceRow<'_>) -> Evidence {
        Evidence {
            summary: row.summary.into_owned(),
            changes: (row.changes.into_iter())
                .map(|change| FieldChange {
                    path: change.path.into_owned(),
                    before: change.before.map(Cow::into_owned),
                    after: change.after.map(Cow::into_owned),
                })
                .collect(),
            actor: row.actor.map(|actor| Actor {
                manager: actor.manager.into_owned(),
                operation: actor.operation.into_owned(),
                subresource: actor.subresource.into_owned(),
                time: owned(actor.time),
                user: owned(actor.user),
                trusted: actor.trusted,
            }),
            hint: owned(row.hint),
            severity: row.severity.map(Severity::from),
            facts: row.facts.into_owned(),
        }
    }
}

impl<'a> From<&'a Drift> for DriftRow<'a> {
    fn from(drift: &'a Drift) -> DriftRow<'a> {
        DriftRow {
            id: Cow::Borrowed(&drift.id),
            class: Cow::Borrowed(&drift.class),
            rule: borrowed(&drift.rule),
            severity: drift.severity.into(),
            state: drift.state.into(),
            cluster: Cow::Borrowed(&drift.cluster),
            uid: Cow::Borrowed(&drift.uid),
            api_version: Cow::Borrowed(&drift.api_version),
            kind: Cow::Borrowed(&drift.kind),
            namespace: Cow::Borrowed(&drift.namespace),
            name: Cow::Borrowed(&drift.name),
            labels: Cow::Borrowed(&drift.labels),
            owner: OwnerRow {
                service: borrowed(&drift.owner.service),
                configuration: borrowed(&drift.owner.configuration),
                revision: borrowed(&drift.owner.revision),
            },
            evidence: EvidenceRow::from(&drift.evidence),
            since: drift.since,
            fire_at: drift.fire_at,
            fired_at: drift.fired_at,
            resolved_at: drift.resolved_at,
            resolution: borrowed(&drift.resolution),
        }
    }
}

impl From<DriftRow<'_>> for Drift {
    fn from(row: DriftRow<'_>) -> Drift {
        Drift {
            id: row.id.into_owned(),
            class: row.class.into_owned(),
            rule: owned(row.rule),
            severity: row.severity.into(),
            state: row.state.into(),
            cluster: row.cluster.into_owned(),
            uid: row.uid.into_owned(),
            api_version: row.api_version.into_owned(),
            kind: row.kind.into_owned(),
            namespace: row.namespace.into_owned(),
            name: row.name.into_owned(),
            labels: row.labels.into_owned(),
            owner: OwnerChain {
                service: owned(row.owner.service),
                configuration: owned(row.owner.configuration),
                revision: owned(row.owner.revision),
            },
            evidence: row.evidence.into(),
            since: row.since,
            fire_at: row.fire_at,
            fired_at: row.fired_at,
            resolved_at: row.resolved_at,
            resolution: owned(row.resolution),
        }
    }
}

impl<'a> From<&'a Notice> for NoticeRow<'a> {
    fn from(notice: &'a Notice) -> NoticeRow<'a> {
        NoticeRow {
            kind: match notice.kind {
                NoticeKind::Firing => NoticeKindRow::Firing,
                NoticeKind::Resolved => NoticeKindRow::Resolved,
                NoticeKind::Repeat => NoticeKindRow::Repeat,
                NoticeKind::Remediation => NoticeKindRow::Remediation,
            },
            drift: DriftRow::from(&notice.drift),
            at: notice.at,
            resend: notice.resend,
            remediation: notice.remediation.as_deref().map(attempt::AttemptRow::from),
        }
    }
}

impl From<NoticeRow<'_>> for Notice {
    fn from(row: NoticeRow<'_>) -> Notice {
        Notice {
            kind: match row.kind {
                NoticeKindRow::Firing => NoticeKind::Firing,
                NoticeKindRow::Resolved => NoticeKind::Resolved,
                NoticeKindRow::Repeat => NoticeKind::Repeat,
                NoticeKindRow::Remediation => NoticeKind::Remediation,
            },
            drift: row.drift.into(),
            at: row.at,
            resend: row.resend,
            // An attempt this binary cannot read leaves the notice without it (it is still sent).
            remediation: row
                .remediation
                .and_then(|row| attempt::from_row(row).ok())
                .map(Box::new),
        }
    }
}

impl<'a> From<&'a Silence> for SilenceRow<'a> {
    fn from(silence: &'a Silence) -> SilenceRow<'a> {
        SilenceRow {
            matchers: Cow::Borrowed(&silence.matchers),
            expires_at: borrowed(&silence.expires_at),
            comment: borrowed(&silence.comment),
        }
    }
}

impl From<SilenceRow<'_>> for Silence {
    fn from(row: SilenceRow<'_>) -> Silence {
        Silence {
            matchers: row.matchers.into_owned(),
            expires_at: owned(row.expires_at),
            comment: owned(row.comment),
        }
    }
}

/// The payload text of a notice (`outbox.payload`).
pub fn encode_notice(notice: &Notice) -> Result<String, serde_json::Error> {
    serde_json::to_string(&NoticeRow::from(notice))
}

/// The notice of a payload text.
pub(crate) fn decode_notice(payload: &str) -> Result<Notice, serde_json::Error> {
    serde_json::from_str::<NoticeRow<'_>>(payload).map(Notice::from)
}

/// A stored row of `table` that could not be encoded or decoded.
pub(crate) fn corrupt(table: &'static str) -> impl Fn(serde_json::Error) -> Error {
    move |source| Error::Corrupt { table, source }
}

/// The stored text of a drift (`drifts.body`).
pub(crate) fn drift_body(drift: &Drift) -> Result<String, Error> {
    serde_json::to_string(&DriftRow::from(drift)).map_err(corrupt("drifts"))
}

/// The drift of a stored `drifts.body`.
pub(crate) fn decode_drift(body: &str) -> Result<Drift, Error> {
    serde_json::from_str::<DriftRow<'_>>(body)
        .map(Drift::from)
        .map_err(corrupt("drifts"))
}

/// The stored text of a drift's evidence at one of its moves (`drift_history.evidence`).
pub(crate) fn evidence_text(evidence: &Evidence) -> Result<String, Error> {
    serde_json::to_string(&EvidenceRow::from(evidence)).map_err(corrupt("drift_history"))
}

/// The evidence of a stored `drift_history.evidence`.
pub(crate) fn decode_evidence(text: &str) -> Result<Evidence, Error> {
    serde_json::from_str::<EvidenceRow<'_>>(text)
        .map(Evidence::from)
        .map_err(corrupt("drift_history"))
}

/// The payload text of a queued notice (`outbox.payload`).
pub(crate) fn notice_payload(notice: &Notice) -> Result<String, Error> {
    encode_notice(notice).map_err(corrupt("outbox"))
}

/// The stored text of a silence (`silences.body`).
pub(crate) fn silence_body(silence: &Silence) -> Result<String, Error> {
    serde_json::to_string(&SilenceRow::from(silence)).map_err(corrupt("silences"))
}

/// The silence of a stored `silences.body`.
pub(crate) fn decode_silence(body: &str) -> Result<Silence, Error> {
    serde_json::from_str::<SilenceRow<'_>>(body)
        .map(Silence::from)
        .map_err(corrupt("silences"))
}
