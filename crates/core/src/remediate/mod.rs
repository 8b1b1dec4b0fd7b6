//! Remediation planning: which firing drift a rule lets drift-sentinel repair, the one exact
//! Kubernetes request that repairs it ([`plan`]), and the rails that stop it ([`ledger`]).
//!
//! Pure like the rest of the core: it takes the drift, the object as the drift was judged on and
//! the time, and returns a [`Decision`]; it never sends anything. The service sends an `apply`
//! decision through its one Kubernetes client, records every decision in the drift's history and
//! lets the next event of the object resolve the drift (never the attempt itself). `check` and
//! `replay` never get here.
//!
//! Rails, in the order they are checked: the mode (`off` plans nothing), a Secret (never), the
//! opt-out annotation [`OPT_OUT`] on the object or its namespace, the drift's state (firing only:
//! a pending drift may still clear by itself), the one cluster the client reaches, fight
//! detection (the same fields set back by the same manager after a revert, [`Fight::times`]
//! times within [`Fight::within`]: nothing more for that object), the rule's per-object
//! cooldown and the global budget. Budget and cooldown are checked for every rule, `manual` ones
//! too (a person approving is still an action); only `auto` plans are counted by `decide`, the
//! service counts a `manual` one when it is approved ([`Ledger::record`]).

pub mod ledger;
pub mod plan;
mod remediator;

use std::collections::BTreeMap;
use std::time::Duration;

use drift_model::glob::glob_match;
use drift_model::{Drift, DriftState};

use crate::classify::ObjectState;

pub use ledger::Ledger;
pub use plan::{NoPlan, Request};
pub use remediator::{
    attempt, live_namesake, subject, Approved, Decided, FightChange, Remediator, Replan,
};

/// The annotation that keeps remediation off an object, or off every object of a namespace.
pub const OPT_OUT: &str = "drift-sentinel.dev/remediation";

/// The field manager every write is sent as (`?fieldManager=`), so `managedFields` and the
/// next drift's actor name drift-sentinel.
pub const FIELD_MANAGER: &str = crate::classify::rules::REMEDIATION_MANAGER;

/// What remediation does at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Nothing is planned.
    #[default]
    Off,
    /// Plans are recorded with their exact request; nothing is sent.
    DryRun,
    /// Plans are sent.
    Apply,
}

impl Mode {
    /// The config's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::DryRun => "dryRun",
            Mode::Apply => "apply",
        }
    }
}

/// Who lets a planned action go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// The service, as soon as the drift fires.
    Auto,
    /// A person, through the API or the dashboard.
    Manual,
}

/// The repairs there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// Put the drifted fields back to their values before the edit (or the baseline's).
    Revert,
    /// Pin a Service's traffic to its last Ready Revision.
    Rollback,
    /// Re-create a deleted object from its last seen state.
    Restore,
    /// Delete an orphaned object.
    DeleteOrphan,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 4] = [
        Action::Revert,
        Action::Rollback,
        Action::Restore,
        Action::DeleteOrphan,
    ];

    /// The config's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Revert => "revert",
            Action::Rollback => "rollback",
            Action::Restore => "restore",
            Action::DeleteOrphan => "deleteOrphan",
        }
    }

    /// The action of a config word.
    pub fn parse(word: &str) -> Option<Action> {
        Action::ALL
            .into_iter()
            .find(|action| action.as_str() == word)
    }

    /// The classes this action repairs. Every other class has no action: Knative's controllers
    /// repair it (`generation_lag`, `revision_pileup`, ...), or only a person can decide what is
    /// right (`image_drift`, `traffic_drift`: which image, which split).
    pub fn classes(self) -> &'static [&'static str] {
        match self {
            // `invariant`: only a rule that names its `revertFields` (else nothing is planned).
            Action::Revert => &["manual_edit", "config_drift", "baseline_drift", "invariant"],
            Action::Rollback => &["revision_not_ready", "not_ready"],
            Action::Restore => &["unexpected_delete"],
            Action::DeleteOrphan => &["orphan"],
        }
    }

    /// The action that repairs `class`, if any.
    pub fn for_class(class: &str) -> Option<Action> {
        Action::ALL
            .into_iter()
            .find(|action| action.classes().contains(&class))
    }
}

