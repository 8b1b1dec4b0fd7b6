//! CloudEvents 1.0 over HTTP: binary, structured and batch content modes → [`CloudEvent`].
//!
//! The mode is chosen as Knative's Go SDK chooses it (`v2/protocol/http/message.go`): a CloudEvents
//! content type means structured or batch, a `ce-specversion` header means binary, anything else
//! is not a CloudEvent. Binary and structured events are parsed by the `cloudevents-sdk` crate,
//! which validates the required attributes; batch mode, which the SDK's server side lacks, is a
//! JSON array of structured events parsed with the SDK's `Event` deserializer. Binary-mode header
//! values are percent-decoded here, as the CloudEvents HTTP binding requires and the SDK does not.
//! The common shape of either mode (CloudEvents 1.0, string attributes, JSON data) takes a fast
//! path that builds no SDK event ([`fast_structured`], [`fast_binary`]); tests hold each to the
//! SDK's result, and anything else goes through the SDK.

use std::collections::BTreeMap;

use cloudevents::event::{AttributesReader, Data, ExtensionValue};
use percent_encoding::percent_decode_str;
use serde_json::value::RawValue;

use super::Error;

const STRUCTURED: &str = "application/cloudevents+json";
const BATCH: &str = "application/cloudevents-batch+json";
/// Most events in one batch request: one request is one transaction for the single writer, and
/// a huge batch would stall every other sender behind it.
pub(crate) const MAX_BATCH_EVENTS: usize = 1000;

/// The parts of a CloudEvent the pipeline uses.
#[derive(Debug, Clone)]
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
    /// The data as JSON text (valid JSON), if any: parsed by the object decoder only as far as
    /// the pipeline reads it.
    pub data: Option<Box<RawValue>>,
}

impl CloudEvent {
    /// The data parsed into a tree (`None` without data): for tests and tools, not the event
    /// path, which parses the text only as far as it reads it.
    pub fn data_value(&self) -> Option<serde_json::Value> {
        self.data
            .as_ref()
            .map(|raw| serde_json::from_str(raw.get()).unwrap_or(serde_json::Value::Null))
    }
}

/// Equal attributes and equal data as JSON values (two texts of one value, such as the wire's
/// and a re-serialized one, are equal).
impl PartialEq for CloudEvent {
    fn eq(&self, other: &CloudEvent) -> bool {
        let same_data = match (&self.data, &other.data) {
            (None, None) => true,
            (Some(left), Some(right)) => {
                left.get() == right.get()
                    || serde_json::from_str::<serde_json::Value>(left.get()).ok()
                        == serde_json::from_str::<serde_json::Value>(right.get()).ok()
            }
            _ => false,
        };
        same_data
            && self.spec_version == other.spec_version
            && self.id == other.id
            && self.source == other.source
            && self.ty == other.ty
            && self.subject == other.subject
            && self.time == other.time
            && self.extensions == other.extensions
    }
}

/// The events of one request.
#[derive(Debug)]
pub(crate) struct ParsedRequest<'a> {
    /// The events, in request order.
    pub events: Vec<CloudEvent>,
    /// True when the request used batch mode.
    pub batch: bool,
    /// The one event's data, not yet read as JSON, when the event does not hold it. Whatever
    /// reads the data checks all of it ([`super::apiserver::decode_event`]): the object's parse
    /// reads every byte once instead of a check here, a copy and a second read there.
    pub unread_data: Option<Unread<'a>>,
}

