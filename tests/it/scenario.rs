//! A small simulator for engine scenarios: real-shaped objects from the fixtures, events sent
//! through the real decoder, a clock the test moves, and transitions written as text lines so
//! every scenario is checked by one `check` function.
//!
//! With `DRIFT_SENTINEL_RECORD_SCENARIOS=DIR` set, every simulator also writes the events it
//! sends through decode to `DIR/<test>.<n>.jsonl`, each with `time` set to the simulator's clock
//! (`tests/fixtures/golden/` builds its replay corpus from them; its README says how).

use std::sync::Arc;

use std::collections::BTreeMap;

use drift_core::classify::{Changes, Engine, ObjectState, Rules};
use drift_core::config::RulesConfig;
use drift_core::decode::{self, ClusterNames, Decoded};
use drift_model::{Drift, Millis, ObjectKey, Transition};
use serde_json::{json, Value};

use crate::support::fixture_yaml;

/// Start of every scenario's clock: 2023-10-09T21:40:00Z.
pub(crate) const T0: Millis = 1_696_887_600_000;

pub(crate) struct Sim {
    engine: Engine,
    rules: Arc<Rules>,
    now: Millis,
    next_id: u64,
    pub log: Vec<Transition>,
    /// What a store would hold: the history rows written, in order.
    pub history: Vec<Transition>,
    /// What a store would hold: every drift row written, in order (later rows replace earlier
    /// ones with the same id).
    pub rows: Vec<Drift>,
    /// What a store would hold: the objects written.
    pub(crate) objects: BTreeMap<ObjectKey, ObjectState>,
    /// Where the events sent are recorded (`DRIFT_SENTINEL_RECORD_SCENARIOS`).
    recording: Option<std::path::PathBuf>,
}

impl Sim {
    pub(crate) fn new() -> Sim {
        Sim::with_rules("{}")
    }

    /// A simulator with a `rules:` section given as YAML.
    pub(crate) fn with_rules(yaml: &str) -> Sim {
        let config: RulesConfig = serde_saphyr::from_str(yaml).expect("rules yaml");
        Sim::with_compiled(config.compile())
    }

    /// A simulator with a `rules:` section and a `fleet:` section, each given as YAML.
    pub(crate) fn with_fleet(rules: &str, fleet: &str) -> Sim {
        Sim::with_compiled(compile_with_fleet(rules, fleet))
    }

    pub(crate) fn with_compiled(rules: Rules) -> Sim {
        let rules = Arc::new(rules);
        Sim {
            engine: Engine::new(Arc::clone(&rules)),
            rules,
            now: T0,
            next_id: 0,
            log: Vec::new(),
            history: Vec::new(),
            rows: Vec::new(),
            objects: BTreeMap::new(),
            recording: recording_path(),
        }
    }

    /// Takes the round's changes as the writer does: every transition to the log, and what
    /// the store would write to `history`, `rows` and the stored objects.
    fn take(&mut self, changes: Changes) {
        self.log.extend(changes.transitions);
        self.history.extend(changes.history);
        self.rows.extend(changes.drifts);
        for object in changes.objects {
            self.objects.insert(object.key(), object);
        }
        for key in changes.removed_objects {
            self.objects.remove(&key);
        }
        self.engine.commit();
    }

    /// A restart: a new engine restored from what the store would hold (the objects and the
    /// open drift rows), nothing else carried over.
    pub(crate) fn restart(&mut self) {
        let mut latest: BTreeMap<String, Drift> = BTreeMap::new();
        for row in &self.rows {
            latest.insert(row.id.clone(), row.clone());
        }
        let open: Vec<Drift> = latest
            .into_values()
            .filter(|drift| drift.state != drift_model::DriftState::Resolved)
            .collect();
        self.engine = Engine::new(Arc::clone(&self.rules));
        self.engine
            .restore(self.objects.values().cloned().collect(), open);
    }

    /// Seconds since T0 on the scenario's clock.
    pub(crate) fn elapsed_seconds(&self) -> i64 {
        (self.now - T0) / 1000
    }

