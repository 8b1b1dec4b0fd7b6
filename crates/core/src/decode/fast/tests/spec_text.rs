//! The spec read once, against specs and documents written as text (helper-109's review):
//! repeated and escaped keys, serde_json's raw-value token, spacing, `spec` as a value or
//! nested, every one-byte change of a document.

use proptest::prelude::*;
use serde_json::Value;

use super::super::{cut_data, parse, spec_view};
use crate::decode::object::parse_general;
use crate::decode::raw::{scan, Members};
use crate::decode::shape::{checked, checked_with, spec_view_general};

const OBJECT_HEAD: &str =
    r#""apiVersion":"v1","kind":"Pod","metadata":{"name":"n","uid":"u","resourceVersion":"5"}"#;

/// A JSON value written as text: keys repeated or escaped, the raw-value token, strings
/// with brackets, quotes and backslashes.
fn text_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        prop::sample::select(vec![
            "0",
            "-0",
            "3",
            "-1",
            "1.5",
            "-0.0",
            "18446744073709551615",
            "9223372036854775808",
            "1e2"
        ])
        .prop_map(str::to_string),
        prop::sample::select(vec![
            r#""a""#,
            r#""}{""#,
            r#""\"]""#,
            r#""\\""#,
            r#""spec""#,
            r#""\"spec\":{""#,
            r#""é\u00e9""#
        ])
        .prop_map(str::to_string),
        prop::sample::select(vec![
            r#"{"$serde_json::private::RawValue":"3"}"#,
            r#"{"$serde_json::private::RawValue":"[{\"name\":\"c\"}]"}"#,
            r#"{"$serde_json::private::RawValue":"{\"name\":1}"}"#,
            r#"{"$serde_json::private::RawValue":"\"s\""}"#,
        ])
        .prop_map(str::to_string),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        let key = prop::sample::select(vec![
            "name",
            "image",
            "containers",
            "template",
            "spec",
            "traffic",
            "replicas",
            "x",
            "n\\u0061me",
            "cont\\u0061iners",
            "sp\\u0065c",
            "templat\\u0065",
            "$serde_json::private::RawValue",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4)
                .prop_map(|items| format!("[{}]", items.join(","))),
            prop::collection::vec((key, inner), 0..5).prop_map(object_text),
        ]
    })
}

