//! The `rules:` section: classes, grace periods, scope, trusted managers, ignore paths,
//! watched ConfigMaps, silences and the baseline directory; and its compilation into the engine's
//! [`Rules`] (hot reload compiles it again).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::de_opt_duration;
use crate::classify::classes::default_settings;
use crate::classify::rules::{
    ClassSettings, OwnPipeline, RuleSet, Scope, DEFAULT_BEHAVIOURAL_KEYS, DEFAULT_BOOKKEEPING_KEYS,
    DEFAULT_TRUSTED_MANAGERS, DEFAULT_WATCHED_CONFIG_MAPS,
};
use crate::classify::Rules;
use drift_model::{Severity, Silence};

/// Drift rules: which classes run, how long a condition must hold, and what is in scope.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RulesConfig {
    /// Defaults for every class.
    #[serde(default)]
    pub defaults: RuleDefaults,
    /// Per-class overrides, keyed by the public class id (`traffic_drift`, ...).
    #[serde(default)]
    pub classes: BTreeMap<String, ClassRule>,
    /// Field managers whose writes are not manual edits. Replaces the default list when set.
    #[serde(default = "default_trusted_managers")]
    pub trusted_managers: Vec<String>,
    /// Which objects drifts are reported for.
    #[serde(default)]
    pub scope: ScopeConfig,
    /// JSON pointers ignored in diffs, per kind (`*` for every kind), like Argo CD's
    /// `ignoreDifferences`. A pointer covers everything below it.
    #[serde(default)]
    pub ignore_paths: BTreeMap<String, Vec<String>>,
    /// ConfigMaps watched by `config_drift`, as `namespace/name` globs.
    #[serde(default = "default_watched_config_maps")]
    pub watched_config_maps: Vec<String>,
    /// Silences: matching drifts are tracked but not sent.
    #[serde(default)]
    pub silences: Vec<SilenceConfig>,
    /// A directory of desired manifests (as kept in Git) for `baseline_drift`.
    #[serde(default)]
    pub baseline_dir: Option<PathBuf>,
    /// Which label and annotation keys `manual_edit` ignores and which it treats as behaviour.
    #[serde(default)]
    pub metadata_keys: MetadataKeysConfig,
    /// drift-sentinel's own ApiServerSource, Broker and Trigger (`pipeline_broken`); the
    /// defaults are the names in `k8s/`.
    #[serde(default)]
    pub own_pipeline: OwnPipelineConfig,
    /// Team invariants: CEL rules every matching object must keep (class `invariant`).
    #[serde(default)]
    pub invariants: Vec<super::invariants::InvariantConfig>,
    /// How close to `notAfter` a certificate is reported (`certificate_expiring`).
    #[serde(default)]
    pub certificates: CertificatesConfig,
    /// The service mesh under Knative (`mesh_security_drift`).
    #[serde(default)]
    pub mesh: MeshConfig,
}

/// `rules.mesh`: how Istio is installed.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshConfig {
    /// Istio's `meshConfig.rootNamespace` (default `istio-system`; managed meshes use others,
    /// such as AKS's `aks-istio-system`): a PeerAuthentication without a selector there is the
    /// mesh-wide one, and one with a selector there is ignored.
    #[serde(default = "default_root_namespace")]
    pub root_namespace: String,
}

impl Default for MeshConfig {
    fn default() -> Self {
        MeshConfig {
            root_namespace: default_root_namespace(),
        }
    }
}

fn default_root_namespace() -> String {
    crate::classify::mesh::ROOT_NAMESPACE.to_string()
}

impl MeshConfig {
    /// The root namespace is a namespace name (an RFC 1123 label); the error names the key.
    pub(crate) fn validate(&self) -> Result<(), super::Error> {
        let name = &self.root_namespace;
        let label = !name.is_empty()
            && name.len() <= 63
            && name
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
            && !name.starts_with('-')
            && !name.ends_with('-');
        if label {
            Ok(())
        } else {
            Err(super::Error::invalid(
                "rules.mesh.rootNamespace",
                format!("{name:?} is not a namespace name (lowercase letters, digits and '-', at most 63)"),
            ))
        }
    }
}

/// `rules.certificates`: `certificate_expiring`'s windows before a certificate's `notAfter`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CertificatesConfig {
    /// Within this of `notAfter`: a warning (default `14d`).
    #[serde(
        default = "default_warn_before",
        deserialize_with = "super::de_duration"
    )]
    pub warn_before: Duration,
    /// Within this of `notAfter`: critical (default `3d`; less than `warnBefore`).
    #[serde(
        default = "default_critical_before",
        deserialize_with = "super::de_duration"
    )]
    pub critical_before: Duration,
}

impl Default for CertificatesConfig {
    fn default() -> Self {
        CertificatesConfig {
            warn_before: default_warn_before(),
            critical_before: default_critical_before(),
        }
    }
}

