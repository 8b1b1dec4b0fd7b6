//! Attribution: which field manager changed a path, from `metadata.managedFields`.
//!
//! A path is owned by the entries whose `fieldsV1` trie covers it (`f:` fields, `k:` keyed list
//! items matched against the object's own list items, `v:` set items, `i:` positions; an empty
//! `{}` node owns its whole subtree, which is how atomic lists such as `spec.traffic` and
//! `spec.template.spec.containers` appear). Among the owners, the one whose `time` moved since the
//! previous observed version wins, else the newest. A removed field has no owner left; the entry
//! whose time moved is then the best witness. Knative's `serving.knative.dev/lastModifier`
//! annotation names the user behind the last spec change.

use std::borrow::Cow;
use std::cell::{OnceCell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value;

use super::keyed::ListMembers;
use crate::classify::state::ObjectState;
use crate::classify::Rules;
use crate::decode::{KubeObject, ManagedFieldsEntry};
use drift_model::pointer::pointer_segments;
use drift_model::Actor;

/// True when the `fieldsV1` trie owns the field at `pointer` in `object`.
pub fn owns(fields: &Value, object: &Value, pointer: &str) -> bool {
    let segments = pointer_segments(pointer);
    owns_segments(fields, Some(object), &segments)
}

fn owns_segments(node: &Value, value: Option<&Value>, segments: &[String]) -> bool {
    owns_below(node, segments, |segment| match value {
        Some(Value::Object(object)) => object.get(segment),
        Some(Value::Array(items)) => segment
            .parse::<usize>()
            .ok()
            .and_then(|index| items.get(index)),
        _ => None,
    })
}

/// [`owns_segments`] with the value's child at the first segment given by `child`. The walk on a
/// tree; `Attributor::owns` is the same walk reading the object's values only where a list
/// node needs them (the tests hold the two to the same answers).
fn owns_below<'v>(
    node: &Value,
    segments: &[String],
    child: impl FnOnce(&str) -> Option<&'v Value>,
) -> bool {
    let Value::Object(map) = node else {
        return false;
    };
    // An empty node is a leaf: the whole subtree below it is owned.
    if map.is_empty() {
        return true;
    }
    let Some((segment, rest)) = segments.split_first() else {
        return map.contains_key(".");
    };
    let child_value = child(segment);
    if let Some(child) = map.get(&format!("f:{segment}")) {
        return owns_segments(child, child_value, rest);
    }
    if let Ok(index) = segment.parse::<usize>() {
        if let Some(child) = map.get(&format!("i:{index}")) {
            return owns_segments(child, child_value, rest);
        }
        if let Some(item) = child_value {
            for (key, child) in map {
                if let Some(json_key) = key.strip_prefix("k:") {
                    if keyed_item_matches(json_key, item) {
                        return owns_segments(child, child_value, rest);
                    }
                } else if let Some(json_value) = key.strip_prefix("v:") {
                    if serde_json::from_str::<Value>(json_value).ok().as_ref() == Some(item) {
                        return owns_segments(child, child_value, rest);
                    }
                }
            }
        }
    }
    false
}

fn keyed_item_matches(json_key: &str, item: &Value) -> bool {
    let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(json_key) else {
        return false;
    };
    keys.iter()
        .all(|(key, expected)| item.get(key) == Some(expected))
}

/// The object's members other than `spec` as JSON for trie matching: `data` and the
/// metadata's maps at their usual places (the spec is read where it is: [`Attributor::owns`]).
fn object_json(object: &KubeObject) -> Value {
    let mut root = serde_json::Map::new();
    if let Some(data) = &object.data {
        root.insert(
            "data".into(),
            Value::Object(
                data.iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            ),
        );
    }
    root.insert(
        "metadata".into(),
        serde_json::json!({"labels": object.labels, "annotations": object.annotations}),
    );
    Value::Object(root)
}

fn moved(entry: &ManagedFieldsEntry, before: Option<&ObjectState>) -> bool {
    let Some(before) = before else {
        return false;
    };
    match before.managers.iter().find(|stamp| {
        *stamp.manager == *entry.manager
            && *stamp.operation == *entry.operation
            && *stamp.subresource == *entry.subresource
    }) {
        None => true,
        Some(stamp) => stamp.time != entry.time,
    }
}

