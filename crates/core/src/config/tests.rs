//! Tests of loading and validation through `load_str`, the same path `config validate` takes.

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn empty_file_is_all_defaults() {
    let config = load_str("# only a comment\n", &no_env).unwrap();
    assert_eq!(config.server.port, 8080);
    assert_eq!(config.server.body_limit_bytes, 4 * 1024 * 1024);
    assert_eq!(config.default_cluster, "default");
    assert!(config
        .rules
        .trusted_managers
        .contains(&"controller".to_string()));
}

#[test]
fn env_interpolation_in_strings() {
    let env = |name: &str| (name == "CLUSTER").then(|| "prod".to_string());
    let config = load_str("defaultCluster: ${CLUSTER}-eu\n", &env).unwrap();
    assert_eq!(config.default_cluster, "prod-eu");
    let config = load_str("defaultCluster: a$${B}\n", &env).unwrap();
    assert_eq!(config.default_cluster, "a${B}");
}

#[test]
fn missing_env_names_key_and_variable() {
    let error = load_str("channels:\n  - type: log\n    name: ${NOPE}\n", &no_env).unwrap_err();
    assert_eq!(
        error.to_string(),
        "channels[0].name: environment variable NOPE is not set"
    );
}

#[test]
fn unknown_key_names_its_path() {
    let error = load_str("server:\n  prot: 1\n", &no_env).unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("server.prot: unknown field `prot`"),
        "{message}"
    );
}

#[test]
fn wrong_type_names_its_path() {
    let error = load_str("server:\n  port: many\n", &no_env).unwrap_err();
    assert!(error.to_string().starts_with("server.port: "), "{error}");
}

#[test]
fn bad_duration_is_explained() {
    let error = load_str("server:\n  drainTimeout: soon\n", &no_env).unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("server.drainTimeout: invalid duration \"soon\""),
        "{message}"
    );
}

#[test]
fn unknown_class_is_rejected() {
    let error = load_str("rules:\n  classes:\n    trafic_drift: {}\n", &no_env).unwrap_err();
    assert!(error
        .to_string()
        .starts_with("rules.classes.trafic_drift: unknown drift class"));
}

#[test]
fn syntax_error_is_reported() {
    let error = load_str("server: [unclosed\n", &no_env).unwrap_err();
    assert_eq!(error.kind(), "syntax");
}

#[test]
fn channels_and_routes_validate_with_paths() {
    let env = |name: &str| {
        (name == "DT").then(|| "https://oapi.dingtalk.com/robot/send?access_token=abc".to_string())
    };
    let config = load_str(
        "channels:\n  - name: ops\n    type: dingtalk\n    url: ${DT}\n    secret: SECxyz\n    atMobiles: ['138']\nroutes:\n  - channels: [ops]\n    match: {severity: warning}\n",
        &env,
    )
    .unwrap();
    assert_eq!(config.channels[0].kind.type_name(), "dingtalk");
    let error = load_str(
        "channels:\n  - {name: a, type: slack, url: 'https://hooks.slack.com/x', colour: red}\n",
        &no_env,
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("channels[0]: unknown field `colour`"),
        "{error}"
    );
    let error = load_str(
        "channels:\n  - {name: a, type: slack, url: 'not a url'}\n",
        &no_env,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "channels[0].url: must be an http:// or https:// URL"
    );
    let error = load_str(
        "channels:\n  - {name: a, type: log}\n  - {name: b, type: log, language: fr}\n",
        &no_env,
    )
    .unwrap_err();
    assert_eq!(error.to_string(), "channels[1].language: must be en or zh");
    let config = load_str(
        "channels:\n  - {name: a, type: log, language: zh}\n  - {name: b, type: log}\n",
        &no_env,
    )
    .unwrap();
    assert_eq!(config.channels[0].language, crate::config::Language::Zh);
    assert_eq!(config.channels[1].language, crate::config::Language::En);
    let error = load_str(
        "channels:\n  - {name: a, type: log}\nroutes:\n  - channels: [b]\n",
        &no_env,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "routes[0].channels[0]: no channel named \"b\" (channels: a)"
    );
    let error = load_str("channels:\n  - {name: a, type: carrier-pigeon}\n", &no_env).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("unknown variant `carrier-pigeon`"),
        "{error}"
    );
}

