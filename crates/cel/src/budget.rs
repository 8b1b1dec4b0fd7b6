//! The budget of one evaluation, spent as it runs: the internal functions that the rewrite
//! (`instrument`) puts into every expression, which charge a comprehension's iterations before
//! it starts and a value for its size, and fail once the budget is spent. The budget is
//! per thread, reset at the start of every evaluation ([`start`]).

use std::cell::Cell;

use cel::common::types::{CelBool, CelInt, CelList, CelMap, CelMapKey, CelString};
use cel::common::value::{CowVal, Val};
use cel::{Context, ExecutionError, FunctionContext};

use crate::patterns::pattern;
use crate::BUDGET;

/// Internal functions of the rewrite; CEL source cannot name them (`@` starts no identifier).
pub(crate) const RANGE: &str = "@ds_range";
pub(crate) const SIZED: &str = "@ds_sized";
pub(crate) const LIVE: &str = "@ds_live";
pub(crate) const MATCHES: &str = "@ds_matches";
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
    let _ = context.add_function(CHARGE, charging_handler(Charged::All));
    let _ = context.add_function(CHARGE_LIST, charging_handler(Charged::List));
    let _ = context.add_function(CHARGE_TEXT, charging_handler(Charged::Text));
}

thread_local! {
    static BUDGET_LEFT: Cell<u64> = const { Cell::new(BUDGET) };
    static TRIPPED: Cell<bool> = const { Cell::new(false) };
}

/// Resets this thread's budget for a new evaluation: all of [`BUDGET`] left, not tripped.
pub(crate) fn start() {
    BUDGET_LEFT.with(|left| left.set(BUDGET));
    TRIPPED.with(|tripped| tripped.set(false));
}

/// True when this thread's evaluation has spent its budget (and was stopped).
pub(crate) fn tripped() -> bool {
    TRIPPED.with(Cell::get)
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
