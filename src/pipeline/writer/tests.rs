//! Unit tests of the writer's round, on the test store (SQLite in a temp file, which can be told
//! to fail and to lose a commit's answer) with a clock the test moves: what a round commits and
//! answers, that a failed commit takes back everything the round did, how a commit of unknown
//! outcome is settled, and the heartbeat and pruning timers.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::{Work, Writer};
use crate::metrics::Metrics;
use crate::pipeline::{Error, EventResult, Health, Settings};
use drift_core::classify::{Engine, Rules};
use drift_core::decode::{decode_request, ClusterNames, Decoded};
use drift_core::route::Silences;
use drift_store::testing::TestStore;

mod gauge;
mod tombstones;

const START: i64 = 1_764_000_000_000;

/// A Knative Service from the fixtures, as one structured CloudEvent of the ApiServerSource.
fn service_event(id: &str, resource_version: &str, image: &str) -> Vec<Decoded> {
    service_event_with(id, resource_version, image, |_| {})
}

/// [`service_event`], with the object changed by `edit` (another name and uid, ...).
fn service_event_with(
    id: &str,
    resource_version: &str,
    image: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> Vec<Decoded> {
    service_event_typed("update", id, resource_version, image, edit)
}

/// [`service_event_with`] as the event of `verb` (`add`, `update`, `delete`).
fn service_event_typed(
    verb: &str,
    id: &str,
    resource_version: &str,
    image: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> Vec<Decoded> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/knative/serving/openshift-labs-learn-katacoda__serverless-05-knative-client__ksvc-greeter.yaml"
    ))
    .expect("fixture");
    let mut object: serde_json::Value = serde_saphyr::from_str(&text).expect("fixture parses");
    object["metadata"]["resourceVersion"] = serde_json::json!(resource_version);
    object["spec"]["template"]["spec"]["containers"][0]["image"] = serde_json::json!(image);
    edit(&mut object);
    let body = serde_json::json!({
        "specversion": "1.0",
        "id": id,
        "source": "https://10.96.0.1:443",
        "type": format!("dev.knative.apiserver.resource.{verb}"),
        "datacontenttype": "application/json",
        "data": object,
    });
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/cloudevents+json"),
    );
    let clusters = ClusterNames {
        default: "test".into(),
        by_source: Default::default(),
    };
    decode_request(&headers, body.to_string().as_bytes(), &clusters).expect("decodes")
}

struct Harness {
    writer: Writer,
    store: TestStore,
    health: Arc<Health>,
    now: Arc<AtomicI64>,
    /// What wakes the relays.
    outbox_notify: Arc<tokio::sync::Notify>,
}

fn harness() -> Harness {
    harness_in(Default::default())
}

fn harness_in(shard: drift_core::config::ShardConfig) -> Harness {
    harness_routed(
        shard,
        drift_core::config::router(&[], &[drift_core::config::ChannelConfig::log("log")]),
    )
}

fn harness_routed(
    shard: drift_core::config::ShardConfig,
    router: drift_core::route::Router,
) -> Harness {
    let outbox_notify = Arc::new(tokio::sync::Notify::new());
    let store = TestStore::new();
    let now = Arc::new(AtomicI64::new(START));
    let clock_now = Arc::clone(&now);
    let health = Arc::new(Health::default());
    let settings = Settings {
        router,
        outbox_notify: Arc::clone(&outbox_notify),
        queue_capacity: 16,
        dedup_retention: Duration::from_secs(3600),
        audit_retention: Duration::from_secs(3600),
        heartbeat_interval: Duration::from_secs(5),
        capacity: Default::default(),
        max_active_silences: 1_000,
        shard: Arc::new(shard),
        remediation: Default::default(),
        traffic_observed: false,
    };
    let writer = Writer::new(
        Engine::new(Arc::new(Rules::default())),
        Box::new(store.clone()),
        Arc::new(move || clock_now.load(Ordering::SeqCst)),
        Arc::new(Metrics::new()),
        Arc::clone(&health),
        settings,
        Silences::default(),
        crate::pipeline::fleet_view::Publisher::new(crate::pipeline::fleet_view::Shared::new(
            Vec::new(),
        )),
    );
    Harness {
        writer,
        store,
        health,
        now,
        outbox_notify,
    }
}

type Answer = oneshot::Receiver<Result<Vec<EventResult>, Error>>;

