//! Rules: per-class settings merged over each class's own defaults, the trusted field managers,
//! scope, ignore paths and silences. Pure data; hot reload swaps a new `Arc<Rules>` into the
//! engine. The engine knows nothing of the YAML they come from: `config` compiles its `rules:`
//! section into [`RuleSet`] and [`Rules::new`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::baseline::Baseline;
use super::fleet::FleetGroup;
use super::invariants::Invariant;
use super::state::ObjectState;
use drift_model::{glob_match, Severity, Silence};

/// Field managers trusted by default: Knative's controllers, Kubernetes' own controllers and the
/// GitOps controllers. People's tools (`kubectl-edit`, `kubectl-patch`, `kn`, ...) are absent.
/// A controller that writes with client-go's defaults is recorded under its binary's name:
/// Serving's and Eventing's `controller` and `webhook`, Serving's `autoscaler` and
/// `autoscaler-hpa` (PodAutoscalers) and `default-domain` (config-domain), Eventing's
/// `mtchannel_broker` (Brokers, Triggers, their Subscriptions; `mtchannel-broker` in builds that
/// name the binary so, as recorded in `tests/fixtures/knative/eventing`) and the in-memory
/// channel's `channel_controller` and `channel_dispatcher`; the networking layers' controllers
/// (net-istio, net-contour, net-gateway-api, net-certmanager: `controller`; net-kourier:
/// `kourier`); the Knative Operator's `operator`.
/// The field manager remediation writes as (`?fieldManager=`): always trusted.
pub(crate) const REMEDIATION_MANAGER: &str = "drift-sentinel";

pub(crate) const DEFAULT_TRUSTED_MANAGERS: &[&str] = &[
    "controller",
    "autoscaler",
    "autoscaler-hpa",
    "default-domain",
    "webhook",
    "mtchannel_broker",
    "mtchannel-broker",
    "channel_controller",
    "channel_dispatcher",
    "kourier",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "argocd-controller",
    "argocd-application-controller",
    "kustomize-controller",
    "helm-controller",
    "knative-operator",
    "operator",
];

/// ConfigMaps `config_drift` watches by default, as `namespace/name` globs: Serving's (with the
/// networking layers' `config-kourier`, `config-istio`, ..., which live in `knative-serving`)
/// and Eventing's, whose default channel is set in `default-ch-webhook`.
pub(crate) const DEFAULT_WATCHED_CONFIG_MAPS: &[&str] = &[
    "knative-serving/config-*",
    "knative-eventing/config-*",
    "knative-eventing/default-ch-webhook",
];

/// Label and annotation keys (globs) that are bookkeeping, not intent: written by tools and
/// controllers on every apply or edit, so a change to one is never a manual edit. Each with why.
pub(crate) const DEFAULT_BOOKKEEPING_KEYS: &[&str] = &[
    // kubectl's record of the last applied manifest (the spec diff already covers its content).
    "kubectl.kubernetes.io/last-applied-configuration",
    // The command that made a change (`kubectl --record`), history only.
    "kubernetes.io/change-cause",
    // Knative's webhook stamps who created and last modified an object on every write.
    "serving.knative.dev/creator",
    "serving.knative.dev/lastModifier",
    "eventing.knative.dev/creator",
    "eventing.knative.dev/lastModifier",
    "messaging.knative.dev/creator",
    "messaging.knative.dev/lastModifier",
    "sources.knative.dev/creator",
    "sources.knative.dev/lastModifier",
    "flows.knative.dev/creator",
    "flows.knative.dev/lastModifier",
    // Serving's controllers record routing and garbage-collection state.
    "serving.knative.dev/routes",
    "serving.knative.dev/routingState",
    "serving.knative.dev/routingStateModified",
    "serving.knative.dev/lastPinned",
    // kn records when and with which image it last updated a Service.
    "client.knative.dev/*",
    // The Deployment controller's rollout counter.
    "deployment.kubernetes.io/revision",
    // The checksum of a Knative ConfigMap's `_example` block.
    "knative.dev/example-checksum",
    // GitOps tracking: Argo CD, Flux and Helm mark what they manage.
    "argocd.argoproj.io/*",
    "kustomize.toolkit.fluxcd.io/*",
    "helm.toolkit.fluxcd.io/*",
    "meta.helm.sh/*",
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
];

