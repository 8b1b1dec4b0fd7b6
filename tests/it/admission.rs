//! `admission export`: the exported policies judged the way the API server judges them
//! (`drift_core::admission::evaluate` on admission variables built as the API server builds
//! them) against the sink's own verdicts.
//!
//! * Parity: every shipped example rule that exports, on every fixture object (the verbatim
//!   captures, the objects written from Knative's sources, the documented edits, the install's
//!   own Broker and Trigger), on CREATE (no `status`, absent labels and annotations absent) and
//!   on UPDATE: held ⇔ allowed, broken ⇔ refused with the sink's message, not selected ⇒ not
//!   matched; every exported rule is both held and broken somewhere.
//! * Each place the API server's variables differ from the sink's, with the rewrite that makes
//!   the verdicts agree and what the verdict would be without it.
//! * `--protect-managed` on AdmissionReview-shaped requests.
//! * The command: exit codes, the written Component, and that `k8s/components/admission/` is
//!   what the command writes today.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use drift_core::admission::{
    evaluate, export, protect_managed, Decision, Options, Policy, Request,
};
use drift_core::classify::evidence::hint::plural;
use drift_core::classify::invariants::{judge_object, Verdict};
use drift_core::config::{load_rules_file, parse_rules_text};
use drift_core::decode::parse_object;
use serde_json::{json, Value};

use crate::invariant_library::objects_in;

const LIBRARY: &str = "examples/invariants/knative.yaml";
const USER: &str = "jane@example.com";

fn repo(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

fn files_under(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixture directory")
        .map(|entry| entry.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "events") {
                files_under(&path, found);
            }
        } else if path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "json")
        {
            found.push(path);
        }
    }
}

/// Every fixture object with a kind, and the install's own Broker and Trigger.
fn fixture_objects() -> Vec<(String, Value)> {
    let mut files = Vec::new();
    files_under(&repo("tests/fixtures/knative"), &mut files);
    files.push(repo("k8s/broker.yaml"));
    files.push(repo("k8s/trigger.yaml"));
    let mut objects = Vec::new();
    for file in files {
        for object in objects_in(&file) {
            if object["kind"].is_string() && object["metadata"]["name"].is_string() {
                let origin = format!(
                    "{}: {}/{}",
                    file.file_name().unwrap().to_string_lossy(),
                    object["kind"].as_str().unwrap(),
                    object["metadata"]["name"].as_str().unwrap()
                );
                objects.push((origin, object));
            }
        }
    }
    objects
}

/// The request the API server would make of `object` for `operation` by `user`.
fn request(operation: &str, object: &Value, old: Option<&Value>, user: &str) -> Request {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Request {
        operation: operation.to_string(),
        group: group.to_string(),
        version: version.to_string(),
        resource: plural(kind),
        kind: kind.to_string(),
        sub_resource: String::new(),
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        namespace_labels: BTreeMap::from([(
            "kubernetes.io/metadata.name".to_string(),
            namespace.clone(),
        )]),
        namespace,
        username: user.to_string(),
        groups: vec!["system:authenticated".to_string()],
        object: Some(object.clone()),
        old_object: old.cloned(),
    }
}

/// The object as the API server has it on CREATE through the main resource: no status (the
/// status subresource's), no resourceVersion yet.
fn as_created(object: &Value) -> Value {
    let mut created = object.clone();
    if let Some(map) = created.as_object_mut() {
        map.remove("status");
    }
    if let Some(metadata) = created["metadata"].as_object_mut() {
        metadata.remove("resourceVersion");
    }
    created
}

/// The sink's verdict on an object (the rule's own selection included).
/// The sink sees objects once stored: with a uid and a resourceVersion.
fn sink_verdict(
    rule: &drift_core::classify::invariants::Invariant,
    object: &Value,
) -> Option<Verdict> {
    let mut stored = object.clone();
    for (key, value) in [("uid", "uid-1"), ("resourceVersion", "1")] {
        if stored["metadata"].get(key).is_none() {
            stored["metadata"][key] = json!(value);
        }
    }
    judge_object(
        rule,
        "default",
        &parse_object(stored).expect("valid object"),
    )
}

