//! Hot reload of the config file's `rules:`.
//!
//! Kubernetes updates a mounted ConfigMap by swapping the `..data` symlink in the mount
//! directory, so a watch on the file itself goes blind after the first update. This re-reads the
//! file by its path every second (following the symlink as it is now) and applies it when its
//! content changed. A poll rather than a directory watch (inotify): the store often lives in the
//! same directory as the config (a local run, a volume holding both), and a directory watch makes
//! the kernel queue an event for every write the store makes there, which cost the writer thread
//! about 8 % of its time under load. A second is well within the kubelet's own delay in updating
//! a ConfigMap volume (up to a minute). An invalid edit keeps the rules in force and says why (log
//! line and `drift_sentinel_config_reload_errors_total`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::classify::baseline::Baseline;
use crate::classify::Rules;
use crate::metrics::Metrics;
use crate::pipeline::Pipeline;

/// How often the file is re-read.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Compiles the rules of a config, loading the baseline manifests it names (file I/O).
pub fn load_rules(config: &crate::config::Config) -> Result<Rules, crate::manifest::Error> {
    let rules = config.rules.compile();
    match &config.rules.baseline_dir {
        Some(dir) => match crate::manifest::load(dir) {
            Ok(manifests) => Ok(rules.with_baseline(Baseline::from_manifests(&manifests))),
            // An empty baseline directory is a baseline with nothing in it, not an error.
            Err(crate::manifest::Error::NoFiles { .. }) => Ok(rules),
            Err(error) => Err(error),
        },
        None => Ok(rules),
    }
}

/// Starts the reload thread; it stops when `shutdown` is cancelled.
pub fn spawn(
    path: PathBuf,
    pipeline: Pipeline,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let spawned = std::thread::Builder::new()
        .name("config-reload".to_string())
        .spawn(move || watch(path, pipeline, metrics, shutdown));
    if let Err(error) = spawned {
        tracing::warn!(message = "Config hot reload is off: could not start its thread.", %error);
    }
}

fn digest(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path)
        .ok()
        .map(|bytes| Sha256::digest(&bytes).to_vec())
}

fn watch(path: PathBuf, pipeline: Pipeline, metrics: Arc<Metrics>, shutdown: CancellationToken) {
    let mut last = digest(&path);
    while !shutdown.is_cancelled() {
        std::thread::sleep(POLL_INTERVAL);
        let current = digest(&path);
        if current.is_none() || current == last {
            continue;
        }
        last = current;
        let loaded = crate::config::load_file(&path)
            .map_err(|error| (error.kind(), error.to_string()))
            .and_then(|config| {
                load_rules(&config).map_err(|error| (error.kind(), error.to_string()))
            });
        match loaded {
            Ok(rules) => {
                pipeline.set_rules(Arc::new(rules));
                metrics.config_reloads.inc();
                tracing::info!(message = "Config reloaded; new rules in force.", path = %path.display());
            }
            Err((kind, error)) => {
                metrics.config_reload_errors.inc();
                tracing::error!(
                    message = "Config reload rejected; the previous rules stay in force.",
                    %error,
                    kind,
                    path = %path.display(),
                );
            }
        }
    }
}
