//! The fleet view readers get without the writer's queue: the writer publishes it as an
//! immutable snapshot, and `GET /api/v1/fleet` and `/ui/fleet` read the latest one. Reads never
//! queue behind ingest nor in front of it, whatever their number.
//!
//! Why a snapshot built on demand rather than after every round: building the view walks every
//! compared object (5,000 objects is tens of milliseconds), which every round paying would
//! slow ingest for readers that may never come. So the writer builds only when both hold:
//! something changed since the last snapshot (a round ran), and a reader asked for a newer one
//! (the `wanted` flag). Builds happen on the writer (it owns the engine), one at a time, at most
//! one per [`MIN_BUILD_INTERVAL`] or ten times the last build's duration, whichever is longer:
//! however many readers, the writer spends at most about a tenth of its time on them.
//!
//! Freshness: each round that may change the view bumps `changed` before it answers its
//! requests. A reader that finds the snapshot older than `changed` raises `wanted` (the one
//! that raises it wakes an idle writer with one message, so at most one such message is ever
//! queued) and waits for a newer snapshot up to a bound ([`READ_WAIT`]); past it, it is served
//! the latest snapshot there is. So a client that had its event's `202` sees it in the view,
//! unless the writer is held (then the view is what was last published).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drift_core::classify::fleet::GroupView;

/// Fewest time between two builds of the view.
pub const MIN_BUILD_INTERVAL: Duration = Duration::from_millis(200);
/// Longest a reader waits for a snapshot newer than the last change it could see.
pub const READ_WAIT: Duration = Duration::from_secs(2);

/// One published fleet view (every group), immutable once published.
pub struct FleetSnapshot {
    /// The value of the change counter when it was built: it shows every change up to it.
    pub generation: u64,
    /// Every fleet group as the engine held it.
    pub groups: Vec<GroupView>,
    /// Answers rendered from this snapshot (the API's JSON, the page's body), each rendered once
    /// however many readers ask: keyed by the reader (a format and a group), so bounded by the
    /// formats times the configured groups (a group the config does not have is not cached).
    rendered: Mutex<HashMap<String, Arc<tokio::sync::OnceCell<Arc<str>>>>>,
}

impl FleetSnapshot {
    fn new(generation: u64, groups: Vec<GroupView>) -> FleetSnapshot {
        FleetSnapshot {
            generation,
            groups,
            rendered: Mutex::new(HashMap::new()),
        }
    }

    /// The answer rendered under `key` from this snapshot, rendering it (off the async
    /// runtime) the first time: concurrent readers of the same key wait for that one render.
    pub async fn rendered(
        self: &Arc<Self>,
        key: String,
        render: impl FnOnce(&FleetSnapshot) -> String + Send + 'static,
    ) -> Option<Arc<str>> {
        let cell = Arc::clone(
            self.rendered
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .entry(key)
                .or_default(),
        );
        let snapshot = Arc::clone(self);
        cell.get_or_try_init(|| async move {
            tokio::task::spawn_blocking(move || Arc::<str>::from(render(&snapshot))).await
        })
        .await
        .ok()
        .cloned()
    }
}

/// What the writer and the readers share.
pub(super) struct Shared {
    published: tokio::sync::watch::Sender<Arc<FleetSnapshot>>,
    /// Bumped by each round that may change the view, before it answers.
    changed: AtomicU64,
    /// A reader waits for a snapshot newer than the published one.
    wanted: AtomicBool,
}

impl Shared {
    /// Shared state whose first snapshot is `groups` (built before the writer starts).
    pub(super) fn new(groups: Vec<GroupView>) -> Arc<Shared> {
        let (published, _) = tokio::sync::watch::channel(Arc::new(FleetSnapshot::new(0, groups)));
        Arc::new(Shared {
            published,
            changed: AtomicU64::new(0),
            wanted: AtomicBool::new(false),
        })
    }

    /// The latest snapshot if it shows every change made so far; else `None` after raising
    /// `wanted` (`true` returned alongside when this reader raised it and should wake the
    /// writer), with the generation to wait for.
    pub(super) fn current(&self) -> Result<Arc<FleetSnapshot>, (u64, bool)> {
        let wanted_generation = self.changed.load(Ordering::SeqCst);
        let latest = Arc::clone(&self.published.borrow());
        if latest.generation >= wanted_generation {
            return Ok(latest);
        }
        let raised = !self.wanted.swap(true, Ordering::SeqCst);
        Err((wanted_generation, raised))
    }

    /// Waits up to `bound` for a snapshot of at least `generation`; the latest one either way.
    pub(super) async fn wait_for(&self, generation: u64, bound: Duration) -> Arc<FleetSnapshot> {
        let mut receiver = self.published.subscribe();
        let _ = tokio::time::timeout(
            bound,
            receiver.wait_for(|snapshot| snapshot.generation >= generation),
        )
        .await;
        let latest = Arc::clone(&receiver.borrow());
        latest
    }
}

