//! Judging again by the clock: a class whose verdict changes with time alone (a certificate
//! nearing its `notAfter`) says in each assessment when to judge its subject again
//! ([`classes::JudgeAgain`]); the engine keeps that time in its [`Agenda`], one entry per
//! (object, class), replaced by every verdict and removed when the object goes, and
//! [`Engine::tick_within`] runs the class on the object when it is due, with no event. The
//! writer wakes for it through [`Engine::next_deadline`]. A restart loses nothing: the restored
//! objects are re-assessed at start, which asks again. Classes that do not judge by the clock
//! (`JudgeAgain::Untimed`) cost nothing here.

use std::collections::{BTreeSet, HashMap};

use super::*;

/// The times to judge (object, class) again, by time and by object.
#[derive(Debug, Default)]
pub(super) struct Agenda {
    by_time: BTreeSet<(Millis, ObjectKey, &'static str)>,
    by_object: HashMap<ObjectKey, Vec<(&'static str, Millis)>>,
}

impl Agenda {
    /// Sets (`Some`) or removes (`None`) the time to judge `key` with `class` again; returns
    /// the time it replaced.
    pub(super) fn set(
        &mut self,
        key: &ObjectKey,
        class: &'static str,
        at: Option<Millis>,
    ) -> Option<Millis> {
        let entries = self.by_object.get_mut(key);
        let old = entries.as_ref().and_then(|entries| {
            entries
                .iter()
                .find(|(id, _)| *id == class)
                .map(|(_, at)| *at)
        });
        if old == at {
            return old;
        }
        if let Some(old) = old {
            self.by_time.remove(&(old, key.clone(), class));
        }
        match (entries, at) {
            (Some(entries), Some(at)) => {
                entries.retain(|(id, _)| *id != class);
                entries.push((class, at));
            }
            (Some(entries), None) => {
                entries.retain(|(id, _)| *id != class);
                if entries.is_empty() {
                    self.by_object.remove(key);
                }
            }
            (None, Some(at)) => {
                self.by_object.insert(key.clone(), vec![(class, at)]);
            }
            (None, None) => {}
        }
        if let Some(at) = at {
            self.by_time.insert((at, key.clone(), class));
        }
        old
    }

    /// The earliest time anything is due.
    pub(super) fn first(&self) -> Option<Millis> {
        self.by_time.first().map(|(at, _, _)| *at)
    }

    /// The earliest entry due at `now`, if any.
    fn next_due(&self, now: Millis) -> Option<(ObjectKey, &'static str)> {
        self.by_time
            .first()
            .filter(|(at, _, _)| *at <= now)
            .map(|(_, key, class)| (key.clone(), *class))
    }

    /// The classes that asked to judge `key`'s object again.
    pub(super) fn classes_of(&self, key: &ObjectKey) -> Vec<&'static str> {
        self.by_object
            .get(key)
            .map(|entries| entries.iter().map(|(class, _)| *class).collect())
            .unwrap_or_default()
    }

    /// Removes every entry of `key`'s object, returning them.
    pub(super) fn forget(&mut self, key: &ObjectKey) -> Vec<(&'static str, Millis)> {
        let entries = self.by_object.remove(key).unwrap_or_default();
        for (class, at) in &entries {
            self.by_time.remove(&(*at, key.clone(), *class));
        }
        entries
    }

    /// How many (object, class) entries there are.
    pub(super) fn len(&self) -> usize {
        self.by_time.len()
    }
}

impl Engine {
    /// Keeps the time a clock-judged verdict asks for (nothing for an untimed one).
    pub(super) fn note_judge_again(
        &mut self,
        class_id: &'static str,
        assessment: &classes::Assessment,
    ) {
        let at = match assessment.judge_again {
            classes::JudgeAgain::Untimed => return,
            classes::JudgeAgain::At(at) => Some(at),
            classes::JudgeAgain::Never => None,
        };
        let old = self.agenda.set(&assessment.subject, class_id, at);
        if old != at {
            self.journal.judge_again(&assessment.subject, class_id, old);
        }
    }

    /// Judges the objects whose time came (at most `RECHECK_PER_TICK` in one call, and not
    /// past the first `go_on` that says stop): each with the class that asked.
    pub(super) fn judge_due(&mut self, now: Millis, go_on: &mut dyn FnMut() -> bool) {
        for _ in 0..RECHECK_PER_TICK {
            let Some((key, class_id)) = self.agenda.next_due(now) else {
                break;
            };
            let old = self.agenda.set(&key, class_id, None);
            self.journal.judge_again(&key, class_id, old);
            self.judge_with(&key, class_id, now);
            if !go_on() {
                break;
            }
        }
    }

    /// Judges a listed object that the list found unchanged (stale by its version) again with
    /// the classes that judge it by the clock: a resync pass is a judgement too.
    pub(super) fn judge_listed(&mut self, key: &ObjectKey, now: Millis) {
        for class_id in self.agenda.classes_of(key) {
            self.judge_with(key, class_id, now);
        }
    }

    /// Runs one class on `key`'s object as it is now and settles every verdict (holds and
    /// clears: a clock-judged verdict comes from the state and the clock alone).
    fn judge_with(&mut self, key: &ObjectKey, class_id: &'static str, now: Millis) {
        let Some((assessments, _)) =
            self.assess(key, None, Action::Update, None, now, Which::Only(class_id))
        else {
            return;
        };
        for (class_id, assessment) in assessments {
            self.note_judge_again(class_id, &assessment);
            self.settle(class_id, assessment, now);
        }
    }

    /// How many (object, class) pairs wait to be judged again by the clock.
    pub fn judge_again_count(&self) -> usize {
        self.agenda.len()
    }
}

/// Which classes [`Engine::assess`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    /// Every enabled class.
    All,
    /// Every enabled class but those that read nothing but the object itself (team
    /// invariants): the object is judged because another one's health changed.
    Dependent,
    /// This class alone, if enabled.
    Only(&'static str),
}
