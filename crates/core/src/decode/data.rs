//! A ConfigMap's `data` (or a Secret's value hashes) kept as its JSON text, parsed into a map only
//! when something reads the values (BENCHMARKS.md, issue 28: large objects). A ConfigMap can
//! carry hundreds of KB whose events, between real changes, repeat the same text: the engine
//! recognises an unchanged one by its text and keeps the state's (already parsed) map, so an
//! update that only moves a `managedFields` time neither builds nor compares a map.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The values of a `data` member: an object of strings, as text and, once read, as a map.
pub struct DataMap {
    /// A JSON object whose members are all strings (checked when made).
    text: Box<RawValue>,
    /// Members, a repeated key counted each time (the map keeps the last).
    entries: usize,
    /// The bytes of the members' keys and values (unescaped), a repeated key counted each time.
    bytes: usize,
    map: OnceLock<BTreeMap<String, String>>,
}

impl DataMap {
    /// The values of `text`, which must be a JSON object of strings; the error says what is not.
    /// Reads the text once without building the map.
    pub fn from_text(text: &str) -> Result<DataMap, serde_json::Error> {
        DataMap::from_raw(serde_json::from_str(text)?)
    }

    /// [`DataMap::from_text`] of a JSON text already read as one value (a member of the object
    /// being decoded, a stored row's): its one read checks and counts, then it is copied.
    pub fn from_raw(raw: &RawValue) -> Result<DataMap, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(raw.get());
        let (entries, bytes) = deserializer.deserialize_map(Counter)?;
        deserializer.end()?;
        Ok(DataMap {
            text: raw.to_owned(),
            entries,
            bytes,
            map: OnceLock::new(),
        })
    }

    /// The values of `map` (a Secret's hashes, a stored state, the general decoder's map).
    pub fn from_map(map: BTreeMap<String, String>) -> DataMap {
        let text = match serde_json::value::to_raw_value(&map) {
            Ok(text) => text,
            // A map of strings always serializes; this arm is unreachable.
            Err(_) => RawValue::from_string("{}".to_string()).unwrap_or_default(),
        };
        DataMap {
            text,
            entries: map.len(),
            bytes: map.iter().map(|(key, value)| key.len() + value.len()).sum(),
            map: OnceLock::from(map),
        }
    }

    /// The values, parsed on first use.
    pub fn map(&self) -> &BTreeMap<String, String> {
        self.map.get_or_init(|| {
            // The text was checked to be an object of strings when it was made.
            serde_json::from_str(self.text.get()).unwrap_or_default()
        })
    }

    /// The JSON text it was made from.
    pub fn text(&self) -> &RawValue {
        &self.text
    }

    /// True when both were made from the same text (then their values are the same).
    pub fn same_text(&self, other: &DataMap) -> bool {
        self.text.get() == other.text.get()
    }

    /// True once the values were parsed (something read them).
    pub fn is_parsed(&self) -> bool {
        self.map.get().is_some()
    }

    /// The bytes of the keys and values, without building the map: a repeated key is counted
    /// each time, so this is at least the map's figure ([`DataMap::map_bytes`]).
    pub fn counted_bytes(&self) -> usize {
        self.bytes
    }

    /// The bytes of the map's keys and values.
    pub fn map_bytes(&self) -> usize {
        self.map()
            .iter()
            .map(|(key, value)| key.len() + value.len())
            .sum()
    }

    /// Members counted as [`DataMap::counted_bytes`] counts bytes.
    pub fn counted_entries(&self) -> usize {
        self.entries
    }
}

impl Deref for DataMap {
    type Target = BTreeMap<String, String>;

    fn deref(&self) -> &BTreeMap<String, String> {
        self.map()
    }
}

impl Clone for DataMap {
    fn clone(&self) -> DataMap {
        DataMap {
            text: self.text.clone(),
            entries: self.entries,
            bytes: self.bytes,
            map: self.map.clone(),
        }
    }
}

impl PartialEq for DataMap {
    fn eq(&self, other: &DataMap) -> bool {
        // Equal texts hold equal values; texts that differ may still (key order, escapes).
        self.same_text(other) || self.map() == other.map()
    }
}

impl Eq for DataMap {}

impl fmt::Debug for DataMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.map().fmt(f)
    }
}

impl serde::Serialize for DataMap {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.map().serialize(serializer)
    }
}

impl From<BTreeMap<String, String>> for DataMap {
    fn from(map: BTreeMap<String, String>) -> DataMap {
        DataMap::from_map(map)
    }
}

/// Checks an object of strings and counts its members and their bytes, copying nothing that
/// needs no unescaping.
struct Counter;

impl<'de> Visitor<'de> for Counter {
    type Value = (usize, usize);

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<(usize, usize), A::Error> {
        let (mut entries, mut bytes) = (0usize, 0usize);
        while let Some(key) = access.next_key::<Length>()? {
            let value = access.next_value::<Length>()?;
            entries += 1;
            bytes = bytes.saturating_add(key.0).saturating_add(value.0);
        }
        Ok((entries, bytes))
    }
}

/// A string's length (unescaped), read without keeping it.
struct Length(usize);

impl<'de> serde::Deserialize<'de> for Length {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Length, D::Error> {
        struct LengthVisitor;
        impl Visitor<'_> for LengthVisitor {
            type Value = Length;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Length, E> {
                Ok(Length(text.len()))
            }
        }
        deserializer.deserialize_str(LengthVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_checked_counted_and_parsed_on_use() {
        let data = DataMap::from_text(r#"{"b":"two","a":"o\u006ee","b":"2"}"#).unwrap();
        assert_eq!(data.counted_entries(), 3);
        assert_eq!(data.counted_bytes(), 1 + 3 + 1 + 3 + 1 + 1);
        assert_eq!(data.map_bytes(), 1 + 3 + 1 + 1);
        assert_eq!(
            data.map(),
            &BTreeMap::from([
                ("a".to_string(), "one".to_string()),
                ("b".to_string(), "2".to_string())
            ])
        );
        let same = DataMap::from_map(data.map().clone());
        assert!(!same.same_text(&data));
        assert_eq!(same, data);
        assert_ne!(DataMap::from_text(r#"{"a":"x"}"#).unwrap(), data);
    }

    #[test]
    fn anything_but_an_object_of_strings_is_refused_naming_it() {
        for (text, says) in [
            (r#"{"a":1}"#, "expected a string"),
            (r#"["a"]"#, "expected an object of strings"),
            (r#"{"a":"b"} x"#, "trailing characters"),
            (r#"{"a":null}"#, "expected a string"),
        ] {
            let error = DataMap::from_text(text).unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
