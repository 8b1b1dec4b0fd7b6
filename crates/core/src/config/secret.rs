//! [`Secret`]: a configured value that must never be printed.

use std::fmt;

use serde::Deserialize;

/// A value that must never be printed: webhook URLs with tokens, signing keys.
///
/// `Debug` and `Display` redact; only [`Secret::expose`] gives the value, and only channel code
/// that puts it on the wire calls it.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The secret value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// True when no value is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when nothing is left of the value once surrounding whitespace is dropped: a bearer
    /// token, used [`Secret::trimmed`], would be empty (a `${VAR}` set to a newline).
    pub fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }

    /// The value without surrounding whitespace, for a bearer token. A value filled from a
    /// Kubernetes Secret or a file often ends in a newline, and HTTP drops whitespace around a
    /// header's value, so a token kept with it could never be matched (or sent at all).
    pub fn trimmed(&self) -> Secret {
        Secret(self.0.trim().to_string())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}
