//! The commands of the `drift-sentinel` binary: `serve` (the default), `replay`, `check`,
//! `compare`, `invariants test`, `admission export`, `config validate`, `store migrate`, `export --last-good` and
//! `drill --dry-run`. `main.rs` parses the arguments and calls one of these; each returns the
//! process's exit code and prints its own errors.

pub mod admission;
pub mod check;
pub mod compare;
pub mod drill;
pub mod export;
pub mod invariants;
pub mod replay;
pub mod serve;
pub mod store;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use drift_core::config::Config;

/// Why a command's config could not be loaded: the config's own error, after the file's path
/// when there is a file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadConfigError {
    /// The config file given.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: drift_core::config::Error,
    },
    /// The all-defaults config (its `${VAR}`s).
    #[error("{0}")]
    Defaults(#[source] drift_core::config::Error),
}

impl LoadConfigError {
    /// A stable, bounded label: the config error's.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the label a count of these failures would use; tested"
        )
    )]
    fn kind(&self) -> &'static str {
        match self {
            LoadConfigError::File { source, .. } | LoadConfigError::Defaults(source) => {
                source.kind()
            }
        }
    }
}

/// Loads the config file, or the all-defaults config (with `${VAR}` from the environment) when
/// no file is given.
pub(crate) fn load_config(path: Option<&PathBuf>) -> Result<Config, LoadConfigError> {
    match path {
        Some(path) => drift_core::config::load_file(path).map_err(|source| LoadConfigError::File {
            path: path.clone(),
            source,
        }),
        None => drift_core::config::load_str("", &|name| std::env::var(name).ok())
            .map_err(LoadConfigError::Defaults),
    }
}

/// `config validate FILE`: prints `FILE: ok`, or the error with its key path (exit 2).
pub fn validate(file: &Path) -> ExitCode {
    match drift_core::config::load_file(file) {
        Ok(config) => match crate::traffic::check_files(&config) {
            // The files the service reads at start, read now, so a pod does not crash-loop
            // on what validated.
            Ok(()) => {
                println!("{}: ok", file.display());
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("{}: {error}", file.display());
                ExitCode::from(2)
            }
        },
        Err(error) => {
            eprintln!("{}: {error}", file.display());
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_that_does_not_load_names_its_file_and_keeps_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "server: [").unwrap();
        let error = load_config(Some(&path)).unwrap_err();
        assert_eq!(error.kind(), "syntax");
        let shown = error.to_string();
        assert!(
            shown.starts_with(&format!("{}: config is not valid YAML: ", path.display())),
            "{shown}"
        );
        let missing = dir.path().join("missing.yaml");
        let error = load_config(Some(&missing)).unwrap_err();
        assert_eq!(error.kind(), "read");
        assert_eq!(
            error.to_string(),
            format!(
                "{}: {}",
                missing.display(),
                drift_core::config::load_file(&missing).unwrap_err()
            )
        );
        let defaults =
            drift_core::config::load_str("store:\n  url: ${NOPE}\n", &|_| None).unwrap_err();
        let error = LoadConfigError::Defaults(defaults);
        assert_eq!(error.kind(), "missing_env");
        assert_eq!(
            error.to_string(),
            "store.url: environment variable NOPE is not set"
        );
    }
}
