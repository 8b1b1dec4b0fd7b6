//! Knative's defaults for the fields a manifest leaves out, as one cluster has them: read from
//! its `config-defaults`, `config-features` (Serving) and `config-br-defaults` (Eventing)
//! ConfigMaps when they are known, else Knative's documented built-in defaults. The baseline
//! comparison ([`super::baseline`]) uses them so that a field the manifest leaves to Knative must
//! hold the value Knative would have given it.
//!
//! What is defaulted here follows Knative's webhooks (`RevisionSpec.SetDefaults`,
//! `RouteSpec.SetDefaults`, `Broker.SetDefaults`), restricted to what can be told from the
//! ConfigMaps alone; each expectation says where its value came from, so a report can name the
//! source. Knative fills a field in only while it is unset, so an object keeps the default it
//! was created with: besides the cluster's current default, Knative's built-in default is
//! accepted too (a cluster that raised `revision-timeout-seconds` from 300 to 600 keeps its older
//! Services at 300, and that is not drift). Pure: the caller looks the ConfigMaps up (in a
//! snapshot, or in the engine's graph).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use drift_model::pointer::{get as get_pointer, push_pointer};

/// `knative-serving/config-defaults`.
pub const CONFIG_DEFAULTS: (&str, &str) = ("knative-serving", "config-defaults");
/// `knative-serving/config-features`.
pub(crate) const CONFIG_FEATURES: (&str, &str) = ("knative-serving", "config-features");
/// `knative-eventing/config-br-defaults`.
pub(crate) const CONFIG_BR_DEFAULTS: (&str, &str) = ("knative-eventing", "config-br-defaults");

/// Knative's built-in `revision-timeout-seconds`.
const BUILT_IN_TIMEOUT: i64 = 300;
/// The Broker class annotation.
pub(crate) const BROKER_CLASS: &str = "eventing.knative.dev/broker.class";

/// The data of a ConfigMap that has none: found, with every key at its built-in default.
pub static NO_DATA: BTreeMap<String, String> = BTreeMap::new();

/// True for one of the ConfigMaps the defaults are read from.
pub(crate) fn is_defaults_config_map(group: &str, kind: &str, namespace: &str, name: &str) -> bool {
    group.is_empty()
        && kind == "ConfigMap"
        && [CONFIG_DEFAULTS, CONFIG_FEATURES, CONFIG_BR_DEFAULTS].contains(&(namespace, name))
}

/// Where the defaults of one ConfigMap came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultsSource {
    /// `namespace/name` of the ConfigMap.
    pub config_map: String,
    /// True when the ConfigMap was found (in the snapshot, or tracked by the sink); false when
    /// Knative's built-in defaults stand in for it.
    pub found: bool,
    /// Values that could not be read (each falls back to the built-in default).
    pub notes: Vec<String>,
    /// The keys the ConfigMap sets (a found ConfigMap that leaves a key out, as Knative's
    /// shipped ones do, gives that key's built-in default).
    keys: std::collections::BTreeSet<String>,
}

impl DefaultsSource {
    fn new(
        (namespace, name): (&str, &str),
        data: Option<&BTreeMap<String, String>>,
    ) -> DefaultsSource {
        DefaultsSource {
            config_map: format!("{namespace}/{name}"),
            found: data.is_some(),
            notes: Vec::new(),
            keys: data
                .into_iter()
                .flat_map(|data| data.keys())
                .filter(|key| *key != "_example")
                .cloned()
                .collect(),
        }
    }

    /// Where the default of `key` came from: the ConfigMap that sets it, or Knative's built-in
    /// default because the ConfigMap leaves the key out or was not found.
    fn describe(&self, key: &str) -> String {
        self.describe_as(key, self.keys.contains(key))
    }

    /// [`Self::describe`] for a setting inside one of the ConfigMap's values (`brokerClass` in
    /// `default-br-config`): `set` says whether the ConfigMap gives it.
    fn describe_as(&self, key: &str, set: bool) -> String {
        let config_map = &self.config_map;
        match (self.found, set) {
            (true, true) => format!("Knative's default: {key} in {config_map}"),
            (true, false) => {
                format!("Knative's built-in default: {key} is not set in {config_map}")
            }
            (false, _) => {
                format!("Knative's built-in default for {key}: {config_map} not found")
            }
        }
    }
}

/// `secure-pod-defaults` of `config-features`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SecurePodDefaults {
    Disabled,
    AllowRootBounded,
    Enabled,
}

