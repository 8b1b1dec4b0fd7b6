//! Field diffs between two observed versions of an object, as JSON pointers with before/after.
//!
//! Noise never reaches a diff: `resourceVersion`, `managedFields`, `generation` and condition
//! timestamps are not in the compact state at all, and configured ignore paths are dropped here.
//! Diffs are bounded to at most [`MAX_CHANGES`] entries. Values are kept whole, because they are
//! compared later (has an edit been reverted?) and written into remediation patches; renderers
//! cut long values for display with `drift_model::diff::bounded`, so one huge edit cannot
//! produce a huge alert.

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::classify::state::ObjectState;
use crate::classify::Rules;
use crate::decode::raw::{self, Members};
use drift_model::pointer::push_pointer;
use drift_model::{FieldChange, MAX_CHANGES};

pub use drift_model::diff::bounded;

/// Diffs two JSON values under `base`, appending to `out`.
pub fn diff_values(
    base: &str,
    before: Option<&Value>,
    after: Option<&Value>,
    out: &mut Vec<FieldChange>,
) {
    match (before, after) {
        // Equal subtrees (most of a spec, on most events) are compared, not walked: no pointer
        // strings are built for them.
        (Some(left), Some(right)) if left == right => {}
        (Some(Value::Object(left)), Some(Value::Object(right))) => {
            let mut keys: Vec<&String> = left.keys().chain(right.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                diff_values(&push_pointer(base, key), left.get(key), right.get(key), out);
            }
        }
        (Some(Value::Array(left)), Some(Value::Array(right))) => {
            for index in 0..left.len().max(right.len()) {
                diff_values(
                    &push_pointer(base, &index.to_string()),
                    left.get(index),
                    right.get(index),
                    out,
                );
            }
        }
        (left, right) if left == right => {}
        // `null` and absent mean the same thing for Kubernetes fields.
        (None, Some(Value::Null)) | (Some(Value::Null), None) => {}
        (left, right) => out.push(FieldChange {
            path: base.to_string(),
            before: left.cloned(),
            after: right.cloned(),
        }),
    }
}

/// The spec diff (and, for ConfigMaps and Secrets, the data diff) between two versions.
pub fn spec_diff(before: &ObjectState, after: &ObjectState, rules: &Rules) -> Vec<FieldChange> {
    spec_diff_with(before, after, None, rules)
}

/// [`spec_diff`] with the after spec's text at hand (`after_text` must be `after.spec`'s text:
/// the event's own, which needs no unpacking).
pub(crate) fn spec_diff_with(
    before: &ObjectState,
    after: &ObjectState,
    after_text: Option<&str>,
    rules: &Rules,
) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    // Most updates leave the spec as it was: equal serialized text, nothing to read. Texts that
    // differ with equal values (another sender's key order) diff to nothing.
    if !before.spec.same_text(&after.spec) {
        let before_text = before.spec.text();
        let unpacked;
        let after_text = match after_text {
            Some(text) => text,
            None => {
                unpacked = after.spec.text();
                &unpacked
            }
        };
        spec_changes(&before_text, after_text, &mut changes);
    }
    // Most updates of a ConfigMap repeat its values (the same shared values, or the same text):
    // nothing to build or walk.
    if before.data != after.data {
        let data_before = before.data.as_deref().map(|data| map_value(data));
        let data_after = after.data.as_deref().map(|data| map_value(data));
        diff_values(
            "/data",
            data_before.as_ref(),
            data_after.as_ref(),
            &mut changes,
        );
    }
    finish(changes, &after.kind, rules)
}

