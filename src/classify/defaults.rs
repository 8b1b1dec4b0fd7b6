//! Knative's defaults for the fields a manifest leaves out, as one cluster has them: read from
//! its `config-defaults`, `config-features` (Serving) and `config-br-defaults` (Eventing)
//! ConfigMaps when they are known, else Knative's documented built-in defaults. The baseline
//! comparison ([`super::baseline`]) uses them so that a field the manifest leaves to Knative must
//! hold the value Knative would have given it.
//!
//! What is defaulted here follows Knative's webhooks (`RevisionSpec.SetDefaults`,
//! `RouteSpec.SetDefaults`, `Broker.SetDefaults`), restricted to what can be told from the
//! ConfigMaps alone; each expectation says where its value came from, so a report can name the
//! source. Pure: the caller looks the ConfigMaps up (in a snapshot, or in the engine's graph).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::model::pointer::push_pointer;

/// `knative-serving/config-defaults`.
pub const CONFIG_DEFAULTS: (&str, &str) = ("knative-serving", "config-defaults");
/// `knative-serving/config-features`.
pub const CONFIG_FEATURES: (&str, &str) = ("knative-serving", "config-features");
/// `knative-eventing/config-br-defaults`.
pub const CONFIG_BR_DEFAULTS: (&str, &str) = ("knative-eventing", "config-br-defaults");

/// Knative's built-in `revision-timeout-seconds`.
const BUILT_IN_TIMEOUT: i64 = 300;
/// Knative's built-in Broker class.
const BUILT_IN_BROKER_CLASS: &str = "MTChannelBasedBroker";
/// The Broker class annotation.
pub(crate) const BROKER_CLASS: &str = "eventing.knative.dev/broker.class";

/// True for one of the ConfigMaps the defaults are read from.
pub fn is_defaults_config_map(group: &str, kind: &str, namespace: &str, name: &str) -> bool {
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
}

impl DefaultsSource {
    fn new((namespace, name): (&str, &str), found: bool) -> DefaultsSource {
        DefaultsSource {
            config_map: format!("{namespace}/{name}"),
            found,
            notes: Vec::new(),
        }
    }

    /// `config-defaults in knative-serving (from the cluster)` or `... (not found: built-in)`.
    fn describe(&self, key: &str) -> String {
        let from = if self.found {
            "found"
        } else {
            "not found, Knative's built-in default"
        };
        format!("Knative's default: {key} of {} ({from})", self.config_map)
    }
}

/// `secure-pod-defaults` of `config-features`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SecurePodDefaults {
    Disabled,
    AllowRootBounded,
    Enabled,
}

/// The Broker defaults of `config-br-defaults` for one namespace.
#[derive(Debug, Clone, Default, PartialEq)]
struct BrokerDefaults {
    class: Option<String>,
    delivery: Option<Value>,
}

