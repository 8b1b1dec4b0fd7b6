//! The test store's faults: each does what the tests that use it rely on.

use super::*;

fn key(id: &str) -> EventKey {
    EventKey {
        sent_at: 1,
        source: "s".into(),
        id: id.into(),
    }
}

fn event(id: &str) -> Batch {
    Batch {
        events: vec![(key(id), 1)],
        ..Batch::default()
    }
}

#[test]
fn a_failing_store_fails_every_role_until_told_otherwise() {
    let store = TestStore::new();
    store.set_failing(true);
    let error = store.clone().commit(&event("1")).unwrap_err();
    assert_eq!(error.kind(), "unavailable");
    assert!(store.clone().due("hook", 1, 10, "me").is_err());
    assert!(AuditRead::drifts(&store, &DriftFilter::default()).is_err());
    assert_eq!(store.event_count(), 0);
    store.set_failing(false);
    store.clone().commit(&event("1")).unwrap();
    assert_eq!((store.event_count(), store.commit_count()), (1, 1));
}

#[test]
fn a_lost_answer_is_unknown_whether_the_commit_landed_or_not() {
    let store = TestStore::new();
    store.set_lost_commit_answers(Some(false));
    let error = store.clone().commit(&event("1")).unwrap_err();
    assert_eq!(error.kind(), "commit_unknown");
    assert_eq!((store.event_count(), store.commit_count()), (0, 0));
    store.set_lost_commit_answers(Some(true));
    let error = store.clone().commit(&event("1")).unwrap_err();
    assert_eq!(error.kind(), "commit_unknown");
    assert_eq!((store.event_count(), store.commit_count()), (1, 1));
    store.set_lost_commit_answers(None);
    assert!(store.clone().is_duplicate(&key("1")).unwrap());
}

#[test]
fn commits_wait_while_blocked_and_from_the_nth_on() {
    let store = TestStore::new();
    store.set_block_at(Some(1));
    store.clone().commit(&event("1")).unwrap();
    let mut writer = store.clone();
    let second = std::thread::spawn(move || writer.commit(&event("2")));
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(store.commit_count(), 1, "the second commit waits");
    // Reads go on meanwhile.
    assert_eq!(store.event_count(), 1);
    store.set_blocked(true);
    store.set_block_at(None);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(store.commit_count(), 1, "still blocked");
    store.set_blocked(false);
    second.join().unwrap().unwrap();
    assert_eq!(store.commit_count(), 2);
    assert_eq!(store.drifts(), Vec::<Drift>::new());
    assert!(store.objects().is_empty());
}
