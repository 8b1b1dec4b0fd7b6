//! Metrics: one [`Metrics`] value created at start and passed to every stage that counts
//! something (no global registry, so tests can run servers side by side).
//!
//! Names follow `drift_sentinel_<noun>_<unit>_total`; labels are bounded enums (class ids,
//! states, error kinds, outcomes), never object names, URLs or ids.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// A label set with one `kind` label (error kinds).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// A bounded error kind.
    pub kind: String,
}

impl KindLabel {
    /// A label set for `kind`.
    pub fn new(kind: &str) -> KindLabel {
        KindLabel {
            kind: kind.to_string(),
        }
    }
}

/// `outcome` label (what became of an event).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// applied, stale, duplicate, ignored, reference.
    pub outcome: String,
}

/// `code` label (HTTP status of ingest responses).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    /// HTTP status code.
    pub code: String,
}

/// `class` and `state` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabel {
    /// Drift class id.
    pub class: String,
    /// Drift state entered.
    pub state: String,
}

/// Every metric the service exports.
pub struct Metrics {
    registry: Registry,
    /// Events by outcome.
    pub events: Family<OutcomeLabel, Counter>,
    /// Ingest responses by status code.
    pub responses: Family<CodeLabel, Counter>,
    /// Rejected requests by error kind.
    pub ingest_errors: Family<KindLabel, Counter>,
    /// Successful store commits.
    pub store_commits: Counter,
    /// Failed store operations by kind.
    pub store_errors: Family<KindLabel, Counter>,
    /// Drift state transitions by class and state.
    pub drift_transitions: Family<TransitionLabel, Counter>,
    /// Objects tracked by the engine.
    pub tracked_objects: Gauge,
    /// Config reloads that failed (the old config stays).
    pub config_reload_errors: Counter,
    /// Config reloads that took effect.
    pub config_reloads: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("drift_sentinel");
        let events = Family::<OutcomeLabel, Counter>::default();
        registry.register("events", "CloudEvents received, by outcome", events.clone());
        let responses = Family::<CodeLabel, Counter>::default();
        registry.register(
            "ingest_responses",
            "Responses to CloudEvents requests, by HTTP status",
            responses.clone(),
        );
        let ingest_errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "ingest_errors",
            "Requests refused, by error kind",
            ingest_errors.clone(),
        );
        let store_commits = Counter::default();
        registry.register(
            "store_commits",
            "Store transactions committed",
            store_commits.clone(),
        );
        let store_errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "store_errors",
            "Store failures, by kind",
            store_errors.clone(),
        );
        let drift_transitions = Family::<TransitionLabel, Counter>::default();
        registry.register(
            "drift_transitions",
            "Drift state transitions, by class and state entered",
            drift_transitions.clone(),
        );
        let tracked_objects = Gauge::default();
        registry.register(
            "tracked_objects",
            "Objects tracked by the drift engine, tombstones included",
            tracked_objects.clone(),
        );
        let config_reload_errors = Counter::default();
        registry.register(
            "config_reload_errors",
            "Config reloads rejected (the previous config stays in force)",
            config_reload_errors.clone(),
        );
        let config_reloads = Counter::default();
        registry.register(
            "config_reloads",
            "Config reloads applied",
            config_reloads.clone(),
        );
        Metrics {
            registry,
            events,
            responses,
            ingest_errors,
            store_commits,
            store_errors,
            drift_transitions,
            tracked_objects,
            config_reload_errors,
            config_reloads,
        }
    }

    /// Counts a drift transition.
    pub fn record_transition(&self, class: &str, state: &str) {
        self.drift_transitions
            .get_or_create(&TransitionLabel {
                class: class.to_string(),
                state: state.to_string(),
            })
            .inc();
    }

    /// Counts an event outcome.
    pub fn record_event(&self, outcome: &str) {
        self.events
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Encoding into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
