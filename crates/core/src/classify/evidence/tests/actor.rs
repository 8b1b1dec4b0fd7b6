//! Attribution on the trie's text held to the walk on its parsed tree, and its bounds.

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
    let from_text = crate::decode::shape::parse_object_text(&value.to_string()).expect("parses");
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

/// A list of many keyed items (a forged trie could hold 100,000) is filed once per event,
/// however many paths go through it, and each path finds its own item's owner.
#[test]
fn a_long_keyed_list_is_filed_once_for_every_path() {
    // (items, every how many an item's paths are asked, lists filed): a node of up to
    // `WALKED_LIST_MEMBERS` members is walked, a longer one filed once.
    let cases = [
        (3_000, 60, 1),
        (WALKED_LIST_MEMBERS, 1, 0),
        (WALKED_LIST_MEMBERS + 1, 1, 1),
    ];
    for (count, step, filed) in cases {
        let keyed: serde_json::Map<String, Value> = (0..count)
            .map(|at| (format!("k:{{\"name\":\"c{at}\"}}"), json!({"f:image": {}})))
            .collect();
        let items: Vec<Value> = (0..count)
            .map(|at| json!({"name": format!("c{at}"), "image": "i"}))
            .collect();
        let value = json!({
            "apiVersion": "example.dev/v1", "kind": "Widget",
            "metadata": {"name": "p", "namespace": "n", "uid": "u-1", "resourceVersion": "1",
                "managedFields": [{"manager": "kubectl", "operation": "Update",
                    "apiVersion": "example.dev/v1", "time": "2025-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:items": keyed}}}]},
            "spec": {"items": items},
        });
        let object = crate::decode::shape::parse_object_text(&value.to_string()).expect("parses");
        let attributor = Attributor::new(&object);
        let trie = attributor.entries[0].fields.text();
        for at in (0..count).step_by(step) {
            let image = pointer_segments(&format!("/spec/items/{at}/image"));
            assert!(attributor.owns(trie, &image, 0), "item {at} of {count}");
            let name = pointer_segments(&format!("/spec/items/{at}/name"));
            assert!(
                !attributor.owns(trie, &name, 0),
                "item {at}'s name of {count}"
            );
        }
        assert_eq!(attributor.lists_filed.get(), filed, "{count} items");
    }
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
