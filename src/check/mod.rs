//! `drift-sentinel check`: the CI/CD regression gate. It compares a live snapshot (the output of
//! `kubectl get ksvc,configurations,routes,revisions,configmaps,brokers,triggers,subscriptions,pingsources,apiserversources,podautoscalers,ingresses.networking.internal.knative.dev -A -o yaml`) with the desired
//! manifests kept in Git and reports, per object, what differs and what is unhealthy.
//!
//! What is reported (`class` of a [`Finding`]):
//!
//! * `missing`: in the baseline, not live. `critical` for a Knative Service, else `warning`.
//! * `extra`: live, not in the baseline, and something a person deploys: a Knative Service, or a
//!   `serving.knative.dev` object (Configuration, Route, DomainMapping, ...) with no Knative
//!   controller owner (`warning`); a ConfigMap that `config_drift` watches (`info`: Knative's
//!   install creates them, so leaving them out of Git is a choice, not drift). Never extra: what
//!   Knative creates itself (Revisions, and the Configuration and Route of a Knative Service,
//!   which are checked through their Service) and every other kind (a cluster dump holds many
//!   objects the baseline does not manage).
//! * `spec_drift`: the live object differs from its manifest
//!   ([`drift_core::classify::baseline::compare`]: fields the manifest leaves out against Knative's
//!   defaults from the snapshot's ConfigMaps or built in, behavioural labels and annotations
//!   even when the manifest does not set them; status and server-set metadata are not
//!   compared; `rules.ignorePaths` apply). `warning`.
//! * `config_drift`: a ConfigMap's `data` differs from its manifest, key by key both ways,
//!   `_example` ignored. Severity and `enabled` from `rules.classes.config_drift`.
//! * `not_ready`, `revision_not_ready`, `traffic_drift`, `generation_lag`, `revision_pileup`:
//!   the state-based classes of the engine, run for real: every live object is applied to a
//!   [`drift_core::classify::Engine`] as a Resource-mode `add` event at one instant, the clock then
//!   jumps past every grace period, and the drifts that fire are reported with the engine's own
//!   severity, summary and hint. A snapshot cannot tell how long a condition has held, so it is
//!   treated as held past its grace. Change-based classes (`manual_edit`, `image_drift`,
//!   `unexpected_delete`, `orphan`) need a history and do not apply.
//!
//! One file per role: `report` is the result model ([`Report`], [`ObjectReport`], [`Finding`],
//! [`DiffEntry`]); `compare` is [`check`] itself, the baseline side and the live side;
//! `normalize` puts each side in the shape that is compared (live objects decoded as the sink
//! decodes them, Secret manifests hashed); `engine` runs the engine's state-based classes on the
//! snapshot ([`snapshot_classes`]); `render` turns a report into text, Markdown, JSON or JUnit XML
//! ([`render`], [`Format`]). This file holds the [`Error`] and [`run`], the whole command minus
//! output.
//!
//! Invariants: [`check`] and the renderers are pure (no I/O, no clock) and deterministic (the same
//! inputs give byte-identical output); only [`drift_core::manifest::load`] and [`run`] read files.
//! Nothing here panics on input: every bad input is an [`Error`] naming the file and document.
//! Secret values are never output: live objects go through
//! [`drift_core::decode::parse_object`], which hashes them, and a Secret manifest's values are
//! hashed the same way before comparison. Input is bounded: [`drift_core::manifest::MAX_FILE_BYTES`]
//! per file, [`drift_core::manifest::MAX_TOTAL_BYTES`] in all.

use std::path::Path;
use std::sync::Arc;

use drift_core::classify::Rules;
use drift_core::manifest::{self, Origin};
use drift_model::Severity;

mod compare;
mod engine;
mod fleet;
mod normalize;
pub(crate) mod render;
mod report;

pub use compare::check;
pub use engine::snapshot_classes;
pub use fleet::compare as compare_snapshots;
pub(crate) use fleet::uncovered_entries;
/// Decodes an object of a manifest or a dump as the sink decodes events, filling in the `uid`
/// and `resourceVersion` a manifest leaves out.
pub(crate) use normalize::decode_live as decode_object;
pub use render::{render, render_text, Format};
pub use report::{DiffEntry, Finding, ObjectReport, Report, RuleOutcome};

/// Why `check` could not run: bad input, with the file and document it is in.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A side could not be loaded (unreadable, too large, not YAML, not an object).
    #[error(transparent)]
    Manifest(#[from] manifest::Error),
    /// A live object the decoder rejects.
    #[error("{origin}: {}", normalize::reason(source))]
    Invalid {
        /// Where.
        origin: Origin,
        /// What the decoder rejects.
        #[source]
        source: drift_core::decode::Error,
    },
    /// The baseline defines one object twice.
    #[error("{second}: {object} is already defined at {first}")]
    Duplicate {
        /// The object.
        object: String,
        /// The first definition.
        first: Box<Origin>,
        /// The second definition.
        second: Box<Origin>,
    },
    /// `compare`'s snapshots cannot be compared as given (two of one name, no group holding
    /// two of them).
    #[error("{0}")]
    Fleet(String),
}

impl Error {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Manifest(error) => error.kind(),
            Error::Invalid { .. } => "invalid",
            Error::Duplicate { .. } => "duplicate",
            Error::Fleet(_) => "fleet",
        }
    }
}

/// Loads every snapshot (cluster name, path) and compares them (`compare`): the whole command
/// minus output.
pub(crate) fn run_compare(
    snapshots: &[(String, std::path::PathBuf)],
    rules: &Rules,
    fail_on: Severity,
) -> Result<Report, Error> {
    let mut loaded = Vec::with_capacity(snapshots.len());
    for (name, path) in snapshots {
        loaded.push((name.clone(), manifest::load(path)?));
    }
    compare_snapshots(&loaded, rules, fail_on)
}

/// Loads both sides and checks them: the whole command minus output. Without a baseline only
/// the state-based classes and the invariants are judged (no `missing`, `extra` or differences).
pub fn run(
    baseline_path: Option<&Path>,
    live_path: &Path,
    rules: Arc<Rules>,
    fail_on: Severity,
) -> Result<Report, Error> {
    let baseline = baseline_path.map(manifest::load).transpose()?;
    let live = manifest::load(live_path)?;
    check(baseline.as_ref(), &live, rules, fail_on)
}
