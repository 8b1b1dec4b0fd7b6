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
    /// `object`'s and `oldObject`'s annotations are read other than by literal key (a
    /// comprehension over them, a computed index, the map passed whole): any value may be read.
    pub annotations_by_value: (bool, bool),
}

/// The variable (`object` or `oldObject`) whose `metadata.annotations` `node` is.
fn annotations_of(node: &IdedExpr) -> Option<&str> {
    let Expr::Select(annotations) = &node.expr else {
        return None;
    };
    let Expr::Select(metadata) = &annotations.operand.expr else {
        return None;
    };
    match (
        &metadata.operand.expr,
        annotations.field.as_str(),
        metadata.field.as_str(),
    ) {
        (Expr::Ident(name), "annotations", "metadata") if !annotations.test && !metadata.test => {
            Some(name.as_str())
        }
        _ => None,
    }
}

/// Marks in `found` the variables whose annotations `node` reads by value (see
/// [`Analysis::annotations_by_value`]).
fn annotations_by_value(node: &IdedExpr, found: &mut (bool, bool)) {
    let mut mark = |name: &str| match name {
        "object" => found.0 = true,
        "oldObject" => found.1 = true,
        _ => {}
    };
    if let Some(name) = annotations_of(node) {
        mark(name);
        return;
    }
    let literal = |node: &IdedExpr| matches!(node.expr, Expr::Literal(LiteralValue::String(_)));
    match &node.expr {
        // `annotations.key` and `has(annotations.key)`: one named value, or none.
        Expr::Select(select) if annotations_of(&select.operand).is_some() => {}
        Expr::Select(select) => annotations_by_value(&select.operand, found),
        Expr::Call(call) => {
            let by_literal_key = call.func_name == "_[_]"
                && call.args.len() == 2
                && annotations_of(&call.args[0]).is_some()
                && literal(&call.args[1]);
            let key_test = call.func_name == "@in"
                && call.args.len() == 2
                && annotations_of(&call.args[1]).is_some();
            if by_literal_key {
                return;
            }
            if let Some(target) = &call.target {
                annotations_by_value(target, found);
            }
            for (index, arg) in call.args.iter().enumerate() {
                if key_test && index == 1 {
                    continue;
                }
                annotations_by_value(arg, found);
            }
        }
        _ => {
            for child in children(node) {
                annotations_by_value(child, found);
            }
        }
    }
}

/// Bytes assumed in a string of an expression that reads a ConfigMap's `data`: a value may be
/// as large as the whole ConfigMap (Kubernetes caps it at 1 MiB).
pub const ASSUMED_DATA_VALUE_BYTES: u64 = 1 << 20;

/// Analyses `source` (parsed as a rule's expression is; not checked or compiled), its strings
/// assumed [`ASSUMED_STRING_BYTES`] long but a value of a ConfigMap's `data`
/// [`ASSUMED_DATA_VALUE_BYTES`] (see [`cost`] for a comprehension over `data`).
pub fn analyze(source: &str) -> Result<Analysis, CompileError> {
    let program = crate::check::parse(source)?;
    let root = program.expression();
    let mut analysis = Analysis::default();
    read_fields(root, &mut analysis.object, &mut analysis.old_object);
    walk(root, &mut analysis);
    annotations_by_value(root, &mut analysis.annotations_by_value);
    analysis.cost = cost(root, ASSUMED_DATA_VALUE_BYTES).max;
    Ok(analysis)
}

/// A node's direct sub-expressions (a call's target and arguments, list items, map keys and
/// values, a comprehension's five parts, a selection's operand), in source order.
fn children(node: &IdedExpr) -> Vec<&IdedExpr> {
    match &node.expr {
        Expr::Select(select) => vec![&*select.operand],
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map
            .entries
            .iter()
            .filter_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(entry) => Some([&entry.key, &entry.value]),
                _ => None,
            })
            .flatten()
            .collect(),
        Expr::Comprehension(comprehension) => vec![
            &comprehension.iter_range,
            &comprehension.accu_init,
            &comprehension.loop_cond,
            &comprehension.loop_step,
            &comprehension.result,
        ],
        _ => Vec::new(),
    }
}

