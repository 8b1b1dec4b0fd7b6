//! The status fields a state keeps, serialized straight from the event's status.
//!
//! The text is what serde_json writes for a `Map` of the kept members (keys sorted) with the
//! conditions' write times left out, so equal statuses have equal text, as before; it is written
//! from borrowed parts instead of a copied `Map` (the copy was most of building a state's status,
//! on every event).

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use crate::decode::object::KEPT_STATUS;

/// Condition fields that move on every write without meaning a change for drift: dropping
/// them keeps state comparisons (and therefore store writes) down to real changes.
const CONDITION_TIMES: [&str; 3] = ["lastTransitionTime", "lastUpdateTime", "lastHeartbeatTime"];

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
fn is_kept(key: &str) -> bool {
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
