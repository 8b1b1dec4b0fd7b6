//! The writer lease of the PostgreSQL store (issue 19, store level): two store handles on one
//! database play two replicas. One holds the lease at a time; a takeover needs the lease expired
//! and bumps the epoch; a stale writer's commit fails with `LeaseLost` and writes nothing. Time
//! is injected (milliseconds passed to `acquire`, `renew` and `heartbeat`): no sleeps.

use drift_store::postgres::{PostgresStore, Target};
use drift_store::{Batch, Error, EventKey, Store};

use crate::pg::PgServer;

const SHARD: &str = "0";
const TTL: i64 = 10_000;

fn replica(url: &str) -> PostgresStore {
    PostgresStore::open(&Target::new(url, None, None).unwrap()).unwrap()
}

/// A new database on `server`, and replica `a` holding the shard's lease since 0.
fn holding(server: &PgServer) -> (String, PostgresStore) {
    let url = server.database();
    let mut a = replica(&url);
    a.acquire(SHARD, "a", 0, TTL)
        .unwrap()
        .expect("a free lease");
    (url, a)
}

fn event(id: &str, at: i64) -> Batch {
    Batch {
        events: vec![(
            EventKey {
                sent_at: at,
                source: "test".to_string(),
                id: id.to_string(),
            },
            at,
        )],
        ..Batch::default()
    }
}

fn events(server: &PgServer, url: &str) -> String {
    server.psql(
        PgServer::name_of(url),
        "SELECT string_agg(id, ',' ORDER BY id) FROM events",
    )
}

fn lease_row(server: &PgServer, url: &str) -> String {
    server.psql(
        PgServer::name_of(url),
        "SELECT holder || ' ' || epoch || ' ' || expires_at FROM writer_lease WHERE shard = '0'",
    )
}

fn assert_lost(result: Result<impl std::fmt::Debug, Error>, what: &str) {
    match result {
        Err(error @ Error::LeaseLost { .. }) => assert_eq!(error.kind(), "lease_lost"),
        other => panic!("{what}: expected LeaseLost, got {other:?}"),
    }
}

#[test]
fn a_stale_writer_cannot_commit_after_a_takeover() {
    let server = PgServer::shared();
    let url = server.database();
    let mut a = replica(&url);
    let mut b = replica(&url);

    let held = a
        .acquire(SHARD, "a", 1_000, TTL)
        .unwrap()
        .expect("a free lease");
    assert_eq!((held.epoch, held.expires_at), (1, 11_000));
    assert_eq!(b.acquire(SHARD, "b", 5_000, TTL).unwrap(), None);
    assert_eq!(b.acquire(SHARD, "b", 10_999, TTL).unwrap(), None);
    a.commit(&event("e1", 2_000)).unwrap();

    // A went silent: at its expiry B takes over, with the next epoch.
    let taken = b
        .acquire(SHARD, "b", 11_000, TTL)
        .unwrap()
        .expect("an expired lease");
    assert_eq!((taken.epoch, taken.expires_at), (2, 21_000));
    assert_eq!(lease_row(server, &url), "b 2 21000");

    // A does not know yet: its next commit, on the same connection, fails and writes nothing.
    assert_lost(
        a.commit(&event("e2", 12_000)),
        "a's commit after the takeover",
    );
    assert_eq!(events(server, &url), "e1");
    assert_lost(a.heartbeat(12_000), "a's heartbeat");
    assert_lost(a.prune_events(i64::MAX), "a's pruning");
    assert_eq!(events(server, &url), "e1");
    assert_lost(a.renew(12_000), "a's renewal");
    assert_eq!(a.acquire(SHARD, "a", 12_000, TTL).unwrap(), None);
    assert_eq!(lease_row(server, &url), "b 2 21000");

    // B writes, and its heartbeat keeps the lease.
    b.commit(&event("e3", 13_000)).unwrap();
    b.heartbeat(14_000).unwrap();
    assert_eq!(lease_row(server, &url), "b 2 24000");
    assert_eq!(events(server, &url), "e1,e3");
}

