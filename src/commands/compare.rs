//! `drift-sentinel compare`: snapshots of clusters that should be alike, compared with the
//! service's fleet comparison, in `check`'s formats and exit codes (0 clean, 1 findings at or
//! above `--fail-on`, 2 bad input).

use std::path::PathBuf;
use std::process::ExitCode;

/// Where `compare` reads the clusters.
pub enum Snapshots {
    /// Files or directories (`kubectl get ... -o yaml` of each cluster), each with its cluster
    /// name (`--name`, else the file stem).
    Files(Vec<(String, PathBuf)>),
    /// Each kubeconfig context's cluster, through its API (named after the context).
    Contexts {
        /// The kubeconfig file.
        kubeconfig: Option<PathBuf>,
        /// The contexts.
        contexts: Vec<String>,
    },
}

/// Why the `--live` files cannot be given cluster names.
#[derive(Debug, thiserror::Error)]
pub enum NamesError {
    /// `--name` given, but not once per `--live`.
    #[error(
        "--name is given {names} time(s) for {snapshots} --live snapshot(s); give one per \
         snapshot or none"
    )]
    Count {
        /// How many `--name`.
        names: usize,
        /// How many `--live`.
        snapshots: usize,
    },
    /// A file without a stem to name its cluster after (`-`, standard input).
    #[error("{}: cannot name the cluster after it; give --name", path.display())]
    Unnamed {
        /// The file.
        path: PathBuf,
    },
}

impl NamesError {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            NamesError::Count { .. } => "name_count",
            NamesError::Unnamed { .. } => "unnamed",
        }
    }
}

/// The cluster names of `--live` files: `--name` given in order, else each file's stem.
pub fn names_of(
    paths: Vec<PathBuf>,
    names: &[String],
) -> Result<Vec<(String, PathBuf)>, NamesError> {
    if !names.is_empty() && names.len() != paths.len() {
        return Err(NamesError::Count {
            names: names.len(),
            snapshots: paths.len(),
        });
    }
    paths
        .into_iter()
        .enumerate()
        .map(|(index, path)| {
            let name = match names.get(index) {
                Some(name) => name.clone(),
                None => path
                    .file_stem()
                    .map(|stem| stem.to_string_lossy().to_string())
                    .filter(|stem| !stem.is_empty() && stem != "-")
                    .ok_or_else(|| NamesError::Unnamed { path: path.clone() })?,
            };
            Ok((name, path))
        })
        .collect()
}

/// `compare`. Exit 0: nothing at or above `fail_on`; 1: divergence; 2: bad input.
pub fn run(
    config_path: Option<PathBuf>,
    snapshots: Snapshots,
    format: crate::check::Format,
    fail_on: drift_model::Severity,
) -> ExitCode {
    use std::io::Write;
    let fail = |message: String| {
        eprintln!("drift-sentinel compare: {message}");
        ExitCode::from(2)
    };
    let config = match super::load_config(config_path.as_ref()) {
        Ok(config) => config,
        Err(error) => return fail(error.to_string()),
    };
    let rules = match crate::reload::load_rules(&config) {
        Ok(rules) => rules,
        Err(error) => return fail(error.to_string()),
    };
    let result = match snapshots {
        Snapshots::Files(files) => {
            if files.len() < 2 {
                return fail("give at least two --live snapshots".to_string());
            }
            crate::check::run_compare(&files, &rules, fail_on).map_err(|error| error.to_string())
        }
        Snapshots::Contexts {
            kubeconfig,
            contexts,
        } => (|| {
            if contexts.len() < 2 {
                return Err("give at least two --context with --live-cluster".to_string());
            }
            // Entries of kinds the listed resources do not hold are never read from the
            // clusters: said, so that a group comparing nothing is not taken for alike clusters.
            let listed: Vec<(String, String)> = config
                .resync
                .listed()
                .map(|(_, resource)| (resource.api_version.clone(), resource.kind.clone()))
                .collect();
            let uncovered = crate::check::uncovered_entries(&rules, &listed);
            if !uncovered.is_empty() {
                eprintln!(
                    "drift-sentinel compare: {} fleet compare entr{} not compared: --live-cluster lists only resync.resources ({}): {}",
                    uncovered.len(),
                    if uncovered.len() == 1 { "y" } else { "ies" },
                    listed
                        .iter()
                        .map(|(api_version, kind)| format!("{api_version} {kind}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    uncovered.join(", ")
                );
            }
            let mut loaded = Vec::new();
            for context in contexts {
                let mut nothing = drift_core::manifest::Manifests::default();
                let live = super::check::live_cluster_snapshot(
                    &config,
                    kubeconfig.clone(),
                    Some(context.clone()),
                    None,
                    &mut nothing,
                )
                .map_err(|error| format!("context {context}: {error}"))?;
                loaded.push((context, live));
            }
            crate::check::compare_snapshots(&loaded, &rules, fail_on)
                .map_err(|error| error.to_string())
        })(),
    };
    let report = match result {
        Ok(report) => report,
        Err(error) => return fail(error),
    };
    let output = crate::check::render(&report, format);
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

    #[test]
    fn snapshots_are_named_or_the_error_says_why_not() {
        let paths = || vec![PathBuf::from("dir/east.yaml"), PathBuf::from("-")];
        let error = names_of(paths(), &["east".to_string()]).unwrap_err();
        assert_eq!(error.kind(), "name_count");
        assert_eq!(
            error.to_string(),
            "--name is given 1 time(s) for 2 --live snapshot(s); give one per snapshot or none"
        );
        let error = names_of(paths(), &[]).unwrap_err();
        assert_eq!(error.kind(), "unnamed");
        assert_eq!(
            error.to_string(),
            "-: cannot name the cluster after it; give --name"
        );
        let named = names_of(paths(), &["east".to_string(), "west".to_string()]).unwrap();
        assert_eq!(named[1], ("west".to_string(), PathBuf::from("-")));
        assert_eq!(names_of(paths()[..1].to_vec(), &[]).unwrap()[0].0, "east");
    }
}