/// Who changed `pointer` between `before` and `object`.
pub fn attribute(
    pointer: &str,
    object: &KubeObject,
    before: Option<&ObjectState>,
    rules: &Rules,
) -> Option<Actor> {
    Attributor::new(object).attribute(pointer, before, rules)
}

/// [`attribute`] for several paths of one event (a spec edit attributes each changed path, and
/// several classes look at the same event). The tries are walked on their JSON text, never
/// parsed whole: a path visits one node per level, and each node's members are jumped over
/// once per event, however many paths visit it (a parse of every entry's trie was most of an
/// attribution's cost).
pub struct Attributor<'a> {
    object: &'a KubeObject,
    /// `data` and `metadata` as JSON (see [`object_json`]), built when a path first needs them.
    json: OnceCell<Value>,
    /// The entries of the main resource (and `scale`).
    entries: Vec<&'a ManagedFieldsEntry>,
    /// The members of each trie node read so far, by the node text's place (the texts are the
    /// object's, borrowed for `'a`: one place, one text). The paths of one event share their
    /// first levels (the root, `f:spec`, ...), the largest nodes; an event naming many paths
    /// would otherwise read them again for each.
    nodes: RefCell<BTreeMap<(usize, usize), Option<NodeMembers<'a>>>>,
    /// The keyed and set members of each list node a path went through, filed by what they
    /// match, by the node text's place as `nodes`.
    lists: RefCell<BTreeMap<(usize, usize), Rc<ListMembers>>>,
    /// How many node reads the kept members answered (the tests check that they are used).
    #[cfg(test)]
    kept_reads: std::cell::Cell<usize>,
    /// How many list nodes were filed (the tests check that each is filed once per event).
    #[cfg(test)]
    lists_filed: std::cell::Cell<usize>,
}

/// A list node with more members than this is filed by what they match ([`ListMembers`]) rather
/// than walked with each key parsed for each path through it (a walk costs paths × members
/// parses: seconds for a forged node of 100,000 items).
const WALKED_LIST_MEMBERS: usize = 64;

/// A trie node's members, in document order, as names and value texts.
type NodeMembers<'a> = Rc<Vec<(Cow<'a, str>, &'a str)>>;

impl<'a> Attributor<'a> {
    /// The entries that can own a path of the object.
    pub fn new(object: &'a KubeObject) -> Attributor<'a> {
        let entries = object
            .managed_fields
            .iter()
            .filter(|entry| entry.subresource.is_empty() || entry.subresource == "scale")
            .collect();
        Attributor {
            object,
            json: OnceCell::new(),
            entries,
            nodes: RefCell::default(),
            lists: RefCell::default(),
            #[cfg(test)]
            kept_reads: std::cell::Cell::new(0),
            #[cfg(test)]
            lists_filed: std::cell::Cell::new(0),
        }
    }

    /// Who changed `pointer` between `before` and the object.
    pub fn attribute(
        &self,
        pointer: &str,
        before: Option<&ObjectState>,
        rules: &Rules,
    ) -> Option<Actor> {
        let newest = |entries: &mut dyn Iterator<Item = &'a ManagedFieldsEntry>| {
            entries.max_by(|left, right| left.time.cmp(&right.time))
        };
        let path = pointer_segments(pointer);
        let owners: Vec<&ManagedFieldsEntry> = self
            .entries
            .iter()
            .copied()
            .filter(|entry| self.owns(entry.fields.text(), &path, 0))
            .collect();
        let chosen = newest(&mut owners.iter().copied().filter(|entry| moved(entry, before)))
            .or_else(|| newest(&mut owners.iter().copied()))
            .or_else(|| {
                // Nobody owns it any more (a removal): the writer whose time moved is the
                // witness.
                newest(
                    &mut self
                        .entries
                        .iter()
                        .copied()
                        .filter(|entry| moved(entry, before)),
                )
            })?;
        Some(Actor {
            manager: chosen.manager.clone(),
            operation: chosen.operation.clone(),
            subresource: chosen.subresource.clone(),
            time: chosen.time.clone(),
            user: last_modifier(self.object)
                .filter(|(key, _)| self.user_is_chosen(chosen, key))
                .map(|(_, user)| user),
            trusted: rules.is_trusted(&chosen.manager),
        })
    }

