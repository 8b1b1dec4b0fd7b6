//! CEL expressions of team invariants: compiled once, checked for what a type checker would
//! catch (an unknown variable, a result that cannot be a `bool` or a `string`), bounded in size
//! and nesting, rewritten so that every evaluation runs under a cost budget, and evaluated
//! against an object that is borrowed, not copied.
//!
//! Invariants: evaluation never panics the caller (a panic inside the `cel` crate becomes an
//! error), never recurses deeper than [`MAX_DEPTH`] levels of the expression (the interpreter is
//! recursive; the checks at compile time bound its stack), and never does more than about
//! [`BUDGET`] units of work: every comprehension is charged for all its iterations before it
//! starts (its range's size times the cost of its body), every value that `+`, `replace`,
//! `join` or `format` builds is charged for its size, and once the budget is spent every
//! further comprehension fails before it iterates. This is the only module that knows the
//! `cel` crate.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::{CowVal, Val};
use cel::objects::Value;
use cel::{Context, Env, ExecutionError, FunctionContext};

use drift_model::OwnerReference;

/// Longest expression source accepted, in bytes.
pub const MAX_SOURCE_BYTES: usize = 4096;
/// Deepest expression tree accepted (the interpreter recurses once per level).
pub const MAX_DEPTH: usize = 48;
/// Most nodes in one expression tree.
pub const MAX_NODES: usize = 1000;
/// Most comprehensions (`all`, `exists`, `map`, `filter`, ...) nested in one another.
pub const MAX_COMPREHENSION_NESTING: usize = 3;
/// Work units one evaluation may spend: about 10 ms of the writer's time at worst.
pub const BUDGET: u64 = 100_000;
/// What a regular expression match costs beyond one node (the `cel` crate compiles the
/// pattern on every call).
const MATCHES_COST: u64 = 100;
/// The variables an expression may name, besides those its comprehensions bind.
const VARIABLES: &[&str] = &["object", "oldObject"];
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
/// Internal functions of the rewrite; CEL source cannot name them (`@` starts no identifier).
const RANGE: &str = "@ds_range";
const SIZED: &str = "@ds_sized";
const LIVE: &str = "@ds_live";
const MATCHES: &str = "@ds_matches";
/// Most distinct literal patterns kept compiled (rules are few; a bound all the same).
const MAX_CACHED_PATTERNS: usize = 1024;
/// Functions whose result is charged for its size.
const GROWING: &[&str] = &["_+_", "replace", "join", "format"];
/// Internal: charges a value for its size and returns it.
const CHARGE: &str = "@ds_charge";
/// Internal: charges a list for its size (`in` scans a list; a map lookup is one step).
const CHARGE_LIST: &str = "@ds_charge_list";
/// Internal: charges a string (or bytes) for its length, anything else nothing.
const CHARGE_TEXT: &str = "@ds_charge_text";
/// Functions whose work grows with the strings they are given (a scan, a copy, a count of
/// characters): every operand that is not a literal is charged for its length.
const SCANNING: &[&str] = &[
    "contains",
    "indexOf",
    "lastIndexOf",
    "split",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "charAt",
    "substring",
    "startsWith",
    "endsWith",
    "size",
    "reverse",
    "strings.quote",
    "matches",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "string",
    "bytes",
];

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
}

/// The parts of an object an expression reads, as a tree of field names: a node marked `whole`
/// reads everything below it. Only these parts are bound for an evaluation (a Service's whole
/// spec is not converted for a rule that reads one annotation); an expression that reads
/// `object` other than through field selections reads it whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    whole: bool,
    children: BTreeMap<String, Fields>,
}

static WHOLE: Fields = Fields {
    whole: true,
    children: BTreeMap::new(),
};

impl Fields {
    /// Every field.
    pub fn everything() -> Fields {
        WHOLE.clone()
    }

    /// True when nothing is read.
    pub fn is_empty(&self) -> bool {
        !self.whole && self.children.is_empty()
    }

    fn add(&mut self, path: &[&str]) {
        if self.whole {
            return;
        }
        match path.split_first() {
            None => {
                self.whole = true;
                self.children.clear();
            }
            Some((first, rest)) => self
                .children
                .entry(first.to_string())
                .or_default()
                .add(rest),
        }
    }

    /// Adds what `other` reads.
    pub fn merge(&mut self, other: &Fields) {
        if self.whole {
            return;
        }
        if other.whole {
            *self = Fields::everything();
            return;
        }
        for (key, fields) in &other.children {
            self.children.entry(key.clone()).or_default().merge(fields);
        }
    }

    /// True when the field `key` (or all of them) is read.
    pub fn reads(&self, key: &str) -> bool {
        self.child(key).is_some()
    }

