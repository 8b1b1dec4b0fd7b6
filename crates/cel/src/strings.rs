//! The strings extension's functions whose work does not follow from their operands' sizes,
//! done here instead of by the `cel` crate, charged before they run: `indexOf` and
//! `lastIndexOf` (cel 0.15 searches naively, every position times the needle's length, so a
//! long needle makes one call quadratic), `replace` (cel builds the whole result, of any size,
//! before anything can charge it) and `split` (one allocation per part, a million parts from
//! one megabyte), `join` (a long separator between many elements is their product, built
//! before it is charged). The rewrite (`instrument`) turns `text.f(args)` into `@ds_f(text, args)`.
//!
//! The results and the errors are the `cel` crate's, for every input (a differential test
//! holds them to it): positions count code points, an offset out of range is
//! `index out of range: N`, an empty needle or separator behaves as cel's does. The searches
//! are the standard library's (`str::find`, `rfind`, `matches`, `replace`, `split`: the
//! Two-Way algorithm, linear in the text and the needle at worst).

use std::cell::Cell;

use cel::common::types::{CelInt, CelList, CelString, Kind};
use cel::common::value::{CowVal, Val};
use cel::{Context, ExecutionError, FunctionContext};

use crate::budget::{budget_spent, charge, left, past_backstop, Handler};

pub(crate) const INDEX_OF: &str = "@ds_indexOf";
pub(crate) const LAST_INDEX_OF: &str = "@ds_lastIndexOf";
pub(crate) const REPLACE: &str = "@ds_replace";
pub(crate) const SPLIT: &str = "@ds_split";
pub(crate) const JOIN: &str = "@ds_join";

/// The member functions rewritten, and what they become.
pub(crate) const REWRITTEN: &[(&str, &str)] = &[
    ("indexOf", INDEX_OF),
    ("lastIndexOf", LAST_INDEX_OF),
    ("replace", REPLACE),
    ("split", SPLIT),
    ("join", JOIN),
];

/// Bytes searched (or counted in) per unit, as every other string read is charged: the
/// standard library's search took at most 1.3 ns a byte of text and needle on the worst inputs
/// measured (`a`×249,999 + `b` in `a`×750,000, either way round), and counting one-byte
/// occurrences 1.9 ns (BENCHMARKS.md, "Hostile CEL"): 16 bytes a unit is 6.25 ns a byte.
const SCANNED_BYTES_PER_UNIT: u64 = 16;
/// Bytes built (copied into a result) per unit, as every other value built is charged.
const BUILT_BYTES_PER_UNIT: u64 = 16;
/// Occurrences replaced per unit: each is a search step and a copy of the replacement (3.3 to
/// 4.1 ns measured; 8 a unit is 12.5 ns).
const OCCURRENCES_PER_UNIT: u64 = 8;
/// Units per part of a `split`: each part is a string allocated, boxed into the list, and
/// dropped with it (about 180 ns each in the service, the re-review measured: 3 units are
/// 300 ns, a margin of 1.6 as for `matches`).
const UNITS_PER_PART: u64 = 3;

thread_local! {
    /// Calls done here on this thread, and the bytes of the strings they built (tests count
    /// work, not time).
    static CALLS: Cell<u64> = const { Cell::new(0) };
    static BUILT: Cell<u64> = const { Cell::new(0) };
}

/// How many calls this thread's handlers took, and how many bytes of results they built.
#[cfg(test)]
pub(crate) fn work_on_this_thread() -> (u64, u64) {
    (CALLS.with(Cell::get), BUILT.with(Cell::get))
}

fn count_built(bytes: usize) {
    BUILT.with(|built| built.set(built.get().saturating_add(bytes as u64)));
}

/// Registers the functions on an evaluation's context.
pub(crate) fn install(context: &mut Context<'_, '_>) {
    let _ = context.add_function(INDEX_OF, handler("indexOf", index_of));
    let _ = context.add_function(LAST_INDEX_OF, handler("lastIndexOf", last_index_of));
    let _ = context.add_function(REPLACE, handler("replace", replace));
    let _ = context.add_function(SPLIT, handler("split", split));
    let _ = context.add_function(JOIN, join_handler());
}

