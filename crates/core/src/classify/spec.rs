//! An object's `spec` as the state keeps it: the sender's compact text, LZ4-compressed.
//!
//! The spec is the largest part of a tracked object's state (1.3 KB of JSON on average in the
//! benchmark's mix, a Deployment's several KB) and most events never read it: a status write
//! leaves it as it was. LZ4's block format packs a Knative spec to some 45 % in about a
//! microsecond and unpacks it faster (issue 28, BENCHMARKS.md). Packing is deterministic, so
//! two equal texts have equal packed bytes and the churn's "same spec?" is a comparison of
//! those bytes, without unpacking; the text is unpacked only when a class, a diff or the store
//! reads it.

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::Value;

/// An object's `spec` (trimmed for Pods): the event's own compact text (see `ObjectSpec`), so
/// two texts of one value can differ (another key order, Go's `\u003c` escapes, a state stored
/// by an older version in serde_json's order). Equal texts, or else equal values, are the same
/// spec; texts differ only when something changed or a sender wrote it differently, so the
/// parse is paid on changes, not on churn.
#[derive(Clone, Default)]
pub struct Spec {
    /// The text as LZ4 block data behind its length (`compress_prepend_size`); empty for
    /// `null` (no spec), which allocates nothing.
    packed: Box<[u8]>,
}

impl Spec {
    /// The serialized form of `value`.
    pub fn from_value(value: &Value) -> Spec {
        // A `Value` always serializes (its map keys are strings).
        Spec::from_text(&serde_json::to_string(value).unwrap_or_else(|_| "null".to_string()))
    }

    /// A spec from its JSON text (already checked to be JSON by the decoder or the store).
    pub(crate) fn from_text(text: &str) -> Spec {
        if text == "null" {
            return Spec::default();
        }
        Spec {
            packed: lz4_flex::block::compress_prepend_size(text.as_bytes()).into_boxed_slice(),
        }
    }

    /// A spec from its JSON text, sharing `previous`'s packed bytes when the text is the same:
    /// most events repeat their object's spec, and unpacking the previous text to compare it
    /// costs a fraction of packing the new one.
    pub(crate) fn from_text_after(text: &str, previous: &Spec) -> Spec {
        // Compared as bytes: no UTF-8 check and no `String` for a text that is thrown away.
        if previous.text_len() == text.len()
            && !previous.is_null()
            && lz4_flex::block::decompress_size_prepended(&previous.packed)
                .is_ok_and(|bytes| bytes == text.as_bytes())
        {
            return previous.clone();
        }
        Spec::from_text(text)
    }

    /// The text, unpacked.
    pub fn text(&self) -> Cow<'static, str> {
        if self.packed.is_empty() {
            return Cow::Borrowed("null");
        }
        // The bytes were packed from a `str` by this process: unpacking gives them back. Were
        // they ever damaged, the spec reads as absent rather than as a panic.
        lz4_flex::block::decompress_size_prepended(&self.packed)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .map_or(Cow::Borrowed("null"), Cow::Owned)
    }

    /// The length of the text (what the state's weight counts), read from the packed header.
    pub fn text_len(&self) -> usize {
        match self.packed.get(..4) {
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) as usize,
            _ => "null".len(),
        }
    }

    /// The bytes this spec takes in memory.
    pub fn packed_len(&self) -> usize {
        self.packed.len()
    }

    /// The value, parsed.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.text()).unwrap_or(Value::Null)
    }

    /// The value at a JSON pointer below it (`/traffic`), parsed: only that value is parsed,
    /// the rest of the text is jumped over (`decode::raw::pointer`), unless an escaped member
    /// name on the way needs the parser.
    pub fn pointer(&self, pointer: &str) -> Option<Value> {
        let text = self.text();
        match crate::decode::raw::pointer(&text, pointer) {
            Some(found) => found.and_then(|part| serde_json::from_str(part).ok()),
            None => {
                let mut value: Value = serde_json::from_str(&text).ok()?;
                value.pointer_mut(pointer).map(Value::take)
            }
        }
    }

    /// The text as a JSON value to write (the store's row).
    pub fn raw(&self) -> Box<RawValue> {
        RawValue::from_string(self.text().into_owned())
            .unwrap_or_else(|_| RawValue::NULL.to_owned())
    }

    /// True for an absent spec.
    pub fn is_null(&self) -> bool {
        self.packed.is_empty()
    }

    /// True when both were made from the same text (compared packed: packing is
    /// deterministic).
    pub fn same_text(&self, other: &Spec) -> bool {
        self.packed == other.packed
    }
}

