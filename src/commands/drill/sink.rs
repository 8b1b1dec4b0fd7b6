//! The running sink's drift API, as a drill reads it (`--sink URL`, `--token`): drifts on an
//! object since a time, and one drift by id. Pages are followed; every error says what was asked
//! and what came back, never the token.

use std::time::Duration;

use serde_json::Value;

/// The sink's API.
pub(crate) struct Sink {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
    /// Only this cluster's drifts (`--cluster`), when the sink watches several.
    cluster: Option<String>,
}

/// A drift as the API lists it (`docs`: `GET /api/v1/drifts`), reduced to what drills read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub id: String,
    pub class: String,
    pub rule: Option<String>,
    pub severity: String,
    pub state: String,
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The Knative Service it belongs to, if any.
    pub service: Option<String>,
    pub since: String,
    pub fired_at: Option<String>,
}

impl Seen {
    fn of(item: &Value) -> Option<Seen> {
        let text = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_string);
        Some(Seen {
            id: text("id")?,
            class: text("class")?,
            rule: text("rule"),
            severity: text("severity")?,
            state: text("state")?,
            cluster: text("cluster").unwrap_or_default(),
            api_version: text("apiVersion").unwrap_or_default(),
            kind: text("kind")?,
            namespace: text("namespace").unwrap_or_default(),
            name: text("name")?,
            service: item
                .pointer("/owner/service")
                .and_then(Value::as_str)
                .map(str::to_string),
            since: text("since").unwrap_or_default(),
            fired_at: text("firedAt"),
        })
    }
}

/// At most this many pages per question (50,000 drifts): a bound, not a limit anyone meets in
/// a drill namespace.
const MAX_PAGES: usize = 100;

impl Sink {
    /// A client of the sink at `base` (`http://host:port`).
    pub(crate) fn new(
        base: &str,
        token: Option<String>,
        cluster: Option<&str>,
    ) -> Result<Sink, String> {
        let base = base.trim_end_matches('/').to_string();
        let url = url::Url::parse(&base).map_err(|error| format!("--sink {base:?}: {error}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("--sink {base:?}: not an http(s) URL"));
        }
        let client = crate::deliver::http::client(Duration::from_secs(10))
            .map_err(|error| format!("--sink: {error}"))?;
        Ok(Sink {
            client,
            base,
            // A token read from a file or a Secret often ends in a newline, which no header can
            // carry (the sink trims its `api.token` for the same reason).
            token: token
                .map(|token| token.trim().to_string())
                .filter(|token| !token.is_empty()),
            cluster: cluster.map(str::to_string),
        })
    }

    async fn get(&self, path: &str) -> Result<Option<Value>, String> {
        let mut request = self.client.get(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|error| format!("the sink's API ({path}): {}", with_causes(error)))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND && path.starts_with("/api/v1/drifts/") {
            return Ok(None);
        }
        let body = response
            .text()
            .await
            .map_err(|error| format!("the sink's API ({path}): {}", with_causes(error)))?;
        if !status.is_success() {
            let hint = if status == reqwest::StatusCode::UNAUTHORIZED {
                " (give --token or $DRIFT_SENTINEL_API_TOKEN: the sink's api.token)"
            } else {
                ""
            };
            let first: String = body
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect();
            return Err(format!(
                "the sink's API ({path}) answered {}{hint}: {first}",
                status.as_u16()
            ));
        }
        serde_json::from_str(&body)
            .map(Some)
            .map_err(|error| format!("the sink's API ({path}): not JSON: {error}"))
    }

    /// Whether the sink answers its drift API with this token: asked once before any drill.
    pub(crate) async fn reachable(&self) -> Result<(), String> {
        self.get("/api/v1/drifts?limit=1").await.map(|_| ())
    }

    /// The drifts in `namespace`, every page, newest first: those whose state changed at or
    /// after `since` (RFC 3339), and in `state` (`open`: pending or firing), when given.
    pub(crate) async fn drifts(
        &self,
        namespace: &str,
        since: Option<&str>,
        state: Option<&str>,
    ) -> Result<Vec<Seen>, String> {
        let query = {
            let mut query = url::form_urlencoded::Serializer::new(String::new());
            query.append_pair("namespace", namespace);
            if let Some(since) = since {
                query.append_pair("since", since);
            }
            if let Some(state) = state {
                query.append_pair("state", state);
            }
            if let Some(cluster) = &self.cluster {
                query.append_pair("cluster", cluster);
            }
            query.append_pair("limit", "500").finish()
        };
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut path = format!("/api/v1/drifts?{query}");
            if let Some(cursor) = &cursor {
                path.push_str("&cursor=");
                path.push_str(
                    &url::form_urlencoded::byte_serialize(cursor.as_bytes()).collect::<String>(),
                );
            }
            let page = self.get(&path).await?.unwrap_or(Value::Null);
            let items = page
                .get("items")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("the sink's API ({path}): no items list"))?;
            for item in items {
                // A drift the runner cannot read could be a false alert it would not count.
                seen.push(Seen::of(item).ok_or_else(|| {
                    format!(
                        "the sink's API ({path}): a drift without id, class, kind or name: {item}"
                    )
                })?);
            }
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_string);
            if cursor.is_none() {
                return Ok(seen);
            }
        }
        Err(format!(
            "the sink's API lists more than {} drifts in namespace {namespace}: not a drill namespace",
            MAX_PAGES * 500
        ))
    }

    /// One drift's state (`pending`, `firing`, `resolved`), `None` when the sink has no such
    /// drift.
    pub(crate) async fn state(&self, id: &str) -> Result<Option<String>, String> {
        let segment: String = url::form_urlencoded::byte_serialize(id.as_bytes()).collect();
        let drift = self.get(&format!("/api/v1/drifts/{segment}")).await?;
        Ok(drift.and_then(|drift| {
            drift
                .get("state")
                .or_else(|| drift.pointer("/drift/state"))
                .and_then(Value::as_str)
                .map(str::to_string)
        }))
    }
}

/// A transport error with what caused it (`connection refused`), without the URL.
fn with_causes(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::Sink;

    #[test]
    fn the_token_is_sent_without_surrounding_whitespace_and_a_blank_one_not_at_all() {
        let sink = |token: &str| Sink::new("http://127.0.0.1:8080", Some(token.into()), None);
        assert_eq!(sink(" s3cret\n").unwrap().token.as_deref(), Some("s3cret"));
        assert_eq!(sink("s3cret").unwrap().token.as_deref(), Some("s3cret"));
        assert_eq!(sink(" \n").unwrap().token, None);
        assert_eq!(sink("").unwrap().token, None);
    }
}
