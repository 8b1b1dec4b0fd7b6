//! The catalog's validation and the drill requests, on a real Knative Service (the katacoda
//! `greeter` fixture): an injection applied as the API server would (RFC 7386 / RFC 6902), then
//! its restore applied on top, must give the object back as it was, and touch nothing else.

use serde_json::{json, Value};

use super::plan::{injection, restore};
use super::*;

fn greeter() -> Value {
    serde_saphyr::from_str(include_str!(
        "../../../../tests/fixtures/knative/serving/openshift-labs-learn-katacoda__serverless-05-knative-client__ksvc-greeter.yaml"
    ))
    .expect("the fixture is YAML")
}

const CATALOG: &str = r#"
drills:
  - name: traffic-hand-edit
    target: {apiVersion: serving.knative.dev/v1, kind: Service, namespace: knativetutorial, name: greeter}
    inject:
      mergePatch: {spec: {traffic: [{latestRevision: true, percent: 80}, {revisionName: greeter-00001, percent: 20}]}, metadata: {labels: {drill: "yes"}}}
    expect: {class: manual_edit, within: 60s, severity: warning}
  - name: image-hand-edit
    target: {apiVersion: serving.knative.dev/v1, kind: Service, namespace: knativetutorial, name: greeter}
    inject:
      jsonPatch: [{op: replace, path: /spec/template/spec/containers/0/image, value: "quay.io/rhdevelopers/knative-tutorial-greeter:latest"}]
    expect: {rule: no-latest, within: 2m}
    then: {expectRepaired: {within: 5m}}
  - name: deleted
    target: {apiVersion: serving.knative.dev/v1, kind: Service, namespace: knativetutorial, name: greeter}
    inject: {delete: true}
    expect: {class: unexpected_delete, within: 2m}
    then: keep
"#;

fn target() -> Target {
    Target {
        api_version: "serving.knative.dev/v1".into(),
        kind: "Service".into(),
        namespace: "knativetutorial".into(),
        name: "greeter".into(),
    }
}

