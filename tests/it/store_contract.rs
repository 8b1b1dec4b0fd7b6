//! The storage boundary: a store written by the layout before schema versions opens and reads
//! back whole; a store from a newer binary is refused untouched; and the outbox claim contract
//! holds on every backend (two processes never send the same row).

use std::path::Path;

use drift_sentinel::config::StoreConfig;
use drift_sentinel::model::DriftState;
use drift_sentinel::store::memory::MemoryStore;
use drift_sentinel::store::{
    self, Batch, DriftFilter, FollowUp, Lease, NewOutbox, Outbox, OutboxState, Settlement, Store,
};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store/layout-e062af0.db"
);

fn config(path: &Path) -> StoreConfig {
    StoreConfig {
        path: path.to_path_buf(),
        ..StoreConfig::default()
    }
}

fn recorded_version(path: &Path) -> Option<i64> {
    let connection = rusqlite::Connection::open(path).unwrap();
    drift_sentinel::store::sqlite::schema::recorded_version(&connection).unwrap()
}

#[test]
fn a_store_written_before_schema_versions_opens_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    std::fs::copy(FIXTURE, &path).unwrap();
    assert_eq!(
        recorded_version(&path),
        None,
        "the fixture predates versions"
    );

    let mut opened = store::open(&config(&path)).unwrap();
    assert_eq!(
        recorded_version(&path),
        Some(store::sqlite::schema::LATEST),
        "version 1 recognised, migrated and recorded"
    );

    let snapshot = opened.writer.load().unwrap();
    let mut names: Vec<&str> = snapshot.objects.iter().map(|o| o.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["config-autoscaler", "config-deployment"]);
    assert_eq!(snapshot.drifts.len(), 1);
    assert_eq!(snapshot.drifts[0].id, "7352a014a81b2783");
    assert_eq!(snapshot.drifts[0].state, DriftState::Firing);
    assert_eq!(snapshot.silences.len(), 1);
    assert_eq!(
        snapshot.silences[0]
            .silence
            .matchers
            .get("namespace")
            .map(String::as_str),
        Some("team-*")
    );

    let (drifts, _) = opened
        .audit
        .drifts(&DriftFilter {
            limit: 10,
            ..DriftFilter::default()
        })
        .unwrap();
    assert_eq!(drifts.len(), 2);
    let resolved = opened.audit.drift("37ba1d9623d247c7").unwrap().unwrap();
    assert_eq!(resolved.state, DriftState::Resolved);
    assert_eq!(
        resolved.evidence.changes[0].path,
        "/data/registries-skipping-tag-resolving"
    );
    let history = opened.audit.history("37ba1d9623d247c7").unwrap();
    let moves: Vec<(Option<&str>, &str)> = history
        .iter()
        .map(|entry| (entry.from.as_deref(), entry.to.as_str()))
        .collect();
    assert_eq!(
        moves,
        [
            (None, "pending"),
            (Some("pending"), "firing"),
            (Some("firing"), "resolved")
        ]
    );
    let deliveries = opened.audit.deliveries_of("7352a014a81b2783").unwrap();
    assert!(deliveries
        .iter()
        .any(|d| d.channel == "log" && d.kind == "firing" && d.state == "delivered"));

    // The pending deliveries are due, their payloads decode, and they can be claimed.
    let rows = opened
        .outbox
        .due("hook", i64::MAX - 1, 10, "test/hook")
        .unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|row| row.attempts <= 1));
    for row in &rows {
        let notice = drift_sentinel::store::rows::decode_notice(&row.queued.payload).unwrap();
        assert_eq!(notice.drift.id, row.queued.drift_id);
        assert_eq!(notice.drift.class, "config_drift");
    }
    let lease = Lease {
        owner: "test/hook".into(),
        until: i64::MAX,
    };
    let ids: Vec<String> = rows.iter().map(|row| row.queued.id.clone()).collect();
    let held = opened
        .outbox
        .claim(&ids, "m", &lease, i64::MAX - 1)
        .unwrap();
    assert_eq!(held, ids);
    // And the store takes new commits.
    opened.writer.commit(&Batch::default()).unwrap();
}

