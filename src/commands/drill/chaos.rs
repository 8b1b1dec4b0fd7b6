//! `drill --chaos`: random drills from the catalog at an average rate for a while, from a seeded
//! schedule (`drift_core::drill::chaos`), at most one drill open per object: drills whose
//! objects (targets and what they `affect`) overlap share one queue, and an arrival whose queue
//! is busy waits, so a seed always gives the same drills in the same order in each queue (only
//! their times can shift). An arrival still waiting when the duration ends is not started.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use drift_core::drill::{chaos, Catalog};

use super::report::Outcome;
use super::runner::Runner;
use super::Chaos;

/// Runs chaos (see the module docs).
pub(crate) async fn run(runner: Arc<Runner>, catalog: Arc<Catalog>, shape: &Chaos) -> Ran {
    let arrivals = chaos::schedule(
        shape.seed,
        shape.per_second,
        shape.duration,
        catalog.drills.len(),
    );
    eprintln!(
        "chaos: {} drills over {}s (seed {})",
        arrivals.len(),
        shape.duration.as_secs(),
        shape.seed
    );
    // Each queue's arrivals, in order, with their place in the schedule and the drill's run
    // number (its k-th arrival).
    let queue_of = queues(&catalog);
    let mut per_object: BTreeMap<usize, Vec<(usize, usize, usize, Duration)>> = BTreeMap::new();
    let mut runs: BTreeMap<usize, usize> = BTreeMap::new();
    for (order, arrival) in arrivals.iter().enumerate() {
        let run = runs.entry(arrival.drill).or_default();
        *run += 1;
        per_object
            .entry(queue_of[arrival.drill])
            .or_default()
            .push((order, arrival.drill, *run, arrival.at));
    }
    let duration = shape.duration;
    let mut tasks = tokio::task::JoinSet::new();
    for (_, queue) in per_object {
        let runner = runner.clone();
        let catalog = catalog.clone();
        tasks.spawn(async move {
            let mut done = Vec::new();
            let mut not_run = 0;
            // An object a drill could not put back is not drilled again (the next drill would
            // keep the drilled state as the one to restore).
            let mut not_restored = false;
            for (order, drill, run, at) in queue {
                if not_restored {
                    not_run += 1;
                    continue;
                }
                let wait = at.saturating_sub(runner.start.elapsed());
                let stopped = tokio::select! {
                    _ = tokio::time::sleep(wait) => runner.stop.is_cancelled(),
                    _ = runner.stop.cancelled() => true,
                };
                // Its object was busy until the duration ended: a chaos run starts no drill after it.
                if stopped || runner.start.elapsed() > duration {
                    not_run += 1;
                    continue;
                }
                let drill = &catalog.drills[drill];
                eprintln!("chaos: {} #{run} on {}", drill.name, drill.target.name);
                let outcome = runner.run(drill, run).await;
                not_restored = matches!(outcome.end, super::report::End::NotRestored(_));
                done.push((order, outcome));
            }
            (done, not_run)
        });
    }
    let mut outcomes = Vec::new();
    let mut not_run = 0;
    let mut broken = false;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((done, skipped)) => {
                outcomes.extend(done);
                not_run += skipped;
            }
            // A panic in a drill is a bug: the run fails (its queue's other drills are lost).
            Err(error) => {
                eprintln!("chaos: a drill task ended without its report: {error}");
                broken = true;
            }
        }
    }
    outcomes.sort_by_key(|(order, _)| *order);
    Ran {
        outcomes: outcomes.into_iter().map(|(_, outcome)| outcome).collect(),
        not_run,
        broken,
    }
}

/// What a chaos run did.
pub(crate) struct Ran {
    /// The drill runs, in schedule order.
    pub outcomes: Vec<Outcome>,
    /// Arrivals not started (a stop, the duration over, an object not put back).
    pub not_run: usize,
    /// A drill's task ended without its report.
    pub broken: bool,
}

/// Each drill's queue: drills whose objects (target and `affects`) overlap, directly or through
/// others, share one.
fn queues(catalog: &Catalog) -> Vec<usize> {
    let objects: Vec<Vec<String>> = catalog
        .drills
        .iter()
        .map(|drill| {
            std::iter::once(&drill.target)
                .chain(&drill.affects)
                .map(super::restore::object_path)
                .collect()
        })
        .collect();
    let mut queue: Vec<usize> = (0..objects.len()).collect();
    // Merge until nothing changes (catalogs are small).
    let mut changed = true;
    while changed {
        changed = false;
        for one in 0..objects.len() {
            for other in (one + 1)..objects.len() {
                let overlap = objects[one]
                    .iter()
                    .any(|object| objects[other].contains(object));
                if overlap && queue[one] != queue[other] {
                    let (keep, drop) = (queue[one].min(queue[other]), queue[one].max(queue[other]));
                    for entry in queue.iter_mut() {
                        if *entry == drop {
                            *entry = keep;
                        }
                    }
                    changed = true;
                }
            }
        }
    }
    queue
}
