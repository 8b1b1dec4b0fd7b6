//! `certificate_expiring`: a Knative `Certificate` (`networking.internal.knative.dev`) or a
//! cert-manager `Certificate` (`cert-manager.io`) whose `status.notAfter` is within
//! `rules.certificates.warnBefore` (warning) or `criticalBefore` (critical) of now, or past.
//!
//! Judged by `notAfter` and the clock, never by `Ready`: cert-manager keeps `Ready=True` ("has
//! not expired") past `notAfter` while a renewal is stuck in `Issuing` (cert-manager issue
//! #7895). The verdict changes with time alone, so every verdict tells the engine when to judge
//! again (the next threshold: `notAfter - warnBefore`, `notAfter - criticalBefore`, `notAfter`).
//!
//! One expiry, one alert: with the cert-manager class, Knative's certificate reconciler makes a
//! cert-manager Certificate of the same name, controller-owned by the Knative one, and copies
//! its `notAfter` up. The drift is on the Knative Certificate (the object Knative users know, and
//! the one the condition chain Route → KIngress → Certificate names), judged from the
//! cert-manager child's status while that is tracked (it is fresher and says why renewal fails).
//! A child controlled by a Knative Certificate is never judged on itself, tracked owner or not.
//! Without a `notAfter` (a recreated child) an open drift is kept, not resolved.

use super::*;
use crate::classify::evidence::hint::{namespace_flag, shell_quote};
use crate::classify::kinds::NETWORKING_INTERNAL;
use drift_model::time::{format_span, format_time, millis, parse_time};

/// The class id.
pub(crate) const ID: &str = "certificate_expiring";
/// cert-manager's API group.
const CERT_MANAGER: &str = "cert-manager.io";

/// The class.
pub(crate) struct CertificateExpiring;

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: ID,
    english: "Certificate expiring",
    chinese: "证书即将过期",
    severity: Severity::Warning,
};

fn is_cert_manager(object: &ObjectState) -> bool {
    object.kind == "Certificate" && object.group() == CERT_MANAGER
}

fn is_knative(object: &ObjectState) -> bool {
    object.kind == "Certificate" && object.group() == NETWORKING_INTERNAL
}

/// True for a cert-manager Certificate whose controller is a Knative Certificate (Knative's
/// certificate reconciler made it): its expiry is the owner's drift, whether or not the owner is
/// tracked yet, so it is never judged on itself.
fn knative_controlled(object: &ObjectState) -> bool {
    object.controller_owner().is_some_and(|owner| {
        owner.kind == "Certificate"
            && crate::decode::object::api_group(&owner.api_version) == NETWORKING_INTERNAL
    })
}

/// The live Knative Certificate that controls a cert-manager one, when it is tracked (and not
/// being deleted: its own deletion clears its drift).
fn knative_owner<'a>(graph: &'a Graph, object: &ObjectState) -> Option<&'a ObjectState> {
    let owner = object.controller_owner()?;
    graph
        .by_uid(&object.cluster, &owner.uid)
        .filter(|owner| !owner.is_going_away() && is_knative(owner))
}

/// The live cert-manager Certificate a Knative one controls (same name), when it is tracked.
fn cert_manager_child<'a>(graph: &'a Graph, knative: &ObjectState) -> Option<&'a ObjectState> {
    graph.children(&knative.key()).into_iter().find(|child| {
        is_cert_manager(child)
            && !child.is_going_away()
            && child.name == knative.name
            && child
                .controller_owner()
                .is_some_and(|owner| owner.uid == knative.uid)
    })
}

