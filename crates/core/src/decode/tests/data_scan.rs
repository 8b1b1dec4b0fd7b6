//! [`Counted::scan`] against serde_json's reading of the same object ([`Counted::read`]): what
//! the scan accepts, serde_json accepts with the same counts, and the scan accepts every object
//! of strings but the two it leaves to serde_json (an escaped key, an unpaired surrogate
//! escape).

use super::*;

/// serde_json's verdict on `text` as one object of strings: its counts, or `None`.
fn serde_counts(text: &str) -> Option<Counted> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let counted = Counted::read(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(counted)
}

/// The scan's verdict on `text` as one object of strings (nothing after it).
fn scan_counts(text: &str) -> Option<ScannedData> {
    Counted::scan(text.as_bytes(), 0).filter(|read| read.end == text.len())
}

#[test]
fn a_string_stops_at_the_first_quote_backslash_or_control_character() {
    // Every length past two words, every place of the sought byte, every start; fills either
    // side of the sought ones (0x1f and 0x20 around the control limit, 0x21 `!` and 0x5b `[`
    // beside the quote and backslash, bytes with the high bit set, which are not controls).
    for fill in [
        b'a', b' ', b'!', b'[', b']', 0x21, 0x7f, 0x80, 0xa2, 0xdc, 0xff,
    ] {
        for len in 0..40 {
            for sought in [b'"', b'\\', 0x00, 0x01, 0x0a, 0x1f] {
                for place in (0..len).map(Some).chain([None]) {
                    let mut bytes = vec![fill; len];
                    if let Some(place) = place {
                        bytes[place] = sought;
                        // A control byte borrows from the byte above it: one just above must
                        // not hide the first.
                        if place + 1 < len {
                            bytes[place + 1] = 0x20;
                        }
                        if place + 3 < len {
                            bytes[place + 3] = b'"';
                        }
                    }
                    for at in 0..=len + 1 {
                        let expected = bytes
                            .get(at..)
                            .and_then(|rest| {
                                rest.iter()
                                    .position(|b| *b == b'"' || *b == b'\\' || *b < 0x20)
                            })
                            .map(|found| at + found);
                        assert_eq!(
                            string_stop(&bytes, at),
                            expected,
                            "fill {fill:#x}, length {len}, {sought:#x} at {place:?}, from {at}"
                        );
                    }
                }
            }
        }
    }
}