#[test]
fn a_stale_writer_cannot_commit_even_on_a_fresh_connection() {
    // What an advisory lock could not do: A's session is gone (a server restart closes every
    // connection), B took over, A reconnects; the epoch still fences A's commit. A server of its
    // own: it restarts it.
    let server = PgServer::start();
    let (url, mut a) = holding(&server);
    server.restart();
    let mut b = replica(&url);
    b.acquire(SHARD, "b", TTL, TTL)
        .unwrap()
        .expect("an expired lease");
    // The call that finds the connection closed fails (as for any store error), the next one
    // reconnects and is fenced.
    let _ = a.commit(&event("e1", 1));
    assert_lost(a.commit(&event("e1", 1)), "a's commit on a new connection");
    assert_eq!(events(&server, &url), "");
}

#[test]
fn the_holder_renews_and_a_stale_epoch_cannot() {
    let server = PgServer::shared();
    let (url, mut a) = holding(server);
    let mut b = replica(&url);
    // Acquiring is not renewing, even for the holder.
    assert_eq!(a.acquire(SHARD, "a", 5_000, TTL).unwrap(), None);

    assert_eq!(a.renew(8_000).unwrap().expires_at, 18_000);
    // Without the renewal B would have it at 10 000.
    assert_eq!(b.acquire(SHARD, "b", 15_000, TTL).unwrap(), None);
    a.heartbeat(16_000).unwrap();
    assert_eq!(a.lease().map(|lease| lease.expires_at), Some(26_000));
    assert_eq!(b.acquire(SHARD, "b", 25_999, TTL).unwrap(), None);
    // A renewal with an older clock never shortens the lease.
    assert_eq!(a.renew(1_000).unwrap().expires_at, 26_000);
    assert_eq!(lease_row(server, &url), "a 1 26000");

    // The same holder name with a stale epoch: `a` went silent and a restarted `a` (another
    // handle, same name) took the lease again. The old handle can neither renew nor commit.
    let mut a_again = replica(&url);
    let again = a_again
        .acquire(SHARD, "a", 26_000, TTL)
        .unwrap()
        .expect("an expired lease");
    assert_eq!(again.epoch, 2);
    assert_lost(a.renew(26_001), "a renewal with epoch 1");
    assert_lost(a.commit(&event("stale", 26_002)), "a commit with epoch 1");
    assert_eq!(lease_row(server, &url), "a 2 36000");
    a_again.commit(&event("fresh", 26_003)).unwrap();
    assert_eq!(events(server, &url), "fresh");
}

#[test]
fn a_store_without_a_lease_is_unfenced_and_cannot_renew() {
    // The single-writer deployment (no replicas, `store migrate`) takes no lease.
    let server = PgServer::shared();
    let url = server.database();
    let mut a = replica(&url);
    a.commit(&event("e1", 1)).unwrap();
    a.heartbeat(2).unwrap();
    assert!(matches!(a.renew(3), Err(Error::Unavailable(_))));
    assert_eq!(lease_row(server, &url), "");
    assert_eq!(events(server, &url), "e1");
}

/// Polls `sql` (through psql) until it prints `want`: waiting for a state of the server, not
/// for time; the deadline only turns a hang into a failure.
fn until(server: &PgServer, url: &str, sql: &str, want: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let got = server.psql(PgServer::name_of(url), sql);
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{sql}: still {got:?}, waiting for {want:?}"
        );
        std::thread::yield_now();
    }
}

/// Waits until a session of the test's database waits on a lock: `waiter`'s. Fails at once if
/// `waiter` ended first: it did not wait, or gave its wait up.
fn until_waiting<T>(server: &PgServer, url: &str, waiter: &std::thread::JoinHandle<T>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if server.psql(PgServer::name_of(url), WAITING) == "1" {
            return;
        }
        assert!(
            !waiter.is_finished(),
            "the thread expected to wait on a lock ended without being seen waiting"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no session waits on a lock"
        );
        std::thread::yield_now();
    }
}

/// How many other sessions of the test's database are blocked on a lock (the server is the
/// test run's: other tests' sessions are on other databases).
const WAITING: &str = "SELECT count(*) FROM pg_stat_activity \
     WHERE wait_event_type = 'Lock' AND pid != pg_backend_pid() AND datname = current_database()";
/// How many other sessions of the test's database are idle inside a transaction after a
/// statement starting with `statement`: after its `BEGIN` alone a session is idle in a
/// transaction too, and a test that went on then raced the statement it waited for (seen in
/// CI: A's commit ran before the takeover's update, and the update waited for A instead).
fn idle_in_transaction_after(statement: &str) -> String {
    format!(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE state = 'idle in transaction' AND pid != pg_backend_pid() \
         AND datname = current_database() AND query LIKE '{statement}%'"
    )
}

