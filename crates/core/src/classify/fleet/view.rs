//! The fleet view (`GET /api/v1/fleet`, `/ui/fleet`): each fleet group's members, the objects
//! it compares with every member's values, and the open drift of each. Built on demand from the
//! engine's state by the writer that owns it, when the API asks: the event path does no work for
//! it.

use std::collections::HashMap;

use super::evaluator::{compared_objects, member_views, members, slot, FleetRules};
use super::table::{rows, Row};
use super::{FleetGroup, FleetObject, Held};
use crate::classify::graph::Graph;
use drift_model::{Drift, DriftSlot, Millis};

/// A member of a fleet group as the fleet view shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberView {
    /// Cluster name.
    pub cluster: String,
    /// When an event of the cluster was last applied (none since the process started, for a
    /// member known from the stored state or from resync lists only).
    pub last_event: Option<Millis>,
}

/// One compared object in the fleet view.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectView {
    /// The object.
    pub object: FleetObject,
    /// Its table, one cell per member.
    pub rows: Vec<Row>,
    /// The members that never reported the object.
    pub not_reported: Vec<String>,
    /// The open drift about it: (id, state).
    pub drift: Option<(String, drift_model::DriftState)>,
}

impl ObjectView {
    /// True when the members that report the object do not all hold the same.
    pub fn divergent(&self) -> bool {
        self.rows.iter().any(|row| row.differs)
    }
}

/// Most compared objects one group shows in the fleet view (divergent ones first).
pub const MAX_VIEW_OBJECTS: usize = 500;

/// One group in the fleet view.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupView {
    /// The group as configured.
    pub group: FleetGroup,
    /// Its members, sorted by name.
    pub members: Vec<MemberView>,
    /// The objects it compares that a member holds: the divergent ones first, each part sorted
    /// by key, at most [`MAX_VIEW_OBJECTS`].
    pub objects: Vec<ObjectView>,
    /// How many more compared objects were left out past [`MAX_VIEW_OBJECTS`].
    pub truncated: usize,
    /// How many compared objects differ (counted over all of them, the left-out ones too).
    pub divergent: usize,
}

/// Every fleet group as it stands now, or only the group named `only`, from the engine's
/// graph, rules and open drifts; `last_event` tells when an event of a cluster was last
/// applied. Each group shows at most [`MAX_VIEW_OBJECTS`] objects, the divergent ones first: a
/// group comparing every ConfigMap of many clusters would otherwise make an answer too large to
/// read.
pub(crate) fn view(
    graph: &Graph,
    rules: &dyn FleetRules,
    drifts: &HashMap<DriftSlot, Drift>,
    only: Option<&str>,
    last_event: &dyn Fn(&str) -> Option<Millis>,
) -> Vec<GroupView> {
    rules
        .groups()
        .iter()
        .filter(|group| only.is_none_or(|name| group.name == name))
        .map(|group| {
            let members = members(graph, group)
                .into_iter()
                .map(|cluster| MemberView {
                    cluster: cluster.to_string(),
                    last_event: last_event(cluster),
                })
                .collect();
            let mut objects: Vec<ObjectView> = compared_objects(graph, group)
                .into_iter()
                .map(|object| {
                    let views = member_views(graph, rules, drifts, group, &object);
                    let drift = drifts
                        .get(&slot(group, &object))
                        .map(|drift| (drift.id.clone(), drift.state));
                    ObjectView {
                        rows: rows(&views, &group.ignore_paths),
                        not_reported: views
                            .iter()
                            .filter(|(_, held)| *held == Held::NotReported)
                            .map(|(cluster, _)| cluster.clone())
                            .collect(),
                        object,
                        drift,
                    }
                })
                .collect();
            // Divergent objects first, each part in key order (the sort is stable).
            objects.sort_by_key(|object| !object.divergent());
            let divergent = objects.iter().filter(|object| object.divergent()).count();
            let truncated = objects.len().saturating_sub(MAX_VIEW_OBJECTS);
            objects.truncate(MAX_VIEW_OBJECTS);
            GroupView {
                group: group.clone(),
                members,
                objects,
                truncated,
                divergent,
            }
        })
        .collect()
}