/// Pieces of keys and values: (the JSON text of the piece, whether the scan may leave a string
/// holding it to serde_json even when serde_json accepts it).
const PIECES: &[(&str, bool)] = &[
    ("plain", false),
    ("a", false),
    ("", false),
    ("é中文😀", false),
    (r#"\n"#, false),
    (r#"\""#, false),
    (r#"\\"#, false),
    (r#"\/"#, false),
    (r#"\b\f\r\t"#, false),
    (r#"\u003c\u0026\u003E"#, false),
    (r#"\u00e9"#, false),
    (r#"\u4E2d"#, false),
    (r#"\u0000"#, false),
    (r#"\ud83d\ude00"#, false),
    (r#"\uD83D\uDE00"#, false),
    (r#"\ud800"#, true),
    (r#"\udc00"#, true),
    (r#"\ud800\u0041"#, true),
    (r#"\ud800x"#, true),
    (r#"\x"#, true),
    (r#"\u12"#, true),
    (r#"\u12g4"#, true),
    ("\u{1}", true),
    ("\t", true),
    ("\u{7f}", false),
    ("{}[],:", false),
];

/// A deterministic stream of numbers (xorshift), so the corpus is the same on every run.
struct Numbers(u64);

impl Numbers {
    fn below(&mut self, limit: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % limit as u64) as usize
    }
}

/// A string of one to three pieces (`clean`: of pieces the scan reads, no escape in a key);
/// whether the scan may leave it to serde_json.
fn string(numbers: &mut Numbers, key: bool, clean: bool) -> (String, bool) {
    let mut text = String::from("\"");
    let mut may_leave = false;
    for _ in 0..=numbers.below(3) {
        let (piece, leave) = loop {
            let (piece, leave) = PIECES[numbers.below(PIECES.len())];
            if !(clean && (leave || key && piece.contains('\\'))) {
                break (piece, leave);
            }
        };
        text.push_str(piece);
        // Any escape in a key is left to serde_json (its order needs it unescaped).
        may_leave |= leave || (key && piece.contains('\\'));
    }
    text.push('"');
    (text, may_leave)
}

/// An object text (unless `clean`, sometimes not an object of strings, or not valid); whether
/// the scan may leave it to serde_json although serde_json accepts it.
fn object(numbers: &mut Numbers, clean: bool) -> (String, bool) {
    const SPACE: &[&str] = &["", "", "", " ", "\n ", "\t", "\r\n"];
    let space = |numbers: &mut Numbers| SPACE[numbers.below(SPACE.len())].to_string();
    let mut text = format!("{{{}", space(numbers));
    let mut may_leave = false;
    let members = numbers.below(5);
    for index in 0..members {
        let (key, leave_key) = string(numbers, true, clean);
        let value = match numbers.below(if clean { 1 } else { 20 }) {
            // Not a string: refused by both.
            1 => "1".to_string(),
            2 => "null".to_string(),
            3 => "{}".to_string(),
            _ => {
                let (value, leave) = string(numbers, false, clean);
                may_leave |= leave;
                value
            }
        };
        may_leave |= leave_key;
        text.push_str(&format!(
            "{key}{}:{}{value}{}",
            space(numbers),
            space(numbers),
            space(numbers)
        ));
        if index + 1 < members {
            text.push(',');
            text.push_str(&space(numbers));
        }
    }
    match numbers.below(if clean { 1 } else { 20 }) {
        // A trailing comma, a missing brace: refused by both.
        1 => text.push_str(",}"),
        2 => {}
        _ => text.push('}'),
    }
    (text, may_leave)
}

/// Whitespace outside the strings of a valid JSON text.
fn spaced_outside_strings(text: &str) -> bool {
    let (mut inside, mut escaped) = (false, false);
    text.bytes().any(|byte| {
        if inside {
            (inside, escaped) = (escaped || byte != b'"', !escaped && byte == b'\\');
            return false;
        }
        inside = byte == b'"';
        matches!(byte, b' ' | b'\n' | b'\r' | b'\t')
    })
}

#[test]
fn the_scan_reads_an_object_of_strings_as_serde_json_does() {
    let mut numbers = Numbers(0x9e37_79b9_7f4a_7c15);
    let (mut read, mut left, mut refused) = (0, 0, 0);
    for _ in 0..20_000 {
        let clean = numbers.below(2) == 0;
        let (text, may_leave) = object(&mut numbers, clean);
        let theirs = serde_counts(&text);
        match (scan_counts(&text), theirs) {
            (Some(ours), Some(theirs)) => {
                read += 1;
                assert_eq!(ours.counted, theirs, "{text}");
                assert_eq!(ours.spaced, spaced_outside_strings(&text), "{text}");
            }
            (Some(ours), None) => panic!("the scan took what serde_json refuses: {text} {ours:?}"),
            (None, Some(_)) => {
                assert!(may_leave, "the scan left a plain object of strings: {text}");
                left += 1;
            }
            (None, None) => refused += 1,
        }
    }
    assert!(
        read > 8_000 && left > 200 && refused > 1_000,
        "{read} read, {left} left to serde_json, {refused} refused"
    );
}

#[test]
fn what_the_scan_reads_of_a_cut_or_changed_text_serde_json_reads_alike() {
    let mut numbers = Numbers(0x2545_f491_4f6c_dd1d);
    let mut texts: Vec<String> = (0..1_000).map(|_| object(&mut numbers, true).0).collect();
    texts.push(r#"{"a":"x\u003cy","b":"\ud83d\ude00","c":"long value with spaces"}"#.into());
    let mut compared = 0;
    for text in &texts {
        let bytes = text.as_bytes();
        let mut variants: Vec<Vec<u8>> =
            (0..=bytes.len()).map(|cut| bytes[..cut].to_vec()).collect();
        for at in 0..bytes.len() {
            for byte in [
                b'"', b'\\', b'{', b'}', b',', b':', b' ', b'u', b'd', b'8', 0x01,
            ] {
                let mut changed = bytes.to_vec();
                changed[at] = byte;
                variants.push(changed);
            }
        }
        for variant in variants {
            // The scan reads text (a `str`): changes that break UTF-8 are not inputs.
            let Ok(variant) = String::from_utf8(variant) else {
                continue;
            };
            if let Some(ours) = Counted::scan(variant.as_bytes(), 0) {
                let theirs = serde_counts(&variant[..ours.end]);
                assert_eq!(Some(ours.counted), theirs, "{variant}");
                compared += 1;
            }
        }
    }
    assert!(compared > 5_000, "{compared} compared");
}

#[test]
fn a_config_maps_data_is_read_by_the_scan_and_cut_out_of_the_pass() {
    let config_map = |data: &str| {
        format!(
            r#"{{"apiVersion":"v1","data":{data},"kind":"ConfigMap","metadata":{{"name":"config-network","namespace":"knative-serving","uid":"u-1","resourceVersion":"7"}}}}"#
        )
    };
    let long = "x".repeat(2_000);
    // Go's encoder writes `<`, `>` and `&` as `\u` escapes: read by the scan, no full check.
    let data = format!(r#"{{"_example":"{long}","a":"1 \u003c 2 \u0026 3","b":"\ud83d\ude00"}}"#);
    let text = config_map(&data);
    let scanned = crate::decode::raw::scan(&text).unwrap();
    assert!(scanned.no_unicode_escapes && scanned.compact, "{scanned:?}");
    let span = scanned.data.unwrap();
    assert_eq!(&text[span.start..span.end], data);
    assert_eq!(span.counted, serde_counts(&data));
    // The data cut out, the rest read by the one pass.
    let cut = crate::decode::fast::cut_data(&text, &scanned).expect("the data is most of it");
    assert!(crate::decode::fast::parse(&text, scanned, Some(&cut)).is_some());
    let object = crate::decode::parse_object_text(&text).unwrap();
    let values = object.data.as_ref().unwrap();
    assert_eq!(values.text(), data);
    assert_eq!(values["a"], "1 < 2 & 3");
    assert_eq!(values["b"], "😀");
    assert_eq!(
        values.counted_bytes(),
        "_example".len() + long.len() + "a1 < 2 & 3".len() + "b😀".len()
    );
    // Whitespace in the data, or around its colon: not compact.
    for spaced in [
        config_map(r#"{ "a":"1"}"#).replace(r#""data":{ "#, r#""data": { "#),
        config_map(r#"{"a" : "1"}"#),
    ] {
        let scanned = crate::decode::raw::scan(&spaced).unwrap();
        assert!(
            !scanned.compact && scanned.data.unwrap().counted.is_some(),
            "{spaced}"
        );
    }
    // A lone surrogate is left to serde_json, which refuses it where it is; as is text that
    // is not JSON after the data, whose error names the place in the text sent.
    let lone = config_map(&format!(r#"{{"_example":"{long}","a":"\ud800"}}"#));
    let scanned = crate::decode::raw::scan(&lone).unwrap();
    assert!(scanned.data.unwrap().counted.is_none() && !scanned.no_unicode_escapes);
    let error = crate::decode::parse_object_text(&lone).unwrap_err();
    assert_eq!(error.kind(), "invalid_json", "{error}");
    let broken = format!("{},}}", &text[..text.len() - 1]);
    let error = crate::decode::parse_object_text(&broken)
        .unwrap_err()
        .to_string();
    let expected = serde_json::from_str::<serde_json::Value>(&broken).unwrap_err();
    assert!(
        error.contains(&format!("column {}", expected.column())),
        "{error} against {expected}"
    );
}
