//! The round's first steps: the submitted events (duplicates dropped by their (`time`,
//! `source`, `id`) key, asked of the store once per round), the resync loop's work and the
//! silence writes, put into the engine and the round's batch.

use super::*;

impl Writer {
    /// Applies the submitted events: duplicates by their key ([`event_key`]) are dropped, the
    /// rest go to the engine. A request whose events changed nothing durable is answered at
    /// once (behind the answers of earlier rounds, so after their sync: `answers.rs`), unless
    /// one of them repeats an event this round applied and wrote: its `202` would rest on a
    /// write not yet committed (a redelivery of the event answered while the first delivery
    /// waits), so it waits for the commit and its sync. (Content equal to what an earlier event
    /// of the round wrote rests on an event not yet answered, which the Broker delivers again if
    /// the write is lost.)
    pub(super) fn apply_events(
        &mut self,
        round: &mut Round,
        submissions: Vec<(Vec<Decoded>, Reply)>,
    ) {
        let now = round.now;
        let events_in_round: usize = submissions.iter().map(|(events, _)| events.len()).sum();
        // Sized for the round up front: grown from empty, rehashing was a visible part of a
        // round's own work.
        let mut keys_in_round = HashSet::with_capacity(events_in_round);
        // The keys of the round's events that wrote something (`round.batch.events`' keys).
        let mut written_in_round = HashSet::with_capacity(events_in_round);
        round.results.reserve(submissions.len());
        // Which of the round's events the store has seen, asked once for the whole round (one
        // query on PostgreSQL, instead of one round trip per event).
        let keys: Vec<EventKey> = submissions
            .iter()
            .flat_map(|(events, _)| events.iter())
            .filter_map(|event| match event {
                Decoded::ApiServer(event) => Some(event_key(event)),
                Decoded::Ignored { .. } => None,
            })
            .collect();
        let seen = match self.store.duplicates(&keys) {
            Ok(seen) => seen,
            Err(error) => {
                round.store_failure.get_or_insert(error);
                HashSet::new()
            }
        };
        // Taken in the order they were made: the same events, in the same order.
        let mut keys = keys.into_iter();
        for (mut events, reply) in submissions {
            let mut reply = Some(reply);
            let writes_before = self.engine.journaled_writes();
            let mut repeats_a_write = false;
            let mut event_results = Vec::with_capacity(events.len());
            for event in &mut events {
                let result = match event {
                    Decoded::Ignored { .. } => EventResult::Ignored,
                    Decoded::ApiServer(event) => {
                        let key = keys.next().unwrap_or_else(|| event_key(event));
                        let duplicate = keys_in_round.contains(&key) || seen.contains(&key);
                        if duplicate {
                            repeats_a_write |= written_in_round.contains(&key);
                            EventResult::Duplicate
                        } else {
                            let writes = self.engine.journaled_writes();
                            match self.engine.apply(event, now) {
                                Outcome::Applied => {
                                    keys_in_round.insert(key.clone());
                                    // An event that changed nothing durable (status churn with
                                    // the same compact content) needs no key and no disk write:
                                    // a redelivery applies the same content again, which changes
                                    // nothing either.
                                    if self.engine.journaled_writes() != writes {
                                        written_in_round.insert(key.clone());
                                        round.batch.events.push((key, now));
                                    }
                                    EventResult::Applied
                                }
                                Outcome::Stale => EventResult::Stale,
                                Outcome::Reference => EventResult::Reference,
                                Outcome::Conflict => {
                                    self.reported.misnamed.conflict(
                                        &self.engine,
                                        &self.metrics,
                                        event,
                                    );
                                    EventResult::Conflict
                                }
                                Outcome::OverCapacity => EventResult::OverCapacity,
                            }
                        }
                    }
                };
                event_results.push(result);
            }
            if round.store_failure.is_none()
                && !repeats_a_write
                && self.engine.journaled_writes() == writes_before
            {
                if let Some(reply) = reply.take() {
                    self.count_refusals();
                    // In order behind earlier rounds' answers, so after their sync.
                    self.answers.send(super::answers::Answers {
                        answers: vec![super::answers::Answer::Events(
                            reply,
                            Ok(event_results.clone()),
                        )],
                        wrote: false,
                        notify_outbox: false,
                        spent: Vec::new(),
                    });
                }
            }
            round.submissions.push((events, reply));
            round.results.push(Ok(event_results));
        }
    }

