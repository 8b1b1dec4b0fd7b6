//! `mesh_security_drift`: the mesh protects Knative's traffic less than it did. A
//! PeerAuthentication (mesh-wide, namespace or workload) whose mTLS mode in force weakens (STRICT
//! → PERMISSIVE or DISABLE on every port or one, or the policy removed so a weaker parent
//! applies); a Knative namespace whose sidecar injection setting changes (`istio-injection`,
//! `istio.io/rev`); a Service's or Configuration's Revision template whose
//! `sidecar.istio.io/inject` label (or deprecated annotation) changes what its pods get.
//!
//! Judged as Istio resolves it ([`crate::classify::mesh`]), against the reference: the baseline
//! manifest when `rules.baselineDir` has one, else what drift-sentinel first saw (the state
//! before the first change, kept in the open drift's facts). The drift holds while the setting
//! stays away from the reference and resolves when it is back (or stronger, for mTLS). First
//! sight is the reference, so a cluster that was PERMISSIVE all along is quiet; a new policy is
//! its own first sight.

use serde_json::Value;

use super::*;
use crate::classify::evidence::hint::{namespace_flag, shell_quote};
use crate::classify::mesh::{
    self, effect_now, in_force, Effect, Level, NamespaceInjection, TemplateInjection,
    ISTIO_SECURITY,
};
use crate::manifest::ManifestKey;

/// The class's id.
pub(crate) const ID: &str = "mesh_security_drift";
/// The facts key holding the reference a later event is judged against.
const REFERENCE: &str = "reference";
/// The facts key holding the setting now.
const CURRENT: &str = "current";

/// The class.
pub(crate) struct MeshSecurityDrift;

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: ID,
    english: "Mesh security drift",
    chinese: "网格安全漂移",
    severity: Severity::Critical,
};

impl DriftClass for MeshSecurityDrift {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn defaults(&self) -> ClassDefaults {
        // No controller puts a PeerAuthentication or a namespace label back: a change is
        // someone's, and a weaker mTLS mode is open at once.
        ClassDefaults {
            enabled: true,
            grace: secs(0),
            grace_follows_default: false,
        }
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        match (object.group(), object.kind.as_str()) {
            (ISTIO_SECURITY, "PeerAuthentication") => peer_authentication(context),
            ("", "Namespace") => namespace(context),
            (SERVING, "Service") => template(context),
            // A Service's Configuration follows its Service's template: one alert, on the
            // Service.
            (SERVING, "Configuration") if object.controller_owner().is_none() => template(context),
            _ => Vec::new(),
        }
    }
}

/// The open drift's reference, if one is open on `object`.
fn open_reference<'a>(context: &'a Context<'_>, object: &ObjectState) -> Option<&'a str> {
    context
        .open_drift(object, ID)
        .and_then(|drift| drift.evidence.facts.get(REFERENCE))
        .map(String::as_str)
}

/// The baseline manifest of `object`, if one is kept.
fn baseline<'a>(context: &'a Context<'_>, object: &ObjectState) -> Option<&'a Value> {
    let baseline = context.rules.baseline();
    if baseline.is_empty() {
        return None;
    }
    baseline.get(&ManifestKey {
        group: object.group().to_string(),
        kind: object.kind.clone(),
        namespace: object.namespace.clone(),
        name: object.name.clone(),
    })
}

