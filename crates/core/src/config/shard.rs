//! `shard:`: which clusters this deployment owns when a fleet is split into shards, each with
//! its own writer and Trigger, all on one PostgreSQL database (issue 19). Not hot-reloaded: the
//! writer's state and lease belong to the shard it started as.

use std::time::Duration;

use serde::Deserialize;

use super::{de_duration, Error};
use drift_model::glob::glob_match;

/// Longest shard name (a lease row's key and a metric label).
const MAX_NAME: usize = 63;

/// The `shard:` section. Without it, one shard named `default` owns every cluster.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShardConfig {
    /// The shard's name: its writer lease, its metrics label, and what a refused event names.
    #[serde(default = "default_name")]
    pub name: String,
    /// Globs of the cluster names (the `cluster` extension, or `defaultCluster`) this shard
    /// processes; an event of any other cluster is refused with `421`.
    #[serde(default = "all_clusters")]
    pub clusters: Vec<String>,
    /// How often the writer reads back the silences every shard's API writes to the shared
    /// database (`silenceSyncInterval`, 5 s): a silence created through another shard mutes
    /// this shard's notifications, and withdraws their reminders, within this long.
    #[serde(default = "default_silence_sync", deserialize_with = "de_duration")]
    pub silence_sync_interval: Duration,
    /// True when the file had a `shard:` section.
    #[serde(skip)]
    pub set: bool,
}

fn default_name() -> String {
    "default".to_string()
}

fn all_clusters() -> Vec<String> {
    vec!["*".to_string()]
}

fn default_silence_sync() -> Duration {
    Duration::from_secs(5)
}

/// The bounds of `shard.silenceSyncInterval`: often enough to matter, rarely enough that the
/// read-back (one query of the silences) never loads the database.
const SILENCE_SYNC_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(300));

impl Default for ShardConfig {
    fn default() -> Self {
        ShardConfig {
            name: default_name(),
            clusters: all_clusters(),
            silence_sync_interval: default_silence_sync(),
            set: false,
        }
    }
}

/// Deserializes a `shard:` section written in the file, marking it as set.
pub(super) fn de_set<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<ShardConfig, D::Error> {
    let mut config = ShardConfig::deserialize(deserializer)?;
    config.set = true;
    Ok(config)
}

impl ShardConfig {
    /// True when this shard processes the events of `cluster`.
    pub fn owns(&self, cluster: &str) -> bool {
        self.clusters
            .iter()
            .any(|pattern| glob_match(pattern, cluster))
    }

    /// Checks the section; every error names its key path.
    pub(super) fn validate(&self, postgres: bool) -> Result<(), Error> {
        if self.set && !postgres {
            return Err(Error::invalid(
                "shard",
                "shards share one PostgreSQL database: set store.url (a SQLite store is one pod's and owns every cluster)",
            ));
        }
        let valid = !self.name.is_empty()
            && self.name.len() <= MAX_NAME
            && self.name.bytes().all(|byte| {
                byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"-_.".contains(&byte)
            })
            && self
                .name
                .bytes()
                .next()
                .is_some_and(|byte| byte.is_ascii_alphanumeric());
        if !valid {
            return Err(Error::invalid(
                "shard.name",
                format!(
                    "must be 1 to {MAX_NAME} characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit"
                ),
            ));
        }
        if self.clusters.is_empty() {
            return Err(Error::invalid(
                "shard.clusters",
                "must name at least one cluster glob (\"*\" for every cluster)",
            ));
        }
        for (index, pattern) in self.clusters.iter().enumerate() {
            if pattern.trim().is_empty() {
                return Err(Error::invalid(
                    format!("shard.clusters[{index}]"),
                    "must not be empty",
                ));
            }
            crate::decode::cluster_name::check_glob(pattern).map_err(|error| {
                Error::invalid(format!("shard.clusters[{index}]"), error.to_string())
            })?;
        }
        let (shortest, longest) = SILENCE_SYNC_BOUNDS;
        if self.silence_sync_interval < shortest || self.silence_sync_interval > longest {
            return Err(Error::invalid(
                "shard.silenceSyncInterval",
                "must be between 100ms and 5m",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(name: &str, clusters: &[&str]) -> ShardConfig {
        ShardConfig {
            name: name.to_string(),
            clusters: clusters.iter().map(|glob| glob.to_string()).collect(),
            silence_sync_interval: Duration::from_secs(5),
            set: true,
        }
    }

    #[test]
    fn owns_the_clusters_its_globs_match() {
        let east = shard("east", &["east-*", "lab"]);
        assert!(east.owns("east-1"));
        assert!(east.owns("lab"));
        assert!(!east.owns("west-1"));
        assert!(!east.owns("lab-2"));
        assert!(ShardConfig::default().owns("anything"));
    }

    #[test]
    fn validation_names_the_key() {
        let error = |config: ShardConfig, postgres: bool| {
            config.validate(postgres).unwrap_err().to_string()
        };
        assert!(error(shard("east", &["*"]), false).starts_with("shard:"));
        assert!(error(shard("East", &["*"]), true).starts_with("shard.name:"));
        assert!(error(shard("", &["*"]), true).starts_with("shard.name:"));
        assert!(error(shard("east", &[]), true).starts_with("shard.clusters:"));
        assert!(error(shard("east", &["a", " "]), true).starts_with("shard.clusters[1]:"));
        // Globs follow the cluster-name rules of ingest.
        for glob in ["fleet:*", "east-\u{200b}*", "e\u{430}st-*", "east *"] {
            assert!(
                error(shard("east", &["a", glob]), true).starts_with("shard.clusters[1]:"),
                "{glob:?}"
            );
        }
        for (interval, valid) in [(50, false), (100, true), (300_000, true), (300_001, false)] {
            let mut config = shard("east", &["*"]);
            config.silence_sync_interval = Duration::from_millis(interval);
            match config.validate(true) {
                Ok(()) => assert!(valid, "{interval} ms accepted"),
                Err(error) => {
                    assert!(!valid, "{interval} ms refused");
                    assert!(error.to_string().starts_with("shard.silenceSyncInterval:"));
                }
            }
        }
        assert!(shard("east-1", &["east-*"]).validate(true).is_ok());
        assert!(ShardConfig::default().validate(false).is_ok());
    }
}
