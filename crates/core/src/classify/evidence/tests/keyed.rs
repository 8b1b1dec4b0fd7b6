//! The filed members answer as the members' walk: each key parsed and compared with the item.

use std::borrow::Cow;

use serde_json::{json, Value};

use super::{canonical, ListMembers, MAX_KEY_FIELD_SETS};

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
        "9223372036854775808",
        "-1",
        "-1.0",
        "1e16",
        "10000000000000000",
        r#"{"a\"b":1}"#,
        r#"{"a\u0022b":1}"#,
        r#"{"\u00e9":[]}"#,
        r#"{"é":[]}"#,
        r#"{"a":1,"a":2}"#,
        r#"{"a":2}"#,
    ]
    .iter()
    .map(|text| serde_json::from_str(text).expect(text))
    .collect();
    for left in &values {
        for right in &values {
            let (left_text, right_text) =
                (canonical(left, usize::MAX), canonical(right, usize::MAX));
            assert_eq!(
                left_text == right_text,
                left == right,
                "{left} against {right}: {left_text:?} and {right_text:?}"
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
        // The smallest matching name repeated (a key naming a field twice parses to its last
        // value, so the first member equals the others and sorts after them).
        members(&[
            r#"k:{"name":"x","name":"http"}"#,
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
    let node = members(&names.iter().map(String::as_str).collect::<Vec<_>>());
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

/// What a lookup writes of the item is bounded by what was filed: a field holding a large value
/// (which equals no key's small value) is not written out, nor is a large set item.
#[test]
fn a_large_item_value_is_not_written_out() {
    assert_eq!(canonical(&json!([0, 0, 0]), 7), Some("[0,0,0]".to_string()));
    assert_eq!(canonical(&json!([0, 0, 0]), 6), None);
    assert_eq!(canonical(&json!("abcdef"), 7), None);
    // Only its escape makes this string longer than the limit.
    assert_eq!(
        canonical(&json!("\u{1}"), 8),
        Some(r#""\u0001""#.to_string())
    );
    assert_eq!(canonical(&json!("\u{1}"), 4), None);
    assert_eq!(canonical(&json!({"abcdef": 1}), 7), None);
    let node = members(&[r#"k:{"a":0,"b":0}"#, "v:0"]);
    let list = ListMembers::of(&node);
    let large = json!({"a": vec![0; 100_000], "b": 0});
    assert_eq!(list.owner(&node, &large), walked(&node, &large));
    assert_eq!(list.owner(&node, &json!({"a": 0, "b": 0})), Some(0));
    assert_eq!(list.owner(&node, &json!(vec![0; 100_000])), None);
}

/// A node whose keys use more field sets than any list's schema gives (a forged one) files the
/// first sets only: the members of the others match nothing.
#[test]
fn a_node_of_too_many_key_field_sets_files_the_first() {
    let names: Vec<String> = (0..=MAX_KEY_FIELD_SETS)
        .map(|at| format!(r#"k:{{"f{at:02}":0}}"#))
        .collect();
    let node = members(&names.iter().map(String::as_str).collect::<Vec<_>>());
    let list = ListMembers::of(&node);
    assert_eq!(list.owner(&node, &json!({"f00": 0})), Some(0));
    let kept = MAX_KEY_FIELD_SETS - 1;
    assert_eq!(
        list.owner(&node, &json!({format!("f{kept:02}"): 0})),
        Some(kept)
    );
    let last = MAX_KEY_FIELD_SETS;
    let beyond = json!({format!("f{last:02}"): 0});
    assert_eq!(walked(&node, &beyond), Some(last));
    assert_eq!(list.owner(&node, &beyond), None);
}