fn peer_authentication(context: &Context<'_>) -> Vec<Assessment> {
    let policy = context.after;
    let mut verdicts = Vec::new();
    // A policy that changes or appears can end a drift about a removed one in its scope: judge
    // those again (rare objects; a few open drifts at most).
    if !policy.deleted {
        verdicts.extend(removed_policies_judged_again(context));
    }
    let root = context.rules.mesh_root_namespace();
    let spec = policy.spec.value();
    let level = mesh::level(policy, &spec, root);
    if level == Level::Ignored {
        if context.open_drift(policy, ID).is_some() {
            verdicts.push(Assessment::clear(
                policy,
                "a policy with a selector in the root namespace is ignored by Istio",
            ));
        }
        return verdicts;
    }
    // Policies that lost their scope (mesh, namespace) or their workloads to an older one
    // change nothing.
    let overruled = match level {
        Level::Workload => mesh::workload_overruled(context.graph, policy, &spec),
        _ => !in_force(context.graph, policy),
    };
    if !policy.deleted && overruled {
        if context.open_drift(policy, ID).is_some() {
            verdicts.push(Assessment::clear(
                policy,
                "an older policy is in force here",
            ));
        }
        return verdicts;
    }
    // A removed mesh or namespace policy that an older one overruled took nothing away.
    if policy.deleted && level != Level::Workload && !mesh::was_in_force(context.graph, policy) {
        return verdicts;
    }
    let Some(now) = effect_now(context.graph, policy, root) else {
        return verdicts;
    };
    let reference = if let Some(desired) = baseline(context, policy) {
        let desired_spec = desired.get("spec").cloned().unwrap_or(Value::Null);
        let inherited = mesh::parent_mode(
            context.graph,
            &policy.cluster,
            &policy.namespace,
            level,
            root,
            None,
        );
        Some((
            Effect::of(&desired_spec, inherited),
            "its baseline manifest sets",
        ))
    } else if let Some(text) = open_reference(context, policy) {
        Effect::parse_text(text).map(|effect| (effect, "first seen"))
    } else if let Some(before) = context.before.filter(|before| !before.deleted) {
        // The mode in force before this event: the policy's old spec over today's parents
        // (a parent that changed is judged on its own event).
        let before_spec = before.spec.value();
        let inherited = mesh::parent_mode(
            context.graph,
            &before.cluster,
            &before.namespace,
            mesh::level(before, &before_spec, root),
            root,
            None,
        );
        Some((Effect::of(&before_spec, inherited), "first seen"))
    } else {
        None
    };
    let Some((reference, against)) = reference else {
        return verdicts;
    };
    let weaker = now.weaker_than(&reference);
    if weaker.is_empty() {
        if context.open_drift(policy, ID).is_some() {
            verdicts.push(Assessment::clear(
                policy,
                format!("mTLS is {} again", now.text()),
            ));
        }
        return verdicts;
    }
    let scope = match level {
        Level::Mesh => "mesh-wide".to_string(),
        Level::Namespace => format!("namespace {}", policy.namespace),
        _ => format!(
            "workloads {} in namespace {}",
            spec.pointer("/selector/matchLabels")
                .map(Value::to_string)
                .unwrap_or_default(),
            policy.namespace
        ),
    };
    let what: Vec<String> = weaker
        .iter()
        .map(|weakening| {
            format!(
                "{} {} → {}",
                weakening.scope,
                weakening.was.name(),
                weakening.now.name()
            )
        })
        .collect();
    let mut found = evidence(format!(
        "{} {} mTLS for {scope}: {} (against the mode {against})",
        policy.reference(),
        if policy.deleted {
            "was deleted, weakening"
        } else {
            "weakens"
        },
        what.join(", ")
    ));
    found.facts.insert(REFERENCE.into(), reference.text());
    found.facts.insert(CURRENT.into(), now.text());
    found.changes = policy_changes(context, &spec);
    if let Some(change) = found.changes.first() {
        found.actor = context.attribute(&change.path);
    }
    found.hint = Some(if policy.deleted {
        format!(
            "kubectl apply -f <the PeerAuthentication {} from Git>  # restores mTLS {}",
            shell_quote(&policy.name),
            reference.main.name()
        )
    } else {
        format!(
            "kubectl{} patch peerauthentication {} --type merge -p '{{\"spec\":{{\"mtls\":{{\"mode\":\"{}\"}}}}}}'  # or re-apply it from Git; check the ports too",
            namespace_flag(&policy.namespace),
            shell_quote(&policy.name),
            reference.main.name()
        )
    });
    verdicts.push(Assessment::holds(policy, found));
    verdicts
}

/// The field changes of a policy's mTLS settings in this event, for attribution and display.
fn policy_changes(context: &Context<'_>, spec: &Value) -> Vec<drift_model::FieldChange> {
    let Some(before) = context.before else {
        return Vec::new();
    };
    let before_spec = before.spec.value();
    // Leaf by leaf, so each change is attributed to the manager that owns that very field.
    let mut changes = Vec::new();
    for member in ["mtls", "portLevelMtls", "selector"] {
        crate::classify::evidence::diff::diff_values(
            &format!("/spec/{member}"),
            before_spec.get(member),
            spec.get(member),
            &mut changes,
        );
    }
    changes.truncate(drift_model::MAX_CHANGES);
    changes
}

