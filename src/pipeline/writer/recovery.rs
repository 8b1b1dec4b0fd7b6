//! A commit whose outcome was lost (the connection dropped after COMMIT was sent), settled by
//! asking the store for the round's event keys, or by giving the writer role up.

use super::*;

impl Writer {
    /// A commit whose outcome is unknown (the connection dropped after COMMIT was sent) is
    /// settled by asking the store whether the round's event keys are there: all of them, it
    /// landed; none, it did not. Without events to ask by, or without an answer, the state is
    /// uncertain: the round fails and the writer gives its role up (`lease_lost`), so the
    /// replica loads the state again from the store instead of going on from a guess.
    pub(super) fn settle_unknown(
        &mut self,
        round: &Round,
        committed: Result<bool, drift_store::Error>,
    ) -> Result<bool, drift_store::Error> {
        let Err(drift_store::Error::CommitUnknown(detail)) = committed else {
            return committed;
        };
        let keys: Vec<EventKey> = round
            .batch
            .events
            .iter()
            .map(|(key, _)| key.clone())
            .collect();
        let found = if keys.is_empty() {
            None
        } else {
            self.store.committed_keys(&keys).ok().map(|seen| seen.len())
        };
        match found {
            Some(count) if count == keys.len() => {
                tracing::warn!(
                    message = "A commit whose answer was lost had landed; going on.",
                    keys = count
                );
                Ok(true)
            }
            Some(0) => Err(drift_store::Error::CommitUnknown(detail)),
            _ => {
                tracing::error!(message = "A commit's outcome is unknown; giving the writer role up to reload the state.", %detail);
                // From here nothing is committed (every later round fails), so nothing is
                // written from a state that may differ from the store's.
                self.gave_up = true;
                self.health.gave_up.store(true, Ordering::SeqCst);
                Err(drift_store::Error::CommitUnknown(detail))
            }
        }
    }
}