    /// Applies the resync loop's work (listed objects, complete lists' absentees).
    pub(super) fn apply_resyncs(
        &mut self,
        round: &mut Round,
        resyncs: Vec<(ResyncWork, ResyncReply)>,
    ) {
        for (work, reply) in resyncs {
            let outcome = resync::apply(
                &mut self.engine,
                &mut self.reported.misnamed,
                &self.metrics,
                work,
                round.now,
            );
            round.resync_replies.push((outcome, reply));
        }
    }

    /// Puts the round's silence requests into the batch: a new silence gets its id and time
    /// here, and withdraws the pending reminders of the open drifts it covers (new notices are
    /// muted by routing once it is committed).
    pub(super) fn apply_silences(
        &mut self,
        round: &mut Round,
        requests: Vec<(SilenceRequest, SilenceReply)>,
    ) {
        let (now, batch) = (round.now, &mut round.batch);
        // Expired silences mute nothing: removed (in the store too) in a round that adds one,
        // so the silences kept (and a shard's read-back of them) stay within twice the cap on
        // active ones, however many short ones are created.
        if requests
            .iter()
            .any(|(request, _)| matches!(request, SilenceRequest::Add(_)))
        {
            batch.silences.extend(
                self.silences
                    .expired(now)
                    .into_iter()
                    .map(SilenceChange::Remove),
            );
        }
        for (request, reply) in requests {
            let outcome = match request {
                SilenceRequest::Add(silence) => {
                    // Active now: the committed ones, plus those added in this round, minus
                    // the active ones removed in it.
                    let (mut added, mut removed) = (0, 0);
                    for change in &batch.silences {
                        match change {
                            SilenceChange::Add(_) => added += 1,
                            SilenceChange::Remove(id) if self.silences.is_active(id, now) => {
                                removed += 1
                            }
                            SilenceChange::Remove(_) => {}
                        }
                    }
                    let active = (self.silences.active_count(now) + added).saturating_sub(removed);
                    let max_active = self.settings.max_active_silences;
                    if active >= max_active {
                        round
                            .silence_replies
                            .push((SilenceOutcome::Refused { max_active }, reply));
                        continue;
                    }
                    let stored = StoredSilence {
                        id: format!("sil_{}", uuid::Uuid::new_v4().simple()),
                        silence,
                        created_at: now,
                    };
                    batch.cancel_reminders.extend(
                        self.engine
                            .open_drifts()
                            .filter(|drift| stored.silence.matches(drift, now))
                            .map(|drift| drift.id.clone()),
                    );
                    batch.silences.push(SilenceChange::Add(stored.clone()));
                    SilenceOutcome::Added(stored)
                }
                SilenceRequest::Remove(id) => {
                    // Removed already in this round: a second removal finds nothing, as it
                    // would one round later.
                    let removed_now = batch
                        .silences
                        .iter()
                        .any(|change| *change == SilenceChange::Remove(id.clone()));
                    let removed = self.silences.contains(&id) && !removed_now;
                    if removed {
                        batch.silences.push(SilenceChange::Remove(id));
                    }
                    SilenceOutcome::Removed(removed)
                }
            };
            round.silence_replies.push((outcome, reply));
        }
    }
}

/// An event's de-duplication key: its send time ([`ApiServerEvent::sent_at`]), `source` and
/// `id`. Why the time leads: `EventKey`.
///
/// [`ApiServerEvent::sent_at`]: drift_core::decode::ApiServerEvent::sent_at
fn event_key(event: &drift_core::decode::ApiServerEvent) -> EventKey {
    EventKey {
        sent_at: event.sent_at(),
        source: event.source.clone(),
        id: event.id.clone(),
    }
}
