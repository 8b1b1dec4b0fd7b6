//! Observations of served traffic (issue 32): filed in the engine's book under the Routes they
//! concern, each of which is judged again at once (`traffic_share_drift`, and the other classes
//! about state, as an event without a change would).

use super::*;
use crate::classify::traffic::Observation;

impl Engine {
    /// Files one answer of Prometheus at `now` and judges the Routes it concerns again. The
    /// book keeps the latest observation per live Route of the observation's cluster.
    pub fn observe_traffic(&mut self, observation: &Observation, now: Millis) {
        let filed = self.traffic.file(&self.graph, observation, now);
        for key in filed {
            self.reevaluate(&key, now);
        }
    }

    /// How many Routes hold an observation.
    pub fn traffic_routes(&self) -> usize {
        self.traffic.len()
    }
}
