//! `rules.invariants`: team invariants as CEL rules, and their compilation (with the key path
//! and the expression's line and column in every error). Also the stand-alone rules file that
//! `check --invariants` and `invariants test` read.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{de_opt_duration, Error};
use crate::classify::invariants::{Expression, Invariant, Message, Returns, Selector};
use drift_model::Severity;

/// Grace of a rule that sets none.
pub(super) const DEFAULT_INVARIANT_GRACE: Duration = Duration::from_secs(120);
/// Longest rule name (a metric label and part of a drift's identity).
const MAX_NAME: usize = 63;

/// One rule.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InvariantConfig {
    /// Unique name: lower-case letters, digits, `-`, `_` and `.`.
    pub name: String,
    /// Why the rule exists.
    #[serde(default)]
    pub description: String,
    /// Which objects it applies to.
    #[serde(default, rename = "match")]
    pub selector: MatchConfig,
    /// CEL: true when the object is fine. Variables: `object`, `oldObject`.
    pub expression: String,
    /// What a finding says.
    #[serde(default)]
    pub message: String,
    /// CEL string expression for the message (instead of `message`), as in Kubernetes'
    /// ValidatingAdmissionPolicy.
    #[serde(default)]
    pub message_expression: Option<String>,
    /// `info`, `warning` (the default) or `critical`.
    #[serde(default)]
    pub severity: Option<String>,
    /// How long the rule must stay broken before its drift fires (default 2m).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub grace: Option<Duration>,
    /// The fields (JSON pointers under `/spec`, `/data`, `/metadata/labels` or
    /// `/metadata/annotations`) a remediation `revert` of this rule's drifts puts back to their
    /// values before the change that broke the rule; without them its drifts are not reverted.
    #[serde(default)]
    pub revert_fields: Vec<String>,
}

/// `match:` of a rule. Every field narrows; globs (`*`) where it says so.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchConfig {
    /// `apiVersion` glob (`serving.knative.dev/*`).
    #[serde(default)]
    pub api_version: Option<String>,
    /// Kind glob.
    #[serde(default)]
    pub kind: Option<String>,
    /// Namespace globs.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Namespace globs left out.
    #[serde(default)]
    pub exclude_namespaces: Vec<String>,
    /// Labels an object must carry (exact values).
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Cluster name globs.
    #[serde(default)]
    pub clusters: Vec<String>,
}

/// Compiles rules; `path` is where they are (`rules.invariants`). The first error names the
/// key path and, for an expression, its line and column.
pub(super) fn compile(rules: &[InvariantConfig], path: &str) -> Result<Vec<Invariant>, Error> {
    if rules.is_empty() {
        return Ok(Vec::new());
    }
    let compiled = compile_on_large_stack(|| compile_all(rules, path))
        .map_err(|error| Error::invalid(path, format!("cannot compile the rules: {error}")))?;
    compiled
}

fn compile_all(rules: &[InvariantConfig], path: &str) -> Result<Vec<Invariant>, Error> {
    let mut seen = std::collections::BTreeSet::new();
    let mut compiled = Vec::with_capacity(rules.len());
    for (index, rule) in rules.iter().enumerate() {
        let at = format!("{path}[{index}]");
        if !valid_name(&rule.name) {
            return Err(Error::invalid(
                format!("{at}.name"),
                format!(
                    "must be 1 to {MAX_NAME} characters of a-z, 0-9, '-', '_' and '.', starting \
                     with a letter or digit"
                ),
            ));
        }
        if !seen.insert(rule.name.as_str()) {
            return Err(Error::invalid(
                format!("{at}.name"),
                format!("another rule is named {:?}", rule.name),
            ));
        }
        let severity = match rule.severity.as_deref() {
            None => Severity::Warning,
            Some(text) => Severity::parse(text).ok_or_else(|| {
                Error::invalid(
                    format!("{at}.severity"),
                    format!(
                        "unknown severity {text:?}; use one of {}",
                        drift_model::SEVERITIES.join(", ")
                    ),
                )
            })?,
        };
        let condition = Expression::compile(&rule.expression, Returns::Bool)
            .map_err(|error| Error::invalid(format!("{at}.expression"), error.to_string()))?;
        let message = match &rule.message_expression {
            Some(source) => {
                if !rule.message.is_empty() {
                    return Err(Error::invalid(
                        format!("{at}.messageExpression"),
                        "set either message or messageExpression, not both",
                    ));
                }
                Message::Expression(Expression::compile(source, Returns::String).map_err(
                    |error| Error::invalid(format!("{at}.messageExpression"), error.to_string()),
                )?)
            }
            None => Message::Text(rule.message.clone()),
        };
        for (position, field) in rule.revert_fields.iter().enumerate() {
            let kept = [
                "/spec",
                "/data",
                "/metadata/labels",
                "/metadata/annotations",
            ]
            .iter()
            .any(|root| {
                field == root
                    || field
                        .strip_prefix(root)
                        .is_some_and(|rest| rest.starts_with('/'))
            });
            // RFC 6901: `~` only as `~0` (a `~`) or `~1` (a `/`).
            let escapes_ok = field
                .split('~')
                .skip(1)
                .all(|after| after.starts_with('0') || after.starts_with('1'));
            if !kept || !escapes_ok {
                return Err(Error::invalid(
                    format!("{at}.revertFields[{position}]"),
                    format!(
                        "{field:?} must be a JSON pointer (RFC 6901: ~0 for ~, ~1 for /) at or \
                         under /spec, /data, /metadata/labels or /metadata/annotations: what a \
                         revert writes"
                    ),
                ));
            }
        }
        let selector = &rule.selector;
        compiled.push(Invariant {
            name: rule.name.clone(),
            description: rule.description.clone(),
            selector: Selector {
                api_versions: selector.api_version.iter().cloned().collect(),
                kinds: selector.kind.iter().cloned().collect(),
                namespaces: selector.namespaces.clone(),
                exclude_namespaces: selector.exclude_namespaces.clone(),
                match_labels: selector.match_labels.clone(),
                clusters: selector.clusters.clone(),
            },
            condition,
            message,
            severity,
            grace: rule.grace.unwrap_or(DEFAULT_INVARIANT_GRACE),
            revert_fields: rule.revert_fields.clone(),
        });
    }
    Ok(compiled)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.bytes().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"-_.".contains(&byte)
        })
        && name
            .bytes()
            .next()
            .is_some_and(|first| first.is_ascii_lowercase() || first.is_ascii_digit())
}

