//! Running drills for real: the journal checked (or recovered), the sink and the cluster
//! reached, the namespaces allowed, a signal watched, then the drills (one after another, or as
//! chaos), the false alerts looked up and the report printed.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use drift_core::drill::Catalog;

use super::journal::Journal;
use super::report::{self, End, Report};
use super::runner::{Runner, CLOCK_SLACK};
use super::sink::Sink;
use super::{allowed, runtime, Args};
use crate::cluster::Cluster;

/// How far a drift's start may be from a drill's window and still be the drill's (the two
/// clocks, the sink's processing).
const WINDOW_SLACK: std::time::Duration = std::time::Duration::from_secs(10);

/// The journal and the cluster, or the exit code after saying why not.
async fn open(args: &Args<'_>) -> Result<(Journal, Cluster), ExitCode> {
    let journal = Journal::open(args.journal).map_err(|error| {
        eprintln!("drill: {error}");
        ExitCode::from(2)
    })?;
    let cluster = Cluster::connect_for_writes(args.kubeconfig, args.context)
        .await
        .map_err(|error| {
            eprintln!("drill: {error}");
            ExitCode::from(2)
        })?;
    Ok((journal, cluster))
}

/// `drill --recover`: puts back what the journal holds, and nothing else (no catalog needed).
pub(super) fn recover_only(args: &Args<'_>) -> ExitCode {
    // A path mistyped must not read as "nothing to put back".
    if !args.journal.exists() {
        eprintln!("drill: no journal at {}", args.journal.display());
        return ExitCode::from(2);
    }
    let Some(runtime) = runtime() else {
        return ExitCode::from(2);
    };
    runtime.block_on(async {
        match open(args).await {
            Ok((journal, cluster)) => recover(&cluster, journal).await,
            Err(code) => code,
        }
    })
}

pub(super) fn live(args: &Args<'_>, catalog: &Catalog) -> ExitCode {
    let Some(runtime) = runtime() else {
        return ExitCode::from(2);
    };
    runtime.block_on(async {
        let (journal, cluster) = match open(args).await {
            Ok(opened) => opened,
            Err(code) => return code,
        };
        if !journal.open_entries().is_empty() {
            let names: Vec<&str> = journal
                .open_entries()
                .iter()
                .map(|entry| entry.drill.as_str())
                .collect();
            eprintln!(
                "drill: {} holds {} drill(s) a run did not put back ({}): run `drift-sentinel \
                 drill --recover --journal {}` first (with this run's --kubeconfig/--context)",
                args.journal.display(),
                names.len(),
                names.join(", "),
                args.journal.display()
            );
            return ExitCode::from(2);
        }
        let Some(base) = args.sink else {
            eprintln!(
                "drill: --sink URL is required (the running sink's API, where drills look for \
                 their drifts); --dry-run prints the requests without it"
            );
            return ExitCode::from(2);
        };
        let sink = match Sink::new(base, args.token.clone(), args.cluster_name) {
            Ok(sink) => sink,
            Err(error) => {
                eprintln!("drill: {error}");
                return ExitCode::from(2);
            }
        };
        if let Err(refusal) = allowed(&cluster, catalog).await {
            eprintln!("drill: {refusal}");
            return ExitCode::from(2);
        }
        // One question before any drill: a wrong --sink or token is one message, not a
        // failure per drill.
        if let Err(error) = sink.reachable().await {
            eprintln!("drill: {error}");
            return ExitCode::from(2);
        }
        let stop = CancellationToken::new();
        tokio::spawn(watch_signals(stop.clone()));
        let clock = drift_model::time::system_clock();
        let started = clock();
        let runner = Arc::new(Runner {
            cluster,
            sink,
            journal: Mutex::new(journal),
            poll: args.poll,
            stop: stop.clone(),
            start: Instant::now(),
            cluster_name: args.cluster_name.map(str::to_string),
            clock,
        });
        let mut broken = false;
        let (outcomes, not_run) = match &args.chaos {
            Some(shape) => {
                let ran = super::chaos::run(runner.clone(), Arc::new(catalog.clone()), shape).await;
                broken = ran.broken;
                (ran.outcomes, ran.not_run)
            }
            None => {
                let mut outcomes = Vec::new();
                let mut not_run = 0;
                for drill in &catalog.drills {
                    if stop.is_cancelled() {
                        not_run += 1;
                        continue;
                    }
                    eprintln!("drill: {} on {}", drill.name, drill.target.name);
                    outcomes.push(runner.run(drill, 0).await);
                }
                (outcomes, not_run)
            }
        };
        // A drift a drill did not cause may still be in its grace: it gets `--settle` to fire
        // before the false alerts are looked up.
        if !args.settle.is_zero() && !stop.is_cancelled() {
            eprintln!(
                "drill: waiting {}s for drifts still in their grace (--settle)",
                args.settle.as_secs()
            );
            tokio::select! {
                _ = tokio::time::sleep(args.settle) => {}
                _ = stop.cancelled() => {}
            }
        }
        // Drifts that fired in the drill namespaces while the run went on, which no drill
        // explains.
        let mut namespaces: Vec<&str> = catalog
            .drills
            .iter()
            .map(|drill| drill.target.namespace.as_str())
            .collect();
        namespaces.sort_unstable();
        namespaces.dedup();
        let since =
            drift_model::time::format_time(started - drift_model::time::millis(CLOCK_SLACK));
        let mut fired = Vec::new();
        let mut lookup_failed = None;
        for namespace in namespaces {
            match runner.sink.drifts(namespace, Some(&since), None).await {
                Ok(seen) => fired.extend(seen),
                Err(error) => lookup_failed = Some(error),
            }
        }
        let false_alerts = report::false_alerts(&fired, &outcomes, started, WINDOW_SLACK);
        let report = Report {
            mode: if args.chaos.is_some() {
                "chaos"
            } else {
                "drills"
            },
            seed: args.chaos.as_ref().map(|shape| shape.seed),
            outcomes: &outcomes,
            false_alerts: match lookup_failed {
                None => Ok(&false_alerts),
                Some(error) => Err(error),
            },
            not_run,
            interrupted: stop.is_cancelled() || broken,
        };
        print!("{}", report::render(&report, args.format));
        if report.passed() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    })
}

