//! The storage boundary: a store written by the layout before schema versions opens and reads
//! back whole; a store from a newer binary is refused untouched; the outbox claim contract
//! holds on every backend (two processes never send the same row); and every backend answers
//! the audit queries alike (filters, the API group filter, the overview's counts).
//!
//! The contract tests run on every backend: SQLite, PostgreSQL (a database of the test run's
//! server, `pg.rs`) and, where it takes part, the test store (`drift_store::testing`: SQLite with
//! the faults the router tests inject, through one handle for every role). A test that passes
//! on one and fails on another is a bug in one of them.

use std::path::Path;

use crate::pg::PgServer;

use drift_core::classify::ObjectState;
use drift_core::config::Secret;
use drift_core::config::StoreConfig;
use drift_model::{
    Drift, DriftState, Evidence, Millis, Notice, NoticeKind, OwnerChain, Severity, Transition,
};
use drift_sentinel::app::store_options;
use drift_store as store;
use drift_store::testing::TestStore;
use drift_store::{
    self, AuditRead, Batch, DayMoves, DriftFilter, FiringCount, FollowUp, Lease, NewOutbox, Outbox,
    OutboxState, Settlement, Store, DAY_MILLIS,
};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store/layout-e062af0.db"
);

fn config(path: &Path) -> store::Options {
    store::Options::Sqlite {
        path: path.to_path_buf(),
    }
}

/// Loads the writer's state: the objects decoded as the writer does, and the rest.
fn load(store: &mut dyn Store) -> (Vec<ObjectState>, store::Snapshot) {
    let mut objects = Vec::new();
    let snapshot = store
        .load(&mut |_cluster, body| {
            objects.push(drift_core::classify::stored::decode(body)?);
            Ok(())
        })
        .unwrap();
    (objects, snapshot)
}

/// A database backend under test, with a fresh empty store.
pub(crate) enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres {
        server: &'static PgServer,
        url: String,
    },
}

impl Backend {
    pub(crate) fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().unwrap())
    }

    /// A new database on the test run's server.
    pub(crate) fn postgres() -> Backend {
        let server = PgServer::shared();
        let url = server.database();
        Backend::Postgres { server, url }
    }

    /// Every database backend.
    pub(crate) fn all() -> [Backend; 2] {
        [Backend::sqlite(), Backend::postgres()]
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres { .. } => "postgres",
        }
    }

    pub(crate) fn config(&self) -> store::Options {
        match self {
            Backend::Sqlite(dir) => config(&dir.path().join("store.db")),
            Backend::Postgres { url, .. } => store::Options::Postgres {
                url: url.clone(),
                password: None,
                ca_file: None,
            },
        }
    }

    /// Opens the store (again: each call is another set of connections, like another process).
    pub(crate) fn open(&self) -> store::Opened {
        store::open(&self.config())
            .unwrap_or_else(|error| panic!("opening the {} store: {error}", self.name()))
    }

    /// Runs SQL outside the store (tests that tamper with it); returns what it prints.
    fn execute(&self, sql: &str) -> String {
        match self {
            Backend::Sqlite(dir) => {
                let connection = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
                connection.execute_batch(sql).unwrap();
                String::new()
            }
            Backend::Postgres { server, url } => server.psql(PgServer::name_of(url), sql),
        }
    }

    /// Opens the store and checks that opening migrated it to the latest version.
    fn open_migrated(&self) -> store::Opened {
        let opened = self.open();
        assert_eq!(
            self.version(),
            Some(store::sqlite::schema::LATEST),
            "{}",
            self.name()
        );
        opened
    }

    /// The schema version recorded in the store.
    fn version(&self) -> Option<i64> {
        match self {
            Backend::Sqlite(dir) => recorded_version(&dir.path().join("store.db")),
            Backend::Postgres { server, url } => {
                let text = server.psql(
                    PgServer::name_of(url),
                    "SELECT version FROM schema_version WHERE id = 1",
                );
                text.parse().ok()
            }
        }
    }
}

fn recorded_version(path: &Path) -> Option<i64> {
    let connection = rusqlite::Connection::open(path).unwrap();
    drift_store::sqlite::schema::recorded_version(&connection).unwrap()
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

    let (objects, snapshot) = load(opened.writer.as_mut());
    let mut names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["config-autoscaler", "config-deployment"]);
    // Version 4 moved the objects into a rowid table (a `WITHOUT ROWID` table has no `rowid`
    // column to select), every row with them, and the key stays unique.
    {
        let connection = rusqlite::Connection::open(&path).unwrap();
        let by_rowid: i64 = connection
            .query_row("SELECT count(rowid) FROM objects", [], |row| row.get(0))
            .unwrap();
        assert_eq!(by_rowid, 2);
        let again = connection.execute(
            "INSERT INTO objects (cluster, uid, kind, namespace, name, body)
             SELECT cluster, uid, kind, namespace, name, body FROM objects LIMIT 1",
            [],
        );
        assert!(again.is_err(), "(cluster, uid) is still the key");
    }
    // Version 6 keyed the events by send time; the fixture's keys came through with none, so a
    // redelivery of them, whatever its time, is still a duplicate.
    let key = |id: &str| store::EventKey {
        sent_at: 1_796_138_779_000,
        source: "https://10.96.0.1:443".into(),
        id: id.into(),
    };
    assert!(opened.writer.is_duplicate(&key("e7")).unwrap());
    assert!(!opened.writer.is_duplicate(&key("e8")).unwrap());
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
    // Version 2 filled in the drifts' API group from their bodies: both are ConfigMaps.
    let of_groups = |groups: &[&str]| {
        opened
            .audit
            .drifts(&DriftFilter {
                groups: Some(groups.iter().map(|group| group.to_string()).collect()),
                limit: 10,
                ..DriftFilter::default()
            })
            .unwrap()
            .0
            .len()
    };
    assert_eq!(of_groups(&[""]), 2);
    assert_eq!(of_groups(&["serving.knative.dev", "apps"]), 0);
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
    let due = opened
        .outbox
        .due("hook", i64::MAX - 1, 10, "test/hook")
        .unwrap();
    assert!(due.unreadable.is_empty(), "{:?}", due.unreadable);
    let rows = due.rows;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|row| row.attempts <= 1));
    for row in &rows {
        let notice = &row.queued.notice;
        assert_eq!(notice.drift.id, row.queued.drift_id);
        assert_eq!(notice.drift.class, "config_drift");
        assert_eq!(row.queued.kind(), notice.kind);
    }
    let lease = Lease {
        owner: "test/hook".into(),
        until: i64::MAX,
    };
    // Each row is claimed as a relay claims it: those already sent, as the message they went
    // out in (the resend keeps its idempotency key); one never sent, for a new message.
    for row in &rows {
        let id = [row.queued.id.clone()];
        let message = row.message_id.as_deref().unwrap_or("m");
        let held = opened
            .outbox
            .claim(&id, message, &lease, i64::MAX - 1)
            .unwrap();
        assert_eq!(held, id);
    }
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

#[test]
fn a_postgres_store_from_a_newer_binary_is_refused_untouched() {
    let backend = Backend::postgres();
    drop(backend.open());
    // A newer binary's layout: version 99, a table of its own, a column dropped.
    backend.execute(
        "UPDATE schema_version SET version = 99; CREATE TABLE from_the_future (x BIGINT);
         ALTER TABLE drifts DROP COLUMN api_group;",
    );
    let layout =
        "SELECT string_agg(table_name || '.' || column_name, ',' ORDER BY table_name, column_name)
                  FROM information_schema.columns WHERE table_schema = 'public'";
    let before = backend.execute(layout);
    let error = match store::open(&backend.config()) {
        Ok(_) => panic!("a newer store must be refused"),
        Err(error) => error,
    };
    assert_eq!(error.kind(), "schema");
    assert!(error.to_string().contains("schema version 99"), "{error}");
    assert_eq!(backend.version(), Some(99));
    assert_eq!(backend.execute(layout), before, "nothing written");
}