/// The store reopened and an engine restored from what it holds, as `Pipeline::start` does.
fn restored(store: &TestStore, rules: Arc<Rules>) -> (Box<dyn drift_store::Store>, Engine) {
    let mut store: Box<dyn drift_store::Store> = Box::new(store.clone());
    let mut objects = Vec::new();
    let snapshot = store
        .load(&mut |_, body| {
            objects.push(drift_core::classify::stored::decode(body)?);
            Ok(())
        })
        .expect("loads");
    let mut engine = Engine::new(rules);
    engine.restore(objects, snapshot.drifts);
    (store, engine)
}

impl Harness {
    /// One round over these requests; their answers.
    fn round(&mut self, requests: Vec<Vec<Decoded>>) -> Vec<Result<Vec<EventResult>, Error>> {
        let mut work = Work::default();
        let mut answers: Vec<Answer> = Vec::new();
        for events in requests {
            let (reply, answer) = oneshot::channel();
            work.submissions.push((events, reply));
            answers.push(answer);
        }
        self.writer.round(work);
        answers
            .into_iter()
            .map(|mut answer| answer.try_recv().expect("every request is answered"))
            .collect()
    }

    fn advance(&self, by: Duration) {
        self.now
            .fetch_add(i64::try_from(by.as_millis()).unwrap(), Ordering::SeqCst);
    }
}

#[test]
fn a_round_commits_its_events_once_and_answers_each_request() {
    let mut h = harness();
    let event = service_event("e1", "100", "gcr.io/app:1");
    let answers = h.round(vec![event.clone(), event]);
    assert_eq!(
        answers,
        vec![
            Ok(vec![EventResult::Applied]),
            Ok(vec![EventResult::Duplicate])
        ]
    );
    assert_eq!(h.store.commit_count(), 1, "one transaction for the round");
    assert_eq!(h.store.event_count(), 1, "the key is kept once");
    assert_eq!(h.store.objects().len(), 1);
    // A redelivery in a later round is a duplicate by the store's key.
    let answers = h.round(vec![service_event("e1", "100", "gcr.io/app:1")]);
    assert_eq!(answers, vec![Ok(vec![EventResult::Duplicate])]);
}

#[test]
fn an_event_that_changes_nothing_durable_writes_nothing() {
    let mut h = harness();
    h.round(vec![service_event("e1", "100", "gcr.io/app:1")]);
    let commits = h.store.commit_count();
    // The same content at a newer version (status churn): applied, nothing to write.
    let answers = h.round(vec![service_event("e2", "101", "gcr.io/app:1")]);
    assert_eq!(answers, vec![Ok(vec![EventResult::Applied])]);
    assert_eq!(h.store.commit_count(), commits, "no transaction");
    assert_eq!(h.store.event_count(), 1, "not even its key");
}

#[test]
fn a_failed_commit_takes_back_the_whole_round_and_refuses_every_request() {
    let mut h = harness();
    h.store.set_failing(true);
    let answers = h.round(vec![service_event("e1", "100", "gcr.io/app:1")]);
    assert!(matches!(answers[..], [Err(Error::Store(_))]), "{answers:?}");
    assert_eq!(h.writer.engine.object_count(), 0, "the engine rolled back");
    assert!(!h.health.store_writable.load(Ordering::SeqCst));
    // The sender retries once the store is back: nothing of the refused round remains, so
    // the retry is applied, not taken for a duplicate or a stale version.
    h.store.set_failing(false);
    h.advance(Duration::from_secs(2));
    let answers = h.round(vec![service_event("e1", "100", "gcr.io/app:1")]);
    assert_eq!(answers, vec![Ok(vec![EventResult::Applied])]);
    assert_eq!(h.store.objects().len(), 1);
    assert!(h.health.store_writable.load(Ordering::SeqCst));
}

#[test]
fn a_commit_whose_answer_was_lost_is_settled_by_its_event_keys() {
    // It landed: the round goes on as committed.
    let mut h = harness();
    h.store.set_lost_commit_answers(Some(true));
    let answers = h.round(vec![service_event("e1", "100", "gcr.io/app:1")]);
    assert_eq!(answers, vec![Ok(vec![EventResult::Applied])]);
    assert_eq!(h.writer.engine.object_count(), 1);
    assert!(!h.writer.gave_up);

    // It did not land: refused and rolled back, and the writer goes on.
    let mut h = harness();
    h.store.set_lost_commit_answers(Some(false));
    let answers = h.round(vec![service_event("e1", "100", "gcr.io/app:1")]);
    assert!(
        matches!(answers[..], [Err(Error::Store("commit_unknown"))]),
        "{answers:?}"
    );
    assert_eq!(h.writer.engine.object_count(), 0);
    assert!(!h.writer.gave_up);
}

