//! `remediation_fight`: drift-sentinel reverted an object's fields and another field manager set
//! them back, `remediation.fight.times` times within `fight.within`: remediation has stopped
//! acting on the object (a second writer, a GitOps tool or a controller, owns those fields, and
//! reverting again would only flap). Judged by the remediator's rails
//! (`remediate::Ledger::set_back`), which the engine hands in as [`Context::fight`]; the finding
//! holds while the object stays stopped, and clears when its drift resolves (someone settled
//! which writer owns the fields).

use super::*;
use crate::classify::evidence::hint::{namespace_flag, shell_quote};

/// The class.
pub(crate) struct RemediationFight;

/// The class's id.
pub const ID: &str = "remediation_fight";

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: ID,
    english: "Remediation fight",
    chinese: "修复冲突",
    severity: Severity::Critical,
};

/// `facts` key of the other field manager.
pub const MANAGER_FACT: &str = "manager";

impl DriftClass for RemediationFight {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            grace: secs(0),
            grace_follows_default: false,
        }
    }

    fn reassessable(&self) -> bool {
        // Read off the engine's fights alone (no `before` needed).
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        let Some(manager) = context.fight else {
            // Only an object that was in a fight has anything to clear.
            return match context.open_drift(object, INFO.id) {
                Some(_) => vec![Assessment::clear(object, "remediation may act again")],
                None => Vec::new(),
            };
        };
        let mut found = evidence(format!(
            "{} keeps setting back the fields drift-sentinel reverted on {}: remediation stopped acting on it",
            manager,
            object.reference()
        ));
        found.facts.insert(MANAGER_FACT.into(), manager.to_string());
        found.hint = Some(format!(
            "kubectl{} get {} {} --show-managed-fields -o yaml  # find what runs as {}, and decide which writer owns these fields (remove the remediation rule for it, or stop the other writer)",
            namespace_flag(&object.namespace),
            object.kind.to_lowercase(),
            shell_quote(&object.name),
            shell_quote(manager),
        ));
        vec![Assessment::holds(object, found)]
    }
}
