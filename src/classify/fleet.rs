//! Fleet drift: clusters of one group (`fleet.groups`) that should hold the same desired state
//! for the objects they compare, and where they do not.
//!
//! One implementation serves the engine's `fleet_divergence` class (members are the clusters it
//! tracks) and the `compare` command (members are snapshots): [`comparable`] cuts an object down
//! to what is compared, [`compare`] lines the members' copies up and names each path whose value
//! differs, with the value every member holds there (`None`: absent). Pure: no I/O, no clock.
//!
//! What is compared, both ways: a ConfigMap's `data` key by key (`_example` is documentation,
//! never configuration), the `spec` down to its leaves (arrays by index), the labels and
//! annotations whose hand edit changes behaviour (`Rules::is_behavioural_key`) and the
//! `app.kubernetes.io/version` label (the Knative release a component runs). Not compared: the
//! status, server-set metadata (uid, resourceVersion, generation, timestamps, managers, owners),
//! bookkeeping keys, and a group's `ignorePaths` (JSON pointers, each a prefix).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

use super::state::ObjectState;
use crate::model::glob::glob_match;
use crate::model::pointer::push_pointer;
use crate::model::Severity;

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

    /// True when the group compares this object.
    pub fn compares(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> bool {
        self.compare
            .iter()
            .any(|entry| entry.selects(api_version, kind, namespace, name))
    }
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

/// What of an object is compared across a fleet, as one JSON object:
/// `{"data": {..}, "spec": {..}, "metadata": {"labels": {..}, "annotations": {..}}}` holding
/// only what is compared (see the module docs). Secret data is compared by its hashes.
/// `behavioural` tells the label and annotation keys compared besides the version label
/// ([`crate::classify::Rules::is_behavioural_key`] and not bookkeeping; passed in so this
/// module and the rules, which hold the groups, do not import each other).
pub fn comparable(object: &ObjectState, behavioural: &dyn Fn(&str) -> bool) -> Value {
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
        view.insert("spec".to_string(), object.spec.value());
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

/// The leaves of a compared view: pointer → value. Objects and arrays are walked down (arrays
/// by index); an empty object or array has no leaf, so it is the same as absent (as it is to
/// Kubernetes for `data`, labels and most spec fields, and a ConfigMap holding only ignored
/// keys is then the same as one holding none).
fn leaves(
    value: &Value,
    path: &str,
    ignore: &dyn Fn(&str) -> bool,
    out: &mut BTreeMap<String, Value>,
) {
    if ignore(path) {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                leaves(child, &push_pointer(path, key), ignore, out);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                leaves(child, &push_pointer(path, &index.to_string()), ignore, out);
            }
        }
        leaf => {
            out.insert(path.to_string(), leaf.clone());
        }
    }
}