    /// What the writer does before a graceful stop: records the pending drifts held in memory.
    pub(crate) fn stop_gracefully(&mut self) {
        self.engine.begin();
        self.engine.record_pending();
        let changes = self.engine.changes();
        self.take(changes);
    }

    /// Moves the clock forward and runs a round whose commit fails (rolled back).
    pub(crate) fn wait_and_fail_commit(&mut self, seconds: i64) -> Changes {
        self.now += seconds * 1000;
        self.engine.begin();
        self.engine.tick(self.now);
        let changes = self.engine.changes();
        self.engine.rollback();
        changes
    }

    /// Sends `dev.knative.apiserver.resource.<verb>` for `object` now.
    pub(crate) fn send(&mut self, verb: &str, object: &Value) {
        self.next_id += 1;
        let event =
            crate::support::structured_event(&format!("event-{}", self.next_id), verb, object);
        self.send_event(&event);
    }

    /// Sends `dev.knative.apiserver.resource.<verb>` for `object` now, from `cluster` (the
    /// `cluster` extension, as a per-cluster ApiServerSource sets it).
    pub(crate) fn send_to(&mut self, cluster: &str, verb: &str, object: &Value) {
        self.next_id += 1;
        let mut event =
            crate::support::structured_event(&format!("event-{}", self.next_id), verb, object);
        event["cluster"] = json!(cluster);
        self.send_event(&event);
    }

    /// Hot-reloads a `rules:` and a `fleet:` section given as YAML, as the writer does.
    pub(crate) fn reload_fleet(&mut self, rules: &str, fleet: &str) {
        self.reload_compiled(compile_with_fleet(rules, fleet));
    }

    /// The engine (read-only), for what a test reads beyond transitions.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Applies an event of `cluster` as if decode had let it through: a name that ingest
    /// refuses (`fleet:prod`), to show that the engine holds without that check too.
    pub(crate) fn send_past_decode(&mut self, cluster: &str, verb: &str, object: &Value) {
        self.next_id += 1;
        let event =
            crate::support::structured_event(&format!("event-{}", self.next_id), verb, object);
        self.apply_event(&event, Some(cluster));
    }

    /// Sends a prepared structured CloudEvent (to replay the same id).
    pub(crate) fn send_event(&mut self, event: &Value) {
        self.apply_event(event, None);
    }