#[test]
fn a_commit_of_unknown_outcome_without_keys_to_ask_gives_the_writer_role_up() {
    let mut h = harness();
    h.store.set_lost_commit_answers(Some(true));
    // A silence is a write without event keys: nothing tells whether it landed.
    let (reply, mut answer) = oneshot::channel();
    let mut work = Work::default();
    work.silences.push((
        crate::pipeline::SilenceRequest::Add(drift_model::Silence {
            matchers: [("class".to_string(), "not_ready".to_string())].into(),
            expires_at: None,
            comment: None,
        }),
        reply,
    ));
    h.writer.round(work);
    assert!(matches!(answer.try_recv(), Ok(Err(Error::Store(_)))));
    assert!(h.writer.gave_up);
    assert!(h.health.gave_up.load(Ordering::SeqCst));
    // From then on nothing is committed, not even what the store would take.
    h.store.set_lost_commit_answers(None);
    let commits = h.store.commit_count();
    let answers = h.round(vec![service_event("e1", "100", "gcr.io/app:1")]);
    assert!(matches!(answers[..], [Err(Error::Store(_))]), "{answers:?}");
    assert_eq!(h.store.commit_count(), commits);
}

#[test]
fn an_idle_writer_proves_the_store_writable_every_heartbeat() {
    let mut h = harness();
    h.round(Vec::new());
    let first = h.health.last_store_ok.load(Ordering::SeqCst);
    assert_eq!(
        first,
        u64::try_from(START).unwrap(),
        "the first round writes one"
    );
    h.advance(Duration::from_secs(1));
    h.round(Vec::new());
    assert_eq!(
        h.health.last_store_ok.load(Ordering::SeqCst),
        first,
        "not before the interval"
    );
    h.advance(Duration::from_secs(5));
    h.round(Vec::new());
    assert_eq!(
        h.health.last_store_ok.load(Ordering::SeqCst),
        u64::try_from(START + 6_000).unwrap()
    );
    // A store that cannot be written says so at the next heartbeat.
    h.store.set_failing(true);
    h.advance(Duration::from_secs(5));
    h.round(Vec::new());
    assert!(!h.health.store_writable.load(Ordering::SeqCst));
}

#[test]
fn event_keys_are_forgotten_after_their_retention() {
    let mut h = harness();
    h.round(vec![service_event("e1", "100", "gcr.io/app:1")]);
    assert_eq!(h.store.event_count(), 1);
    // Pruning runs every ten minutes; the key is older than the hour it is kept by then.
    h.advance(Duration::from_secs(3600 + 600));
    h.round(vec![service_event("e2", "102", "gcr.io/app:2")]);
    assert_eq!(h.store.event_count(), 1, "e1 forgotten, e2 kept");
    let answers = h.round(vec![service_event("e2", "102", "gcr.io/app:2")]);
    assert_eq!(answers, vec![Ok(vec![EventResult::Duplicate])]);
}

#[test]
fn an_idle_shard_wakes_for_its_silence_read_back_not_only_at_its_heartbeat() {
    let shard = drift_core::config::ShardConfig {
        name: "east".into(),
        set: true,
        silence_sync_interval: Duration::from_millis(500),
        ..Default::default()
    };
    let mut h = harness_in(shard);
    h.round(Vec::new());
    // Read back and heartbeat at START: the next read-back is due first.
    assert_eq!(h.writer.wake_at(), START + 500);
    // Without a shard the writer waits for its heartbeat (5 s).
    let mut alone = harness();
    alone.round(Vec::new());
    assert_eq!(alone.writer.wake_at(), START + 5_000);
}

