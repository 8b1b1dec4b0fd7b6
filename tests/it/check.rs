//! `drift-sentinel check`: baseline/live pairs built from the real Knative objects in
//! `tests/fixtures/knative` (the rguske Configuration/Route/Revision set with the Service that
//! owns them, the vscode-knative Service and Revision lists, Knative's default ConfigMaps).
//! Exit codes are checked on the real binary; findings and formats through the library.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use drift_core::classify::Rules;
use drift_core::config::RulesConfig;
use drift_core::manifest::Manifests;
use drift_model::Severity;
use drift_sentinel::check::{self, Format, Report};
use serde_json::{json, Value};

use crate::scenario::*;
use crate::support::{fixture_path, fixture_yaml, merge, run_binary, Outcome};

// ---- Inputs -----------------------------------------------------------------------------------

/// The Git manifest of the rguske Knative Service: what a team keeps in its repository.
const WEBAPP_MANIFEST: &str = r#"# The web app, as deployed by the pipeline.
apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: knative-webapp
  namespace: myapp
spec:
  template:
    spec:
      containers:
        - image: projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp:v1
          ports:
            - containerPort: 80
  traffic:
    - latestRevision: true
      percent: 100
"#;

const AUTOSCALER: &str =
    "configmaps/knative-serving__config-core-configmaps__config-autoscaler.yaml";
const GC: &str = "configmaps/knative-serving__config-core-configmaps__config-gc.yaml";
const SERVICE_LIST: &str =
    "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceServiceList.yaml";
const FAILED_SERVICE_LIST: &str =
    "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceFailedRevisionServiceList.yaml";
const FAILED_REVISION_LIST: &str =
    "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceFailedRevisionRevisionList.yaml";
const MULTIPLE_SERVICES: &str =
    "serving/redhat-developer-vscode-knative__test-servingTree-multipleServiceServicesList.yaml";

fn fixture_text(relative: &str) -> String {
    std::fs::read_to_string(fixture_path(relative)).expect("fixture exists")
}

/// The baseline: the web app's manifest and Knative's `config-autoscaler` as shipped, in one
/// multi-document file (comments and the licence header included).
fn baseline_text() -> String {
    format!("{WEBAPP_MANIFEST}---\n{}", fixture_text(AUTOSCALER))
}

/// The live objects of the clean case: the Service, the Configuration, Route and Revision it
/// owns, and `config-autoscaler` with server-set metadata.
fn live_objects() -> Vec<Value> {
    vec![
        service(),
        configuration(),
        route(),
        revision(),
        config_autoscaler(),
    ]
}

/// `kubectl get ... -A -o yaml`: one `List` document.
fn kubectl_list(objects: &[Value]) -> String {
    serde_saphyr::to_string(&json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": objects,
        "metadata": {"resourceVersion": ""},
    }))
    .expect("yaml")
}

/// The manifest a client last applied (`kubectl.kubernetes.io/last-applied-configuration`).
fn last_applied(object: &Value) -> Value {
    let text = object["metadata"]["annotations"]
        ["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .expect("last-applied-configuration");
    serde_json::from_str(text).expect("json")
}

fn list_items(relative: &str) -> Vec<Value> {
    fixture_yaml(relative)["items"]
        .as_array()
        .expect("a List")
        .clone()
}

fn snapshot(files: &[(&str, &str)]) -> Manifests {
    let mut snapshot = Manifests::default();
    for (name, text) in files {
        snapshot
            .add_yaml(name, text)
            .unwrap_or_else(|error| panic!("{error}"));
    }
    snapshot
}

fn rules(yaml: &str) -> Arc<Rules> {
    let config: RulesConfig = serde_saphyr::from_str(yaml).expect("rules yaml");
    Arc::new(config.compile())
}

fn run_with(rules_yaml: &str, baseline: &str, live: &[Value], fail_on: Severity) -> Report {
    let baseline = snapshot(&[("git/app.yaml", baseline)]);
    let live = snapshot(&[("live.yaml", &kubectl_list(live))]);
    check::check(Some(&baseline), &live, rules(rules_yaml), fail_on)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn run(baseline: &str, live: &[Value]) -> Report {
    run_with("{}", baseline, live, Severity::Warning)
}

/// Every finding as `severity class object`.
fn lines(report: &Report) -> Vec<String> {
    report
        .findings()
        .map(|(object, finding)| {
            format!(
                "{} {} {}",
                finding.severity.as_str(),
                finding.class,
                object.reference()
            )
        })
        .collect()
}

#[track_caller]
fn expect(report: &Report, expected: &[&str]) {
    let actual = lines(report);
    assert_eq!(
        actual,
        expected
            .iter()
            .map(|line| line.to_string())
            .collect::<Vec<_>>(),
        "\nactual findings:\n{}\n{}",
        actual.join("\n"),
        check::render_text(report)
    );
}

fn finding<'a>(report: &'a Report, class: &str) -> &'a check::Finding {
    report
        .findings()
        .find(|(_, finding)| finding.class == class)
        .map(|(_, finding)| finding)
        .unwrap_or_else(|| panic!("no {class} finding in {:?}", lines(report)))
}

const KSVC: &str = "Service.serving.knative.dev/myapp/knative-webapp";

// ---- The clean case ---------------------------------------------------------------------------

#[test]
fn live_matching_the_baseline_has_no_findings() {
    let report = run(&baseline_text(), &live_objects());
    expect(&report, &[]);
    // Every object was looked at: the Service and what Knative made of it, and the ConfigMap.
    let checked: Vec<String> = report.objects.iter().map(|o| o.reference()).collect();
    assert_eq!(
        checked,
        [
            "ConfigMap/knative-serving/config-autoscaler",
            "Configuration.serving.knative.dev/myapp/knative-webapp",
            "Revision.serving.knative.dev/myapp/knative-webapp-00001",
            "Route.serving.knative.dev/myapp/knative-webapp",
            KSVC,
        ]
    );
    assert!(!report.failed());
    assert_eq!(
        check::render_text(&report),
        "PASS: no findings in 5 objects (fail-on warning)\n"
    );
}

// ---- missing and extra ------------------------------------------------------------------------

#[test]
fn objects_in_git_but_not_live_are_missing() {
    // The Service was deleted (its children still listed: a snapshot mid-cascade) and
    // config-autoscaler is gone.
    let live = vec![configuration(), route(), revision()];
    let report = run(&baseline_text(), &live);
    expect(
        &report,
        &[
            "warning missing ConfigMap/knative-serving/config-autoscaler",
            &format!("critical missing {KSVC}"),
        ],
    );
    let missing = finding(&report, "missing");
    assert!(
        missing.message.contains("git/app.yaml document 2"),
        "{}",
        missing.message
    );
    assert_eq!(
        missing.hint.as_deref(),
        Some("kubectl apply -f git/app.yaml")
    );
}

#[test]
fn a_manifest_without_namespace_is_missing_with_a_pointer_to_the_live_one() {
    let manifest = WEBAPP_MANIFEST.replace("  namespace: myapp\n", "");
    let report = run(&manifest, &[service()]);
    let missing = finding(&report, "missing");
    assert!(
        missing.message.contains(
            "the manifest sets no metadata.namespace, and live has it in namespace myapp"
        ),
        "{}",
        missing.message
    );
}

#[test]
fn extra_objects_are_what_people_deploy_not_what_knative_creates() {
    let mut live = live_objects();
    // Three more Services deployed by hand, and the tagged `example` Service.
    live.extend(list_items(MULTIPLE_SERVICES));
    // A standalone Configuration (no Service owns it).
    let mut standalone = configuration();
    standalone["metadata"]["name"] = json!("batch-job");
    standalone["metadata"]["uid"] = json!("standalone-uid");
    standalone["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    standalone["metadata"]["labels"] = json!({});
    live.push(standalone);
    // Revisions are Knative's, even when their Service is not in Git.
    live.extend(list_items(
        "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceRevisionList.yaml",
    ));
    // A watched ConfigMap nobody keeps in Git, one that is not watched, an unknown kind.
    let mut gc = fixture_yaml(GC);
    gc["metadata"]["uid"] = json!("gc-uid");
    gc["metadata"]["resourceVersion"] = json!("1001");
    live.push(gc);
    live.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt", "namespace": "myapp", "uid": "ca", "resourceVersion": "5"},
        "data": {"ca.crt": "-----BEGIN CERTIFICATE-----"}}));
    live.push(json!({"apiVersion": "example.com/v1", "kind": "Foo",
        "metadata": {"name": "bar", "namespace": "myapp", "uid": "foo", "resourceVersion": "6"},
        "spec": {"size": 3}}));
    let report = run(&baseline_text(), &live);
    expect(
        &report,
        &[
            "warning extra Service.serving.knative.dev/a-serverless-example/aaa",
            "warning extra Service.serving.knative.dev/a-serverless-example/bbb",
            "warning extra Service.serving.knative.dev/a-serverless-example/ccc",
            "warning extra Service.serving.knative.dev/a-serverless-example/example",
            "info extra ConfigMap/knative-serving/config-gc",
            "warning extra Configuration.serving.knative.dev/myapp/batch-job",
        ],
    );
    let extra = finding(&report, "extra");
    assert!(extra
        .hint
        .as_deref()
        .unwrap()
        .ends_with("kubectl -n a-serverless-example delete services.serving.knative.dev aaa"));
    // The Revisions are checked (for readiness) but never extra; the others are not checked.
    let checked: Vec<String> = report.objects.iter().map(|o| o.reference()).collect();
    assert!(checked
        .contains(&"Revision.serving.knative.dev/a-serverless-example/example-75w7v".to_string()));
    assert!(!checked
        .iter()
        .any(|o| o.contains("kube-root-ca.crt") || o.contains("Foo")));
}

