//! The borrowed tree against `Value`: the same text written, the same bytes counted, the same
//! kept status, on every JSON fixture as it is on disk (the API server's member order, Go's
//! escapes) and on texts made to differ (repeated keys, escapes, numbers, wrong types).

use super::*;

/// Texts whose reading could differ: repeated keys (last wins), keys out of order, escapes in
/// keys and strings, numbers of every kind, empty containers, conditions of every shape.
fn made_texts() -> Vec<String> {
    [
        r#"{"b":1,"a":2,"b":3}"#,
        r#"{"z":{"y":1,"x":[{"b":true,"a":null}]},"a":"\u00e9\"\\\/\n\t","a\u0062":1}"#,
        r#"[1,-1,0,-0,1.5,-0.0,1e2,1E-2,18446744073709551615,-9223372036854775808,12345678901234567890123]"#,
        r#"{"":"","\ud83d\ude00":"😀","x":{},"y":[]}"#,
        r#"{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"t","lastUpdateTime":"u","lastHeartbeatTime":"h","reason":"R"},1,"x",null,[],{}],"observedGeneration":3}"#,
        r#"{"conditions":{"type":"Ready"},"url":"http://x","traffic":[{"percent":100,"revisionName":"r"}]}"#,
        r#"{"conditions":"none","zeta":1}"#,
        r#"{"unkept":true}"#,
        r#"{"conditions":[{"type":"A","type":"B","lastTransitionTime":"1","lastTransitionTime":"2"}],"conditions":[]}"#,
        r#"{"replicas":2,"readyReplicas":"2","traffic":[{"percent":"50"}],"imageDigest":7}"#,
    ]
    .iter()
    .map(|text| text.to_string())
    .collect()
}

fn all_texts() -> Vec<String> {
    let mut texts = made_texts();
    texts.extend(crate::decode::fixtures::json_texts());
    texts
}

#[test]
fn writes_counts_and_keeps_as_a_value_does() {
    let mut objects = 0;
    for text in all_texts() {
        let node: Node<'_> = serde_json::from_str(&text).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(node.to_string(), value.to_string(), "{text}");
        assert_eq!(Tree::type_name(&node), Tree::type_name(&value), "{text}");
        for limit in [0, 10, usize::MAX] {
            assert_eq!(node.json_bytes(limit), value.json_bytes(limit), "{text}");
        }
        assert_eq!(
            node.kept_status().text(),
            value.kept_status().text(),
            "{text}"
        );
        // Every object inside, as a status of its own: most fixtures are objects whose
        // `status` is one level down.
        let mut stack = vec![(&node, &value)];
        while let Some((node, value)) = stack.pop() {
            match (node, value) {
                (Node::Object(members), Value::Object(map)) => {
                    objects += 1;
                    assert_eq!(members.len(), map.len(), "{text}");
                    assert_eq!(node.kept_status().text(), value.kept_status().text());
                    for (key, item) in members {
                        assert_eq!(node.member(key), Some(item));
                        stack.push((item, &map[key.as_ref()]));
                    }
                }
                (Node::Array(items), Value::Array(values)) => {
                    assert_eq!(node.items().map(<[_]>::len), Some(values.len()));
                    stack.extend(items.iter().zip(values));
                }
                (node, value) => {
                    assert_eq!(Tree::type_name(node), Tree::type_name(value));
                    assert_eq!(node.text(), value.text());
                    assert_eq!(node.number(), Tree::number(value));
                    assert_eq!(Tree::is_null(node), Tree::is_null(value));
                    assert_eq!(Tree::is_bool(node), Tree::is_bool(value));
                }
            }
        }
    }
    assert!(objects > 500, "{objects} objects compared");
}

#[test]
fn strings_without_escapes_are_borrowed() {
    let text = r#"{"plain":"abc","escaped":"a\"b","key\u0041":1}"#;
    let node: Node<'_> = serde_json::from_str(text).unwrap();
    let Node::Object(members) = &node else {
        panic!("{node:?}")
    };
    let borrowed = |cow: &Cow<'_, str>| matches!(cow, Cow::Borrowed(_));
    let (escaped, plain) = (&members[0], &members[2]);
    assert_eq!(escaped.0, "escaped");
    assert!(matches!(&escaped.1, Node::String(Cow::Owned(text)) if text == "a\"b"));
    assert!(matches!(&plain.1, Node::String(cow) if borrowed(cow)));
    assert_eq!(members[1].0, "keyA");
    assert!(!borrowed(&members[1].0));
}

#[test]
fn a_repeated_key_keeps_the_last_in_key_order() {
    let node: Node<'_> = serde_json::from_str(r#"{"b":1,"a":2,"b":3,"a":4,"c":5}"#).unwrap();
    assert_eq!(node.to_string(), r#"{"a":4,"b":3,"c":5}"#);
    assert_eq!(node.member("b"), Some(&Node::Number(3.into())));
}

/// serde_json's raw-value token as an object's first key: `Value` reads the string inside as
/// JSON; a `Node` refuses it (the fast path then leaves the object to the general path). As a
/// later key it is an ordinary key to both.
#[test]
fn the_raw_value_token_is_left_to_value() {
    for text in [
        r#"{"$serde_json::private::RawValue":"3"}"#,
        r#"[{"$serde_json::private::RawValue":"{\"a\":1}"}]"#,
        r#"{"a":{"$serde_json::private::RawValue":"x","b":1}}"#,
    ] {
        assert!(serde_json::from_str::<Node<'_>>(text).is_err(), "{text}");
    }
    let text = r#"{"a":1,"$serde_json::private::RawValue":"3"}"#;
    let node: Node<'_> = serde_json::from_str(text).unwrap();
    let value: Value = serde_json::from_str(text).unwrap();
    assert_eq!(node.to_string(), value.to_string());
}
