//! `drift-sentinel drill --catalog FILE --dry-run` (issue 30, first part): loads a drill catalog
//! (`drift_core::drill`), checks before anything else that every namespace it drills in is
//! labelled `drift-sentinel.dev/drills: "allowed"` (refused otherwise, before any request to a
//! target), reads each target, and prints every request each drill would send: its injection and
//! its restore. It sends nothing. Running drills (injecting, watching the sink's API, restoring,
//! the journal, chaos and the reports) is the next part; until then only `--dry-run` is taken.
//!
//! Exit code 0: every drill planned; 2: a bad catalog, a namespace not allowed, a target that
//! cannot be read, or no `--dry-run`.

use std::path::Path;
use std::process::ExitCode;

/// The drill command's arguments.
pub struct Args<'a> {
    /// The catalog file.
    pub catalog: &'a Path,
    /// The kubeconfig file, if not the default.
    pub kubeconfig: Option<&'a Path>,
    /// The kubeconfig context, if not the current one.
    pub context: Option<&'a str>,
    /// Print the requests only.
    pub dry_run: bool,
}

/// Runs the command (see the module docs).
pub fn run(args: &Args<'_>) -> ExitCode {
    let text = match std::fs::read_to_string(args.catalog) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("{}: {error}", args.catalog.display());
            return ExitCode::from(2);
        }
    };
    let catalog = match drift_core::drill::parse(&text) {
        Ok(catalog) => catalog,
        Err(error) => {
            eprintln!("{}: {error}", args.catalog.display());
            return ExitCode::from(2);
        }
    };
    if !args.dry_run {
        eprintln!(
            "drill: this version takes --dry-run only (it reads each target and prints every \
             request a drill would send); running drills comes next"
        );
        return ExitCode::from(2);
    }
    plan(args, &catalog)
}

#[cfg(feature = "cluster")]
fn plan(args: &Args<'_>, catalog: &drift_core::drill::Catalog) -> ExitCode {
    use crate::cluster::Cluster;
    use drift_core::drill::{plan, ALLOW_LABEL};
    use drift_core::remediate::plan::resource_path;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("drill: {error}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async {
        let cluster = match Cluster::connect(args.kubeconfig, args.context).await {
            Ok(cluster) => cluster,
            Err(error) => {
                eprintln!("drill: {error}");
                return ExitCode::from(2);
            }
        };
        // Every namespace first: a drill in a namespace that does not allow drills refuses the
        // whole run before any target is touched, or even read.
        let namespaces: std::collections::BTreeSet<&str> = catalog
            .drills
            .iter()
            .map(|drill| drill.target.namespace.as_str())
            .collect();
        for namespace in namespaces {
            let path = resource_path("v1", "Namespace", "", Some(namespace));
            let label = match cluster.get_json(&path).await {
                Ok(object) => object
                    .as_ref()
                    .and_then(|object| object.pointer("/metadata/labels"))
                    .and_then(|labels| labels.get(ALLOW_LABEL))
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string),
                Err(error) => {
                    eprintln!("drill: namespace {namespace}: {error}");
                    return ExitCode::from(2);
                }
            };
            if label.as_deref() != Some("allowed") {
                let drills: Vec<&str> = catalog
                    .drills
                    .iter()
                    .filter(|drill| drill.target.namespace == namespace)
                    .map(|drill| drill.name.as_str())
                    .collect();
                eprintln!(
                    "drill: namespace {namespace} is not labelled {ALLOW_LABEL}: \"allowed\"; \
                     refused before any request (drills {})",
                    drills.join(", ")
                );
                return ExitCode::from(2);
            }
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
            // As if injected: the restore then reads the object as it is (here, as read now).
            let after = match &drill.inject {
                drift_core::drill::Inject::Delete => None,
                drift_core::drill::Inject::Create(object) => Some(object.clone()),
                _ => kept.clone(),
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
