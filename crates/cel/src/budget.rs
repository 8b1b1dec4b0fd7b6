//! The budget of one evaluation, spent as it runs: the internal functions that the rewrite
//! (`instrument`) puts into every expression, which charge a comprehension's iterations before
//! it starts and a value for its size, and fail once the budget is spent. The budget is
//! per thread, reset at the start of every evaluation ([`start`]).

use std::cell::Cell;

use cel::common::types::{CelBool, CelInt, CelList, CelMap, CelMapKey, CelString};
use cel::common::value::{CowVal, Val};
use cel::{Context, ExecutionError, FunctionContext};

use std::sync::Arc;

use crate::patterns::{
    compiled_literal, dynamic_pattern, Pattern, DYNAMIC_SIZE_LIMIT, MAX_DYNAMIC_PATTERN_BYTES,
};
use crate::BUDGET;

/// Internal functions of the rewrite; CEL source cannot name them (`@` starts no identifier).
pub(crate) const RANGE: &str = "@ds_range";
pub(crate) const SIZED: &str = "@ds_sized";
pub(crate) const LIVE: &str = "@ds_live";
pub(crate) const MATCHES: &str = "@ds_matches";
/// Internal: `matches` with a pattern computed at evaluation (see `dynamic_matches_handler`).
pub(crate) const MATCHES_DYNAMIC: &str = "@ds_matches_dynamic";
/// Internal: charges a value for its size and returns it.
pub(crate) const CHARGE: &str = "@ds_charge";
/// Internal: charges a list for its size (`in` scans a list; a map lookup is one step).
pub(crate) const CHARGE_LIST: &str = "@ds_charge_list";
/// Internal: charges a string (or bytes) for its length, anything else nothing.
pub(crate) const CHARGE_TEXT: &str = "@ds_charge_text";

/// Registers the internal functions on an evaluation's context.
pub(crate) fn install(context: &mut Context<'_, '_>) {
    // The names are ours and cannot clash with the standard library's.
    let _ = context.add_function(RANGE, range_handler());
    let _ = context.add_function(SIZED, charging_handler(Charged::All));
    let _ = context.add_function(LIVE, live_handler());
    let _ = context.add_function(MATCHES, matches_handler());
    let _ = context.add_function(MATCHES_DYNAMIC, dynamic_matches_handler());
    let _ = context.add_function(CHARGE, charging_handler(Charged::All));
    let _ = context.add_function(CHARGE_LIST, charging_handler(Charged::List));
    let _ = context.add_function(CHARGE_TEXT, charging_handler(Charged::Text));
}

thread_local! {
    static BUDGET_LEFT: Cell<u64> = const { Cell::new(BUDGET) };
    static TRIPPED: Cell<bool> = const { Cell::new(false) };
    /// The backstop's clock on this thread (microseconds, monotonic), if the thread's owner
    /// gave one ([`crate::set_backstop_clock`]); `None`: cost alone bounds the evaluation.
    static CLOCK: Cell<Option<fn() -> u64>> = const { Cell::new(None) };
    /// When this thread's evaluation passes its backstop, on [`CLOCK`].
    static DEADLINE: Cell<u64> = const { Cell::new(u64::MAX) };
    /// Charges since the clock was last read.
    static SINCE_LOOK: Cell<u32> = const { Cell::new(0) };
}

/// The clock is read once every this many charges, and at every search: reading it costs about
/// as much as a charge, while a charge between two looks is at most a few microseconds of work.
const CHARGES_PER_LOOK: u32 = 64;

/// Sets (or clears) this thread's backstop clock.
pub(crate) fn set_clock(clock: Option<fn() -> u64>) {
    CLOCK.with(|cell| cell.set(clock));
}

/// Resets this thread's budget for a new evaluation: all of [`BUDGET`] left, not tripped, and
/// the backstop [`crate::BACKSTOP_MICROS`] from now when the thread has a clock.
pub(crate) fn start() {
    BUDGET_LEFT.with(|left| left.set(BUDGET));
    TRIPPED.with(|tripped| tripped.set(false));
    SINCE_LOOK.with(|count| count.set(0));
    let deadline = CLOCK.with(Cell::get).map_or(u64::MAX, |clock| {
        clock().saturating_add(crate::BACKSTOP_MICROS)
    });
    DEADLINE.with(|cell| cell.set(deadline));
}

/// True (and tripped from now on) when the evaluation ran past its backstop: an operation the
/// cost model prices too low (or a machine much slower than the one it was priced on) still
/// cannot hold the thread. `now`: read the clock whatever the count.
pub(crate) fn past_backstop(now: bool) -> bool {
    let Some(clock) = CLOCK.with(Cell::get) else {
        return false;
    };
    let count = SINCE_LOOK.with(Cell::get) + 1;
    if !now && count < CHARGES_PER_LOOK {
        SINCE_LOOK.with(|cell| cell.set(count));
        return false;
    }
    SINCE_LOOK.with(|cell| cell.set(0));
    if clock() < DEADLINE.with(Cell::get) {
        return false;
    }
    TRIPPED.with(|tripped| tripped.set(true));
    BUDGET_LEFT.with(|cell| cell.set(0));
    true
}

/// True when this thread's evaluation has spent its budget (and was stopped).
pub(crate) fn tripped() -> bool {
    TRIPPED.with(Cell::get)
}

