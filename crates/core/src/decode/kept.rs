//! The status fields a state keeps, serialized straight from the event's status.
//!
//! The text is what serde_json writes for a `Map` of the kept members (keys sorted) with the
//! conditions' write times left out, so equal statuses have equal text; it is written from
//! borrowed parts instead of a copied `Map`. The shape check writes it on the HTTP worker that
//! parsed the event and frees the tree there (`shape::checked_with`): the writer
//! takes the text as it is, and the thread that frees the decoded event frees one block, not a
//! tree of maps (BENCHMARKS.md, issue 28).

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

/// Status fields kept, for every kind alike (one list, not one per kind: a name kept for one kind
/// is kept wherever it appears); everything else in `status` is churn for drift purposes, and is
/// skipped by the parser, never built into a tree (only its size counts, for the bound).
pub(crate) const KEPT_STATUS: &[&str] = &[
    "observedGeneration",
    "conditions",
    "latestCreatedRevisionName",
    "latestReadyRevisionName",
    "traffic",
    "url",
    "containerStatuses",
    "imageDigest",
    "actualReplicas",
    "desiredReplicas",
    "replicas",
    "readyReplicas",
    "availableReplicas",
    "updatedReplicas",
    // PodAutoscaler: the scale it wants and the scale it has.
    "desiredScale",
    "actualScale",
    // The operator's KnativeServing/KnativeEventing: the version installed.
    "version",
    // Where a Source sends (its resolved sink) and where an addressable receives: what team
    // invariants check ("every Source has a resolved sink").
    "sinkUri",
    "address",
    // A Knative or cert-manager Certificate's expiry, and why its renewal is failing
    // (`certificate_expiring`).
    "notAfter",
    "failedIssuanceAttempts",
    "lastFailureTime",
];

/// A JSON value kept serialized: for a status, the text serde_json writes for it (object keys
/// sorted, so equal values have equal text); for a spec, see `classify::spec::Spec`. A parsed
/// `serde_json::Value` tree costs seven to twelve times its text in memory (each small map is a B-tree node of some 600 bytes: a Route's kept status is
/// 338 bytes of JSON and 4.2 KB as a tree), and most events never look at the spec or status of
/// the state they replace; a class that needs one parses it ([`Serialized::value`]), and an
/// unchanged one is recognised by its text alone. The store writes the text as it is.
#[derive(Clone)]
pub struct Serialized(Box<serde_json::value::RawValue>);

impl Serialized {
    /// The serialized form of `value`.
    pub fn from_value(value: &Value) -> Serialized {
        match serde_json::value::to_raw_value(value) {
            Ok(raw) => Serialized(raw),
            // A `Value` always serializes (its map keys are strings); this arm is unreachable.
            Err(_) => Serialized::default(),
        }
    }

    /// The value, parsed.
    pub fn value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The value at a JSON pointer below it (`/traffic`), parsed.
    pub fn pointer(&self, pointer: &str) -> Option<Value> {
        let mut value = self.value();
        value.pointer_mut(pointer).map(Value::take)
    }

    /// A value already serialized (a stored state being restored).
    pub(crate) fn from_raw(raw: Box<serde_json::value::RawValue>) -> Serialized {
        Serialized(raw)
    }

    /// The serialized value.
    pub fn raw(&self) -> &serde_json::value::RawValue {
        &self.0
    }

    /// The serialized text.
    pub fn text(&self) -> &str {
        self.0.get()
    }

    /// True for an absent value.
    pub fn is_null(&self) -> bool {
        self.0.get() == "null"
    }
}

impl Default for Serialized {
    fn default() -> Serialized {
        Serialized(serde_json::value::RawValue::NULL.to_owned())
    }
}

/// Equal texts: a status is written by serde_json (keys sorted), so equal values have equal
/// texts. (A spec compares by value when texts differ: `classify::spec::Spec`.)
impl PartialEq for Serialized {
    fn eq(&self, other: &Serialized) -> bool {
        self.text() == other.text()
    }
}

impl std::fmt::Debug for Serialized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

/// Condition fields that move on every write without meaning a change for drift: dropping
/// them keeps state comparisons (and therefore store writes) down to real changes.
pub(crate) const CONDITION_TIMES: [&str; 3] =
    ["lastTransitionTime", "lastUpdateTime", "lastHeartbeatTime"];

/// The kept members of `status`, serialized; `None` when it keeps none.
pub(super) fn kept_status(status: &Map<String, Value>) -> Option<Box<serde_json::value::RawValue>> {
    if !status.keys().any(|key| is_kept(key)) {
        return None;
    }
    // Serializing borrowed JSON values cannot fail (their map keys are strings).
    serde_json::value::to_raw_value(&Kept(status)).ok()
}