impl PartialEq for Spec {
    fn eq(&self, other: &Spec) -> bool {
        self.same_text(other) || self.value() == other.value()
    }
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_spec_reads_back_as_the_text_it_was_made_from() {
        let text = r#"{"template":{"spec":{"containers":[{"image":"gcr.io/knative-samples/helloworld-go","env":[{"name":"TARGET","value":"\u003cWorld\u003e"}]}]}},"traffic":[{"latestRevision":true,"percent":100}]}"#;
        let spec = Spec::from_text(text);
        assert_eq!(spec.text(), text);
        assert_eq!(spec.text_len(), text.len());
        assert!(spec.packed_len() < text.len(), "{}", spec.packed_len());
        assert_eq!(spec.raw().get(), text);
        assert_eq!(spec.pointer("/traffic/0/percent"), Some(json!(100)));
        assert!(!spec.is_null());
    }

    #[test]
    fn specs_are_equal_by_text_or_else_by_value() {
        let one = Spec::from_text(r#"{"a":1,"b":[true,null]}"#);
        let reordered = Spec::from_text(r#"{"b":[true,null],"a":1}"#);
        let other = Spec::from_text(r#"{"a":2,"b":[true,null]}"#);
        assert!(one.same_text(&Spec::from_text(r#"{"a":1,"b":[true,null]}"#)));
        assert!(!one.same_text(&reordered));
        assert_eq!(one, reordered);
        assert_ne!(one, other);
        assert_eq!(one, Spec::from_value(&json!({"a": 1, "b": [true, null]})));
    }

    #[test]
    fn a_spec_after_another_is_the_new_text_whatever_the_previous_one() {
        let text = r#"{"a":1,"b":[true,null]}"#;
        let previous = Spec::from_text(text);
        let same = Spec::from_text_after(text, &previous);
        assert!(same.same_text(&previous));
        assert_eq!(same.text(), text);
        // Same length, another text: packed afresh.
        let other = Spec::from_text_after(r#"{"a":2,"b":[true,null]}"#, &previous);
        assert_eq!(other.text(), r#"{"a":2,"b":[true,null]}"#);
        assert!(!other.same_text(&previous));
        // After no spec, and to no spec.
        assert_eq!(Spec::from_text_after(text, &Spec::default()).text(), text);
        assert!(Spec::from_text_after("null", &previous).is_null());
    }

    #[test]
    fn a_pointer_finds_what_the_parsed_tree_finds_on_every_fixture_object() {
        let mut found = 0;
        for value in crate::decode::fixtures::nested_values() {
            let Value::Object(map) = &value else { continue };
            let spec = Spec::from_value(&value);
            let pretty = Spec::from_text(&serde_json::to_string_pretty(&value).unwrap());
            let mut pointers = vec![String::new(), "/absent".to_string(), "/0".to_string()];
            for (key, member) in map {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                pointers.push(format!("/{escaped}"));
                pointers.push(format!("/{escaped}/0"));
                if let Value::Object(inner) = member {
                    for inner_key in inner.keys() {
                        let inner_escaped = inner_key.replace('~', "~0").replace('/', "~1");
                        pointers.push(format!("/{escaped}/{inner_escaped}"));
                    }
                }
            }
            for pointer in &pointers {
                let expected = value.pointer(pointer).cloned();
                assert_eq!(spec.pointer(pointer), expected, "{pointer} in {value}");
                assert_eq!(pretty.pointer(pointer), expected, "{pointer} in {value}");
                found += usize::from(expected.is_some());
            }
        }
        assert!(found > 2000, "values found: {found}");
    }

    #[test]
    fn no_spec_is_null_and_allocates_nothing() {
        for spec in [
            Spec::default(),
            Spec::from_text("null"),
            Spec::from_value(&Value::Null),
        ] {
            assert!(spec.is_null());
            assert_eq!(spec.packed_len(), 0);
            assert_eq!(spec.text(), "null");
            assert_eq!(spec.value(), Value::Null);
            assert_eq!(spec.text_len(), 4);
        }
        assert_ne!(Spec::default(), Spec::from_text("{}"));
    }
}
