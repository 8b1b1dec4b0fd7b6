//! The string functions done by `strings`: the same results and errors as the `cel` crate's
//! strings extension for every input (a differential test), and their work charged before it
//! is done (the re-review's inputs).

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::objects::Value;

use crate::bind::sample_view;
use crate::budget::spent;
use crate::strings::work_on_this_thread;
use crate::{Bindings, EvalError, Expression, Fields, Returns, BUDGET};

/// `source` evaluated by the `cel` crate itself, uninstrumented, in the environment the crate
/// compiles expressions in.
fn by_cel(source: &str) -> Result<Value, String> {
    let program = cel::Program::compile(source).map_err(|error| error.to_string())?;
    let context = cel::Context::with_env(Arc::clone(crate::env()));
    program.execute(&context).map_err(|error| error.to_string())
}

/// `source` evaluated as drift-cel evaluates a rule: checked for its bounds, instrumented,
/// charged (without the check of its result's type, so that any value can be compared).
fn by_drift_cel(source: &str) -> Result<Value, String> {
    let program = crate::check::parse(source).map_err(|error| error.to_string())?;
    let root = program.expression();
    let expression = Expression {
        source: Arc::from(source),
        root: Arc::new(crate::instrument::instrumented(root)),
        returns: Returns::Bool,
        names_old_object: false,
        object_fields: Fields::default(),
        old_object_fields: Fields::default(),
        patterns: Arc::default(),
    };
    match expression.evaluate(&Bindings::sample()) {
        Ok(value) => Ok(value),
        Err(EvalError::Evaluation(message)) => Err(message),
        Err(EvalError::Budget) => Err("budget".to_string()),
    }
}

fn quoted(text: &str) -> String {
    format!("'{text}'")
}