impl CertificateExpiring {
    /// The verdict on `subject`, read from `source`'s status (the subject itself, or the
    /// cert-manager child that reports through it); `None` when there is no `notAfter` to judge
    /// by while a drift is open (see [`Self::no_expiry`]).
    fn judge(
        &self,
        context: &Context<'_>,
        subject: &ObjectState,
        source: &ObjectState,
    ) -> Option<Assessment> {
        if subject.is_going_away() {
            return Some(
                Assessment::clear(subject, "the certificate is being deleted")
                    .judged_again(JudgeAgain::Never),
            );
        }
        let status = source.status.value();
        let Some(text) = status.get("notAfter").and_then(serde_json::Value::as_str) else {
            return self.no_expiry(context, subject, "no status.notAfter (not issued yet)");
        };
        let Some(not_after) = parse_time(text) else {
            return self.no_expiry(
                context,
                subject,
                format!("status.notAfter {text:?} is not an RFC 3339 time"),
            );
        };
        let windows = context.rules.certificates();
        let warn_at = not_after.saturating_sub(millis(windows.warn_before));
        let critical_at = not_after.saturating_sub(millis(windows.critical_before));
        let now = context.now;
        if now < warn_at {
            // A resolution is written once, when the drift ends: "from now" stays true there.
            return Some(
                Assessment::clear(
                    subject,
                    format!(
                        "expires {} ({} from now), outside the {} window",
                        format_time(not_after),
                        format_span(not_after.saturating_sub(now)),
                        format_span(millis(windows.warn_before))
                    ),
                )
                .judged_again(JudgeAgain::At(warn_at)),
            );
        }
        // Only absolute words in the evidence ("expires at T, within the 3d critical window",
        // never "in 2d"): it then changes only when the window does (or what cert-manager says),
        // so the drift row is not rewritten at every event and resync pass, and a reminder does
        // not repeat a time left that was true only when the drift fired.
        let (severity, next, window, when) = if now < critical_at {
            let span = format_span(millis(windows.warn_before));
            let when = format!(
                "expires at {}, within the {span} warning window",
                format_time(not_after)
            );
            (
                Severity::Warning,
                JudgeAgain::At(critical_at),
                "warning",
                when,
            )
        } else if now < not_after {
            let span = format_span(millis(windows.critical_before));
            let when = format!(
                "expires at {}, within the {span} critical window",
                format_time(not_after)
            );
            (
                Severity::Critical,
                JudgeAgain::At(not_after),
                "critical",
                when,
            )
        } else {
            let when = format!("expired at {}", format_time(not_after));
            (Severity::Critical, JudgeAgain::Never, "expired", when)
        };
        let named = format!(
            "{} {}/{}",
            kind_name(subject),
            subject.namespace,
            subject.name
        );
        let mut found = evidence(if source.uid == subject.uid {
            format!("{named} {when}")
        } else {
            format!(
                "{named} {when}, as its cert-manager Certificate {} says",
                source.name
            )
        });
        found.severity = Some(severity);
        let facts = &mut found.facts;
        facts.insert("notAfter".into(), format_time(not_after));
        facts.insert("window".into(), window.to_string());
        facts.insert("expired".into(), (window == "expired").to_string());
        facts.insert(
            "warnBefore".into(),
            format_span(millis(windows.warn_before)),
        );
        facts.insert(
            "criticalBefore".into(),
            format_span(millis(windows.critical_before)),
        );
        if source.uid != subject.uid {
            facts.insert("certManagerCertificate".into(), source.reference());
        }
        let mut why = Vec::new();
        if let Some(attempts) = status
            .get("failedIssuanceAttempts")
            .and_then(serde_json::Value::as_i64)
        {
            facts.insert("failedIssuanceAttempts".into(), attempts.to_string());
            why.push(format!(
                "{attempts} failed issuance attempts (cert-manager backs off 1h·2^(n-1) between them)"
            ));
        }
        if let Some(failed) = status
            .get("lastFailureTime")
            .and_then(serde_json::Value::as_str)
        {
            facts.insert("lastFailureTime".into(), failed.to_string());
            why.push(format!("last failure at {failed}"));
        }
        for condition in source.conditions() {
            // `Ready` is recorded, not trusted: it can say "has not expired" past `notAfter`.
            if matches!(
                condition.condition_type.as_str(),
                "Issuing" | "Ready" | "Renewing"
            ) {
                facts.insert(
                    format!("condition.{}", condition.condition_type),
                    condition.describe(),
                );
                if condition.condition_type == "Issuing" {
                    why.push(condition.describe());
                }
            }
        }
        found.hint = Some(hint(subject, source, &why));
        Some(Assessment::holds(subject, found).judged_again(next))
    }