/// Issue 27: after a reload, the live objects are judged again a slice per round, not all in
/// the round that takes the new rules: an event that arrives meanwhile is answered while most of
/// them still wait, and the health `/readyz` reads says how far the re-judge is until it is done.
#[test]
fn after_a_reload_the_live_objects_are_judged_again_in_slices_between_rounds() {
    let mut harness = harness();
    let services: Vec<Vec<Decoded>> = (0..5)
        .map(|index| {
            service_event_with(&format!("e{index}"), "100", "a:1", |object| {
                object["metadata"]["name"] = serde_json::json!(format!("shop-{index}"));
                object["metadata"]["uid"] = serde_json::json!(format!("uid-{index}"));
            })
        })
        .collect();
    for answer in harness.round(services) {
        assert!(answer.is_ok(), "{answer:?}");
    }
    assert_eq!(harness.health.rejudging(), None);
    // One object per round: the slice ends after the first object.
    harness.writer.rejudge_slice = Duration::ZERO;
    harness.writer.set_rules(Arc::new(Rules::default()));
    let rejudging = |done, total| {
        Some(crate::pipeline::Rejudging {
            cause: "reload",
            done,
            total,
        })
    };
    assert_eq!(harness.health.rejudging(), rejudging(0, 5));
    // An event during the re-judge is answered with one object judged again, four waiting.
    let during = service_event_with("during", "101", "a:2", |object| {
        object["metadata"]["name"] = serde_json::json!("arrived-during");
        object["metadata"]["uid"] = serde_json::json!("uid-during");
    });
    let answers = harness.round(vec![during]);
    assert!(answers[0].is_ok(), "{answers:?}");
    assert_eq!(harness.health.rejudging(), rejudging(1, 5));
    // The rest, one per round, in rounds of no work.
    let mut rounds = 0;
    while harness.health.rejudging().is_some() {
        harness.round(Vec::new());
        rounds += 1;
        assert!(rounds <= 4, "{:?}", harness.health.rejudging());
    }
    assert_eq!(rounds, 4);
}

/// Issue 27: at start the stored live objects are judged again the same way, and the health
/// says the re-judge is the start's from the writer's first moment.
#[test]
fn at_start_the_stored_objects_are_judged_again_in_slices_and_the_health_says_start() {
    let mut first = harness();
    let services: Vec<Vec<Decoded>> = (0..3)
        .map(|index| {
            service_event_with(&format!("s{index}"), "100", "a:1", |object| {
                object["metadata"]["name"] = serde_json::json!(format!("shop-{index}"));
                object["metadata"]["uid"] = serde_json::json!(format!("uid-{index}"));
            })
        })
        .collect();
    for answer in first.round(services) {
        assert!(answer.is_ok(), "{answer:?}");
    }
    // A restart: the engine restored from the store, as `Pipeline::start` does.
    let (store, engine) = restored(&first.store, Arc::new(Rules::default()));
    let health = Arc::new(Health::default());
    let mut restarted = Harness {
        writer: Writer::new(
            engine,
            store,
            Arc::new(move || START),
            Arc::new(Metrics::new()),
            Arc::clone(&health),
            first.writer.settings.clone(),
            Silences::default(),
            crate::pipeline::fleet_view::Publisher::new(crate::pipeline::fleet_view::Shared::new(
                Vec::new(),
            )),
        ),
        store: first.store.clone(),
        health,
        now: Arc::new(AtomicI64::new(START)),
        outbox_notify: Arc::clone(&first.outbox_notify),
    };
    let rejudging = |done, total| {
        Some(crate::pipeline::Rejudging {
            cause: "start",
            done,
            total,
        })
    };
    assert_eq!(restarted.health.rejudging(), rejudging(0, 3));
    restarted.writer.rejudge_slice = Duration::ZERO;
    let answers = restarted.round(vec![service_event("after-start", "101", "a:2")]);
    assert!(answers[0].is_ok(), "{answers:?}");
    assert_eq!(restarted.health.rejudging(), rejudging(1, 3));
    restarted.round(Vec::new());
    restarted.round(Vec::new());
    assert_eq!(restarted.health.rejudging(), None);
}

/// Issue 27 (re-review): expired API silences were never removed, in memory or in the store,
/// so short ones piled up without bound (the cap counts active ones) and a shard's read-back
/// of all of them every few seconds grew without bound. A round that adds one removes them.
#[test]
fn expired_silences_are_removed_when_one_is_added() {
    let mut h = harness();
    let silence = |name: &str, expires_at: Option<String>| drift_model::Silence {
        matchers: [("name".to_string(), name.to_string())].into(),
        expires_at,
        comment: None,
    };
    let soon = chrono::DateTime::from_timestamp_millis(START + 1_000)
        .unwrap()
        .to_rfc3339();
    let add = |h: &mut Harness, silences: Vec<drift_model::Silence>| {
        let mut work = Work::default();
        let mut answers = Vec::new();
        for silence in silences {
            let (reply, answer) = oneshot::channel();
            work.silences
                .push((crate::pipeline::SilenceRequest::Add(silence), reply));
            answers.push(answer);
        }
        h.writer.round(work);
        for mut answer in answers {
            assert!(matches!(answer.try_recv(), Ok(Ok(_))));
        }
    };
    add(
        &mut h,
        (0..5)
            .map(|index| silence(&format!("short-{index}"), Some(soon.clone())))
            .chain([silence("lasting", None)])
            .collect(),
    );
    let stored = |h: &Harness| {
        let mut store: Box<dyn drift_store::Store> = Box::new(h.store.clone());
        let mut names: Vec<String> = store
            .silences()
            .unwrap()
            .into_iter()
            .map(|stored| stored.silence.matchers["name"].clone())
            .collect();
        names.sort();
        names
    };
    assert_eq!(stored(&h).len(), 6);
    h.advance(Duration::from_secs(2));
    add(&mut h, vec![silence("new", None)]);
    assert_eq!(stored(&h), ["lasting", "new"]);
    assert_eq!(
        h.writer.silences.expired(START + 2_000),
        Vec::<String>::new()
    );
    assert!(h.writer.silences.contains(&{
        let mut store: Box<dyn drift_store::Store> = Box::new(h.store.clone());
        store.silences().unwrap()[0].id.clone()
    }));
}

