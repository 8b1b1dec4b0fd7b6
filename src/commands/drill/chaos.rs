//! `drill --chaos`: random drills from the catalog at an average rate for a while, from a seeded
//! schedule (`drift_core::drill::chaos`), at most one drill open per object: an arrival whose
//! object is still being drilled waits for it, so a seed always gives the same drills in the
//! same order on each object (only their times can shift).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use drift_core::drill::{chaos, Catalog};

use super::report::Outcome;
use super::runner::Runner;
use super::Chaos;

/// What a chaos run did: the drill runs in schedule order, and how many arrivals a stop left
/// unrun.
pub(crate) async fn run(
    runner: Arc<Runner>,
    catalog: Arc<Catalog>,
    shape: &Chaos,
) -> (Vec<Outcome>, usize) {
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
    // Each object's arrivals, in order, with their place in the schedule and the drill's run
    // number (its k-th arrival).
    let mut per_object: BTreeMap<String, Vec<(usize, usize, usize, Duration)>> = BTreeMap::new();
    let mut runs: BTreeMap<usize, usize> = BTreeMap::new();
    for (order, arrival) in arrivals.iter().enumerate() {
        let target = &catalog.drills[arrival.drill].target;
        let run = runs.entry(arrival.drill).or_default();
        *run += 1;
        per_object
            .entry(super::runner::object_path(target))
            .or_default()
            .push((order, arrival.drill, *run, arrival.at));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (_, queue) in per_object {
        let runner = runner.clone();
        let catalog = catalog.clone();
        tasks.spawn(async move {
            let mut done = Vec::new();
            let mut not_run = 0;
            for (order, drill, run, at) in queue {
                let wait = at.saturating_sub(runner.start.elapsed());
                let stopped = tokio::select! {
                    _ = tokio::time::sleep(wait) => runner.stop.is_cancelled(),
                    _ = runner.stop.cancelled() => true,
                };
                if stopped {
                    not_run += 1;
                    continue;
                }
                let drill = &catalog.drills[drill];
                eprintln!("chaos: {} #{run} on {}", drill.name, drill.target.name);
                done.push((order, runner.run(drill, run).await));
            }
            (done, not_run)
        });
    }
    let mut outcomes = Vec::new();
    let mut not_run = 0;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((done, skipped)) => {
                outcomes.extend(done);
                not_run += skipped;
            }
            // A panic in a drill is a bug; its object's remaining drills are not run.
            Err(error) => eprintln!("chaos: a drill task ended: {error}"),
        }
    }
    outcomes.sort_by_key(|(order, _)| *order);
    (
        outcomes.into_iter().map(|(_, outcome)| outcome).collect(),
        not_run,
    )
}
