//! The writer lease of the PostgreSQL store (issue 19, store level): two store handles on one
//! database play two replicas. One holds the lease at a time; a takeover needs the lease expired
//! and bumps the epoch; a stale writer's commit fails with `LeaseLost` and writes nothing. Time
//! is injected (milliseconds passed to `acquire`, `renew` and `heartbeat`): no sleeps.

use drift_sentinel::store::postgres::{PostgresStore, Target};
use drift_sentinel::store::{Batch, Error, EventKey, Store};

use crate::pg::PgServer;

const SHARD: &str = "0";
const TTL: i64 = 10_000;

fn replica(url: &str) -> PostgresStore {
    PostgresStore::open(&Target::new(url, None, None).unwrap()).unwrap()
}

fn event(id: &str, at: i64) -> Batch {
    Batch {
        events: vec![(
            EventKey {
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
    let server = PgServer::start();
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
    assert_eq!(lease_row(&server, &url), "b 2 21000");

    // A does not know yet: its next commit, on the same connection, fails and writes nothing.
    assert_lost(
        a.commit(&event("e2", 12_000)),
        "a's commit after the takeover",
    );
    assert_eq!(events(&server, &url), "e1");
    assert_lost(a.heartbeat(12_000), "a's heartbeat");
    assert_lost(a.prune_events(i64::MAX), "a's pruning");
    assert_eq!(events(&server, &url), "e1");
    assert_lost(a.renew(12_000), "a's renewal");
    assert_eq!(a.acquire(SHARD, "a", 12_000, TTL).unwrap(), None);
    assert_eq!(lease_row(&server, &url), "b 2 21000");

    // B writes, and its heartbeat keeps the lease.
    b.commit(&event("e3", 13_000)).unwrap();
    b.heartbeat(14_000).unwrap();
    assert_eq!(lease_row(&server, &url), "b 2 24000");
    assert_eq!(events(&server, &url), "e1,e3");
}

#[test]
fn a_stale_writer_cannot_commit_even_on_a_fresh_connection() {
    // What an advisory lock could not do: A's session is gone (a server restart closes every
    // connection), B took over, A reconnects; the epoch still fences A's commit.
    let server = PgServer::start();
    let url = server.database();
    let mut a = replica(&url);
    a.acquire(SHARD, "a", 0, TTL)
        .unwrap()
        .expect("a free lease");
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
    let server = PgServer::start();
    let url = server.database();
    let mut a = replica(&url);
    let mut b = replica(&url);
    a.acquire(SHARD, "a", 0, TTL)
        .unwrap()
        .expect("a free lease");
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
    assert_eq!(lease_row(&server, &url), "a 1 26000");

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
    assert_eq!(lease_row(&server, &url), "a 2 36000");
    a_again.commit(&event("fresh", 26_003)).unwrap();
    assert_eq!(events(&server, &url), "fresh");
}

#[test]
fn a_store_without_a_lease_is_unfenced_and_cannot_renew() {
    // The single-writer deployment (no replicas, `store migrate`) takes no lease.
    let server = PgServer::start();
    let url = server.database();
    let mut a = replica(&url);
    a.commit(&event("e1", 1)).unwrap();
    a.heartbeat(2).unwrap();
    assert!(matches!(a.renew(3), Err(Error::Unavailable(_))));
    assert_eq!(lease_row(&server, &url), "");
    assert_eq!(events(&server, &url), "e1");
}
