//! The filed members answer as the members' walk: each key parsed and compared with the item.

use std::borrow::Cow;

use serde_json::{json, Value};

use super::{canonical, ListMembers};

/// The walk `ListMembers` replaces: every member in document order, its key parsed, the
/// smallest matching name chosen (of a repeated name, the last).
fn walked(members: &[(Cow<'_, str>, &str)], item: &Value) -> Option<usize> {
    let mut chosen: Option<usize> = None;
    for (at, (name, _)) in members.iter().enumerate() {
        let matches = if let Some(json_key) = name.strip_prefix("k:") {
            match serde_json::from_str::<Value>(json_key) {
                Ok(Value::Object(keys)) => keys
                    .iter()
                    .all(|(key, expected)| item.get(key) == Some(expected)),
                _ => false,
            }
        } else if let Some(json_value) = name.strip_prefix("v:") {
            serde_json::from_str::<Value>(json_value).ok().as_ref() == Some(item)
        } else {
            false
        };
        if matches && chosen.is_none_or(|known| name.as_ref() <= members[known].0.as_ref()) {
            chosen = Some(at);
        }
    }
    chosen
}

fn members(names: &[&str]) -> Vec<(Cow<'static, str>, &'static str)> {
    names
        .iter()
        .map(|name| (Cow::Owned(name.to_string()), "{}"))
        .collect()
}

#[test]
fn equal_values_and_only_they_have_equal_texts() {
    let values: Vec<Value> = [
        "0",
        "0.0",
        "-0.0",
        "-0",
        "1",
        "1.0",
        "1e0",
        "10",
        "\"é\"",
        "\"\\u00e9\"",
        "\"a\\/b\"",
        "\"a/b\"",
        "null",
        "true",
        "false",
        "[]",
        "{}",
        "[1,2]",
        "[2,1]",
        r#"{"a":1,"b":2}"#,
        r#"{"b":2,"a":1}"#,
        r#"{"a":-0.0}"#,
        r#"{"a":0.0}"#,
        r#"[{"x":[0.0]}]"#,
        r#"[{"x":[-0.0]}]"#,
        "18446744073709551615",
        "-9223372036854775808",
        "1.5e300",
    ]
    .iter()
    .map(|text| serde_json::from_str(text).expect(text))
    .collect();
    for left in &values {
        for right in &values {
            assert_eq!(
                canonical(&[left]) == canonical(&[right]),
                left == right,
                "{left} against {right}: {} and {}",
                canonical(&[left]),
                canonical(&[right])
            );
        }
    }
}

#[test]
fn the_filed_members_choose_as_the_walk() {
    let nodes = [
        members(&[r#"k:{"name":"a"}"#, r#"k:{"name":"b"}"#, "f:x", "."]),
        // Two field sets matching one item: the smaller name wins, in either order.
        members(&[r#"k:{"port":80}"#, r#"k:{"name":"http"}"#]),
        members(&[r#"k:{"name":"http"}"#, r#"k:{"port":80}"#]),
        // One key written two ways, and a repeated name: the smaller, of a repeat the last.
        members(&[
            r#"k:{"name": "http"}"#,
            r#"k:{"name":"http"}"#,
            r#"k:{"name":"http"}"#,
        ]),
        // Keys of two fields, in either order of the text.
        members(&[
            r#"k:{"port":80,"protocol":"TCP"}"#,
            r#"k:{"protocol":"UDP","port":80}"#,
        ]),
        // Set items, numbers written two ways, a keyless key, keys that do not parse or are
        // not objects.
        members(&[r#"v:"a""#, "v:1", "v:1.0", "v:-0.0", r#"v:{"z":[1]}"#]),
        members(&["k:{}", r#"k:{"name":"a"}"#]),
        members(&[
            "k:not json",
            "k:[1]",
            "v:",
            r#"k:{"name":"a""#,
            r#"k:{"name":"a"}"#,
        ]),
    ];
    let items = [
        json!({"name": "a"}),
        json!({"name": "b", "port": 80}),
        json!({"name": "http", "port": 80, "protocol": "TCP"}),
        json!({"port": 80, "protocol": "UDP"}),
        json!({"port": 80.0}),
        json!("a"),
        json!(1),
        json!(1.0),
        json!(0.0),
        json!({"z": [1]}),
        json!([1]),
        json!(null),
        json!({}),
    ];
    for node in &nodes {
        let list = ListMembers::of(node);
        for item in &items {
            assert_eq!(
                list.owner(node, item),
                walked(node, item),
                "{item} in {:?}",
                node.iter()
                    .map(|(name, _)| name.as_ref())
                    .collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn a_node_of_many_items_files_each_once() {
    let names: Vec<String> = (0..20_000)
        .map(|at| format!(r#"k:{{"name":"c{at}"}}"#))
        .collect();
    let node: Vec<(Cow<'_, str>, &str)> = names
        .iter()
        .map(|name| (Cow::Borrowed(name.as_str()), "{}"))
        .collect();
    let list = ListMembers::of(&node);
    for at in [0, 1, 9_999, 19_999] {
        assert_eq!(
            list.owner(&node, &json!({"name": format!("c{at}")})),
            Some(at)
        );
    }
    assert_eq!(list.owner(&node, &json!({"name": "c20000"})), None);
    assert!(!list.is_empty());
    assert!(ListMembers::of(&members(&["f:a", "i:0", "."])).is_empty());
}
