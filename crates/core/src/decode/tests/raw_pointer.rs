//! [`super::pointer`] against `serde_json::Value::pointer` on every value of the JSON
//! fixtures (each reached from its document's root), compact and pretty-printed, and on the
//! pointers' edge cases.

use serde_json::Value;

use super::pointer;

/// Every pointer to a value in `value`, with pointers to nothing beside them.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    out.push(format!("{at}/absent"));
    match value {
        Value::Object(map) => map.iter().for_each(|(key, child)| {
            let escaped = key.replace('~', "~0").replace('/', "~1");
            pointers(child, format!("{at}/{escaped}"), out)
        }),
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                pointers(child, format!("{at}/{index}"), out);
            }
            // Indexes the tree refuses or lacks.
            for bad in ["01", "+0", "-", "-1", " 0", "0 ", &items.len().to_string()] {
                out.push(format!("{at}/{bad}"));
            }
        }
        _ => {}
    }
}

/// What the tree answers, or `pointer`'s answer read as the tree would read it.
fn checked(text: &str, tree: &Value, at: &str) -> bool {
    let expected = tree.pointer(at);
    match pointer(text, at) {
        Some(found) => {
            let found: Option<Value> = found.map(|part| serde_json::from_str(part).unwrap());
            assert_eq!(found.as_ref(), expected, "{at} in {text}");
            true
        }
        // Only an escaped member name on the way sends it to the parser.
        None => {
            assert!(text.contains('\\'), "{at} in {text}");
            false
        }
    }
}

#[test]
fn a_pointer_finds_what_the_tree_finds() {
    let mut values: Vec<Value> = crate::decode::fixtures::json_texts()
        .iter()
        .filter_map(|text| serde_json::from_str(text).ok())
        .collect();
    values.extend(
        [
            r#"{"a/b": {"m~n": [1, {"": 2}]}, "": [[], {}], "n": null}"#,
            r#"{"a": 1, "a": [true, "x\"]"]}"#,
            r#"[0, [1, [2, [3]]], "]", {"[": "{"}]"#,
        ]
        .iter()
        .map(|text| serde_json::from_str::<Value>(text).unwrap()),
    );
    let (mut jumped, mut asked) = (0, 0);
    for value in &values {
        let mut all = Vec::new();
        pointers(value, String::new(), &mut all);
        // Each lookup reads the text up to its value: a spread of at most 300 per document
        // keeps a large one's test quick (a debug build).
        let step = all.len().div_ceil(300);
        let mut all: Vec<String> = all.into_iter().step_by(step).collect();
        all.extend(["no-slash".to_string(), "/".to_string(), "//".to_string()]);
        for text in [
            value.to_string(),
            serde_json::to_string_pretty(value).unwrap(),
        ] {
            for at in &all {
                if checked(&text, value, at) {
                    jumped += 1;
                } else {
                    asked += 1;
                }
            }
        }
    }
    assert!(jumped > 5_000, "pointers jumped: {jumped}");
    // `managedFields`' keys (`k:{\"name\":...}`) are escaped: below them the parser answers.
    assert!(
        asked * 10 < jumped,
        "pointers asked of the parser: {asked} of {jumped}"
    );
    // Texts as a sender may write them, read as they are (not re-serialized): repeated keys,
    // whitespace where JSON allows it, brackets and quotes inside strings.
    for text in [
        "{\"a\" :1,\t\"a\"\r\n: {\"b\" : [ 1 ,2\n] } , \"c\":[]}",
        r#" [ {"]":"[", "x": [ [ ], { } ]} , "\"]" , -0.5e-3 , true ] "#,
        r#"{"k": {"k": {"k": 1}, "k": [{"k": 2}, {"k": 3}]}, "z": "}"}"#,
        r#"{"":{"":[null,{"":""}]}}"#,
    ] {
        let tree: Value = serde_json::from_str(text).unwrap();
        let mut all = Vec::new();
        pointers(&tree, String::new(), &mut all);
        for at in &all {
            assert!(checked(text, &tree, at), "{at} in {text}");
        }
    }
    // A repeated key: the last one, as the tree keeps it.
    let text = r#"{"a": 1, "a": [true, "x"]}"#;
    assert_eq!(pointer(text, "/a/1"), Some(Some("\"x\"")));
    assert_eq!(pointer(text, "/a/0"), Some(Some("true")));
    // An escaped member name on the way: the parser answers.
    assert_eq!(pointer(r#"{"\u0061": {"b": 1}}"#, "/a/b"), None);
}
