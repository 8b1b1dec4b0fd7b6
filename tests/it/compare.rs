//! `drift-sentinel compare`: snapshot pairs of Knative's own ConfigMaps (the shipped
//! `config-autoscaler` and `config-network`) and a Knative Service (the rguske capture), with a
//! missing object and an `app.kubernetes.io/version` skew; each format, `fleet.groups` from a
//! config, names, and the exit codes (0 alike, 1 divergence at or above `--fail-on`, 2 bad input).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::{fixture_yaml, run_binary, Outcome};

const AUTOSCALER: &str =
    "configmaps/knative-serving__config-core-configmaps__config-autoscaler.yaml";
const NETWORK: &str = "configmaps/knative-serving__vendor-knative-networking__config-network.yaml";

/// A cluster's dump as `kubectl get -o yaml` prints it (a `List`), with cluster-set metadata.
fn dump(objects: &[Value], cluster: &str) -> String {
    let items: Vec<Value> = objects
        .iter()
        .enumerate()
        .map(|(index, object)| {
            let mut object = object.clone();
            object["metadata"]["uid"] = json!(format!("{cluster}-{index}"));
            object["metadata"]["resourceVersion"] = json!(format!("{}", 100 + index));
            object
        })
        .collect();
    serde_json::to_string_pretty(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
        .unwrap()
}

fn service() -> Value {
    crate::scenario::service()
}

fn staging() -> Vec<Value> {
    vec![fixture_yaml(AUTOSCALER), fixture_yaml(NETWORK), service()]
}

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().unwrap())
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

fn compare(args: &[&str], config: Option<&Path>) -> Outcome {
    let mut all = vec!["compare"];
    all.extend_from_slice(args);
    run_binary(&all, config)
}

/// The pair every test starts from: staging as shipped, prod with `prod` changes applied.
fn pair(prod_edit: impl FnOnce(&mut Vec<Value>)) -> (Dir, PathBuf, PathBuf) {
    let dir = Dir::new();
    let mut prod = staging();
    prod_edit(&mut prod);
    let a = dir.write("staging.yaml", &dump(&staging(), "staging"));
    let b = dir.write("prod.yaml", &dump(&prod, "prod"));
    (dir, a, b)
}

fn args<'a>(a: &'a Path, b: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--live", a.to_str().unwrap(), "--live", b.to_str().unwrap()];
    args.extend_from_slice(extra);
    args
}

#[test]
fn alike_snapshots_pass_with_exit_0() {
    let (_dir, a, b) = pair(|_| {});
    let outcome = compare(&args(&a, &b, &[]), None);
    assert_eq!(outcome.code, 0, "{}{}", outcome.stdout, outcome.stderr);
    // Compared: the two watched ConfigMaps and the Service.
    assert_eq!(
        outcome.stdout,
        "PASS: no findings in 3 objects (fail-on warning)\n"
    );
}

#[test]
fn a_missing_object_and_a_version_skew_are_reported_in_text_with_exit_1() {
    let (_dir, a, b) = pair(|prod| {
        prod.remove(2);
        prod[1]["metadata"]["labels"]["app.kubernetes.io/version"] = json!("1.15.1");
    });
    let outcome = compare(&args(&a, &b, &[]), None);
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    assert_eq!(
        outcome.stdout,
        "WARNING   fleet_divergence   ConfigMap/knative-serving/config-network: ConfigMap/knative-serving/config-network differs across the snapshots: /metadata/labels/app.kubernetes.io~1version is \"devel\" in staging; \"1.15.1\" in prod\n\
        \x20         /metadata/labels/app.kubernetes.io~1version: staging \"devel\", prod \"1.15.1\"\n\
        \x20         fix: no majority for /metadata/labels/app.kubernetes.io~1version (\"devel\" in staging; \"1.15.1\" in prod): align either way\n\
        \x20              upgrade Knative in prod to devel\n\
        \x20              or upgrade Knative in staging to 1.15.1\n\
        WARNING   fleet_divergence   Service.serving.knative.dev/myapp/knative-webapp: Service.serving.knative.dev/myapp/knative-webapp is missing from prod in the snapshots\n\
        \x20         (object): staging \"present\", prod (absent)\n\
        \x20         fix: Service.serving.knative.dev/myapp/knative-webapp is in staging but not in prod: add it to prod or delete it from staging\n\
        \x20              add it to prod from Git, or copy it from staging: kubectl --context staging -n myapp get service.serving.knative.dev knative-webapp -o json | jq 'del(.metadata.uid,.metadata.resourceVersion,.metadata.creationTimestamp,.metadata.generation,.metadata.managedFields,.metadata.ownerReferences,.status)' | kubectl --context prod apply -f -\n\
        \x20              or delete it from staging: kubectl --context staging -n myapp delete service.serving.knative.dev knative-webapp\n\
        FAIL: 2 of 2 findings at or above warning in 3 objects (0 critical, 2 warning, 0 info)\n"
    );
    // Below --fail-on: reported, exit 0.
    let outcome = compare(&args(&a, &b, &["--fail-on", "critical"]), None);
    assert_eq!(outcome.code, 0, "{}{}", outcome.stdout, outcome.stderr);
    assert!(outcome.stdout.starts_with("WARNING   fleet_divergence"));
}

