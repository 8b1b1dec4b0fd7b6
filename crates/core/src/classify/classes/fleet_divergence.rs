//! `fleet_divergence`: the members of a fleet group (`fleet.groups`) do not hold the same
//! desired state for an object the group compares: a ConfigMap key, a spec field, a behavioural
//! label or annotation, the Knative release (`app.kubernetes.io/version`) differs, or the object
//! is missing from some members. The judging is `classify::fleet`'s (its evaluator, beside the
//! engine), and its comparison is shared with `compare`: this class delegates to it.
//!
//! The drift is about the group, not one cluster's copy: its cluster field is `fleet:<group>`,
//! its uid the object's fleet key (`Kind.group/namespace/name`), its rule the group's name, so a
//! group and object have one drift whichever member changed. The object's names are in the
//! evidence facts (`apiVersion`, `kind`, `namespace`, `name`), from which `fleet::settle` fills
//! the drift's object fields. The members are the clusters the engine tracks objects for whose
//! name matches the group's globs: a cluster is a member from its first event on.
//!
//! It is assessed when a member's copy changes what is compared (spec, data, labels,
//! annotations), appears or is deleted. A member that never reported an object is unknown, not
//! missing (the engine hears of objects through their changes): an object is missing from a
//! member only when the member reported it deleted (it holds the tombstone), or when an open
//! drift already names the member missing (fact `missing`) and it has not reported the object
//! since, so that a real deletion keeps firing after the tombstone expires. Open drifts are
//! also judged again when members change without an event (a reload, tombstone expiry): see
//! `Engine::rejudge_fleet` and `fleet::rejudge`. Status churn of a compared object, and every
//! event of an object no group compares, costs a few comparisons.

use super::*;
use crate::classify::fleet::{self, FleetGroup};

/// The class id (defined by the fleet module, with the rest of a fleet drift's identity).
pub const ID: &str = fleet::CLASS;

/// The class.
pub(crate) struct FleetDivergence;

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: ID,
    english: "Fleet divergence",
    chinese: "集群间配置不一致",
    severity: Severity::Warning,
};

impl DriftClass for FleetDivergence {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn defaults(&self) -> ClassDefaults {
        // Severity and grace are each group's own (`fleet.groups[].severity`, `.grace`).
        ClassDefaults {
            enabled: true,
            grace: secs(300),
            grace_follows_default: false,
        }
    }

    fn about_a_group(&self) -> bool {
        true
    }

    fn reassessable(&self) -> bool {
        // The members' current copies are all it reads.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        fleet::judge_change(
            context.graph,
            context.rules,
            context.drifts,
            context.before,
            context.after,
        )
        .into_iter()
        .map(Assessment::from)
        .collect()
    }
}

impl From<fleet::Verdict> for Assessment {
    /// A fleet group's verdict as the class's assessment: its rule is the group.
    fn from(verdict: fleet::Verdict) -> Assessment {
        Assessment {
            subject: verdict.subject,
            rule: Some(verdict.group),
            finding: match verdict.finding {
                fleet::Finding::Holds(evidence) => Finding::Holds(evidence),
                fleet::Finding::Clear(reason) => Finding::Clear(reason.into()),
            },
            judge_again: JudgeAgain::Untimed,
        }
    }
}

/// The rules as the fleet module reads them (it cannot import them: they hold its groups).
impl fleet::FleetRules for Rules {
    fn groups(&self) -> &[FleetGroup] {
        self.fleet_groups()
    }

    fn group(&self, name: &str) -> Option<&FleetGroup> {
        self.fleet_group(name)
    }

    fn is_compared_key(&self, key: &str) -> bool {
        self.is_fleet_compared_key(key)
    }

    fn is_bookkeeping_key(&self, key: &str) -> bool {
        Rules::is_bookkeeping_key(self, key)
    }
}