/// RFC 7386.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let map = target.as_object_mut().unwrap();
    for (key, value) in members {
        if value.is_null() {
            map.remove(key);
        } else {
            merge(map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// RFC 6902, the operations drills use (add and remove in maps and lists, `-` appends).
fn json_patch(target: &mut Value, ops: &Value) {
    for op in ops.as_array().unwrap() {
        let path = op["path"].as_str().unwrap();
        let (parent, last) = path.rsplit_once('/').unwrap();
        let last = last.replace("~1", "/").replace("~0", "~");
        match op["op"].as_str().unwrap() {
            "test" => assert_eq!(target.pointer(path), Some(&op["value"]), "test {path}"),
            "replace" => *target.pointer_mut(path).unwrap() = op["value"].clone(),
            "add" => match target.pointer_mut(parent).unwrap() {
                Value::Object(members) => {
                    members.insert(last, op["value"].clone());
                }
                Value::Array(items) if last == "-" => items.push(op["value"].clone()),
                Value::Array(items) => items.insert(last.parse().unwrap(), op["value"].clone()),
                other => panic!("add into {other}"),
            },
            "remove" => match target.pointer_mut(parent).unwrap() {
                Value::Object(members) => {
                    members.remove(&last);
                }
                Value::Array(items) => {
                    items.remove(last.parse::<usize>().unwrap());
                }
                other => panic!("remove from {other}"),
            },
            other => panic!("{other}"),
        }
    }
}

/// Injects `inject` into `kept`, lets `meanwhile` change it, restores, and returns the object.
fn round_trip(kept: &Value, inject: Inject, meanwhile: impl FnOnce(&mut Value)) -> Value {
    let injected = injection(&target(), &inject, Some(kept));
    let mut live = kept.clone();
    match &inject {
        Inject::MergePatch(_) => merge(&mut live, &injected.body),
        Inject::JsonPatch(_) => json_patch(&mut live, &injected.body),
        _ => unreachable!(),
    }
    meanwhile(&mut live);
    let back = restore(&target(), &inject, Some(kept), Some(&live)).unwrap();
    merge(&mut live, &back.body);
    live
}

#[test]
fn a_catalog_loads_with_its_defaults() {
    let catalog = parse(CATALOG).unwrap();
    assert_eq!(catalog.drills.len(), 3);
    let first = &catalog.drills[0];
    assert_eq!(first.target, target());
    assert_eq!(first.then, Then::Restore);
    assert_eq!(first.expect.class, "manual_edit");
    assert_eq!(first.expect.within, std::time::Duration::from_secs(60));
    assert_eq!(catalog.drills[1].expect.class, "invariant");
    assert_eq!(catalog.drills[1].expect.rule.as_deref(), Some("no-latest"));
    assert_eq!(
        catalog.drills[1].then,
        Then::ExpectRepaired(std::time::Duration::from_secs(300))
    );
    assert_eq!(catalog.drills[2].inject, Inject::Delete);
    assert_eq!(catalog.drills[2].then, Then::Keep);
}

#[test]
fn every_mistake_names_its_key() {
    let drill = |body: &str| {
        format!(
            "drills:\n  - name: d\n    target: {{apiVersion: v1, kind: ConfigMap, namespace: n, name: c}}\n{body}"
        )
    };
    let cases = [
        (
            drill("    inject: {delete: true, mergePatch: {data: {a: b}}}\n    expect: {class: config_drift, within: 1m}\n"),
            "drills[0].inject: exactly one of",
        ),
        (
            drill("    inject: {}\n    expect: {class: config_drift, within: 1m}\n"),
            "drills[0].inject: exactly one of",
        ),
        (
            drill("    inject: {delete: true}\n    expect: {class: nonsense, within: 1m}\n"),
            "drills[0].expect.class: unknown class \"nonsense\"",
        ),
        (
            drill("    inject: {delete: true}\n    expect: {class: manual_edit, rule: r, within: 1m}\n"),
            "drills[0].expect: class or rule, not both",
        ),
        (
            drill("    inject: {delete: true}\n    expect: {class: manual_edit, within: 0s}\n"),
            "drills[0].expect.within: must be positive",
        ),
        (
            drill("    inject: {delete: true}\n    expect: {class: manual_edit, within: 1m, severity: loud}\n"),
            "drills[0].expect.severity: unknown severity \"loud\"",
        ),
        (
            drill("    inject: {jsonPatch: [{op: move, from: /data/a, path: /data/b}]}\n    expect: {class: config_drift, within: 1m}\n"),
            "drills[0].inject.jsonPatch[0].op: \"move\"",
        ),
        (
            drill("    inject: {mergePatch: {metadata: {name: other}}}\n    expect: {class: config_drift, within: 1m}\n"),
            "drills[0].inject.mergePatch.metadata.name: cannot rename",
        ),
        (
            drill("    inject: {delete: true}\n    expect: {class: manual_edit, within: 1m}\n    then: forever\n"),
            "drills[0].then: use restore (the default), keep or {expectRepaired: {within: 5m}}",
        ),
        (
            drill("    inject: {delete: true}\n    expect: {class: manual_edit, within: 1m}\n    then: {expectRepaired: {}}\n"),
            "drills[0].then.expectRepaired.within: is required",
        ),
        (
            drill("    inject: {mergePatch: {data: {a: b}, metadata: {}}}\n    expect: {class: config_drift, within: 1m}\n"),
            "drills[0].inject.mergePatch.metadata: an empty object changes nothing",
        ),
        (
            drill("    inject: {mergePatch: {spec: {template: {}}}}\n    expect: {class: config_drift, within: 1m}\n"),
            "drills[0].inject.mergePatch.spec.template: an empty object changes nothing",
        ),
        (
            drill("    inject: {delete: true}\n    expect: {class: manual_edit, within: 1m}\n    affects: [{apiVersion: v1, kind: Secret, name: s}]\n"),
            "drills[0].affects[0].kind: Secrets are never drilled",
        ),
        (
            "drills:\n  - name: s\n    target: {apiVersion: v1, kind: Secret, namespace: n, name: s}\n    inject: {delete: true}\n    expect: {class: unexpected_delete, within: 1m}\n".to_string(),
            "drills[0].target.kind: Secrets are never drilled",
        ),
        (
            "drills:\n  - name: s\n    target: {apiVersion: v1, kind: ConfigMap, name: s}\n    inject: {delete: true}\n    expect: {class: unexpected_delete, within: 1m}\n".to_string(),
            "drills[0].target.namespace: is required",
        ),
        (
            format!("{}  - name: d\n    target: {{apiVersion: v1, kind: ConfigMap, namespace: n, name: c}}\n    inject: {{delete: true}}\n    expect: {{class: manual_edit, within: 1m}}\n", drill("    inject: {delete: true}\n    expect: {class: manual_edit, within: 1m}\n")),
            "drills[1].name: another drill is named \"d\"",
        ),
        (
            drill("    inject: {delete: true}\n    expect: {class: manual_edit, within: 1m}\n    surprise: 1\n"),
            "the drill catalog: ",
        ),
    ];
    for (text, wanted) in cases {
        let error = parse(&text).unwrap_err().to_string();
        assert!(
            error.starts_with(wanted),
            "{text}\nwanted {wanted:?}\ngot {error:?}"
        );
    }
}

#[test]
fn a_merge_patch_drill_is_restored_exactly_and_only_where_it_wrote() {
    let catalog = parse(CATALOG).unwrap();
    let drill = &catalog.drills[0];
    let kept = greeter();
    let inject = injection(&drill.target, &drill.inject, Some(&kept));
    assert_eq!(inject.method, "PATCH");
    assert_eq!(
        inject.path,
        "/apis/serving.knative.dev/v1/namespaces/knativetutorial/services/greeter?fieldManager=drift-sentinel-drill"
    );
    assert_eq!(inject.body["metadata"]["resourceVersion"], "35193");
    let mut live = kept.clone();
    merge(&mut live, &inject.body);
    assert_eq!(live["spec"]["traffic"][1]["percent"], 20);
    // Meanwhile Knative writes the status and bumps the version; someone adds an annotation.
    live["metadata"]["resourceVersion"] = json!("35200");
    live["metadata"]["annotations"]["team"] = json!("payments");
    live["status"]["observedGeneration"] = json!(3);
    let back = restore(&drill.target, &drill.inject, Some(&kept), Some(&live)).unwrap();
    assert_eq!(back.method, "PATCH");
    assert_eq!(back.body["metadata"]["resourceVersion"], "35200");
    assert_eq!(back.resource_version.as_deref(), Some("35200"));
    merge(&mut live, &back.body);
    assert_eq!(live["spec"], kept["spec"]);
    // The label the drill added is gone; what others wrote stays.
    assert_eq!(
        live["metadata"]["labels"].get("drill"),
        None,
        "{}",
        back.body
    );
    // The kept object had no labels: the drill's key goes, by key (the API server drops the
    // empty map), and a label someone adds later is not the drill's to remove.
    assert_eq!(back.body["metadata"]["labels"], json!({"drill": null}));
    assert!(back.body["metadata"]
        .as_object()
        .unwrap()
        .contains_key("labels"));
    assert_eq!(live["metadata"]["annotations"]["team"], "payments");
    assert_eq!(live["status"]["observedGeneration"], 3);
}

#[test]
fn a_json_patch_drill_tests_the_version_first_and_is_restored_at_its_list() {
    let catalog = parse(CATALOG).unwrap();
    let drill = &catalog.drills[1];
    let kept = greeter();
    let inject = injection(&drill.target, &drill.inject, Some(&kept));
    assert_eq!(inject.content_type, "application/json-patch+json");
    assert_eq!(
        inject.body[0],
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": "35193"})
    );
    let mut live = kept.clone();
    json_patch(&mut live, &inject.body);
    assert!(live["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .ends_with(":latest"));
    live["metadata"]["resourceVersion"] = json!("35300");
    let back = restore(&drill.target, &drill.inject, Some(&kept), Some(&live)).unwrap();
    // The containers list is put back whole (a merge patch replaces lists).
    assert_eq!(
        back.body["spec"]["template"]["spec"]["containers"],
        kept["spec"]["template"]["spec"]["containers"]
    );
    merge(&mut live, &back.body);
    assert_eq!(live["spec"], kept["spec"]);
}

#[test]
fn a_deleted_target_is_created_again_without_server_fields_and_a_created_one_deleted() {
    let catalog = parse(CATALOG).unwrap();
    let drill = &catalog.drills[2];
    let kept = greeter();
    let inject = injection(&drill.target, &drill.inject, Some(&kept));
    assert_eq!(inject.method, "DELETE");
    assert_eq!(
        inject.body["preconditions"],
        json!({"uid": "c4ee1f47-b77f-11e9-96b1-22e0f431a3ed", "resourceVersion": "35193"})
    );
    let back = restore(&drill.target, &drill.inject, Some(&kept), None).unwrap();
    assert_eq!(back.method, "POST");
    assert_eq!(
        back.path,
        "/apis/serving.knative.dev/v1/namespaces/knativetutorial/services?fieldManager=drift-sentinel-drill"
    );
    for server_field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "selfLink",
    ] {
        assert!(
            back.body["metadata"].get(server_field).is_none(),
            "{server_field}"
        );
    }
    assert!(back.body.get("status").is_none());
    assert_eq!(back.body["spec"], kept["spec"]);

    // A created target is deleted again, on the uid it got.
    let create = Inject::Create(
        json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service",
                                        "metadata": {"name": "greeter"}, "spec": kept["spec"]}),
    );
    let post = injection(&target(), &create, None);
    assert_eq!(post.method, "POST");
    assert_eq!(post.body["metadata"]["namespace"], "knativetutorial");
    let mut created = post.body.clone();
    created["metadata"]["uid"] = json!("new-uid");
    let undo = restore(&target(), &create, None, Some(&created)).unwrap();
    assert_eq!(undo.method, "DELETE");
    assert_eq!(undo.body["preconditions"], json!({"uid": "new-uid"}));
    assert_eq!(restore(&target(), &create, None, None), None);
}

#[test]
fn restores_give_the_object_back_in_the_shapes_that_break_naive_ones() {
    let kept = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "c", "namespace": "n", "resourceVersion": "5",
                                   "labels": {"app": "x", "a/b": "1", "c~d": "2"}},
                      "data": {"a": "b"}, "spec": {"a": 1, "list": [1, 2]}});
    let versionless = |value: &Value| {
        let mut value = value.clone();
        value["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        value
    };
    let cases: Vec<(&str, Inject)> = vec![
        // An object the kept one lacks is removed whole (no empty map left behind).
        (
            "new nested object",
            Inject::MergePatch(json!({"spec": {"delivery": {"deadLetterSink": {"uri": "x"}}}})),
        ),
        // A numeric map key is a key, not a list index.
        (
            "numeric data key",
            Inject::MergePatch(json!({"data": {"8080": "x"}})),
        ),
        // Keys with / and ~ (label keys have them).
        (
            "escaped label keys",
            Inject::MergePatch(
                json!({"metadata": {"labels": {"a/b": "9", "c~d": null, "e/f": "new"}}}),
            ),
        ),
        // A field removed by a null comes back.
        (
            "nulled field",
            Inject::MergePatch(json!({"spec": {"a": null}})),
        ),
        // A whole map replaced: the members the injection added go, the old ones come back.
        (
            "replaced map",
            Inject::JsonPatch(vec![
                json!({"op": "replace", "path": "/metadata/labels", "value": {"drill": "yes"}}),
            ]),
        ),
        // Overlapping pointers: the ancestor's restore covers the child.
        (
            "overlapping",
            Inject::JsonPatch(vec![
                json!({"op": "add", "path": "/spec/x", "value": {"y": 0}}),
                json!({"op": "replace", "path": "/spec/x/y", "value": 1}),
            ]),
        ),
        // A list appended to and an item added at an index: the list comes back whole.
        (
            "list",
            Inject::JsonPatch(vec![
                json!({"op": "add", "path": "/spec/list/-", "value": 3}),
                json!({"op": "add", "path": "/spec/list/0", "value": 0}),
            ]),
        ),
        // A whole map removed.
        (
            "removed map",
            Inject::JsonPatch(vec![json!({"op": "remove", "path": "/data"})]),
        ),
    ];
    for (name, inject) in cases {
        let back = round_trip(&kept, inject, |live| {
            live["metadata"]["resourceVersion"] = json!("6");
            live["metadata"]["annotations"] = json!({"someone": "else"});
        });
        let mut expected = kept.clone();
        expected["metadata"]["annotations"] = json!({"someone": "else"});
        assert_eq!(versionless(&back), versionless(&expected), "{name}");
    }
}