#[test]
fn type_errors_never_echo_urls() {
    let error = load_str(
        "channels:\n  - name: am\n    type: alertmanager\n    urls: https://am.example/?token=s3cret\n",
        &no_env,
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(!message.contains("s3cret"), "{message}");
    assert!(message.contains("<redacted URL>"), "{message}");
}

#[test]
fn empty_api_token_is_refused() {
    let env = |name: &str| (name == "API_TOKEN").then(String::new);
    let error = load_str("api:\n  token: ${API_TOKEN}\n", &env).unwrap_err();
    assert!(
        error.to_string().starts_with("api.token: is empty"),
        "{error}"
    );
}

/// A token is used trimmed (`Secret::trimmed`): one of only whitespace (a `${VAR}` holding a
/// newline) would be empty, and is refused as an empty one is.
#[test]
fn tokens_of_only_whitespace_are_refused() {
    let env = |name: &str| (name == "TOKEN").then(|| " \n".to_string());
    for (text, key) in [
        (
            "api:\n  token: ${TOKEN}\n",
            "api.token: is empty or only whitespace",
        ),
        (
            "auth:\n  bearerToken: ${TOKEN}\n",
            "auth.bearerToken: is empty or only whitespace",
        ),
    ] {
        let error = load_str(text, &env).unwrap_err();
        assert!(error.to_string().starts_with(key), "{error}");
    }
    let ok = |name: &str| (name == "TOKEN").then(|| " t0ken\n".to_string());
    assert!(load_str("auth:\n  bearerToken: ${TOKEN}\n", &ok).is_ok());
}

#[test]
fn secret_is_redacted() {
    let secret = Secret::new("https://oapi.dingtalk.com/robot/send?access_token=abc");
    assert_eq!(format!("{secret:?}"), "Secret(***)");
    assert_eq!(format!("{secret}"), "***");
}

#[test]
fn limits_default_and_validate() {
    let config = load_str("", &no_env).expect("defaults");
    assert_eq!(
        config.limits.capacity(),
        crate::classify::Capacity::default()
    );
    let config = load_str(
        "limits:\n  maxObjects: 300000\n  maxObjectsPerCluster: 200000\n  maxClusters: 3\n",
        &no_env,
    )
    .expect("valid");
    assert_eq!(config.limits.capacity().objects, 300_000);
    assert_eq!(config.limits.capacity().objects_per_cluster, 200_000);
    assert_eq!(config.limits.capacity().clusters, 3);
    let error = load_str("limits:\n  maxObjectsPerCluster: 0\n", &no_env).unwrap_err();
    assert!(
        error.to_string().contains("limits.maxObjectsPerCluster"),
        "{error}"
    );
    let error = load_str("limits:\n  maxObjects: 0\n", &no_env).unwrap_err();
    assert!(error.to_string().contains("limits.maxObjects:"), "{error}");
    let error = load_str("limits:\n  maxClusters: 0\n", &no_env).unwrap_err();
    assert!(error.to_string().contains("limits.maxClusters"), "{error}");
    let error = load_str("limits:\n  maxObject: 5\n", &no_env).unwrap_err();
    assert!(error.to_string().contains("limits"), "{error}");
}

#[test]
fn oidc_and_a_bearer_token_together_are_refused() {
    let text =
        "auth:\n  bearerToken: t0ken\n  oidc:\n    issuer: https://issuer\n    audience: a\n";
    let error = load_str(text, &no_env).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("auth: set oidc or bearerToken, not both"),
        "{error}"
    );
    assert!(!error.to_string().contains("t0ken"), "{error}");
}

#[test]
fn the_sample_configs_metadata_keys_are_the_built_in_lists() {
    // The sample config ships the default lists with a reason per entry; they must stay the
    // lists an unset `metadataKeys` means.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/drift-sentinel.yaml"
    ))
    .unwrap();
    let config = crate::config::load_str(&text, &|_| Some(String::new())).unwrap();
    let shipped = &config.rules.metadata_keys;
    let built_in = crate::config::rules::MetadataKeysConfig::default();
    assert_eq!(shipped.bookkeeping, built_in.bookkeeping);
    assert_eq!(shipped.behavioural, built_in.behavioural);
    assert_eq!(
        config.rules.own_pipeline.trigger, "drift-sentinel",
        "the sample names k8s/'s Trigger"
    );
}

#[test]
fn extra_resources_add_to_the_default_list_and_duplicates_name_both_places() {
    let config = load_str(
        "resync:\n  extraResources:\n    - {apiVersion: operator.knative.dev/v1beta1, kind: KnativeServing}\n",
        &no_env,
    )
    .unwrap();
    let listed: Vec<(String, String)> = config
        .resync
        .listed()
        .map(|(path, resource)| (path, resource.kind.clone()))
        .collect();
    // The default list stays whole and the extra kind comes after it.
    assert_eq!(
        listed.len(),
        crate::config::resync::default_resync_resources().len() + 1
    );
    assert_eq!(
        listed.last().unwrap(),
        &(
            "resync.extraResources[0]".to_string(),
            "KnativeServing".to_string()
        )
    );
    let error = load_str(
        "resync:\n  extraResources:\n    - {apiVersion: eventing.knative.dev/v1, kind: Broker}\n",
        &no_env,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("resync.extraResources[0]")
            && error.contains("lists the same kind and selector as resync.resources["),
        "{error}"
    );
}

