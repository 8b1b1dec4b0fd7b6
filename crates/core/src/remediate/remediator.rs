//! The remediator: the planner's state across rounds (the policy in force and the [`Ledger`])
//! and what it makes of a round's transitions. Each drift that moved to firing and that a rule
//! with `approval: auto` takes gets one [`Attempt`]: the exact request with the outcome `dryRun`
//! (mode `dryRun`) or `planned` (mode `apply`, for the service's sender), or the refusal of a
//! rail or of the planner. The service writes the attempts with the round that fired the drifts
//! (one transaction), and puts the ledger back when that commit fails ([`Remediator::checkpoint`]).
//!
//! Decided once, when a drift fires: a firing drift whose evidence grows (a second edit in the
//! same episode) is not decided again; its next episode is, after the cooldown. A `manual` rule
//! records nothing at firing: the drift's page offers the action, and the approval is decided
//! then (the rails apply at that moment).

use std::sync::Arc;

use drift_model::remediation::{Attempt, Outcome, PlannedRequest};
use drift_model::{Drift, DriftState, Millis, ObjectKey, Transition};

use super::{Action, Approval, Decision, Ledger, Mode, Policy, Subject, OPT_OUT};
use crate::classify::{Graph, ObjectState};

/// The policy in force and what the rails remember.
#[derive(Debug, Clone)]
pub struct Remediator {
    policy: Arc<Policy>,
    ledger: Ledger,
}

