//! Decode: HTTP headers + body → CloudEvents → ApiServerSource events. Pure: no I/O, no clock.
//!
//! Input is what the ingest handler read off the wire; output is a list of [`Decoded`] values,
//! one per CloudEvent in the request (batch mode carries several). Every failure is a typed
//! [`Error`] whose message names what is wrong and where, short enough to fit the 768 bytes of a
//! `400` body that Knative copies into a dead-letter event. Decoding never panics.
//!
//! Architecture invariant: Secret values never leave this module. A `v1` `Secret`'s `data` and
//! `stringData` values (and its `last-applied-configuration` annotation) are replaced by short
//! SHA-256 hashes before the object is handed on, so diffs, logs, the store and alerts only ever
//! see key names and hashes.

pub(crate) mod apiserver;
pub mod cloudevent;
pub mod cluster_name;
pub mod data;
pub(crate) mod fast;
pub(crate) mod kept;
// Test data, kept with the tests (`tests/`), which may read files.
#[cfg(test)]
#[path = "tests/fixtures.rs"]
pub(crate) mod fixtures;
pub mod object;
pub(crate) mod raw;
pub(crate) mod shape;
pub(crate) mod tree;

pub use apiserver::{Action, ApiServerEvent, ClusterNames, Decoded, Mode};
pub use cloudevent::CloudEvent;
pub use data::DataMap;
pub use object::{FieldsV1, KubeObject, ManagedFieldsEntry, ObjectSpec, OwnerReference};
pub use shape::{parse_object, parse_object_text};

/// Why a request or an event could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither a `ce-specversion` header nor a CloudEvents content type.
    #[error("not a CloudEvent: {0}")]
    NotCloudEvent(String),
    /// A CloudEvent attribute is missing or invalid.
    #[error("invalid CloudEvent: {0}")]
    InvalidEvent(String),
    /// The body of a structured or batch request is not valid JSON of the expected shape.
    #[error("invalid CloudEvent JSON: {0}")]
    InvalidJson(String),
    /// The event is a valid CloudEvent but its data is not a usable Kubernetes object.
    #[error("invalid ApiServerSource data: {0}")]
    InvalidObject(String),
}

impl Error {
    /// A stable, bounded label for metrics and the `code` of a `400` body.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::NotCloudEvent(_) => "not_cloudevent",
            Error::InvalidEvent(_) => "invalid_event",
            Error::InvalidJson(_) => "invalid_json",
            Error::InvalidObject(_) => "invalid_object",
        }
    }
}

/// Decodes one HTTP request into the ApiServerSource events it carries.
///
/// A request with one bad event in a batch fails whole: the Broker never sends batches, and a
/// client that does gets a precise error to fix rather than a partial acceptance.
pub fn decode_request(
    headers: &http::HeaderMap,
    body: &[u8],
    clusters: &ClusterNames,
) -> Result<Vec<Decoded>, Error> {
    let parsed = cloudevent::parse_request(headers, body)?;
    let body = match parsed.unread_data {
        Some(cloudevent::Unread::Body(body)) => {
            let text = std::str::from_utf8(body).map_err(|error| {
                Error::InvalidJson(format!(
                    "data: invalid UTF-8 at byte {}",
                    error.valid_up_to()
                ))
            })?;
            // JSON's whitespace around the value is not the value's: a sender's trailing
            // newline must not make a compact object look otherwise (nor its spec text differ).
            Some(text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r')))
        }
        // The member's text, without the whitespace around it.
        Some(cloudevent::Unread::Member(text)) => Some(text),
        None => None,
    };
    let mut decoded = Vec::with_capacity(parsed.events.len());
    for (index, event) in parsed.events.into_iter().enumerate() {
        let item = apiserver::decode_event(event, body, clusters).map_err(|error| {
            if parsed.batch {
                prefix_index(error, index)
            } else {
                error
            }
        })?;
        decoded.push(item);
    }
    Ok(decoded)
}

fn prefix_index(error: Error, index: usize) -> Error {
    match error {
        Error::NotCloudEvent(m) => Error::NotCloudEvent(format!("batch[{index}]: {m}")),
        Error::InvalidEvent(m) => Error::InvalidEvent(format!("batch[{index}]: {m}")),
        Error::InvalidJson(m) => Error::InvalidJson(format!("batch[{index}]: {m}")),
        Error::InvalidObject(m) => Error::InvalidObject(format!("batch[{index}]: {m}")),
    }
}