/// `remediation.budget`: at most `actions` in any window of `per`, across every rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Actions per window.
    pub actions: u32,
    /// The window.
    pub per: Duration,
}

/// `remediation.fight`: the same fields set back this often after a revert is a fight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fight {
    /// How often.
    pub times: u32,
    /// Within this window.
    pub within: Duration,
}

/// Which drifts a rule takes: every given matcher must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleMatch {
    /// Class ids (never empty).
    pub classes: Vec<String>,
    /// Kinds: `Service`, or `Service.serving.knative.dev` for one group.
    pub kinds: Vec<String>,
    /// Namespace globs.
    pub namespaces: Vec<String>,
    /// Labels the object carries with these values.
    pub labels: BTreeMap<String, String>,
    /// Cluster globs.
    pub clusters: Vec<String>,
}

impl RuleMatch {
    fn matches(&self, drift: &Drift) -> bool {
        let group = drift
            .api_version
            .split_once('/')
            .map(|(group, _)| group)
            .unwrap_or("");
        self.classes.contains(&drift.class)
            && (self.kinds.is_empty()
                || self.kinds.iter().any(|kind| match kind.split_once('.') {
                    Some((name, wanted)) => name == drift.kind && wanted == group,
                    None => *kind == drift.kind,
                }))
            && (self.namespaces.is_empty()
                || self
                    .namespaces
                    .iter()
                    .any(|glob| glob_match(glob, &drift.namespace)))
            && (self.clusters.is_empty()
                || self
                    .clusters
                    .iter()
                    .any(|glob| glob_match(glob, &drift.cluster)))
            && self
                .labels
                .iter()
                .all(|(key, value)| drift.labels.get(key) == Some(value))
    }
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Its unique name.
    pub name: String,
    /// Which drifts.
    pub matcher: RuleMatch,
    /// What it does.
    pub action: Action,
    /// Who lets it go.
    pub approval: Approval,
    /// Least time between two actions on one object.
    pub cooldown: Duration,
}

/// The compiled `remediation:` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Off, dry run or apply.
    pub mode: Mode,
    /// The global budget.
    pub budget: Budget,
    /// Fight detection.
    pub fight: Fight,
    /// The one cluster the Kubernetes client reaches (resync's), if any.
    pub cluster: Option<String>,
    /// In order: the first that matches decides.
    pub rules: Vec<Rule>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            mode: Mode::Off,
            budget: Budget {
                actions: 20,
                per: Duration::from_secs(3600),
            },
            fight: Fight {
                times: 3,
                within: Duration::from_secs(3600),
            },
            cluster: None,
            rules: Vec::new(),
        }
    }
}

/// Why a matched drift gets no request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The object is a Secret.
    #[error("Secrets are never remediated")]
    Secret,
    /// The object or its namespace carries the opt-out annotation.
    #[error("{0} is annotated {OPT_OUT}: \"off\"")]
    OptedOut(String),
    /// The drift is not firing.
    #[error("the drift is {0}, not firing: only firing drifts are acted on")]
    NotFiring(&'static str),
    /// The object is in a cluster the client does not reach.
    #[error("cluster {0:?} is not the one the Kubernetes client reaches (resync's)")]
    Unreachable(String),
    /// The rule's cooldown for this object has not passed.
    #[error("the rule's cooldown for this object runs until {0}")]
    Cooldown(String),
    /// The global budget is spent.
    #[error("the budget of {actions} actions per {per} is spent")]
    Budget {
        /// Actions per window.
        actions: u32,
        /// The window, as text.
        per: String,
    },
    /// The object is in a fight: nothing more is sent for it.
    #[error("{manager} set the same fields back {times} times after a revert: a fight, stopped")]
    Fight {
        /// The other field manager.
        manager: String,
        /// How often.
        times: u32,
    },
    /// No exact request can be made.
    #[error("{0}")]
    NoPlan(#[from] NoPlan),
}

impl Refusal {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::Secret => "secret",
            Refusal::OptedOut(_) => "opted_out",
            Refusal::NotFiring(_) => "not_firing",
            Refusal::Unreachable(_) => "unreachable",
            Refusal::Cooldown(_) => "cooldown",
            Refusal::Budget { .. } => "budget",
            Refusal::Fight { .. } => "fight",
            Refusal::NoPlan(plan) => plan.kind(),
        }
    }
}