/// `list.join([separator])`: the strings of the list with the separator between them. cel
/// builds the result first, and a long separator between many elements is their product: the
/// size is added up first (a walk of the list, charged as reading it is) and charged, then it
/// is built as cel builds it.
fn join_handler() -> Handler {
    Box::new(|call: &mut FunctionContext<'_, '_>| {
        let args = std::mem::take(&mut call.args);
        let no_overload = || {
            ExecutionError::no_such_member_overload(
                "join",
                args.iter()
                    .map(|arg| arg.get_type().name().to_owned())
                    .collect(),
            )
        };
        let (list, separator) = match args.as_slice() {
            [list] => (list, ""),
            [list, separator] => match separator.downcast_ref::<CelString>() {
                Some(separator) => (list, separator.inner()),
                None => return Err(no_overload()),
            },
            _ => return Err(no_overload()),
        };
        if list.get_type().kind() != Kind::List {
            return Err(no_overload());
        }
        CALLS.with(|calls| calls.set(calls.get() + 1));
        let iterable = list
            .as_iterable()
            .ok_or_else(|| ExecutionError::UnexpectedType {
                got: list.get_type().name().to_owned(),
                want: "iterable".to_owned(),
            })?;
        // The walk: one unit per element (each was charged when it was built or read).
        let mut parts: Vec<&str> = Vec::new();
        let mut items = iterable.iter();
        while let Some(item) = items.next() {
            if !charge(1) {
                return Err(budget_spent());
            }
            let text =
                item.downcast_ref::<CelString>()
                    .ok_or_else(|| ExecutionError::UnexpectedType {
                        got: item.get_type().name().to_owned(),
                        want: "string".to_owned(),
                    })?;
            parts.push(text.inner());
        }
        let size = parts
            .iter()
            .map(|part| part.len() as u64)
            .sum::<u64>()
            .saturating_add(
                (parts.len().saturating_sub(1) as u64).saturating_mul(separator.len() as u64),
            );
        if !charge(size / BUILT_BYTES_PER_UNIT) {
            return Err(budget_spent());
        }
        let joined = parts.join(separator);
        count_built(joined.len());
        Ok(CowVal::owned(CelString::from(joined)))
    })
}

/// A string function's operands: the text, its string arguments, and its int argument (an
/// offset or a count), when they are of the types one of cel's overloads takes.
struct Operands<'o> {
    text: &'o str,
    strings: Vec<&'o str>,
    int: Option<i64>,
}

type Work = fn(&Operands<'_>) -> Result<Box<dyn Val>, ExecutionError>;

/// The handler of `name`: the operands checked against cel's overloads (strings, then an
/// optional int), then `work`, which charges before it does anything that grows.
fn handler(name: &'static str, work: Work) -> Handler {
    Box::new(move |call: &mut FunctionContext<'_, '_>| {
        let args = std::mem::take(&mut call.args);
        let strings_wanted = if matches!(name, "replace") { 3 } else { 2 };
        let operands = operands(&args, strings_wanted).ok_or_else(|| {
            // What cel says when no overload takes these operands.
            ExecutionError::no_such_member_overload(
                name,
                args.iter()
                    .map(|arg| arg.get_type().name().to_owned())
                    .collect(),
            )
        })?;
        CALLS.with(|calls| calls.set(calls.get() + 1));
        // The scan of the operands: charged for their length before anything reads them.
        let scanned = operands
            .strings
            .iter()
            .map(|text| text.len() as u64)
            .sum::<u64>()
            / SCANNED_BYTES_PER_UNIT;
        if !charge(1 + scanned) {
            return Err(budget_spent());
        }
        let result = work(&operands)?;
        // The work was charged before it ran, and is linear: this only catches a machine far
        // slower than the one the units were priced on.
        if past_backstop(true) {
            return Err(budget_spent());
        }
        Ok(CowVal::Owned(result))
    })
}

/// The operands when they fit an overload: `strings_wanted` strings (the text first), then at
/// most one int.
fn operands<'o>(args: &'o [CowVal<'_, '_>], strings_wanted: usize) -> Option<Operands<'o>> {
    if args.len() != strings_wanted && args.len() != strings_wanted + 1 {
        return None;
    }
    let strings = args[..strings_wanted]
        .iter()
        .map(|arg| arg.downcast_ref::<CelString>().map(|text| text.inner()))
        .collect::<Option<Vec<&str>>>()?;
    let int = match args.get(strings_wanted) {
        Some(arg) => Some(*arg.downcast_ref::<CelInt>()?.inner()),
        None => None,
    };
    Some(Operands {
        text: strings[0],
        strings,
        int,
    })
}

