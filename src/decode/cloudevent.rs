//! CloudEvents 1.0 over HTTP: binary, structured and batch content modes → [`CloudEvent`].
//!
//! The mode is chosen as Knative's Go SDK chooses it (`v2/protocol/http/message.go`): a CloudEvents
//! content type means structured or batch, a `ce-specversion` header means binary, anything else
//! is not a CloudEvent. Binary and structured events are parsed by the `cloudevents-sdk` crate,
//! which validates the required attributes; batch mode, which the SDK's server side lacks, is a
//! JSON array of structured events parsed with the SDK's `Event` deserializer. Binary-mode header
//! values are percent-decoded here, as the CloudEvents HTTP binding requires and the SDK does not.

use std::collections::BTreeMap;

use cloudevents::event::{AttributesReader, Data, ExtensionValue};
use percent_encoding::percent_decode_str;

use super::Error;

const STRUCTURED: &str = "application/cloudevents+json";
const BATCH: &str = "application/cloudevents-batch+json";
/// Most events in one batch request: one request is one transaction for the single writer, and
/// a huge batch would stall every other sender behind it.
pub const MAX_BATCH_EVENTS: usize = 1000;

/// The parts of a CloudEvent the pipeline uses.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudEvent {
    /// `specversion` (`1.0`, or `0.3` from old adapters).
    pub spec_version: String,
    /// `id`, unique per `source`.
    pub id: String,
    /// `source`, the API server URL for ApiServerSource.
    pub source: String,
    /// `type`.
    pub ty: String,
    /// `subject`, informational.
    pub subject: Option<String>,
    /// `time` as sent (RFC 3339).
    pub time: Option<String>,
    /// Extensions as strings (`kind`, `name`, `cluster`, ...).
    pub extensions: BTreeMap<String, String>,
    /// The data as JSON, if any.
    pub data: Option<serde_json::Value>,
}

/// The events of one request.
#[derive(Debug)]
pub struct ParsedRequest {
    /// The events, in request order.
    pub events: Vec<CloudEvent>,
    /// True when the request used batch mode.
    pub batch: bool,
}

