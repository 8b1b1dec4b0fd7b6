//! What the API and the dashboard do for browsers: headers on every answer that forbid framing
//! (clickjacking) and content sniffing, the refusal of cross-origin writes (CSRF), and whether
//! the dashboard's cookie must be `Secure`.
//!
//! Cross-origin writes are refused by where the browser says a request comes from, as Go's
//! `net/http.CrossOriginProtection` decides it: a state-changing request (anything but `GET`,
//! `HEAD`, `OPTIONS`) passes when `Sec-Fetch-Site` is `same-origin` or `none` (the user's own
//! action); when a browser sent no `Sec-Fetch-Site`, when `Origin` is absent (a client that is
//! not a browser, which no other site can drive) or names this server (the `Host` it was sent
//! to, or `publicUrl`'s origin for a proxy that rewrites `Host`). Everything else, `same-site`
//! and `Origin: null` included, is refused with `403`.
//!
//! A browser's write must also name this server by an address it can have: an IP address,
//! `localhost`, a single-label or in-cluster name (`drift-sentinel`, `*.svc`,
//! `*.svc.cluster.local`), or `publicUrl`'s host. Without that, a page on an attacker's domain
//! whose name they re-point at this server's address (DNS rebinding, e.g. against a
//! `kubectl port-forward` on 127.0.0.1) would be "same-origin" with itself.
//!
//! Why not a CSRF token: without `api.token` the dashboard has no session to bind a token to, and
//! a stateless token would need a server-side key that a restart forgets (the page refreshes
//! itself every 15 seconds, so forms are short-lived, but a restart would still refuse them).
//! Every browser in use sends `Origin` on a cross-origin `POST`, and current ones also send
//! `Sec-Fetch-Site` (Chrome 76, Firefox 90, Safari 16.4), so the headers decide without state.
//! The one gap, shared with Go's check, is a browser too old to send either header; the
//! `SameSite=Strict` cookie still covers the dashboard there when `api.token` is set.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiState;
use crate::error::ApiError;

/// The dashboard needs its inline `<style>` and its own forms, nothing else: no script, no
/// frame around it, no other origin's resources.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds the headers every API and dashboard answer carries.
pub(crate) async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// `Ok` when a request may proceed, or why it is a cross-origin write.
pub(crate) fn same_origin(request: &Request, public_url: Option<&str>) -> Result<(), &'static str> {
    check_origin(
        request.method(),
        request.headers(),
        request
            .uri()
            .authority()
            .map(|authority| authority.as_str()),
        public_url,
    )
}

/// [`same_origin`] on a request's parts; `authority` is the request target's (HTTP/2 carries the
/// host there rather than in `Host`).
fn check_origin(
    method: &Method,
    headers: &HeaderMap,
    authority: Option<&str>,
    public_url: Option<&str>,
) -> Result<(), &'static str> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let from_browser =
        headers.contains_key("sec-fetch-site") || headers.contains_key(header::ORIGIN);
    if from_browser {
        let host = headers
            .get(header::HOST)
            .and_then(|host| host.to_str().ok())
            .or(authority);
        if !host.is_some_and(|host| known_host(host, public_url)) {
            return Err("the request's Host is not an address of this server (set publicUrl to the address you use)");
        }
    }
    if let Some(site) = headers.get("sec-fetch-site") {
        return match site.as_bytes() {
            b"same-origin" | b"none" => Ok(()),
            _ => Err("the browser says this request comes from another site"),
        };
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let Ok(origin) = origin.to_str() else {
        return Err("the request's Origin is not readable");
    };
    let host = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .or(authority);
    let origin_host = origin
        .split_once("://")
        .map(|(_, authority)| authority)
        .filter(|authority| !authority.is_empty() && !authority.contains('/'));
    if origin_host.is_some() && origin_host == host {
        return Ok(());
    }
    let public_origin = public_url
        .and_then(|url| url::Url::parse(url).ok())
        .map(|url| url.origin().ascii_serialization());
    if public_origin.as_deref() == Some(origin) {
        return Ok(());
    }
    Err("the request's Origin is not this server")
}

/// True when `host` (a `Host` header: name or address, maybe with a port) is an address this
/// server can be reached by without anyone's DNS name (see the module docs), or `publicUrl`'s.
fn known_host(host: &str, public_url: Option<&str>) -> bool {
    let name = match host.strip_prefix('[') {
        // `[::1]:8080`
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.bytes().all(|byte| byte.is_ascii_digit()) {
                name
            } else {
                host
            }
        }),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name.is_empty() {
        return false;
    }
    if name.parse::<std::net::IpAddr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
        || !name.contains('.')
        || name.ends_with(".svc")
        || name.ends_with(".svc.cluster.local")
    {
        return true;
    }
    public_url
        .and_then(|url| url::Url::parse(url).ok())
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
        .is_some_and(|public| public == name)
}

