//! What exporting a rule to a Kubernetes ValidatingAdmissionPolicy needs to know of its
//! expression: the functions it calls (the API server's CEL offers fewer than this crate, and
//! later ones only from some Kubernetes version), what it reads of `object` and `oldObject`,
//! the variables its macros bind, an estimate of its cost in the API server's units, and a
//! rewrite of a field path into another (a token-level edit of the source, which keeps every
//! other character as the author wrote it).
//!
//! The cost estimate follows the API server's cost model (cel-go's `checker/cost.go`: one unit
//! per node, string traversals at 0.1 per character, a regular expression at 0.25 per pattern
//! character times the text's, a comprehension's body once per item) on an object whose lists
//! hold [`ASSUMED_LIST_ITEMS`] items and whose strings are [`ASSUMED_STRING_BYTES`] long: the API
//! server enforces its limits on the real object at run time, so the estimate is of a large
//! real one, not of the largest object etcd would store (on which every comprehension over a
//! string would be over the limit).

use std::collections::BTreeSet;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use crate::fields::{read_fields, Fields};
use crate::CompileError;

/// Items assumed in a list the expression reads from the object (a Revision with a hundred
/// containers, a hundred traffic targets or conditions is far past real ones).
pub const ASSUMED_LIST_ITEMS: u64 = 100;
/// Bytes assumed in a string the expression reads from the object (image references, URLs and
/// label values are well under it; Kubernetes caps a label value at 63).
pub const ASSUMED_STRING_BYTES: u64 = 1024;

/// What an expression is made of, as far as exporting it goes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Analysis {
    /// The functions and operators it calls, as `name` for a global call and `.name` for a
    /// member call (`.contains`, `_&&_`, `@in`, `size`, `.size`).
    pub functions: BTreeSet<String>,
    /// What it reads of `object`.
    pub object: Fields,
    /// What it reads of `oldObject`.
    pub old_object: Fields,
    /// The variables its macros bind (`c` in `containers.all(c, ...)`).
    pub bound: BTreeSet<String>,
    /// Its estimated cost in the API server's units (see the module's note).
    pub cost: u64,
}

/// Bytes assumed in a string of an expression that reads a ConfigMap's `data`: a value may be
/// as large as the whole ConfigMap (Kubernetes caps it at 1 MiB).
pub const ASSUMED_DATA_VALUE_BYTES: u64 = 1 << 20;

/// Analyses `source` (parsed as a rule's expression is; not checked or compiled), its strings
/// assumed [`ASSUMED_STRING_BYTES`] long, or [`ASSUMED_DATA_VALUE_BYTES`] when it reads `data`.
pub fn analyze(source: &str) -> Result<Analysis, CompileError> {
    let program = crate::check::parse(source)?;
    let root = program.expression();
    let mut analysis = Analysis::default();
    read_fields(root, &mut analysis.object, &mut analysis.old_object);
    walk(root, &mut analysis);
    let strings = if analysis.object.reads("data") || analysis.old_object.reads("data") {
        ASSUMED_DATA_VALUE_BYTES
    } else {
        ASSUMED_STRING_BYTES
    };
    analysis.cost = cost(root, strings).max;
    Ok(analysis)
}

fn walk(node: &IdedExpr, analysis: &mut Analysis) {
    match &node.expr {
        Expr::Select(select) => walk(&select.operand, analysis),
        Expr::Call(call) => {
            let name = if call.target.is_some() {
                format!(".{}", call.func_name)
            } else {
                call.func_name.clone()
            };
            analysis.functions.insert(name);
            if let Some(target) = &call.target {
                walk(target, analysis);
            }
            for arg in &call.args {
                walk(arg, analysis);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(|item| walk(item, analysis)),
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    walk(&entry.key, analysis);
                    walk(&entry.value, analysis);
                }
            }
        }
        Expr::Comprehension(comprehension) => {
            analysis.bound.insert(comprehension.iter_var.clone());
            if let Some(second) = &comprehension.iter_var2 {
                analysis.bound.insert(second.clone());
            }
            for part in [
                &comprehension.iter_range,
                &comprehension.accu_init,
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ] {
                walk(part, analysis);
            }
        }
        _ => {}
    }
}

/// A node's estimated cost and, where it is a string or a list, its size.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    max: u64,
    /// Characters of a string, items of a list or map: exact for a literal, assumed otherwise.
    size: u64,
}

fn traversal(size: u64) -> u64 {
    // 0.1 per character, rounded up, as cel-go's StringTraversalCostFactor.
    size.div_ceil(10)
}

