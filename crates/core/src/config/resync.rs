//! `resync:`: listing the cluster through the Kubernetes API at start and periodically.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::de_duration;

/// Whether resync runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ResyncMode {
    /// On inside a cluster (in-cluster service account) or when `resync.kubeconfig` is set; off
    /// for a local run without one.
    #[default]
    Auto,
    /// Always on: `resync.kubeconfig`, else `$KUBECONFIG` or `~/.kube/config`, else in-cluster.
    On,
    /// Never.
    Off,
}

impl<'de> Deserialize<'de> for ResyncMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Flag(bool),
            Word(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Flag(true) => Ok(ResyncMode::On),
            Raw::Flag(false) => Ok(ResyncMode::Off),
            Raw::Word(word) if word == "auto" => Ok(ResyncMode::Auto),
            Raw::Word(word) => Err(serde::de::Error::custom(format!(
                "expected true, false or \"auto\", got {word:?}"
            ))),
        }
    }
}

/// Resync: list every watched kind through the Kubernetes API at start and then every
/// `interval`, so objects that existed before drift-sentinel started, and changes the
/// ApiServerSource dropped, are classified too.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResyncConfig {
    /// `auto` (default), `true` or `false`.
    #[serde(default)]
    pub enabled: ResyncMode,
    /// Time between two complete lists.
    #[serde(default = "default_resync_interval", deserialize_with = "de_duration")]
    pub interval: Duration,
    /// A kubeconfig file; unset: in-cluster, or `$KUBECONFIG` / `~/.kube/config`.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context; unset: its current context.
    #[serde(default)]
    pub context: Option<String>,
    /// The cluster name the listed objects are filed under. It must be the name events from
    /// this cluster carry (their `cluster` extension), or objects would be tracked twice; unset:
    /// `defaultCluster`.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Objects per list request (`limit`); the rest comes page by page (`continue`).
    #[serde(default = "default_page_size")]
    pub page_size: u32,
    /// What to list: by default exactly what `k8s/apiserversource.yaml` watches. Setting it
    /// replaces that list.
    #[serde(default = "default_resync_resources")]
    pub resources: Vec<ResourceConfig>,
    /// Kinds listed besides `resources`: the opt-in kinds of `k8s/apiserversource.yaml` (the
    /// operator's CRs, EventType, InMemoryChannel, ...) once the source watches them, without
    /// copying the default list.
    #[serde(default)]
    pub extra_resources: Vec<ResourceConfig>,
}

impl ResyncConfig {
    /// Everything resync lists: `resources`, then `extraResources`, each with its key path.
    pub fn listed(&self) -> impl Iterator<Item = (String, &ResourceConfig)> {
        let base = self
            .resources
            .iter()
            .enumerate()
            .map(|(index, resource)| (format!("resync.resources[{index}]"), resource));
        let extra = self
            .extra_resources
            .iter()
            .enumerate()
            .map(|(index, resource)| (format!("resync.extraResources[{index}]"), resource));
        base.chain(extra)
    }
}

fn default_resync_interval() -> Duration {
    Duration::from_secs(600)
}
fn default_page_size() -> u32 {
    500
}

impl Default for ResyncConfig {
    fn default() -> Self {
        ResyncConfig {
            enabled: ResyncMode::default(),
            interval: default_resync_interval(),
            kubeconfig: None,
            context: None,
            cluster: None,
            page_size: default_page_size(),
            resources: default_resync_resources(),
            extra_resources: Vec::new(),
        }
    }
}

/// One kind to list, as in an ApiServerSource's `spec.resources[]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceConfig {
    /// `apiVersion`, e.g. `serving.knative.dev/v1`.
    pub api_version: String,
    /// `kind`, e.g. `Service`.
    pub kind: String,
    /// The resource's plural name in API paths; unset: derived from `kind` (`services`).
    #[serde(default)]
    pub plural: Option<String>,
    /// A label selector (`matchLabels`, `matchExpressions`), as in the ApiServerSource.
    #[serde(default)]
    pub selector: LabelSelectorConfig,
    /// True for a kind the ApiServerSource does not watch (Istio's Gateway: the source guesses
    /// its resource as `gatewaies`), so only resync sees it: its changes and deletions are
    /// applied but not counted as ones the events missed, which would call the source blind.
    #[serde(default)]
    pub resync_only: bool,
}

