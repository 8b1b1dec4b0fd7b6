//! drift-sentinel: a Knative Eventing sink that turns ApiServerSource CloudEvents about Knative
//! objects into drift alerts.
//!
//! The pipeline, in order: [`ingest`] → [`decode`] → [`classify`] → [`route`] → [`deliver`], with
//! [`store`] beside it and [`pipeline`] as the single writer that ties them together, over the
//! [`model`] floor that imports no stage. ARCHITECTURE.md draws the layers.

/// The drift API (`/api/v1`), the dashboard (`/ui`) and the report.
pub mod api;
/// Wiring: config → store → pipeline → HTTP server, and the shutdown sequence.
pub mod app;
/// `drift-sentinel check`: the CI/CD gate, a live snapshot against desired manifests.
pub mod check;
/// The drift engine: compact object state, the graph, the drift classes and their evidence.
pub mod classify;
/// The Kubernetes API (kube-rs): resync and `check --live-cluster`.
#[cfg(feature = "cluster")]
pub mod cluster;
/// The binary's commands: `serve`, `replay`, `check`, `config validate`.
pub mod commands;
/// The YAML configuration: types by section, loading, validation.
pub mod config;
/// CloudEvents and Kubernetes objects, from bytes to typed events (pure).
pub mod decode;
/// Channels and the relays that move outbox rows to destinations.
pub mod deliver;
/// The HTTP edge: `POST /`, health, metrics, admission, auth.
pub mod ingest;
/// Kubernetes manifests from YAML files, bounded: `check`'s both sides and `rules.baselineDir`.
pub mod manifest;
/// The Prometheus registry.
pub mod metrics;
/// The vocabulary every stage shares: drifts, evidence, severities, silences, notices.
pub mod model;
/// The single writer thread: decoded events in, committed state and transitions out.
pub mod pipeline;
/// Hot reload of the config file's `rules:`.
pub mod reload;
/// Recorded events through the engine with an event-time clock.
pub mod replay;
/// Transitions and routes to notifications; the one decision on silences (pure).
pub mod route;
/// The durable record: writer, outbox and audit reader behind `store::open`.
pub mod store;
/// JSON log lines.
pub mod telemetry;
/// The clock and time as text: the one module that reads the wall clock.
pub mod time;
/// The public JSON: the webhook body, the CloudEvents data, the API's drift.
pub mod wire;
