//! Running the classes: on an applied event ([`Engine::evaluate`]), on an object whose verdict
//! depends on another's health or on Knative's defaults, on every object of a snapshot, and on
//! restored objects after a restart or a reload ([`Engine::reassess`]). Each class's
//! assessments go to `settle.rs`.

use super::judge_again::Which;
use super::*;

impl Engine {
    /// Re-evaluates every tracked object as it is now (holds and clears both settled): what
    /// `check` does once a whole snapshot is applied, so that a verdict that depends on other
    /// objects (a Trigger whose Broker is not ready is reported on the Broker; an internal
    /// object whose owner is tracked is reported through it) does not depend on the order the
    /// snapshot's objects were applied in.
    pub fn reevaluate_all(&mut self, now: Millis) {
        let keys: Vec<ObjectKey> = self.graph.iter().map(ObjectState::key).collect();
        for key in keys {
            self.reevaluate(&key, now);
        }
    }

    /// Every enabled class's verdicts on `key`'s object as it is now, all settled (what an
    /// event would do, without one): for state the engine keeps beside the objects.
    pub(super) fn reevaluate(&mut self, key: &ObjectKey, now: Millis) {
        let Some((assessments, _)) =
            self.assess(key, None, Action::Update, None, now, Which::Dependent)
        else {
            return;
        };
        // Only the classes about state: a class about a change needs the event's "before".
        for (class_id, assessment) in assessments {
            self.note_judge_again(class_id, &assessment);
            if classes::reassessable(class_id) {
                self.settle(class_id, assessment, now);
            }
        }
    }

    /// Re-evaluates the objects whose verdict depends on `key`'s object, after its health (its
    /// happy condition, a PodAutoscaler's shortfall, a deletion) changed: the plumbing it owns
    /// (reported through it while it is not ready), the owner that reports it when it is
    /// plumbing (whose condition chain names it), a Broker's Triggers (reported on the Broker
    /// while it is not ready), a PodAutoscaler's Revision (whose shortfall it reports). So a
    /// finding left to another object does not depend on which of the two events came first.
    pub(super) fn reevaluate_dependents(&mut self, key: &ObjectKey, now: Millis) {
        let Some(object) = self.graph.get(key) else {
            return;
        };
        let mut dependents: Vec<ObjectKey> = self
            .graph
            .children(key)
            .into_iter()
            .filter(|child| !child.deleted && crate::classify::kinds::is_plumbing(child))
            .map(ObjectState::key)
            .collect();
        if object.is_kind(crate::classify::kinds::EVENTING, "Broker") {
            dependents.extend(
                self.graph
                    .triggers_of(object)
                    .into_iter()
                    .filter(|trigger| !trigger.deleted)
                    .map(ObjectState::key),
            );
        }
        // The owners that report this plumbing's failure carry it in their condition chains
        // (a KIngress on its Route, and on the Route's Service): brought up to date whichever
        // event came first. Bounded, and an owner-reference cycle stops the walk.
        let mut below = object;
        for _ in 0..crate::classify::kinds::MAX_CHAIN {
            if !crate::classify::kinds::is_plumbing(below) {
                break;
            }
            let Some(owner) = below
                .controller_owner()
                .and_then(|owner| self.graph.by_uid(&below.cluster, &owner.uid))
            else {
                break;
            };
            if owner.deleted || owner.uid == object.uid || dependents.contains(&owner.key()) {
                break;
            }
            dependents.push(owner.key());
            below = owner;
        }
        if object.is_kind(
            crate::classify::kinds::AUTOSCALING_INTERNAL,
            "PodAutoscaler",
        ) {
            if let Some(owner) = object.controller_owner() {
                if let Some(revision) = self.graph.by_uid(&object.cluster, &owner.uid) {
                    dependents.push(revision.key());
                }
            }
        }
        for dependent in dependents {
            self.reevaluate(&dependent, now);
        }
    }

    /// Re-evaluates the objects of one cluster that have a baseline manifest, after one of
    /// Knative's defaults ConfigMaps changed there: their comparison reads those defaults.
    pub(super) fn reevaluate_baseline(&mut self, cluster: &str, now: Millis) {
        let rules = self.rules.clone();
        let keys: Vec<ObjectKey> = rules
            .baseline()
            .iter()
            .filter_map(|(manifest, _)| {
                self.graph.live_by_name(
                    cluster,
                    &manifest.group,
                    &manifest.kind,
                    &manifest.namespace,
                    &manifest.name,
                )
            })
            .map(ObjectState::key)
            .collect();
        for key in keys {
            self.reevaluate(&key, now);
        }
    }

