//! The spec read once: the scan finds the top-level `spec` object, the one pass reads it for
//! its view and takes its text from there, and the view is the level-by-level one
//! (`shape::spec_view_general`) for every spec, a part of any type included.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::super::{cut_data, parse, spec_view};
use crate::decode::object::parse_general;
use crate::decode::raw::scan;
use crate::decode::shape::{checked, checked_with, spec_view_general};

/// A Deployment's text with `spec` as its spec text (written last but for the status).
fn deployment(spec: &str) -> String {
    format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"d","namespace":"n","uid":"u","resourceVersion":"7","generation":2}},"spec":{spec},"status":{{"replicas":1}}}}"#
    )
}

/// Both paths on `text`: the same object, or the same error, once checked; and the fast path's
/// kept view is the level-by-level one. Returns whether the fast path read the spec for its
/// view (it kept one before the check).
fn both_paths_agree(text: &str) -> bool {
    let scanned = scan(text).unwrap();
    let general = parse_general(text, scanned);
    let cut = cut_data(text, &scanned);
    let Some((fast, status)) = parse(text, scanned, cut.as_ref()) else {
        return false;
    };
    let viewed = fast.spec.view().is_some();
    if let Some(view) = fast.spec.view() {
        assert_eq!(
            Some(view),
            spec_view_general(fast.spec.text()).ok().as_ref(),
            "{text}"
        );
    }
    let mut general = general.unwrap_or_else(|error| panic!("{error}: {text}"));
    let general_status = std::mem::take(&mut general.status);
    assert_eq!(fast, general, "{text}");
    assert_eq!(fast.spec.text(), general.spec.text(), "{text}");
    general.status = general_status;
    let fast = match &status {
        Some(status) => checked_with(fast, status),
        None => checked_with(fast, &Value::Null),
    };
    match (fast, checked(general)) {
        (Ok(fast), Ok(general)) => assert_eq!(fast, general, "{text}"),
        (Err(fast), Err(general)) => assert_eq!(fast.to_string(), general.to_string(), "{text}"),
        (fast, general) => panic!("{fast:?} against {general:?}: {text}"),
    }
    viewed
}

