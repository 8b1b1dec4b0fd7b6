//! One rule to one policy: what it matches ([`resource_rules`], the namespace and object
//! selectors, match conditions), its expressions rewritten where the API server's variables
//! differ from the sink's, and the checks that refuse what cannot be judged alike.

use drift_cel::admission::{analyze, rename_path, Analysis};

use super::{cel_string, one_line, policy_name, unavailable, Named, Options, Policy, ResourceRule};
use super::{PER_EXPRESSION_LIMIT, PER_POLICY_LIMIT};
use crate::classify::evidence::hint::plural;
use crate::classify::invariants::{Invariant, Message};

/// Why a rule is not exported: a [`super::Refusal`]'s kind and words.
pub(super) type Refused = (&'static str, String);

/// Maps an exported expression reads through `variables`, with `{}` for an absent one: the
/// sink binds labels, annotations and a ConfigMap's `data` as empty maps when the object has
/// none, the API server leaves them out (reading one is then an error).
const DEFAULTED: &[(&str, &[&str], &str)] = &[
    ("object", &["metadata", "labels"], "objectLabels"),
    ("object", &["metadata", "annotations"], "objectAnnotations"),
    ("object", &["data"], "objectData"),
    ("oldObject", &["metadata", "labels"], "oldObjectLabels"),
    (
        "oldObject",
        &["metadata", "annotations"],
        "oldObjectAnnotations",
    ),
    ("oldObject", &["data"], "oldObjectData"),
];

/// Kinds whose resource name is known to be the regular plural (Kubernetes', Knative's,
/// Istio's, cert-manager's); another kind's is guessed the same way, with a note.
const KNOWN_KINDS: &[&str] = &[
    "ApiServerSource",
    "Broker",
    "Certificate",
    "CertificateRequest",
    "Channel",
    "ClusterDomainClaim",
    "ClusterIssuer",
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "Configuration",
    "ContainerSource",
    "CronJob",
    "DaemonSet",
    "Deployment",
    "DestinationRule",
    "DomainMapping",
    "Endpoints",
    "EndpointSlice",
    "EventPolicy",
    "EventType",
    "Gateway",
    "HorizontalPodAutoscaler",
    "InMemoryChannel",
    "Ingress",
    "Issuer",
    "Job",
    "KnativeEventing",
    "KnativeServing",
    "Metric",
    "Namespace",
    "NetworkPolicy",
    "Parallel",
    "PeerAuthentication",
    "PersistentVolumeClaim",
    "PingSource",
    "Pod",
    "PodAutoscaler",
    "ReplicaSet",
    "Revision",
    "Role",
    "RoleBinding",
    "Route",
    "Secret",
    "Sequence",
    "ServerlessService",
    "Service",
    "ServiceAccount",
    "ServiceEntry",
    "SinkBinding",
    "StatefulSet",
    "Subscription",
    "Trigger",
    "VirtualService",
];

/// `rule` as a policy (and notes for the user), or why it cannot be one.
pub(super) fn policy(
    rule: &Invariant,
    options: &Options,
) -> Result<(Policy, Vec<String>), Refused> {
    let Matched {
        resource_rules,
        conditions: mut match_conditions,
        notes,
    } = matched(rule)?;
    let mut sources = vec![("expression", rule.condition.source().to_string())];
    if let Message::Expression(message) = &rule.message {
        sources.push(("messageExpression", message.source().to_string()));
    }
    let mut rewritten = Vec::new();
    let mut used: Vec<&str> = Vec::new();
    let (mut object_data, mut old_data) = (false, false);
    let (mut object_annotations, mut old_annotations) = (false, false);
    let mut total_cost = 0u64;
    for (field, source) in sources {
        if source.contains("last-applied-configuration") {
            return Err((
                "reads",
                format!(
                    "{field} reads kubectl's last-applied-configuration, which the sink holds \
                     as a hash"
                ),
            ));
        }
        // Checked as written: the rewrite below only renames what these checks allow.
        let analysis = analyze(&source).map_err(|error| ("syntax", format!("{field}: {error}")))?;
        check(rule, field, &analysis, options)?;
        object_annotations |= analysis.annotations_by_value.0;
        old_annotations |= analysis.annotations_by_value.1;
        object_data |= analysis.object.reads("data");
        old_data |= analysis.old_object.reads("data");
        let mut text = source;
        for (variable, path, name) in DEFAULTED {
            let from: Vec<&str> = std::iter::once(*variable)
                .chain(path.iter().copied())
                .collect();
            let renamed = rename_path(&text, &from, &format!("variables.{name}"));
            if renamed != text && !used.contains(name) {
                used.push(name);
            }
            text = renamed;
        }
        total_cost = total_cost.saturating_add(analysis.cost);
        rewritten.push(text);
    }
    if total_cost > PER_POLICY_LIMIT {
        return Err((
            "cost",
            format!(
                "its expressions' estimated cost, {total_cost} units, is over the API server's \
                 budget of {PER_POLICY_LIMIT} per policy"
            ),
        ));
    }
    if rule.names_old_object() {
        // The sink judges a rule that reads oldObject on updates only.
        match_conditions.push(Named {
            name: "update-only".to_string(),
            expression: "oldObject != null".to_string(),
        });
    }
    // The sink holds kubectl's last-applied annotation as a hash: a rule that may read any
    // annotation's value leaves objects carrying it to the sink.
    let applied: Vec<String> = [
        ("object", object_annotations),
        ("oldObject", old_annotations),
    ]
    .iter()
    .filter(|(_, read)| *read)
    .map(|(variable, _)| {
        format!(
            "({variable} == null || !has({variable}.metadata.annotations) || \
             !('kubectl.kubernetes.io/last-applied-configuration' in \
             {variable}.metadata.annotations))"
        )
    })
    .collect();
    if !applied.is_empty() {
        match_conditions.push(Named {
            name: "no-last-applied".to_string(),
            expression: applied.join(" && "),
        });
    }
    // The sink's `data` of a ConfigMap also holds its `binaryData` keys (values hashed); the
    // API server's does not: a ConfigMap with `binaryData` on a side the rule reads is left to
    // the sink.
    let binary: Vec<String> = [("object", object_data), ("oldObject", old_data)]
        .iter()
        .filter(|(_, read)| *read)
        .map(|(variable, _)| format!("({variable} == null || !has({variable}.binaryData))"))
        .collect();
    if !binary.is_empty() {
        match_conditions.push(Named {
            name: "no-binary-data".to_string(),
            expression: binary.join(" && "),
        });
    }
    let variables = DEFAULTED
        .iter()
        .filter(|(_, _, name)| used.contains(name))
        .map(|(variable, path, name)| {
            let at = format!("{variable}.{}", path.join("."));
            Named {
                name: (*name).to_string(),
                expression: format!("{variable} != null && has({at}) ? {at} : {{}}"),
            }
        })
        .collect();
    let mut rewritten = rewritten.into_iter();
    let expression = rewritten.next().unwrap_or_default();
    let message_expression = rewritten.next();
    let message = match &rule.message {
        Message::Text(text) if !text.is_empty() => one_line(text),
        // The sink's words for a rule without a message.
        _ => one_line(&format!(
            "breaks the rule: {}",
            if rule.description.is_empty() {
                &rule.name
            } else {
                &rule.description
            }
        )),
    };
    let policy = Policy {
        name: policy_name(&rule.name),
        rule: rule.name.clone(),
        description: rule.description.clone(),
        resource_rules,
        namespaces: rule.selector.namespaces.clone(),
        excluded_namespaces: rule.selector.exclude_namespaces.clone(),
        object_labels: rule.selector.match_labels.clone(),
        match_conditions,
        variables,
        expression,
        message: Some(message),
        message_expression,
    };
    Ok((policy, notes))
}

/// What a policy matches: its resource rules, the match conditions that make it select as
/// the sink selects, and notes.
struct Matched {
    resource_rules: Vec<ResourceRule>,
    conditions: Vec<Named>,
    notes: Vec<String>,
}

fn matched(rule: &Invariant) -> Result<Matched, Refused> {
    for pattern in rule
        .selector
        .namespaces
        .iter()
        .chain(&rule.selector.exclude_namespaces)
    {
        if pattern.contains(['*', '?', '[']) {
            return Err((
                "selector",
                format!(
                    "its namespace pattern {pattern:?} is a glob; a namespace selector can only \
                     name namespaces"
                ),
            ));
        }
    }
    let (resource_rules, notes, not_core) = resource_rules(rule)?;
    let mut conditions = Vec::new();
    if not_core {
        // `*/v1` selects every group's v1 in the sink but not the core group's (`v1` has no
        // `/`); the resource rule's `*` group includes it.
        conditions.push(Named {
            name: "not-the-core-group".to_string(),
            expression: "request.resource.group != ''".to_string(),
        });
    }
    if !rule.selector.match_labels.is_empty() {
        // The object selector also matches when only the old object carries the labels; the
        // sink selects on the object as it is now.
        let tests: Vec<String> = rule
            .selector
            .match_labels
            .iter()
            .flat_map(|(key, value)| {
                [
                    format!("{} in object.metadata.labels", cel_string(key)),
                    format!(
                        "object.metadata.labels[{}] == {}",
                        cel_string(key),
                        cel_string(value)
                    ),
                ]
            })
            .collect();
        conditions.push(Named {
            name: "labels-on-the-object".to_string(),
            expression: format!("has(object.metadata.labels) && {}", tests.join(" && ")),
        });
    }
    Ok(Matched {
        resource_rules,
        conditions,
        notes,
    })
}

/// What the API server cannot judge as the sink does in one expression.
fn check(
    rule: &Invariant,
    field: &str,
    analysis: &Analysis,
    options: &Options,
) -> Result<(), Refused> {
    if let Some(name) = analysis
        .bound
        .iter()
        .find(|name| ["object", "oldObject", "variables", "request"].contains(&name.as_str()))
    {
        return Err((
            "binds",
            format!(
                "{field} binds {name:?} in a macro; the API server's variable of that name \
                 would be hidden"
            ),
        ));
    }
    if let Some(name) = analysis
        .functions
        .iter()
        .find_map(|name| unavailable(name, options.minor))
    {
        return Err(("function", format!("{field} calls {name}")));
    }
    // Whether the rule may select objects of a kind (its apiVersion and kind globs alone).
    let selects = |kind: &str, api_version: &str| {
        let any = |patterns: &[String], text: &str| {
            patterns.is_empty()
                || patterns
                    .iter()
                    .any(|pattern| drift_model::glob::glob_match(pattern, text))
        };
        any(&rule.selector.api_versions, api_version) && any(&rule.selector.kinds, kind)
    };
    for (variable, fields) in [
        ("object", &analysis.object),
        ("oldObject", &analysis.old_object),
    ] {
        let only_config_maps = rule.selector.kinds.iter().all(|kind| kind == "ConfigMap")
            && !rule.selector.kinds.is_empty()
            && rule
                .selector
                .api_versions
                .iter()
                .all(|version| version == "v1");
        if let Some(reason) = unexportable_read(variable, fields, &selects, only_config_maps) {
            return Err(("reads", format!("{field} {reason}")));
        }
    }
    if analysis.cost > PER_EXPRESSION_LIMIT {
        return Err((
            "cost",
            format!(
                "{field}'s estimated cost, {} units, is over the API server's limit of \
                 {PER_EXPRESSION_LIMIT} per expression (the API server would stop it at run \
                 time and, with failurePolicy Ignore, let the request through unjudged)",
                analysis.cost
            ),
        ));
    }
    Ok(())
}

/// Why a rule's reads of `variable` cannot be judged by the API server as the sink judges
/// them; `selects(kind, apiVersion)` says whether the rule may select such an object.
fn unexportable_read(
    variable: &str,
    fields: &drift_cel::Fields,
    selects: &dyn Fn(&str, &str) -> bool,
    only_config_maps: bool,
) -> Option<String> {
    if fields.is_empty() {
        return None;
    }
    if fields.is_whole() {
        return Some(format!(
            "reads {variable} whole (or by index), which the sink binds only in part"
        ));
    }
    if fields.reads("status") {
        return Some(format!(
            "reads {variable}.status, which a user never writes through the main resource (the \
             API server has none on CREATE and the stored one on UPDATE) and which the sink \
             keeps only in part"
        ));
    }
    if let Some(metadata) = fields.child("metadata") {
        if metadata.is_whole() {
            return Some(format!("reads {variable}.metadata whole"));
        }
        if let Some(key) = metadata
            .names()
            .find(|key| !["name", "namespace", "labels", "annotations"].contains(key))
        {
            return Some(format!(
                "reads {variable}.metadata.{key}, which the sink does not bind as the API server \
                 does"
            ));
        }
    }
    if let Some(key) = fields
        .names()
        .find(|key| !["apiVersion", "kind", "metadata", "spec", "data"].contains(key))
    {
        return Some(format!(
            "reads {variable}.{key}, which the sink does not bind"
        ));
    }
    if fields.reads("spec") && selects("Pod", "v1") {
        return Some(format!(
            "reads {variable}.spec of Pods, of which the sink keeps only the containers' names \
             and images"
        ));
    }
    if fields.reads("data") && selects("Secret", "v1") {
        return Some(format!(
            "reads {variable}.data of Secrets, whose values the sink holds only as hashes"
        ));
    }
    if fields.reads("data") && !only_config_maps {
        return Some(format!(
            "reads {variable}.data of kinds other than ConfigMaps, which the sink binds only for \
             ConfigMaps (and Secrets, as hashes): select kind ConfigMap"
        ));
    }
    None
}

/// The `resourceRules` of a rule's `match`, notes on guessed resource names, and whether the
/// core group must be left out by a match condition.
fn resource_rules(rule: &Invariant) -> Result<(Vec<ResourceRule>, Vec<String>, bool), Refused> {
    let glob = |text: &str| text.contains(['*', '?', '[']);
    // Naming namespaces: a namespace selector matches every cluster-scoped object (and a
    // Namespace by its own labels), which the sink's rule never selects. Excluding some alone
    // keeps cluster-scoped objects in, as the sink does (their namespace `""` is never
    // excluded).
    let scope = (!rule.selector.namespaces.is_empty()).then_some("Namespaced");
    let mut notes = Vec::new();
    let resources = if rule.selector.kinds.is_empty() {
        vec!["*".to_string()]
    } else {
        let mut resources = Vec::new();
        for kind in &rule.selector.kinds {
            if glob(kind) {
                return Err((
                    "selector",
                    format!("its kind {kind:?} is a glob; an admission rule names its resources"),
                ));
            }
            let resource = plural(kind);
            if !KNOWN_KINDS.contains(&kind.as_str()) {
                notes.push(format!(
                    "rule {}: the resource of kind {kind} is taken to be {resource:?}; check it \
                     with `kubectl api-resources`",
                    rule.name
                ));
            }
            resources.push(resource);
        }
        resources
    };
    let (mut star_group, mut covers_core) = (false, false);
    let mut rules = Vec::new();
    let api_versions: Vec<&str> = if rule.selector.api_versions.is_empty() {
        vec!["*"]
    } else {
        rule.selector
            .api_versions
            .iter()
            .map(String::as_str)
            .collect()
    };
    for api_version in api_versions {
        // `*` is every apiVersion (the core group's `v1` too); `G/V` a group and version.
        let (group, version) = match api_version.split_once('/') {
            _ if api_version == "*" => ("*", "*"),
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        if glob(group) && group != "*" {
            return Err((
                "selector",
                format!(
                    "its apiVersion {api_version:?} is a glob over groups; an admission rule \
                     names its groups"
                ),
            ));
        }
        if glob(version) && version != "*" {
            return Err((
                "selector",
                format!("its apiVersion {api_version:?} is a glob over versions other than *"),
            ));
        }
        star_group |= group == "*" && api_version != "*";
        covers_core |= api_version == "*" || group.is_empty();
        rules.push(ResourceRule {
            scope,
            groups: vec![group.to_string()],
            versions: vec![version.to_string()],
            resources: resources.clone(),
            operations: vec!["CREATE".to_string(), "UPDATE".to_string()],
        });
    }
    Ok((rules, notes, star_group && !covers_core))
}
