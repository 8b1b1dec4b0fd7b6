//! Remediation with a writer and a standby on one PostgreSQL store (two replicas of the real
//! service in this process, each with the Kubernetes client on the scripted fake API server):
//! the attempt is sent once, by the writer; the standby runs no sender (and no resync), so the
//! fake server, which fails on any request it does not expect, hears from the writer only.

use serde_json::{json, Value};

use crate::fake_apiserver::{list, Expect, FakeApiServer};
use crate::pg::PgServer;
use crate::resync::SERVICES;
use crate::scenario::*;
use crate::support::structured_event;

const PATH: &str = "/apis/serving.knative.dev/v1/namespaces/myapp/services/knative-webapp";

async fn start(config: &str) -> drift_sentinel::app::Server {
    let config = drift_core::config::load_str(config, &|_| None).unwrap();
    drift_sentinel::app::start(config, None, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, Value) {
    match client.get(url).send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_writer_sends_and_a_standby_sends_nothing() {
    let original = service();
    let edited = traffic_split(&original);
    let fake = FakeApiServer::start(vec![
        // The writer's resync at start; the standby lists nothing.
        Expect::get(
            SERVICES,
            &[("limit", "500")],
            list("Service", "90000", None, std::slice::from_ref(&original)),
        ),
        Expect::get(
            "/api/v1/namespaces/myapp",
            &[],
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "myapp"}}),
        ),
        Expect::write(
            "PATCH",
            PATH,
            &[("fieldManager", "drift-sentinel")],
            (
                "application/merge-patch+json",
                json!({"metadata": {"resourceVersion": edited["metadata"]["resourceVersion"]},
                       "spec": {"traffic": original["spec"]["traffic"]}}),
            ),
            200,
            original.clone(),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake.kubeconfig(dir.path(), "fake-ctx");
    let url = PgServer::shared().database();
    let config = format!(
        "store:\n  url: \"{url}\"\n\
         channels:\n  - {{name: log, type: log}}\n\
         routes:\n  - {{channels: [log], groupWait: 0s, groupInterval: 0s}}\n\
         resync:\n  enabled: true\n  interval: 1h\n  kubeconfig: {kubeconfig}\n  context: fake-ctx\n\
         \x20 resources:\n    - {{apiVersion: serving.knative.dev/v1, kind: Service}}\n\
         remediation:\n  mode: apply\n  rules:\n  - name: revert-hand-edits\n\
         \x20   match: {{classes: [manual_edit], kinds: [Service.serving.knative.dev]}}\n\
         \x20   action: revert\n    approval: auto\n",
        kubeconfig = kubeconfig.display(),
    );
    let client = reqwest::Client::new();
    let writer = start(&config).await;
    let writer_base = format!("http://{}", writer.addr);
    let mut ready = false;
    for _ in 0..300 {
        if get(&client, &format!("{writer_base}/readyz")).await.0 == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(ready, "the first replica becomes the writer");
    let standby = start(&config).await;
    let standby_base = format!("http://{}", standby.addr);
    assert_ne!(
        get(&client, &format!("{standby_base}/readyz")).await.0,
        200,
        "the second replica stands by"
    );

    let response = client
        .post(&writer_base)
        .header("content-type", "application/cloudevents+json")
        .json(&structured_event("edit", "update", &edited))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let mut applied = Value::Null;
    for _ in 0..400 {
        let (_, page) = get(
            &client,
            &format!("{writer_base}/api/v1/drifts?class=manual_edit"),
        )
        .await;
        if let Some(id) = page["items"][0]["id"].as_str() {
            let (_, detail) = get(&client, &format!("{writer_base}/api/v1/drifts/{id}")).await;
            if detail["remediations"][0]["outcome"] == "applied" {
                applied = detail;
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(applied["remediations"][0]["status"], 200, "{applied}");
    // Time for a standby that wrongly ran a sender to show itself (it would list, read the
    // namespace or write: every one of those is an unexpected request).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(fake.writes().len(), 1, "{:?}", fake.writes());
    fake.verify();
    standby.shutdown.cancel();
    let _ = standby.done.await;
    writer.shutdown.cancel();
    let _ = writer.done.await;
}