#[test]
fn the_scan_finds_the_top_level_spec_object() {
    fn span(text: &str) -> Option<&str> {
        scan(text)
            .unwrap()
            .spec
            .map(|(start, end)| &text[start..end])
    }
    assert_eq!(
        span(r#"{"a":1,"spec":{"b":[{}]},"c":2}"#),
        Some(r#"{"b":[{}]}"#)
    );
    assert_eq!(span(r#"{"spec" : { "b" : 1 } }"#), Some(r#"{ "b" : 1 }"#));
    assert_eq!(span("{\"spec\":\n{}}"), Some("{}"));
    // Not an object, not at the top, not a member name, or not the only one.
    assert_eq!(span(r#"{"spec":null}"#), None);
    assert_eq!(span(r#"{"spec":"x"}"#), None);
    assert_eq!(span(r#"{"spec":[1]}"#), None);
    assert_eq!(span(r#"{"template":{"spec":{"a":1}}}"#), None);
    assert_eq!(span(r#"{"kind":"spec","x":{}}"#), None);
    assert_eq!(span(r#"{"spec":{"a":1},"spec":{"a":2}}"#), None);
    assert_eq!(span(r#"{"spec":null,"spec":{"a":2}}"#), None);
    // An escaped name is not seen (the one pass sends such an object the general way).
    assert_eq!(span(r#"{"sp\u0065c":{"a":1}}"#), None);
    // Beside a `data` object, before it or after it.
    let text = r#"{"spec":{"a":"}"},"data":{"k":"v"}}"#;
    assert_eq!(span(text), Some(r#"{"a":"}"}"#));
    assert!(scan(text).unwrap().data.is_some());
    assert_eq!(
        span(r#"{"data":{"k":"v"},"spec":{"a":{}}}"#),
        Some(r#"{"a":{}}"#)
    );
}

#[test]
fn specs_of_every_shape_read_alike() {
    let mut viewed = 0;
    for spec in [
        r#"{"replicas":2,"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i","env":[{"name":"X","value":"1"}]}]}}}"#,
        r#"{"containers":[{"name":"c","image":"i"}],"traffic":[{"percent":100}]}"#,
        // Parts of the wrong type, kept whole for the check to name.
        r#"{"containers":{"name":"c"}}"#,
        r#"{"containers":[5,{"name":7,"image":["i"]},null]}"#,
        r#"{"template":"x"}"#,
        r#"{"template":{"spec":[1]}}"#,
        r#"{"template":{"spec":{"containers":"c"}}}"#,
        r#"{"replicas":"two"}"#,
        r#"{"replicas":-1}"#,
        r#"{"traffic":{"percent":50}}"#,
        r#"{"traffic":[{"percent":"50"}]}"#,
        // Repeated members: the last counts, whatever the types.
        r#"{"containers":5,"containers":[{"name":"a","image":"b"}]}"#,
        r#"{"containers":[{"name":"a"}],"containers":5}"#,
        r#"{"template":{"spec":{"containers":[]}},"template":null}"#,
        r#"{"containers":[{"image":"a","image":7}]}"#,
        // Escaped member names, at a level read and inside one jumped over.
        r#"{"cont\u0061iners":[{"n\u0061me":"c","image":"i"}]}"#,
        r#"{"containers":[{"name":"c","\u0069mage":"i"}],"x":{"\u0061":1}}"#,
        // serde_json's raw-value token, read as `Value` reads it.
        r#"{"replicas":{"$serde_json::private::RawValue":"3"}}"#,
        r#"{"containers":{"$serde_json::private::RawValue":"[{\"name\":\"c\"}]"}}"#,
        r#"{"containers":[{"name":{"$serde_json::private::RawValue":"\"c\""}}]}"#,
        r#"{"containers":[{"$serde_json::private::RawValue":"{\"name\":\"c\"}"}]}"#,
        r#"{"replicas":{"$serde_json::private::RawValue":"x"}}"#,
        // Braces and escapes in strings; numbers of every kind.
        r#"{"a":"}{\"]","containers":[{"name":"}\\","image":"x\u003cy"}],"n":[1.5,-2,0]}"#,
        "{}",
    ] {
        let text = deployment(spec);
        viewed += usize::from(both_paths_agree(&text));
        // The spec's own view, alone.
        assert_eq!(spec_view(spec), spec_view_general(spec).ok(), "{spec}");
    }
    // Not objects: no span, no view in the pass; the check names them as before.
    for spec in ["null", r#""x""#, "[1]", "3"] {
        assert!(!both_paths_agree(&deployment(spec)), "{spec}");
        assert_eq!(spec_view(spec), None);
    }
    assert!(viewed >= 20, "{viewed} specs read for their view");
}

/// Any JSON value, small: the parts read whole or jumped over.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z\"\\\\{}\\[\\]<>& é]{0,6}".prop_map(Value::from),
        Just(json!({"$serde_json::private::RawValue": "[1]"})),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,3}|name|image|spec", inner, 0..3)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// An object with each of `keys` present or not, each with a value from its strategy.
fn object_of(keys: Vec<(&'static str, BoxedStrategy<Value>)>) -> BoxedStrategy<Value> {
    keys.into_iter()
        .map(|(key, value)| prop::option::of(value).prop_map(move |value| (key, value)))
        .collect::<Vec<_>>()
        .prop_map(|members| {
            Value::Object(
                members
                    .into_iter()
                    .filter_map(|(key, value)| Some((key.to_string(), value?)))
                    .collect(),
            )
        })
        .boxed()
}

/// A spec whose read parts are of the expected type most of the time, of any type else.
fn spec() -> impl Strategy<Value = Value> {
    let container = prop_oneof![
        3 => object_of(vec![("name", any_value().boxed()), ("image", any_value().boxed()), ("env", any_value().boxed())]),
        1 => any_value().boxed(),
    ];
    let containers = prop_oneof![
        3 => prop::collection::vec(container, 0..3).prop_map(Value::from).boxed(),
        1 => any_value().boxed(),
    ]
    .boxed();
    let pod_spec = prop_oneof![
        3 => object_of(vec![("containers", containers.clone()), ("volumes", any_value().boxed())]),
        1 => any_value().boxed(),
    ];
    let template = prop_oneof![
        3 => object_of(vec![("spec", pod_spec.boxed()), ("metadata", any_value().boxed())]),
        1 => any_value().boxed(),
    ];
    object_of(vec![
        ("traffic", any_value().boxed()),
        ("replicas", any_value().boxed()),
        ("containers", containers),
        ("template", template.boxed()),
        ("selector", any_value().boxed()),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// The view in one pass is the level-by-level view, and both paths read the object alike,
    /// written compact or spaced.
    #[test]
    fn the_view_in_one_pass_is_the_level_by_level_view(spec in spec(), spaced in any::<bool>()) {
        let text = if spaced {
            serde_json::to_string_pretty(&spec).unwrap()
        } else {
            spec.to_string()
        };
        prop_assert_eq!(spec_view(&text), spec_view_general(&text).ok());
        let object = deployment(&text);
        // A compact one is read for its view in the pass (a spaced one, or one with a number
        // written with an exponent, goes the general way: `{}` is compact either way).
        let scanned = scan(&object).unwrap();
        prop_assert_eq!(both_paths_agree(&object), scanned.compact && scanned.plain_numbers);
    }
}
