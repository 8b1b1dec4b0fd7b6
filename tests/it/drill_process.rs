//! `drift-sentinel drill --dry-run` (the real binary) against the scripted fake API server: the
//! namespaces are checked first and a namespace without the drill label refuses the whole run
//! before any target is read; with the label, each target is read and every request printed,
//! and nothing is written (the fake server fails on any request it does not expect).

use serde_json::{json, Value};

use crate::fake_apiserver::{Expect, FakeApiServer};
use crate::scenario::service;

const CATALOG: &str = r#"
drills:
  - name: traffic-hand-edit
    target: {apiVersion: serving.knative.dev/v1, kind: Service, namespace: myapp, name: knative-webapp}
    inject:
      mergePatch: {spec: {traffic: [{latestRevision: true, percent: 80}, {latestRevision: true, percent: 20, tag: drill}]}}
    expect: {class: manual_edit, within: 60s}
  - name: service-deleted
    target: {apiVersion: serving.knative.dev/v1, kind: Service, namespace: myapp, name: knative-webapp}
    inject: {delete: true}
    expect: {class: unexpected_delete, within: 3m}
"#;

fn namespace(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": "myapp", "uid": "ns-myapp", "resourceVersion": "3", "labels": labels}})
}

async fn drill(
    fake: &FakeApiServer,
    dir: &std::path::Path,
    dry_run: bool,
) -> crate::support::Outcome {
    let kubeconfig = fake.kubeconfig(dir, "fake-ctx");
    let catalog = dir.join("catalog.yaml");
    std::fs::write(&catalog, CATALOG).unwrap();
    let mut args: Vec<String> = vec![
        "drill".into(),
        "--catalog".into(),
        catalog.display().to_string(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--context".into(),
        "fake-ctx".into(),
    ];
    if dry_run {
        args.push("--dry-run".into());
    } else {
        args.extend([
            "--sink".into(),
            "http://127.0.0.1:9".into(),
            "--journal".into(),
            dir.join("journal").display().to_string(),
        ]);
    }
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::support::run_binary(&args, None)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_reads_the_targets_prints_every_request_and_sends_nothing() {
    let target = service();
    let path = "/apis/serving.knative.dev/v1/namespaces/myapp/services/knative-webapp";
    let fake = FakeApiServer::start(vec![
        Expect::get(
            "/api/v1/namespaces/myapp",
            &[],
            namespace(json!({"drift-sentinel.dev/drills": "allowed"})),
        ),
        Expect::get(path, &[], target.clone()),
        Expect::get(path, &[], target.clone()),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let outcome = drill(&fake, dir.path(), true).await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    let version = target["metadata"]["resourceVersion"].as_str().unwrap();
    assert!(
        outcome.stdout.contains(&format!(
            "inject: PATCH {path}?fieldManager=drift-sentinel-drill (application/merge-patch+json)"
        )),
        "{}",
        outcome.stdout
    );
    assert!(outcome
        .stdout
        .contains(&format!("\"resourceVersion\":\"{version}\"")));
    assert!(outcome
        .stdout
        .contains(&format!("inject: DELETE {path} (application/json)")));
    assert!(outcome.stdout.contains(
        "restore: POST /apis/serving.knative.dev/v1/namespaces/myapp/services?fieldManager=drift-sentinel-drill"
    ));
    assert!(outcome
        .stdout
        .contains("# drill traffic-hand-edit: expect manual_edit within 60s"));
    assert_eq!(fake.writes(), Vec::new());
    fake.verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_without_the_label_is_refused_before_any_target_is_read() {
    let fake = FakeApiServer::start(vec![Expect::get(
        "/api/v1/namespaces/myapp",
        &[],
        namespace(json!({"team": "payments"})),
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let outcome = drill(&fake, dir.path(), true).await;
    assert_eq!(outcome.code, 2, "{}", outcome.stdout);
    assert!(
        outcome.stderr.contains(
            "namespace myapp is not labelled drift-sentinel.dev/drills: \"allowed\"; refused before any request (drills traffic-hand-edit, service-deleted)"
        ),
        "{}",
        outcome.stderr
    );
    assert_eq!(outcome.stdout, "");
    fake.verify();
    // A real run is refused the same way, before any request to a target or to the sink
    // (nothing listens at the sink's address given), and journals nothing.
    let fake = FakeApiServer::start(vec![Expect::get(
        "/api/v1/namespaces/myapp",
        &[],
        namespace(json!({"team": "payments"})),
    )])
    .await;
    let outcome = drill(&fake, dir.path(), false).await;
    assert_eq!(outcome.code, 2, "{}", outcome.stdout);
    assert!(
        outcome
            .stderr
            .contains("namespace myapp is not labelled drift-sentinel.dev/drills: \"allowed\""),
        "{}",
        outcome.stderr
    );
    assert!(!dir.path().join("journal").exists());
    fake.verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_is_checked_before_any_target_is_read() {
    let catalog = r#"
drills:
  - name: in-open
    target: {apiVersion: v1, kind: ConfigMap, namespace: drills, name: c}
    inject: {mergePatch: {data: {a: b}}}
    expect: {class: config_drift, within: 60s}
  - name: in-closed
    target: {apiVersion: v1, kind: ConfigMap, namespace: prod, name: c}
    inject: {mergePatch: {data: {a: b}}}
    expect: {class: config_drift, within: 60s}
"#;
    let ns = |name: &str, labels: Value| {
        Expect::get(
            &format!("/api/v1/namespaces/{name}"),
            &[],
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}),
        )
    };
    // The open namespace is read first; the closed one refuses the run; no target is read.
    let fake = FakeApiServer::start(vec![
        ns("drills", json!({"drift-sentinel.dev/drills": "allowed"})),
        ns("prod", json!({})),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake.kubeconfig(dir.path(), "fake-ctx");
    let file = dir.path().join("two.yaml");
    std::fs::write(&file, catalog).unwrap();
    let args = [
        "drill".to_string(),
        "--catalog".into(),
        file.display().to_string(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--context".into(),
        "fake-ctx".into(),
        "--dry-run".into(),
    ];
    let outcome = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::support::run_binary(&args, None)
    })
    .await
    .unwrap();
    assert_eq!(outcome.code, 2, "{}", outcome.stdout);
    assert!(
        outcome.stderr.contains("namespace prod is not labelled"),
        "{}",
        outcome.stderr
    );
    assert_eq!(
        fake.served(),
        vec!["/api/v1/namespaces/drills?", "/api/v1/namespaces/prod?"]
    );
    fake.verify();
}
