//! The timers against the scan they replaced: two engines take the same seeded changes (opens,
//! updates, moved fire times, resolutions, reloads that switch a class on and off, graceful-stop
//! recording, rolled-back rounds, restarts); one ticks as the engine does, the other fires and
//! records by scanning every pending drift as the timers did before the deadline index. Every
//! round's changes must be equal, and `next_deadline` must never be later than the earliest
//! real work (the writer sleeps until it).

use std::collections::BTreeMap;
use std::time::Duration;

use super::settle::drift_id;
use super::*;
use crate::classify::rules::{ClassSettings, RuleSet};
use drift_model::{Evidence, Severity};

/// Reassessable, always on.
const STEADY: &str = "not_ready";
/// Reassessable, switched on and off by reloads.
const TOGGLED: &str = "generation_lag";
/// About a change: recorded at once when it opens.
const CHANGE: &str = "manual_edit";
const CLASSES: [&str; 3] = [STEADY, TOGGLED, CHANGE];
const GRACES: [Millis; 10] = [
    0, 1, 10_000, 29_999, 30_000, 30_001, 45_000, 60_000, 120_000, 600_000,
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

fn rules(toggled_on: bool, steady_on: bool) -> Arc<Rules> {
    let settings = |enabled| ClassSettings {
        enabled,
        severity: Severity::Warning,
        grace: Duration::ZERO,
        tolerance_percent: 0.0,
        threshold: 0,
    };
    let mut classes = BTreeMap::new();
    classes.insert(STEADY, settings(steady_on));
    classes.insert(TOGGLED, settings(toggled_on));
    classes.insert(CHANGE, settings(true));
    Arc::new(Rules::new(RuleSet::with_classes(classes)))
}

/// The timers before the deadline index: every pending drift scanned; the due ones fire in slot
/// order, then those pending for `RECORD_PENDING_AFTER_MS` are recorded in slot order.
fn scan_fire_and_record(engine: &mut Engine, now: Millis) {
    let mut due: Vec<DriftSlot> = (engine.drifts.iter())
        .filter(|(_, drift)| drift.state == DriftState::Pending && drift.fire_at <= now)
        .filter(|(slot, _)| engine.rules.class(&slot.class).enabled)
        .map(|(slot, _)| slot.clone())
        .collect();
    due.sort();
    for slot in due {
        let mut drift = engine.drifts[&slot].clone();
        drift.state = DriftState::Firing;
        drift.fired_at = Some(now);
        engine.put_drift(slot, Some(drift.clone()));
        engine.push_transition(drift, Some(DriftState::Pending), now);
    }
    scan_record(engine, now.saturating_sub(RECORD_PENDING_AFTER_MS));
}

fn scan_record(engine: &mut Engine, opened_by: Millis) {
    let mut unrecorded: Vec<DriftSlot> = (engine.drifts.iter())
        .filter(|(_, drift)| {
            drift.state == DriftState::Pending
                && drift.since <= opened_by
                && !engine.recorded.contains(&drift.id)
        })
        .map(|(slot, _)| slot.clone())
        .collect();
    unrecorded.sort();
    for slot in unrecorded {
        let drift = engine.drifts[&slot].clone();
        engine.record(&drift, true);
        engine.journal.touch_drift(slot.clone());
        // Keeps the reference's index in step (not used by the scan).
        engine.note_pending(&slot);
    }
}

/// The earliest real work on a pending drift, by a scan (`None`: none).
fn earliest_work(engine: &Engine) -> Option<Millis> {
    (engine.drifts.values())
        .filter(|drift| drift.state == DriftState::Pending)
        .filter_map(|drift| engine.pending_deadline(drift))
        .min()
}

fn same_state(new: &Engine, old: &Engine, context: &str) {
    let mut a: Vec<(&DriftSlot, &Drift)> = new.drifts.iter().collect();
    let mut b: Vec<(&DriftSlot, &Drift)> = old.drifts.iter().collect();
    a.sort_by(|x, y| x.0.cmp(y.0));
    b.sort_by(|x, y| x.0.cmp(y.0));
    assert_eq!(a, b, "{context}: open drifts differ");
    assert_eq!(
        new.recorded, old.recorded,
        "{context}: recorded sets differ"
    );
    assert!(new.pending_index_holds(), "{context}: index broken");
    // Never late: a deadline after the earliest work makes a drift fire late.
    if let Some(work) = earliest_work(new) {
        let said = new.next_deadline();
        assert!(
            said.is_some_and(|at| at <= work),
            "{context}: next_deadline {said:?} later than the earliest work {work}"
        );
        assert_eq!(said, Some(work), "{context}: next_deadline not exact");
    }
}

fn same_changes(new: &Engine, old: &Engine, context: &str) {
    let (a, b) = (new.changes(), old.changes());
    assert_eq!(
        a.transitions, b.transitions,
        "{context}: transitions differ"
    );
    assert_eq!(a.history, b.history, "{context}: history differs");
    assert_eq!(a.drifts, b.drifts, "{context}: drift rows differ");
}

fn slot_of(uid: u64, class: &str) -> DriftSlot {
    DriftSlot {
        cluster: "prod".to_string(),
        uid: format!("u{uid}"),
        class: class.to_string(),
        rule: None,
    }
}

fn new_drift(slot: &DriftSlot, id: String, now: Millis, grace: Millis) -> Drift {
    Drift {
        id,
        class: slot.class.clone(),
        rule: None,
        severity: Severity::Warning,
        state: DriftState::Pending,
        cluster: slot.cluster.clone(),
        uid: slot.uid.clone(),
        api_version: "v1".to_string(),
        kind: "ConfigMap".to_string(),
        namespace: "default".to_string(),
        name: slot.uid.clone(),
        labels: BTreeMap::new(),
        owner: Default::default(),
        evidence: Evidence {
            summary: "found".to_string(),
            ..Evidence::default()
        },
        since: now,
        fire_at: now.saturating_add(grace),
        fired_at: None,
        resolved_at: None,
        resolution: None,
    }
}

/// Runs one seed; returns how many drifts the timers fired and recorded.
fn run(seed: u64, rounds: usize) -> (usize, usize) {
    let (mut fired, mut recorded) = (0, 0);
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let (mut toggled_on, mut steady_on) = (true, true);
    let mut new = Engine::new(rules(toggled_on, steady_on));
    let mut old = Engine::new(rules(toggled_on, steady_on));
    let mut now: Millis = 1_700_000_000_000;
    for round in 0..rounds {
        let context = format!("seed {seed} round {round}");
        // The clock: still, a step, a long step, or exactly the deadline the engine gave (the
        // writer sleeping until it), or just before it.
        now = match (rng.below(8), new.next_deadline()) {
            (0, _) => now,
            (1 | 2, _) => now + rng.below(3) as Millis,
            (3, _) => now + rng.below(40_000) as Millis,
            (4, _) => now + rng.below(700_000) as Millis,
            (5 | 6, Some(at)) if at > now => at,
            (7, Some(at)) if at > now + 1 => at - 1,
            _ => now + rng.below(5_000) as Millis,
        };
        new.begin();
        old.begin();
        new.tick(now);
        scan_fire_and_record(&mut old, now);
        same_state(&new, &old, &format!("{context} tick at {now}"));
        let changes = new.changes();
        fired += (changes.transitions.iter())
            .filter(|moved| moved.from == Some(DriftState::Pending) && moved.at == now)
            .count();
        recorded += (changes.history.iter())
            .filter(|moved| moved.from.is_none())
            .count();
        for op in 0..rng.below(5) {
            let context = format!("{context} op {op}");
            let slot = slot_of(rng.below(6), rng.pick(&CLASSES));
            match rng.below(12) {
                // A finding opens a drift (firing at once without grace).
                0..=3 => {
                    if new.drifts.contains_key(&slot) {
                        continue;
                    }
                    let grace = rng.pick(&GRACES);
                    for engine in [&mut new, &mut old] {
                        let id = drift_id(&slot, now, engine.next_sequence(now));
                        let drift = new_drift(&slot, id, now, grace);
                        engine.open(slot.clone(), drift, now);
                    }
                }
                // New evidence for an open drift (what `settle` does).
                4 | 5 => {
                    let Some(open) = new.drifts.get(&slot).cloned() else {
                        continue;
                    };
                    let mut updated = open;
                    updated.evidence.summary = format!("found again at {now}");
                    updated.severity = rng.pick(&[Severity::Info, Severity::Critical]);
                    for engine in [&mut new, &mut old] {
                        engine.put_drift(slot.clone(), Some(updated.clone()));
                    }
                }
                // A pending drift's fire time moved either way (no path does it today; any
                // write through `put_drift` must keep the index).
                6 => {
                    let Some(open) = new.drifts.get(&slot).cloned() else {
                        continue;
                    };
                    if open.state != DriftState::Pending {
                        continue;
                    }
                    let mut moved = open;
                    moved.fire_at = now + rng.below(90_000) as Millis - 30_000;
                    for engine in [&mut new, &mut old] {
                        engine.put_drift(slot.clone(), Some(moved.clone()));
                    }
                }
                // The finding clears.
                7 | 8 => {
                    for engine in [&mut new, &mut old] {
                        engine.clear(&slot, "clear", now);
                    }
                }
                // A reload switches a class on or off.
                9 => {
                    if rng.below(3) == 0 {
                        steady_on = !steady_on;
                    } else {
                        toggled_on = !toggled_on;
                    }
                    for engine in [&mut new, &mut old] {
                        engine.set_rules(rules(toggled_on, steady_on));
                    }
                }
                // A graceful stop records what is pending.
                10 => {
                    new.record_pending();
                    scan_record(&mut old, Millis::MAX);
                }
                // Another tick in the same round.
                _ => {
                    new.tick(now);
                    scan_fire_and_record(&mut old, now);
                }
            }
            same_state(&new, &old, &context);
        }
        same_changes(&new, &old, &context);
        if rng.below(6) == 0 {
            new.rollback();
            old.rollback();
        } else {
            new.commit();
            old.commit();
        }
        same_state(&new, &old, &format!("{context} end"));
        // A restart now and then: the open drifts come back recorded.
        if rng.below(40) == 0 {
            let mut drifts: Vec<Drift> = new.drifts.values().cloned().collect();
            drifts.sort_by_key(Drift::slot);
            new = Engine::new(rules(toggled_on, steady_on));
            old = Engine::new(rules(toggled_on, steady_on));
            new.restore(Vec::new(), drifts.clone());
            old.restore(Vec::new(), drifts);
            same_state(&new, &old, &format!("{context} restart"));
        }
    }
    (fired, recorded)
}

#[test]
fn timers_fire_and_record_as_the_scan_did() {
    assert!(classes::reassessable(STEADY) && classes::reassessable(TOGGLED));
    assert!(!classes::reassessable(CHANGE));
    let (mut fired, mut recorded) = (0, 0);
    for seed in 0..150 {
        let (f, r) = run(seed, 300);
        fired += f;
        recorded += r;
    }
    // The run keeps its teeth: the timers did fire and record.
    assert!(
        fired > 1_000 && recorded > 1_000,
        "fired {fired}, recorded {recorded}"
    );
    println!("timers fired {fired}, recorded {recorded}");
}
