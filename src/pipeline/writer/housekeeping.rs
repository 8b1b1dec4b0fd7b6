//! The writer's timers between rounds: the heartbeat that proves the store writable, pruning of
//! old event keys and the audit trail, and in a shard the silences and the notifications of the
//! other shards; and the record of pending drifts before the writer stops.

use super::*;

impl Writer {
    /// Writes the pending drifts that live in memory only, so a restart restores them with
    /// their `since` (and grace) instead of finding them again from scratch. A failure here loses
    /// nothing that was acknowledged: the next start re-assesses every object.
    pub(super) fn record_pending_before_stop(&mut self) {
        if self.gave_up {
            return;
        }
        self.engine.begin();
        self.engine.record_pending();
        let changes = self.engine.staged();
        if changes.is_empty() {
            self.engine.commit();
            return;
        }
        let recorded = changes.drifts.len();
        let mut batch = Batch::default();
        let committed = crate::pipeline::take_changes(changes, &mut batch)
            .and_then(|_transitions| self.store.commit(&batch));
        match committed {
            Ok(()) => {
                self.engine.commit();
                tracing::info!(
                    message = "Pending drifts recorded before stopping.",
                    recorded
                );
            }
            Err(error) => {
                self.engine.rollback();
                tracing::warn!(message = "Could not record pending drifts before stopping; the next start finds them again.", %error);
            }
        }
    }

    /// `shard.silenceSyncInterval` in milliseconds.
    pub(super) fn silence_sync_ms(&self) -> Millis {
        drift_model::time::millis(self.settings.shard.silence_sync_interval)
    }

    pub(super) fn heartbeat_ms(&self) -> Millis {
        i64::try_from(self.settings.heartbeat_interval.as_millis()).unwrap_or(5000)
    }

    /// True when a drift deadline has come (and the store is not backing off after a failure).
    pub(super) fn timers_due(&self, now: Millis) -> bool {
        now >= self.timers.store_backoff_until
            && self
                .engine
                .next_deadline()
                .is_some_and(|deadline| deadline <= now)
    }

    /// Every [`PRUNE_INTERVAL_MS`]: forgets old event keys and the audit trail past retention.
    pub(super) fn prune(&mut self, now: Millis) {
        if self.gave_up || now - self.timers.last_prune < PRUNE_INTERVAL_MS {
            return;
        }
        self.timers.last_prune = now;
        let retention = drift_model::time::millis(self.settings.dedup_retention);
        if let Err(error) = self.store.prune_events(now.saturating_sub(retention)) {
            tracing::warn!(message = "Pruning old event keys failed.", %error);
        }
        let audit = drift_model::time::millis(self.settings.audit_retention);
        if let Err(error) = self.store.prune_audit(now.saturating_sub(audit)) {
            tracing::warn!(message = "Pruning the audit trail failed.", %error);
        }
    }

    /// In a sharded deployment the other shards' writers create and remove silences through
    /// their APIs in the same store: read them back every few seconds, so every shard enforces
    /// every silence (a notification queued in between is not withdrawn).
    pub(super) fn sync_silences(&mut self, now: Millis) {
        if !self.settings.shard.set || now - self.timers.last_silence_sync < self.silence_sync_ms()
        {
            return;
        }
        // The first read-back after loading treats every silence as new: one created through
        // another shard while this shard had no writer withdraws its reminders too (withdrawing
        // twice is harmless).
        let first = self.timers.last_silence_sync == 0;
        self.timers.last_silence_sync = now;
        match self.store.silences() {
            Ok(stored) => {
                // A silence another shard created withdraws the reminders of this shard's open
                // drifts it covers, as the creating shard did for its own.
                for new in stored
                    .iter()
                    .filter(|stored| first || !self.silences.contains(&stored.id))
                {
                    self.reminders_to_cancel.extend(
                        self.engine
                            .open_drifts()
                            .filter(|drift| new.silence.matches(drift, now))
                            .map(|drift| drift.id.clone()),
                    );
                }
                self.silences =
                    Silences::new(stored.into_iter().map(|stored| (stored.id, stored.silence)));
            }
            Err(error) => {
                tracing::warn!(message = "Could not read the silences of the other shards.", %error)
            }
        }
    }

    /// In a sharded deployment, takes over the pending notifications of this shard's clusters
    /// that no live shard will send (of a shard renamed, removed, or without a writer for
    /// [`ORPHANED_AFTER_MS`]) and those without a shard: once after loading, before the relays
    /// start (so a notification queued before shards goes out through its own shard's channel),
    /// then every [`ADOPT_EVERY_MS`].
    pub(in crate::pipeline) fn adopt_notifications(&mut self, now: Millis) {
        if !self.settings.shard.set || self.gave_up {
            return;
        }
        let shard = std::sync::Arc::clone(&self.settings.shard);
        let rules = std::sync::Arc::clone(self.engine.rules());
        match self
            .store
            .adopt_notifications(now, ORPHANED_AFTER_MS, &|cluster| {
                crate::pipeline::owns_drift_cluster(&shard, &rules, cluster)
            }) {
            Ok(adopted) => {
                self.timers.last_adoption = now;
                for (from, count) in &adopted.orphaned {
                    tracing::warn!(
                        message = "Took over the pending notifications of a shard without a writer.",
                        shard = %shard.name,
                        from = %from,
                        count,
                    );
                }
                if adopted.stranded != self.reported.last_stranded && adopted.stranded > 0 {
                    tracing::warn!(
                        message = "Pending notifications of shards without a writer for 20 minutes are of clusters this shard does not own, and no shard took them: they stay pending until a shard owns their cluster.",
                        shard = %shard.name,
                        count = adopted.stranded,
                    );
                }
                self.reported.last_stranded = adopted.stranded;
                if adopted.unsharded > 0 {
                    tracing::info!(
                        message = "Took over pending notifications queued before shards, of this shard's clusters.",
                        shard = %shard.name,
                        count = adopted.unsharded,
                    );
                }
            }
            Err(error) => {
                // Looked at again in a few seconds, not at once (the store may be down) nor a
                // minute later (the relays already run).
                self.timers.last_adoption = now - ADOPT_EVERY_MS + ADOPT_RETRY_MS;
                if matches!(error, drift_store::Error::LeaseLost { .. }) {
                    self.health.lease_lost.store(true, Ordering::SeqCst);
                }
                tracing::warn!(message = "Could not look for notifications without a live shard.", %error);
            }
        }
    }

    pub(super) fn heartbeat(&mut self, now: Millis) {
        if self.gave_up {
            return;
        }
        match self.store.heartbeat(now) {
            Ok(()) => self.mark_store(true, now),
            Err(error) => {
                if matches!(error, drift_store::Error::LeaseLost { .. }) {
                    self.health.lease_lost.store(true, Ordering::SeqCst);
                }
                if self.health.store_writable.load(Ordering::SeqCst) {
                    tracing::error!(message = "Store is not writable.", %error);
                }
                self.mark_store(false, now);
            }
        }
    }

    pub(super) fn mark_store(&mut self, ok: bool, now: Millis) {
        self.timers.last_write = now;
        self.health.store_writable.store(ok, Ordering::SeqCst);
        if ok {
            self.health
                .last_store_ok
                .store(u64::try_from(now).unwrap_or(0), Ordering::SeqCst);
        }
    }
}
