//! Hot reload of the config file's `rules:` and `fleet:`.
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
//!
//! Only `rules:` and `fleet:` (the fleet groups, compiled into the same rules) are applied. The
//! other sections (`channels:`, `routes:`, `server:`, `store:`,
//! `api:`, `auth:`, `resync:`, ...) were wired into the running service at start; an edit to
//! one of them is compared with what is in force and, while it differs, every reload says so
//! (a warning naming the sections, and `drift_sentinel_config_restart_required_total`), so an
//! operator who edited a channel knows to restart rather than wonder why nothing changed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::pipeline::Pipeline;
use drift_core::classify::baseline::Baseline;
use drift_core::classify::Rules;
use drift_model::time::Clock;
use drift_model::Millis;

/// The sections hot reload applies.
const RELOADED_SECTIONS: &[&str] = &["rules", "fleet"];

/// How often the file is re-read.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Compiles the rules of a config, loading the baseline manifests it names (file I/O).
pub fn load_rules(
    config: &drift_core::config::Config,
) -> Result<Rules, drift_core::manifest::Error> {
    // The groups compiled when the config was loaded (`config::load_str` validates them), so
    // this compiles them again without an error to meet.
    let fleet = config.fleet.compile("fleet.groups").unwrap_or_default();
    let rules = config
        .rules
        .compile()
        .with_fleet(fleet)
        .with_remediation(config.remediation.mode != drift_core::config::ModeConfig::Off);
    match &config.rules.baseline_dir {
        Some(dir) => match drift_core::manifest::load(dir) {
            Ok(manifests) => Ok(rules.with_baseline(Baseline::from_manifests(&manifests))),
            // An empty baseline directory is a baseline with nothing in it, not an error.
            Err(drift_core::manifest::Error::NoFiles { .. }) => Ok(rules),
            Err(error) => Err(error),
        },
        None => Ok(rules),
    }
}

/// The top-level sections, other than `rules:` and `fleet:`, whose content differs between `in_force` and
/// `edited` (added, removed or changed), in the file's key order.
pub(crate) fn restart_sections(
    in_force: &serde_json::Map<String, serde_json::Value>,
    edited: &serde_json::Map<String, serde_json::Value>,
) -> Vec<String> {
    let mut names: Vec<&String> = in_force.keys().chain(edited.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|name| {
            !RELOADED_SECTIONS.contains(&name.as_str()) && in_force.get(*name) != edited.get(*name)
        })
        .cloned()
        .collect()
}

/// Logs each configured silence whose `expiresAt` has passed: it is accepted (refusing it would
/// make a config that loaded yesterday fail after a restart today) but matches nothing.
pub(crate) fn warn_expired_silences(config: &drift_core::config::Config, now: Millis) {
    for (index, silence) in config.rules.silences.iter().enumerate() {
        let Some(expires) = &silence.expires_at else {
            continue;
        };
        if drift_model::time::parse_time(expires).is_some_and(|at| at <= now) {
            tracing::warn!(
                message = "A configured silence has expired and matches nothing; remove it.",
                silence = format!("rules.silences[{index}]"),
                expires_at = %expires,
            );
        }
    }
}

/// The config file as the service started with it: what hot reload compares every later read
/// with. Made from the very text the config was loaded from ([`Watched::load`]), not from the
/// file as it is when the reload thread starts (with the writer role, which can be long after:
/// a large store loading, a standby waiting for its lease, a role started again after a lost
/// lease, which starts from the config loaded at start): an edit made meanwhile is a change.
#[derive(Clone, Debug)]
pub struct Watched {
    path: PathBuf,
    digest: Option<Vec<u8>>,
    /// The sections outside `rules:` in force.
    in_force: serde_json::Map<String, serde_json::Value>,
}

impl Watched {
    /// Loads the config at `path` and keeps what hot reload compares with, from the same read
    /// of the file.
    pub fn load(
        path: PathBuf,
    ) -> Result<(drift_core::config::Config, Watched), drift_core::config::Error> {
        let (config, text) = drift_core::config::load_file_text(&path)?;
        let watched = Watched {
            digest: Some(Sha256::digest(text.as_bytes()).to_vec()),
            in_force: drift_core::config::sections(&text).unwrap_or_default(),
            path,
        };
        Ok((config, watched))
    }
}