#[test]
fn scope_from_the_rules_limits_what_is_checked() {
    let mut live = live_objects();
    live.extend(list_items(MULTIPLE_SERVICES));
    let report = run_with(
        "scope:\n  namespaces: [myapp, knative-serving]\n",
        &baseline_text(),
        &live,
        Severity::Warning,
    );
    expect(&report, &[]);
}

// ---- Spec differences -------------------------------------------------------------------------

#[test]
fn a_changed_image_is_spec_drift_with_a_diff_and_a_patch() {
    let mut live = live_objects();
    live[0]["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp:v2");
    let report = run(&baseline_text(), &live);
    expect(&report, &[&format!("warning spec_drift {KSVC}")]);
    let drift = finding(&report, "spec_drift");
    assert_eq!(drift.diff.len(), 1);
    assert_eq!(drift.diff[0].path, "/spec/template/spec/containers/0/image");
    assert_eq!(
        drift.diff[0].desired,
        Some(json!(
            "projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp:v1"
        ))
    );
    assert_eq!(
        drift.diff[0].live,
        Some(json!(
            "projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp:v2"
        ))
    );
    let hint = drift.hint.as_deref().unwrap();
    assert!(
        hint.starts_with("kubectl -n myapp patch services.serving.knative.dev knative-webapp --type=json -p '[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\""),
        "{hint}"
    );
    assert!(
        hint.ends_with("# or: kubectl apply -f git/app.yaml"),
        "{hint}"
    );
}

#[test]
fn ignore_paths_from_the_rules_apply() {
    let mut live = live_objects();
    live[0]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other:v2");
    let report = run_with(
        "ignorePaths:\n  Service: [/spec/template/spec/containers/0/image]\n",
        &baseline_text(),
        &live,
        Severity::Warning,
    );
    expect(&report, &[]);
}

#[test]
fn traffic_tagged_by_hand_differs_from_the_applied_manifest() {
    // The vscode-knative Service: applied with one traffic target, then `kn` added two tags.
    let live = list_items(SERVICE_LIST);
    let manifest = serde_json::to_string(&last_applied(&live[0])).unwrap();
    let report = run(&manifest, &live);
    expect(
        &report,
        &["warning spec_drift Service.serving.knative.dev/a-serverless-example/example"],
    );
    let drift = finding(&report, "spec_drift");
    assert_eq!(drift.diff[0].path, "/spec/traffic");
    assert_eq!(
        drift.diff[0].desired,
        Some(json!([{"latestRevision": true, "percent": 100}]))
    );
}

// ---- Fields left to Knative -------------------------------------------------------------------

/// The web app's manifest as most teams write it: traffic, timeouts and concurrency left to
/// Knative.
fn manifest_leaving_traffic_to_knative() -> String {
    let manifest = WEBAPP_MANIFEST.replace(
        "  traffic:\n    - latestRevision: true\n      percent: 100\n",
        "",
    );
    assert!(
        !manifest.contains("traffic"),
        "the manifest leaves traffic out"
    );
    manifest
}

/// The Service and what Knative made of it, without the ConfigMap (not in this baseline).
fn webapp_family(service: Value) -> Vec<Value> {
    vec![service, configuration(), route(), revision()]
}

/// One diff entry: its path, desired value, and where the desired value came from.
type Entry = (String, Option<Value>, Option<String>);

/// The `spec_drift` of the Service: its paths, desired values and where they came from.
fn service_spec_drift(report: &Report) -> Vec<Entry> {
    let (_, finding) = report
        .findings()
        .find(|(object, finding)| object.reference() == KSVC && finding.class == "spec_drift")
        .unwrap_or_else(|| panic!("no spec_drift on the Service: {:?}", lines(report)));
    finding
        .diff
        .iter()
        .map(|entry| {
            (
                entry.path.clone(),
                entry.desired.clone(),
                entry.desired_from.clone(),
            )
        })
        .collect()
}

#[test]
fn fields_left_to_knative_pass_when_defaulted_and_fail_when_edited() {
    let manifest = manifest_leaving_traffic_to_knative();
    expect(&run(&manifest, &webapp_family(service())), &[]);
    let built_in = Some(
        "Knative's built-in default for revision-timeout-seconds: knative-serving/config-defaults not found"
            .to_string(),
    );
    let cases: Vec<(&str, Value, Entry)> = vec![
        (
            "a hand-made 80/20 split",
            json!({"spec": {"traffic": [
                {"revisionName": "knative-webapp-00001", "percent": 80},
                {"latestRevision": true, "percent": 20}]}}),
            (
                "/spec/traffic".into(),
                Some(json!([{"latestRevision": true, "percent": 100}])),
                Some("Knative's default: all traffic to the latest Revision".into()),
            ),
        ),
        (
            "a cluster-local label",
            json!({"metadata": {"labels": {"networking.knative.dev/visibility": "cluster-local"}}}),
            (
                "/metadata/labels/networking.knative.dev~1visibility".into(),
                None,
                Some("a behavioural label the manifest does not set: it must be absent".into()),
            ),
        ),
        (
            "a min-scale on the template",
            json!({"spec": {"template": {"metadata": {"annotations": {"autoscaling.knative.dev/min-scale": "3"}}}}}),
            (
                "/spec/template/metadata/annotations/autoscaling.knative.dev~1min-scale".into(),
                None,
                Some("a behavioural annotation the manifest does not set: it must be absent".into()),
            ),
        ),
        (
            "a longer timeout",
            json!({"spec": {"template": {"spec": {"timeoutSeconds": 900}}}}),
            (
                "/spec/template/spec/timeoutSeconds".into(),
                Some(json!(300)),
                built_in,
            ),
        ),
        (
            "a container concurrency",
            json!({"spec": {"template": {"spec": {"containerConcurrency": 10}}}}),
            (
                "/spec/template/spec/containerConcurrency".into(),
                Some(json!(0)),
                Some("Knative's built-in default for container-concurrency: knative-serving/config-defaults not found".into()),
            ),
        ),
    ];
    for (what, patch, expected) in cases {
        let mut live = service();
        merge(&mut live, &patch);
        let report = run(&manifest, &webapp_family(live));
        assert!(report.failed(), "{what}: {:?}", lines(&report));
        assert_eq!(service_spec_drift(&report), [expected], "{what}");
        // Re-applying the manifest would not restore a field it leaves out: the hint says so.
        let hint = finding(&report, "spec_drift")
            .hint
            .clone()
            .unwrap_or_default();
        assert!(
            hint.contains("the manifest leaves these fields to Knative") && !hint.contains("# or:"),
            "{what}: {hint}"
        );
    }
    // A bookkeeping annotation added by a tool is not compared.
    let mut live = service();
    merge(
        &mut live,
        &json!({"spec": {"template": {"metadata": {"annotations": {"client.knative.dev/updateTimestamp": "2023-10-09T21:40:00Z"}}}}}),
    );
    expect(&run(&manifest, &webapp_family(live)), &[]);
}

/// A split made by hand in the spec, not yet served: `spec_drift` says to restore the
/// baseline, and `traffic_drift` does not contradict it by re-applying the edited split.
#[test]
fn a_hand_made_split_gets_one_direction_of_fix() {
    let split = json!([
        {"revisionName": "knative-webapp-00001", "percent": 80},
        {"latestRevision": true, "percent": 20}]);
    let mut live = service();
    live["spec"]["traffic"] = split.clone();
    // The Route follows its Service; the split is not served yet (status still 100 %).
    let mut route = route();
    route["spec"]["traffic"] = split;
    let family = vec![live, configuration(), route, revision()];
    let report = run(&manifest_leaving_traffic_to_knative(), &family);
    let spec = finding(&report, "spec_drift").hint.clone().unwrap();
    assert!(spec.contains("patch"), "{spec}");
    let traffic = finding(&report, "traffic_drift").hint.clone().unwrap();
    assert_eq!(
        traffic,
        "the spec's traffic itself differs from the baseline: apply the spec_drift fix first; the served split follows the restored spec"
    );
}

