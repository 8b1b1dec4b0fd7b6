//! The storage boundary: a store written by the layout before schema versions opens and reads
//! back whole; a store from a newer binary is refused untouched; and the outbox claim contract
//! holds on every backend (two processes never send the same row).

use std::path::Path;

use drift_sentinel::config::StoreConfig;
use drift_sentinel::model::DriftState;
use drift_sentinel::store::memory::MemoryStore;
use drift_sentinel::store::{
    self, Batch, DriftFilter, Lease, NewOutbox, Outbox, OutboxState, Settlement, Store,
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

    // The pending deliveries can still be claimed and settled.
    let lease = Lease {
        owner: "test/hook".into(),
        until: i64::MAX,
    };
    let rows = opened
        .outbox
        .claim("hook", i64::MAX - 1, 10, &lease)
        .unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|row| row.attempts <= 1));
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

fn delivered(ids: &[&str], owner: &str, at: i64) -> Settlement {
    Settlement {
        ids: ids.iter().map(|id| id.to_string()).collect(),
        state: OutboxState::Delivered,
        next_attempt_at: at,
        at,
        detail: format!("delivered by {owner}"),
        duration_ms: 1,
        attempted: true,
        message_id: Some(ids[0].to_string()),
        owner: Some(owner.to_string()),
    }
}

/// The claim contract, for two outbox handles on one store (two processes).
fn claims_are_exclusive(writer: &mut dyn Store, first: &mut dyn Outbox, second: &mut dyn Outbox) {
    writer
        .commit(&Batch {
            outbox: vec![queued("a", "hook"), queued("b", "hook")],
            ..Batch::default()
        })
        .unwrap();
    let lease_a = |now: i64| Lease {
        owner: "pod-a/hook".into(),
        until: now + 60_000,
    };
    let lease_b = |now: i64| Lease {
        owner: "pod-b/hook".into(),
        until: now + 60_000,
    };
    let taken = first.claim("hook", 2_000, 10, &lease_a(2_000)).unwrap();
    assert_eq!(taken.len(), 2);
    // While A's claim holds, B gets nothing; A itself takes its rows again (a new round).
    assert!(second
        .claim("hook", 3_000, 10, &lease_b(3_000))
        .unwrap()
        .is_empty());
    assert_eq!(
        first
            .claim("hook", 3_000, 10, &lease_a(3_000))
            .unwrap()
            .len(),
        2
    );
    // A delivers "a"; B cannot settle what A holds.
    first
        .settle(&delivered(&["a"], "pod-a/hook", 4_000), &[])
        .unwrap();
    second
        .settle(&delivered(&["b"], "pod-b/hook", 4_000), &[])
        .unwrap();
    let pending: Vec<String> = first
        .rows(Some(OutboxState::Pending), 10)
        .unwrap()
        .into_iter()
        .map(|row| row.queued.id)
        .collect();
    assert_eq!(pending, ["b"]);
    // A stops; once its claim lapses, B takes "b" over and A's late settlement is fenced off.
    assert!(second
        .claim("hook", 62_999, 10, &lease_b(62_999))
        .unwrap()
        .is_empty());
    let over = second.claim("hook", 63_000, 10, &lease_b(63_000)).unwrap();
    assert_eq!(over.len(), 1);
    assert_eq!(over[0].queued.id, "b");
    let mut late = delivered(&["b"], "pod-a/hook", 63_500);
    late.detail = "late".into();
    first.settle(&late, &[]).unwrap();
    assert_eq!(first.rows(Some(OutboxState::Pending), 10).unwrap().len(), 1);
    second
        .settle(&delivered(&["b"], "pod-b/hook", 64_000), &[])
        .unwrap();
    let done = first.rows(Some(OutboxState::Delivered), 10).unwrap();
    assert_eq!(done.len(), 2);
    assert!(done
        .iter()
        .all(|row| row.last_error.is_none() && row.state == OutboxState::Delivered));
    assert!(first
        .claim("hook", 70_000, 10, &lease_a(70_000))
        .unwrap()
        .is_empty());
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
