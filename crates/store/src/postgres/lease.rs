//! The writer lease of the PostgreSQL store (issue 19): several replicas may run against one
//! database, and per shard one of them, the holder of the `writer_lease` row, is the writer.
//!
//! Why a lease row and not an advisory lock (`pg_advisory_lock`): an advisory lock belongs to a
//! database session. When the connection drops (a network blip, a server restart, an idle
//! timeout) the lock is released silently, another replica takes it, and the old writer's next
//! call opens a fresh connection ([`super::conn::Conn`] reconnects by design) whose transaction
//! knows nothing of the lock it lost: its commit would interleave with the new writer's. A lease
//! row carries a fencing token, the `epoch`, that survives connection loss: each commit's
//! transaction locks the row and checks `(holder, epoch)` first ([`fence`]), whatever connection
//! it runs on, so a stale writer's commit fails instead of interleaving. The cost is a clock:
//! the expiry is in milliseconds of the replicas' clocks, so a standby may take over only after
//! `ttl` of silence (plus the skew between clocks); the fencing itself needs no clock.
//!
//! Why the row lock makes this safe: the commit's `SELECT ... FOR UPDATE` holds the lease row
//! until the transaction ends, and a takeover is an `UPDATE` of that row, so a takeover waits
//! for a running commit and a commit that starts after a takeover sees the new epoch and rolls
//! back. A standby must therefore load state *after* it acquired the lease: it then sees every
//! commit of the writer before it.
//!
//! A commit is fenced on `(holder, epoch)` only, not on the expiry: if the epoch is unchanged,
//! nobody took over, so a writer that missed a renewal but still holds the epoch has written
//! nothing that conflicts with anyone.

use tokio_postgres::GenericClient;

use crate::Error;
use drift_model::Millis;

/// The table, created with the schema (PostgreSQL only: a SQLite store is one pod's file and
/// needs no lease). Not a schema version: the versions are shared with SQLite, and the table is
/// new and additive, so `CREATE TABLE IF NOT EXISTS` on every open is enough; an older binary
/// ignores it.
pub(super) const TABLE: &str = r#"
CREATE TABLE IF NOT EXISTS writer_lease (
    shard TEXT COLLATE "C" PRIMARY KEY,
    holder TEXT COLLATE "C" NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
"#;

/// A lease this store holds: the fencing token of its commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterLease {
    /// The shard it is the writer of.
    pub shard: String,
    /// This replica's name (unique among the replicas, e.g. `{pod}/{pid}/{start}`).
    pub holder: String,
    /// Bumped by every acquisition: the fencing token.
    pub epoch: i64,
    /// Until when no other replica may take it (milliseconds since the epoch).
    pub expires_at: Millis,
    /// How long an acquisition or a renewal holds it.
    pub ttl_ms: Millis,
}

/// Takes the lease of `shard` for `holder` when it is free (no row) or expired at `now`,
/// bumping the epoch; `None` when another holder's lease is still running (or this holder's
/// own: acquiring is not renewing, and a second acquisition by one name would be two writers).
pub(super) async fn acquire(
    client: &impl GenericClient,
    shard: &str,
    holder: &str,
    now: Millis,
    ttl_ms: Millis,
) -> Result<Option<WriterLease>, Error> {
    let expires_at = now.saturating_add(ttl_ms);
    let row = client
        .query_opt(
            "INSERT INTO writer_lease (shard, holder, epoch, expires_at, renewed_at)
             VALUES ($1, $2, 1, $3, $4)
             ON CONFLICT (shard) DO UPDATE SET holder = excluded.holder,
                 epoch = writer_lease.epoch + 1, expires_at = excluded.expires_at,
                 renewed_at = excluded.renewed_at
             WHERE writer_lease.expires_at <= $4
             RETURNING epoch",
            &[&shard, &holder, &expires_at, &now],
        )
        .await?;
    Ok(match row {
        Some(row) => Some(WriterLease {
            shard: shard.to_string(),
            holder: holder.to_string(),
            epoch: row.try_get(0)?,
            expires_at,
            ttl_ms,
        }),
        None => None,
    })
}

/// Extends `lease` to `now + ttl` if its holder and epoch still match the row; else
/// [`Error::LeaseLost`].
pub(super) async fn renew(
    client: &impl GenericClient,
    lease: &WriterLease,
    now: Millis,
) -> Result<Millis, Error> {
    let expires_at = now.saturating_add(lease.ttl_ms);
    let updated = client
        .execute(
            "UPDATE writer_lease SET expires_at = GREATEST(expires_at, $4),
                 renewed_at = GREATEST(renewed_at, $5)
             WHERE shard = $1 AND holder = $2 AND epoch = $3",
            &[&lease.shard, &lease.holder, &lease.epoch, &expires_at, &now],
        )
        .await?;
    if updated == 1 {
        Ok(expires_at)
    } else {
        Err(lost(lease))
    }
}

/// Gives the lease up (a graceful stop): it expires now, so a standby need not wait out the
/// ttl. `renewed_at` stays: the shard's writer was alive then (other shards take over a shard's
/// notifications only long after its last renewal, not after every restart). Only if `(holder, epoch)` still match: a stale holder cannot release its successor's.
/// The epoch stays, so the releasing store's own later commits pass the fence until a standby
/// takes over, and fail after.
pub(super) async fn release(client: &impl GenericClient, lease: &WriterLease) -> Result<(), Error> {
    let updated = client
        .execute(
            "UPDATE writer_lease SET expires_at = LEAST(expires_at, 0)
             WHERE shard = $1 AND holder = $2 AND epoch = $3",
            &[&lease.shard, &lease.holder, &lease.epoch],
        )
        .await?;
    if updated == 1 {
        Ok(())
    } else {
        Err(lost(lease))
    }
}

/// The first statement of every writing transaction when a lease is held: locks the lease row
/// until the transaction ends and checks it is still ours (see the module comment).
pub(super) async fn fence(
    client: &impl GenericClient,
    lease: Option<&WriterLease>,
) -> Result<(), Error> {
    let Some(lease) = lease else {
        // No lease taken: the single-writer deployment of before issue 19 (and `store migrate`).
        return Ok(());
    };
    let held = client
        .query_opt(
            "SELECT 1 FROM writer_lease WHERE shard = $1 AND holder = $2 AND epoch = $3
             FOR UPDATE",
            &[&lease.shard, &lease.holder, &lease.epoch],
        )
        .await?
        .is_some();
    if held {
        Ok(())
    } else {
        Err(lost(lease))
    }
}

/// Who holds the lease of `shard`, if anyone ever took it.
pub(super) async fn holder(
    client: &impl GenericClient,
    shard: &str,
) -> Result<Option<crate::LeaseHolder>, Error> {
    let row = client
        .query_opt(
            "SELECT holder, epoch, expires_at FROM writer_lease WHERE shard = $1",
            &[&shard],
        )
        .await?;
    Ok(match row {
        Some(row) => Some(crate::LeaseHolder {
            holder: row.try_get(0)?,
            epoch: row.try_get(1)?,
            expires_at: row.try_get(2)?,
        }),
        None => None,
    })
}

fn lost(lease: &WriterLease) -> Error {
    Error::LeaseLost {
        shard: lease.shard.clone(),
        holder: lease.holder.clone(),
        epoch: lease.epoch,
    }
}
