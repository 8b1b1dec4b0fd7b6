//! Metrics: one [`Metrics`] value created at start and passed to every stage that counts
//! something (no global registry, so tests can run servers side by side).
//!
//! Names follow `drift_sentinel_<noun>_<unit>_total`; labels are bounded enums (class ids,
//! states, error kinds, outcomes), never object names, URLs or ids.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

mod handles;
mod labels;
pub use labels::*;

use handles::Handles;

/// The outcomes of `EventResult::as_str` (an outcome not listed is counted through the family).
const OUTCOMES: [&str; 7] = [
    "applied",
    "stale",
    "duplicate",
    "ignored",
    "reference",
    "conflict",
    "over_capacity",
];

/// The (type, mode) pairs the ingest path counts in `events_received`.
const RECEIVED: [(&str, &str); 7] = [
    ("add", "resource"),
    ("update", "resource"),
    ("delete", "resource"),
    ("add", "reference"),
    ("update", "reference"),
    ("delete", "reference"),
    ("other", "none"),
];

/// Most namespaces given their own `drifts_firing` series; the rest share `_other`.
pub(crate) const NAMESPACE_LABEL_CAP: usize = 100;

/// Every metric the service exports.
pub struct Metrics {
    registry: Registry,
    /// Events by outcome. Never cleared: `event_handles` keeps handles to its series (as
    /// `received_handles` to `events_received`'s and `accepted_handle` to `responses`').
    pub events: Family<OutcomeLabel, Counter>,
    /// `events`' series of the known outcomes.
    event_handles: Handles<&'static str, 7>,
    /// `events_received`'s series of the known types and modes.
    received_handles: Handles<(&'static str, &'static str), 7>,
    /// `responses`' series of `202`, what nearly every request is answered.
    accepted_handle: Handles<u16, 1>,
    /// Ingest responses by status code. Never cleared (`accepted_handle`).
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
    /// Config reloads that found sections other than `rules:` changed (they need a restart).
    pub config_restart_required: Counter,
    /// Delivery attempts by channel and outcome.
    pub deliveries: Family<DeliveryLabel, Counter>,
    /// Seconds from queueing to delivery, by channel.
    pub delivery_latency: Family<ChannelLabel, Histogram>,
    /// Notifications waiting in the outbox.
    pub outbox_pending: Gauge,
    /// Age of the oldest waiting notification, in seconds.
    pub outbox_oldest_age_seconds: Gauge,
    /// Notifications that ended rejected or expired.
    pub outbox_dead: Family<StateLabel, Gauge>,
    /// Drifts currently firing, by class, severity and namespace.
    pub drifts_firing: Family<FiringLabel, Gauge>,
    /// Findings (drifts that fired), by class and severity.
    pub findings: Family<ClassSeverityLabel, Counter>,
    /// Events received, by type and mode. Never cleared (`received_handles`).
    pub events_received: Family<EventTypeLabel, Counter>,
    namespaces: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// Notifications queued, by channel.
    pub notifications_queued: Family<ChannelLabel, Counter>,
    /// Remediation attempts recorded, by action and outcome.
    pub remediations: Family<RemediationLabel, Counter>,
    /// Seconds one store commit took (the writer's transaction; with SQLite without its fsync,
    /// which `store_sync_seconds` times).
    pub store_commit_seconds: Histogram,
    /// Seconds one sync of the store took (SQLite's WAL fsync, off the writer's thread; one
    /// covers every round committed before it).
    pub store_sync_seconds: Histogram,
    /// Seconds the writer spent on one round (apply, classify, route, commit).
    pub writer_round_seconds: Histogram,
    /// Unix time of the last resync that listed every resource.
    pub resync_last_success: Gauge,
    /// Objects the last complete resync listed.
    pub resync_objects_listed: Gauge,
    /// Listed objects whose state events had not delivered, plus objects deleted without an
    /// event: what the ApiServerSource lost.
    pub resync_missed_changes: Counter,
    /// Drifts opened by resync, by class: drifts the events had missed.
    pub resync_drifts_found: Family<ClassLabel, Counter>,
    /// Failed resync lists, by error kind.
    pub resync_errors: Family<KindLabel, Counter>,
    /// Queries of served traffic Prometheus answered (`traffic:`).
    pub traffic_queries: Counter,
    /// Queries of served traffic that failed, by kind (`unreachable`, `token_file`,
    /// `http_status`, `query_error`, `invalid_response`, `unexpected_result`).
    pub traffic_query_errors: Family<KindLabel, Counter>,
    /// Answers not handed to the writer because its queue was full (skipped, not waited for).
    pub traffic_observations_skipped: Counter,
    /// 1 while the last query of served traffic succeeded, 0 during an outage; by the cluster
    /// the observations are filed under, absent while the poller is off.
    pub traffic_prometheus_up: Family<ClusterLabel, Gauge>,
    /// Resync passes that ended, by what started them and how they ended.
    pub resync_passes: Family<ResyncPassLabel, Counter>,
    /// Events for an object tracked under another cluster name that events carry: not applied.
    pub cluster_conflicts: Counter,
    /// Events whose `resourceVersion` was implausibly far ahead of their cluster's.
    pub implausible_versions: Counter,
    /// Evaluations of an invariant that failed, by rule and kind.
    pub invariant_errors: Family<RuleErrorLabel, Counter>,
    /// 1 when a part of drift-sentinel's own event path is ready and points where it should,
    /// 0 when not (or gone); absent until the part was seen.
    pub pipeline_ready: Family<PipelinePartLabel, Gauge>,
    /// New objects not tracked because their cluster (or the number of clusters) was at the cap.
    pub objects_refused: Counter,
    /// Objects tracked in the cluster with the most.
    pub cluster_objects_max: Gauge,
    /// The cap on objects tracked per cluster (`limits.maxObjectsPerCluster`).
    pub cluster_objects_limit: Gauge,
    /// `limits.maxObjects`.
    pub objects_limit: Gauge,
    /// About how many bytes the tracked state takes.
    pub state_bytes: Gauge,
    /// `limits.maxStateBytes`.
    pub state_bytes_limit: Gauge,
    /// HTTP connections accepted.
    pub http_connections_opened: Counter,
    /// HTTP connections closed, by reason.
    pub http_connections_closed: Family<ReasonLabel, Counter>,
    /// 1 while this replica holds its shard's writer lease, 0 while it is a standby (PostgreSQL
    /// store only).
    pub writer_lease_held: Family<ShardLabel, Gauge>,
    /// Times this replica took its shard's writer lease after another holder had it (a failover,
    /// or a handover at a rolling update).
    pub writer_lease_takeovers: Family<ShardLabel, Counter>,
    /// Times this replica lost (or gave up) the writer lease, by reason (`taken_over`: another
    /// replica holds it now; `unrenewed`: no renewal reached the database within the lease;
    /// `commit_unknown`: a commit's outcome could not be told, the state is loaded again).
    pub writer_lease_losses: Family<ShardReasonLabel, Counter>,
    /// Outbox rows a relay took over from a claim that had lapsed (its process died or stalled
    /// mid-send): sent again under the same idempotency key.
    pub outbox_claim_expiries: Family<ChannelLabel, Counter>,
    /// Resource events by shard: `owned`, or answered `421` because their cluster is another
    /// shard's (`refused`) or their batch held such an event (`refused_with_batch`).
    pub shard_events: Family<ShardOutcomeLabel, Counter>,
}

