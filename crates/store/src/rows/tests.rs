//! The stored shapes: what is written reads back whole, a row written borrowing the core type and
//! one read back (owning its text) write the same JSON, and that JSON is byte for byte what
//! stores hold (fixed text: a change here is a migration).

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

/// A drift with every optional part absent or empty (and a rule).
fn bare_drift() -> Drift {
    Drift {
        rule: Some("r".into()),
        labels: BTreeMap::new(),
        owner: OwnerChain::default(),
        evidence: Evidence::default(),
        fired_at: None,
        resolved_at: None,
        resolution: None,
        ..full_drift()
    }
}

/// `drifts.body` of [`full_drift`], as every version of the store wrote it.
const FULL_DRIFT: &str = r#"{"id":"d1","class":"manual_edit","severity":"critical","state":"resolved","cluster":"prod","uid":"u1","apiVersion":"serving.knative.dev/v1","kind":"Service","namespace":"pay","name":"checkout","labels":{"app":"checkout"},"owner":{"service":"checkout","revision":"checkout-00001"},"evidence":{"summary":"edited","changes":[{"path":"/spec/a","after":1},{"path":"/spec/b","before":null}],"actor":{"manager":"kubectl-edit","operation":"Update","time":"2026-11-29T10:00:00Z","trusted":false},"hint":"kubectl ...","severity":"info","facts":{"k":"v"}},"since":1,"fireAt":2,"firedAt":3,"resolvedAt":4,"resolution":"reverted"}"#;

/// `drift_history.evidence` of [`full_drift`].
const FULL_EVIDENCE: &str = r#"{"summary":"edited","changes":[{"path":"/spec/a","after":1},{"path":"/spec/b","before":null}],"actor":{"manager":"kubectl-edit","operation":"Update","time":"2026-11-29T10:00:00Z","trusted":false},"hint":"kubectl ...","severity":"info","facts":{"k":"v"}}"#;

/// `drifts.body` of [`bare_drift`].
const BARE_DRIFT: &str = r#"{"id":"d1","class":"manual_edit","rule":"r","severity":"critical","state":"resolved","cluster":"prod","uid":"u1","apiVersion":"serving.knative.dev/v1","kind":"Service","namespace":"pay","name":"checkout","owner":{},"evidence":{"summary":""},"since":1,"fireAt":2}"#;

/// `silences.body` of a silence without expiry.
const SILENCE: &str = r#"{"matchers":{"namespace":"team-*"},"expiresAt":null,"comment":"c"}"#;

/// What a row written borrowing its core type and the same row read back (owning its text)
/// write: the same text.
fn rewritten<'a, T>(written: &'a str) -> String
where
    T: Serialize + Deserialize<'a>,
{
    serde_json::to_string(&serde_json::from_str::<T>(written).unwrap()).unwrap()
}

