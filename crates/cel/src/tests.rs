//! Tests of the crate through its API: an object as a condition sees it, compile errors and
//! where they point, and the budget that stops expensive evaluations.

use std::collections::BTreeMap;

use crate::bind::sample_view;
use crate::{Bindings, EvalError, Expression, Fields, ObjectView, Returns, MAX_DEPTH};

fn object_with(spec: &serde_json::Value) -> bool {
    let labels = BTreeMap::from([("app".to_string(), "shop".to_string())]);
    let view = sample_view("Service", spec, &labels);
    let bindings = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
    let expression = Expression::compile(
        "object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))",
        Returns::Bool,
    )
    .unwrap();
    expression.holds(&bindings).unwrap()
}

#[test]
fn a_condition_sees_the_object_with_kubernetes_field_names() {
    let good = serde_json::json!({"template": {"spec": {"containers": [{"image": "a:1"}]}}});
    let bad = serde_json::json!({"template": {"spec": {"containers": [{"image": "a:latest"}]}}});
    assert!(object_with(&good));
    assert!(!object_with(&bad));
}

#[test]
fn integers_stay_int() {
    let spec = serde_json::json!({"replicas": 3});
    let empty = BTreeMap::new();
    let view = ObjectView {
        namespace: "",
        ..sample_view("Deployment", &spec, &empty)
    };
    let bindings = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
    let holds = |source: &str| {
        Expression::compile(source, Returns::Bool)
            .unwrap()
            .holds(&bindings)
    };
    assert_eq!(holds("object.spec.replicas + 1 == 4"), Ok(true));
    assert_eq!(holds("!has(object.metadata.namespace)"), Ok(true));
    assert_eq!(holds("object.metadata.labels.size() == 0"), Ok(true));
    // `matches` with a literal pattern (compiled once) and with a computed one.
    assert_eq!(holds("object.metadata.name.matches('^d$')"), Ok(true));
    assert_eq!(holds("matches(object.metadata.name, '^x')"), Ok(false));
    assert_eq!(holds("object.metadata.name.matches('^' + 'd')"), Ok(true));
    assert!(matches!(
        holds("object.spec.missing == 1"),
        Err(EvalError::Evaluation(_))
    ));
}

#[test]
fn compile_errors_say_where() {
    let error = Expression::compile("object.spec.x ==", Returns::Bool).unwrap_err();
    assert_eq!(error.line, 1, "{error}");
    // Syntax errors point at the offending token (1-based), as the other errors do.
    let error = Expression::compile("object.spec.x == == 1", Returns::Bool).unwrap_err();
    assert_eq!((error.line, error.column), (1, 18), "{error}");
    let error = Expression::compile("object.spec.a == 1 &&\n  objct.spec.b == 2", Returns::Bool)
        .unwrap_err();
    assert_eq!((error.line, error.column), (2, 3), "{error}");
    assert!(error.message.contains("objct"), "{error}");
    let error = Expression::compile("size(object.spec)", Returns::Bool).unwrap_err();
    assert!(error.message.contains("returns an int"), "{error}");
    // A field read as a condition: the sample object shows it is a string.
    let error = Expression::compile("object.metadata.name", Returns::Bool).unwrap_err();
    assert!(
        error
            .message
            .contains("returns a string (on a sample object)"),
        "{error}"
    );
    let error =
        Expression::compile("object.spec.containers.all(c, c.image)", Returns::String).unwrap_err();
    assert!(error.message.contains("returns a bool"), "{error}");
    // Variables bound by a macro are in scope in its body only.
    let error =
        Expression::compile("object.spec.xs.all(x, x > 0) && x == 1", Returns::Bool).unwrap_err();
    assert!(error.message.contains("'x'"), "{error}");
    let error =
        Expression::compile("object.metadata.name.matches('a(')", Returns::Bool).unwrap_err();
    assert!(
        error.message.contains("not a valid regular expression"),
        "{error}"
    );
    let deep = format!("{}true{}", "(".repeat(200), ")".repeat(200));
    let error = Expression::compile(&deep, Returns::Bool).unwrap_err();
    assert!(error.message.contains("nest"), "{error}");
}

/// Every source, evaluated on an object with this spec, is stopped by the budget.
#[track_caller]
fn assert_stopped(spec: &serde_json::Value, sources: &[&str]) {
    let empty = BTreeMap::new();
    let view = sample_view("ConfigMap", spec, &empty);
    let bindings = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
    for source in sources {
        let expression = Expression::compile(source, Returns::Bool).unwrap();
        assert_eq!(
            expression.holds(&bindings),
            Err(EvalError::Budget),
            "{source}"
        );
    }
}