fn out_of_range(function: &str, index: i64) -> ExecutionError {
    ExecutionError::function_error(function, format!("index out of range: {index}"))
}

fn int(value: i64) -> Box<dyn Val> {
    Box::new(CelInt::from(value))
}

/// The code-point index of byte `at` (a character boundary) of `text`.
fn code_point(text: &str, at: usize) -> i64 {
    i64::try_from(text[..at].chars().count()).unwrap_or(i64::MAX)
}

/// The byte where code point `index` of `text` starts (the end when it is the count).
fn byte_of(text: &str, index: usize) -> usize {
    text.char_indices()
        .nth(index)
        .map_or(text.len(), |(at, _)| at)
}

/// Checks an offset as cel does: negative, or (with a needle) at or past the end, is out of
/// range; with an empty needle the answer is the offset, at most the length.
fn offset_or_answer(
    function: &str,
    text: &str,
    needle: &str,
    offset: i64,
) -> Result<Result<usize, i64>, ExecutionError> {
    if offset < 0 {
        return Err(out_of_range(function, offset));
    }
    let length = i64::try_from(text.chars().count()).unwrap_or(i64::MAX);
    if needle.is_empty() {
        return Ok(Err(offset.min(length)));
    }
    if offset >= length {
        return Err(out_of_range(function, offset));
    }
    Ok(Ok(usize::try_from(offset).unwrap_or(usize::MAX)))
}

/// `text.indexOf(needle[, offset])`: the code-point index of the first occurrence at or after
/// `offset`, -1 when there is none.
fn index_of(operands: &Operands<'_>) -> Result<Box<dyn Val>, ExecutionError> {
    let (text, needle) = (operands.text, operands.strings[1]);
    let Some(offset) = operands.int else {
        return Ok(int(text.find(needle).map_or(-1, |at| code_point(text, at))));
    };
    let offset = match offset_or_answer("indexOf", text, needle, offset)? {
        Ok(offset) => offset,
        Err(answer) => return Ok(int(answer)),
    };
    let start = byte_of(text, offset);
    let rest = &text[start..];
    Ok(int(rest.find(needle).map_or(-1, |at| {
        i64::try_from(offset).unwrap_or(i64::MAX) + code_point(rest, at)
    })))
}

/// `text.lastIndexOf(needle[, offset])`: the code-point index of the last occurrence that
/// starts at or before `offset`, -1 when there is none.
fn last_index_of(operands: &Operands<'_>) -> Result<Box<dyn Val>, ExecutionError> {
    let (text, needle) = (operands.text, operands.strings[1]);
    let Some(offset) = operands.int else {
        return Ok(int(text
            .rfind(needle)
            .map_or(-1, |at| code_point(text, at))));
    };
    let offset = match offset_or_answer("lastIndexOf", text, needle, offset)? {
        Ok(offset) => offset,
        Err(answer) => return Ok(int(answer)),
    };
    // An occurrence starting at or before the offset's byte ends at most a needle's length
    // after it, on a character boundary.
    let mut end = byte_of(text, offset)
        .saturating_add(needle.len())
        .min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    Ok(int(head
        .rfind(needle)
        .map_or(-1, |at| code_point(text, at))))
}

