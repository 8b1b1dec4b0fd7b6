//! CEL expressions of team invariants: compiled once, checked for what a type checker would
//! catch (an unknown variable, a result that cannot be a `bool` or a `string`), bounded in size
//! and nesting, rewritten so that every evaluation runs under a cost budget, and evaluated
//! against an object that is borrowed, not copied.
//!
//! Invariants: evaluation never panics the caller (a panic inside the `cel` crate becomes an
//! error), never recurses deeper than [`MAX_DEPTH`] levels of the expression (the interpreter is
//! recursive; the checks at compile time bound its stack), and never does more than about
//! [`BUDGET`] units of work: every comprehension is charged for all its iterations before it
//! starts (its range's size times the cost of its body), every value that `+` or `format`
//! builds is charged for its size, `indexOf` and `lastIndexOf` search in linear time
//! and are charged for the text and needle they search, `replace`, `split` and `join` count
//! what they will build (the result's bytes and occurrences, the parts) and are charged for it
//! before they build it (`strings`), a `matches` for its search (the text's length times the program's
//! size) and, with a pattern computed from the object, for its compile (compiled under a small
//! limit, cached, refusals too; a literal pattern is compiled with its rule and held by it), and
//! once the budget is spent
//! every further comprehension fails before it iterates. The core reads no clock: time follows
//! from cost, each unit priced from measurements of the slowest operations; a thread that owns
//! a clock may give it as a backstop ([`set_backstop_clock`]) for what the pricing misses. This is the only crate that knows the
//! `cel` crate.
//!
//! The parts, in the order an expression meets them: `check` (the bounds and checks at compile
//! time), `fields` (what it reads of the object), `instrument` (the rewrite that charges every
//! evaluation), `budget` (the charging functions the rewrite calls, and the budget they spend),
//! `patterns` (the compiled patterns of `matches`, literal and dynamic), `strings` (`indexOf`,
//! `lastIndexOf`, `replace`, `split` and `join`, done by the crate and charged before they
//! run), `bind`
//! (the object as CEL sees it).

use std::sync::{Arc, OnceLock};

use cel::common::ast::IdedExpr;
use cel::objects::Value;
use cel::Env;

pub mod admission;
mod bind;
mod budget;
mod check;
mod fields;
mod instrument;
mod patterns;
mod strings;

pub use bind::{Bindings, ObjectView};
pub use fields::Fields;

/// Longest expression source accepted, in bytes.
pub const MAX_SOURCE_BYTES: usize = 4096;
/// Deepest expression tree accepted (the interpreter recurses once per level).
pub const MAX_DEPTH: usize = 48;
/// Most nodes in one expression tree.
pub const MAX_NODES: usize = 1000;
/// Most comprehensions (`all`, `exists`, `map`, `filter`, ...) nested in one another.
pub const MAX_COMPREHENSION_NESTING: usize = 3;
/// Work units one evaluation may spend: about 10 ms of the writer's time at worst (one unit is
/// priced at about 100 ns; BENCHMARKS.md, "Hostile CEL").
pub const BUDGET: u64 = 100_000;
/// The wall-clock backstop of one evaluation on a thread that has a clock
/// ([`set_backstop_clock`]): five times what the budget allows, so it never decides a verdict
/// the cost model would have let through on a loaded machine, and still bounds one that the
/// model prices too low. Past it the evaluation ends as if its budget were spent.
pub const BACKSTOP_MICROS: u64 = 50_000;

/// Gives this thread's evaluations a wall-clock backstop of [`BACKSTOP_MICROS`], read from
/// `clock` (monotonic microseconds; `None` removes it). The crate reads no clock of its own:
/// the service's writer thread gives one; `check`, `replay` and `invariants test` give none, so
/// their verdicts depend on the input alone. The clock is read every 64 charges and around
/// every search and compile of a pattern.
pub fn set_backstop_clock(clock: Option<fn() -> u64>) {
    budget::set_clock(clock);
}

/// Why an expression was not accepted, with where in its source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct CompileError {
    /// 1-based line in the expression.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Why an evaluation gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The expression failed on this object (a missing field, a type mismatch, ...).
    #[error("{0}")]
    Evaluation(String),
    /// The expression spent its budget and was stopped.
    #[error("stopped after spending its evaluation budget ({BUDGET} units)")]
    Budget,
}

impl EvalError {
    /// Stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            EvalError::Evaluation(_) => "evaluation",
            EvalError::Budget => "budget",
        }
    }
}

/// What an expression must return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// A condition.
    Bool,
    /// A message.
    String,
    /// Any value (an admission policy's variable).
    Any,
}

/// A compiled, checked and instrumented expression.
#[derive(Debug, Clone)]
pub struct Expression {
    /// The text it was compiled from.
    source: Arc<str>,
    root: Arc<IdedExpr>,
    returns: Returns,
    names_old_object: bool,
    object_fields: Fields,
    old_object_fields: Fields,
    /// Its `matches` patterns that are literals, compiled when it compiled.
    patterns: Arc<patterns::LiteralPatterns>,
}

impl PartialEq for Expression {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root && self.returns == other.returns
    }
}

/// The environment every expression is compiled and evaluated in.
fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // The strings extension is what Kubernetes' CEL offers too (`lowerAscii`, `split`, ...).
        // Registering it on a fresh standard environment cannot fail; if it ever did, the
        // standard library alone is still a working environment.
        let _ = env.add_extension(cel::extensions::strings);
        Arc::new(env)
    })
}