/// Spends `units`; false (and tripped from now on) when they are not left.
pub(crate) fn charge(units: u64) -> bool {
    if TRIPPED.with(Cell::get) || past_backstop(false) {
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

/// The units this thread's evaluation has left.
pub(crate) fn left() -> u64 {
    BUDGET_LEFT.with(Cell::get)
}

pub(crate) fn budget_spent() -> ExecutionError {
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

pub(crate) type Handler = Box<
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

/// Program bytes times text bytes that one unit of the budget pays for when matching: a search
/// costs, at worst (when the lazy DFA gives up, e.g. on a Unicode word boundary over
/// non-ASCII text), about the text's length times the program's size. Measured at about 6e-4
/// ns per byte per program byte, so one unit (about 100 ns) per 100,000, with a margin.
const MATCH_BYTES_PER_UNIT: u64 = 100_000;
/// Program bytes one unit pays for when compiling (a compile's time grows with the program it
/// builds: about 0.3 ms for the [`DYNAMIC_SIZE_LIMIT`] of 64 KiB).
const COMPILE_BYTES_PER_UNIT: u64 = 16;

/// What matching a text of `text_bytes` with a program of `program_bytes` costs.
fn match_cost(text_bytes: usize, program_bytes: usize) -> u64 {
    let text = u64::try_from(text_bytes).unwrap_or(u64::MAX);
    let program = u64::try_from(program_bytes).unwrap_or(u64::MAX);
    text.saturating_mul(program) / MATCH_BYTES_PER_UNIT
}

/// What compiling a dynamic pattern costs: its length (parsing), then the program it built, or
/// for a pattern refused the most a compile may build. The same from the cache as compiled, so
/// an evaluation's verdict never depends on what earlier ones left in the cache.
fn compile_cost(compiled: &Result<Arc<Pattern>, String>) -> u64 {
    let built = match compiled {
        Ok(compiled) => compiled.program_bytes(),
        Err(_) => DYNAMIC_SIZE_LIMIT,
    };
    u64::try_from(built).unwrap_or(u64::MAX) / COMPILE_BYTES_PER_UNIT
}

/// Runs `matching` on the text and the pattern of a `matches` call (both strings).
fn with_matches_operands<'c, 'a>(
    call: &mut FunctionContext<'c, 'a>,
    matching: impl FnOnce(&str, &str) -> Result<CowVal<'c, 'a>, ExecutionError>,
) -> Result<CowVal<'c, 'a>, ExecutionError> {
    let mut args = std::mem::take(&mut call.args).into_iter();
    let (Some(text), Some(source)) = (args.next(), args.next()) else {
        return Err(ExecutionError::invalid_argument_count(2, 0));
    };
    match (
        text.downcast_ref::<CelString>(),
        source.downcast_ref::<CelString>(),
    ) {
        (Some(text), Some(source)) => matching(text.inner(), source.inner()),
        _ => Err(ExecutionError::function_error(
            "matches",
            "matches takes a string and a pattern string",
        )),
    }
}

/// Charges the search of `text` with `compiled`, then runs it.
fn run_match<'c, 'a>(text: &str, compiled: &Pattern) -> Result<CowVal<'c, 'a>, ExecutionError> {
    if past_backstop(true) || !charge(match_cost(text.len(), compiled.program_bytes())) {
        return Err(budget_spent());
    }
    let found = compiled.is_match(text);
    // A search cannot be interrupted: one that ran past the backstop ends the evaluation.
    if past_backstop(true) {
        return Err(budget_spent());
    }
    Ok(CowVal::owned(CelBool::from(found)))
}

/// `@ds_matches(text, 'pattern')`: `text.matches('pattern')` with the pattern compiled when
/// its rule compiled (the expression holds it); the search is charged for the text's length
/// times the program's size. A literal the expression does not hold (none should be) is taken
/// as a dynamic pattern is: charged for compiling it, never compiled for free.
fn matches_handler() -> Handler {
    Box::new(|call: &mut FunctionContext<'_, '_>| {
        with_matches_operands(call, |text, source| match compiled_literal(source) {
            Some(compiled) => run_match(text, &compiled),
            None => dynamic_match(text, source),
        })
    })
}

/// `@ds_matches_dynamic(text, pattern)`: `text.matches(pattern)` with a pattern computed at
/// evaluation (from the object), see [`dynamic_match`].
fn dynamic_matches_handler() -> Handler {
    Box::new(|call: &mut FunctionContext<'_, '_>| with_matches_operands(call, dynamic_match))
}

/// `text.matches(source)` with a pattern not compiled with its rule: charged for its length
/// and for compiling it before it is compiled (or taken from the cache), compiled under
/// [`DYNAMIC_SIZE_LIMIT`], then charged for the search as a literal pattern is.
fn dynamic_match<'c, 'a>(text: &str, source: &str) -> Result<CowVal<'c, 'a>, ExecutionError> {
    if !charge(u64::try_from(source.len()).unwrap_or(u64::MAX)) {
        return Err(budget_spent());
    }
    if source.len() > MAX_DYNAMIC_PATTERN_BYTES {
        return Err(ExecutionError::function_error(
            "matches",
            format!(
                "a pattern computed from the object may be at most \
                 {MAX_DYNAMIC_PATTERN_BYTES} bytes long; this one is {}",
                source.len()
            ),
        ));
    }
    if past_backstop(true) {
        return Err(budget_spent());
    }
    let compiled = dynamic_pattern(source);
    if past_backstop(true) || !charge(compile_cost(&compiled)) {
        return Err(budget_spent());
    }
    let compiled = compiled.map_err(|error| {
        ExecutionError::function_error(
            "matches",
            format!("a pattern computed from the object is refused: {error}"),
        )
    })?;
    run_match(text, &compiled)
}

/// What this thread's evaluation has spent so far (the last one's total once it ended).
#[cfg(test)]
pub(crate) fn spent() -> u64 {
    BUDGET - BUDGET_LEFT.with(Cell::get)
}