/// Label and annotation keys (globs) that change what Knative does: a hand edit of one is
/// reported with the class's severity (at least `warning`); other metadata edits are `info`.
pub(crate) const DEFAULT_BEHAVIOURAL_KEYS: &[&str] = &[
    // `cluster-local` takes a Service off the public ingress.
    "networking.knative.dev/visibility",
    "serving.knative.dev/visibility",
    // How fast traffic moves to a new Revision.
    "serving.knative.dev/rollout-duration",
    // Scale bounds, targets, windows, the autoscaler class.
    "autoscaling.knative.dev/*",
    // Per-object feature switches.
    "features.knative.dev/*",
    // Which Broker implementation (MTChannelBasedBroker, Kafka, RabbitMQ) serves a Broker.
    "eventing.knative.dev/broker.class",
    // Namespace-scoped eventing injection and source scoping.
    "eventing.knative.dev/injection",
    "eventing.knative.dev/scope",
    // Certificates, ingress class, auto-TLS and HTTP redirect per object.
    "networking.knative.dev/*",
    "networking.internal.knative.dev/*",
    // Revision garbage collection.
    "serving.knative.dev/no-gc",
    // Which workloads a SinkBinding injects into.
    "bindings.knative.dev/*",
];

/// `traffic_drift`'s default tolerance, in percent points.
pub(crate) const DEFAULT_TOLERANCE_PERCENT: f64 = 1.0;

/// `revision_pileup`'s default threshold (non-active Revisions per Configuration).
pub(crate) const DEFAULT_PILEUP_THRESHOLD: u64 = 50;

/// `rules.certificates`: how long before a certificate's `notAfter` `certificate_expiring`
/// warns, and from when it is critical.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Certificates {
    /// A certificate this close to its `notAfter` (or past it) is a warning (default 14 days).
    pub warn_before: Duration,
    /// ... and this close, critical (default 3 days; shorter than `warn_before`).
    pub critical_before: Duration,
}

impl Default for Certificates {
    fn default() -> Self {
        Certificates {
            warn_before: Duration::from_secs(14 * 86_400),
            critical_before: Duration::from_secs(3 * 86_400),
        }
    }
}

/// drift-sentinel's own delivery path: the ApiServerSource that sends it events, the Broker they
/// go through and the Trigger that delivers them (names as in `k8s/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnPipeline {
    /// The namespace all three live in.
    pub namespace: String,
    /// The ApiServerSource's name.
    pub api_server_source: String,
    /// The Broker's name.
    pub broker: String,
    /// The Trigger's name.
    pub trigger: String,
    /// The name of the Kubernetes Service the Trigger's subscriber points at (this sink).
    pub service: String,
}

impl Default for OwnPipeline {
    fn default() -> Self {
        OwnPipeline {
            namespace: "drift-sentinel".to_string(),
            api_server_source: "drift-sentinel".to_string(),
            broker: "drift-sentinel".to_string(),
            trigger: "drift-sentinel".to_string(),
            service: "drift-sentinel".to_string(),
        }
    }
}

/// One part of the own delivery path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PipelinePart {
    /// The ApiServerSource.
    Source,
    /// The Broker.
    Broker,
    /// The Trigger.
    Trigger,
}

impl PipelinePart {
    /// Every part, in the order events pass them.
    pub const ALL: [PipelinePart; 3] = [
        PipelinePart::Source,
        PipelinePart::Broker,
        PipelinePart::Trigger,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            PipelinePart::Source => "apiserversource",
            PipelinePart::Broker => "broker",
            PipelinePart::Trigger => "trigger",
        }
    }

    /// The part's (group, kind).
    pub fn kind(self) -> (&'static str, &'static str) {
        match self {
            PipelinePart::Source => ("sources.knative.dev", "ApiServerSource"),
            PipelinePart::Broker => ("eventing.knative.dev", "Broker"),
            PipelinePart::Trigger => ("eventing.knative.dev", "Trigger"),
        }
    }
}

impl OwnPipeline {
    /// The part's name.
    pub fn name(&self, part: PipelinePart) -> &str {
        match part {
            PipelinePart::Source => &self.api_server_source,
            PipelinePart::Broker => &self.broker,
            PipelinePart::Trigger => &self.trigger,
        }
    }

    /// Which part `object` is, if it is one.
    pub(crate) fn part_of(&self, object: &ObjectState) -> Option<PipelinePart> {
        if object.namespace != self.namespace {
            return None;
        }
        PipelinePart::ALL.into_iter().find(|part| {
            let (group, kind) = part.kind();
            object.is_kind(group, kind) && object.name == self.name(*part)
        })
    }
}

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