#[test]
fn a_huge_comprehension_is_stopped_by_the_budget() {
    let items: Vec<serde_json::Value> = (0..400).map(serde_json::Value::from).collect();
    let spec = serde_json::json!({ "items": items });
    let empty = BTreeMap::new();
    let view = sample_view("ConfigMap", &spec, &empty);
    let bindings = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
    let nested = Expression::compile(
        "object.spec.items.all(a, object.spec.items.all(b, object.spec.items.all(c, a + b + c >= 0)))",
        Returns::Bool,
    )
    .unwrap();
    assert_eq!(nested.holds(&bindings), Err(EvalError::Budget));
    let growing = Expression::compile(
        "object.spec.items.map(a, object.spec.items + object.spec.items).size() > 0",
        Returns::Bool,
    )
    .unwrap();
    assert_eq!(growing.holds(&bindings), Err(EvalError::Budget));
    // Work that grows with an operand: `in` over the whole list on every iteration.
    let scanning = Expression::compile(
        "object.spec.items.all(a, a in object.spec.items)",
        Returns::Bool,
    )
    .unwrap();
    let small = Expression::compile("[1, 2, 3].all(a, a in [1, 2, 3])", Returns::Bool).unwrap();
    assert_eq!(small.holds(&bindings), Ok(true));
    let long: Vec<serde_json::Value> = (0..5000).map(serde_json::Value::from).collect();
    let long = serde_json::json!({ "items": long });
    let long_view = ObjectView {
        spec: &long,
        ..view
    };
    let long_bindings = Bindings::new(&long_view, None, &Fields::everything(), &Fields::default());
    assert_eq!(scanning.holds(&long_bindings), Err(EvalError::Budget));
    // Copies and comparisons of large values are charged for their whole size: a one-key
    // map over a large list compared, or put in a list literal, on every iteration.
    let maps: Vec<serde_json::Value> = (0..3000)
        .map(|index| serde_json::json!({"k": index}))
        .collect();
    let deep = serde_json::json!({ "xs": (0..400).collect::<Vec<u32>>(), "t": {"a": maps} });
    assert_stopped(
        &deep,
        &[
            "object.spec.xs.all(x, object.spec.t == object.spec.t)",
            "object.spec.xs.all(x, [object.spec.t].size() == 1)",
            "object.spec.xs.map(x, object.spec.t).size() > 0",
            "object.spec.xs.all(x, {'a': object.spec.t}.size() == 1)",
        ],
    );
    // Scans of a long string are charged by its length.
    let text = "x".repeat(200_000);
    let texts = serde_json::json!({ "xs": (0..400).collect::<Vec<u32>>(), "s": text });
    assert_stopped(
        &texts,
        &[
            "object.spec.xs.all(x, object.spec.s.charAt(0) == 'x')",
            "object.spec.xs.all(x, size(object.spec.s) > 0)",
            "object.spec.xs.all(x, object.spec.s.startsWith(object.spec.s))",
            "object.spec.xs.all(x, object.spec.s > 'a')",
            "object.spec.xs.all(x, !(object.spec.s in {'a': 1}))",
        ],
    );
    // `map` and `filter` over a long list stay linear (built in place) and within budget.
    let linear = Expression::compile(
        "object.spec.items.map(x, x).size() == 5000 && object.spec.items.filter(x, x >= 0).size() == 5000",
        Returns::Bool,
    )
    .unwrap();
    assert_eq!(linear.holds(&long_bindings), Ok(true));
    // The same shape over a small list is fine: the budget is per evaluation.
    let small = Expression::compile(
        "[1, 2, 3].all(a, [1, 2, 3].all(b, a + b > 0))",
        Returns::Bool,
    )
    .unwrap();
    assert_eq!(small.holds(&bindings), Ok(true));
}

/// The deepest expression accepted evaluates on a small (2 MiB) stack even in a debug
/// build: the depth bound keeps evaluation far from the writer's 64 MiB.
#[test]
fn the_deepest_accepted_expression_evaluates_on_a_small_stack() {
    let depth = MAX_DEPTH - 4;
    let source = format!("{}true{}", "(!".repeat(depth / 2), ")".repeat(depth / 2));
    let expression = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || Expression::compile(&source, Returns::Bool))
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    let holds = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let empty = BTreeMap::new();
            let view = sample_view("ConfigMap", &serde_json::Value::Null, &empty);
            let bindings = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
            expression.holds(&bindings)
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(holds, Ok(true));
}

