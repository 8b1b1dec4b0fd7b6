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

    /// The values of `text`, a JSON object of strings that [`Counted::read`] or
    /// [`Counted::scan`] checked and counted (the one-pass reader counts a ConfigMap's `data` as
    /// it reads it, or the scan reads it and the pass reads the rest: `raw::DataSpan`).
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counted {
    entries: usize,
    bytes: usize,
    /// Every key greater than the one before (so none repeats).
    sorted: bool,
}

/// What [`Counted::scan`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScannedData {
    /// Where the object ends (just after its closing brace).
    pub end: usize,
    pub counted: Counted,
    /// Whitespace between its tokens (then the text it is part of is not compact).
    pub spaced: bool,
}

impl Counted {
    /// Checks and counts the object of strings whose `{` is at `at`, as [`Counted::read`] does
    /// but without serde_json: the scan of a ConfigMap reads its `data` here, once, instead of
    /// jumping over it and leaving it to the one-pass reader to read again (BENCHMARKS.md,
    /// issue 28: large objects). `None` when it is not an object of strings, when it is not
    /// valid JSON, or when it holds what this reader leaves to serde_json: a key with an escape
    /// (its order needs the unescaped key), an escaped surrogate that is not a pair. Then the
    /// one-pass reader reads it, and words any error. What this accepts, serde_json accepts,
    /// with the same counts (tested against it).
    pub(crate) fn scan(bytes: &[u8], at: usize) -> Option<ScannedData> {
        if bytes.get(at) != Some(&b'{') {
            return None;
        }
        let mut spaced = false;
        let mut at = skip_space(bytes, at + 1, &mut spaced);
        let mut counted = Counted {
            entries: 0,
            bytes: 0,
            sorted: true,
        };
        if bytes.get(at) == Some(&b'}') {
            return Some(ScannedData {
                end: at + 1,
                counted,
                spaced,
            });
        }
        let mut previous: Option<&[u8]> = None;
        loop {
            if bytes.get(at) != Some(&b'"') {
                return None;
            }
            let key_end = match string(bytes, at + 1)? {
                (end, _, false) => end,
                (_, _, true) => return None,
            };
            let key = bytes.get(at + 1..key_end - 1)?;
            // Bytes compare as `str`s do.
            counted.sorted &= previous.is_none_or(|before| before < key);
            previous = Some(key);
            at = skip_space(bytes, key_end, &mut spaced);
            if bytes.get(at) != Some(&b':') {
                return None;
            }
            at = skip_space(bytes, at + 1, &mut spaced);
            if bytes.get(at) != Some(&b'"') {
                return None;
            }
            let (value_end, value_length, _) = string(bytes, at + 1)?;
            counted.entries += 1;
            counted.bytes = counted
                .bytes
                .saturating_add(key.len())
                .saturating_add(value_length);
            at = skip_space(bytes, value_end, &mut spaced);
            match bytes.get(at) {
                Some(b',') => at = skip_space(bytes, at + 1, &mut spaced),
                Some(b'}') => {
                    return Some(ScannedData {
                        end: at + 1,
                        counted,
                        spaced,
                    })
                }
                _ => return None,
            }
        }
    }
}

fn skip_space(bytes: &[u8], mut at: usize, spaced: &mut bool) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        *spaced = true;
        at += 1;
    }
    at
}

/// The JSON string whose body starts at `at`: where it ends (after its closing quote), its
/// length unescaped, and whether it holds an escape; `None` for a control character, an
/// invalid escape, an escaped surrogate that is not a pair, or no closing quote.
fn string(bytes: &[u8], mut at: usize) -> Option<(usize, usize, bool)> {
    let mut length = 0usize;
    let mut escaped = false;
    loop {
        let stop = string_stop(bytes, at)?;
        length += stop - at;
        match bytes.get(stop)? {
            b'"' => return Some((stop + 1, length, escaped)),
            b'\\' => {
                escaped = true;
                let (next, unescaped) = escape(bytes, stop + 1)?;
                length += unescaped;
                at = next;
            }
            // A control character, which JSON allows only escaped.
            _ => return None,
        }
    }
}

/// The escape whose letter is at `at` (after its backslash): where it ends and how many bytes
/// of UTF-8 it stands for.
fn escape(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    match bytes.get(at)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some((at + 1, 1)),
        b'u' => match hex4(bytes, at + 1)? {
            // A surrogate pair (one character of four bytes), or not ours to judge.
            0xD800..=0xDBFF => {
                if bytes.get(at + 5..at + 7) != Some(b"\\u") {
                    return None;
                }
                let low = hex4(bytes, at + 7)?;
                (0xDC00..=0xDFFF).contains(&low).then_some((at + 11, 4))
            }
            0xDC00..=0xDFFF => None,
            0..=0x7F => Some((at + 5, 1)),
            0x80..=0x7FF => Some((at + 5, 2)),
            _ => Some((at + 5, 3)),
        },
        _ => None,
    }
}

/// Four hex digits at `at`, either case, as a number.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..at + 4)?
        .iter()
        .try_fold(0u32, |number, byte| {
            Some(number * 16 + char::from(*byte).to_digit(16)?)
        })
}

/// The index of the first `"`, `\` or control character (below 0x20) in `bytes` at or after
/// `at`, if any: eight bytes at a time, as serde_json looks for a string's end (a ConfigMap's
/// values are long strings; a byte at a time would cost more than the two reads it replaces).
pub(crate) fn string_stop(bytes: &[u8], mut at: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);
    const SPACES: u64 = u64::from_ne_bytes([0x20; 8]);
    // The bytes below `0x20` (or zero after the xor) have their high bit set; a byte above one
    // of them may be flagged too (a borrow), never one below, so the lowest flag is exact.
    let below = |word: u64, limit: u64| word.wrapping_sub(limit) & !word & HIGHS;
    while let Some(word) = bytes.get(at..).and_then(|rest| rest.first_chunk::<8>()) {
        // Little-endian: the lowest flag is the first byte in memory.
        let word = u64::from_le_bytes(*word);
        let found =
            below(word ^ QUOTES, ONES) | below(word ^ BACKSLASHES, ONES) | below(word, SPACES);
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes
        .get(at..)?
        .iter()
        .position(|byte| matches!(byte, b'"' | b'\\') || *byte < 0x20)
        .map(|found| at + found)
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
#[path = "tests/data_scan.rs"]
mod scan_tests;

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
