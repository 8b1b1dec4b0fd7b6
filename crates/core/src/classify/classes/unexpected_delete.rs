//! `unexpected_delete`: a Knative Service, Configuration or Route was deleted, or a
//! Knative-managed child (a Deployment, a PodAutoscaler, a Route or Configuration under a
//! Service, ...) was deleted while its owner still exists.
//!
//! Normal deletions are never reported: Pods come and go; Revisions in `routingState: reserve`
//! are garbage-collected; children go when their owner goes (the owner's own delete, arriving in
//! any order within the grace, clears them). The drift resolves when an object of the same kind,
//! namespace and name appears again.

use super::*;
use crate::classify::evidence::hint::{namespace_flag, resource_name, shell_quote};

/// The class.
pub(crate) struct UnexpectedDelete;

fn owner_alive(context: &Context<'_>, object: &ObjectState) -> Option<bool> {
    let owner = object.controller_owner()?;
    let state = context.graph.by_uid(&object.cluster, &owner.uid)?;
    Some(!state.is_going_away())
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "unexpected_delete",
    english: "Unexpected delete",
    chinese: "意外删除",
    severity: Severity::Critical,
};

impl DriftClass for UnexpectedDelete {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            grace: secs(60),
            grace_follows_default: false,
        }
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        let mut verdicts = Vec::new();
        if context.action != crate::decode::Action::Delete {
            // Something re-created under the same name ends an open drift for the deleted one.
            if context.before.is_none() {
                for drift in context.drifts.values() {
                    if drift.class == self.id()
                        && drift.cluster == object.cluster
                        && drift.kind == object.kind
                        && drift.namespace == object.namespace
                        && drift.name == object.name
                        && drift.uid != object.uid
                    {
                        if let Some(tombstone) = context.graph.by_uid(&drift.cluster, &drift.uid) {
                            verdicts.push(Assessment::clear(tombstone, "re-created"));
                        } else {
                            verdicts.push(Assessment {
                                subject: ObjectKey {
                                    cluster: drift.cluster.clone(),
                                    uid: drift.uid.clone(),
                                },
                                rule: None,
                                finding: Finding::Clear("re-created".into()),
                                judge_again: JudgeAgain::Untimed,
                            });
                        }
                    }
                }
            }
            return verdicts;
        }
        // Children deleted just before their owner were waiting in grace: the owner's delete
        // explains them.
        for child in context.graph.children(&object.key()) {
            if child.deleted && context.open_drift(child, self.id()).is_some() {
                verdicts.push(Assessment::clear(child, "owner deleted"));
            }
        }
        if object.kind == "Pod" && object.group().is_empty() {
            return verdicts;
        }
        let top_level = object.is_knative_serving()
            && matches!(object.kind.as_str(), "Service" | "Configuration" | "Route");
        let reason = if object.is_kind(SERVING, "Revision") {
            let reserve = object.label("serving.knative.dev/routingState") == Some("reserve");
            let pinned = object.annotation("serving.knative.dev/no-gc") == Some("true");
            match owner_alive(context, object) {
                Some(true) if !reserve || pinned => Some("a Revision that was still routable (or pinned with no-gc) was deleted while its Configuration exists"),
                _ => None,
            }
        } else if is_knative_child(object) {
            match owner_alive(context, object) {
                Some(true) => Some("a Knative-managed object was deleted while its owner exists; the controller will recreate it"),
                _ => None,
            }
        } else if top_level {
            Some("a Knative object was deleted")
        } else {
            None
        };
        let Some(reason) = reason else {
            return verdicts;
        };
        // Already re-created under the same name (a delete that arrives late, or one resync
        // infers after listing the new object): nothing is missing.
        let recreated = context
            .graph
            .live_by_name(
                &object.cluster,
                object.group(),
                &object.kind,
                &object.namespace,
                &object.name,
            )
            .is_some_and(|live| live.uid != object.uid);
        if recreated {
            return verdicts;
        }
        let mut found = evidence(format!("{} was deleted: {reason}", object.reference()));
        if let Some(owner) = object.controller_owner() {
            found
                .facts
                .insert("owner".into(), format!("{}/{}", owner.kind, owner.name));
        }
        if is_knative_child(object) {
            found.severity = Some(Severity::Warning);
        }
        found.hint = Some(format!(
            "kubectl{} get events --field-selector involvedObject.name={}  # re-apply it from Git if the deletion was a mistake ({})",
            namespace_flag(&object.namespace),
            shell_quote(&object.name),
            resource_name(&object.api_version, &object.kind)
        ));
        verdicts.push(Assessment::holds(object, found));
        verdicts
    }
}
