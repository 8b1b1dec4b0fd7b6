//! The stored shapes of what the store keeps as JSON text: one serializable type per stored
//! column, kept apart from the core types so that a field added to a core type changes no stored
//! row by accident. Each shape belongs to a schema version (`schema.rs`); a change to one is a
//! migration.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Silence;

/// `silences.body` (schema version 1): matchers, expiry and comment, as `rules.silences` has
/// them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SilenceRow {
    /// Matchers.
    pub matchers: BTreeMap<String, String>,
    /// RFC 3339 expiry, as given.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// Why.
    #[serde(default)]
    pub comment: Option<String>,
}

impl From<&Silence> for SilenceRow {
    fn from(silence: &Silence) -> SilenceRow {
        SilenceRow {
            matchers: silence.matchers.clone(),
            expires_at: silence.expires_at.clone(),
            comment: silence.comment.clone(),
        }
    }
}

impl From<SilenceRow> for Silence {
    fn from(row: SilenceRow) -> Silence {
        Silence {
            matchers: row.matchers,
            expires_at: row.expires_at,
            comment: row.comment,
        }
    }
}
