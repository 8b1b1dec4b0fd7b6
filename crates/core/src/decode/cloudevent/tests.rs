//! Tests of the request parser: every content mode, the fast structured and binary paths
//! against the SDK's, and the refusals (repeated attributes, non-ASCII headers, look-alike media types).

use super::*;
use http::{HeaderMap, HeaderValue};

mod structured;

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

#[test]
fn binary_mode_reads_headers_and_percent_decodes() {
    let map = headers(&[
        ("ce-specversion", "1.0"),
        ("ce-id", "1"),
        ("ce-source", "https://10.96.0.1:443"),
        ("ce-type", "dev.knative.apiserver.resource.update"),
        ("ce-cluster", "prod%20eu"),
        ("content-type", "application/json"),
    ]);
    let parsed = parse_request(&map, br#"{"a":1}"#).unwrap();
    assert!(!parsed.batch);
    let event = &parsed.events[0];
    assert_eq!(event.extensions["cluster"], "prod eu");
    // The body is the data, read by the object's parse (not copied and checked here).
    assert_eq!(parsed.unread_data, Some(Unread::Body(br#"{"a":1}"#)));
    assert_eq!(event.data_value(), None);
    assert_eq!(parse_request(&map, b"").unwrap().unread_data, None);
}

/// A binary-mode body is read once, by whatever reads the data: whichever way the event goes,
/// a body that is not one JSON value is refused as the request's JSON error.
#[test]
fn a_binary_body_that_is_not_json_is_refused_whatever_its_type() {
    let names = crate::decode::ClusterNames {
        default: "prod".into(),
        by_source: Default::default(),
    };
    let object = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"1"},"data":{"k":"v"}}"#;
    for ty in [
        "dev.knative.apiserver.resource.update",
        "dev.knative.apiserver.ref.update",
        "com.example.ping",
        "dev.knative.apiserver.resource.touch",
    ] {
        let map = headers(&[
            ("ce-specversion", "1.0"),
            ("ce-id", "1"),
            ("ce-source", "/s"),
            ("ce-type", ty),
            ("content-type", "application/json"),
        ]);
        for (body, says) in [
            (format!("{object} x"), "trailing characters"),
            (format!("{object}}}"), "trailing characters"),
            (object[..object.len() - 1].to_string(), "EOF while parsing"),
            ("{\"a\":\"\u{1}\"}".to_string(), "control character"),
            // What only the tree parser refuses, whoever reads the data (the object's parse,
            // the reference's, or the check of an event of a type not handled).
            (r#"{"a":1e400}"#.to_string(), "number out of range"),
            (r#"{"a":"\ud800"}"#.to_string(), "escape"),
            (
                format!("{}{}", "[".repeat(130), "]".repeat(130)),
                "recursion limit",
            ),
        ] {
            let error = crate::decode::decode_request(&map, body.as_bytes(), &names)
                .map(|_| ())
                .unwrap_err();
            assert_eq!(error.kind(), "invalid_json", "{ty} {body}: {error}");
            assert!(error.to_string().contains(says), "{ty} {body}: {error}");
        }
        // JSON's whitespace around the body is not the object's: the same object, its spec text
        // kept as sent (the one-pass reader took it, as without the whitespace).
        if ty == "dev.knative.apiserver.resource.update" {
            let with_spec = object.replace(r#","data""#, r#","spec":{"b":1,"a":2},"data""#);
            let decode =
                |body: &str| match crate::decode::decode_request(&map, body.as_bytes(), &names)
                    .unwrap()
                    .remove(0)
                {
                    crate::decode::Decoded::ApiServer(event) => event.object.unwrap(),
                    other => panic!("{other:?}"),
                };
            let bare = decode(&with_spec);
            let wrapped = decode(&format!(" \r\n{with_spec}\n\t "));
            assert_eq!(wrapped.spec.text(), r#"{"b":1,"a":2}"#);
            assert_eq!(wrapped, bare);
        }
        // An attribute's error is the request's when the body is bad too (the attributes are
        // read first; the body is read once, by whatever reads the data).
        let mut long_id = map.clone();
        long_id.insert(
            "ce-id",
            http::HeaderValue::from_str(&"i".repeat(2000)).unwrap(),
        );
        let error = crate::decode::decode_request(&long_id, b"{", &names)
            .map(|_| ())
            .unwrap_err();
        assert!(error.to_string().contains("id"), "{error}");
        assert_ne!(error.kind(), "invalid_json", "{error}");
        let mut bytes = object.as_bytes().to_vec();
        let at = bytes.len() - 4;
        bytes[at] = 0xff;
        let error = crate::decode::decode_request(&map, &bytes, &names)
            .map(|_| ())
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("invalid CloudEvent JSON: data: invalid UTF-8 at byte {at}")
        );
    }
}

#[test]
fn batch_mode() {
    let map = headers(&[("content-type", "application/cloudevents-batch+json")]);
    let body = br#"[{"specversion":"1.0","id":"1","source":"/s","type":"t"},{"specversion":"1.0","id":"2","source":"/s","type":"t"}]"#;
    let parsed = parse_request(&map, body).unwrap();
    assert!(parsed.batch);
    assert_eq!(parsed.events.len(), 2);
}

/// The SDK path alone, for comparison with the fast path.
fn via_sdk(body: &[u8]) -> Result<CloudEvent, Error> {
    let event = serde_json::from_slice::<cloudevents::Event>(body)
        .map_err(|error| Error::InvalidJson(short(&error.to_string())))?;
    from_sdk(event, false)
}

/// The recorded structured events (`tests/fixtures/knative/events`), one body each.
fn recorded_bodies() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/knative/events");
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        if name.ends_with(".ce.json") {
            bodies.push(text.into_bytes());
        } else if name.ends_with(".ce.jsonl") {
            bodies.extend(text.lines().map(|line| line.as_bytes().to_vec()));
        }
    }
    assert!(bodies.len() >= 5, "{} recorded events", bodies.len());
    bodies
}

/// The SDK's binary path alone, for comparison with the fast path.
fn binary_via_sdk(map: &HeaderMap) -> Result<CloudEvent, Error> {
    let event = cloudevents::binding::http::to_event(map, Vec::new())
        .map_err(|error| Error::InvalidEvent(short(&error.to_string())))?;
    from_sdk(event, true)
}

/// A structured event's attributes as binary-mode headers, percent-encoded as the HTTP binding
/// has a sender encode them (space, `"`, `%`, controls and every non-ASCII byte).
fn as_headers(body: &[u8]) -> HeaderMap {
    use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
    const ENCODED: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'%');
    let members: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body).unwrap();
    let mut map = HeaderMap::new();
    for (name, value) in members {
        let text = match value {
            _ if name == "data" => continue,
            serde_json::Value::Null => continue,
            serde_json::Value::String(text) => text,
            other => other.to_string(),
        };
        let header = if name == "datacontenttype" {
            "content-type".to_string()
        } else {
            format!("ce-{name}")
        };
        let value = utf8_percent_encode(&text, ENCODED).to_string();
        map.insert(
            http::header::HeaderName::from_bytes(header.as_bytes()).unwrap(),
            HeaderValue::from_str(&value).unwrap(),
        );
    }
    map
}

#[test]
fn binary_fast_path_equals_the_sdk() {
    let mut maps: Vec<HeaderMap> = recorded_bodies().iter().map(|b| as_headers(b)).collect();
    let base = [
        ("ce-specversion", "1.0"),
        ("ce-id", "a"),
        ("ce-source", "https://10.96.0.1:443"),
        ("ce-type", "dev.knative.apiserver.resource.update"),
    ];
    for extra in [
        &[
            ("ce-time", "2026-11-29T12:00:00.123456789+02:00"),
            ("ce-subject", "%2Fapis%2Fv1%20x"),
            ("ce-cluster", "prod%20eu"),
            ("ce-flag", "true"),
            ("ce-", "nameless"),
            ("content-type", "application/json"),
        ][..],
        &[("ce-time", "2020-07-28T19:14:54Z"), ("ce-name", "%D0%BF")],
        &[("ce-id", "%FF")],
        &[("ce-source", "%E2%82")],
        &[("ce-id", "%20%09")],
        &[("ce-type", "  ")],
        &[("ce-subject", "%FE")],
        &[("ce-cluster", "%C3%28")],
        &[("ce-id", "%2")],
        &[
            ("ce-datacontenttype", "text/plain"),
            ("content-type", "application/json"),
        ],
    ] {
        let mut pairs = base.to_vec();
        pairs.extend_from_slice(extra);
        maps.push(headers(&pairs));
    }
    let mut common = 0;
    for map in &maps {
        let expected = binary_via_sdk(map);
        let got = fast_binary(map);
        // Every 1.0 event without a `dataschema` here is the common shape.
        if map["ce-specversion"] != "1.0" {
            assert!(matches!(got, Ok(None)), "{map:?}");
            continue;
        }
        common += 1;
        match (got, expected) {
            (Ok(Some(got)), Ok(expected)) => assert_eq!(got, expected),
            (Err(got), Err(expected)) => assert_eq!(got.to_string(), expected.to_string()),
            (got, expected) => panic!("fast path {got:?}, SDK {expected:?}, on {map:?}"),
        }
    }
    assert!(
        common >= 12,
        "the fast path took only {common} of {}",
        maps.len()
    );
}

#[test]
fn binary_fast_path_leaves_the_rest_to_the_sdk() {
    let base = [
        ("ce-specversion", "1.0"),
        ("ce-id", "a"),
        ("ce-source", "/s"),
        ("ce-type", "t"),
    ];
    for (extra, accepted) in [
        (("ce-specversion", "0.3"), true),
        (("ce-dataschema", "https://example.com/schema"), true),
        (("ce-dataschema", "not a url"), false),
        (("ce-time", "yesterday"), false),
        (("ce-specversion", "2.0"), false),
    ] {
        let mut pairs = base.to_vec();
        pairs.push(extra);
        let map = headers(&pairs);
        assert!(matches!(fast_binary(&map), Ok(None)), "{extra:?}");
        // The SDK decides, and the request gets its answer.
        let parsed = parse_request(&map, b"");
        assert_eq!(parsed.is_ok(), accepted, "{extra:?}: {parsed:?}");
    }
    // A `Content-Type` that is not visible ASCII (hyper lets such bytes through): the SDK
    // refuses it, before a bad attribute of the request is looked at.
    for extra in [("ce-x", "y"), ("ce-type", "%FF"), ("ce-source", "")] {
        let mut map = headers(&base);
        map.insert(extra.0, HeaderValue::from_str(extra.1).unwrap());
        map.insert(
            "content-type",
            HeaderValue::from_bytes(b"application/json; charset=\xE9").unwrap(),
        );
        assert!(matches!(fast_binary(&map), Ok(None)), "{extra:?}");
        let error = parse_request(&map, b"").unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid CloudEvent: Other error: failed to convert header to a str",
            "{extra:?}"
        );
    }
}