/// An event's data as the request carries it, not yet read as JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unread<'a> {
    /// A binary-mode body (not yet checked as UTF-8).
    Body(&'a [u8]),
    /// The text of a structured body's `data` member, jumped over by the fast path
    /// ([`fast_structured`]); the body was checked as UTF-8.
    Member(&'a str),
}

/// Parses an HTTP request (headers and body) into CloudEvents.
pub(crate) fn parse_request<'a>(
    headers: &http::HeaderMap,
    body: &'a [u8],
) -> Result<ParsedRequest<'a>, Error> {
    // Compared without case, as media types are; lower-cased only for an error's text.
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .unwrap_or_default();
    // The media type, without its parameters (`; charset=utf-8`), compared whole: a prefix
    // match took `application/cloudevents+jsonx` for structured mode, which Go's SDK (and so a
    // Trigger's filter) reads as binary: one request, two events.
    let media_type = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim_end();
    let is = |wanted: &str| media_type.eq_ignore_ascii_case(wanted);
    // The SDK itself takes any type that starts with the structured one for structured mode:
    // a look-alike is refused rather than read one way here and another by the Broker.
    const FAMILY: &str = "application/cloudevents";
    if media_type
        .as_bytes()
        .get(..FAMILY.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(FAMILY.as_bytes()))
        && !is(STRUCTURED)
        && !is(BATCH)
    {
        return Err(Error::InvalidEvent(format!(
            "content type {:?} is neither {STRUCTURED} nor {BATCH}: readers disagree on which \
             mode such a request is in",
            media_type.to_ascii_lowercase()
        )));
    }
    if is(BATCH) {
        let events: Vec<cloudevents::Event> =
            match serde_json::from_slice::<Vec<UniqueMembers>>(body) {
                // Each event from its map (the SDK reads a map either way).
                Ok(maps) => maps
                    .into_iter()
                    .enumerate()
                    .map(|(index, UniqueMembers(map))| {
                        serde_json::from_value(serde_json::Value::Object(map)).map_err(|error| {
                            Error::InvalidJson(format!(
                                "batch[{index}]: {}",
                                short(&error.to_string())
                            ))
                        })
                    })
                    .collect::<Result<_, _>>()?,
                Err(error) => {
                    if let Some(repeated) = repeated_member(&error) {
                        return Err(Error::InvalidJson(format!("batch: {repeated}")));
                    }
                    // Not an array of objects: the SDK's parse says what is wrong, and where.
                    serde_json::from_slice(body).map_err(|error| {
                        Error::InvalidJson(format!("batch: {}", short(&error.to_string())))
                    })?
                }
            };
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
            unread_data: None,
        });
    }
    let binary = if is(STRUCTURED) {
        false
    } else if headers.contains_key("ce-specversion") {
        true
    } else {
        return Err(Error::NotCloudEvent(format!(
            "no ce-specversion header and content type {:?} is not {STRUCTURED} or {BATCH}",
            if content_type.is_empty() {
                "<none>".to_string()
            } else {
                content_type.to_ascii_lowercase()
            }
        )));
    };
    if !binary {
        if let Some(event) = fast_structured(body) {
            let (event, data) = event?;
            return Ok(ParsedRequest {
                events: vec![event],
                batch: false,
                unread_data: data.map(Unread::Member),
            });
        }
    }
    let event = if binary {
        if let Some(event) = fast_binary(headers)? {
            return Ok(ParsedRequest {
                events: vec![event],
                batch: false,
                unread_data: (!body.is_empty()).then_some(Unread::Body(body)),
            });
        }
        // The attributes from the headers; the body (the data) is not the SDK's to copy: the
        // SDK keeps a binary-mode body as bytes as they are (an empty one is no data).
        cloudevents::binding::http::to_event(headers, Vec::new())
            .map_err(|error| Error::InvalidEvent(short(&error.to_string())))?
    } else {
        serde_json::from_slice::<cloudevents::Event>(body)
            .map_err(|error| Error::InvalidJson(short(&error.to_string())))?
    };
    Ok(ParsedRequest {
        events: vec![from_sdk(event, binary)?],
        batch: false,
        unread_data: (binary && !body.is_empty()).then_some(Unread::Body(body)),
    })
}

/// A JSON object whose top-level members are unique: a structured event (or a batch's event)
/// that repeats an attribute is refused, since JSON parsers disagree on which of two values
/// counts (`serde_json` and Go's `encoding/json` take the last, others the first). Members inside
/// `data` are the object's, read by this service alone, and keep JSON's usual last-wins. Parsed
/// in the same pass that builds the map.
struct UniqueMembers(serde_json::Map<String, serde_json::Value>);

const REPEATED_MEMBER: &str = "repeated member ";

