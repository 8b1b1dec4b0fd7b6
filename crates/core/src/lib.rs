//! drift-sentinel's pure core: what happens to an event between the HTTP edge and the store,
//! and the config that shapes it. No I/O, no clock, no panics on input; time comes in as an
//! argument.
//!
//! In pipeline order: [`decode`] (bytes → CloudEvent → ApiServerSource event) → [`classify`]
//! (the drift engine: compact object state, the graph, the classes and their evidence) →
//! [`route`] (transitions and routes → notifications, and the one decision on silences). Beside
//! them: [`manifest`] (the bounded loader of Kubernetes manifests, for `check` and
//! `rules.baselineDir`), [`admission`] (team invariants as admission policies) and [`config`]
//! (the YAML config, validated and compiled into the engine's rules). The vocabulary is `drift-model`'s; team invariants' CEL is `drift-cel`'s.

/// Team invariants as Kubernetes ValidatingAdmissionPolicies, judged as the sink judges them.
pub mod admission;
/// The drift engine: compact object state, the graph, the drift classes and their evidence.
pub mod classify;
/// The YAML configuration: types by section, loading, validation.
pub mod config;
/// CloudEvents and Kubernetes objects, from bytes to typed events (pure).
pub mod decode;
pub mod drill;
/// Kubernetes manifests from YAML files, bounded: `check`'s both sides and `rules.baselineDir`.
pub mod manifest;
/// Which firing drift a rule lets the service repair, the exact request, and the rails (pure).
pub mod remediate;
/// Transitions and routes to notifications; the one decision on silences (pure).
pub mod route;
