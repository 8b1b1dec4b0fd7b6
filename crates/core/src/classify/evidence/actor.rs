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
    /// How many node reads the kept members answered (the tests check that they are used).
    #[cfg(test)]
    kept_reads: std::cell::Cell<usize>,
}

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
            #[cfg(test)]
            kept_reads: std::cell::Cell::new(0),
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
                match crate::decode::raw::pointer(spec.raw().get(), &pointer) {
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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn atomic_list_owner_owns_every_item() {
        let fields = json!({"f:spec": {"f:traffic": {}}});
        let object = json!({"spec": {"traffic": [{"percent": 100}]}});
        assert!(owns(&fields, &object, "/spec/traffic/0/percent"));
        assert!(!owns(&fields, &object, "/spec/template"));
    }

    #[test]
    fn keyed_list_items_match_by_key() {
        let fields = json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"user-container\"}": {".": {}, "f:image": {}}}}}}});
        let object = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "queue-proxy", "image": "q"}, {"name": "user-container", "image": "u"}]}}}});
        assert!(owns(
            &fields,
            &object,
            "/spec/template/spec/containers/1/image"
        ));
        assert!(!owns(
            &fields,
            &object,
            "/spec/template/spec/containers/0/image"
        ));
        assert!(owns(&fields, &object, "/spec/template/spec/containers/1"));
        assert!(!owns(
            &fields,
            &object,
            "/spec/template/spec/containers/1/env"
        ));
    }

    /// Every path of every fixture object with `managedFields`, every entry: the attributor's
    /// borrowed spec answers as the whole object as one tree did.
    #[test]
    fn attributor_owns_as_the_whole_object_tree() {
        fn paths(value: &Value, at: String, out: &mut Vec<String>) {
            out.push(at.clone());
            match value {
                Value::Object(map) => map.iter().for_each(|(key, child)| {
                    paths(child, drift_model::pointer::push_pointer(&at, key), out)
                }),
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .for_each(|(index, child)| paths(child, format!("{at}/{index}"), out)),
                _ => {}
            }
        }
        let (mut checked, mut decided_by_values, mut read_from_text, mut kept) = (0, 0, 0, 0);
        for mut value in crate::decode::fixtures::nested_values() {
            if value.pointer("/metadata/managedFields").is_none() {
                continue;
            }
            // An admission request's object has no identity yet (a `CREATE`): given one.
            for key in ["uid", "resourceVersion"] {
                if value["metadata"].get(key).is_none() {
                    value["metadata"][key] = json!("1");
                }
            }
            // Two copies: one whose spec is parsed (the tree answers), one whose spec stays
            // text (each item is read from the text, parsed alone).
            let Ok(object) = crate::decode::shape::parse_object(value.clone()) else {
                continue;
            };
            let Ok(unparsed) = crate::decode::shape::parse_object(value) else {
                continue;
            };
            let mut whole = object_json(&object);
            whole["spec"] = object.spec.value().clone();
            let mut all = Vec::new();
            paths(&whole, String::new(), &mut all);
            all.push("/spec/missing/0".into());
            all.push("/data/missing".into());
            let attributor = Attributor::new(&object);
            let from_text = Attributor::new(&unparsed);
            let mut without_spec = whole.clone();
            without_spec["spec"] = json!({});
            for entry in &attributor.entries {
                let fields = &entry.fields.value();
                let text = entry.fields.text();
                for path in &all {
                    // Paths through keyed or set list items (`k:`, `v:`) are owned by what the
                    // items hold: there the spec's values decide.
                    if owns(fields, &whole, path) != owns(fields, &without_spec, path) {
                        decided_by_values += 1;
                    }
                    let segments = pointer_segments(path);
                    let expected = owns(fields, &whole, path);
                    let (kind, name) = (&object.kind, &object.name);
                    assert_eq!(
                        attributor.owns(text, &segments, 0),
                        expected,
                        "{path} of {kind}/{name}"
                    );
                    assert_eq!(
                        from_text.owns(text, &segments, 0),
                        expected,
                        "{path} of {kind}/{name}, its spec read from the text"
                    );
                    checked += 1;
                }
            }
            // Its items were read from the text: the spec was never parsed whole.
            if unparsed.spec.parsed().is_none() {
                read_from_text += 1;
            }
            // Later paths read the nodes from what the first ones kept.
            kept += attributor.kept_reads.get() + from_text.kept_reads.get();
        }
        assert!(checked > 1_000, "only {checked} paths checked");
        assert!(
            decided_by_values > 10,
            "only {decided_by_values} paths whose owner the spec's values decide"
        );
        assert!(
            read_from_text > 10,
            "only {read_from_text} specs read as text"
        );
        assert!(
            kept > 1_000,
            "only {kept} node reads answered by kept members"
        );
    }

    #[test]
    fn dotted_node_owns_itself_only() {
        let fields = json!({"f:data": {".": {}, "f:a": {}}});
        let object = json!({"data": {"a": "1", "b": "2"}});
        assert!(owns(&fields, &object, "/data/a"));
        assert!(!owns(&fields, &object, "/data/b"));
        assert!(owns(&fields, &object, "/data"));
    }

    /// Paths whose members need escaping (`/` and `~` in a key; a quote, which only the parser
    /// reads) and keyed and set list nodes: the attributor answers as the tree walk does,
    /// with the spec parsed, given as a value, or read from its text.
    #[test]
    fn attributor_owns_on_escaped_and_list_paths() {
        let fields = json!({"f:spec": {
            "f:a/b~c": {"f:list": {"k:{\"name\":\"x\"}": {".": {}, "f:v": {}}}},
            "f:quo\"te": {"f:list": {"k:{\"name\":\"x\"}": {".": {}, "f:v": {}}}},
            "f:set": {"v:\"s1\"": {}},
            "f:containers": {"k:{\"name\":\"user-container\"}": {".": {}, "f:image": {}}}
        }});
        let spec = json!({
            "a/b~c": {"list": [{"name": "y", "v": 0}, {"name": "x", "v": 1}]},
            "quo\"te": {"list": [{"name": "y", "v": 0}, {"name": "x", "v": 1}]},
            "set": ["s0", "s1"],
            "containers": [
                {"name": "queue-proxy", "image": "q"},
                {"name": "user-container", "image": "u"}
            ]
        });
        let value = json!({
            "apiVersion": "example.dev/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "n", "uid": "u-1", "resourceVersion": "1",
                "managedFields": [{"manager": "kubectl", "operation": "Update",
                    "apiVersion": "example.dev/v1", "time": "2025-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1", "fieldsV1": fields}]},
            "spec": spec,
        });
        let parsed = crate::decode::shape::parse_object(value.clone()).expect("parses");
        let from_value = crate::decode::shape::parse_object(value.clone()).expect("parses");
        let from_text =
            crate::decode::shape::parse_object_text(&value.to_string()).expect("parses");
        let mut whole = object_json(&parsed);
        whole["spec"] = parsed.spec.value().clone();
        let mut owned = 0;
        for path in [
            "/spec/a~1b~0c/list/1/v",
            "/spec/a~1b~0c/list/0/v",
            "/spec/quo\"te/list/1/v",
            "/spec/quo\"te/list/0/v",
            "/spec/set/1",
            "/spec/set/0",
            "/spec/containers/1/image",
            "/spec/containers/0/image",
        ] {
            let expected = owns(&fields, &whole, path);
            owned += usize::from(expected);
            let segments = pointer_segments(path);
            for (how, object) in [
                ("parsed", &parsed),
                ("value", &from_value),
                ("text", &from_text),
            ] {
                let attributor = Attributor::new(object);
                assert_eq!(attributor.entries.len(), 1);
                let got = attributor.owns(attributor.entries[0].fields.text(), &segments, 0);
                assert_eq!(got, expected, "{path} ({how})");
            }
        }
        assert_eq!(
            owned, 4,
            "each list's matching item is owned, the other not"
        );
        // The name with a quote was read through the parser: the whole spec parsed.
        assert!(from_text.spec.parsed().is_some());
    }

    /// The trie walked on its text answers as the parsed trie: a repeated member by its last
    /// value (the parser's last-wins), and of two keyed items matching one list item the one
    /// first in key order (a parsed map's order), wherever they stand in the text.
    #[test]
    fn a_trie_text_answers_as_its_parsed_tree() {
        let spec = json!({"ports": [{"name": "http", "port": 80}], "replicas": 1, "paused": true});
        // Written as text: a parsed `Value` could not hold a repeated member.
        let tries = [
            // `f:replicas` owned by the first `f:spec` only: the last one wins.
            r#"{"f:spec":{"f:replicas":{}},"f:spec":{"f:paused":{}}}"#,
            r#"{"f:spec":{"f:paused":{}},"f:spec":{"f:replicas":{}}}"#,
            // Two keys matching the port; the smaller (`k:{"name"...`) owns `port`, the
            // larger (`k:{"port"...`) does not, in either order of the text.
            r#"{"f:spec":{"f:ports":{"k:{\"port\":80}":{"f:name":{}},"k:{\"name\":\"http\"}":{"f:port":{}}}}}"#,
            r#"{"f:spec":{"f:ports":{"k:{\"name\":\"http\"}":{"f:port":{}},"k:{\"port\":80}":{"f:name":{}}}}}"#,
            // A repeated keyed item: its last value.
            r#"{"f:spec":{"f:ports":{"k:{\"name\":\"http\"}":{"f:port":{}},"k:{\"name\":\"http\"}":{"f:name":{}}}}}"#,
            // Not an object where a node should be.
            r#"{"f:spec":{"f:replicas":null,"f:paused":[]}}"#,
            "null",
        ];
        let mut owned = 0;
        for trie in tries {
            let fields: serde_json::Value = serde_json::from_str(trie).expect("valid JSON");
            let value = json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "namespace": "n", "uid": "u-1", "resourceVersion": "1",
                    "managedFields": [{"manager": "kubectl", "operation": "Update",
                        "apiVersion": "apps/v1", "time": "2025-01-01T00:00:00Z",
                        "fieldsType": "FieldsV1", "fieldsV1": "PLACEHOLDER"}]},
                "spec": spec,
            });
            // The trie's own text, repeated members and all, in the event.
            let text = value.to_string().replace("\"PLACEHOLDER\"", trie);
            let object = crate::decode::shape::parse_object_text(&text).expect("parses");
            let attributor = Attributor::new(&object);
            assert_eq!(attributor.entries[0].fields.text(), trie);
            let whole = json!({"spec": spec});
            for path in [
                "/spec/replicas",
                "/spec/paused",
                "/spec/ports/0/port",
                "/spec/ports/0/name",
            ] {
                let expected = owns(&fields, &whole, path);
                owned += usize::from(expected);
                let got = attributor.owns(trie, &pointer_segments(path), 0);
                assert_eq!(got, expected, "{path} in {trie}");
            }
        }
        assert_eq!(owned, 5, "each trie owns what its parsed tree owns");
    }
}
