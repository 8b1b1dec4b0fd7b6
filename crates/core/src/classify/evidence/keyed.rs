//! A `fieldsV1` trie node's keyed (`k:`) and set (`v:`) members, filed by what they match.
//!
//! A list node has one member per list item. Matching a path's item against each member parsed
//! that member's key again for every path through the node: an event naming many paths, on an
//! object whose trie holds a list of thousands of items (or a forged trie of that size), cost
//! paths × items parses. Filed once per node and event, a path finds its item's member by its
//! key's values instead.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::HashMap;

use serde_json::Value;

/// At most this many sets of key field names are filed per node. The API server keys a list's
/// items by its schema's list-map keys, one set per list; a node with more is forged, and the
/// members of its later sets match nothing (each set is one lookup per path: their number is
/// the cost).
const MAX_KEY_FIELD_SETS: usize = 16;

/// The keyed and set members of one trie node, by what they match. Each slot holds the member
/// that attribution chooses among those matching the same items: the smallest name, of a
/// repeated name the last (as the members' walk in document order chose).
#[derive(Debug, Default)]
pub(super) struct ListMembers {
    /// Keyed members by their key's field names (sorted, as a parsed key's map is), then by the
    /// ids of the key's values in that order: a member's index in the node's members.
    keyed: HashMap<Vec<String>, HashMap<Vec<usize>, usize>>,
    /// Every value a key gives a field, by field name: the longest one's text, and each value's
    /// id by its [`canonical`] text. An item's field is written once per lookup, and no
    /// further than the longest text filed (a longer one equals none of them).
    values: HashMap<String, (usize, HashMap<String, usize>)>,
    /// Set members by their value's [`canonical`] text, and the longest such text.
    set: HashMap<String, usize>,
    longest_set: usize,
}

