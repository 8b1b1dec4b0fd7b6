//! Prometheus' answer to `/api/v1/query` read into the requests per Revision it counts: the
//! `{"status": …, "data": {"resultType": "vector", "result": [...]}}` envelope, error bodies
//! (`status: error` with `errorType` and `error`) whatever their HTTP status, and a non-2xx
//! answer that is not Prometheus' (a proxy's page), each a clear [`QueryError`].

use drift_core::classify::traffic::Served;
use drift_core::config::{NAMESPACE_LABELS, REVISION_LABELS, SERVICE_LABELS};
use serde_json::Value;

/// Most series read from one answer (far more Revisions than any cluster serves from).
pub(crate) const MAX_SERIES: usize = 100_000;

/// How much of a body an error quotes.
const QUOTE_CHARS: usize = 200;

/// Why a query gave no observation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum QueryError {
    /// Prometheus could not be reached (connection refused, DNS, TLS, the timeout).
    #[error("Prometheus is unreachable: {0}")]
    Unreachable(String),
    /// `traffic.prometheus.bearerTokenFile` could not be read, or is empty.
    #[error("{0}")]
    TokenFile(String),
    /// A non-2xx answer that is not Prometheus' error envelope (a proxy, a wrong path).
    #[error("HTTP {status} without a Prometheus answer (a proxy or a wrong URL?): {body}")]
    HttpStatus { status: u16, body: String },
    /// Prometheus refused or failed the query (`status: error`).
    #[error("Prometheus answered HTTP {status} {error_type}: {error}")]
    Query {
        status: u16,
        error_type: String,
        error: String,
    },
    /// A 2xx body that is not the envelope.
    #[error("not a Prometheus query answer: {0}")]
    InvalidResponse(String),
    /// A valid answer, but not what the query should return (not a vector, no labels).
    #[error("{0}")]
    UnexpectedResult(String),
}

impl QueryError {
    /// A stable, bounded label for metrics.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            QueryError::Unreachable(_) => "unreachable",
            QueryError::TokenFile(_) => "token_file",
            QueryError::HttpStatus { .. } => "http_status",
            QueryError::Query { .. } => "query_error",
            QueryError::InvalidResponse(_) => "invalid_response",
            QueryError::UnexpectedResult(_) => "unexpected_result",
        }
    }
}

