//! The checks an expression passes at compile time, in place of a type checker: a bounded
//! source (length, bracket depth) before the parser recurses into it, then a tree of bounded
//! size, depth and comprehension nesting that names only known variables, whose literal
//! patterns compile, and whose result, where the tree shows its type, is what the rule needs.
//! Every error says where in the source.

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::Program;

use crate::patterns::{literal_pattern, LiteralPatterns};
use crate::{CompileError, Returns};
use crate::{MAX_COMPREHENSION_NESTING, MAX_DEPTH, MAX_NODES, MAX_SOURCE_BYTES};

/// The variables a rule's expression may name, besides those its comprehensions bind.
pub(crate) const RULE_VARIABLES: &[&str] = &["object", "oldObject"];
/// The variables of an expression the API server evaluates in a ValidatingAdmissionPolicy
/// (`authorizer` and `params` left out: an exported rule never uses them).
pub(crate) const ADMISSION_VARIABLES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "variables",
    "namespaceObject",
];
/// Type names and namespaces CEL resolves as identifiers.
const BUILT_IN_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "strings",
];

/// Parses `source`, once it is known to be short enough and not too deeply bracketed (the
/// parser recurses as deep as the brackets nest).
pub(crate) fn parse(source: &str) -> Result<Program, CompileError> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(CompileError {
            line: 1,
            column: 1,
            message: format!(
                "the expression is {} bytes long; at most {MAX_SOURCE_BYTES} are accepted",
                source.len()
            ),
        });
    }
    if let Some((line, column)) = too_deeply_bracketed(source) {
        return Err(CompileError {
            line,
            column,
            message: format!("brackets nest deeper than {MAX_DEPTH} levels"),
        });
    }
    let program = crate::env().compile(source).map_err(|errors| {
        let first = errors.errors.into_iter().next();
        match first {
            Some(error) => CompileError {
                // The parser's positions are 1-based already.
                line: usize::try_from(error.pos.0).unwrap_or(1).max(1),
                column: usize::try_from(error.pos.1).unwrap_or(1).max(1),
                message: error.msg,
            },
            None => CompileError {
                line: 1,
                column: 1,
                message: "the expression does not parse".to_string(),
            },
        }
    })?;
    Ok(program)
}

/// What the checks of a tree found out on the way.
pub(crate) struct Checked {
    /// The tree names `oldObject`.
    pub(crate) names_old_object: bool,
    /// Its literal patterns, compiled (the expression holds them; see `patterns`).
    pub(crate) patterns: LiteralPatterns,
}

/// Checks a parsed tree (`at` gives a node's line and column): size, depth, comprehension
/// nesting, every identifier in scope, literal patterns, and a result type the tree shows to
/// be other than what `returns` wants.
pub(crate) fn tree(
    root: &IdedExpr,
    returns: Returns,
    variables: &'static [&'static str],
    at: &dyn Fn(u64) -> (usize, usize),
) -> Result<Checked, CompileError> {
    let mut check = Check {
        variables,
        nodes: 0,
        names_old_object: false,
        patterns: LiteralPatterns::new(),
        at,
    };
    check.walk(root, &mut Vec::new(), 1, 0)?;
    if let Some(found) = static_type(root, &[]) {
        let wanted = match returns {
            Returns::Bool => Some(Static::Bool),
            Returns::String => Some(Static::String),
            Returns::Any => None,
        };
        if let Some(wanted) = wanted.filter(|wanted| found != *wanted) {
            let (line, column) = at(root.id);
            return Err(CompileError {
                line,
                column,
                message: format!(
                    "the expression returns {} {}, not a {}",
                    if found.name().starts_with(['a', 'e', 'i', 'o', 'u']) {
                        "an"
                    } else {
                        "a"
                    },
                    found.name(),
                    wanted.name()
                ),
            });
        }
    }
    Ok(Checked {
        names_old_object: check.names_old_object,
        patterns: check.patterns,
    })
}

/// The static type of a node, where it is known without knowing the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Static {
    Bool,
    Int,
    UInt,
    Double,
    String,
    Bytes,
    Null,
    List,
    Map,
}