fn agree(sink: &Option<Verdict>, policy: &Decision) -> bool {
    match (sink, policy) {
        (None, Decision::NotMatched) => true,
        (Some(Verdict::Held), Decision::Allowed) => true,
        (Some(Verdict::Broken(message)), Decision::Refused(refused)) => message == refused,
        (Some(Verdict::Failed(_)), Decision::Failed(_)) => true,
        _ => false,
    }
}

#[test]
fn every_exported_rule_judges_every_fixture_object_as_the_sink_does() {
    let rules = load_rules_file(&repo(LIBRARY)).expect("library");
    let exported = export(&rules, &Options::default());
    let refused: Vec<&str> = exported.refused.iter().map(|r| r.rule.as_str()).collect();
    // The two rules that read status (set by controllers, never by a user's write) are the
    // only ones refused.
    assert_eq!(
        refused,
        ["public-services-use-tls", "sources-have-resolved-sink"]
    );
    assert_eq!(exported.policies.len(), 8);
    let objects = fixture_objects();
    assert!(objects.len() > 60, "{} objects", objects.len());
    let mut disagreements = Vec::new();
    let mut seen: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for policy in &exported.policies {
        let rule = rules.iter().find(|rule| rule.name == policy.rule).unwrap();
        for (origin, object) in &objects {
            let sink = sink_verdict(rule, object);
            match &sink {
                Some(Verdict::Held) => seen.entry(&policy.rule).or_default().0 += 1,
                Some(Verdict::Broken(_)) => seen.entry(&policy.rule).or_default().1 += 1,
                _ => {}
            }
            let created = as_created(object);
            // On CREATE the sink would judge the object without its status: the rule reads none.
            let sink_on_create = sink_verdict(rule, &created);
            let on_create = evaluate(policy, &request("CREATE", &created, None, USER));
            if !agree(&sink_on_create, &on_create) {
                disagreements.push(format!(
                    "{} on CREATE {origin}: sink {sink_on_create:?}, policy {on_create:?}",
                    policy.rule
                ));
            }
            // An update from the object as it is, and from a first version without labels,
            // annotations or data (what the object selector and the defaults read).
            let mut bare = object.clone();
            for (parent, key) in [("metadata", "labels"), ("metadata", "annotations")] {
                if let Some(map) = bare[parent].as_object_mut() {
                    map.remove(key);
                }
            }
            if let Some(map) = bare.as_object_mut() {
                map.remove("data");
            }
            for old in [object, &bare] {
                let on_update = evaluate(policy, &request("UPDATE", object, Some(old), USER));
                if !agree(&sink, &on_update) {
                    disagreements.push(format!(
                        "{} on UPDATE {origin} (from {}): sink {sink:?}, policy {on_update:?}",
                        policy.rule,
                        if old == object {
                            "itself"
                        } else {
                            "a bare version"
                        }
                    ));
                }
            }
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    for policy in &exported.policies {
        let (held, broken) = seen.get(policy.rule.as_str()).copied().unwrap_or_default();
        assert!(
            held > 0 && broken > 0,
            "{}: held {held}, broken {broken}",
            policy.rule
        );
    }
}

/// The library's rule `name`, exported.
fn exported(name: &str) -> (drift_core::classify::invariants::Invariant, Policy) {
    let rules = load_rules_file(&repo(LIBRARY)).expect("library");
    let rule = rules.iter().find(|rule| rule.name == name).unwrap().clone();
    let export = export(std::slice::from_ref(&rule), &Options::default());
    (rule, export.policies[0].clone())
}

#[test]
fn absent_annotations_are_read_as_none_not_as_an_error() {
    // A Broker created without annotations: the API server has no `metadata.annotations`;
    // the sink binds an empty map.
    let (rule, policy) = exported("broker-class-approved");
    let broker = json!({"apiVersion": "eventing.knative.dev/v1", "kind": "Broker",
        "metadata": {"name": "default", "namespace": "shop", "uid": "u", "resourceVersion": "1"},
        "spec": {}});
    let sink = sink_verdict(&rule, &broker);
    let decision = evaluate(&policy, &request("CREATE", &broker, None, USER));
    assert_eq!(
        sink,
        Some(Verdict::Broken(
            "no eventing.knative.dev/broker.class annotation".into()
        ))
    );
    assert!(agree(&sink, &decision), "{decision:?}");
    assert!(
        policy.expression.contains("variables.objectAnnotations"),
        "{}",
        policy.expression
    );
    // The rule as written fails in the API server on that object (no such key).
    let verbatim = Policy {
        expression: rule.condition.source().to_string(),
        message_expression: None,
        variables: Vec::new(),
        ..policy.clone()
    };
    assert!(matches!(
        evaluate(&verbatim, &request("CREATE", &broker, None, USER)),
        Decision::Failed(_)
    ));
}

#[test]
fn the_object_selector_judges_the_object_as_it_is_now() {
    // The object selector matches when the old object carries the labels; the sink selects on
    // the object: an update that drops `tier: critical` is not judged.
    let (rule, policy) = exported("critical-services-keep-warm");
    let old = json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service",
        "metadata": {"name": "shop", "namespace": "shop", "labels": {"tier": "critical"}},
        "spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
    let mut new = old.clone();
    new["metadata"]["labels"] = json!({"tier": "batch"});
    assert_eq!(sink_verdict(&rule, &new), None);
    assert_eq!(
        evaluate(&policy, &request("UPDATE", &new, Some(&old), USER)),
        Decision::NotMatched
    );
    let without = Policy {
        match_conditions: Vec::new(),
        ..policy.clone()
    };
    assert!(matches!(
        evaluate(&without, &request("UPDATE", &new, Some(&old), USER)),
        Decision::Refused(_)
    ));
    // Still critical: judged, and broken as the sink breaks it.
    let sink = sink_verdict(&rule, &old);
    assert!(agree(
        &sink,
        &evaluate(&policy, &request("UPDATE", &old, Some(&old), USER))
    ));
    assert!(matches!(sink, Some(Verdict::Broken(_))));
}

#[test]
fn a_rule_that_reads_the_old_object_is_not_judged_on_create() {
    let rules = parse_rules_text(
        r#"
- name: no-shrink
  match: {apiVersion: "apps/v1", kind: Deployment}
  expression: "object.spec.replicas >= oldObject.spec.replicas"
  message: "replicas went down"
"#,
    )
    .unwrap();
    let policy = export(&rules, &Options::default()).policies.remove(0);
    let old = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "n"}, "spec": {"replicas": 3}});
    let mut fewer = old.clone();
    fewer["spec"]["replicas"] = json!(1);
    // On CREATE `oldObject` is null: without the match condition the rule would fail there.
    assert_eq!(
        evaluate(&policy, &request("CREATE", &old, None, USER)),
        Decision::NotMatched
    );
    let without = Policy {
        match_conditions: Vec::new(),
        ..policy.clone()
    };
    assert!(matches!(
        evaluate(&without, &request("CREATE", &old, None, USER)),
        Decision::Failed(_)
    ));
    assert_eq!(
        evaluate(&policy, &request("UPDATE", &fewer, Some(&old), USER)),
        Decision::Refused("replicas went down".into())
    );
    assert_eq!(
        evaluate(&policy, &request("UPDATE", &old, Some(&fewer), USER)),
        Decision::Allowed
    );
}

