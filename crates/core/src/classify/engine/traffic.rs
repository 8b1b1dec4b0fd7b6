//! Observations of served traffic (issue 32): filed in the engine's book under the Routes they
//! concern, of which those whose observation changed are judged again by `traffic_share_drift`
//! alone (the other classes read nothing of it). An open drift of the class that no observation
//! gives a verdict for three windows is resolved, and with served traffic not observed at all
//! (`traffic:` off) open drifts of the class are resolved at start and reload: either way
//! nothing could ever judge them again, and they would remind forever.

use super::judge_again::Which;
use super::*;
use crate::classify::traffic::{promql_duration, Observation, STALE_WINDOWS};

impl Engine {
    /// Files one answer of Prometheus at `now` and judges again the Routes whose observation
    /// changed. The book keeps the latest observation per live Route of the observation's
    /// cluster.
    pub fn observe_traffic(&mut self, observation: &Observation, now: Millis) {
        let filed = self.traffic.file(&self.graph, observation, now);
        for key in filed {
            let Some((assessments, _)) = self.assess(
                &key,
                None,
                Action::Update,
                None,
                now,
                Which::Only(classes::TRAFFIC_SHARE_DRIFT),
            ) else {
                continue;
            };
            for (class_id, assessment) in assessments {
                self.settle(class_id, assessment, now);
            }
        }
        self.resolve_unjudged(observation, now);
    }

    /// Resolves the open drifts of the class in the observation's cluster that no observation
    /// has given a verdict for [`STALE_WINDOWS`] windows: a Route whose series stopped for good,
    /// or whose requests stay below `minRequests`. While Prometheus does not answer nothing is
    /// counted here (no observation arrives); the first answer after an outage counts from its
    /// last mark.
    fn resolve_unjudged(&mut self, observation: &Observation, now: Millis) {
        let window_ms = Millis::try_from(observation.window.as_millis()).unwrap_or(Millis::MAX);
        let bound = window_ms.saturating_mul(Millis::from(STALE_WINDOWS));
        let open: Vec<DriftSlot> = self
            .drifts
            .keys()
            .filter(|slot| {
                slot.class == classes::TRAFFIC_SHARE_DRIFT && slot.cluster == observation.cluster
            })
            .cloned()
            .collect();
        let previous = std::mem::take(&mut self.traffic.unjudged);
        let mut unjudged: HashMap<ObjectKey, Millis> = previous
            .iter()
            .filter(|(key, _)| key.cluster != observation.cluster)
            .map(|(key, since)| (key.clone(), *since))
            .collect();
        let mut stale = Vec::new();
        for slot in open {
            let key = ObjectKey {
                cluster: slot.cluster.clone(),
                uid: slot.uid.clone(),
            };
            let concluded = self.graph.get(&key).is_some_and(|route| {
                self.traffic
                    .of(route)
                    .is_some_and(|traffic| classes::traffic_share_concludes(route, traffic))
            });
            if concluded {
                continue;
            }
            let since = previous.get(&key).copied().unwrap_or(now);
            if now.saturating_sub(since) >= bound {
                stale.push(slot);
            } else {
                unjudged.insert(key, since);
            }
        }
        self.traffic.unjudged = unjudged;
        let reason = format!(
            "no observation for {} ({STALE_WINDOWS} windows) gave a verdict on the served split",
            promql_duration(std::time::Duration::from_millis(
                u64::try_from(bound).unwrap_or(0)
            ))
        );
        for slot in stale {
            self.clear(&slot, &reason, now);
        }
    }

    /// Says whether this process observes served traffic (`traffic.prometheus.url` set). Off,
    /// the next [`Engine::retire_disabled`] (at start, at a reload) resolves the open drifts of
    /// `traffic_share_drift`: nothing will judge them again.
    pub fn set_traffic_observed(&mut self, observed: bool) {
        self.traffic.observed = observed;
    }

    /// True when served traffic is observed (see [`Engine::set_traffic_observed`]).
    pub fn traffic_observed(&self) -> bool {
        self.traffic.observed
    }

    /// How many Routes hold an observation.
    pub fn traffic_routes(&self) -> usize {
        self.traffic.len()
    }
}
