//! Remediation's (and drills') writes: the one request an attempt planned, sent exactly as
//! planned (method, path with `?fieldManager=drift-sentinel`, content type, body) through the
//! same client as resync, and its answer sorted into what the attempt records. The API server's
//! answer decides: `409 Conflict` (the `resourceVersion` precondition failed, or a created object
//! exists), `422` (a JSON patch's `test` failed) and `404` (the object is gone) mean the object
//! moved on (final for this request: remediation's sender may ask the writer to judge a `409`
//! again); `429` and `5xx` or no answer may be tried again with the same request (its
//! precondition keeps a repeat from writing over a newer change); any other answer is final.

use serde_json::Value;

use drift_model::remediation::PlannedRequest;

use super::Cluster;

/// What became of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// Accepted (`2xx`), with the object's `resourceVersion` in the answer, if it has one.
    Applied {
        /// The HTTP status.
        status: u16,
        /// `metadata.resourceVersion` of the answer.
        resource_version: Option<String>,
    },
    /// The object moved on (`409`, `422`, `404`): final.
    Conflict {
        /// The HTTP status.
        status: u16,
        /// The API server's message.
        message: String,
    },
    /// Refused for another reason (`403` for missing RBAC, `400`, …): final.
    Refused {
        /// The HTTP status.
        status: u16,
        /// The API server's message.
        message: String,
    },
    /// No answer, `429` or `5xx`: the same request may be tried again.
    Retry {
        /// The HTTP status, when there was an answer.
        status: Option<u16>,
        /// What failed.
        message: String,
    },
}

impl Cluster {
    /// Sends `request` once.
    pub async fn send_planned(&self, request: &PlannedRequest) -> Sent {
        self.send_for_answer(request).await.0
    }

    /// Sends `request` once, and keeps the API server's answer to an accepted request (the
    /// object as written, or the `Status` of a delete): drills restore from it.
    pub async fn send_for_answer(&self, request: &PlannedRequest) -> (Sent, Option<Value>) {
        let built = http::Request::builder()
            .method(request.method.as_str())
            .uri(request.path.as_str())
            .header(http::header::CONTENT_TYPE, request.content_type.as_str())
            .header(http::header::ACCEPT, "application/json")
            .body(request.body.clone().into_bytes());
        let built = match built {
            Ok(built) => built,
            Err(error) => {
                return (
                    Sent::Refused {
                        status: 0,
                        message: format!(
                            "the planned request is not a valid HTTP request: {error}"
                        ),
                    },
                    None,
                )
            }
        };
        let response = match self.client.send(built.map(kube::client::Body::from)).await {
            Ok(response) => response,
            Err(error) => {
                return (
                    Sent::Retry {
                        status: None,
                        message: error.to_string(),
                    },
                    None,
                )
            }
        };
        let status = response.status().as_u16();
        let body = match http_body_util::BodyExt::collect(response.into_body()).await {
            Ok(collected) => collected.to_bytes(),
            // Accepted is accepted, whatever became of the body: never sent again.
            Err(_) if (200..300).contains(&status) => {
                return (
                    Sent::Applied {
                        status,
                        resource_version: None,
                    },
                    None,
                )
            }
            Err(error) => {
                return (
                    Sent::Retry {
                        status: Some(status),
                        message: format!("reading the answer: {error}"),
                    },
                    None,
                )
            }
        };
        let answer = serde_json::from_slice::<Value>(&body).ok();
        let text = |pointer: &str| {
            answer
                .as_ref()
                .and_then(|answer| answer.pointer(pointer))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        if (200..300).contains(&status) {
            let resource_version = text("/metadata/resourceVersion");
            return (
                Sent::Applied {
                    status,
                    resource_version,
                },
                answer,
            );
        }
        // A Kubernetes `Status` says why; a proxy's page is cut to its first line.
        let message = text("/message")
            .filter(|message| !message.is_empty())
            .or_else(|| text("/reason"))
            .unwrap_or_else(|| {
                String::from_utf8_lossy(&body)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect()
            });
        let sent = match status {
            404 | 409 | 422 => Sent::Conflict { status, message },
            429 | 500..=599 => Sent::Retry {
                status: Some(status),
                message,
            },
            _ => Sent::Refused { status, message },
        };
        (sent, None)
    }
}

impl Cluster {
    /// True when the namespace (`segment`: its name as a path segment, encoded) carries the
    /// remediation opt-out annotation; an error says why it could not be read.
    pub async fn namespace_opted_out(&self, segment: &str) -> Result<bool, String> {
        let path = format!("/api/v1/namespaces/{segment}");
        let request = http::Request::get(path)
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|error| error.to_string())?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|error| error.to_string())?;
        let object: Value = serde_json::from_str(&text).map_err(|error| error.to_string())?;
        Ok(object
            .pointer("/metadata/annotations")
            .and_then(|annotations| annotations.get(drift_core::remediate::OPT_OUT))
            .and_then(Value::as_str)
            == Some("off"))
    }
}

impl Cluster {
    /// The object at `path` as JSON, `None` when the API server says it does not exist (`404`);
    /// an error says why it could not be read.
    pub async fn get_json(&self, path: &str) -> Result<Option<Value>, String> {
        let request = http::Request::get(path)
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|error| error.to_string())?;
        match self.client.request_text(request).await {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|error| format!("{path}: {error}")),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(error) => Err(format!("{path}: {error}")),
        }
    }
}
