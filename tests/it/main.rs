//! Integration tests in one binary (compiles once): router contract, engine scenarios, processes.

mod admission;
#[cfg(feature = "cluster")]
mod admission_e2e;
mod api;
mod api_bounds;
mod architecture;
mod bad_input;
mod certificates;
mod check;
mod classes;
mod compare;
mod conformance;
mod crash_resend;
mod crate_graph;
mod delivery;
mod drill_catalog;
#[cfg(feature = "cluster")]
mod drill_e2e;
#[cfg(feature = "cluster")]
mod drill_process;
#[cfg(feature = "cluster")]
mod fake_apiserver;
#[cfg(feature = "cluster")]
mod fake_cluster;
#[cfg(feature = "cluster")]
mod fake_cluster_contract;
mod fleet;
mod forged;
mod forged_caps;
mod fuzz_seeds;
mod golden;
mod invariant_library;
mod invariants;
mod knative_defaults;
mod knative_kinds;
mod large_objects;
mod mesh;
mod oidc;
mod one_alert_per_failure;
mod overload;
mod pacing;
mod pg;
mod pg_tls;
mod pileup;
mod properties;
mod receivers;
mod recording;
mod registry;
mod reload;
mod remediation;
mod remediation_baseline;
mod remediation_config;
mod remediation_conflict;
mod remediation_fight;
mod remediation_invariant;
mod remediation_process;
mod remediation_service;
mod remediation_standby;
mod remediation_trust;
#[cfg(feature = "cluster")]
mod resync;
mod resync_api;
mod router;
mod scenario;
mod secrets;
mod store_contract;
mod support;
mod traffic;
mod writer_lease;
