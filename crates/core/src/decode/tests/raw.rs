//! The readers of `super` (members, elements, the scan) against the parser, on hand-made
//! texts and on every object and list of the JSON fixtures.

use super::*;

/// `texts`, then every object and list in the fixtures as text, compact and pretty-printed
/// (statuses and specs included).
fn with_fixture_texts(texts: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = texts.iter().map(|text| text.to_string()).collect();
    for value in crate::decode::fixtures::nested_values() {
        all.push(value.to_string());
        all.push(serde_json::to_string_pretty(&value).unwrap());
    }
    all
}

#[test]
fn members_borrow_and_keep_the_last_of_a_repeated_key() {
    let text = r#"{"a": 1, "b\u0041": {"x": [1, 2]}, "a": "two"}"#;
    let members = Members::of(text).unwrap();
    assert_eq!(members.get("a").unwrap().get(), "\"two\"");
    assert_eq!(members.get("bA").unwrap().get(), r#"{"x": [1, 2]}"#);
    let names: Vec<&str> = members.0.iter().map(|(name, _)| name.as_ref()).collect();
    assert_eq!(first_repeated(&names), Some("a"));
    assert!(members.get("c").is_none());
    assert!(Members::of("[1]").is_none());
    assert!(Members::of("\"text\"").is_none());
}

#[test]
fn a_member_is_found_by_jumping_as_members_find_it() {
    let mut texts = with_fixture_texts(&[
        r#"{"a": 1, "b\u0041": {"x": [1, 2]}, "a": "two"}"#,
        r#" { "a" : [ {"}": "]"} , "\"" ] , "b":null,"c":true ,"d":-1.5e3 } "#,
        r#"{"observedGeneration":3,"conditions":[{"type":"Ready","status":"True","message":"a \"quoted\" {x}"}]}"#,
        r#"{}"#,
        r#" {} "#,
        r#"[{"a":1}]"#,
        r#""a""#,
        r#"{"a\"b":1,"a":2}"#,
        r#"{"a":"\\","b":"x\\\"y"}"#,
    ]);
    texts.extend(crate::decode::fixtures::json_texts());
    assert!(texts.len() > 500, "texts: {}", texts.len());
    let mut found = 0;
    for text in &texts {
        let members = Members::of(text);
        let mut keys: Vec<String> = members
            .iter()
            .flat_map(|members| members.0.iter().map(|(key, _)| key.to_string()))
            .collect();
        keys.extend(["absent".to_string(), String::new(), "a".to_string()]);
        for key in &keys {
            let expected = members
                .as_ref()
                .and_then(|members| members.get(key))
                .map(RawValue::get);
            assert_eq!(member(text, key), expected, "{key} in {text}");
            found += usize::from(expected.is_some());
        }
    }
    assert!(found > 1000, "members found: {found}");
    // Out of place for valid JSON: answered as the parser answers (here: not an object).
    for text in [
        r#"{"a":}"#,
        r#"{"a":1} x"#,
        r#"{} x"#,
        r#"{"a":1,}"#,
        r#"{"a" 1}"#,
    ] {
        assert_eq!(member(text, "a"), None, "{text}");
    }
}

#[test]
fn members_and_elements_are_read_by_jumping_as_the_parser_reads_them() {
    let texts = with_fixture_texts(&[
        r#" { "a" : [ {"}": "]"} , "\"" ] , "b":null,"c":true ,"d":-1.5e3 } "#,
        r#"{"a":1,"a":2}"#,
        r#"{"a\"b":1}"#,
        r#"[ 1 , "x]" , {"a":[]} , [] ]"#,
        r#"[]"#,
        r#"{}"#,
        r#""a""#,
    ]);
    let (mut objects, mut arrays) = (0, 0);
    for text in &texts {
        let parsed = Members::of(text).map(|members| {
            members
                .0
                .iter()
                .map(|(name, value)| (name.to_string(), value.get().to_string()))
                .collect::<Vec<_>>()
        });
        match member_texts(text) {
            Some(members) => {
                let members: Vec<(String, String)> = members
                    .iter()
                    .map(|(name, value)| (name.to_string(), value.to_string()))
                    .collect();
                assert_eq!(Some(members), parsed, "{text}");
                objects += 1;
            }
            // Only an escaped name, or another type, is left to the parser.
            None => assert!(parsed.is_none() || text.contains('\\'), "{text}"),
        }
        let parsed: Option<Vec<&str>> = serde_json::from_str::<Vec<&RawValue>>(text)
            .ok()
            .map(|elements| elements.into_iter().map(RawValue::get).collect());
        assert_eq!(element_texts(text), parsed, "{text}");
        arrays += usize::from(parsed.is_some());
    }
    assert!(
        objects > 500 && arrays > 100,
        "{objects} objects, {arrays} arrays"
    );
}

#[test]
fn depth_is_counted_outside_strings_only() {
    let deep = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
    assert!(scan(&deep(MAX_DEPTH)).is_ok());
    let error = scan(&deep(MAX_DEPTH + 1)).unwrap_err();
    assert!(error.contains("recursion limit"), "{error}");
    // Brackets and escaped quotes inside strings are text.
    let quoted = format!(r#"{{"a": "{}\"{}"}}"#, "[".repeat(500), "{".repeat(500));
    assert!(scan(&quoted).is_ok());
    // serde_json agrees on where the limit is.
    assert!(serde_json::from_str::<serde_json::Value>(&deep(MAX_DEPTH)).is_ok());
    assert!(serde_json::from_str::<serde_json::Value>(&deep(MAX_DEPTH + 1)).is_err());
}

#[test]
fn compact_text_and_plain_numbers_are_told_apart() {
    let plain = |text: &str| scan(text).unwrap();
    assert_eq!(
        plain(r#"{"a":[1,2.5,-3],"b":true,"c":false,"d":"x e 1e9 \" y"}"#),
        Scanned {
            compact: true,
            plain_numbers: true,
            no_unicode_escapes: true,
            data: None,
            spec: None,
        }
    );
    assert!(!plain(r#"{"a":"\u003c"}"#).no_unicode_escapes);
    assert!(plain(r#"{"a":"\\u003c"}"#).no_unicode_escapes);
    assert!(!plain(r#"{"a": 1}"#).compact);
    assert!(!plain("{\"a\":\n1}").compact);
    assert!(!plain(r#"{"a":1e400}"#).plain_numbers);
    assert!(!plain(r#"{"a":1.5E3}"#).plain_numbers);
    assert!(!plain(&format!(r#"{{"a":{}}}"#, "9".repeat(400))).plain_numbers);
    // Every text the scan calls plain parses.
    assert!(serde_json::from_str::<serde_json::Value>(&format!("[{}]", "9".repeat(299))).is_ok());
}

/// The scan as it was before it jumped inside strings: one byte at a time. `read` is where the
/// scan read a `data` object itself, whose `\u` escapes it checked (they ask for no full check).
fn scan_bytewise(text: &str, read: Option<(usize, usize)>) -> Result<Scanned, String> {
    let mut depth = 0usize;
    let mut scanned = Scanned {
        compact: true,
        plain_numbers: true,
        no_unicode_escapes: true,
        data: None,
        spec: None,
    };
    let (mut digits, mut previous) = (0usize, 0u8);
    let mut bytes = text.bytes().enumerate();
    let checked = |at: usize| read.is_some_and(|(start, end)| (start..end).contains(&at));
    while let Some((_, byte)) = bytes.next() {
        match byte {
            b'"' => {
                while let Some((at, byte)) = bytes.next() {
                    match byte {
                        b'\\' => {
                            let unicode = bytes.next().map(|(_, byte)| byte) == Some(b'u');
                            scanned.no_unicode_escapes &= !unicode || checked(at);
                        }
                        b'"' => break,
                        _ => {}
                    }
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err("deep".to_string());
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b' ' | b'\n' | b'\r' | b'\t' => scanned.compact = false,
            b'0'..=b'9' => {
                digits += 1;
                if digits >= 300 {
                    scanned.plain_numbers = false;
                }
            }
            b'e' | b'E' if previous.is_ascii_digit() || previous == b'.' => {
                scanned.plain_numbers = false;
            }
            _ => {}
        }
        if !byte.is_ascii_digit() {
            digits = 0;
        }
        previous = byte;
    }
    Ok(scanned)
}

#[test]
fn the_scan_agrees_with_a_byte_at_a_time_on_every_fixture_and_cut() {
    let mut texts = vec![
        r#"{"a":"x\\"}"#.to_string(),
        r#"{"a":"\\\"[{"}"#.to_string(),
        r#"{"a":"\u0041","b":[1e5]}"#.to_string(),
        r#"["tail\"#.to_string(),
        "\"open".to_string(),
        format!(
            r#"{{"deep":"{}","x":{}}}"#,
            "[".repeat(200),
            "[".repeat(130)
        ),
    ];
    texts.extend(crate::decode::fixtures::json_texts());
    assert!(texts.len() > 15, "fixtures found: {}", texts.len());
    for text in &texts {
        // Prefixes cut at character boundaries, so strings open and close anywhere.
        for cut in (0..=text.len())
            .step_by((text.len() / 400).max(7))
            .filter(|cut| text.is_char_boundary(*cut))
        {
            let part = &text[..cut];
            // The flags (the byte-at-a-time scan does not look for `data`).
            let flags = |scanned: Scanned| Scanned {
                data: None,
                spec: None,
                ..scanned
            };
            // Exempt only a `data` object that serde_json reads as one of strings too.
            let read = scan(part)
                .ok()
                .and_then(|scanned| scanned.data)
                .and_then(|span| {
                    span.counted?;
                    let data = &part[span.start..span.end];
                    let mut deserializer = serde_json::Deserializer::from_str(data);
                    Counted::read(&mut deserializer).ok()?;
                    Some((span.start, span.end))
                });
            assert_eq!(
                scan(part).map(flags).map_err(|_| ()),
                scan_bytewise(part, read).map_err(|_| ()),
                "{part}"
            );
        }
    }
}

#[test]
fn a_repeated_key_is_found_among_many() {
    let many: Vec<String> = (0..5000).map(|index| format!("\"k{index}\":0")).collect();
    let text = format!("{{{},\"k4999\":1,\"k7\":2}}", many.join(","));
    let names = |text: &str| -> Vec<String> {
        member_texts(text)
            .unwrap()
            .into_iter()
            .map(|(name, _)| name.to_string())
            .collect()
    };
    let repeated = |names: &[String]| {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        first_repeated(&names).map(str::to_string)
    };
    assert_eq!(repeated(&names(&text)), Some("k4999".to_string()));
    let text = format!("{{{}}}", many.join(","));
    assert_eq!(repeated(&names(&text)), None);
    // A few (pairwise): the first whose second appearance comes first.
    let few: Vec<String> = ["a", "b", "c", "b", "a"].map(String::from).to_vec();
    assert_eq!(repeated(&few), Some("b".to_string()));
}

#[test]
fn elements_of_an_array_only() {
    let raw = RawValue::from_string("[{\"a\":1}, 2, null]".into()).unwrap();
    let items = elements(&raw).unwrap();
    assert_eq!(
        items.iter().map(|item| item.get()).collect::<Vec<_>>(),
        vec!["{\"a\":1}", "2", "null"]
    );
    let raw = RawValue::from_string("{}".into()).unwrap();
    assert!(elements(&raw).is_none());
}

#[test]
fn the_word_search_finds_the_first_quote_or_backslash_as_a_byte_search_does() {
    // Every length up to past the word search's 32 bytes, every position of the sought byte,
    // every start; with bytes either side of the sought ones (0x21 `!`, 0x5b `[`, 0x5d `]`,
    // 0xa2 and 0xdc, whose low bits match, and a borrow's neighbours 0x01 and 0x00).
    for fill in [b'a', b'!', b'[', b']', 0x01, 0x00, 0xa2, 0xdc, b'#'] {
        for len in 0..80 {
            for sought in [b'"', b'\\'] {
                for place in (0..len).map(Some).chain([None]) {
                    let mut bytes = vec![fill; len];
                    if let Some(place) = place {
                        bytes[place] = sought;
                        // A second one after it (a quote after a backslash, a backslash
                        // after a quote) must not be found first.
                        if place + 3 < len {
                            bytes[place + 3] = if sought == b'"' { b'\\' } else { b'"' };
                        }
                    }
                    for at in 0..=len + 1 {
                        let expected = bytes
                            .get(at..)
                            .and_then(|rest| rest.iter().position(|b| *b == b'"' || *b == b'\\'))
                            .map(|found| at + found);
                        assert_eq!(
                            quote_or_backslash(&bytes, at),
                            expected,
                            "fill {fill:#x}, length {len}, {sought:#x} at {place:?}, from {at}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_scan_finds_the_one_top_level_data_object() {
    fn data(text: &str) -> Option<&str> {
        let span = scan(text).unwrap().data?;
        let found = &text[span.start..span.end];
        // Read by the scan (counted as serde_json counts it), or left to the one-pass reader.
        if let Some(counted) = span.counted {
            let mut deserializer = serde_json::Deserializer::from_str(found);
            assert_eq!(
                Counted::read(&mut deserializer).ok(),
                Some(counted),
                "{text}"
            );
        }
        Some(found)
    }
    // A ConfigMap as the API server writes it, and with whitespace.
    let config_map = r#"{"apiVersion":"v1","data":{"a":"1","b":"x\"}\\"},"kind":"ConfigMap"}"#;
    assert_eq!(data(config_map), Some(r#"{"a":"1","b":"x\"}\\"}"#));
    assert_eq!(
        data("{ \"data\" :\n { \"a\" : \"1\" } , \"kind\":\"ConfigMap\"}"),
        Some(r#"{ "a" : "1" }"#)
    );
    assert_eq!(data(r#"{"data":{}}"#), Some("{}"));
    // Not an object, not at the top, not a key, written with an escape, or twice: none.
    for text in [
        r#"{"data":null}"#,
        r#"{"data":"x"}"#,
        r#"{"metadata":{"data":{"a":"1"}}}"#,
        r#"{"kind":"data","x":{"a":"1"}}"#,
        r#"["data",{"a":"1"}]"#,
        r#"{"d\u0061ta":{"a":"1"}}"#,
        r#"{"data":{"a":"1"},"data":{"b":"2"}}"#,
        r#"{"data":null,"data":{"b":"2"}}"#,
        r#"{"datas":{"a":"1"}}"#,
        r#"{"data\"":{"a":"1"}}"#,
    ] {
        assert_eq!(data(text), None, "{text}");
    }
    // Every fixture that has a top-level `data` object: the span is its text, as serde_json
    // captures it.
    let mut found = 0;
    for text in crate::decode::fixtures::json_texts() {
        #[derive(serde::Deserialize)]
        struct Top<'a> {
            #[serde(borrow)]
            data: Option<&'a serde_json::value::RawValue>,
        }
        let Ok(top) = serde_json::from_str::<Top<'_>>(&text) else {
            continue;
        };
        let expected = top
            .data
            .map(|raw| raw.get())
            .filter(|raw| raw.starts_with('{'));
        found += usize::from(expected.is_some());
        assert_eq!(data(&text), expected, "{text}");
    }
    assert!(found >= 2, "{found} fixtures with data");
}