impl Remediator {
    /// A remediator with an empty ledger.
    pub fn new(policy: Arc<Policy>) -> Remediator {
        Remediator {
            policy,
            ledger: Ledger::default(),
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// What the rails remember, to put back with [`Remediator::restore`] when the round that
    /// decided since then is not committed (its attempts never happened).
    pub fn checkpoint(&self) -> Option<Ledger> {
        (self.policy.mode != Mode::Off).then(|| self.ledger.clone())
    }

    /// Puts back a [`Remediator::checkpoint`].
    pub fn restore(&mut self, checkpoint: Option<Ledger>) {
        if let Some(ledger) = checkpoint {
            self.ledger = ledger;
        }
    }

    /// Notes that `attempt` was applied at `now`: a revert's fields count for fight detection
    /// from now (a planned, dry-run or failed revert put nothing back, so an edit after it is
    /// no set-back). Read off the attempt, so its drift may have resolved already.
    pub fn applied(&mut self, attempt: &Attempt, now: Millis) {
        self.ledger
            .reverted(&attempt.cluster, &attempt.object, &attempt.fields, now);
    }

    /// Re-plans a claimed `apply` attempt of `action` on `drift` against the object as it is
    /// now, just before it is sent: a newer change of the object besides its status (its
    /// [`content_digest`] is not `judged`) ends it, the rails that can change are checked again
    /// ([`Policy::still_allowed`]), and a request whose body differs from `planned` (other than
    /// in the `resourceVersion` precondition) means what it touches changed since the
    /// judgement. Returns the request to send (with the current `resourceVersion`: a status
    /// write in between does not end the attempt), or why it must not be sent.
    pub fn replan(
        &self,
        drift: &Drift,
        action: Action,
        planned: &serde_json::Value,
        judged: Option<&str>,
        graph: &Graph,
    ) -> Result<super::Request, Replan> {
        let subject = subject(graph, drift).ok_or(Replan::Gone)?;
        if judged.is_some_and(|judged| judged != content_digest(subject.object)) {
            return Err(Replan::Changed(format!(
                "a newer change of the object (resourceVersion {}) was seen before the request \
                 was sent",
                subject.object.resource_version
            )));
        }
        self.policy
            .still_allowed(drift, subject, &self.ledger)
            .map_err(Replan::Refused)?;
        let request =
            super::plan::request(action, drift, subject).map_err(|no_plan| match no_plan {
                super::NoPlan::Stale(_) => Replan::Changed(no_plan.to_string()),
                other => Replan::Refused(super::Refusal::NoPlan(other)),
            })?;
        let without_version = |body: &serde_json::Value| {
            let mut body = body.clone();
            if let Some(metadata) = body
                .get_mut("metadata")
                .and_then(serde_json::Value::as_object_mut)
            {
                metadata.remove("resourceVersion");
            }
            body
        };
        if without_version(&request.body) != without_version(planned) {
            return Err(Replan::Changed(
                "the object changed where the request writes since the judgement".to_string(),
            ));
        }
        Ok(request)
    }

    /// Stops the objects the engine restored as fighting (their `remediation_fight` drifts
    /// outlive a restart; the rest of the ledger does not).
    pub fn restore_fights<'a>(
        &mut self,
        fights: impl IntoIterator<Item = (&'a ObjectKey, &'a String)>,
        graph: &Graph,
    ) {
        for (key, manager) in fights {
            if let Some(object) = graph.get(key) {
                self.ledger.stop(&key.cluster, &name_of(object), manager);
            }
        }
    }

    /// What a round's transitions make (see the module docs): the attempts, in their order, and
    /// the fights that started or ended, for the engine's `remediation_fight`.
    pub fn on_transitions(
        &mut self,
        transitions: &[Transition],
        graph: &Graph,
        now: Millis,
    ) -> Decided {
        let mut decided = Decided::default();
        if self.policy.mode == Mode::Off {
            return decided;
        }
        // Forget what no rail looks at any more, so the ledger stays small.
        self.ledger.prune(self.policy.memory(), now);
        for transition in transitions {
            let drift = &transition.drift;
            if let Some(change) = self.fight_change(transition, now) {
                decided.fights.push(change);
            }
            let fired =
                drift.state == DriftState::Firing && transition.from != Some(DriftState::Firing);
            if !fired {
                continue;
            }
            let Some(rule) = self.policy.rule_for(drift) else {
                continue;
            };
            if rule.approval != Approval::Auto {
                continue;
            }
            let Some(subject) = subject(graph, drift) else {
                // The engine fires drifts of tracked objects only; a fleet drift has no object.
                continue;
            };
            let decision = self.policy.decide(drift, subject, &mut self.ledger, now);
            if let Some(attempt) = attempt(self.policy.mode, drift, subject.object, decision, now) {
                decided.attempts.push(attempt);
            }
        }
        decided
    }

    /// A fight that `transition` starts or ends: an edit of fields a revert put back, by
    /// another manager, fired again (counted by [`Ledger::set_back`]); or the drift of an
    /// object stopped for a fight resolved (someone settled which writer owns the fields).
    fn fight_change(&mut self, transition: &Transition, now: Millis) -> Option<FightChange> {
        let drift = &transition.drift;
        if !Action::Revert.classes().contains(&drift.class.as_str()) {
            return None;
        }
        let name = super::object_name(drift);
        let key = ObjectKey {
            cluster: drift.cluster.clone(),
            uid: drift.uid.clone(),
        };
        match drift.state {
            DriftState::Resolved if transition.from == Some(DriftState::Firing) => {
                self.ledger.fighting(&drift.cluster, &name)?;
                self.ledger.release(&drift.cluster, &name);
                Some(FightChange { key, manager: None })
            }
            DriftState::Firing if transition.from != Some(DriftState::Firing) => {
                let actor = drift.evidence.actor.as_ref()?;
                if actor.manager == super::FIELD_MANAGER {
                    return None;
                }
                let fields: Vec<String> = drift
                    .evidence
                    .changes
                    .iter()
                    .map(|change| change.path.clone())
                    .collect();
                let started = self.ledger.set_back(
                    &drift.cluster,
                    &name,
                    &actor.manager,
                    &fields,
                    self.policy.fight,
                    now,
                )?;
                Some(FightChange {
                    key,
                    manager: Some(started.manager),
                })
            }
            _ => None,
        }
    }
}

/// Why a claimed attempt is not sent ([`Remediator::replan`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Replan {
    /// The object is no longer tracked.
    Gone,
    /// What the request writes changed since the judgement: the attempt ends as a conflict.
    Changed(String),
    /// A rail or the planner refuses it now.
    Refused(super::Refusal),
}

