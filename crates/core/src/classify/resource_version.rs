//! Ordering of `metadata.resourceVersion` values of one object, made so that one forged event
//! cannot poison it.
//!
//! Since Kubernetes 1.35 (KEP-5504) resource versions are documented as monotonically increasing
//! decimal integers of unbounded size; every earlier release produced the same shape (etcd's
//! revision, one counter for the whole cluster). The decoder refuses any other shape with a
//! `400`. Versions are compared as unbounded decimals (shorter is smaller, then lexicographic)
//! without parsing, so a value longer than any integer type still orders correctly.
//!
//! The rules, per object (cluster, uid):
//! * A newer version replaces the state; an older or equal one is stale (a delete may repeat the
//!   last version). This is what keeps redelivered and reordered events from rolling state back.
//! * Because versions count every write of the whole cluster, a real version is never far ahead
//!   of the newest version seen anywhere in that cluster (its frontier: events and the snapshot
//!   version of every resync list). One more than [`MAX_JUMP`] ahead is implausible: it is
//!   applied (it may be real, after a long quiet spell), but the object keeps ordering later
//!   events against its last plausible version, so the next real event replaces a forged
//!   `999999999999` instead of being dropped as stale, and it does not move the frontier.
//!   A delete that far ahead is not taken at all: it would resolve the object's drifts.
//! * A resync list's snapshot version is the API server's own: a state that arrived before the
//!   list started with a version newer than the snapshot cannot be real, nor a tombstone of an
//!   object the list holds, and the listed state replaces it. A frontier set before the list and
//!   newer than its snapshot is lowered to it (events walked it there).
//! * Beside the versions, the engine takes an event sent (its CloudEvent `time`) well after a
//!   state arrived as newer than that state (`engine.rs`, `sent_after`): that is what ends a
//!   forgery that versions alone cannot see, at the next real event.
//!
//! What is left: within the clock-skew allowance, and for the very first event of a cluster, a
//! forged event cannot be told from a real one. Authenticating the sender (OIDC or a token) is
//! what keeps forged events out.

use std::cmp::Ordering;

/// Compares two resource versions of the same object; `None` when they cannot be ordered.
pub(crate) fn compare(left: &str, right: &str) -> Option<Ordering> {
    if left == right {
        return Some(Ordering::Equal);
    }
    let left_digits = strip(left)?;
    let right_digits = strip(right)?;
    Some(
        left_digits
            .len()
            .cmp(&right_digits.len())
            .then_with(|| left_digits.cmp(right_digits)),
    )
}

/// How far beyond its cluster's frontier a version may be and still count as plausible. A busy
/// cluster writes a few hundred objects a second; five million writes between two events this
/// service sees (or two resync lists, 10 minutes apart by default) is far beyond that.
pub const MAX_JUMP: u128 = 5_000_000;

/// True when `version` is at most [`MAX_JUMP`] beyond `frontier` (both decimal). A value too long
/// for 128 bits is implausible unless the frontier is as long.
pub(crate) fn plausible(version: &str, frontier: &str) -> bool {
    match (strip(version), strip(frontier)) {
        (Some(version), Some(frontier)) => {
            match (version.parse::<u128>(), frontier.parse::<u128>()) {
                (Ok(version), Ok(frontier)) => version <= frontier.saturating_add(MAX_JUMP),
                (Err(_), Err(_)) => compare(version, frontier) != Some(Ordering::Greater),
                (Err(_), Ok(_)) => false,
                (Ok(_), Err(_)) => true,
            }
        }
        _ => false,
    }
}

/// True when `candidate` is strictly newer than `current` or cannot be ordered against it.
pub(crate) fn is_newer(candidate: &str, current: &str) -> bool {
    match compare(candidate, current) {
        Some(Ordering::Greater) | None => true,
        Some(_) => false,
    }
}

fn strip(value: &str) -> Option<&str> {
    if value.is_empty() || !value.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let trimmed = value.trim_start_matches('0');
    Some(if trimmed.is_empty() { "0" } else { trimmed })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_as_unbounded_decimals() {
        assert_eq!(compare("9", "10"), Some(Ordering::Less));
        assert_eq!(compare("100", "99"), Some(Ordering::Greater));
        assert_eq!(compare("007", "7"), Some(Ordering::Equal));
        let huge = "123456789012345678901234567890";
        assert_eq!(
            compare(huge, "99999999999999999999"),
            Some(Ordering::Greater)
        );
        assert_eq!(compare("abc", "10"), None);
        assert!(is_newer("abc", "10"));
        assert!(!is_newer("9", "10"));
        assert!(!is_newer("10", "10"));
    }

    #[test]
    fn plausible_means_not_far_beyond_the_frontier() {
        assert!(plausible("1000", "2000"));
        assert!(plausible("5002000", "2000"));
        assert!(!plausible("5002001", "2000"));
        assert!(!plausible(
            "999999999999999999999999999999999999999999",
            "2000"
        ));
        assert!(!plausible("abc", "2000"));
    }
}