/// Compares one object across the members: `members` is every member with its copy's compared
/// view ([`comparable`]), `None` where the member does not hold the object. Gives the paths
/// whose value differs (both ways: a key one member lacks is a difference), sorted by path,
/// at most [`MAX_DIVERGENCES`]; first, when the object is missing from some members but not
/// all, a [`WHOLE_OBJECT`] entry (`present` or absent per member). Fewer than two members, or
/// an object no member holds, never diverge. `ignore_paths` are pointer prefixes.
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
    // A prefix covers the pointers below it segment by segment (`/data/max` does not cover
    // `/data/max-scale`).
    let ignore = |pointer: &str| {
        ignore_paths.iter().any(|prefix| {
            pointer == prefix
                || (pointer.starts_with(prefix.as_str())
                    && pointer.as_bytes().get(prefix.len()) == Some(&b'/'))
        })
    };
    // The members that hold the object are compared among themselves; a missing copy is
    // reported once, above, not at every path.
    let held: Vec<(&str, BTreeMap<String, Value>)> = members
        .iter()
        .filter_map(|(cluster, view)| {
            view.as_ref().map(|view| {
                let mut out = BTreeMap::new();
                leaves(view, "", &ignore, &mut out);
                (cluster.as_str(), out)
            })
        })
        .collect();
    if held.len() < 2 {
        return divergences;
    }
    let mut paths: Vec<&String> = held.iter().flat_map(|(_, leaves)| leaves.keys()).collect();
    paths.sort();
    paths.dedup();
    for path in paths {
        let first = held[0].1.get(path);
        if held.iter().all(|(_, leaves)| leaves.get(path) == first) {
            continue;
        }
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

/// One sentence about an object's divergences: which paths, which clusters hold which value.
pub fn summary(object: &FleetObject, group: &str, divergences: &[Divergence]) -> String {
    let what = object.key();
    let Some(first) = divergences.first() else {
        return format!("{what} is alike in every member of fleet group {group}");
    };
    if first.path == WHOLE_OBJECT {
        let holders = first.holders();
        let missing: Vec<&str> = holders
            .iter()
            .filter(|(value, _)| value.is_none())
            .flat_map(|(_, clusters)| clusters.iter().copied())
            .collect();
        let mut text = format!(
            "{what} is missing from {} in fleet group {group}",
            missing.join(", ")
        );
        if divergences.len() > 1 {
            text.push_str(&format!(
                ", and differs where present: {}",
                paths_text(&divergences[1..])
            ));
        }
        return text;
    }
    format!(
        "{what} differs across fleet group {group}: {}",
        paths_text(divergences)
    )
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

/// A runnable fix: per member that does not hold the majority value, a `kubectl --context`
/// line that aligns it (a merge patch of the differing `data` keys, labels and annotations; an
/// edit for spec fields; an apply from a member that holds it for a missing object).
pub fn hint(object: &FleetObject, divergences: &[Divergence]) -> Option<String> {
    let first = divergences.first()?;
    let resource = format!(
        "{}{}",
        object.kind.to_lowercase(),
        match object.group() {
            "" => String::new(),
            group => format!(".{group}"),
        }
    );
    let namespace = if object.namespace.is_empty() {
        String::new()
    } else {
        format!(" -n {}", object.namespace)
    };
    let mut lines = Vec::new();
    if first.path == WHOLE_OBJECT {
        let holders = first.holders();
        let source = holders
            .iter()
            .find(|(value, _)| value.is_some())
            .and_then(|(_, clusters)| clusters.first().copied())?;
        for (value, clusters) in &holders {
            if value.is_some() {
                continue;
            }
            for cluster in clusters {
                lines.push(format!(
                    "kubectl --context {source}{namespace} get {resource} {name} -o yaml | kubectl --context {cluster} apply -f -",
                    name = object.name
                ));
            }
        }
    }
    // Per cluster, the merge patch that brings its data, labels and annotations to the
    // majority's values; spec fields are named for an edit.
    let mut patches: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    let mut edits: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for divergence in divergences.iter().filter(|d| d.path != WHOLE_OBJECT) {
        let majority = divergence.majority().cloned();
        let segments = crate::model::pointer::pointer_segments(&divergence.path);
        for (cluster, value) in &divergence.values {
            if *value == majority {
                continue;
            }
            match segments.as_slice() {
                [section, key] if section == "data" => {
                    insert_patch(
                        patches.entry(cluster).or_default(),
                        &["data"],
                        key,
                        &majority,
                    );
                }
                [meta, section, key] if meta == "metadata" => {
                    insert_patch(
                        patches.entry(cluster).or_default(),
                        &["metadata", section],
                        key,
                        &majority,
                    );
                }
                _ => edits.entry(cluster).or_default().push(&divergence.path),
            }
        }
    }
    for (cluster, patch) in patches {
        lines.push(format!(
            "kubectl --context {cluster}{namespace} patch {resource} {} --type merge -p '{}'",
            object.name,
            Value::Object(patch).to_string().replace('\'', "'\\''")
        ));
    }
    for (cluster, paths) in edits {
        lines.push(format!(
            "kubectl --context {cluster}{namespace} edit {resource} {}  # align {}",
            object.name,
            paths.join(", ")
        ));
    }
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

/// The divergences as a JSON fact: `[{"path", "values": {cluster: value or null}}]`, what the
/// API, the dashboard and the messages read to show which cluster holds which value.
pub fn values_fact(divergences: &[Divergence]) -> String {
    Value::Array(
        divergences
            .iter()
            .map(|divergence| {
                let values: Map<String, Value> = divergence
                    .values
                    .iter()
                    .map(|(cluster, value)| (cluster.clone(), value.clone().unwrap_or(Value::Null)))
                    .collect();
                serde_json::json!({"path": divergence.path, "values": values})
            })
            .collect(),
    )
    .to_string()
}

/// Most rows of one object in the fleet view (the leaves of a large spec are many).
pub const MAX_ROWS: usize = 200;

/// One row of an object's cluster-by-cluster table: a path, each member's value there, and
/// whether they differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// JSON pointer ([`WHOLE_OBJECT`] for the row that says which members hold the object).
    pub path: String,
    /// Each member's value, in member order (`None`: absent).
    pub values: Vec<Option<Value>>,
    /// True when the members do not all hold the same value.
    pub differs: bool,
}

/// The cluster-by-cluster table of one object: every compared path any member holds (up to
/// [`MAX_ROWS`], differing rows first so none is cut), with the [`WHOLE_OBJECT`] row first
/// when some member lacks the object. Members lacking it show absent on every row.
pub fn rows(members: &[(String, Option<Value>)], ignore_paths: &[String]) -> Vec<Row> {
    let divergences = compare(members, ignore_paths);
    let mut rows: Vec<Row> = divergences
        .iter()
        .map(|divergence| Row {
            path: divergence.path.clone(),
            // `compare` lists only the members holding the object below the whole-object row;
            // the table has a column per member.
            values: members
                .iter()
                .map(|(cluster, view)| {
                    if view.is_none() && divergence.path != WHOLE_OBJECT {
                        return None;
                    }
                    divergence
                        .values
                        .iter()
                        .find(|(held, _)| held == cluster)
                        .and_then(|(_, value)| value.clone())
                })
                .collect(),
            differs: true,
        })
        .collect();
    let differing: std::collections::BTreeSet<String> =
        rows.iter().map(|row| row.path.clone()).collect();
    let ignore = |pointer: &str| {
        ignore_paths.iter().any(|prefix| {
            pointer == prefix
                || (pointer.starts_with(prefix.as_str())
                    && pointer.as_bytes().get(prefix.len()) == Some(&b'/'))
        })
    };
    let held: Vec<Option<BTreeMap<String, Value>>> = members
        .iter()
        .map(|(_, view)| {
            view.as_ref().map(|view| {
                let mut out = BTreeMap::new();
                leaves(view, "", &ignore, &mut out);
                out
            })
        })
        .collect();
    let mut alike: BTreeMap<&String, ()> = BTreeMap::new();
    for leaves in held.iter().flatten() {
        for path in leaves.keys() {
            if !differing.contains(path) {
                alike.insert(path, ());
            }
        }
    }
    for path in alike.into_keys() {
        if rows.len() >= MAX_ROWS {
            break;
        }
        rows.push(Row {
            path: path.clone(),
            values: held
                .iter()
                .map(|leaves| leaves.as_ref().and_then(|leaves| leaves.get(path).cloned()))
                .collect(),
            differs: false,
        });
    }
    rows.truncate(MAX_ROWS);
    rows
}

/// A member of a fleet group as the fleet view shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberView {
    /// Cluster name.
    pub cluster: String,
    /// When an event of the cluster was last applied (none since the process started, for a
    /// member known from the stored state or from resync lists only).
    pub last_event: Option<crate::model::Millis>,
}

/// One compared object in the fleet view.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectView {
    /// The object.
    pub object: FleetObject,
    /// Its table, one value per member.
    pub rows: Vec<Row>,
    /// The open drift about it: (id, state).
    pub drift: Option<(String, crate::model::DriftState)>,
}

