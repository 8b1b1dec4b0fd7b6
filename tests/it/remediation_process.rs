//! Remediation in apply mode, end to end: the real binary, a real HTTP CloudEvents client, and
//! the scripted fake Kubernetes API server (`fake_apiserver.rs`), which answers resync's list and
//! accepts exactly the one write the test expects (method, path, `fieldManager`, content type,
//! body); any other request fails the test. A hand edit fires `manual_edit`, an `auto` revert
//! rule sends one merge patch carrying the judged `resourceVersion`, the drift's history shows
//! the outcome, and the next event (the restored object) resolves the drift. A `409` ends the
//! attempt without a second request.

use std::path::Path;

use serde_json::{json, Value};

use crate::fake_apiserver::{list, Expect, FakeApiServer};
use crate::resync::SERVICES;
use crate::resync_api::{until, Process};
use crate::scenario::*;
use crate::support::structured_event;

const WHSEC: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

pub(crate) const PATH: &str =
    "/apis/serving.knative.dev/v1/namespaces/myapp/services/knative-webapp";
pub(crate) const MERGE: &str = "application/merge-patch+json";

/// The sender's read of a namespace's opt-out annotation, just before a write in it: answered
/// with the namespace as the API server shows one (`annotations` on it).
pub(crate) fn namespace_read(name: &str, annotations: Value) -> Expect {
    Expect::get(
        &format!("/api/v1/namespaces/{name}"),
        &[],
        json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "uid": format!("ns-{name}"), "resourceVersion": "42",
                         "labels": {"kubernetes.io/metadata.name": name}, "annotations": annotations},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"},
        }),
    )
}

const REVERT: &str = "remediation:\n  mode: apply\n  rules:\n  - name: revert-hand-edits\n\
    \x20   match: {classes: [manual_edit], kinds: [Service.serving.knative.dev]}\n\
    \x20   action: revert\n    approval: auto\n";

/// A config on the fake cluster with `remediation` (a whole `remediation:` section) and `extra`
/// top-level YAML.
fn config_with(
    dir: &Path,
    kubeconfig: &Path,
    remediation: &str,
    extra: &str,
    hook: Option<&str>,
) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "store:\n  path: {db}\n\
             channels:\n  - {{name: log, type: log}}\n{hook}\
             routes:\n  - {{channels: [log{hook_route}], groupWait: 0s, groupInterval: 0s}}\n\
             resync:\n  enabled: true\n  interval: 1h\n  kubeconfig: {kubeconfig}\n  context: fake-ctx\n\
             \x20 resources:\n    - {{apiVersion: serving.knative.dev/v1, kind: Service}}\n\
             {remediation}{extra}",
            db = dir.join("remediation.db").display(),
            kubeconfig = kubeconfig.display(),
            hook = hook
                .map(|url| format!("  - {{name: hook, type: webhook, url: {url}, secret: {WHSEC}}}\n"))
                .unwrap_or_default(),
            hook_route = if hook.is_some() { ", hook" } else { "" },
        ),
    )
    .unwrap();
    path
}

pub(crate) struct Running {
    process: Process,
    client: reqwest::Client,
    pub(crate) log: std::path::PathBuf,
    next: usize,
}

impl Running {
    pub(crate) async fn send(&mut self, verb: &str, object: &Value) {
        self.next += 1;
        let event = structured_event(&format!("p-{}", self.next), verb, object);
        let response = self
            .client
            .post(&self.process.base)
            .header("content-type", "application/cloudevents+json")
            .json(&event)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
    }

    /// The id of the one drift of `class` that fires, once it does.
    async fn firing(&self, class: &str) -> String {
        until(class, &self.log, || async {
            let page = self
                .get(&format!("/api/v1/drifts?class={class}&state=firing"))
                .await?;
            Some(page["items"].get(0)?["id"].as_str()?.to_string())
        })
        .await
    }