    fn apply_event(&mut self, event: &Value, cluster: Option<&str>) {
        if let (Some(path), None) = (&self.recording, cluster) {
            let mut recorded = event.clone();
            recorded["time"] = json!(drift_model::time::format_time(self.now));
            let mut line = serde_json::to_string(&recorded).unwrap();
            line.push('\n');
            use std::io::Write as _;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(line.as_bytes()))
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        }
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "content-type",
            http::HeaderValue::from_static("application/cloudevents+json"),
        );
        let clusters = ClusterNames {
            default: "prod".into(),
            by_source: Default::default(),
        };
        let decoded =
            decode::decode_request(&headers, &serde_json::to_vec(event).unwrap(), &clusters)
                .unwrap_or_else(|error| panic!("scenario event must decode: {error}"));
        self.engine.begin();
        self.engine.tick(self.now);
        for item in decoded {
            if let Decoded::ApiServer(mut event) = item {
                if let Some(cluster) = cluster {
                    event.cluster = cluster.to_string();
                }
                self.engine.apply(&event, self.now);
            }
        }
        let changes = self.engine.changes();
        self.take(changes);
    }

    /// Moves the clock forward and fires what is due.
    pub(crate) fn wait(&mut self, seconds: i64) {
        self.now += seconds * 1000;
        self.engine.begin();
        self.engine.tick(self.now);
        let changes = self.engine.changes();
        self.take(changes);
    }

    /// An answer of Prometheus arrives now (`traffic:`), as the writer files it.
    pub(crate) fn observe_traffic(
        &mut self,
        observation: &drift_core::classify::traffic::Observation,
    ) {
        self.engine.begin();
        self.engine.tick(self.now);
        self.engine.observe_traffic(observation, self.now);
        let changes = self.engine.changes();
        self.take(changes);
    }

    /// Resync lists `object` in cluster `prod` now (`Engine::apply_listed`, the list's snapshot
    /// at the object's own version), with what the engine made of it.
    pub(crate) fn list(&mut self, object: &Value) -> drift_core::classify::Outcome {
        let decoded = decode::parse_object(object.clone()).expect("listed object decodes");
        let version = decoded.resource_version.clone();
        let event = decode::ApiServerEvent::for_object(
            String::new(),
            String::new(),
            "prod",
            decode::Action::Update,
            decoded,
        );
        self.engine.begin();
        self.engine.tick(self.now);
        let list = drift_core::classify::ListContext {
            version: &version,
            started_at: self.now,
        };
        let outcome = self.engine.apply_listed(&event, list, self.now);
        let changes = self.engine.changes();
        self.take(changes);
        outcome
    }

    /// A complete resync pass of cluster `prod` ends now, having found `missed` changes the
    /// events had not delivered.
    pub(crate) fn resync_pass(&mut self, missed: usize) {
        self.engine.begin();
        self.engine.resync_pass_done("prod", missed, self.now);
        let changes = self.engine.changes();
        self.take(changes);
    }

    /// What resync does for a tracked object of cluster `prod` a complete list no longer holds
    /// (`Engine::forget`).
    pub(crate) fn sweep(&mut self, uid: &str) {
        let key = ObjectKey {
            cluster: "prod".into(),
            uid: uid.into(),
        };
        self.engine.begin();
        self.engine.tick(self.now);
        self.engine.forget(&key, self.now);
        let changes = self.engine.changes();
        self.take(changes);
    }

    /// The own event path's readiness per part when it changed since the last call, as the
    /// writer publishes it (`drift_sentinel_pipeline_ready`).
    pub(crate) fn pipeline_readiness(&mut self) -> Option<Vec<(String, &'static str, bool)>> {
        self.engine.take_pipeline_readiness()
    }

    /// Invariant failures counted since the last call, by (rule, kind).
    pub(crate) fn invariant_errors(&mut self) -> BTreeMap<(String, &'static str), u64> {
        self.engine.take_invariant_errors()
    }

    /// Invariant failures still to be logged: (rule, kind, object, error).
    pub(crate) fn invariant_failures(&mut self) -> Vec<(String, &'static str, String, String)> {
        self.engine
            .take_invariant_failures()
            .into_iter()
            .map(|failure| (failure.rule, failure.kind, failure.object, failure.error))
            .collect()
    }

    /// Open drifts, as `class[/rule] state Kind/name`, sorted.
    pub(crate) fn open(&self) -> Vec<String> {
        let mut open: Vec<String> = self
            .engine
            .open_drifts()
            .map(|drift| {
                format!(
                    "{}{} {} {}/{}",
                    drift.class,
                    drift
                        .rule
                        .as_deref()
                        .map(|rule| format!("/{rule}"))
                        .unwrap_or_default(),
                    drift.state.as_str(),
                    drift.kind,
                    drift.name
                )
            })
            .collect();
        open.sort();
        open
    }

    /// Hot-reloads compiled rules (a baseline, say), as the writer does.
    pub(crate) fn reload_compiled(&mut self, rules: drift_core::classify::Rules) {
        self.set_rules(rules);
        // The re-assessment a reload starts runs over the next rounds.
        self.wait(0);
    }

    /// Hot-reloads rules given as YAML, as the writer does (the re-assessment it starts runs
    /// at the next event or wait).
    pub(crate) fn reload(&mut self, yaml: &str) {
        let config: RulesConfig = serde_saphyr::from_str(yaml).expect("rules yaml");
        self.set_rules(config.compile());
    }

    /// The writer's reload: new rules, what they disable retired in one round.
    fn set_rules(&mut self, rules: drift_core::classify::Rules) {
        self.rules = Arc::new(rules);
        self.engine.set_rules(Arc::clone(&self.rules));
        self.engine.begin();
        self.engine.retire_disabled(self.now);
        let changes = self.engine.changes();
        self.take(changes);
    }

    /// Every transition as `state class Kind/name` (`class/rule` for a rule's drift).
    pub(crate) fn lines(&self) -> Vec<String> {
        self.log
            .iter()
            .map(|transition| {
                format!(
                    "{} {} {}/{}",
                    transition.drift.state.as_str(),
                    class_and_rule(&transition.drift),
                    transition.drift.kind,
                    transition.drift.name
                )
            })
            .collect()
    }

    /// Only the transitions people hear about (fired, and resolved after firing).
    pub(crate) fn notified(&self) -> Vec<String> {
        self.log
            .iter()
            .filter(|transition| transition.is_notifiable())
            .map(|transition| {
                format!(
                    "{} {} {}/{}",
                    transition.drift.state.as_str(),
                    class_and_rule(&transition.drift),
                    transition.drift.kind,
                    transition.drift.name
                )
            })
            .collect()
    }

    /// The last transition of a class.
    pub(crate) fn last(&self, class: &str) -> &Transition {
        self.log
            .iter()
            .rev()
            .find(|transition| transition.drift.class == class)
            .unwrap_or_else(|| panic!("no transition of {class}: {:?}", self.lines()))
    }
}

