//! Silences: drifts that match are tracked and recorded but not sent. Configured silences
//! (`rules.silences`) and silences created through the API are the same thing here; the
//! decision whether a drift is silenced is made in one place, `route::Silences`.

use std::collections::BTreeMap;

use super::{glob_match, Drift, Millis};

/// The matcher keys a silence may use besides `label:<key>`.
pub const MATCHER_KEYS: &[&str] = &[
    "class",
    "rule",
    "severity",
    "cluster",
    "namespace",
    "kind",
    "name",
];

/// A silence: drifts matching every matcher are muted until `expires_at`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Silence {
    /// `class`, `rule` (an `invariant` drift's rule), `severity`, `cluster`, `namespace`, `kind`,
    /// `name` (globs), or `label:<key>` (exact).
    pub matchers: BTreeMap<String, String>,
    /// RFC 3339 expiry as given; absent means until removed.
    pub expires_at: Option<String>,
    /// Why.
    pub comment: Option<String>,
}

impl Silence {
    /// True when the silence has not expired at `now` (one whose expiry does not parse has).
    pub fn is_active(&self, now: Millis) -> bool {
        match &self.expires_at {
            None => true,
            Some(expires) => chrono::DateTime::parse_from_rfc3339(expires)
                .is_ok_and(|time| time.timestamp_millis() > now),
        }
    }

    /// True when the silence covers `drift` at `now`. An expiry that does not parse never
    /// matches (validation refuses one before it gets here).
    pub fn matches(&self, drift: &Drift, now: Millis) -> bool {
        if let Some(expires) = &self.expires_at {
            match chrono::DateTime::parse_from_rfc3339(expires) {
                Ok(time) if time.timestamp_millis() > now => {}
                _ => return false,
            }
        }
        self.matchers.iter().all(|(key, pattern)| {
            let value = match key.as_str() {
                "class" => drift.class.as_str(),
                // Only a rule's drift has a rule: `rule: "*"` mutes invariants, not every class.
                "rule" => match drift.rule.as_deref() {
                    Some(rule) => rule,
                    None => return false,
                },
                "severity" => drift.severity.as_str(),
                "cluster" => drift.cluster.as_str(),
                "namespace" => drift.namespace.as_str(),
                "kind" => drift.kind.as_str(),
                "name" => drift.name.as_str(),
                other => match other.strip_prefix("label:") {
                    Some(label) => return drift.labels.get(label) == Some(pattern),
                    None => return false,
                },
            };
            glob_match(pattern, value)
        })
    }
}
