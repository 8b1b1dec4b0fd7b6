//! `drift-sentinel serve`: the CloudEvents sink, until SIGTERM or SIGINT.

use std::path::PathBuf;
use std::process::ExitCode;

/// `serve` (the default): runs the sink until SIGTERM or SIGINT.
pub fn run(config_path: Option<PathBuf>) -> ExitCode {
    crate::telemetry::init();
    // Both ring and nothing else: pick the provider before any TLS client is built, or rustls
    // panics when it cannot choose.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let loaded = match config_path {
        // The file read once: the config, and what hot reload compares later reads with.
        Some(path) => crate::reload::Watched::load(path.clone())
            .map(|(config, watched)| (config, Some(watched)))
            .map_err(|source| super::LoadConfigError::File { path, source }),
        None => super::load_config(None).map(|config| (config, None)),
    };
    let (config, config_file) = match loaded {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("drift-sentinel: invalid config: {error}");
            tracing::error!(message = "Invalid config.", %error);
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("drift-sentinel: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(crate::app::run(config, config_file)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(
                message = "drift-sentinel stopped with an error.",
                error = format!("{error:#}")
            );
            eprintln!("drift-sentinel: {error:#}");
            ExitCode::FAILURE
        }
    }
}