#[test]
fn catalog_checks_close_the_ways_around_them() {
    let one = |target: &str, inject: &str| {
        parse(&format!(
            "drills:\n  - name: d\n    target: {target}\n    inject: {inject}\n    expect: {{class: manual_edit, within: 1m}}\n"
        ))
        .map(|_| ())
        .map_err(|error| error.to_string())
    };
    let cm = "{apiVersion: v1, kind: ConfigMap, namespace: n, name: c}";
    for (target, inject, wanted) in [
        (
            "{apiVersion: v1, kind: secret, namespace: n, name: s}",
            "{delete: true}",
            "drills[0].target.kind: Secrets are never drilled",
        ),
        (
            "{apiVersion: v1, kind: SECRET, namespace: n, name: s}",
            "{delete: true}",
            "drills[0].target.kind: Secrets are never drilled",
        ),
        (
            "{apiVersion: v1, kind: Namespace, namespace: n, name: s}",
            "{delete: true}",
            "drills[0].target.kind: Namespace is cluster-scoped",
        ),
        (
            "{apiVersion: v1, kind: ConfigMap, namespace: n, name: ..}",
            "{delete: true}",
            "drills[0].target.name: \"..\" is not",
        ),
        (
            "{apiVersion: v1, kind: ConfigMap, namespace: N_s, name: c}",
            "{delete: true}",
            "drills[0].target.namespace: \"N_s\" is not",
        ),
        (
            "{apiVersion: v1, kind: \"Config/Map\", namespace: n, name: c}",
            "{delete: true}",
            "drills[0].target.kind: \"Config/Map\" is not a kind",
        ),
        (
            cm,
            "{jsonPatch: [{op: replace, path: /metadata, value: {name: other}}]}",
            "drills[0].inject.jsonPatch[0].path: \"/metadata\" rewrites",
        ),
        (
            cm,
            "{jsonPatch: [{op: replace, path: /metadata/namespace, value: kube-system}]}",
            "drills[0].inject.jsonPatch[0].path",
        ),
        (
            cm,
            "{jsonPatch: [{op: test, path: /data/a, value: b}]}",
            "drills[0].inject.jsonPatch: only test operations",
        ),
        (
            cm,
            "{jsonPatch: [{op: add, path: /data/x}]}",
            "drills[0].inject.jsonPatch[0].value: add needs a value",
        ),
        (
            cm,
            "{mergePatch: {metadata: null}}",
            "drills[0].inject.mergePatch.metadata: must be an object",
        ),
        (
            cm,
            "{mergePatch: {metadata: {uid: x}}}",
            "drills[0].inject.mergePatch.metadata.uid",
        ),
    ] {
        let error = one(target, inject).unwrap_err();
        assert!(
            error.starts_with(wanted),
            "{target} {inject}\nwanted {wanted:?}\ngot {error:?}"
        );
    }
    assert_eq!(
        one(cm, "{mergePatch: {metadata: {labels: {drill: \"yes\"}}}}"),
        Ok(())
    );
}