impl ListMembers {
    /// Files the `k:` and `v:` members among a node's `members` (names and value texts, in
    /// document order). A key that does not parse as a JSON object, or a set value that does not
    /// parse, matches nothing and is left out.
    pub(super) fn of(members: &[(Cow<'_, str>, &str)]) -> ListMembers {
        let mut list = ListMembers::default();
        for (at, (name, _)) in members.iter().enumerate() {
            if let Some(json_key) = name.strip_prefix("k:") {
                let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(json_key) else {
                    continue;
                };
                let names: Vec<String> = fields.keys().cloned().collect();
                if !list.keyed.contains_key(&names) && list.keyed.len() >= MAX_KEY_FIELD_SETS {
                    continue;
                }
                let ids: Vec<usize> = fields
                    .iter()
                    .map(|(field, value)| {
                        let text = canonical(value, usize::MAX).unwrap_or_default();
                        let (longest, ids) = list.values.entry(field.clone()).or_default();
                        *longest = (*longest).max(text.len());
                        let next = ids.len();
                        *ids.entry(text).or_insert(next)
                    })
                    .collect();
                file(list.keyed.entry(names).or_default(), ids, at, members);
            } else if let Some(json_value) = name.strip_prefix("v:") {
                let Ok(value) = serde_json::from_str::<Value>(json_value) else {
                    continue;
                };
                let text = canonical(&value, usize::MAX).unwrap_or_default();
                list.longest_set = list.longest_set.max(text.len());
                file(&mut list.set, text, at, members);
            }
        }
        list
    }

    /// True when the node has no keyed or set member that can match anything.
    pub(super) fn is_empty(&self) -> bool {
        self.keyed.is_empty() && self.set.is_empty()
    }

    /// The member that owns the list item `item`, as its index in `members`, which must be the
    /// members [`ListMembers::of`] filed: of the keyed members whose key's fields all equal the
    /// item's, and the set members equal to it, the one with the smallest name.
    pub(super) fn owner(&self, members: &[(Cow<'_, str>, &str)], item: &Value) -> Option<usize> {
        let name = |at: usize| members.get(at).map(|(name, _)| name.as_ref());
        let mut chosen: Option<usize> = None;
        let mut consider = |at: usize| {
            if chosen.is_none_or(|known| name(at) < name(known)) {
                chosen = Some(at);
            }
        };
        if let Value::Object(fields) = item {
            // Each of the item's fields that a key names, written once (and only as far as the
            // longest value filed for it): the item's own size bounds the work, whatever the keys.
            let ids: HashMap<&str, usize> = fields
                .iter()
                .filter_map(|(field, value)| {
                    let (longest, ids) = self.values.get(field)?;
                    let text = canonical(value, *longest)?;
                    Some((field.as_str(), *ids.get(&text)?))
                })
                .collect();
            for (names, slots) in &self.keyed {
                let key: Option<Vec<usize>> = names
                    .iter()
                    .map(|name| ids.get(name.as_str()).copied())
                    .collect();
                if let Some(at) = key.and_then(|key| slots.get(&key)) {
                    consider(*at);
                }
            }
        } else if let Some(at) = self
            .keyed
            .get(&Vec::new())
            .and_then(|slots| slots.get(&Vec::new()))
        {
            // A key of no fields (`k:{}`) matches any item.
            consider(*at);
        }
        if !self.set.is_empty() {
            if let Some(at) = canonical(item, self.longest_set).and_then(|text| self.set.get(&text))
            {
                consider(*at);
            }
        }
        chosen
    }
}

/// Puts the member at `at` into the slot for `key`, unless the slot holds one with a smaller
/// name (a later member of an equal name replaces it: the parsed map's last value).
fn file<K: std::hash::Hash + Eq>(
    slots: &mut HashMap<K, usize>,
    key: K,
    at: usize,
    members: &[(Cow<'_, str>, &str)],
) {
    match slots.entry(key) {
        Entry::Vacant(slot) => {
            slot.insert(at);
        }
        Entry::Occupied(mut slot) => {
            let name = |at: usize| members.get(at).map(|(name, _)| name.as_ref());
            if name(at) <= name(*slot.get()) {
                slot.insert(at);
            }
        }
    }
}

/// A text for `value`, equal for two values exactly when `serde_json` finds them equal: maps are
/// sorted, strings written with the same escapes, each number one way; only a float zero equals
/// its negative, so both are written `0.0`. `None` once the text would be longer than `limit`
/// (it then equals no text of at most that length).
fn canonical(value: &Value, limit: usize) -> Option<String> {
    let mut text = String::new();
    write(value, &mut text, limit).then_some(text)
}

/// Appends `value`'s [`canonical`] text to `text`; false (the text left partial) once it is
/// longer than `limit`.
fn write(value: &Value, text: &mut String, limit: usize) -> bool {
    // A string's text is at least its length and two quotes: a long one is not written at all.
    let too_long = |string: &str, text: &String| text.len() + string.len() + 2 > limit;
    match value {
        Value::String(string) if too_long(string, text) => return false,
        Value::Number(number) if number.is_f64() && number.as_f64() == Some(0.0) => {
            text.push_str("0.0");
        }
        Value::Array(items) => {
            text.push('[');
            for (at, item) in items.iter().enumerate() {
                if at > 0 {
                    text.push(',');
                }
                if !write(item, text, limit) {
                    return false;
                }
            }
            text.push(']');
        }
        Value::Object(map) => {
            text.push('{');
            for (at, (name, value)) in map.iter().enumerate() {
                if at > 0 {
                    text.push(',');
                }
                if too_long(name, text) {
                    return false;
                }
                text.push_str(&Value::String(name.clone()).to_string());
                text.push(':');
                if !write(value, text, limit) {
                    return false;
                }
            }
            text.push('}');
        }
        scalar => text.push_str(&scalar.to_string()),
    }
    text.len() <= limit
}

#[cfg(test)]
#[path = "tests/keyed.rs"]
mod tests;
