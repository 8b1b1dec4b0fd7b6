//! The fleet view (`GET /api/v1/fleet`, `/ui/fleet`): each fleet group's members, the objects
//! it compares with every member's values, and the open drift of each. Built on demand from the
//! engine's state by the writer that owns it, when the API asks: the event path does no work for
//! it.

use super::Engine;
use crate::classify::classes;
use crate::classify::fleet::{self, GroupView, MemberView, ObjectView};

impl Engine {
    /// Every fleet group as it stands now.
    pub fn fleet_view(&self) -> Vec<GroupView> {
        self.rules
            .fleet_groups()
            .iter()
            .map(|group| {
                let members = classes::fleet_members(&self.graph, group)
                    .into_iter()
                    .map(|cluster| MemberView {
                        cluster: cluster.to_string(),
                        last_event: self.pipeline_watch.last_event(cluster),
                    })
                    .collect();
                let objects = classes::fleet_compared_objects(&self.graph, group)
                    .into_iter()
                    .map(|object| {
                        let views =
                            classes::fleet_member_views(&self.graph, &self.rules, group, &object);
                        let slot = classes::fleet_subject(group, &object);
                        let drift = self
                            .drifts
                            .get(&crate::model::DriftSlot {
                                cluster: slot.cluster,
                                uid: slot.uid,
                                class: classes::FLEET_DIVERGENCE.to_string(),
                                rule: Some(group.name.clone()),
                            })
                            .map(|drift| (drift.id.clone(), drift.state));
                        ObjectView {
                            rows: fleet::rows(&views, &group.ignore_paths),
                            object,
                            drift,
                        }
                    })
                    .collect();
                GroupView {
                    group: group.clone(),
                    members,
                    objects,
                }
            })
            .collect()
    }
}