/// The derived Knative Certificate (`tests/fixtures/knative/derived/certificate-ready.yaml`)
/// with `status.notAfter` at `not_after`, as one event.
fn certificate_event(id: &str, resource_version: &str, not_after: i64) -> Vec<Decoded> {
    certificate_event_with(id, resource_version, not_after, |_| {})
}

/// [`certificate_event`], with the CloudEvent changed by `edit` (another type; another name,
/// namespace or uid of its object).
fn certificate_event_with(
    id: &str,
    resource_version: &str,
    not_after: i64,
    edit: impl FnOnce(&mut serde_json::Value),
) -> Vec<Decoded> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/knative/derived/certificate-ready.yaml"
    ))
    .expect("fixture");
    let mut object: serde_json::Value = serde_saphyr::from_str(&text).expect("fixture parses");
    object["metadata"]["resourceVersion"] = serde_json::json!(resource_version);
    object["status"]["notAfter"] = serde_json::json!(drift_model::time::format_time(not_after));
    let mut body = serde_json::json!({
        "specversion": "1.0", "id": id, "source": "https://10.96.0.1:443",
        "type": "dev.knative.apiserver.resource.update", "datacontenttype": "application/json",
        "data": object,
    });
    edit(&mut body);
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/cloudevents+json"),
    );
    let clusters = ClusterNames {
        default: "test".into(),
        by_source: Default::default(),
    };
    decode_request(&headers, body.to_string().as_bytes(), &clusters).expect("decodes")
}

/// Issue 32: a certificate nearing its `notAfter` is judged on the writer's clock with no event:
/// the writer's timers come due at the thresholds, the warning and then the critical
/// escalation are committed with their notifications, and the renewal resolves it.
#[test]
fn a_certificate_warns_and_escalates_on_the_writers_clock_with_no_event() {
    let mut h = harness();
    const DAY: i64 = 86_400_000;
    let not_after = START + 20 * DAY;
    h.round(vec![certificate_event("c-1", "100", not_after)]);
    let firing = |h: &Harness| -> Vec<String> {
        let mut store = h.store.clone();
        let mut rows: Vec<String> = drift_store::Outbox::rows(&mut store, None, 100)
            .unwrap()
            .into_iter()
            .filter(|row| row.queued.notice.drift.class == "certificate_expiring")
            .map(|row| row.queued.notice.drift.severity.as_str().to_string())
            .collect();
        rows.sort();
        rows
    };
    assert!(firing(&h).is_empty());
    // Not due before notAfter - 14d.
    h.advance(Duration::from_secs(6 * 86_400 - 60));
    assert!(!h.writer.timers_due(START + 6 * DAY - 60_000));
    h.advance(Duration::from_secs(60 + 3600));
    let now = START + 6 * DAY + 3_600_000;
    assert!(h.writer.timers_due(now), "notAfter - warnBefore passed");
    h.round(Vec::new());
    assert_eq!(firing(&h), ["warning"]);
    // Two days left: critical, sent again.
    h.advance(Duration::from_secs(12 * 86_400));
    assert!(h.writer.timers_due(now + 12 * DAY));
    h.round(Vec::new());
    assert_eq!(firing(&h), ["critical", "warning"]);
    // Renewed: resolved, the drift row and the resolve queued (the log channel's route sends
    // resolves).
    h.round(vec![certificate_event("c-2", "101", not_after + 90 * DAY)]);
    assert!(h.writer.engine.open_drifts().next().is_none());
    let mut store = h.store.clone();
    let resolved: Vec<drift_store::OutboxRow> = drift_store::Outbox::rows(&mut store, None, 100)
        .unwrap()
        .into_iter()
        .filter(|row| {
            row.queued.notice.drift.class == "certificate_expiring"
                && row.queued.kind() == drift_model::NoticeKind::Resolved
        })
        .collect();
    assert_eq!(resolved.len(), 1, "one resolve queued");
    let drift = &resolved[0].queued.notice.drift;
    assert_eq!(drift.state, drift_model::DriftState::Resolved);
    assert!(
        drift
            .resolution
            .as_deref()
            .is_some_and(|reason| reason.starts_with("expires ")),
        "{:?}",
        drift.resolution
    );
    assert_eq!(
        drift_store::Outbox::drift_state(&mut store, &drift.id).unwrap(),
        Some(drift_model::DriftState::Resolved)
    );
    assert!(!h.writer.timers_due(now + 12 * DAY));
}