fn cost(node: &IdedExpr, strings: u64) -> Estimate {
    let cost = |node: &IdedExpr| cost(node, strings);
    let unknown = |max: u64| Estimate {
        max,
        size: strings.max(ASSUMED_LIST_ITEMS),
    };
    match &node.expr {
        Expr::Literal(LiteralValue::String(text)) => Estimate {
            max: 0,
            size: text.inner().len() as u64,
        },
        Expr::Literal(_) => Estimate { max: 0, size: 1 },
        Expr::Ident(_) => unknown(1),
        Expr::Select(select) => {
            let operand = cost(&select.operand);
            unknown(operand.max.saturating_add(1))
        }
        Expr::List(list) => {
            let items: u64 = list
                .elements
                .iter()
                .fold(0u64, |sum, item| sum.saturating_add(cost(item).max));
            Estimate {
                max: items.saturating_add(10),
                size: list.elements.len() as u64,
            }
        }
        Expr::Map(map) => {
            let mut sum = 0u64;
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    sum = sum
                        .saturating_add(cost(&entry.key).max)
                        .saturating_add(cost(&entry.value).max);
                }
            }
            Estimate {
                max: sum.saturating_add(30),
                size: map.entries.len() as u64,
            }
        }
        Expr::Comprehension(comprehension) => {
            let range = cost(&comprehension.iter_range);
            let items = if matches!(comprehension.iter_range.expr, Expr::List(_) | Expr::Map(_)) {
                range.size
            } else {
                ASSUMED_LIST_ITEMS
            };
            let body = cost(&comprehension.loop_cond)
                .max
                .saturating_add(cost(&comprehension.loop_step).max);
            let max = range
                .max
                .saturating_add(cost(&comprehension.accu_init).max)
                .saturating_add(items.saturating_mul(body))
                .saturating_add(cost(&comprehension.result).max);
            unknown(max)
        }
        Expr::Call(call) => {
            let target = call.target.as_deref().map(cost);
            let args: Vec<Estimate> = call.args.iter().map(cost).collect();
            let mut sum = target.map_or(0, |target| target.max);
            for arg in &args {
                sum = sum.saturating_add(arg.max);
            }
            // The text a member call works on, or a global call's first argument.
            let subject = target.or_else(|| args.first().copied());
            let other = if target.is_some() {
                args.first().copied()
            } else {
                args.get(1).copied()
            };
            let size = |estimate: Option<Estimate>| estimate.map_or(1, |estimate| estimate.size);
            let own = match call.func_name.as_str() {
                // A search is charged as cel-go charges `matches`: text times pattern.
                "matches" | "find" | "findAll" => traversal(size(subject).saturating_add(1))
                    .saturating_mul(size(other).saturating_mul(25).div_ceil(100).max(1)),
                "contains" => {
                    traversal(size(subject)).saturating_mul(traversal(size(other)).max(1))
                }
                "startsWith" | "endsWith" => traversal(size(other)),
                // Membership in a literal list reads it; in anything else, a list of the
                // assumed length (a map's lookup costs less).
                "@in" => match call.args.get(1).map(|arg| &arg.expr) {
                    Some(Expr::List(list)) => list.elements.len() as u64,
                    _ => ASSUMED_LIST_ITEMS,
                },
                // Joining two texts copies both; comparing reads the shorter.
                "_+_" => traversal(
                    size(args.first().copied()).saturating_add(size(args.get(1).copied())),
                )
                .max(1),
                "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
                    traversal(size(args.first().copied()).min(size(args.get(1).copied()))).max(1)
                }
                "indexOf" | "lastIndexOf" | "lowerAscii" | "upperAscii" | "trim" | "replace"
                | "split" | "substring" | "charAt" | "format" | "quote" | "strings.quote" => {
                    traversal(size(subject)).max(1)
                }
                "join" => traversal(ASSUMED_LIST_ITEMS.saturating_mul(strings)),
                _ => 1,
            };
            unknown(sum.saturating_add(own))
        }
        _ => unknown(1),
    }
}

/// `source` with every field path `from` (`["object", "metadata", "labels"]`: the variable and
/// the fields after it, written with dots) replaced by `to`, token by token: string literals
/// and comments are left alone, as is a path that continues a longer one (`x.object...`).
pub fn rename_path(source: &str, from: &[&str], to: &str) -> String {
    let tokens = tokens(source);
    let mut out = String::with_capacity(source.len());
    let mut copied = 0usize;
    let mut index = 0usize;
    while index < tokens.len() {
        let matched = (|| {
            let previous_is_dot = index > 0 && tokens[index - 1].text(source) == ".";
            if previous_is_dot {
                return None;
            }
            let mut at = index;
            for (position, part) in from.iter().enumerate() {
                if position > 0 {
                    if tokens.get(at)?.text(source) != "." {
                        return None;
                    }
                    at += 1;
                }
                let token = tokens.get(at)?;
                if token.kind != Kind::Word || token.text(source) != *part {
                    return None;
                }
                at += 1;
            }
            Some(at)
        })();
        match matched {
            Some(end) => {
                out.push_str(&source[copied..tokens[index].start]);
                out.push_str(to);
                copied = tokens[end - 1].end;
                index = end;
            }
            None => index += 1,
        }
    }
    out.push_str(&source[copied..]);
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Word,
    Other,
}

#[derive(Debug, Clone, Copy)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
}

impl Token {
    fn text<'s>(&self, source: &'s str) -> &'s str {
        &source[self.start..self.end]
    }
}