fn send(session: &mut std::process::Child, sql: &str) {
    use std::io::Write;
    let stdin = session.stdin.as_mut().expect("piped stdin");
    stdin.write_all(sql.as_bytes()).unwrap();
    stdin.flush().unwrap();
}

fn finish(mut session: std::process::Child) {
    drop(session.stdin.take());
    assert!(session.wait().unwrap().success(), "the psql session failed");
}

#[test]
fn a_commit_and_a_takeover_in_flight_wait_for_each_other() {
    let server = PgServer::shared();
    let url = server.database();
    let database = PgServer::name_of(&url).to_string();

    // A takeover in flight (another replica's acquire, not yet committed) and A's commit: the
    // commit waits for it, then finds the new epoch and writes nothing.
    let mut a = replica(&url);
    a.acquire(SHARD, "a", 0, TTL)
        .unwrap()
        .expect("a free lease");
    let mut takeover = server.session(&database);
    send(
        &mut takeover,
        "BEGIN;\nUPDATE writer_lease SET holder = 'b', epoch = epoch + 1, expires_at = 30000;\n",
    );
    until(
        server,
        &url,
        &idle_in_transaction_after("UPDATE writer_lease"),
        "1",
    );
    let committing = std::thread::spawn(move || {
        let result = a.commit(&event("e1", 1));
        (a, result)
    });
    until_waiting(server, &url, &committing);
    send(&mut takeover, "COMMIT;\n");
    finish(takeover);
    let (_, result) = committing.join().unwrap();
    assert_lost(result, "a's commit that waited for the takeover");
    assert_eq!(events(server, &url), "");

    // The other way round: A's commit in flight (what `fence` runs, then a write, uncommitted)
    // and a standby's acquire after the expiry: the acquire waits for the commit, then takes
    // the lease, and the commit's rows are there for the new writer to load.
    let mut a = replica(&url);
    assert_eq!(a.acquire(SHARD, "a", 20_000, TTL).unwrap(), None);
    a.acquire(SHARD, "a", 30_000, TTL)
        .unwrap()
        .expect("b's expired lease");
    // Opened first: opening runs the schema's statements, which would wait for the in-flight
    // insert's table lock, and the wait watched below must be the acquire's, on the lease row.
    let mut c = replica(&url);
    let mut commit = server.session(&database);
    send(
        &mut commit,
        "BEGIN;\nSELECT 1 FROM writer_lease WHERE shard = '0' AND holder = 'a' AND epoch = 3 FOR UPDATE;\n\
         INSERT INTO events (source, id, received_at) VALUES ('test', 'in-flight', 1);\n",
    );
    until(
        server,
        &url,
        &idle_in_transaction_after("INSERT INTO events"),
        "1",
    );
    let acquiring = std::thread::spawn(move || {
        let taken = c.acquire(SHARD, "c", 40_000, TTL);
        (c, taken)
    });
    until_waiting(server, &url, &acquiring);
    send(&mut commit, "COMMIT;\n");
    finish(commit);
    let (mut c, taken) = acquiring.join().unwrap();
    assert_eq!(taken.unwrap().map(|lease| lease.epoch), Some(4));
    assert_eq!(events(server, &url), "in-flight");
    assert_lost(a.commit(&event("late", 2)), "a's commit after c took over");
    c.commit(&event("c1", 3)).unwrap();
    assert_eq!(events(server, &url), "c1,in-flight");
}

#[test]
fn a_released_lease_is_taken_at_once_and_fences_its_old_holder() {
    let server = PgServer::shared();
    let (url, mut a) = holding(server);
    let mut b = replica(&url);
    assert_eq!(b.acquire(SHARD, "b", 1, TTL).unwrap(), None);
    a.release().unwrap();
    // Long before the ttl would have run out.
    let taken = b
        .acquire(SHARD, "b", 2, TTL)
        .unwrap()
        .expect("a released lease");
    assert_eq!(taken.epoch, 2);
    assert_lost(
        a.commit(&event("after", 3)),
        "a's commit after its release and a takeover",
    );
    // A stale holder cannot release its successor's lease.
    assert_lost(a.release(), "a's second release");
    assert_eq!(lease_row(server, &url), "b 2 10002");
    // A store without a lease has nothing to release.
    replica(&url).release().unwrap();
    assert_eq!(events(server, &url), "");
}
