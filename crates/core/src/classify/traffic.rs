//! Served traffic as Prometheus counted it (issue 32): the observations the service's poller
//! hands the writer, and the engine's book of the latest one per Route, which
//! `traffic_share_drift` compares with the Route's declared split.
//!
//! Pure: the poller (`src/traffic/`, outside the core) runs the query; the engine files what it
//! returned under the Routes it concerns ([`TrafficBook::file`]) and judges them again. The book
//! is not journaled: an observation is not a durable effect, and a rolled-back round's is
//! simply judged again at the next one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use drift_model::{Millis, ObjectKey};

use super::kinds::SERVING;
use super::{Graph, ObjectState};

/// Most Revisions kept per Route in one observation (a Service rarely serves from more; the
/// rest would only grow the book).
pub const MAX_REVISIONS_PER_ROUTE: usize = 100;

/// Windows without a verdict after which an open `traffic_share_drift` is resolved.
pub const STALE_WINDOWS: u32 = 3;

/// Requests one Revision served in the window, as one series of the query's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    /// The namespace label.
    pub namespace: String,
    /// The Knative Service label (empty when the series has none).
    pub service: String,
    /// The Revision label.
    pub revision: String,
    /// Requests in the window (`increase`: may be fractional).
    pub requests: f64,
}

/// One answer of Prometheus: every series the query returned, with how it was asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The cluster the series are filed under (`traffic.cluster`).
    pub cluster: String,
    /// The PromQL that ran.
    pub query: String,
    /// The window the requests were counted over.
    pub window: Duration,
    /// `traffic.tolerancePercent`.
    pub tolerance_percent: f64,
    /// `traffic.minRequests`.
    pub min_requests: u64,
    /// The series.
    pub series: Vec<Served>,
}

/// What the book keeps of an observation for one Route.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteTraffic {
    /// When the observation was filed.
    pub at: Millis,
    /// The window it counted over, in milliseconds.
    pub window_ms: Millis,
    /// The PromQL that ran (shared by every Route of the observation).
    pub query: Arc<str>,
    /// `traffic.tolerancePercent`.
    pub tolerance_percent: f64,
    /// `traffic.minRequests`.
    pub min_requests: u64,
    /// Requests per Revision in the window: the Route's Service's series, and the series of
    /// Revisions its status names, summed per Revision; never those of a Revision only 0 %
    /// tagged targets name ([`Declared::tag_only`]).
    pub requests: BTreeMap<String, f64>,
    /// The Route's declared split when the observation was filed.
    pub declared: Declared,
    /// Since when the book has known that split: the first observation that saw it. A window
    /// that began before it may count requests of an earlier split.
    pub declared_since: Millis,
}

impl RouteTraffic {
    /// True when the whole window ran under the declared split as the book knows it.
    pub fn window_under_split(&self) -> bool {
        self.at.saturating_sub(self.window_ms) >= self.declared_since
    }
}

/// A duration as PromQL writes it: whole seconds (`600s`), else milliseconds.
pub fn promql_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// A Route's declared split, as `status.traffic` gives it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    /// Percent per Revision, summed over its targets (a target without a Revision name is
    /// skipped: Knative resolves every target in the status).
    pub split: BTreeMap<String, f64>,
    /// Revisions that only 0 % tagged targets name (blue/green's `tag: candidate, percent: 0`):
    /// requests to the tag's own URL reach the same queue-proxy and count as served, so their
    /// requests are left out of the shares and of the total. A Revision with a declared percent
    /// and a tag keeps its tagged requests (the metrics cannot tell them apart reliably).
    pub tag_only: BTreeSet<String>,
}

/// The declared split of a Route (see [`Declared`]).
pub fn declared_split(route: &ObjectState) -> Declared {
    let mut declared = Declared::default();
    let Some(serde_json::Value::Array(targets)) = route.status_field("traffic") else {
        return declared;
    };
    for target in &targets {
        let Some(revision) = target
            .get("revisionName")
            .and_then(serde_json::Value::as_str)
            .filter(|name| !name.is_empty())
        else {
            continue;
        };
        let percent = target
            .get("percent")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0);
        let tagged = target
            .get("tag")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|tag| !tag.is_empty());
        if percent == 0.0 && tagged {
            declared.tag_only.insert(revision.to_string());
        } else {
            *declared.split.entry(revision.to_string()).or_insert(0.0) += percent;
        }
    }
    // A Revision with a declared percent (or an untagged target) as well is in the split.
    let split = &declared.split;
    declared
        .tag_only
        .retain(|revision| !split.contains_key(revision));
    declared
}

/// The latest observation per Route, for the live Routes it concerned (bounded by the graph).
#[derive(Debug, Default)]
pub struct TrafficBook {
    routes: HashMap<ObjectKey, RouteTraffic>,
    /// Since when each Route with an open `traffic_share_drift` has had no verdict, counted
    /// from the first observation that gave none (bounded by the open drifts).
    pub(crate) unjudged: HashMap<ObjectKey, Millis>,
    /// True when this process observes served traffic (`traffic.prometheus.url`; the writer
    /// says so). Without it, open drifts of the class are resolved at start and reload.
    pub(crate) observed: bool,
}