/// Open drifts about removed policies of the changed policy's cluster, judged against what is
/// in force now.
fn removed_policies_judged_again(context: &Context<'_>) -> Vec<Assessment> {
    let policy = context.after;
    let mut verdicts = Vec::new();
    for drift in context.drifts.values() {
        if drift.class != ID || drift.cluster != policy.cluster || drift.uid == policy.uid {
            continue;
        }
        let Some(gone) = context.graph.by_uid(&drift.cluster, &drift.uid) else {
            continue;
        };
        if !gone.deleted || !gone.is_kind(ISTIO_SECURITY, "PeerAuthentication") {
            continue;
        }
        let (Some(now), Some(reference)) = (
            effect_now(context.graph, gone, context.rules.mesh_root_namespace()),
            drift
                .evidence
                .facts
                .get(REFERENCE)
                .and_then(|text| Effect::parse_text(text)),
        ) else {
            continue;
        };
        if now.weaker_than(&reference).is_empty() {
            verdicts.push(Assessment::clear(
                gone,
                format!("mTLS is {} again in its scope", now.text()),
            ));
        }
    }
    verdicts
}

/// True when Knative runs something in `namespace` of `cluster`.
fn knative_namespace(graph: &crate::classify::Graph, cluster: &str, namespace: &str) -> bool {
    graph.iter().any(|object| {
        object.cluster == cluster
            && object.namespace == namespace
            && !object.deleted
            && object.is_knative()
    })
}