fn walk(node: &IdedExpr, analysis: &mut Analysis) {
    match &node.expr {
        Expr::Call(call) => {
            let name = if call.target.is_some() {
                format!(".{}", call.func_name)
            } else {
                call.func_name.clone()
            };
            analysis.functions.insert(name);
        }
        Expr::Comprehension(comprehension) => {
            analysis.bound.insert(comprehension.iter_var.clone());
            if let Some(second) = &comprehension.iter_var2 {
                analysis.bound.insert(second.clone());
            }
        }
        _ => {}
    }
    for child in children(node) {
        walk(child, analysis);
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

/// Entries assumed in a ConfigMap's `data` when an expression iterates over it: 1 MiB of
/// entries of 16 bytes.
const ASSUMED_DATA_ENTRIES: u64 = ASSUMED_DATA_VALUE_BYTES / 16;

/// True for `object.data` or `oldObject.data`.
fn is_data(node: &IdedExpr) -> bool {
    match &node.expr {
        Expr::Select(select) if select.field == "data" && !select.test => matches!(
            &select.operand.expr,
            Expr::Ident(name) if name == "object" || name == "oldObject"
        ),
        _ => false,
    }
}

/// True for a value of `data` (`object.data['k']`, `object.data.k`, `object.data[k]`).
fn is_data_value(node: &IdedExpr) -> bool {
    match &node.expr {
        Expr::Select(select) => is_data(&select.operand),
        Expr::Call(call) => call.func_name == "_[_]" && call.args.first().is_some_and(is_data),
        _ => false,
    }
}

/// `node`'s estimate, a value of `data` taken to be `data_value` bytes long: the whole
/// ConfigMap (1 MiB) outside a comprehension over `data`; inside one, its entries share the
/// mebibyte, and the comprehension costs the more of many small entries and one large one.
fn cost(node: &IdedExpr, data_value: u64) -> Estimate {
    let cost = |node: &IdedExpr| cost(node, data_value);
    let strings = ASSUMED_STRING_BYTES;
    let unknown = |max: u64| Estimate {
        max,
        size: strings.max(ASSUMED_LIST_ITEMS),
    };
    if is_data_value(node) {
        let inner = match &node.expr {
            Expr::Call(call) => call.args.iter().map(|arg| cost(arg).max).sum::<u64>(),
            _ => 2,
        };
        return Estimate {
            max: inner.saturating_add(1),
            size: data_value,
        };
    }
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
        Expr::Comprehension(comprehension) if is_data(&comprehension.iter_range) => {
            let at = |entries: u64| {
                let value = ASSUMED_DATA_VALUE_BYTES / entries;
                let body = |node: &IdedExpr| super::admission::cost(node, value).max;
                entries.saturating_mul(
                    body(&comprehension.loop_cond).saturating_add(body(&comprehension.loop_step)),
                )
            };
            let iterations = at(ASSUMED_DATA_ENTRIES).max(at(1));
            unknown(
                iterations
                    .saturating_add(cost(&comprehension.accu_init).max)
                    .saturating_add(cost(&comprehension.result).max)
                    .saturating_add(2),
            )
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
    fn annotations_read_by_literal_key_are_told_from_annotations_read_by_value() {
        let by_value = |source: &str| analyze(source).unwrap().annotations_by_value;
        for literal in [
            "'a' in object.metadata.annotations",
            "object.metadata.annotations['a'] == 'x'",
            "has(object.metadata.annotations.a) && object.metadata.annotations.a == 'x'",
            "oldObject.spec.annotations.exists(k, k == 'x')",
        ] {
            assert_eq!(by_value(literal), (false, false), "{literal}");
        }
        assert_eq!(
            by_value("object.metadata.annotations.exists(k, object.metadata.annotations[k] == '')"),
            (true, false)
        );
        assert_eq!(
            by_value("size(oldObject.metadata.annotations) < 3"),
            (false, true)
        );
        assert_eq!(
            by_value("object.metadata.annotations[object.spec.key] == ''"),
            (true, false)
        );
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
        // A ConfigMap's entries share a mebibyte: a rule over all of them is priced on many
        // small entries or one large one, whichever costs more; the name stays a name.
        let scan = analyze("object.data.all(k, !object.data[k].contains('password'))")
            .unwrap()
            .cost;
        assert!((100_000..1_000_000).contains(&scan), "{scan}");
        let keys = analyze("object.data.all(k, size(k) < 64)").unwrap().cost;
        assert!(keys > ASSUMED_DATA_ENTRIES, "{keys}");
        let named = analyze("'x' in object.data && object.metadata.name.matches('^config-.*$')")
            .unwrap()
            .cost;
        assert!(named < 10_000, "{named}");
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