/// An object's text from its members' names (as written, escapes included) and value texts.
fn object_text(members: Vec<(&'static str, String)>) -> String {
    let members: Vec<String> = members
        .into_iter()
        .map(|(key, value)| format!("\"{key}\":{value}"))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// A spec object written as text, its members repeated, the parts read often of the expected
/// shape.
fn text_spec() -> impl Strategy<Value = String> {
    let container = prop_oneof![
        prop::collection::vec(
            (
                prop::sample::select(vec!["name", "image", "n\\u0061me", "env"]),
                text_value()
            ),
            0..4
        )
        .prop_map(object_text),
        text_value(),
    ];
    let containers = prop_oneof![
        prop::collection::vec(container, 0..3).prop_map(|items| format!("[{}]", items.join(","))),
        text_value(),
    ];
    let pod_spec = prop_oneof![
        prop::collection::vec(
            (
                prop::sample::select(vec!["containers", "containers", "x"]),
                containers.clone()
            ),
            0..3
        )
        .prop_map(object_text),
        text_value(),
    ];
    let template = prop_oneof![
        prop::collection::vec(
            (
                prop::sample::select(vec!["spec", "spec", "metadata", "sp\\u0065c"]),
                pod_spec
            ),
            0..3
        )
        .prop_map(object_text),
        text_value(),
    ];
    let member = prop_oneof![
        containers.prop_map(|value| format!("\"containers\":{value}")),
        template.prop_map(|value| format!("\"template\":{value}")),
        text_value().prop_map(|value| format!("\"traffic\":{value}")),
        text_value().prop_map(|value| format!("\"replicas\":{value}")),
        text_value().prop_map(|value| format!("\"x\":{value}")),
        text_value().prop_map(|value| format!("\"$serde_json::private::RawValue\":{value}")),
    ];
    prop::collection::vec(member, 0..6).prop_map(|members| format!("{{{}}}", members.join(",")))
}

/// Whitespace after some of the structural characters (outside strings: the texts made here
/// hold no space in a string but `é`).
fn spaced(text: &str, mask: u64) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut in_string = false;
    let mut escaped = false;
    for (index, c) in text.chars().enumerate() {
        out.push(c);
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if c == '"' {
            in_string = true;
            continue;
        }
        if matches!(c, '{' | '[' | ':' | ',') && mask >> (index % 64) & 1 == 1 {
            out.push_str(" \n");
        }
    }
    out
}

/// Both paths on a document: the same object or error, the spec's text the last `spec` member
/// as written, its kept view the level-by-level one.
fn agree(text: &str) -> Result<bool, TestCaseError> {
    let Ok(scanned) = scan(text) else {
        return Ok(false);
    };
    let cut = cut_data(text, &scanned);
    let fast = parse(text, scanned, cut.as_ref());
    let Some((fast, status)) = fast else {
        return Ok(false);
    };
    // The pass succeeded: the text is JSON, and the spec kept is the one serde reads.
    prop_assert!(
        serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok(),
        "{}",
        text
    );
    let members = Members::of(text).unwrap();
    let expected = members.get("spec").map_or("null", |raw| raw.get());
    prop_assert_eq!(fast.spec.text(), expected, "{}", text);
    let viewed = fast.spec.view().is_some();
    if let Some(view) = fast.spec.view() {
        let general = spec_view_general(fast.spec.text()).ok();
        prop_assert_eq!(Some(view), general.as_ref(), "{}", text);
    }
    let mut general = parse_general(text, scanned).unwrap();
    let general_status = std::mem::take(&mut general.status);
    prop_assert_eq!(&fast, &general, "{}", text);
    prop_assert_eq!(fast.spec.text(), general.spec.text(), "{}", text);
    general.status = general_status;
    let fast = match &status {
        Some(status) => checked_with(fast, status),
        None => checked_with(fast, &Value::Null),
    };
    match (fast, checked(general)) {
        (Ok(fast), Ok(general)) => prop_assert_eq!(fast, general, "{}", text),
        (Err(fast), Err(general)) => {
            prop_assert_eq!(fast.to_string(), general.to_string(), "{}", text)
        }
        (fast, general) => prop_assert!(false, "{:?} against {:?}: {}", fast, general, text),
    }
    Ok(viewed)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_view_of_specs_written_as_text(spec in text_spec(), mask in any::<u64>(), space in any::<bool>()) {
        let spec = if space { spaced(&spec, mask) } else { spec };
        let general = spec_view_general(&spec);
        let lenient = spec_view(&spec);
        match (&lenient, &general) {
            (Some(lenient), Ok(general)) => prop_assert_eq!(lenient, general, "{}", spec),
            (None, Err(_)) => {}
            // Not an object: the general view is the value (the check names it).
            // An earlier repeated member that `Value` cannot read (the raw-value token): the pass
            // fails and the general path reads it.
            (None, Ok(general)) => prop_assert!(!general.is_object() || serde_json::from_str::<Value>(&spec).is_err(), "{}", spec),
            (Some(lenient), Err(error)) => prop_assert!(false, "{:?} against {}: {}", lenient, error, spec),
        }
        // In a document, where the scan finds it (or not).
        agree(&format!("{{{OBJECT_HEAD},\"spec\":{spec}}}"))?;
        agree(&format!("{{\"spec\":{spec},{OBJECT_HEAD}}}"))?;
    }

    #[test]
    fn documents_with_specs_of_every_name(
        specs in prop::collection::vec((prop::sample::select(vec!["spec", "sp\\u0065c", "spec", "x", "data"]), text_value()), 0..3),
        position in 0usize..4,
        extra in prop::sample::select(vec!["", r#","k":"spec""#, r#","k":["spec",{"spec":{}}]"#, r#","data":{"a":"}"}"#, r#","status":{"spec":{"a":1}}"#]),
    ) {
        let mut members: Vec<String> = specs.into_iter().map(|(key, value)| format!("\"{key}\":{value}")).collect();
        members.insert(position.min(members.len()), OBJECT_HEAD.to_string());
        let text = format!("{{{}{extra}}}", members.join(","));
        agree(&text)?;
    }
}

/// Mutations of valid documents (a byte removed, inserted or replaced): what the pass takes is
/// JSON, and read as the general path reads it.
#[test]
fn mutated_documents_read_alike() {
    let base = format!(
        r#"{{{OBJECT_HEAD},"spec":{{"containers":[{{"name":"a}}\"","image":"\\i"}}],"template":{{"spec":{{"containers":[]}}}}}},"status":{{"x":[1,{{"spec":2}}]}},"k":"spec"}}"#
    );
    let bytes = base.as_bytes();
    let alphabet = b"{}[]\":,\\ xs0";
    let mut viewed = 0;
    for at in 0..bytes.len() {
        for mutation in 0..(2 * alphabet.len() + 1) {
            let mut text = bytes.to_vec();
            if mutation == 2 * alphabet.len() {
                text.remove(at);
            } else if mutation < alphabet.len() {
                text.insert(at, alphabet[mutation]);
            } else {
                text[at] = alphabet[mutation - alphabet.len()];
            }
            let Ok(text) = String::from_utf8(text) else {
                continue;
            };
            viewed += usize::from(agree(&text).unwrap_or_else(|error| panic!("{error}")));
            // Spec twice (the second as written).
            let twice = text.replacen(r#","k":"spec""#, r#","spec":{"replicas":"x"}"#, 1);
            agree(&twice).unwrap_or_else(|error| panic!("{error}"));
        }
    }
    assert!(viewed > 1000, "{viewed}");
}