#[test]
fn a_store_from_a_newer_binary_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    drop(store::open(&config(&path)).unwrap());
    {
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute("UPDATE schema_version SET version = 99", [])
            .unwrap();
        connection
            .execute("CREATE TABLE from_the_future (x INTEGER)", [])
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let error = match store::open(&config(&path)) {
        Ok(_) => panic!("a newer store must be refused"),
        Err(error) => error,
    };
    assert_eq!(error.kind(), "schema");
    let message = error.to_string();
    assert!(
        message.contains("schema version 99") && message.contains("newer than this binary"),
        "{message}"
    );
    assert_eq!(recorded_version(&path), Some(99));
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing written");
}

fn queued(id: &str, channel: &str) -> NewOutbox {
    NewOutbox {
        id: id.into(),
        channel: channel.into(),
        drift_id: format!("drift-{id}"),
        kind: "firing".into(),
        group_key: "g".into(),
        payload: "{}".into(),
        created_at: 1_000,
        not_before: 1_000,
        repeat_after_ms: None,
    }
}

fn settled(ids: &[&str], state: OutboxState, owner: Option<&str>, at: i64) -> Settlement {
    Settlement {
        ids: ids.iter().map(|id| id.to_string()).collect(),
        state,
        next_attempt_at: at + 10_000,
        at,
        detail: format!("{state:?} by {owner:?}"),
        duration_ms: 1,
        attempted: owner.is_some(),
        message_id: Some(ids[0].to_string()),
        owner: owner.map(str::to_string),
    }
}

fn reminder_of(id: &str) -> FollowUp {
    FollowUp {
        of: id.to_string(),
        queued: NewOutbox {
            kind: "repeat".into(),
            ..queued(&format!("{id}-reminder"), "hook")
        },
    }
}

fn ids_in(outbox: &mut dyn Outbox, state: OutboxState) -> Vec<String> {
    let mut ids: Vec<String> = outbox
        .rows(Some(state), 50)
        .unwrap()
        .into_iter()
        .map(|row| row.queued.id)
        .collect();
    ids.sort();
    ids
}