fn default_warn_before() -> Duration {
    crate::classify::Certificates::default().warn_before
}

fn default_critical_before() -> Duration {
    crate::classify::Certificates::default().critical_before
}

impl CertificatesConfig {
    /// Both windows are more than zero and `criticalBefore` is the shorter; errors name the key
    /// path (`rules.certificates.*`).
    pub(crate) fn validate(&self) -> Result<(), super::Error> {
        for (key, value) in [
            ("rules.certificates.warnBefore", self.warn_before),
            ("rules.certificates.criticalBefore", self.critical_before),
        ] {
            if value.is_zero() {
                return Err(super::Error::invalid(key, "must be more than 0s"));
            }
        }
        if self.critical_before >= self.warn_before {
            return Err(super::Error::invalid(
                "rules.certificates.criticalBefore",
                format!(
                    "must be less than rules.certificates.warnBefore ({}), or nothing would ever be a warning",
                    drift_model::time::format_span(drift_model::time::millis(self.warn_before))
                ),
            ));
        }
        Ok(())
    }
}

/// `rules.ownPipeline`: where drift-sentinel's own events come from.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnPipelineConfig {
    /// The namespace of the ApiServerSource, Broker and Trigger.
    #[serde(default = "default_pipeline_name")]
    pub namespace: String,
    /// The ApiServerSource's name.
    #[serde(default = "default_pipeline_name")]
    pub api_server_source: String,
    /// The Broker's name.
    #[serde(default = "default_pipeline_name")]
    pub broker: String,
    /// The Trigger's name.
    #[serde(default = "default_pipeline_name")]
    pub trigger: String,
    /// The Kubernetes Service of this sink (the Trigger's subscriber).
    #[serde(default = "default_pipeline_name")]
    pub service: String,
}

impl Default for OwnPipelineConfig {
    fn default() -> Self {
        OwnPipelineConfig {
            namespace: default_pipeline_name(),
            api_server_source: default_pipeline_name(),
            broker: default_pipeline_name(),
            trigger: default_pipeline_name(),
            service: default_pipeline_name(),
        }
    }
}

fn default_pipeline_name() -> String {
    "drift-sentinel".to_string()
}

/// `rules.metadataKeys`: label and annotation keys, as globs (`autoscaling.knative.dev/*`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetadataKeysConfig {
    /// Bookkeeping keys: a change to one is never a manual edit. Replaces the default list
    /// when set.
    #[serde(default = "default_bookkeeping_keys")]
    pub bookkeeping: Vec<String>,
    /// Keys whose hand edit changes what Knative does: reported with the class's severity
    /// (other metadata edits are `info`). Replaces the default list when set.
    #[serde(default = "default_behavioural_keys")]
    pub behavioural: Vec<String>,
}

impl Default for MetadataKeysConfig {
    fn default() -> Self {
        MetadataKeysConfig {
            bookkeeping: default_bookkeeping_keys(),
            behavioural: default_behavioural_keys(),
        }
    }
}

fn default_bookkeeping_keys() -> Vec<String> {
    DEFAULT_BOOKKEEPING_KEYS
        .iter()
        .map(|key| key.to_string())
        .collect()
}

fn default_behavioural_keys() -> Vec<String> {
    DEFAULT_BEHAVIOURAL_KEYS
        .iter()
        .map(|key| key.to_string())
        .collect()
}

impl Default for RulesConfig {
    fn default() -> Self {
        RulesConfig {
            defaults: RuleDefaults::default(),
            classes: BTreeMap::new(),
            invariants: Vec::new(),
            trusted_managers: default_trusted_managers(),
            scope: ScopeConfig::default(),
            ignore_paths: BTreeMap::new(),
            watched_config_maps: default_watched_config_maps(),
            silences: Vec::new(),
            baseline_dir: None,
            metadata_keys: MetadataKeysConfig::default(),
            own_pipeline: OwnPipelineConfig::default(),
            certificates: CertificatesConfig::default(),
            mesh: MeshConfig::default(),
        }
    }
}

fn default_watched_config_maps() -> Vec<String> {
    DEFAULT_WATCHED_CONFIG_MAPS
        .iter()
        .map(|pattern| pattern.to_string())
        .collect()
}

/// Field managers trusted by default: Knative's controllers, Kubernetes' own controllers and the
/// GitOps controllers. People's tools (`kubectl-edit`, `kubectl-patch`, `kn`, ...) are absent.
pub fn default_trusted_managers() -> Vec<String> {
    DEFAULT_TRUSTED_MANAGERS
        .iter()
        .map(|name| name.to_string())
        .collect()
}

/// Defaults shared by every class.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleDefaults {
    /// Grace for classes that set none of their own (each class has a built-in default).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub grace: Option<Duration>,
}