/// A status has a dozen members at most and the list two dozen names: a scan of it costs less
/// than a lookup of each name in the status.
pub(crate) fn is_kept(key: &str) -> bool {
    KEPT_STATUS.contains(&key)
}

/// The kept members, in the map's order (a `Map` is sorted by key, as the text must be).
struct Kept<'a>(&'a Map<String, Value>);

impl Serialize for Kept<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.0.iter().filter(|(key, _)| is_kept(key)) {
            if key == "conditions" {
                map.serialize_entry(key, &Conditions(value))?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// `status.conditions` without the write times of each condition.
struct Conditions<'a>(&'a Value);

impl Serialize for Conditions<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Array(items) = self.0 else {
            return self.0.serialize(serializer);
        };
        let mut seq = serializer.serialize_seq(Some(items.len()))?;
        for item in items {
            match item {
                Value::Object(condition) => seq.serialize_element(&Condition(condition))?,
                other => seq.serialize_element(other)?,
            }
        }
        seq.end()
    }
}

struct Condition<'a>(&'a Map<String, Value>);

impl Serialize for Condition<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let kept = self
            .0
            .iter()
            .filter(|(key, _)| !CONDITION_TIMES.contains(&key.as_str()));
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in kept {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How the kept status was built before: a copied `Map`, then serialized.
    fn copied(status: &Map<String, Value>) -> Option<String> {
        let mut kept = Map::new();
        for key in KEPT_STATUS {
            if let Some(value) = status.get(*key) {
                let value = match (*key, value) {
                    ("conditions", Value::Array(items)) => Value::Array(
                        items
                            .iter()
                            .map(|item| match item {
                                Value::Object(map) => {
                                    let mut map = map.clone();
                                    for time in CONDITION_TIMES {
                                        map.remove(time);
                                    }
                                    Value::Object(map)
                                }
                                other => other.clone(),
                            })
                            .collect(),
                    ),
                    _ => value.clone(),
                };
                kept.insert((*key).to_string(), value);
            }
        }
        (!kept.is_empty()).then(|| serde_json::to_string(&Value::Object(kept)).unwrap())
    }

    #[test]
    fn the_shape_check_keeps_the_text_and_frees_the_tree() {
        let mut checked = 0;
        for value in crate::decode::fixtures::nested_values() {
            if value.get("metadata").is_none() || value.get("kind").is_none() {
                continue;
            }
            let Ok(object) = crate::decode::parse_object_text(&value.to_string()) else {
                continue;
            };
            let expected = value
                .get("status")
                .and_then(Value::as_object)
                .and_then(kept_status)
                .map_or_else(|| "null".to_string(), |raw| raw.get().to_string());
            assert_eq!(object.kept_status.text(), expected, "{value}");
            assert_eq!(object.status, Value::Null, "{value}");
            checked += usize::from(expected != "null");
        }
        assert!(checked > 20, "objects with a kept status: {checked}");
    }

    #[test]
    fn a_map_iterates_in_key_order() {
        // The kept text's order is the map's: serde_json's `preserve_order` (insertion order)
        // would change every stored status text.
        let map: Map<String, Value> = serde_json::from_str(r#"{"b":1,"c":2,"a":3}"#).unwrap();
        assert_eq!(map.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
    }

    #[test]
    fn the_text_is_the_copied_maps_on_every_fixture_status() {
        let mut statuses: Vec<Map<String, Value>> = vec![
            serde_json::from_str(
                r#"{"conditions":"not a list","zeta":1,"url":"http://x","traffic":[{"percent":100}]}"#,
            )
            .unwrap(),
            serde_json::from_str(
                r#"{"conditions":[1,{"type":"Ready","lastTransitionTime":"t","status":"True"},{}],"observedGeneration":2}"#,
            )
            .unwrap(),
            serde_json::from_str(r#"{"unkept":true}"#).unwrap(),
        ];
        // Every `status` object anywhere in the fixtures (events carry it nested).
        statuses.extend(
            crate::decode::fixtures::nested_values()
                .iter()
                .filter_map(|value| value.get("status")?.as_object().cloned()),
        );
        assert!(statuses.len() > 30, "statuses found: {}", statuses.len());
        let mut with_conditions = 0;
        for status in &statuses {
            let text = kept_status(status).map(|raw| raw.get().to_string());
            assert_eq!(text, copied(status), "{status:?}");
            with_conditions += usize::from(text.is_some_and(|text| text.contains("conditions")));
        }
        assert!(with_conditions > 20, "with conditions: {with_conditions}");
    }
}
