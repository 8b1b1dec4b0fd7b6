//! The SQLite store's own behaviour: audit retention forgets only what it should, the
//! background checkpoints copy the log into the database file, and the writer finishes a
//! checkpoint when asked so that the log starts over.

use super::*;
use drift_model::{Drift, DriftState, Evidence, OwnerChain, Severity, Transition};

fn drift(id: &str, state: DriftState, resolved_at: Option<Millis>) -> Drift {
    Drift {
        id: id.into(),
        class: "not_ready".into(),
        rule: None,
        severity: Severity::Critical,
        state,
        cluster: "c".into(),
        uid: format!("uid-{id}"),
        api_version: "serving.knative.dev/v1".into(),
        kind: "Revision".into(),
        namespace: "n".into(),
        name: id.into(),
        labels: Default::default(),
        owner: OwnerChain::default(),
        evidence: Evidence::default(),
        since: 0,
        fire_at: 0,
        fired_at: Some(0),
        resolved_at,
        resolution: None,
    }
}

/// Counts rows of a table.
fn count(store: &SqliteStore, table: &str) -> i64 {
    let allowed = [
        "events",
        "objects",
        "drifts",
        "drift_history",
        "outbox",
        "delivery_attempts",
    ];
    assert!(allowed.contains(&table), "unknown table {table}");
    store
        .connection
        .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
            row.get(0)
        })
        .unwrap()
}

#[test]
fn audit_retention_forgets_only_old_resolved_drifts() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let drifts = vec![
        drift("old", DriftState::Resolved, Some(1_000)),
        drift("recent", DriftState::Resolved, Some(9_000)),
        drift("open", DriftState::Firing, None),
    ];
    let transitions = drifts
        .iter()
        .map(|drift| Transition {
            drift: drift.clone(),
            from: Some(DriftState::Firing),
            at: 500,
        })
        .collect();
    store
        .commit(&Batch {
            drifts,
            history: transitions,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(count(&store, "drift_history"), 3);
    store.prune_audit(5_000).unwrap();
    assert_eq!(count(&store, "drifts"), 2);
    assert_eq!(count(&store, "drift_history"), 2);
    let ids: Vec<String> = store
        .connection
        .prepare("SELECT id FROM drifts ORDER BY id")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ids, ["open", "recent"]);
}

/// The relay's per-message questions and the writer's withdrawal of reminders are answered from
/// the drift's pending rows alone (schema version 3), not by reading every row the drift ever had.
#[test]
fn questions_about_a_drifts_pending_rows_use_the_pending_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    for query in [
        &queries::CANCEL_REMINDERS,
        &queries::FIRING_PENDING_BEFORE,
        &queries::CHANNEL_REMINDER_PENDING,
        &queries::CANCEL_CHANNEL_REMINDERS,
    ] {
        let text = query.text(SQL);
        let mut statement = store
            .connection
            .prepare(&format!("EXPLAIN QUERY PLAN {text}"))
            .unwrap();
        let parameters = statement.parameter_count();
        let values: Vec<rusqlite::types::Value> = (0..parameters)
            .map(|_| rusqlite::types::Value::Text("x".into()))
            .collect();
        let plan: Vec<String> = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                row.get::<_, String>(3)
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            plan.iter()
                .any(|step| step.contains("outbox_drift_pending")),
            "{text}: {plan:?}"
        );
    }
}

/// The background checkpointer copies committed pages from the log into the database file
/// while the writer goes on: without it the file would stay as it was until the log reached the
/// writer's own threshold (16,384 pages). Dropping it stops the thread.
#[test]
fn background_checkpoints_copy_the_log_into_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let mut store = SqliteStore::open(&path).unwrap();
    let size = || std::fs::metadata(&path).unwrap().len();
    let drifts: Vec<Drift> = (0..100)
        .map(|index| {
            let mut drift = drift(&format!("d{index}"), DriftState::Firing, None);
            drift.evidence.summary = "x".repeat(2_000);
            drift
        })
        .collect();
    store
        .commit(&Batch {
            drifts,
            ..Default::default()
        })
        .unwrap();
    let before = size();
    let checkpointer = Checkpointer::start(&path, WriterTurn::default()).unwrap();
    // A bound for a loaded machine, not a timing claim: the interval is 50 ms.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while size() < before + 100 * 2_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint: the file is {} bytes, {before} before",
            size()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(checkpointer);
    assert_eq!(count(&store, "drifts"), 100);
}

/// Drifts whose bodies fill about `pages` pages of the log.
fn bulky_drifts(prefix: &str, pages: usize) -> Batch {
    Batch {
        drifts: (0..pages / 2)
            .map(|index| {
                let mut drift = drift(&format!("{prefix}{index}"), DriftState::Firing, None);
                drift.evidence.summary = "x".repeat(8_000);
                drift
            })
            .collect(),
        ..Default::default()
    }
}