/// The file this test's next simulator records to, when `DRIFT_SENTINEL_RECORD_SCENARIOS` names
/// a directory: the test's name and the simulator's number within the test.
fn recording_path() -> Option<std::path::PathBuf> {
    thread_local!(static SIMULATORS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });
    let dir = std::env::var_os("DRIFT_SENTINEL_RECORD_SCENARIOS")?;
    let number = SIMULATORS.with(|count| count.replace(count.get() + 1));
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .replace("::", ".");
    let path = std::path::Path::new(&dir).join(format!("{test}.{number}.jsonl"));
    // A new run of the same test starts its file afresh.
    let _ = std::fs::remove_file(&path);
    Some(path)
}

fn compile_with_fleet(rules: &str, fleet: &str) -> Rules {
    let config: RulesConfig = serde_saphyr::from_str(rules).expect("rules yaml");
    let fleet: drift_core::config::FleetConfig = serde_saphyr::from_str(fleet).expect("fleet yaml");
    config
        .compile()
        .with_fleet(fleet.compile("fleet.groups").expect("fleet groups compile"))
}

fn class_and_rule(drift: &Drift) -> String {
    match &drift.rule {
        Some(rule) => format!("{}/{rule}", drift.class),
        None => drift.class.clone(),
    }
}

/// The one comparison every scenario ends with.
#[track_caller]
pub(crate) fn check(actual: Vec<String>, expected: &[&str]) {
    let expected: Vec<String> = expected.iter().map(|line| line.to_string()).collect();
    assert_eq!(
        actual,
        expected,
        "\nactual transitions:\n{}\n",
        actual.join("\n")
    );
}

// ---- Objects ---------------------------------------------------------------------------------

fn rv_counter() -> &'static std::sync::atomic::AtomicU64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(8_000_000);
    &COUNTER
}

/// Gives the object a new, higher resourceVersion (as every write does).
pub(crate) fn bump(object: &mut Value) {
    let next = rv_counter().fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    object["metadata"]["resourceVersion"] = json!(next.to_string());
}

/// A hand edit of the fixture Service: kubectl-edit splits its traffic 90/10 (what the
/// remediation tests revert).
pub(crate) fn traffic_split(original: &Value) -> Value {
    changed(original, |s| {
        s["spec"]["traffic"] = json!([{"latestRevision": true, "percent": 90}, {"revisionName": "knative-webapp-00000", "percent": 10}]);
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            "2026-12-05T09:00:00Z",
        );
    })
}

/// A changed copy with a new resourceVersion.
pub(crate) fn changed(object: &Value, edit: impl FnOnce(&mut Value)) -> Value {
    let mut copy = object.clone();
    edit(&mut copy);
    bump(&mut copy);
    copy
}