/// Parses an HTTP request (headers and body) into CloudEvents.
pub fn parse_request(headers: &http::HeaderMap, body: &[u8]) -> Result<ParsedRequest, Error> {
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.trim().to_ascii_lowercase())
        .unwrap_or_default();
    if content_type.starts_with(BATCH) {
        let events: Vec<cloudevents::Event> = serde_json::from_slice(body)
            .map_err(|error| Error::InvalidJson(format!("batch: {}", short(&error.to_string()))))?;
        if events.is_empty() {
            return Err(Error::InvalidEvent("batch holds no events".to_string()));
        }
        if events.len() > MAX_BATCH_EVENTS {
            return Err(Error::InvalidEvent(format!(
                "batch holds {} events; at most {MAX_BATCH_EVENTS} per request",
                events.len()
            )));
        }
        let events = events
            .into_iter()
            .enumerate()
            .map(|(index, event)| {
                from_sdk(event, false).map_err(|error| match error {
                    Error::InvalidEvent(m) => Error::InvalidEvent(format!("batch[{index}]: {m}")),
                    other => other,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(ParsedRequest {
            events,
            batch: true,
        });
    }
    let binary = if content_type.starts_with(STRUCTURED) {
        false
    } else if headers.contains_key("ce-specversion") {
        true
    } else {
        return Err(Error::NotCloudEvent(format!(
            "no ce-specversion header and content type {:?} is not {STRUCTURED} or {BATCH}",
            if content_type.is_empty() {
                "<none>"
            } else {
                content_type.as_str()
            }
        )));
    };
    let event = if binary {
        for name in ["ce-id", "ce-source", "ce-type"] {
            if !headers.contains_key(name) {
                return Err(Error::InvalidEvent(format!(
                    "missing required header {name}"
                )));
            }
        }
        cloudevents::binding::http::to_event(headers, body.to_vec())
            .map_err(|error| Error::InvalidEvent(short(&error.to_string())))?
    } else {
        serde_json::from_slice::<cloudevents::Event>(body)
            .map_err(|error| Error::InvalidJson(short(&error.to_string())))?
    };
    Ok(ParsedRequest {
        events: vec![from_sdk(event, binary)?],
        batch: false,
    })
}

fn from_sdk(mut event: cloudevents::Event, binary: bool) -> Result<CloudEvent, Error> {
    // Strict UTF-8 after percent-decoding, as the HTTP binding requires: a lossy decode would
    // map distinct ids (`%FF`, `%FE`) to one and drop the second event as a duplicate.
    let decode = |name: &str, value: &str| -> Result<String, Error> {
        if binary {
            match percent_decode_str(value).decode_utf8() {
                Ok(text) => Ok(text.into_owned()),
                Err(_) => Err(Error::InvalidEvent(format!(
                    "header ce-{name}: percent-decoded value is not UTF-8"
                ))),
            }
        } else {
            Ok(value.to_string())
        }
    };
    let id = decode("id", event.id())?;
    let source = decode("source", &event.source().to_string())?;
    let ty = decode("type", event.ty())?;
    for (name, value) in [("id", &id), ("source", &source), ("type", &ty)] {
        if value.trim().is_empty() {
            return Err(Error::InvalidEvent(format!("attribute {name} is empty")));
        }
    }
    let spec_version = event.specversion().to_string();
    let subject = event
        .subject()
        .map(|subject| decode("subject", subject))
        .transpose()?;
    let time = event.time().map(|time| time.to_rfc3339());
    let mut extensions = BTreeMap::new();
    for (name, value) in event.iter_extensions() {
        let text = match value {
            ExtensionValue::String(text) => decode(name, text)?,
            ExtensionValue::Boolean(flag) => flag.to_string(),
            ExtensionValue::Integer(number) => number.to_string(),
        };
        extensions.insert(name.to_string(), text);
    }
    let (_, _, data) = event.take_data();
    let data = match data {
        None => None,
        Some(Data::Json(value)) => Some(value),
        Some(Data::Binary(bytes)) => {
            if bytes.is_empty() {
                None
            } else {
                Some(serde_json::from_slice(&bytes).map_err(|error| {
                    Error::InvalidJson(format!("data: {}", short(&error.to_string())))
                })?)
            }
        }
        Some(Data::String(text)) => {
            if text.trim().is_empty() {
                None
            } else {
                Some(serde_json::from_str(&text).map_err(|error| {
                    Error::InvalidJson(format!("data: {}", short(&error.to_string())))
                })?)
            }
        }
    };
    Ok(CloudEvent {
        spec_version,
        id,
        source,
        ty,
        subject,
        time,
        extensions,
        data,
    })
}

/// Keeps error text well under the 768 bytes that reach a dead-letter event.
pub(crate) fn short(text: &str) -> String {
    const LIMIT: usize = 300;
    if text.len() <= LIMIT {
        return text.to_string();
    }
    let mut end = LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue};

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn binary_mode_reads_headers_and_percent_decodes() {
        let map = headers(&[
            ("ce-specversion", "1.0"),
            ("ce-id", "1"),
            ("ce-source", "https://10.96.0.1:443"),
            ("ce-type", "dev.knative.apiserver.resource.update"),
            ("ce-cluster", "prod%20eu"),
            ("content-type", "application/json"),
        ]);
        let parsed = parse_request(&map, br#"{"a":1}"#).unwrap();
        assert!(!parsed.batch);
        let event = &parsed.events[0];
        assert_eq!(event.extensions["cluster"], "prod eu");
        assert_eq!(event.data, Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn structured_mode() {
        let map = headers(&[(
            "content-type",
            "application/cloudevents+json; charset=utf-8",
        )]);
        let body = br#"{"specversion":"1.0","id":"x","source":"/s","type":"t","kind":"Revision","data":{"b":2}}"#;
        let parsed = parse_request(&map, body).unwrap();
        assert_eq!(parsed.events[0].extensions["kind"], "Revision");
        assert_eq!(parsed.events[0].data, Some(serde_json::json!({"b": 2})));
    }

    #[test]
    fn batch_mode() {
        let map = headers(&[("content-type", "application/cloudevents-batch+json")]);
        let body = br#"[{"specversion":"1.0","id":"1","source":"/s","type":"t"},{"specversion":"1.0","id":"2","source":"/s","type":"t"}]"#;
        let parsed = parse_request(&map, body).unwrap();
        assert!(parsed.batch);
        assert_eq!(parsed.events.len(), 2);
    }

    #[test]
    fn plain_json_is_not_a_cloudevent() {
        let map = headers(&[("content-type", "application/json")]);
        let error = parse_request(&map, b"{}").unwrap_err();
        assert_eq!(error.kind(), "not_cloudevent");
    }

    #[test]
    fn binary_without_id_names_the_header() {
        let map = headers(&[
            ("ce-specversion", "1.0"),
            ("ce-source", "/s"),
            ("ce-type", "t"),
        ]);
        let error = parse_request(&map, b"").unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid CloudEvent: missing required header ce-id"
        );
    }

    #[test]
    fn structured_garbage_is_invalid_json() {
        let map = headers(&[("content-type", "application/cloudevents+json")]);
        assert_eq!(
            parse_request(&map, b"{nope").unwrap_err().kind(),
            "invalid_json"
        );
        assert_eq!(
            parse_request(&map, b"[]").unwrap_err().kind(),
            "invalid_json"
        );
    }

    #[test]
    fn percent_encoded_invalid_utf8_is_invalid_not_replaced() {
        // Lossy decoding would turn both ids into "a\u{FFFD}": the second event a "duplicate".
        for (header, value) in [
            ("ce-id", "a%FF"),
            ("ce-id", "a%FE"),
            ("ce-cluster", "prod%C3"),
        ] {
            let mut pairs = vec![
                ("ce-specversion", "1.0"),
                ("ce-id", "1"),
                ("ce-source", "/s"),
                ("ce-type", "t"),
            ];
            pairs.retain(|(name, _)| *name != header);
            pairs.push((header, value));
            let error = parse_request(&headers(&pairs), b"").unwrap_err();
            assert_eq!(error.kind(), "invalid_event", "{header}: {value}");
            assert!(error.to_string().contains(header), "{error}");
        }
        let map = headers(&[
            ("ce-specversion", "1.0"),
            ("ce-id", "caf%C3%A9"),
            ("ce-source", "/s"),
            ("ce-type", "t"),
        ]);
        assert_eq!(parse_request(&map, b"").unwrap().events[0].id, "café");
    }

    #[test]
    fn short_cuts_on_char_boundary() {
        let long = "é".repeat(400);
        let cut = short(&long);
        assert!(cut.len() <= 304);
    }
}
