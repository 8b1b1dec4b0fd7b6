//! `drift-sentinel drill` (issue 30): runs a catalog of drills (`drift_core::drill`) against a
//! cluster and checks each through the running sink's drift API ([`runner`]); `--chaos` runs
//! random drills from it at a rate for a while ([`chaos`]); `--dry-run` prints every request and
//! sends nothing; `--recover` puts back what a killed run left injected ([`journal`]). Before
//! anything else every namespace drilled in must be labelled `drift-sentinel.dev/drills:
//! "allowed"` (refused otherwise, before any request to a target). A signal (Ctrl-C, SIGTERM)
//! ends the waits and puts back every injected object before the report.
//!
//! Exit code 0: every drill passed (or planned, or recovered); 1: a drill failed (in chaos, also
//! a false alert); 2: bad input (catalog, flags, a namespace not allowed, an unreadable journal).

#[cfg(feature = "cluster")]
mod chaos;
mod journal;
mod report;
#[cfg(feature = "cluster")]
mod restore;
#[cfg(feature = "cluster")]
mod runner;
mod sink;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

pub use report::Format;

/// A chaos run's shape (`--chaos`).
pub struct Chaos {
    /// How long drills start (in-flight ones then finish).
    pub duration: Duration,
    /// Drills per second on average (`--rate 2/m`).
    pub per_second: f64,
    /// The seed (`--seed`; else one is drawn and printed).
    pub seed: u64,
}

/// The drill command's arguments.
pub struct Args<'a> {
    /// The catalog file (none for `--recover`).
    pub catalog: Option<&'a Path>,
    /// Only these drills (`--drill NAME`), if any.
    pub only: &'a [String],
    /// Not these drills (`--skip NAME`).
    pub skip: &'a [String],
    /// The kubeconfig file, if not the default.
    pub kubeconfig: Option<&'a Path>,
    /// The kubeconfig context, if not the current one.
    pub context: Option<&'a str>,
    /// Print the requests only.
    pub dry_run: bool,
    /// The sink's base URL (`http://drift-sentinel.drift-sentinel.svc:8080`).
    pub sink: Option<&'a str>,
    /// The sink's API token.
    pub token: Option<String>,
    /// The sink's name for this cluster (its drifts' `cluster`), if it watches several.
    pub cluster_name: Option<&'a str>,
    /// The journal file.
    pub journal: &'a Path,
    /// Put back what the journal holds, and do nothing else.
    pub recover: bool,
    /// Drop these drills' entries from the journal (`--forget NAME`: a person put the object
    /// back, or keeps the change), and do nothing else.
    pub forget: &'a [String],
    /// A chaos run.
    pub chaos: Option<Chaos>,
    /// How often the sink and objects are polled.
    pub poll: Duration,
    /// How long to wait after the last drill before the false alerts are looked up.
    pub settle: Duration,
    /// The report's format.
    pub format: Format,
}

/// Runs the command (see the module docs).
pub fn run(args: &Args<'_>) -> ExitCode {
    if args.recover {
        return recover(args);
    }
    if !args.forget.is_empty() {
        return forget(args);
    }
    let Some(path) = args.catalog else {
        eprintln!("drill: --catalog FILE is required (only --recover runs without one)");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("{}: {error}", path.display());
            return ExitCode::from(2);
        }
    };
    let mut catalog = match drift_core::drill::parse(&text) {
        Ok(catalog) => catalog,
        Err(error) => {
            eprintln!("{}: {error}", path.display());
            return ExitCode::from(2);
        }
    };
    for (flag, names) in [("--drill", args.only), ("--skip", args.skip)] {
        if let Some(unknown) = names
            .iter()
            .find(|name| !catalog.drills.iter().any(|drill| &drill.name == *name))
        {
            eprintln!("{flag} {unknown:?}: no such drill in {}", path.display());
            return ExitCode::from(2);
        }
    }
    if !args.only.is_empty() {
        catalog
            .drills
            .retain(|drill| args.only.contains(&drill.name));
    }
    catalog
        .drills
        .retain(|drill| !args.skip.contains(&drill.name));
    if catalog.drills.is_empty() {
        eprintln!("drill: no drill left to run (--drill and --skip leave none)");
        return ExitCode::from(2);
    }
    if args.dry_run {
        if let Some(shape) = &args.chaos {
            // The sequence a chaos run with this seed starts (times can shift when a drill
            // waits for its object).
            let arrivals = drift_core::drill::chaos::schedule(
                shape.seed,
                shape.per_second,
                shape.duration,
                catalog.drills.len(),
            );
            println!("# chaos: {} drills, seed {}", arrivals.len(), shape.seed);
            for arrival in &arrivals {
                println!(
                    "at {:.3}s: {}",
                    arrival.at.as_secs_f64(),
                    catalog.drills[arrival.drill].name
                );
            }
            println!();
        }
        return plan(args, &catalog);
    }
    live(args, &catalog)
}