impl Static {
    fn name(self) -> &'static str {
        match self {
            Static::Bool => "bool",
            Static::Int => "int",
            Static::UInt => "uint",
            Static::Double => "double",
            Static::String => "string",
            Static::Bytes => "bytes",
            Static::Null => "null",
            Static::List => "list",
            Static::Map => "map",
        }
    }
}

/// The first bracket that opens deeper than [`MAX_DEPTH`], as (line, column): checked before
/// parsing, whose recursion follows the brackets.
fn too_deeply_bracketed(source: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let (mut line, mut column) = (1, 0);
    for character in source.chars() {
        if character == '\n' {
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
        if let Some(open) = quote {
            if escaped {
                escaped = false;
            } else if character == '\\' {
                escaped = true;
            } else if character == open {
                quote = None;
            }
            continue;
        }
        match character {
            '"' | '\'' => quote = Some(character),
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some((line, column));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// (line, column) of a byte offset range's start.
pub(crate) fn position(source: &str, offsets: Option<(u32, u32)>) -> (usize, usize) {
    let Some((start, _)) = offsets else {
        return (1, 1);
    };
    let start = usize::try_from(start).unwrap_or(0).min(source.len());
    let before = source.get(..start).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

struct Check<'a> {
    variables: &'static [&'static str],
    nodes: usize,
    names_old_object: bool,
    patterns: LiteralPatterns,
    at: &'a dyn Fn(u64) -> (usize, usize),
}

impl Check<'_> {
    fn fail(&self, id: u64, message: String) -> CompileError {
        let (line, column) = (self.at)(id);
        CompileError {
            line,
            column,
            message,
        }
    }

    /// Walks the tree: size, depth, comprehension nesting, and every identifier in scope.
    fn walk(
        &mut self,
        node: &IdedExpr,
        scope: &mut Vec<String>,
        depth: usize,
        nesting: usize,
    ) -> Result<(), CompileError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.fail(
                node.id,
                format!("the expression has more than {MAX_NODES} parts"),
            ));
        }
        if depth > MAX_DEPTH {
            return Err(self.fail(
                node.id,
                format!("the expression nests deeper than {MAX_DEPTH} levels"),
            ));
        }
        match &node.expr {
            Expr::Unspecified => {
                return Err(self.fail(node.id, "an empty expression".to_string()));
            }
            Expr::Ident(name) => {
                if name == "oldObject" {
                    self.names_old_object = true;
                }
                let known = scope.iter().any(|bound| bound == name)
                    || self.variables.contains(&name.as_str())
                    || BUILT_IN_NAMES.contains(&name.as_str());
                if !known {
                    let names: Vec<String> = self
                        .variables
                        .iter()
                        .map(|variable| format!("`{variable}`"))
                        .collect();
                    return Err(self.fail(
                        node.id,
                        format!(
                            "undeclared reference to '{name}' (the variables are {})",
                            match names.split_last() {
                                Some((last, [])) => last.clone(),
                                Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
                                None => String::new(),
                            }
                        ),
                    ));
                }
            }
            Expr::Literal(_) => {}
            Expr::Select(select) => self.walk(&select.operand, scope, depth + 1, nesting)?,
            Expr::Call(call) => {
                if call.func_name == "matches" {
                    if let Some(Expr::Literal(LiteralValue::String(source))) =
                        call.args.last().map(|arg| &arg.expr)
                    {
                        if !self.patterns.contains_key(source.inner()) {
                            match literal_pattern(source.inner()) {
                                Ok(compiled) => {
                                    self.patterns.insert(source.inner().to_string(), compiled);
                                }
                                Err(error) => {
                                    return Err(self.fail(
                                        node.id,
                                        format!("not a valid regular expression: {error}"),
                                    ))
                                }
                            }
                        }
                    }
                }
                if let Some(target) = &call.target {
                    self.walk(target, scope, depth + 1, nesting)?;
                }
                for arg in &call.args {
                    self.walk(arg, scope, depth + 1, nesting)?;
                }
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.walk(element, scope, depth + 1, nesting)?;
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        self.walk(&entry.key, scope, depth + 1, nesting)?;
                        self.walk(&entry.value, scope, depth + 1, nesting)?;
                    }
                }
            }
            Expr::Struct(_) => {
                return Err(self.fail(
                    node.id,
                    "message literals are not supported; use a map".to_string(),
                ));
            }
            Expr::Comprehension(comprehension) => {
                if nesting + 1 > MAX_COMPREHENSION_NESTING {
                    return Err(self.fail(
                        node.id,
                        format!(
                            "macros (all, exists, map, filter, ...) nest deeper than \
                             {MAX_COMPREHENSION_NESTING} levels"
                        ),
                    ));
                }
                self.walk(&comprehension.iter_range, scope, depth + 1, nesting)?;
                self.walk(&comprehension.accu_init, scope, depth + 1, nesting)?;
                let bound = scope.len();
                scope.push(comprehension.accu_var.clone());
                scope.push(comprehension.iter_var.clone());
                if let Some(second) = &comprehension.iter_var2 {
                    scope.push(second.clone());
                }
                self.walk(&comprehension.loop_cond, scope, depth + 1, nesting + 1)?;
                self.walk(&comprehension.loop_step, scope, depth + 1, nesting + 1)?;
                scope.truncate(bound + 1);
                self.walk(&comprehension.result, scope, depth + 1, nesting + 1)?;
                scope.truncate(bound);
            }
        }
        Ok(())
    }
}