/// Per-class settings; unset fields fall back to the class's own defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClassRule {
    /// Whether the class runs at all.
    pub enabled: Option<bool>,
    /// `info`, `warning` or `critical`.
    pub severity: Option<String>,
    /// How long the condition must hold before it fires.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub grace: Option<Duration>,
    /// `traffic_drift`: allowed difference in percent points per target.
    pub tolerance_percent: Option<f64>,
    /// `revision_pileup`: non-active Revisions per Configuration above which it fires.
    pub threshold: Option<u64>,
}

/// Which objects drifts are reported for. Objects out of scope are still tracked (their
/// relatives may be in scope) but never open a drift.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScopeConfig {
    /// Namespace globs to include (empty: all).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Namespace globs to exclude.
    #[serde(default)]
    pub exclude_namespaces: Vec<String>,
    /// Kinds to include (empty: all).
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Labels an object must carry (exact values).
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

/// A silence: drifts matching every given matcher are muted until `expiresAt`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SilenceConfig {
    /// Matchers: `class`, `severity`, `cluster`, `namespace`, `kind`, `name` (globs), or
    /// `label:<key>` (exact).
    pub matchers: BTreeMap<String, String>,
    /// RFC 3339 expiry; absent means until removed.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// Why.
    #[serde(default)]
    pub comment: Option<String>,
}

impl SilenceConfig {
    /// The silence this configures.
    pub(crate) fn to_silence(&self) -> Silence {
        Silence {
            matchers: self.matchers.clone(),
            expires_at: self.expires_at.clone(),
            comment: self.comment.clone(),
        }
    }
}

impl RulesConfig {
    /// Compiles validated rules into the engine's [`Rules`] (without the baseline manifests,
    /// which `reload::load_rules` reads from `baselineDir`).
    pub fn compile(&self) -> Rules {
        let mut classes = default_settings(self.defaults.grace);
        for (id, settings) in classes.iter_mut() {
            let defaults = settings.clone();
            let rule = self.classes.get(*id).cloned().unwrap_or_default();
            *settings = ClassSettings {
                enabled: rule.enabled.unwrap_or(defaults.enabled),
                severity: rule
                    .severity
                    .as_deref()
                    .and_then(Severity::parse)
                    .unwrap_or(defaults.severity),
                grace: rule.grace.unwrap_or(defaults.grace),
                tolerance_percent: rule.tolerance_percent.unwrap_or(defaults.tolerance_percent),
                threshold: rule.threshold.unwrap_or(defaults.threshold),
            };
        }
        Rules::new(RuleSet {
            classes,
            trusted_managers: self.trusted_managers.iter().cloned().collect(),
            scope: Scope {
                namespaces: self.scope.namespaces.clone(),
                exclude_namespaces: self.scope.exclude_namespaces.clone(),
                kinds: self.scope.kinds.iter().cloned().collect(),
                match_labels: self.scope.match_labels.clone(),
            },
            ignore_paths: self.ignore_paths.clone(),
            watched_config_maps: self.watched_config_maps.clone(),
            silences: self
                .silences
                .iter()
                .map(SilenceConfig::to_silence)
                .collect(),
            bookkeeping_keys: self.metadata_keys.bookkeeping.clone(),
            behavioural_keys: self.metadata_keys.behavioural.clone(),
            own_pipeline: OwnPipeline {
                namespace: self.own_pipeline.namespace.clone(),
                api_server_source: self.own_pipeline.api_server_source.clone(),
                broker: self.own_pipeline.broker.clone(),
                trigger: self.own_pipeline.trigger.clone(),
                service: self.own_pipeline.service.clone(),
            },
            // Validated when the config was loaded: a rule that does not compile cannot be here
            // (`validate` compiles them with their key paths); should one, it is left out.
            invariants: super::invariants::compile(&self.invariants, "rules.invariants")
                .unwrap_or_default(),
        })
        .with_certificates(crate::classify::Certificates {
            warn_before: self.certificates.warn_before,
            critical_before: self.certificates.critical_before,
        })
        .with_mesh_root_namespace(&self.mesh.root_namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::classes::REGISTRY;

    #[test]
    fn ignore_paths_cover_subtrees_only_at_segment_boundaries() {
        let config: RulesConfig = serde_json::from_value(serde_json::json!({
            "ignorePaths": {"Service": ["/spec/template/metadata/annotations"]}
        }))
        .unwrap();
        let rules = config.compile();
        assert!(rules.is_ignored_path("Service", "/spec/template/metadata/annotations/x"));
        assert!(!rules.is_ignored_path("Service", "/spec/template/metadata/annotationsX"));
        assert!(!rules.is_ignored_path("Route", "/spec/template/metadata/annotations/x"));
    }

    #[test]
    fn empty_rules_compile_to_the_engines_defaults() {
        let compiled = RulesConfig::default().compile();
        let built_in = Rules::default();
        for class in REGISTRY {
            assert_eq!(
                compiled.class(class.id()),
                built_in.class(class.id()),
                "{}",
                class.id()
            );
        }
    }
}