/// An AdmissionReview v1 as the API server sends it, read into a request.
fn from_review(review: &Value) -> Request {
    let request = &review["request"];
    let text = |pointer: &str| {
        request
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let namespace = text("/namespace");
    Request {
        operation: text("/operation"),
        group: text("/resource/group"),
        version: text("/resource/version"),
        resource: text("/resource/resource"),
        kind: text("/kind/kind"),
        sub_resource: text("/subResource"),
        name: text("/name"),
        namespace_labels: BTreeMap::from([(
            "kubernetes.io/metadata.name".to_string(),
            namespace.clone(),
        )]),
        namespace,
        username: text("/userInfo/username"),
        groups: request["userInfo"]["groups"]
            .as_array()
            .map(|groups| {
                groups
                    .iter()
                    .filter_map(|g| g.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        object: request.get("object").filter(|o| !o.is_null()).cloned(),
        old_object: request.get("oldObject").filter(|o| !o.is_null()).cloned(),
    }
}

/// An UPDATE AdmissionReview of `object` (after) over `old` by `user`, on `sub_resource`.
fn update_review(object: &Value, old: &Value, user: &str, sub_resource: &str) -> Value {
    update_review_by(object, old, user, &["system:authenticated"], sub_resource)
}

/// [`update_review`] by a user in `groups`.
fn update_review_by(
    object: &Value,
    old: &Value,
    user: &str,
    groups: &[&str],
    sub_resource: &str,
) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap();
    let mut request = json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": plural(kind)},
        "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
        "operation": "UPDATE",
        "userInfo": {"username": user, "groups": groups},
        "object": object, "oldObject": old, "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
    });
    if !sub_resource.is_empty() {
        request["subResource"] = json!(sub_resource);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

#[cfg(feature = "cluster")]
#[test]
fn protect_managed_stops_hand_edits_of_what_knative_owns_and_lets_its_controllers_through() {
    let policy = protect_managed(&["system:serviceaccount:ops:argocd".to_string()]);
    let world = crate::fake_cluster::world::drill_world();
    let find = |kind: &str| world.iter().find(|o| o["kind"] == kind).unwrap().clone();
    let deployment = find("Deployment");
    let mut edited = deployment.clone();
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("evil/image:latest");
    let decide = |review: Value| evaluate(&policy, &from_review(&review));
    // A user's `kubectl edit` of a Revision's Deployment.
    match decide(update_review(&edited, &deployment, USER, "")) {
        Decision::Refused(message) => {
            assert!(
                message.contains("Deployment drills/hello-00001-deployment is managed by Knative"),
                "{message}"
            );
            assert!(message.contains(USER), "{message}");
        }
        other => panic!("{other:?}"),
    }
    for user in [
        "system:serviceaccount:knative-serving:controller",
        "system:serviceaccount:kube-system:generic-garbage-collector",
        "system:serviceaccount:ops:argocd",
    ] {
        assert_eq!(
            decide(update_review(&edited, &deployment, user, "")),
            Decision::NotMatched,
            "{user}"
        );
    }
    // Status and scale writes are never matched.
    for sub_resource in ["status", "scale"] {
        assert_eq!(
            decide(update_review(&edited, &deployment, USER, sub_resource)),
            Decision::NotMatched
        );
    }
    // An unowned Deployment is the team's own.
    let mut unowned = deployment.clone();
    unowned["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    let mut unowned_edit = edited.clone();
    unowned_edit["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    assert_eq!(
        decide(update_review(&unowned_edit, &unowned, USER, "")),
        Decision::NotMatched
    );
    // Removing the owner reference in the edit does not escape it: the stored object is read.
    assert!(matches!(
        decide(update_review(&unowned_edit, &deployment, USER, "")),
        Decision::Refused(_)
    ));
    // Knative's ConfigMaps: a hand edit of config-autoscaler is refused, the operator's is not.
    let config = world
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "config-autoscaler")
        .unwrap()
        .clone();
    let mut changed = config.clone();
    changed["data"]["enable-scale-to-zero"] = json!("false");
    assert!(matches!(
        decide(update_review(&changed, &config, USER, "")),
        Decision::Refused(_)
    ));
    assert_eq!(
        decide(update_review(
            &changed,
            &config,
            "system:serviceaccount:knative-operator:knative-operator",
            ""
        )),
        Decision::NotMatched
    );
    // The real CREATE review GKE sent (a Pod): creating is never matched.
    let gke: Value = serde_json::from_str(
        &std::fs::read_to_string(repo(
            "tests/fixtures/admission/AdmissionReview-v1-CREATE-Pod-gke.json",
        ))
        .expect("the GKE review"),
    )
    .unwrap();
    let create = from_review(&gke);
    assert_eq!(create.operation, "CREATE");
    assert_eq!(evaluate(&policy, &create), Decision::NotMatched);
}

fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_drift-sentinel"));
    // `--config` may come from the environment: these runs name their rules.
    command.env_remove("DRIFT_SENTINEL_CONFIG");
    command
}

#[test]
fn the_command_names_what_it_cannot_export_and_says_so_in_its_exit_code() {
    let output = binary()
        .args(["admission", "export", "--invariants", LIBRARY])
        .current_dir(repo(""))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "rule public-services-use-tls: not exportable: expression reads object.status"
        ),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
    let output = binary()
        .args([
            "admission",
            "export",
            "--invariants",
            LIBRARY,
            "--skip-unexportable",
            "--action",
            "deny",
        ])
        .current_dir(repo(""))
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout
            .matches("kind: ValidatingAdmissionPolicyBinding")
            .count(),
        8
    );
    assert!(
        stdout.contains("- Deny") && !stdout.contains("- Warn"),
        "{stdout}"
    );
    for (args, fragment) in [
        (
            vec!["--kubernetes-version", "1.29"],
            "needs Kubernetes 1.30",
        ),
        (
            vec!["--kubernetes-version", "two"],
            "not a Kubernetes version",
        ),
        (
            vec!["--invariants", "no-such-file.yaml"],
            "no-such-file.yaml",
        ),
        (vec![], "nothing to export"),
        (
            vec!["--invariants", LIBRARY, "--rule", "no-such-rule"],
            "--rule no-such-rule",
        ),
    ] {
        let mut command = binary();
        command
            .args(["admission", "export"])
            .args(&args)
            .current_dir(repo(""));
        if args.first() == Some(&"--kubernetes-version") {
            command.args(["--invariants", LIBRARY]);
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(fragment),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The files of a directory, by name.
fn read_dir(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            (
                path.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            )
        })
        .collect()
}

#[cfg(feature = "cluster")]
#[test]
fn protect_managed_trusts_knatives_namespaces_and_owners_exactly() {
    let policy = protect_managed(&[]);
    let world = crate::fake_cluster::world::drill_world();
    let deployment = world
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap()
        .clone();
    let mut edited = deployment.clone();
    edited["spec"]["replicas"] = json!(3);
    let decide = |review: Value| evaluate(&policy, &from_review(&review));
    // A controller installed in knative-serving (Kourier's) is let through by its group...
    assert_eq!(
        decide(update_review_by(
            &edited,
            &deployment,
            "system:serviceaccount:knative-serving:net-kourier",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:knative-serving"
            ],
            "",
        )),
        Decision::NotMatched
    );
    // ...a look-alike namespace's is not.
    assert!(matches!(
        decide(update_review_by(
            &edited,
            &deployment,
            "system:serviceaccount:knative-serving-x:bot",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:knative-serving-x"
            ],
            "",
        )),
        Decision::Refused(_)
    ));
    // An owner in a look-alike group is not Knative's.
    let mut foreign = deployment.clone();
    foreign["metadata"]["ownerReferences"][0]["apiVersion"] = json!("evilknative.dev/v1");
    let mut foreign_edit = edited.clone();
    foreign_edit["metadata"]["ownerReferences"][0]["apiVersion"] = json!("evilknative.dev/v1");
    assert_eq!(
        decide(update_review(&foreign_edit, &foreign, USER, "")),
        Decision::NotMatched
    );
    // Endpoints a Knative object owns (a ServerlessService's) are covered.
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "hello-00001", "namespace": "drills",
            "ownerReferences": [{"apiVersion": "networking.internal.knative.dev/v1alpha1",
                "kind": "ServerlessService", "name": "hello-00001", "uid": "u", "controller": true}]},
        "subsets": []});
    let mut changed = endpoints.clone();
    changed["subsets"] = json!([{"addresses": [{"ip": "10.0.0.9"}]}]);
    assert!(matches!(
        decide(update_review(&changed, &endpoints, USER, "")),
        Decision::Refused(_)
    ));
}