#[test]
fn the_snapshots_config_defaults_decide_and_the_report_says_so() {
    let manifest = manifest_leaving_traffic_to_knative();
    let mut live = service();
    live["spec"]["template"]["spec"]["timeoutSeconds"] = json!(900);
    let mut config = fixture_yaml(CONFIG_DEFAULTS);
    config["data"]["revision-timeout-seconds"] = json!("900");
    let baseline = format!(
        "{manifest}---\n{}",
        serde_saphyr::to_string(&config).unwrap()
    );
    let mut family = webapp_family(live.clone());
    family.push(config.clone());
    let report = run(&baseline, &family);
    expect(&report, &[]);
    let json: Value = serde_json::from_str(&check::render(&report, Format::Json)).unwrap();
    assert_eq!(
        json["defaults"][0],
        json!({"configMap": "knative-serving/config-defaults", "found": true, "notes": []})
    );
    // Where the cluster's default is 900, 450 is an edit (300, Knative's built-in default, is
    // what a Service created before the cluster raised it keeps), and the text says whose
    // default.
    live["spec"]["template"]["spec"]["timeoutSeconds"] = json!(450);
    let mut family = webapp_family(live);
    family.push(config);
    let report = run(&baseline, &family);
    assert_eq!(
        service_spec_drift(&report),
        [(
            "/spec/template/spec/timeoutSeconds".to_string(),
            Some(json!(900)),
            Some("Knative's default: revision-timeout-seconds in knative-serving/config-defaults; Knative's built-in 300 is accepted too".to_string()),
        )]
    );
    assert!(check::render_text(&report).contains(
        "/spec/template/spec/timeoutSeconds: desired 900 (Knative's default: revision-timeout-seconds in knative-serving/config-defaults; Knative's built-in 300 is accepted too), live 450"
    ), "{}", check::render_text(&report));
}

const CONFIG_DEFAULTS: &str =
    "configmaps/knative-serving__config-core-configmaps__config-defaults.yaml";

/// What a manifest in Git holds of a live object: apiVersion, kind, name, namespace, labels,
/// annotations other than bookkeeping, spec and data; no status, no server-set metadata.
fn as_manifest(live: &Value) -> Value {
    let mut manifest = json!({
        "apiVersion": live["apiVersion"],
        "kind": live["kind"],
        "metadata": {"name": live["metadata"]["name"], "namespace": live["metadata"]["namespace"]},
    });
    for field in ["labels", "annotations"] {
        if let Some(Value::Object(map)) = live["metadata"].get(field) {
            let kept: serde_json::Map<String, Value> = map
                .iter()
                .filter(|(key, _)| {
                    !key.ends_with("/creator")
                        && !key.ends_with("/lastModifier")
                        && *key != "kubectl.kubernetes.io/last-applied-configuration"
                })
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            manifest["metadata"][field] = Value::Object(kept);
        }
    }
    for field in ["spec", "data"] {
        if let Some(value) = live.get(field) {
            manifest[field] = value.clone();
        }
    }
    manifest
}

/// Every real and derived Knative object of the fixtures, each with the manifest it came from:
/// the one `kubectl apply` recorded (`last-applied-configuration`), else the object itself as a
/// team would keep it in Git. A clean, defaulted live object compares equal to it, under the
/// built-in defaults and under Knative's own default ConfigMaps (`tests/fixtures/knative/configmaps/`).
#[test]
fn every_clean_fixture_compares_equal_to_its_manifest() {
    // The one Service whose live object really drifted from what was applied, in both lists
    // that hold it: `kn` tagged two traffic targets after `kubectl apply` (see
    // traffic_tagged_by_hand_differs_from_the_applied_manifest).
    let drifted = [
        "redhat-developer-vscode-knative__test-servingTree-singleServiceServiceList.yaml",
        "redhat-developer-vscode-knative__test-servingTree-multipleServiceServicesList.yaml",
    ];
    let mut objects: Vec<(String, Value)> = Vec::new();
    for directory in [
        "serving",
        "eventing",
        "serving-internal",
        "derived",
        "configmaps",
    ] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(fixture_path(directory))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            for document in text.split("\n---") {
                let Ok(value) = serde_saphyr::from_str::<Value>(document) else {
                    continue;
                };
                let items = match value.get("items") {
                    Some(Value::Array(items)) => items.clone(),
                    _ => vec![value],
                };
                for item in items {
                    if item.get("kind").is_some() && item.pointer("/metadata/name").is_some() {
                        objects.push((name.clone(), item));
                    }
                }
            }
        }
    }
    let mut kinds = std::collections::BTreeSet::new();
    let knative_config_maps: Vec<Value> = [
        CONFIG_DEFAULTS,
        "configmaps/knative-serving__config-core-configmaps__config-features.yaml",
        "configmaps/knative-eventing__config-core-configmaps__config-br-defaults.yaml",
    ]
    .iter()
    .map(|relative| fixture_yaml(relative))
    .collect();
    let mut compared = 0;
    let mut applied_manifests = 0;
    for (file, live) in &objects {
        let reference = format!(
            "{}/{}",
            live["kind"].as_str().unwrap(),
            live["metadata"]["name"].as_str().unwrap()
        );
        let manifest = match live
            .pointer("/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration")
            .and_then(Value::as_str)
        {
            Some(applied) => {
                applied_manifests += 1;
                serde_json::from_str(applied).unwrap()
            }
            None => as_manifest(live),
        };
        let mut manifest = manifest;
        if manifest
            .pointer("/metadata/namespace")
            .is_none_or(Value::is_null)
        {
            // Applied with `-n`: the namespace is the live one.
            manifest["metadata"]["namespace"] = live["metadata"]["namespace"].clone();
        }
        kinds.insert(live["kind"].as_str().unwrap().to_string());
        for with_config_maps in [false, true] {
            let mut live_side = vec![live.clone()];
            let mut baseline = vec![manifest.clone()];
            if with_config_maps {
                for config in &knative_config_maps {
                    if config["metadata"]["name"] != live["metadata"]["name"] {
                        live_side.push(config.clone());
                        baseline.push(config.clone());
                    }
                }
            }
            let baseline_text: Vec<String> = baseline
                .iter()
                .map(|doc| serde_saphyr::to_string(doc).unwrap())
                .collect();
            let report = run(&baseline_text.join("---\n"), &live_side);
            let differences: Vec<String> = report
                .findings()
                .filter(|(_, finding)| {
                    matches!(finding.class.as_str(), "spec_drift" | "config_drift")
                })
                .map(|(object, finding)| {
                    format!(
                        "{} {}: {}",
                        object.reference(),
                        finding.class,
                        finding.message
                    )
                })
                .collect();
            let expected_drift = drifted.contains(&file.as_str()) && reference == "Service/example";
            if expected_drift {
                assert_eq!(differences.len(), 1, "{file} {reference}: {differences:?}");
                assert!(differences[0].contains("/spec/traffic"), "{differences:?}");
            } else {
                assert_eq!(
                    differences,
                    Vec::<String>::new(),
                    "{file} {reference} (Knative's ConfigMaps in the snapshot: {with_config_maps})"
                );
            }
            compared += 1;
        }
    }
    // Every kind of the fixtures was compared.
    for kind in [
        "Service",
        "Configuration",
        "Route",
        "Revision",
        "Broker",
        "Trigger",
        "Subscription",
        "PingSource",
        "ApiServerSource",
        "ContainerSource",
        "Channel",
        "DomainMapping",
        "KnativeServing",
        "KnativeEventing",
        "ConfigMap",
        "PodAutoscaler",
        "Ingress",
    ] {
        assert!(
            kinds.contains(kind),
            "no {kind} among the fixtures: {kinds:?}"
        );
    }
    assert!(compared >= 80, "{compared} comparisons");
    // Most of them against the manifest really applied, which leaves Knative's defaults out.
    assert!(
        applied_manifests >= 30,
        "{applied_manifests} applied manifests"
    );
}

#[test]
fn unknown_kinds_are_compared_as_any_object() {
    let manifest = "apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: bar\n  namespace: myapp\nspec:\n  size: 3\n---\napiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: gone\n  namespace: myapp\n";
    let live = vec![json!({"apiVersion": "example.com/v1", "kind": "Foo",
        "metadata": {"name": "bar", "namespace": "myapp", "uid": "foo", "resourceVersion": "6"},
        "spec": {"size": 5, "extra": true}})];
    let report = run(manifest, &live);
    expect(
        &report,
        &[
            "warning spec_drift Foo.example.com/myapp/bar",
            "warning missing Foo.example.com/myapp/gone",
        ],
    );
}

#[test]
fn secrets_are_compared_by_hash_and_their_values_never_printed() {
    let manifest = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: myapp\nstringData:\n  password: desired-s3cret\n  user: admin\n";
    // `admin` base64-encoded matches; the password differs.
    let live = vec![json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": "myapp", "uid": "s", "resourceVersion": "9"},
        "data": {"password": "bGl2ZS1zM2NyZXQ=", "user": "YWRtaW4="}})];
    let report = run(manifest, &live);
    expect(&report, &["warning spec_drift Secret/myapp/db"]);
    let drift = finding(&report, "spec_drift");
    assert_eq!(drift.diff.len(), 1);
    assert_eq!(drift.diff[0].path, "/data/password");
    for format in [Format::Text, Format::Markdown, Format::Json, Format::Junit] {
        let output = check::render(&report, format);
        for secret in [
            "desired-s3cret",
            "live-s3cret",
            "bGl2ZS1zM2NyZXQ=",
            "ZGVzaXJlZC1zM2NyZXQ=",
        ] {
            assert!(
                !output.contains(secret),
                "{format:?} leaks {secret}:\n{output}"
            );
        }
        assert!(output.contains("sha256:"), "{format:?}");
    }
}