/// Refuses cross-origin writes to the API with a JSON `403`.
pub(crate) async fn refuse_cross_origin(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    match same_origin(&request, state.public_url.as_deref()) {
        Ok(()) => next.run(request).await,
        Err(reason) => {
            tracing::warn!(message = "Refused a cross-origin write.", path = %request.uri().path(), reason);
            ApiError::new(
                StatusCode::FORBIDDEN,
                "cross_origin",
                format!("cross-origin request refused: {reason}"),
            )
            .into_response()
        }
    }
}

/// True when the browser reached this service over HTTPS: a proxy said so
/// (`X-Forwarded-Proto: https`, its first value) or `publicUrl` is an `https://` address.
pub(crate) fn served_over_https(headers: &HeaderMap, public_url: Option<&str>) -> bool {
    let forwarded = headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"));
    forwarded
        || public_url.is_some_and(|url| {
            url.get(..8)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn writes_pass_from_this_origin_or_from_clients_that_are_not_browsers() {
        let post = Method::POST;
        let allowed: &[&[(&str, &str)]] = &[
            &[],
            &[
                ("host", "127.0.0.1:8080"),
                ("sec-fetch-site", "same-origin"),
                ("origin", "http://127.0.0.1:8080"),
            ],
            &[("host", "localhost:8080"), ("sec-fetch-site", "none")],
            &[
                ("host", "drift-sentinel.drift-sentinel.svc:80"),
                ("sec-fetch-site", "same-origin"),
            ],
            &[("host", "[::1]:8080"), ("sec-fetch-site", "same-origin")],
            &[
                ("host", "drift.example.com"),
                ("sec-fetch-site", "same-origin"),
            ],
            &[("host", "drift:8080"), ("origin", "http://drift:8080")],
            &[
                ("host", "internal:8080"),
                ("origin", "https://drift.example.com"),
            ],
        ];
        for pairs in allowed {
            assert_eq!(
                check_origin(
                    &post,
                    &headers(pairs),
                    None,
                    Some("https://drift.example.com/")
                ),
                Ok(()),
                "{pairs:?}"
            );
        }
        let refused: &[&[(&str, &str)]] = &[
            &[("sec-fetch-site", "cross-site")],
            &[
                ("sec-fetch-site", "same-site"),
                ("origin", "https://drift.example.com"),
            ],
            &[("host", "drift:8080"), ("origin", "http://evil:8080")],
            // DNS rebinding: the attacker's name, pointed at this server's address.
            &[
                ("host", "evil.example:8080"),
                ("sec-fetch-site", "same-origin"),
                ("origin", "http://evil.example:8080"),
            ],
            &[
                ("host", "rebind.evil.example"),
                ("origin", "http://rebind.evil.example"),
            ],
            &[("sec-fetch-site", "same-origin")],
            &[("host", "drift:8080"), ("origin", "null")],
            &[("origin", "http://drift:8080")],
            &[
                ("host", "drift.example.com"),
                ("origin", "http://drift.example.com.evil"),
            ],
        ];
        for pairs in refused {
            assert!(
                check_origin(
                    &post,
                    &headers(pairs),
                    None,
                    Some("https://drift.example.com")
                )
                .is_err(),
                "{pairs:?}"
            );
            assert_eq!(
                check_origin(&Method::GET, &headers(pairs), None, None),
                Ok(())
            );
        }
        assert!(check_origin(
            &Method::DELETE,
            &headers(&[("sec-fetch-site", "cross-site")]),
            None,
            None
        )
        .is_err());
        // HTTP/2 names the host in the request target, not in `Host`.
        let origin = headers(&[("origin", "http://drift:8080")]);
        assert_eq!(
            check_origin(&Method::POST, &origin, Some("drift:8080"), None),
            Ok(())
        );
        assert!(check_origin(&Method::POST, &origin, Some("other:8080"), None).is_err());
    }

    #[test]
    fn https_from_the_proxy_or_the_public_url() {
        assert!(served_over_https(
            &headers(&[("x-forwarded-proto", "https")]),
            None
        ));
        assert!(served_over_https(
            &headers(&[("x-forwarded-proto", "HTTPS, http")]),
            None
        ));
        assert!(served_over_https(
            &headers(&[]),
            Some("https://drift.example.com")
        ));
        assert!(!served_over_https(
            &headers(&[("x-forwarded-proto", "http")]),
            None
        ));
        assert!(!served_over_https(
            &headers(&[]),
            Some("http://drift.example.com")
        ));
    }
}