/// What the policy makes of one drift.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No rule takes the drift (or the mode is `off`): nothing to record.
    NoRule,
    /// A rule takes it and the request is ready: sent (`apply`, `auto`), recorded only
    /// (`dryRun`), or waiting for a person (`manual`).
    Planned {
        /// The rule's name.
        rule: String,
        /// Its action.
        action: Action,
        /// Its approval.
        approval: Approval,
        /// The exact request.
        request: Request,
    },
    /// A rule takes it and a rail stops it.
    Refused {
        /// The rule's name.
        rule: String,
        /// Its action.
        action: Action,
        /// Why.
        refusal: Refusal,
    },
}

/// What the planner reads besides the drift: the object the drift was judged on, and facts the
/// engine's graph holds.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The object as the drift was judged on (for `restore`, its tombstone).
    pub object: &'a ObjectState,
    /// True when the object's namespace carries the opt-out annotation.
    pub namespace_opted_out: bool,
    /// For `rollback`: the Service's last Ready Revision, if one is known.
    pub last_ready_revision: Option<&'a str>,
    /// For `rollback` of a `not_ready` Service: true when its latest Revision failed (a Service
    /// not ready for another reason, an ingress or a certificate, is not rolled back).
    pub latest_revision_failed: bool,
}

/// What the ledger knows an object by: its cluster and this text (kind, namespace and name,
/// which a re-created object keeps, unlike its uid).
pub fn object_name(drift: &Drift) -> String {
    format!(
        "{}/{}/{}/{}",
        drift.api_version, drift.kind, drift.namespace, drift.name
    )
}

impl Policy {
    /// How long the rails look back: the longest of the budget's window, the fight window and
    /// every rule's cooldown (what [`Ledger::prune`] may forget).
    pub fn memory(&self) -> Duration {
        self.rules
            .iter()
            .map(|rule| rule.cooldown)
            .chain([self.budget.per, self.fight.within])
            .max()
            .unwrap_or(self.budget.per)
    }

    /// The first rule that takes `drift`, if remediation is on.
    pub fn rule_for(&self, drift: &Drift) -> Option<&Rule> {
        if self.mode == Mode::Off {
            return None;
        }
        self.rules.iter().find(|rule| rule.matcher.matches(drift))
    }

    /// Decides what to do with `drift` at `now`; a [`Decision::Planned`] of an `auto` rule is
    /// counted in `ledger` (the caller sends or records it), so the next decision sees it.
    pub fn decide(
        &self,
        drift: &Drift,
        subject: Subject<'_>,
        ledger: &mut Ledger,
        now: drift_model::Millis,
    ) -> Decision {
        let Some(rule) = self.rule_for(drift) else {
            return Decision::NoRule;
        };
        let refused = |refusal: Refusal| Decision::Refused {
            rule: rule.name.clone(),
            action: rule.action,
            refusal,
        };
        if let Err(refusal) = self.rails(rule, drift, subject, ledger, now) {
            return refused(refusal);
        }
        if rule.action == Action::Rollback
            && drift.class == "not_ready"
            && !subject.latest_revision_failed
        {
            return refused(Refusal::NoPlan(NoPlan::LatestNotFailed));
        }
        let request = match plan::request(rule.action, drift, subject) {
            Ok(request) => request,
            Err(no_plan) => return refused(Refusal::NoPlan(no_plan)),
        };
        if rule.approval == Approval::Auto {
            // The fields count for fight detection once the revert is applied
            // (`Remediator::applied`), not when it is planned.
            ledger.record(&drift.cluster, &object_name(drift), &[], now);
        }
        Decision::Planned {
            rule: rule.name.clone(),
            action: rule.action,
            approval: rule.approval,
            request,
        }
    }