// ---- config_drift -----------------------------------------------------------------------------

fn edited_autoscaler() -> Vec<Value> {
    let mut live = live_objects();
    let autoscaler = &mut live[4];
    autoscaler["data"]["enable-scale-to-zero"] = json!("false");
    autoscaler["data"]["_example"] = json!("edited documentation: Knative ignores it");
    live
}

#[test]
fn an_edited_config_map_is_config_drift_by_key_ignoring_example() {
    let report = run(&baseline_text(), &edited_autoscaler());
    expect(
        &report,
        &["warning config_drift ConfigMap/knative-serving/config-autoscaler"],
    );
    let drift = finding(&report, "config_drift");
    assert_eq!(drift.diff.len(), 1);
    assert_eq!(drift.diff[0].path, "/data/enable-scale-to-zero");
    assert_eq!(drift.diff[0].desired, None);
    assert!(drift.message.contains("enable-scale-to-zero added (false)"));
    assert!(drift
        .hint
        .as_deref()
        .unwrap()
        .contains("\"op\":\"remove\",\"path\":\"/data/enable-scale-to-zero\""));
    // A key removed from the live ConfigMap is drift too.
    let mut baseline = baseline_text();
    baseline.push_str("  stable-window: \"60s\"\n");
    let report = run(&baseline, &live_objects());
    assert!(finding(&report, "config_drift")
        .message
        .contains("stable-window removed"));
}

#[test]
fn config_drift_follows_its_class_settings() {
    let report = run_with(
        "classes:\n  config_drift:\n    severity: critical\n",
        &baseline_text(),
        &edited_autoscaler(),
        Severity::Warning,
    );
    expect(
        &report,
        &["critical config_drift ConfigMap/knative-serving/config-autoscaler"],
    );
    let report = run_with(
        "classes:\n  config_drift:\n    enabled: false\n",
        &baseline_text(),
        &edited_autoscaler(),
        Severity::Warning,
    );
    expect(&report, &[]);
}

// ---- The engine's state-based classes ---------------------------------------------------------

#[test]
fn the_failed_revision_is_not_ready() {
    let mut live = live_objects();
    live.extend(list_items(FAILED_REVISION_LIST));
    let report = run(&baseline_text(), &live);
    expect(
        &report,
        &["critical not_ready Revision.serving.knative.dev/a-serverless-example/example-2fvz4"],
    );
    let drift = finding(&report, "not_ready");
    assert!(
        drift
            .message
            .contains("ContainerHealthy=False (ContainerMissing)"),
        "{}",
        drift.message
    );
    assert_eq!(
        drift.hint.as_deref(),
        Some(
            "kubectl -n a-serverless-example describe revisions.serving.knative.dev example-2fvz4"
        )
    );
}

#[test]
fn control_characters_of_object_text_are_shown_not_emitted_in_text_and_markdown() {
    // A condition message is the object's (the API server's, a controller's) text: an ESC in
    // it must not rewrite the terminal or the CI log that prints the report.
    let mut live = live_objects();
    let mut failed = list_items(FAILED_REVISION_LIST);
    for condition in failed[0]["status"]["conditions"].as_array_mut().unwrap() {
        if condition["type"] == "ContainerHealthy" {
            condition["message"] = json!("evil\u{1b}]0;pwned\u{7}\u{1b}[2J\u{0}end");
        }
    }
    live.extend(failed);
    let report = run(&baseline_text(), &live);
    for (format, output) in [
        ("text", check::render_text(&report)),
        ("markdown", check::render(&report, check::Format::Markdown)),
    ] {
        assert!(
            !output
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{format}: {output:?}"
        );
        for shown in ["evil\\u001b", "pwned\\u0007\\u001b", "\\u0000end"] {
            assert!(output.contains(shown), "{format}: {shown}: {output}");
        }
    }
}

#[test]
fn the_failed_service_has_its_latest_revision_not_ready() {
    let live = list_items(FAILED_SERVICE_LIST);
    let manifest = serde_json::to_string(&last_applied(&live[0])).unwrap();
    let report = run(&manifest, &live);
    expect(
        &report,
        &[
            "critical not_ready Service.serving.knative.dev/a-serverless-example/example",
            "warning revision_not_ready Service.serving.knative.dev/a-serverless-example/example",
        ],
    );
    let drift = finding(&report, "revision_not_ready");
    assert!(drift
        .message
        .contains("latest created Revision example-75w7v is not ready; latest ready is none"));
}

#[test]
fn served_traffic_other_than_spec_is_traffic_drift() {
    let mut live = live_objects();
    live[0]["status"]["traffic"] = json!([
        {"percent": 50, "revisionName": "knative-webapp-00001"},
        {"percent": 50, "revisionName": "knative-webapp-00000"}
    ]);
    let report = run(&baseline_text(), &live);
    expect(&report, &[&format!("critical traffic_drift {KSVC}")]);
    assert!(finding(&report, "traffic_drift")
        .message
        .contains("knative-webapp-00001: spec 100% vs served 50%"));
}

#[test]
fn a_route_edited_away_from_its_service_is_traffic_drift() {
    let mut live = live_objects();
    live[2]["spec"]["traffic"] = json!([{"revisionName": "knative-webapp-00001", "percent": 100}]);
    let report = run(&baseline_text(), &live);
    expect(
        &report,
        &["critical traffic_drift Route.serving.knative.dev/myapp/knative-webapp"],
    );
    let drift = finding(&report, "traffic_drift");
    assert_eq!(drift.diff[0].path, "/spec/traffic");
}

#[test]
fn an_unreconciled_generation_is_generation_lag() {
    let mut live = live_objects();
    live[0]["metadata"]["generation"] = json!(2);
    let report = run(&baseline_text(), &live);
    expect(&report, &[&format!("warning generation_lag {KSVC}")]);
}

fn piled_up() -> Vec<Value> {
    let mut live = live_objects();
    for number in 2..=6 {
        let mut old = revision();
        old["metadata"]["name"] = json!(format!("knative-webapp-{number:05}"));
        old["metadata"]["uid"] = json!(format!("reserve-{number}"));
        old["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve");
        live.push(old);
    }
    live
}

#[test]
fn reserve_revisions_over_the_threshold_are_revision_pileup() {
    let report = run_with(
        "classes:\n  revision_pileup:\n    threshold: 3\n",
        &baseline_text(),
        &piled_up(),
        Severity::Warning,
    );
    expect(
        &report,
        &["warning revision_pileup Configuration.serving.knative.dev/myapp/knative-webapp"],
    );
    assert!(finding(&report, "revision_pileup")
        .message
        .contains("5 non-active Revisions (threshold 3)"));
    // The default threshold (50) is not reached.
    expect(&run(&baseline_text(), &piled_up()), &[]);
}

#[test]
fn disabled_classes_do_not_report() {
    let mut live = live_objects();
    live.extend(list_items(FAILED_REVISION_LIST));
    let report = run_with(
        "classes:\n  not_ready:\n    enabled: false\n",
        &baseline_text(),
        &live,
        Severity::Warning,
    );
    expect(&report, &[]);
}

// ---- Formats ----------------------------------------------------------------------------------

/// A report with findings of every severity and text that needs escaping in every format.
fn mixed_report(fail_on: Severity) -> Report {
    let mut live = edited_autoscaler();
    live[4]["data"]["enable-scale-to-zero"] = json!("<false> & \"true\" | 'x'");
    live.extend(list_items(FAILED_REVISION_LIST));
    let mut gc = fixture_yaml(GC);
    gc["metadata"]["uid"] = json!("gc-uid");
    gc["metadata"]["resourceVersion"] = json!("1001");
    live.push(gc);
    run_with("{}", &baseline_text(), &live, fail_on)
}

#[test]
fn json_has_the_documented_structure() {
    let report = mixed_report(Severity::Warning);
    let text = check::render(&report, Format::Json);
    let json: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(json["schemaVersion"], 1);
    assert_eq!(
        json["summary"],
        json!({"objects": 7, "findings": 3,
               "bySeverity": {"critical": 1, "warning": 1, "info": 1},
               "failOn": "warning", "failing": 2, "result": "fail"})
    );
    let findings = json["findings"].as_array().unwrap();
    let config = findings
        .iter()
        .find(|finding| finding["class"] == "config_drift")
        .unwrap();
    assert_eq!(
        config["object"],
        "ConfigMap/knative-serving/config-autoscaler"
    );
    assert_eq!(config["kind"], "ConfigMap");
    assert_eq!(config["namespace"], "knative-serving");
    assert_eq!(config["name"], "config-autoscaler");
    assert_eq!(config["severity"], "warning");
    assert_eq!(config["failing"], true);
    assert_eq!(
        config["diff"],
        json!([{"path": "/data/enable-scale-to-zero", "desired": null, "desiredFrom": null,
                "live": "<false> & \"true\" | 'x'"}])
    );
    assert!(config["hint"]
        .as_str()
        .unwrap()
        .starts_with("kubectl -n knative-serving patch configmaps"));
    // The snapshot has no Knative defaults ConfigMaps: the built-in defaults stand in.
    assert_eq!(
        json["defaults"],
        json!([
            {"configMap": "knative-serving/config-defaults", "found": false, "notes": []},
            {"configMap": "knative-serving/config-features", "found": false, "notes": []},
            {"configMap": "knative-eventing/config-br-defaults", "found": false, "notes": []},
        ])
    );
    let info = findings.iter().find(|f| f["severity"] == "info").unwrap();
    assert_eq!(info["class"], "extra");
    assert_eq!(info["failing"], false);
    assert!(info["hint"].as_str().is_some());
    // Deterministic.
    assert_eq!(
        text,
        check::render(&mixed_report(Severity::Warning), Format::Json)
    );
}

