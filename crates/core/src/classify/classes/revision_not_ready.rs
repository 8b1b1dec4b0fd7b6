//! `revision_not_ready`: a Service's or Configuration's `status.latestCreatedRevisionName` differs
//! from `status.latestReadyRevisionName` past grace: the newest Revision never became ready, so
//! traffic that follows the latest Revision is stuck on an older one (or nowhere).

use super::*;
use crate::classify::evidence::hint::{namespace_flag, shell_quote};

/// The class.
pub(crate) struct RevisionNotReady;

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "revision_not_ready",
    english: "Latest revision not ready",
    chinese: "最新修订版未就绪",
    severity: Severity::Warning,
};

impl DriftClass for RevisionNotReady {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn applies_to_snapshot(&self) -> bool {
        true
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            grace: secs(300),
            grace_follows_default: true,
        }
    }

    fn reassessable(&self) -> bool {
        // The condition is read off the current state alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        let watched = object.is_knative_serving()
            && matches!(object.kind.as_str(), "Service" | "Configuration");
        if !watched || object.is_going_away() {
            return Vec::new();
        }
        // Two names of the status, read alone, not the whole status parsed for them.
        let text = |key: &str| {
            object
                .status_field(key)
                .as_ref()
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        };
        let Some(created) = text("latestCreatedRevisionName") else {
            return Vec::new();
        };
        let ready = text("latestReadyRevisionName");
        if ready.as_deref() == Some(created.as_str()) {
            return vec![Assessment::clear(
                object,
                "latest created Revision is ready",
            )];
        }
        let mut summary = format!(
            "{}: latest created Revision {created} is not ready; latest ready is {}",
            object.reference(),
            ready.as_deref().unwrap_or("none")
        );
        let mut found = evidence(String::new());
        if let Some(revision) = context.graph.live_by_name(
            &object.cluster,
            SERVING,
            "Revision",
            &object.namespace,
            &created,
        ) {
            if let Some(failing) = revision.conditions().into_iter().find(|condition| {
                condition.status != "True"
                    && condition.severity.is_empty()
                    && condition.condition_type != "Ready"
            }) {
                summary.push_str(&format!(
                    " ({}={} {}: {})",
                    failing.condition_type, failing.status, failing.reason, failing.message
                ));
                found.facts.insert("reason".into(), failing.reason);
                found.facts.insert("message".into(), failing.message);
            }
        }
        found.summary = summary;
        found
            .facts
            .insert("latestCreatedRevisionName".into(), created.clone());
        found.facts.insert(
            "latestReadyRevisionName".into(),
            ready.clone().unwrap_or_default(),
        );
        let service = if object.kind == "Service" {
            Some(object.name.clone())
        } else {
            object
                .label("serving.knative.dev/service")
                .map(str::to_string)
        };
        found.hint = Some(match (service, ready) {
            (Some(service), Some(ready)) => format!(
                "kubectl{} describe revisions.serving.knative.dev {}  # then pin traffic to the last good Revision: kn service update {} --namespace {} --traffic {}=100",
                namespace_flag(&object.namespace),
                shell_quote(&created),
                shell_quote(&service),
                shell_quote(&object.namespace),
                shell_quote(&ready)
            ),
            _ => format!(
                "kubectl{} describe revisions.serving.knative.dev {}",
                namespace_flag(&object.namespace),
                shell_quote(&created)
            ),
        });
        vec![Assessment::holds(object, found)]
    }
}