#[test]
fn store_url_selects_postgres_and_keeps_its_password_secret() {
    let env = |name: &str| (name == "PGPASSWORD").then(|| "pw-s3cret".to_string());
    let config = load_str(
        "store:\n  url: postgres://drift:${PGPASSWORD}@db.example:5433/drifts?sslmode=require\n",
        &env,
    )
    .unwrap();
    let url = config.store.url.as_ref().unwrap();
    assert!(url.expose().contains("pw-s3cret"));
    assert!(!format!("{config:?}").contains("pw-s3cret"));
    assert_eq!(config.store.location(), "postgres://db.example:5433/drifts");
    // The default store stays the SQLite file.
    let config = load_str("", &no_env).unwrap();
    assert!(config.store.url.is_none());
    assert_eq!(config.store.location(), "drift-sentinel.db");
    let config = load_str(
        "store:\n  url: postgres://db/d\n  password: ${PGPASSWORD}\n",
        &env,
    )
    .unwrap();
    assert_eq!(config.store.password.unwrap().expose(), "pw-s3cret");
}

#[test]
fn store_keys_that_do_not_go_together_are_named() {
    let cases = [
        (
            "store:\n  path: /data/s.db\n  url: postgres://db/d\n",
            "store.url: set either store.path (SQLite) or store.url (PostgreSQL), not both",
        ),
        (
            "store:\n  password: x\n",
            "store.password: applies to a PostgreSQL store only (store.url)",
        ),
        (
            "store:\n  caFile: /ca.pem\n",
            "store.caFile: applies to a PostgreSQL store only (store.url)",
        ),
        (
            "store:\n  url: mysql://u:pw-s3cret@db/d\n",
            "store.url: the scheme must be postgres:// or postgresql://, not mysql://",
        ),
        (
            "store:\n  url: postgres://db/d\n  password: ''\n",
            "store.password: is empty (a ${VAR} set to nothing?)",
        ),
        (
            "store:\n  url: postgres://db/d?sslmode=verify-full\n",
            "store.url: sslmode=verify-full is not understood: use sslmode=require with store.caFile (require verifies the certificate and host name, as verify-full does)",
        ),
        (
            "store:\n  url: postgres://db/d?sslrootcert=/ca.pem\n",
            "store.url: sslrootcert is not understood: a private CA goes in store.caFile; client certificates are not supported",
        ),
        (
            "store:\n  lease: {ttl: 10s}\n",
            "store.lease: applies to a PostgreSQL store only (store.url)",
        ),
        (
            "store:\n  url: postgres://db/d\n  lease: {ttl: 1s}\n",
            "store.lease.ttl: must be at least 2s (a shorter lease lapses on a slow commit)",
        ),
        (
            "store:\n  url: postgres://db/d\n  lease: {ttl: 10s, renewInterval: 4s}\n",
            "store.lease.renewInterval: must be more than 0s and at most a third of store.lease.ttl (10s), so one failed renewal does not lose the lease",
        ),
        (
            "store:\n  url: postgres://db/d\n  lease: {retryInterval: 0s}\n",
            "store.lease.retryInterval: must be more than 0s and at most store.lease.ttl",
        ),
        (
            "shard: {name: east, clusters: [\"east-*\"]}\n",
            "shard: shards share one PostgreSQL database: set store.url (a SQLite store is one pod's and owns every cluster)",
        ),
        (
            "store:\n  url: postgres://db/d\nshard: {name: east, clusters: [\"east-*\"]}\n",
            "resync.enabled: resync files the cluster it lists as \"default\", which shard \"east\" does not own (shard.clusters): set resync.enabled: false in this shard, or resync.cluster to a cluster it owns",
        ),
    ];
    for (text, expected) in cases {
        let error = load_str(text, &no_env).unwrap_err();
        assert_eq!(error.to_string(), expected, "{text}");
    }
    // The shard that owns the cluster resync lists may resync; one that does not, with it off.
    for text in [
        "store:\n  url: postgres://db/d\ndefaultCluster: east-1\nshard: {name: east, clusters: [\"east-*\"]}\n",
        "store:\n  url: postgres://db/d\nshard: {name: west, clusters: [\"west-*\"]}\nresync: {enabled: false}\n",
    ] {
        let config = load_str(text, &no_env).unwrap();
        assert!(config.shard.set, "{text}");
        assert_eq!(config.store.lease, crate::config::server::LeaseConfig::default());
    }
    let error = load_str("store:\n  pth: x\n", &no_env).unwrap_err();
    assert!(
        error.to_string().starts_with("store.pth: unknown field"),
        "{error}"
    );
}

