//! The compiled regular expressions of `matches` with a literal pattern, kept once for every
//! rule: the `cel` crate compiles a pattern on every call, which a rule evaluated on every event
//! cannot afford.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Most distinct literal patterns kept compiled (rules are few; a bound all the same).
const MAX_CACHED_PATTERNS: usize = 1024;

/// Compiled literal patterns, shared by every rule: `matches` with a literal pattern is compiled
/// once when its rule compiles, not on every call as the `cel` crate does.
fn patterns() -> &'static Mutex<HashMap<String, Arc<regex::Regex>>> {
    static PATTERNS: OnceLock<Mutex<HashMap<String, Arc<regex::Regex>>>> = OnceLock::new();
    PATTERNS.get_or_init(Default::default)
}

/// The compiled pattern (compiled and kept now if it is new and there is room). The error is
/// the `regex` crate's own: both callers turn it into a message at once.
pub(crate) fn pattern(source: &str) -> Result<Arc<regex::Regex>, regex::Error> {
    let mut cache = patterns()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = cache.get(source) {
        return Ok(Arc::clone(found));
    }
    let compiled = Arc::new(regex::Regex::new(source)?);
    if cache.len() < MAX_CACHED_PATTERNS {
        cache.insert(source.to_string(), Arc::clone(&compiled));
    }
    Ok(compiled)
}
