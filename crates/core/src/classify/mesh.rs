//! Istio's data-plane security as Istio itself resolves it: the mTLS mode a PeerAuthentication
//! puts in force through its parents, and whether a pod gets a sidecar from its namespace's
//! labels and its template's label or annotation. `mesh_security_drift` compares these, not the
//! objects' fields: a PeerAuthentication that says nothing (`UNSET`) is as strong as its parent,
//! and a new namespace label can be overruled by an older one.
//!
//! Facts and sources: `istio/istio` `pilot/pkg/security/authn/policy_applier.go`
//! (`ComposePeerAuthentication`: workload > namespace > mesh, the oldest within a scope, `UNSET`
//! inherits, no policy is `PERMISSIVE`, a selector in the root namespace is ignored), the
//! injector's webhook selectors (`istio-injection` over `istio.io/rev`) and `injectRequired`
//! (the pod label over the deprecated annotation; other values fall back to the default).

use std::collections::BTreeMap;

use serde_json::Value;

use super::graph::Graph;
use super::state::ObjectState;

/// Istio's security API group (PeerAuthentication).
pub(crate) const ISTIO_SECURITY: &str = "security.istio.io";
/// Istio's networking API group (VirtualService, DestinationRule, Gateway).
pub(crate) const ISTIO_NETWORKING: &str = "networking.istio.io";
/// `meshConfig.rootNamespace`'s default: a PeerAuthentication without a selector there is the
/// mesh-wide one (`rules.mesh.rootNamespace` names another, as managed meshes use).
pub(crate) const ROOT_NAMESPACE: &str = "istio-system";

/// True for an object of one of Istio's API groups.
pub(crate) fn is_istio(object: &ObjectState) -> bool {
    matches!(object.group(), ISTIO_SECURITY | ISTIO_NETWORKING)
}

/// An mTLS mode, ordered by strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mode {
    /// Plain text only.
    Disable,
    /// Plain text or mTLS.
    Permissive,
    /// mTLS with a client certificate.
    Strict,
}

impl Mode {
    /// A mode as the API writes it; `None` for `UNSET`, a missing mode or an unknown word (which
    /// the CRD refuses), all of which inherit.
    fn parse(value: Option<&Value>) -> Option<Mode> {
        match value?.as_str()? {
            "STRICT" => Some(Mode::Strict),
            "PERMISSIVE" => Some(Mode::Permissive),
            "DISABLE" => Some(Mode::Disable),
            _ => None,
        }
    }

    /// The API's word.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Strict => "STRICT",
            Mode::Permissive => "PERMISSIVE",
            Mode::Disable => "DISABLE",
        }
    }

    fn from_name(name: &str) -> Option<Mode> {
        Mode::parse(Some(&Value::String(name.to_string())))
    }
}

/// Where a PeerAuthentication applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// No selector, in the root namespace.
    Mesh,
    /// No selector, in another namespace.
    Namespace,
    /// A selector, outside the root namespace.
    Workload,
    /// A selector in the root namespace: Istio ignores it.
    Ignored,
}

/// The level of a PeerAuthentication with this spec.
pub(crate) fn level(object: &ObjectState, spec: &Value, root: &str) -> Level {
    let selected = spec
        .pointer("/selector/matchLabels")
        .and_then(Value::as_object)
        .is_some_and(|labels| !labels.is_empty());
    match (object.namespace == root, selected) {
        (true, false) => Level::Mesh,
        (true, true) => Level::Ignored,
        (false, false) => Level::Namespace,
        (false, true) => Level::Workload,
    }
}

/// The modes a PeerAuthentication puts in force: on its workloads' every port, and per port
/// where it overrides that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Effect {
    /// The mode of every port without an override.
    pub(crate) main: Mode,
    /// Port overrides (`portLevelMtls`), by port number as written.
    pub(crate) ports: BTreeMap<String, Mode>,
}

/// One place where an effect is weaker than a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Weakening {
    /// `every port` or `port 8443`.
    pub(crate) scope: String,
    /// The reference's mode there.
    pub(crate) was: Mode,
    /// The mode now.
    pub(crate) now: Mode,
}