/// Records that `manager` wrote `fields` at `time` (replacing its earlier main-resource entry).
pub(crate) fn written_by(
    object: &mut Value,
    manager: &str,
    operation: &str,
    fields: Value,
    time: &str,
) {
    let api_version = object_api_version(object);
    let entries = object["metadata"]
        .as_object_mut()
        .unwrap()
        .entry("managedFields")
        .or_insert(json!([]));
    let list = entries.as_array_mut().unwrap();
    list.retain(|entry| !(entry["manager"] == manager && entry.get("subresource").is_none()));
    list.push(
        json!({"manager": manager, "operation": operation, "apiVersion": api_version,
        "fieldsType": "FieldsV1", "fieldsV1": fields, "time": time}),
    );
}

fn object_api_version(object: &Value) -> Value {
    object["apiVersion"].clone()
}

const SERVICE_UID: &str = "0c2ac867-693d-4acc-80a2-df9db8d182e0";
const CONFIGURATION_UID: &str = "748fc5d8-79b3-47fa-8311-37d1e60ef120";
const REVISION_UID: &str = "41ae1fe0-86e5-4281-8bc5-f1f31b91fc75";
pub(crate) const DIGEST: &str = "projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp@sha256:fd918309bb55c5a0d8877aa3c2786da5cd12e30408accadddcc0b778d43b4019";

pub(crate) fn configuration() -> Value {
    let mut object = fixture_yaml(
        "serving/rguske-github-io__knative-serving-unwrapped__configuration-knative-webapp.yaml",
    );
    written_by(
        &mut object,
        "controller",
        "Update",
        json!({"f:metadata": {"f:labels": {}}, "f:spec": {"f:template": {}}}),
        "2023-10-09T21:36:22Z",
    );
    object
}

pub(crate) fn route() -> Value {
    let mut object = fixture_yaml(
        "serving/rguske-github-io__knative-serving-unwrapped__route-knative-webapp.yaml",
    );
    written_by(
        &mut object,
        "controller",
        "Update",
        json!({"f:spec": {"f:traffic": {}}}),
        "2023-10-09T21:36:22Z",
    );
    object
}

pub(crate) fn revision() -> Value {
    crate::support::revision()
}

/// The Knative Service that owns the rguske Configuration, Route and Revision, as Knative
/// would show it (its template and traffic are what the children were made from).
pub(crate) fn service() -> Value {
    let configuration = configuration();
    json!({
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {
            "name": "knative-webapp", "namespace": "myapp", "uid": SERVICE_UID,
            "resourceVersion": "7746600", "generation": 1, "creationTimestamp": "2023-10-09T21:36:21Z",
            "annotations": {
                "serving.knative.dev/creator": "sso:Administrator@cpod-nsxv8.az-stc.cloud-garage.net",
                "serving.knative.dev/lastModifier": "sso:Administrator@cpod-nsxv8.az-stc.cloud-garage.net"
            },
            "managedFields": [
                {"manager": "kn", "operation": "Update", "apiVersion": "serving.knative.dev/v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {".": {}, "f:template": {".": {}, "f:metadata": {}, "f:spec": {".": {}, "f:containers": {}}}, "f:traffic": {}}},
                 "time": "2023-10-09T21:36:21Z"},
                {"manager": "controller", "operation": "Update", "apiVersion": "serving.knative.dev/v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:status": {".": {}, "f:conditions": {}, "f:traffic": {}}}, "subresource": "status",
                 "time": "2023-10-09T21:36:53Z"}
            ]
        },
        "spec": {
            "template": configuration["spec"]["template"].clone(),
            "traffic": [{"latestRevision": true, "percent": 100}]
        },
        "status": {
            "observedGeneration": 1,
            "conditions": [
                {"type": "ConfigurationsReady", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "RoutesReady", "status": "True"}
            ],
            "latestCreatedRevisionName": "knative-webapp-00001",
            "latestReadyRevisionName": "knative-webapp-00001",
            "traffic": [{"latestRevision": true, "percent": 100, "revisionName": "knative-webapp-00001"}],
            "url": "https://knative-webapp.jarvis.cpod-nsxv8.az-stc.cloud-garage.net"
        }
    })
}

