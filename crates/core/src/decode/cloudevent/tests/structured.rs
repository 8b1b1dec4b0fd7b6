//! Structured mode: the fast path against the SDK's, the data handed on unread and refused by
//! its read when it is not JSON, and what the fast path leaves to the SDK.

use super::*;

#[test]
fn structured_mode() {
    let map = headers(&[(
        "content-type",
        "application/cloudevents+json; charset=utf-8",
    )]);
    let body = br#"{"specversion":"1.0","id":"x","source":"/s","type":"t","kind":"Revision","data":{"b":2}}"#;
    let parsed = parse_request(&map, body).unwrap();
    assert_eq!(parsed.events[0].extensions["kind"], "Revision");
    // The data handed on unread, as a binary-mode body is.
    assert_eq!(parsed.unread_data, Some(Unread::Member(r#"{"b":2}"#)));
    assert_eq!(parsed.events[0].data_value(), None);
    // On the SDK's path (`0.3`), the event holds it.
    let body = br#"{"specversion":"0.3","id":"x","source":"/s","type":"t","data":{"b":2}}"#;
    let parsed = parse_request(&map, body).unwrap();
    assert_eq!(parsed.unread_data, None);
    assert_eq!(
        parsed.events[0].data_value(),
        Some(serde_json::json!({"b": 2}))
    );
}

/// A structured body whose `data` is not JSON is refused as the request's JSON error, naming
/// where, whichever way its event goes: the fast path hands the data on unread and its read
/// names `data`; a body the fast path cannot walk (brackets that do not pair) goes the SDK's
/// way, which names the place in the body.
#[test]
fn a_structured_body_whose_data_is_not_json_is_refused() {
    let map = headers(&[("content-type", "application/cloudevents+json")]);
    let names = crate::decode::ClusterNames::default();
    for ty in [
        "dev.knative.apiserver.resource.update",
        "dev.knative.apiserver.ref.update",
        "com.example.other",
    ] {
        for (data, walkable) in [
            (r#"{"a":tru}"#, true),
            (r#"{"a":[1}"#, false),
            (r#"{"a":01}"#, true),
            (r#"{"a":1,}"#, true),
            ("{\"a\":\"\u{1}\"}", true),
            (r#"{"a":"\q"}"#, true),
            (r#"{"a":1e400}"#, true),
            (r#"{"a":"\ud800"}"#, true),
        ] {
            let body = format!(
                r#"{{"specversion":"1.0","id":"1","source":"/s","type":"{ty}","data":{data}}}"#
            );
            // The SDK refuses it.
            assert!(via_sdk(body.as_bytes()).is_err(), "{body}");
            let error = crate::decode::decode_request(&map, body.as_bytes(), &names)
                .map(|_| ())
                .unwrap_err();
            assert_eq!(error.kind(), "invalid_json", "{body}: {error}");
            // The data's read names it; the SDK names the place in the body.
            let message = error.to_string();
            if walkable {
                assert!(
                    message.starts_with("invalid CloudEvent JSON: data: "),
                    "{body}: {error}"
                );
            } else {
                assert!(message.contains(" column "), "{body}: {error}");
            }
        }
    }
}

#[test]
fn structured_fast_path_equals_the_sdk() {
    let mut bodies = recorded_bodies();
    bodies.push(br#"{"specversion":"1.0","id":"a","source":"/s","type":"t","time":"2026-11-29T12:00:00.123456789+02:00","subject":null,"flag":true,"count":7,"gone":null,"data":{"k":[1,2]}}"#.to_vec());
    bodies.push(br#"{"specversion":"1.0","id":"a","source":"/s","type":"t","datacontenttype":"application/vnd.x+json","data":null}"#.to_vec());
    bodies.push(br#"{"specversion":"1.0","id":" ","source":"/s","type":"t"}"#.to_vec());
    let mut fast = 0;
    for body in &bodies {
        let expected = via_sdk(body);
        if let Some(got) = fast_structured(body) {
            fast += 1;
            // The data handed on unread is the text the SDK's event holds.
            let got = got.map(|(event, data)| CloudEvent {
                data: data.map(|text| RawValue::from_string(text.to_string()).unwrap()),
                ..event
            });
            match (&got, &expected) {
                (Ok(got), Ok(expected)) => assert_eq!(got, expected),
                (Err(got), Err(expected)) => assert_eq!(got.to_string(), expected.to_string()),
                _ => panic!(
                    "fast path and SDK disagree on {}",
                    String::from_utf8_lossy(body)
                ),
            }
        }
    }
    assert!(
        fast >= 5,
        "the fast path took only {fast} of {} bodies",
        bodies.len()
    );
}

#[test]
fn structured_fast_path_leaves_the_rest_to_the_sdk() {
    for body in [
        &br#"{"specversion":"0.3","id":"a","source":"/s","type":"t"}"#[..],
        br#"{"specversion":"1.0","id":"a","source":"/s","type":"t","data_base64":"e30="}"#,
        br#"{"specversion":"1.0","id":"a","source":"/s","type":"t","dataschema":"https://x/y"}"#,
        br#"{"specversion":"1.0","id":"a","source":"/s","type":"t","datacontenttype":"text/plain","data":"x"}"#,
        br#"{"specversion":"1.0","id":"a","source":"/s","type":"t","time":"yesterday"}"#,
        br#"{"specversion":"1.0","id":7,"source":"/s","type":"t"}"#,
        br#"{"specversion":"1.0","source":"/s","type":"t"}"#,
        br#"{"specversion":"1.0","id":"a","source":"/s","type":"t","ext":1.5}"#,
        br#"[]"#,
        br#"{nope"#,
    ] {
        assert!(fast_structured(body).is_none(), "{}", String::from_utf8_lossy(body));
    }
    // Not JSON outside `data` (the jump does not read values; the attributes' parse does): left
    // to the SDK, which refuses it.
    for body in [
        &br#"{"specversion":"1.0","id":"a","source":"/s","type":"t","ext":01}"#[..],
        br#"{"specversion":"1.0","id":"a","source":"/s","type":"t","ext":tru}"#,
        br#"{"specversion":"1.0","id":"a","source":"/s","type":"t","ext":"\q"}"#,
        b"{\"specversion\":\"1.0\",\"id\":\"a\",\"source\":\"/s\",\"type\":\"t\",\"ext\":\"\x01\"}",
        b"{\"specversion\":\"1.0\",\"id\":\"a\",\"source\":\"/s\",\"type\":\"t\",\"e\x01\":\"x\"}",
        br#"{"specversion":"1.0","id":"a","source":"/s","type":"t"} x"#,
        br#"{"specversion":"1.0","id":"a" "source":"/s","type":"t"}"#,
    ] {
        assert!(
            fast_structured(body).is_none(),
            "{}",
            String::from_utf8_lossy(body)
        );
        assert!(via_sdk(body).is_err(), "{}", String::from_utf8_lossy(body));
    }
    // A name written with an escape: the SDK reads it.
    let escaped = br#"{"specversion":"1.0","id":"a","source":"/s","typ\u0065":"t"}"#;
    assert!(fast_structured(escaped).is_none());
    assert_eq!(via_sdk(escaped).unwrap().ty, "t");
}

#[test]
fn structured_garbage_is_invalid_json() {
    let map = headers(&[("content-type", "application/cloudevents+json")]);
    assert_eq!(
        parse_request(&map, b"{nope").unwrap_err().kind(),
        "invalid_json"
    );
    assert_eq!(
        parse_request(&map, b"[]").unwrap_err().kind(),
        "invalid_json"
    );
}
