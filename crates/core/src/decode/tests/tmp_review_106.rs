// Throwaway (helper-106): adversarial inputs for the cut path. Removed after the review.
use crate::decode::fast::{cut_data, parse};
use crate::decode::object::parse_general;
use crate::decode::raw::scan;

struct Numbers(u64);
impl Numbers {
    fn below(&mut self, limit: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % limit as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "plain", "", "é中", "😀", r#"\n"#, r#"\""#, r#"\\"#, r#"\/"#, r#"\u003c"#, r#"\u003C"#,
    r#"\u00e9"#, r#"\u0000"#, r#"\ud83d\ude00"#, r#"\uD83D\uDE00"#, r#"\ud800"#, r#"\udc00"#,
    r#"\ud800\u0041"#, r#"\ud800\ud800\udc00"#, r#"\ud800x"#, r#"\x"#, r#"\u12"#, "\u{1}",
    "\t", "\u{7f}", "{}[],:", "data", r#"\"data\":{"#, r#"\u0022"#, r#"\u005c"#,
];

fn string(n: &mut Numbers, key: bool) -> String {
    let mut s = String::from("\"");
    for _ in 0..=n.below(3) {
        let p = PIECES[n.below(PIECES.len())];
        if key && n.below(3) != 0 && p.contains('\\') {
            s.push('k');
            continue;
        }
        s.push_str(p);
    }
    s.push('"');
    s
}

fn data(n: &mut Numbers) -> String {
    let sp = ["", "", " ", "\n"];
    let mut t = format!("{{{}", sp[n.below(4)]);
    let m = n.below(4);
    for i in 0..m {
        let k = string(n, true);
        let v = match n.below(12) {
            0 => "1".to_string(),
            1 => "{}".to_string(),
            _ => string(n, false),
        };
        t.push_str(&format!("{k}{}:{}{v}", sp[n.below(4)], sp[n.below(4)]));
        if i + 1 < m {
            t.push(',');
        }
    }
    t.push_str(&format!("{}}}", sp[n.below(4)]));
    // make it big often so that it is cut
    if n.below(2) == 0 {
        let long = "y".repeat(600);
        t = t.replacen('{', &format!("{{\"zz_long_{}\":\"{long}\",", n.below(100)), 1);
        // keep order: zz key may be unsorted; fine
    }
    t
}

fn object(n: &mut Numbers) -> String {
    let d = data(n);
    let kind = ["ConfigMap", "ConfigMap", "ConfigMap", "Secret", "Pod"][n.below(5)];
    let mut members = vec![
        r#""apiVersion":"v1""#.to_string(),
        format!(r#""kind":"{kind}""#),
        r#""metadata":{"name":"c","namespace":"n","uid":"u","resourceVersion":"7"}"#.to_string(),
        format!(r#""data":{d}"#),
    ];
    match n.below(12) {
        0 => members.push(format!(r#""d\u0061ta":{}"#, data(n))),
        1 => members.push(format!(r#""data":{}"#, data(n))),
        2 => members.push(r#""binaryData":{"b":"AAAA"}"#.to_string()),
        3 => members.push(r#""status":{"x":"\ud800"}"#.to_string()),
        4 => members.push(r#""status":{"x":1e400}"#.to_string()),
        5 => members.push(r#""status":{"x":"\u003c"}"#.to_string()),
        6 => members.push(r#""x":"\"data\":{}""#.to_string()),
        7 => members.push(r#""spec":{"data":{"a":"b"}}"#.to_string()),
        _ => {}
    }
    // shuffle a little
    for i in (1..members.len()).rev() {
        let j = n.below(i + 1);
        members.swap(i, j);
    }
    format!("{{{}}}", members.join(","))
}

fn check(text: &str, stats: &mut [usize; 6]) {
    let tree = serde_json::from_str::<serde_json::Value>(text);
    let result = crate::decode::parse_object_text(text);
    if let Err(tree_error) = &tree {
        match &result {
            Ok(_) => panic!("accepted what serde_json refuses ({tree_error}): {text}"),
            Err(error) => {
                assert_eq!(error.kind(), "invalid_json", "{text}: {error}");
                let msg = error.to_string();
                if !msg.contains(&format!("column {}", tree_error.column())) {
                    stats[5] += 1;
                    if stats[5] < 5 {
                        eprintln!("position differs: {msg} / {tree_error} : {text}");
                    }
                }
            }
        }
        stats[0] += 1;
    }
    let Ok(scanned) = scan(text) else { return };
    if let Some(span) = scanned.data {
        if let Some(counted) = span.counted {
            let mut de = serde_json::Deserializer::from_str(&text[span.start..span.end]);
            assert_eq!(crate::decode::data::Counted::read(&mut de).ok(), Some(counted), "{text}");
            stats[1] += 1;
        }
    }
    let cut = cut_data(text, &scanned);
    let with = parse(text, scanned, cut.as_ref());
    let without = parse(text, scanned, None);
    if cut.is_some() {
        stats[2] += 1;
    }
    match (&with, &without) {
        (Some((a, _)), Some((b, _))) => {
            assert_eq!(a, b, "{text}");
            assert_eq!(a.data.as_ref().map(|d| (d.text().to_string(), d.counted_bytes(), d.counted_entries())),
                       b.data.as_ref().map(|d| (d.text().to_string(), d.counted_bytes(), d.counted_entries())), "{text}");
            if cut.is_some() { stats[3] += 1; }
        }
        (Some(_), None) => panic!("cut accepted, whole refused: {text}"),
        (None, Some(_)) => { stats[4] += 1; if stats[4] < 5 { eprintln!("cut refused, whole accepted: {text}"); } }
        (None, None) => {}
    }
    if let Some((a, _)) = &with {
        assert!(tree.is_ok(), "{text}");
        let g = parse_general(text, scanned);
        let g = g.unwrap_or_else(|e| panic!("general refused ({e}): {text}"));
        assert_eq!(a.data.as_ref().map(|d| d.map().clone()), g.data.as_ref().map(|d| d.map().clone()), "{text}");
        assert_eq!(a.data.as_ref().map(|d| (d.counted_bytes(), d.counted_entries())), g.data.as_ref().map(|d| (d.counted_bytes(), d.counted_entries())), "{text}");
    }
}

#[test]
fn review_106_adversarial() {
    let mut n = Numbers(0x1234_5678_9abc_def1);
    let mut stats = [0usize; 6];
    for round in 0..4000 {
        let text = object(&mut n);
        check(&text, &mut stats);
        if round % 8 == 0 {
            let bytes = text.as_bytes();
            for cut in (0..bytes.len()).step_by(1 + n.below(7)) {
                if let Ok(t) = std::str::from_utf8(&bytes[..cut]) { check(t, &mut stats); }
                for b in [b'"', b'\\', b'{', b'}', b',', b':', b' ', b'u', 0x01, b'x'] {
                    let mut c = bytes.to_vec();
                    c[cut] = b;
                    if let Ok(t) = String::from_utf8(c.clone()) { check(&t, &mut stats); }
                    c.insert(cut, b);
                    if let Ok(t) = String::from_utf8(c) { check(&t, &mut stats); }
                }
            }
        }
    }
    eprintln!("stats: refused-by-tree {}, counted {}, cuts {}, cut-and-fast {}, cut-refused-whole-ok {}, position-differs {}", stats[0], stats[1], stats[2], stats[3], stats[4], stats[5]);
    assert!(stats[3] > 100);
}

#[test]
fn review_106_specific() {
    let mut stats = [0usize; 6];
    let long = "v".repeat(3000);
    let cm = |d: &str, extra: &str| format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","uid":"u","resourceVersion":"1"}},"data":{d}{extra}}}"#);
    for (d, extra) in [
        (format!(r#"{{"a":"{long}\u003c"}}"#), r#","status":{"x":"\ud800"}"#.to_string()),
        (format!(r#"{{"a":"{long}\u003c"}}"#), r#","status":{"x":1e400}"#.to_string()),
        (format!(r#"{{"a":"{long}\u003c"}}"#), r#","data":{"b":"\ud800"}"#.to_string()),
        (format!(r#"{{"a":"{long}\u003c"}}"#), r#","d\u0061ta":{"b":"c"}"#.to_string()),
        (format!(r#"{{"a":"{long}\ud800\udbff"}}"#), String::new()),
        (format!(r#"{{"a":"{long}\udbff\udfff"}}"#), String::new()),
        (format!(r#"{{"a":"{long}\uDBFF\uDFFF"}}"#), String::new()),
        (format!(r#"{{"b":"{long}","a":"x","a":"y"}}"#), String::new()),
        (format!(r#"{{"a":"{long}"}}"#), "x".to_string()),
        (format!(r#"{{"a":"{long}"}}"#), ",".to_string()),
        (format!(r#"{{"a":"{long}"}}"#), r#","kind":"Secret""#.to_string()),
        (format!(r#"{{"a":"{long}"}}"#), r#","binaryData":{"x":"AA=="}"#.to_string()),
    ] {
        let text = cm(&d, &extra);
        check(&text, &mut stats);
        let r = crate::decode::parse_object_text(&text);
        eprintln!("{:?}", r.as_ref().map(|o| o.data.as_ref().map(|d| d.counted_bytes())).map_err(|e| e.to_string()));
    }
    // trailing garbage after root
    let text = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","uid":"u","resourceVersion":"1"}}}}{{"data":{{"a":"{long}"}}}}"#);
    check(&text, &mut stats);
    eprintln!("specific stats {stats:?}");
}