#[test]
fn cluster_names_in_the_config_follow_the_ingest_rules_and_name_the_key() {
    let cases = [
        (
            "defaultCluster: \"prod\\u200Beu\"\n",
            "defaultCluster: cluster name holds U+200B, an invisible character, at character 5",
        ),
        (
            "defaultCluster: \"fleet:prod\"\n",
            "defaultCluster: cluster name starts with \"fleet:\", reserved for fleet drifts (fleet:<group>)",
        ),
        (
            "clusters:\n  \"https://10.8.0.1:443\": \"prod-\\u0435u\"\n",
            "clusters.https://10.8.0.1:443: cluster name mixes the scripts Latin, Cyrillic",
        ),
        (
            "resync:\n  cluster: \"prod\\neu\"\n",
            "resync.cluster: cluster name holds U+000A, a control or whitespace character, at character 5",
        ),
        (
            "store:\n  url: postgres://db/d\nshard: {name: east, clusters: [\"east-*\", \"fleet:*\"]}\nresync: {enabled: false}\n",
            "shard.clusters[1]: starts with \"fleet:\"",
        ),
        (
            "fleet:\n  groups:\n    - {name: prod, clusters: [prod-eu, \"prod-\\u0435u\"], compare: [{kind: ConfigMap}]}\n",
            "fleet.groups[0].clusters[1]: mixes the scripts Latin, Cyrillic",
        ),
    ];
    for (text, expected) in cases {
        let error = load_str(text, &no_env).unwrap_err().to_string();
        assert!(error.starts_with(expected), "{text}: {error}");
    }
    // A valid non-ASCII name of one script, and Latin with Han, are names.
    let config = load_str(
        "defaultCluster: \"生产-eu\"\nclusters:\n  \"https://10.8.0.1:443\": продакшн\n",
        &no_env,
    )
    .unwrap();
    assert_eq!(config.default_cluster, "生产-eu");
}

#[test]
fn certificate_windows_default_compile_and_are_validated_with_their_paths() {
    let config = load_str("# only a comment\n", &no_env).unwrap();
    let windows = config.rules.compile().certificates();
    assert_eq!(
        windows.warn_before,
        std::time::Duration::from_secs(14 * 86_400)
    );
    assert_eq!(
        windows.critical_before,
        std::time::Duration::from_secs(3 * 86_400)
    );
    let config = load_str(
        "rules:\n  certificates:\n    warnBefore: 30d\n    criticalBefore: 36h\n",
        &no_env,
    )
    .unwrap();
    let windows = config.rules.compile().certificates();
    assert_eq!(
        windows.warn_before,
        std::time::Duration::from_secs(30 * 86_400)
    );
    assert_eq!(
        windows.critical_before,
        std::time::Duration::from_secs(36 * 3600)
    );
    for (yaml, expected) in [
        (
            "rules:\n  certificates:\n    warnBefore: 2d\n    criticalBefore: 3d\n",
            "rules.certificates.criticalBefore: must be less than rules.certificates.warnBefore (2d), or nothing would ever be a warning",
        ),
        (
            "rules:\n  certificates:\n    criticalBefore: 14d\n",
            "rules.certificates.criticalBefore: must be less than rules.certificates.warnBefore (14d), or nothing would ever be a warning",
        ),
        (
            "rules:\n  certificates:\n    warnBefore: 0s\n",
            "rules.certificates.warnBefore: must be more than 0s",
        ),
        (
            "rules:\n  certificates:\n    criticalBefore: 0s\n",
            "rules.certificates.criticalBefore: must be more than 0s",
        ),
    ] {
        let error = load_str(yaml, &no_env).unwrap_err();
        assert_eq!(error.to_string(), expected, "{yaml}");
    }
    let error = load_str("rules:\n  certificates:\n    warnBefore: soon\n", &no_env).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("rules.certificates.warnBefore: invalid duration \"soon\""),
        "{error}"
    );
}

#[test]
fn rules_mesh_root_namespace_defaults_to_istio_system_and_must_be_a_namespace_name() {
    let no_env = |_: &str| None;
    let config = load_str("rules: {}\n", &no_env).unwrap();
    assert_eq!(config.rules.compile().mesh_root_namespace(), "istio-system");
    let config = load_str(
        "rules:\n  mesh:\n    rootNamespace: aks-istio-system\n",
        &no_env,
    )
    .unwrap();
    assert_eq!(
        config.rules.compile().mesh_root_namespace(),
        "aks-istio-system"
    );
    for name in ["", "Istio", "-x", "a_b", &"n".repeat(64)] {
        let error = load_str(
            &format!("rules:\n  mesh:\n    rootNamespace: {name:?}\n"),
            &no_env,
        )
        .unwrap_err();
        assert!(
            error.to_string().starts_with("rules.mesh.rootNamespace: ")
                && error.to_string().contains("is not a namespace name"),
            "{error}"
        );
    }
}