/// Which objects drifts are reported for. Objects out of scope are still tracked (their
/// relatives may be in scope) but never open a drift.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Namespace globs to include (empty: all).
    pub namespaces: Vec<String>,
    /// Namespace globs to exclude.
    pub exclude_namespaces: Vec<String>,
    /// Kinds to include (empty: all).
    pub kinds: BTreeSet<String>,
    /// Labels an object must carry (exact values).
    pub match_labels: BTreeMap<String, String>,
}

/// Everything [`Rules::new`] needs, as plain data.
#[derive(Debug, Clone)]
pub struct RuleSet {
    /// Settings per class id; a class missing here does not run (`classes::default_settings`
    /// gives every class its built-in settings).
    pub classes: BTreeMap<&'static str, ClassSettings>,
    /// Field managers whose writes are not manual edits.
    pub trusted_managers: BTreeSet<String>,
    /// What drifts are reported for.
    pub scope: Scope,
    /// JSON pointers ignored in diffs, per kind (`*` for every kind).
    pub ignore_paths: BTreeMap<String, Vec<String>>,
    /// ConfigMaps `config_drift` watches, as `namespace/name` globs.
    pub watched_config_maps: Vec<String>,
    /// Configured silences.
    pub silences: Vec<Silence>,
    /// Label and annotation keys that are bookkeeping, as globs.
    pub bookkeeping_keys: Vec<String>,
    /// Label and annotation keys whose hand edit changes behaviour, as globs.
    pub behavioural_keys: Vec<String>,
    /// drift-sentinel's own delivery path.
    pub own_pipeline: OwnPipeline,
    /// Team invariants (`rules.invariants`), compiled.
    pub invariants: Vec<Invariant>,
}