/// `admission export` of the example rules (the exportable ones) into `dir`.
fn export_into(dir: &Path) -> std::process::Output {
    binary()
        .args(["admission", "export", "--invariants", LIBRARY])
        .args(["--skip-unexportable", "--out"])
        .arg(dir)
        .current_dir(repo(""))
        .output()
        .unwrap()
}

#[test]
fn the_shipped_component_is_what_the_command_writes_from_the_example_rules() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("admission");
    let output = export_into(&dir);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written = read_dir(&dir);
    assert_eq!(written.len(), 9, "{:?}", written.keys());
    assert!(written["kustomization.yaml"].contains("kind: Component"));
    let shipped = read_dir(&repo("k8s/components/admission"));
    let stale: Vec<&String> = shipped
        .keys()
        .chain(written.keys())
        .filter(|name| shipped.get(*name) != written.get(*name))
        .collect();
    assert!(
        stale.is_empty(),
        "k8s/components/admission/ is stale ({stale:?}): regenerate it with `rm -r \
         k8s/components/admission && drift-sentinel admission export --invariants \
         examples/invariants/knative.yaml --skip-unexportable --out k8s/components/admission`"
    );
    // A second run into the same directory is refused, never merged.
    assert_eq!(export_into(&dir).status.code(), Some(2));
}