    /// The rails that can change between a decision and its send, checked again before an
    /// `apply` attempt is sent: Secret, opt-out, the reachable cluster and a fight (not the
    /// cooldown or the budget, which the attempt itself was counted in, nor the drift's state,
    /// which the caller checks).
    pub fn still_allowed(
        &self,
        drift: &Drift,
        subject: Subject<'_>,
        ledger: &Ledger,
    ) -> Result<(), Refusal> {
        let object = subject.object;
        if drift.kind == "Secret" && !drift.api_version.contains('/') {
            return Err(Refusal::Secret);
        }
        if object.annotations.get(OPT_OUT) == Some("off") {
            return Err(Refusal::OptedOut(format!("{} {}", drift.kind, drift.name)));
        }
        if subject.namespace_opted_out {
            return Err(Refusal::OptedOut(format!("namespace {}", drift.namespace)));
        }
        if self.cluster.as_deref() != Some(drift.cluster.as_str()) {
            return Err(Refusal::Unreachable(drift.cluster.clone()));
        }
        if let Some(manager) = ledger.fighting(&drift.cluster, &object_name(drift)) {
            return Err(Refusal::Fight {
                manager: manager.to_string(),
                times: self.fight.times,
            });
        }
        Ok(())
    }

    /// The rails, in order (module docs).
    fn rails(
        &self,
        rule: &Rule,
        drift: &Drift,
        subject: Subject<'_>,
        ledger: &Ledger,
        now: drift_model::Millis,
    ) -> Result<(), Refusal> {
        let object = subject.object;
        if drift.kind == "Secret" && !drift.api_version.contains('/') {
            return Err(Refusal::Secret);
        }
        if object.annotations.get(OPT_OUT) == Some("off") {
            return Err(Refusal::OptedOut(format!("{} {}", drift.kind, drift.name)));
        }
        if subject.namespace_opted_out {
            return Err(Refusal::OptedOut(format!("namespace {}", drift.namespace)));
        }
        if drift.state != DriftState::Firing {
            return Err(Refusal::NotFiring(drift.state.as_str()));
        }
        if self.cluster.as_deref() != Some(drift.cluster.as_str()) {
            return Err(Refusal::Unreachable(drift.cluster.clone()));
        }
        let name = object_name(drift);
        if let Some(manager) = ledger.fighting(&drift.cluster, &name) {
            return Err(Refusal::Fight {
                manager: manager.to_string(),
                times: self.fight.times,
            });
        }
        if let Some(until) = ledger.cooldown_until(&drift.cluster, &name, rule.cooldown) {
            if now < until {
                return Err(Refusal::Cooldown(drift_model::time::format_time(until)));
            }
        }
        if !ledger.within_budget(self.budget, now) {
            return Err(Refusal::Budget {
                actions: self.budget.actions,
                per: duration_text(self.budget.per),
            });
        }
        Ok(())
    }
}

/// The fields an action on `drift` puts back (a revert's drifted paths; none for the others),
/// which the ledger compares later set-backs with.
pub(crate) fn reverted(action: Action, drift: &Drift) -> Vec<String> {
    match action {
        Action::Revert => revertible(drift)
            .unwrap_or_default()
            .into_iter()
            .map(|change| change.path)
            .collect(),
        _ => Vec::new(),
    }
}

/// The changes a revert of `drift` puts back: all of them, but for an `invariant` drift only
/// those at or under its rule's `revertFields` (`None` when the rule names none).
pub(crate) fn revertible(drift: &Drift) -> Option<Vec<drift_model::FieldChange>> {
    if drift.class != crate::classify::classes::INVARIANT {
        return Some(drift.evidence.changes.clone());
    }
    let fields: Vec<String> = drift
        .evidence
        .facts
        .get(crate::classify::classes::REVERT_FIELDS_FACT)
        .and_then(|text| serde_json::from_str(text).ok())?;
    Some(
        drift
            .evidence
            .changes
            .iter()
            .filter(|change| {
                fields.iter().any(|field| {
                    change.path == *field
                        || change
                            .path
                            .strip_prefix(field.as_str())
                            .is_some_and(|rest| rest.starts_with('/'))
                })
            })
            .cloned()
            .collect(),
    )
}

/// A window as the config writes it (`1h`, `10m`, `90s`).
fn duration_text(duration: Duration) -> String {
    let seconds = duration.as_secs();
    if seconds > 0 && seconds.is_multiple_of(3600) {
        format!("{}h", seconds / 3600)
    } else if seconds > 0 && seconds.is_multiple_of(60) {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}

#[cfg(test)]
mod tests;