#[test]
fn a_change_after_the_drill_is_named_and_a_repair_is_recognised() {
    let kept = greeter();
    let inject = Inject::MergePatch(json!({
        "spec": {"traffic": [{"latestRevision": true, "percent": 80}, {"revisionName": "greeter-00001", "percent": 20}]},
        "metadata": {"labels": {"drill": "yes"}}
    }));
    let mut injected = kept.clone();
    merge(
        &mut injected,
        &injection(&target(), &inject, Some(&kept)).body,
    );
    // Status and an untouched field moving on is nobody's change to what the drill wrote.
    let mut current = injected.clone();
    current["status"]["observedGeneration"] = json!(99);
    current["metadata"]["annotations"] = json!({"other": "team"});
    assert!(plan::foreign_changes(&inject, Some(&kept), &injected, Some(&current)).is_empty());
    assert!(!plan::repaired(&inject, Some(&kept), Some(&current)));
    // Someone set the traffic to something else again: named, not written over.
    current["spec"]["traffic"] = json!([{"latestRevision": true, "percent": 100, "tag": "theirs"}]);
    assert_eq!(
        plan::foreign_changes(&inject, Some(&kept), &injected, Some(&current)),
        vec!["/spec/traffic".to_string()]
    );
    // Put back as kept by someone else (remediation, GitOps): not foreign, and repaired once
    // the label is gone too.
    current["spec"]["traffic"] = kept["spec"]["traffic"].clone();
    assert!(plan::foreign_changes(&inject, Some(&kept), &injected, Some(&current)).is_empty());
    assert!(!plan::repaired(&inject, Some(&kept), Some(&current)));
    current["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("drill");
    assert!(plan::repaired(&inject, Some(&kept), Some(&current)));
    // A label key with a slash is named by its escaped pointer (on an object with labels: the
    // greeter has none, and its whole `labels` would be the point).
    let mut kept = kept;
    kept["metadata"]["labels"] = json!({"app": "greeter"});
    let label = Inject::MergePatch(
        json!({"metadata": {"labels": {"networking.knative.dev/visibility": "cluster-local"}}}),
    );
    let mut labelled = kept.clone();
    merge(
        &mut labelled,
        &injection(&target(), &label, Some(&kept)).body,
    );
    let mut theirs = labelled.clone();
    theirs["metadata"]["labels"]["networking.knative.dev/visibility"] = json!("public");
    assert_eq!(
        plan::foreign_changes(&label, Some(&kept), &labelled, Some(&theirs)),
        vec!["/metadata/labels/networking.knative.dev~1visibility".to_string()]
    );
    // Deleted: repaired when it exists again; created: when it is gone, and a namesake of
    // another uid is someone else's.
    assert!(!plan::repaired(&Inject::Delete, Some(&kept), None));
    // The kept object itself, held by a finalizer, is not a repair; another one is, unless it
    // is on its way out too.
    assert!(!plan::repaired(&Inject::Delete, Some(&kept), Some(&kept)));
    let mut terminating = kept.clone();
    terminating["metadata"]["deletionTimestamp"] = json!("2026-12-05T10:00:00Z");
    assert!(!plan::repaired(
        &Inject::Delete,
        Some(&kept),
        Some(&terminating)
    ));
    let mut again = kept.clone();
    again["metadata"]["uid"] = json!("made-again");
    assert!(plan::repaired(&Inject::Delete, Some(&kept), Some(&again)));
    again["metadata"]["deletionTimestamp"] = json!("2026-12-05T10:00:00Z");
    assert!(!plan::repaired(&Inject::Delete, Some(&kept), Some(&again)));
    let create = Inject::Create(json!({"kind": "Service"}));
    let ours = json!({"metadata": {"uid": "a"}});
    let theirs = json!({"metadata": {"uid": "b"}});
    assert!(plan::repaired(&create, None, None));
    assert!(!plan::repaired(&create, None, Some(&ours)));
    assert!(plan::foreign_changes(&create, None, &ours, Some(&ours)).is_empty());
    assert_eq!(
        plan::foreign_changes(&create, None, &ours, Some(&theirs)),
        vec!["/metadata/uid".to_string()]
    );
}

#[test]
fn an_injection_worked_out_here_is_what_the_api_server_makes_of_it() {
    let kept = greeter();
    let merge_inject = Inject::MergePatch(json!({
        "spec": {"traffic": [{"latestRevision": true, "percent": 80}]},
        "metadata": {"labels": {"drill": "yes"}, "annotations": null}
    }));
    let mut applied = kept.clone();
    merge(
        &mut applied,
        &injection(&target(), &merge_inject, Some(&kept)).body,
    );
    let mut local = plan::injected_locally(&merge_inject, &kept).unwrap();
    // The request carries the version read; the local result keeps it too.
    assert_eq!(local, applied);
    let ops = vec![
        json!({"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "x:1"}),
        json!({"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}),
        json!({"op": "add", "path": "/spec/template/spec/containers/-", "value": {"image": "y"}}),
        json!({"op": "remove", "path": "/spec/template/spec/containers/0"}),
    ];
    let json_inject = Inject::JsonPatch(ops);
    let mut applied = kept.clone();
    json_patch(
        &mut applied,
        &injection(&target(), &json_inject, Some(&kept)).body,
    );
    local = plan::injected_locally(&json_inject, &kept).unwrap();
    assert_eq!(local, applied);
    // What the API server would refuse cannot be worked out either.
    for op in [
        json!({"op": "test", "path": "/spec/template/spec/containers/0/image", "value": "nope"}),
        json!({"op": "remove", "path": "/spec/nothing"}),
        json!({"op": "add", "path": "/spec/template/spec/containers/9", "value": 1}),
        json!({"op": "move", "from": "/spec", "path": "/specs"}),
    ] {
        assert_eq!(
            plan::injected_locally(&Inject::JsonPatch(vec![op.clone()]), &kept),
            None,
            "{op}"
        );
    }
    assert_eq!(plan::injected_locally(&Inject::Delete, &kept), None);
}

#[test]
fn a_label_the_drill_added_to_an_object_without_labels_is_taken_back_by_key() {
    let kept = greeter();
    assert!(kept["metadata"].get("labels").is_none());
    let inject = Inject::MergePatch(json!({"metadata": {"labels": {"tier": "critical"}}}));
    let mut live = kept.clone();
    merge(&mut live, &injection(&target(), &inject, Some(&kept)).body);
    let injected = live.clone();
    // Someone labels the object while the drill runs: not the drill's change, not touched.
    live["metadata"]["labels"]["team"] = json!("payments");
    assert!(plan::foreign_changes(&inject, Some(&kept), &injected, Some(&live)).is_empty());
    let back = restore(&target(), &inject, Some(&kept), Some(&live)).unwrap();
    assert_eq!(back.body["metadata"]["labels"], json!({"tier": null}));
    merge(&mut live, &back.body);
    assert_eq!(live["metadata"]["labels"], json!({"team": "payments"}));
    // Their label stays, so the object is as kept where the drill wrote.
    assert!(plan::repaired(&inject, Some(&kept), Some(&live)));
}