impl<'de> serde::Deserialize<'de> for UniqueMembers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = UniqueMembers;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut access: A,
            ) -> Result<UniqueMembers, A::Error> {
                let mut map = serde_json::Map::new();
                while let Some(key) = access.next_key::<String>()? {
                    let value = access.next_value::<serde_json::Value>()?;
                    if map.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!(
                            "{REPEATED_MEMBER}{:?}",
                            short(&key)
                        )));
                    }
                    map.insert(key, value);
                }
                Ok(UniqueMembers(map))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// The refusal of a structured event that repeats member `name`.
fn repeated(name: &str) -> Error {
    Error::InvalidJson(format!(
        "member {:?} is repeated: a CloudEvents attribute takes one member",
        short(name)
    ))
}

/// The message of the `400` for a repeated member, if that is what `error` says.
fn repeated_member(error: &serde_json::Error) -> Option<String> {
    let text = error.to_string();
    let rest = text.strip_prefix(REPEATED_MEMBER)?;
    // "repeated member "name" at line 1 column 40": the member, without serde's position.
    let member = rest.split(" at line ").next().unwrap_or(rest);
    Some(format!(
        "member {member} is repeated: a CloudEvents attribute takes one member"
    ))
}

/// Structured mode in one pass. The SDK parses the document into a JSON value, copies it into a
/// map and copies `data` once more (4 to 6 times the cost of binary mode); here the body's
/// members are found as texts, the attributes parsed, and `data` handed on unread, as a
/// binary-mode body is ([`Unread::Member`]): whatever reads the data checks all of it, so it is
/// read once, not a second time here to be captured. Only the common shape is taken: CloudEvents
/// 1.0, string attributes, JSON data. Anything else (`0.3`, `data_base64`, `dataschema`, a
/// non-JSON content type, an attribute or extension of another type, a body that is not a JSON
/// object, a member name with an escape) returns `None` and goes through the SDK, so acceptance
/// and error messages stay the SDK's. What it returns equals what the SDK path returns for the
/// same body (tests below), except where `data` is not JSON: the SDK refuses the body, and here
/// the read of the data refuses it (`invalid_json` both, the message naming `data`), unless
/// another check refuses the event first (an attribute's, `decode_event`'s: the SDK's parse
/// came before those).
fn fast_structured(body: &[u8]) -> Option<Result<(CloudEvent, Option<&str>), Error>> {
    let text = std::str::from_utf8(body).ok()?;
    // Each value jumped over, not read: every one but `data`'s is parsed below (a text that is
    // not JSON ends the fast path there), and `data`'s by whatever reads the data. The jump
    // reads a member's name as the text between its quotes: one holding a control character is
    // not JSON, and the SDK says so.
    let Some(members) = super::raw::member_texts(text) else {
        // An escaped name (or a text the jump cannot walk) is the SDK's to read, and the SDK
        // takes the last of a repeated member: the names are compared unescaped first.
        let members = super::raw::Members::of(text)?;
        let names: Vec<&str> = members.0.iter().map(|(name, _)| name.as_ref()).collect();
        return super::raw::first_repeated(&names).map(|name| Err(repeated(name)));
    };
    if members
        .iter()
        .any(|(name, _)| name.bytes().any(|byte| byte < 0x20))
    {
        return None;
    }
    let names: Vec<&str> = members.iter().map(|(name, _)| *name).collect();
    if let Some(name) = super::raw::first_repeated(&names) {
        return Some(Err(repeated(name)));
    }
    let get = |name: &str| {
        members
            .iter()
            .find(|(member, _)| *member == name)
            .map(|(_, value)| *value)
    };
    // `Some(None)`: absent or null (the SDK treats null as absent); `None`: not a string.
    let text = |name: &str| -> Option<Option<String>> {
        match get(name) {
            None => Some(None),
            Some(raw) => serde_json::from_str::<Option<String>>(raw).ok(),
        }
    };
    if text("specversion")?.as_deref() != Some("1.0") {
        return None;
    }
    let id = text("id")??;
    let ty = text("type")??;
    let source = text("source")??;
    let content_type = text("datacontenttype")?;
    let subject = text("subject")?;
    let time = match text("time")? {
        None => None,
        Some(raw) => Some(
            chrono::DateTime::parse_from_rfc3339(&raw)
                .ok()?
                .with_timezone(&chrono::Utc)
                .to_rfc3339(),
        ),
    };
    let content_type = content_type.as_deref().unwrap_or("application/json");
    let json = content_type.starts_with("application/json")
        || content_type.starts_with("text/json")
        || content_type.ends_with("+json");
    if get("dataschema").is_some() || get("data_base64").is_some() || !json {
        return None;
    }
    // As in the SDK, `"data": null` is data (which the object parse then refuses).
    let data = get("data");
    let mut extensions = BTreeMap::new();
    for (name, raw) in &members {
        if matches!(
            *name,
            "specversion"
                | "id"
                | "type"
                | "source"
                | "datacontenttype"
                | "subject"
                | "time"
                | "data"
        ) {
            continue;
        }
        let text = match serde_json::from_str::<serde_json::Value>(raw).ok()? {
            serde_json::Value::Null => continue,
            serde_json::Value::String(text) => text,
            serde_json::Value::Bool(flag) => flag.to_string(),
            serde_json::Value::Number(number) => number.as_i64()?.to_string(),
            _ => return None,
        };
        extensions.insert(name.to_string(), text);
    }
    for (name, value) in [("id", &id), ("source", &source), ("type", &ty)] {
        if value.trim().is_empty() {
            return Some(Err(Error::InvalidEvent(format!(
                "attribute {name} is empty"
            ))));
        }
    }
    Some(Ok((
        CloudEvent {
            spec_version: "1.0".to_string(),
            id,
            source,
            ty,
            subject,
            time,
            extensions,
            data: None,
        },
        data,
    )))
}