/// One group in the fleet view.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupView {
    /// The group as configured.
    pub group: FleetGroup,
    /// Its members, sorted by name.
    pub members: Vec<MemberView>,
    /// The objects it compares that a member holds, sorted by key.
    pub objects: Vec<ObjectView>,
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
            summary(&object, "prod", &[divergence]),
            "ConfigMap/knative-serving/config-autoscaler differs across fleet group prod: /data/max-scale is \"0\" in prod-eu, staging; \"10\" in prod-us"
        );
    }

    #[test]
    fn the_table_has_a_column_per_member_and_differing_rows_first() {
        let views = members(&[
            ("a", Some(json!({"data": {"k": "1", "same": "x"}}))),
            ("b", Some(json!({"data": {"k": "2", "same": "x"}}))),
            ("c", None),
        ]);
        let got: Vec<(String, Vec<Option<Value>>, bool)> = rows(&views, &[])
            .into_iter()
            .map(|row| (row.path, row.values, row.differs))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "".into(),
                    vec![Some(json!("present")), Some(json!("present")), None],
                    true
                ),
                (
                    "/data/k".into(),
                    vec![Some(json!("1")), Some(json!("2")), None],
                    true
                ),
                (
                    "/data/same".into(),
                    vec![Some(json!("x")), Some(json!("x")), None],
                    false
                ),
            ]
        );
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