#[test]
fn plain_json_is_not_a_cloudevent() {
    let map = headers(&[("content-type", "Application/JSON")]);
    let error = parse_request(&map, b"{}").unwrap_err();
    assert_eq!(error.kind(), "not_cloudevent");
    assert_eq!(
        error.to_string(),
        "not a CloudEvent: no ce-specversion header and content type \"application/json\" is \
         not application/cloudevents+json or application/cloudevents-batch+json"
    );
    let error = parse_request(&HeaderMap::new(), b"{}").unwrap_err();
    assert!(
        error.to_string().contains(r#"content type "<none>""#),
        "{error}"
    );
}

#[test]
fn binary_without_id_names_the_header() {
    let map = headers(&[
        ("ce-specversion", "1.0"),
        ("ce-source", "/s"),
        ("ce-type", "t"),
    ]);
    let error = parse_request(&map, b"").unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid CloudEvent: missing required header ce-id"
    );
    // Each required header is named, in the order id, source, type, whichever shape the rest
    // has (a `0.3` event or a `dataschema` goes to the SDK, but only once all three are there).
    let all = [("ce-id", "1"), ("ce-source", "/s"), ("ce-type", "t")];
    for spec_version in ["1.0", "0.3"] {
        for missing in 0..all.len() {
            let mut pairs = vec![("ce-specversion", spec_version), ("ce-dataschema", "x:y")];
            pairs.extend(
                all.iter()
                    .enumerate()
                    .filter(|(i, _)| *i != missing)
                    .map(|(_, p)| *p),
            );
            let error = parse_request(&headers(&pairs), b"").unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "invalid CloudEvent: missing required header {}",
                    all[missing].0
                )
            );
        }
    }
    // A refusal comes before a missing header, wherever the refused header is.
    let mut map = headers(&[("ce-specversion", "1.0"), ("ce-type", "t")]);
    map.append("ce-type", HeaderValue::from_static("u"));
    assert!(parse_request(&map, b"")
        .unwrap_err()
        .to_string()
        .contains("ce-type is repeated"));
}