/// What the remediator made of a round's transitions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decided {
    /// One attempt per drift an `auto` rule took.
    pub attempts: Vec<Attempt>,
    /// Fights that started (`manager` set) or ended, for [`crate::classify::Engine::set_fight`].
    pub fights: Vec<FightChange>,
}

/// A fight that started or ended on an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FightChange {
    /// The object.
    pub key: ObjectKey,
    /// The other field manager; `None` when the fight ended.
    pub manager: Option<String>,
}

/// A digest of an object's content besides its status and versions: its spec, labels,
/// annotations, data and whether it is deleted (SHA-256, hex; stable across processes).
pub(crate) fn content_digest(object: &ObjectState) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut part = |text: &str| {
        hasher.update((text.len() as u64).to_be_bytes());
        hasher.update(text.as_bytes());
    };
    part(if object.deleted { "deleted" } else { "live" });
    part(&object.spec.text());
    for (key, value) in object.labels.iter() {
        part(key);
        part(value);
    }
    part("--");
    for (key, value) in object.annotations.iter() {
        part(key);
        part(value);
    }
    part("--");
    for (key, value) in object.data.iter().flat_map(|data| data.iter()) {
        part(key);
        part(value);
    }
    let digest = hasher.finalize();
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// What the ledger knows an object by (as [`super::object_name`] for its drifts).
fn name_of(object: &ObjectState) -> String {
    format!(
        "{}/{}/{}/{}",
        object.api_version, object.kind, object.namespace, object.name
    )
}

/// What a person's approval of a `manual` rule's action makes.
#[derive(Debug, Clone, PartialEq)]
pub enum Approved {
    /// No rule offers that action for this drift now; why, in words.
    NotAllowed(String),
    /// The attempt: `dryRun` or `planned` when the rails let it through (counted by them from
    /// now), `refused` otherwise.
    Attempt(Box<Attempt>),
}

impl Remediator {
    /// Decides an approval of `action` on `drift` (firing, as the caller checked) by
    /// `approved_by`: only a `manual` rule that takes the drift and offers that action allows
    /// it, and the rails decide at this moment, as they would for an `auto` rule.
    pub fn approve(
        &mut self,
        drift: &Drift,
        action: Action,
        approved_by: &str,
        graph: &Graph,
        now: Millis,
    ) -> Approved {
        if self.policy.mode == Mode::Off {
            return Approved::NotAllowed("remediation is off (remediation.mode)".to_string());
        }
        let Some(rule) = self.policy.rule_for(drift) else {
            return Approved::NotAllowed(format!(
                "no remediation rule takes this {} drift",
                drift.class
            ));
        };
        if rule.action != action {
            return Approved::NotAllowed(format!(
                "rule {} offers {} for this drift, not {}",
                rule.name,
                rule.action.as_str(),
                action.as_str()
            ));
        }
        if rule.approval == Approval::Auto {
            return Approved::NotAllowed(format!(
                "rule {} is automatic: it decided when the drift fired",
                rule.name
            ));
        }
        let Some(subject) = subject(graph, drift) else {
            return Approved::NotAllowed("the drift's object is not tracked".to_string());
        };
        let decision = self.policy.decide(drift, subject, &mut self.ledger, now);
        if matches!(decision, Decision::Planned { .. }) {
            // `decide` counts only `auto` plans: an approved one counts from now.
            self.ledger
                .record(&drift.cluster, &super::object_name(drift), &[], now);
        }
        match attempt(self.policy.mode, drift, subject.object, decision, now) {
            Some(attempt) => Approved::Attempt(Box::new(Attempt {
                approved_by: Some(approved_by.to_string()),
                ..attempt
            })),
            None => Approved::NotAllowed(format!(
                "no remediation rule takes this {} drift",
                drift.class
            )),
        }
    }
}