impl Expression {
    /// Compiles `source`. Parsing recurses as deep as the expression nests, so call this on a
    /// thread with a large stack (drift-core's `config::invariants` compiles rules on one).
    pub fn compile(source: &str, returns: Returns) -> Result<Expression, CompileError> {
        Expression::compile_with(source, returns, check::RULE_VARIABLES)
    }

    /// Compiles `source` as the API server's admission CEL sees it: the variables are
    /// `object`, `oldObject`, `request`, `variables` and `namespaceObject`
    /// ([`Bindings::json`] binds them). What `admission export` writes is evaluated with this.
    pub fn compile_admission(source: &str, returns: Returns) -> Result<Expression, CompileError> {
        Expression::compile_with(source, returns, check::ADMISSION_VARIABLES)
    }

    fn compile_with(
        source: &str,
        returns: Returns,
        variables: &'static [&'static str],
    ) -> Result<Expression, CompileError> {
        let program = check::parse(source)?;
        let at = |id: u64| check::position(source, program.source_info().offset_for(id));
        let root = program.expression();
        let checked = check::tree(root, returns, variables, &at)?;
        let mut object_fields = Fields::default();
        let mut old_object_fields = Fields::default();
        fields::read_fields(root, &mut object_fields, &mut old_object_fields);
        let root_id = root.id;
        let root = instrument::instrumented(root);
        let expression = Expression {
            source: Arc::from(source),
            root: Arc::new(root),
            returns,
            names_old_object: checked.names_old_object,
            object_fields,
            old_object_fields,
            patterns: Arc::new(checked.patterns),
        };
        // No type checker: where the tree does not tell the result's type, one evaluation on a
        // sample object often does (`object.metadata.name` as a condition). An evaluation that
        // fails on the sample says nothing: the real objects have the fields it lacks.
        if let Ok(value) = expression.evaluate(&Bindings::sample()) {
            let found = value.type_of().to_string();
            let wanted = match returns {
                Returns::Bool => "bool",
                Returns::String => "string",
                Returns::Any => found.as_str(),
            };
            if found != wanted {
                let (line, column) = at(root_id);
                return Err(CompileError {
                    line,
                    column,
                    message: format!(
                        "the expression returns a {found} (on a sample object), not a {wanted}"
                    ),
                });
            }
        }
        Ok(expression)
    }

    /// The text it was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// What the expression reads of `object` and of `oldObject`.
    pub fn fields(&self) -> (&Fields, &Fields) {
        (&self.object_fields, &self.old_object_fields)
    }

    /// True when the expression names `oldObject`.
    pub fn names_old_object(&self) -> bool {
        self.names_old_object
    }

    /// Evaluates a condition.
    pub fn holds(&self, bindings: &Bindings<'_>) -> Result<bool, EvalError> {
        match self.evaluate(bindings)? {
            Value::Bool(value) => Ok(value),
            other => Err(EvalError::Evaluation(format!(
                "the expression returned a {}, not a bool",
                other.type_of()
            ))),
        }
    }

    /// Evaluates a message.
    pub fn text(&self, bindings: &Bindings<'_>) -> Result<String, EvalError> {
        match self.evaluate(bindings)? {
            Value::String(text) => Ok(text.to_string()),
            other => Err(EvalError::Evaluation(format!(
                "the message expression returned a {}, not a string",
                other.type_of()
            ))),
        }
    }

    /// Evaluates to a JSON value (maps with other than string keys, bytes and functions are
    /// an error).
    pub fn json(&self, bindings: &Bindings<'_>) -> Result<serde_json::Value, EvalError> {
        to_json(&self.evaluate(bindings)?)
    }

    fn evaluate(&self, bindings: &Bindings<'_>) -> Result<Value, EvalError> {
        budget::start();
        let root = &self.root;
        let context = bindings.context();
        // The `cel` crate is a dependency: should it ever panic, that is one rule's failed
        // evaluation, not the writer's end.
        let result = patterns::with_literals(&self.patterns, || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| context.resolve(root)))
        });
        if budget::tripped() {
            return Err(EvalError::Budget);
        }
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(EvalError::Evaluation(error.to_string())),
            Err(_) => Err(EvalError::Evaluation(
                "the expression evaluator failed internally".to_string(),
            )),
        }
    }
}

fn to_json(value: &Value) -> Result<serde_json::Value, EvalError> {
    use serde_json::Value as Json;
    Ok(match value {
        Value::Null => Json::Null,
        Value::Bool(flag) => Json::Bool(*flag),
        Value::Int(number) => Json::from(*number),
        Value::UInt(number) => Json::from(*number),
        Value::Float(number) => {
            serde_json::Number::from_f64(*number).map_or(Json::Null, Json::Number)
        }
        Value::String(text) => Json::String(text.to_string()),
        Value::List(items) => Json::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Map(map) => {
            let mut entries = serde_json::Map::new();
            for (key, value) in map.map.iter() {
                let cel::objects::Key::String(key) = key else {
                    return Err(EvalError::Evaluation(
                        "a map key that is not a string".to_string(),
                    ));
                };
                entries.insert(key.to_string(), to_json(value)?);
            }
            Json::Object(entries)
        }
        other => {
            return Err(EvalError::Evaluation(format!(
                "a {} has no JSON form",
                other.type_of()
            )))
        }
    })
}

#[cfg(test)]
mod tests;