fn namespace(context: &Context<'_>) -> Vec<Assessment> {
    let object = context.after;
    let open = open_reference(context, object);
    let now = NamespaceInjection::of(object);
    let reference = if let Some(desired) = baseline(context, object) {
        let labels = desired.pointer("/metadata/labels");
        Some(
            NamespaceInjection::of_labels(|key| {
                labels
                    .and_then(|labels| labels.get(key))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .text(),
        )
    } else if let Some(text) = open {
        Some(text.to_string())
    } else {
        context
            .before
            .map(|before| NamespaceInjection::of(before).text())
    };
    let Some(reference) = reference else {
        return Vec::new();
    };
    if now.text() == reference {
        return match open {
            Some(_) => vec![Assessment::clear(
                object,
                format!("sidecar injection is {reference} again"),
            )],
            None => Vec::new(),
        };
    }
    // Only namespaces where Knative runs are this class's business (scanned only on a change).
    if open.is_none()
        && !object.deleted
        && !knative_namespace(context.graph, &object.cluster, &object.name)
    {
        return Vec::new();
    }
    if object.deleted {
        return match open {
            Some(_) => vec![Assessment::clear(object, "namespace deleted")],
            None => Vec::new(),
        };
    }
    let was = NamespaceInjection::parse_text(&reference);
    let (effect, severity) = match (was.injects(), now.injects()) {
        (true, false) => (
            "may start without a sidecar (no mTLS, outside the mesh's policies)",
            Severity::Critical,
        ),
        (false, true) => ("get a sidecar now", Severity::Info),
        (true, true) => (
            "get their sidecar from another injector than before",
            Severity::Warning,
        ),
        (false, false) => ("still get no sidecar from the namespace", Severity::Info),
    };
    let mut found = evidence(format!(
        "sidecar injection of Knative namespace {} changed: {reference} → {}; new pods of its Revisions {effect}",
        object.name,
        now.text(),
    ));
    found.severity = Some(severity);
    found.facts.insert(REFERENCE.into(), reference.clone());
    found.facts.insert(CURRENT.into(), now.text());
    let paths = [
        "/metadata/labels/istio-injection",
        "/metadata/labels/istio.io~1rev",
    ];
    found.actor = paths.iter().find_map(|path| context.attribute(path));
    found.changes = paths
        .iter()
        .zip(["istio-injection", "istio.io/rev"])
        .filter_map(|(path, key)| {
            let was = context.before.and_then(|before| before.label(key));
            let is = object.label(key);
            (was != is).then(|| drift_model::FieldChange {
                path: path.to_string(),
                before: was.map(|value| Value::String(value.to_string())),
                after: is.map(|value| Value::String(value.to_string())),
            })
        })
        .collect();
    found.hint = Some(format!(
        "kubectl label namespace {} {} --overwrite  # then restart its Revisions' pods so they get the sidecar again",
        shell_quote(&object.name),
        restore_labels(&reference)
    ));
    vec![Assessment::holds(object, found)]
}

/// The `kubectl label` arguments that put a namespace's injection labels back to `reference`.
fn restore_labels(reference: &str) -> String {
    if let Some(revision) = reference.strip_prefix("istio.io/rev=") {
        format!("istio-injection- istio.io/rev={}", shell_quote(revision))
    } else if let Some(value) = reference.strip_prefix("istio-injection=") {
        format!("istio-injection={}", shell_quote(value))
    } else {
        "istio-injection- istio.io/rev-".to_string()
    }
}

fn template(context: &Context<'_>) -> Vec<Assessment> {
    let object = context.after;
    if object.deleted {
        return match open_reference(context, object) {
            Some(_) => vec![Assessment::clear(object, "deleted")],
            None => Vec::new(),
        };
    }
    // Most Service events change only the status, and the verdict reads only the spec: an
    // unchanged spec is answered before any lookup (this runs on every Service event).
    if let Some(before) = context.before {
        if before.spec.same_text(&object.spec) {
            return Vec::new();
        }
    }
    // A spec edit (a new image, a scale bound) that names no Istio label or annotation on
    // either side leaves the setting at the namespace's default: found in the texts, without
    // parsing the previous spec (most Services never mention Istio).
    let quiet_edit = context.before.is_some_and(|before| {
        let after_text = if context.object.uid == object.uid {
            std::borrow::Cow::Borrowed(context.object.spec.text())
        } else {
            object.spec.text()
        };
        !after_text.contains("istio.io/") && !before.spec.text().contains("istio.io/")
    });
    let open = open_reference(context, object);
    let desired = baseline(context, object);
    // On first sight (or re-assessed after a start or a reload) only a manifest or an open
    // drift says what is expected.
    if (context.before.is_none() || quiet_edit) && open.is_none() && desired.is_none() {
        return Vec::new();
    }
    let spec = context.after_spec();
    let now = TemplateInjection::of(&spec);
    let reference = if let Some(desired) = desired {
        Some(TemplateInjection::of(desired.get("spec").unwrap_or(&Value::Null)).text())
    } else if let Some(text) = open {
        Some(text.to_string())
    } else {
        context
            .before
            .map(|before| TemplateInjection::of(&before.spec.value()).text())
    };
    let Some(reference) = reference else {
        return Vec::new();
    };
    let now_text = now.text();
    if now_text == reference {
        return match open {
            Some(_) => vec![Assessment::clear(
                object,
                format!("the template's sidecar setting is {reference} again"),
            )],
            None => Vec::new(),
        };
    }
    let was = TemplateInjection::parse_text(&reference);
    let loses = now.loses_sidecar(&was);
    let mut found = evidence(format!(
        "the Revision template of {} changed its sidecar injection: {reference} → {now_text}; its next Revision's pods {}",
        object.reference(),
        if loses {
            "start without a sidecar (no mTLS, outside the mesh's policies)"
        } else {
            "follow another injection setting than before"
        }
    ));
    found.severity = Some(if loses {
        Severity::Critical
    } else if was.loses_sidecar(&now) {
        // The reverse: the change gives pods a sidecar they did not have.
        Severity::Info
    } else {
        Severity::Warning
    });
    let (reference, now) = (reference, now_text);
    found.facts.insert(REFERENCE.into(), reference);
    found.facts.insert(CURRENT.into(), now);
    let paths = [
        "/spec/template/metadata/labels/sidecar.istio.io~1inject",
        "/spec/template/metadata/annotations/sidecar.istio.io~1inject",
        "/spec/template/metadata/labels/istio.io~1rev",
    ];
    found.actor = paths.iter().find_map(|path| context.attribute(path));
    found.hint = Some(format!(
        "kubectl{} edit {} {}  # put spec.template.metadata's sidecar.istio.io/inject back (the label wins over the deprecated annotation), or re-apply from Git",
        namespace_flag(&object.namespace),
        if object.kind == "Service" { "ksvc" } else { "configuration" },
        shell_quote(&object.name)
    ));
    vec![Assessment::holds(object, found)]
}
