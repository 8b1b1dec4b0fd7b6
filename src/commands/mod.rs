//! The commands of the `drift-sentinel` binary: `serve` (the default), `replay`, `check`,
//! `compare`, `invariants test`, `config validate` and `store migrate`. `main.rs` parses the arguments and calls one of these; each returns the
//! process's exit code and prints its own errors.

pub mod check;
pub mod compare;
pub mod invariants;
pub mod replay;
pub mod serve;
pub mod store;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use drift_core::config::Config;

/// Loads the config file, or the all-defaults config (with `${VAR}` from the environment) when
/// no file is given.
pub(crate) fn load_config(path: Option<&PathBuf>) -> Result<Config, String> {
    match path {
        Some(path) => drift_core::config::load_file(path)
            .map_err(|error| format!("{}: {error}", path.display())),
        None => drift_core::config::load_str("", &|name| std::env::var(name).ok())
            .map_err(|error| error.to_string()),
    }
}

/// `config validate FILE`: prints `FILE: ok`, or the error with its key path (exit 2).
pub fn validate(file: &Path) -> ExitCode {
    match drift_core::config::load_file(file) {
        Ok(_) => {
            println!("{}: ok", file.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{}: {error}", file.display());
            ExitCode::from(2)
        }
    }
}
