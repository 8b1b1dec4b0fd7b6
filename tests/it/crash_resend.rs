//! A crash between a send and its settlement: the relay must send the same rows again as the
//! same message (same idempotency key), not regroup them with rows queued since.
//!
//! Regression: the message id used to be stored only when the attempt was settled, so after a
//! kill in that window the rows were regrouped, and a drift reached the destination under two
//! different ids (found by `tests/python/test_hardening.py`, SIGKILL under load).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drift_model::{Drift, DriftState, Evidence, OwnerChain, Severity};
use drift_model::{Notice, NoticeKind};
use drift_sentinel::deliver::relay::{Limits, Relay, SharedOutbox};
use drift_sentinel::deliver::{BoxFuture, Channel, Message, Outcome};
use drift_sentinel::metrics::Metrics;
use drift_store::testing::TestStore;
use drift_store::{Batch, NewOutbox, Store};

const NOW: i64 = 1_800_000_000_000;

/// Messages a channel was given: (message id, drift ids).
type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// Records every message it is given; with `hang`, never answers (the process dies mid-send).
struct Recording {
    seen: Seen,
    hang: bool,
}

impl Channel for Recording {
    fn name(&self) -> &str {
        "hook"
    }
    fn type_name(&self) -> &'static str {
        "webhook"
    }
    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome> {
        let drifts = message
            .notices
            .iter()
            .map(|notice| notice.drift.id.clone())
            .collect();
        self.seen.lock().unwrap().push((message.id.clone(), drifts));
        let hang = self.hang;
        Box::pin(async move {
            if hang {
                std::future::pending::<()>().await;
            }
            Outcome::Delivered
        })
    }
}

fn drift(index: usize) -> Drift {
    Drift {
        id: format!("drift{index}"),
        class: "config_drift".into(),
        rule: None,
        severity: Severity::Warning,
        state: DriftState::Firing,
        cluster: "prod".into(),
        uid: format!("uid-{index}"),
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "knative-serving".into(),
        name: format!("config-{index}"),
        labels: Default::default(),
        owner: OwnerChain {
            service: None,
            configuration: None,
            revision: None,
        },
        evidence: Evidence {
            summary: format!("config-{index} edited by hand"),
            changes: vec![],
            actor: None,
            hint: None,
            severity: None,
            facts: Default::default(),
        },
        since: NOW,
        fire_at: NOW,
        fired_at: Some(NOW),
        resolved_at: None,
        resolution: None,
    }
}

fn queue(store: &TestStore, indexes: std::ops::Range<usize>, at: i64) {
    let drifts: Vec<Drift> = indexes.clone().map(drift).collect();
    let rows = drifts
        .iter()
        .map(|drift| {
            let notice = Notice {
                kind: NoticeKind::Firing,
                drift: drift.clone(),
                at,
                resend: 0,
                remediation: None,
            };
            NewOutbox {
                id: format!("ntf_{}", drift.id),
                channel: "hook".into(),
                drift_id: drift.id.clone(),
                group_key: "prod/knative-serving/config_drift".into(),
                notice,
                created_at: at,
                not_before: at,
                repeat_after_ms: None,
            }
        })
        .collect();
    let mut store = store.clone();
    store
        .commit(&Batch {
            events: vec![],
            drifts,
            outbox: rows,
            ..Default::default()
        })
        .unwrap();
}

/// The test relays' delivery limits.
fn limits() -> Limits {
    Limits {
        max_attempts: 10,
        max_age: Duration::from_secs(3600),
        min_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
    }
}

fn relay(store: &TestStore, channel: Recording) -> Relay {
    let outbox: SharedOutbox = Arc::new(Mutex::new(Box::new(store.clone())));
    let clock = Arc::new(AtomicI64::new(NOW));
    Relay::new(
        Arc::new(channel),
        limits(),
        outbox,
        Arc::new(move || clock.load(Ordering::SeqCst)),
        Arc::new(Metrics::new()),
        Arc::new(tokio::sync::Notify::new()),
    )
}

