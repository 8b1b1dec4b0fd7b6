//! `drift-sentinel drill` end to end: the real binary drills the stateful fake cluster
//! (`fake_cluster`), which applies each write as the API server would and sends the
//! ApiServerSource event of it to a real sink binary; the drill reads the sink's drift API. Every
//! shipped drill passes and leaves the cluster as it found it; a drift the sink does not see fails
//! its drill by name and is put back; a signal mid-drill puts back, a killed run is recovered; a
//! namespace without the label is refused before any request; a dry run sends nothing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake_cluster::{drill_world, FakeCluster};
use crate::resync_api::Process;

pub(crate) const SERVICE: &str = "/apis/serving.knative.dev/v1/namespaces/drills/services/hello";
const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/drills/deployments/hello-00001-deployment";
const TRIGGER: &str = "/apis/eventing.knative.dev/v1/namespaces/drills/triggers/hello";
const BROKER: &str = "/apis/eventing.knative.dev/v1/namespaces/drills/brokers/default";
const CONFIGMAP: &str = "/api/v1/namespaces/knative-serving/configmaps/config-autoscaler";

/// The shipped catalog.
pub(crate) fn shipped_catalog() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/drills/knative.yaml")
}

/// The shipped invariants the catalog's rule drills expect (its header says to run them), with
/// no grace (so the test does not wait the default 2m).
fn invariants() -> Vec<Value> {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/invariants/knative.yaml"),
    )
    .unwrap();
    let file: Value = serde_saphyr::from_str(&text).unwrap();
    file["invariants"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|rule| {
            ["critical-services-keep-warm", "broker-dead-letter-sink"]
                .contains(&rule["name"].as_str().unwrap())
        })
        .map(|rule| {
            let mut rule = rule.clone();
            rule["grace"] = json!("0s");
            rule
        })
        .collect()
}

/// A sink's config (JSON is YAML): the drilled classes without grace, `disabled` classes off.
fn sink_config(dir: &Path, disabled: &[&str]) -> PathBuf {
    let mut classes = serde_json::Map::new();
    // Shorter graces than the defaults (which the catalog's `within`s cover), only to keep the
    // test short; manual_edit and config_drift have none by default.
    for class in ["unexpected_delete", "event_delivery_broken"] {
        classes.insert(class.into(), json!({"grace": "0s"}));
    }
    for class in disabled {
        classes.insert(class.to_string(), json!({"enabled": false}));
    }
    let config = json!({
        "store": {"path": dir.join("sink.db")},
        "resync": {"enabled": false},
        "channels": [{"name": "log", "type": "log"}],
        "routes": [{"channels": ["log"], "groupWait": "0s", "groupInterval": "0s"}],
        "rules": {"classes": classes, "invariants": invariants()},
    });
    let path = dir.join("sink.yaml");
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// A sink and a fake cluster that sends it events.
pub(crate) struct World {
    pub dir: tempfile::TempDir,
    pub sink: Process,
    pub cluster: FakeCluster,
    pub kubeconfig: PathBuf,
}

impl World {
    pub(crate) async fn start(disabled: &[&str], objects: Vec<Value>) -> World {
        let dir = tempfile::tempdir().unwrap();
        let config = sink_config(dir.path(), disabled);
        let sink = Process::start(&config, &dir.path().join("sink.log"));
        let cluster = FakeCluster::start(&sink.base, objects).await;
        assert_eq!(
            cluster.refused(),
            Vec::<String>::new(),
            "{}",
            sink_log(dir.path())
        );
        cluster.repair_deployments(Duration::from_millis(800));
        let kubeconfig = cluster.kubeconfig(dir.path(), "fake");
        World {
            dir,
            sink,
            cluster,
            kubeconfig,
        }
    }

    /// `drill` with `args` after the cluster's and the sink's, as a child process.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        self.command_on(&self.kubeconfig, args)
    }

    /// `drill` against the cluster of `kubeconfig`.
    pub(crate) fn command_on(&self, kubeconfig: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_drift-sentinel"));
        command
            .arg("drill")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--context",
                "fake",
                "--sink",
                &self.sink.base,
                "--poll",
                "100ms",
            ])
            .arg("--journal")
            .arg(self.journal())
            .args(args)
            .env_remove("DRIFT_SENTINEL_API_TOKEN")
            .env_remove("KUBECONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    pub(crate) fn journal(&self) -> PathBuf {
        self.dir.path().join("drill.journal")
    }

    /// Runs `drill` to its end.
    pub(crate) async fn drill(&self, args: &[&str]) -> crate::support::Outcome {
        let mut command = self.command(args);
        tokio::task::spawn_blocking(move || {
            let output = command.output().unwrap();
            crate::support::Outcome {
                code: output.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&output.stdout).to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).to_string(),
            }
        })
        .await
        .unwrap()
    }

    pub(crate) fn log(&self) -> String {
        sink_log(self.dir.path())
    }
}