/// The writer's side: when the view changed, and when it may build next.
pub(super) struct Publisher {
    shared: Arc<Shared>,
    /// A round ran since the last snapshot.
    dirty: bool,
    /// Not before then (after the last build).
    next_build: Option<Instant>,
}

impl Publisher {
    pub(super) fn new(shared: Arc<Shared>) -> Publisher {
        Publisher {
            shared,
            dirty: false,
            next_build: None,
        }
    }

    /// A round is about to change the engine: readers that come after its answers wait for a
    /// snapshot that shows it.
    pub(super) fn changed(&mut self) {
        self.dirty = true;
        self.shared.changed.fetch_add(1, Ordering::SeqCst);
    }

    /// How long the writer may sleep before it owes a reader a build (`None`: no reader waits).
    pub(super) fn due_in(&self) -> Option<Duration> {
        if !self.dirty || !self.shared.wanted.load(Ordering::SeqCst) {
            return None;
        }
        Some(
            self.next_build
                .map(|at| at.saturating_duration_since(Instant::now()))
                .unwrap_or_default(),
        )
    }

    /// Between rounds: builds and publishes a snapshot when a reader wants a newer one and the
    /// rate allows; `build` is the engine's view.
    pub(super) fn publish_if_wanted(&mut self, build: impl FnOnce() -> Vec<GroupView>) {
        if self.due_in() != Some(Duration::ZERO) {
            return;
        }
        // Cleared before the build: a reader that raises it again after this point sees a
        // change this build may not show, and is served by the next one.
        self.shared.wanted.store(false, Ordering::SeqCst);
        let generation = self.shared.changed.load(Ordering::SeqCst);
        let started = Instant::now();
        let groups = build();
        let took = started.elapsed();
        self.shared
            .published
            .send_replace(Arc::new(FleetSnapshot::new(generation, groups)));
        self.dirty = false;
        self.next_build = Some(Instant::now() + MIN_BUILD_INTERVAL.max(took * 10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn the_writer_builds_only_when_a_round_changed_the_state_and_a_reader_asked() {
        let shared = Shared::new(Vec::new());
        let mut publisher = Publisher::new(Arc::clone(&shared));
        let builds = Cell::new(0);
        let build = || {
            builds.set(builds.get() + 1);
            Vec::new()
        };
        // A round changed the state, but no reader asked: nothing is built.
        publisher.changed();
        publisher.publish_if_wanted(build);
        assert_eq!(builds.get(), 0);
        assert_eq!(publisher.due_in(), None);
        // A reader finds the snapshot old and asks (the first to ask wakes the writer).
        assert_eq!(shared.current().err(), Some((1, true)));
        assert_eq!(shared.current().err(), Some((1, false)));
        assert_eq!(publisher.due_in(), Some(Duration::ZERO));
        publisher.publish_if_wanted(build);
        assert_eq!(builds.get(), 1);
        let snapshot = shared.current().expect("the new snapshot is current");
        assert_eq!(snapshot.generation, 1);
        // Nothing changed since: asking again builds nothing.
        publisher.publish_if_wanted(build);
        assert_eq!(builds.get(), 1);
        // Another change and another reader, right after a build: the writer waits its turn.
        publisher.changed();
        assert_eq!(shared.current().err(), Some((2, true)));
        let due = publisher.due_in().expect("a reader waits");
        assert!(due > Duration::ZERO && due <= MIN_BUILD_INTERVAL, "{due:?}");
        publisher.publish_if_wanted(build);
        assert_eq!(builds.get(), 1);
    }

    #[tokio::test]
    async fn a_reader_waits_for_the_snapshot_that_shows_the_change_it_saw() {
        let shared = Shared::new(Vec::new());
        let mut publisher = Publisher::new(Arc::clone(&shared));
        publisher.changed();
        let (generation, _) = shared.current().err().expect("the snapshot is old");
        let reader = {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move { shared.wait_for(generation, Duration::from_secs(30)).await })
        };
        publisher.publish_if_wanted(Vec::new);
        let snapshot = reader.await.unwrap();
        assert_eq!(snapshot.generation, generation);
    }

    #[tokio::test]
    async fn each_answer_is_rendered_once_per_snapshot() {
        let shared = Shared::new(Vec::new());
        let snapshot = shared.current().ok().unwrap();
        let renders = Arc::new(AtomicU64::new(0));
        for _ in 0..3 {
            let counted = Arc::clone(&renders);
            let text = snapshot
                .rendered("json:*".into(), move |_| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    "{}".into()
                })
                .await;
            assert_eq!(text.as_deref(), Some("{}"));
        }
        assert_eq!(renders.load(Ordering::SeqCst), 1);
    }
}
