//! An in-memory [`Store`] for tests: same contract as SQLite, and a switch that makes every write
//! fail so tests can prove that a store failure becomes a `503` and loses nothing.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{Batch, Error, EventKey, Snapshot, Store};
use crate::classify::{Drift, DriftState, Millis, ObjectKey, ObjectState};

/// The in-memory store.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    inner: Arc<std::sync::Mutex<Inner>>,
    failing: Arc<AtomicBool>,
    gate: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

#[derive(Debug, Default)]
struct Inner {
    events: HashMap<EventKey, Millis>,
    objects: HashMap<ObjectKey, ObjectState>,
    drifts: HashMap<String, Drift>,
    commits: usize,
}

impl MemoryStore {
    /// A new, empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// Makes every later call fail (or succeed again).
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// While blocked, `commit` waits: tests use it to fill the writer's queue.
    pub fn set_blocked(&self, blocked: bool) {
        let (lock, condvar) = &*self.gate;
        *lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = blocked;
        condvar.notify_all();
    }

    /// Number of committed event keys.
    pub fn event_count(&self) -> usize {
        self.lock().events.len()
    }

    /// Number of successful commits.
    pub fn commit_count(&self) -> usize {
        self.lock().commits
    }

    /// Committed objects.
    pub fn objects(&self) -> Vec<ObjectState> {
        self.lock().objects.values().cloned().collect()
    }

    /// Committed drifts (all states).
    pub fn drifts(&self) -> Vec<Drift> {
        self.lock().drifts.values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned lock only means a test thread panicked; the data is still usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn check(&self) -> Result<(), Error> {
        if self.failing.load(Ordering::SeqCst) {
            Err(Error::Unavailable("memory store set to fail".to_string()))
        } else {
            Ok(())
        }
    }
}

impl Store for MemoryStore {
    fn load(&mut self) -> Result<Snapshot, Error> {
        self.check()?;
        let inner = self.lock();
        Ok(Snapshot {
            objects: inner.objects.values().cloned().collect(),
            drifts: inner
                .drifts
                .values()
                .filter(|drift| drift.state != DriftState::Resolved)
                .cloned()
                .collect(),
        })
    }

    fn is_duplicate(&mut self, key: &EventKey) -> Result<bool, Error> {
        self.check()?;
        Ok(self.lock().events.contains_key(key))
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        {
            let (lock, condvar) = &*self.gate;
            let mut blocked = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            while *blocked {
                blocked = condvar
                    .wait(blocked)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        }
        self.check()?;
        let mut inner = self.lock();
        let mut seen = HashSet::new();
        for (key, at) in &batch.events {
            if seen.insert(key.clone()) {
                inner.events.entry(key.clone()).or_insert(*at);
            }
        }
        for object in &batch.changes.objects {
            inner.objects.insert(object.key(), object.clone());
        }
        for key in &batch.changes.removed_objects {
            inner.objects.remove(key);
        }
        for drift in &batch.changes.drifts {
            inner.drifts.insert(drift.id.clone(), drift.clone());
        }
        inner.commits += 1;
        Ok(())
    }

    fn heartbeat(&mut self, _now: Millis) -> Result<(), Error> {
        self.check()
    }

    fn prune_events(&mut self, cutoff: Millis) -> Result<usize, Error> {
        self.check()?;
        let mut inner = self.lock();
        let before = inner.events.len();
        inner.events.retain(|_, at| *at >= cutoff);
        Ok(before - inner.events.len())
    }
}