fn sink_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("sink.log")).unwrap_or_default()
}

/// What a drill may change and must put back, per object (server fields aside).
fn desired(cluster: &FakeCluster) -> Value {
    let part = |path: &str, pointer: &str| {
        cluster
            .object(path)
            .and_then(|object| object.pointer(pointer).cloned())
            .unwrap_or(Value::Null)
    };
    json!({
        "service": {"spec": part(SERVICE, "/spec"), "labels": part(SERVICE, "/metadata/labels")},
        "deployment": part(DEPLOYMENT, "/spec/template/spec/containers"),
        "trigger": part(TRIGGER, "/spec"),
        "broker": part(BROKER, "/spec"),
        "configmap": part(CONFIGMAP, "/data"),
    })
}

fn testcases(junit: &str) -> usize {
    junit.matches("<testcase ").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_drill_passes_and_leaves_the_cluster_as_it_found_it() {
    let world = World::start(&[], drill_world()).await;
    let before = desired(&world.cluster);

    // A dry run reads and prints, and writes nothing.
    let writes = world.cluster.writes();
    let catalog = shipped_catalog();
    let catalog = catalog.to_str().unwrap();
    let dry = world.drill(&["--catalog", catalog, "--dry-run"]).await;
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout.contains("# drill service-deleted"),
        "{}",
        dry.stdout
    );
    assert_eq!(world.cluster.writes(), writes);
    assert!(world
        .cluster
        .requests()
        .iter()
        .all(|(method, _)| method == "GET"));

    let run = world
        .drill(&["--catalog", catalog, "--format", "junit"])
        .await;
    assert_eq!(
        run.code,
        0,
        "{}\n{}\n{}",
        run.stdout,
        run.stderr,
        world.log()
    );
    assert_eq!(testcases(&run.stdout), 8, "{}", run.stdout);
    assert!(
        run.stdout.contains("tests=\"8\" failures=\"0\""),
        "{}",
        run.stdout
    );
    for name in [
        "traffic-hand-edit",
        "behavioural-label",
        "critical-service-may-scale-to-zero",
        "revision-deployment-image",
        "trigger-subscriber-gone",
        "broker-dead-letter-sink-removed",
        "service-deleted",
        "knative-configmap-hand-edit",
    ] {
        assert!(
            run.stdout.contains(&format!("name=\"{name}\"")),
            "{name}: {}",
            run.stdout
        );
    }
    // The image drill was put back by Knative's controller, not by the drill.
    assert!(run
        .stdout
        .contains("manual_edit on Deployment drills/hello-00001-deployment: detected"));
    assert!(run.stdout.contains("repaired"), "{}", run.stdout);
    world.cluster.settled().await;
    assert_eq!(desired(&world.cluster), before);
    assert!(!world.journal().exists());
    // Nothing is left drifting: every drift the drills caused resolved.
    for namespace in ["drills", "knative-serving"] {
        let open: Value = reqwest::get(format!(
            "{}/api/v1/drifts?namespace={namespace}&state=open",
            world.sink.base
        ))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        assert_eq!(open["items"], json!([]), "{namespace}: {open:#}");
    }
    // Every write the drills sent was sent as the drill (a delete names no manager).
    let sent: Vec<(String, String)> = world
        .cluster
        .requests()
        .into_iter()
        .filter(|(method, _)| method != "GET")
        .collect();
    assert!(sent.len() >= 15, "{sent:?}");
    assert!(
        sent.iter().all(|(method, path)| method == "DELETE"
            || path.contains("fieldManager=drift-sentinel-drill")),
        "{sent:?}"
    );
}

