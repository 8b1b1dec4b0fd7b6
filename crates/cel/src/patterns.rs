//! The compiled regular expressions of `matches`, and what compiling and running them costs.
//! The `cel` crate compiles a pattern on every call, which a rule evaluated on every event cannot
//! afford, and which a pattern taken from the object (a dynamic pattern) turns into an attack:
//! one hostile pattern costs tens of milliseconds to compile before it fails the size limit.
//!
//! Literal patterns are compiled once, when their rule compiles, under the `regex` crate's
//! usual limit, and held by the compiled expression itself ([`LiteralPatterns`]): there is no
//! process-wide cache of them to fill up (a reload compiles the new rules' patterns, and the old
//! ones go with the old rules), so a literal pattern is never compiled while an event is judged.
//! Dynamic patterns are compiled under a limit far below it, and kept, failures
//! too, in a bounded cache, so the same pattern is compiled once, not on every call. What a
//! pattern costs the evaluation is the same whether it came from the cache or not (see
//! `budget`): a verdict never depends on what an earlier evaluation left behind.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use regex_automata::meta;

/// Most dynamic patterns kept (compiled or refused). Each compiled one holds at most
/// [`DYNAMIC_SIZE_LIMIT`] of program and [`DYNAMIC_CACHE_BYTES`] of search cache.
const MAX_CACHED_DYNAMIC: usize = 256;
/// The compiled program size a literal pattern may reach: the `regex` crate's default.
pub(crate) const STATIC_SIZE_LIMIT: usize = 10 << 20;
/// The compiled program size a dynamic pattern may reach: 1/160 of the literal patterns'
/// limit. Compiling up to it takes about 0.3 ms (see BENCHMARKS.md); past it the pattern is
/// refused.
pub(crate) const DYNAMIC_SIZE_LIMIT: usize = 64 << 10;
/// The lazy DFA's cache of one dynamic pattern (literal ones get the `regex` crate's 2 MiB).
const DYNAMIC_CACHE_BYTES: usize = 256 << 10;
/// Longest dynamic pattern compiled, in bytes; a longer one is refused without compiling.
pub(crate) const MAX_DYNAMIC_PATTERN_BYTES: usize = 4096;

/// A compiled pattern, with the size of its program (what matching with it costs per byte).
#[derive(Debug)]
pub(crate) struct Pattern {
    regex: meta::Regex,
    program_bytes: usize,
}

impl Pattern {
    /// True when the pattern matches somewhere in `text`.
    pub(crate) fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }

    /// The heap the compiled program takes, in bytes.
    pub(crate) fn program_bytes(&self) -> usize {
        self.program_bytes
    }
}

fn compile(source: &str, size_limit: usize, cache_bytes: usize) -> Result<Pattern, String> {
    COMPILES.with(|count| count.set(count.get() + 1));
    let regex = meta::Regex::builder()
        .configure(
            meta::Config::new()
                .nfa_size_limit(Some(size_limit))
                .onepass_size_limit(Some(size_limit))
                .dfa_size_limit(Some(cache_bytes))
                .hybrid_cache_capacity(cache_bytes),
        )
        .build(source)
        .map_err(|error| match error.size_limit() {
            Some(limit) => {
                format!("the pattern compiles to more than the {limit} bytes a pattern may take")
            }
            None => error.to_string(),
        })?;
    let program_bytes = regex.memory_usage();
    Ok(Pattern {
        regex,
        program_bytes,
    })
}

thread_local! {
    /// Patterns compiled on this thread (tests count compiles, not time).
    static COMPILES: Cell<u64> = const { Cell::new(0) };
}

/// How many patterns this thread has compiled so far.
#[cfg(test)]
pub(crate) fn compiles_on_this_thread() -> u64 {
    COMPILES.with(Cell::get)
}

/// Dynamic patterns seen lately: compiled, or why they were refused.
type DynamicCache = HashMap<String, Result<Arc<Pattern>, String>>;

fn dynamic_patterns() -> &'static Mutex<DynamicCache> {
    static PATTERNS: OnceLock<Mutex<DynamicCache>> = OnceLock::new();
    PATTERNS.get_or_init(Default::default)
}

/// The literal patterns of one compiled expression, by their source.
pub(crate) type LiteralPatterns = HashMap<String, Arc<Pattern>>;

/// Compiles a literal pattern (when its rule compiles); the error says why it is not valid.
pub(crate) fn literal_pattern(source: &str) -> Result<Arc<Pattern>, String> {
    // The `regex` crate's own defaults for the lazy DFA's cache.
    compile(source, STATIC_SIZE_LIMIT, 2 << 20).map(Arc::new)
}

thread_local! {
    /// The literal patterns of the expression this thread is evaluating.
    static CURRENT: RefCell<Option<Arc<LiteralPatterns>>> = const { RefCell::new(None) };
}

/// Runs `evaluate` with `patterns` as the literal patterns `@ds_matches` finds (the previous
/// ones restored after).
pub(crate) fn with_literals<R>(patterns: &Arc<LiteralPatterns>, evaluate: impl FnOnce() -> R) -> R {
    let previous = CURRENT.with(|current| current.replace(Some(Arc::clone(patterns))));
    let result = evaluate();
    CURRENT.with(|current| *current.borrow_mut() = previous);
    result
}

/// The compiled literal pattern of the expression being evaluated, if it holds `source`.
pub(crate) fn compiled_literal(source: &str) -> Option<Arc<Pattern>> {
    CURRENT.with(|current| {
        current
            .borrow()
            .as_ref()
            .and_then(|patterns| patterns.get(source).cloned())
    })
}

/// The compiled dynamic pattern, or why it is refused, from the cache when it was seen lately.
/// The caller charged its length and refused one longer than [`MAX_DYNAMIC_PATTERN_BYTES`].
pub(crate) fn dynamic_pattern(source: &str) -> Result<Arc<Pattern>, String> {
    let mut cache = dynamic_patterns()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = cache.get(source) {
        return found.clone();
    }
    // Compiled under the lock: evaluations run on the one writer thread, and a second thread
    // waiting for the same pattern then finds it compiled (or refused) instead of compiling it.
    let compiled = compile(source, DYNAMIC_SIZE_LIMIT, DYNAMIC_CACHE_BYTES).map(Arc::new);
    if cache.len() >= MAX_CACHED_DYNAMIC {
        // Any one goes: a pattern that comes back is compiled again, and charged the same.
        if let Some(evicted) = cache.keys().next().cloned() {
            cache.remove(&evicted);
        }
    }
    cache.insert(source.to_string(), compiled.clone());
    compiled
}
