//! Rules compiled from the `rules:` config: per-class settings merged over each class's own
//! defaults, the trusted field managers, scope, ignore paths and silences. Pure data; hot reload
//! swaps a new `Arc<Rules>` into the engine.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::classes;
use super::state::ObjectState;
use crate::classify::evidence::baseline::Baseline;
use crate::config::{RulesConfig, SilenceConfig};
use crate::model::{glob_match, Drift, Millis, Severity, Silence};

/// Effective settings of one class.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassSettings {
    /// Whether it runs.
    pub enabled: bool,
    /// Severity when the class does not choose one per finding.
    pub severity: Severity,
    /// Grace before firing.
    pub grace: Duration,
    /// `traffic_drift` tolerance in percent points.
    pub tolerance_percent: f64,
    /// `revision_pileup` threshold.
    pub threshold: u64,
}

/// The compiled rules.
#[derive(Debug, Clone)]
pub struct Rules {
    classes: BTreeMap<&'static str, ClassSettings>,
    disabled: ClassSettings,
    trusted_managers: BTreeSet<String>,
    namespaces: Vec<String>,
    exclude_namespaces: Vec<String>,
    kinds: BTreeSet<String>,
    match_labels: BTreeMap<String, String>,
    ignore_paths: BTreeMap<String, Vec<String>>,
    watched_config_maps: Vec<String>,
    silences: Vec<Silence>,
    baseline: Arc<Baseline>,
}

impl Default for Rules {
    fn default() -> Self {
        Rules::compile(&RulesConfig::default())
    }
}

impl Rules {
    /// Compiles validated config into rules.
    pub fn compile(config: &RulesConfig) -> Rules {
        let mut compiled = BTreeMap::new();
        for class in classes::REGISTRY {
            let defaults = class.defaults();
            let rule = config.classes.get(class.id()).cloned().unwrap_or_default();
            let grace = rule
                .grace
                .or(config
                    .defaults
                    .grace
                    .filter(|_| defaults.grace_follows_default))
                .unwrap_or(defaults.grace);
            compiled.insert(
                class.id(),
                ClassSettings {
                    enabled: rule.enabled.unwrap_or(defaults.enabled),
                    severity: rule
                        .severity
                        .as_deref()
                        .and_then(Severity::parse)
                        .unwrap_or(defaults.severity),
                    grace,
                    tolerance_percent: rule.tolerance_percent.unwrap_or(1.0),
                    threshold: rule.threshold.unwrap_or(50),
                },
            );
        }
        Rules {
            classes: compiled,
            disabled: ClassSettings {
                enabled: false,
                severity: Severity::Info,
                grace: Duration::ZERO,
                tolerance_percent: 0.0,
                threshold: u64::MAX,
            },
            trusted_managers: config.trusted_managers.iter().cloned().collect(),
            namespaces: config.scope.namespaces.clone(),
            exclude_namespaces: config.scope.exclude_namespaces.clone(),
            kinds: config.scope.kinds.iter().cloned().collect(),
            match_labels: config.scope.match_labels.clone(),
            ignore_paths: config.ignore_paths.clone(),
            watched_config_maps: config.watched_config_maps.clone(),
            silences: config
                .silences
                .iter()
                .map(SilenceConfig::to_silence)
                .collect(),
            baseline: Arc::new(Baseline::default()),
        }
    }

    /// The same rules with desired manifests for `baseline_drift`.
    pub fn with_baseline(mut self, baseline: Baseline) -> Rules {
        self.baseline = Arc::new(baseline);
        self
    }

    /// Desired manifests (empty unless `baselineDir` is set).
    pub fn baseline(&self) -> &Baseline {
        &self.baseline
    }

    /// Settings of a class (disabled settings for an unknown id).
    pub fn class(&self, id: &str) -> &ClassSettings {
        self.classes.get(id).unwrap_or(&self.disabled)
    }

    /// True when the field manager's writes are not manual edits.
    pub fn is_trusted(&self, manager: &str) -> bool {
        self.trusted_managers.contains(manager)
    }

    /// True when drifts may be opened for this object.
    pub fn in_scope(&self, object: &ObjectState) -> bool {
        if !self.namespaces.is_empty()
            && !self
                .namespaces
                .iter()
                .any(|pattern| glob_match(pattern, &object.namespace))
        {
            return false;
        }
        if self
            .exclude_namespaces
            .iter()
            .any(|pattern| glob_match(pattern, &object.namespace))
        {
            return false;
        }
        if !self.kinds.is_empty() && !self.kinds.contains(&object.kind) {
            return false;
        }
        self.match_labels
            .iter()
            .all(|(key, value)| object.label(key) == Some(value.as_str()))
    }

    /// True when a JSON pointer is ignored for this kind.
    pub fn is_ignored_path(&self, kind: &str, pointer: &str) -> bool {
        [kind, "*"]
            .iter()
            .filter_map(|key| self.ignore_paths.get(*key))
            .flatten()
            .any(|prefix| {
                pointer == prefix
                    || (pointer.starts_with(prefix.as_str())
                        && pointer.as_bytes().get(prefix.len()) == Some(&b'/'))
            })
    }

    /// True when `config_drift` watches this ConfigMap.
    pub fn is_watched_config_map(&self, namespace: &str, name: &str) -> bool {
        let reference = format!("{namespace}/{name}");
        self.watched_config_maps
            .iter()
            .any(|pattern| glob_match(pattern, &reference))
    }

    /// The silences from the config.
    pub fn silences(&self) -> &[Silence] {
        &self.silences
    }

    /// Whether a silence mutes a drift at `now`.
    pub fn is_silenced(&self, drift: &Drift, now: Millis) -> bool {
        self.silences
            .iter()
            .any(|silence| silence.matches(drift, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_paths_cover_subtrees_only_at_segment_boundaries() {
        let config: RulesConfig = serde_json::from_value(serde_json::json!({
            "ignorePaths": {"Service": ["/spec/template/metadata/annotations"]}
        }))
        .unwrap();
        let rules = Rules::compile(&config);
        assert!(rules.is_ignored_path("Service", "/spec/template/metadata/annotations/x"));
        assert!(!rules.is_ignored_path("Service", "/spec/template/metadata/annotationsX"));
        assert!(!rules.is_ignored_path("Route", "/spec/template/metadata/annotations/x"));
    }
}