/// Buckets for the writer's rounds and commits: a quarter millisecond to a second.
fn round_buckets() -> [f64; 12] {
    [
        0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 1.0,
    ]
}

fn latency_histogram() -> Histogram {
    Histogram::new([
        0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
    ])
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Clears what only a writer knows (its state, its drifts, its outbox, its resync), when
    /// this replica stops being the writer: a standby that kept the last values would count
    /// every firing drift a second time beside the new writer. Counters stay (they only grow;
    /// `rate()` handles a replica that stops adding to them).
    pub(crate) fn clear_writer_gauges(&self) {
        for gauge in [
            &self.tracked_objects,
            &self.outbox_pending,
            &self.outbox_oldest_age_seconds,
            &self.resync_last_success,
            &self.resync_objects_listed,
            &self.cluster_objects_max,
            &self.state_bytes,
        ] {
            gauge.set(0);
        }
        self.outbox_dead.clear();
        self.drifts_firing.clear();
        self.pipeline_ready.clear();
        // The poller runs with the writer role: a standby's last answer would say nothing of
        // the Prometheus the new writer queries.
        self.traffic_prometheus_up.clear();
    }

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
        let config_restart_required = Counter::default();
        registry.register(
            "config_restart_required",
            "Config reloads that found sections other than rules: changed, which take effect only after a restart",
            config_restart_required.clone(),
        );
        let deliveries = Family::<DeliveryLabel, Counter>::default();
        registry.register(
            "deliveries",
            "Delivery attempts, by channel and outcome",
            deliveries.clone(),
        );
        let delivery_latency = Family::<ChannelLabel, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "delivery_latency_seconds",
            "Time from queueing a notification to its delivery",
            delivery_latency.clone(),
        );
        let outbox_pending = Gauge::default();
        registry.register(
            "outbox_pending",
            "Notifications waiting for delivery",
            outbox_pending.clone(),
        );
        let outbox_oldest_age_seconds = Gauge::default();
        registry.register(
            "outbox_oldest_age_seconds",
            "Age of the oldest notification waiting for delivery",
            outbox_oldest_age_seconds.clone(),
        );
        let outbox_dead = Family::<StateLabel, Gauge>::default();
        registry.register(
            "outbox_dead",
            "Notifications that ended rejected or expired",
            outbox_dead.clone(),
        );
        let drifts_firing = Family::<FiringLabel, Gauge>::default();
        registry.register(
            "drifts_firing",
            "Drifts currently firing, by class, severity and namespace (namespaces beyond 100 are _other)",
            drifts_firing.clone(),
        );
        let findings = Family::<ClassSeverityLabel, Counter>::default();
        registry.register(
            "findings",
            "Drifts that fired, by class and severity",
            findings.clone(),
        );
        let events_received = Family::<EventTypeLabel, Counter>::default();
        registry.register(
            "events_received",
            "CloudEvents received, by type and mode",
            events_received.clone(),
        );
        let notifications_queued = Family::<ChannelLabel, Counter>::default();
        registry.register(
            "notifications_queued",
            "Notifications queued, by channel",
            notifications_queued.clone(),
        );
        let remediations = Family::<RemediationLabel, Counter>::default();
        registry.register(
            "remediations",
            "Remediation attempts, by action and final outcome (each counted once, when it ends)",
            remediations.clone(),
        );
        let store_commit_seconds = Histogram::new(round_buckets());
        registry.register(
            "store_commit_seconds",
            "Time of one store commit (one transaction for a round of events; SQLite's fsync is store_sync_seconds)",
            store_commit_seconds.clone(),
        );
        let store_sync_seconds = Histogram::new(round_buckets());
        registry.register(
            "store_sync_seconds",
            "Time of one sync of the store (SQLite's WAL fsync, after one or more rounds' commits and before their answers)",
            store_sync_seconds.clone(),
        );
        let writer_round_seconds = Histogram::new(round_buckets());
        registry.register(
            "writer_round_seconds",
            "Time the single writer spent on one round of requests (apply, classify, commit)",
            writer_round_seconds.clone(),
        );
        let resync_last_success = Gauge::default();
        registry.register(
            "resync_last_success_timestamp_seconds",
            "Unix time of the last resync that listed every resource",
            resync_last_success.clone(),
        );
        let resync_objects_listed = Gauge::default();
        registry.register(
            "resync_objects_listed",
            "Objects listed by the last complete resync",
            resync_objects_listed.clone(),
        );
        let resync_missed_changes = Counter::default();
        registry.register(
            "resync_missed_changes",
            "Object states and deletions found by resync that no event had delivered",
            resync_missed_changes.clone(),
        );
        let resync_drifts_found = Family::<ClassLabel, Counter>::default();
        registry.register(
            "resync_drifts_found",
            "Drifts opened by resync (missed by events), by class",
            resync_drifts_found.clone(),
        );
        let resync_errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "resync_errors",
            "Resync lists that failed, by error kind",
            resync_errors.clone(),
        );
        let traffic_queries = Counter::default();
        registry.register(
            "traffic_queries",
            "Queries of served traffic Prometheus answered",
            traffic_queries.clone(),
        );
        let traffic_query_errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "traffic_query_errors",
            "Queries of served traffic that failed, by kind",
            traffic_query_errors.clone(),
        );
        let traffic_observations_skipped = Counter::default();
        registry.register(
            "traffic_observations_skipped",
            "Answers of Prometheus skipped because the writer's queue was full",
            traffic_observations_skipped.clone(),
        );
        let traffic_prometheus_up = Family::<ClusterLabel, Gauge>::default();
        registry.register(
            "traffic_prometheus_up",
            "1 while the last query of served traffic succeeded, 0 during an outage",
            traffic_prometheus_up.clone(),
        );
        let resync_passes = Family::<ResyncPassLabel, Counter>::default();
        registry.register(
            "resync_passes",
            "Resync passes that ended, by trigger (schedule, api) and outcome (complete, incomplete, failed)",
            resync_passes.clone(),
        );
        let cluster_conflicts = Counter::default();
        registry.register(
            "cluster_conflicts",
            "Events naming another cluster than the one their object's events carry (not applied)",
            cluster_conflicts.clone(),
        );
        let pipeline_ready = Family::<PipelinePartLabel, Gauge>::default();
        registry.register(
            "pipeline_ready",
            "1 when a part of drift-sentinel's own event path (ApiServerSource, Broker, Trigger) is ready and points where it should, else 0",
            pipeline_ready.clone(),
        );
        let invariant_errors = Family::<RuleErrorLabel, Counter>::default();
        registry.register(
            "invariant_errors",
            "Evaluations of a team invariant (rules.invariants) that failed on an object, by rule and kind (evaluation: a missing field or a type mismatch; budget: stopped by its evaluation budget)",
            invariant_errors.clone(),
        );
        let implausible_versions = Counter::default();
        registry.register(
            "implausible_resource_versions",
            "Events whose resourceVersion was implausibly far ahead of their cluster's",
            implausible_versions.clone(),
        );
        let objects_refused = Counter::default();
        registry.register(
            "objects_refused",
            "New objects not tracked because a cap of limits: was reached",
            objects_refused.clone(),
        );
        let cluster_objects_max = Gauge::default();
        registry.register(
            "cluster_tracked_objects_max",
            "Objects tracked in the cluster with the most (tombstones included)",
            cluster_objects_max.clone(),
        );
        let cluster_objects_limit = Gauge::default();
        registry.register(
            "cluster_tracked_objects_limit",
            "The cap on objects tracked per cluster (limits.maxObjectsPerCluster)",
            cluster_objects_limit.clone(),
        );
        let objects_limit = Gauge::default();
        registry.register(
            "tracked_objects_limit",
            "The cap on objects tracked in all clusters together (limits.maxObjects)",
            objects_limit.clone(),
        );
        let state_bytes = Gauge::default();
        registry.register(
            "tracked_state_bytes",
            "About how many bytes the tracked objects' state takes (what limits.maxStateBytes caps)",
            state_bytes.clone(),
        );
        let state_bytes_limit = Gauge::default();
        registry.register(
            "tracked_state_bytes_limit",
            "The cap on the tracked state's bytes (limits.maxStateBytes)",
            state_bytes_limit.clone(),
        );
        let http_connections_opened = Counter::default();
        registry.register(
            "http_connections_opened",
            "HTTP connections accepted",
            http_connections_opened.clone(),
        );
        let http_connections_closed = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "http_connections_closed",
            "HTTP connections closed, by reason (cap: closed to make room at server.maxConnections)",
            http_connections_closed.clone(),
        );
        let writer_lease_held = Family::<ShardLabel, Gauge>::default();
        registry.register(
            "writer_lease_held",
            "1 while this replica holds its shard's writer lease (it is the writer), 0 while it is a standby",
            writer_lease_held.clone(),
        );
        let writer_lease_takeovers = Family::<ShardLabel, Counter>::default();
        registry.register(
            "writer_lease_takeovers",
            "Times this replica took its shard's writer lease from an earlier holder",
            writer_lease_takeovers.clone(),
        );
        let writer_lease_losses = Family::<ShardReasonLabel, Counter>::default();
        registry.register(
            "writer_lease_losses",
            "Times this replica lost the writer lease, by reason (taken_over, unrenewed, commit_unknown)",
            writer_lease_losses.clone(),
        );
        let outbox_claim_expiries = Family::<ChannelLabel, Counter>::default();
        registry.register(
            "outbox_claim_expiries",
            "Outbox rows taken over from a lapsed claim of another process, by channel",
            outbox_claim_expiries.clone(),
        );
        let shard_events = Family::<ShardOutcomeLabel, Counter>::default();
        registry.register(
            "shard_events",
            "Resource events by shard and outcome (owned; refused: the cluster belongs to another shard; refused_with_batch: owned, in a batch refused for another event's cluster)",
            shard_events.clone(),
        );
        Metrics {
            writer_lease_held,
            writer_lease_takeovers,
            writer_lease_losses,
            outbox_claim_expiries,
            shard_events,
            registry,
            cluster_conflicts,
            implausible_versions,
            invariant_errors,
            pipeline_ready,
            objects_refused,
            cluster_objects_max,
            cluster_objects_limit,
            objects_limit,
            state_bytes,
            state_bytes_limit,
            http_connections_opened,
            http_connections_closed,
            store_commit_seconds,
            store_sync_seconds,
            writer_round_seconds,
            resync_last_success,
            resync_objects_listed,
            resync_missed_changes,
            resync_drifts_found,
            resync_errors,
            traffic_queries,
            traffic_query_errors,
            traffic_observations_skipped,
            traffic_prometheus_up,
            resync_passes,
            deliveries,
            delivery_latency,
            outbox_pending,
            outbox_oldest_age_seconds,
            outbox_dead,
            drifts_firing,
            findings,
            events_received,
            namespaces: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            notifications_queued,
            remediations,
            events,
            event_handles: Handles::new(OUTCOMES),
            received_handles: Handles::new(RECEIVED),
            accepted_handle: Handles::new([202]),
            responses,
            ingest_errors,
            store_commits,
            store_errors,
            drift_transitions,
            tracked_objects,
            config_reload_errors,
            config_reloads,
            config_restart_required,
        }
    }

    /// Counts a drift transition.
    pub(crate) fn record_transition(&self, class: &str, state: &str) {
        self.drift_transitions
            .get_or_create(&TransitionLabel {
                class: class.to_string(),
                state: state.to_string(),
            })
            .inc();
    }

    /// The namespace label value: the namespace itself for the first
    /// [`NAMESPACE_LABEL_CAP`] namespaces seen, `_other` after that (bounded cardinality).
    pub(crate) fn namespace_label(&self, namespace: &str) -> String {
        let mut seen = self
            .namespaces
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if seen.contains(namespace) {
            return namespace.to_string();
        }
        if seen.len() < NAMESPACE_LABEL_CAP {
            seen.insert(namespace.to_string());
            return namespace.to_string();
        }
        "_other".to_string()
    }

    /// Counts a received event.
    pub(crate) fn record_received(&self, ty: &str, mode: &str) {
        self.received_handles.inc(
            |(known_ty, known_mode)| *known_ty == ty && *known_mode == mode,
            || {
                self.events_received
                    .get_or_create(&EventTypeLabel {
                        r#type: ty.to_string(),
                        mode: mode.to_string(),
                    })
                    .clone()
            },
        );
    }

    /// Counts a delivery outcome.
    pub(crate) fn record_delivery(&self, channel: &str, outcome: &str) {
        self.deliveries
            .get_or_create(&DeliveryLabel {
                channel: channel.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// Counts an event outcome.
    pub(crate) fn record_event(&self, outcome: &str) {
        self.event_handles.inc(
            |known| *known == outcome,
            || {
                self.events
                    .get_or_create(&OutcomeLabel {
                        outcome: outcome.to_string(),
                    })
                    .clone()
            },
        );
    }

    /// Counts an answer to a CloudEvents request by its HTTP status.
    pub(crate) fn record_response(&self, status: u16) {
        self.accepted_handle.inc(
            |known| *known == status,
            || {
                self.responses
                    .get_or_create(&CodeLabel {
                        code: status.to_string(),
                    })
                    .clone()
            },
        );
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Encoding into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_that_stops_being_the_writer_drops_the_writers_gauges() {
        let metrics = Metrics::new();
        let cluster = ClusterLabel {
            cluster: "default".into(),
        };
        metrics.traffic_prometheus_up.get_or_create(&cluster).set(1);
        metrics.tracked_objects.set(3);
        let series = "drift_sentinel_traffic_prometheus_up{cluster=\"default\"} 1";
        assert!(metrics.render().contains(series), "{}", metrics.render());
        metrics.clear_writer_gauges();
        let text = metrics.render();
        assert!(
            !text.contains("drift_sentinel_traffic_prometheus_up{"),
            "{text}"
        );
        assert!(text.contains("drift_sentinel_tracked_objects 0"), "{text}");
    }
}