/// The type a node returns whatever the data, where the tree says it.
pub(crate) fn static_type(
    node: &IdedExpr,
    accumulators: &[(&str, Option<Static>)],
) -> Option<Static> {
    match &node.expr {
        Expr::Literal(literal) => Some(match literal {
            LiteralValue::Boolean(_) => Static::Bool,
            LiteralValue::Bytes(_) => Static::Bytes,
            LiteralValue::Double(_) => Static::Double,
            LiteralValue::Int(_) => Static::Int,
            LiteralValue::Null => Static::Null,
            LiteralValue::String(_) => Static::String,
            LiteralValue::UInt(_) => Static::UInt,
        }),
        Expr::List(_) => Some(Static::List),
        Expr::Map(_) => Some(Static::Map),
        Expr::Select(select) if select.test => Some(Static::Bool),
        Expr::Ident(name) => accumulators
            .iter()
            .rev()
            .find(|(accumulator, _)| accumulator == name)
            .and_then(|(_, kind)| *kind),
        Expr::Comprehension(comprehension) => {
            let mut inner = accumulators.to_vec();
            inner.push((
                comprehension.accu_var.as_str(),
                static_type(&comprehension.accu_init, accumulators),
            ));
            static_type(&comprehension.result, &inner)
        }
        Expr::Call(call) => call_type(call, accumulators),
        _ => None,
    }
}

fn call_type(call: &CallExpr, accumulators: &[(&str, Option<Static>)]) -> Option<Static> {
    match call.func_name.as_str() {
        "_&&_"
        | "_||_"
        | "!_"
        | "_==_"
        | "_!=_"
        | "_<_"
        | "_<=_"
        | "_>_"
        | "_>=_"
        | "@in"
        | "@not_strictly_false"
        | "matches"
        | "startsWith"
        | "endsWith"
        | "contains" => Some(Static::Bool),
        "size" | "int" | "indexOf" | "lastIndexOf" => Some(Static::Int),
        "string" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "join"
        | "format" | "charAt" => Some(Static::String),
        "double" => Some(Static::Double),
        "uint" => Some(Static::UInt),
        "split" => Some(Static::List),
        "_-_" | "_*_" | "_/_" | "_%_" | "-_" => {
            // A number of some kind: never a bool nor a string.
            call.args
                .first()
                .and_then(|first| static_type(first, accumulators))
                .or(Some(Static::Int))
        }
        "_+_" => {
            let left = call
                .args
                .first()
                .and_then(|arg| static_type(arg, accumulators));
            let right = call
                .args
                .get(1)
                .and_then(|arg| static_type(arg, accumulators));
            left.or(right)
        }
        "_?_:_" => {
            let then = call
                .args
                .get(1)
                .and_then(|arg| static_type(arg, accumulators));
            let otherwise = call
                .args
                .get(2)
                .and_then(|arg| static_type(arg, accumulators));
            match (then, otherwise) {
                (Some(then), Some(otherwise)) if then == otherwise => Some(then),
                _ => None,
            }
        }
        _ => None,
    }
}