/// A Kubernetes label selector.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorConfig {
    /// Labels that must have these values.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements (`In`, `NotIn`, `Exists`, `DoesNotExist`).
    #[serde(default)]
    pub match_expressions: Vec<SelectorRequirementConfig>,
}

/// One `matchExpressions[]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectorRequirementConfig {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` and `NotIn`.
    #[serde(default)]
    pub values: Vec<String>,
}

/// What `k8s/apiserversource.yaml` watches (its opt-in kinds, commented out there, are not
/// listed here either): Knative Serving's kinds and the Deployments Knative creates for Revisions,
/// the Serving internals traffic flows through (KIngress, Certificate, ServerlessService,
/// PodAutoscaler) and DomainMappings, Knative Eventing's Brokers, Triggers, Channels,
/// Subscriptions, flows and sources, and Knative's ConfigMaps by three disjoint label selectors.
pub fn default_resync_resources() -> Vec<ResourceConfig> {
    let plain = |api_version: &str, kind: &str| ResourceConfig {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: None,
        selector: LabelSelectorConfig::default(),
        resync_only: false,
    };
    let requirement = |key: &str, operator: &str, values: &[&str]| SelectorRequirementConfig {
        key: key.to_string(),
        operator: operator.to_string(),
        values: values.iter().map(|value| value.to_string()).collect(),
    };
    let selected = |api_version: &str, kind: &str, requirements: Vec<SelectorRequirementConfig>| {
        ResourceConfig {
            selector: LabelSelectorConfig {
                match_labels: BTreeMap::new(),
                match_expressions: requirements,
            },
            ..plain(api_version, kind)
        }
    };
    vec![
        plain("serving.knative.dev/v1", "Service"),
        plain("serving.knative.dev/v1", "Configuration"),
        plain("serving.knative.dev/v1", "Revision"),
        plain("serving.knative.dev/v1", "Route"),
        selected(
            "apps/v1",
            "Deployment",
            vec![requirement("serving.knative.dev/revision", "Exists", &[])],
        ),
        plain("serving.knative.dev/v1beta1", "DomainMapping"),
        plain("networking.internal.knative.dev/v1alpha1", "Ingress"),
        plain("networking.internal.knative.dev/v1alpha1", "Certificate"),
        plain(
            "networking.internal.knative.dev/v1alpha1",
            "ServerlessService",
        ),
        plain("autoscaling.internal.knative.dev/v1alpha1", "PodAutoscaler"),
        plain("eventing.knative.dev/v1", "Broker"),
        plain("eventing.knative.dev/v1", "Trigger"),
        plain("messaging.knative.dev/v1", "Channel"),
        plain("messaging.knative.dev/v1", "Subscription"),
        plain("flows.knative.dev/v1", "Sequence"),
        plain("flows.knative.dev/v1", "Parallel"),
        plain("sources.knative.dev/v1", "ApiServerSource"),
        plain("sources.knative.dev/v1", "PingSource"),
        plain("sources.knative.dev/v1", "SinkBinding"),
        plain("sources.knative.dev/v1", "ContainerSource"),
        // Serving's, Eventing's and the networking layers' ConfigMaps.
        selected(
            "v1",
            "ConfigMap",
            vec![requirement(
                "app.kubernetes.io/name",
                "In",
                &["knative-serving", "knative-eventing"],
            )],
        ),
        // Networking-layer ConfigMaps labelled with their ingress provider only.
        selected(
            "v1",
            "ConfigMap",
            vec![
                requirement("app.kubernetes.io/name", "DoesNotExist", &[]),
                requirement("networking.knative.dev/ingress-provider", "Exists", &[]),
            ],
        ),
        // Eventing's config-kreference-mapping (no app.kubernetes.io label).
        selected(
            "v1",
            "ConfigMap",
            vec![
                requirement("app.kubernetes.io/name", "DoesNotExist", &[]),
                requirement(
                    "networking.knative.dev/ingress-provider",
                    "DoesNotExist",
                    &[],
                ),
                requirement("knative.dev/config-category", "Exists", &[]),
            ],
        ),
    ]
}
