//! `drift-sentinel check`: a live snapshot (files or the cluster) against desired manifests.

use std::path::PathBuf;
use std::process::ExitCode;

/// Where `check` reads the live objects.
pub enum Live {
    /// Files, a directory, or `-` for standard input.
    Files(PathBuf),
    /// The cluster, through its API.
    Cluster {
        /// The kubeconfig file.
        kubeconfig: Option<PathBuf>,
        /// The kubeconfig context.
        context: Option<String>,
        /// One namespace only.
        namespace: Option<String>,
    },
}

#[cfg(feature = "cluster")]
pub(crate) fn live_cluster_snapshot(
    config: &drift_core::config::Config,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    namespace: Option<&str>,
    desired: &mut drift_core::manifest::Manifests,
) -> Result<drift_core::manifest::Manifests, String> {
    use crate::cluster::{snapshot, Cluster, Resource};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the runtime: {error}"))?;
    runtime.block_on(async {
        let kubeconfig = kubeconfig.or_else(|| config.resync.kubeconfig.clone());
        let context = context.or_else(|| config.resync.context.clone());
        let cluster = Cluster::connect(kubeconfig.as_deref(), context.as_deref())
            .await
            .map_err(|error| error.to_string())?;
        let resources = config
            .resync
            .listed()
            .map(|(_, resource)| Resource::new(resource))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| error.to_string())?;
        // Desired objects of kinds (or labels) the listed resources do not cover cannot be
        // compared with the cluster: leaving them in would report them missing.
        let skipped = desired.retain(|document| {
            resources
                .iter()
                .any(|resource| resource.covers(document))
        });
        if !skipped.is_empty() {
            eprintln!(
                "drift-sentinel check: {} desired object(s) not checked: --live-cluster lists only resync.resources ({}): {}",
                skipped.len(),
                resources
                    .iter()
                    .map(Resource::name)
                    .collect::<Vec<_>>()
                    .join(", "),
                skipped.join(", ")
            );
        }
        snapshot(&cluster, &resources, namespace, config.resync.page_size)
            .await
            .map_err(|error| error.to_string())
    })
}

#[cfg(not(feature = "cluster"))]
pub(crate) fn live_cluster_snapshot(
    _config: &drift_core::config::Config,
    _kubeconfig: Option<PathBuf>,
    _context: Option<String>,
    _namespace: Option<&str>,
    _desired: &mut drift_core::manifest::Manifests,
) -> Result<drift_core::manifest::Manifests, String> {
    Err("--live-cluster needs a build with the `cluster` feature".to_string())
}

/// The config's rules with the invariants of `--invariants` files after its own; a name used
/// twice (in two files, or in a file and the config) is an error naming both places.
fn with_rule_files(
    rules: drift_core::classify::Rules,
    files: &[PathBuf],
) -> Result<drift_core::classify::Rules, String> {
    let mut seen: std::collections::BTreeMap<String, String> = rules
        .invariants()
        .iter()
        .map(|rule| {
            (
                rule.name.clone(),
                "the config's rules.invariants".to_string(),
            )
        })
        .collect();
    let mut extra = Vec::new();
    for file in files {
        for rule in drift_core::config::load_rules_file(file).map_err(|e| e.to_string())? {
            let here = file.display().to_string();
            if let Some(first) = seen.insert(rule.name.clone(), here.clone()) {
                return Err(format!(
                    "{here}: invariant {:?} is already defined in {first}",
                    rule.name
                ));
            }
            extra.push(rule);
        }
    }
    Ok(rules.with_invariants(extra))
}

/// `check`: the CI/CD gate. Exit 0: nothing at or above `fail_on`; 1: drift; 2: bad input.
pub fn run(
    config_path: Option<PathBuf>,
    baseline: &std::path::Path,
    live: Live,
    format: crate::check::Format,
    fail_on: drift_model::Severity,
    invariants: &[PathBuf],
) -> ExitCode {
    use crate::check;
    use std::io::Write;
    let fail = |message: String| {
        eprintln!("drift-sentinel check: {message}");
        ExitCode::from(2)
    };
    let config = match super::load_config(config_path.as_ref()) {
        Ok(config) => config,
        Err(message) => return fail(message),
    };
    // Only `rules:` matter here; `rules.baselineDir` is the sink's, `--baseline` is the check's.
    let rules = match with_rule_files(config.rules.compile(), invariants) {
        Ok(rules) => std::sync::Arc::new(rules),
        Err(message) => return fail(message),
    };
    let result = match live {
        Live::Files(path) => {
            check::run(baseline, &path, rules, fail_on).map_err(|error| error.to_string())
        }
        Live::Cluster {
            kubeconfig,
            context,
            namespace,
        } => (|| {
            let mut desired =
                drift_core::manifest::load(baseline).map_err(|error| error.to_string())?;
            if let Some(namespace) = &namespace {
                desired.retain_namespace(namespace);
            }
            let live = live_cluster_snapshot(
                &config,
                kubeconfig,
                context,
                namespace.as_deref(),
                &mut desired,
            )?;
            check::check(&desired, &live, rules, fail_on).map_err(|error| error.to_string())
        })(),
    };
    let report = match result {
        Ok(report) => report,
        Err(error) => return fail(error),
    };
    let output = check::render(&report, format);
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout
        .write_all(output.as_bytes())
        .and_then(|()| stdout.flush())
    {
        return fail(format!("cannot write the report: {error}"));
    }
    if report.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
