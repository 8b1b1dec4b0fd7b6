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

/// Why the live state could not be read from the cluster (`--live-cluster`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LiveClusterError {
    /// The runtime the client runs on could not start.
    #[cfg(feature = "cluster")]
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// No client, or a listed resource it cannot list.
    #[cfg(feature = "cluster")]
    #[error("{0}")]
    Cluster(#[source] crate::cluster::Error),
    /// Listing failed, or a listed object is not one the check can read.
    #[cfg(feature = "cluster")]
    #[error("{0}")]
    Snapshot(#[source] crate::cluster::SnapshotError),
    /// A build without the Kubernetes client.
    #[cfg(not(feature = "cluster"))]
    #[error("--live-cluster needs a build with the `cluster` feature")]
    NoClusterFeature,
}

impl LiveClusterError {
    /// A stable, bounded label.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the label a count of these failures would use; tested"
        )
    )]
    fn kind(&self) -> &'static str {
        match self {
            #[cfg(feature = "cluster")]
            LiveClusterError::Runtime(_) => "runtime",
            #[cfg(feature = "cluster")]
            LiveClusterError::Cluster(_) => "cluster",
            #[cfg(feature = "cluster")]
            LiveClusterError::Snapshot(_) => "snapshot",
            #[cfg(not(feature = "cluster"))]
            LiveClusterError::NoClusterFeature => "no_cluster_feature",
        }
    }
}

#[cfg(feature = "cluster")]
pub(crate) fn live_cluster_snapshot(
    config: &drift_core::config::Config,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    namespace: Option<&str>,
    desired: &mut drift_core::manifest::Manifests,
) -> Result<drift_core::manifest::Manifests, LiveClusterError> {
    use crate::cluster::{snapshot, Cluster, Resource};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(LiveClusterError::Runtime)?;
    runtime.block_on(async {
        let kubeconfig = kubeconfig.or_else(|| config.resync.kubeconfig.clone());
        let context = context.or_else(|| config.resync.context.clone());
        let cluster = Cluster::connect(kubeconfig.as_deref(), context.as_deref())
            .await
            .map_err(LiveClusterError::Cluster)?;
        let resources = config
            .resync
            .listed()
            .map(|(_, resource)| Resource::new(resource))
            .collect::<Result<Vec<_>, _>>()
            .map_err(LiveClusterError::Cluster)?;
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
            .map_err(LiveClusterError::Snapshot)
    })
}

#[cfg(not(feature = "cluster"))]
pub(crate) fn live_cluster_snapshot(
    _config: &drift_core::config::Config,
    _kubeconfig: Option<PathBuf>,
    _context: Option<String>,
    _namespace: Option<&str>,
    _desired: &mut drift_core::manifest::Manifests,
) -> Result<drift_core::manifest::Manifests, LiveClusterError> {
    Err(LiveClusterError::NoClusterFeature)
}

/// Why the `--invariants` files cannot be added to the config's rules.
#[derive(Debug, thiserror::Error)]
enum RuleFilesError {
    /// A file cannot be read, or is not a file of invariants.
    #[error("{0}")]
    Load(#[source] drift_core::config::Error),
    /// A rule's name is used twice.
    #[error("{file}: invariant {name:?} is already defined in {first}")]
    Duplicate {
        /// The file of the second definition.
        file: String,
        /// The rule's name.
        name: String,
        /// Where the first definition is: a file, or the config's `rules.invariants`.
        first: String,
    },
}

impl RuleFilesError {
    /// A stable, bounded label.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the label a count of these failures would use; tested"
        )
    )]
    fn kind(&self) -> &'static str {
        match self {
            RuleFilesError::Load(_) => "load",
            RuleFilesError::Duplicate { .. } => "duplicate_invariant",
        }
    }
}

/// The config's rules with the invariants of `--invariants` files after its own; a name used
/// twice (in two files, or in a file and the config) is an error naming both places.
fn with_rule_files(
    rules: drift_core::classify::Rules,
    files: &[PathBuf],
) -> Result<drift_core::classify::Rules, RuleFilesError> {
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
        for rule in drift_core::config::load_rules_file(file).map_err(RuleFilesError::Load)? {
            let here = file.display().to_string();
            if let Some(first) = seen.insert(rule.name.clone(), here.clone()) {
                return Err(RuleFilesError::Duplicate {
                    file: here,
                    name: rule.name.clone(),
                    first,
                });
            }
            extra.push(rule);
        }
    }
    Ok(rules.with_invariants(extra))
}

