//! The comparison of one object's copies across a group's members: [`comparable`] cuts a copy
//! down to what is compared, [`compare`] names each path whose value differs with every
//! member's value there, and [`Held`] says what a member holds as far as the engine knows.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{MAX_DIVERGENCES, PRESENT, VERSION_LABEL, WHOLE_OBJECT};
use crate::classify::quantity::{is_quantity_path, same_quantity};
use crate::classify::state::ObjectState;
use drift_model::pointer::push_pointer;
use drift_model::Pairs;

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
    pub(crate) fn holders(&self) -> Vec<(Option<&Value>, Vec<&str>)> {
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
    pub(crate) fn consensus(&self) -> Option<Option<&Value>> {
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
    let kept = |map: &Pairs, version: bool| -> Map<String, Value> {
        map.iter()
            .filter(|(key, _)| (version && *key == VERSION_LABEL) || behavioural(key))
            .map(|(key, value)| (key.to_string(), Value::String(value.to_string())))
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
pub(super) fn leaves(view: &Value, ignore_paths: &[String]) -> BTreeMap<String, Value> {
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
pub(super) fn same_leaf(path: &str, a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b || (is_quantity_path(path) && same_quantity(a, b)),
        (a, b) => a == b,
    }
}

/// Every path at which the members holding a copy (their leaves, at least two) do not all hold
/// the same value, sorted: not capped (the fleet view marks each; [`compare`] caps what an alert
/// carries).
pub(super) fn differing_paths<'a>(held: &[&'a BTreeMap<String, Value>]) -> Vec<&'a String> {
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
pub(crate) fn evidenced(members: &[(String, Held)]) -> Vec<(String, Option<Value>)> {
    members
        .iter()
        .filter_map(|(cluster, held)| match held {
            Held::Copy(view) => Some((cluster.clone(), Some(view.clone()))),
            Held::Missing => Some((cluster.clone(), None)),
            Held::NotReported => None,
        })
        .collect()
}
