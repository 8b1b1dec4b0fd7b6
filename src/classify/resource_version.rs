//! Ordering of `metadata.resourceVersion` values of one object.
//!
//! Since Kubernetes 1.35 (KEP-5504) resource versions are documented as monotonically increasing
//! decimal integers of unbounded size; every earlier release produced the same shape. They are
//! compared as unbounded decimals (shorter is smaller, then lexicographic) without parsing, so a
//! value longer than any integer type still orders correctly. A value that is not decimal cannot
//! be ordered: it is treated as newer unless it is equal, so nothing is ever dropped on a guess.

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
}