    /// [`owns`] on the object, from `depth` of `path` (a pointer's segments, array indexes
    /// written as the diffs write them: digits, no leading zero) down, `node` being a trie
    /// node's JSON text (valid JSON: a `fieldsV1` is checked when its event is decoded, and
    /// parsed whole there where a `\u` escape or a number might not parse). It answers as
    /// [`owns`] on the parsed trie: a repeated member counts by its last value, and of several
    /// keyed or set items matching one list item the first in key order wins, as in a parsed
    /// `serde_json::Map`. The object's values are read only where a keyed or set list node
    /// (`k:`, `v:`) must match the item the path names, and then only that item: most paths
    /// (`f:` fields, `i:` positions) need none, and parsing the whole spec for one item was
    /// most of an attribution's cost.
    fn owns(&self, node: &'a str, path: &[String], depth: usize) -> bool {
        let Some(members) = self.members(node) else {
            return false;
        };
        // An empty node is a leaf: the whole subtree below it is owned.
        if members.is_empty() {
            return true;
        }
        let last = |key: &str| {
            members
                .iter()
                .rev()
                .find(|(name, _)| name == key)
                .map(|(_, child)| *child)
        };
        let Some(segment) = path.get(depth) else {
            return last(".").is_some();
        };
        if let Some(child) = last(&format!("f:{segment}")) {
            return self.owns(child, path, depth + 1);
        }
        let Ok(index) = segment.parse::<usize>() else {
            return false;
        };
        if let Some(child) = last(&format!("i:{index}")) {
            return self.owns(child, path, depth + 1);
        }
        // A keyed or set item: the object's item at the path, read only now and only that item.
        // A node of many items is filed once per event by what its members match
        // ([`ListMembers`]); a short one (the common case: a few containers, ports or env
        // entries) is walked, each key parsed, which costs less than filing it.
        if members.len() > WALKED_LIST_MEMBERS {
            let list = self.list_members(node, &members);
            if list.is_empty() {
                return false;
            }
            let Some(item) = self.value_at(path, depth) else {
                return false;
            };
            return list
                .owner(&members, &item)
                .and_then(|at| members.get(at))
                .is_some_and(|(_, child)| self.owns(child, path, depth + 1));
        }
        let mut item = None;
        let mut chosen: Option<(&str, &str)> = None;
        for (key, child) in members.iter() {
            // Only a key no larger than the one chosen can change the choice.
            if chosen.is_some_and(|(smallest, _)| key.as_ref() > smallest) {
                continue;
            }
            let matches = if let Some(json_key) = key.strip_prefix("k:") {
                item.get_or_insert_with(|| self.value_at(path, depth))
                    .as_ref()
                    .is_some_and(|item| keyed_item_matches(json_key, item))
            } else if let Some(json_value) = key.strip_prefix("v:") {
                let item = item.get_or_insert_with(|| self.value_at(path, depth));
                item.is_some() && serde_json::from_str::<Value>(json_value).ok() == *item
            } else {
                false
            };
            // The smallest matching key; of a repeated one, its last value.
            if matches && chosen.is_none_or(|(smallest, _)| key.as_ref() <= smallest) {
                chosen = Some((key.as_ref(), *child));
            }
        }
        chosen.is_some_and(|(_, child)| self.owns(child, path, depth + 1))
    }

    /// The keyed and set members of `node` ([`ListMembers`]), filed once per event.
    fn list_members(&self, node: &'a str, members: &[(Cow<'a, str>, &'a str)]) -> Rc<ListMembers> {
        let place = (node.as_ptr() as usize, node.len());
        if let Some(known) = self.lists.borrow().get(&place) {
            return known.clone();
        }
        #[cfg(test)]
        self.lists_filed.set(self.lists_filed.get() + 1);
        let list = Rc::new(ListMembers::of(members));
        self.lists.borrow_mut().insert(place, list.clone());
        list
    }