#[test]
fn what_is_written_reads_back_whole_and_in_the_owned_shape() {
    let drift = full_drift();
    let written = drift_body(&drift).unwrap();
    assert_eq!(written, FULL_DRIFT);
    assert_eq!(rewritten::<DriftRow<'_>>(&written), written);
    assert_eq!(decode_drift(&written).unwrap(), drift);
    let notice = Notice {
        kind: NoticeKind::Repeat,
        drift: drift.clone(),
        at: 9,
        resend: 2,
        remediation: None,
    };
    let payload = encode_notice(&notice).unwrap();
    assert_eq!(
        payload,
        format!(r#"{{"kind":"repeat","drift":{FULL_DRIFT},"at":9,"resend":2}}"#)
    );
    assert_eq!(rewritten::<NoticeRow<'_>>(&payload), payload);
    assert_eq!(decode_notice(&payload).unwrap(), notice);
    let evidence = evidence_text(&drift.evidence).unwrap();
    assert_eq!(evidence, FULL_EVIDENCE);
    assert_eq!(rewritten::<EvidenceRow<'_>>(&evidence), evidence);
    assert_eq!(decode_evidence(&evidence).unwrap(), drift.evidence);
}

#[test]
fn absent_parts_are_left_out_as_they_always_were() {
    let drift = bare_drift();
    let written = drift_body(&drift).unwrap();
    assert_eq!(written, BARE_DRIFT);
    assert_eq!(rewritten::<DriftRow<'_>>(&written), written);
    assert_eq!(decode_drift(&written).unwrap(), drift);
    let notice = Notice {
        kind: NoticeKind::Firing,
        drift,
        at: 1,
        resend: 0,
        remediation: None,
    };
    let payload = encode_notice(&notice).unwrap();
    assert_eq!(
        payload,
        format!(r#"{{"kind":"firing","drift":{BARE_DRIFT},"at":1}}"#)
    );
    assert_eq!(decode_notice(&payload).unwrap(), notice);
    let silence = Silence {
        matchers: BTreeMap::from([("namespace".into(), "team-*".into())]),
        expires_at: None,
        comment: Some("c".into()),
    };
    let body = silence_body(&silence).unwrap();
    assert_eq!(body, SILENCE);
    assert_eq!(rewritten::<SilenceRow<'_>>(&body), body);
    assert_eq!(decode_silence(&body).unwrap(), silence);
}

#[test]
fn a_field_that_was_null_is_not_a_field_that_was_added() {
    let row: FieldChangeRow<'_> =
        serde_json::from_value(json!({"path": "/spec/x", "before": null, "after": 1})).unwrap();
    assert_eq!(row.before.as_deref(), Some(&Value::Null));
    let row: FieldChangeRow<'_> =
        serde_json::from_value(json!({"path": "/spec/x", "after": 1})).unwrap();
    assert_eq!(row.before, None);
    let text = serde_json::to_string(&FieldChangeRow {
        path: "/spec/x".into(),
        before: Some(Cow::Owned(Value::Null)),
        after: None,
    })
    .unwrap();
    assert_eq!(text, r#"{"path":"/spec/x","before":null}"#);
}

#[test]
fn rows_of_older_binaries_lacking_fields_read_back() {
    // Before rules, owners and `trusted`: the fields default.
    let drift = decode_drift(
        r#"{"id":"d","class":"c","severity":"info","state":"firing","cluster":"k","uid":"u",
            "apiVersion":"v1","kind":"ConfigMap","namespace":"n","name":"x",
            "evidence":{"actor":{"manager":"m","operation":"Update"}},"since":1,"fireAt":1}"#,
    )
    .unwrap();
    assert_eq!(drift.rule, None);
    assert_eq!(drift.owner, OwnerChain::default());
    let actor = drift.evidence.actor.unwrap();
    assert!(!actor.trusted && actor.subresource.is_empty());
    assert_eq!(decode_silence(r#"{"matchers":{}}"#).unwrap().comment, None);
}

#[test]
fn a_remediation_notice_carries_its_attempt_and_reads_back_whole() {
    use drift_model::remediation::{Attempt, Outcome, PlannedRequest};
    let attempt = Attempt {
        drift_id: "d".into(),
        cluster: "prod".into(),
        object: "x/v1/Thing/n/t".into(),
        fields: vec!["/spec/n".into()],
        at: 5,
        mode: "apply".into(),
        action: "revert".into(),
        rule: "revert-hand-edits".into(),
        approved_by: Some("alice".into()),
        request: Some(PlannedRequest {
            method: "PATCH".into(),
            path: "/apis/x/v1/namespaces/n/things/t?fieldManager=drift-sentinel".into(),
            content_type: "application/merge-patch+json".into(),
            body: r#"{"spec":{"n":1}}"#.into(),
        }),
        resource_version: Some("7".into()),
        judged: Some("ab".into()),
        outcome: Outcome::Applied,
        status: Some(200),
        resource_version_after: Some("8".into()),
        reason: None,
        detail: None,
    };
    let notice = Notice {
        kind: NoticeKind::Remediation,
        drift: bare_drift(),
        at: 6,
        resend: 0,
        remediation: Some(Box::new(attempt.clone())),
    };
    let payload = encode_notice(&notice).unwrap();
    assert!(
        payload.starts_with(r#"{"kind":"remediation","#),
        "{payload}"
    );
    assert_eq!(rewritten::<NoticeRow<'_>>(&payload), payload);
    assert_eq!(decode_notice(&payload).unwrap(), notice);
    // The same attempt as the remediations table keeps it.
    let body = attempt_body(&attempt).unwrap();
    assert_eq!(decode_attempt(&body).unwrap(), attempt);
    // An outcome this binary does not know is corrupt, not guessed.
    let unknown = body.replace(r#""outcome":"applied""#, r#""outcome":"maybe""#);
    assert!(decode_attempt(&unknown).is_err());
}