/// The changes between two specs' texts under `/spec`, as [`diff_values`] finds them on the
/// trees (a text that does not parse reads as `null`, and `null` as no spec).
fn spec_changes(before: &str, after: &str, out: &mut Vec<FieldChange>) {
    let start = out.len();
    if diff_texts("/spec", not_null_text(before), not_null_text(after), out, 0).is_none() {
        // Not JSON where a member or element was read, or a differing value nested deeper than
        // the parser goes (a stored text is checked when it was decoded: this is a safeguard;
        // equal subtrees are not read, so a deep one beside a change is not found here): the
        // trees are diffed instead, and what the texts' diff found so far is dropped.
        out.truncate(start);
        let parse = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
        let (before, after) = (parse(before), parse(after));
        diff_values("/spec", non_null(&before), non_null(&after), out);
    }
}

/// [`diff_values`] on two JSON texts, answering as it answers on their parsed trees, without
/// building the trees: an object's or an array's members are read one level at a time as
/// texts, members with equal texts are skipped unread, and only values that differ are parsed
/// (a spec change is a field or two of a 2–20 KB spec; parsing both specs whole to find them
/// was most of `manual_edit`'s cost, BENCHMARKS.md, issue 28). `None` when a text is not JSON.
pub(crate) fn diff_texts(
    base: &str,
    before: Option<&str>,
    after: Option<&str>,
    out: &mut Vec<FieldChange>,
    depth: usize,
) -> Option<()> {
    if let (Some(left), Some(right)) = (before, after) {
        if left == right {
            return Some(());
        }
        // The parser's own limit: deeper text is the trees' to answer (and the stack's bound).
        if depth >= raw::MAX_DEPTH {
            return None;
        }
        match (first_byte(left), first_byte(right)) {
            (Some(b'{'), Some(b'{')) => {
                let (left, right) = (members(left)?, members(right)?);
                // Both sorted by key, as a `serde_json::Map` keeps them: walked side by side.
                let (mut i, mut j) = (0, 0);
                while i < left.len() || j < right.len() {
                    let order = match (left.get(i), right.get(j)) {
                        (Some((a, _)), Some((b, _))) => a.cmp(b),
                        (Some(_), None) => std::cmp::Ordering::Less,
                        _ => std::cmp::Ordering::Greater,
                    };
                    let (key, before, after) = match order {
                        std::cmp::Ordering::Less => {
                            i += 1;
                            (&left[i - 1].0, Some(left[i - 1].1), None)
                        }
                        std::cmp::Ordering::Greater => {
                            j += 1;
                            (&right[j - 1].0, None, Some(right[j - 1].1))
                        }
                        std::cmp::Ordering::Equal => {
                            i += 1;
                            j += 1;
                            (&left[i - 1].0, Some(left[i - 1].1), Some(right[j - 1].1))
                        }
                    };
                    diff_texts(&push_pointer(base, key), before, after, out, depth + 1)?;
                }
                return Some(());
            }
            (Some(b'['), Some(b'[')) => {
                let (left, right) = (elements(left)?, elements(right)?);
                for index in 0..left.len().max(right.len()) {
                    diff_texts(
                        &push_pointer(base, &index.to_string()),
                        left.get(index).copied(),
                        right.get(index).copied(),
                        out,
                        depth + 1,
                    )?;
                }
                return Some(());
            }
            _ => {}
        }
    }
    let parse = |text: Option<&str>| -> Option<Option<Value>> {
        match text {
            Some(text) => serde_json::from_str(text).ok().map(Some),
            None => Some(None),
        }
    };
    let (left, right) = (parse(before)?, parse(after)?);
    diff_values(base, left.as_ref(), right.as_ref(), out);
    Some(())
}

/// An object's members sorted by name, a repeated name's last value only (as the parser keeps
/// it): sorted stably, then each run of one name is its last member.
fn sorted_members<'a>(mut members: Vec<(Cow<'a, str>, &'a str)>) -> Vec<(Cow<'a, str>, &'a str)> {
    members.sort_by(|(a, _), (b, _)| a.cmp(b));
    let mut kept: Vec<(Cow<'a, str>, &'a str)> = Vec::with_capacity(members.len());
    for member in members {
        match kept.last_mut() {
            Some(last) if last.0 == member.0 => *last = member,
            _ => kept.push(member),
        }
    }
    kept
}