#[test]
fn the_string_functions_answer_as_cel_does_for_every_input() {
    let texts = [
        "",
        "a",
        "abc",
        "aaaa",
        "hello mellow",
        "bananananana",
        "ta©o©αT",
        "ααα",
        "a©a©a",
        "\u{1f600}x\u{1f600}",
        "a,b,,c,",
    ];
    let needles = [
        "",
        "a",
        "aa",
        "na",
        "nana",
        "ello",
        "©",
        "©α",
        "α",
        "\u{1f600}",
        "x\u{1f600}",
        ",",
        "zz",
        "abcd",
        "bananananana!",
    ];
    let mut sources = Vec::new();
    for text in texts {
        let length = i64::try_from(text.chars().count()).unwrap();
        let t = quoted(text);
        for needle in needles {
            let n = quoted(needle);
            sources.push(format!("{t}.indexOf({n})"));
            sources.push(format!("{t}.lastIndexOf({n})"));
            sources.push(format!("{t}.split({n})"));
            sources.push(format!("{t}.split({n}).join({n})"));
            sources.push(format!("[{t}, {n}, {t}].join({n})"));
            for to in ["", "-", "©©", "xyz"] {
                sources.push(format!("{t}.replace({n}, {})", quoted(to)));
                for count in -2..=length + 3 {
                    sources.push(format!("{t}.replace({n}, {}, {count})", quoted(to)));
                }
            }
            for offset in -1..=length + 1 {
                sources.push(format!("{t}.indexOf({n}, {offset})"));
                sources.push(format!("{t}.lastIndexOf({n}, {offset})"));
            }
            for count in -2..=length + 3 {
                sources.push(format!("{t}.split({n}, {count})"));
            }
        }
    }
    // Operands no overload takes, and the functions called as globals.
    sources.extend(
        [
            "'abc'.indexOf(1)",
            "'abc'.indexOf('a', 'b')",
            "'abc'.indexOf('a', 1.0)",
            "'abc'.indexOf()",
            "'abc'.indexOf('a', 1, 2)",
            "(1).indexOf('a')",
            "b'abc'.lastIndexOf(b'a')",
            "'abc'.lastIndexOf(null)",
            "'abc'.replace('a')",
            "'abc'.replace('a', 1)",
            "'abc'.replace('a', 'b', 'c')",
            "'abc'.replace('a', 'b', 1u)",
            "['a'].replace('a', 'b')",
            "'abc'.split()",
            "'abc'.split('a', 1, 2)",
            "'abc'.split(1)",
            "{'a': 1}.split('a')",
            "indexOf('abc', 'b')",
            "lastIndexOf('abc', 'b')",
            "replace('abc', 'b', 'c')",
            "split('abc', 'b')",
            "'abc'.split('b')[1].indexOf('c') + 'x'.lastIndexOf('x', 0)",
            "['hello', 'mellow'].join()",
            "['hello', 'mellow'].join(' ')",
            "[].join()",
            "[].join('-')",
            "['a'].join('-')",
            "['a', '', 'b©'].join('©α')",
            "['hello', 1].join()",
            "['hello', 1].join('-')",
            "[1, 'a'].join('-')",
            "['a'].join(1)",
            "['a'].join('a', 'b')",
            "'abc'.join()",
            "{'a': 1}.join()",
            "'a,b'.split(',').join(';')",
            "join(['a'], 'b')",
            "[['a']].join()",
        ]
        .map(str::to_string),
    );
    let mut differ = Vec::new();
    for source in &sources {
        let (cel, ours) = (by_cel(source), by_drift_cel(source));
        if cel != ours {
            differ.push(format!("{source}: cel {cel:?}, drift-cel {ours:?}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        sources.len(),
        differ.join("\n")
    );
    // The handlers answered (the rewrite reached them), not cel's own functions.
    assert!(work_on_this_thread().0 > 10_000);
}

/// Evaluates `source` on a ConfigMap-like object whose spec is `spec`.
fn evaluate(spec: &serde_json::Value, source: &str) -> Result<bool, EvalError> {
    let empty = BTreeMap::new();
    let view = sample_view("ConfigMap", spec, &empty);
    let bindings = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
    Expression::compile(source, Returns::Bool)
        .unwrap()
        .holds(&bindings)
}

#[test]
fn index_of_a_long_needle_is_linear_and_charged_by_the_texts_length() {
    // The re-review's input, scaled down for a debug build: cel's naive search compares every
    // position with the whole needle (12.3 s at 750,000 and 250,000 characters).
    let text = "a".repeat(120_000);
    let needle = format!("{}b", "a".repeat(39_999));
    let spec = serde_json::json!({ "text": text, "needle": needle });
    let (calls, _) = work_on_this_thread();
    for source in [
        "object.spec.text.indexOf(object.spec.needle) == -1",
        "object.spec.text.lastIndexOf(object.spec.needle) == -1",
        "object.spec.text.indexOf(object.spec.needle, 1) == -1",
        "object.spec.text.lastIndexOf(object.spec.needle, 119999) == -1",
        "(object.spec.text + 'b').indexOf(object.spec.needle) == 80001",
        "('b' + object.spec.text).lastIndexOf('b' + object.spec.text.substring(1, 100)) == 0",
    ] {
        assert_eq!(evaluate(&spec, source), Ok(true), "{source}");
        // Charged for the bytes it searched (one unit per 16), and far from the budget.
        let searched = (120_000 + 40_000) / 16;
        assert!(
            spent() >= searched && spent() < BUDGET / 2,
            "{source}: {}",
            spent()
        );
    }
    // Done by the linear handlers.
    assert_eq!(work_on_this_thread().0 - calls, 6);
}

#[test]
fn a_replace_too_big_is_stopped_before_it_is_built() {
    // The re-review's `small.replace('', text)`, scaled: 1,000 insertions of 10 KB, 10 MB that
    // cel builds before anything can charge them.
    let spec = serde_json::json!({ "small": "x".repeat(1_000), "text": "y".repeat(10_000) });
    let (_, built) = work_on_this_thread();
    for source in [
        "object.spec.small.replace('', object.spec.text) == ''",
        "object.spec.small.replace('x', object.spec.text, 500) == ''",
        "object.spec.text.replace('y', object.spec.small) == ''",
    ] {
        assert_eq!(evaluate(&spec, source), Err(EvalError::Budget), "{source}");
    }
    assert_eq!(work_on_this_thread().1, built, "nothing was built");
    // What fits is built, and charged for what it built.
    assert_eq!(
        evaluate(
            &spec,
            "object.spec.small.replace('x', 'ab', 10).size() == 1010"
        ),
        Ok(true)
    );
    assert_eq!(work_on_this_thread().1, built + 1_010);
    // Many occurrences, each a step: an empty `from` over 700 KB (1 unit per 8).
    let spec = serde_json::json!({ "text": "a".repeat(700_000) });
    assert_eq!(
        evaluate(&spec, "object.spec.text.replace('', '') == ''"),
        Err(EvalError::Budget)
    );
}

#[test]
fn a_join_too_big_is_stopped_before_it_is_built() {
    // A long separator between many elements is their product: 2,000 elements of a list in
    // the object joined by 10 KB, 20 MB that cel builds before anything can charge them.
    let spec = serde_json::json!({ "items": vec!["x"; 2_000], "sep": "y".repeat(10_000) });
    let (_, built) = work_on_this_thread();
    assert_eq!(
        evaluate(&spec, "object.spec.items.join(object.spec.sep) == ''"),
        Err(EvalError::Budget)
    );
    assert_eq!(work_on_this_thread().1, built, "nothing was built");
    assert_eq!(
        evaluate(&spec, "object.spec.items.join('').size() == 2000"),
        Ok(true)
    );
}

#[test]
fn a_split_is_charged_for_each_part_before_it_is_built() {
    // The re-review's `split('')` and `split('a')` of 1 MB, scaled: one part per byte.
    let spec = serde_json::json!({ "text": "a".repeat(200_000) });
    let (_, built) = work_on_this_thread();
    for source in [
        "object.spec.text.split('').size() > 0",
        "object.spec.text.split('a').size() > 0",
        "object.spec.text.split('', 100000).size() > 0",
    ] {
        assert_eq!(evaluate(&spec, source), Err(EvalError::Budget), "{source}");
    }
    assert_eq!(work_on_this_thread().1, built, "nothing was built");
    // A few parts of a long text: the bytes and the parts.
    assert_eq!(
        evaluate(&spec, "object.spec.text.split('', 3).size() == 3"),
        Ok(true)
    );
    assert!(spent() >= 200_000 / 16 + 3 * 3, "{}", spent());
}