/// The attempt a decision makes (`None` for [`Decision::NoRule`]).
pub fn attempt(
    mode: Mode,
    drift: &Drift,
    object: &ObjectState,
    decision: Decision,
    now: Millis,
) -> Option<Attempt> {
    let blank = |rule: String, action: super::Action, outcome: Outcome| Attempt {
        drift_id: drift.id.clone(),
        cluster: drift.cluster.clone(),
        object: super::object_name(drift),
        fields: super::reverted(action, drift),
        at: now,
        mode: mode.as_str().to_string(),
        action: action.as_str().to_string(),
        rule,
        approved_by: None,
        request: None,
        resource_version: Some(object.resource_version.clone()),
        judged: Some(content_digest(object)),
        outcome,
        status: None,
        resource_version_after: None,
        reason: None,
        detail: None,
    };
    match decision {
        Decision::NoRule => None,
        Decision::Refused {
            rule,
            action,
            refusal,
        } => Some(Attempt {
            reason: Some(refusal.kind().to_string()),
            detail: Some(refusal.to_string()),
            ..blank(rule, action, Outcome::Refused)
        }),
        Decision::Planned {
            rule,
            action,
            request,
            ..
        } => {
            let outcome = match mode {
                Mode::Apply => Outcome::Planned,
                _ => Outcome::DryRun,
            };
            Some(Attempt {
                resource_version: request
                    .resource_version
                    .clone()
                    .or_else(|| Some(object.resource_version.clone())),
                request: Some(PlannedRequest {
                    method: request.method.to_string(),
                    path: request.path.clone(),
                    content_type: request.content_type.to_string(),
                    body: request.body.to_string(),
                }),
                ..blank(rule, action, outcome)
            })
        }
    }
}

/// What the planner needs of the graph about `drift`'s object, or `None` when the object is not
/// tracked.
pub fn subject<'a>(graph: &'a Graph, drift: &Drift) -> Option<Subject<'a>> {
    let object = graph.by_uid(&drift.cluster, &drift.uid)?;
    let namespace_opted_out = !drift.namespace.is_empty()
        && graph
            .by_name(&drift.cluster, "", "Namespace", "", &drift.namespace)
            .is_some_and(|namespace| namespace.annotations.get(OPT_OUT) == Some("off"));
    let (last_ready_revision, latest_revision_failed) = revisions(graph, object);
    Some(Subject {
        object,
        namespace_opted_out,
        last_ready_revision,
        latest_revision_failed,
    })
}

/// True when a live object has `object`'s name (a deleted object that exists again: nothing to
/// restore).
pub fn live_namesake(graph: &Graph, object: &ObjectState) -> bool {
    graph
        .live_by_name(
            &object.cluster,
            object.group(),
            &object.kind,
            &object.namespace,
            &object.name,
        )
        .is_some()
}

/// A Knative Service's (or Configuration's) last Ready Revision, and whether its latest
/// Revision failed: the latest created one is not the latest Ready one and its `Ready`
/// condition is `False` (read off the Revision when it is tracked, else off the owner's
/// `ConfigurationsReady`/`Ready` condition, which Knative sets from it).
fn revisions<'a>(graph: &'a Graph, object: &'a ObjectState) -> (Option<&'a str>, bool) {
    let watched =
        object.is_knative_serving() && matches!(object.kind.as_str(), "Service" | "Configuration");
    if !watched {
        return (None, false);
    }
    let status = object.status.value();
    let text = |key: &str| status.get(key).and_then(serde_json::Value::as_str);
    let ready = text("latestReadyRevisionName");
    let created = text("latestCreatedRevisionName");
    // Borrowed from the graph's state, not from the parsed status above.
    let ready = ready.and_then(|name| {
        graph
            .live_by_name(
                &object.cluster,
                "serving.knative.dev",
                "Revision",
                &object.namespace,
                name,
            )
            .map(|revision| revision.name.as_str())
    });
    let failed = match created {
        Some(created) if Some(created) != ready => {
            match graph.live_by_name(
                &object.cluster,
                "serving.knative.dev",
                "Revision",
                &object.namespace,
                created,
            ) {
                Some(revision) => revision
                    .condition("Ready")
                    .is_some_and(|ready| ready.status == "False"),
                None => ["ConfigurationsReady", "Ready"].iter().any(|kind| {
                    object
                        .condition(kind)
                        .is_some_and(|condition| condition.status == "False")
                }),
            }
        }
        _ => false,
    };
    (ready, failed)
}