/// A firing notification of drift `drift-{id}` on `channel`, queued at 1,000.
fn queued(id: &str, channel: &str) -> NewOutbox {
    let drift = format!("drift-{id}");
    NewOutbox {
        id: id.into(),
        channel: channel.into(),
        drift_id: drift.clone(),
        group_key: "g".into(),
        notice: Notice {
            kind: NoticeKind::Firing,
            drift: drift_of(
                &drift,
                "v1",
                "ns",
                Severity::Warning,
                1_000,
                Some(1_000),
                None,
            ),
            at: 1_000,
            resend: 0,
            remediation: None,
        },
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
    let mut queued = queued(&format!("{id}-reminder"), "hook");
    queued.notice.kind = NoticeKind::Repeat;
    FollowUp {
        of: id.to_string(),
        queued,
    }
}

fn ids_in(outbox: &mut dyn Outbox, state: OutboxState) -> Vec<String> {
    sorted_ids(outbox.rows(Some(state), 50).unwrap())
}

/// The rows' ids, sorted.
fn sorted_ids(rows: Vec<store::OutboxRow>) -> Vec<String> {
    let mut ids: Vec<String> = rows.into_iter().map(|row| row.queued.id).collect();
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
    assert_eq!(a.due("hook", 2_000, 10, owner_a).unwrap().rows.len(), 3);
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
        .rows
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

    // A stops mid-send: "b" is B's once A's claim lapses (not before: B's next look is then),
    // as the message A sent it in: under another message it is not B's to claim (it went out,
    // or may have, as msg-1: the resend keeps that idempotency key).
    assert_eq!(b.next_due("hook", owner_b).unwrap(), Some(1_000));
    assert!(b
        .claim(&ids(&["b"]), "msg-1", &lease(owner_b, 61_999), 61_999)
        .unwrap()
        .is_empty());
    assert!(b
        .claim(&ids(&["b"]), "msg-2", &lease(owner_b, 62_000), 62_000)
        .unwrap()
        .is_empty());
    assert_eq!(
        b.claim(&ids(&["b"]), "msg-1", &lease(owner_b, 62_000), 62_000)
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
        a.claim(&ids(&["c"]), "msg-3", &lease(owner_a, 63_000), 63_000)
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
fn outbox_claims_are_exclusive_on_every_database() {
    for backend in Backend::all() {
        let mut one = backend.open();
        let mut two = backend.open();
        claims_are_exclusive(
            one.writer.as_mut(),
            one.outbox.as_mut(),
            two.outbox.as_mut(),
        );
    }
}

#[test]
fn outbox_claims_are_exclusive_on_the_test_store() {
    let store = TestStore::new();
    let mut writer = store.clone();
    let mut first = store.clone();
    let mut second = store.clone();
    claims_are_exclusive(&mut writer, &mut first, &mut second);
}

/// A drift of `api_version` in `namespace`, since `since`; `fired`/`resolved`: when.
fn drift_of(
    id: &str,
    api_version: &str,
    namespace: &str,
    severity: Severity,
    since: Millis,
    fired: Option<Millis>,
    resolved: Option<Millis>,
) -> Drift {
    let state = match (fired, resolved) {
        (_, Some(_)) => DriftState::Resolved,
        (Some(_), None) => DriftState::Firing,
        (None, None) => DriftState::Pending,
    };
    Drift {
        id: id.into(),
        class: "not_ready".into(),
        rule: None,
        severity,
        state,
        cluster: "prod".into(),
        uid: format!("uid-{id}"),
        api_version: api_version.into(),
        kind: "Thing".into(),
        namespace: namespace.into(),
        name: id.into(),
        labels: Default::default(),
        owner: OwnerChain::default(),
        evidence: Evidence {
            summary: format!("{id} is not ready"),
            ..Evidence::default()
        },
        since,
        fire_at: since,
        fired_at: fired,
        resolved_at: resolved,
        resolution: resolved.map(|_| "cleared".to_string()),
    }
}

/// Drifts of every family and state, with their moves over several days (day 0 starts at
/// `DAY_MILLIS * 100`).
fn audit_batch() -> Batch {
    let day = |n: i64, hour: i64| DAY_MILLIS * (100 + n) + hour * 3_600_000;
    let drifts = vec![
        // Eventing: a Trigger firing, a Subscription that fired and resolved, a pending Source.
        drift_of(
            "trigger",
            "eventing.knative.dev/v1",
            "payments",
            Severity::Critical,
            day(0, 1),
            Some(day(0, 2)),
            None,
        ),
        drift_of(
            "subscription",
            "messaging.knative.dev/v1",
            "payments",
            Severity::Critical,
            day(1, 1),
            Some(day(1, 3)),
            Some(day(2, 5)),
        ),
        drift_of(
            "pingsource",
            "sources.knative.dev/v1",
            "cron",
            Severity::Warning,
            day(3, 1),
            None,
            None,
        ),
        // Serving: a Service firing, a Route resolved before it fired.
        drift_of(
            "service",
            "serving.knative.dev/v1",
            "shop",
            Severity::Warning,
            day(2, 1),
            Some(day(2, 2)),
            None,
        ),
        drift_of(
            "route",
            "serving.knative.dev/v1",
            "shop",
            Severity::Warning,
            day(2, 3),
            None,
            Some(day(2, 4)),
        ),
        // Networking, Operator (cluster-scoped name space left empty), Kubernetes core and apps,
        // and a group of no family.
        drift_of(
            "kingress",
            "networking.internal.knative.dev/v1alpha1",
            "shop",
            Severity::Critical,
            day(3, 0),
            Some(day(3, 1)),
            None,
        ),
        drift_of(
            "serving-cr",
            "operator.knative.dev/v1beta1",
            "",
            Severity::Info,
            day(3, 2),
            Some(day(3, 2)),
            None,
        ),
        drift_of(
            "configmap",
            "v1",
            "knative-serving",
            Severity::Warning,
            day(0, 5),
            Some(day(0, 5)),
            Some(day(3, 6)),
        ),
        drift_of(
            "deployment",
            "apps/v1",
            "shop",
            Severity::Warning,
            day(1, 0),
            Some(day(1, 1)),
            None,
        ),
        drift_of(
            "job",
            "batch/v1",
            "jobs",
            Severity::Info,
            day(4, 0),
            Some(day(4, 0)),
            None,
        ),
    ];
    let mut history = Vec::new();
    for drift in &drifts {
        let mut moved = drift.clone();
        moved.state = DriftState::Pending;
        history.push(Transition {
            drift: moved.clone(),
            from: None,
            at: drift.since,
        });
        if let Some(fired) = drift.fired_at {
            moved.state = DriftState::Firing;
            history.push(Transition {
                drift: moved.clone(),
                from: Some(DriftState::Pending),
                at: fired,
            });
        }
        if let Some(resolved) = drift.resolved_at {
            let from = moved.state;
            moved.state = DriftState::Resolved;
            history.push(Transition {
                drift: moved.clone(),
                from: Some(from),
                at: resolved,
            });
        }
    }
    Batch {
        remediations: audit_attempts(&drifts),
        drifts,
        history,
        ..Batch::default()
    }
}

/// Remediation attempts of [`audit_batch`]'s drifts: a dry run and a refusal on the firing
/// Trigger, a dry run on the Subscription that resolved (which retention forgets with it).
fn audit_attempts(drifts: &[Drift]) -> Vec<drift_model::remediation::Attempt> {
    use drift_model::remediation::{Attempt, Outcome, PlannedRequest};
    let fired = |id: &str| {
        drifts
            .iter()
            .find(|drift| drift.id == id)
            .and_then(|drift| drift.fired_at)
            .unwrap()
    };
    let dry_run = |id: &str| Attempt {
        drift_id: id.into(),
        cluster: "prod".into(),
        object: format!("x/v1/Thing/payments/{id}"),
        fields: vec!["/spec/n".into()],
        at: fired(id),
        mode: "dryRun".into(),
        action: "revert".into(),
        rule: "revert-hand-edits".into(),
        approved_by: None,
        request: Some(PlannedRequest {
            method: "PATCH".into(),
            path: format!("/apis/x/v1/namespaces/payments/things/{id}?fieldManager=drift-sentinel"),
            content_type: "application/merge-patch+json".into(),
            body: r#"{"metadata":{"resourceVersion":"7"},"spec":{"n":"名前 \"quoted\""}}"#.into(),
        }),
        resource_version: Some("7".into()),
        judged: Some("9f86d081884c7d65".into()),
        outcome: Outcome::DryRun,
        status: None,
        resource_version_after: None,
        reason: None,
        detail: None,
    };
    let refused = Attempt {
        at: fired("trigger") + 1,
        request: None,
        outcome: Outcome::Refused,
        reason: Some("budget".into()),
        detail: Some("the budget of 20 actions per 1h is spent".into()),
        ..dry_run("trigger")
    };
    vec![dry_run("trigger"), dry_run("subscription"), refused]
}

/// Everything the audit side answers about [`audit_batch`], and the answers it must give.
fn audit_answers(audit: &dyn AuditRead) -> Vec<String> {
    let ids = |filter: DriftFilter| {
        let (drifts, _) = audit
            .drifts(&DriftFilter {
                limit: 50,
                ..filter
            })
            .unwrap();
        drifts.into_iter().map(|drift| drift.id).collect::<Vec<_>>()
    };
    let groups = |list: &[&str]| Some(list.iter().map(|group| group.to_string()).collect());
    let mut answers = Vec::new();
    let eventing = groups(
        drift_model::group::groups_selected_by("eventing")
            .unwrap()
            .as_slice(),
    );
    let eventing_ids = ids(DriftFilter {
        groups: eventing.clone(),
        ..DriftFilter::default()
    });
    assert_eq!(eventing_ids, ["pingsource", "subscription", "trigger"]);
    answers.push(format!("eventing {eventing_ids:?}"));
    let open_eventing = ids(DriftFilter {
        groups: eventing.clone(),
        state: Some("open".into()),
        ..DriftFilter::default()
    });
    assert_eq!(open_eventing, ["pingsource", "trigger"]);
    answers.push(format!("open eventing {open_eventing:?}"));
    let core = ids(DriftFilter {
        groups: groups(&[""]),
        ..DriftFilter::default()
    });
    assert_eq!(core, ["configmap"]);
    let kubernetes = ids(DriftFilter {
        groups: groups(&["", "apps"]),
        namespace: Some("shop".into()),
        ..DriftFilter::default()
    });
    assert_eq!(kubernetes, ["deployment"]);
    let nothing = ids(DriftFilter {
        groups: groups(&[]),
        ..DriftFilter::default()
    });
    assert_eq!(nothing, Vec::<String>::new());
    let serving_firing = ids(DriftFilter {
        groups: groups(&["serving.knative.dev"]),
        state: Some("firing".into()),
        ..DriftFilter::default()
    });
    assert_eq!(serving_firing, ["service"]);
    answers.push(format!("{core:?} {kubernetes:?} {serving_firing:?}"));
    // Pages of one within a group filter visit each of its drifts once, newest first.
    let mut paged = Vec::new();
    let mut cursor = None;
    loop {
        let (page, next) = audit
            .drifts(&DriftFilter {
                groups: eventing.clone(),
                limit: 1,
                cursor: cursor.clone(),
                ..DriftFilter::default()
            })
            .unwrap();
        paged.extend(page.into_iter().map(|drift| drift.id));
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(paged, eventing_ids);
    let open: Vec<String> = audit
        .open_drifts(eventing.as_deref())
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(open, ["pingsource", "trigger"]);
    let resolved: Vec<String> = audit
        .resolved_since(0, groups(&["messaging.knative.dev", ""]).as_deref())
        .unwrap()
        .into_iter()
        .map(|drift| drift.id)
        .collect();
    assert_eq!(
        resolved,
        ["configmap", "subscription"],
        "latest resolved first; fired first"
    );
    answers.push(format!("open {open:?} resolved {resolved:?}"));
    let counts = audit.firing_counts().unwrap();
    let count = |severity: &str, group: &str, namespace: &str, count: u64| FiringCount {
        severity: severity.into(),
        group: group.into(),
        namespace: namespace.into(),
        count,
    };
    assert_eq!(
        counts,
        [
            count("critical", "eventing.knative.dev", "payments", 1),
            count("critical", "networking.internal.knative.dev", "shop", 1),
            count("info", "batch", "jobs", 1),
            count("info", "operator.knative.dev", "", 1),
            count("warning", "apps", "shop", 1),
            count("warning", "serving.knative.dev", "shop", 1),
        ]
    );
    answers.push(format!("{counts:?}"));
    // Day by day from the day before day 0: fired moves and resolved-after-firing moves (the
    // Route resolved while pending: not counted).
    let start = DAY_MILLIS * 99;
    let days = audit.moves_per_day(start, 7).unwrap();
    let expected: Vec<DayMoves> = [(0, 0), (2, 0), (2, 0), (1, 1), (2, 1), (1, 0), (0, 0)]
        .iter()
        .enumerate()
        .map(|(index, (fired, resolved))| DayMoves {
            start: start + DAY_MILLIS * index as i64,
            fired: *fired,
            resolved: *resolved,
        })
        .collect();
    assert_eq!(days, expected);
    // A window that starts mid-way counts only its own days.
    let later = audit.moves_per_day(DAY_MILLIS * 103, 2).unwrap();
    assert_eq!(
        (later[0].fired, later[0].resolved, later[1].fired),
        (2, 1, 1)
    );
    answers.push(format!("{days:?}"));
    let history: Vec<(Option<String>, String, Millis)> = audit
        .history("subscription")
        .unwrap()
        .into_iter()
        .map(|entry| (entry.from, entry.to, entry.at))
        .collect();
    // Against the batch committed, not only across backends: a shared query wrong the same
    // way on every backend would still fail here.
    let committed = audit_batch();
    let moves: Vec<(Option<String>, String, Millis)> = committed
        .history
        .iter()
        .filter(|transition| transition.drift.id == "subscription")
        .map(|transition| {
            (
                transition.from.map(|state| state.as_str().to_string()),
                transition.drift.state.as_str().to_string(),
                transition.at,
            )
        })
        .collect();
    assert!(moves.len() >= 2, "the batch moves the subscription");
    assert_eq!(history, moves);
    answers.push(format!("{history:?}"));
    let attempts = audit.remediations("trigger").unwrap();
    let committed_attempts: Vec<_> = committed
        .remediations
        .iter()
        .filter(|attempt| attempt.drift_id == "trigger")
        .cloned()
        .collect();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts, committed_attempts, "in the order committed");
    answers.push(format!("{attempts:?}"));
    let trigger = audit.drift("trigger").unwrap();
    assert_eq!(
        trigger.as_ref(),
        committed.drifts.iter().find(|drift| drift.id == "trigger")
    );
    answers.push(format!("{trigger:?}"));
    answers
}

#[test]
fn the_audit_side_answers_alike_on_every_backend() {
    let mut test_store = TestStore::new();
    test_store.commit(&audit_batch()).unwrap();
    let expected = audit_answers(&test_store);
    let cutoff = DAY_MILLIS * 103;
    // Retention forgets the Subscription and the Route (resolved before day 3) with their moves,
    // alike.
    assert_eq!(test_store.prune_audit(cutoff).unwrap(), 1 + 2 + 3 + 2);
    let backends = Backend::all();
    let mut opened: Vec<store::Opened> = backends.iter().map(Backend::open).collect();
    for (backend, store) in backends.iter().zip(&mut opened) {
        store.writer.commit(&audit_batch()).unwrap();
        assert_eq!(
            audit_answers(store.audit.as_ref()),
            expected,
            "{}",
            backend.name()
        );
        assert_eq!(
            store.writer.prune_audit(cutoff).unwrap(),
            1 + 2 + 3 + 2,
            "{}",
            backend.name()
        );
    }
    let audits = opened
        .iter()
        .map(|store| store.audit.as_ref())
        .chain([&test_store as &dyn AuditRead]);
    for audit in audits {
        assert!(audit.history("subscription").unwrap().is_empty());
        assert!(audit.remediations("subscription").unwrap().is_empty());
        assert_eq!(audit.remediations("trigger").unwrap().len(), 2);
        assert_eq!(audit.history("configmap").unwrap().len(), 3);
        let days = audit.moves_per_day(DAY_MILLIS * 99, 7).unwrap();
        let fired: Vec<u64> = days.iter().map(|day| day.fired).collect();
        let resolved: Vec<u64> = days.iter().map(|day| day.resolved).collect();
        assert_eq!(
            (fired, resolved),
            (vec![0, 2, 1, 1, 2, 1, 0], vec![0, 0, 0, 0, 1, 0, 0])
        );
    }
}

#[test]
fn a_remediation_attempt_moves_from_planned_to_its_outcome_alike_on_every_backend() {
    use drift_model::remediation::Outcome;
    let batch = audit_batch();
    let mut planned = batch.remediations[0].clone();
    planned.mode = "apply".into();
    planned.outcome = Outcome::Planned;
    let backends = Backend::all();
    for backend in &backends {
        let mut opened = backend.open();
        opened
            .writer
            .commit(&Batch {
                drifts: batch.drifts.clone(),
                remediations: vec![planned.clone(), batch.remediations[2].clone()],
                ..Batch::default()
            })
            .unwrap();
        let audit = opened.audit.as_ref();
        assert!(audit
            .remediations_by_outcome(Outcome::Planned, "staging", 10)
            .unwrap()
            .is_empty());
        let found = audit
            .remediations_by_outcome(Outcome::Planned, "prod", 10)
            .unwrap();
        assert_eq!(found.len(), 1, "{}", backend.name());
        let (seq, stored) = found[0].clone();
        assert_eq!(stored, planned, "{}", backend.name());
        let mut moved = stored.clone();
        let mut from = Outcome::Planned;
        for outcome in [Outcome::Sending, Outcome::Applied] {
            moved.outcome = outcome;
            moved.status = (outcome == Outcome::Applied).then_some(200);
            moved.resource_version_after = (outcome == Outcome::Applied).then(|| "8".to_string());
            opened
                .writer
                .commit(&Batch {
                    settled_remediations: vec![(seq, from, moved.clone())],
                    ..Batch::default()
                })
                .unwrap();
            from = outcome;
            for state in [Outcome::Planned, Outcome::Sending, Outcome::Applied] {
                let rows = audit.remediations_by_outcome(state, "prod", 10).unwrap();
                assert_eq!(
                    rows.len(),
                    usize::from(state == outcome),
                    "{} {state:?}",
                    backend.name()
                );
            }
        }
        // A move from an outcome the row no longer has changes nothing: a late claim cannot
        // undo the end.
        let mut late = moved.clone();
        late.outcome = Outcome::Sending;
        opened
            .writer
            .commit(&Batch {
                settled_remediations: vec![(seq, Outcome::Planned, late)],
                ..Batch::default()
            })
            .unwrap();
        assert_eq!(
            audit
                .remediations_by_outcome(Outcome::Applied, "prod", 10)
                .unwrap()
                .len(),
            1,
            "{}",
            backend.name()
        );
        // The drift's history holds the attempt as it ended, beside the other one, in order.
        let history = audit.remediations("trigger").unwrap();
        assert_eq!(
            history,
            vec![moved, batch.remediations[2].clone()],
            "{}",
            backend.name()
        );
    }
}

#[test]
fn version_two_fills_in_the_api_group_of_drifts_stored_before_it() {
    let mut test_store = TestStore::new();
    test_store.commit(&audit_batch()).unwrap();
    let expected = audit_answers(&test_store);
    for backend in Backend::all() {
        {
            let mut opened = backend.open();
            opened.writer.commit(&audit_batch()).unwrap();
        }
        // Back to the version 1 layout: no group column, no new indexes, version 1 recorded.
        backend.execute(
            "DROP INDEX drifts_api_group; DROP INDEX drift_history_at;
             DROP INDEX outbox_drift_pending;
             ALTER TABLE drifts DROP COLUMN api_group;
             UPDATE schema_version SET version = 1;",
        );
        assert_eq!(backend.version(), Some(1), "{}", backend.name());
        let opened = backend.open_migrated();
        assert_eq!(
            audit_answers(opened.audit.as_ref()),
            expected,
            "{}",
            backend.name()
        );
    }
}

/// The writer's side: what a commit stores comes back at start (objects, open drifts only,
/// silences in order), event keys make redeliveries duplicates until pruned, and the audit
/// reader sees the silences.
fn writer_round_trip(store: &mut dyn Store, audit: &dyn AuditRead) {
    use drift_model::Silence;
    use drift_store::{EventKey, SilenceChange, StoredSilence};
    let silence = |id: &str, at: Millis| StoredSilence {
        id: id.into(),
        silence: Silence {
            matchers: [("namespace".to_string(), "team-*".to_string())].into(),
            expires_at: Some("2030-01-01T00:00:00Z".into()),
            comment: Some(format!("silence {id}")),
        },
        created_at: at,
    };
    let mut batch = audit_batch();
    batch.events = vec![
        (
            EventKey {
                sent_at: 900,
                source: "s".into(),
                id: "1".into(),
            },
            1_000,
        ),
        (
            EventKey {
                sent_at: 900,
                source: "s".into(),
                id: "2".into(),
            },
            5_000,
        ),
    ];
    batch.silences = vec![
        SilenceChange::Add(silence("Zed", 2)),
        SilenceChange::Add(silence("alpha", 2)),
        SilenceChange::Add(silence("gone", 1)),
    ];
    store.commit(&batch).unwrap();
    store
        .commit(&Batch {
            silences: vec![SilenceChange::Remove("gone".into())],
            ..Batch::default()
        })
        .unwrap();
    let key = |id: &str| EventKey {
        sent_at: 900,
        source: "s".into(),
        id: id.into(),
    };
    assert!(store.is_duplicate(&key("1")).unwrap());
    assert!(!store.is_duplicate(&key("3")).unwrap());
    assert_eq!(store.prune_events(2_000).unwrap(), 1);
    assert!(!store.is_duplicate(&key("1")).unwrap());
    assert!(store.is_duplicate(&key("2")).unwrap());
    store.heartbeat(7).unwrap();
    store.heartbeat(8).unwrap();

    let (_, snapshot) = load(store);
    let mut open: Vec<&str> = snapshot.drifts.iter().map(|d| d.id.as_str()).collect();
    open.sort();
    let mut expected: Vec<String> = audit_batch()
        .drifts
        .iter()
        .filter(|drift| drift.state != DriftState::Resolved)
        .map(|drift| drift.id.clone())
        .collect();
    expected.sort();
    assert_eq!(open, expected);
    let silences: Vec<&str> = snapshot.silences.iter().map(|s| s.id.as_str()).collect();
    // By creation time, then id in byte order ('Z' before 'a').
    assert_eq!(silences, ["Zed", "alpha"]);
    assert_eq!(snapshot.silences[1], silence("alpha", 2));
    assert_eq!(audit.silences().unwrap(), snapshot.silences);
    // In pages, in the same order: a cursor after each, none after the last.
    let (first, next) = audit.silences_page(None, 1).unwrap();
    assert_eq!(first, snapshot.silences[..1]);
    assert_eq!(next, Some((2, "Zed".to_string())));
    let (second, next) = audit.silences_page(next.as_ref(), 1).unwrap();
    assert_eq!(second, snapshot.silences[1..]);
    assert_eq!(next, None);
    assert_eq!(
        audit.silences_page(None, 2).unwrap(),
        (snapshot.silences.clone(), None)
    );
    assert_eq!(
        audit
            .silences_page(Some(&(2, "alpha".to_string())), 5)
            .unwrap(),
        (Vec::new(), None)
    );
}

#[test]
fn the_writer_round_trips_on_every_backend() {
    for backend in Backend::all() {
        let mut opened = backend.open();
        writer_round_trip(opened.writer.as_mut(), opened.audit.as_ref());
    }
    let test_store = TestStore::new();
    writer_round_trip(&mut test_store.clone(), &test_store);
}

#[test]
fn postgres_errors_never_show_the_password() {
    let server = PgServer::shared();
    let password = "pw-Sekr1t-do-not-print";
    // A URL that does not parse, one whose database does not exist, a password in its own key.
    let socket = server.path().join("sock");
    let urls = [
        format!("postgres://u:{password}@localhost:notaport/db"),
        format!(
            "postgres://postgres:{password}@/missing?host={}&port=5432",
            socket.display()
        ),
        format!(
            "postgres:///missing?host={}&port=5432&user=postgres",
            socket.display()
        ),
    ];
    for (index, url) in urls.iter().enumerate() {
        let config = StoreConfig {
            url: Some(Secret::new(url.clone())),
            password: (index == 2).then(|| Secret::new(password)),
            ..StoreConfig::default()
        };
        let error = match store::open(&store_options(&config)) {
            Ok(_) => panic!("{index}: opening must fail"),
            Err(error) => error,
        };
        assert_eq!(error.kind(), "postgres", "{index}");
        let shown = format!("{error} {error:?} {:?}", std::error::Error::source(&error));
        assert!(!shown.contains(password), "{index}: {shown}");
        assert!(!format!("{config:?}").contains(password));
        assert!(!config.location().contains(password));
    }
}

/// Everything the outbox, the writer's snapshot and the audit reader answer about a store.
fn whole_store(opened: &mut store::Opened) -> Vec<String> {
    let mut answers = audit_answers(opened.audit.as_ref());
    answers.push(format!("{:?}", opened.outbox.rows(None, 500).unwrap()));
    answers.push(format!("{:?}", opened.outbox.stats().unwrap()));
    answers.push(format!("{:?}", opened.outbox.claim_owners().unwrap()));
    for drift in ["trigger", "configmap"] {
        answers.push(format!("{:?}", opened.audit.deliveries_of(drift).unwrap()));
    }
    answers.push(format!("{:?}", opened.audit.silences().unwrap()));
    let (_, snapshot) = load(opened.writer.as_mut());
    let mut drifts: Vec<String> = snapshot.drifts.iter().map(|d| format!("{d:?}")).collect();
    drifts.sort();
    answers.extend(drifts);
    answers.push(format!("{:?}", snapshot.silences));
    answers
}

#[test]
fn store_migrate_moves_a_sqlite_store_into_postgres() {
    use drift_model::Silence;
    use drift_store::{EventKey, SilenceChange, StoredSilence};
    let sqlite = Backend::sqlite();
    let mut source = sqlite.open();
    let mut batch = audit_batch();
    batch.events = vec![(
        EventKey {
            sent_at: 4,
            source: "s".into(),
            id: "e1".into(),
        },
        5,
    )];
    batch.outbox = vec![
        NewOutbox {
            drift_id: "trigger".into(),
            ..queued("n1", "hook")
        },
        NewOutbox {
            drift_id: "trigger".into(),
            ..queued("n2", "hook")
        },
        NewOutbox {
            drift_id: "configmap".into(),
            ..queued("n3", "chat")
        },
    ];
    batch.silences = vec![SilenceChange::Add(StoredSilence {
        id: "quiet".into(),
        silence: Silence {
            matchers: [("namespace".to_string(), "team-*".to_string())].into(),
            expires_at: None,
            comment: Some("migrated".into()),
        },
        created_at: 3,
    })];
    source.writer.commit(&batch).unwrap();
    // Deliveries in every state: one delivered, one retried (and still claimed), one pending.
    let lease = Lease {
        owner: "pod/1/x/hook".into(),
        until: 90_000,
    };
    let held = source
        .outbox
        .claim(&["n1".into(), "n2".into()], "m1", &lease, 2_000)
        .unwrap();
    assert_eq!(held.len(), 2);
    source
        .outbox
        .settle(
            &settled(&["n1"], OutboxState::Delivered, Some("pod/1/x/hook"), 2_100),
            &[reminder_of("n1")],
        )
        .unwrap();
    source
        .outbox
        .settle(
            &settled(&["n2"], OutboxState::Pending, Some("pod/1/x/hook"), 2_200),
            &[],
        )
        .unwrap();
    source
        .outbox
        .claim(&["n2".into()], "m1", &lease, 2_300)
        .unwrap();
    source.writer.heartbeat(42).unwrap();
    let expected = whole_store(&mut source);
    drop(source);

    let postgres = Backend::postgres();
    let Backend::Postgres { url, .. } = &postgres else {
        unreachable!()
    };
    let target = store::postgres::Target::new(url, None, None).unwrap();
    let path = match &sqlite {
        Backend::Sqlite(dir) => dir.path().join("store.db"),
        Backend::Postgres { .. } => unreachable!(),
    };
    // A service that started on the database and stopped before any event left only its
    // heartbeat row: the database still counts as empty.
    store::postgres::open(&target)
        .unwrap()
        .writer
        .heartbeat(1_000)
        .unwrap();
    let summary = store::migrate::sqlite_to_postgres(&path, &target).unwrap();
    assert_eq!(summary.version, store::sqlite::schema::LATEST);
    let counts: Vec<(&str, u64)> = summary.tables.clone();
    let written = audit_batch();
    assert_eq!(
        counts,
        [
            ("events", 1),
            ("objects", 0),
            ("drifts", written.drifts.len() as u64),
            ("drift_history", written.history.len() as u64),
            ("silences", 1),
            ("outbox", 4),
            ("delivery_attempts", 2),
            ("remediations", written.remediations.len() as u64),
            ("heartbeat", 1),
        ]
    );
    let mut migrated = postgres.open();
    assert_eq!(whole_store(&mut migrated), expected);
    assert!(migrated
        .writer
        .is_duplicate(&EventKey {
            sent_at: 4,
            source: "s".into(),
            id: "e1".into()
        })
        .unwrap());
    // With its time: sent at another time, the same id is another event.
    assert!(!migrated
        .writer
        .is_duplicate(&EventKey {
            sent_at: 5,
            source: "s".into(),
            id: "e1".into()
        })
        .unwrap());

    // The service continues from it: new history follows the copied history, and a second
    // settlement's attempt follows the first.
    let mut next = Batch::default();
    let mut resolved = audit_batch().drifts[0].clone();
    assert_eq!(resolved.id, "trigger");
    resolved.state = DriftState::Resolved;
    resolved.resolved_at = Some(DAY_MILLIS * 200);
    next.history = vec![Transition {
        drift: resolved.clone(),
        from: Some(DriftState::Firing),
        at: DAY_MILLIS * 200,
    }];
    next.drifts = vec![resolved];
    migrated.writer.commit(&next).unwrap();
    let history = migrated.audit.history("trigger").unwrap();
    assert_eq!(history.last().unwrap().to, "resolved");
    assert_eq!(history.last().unwrap().at, DAY_MILLIS * 200);
    migrated
        .outbox
        .settle(
            &settled(&["n2"], OutboxState::Delivered, Some("pod/1/x/hook"), 2_400),
            &[],
        )
        .unwrap();
    let deliveries = migrated.audit.deliveries_of("trigger").unwrap();
    let n2 = deliveries.iter().find(|d| d.id == "n2").unwrap();
    let states: Vec<&str> = n2.attempt_log.iter().map(|a| a.state.as_str()).collect();
    assert_eq!(states, ["pending", "delivered"]);

    // A second migration into the now non-empty database is refused, and writes nothing.
    let error = store::migrate::sqlite_to_postgres(&path, &target).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("already holds drift-sentinel data"),
        "{error}"
    );
    assert_eq!(
        migrated.audit.history("trigger").unwrap().len(),
        history.len()
    );
}

#[test]
fn a_postgres_store_outlives_a_server_restart() {
    // A server of its own: it restarts it.
    let server = PgServer::start();
    let url = server.database();
    let options = store::Options::Postgres {
        url,
        password: None,
        ca_file: None,
    };
    let mut opened = store::open(&options).unwrap();
    opened.writer.commit(&audit_batch()).unwrap();
    server.restart();
    // The call that finds its connection closed fails (its caller retries, as for any store
    // error); the next one connects again.
    let _ = opened.audit.drift("trigger");
    let _ = opened.writer.heartbeat(1);
    let _ = opened.outbox.stats();
    assert!(opened.audit.drift("trigger").unwrap().is_some());
    opened.writer.heartbeat(2).unwrap();
    assert_eq!(opened.outbox.stats().unwrap().pending, 0);
}

/// Two processes' relays racing over one outbox, as two replicas' relays do during a takeover:
/// each row is claimed, and settled, by exactly one of them.
#[test]
fn outbox_claims_hold_under_two_racing_processes_on_every_database() {
    for backend in Backend::all() {
        let mut opened = backend.open();
        let rows: Vec<NewOutbox> = (0..300)
            .map(|index| queued(&format!("r{index:03}"), "hook"))
            .collect();
        opened
            .writer
            .commit(&Batch {
                outbox: rows,
                ..Batch::default()
            })
            .unwrap();
        // Both connected before either starts, so they race from the first row.
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let race = |mut outbox: Box<dyn Outbox>, owner: &'static str| {
            let start = std::sync::Arc::clone(&start);
            std::thread::spawn(move || {
                start.wait();
                let mut sent = Vec::new();
                loop {
                    let due = outbox.due("hook", 2_000, 20, owner).unwrap();
                    if due.is_empty() {
                        return sent;
                    }
                    for row in due.rows {
                        let id = row.queued.id;
                        let lease = Lease {
                            owner: owner.into(),
                            until: 2_000 + 60_000,
                        };
                        let held = outbox
                            .claim(std::slice::from_ref(&id), &id, &lease, 2_000)
                            .unwrap();
                        if held.is_empty() {
                            continue;
                        }
                        outbox
                            .settle(
                                &settled(
                                    &[id.as_str()],
                                    OutboxState::Delivered,
                                    Some(owner),
                                    2_000,
                                ),
                                &[],
                            )
                            .unwrap();
                        sent.push(id);
                    }
                }
            })
        };
        let (one, two) = (backend.open().outbox, backend.open().outbox);
        let first = race(one, "pod-a/1/x/hook");
        let second = race(two, "pod-b/2/y/hook");
        let (first, second) = (first.join().unwrap(), second.join().unwrap());
        let mut all: Vec<String> = first.iter().chain(second.iter()).cloned().collect();
        all.sort();
        let unique: std::collections::BTreeSet<&String> = all.iter().collect();
        assert_eq!(
            unique.len(),
            all.len(),
            "{}: a row sent twice",
            backend.name()
        );
        assert_eq!(all.len(), 300, "{}: every row sent", backend.name());
    }
}

/// The writer asks once per round which event keys were committed before: the same answer as
/// asking key by key, on every database. A key is its event's send time, source and id: a
/// redelivery (the same three) is a duplicate, the same source and id sent at another time is
/// not, and a key stored without a time (0) stands for any time.
#[test]
fn duplicates_of_a_round_are_found_in_one_question_on_every_database() {
    for backend in Backend::all() {
        let mut opened = backend.open();
        let key = |sent_at: Millis, source: &str, id: &str| drift_store::EventKey {
            sent_at,
            source: source.into(),
            id: id.into(),
        };
        opened
            .writer
            .commit(&Batch {
                events: vec![
                    (key(900, "a", "1"), 1_000),
                    (key(950, "a", "2"), 1_000),
                    (key(0, "a", "timeless"), 1_000),
                ],
                ..Batch::default()
            })
            .unwrap();
        let asked = [
            key(900, "a", "1"),
            key(901, "a", "1"),
            key(0, "a", "1"),
            key(900, "a", "3"),
            key(950, "b", "2"),
            key(950, "a", "2"),
            key(0, "a", "timeless"),
            key(1_234, "a", "timeless"),
        ];
        let seen = opened.writer.duplicates(&asked).unwrap();
        let expected: std::collections::HashSet<_> = [
            key(900, "a", "1"),
            key(950, "a", "2"),
            key(0, "a", "timeless"),
            key(1_234, "a", "timeless"),
        ]
        .into_iter()
        .collect();
        assert_eq!(seen, expected, "{}", backend.name());
        for asked in &asked {
            assert_eq!(
                opened.writer.is_duplicate(asked).unwrap(),
                expected.contains(asked),
                "{}: {asked:?}",
                backend.name()
            );
        }
        assert!(opened.writer.duplicates(&[]).unwrap().is_empty());
        // The same source and id at another time is another key: both are stored.
        opened
            .writer
            .commit(&Batch {
                events: vec![(key(901, "a", "1"), 2_000)],
                ..Batch::default()
            })
            .unwrap();
        assert!(opened.writer.is_duplicate(&key(901, "a", "1")).unwrap());
        assert!(opened.writer.is_duplicate(&key(900, "a", "1")).unwrap());
        assert_eq!(
            opened.writer.prune_events(1_500).unwrap(),
            3,
            "{}",
            backend.name()
        );
        assert!(!opened.writer.is_duplicate(&key(900, "a", "1")).unwrap());
        assert!(opened.writer.is_duplicate(&key(901, "a", "1")).unwrap());
    }
}

/// Version 6 keys the events by send time first. The keys stored before it (by source and id
/// only) come through with time 0, which matches any time: a redelivery of an event accepted
/// before the upgrade is still a duplicate after it, on every database, until the key is pruned.
#[test]
fn version_six_keeps_the_keys_stored_before_it_as_duplicates_of_any_time() {
    let key = |sent_at: Millis, id: &str| drift_store::EventKey {
        sent_at,
        source: "https://10.96.0.1:443".into(),
        id: id.into(),
    };
    for backend in Backend::all() {
        drop(backend.open());
        // Back to version 5's events table, with two keys in it.
        let old_events = match backend {
            Backend::Sqlite(_) => {
                "DROP TABLE events;
                 CREATE TABLE events (
                     source TEXT NOT NULL, id TEXT NOT NULL, received_at INTEGER NOT NULL,
                     PRIMARY KEY (source, id)
                 ) WITHOUT ROWID;
                 CREATE INDEX events_received ON events (received_at);"
            }
            Backend::Postgres { .. } => {
                "ALTER TABLE events DROP CONSTRAINT events_pkey;
                 ALTER TABLE events DROP COLUMN sent_at;
                 ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (source, id);"
            }
        };
        backend.execute(&format!(
            "{old_events}
             INSERT INTO events (source, id, received_at)
                 VALUES ('https://10.96.0.1:443', 'e1', 1000),
                        ('https://10.96.0.1:443', 'e2', 3000);
             UPDATE schema_version SET version = 5;"
        ));
        assert_eq!(backend.version(), Some(5), "{}", backend.name());
        let mut opened = backend.open_migrated();
        let writer = opened.writer.as_mut();
        for id in ["e1", "e2"] {
            assert!(writer.is_duplicate(&key(1_796_138_779_211, id)).unwrap());
            assert!(writer.is_duplicate(&key(0, id)).unwrap());
        }
        assert!(!writer.is_duplicate(&key(1_796_138_779_211, "e3")).unwrap());
        let asked = [key(5, "e1"), key(5, "e3")];
        let seen = writer.duplicates(&asked).unwrap();
        assert_eq!(
            seen,
            [key(5, "e1")].into_iter().collect(),
            "{}",
            backend.name()
        );
        // New keys go in beside them, and the old ones are pruned by their receive time.
        writer
            .commit(&Batch {
                events: vec![(key(2_500, "e3"), 4_000)],
                ..Batch::default()
            })
            .unwrap();
        assert!(writer.is_duplicate(&key(2_500, "e3")).unwrap());
        assert_eq!(writer.prune_events(2_000).unwrap(), 1, "{}", backend.name());
        assert!(!writer.is_duplicate(&key(7, "e1")).unwrap());
        assert!(writer.is_duplicate(&key(7, "e2")).unwrap());
        drop(opened);
        // The index pruning reads is there, and migrating again (the recorded version taken
        // back by hand) keeps every key's time.
        let index = match backend {
            Backend::Sqlite(_) => "SELECT name FROM sqlite_master WHERE name = 'events_received'",
            Backend::Postgres { .. } => {
                "SELECT indexname FROM pg_indexes WHERE indexname = 'events_received'"
            }
        };
        let has_index = match &backend {
            Backend::Sqlite(dir) => rusqlite::Connection::open(dir.path().join("store.db"))
                .unwrap()
                .query_row(index, [], |row| row.get::<_, String>(0))
                .is_ok(),
            Backend::Postgres { server, url } => {
                server.psql(PgServer::name_of(url), index) == "events_received"
            }
        };
        assert!(has_index, "{}", backend.name());
        backend.execute("UPDATE schema_version SET version = 5;");
        let mut opened = backend.open_migrated();
        assert!(opened.writer.is_duplicate(&key(2_500, "e3")).unwrap());
        assert!(
            !opened.writer.is_duplicate(&key(2_499, "e3")).unwrap(),
            "{}: the key lost its time",
            backend.name()
        );
    }
}

/// A queued row whose stored notice cannot be read (damaged, or written by hand) comes apart
/// from the rows due with it, on every database and on the test store: it holds none of them
/// up, and the relay can end it (`delivery.rs` has the relay's side).
#[test]
fn an_unreadable_notice_holds_up_no_other_row_on_every_backend() {
    let tamper = "UPDATE outbox SET payload = 'not a notice' WHERE id = 'b'";
    let check = |writer: &mut dyn Store, outbox: &mut dyn Outbox, tamper: &dyn Fn(), name: &str| {
        queue(writer, &[("a", "hook"), ("b", "hook"), ("c", "hook")]);
        tamper();
        let due = outbox.due("hook", 2_000, 10, "pod-z/1/z/hook").unwrap();
        assert_eq!(sorted_ids(due.rows), ["a", "c"], "{name}");
        let [unreadable] = &due.unreadable[..] else {
            panic!("{name}: {:?}", due.unreadable)
        };
        assert_eq!(
            (unreadable.id.as_str(), unreadable.created_at),
            ("b", 1_000)
        );
        assert_eq!(
            unreadable.error.to_string(),
            "expected ident at line 1 column 2",
            "{name}"
        );
        // The listing of rows has no shape for it: a corrupt row.
        let error = outbox.rows(None, 10).unwrap_err();
        assert_eq!(error.kind(), "corrupt", "{name}: {error}");
    };
    for backend in Backend::all() {
        let mut opened = backend.open();
        check(
            opened.writer.as_mut(),
            opened.outbox.as_mut(),
            &|| {
                backend.execute(tamper);
            },
            backend.name(),
        );
    }
    let test_store = TestStore::new();
    let path = test_store.path();
    check(
        &mut test_store.clone(),
        &mut test_store.clone(),
        &|| {
            rusqlite::Connection::open(&path)
                .unwrap()
                .execute_batch(tamper)
                .unwrap();
        },
        "test store",
    );
}

/// The firing drift of the notification `queued(id, ..)`, in `cluster`.
fn firing_in(id: &str, cluster: &str) -> Drift {
    Drift {
        cluster: cluster.into(),
        ..drift_of(
            &format!("drift-{id}"),
            "v1",
            "ns",
            Severity::Warning,
            1_000,
            Some(1_000),
            None,
        )
    }
}

/// Commits queued notifications `(id, channel)` through `writer`.
fn queue(writer: &mut dyn Store, rows: &[(&str, &str)]) {
    writer
        .commit(&Batch {
            outbox: rows
                .iter()
                .map(|(id, channel)| queued(id, channel))
                .collect(),
            ..Batch::default()
        })
        .unwrap();
}

/// The ids of `channel`'s rows due for `outbox` at 2,000.
fn due_ids(outbox: &mut dyn Outbox, channel: &str) -> Vec<String> {
    sorted_ids(
        outbox
            .due(channel, 2_000, 50, "pod-z/1/z/hook")
            .unwrap()
            .rows,
    )
}

/// Shards share one database but not their notifications: each shard's relays send, count and
/// expire only what its writer queued (and rows queued before rows had shards, which any shard
/// may send once), so a shard's channels and rate limits are its own.
#[test]
fn each_shard_serves_only_its_own_notifications() {
    let backend = Backend::postgres();
    let mut east = backend.open();
    east.assign_shard("east").unwrap();
    let mut west = backend.open();
    west.assign_shard("west").unwrap();
    // Queued by a deployment without shards (or a binary before them).
    let mut unsharded = backend.open();
    queue(&mut *unsharded.writer, &[("legacy", "hook")]);
    queue(&mut *east.writer, &[("e1", "hook"), ("e-pager", "pager")]);
    queue(&mut *west.writer, &[("w1", "hook")]);

    let ids = |list: &[&str]| list.iter().map(|id| id.to_string()).collect::<Vec<_>>();
    assert_eq!(due_ids(&mut *east.outbox, "hook"), ids(&["e1", "legacy"]));
    assert_eq!(due_ids(&mut *west.outbox, "hook"), ids(&["legacy", "w1"]));
    assert_eq!(due_ids(&mut *west.outbox, "pager"), Vec::<String>::new());
    assert_eq!(
        west.outbox.next_due("pager", "pod-z/1/z/hook").unwrap(),
        None
    );
    assert_eq!(
        east.outbox.next_due("pager", "pod-z/1/z/hook").unwrap(),
        Some(1_000)
    );
    // Without a shard, a relay sends every row (a deployment that stopped sharding).
    assert_eq!(
        due_ids(&mut *unsharded.outbox, "hook"),
        ids(&["e1", "legacy", "w1"])
    );
    assert_eq!(east.outbox.stats().unwrap().pending, 3);
    assert_eq!(west.outbox.stats().unwrap().pending, 2);
    assert_eq!(unsharded.outbox.stats().unwrap().pending, 4);

    // A reminder queued when east settles its row is east's.
    let owner = "pod-e/1/x/hook";
    let lease = Lease {
        owner: owner.into(),
        until: 62_000,
    };
    assert_eq!(
        east.outbox
            .claim(&ids(&["e1"]), "m-e1", &lease, 2_000)
            .unwrap(),
        ids(&["e1"])
    );
    east.outbox
        .settle(
            &settled(&["e1"], OutboxState::Delivered, Some(owner), 2_000),
            &[reminder_of("e1")],
        )
        .unwrap();
    assert_eq!(
        due_ids(&mut *east.outbox, "hook"),
        ids(&["e1-reminder", "legacy"])
    );
    assert_eq!(due_ids(&mut *west.outbox, "hook"), ids(&["legacy", "w1"]));

    // West has no `pager` channel: it must not end east's notifications for it, nor the rows
    // without a shard; east ends its own when it no longer has the channel.
    assert_eq!(
        west.outbox
            .expire_unknown_channels(&["other".into()], 3_000)
            .unwrap(),
        1,
        "west expires only its own w1"
    );
    assert_eq!(
        ids_in(&mut *east.outbox, OutboxState::Expired),
        ids(&["w1"])
    );
    assert_eq!(
        east.outbox
            .expire_unknown_channels(&["hook".into()], 3_000)
            .unwrap(),
        1
    );
    assert_eq!(
        ids_in(&mut *east.outbox, OutboxState::Expired),
        ids(&["e-pager", "w1"])
    );
    assert_eq!(
        ids_in(&mut *east.outbox, OutboxState::Pending),
        ids(&["e1-reminder", "legacy"])
    );

    // One pod's stores have no shards.
    let sqlite = Backend::sqlite();
    let error = match sqlite.open().assign_shard("east") {
        Ok(()) => panic!("a SQLite store took a shard"),
        Err(error) => error,
    };
    assert_eq!(error.kind(), "unavailable");
}

/// Notifications without a live owner are taken over, so none is left unsent: those of a shard
/// renamed or removed (no writer lease renewed for `ORPHANED_AFTER_MS`) by a live shard, and
/// those queued before shards by the shard of their drift's cluster. A live shard's stay its
/// own, and a reminder keeps the shard of the notification it follows.
#[test]
fn notifications_without_a_live_shard_are_taken_over() {
    use drift_sentinel::pipeline::ORPHANED_AFTER_MS;
    let backend = Backend::postgres();
    let now: Millis = 10_000_000;
    let mut gone = backend.open();
    gone.assign_shard("gone").unwrap();
    let mut restarting = backend.open();
    restarting.assign_shard("restarting").unwrap();
    let mut live = backend.open();
    live.assign_shard("live").unwrap();
    let mut east = backend.open();
    east.assign_shard("east").unwrap();
    let mut leases = live.leases.take().unwrap();
    // "gone" had a writer until 21 minutes ago (its unowned rows are reported as left); "restarting" renewed a minute ago and released
    // its lease (a graceful restart); "live" renewed just now.
    let long_ago = now - 2 * ORPHANED_AFTER_MS - 60_000;
    leases
        .acquire("gone", "pod-g/1/x", long_ago, 10_000)
        .unwrap()
        .unwrap();
    let released = leases
        .acquire("restarting", "pod-r/1/x", now - 60_000, 10_000)
        .unwrap()
        .unwrap();
    leases.release(&released).unwrap();
    for (shard, holder) in [
        ("live", "pod-l/1/x"),
        ("east", "pod-e/1/x"),
        ("west", "pod-w/1/x"),
    ] {
        leases.acquire(shard, holder, now, 10_000).unwrap().unwrap();
    }
    queue(&mut *gone.writer, &[("g-east", "hook"), ("g-west", "hook")]);
    queue(&mut *restarting.writer, &[("r-east", "hook")]);
    // A live shard whose writer now runs a binary from before `renewed_at`: it renews the
    // expiry only, and the `renewed_at` a newer one wrote long ago stays.
    backend.execute(&format!(
        "INSERT INTO writer_lease (shard, holder, epoch, expires_at, renewed_at) VALUES ('older', 'pod-o/1/x', 1, {}, {long_ago})",
        now + 10_000
    ));
    let mut older = backend.open();
    older.assign_shard("older").unwrap();
    queue(&mut *older.writer, &[("o-east", "hook")]);
    queue(&mut *live.writer, &[("l-east", "hook")]);
    // The drifts, and three notifications queued before shards: of an east cluster's drift, a
    // west cluster's, and a cluster no shard owns.
    let mut unsharded = backend.open();
    let mut before = Batch {
        outbox: vec![
            queued("u-east", "hook"),
            queued("u-west", "hook"),
            queued("u-lab", "hook"),
        ],
        ..Batch::default()
    };
    before.drifts = [
        ("g-east", "east-1"),
        ("g-west", "west-1"),
        ("r-east", "east-2"),
        ("o-east", "east-3"),
        ("l-east", "east-1"),
        ("u-east", "east-1"),
        ("u-west", "west-1"),
        ("u-lab", "lab-1"),
    ]
    .iter()
    .map(|(id, cluster)| firing_in(id, cluster))
    .collect();
    unsharded.writer.commit(&before).unwrap();

    // East takes the gone shard's notification of its cluster and the unsharded one of its
    // cluster; not the restarting or live shards' own, nor another cluster's.
    let owns = |cluster: &str| cluster.starts_with("east-");
    let adopted = east
        .writer
        .adopt_notifications(now, ORPHANED_AFTER_MS, &owns)
        .unwrap();
    assert_eq!(
        adopted,
        store::Adopted {
            orphaned: vec![("gone".to_string(), 1)],
            unsharded: 1,
            stranded: 1,
        }
    );
    assert_eq!(
        due_ids(&mut *east.outbox, "hook"),
        vec!["g-east", "u-east", "u-lab", "u-west"]
    );
    assert_eq!(
        due_ids(&mut *restarting.outbox, "hook"),
        vec!["r-east", "u-lab", "u-west"]
    );
    assert_eq!(
        due_ids(&mut *live.outbox, "hook"),
        vec!["l-east", "u-lab", "u-west"]
    );
    // West, the owner of the other cluster, takes the rest.
    let west_owns = |cluster: &str| cluster.starts_with("west-");
    let mut west = backend.open();
    west.assign_shard("west").unwrap();
    let adopted = west
        .writer
        .adopt_notifications(now, ORPHANED_AFTER_MS, &west_owns)
        .unwrap();
    assert_eq!(
        (adopted.orphaned, adopted.unsharded, adopted.stranded),
        (vec![("gone".to_string(), 1)], 1, 0)
    );
    assert_eq!(
        due_ids(&mut *west.outbox, "hook"),
        vec!["g-west", "u-lab", "u-west"]
    );
    // Done once: another look takes nothing more.
    assert_eq!(
        east.writer
            .adopt_notifications(now, ORPHANED_AFTER_MS, &owns)
            .unwrap(),
        store::Adopted::default()
    );

    // A reminder keeps the shard of the row it follows: none for a row without one, whichever
    // shard sent it; west's for a row west took over.
    let ids = |list: &[&str]| list.iter().map(|id| id.to_string()).collect::<Vec<_>>();
    for (outbox, owner, row) in [
        (&mut live.outbox, "pod-l/1/x/hook", "u-lab"),
        (&mut west.outbox, "pod-w/1/x/hook", "g-west"),
    ] {
        let lease = Lease {
            owner: owner.into(),
            until: now + 60_000,
        };
        assert_eq!(
            outbox.claim(&ids(&[row]), row, &lease, now).unwrap(),
            ids(&[row])
        );
        outbox
            .settle(
                &settled(&[row], OutboxState::Delivered, Some(owner), now),
                &[reminder_of(row)],
            )
            .unwrap();
    }
    assert_eq!(
        due_ids(&mut *east.outbox, "hook"),
        vec!["g-east", "u-east", "u-lab-reminder"]
    );
    assert_eq!(
        due_ids(&mut *west.outbox, "hook"),
        vec!["g-west-reminder", "u-lab-reminder", "u-west"]
    );

    // One pod's stores have none to take.
    let sqlite = Backend::sqlite();
    assert_eq!(
        sqlite
            .open()
            .writer
            .adopt_notifications(now, ORPHANED_AFTER_MS, &owns)
            .unwrap(),
        store::Adopted::default()
    );
}

/// A sharded writer takes the notifications of its clusters queued before shards while it
/// starts, before its relays run (they start once `Pipeline::start` returns), so they go out
/// through its own channels and not through whichever shard's relay looks first.
#[test]
fn a_sharded_writer_takes_its_unsharded_notifications_before_its_relays_start() {
    use drift_sentinel::pipeline::{self, Pipeline};
    let backend = Backend::postgres();
    let mut before = Batch {
        outbox: vec![queued("u-east", "hook"), queued("u-west", "hook")],
        ..Batch::default()
    };
    before.drifts = [("u-east", "east-1"), ("u-west", "west-1")]
        .iter()
        .map(|(id, cluster)| firing_in(id, cluster))
        .collect();
    backend.open().writer.commit(&before).unwrap();

    let mut east = backend.open();
    east.assign_shard("east").unwrap();
    let shard = drift_core::config::ShardConfig {
        name: "east".into(),
        clusters: vec!["east-*".into()],
        set: true,
        ..Default::default()
    };
    let looks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let pipeline = Pipeline::start(
        Box::new(RecordsWhereItAdopts {
            inner: east.writer,
            threads: std::sync::Arc::clone(&looks),
        }),
        std::sync::Arc::new(drift_core::classify::Rules::default()),
        pipeline::Settings {
            router: drift_core::config::router(
                &[],
                &[drift_core::config::ChannelConfig::log("hook")],
            ),
            outbox_notify: std::sync::Arc::new(tokio::sync::Notify::new()),
            queue_capacity: 16,
            dedup_retention: std::time::Duration::from_secs(3600),
            audit_retention: std::time::Duration::from_secs(3600),
            heartbeat_interval: std::time::Duration::from_secs(5),
            capacity: Default::default(),
            max_active_silences: 1_000,
            shard: std::sync::Arc::new(shard),
            remediation: Default::default(),
            traffic_observed: false,
        },
        // Less than a minute after the epoch: the writer's rounds do not look again yet, so
        // only the look at start can have taken the row.
        std::sync::Arc::new(|| 30_000),
        std::sync::Arc::new(drift_sentinel::metrics::Metrics::new()),
    )
    .unwrap();
    assert_eq!(
        backend.execute("SELECT id || '=' || coalesce(shard, '-') FROM outbox ORDER BY id"),
        "u-east=east\nu-west=-"
    );
    // The first look ran in `Pipeline::start` itself, on this thread: before the relays.
    let first = looks.lock().unwrap().first().cloned();
    assert_eq!(first, std::thread::current().name().map(str::to_string));
    drop(pipeline);
}

/// A writer's store that records on which thread each look for notifications to take over ran.
struct RecordsWhereItAdopts {
    inner: Box<dyn Store>,
    threads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Store for RecordsWhereItAdopts {
    fn load(
        &mut self,
        objects: &mut store::ObjectLoader<'_>,
    ) -> Result<store::Snapshot, store::Error> {
        self.inner.load(objects)
    }
    fn silences(&mut self) -> Result<Vec<store::StoredSilence>, store::Error> {
        self.inner.silences()
    }
    fn is_duplicate(&mut self, key: &store::EventKey) -> Result<bool, store::Error> {
        self.inner.is_duplicate(key)
    }
    fn commit(&mut self, batch: &Batch) -> Result<(), store::Error> {
        self.inner.commit(batch)
    }
    fn heartbeat(&mut self, now: Millis) -> Result<(), store::Error> {
        self.inner.heartbeat(now)
    }
    fn prune_events(&mut self, cutoff: Millis) -> Result<usize, store::Error> {
        self.inner.prune_events(cutoff)
    }
    fn prune_audit(&mut self, cutoff: Millis) -> Result<usize, store::Error> {
        self.inner.prune_audit(cutoff)
    }
    fn adopt_notifications(
        &mut self,
        now: Millis,
        orphaned_after_ms: Millis,
        owns: &dyn Fn(&str) -> bool,
    ) -> Result<store::Adopted, store::Error> {
        let thread = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        self.threads.lock().unwrap().push(thread);
        self.inner.adopt_notifications(now, orphaned_after_ms, owns)
    }
}

/// A database from before `outbox.shard` gets the column when a replica opens it, and a
/// sharded writer's rows carry their shard from then on.
#[test]
fn an_outbox_without_shards_gets_them_on_open() {
    let backend = Backend::postgres();
    drop(backend.open());
    backend.execute("ALTER TABLE outbox DROP COLUMN shard");
    assert_eq!(
        backend.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'outbox' AND column_name = 'shard'"
        ),
        "0"
    );
    let mut east = backend.open();
    east.assign_shard("east").unwrap();
    queue(&mut *east.writer, &[("e1", "hook")]);
    assert_eq!(
        backend.execute("SELECT shard FROM outbox WHERE id = 'e1'"),
        "east"
    );
}

#[test]
fn read_objects_sees_what_the_writer_stored_and_writes_nothing() {
    let record = |uid: &str, name: &str| store::ObjectRecord {
        cluster: "c1".into(),
        uid: uid.into(),
        kind: "Service".into(),
        namespace: "n".into(),
        name: name.into(),
        body: format!(r#"{{"name":"{name}"}}"#),
    };
    for backend in Backend::all() {
        let mut batch = audit_batch();
        batch.objects = vec![record("u1", "a"), record("u2", "b")];
        let open_drifts = {
            let mut opened = backend.open();
            opened.writer.commit(&batch).unwrap();
            let snapshot = opened.writer.load(&mut |_, _| Ok(())).unwrap();
            let mut ids: Vec<String> = snapshot.drifts.into_iter().map(|d| d.id).collect();
            ids.sort();
            ids
        };
        let mut read = Vec::new();
        let drifts = store::read_objects(&backend.config(), &mut |cluster, body| {
            read.push((cluster.to_string(), body.to_string()));
            Ok(())
        })
        .unwrap_or_else(|error| panic!("{}: {error}", backend.name()));
        read.sort();
        assert_eq!(
            read,
            [
                ("c1".to_string(), r#"{"name":"a"}"#.to_string()),
                ("c1".to_string(), r#"{"name":"b"}"#.to_string())
            ],
            "{}",
            backend.name()
        );
        let mut ids: Vec<String> = drifts.into_iter().map(|d| d.id).collect();
        ids.sort();
        assert!(!ids.is_empty(), "{}", backend.name());
        assert_eq!(ids, open_drifts, "{}", backend.name());
        // A store from a newer binary is refused and left as it is.
        backend.execute("UPDATE schema_version SET version = 99");
        let refused = store::read_objects(&backend.config(), &mut |_, _| Ok(())).unwrap_err();
        assert!(
            matches!(refused, store::Error::Schema { found: 99, .. }),
            "{}: {refused}",
            backend.name()
        );
        assert_eq!(backend.version(), Some(99), "{}", backend.name());
    }
    // A SQLite file that is not there is named and not created.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("sub").join("store.db");
    let error = store::read_objects(&config(&missing), &mut |_, _| Ok(())).unwrap_err();
    assert!(matches!(error, store::Error::Missing), "{error}");
    assert_eq!(error.kind(), "missing");
    assert!(!missing.parent().unwrap().exists());
}

/// What a relay's round reads before it sends (`deliver/relay/checks.rs`): a drift's state,
/// whether a firing notice is still pending before a resolve, and the withdrawal of a stopped
/// drift's reminders (once; a second withdrawal finds none).
fn the_relays_checks(writer: &mut dyn Store, outbox: &mut dyn Outbox) {
    let firing = drift_of(
        "drift-f",
        "v1",
        "ns",
        Severity::Warning,
        1_000,
        Some(1_000),
        None,
    );
    let stopped = drift_of(
        "drift-r",
        "v1",
        "ns",
        Severity::Warning,
        1_000,
        Some(1_000),
        Some(2_000),
    );
    let mut reminder = queued("r", "hook");
    reminder.notice.kind = NoticeKind::Repeat;
    writer
        .commit(&Batch {
            drifts: vec![firing, stopped],
            outbox: vec![queued("f", "hook"), reminder],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        outbox.drift_state("drift-f").unwrap(),
        Some(DriftState::Firing)
    );
    assert_eq!(
        outbox.drift_state("drift-r").unwrap(),
        Some(DriftState::Resolved)
    );
    assert_eq!(outbox.drift_state("drift-none").unwrap(), None);
    // The firing notice (queued at 1,000) is pending: a resolve queued after it waits.
    assert!(outbox
        .firing_pending_before("drift-f", "hook", 2_000)
        .unwrap());
    assert!(!outbox
        .firing_pending_before("drift-f", "hook", 500)
        .unwrap());
    assert!(!outbox
        .firing_pending_before("drift-f", "other", 2_000)
        .unwrap());
    assert_eq!(
        outbox
            .cancel_reminders("drift-r", "hook", "me", 3_000, None)
            .unwrap(),
        1
    );
    assert_eq!(
        outbox
            .cancel_reminders("drift-r", "hook", "me", 3_000, None)
            .unwrap(),
        0
    );
    assert_eq!(ids_in(outbox, OutboxState::Pending), ["f"]);
    // A reminder held by another relay's claim stays until the claim lapses; one in the
    // caller's own message on its way stays (that message settles it); one the caller holds
    // for no message on its way (a send a store error cut short) goes.
    let reminder = |id: &str| {
        let mut row = queued(id, "hook");
        row.notice.kind = NoticeKind::Repeat;
        row.drift_id = "drift-r".into();
        row
    };
    writer
        .commit(&Batch {
            outbox: vec![reminder("r2"), reminder("r3"), reminder("r4")],
            ..Default::default()
        })
        .unwrap();
    let (other, me) = ("other/1/a/hook", "me/1/b/hook");
    let lease = |owner: &str| store::Lease {
        owner: owner.into(),
        until: 10_000,
    };
    let r2 = ["r2".to_string()];
    assert_eq!(outbox.claim(&r2, "m1", &lease(other), 3_000).unwrap(), r2);
    let r3 = ["r3".to_string()];
    assert_eq!(outbox.claim(&r3, "m0", &lease(me), 3_000).unwrap(), r3);
    let r4 = ["r4".to_string()];
    assert_eq!(outbox.claim(&r4, "m5", &lease(me), 3_000).unwrap(), r4);
    let cancel = |outbox: &mut dyn Outbox, owner: &str, at: i64, sending: Option<&str>| {
        outbox
            .cancel_reminders("drift-r", "hook", owner, at, sending)
            .unwrap()
    };
    assert_eq!(
        cancel(outbox, me, 3_000, Some("m0")),
        1,
        "me sending m0: r4 is no part of it"
    );
    assert_eq!(ids_in(outbox, OutboxState::Pending), ["f", "r2", "r3"]);
    // The round's check before claiming (no message on its way): the caller's leftover claim.
    assert_eq!(
        cancel(outbox, me, 3_000, None),
        1,
        "r3 is mine, in no message on its way"
    );
    assert_eq!(ids_in(outbox, OutboxState::Pending), ["f", "r2"]);
    assert_eq!(
        cancel(outbox, other, 3_000, Some("m1")),
        0,
        "r2 is on its way"
    );
    assert_eq!(cancel(outbox, me, 3_000, None), 0, "r2 is the other's");
    assert_eq!(
        cancel(outbox, me, 10_000, None),
        1,
        "the other's claim lapsed"
    );
    assert_eq!(ids_in(outbox, OutboxState::Pending), ["f"]);
}

/// When a channel's next row is due for a relay, against the definition: the least of each
/// pending row's time, or its claim's end when another relay holds it past that time.
fn next_due_reads_as_defined(writer: &mut dyn Store, outbox: &mut dyn Outbox) {
    let at = |id: &str, not_before: i64| {
        let mut row = queued(id, "hook");
        row.not_before = not_before;
        row
    };
    writer
        .commit(&Batch {
            outbox: vec![
                at("a", 1_000),
                at("b", 2_000),
                at("c", 5_000),
                at("d", 9_000),
                NewOutbox {
                    not_before: 100,
                    ..queued("other-channel", "pager")
                },
            ],
            ..Default::default()
        })
        .unwrap();
    let (me, other) = ("me/1/a/hook", "other/1/b/hook");
    // Each row's claim's end, as claimed.
    let mut untils: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    let mut claim = |outbox: &mut dyn Outbox, ids: &[&str], until: i64| {
        let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        let lease = store::Lease {
            owner: other.into(),
            until,
        };
        assert_eq!(outbox.claim(&ids, &ids[0], &lease, 3_000).unwrap(), ids);
        for id in ids {
            untils.insert(id, until);
        }
        untils.clone()
    };
    let check = |outbox: &mut dyn Outbox,
                 untils: &std::collections::HashMap<String, i64>,
                 owner: &str,
                 expected: i64,
                 what: &str| {
        let defined = outbox
            .rows(Some(OutboxState::Pending), 50)
            .unwrap()
            .iter()
            .filter(|row| row.queued.channel == "hook")
            .map(|row| match row.claimed_by.as_deref() {
                Some(holder) if holder != owner && untils[&row.queued.id] > row.next_attempt_at => {
                    untils[&row.queued.id]
                }
                _ => row.next_attempt_at,
            })
            .min();
        assert_eq!(defined, Some(expected), "{what}: the definition");
        assert_eq!(
            outbox.next_due("hook", owner).unwrap(),
            Some(expected),
            "{what}"
        );
    };
    check(outbox, &Default::default(), me, 1_000, "nothing held");
    let untils = claim(outbox, &["a", "b"], 7_000);
    check(outbox, &untils, me, 5_000, "a and b held past c's time");
    check(outbox, &untils, other, 1_000, "the holder's own rows");
    // c's claim ends before its time: it holds nothing back. a and b's ends first.
    claim(outbox, &["c"], 4_000);
    let untils = claim(outbox, &["a", "b"], 3_500);
    check(outbox, &untils, me, 3_500, "a claim that lapses first");
    // Every row held past its own time: the earliest end of them all.
    claim(outbox, &["a", "b"], 8_000);
    claim(outbox, &["c"], 6_000);
    let untils = claim(outbox, &["d"], 9_500);
    check(outbox, &untils, me, 6_000, "every row held");
    assert_eq!(outbox.next_due("nothing", me).unwrap(), None);
}

#[test]
fn next_due_reads_as_defined_on_every_database() {
    for backend in Backend::all() {
        let mut opened = backend.open();
        next_due_reads_as_defined(opened.writer.as_mut(), opened.outbox.as_mut());
    }
    let store = TestStore::new();
    next_due_reads_as_defined(&mut store.clone(), &mut store.clone());
}

/// The writer's two withdrawals of a drift's reminders: a resolve spares the ones a relay has
/// claimed (on their way in a message: settled and recorded as it is), a silence takes them all
/// (relays do not read silences); neither touches another drift's reminders or a firing notice.
fn the_writers_withdrawals(writer: &mut dyn Store, outbox: &mut dyn Outbox) {
    let row = |id: &str, drift: &str, kind: NoticeKind| {
        let mut row = queued(id, "hook");
        row.notice.kind = kind;
        row.drift_id = drift.into();
        row
    };
    writer
        .commit(&Batch {
            outbox: vec![
                row("w1", "drift-w", NoticeKind::Repeat),
                row("w2", "drift-w", NoticeKind::Repeat),
                row("w3", "drift-w", NoticeKind::Repeat),
                row("wf", "drift-w", NoticeKind::Firing),
                row("x1", "drift-x", NoticeKind::Repeat),
            ],
            ..Default::default()
        })
        .unwrap();
    let lease = |until: i64| store::Lease {
        owner: "me/1/b/hook".into(),
        until,
    };
    let w2 = ["w2".to_string()];
    assert_eq!(outbox.claim(&w2, "w2", &lease(10_000), 3_000).unwrap(), w2);
    // Claimed by a process that died: the claim lapses at 4,000.
    let w3 = ["w3".to_string()];
    assert_eq!(outbox.claim(&w3, "w3", &lease(4_000), 3_000).unwrap(), w3);
    writer
        .commit(&Batch {
            resolved_reminders: vec!["drift-w".into()],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        ids_in(outbox, OutboxState::Pending),
        ["w2", "w3", "wf", "x1"],
        "a resolve withdraws only the unclaimed reminder"
    );
    // The message on its way settles its reminder: the trail records the delivery.
    outbox
        .settle(
            &settled(&["w2"], OutboxState::Delivered, Some("me/1/b/hook"), 3_500),
            &[],
        )
        .unwrap();
    assert_eq!(ids_in(outbox, OutboxState::Delivered), ["w2"]);
    writer
        .commit(&Batch {
            cancel_reminders: vec!["drift-w".into()],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        ids_in(outbox, OutboxState::Pending),
        ["wf", "x1"],
        "a silence withdraws the claimed reminder too"
    );
    assert_eq!(ids_in(outbox, OutboxState::Delivered), ["w2"]);
}

#[test]
fn the_writers_withdrawals_of_reminders_act_alike_on_every_database() {
    for backend in Backend::all() {
        let mut opened = backend.open();
        the_writers_withdrawals(opened.writer.as_mut(), opened.outbox.as_mut());
    }
    let store = TestStore::new();
    the_writers_withdrawals(&mut store.clone(), &mut store.clone());
}

#[test]
fn the_relays_checks_read_alike_on_every_database() {
    for backend in Backend::all() {
        let mut opened = backend.open();
        the_relays_checks(opened.writer.as_mut(), opened.outbox.as_mut());
    }
    let store = TestStore::new();
    the_relays_checks(&mut store.clone(), &mut store.clone());
}