/// The words and punctuation of a CEL source, with string literals (any quoting, raw or
/// bytes) and `//` comments skipped.
fn tokens(source: &str) -> Vec<Token> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let byte = bytes[at];
        if byte.is_ascii_whitespace() {
            at += 1;
        } else if byte == b'/' && bytes.get(at + 1) == Some(&b'/') {
            while at < bytes.len() && bytes[at] != b'\n' {
                at += 1;
            }
        } else if byte == b'"' || byte == b'\'' {
            at = skip_string(bytes, at, false);
        } else if byte.is_ascii_alphabetic() || byte == b'_' {
            let start = at;
            while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
                at += 1;
            }
            // A string prefix: r'...', b"...", rb'...'.
            let word = &source[start..at];
            if at < bytes.len()
                && (bytes[at] == b'"' || bytes[at] == b'\'')
                && matches!(word.to_ascii_lowercase().as_str(), "r" | "b" | "rb" | "br")
            {
                at = skip_string(bytes, at, word.to_ascii_lowercase().contains('r'));
                continue;
            }
            tokens.push(Token {
                kind: Kind::Word,
                start,
                end: at,
            });
        } else {
            let width = source[at..].chars().next().map_or(1, char::len_utf8);
            tokens.push(Token {
                kind: Kind::Other,
                start: at,
                end: at + width,
            });
            at += width;
        }
    }
    tokens
}

/// The end of the string literal opening at `at` (its quote), triple-quoted or not.
fn skip_string(bytes: &[u8], at: usize, raw: bool) -> usize {
    let quote = bytes[at];
    let triple = bytes.get(at + 1) == Some(&quote) && bytes.get(at + 2) == Some(&quote);
    let mut index = if triple { at + 3 } else { at + 1 };
    while index < bytes.len() {
        if !raw && bytes[index] == b'\\' {
            index += 2;
            continue;
        }
        if triple {
            if bytes[index] == quote
                && bytes.get(index + 1) == Some(&quote)
                && bytes.get(index + 2) == Some(&quote)
            {
                return index + 3;
            }
        } else if bytes[index] == quote || bytes[index] == b'\n' {
            return index + 1;
        }
        index += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_renamed_where_it_is_read_and_nowhere_else() {
        let source = "'tier' in object.metadata.labels && object.metadata.labels['tier'] == \
                      'object.metadata.labels' && has(object . metadata . labels.x) \
                      && self.object.metadata.labels == {} // object.metadata.labels\n";
        let renamed = rename_path(source, &["object", "metadata", "labels"], "variables.l");
        assert_eq!(
            renamed,
            "'tier' in variables.l && variables.l['tier'] == 'object.metadata.labels' && \
             has(variables.l.x) && self.object.metadata.labels == {} // object.metadata.labels\n"
        );
        // Other quotings are skipped too.
        let source = r#"r'a\'' + """object.metadata.labels""" + b"x" + object.metadata.labelsX"#;
        assert_eq!(
            rename_path(source, &["object", "metadata", "labels"], "v"),
            source
        );
    }

    #[test]
    fn the_analysis_names_calls_reads_and_bound_variables() {
        let analysis = analyze(
            "object.spec.containers.all(c, c.image.contains('@') && size(c.name) > 0) \
             && 'x' in object.metadata.labels && oldObject.spec.x.reverse() == ''",
        )
        .unwrap();
        for name in [
            ".contains",
            "size",
            "@in",
            "_&&_",
            ".reverse",
            "_>_",
            "_==_",
        ] {
            assert!(analysis.functions.contains(name), "{name}: {analysis:?}");
        }
        assert!(analysis.bound.contains("c"));
        assert!(analysis.object.reads("spec"));
        assert!(analysis.object.reads("metadata"));
        assert!(!analysis.object.reads("status"));
        assert!(analysis.old_object.reads("spec"));
    }

    #[test]
    fn nested_comprehensions_cost_the_product_of_their_ranges() {
        let one = analyze("object.spec.a.all(x, x.b.contains('y'))")
            .unwrap()
            .cost;
        let two = analyze("object.spec.a.all(x, object.spec.b.all(y, y.c.contains('z')))")
            .unwrap()
            .cost;
        assert!(one < 100_000, "{one}");
        assert!(two > 1_000_000, "{two}");
        // A literal list is as long as it is.
        let literal = analyze("[1, 2, 3].all(x, x > 0)").unwrap().cost;
        assert!(literal < 100, "{literal}");
        // A ConfigMap's value may be a mebibyte: a search in it is priced so.
        let data =
            analyze("object.data['a'].matches('^(alpha|beta|gamma)+[0-9]{2,8}-(one|two|three)$')")
                .unwrap()
                .cost;
        assert!(data > 1_000_000, "{data}");
        let label = analyze("object.metadata.name.matches('^(x|y|z)+[0-9]{2,8}-(a|b)$')")
            .unwrap()
            .cost;
        assert!(label < 10_000, "{label}");
    }
}