/// The claim contract, for two outbox handles on one store (two processes, A and B).
fn claims_are_exclusive(writer: &mut dyn Store, a: &mut dyn Outbox, b: &mut dyn Outbox) {
    writer
        .commit(&Batch {
            outbox: vec![
                queued("a", "hook"),
                queued("b", "hook"),
                queued("c", "hook"),
            ],
            ..Batch::default()
        })
        .unwrap();
    let (owner_a, owner_b) = ("pod-a/1/x/hook", "pod-b/1/y/hook");
    let lease = |owner: &str, now: i64| Lease {
        owner: owner.into(),
        until: now + 60_000,
    };
    let ids = |list: &[&str]| list.iter().map(|id| id.to_string()).collect::<Vec<_>>();

    // Reading what is due writes nothing; A claims the rows of its message just before sending.
    assert_eq!(a.due("hook", 2_000, 10, owner_a).unwrap().len(), 3);
    assert_eq!(
        a.claim(&ids(&["a", "b"]), "msg-1", &lease(owner_a, 2_000), 2_000)
            .unwrap(),
        ids(&["a", "b"])
    );
    // While A's claim holds, B sees only "c" as due, cannot claim "a" or "b", and waits for the
    // claim to lapse; A itself may claim its rows again.
    let due_b: Vec<String> = b
        .due("hook", 3_000, 10, owner_b)
        .unwrap()
        .into_iter()
        .map(|row| row.queued.id)
        .collect();
    assert_eq!(due_b, ids(&["c"]));
    assert!(b
        .claim(&ids(&["a", "b"]), "msg-2", &lease(owner_b, 3_000), 3_000)
        .unwrap()
        .is_empty());
    assert_eq!(
        a.claim(&ids(&["a"]), "msg-1", &lease(owner_a, 3_000), 3_000)
            .unwrap(),
        ids(&["a"])
    );
    assert_eq!(
        b.claim(&ids(&["c"]), "msg-3", &lease(owner_b, 3_000), 3_000)
            .unwrap(),
        ids(&["c"])
    );
    // For a third relay everything is held: its next look is when the first claim lapses.
    assert_eq!(b.next_due("hook", "pod-d/1/z/hook").unwrap(), Some(62_000));
    // The claim assigned the message: a resend after a crash carries the same idempotency key.
    let row_a = a
        .rows(Some(OutboxState::Pending), 10)
        .unwrap()
        .into_iter()
        .find(|row| row.queued.id == "a")
        .unwrap();
    assert_eq!(row_a.message_id.as_deref(), Some("msg-1"));

    // B cannot settle what A holds: nothing changes and no reminder is queued for it.
    b.settle(
        &settled(&["a", "b"], OutboxState::Delivered, Some(owner_b), 4_000),
        &[reminder_of("a"), reminder_of("b")],
    )
    .unwrap();
    assert_eq!(ids_in(a, OutboxState::Delivered), Vec::<String>::new());
    assert_eq!(ids_in(a, OutboxState::Pending), ids(&["a", "b", "c"]));
    // Nor can a decision taken without a claim: rows held by a live claim are left alone.
    a.settle(&settled(&["c"], OutboxState::Expired, None, 4_000), &[])
        .unwrap();
    assert_eq!(ids_in(a, OutboxState::Expired), Vec::<String>::new());
    // A settles "a" with its reminder.
    a.settle(
        &settled(&["a"], OutboxState::Delivered, Some(owner_a), 4_000),
        &[reminder_of("a")],
    )
    .unwrap();
    assert_eq!(ids_in(a, OutboxState::Delivered), ids(&["a"]));
    assert_eq!(
        ids_in(a, OutboxState::Pending),
        ids(&["a-reminder", "b", "c"])
    );
    assert_eq!(b.claim_owners().unwrap(), vec![owner_a, owner_b]);

    // A stops mid-send: "b" is B's once A's claim lapses (not before: B's next look is then).
    assert_eq!(b.next_due("hook", owner_b).unwrap(), Some(1_000));
    assert!(b
        .claim(&ids(&["b"]), "msg-2", &lease(owner_b, 61_999), 61_999)
        .unwrap()
        .is_empty());
    assert_eq!(
        b.claim(&ids(&["b"]), "msg-2", &lease(owner_b, 62_000), 62_000)
            .unwrap(),
        ids(&["b"])
    );
    // B's attempt fails and is retried later (its claim ends); A's late "delivered" is fenced
    // off: it neither overwrites B's retry nor queues a reminder.
    b.settle(
        &settled(&["b"], OutboxState::Pending, Some(owner_b), 62_500),
        &[],
    )
    .unwrap();
    a.settle(
        &settled(&["b"], OutboxState::Delivered, Some(owner_a), 63_000),
        &[reminder_of("b")],
    )
    .unwrap();
    let row_b = a
        .rows(Some(OutboxState::Pending), 10)
        .unwrap()
        .into_iter()
        .find(|row| row.queued.id == "b")
        .unwrap();
    assert_eq!(row_b.attempts, 1, "only B's attempt counts");
    assert_eq!(row_b.next_attempt_at, 72_500, "B's retry time stands");
    assert_eq!(
        ids_in(a, OutboxState::Pending),
        ids(&["a-reminder", "b", "c"])
    );

    // Releasing ends a process's claims at once.
    assert_eq!(b.release(owner_b).unwrap(), 1, "B still held c");
    assert_eq!(
        a.claim(&ids(&["c"]), "msg-4", &lease(owner_a, 63_000), 63_000)
            .unwrap(),
        ids(&["c"])
    );
    assert_eq!(a.claim_owners().unwrap(), vec![owner_a]);
    // A decision taken without sending (an age cap) lands on a row its relay holds, not on one
    // another relay holds.
    let mut aged = settled(&["c"], OutboxState::Expired, Some(owner_b), 64_000);
    aged.attempted = false;
    b.settle(&aged, &[]).unwrap();
    assert_eq!(ids_in(a, OutboxState::Expired), Vec::<String>::new());
    let mut aged = settled(&["c"], OutboxState::Expired, Some(owner_a), 64_000);
    aged.attempted = false;
    a.settle(&aged, &[]).unwrap();
    assert_eq!(ids_in(a, OutboxState::Expired), ids(&["c"]));
    assert!(a.claim_owners().unwrap().is_empty());
}

#[test]
fn outbox_claims_are_exclusive_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("claims.db");
    let mut one = store::open(&config(&path)).unwrap();
    let mut two = store::open(&config(&path)).unwrap();
    claims_are_exclusive(
        one.writer.as_mut(),
        one.outbox.as_mut(),
        two.outbox.as_mut(),
    );
}

#[test]
fn outbox_claims_are_exclusive_in_memory() {
    let store = MemoryStore::new();
    let mut writer = store.clone();
    let mut first = store.clone();
    let mut second = store.clone();
    claims_are_exclusive(&mut writer, &mut first, &mut second);
}