/// `text.replace(from, to[, n])`: the first `n` occurrences replaced, all of them when `n` is
/// negative or not given (an empty `from` occurs before every code point and at the end). The
/// occurrences are counted first (a scan, charged by the handler), the result's size charged,
/// and only then built.
fn replace(operands: &Operands<'_>) -> Result<Box<dyn Val>, ExecutionError> {
    let (text, from, to) = (operands.text, operands.strings[1], operands.strings[2]);
    let limit = operands.int.and_then(|n| usize::try_from(n).ok());
    // Counted no further than the budget left pays for: past that the charge fails anyway.
    let affordable = usize::try_from(
        left()
            .saturating_add(1)
            .saturating_mul(OCCURRENCES_PER_UNIT),
    )
    .unwrap_or(usize::MAX);
    let occurrences = text
        .matches(from)
        .take(limit.unwrap_or(usize::MAX).min(affordable))
        .count() as u64;
    let size = (text.len() as u64)
        .saturating_sub(occurrences.saturating_mul(from.len() as u64))
        .saturating_add(occurrences.saturating_mul(to.len() as u64));
    if !charge(size / BUILT_BYTES_PER_UNIT + occurrences / OCCURRENCES_PER_UNIT) {
        return Err(budget_spent());
    }
    let replaced = match limit {
        Some(n) => text.replacen(from, to, n),
        None => text.replace(from, to),
    };
    count_built(replaced.len());
    Ok(Box::new(CelString::from(replaced)))
}

/// `text.split(separator[, n])`: at most `n` parts, the last holding the unsplit rest; none
/// when `n` is zero, all of them when it is negative or not given; an empty separator splits
/// between code points (and an empty text into no parts). The parts are counted first, then
/// charged (each, and their bytes), and only then built.
fn split(operands: &Operands<'_>) -> Result<Box<dyn Val>, ExecutionError> {
    let (text, separator) = (operands.text, operands.strings[1]);
    let limit = operands.int.and_then(|n| usize::try_from(n).ok());
    // Counted no further than the budget left pays for: past that the charge fails anyway.
    let affordable = usize::try_from(left() / UNITS_PER_PART + 1).unwrap_or(usize::MAX);
    let most = limit.unwrap_or(usize::MAX).min(affordable);
    let parts = match (limit, separator.is_empty()) {
        (Some(0), _) => 0,
        (_, true) => text.chars().take(most).count(),
        (_, false) => text
            .matches(separator)
            .take(most)
            .count()
            .saturating_add(1)
            .min(most),
    };
    if !charge(
        (parts as u64).saturating_mul(UNITS_PER_PART) + text.len() as u64 / BUILT_BYTES_PER_UNIT,
    ) {
        return Err(budget_spent());
    }
    // Built as cel 0.15 builds it (`split_n` of its strings extension).
    let parts: Vec<&str> = match (limit, separator.is_empty()) {
        (Some(0), _) => Vec::new(),
        (Some(n), true) => {
            let mut parts: Vec<&str> = Vec::new();
            let mut rest: &str = text;
            while let Some(c) = rest.chars().next() {
                if parts.len() + 1 == n {
                    break;
                }
                let (head, tail) = rest.split_at(c.len_utf8());
                parts.push(head);
                rest = tail;
            }
            if !rest.is_empty() {
                parts.push(rest);
            }
            parts
        }
        (Some(n), false) => text.splitn(n, separator).collect(),
        (None, true) => text
            .char_indices()
            .map(|(at, c)| &text[at..at + c.len_utf8()])
            .collect(),
        (None, false) => text.split(separator).collect(),
    };
    count_built(parts.iter().map(|part| part.len()).sum());
    let list: CelList<'static> = parts
        .into_iter()
        .map(|part| Box::new(CelString::from(part.to_owned())) as Box<dyn Val>)
        .collect::<Vec<_>>()
        .into();
    Ok(Box::new(list))
}
