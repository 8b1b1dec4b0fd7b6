//! Settling the classes' verdicts into drift episodes: a finding that holds opens a drift
//! (pending, or firing at once without grace) or brings an open one's evidence up to date (a
//! firing one whose severity rises moves from firing to firing: an escalation, notified); a
//! clear finding resolves it; a failed one leaves it as it is. A fleet finding that holds
//! settles through the fleet evaluator (`fleet.rs` here calls `classify::fleet::settle`).

use sha2::{Digest, Sha256};

use super::*;

impl Engine {
    /// Settles one class's verdict about its subject at `now`.
    pub(super) fn settle(
        &mut self,
        class_id: &'static str,
        assessment: classes::Assessment,
        now: Millis,
    ) {
        let classes::Assessment {
            subject,
            rule,
            finding,
            ..
        } = assessment;
        if let classes::Finding::Clear(reason) = &finding {
            if let Some(rule) = &rule {
                self.rule_errors.recovered(&subject, rule);
            }
            // Most clear verdicts find nothing open: asked without building a slot.
            let open = drift_model::SlotRef {
                cluster: &subject.cluster,
                uid: &subject.uid,
                class: class_id,
                rule: rule.as_deref(),
            };
            if let Some(open) = self.drifts.get(&open as &dyn drift_model::SlotKey).cloned() {
                let slot = DriftSlot {
                    cluster: subject.cluster,
                    uid: subject.uid,
                    class: class_id.to_string(),
                    rule,
                };
                self.resolve(&slot, open, reason, now);
            }
            return;
        }
        let slot = DriftSlot {
            cluster: subject.cluster.clone(),
            uid: subject.uid.clone(),
            class: class_id.to_string(),
            rule,
        };
        match finding {
            // Settled above.
            classes::Finding::Clear(_) => {}
            classes::Finding::Failed { kind, error } => {
                let rule = slot.rule.as_deref().unwrap_or(class_id);
                let graph = &self.graph;
                self.rule_errors.failed(&subject, rule, kind, &error, || {
                    graph.get(&subject).map_or_else(
                        || subject.uid.clone(),
                        |object| {
                            if object.namespace.is_empty() {
                                format!("{} {}", object.kind, object.name)
                            } else {
                                format!("{} {}/{}", object.kind, object.namespace, object.name)
                            }
                        },
                    )
                });
            }
            // A drift about a group, not a tracked object: the fleet evaluator settles it.
            classes::Finding::Holds(evidence) if classes::about_a_group(class_id) => {
                self.settle_fleet(slot, *evidence, now);
            }
            classes::Finding::Holds(evidence) => {
                let evidence = *evidence;
                // Borrowed, not cloned: this runs for every finding that still holds.
                let Some(target) = self.graph.get(&subject) else {
                    return;
                };
                // drift-sentinel's own event path is watched whatever the scope says.
                if class_id != classes::PIPELINE_BROKEN && !self.rules.in_scope(target) {
                    return;
                }
                if let Some(rule) = &slot.rule {
                    self.rule_errors.recovered(&subject, rule);
                }
                let settings = self.rules.class(class_id);
                // A rule of its own (an invariant) brings its severity and grace.
                let rule = slot
                    .rule
                    .as_deref()
                    .and_then(|name| self.rules.invariant(name));
                let (default_severity, grace) = match rule {
                    Some(rule) => (rule.severity, rule.grace),
                    None => (settings.severity, settings.grace),
                };
                let severity = evidence.severity.unwrap_or(default_severity);
                if let Some(existing) = self.drifts.get(&slot) {
                    // Nearly always the verdict is the one already kept: compared in place,
                    // not on a copy of the drift or of the labels.
                    if existing.evidence == evidence
                        && existing.severity == severity
                        && target.labels == existing.labels
                    {
                        return;
                    }
                    let labels = target.labels.to_map();
                    // A firing drift of a class that escalates whose severity rises is told
                    // again (a warning that became critical must be heard): a move from firing
                    // to firing, which the router sends and nothing else takes for a new fire.
                    let escalated = existing.state == DriftState::Firing
                        && severity > existing.severity
                        && classes::escalates(class_id);
                    let mut updated = existing.clone();
                    updated.evidence = evidence;
                    updated.severity = severity;
                    updated.labels = labels;
                    if escalated {
                        self.put_drift(slot, Some(updated.clone()));
                        self.push_transition(updated, Some(DriftState::Firing), now);
                    } else {
                        self.put_drift(slot, Some(updated));
                    }
                    return;
                }
                let target = target.clone();
                let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
                let fire_at = now.saturating_add(grace_ms);
                let drift = Drift {
                    id: drift_id(&slot, now, self.next_sequence(now)),
                    class: class_id.to_string(),
                    rule: slot.rule.clone(),
                    severity,
                    state: DriftState::Pending,
                    cluster: target.cluster.clone(),
                    uid: target.uid.clone(),
                    api_version: target.api_version.clone(),
                    kind: target.kind.clone(),
                    namespace: target.namespace.clone(),
                    name: target.name.clone(),
                    labels: target.labels.to_map(),
                    owner: self.graph.owner_chain(&target),
                    evidence,
                    since: now,
                    fire_at,
                    fired_at: None,
                    resolved_at: None,
                    resolution: None,
                };
                self.open(slot, drift, now);
            }
        }
    }