/// The frames in the log now, read without touching it: `mxFrame` of the wal-index header, a
/// native-endian 32-bit integer at byte 16 of the `-shm` file (SQLite's file format, "The
/// WAL-Index Format"). The descriptor is never closed, as the checkpointer's: closing it would
/// drop SQLite's locks on that file.
fn log_frames(shm: &std::fs::File) -> i64 {
    use std::os::unix::fs::FileExt;
    let mut header = [0; 4];
    shm.read_exact_at(&mut header, 16).unwrap();
    i64::from(u32::from_ne_bytes(header))
}

/// A pass asks the writer only once the log has grown long, and the writer, asked, finishes the
/// checkpoint so that its next transaction starts the log over. The reader stands in for the
/// writer appending during a background pass: either way the pass cannot copy the whole log.
#[test]
fn a_long_log_starts_over_after_the_writers_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let mut store = SqliteStore::open(&path).unwrap();
    let turn = store.turn.clone();
    let mut background = checkpoint::Passes::open(&path, turn.clone()).unwrap();
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    let shm = std::mem::ManuallyDrop::new(std::fs::File::open(shm).unwrap());

    // A short log: no ask.
    store.commit(&bulky_drifts("short", 64)).unwrap();
    background.pass().unwrap();
    assert!(!turn.take(), "asked with a short log");

    // A long log, half of it behind a reader's snapshot: the pass copies the first half only.
    let half = usize::try_from(checkpoint::WRITER_TURN_PAGES).unwrap() / 2 + 64;
    store.commit(&bulky_drifts("a", half)).unwrap();
    let reader = Connection::open(&path).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let _: i64 = reader
        .query_row("SELECT COUNT(*) FROM drifts", [], |row| row.get(0))
        .unwrap();
    store.commit(&bulky_drifts("b", half)).unwrap();
    background.pass().unwrap();
    reader.execute_batch("COMMIT").unwrap();
    let long = log_frames(&shm);
    assert!(
        long >= checkpoint::WRITER_TURN_PAGES,
        "log of {long} frames"
    );
    assert!(turn.take(), "not asked with a log of {long} frames");

    // Not asked: the writer's commits append to the log.
    store.commit(&bulky_drifts("c", 2)).unwrap();
    store.commit(&bulky_drifts("d", 2)).unwrap();
    let appended = log_frames(&shm);
    assert!(appended > long, "{appended} frames after {long}");

    // Asked: the commit finishes the checkpoint, and the next commit writes the log from its
    // start.
    turn.ask();
    store.commit(&bulky_drifts("e", 2)).unwrap();
    assert!(!turn.take(), "the writer left the ask set");
    store.commit(&bulky_drifts("f", 2)).unwrap();
    let restarted = log_frames(&shm);
    assert!(restarted < 64, "{restarted} frames after the writer's turn");
    assert_eq!(
        count(&store, "drifts"),
        32 + 2 * i64::try_from(half / 2).unwrap() + 4
    );
}

/// A quick pass is followed by the next one an interval after it began; a slow one (a slow or
/// networked disk) by a pause as long as itself, so the database file is never synced back to
/// back.
#[test]
fn a_slow_checkpoint_pass_is_followed_by_a_pause_as_long() {
    use std::time::Duration;
    let began = std::time::Instant::now();
    let interval = checkpoint::CHECKPOINT_INTERVAL;
    assert_eq!(
        checkpoint::after_pass(began, Duration::from_millis(1)),
        began + interval
    );
    assert_eq!(
        checkpoint::after_pass(began, interval / 2),
        began + interval
    );
    for took in [interval, interval * 3, Duration::from_secs(2)] {
        let next = checkpoint::after_pass(began, took);
        assert_eq!(next - (began + took), took, "after a pass of {took:?}");
    }
}

#[test]
fn the_rounds_keys_are_answered_and_their_read_transaction_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let key = |id: &str| EventKey {
        sent_at: 1_796_138_779_211,
        source: "https://10.96.0.1:443".into(),
        id: id.into(),
    };
    let committed = Batch {
        events: vec![(key("a"), 1), (key("c"), 1)],
        ..Batch::default()
    };
    store.commit(&committed).unwrap();
    let keys = [key("a"), key("b"), key("c"), key("d")];
    let seen = store.duplicates(&keys).unwrap();
    let mut ids: Vec<&str> = seen.iter().map(|key| key.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["a", "c"]);
    // The read transaction ended: the connection is back in autocommit, and the next round
    // commits (a transaction left open would refuse the next `BEGIN`).
    assert!(store.connection.is_autocommit());
    let next = Batch {
        events: vec![(key("b"), 2)],
        ..Batch::default()
    };
    store.commit(&next).unwrap();
    assert_eq!(count(&store, "events"), 3);
    assert!(store.duplicates(&[]).unwrap().is_empty());
    assert_eq!(store.duplicates(&keys).unwrap().len(), 3);
}