/// A body quoted in an error: its start, on one line, without control characters.
fn quote(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(QUOTE_CHARS)
        .collect::<String>()
        .trim()
        .to_string()
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Reads an answer of `/api/v1/query`: its HTTP status and body.
pub(crate) fn parse(status: u16, body: &[u8]) -> Result<Vec<Served>, QueryError> {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let envelope = parsed
        .as_ref()
        .filter(|value| value.get("status").is_some());
    if let Some(envelope) = envelope {
        if text(envelope, "status") == "error" {
            return Err(QueryError::Query {
                status,
                error_type: quote(text(envelope, "errorType").as_bytes()),
                error: quote(text(envelope, "error").as_bytes()),
            });
        }
    }
    if !(200..300).contains(&status) {
        return Err(QueryError::HttpStatus {
            status,
            body: quote(body),
        });
    }
    let Some(envelope) = envelope else {
        return Err(QueryError::InvalidResponse(match parsed {
            None => format!("the body is not JSON: {}", quote(body)),
            Some(_) => "the JSON has no status".to_string(),
        }));
    };
    if text(envelope, "status") != "success" {
        return Err(QueryError::InvalidResponse(format!(
            "status is {:?}, not success or error",
            quote(text(envelope, "status").as_bytes())
        )));
    }
    let data = envelope
        .get("data")
        .ok_or_else(|| QueryError::InvalidResponse("success without data".to_string()))?;
    let result_type = text(data, "resultType");
    if result_type != "vector" {
        return Err(QueryError::UnexpectedResult(format!(
            "the query returned a {:?}, not an instant vector: it must be an instant query of requests per revision (sum by (...) (increase(...[window])))",
            quote(result_type.as_bytes())
        )));
    }
    let Some(result) = data.get("result").and_then(Value::as_array) else {
        return Err(QueryError::InvalidResponse(
            "data.result is not a list".to_string(),
        ));
    };
    if result.len() > MAX_SERIES {
        return Err(QueryError::UnexpectedResult(format!(
            "{} series, more than {MAX_SERIES}: narrow the query",
            result.len()
        )));
    }
    let mut series = Vec::with_capacity(result.len());
    let mut unlabelled = 0;
    for (index, sample) in result.iter().enumerate() {
        let metric = sample.get("metric").unwrap_or(&Value::Null);
        let label = |names: &[&str]| {
            names
                .iter()
                .find_map(|name| metric.get(*name).and_then(Value::as_str))
                .map(str::to_string)
        };
        let value = match sample.get("value").and_then(Value::as_array) {
            Some(pair) if pair.len() == 2 => pair[1].as_str().ok_or_else(|| {
                QueryError::InvalidResponse(format!(
                    "result[{index}].value[1] is not a string"
                ))
            })?,
            _ if sample.get("histogram").is_some() => {
                return Err(QueryError::UnexpectedResult(format!(
                    "result[{index}] is a native histogram: count requests (the _count series), not the histogram"
                )))
            }
            _ => {
                return Err(QueryError::InvalidResponse(format!(
                    "result[{index}] has no [time, value] pair"
                )))
            }
        };
        // Prometheus writes NaN and ±Inf as words; an increase of a counter is neither.
        let requests: f64 = value.parse().map_err(|_| {
            QueryError::InvalidResponse(format!(
                "result[{index}] value {:?} is not a number",
                quote(value.as_bytes())
            ))
        })?;
        let (Some(namespace), Some(revision)) = (label(NAMESPACE_LABELS), label(REVISION_LABELS))
        else {
            unlabelled += 1;
            continue;
        };
        if !requests.is_finite() {
            continue;
        }
        series.push(Served {
            namespace,
            service: label(SERVICE_LABELS).unwrap_or_default(),
            revision,
            requests,
        });
    }
    if series.is_empty() && unlabelled > 0 {
        return Err(QueryError::UnexpectedResult(format!(
            "none of the {unlabelled} series has a namespace ({}) and a revision ({}) label: keep them in the query's sum by (...)",
            NAMESPACE_LABELS.join(", "),
            REVISION_LABELS.join(", ")
        )));
    }
    Ok(series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_vector_of_each_presets_labels() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"namespace_name":"myapp","service_name":"web","revision_name":"web-00001"},"value":[1435781451.781,"540"]},
            {"metric":{"k8s_namespace_name":"myapp","kn_service_name":"web","kn_revision_name":"web-00002"},"value":[1435781451.781,"60.5"]},
            {"metric":{"namespace":"other","revision":"solo-00001"},"value":[1435781451.781,"0"]}]},
            "warnings":["a warning"]}"#;
        let series = parse(200, body).unwrap();
        assert_eq!(
            series,
            [
                Served {
                    namespace: "myapp".into(),
                    service: "web".into(),
                    revision: "web-00001".into(),
                    requests: 540.0
                },
                Served {
                    namespace: "myapp".into(),
                    service: "web".into(),
                    revision: "web-00002".into(),
                    requests: 60.5
                },
                Served {
                    namespace: "other".into(),
                    service: String::new(),
                    revision: "solo-00001".into(),
                    requests: 0.0
                },
            ]
        );
        assert_eq!(
            parse(
                200,
                br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#
            )
            .unwrap(),
            []
        );
    }

    #[test]
    fn error_envelopes_name_type_and_message_whatever_the_status() {
        // The error bodies of the reference's section 6 (web/api/v1/api.go respondError).
        for (status, error_type) in [
            (400, "bad_data"),
            (422, "execution"),
            (503, "timeout"),
            (503, "canceled"),
            (500, "internal"),
            (200, "bad_data"),
        ] {
            let body = format!(
                r#"{{"status":"error","errorType":"{error_type}","error":"1:15: parse error: unexpected \"]\""}}"#
            );
            let error = parse(status, body.as_bytes()).unwrap_err();
            assert_eq!(error.kind(), "query_error");
            let message = error.to_string();
            assert!(
                message.contains(&format!("HTTP {status} {error_type}"))
                    && message.contains("parse error"),
                "{message}"
            );
        }
    }

    #[test]
    fn a_proxys_answer_is_told_apart_from_prometheus() {
        let error = parse(
            502,
            b"<html><body>\n<h1>502 Bad Gateway</h1>\n</body></html>",
        )
        .unwrap_err();
        assert_eq!(error.kind(), "http_status");
        assert_eq!(
            error.to_string(),
            "HTTP 502 without a Prometheus answer (a proxy or a wrong URL?): <html><body> <h1>502 Bad Gateway</h1> </body></html>"
        );
        let error = parse(401, b"Unauthorized").unwrap_err();
        assert_eq!(error.kind(), "http_status");
        // A long body is quoted in part.
        let error = parse(404, "x".repeat(5000).as_bytes()).unwrap_err();
        assert!(error.to_string().len() < 300);
    }

    #[test]
    fn bodies_that_are_not_the_envelope_are_invalid() {
        for (body, needle) in [
            (&b"not json"[..], "not JSON"),
            (br#"{"data":{}}"#, "no status"),
            (br#"{"status":"success"}"#, "without data"),
            (br#"{"status":"weird","data":{}}"#, "not success"),
            (
                br#"{"status":"success","data":{"resultType":"vector","result":{}}}"#,
                "not a list",
            ),
            (
                br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"a","revision":"b"},"value":[1,2]}]}}"#,
                "not a string",
            ),
            (
                br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"a","revision":"b"},"value":[1,"many"]}]}}"#,
                "not a number",
            ),
        ] {
            let error = parse(200, body).unwrap_err();
            assert_eq!(error.kind(), "invalid_response", "{error}");
            assert!(error.to_string().contains(needle), "{error}");
        }
    }

    #[test]
    fn results_the_comparison_cannot_use_are_unexpected() {
        let error = parse(
            200,
            br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
        )
        .unwrap_err();
        assert_eq!(error.kind(), "unexpected_result");
        assert!(error.to_string().contains("\"matrix\""), "{error}");
        let error = parse(
            200,
            br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"5"]}]}}"#,
        )
        .unwrap_err();
        assert_eq!(error.kind(), "unexpected_result");
        assert!(error.to_string().contains("kn_revision_name"), "{error}");
        let error = parse(
            200,
            br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"a","revision":"b"},"histogram":[1,{}]}]}}"#,
        )
        .unwrap_err();
        assert_eq!(error.kind(), "unexpected_result");
        // NaN (a counter reset seen over too short a window) counts as no series.
        let series = parse(
            200,
            br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"a","revision":"b"},"value":[1,"NaN"]}]}}"#,
        )
        .unwrap();
        assert!(series.is_empty());
    }
}