    fn child(&self, key: &str) -> Option<&Fields> {
        if self.whole {
            Some(&WHOLE)
        } else {
            self.children.get(key)
        }
    }
}

/// A compiled, checked and instrumented expression.
#[derive(Debug, Clone)]
pub struct Expression {
    root: Arc<IdedExpr>,
    returns: Returns,
    names_old_object: bool,
    object_fields: Fields,
    old_object_fields: Fields,
}

impl PartialEq for Expression {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root && self.returns == other.returns
    }
}

/// The static type of a node, where it is known without knowing the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Static {
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
    /// thread with a large stack (see `config::invariants::compile_on_large_stack`).
    pub fn compile(source: &str, returns: Returns) -> Result<Expression, CompileError> {
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
        let program = env().compile(source).map_err(|errors| {
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
        let at = |id: u64| position(source, program.source_info().offset_for(id));
        let root = program.expression();
        let mut check = Check {
            nodes: 0,
            names_old_object: false,
            at: &at,
        };
        check.walk(root, &mut Vec::new(), 1, 0)?;
        if let Some(found) = static_type(root, &[]) {
            let wanted = match returns {
                Returns::Bool => Static::Bool,
                Returns::String => Static::String,
            };
            if found != wanted {
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
        let mut object_fields = Fields::default();
        let mut old_object_fields = Fields::default();
        read_fields(root, &mut object_fields, &mut old_object_fields);
        let mut next_id = max_id(root) + 1;
        let root_id = root.id;
        let root = instrument(root.clone(), &mut next_id);
        let expression = Expression {
            root: Arc::new(root),
            returns,
            names_old_object: check.names_old_object,
            object_fields,
            old_object_fields,
        };
        // No type checker: where the tree does not tell the result's type, one evaluation on a
        // sample object often does (`object.metadata.name` as a condition). An evaluation that
        // fails on the sample says nothing: the real objects have the fields it lacks.
        if let Ok(value) = expression.evaluate(&Bindings::sample()) {
            let found = value.type_of().to_string();
            let wanted = match returns {
                Returns::Bool => "bool",
                Returns::String => "string",
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

    fn evaluate(&self, bindings: &Bindings<'_>) -> Result<Value, EvalError> {
        BUDGET_LEFT.with(|left| left.set(BUDGET));
        TRIPPED.with(|tripped| tripped.set(false));
        let root = &self.root;
        let context = &bindings.context;
        // The `cel` crate is a dependency: should it ever panic, that is one rule's failed
        // evaluation, not the writer's end.
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| context.resolve(root)));
        if TRIPPED.with(Cell::get) {
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

thread_local! {
    static BUDGET_LEFT: Cell<u64> = const { Cell::new(BUDGET) };
    static TRIPPED: Cell<bool> = const { Cell::new(false) };
}

/// Spends `units`; false (and tripped from now on) when they are not left.
fn charge(units: u64) -> bool {
    if TRIPPED.with(Cell::get) {
        return false;
    }
    let left = BUDGET_LEFT.with(Cell::get);
    if units > left {
        TRIPPED.with(|tripped| tripped.set(true));
        BUDGET_LEFT.with(|cell| cell.set(0));
        return false;
    }
    BUDGET_LEFT.with(|cell| cell.set(left - units));
    true
}

fn budget_spent() -> ExecutionError {
    ExecutionError::function_error("budget", "the evaluation budget is spent")
}

fn size_of(value: &dyn Val) -> u64 {
    value
        .as_sizer()
        .map(|sizer| u64::try_from(*sizer.size().inner()).unwrap_or(0))
        .unwrap_or(1)
}

/// What copying or comparing a value costs: one unit per list element, map entry and scalar at
/// every depth, and one per 16 bytes of a string. The count stops past the budget left, so
/// counting is bounded by the budget too.
fn deep_size(value: &dyn Val) -> u64 {
    let limit = BUDGET_LEFT.with(Cell::get).saturating_add(1);
    let mut count = 0u64;
    let mut pending: Vec<&dyn Val> = vec![value];
    while let Some(next) = pending.pop() {
        count += 1;
        if count > limit {
            break;
        }
        if let Some(list) = next.downcast_ref::<CelList>() {
            pending.extend(list.inner().iter().map(|item| item.as_ref()));
        } else if let Some(map) = next.downcast_ref::<CelMap>() {
            pending.extend(map.inner().values().map(|item| item.as_ref()));
            // Keys are hashed and copied too.
            for key in map.inner().keys() {
                if let CelMapKey::String(text) = key {
                    count += u64::try_from(text.inner().len() / 16).unwrap_or(u64::MAX);
                }
            }
        } else if let Some(text) = next.downcast_ref::<CelString>() {
            count += u64::try_from(text.inner().len() / 16).unwrap_or(u64::MAX);
        } else if let Some(bytes) = next.downcast_ref::<cel::common::types::CelBytes>() {
            count += u64::try_from(bytes.inner().len() / 16).unwrap_or(u64::MAX);
        }
    }
    count
}

type Handler = Box<
    dyn for<'c, 'a> Fn(&mut FunctionContext<'c, 'a>) -> Result<CowVal<'c, 'a>, ExecutionError>
        + Send
        + Sync,
>;

/// `@ds_range(range, cost)`: charges a comprehension's iterations before it starts.
fn range_handler() -> Handler {
    Box::new(|call: &mut FunctionContext<'_, '_>| {
        let mut args = std::mem::take(&mut call.args).into_iter();
        let (Some(range), Some(cost)) = (args.next(), args.next()) else {
            return Err(ExecutionError::invalid_argument_count(2, 0));
        };
        let cost = cost
            .downcast_ref::<CelInt>()
            .map(|cost| u64::try_from(*cost.inner()).unwrap_or(1))
            .unwrap_or(1);
        // Every pass of the body, and a copy of every item (the iteration variable is a copy).
        if !charge(
            size_of(range.as_ref())
                .saturating_mul(cost)
                .saturating_add(deep_size(range.as_ref())),
        ) {
            return Err(budget_spent());
        }
        Ok(range)
    })
}

/// Which values a charging function charges.
#[derive(Clone, Copy)]
enum Charged {
    /// Every value (`@ds_sized`: a built value; `@ds_charge`: an operand the work grows with).
    All,
    /// Strings and bytes (`@ds_charge_text`: read by a string function).
    Text,
    /// Lists (`@ds_charge_list`: searched by `in`; a map lookup is one step).
    List,
}

/// A function that charges its one argument for its size, at every depth, and returns it.
fn charging_handler(charged: Charged) -> Handler {
    Box::new(move |call: &mut FunctionContext<'_, '_>| {
        let Some(value) = std::mem::take(&mut call.args).into_iter().next() else {
            return Err(ExecutionError::invalid_argument_count(1, 0));
        };
        let applies = match charged {
            Charged::All => true,
            Charged::Text => {
                value.downcast_ref::<CelString>().is_some()
                    || value
                        .downcast_ref::<cel::common::types::CelBytes>()
                        .is_some()
            }
            Charged::List => value.downcast_ref::<CelList>().is_some(),
        };
        if applies && !charge(deep_size(value.as_ref())) {
            return Err(budget_spent());
        }
        Ok(value)
    })
}

/// `@ds_live(condition)`: a comprehension's loop condition, false once the budget is spent.
fn live_handler() -> Handler {
    Box::new(|call: &mut FunctionContext<'_, '_>| {
        let Some(value) = std::mem::take(&mut call.args).into_iter().next() else {
            return Err(ExecutionError::invalid_argument_count(1, 0));
        };
        if TRIPPED.with(Cell::get) {
            return Ok(CowVal::owned(CelBool::from(false)));
        }
        Ok(value)
    })
}

/// Compiled literal patterns, shared by every rule: `matches` with a literal pattern is compiled
/// once when its rule compiles, not on every call as the `cel` crate does.
fn patterns() -> &'static std::sync::Mutex<std::collections::HashMap<String, Arc<regex::Regex>>> {
    static PATTERNS: OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, Arc<regex::Regex>>>,
    > = OnceLock::new();
    PATTERNS.get_or_init(Default::default)
}

/// The compiled pattern (compiled and kept now if it is new and there is room).
fn pattern(source: &str) -> Result<Arc<regex::Regex>, String> {
    let mut cache = patterns()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = cache.get(source) {
        return Ok(Arc::clone(found));
    }
    let compiled = Arc::new(regex::Regex::new(source).map_err(|error| error.to_string())?);
    if cache.len() < MAX_CACHED_PATTERNS {
        cache.insert(source.to_string(), Arc::clone(&compiled));
    }
    Ok(compiled)
}

/// `@ds_matches(text, 'pattern')`: `text.matches('pattern')` with the pattern compiled once.
fn matches_handler() -> Handler {
    Box::new(|call: &mut FunctionContext<'_, '_>| {
        let mut args = std::mem::take(&mut call.args).into_iter();
        let (Some(text), Some(source)) = (args.next(), args.next()) else {
            return Err(ExecutionError::invalid_argument_count(2, 0));
        };
        let (Some(text), Some(source)) = (
            text.downcast_ref::<CelString>(),
            source.downcast_ref::<CelString>(),
        ) else {
            return Err(ExecutionError::function_error(
                "matches",
                "matches takes a string and a pattern string",
            ));
        };
        let compiled = pattern(source.inner())
            .map_err(|error| ExecutionError::function_error("matches", error))?;
        Ok(CowVal::owned(CelBool::from(
            compiled.is_match(text.inner()),
        )))
    })
}

/// The variables of one evaluation: the object (and the one before), borrowed.
pub struct Bindings<'v> {
    context: Context<'v, 'v>,
}

impl Bindings<'static> {
    /// An object with every part present and empty, to probe an expression's result type.
    fn sample() -> Bindings<'static> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        static EMPTY_OBJECT: OnceLock<serde_json::Value> = OnceLock::new();
        let spec = EMPTY_OBJECT.get_or_init(|| serde_json::json!({}));
        let view = ObjectView {
            api_version: "v1",
            kind: "Sample",
            name: "sample",
            namespace: "default",
            uid: "sample",
            resource_version: "1",
            generation: Some(1),
            creation_timestamp: None,
            deletion_timestamp: None,
            labels: &EMPTY,
            annotations: &EMPTY,
            owners: &[],
            spec,
            status: spec,
            data: Some(&EMPTY),
        };
        Bindings::new(&view, None, &Fields::everything(), &Fields::everything())
    }
}

impl<'v> Bindings<'v> {
    /// Binds `object`, and `oldObject`: the object before an update, `null` when there is none
    /// (its first sight, a re-assessment), as Kubernetes' admission CEL binds it on create.
    /// Only the parts the expressions read are bound (`object_fields`, `old_fields`: what
    /// [`Expression::fields`] says, merged over the expressions evaluated).
    pub fn new(
        object: &ObjectView<'v>,
        old: Option<&ObjectView<'v>>,
        object_fields: &Fields,
        old_fields: &Fields,
    ) -> Bindings<'v> {
        let mut context = Context::with_env(Arc::clone(env()));
        // The names are ours and cannot clash with the standard library's.
        let _ = context.add_function(RANGE, range_handler());
        let _ = context.add_function(SIZED, charging_handler(Charged::All));
        let _ = context.add_function(LIVE, live_handler());
        let _ = context.add_function(MATCHES, matches_handler());
        let _ = context.add_function(CHARGE, charging_handler(Charged::All));
        let _ = context.add_function(CHARGE_LIST, charging_handler(Charged::List));
        let _ = context.add_function(CHARGE_TEXT, charging_handler(Charged::Text));
        context.add_variable_as_val("object", object.to_val(object_fields));
        match old {
            Some(old) => context.add_variable_as_val("oldObject", old.to_val(old_fields)),
            None => context.add_variable_as_val("oldObject", Box::new(CelNull)),
        }
        Bindings { context }
    }
}

/// An object as an expression sees it: the fields of the Kubernetes object, borrowed.
pub struct ObjectView<'v> {
    /// `apiVersion`.
    pub api_version: &'v str,
    /// `kind`.
    pub kind: &'v str,
    /// `metadata.name`.
    pub name: &'v str,
    /// `metadata.namespace` (empty: cluster-scoped, left out).
    pub namespace: &'v str,
    /// `metadata.uid`.
    pub uid: &'v str,
    /// `metadata.resourceVersion`.
    pub resource_version: &'v str,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<&'v str>,
    /// `metadata.deletionTimestamp`.
    pub deletion_timestamp: Option<&'v str>,
    /// `metadata.labels` (always present, maybe empty).
    pub labels: &'v BTreeMap<String, String>,
    /// `metadata.annotations` (always present, maybe empty).
    pub annotations: &'v BTreeMap<String, String>,
    /// `metadata.ownerReferences`.
    pub owners: &'v [OwnerReference],
    /// `spec` (`null`: left out).
    pub spec: &'v serde_json::Value,
    /// `status` (`null`: left out).
    pub status: &'v serde_json::Value,
    /// `data`.
    pub data: Option<&'v BTreeMap<String, String>>,
}

fn text<'v>(value: &'v str) -> Box<dyn Val + 'v> {
    Box::new(CelString::from(value))
}

