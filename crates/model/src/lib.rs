//! The model: the vocabulary every crate shares, at the bottom of the workspace. It depends on no
//! other crate of the workspace and on no I/O crate: drifts and their evidence ([`drift`]),
//! severities, object identity, time as [`Millis`] and as text ([`time`]), silences, the
//! families of API groups ([`group`]), owner references ([`object`]), remediation attempts
//! ([`remediation`]), the words used to name an
//! actor, and the public JSON as types of its own ([`wire`]).
//!
//! Architecture invariant: this crate depends on no other crate of the workspace.

pub mod class;
pub mod diff;
pub mod drift;
pub mod glob;
pub mod group;
pub mod notice;
pub mod object;
pub mod pairs;
pub mod pointer;
pub mod remediation;
pub mod silence;
pub mod text;
pub mod time;
pub mod wire;

pub use drift::{
    Actor, Drift, DriftSlot, DriftState, Evidence, FieldChange, OwnerChain, SlotKey, SlotRef,
    Transition, CONDITION_CHAIN_FACT, MAX_CHANGES,
};
pub use glob::glob_match;
pub use notice::{Notice, NoticeKind};
pub use object::OwnerReference;
pub use pairs::Pairs;
pub use silence::Silence;

/// Milliseconds since the Unix epoch; the only notion of time in the pure core.
pub type Millis = i64;

/// The identity of an object: cluster name and `metadata.uid`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// Cluster name.
    pub cluster: String,
    /// `metadata.uid`.
    pub uid: String,
}

/// Alert severity, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Severity {
    /// Worth knowing, nothing to do now.
    Info,
    /// Needs a look.
    #[default]
    Warning,
    /// Needs action.
    Critical,
}

impl Severity {
    /// Every severity, lowest first.
    pub const ALL: [Severity; 3] = [Severity::Info, Severity::Warning, Severity::Critical];

    /// Parses `info`, `warning` or `critical`.
    pub fn parse(text: &str) -> Option<Severity> {
        match text {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "critical" => Some(Severity::Critical),
            _ => None,
        }
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// The severity names, lowest first (config validation, the API, the dashboard).
pub const SEVERITIES: &[&str] = &["info", "warning", "critical"];
