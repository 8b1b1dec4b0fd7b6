//! drift-sentinel: a Knative Eventing sink that turns ApiServerSource CloudEvents about Knative
//! Serving objects into drift alerts.
//!
//! The pipeline, in order: [`ingest`] → [`decode`] → [`classify`] → (enrich, route, deliver),
//! with [`store`] beside it and [`pipeline`] as the single writer that ties them together.

pub mod api;
pub mod app;
pub mod check;
pub mod classify;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod commands;
pub mod config;
pub mod decode;
pub mod deliver;
pub mod ingest;
pub mod manifest;
pub mod metrics;
pub mod model;
pub mod pipeline;
pub mod reload;
pub mod replay;
pub mod route;
pub mod store;
pub mod telemetry;
pub mod time;
pub mod wire;