#[cfg(feature = "cluster")]
fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(error) => {
            eprintln!("drill: {error}");
            None
        }
    }
}

/// Every namespace the catalog drills in allows drills (`drift-sentinel.dev/drills:
/// "allowed"`), or the refusal naming the first that does not and its drills: checked before
/// any target is touched, or even read.
#[cfg(feature = "cluster")]
async fn allowed(
    cluster: &crate::cluster::Cluster,
    catalog: &drift_core::drill::Catalog,
) -> Result<(), String> {
    use drift_core::drill::ALLOW_LABEL;
    let namespaces: std::collections::BTreeSet<&str> = catalog
        .drills
        .iter()
        .map(|drill| drill.target.namespace.as_str())
        .collect();
    for namespace in namespaces {
        if !namespace_allows(cluster, namespace).await? {
            let drills: Vec<&str> = catalog
                .drills
                .iter()
                .filter(|drill| drill.target.namespace == namespace)
                .map(|drill| drill.name.as_str())
                .collect();
            return Err(format!(
                "namespace {namespace} is not labelled {ALLOW_LABEL}: \"allowed\"; refused \
                 before any request (drills {})",
                drills.join(", ")
            ));
        }
    }
    Ok(())
}

/// `--forget NAME...`: drops those entries from the journal; the cluster is not read.
fn forget(args: &Args<'_>) -> ExitCode {
    if !args.journal.exists() {
        eprintln!("drill: no journal at {}", args.journal.display());
        return ExitCode::from(2);
    }
    let mut journal = match journal::Journal::open(args.journal) {
        Ok(journal) => journal,
        Err(error) => {
            eprintln!("drill: {error}");
            return ExitCode::from(2);
        }
    };
    for name in args.forget {
        let Some(entry) = journal
            .open_entries()
            .iter()
            .find(|entry| &entry.drill == name)
            .cloned()
        else {
            let held: Vec<&str> = journal
                .open_entries()
                .iter()
                .map(|entry| entry.drill.as_str())
                .collect();
            eprintln!(
                "drill: --forget {name:?}: the journal holds no such drill (it holds: {})",
                held.join(", ")
            );
            return ExitCode::from(2);
        };
        if let Err(error) = journal.remove(&entry) {
            eprintln!("drill: {error}");
            return ExitCode::from(2);
        }
        println!(
            "forgot {name}: {} {}/{} is yours to look after now",
            entry.kind, entry.namespace, entry.name
        );
    }
    ExitCode::SUCCESS
}

/// Whether `namespace` is labelled `drift-sentinel.dev/drills: "allowed"` now.
#[cfg(feature = "cluster")]
pub(crate) async fn namespace_allows(
    cluster: &crate::cluster::Cluster,
    namespace: &str,
) -> Result<bool, String> {
    use drift_core::drill::ALLOW_LABEL;
    use drift_core::remediate::plan::resource_path;
    let path = resource_path("v1", "Namespace", "", Some(namespace));
    let label = cluster
        .get_json(&path)
        .await
        .map_err(|error| format!("namespace {namespace}: {error}"))?
        .as_ref()
        .and_then(|object| object.pointer("/metadata/labels"))
        .and_then(|labels| labels.get(ALLOW_LABEL))
        .and_then(serde_json::Value::as_str)
        .map(str::to_string);
    Ok(label.as_deref() == Some("allowed"))
}