/// Reads and compiles a stand-alone rules file (`check --invariants`, `invariants test`): a
/// list of rules, a mapping with `invariants:`, or a whole config (its `rules.invariants`), so
/// one file can serve the commands and the service.
pub fn load_rules_file(path: &std::path::Path) -> Result<Vec<Invariant>, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_rules(&text, &path.display().to_string())
}

/// [`load_rules_file`] on a text already read (its errors name the rules as `rules`).
pub fn parse_rules_text(text: &str) -> Result<Vec<Invariant>, Error> {
    parse_rules(text, "rules")
}

fn parse_rules(text: &str, file: &str) -> Result<Vec<Invariant>, Error> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|error| Error::Syntax(format!("{file}: {error}")))?;
    let (list, at) = match value {
        serde_json::Value::Array(_) => (value, "invariants".to_string()),
        serde_json::Value::Object(mut map) => {
            if let Some(list) = map.remove("invariants") {
                (list, "invariants".to_string())
            } else if let Some(list) = map
                .get_mut("rules")
                .and_then(|rules| rules.as_object_mut())
                .and_then(|rules| rules.remove("invariants"))
            {
                (list, "rules.invariants".to_string())
            } else {
                return Err(Error::invalid(
                    file.to_string(),
                    "expected a list of rules, a mapping with `invariants:`, or a config with \
                     `rules.invariants`",
                ));
            }
        }
        _ => {
            return Err(Error::invalid(
                file.to_string(),
                "expected a list of rules or a mapping with `invariants:`",
            ))
        }
    };
    let rules: Vec<InvariantConfig> = serde_path_to_error::deserialize(list).map_err(|error| {
        let key = error.path().to_string();
        let key = if key == "." { String::new() } else { key };
        Error::invalid(format!("{file}: {at}{key}"), error.into_inner().to_string())
    })?;
    compile(&rules, &format!("{file}: {at}"))
}

/// Runs `compile` on a thread with a large stack: parsing recurses as deep as an expression
/// nests, and a stack overflow would end the process, not fail the rule. The stack is reserved,
/// not committed: only what parsing touches is used. Fails only when no thread can be started.
pub(super) fn compile_on_large_stack<T: Send>(
    compile: impl FnOnce() -> T + Send,
) -> Result<T, std::io::Error> {
    const STACK: usize = 256 << 20;
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("cel-compile".to_string())
            .stack_size(STACK)
            .spawn_scoped(scope, compile)?;
        match worker.join() {
            Ok(value) => Ok(value),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str, expression: &str) -> InvariantConfig {
        InvariantConfig {
            name: name.to_string(),
            expression: expression.to_string(),
            ..InvariantConfig::default()
        }
    }

    #[test]
    fn errors_name_the_key_path_and_the_position() {
        let error = compile(
            &[rule("ok", "true"), rule("bad", "object.spec.x ==\n  1 +")],
            "rules.invariants",
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("rules.invariants[1].expression: line 2"),
            "{error}"
        );
        let error = compile(&[rule("Bad Name", "true")], "rules.invariants")
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("rules.invariants[0].name:"), "{error}");
        let error = compile(&[rule("a", "true"), rule("a", "true")], "rules.invariants")
            .unwrap_err()
            .to_string();
        assert!(error.contains("another rule"), "{error}");
        let error = compile(&[rule("a", "spec.x == 1")], "rules.invariants")
            .unwrap_err()
            .to_string();
        assert!(error.contains("undeclared reference to 'spec'"), "{error}");
        let error = compile(&[rule("a", "'yes'")], "rules.invariants")
            .unwrap_err()
            .to_string();
        assert!(error.contains("returns a string, not a bool"), "{error}");
        // A long chain of operators parses on the compile thread's large stack and is refused
        // for its depth, not by ending the process.
        let chain = vec!["1"; 1500].join("+");
        let error = compile(&[rule("a", &format!("{chain} > 0"))], "rules.invariants")
            .unwrap_err()
            .to_string();
        assert!(error.contains("nests deeper"), "{error}");
    }
}
