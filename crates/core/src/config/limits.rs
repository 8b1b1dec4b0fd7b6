//! `limits:`: how much state drift-sentinel keeps, so that a flood of junk objects or of cluster
//! names (ingest is open unless OIDC or a token is configured) cannot exhaust its memory.

use serde::Deserialize;

use crate::classify::Capacity;

/// The caps on tracked state. Read at start (a change needs a restart).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsConfig {
    /// Most bytes of tracked state (each object's strings and serialized spec and status, plus
    /// 2 KiB): the bound on the state's memory, whatever the objects look like.
    #[serde(default = "default_state_bytes")]
    pub max_state_bytes: usize,
    /// Most objects tracked in all clusters together, tombstones included (about 8 KB of memory
    /// each): the bound on the state's memory.
    #[serde(default = "default_objects")]
    pub max_objects: usize,
    /// Most objects tracked per cluster, tombstones included (about 8 KB of memory each).
    #[serde(default = "default_objects_per_cluster")]
    pub max_objects_per_cluster: usize,
    /// Most cluster names tracked.
    #[serde(default = "default_clusters")]
    pub max_clusters: usize,
    /// Most silences created through the API that are active (not expired) at once: past it a
    /// new one is refused (`409 too_many_silences`), so the silences every notification is
    /// checked against, and the silences list, stay bounded.
    #[serde(default = "default_active_silences")]
    pub max_active_silences: usize,
}

/// The default of `limits.maxActiveSilences`.
pub(super) const DEFAULT_MAX_ACTIVE_SILENCES: usize = 1_000;
/// The most `limits.maxActiveSilences` may be.
pub(crate) const MAX_ACTIVE_SILENCES_CEILING: usize = 100_000;

fn default_active_silences() -> usize {
    DEFAULT_MAX_ACTIVE_SILENCES
}

fn default_state_bytes() -> usize {
    Capacity::default().bytes
}

fn default_objects() -> usize {
    Capacity::default().objects
}

fn default_objects_per_cluster() -> usize {
    Capacity::default().objects_per_cluster
}

fn default_clusters() -> usize {
    Capacity::default().clusters
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_state_bytes: default_state_bytes(),
            max_objects: default_objects(),
            max_objects_per_cluster: default_objects_per_cluster(),
            max_clusters: default_clusters(),
            max_active_silences: default_active_silences(),
        }
    }
}

impl LimitsConfig {
    /// The engine's capacity.
    pub fn capacity(&self) -> Capacity {
        Capacity {
            bytes: self.max_state_bytes,
            objects: self.max_objects,
            objects_per_cluster: self.max_objects_per_cluster,
            clusters: self.max_clusters,
        }
    }
}