/// Knative's defaults in one cluster.
#[derive(Debug, Clone)]
pub struct KnativeDefaults {
    timeout: i64,
    response_start_timeout: i64,
    idle_timeout: i64,
    container_concurrency: i64,
    enable_service_links: Option<bool>,
    /// `(requests|limits, cpu|memory|ephemeral-storage, quantity)`.
    resources: Vec<(&'static str, &'static str, String)>,
    secure_pod_defaults: SecurePodDefaults,
    /// `default-br-config` parsed; `None` when the ConfigMap is not known.
    brokers: Option<Value>,
    sources: [DefaultsSource; 3],
}

impl Default for KnativeDefaults {
    fn default() -> Self {
        KnativeDefaults::from_config_maps(|_, _| None)
    }
}

/// Keys of `config-defaults` for container resources, in Knative's order.
const RESOURCE_KEYS: [(&str, &str, &str); 6] = [
    ("revision-cpu-request", "requests", "cpu"),
    ("revision-memory-request", "requests", "memory"),
    (
        "revision-ephemeral-storage-request",
        "requests",
        "ephemeral-storage",
    ),
    ("revision-cpu-limit", "limits", "cpu"),
    ("revision-memory-limit", "limits", "memory"),
    (
        "revision-ephemeral-storage-limit",
        "limits",
        "ephemeral-storage",
    ),
];

