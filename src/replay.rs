//! Replay: run recorded CloudEvents through decode and the engine with a clock driven by the
//! events' own times, and report every drift transition. Deterministic: the same events give the
//! same output, which tests and users rely on.
//!
//! The clock is each event's `time` attribute (the adapter's send time), never going backwards;
//! an event without a `time` keeps the previous clock. Before each event, drifts whose grace ran
//! out fire; after the last event the clock advances by `settle` so pending drifts show whether
//! they would fire. Redeliveries (same `time`, `source` and `id`) take effect once, as in the
//! service.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use drift_core::classify::{Engine, Rules};
use drift_core::decode::{self, ClusterNames, Decoded};
use drift_model::time::format_time;
use drift_model::wire::drift::{ActorView, OwnerView};
use drift_model::{Millis, Transition};

/// Why replay input was rejected.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input line is not JSON.
    #[error("{origin}: not JSON: {message}")]
    Json {
        /// File and line.
        origin: String,
        /// Parser message.
        message: String,
    },
    /// An event could not be decoded.
    #[error("{origin}: {source}")]
    Decode {
        /// File and line.
        origin: String,
        /// Decode error.
        #[source]
        source: decode::Error,
    },
}

/// One recorded event and where it came from (for error messages).
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `file:line`.
    pub origin: String,
    /// The structured-mode CloudEvent.
    pub event: Value,
}

/// Splits a file's text into events: JSON lines (`file:line`), a JSON array (`file[index]`), or
/// one pretty-printed event (`file`).
pub fn parse_file(name: &str, text: &str) -> Result<Vec<Recorded>, Error> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .collect();
    let as_lines: Option<Vec<Recorded>> = lines
        .iter()
        .map(|(number, line)| {
            serde_json::from_str::<Value>(line)
                .ok()
                .filter(Value::is_object)
                .map(|event| Recorded {
                    origin: format!("{name}:{}", number + 1),
                    event,
                })
        })
        .collect();
    if let Some(events) = as_lines {
        return Ok(events);
    }
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        if let Ok(value) = serde_json::from_str::<Value>(text) {
            return Ok(match value {
                Value::Array(items) => items
                    .into_iter()
                    .enumerate()
                    .map(|(index, event)| Recorded {
                        origin: format!("{name}[{index}]"),
                        event,
                    })
                    .collect(),
                event => vec![Recorded {
                    origin: name.to_string(),
                    event,
                }],
            });
        }
    }
    // Neither form: report the first line that is not a JSON object.
    for (number, line) in lines {
        if let Err(error) = serde_json::from_str::<serde_json::Map<String, Value>>(line) {
            return Err(Error::Json {
                origin: format!("{name}:{}", number + 1),
                message: error.to_string(),
            });
        }
    }
    Ok(Vec::new())
}

/// Replays events; returns every transition in order.
pub fn replay(
    events: &[Recorded],
    rules: Arc<Rules>,
    clusters: &ClusterNames,
    settle: Millis,
) -> Result<Vec<Transition>, Error> {
    let mut engine = Engine::new(rules);
    let mut seen = HashSet::new();
    let mut transitions = Vec::new();
    let mut clock: Millis = 0;
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/cloudevents+json"),
    );
    for recorded in events {
        let body = serde_json::to_vec(&recorded.event).map_err(|error| Error::Json {
            origin: recorded.origin.clone(),
            message: error.to_string(),
        })?;
        let decoded =
            decode::decode_request(&headers, &body, clusters).map_err(|source| Error::Decode {
                origin: recorded.origin.clone(),
                source,
            })?;
        if let Some(time) = recorded
            .event
            .get("time")
            .and_then(Value::as_str)
            .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
        {
            clock = clock.max(time.timestamp_millis());
        }
        engine.begin();
        engine.tick(clock);
        for item in &decoded {
            if let Decoded::ApiServer(event) = item {
                if seen.insert((event.sent_at(), event.source.clone(), event.id.clone())) {
                    engine.apply(event, clock);
                }
            }
        }
        transitions.extend_from_slice(engine.staged().transitions);
        engine.commit();
    }
    engine.begin();
    engine.tick(clock.saturating_add(settle));
    transitions.extend_from_slice(engine.staged().transitions);
    engine.commit();
    Ok(transitions)
}

/// One transition as a JSON line (`replay --format json`): the move, the drift's identity
/// (with the rule of an `invariant` drift) and its evidence: summary, field changes, actor, hint,
/// the Knative owner chain and the class's facts.
pub fn transition_json(transition: &Transition) -> Value {
    let drift = &transition.drift;
    serde_json::json!({
        "at": format_time(transition.at),
        "state": drift.state.as_str(),
        "from": transition.from.map(|state| state.as_str()),
        "notify": transition.is_notifiable(),
        "class": drift.class,
        "rule": drift.rule,
        "severity": drift.severity.as_str(),
        "cluster": drift.cluster,
        "object": format!("{}/{}/{}", drift.kind, drift.namespace, drift.name),
        "driftId": drift.id,
        "summary": drift.evidence.summary,
        "actor": drift.evidence.actor.as_ref().map(ActorView::from),
        "changes": drift_model::wire::diff::entries(&drift.evidence.changes),
        "hint": drift.evidence.hint,
        "owner": OwnerView {
            service: drift.owner.service.clone(),
            configuration: drift.owner.configuration.clone(),
            revision: drift.owner.revision.clone(),
        },
        "facts": drift.evidence.facts,
        "resolution": drift.resolution,
    })
}

/// One transition as a line of text.
pub(crate) fn transition_text(transition: &Transition) -> String {
    let drift = &transition.drift;
    let mut line = format!(
        "{} {:<8} {:<18} {:<8} {}/{}/{}/{}: {}",
        format_time(transition.at),
        drift.state.as_str().to_uppercase(),
        drift.class,
        drift.severity.as_str(),
        drift.cluster,
        drift.kind,
        drift.namespace,
        drift.name,
        drift.evidence.summary
    );
    if let Some(reason) = &drift.resolution {
        line.push_str(&format!(" [resolved: {reason}]"));
    }
    if let (Some(hint), drift_model::DriftState::Firing) = (&drift.evidence.hint, drift.state) {
        line.push_str(&format!("\n    fix: {hint}"));
    }
    line
}
