//! `status.conditions` read straight into [`Condition`]s from a state's kept status text.
//!
//! A dozen classes read an object's conditions on every event; parsing the list into a `Value`
//! tree (a map per condition) and copying its strings out was most of that. This reads the five
//! fields a condition has and skips the rest, with the tree's answers: a field that is not a
//! string reads as empty (the last one when a condition repeats a field), an item that is not
//! an object has no type and is left out, and a list that is not an array has no conditions.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::Condition;

/// The conditions of a `conditions` member's JSON text (none when it is not a list, or not
/// JSON).
pub(super) fn parse(text: &str) -> Vec<Condition> {
    serde_json::from_str::<List>(text).map_or_else(|_| Vec::new(), |list| list.0)
}

/// The typed conditions of a list (none for another type).
struct List(Vec<Condition>);

/// One item: a condition with a type, or `None`.
struct Item(Option<Condition>);

/// A field's value when it is a string.
struct Text(Option<String>);

/// A value read and dropped. Read as the tree reads it (serde's `IgnoredAny` would let
/// serde_json skip it with fewer checks and no depth limit, so a list the tree refused, a
/// number out of range or nesting past the limit, would give conditions).
struct Skip;

/// The fields a condition has.
enum Field {
    Type,
    Status,
    Reason,
    Message,
    Severity,
    Other,
}

/// Implements the visits of every JSON type but the ones a visitor reads itself, as "not what
/// was asked for": `$empty` is the answer. Scalars always; `str`, `seq` and `map` when named
/// (lists and maps read to their end as the tree would read them).
macro_rules! otherwise {
    ($de:lifetime, $empty:expr; $($kind:ident)*) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($empty)
        }
        $(otherwise!(@$kind $de, $empty);)*
    };
    (@str $de:lifetime, $empty:expr) => {
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($empty)
        }
    };
    (@seq $de:lifetime, $empty:expr) => {
        fn visit_seq<A: SeqAccess<$de>>(self, mut items: A) -> Result<Self::Value, A::Error> {
            while items.next_element::<Skip>()?.is_some() {}
            Ok($empty)
        }
    };
    (@map $de:lifetime, $empty:expr) => {
        fn visit_map<A: MapAccess<$de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<Skip, Skip>()?.is_some() {}
            Ok($empty)
        }
    };
}

impl<'de> Deserialize<'de> for List {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<List, D::Error> {
        struct ListVisitor;
        impl<'de> Visitor<'de> for ListVisitor {
            type Value = List;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a list of conditions")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<List, A::Error> {
                let mut conditions = Vec::with_capacity(items.size_hint().unwrap_or(4));
                while let Some(Item(item)) = items.next_element()? {
                    conditions.extend(item);
                }
                Ok(List(conditions))
            }

            otherwise!('de, List(Vec::new()); str map);
        }
        deserializer.deserialize_any(ListVisitor)
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Item, D::Error> {
        struct ItemVisitor;
        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = Item;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a condition")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item, A::Error> {
                let mut condition = Condition {
                    condition_type: String::new(),
                    status: String::new(),
                    reason: String::new(),
                    message: String::new(),
                    severity: String::new(),
                };
                while let Some(field) = map.next_key::<Field>()? {
                    let slot = match field {
                        Field::Type => &mut condition.condition_type,
                        Field::Status => &mut condition.status,
                        Field::Reason => &mut condition.reason,
                        Field::Message => &mut condition.message,
                        Field::Severity => &mut condition.severity,
                        Field::Other => {
                            map.next_value::<Skip>()?;
                            continue;
                        }
                    };
                    // The last of a repeated field counts, as in a parsed map.
                    *slot = map.next_value::<Text>()?.0.unwrap_or_default();
                }
                Ok(Item(
                    (!condition.condition_type.is_empty()).then_some(condition),
                ))
            }

            otherwise!('de, Item(None); str seq);
        }
        deserializer.deserialize_any(ItemVisitor)
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Text, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_str<E>(self, text: &str) -> Result<Text, E> {
                Ok(Text(Some(text.to_string())))
            }

            fn visit_string<E>(self, text: String) -> Result<Text, E> {
                Ok(Text(Some(text)))
            }

            otherwise!('de, Text(None); seq map);
        }
        deserializer.deserialize_any(TextVisitor)
    }
}

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Skip, D::Error> {
        struct SkipVisitor;
        impl<'de> Visitor<'de> for SkipVisitor {
            type Value = Skip;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("any value")
            }

            otherwise!('de, Skip; str seq map);
        }
        deserializer.deserialize_any(SkipVisitor)
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Field, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a field name")
            }

            fn visit_str<E>(self, name: &str) -> Result<Field, E> {
                Ok(match name {
                    "type" => Field::Type,
                    "status" => Field::Status,
                    "reason" => Field::Reason,
                    "message" => Field::Message,
                    "severity" => Field::Severity,
                    _ => Field::Other,
                })
            }
        }
        deserializer.deserialize_identifier(FieldVisitor)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// How conditions were read before: a `Value` tree, then each field copied out.
    fn from_tree(text: &str) -> Vec<Condition> {
        let Ok(Value::Array(items)) = serde_json::from_str::<Value>(text) else {
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|item| {
                let text = |key: &str| {
                    item.get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                let condition_type = text("type");
                (!condition_type.is_empty()).then(|| Condition {
                    condition_type,
                    status: text("status"),
                    reason: text("reason"),
                    message: text("message"),
                    severity: text("severity"),
                })
            })
            .collect()
    }

    #[test]
    fn conditions_read_as_the_tree_read_them() {
        let mut texts: Vec<String> = [
            r#"[{"type":"Ready","status":"True"},{"type":"","status":"False"},{"status":"x"}]"#,
            r#"[1, "two", null, [3], {"type":["Ready"]}, {"type":"A","type":"B"}]"#,
            r#"[{"type":"A","message":"one","message":7}, {"type":"B","reason":{"a":[1]}}]"#,
            r#"[{"type":"Esc\u0041ped","st\u0061tus":"True","severity":"Warning","x":{"y":[1,2]}}]"#,
            r#"{"type":"Ready"}"#,
            r#""Ready""#,
            "null",
            "[]",
            "not json",
            r#"[{"type":"A"},"#,
            r#"[{"type":"A","x":1e400}]"#,
            r#"[{"type":"A"},[1e400]]"#,
            r#"[{"type":"A","x":"\ud800"}]"#,
            r#"[{"type":"A","message":["\ud800"]}]"#,
        ]
        .iter()
        .map(|text| text.to_string())
        .collect();
        // Nesting past the parser's limit, in a skipped field, an item and a text field.
        let deep = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        for levels in [120, 126, 127, 130, 5_000] {
            texts.push(format!(r#"[{{"type":"A","x":{}}}]"#, deep(levels)));
            texts.push(format!(r#"[{{"type":"A"}},{}]"#, deep(levels)));
            texts.push(format!(r#"[{{"type":"A","reason":{}}}]"#, deep(levels)));
        }
        texts.extend(
            crate::decode::fixtures::nested_values()
                .iter()
                .filter_map(|value| Some(value.as_object()?.get("conditions")?.to_string())),
        );
        assert!(texts.len() > 40, "condition lists found: {}", texts.len());
        let mut read = 0;
        for text in &texts {
            let conditions = parse(text);
            assert_eq!(conditions, from_tree(text), "{text}");
            read += conditions.len();
        }
        assert!(read > 100, "conditions read: {read}");
    }
}