#[cfg(feature = "cluster")]
fn plan(args: &Args<'_>, catalog: &drift_core::drill::Catalog) -> ExitCode {
    use crate::cluster::Cluster;
    use drift_core::drill::plan;
    use drift_core::remediate::plan::resource_path;
    let Some(runtime) = runtime() else {
        return ExitCode::from(2);
    };
    runtime.block_on(async {
        let cluster = match Cluster::connect(args.kubeconfig, args.context).await {
            Ok(cluster) => cluster,
            Err(error) => {
                eprintln!("drill: {error}");
                return ExitCode::from(2);
            }
        };
        if let Err(refusal) = allowed(&cluster, catalog).await {
            eprintln!("drill: {refusal}");
            return ExitCode::from(2);
        }
        for drill in &catalog.drills {
            let target = &drill.target;
            let path = resource_path(
                &target.api_version,
                &target.kind,
                &target.namespace,
                Some(&target.name),
            );
            let kept = match cluster.get_json(&path).await {
                Ok(kept) => kept,
                Err(error) => {
                    eprintln!("drill {}: {error}", drill.name);
                    return ExitCode::from(2);
                }
            };
            let creates = matches!(drill.inject, drift_core::drill::Inject::Create(_));
            if kept.is_none() != creates {
                eprintln!(
                    "drill {}: {} {}/{} {}",
                    drill.name,
                    target.kind,
                    target.namespace,
                    target.name,
                    if creates {
                        "exists already: a create drill needs it absent"
                    } else {
                        "does not exist"
                    }
                );
                return ExitCode::from(2);
            }
            let inject = plan::injection(target, &drill.inject, kept.as_ref());
            // As if injected (worked out here: the restore then reads the object as the
            // injection left it, which a real run reads from the API server).
            let after = match &drill.inject {
                drift_core::drill::Inject::Delete => None,
                drift_core::drill::Inject::Create(object) => Some(object.clone()),
                inject => kept
                    .as_ref()
                    .and_then(|kept| plan::injected_locally(inject, kept)),
            };
            let restore = plan::restore(target, &drill.inject, kept.as_ref(), after.as_ref());
            println!("# drill {}: expect {}", drill.name, expectation(drill));
            print_request("inject", &inject);
            match (&drill.then, restore) {
                (drift_core::drill::Then::Keep, _) => println!("restore: none (then: keep)"),
                (drift_core::drill::Then::ExpectRepaired(within), _) => println!(
                    "restore: none unless it is not repaired within {}s (then: expectRepaired)",
                    within.as_secs()
                ),
                (drift_core::drill::Then::Restore, Some(request)) => {
                    print_request("restore", &request)
                }
                (drift_core::drill::Then::Restore, None) => {
                    println!("restore: nothing to put back")
                }
            }
            println!();
        }
        ExitCode::SUCCESS
    })
}

#[cfg(not(feature = "cluster"))]
fn plan(_args: &Args<'_>, _catalog: &drift_core::drill::Catalog) -> ExitCode {
    eprintln!("drill: this build has no Kubernetes client (feature cluster)");
    ExitCode::from(2)
}

#[cfg(not(feature = "cluster"))]
fn live(_args: &Args<'_>, _catalog: &drift_core::drill::Catalog) -> ExitCode {
    eprintln!("drill: this build has no Kubernetes client (feature cluster)");
    ExitCode::from(2)
}

#[cfg(not(feature = "cluster"))]
fn recover(_args: &Args<'_>) -> ExitCode {
    eprintln!("drill: this build has no Kubernetes client (feature cluster)");
    ExitCode::from(2)
}

#[cfg(feature = "cluster")]
mod live;
#[cfg(feature = "cluster")]
use live::{live, recover_only as recover};

#[cfg(feature = "cluster")]
fn expectation(drill: &drift_core::drill::Drill) -> String {
    let expect = &drill.expect;
    let what = match &expect.rule {
        Some(rule) => format!("invariant {rule}"),
        None => expect.class.clone(),
    };
    format!("{what} within {}s", expect.within.as_secs())
}

#[cfg(feature = "cluster")]
fn print_request(what: &str, request: &drift_core::remediate::Request) {
    println!(
        "{what}: {} {} ({})\n{}",
        request.method, request.path, request.content_type, request.body
    );
}
