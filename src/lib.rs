//! drift-sentinel: a Knative Eventing sink that turns ApiServerSource CloudEvents about Knative
//! objects into drift alerts. This crate is the service around the pure core: the HTTP edge, the
//! single writer, delivery, the API, the Kubernetes client and the commands.
//!
//! The pipeline, in order: [`ingest`] → decode → classify → route (the `drift-core` crate) →
//! [`deliver`], with the store (`drift-store`) beside it and [`pipeline`] as the single writer
//! that ties them together, over the `drift-model` floor that imports no stage.
//! ARCHITECTURE.md draws the crates and the layers.

/// The drift API (`/api/v1`), the dashboard (`/ui`) and the report.
pub mod api;
/// Wiring: config → store → pipeline → HTTP server, and the shutdown sequence.
pub mod app;
/// `drift-sentinel check`: the CI/CD gate, a live snapshot against desired manifests.
pub mod check;
/// The Kubernetes API (kube-rs): resync and `check --live-cluster`.
#[cfg(feature = "cluster")]
pub mod cluster;
/// The binary's commands: `serve`, `replay`, `check`, `config validate`.
pub mod commands;
/// Channels and the relays that move outbox rows to destinations.
pub mod deliver;
/// The HTTP error answer shared by every route: `{code, message}`, `Retry-After` on `503`.
pub mod error;
/// The HTTP edge: `POST /`, health, metrics, admission, auth.
pub mod ingest;
/// The Prometheus registry.
pub mod metrics;
/// The single writer thread: decoded events in, committed state and transitions out.
pub mod pipeline;
/// Hot reload of the config file's `rules:`.
pub mod reload;
/// Recorded events through the engine with an event-time clock.
pub mod replay;
/// JSON log lines.
pub mod telemetry;
pub mod traffic;
