//! `revision_pileup`: more non-active Revisions under one Configuration than `threshold`
//! (default 50). Knative's garbage collector keeps between `min-non-active-revisions` (20) and
//! `max-non-active-revisions` (1000) of them; a pile far above the minimum means GC is disabled,
//! misconfigured or failing, and every one of them still costs API objects and image pulls.
//!
//! "Active" follows `config-gc`'s own rule: the Configuration's `latestReadyRevisionName`, any
//! Revision annotated `serving.knative.dev/no-gc: "true"`, and any `routingState` other than
//! `reserve` are active. The drift is reported on the Configuration.

use super::*;
use crate::classify::evidence::hint::{namespace_flag, shell_quote};

/// The class.
pub(crate) struct RevisionPileup;

impl RevisionPileup {
    fn assess_configuration(
        &self,
        context: &Context<'_>,
        configuration: &ObjectState,
    ) -> Option<Assessment> {
        if configuration.is_going_away() {
            return None;
        }
        let latest_ready = configuration.status_field("latestReadyRevisionName");
        let latest_ready = latest_ready
            .as_ref()
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let non_active = context
            .graph
            .children(&configuration.key())
            .into_iter()
            .filter(|child| child.is_kind(SERVING, "Revision") && !child.is_going_away())
            .filter(|revision| {
                revision.name != latest_ready
                    && revision.annotation("serving.knative.dev/no-gc") != Some("true")
                    && revision.label("serving.knative.dev/routingState") == Some("reserve")
            })
            .count();
        let threshold = context.rules.class(self.id()).threshold;
        if (non_active as u64) <= threshold {
            return Some(Assessment::clear(
                configuration,
                format!("{non_active} non-active Revisions, at or below {threshold}"),
            ));
        }
        let mut found = evidence(format!(
            "{} has {non_active} non-active Revisions (threshold {threshold}): Revision garbage collection (knative-serving/config-gc) is disabled or not keeping up",
            configuration.reference()
        ));
        found
            .facts
            .insert("nonActiveRevisions".into(), non_active.to_string());
        found
            .facts
            .insert("threshold".into(), threshold.to_string());
        found.hint = Some(format!(
            "kubectl -n knative-serving get configmap config-gc -o yaml  # check retain-since-*/max-non-active-revisions; list them: kubectl{} get revisions.serving.knative.dev -l serving.knative.dev/configuration={},serving.knative.dev/routingState=reserve",
            namespace_flag(&configuration.namespace),
            shell_quote(&configuration.name)
        ));
        Some(Assessment::holds(configuration, found))
    }
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "revision_pileup",
    english: "Revision pile-up",
    chinese: "修订版堆积",
    severity: Severity::Warning,
};

impl DriftClass for RevisionPileup {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn applies_to_snapshot(&self) -> bool {
        true
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            grace: secs(600),
            grace_follows_default: false,
        }
    }

    fn reassessable(&self) -> bool {
        // The condition is read off the current state alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        if object.is_kind(SERVING, "Configuration") {
            return self
                .assess_configuration(context, object)
                .into_iter()
                .collect();
        }
        if object.is_kind(SERVING, "Revision") {
            let configuration = object
                .label("serving.knative.dev/configurationUID")
                .and_then(|uid| context.graph.by_uid(&object.cluster, uid))
                .or_else(|| {
                    let name = object.label("serving.knative.dev/configuration")?;
                    context.graph.by_name(
                        &object.cluster,
                        SERVING,
                        "Configuration",
                        &object.namespace,
                        name,
                    )
                });
            if let Some(configuration) = configuration {
                return self
                    .assess_configuration(context, configuration)
                    .into_iter()
                    .collect();
            }
        }
        Vec::new()
    }
}