impl Effect {
    /// The effect of a PeerAuthentication's spec whose parent's mode is `inherited`.
    pub(crate) fn of(spec: &Value, inherited: Mode) -> Effect {
        let main = Mode::parse(spec.pointer("/mtls/mode")).unwrap_or(inherited);
        let ports = spec
            .get("portLevelMtls")
            .and_then(Value::as_object)
            .map(|ports| {
                ports
                    .iter()
                    .map(|(port, setting)| {
                        (
                            port.clone(),
                            Mode::parse(setting.get("mode")).unwrap_or(main),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Effect { main, ports }
    }

    /// What is in force once a policy is gone: its parent's mode on every port.
    pub(crate) fn inherited(mode: Mode) -> Effect {
        Effect {
            main: mode,
            ports: BTreeMap::new(),
        }
    }

    /// The mode on one port.
    fn on(&self, port: &str) -> Mode {
        self.ports.get(port).copied().unwrap_or(self.main)
    }

    /// Every place where `self` is weaker than `reference` (ports of either side included).
    pub(crate) fn weaker_than(&self, reference: &Effect) -> Vec<Weakening> {
        let mut found = Vec::new();
        if self.main < reference.main {
            found.push(Weakening {
                scope: "every port".to_string(),
                was: reference.main,
                now: self.main,
            });
        }
        let ports: std::collections::BTreeSet<&String> =
            self.ports.keys().chain(reference.ports.keys()).collect();
        for port in ports {
            let (was, now) = (reference.on(port), self.on(port));
            // A port that only follows the main mode is already covered by it.
            let follows = !self.ports.contains_key(port) && !reference.ports.contains_key(port);
            if now < was && !follows && !(now == self.main && was == reference.main) {
                found.push(Weakening {
                    scope: format!("port {port}"),
                    was,
                    now,
                });
            }
        }
        found
    }

    /// A compact text of the effect (`STRICT`, `STRICT;8443=PERMISSIVE`), kept in a drift's
    /// facts as the reference later events are judged against.
    pub(crate) fn text(&self) -> String {
        let mut text = self.main.name().to_string();
        for (port, mode) in &self.ports {
            text.push_str(&format!(";{port}={}", mode.name()));
        }
        text
    }

    /// [`Effect::text`] read back.
    pub(crate) fn parse_text(text: &str) -> Option<Effect> {
        let mut parts = text.split(';');
        let main = Mode::from_name(parts.next()?)?;
        let mut ports = BTreeMap::new();
        for part in parts {
            let (port, mode) = part.split_once('=')?;
            ports.insert(port.to_string(), Mode::from_name(mode)?);
        }
        Some(Effect { main, ports })
    }
}

/// The policy in force at a scope without a selector (`namespace`, or the root namespace for
/// the mesh): the oldest live PeerAuthentication without a selector there, skipping `skip` (a
/// policy being judged as gone). Ties on time go to the name, as Istio sorts.
fn scope_policy<'a>(
    graph: &'a Graph,
    cluster: &str,
    namespace: &str,
    skip: Option<&str>,
) -> Option<&'a ObjectState> {
    graph
        .iter()
        .filter(|object| {
            object.cluster == cluster
                && object.namespace == namespace
                && !object.deleted
                && object.is_kind(ISTIO_SECURITY, "PeerAuthentication")
                && Some(object.uid.as_str()) != skip
        })
        .filter(|object| {
            object
                .spec
                .value()
                .pointer("/selector/matchLabels")
                .and_then(Value::as_object)
                .is_none_or(|labels| labels.is_empty())
        })
        .min_by(|left, right| {
            (&left.creation_timestamp, &left.name).cmp(&(&right.creation_timestamp, &right.name))
        })
}

/// The mode the mesh level puts in force (`PERMISSIVE` without one).
fn mesh_mode(graph: &Graph, cluster: &str, root: &str, skip: Option<&str>) -> Mode {
    scope_policy(graph, cluster, root, skip)
        .and_then(|policy| Mode::parse(policy.spec.value().pointer("/mtls/mode")))
        .unwrap_or(Mode::Permissive)
}

/// The mode a namespace's workloads get without a workload policy.
fn namespace_mode(
    graph: &Graph,
    cluster: &str,
    namespace: &str,
    root: &str,
    skip: Option<&str>,
) -> Mode {
    let mesh = mesh_mode(graph, cluster, root, skip);
    if namespace == root {
        return mesh;
    }
    scope_policy(graph, cluster, namespace, skip)
        .and_then(|policy| Mode::parse(policy.spec.value().pointer("/mtls/mode")))
        .unwrap_or(mesh)
}

/// The mode a policy at `level` in `namespace` inherits from its parents, `skip` left out.
pub(crate) fn parent_mode(
    graph: &Graph,
    cluster: &str,
    namespace: &str,
    level: Level,
    root: &str,
    skip: Option<&str>,
) -> Mode {
    match level {
        Level::Mesh | Level::Ignored => Mode::Permissive,
        Level::Namespace => mesh_mode(graph, cluster, root, skip),
        Level::Workload => namespace_mode(graph, cluster, namespace, root, skip),
    }
}

/// True when `policy` (mesh or namespace level) is the one in force at its scope: an older
/// policy without a selector there wins.
pub(crate) fn in_force(graph: &Graph, policy: &ObjectState) -> bool {
    scope_policy(graph, &policy.cluster, &policy.namespace, None)
        .is_none_or(|winner| winner.uid == policy.uid)
}

/// True when an older live workload policy in `policy`'s namespace selects every workload
/// `policy` selects (its `matchLabels` are a subset of `policy`'s): Istio applies the oldest
/// policy that selects a workload, so `policy` is in force nowhere.
pub(crate) fn workload_overruled(graph: &Graph, policy: &ObjectState, spec: &Value) -> bool {
    let Some(labels) = spec
        .pointer("/selector/matchLabels")
        .and_then(Value::as_object)
    else {
        return false;
    };
    graph.iter().any(|other| {
        other.cluster == policy.cluster
            && other.namespace == policy.namespace
            && other.uid != policy.uid
            && !other.deleted
            && other.is_kind(ISTIO_SECURITY, "PeerAuthentication")
            && (&other.creation_timestamp, &other.name) < (&policy.creation_timestamp, &policy.name)
            && other
                .spec
                .value()
                .pointer("/selector/matchLabels")
                .and_then(Value::as_object)
                .is_some_and(|theirs| {
                    !theirs.is_empty()
                        && theirs
                            .iter()
                            .all(|(key, value)| labels.get(key) == Some(value))
                })
    })
}

/// True when a removed mesh or namespace `policy` was the one in force at its scope: no live
/// policy without a selector there is older.
pub(crate) fn was_in_force(graph: &Graph, policy: &ObjectState) -> bool {
    scope_policy(graph, &policy.cluster, &policy.namespace, Some(&policy.uid)).is_none_or(|other| {
        (&other.creation_timestamp, &other.name) > (&policy.creation_timestamp, &policy.name)
    })
}

/// What the effect of a policy's scope is now: the policy's own, or once it is gone (or lost
/// its scope to an older one), what its workloads fall back to.
pub(crate) fn effect_now(graph: &Graph, policy: &ObjectState, root: &str) -> Option<Effect> {
    let spec = policy.spec.value();
    let level = level(policy, &spec, root);
    if level == Level::Ignored {
        return None;
    }
    if policy.deleted {
        // Without it, its scope has whatever the rest gives (another policy without a selector
        // in the namespace, or the parents).
        let mode = match level {
            Level::Mesh => mesh_mode(graph, &policy.cluster, root, Some(&policy.uid)),
            Level::Namespace | Level::Workload => namespace_mode(
                graph,
                &policy.cluster,
                &policy.namespace,
                root,
                Some(&policy.uid),
            ),
            Level::Ignored => return None,
        };
        return Some(Effect::inherited(mode));
    }
    let inherited = parent_mode(graph, &policy.cluster, &policy.namespace, level, root, None);
    Some(Effect::of(&spec, inherited))
}

/// Whether a namespace's pods get a sidecar, from its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NamespaceInjection {
    /// `istio-injection: enabled`: the default revision injects.
    Enabled,
    /// `istio.io/rev: <rev>` and no `istio-injection`: that revision injects.
    Revision(String),
    /// `istio-injection` with any other value (`disabled`): no webhook matches.
    Disabled(String),
    /// Neither label: only pods that opt in (or every pod, with
    /// `enableNamespacesByDefault`).
    Unlabelled,
}

impl NamespaceInjection {
    /// A namespace's setting.
    pub(crate) fn of(namespace: &ObjectState) -> NamespaceInjection {
        NamespaceInjection::of_labels(|key| namespace.label(key).map(str::to_string))
    }

    /// [`NamespaceInjection::text`] read back.
    pub(crate) fn parse_text(text: &str) -> NamespaceInjection {
        if text == "istio-injection=enabled" {
            NamespaceInjection::Enabled
        } else if let Some(revision) = text.strip_prefix("istio.io/rev=") {
            NamespaceInjection::Revision(revision.to_string())
        } else if let Some(value) = text.strip_prefix("istio-injection=") {
            NamespaceInjection::Disabled(value.to_string())
        } else {
            NamespaceInjection::Unlabelled
        }
    }

    /// The setting a namespace manifest's labels make.
    pub(crate) fn of_labels(label: impl Fn(&str) -> Option<String>) -> NamespaceInjection {
        match label("istio-injection").as_deref() {
            Some("enabled") => NamespaceInjection::Enabled,
            Some(other) => NamespaceInjection::Disabled(other.to_string()),
            None => match label("istio.io/rev") {
                Some(revision) => NamespaceInjection::Revision(revision),
                None => NamespaceInjection::Unlabelled,
            },
        }
    }

    /// True when the namespace's pods get a sidecar from its labels alone.
    pub(crate) fn injects(&self) -> bool {
        matches!(
            self,
            NamespaceInjection::Enabled | NamespaceInjection::Revision(_)
        )
    }

    /// How it reads in a finding, and is kept in its facts.
    pub(crate) fn text(&self) -> String {
        match self {
            NamespaceInjection::Enabled => "istio-injection=enabled".to_string(),
            NamespaceInjection::Revision(revision) => format!("istio.io/rev={revision}"),
            NamespaceInjection::Disabled(value) => format!("istio-injection={value}"),
            NamespaceInjection::Unlabelled => "no injection label".to_string(),
        }
    }
}

/// What a Revision template says about its pods' sidecar (Istio's `injectRequired`): the label
/// `sidecar.istio.io/inject` when present (a value other than `true`/`false` means the
/// namespace's policy decides: the annotation is not read then), else the deprecated annotation
/// of the same name; and the pod label `istio.io/rev`, which opts a pod into a revision's
/// injector in a namespace without injection labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TemplateInjection {
    /// `Some(inject)` when the label or the annotation says `true` or `false`.
    pub(crate) inject: Option<bool>,
    /// Which said it: `label` or `annotation`.
    pub(crate) via: &'static str,
    /// The template's `istio.io/rev` label.
    pub(crate) revision: Option<String>,
}

impl TemplateInjection {
    /// A Service's or Configuration's spec's template setting.
    pub(crate) fn of(spec: &Value) -> TemplateInjection {
        let read = |map: &str, key: &str| -> Option<String> {
            spec.pointer(&format!("/template/metadata/{map}/{key}"))?
                .as_str()
                .map(str::to_string)
        };
        let decide = |value: Option<String>| match value.as_deref() {
            Some("true") => Some(true),
            Some("false") => Some(false),
            _ => None,
        };
        let label = read("labels", "sidecar.istio.io~1inject");
        let (inject, via) = if label.is_some() {
            (decide(label), "label")
        } else {
            (
                decide(read("annotations", "sidecar.istio.io~1inject")),
                "annotation",
            )
        };
        TemplateInjection {
            inject,
            // Which said it matters only when one did.
            via: if inject.is_some() { via } else { "label" },
            revision: read("labels", "istio.io~1rev"),
        }
    }