fn string_map<'v>(map: &'v BTreeMap<String, String>) -> Box<dyn Val + 'v> {
    let entries: std::collections::HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = map
        .iter()
        .map(|(key, value)| (CelMapKey::from(key.as_str()), text(value)))
        .collect();
    Box::new(CelMap::from(entries))
}

fn record<'v>(fields: Vec<(&'static str, Box<dyn Val + 'v>)>) -> Box<dyn Val + 'v> {
    let entries: std::collections::HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = fields
        .into_iter()
        .map(|(key, value)| (CelMapKey::from(key), value))
        .collect();
    Box::new(CelMap::from(entries))
}

impl<'v> ObjectView<'v> {
    fn to_val(&self, fields: &Fields) -> Box<dyn Val + 'v> {
        let mut top = vec![
            ("apiVersion", text(self.api_version)),
            ("kind", text(self.kind)),
        ];
        if fields.child("metadata").is_some() {
            top.push(("metadata", self.metadata()));
        }
        if let Some(spec) = fields.child("spec").filter(|_| !self.spec.is_null()) {
            top.push(("spec", pruned(self.spec, spec)));
        }
        if let Some(status) = fields.child("status").filter(|_| !self.status.is_null()) {
            top.push(("status", pruned(self.status, status)));
        }
        if let (Some(data), Some(_)) = (self.data, fields.child("data")) {
            top.push(("data", string_map(data)));
        }
        record(top)
    }

    fn metadata(&self) -> Box<dyn Val + 'v> {
        let mut metadata = vec![
            ("name", text(self.name)),
            ("uid", text(self.uid)),
            ("resourceVersion", text(self.resource_version)),
            ("labels", string_map(self.labels)),
            ("annotations", string_map(self.annotations)),
        ];
        if !self.namespace.is_empty() {
            metadata.push(("namespace", text(self.namespace)));
        }
        if let Some(generation) = self.generation {
            metadata.push(("generation", Box::new(CelInt::from(generation))));
        }
        if let Some(created) = self.creation_timestamp {
            metadata.push(("creationTimestamp", text(created)));
        }
        if let Some(deleted) = self.deletion_timestamp {
            metadata.push(("deletionTimestamp", text(deleted)));
        }
        if !self.owners.is_empty() {
            let owners: Vec<Box<dyn Val + 'v>> = self
                .owners
                .iter()
                .map(|owner| {
                    record(vec![
                        ("apiVersion", text(&owner.api_version)),
                        ("kind", text(&owner.kind)),
                        ("name", text(&owner.name)),
                        ("uid", text(&owner.uid)),
                        ("controller", Box::new(CelBool::from(owner.controller))),
                    ])
                })
                .collect();
            metadata.push(("ownerReferences", Box::new(CelList::from(owners))));
        }
        record(metadata)
    }
}

