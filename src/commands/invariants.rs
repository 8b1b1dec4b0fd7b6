//! `drift-sentinel invariants test FILE --against DIR`: team invariants as unit tests. Every rule
//! is judged on every object it selects, as the service judges it, and each (rule, object) pair
//! prints `held`, `broken` (with the rule's message) or `error`. An object may say what it
//! expects with the annotation `invariants.drift-sentinel.dev/expect: "rule-a=broken,
//! rule-b=held"`; then the exit code says whether every expectation was met.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use drift_core::classify::invariants::{judge_object, Verdict};

/// The annotation with an object's expected verdicts.
pub(crate) const EXPECT_ANNOTATION: &str = "invariants.drift-sentinel.dev/expect";

/// One (rule, object) result.
struct Outcome {
    rule: String,
    object: String,
    origin: String,
    verdict: &'static str,
    detail: Option<String>,
    expected: Option<String>,
}

impl Outcome {
    fn unmet(&self) -> bool {
        self.expected
            .as_deref()
            .is_some_and(|expected| expected != self.verdict)
    }
}

/// Why an object's expectation annotation cannot be read.
#[derive(Debug, thiserror::Error)]
enum ExpectationError {
    /// A part without `=`.
    #[error("{part:?} is not rule=held|broken")]
    NotAPair {
        /// The part, trimmed.
        part: String,
    },
    /// A verdict other than `held` or `broken`.
    #[error("{part:?}: the expected verdict is held or broken, not {verdict:?}")]
    Verdict {
        /// The part, trimmed.
        part: String,
        /// The verdict, trimmed.
        verdict: String,
    },
}

impl ExpectationError {
    /// A stable, bounded label.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the label a count of these failures would use; tested"
        )
    )]
    fn kind(&self) -> &'static str {
        match self {
            ExpectationError::NotAPair { .. } => "not_a_pair",
            ExpectationError::Verdict { .. } => "verdict",
        }
    }
}

/// Parses `rule-a=broken, rule-b=held`.
fn expectations(text: &str) -> Result<BTreeMap<String, String>, ExpectationError> {
    let mut expected = BTreeMap::new();
    for part in text
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        let Some((rule, verdict)) = part.split_once('=') else {
            return Err(ExpectationError::NotAPair {
                part: part.to_string(),
            });
        };
        let verdict = verdict.trim();
        if !matches!(verdict, "held" | "broken") {
            return Err(ExpectationError::Verdict {
                part: part.to_string(),
                verdict: verdict.to_string(),
            });
        }
        expected.insert(rule.trim().to_string(), verdict.to_string());
    }
    Ok(expected)
}