impl KnativeDefaults {
    /// The defaults from the ConfigMaps `lookup(namespace, name)` finds (their `data`), else
    /// the built-in ones.
    pub fn from_config_maps<'a>(
        lookup: impl Fn(&str, &str) -> Option<&'a BTreeMap<String, String>>,
    ) -> KnativeDefaults {
        let serving = lookup(CONFIG_DEFAULTS.0, CONFIG_DEFAULTS.1);
        let features = lookup(CONFIG_FEATURES.0, CONFIG_FEATURES.1);
        let brokers = lookup(CONFIG_BR_DEFAULTS.0, CONFIG_BR_DEFAULTS.1);
        let mut serving_source = DefaultsSource::new(CONFIG_DEFAULTS, serving);
        let mut features_source = DefaultsSource::new(CONFIG_FEATURES, features);
        let mut brokers_source = DefaultsSource::new(CONFIG_BR_DEFAULTS, brokers);
        let empty = BTreeMap::new();
        let data = serving.unwrap_or(&empty);

        let mut integer = |key: &str, default: i64| -> i64 {
            match data.get(key) {
                None => default,
                Some(text) => text.trim().parse::<i64>().unwrap_or_else(|_| {
                    serving_source.notes.push(format!(
                        "{key}: {text:?} is not an integer; the built-in {default} is used"
                    ));
                    default
                }),
            }
        };
        let timeout = integer("revision-timeout-seconds", BUILT_IN_TIMEOUT);
        let idle_timeout = integer("revision-idle-timeout-seconds", 0);
        let container_concurrency = integer("container-concurrency", 0);
        // Without its key the response-start default is the revision timeout itself.
        let response_start_timeout = integer("revision-response-start-timeout-seconds", timeout);
        // Knative parses true and false in any case; anything else (`default`) leaves the
        // field unset.
        let enable_service_links = match data
            .get("enable-service-links")
            .map(|value| value.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("false") => Some(false),
            Some("true") => Some(true),
            Some(_) => None,
        };
        let resources = RESOURCE_KEYS
            .iter()
            .filter_map(|(key, kind, resource)| {
                let value = data.get(*key)?.trim();
                (!value.is_empty()).then(|| (*kind, *resource, value.to_string()))
            })
            .collect();
        // Knative reads its flags case-insensitively and takes anything else as Disabled.
        let secure_pod_defaults = match features
            .and_then(|data| data.get("secure-pod-defaults"))
            .map(|value| value.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("disabled") => SecurePodDefaults::Disabled,
            Some("enabled") => SecurePodDefaults::Enabled,
            Some("allowrootbounded") => SecurePodDefaults::AllowRootBounded,
            Some(other) => {
                features_source.notes.push(format!(
                    "secure-pod-defaults: {other:?} is not Enabled, AllowRootBounded or Disabled; Knative takes it as Disabled"
                ));
                SecurePodDefaults::Disabled
            }
        };
        let brokers = match brokers {
            // Without the ConfigMap a Broker's class cannot be told: not compared.
            None => None,
            Some(data) => match data.get("default-br-config") {
                None => Some(json!({})),
                Some(text) => match serde_saphyr::from_str::<Value>(text) {
                    Ok(value) if value.is_object() => Some(value),
                    Ok(_) | Err(_) => {
                        brokers_source.notes.push(
                            "default-br-config is not a YAML mapping; Broker defaults are built-in"
                                .to_string(),
                        );
                        None
                    }
                },
            },
        };
        KnativeDefaults {
            timeout: if timeout == 0 {
                BUILT_IN_TIMEOUT
            } else {
                timeout
            },
            response_start_timeout,
            idle_timeout,
            container_concurrency,
            enable_service_links,
            resources,
            secure_pod_defaults,
            brokers,
            sources: [serving_source, features_source, brokers_source],
        }
    }

    /// Where each ConfigMap's defaults came from.
    pub fn sources(&self) -> &[DefaultsSource] {
        &self.sources
    }

    /// What Knative would have put at each path the manifest `desired` leaves out, for the
    /// object's kind: a value, or nothing (`None`: the field stays unset, or empty).
    pub(crate) fn expectations(&self, desired: &Value) -> Vec<Expectation> {
        let api_version = desired
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let group = api_version.split_once('/').map_or("", |(group, _)| group);
        let kind = desired
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let namespace = get_pointer(desired, "/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut out = Vec::new();
        match (group, kind) {
            ("serving.knative.dev", "Service") => {
                self.revision_template(desired, &mut out);
                out.push(Expectation {
                    path: "/spec/traffic".to_string(),
                    expected: Expected::Value(json!([{"latestRevision": true, "percent": 100}])),
                    also: None,
                    why: "Knative's default: all traffic to the latest Revision".to_string(),
                });
            }
            ("serving.knative.dev", "Configuration") => self.revision_template(desired, &mut out),
            ("eventing.knative.dev", "Broker") => self.broker(namespace, &mut out),
            ("eventing.knative.dev", "Trigger") => {
                for (path, what) in [
                    ("/spec/filter/attributes", "no attribute filter"),
                    ("/spec/filters", "no filters"),
                    ("/spec/delivery", "no delivery options of its own"),
                ] {
                    out.push(Expectation {
                        path: path.to_string(),
                        expected: Expected::Unset,
                        also: None,
                        why: format!("Knative's default: {what}"),
                    });
                }
            }
            _ => {}
        }
        out
    }

    fn revision_template(&self, desired: &Value, out: &mut Vec<Expectation>) {
        let serving = &self.sources[0];
        let spec = "/spec/template/spec";
        let mut push = |path: String, value: Option<Value>, also: Option<Value>, why: String| {
            // Say so when the built-in default is accepted besides the cluster's.
            let also = also.filter(|also| Some(also) != value.as_ref());
            let why = match &also {
                Some(also) => format!("{why}; Knative's built-in {also} is accepted too"),
                None => why,
            };
            out.push(Expectation {
                path,
                expected: Expected::from(value),
                also,
                why,
            });
        };
        push(
            format!("{spec}/timeoutSeconds"),
            Some(json!(self.timeout)),
            Some(json!(BUILT_IN_TIMEOUT)),
            serving.describe("revision-timeout-seconds"),
        );
        push(
            format!("{spec}/containerConcurrency"),
            Some(json!(self.container_concurrency)),
            Some(json!(0)),
            serving.describe("container-concurrency"),
        );
        // The timeouts below are set only when their default is below the revision timeout.
        let timeout = get_pointer(desired, &format!("{spec}/timeoutSeconds"))
            .and_then(Value::as_i64)
            .filter(|timeout| *timeout != 0)
            .unwrap_or(self.timeout);
        let bounded = |value: i64| (value != 0 && value < timeout).then(|| json!(value));
        push(
            format!("{spec}/idleTimeoutSeconds"),
            bounded(self.idle_timeout),
            None,
            serving.describe("revision-idle-timeout-seconds"),
        );
        push(
            format!("{spec}/responseStartTimeoutSeconds"),
            bounded(self.response_start_timeout),
            bounded(BUILT_IN_TIMEOUT),
            serving.describe("revision-response-start-timeout-seconds"),
        );
        push(
            format!("{spec}/enableServiceLinks"),
            self.enable_service_links.map(Value::Bool),
            Some(json!(false)),
            serving.describe("enable-service-links"),
        );
        let pod_security = get_pointer(desired, &format!("{spec}/securityContext"));
        for list in ["containers", "initContainers"] {
            let containers = get_pointer(desired, &format!("{spec}/{list}"))
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            for (index, container) in containers.iter().enumerate() {
                let base = format!("{spec}/{list}/{index}");
                // Knative gives resource defaults to the serving containers only.
                if list == "containers" {
                    for (key, kind, resource) in RESOURCE_KEYS {
                        let value = self
                            .resources
                            .iter()
                            .find(|(k, r, _)| *k == kind && *r == resource)
                            .map(|(_, _, quantity)| json!(quantity));
                        push(
                            push_pointer(&format!("{base}/resources/{kind}"), resource),
                            value,
                            None,
                            serving.describe(key),
                        );
                    }
                }
                push(
                    format!("{base}/securityContext"),
                    self.security_context(container, pod_security),
                    None,
                    self.sources[1].describe("secure-pod-defaults"),
                );
            }
        }
    }

    /// The container security context `secure-pod-defaults` gives a container that sets none
    /// (Knative's `defaultSecurityContext`), `None` when the feature is disabled.
    fn security_context(&self, container: &Value, pod: Option<&Value>) -> Option<Value> {
        if self.secure_pod_defaults == SecurePodDefaults::Disabled {
            return None;
        }
        let mut context = serde_json::Map::new();
        context.insert("allowPrivilegeEscalation".into(), json!(false));
        let pod_seccomp = pod
            .and_then(|pod| get_pointer(pod, "/seccompProfile/type"))
            .and_then(Value::as_str)
            .is_some_and(|kind| !kind.is_empty());
        if !pod_seccomp {
            context.insert("seccompProfile".into(), json!({"type": "RuntimeDefault"}));
        }
        let low_port = container
            .get("ports")
            .and_then(Value::as_array)
            .is_some_and(|ports| {
                ports.iter().any(|port| {
                    port.get("containerPort")
                        .and_then(Value::as_i64)
                        .is_some_and(|number| number < 1024)
                })
            });
        let mut capabilities = json!({"drop": ["ALL"]});
        if low_port {
            capabilities["add"] = json!(["NET_BIND_SERVICE"]);
        }
        context.insert("capabilities".into(), capabilities);
        let pod_non_root = pod
            .and_then(|pod| pod.get("runAsNonRoot"))
            .is_some_and(|value| !value.is_null());
        if self.secure_pod_defaults == SecurePodDefaults::Enabled && !pod_non_root {
            context.insert("runAsNonRoot".into(), json!(true));
        }
        Some(Value::Object(context))
    }

    /// A Broker's class annotation. A Broker's `spec.config` and `spec.delivery` are not
    /// defaulted here: Knative picks them per class and namespace from maps whose shape changed
    /// between releases, and a wrong guess would be a false difference on every Broker.
    fn broker(&self, namespace: &str, out: &mut Vec<Expectation>) {
        let source = &self.sources[2];
        let path = push_pointer("/metadata/annotations", BROKER_CLASS);
        let expected = match self.broker_class(namespace) {
            Some(class) => Expected::Value(json!(class)),
            // No ConfigMap, or one that names no class: Knative's choice cannot be told.
            None => Expected::Unknown,
        };
        out.push(Expectation {
            path,
            expected,
            also: None,
            why: source.describe_as("brokerClass", true),
        });
    }

    /// `GetBrokerClass` of Knative's `config-br-defaults`: the namespace's `brokerClass` when
    /// its entry names one, else the cluster default's.
    fn broker_class(&self, namespace: &str) -> Option<String> {
        let config = self.brokers.as_ref()?;
        let text = |entry: Option<&Value>| {
            entry
                .and_then(|entry| entry.get("brokerClass"))
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_string)
        };
        let own = config
            .get("namespaceDefaults")
            .and_then(|namespaces| namespaces.get(namespace));
        text(own).or_else(|| text(config.get("clusterDefault")))
    }
}

/// What Knative would have put at one path the manifest leaves out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expectation {
    /// JSON pointer.
    pub(crate) path: String,
    /// What Knative puts there.
    pub(crate) expected: Expected,
    /// Another value that is not drift: Knative's built-in default, which an object created
    /// before the cluster changed its default keeps.
    pub(crate) also: Option<Value>,
    /// Where the value came from, for the report.
    pub(crate) why: String,
}

/// What Knative puts at a path a manifest leaves out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expected {
    /// This value.
    Value(Value),
    /// Nothing: the field stays unset (or empty).
    Unset,
    /// It cannot be told (a ConfigMap it depends on is not known): not compared.
    Unknown,
}

impl Expected {
    fn from(value: Option<Value>) -> Expected {
        value.map_or(Expected::Unset, Expected::Value)
    }

    /// The value, `None` for unset or unknown.
    pub(crate) fn value(&self) -> Option<&Value> {
        match self {
            Expected::Value(value) => Some(value),
            Expected::Unset | Expected::Unknown => None,
        }
    }
}

#[cfg(test)]
mod tests;
