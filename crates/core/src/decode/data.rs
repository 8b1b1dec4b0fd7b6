//! A ConfigMap's `data` (or a Secret's value hashes) kept as its JSON text, parsed into a map only
//! when something reads the values (BENCHMARKS.md, issue 28: large objects). A ConfigMap can
//! carry hundreds of KB whose events, between real changes, repeat the same text: the engine
//! recognises an unchanged one by its text and keeps the state's (already parsed) map, so an
//! update that only moves a `managedFields` time neither builds nor compares a map.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The values of a `data` member: an object of strings, as text and, once read, as a map.
pub struct DataMap {
    /// A JSON object whose members are all strings (checked when made). Kept as a `str`, not a
    /// `RawValue`: one made from a part of a text that was checked as it was read would be
    /// parsed once more (`RawValue::from_string`); the store's row makes one when it is written.
    text: Box<str>,
    /// Members (a text that repeats a key is kept as its map's text, so each counts once).
    entries: usize,
    /// The bytes of the members' keys and values (unescaped).
    bytes: usize,
    map: OnceLock<BTreeMap<String, String>>,
}

impl DataMap {
    /// The values of `text`, which must be a JSON object of strings; the error says what is not.
    /// Reads the text once without building the map (a text whose keys are out of order, which
    /// the API server never sends, is parsed once more to fold a repeated key).
    pub fn from_text(text: &str) -> Result<DataMap, serde_json::Error> {
        DataMap::from_raw(serde_json::from_str(text)?)
    }

    /// [`DataMap::from_text`] of a JSON text already read as one value (a member of the object
    /// being decoded, a stored row's): one read checks and counts, then it is copied.
    pub fn from_raw(raw: &RawValue) -> Result<DataMap, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(raw.get());
        let counted = deserializer.deserialize_map(Counter)?;
        deserializer.end()?;
        DataMap::from_counted(raw.get(), counted)
    }

    /// The values of `text`, a JSON object of strings that [`Counted::read`] checked and
    /// counted (the one-pass reader counts a ConfigMap's `data` as it reads it, and takes its
    /// text from the scan: `raw::Scanned::data`).
    pub(crate) fn from_counted(text: &str, counted: Counted) -> Result<DataMap, serde_json::Error> {
        if !counted.sorted {
            // Keys out of order (the API server writes them sorted) may repeat one: a repeated
            // key's earlier values are not the object's, and are not kept as text either.
            let map: BTreeMap<String, String> = serde_json::from_str(text)?;
            if map.len() != counted.entries {
                return Ok(DataMap::from_map(map));
            }
        }
        Ok(DataMap {
            text: text.into(),
            entries: counted.entries,
            bytes: counted.bytes,
            map: OnceLock::new(),
        })
    }

    /// The values of `map` (a Secret's hashes, a stored state, the general decoder's map).
    pub fn from_map(map: BTreeMap<String, String>) -> DataMap {
        // A map of strings always serializes; the empty object is for the unreachable error.
        let text = serde_json::to_string(&map).unwrap_or_else(|_| "{}".to_string());
        DataMap {
            text: text.into(),
            entries: map.len(),
            bytes: map.iter().map(|(key, value)| key.len() + value.len()).sum(),
            map: OnceLock::from(map),
        }
    }

    /// The values, parsed on first use.
    pub fn map(&self) -> &BTreeMap<String, String> {
        self.map.get_or_init(|| {
            // The text was checked to be an object of strings when it was made.
            serde_json::from_str(&self.text).unwrap_or_default()
        })
    }

    /// The JSON text it was made from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// True when both were made from the same text (then their values are the same).
    pub fn same_text(&self, other: &DataMap) -> bool {
        self.text == other.text
    }

    /// True once the values were parsed (something read them).
    pub fn is_parsed(&self) -> bool {
        self.map.get().is_some()
    }

    /// The bytes of the keys and values (unescaped), without building the map.
    pub fn counted_bytes(&self) -> usize {
        self.bytes
    }

    /// The members, without building the map.
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

impl Counted {
    /// Checks and counts the object of strings `deserializer` is at (a member of the object
    /// being read, in the same pass).
    pub(crate) fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Counted, D::Error> {
        deserializer.deserialize_map(Counter)
    }
}

/// What [`Counter`] found.
pub(crate) struct Counted {
    entries: usize,
    bytes: usize,
    /// Every key greater than the one before (so none repeats).
    sorted: bool,
}

impl<'de> Visitor<'de> for Counter {
    type Value = Counted;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Counted, A::Error> {
        let mut counted = Counted {
            entries: 0,
            bytes: 0,
            sorted: true,
        };
        let mut previous: Option<Cow<'de, str>> = None;
        while let Some(Key(key)) = access.next_key::<Key<'de>>()? {
            let value = access.next_value::<Length>()?;
            counted.entries += 1;
            counted.bytes = counted
                .bytes
                .saturating_add(key.len())
                .saturating_add(value.0);
            counted.sorted &= previous
                .as_deref()
                .is_none_or(|before| before < key.as_ref());
            previous = Some(key);
        }
        Ok(counted)
    }
}

/// A key, borrowed from the text unless it holds an escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                text: &'de str,
            ) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(text)))
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(text.to_string())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
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
        // Sorted keys: kept as received, not parsed.
        let sorted = r#"{"a":"o\u006ee","b":"2"}"#;
        let data = DataMap::from_text(sorted).unwrap();
        assert!(!data.is_parsed());
        assert_eq!(data.text(), sorted);
        assert_eq!(data.counted_entries(), 2);
        assert_eq!(data.counted_bytes(), 1 + 3 + 1 + 1);
        // A repeated key (out of order): only the last value is kept, text and counts alike.
        let repeated = DataMap::from_text(r#"{"b":"two","a":"o\u006ee","b":"2"}"#).unwrap();
        assert_eq!(repeated.text(), r#"{"a":"one","b":"2"}"#);
        assert_eq!(repeated.counted_entries(), 2);
        assert_eq!(repeated.counted_bytes(), data.counted_bytes());
        assert_eq!(repeated, data);
        // Out of order without a repeat: kept as received (parsed once to tell).
        let unsorted = DataMap::from_text(r#"{"b":"2","a":"one"}"#).unwrap();
        assert_eq!(unsorted.text(), r#"{"b":"2","a":"one"}"#);
        assert_eq!(unsorted, data);
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