/// `invariants test`: exit 0 when nothing is broken and nothing errs (or every expectation is
/// met), 1 when something is broken (an expectation is not met), 2 on bad input or an error.
pub fn test(file: &Path, against: &Path, cluster: &str, json: bool) -> ExitCode {
    let fail = |message: String| {
        eprintln!("drift-sentinel invariants test: {message}");
        ExitCode::from(2)
    };
    let rules = match drift_core::config::load_rules_file(file) {
        Ok(rules) => rules,
        Err(error) => return fail(error.to_string()),
    };
    let objects = match drift_core::manifest::load(against) {
        Ok(objects) => objects,
        Err(error) => return fail(error.to_string()),
    };
    if let Some((key, first, second)) = objects.duplicates().first() {
        return fail(format!(
            "{second}: {key} is already defined at {first}; give each object of a test its own name"
        ));
    }
    let mut outcomes = Vec::new();
    let mut named: std::collections::BTreeSet<String> = Default::default();
    for (key, document) in objects.iter() {
        let object = match crate::check::decode_object(key, &document.value) {
            Ok(object) => object,
            Err(source) => {
                let error = crate::check::Error::Invalid {
                    origin: document.origin.clone(),
                    source,
                };
                return fail(error.to_string());
            }
        };
        let expected = match object.annotations.get(EXPECT_ANNOTATION) {
            Some(text) => match expectations(text) {
                Ok(expected) => expected,
                Err(error) => {
                    return fail(format!(
                        "{}: annotation {EXPECT_ANNOTATION}: {error}",
                        document.origin
                    ))
                }
            },
            None => BTreeMap::new(),
        };
        for rule in expected.keys() {
            if !rules.iter().any(|known| &known.name == rule) {
                return fail(format!(
                    "{}: annotation {EXPECT_ANNOTATION} names rule {rule:?}, which {} does not define",
                    document.origin,
                    file.display()
                ));
            }
            named.insert(rule.clone());
        }
        for rule in &rules {
            let verdict = judge_object(rule, cluster, &object);
            let (verdict, detail) = match verdict {
                None => {
                    if let Some(wanted) = expected.get(&rule.name) {
                        // An expectation about a rule that does not select the object is a
                        // mistake in the test, not a pass.
                        outcomes.push(Outcome {
                            rule: rule.name.clone(),
                            object: key.reference(),
                            origin: document.origin.to_string(),
                            verdict: "unselected",
                            detail: Some("the rule's match does not select this object".into()),
                            expected: Some(wanted.clone()),
                        });
                    }
                    continue;
                }
                Some(Verdict::Held) => ("held", None),
                Some(Verdict::Broken(message)) => ("broken", Some(message)),
                Some(Verdict::Failed(error)) => ("error", Some(error.to_string())),
            };
            outcomes.push(Outcome {
                rule: rule.name.clone(),
                object: key.reference(),
                origin: document.origin.to_string(),
                verdict,
                detail,
                expected: expected.get(&rule.name).cloned(),
            });
        }
    }
    outcomes.sort_by(|a, b| (&a.rule, &a.object).cmp(&(&b.rule, &b.object)));
    let count = |verdict: &str| outcomes.iter().filter(|o| o.verdict == verdict).count();
    let (held, broken, errors) = (count("held"), count("broken"), count("error"));
    let with_expectations = !named.is_empty();
    let unmet = outcomes.iter().filter(|outcome| outcome.unmet()).count();
    let failed = if with_expectations {
        unmet > 0
    } else {
        broken > 0
    };
    let result = if errors > 0 {
        "error"
    } else if failed {
        "fail"
    } else {
        "pass"
    };
    if json {
        let results: Vec<serde_json::Value> = outcomes
            .iter()
            .map(|outcome| {
                serde_json::json!({
                    "rule": outcome.rule,
                    "object": outcome.object,
                    "origin": outcome.origin,
                    "verdict": outcome.verdict,
                    "detail": outcome.detail,
                    "expected": outcome.expected,
                    "met": outcome.expected.as_ref().map(|_| !outcome.unmet()),
                })
            })
            .collect();
        let body = serde_json::json!({
            "results": results,
            "summary": {"rules": rules.len(), "held": held, "broken": broken, "errors": errors,
                        "expectationsNotMet": unmet, "result": result},
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&body).unwrap_or_default()
        );
    } else {
        for outcome in &outcomes {
            let mut line = format!(
                "{:<7} {:<32} {}",
                outcome.verdict, outcome.rule, outcome.object
            );
            if let Some(detail) = &outcome.detail {
                line.push_str(&format!(": {}", detail.replace(['\n', '\r'], " ")));
            }
            if outcome.unmet() {
                line.push_str(&format!(
                    "  [expected {}; {}]",
                    outcome.expected.as_deref().unwrap_or_default(),
                    outcome.origin
                ));
            }
            println!("{line}");
        }
        // Rules that selected no object are named: a rule whose match is wrong tests nothing.
        for rule in &rules {
            if rule.names_old_object() {
                println!(
                    "{:<7} {:<32} names oldObject: judged on updates only, not on objects",
                    "-", rule.name
                );
            } else if !outcomes.iter().any(|outcome| outcome.rule == rule.name) {
                println!("{:<7} {:<32} selects no object", "-", rule.name);
            }
        }
        let plural = |count: usize, word: &str| {
            if count == 1 {
                format!("1 {word}")
            } else {
                format!("{count} {word}s")
            }
        };
        let mut summary = format!(
            "{}: {}, {held} held, {broken} broken, {}",
            result.to_uppercase(),
            plural(rules.len(), "rule"),
            plural(errors, "error")
        );
        if with_expectations {
            summary.push_str(&format!(", {unmet} expectations not met"));
        }
        println!("{summary}");
    }
    match result {
        "error" => ExitCode::from(2),
        "fail" => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_read_rule_verdict_pairs_and_say_what_is_wrong() {
        let expected = expectations(" a=held, b = broken ,").unwrap();
        assert_eq!(expected.get("a").map(String::as_str), Some("held"));
        assert_eq!(expected.get("b").map(String::as_str), Some("broken"));
        let error = expectations("a=held, b").unwrap_err();
        assert_eq!(error.kind(), "not_a_pair");
        assert_eq!(error.to_string(), r#""b" is not rule=held|broken"#);
        let error = expectations("a=passed").unwrap_err();
        assert_eq!(error.kind(), "verdict");
        assert_eq!(
            error.to_string(),
            r#""a=passed": the expected verdict is held or broken, not "passed""#
        );
    }
}