/// The parts of a JSON value that `fields` reads, as CEL sees them (see [`json`]).
fn pruned<'v>(value: &'v serde_json::Value, fields: &Fields) -> Box<dyn Val + 'v> {
    match value {
        serde_json::Value::Object(entries) if !fields.whole => {
            let entries: std::collections::HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = fields
                .children
                .iter()
                .filter_map(|(key, below)| {
                    entries
                        .get_key_value(key.as_str())
                        .map(|(key, value)| (CelMapKey::from(key.as_str()), pruned(value, below)))
                })
                .collect();
            Box::new(CelMap::from(entries))
        }
        _ => json(value),
    }
}

/// Adds to `object` and `old` the fields each is read through: every field selection chain
/// that starts at the variable (`object.spec.template.metadata.annotations`) reads the subtree
/// at its end; the variable used any other way reads it whole.
fn read_fields(node: &IdedExpr, object: &mut Fields, old: &mut Fields) {
    let mut path = Vec::new();
    let mut at = node;
    while let Expr::Select(select) = &at.expr {
        path.push(select.field.as_str());
        at = &select.operand;
    }
    if let Expr::Ident(name) = &at.expr {
        path.reverse();
        match name.as_str() {
            "object" => object.add(&path),
            "oldObject" => old.add(&path),
            _ => {}
        }
        return;
    }
    match &node.expr {
        Expr::Select(select) => read_fields(&select.operand, object, old),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                read_fields(target, object, old);
            }
            for arg in &call.args {
                read_fields(arg, object, old);
            }
        }
        Expr::List(list) => {
            for element in &list.elements {
                read_fields(element, object, old);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    read_fields(&entry.key, object, old);
                    read_fields(&entry.value, object, old);
                }
            }
        }
        Expr::Comprehension(comprehension) => {
            for part in [
                &comprehension.iter_range,
                &comprehension.accu_init,
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ] {
                read_fields(part, object, old);
            }
        }
        _ => {}
    }
}