    /// A drift's detail once `check` holds for it.
    async fn detail_when(&self, id: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        until(what, &self.log, || async {
            let detail = self.get(&format!("/api/v1/drifts/{id}")).await?;
            check(&detail).then_some(detail)
        })
        .await
    }

    /// Approves `action` on drift `id` through the API.
    async fn approve(&self, id: &str, action: &str) -> (u16, Value) {
        let response = self
            .client
            .post(format!(
                "{}/api/v1/drifts/{id}/remediate",
                self.process.base
            ))
            .json(&json!({"action": action, "approvedBy": "oncall@example.com"}))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> Option<Value> {
        let response = self
            .client
            .get(format!("{}{path}", self.process.base))
            .send()
            .await
            .ok()?;
        (response.status() == 200).then_some(())?;
        response.json().await.ok()
    }

    /// The one manual_edit drift's detail, once `check` holds for it.
    pub(crate) async fn drift_when(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        until(what, &self.log, || async {
            let page = self.get("/api/v1/drifts?class=manual_edit").await?;
            let id = page["items"].get(0)?["id"].as_str()?.to_string();
            let detail = self.get(&format!("/api/v1/drifts/{id}")).await?;
            check(&detail).then_some(detail)
        })
        .await
    }
}

pub(crate) async fn start(fake: &FakeApiServer, dir: &Path) -> Running {
    start_with(fake, dir, REVERT, "", None).await
}

async fn start_with(
    fake: &FakeApiServer,
    dir: &Path,
    remediation: &str,
    extra: &str,
    hook: Option<&str>,
) -> Running {
    let kubeconfig = fake.kubeconfig(dir, "fake-ctx");
    let config = config_with(dir, &kubeconfig, remediation, extra, hook);
    let log = dir.join("drift-sentinel.log");
    let process = Process::start(&config, &log);
    let running = Running {
        process,
        client: reqwest::Client::new(),
        log,
        next: 0,
    };
    // Ready once the state is loaded; the pass at start lists the Service.
    until("the service to be ready", &running.log, || async {
        running
            .get("/api/v1/resync")
            .await
            .filter(|status| status["lastPass"]["outcome"] == "complete")
    })
    .await;
    running
}

/// The revert the edit calls for: the traffic as it was, on the edited object's version.
pub(crate) fn revert_body(original: &Value, edited: &Value) -> Value {
    json!({
        "metadata": {"resourceVersion": edited["metadata"]["resourceVersion"]},
        "spec": {"traffic": original["spec"]["traffic"]},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_revert_sends_one_exact_patch_and_the_restored_object_resolves_the_drift() {
    let original = service();
    let edited = traffic_split(&original);
    // What the API server answers: the object with the traffic back, a newer version, and
    // drift-sentinel as the manager of what it wrote.
    let restored = changed(&edited, |s| {
        s["spec"]["traffic"] = original["spec"]["traffic"].clone();
        written_by(
            s,
            "drift-sentinel",
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            "2026-12-05T09:00:05Z",
        );
    });
    let fake = FakeApiServer::start(vec![
        Expect::get(
            SERVICES,
            &[("limit", "500")],
            list("Service", "90000", None, std::slice::from_ref(&original)),
        ),
        namespace_read("myapp", json!({})),
        Expect::write(
            "PATCH",
            PATH,
            &[("fieldManager", "drift-sentinel")],
            (MERGE, revert_body(&original, &edited)),
            200,
            restored.clone(),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let clock = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(
        drift_model::time::system_clock()(),
    ));
    let hook = crate::receivers::webhook(clock, WHSEC).await;
    let url = format!("{}/hook", hook.base);
    let mut running = start_with(&fake, dir.path(), REVERT, "", Some(&url)).await;
    running.send("update", &edited).await;
    let detail = running
        .drift_when("the revert to be applied", |detail| {
            detail["remediations"][0]["outcome"] == "applied"
        })
        .await;
    let attempt = &detail["remediations"][0];
    assert_eq!(attempt["mode"], "apply");
    assert_eq!(attempt["status"], 200);
    assert_eq!(
        attempt["resourceVersion"],
        edited["metadata"]["resourceVersion"]
    );
    assert_eq!(
        attempt["resourceVersionAfter"],
        restored["metadata"]["resourceVersion"]
    );
    assert_eq!(
        attempt["request"]["path"],
        format!("{PATH}?fieldManager=drift-sentinel")
    );
    // The attempt does not resolve the drift: the next event, which shows the object restored,
    // does.
    assert_eq!(detail["drift"]["state"], "firing", "{detail}");
    running.send("update", &restored).await;
    running
        .drift_when("the drift to resolve", |detail| {
            detail["drift"]["state"] == "resolved"
        })
        .await;
    let (_, metrics) = (
        (),
        running
            .client
            .get(format!("{}/metrics", running.process.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    assert!(
        metrics.contains(
            "drift_sentinel_remediations_total{action=\"revert\",outcome=\"applied\"} 1\n"
        ),
        "{metrics}"
    );
    // The webhook receiver (Standard Webhooks signature checked) heard the firing and the
    // remediation, the latter with what was done.
    let told = until("the remediation's webhook", &running.log, || async {
        hook.accepted()
            .into_iter()
            .find(|body| body["type"] == "drift.remediation")
    })
    .await;
    let remediation = &told["data"][0]["remediation"];
    assert_eq!(remediation["outcome"], "applied", "{told}");
    assert_eq!(remediation["action"], "revert");
    assert_eq!(remediation["mode"], "apply");
    assert_eq!(remediation["rule"], "revert-hand-edits");
    assert_eq!(remediation["status"], 200);
    assert_eq!(
        remediation["request"],
        format!("PATCH {PATH}?fieldManager=drift-sentinel")
    );
    assert_eq!(told["data"][0]["class"], "manual_edit");
    assert!(hook
        .accepted()
        .iter()
        .any(|body| body["type"] == "drift.firing"));
    // Exactly one write, as expected.
    assert_eq!(fake.writes().len(), 1, "{:?}", fake.writes());
    fake.verify();
}

const MANUAL: &str = concat!(
    "remediation:\n  mode: apply\n  rules:\n",
    "  - name: roll-back\n",
    "    match: {classes: [revision_not_ready], kinds: [Service.serving.knative.dev]}\n",
    "    action: rollback\n",
    "  - name: clean-up\n",
    "    match: {classes: [orphan], kinds: [Deployment.apps]}\n",
    "    action: deleteOrphan\n",
    "  - name: restore-deleted\n",
    "    match: {classes: [unexpected_delete], kinds: [Service.serving.knative.dev]}\n",
    "    action: restore\n",
);

const NO_GRACE: &str = "rules:\n  classes:\n    revision_not_ready: {grace: 0s}\n    orphan: {grace: 0s}\n    unexpected_delete: {grace: 0s}\n";

/// The Service with a rollout whose new Revision failed: the latest created one is not the
/// latest Ready one.
fn failed_rollout(original: &Value) -> Value {
    changed(original, |s| {
        s["status"]["latestCreatedRevisionName"] = json!("knative-webapp-00002");
        s["status"]["conditions"] = json!([
            {"type": "ConfigurationsReady", "status": "False", "reason": "RevisionFailed",
             "message": "Revision \"knative-webapp-00002\" failed with message: Container failed with: exit status 1."},
            {"type": "Ready", "status": "False", "reason": "RevisionFailed"},
            {"type": "RoutesReady", "status": "True"},
        ]);
    })
}

/// What a create of `object` takes from a user, derived here from the object's JSON: the
/// server's fields, Knative's creator/lastModifier and a template's `creationTimestamp: null`
/// left out.
fn restorable(object: &Value) -> Value {
    let mut spec = object["spec"].clone();
    if let Some(metadata) = spec
        .pointer_mut("/template/metadata")
        .and_then(Value::as_object_mut)
    {
        if metadata.get("creationTimestamp") == Some(&Value::Null) {
            metadata.remove("creationTimestamp");
        }
    }
    let mut metadata =
        json!({"name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"]});
    if let Some(labels) = object["metadata"].get("labels") {
        metadata["labels"] = labels.clone();
    }
    json!({"apiVersion": object["apiVersion"], "kind": object["kind"], "metadata": metadata, "spec": spec})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_rules_send_nothing_until_approved_then_roll_back_delete_and_restore_exactly() {
    let original = service();
    let failed = failed_rollout(&original);
    let reserve = changed(&revision(), |r| {
        r["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve")
    });
    let workload = deployment();
    // Another Service, deleted later (the rolled-back one is in its cooldown by then).
    let other = crate::resync::ready_services().remove(0);
    let other_path = format!(
        "/apis/serving.knative.dev/v1/namespaces/{}/services",
        other["metadata"]["namespace"].as_str().unwrap()
    );
    let pinned = changed(&failed, |s| {
        s["spec"]["traffic"] = json!([{"revisionName": "knative-webapp-00001", "percent": 100}]);
        written_by(
            s,
            "drift-sentinel",
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            "2026-12-05T09:00:05Z",
        );
    });
    let fake = FakeApiServer::start(vec![
        Expect::get(
            SERVICES,
            &[("limit", "500")],
            // The list's version is the cluster's newest: later deletes are plausible after it.
            list(
                "Service",
                "8000000",
                None,
                &[original.clone(), other.clone()],
            ),
        ),
        // Approved first: the traffic pinned to the last Ready Revision, on the judged version.
        namespace_read("myapp", json!({})),
        Expect::write(
            "PATCH",
            PATH,
            &[("fieldManager", "drift-sentinel")],
            (
                MERGE,
                json!({
                    "metadata": {"resourceVersion": failed["metadata"]["resourceVersion"]},
                    "spec": {"traffic": [{"revisionName": "knative-webapp-00001", "percent": 100}]},
                }),
            ),
            200,
            pinned.clone(),
        ),
        // Then the orphaned Deployment, on its uid.
        namespace_read("myapp", json!({})),
        Expect::write(
            "DELETE",
            &format!(
                "/apis/apps/v1/namespaces/{}/deployments/{}",
                workload["metadata"]["namespace"].as_str().unwrap(),
                workload["metadata"]["name"].as_str().unwrap()
            ),
            &[],
            (
                "application/json",
                json!({
                    "apiVersion": "v1", "kind": "DeleteOptions",
                    "preconditions": {"uid": workload["metadata"]["uid"]},
                    "propagationPolicy": "Background",
                }),
            ),
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ),
        // Last the deleted Service, created again without the server's fields.
        namespace_read(other["metadata"]["namespace"].as_str().unwrap(), json!({})),
        Expect::write(
            "POST",
            &other_path,
            &[("fieldManager", "drift-sentinel")],
            ("application/json", restorable(&other)),
            201,
            {
                let mut created = restorable(&other);
                created["metadata"]["uid"] = json!("a-new-uid");
                created["metadata"]["resourceVersion"] = json!("9100000");
                created
            },
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = start_with(&fake, dir.path(), MANUAL, NO_GRACE, None).await;

    // A failed rollout: nothing is sent until a person approves the rollback.
    running.send("add", &reserve).await;
    running.send("update", &failed).await;
    let rollout = running.firing("revision_not_ready").await;
    let (status, body) = running.approve(&rollout, "rollback").await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["attempt"]["outcome"], "planned");
    let detail = running
        .detail_when(&rollout, "the rollback to be applied", |detail| {
            detail["remediations"][0]["outcome"] == "applied"
        })
        .await;
    assert_eq!(
        detail["remediations"][0]["approvedBy"],
        "oncall@example.com"
    );
    running.send("update", &pinned).await;

    // An orphaned Deployment: nothing is sent until approved; then one DELETE on its uid.
    running.send("add", &workload).await;
    running.send("delete", &changed(&reserve, |_| {})).await;
    let orphan = running.firing("orphan").await;
    assert_eq!(fake.writes().len(), 1, "only the rollback so far");
    let (status, body) = running.approve(&orphan, "deleteOrphan").await;
    assert_eq!(status, 202, "{body}");
    running
        .detail_when(&orphan, "the orphan to be deleted", |detail| {
            detail["remediations"][0]["outcome"] == "applied"
        })
        .await;

    // The Service deleted by a bad script: restored after approval, without server fields.
    running.send("delete", &changed(&other, |_| {})).await;
    let deleted = running.firing("unexpected_delete").await;
    assert_eq!(fake.writes().len(), 2, "nothing sent before the approval");
    let (status, body) = running.approve(&deleted, "restore").await;
    assert_eq!(status, 202, "{body}");
    let detail = running
        .detail_when(&deleted, "the restore to be applied", |detail| {
            detail["remediations"][0]["outcome"] == "applied"
        })
        .await;
    assert_eq!(detail["remediations"][0]["status"], 201);
    assert_eq!(detail["remediations"][0]["resourceVersionAfter"], "9100000");
    assert_eq!(fake.writes().len(), 3);
    fake.verify();
}

/// A copy of the fixture Service under another name (and namespace), as a second object.
fn another_service(name: &str, namespace: &str) -> Value {
    changed(&service(), |s| {
        s["metadata"]["name"] = json!(name);
        s["metadata"]["namespace"] = json!(namespace);
        s["metadata"]["uid"] = json!(format!("uid-{namespace}-{name}"));
    })
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_is_tried_again_and_other_answers_are_final_and_an_opted_out_namespace_is_never_written(
) {
    let flaky = another_service("flaky", "myapp");
    let denied = another_service("denied", "myapp");
    let frozen = another_service("frozen", "frozen");
    let path = |object: &Value| {
        format!(
            "/apis/serving.knative.dev/v1/namespaces/{}/services/{}",
            object["metadata"]["namespace"].as_str().unwrap(),
            object["metadata"]["name"].as_str().unwrap()
        )
    };
    let edits: Vec<Value> = [&flaky, &denied, &frozen]
        .iter()
        .map(|object| traffic_split(object))
        .collect();
    let patch = |index: usize, code: u16, answer: Value| {
        let original = [&flaky, &denied, &frozen][index];
        Expect::write(
            "PATCH",
            &path(original),
            &[("fieldManager", "drift-sentinel")],
            (MERGE, revert_body(original, &edits[index])),
            code,
            answer,
        )
    };
    let fake = FakeApiServer::start(vec![
        Expect::get(
            SERVICES,
            &[("limit", "500")],
            list(
                "Service",
                "8000000",
                None,
                &[flaky.clone(), denied.clone(), frozen.clone()],
            ),
        ),
        // No answer worth keeping (503), then the same request again: applied.
        namespace_read("myapp", json!({})),
        patch(0, 503, status(503, "ServiceUnavailable", "etcdserver: request timed out")),
        patch(0, 200, edits[0].clone()),
        // Forbidden by RBAC: final, recorded, not tried again.
        namespace_read("myapp", json!({})),
        patch(
            1,
            403,
            status(
                403,
                "Forbidden",
                "services.serving.knative.dev \"denied\" is forbidden: User \"system:serviceaccount:drift-sentinel:drift-sentinel\" cannot patch resource \"services\"",
            ),
        ),
        // The namespace opted out: read, and nothing written.
        namespace_read("frozen", json!({"drift-sentinel.dev/remediation": "off"})),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = start(&fake, dir.path()).await;
    let mut outcomes = Vec::new();
    for edit in &edits {
        running.send("update", edit).await;
        let name = edit["metadata"]["name"].as_str().unwrap().to_string();
        let detail = until(
            &format!("the attempt on {name} to end"),
            &running.log,
            || async {
                let page = running.get("/api/v1/drifts?class=manual_edit").await?;
                let id = page["items"]
                    .as_array()?
                    .iter()
                    .find(|item| item["name"] == name.as_str())?["id"]
                    .as_str()?
                    .to_string();
                let detail = running.get(&format!("/api/v1/drifts/{id}")).await?;
                let outcome = detail["remediations"][0]["outcome"].as_str()?;
                (!matches!(outcome, "planned" | "sending")).then_some(detail)
            },
        )
        .await;
        outcomes.push(detail["remediations"][0].clone());
    }
    assert_eq!(outcomes[0]["outcome"], "applied", "{}", outcomes[0]);
    assert_eq!(outcomes[0]["status"], 200);
    assert_eq!(
        (
            &outcomes[1]["outcome"],
            &outcomes[1]["status"],
            &outcomes[1]["reason"]
        ),
        (&json!("failed"), &json!(403), &json!("forbidden")),
        "{}",
        outcomes[1]
    );
    assert!(
        outcomes[1]["detail"]
            .as_str()
            .unwrap()
            .contains("cannot patch"),
        "{}",
        outcomes[1]
    );
    assert_eq!(
        (&outcomes[2]["outcome"], &outcomes[2]["reason"]),
        (&json!("refused"), &json!("opted_out")),
        "{}",
        outcomes[2]
    );
    // Two tries of the first, one of the second, none of the third.
    assert_eq!(fake.writes().len(), 3, "{:?}", fake.writes());
    fake.verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_a_request_is_in_flight_ends_it_as_unknown_and_it_is_never_sent_again() {
    let original = service();
    let edited = traffic_split(&original);
    let held = crate::fake_apiserver::Gate::new();
    let listed = || {
        Expect::get(
            SERVICES,
            &[("limit", "500")],
            list("Service", "8000000", None, std::slice::from_ref(&original)),
        )
    };
    let fake = FakeApiServer::start(vec![
        listed(),
        namespace_read("myapp", json!({})),
        // The API server never answers this one before the process dies.
        Expect::write(
            "PATCH",
            PATH,
            &[("fieldManager", "drift-sentinel")],
            (MERGE, revert_body(&original, &edited)),
            200,
            edited.clone(),
        )
        .held(&held),
        // The next start lists again; no write follows.
        listed(),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = start(&fake, dir.path()).await;
    running.send("update", &edited).await;
    until("the request to be in flight", &running.log, || async {
        (!fake.writes().is_empty()).then_some(())
    })
    .await;
    // Killed (SIGKILL) while it waits for the answer.
    drop(running);
    held.open();
    let kubeconfig = fake.kubeconfig(dir.path(), "fake-ctx");
    let config = config_with(dir.path(), &kubeconfig, REVERT, "", None);
    let log = dir.path().join("second.log");
    let running = Running {
        process: Process::start(&config, &log),
        client: reqwest::Client::new(),
        log,
        next: 100,
    };
    let detail = running
        .drift_when("the attempt to end as unknown", |detail| {
            detail["remediations"][0]["outcome"] == "failed"
        })
        .await;
    let attempt = &detail["remediations"][0];
    assert_eq!(attempt["reason"], "unknown", "{attempt}");
    assert!(
        attempt["detail"]
            .as_str()
            .unwrap()
            .contains("never sent again"),
        "{attempt}"
    );
    assert_eq!(fake.writes().len(), 1, "{:?}", fake.writes());
    fake.verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_records_the_exact_request_and_sends_nothing_to_the_cluster() {
    let original = service();
    let edited = traffic_split(&original);
    // The list at start is all the fake API server will answer: any other request fails.
    let fake = FakeApiServer::start(vec![Expect::get(
        SERVICES,
        &[("limit", "500")],
        list("Service", "90000", None, std::slice::from_ref(&original)),
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = start_with(
        &fake,
        dir.path(),
        &REVERT.replace("mode: apply", "mode: dryRun"),
        "",
        None,
    )
    .await;
    running.send("update", &edited).await;
    let detail = running
        .drift_when("the dry run to be recorded", |detail| {
            detail["remediations"][0]["outcome"] == "dryRun"
        })
        .await;
    let request = &detail["remediations"][0]["request"];
    assert_eq!(request["method"], "PATCH");
    assert_eq!(
        request["path"],
        format!("{PATH}?fieldManager=drift-sentinel")
    );
    assert_eq!(request["body"], revert_body(&original, &edited));
    // The restored object resolves the drift; still nothing is sent.
    running
        .send("update", &original_again(&edited, &original))
        .await;
    running
        .drift_when("the drift to resolve", |detail| {
            detail["drift"]["state"] == "resolved"
        })
        .await;
    assert_eq!(fake.writes(), Vec::new());
    fake.verify();
}

/// `edited` with `original`'s traffic back, by a person.
fn original_again(edited: &Value, original: &Value) -> Value {
    changed(edited, |s| {
        s["spec"]["traffic"] = original["spec"]["traffic"].clone();
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            "2026-12-05T09:00:30Z",
        );
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fight_stops_the_requests_after_the_third_set_back_and_raises_remediation_fight() {
    let original = service();
    // Built ahead: each edit follows the revert before it; each revert is what the fake API
    // server answers and what the next event shows.
    let mut script = vec![Expect::get(
        SERVICES,
        &[("limit", "500")],
        list("Service", "8000000", None, std::slice::from_ref(&original)),
    )];
    let mut rounds = Vec::new();
    let mut current = original.clone();
    for round in 0..4 {
        let time = format!("2026-12-05T09:0{round}:00Z");
        let edit = changed(&current, |s| {
            s["spec"]["traffic"] = json!([{"latestRevision": true, "percent": 90}, {"revisionName": "knative-webapp-00000", "percent": 10}]);
            written_by(
                s,
                "flux",
                "Update",
                json!({"f:spec": {"f:traffic": {}}}),
                &time,
            );
        });
        let reverted = changed(&edit, |s| {
            s["spec"]["traffic"] = original["spec"]["traffic"].clone();
            written_by(
                s,
                "drift-sentinel",
                "Update",
                json!({"f:spec": {"f:traffic": {}}}),
                &time,
            );
        });
        if round < 3 {
            script.push(namespace_read("myapp", json!({})));
            script.push(Expect::write(
                "PATCH",
                PATH,
                &[("fieldManager", "drift-sentinel")],
                (MERGE, revert_body(&original, &edit)),
                200,
                reverted.clone(),
            ));
        }
        current = reverted.clone();
        rounds.push((edit, reverted));
    }
    let fake = FakeApiServer::start(script).await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = start_with(
        &fake,
        dir.path(),
        &format!("{REVERT}    cooldown: 100ms\n"),
        "",
        None,
    )
    .await;
    for (round, (edit, reverted)) in rounds.iter().enumerate() {
        // Past the rule's (100 ms) cooldown since the revert before: the one wait on time
        // itself, which is what a cooldown is.
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        running.send("update", edit).await;
        let wanted = if round < 3 { "applied" } else { "refused" };
        let detail = running
            .drift_when(&format!("round {round}'s attempt"), |detail| {
                detail["drift"]["state"] == "firing"
                    && detail["remediations"][0]["outcome"] == wanted
            })
            .await;
        if round == 3 {
            assert_eq!(detail["remediations"][0]["reason"], "fight", "{detail}");
            break;
        }
        running.send("update", reverted).await;
        running
            .drift_when(&format!("round {round}'s drift to resolve"), |detail| {
                detail["drift"]["state"] == "resolved"
            })
            .await;
    }
    let fight = until("remediation_fight", &running.log, || async {
        let page = running
            .get("/api/v1/drifts?class=remediation_fight&state=firing")
            .await?;
        page["items"].get(0).cloned()
    })
    .await;
    assert_eq!(fight["severity"], "critical");
    assert_eq!(fight["evidence"]["facts"]["manager"], "flux", "{fight}");
    // Three PATCHes, and none after the fight.
    assert_eq!(fake.writes().len(), 3, "{:?}", fake.writes());
    fake.verify();
}
