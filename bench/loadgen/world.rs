//! The benchmark's synthetic cluster, built from the real Knative objects in
//! `tests/fixtures/knative/serving/` and the objects derived from Knative's sources in
//! `tests/fixtures/knative/derived/`.
//!
//! One "app" is what Knative and its user create for one Service ([`OBJECTS_PER_APP`] = 11
//! objects, 2 to 20 KB each as JSON, with `managedFields` tries): the Service, its Configuration
//! and Route, two Revisions, the active Revision's Deployment and one Pod; Serving's internals
//! for them, the active Revision's PodAutoscaler (named after it, owned by it) and the Route's
//! KIngress (named after it, owned by it); and Eventing: a Broker (`{service}-broker`) and a
//! Trigger (`{service}-events`) from it to the Service. Each object follows a 20-step script that
//! returns to its starting spec, so the event list can be replayed in a loop: `S` a status-only
//! update (the controller, the autoscaler, kourier, `mtchannel-broker`, kube-controller-manager or
//! kubelet writes status), `a` a spec change by a trusted manager (Argo CD, Knative's controller,
//! the autoscaler), `d` a spec change by `kubectl-edit` (a drift: `manual_edit` fires), `r` a
//! trusted manager writing the edited field back (the drift resolves). Over one app the mix is
//! exactly 184 `S` : 27 `a`/`r` (18 `a`, 9 `r`) : 9 `d` of 220 events = 83.6 % : 12.3 % : 4.1 %
//! (checked by the tests below, `cargo test --example bench-loadgen`).
//!
//! The status churn stays within every class's grace: Revisions and their PodAutoscaler scale
//! 1 → 2 → 1 with `actual` one step behind `desired`, a KIngress's `LoadBalancerReady` (and
//! `Ready`) is `Unknown` for one step of each script, `observedGeneration` catches up on the
//! status write after a spec change. The Trigger's `a` steps move `spec.filter.attributes.type`
//! between two event types (Argo CD), its `d` step sets a third by hand and its `r` step writes
//! the value before the edit back; Broker, KIngress and PodAutoscaler take status writes only.
//!
//! Field ownership is simulated as the API server does it: the manager that writes a field takes
//! it over from the others, and its `time` moves, so attribution sees what it sees in a cluster.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// Placeholder for the CloudEvent id (36 characters, the length of a UUID).
pub(crate) const ID_PLACE: &str = "%%%%%%%%-%%%%-%%%%-%%%%-%%%%%%%%%%%%";
/// Placeholder for `metadata.resourceVersion` (15 digits once filled in).
pub(crate) const RV_PLACE: &str = "^^^^^^^^^^^^^^^";
/// Placeholder for the CloudEvent `time` (30 characters, the length of an RFC 3339 UTC time
/// with nanoseconds: what `client::Clock::now` gives when a request is sent).
pub(crate) const TIME_PLACE: &str = "####-##-##T##:##:##.#########Z";
/// The `time` of the events that are not sent but kept: the replay file (`gen --replay`) and
/// the micro-benchmarks (`benches/pipeline`), which stay the same from run to run.
pub(crate) const FIXED_TIME: &str = "2026-11-29T10:00:00.000000000Z";
/// The CloudEvent source every event carries (the in-cluster API server address).
pub(crate) const SOURCE: &str = "https://10.96.0.1:443";
/// Steps in one object's script.
pub(crate) const STEPS: usize = 20;
/// Objects in one app (what [`app`] returns): the loaders and the stats count apps with it.
pub(crate) const OBJECTS_PER_APP: usize = 11;

const SERVICE_PLAN: &str = "SaSdSrSaSdSrSaSdSraS";
const CONFIGURATION_PLAN: &str = "SaSSdSrSaSSSaSdSrSaS";
const DEPLOYMENT_PLAN: &str = "SaSaSdSrSaSaSdSrSaSa";
const STATUS_PLAN: &str = "SSSSSSSSSSSSSSSSSSSS";
const TRIGGER_PLAN: &str = "SaSSdSrSaSSSaSdSrSaS";

/// The two event types Argo CD moves a Trigger's filter between (`a` steps), and the one a
/// person sets by hand (`d` steps).
const TRIGGER_TYPES: [&str; 2] = ["com.example.order.created", "com.example.order.updated"];
const TRIGGER_HAND_TYPE: &str = "com.example.order.cancelled";

const SA_ARGO: &str = "system:serviceaccount:argocd:argocd-application-controller";
const PERSON: &str = "jane@example.com";

/// The fixture objects every app is cloned from.
pub(crate) struct Fixtures {
    service: Value,
    revision: Value,
    configuration: Value,
    route: Value,
    pod_autoscaler: Value,
    ingress: Value,
    broker: Value,
    trigger: Value,
}

impl Fixtures {
    /// Reads the fixtures under `root` (the repository): the real Serving objects in
    /// `tests/fixtures/knative/serving/` and the objects derived from Knative's sources in
    /// `tests/fixtures/knative/derived/` (PodAutoscaler, KIngress, Broker, Trigger).
    pub(crate) fn load(root: &Path) -> Result<Fixtures, String> {
        let dir = root.join("tests/fixtures/knative/serving");
        let derived = root.join("tests/fixtures/knative/derived");
        let read = |name: &str| -> Result<String, String> {
            std::fs::read_to_string(dir.join(name)).map_err(|error| format!("{name}: {error}"))
        };
        let derived_yaml = |name: &str| -> Result<Value, String> {
            let text = std::fs::read_to_string(derived.join(name))
                .map_err(|error| format!("{name}: {error}"))?;
            serde_saphyr::from_str::<Value>(&text).map_err(|e| format!("{name}: {e}"))
        };
        let list = |name: &str| -> Result<Value, String> {
            let value: Value = serde_json::from_str(&read(name)?).map_err(|e| e.to_string())?;
            value["items"][0]
                .as_object()
                .map(|_| value["items"][0].clone())
                .ok_or_else(|| format!("{name}: no items"))
        };
        let yaml = |name: &str| -> Result<Value, String> {
            serde_saphyr::from_str::<Value>(&read(name)?).map_err(|e| e.to_string())
        };
        Ok(Fixtures {
            service: list(
                "redhat-developer-vscode-knative__test-servingTree-singleServiceServiceList.json",
            )?,
            revision: list(
                "redhat-developer-vscode-knative__test-servingTree-singleServiceRevisionList.json",
            )?,
            configuration: yaml(
                "rguske-github-io__knative-serving-unwrapped__configuration-knative-webapp.yaml",
            )?,
            route: yaml("rguske-github-io__knative-serving-unwrapped__route-knative-webapp.yaml")?,
            pod_autoscaler: derived_yaml("podautoscaler-active.yaml")?,
            ingress: derived_yaml("ingress-ready.yaml")?,
            broker: derived_yaml("broker-ready.yaml")?,
            trigger: derived_yaml("trigger-ready.yaml")?,
        })
    }
}