/// The hostile pattern of issue 27: its program is far over the dynamic limit.
const HOSTILE_PATTERN: &str = r"^(((\w{1,50}){1,50}){1,20})$";

/// An object whose annotations hold `values` under keys `a0000`, `a0001`, ...
fn annotated(values: impl IntoIterator<Item = String>) -> BTreeMap<String, String> {
    values
        .into_iter()
        .enumerate()
        .map(|(index, value)| (format!("a{index:04}"), value))
        .collect()
}

fn evaluate_on_annotations(
    source: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<bool, EvalError> {
    let labels = BTreeMap::new();
    let annotations = drift_model::Pairs::from(annotations);
    let view = ObjectView {
        annotations: &annotations,
        ..sample_view("Service", &serde_json::Value::Null, &labels)
    };
    let bindings = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
    Expression::compile(source, Returns::Bool)
        .unwrap()
        .holds(&bindings)
}

const KEYS_MATCH_VALUES: &str =
    "object.metadata.annotations.all(k, k.matches(object.metadata.annotations[k]))";

#[test]
fn a_dynamic_pattern_too_big_is_refused_once_and_then_served_from_the_cache() {
    // Unique to this test: the cache of dynamic patterns is shared by the whole process.
    let hostile = format!("{HOSTILE_PATTERN}|unique-to-the-refusal-test");
    let one = annotated([hostile.clone()]);
    let before = crate::patterns::compiles_on_this_thread();
    let first = evaluate_on_annotations(KEYS_MATCH_VALUES, &one);
    let Err(EvalError::Evaluation(message)) = &first else {
        panic!("refused with a clear error, got {first:?}");
    };
    assert!(message.contains("refused"), "{message}");
    assert!(message.contains("bytes a pattern may take"), "{message}");
    assert_eq!(crate::patterns::compiles_on_this_thread(), before + 1);
    // The same pattern again, in this evaluation and the next: refused from the cache.
    let again = annotated([hostile.clone(), hostile.clone(), hostile]);
    assert!(matches!(
        evaluate_on_annotations(KEYS_MATCH_VALUES, &again),
        Err(EvalError::Evaluation(_))
    ));
    assert_eq!(crate::patterns::compiles_on_this_thread(), before + 1);
}

#[test]
fn many_hostile_dynamic_patterns_are_stopped_by_the_budget() {
    // 800 annotations of the same hostile pattern: charged on every call (cached or not), so
    // the budget stops the rule.
    let same = annotated((0..800).map(|_| HOSTILE_PATTERN.to_string()));
    assert_eq!(
        evaluate_on_annotations(KEYS_MATCH_VALUES, &same),
        Err(EvalError::Budget)
    );
    // 800 distinct ones: the budget stops the evaluation after a few compiles, not 800.
    let distinct = annotated((0..800).map(|index| format!("{HOSTILE_PATTERN}|distinct{index}")));
    let before = crate::patterns::compiles_on_this_thread();
    assert_eq!(
        evaluate_on_annotations(KEYS_MATCH_VALUES, &distinct),
        Err(EvalError::Budget)
    );
    let compiled = crate::patterns::compiles_on_this_thread() - before;
    assert!(
        (1..=30).contains(&compiled),
        "{compiled} compiles before the budget stopped the rule"
    );
}

#[test]
fn a_dynamic_pattern_is_charged_by_its_length() {
    let cost = |pattern: String| {
        let values = annotated([pattern]);
        // The key `a0000` does not match either pattern: both run to the end.
        assert_eq!(
            evaluate_on_annotations(KEYS_MATCH_VALUES, &values),
            Ok(false)
        );
        crate::budget::spent()
    };
    let short = cost("^z".to_string());
    let long = cost(format!("^z{}", "(?:y)?".repeat(300)));
    assert!(long > short + 1_800, "short {short}, long {long}");
    // A pattern over the length cap is refused without compiling.
    let before = crate::patterns::compiles_on_this_thread();
    let values = annotated(["z".repeat(crate::patterns::MAX_DYNAMIC_PATTERN_BYTES + 1)]);
    let refused = evaluate_on_annotations(KEYS_MATCH_VALUES, &values);
    assert!(
        matches!(&refused, Err(EvalError::Evaluation(message)) if message.contains("at most")),
        "{refused:?}"
    );
    assert_eq!(crate::patterns::compiles_on_this_thread(), before);
}

#[test]
fn a_heavy_literal_pattern_on_a_long_text_is_charged_by_text_times_program() {
    // A Unicode word boundary over non-ASCII text makes the lazy DFA give up: the search is
    // about the text's length times the program's size (hundreds of ms on 200 KB unchecked).
    let text = "ab_\u{dc} ".repeat(10_000);
    let spec = serde_json::json!({ "s": text });
    let empty = BTreeMap::new();
    let view = sample_view("ConfigMap", &spec, &empty);
    let bindings = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
    let heavy = Expression::compile(
        r"object.spec.s.matches('(\\b\\w+\\b\\s?){1,30}x')",
        Returns::Bool,
    )
    .unwrap();
    assert_eq!(heavy.holds(&bindings), Err(EvalError::Budget));
    // A small program on the same text stays well within the budget.
    let light = Expression::compile("object.spec.s.matches('^ab')", Returns::Bool).unwrap();
    assert_eq!(light.holds(&bindings), Ok(true));
    assert!(
        crate::budget::spent() < crate::BUDGET / 4,
        "{}",
        crate::budget::spent()
    );
}

thread_local! {
    /// The fake backstop clock of [`stepping_clock`]: microseconds, and the step per reading.
    static FAKE_NOW: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static FAKE_STEP: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A clock that moves `FAKE_STEP` microseconds at every reading: an evaluation that looks at it
/// often enough runs "slowly" without taking any time.
fn stepping_clock() -> u64 {
    let now = FAKE_NOW.with(|now| now.get() + FAKE_STEP.with(std::cell::Cell::get));
    FAKE_NOW.with(|cell| cell.set(now));
    now
}

#[test]
fn an_evaluation_past_its_wall_clock_backstop_ends_as_a_budget_stop() {
    let spec = serde_json::json!({"items": (0..200).map(|i| format!("v{i}")).collect::<Vec<_>>()});
    let empty = BTreeMap::new();
    let view = sample_view("ConfigMap", &spec, &empty);
    let bindings = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
    // Cheap by cost: a few hundred units of a budget of 100,000.
    let search = Expression::compile("'abc'.matches('^a')", Returns::Bool).unwrap();
    let loop_over = Expression::compile(
        "object.spec.items.all(i, i.size() > 0) && object.spec.items.map(i, i + 'x').size() == 200",
        Returns::Bool,
    )
    .unwrap();
    // No clock (check, replay): cost alone decides.
    crate::set_backstop_clock(None);
    assert_eq!(search.holds(&bindings), Ok(true));
    assert_eq!(loop_over.holds(&bindings), Ok(true));
    // A clock that stands still: the backstop is never reached.
    FAKE_STEP.with(|step| step.set(0));
    crate::set_backstop_clock(Some(stepping_clock));
    assert_eq!(search.holds(&bindings), Ok(true));
    assert_eq!(loop_over.holds(&bindings), Ok(true));
    // A clock that runs past the backstop between the readings around one search, or within
    // the periodic readings of a loop's charges: the evaluation ends as a budget stop.
    FAKE_STEP.with(|step| step.set(crate::BACKSTOP_MICROS * 6 / 10));
    assert_eq!(search.holds(&bindings), Err(EvalError::Budget));
    FAKE_STEP.with(|step| step.set(crate::BACKSTOP_MICROS + 1));
    assert_eq!(loop_over.holds(&bindings), Err(EvalError::Budget));
    // The next evaluation starts with a new deadline.
    FAKE_STEP.with(|step| step.set(0));
    assert_eq!(search.holds(&bindings), Ok(true));
    crate::set_backstop_clock(None);
}

#[test]
fn a_literal_pattern_is_never_compiled_while_an_event_is_judged() {
    // Past the 1,024 literal patterns the process-wide cache held (reloads add rules), every
    // new literal pattern was compiled on every call, uncharged.
    let rules: Vec<Expression> = (0..1_100)
        .map(|i| {
            Expression::compile(
                &format!("object.metadata.name.matches('^literal-{i}$')"),
                Returns::Bool,
            )
            .unwrap()
        })
        .collect();
    let spec = serde_json::json!({});
    let empty = BTreeMap::new();
    let view = sample_view("ConfigMap", &spec, &empty);
    let bindings = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
    let before = crate::patterns::compiles_on_this_thread();
    for rule in rules.iter().rev().chain(&rules) {
        assert_eq!(rule.holds(&bindings), Ok(false));
    }
    assert_eq!(crate::patterns::compiles_on_this_thread(), before);
}

mod strings;
