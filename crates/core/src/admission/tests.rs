use super::*;
use crate::config::parse_rules_text;

fn rules(yaml: &str) -> Vec<Invariant> {
    parse_rules_text(yaml).expect("rules compile")
}

fn one(yaml: &str) -> Result<Policy, String> {
    let export = export(&rules(yaml), &Options::default());
    match (export.policies.first(), export.refused.first()) {
        (Some(policy), None) => Ok(policy.clone()),
        (None, Some(refusal)) => Err(refusal.reason.clone()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rule_becomes_a_policy_on_its_kinds_namespaces_and_labels() {
    let policy = one(r#"
- name: keep-warm
  match: {apiVersion: "serving.knative.dev/*", kind: Service, namespaces: [shop],
          excludeNamespaces: [shop-dev], matchLabels: {tier: critical}}
  expression: "'x' in object.metadata.annotations"
  message: "no x"
"#)
    .unwrap();
    assert_eq!(policy.name, "drift-sentinel-keep-warm");
    assert_eq!(
        policy.resource_rules,
        vec![ResourceRule {
            scope: Some("Namespaced"),
            groups: vec!["serving.knative.dev".into()],
            versions: vec!["*".into()],
            resources: vec!["services".into()],
            operations: vec!["CREATE".into(), "UPDATE".into()],
        }]
    );
    assert_eq!(policy.namespaces, vec!["shop"]);
    assert_eq!(policy.excluded_namespaces, vec!["shop-dev"]);
    assert_eq!(policy.expression, "'x' in variables.objectAnnotations");
    assert_eq!(policy.variables.len(), 1);
    assert_eq!(policy.match_conditions[0].name, "labels-on-the-object");
    assert_eq!(policy.message.as_deref(), Some("no x"));
}

#[test]
fn a_rule_reading_old_object_is_judged_on_updates_only() {
    let policy = one(r#"
- name: no-shrink
  match: {apiVersion: "apps/v1", kind: Deployment}
  expression: "object.spec.replicas >= oldObject.spec.replicas"
"#)
    .unwrap();
    assert_eq!(policy.match_conditions[0].expression, "oldObject != null");
    assert_eq!(policy.resource_rules[0].groups, vec!["apps"]);
    assert_eq!(policy.resource_rules[0].resources, vec!["deployments"]);
}

#[test]
fn what_the_api_server_cannot_judge_as_the_sink_does_is_refused_with_its_reason() {
    let cases = [
        ("object.status.url.startsWith('https')", "Service", "status"),
        (
            "object.metadata.finalizers.size() == 0",
            "Service",
            "metadata.finalizers",
        ),
        ("object.spec.serviceAccountName != ''", "Pod", "Pods"),
        (
            "object.spec.template.metadata.name.reverse() != ''",
            "Service",
            "reverse",
        ),
        (
            "object.spec.a.all(x, object.spec.b.all(y, y.contains(x)))",
            "Service",
            "estimated cost",
        ),
        (
            "object.spec.a.all(object, object != '')",
            "Service",
            "binds",
        ),
        ("size(object) > 0", "Service", "whole"),
    ];
    for (expression, kind, reason) in cases {
        let api_version = if kind == "Pod" {
            "v1"
        } else {
            "serving.knative.dev/v1"
        };
        let result = one(&format!(
            "- name: r\n  match: {{apiVersion: {api_version:?}, kind: {kind}}}\n  expression: {expression:?}\n"
        ));
        let error = result.expect_err(expression);
        assert!(error.contains(reason), "{expression}: {error}");
    }
    // The strings extension's version 2 (Kubernetes 1.29) is there for a new policy from 1.30.
    let export = export(
        &rules("- name: r\n  match: {apiVersion: \"v1\", kind: ConfigMap}\n  expression: \"'%s'.format(['a']) != ''\"\n"),
        &Options::default(),
    );
    assert_eq!(export.refused, vec![], "{export:?}");
    let before = unavailable(".format", 29).expect("not on 1.29");
    assert!(before.contains("from Kubernetes 1.30"), "{before}");
    assert_eq!(unavailable(".contains", 30), None);
}

#[test]
fn globs_that_no_selector_can_express_are_refused() {
    for (selector, reason) in [
        (
            r#"{apiVersion: "*.knative.dev/v1", kind: Service}"#,
            "groups",
        ),
        (r#"{apiVersion: "v1", kind: "Config*"}"#, "kind"),
        (
            r#"{apiVersion: "v1", kind: ConfigMap, namespaces: ["team-*"]}"#,
            "namespace",
        ),
    ] {
        let error = one(&format!(
            "- name: r\n  match: {selector}\n  expression: \"object.metadata.name != ''\"\n"
        ))
        .expect_err(selector);
        assert!(error.contains(reason), "{selector}: {error}");
    }
}

#[test]
fn rules_for_named_clusters_need_the_cluster() {
    let rules = rules(
        "- name: r\n  match: {apiVersion: v1, kind: ConfigMap, clusters: [prod-*]}\n  expression: \"true\"\n",
    );
    let none = export(&rules, &Options::default());
    assert!(none.refused[0].reason.contains("--cluster"));
    let prod = export(
        &rules,
        &Options {
            cluster: Some("prod-eu".into()),
            ..Options::default()
        },
    );
    assert_eq!(prod.policies.len(), 1);
    let dev = export(
        &rules,
        &Options {
            cluster: Some("dev".into()),
            ..Options::default()
        },
    );
    assert_eq!((dev.policies.len(), dev.other_clusters.len()), (0, 1));
}

#[test]
fn the_binding_never_pairs_deny_with_warn() {
    assert_eq!(Action::Warn.validation_actions(), ["Warn", "Audit"]);
    assert_eq!(Action::Audit.validation_actions(), ["Audit"]);
    assert_eq!(Action::Deny.validation_actions(), ["Deny", "Audit"]);
}

#[test]
fn rules_whose_policies_would_share_a_name_are_refused_after_the_first() {
    let export = export(
        &rules(
            "- {name: a_b, match: {apiVersion: v1, kind: ConfigMap}, expression: \"true\"}\n\
             - {name: a-b, match: {apiVersion: v1, kind: ConfigMap}, expression: \"true\"}\n\
             - {name: protect-managed, match: {apiVersion: v1, kind: ConfigMap}, expression: \"true\"}\n",
        ),
        &Options::default(),
    );
    assert_eq!(export.policies.len(), 1);
    assert_eq!(export.policies[0].name, "drift-sentinel-a-b");
    let reasons: Vec<&str> = export.refused.iter().map(|r| r.reason.as_str()).collect();
    assert!(reasons[0].contains("as rule a_b's is"), "{reasons:?}");
    assert!(
        reasons[1].contains("as --protect-managed's is"),
        "{reasons:?}"
    );
}

#[test]
fn a_kind_that_is_already_plural_keeps_its_name() {
    let policy = one(
        "- {name: r, match: {apiVersion: v1, kind: Endpoints}, expression: \"object.metadata.name != ''\"}\n",
    )
    .unwrap();
    assert_eq!(policy.resource_rules[0].resources, vec!["endpoints"]);
    let policy = one(
        "- {name: r, match: {apiVersion: networking.k8s.io/v1, kind: Ingress}, expression: \"true\"}\n",
    )
    .unwrap();
    assert_eq!(policy.resource_rules[0].resources, vec!["ingresses"]);
}

#[test]
fn a_rule_on_named_namespaces_never_matches_cluster_scoped_objects() {
    let policy = one(
        "- {name: r, match: {namespaces: [shop]}, expression: \"object.metadata.name != 'x'\"}\n",
    )
    .unwrap();
    assert!(policy
        .resource_rules
        .iter()
        .all(|rule| rule.scope == Some("Namespaced")));
    let node = Request {
        operation: "UPDATE".into(),
        version: "v1".into(),
        resource: "nodes".into(),
        kind: "Node".into(),
        name: "x".into(),
        username: "kubelet".into(),
        object: Some(
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}}),
        ),
        ..Request::default()
    };
    assert_eq!(evaluate(&policy, &node), Decision::NotMatched);
    // Without namespaces, any scope (as the sink selects).
    let any =
        one("- {name: r, match: {kind: Node}, expression: \"object.metadata.name != 'x'\"}\n")
            .unwrap();
    assert_eq!(any.resource_rules[0].scope, None);
    assert!(matches!(evaluate(&any, &node), Decision::Refused(_)));
}

#[test]
fn api_version_globs_cover_what_the_sinks_glob_covers() {
    // `*`: every group and version, the core group's too.
    let every =
        one("- {name: r, match: {apiVersion: \"*\", kind: Deployment}, expression: \"true\"}\n")
            .unwrap();
    assert_eq!(every.resource_rules[0].groups, vec!["*"]);
    assert_eq!(every.resource_rules[0].versions, vec!["*"]);
    assert!(every.match_conditions.is_empty());
    // `*/v1`: every group's v1 but the core group's (`v1` has no `/`).
    let grouped =
        one("- {name: r, match: {apiVersion: \"*/v1\", kind: Deployment}, expression: \"true\"}\n")
            .unwrap();
    assert_eq!(
        grouped.match_conditions[0].expression,
        "request.resource.group != ''"
    );
}

#[test]
fn a_configmaps_data_is_read_as_the_sink_reads_it_or_left_to_the_sink() {
    let policy = one(
        "- {name: r, match: {apiVersion: v1, kind: ConfigMap}, expression: \"'must' in object.data\", message: gone}\n",
    )
    .unwrap();
    assert_eq!(policy.expression, "'must' in variables.objectData");
    let request = |object: serde_json::Value| Request {
        operation: "CREATE".into(),
        version: "v1".into(),
        resource: "configmaps".into(),
        kind: "ConfigMap".into(),
        name: "c".into(),
        namespace: "n".into(),
        username: "u".into(),
        object: Some(object),
        ..Request::default()
    };
    // No data: broken, as in the sink (which binds `data: {}`), not an error.
    let bare = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n"}});
    assert_eq!(
        evaluate(&policy, &request(bare.clone())),
        Decision::Refused("gone".into())
    );
    // binaryData: the sink's data holds its keys; the policy leaves such a ConfigMap alone.
    let mut binary = bare;
    binary["binaryData"] = serde_json::json!({"must": "AAEC"});
    assert_eq!(evaluate(&policy, &request(binary)), Decision::NotMatched);
    // kubectl's last-applied annotation is a hash in the sink.
    let error = one(
        "- {name: r, match: {kind: ConfigMap}, expression: \"object.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'] != ''\"}\n",
    )
    .unwrap_err();
    assert!(error.contains("last-applied-configuration"), "{error}");
}

#[test]
fn every_refusal_has_a_stable_kind() {
    let export = export(
        &rules(
            "- {name: s, match: {kind: Service}, expression: \"has(object.status)\"}\n\
             - {name: f, match: {kind: Service}, expression: \"object.spec.x.reverse() == ''\"}\n\
             - {name: g, match: {kind: \"Serv*\"}, expression: \"true\"}\n",
        ),
        &Options::default(),
    );
    let kinds: Vec<&str> = export.refused.iter().map(|refusal| refusal.kind).collect();
    assert_eq!(kinds, ["reads", "function", "selector"]);
}

#[test]
fn an_unknown_kinds_resource_is_guessed_with_a_note() {
    let export = export(
        &rules("- {name: r, match: {apiVersion: monitoring.coreos.com/v1, kind: Prometheus}, expression: \"true\"}\n"),
        &Options::default(),
    );
    assert_eq!(
        export.policies[0].resource_rules[0].resources,
        vec!["prometheus"]
    );
    assert!(
        export.notes[0].contains("kubectl api-resources"),
        "{:?}",
        export.notes
    );
}

#[test]
fn excluding_namespaces_alone_keeps_cluster_scoped_objects_as_the_sink_does() {
    let policy = one(
        "- {name: r, match: {apiVersion: v1, kind: Namespace, excludeNamespaces: [kube-system]}, expression: \"true\"}\n",
    )
    .unwrap();
    assert_eq!(policy.resource_rules[0].scope, None);
    assert_eq!(policy.excluded_namespaces, vec!["kube-system"]);
}

#[test]
fn data_is_read_only_of_config_maps_and_any_annotation_value_skips_kubectls_hash() {
    let error = one("- {name: r, match: {apiVersion: \"sources.knative.dev/*\"}, expression: \"has(object.data)\"}\n")
        .unwrap_err();
    assert!(error.contains("other than ConfigMaps"), "{error}");
    let policy = one(
        "- {name: r, match: {kind: Service}, expression: \"object.metadata.annotations.all(k, size(object.metadata.annotations[k]) < 100)\"}\n",
    )
    .unwrap();
    let condition = policy
        .match_conditions
        .iter()
        .find(|condition| condition.name == "no-last-applied")
        .expect("a rule that reads any annotation's value");
    assert!(condition.expression.contains("last-applied-configuration"));
    // By literal key: judged everywhere.
    let literal = one(
        "- {name: r, match: {kind: Service}, expression: \"'a' in object.metadata.annotations\"}\n",
    )
    .unwrap();
    assert!(literal.match_conditions.is_empty());
}