/// Cancels `stop` at Ctrl-C or SIGTERM; the run then puts back what it injected and reports.
async fn watch_signals(stop: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    eprintln!(
        "drill: stopping: putting back what was injected (a SIGKILL now leaves it to \
         `drift-sentinel drill --recover`)"
    );
    stop.cancel();
}

/// Puts back every drill the journal holds; 0 when all were put back (or needed nothing).
async fn recover(cluster: &Cluster, mut journal: Journal) -> ExitCode {
    let entries = journal.open_entries().to_vec();
    if entries.is_empty() {
        println!("recover: the journal holds nothing to put back");
        return ExitCode::SUCCESS;
    }
    let mut all = true;
    for entry in entries {
        let target = entry.target();
        let object = format!("{} {}/{}", target.kind, target.namespace, target.name);
        // Only the cluster it was injected in, and only while its namespace allows drills.
        if entry.server != cluster.server {
            println!(
                "recover {}: {object} was drilled through {}, and this run reaches {} ({}): use \
                 that run's --kubeconfig/--context",
                entry.drill, entry.server, cluster.server, cluster.description
            );
            all = false;
            continue;
        }
        match super::namespace_allows(cluster, &target.namespace).await {
            Ok(true) => {}
            Ok(false) => {
                println!(
                    "recover {}: namespace {} no longer allows drills: put {object} back by hand \
                     (the journal keeps what was kept), then `drift-sentinel drill --forget {}`",
                    entry.drill, target.namespace, entry.drill
                );
                all = false;
                continue;
            }
            Err(error) => {
                println!("recover {}: {error}", entry.drill);
                all = false;
                continue;
            }
        }
        let inject = match entry.injection() {
            Ok(inject) => inject,
            Err(error) => {
                println!("recover {}: {error}", entry.drill);
                all = false;
                continue;
            }
        };
        let end = super::restore::restore(
            cluster,
            &target,
            &inject,
            entry.kept.as_ref(),
            entry.injected.as_ref(),
        )
        .await;
        match end {
            End::NotRestored(by_hand) => {
                // Kept in the journal: a later --recover tries again.
                println!("recover {}: {object} NOT put back: {by_hand}", entry.drill);
                all = false;
                continue;
            }
            End::Restored => println!("recover {}: {object} put back", entry.drill),
            End::Repaired | End::Kept | End::NotInjected => {}
            _ => println!(
                "recover {}: {object} was already as kept (nothing to put back)",
                entry.drill
            ),
        }
        if let Err(error) = journal.remove(&entry) {
            println!("recover {}: the journal: {error}", entry.drill);
            all = false;
        }
    }
    if all {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