/// The traffic drill with a short `within`.
fn quick_catalog(dir: &Path, within: &str) -> PathBuf {
    let path = dir.join("quick.yaml");
    std::fs::write(
        &path,
        format!(
            "drills:\n  - name: traffic-hand-edit\n    target: {{apiVersion: serving.knative.dev/v1, kind: Service, namespace: drills, name: hello}}\n    inject:\n      mergePatch: {{spec: {{traffic: [{{latestRevision: true, percent: 80}}, {{latestRevision: true, percent: 20, tag: drill}}]}}}}\n    expect: {{class: manual_edit, within: {within}}}\n"
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drift_the_sink_does_not_see_fails_its_drill_by_name_and_the_target_is_put_back() {
    let world = World::start(&["manual_edit"], drill_world()).await;
    let before = desired(&world.cluster);
    let catalog = quick_catalog(world.dir.path(), "2s");
    let run = world
        .drill(&["--catalog", catalog.to_str().unwrap(), "--format", "junit"])
        .await;
    let none = world
        .drill(&[
            "--catalog",
            catalog.to_str().unwrap(),
            "--drill",
            "traffic-hand-edit",
            "--skip",
            "traffic-hand-edit",
        ])
        .await;
    assert_eq!(none.code, 2, "{}", none.stderr);
    assert!(
        none.stderr.contains("no drill left to run"),
        "{}",
        none.stderr
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("tests=\"1\" failures=\"1\""),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("name=\"traffic-hand-edit\"")
            && run.stdout.contains(
                "<failure type=\"drill\" message=\"no manual_edit drift fired on Service drills/hello within 2s"
            ),
        "{}",
        run.stdout
    );
    world.cluster.settled().await;
    assert_eq!(desired(&world.cluster), before);
    assert!(!world.journal().exists());

    // A cluster whose drill namespace lacks the label: refused before any request to a target.
    let mut world_unlabelled = drill_world();
    for object in &mut world_unlabelled {
        if object["kind"] == "Namespace" && object["metadata"]["name"] == "drills" {
            object["metadata"]["labels"]
                .as_object_mut()
                .unwrap()
                .remove("drift-sentinel.dev/drills");
        }
    }
    let other = FakeCluster::start(&world.sink.base, world_unlabelled).await;
    let kubeconfig = other.kubeconfig(world.dir.path(), "fake");
    let mut command = world.command_on(&kubeconfig, &["--catalog", catalog.to_str().unwrap()]);
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("namespace drills is not labelled drift-sentinel.dev/drills: \"allowed\"; refused before any request"), "{stderr}");
    assert_eq!(
        other.requests(),
        vec![("GET".to_string(), "/api/v1/namespaces/drills".to_string())]
    );
}

/// Waits until `check` holds, or fails with `what`.
async fn until(what: &str, world: &World, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn injected(world: &World) -> bool {
    world
        .cluster
        .object(SERVICE)
        .is_some_and(|service| service.to_string().contains("\"tag\":\"drill\""))
}

fn wait_child(child: Child) -> std::process::Output {
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_mid_drill_puts_the_target_back_and_a_killed_run_is_recovered() {
    // The sink sees nothing, so the drill waits its whole `within` unless stopped.
    let world = World::start(&["manual_edit"], drill_world()).await;
    let before = desired(&world.cluster);
    let catalog = quick_catalog(world.dir.path(), "60s");
    let catalog = catalog.to_str().unwrap();

    let child = world.command(&["--catalog", catalog]).spawn().unwrap();
    until("the injection", &world, || injected(&world)).await;
    assert!(world.journal().exists());
    // One run per journal: a second one meanwhile is refused before anything.
    let second = world.drill(&["--catalog", catalog]).await;
    assert_eq!(second.code, 2, "{}", second.stderr);
    assert!(
        second
            .stderr
            .contains("another drill run uses this journal"),
        "{}",
        second.stderr
    );
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || wait_child(child))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("stopped by a signal"), "{stdout}");
    world.cluster.settled().await;
    assert_eq!(desired(&world.cluster), before);
    assert!(!world.journal().exists());

    // SIGKILL leaves the injection and the journal; the next run refuses to start until
    // --recover has put it back.
    let mut child = world.command(&["--catalog", catalog]).spawn().unwrap();
    until("the injection", &world, || injected(&world)).await;
    child.kill().unwrap();
    tokio::task::spawn_blocking(move || wait_child(child))
        .await
        .unwrap();
    assert!(injected(&world));
    let journal: Value = serde_json::from_slice(&std::fs::read(world.journal()).unwrap()).unwrap();
    assert_eq!(
        journal["open"][0]["drill"], "traffic-hand-edit",
        "{journal}"
    );
    let refused = world.drill(&["--catalog", catalog]).await;
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("--recover"), "{}", refused.stderr);
    assert!(injected(&world));
    // Only through the API server it was injected through: another cluster's kubeconfig is
    // refused, and the entry kept.
    let other = FakeCluster::start(&world.sink.base, drill_world()).await;
    std::fs::create_dir_all(world.dir.path().join("other")).unwrap();
    let elsewhere = other.kubeconfig(&world.dir.path().join("other"), "fake");
    let mut command = world.command_on(&elsewhere, &["--recover"]);
    let wrong = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&wrong.stdout);
    assert_eq!(wrong.status.code(), Some(1), "{said}");
    assert!(said.contains("was drilled through"), "{said}");
    assert_eq!(other.writes(), 0);
    assert!(injected(&world) && world.journal().exists());
    // The catalog is not needed to recover.
    let recovered = world.drill(&["--recover"]).await;
    assert_eq!(
        recovered.code, 0,
        "{}\n{}",
        recovered.stdout, recovered.stderr
    );
    assert!(
        recovered.stdout.contains("put back"),
        "{}",
        recovered.stdout
    );
    world.cluster.settled().await;
    assert_eq!(desired(&world.cluster), before);
    assert!(!world.journal().exists());
}