/// A small well-formedness check: balanced tags, quoted attributes, only the five predefined
/// entities and numeric references; returns the element names in document order.
fn xml_elements(xml: &str) -> Vec<String> {
    let body = xml
        .strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
        .expect("XML declaration");
    let check_text = |text: &str| {
        let mut rest = text;
        while let Some(position) = rest.find('&') {
            let after = &rest[position + 1..];
            let end = after.find(';').expect("terminated entity");
            let name = &after[..end];
            assert!(
                ["amp", "lt", "gt", "quot", "apos"].contains(&name) || name.starts_with('#'),
                "unknown entity &{name};"
            );
            rest = &after[end + 1..];
        }
        assert!(!text.contains('>'), "raw > in text: {text}");
    };
    let mut stack: Vec<String> = Vec::new();
    let mut elements = Vec::new();
    let mut rest = body;
    while let Some(start) = rest.find('<') {
        check_text(&rest[..start]);
        let tail = &rest[start + 1..];
        // A tag ends at the first `>` outside a quoted attribute value.
        let mut in_quote = false;
        let mut end = None;
        for (index, c) in tail.char_indices() {
            match c {
                '"' => in_quote = !in_quote,
                '<' if !in_quote => panic!("raw < inside a tag: {tail}"),
                '>' if !in_quote => {
                    end = Some(index);
                    break;
                }
                _ => {}
            }
        }
        let end = end.expect("closed tag");
        let tag = &tail[..end];
        rest = &tail[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let name = tag
            .split_whitespace()
            .next()
            .expect("element name")
            .to_string();
        let attributes = &tag[name.len()..];
        assert_eq!(
            attributes.matches('"').count() % 2,
            0,
            "unbalanced quotes in <{tag}>"
        );
        for value in attributes.split('"').skip(1).step_by(2) {
            check_text(value);
            assert!(!value.contains('<'), "raw < in attribute: {value}");
        }
        elements.push(name.clone());
        if !self_closing {
            stack.push(name);
        }
    }
    check_text(rest);
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
    elements
}

#[test]
fn junit_has_a_test_case_per_object_and_a_failure_per_finding_at_or_above_fail_on() {
    let report = mixed_report(Severity::Warning);
    let xml = check::render(&report, Format::Junit);
    let elements = xml_elements(&xml);
    let count = |name: &str| elements.iter().filter(|element| *element == name).count();
    assert_eq!(count("testsuites"), 1);
    assert_eq!(count("testsuite"), 1);
    assert_eq!(count("testcase"), report.objects.len());
    assert_eq!(count("testcase"), 7);
    assert_eq!(count("failure"), 2);
    assert_eq!(
        count("system-out"),
        1,
        "the info finding is reported, not failed"
    );
    assert!(xml.contains("<testsuite name=\"drift-sentinel check\" tests=\"7\" failures=\"2\""));
    assert!(xml.contains(
        "<testcase classname=\"Revision.serving.knative.dev\" name=\"a-serverless-example/example-2fvz4\""
    ));
    // The edited value, escaped in the message attribute and in the body.
    assert!(
        xml.contains("&lt;false&gt; &amp; &quot;true&quot; | &apos;x&apos;"),
        "{xml}"
    );
    assert!(!xml.contains("<false>"));
    // With --fail-on critical only the not_ready finding fails.
    let xml = check::render(&mixed_report(Severity::Critical), Format::Junit);
    let elements = xml_elements(&xml);
    assert_eq!(elements.iter().filter(|e| *e == "failure").count(), 1);
    assert!(xml.contains("<failure type=\"not_ready\" message=\"critical not_ready: "));
}

#[test]
fn the_xml_checker_rejects_broken_xml() {
    for broken in [
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a><b></a>",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a x=\"1 < 2\"/>",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a>&nbsp;</a>",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a>",
    ] {
        let result = std::panic::catch_unwind(|| xml_elements(broken));
        assert!(result.is_err(), "accepted {broken}");
    }
}

#[test]
fn markdown_is_a_table_for_a_pull_request_comment() {
    let report = mixed_report(Severity::Warning);
    let markdown = check::render(&report, Format::Markdown);
    let lines: Vec<&str> = markdown.lines().collect();
    assert_eq!(lines[0], "### drift-sentinel check failed");
    let header = lines
        .iter()
        .position(|line| *line == "| Severity | Object | Class | Finding | Fix |")
        .expect("table header");
    assert_eq!(lines[header + 1], "|---|---|---|---|---|");
    let rows: Vec<&str> = lines[header + 2..]
        .iter()
        .take_while(|line| line.starts_with('|'))
        .copied()
        .collect();
    assert_eq!(rows.len(), 3);
    for row in &rows {
        // Five cells: six unescaped pipes.
        let unescaped = row.replace("\\|", "");
        assert_eq!(unescaped.matches('|').count(), 6, "{row}");
    }
    assert!(rows[0].starts_with("| **critical** | `Revision.serving.knative.dev/a-serverless-example/example-2fvz4` | `not_ready` |"));
    assert!(rows
        .iter()
        .any(|row| row.starts_with("| info | `ConfigMap/knative-serving/config-gc` | `extra` |")));
    // Outside code spans, text that looks like HTML is escaped.
    let outside_code: String = markdown.split('`').step_by(2).collect();
    assert!(!outside_code.contains("<false>"), "raw HTML in markdown");
    assert!(outside_code.contains("&lt;false&gt;"));
    // A clean run says so, without a table.
    let clean = check::render(&run(&baseline_text(), &live_objects()), Format::Markdown);
    assert_eq!(
        clean,
        "### drift-sentinel check passed\n\nPASS: no findings in 5 objects (fail-on warning)\n"
    );
}

#[test]
fn text_is_one_line_per_finding_and_a_summary() {
    let report = mixed_report(Severity::Warning);
    let text = check::render(&report, Format::Text);
    let headlines: Vec<&str> = text.lines().filter(|line| !line.starts_with(' ')).collect();
    assert_eq!(headlines.len(), 4, "{text}");
    assert!(headlines[0].starts_with("CRITICAL  not_ready          Revision.serving.knative.dev/a-serverless-example/example-2fvz4: "));
    assert_eq!(
        headlines[3],
        "FAIL: 2 of 3 findings at or above warning in 7 objects (1 critical, 1 warning, 1 info)"
    );
    assert!(text.contains("          /data/enable-scale-to-zero: desired (absent), live \"<false> & \\\"true\\\" | 'x'\"\n"));
}

// ---- The binary: exit codes ---------------------------------------------------------------------

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// The clean pair, as a team has it: a Git directory (the app in one file, Knative config
    /// in another) and a `kubectl get` dump.
    fn clean(live: &[Value]) -> Files {
        let files = Files::new();
        files.write("git/apps/webapp.yaml", WEBAPP_MANIFEST);
        files.write(
            "git/knative/config-autoscaler.yaml",
            &fixture_text(AUTOSCALER),
        );
        files.write("git/README.md", "not a manifest");
        files.write("live.yaml", &kubectl_list(live));
        files
    }
}

fn binary(args: &[&str], config: Option<&Path>) -> Outcome {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    run_binary(&all, config)
}