impl TrafficBook {
    /// The latest observation of this object, when it is a Route the book has one for. Cheap
    /// for every other object: an empty book, or another kind, is answered before any lookup.
    pub fn of(&self, object: &ObjectState) -> Option<&RouteTraffic> {
        if self.routes.is_empty() || object.kind != "Route" {
            return None;
        }
        self.routes.get(&object.key())
    }

    /// Routes in the book.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// True when the book holds nothing.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Drops what the book holds of an object (a Route deleted or forgotten).
    pub fn forget(&mut self, key: &ObjectKey) {
        if !self.routes.is_empty() {
            self.routes.remove(key);
        }
    }

    /// Files an observation at `now` under the live Routes of its cluster it concerns: the
    /// Route with the name of a series' Service (a Service's Route has its name), and every
    /// Route already in the book (whose series may have vanished: it is filed with none).
    /// Several series of one Revision (a query of one's own that keeps another label, e.g. the
    /// pod) are summed. Entries of Routes no longer live are dropped. Returns the Routes to
    /// judge again: those whose requests, declared split or settings changed since their last
    /// observation, or whose window was not yet under their split (the rest would get the same
    /// verdict as last time).
    pub fn file(
        &mut self,
        graph: &Graph,
        observation: &Observation,
        now: Millis,
    ) -> Vec<ObjectKey> {
        let cluster = observation.cluster.as_str();
        // Requests per (namespace, revision), with the first non-empty Service label seen.
        let mut by_revision: HashMap<(&str, &str), (&str, f64)> = HashMap::new();
        for served in &observation.series {
            let entry = by_revision
                .entry((served.namespace.as_str(), served.revision.as_str()))
                .or_insert((served.service.as_str(), 0.0));
            if entry.0.is_empty() {
                entry.0 = served.service.as_str();
            }
            entry.1 += served.requests;
        }
        let mut by_service: HashMap<(&str, &str), Vec<(&str, f64)>> = HashMap::new();
        for (&(namespace, revision), &(service, requests)) in &by_revision {
            by_service
                .entry((namespace, service))
                .or_default()
                .push((revision, requests));
        }
        let mut routes: Vec<ObjectKey> = by_service
            .keys()
            .filter(|(_, service)| !service.is_empty())
            .filter_map(|(namespace, service)| {
                graph.live_by_name(cluster, SERVING, "Route", namespace, service)
            })
            .map(ObjectState::key)
            .collect();
        routes.extend(
            self.routes
                .keys()
                .filter(|key| key.cluster == cluster)
                .cloned(),
        );
        routes.sort();
        routes.dedup();
        let query: Arc<str> = Arc::from(observation.query.as_str());
        let window_ms = Millis::try_from(observation.window.as_millis()).unwrap_or(Millis::MAX);
        let mut filed = Vec::new();
        for key in routes {
            let Some(route) = graph.get(&key).filter(|route| !route.deleted) else {
                self.routes.remove(&key);
                continue;
            };
            let declared = declared_split(route);
            let mut requests: BTreeMap<String, f64> = BTreeMap::new();
            let own = by_service
                .get(&(route.namespace.as_str(), route.name.as_str()))
                .into_iter()
                .flatten()
                .copied();
            // A Revision the status names counts whatever its series' Service label says (a
            // Route of its own, not a Service's, has Revisions labelled with no Service).
            let named = declared.split.keys().filter_map(|revision| {
                by_revision
                    .get(&(route.namespace.as_str(), revision.as_str()))
                    .map(|&(_, requests)| (revision.as_str(), requests))
            });
            for (revision, served) in own.chain(named) {
                if declared.tag_only.contains(revision)
                    || (requests.len() >= MAX_REVISIONS_PER_ROUTE
                        && !requests.contains_key(revision))
                {
                    continue;
                }
                // The same Revision reached by both ways counts once.
                requests.insert(revision.to_string(), served);
            }
            let previous = self.routes.get(&key);
            let declared_since = match previous {
                Some(previous) if previous.declared == declared => previous.declared_since,
                _ => now,
            };
            let unchanged = previous.is_some_and(|previous| {
                previous.window_under_split()
                    && previous.declared == declared
                    && previous.requests == requests
                    && previous.tolerance_percent == observation.tolerance_percent
                    && previous.min_requests == observation.min_requests
                    && previous.window_ms == window_ms
                    && *previous.query == *query
            });
            self.routes.insert(
                key.clone(),
                RouteTraffic {
                    at: now,
                    window_ms,
                    query: Arc::clone(&query),
                    tolerance_percent: observation.tolerance_percent,
                    min_requests: observation.min_requests,
                    requests,
                    declared,
                    declared_since,
                },
            );
            if !unchanged {
                filed.push(key);
            }
        }
        filed
    }
}