/// A deterministic UUID-shaped uid.
pub(crate) fn uid(seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

fn digest_of(seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn time_at(step: usize) -> String {
    let seconds = 36_000 + step * 7;
    format!(
        "2026-11-29T{:02}:{:02}:{:02}Z",
        seconds / 3600,
        (seconds / 60) % 60,
        seconds % 60
    )
}

/// What an event does to its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Status-only update.
    Status,
    /// Spec change by a trusted manager (including writing a drifted field back).
    Trusted,
    /// Spec change by `kubectl-edit`.
    Drift,
}

impl Op {
    /// One-letter code.
    pub(crate) fn code(self) -> char {
        match self {
            Op::Status => 'S',
            Op::Trusted => 'T',
            Op::Drift => 'D',
        }
    }
}

#[derive(Debug, Clone)]
struct Manager {
    name: &'static str,
    subresource: &'static str,
    time: String,
    paths: Vec<Vec<String>>,
}

fn path(segments: &[&str]) -> Vec<String> {
    segments.iter().map(|s| s.to_string()).collect()
}

fn keyed(name: &str) -> String {
    format!("k:{{\"name\":\"{name}\"}}")
}

/// One simulated object.
#[derive(Debug, Clone)]
pub(crate) struct Object {
    /// The object without `managedFields` (rendered from `managers`).
    pub value: Value,
    managers: Vec<Manager>,
    plan: &'static str,
    status_steps: usize,
    /// The value a `d` step replaced, which the next `r` step writes back.
    edited_from: Option<Value>,
}

impl Object {
    fn new(value: Value, plan: &'static str, managers: Vec<Manager>) -> Object {
        Object {
            value,
            managers,
            plan,
            status_steps: 0,
            edited_from: None,
        }
    }

    /// `apiVersion`, `kind`, namespace and name.
    pub(crate) fn ident(&self) -> (String, String, String, String) {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        (
            text(&self.value["apiVersion"]),
            text(&self.value["kind"]),
            text(&self.value["metadata"]["namespace"]),
            text(&self.value["metadata"]["name"]),
        )
    }

    fn write(
        &mut self,
        manager: &'static str,
        subresource: &'static str,
        field: &[&str],
        at: &str,
    ) {
        let owned = path(field);
        for entry in &mut self.managers {
            entry.paths.retain(|p| p != &owned);
        }
        self.managers.retain(|entry| !entry.paths.is_empty());
        match self
            .managers
            .iter_mut()
            .find(|entry| entry.name == manager && entry.subresource == subresource)
        {
            Some(entry) => {
                entry.paths.push(owned);
                entry.time = at.to_string();
            }
            None => self.managers.push(Manager {
                name: manager,
                subresource,
                time: at.to_string(),
                paths: vec![owned],
            }),
        }
    }

    fn touch(&mut self, manager: &'static str, subresource: &'static str, at: &str) {
        for entry in &mut self.managers {
            if entry.name == manager && entry.subresource == subresource {
                entry.time = at.to_string();
            }
        }
    }

    /// A trusted manager moves the template's autoscaling target between 100 and 70: a spec
    /// change that creates no drift (Services and Configurations share the field).
    fn toggle_target(&mut self, manager: &'static str, at: &str) -> Op {
        let path = [
            "f:spec",
            "f:template",
            "f:metadata",
            "f:annotations",
            "f:autoscaling.knative.dev/target",
        ];
        let annotations = &mut self.value["spec"]["template"]["metadata"]["annotations"];
        let next = if annotations["autoscaling.knative.dev/target"] == "100" {
            "70"
        } else {
            "100"
        };
        annotations["autoscaling.knative.dev/target"] = json!(next);
        self.write(manager, "", &path, at);
        self.bump_generation();
        Op::Trusted
    }

    fn bump_generation(&mut self) {
        let generation = self.value["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
        self.value["metadata"]["generation"] = json!(generation);
    }

    /// The object as JSON, `managedFields` included, with `resourceVersion` = `rv`.
    pub(crate) fn render(&self, rv: &str) -> String {
        let mut value = self.value.clone();
        let api_version = value["apiVersion"].clone();
        let fields: Vec<Value> = self
            .managers
            .iter()
            .map(|manager| {
                let mut trie = Map::new();
                for owned in &manager.paths {
                    insert_path(&mut trie, owned);
                }
                let mut entry = json!({
                    "apiVersion": api_version,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": Value::Object(trie),
                    "manager": manager.name,
                    "operation": "Update",
                    "time": manager.time,
                });
                if !manager.subresource.is_empty() {
                    entry["subresource"] = json!(manager.subresource);
                }
                entry
            })
            .collect();
        value["metadata"]["managedFields"] = Value::Array(fields);
        value["metadata"]["resourceVersion"] = json!(rv);
        serde_json::to_string(&value).unwrap_or_default()
    }

    /// Applies step `step` of the script; returns what it was.
    pub(crate) fn step(&mut self, step: usize) -> Op {
        let at = time_at(step);
        let code = self.plan.as_bytes()[step % STEPS] as char;
        let kind = self.value["kind"].as_str().unwrap_or_default().to_string();
        match (kind.as_str(), code) {
            (_, 'S') => {
                self.status(&kind, &at);
                Op::Status
            }
            ("Service", 'a') => {
                self.value["metadata"]["annotations"]["serving.knative.dev/lastModifier"] =
                    json!(SA_ARGO);
                self.toggle_target("argocd-application-controller", &at)
            }
            ("Service", 'd') | ("Service", 'r') => {
                let path = [
                    "f:spec",
                    "f:template",
                    "f:metadata",
                    "f:annotations",
                    "f:autoscaling.knative.dev/max-scale",
                ];
                let (value, manager, user) = if code == 'd' {
                    ("3", "kubectl-edit", PERSON)
                } else {
                    ("10", "argocd-application-controller", SA_ARGO)
                };
                self.value["spec"]["template"]["metadata"]["annotations"]
                    ["autoscaling.knative.dev/max-scale"] = json!(value);
                self.value["metadata"]["annotations"]["serving.knative.dev/lastModifier"] =
                    json!(user);
                self.write(manager, "", &path, &at);
                self.bump_generation();
                if code == 'd' {
                    Op::Drift
                } else {
                    Op::Trusted
                }
            }
            ("Configuration", 'a') => self.toggle_target("controller", &at),
            ("Configuration", 'd') | ("Configuration", 'r') => {
                let path = ["f:spec", "f:template", "f:spec", "f:timeoutSeconds"];
                let (value, manager) = if code == 'd' {
                    (600, "kubectl-edit")
                } else {
                    (300, "controller")
                };
                self.value["spec"]["template"]["spec"]["timeoutSeconds"] = json!(value);
                self.write(manager, "", &path, &at);
                self.bump_generation();
                if code == 'd' {
                    Op::Drift
                } else {
                    Op::Trusted
                }
            }
            ("Deployment", 'a') => {
                let replicas = if self.value["spec"]["replicas"] == 1 {
                    2
                } else {
                    1
                };
                self.value["spec"]["replicas"] = json!(replicas);
                self.write("autoscaler", "scale", &["f:spec", "f:replicas"], &at);
                self.bump_generation();
                Op::Trusted
            }
            ("Deployment", 'd') | ("Deployment", 'r') => {
                let (value, manager) = if code == 'd' {
                    (120, "kubectl-edit")
                } else {
                    (600, "controller")
                };
                self.value["spec"]["progressDeadlineSeconds"] = json!(value);
                self.write(manager, "", &["f:spec", "f:progressDeadlineSeconds"], &at);
                self.bump_generation();
                if code == 'd' {
                    Op::Drift
                } else {
                    Op::Trusted
                }
            }
            ("Trigger", 'a') => {
                let attributes = &mut self.value["spec"]["filter"]["attributes"];
                let next = if attributes["type"] == TRIGGER_TYPES[0] {
                    TRIGGER_TYPES[1]
                } else {
                    TRIGGER_TYPES[0]
                };
                attributes["type"] = json!(next);
                self.write_trigger_type("argocd-application-controller", SA_ARGO, &at);
                Op::Trusted
            }
            ("Trigger", 'd') => {
                let attributes = &mut self.value["spec"]["filter"]["attributes"];
                self.edited_from = Some(attributes["type"].clone());
                attributes["type"] = json!(TRIGGER_HAND_TYPE);
                self.write_trigger_type("kubectl-edit", PERSON, &at);
                Op::Drift
            }
            ("Trigger", 'r') => {
                // Argo CD's self-heal writes back what Git holds: the value before the edit.
                let restored = self
                    .edited_from
                    .take()
                    .unwrap_or_else(|| json!(TRIGGER_TYPES[0]));
                self.value["spec"]["filter"]["attributes"]["type"] = restored;
                self.write_trigger_type("argocd-application-controller", SA_ARGO, &at);
                Op::Trusted
            }
            _ => {
                self.status(&kind, &at);
                Op::Status
            }
        }
    }

    /// A status-only write at step `step` whatever the script says there (the flatness and
    /// large-object phases churn status only). A ConfigMap has no status: it gets
    /// [`Object::touch_step`].
    pub(crate) fn status_step(&mut self, step: usize) -> Op {
        let kind = self.value["kind"].as_str().unwrap_or_default().to_string();
        if kind == "ConfigMap" {
            return self.touch_step(step);
        }
        self.status(&kind, &time_at(step));
        Op::Status
    }

    /// An update that changes nothing but a `managedFields` time (the status writer's, else the
    /// first manager's) at step `step`: with its new `resourceVersion`, a no-change update.
    pub(crate) fn touch_step(&mut self, step: usize) -> Op {
        let at = time_at(step);
        let status = self
            .managers
            .iter()
            .position(|entry| entry.subresource == "status")
            .unwrap_or(0);
        if let Some(entry) = self.managers.get_mut(status) {
            entry.time = at;
        }
        Op::Status
    }

    /// Records a write of a Trigger's `spec.filter.attributes.type` by `manager` (`user` is
    /// what Eventing's webhook stamps as the last modifier).
    fn write_trigger_type(&mut self, manager: &'static str, user: &str, at: &str) {
        self.value["metadata"]["annotations"]["eventing.knative.dev/lastModifier"] = json!(user);
        self.write(
            manager,
            "",
            &["f:spec", "f:filter", "f:attributes", "f:type"],
            at,
        );
        self.bump_generation();
    }

    /// A status-only write: conditions' times always move; some steps change kept fields too.
    fn status(&mut self, kind: &str, at: &str) {
        let k = self.status_steps;
        self.status_steps += 1;
        let generation = self.value["metadata"]["generation"].clone();
        let status = &mut self.value["status"];
        if let Some(conditions) = status["conditions"].as_array_mut() {
            for condition in conditions {
                condition["lastTransitionTime"] = json!(at);
                if kind == "Pod" {
                    condition["lastProbeTime"] = Value::Null;
                }
            }
        }
        let (manager, subresource) = match kind {
            "Deployment" => ("kube-controller-manager", "status"),
            "Pod" => ("kubelet", "status"),
            // The KPA reconciler runs in Serving's `autoscaler`, the KIngress one in net-kourier's
            // `kourier`, Broker and Trigger status in Eventing's `mtchannel-broker` (as in the
            // derived fixtures' managedFields).
            "PodAutoscaler" => ("autoscaler", "status"),
            "Ingress" => ("kourier", "status"),
            "Broker" | "Trigger" => ("mtchannel-broker", "status"),
            _ => ("controller", "status"),
        };
        match kind {
            "Revision" => {
                let (desired, actual) = scale_at(k);
                status["desiredReplicas"] = json!(desired);
                status["actualReplicas"] = json!(actual);
            }
            "PodAutoscaler" => {
                let (desired, actual) = scale_at(k);
                status["desiredScale"] = json!(desired);
                status["actualScale"] = json!(actual);
                status["observedGeneration"] = generation;
            }
            "Ingress" => {
                // Once per script the load balancer is re-programmed: LoadBalancerReady (and
                // Ready, which follows it) is Unknown for one step, well within not_ready's grace.
                let waiting = k % STEPS == INGRESS_WAIT_STEP;
                if let Some(conditions) = status["conditions"].as_array_mut() {
                    for condition in conditions {
                        if condition["type"] != "LoadBalancerReady" && condition["type"] != "Ready"
                        {
                            continue;
                        }
                        if waiting {
                            condition["status"] = json!("Unknown");
                            condition["reason"] = json!("Uninitialized");
                            condition["message"] = json!("Waiting for load balancer to be ready");
                        } else if let Some(fields) = condition.as_object_mut() {
                            fields.insert("status".into(), json!("True"));
                            fields.remove("reason");
                            fields.remove("message");
                        }
                    }
                }
                status["observedGeneration"] = generation;
            }
            "Deployment" => {
                let replicas = self.value["spec"]["replicas"].clone();
                let status = &mut self.value["status"];
                status["observedGeneration"] = generation;
                for key in [
                    "replicas",
                    "readyReplicas",
                    "availableReplicas",
                    "updatedReplicas",
                ] {
                    status[key] = replicas.clone();
                }
            }
            "Pod" => {
                if let Some(items) = status["containerStatuses"].as_array_mut() {
                    for item in items {
                        item["restartCount"] = json!(k / 5);
                    }
                }
            }
            _ => status["observedGeneration"] = generation,
        }
        self.touch(manager, subresource, at);
    }
}

/// The step of each script at which a KIngress waits for its load balancer.
const INGRESS_WAIT_STEP: usize = 7;

/// `(desired, actual)` replicas at status step `k`: up to 2 and back once every 10 steps,
/// `actual` following `desired` one step later (a one-step shortfall, then a one-step excess).
/// A Revision's `desiredReplicas`/`actualReplicas` and its PodAutoscaler's
/// `desiredScale`/`actualScale` move the same way.
fn scale_at(k: usize) -> (u32, u32) {
    let desired = if (1..=4).contains(&(k % 10)) { 2 } else { 1 };
    let actual = if (2..=5).contains(&(k % 10)) { 2 } else { 1 };
    (desired, actual)
}

fn insert_path(trie: &mut Map<String, Value>, segments: &[String]) {
    let Some((first, rest)) = segments.split_first() else {
        return;
    };
    let node = trie
        .entry(first.clone())
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(map) = node {
        insert_path(map, rest);
    }
}

/// Knative's queue-proxy environment (names and typical values from `knative/serving`'s
/// `pkg/reconciler/revision/resources/queue.go`): the bulk of a Knative Deployment's size.
fn queue_env(namespace: &str, service: &str, revision: &str) -> Vec<(String, String)> {
    let logging = r#"{"level":"info","development":false,"outputPaths":["stdout"],"errorOutputPaths":["stderr"],"encoding":"json","encoderConfig":{"timeKey":"timestamp","levelKey":"severity","nameKey":"logger","callerKey":"caller","messageKey":"message","stacktraceKey":"stacktrace","lineEnding":"","levelEncoder":"","timeEncoder":"iso8601","durationEncoder":"","callerEncoder":""}}"#;
    let request_log = r#"{"httpRequest": {"requestMethod": "{{.Request.Method}}", "requestUrl": "{{js .Request.RequestURI}}", "requestSize": "{{.Request.ContentLength}}", "status": {{.Response.Code}}, "responseSize": "{{.Response.Size}}", "userAgent": "{{js .Request.UserAgent}}", "remoteIp": "{{js .Request.RemoteAddr}}", "serverIp": "{{.Revision.PodIP}}", "referer": "{{js .Request.Referer}}", "latency": "{{.Response.Latency}}s", "protocol": "{{.Request.Proto}}"}, "traceId": "{{index .Request.Header "X-B3-Traceid"}}"}"#;
    [
        ("SERVING_NAMESPACE", namespace.to_string()),
        ("SERVING_SERVICE", service.to_string()),
        ("SERVING_CONFIGURATION", service.to_string()),
        ("SERVING_REVISION", revision.to_string()),
        ("QUEUE_SERVING_PORT", "8012".into()),
        ("QUEUE_SERVING_TLS_PORT", "8112".into()),
        ("CONTAINER_CONCURRENCY", "0".into()),
        ("REVISION_TIMEOUT_SECONDS", "300".into()),
        ("REVISION_RESPONSE_START_TIMEOUT_SECONDS", "0".into()),
        ("REVISION_IDLE_TIMEOUT_SECONDS", "0".into()),
        ("SERVING_POD", "".into()),
        ("SERVING_POD_IP", "".into()),
        ("SERVING_LOGGING_CONFIG", logging.into()),
        ("SERVING_LOGGING_LEVEL", "".into()),
        ("SERVING_REQUEST_LOG_TEMPLATE", request_log.into()),
        ("SERVING_ENABLE_REQUEST_LOG", "false".into()),
        ("SERVING_REQUEST_METRICS_BACKEND", "prometheus".into()),
        (
            "SERVING_REQUEST_METRICS_REPORTING_PERIOD_SECONDS",
            "5".into(),
        ),
        ("TRACING_CONFIG_BACKEND", "none".into()),
        ("TRACING_CONFIG_ZIPKIN_ENDPOINT", "".into()),
        ("TRACING_CONFIG_DEBUG", "false".into()),
        ("TRACING_CONFIG_SAMPLE_RATE", "0.1".into()),
        ("USER_PORT", "8080".into()),
        ("SYSTEM_NAMESPACE", "knative-serving".into()),
        ("METRICS_DOMAIN", "knative.dev/internal/serving".into()),
        (
            "SERVING_READINESS_PROBE",
            r#"{"tcpSocket":{"port":8080,"host":"127.0.0.1"},"successThreshold":1}"#.into(),
        ),
        ("ENABLE_PROFILING", "false".into()),
        ("SERVING_ENABLE_PROBE_REQUEST_LOG", "false".into()),
        ("METRICS_COLLECTOR_ADDRESS", "".into()),
        ("HOST_IP", "".into()),
        ("ENABLE_HTTP2_AUTO_DETECTION", "false".into()),
        ("ENABLE_HTTP_FULL_DUPLEX", "false".into()),
        ("ROOT_CA", "".into()),
        ("ENABLE_MULTI_CONTAINER_PROBES", "false".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The [`OBJECTS_PER_APP`] objects of app `index` (parents first, the Service at 0), in their
/// starting state.
pub(crate) fn app(fixtures: &Fixtures, index: usize) -> Vec<Object> {
    let namespace = format!("team-{:02}", index % 40);
    let service = format!("app-{index:06}");
    let svc_uid = uid(&format!("svc/{index}"));
    let cfg_uid = uid(&format!("cfg/{index}"));
    let route_uid = uid(&format!("route/{index}"));
    let revisions = [format!("{service}-00001"), format!("{service}-00002")];
    let rev_uids = [uid(&format!("rev1/{index}")), uid(&format!("rev2/{index}"))];
    let image = format!("registry.example.com/team/{service}:v1");
    let digest = format!(
        "registry.example.com/team/{service}@sha256:{}",
        digest_of(&service)
    );
    let at0 = time_at(0);
    let owner = |kind: &str, name: &str, uid: &str| {
        json!([{"apiVersion": "serving.knative.dev/v1", "blockOwnerDeletion": true, "controller": true,
                "kind": kind, "name": name, "uid": uid}])
    };
    let ready = |types: &[&str]| -> Value {
        Value::Array(
            types
                .iter()
                .map(|t| json!({"lastTransitionTime": at0, "status": "True", "type": t}))
                .collect(),
        )
    };
    // Every fourth app carries a larger configuration in its environment (the 20 KB end).
    let mut app_env = vec![
        json!({"name": "TARGET", "value": "benchmark"}),
        json!({"name": "LOG_LEVEL", "value": "info"}),
    ];
    if index.is_multiple_of(4) {
        for key in 0..40 {
            app_env.push(json!({"name": format!("FEATURE_FLAG_{key:02}"),
                "value": format!("https://config.example.com/{service}/flags/{key}?rollout=canary&owner=team-{}", index % 40)}));
        }
    }
    let container = json!({"image": image, "name": "user-container", "env": app_env,
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "readinessProbe": {"successThreshold": 1, "tcpSocket": {"port": 0}},
        "resources": {"limits": {"cpu": "1", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}});
    let template_annotations = json!({
        "autoscaling.knative.dev/target": "100",
        "autoscaling.knative.dev/max-scale": "10",
        "client.knative.dev/user-image": image,
    });

    // Service: the vscode-knative fixture, renamed, with a kubectl last-applied annotation.
    let mut svc = fixtures.service.clone();
    svc["metadata"] = json!({
        "annotations": {
            "serving.knative.dev/creator": SA_ARGO,
            "serving.knative.dev/lastModifier": SA_ARGO,
        },
        "creationTimestamp": "2026-11-20T08:00:00Z",
        "generation": 3,
        "labels": {"app.kubernetes.io/instance": service, "app.kubernetes.io/part-of": namespace},
        "name": service, "namespace": namespace, "uid": svc_uid,
    });
    svc["spec"]["template"] = json!({"metadata": {"annotations": template_annotations, "creationTimestamp": null},
        "spec": {"containerConcurrency": 0, "containers": [container], "timeoutSeconds": 300}});
    svc["spec"]["traffic"] = json!([{"latestRevision": true, "percent": 100}]);
    let applied = json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service",
        "metadata": {"name": service, "namespace": namespace, "labels": svc["metadata"]["labels"]},
        "spec": svc["spec"]});
    svc["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!(format!("{}\n", applied));
    let url = format!("http://{service}.{namespace}.example.com");
    svc["status"] = json!({
        "address": {"url": format!("http://{service}.{namespace}.svc.cluster.local")},
        "conditions": ready(&["ConfigurationsReady", "Ready", "RoutesReady"]),
        "latestCreatedRevisionName": revisions[1], "latestReadyRevisionName": revisions[1],
        "observedGeneration": 3,
        "traffic": [{"latestRevision": true, "percent": 100, "revisionName": revisions[1]}],
        "url": url,
    });
    let svc_managers = vec![
        Manager {
            name: "argocd-application-controller",
            subresource: "",
            time: at0.clone(),
            paths: vec![
                path(&[
                    "f:metadata",
                    "f:annotations",
                    "f:kubectl.kubernetes.io/last-applied-configuration",
                ]),
                path(&["f:metadata", "f:labels", "f:app.kubernetes.io/instance"]),
                path(&["f:metadata", "f:labels", "f:app.kubernetes.io/part-of"]),
                path(&[
                    "f:spec",
                    "f:template",
                    "f:metadata",
                    "f:annotations",
                    "f:autoscaling.knative.dev/target",
                ]),
                path(&[
                    "f:spec",
                    "f:template",
                    "f:metadata",
                    "f:annotations",
                    "f:autoscaling.knative.dev/max-scale",
                ]),
                path(&[
                    "f:spec",
                    "f:template",
                    "f:metadata",
                    "f:annotations",
                    "f:client.knative.dev/user-image",
                ]),
                path(&["f:spec", "f:template", "f:spec", "f:containers"]),
                path(&["f:spec", "f:traffic"]),
            ],
        },
        Manager {
            name: "controller",
            subresource: "status",
            time: at0.clone(),
            paths: [
                "f:address",
                "f:conditions",
                "f:latestCreatedRevisionName",
                "f:latestReadyRevisionName",
                "f:observedGeneration",
                "f:traffic",
                "f:url",
            ]
            .iter()
            .map(|f| path(&["f:status", f]))
            .collect(),
        },
    ];

    // Configuration: the rguske fixture, owned by the Service.
    let mut cfg = fixtures.configuration.clone();
    cfg["metadata"] = json!({
        "annotations": {"serving.knative.dev/creator": SA_ARGO, "serving.knative.dev/lastModifier": SA_ARGO,
                        "serving.knative.dev/routes": service},
        "creationTimestamp": "2026-11-20T08:00:01Z", "generation": 3,
        "labels": {"serving.knative.dev/service": service, "serving.knative.dev/serviceUID": svc_uid},
        "name": service, "namespace": namespace, "ownerReferences": owner("Service", &service, &svc_uid),
        "uid": cfg_uid,
    });
    cfg["spec"]["template"] = svc["spec"]["template"].clone();
    cfg["status"] = json!({"conditions": ready(&["Ready"]), "latestCreatedRevisionName": revisions[1],
        "latestReadyRevisionName": revisions[1], "observedGeneration": 3});
    let owner_paths = |extra: &[&str]| -> Vec<Vec<String>> {
        let mut paths = vec![
            path(&["f:metadata", "f:labels", "f:serving.knative.dev/service"]),
            path(&[
                "f:metadata",
                "f:ownerReferences",
                &format!("k:{{\"uid\":\"{svc_uid}\"}}"),
                ".",
            ]),
        ];
        for field in extra {
            paths.push(path(&["f:spec", field]));
        }
        paths
    };
    let mut cfg_paths = owner_paths(&[]);
    for field in [
        "f:autoscaling.knative.dev/target",
        "f:autoscaling.knative.dev/max-scale",
        "f:client.knative.dev/user-image",
    ] {
        cfg_paths.push(path(&[
            "f:spec",
            "f:template",
            "f:metadata",
            "f:annotations",
            field,
        ]));
    }
    cfg_paths.push(path(&["f:spec", "f:template", "f:spec", "f:containers"]));
    cfg_paths.push(path(&[
        "f:spec",
        "f:template",
        "f:spec",
        "f:timeoutSeconds",
    ]));
    let status_manager = |fields: &[&str]| Manager {
        name: "controller",
        subresource: "status",
        time: at0.clone(),
        paths: fields.iter().map(|f| path(&["f:status", f])).collect(),
    };
    let cfg_managers = vec![
        Manager {
            name: "controller",
            subresource: "",
            time: at0.clone(),
            paths: cfg_paths,
        },
        status_manager(&[
            "f:conditions",
            "f:latestCreatedRevisionName",
            "f:latestReadyRevisionName",
            "f:observedGeneration",
        ]),
    ];

    // Route: the rguske fixture.
    let mut route = fixtures.route.clone();
    route["metadata"] = json!({
        "annotations": {"serving.knative.dev/creator": SA_ARGO, "serving.knative.dev/lastModifier": SA_ARGO},
        "creationTimestamp": "2026-11-20T08:00:01Z", "finalizers": ["routes.serving.knative.dev"],
        "generation": 1, "labels": {"serving.knative.dev/service": service}, "name": service,
        "namespace": namespace, "ownerReferences": owner("Service", &service, &svc_uid), "uid": route_uid,
    });
    route["spec"] = json!({"traffic": [{"configurationName": service, "latestRevision": true, "percent": 100}]});
    route["status"]["address"] =
        json!({"url": format!("http://{service}.{namespace}.svc.cluster.local")});
    route["status"]["conditions"] = ready(&[
        "AllTrafficAssigned",
        "CertificateProvisioned",
        "IngressReady",
        "Ready",
    ]);
    route["status"]["observedGeneration"] = json!(1);
    route["status"]["traffic"] =
        json!([{"latestRevision": true, "percent": 100, "revisionName": revisions[1]}]);
    route["status"]["url"] = json!(url);
    let route_managers = vec![
        Manager {
            name: "controller",
            subresource: "",
            time: at0.clone(),
            paths: owner_paths(&["f:traffic"]),
        },
        status_manager(&[
            "f:address",
            "f:conditions",
            "f:observedGeneration",
            "f:traffic",
            "f:url",
        ]),
    ];

    // Revisions: the vscode-knative fixture, current naming and labels.
    let mut objects = vec![
        Object::new(svc, SERVICE_PLAN, svc_managers),
        Object::new(cfg, CONFIGURATION_PLAN, cfg_managers),
        Object::new(route, STATUS_PLAN, route_managers),
    ];
    for (number, (name, rev_uid)) in revisions.iter().zip(&rev_uids).enumerate() {
        let mut rev = fixtures.revision.clone();
        rev["metadata"] = json!({
            "annotations": {"serving.knative.dev/creator": SA_ARGO, "serving.knative.dev/routingStateModified": "2026-11-20T08:00:02Z",
                            "autoscaling.knative.dev/target": "100", "autoscaling.knative.dev/max-scale": "10"},
            "creationTimestamp": "2026-11-20T08:00:02Z", "generation": 1,
            "labels": {"serving.knative.dev/configuration": service, "serving.knative.dev/configurationGeneration": (number + 1).to_string(),
                       "serving.knative.dev/configurationUID": cfg_uid, "serving.knative.dev/routingState": if number == 1 { "active" } else { "reserve" },
                       "serving.knative.dev/service": service, "serving.knative.dev/serviceUID": svc_uid},
            "name": name, "namespace": namespace, "ownerReferences": owner("Configuration", &service, &cfg_uid), "uid": rev_uid,
        });
        rev["spec"] =
            json!({"containerConcurrency": 0, "containers": [container], "timeoutSeconds": 300});
        rev["status"]["imageDigest"] = json!(digest);
        rev["status"]["containerStatuses"] =
            json!([{"imageDigest": digest, "name": "user-container"}]);
        rev["status"]["serviceName"] = json!(name);
        rev["status"]["actualReplicas"] = json!(1);
        rev["status"]["desiredReplicas"] = json!(1);
        rev["status"]["logUrl"] = json!(format!("http://localhost:8001/api/v1/namespaces/knative-monitoring/services/kibana-logging/proxy/app/kibana#/discover?_a=(query:(match:(kubernetes.labels.knative-dev%2FrevisionUID:(query:'{rev_uid}',type:phrase))))"));
        if let Some(conditions) = rev["status"]["conditions"].as_array_mut() {
            for condition in conditions.iter_mut() {
                condition["lastTransitionTime"] = json!(at0);
                if condition["type"] == "Active" && number == 1 {
                    *condition =
                        json!({"lastTransitionTime": at0, "status": "True", "type": "Active"});
                }
            }
        }
        let mut paths = vec![
            path(&[
                "f:metadata",
                "f:labels",
                "f:serving.knative.dev/configuration",
            ]),
            path(&[
                "f:metadata",
                "f:labels",
                "f:serving.knative.dev/configurationUID",
            ]),
            path(&[
                "f:metadata",
                "f:labels",
                "f:serving.knative.dev/routingState",
            ]),
            path(&[
                "f:metadata",
                "f:ownerReferences",
                &format!("k:{{\"uid\":\"{cfg_uid}\"}}"),
                ".",
            ]),
        ];
        for field in ["f:containerConcurrency", "f:containers", "f:timeoutSeconds"] {
            paths.push(path(&["f:spec", field]));
        }
        let managers = vec![
            Manager {
                name: "controller",
                subresource: "",
                time: at0.clone(),
                paths,
            },
            status_manager(&[
                "f:actualReplicas",
                "f:conditions",
                "f:containerStatuses",
                "f:desiredReplicas",
                "f:imageDigest",
                "f:logUrl",
                "f:observedGeneration",
                "f:serviceName",
            ]),
        ];
        objects.push(Object::new(rev, STATUS_PLAN, managers));
    }

    // The Deployment Knative creates for the active Revision, and one of its Pods.
    let revision = &revisions[1];
    let rev_uid = &rev_uids[1];
    let env: Vec<Value> = queue_env(&namespace, &service, revision)
        .into_iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    let labels = json!({"app": revision, "serving.knative.dev/configuration": service,
        "serving.knative.dev/configurationGeneration": "2", "serving.knative.dev/configurationUID": cfg_uid,
        "serving.knative.dev/revision": revision, "serving.knative.dev/revisionUID": rev_uid,
        "serving.knative.dev/service": service, "serving.knative.dev/serviceUID": svc_uid});
    let mut user = container.clone();
    user["image"] = json!(digest);
    if let Some(e) = user["env"].as_array_mut() {
        e.push(json!({"name": "PORT", "value": "8080"}));
        e.push(json!({"name": "K_REVISION", "value": revision}));
        e.push(json!({"name": "K_CONFIGURATION", "value": service}));
        e.push(json!({"name": "K_SERVICE", "value": service}));
    }
    let queue = json!({"name": "queue-proxy", "env": env,
        "image": format!("gcr.io/knative-releases/knative.dev/serving/cmd/queue@sha256:{}", digest_of("queue")),
        "ports": [{"containerPort": 8022, "name": "http-queueadm", "protocol": "TCP"},
                  {"containerPort": 9090, "name": "http-autometric", "protocol": "TCP"},
                  {"containerPort": 9091, "name": "http-usermetric", "protocol": "TCP"},
                  {"containerPort": 8012, "name": "queue-port", "protocol": "TCP"},
                  {"containerPort": 8112, "name": "https-port", "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"httpHeaders": [{"name": "K-Network-Probe", "value": "queue"}], "path": "/", "port": 8012, "scheme": "HTTP"},
                           "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1, "failureThreshold": 3},
        "resources": {"requests": {"cpu": "25m"}},
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true, "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}}});
    let pod_spec = json!({"containers": [user, queue], "enableServiceLinks": false, "terminationGracePeriodSeconds": 300});
    let user_env: Vec<String> = user["env"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let queue_names: Vec<String> = queue_env(&namespace, &service, revision)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let container_paths = |prefix: &[&str]| -> Vec<Vec<String>> {
        let mut paths = Vec::new();
        for (name, keys) in [("user-container", &user_env), ("queue-proxy", &queue_names)] {
            let mut base = path(prefix);
            base.push("f:containers".to_string());
            base.push(keyed(name));
            for field in [
                "f:image",
                "f:name",
                "f:ports",
                "f:readinessProbe",
                "f:resources",
                "f:securityContext",
                "f:terminationMessagePath",
                "f:terminationMessagePolicy",
            ] {
                let mut segments = base.clone();
                segments.push(field.to_string());
                paths.push(segments);
            }
            for key in keys {
                for leaf in [".", "f:name", "f:value"] {
                    let mut segments = base.clone();
                    segments.extend(["f:env".to_string(), keyed(key), leaf.to_string()]);
                    paths.push(segments);
                }
            }
        }
        paths
    };
    let deployment_name = format!("{revision}-deployment");
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"annotations": {"deployment.kubernetes.io/revision": "1", "serving.knative.dev/creator": SA_ARGO},
                     "creationTimestamp": "2026-11-20T08:00:03Z", "generation": 1, "labels": labels,
                     "name": deployment_name, "namespace": namespace,
                     "ownerReferences": owner("Revision", revision, rev_uid), "uid": uid(&format!("deploy/{index}"))},
        "spec": {"progressDeadlineSeconds": 600, "replicas": 1, "revisionHistoryLimit": 10,
                 "selector": {"matchLabels": {"serving.knative.dev/revisionUID": rev_uid}},
                 "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}, "type": "RollingUpdate"},
                 "template": {"metadata": {"annotations": {"autoscaling.knative.dev/target": "100"}, "labels": labels}, "spec": pod_spec}},
        "status": {"availableReplicas": 1, "observedGeneration": 1, "readyReplicas": 1, "replicas": 1, "updatedReplicas": 1,
                   "conditions": [
                       {"lastTransitionTime": at0, "lastUpdateTime": at0, "message": "Deployment has minimum availability.", "reason": "MinimumReplicasAvailable", "status": "True", "type": "Available"},
                       {"lastTransitionTime": at0, "lastUpdateTime": at0, "message": format!("ReplicaSet \"{revision}-deployment-7d9f8b6c5\" has successfully progressed."), "reason": "NewReplicaSetAvailable", "status": "True", "type": "Progressing"}]},
    });
    let mut deploy_paths = vec![
        path(&["f:metadata", "f:labels", "f:serving.knative.dev/revision"]),
        path(&[
            "f:metadata",
            "f:labels",
            "f:serving.knative.dev/revisionUID",
        ]),
        path(&[
            "f:metadata",
            "f:ownerReferences",
            &format!("k:{{\"uid\":\"{rev_uid}\"}}"),
            ".",
        ]),
        path(&["f:spec", "f:progressDeadlineSeconds"]),
        path(&["f:spec", "f:selector"]),
        path(&["f:spec", "f:strategy", "f:rollingUpdate", "f:maxSurge"]),
        path(&[
            "f:spec",
            "f:template",
            "f:metadata",
            "f:labels",
            "f:serving.knative.dev/revisionUID",
        ]),
    ];
    deploy_paths.extend(container_paths(&["f:spec", "f:template", "f:spec"]));
    let deploy_managers = vec![
        Manager {
            name: "controller",
            subresource: "",
            time: at0.clone(),
            paths: deploy_paths,
        },
        Manager {
            name: "autoscaler",
            subresource: "scale",
            time: at0.clone(),
            paths: vec![path(&["f:spec", "f:replicas"])],
        },
        Manager {
            name: "kube-controller-manager",
            subresource: "status",
            time: at0.clone(),
            paths: [
                "f:availableReplicas",
                "f:conditions",
                "f:observedGeneration",
                "f:readyReplicas",
                "f:replicas",
                "f:updatedReplicas",
            ]
            .iter()
            .map(|f| path(&["f:status", f]))
            .collect(),
        },
    ];
    objects.push(Object::new(deployment, DEPLOYMENT_PLAN, deploy_managers));

    let pod_name = format!("{revision}-deployment-7d9f8b6c5-x{index:05}");
    let mut pod_spec = pod_spec.clone();
    pod_spec["nodeName"] = json!(format!("node-{}", index % 16));
    pod_spec["serviceAccountName"] = json!("default");
    let started = json!({"running": {"startedAt": at0}});
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"annotations": {"autoscaling.knative.dev/target": "100"}, "creationTimestamp": "2026-11-20T08:00:04Z",
                     "generateName": format!("{revision}-deployment-7d9f8b6c5-"), "labels": labels, "name": pod_name, "namespace": namespace,
                     "ownerReferences": [{"apiVersion": "apps/v1", "blockOwnerDeletion": true, "controller": true, "kind": "ReplicaSet",
                                          "name": format!("{revision}-deployment-7d9f8b6c5"), "uid": uid(&format!("rs/{index}"))}],
                     "uid": uid(&format!("pod/{index}"))},
        "spec": pod_spec,
        "status": {"conditions": [
                       {"lastProbeTime": null, "lastTransitionTime": at0, "status": "True", "type": "Initialized"},
                       {"lastProbeTime": null, "lastTransitionTime": at0, "status": "True", "type": "Ready"},
                       {"lastProbeTime": null, "lastTransitionTime": at0, "status": "True", "type": "ContainersReady"},
                       {"lastProbeTime": null, "lastTransitionTime": at0, "status": "True", "type": "PodScheduled"}],
                   "containerStatuses": [
                       {"containerID": format!("containerd://{}", digest_of(&format!("c1/{index}"))), "image": digest, "imageID": digest, "lastState": {}, "name": "user-container", "ready": true, "restartCount": 0, "started": true, "state": started},
                       {"containerID": format!("containerd://{}", digest_of(&format!("c2/{index}"))), "image": "gcr.io/knative-releases/knative.dev/serving/cmd/queue", "imageID": format!("gcr.io/knative-releases/knative.dev/serving/cmd/queue@sha256:{}", digest_of("queue")), "lastState": {}, "name": "queue-proxy", "ready": true, "restartCount": 0, "started": true, "state": started}],
                   "hostIP": format!("10.0.0.{}", index % 16 + 10), "phase": "Running", "podIP": format!("10.244.{}.{}", (index / 250) % 250, index % 250 + 2),
                   "podIPs": [{"ip": format!("10.244.{}.{}", (index / 250) % 250, index % 250 + 2)}], "qosClass": "Burstable", "startTime": at0},
    });
    let mut pod_paths = vec![
        path(&["f:metadata", "f:generateName"]),
        path(&[
            "f:metadata",
            "f:labels",
            "f:serving.knative.dev/revisionUID",
        ]),
        path(&[
            "f:metadata",
            "f:ownerReferences",
            &format!("k:{{\"uid\":\"{}\"}}", uid(&format!("rs/{index}"))),
            ".",
        ]),
        path(&["f:spec", "f:enableServiceLinks"]),
        path(&["f:spec", "f:terminationGracePeriodSeconds"]),
    ];
    pod_paths.extend(container_paths(&["f:spec"]));
    let mut kubelet_paths: Vec<Vec<String>> =
        ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
            .iter()
            .flat_map(|t| {
                let item = format!("k:{{\"type\":\"{t}\"}}");
                [
                    ".",
                    "f:lastProbeTime",
                    "f:lastTransitionTime",
                    "f:status",
                    "f:type",
                ]
                .iter()
                .map(|leaf| path(&["f:status", "f:conditions", &item, leaf]))
                .collect::<Vec<_>>()
            })
            .collect();
    for field in [
        "f:containerStatuses",
        "f:hostIP",
        "f:phase",
        "f:podIP",
        "f:podIPs",
        "f:startTime",
    ] {
        kubelet_paths.push(path(&["f:status", field]));
    }
    let pod_managers = vec![
        Manager {
            name: "kube-controller-manager",
            subresource: "",
            time: at0.clone(),
            paths: pod_paths,
        },
        Manager {
            name: "kubelet",
            subresource: "status",
            time: at0.clone(),
            paths: kubelet_paths,
        },
    ];
    objects.push(Object::new(pod, STATUS_PLAN, pod_managers));

    let ready_at = |value: &mut Value| {
        if let Some(conditions) = value["status"]["conditions"].as_array_mut() {
            for condition in conditions {
                condition["lastTransitionTime"] = json!(at0);
            }
        }
    };
    let field_paths = |prefix: &[&str], fields: &[&str]| -> Vec<Vec<String>> {
        fields
            .iter()
            .map(|field| {
                let mut segments = path(prefix);
                segments.push(field.to_string());
                segments
            })
            .collect()
    };
    let owner_ref_path = |owner_uid: &str| {
        path(&[
            "f:metadata",
            "f:ownerReferences",
            &format!("k:{{\"uid\":\"{owner_uid}\"}}"),
            ".",
        ])
    };

    // The active Revision's PodAutoscaler (`derived/podautoscaler-active.yaml`): Knative names it
    // after the Revision, copies the Revision's labels and annotations, and the autoscaler
    // writes its status.
    let mut pa = fixtures.pod_autoscaler.clone();
    pa["metadata"] = json!({
        "annotations": {"autoscaling.knative.dev/class": "kpa.autoscaling.knative.dev", "autoscaling.knative.dev/metric": "concurrency",
                        "autoscaling.knative.dev/max-scale": "10", "autoscaling.knative.dev/target": "100",
                        "serving.knative.dev/creator": SA_ARGO},
        "creationTimestamp": "2026-11-20T08:00:03Z", "generation": 1, "labels": labels,
        "name": revision, "namespace": namespace,
        "ownerReferences": owner("Revision", revision, rev_uid), "uid": uid(&format!("pa/{index}")),
    });
    pa["spec"]["scaleTargetRef"]["name"] = json!(deployment_name);
    pa["status"]["metricsServiceName"] = json!(format!("{revision}-private"));
    pa["status"]["serviceName"] = json!(revision);
    ready_at(&mut pa);
    let mut pa_paths = field_paths(
        &["f:metadata", "f:annotations"],
        &[
            "f:autoscaling.knative.dev/class",
            "f:autoscaling.knative.dev/metric",
            "f:autoscaling.knative.dev/max-scale",
            "f:autoscaling.knative.dev/target",
            "f:serving.knative.dev/creator",
        ],
    );
    pa_paths.extend(field_paths(
        &["f:metadata", "f:labels"],
        &[
            "f:app",
            "f:serving.knative.dev/configuration",
            "f:serving.knative.dev/configurationGeneration",
            "f:serving.knative.dev/configurationUID",
            "f:serving.knative.dev/revision",
            "f:serving.knative.dev/revisionUID",
            "f:serving.knative.dev/service",
            "f:serving.knative.dev/serviceUID",
        ],
    ));
    pa_paths.push(owner_ref_path(rev_uid));
    pa_paths.extend(field_paths(
        &["f:spec"],
        &["f:protocolType", "f:reachability", "f:scaleTargetRef"],
    ));
    let pa_managers = vec![
        Manager {
            name: "controller",
            subresource: "",
            time: at0.clone(),
            paths: pa_paths,
        },
        Manager {
            name: "autoscaler",
            subresource: "status",
            time: at0.clone(),
            paths: field_paths(
                &["f:status"],
                &[
                    "f:actualScale",
                    "f:conditions",
                    "f:desiredScale",
                    "f:metricsServiceName",
                    "f:observedGeneration",
                    "f:serviceName",
                ],
            ),
        },
    ];
    objects.push(Object::new(pa, STATUS_PLAN, pa_managers));

    // The Route's KIngress (`derived/ingress-ready.yaml`, net-kourier): named after the Route,
    // one split to the active Revision on the cluster-local and the external hosts.
    let mut ingress = fixtures.ingress.clone();
    let rollout = json!({"configurations": [{"configurationName": service, "percent": 100,
        "revisions": [{"percent": 100, "revisionName": revision}], "stepParams": {}}]});
    ingress["metadata"] = json!({
        "annotations": {"networking.internal.knative.dev/rollout": rollout.to_string(),
                        "networking.knative.dev/ingress.class": "kourier.ingress.networking.knative.dev",
                        "serving.knative.dev/creator": SA_ARGO, "serving.knative.dev/lastModifier": SA_ARGO},
        "creationTimestamp": "2026-11-20T08:00:02Z", "finalizers": ["ingresses.networking.internal.knative.dev"],
        "generation": 1,
        "labels": {"serving.knative.dev/route": service, "serving.knative.dev/routeNamespace": namespace,
                   "serving.knative.dev/service": service},
        "name": service, "namespace": namespace, "ownerReferences": owner("Route", &service, &route_uid),
        "uid": uid(&format!("kingress/{index}")),
    });
    let splits = json!([{"appendHeaders": {"Knative-Serving-Namespace": namespace, "Knative-Serving-Revision": revision},
        "percent": 100, "serviceName": revision, "serviceNamespace": namespace, "servicePort": 80}]);
    ingress["spec"]["rules"] = json!([
        {"hosts": [format!("{service}.{namespace}"), format!("{service}.{namespace}.svc"),
                   format!("{service}.{namespace}.svc.cluster.local")],
         "http": {"paths": [{"splits": splits}]}, "visibility": "ClusterLocal"},
        {"hosts": [format!("{service}.{namespace}.example.com")],
         "http": {"paths": [{"splits": splits}]}, "visibility": "ExternalIP"},
    ]);
    ready_at(&mut ingress);
    let mut ingress_paths = field_paths(
        &["f:metadata", "f:annotations"],
        &[
            "f:networking.internal.knative.dev/rollout",
            "f:networking.knative.dev/ingress.class",
            "f:serving.knative.dev/creator",
            "f:serving.knative.dev/lastModifier",
        ],
    );
    ingress_paths.extend(field_paths(
        &["f:metadata", "f:labels"],
        &[
            "f:serving.knative.dev/route",
            "f:serving.knative.dev/routeNamespace",
            "f:serving.knative.dev/service",
        ],
    ));
    ingress_paths.push(owner_ref_path(&route_uid));
    ingress_paths.extend(field_paths(&["f:spec"], &["f:httpOption", "f:rules"]));
    let ingress_managers = vec![
        Manager {
            name: "controller",
            subresource: "",
            time: at0.clone(),
            paths: ingress_paths,
        },
        Manager {
            name: "kourier",
            subresource: "",
            time: at0.clone(),
            paths: vec![path(&[
                "f:metadata",
                "f:finalizers",
                "v:\"ingresses.networking.internal.knative.dev\"",
            ])],
        },
        Manager {
            name: "kourier",
            subresource: "status",
            time: at0.clone(),
            paths: field_paths(
                &["f:status"],
                &[
                    "f:conditions",
                    "f:observedGeneration",
                    "f:privateLoadBalancer",
                    "f:publicLoadBalancer",
                ],
            ),
        },
    ];
    objects.push(Object::new(ingress, STATUS_PLAN, ingress_managers));

    // The app's Broker (`derived/broker-ready.yaml`, MT channel-based), applied by Argo CD with
    // its own dead-letter Service.
    let broker_name = format!("{service}-broker");
    let dead_letter = format!("{service}-dlq");
    let app_labels =
        json!({"app.kubernetes.io/instance": service, "app.kubernetes.io/part-of": namespace});
    let applied_ref = json!({"ref": {"apiVersion": "v1", "kind": "Service", "name": dead_letter}});
    let live_ref = json!({"ref": {"apiVersion": "v1", "kind": "Service", "name": dead_letter,
                                  "namespace": namespace}});
    let last_applied = |kind: &str, name: &str, labels: &Value, spec: &Value| {
        let applied = json!({"apiVersion": "eventing.knative.dev/v1", "kind": kind,
            "metadata": {"annotations": {}, "labels": labels, "name": name, "namespace": namespace},
            "spec": spec});
        format!("{applied}\n")
    };
    let mut broker = fixtures.broker.clone();
    let mut applied_spec = json!({"delivery": broker["spec"]["delivery"].clone()});
    applied_spec["delivery"]["deadLetterSink"] = applied_ref.clone();
    broker["spec"]["delivery"]["deadLetterSink"] = live_ref.clone();
    broker["metadata"] = json!({
        "annotations": {"eventing.knative.dev/broker.class": "MTChannelBasedBroker",
                        "eventing.knative.dev/creator": SA_ARGO, "eventing.knative.dev/lastModifier": SA_ARGO,
                        "kubectl.kubernetes.io/last-applied-configuration": last_applied("Broker", &broker_name, &app_labels, &applied_spec)},
        "creationTimestamp": "2026-11-20T08:00:00Z", "generation": 1, "labels": app_labels,
        "name": broker_name, "namespace": namespace, "uid": uid(&format!("broker/{index}")),
    });
    let channel = format!("{broker_name}-kne-trigger");
    broker["status"]["address"]["url"] = json!(format!(
        "http://broker-ingress.knative-eventing.svc.cluster.local/{namespace}/{broker_name}"
    ));
    broker["status"]["annotations"]["knative.dev/channelAddress"] = json!(format!(
        "http://{channel}-kn-channel.{namespace}.svc.cluster.local"
    ));
    broker["status"]["annotations"]["knative.dev/channelName"] = json!(channel);
    broker["status"]["deadLetterSinkUri"] = json!(format!(
        "http://{dead_letter}.{namespace}.svc.cluster.local"
    ));
    ready_at(&mut broker);
    let eventing_metadata = |extra: &[&str]| -> Vec<Vec<String>> {
        let mut paths = field_paths(
            &["f:metadata", "f:annotations"],
            &[
                "f:eventing.knative.dev/creator",
                "f:eventing.knative.dev/lastModifier",
                "f:kubectl.kubernetes.io/last-applied-configuration",
            ],
        );
        paths.extend(field_paths(&["f:metadata", "f:annotations"], extra));
        paths.extend(field_paths(
            &["f:metadata", "f:labels"],
            &[
                "f:app.kubernetes.io/instance",
                "f:app.kubernetes.io/part-of",
            ],
        ));
        paths
    };
    let delivery_paths = |extra: &[&str]| -> Vec<Vec<String>> {
        let mut fields = vec!["f:backoffDelay", "f:backoffPolicy", "f:retry"];
        fields.extend_from_slice(extra);
        let mut paths = field_paths(&["f:spec", "f:delivery"], &fields);
        paths.extend(field_paths(
            &["f:spec", "f:delivery", "f:deadLetterSink", "f:ref"],
            &["f:apiVersion", "f:kind", "f:name", "f:namespace"],
        ));
        paths
    };
    let mut broker_paths = eventing_metadata(&["f:eventing.knative.dev/broker.class"]);
    broker_paths.extend(field_paths(
        &["f:spec", "f:config"],
        &["f:apiVersion", "f:kind", "f:name", "f:namespace"],
    ));
    broker_paths.extend(delivery_paths(&[]));
    let broker_managers = vec![
        Manager {
            name: "argocd-application-controller",
            subresource: "",
            time: at0.clone(),
            paths: broker_paths,
        },
        Manager {
            name: "mtchannel-broker",
            subresource: "status",
            time: at0.clone(),
            paths: field_paths(
                &["f:status"],
                &[
                    "f:address",
                    "f:annotations",
                    "f:conditions",
                    "f:deadLetterSinkUri",
                    "f:observedGeneration",
                ],
            ),
        },
    ];
    objects.push(Object::new(broker, STATUS_PLAN, broker_managers));

    // The app's Trigger (`derived/trigger-ready.yaml`): events of one type from the Broker to
    // the app's Knative Service; Argo CD owns the filter, Eventing's `mtchannel-broker` the status.
    let trigger_name = format!("{service}-events");
    let mut trigger = fixtures.trigger.clone();
    let mut delivery = trigger["spec"]["delivery"].clone();
    delivery["deadLetterSink"] = applied_ref;
    let subscriber = json!({"ref": {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "name": service}});
    let applied_spec = json!({"broker": broker_name, "delivery": delivery,
        "filter": {"attributes": {"type": TRIGGER_TYPES[0]}}, "subscriber": subscriber});
    let mut spec = applied_spec.clone();
    spec["delivery"]["deadLetterSink"] = live_ref;
    spec["subscriber"]["ref"]["namespace"] = json!(namespace);
    trigger["spec"] = spec;
    let mut trigger_labels = app_labels.clone();
    trigger_labels["eventing.knative.dev/broker"] = json!(broker_name);
    trigger["metadata"] = json!({
        "annotations": {"eventing.knative.dev/creator": SA_ARGO, "eventing.knative.dev/lastModifier": SA_ARGO,
                        "kubectl.kubernetes.io/last-applied-configuration": last_applied("Trigger", &trigger_name, &trigger_labels, &applied_spec)},
        "creationTimestamp": "2026-11-20T08:00:01Z", "generation": 1, "labels": trigger_labels,
        "name": trigger_name, "namespace": namespace, "uid": uid(&format!("trigger/{index}")),
    });
    if let Some(status) = trigger["status"].as_object_mut() {
        // No audience on the subscriber, so none in the status.
        status.remove("subscriberAudience");
    }
    trigger["status"]["deadLetterSinkUri"] = json!(format!(
        "http://{dead_letter}.{namespace}.svc.cluster.local"
    ));
    trigger["status"]["subscriberUri"] =
        json!(format!("http://{service}.{namespace}.svc.cluster.local"));
    ready_at(&mut trigger);
    let mut trigger_paths = eventing_metadata(&[]);
    trigger_paths.push(path(&[
        "f:metadata",
        "f:labels",
        "f:eventing.knative.dev/broker",
    ]));
    trigger_paths.push(path(&["f:spec", "f:broker"]));
    trigger_paths.extend(delivery_paths(&["f:timeout"]));
    trigger_paths.push(path(&["f:spec", "f:filter", "f:attributes", "f:type"]));
    trigger_paths.extend(field_paths(
        &["f:spec", "f:subscriber", "f:ref"],
        &["f:apiVersion", "f:kind", "f:name", "f:namespace"],
    ));
    let trigger_managers = vec![
        Manager {
            name: "argocd-application-controller",
            subresource: "",
            time: at0.clone(),
            paths: trigger_paths,
        },
        Manager {
            name: "mtchannel-broker",
            subresource: "status",
            time: at0,
            paths: field_paths(
                &["f:status"],
                &[
                    "f:conditions",
                    "f:deadLetterSinkUri",
                    "f:observedGeneration",
                    "f:subscriberUri",
                ],
            ),
        },
    ];
    objects.push(Object::new(trigger, TRIGGER_PLAN, trigger_managers));
    debug_assert_eq!(objects.len(), OBJECTS_PER_APP);
    objects
}

/// A ConfigMap of app `index` whose `data` holds at least `data_bytes` bytes of JSON (keys
/// `setting-0000`, ... with 125-odd-byte URL values), applied by Argo CD, which owns every key;
/// status-only churn of it ([`Object::status_step`]) moves only that manager's time.
pub(crate) fn config_map(index: usize, data_bytes: usize) -> Object {
    let namespace = format!("team-{:02}", index % 40);
    let name = format!("app-{index:06}-settings");
    let mut data = Map::new();
    let mut paths = vec![path(&[
        "f:metadata",
        "f:labels",
        "f:app.kubernetes.io/instance",
    ])];
    // `{}` and the entries, each `"key":"value",` less the last comma.
    let mut bytes = 1;
    let mut key = 0;
    while bytes < data_bytes {
        let name_of = format!("setting-{key:04}");
        let value = format!(
            "https://config.example.com/{name}/settings/{key}?region=eu-west-{}&tier=standard&owner=team-{:02}&digest={}",
            key % 3,
            index % 40,
            &digest_of(&format!("{name}/{key}"))[..32]
        );
        bytes += name_of.len() + value.len() + 6;
        paths.push(vec!["f:data".to_string(), format!("f:{name_of}")]);
        data.insert(name_of, json!(value));
        key += 1;
    }
    let value = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"creationTimestamp": "2026-11-20T08:00:00Z",
                     "labels": {"app.kubernetes.io/instance": format!("app-{index:06}")},
                     "name": name, "namespace": namespace, "uid": uid(&format!("cm/{index}"))},
        "data": Value::Object(data),
    });
    let managers = vec![Manager {
        name: "argocd-application-controller",
        subresource: "",
        time: time_at(0),
        paths,
    }];
    Object::new(value, STATUS_PLAN, managers)
}

/// The ApiServerSource subject of an object.
pub(crate) fn subject(api_version: &str, kind: &str, namespace: &str, name: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    let plural = if lower.ends_with('s') {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    };
    if api_version.contains('/') {
        format!("/apis/{api_version}/namespaces/{namespace}/{plural}/{name}")
    } else {
        format!("/api/{api_version}/namespaces/{namespace}/{plural}/{name}")
    }
}

/// CloudEvents content mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Attributes in `ce-*` headers, the object is the body (the Broker's default).
    Binary,
    /// `application/cloudevents+json`.
    Structured,
}