#[tokio::test]
async fn a_message_cut_off_by_a_crash_is_resent_whole_under_its_id() {
    let store = TestStore::new();
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    // Three drifts go out as one digest; the process dies before the attempt is settled.
    queue(&store, 0..3, NOW);
    let mut first = relay(
        &store,
        Recording {
            seen: Arc::clone(&seen),
            hang: true,
        },
    );
    let cut = tokio::time::timeout(Duration::from_millis(300), first.round(NOW)).await;
    assert!(cut.is_err(), "the send never completed");
    drop(first);
    // Meanwhile two more drifts of the same group were queued. A new process starts.
    queue(&store, 3..5, NOW + 10);
    let mut second = relay(
        &store,
        Recording {
            seen: Arc::clone(&seen),
            hang: false,
        },
    );
    for _ in 0..5 {
        second.round(NOW + 2_000).await.unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    let (first_id, first_drifts) = seen[0].clone();
    assert_eq!(first_drifts, ["drift0", "drift1", "drift2"]);
    // The cut-off message went out again, whole and under the same id ...
    assert!(
        seen[1..]
            .iter()
            .any(|(id, drifts)| *id == first_id && *drifts == first_drifts),
        "{seen:?}"
    );
    // ... and no drift was ever sent under two ids.
    let mut ids_of: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for (id, drifts) in &seen {
        for drift in drifts {
            ids_of.entry(drift.clone()).or_default().insert(id.clone());
        }
    }
    for (drift, ids) in &ids_of {
        assert_eq!(ids.len(), 1, "{drift} went out under {ids:?}: {seen:?}");
    }
    assert_eq!(ids_of.len(), 5, "every drift was sent: {seen:?}");
}

/// A relay of process `identity` on its own clock, over `outbox`.
fn relay_of(
    outbox: Box<dyn drift_store::Outbox>,
    channel: Recording,
    identity: &str,
    clock: i64,
    metrics: &Arc<Metrics>,
) -> Relay {
    Relay::new(
        Arc::new(channel),
        limits(),
        Arc::new(Mutex::new(outbox)),
        Arc::new(move || clock),
        Arc::clone(metrics),
        Arc::new(tokio::sync::Notify::new()),
    )
    .with_claims(identity, Duration::from_secs(2))
}

/// Two processes on one PostgreSQL store (a writer killed mid-send and the standby that took
/// over): the dead process's claim keeps the rows from the other until it lapses, then they go
/// out again as the same message, under the same idempotency key, and the takeover is counted.
#[tokio::test]
async fn a_dead_processs_claim_lapses_and_the_other_process_resends_under_the_same_key() {
    let url = crate::pg::PgServer::shared().database();
    let target = drift_store::postgres::Target::new(&url, None, None).unwrap();
    let mut opened = drift_store::postgres::open(&target).unwrap();
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    {
        let drifts: Vec<Drift> = (0..3).map(drift).collect();
        let rows = drifts
            .iter()
            .map(|drift| NewOutbox {
                id: format!("ntf_{}", drift.id),
                channel: "hook".into(),
                drift_id: drift.id.clone(),
                group_key: "prod/knative-serving/config_drift".into(),
                notice: Notice {
                    kind: NoticeKind::Firing,
                    drift: drift.clone(),
                    at: NOW,
                    resend: 0,
                    remediation: None,
                },
                created_at: NOW,
                not_before: NOW,
                repeat_after_ms: None,
            })
            .collect();
        opened
            .writer
            .commit(&Batch {
                drifts,
                outbox: rows,
                ..Default::default()
            })
            .unwrap();
    }
    let (metrics_a, metrics_b) = (Arc::new(Metrics::new()), Arc::new(Metrics::new()));
    // Process A claims the three rows and dies mid-send.
    let mut a = relay_of(
        opened.outbox,
        Recording {
            seen: Arc::clone(&seen),
            hang: true,
        },
        "pod-a/7/aaaa",
        NOW,
        &metrics_a,
    );
    let cut = tokio::time::timeout(Duration::from_millis(300), a.round(NOW)).await;
    assert!(cut.is_err(), "the send never completed");
    drop(a);
    let other = || drift_store::postgres::open(&target).unwrap().outbox;
    // Process B, while A's claim holds (send timeout 2s plus CLAIM_MARGIN): nothing to send.
    let mut early = relay_of(
        other(),
        Recording {
            seen: Arc::clone(&seen),
            hang: false,
        },
        "pod-b/9/bbbb",
        NOW + 1_000,
        &metrics_b,
    );
    early.round(NOW + 1_000).await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1, "B waits for A's claim");
    // Once it lapsed, B sends them, as A's message, and counts the lapsed claims.
    let later = NOW + 2_000 + drift_sentinel::deliver::relay::CLAIM_MARGIN.as_millis() as i64 + 1;
    let mut b = relay_of(
        other(),
        Recording {
            seen: Arc::clone(&seen),
            hang: false,
        },
        "pod-b/9/bbbb",
        later,
        &metrics_b,
    );
    b.round(later).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1], seen[0], "same message, same idempotency key");
    let text = metrics_b.render();
    assert!(
        text.contains("drift_sentinel_outbox_claim_expiries_total{channel=\"hook\"} 3"),
        "{text}"
    );
    // Settled: a third round sends nothing more.
    b.round(later + 1_000).await.unwrap();
    assert!(other().claim_owners().unwrap().is_empty());
}