/// An object's members as texts, sorted ([`sorted_members`]): jumped over, or read by the
/// parser when a name is escaped.
fn members(text: &str) -> Option<Vec<(Cow<'_, str>, &str)>> {
    let members = match raw::member_texts(text) {
        Some(members) => members
            .into_iter()
            .map(|(name, value)| (Cow::Borrowed(name), value))
            .collect(),
        None => Members::of(text)?
            .0
            .into_iter()
            .map(|(name, value)| (name, value.get()))
            .collect(),
    };
    Some(sorted_members(members))
}

/// An array's elements as texts: jumped over, or read by the parser.
fn elements(text: &str) -> Option<Vec<&str>> {
    raw::element_texts(text).or_else(|| {
        serde_json::from_str::<Vec<&RawValue>>(text)
            .ok()
            .map(|elements| elements.into_iter().map(RawValue::get).collect())
    })
}

fn first_byte(text: &str) -> Option<u8> {
    text.trim_start().bytes().next()
}

/// A spec's text, `None` for `null` (as [`non_null`] reads a tree).
fn not_null_text(text: &str) -> Option<&str> {
    (text.trim() != "null").then_some(text)
}

/// The label and annotation diff between two versions.
pub(crate) fn metadata_diff(
    before: &ObjectState,
    after: &ObjectState,
    rules: &Rules,
) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    diff_values(
        "/metadata/labels",
        Some(&pairs_value(&before.labels)),
        Some(&pairs_value(&after.labels)),
        &mut changes,
    );
    diff_values(
        "/metadata/annotations",
        Some(&pairs_value(&before.annotations)),
        Some(&pairs_value(&after.annotations)),
        &mut changes,
    );
    finish(changes, &after.kind, rules)
}

fn finish(mut changes: Vec<FieldChange>, kind: &str, rules: &Rules) -> Vec<FieldChange> {
    changes.retain(|change| !rules.is_ignored_path(kind, &change.path));
    changes.truncate(MAX_CHANGES);
    changes
}

fn non_null(value: &Value) -> Option<&Value> {
    if value.is_null() {
        None
    } else {
        Some(value)
    }
}

fn pairs_value(pairs: &drift_model::Pairs) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), Value::String(value.to_string())))
            .collect(),
    )
}

