//! A deleted object's drifts end when its tombstone is forgotten, six hours on, on the writer's
//! clock: an idle writer wakes for the expiry (no event has to come first), and a tombstone a
//! drift holds does not wake it again and again.

use super::*;
use drift_model::DriftState;

const HOUR: i64 = 3_600_000;

/// The open drifts: `class state`.
fn open(h: &Harness) -> Vec<String> {
    let mut open: Vec<String> = (h.writer.engine.open_drifts())
        .map(|drift| format!("{} {}", drift.class, drift.state.as_str()))
        .collect();
    open.sort();
    open
}

/// The greeter Service added and deleted at START, its `unexpected_delete` fired after its
/// grace (a minute) on the writer's clock.
fn deleted_and_firing() -> Harness {
    let mut h = harness();
    h.round(vec![service_event("e1", "100", "gcr.io/app:1")]);
    h.round(vec![service_event_typed(
        "delete",
        "e2",
        "101",
        "gcr.io/app:1",
        |_| {},
    )]);
    h.advance(Duration::from_secs(61));
    assert!(h.writer.timers_due(START + 61_000));
    h.round(Vec::new());
    assert_eq!(open(&h), ["unexpected_delete firing"]);
    h
}

#[test]
fn an_idle_writer_ends_a_deleted_objects_drifts_when_its_tombstone_expires() {
    let mut h = deleted_and_firing();
    let id = (h.writer.engine.open_drifts().next())
        .map(|drift| drift.id.clone())
        .unwrap();
    // Nothing is due until the tombstone (last seen at START) is past its six hours, at the
    // next whole minute (START is one): the writer sleeps until then.
    let expiry = START + 6 * HOUR + 60_000;
    assert_eq!(h.writer.engine.next_deadline(), Some(expiry));
    assert!(!h.writer.timers_due(expiry - 1));
    h.now.store(expiry, Ordering::SeqCst);
    assert!(h.writer.timers_due(expiry), "the expiry wakes the writer");
    h.round(Vec::new());
    assert!(open(&h).is_empty(), "{:?}", open(&h));
    let mut store = h.store.clone();
    assert_eq!(
        drift_store::Outbox::drift_state(&mut store, &id).unwrap(),
        Some(DriftState::Resolved)
    );
    assert_eq!(
        h.writer.engine.object_count(),
        0,
        "the tombstone is forgotten"
    );
    // Nothing left to wake for.
    assert_eq!(h.writer.engine.next_deadline(), None);
}

#[test]
fn tombstones_of_one_minute_expire_in_one_round() {
    let mut h = harness();
    let named = |name: &'static str| {
        move |object: &mut serde_json::Value| {
            object["metadata"]["name"] = serde_json::json!(name);
            object["metadata"]["uid"] = serde_json::json!(format!("uid-{name}"));
        }
    };
    h.round(vec![
        service_event_with("a1", "100", "gcr.io/app:1", named("one")),
        service_event_with("b1", "101", "gcr.io/app:1", named("two")),
    ]);
    h.round(vec![service_event_typed(
        "delete",
        "a2",
        "102",
        "gcr.io/app:1",
        named("one"),
    )]);
    h.advance(Duration::from_secs(20));
    h.round(vec![service_event_typed(
        "delete",
        "b2",
        "103",
        "gcr.io/app:1",
        named("two"),
    )]);
    // Deleted 20 s apart within one minute: one wake for both.
    let expiry = START + 6 * HOUR + 60_000;
    h.now.store(START + 6 * HOUR, Ordering::SeqCst);
    h.round(Vec::new());
    assert_eq!(
        h.writer.engine.object_count(),
        2,
        "not before their retention"
    );
    assert_eq!(h.writer.engine.next_deadline(), Some(expiry));
    h.now.store(expiry, Ordering::SeqCst);
    h.round(Vec::new());
    assert_eq!(h.writer.engine.object_count(), 0);
    assert!(open(&h).is_empty(), "{:?}", open(&h));
    assert_eq!(h.writer.engine.next_deadline(), None);
}

/// A round that forgets a tombstone and then fails to commit takes the forgetting back with the
/// rest: the expiry is due again at the next round, not only at the next event.
#[test]
fn an_expiry_whose_commit_failed_is_due_again() {
    let mut h = deleted_and_firing();
    let expiry = START + 6 * HOUR + 60_000;
    h.now.store(expiry, Ordering::SeqCst);
    h.store.set_failing(true);
    h.round(Vec::new());
    h.store.set_failing(false);
    assert_eq!(h.writer.engine.object_count(), 1, "rolled back");
    assert_eq!(open(&h), ["unexpected_delete firing"]);
    // After the store's backoff (a second).
    h.now.store(expiry + 2_000, Ordering::SeqCst);
    assert!(
        h.writer.timers_due(expiry + 2_000),
        "{:?}",
        h.writer.engine.next_deadline()
    );
    h.round(Vec::new());
    assert_eq!(h.writer.engine.object_count(), 0);
    assert!(open(&h).is_empty(), "{:?}", open(&h));
}