/// A JSON value as CEL sees it, borrowed: integers stay `int` (as Kubernetes' CEL has them),
/// numbers beyond `int` are `uint` or `double`.
fn json<'v>(value: &'v serde_json::Value) -> Box<dyn Val + 'v> {
    match value {
        serde_json::Value::Null => Box::new(CelNull),
        serde_json::Value::Bool(value) => Box::new(CelBool::from(*value)),
        serde_json::Value::Number(number) => {
            if let Some(int) = number.as_i64() {
                Box::new(CelInt::from(int))
            } else if let Some(uint) = number.as_u64() {
                Box::new(CelUInt::from(uint))
            } else {
                Box::new(CelDouble::from(number.as_f64().unwrap_or(f64::NAN)))
            }
        }
        serde_json::Value::String(value) => text(value),
        serde_json::Value::Array(items) => {
            Box::new(CelList::from(items.iter().map(json).collect::<Vec<_>>()))
        }
        serde_json::Value::Object(entries) => {
            let entries: std::collections::HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = entries
                .iter()
                .map(|(key, value)| (CelMapKey::from(key.as_str()), json(value)))
                .collect();
            Box::new(CelMap::from(entries))
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
fn position(source: &str, offsets: Option<(u32, u32)>) -> (usize, usize) {
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
    nodes: usize,
    names_old_object: bool,
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
                    || VARIABLES.contains(&name.as_str())
                    || BUILT_IN_NAMES.contains(&name.as_str());
                if !known {
                    return Err(self.fail(
                        node.id,
                        format!(
                            "undeclared reference to '{name}' (the variables are `object` and \
                             `oldObject`)"
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
                        if let Err(error) = pattern(source.inner()) {
                            return Err(self.fail(
                                node.id,
                                format!("not a valid regular expression: {error}"),
                            ));
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
fn static_type(node: &IdedExpr, accumulators: &[(&str, Option<Static>)]) -> Option<Static> {
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

fn max_id(node: &IdedExpr) -> u64 {
    let mut highest = node.id;
    visit(node, &mut |child| highest = highest.max(child.id));
    highest
}

fn visit(node: &IdedExpr, each: &mut dyn FnMut(&IdedExpr)) {
    each(node);
    match &node.expr {
        Expr::Select(select) => visit(&select.operand, each),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                visit(target, each);
            }
            for arg in &call.args {
                visit(arg, each);
            }
        }
        Expr::List(list) => list
            .elements
            .iter()
            .for_each(|element| visit(element, each)),
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    visit(&entry.key, each);
                    visit(&entry.value, each);
                }
            }
        }
        Expr::Comprehension(comprehension) => {
            for part in [
                &comprehension.iter_range,
                &comprehension.accu_init,
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ] {
                visit(part, each);
            }
        }
        _ => {}
    }
}

/// What one pass of a comprehension's body costs: its nodes, a regular expression more, a
/// nested comprehension as its range (the nested one charges its own iterations).
fn body_cost(node: &IdedExpr) -> u64 {
    let own = match &node.expr {
        Expr::Call(call) if call.func_name == "matches" => 1 + MATCHES_COST,
        _ => 1,
    };
    let children: u64 = match &node.expr {
        Expr::Select(select) => body_cost(&select.operand),
        Expr::Call(call) => {
            call.target.as_deref().map_or(0, body_cost)
                + call.args.iter().map(body_cost).sum::<u64>()
        }
        Expr::List(list) => list.elements.iter().map(body_cost).sum(),
        Expr::Map(map) => map
            .entries
            .iter()
            .map(|entry| match &entry.expr {
                EntryExpr::MapEntry(entry) => body_cost(&entry.key) + body_cost(&entry.value),
                EntryExpr::StructField(_) => 0,
            })
            .sum(),
        Expr::Comprehension(comprehension) => {
            body_cost(&comprehension.iter_range) + body_cost(&comprehension.accu_init)
        }
        _ => 0,
    };
    own + children
}

fn call(id: &mut u64, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    *id += 1;
    IdedExpr {
        id: *id,
        expr: Expr::Call(CallExpr {
            func_name: name.to_string(),
            target: None,
            args,
        }),
    }
}

/// Rewrites the tree so that every evaluation is charged (see the module docs).
fn instrument(node: IdedExpr, id: &mut u64) -> IdedExpr {
    let IdedExpr { id: own, expr } = node;
    let expr = match expr {
        Expr::Select(mut select) => {
            select.operand = Box::new(instrument(*select.operand, id));
            Expr::Select(select)
        }
        Expr::Call(mut inner) => {
            // `text.matches('literal')` (or `matches(text, 'literal')`): the pattern compiled
            // once (it was checked when the rule compiled).
            if inner.func_name == "matches" {
                let literal =
                    |node: &IdedExpr| matches!(&node.expr, Expr::Literal(LiteralValue::String(_)));
                let operands = match (inner.target.take(), inner.args.len()) {
                    (Some(target), 1) if literal(&inner.args[0]) => {
                        Some(vec![*target, inner.args.remove(0)])
                    }
                    (None, 2) if literal(&inner.args[1]) => Some(std::mem::take(&mut inner.args)),
                    (target, _) => {
                        inner.target = target;
                        None
                    }
                };
                if let Some(operands) = operands {
                    let mut operands: Vec<IdedExpr> = operands
                        .into_iter()
                        .map(|operand| instrument(operand, id))
                        .collect();
                    // The match scans the text.
                    let text = operands.remove(0);
                    operands.insert(0, call(id, CHARGE, vec![text]));
                    return IdedExpr {
                        id: own,
                        expr: Expr::Call(CallExpr {
                            func_name: MATCHES.to_string(),
                            target: None,
                            args: operands,
                        }),
                    };
                }
            }
            inner.target = inner.target.map(|target| Box::new(instrument(*target, id)));
            inner.args = inner
                .args
                .into_iter()
                .map(|arg| instrument(arg, id))
                .collect();
            // Work that grows with an operand is charged for the operand's size: a scan of the
            // receiver string, `in` over a list, comparing two lists or maps.
            let name = inner.func_name.as_str();
            // A literal is bounded by the source, and an operand the tree shows to be a number
            // or a bool (`int(...)`, `size(...)`, a comparison) costs one step: neither is
            // charged (each charge is a function call of its own).
            let literal = |node: &IdedExpr| {
                matches!(node.expr, Expr::Literal(_))
                    || matches!(
                        static_type(node, &[]),
                        Some(Static::Int | Static::UInt | Static::Double | Static::Bool)
                    )
            };
            if SCANNING.contains(&name) {
                let text = |node: IdedExpr, id: &mut u64| {
                    if literal(&node) {
                        node
                    } else {
                        call(id, CHARGE_TEXT, vec![node])
                    }
                };
                inner.target = inner.target.map(|target| Box::new(text(*target, id)));
                inner.args = std::mem::take(&mut inner.args)
                    .into_iter()
                    .map(|arg| text(arg, id))
                    .collect();
            } else if name == "_[_]" && inner.args.len() == 2 && !literal(&inner.args[1]) {
                // A key is hashed (a string key for its length); the container is not copied.
                let key = inner.args.remove(1);
                inner.args.push(call(id, CHARGE_TEXT, vec![key]));
            } else if name == "@in" && inner.args.len() == 2 {
                // The needle is hashed or compared; a list container is scanned.
                let container = inner.args.remove(1);
                let needle = inner.args.remove(0);
                let needle = if literal(&needle) {
                    needle
                } else {
                    call(id, CHARGE_TEXT, vec![needle])
                };
                let container = if matches!(container.expr, Expr::List(_)) {
                    container
                } else {
                    call(id, CHARGE_LIST, vec![container])
                };
                inner.args = vec![needle, container];
            } else if matches!(name, "_==_" | "_!=_")
                // Against a literal, a comparison is as short as the literal.
                && !inner
                    .args
                    .iter()
                    .any(|operand| matches!(operand.expr, Expr::Literal(_)))
            {
                inner.args = std::mem::take(&mut inner.args)
                    .into_iter()
                    .map(|operand| call(id, CHARGE, vec![operand]))
                    .collect();
            }
            // `@result + [item]`, the step of `map` and `filter`, is left as it is: the crate
            // builds it in place (the item is charged as a list literal's element).
            let appends = matches!(
                inner.args.first().map(|arg| &arg.expr),
                Some(Expr::Ident(name)) if name.starts_with('@')
            );
            let growing = GROWING.contains(&inner.func_name.as_str()) && !appends;
            let rebuilt = IdedExpr {
                id: own,
                expr: Expr::Call(inner),
            };
            if growing {
                return call(id, SIZED, vec![rebuilt]);
            }
            return rebuilt;
        }
        Expr::List(mut list) => {
            // A list literal holds copies of its elements.
            list.elements = list
                .elements
                .into_iter()
                .map(|element| {
                    let literal = matches!(element.expr, Expr::Literal(_));
                    let element = instrument(element, id);
                    if literal {
                        element
                    } else {
                        call(id, CHARGE, vec![element])
                    }
                })
                .collect();
            Expr::List(list)
        }
        Expr::Map(mut map) => {
            // A map literal holds copies of its keys and values.
            let copied = |node: IdedExpr, id: &mut u64| {
                let literal = matches!(node.expr, Expr::Literal(_));
                let node = instrument(node, id);
                if literal {
                    node
                } else {
                    call(id, CHARGE, vec![node])
                }
            };
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(entry) = &mut entry.expr {
                    entry.key = copied(std::mem::take(&mut entry.key), id);
                    entry.value = copied(std::mem::take(&mut entry.value), id);
                }
            }
            Expr::Map(map)
        }
        Expr::Comprehension(comprehension) => {
            let ComprehensionExpr {
                iter_range,
                iter_var,
                iter_var2,
                accu_var,
                accu_init,
                loop_cond,
                loop_step,
                result,
            } = *comprehension;
            let cost = body_cost(&loop_cond) + body_cost(&loop_step);
            let iter_range = instrument(iter_range, id);
            *id += 1;
            let cost_literal = IdedExpr {
                id: *id,
                expr: Expr::Literal(LiteralValue::Int(CelInt::from(
                    i64::try_from(cost).unwrap_or(i64::MAX),
                ))),
            };
            let iter_range = call(id, RANGE, vec![iter_range, cost_literal]);
            let loop_cond_is_literal = matches!(loop_cond.expr, Expr::Literal(_));
            let loop_cond = instrument(loop_cond, id);
            // A literal condition is left alone: `map` and `filter` are recognised by it and
            // built in place (their steps fail at once when the budget is spent).
            let loop_cond = if loop_cond_is_literal {
                loop_cond
            } else {
                call(id, LIVE, vec![loop_cond])
            };
            Expr::Comprehension(Box::new(ComprehensionExpr {
                iter_range,
                iter_var,
                iter_var2,
                accu_var,
                accu_init: instrument(accu_init, id),
                loop_cond,
                loop_step: instrument(loop_step, id),
                result: instrument(result, id),
            }))
        }
        other => other,
    };
    IdedExpr { id: own, expr }
}

/// An object for the tests: a namespaced `kind` with this spec and labels, nothing else.
#[cfg(test)]
fn sample_view<'v>(
    kind: &'v str,
    spec: &'v serde_json::Value,
    labels: &'v BTreeMap<String, String>,
) -> ObjectView<'v> {
    ObjectView {
        api_version: "v1",
        kind,
        name: "d",
        namespace: "n",
        uid: "u",
        resource_version: "1",
        generation: Some(1),
        creation_timestamp: None,
        deletion_timestamp: None,
        labels,
        annotations: labels,
        owners: &[],
        spec,
        status: &serde_json::Value::Null,
        data: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let bad =
            serde_json::json!({"template": {"spec": {"containers": [{"image": "a:latest"}]}}});
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
        let error =
            Expression::compile("object.spec.a == 1 &&\n  objct.spec.b == 2", Returns::Bool)
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
        let error = Expression::compile("object.spec.containers.all(c, c.image)", Returns::String)
            .unwrap_err();
        assert!(error.message.contains("returns a bool"), "{error}");
        // Variables bound by a macro are in scope in its body only.
        let error = Expression::compile("object.spec.xs.all(x, x > 0) && x == 1", Returns::Bool)
            .unwrap_err();
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
        let long_bindings =
            Bindings::new(&long_view, None, &Fields::everything(), &Fields::default());
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
}

#[cfg(test)]
mod stack_tests {
    use super::*;

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
                let bindings =
                    Bindings::new(&view, None, &Fields::everything(), &Fields::default());
                expression.holds(&bindings)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(holds, Ok(true));
    }
}

#[cfg(test)]
mod field_tests {
    use super::*;

    fn fields(source: &str) -> (Fields, Fields) {
        let expression = Expression::compile(source, Returns::Bool).unwrap();
        let (object, old) = expression.fields();
        (object.clone(), old.clone())
    }

    #[test]
    fn an_expression_reads_the_subtrees_its_selections_reach() {
        let (object, old) = fields(
            "has(object.spec.delivery) && object.spec.template.spec.containers.all(c, c.image != '') \
             && object.metadata.annotations['a/b'] == 'x' && oldObject == null",
        );
        let mut expected = Fields::default();
        expected.add(&["spec", "delivery"]);
        expected.add(&["spec", "template", "spec", "containers"]);
        expected.add(&["metadata", "annotations"]);
        assert_eq!(object, expected);
        assert_eq!(old, Fields::everything());
        // `object` used whole reads everything.
        let (object, _) = fields("size(object) > 0");
        assert_eq!(object, Fields::everything());
    }

    #[test]
    fn a_pruned_object_judges_as_the_whole_one() {
        let spec = serde_json::json!({
            "template": {"metadata": {"annotations": {"a": "1"}},
                         "spec": {"containers": [{"image": "x:1", "env": [{"name": "A", "value": "1"}]}]}},
            "traffic": [{"percent": 100}]
        });
        let empty = BTreeMap::new();
        let view = sample_view("Service", &spec, &empty);
        for source in [
            "has(object.spec.template.metadata.annotations.a)",
            "has(object.spec.delivery)",
            "object.spec.template.spec.containers.all(c, c.image.endsWith(':1'))",
            "object.spec.traffic[0].percent == 100",
            "!has(object.status)",
            "object.spec.template.metadata.annotations.size() == 1",
        ] {
            let expression = Expression::compile(source, Returns::Bool).unwrap();
            let (reads, _) = expression.fields();
            let whole = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
            let pruned = Bindings::new(&view, None, reads, &Fields::default());
            assert_eq!(
                expression.holds(&pruned),
                expression.holds(&whole),
                "{source}"
            );
            assert_eq!(
                expression.holds(&whole),
                Ok(!source.contains("delivery")),
                "{source}"
            );
        }
    }
}