#[test]
fn the_relays_are_woken_only_for_rows_due_before_their_own_next_look() {
    const DAY: i64 = 86_400_000;
    // groupWait 0s: due at once, the relays are woken. 10s: after the relays' own next look
    // (every 2 s at most), which finds it in time; no wake.
    for (wait, woken) in [("0s", true), ("10s", false)] {
        let route: drift_core::config::RouteConfig =
            serde_json::from_value(serde_json::json!({"channels": ["log"], "groupWait": wait}))
                .unwrap();
        let mut h = harness_routed(
            Default::default(),
            drift_core::config::router(&[route], &[drift_core::config::ChannelConfig::log("log")]),
        );
        h.round(vec![certificate_event("c-1", "100", START + 5 * DAY)]);
        let mut store = h.store.clone();
        let queued = drift_store::Outbox::rows(&mut store, None, 100).unwrap();
        assert_eq!(
            queued.len(),
            1,
            "groupWait {wait}: the certificate's warning is queued"
        );
        let notified = h.outbox_notify.notified();
        tokio::pin!(notified);
        assert_eq!(notified.as_mut().enable(), woken, "groupWait {wait}");
    }
}

#[test]
fn a_failed_commit_takes_back_the_times_it_gave_its_notifications() {
    const DAY: i64 = 86_400_000;
    let route: drift_core::config::RouteConfig = serde_json::from_value(
        serde_json::json!({"channels": ["log"], "groupWait": "0s", "groupInterval": "1m"}),
    )
    .unwrap();
    let mut h = harness_routed(
        Default::default(),
        drift_core::config::router(&[route], &[drift_core::config::ChannelConfig::log("log")]),
    );
    h.store.set_failing(true);
    let answers = h.round(vec![certificate_event("c-1", "100", START + 5 * DAY)]);
    assert!(matches!(answers[..], [Err(Error::Store(_))]), "{answers:?}");
    // Sent again once the store is back: still its group's first message, due at once, not a
    // minute after a message that was never committed.
    h.store.set_failing(false);
    h.advance(Duration::from_secs(5));
    let answers = h.round(vec![certificate_event("c-1", "100", START + 5 * DAY)]);
    assert!(matches!(answers[..], [Ok(_)]), "{answers:?}");
    let mut store = h.store.clone();
    let due: Vec<i64> = drift_store::Outbox::rows(&mut store, None, 100)
        .unwrap()
        .into_iter()
        .map(|row| row.queued.not_before)
        .collect();
    assert_eq!(due, [START + 5_000]);
}

#[test]
fn a_drift_that_fires_and_escalates_in_one_round_is_told_as_it_ended_the_round() {
    const DAY: i64 = 86_400_000;
    let mut h = harness();
    // Two events of one certificate in one round: the first fires its warning (5 days left),
    // the second escalates it (1 day left).
    h.round(vec![
        certificate_event("c-1", "100", START + 5 * DAY),
        certificate_event("c-2", "101", START + DAY),
    ]);
    let mut store = h.store.clone();
    let rows: Vec<drift_store::OutboxRow> = drift_store::Outbox::rows(&mut store, None, 100)
        .unwrap()
        .into_iter()
        .filter(|row| row.queued.notice.drift.class == "certificate_expiring")
        .collect();
    // Told once, at critical, as a first fire (one id for both moves had kept only the warning).
    let told: Vec<_> = rows
        .iter()
        .map(|row| {
            (
                row.queued.notice.drift.severity.as_str(),
                row.queued.notice.is_escalation(),
            )
        })
        .collect();
    assert_eq!(told, [("critical", false)]);
}
