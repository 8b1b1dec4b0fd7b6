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

const PATH: &str = "/apis/serving.knative.dev/v1/namespaces/myapp/services/knative-webapp";
const MERGE: &str = "application/merge-patch+json";

/// The hand edit: kubectl-edit splits the traffic 90/10.
fn traffic_edit(original: &Value) -> Value {
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

/// The config of a service that reverts hand edits of Services on the fake cluster.
fn config(dir: &Path, kubeconfig: &Path) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "store:\n  path: {db}\n\
             channels:\n  - {{name: log, type: log}}\n\
             routes:\n  - {{channels: [log], groupWait: 0s}}\n\
             resync:\n  enabled: true\n  interval: 1h\n  kubeconfig: {kubeconfig}\n  context: fake-ctx\n\
             \x20 resources:\n    - {{apiVersion: serving.knative.dev/v1, kind: Service}}\n\
             remediation:\n  mode: apply\n  rules:\n  - name: revert-hand-edits\n\
             \x20   match: {{classes: [manual_edit], kinds: [Service.serving.knative.dev]}}\n\
             \x20   action: revert\n    approval: auto\n",
            db = dir.join("remediation.db").display(),
            kubeconfig = kubeconfig.display(),
        ),
    )
    .unwrap();
    path
}

struct Running {
    process: Process,
    client: reqwest::Client,
    log: std::path::PathBuf,
    next: usize,
}

impl Running {
    async fn send(&mut self, verb: &str, object: &Value) {
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
    async fn drift_when(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        until(what, &self.log, || async {
            let page = self.get("/api/v1/drifts?class=manual_edit").await?;
            let id = page["items"].get(0)?["id"].as_str()?.to_string();
            let detail = self.get(&format!("/api/v1/drifts/{id}")).await?;
            check(&detail).then_some(detail)
        })
        .await
    }
}

async fn start(fake: &FakeApiServer, dir: &Path) -> Running {
    let kubeconfig = fake.kubeconfig(dir, "fake-ctx");
    let config = config(dir, &kubeconfig);
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
fn revert_body(original: &Value, edited: &Value) -> Value {
    json!({
        "metadata": {"resourceVersion": edited["metadata"]["resourceVersion"]},
        "spec": {"traffic": original["spec"]["traffic"]},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_revert_sends_one_exact_patch_and_the_restored_object_resolves_the_drift() {
    let original = service();
    let edited = traffic_edit(&original);
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
    let mut running = start(&fake, dir.path()).await;
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
    // Exactly one write, as expected.
    assert_eq!(fake.writes().len(), 1, "{:?}", fake.writes());
    fake.verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_ends_the_attempt_without_a_second_request() {
    let original = service();
    let edited = traffic_edit(&original);
    let conflict = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Operation cannot be fulfilled on services.serving.knative.dev \"knative-webapp\": the object has been modified; please apply your changes to the latest version and try again",
        "reason": "Conflict", "details": {"name": "knative-webapp", "group": "serving.knative.dev", "kind": "services"},
        "code": 409,
    });
    let fake = FakeApiServer::start(vec![
        Expect::get(
            SERVICES,
            &[("limit", "500")],
            list("Service", "90000", None, std::slice::from_ref(&original)),
        ),
        Expect::write(
            "PATCH",
            PATH,
            &[("fieldManager", "drift-sentinel")],
            (MERGE, revert_body(&original, &edited)),
            409,
            conflict,
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = start(&fake, dir.path()).await;
    running.send("update", &edited).await;
    let detail = running
        .drift_when("the conflict to be recorded", |detail| {
            detail["remediations"][0]["outcome"] == "conflict"
        })
        .await;
    let attempt = &detail["remediations"][0];
    assert_eq!(attempt["status"], 409);
    assert_eq!(attempt["reason"], "conflict");
    assert!(
        attempt["detail"]
            .as_str()
            .unwrap()
            .contains("the object has been modified"),
        "{attempt}"
    );
    assert_eq!(detail["drift"]["state"], "firing");
    assert_eq!(detail["remediations"].as_array().unwrap().len(), 1);
    // Nothing is sent again: the one write is all the fake server saw.
    assert_eq!(fake.writes().len(), 1, "{:?}", fake.writes());
    fake.verify();
}
