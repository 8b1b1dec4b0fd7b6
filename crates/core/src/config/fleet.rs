//! `fleet:`: groups of clusters that should hold the same desired state for the objects they
//! compare (`fleet.groups`), and their compilation into `classify::fleet::FleetGroup`s, with the
//! key path in every error. Hot-reloaded with `rules:`.

use std::time::Duration;

use serde::Deserialize;

use super::{de_opt_duration, Error};
use crate::classify::fleet::{Compared, FleetGroup};
use drift_model::Severity;

/// Grace of a group that sets none: long enough for a rollout to reach every member.
pub(super) const DEFAULT_FLEET_GRACE: Duration = Duration::from_secs(300);
/// Longest group name (part of a drift's identity, like a rule name).
const MAX_NAME: usize = 63;

/// The `fleet:` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetConfig {
    /// The groups.
    #[serde(default)]
    pub groups: Vec<FleetGroupConfig>,
}

/// One group.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetGroupConfig {
    /// Unique name: lower-case letters, digits, `-`, `_` and `.`.
    pub name: String,
    /// Cluster name globs (the `cluster` extension of their events).
    pub clusters: Vec<String>,
    /// The objects compared.
    pub compare: Vec<ComparedConfig>,
    /// JSON pointers left out of the comparison (each covers what lies below it), e.g.
    /// `/data/logging.enable-probe-request-log`.
    #[serde(default)]
    pub ignore_paths: Vec<String>,
    /// `info`, `warning` (the default) or `critical`.
    #[serde(default)]
    pub severity: Option<String>,
    /// How long the members may differ before the drift fires (default 5m).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub grace: Option<Duration>,
}

/// One `compare` entry: globs, each `*` when left out (`kind` is required).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComparedConfig {
    /// `apiVersion` glob.
    #[serde(default)]
    pub api_version: Option<String>,
    /// Kind glob.
    pub kind: String,
    /// Namespace glob.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name glob.
    #[serde(default)]
    pub name: Option<String>,
}