    /// How a finding says it and its facts keep it.
    pub(crate) fn text(&self) -> String {
        let mut text = match self.inject {
            Some(inject) => format!("sidecar.istio.io/inject={inject} ({})", self.via),
            None => "namespace default".to_string(),
        };
        if let Some(revision) = &self.revision {
            text.push_str(&format!(", istio.io/rev={revision}"));
        }
        text
    }

    /// [`TemplateInjection::text`] read back (a drift's facts keep the reference as text).
    pub(crate) fn parse_text(text: &str) -> TemplateInjection {
        let (setting, revision) = match text.split_once(", istio.io/rev=") {
            Some((setting, revision)) => (setting, Some(revision.to_string())),
            None => (text, None),
        };
        let (inject, via) = match setting.strip_prefix("sidecar.istio.io/inject=") {
            Some(rest) => (
                Some(rest.starts_with("true")),
                if rest.ends_with("(annotation)") {
                    "annotation"
                } else {
                    "label"
                },
            ),
            None => (None, "label"),
        };
        TemplateInjection {
            inject,
            via,
            revision,
        }
    }

    /// True when the template keeps its pods out of the mesh, or no longer opts them in where
    /// `reference` did: the change takes a sidecar away.
    pub(crate) fn loses_sidecar(&self, reference: &TemplateInjection) -> bool {
        let opted_in = |setting: &TemplateInjection| {
            setting.inject == Some(true) || setting.revision.is_some()
        };
        (self.inject == Some(false) && reference.inject != Some(false))
            || (opted_in(reference) && !opted_in(self) && self.inject != Some(true))
    }
}

/// The split a VirtualService sends, route by route (`hello-00001 90%, hello-00002 10%`; routes
/// with the same split once), each destination named by the Revision net-istio's header names,
/// else by its host's first label.
pub(crate) fn served_split(spec: &Value) -> String {
    let mut splits: Vec<String> = Vec::new();
    for route in spec
        .get("http")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let destinations: Vec<String> = route
            .get("route")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|destination| {
                let revision = destination
                    .pointer("/headers/request/set/Knative-Serving-Revision")
                    .and_then(Value::as_str)
                    .or_else(|| {
                        destination
                            .pointer("/destination/host")
                            .and_then(Value::as_str)
                            .and_then(|host| host.split('.').next())
                    })
                    .unwrap_or("?");
                // A single destination without a weight takes everything.
                let weight = destination
                    .get("weight")
                    .and_then(Value::as_i64)
                    .unwrap_or(100);
                format!("{revision} {weight}%")
            })
            .collect();
        let split = destinations.join(", ");
        if !split.is_empty() && !splits.contains(&split) {
            splits.push(split);
        }
    }
    if splits.is_empty() {
        "no routes".to_string()
    } else {
        format!("sends {}", splits.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unset_inherits_and_ports_fall_back_to_the_main_mode() {
        let spec = json!({"selector": {"matchLabels": {"app": "a"}},
                          "portLevelMtls": {"9090": {"mode": "PERMISSIVE"}, "8080": {"mode": "UNSET"}}});
        let effect = Effect::of(&spec, Mode::Strict);
        assert_eq!(effect.main, Mode::Strict);
        assert_eq!(effect.ports["9090"], Mode::Permissive);
        assert_eq!(effect.ports["8080"], Mode::Strict);
        assert_eq!(effect.text(), "STRICT;8080=STRICT;9090=PERMISSIVE");
        assert_eq!(Effect::parse_text(&effect.text()), Some(effect));
        assert_eq!(Effect::parse_text("LOOSE"), None);
    }

    #[test]
    fn a_virtual_services_split_is_read_per_revision() {
        let spec = json!({"http": [
            {"route": [
                {"destination": {"host": "hello-00001.default.svc.cluster.local"}, "weight": 90,
                 "headers": {"request": {"set": {"Knative-Serving-Revision": "hello-00001"}}}},
                {"destination": {"host": "hello-00002.default.svc.cluster.local"}, "weight": 10}]},
            {"route": [
                {"destination": {"host": "hello-00001.default.svc.cluster.local"}, "weight": 90},
                {"destination": {"host": "hello-00002.default.svc.cluster.local"}, "weight": 10}]},
            {"route": [{"destination": {"host": "hello-00002.default.svc.cluster.local"}}]}]});
        assert_eq!(
            served_split(&spec),
            "sends hello-00001 90%, hello-00002 10%; hello-00002 100%"
        );
        assert_eq!(served_split(&json!({})), "no routes");
    }

    #[test]
    fn a_template_label_wins_over_the_annotation_whatever_its_value() {
        let spec = |labels: Value, annotations: Value| json!({"template": {"metadata": {"labels": labels, "annotations": annotations}}});
        let off = json!({"sidecar.istio.io/inject": "false"});
        let on = json!({"sidecar.istio.io/inject": "true"});
        let invalid = json!({"sidecar.istio.io/inject": "nope"});
        // An invalid label leaves it to the namespace: the annotation is not read.
        assert_eq!(
            TemplateInjection::of(&spec(invalid, off.clone())).text(),
            "namespace default"
        );
        assert_eq!(
            TemplateInjection::of(&spec(json!({}), off.clone())).text(),
            "sidecar.istio.io/inject=false (annotation)"
        );
        assert_eq!(
            TemplateInjection::of(&spec(on, off.clone())).text(),
            "sidecar.istio.io/inject=true (label)"
        );
        let revision = TemplateInjection::of(&spec(json!({"istio.io/rev": "canary"}), json!({})));
        assert_eq!(revision.text(), "namespace default, istio.io/rev=canary");
        let plain = TemplateInjection::of(&spec(json!({}), json!({})));
        for setting in [&revision, &plain] {
            assert_eq!(&TemplateInjection::parse_text(&setting.text()), setting);
        }
        let by_annotation = TemplateInjection::of(&spec(json!({}), off.clone()));
        assert_eq!(
            TemplateInjection::parse_text(&by_annotation.text()),
            by_annotation
        );
        // Dropping the revision label takes the sidecar away in an unlabelled namespace; adding
        // it, or an opt-out turned back into the default, does not.
        assert!(plain.loses_sidecar(&revision));
        assert!(!revision.loses_sidecar(&plain));
        let opted_out = TemplateInjection::of(&spec(off, json!({})));
        assert!(opted_out.loses_sidecar(&plain));
        assert!(!plain.loses_sidecar(&opted_out));
    }

    #[test]
    fn namespace_injection_text_reads_back() {
        for setting in [
            NamespaceInjection::Enabled,
            NamespaceInjection::Revision("1-22".into()),
            NamespaceInjection::Disabled("disabled".into()),
            NamespaceInjection::Unlabelled,
        ] {
            assert_eq!(NamespaceInjection::parse_text(&setting.text()), setting);
        }
    }

    #[test]
    fn weakening_is_per_port_and_only_downwards() {
        let strict = Effect::inherited(Mode::Strict);
        let permissive = Effect::inherited(Mode::Permissive);
        assert_eq!(permissive.weaker_than(&strict).len(), 1);
        assert!(strict.weaker_than(&permissive).is_empty());
        let port_opened = Effect::of(
            &json!({"mtls": {"mode": "STRICT"}, "portLevelMtls": {"8443": {"mode": "DISABLE"}}}),
            Mode::Permissive,
        );
        let found = port_opened.weaker_than(&strict);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].scope, "port 8443");
        assert_eq!((found[0].was, found[0].now), (Mode::Strict, Mode::Disable));
        // Dropping a weaker port override is a strengthening.
        assert!(strict.weaker_than(&port_opened).is_empty());
    }
}