/// An event's attributes as its message carried them, before the checks every path shares
/// ([`finish`]): the SDK's event and the binary fast path ([`fast_binary`]) read them, one
/// function decodes and checks them, so the two cannot word or take an event differently.
struct Carried<'a> {
    spec_version: String,
    id: &'a str,
    source: &'a str,
    ty: &'a str,
    subject: Option<&'a str>,
    /// RFC 3339, in UTC as the SDK renders it.
    time: Option<String>,
    extensions: Vec<(&'a str, Extension<'a>)>,
}

/// An extension's value as carried.
enum Extension<'a> {
    /// A string: percent-decoded in binary mode, as every string attribute is.
    Text(&'a str),
    /// A boolean or an integer (structured mode), as its text.
    Other(String),
}

/// The checks and the percent-decoding every event gets, in one order (so the first problem
/// named is the same whichever path read the attributes, except among extensions: the fast
/// path names the first bad one in header order, the SDK's event holds them in a hash map of
/// random order). `data` is the caller's.
fn finish(carried: Carried<'_>, binary: bool) -> Result<CloudEvent, Error> {
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
    let id = decode("id", carried.id)?;
    let source = decode("source", carried.source)?;
    let ty = decode("type", carried.ty)?;
    for (name, value) in [("id", &id), ("source", &source), ("type", &ty)] {
        if value.trim().is_empty() {
            return Err(Error::InvalidEvent(format!("attribute {name} is empty")));
        }
    }
    let subject = carried
        .subject
        .map(|subject| decode("subject", subject))
        .transpose()?;
    let mut extensions = BTreeMap::new();
    for (name, value) in carried.extensions {
        let text = match value {
            Extension::Text(text) => decode(name, text)?,
            Extension::Other(text) => text,
        };
        extensions.insert(name.to_string(), text);
    }
    Ok(CloudEvent {
        spec_version: carried.spec_version,
        id,
        source,
        ty,
        subject,
        time: carried.time,
        extensions,
        data: None,
    })
}