impl FleetConfig {
    /// Compiles the groups; `path` is where they are (`fleet.groups`). The first error names
    /// the key path.
    pub fn compile(&self, path: &str) -> Result<Vec<FleetGroup>, Error> {
        let mut seen = std::collections::BTreeSet::new();
        let mut groups = Vec::with_capacity(self.groups.len());
        for (index, group) in self.groups.iter().enumerate() {
            let at = format!("{path}[{index}]");
            if !valid_name(&group.name) {
                return Err(Error::invalid(
                    format!("{at}.name"),
                    format!(
                        "must be 1 to {MAX_NAME} characters of a-z, 0-9, '-', '_' and '.', \
                         starting with a letter or digit"
                    ),
                ));
            }
            if !seen.insert(group.name.as_str()) {
                return Err(Error::invalid(
                    format!("{at}.name"),
                    format!("another group is named {:?}", group.name),
                ));
            }
            if group.clusters.is_empty() {
                return Err(Error::invalid(
                    format!("{at}.clusters"),
                    "must name at least one cluster (globs allowed)",
                ));
            }
            for (i, cluster) in group.clusters.iter().enumerate() {
                if cluster.trim().is_empty() {
                    return Err(Error::invalid(
                        format!("{at}.clusters[{i}]"),
                        "must not be empty",
                    ));
                }
                // The rules an event's cluster name must meet (a glob that breaks them could
                // only match names ingest refuses, or fleet drifts' own `fleet:` clusters).
                crate::decode::cluster_name::check_glob(cluster).map_err(|error| {
                    Error::invalid(format!("{at}.clusters[{i}]"), error.to_string())
                })?;
            }
            if group.compare.is_empty() {
                return Err(Error::invalid(
                    format!("{at}.compare"),
                    "must list at least one object to compare",
                ));
            }
            let mut compare = Vec::with_capacity(group.compare.len());
            for (i, entry) in group.compare.iter().enumerate() {
                if entry.kind.trim().is_empty() {
                    return Err(Error::invalid(
                        format!("{at}.compare[{i}].kind"),
                        "must not be empty (use \"*\" for every kind)",
                    ));
                }
                let glob = |value: &Option<String>| value.clone().unwrap_or_else(|| "*".into());
                compare.push(Compared {
                    api_version: glob(&entry.api_version),
                    kind: entry.kind.clone(),
                    namespace: glob(&entry.namespace),
                    name: glob(&entry.name),
                });
            }
            for (i, pointer) in group.ignore_paths.iter().enumerate() {
                if !pointer.starts_with('/') {
                    return Err(Error::invalid(
                        format!("{at}.ignorePaths[{i}]"),
                        format!("{pointer:?} is not a JSON pointer (it starts with '/', e.g. /data/some-key)"),
                    ));
                }
            }
            let severity = match group.severity.as_deref() {
                None => Severity::Warning,
                Some(text) => Severity::parse(text).ok_or_else(|| {
                    Error::invalid(
                        format!("{at}.severity"),
                        format!(
                            "unknown severity {text:?}; use one of {}",
                            drift_model::SEVERITIES.join(", ")
                        ),
                    )
                })?,
            };
            groups.push(FleetGroup {
                name: group.name.clone(),
                clusters: group.clusters.clone(),
                compare,
                ignore_paths: group.ignore_paths.clone(),
                severity,
                grace: group.grace.unwrap_or(DEFAULT_FLEET_GRACE),
            });
        }
        Ok(groups)
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.bytes().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"-_.".contains(&byte)
        })
        && name
            .bytes()
            .next()
            .is_some_and(|first| first.is_ascii_lowercase() || first.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(yaml: &str) -> Result<Vec<FleetGroup>, Error> {
        let config: FleetConfig = serde_saphyr::from_str(yaml).expect("yaml");
        config.compile("fleet.groups")
    }

    const GOOD: &str = "groups:\n  - name: prod\n    clusters: [prod-*, staging]\n    compare:\n      - {apiVersion: v1, kind: ConfigMap, namespace: knative-serving, name: config-*}\n      - {kind: Broker}\n    ignorePaths: [/data/logging.enable-probe-request-log]\n    severity: critical\n    grace: 10m\n";

    #[test]
    fn a_group_compiles_with_defaults_for_what_it_leaves_out() {
        let groups = compile(GOOD).unwrap();
        assert_eq!(groups[0].severity, Severity::Critical);
        assert_eq!(groups[0].grace, Duration::from_secs(600));
        assert_eq!(groups[0].compare[1].api_version, "*");
        assert_eq!(groups[0].compare[1].name, "*");
        let defaults =
            compile("groups:\n  - {name: a, clusters: [x], compare: [{kind: ConfigMap}]}\n")
                .unwrap();
        assert_eq!(defaults[0].severity, Severity::Warning);
        assert_eq!(defaults[0].grace, DEFAULT_FLEET_GRACE);
    }

    #[test]
    fn errors_name_the_key_path() {
        let cases = [
            ("groups:\n  - {name: Prod, clusters: [x], compare: [{kind: ConfigMap}]}\n", "fleet.groups[0].name"),
            ("groups:\n  - {name: a, clusters: [x], compare: [{kind: ConfigMap}]}\n  - {name: a, clusters: [y], compare: [{kind: ConfigMap}]}\n", "fleet.groups[1].name"),
            ("groups:\n  - {name: a, clusters: [], compare: [{kind: ConfigMap}]}\n", "fleet.groups[0].clusters"),
            ("groups:\n  - {name: a, clusters: [x, ''], compare: [{kind: ConfigMap}]}\n", "fleet.groups[0].clusters[1]"),
            ("groups:\n  - {name: a, clusters: [x], compare: []}\n", "fleet.groups[0].compare"),
            ("groups:\n  - {name: a, clusters: [x], compare: [{kind: ConfigMap}, {kind: ''}]}\n", "fleet.groups[0].compare[1].kind"),
            ("groups:\n  - {name: a, clusters: [x], compare: [{kind: ConfigMap}], ignorePaths: [data/x]}\n", "fleet.groups[0].ignorePaths[0]"),
            ("groups:\n  - {name: a, clusters: [x], compare: [{kind: ConfigMap}], severity: loud}\n", "fleet.groups[0].severity"),
        ];
        for (yaml, path) in cases {
            match compile(yaml) {
                Err(Error::Invalid { path: got, .. }) => assert_eq!(got, path, "{yaml}"),
                other => panic!("{yaml}: expected an error at {path}, got {other:?}"),
            }
        }
    }
}