/// The outbox as another process races for it: just before the relay's claim, the rival claims
/// `stolen`, so the relay holds only the rest of its message's rows.
struct Rival {
    store: TestStore,
    stolen: &'static str,
    /// How long the rival's claim lasts from the claim's time: negative, it lapsed already
    /// (the rival died after claiming).
    holds_for: i64,
}

impl drift_store::Outbox for Rival {
    fn due(
        &mut self,
        channel: &str,
        now: i64,
        limit: usize,
        owner: &str,
    ) -> Result<drift_store::Due, drift_store::Error> {
        self.store.due(channel, now, limit, owner)
    }
    fn next_due(&mut self, channel: &str, owner: &str) -> Result<Option<i64>, drift_store::Error> {
        self.store.next_due(channel, owner)
    }
    fn claim(
        &mut self,
        ids: &[String],
        message_id: &str,
        lease: &drift_store::Lease,
        now: i64,
    ) -> Result<Vec<String>, drift_store::Error> {
        let rival = drift_store::Lease {
            owner: "rival/1/cccc/hook".into(),
            until: now + self.holds_for,
        };
        let taken = self
            .store
            .claim(&[self.stolen.to_string()], "rival_message", &rival, now)?;
        assert_eq!(taken, [self.stolen], "the rival took its row");
        self.store.claim(ids, message_id, lease, now)
    }
    fn settle(
        &mut self,
        settlement: &drift_store::Settlement,
        follow_ups: &[drift_store::FollowUp],
    ) -> Result<(), drift_store::Error> {
        self.store.settle(settlement, follow_ups)
    }
    fn release(&mut self, owner: &str) -> Result<usize, drift_store::Error> {
        self.store.release(owner)
    }
    fn claim_owners(&mut self) -> Result<Vec<String>, drift_store::Error> {
        self.store.claim_owners()
    }
    fn firing_pending_before(
        &mut self,
        drift_id: &str,
        channel: &str,
        created_at: i64,
    ) -> Result<bool, drift_store::Error> {
        self.store
            .firing_pending_before(drift_id, channel, created_at)
    }
    fn expire_unknown_channels(
        &mut self,
        known: &[String],
        now: i64,
    ) -> Result<usize, drift_store::Error> {
        self.store.expire_unknown_channels(known, now)
    }
    fn cancel_reminders(
        &mut self,
        drift_id: &str,
        channel: &str,
        owner: &str,
        now: i64,
        sending: Option<&str>,
    ) -> Result<usize, drift_store::Error> {
        self.store
            .cancel_reminders(drift_id, channel, owner, now, sending)
    }
    fn drift_state(&mut self, drift_id: &str) -> Result<Option<DriftState>, drift_store::Error> {
        self.store.drift_state(drift_id)
    }
    fn stats(&mut self) -> Result<drift_store::OutboxStats, drift_store::Error> {
        self.store.stats()
    }
    fn rows(
        &mut self,
        state: Option<drift_store::OutboxState>,
        limit: usize,
    ) -> Result<Vec<drift_store::OutboxRow>, drift_store::Error> {
        self.store.rows(state, limit)
    }
}