#[test]
fn percent_encoded_invalid_utf8_is_invalid_not_replaced() {
    // Lossy decoding would turn both ids into "a\u{FFFD}": the second event a "duplicate".
    for (header, value) in [
        ("ce-id", "a%FF"),
        ("ce-id", "a%FE"),
        ("ce-cluster", "prod%C3"),
    ] {
        let mut pairs = vec![
            ("ce-specversion", "1.0"),
            ("ce-id", "1"),
            ("ce-source", "/s"),
            ("ce-type", "t"),
        ];
        pairs.retain(|(name, _)| *name != header);
        pairs.push((header, value));
        let error = parse_request(&headers(&pairs), b"").unwrap_err();
        assert_eq!(error.kind(), "invalid_event", "{header}: {value}");
        assert!(error.to_string().contains(header), "{error}");
    }
    let map = headers(&[
        ("ce-specversion", "1.0"),
        ("ce-id", "caf%C3%A9"),
        ("ce-source", "/s"),
        ("ce-type", "t"),
    ]);
    assert_eq!(parse_request(&map, b"").unwrap().events[0].id, "café");
}

#[test]
fn the_media_type_is_compared_whole() {
    let body = br#"{"specversion":"1.0","id":"1","source":"/s","type":"t","cluster":"beta"}"#;
    let binary_headers = [
        ("ce-specversion", "1.0"),
        ("ce-id", "1"),
        ("ce-source", "/s"),
        ("ce-type", "t"),
        ("ce-cluster", "alpha"),
    ];
    // A look-alike of the structured type is refused: Go's SDK (a Trigger's filter) reads
    // it as binary mode, the Rust SDK as structured.
    let mut map = headers(&binary_headers);
    map.insert(
        "content-type",
        HeaderValue::from_static("application/cloudevents+jsonx"),
    );
    let error = parse_request(&map, body).unwrap_err();
    assert_eq!(error.kind(), "invalid_event");
    assert!(error.to_string().contains("readers disagree"), "{error}");
    // In any case; the message names it lower-cased.
    map.insert(
        "content-type",
        HeaderValue::from_static(" Application/CloudEvents+JSONX ; x=1"),
    );
    let error = parse_request(&map, body).unwrap_err();
    assert!(
        error
            .to_string()
            .contains(r#"content type "application/cloudevents+jsonx" is neither"#),
        "{error}"
    );
    // The structured type itself, with a parameter and in any case, is structured.
    for content_type in [
        "application/cloudevents+json",
        "application/CloudEvents+JSON; charset=utf-8",
    ] {
        let mut map = headers(&binary_headers);
        map.insert("content-type", HeaderValue::from_static(content_type));
        let parsed = parse_request(&map, body).unwrap();
        assert_eq!(
            parsed.events[0]
                .extensions
                .get("cluster")
                .map(String::as_str),
            Some("beta"),
            "{content_type}"
        );
    }
    // So is a look-alike of the batch type.
    let map = headers(&[("content-type", "application/cloudevents-batch+json2")]);
    assert_eq!(
        parse_request(&map, b"[]").unwrap_err().kind(),
        "invalid_event"
    );
}

#[test]
fn a_raw_non_ascii_header_value_is_refused_naming_the_header() {
    let mut map = headers(&[
        ("ce-specversion", "1.0"),
        ("ce-id", "1"),
        ("ce-source", "/s"),
        ("ce-type", "t"),
    ]);
    map.insert(
        "ce-cluster",
        HeaderValue::from_bytes("прод".as_bytes()).unwrap(),
    );
    let error = parse_request(&map, b"").unwrap_err();
    assert_eq!(error.kind(), "invalid_event");
    assert!(
        error.to_string().starts_with(
            "invalid CloudEvent: header ce-cluster holds bytes that are not visible ASCII"
        ),
        "{error}"
    );
    // Percent-encoded as the binding says, the name arrives decoded.
    map.insert(
        "ce-cluster",
        HeaderValue::from_static("%D0%BF%D1%80%D0%BE%D0%B4"),
    );
    let parsed = parse_request(&map, b"").unwrap();
    assert_eq!(
        parsed.events[0]
            .extensions
            .get("cluster")
            .map(String::as_str),
        Some("прод")
    );
}

#[test]
fn a_repeated_attribute_is_refused_in_every_mode() {
    // Binary: two values of one `ce-*` header (any attribute, extensions included).
    for repeated in ["ce-cluster", "ce-type", "ce-id"] {
        let mut map = headers(&[
            ("ce-specversion", "1.0"),
            ("ce-id", "1"),
            ("ce-source", "/s"),
            ("ce-type", "t"),
            ("ce-cluster", "prod"),
        ]);
        map.append(repeated, HeaderValue::from_static("other"));
        let error = parse_request(&map, b"").unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("invalid CloudEvent: header {repeated} is repeated: a CloudEvents attribute takes one header")
        );
    }
    // Other headers may repeat.
    let mut map = headers(&[
        ("ce-specversion", "1.0"),
        ("ce-id", "1"),
        ("ce-source", "/s"),
        ("ce-type", "t"),
    ]);
    map.append("accept", HeaderValue::from_static("a"));
    map.append("accept", HeaderValue::from_static("b"));
    assert!(parse_request(&map, b"").is_ok());
    // Structured, on the fast path and on the SDK's (0.3), and batch.
    let structured = headers(&[("content-type", "application/cloudevents+json")]);
    for body in [
        &br#"{"specversion":"1.0","id":"1","source":"/s","type":"t","cluster":"a","cluster":"b"}"#
            [..],
        br#"{"specversion":"0.3","id":"1","source":"/s","type":"t","type":"u"}"#,
    ] {
        let error = parse_request(&structured, body).unwrap_err();
        assert_eq!(error.kind(), "invalid_json");
        assert!(error.to_string().contains("is repeated"), "{error}");
    }
    // A repeat spelled with an escape, or beside a name that has one (the SDK's way, which
    // takes the last of a repeated member itself): refused alike.
    for body in [
        &br#"{"specversion":"1.0","id":"1","source":"/s","type":"t","typ\u0065":"u"}"#[..],
        br#"{"specversion":"1.0","id":"1","source":"/s","type":"t","x\u0061":"1","cluster":"a","cluster":"b"}"#,
    ] {
        let error = parse_request(&structured, body).unwrap_err();
        assert_eq!(error.kind(), "invalid_json");
        assert!(error.to_string().contains("is repeated"), "{error}");
    }
    let error = parse_request(
        &structured,
        br#"{"specversion":"1.0","id":"1","source":"/s","type":"t","cluster":"a","cluster":"b"}"#,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid CloudEvent JSON: member \"cluster\" is repeated: a CloudEvents attribute takes one member"
    );
    let batch = headers(&[("content-type", "application/cloudevents-batch+json")]);
    let error = parse_request(&batch, br#"[{"specversion":"1.0","id":"1","source":"/s","type":"t"},{"specversion":"1.0","id":"2","id":"3","source":"/s","type":"t"}]"#).unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid CloudEvent JSON: batch: member \"id\" is repeated: a CloudEvents attribute takes one member"
    );
    // Inside `data` a member may repeat (JSON's last-wins: the object is this service's).
    let parsed = parse_request(
        &structured,
        br#"{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{"a":1,"a":2}}"#,
    )
    .unwrap();
    assert_eq!(parsed.unread_data, Some(Unread::Member(r#"{"a":1,"a":2}"#)));
}

#[test]
fn short_cuts_on_char_boundary() {
    let long = "é".repeat(400);
    let cut = short(&long);
    assert!(cut.len() <= 304);
}