    /// Re-assesses an object as it is now, opening the drifts whose condition holds and that
    /// have no open drift: pending episodes that were not recorded before a restart, and
    /// conditions a rules change made visible. Open drifts are left as they are (their evidence
    /// came from events; the re-assessment sees only the stored state), except those of rules,
    /// of clocks and of classes re-judged both ways ([`classes::rejudged_both_ways`]). Every
    /// enabled class runs: classes about a change find nothing without a `before` and an open
    /// drift, and the state-based part of `image_drift` (a workload running another image) is
    /// found again.
    pub(super) fn reassess(&mut self, key: &ObjectKey, now: Millis) {
        let Some((assessments, false)) =
            self.assess(key, None, Action::Update, None, now, Which::All)
        else {
            return;
        };
        for (class_id, assessment) in assessments {
            self.note_judge_again(class_id, &assessment);
            // A verdict by the clock comes from the state and the clock alone: settled whatever
            // it is, so a drift that crossed a threshold while the service was down (a warning
            // now critical, an expiry renewed) is brought up to date.
            if assessment.judge_again != classes::JudgeAgain::Untimed {
                self.settle(class_id, assessment, now);
                continue;
            }
            // A rule's verdict is about the object's state alone, so it is settled whatever it
            // is: a rule changed by a reload may now hold where it was broken. So is a class
            // whose verdict reads only the kept state and the rules (a manifest fixed in Git).
            if assessment.rule.is_some() || classes::rejudged_both_ways(class_id) {
                self.settle(class_id, assessment, now);
                continue;
            }
            if !matches!(assessment.finding, classes::Finding::Holds(_)) {
                continue;
            }
            let slot = DriftSlot {
                cluster: assessment.subject.cluster.clone(),
                uid: assessment.subject.uid.clone(),
                class: class_id.to_string(),
                rule: None,
            };
            if !self.drifts.contains_key(&slot) {
                self.settle(class_id, assessment, now);
            }
        }
    }

    /// Every enabled class's verdicts on `key`'s object as it is in the graph, with whether it
    /// is deleted (`None` when it is not tracked). `object` is the event's decoded object, or
    /// `None` to render one from the state.
    /// `which`: the classes to run ([`Which`]).
    pub(super) fn assess(
        &self,
        key: &ObjectKey,
        before: Option<&ObjectState>,
        action: Action,
        object: Option<&crate::decode::KubeObject>,
        now: Millis,
        which: Which,
    ) -> Option<(Vec<(&'static str, classes::Assessment)>, bool)> {
        let after = self.graph.get(key)?;
        let rendered;
        let object = match object {
            Some(object) => object,
            None => {
                rendered = after.to_object();
                &rendered
            }
        };
        let context = classes::Context {
            after,
            before,
            action,
            object,
            graph: &self.graph,
            rules: &self.rules,
            drifts: &self.drifts,
            source_blind: self.source_blind(&key.cluster),
            fight: self.fights.get(key).map(String::as_str),
            traffic: self.traffic.of(after),
            now,
            attributor: std::cell::OnceCell::new(),
        };
        let mut assessments = Vec::new();
        for class in classes::REGISTRY {
            let skipped = match which {
                Which::All => false,
                Which::Dependent => class.id() == classes::INVARIANT,
                Which::Only(id) => class.id() != id,
            };
            if skipped || !self.rules.class(class.id()).enabled {
                continue;
            }
            for assessment in class.assess(&context) {
                assessments.push((class.id(), assessment));
            }
        }
        Some((assessments, after.deleted))
    }

    /// Runs every enabled class on the object an event just changed (`before` it, as decoded
    /// in `object`) and settles their verdicts; a deletion resolves what cannot outlive it.
    pub(super) fn evaluate(
        &mut self,
        key: &ObjectKey,
        before: Option<&ObjectState>,
        action: Action,
        object: &crate::decode::KubeObject,
        now: Millis,
    ) {
        let Some((assessments, deleted)) =
            self.assess(key, before, action, Some(object), now, Which::All)
        else {
            return;
        };
        for (class_id, assessment) in assessments {
            self.note_judge_again(class_id, &assessment);
            self.settle(class_id, assessment, now);
        }
        // A deleted object can no longer be in any condition of its own, except the classes that
        // are about its disappearance.
        if deleted {
            let open: Vec<DriftSlot> = self
                .drifts
                .keys()
                .filter(|slot| slot.cluster == key.cluster && slot.uid == key.uid)
                .filter(|slot| !classes::survives_delete(&slot.class))
                .cloned()
                .collect();
            for slot in open {
                self.clear(&slot, "object deleted", now);
            }
            self.rule_errors.forget_object(key);
            self.traffic.forget(key);
        }
    }
}