/// The Revision's Deployment, as Knative's controller creates it.
pub(crate) fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "knative-webapp-00001-deployment", "namespace": "myapp",
            "uid": "9d2f6c1e-0000-4000-8000-00000000d001", "resourceVersion": "7749700", "generation": 3,
            "labels": {
                "app": "knative-webapp-00001",
                "serving.knative.dev/configuration": "knative-webapp",
                "serving.knative.dev/configurationGeneration": "1",
                "serving.knative.dev/configurationUID": CONFIGURATION_UID,
                "serving.knative.dev/revision": "knative-webapp-00001",
                "serving.knative.dev/revisionUID": REVISION_UID,
                "serving.knative.dev/service": "knative-webapp",
                "serving.knative.dev/serviceUID": SERVICE_UID
            },
            "ownerReferences": [{"apiVersion": "serving.knative.dev/v1", "kind": "Revision", "name": "knative-webapp-00001",
                                 "uid": REVISION_UID, "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "controller", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                     "k:{\"name\":\"user-container\"}": {".": {}, "f:image": {}, "f:name": {}},
                     "k:{\"name\":\"queue-proxy\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}},
                 "time": "2023-10-09T21:36:23Z"},
                {"manager": "autoscaler", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale", "time": "2023-10-09T21:40:37Z"}
            ]
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"serving.knative.dev/revisionUID": REVISION_UID}},
            "template": {"spec": {"containers": [
                {"name": "user-container", "image": DIGEST},
                {"name": "queue-proxy", "image": "gcr.io/knative-releases/knative.dev/serving/cmd/queue@sha256:0f0c4e8d0000000000000000000000000000000000000000000000000000abcd"}
            ]}}
        },
        "status": {"observedGeneration": 3, "replicas": 0}
    })
}

/// A Pod of the Revision.
pub(crate) fn pod(name: &str) -> Value {
    let deployment = deployment();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "myapp", "uid": format!("pod-{name}"), "resourceVersion": "7749701",
                     "labels": deployment["metadata"]["labels"].clone()},
        "spec": {"containers": deployment["spec"]["template"]["spec"]["containers"].clone()}
    })
}

/// `config-autoscaler` as shipped, with the server-set metadata a live object has.
pub(crate) fn config_autoscaler() -> Value {
    serving_config_map("config-autoscaler", "cm-autoscaler-uid")
}

/// A Knative Serving ConfigMap as shipped (`name`, from the core fixtures), with the
/// server-set metadata a live object has.
pub(crate) fn serving_config_map(name: &str, uid: &str) -> Value {
    let mut object = fixture_yaml(&format!(
        "configmaps/knative-serving__config-core-configmaps__{name}.yaml"
    ));
    object["metadata"]["uid"] = json!(uid);
    object["metadata"]["resourceVersion"] = json!("1000");
    written_by(
        &mut object,
        "kubectl-client-side-apply",
        "Update",
        json!({"f:data": {".": {}, "f:_example": {}}}),
        "2023-10-01T00:00:00Z",
    );
    object
}

/// A state from `tests/fixtures/knative/derived/` (shapes and strings from Knative's sources; see
/// its README), with a resourceVersion from the scenario's counter so states sent in order are
/// newer than the ones before.
pub(crate) fn derived(file: &str) -> Value {
    changed(&fixture_yaml(&format!("derived/{file}")), |_| {})
}

/// Sets (or adds) a status condition as a Knative reconciler writes it; an empty reason or
/// message is left out.
pub(crate) fn set_condition(
    object: &mut Value,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
) {
    let conditions = object["status"]["conditions"].as_array_mut().unwrap();
    let mut condition = json!({"type": kind, "status": status});
    if !reason.is_empty() {
        condition["reason"] = json!(reason);
    }
    if !message.is_empty() {
        condition["message"] = json!(message);
    }
    match conditions
        .iter_mut()
        .find(|existing| existing["type"] == kind)
    {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// Asserts that the last transition of `class` has a summary containing `part` and ending with
/// `end` (the target a finding names comes last).
#[track_caller]
pub(crate) fn assert_summary(sim: &Sim, class: &str, part: &str, end: &str) {
    let summary = &sim.last(class).drift.evidence.summary;
    assert!(summary.contains(part), "{summary}");
    assert!(summary.ends_with(end), "{summary}");
}