/// Starts the reload thread; it stops when `shutdown` is cancelled.
pub fn spawn(
    watched: Watched,
    pipeline: Pipeline,
    metrics: Arc<Metrics>,
    clock: Clock,
    shutdown: CancellationToken,
) {
    let spawned = std::thread::Builder::new()
        .name("config-reload".to_string())
        .spawn(move || watch(watched, pipeline, metrics, clock, shutdown));
    if let Err(error) = spawned {
        tracing::warn!(message = "Config hot reload is off: could not start its thread.", %error);
    }
}

fn digest(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path)
        .ok()
        .map(|bytes| Sha256::digest(&bytes).to_vec())
}

fn watch(
    watched: Watched,
    pipeline: Pipeline,
    metrics: Arc<Metrics>,
    clock: Clock,
    shutdown: CancellationToken,
) {
    // The file as the service started with it, not as it is when this thread starts (the
    // writer role can start long after the config was loaded).
    let Watched {
        path,
        digest: mut last,
        in_force,
    } = watched;
    while !shutdown.is_cancelled() {
        std::thread::sleep(POLL_INTERVAL);
        let current = digest(&path);
        if current.is_none() || current == last {
            continue;
        }
        last = current;
        // One read: the rules applied and the sections compared come from the same text.
        let loaded = std::fs::read_to_string(&path)
            .map_err(|source| drift_core::config::Error::Read {
                path: path.clone(),
                source,
            })
            .and_then(|text| {
                let config = drift_core::config::load_str(&text, &|name| std::env::var(name).ok())?;
                Ok((config, drift_core::config::sections(&text)?))
            })
            .map_err(|error| (error.kind(), error.to_string()))
            .and_then(|(config, sections)| {
                let rules =
                    load_rules(&config).map_err(|error| (error.kind(), error.to_string()))?;
                Ok((config, sections, rules))
            });
        match loaded {
            Ok((config, sections, rules)) => {
                pipeline.set_rules(Arc::new(rules));
                metrics.config_reloads.inc();
                tracing::info!(message = "Config reloaded; new rules in force.", path = %path.display());
                warn_expired_silences(&config, clock());
                let pending = restart_sections(&in_force, &sections);
                if !pending.is_empty() {
                    metrics.config_restart_required.inc();
                    tracing::warn!(
                        message = "Config sections other than rules: changed; they need a restart to take effect.",
                        sections = %pending.join(", "),
                        path = %path.display(),
                    );
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(text: &str) -> serde_json::Map<String, serde_json::Value> {
        drift_core::config::sections(text).unwrap()
    }

    /// What is in force is the file as the config was loaded from it: an edit made after that
    /// (while the store loads, while a standby waits for its lease) differs from it, so the
    /// watcher's first poll applies the edit instead of taking it for what is in force.
    #[test]
    fn the_file_in_force_is_the_one_read_at_start_not_when_the_watcher_starts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        let started = "channels:\n  - {name: log, type: log}\nrules: {}\n";
        std::fs::write(&path, started).unwrap();
        let (_, watched) = Watched::load(path.clone()).unwrap();
        std::fs::write(&path, started.replace("rules: {}", "rules: {classes: {}}")).unwrap();
        assert!(watched.digest.is_some());
        assert_ne!(
            watched.digest,
            digest(&path),
            "the edit is a change to the watcher"
        );
        assert_eq!(watched.in_force, sections(started));
        // Unchanged, it is no change.
        std::fs::write(&path, started).unwrap();
        assert_eq!(watched.digest, digest(&path));
    }

    #[test]
    fn only_sections_other_than_rules_need_a_restart() {
        let in_force = sections(
            "server:\n  port: 8080\nchannels:\n  - {name: log, type: log}\nrules:\n  classes: {}\n",
        );
        let cases = [
            ("server:\n  port: 8080\nchannels:\n  - {name: log, type: log}\nrules:\n  classes: {a: 1}\n", vec![]),
            ("server:\n  port: 9090\nchannels:\n  - {name: log, type: log}\n", vec!["server"]),
            ("server:\n  port: 8080\nchannels: []\npublicUrl: https://x\n", vec!["channels", "publicUrl"]),
            ("channels:\n  - {name: log, type: log}\n", vec!["server"]),
            // The fleet groups are reloaded with the rules.
            ("server:\n  port: 8080\nchannels:\n  - {name: log, type: log}\nfleet:\n  groups: []\n", vec![]),
            // Comments, key order and layout are not changes.
            ("# edited\nchannels: [{type: log, name: log}]\nserver: {port: 8080}\n", vec![]),
        ];
        for (edited, expected) in cases {
            assert_eq!(
                restart_sections(&in_force, &sections(edited)),
                expected,
                "{edited}"
            );
        }
    }
}
