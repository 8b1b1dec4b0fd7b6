//! The fleet view (`GET /api/v1/fleet`, `/ui/fleet`): each fleet group's members, the objects
//! it compares with every member's values, and the open drift of each. Built on demand from the
//! engine's state by the writer that owns it, when the API asks: the event path does no work for
//! it.

use super::Engine;
use crate::classify::classes;
use crate::classify::fleet::{self, GroupView, Held, MemberView, ObjectView, MAX_VIEW_OBJECTS};

impl Engine {
    /// Every fleet group as it stands now, or only the group named `only`. Each group shows at
    /// most [`MAX_VIEW_OBJECTS`] objects, the divergent ones first: a group comparing every
    /// ConfigMap of many clusters would otherwise make an answer too large to read.
    pub fn fleet_view(&self, only: Option<&str>) -> Vec<GroupView> {
        self.rules
            .fleet_groups()
            .iter()
            .filter(|group| only.is_none_or(|name| group.name == name))
            .map(|group| {
                let members = classes::fleet_members(&self.graph, group)
                    .into_iter()
                    .map(|cluster| MemberView {
                        cluster: cluster.to_string(),
                        last_event: self.pipeline_watch.last_event(cluster),
                    })
                    .collect();
                let mut objects: Vec<ObjectView> =
                    classes::fleet_compared_objects(&self.graph, group)
                        .into_iter()
                        .map(|object| {
                            let views = classes::fleet_member_views(
                                &self.graph,
                                &self.rules,
                                &self.drifts,
                                group,
                                &object,
                            );
                            let slot = classes::fleet_subject(group, &object);
                            let drift = self
                                .drifts
                                .get(&drift_model::DriftSlot {
                                    cluster: slot.cluster,
                                    uid: slot.uid,
                                    class: classes::FLEET_DIVERGENCE.to_string(),
                                    rule: Some(group.name.clone()),
                                })
                                .map(|drift| (drift.id.clone(), drift.state));
                            ObjectView {
                                rows: fleet::rows(&views, &group.ignore_paths),
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
}