/// Knative's defaults in one cluster.
#[derive(Debug, Clone)]
pub struct KnativeDefaults {
    timeout: i64,
    response_start_timeout: Option<i64>,
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
        let mut serving_source = DefaultsSource::new(CONFIG_DEFAULTS, serving.is_some());
        let mut features_source = DefaultsSource::new(CONFIG_FEATURES, features.is_some());
        let mut brokers_source = DefaultsSource::new(CONFIG_BR_DEFAULTS, brokers.is_some());
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
        // Knative's built-in response-start timeout has changed between releases, so it is
        // compared only when the ConfigMap sets it.
        let response_start_timeout = data
            .contains_key("revision-response-start-timeout-seconds")
            .then(|| integer("revision-response-start-timeout-seconds", 0));
        let enable_service_links = match data.get("enable-service-links").map(|v| v.trim()) {
            None | Some("false") => Some(false),
            Some("true") => Some(true),
            Some("default") => None,
            Some(other) => {
                serving_source.notes.push(format!(
                    "enable-service-links: {other:?} is not true, false or default; the built-in false is used"
                ));
                Some(false)
            }
        };
        let resources = RESOURCE_KEYS
            .iter()
            .filter_map(|(key, kind, resource)| {
                let value = data.get(*key)?.trim();
                (!value.is_empty()).then(|| (*kind, *resource, value.to_string()))
            })
            .collect();
        let secure_pod_defaults = match features
            .and_then(|data| data.get("secure-pod-defaults"))
            .map(|value| value.trim())
        {
            None | Some("disabled") => SecurePodDefaults::Disabled,
            Some("enabled") => SecurePodDefaults::Enabled,
            Some("root-allowed") => SecurePodDefaults::AllowRootBounded,
            Some(other) => {
                features_source.notes.push(format!(
                    "secure-pod-defaults: {other:?} is not enabled, root-allowed or disabled; disabled is used"
                ));
                SecurePodDefaults::Disabled
            }
        };
        let brokers = match brokers {
            // Without the ConfigMap a Broker's delivery default cannot be told: not compared.
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
        let namespace = desired
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut out = Vec::new();
        match (group, kind) {
            ("serving.knative.dev", "Service") => {
                self.revision_template(desired, &mut out);
                out.push(Expectation {
                    path: "/spec/traffic".to_string(),
                    value: Some(json!([{"latestRevision": true, "percent": 100}])),
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
                        value: None,
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
        let mut push = |path: String, value: Option<Value>, why: String| {
            out.push(Expectation { path, value, why });
        };
        push(
            format!("{spec}/timeoutSeconds"),
            Some(json!(self.timeout)),
            serving.describe("revision-timeout-seconds"),
        );
        push(
            format!("{spec}/containerConcurrency"),
            Some(json!(self.container_concurrency)),
            serving.describe("container-concurrency"),
        );
        // The timeouts below are set only when their default is below the revision timeout.
        let timeout = desired
            .pointer(&format!("{spec}/timeoutSeconds"))
            .and_then(Value::as_i64)
            .filter(|timeout| *timeout != 0)
            .unwrap_or(self.timeout);
        let bounded = |value: i64| (value != 0 && value < timeout).then(|| json!(value));
        push(
            format!("{spec}/idleTimeoutSeconds"),
            bounded(self.idle_timeout),
            serving.describe("revision-idle-timeout-seconds"),
        );
        if let Some(response_start) = self.response_start_timeout {
            push(
                format!("{spec}/responseStartTimeoutSeconds"),
                bounded(response_start),
                serving.describe("revision-response-start-timeout-seconds"),
            );
        }
        push(
            format!("{spec}/enableServiceLinks"),
            self.enable_service_links.map(Value::Bool),
            serving.describe("enable-service-links"),
        );
        let containers = desired
            .pointer(&format!("{spec}/containers"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let pod_security = desired.pointer(&format!("{spec}/securityContext"));
        for (index, container) in containers.iter().enumerate() {
            let base = format!("{spec}/containers/{index}");
            for kind in ["requests", "limits"] {
                for resource in ["cpu", "memory", "ephemeral-storage"] {
                    let value = self
                        .resources
                        .iter()
                        .find(|(k, r, _)| *k == kind && *r == resource)
                        .map(|(_, _, quantity)| json!(quantity));
                    push(
                        push_pointer(&format!("{base}/resources/{kind}"), resource),
                        value,
                        serving.describe(&format!(
                            "revision-{}-{}",
                            resource,
                            if kind == "requests" {
                                "request"
                            } else {
                                "limit"
                            }
                        )),
                    );
                }
            }
            push(
                format!("{base}/securityContext"),
                self.security_context(container, pod_security),
                self.sources[1].describe("secure-pod-defaults"),
            );
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
            .and_then(|pod| pod.pointer("/seccompProfile/type"))
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
        let pod_non_root = pod.and_then(|pod| pod.get("runAsNonRoot")).is_some();
        if self.secure_pod_defaults == SecurePodDefaults::Enabled && !pod_non_root {
            context.insert("runAsNonRoot".into(), json!(true));
        }
        Some(Value::Object(context))
    }

    fn broker(&self, namespace: &str, out: &mut Vec<Expectation>) {
        let source = &self.sources[2];
        let settings = self.broker_defaults(namespace);
        out.push(Expectation {
            path: push_pointer("/metadata/annotations", BROKER_CLASS),
            value: Some(json!(settings
                .class
                .unwrap_or_else(|| BUILT_IN_BROKER_CLASS.to_string()))),
            why: source.describe("brokerClass"),
        });
        if self.brokers.is_some() {
            out.push(Expectation {
                path: "/spec/delivery".to_string(),
                value: settings.delivery,
                why: source.describe("delivery"),
            });
        }
    }

    /// `GetBrokerClass` and `GetBrokerConfig` of Knative's `config-br-defaults`: the
    /// namespace's entry when it has one, else the cluster default.
    fn broker_defaults(&self, namespace: &str) -> BrokerDefaults {
        let Some(config) = &self.brokers else {
            return BrokerDefaults::default();
        };
        let cluster = config.get("clusterDefault");
        let own = config
            .get("namespaceDefaults")
            .and_then(|namespaces| namespaces.get(namespace));
        let text = |entry: Option<&Value>, key: &str| {
            entry
                .and_then(|entry| entry.get(key))
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_string)
        };
        let class = text(own, "brokerClass").or_else(|| text(cluster, "brokerClass"));
        let delivery = own
            .or(cluster)
            .and_then(|entry| entry.get("delivery"))
            .filter(|delivery| !delivery.is_null())
            .cloned();
        BrokerDefaults { class, delivery }
    }
}

/// What Knative would have put at one path the manifest leaves out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expectation {
    /// JSON pointer.
    pub(crate) path: String,
    /// The value; `None` when Knative leaves the field unset (or empty).
    pub(crate) value: Option<Value>,
    /// Where the value came from, for the report.
    pub(crate) why: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    fn service() -> Value {
        json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service",
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {"template": {"spec": {"containers": [{"image": "img"}]}}}})
    }

    fn value_at<'a>(expectations: &'a [Expectation], path: &str) -> Option<&'a Value> {
        expectations
            .iter()
            .find(|expectation| expectation.path == path)
            .unwrap_or_else(|| panic!("no expectation at {path}"))
            .value
            .as_ref()
    }

    #[test]
    fn built_in_defaults_without_config_maps() {
        let defaults = KnativeDefaults::default();
        assert!(defaults.sources().iter().all(|source| !source.found));
        let out = defaults.expectations(&service());
        assert_eq!(
            value_at(&out, "/spec/template/spec/timeoutSeconds"),
            Some(&json!(300))
        );
        assert_eq!(
            value_at(&out, "/spec/template/spec/containerConcurrency"),
            Some(&json!(0))
        );
        assert_eq!(
            value_at(&out, "/spec/template/spec/enableServiceLinks"),
            Some(&json!(false))
        );
        assert_eq!(
            value_at(
                &out,
                "/spec/template/spec/containers/0/resources/limits/memory"
            ),
            None
        );
        assert_eq!(
            value_at(&out, "/spec/template/spec/containers/0/securityContext"),
            None
        );
        assert_eq!(
            value_at(&out, "/spec/traffic"),
            Some(&json!([{"latestRevision": true, "percent": 100}]))
        );
        assert!(out[0].why.contains("not found"), "{}", out[0].why);
    }

    #[test]
    fn config_maps_change_the_defaults() {
        let serving = map(&[
            ("revision-timeout-seconds", "600"),
            ("container-concurrency", "10"),
            ("revision-idle-timeout-seconds", "120"),
            ("revision-memory-limit", "200M"),
            ("enable-service-links", "default"),
        ]);
        let features = map(&[("secure-pod-defaults", "enabled")]);
        let defaults =
            KnativeDefaults::from_config_maps(|namespace, name| match (namespace, name) {
                ("knative-serving", "config-defaults") => Some(&serving),
                ("knative-serving", "config-features") => Some(&features),
                _ => None,
            });
        let out = defaults.expectations(&service());
        assert_eq!(
            value_at(&out, "/spec/template/spec/timeoutSeconds"),
            Some(&json!(600))
        );
        assert_eq!(
            value_at(&out, "/spec/template/spec/containerConcurrency"),
            Some(&json!(10))
        );
        assert_eq!(
            value_at(&out, "/spec/template/spec/idleTimeoutSeconds"),
            Some(&json!(120))
        );
        assert_eq!(
            value_at(&out, "/spec/template/spec/enableServiceLinks"),
            None
        );
        assert_eq!(
            value_at(
                &out,
                "/spec/template/spec/containers/0/resources/limits/memory"
            ),
            Some(&json!("200M"))
        );
        assert_eq!(
            value_at(&out, "/spec/template/spec/containers/0/securityContext"),
            Some(
                &json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
            )
        );
        assert!(out[0].why.contains("(found)"), "{}", out[0].why);
    }

    #[test]
    fn a_bad_value_falls_back_and_is_noted() {
        let serving = map(&[("revision-timeout-seconds", "five minutes")]);
        let defaults = KnativeDefaults::from_config_maps(|_, name| {
            (name == "config-defaults").then_some(&serving)
        });
        assert_eq!(
            value_at(
                &defaults.expectations(&service()),
                "/spec/template/spec/timeoutSeconds"
            ),
            Some(&json!(300))
        );
        assert_eq!(
            defaults.sources()[0].notes,
            ["revision-timeout-seconds: \"five minutes\" is not an integer; the built-in 300 is used"]
        );
    }

    #[test]
    fn broker_defaults_come_per_namespace_from_config_br_defaults() {
        let config = map(&[(
            "default-br-config",
            "clusterDefault:\n  brokerClass: MTChannelBasedBroker\n  delivery:\n    retry: 10\nnamespaceDefaults:\n  kafka-ns:\n    brokerClass: Kafka\n",
        )]);
        let defaults = KnativeDefaults::from_config_maps(|_, name| {
            (name == "config-br-defaults").then_some(&config)
        });
        let broker = |namespace: &str| {
            json!({"apiVersion": "eventing.knative.dev/v1", "kind": "Broker",
                "metadata": {"name": "default", "namespace": namespace}})
        };
        let class = "/metadata/annotations/eventing.knative.dev~1broker.class";
        let out = defaults.expectations(&broker("apps"));
        assert_eq!(value_at(&out, class), Some(&json!("MTChannelBasedBroker")));
        assert_eq!(
            value_at(&out, "/spec/delivery"),
            Some(&json!({"retry": 10}))
        );
        let out = defaults.expectations(&broker("kafka-ns"));
        assert_eq!(value_at(&out, class), Some(&json!("Kafka")));
        // Without the ConfigMap the class is built in and the delivery is not compared.
        let out = KnativeDefaults::default().expectations(&broker("apps"));
        assert_eq!(value_at(&out, class), Some(&json!("MTChannelBasedBroker")));
        assert!(out.iter().all(|e| e.path != "/spec/delivery"));
    }
}
