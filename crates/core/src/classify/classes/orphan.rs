//! `orphan`: a Knative-managed Deployment or Pod whose Revision no longer exists, past grace
//! (default 10 minutes). Kubernetes' garbage collector removes such children within seconds; one
//! that stays lost its owner reference or its GC is stuck, and it keeps running (and costing)
//! an image nobody routes to. A Revision this process never saw is not assumed gone.

use super::*;
use crate::classify::evidence::hint::{namespace_flag, shell_quote};

/// The class.
pub(crate) struct Orphan;

impl Orphan {
    fn workload(&self, context: &Context<'_>, workload: &ObjectState) -> Option<Assessment> {
        if workload.is_going_away() {
            return None;
        }
        let revision = revision_of(context.graph, workload)?;
        if !revision.deleted {
            return Some(Assessment::clear(workload, "its Revision exists"));
        }
        let mut found = evidence(format!(
            "{} still exists but its Revision {} was deleted",
            workload.reference(),
            revision.name
        ));
        found.facts.insert("revision".into(), revision.name.clone());
        let resource = if workload.kind == "Pod" {
            "pod"
        } else {
            "deployment"
        };
        found.hint = Some(format!(
            "kubectl{} delete {resource} {}",
            namespace_flag(&workload.namespace),
            shell_quote(&workload.name)
        ));
        Some(Assessment::holds(workload, found))
    }
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "orphan",
    english: "Orphan",
    chinese: "孤儿资源",
    severity: Severity::Warning,
};

impl DriftClass for Orphan {
    fn info(&self) -> &'static ClassInfo {
        &INFO
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
        if is_revision_workload(object) {
            return self.workload(context, object).into_iter().collect();
        }
        if object.is_kind(SERVING, "Revision") {
            return context
                .graph
                .children(&object.key())
                .into_iter()
                .filter(|child| is_revision_workload(child))
                .filter_map(|child| self.workload(context, child))
                .collect();
        }
        Vec::new()
    }
}