#[test]
fn each_format_carries_every_clusters_value() {
    let (_dir, a, b) = pair(|prod| {
        prod[0]["data"]["container-concurrency-target-default"] = json!("50");
    });
    let json = compare(&args(&a, &b, &["--format", "json"]), None);
    assert_eq!(json.code, 1, "{}", json.stderr);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["summary"]["result"], "fail");
    let finding = &report["findings"][0];
    assert_eq!(finding["class"], "fleet_divergence");
    assert_eq!(
        finding["object"],
        "ConfigMap/knative-serving/config-autoscaler"
    );
    assert_eq!(
        finding["diff"][0],
        json!({"path": "/data/container-concurrency-target-default", "desired": null,
               "desiredFrom": null, "live": "50", "clusters": {"staging": null, "prod": "50"}})
    );
    let markdown = compare(&args(&a, &b, &["--format", "markdown"]), None);
    assert_eq!(markdown.code, 1);
    assert!(
        markdown.stdout.contains(
            "<br>`/data/container-concurrency-target-default`: `staging` `(absent)`, `prod` `\"50\"`"
        ),
        "{}",
        markdown.stdout
    );
    assert!(
        markdown
            .stdout
            .starts_with("### drift-sentinel compare failed\n"),
        "{}",
        markdown.stdout
    );
    let junit = compare(&args(&a, &b, &["--format", "junit"]), None);
    assert_eq!(junit.code, 1);
    assert!(
        junit.stdout.contains(
            "/data/container-concurrency-target-default: staging (absent), prod &quot;50&quot;"
        ),
        "{}",
        junit.stdout
    );
    assert!(
        junit
            .stdout
            .contains("<testsuite name=\"drift-sentinel compare\""),
        "{}",
        junit.stdout
    );
}

#[test]
fn cluster_names_are_quoted_in_markdown_like_values() {
    let (_dir, a, b) = pair(|prod| {
        prod[0]["data"]["max-scale"] = json!("5");
    });
    let hostile = "us|<img src=x onerror=alert(1)>";
    let outcome = compare(
        &args(
            &a,
            &b,
            &[
                "--name", "staging", "--name", hostile, "--format", "markdown",
            ],
        ),
        None,
    );
    assert_eq!(outcome.code, 1, "{}", outcome.stderr);
    assert!(
        // Unquoted, the pipe would end the table cell and the tag would render.
        !outcome.stdout.contains("us|<"),
        "{}",
        outcome.stdout
    );
    assert!(
        outcome
            .stdout
            .contains("`us\\|<img src=x onerror=alert(1)>` `\"5\"`"),
        "{}",
        outcome.stdout
    );
}

#[test]
fn a_snapshot_holding_nothing_compared_is_bad_input() {
    let dir = Dir::new();
    let a = dir.write("staging.yaml", &dump(&staging(), "staging"));
    // A dump of another kind: nothing compare looks at.
    let pods = dump(
        &[json!({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "p", "namespace": "default"},
                 "spec": {"containers": [{"name": "c", "image": "x"}]}})],
        "prod",
    );
    let b = dir.write("prod.yaml", &pods);
    let outcome = compare(&args(&a, &b, &[]), None);
    assert_eq!(outcome.code, 2, "{}{}", outcome.stdout, outcome.stderr);
    assert!(
        outcome
            .stderr
            .contains("snapshot \"prod\" holds no object of a kind that compare (Knative objects and watched ConfigMaps) compares"),
        "{}",
        outcome.stderr
    );
}