/// A whole HTTP/1.1 request for one event. `id` and `rv` may be the placeholders; the `time` is
/// always [`TIME_PLACE`] (filled by [`fill_at`] when the request is sent, or by [`fill`]). The
/// placeholders come in the order id, time, resourceVersion in both modes (`bench/events.lua`
/// splits a template at them in that order).
pub(crate) fn request(mode: Mode, verb: &str, object: &Object, id: &str, rv: &str) -> Vec<u8> {
    let (api_version, kind, namespace, name) = object.ident();
    let body = object.render(rv);
    let ty = format!("dev.knative.apiserver.resource.{verb}");
    let subject = subject(&api_version, &kind, &namespace, &name);
    let time = TIME_PLACE;
    let arrival = "2026-11-29T10:00:00.001Z";
    let mut attributes: BTreeMap<&str, &str> = BTreeMap::new();
    attributes.insert("apiversion", &api_version);
    attributes.insert("cluster", "bench");
    attributes.insert("kind", &kind);
    attributes.insert("knativearrivaltime", arrival);
    attributes.insert("name", &name);
    attributes.insert("namespace", &namespace);
    let (headers, body) = match mode {
        Mode::Binary => {
            let mut headers = format!(
                "ce-specversion: 1.0\r\nce-id: {id}\r\nce-source: {SOURCE}\r\nce-type: {ty}\r\nce-subject: {subject}\r\nce-time: {time}\r\n"
            );
            for (key, value) in &attributes {
                headers.push_str(&format!("ce-{key}: {value}\r\n"));
            }
            headers.push_str("Content-Type: application/json\r\n");
            (headers, body)
        }
        Mode::Structured => {
            let mut text = format!(
                "{{\"specversion\":\"1.0\",\"id\":\"{id}\",\"source\":\"{SOURCE}\",\"type\":\"{ty}\",\"subject\":\"{subject}\",\"time\":\"{time}\",\"datacontenttype\":\"application/json\""
            );
            for (key, value) in &attributes {
                text.push_str(&format!(",\"{key}\":{}", Value::String(value.to_string())));
            }
            text.push_str(",\"data\":");
            text.push_str(&body);
            text.push('}');
            (
                "Content-Type: application/cloudevents+json\r\n".to_string(),
                text,
            )
        }
    };
    let mut out = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Fills the placeholders of a request template, the `time` with [`FIXED_TIME`]: for events
/// that are kept, not sent (a request that is sent takes its time from [`fill_at`]).
pub(crate) fn fill(template: &[u8], id: &str, rv: &str, out: &mut Vec<u8>) {
    fill_at(template, id, rv, FIXED_TIME, out);
}

/// Fills the placeholders of a request template; `time` is 30 characters (as [`TIME_PLACE`]),
/// so the request's `Content-Length` stays right.
pub(crate) fn fill_at(template: &[u8], id: &str, rv: &str, time: &str, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(template);
    for (place, value) in [(ID_PLACE, id), (TIME_PLACE, time), (RV_PLACE, rv)] {
        if let Some(at) = find(out, place.as_bytes()) {
            out[at..at + place.len()].copy_from_slice(value.as_bytes());
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// One entry of the replayed event list.
pub(crate) struct Template {
    /// Index of the object (app × [`OBJECTS_PER_APP`] + its place in the app).
    pub object: usize,
    /// What the event does.
    pub op: Op,
    /// Body size in bytes.
    pub body_len: usize,
    /// The request, with placeholders.
    pub request: Vec<u8>,
}

/// The replayed list: `apps` apps, one full cycle of every object's script, interleaved so that
/// consecutive events touch different objects and each object's events stay in script order.
/// The scripts are run twice and the second cycle is kept, so `managedFields` times and
/// generations are those of an object in steady state and the list loops consistently.
pub(crate) fn cycle(fixtures: &Fixtures, apps: usize, mode: Mode) -> Vec<Template> {
    let mut objects: Vec<Object> = (0..apps).flat_map(|i| app(fixtures, i)).collect();
    for step in 0..STEPS {
        for object in &mut objects {
            object.step(step);
        }
    }
    let mut out = Vec::with_capacity(objects.len() * STEPS);
    for step in 0..STEPS {
        for (index, object) in objects.iter_mut().enumerate() {
            let op = object.step(step);
            let request = request(mode, "update", object, ID_PLACE, RV_PLACE);
            let body_len = body_len(&request);
            out.push(Template {
                object: index,
                op,
                body_len,
                request,
            });
        }
    }
    out
}

/// The body length of a request.
pub(crate) fn body_len(request: &[u8]) -> usize {
    find(request, b"\r\n\r\n")
        .map(|at| request.len() - at - 4)
        .unwrap_or(0)
}

// Run with `cargo test --example bench-loadgen` (examples are built, not tested, by `cargo test`).
#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> Fixtures {
        Fixtures::load(Path::new(env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|error| panic!("fixtures: {error}"))
    }

    /// The CloudEvent `time` of a request: its `ce-time` header, else its structured body's.
    fn time_of(request: &[u8]) -> String {
        let text = String::from_utf8_lossy(request);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        match head.lines().find_map(|line| line.strip_prefix("ce-time: ")) {
            Some(time) => time.to_string(),
            None => serde_json::from_str::<Value>(body).unwrap_or_default()["time"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        }
    }

    fn content_length(request: &[u8]) -> Option<usize> {
        let text = String::from_utf8_lossy(request);
        text.lines()
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .and_then(|value| value.parse().ok())
    }

    #[test]
    fn templates_carry_id_time_and_rv_once_each_in_that_order() {
        // bench/events.lua splits every template at the three, in this order.
        assert_eq!(TIME_PLACE.len(), FIXED_TIME.len());
        for mode in [Mode::Binary, Mode::Structured] {
            for template in cycle(&fixtures(), 1, mode) {
                let request = &template.request;
                let at = |place: &str| {
                    let places: Vec<usize> = request
                        .windows(place.len())
                        .enumerate()
                        .filter(|(_, window)| *window == place.as_bytes())
                        .map(|(at, _)| at)
                        .collect();
                    assert_eq!(places.len(), 1, "{place} in {mode:?}");
                    places[0]
                };
                let (id, time, rv) = (at(ID_PLACE), at(TIME_PLACE), at(RV_PLACE));
                assert!(id < time && time < rv, "{mode:?}: {id} {time} {rv}");
                assert_eq!(time_of(request), TIME_PLACE);
                assert_eq!(content_length(request), Some(body_len(request)));
            }
        }
    }

    #[test]
    fn fill_at_sets_the_time_and_keeps_the_content_length() {
        let time = "2027-01-02T03:04:05.123456789Z";
        let mut out = Vec::new();
        for mode in [Mode::Binary, Mode::Structured] {
            for object in app(&fixtures(), 2) {
                let template = request(mode, "update", &object, ID_PLACE, RV_PLACE);
                fill_at(
                    &template,
                    "0badcafe-0000-4000-a000-000000000001",
                    "000000000000042",
                    time,
                    &mut out,
                );
                assert_eq!(out.len(), template.len());
                assert_eq!(time_of(&out), time, "{mode:?}");
                assert_eq!(content_length(&out), Some(body_len(&out)));
                for place in [ID_PLACE, TIME_PLACE, RV_PLACE] {
                    assert!(find(&out, place.as_bytes()).is_none(), "{place} left");
                }
                fill(
                    &template,
                    "0badcafe-0000-4000-a000-000000000002",
                    "000000000000043",
                    &mut out,
                );
                assert_eq!(time_of(&out), FIXED_TIME, "{mode:?}");
            }
        }
    }

    #[test]
    fn an_app_has_the_objects_and_the_mix_the_module_doc_states() {
        let objects = app(&fixtures(), 0);
        let kinds: Vec<String> = objects.iter().map(|object| object.ident().1).collect();
        assert_eq!(
            kinds,
            [
                "Service",
                "Configuration",
                "Route",
                "Revision",
                "Revision",
                "Deployment",
                "Pod",
                "PodAutoscaler",
                "Ingress",
                "Broker",
                "Trigger"
            ]
        );
        assert_eq!(objects.len(), OBJECTS_PER_APP);
        let mut letters: BTreeMap<char, usize> = BTreeMap::new();
        for object in &objects {
            assert_eq!(object.plan.len(), STEPS);
            for letter in object.plan.chars() {
                *letters.entry(letter).or_default() += 1;
            }
        }
        assert_eq!(
            letters,
            BTreeMap::from([('S', 184), ('a', 18), ('d', 9), ('r', 9)])
        );
    }

    #[test]
    fn every_script_does_what_its_plan_says_and_returns_to_its_starting_spec() {
        for mut object in app(&fixtures(), 4) {
            let start = object.value["spec"].clone();
            for step in 0..STEPS {
                let expected = match object.plan.as_bytes()[step] {
                    b'S' => Op::Status,
                    b'd' => Op::Drift,
                    _ => Op::Trusted,
                };
                assert_eq!(
                    object.step(step),
                    expected,
                    "{:?} step {step}",
                    object.ident()
                );
            }
            assert_eq!(object.value["spec"], start, "{:?}", object.ident());
        }
    }

    #[test]
    fn status_steps_leave_the_spec_and_touches_change_only_a_manager_time() {
        for mut object in app(&fixtures(), 8) {
            let spec = object.value["spec"].clone();
            for step in 0..STEPS {
                assert_eq!(object.status_step(step), Op::Status);
            }
            assert_eq!(object.value["spec"], spec, "{:?}", object.ident());
        }
        let mut config_map = config_map(8, 200_000);
        let data_len = serde_json::to_string(&config_map.value["data"])
            .map(|text| text.len())
            .unwrap_or_default();
        assert!((200_000..201_000).contains(&data_len), "{data_len}");
        let before: Value = serde_json::from_str(&config_map.render("1")).unwrap_or_default();
        config_map.status_step(3);
        let mut after: Value = serde_json::from_str(&config_map.render("1")).unwrap_or_default();
        assert_ne!(before, after);
        after["metadata"]["managedFields"][0]["time"] =
            before["metadata"]["managedFields"][0]["time"].clone();
        assert_eq!(before, after);
        assert!(after.get("status").is_none());
        // A Pod touched: only kubelet's (the status writer's) time moves.
        let mut pod = app(&fixtures(), 8).swap_remove(6);
        let before: Value = serde_json::from_str(&pod.render("1")).unwrap_or_default();
        pod.touch_step(3);
        let mut after: Value = serde_json::from_str(&pod.render("1")).unwrap_or_default();
        assert_eq!(after["metadata"]["managedFields"][1]["manager"], "kubelet");
        assert_ne!(before, after);
        after["metadata"]["managedFields"][1]["time"] =
            before["metadata"]["managedFields"][1]["time"].clone();
        assert_eq!(before, after);
    }

    #[test]
    fn the_new_kinds_point_at_their_app() {
        let objects = app(&fixtures(), 3);
        let uid_of = |index: usize| objects[index].value["metadata"]["uid"].clone();
        let name_of = |index: usize| objects[index].value["metadata"]["name"].clone();
        let (autoscaler, ingress, broker, trigger) = (
            &objects[7].value,
            &objects[8].value,
            &objects[9].value,
            &objects[10].value,
        );
        assert_eq!(autoscaler["metadata"]["name"], name_of(4));
        assert_eq!(
            autoscaler["metadata"]["ownerReferences"][0]["uid"],
            uid_of(4)
        );
        assert_eq!(
            autoscaler["metadata"]["ownerReferences"][0]["controller"],
            true
        );
        assert_eq!(ingress["metadata"]["name"], name_of(2));
        assert_eq!(ingress["metadata"]["ownerReferences"][0]["uid"], uid_of(2));
        assert_eq!(broker["metadata"]["name"], "app-000003-broker");
        assert_eq!(trigger["metadata"]["name"], "app-000003-events");
        assert_eq!(trigger["spec"]["broker"], "app-000003-broker");
        assert_eq!(trigger["spec"]["subscriber"]["ref"]["kind"], "Service");
        assert_eq!(trigger["spec"]["subscriber"]["ref"]["name"], name_of(0));
        for value in [autoscaler, ingress, broker, trigger] {
            assert_eq!(value["metadata"]["namespace"], "team-03");
        }
        let (api_version, kind, namespace, name) = objects[8].ident();
        assert_eq!(
            subject(&api_version, &kind, &namespace, &name),
            "/apis/networking.internal.knative.dev/v1alpha1/namespaces/team-03/ingresses/app-000003"
        );
    }

    #[test]
    fn the_autoscaler_scales_as_its_revision_and_the_ingress_waits_one_step() {
        let mut objects = app(&fixtures(), 0);
        let mut waiting_steps = 0;
        for step in 0..2 * STEPS {
            for object in &mut objects {
                object.step(step);
            }
            let (revision, autoscaler) = (&objects[4].value["status"], &objects[7].value["status"]);
            assert_eq!(revision["desiredReplicas"], autoscaler["desiredScale"]);
            assert_eq!(revision["actualReplicas"], autoscaler["actualScale"]);
            let ingress = &objects[8].value["status"]["conditions"];
            let ready = ingress
                .as_array()
                .map(|conditions| {
                    conditions
                        .iter()
                        .filter(|condition| condition["status"] == "True")
                        .count()
                })
                .unwrap_or_default();
            if ready < 3 {
                waiting_steps += 1;
                assert_eq!(ready, 1, "only LoadBalancerReady and Ready wait");
            }
        }
        assert_eq!(waiting_steps, 2, "one step of each script");
    }
}