fn check_files(files: &Files, extra: &[&str], config: Option<&Path>) -> Outcome {
    let baseline = files.path("git");
    let live = files.path("live.yaml");
    let mut args = vec![
        "--baseline",
        baseline.to_str().unwrap(),
        "--live",
        live.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    binary(&args, config)
}

#[test]
fn binary_exits_0_on_the_clean_pair_and_1_on_drift() {
    let files = Files::clean(&live_objects());
    let outcome = check_files(&files, &[], None);
    assert_eq!(outcome.code, 0, "{}{}", outcome.stdout, outcome.stderr);
    assert_eq!(
        outcome.stdout,
        "PASS: no findings in 5 objects (fail-on warning)\n"
    );
    assert_eq!(outcome.stderr, "");

    let mut live = live_objects();
    live[0]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other:v2");
    let files = Files::clean(&live);
    let outcome = check_files(&files, &["--format", "json"], None);
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    let json: Value = serde_json::from_str(&outcome.stdout).expect("JSON on stdout");
    assert_eq!(json["findings"][0]["class"], "spec_drift");
    assert_eq!(json["summary"]["result"], "fail");
}

#[test]
fn binary_reads_a_live_directory_and_each_format() {
    let files = Files::clean(&[]);
    let objects = live_objects();
    files.write("live-dir/ksvc.yaml", &kubectl_list(&objects[..1]));
    files.write("live-dir/serving.yaml", &kubectl_list(&objects[1..4]));
    files.write(
        "live-dir/configmaps.json",
        &serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": [objects[4]]}))
            .unwrap(),
    );
    files.write("live-dir/..data/ignored.yaml", "not: [valid");
    let baseline = files.path("git");
    let live = files.path("live-dir");
    for (format, start) in [
        ("text", "PASS"),
        ("markdown", "### drift-sentinel check passed"),
        ("json", "{"),
        ("junit", "<?xml"),
    ] {
        let outcome = binary(
            &[
                "--baseline",
                baseline.to_str().unwrap(),
                "--live",
                live.to_str().unwrap(),
                "--format",
                format,
            ],
            None,
        );
        assert_eq!(
            outcome.code, 0,
            "{format}: {}{}",
            outcome.stdout, outcome.stderr
        );
        assert!(
            outcome.stdout.starts_with(start),
            "{format}: {}",
            outcome.stdout
        );
    }
}

#[test]
fn fail_on_sets_the_threshold() {
    // Only an info finding: a watched ConfigMap that Git does not hold.
    let mut live = live_objects();
    let mut gc = fixture_yaml(GC);
    gc["metadata"]["uid"] = json!("gc-uid");
    gc["metadata"]["resourceVersion"] = json!("1001");
    live.push(gc);
    let files = Files::clean(&live);
    assert_eq!(check_files(&files, &[], None).code, 0);
    assert_eq!(check_files(&files, &["--fail-on", "info"], None).code, 1);
    assert_eq!(check_files(&files, &["--fail-on", "warning"], None).code, 0);

    // A warning (generation_lag) fails the default, not --fail-on critical.
    let mut live = live_objects();
    live[0]["metadata"]["generation"] = json!(2);
    let files = Files::clean(&live);
    assert_eq!(check_files(&files, &[], None).code, 1);
    assert_eq!(
        check_files(&files, &["--fail-on", "critical"], None).code,
        0
    );

    // A critical (not_ready) fails at every threshold.
    let mut live = live_objects();
    live.extend(list_items(FAILED_REVISION_LIST));
    let files = Files::clean(&live);
    for threshold in ["info", "warning", "critical"] {
        assert_eq!(check_files(&files, &["--fail-on", threshold], None).code, 1);
    }
    let junit = check_files(
        &files,
        &["--fail-on", "critical", "--format", "junit"],
        None,
    );
    assert_eq!(junit.code, 1);
    assert_eq!(junit.stdout.matches("<failure ").count(), 1);
}

#[test]
fn binary_takes_rules_from_the_config_file() {
    let files = Files::clean(&piled_up());
    assert_eq!(check_files(&files, &[], None).code, 0);
    let config = files.write(
        "drift-sentinel.yaml",
        "rules:\n  classes:\n    revision_pileup:\n      threshold: 3\n",
    );
    let outcome = check_files(&files, &["--format", "json"], Some(&config));
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    let json: Value = serde_json::from_str(&outcome.stdout).unwrap();
    assert_eq!(json["findings"][0]["class"], "revision_pileup");
    assert_eq!(
        json["findings"][0]["object"],
        "Configuration.serving.knative.dev/myapp/knative-webapp"
    );
    // A bad config is bad input.
    let broken = files.write("broken.yaml", "rules:\n  classes:\n    no_such_class: {}\n");
    let outcome = check_files(&files, &[], Some(&broken));
    assert_eq!(outcome.code, 2, "{}", outcome.stderr);
    assert!(outcome.stderr.contains("broken.yaml"), "{}", outcome.stderr);
}

// ---- The binary: bad input ----------------------------------------------------------------------

#[track_caller]
fn bad_input(files: &Files, baseline: &str, live: &str, expected: &[&str]) {
    let baseline = files.path(baseline);
    let live = files.path(live);
    let outcome = binary(
        &[
            "--baseline",
            baseline.to_str().unwrap(),
            "--live",
            live.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(outcome.code, 2, "{}{}", outcome.stdout, outcome.stderr);
    assert_eq!(outcome.stdout, "");
    assert!(
        outcome.stderr.starts_with("drift-sentinel check: "),
        "{}",
        outcome.stderr
    );
    for part in expected {
        assert!(
            outcome.stderr.contains(part),
            "{part:?} not in {}",
            outcome.stderr
        );
    }
    assert!(!outcome.stderr.contains("panicked"), "{}", outcome.stderr);
}

#[test]
fn bad_yaml_names_the_file_and_document() {
    let files = Files::clean(&live_objects());
    files.write(
        "git/apps/broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: b}\n---\n# second\nspec: [1, 2\n",
    );
    bad_input(
        &files,
        "git",
        "live.yaml",
        &[
            "git/apps/broken.yaml document 2: not valid YAML: ",
            "line 6",
        ],
    );
}

#[test]
fn a_document_that_is_not_an_object_names_the_file_and_document() {
    let files = Files::clean(&live_objects());
    files.write(
        "git/apps/webapp.yaml",
        &format!("{WEBAPP_MANIFEST}---\nkind: Service\nmetadata:\n  name: x\n"),
    );
    bad_input(
        &files,
        "git",
        "live.yaml",
        &["git/apps/webapp.yaml document 2 (line 18): not a Kubernetes object: missing apiVersion"],
    );
    // In a live List, the item is named.
    let files = Files::clean(&[]);
    files.write(
        "live.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: ok, namespace: ns}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {namespace: ns}\n",
    );
    bad_input(
        &files,
        "git",
        "live.yaml",
        &["live.yaml document 1 (line 1) items[1]: not a Kubernetes object: missing metadata.name"],
    );
}

#[test]
fn a_live_object_the_decoder_rejects_names_the_file_and_item() {
    let mut broken = service();
    broken["metadata"]["generation"] = json!("two");
    let files = Files::clean(&[revision(), broken]);
    bad_input(
        &files,
        "git",
        "live.yaml",
        &["live.yaml document 1 (line 1) items[1]: metadata.generation: expected an integer, got a string"],
    );
}

#[test]
fn unreadable_missing_and_empty_paths_are_bad_input() {
    let files = Files::clean(&live_objects());
    bad_input(
        &files,
        "git",
        "no-such-file.yaml",
        &["cannot read ", "no-such-file.yaml"],
    );
    std::fs::create_dir_all(files.path("empty")).unwrap();
    bad_input(
        &files,
        "empty",
        "live.yaml",
        &["empty: no .yaml, .yml or .json files"],
    );
    std::fs::write(files.path("binary.yaml"), [0xff, 0xfe, 0x00, 0x41]).unwrap();
    bad_input(&files, "git", "binary.yaml", &["binary.yaml", "not UTF-8"]);
}

#[test]
fn a_huge_file_is_refused_before_it_is_read() {
    let files = Files::clean(&live_objects());
    let huge = std::fs::File::create(files.path("huge.yaml")).unwrap();
    huge.set_len(drift_core::manifest::MAX_FILE_BYTES + 1)
        .unwrap();
    bad_input(
        &files,
        "git",
        "huge.yaml",
        &["huge.yaml: the file is over the limit of 67108864 bytes"],
    );
}

#[test]
fn the_sinks_baseline_dir_has_the_same_limits() {
    // `rules.baselineDir` is read by the same bounded loader as `check`: a huge file (or a
    // directory loop) is refused before it is read, and the rules in force are kept.
    let files = Files::clean(&live_objects());
    let huge = std::fs::File::create(files.path("git/huge.yaml")).unwrap();
    huge.set_len(drift_core::manifest::MAX_FILE_BYTES + 1)
        .unwrap();
    let mut config = drift_core::config::load_str("", &|_| None).unwrap();
    config.rules.baseline_dir = Some(files.path("git"));
    let error = drift_sentinel::reload::load_rules(&config).unwrap_err();
    assert_eq!(error.kind(), "too_large");
    assert!(
        error
            .to_string()
            .ends_with("huge.yaml: the file is over the limit of 67108864 bytes"),
        "{error}"
    );
}

#[test]
fn an_object_defined_twice_in_the_baseline_is_bad_input() {
    let files = Files::clean(&live_objects());
    files.write("git/apps/copy.yaml", WEBAPP_MANIFEST);
    bad_input(
        &files,
        "git",
        "live.yaml",
        &[
            "git/apps/webapp.yaml document 1 (line 2): Service.serving.knative.dev/myapp/knative-webapp is already defined at ",
            "git/apps/copy.yaml document 1 (line 2)",
        ],
    );
}

#[test]
fn a_large_cluster_dump_fits() {
    // 2,000 Revisions: far more YAML nodes than a config-file parser budget allows.
    let mut live = live_objects();
    for number in 2..2002 {
        let mut old = revision();
        old["metadata"]["name"] = json!(format!("knative-webapp-{number:05}"));
        old["metadata"]["uid"] = json!(format!("old-{number}"));
        live.push(old);
    }
    let files = Files::clean(&live);
    // The parser budget meant for config files (250,000 nodes) refuses this dump.
    let dump = std::fs::read_to_string(files.path("live.yaml")).unwrap();
    let error = drift_core::config::load_str(&dump, &|_| None).unwrap_err();
    assert!(error.to_string().contains("budget"), "{error}");
    let outcome = check_files(&files, &["--format", "json"], None);
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    let json: Value = serde_json::from_str(&outcome.stdout).unwrap();
    assert_eq!(json["summary"]["objects"], 2005);
}

#[test]
fn live_can_come_from_standard_input() {
    use std::io::Write;
    let files = Files::clean(&[]);
    let baseline = files.path("git");
    let mut child = Command::new(env!("CARGO_BIN_EXE_drift-sentinel"))
        .args([
            "check",
            "--baseline",
            baseline.to_str().unwrap(),
            "--live",
            "-",
        ])
        .env_remove("DRIFT_SENTINEL_CONFIG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut live = live_objects();
    live[0]["metadata"]["generation"] = json!(2);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(kubectl_list(&live).as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with(&format!("WARNING   generation_lag     {KSVC}: ")),
        "{stdout}"
    );
}

// ---- Eventing ----------------------------------------------------------------------------------

fn eventing_item(file: &str, name: &str) -> Value {
    let text = fixture_text(file);
    let list: Value = if file.ends_with(".json") {
        serde_json::from_str(&text).unwrap()
    } else {
        serde_saphyr::from_str(&text).unwrap()
    };
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["metadata"]["name"] == name)
        .cloned()
        .expect("fixture item")
}

const TRIGGERS: &str = "eventing/redhat-developer-vscode-knative__test-eventingTree-trigger.json";
const BROKERS: &str =
    "eventing/redhat-developer-vscode-knative__test-eventingTree-broker__BrokerList.json";
const SUBSCRIPTIONS: &str =
    "eventing/redhat-developer-vscode-knative__test-eventingTree-subscription__SubscriptionList.yaml";

/// The desired manifest of a live object: its apiVersion, kind, name, namespace and spec.
fn manifest_of(object: &Value) -> String {
    serde_saphyr::to_string(&json!({
        "apiVersion": object["apiVersion"],
        "kind": object["kind"],
        "metadata": {"name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"]},
        "spec": object["spec"],
    }))
    .unwrap()
}

#[test]
fn eventing_manifests_are_checked_desired_against_live_with_the_condition_classes() {
    let broker = eventing_item(BROKERS, "example-broker0");
    let mut trigger = eventing_item(TRIGGERS, "example-trigger0");
    let baseline = format!("{}---\n{}", manifest_of(&broker), manifest_of(&trigger));
    // Live: the Trigger's subscriber is gone, and its filter was changed by hand.
    let message = r#"failed to get object josh/aaa: services.serving.knative.dev "aaa" not found"#;
    for condition in trigger["status"]["conditions"].as_array_mut().unwrap() {
        if condition["type"] == "SubscriberResolved" || condition["type"] == "Ready" {
            condition["status"] = json!("False");
            condition["reason"] = json!("Unable to get the Subscriber's URI");
            condition["message"] = json!(message);
        }
    }
    trigger["spec"]["filter"]["attributes"]["type"] = json!("dev.knative.other");
    // The Subscription Knative made for another Trigger (owned by it): not an extra; a Trigger
    // that is not in Git is.
    let plumbing = eventing_item(
        SUBSCRIPTIONS,
        "example-broker0-example-trigger57933d7738bc8bbf15a14f392c0e56aa",
    );
    let stray = eventing_item(TRIGGERS, "example-trigger1");
    let report = run(&baseline, &[broker, trigger, plumbing, stray]);
    expect(
        &report,
        &[
            "warning spec_drift Trigger.eventing.knative.dev/josh/example-trigger0",
            "critical event_delivery_broken Trigger.eventing.knative.dev/josh/example-trigger0",
            "warning extra Trigger.eventing.knative.dev/josh/example-trigger1",
        ],
    );
    assert!(finding(&report, "event_delivery_broken")
        .message
        .ends_with("; subscriber Service josh/aaa"));
}

#[test]
fn a_snapshot_reports_a_broken_broker_once_not_on_its_triggers() {
    let mut broker = eventing_item(BROKERS, "example-broker0");
    let mut trigger = eventing_item(TRIGGERS, "example-trigger0");
    let message = "channel \"example-broker0-kne-trigger\" not ready";
    for (object, failing) in [
        (&mut broker, "TriggerChannelReady"),
        (&mut trigger, "BrokerReady"),
    ] {
        for condition in object["status"]["conditions"].as_array_mut().unwrap() {
            if condition["type"] == failing || condition["type"] == "Ready" {
                condition["status"] = json!("False");
                condition["reason"] = json!("ChannelNotReady");
                condition["message"] = json!(message);
            }
        }
    }
    let baseline = format!("{}---\n{}", manifest_of(&broker), manifest_of(&trigger));
    let report = run(&baseline, &[trigger, broker]);
    expect(
        &report,
        &["critical not_ready Broker.eventing.knative.dev/josh/example-broker0"],
    );
}

#[test]
fn the_documented_example_finds_what_the_docs_show() {
    // examples/check/ (README, docs/check.md): a hand-changed traffic split and a Trigger whose
    // subscriber is gone.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/check");
    let read = |path: &std::path::Path| std::fs::read_to_string(path).unwrap();
    let baseline = snapshot(&[(
        "examples/check/baseline/example.yaml",
        &read(&root.join("baseline/example.yaml")),
    )]);
    let live = snapshot(&[("examples/check/live.yaml", &read(&root.join("live.yaml")))]);
    let report = check::check(Some(&baseline), &live, rules("{}"), Severity::Warning).unwrap();
    expect(
        &report,
        &[
            "warning spec_drift Service.serving.knative.dev/a-serverless-example/example",
            "critical event_delivery_broken Trigger.eventing.knative.dev/josh/example-trigger0",
        ],
    );
}

// ---- Team invariants ----------------------------------------------------------------------------

const INVARIANTS: &str = r#"
invariants:
  - name: no-latest
    match: {kind: Service, apiVersion: "serving.knative.dev/*"}
    expression: "object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))"
    message: a container runs a :latest image
    severity: critical
  - name: keep-warm
    match: {kind: Service}
    expression: "'autoscaling.knative.dev/min-scale' in object.spec.template.metadata.annotations"
    message: the Service may scale to zero
    severity: info
  - name: autoscaler-keeps-scale-to-zero
    match: {kind: ConfigMap, namespaces: [knative-serving]}
    expression: "object.metadata.name != 'config-autoscaler' || !('enable-scale-to-zero' in object.data) || object.data['enable-scale-to-zero'] != 'false'"
    message: scale to zero was turned off
"#;

#[test]
fn invariants_are_checked_on_the_snapshot_next_to_the_baseline() {
    let mut live = live_objects();
    live[0]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:latest");
    let report = run_with(INVARIANTS, &baseline_text(), &live, Severity::Warning);
    expect(
        &report,
        &[
            "warning spec_drift Service.serving.knative.dev/myapp/knative-webapp",
            "info invariant Service.serving.knative.dev/myapp/knative-webapp",
            "critical invariant Service.serving.knative.dev/myapp/knative-webapp",
        ],
    );
    let rules: Vec<(&str, usize, usize)> = report
        .rules
        .iter()
        .map(|rule| (rule.name.as_str(), rule.selected, rule.broken))
        .collect();
    assert_eq!(
        rules,
        [
            ("no-latest", 1, 1),
            ("keep-warm", 1, 1),
            ("autoscaler-keeps-scale-to-zero", 1, 0)
        ]
    );
    let text = check::render_text(&report);
    assert!(
        text.contains("no-latest: a container runs a :latest image"),
        "{text}"
    );
    assert!(
        text.contains("RULE      no-latest          broken on 1 of 1 objects (critical)"),
        "{text}"
    );
    assert!(
        text.contains("RULE      autoscaler-keeps-scale-to-zero held on all 1 object it selects"),
        "{text}"
    );
}

#[test]
fn binary_check_takes_invariants_from_a_file_and_junit_has_a_case_per_rule() {
    let mut live = live_objects();
    live[4]["data"]["enable-scale-to-zero"] = json!("false");
    let files = Files::clean(&live);
    let rules = files.write("policy/invariants.yaml", INVARIANTS);
    let rules = rules.to_str().unwrap();
    // The baseline also says "false"?  No: the baseline holds Knative's shipped ConfigMap, so the
    // edit is config_drift too; the invariant is what fails at critical only when it is critical.
    let outcome = check_files(
        &files,
        &[
            "--invariants",
            rules,
            "--fail-on",
            "critical",
            "--format",
            "junit",
        ],
        None,
    );
    assert_eq!(outcome.code, 0, "{}{}", outcome.stdout, outcome.stderr);
    assert_eq!(
        outcome
            .stdout
            .matches("<testcase classname=\"invariant\"")
            .count(),
        3,
        "{}",
        outcome.stdout
    );
    assert!(outcome
        .stdout
        .contains("<testsuite name=\"drift-sentinel invariants\" tests=\"3\" failures=\"0\""));
    // At the default threshold the warning invariant fails the gate, with its own failure.
    let outcome = check_files(&files, &["--invariants", rules, "--format", "junit"], None);
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    assert!(
        outcome.stdout.contains(
            "<testcase classname=\"invariant\" name=\"autoscaler-keeps-scale-to-zero\" time=\"0\">\n      <failure type=\"invariant\""
        ),
        "{}",
        outcome.stdout
    );
    let json = check_files(&files, &["--invariants", rules, "--format", "json"], None);
    let json: Value = serde_json::from_str(&json.stdout).unwrap();
    let invariant = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["class"] == "invariant")
        .unwrap();
    assert_eq!(invariant["rule"], "autoscaler-keeps-scale-to-zero");
    assert_eq!(json["rules"][2]["broken"], 1);

    // A broken rules file is bad input, with its key path and position.
    let bad = files.write(
        "policy/bad.yaml",
        "- name: x\n  expression: \"object.spec.a ==\"\n",
    );
    let outcome = check_files(&files, &["--invariants", bad.to_str().unwrap()], None);
    assert_eq!(outcome.code, 2);
    assert!(
        outcome
            .stderr
            .contains("bad.yaml: invariants[0].expression: line 1, column"),
        "{}",
        outcome.stderr
    );
    // A name defined twice is refused, naming both places.
    let config = files.write(
        "config.yaml",
        &format!("rules:\n{}", INVARIANTS.replace('\n', "\n  ")),
    );
    let outcome = check_files(&files, &["--invariants", rules], Some(&config));
    assert_eq!(outcome.code, 2);
    assert!(
        outcome
            .stderr
            .contains("is already defined in the config's rules.invariants"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn invariants_alone_gate_a_snapshot_without_a_baseline() {
    // A team that keeps only invariants in Git: no --baseline. The live Service is not `extra`
    // (nothing says what should exist), its hand edit is not a `spec_drift`; the invariants and
    // the state-based classes are judged.
    let mut live = live_objects();
    live[0]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:latest");
    let files = Files::clean(&live);
    let rules = files.write("policy/invariants.yaml", INVARIANTS);
    let live_path = files.path("live.yaml");
    let args = [
        "--live",
        live_path.to_str().unwrap(),
        "--invariants",
        rules.to_str().unwrap(),
        "--format",
        "json",
    ];
    let outcome = binary(&args, None);
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    let json: Value = serde_json::from_str(&outcome.stdout).expect("JSON on stdout");
    let classes: Vec<(&str, &str)> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| {
            (
                finding["class"].as_str().unwrap(),
                finding["rule"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        classes,
        [("invariant", "keep-warm"), ("invariant", "no-latest")],
        "{}",
        outcome.stdout
    );
    // Invariants in the config's rules.invariants count the same.
    let config = files.write(
        "config.yaml",
        &format!("rules:\n{}", INVARIANTS.replace('\n', "\n  ")),
    );
    let outcome = binary(&args[..2], Some(&config));
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    assert!(outcome.stdout.contains("no-latest"), "{}", outcome.stdout);
    // With neither a baseline nor invariants there is nothing to judge against: bad input, not
    // a pass.
    let outcome = binary(&args[..2], None);
    assert_eq!(outcome.code, 2, "{}{}", outcome.stdout, outcome.stderr);
    assert!(
        outcome
            .stderr
            .contains("nothing to check against: give --baseline, or invariants"),
        "{}",
        outcome.stderr
    );
}

fn invariants_test(args: &[&str]) -> Outcome {
    let mut all = vec!["invariants", "test"];
    all.extend_from_slice(args);
    run_binary(&all, None)
}

#[test]
fn invariants_test_prints_held_broken_and_error_per_rule_and_object() {
    let files = Files::new();
    let rules = files.write("invariants.yaml", INVARIANTS);
    let mut pinned = service();
    pinned["metadata"]["name"] = json!("pinned");
    let mut latest = service();
    latest["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:latest");
    files.write(
        "objects/services.yaml",
        &kubectl_list(&[pinned.clone(), latest.clone()]),
    );
    files.write("objects/autoscaler.yaml", &fixture_text(AUTOSCALER));
    let against = files.path("objects");
    let args = [
        rules.to_str().unwrap(),
        "--against",
        against.to_str().unwrap(),
    ];
    let outcome = invariants_test(&args);
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    assert_eq!(
        outcome.stdout,
        "held    autoscaler-keeps-scale-to-zero   ConfigMap/knative-serving/config-autoscaler\n\
         broken  keep-warm                        Service.serving.knative.dev/myapp/knative-webapp: the Service may scale to zero\n\
         broken  keep-warm                        Service.serving.knative.dev/myapp/pinned: the Service may scale to zero\n\
         broken  no-latest                        Service.serving.knative.dev/myapp/knative-webapp: a container runs a :latest image\n\
         held    no-latest                        Service.serving.knative.dev/myapp/pinned\n\
         FAIL: 3 rules, 2 held, 3 broken, 0 errors\n"
    );

    // Expectations in the objects: met, then not met.
    let expect = |object: &mut Value, text: &str| {
        object["metadata"]["annotations"]["invariants.drift-sentinel.dev/expect"] = json!(text);
    };
    expect(&mut pinned, "no-latest=held, keep-warm=broken");
    expect(&mut latest, "no-latest=broken");
    files.write(
        "objects/services.yaml",
        &kubectl_list(&[pinned.clone(), latest.clone()]),
    );
    let outcome = invariants_test(&args);
    assert_eq!(outcome.code, 0, "{}{}", outcome.stdout, outcome.stderr);
    assert!(
        outcome
            .stdout
            .ends_with("PASS: 3 rules, 2 held, 3 broken, 0 errors, 0 expectations not met\n"),
        "{}",
        outcome.stdout
    );
    expect(&mut latest, "no-latest=held");
    files.write("objects/services.yaml", &kubectl_list(&[pinned, latest]));
    let outcome = invariants_test(&args);
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    assert!(
        outcome.stdout.contains("[expected held; "),
        "{}",
        outcome.stdout
    );

    // A rule that cannot be evaluated is an error (exit 2), shown with the object.
    files.write("objects/services.yaml", &kubectl_list(&[service()]));
    let erring = files.write(
        "erring.yaml",
        "- name: needs-delivery\n  match: {kind: Service}\n  expression: \"object.spec.delivery.retry > 0\"\n",
    );
    let outcome = invariants_test(&[
        erring.to_str().unwrap(),
        "--against",
        against.to_str().unwrap(),
    ]);
    assert_eq!(outcome.code, 2, "{}{}", outcome.stdout, outcome.stderr);
    assert!(
        outcome.stdout.starts_with("error   needs-delivery"),
        "{}",
        outcome.stdout
    );
}

// ---- The mesh under Knative (issue 32) ---------------------------------------------------------

/// Istio's objects are compared with the baseline like every other kind: net-istio's shipped
/// PeerAuthentications and Gateway as Git keeps them (`tests/fixtures/istio/`, verbatim), the
/// live cluster with one policy's webhook port opened to plain text and the other deleted.
#[test]
fn mesh_objects_of_a_snapshot_are_compared_with_the_baseline() {
    let istio = |name: &str| {
        std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/istio")
                .join(name),
        )
        .expect("fixture exists")
    };
    let policies = istio(
        "knative-extensions-net-istio__config-400-webhook-peer-authentication__PeerAuthentication-portLevelMtls.yaml",
    );
    let gateway = istio(
        "knative-extensions-net-istio__config-202-gateway__Gateway-knative-ingress-gateway.yaml",
    );
    let baseline = format!("{policies}---\n{gateway}");
    let documents: Vec<Value> = policies
        .split("\n---\n")
        .chain([gateway.as_str()])
        .map(|text| serde_saphyr::from_str(text).expect("yaml"))
        .collect();
    // As the API server returns them: uid, resourceVersion, times.
    let live_of = |document: &Value, uid: &str| {
        let mut live = document.clone();
        let metadata = live["metadata"].as_object_mut().expect("metadata");
        metadata.insert("uid".into(), json!(uid));
        metadata.insert("resourceVersion".into(), json!("5001"));
        metadata.insert("creationTimestamp".into(), json!("2026-11-01T00:00:00Z"));
        live
    };
    let mut webhook = live_of(&documents[0], "pa-webhook");
    webhook["spec"]["portLevelMtls"]["8443"]["mode"] = json!("DISABLE");
    let gateway_live = live_of(&documents[2], "gw-ingress");
    let report = run(&baseline, &[webhook, gateway_live.clone()]);
    let mut found = lines(&report);
    found.sort();
    assert_eq!(
        found,
        [
            "warning missing PeerAuthentication.security.istio.io/knative-serving/net-istio-webhook",
            "warning spec_drift PeerAuthentication.security.istio.io/knative-serving/webhook",
        ],
        "{}",
        check::render_text(&report)
    );
    let drift = finding(&report, "spec_drift");
    let text = check::render_text(&report);
    assert!(
        text.contains("/spec/portLevelMtls/8443/mode"),
        "the diff names the port: {text}"
    );
    assert!(drift
        .diff
        .iter()
        .any(|entry| entry.path == "/spec/portLevelMtls/8443/mode"));
    // The same cluster as Git keeps it: nothing to say.
    let clean = run(
        &baseline,
        &[
            live_of(&documents[0], "pa-webhook"),
            live_of(&documents[1], "pa-net-istio-webhook"),
            gateway_live,
        ],
    );
    expect(&clean, &[]);
}