/// An empty snapshot (a cluster that holds none of the objects) is compared: everything is
/// missing from it, a divergence (exit 1), not bad input.
#[test]
fn an_empty_snapshot_has_everything_missing() {
    let dir = Dir::new();
    let a = dir.write("staging.yaml", &dump(&staging(), "staging"));
    let b = dir.write("prod.yaml", &dump(&[], "prod"));
    let outcome = compare(&args(&a, &b, &[]), None);
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    assert!(
        outcome
            .stdout
            .contains("is missing from prod in the snapshots"),
        "{}",
        outcome.stdout
    );
}

#[test]
fn fleet_groups_from_the_config_choose_members_objects_and_ignored_paths() {
    let dir = Dir::new();
    let mut prod = staging();
    prod[0]["data"]["max-scale"] = json!("10");
    prod[1]["data"]["ingress-class"] = json!("kourier.ingress.networking.knative.dev");
    let mut dev = staging();
    dev[0]["data"]["max-scale"] = json!("99");
    let s = dir.write("staging.yaml", &dump(&staging(), "staging"));
    let p = dir.write("prod.yaml", &dump(&prod, "prod"));
    let d = dir.write("dev.yaml", &dump(&dev, "dev"));
    let config = dir.write(
        "config.yaml",
        "fleet:\n  groups:\n    - name: release\n      clusters: [staging, prod]\n      compare:\n        - {kind: ConfigMap, namespace: knative-serving, name: \"config-*\"}\n      ignorePaths: [/data/max-scale]\n      severity: critical\n",
    );
    let outcome = compare(
        &[
            "--live",
            s.to_str().unwrap(),
            "--live",
            p.to_str().unwrap(),
            "--live",
            d.to_str().unwrap(),
            "--format",
            "json",
        ],
        Some(&config),
    );
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    let report: Value = serde_json::from_str(&outcome.stdout).unwrap();
    // dev is no member; max-scale is ignored; the Service is not compared.
    assert_eq!(report["summary"]["objects"], 2);
    assert_eq!(report["summary"]["findings"], 1);
    let finding = &report["findings"][0];
    assert_eq!(finding["rule"], "release");
    assert_eq!(finding["severity"], "critical");
    assert_eq!(finding["diff"][0]["path"], "/data/ingress-class");
    // No group holds two snapshots: bad input.
    let outcome = compare(
        &["--live", s.to_str().unwrap(), "--live", d.to_str().unwrap()],
        Some(&config),
    );
    assert_eq!(outcome.code, 2);
    assert!(
        outcome
            .stderr
            .contains("no fleet group holds two of the snapshots (staging, dev)"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn names_come_from_name_flags_and_bad_input_exits_2() {
    let (dir, a, b) = pair(|prod| {
        prod.remove(0);
    });
    let outcome = compare(&args(&a, &b, &["--name", "eu", "--name", "us"]), None);
    assert_eq!(outcome.code, 1);
    assert!(
        outcome.stdout.contains("is missing from us"),
        "{}",
        outcome.stdout
    );
    // One snapshot is not a comparison; two of one name cannot be told apart; a file that is
    // not YAML names itself.
    assert_eq!(compare(&["--live", a.to_str().unwrap()], None).code, 2);
    let outcome = compare(&args(&a, &a, &[]), None);
    assert_eq!(outcome.code, 2);
    assert!(
        outcome
            .stderr
            .contains("two snapshots are named \"staging\""),
        "{}",
        outcome.stderr
    );
    let broken = dir.write("broken.yaml", "items: [");
    let outcome = compare(&args(&a, &broken, &[]), None);
    assert_eq!(outcome.code, 2);
    assert!(outcome.stderr.contains("broken.yaml"), "{}", outcome.stderr);
    let outcome = compare(&args(&a, &b, &["--name", "only-one"]), None);
    assert_eq!(outcome.code, 2);
    assert!(
        outcome.stderr.contains("--name is given 1 time(s) for 2"),
        "{}",
        outcome.stderr
    );
}