impl RuleSet {
    /// These class settings, with the default trusted managers and watched ConfigMaps, no scope
    /// limits, no ignore paths and no silences.
    pub(crate) fn with_classes(classes: BTreeMap<&'static str, ClassSettings>) -> Self {
        RuleSet {
            classes,
            trusted_managers: DEFAULT_TRUSTED_MANAGERS
                .iter()
                .map(|name| name.to_string())
                .collect(),
            scope: Scope::default(),
            ignore_paths: BTreeMap::new(),
            watched_config_maps: DEFAULT_WATCHED_CONFIG_MAPS
                .iter()
                .map(|pattern| pattern.to_string())
                .collect(),
            silences: Vec::new(),
            bookkeeping_keys: strings(DEFAULT_BOOKKEEPING_KEYS),
            behavioural_keys: strings(DEFAULT_BEHAVIOURAL_KEYS),
            own_pipeline: OwnPipeline::default(),
            invariants: Vec::new(),
        }
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

/// The compiled rules.
#[derive(Debug, Clone)]
pub struct Rules {
    classes: BTreeMap<&'static str, ClassSettings>,
    disabled: ClassSettings,
    trusted_managers: BTreeSet<String>,
    scope: Scope,
    ignore_paths: BTreeMap<String, Vec<String>>,
    watched_config_maps: Vec<String>,
    silences: Vec<Silence>,
    bookkeeping_keys: Vec<String>,
    behavioural_keys: Vec<String>,
    own_pipeline: OwnPipeline,
    invariants: Arc<[Invariant]>,
    baseline: Arc<Baseline>,
    fleet: Arc<[FleetGroup]>,
    /// Remediation is on: drift-sentinel's own field manager is trusted (see
    /// [`Rules::is_trusted`]).
    remediation_on: bool,
    /// `certificate_expiring`'s windows (`rules.certificates`).
    certificates: Certificates,
    /// Istio's root namespace (`rules.mesh.rootNamespace`), where a PeerAuthentication without
    /// a selector is mesh-wide.
    mesh_root_namespace: String,
}

impl Rules {
    /// Rules from their parts.
    pub fn new(set: RuleSet) -> Rules {
        Rules {
            classes: set.classes,
            disabled: ClassSettings {
                enabled: false,
                severity: Severity::Info,
                grace: Duration::ZERO,
                tolerance_percent: 0.0,
                threshold: u64::MAX,
            },
            trusted_managers: set.trusted_managers,
            scope: set.scope,
            ignore_paths: set.ignore_paths,
            watched_config_maps: set.watched_config_maps,
            silences: set.silences,
            bookkeeping_keys: set.bookkeeping_keys,
            behavioural_keys: set.behavioural_keys,
            own_pipeline: set.own_pipeline,
            invariants: set.invariants.into(),
            baseline: Arc::new(Baseline::default()),
            fleet: Arc::new([]),
            remediation_on: false,
            certificates: Certificates::default(),
            mesh_root_namespace: crate::classify::mesh::ROOT_NAMESPACE.to_string(),
        }
    }

    /// The same rules with `certificate_expiring`'s windows (`rules.certificates`).
    pub fn with_certificates(mut self, certificates: Certificates) -> Rules {
        self.certificates = certificates;
        self
    }

    /// `certificate_expiring`'s windows.
    pub fn certificates(&self) -> Certificates {
        self.certificates
    }

    /// The same rules with Istio's root namespace (`rules.mesh.rootNamespace`).
    pub fn with_mesh_root_namespace(mut self, namespace: &str) -> Rules {
        self.mesh_root_namespace = namespace.to_string();
        self
    }

    /// Istio's root namespace: where a PeerAuthentication without a selector is mesh-wide.
    pub fn mesh_root_namespace(&self) -> &str {
        &self.mesh_root_namespace
    }

    /// The same rules, with remediation on or off: with it on, drift-sentinel's own writes are
    /// not hand edits.
    pub fn with_remediation(mut self, on: bool) -> Rules {
        self.remediation_on = on;
        self
    }

    /// The same rules with fleet groups (`fleet.groups`, a section of its own beside `rules:`).
    pub fn with_fleet(mut self, groups: Vec<FleetGroup>) -> Rules {
        self.fleet = groups.into();
        self
    }

    /// The fleet groups, in config order.
    pub fn fleet_groups(&self) -> &[FleetGroup] {
        &self.fleet
    }

    /// The fleet group with this name.
    pub(crate) fn fleet_group(&self, name: &str) -> Option<&FleetGroup> {
        self.fleet.iter().find(|group| group.name == name)
    }

    /// The same rules with desired manifests for `baseline_drift`.
    pub fn with_baseline(mut self, baseline: Baseline) -> Rules {
        self.baseline = Arc::new(baseline);
        self
    }

    /// The same rules with more invariants after their own (`check --invariants`); the caller
    /// keeps names unique.
    pub fn with_invariants(mut self, extra: Vec<Invariant>) -> Rules {
        let mut all = self.invariants.to_vec();
        all.extend(extra);
        self.invariants = all.into();
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

    /// True when the field manager's writes are not manual edits: the configured ones, and,
    /// while remediation is on, drift-sentinel's own (each of its writes is an attempt in the
    /// drift's history, notified on its own; reporting it again as a hand edit would be noise).
    /// With remediation off nothing writes as `drift-sentinel`, so an edit that claims the name
    /// is a hand edit like any other.
    pub(crate) fn is_trusted(&self, manager: &str) -> bool {
        (self.remediation_on && manager == REMEDIATION_MANAGER)
            || self.trusted_managers.contains(manager)
    }

    /// True when drifts may be opened for this object.
    pub fn in_scope(&self, object: &ObjectState) -> bool {
        let scope = &self.scope;
        if !scope.namespaces.is_empty()
            && !scope
                .namespaces
                .iter()
                .any(|pattern| glob_match(pattern, &object.namespace))
        {
            return false;
        }
        if scope
            .exclude_namespaces
            .iter()
            .any(|pattern| glob_match(pattern, &object.namespace))
        {
            return false;
        }
        if !scope.kinds.is_empty() && !scope.kinds.contains(&object.kind) {
            return false;
        }
        scope
            .match_labels
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

    /// True when a label or annotation key is bookkeeping (never a manual edit).
    pub fn is_bookkeeping_key(&self, key: &str) -> bool {
        self.bookkeeping_keys
            .iter()
            .any(|pattern| glob_match(pattern, key))
    }

    /// True when a hand edit of this label or annotation key changes behaviour.
    pub fn is_behavioural_key(&self, key: &str) -> bool {
        self.behavioural_keys
            .iter()
            .any(|pattern| glob_match(pattern, key))
    }

    /// True when a label or annotation key is compared across a fleet (besides the version
    /// label): behavioural and not bookkeeping.
    pub fn is_fleet_compared_key(&self, key: &str) -> bool {
        self.is_behavioural_key(key) && !self.is_bookkeeping_key(key)
    }

    /// drift-sentinel's own delivery path.
    pub(crate) fn own_pipeline(&self) -> &OwnPipeline {
        &self.own_pipeline
    }

    /// The team invariants, in config order.
    pub fn invariants(&self) -> &[Invariant] {
        &self.invariants
    }

    /// The invariant with this name.
    pub fn invariant(&self, name: &str) -> Option<&Invariant> {
        self.invariants.iter().find(|rule| rule.name == name)
    }

    /// The silences from the config.
    pub fn silences(&self) -> &[Silence] {
        &self.silences
    }
}