fn map_value(map: &std::collections::BTreeMap<String, String>) -> Value {
    Value::Object(
        map.iter()
            .map(|(key, value)| (key.clone(), Value::String(value.clone())))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_model::pointer::pointer_segments;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn diffs_nested_objects_and_lists() {
        let mut out = Vec::new();
        diff_values(
            "/spec",
            Some(&json!({"traffic": [{"percent": 100, "revisionName": "a"}], "x": 1})),
            Some(
                &json!({"traffic": [{"percent": 50, "revisionName": "a"}, {"percent": 50, "revisionName": "b"}], "x": 1}),
            ),
            &mut out,
        );
        let paths: Vec<&str> = out.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["/spec/traffic/0/percent", "/spec/traffic/1"]);
        assert_eq!(out[0].before, Some(json!(100)));
        assert_eq!(out[0].after, Some(json!(50)));
    }

    /// The texts a JSON value may arrive as: compact, pretty-printed, and with non-ASCII
    /// characters (keys included) written as `\u` escapes.
    fn texts_of(value: &Value) -> Vec<String> {
        let compact = value.to_string();
        let escaped: String = compact
            .chars()
            .map(|c| {
                if c.is_ascii() {
                    c.to_string()
                } else {
                    let mut units = [0u16; 2];
                    c.encode_utf16(&mut units)
                        .iter()
                        .map(|unit| format!("\\u{unit:04x}"))
                        .collect()
                }
            })
            .collect();
        vec![
            compact,
            serde_json::to_string_pretty(value).unwrap(),
            escaped,
        ]
    }

    /// `diff_texts` on every text of two values gives what `diff_values` gives on their trees.
    fn assert_texts_diff_as_trees(before: Option<&Value>, after: Option<&Value>) {
        let mut expected = Vec::new();
        diff_values("/spec", before, after, &mut expected);
        let before_texts = before.map_or(vec![None], |value| {
            texts_of(value).into_iter().map(Some).collect()
        });
        let after_texts = after.map_or(vec![None], |value| {
            texts_of(value).into_iter().map(Some).collect()
        });
        for before_text in &before_texts {
            for after_text in &after_texts {
                let mut found = Vec::new();
                diff_texts(
                    "/spec",
                    before_text.as_deref(),
                    after_text.as_deref(),
                    &mut found,
                    0,
                )
                .expect("valid JSON texts");
                assert_eq!(found, expected, "{before_text:?} -> {after_text:?}");
            }
        }
    }

    #[test]
    fn texts_diff_as_their_trees_on_every_fixture_object_and_its_edits() {
        let objects: Vec<Value> = crate::decode::fixtures::nested_values()
            .into_iter()
            .filter(Value::is_object)
            .collect();
        assert!(objects.len() > 200, "fixture objects: {}", objects.len());
        let mut changed = 0;
        for (index, object) in objects.iter().enumerate() {
            // The next object (another shape), and edits of this one: a member dropped, a member
            // added, each member's value replaced by `null`, by `1.0` and by another of its type.
            let mut others = vec![objects[(index + 1) % objects.len()].clone()];
            let map = object.as_object().unwrap();
            for key in map.keys().take(8) {
                let mut edit = map.clone();
                edit.remove(key);
                others.push(Value::Object(edit));
                for replacement in [Value::Null, json!(1.0), json!(1), json!("x"), json!([])] {
                    let mut edit = map.clone();
                    edit.insert(key.clone(), replacement);
                    others.push(Value::Object(edit));
                }
            }
            let mut added = map.clone();
            added.insert("added/é~".to_string(), json!({"a": [1, null]}));
            others.push(Value::Object(added));
            for other in &others {
                assert_texts_diff_as_trees(Some(object), Some(other));
                changed += usize::from(object != other);
            }
        }
        assert!(changed > 1000, "pairs that differ: {changed}");
    }

    #[test]
    fn a_text_that_is_not_json_where_it_is_read_is_refused() {
        let mut out = Vec::new();
        for (before, after) in [
            (r#"{"a":1}"#, r#"{"a":}"#),
            ("[1,", "[1]"),
            ("1", "x"),
            ("[1]", "[2]]"),
            ("[1]", "[2] x"),
        ] {
            assert!(
                diff_texts("/spec", Some(before), Some(after), &mut out, 0).is_none(),
                "{before} -> {after}"
            );
        }
    }

    #[test]
    fn a_spec_text_that_does_not_parse_is_diffed_as_its_tree_and_nothing_else() {
        // The texts' diff finds `/spec/a` before it meets the bad text: dropped, and the trees
        // answer (the bad text reads as no spec).
        let mut out = Vec::new();
        spec_changes(r#"{"a":1,"b":{"x":1}}"#, r#"{"a":2,"b":{"x":}}"#, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].path, "/spec");
        assert_eq!(out[0].before, Some(json!({"a": 1, "b": {"x": 1}})));
        assert_eq!(out[0].after, None);
        // No spec, then one: the whole spec is the change, from nothing (not from `null`).
        let mut out = Vec::new();
        spec_changes("null", r#"{"a":1}"#, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            (out[0].before.clone(), out[0].after.clone()),
            (None, Some(json!({"a": 1})))
        );
    }

    #[test]
    fn a_repeated_member_is_its_last_value_and_many_members_are_walked_in_order() {
        assert_texts_diff_as_trees_of(r#"{"a":1,"a":2,"b":0}"#, r#"{"a":2,"b":0}"#, 0);
        assert_texts_diff_as_trees_of(r#"{"a":9,"a":2}"#, r#"{"a":1,"a":2,"a":3}"#, 1);
        assert_texts_diff_as_trees_of(r#"{"a":1,"\u0061":2}"#, r#"{"a":2}"#, 0);
        // Many repeats of one key among others: the last one stands (the sort must be stable).
        let repeated = |last: usize| {
            let mut members: Vec<String> = (0..999)
                .map(|i| format!(r#""{}":{i}"#, ["a", "b", "c"][i % 3]))
                .collect();
            members.push(format!(r#""a":{last}"#));
            format!("{{{}}}", members.join(","))
        };
        assert_texts_diff_as_trees_of(&repeated(5000), &repeated(5000), 0);
        assert_texts_diff_as_trees_of(&repeated(5000), &repeated(996), 1);
        // Thousands of members, one changed: found, in key order.
        let wide = |changed: usize| {
            let members: Vec<String> = (0..5_000)
                .map(|i| format!(r#""k{i}":{}"#, i + usize::from(i == changed)))
                .collect();
            format!("{{{}}}", members.join(","))
        };
        assert_texts_diff_as_trees_of(&wide(10), &wide(4_000), 2);
    }

    /// [`diff_texts`] against [`diff_values`] on two texts, and the number of changes.
    fn assert_texts_diff_as_trees_of(before: &str, after: &str, changes: usize) {
        let mut expected = Vec::new();
        let trees: (Value, Value) = (
            serde_json::from_str(before).unwrap(),
            serde_json::from_str(after).unwrap(),
        );
        diff_values("/spec", Some(&trees.0), Some(&trees.1), &mut expected);
        let mut found = Vec::new();
        diff_texts("/spec", Some(before), Some(after), &mut found, 0).unwrap();
        assert_eq!(found, expected, "{before} -> {after}");
        assert_eq!(found.len(), changes, "{found:?}");
    }

    #[test]
    fn text_nested_deeper_than_the_parser_goes_is_left_to_the_trees() {
        let nested = |leaf: &str| format!("{}{leaf}{}", "[".repeat(3_000), "]".repeat(3_000));
        let mut out = Vec::new();
        assert!(diff_texts("/spec", Some(&nested("1")), Some(&nested("2")), &mut out, 0).is_none());
        // As the trees answer: neither parses, both are no spec, nothing changed.
        spec_changes(&nested("1"), &nested("2"), &mut out);
        assert!(out.is_empty(), "{out:?}");
        // Within the limit, the texts answer.
        let shallow = |leaf: &str| format!("{}{leaf}{}", "[".repeat(100), "]".repeat(100));
        assert_texts_diff_as_trees_of(&shallow("1"), &shallow("2"), 1);
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0i64..3).prop_map(Value::from),
            Just(json!(1.0)),
            Just(json!(-0.5)),
            prop::sample::select(vec!["", "a", "é", "a\"b", "x/y~z"]).prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(vec!["a", "b", "c/d", "e~f", "é", "\"q\""])
                        .prop_map(str::to_string),
                    inner,
                    0..4
                )
                .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn texts_diff_as_their_trees(
            before in proptest::option::of(json_value()),
            after in proptest::option::of(json_value()),
        ) {
            assert_texts_diff_as_trees(before.as_ref(), after.as_ref());
        }
    }

    #[test]
    fn escapes_pointer_segments() {
        assert_eq!(
            push_pointer("/metadata/annotations", "serving.knative.dev/creator"),
            "/metadata/annotations/serving.knative.dev~1creator"
        );
        assert_eq!(pointer_segments("/a~1b/c~0d"), ["a/b", "c~d"]);
    }

    #[test]
    fn long_values_are_cut() {
        let value = bounded(&json!("x".repeat(1000)));
        assert!(value.as_str().unwrap().len() < 400);
    }
}