    /// Opens a new drift (pending), and fires it at once when it has no grace.
    pub(super) fn open(&mut self, slot: DriftSlot, drift: Drift, now: Millis) {
        let fire_at = drift.fire_at;
        self.put_drift(slot.clone(), Some(drift.clone()));
        self.push_transition(drift.clone(), None, now);
        if fire_at <= now {
            let mut firing = drift;
            firing.state = DriftState::Firing;
            firing.fired_at = Some(now);
            self.put_drift(slot, Some(firing.clone()));
            self.push_transition(firing, Some(DriftState::Pending), now);
        }
    }

    /// A number that tells apart episodes opened in the same millisecond (several can open in
    /// one writer round, or in rounds less than a millisecond apart). Deterministic for replay.
    pub(super) fn next_sequence(&mut self, now: Millis) -> usize {
        if self.sequence.0 == now {
            self.sequence.1 += 1;
        } else {
            self.sequence = (now, 0);
        }
        self.sequence.1
    }

    /// Resolves the drift open in `slot`, if any, for `reason`.
    pub(super) fn clear(&mut self, slot: &DriftSlot, reason: &str, now: Millis) {
        let Some(open) = self.drifts.get(slot).cloned() else {
            return;
        };
        self.resolve(slot, open, reason, now);
    }

    /// Resolves `open`, the drift open in `slot`, for `reason`.
    fn resolve(&mut self, slot: &DriftSlot, open: Drift, reason: &str, now: Millis) {
        let from = open.state;
        let mut resolved = open;
        resolved.state = DriftState::Resolved;
        resolved.resolved_at = Some(now);
        resolved.resolution = Some(reason.to_string());
        self.put_drift(slot.clone(), None);
        // Its last move is recorded when the drift was; then it leaves the recorded set.
        let recorded = self.recorded.contains(&resolved.id);
        let id = resolved.id.clone();
        self.push_transition(resolved, Some(from), now);
        if recorded {
            self.recorded.remove(&id);
            self.journal.recorded(id, false);
        }
    }
}

/// The id of a drift episode: a hash of its slot and when it opened, and of its number among
/// the episodes opened in the same millisecond ([`Engine::next_sequence`]).
pub(super) fn drift_id(slot: &DriftSlot, since: Millis, sequence: usize) -> String {
    let mut hasher = Sha256::new();
    for part in [&slot.cluster, &slot.uid, &slot.class] {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    // Drifts of built-in classes keep the ids they always had.
    if let Some(rule) = &slot.rule {
        hasher.update(rule.as_bytes());
        hasher.update([0u8]);
    }
    hasher.update(since.to_be_bytes());
    // Episodes opened in the same millisecond are numbered; the first keeps the plain id.
    if sequence > 0 {
        hasher.update((sequence as u64).to_be_bytes());
    }
    let digest = hasher.finalize();
    digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
