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
    let workers = match worker_threads(std::env::var_os(WORKER_THREADS)) {
        Ok(workers) => workers,
        Err(error) => {
            eprintln!("drift-sentinel: invalid environment: {error}");
            tracing::error!(message = "Invalid environment.", %error);
            return ExitCode::from(2);
        }
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(count) = workers {
        builder.worker_threads(count);
    }
    let runtime = match builder.enable_all().build() {
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

/// The variable tokio reads for its worker count (README, "Operations").
const WORKER_THREADS: &str = "TOKIO_WORKER_THREADS";

/// Most HTTP worker threads a value may ask for: far more than a pod has cores. tokio starts
/// every worker asked for (beside its blocking pool of up to 512), and panics when the system
/// refuses a thread, so a count past any use is refused here instead.
const MAX_WORKER_THREADS: usize = 256;

/// The worker count `TOKIO_WORKER_THREADS` asks for (`None` when unset: tokio's default, one
/// per core). Read here, not left to tokio, whose own reading panics on a value that is not a
/// positive whole number; here it is a clear error instead.
fn worker_threads(value: Option<std::ffi::OsString>) -> Result<Option<usize>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.to_str().map(str::parse::<usize>) {
        Some(Ok(count)) if (1..=MAX_WORKER_THREADS).contains(&count) => Ok(Some(count)),
        _ => Err(format!(
            "{WORKER_THREADS}={value:?} is not a whole number from 1 to {MAX_WORKER_THREADS} \
             (the HTTP worker threads; unset, one per core)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_count_is_a_whole_number_from_one_to_the_bound_or_unset() {
        let read = |text: &str| worker_threads(Some(text.into()));
        assert_eq!(worker_threads(None), Ok(None));
        assert_eq!(read("1"), Ok(Some(1)));
        assert_eq!(read("4"), Ok(Some(4)));
        assert_eq!(read("256"), Ok(Some(256)));
        for bad in [
            "0",
            "",
            " 2",
            "two",
            "-1",
            "1.5",
            "257",
            "99999999999999999999999",
        ] {
            let error = read(bad).unwrap_err();
            assert!(
                error.starts_with("TOKIO_WORKER_THREADS="),
                "{bad:?}: {error}"
            );
            assert!(error.contains("from 1 to 256"), "{bad:?}: {error}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt;
            let not_utf8 = std::ffi::OsString::from_vec(vec![0x32, 0xff]);
            assert!(worker_threads(Some(not_utf8)).is_err());
        }
    }
}