/// A rival process claims one row of a digest between the relay's read and its claim: the
/// relay sends the rows it holds, each with its own notice (none of the rival's), delivers
/// only those, and leaves the rival's row to the rival.
#[tokio::test]
async fn a_message_carries_only_the_rows_its_claim_holds() {
    let (store, seen) = round_with_a_rival(60_000).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].1, ["drift0", "drift2"], "{seen:?}");
    let mut store = store.clone();
    let rows = drift_store::Outbox::rows(&mut store, None, 10).unwrap();
    let state = |id: &str| {
        let row = rows.iter().find(|row| row.queued.id == id).unwrap();
        (row.state, row.claimed_by.clone())
    };
    assert_eq!(state("ntf_drift0").0, drift_store::OutboxState::Delivered);
    assert_eq!(state("ntf_drift2").0, drift_store::OutboxState::Delivered);
    assert_eq!(
        state("ntf_drift1"),
        (
            drift_store::OutboxState::Pending,
            Some("rival/1/cccc/hook".to_string())
        )
    );
}

/// A drift escalated while its reminder was due: one message carries the old reminder and the
/// escalation. The escalation withdraws the drift's pending reminders, but not the one that
/// message carries: it went out, so it keeps its row, settled as delivered with its attempt.
#[tokio::test]
async fn a_reminder_sent_with_its_drifts_escalation_is_recorded_as_delivered() {
    let store = TestStore::default();
    let mut warning = drift(0);
    warning.fired_at = Some(NOW - 3_600_000);
    let mut critical = warning.clone();
    critical.severity = Severity::Critical;
    let notices = [
        ("ntf_reminder", NoticeKind::Repeat, warning.clone(), NOW - 1),
        ("ntf_escalation", NoticeKind::Firing, critical.clone(), NOW),
    ];
    let rows = notices
        .iter()
        .map(|(id, kind, drift, at)| NewOutbox {
            id: id.to_string(),
            channel: "hook".into(),
            drift_id: drift.id.clone(),
            group_key: "prod/knative-serving/config_drift".into(),
            notice: Notice {
                kind: *kind,
                drift: drift.clone(),
                at: *at,
                resend: 0,
                remediation: None,
            },
            created_at: *at,
            not_before: *at,
            repeat_after_ms: None,
        })
        .collect();
    let mut writer = store.clone();
    writer
        .commit(&Batch {
            drifts: vec![critical],
            outbox: rows,
            ..Default::default()
        })
        .unwrap();
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let mut relay = relay_of_store(&store, &seen);
    relay.round(NOW).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "one message: {seen:?}");
    assert_eq!(seen[0].1, ["drift0", "drift0"], "{seen:?}");
    let mut store = store.clone();
    let rows = drift_store::Outbox::rows(&mut store, None, 10).unwrap();
    let state = |id: &str| {
        rows.iter()
            .find(|row| row.queued.id == id)
            .map(|row| row.state)
    };
    assert_eq!(
        state("ntf_escalation"),
        Some(drift_store::OutboxState::Delivered)
    );
    assert_eq!(
        state("ntf_reminder"),
        Some(drift_store::OutboxState::Delivered),
        "the reminder went out in the message: {rows:?}"
    );
}

