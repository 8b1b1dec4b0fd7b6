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

/// The keyed and set members of one trie node, by what they match. Each slot holds the member
/// that attribution chooses among those matching the same items: the smallest name, of a
/// repeated name the last (as the members' walk in document order chose).
#[derive(Debug, Default)]
pub(super) struct ListMembers {
    /// Keyed members by their key's field names (sorted, as a parsed key's map is), then by the
    /// key's values in that order ([`canonical`]): a member's index in the node's members.
    keyed: HashMap<Vec<String>, HashMap<String, usize>>,
    /// Set members by their value ([`canonical`]).
    set: HashMap<String, usize>,
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
                let values: Vec<&Value> = fields.values().collect();
                let slots = list
                    .keyed
                    .entry(fields.keys().cloned().collect())
                    .or_default();
                file(slots, canonical(&values), at, members);
            } else if let Some(json_value) = name.strip_prefix("v:") {
                let Ok(value) = serde_json::from_str::<Value>(json_value) else {
                    continue;
                };
                file(&mut list.set, canonical(&[&value]), at, members);
            }
        }
        list
    }

    /// True when the node has no keyed or set member that can match anything.
    pub(super) fn is_empty(&self) -> bool {
        self.keyed.is_empty() && self.set.is_empty()
    }

    /// The member (its index in `members`, the same members [`ListMembers::of`] filed) that
    /// owns the list item `item`: of the keyed members whose key's fields all equal the item's,
    /// and the set members equal to it, the one with the smallest name.
    pub(super) fn owner(&self, members: &[(Cow<'_, str>, &str)], item: &Value) -> Option<usize> {
        let mut chosen: Option<usize> = None;
        let mut consider = |at: usize| {
            let name = members.get(at).map(|(name, _)| name.as_ref());
            let smaller = match (chosen, name) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(known), Some(name)) => members
                    .get(known)
                    .is_some_and(|(known, _)| name < known.as_ref()),
            };
            if smaller {
                chosen = Some(at);
            }
        };
        for (names, slots) in &self.keyed {
            let projected: Option<Vec<&Value>> = names.iter().map(|name| item.get(name)).collect();
            if let Some(at) = projected.and_then(|values| slots.get(&canonical(&values))) {
                consider(*at);
            }
        }
        if let Some(at) = self.set.get(&canonical(&[item])) {
            consider(*at);
        }
        chosen
    }
}

/// Puts the member at `at` into the slot for `key`, unless the slot holds one with a smaller
/// name (a later member of an equal name replaces it: the parsed map's last value).
fn file(
    slots: &mut HashMap<String, usize>,
    key: String,
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

/// One text per list of values, equal exactly when the values are equal as `serde_json`
/// compares them: maps are sorted, strings written with the same escapes, each number one way;
/// only a float zero equals its negative, so both are written `0.0`.
fn canonical(values: &[&Value]) -> String {
    let mut text = String::new();
    text.push('[');
    for (at, value) in values.iter().enumerate() {
        if at > 0 {
            text.push(',');
        }
        write(value, &mut text);
    }
    text.push(']');
    text
}

fn write(value: &Value, text: &mut String) {
    match value {
        Value::Number(number) if number.is_f64() && number.as_f64() == Some(0.0) => {
            text.push_str("0.0");
        }
        Value::Array(items) => text.push_str(&canonical(&items.iter().collect::<Vec<_>>())),
        Value::Object(map) => {
            text.push('{');
            for (at, (name, value)) in map.iter().enumerate() {
                if at > 0 {
                    text.push(',');
                }
                text.push_str(&Value::String(name.clone()).to_string());
                text.push(':');
                write(value, text);
            }
            text.push('}');
        }
        scalar => text.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
#[path = "tests/keyed.rs"]
mod tests;