    /// No `notAfter` to judge by: clear when nothing is open, but no verdict on an open drift.
    /// Knative copies its cert-manager child's `notAfter`, and a recreated child has none for a
    /// while; resolving then would end a real expiry silently. An open drift ends when
    /// `notAfter` moves out of the window (renewal) or the certificate goes.
    fn no_expiry(
        &self,
        context: &Context<'_>,
        subject: &ObjectState,
        reason: impl Into<std::borrow::Cow<'static, str>>,
    ) -> Option<Assessment> {
        if context.open_drift(subject, ID).is_some() {
            return None;
        }
        Some(Assessment::clear(subject, reason).judged_again(JudgeAgain::Never))
    }
}

/// "Certificate" or "Knative Certificate", so a reader knows which of the two kinds it is.
fn kind_name(object: &ObjectState) -> &'static str {
    if is_knative(object) {
        "Knative Certificate"
    } else {
        "cert-manager Certificate"
    }
}

/// What to run: describe the certificate cert-manager issues, read why its renewal fails, renew
/// it by hand; for a Knative Certificate with no cert-manager one tracked, its controller's log.
fn hint(subject: &ObjectState, source: &ObjectState, why: &[String]) -> String {
    let mut text = String::new();
    if !why.is_empty() {
        text.push_str(&format!("Renewal: {}. ", why.join("; ")));
    }
    let namespace = namespace_flag(&source.namespace);
    let name = shell_quote(&source.name);
    if is_cert_manager(source) {
        text.push_str(&format!(
            "kubectl{namespace} describe certificates.cert-manager.io {name}  # Issuing condition, events, the CertificateRequest; renew now: cmctl renew{namespace} {name}"
        ));
    } else {
        text.push_str(&format!(
            "kubectl{namespace} describe certificates.networking.internal.knative.dev {name}; look at {}",
            crate::classify::kinds::controller_of(NETWORKING_INTERNAL, "Certificate")
        ));
    }
    if subject.uid != source.uid {
        text.push_str(&format!(
            " (Knative copies its notAfter into Certificate {})",
            subject.reference()
        ));
    }
    text
}