/// The drill names of a chaos dry run's schedule, in order.
fn schedule(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("at "))
        .map(|line| line.split_once(": ").unwrap().1.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_chaos_run_catches_every_injection_without_a_false_alert_and_a_seed_repeats() {
    let world = World::start(&[], drill_world()).await;
    let before = desired(&world.cluster);
    let catalog = shipped_catalog();
    let chaos = |seed: &'static str| {
        vec![
            "--catalog",
            catalog.to_str().unwrap(),
            "--chaos",
            "--duration",
            "2m",
            "--rate",
            "20/m",
            "--seed",
            seed,
            // The drilled classes have no grace here: nothing to wait for.
            "--settle",
            "1s",
        ]
    };
    let plan = |seed| {
        let mut args = chaos(seed);
        args.push("--dry-run");
        args
    };
    let first = world.drill(&plan("7")).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let planned = schedule(&first.stdout);
    assert!(planned.len() >= 20, "{}", first.stdout);
    assert_eq!(schedule(&world.drill(&plan("7")).await.stdout), planned);
    assert_ne!(schedule(&world.drill(&plan("8")).await.stdout), planned);

    let mut args = chaos("7");
    args.extend(["--format", "json"]);
    let run = world.drill(&args).await;
    let report: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", run.stdout, run.stderr));
    assert_eq!(run.code, 0, "{report:#}\n{}", run.stderr);
    assert_eq!(report["mode"], "chaos");
    assert_eq!(report["seed"], 7);
    // The same seed ran the drills it planned, in its order.
    let ran: Vec<String> = report["drills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|drill| drill["name"].as_str().unwrap().to_string())
        .collect();
    // Drills whose queue was still busy when the duration ended are not started: the rest ran
    // in the planned order.
    let not_run = report["notRun"].as_u64().unwrap() as usize;
    assert_eq!(ran.len() + not_run, planned.len(), "{report:#}");
    assert!(
        not_run <= planned.len() / 10,
        "{not_run} of {} not run",
        planned.len()
    );
    let mut rest = planned.iter();
    assert!(
        ran.iter().all(|name| rest.any(|planned| planned == name)),
        "{ran:?} is not in the order of {planned:?}"
    );
    let classes = report["summary"]["classes"].as_object().unwrap();
    assert_eq!(classes.len(), 6, "{classes:?}");
    let mut injected = 0;
    for (class, summary) in classes {
        assert_eq!(
            summary["injected"], summary["detected"],
            "{class}: {summary}"
        );
        assert_eq!(summary["missed"], 0, "{class}");
        assert!(
            summary["latencyP50Ms"].as_u64().is_some(),
            "{class}: {summary}"
        );
        assert!(summary["latencyP99Ms"].as_u64() >= summary["latencyP50Ms"].as_u64());
        injected += summary["injected"].as_u64().unwrap();
    }
    assert_eq!(injected as usize, ran.len());
    assert_eq!(report["summary"]["falseAlerts"], json!([]));
    world.cluster.settled().await;
    assert_eq!(desired(&world.cluster), before);
    assert!(!world.journal().exists());
}

/// A sink that repairs: resync and remediation on the fake cluster (`rules`: the `remediation`
/// rules, none for a sink whose remediation has no rule for the drill).
async fn repairing_world(rules: Value) -> World {
    let dir = tempfile::tempdir().unwrap();
    let port = crate::resync_api::free_port();
    let cluster = FakeCluster::serve(&format!("http://127.0.0.1:{port}"), drill_world()).await;
    let kubeconfig = cluster.kubeconfig(dir.path(), "fake");
    let config = json!({
        "store": {"path": dir.path().join("sink.db")},
        "channels": [{"name": "log", "type": "log"}],
        "routes": [{"channels": ["log"], "groupWait": "0s", "groupInterval": "0s"}],
        "resync": {"enabled": true, "interval": "1h", "kubeconfig": kubeconfig, "context": "fake",
                   "resources": [{"apiVersion": "serving.knative.dev/v1", "kind": "Service"}]},
        "rules": {"classes": {"manual_edit": {"grace": "0s"}}},
        "remediation": {"mode": "apply", "rules": rules},
    });
    let path = dir.path().join("sink.yaml");
    std::fs::write(&path, config.to_string()).unwrap();
    let sink = Process::start_at(&path, &dir.path().join("sink.log"), port);
    cluster.settled().await;
    assert_eq!(
        cluster.refused(),
        Vec::<String>::new(),
        "{}",
        sink_log(dir.path())
    );
    World {
        dir,
        sink,
        cluster,
        kubeconfig,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_repaired_passes_with_an_auto_revert_rule_and_fails_without_one() {
    let catalog = |dir: &Path| {
        let path = dir.join("repaired.yaml");
        std::fs::write(
            &path,
            "drills:\n  - name: traffic-reverted\n    target: {apiVersion: serving.knative.dev/v1, kind: Service, namespace: drills, name: hello}\n    inject:\n      mergePatch: {spec: {traffic: [{latestRevision: true, percent: 80}, {latestRevision: true, percent: 20, tag: drill}]}}\n    expect: {class: manual_edit, within: 20s}\n    then: {expectRepaired: {within: 8s}}\n",
        )
        .unwrap();
        path
    };
    let revert = json!([{"name": "revert-hand-edits",
                         "match": {"classes": ["manual_edit"], "kinds": ["Service.serving.knative.dev"]},
                         "action": "revert", "approval": "auto"}]);
    let world = repairing_world(revert).await;
    let before = desired(&world.cluster);
    let path = catalog(world.dir.path());
    let run = world.drill(&["--catalog", path.to_str().unwrap()]).await;
    assert_eq!(
        run.code,
        0,
        "{}\n{}\n{}",
        run.stdout,
        run.stderr,
        world.log()
    );
    assert!(
        run.stdout.contains("PASS traffic-reverted") && run.stdout.contains("repaired"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("repaired 1"), "{}", run.stdout);
    // The revert was the sink's, not the drill's.
    assert!(world
        .cluster
        .requests()
        .iter()
        .any(|(method, path)| method == "PATCH"
            && path.contains("fieldManager=drift-sentinel")
            && !path.contains("drift-sentinel-drill")));
    world.cluster.settled().await;
    assert_eq!(desired(&world.cluster), before);

    // No rule repairs it: the drill fails, and puts it back itself.
    let world = repairing_world(json!([])).await;
    let path = catalog(world.dir.path());
    let run = world.drill(&["--catalog", path.to_str().unwrap()]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("not repaired within 8s"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("restored"), "{}", run.stdout);
    world.cluster.settled().await;
    assert_eq!(desired(&world.cluster), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_knative_refuses_fails_at_its_injection_and_changes_nothing() {
    let world = World::start(&[], drill_world()).await;
    let before = desired(&world.cluster);
    let path = world.dir.path().join("refused.yaml");
    std::fs::write(
        &path,
        concat!(
            "drills:\n",
            "  - name: scale-bounds-broken\n",
            "    target: {apiVersion: serving.knative.dev/v1, kind: Service, namespace: drills, name: hello}\n",
            "    inject:\n",
            "      mergePatch: {spec: {template: {metadata: {annotations: {autoscaling.knative.dev/min-scale: \"3\", autoscaling.knative.dev/max-scale: \"1\"}}}}}\n",
            "    expect: {rule: scale-bounds-sane, within: 5s}\n",
            "  - name: example-block-edited\n",
            "    target: {apiVersion: v1, kind: ConfigMap, namespace: knative-serving, name: config-autoscaler}\n",
            "    inject:\n",
            "      mergePatch: {data: {_example: \"edited by a drill\"}}\n",
            "    expect: {class: config_drift, within: 5s}\n",
        ),
    )
    .unwrap();
    let run = world
        .drill(&["--catalog", path.to_str().unwrap(), "--format", "json"])
        .await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    for (index, denial) in [
        "max-scale=1 is less than min-scale=3",
        "the update modifies a key in \\\"_example\\\"",
    ]
    .iter()
    .enumerate()
    {
        let drill = &report["drills"][index];
        assert_eq!(drill["end"], "notInjected", "{drill}");
        assert_eq!(drill["injectedAtMs"], Value::Null);
        let failure = drill["failures"][0].to_string();
        assert!(
            failure.contains("the API server refused the injection (400: admission webhook")
                && failure.contains(denial)
                && failure.contains("nothing was changed"),
            "{failure}"
        );
    }
    assert_eq!(desired(&world.cluster), before);
    assert!(!world.journal().exists());
}

/// A journal entry as a killed run leaves it: the injection's answer unknown.
fn lost_answer(world: &World, drill: &str, kept: &Value, inject: Value) -> Value {
    json!({
        "drill": drill, "server": format!("{}/", world.cluster.base()),
        "apiVersion": kept["apiVersion"], "kind": kept["kind"],
        "namespace": kept["metadata"]["namespace"], "name": kept["metadata"]["name"],
        "inject": inject, "kept": kept, "injected": null,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_never_guesses_what_a_killed_run_left_behind() {
    let world = World::start(&[], drill_world()).await;
    let service = world.cluster.object(SERVICE).unwrap();
    let traffic = json!({"mergePatch": {"spec": {"traffic": [{"latestRevision": true, "percent": 80},
                                                             {"latestRevision": true, "percent": 20, "tag": "drill"}]}}});
    // A second Service, whose injection landed (its answer lost): it holds what the drill wrote.
    let mut landed_kept = service.clone();
    landed_kept["metadata"]["name"] = json!("landed");
    landed_kept["metadata"]["uid"] = json!("uid-landed");
    let landed_kept = world.cluster.put(landed_kept);
    let mut landed = landed_kept.clone();
    landed["spec"]["traffic"] = traffic["mergePatch"]["spec"]["traffic"].clone();
    world.cluster.put(landed);
    // A third, whose traffic someone set to something else after the drill.
    let mut theirs_kept = service.clone();
    theirs_kept["metadata"]["name"] = json!("theirs");
    theirs_kept["metadata"]["uid"] = json!("uid-theirs");
    let theirs_kept = world.cluster.put(theirs_kept);
    let mut theirs = theirs_kept.clone();
    theirs["spec"]["traffic"] = json!([{"revisionName": "hello-00001", "percent": 100}]);
    world.cluster.put(theirs.clone());
    // A deleted one that is gone, the delete's answer lost; one in a namespace without the label.
    let mut gone = service.clone();
    gone["metadata"]["name"] = json!("gone");
    gone["metadata"]["uid"] = json!("uid-gone");
    let mut elsewhere = service.clone();
    elsewhere["metadata"]["namespace"] = json!("team");
    let entries = vec![
        // The injection never landed: the object is as it was read.
        lost_answer(&world, "never-landed", &service, traffic.clone()),
        lost_answer(&world, "landed", &landed_kept, traffic.clone()),
        lost_answer(&world, "theirs", &theirs_kept, traffic.clone()),
        lost_answer(&world, "gone", &gone, json!({"delete": true})),
        lost_answer(&world, "elsewhere", &elsewhere, traffic.clone()),
    ];
    std::fs::write(
        world.journal(),
        json!({"version": 2, "open": entries}).to_string(),
    )
    .unwrap();
    let sent = |world: &World| {
        world
            .cluster
            .requests()
            .into_iter()
            .filter(|(method, _)| method != "GET")
            .count()
    };
    let writes = sent(&world);

    let recovered = world.drill(&["--recover"]).await;
    let said = &recovered.stdout;
    assert_eq!(recovered.code, 1, "{said}\nSTDERR {}", recovered.stderr);
    assert!(
        said.contains("recover never-landed: Service drills/hello was already as kept"),
        "{said}"
    );
    assert!(
        said.contains("recover landed: Service drills/landed put back"),
        "{said}"
    );
    assert!(
        said.contains("recover theirs: Service drills/theirs NOT put back: changed by someone else since the drill (/spec/traffic)"),
        "{said}"
    );
    assert!(
        said.contains("recover gone: Service drills/gone NOT put back: it is gone, and the drill's delete got no answer")
            && said.contains("| kubectl create -f -"),
        "{said}"
    );
    assert!(
        said.contains("recover elsewhere: namespace team no longer allows drills"),
        "{said}"
    );
    // One request that writes: the landed injection put back.
    assert_eq!(sent(&world), writes + 1, "{:?}", world.cluster.requests());
    let path = |name: &str| SERVICE.replace("/hello", &format!("/{name}"));
    assert_eq!(
        world.cluster.object(&path("landed")).unwrap()["spec"]["traffic"],
        landed_kept["spec"]["traffic"]
    );
    assert_eq!(
        world.cluster.object(&path("theirs")).unwrap()["spec"]["traffic"],
        theirs["spec"]["traffic"]
    );
    assert!(world.cluster.object(&path("gone")).is_none());
    // What was not put back stays in the journal, for a person and a later --recover.
    let journal: Value = serde_json::from_slice(&std::fs::read(world.journal()).unwrap()).unwrap();
    let left: Vec<&str> = journal["open"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["drill"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["theirs", "gone", "elsewhere"]);
    // A person decides about one (keeps their change): forgotten, the others stay.
    let forgot = world.drill(&["--forget", "theirs"]).await;
    assert_eq!(forgot.code, 0, "{}", forgot.stderr);
    assert!(
        forgot
            .stdout
            .contains("forgot theirs: Service drills/theirs"),
        "{}",
        forgot.stdout
    );
    let unknown = world.drill(&["--forget", "nope"]).await;
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("it holds: gone, elsewhere"),
        "{}",
        unknown.stderr
    );
    // A mistyped journal is not "nothing to put back".
    let mut command = Command::new(env!("CARGO_BIN_EXE_drift-sentinel"));
    command
        .args(["drill", "--recover", "--context", "fake", "--kubeconfig"])
        .arg(&world.kubeconfig)
        .arg("--journal")
        .arg(world.dir.path().join("no-such.journal"));
    let missing = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("no journal at"), "{said}");
}