    /// [`node_members`] of `node`, read once per event.
    fn members(&self, node: &'a str) -> Option<NodeMembers<'a>> {
        let place = (node.as_ptr() as usize, node.len());
        if let Some(known) = self.nodes.borrow().get(&place) {
            #[cfg(test)]
            self.kept_reads.set(self.kept_reads.get() + 1);
            return known.clone();
        }
        let members = node_members(node).map(Rc::new);
        self.nodes.borrow_mut().insert(place, members.clone());
        members
    }

    /// The object's value at `path`'s first `depth + 1` segments: below `spec`, only that
    /// value is parsed from the spec's text (the tree, when something parsed it already).
    fn value_at(&self, path: &[String], depth: usize) -> Option<Value> {
        let segments = path.get(..=depth)?;
        let below = |segments: &[String]| {
            (segments.iter()).fold(String::new(), |pointer, segment| {
                drift_model::pointer::push_pointer(&pointer, segment)
            })
        };
        match segments.split_first() {
            Some((first, rest)) if first == "spec" => {
                let spec = &self.object.spec;
                let pointer = below(rest);
                if let Some(tree) = spec.parsed() {
                    return tree.pointer(&pointer).cloned();
                }
                match crate::decode::raw::pointer(spec.text(), &pointer) {
                    Some(found) => found.and_then(|text| serde_json::from_str(text).ok()),
                    None => spec.value().pointer(&pointer).cloned(),
                }
            }
            _ => self
                .json
                .get_or_init(|| object_json(self.object))
                .pointer(&below(segments))
                .cloned(),
        }
    }

    /// Whether the `lastModifier` annotation `key` speaks for the `chosen` writer. A Knative-made
    /// child (a net-istio VirtualService, a Revision's Deployment) carries its parent's
    /// annotations, copied by the controller: its `lastModifier` names whoever last changed the
    /// parent, not who edited the child. There the annotation counts only when the chosen
    /// writer owns it (Knative's webhook stamps it within the editing request, so the request's
    /// manager owns it); on other objects it is the webhook's record of the spec's last writer.
    fn user_is_chosen(&self, chosen: &ManagedFieldsEntry, key: &str) -> bool {
        if !self
            .object
            .owner_references
            .iter()
            .any(|owner| owner.controller)
        {
            return true;
        }
        let pointer = format!(
            "/metadata/annotations/{}",
            key.replace('~', "~0").replace('/', "~1")
        );
        let path = pointer_segments(&pointer);
        self.entries
            .iter()
            .any(|entry| std::ptr::eq(*entry, chosen) && self.owns(entry.fields.text(), &path, 0))
    }
}

/// A trie node's members, in document order, as names and value texts: `None` when the node is
/// not an object. Jumped over where no name is escaped; a node with an escaped name (keyed
/// items: `k:{"name":"app"}`) is read one level deep by the parser.
fn node_members(text: &str) -> Option<Vec<(Cow<'_, str>, &str)>> {
    if let Some(members) = crate::decode::raw::member_texts(text) {
        return Some(
            members
                .into_iter()
                .map(|(name, value)| (Cow::Borrowed(name), value))
                .collect(),
        );
    }
    let members = crate::decode::raw::Members::of(text)?;
    Some(
        members
            .0
            .into_iter()
            .map(|(name, value)| (name, value.get()))
            .collect(),
    )
}

/// The user Knative's webhook recorded as the last to modify the object: each Knative group
/// stamps its own `<group>/lastModifier` (`serving.knative.dev`, `eventing.knative.dev`,
/// `messaging.knative.dev`, `sources.knative.dev`, `flows.knative.dev`).
fn last_modifier(object: &KubeObject) -> Option<(String, String)> {
    let group = crate::decode::object::api_group(&object.api_version);
    if crate::decode::object::is_knative_group(group) {
        let key = format!("{group}/lastModifier");
        if let Some(user) = object.annotations.get(&key) {
            return Some((key, user.clone()));
        }
    }
    let key = "serving.knative.dev/lastModifier";
    object
        .annotations
        .get(key)
        .map(|user| (key.to_string(), user.clone()))
}

#[cfg(test)]
#[path = "tests/actor.rs"]
mod tests;