/// Binary mode's attributes, in one walk over the headers. First the refusals, in header
/// order:
/// - a repeated `ce-*` header: readers disagree on which of two values counts (Go's
///   `Header.Get`, and so Knative's Trigger filters, takes the first; the SDK's binding reads
///   every header and keeps the last; others join them), so a Trigger could filter on one
///   `ce-cluster` while this service files the event under the other. An attribute has one
///   value;
/// - a `ce-*` value that is not visible ASCII: the HTTP binding (CloudEvents 1.0, section
///   3.1.3.2) has a sender percent-encode anything else, and the SDK would refuse raw UTF-8
///   without saying which header holds it.
///
/// Then a missing `id`, `source` or `type`. Then the common shape is read straight from the
/// headers: CloudEvents 1.0, no `dataschema` (a URL the SDK parses), a `time` that parses.
/// Anything else is `Ok(None)` and goes through the SDK, so acceptance and error messages stay
/// the SDK's. The SDK's binding builds an event (a `String` per header, a hash map of
/// extensions) that [`from_sdk`] then copies once more; what this returns equals what that path
/// returns for the same headers (tests).
fn fast_binary(headers: &http::HeaderMap) -> Result<Option<CloudEvent>, Error> {
    let (mut id, mut source, mut ty, mut subject, mut time) = (None, None, None, None, None);
    let mut extensions = Vec::new();
    let mut common = true;
    // A header's values come one after another in the map's iteration.
    let mut previous: Option<&http::HeaderName> = None;
    for (name, value) in headers {
        let Some(attribute) = name.as_str().strip_prefix("ce-") else {
            continue;
        };
        if previous == Some(name) {
            return Err(Error::InvalidEvent(format!(
                "header {name} is repeated: a CloudEvents attribute takes one header"
            )));
        }
        previous = Some(name);
        let Ok(value) = value.to_str() else {
            return Err(Error::InvalidEvent(format!(
                "header {name} holds bytes that are not visible ASCII: CloudEvents' HTTP binding \
                 has a sender percent-encode them (%D0%BF for п)"
            )));
        };
        match attribute {
            "specversion" => common &= value == "1.0",
            "dataschema" => common = false,
            // Kept by the SDK (and replaced by `Content-Type`), read by no part of the pipeline.
            "datacontenttype" => {}
            "id" => id = Some(value),
            "source" => source = Some(value),
            "type" => ty = Some(value),
            "subject" => subject = Some(value),
            // Parsed as the SDK parses it, from the raw header, and rendered as `from_sdk` does.
            "time" if common => match chrono::DateTime::parse_from_rfc3339(value) {
                Ok(parsed) => time = Some(parsed.with_timezone(&chrono::Utc).to_rfc3339()),
                Err(_) => common = false,
            },
            "time" => {}
            _ => extensions.push((attribute, Extension::Text(value))),
        }
    }
    let (Some(id), Some(source), Some(ty)) = (id, source, ty) else {
        let name = if id.is_none() {
            "ce-id"
        } else if source.is_none() {
            "ce-source"
        } else {
            "ce-type"
        };
        return Err(Error::InvalidEvent(format!(
            "missing required header {name}"
        )));
    };
    // The SDK refuses a `Content-Type` that is not visible ASCII (it reads the header as text
    // for `datacontenttype`): its answer, as before.
    let content_type_is_text = headers
        .get(http::header::CONTENT_TYPE)
        .is_none_or(|value| value.to_str().is_ok());
    if !common || !content_type_is_text {
        return Ok(None);
    }
    let carried = Carried {
        spec_version: "1.0".to_string(),
        id,
        source,
        ty,
        subject,
        time,
        extensions,
    };
    finish(carried, true).map(Some)
}

fn from_sdk(mut event: cloudevents::Event, binary: bool) -> Result<CloudEvent, Error> {
    let (_, _, data) = event.take_data();
    let time = event.time().map(|time| time.to_rfc3339());
    let extensions = event
        .iter_extensions()
        .map(|(name, value)| {
            let value = match value {
                ExtensionValue::String(text) => Extension::Text(text),
                ExtensionValue::Boolean(flag) => Extension::Other(flag.to_string()),
                ExtensionValue::Integer(number) => Extension::Other(number.to_string()),
            };
            (name, value)
        })
        .collect();
    let carried = Carried {
        spec_version: event.specversion().to_string(),
        id: event.id(),
        source: event.source(),
        ty: event.ty(),
        subject: event.subject(),
        time,
        extensions,
    };
    let mut finished = finish(carried, binary)?;
    finished.data = match data {
        None => None,
        Some(Data::Json(value)) => {
            Some(serde_json::value::to_raw_value(&value).map_err(|error| {
                Error::InvalidJson(format!("data: {}", short(&error.to_string())))
            })?)
        }
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
    Ok(finished)
}

/// Keeps error text well under the 768 bytes that reach a dead-letter event.
pub fn short(text: &str) -> String {
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
mod tests;
