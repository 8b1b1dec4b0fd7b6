//! A compact, sorted map of strings to strings: labels and annotations as the state keeps them.
//!
//! A `BTreeMap<String, String>` of four labels is a 540-byte B-tree leaf (room for eleven
//! entries) and eight separate string allocations; here they are one text and one table of
//! offsets, two allocations whatever their number (issue 28: labels and annotations were a
//! quarter of the memory per tracked object). Lookups are a binary search of the keys, which
//! are kept sorted and unique, so equal maps have equal representations. The state never edits
//! one in place: an event's labels replace the old ones whole.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Sorted, unique string keys with string values, in two allocations.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Pairs {
    /// Every key and value, one after the other, in key order.
    text: Box<str>,
    /// For entry `i`, where its key ends (`2i`) and where its value ends (`2i + 1`) in `text`.
    ends: Box<[u32]>,
}

impl Pairs {
    /// The empty map (allocates nothing).
    pub fn new() -> Pairs {
        Pairs::default()
    }

    /// Builds from entries in strictly ascending key order (a `BTreeMap`'s iteration).
    fn from_sorted<'a>(entries: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Pairs {
        let (mut length, mut count) = (0usize, 0usize);
        for (key, value) in entries.clone() {
            length += key.len() + value.len();
            count += 1;
        }
        if count == 0 {
            return Pairs::default();
        }
        let mut text = String::with_capacity(length);
        let mut ends = Vec::with_capacity(count * 2);
        for (key, value) in entries {
            text.push_str(key);
            ends.push(offset(text.len()));
            text.push_str(value);
            ends.push(offset(text.len()));
        }
        Pairs {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.ends.len() / 2
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The key and value of entry `index` (in key order).
    fn entry(&self, index: usize) -> (&str, &str) {
        let start = if index == 0 {
            0
        } else {
            self.ends[index * 2 - 1] as usize
        };
        let key_end = self.ends[index * 2] as usize;
        let value_end = self.ends[index * 2 + 1] as usize;
        (&self.text[start..key_end], &self.text[key_end..value_end])
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let middle = low + (high - low) / 2;
            let (found, value) = self.entry(middle);
            match found.cmp(key) {
                std::cmp::Ordering::Equal => return Some(value),
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
            }
        }
        None
    }

    /// True when `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + Clone + '_ {
        (0..self.len()).map(|index| self.entry(index))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(key, _)| key)
    }

    /// The bytes of the keys and values (what the state's weight counts).
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// A `BTreeMap` copy (for the places that build new maps from it).
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    /// The same entries with each value passed through `map`.
    pub fn map_values(&self, mut map: impl FnMut(&str, &str) -> Option<String>) -> Pairs {
        let mapped: Vec<(&str, std::borrow::Cow<'_, str>)> = self
            .iter()
            .map(|(key, value)| {
                (
                    key,
                    map(key, value).map_or(std::borrow::Cow::Borrowed(value), Into::into),
                )
            })
            .collect();
        Pairs::from_sorted(mapped.iter().map(|(key, value)| (*key, value.as_ref())))
    }
}

/// Offsets fit in `u32`: an object is bounded far below 4 GiB by the decoder.
fn offset(length: usize) -> u32 {
    u32::try_from(length).unwrap_or(u32::MAX)
}

impl From<&BTreeMap<String, String>> for Pairs {
    fn from(map: &BTreeMap<String, String>) -> Pairs {
        Pairs::from_sorted(
            map.iter()
                .map(|(key, value)| (key.as_str(), value.as_str())),
        )
    }
}

impl From<BTreeMap<String, String>> for Pairs {
    fn from(map: BTreeMap<String, String>) -> Pairs {
        Pairs::from(&map)
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Pairs {
    /// Collects entries in any order; a repeated key keeps its last value (as a map's insert).
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Pairs {
        let map: BTreeMap<String, String> = entries
            .into_iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect();
        Pairs::from(&map)
    }
}

impl PartialEq<BTreeMap<String, String>> for Pairs {
    fn eq(&self, other: &BTreeMap<String, String>) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other)
                .all(|((key, value), (other_key, other_value))| {
                    key == other_key && value == other_value
                })
    }
}

impl fmt::Debug for Pairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Pairs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (key, value) in self.iter() {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Pairs, D::Error> {
        struct PairsVisitor;

        impl<'de> Visitor<'de> for PairsVisitor {
            type Value = Pairs;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings to strings")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Pairs, A::Error> {
                let mut map = BTreeMap::new();
                while let Some((key, value)) = access.next_entry::<String, String>()? {
                    map.insert(key, value);
                }
                Ok(Pairs::from(&map))
            }
        }

        deserializer.deserialize_map(PairsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn lookups_agree_with_the_map_it_was_made_from() {
        let source = map(&[
            ("app", "checkout"),
            ("serving.knative.dev/revision", "checkout-00002"),
            ("serving.knative.dev/service", "checkout"),
            ("", "empty key"),
            ("z", ""),
        ]);
        let pairs = Pairs::from(&source);
        assert_eq!(pairs.len(), 5);
        for (key, value) in &source {
            assert_eq!(pairs.get(key), Some(value.as_str()), "{key}");
        }
        for missing in ["a", "apq", "serving.knative.dev/", "zz", " "] {
            assert_eq!(pairs.get(missing), None, "{missing}");
        }
        assert!(pairs == source);
        assert_eq!(pairs.to_map(), source);
        let keys: Vec<&str> = pairs.keys().collect();
        assert_eq!(keys, source.keys().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn equal_maps_are_equal_whatever_the_order_they_were_given_in() {
        let one: Pairs = [("b", "2"), ("a", "1"), ("a", "3")].into_iter().collect();
        let two = Pairs::from(&map(&[("a", "3"), ("b", "2")]));
        assert_eq!(one, two);
        assert_ne!(one, Pairs::from(&map(&[("a", "3"), ("b", "20")])));
        // A key's bytes moving into its value is another map.
        assert_ne!(
            Pairs::from(&map(&[("ab", "c")])),
            Pairs::from(&map(&[("a", "bc")]))
        );
    }

    #[test]
    fn serializes_as_a_json_object_and_reads_one_back() {
        let pairs = Pairs::from(&map(&[("b", "x\"y"), ("a", "ü")]));
        let text = serde_json::to_string(&pairs).unwrap();
        assert_eq!(text, r#"{"a":"ü","b":"x\"y"}"#);
        let back: Pairs = serde_json::from_str(&text).unwrap();
        assert_eq!(back, pairs);
        let error = serde_json::from_str::<Pairs>(r#"{"a":1}"#).unwrap_err();
        assert!(error.to_string().contains("invalid type"), "{error}");
        assert!(Pairs::new().is_empty());
        assert_eq!(serde_json::to_string(&Pairs::new()).unwrap(), "{}");
    }

    #[test]
    fn map_values_replaces_only_what_it_returns() {
        let pairs = Pairs::from(&map(&[("a", "1"), ("b", "2")]));
        let mapped = pairs.map_values(|key, _| (key == "b").then(|| "two".to_string()));
        assert_eq!(mapped, Pairs::from(&map(&[("a", "1"), ("b", "two")])));
    }
}
