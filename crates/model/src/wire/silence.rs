//! A silence as the API takes it (`POST /api/v1/silences`, the shape of `rules.silences`) and
//! shows it (`GET /api/v1/silences`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::time::format_time;
use crate::{Millis, Silence};

/// A new silence, as posted.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SilenceInput {
    /// `class`, `severity`, `cluster`, `namespace`, `kind`, `name` (globs), or `label:<key>`.
    pub matchers: BTreeMap<String, String>,
    /// RFC 3339 expiry; absent means until removed.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// Why.
    #[serde(default)]
    pub comment: Option<String>,
}

impl SilenceInput {
    /// The silence posted.
    pub fn into_silence(self) -> Silence {
        Silence {
            matchers: self.matchers,
            expires_at: self.expires_at,
            comment: self.comment,
        }
    }
}

/// A silence in the API's answers: configured (`source: config`, read-only) or created through
/// the API (`source: api`, with `createdAt`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SilenceView {
    /// `config-<index>` or the stored id.
    pub id: String,
    /// `config` or `api`.
    pub source: &'static str,
    /// Matchers.
    pub matchers: BTreeMap<String, String>,
    /// RFC 3339 expiry, as given (`null`: until removed).
    pub expires_at: Option<String>,
    /// Why (`null` when none was given).
    pub comment: Option<String>,
    /// When it was created (API silences).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

impl SilenceView {
    /// The configured silence at `index` of `rules.silences`.
    pub fn configured(index: usize, silence: &Silence) -> SilenceView {
        SilenceView::new(format!("config-{index}"), "config", silence, None)
    }

    /// A silence created through the API.
    pub fn created(id: &str, silence: &Silence, created_at: Millis) -> SilenceView {
        SilenceView::new(
            id.to_string(),
            "api",
            silence,
            Some(format_time(created_at)),
        )
    }

    fn new(
        id: String,
        source: &'static str,
        silence: &Silence,
        created_at: Option<String>,
    ) -> SilenceView {
        SilenceView {
            id,
            source,
            matchers: silence.matchers.clone(),
            expires_at: silence.expires_at.clone(),
            comment: silence.comment.clone(),
            created_at,
        }
    }
}