/// A reminder this relay still holds from a send a store error cut short, of a drift that
/// stopped firing: the round's check withdraws it (the relay's own claim is no message on its
/// way), and the relay then waits instead of finding the same row due again at once.
#[tokio::test]
async fn a_leftover_claim_on_a_stopped_drifts_reminder_is_withdrawn() {
    let store = TestStore::default();
    let mut stopped = drift(0);
    stopped.state = DriftState::Resolved;
    stopped.resolved_at = Some(NOW - 1_000);
    let mut writer = store.clone();
    writer
        .commit(&Batch {
            drifts: vec![stopped.clone()],
            outbox: vec![NewOutbox {
                id: "ntf_reminder".into(),
                channel: "hook".into(),
                drift_id: stopped.id.clone(),
                group_key: "prod/knative-serving/config_drift".into(),
                notice: Notice {
                    kind: NoticeKind::Repeat,
                    drift: stopped,
                    at: NOW - 5_000,
                    resend: 0,
                    remediation: None,
                },
                created_at: NOW - 5_000,
                not_before: NOW - 5_000,
                repeat_after_ms: None,
            }],
            ..Default::default()
        })
        .unwrap();
    // The relay's own claim (as `Relay::new` names it), still live.
    let owner = format!("local/{}/hook", std::process::id());
    let lease = drift_store::Lease {
        owner,
        until: NOW + 60_000,
    };
    let mut outbox = store.clone();
    let held = drift_store::Outbox::claim(
        &mut outbox,
        &["ntf_reminder".to_string()],
        "ntf_reminder",
        &lease,
        NOW - 4_000,
    )
    .unwrap();
    assert_eq!(held, ["ntf_reminder"]);
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let mut relay = relay_of_store(&store, &seen);
    relay.round(NOW).await.unwrap();
    let rows = drift_store::Outbox::rows(&mut outbox, None, 10).unwrap();
    assert!(rows.is_empty(), "withdrawn: {rows:?}");
    assert!(
        relay.round(NOW).await.unwrap().is_some(),
        "nothing is due any more: the relay waits"
    );
    assert!(seen.lock().unwrap().is_empty(), "nothing was sent");
}

/// A rival process claims one row of a digest for its own message and dies, its claim lapsing
/// before this relay's claim: the row went out (or may have) under the rival's message id, so
/// it is not carried in this relay's digest under another; it goes out again as the rival's
/// message, under the idempotency key it was first sent with.
#[tokio::test]
async fn a_row_sent_in_another_message_is_resent_as_that_message_only() {
    let (store, seen) = round_with_a_rival(-1).await;
    let first = seen.lock().unwrap().clone();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].1, ["drift0", "drift2"], "{first:?}");
    // The next round resends the rival's row as the rival's message.
    let mut plain = relay_of_store(&store, &seen);
    plain.round(NOW).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        seen[1],
        ("rival_message".to_string(), vec!["drift1".to_string()])
    );
    let mut store = store.clone();
    let rows = drift_store::Outbox::rows(&mut store, None, 10).unwrap();
    for row in &rows {
        assert_eq!(row.state, drift_store::OutboxState::Delivered, "{rows:?}");
    }
    let stolen = rows
        .iter()
        .find(|row| row.queued.id == "ntf_drift1")
        .unwrap();
    assert_eq!(stolen.message_id.as_deref(), Some("rival_message"));
}

/// Three drifts of one group queued, and one relay round over them while a rival claims
/// `ntf_drift1` for `holds_for` ms (see [`Rival`]): the store, and what was sent.
async fn round_with_a_rival(holds_for: i64) -> (TestStore, Seen) {
    let store = TestStore::default();
    queue(&store, 0..3, NOW);
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let outbox: SharedOutbox = Arc::new(Mutex::new(Box::new(Rival {
        store: store.clone(),
        stolen: "ntf_drift1",
        holds_for,
    })));
    let mut relay = relay_over(outbox, &seen);
    relay.round(NOW).await.unwrap();
    (store, seen)
}

/// A relay over `outbox` recording into `seen`, on a clock stopped at `NOW`.
fn relay_over(outbox: SharedOutbox, seen: &Seen) -> Relay {
    Relay::new(
        Arc::new(Recording {
            seen: Arc::clone(seen),
            hang: false,
        }),
        limits(),
        outbox,
        Arc::new(|| NOW),
        Arc::new(Metrics::new()),
        Arc::new(tokio::sync::Notify::new()),
    )
}

/// A relay over `store` recording into `seen`.
fn relay_of_store(store: &TestStore, seen: &Seen) -> Relay {
    relay(
        store,
        Recording {
            seen: Arc::clone(seen),
            hang: false,
        },
    )
}
