//! Shared HTTP plumbing: a rustls client with a per-attempt timeout, the default outcome classes
//! for HTTP statuses (as Vector's `src/sinks/util/http.rs`, plus `Retry-After`, which Vector
//! ignores), and error text that never contains a URL (webhook URLs carry tokens).

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::StatusCode;

use super::Outcome;

/// A client for one channel.
pub fn client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("drift-sentinel/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// A transport error as an outcome, without the URL.
pub(crate) fn transport_error(error: reqwest::Error) -> Outcome {
    let error = error.without_url();
    let kind = if error.is_timeout() {
        "timeout"
    } else if error.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    Outcome::Retry {
        after: None,
        detail: format!("{kind}: {}", short(&error.to_string())),
    }
}

/// `Retry-After` in seconds (the HTTP-date form is rare for APIs and is ignored).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// The default class of a non-2xx status: `429`, `408` and `5xx` except `501` retry; `3xx`,
/// `410` and other `4xx` are permanent.
pub(crate) fn classify_status(status: StatusCode, headers: &HeaderMap, body: &str) -> Outcome {
    let detail = format!("HTTP {}: {}", status.as_u16(), short(body));
    let code = status.as_u16();
    if code == 429 || code == 408 || (status.is_server_error() && code != 501) {
        Outcome::Retry {
            after: retry_after(headers),
            detail,
        }
    } else {
        Outcome::Rejected { detail }
    }
}

/// Cuts a response body for the audit trail.
pub fn short(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= 200 {
        return text.to_string();
    }
    format!("{}…", text.chars().take(200).collect::<String>())
}

/// Cuts `text` to at most `max_bytes` bytes of UTF-8 on a character boundary.
pub(crate) fn cut_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Reads a response: status, headers, body text.
pub async fn read(response: reqwest::Response) -> (StatusCode, HeaderMap, String) {
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.text().await.unwrap_or_default();
    (status, headers, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_outcomes() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "7".parse().unwrap());
        assert_eq!(
            classify_status(StatusCode::TOO_MANY_REQUESTS, &headers, "slow down"),
            Outcome::Retry {
                after: Some(Duration::from_secs(7)),
                detail: "HTTP 429: slow down".into()
            }
        );
        assert!(matches!(
            classify_status(StatusCode::BAD_GATEWAY, &HeaderMap::new(), ""),
            Outcome::Retry { .. }
        ));
        assert!(matches!(
            classify_status(StatusCode::NOT_IMPLEMENTED, &HeaderMap::new(), ""),
            Outcome::Rejected { .. }
        ));
        assert!(matches!(
            classify_status(StatusCode::GONE, &HeaderMap::new(), ""),
            Outcome::Rejected { .. }
        ));
        assert!(matches!(
            classify_status(StatusCode::FOUND, &HeaderMap::new(), ""),
            Outcome::Rejected { .. }
        ));
    }

    #[test]
    fn cuts_on_char_boundaries() {
        assert_eq!(cut_bytes("漂移漂移", 7), "漂移");
        assert_eq!(cut_bytes("abc", 10), "abc");
    }
}