/// `check`: the CI/CD gate. Exit 0: nothing at or above `fail_on`; 1: drift; 2: bad input.
pub fn run(
    config_path: Option<PathBuf>,
    baseline: Option<&std::path::Path>,
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
        Err(error) => return fail(error.to_string()),
    };
    // Only `rules:` matter here; `rules.baselineDir` is the sink's, `--baseline` is the check's.
    let rules = match with_rule_files(config.rules.compile(), invariants) {
        Ok(rules) => std::sync::Arc::new(rules),
        Err(error) => return fail(error.to_string()),
    };
    if baseline.is_none() && rules.invariants().is_empty() {
        // Without either there is nothing to judge the live objects against: an empty report
        // would pass the gate for the wrong reason.
        return fail(
            "nothing to check against: give --baseline, or invariants (--invariants FILE or \
             the config's rules.invariants)"
                .to_string(),
        );
    }
    let result = match live {
        Live::Files(path) => {
            check::run(baseline, &path, rules, fail_on).map_err(|error| error.to_string())
        }
        Live::Cluster {
            kubeconfig,
            context,
            namespace,
        } => (|| {
            let mut desired = match baseline {
                Some(path) => Some(drift_core::manifest::load(path).map_err(|e| e.to_string())?),
                None => None,
            };
            if let (Some(desired), Some(namespace)) = (desired.as_mut(), &namespace) {
                desired.retain_namespace(namespace);
            }
            let live = live_cluster_snapshot(
                &config,
                kubeconfig,
                context,
                namespace.as_deref(),
                desired.as_mut().unwrap_or(&mut Default::default()),
            )
            .map_err(|error| error.to_string())?;
            check::check(desired.as_ref(), &live, rules, fail_on).map_err(|error| error.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: &str = "- name: x\n  expression: \"true\"\n  message: m\n";

    #[test]
    fn rule_files_errors_have_stable_kinds_and_name_both_places() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&first, RULE).unwrap();
        std::fs::write(&second, RULE).unwrap();
        let config = drift_core::config::load_str("", &|_| None).unwrap();
        let rules = || config.rules.compile();
        let error = with_rule_files(rules(), &[first.clone(), second.clone()]).unwrap_err();
        assert_eq!(error.kind(), "duplicate_invariant");
        assert_eq!(
            error.to_string(),
            format!(
                "{}: invariant \"x\" is already defined in {}",
                second.display(),
                first.display()
            )
        );
        let missing = dir.path().join("missing.yaml");
        let error = with_rule_files(rules(), &[missing]).unwrap_err();
        assert_eq!(error.kind(), "load");
        assert!(
            error.to_string().starts_with("cannot read config file "),
            "{error}"
        );
    }

    #[cfg(feature = "cluster")]
    #[test]
    fn live_cluster_errors_have_stable_kinds() {
        let config = drift_core::config::load_str("", &|_| None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let error = live_cluster_snapshot(
            &config,
            Some(dir.path().join("missing-kubeconfig")),
            None,
            None,
            &mut drift_core::manifest::Manifests::default(),
        )
        .unwrap_err();
        assert_eq!(error.kind(), "cluster");
        assert!(
            error
                .to_string()
                .starts_with("cannot configure the Kubernetes client: "),
            "{error}"
        );
        let error = LiveClusterError::Runtime(std::io::Error::other("no threads"));
        assert_eq!(error.kind(), "runtime");
        assert_eq!(error.to_string(), "cannot start the runtime: no threads");
        let gone = crate::cluster::Error::Gone {
            resource: "v1 ConfigMap".to_string(),
            restarts: 3,
        };
        let error = LiveClusterError::Snapshot(gone.into());
        assert_eq!(error.kind(), "snapshot");
        assert!(
            error.to_string().starts_with("listing v1 ConfigMap: "),
            "{error}"
        );
    }

    #[cfg(not(feature = "cluster"))]
    #[test]
    fn live_cluster_needs_the_cluster_feature() {
        let config = drift_core::config::load_str("", &|_| None).unwrap();
        let error = live_cluster_snapshot(
            &config,
            None,
            None,
            None,
            &mut drift_core::manifest::Manifests::default(),
        )
        .unwrap_err();
        assert_eq!(error.kind(), "no_cluster_feature");
        assert_eq!(
            error.to_string(),
            "--live-cluster needs a build with the `cluster` feature"
        );
    }
}
