//! The fast path against the general one: real objects and variants made to differ read
//! alike, and what the tree parser refused anywhere is refused still.

use super::*;
use crate::decode::object::parse_general;
use crate::decode::raw::scan;

mod certificates;
mod spec_text;
mod spec_view;

/// Every object of the Knative fixtures (real objects and ones derived from Knative's
/// sources), as the API server would send it: with a uid and a resourceVersion.
fn fixtures() -> Vec<Value> {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/knative");
    let mut files = vec![root];
    let mut objects = Vec::new();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(
                std::fs::read_dir(&path)
                    .unwrap()
                    .map(|entry| entry.unwrap().path()),
            );
            continue;
        }
        if path.extension().is_none_or(|extension| extension != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let Ok(documents) = serde_saphyr::from_multiple::<Value>(&text) else {
            continue;
        };
        for mut document in documents {
            let items = match document.get_mut("items").map(Value::take) {
                Some(Value::Array(items)) => items,
                _ => vec![document],
            };
            for mut object in items {
                let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
                else {
                    continue;
                };
                metadata.entry("uid").or_insert_with(|| "u-1".into());
                metadata
                    .entry("resourceVersion")
                    .or_insert_with(|| "17".into());
                objects.push(object);
            }
        }
    }
    objects
}

/// Variants the fast path must read alike or leave to the general path: nulls, repeated
/// members, wrong types, a Secret.
fn variants(object: &Value) -> Vec<String> {
    let text = object.to_string();
    let mut out = vec![text.clone()];
    out.push(text.replacen("{", r#"{"status":null,"#, 1));
    out.push(text.replacen("{", r#"{"spec":{"a":1},"#, 1));
    out.push(text.replacen(
        r#""metadata":{"#,
        r#""metadata":{"labels":null,"generation":1.5,"#,
        1,
    ));
    out.push(text.replacen(
        r#""metadata":{"#,
        r#""metadata":{"managedFields":[{"manager":"m","fieldsV1":[1]}],"#,
        1,
    ));
    out.push(text.replacen(r#""metadata":{"#, r#""metadata":{"name":"","#, 1));
    out.push(text.replacen(r#""kind":"#, r#""data":{"k":"v"},"kind":"#, 1));
    out.push(text.replacen(r#""kind":"#, r#""data":null,"kind":"#, 1));
    out.push(text.replacen(r#""kind":"#, r#""data":{"k":1},"kind":"#, 1));
    out.push(text.replacen(r#""kind":"#, r#""data":{"k":"a","k":"b\u00e9"},"kind":"#, 1));
    out.push(text.replacen(r#""kind":"#, r#""binaryData":{"b":"AAE="},"kind":"#, 1));
    out.push(text.replacen(
        r#""kind":"#,
        r#""status":{"replicas":"two","x":[1,2]},"kind":"#,
        1,
    ));
    // Statuses the checks read and refuse: each kept member's wrong types, a repeated key
    // (the last counts), escapes, keys out of order (the kept text sorts them).
    for status in [
        r#"{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"t"}],"observedGeneration":2}"#,
        r#"{"conditions":[{"status":"True","type":"Ready","reason":"A\u00e9","reason":"B"}],"url":"http://x"}"#,
        r#"{"conditions":{"type":"Ready"}}"#,
        r#"{"conditions":[{"type":1}]}"#,
        r#"{"conditions":["x"]}"#,
        r#"{"conditions":[true]}"#,
        r#"{"traffic":[{"percent":"50"}]}"#,
        r#"{"traffic":[{"percent":101,"revisionName":"r"}]}"#,
        r#"{"traffic":[{"percent":100,"latestRevision":"yes"}]}"#,
        r#"{"traffic":[{"percent":1.5}]}"#,
        r#"{"traffic":[{"percent":50,"tag":7}]}"#,
        r#"{"observedGeneration":-1}"#,
        r#"{"observedGeneration":1.0,"replicas":2}"#,
        r#"{"readyReplicas":"2","replicas":18446744073709551615}"#,
        r#"{"containerStatuses":[{"name":"c","image":3}]}"#,
        r#"{"containerStatuses":{}}"#,
        r#"{"url":"a","url":5}"#,
        r#"{"url":5,"url":"a"}"#,
        r#"[]"#,
        r#""ready""#,
        // serde_json's raw-value token, which `Value` reads as the JSON text inside.
        r#"{"observedGeneration":{"$serde_json::private::RawValue":"3"}}"#,
        r#"{"url":{"$serde_json::private::RawValue":"\"http://x\""}}"#,
        r#"{"traffic":[{"percent":{"$serde_json::private::RawValue":"50"}}]}"#,
        r#"{"address":{"$serde_json::private::RawValue":"x"}}"#,
        r#"{"version":{"$serde_json::private::RawValue":"1","url":"x"}}"#,
        r#"{"conditions":[{"$serde_json::private::RawValue":"{\"type\":\"Ready\"}"}]}"#,
    ] {
        // Last, so that it is the one read (an object's own `status` comes before it).
        out.push(format!(
            r#"{},"status":{status}}}"#,
            &text[..text.len() - 1]
        ));
    }
    out
}

/// What the tree parser refused anywhere in an object is refused still, in a member that is
/// only skipped (an unkept status member, a field trie) as in one that is parsed later (the
/// spec): a number out of range and a lone surrogate (the skipping scanner checks neither).
#[test]
fn what_the_tree_parser_refused_anywhere_is_refused() {
    let object = |inside: &str| {
        let (trie, status) = match inside.strip_prefix("trie:") {
            Some(trie) => (trie, "0"),
            None => ("{}", inside),
        };
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","uid":"u","resourceVersion":"1","managedFields":[{{"manager":"m","fieldsV1":{{"f:x":{trie}}}}}]}},"spec":{{"containers":[]}},"status":{{"unkept":{status}}}}}"#
        )
    };
    assert!(crate::decode::parse_object_text(&object("0")).is_ok());
    for bad in [
        "1e400",
        &"9".repeat(400),
        r#""\ud800a""#,
        r#""\udc00""#,
        "trie:1e400",
        r#"trie:{"x":"\ud800"}"#,
    ] {
        let text = object(bad);
        let error = crate::decode::parse_object_text(&text).unwrap_err();
        assert_eq!(error.kind(), "invalid_json", "{text}: {error}");
    }
    // The same inside the spec, which is kept as text and parsed only when read.
    let spec = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":"u","resourceVersion":"1"},"spec":{"x":"\ud800a"}}"#;
    assert!(crate::decode::parse_object_text(spec).is_err());
    // A ConfigMap whose `data` the scan reads (its Go escapes ask for no full check) and cuts
    // out: a number out of range or a lone surrogate elsewhere is refused still.
    let config_map = |status: &str, trie: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","uid":"u","resourceVersion":"1","managedFields":[{{"manager":"m","fieldsV1":{{"f:x":{trie}}}}}]}},"data":{{"a":"{} \u003c"}},"status":{{"unkept":{status}}}}}"#,
            "x".repeat(3_000)
        )
    };
    let fine = config_map("0", "{}");
    let scanned = scan(&fine).unwrap();
    assert!(scanned.no_unicode_escapes && cut_data(&fine, &scanned).is_some());
    assert!(crate::decode::parse_object_text(&fine).is_ok());
    for (status, trie) in [
        ("1e400", "{}"),
        (r#""\ud800""#, "{}"),
        ("0", "1e400"),
        ("0", r#"{"x":"\ud800"}"#),
    ] {
        let text = config_map(status, trie);
        let error = crate::decode::parse_object_text(&text).unwrap_err();
        assert_eq!(error.kind(), "invalid_json", "{text}: {error}");
    }
    // A proper pair and Go's escapes are fine.
    let fine = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":"u","resourceVersion":"1"},"spec":{"x":"\ud83d\ude00 \u003c"}}"#;
    let object = crate::decode::parse_object_text(fine).unwrap();
    assert_eq!(object.spec.value()["x"], "😀 <");
}

#[test]
fn the_fast_path_reads_real_objects_as_the_general_path_does() {
    let mut objects = fixtures();
    // ConfigMaps as Knative's are (`config-autoscaler`), and Secrets, which go the general way.
    for kind in ["ConfigMap", "Secret"] {
        objects.push(serde_json::json!({
            "apiVersion": "v1", "kind": kind,
            "metadata": {"name": "config-autoscaler", "namespace": "knative-serving",
                "uid": "u-2", "resourceVersion": "9",
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "data": {"enable-scale-to-zero": "false", "_example": "# a long\n# comment"}
        }));
    }
    assert!(objects.len() >= 40, "{} fixture objects", objects.len());
    let (mut fast_count, mut total, mut config_maps) = (0, 0, 0);
    let (mut checked_ok, mut checked_err, mut cuts, mut viewed) = (0, 0, 0, 0);
    for object in &objects {
        for text in variants(object) {
            total += 1;
            let scanned = scan(&text).unwrap();
            let general = parse_general(&text, scanned);
            let cut = cut_data(&text, &scanned);
            if let Some((fast, status)) = parse(&text, scanned, cut.as_ref()) {
                fast_count += 1;
                config_maps += usize::from(fast.data.is_some());
                // The spec read once, for its view: the level-by-level view of its text.
                if let Some(view) = fast.spec.view() {
                    viewed += 1;
                    let general = crate::decode::shape::spec_view_general(fast.spec.text());
                    assert_eq!(Some(view), general.ok().as_ref(), "{text}");
                }
                if cut.is_some() {
                    // The data read by the scan, the rest by the pass: as both read by it.
                    cuts += 1;
                    let (whole, _) = parse(&text, scanned, None).expect("the whole text too");
                    assert_eq!(fast, whole, "{text}");
                    assert_eq!(
                        fast.data.as_ref().map(|data| data.text()),
                        whole.data.as_ref().map(|data| data.text())
                    );
                }
                let mut general = general.unwrap_or_else(|error| {
                    panic!("the fast path took what the general one refuses ({error}): {text}")
                });
                // The status: a tree borrowed from the text on the fast path, the object's
                // own on the general one; alike once checked and kept (below).
                let general_status = std::mem::replace(&mut general.status, Value::Null);
                assert_eq!(fast.status, Value::Null, "{text}");
                assert_eq!(fast, general, "{text}");
                assert_eq!(fast.spec.text(), general.spec.text());
                assert_eq!(fast.status_skipped_bytes, general.status_skipped_bytes);
                general.status = general_status;
                let fast = match &status {
                    Some(status) => crate::decode::shape::checked_with(fast, status),
                    None => crate::decode::shape::checked_with(fast, &Value::Null),
                };
                let general = crate::decode::shape::checked(general);
                match (fast, general) {
                    (Ok(fast), Ok(general)) => {
                        checked_ok += 1;
                        assert_eq!(fast, general, "{text}");
                        assert_eq!(fast.kept_status.text(), general.kept_status.text());
                    }
                    (Err(fast), Err(general)) => {
                        checked_err += 1;
                        assert_eq!(fast.to_string(), general.to_string(), "{text}");
                    }
                    (fast, general) => panic!("{fast:?} against {general:?}: {text}"),
                }
            }
        }
    }
    // The spec's view in one pass equals the level-by-level one.
    for object in &objects {
        let Some(spec) = object.get("spec") else {
            continue;
        };
        let text = spec.to_string();
        if let Some(view) = spec_view(&text) {
            let general = crate::decode::shape::spec_view_general(&text).unwrap();
            assert_eq!(view, general, "{text}");
        }
    }
    // Both outcomes of the checks were compared, refusals of the status included.
    assert!(
        checked_ok >= 40 && checked_err >= 40,
        "{checked_ok} / {checked_err}"
    );
    // ConfigMaps go the fast way, with or without their data, and with it cut out.
    assert!(
        config_maps >= 3 && cuts >= 1,
        "{config_maps} ConfigMaps took the fast path, {cuts} with their data cut out"
    );
    // Real specs are read once by the pass (a variant with two specs is not).
    assert!(
        viewed * 2 > fast_count,
        "{viewed} of {fast_count} specs read for their view"
    );
    // Most real objects go the fast way (the rest: Secrets, the broken variants).
    assert!(
        fast_count * 2 > total,
        "{fast_count} of {total} took the fast path"
    );
}

/// serde_json's raw-value token inside a kept status member reads as it always did (as `Value`
/// reads it: the JSON text in its string), whichever path the object takes.
#[test]
fn the_raw_value_token_reads_as_before() {
    let object = |status: &str| {
        format!(
            r#"{{"apiVersion":"serving.knative.dev/v1","kind":"Route","metadata":{{"name":"r","uid":"u","resourceVersion":"1"}},"spec":{{"a":1}},"status":{status}}}"#
        )
    };
    let kept = |status: &str| {
        crate::decode::parse_object_text(&object(status))
            .map(|object| object.kept_status.text().to_string())
    };
    assert_eq!(
        kept(r#"{"observedGeneration":{"$serde_json::private::RawValue":"3"}}"#).unwrap(),
        r#"{"observedGeneration":3}"#
    );
    assert_eq!(
        kept(r#"{"conditions":[{"$serde_json::private::RawValue":"{\"type\":\"Ready\"}"}]}"#)
            .unwrap(),
        r#"{"conditions":[{"type":"Ready"}]}"#
    );
    let error = kept(r#"{"address":{"$serde_json::private::RawValue":"x"}}"#).unwrap_err();
    assert_eq!(error.kind(), "invalid_json", "{error}");
}