impl DriftClass for CertificateExpiring {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn escalates(&self) -> bool {
        // Warning inside warnBefore, critical inside criticalBefore: the move is the news.
        true
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            // Nothing about an approaching expiry is transient: the thresholds are the grace.
            grace: secs(0),
            grace_follows_default: false,
        }
    }

    fn reassessable(&self) -> bool {
        // Read off the state and the clock alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        // Most events are of other kinds: one comparison and out.
        if object.kind != "Certificate" {
            return Vec::new();
        }
        if is_cert_manager(object) {
            if !knative_controlled(object) {
                return self.judge(context, object, object).into_iter().collect();
            }
            // Never judged on itself: its Knative owner is watched by default, and in what
            // order the first events of the two kinds arrive is chance (grace is 0, so a child
            // judged first would fire, resolve and hand over: three messages for one expiry).
            // The clear ends a drift an older version opened on it.
            let mut verdicts = vec![Assessment::clear(
                object,
                "reported through its Knative Certificate (its controller)",
            )
            .judged_again(JudgeAgain::Never)];
            if let Some(owner) = knative_owner(context.graph, object) {
                // A child going away leaves its owner to its own notAfter.
                let source = if object.is_going_away() {
                    owner
                } else {
                    object
                };
                verdicts.extend(self.judge(context, owner, source));
            }
            return verdicts;
        }
        if is_knative(object) {
            let source = cert_manager_child(context.graph, object).unwrap_or(object);
            return self.judge(context, object, source).into_iter().collect();
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    //! The class on the real objects of `tests/fixtures/certificates/` (README there), through
    //! the engine's public calls: decode, apply, the clock as an argument.

    use std::sync::Arc;

    use serde_json::{json, Value};

    use crate::classify::{Certificates, Engine, Rules};
    use crate::decode::{parse_object, Action, ApiServerEvent};
    use drift_model::time::parse_time;
    use drift_model::{DriftState, Severity};

    const DAY: i64 = 86_400_000;

    fn fixture(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/certificates")
            .join(name);
        serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// The documented cert-manager Certificate with the status of cert-manager issue #7895
    /// (`notAfter` 2025-08-02T13:50:04Z, `Ready=True` "has not expired", `Issuing=True`).
    fn issue_7895() -> Value {
        let mut object = fixture(
            "cert-manager-website__docs-usage-certificate__Certificate-example-com-spec-only.yaml",
        );
        object["status"] =
            fixture("cert-manager-issue-7895__Certificate-status-expired-still-Ready.yaml");
        object["metadata"]["uid"] = json!("5b0c6a57-0c00-4e8e-9d2a-7c2d3f0e1a01");
        object["metadata"]["resourceVersion"] = json!("100");
        object["metadata"]["generation"] = json!(5);
        object["metadata"]["creationTimestamp"] = json!("2025-05-04T13:50:00Z");
        object
    }

    fn apply(engine: &mut Engine, object: &Value, now: i64) {
        let object = parse_object(object.clone()).unwrap();
        let event =
            ApiServerEvent::for_object(String::new(), String::new(), "prod", Action::Add, object);
        engine.apply(&event, now);
    }

    /// The open drift's severity and summary.
    fn open(engine: &Engine) -> Option<(Severity, DriftState, String)> {
        engine
            .open_drifts()
            .find(|drift| drift.class == super::ID)
            .map(|drift| (drift.severity, drift.state, drift.evidence.summary.clone()))
    }

    #[test]
    fn ready_true_past_not_after_is_still_critical() {
        let mut engine = Engine::new(Arc::new(Rules::default()));
        // When the issue was filed: two days past notAfter, Ready=True all the same.
        apply(
            &mut engine,
            &issue_7895(),
            parse_time("2025-08-04T13:50:04Z").unwrap(),
        );
        let (severity, state, summary) = open(&engine).unwrap();
        assert_eq!((severity, state), (Severity::Critical, DriftState::Firing));
        assert_eq!(
            summary,
            "cert-manager Certificate sandbox/example-com expired at 2025-08-02T13:50:04.000Z"
        );
        let drift = engine.open_drifts().next().unwrap();
        let hint = drift.evidence.hint.as_deref().unwrap();
        assert!(
            hint.starts_with("Renewal: Issuing=True (Renewing): Renewing certificate as renewal was scheduled at 2025-07-03 13:50:04 +0000 UTC. kubectl -n sandbox describe certificates.cert-manager.io example-com"),
            "{hint}"
        );
        assert!(
            hint.ends_with("cmctl renew -n sandbox example-com"),
            "{hint}"
        );
        // Past the last threshold: nothing more to wait for.
        assert_eq!(engine.judge_again_count(), 0);
    }

    #[test]
    fn the_windows_come_from_the_rules() {
        let not_after = parse_time("2025-08-02T13:50:04Z").unwrap();
        let rules = Rules::default().with_certificates(Certificates {
            warn_before: std::time::Duration::from_secs(30 * 86_400),
            critical_before: std::time::Duration::from_secs(7 * 86_400),
        });
        let cases = [
            (31, None),
            (29, Some(Severity::Warning)),
            (8, Some(Severity::Warning)),
            (6, Some(Severity::Critical)),
        ];
        for (days_left, expected) in cases {
            let mut engine = Engine::new(Arc::new(rules.clone()));
            apply(&mut engine, &issue_7895(), not_after - days_left * DAY);
            assert_eq!(
                open(&engine).map(|(severity, _, _)| severity),
                expected,
                "{days_left} days left"
            );
            // The next threshold is what the engine waits for.
            let next = match days_left {
                31 => not_after - 30 * DAY,
                29 | 8 => not_after - 7 * DAY,
                _ => not_after,
            };
            assert_eq!(engine.next_deadline(), Some(next), "{days_left} days left");
        }
    }

    #[test]
    fn a_manifest_with_no_status_is_quiet() {
        let mut engine = Engine::new(Arc::new(Rules::default()));
        let mut kcert = fixture(
            "knative-serving__config-core-300-knativecertificate__Certificate-routing-serving-certs.yaml",
        );
        kcert["metadata"]["uid"] = json!("0e5b5c1e-7a43-4a44-b3c5-1d6a8f1e2b3c");
        kcert["metadata"]["resourceVersion"] = json!("7");
        kcert["metadata"]["generation"] = json!(1);
        kcert["metadata"]["creationTimestamp"] = json!("2024-01-25T00:00:00Z");
        apply(&mut engine, &kcert, 0);
        assert_eq!(open(&engine), None);
        // Nothing to wait for (a generation with no observedGeneration is generation_lag's).
        assert_eq!(engine.judge_again_count(), 0);
    }
}
