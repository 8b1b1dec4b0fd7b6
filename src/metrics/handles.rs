//! Counter handles kept for label values known when compiled, so the event path counts without
//! building a label (a `String` per value), hashing it and taking its family's lock (issue 28:
//! no per-event allocation that a cached metric handle avoids).

use std::sync::OnceLock;

use prometheus_client::metrics::counter::Counter;

/// The handles of up to `N` series of one family, one per key of `keys`, each made on first use:
/// a series still appears in the exposition when it is first counted, as with `get_or_create`.
/// A family whose handles are kept is never cleared (a cleared family would orphan them).
pub(crate) struct Handles<K: 'static, const N: usize> {
    keys: [K; N],
    slots: [OnceLock<Counter>; N],
}

impl<K, const N: usize> Handles<K, N> {
    pub(crate) const fn new(keys: [K; N]) -> Handles<K, N> {
        Handles {
            keys,
            slots: [const { OnceLock::new() }; N],
        }
    }

    /// The handle of the first key that `is_key` accepts, made by `make` (the family's
    /// `get_or_create`) on first use; `None` when no key is accepted (the caller counts through
    /// the family).
    pub(crate) fn get(
        &self,
        is_key: impl Fn(&K) -> bool,
        make: impl FnOnce() -> Counter,
    ) -> Option<&Counter> {
        let index = self.keys.iter().position(is_key)?;
        Some(self.slots.get(index)?.get_or_init(make))
    }

    /// Counts one in the series `make` gets from the family: through its kept handle when
    /// `is_key` accepts a key, else through the family.
    pub(crate) fn inc(&self, is_key: impl Fn(&K) -> bool, make: impl Fn() -> Counter) {
        match self.get(is_key, &make) {
            Some(counter) => counter.inc(),
            None => make().inc(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Metrics, OutcomeLabel};

    #[test]
    fn a_kept_handle_counts_in_its_familys_series() {
        let metrics = Metrics::new();
        metrics.record_event("applied");
        metrics.record_event("applied");
        // Not a known outcome: counted through the family.
        metrics.record_event("novel");
        metrics.record_received("update", "resource");
        metrics.record_received("frobnicate", "none");
        let count = |outcome: &str| {
            metrics
                .events
                .get_or_create(&OutcomeLabel {
                    outcome: outcome.to_string(),
                })
                .get()
        };
        assert_eq!((count("applied"), count("novel")), (2, 1));
        let text = metrics.render();
        assert!(
            text.contains(
                "drift_sentinel_events_received_total{type=\"update\",mode=\"resource\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "drift_sentinel_events_received_total{type=\"frobnicate\",mode=\"none\"} 1"
            ),
            "{text}"
        );
        // A series not counted yet is not shown (as before the handles).
        assert!(!text.contains("outcome=\"stale\""), "{text}");
    }

    #[test]
    fn answers_count_by_status() {
        let metrics = Metrics::new();
        metrics.record_response(202);
        metrics.record_response(202);
        metrics.record_response(400);
        let text = metrics.render();
        for line in [
            "drift_sentinel_ingest_responses_total{code=\"202\"} 2",
            "drift_sentinel_ingest_responses_total{code=\"400\"} 1",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    /// Every outcome, type and mode the event path counts has a kept handle: one added to the
    /// pipeline or the decoder without its key here would be counted, only slower.
    #[test]
    fn every_counted_label_has_a_handle() {
        use crate::pipeline::EventResult;
        use drift_core::decode::{Action, Mode};
        // An exhaustive match: a new variant fails to compile until it is listed.
        let listed = |result: EventResult| match result {
            EventResult::Applied
            | EventResult::Stale
            | EventResult::Duplicate
            | EventResult::Ignored
            | EventResult::Reference
            | EventResult::Conflict
            | EventResult::OverCapacity => result,
        };
        let metrics = Metrics::new();
        for result in [
            EventResult::Applied,
            EventResult::Stale,
            EventResult::Duplicate,
            EventResult::Ignored,
            EventResult::Reference,
            EventResult::Conflict,
            EventResult::OverCapacity,
        ]
        .map(listed)
        {
            let outcome = result.as_str();
            assert!(
                metrics
                    .event_handles
                    .get(|key| *key == outcome, Counter::default)
                    .is_some(),
                "{outcome}"
            );
        }
        let mut pairs = vec![("other", "none")];
        for a in [Action::Add, Action::Update, Action::Delete] {
            for m in [Mode::Resource, Mode::Reference] {
                pairs.push((a.as_str(), m.as_str()));
            }
        }
        for (ty, mode) in pairs {
            assert!(
                metrics
                    .received_handles
                    .get(
                        |(known_ty, known_mode)| *known_ty == ty && *known_mode == mode,
                        Counter::default
                    )
                    .is_some(),
                "{ty} {mode}"
            );
        }
    }

    #[test]
    fn no_key_means_no_handle() {
        let handles = Handles::new(["a", "b"]);
        assert!(handles.get(|key| *key == "c", Counter::default).is_none());
        let b = handles.get(|key| *key == "b", Counter::default).unwrap();
        b.inc();
        // The same handle the second time (the closure is not called again).
        let again = handles
            .get(|key| *key == "b", || unreachable!("made twice"))
            .unwrap();
        assert_eq!(again.get(), 1);
    }
}
