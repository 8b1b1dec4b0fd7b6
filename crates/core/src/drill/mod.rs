//! Drills (issue 30): a catalog of known drifts to inject into a cluster and expect to be
//! caught (and repaired). This module is the pure part: the catalog as a team writes it,
//! validated with the key path of every mistake ([`catalog`]), and the exact Kubernetes requests
//! a drill sends: the injection, and the restore that puts back only what it injected
//! ([`plan`]), and chaos runs' seeded schedule ([`chaos`]). Nothing here sends anything or
//! reads a clock; the runner (the service's Kubernetes client and the sink's API) is the
//! `drill` command's.

pub mod catalog;
pub mod chaos;
pub mod plan;

pub use catalog::{parse, Catalog, Drill, Error, Expect, Inject, Target, Then};

/// The field manager every drill write is sent as (`?fieldManager=`), so the sink's evidence
/// names the drill as the actor.
pub const FIELD_MANAGER: &str = "drift-sentinel-drill";

/// The namespace label that allows drills in a namespace (`"allowed"`); any other namespace is
/// refused before any request.
pub const ALLOW_LABEL: &str = "drift-sentinel.dev/drills";

#[cfg(test)]
mod tests;
