//! The PostgreSQL store (`store.url`): the same tables, schema versions and answers as the
//! SQLite store, in a database that outlives the pod.
//!
//! Each role has its own connection, as with SQLite: the writer ([`PostgresStore`]), the relays
//! (`outbox`) and the audit reader (`audit`); `schema` versions the layout and migrates it
//! when the writer opens it. `conn` says how a connection is used from synchronous code. The
//! single-writer assumption stays: one process writes a database, and when several replicas share
//! one, the writer is the holder of the `lease` and every commit is fenced on it.
//!
//! The statements are the shared ones (`sql/`), with the outbox's shards; what is PostgreSQL's
//! own is here: the connections and TLS, the pipelined commit, the duplicates of a round in one
//! question, the writer lease and the shards' notifications.

mod audit;
pub(crate) mod conn;
mod lease;
mod outbox;
pub(crate) mod read;
mod schema;

use std::sync::Arc;

use tokio_postgres::types::ToSql;

pub(crate) use audit::PostgresAudit;
pub use conn::Target;
pub use lease::WriterLease;
pub(crate) use outbox::PostgresOutbox;

use self::conn::{wait, Conn};
use crate::rows::{drift_body, evidence_text, silence_body};
use crate::sql::{decode, queries, Dialect, Row};
use crate::{
    Batch, Error, EventKey, ObjectLoader, Opened, SilenceChange, Snapshot, Store, StoredSilence,
};
use drift_model::{Drift, Millis};

/// The statements' dialect.
const SQL: Dialect = Dialect::Postgres;

impl Row for tokio_postgres::Row {
    fn text(&self, index: usize) -> Result<&str, Error> {
        Ok(self.try_get(index)?)
    }

    fn opt_text(&self, index: usize) -> Result<Option<&str>, Error> {
        Ok(self.try_get(index)?)
    }

    fn int(&self, index: usize) -> Result<i64, Error> {
        Ok(self.try_get(index)?)
    }

    fn opt_int(&self, index: usize) -> Result<Option<i64>, Error> {
        Ok(self.try_get(index)?)
    }
}

/// Decodes each of `rows`.
pub(crate) fn collect<T>(
    rows: &[tokio_postgres::Row],
    decode: impl FnMut(&tokio_postgres::Row) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    rows.iter().map(decode).collect()
}

/// Opens the database for every role: the writer first (it creates and migrates the schema),
/// then the outbox and the audit reader.
pub fn open(target: &Target) -> Result<Opened, Error> {
    let writer = PostgresStore::open(target)?;
    let outbox = PostgresOutbox::open(target)?;
    let audit = PostgresAudit::open(target)?;
    let leases = PostgresLeases {
        conn: Conn::open(target)?,
    };
    Ok(Opened {
        writer: Box::new(writer),
        outbox: Box::new(outbox),
        audit: Arc::new(audit),
        // Nothing runs in the background: PostgreSQL checkpoints by itself.
        background: Box::new(()),
        leases: Some(Box::new(leases)),
    })
}

/// The writer leases on a connection of their own (the lease keeper's).
pub(crate) struct PostgresLeases {
    conn: Conn,
}

impl super::Leases for PostgresLeases {
    fn acquire(
        &mut self,
        shard: &str,
        holder: &str,
        now: Millis,
        ttl_ms: Millis,
    ) -> Result<Option<WriterLease>, Error> {
        let client = self.conn.client()?;
        wait(lease::acquire(&*client, shard, holder, now, ttl_ms))
    }

    fn renew(&mut self, held: &WriterLease, now: Millis) -> Result<Millis, Error> {
        let client = self.conn.client()?;
        wait(lease::renew(&*client, held, now))
    }

    fn release(&mut self, held: &WriterLease) -> Result<(), Error> {
        let client = self.conn.client()?;
        wait(lease::release(&*client, held))
    }

    fn holder(&mut self, shard: &str) -> Result<Option<super::LeaseHolder>, Error> {
        let client = self.conn.client()?;
        wait(lease::holder(&*client, shard))
    }
}

/// The PostgreSQL store's writer.
pub struct PostgresStore {
    conn: Conn,
    /// The writer lease taken with [`PostgresStore::acquire`]: when set, every writing
    /// transaction checks it first ([`lease::fence`]).
    lease: Option<WriterLease>,
    /// The shard its queued notifications belong to (`None`: a deployment without shards).
    shard: Option<String>,
}

impl PostgresStore {
    /// Connects and brings the schema to the latest version (or refuses a newer one).
    pub fn open(target: &Target) -> Result<PostgresStore, Error> {
        let mut conn = Conn::open(target)?;
        schema::migrate(&mut conn)?;
        Ok(PostgresStore {
            conn,
            lease: None,
            shard: None,
        })
    }

    /// Takes the writer lease of `shard` for `holder` when it is free or expired at `now`
    /// (bumping its epoch); from then on every commit is fenced on it. `None` (and no lease kept)
    /// when another replica holds it. Load state only after this succeeded: the previous
    /// writer's commits are then all visible.
    pub fn acquire(
        &mut self,
        shard: &str,
        holder: &str,
        now: Millis,
        ttl_ms: Millis,
    ) -> Result<Option<WriterLease>, Error> {
        let client = self.conn.client()?;
        let taken = wait(lease::acquire(&*client, shard, holder, now, ttl_ms))?;
        if let Some(taken) = &taken {
            self.lease = Some(taken.clone());
        }
        Ok(taken)
    }

    /// Extends the held lease to `now + ttl` ([`Store::heartbeat`] does this too);
    /// [`Error::LeaseLost`] when another replica took it, or `Unavailable` when none was taken.
    pub fn renew(&mut self, now: Millis) -> Result<WriterLease, Error> {
        let Some(held) = self.lease.clone() else {
            return Err(Error::Unavailable("no writer lease taken".to_string()));
        };
        let client = self.conn.client()?;
        let expires_at = wait(lease::renew(&*client, &held, now))?;
        let renewed = WriterLease {
            expires_at: expires_at.max(held.expires_at),
            ..held
        };
        self.lease = Some(renewed.clone());
        Ok(renewed)
    }

    /// Gives the held lease up at once (a graceful stop), so a standby takes over without
    /// waiting out the ttl; [`Error::LeaseLost`] when another replica has it already. The store
    /// keeps the lease as its fence: its commits fail once a standby took over.
    pub fn release(&mut self) -> Result<(), Error> {
        let Some(held) = self.lease.clone() else {
            return Ok(());
        };
        let client = self.conn.client()?;
        wait(lease::release(&*client, &held))?;
        if let Some(held) = self.lease.as_mut() {
            held.expires_at = held.expires_at.min(0);
        }
        Ok(())
    }

    /// The lease this store holds, as last acquired or renewed (the database may know better:
    /// a commit or renewal finds out).
    pub fn lease(&self) -> Option<&WriterLease> {
        self.lease.as_ref()
    }
}

impl Store for PostgresStore {
    fn fence(&mut self, lease: WriterLease) -> Result<(), Error> {
        self.lease = Some(lease);
        Ok(())
    }

    fn assign_shard(&mut self, shard: &str) -> Result<(), Error> {
        self.shard = Some(shard.to_string());
        Ok(())
    }

    fn load(&mut self, objects: &mut ObjectLoader<'_>) -> Result<Snapshot, Error> {
        let client = self.conn.client()?;
        let mut snapshot = Snapshot::default();
        // Streamed: each row is decoded as it arrives, while the connection's thread reads the
        // next ones (a takeover loads every tracked object; buffering them all first would
        // serialize the transfer and the decoding).
        wait(async {
            use futures_util::TryStreamExt as _;
            let rows = client
                .query_raw(queries::OBJECTS.text(SQL), std::iter::empty::<&str>())
                .await?;
            let mut rows = std::pin::pin!(rows);
            while let Some(row) = rows.try_next().await? {
                objects(row.text(0)?, row.text(1)?).map_err(crate::rows::corrupt("objects"))?;
            }
            Ok::<_, Error>(())
        })?;
        let silences = wait(client.query(queries::SILENCES.text(SQL), &[]))?;
        snapshot.silences = collect(&silences, decode::silence)?;
        let drifts = wait(client.query(queries::OPEN_DRIFTS.text(SQL), &[]))?;
        snapshot.drifts = collect(&drifts, |row| decode::drift(row, 0))?;
        Ok(snapshot)
    }

    fn committed_keys(
        &mut self,
        keys: &[EventKey],
    ) -> Result<std::collections::HashSet<EventKey>, Error> {
        let client = self.conn.client()?;
        let held = self.lease.as_ref();
        // The lost commit's transaction holds the lease row until it ends (or the server ends
        // it, idle in a transaction): locking the row first waits for it, so the keys read after
        // are its outcome, not a moment before it.
        wait(async {
            let transaction = client.transaction().await?;
            lease::fence(&transaction, held).await?;
            transaction.commit().await?;
            Ok::<_, Error>(())
        })?;
        self.duplicates(keys)
    }

    fn is_duplicate(&mut self, key: &EventKey) -> Result<bool, Error> {
        let client = self.conn.client()?;
        Ok(wait(client.query_opt(
            queries::IS_DUPLICATE.text(SQL),
            &[&key.sent_at, &key.source, &key.id],
        ))?
        .is_some())
    }

    fn silences(&mut self) -> Result<Vec<StoredSilence>, Error> {
        let client = self.conn.client()?;
        let rows = wait(client.query(queries::SILENCES.text(SQL), &[]))?;
        collect(&rows, decode::silence)
    }

    fn remediation_outcome(
        &mut self,
        seq: i64,
    ) -> Result<Option<drift_model::remediation::Outcome>, Error> {
        let client = self.conn.client()?;
        let row = wait(client.query_opt(queries::REMEDIATION_OUTCOME.text(SQL), &[&seq]))?;
        let text: Option<String> = row.map(|row| row.try_get(0)).transpose()?;
        Ok(text.and_then(|text| drift_model::remediation::Outcome::parse(&text)))
    }

    fn duplicates(
        &mut self,
        keys: &[EventKey],
    ) -> Result<std::collections::HashSet<EventKey>, Error> {
        if keys.is_empty() {
            return Ok(std::collections::HashSet::new());
        }
        let sent_at: Vec<Millis> = keys.iter().map(|key| key.sent_at).collect();
        let sources: Vec<&str> = keys.iter().map(|key| key.source.as_str()).collect();
        let ids: Vec<&str> = keys.iter().map(|key| key.id.as_str()).collect();
        let client = self.conn.client()?;
        // The asked keys come back (not the stored ones): a key stored before version 6 has
        // `sent_at` 0 and stands for any (`queries::IS_DUPLICATE`).
        let rows = wait(client.query(
            "SELECT k.sent_at, k.source, k.id
             FROM UNNEST($1::bigint[], $2::text[], $3::text[]) AS k(sent_at, source, id)
             WHERE EXISTS (SELECT 1 FROM events e
                           WHERE e.sent_at IN (k.sent_at, 0)
                             AND e.source = k.source AND e.id = k.id)",
            &[&sent_at, &sources, &ids],
        ))?;
        rows.iter()
            .map(|row| {
                Ok(EventKey {
                    sent_at: row.try_get(0)?,
                    source: row.try_get(1)?,
                    id: row.try_get(2)?,
                })
            })
            .collect()
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        // Encoded first: a row that cannot be encoded fails the commit before it begins.
        let drifts = encode_all(&batch.drifts, drift_body)?;
        let history = encode_all(&batch.history, |transition| {
            evidence_text(&transition.drift.evidence)
        })?;
        let outbox = outbox::encode(&batch.outbox)?;
        let remediations = encode_all(&batch.remediations, crate::rows::attempt_body)?;
        let settled = encode_all(&batch.settled_remediations, |(_, _, attempt)| {
            crate::rows::attempt_body(attempt)
        })?;
        let client = self.conn.client()?;
        let held = self.lease.as_ref();
        wait(async {
            let transaction = client.transaction().await?;
            // First, so the lease row stays locked until the commit: a takeover waits for it.
            lease::fence(&transaction, held).await?;
            // Each table's rows are sent pipelined (every statement of a group without waiting
            // for the answer to the one before), so a round of many events costs a few round
            // trips to the server, not one per row; the groups keep their order.
            let statements = statements(&transaction).await?;
            pipelined(batch.events.iter().map(|(key, received_at)| {
                transaction.execute_raw(
                    &statements.event,
                    [
                        &key.sent_at as &(dyn ToSql + Sync),
                        &key.source,
                        &key.id,
                        received_at,
                    ],
                )
            }))
            .await?;
            pipelined(batch.objects.iter().map(|object| {
                transaction.execute_raw(
                    &statements.object,
                    [
                        &object.cluster as &(dyn ToSql + Sync),
                        &object.uid,
                        &object.kind,
                        &object.namespace,
                        &object.name,
                        &object.body,
                    ],
                )
            }))
            .await?;
            pipelined(batch.removed_objects.iter().map(|key| {
                transaction.execute_raw(
                    &statements.remove_object,
                    [&key.cluster as &(dyn ToSql + Sync), &key.uid],
                )
            }))
            .await?;
            let drift_params: Vec<(&Drift, &String, &'static str, &'static str, &str)> = drifts
                .iter()
                .map(|(drift, body)| {
                    (
                        *drift,
                        body,
                        drift.state.as_str(),
                        drift.severity.as_str(),
                        drift_model::group::api_group(&drift.api_version),
                    )
                })
                .collect();
            pipelined(
                drift_params
                    .iter()
                    .map(|(drift, body, state, severity, group)| {
                        let params: [&(dyn ToSql + Sync); 14] = [
                            &drift.id,
                            &drift.class,
                            state,
                            severity,
                            &drift.cluster,
                            &drift.namespace,
                            &drift.kind,
                            &drift.name,
                            &drift.uid,
                            &drift.since,
                            &drift.fired_at,
                            &drift.resolved_at,
                            *body,
                            group,
                        ];
                        transaction.execute_raw(&statements.drift, params)
                    }),
            )
            .await?;
            let history_params: Vec<_> = history
                .iter()
                .map(|(transition, evidence)| {
                    (
                        transition,
                        evidence,
                        transition.from.map(|state| state.as_str()),
                        transition.drift.state.as_str(),
                    )
                })
                .collect();
            pipelined(
                history_params
                    .iter()
                    .map(|(transition, evidence, from, to)| {
                        transaction.execute_raw(
                            &statements.history,
                            [
                                &transition.drift.id as &(dyn ToSql + Sync),
                                from,
                                to,
                                &transition.at,
                                *evidence,
                            ],
                        )
                    }),
            )
            .await?;
            outbox::insert_outbox(&transaction, &outbox, self.shard.as_deref()).await?;
            // Few (at most a rule's budget an hour): one statement each.
            for (attempt, body) in &remediations {
                transaction
                    .execute(
                        queries::INSERT_REMEDIATION.text(SQL),
                        &[
                            &attempt.drift_id,
                            &attempt.cluster,
                            &attempt.at,
                            &attempt.outcome.as_str(),
                            body,
                        ],
                    )
                    .await?;
            }
            for ((seq, from, attempt), body) in &settled {
                transaction
                    .execute(
                        queries::SETTLE_REMEDIATION.text(SQL),
                        &[seq, &attempt.outcome.as_str(), body, &from.as_str()],
                    )
                    .await?;
            }
            pipelined(batch.cancel_reminders.iter().map(|drift_id| {
                transaction.execute_raw(
                    &statements.cancel_reminders,
                    [drift_id as &(dyn ToSql + Sync)],
                )
            }))
            .await?;
            pipelined(batch.resolved_reminders.iter().map(|drift_id| {
                transaction.execute_raw(
                    &statements.resolved_reminders,
                    [drift_id as &(dyn ToSql + Sync)],
                )
            }))
            .await?;
            for change in &batch.silences {
                match change {
                    SilenceChange::Add(stored) => {
                        let body = silence_body(&stored.silence)?;
                        transaction
                            .execute(
                                queries::INSERT_SILENCE.text(SQL),
                                &[&stored.id, &body, &stored.created_at],
                            )
                            .await?;
                    }
                    SilenceChange::Remove(id) => {
                        transaction
                            .execute(queries::DELETE_SILENCE.text(SQL), &[id])
                            .await?;
                    }
                }
            }
            // A COMMIT whose answer never came (the connection dropped after it was sent) may
            // have landed: the writer must find out before it rolls its state back.
            transaction.commit().await.map_err(|error| {
                if error.as_db_error().is_some() {
                    Error::from(error)
                } else {
                    Error::CommitUnknown(Error::from(error).to_string())
                }
            })?;
            Ok(())
        })
    }

    fn heartbeat(&mut self, now: Millis) -> Result<(), Error> {
        let client = self.conn.client()?;
        let expires_at = wait(async {
            let transaction = client.transaction().await?;
            // The writer's heartbeat is also its lease's: a writer that proves the store
            // writable keeps the lease, and finds out here (LeaseLost) when it no longer has it.
            let renewed = match &self.lease {
                Some(held) => Some(lease::renew(&transaction, held, now).await?),
                None => None,
            };
            transaction
                .execute(queries::HEARTBEAT.text(SQL), &[&now])
                .await?;
            transaction.commit().await?;
            Ok::<_, Error>(renewed)
        })?;
        if let (Some(held), Some(expires_at)) = (self.lease.as_mut(), expires_at) {
            held.expires_at = held.expires_at.max(expires_at);
        }
        Ok(())
    }

    fn adopt_notifications(
        &mut self,
        now: Millis,
        orphaned_after_ms: Millis,
        owns: &dyn Fn(&str) -> bool,
    ) -> Result<super::Adopted, Error> {
        let Some(shard) = self.shard.clone() else {
            return Ok(super::Adopted::default());
        };
        let client = self.conn.client()?;
        let held = self.lease.as_ref();
        wait(async {
            let transaction = client.transaction().await?;
            lease::fence(&transaction, held).await?;
            // Pending rows of no shard, and of shards whose writer last renewed its lease before
            // the cutoff (a released lease keeps its last renewal: a restart is not an absence;
            // a row without `renewed_at` was written by a binary before it), with their drift's
            // cluster when the drift is still stored.
            // `last_seen` is the later of the last renewal and the expiry: a lease row written
            // by a binary without `renewed_at` still counts as alive while it is renewed.
            let candidates = transaction
                .query(
                    "SELECT o.id, o.shard, d.cluster,
                            GREATEST(l.renewed_at, l.expires_at) AS last_seen
                     FROM outbox o
                     LEFT JOIN drifts d ON d.id = o.drift_id
                     LEFT JOIN writer_lease l ON l.shard = o.shard
                     WHERE o.state = 'pending'
                     AND (o.shard IS NULL
                          OR (o.shard <> $1
                              AND (l.shard IS NULL OR GREATEST(l.renewed_at, l.expires_at) <= $2)))",
                    &[&shard, &(now - orphaned_after_ms)],
                )
                .await?;
            let (mut ids, mut previous) = (Vec::new(), Vec::<Option<String>>::new());
            let mut adopted = super::Adopted::default();
            for row in &candidates {
                let from: Option<String> = row.try_get(1)?;
                let cluster: Option<String> = row.try_get(2)?;
                let last_seen: Option<Millis> = row.try_get(3)?;
                if cluster.as_deref().is_some_and(owns) {
                    ids.push(row.try_get::<_, String>(0)?);
                    previous.push(from);
                } else if from.is_some()
                    && last_seen.is_none_or(|seen| seen <= now - 2 * orphaned_after_ms)
                {
                    // A gone shard's notification of a cluster this shard does not own: the
                    // owning shard takes it. Reported only once the owner had as long again to
                    // take it (so a rename does not make every other shard warn).
                    adopted.stranded += 1;
                }
            }
            // Only rows still as read: two shards adopting at once each take a row once (the
            // second's UPDATE sees the first's shard and skips it).
            let taken = transaction
                .query(
                    "UPDATE outbox o SET shard = $1
                     FROM UNNEST($2::text[], $3::text[]) AS t(id, previous)
                     WHERE o.id = t.id AND o.state = 'pending'
                     AND o.shard IS NOT DISTINCT FROM t.previous
                     RETURNING t.previous",
                    &[&shard, &ids, &previous],
                )
                .await?;
            transaction.commit().await?;
            let mut orphaned = std::collections::BTreeMap::<String, usize>::new();
            for row in &taken {
                match row.try_get::<_, Option<String>>(0)? {
                    Some(from) => *orphaned.entry(from).or_default() += 1,
                    None => adopted.unsharded += 1,
                }
            }
            adopted.orphaned = orphaned.into_iter().collect();
            Ok::<_, Error>(adopted)
        })
    }

    fn prune_events(&mut self, cutoff: Millis) -> Result<usize, Error> {
        let client = self.conn.client()?;
        let held = self.lease.as_ref();
        let removed = wait(async {
            let transaction = client.transaction().await?;
            lease::fence(&transaction, held).await?;
            let removed = transaction
                .execute(queries::PRUNE_EVENTS.text(SQL), &[&cutoff])
                .await?;
            transaction.commit().await?;
            Ok::<u64, Error>(removed)
        })?;
        Ok(usize::try_from(removed).unwrap_or(usize::MAX))
    }

    fn prune_audit(&mut self, cutoff: Millis) -> Result<usize, Error> {
        let client = self.conn.client()?;
        let held = self.lease.as_ref();
        let removed = wait(async {
            let transaction = client.transaction().await?;
            lease::fence(&transaction, held).await?;
            let mut removed = 0;
            for query in &queries::PRUNE_AUDIT {
                removed += transaction.execute(query.text(SQL), &[&cutoff]).await?;
            }
            transaction.commit().await?;
            Ok::<u64, Error>(removed)
        })?;
        Ok(usize::try_from(removed).unwrap_or(usize::MAX))
    }
}

/// Each of `items` with its stored JSON, or the first that cannot be encoded (as `Corrupt`).
pub(super) fn encode_all<T>(
    items: &[T],
    encode: impl Fn(&T) -> Result<String, Error>,
) -> Result<Vec<(&T, String)>, Error> {
    items
        .iter()
        .map(|item| encode(item).map(|body| (item, body)))
        .collect()
}

/// Runs `queries` pipelined: tokio-postgres writes the query of every future polled together
/// without waiting for the previous answer, so `n` statements cost about one round trip.
pub(super) async fn pipelined<F, T>(queries: impl IntoIterator<Item = F>) -> Result<Vec<T>, Error>
where
    F: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
{
    futures_util::future::try_join_all(queries)
        .await
        .map_err(Error::from)
}

/// The writer's statements, prepared together (one round trip) at the start of a commit.
struct Statements {
    event: tokio_postgres::Statement,
    object: tokio_postgres::Statement,
    remove_object: tokio_postgres::Statement,
    drift: tokio_postgres::Statement,
    history: tokio_postgres::Statement,
    cancel_reminders: tokio_postgres::Statement,
    resolved_reminders: tokio_postgres::Statement,
}

async fn statements(client: &impl tokio_postgres::GenericClient) -> Result<Statements, Error> {
    let (event, object, remove_object, drift, history, cancel_reminders, resolved_reminders) = futures_util::try_join!(
        client.prepare(queries::INSERT_EVENT.text(SQL)),
        client.prepare(queries::UPSERT_OBJECT.text(SQL)),
        client.prepare(queries::DELETE_OBJECT.text(SQL)),
        client.prepare(queries::UPSERT_DRIFT.text(SQL)),
        client.prepare(queries::INSERT_HISTORY.text(SQL)),
        client.prepare(queries::CANCEL_REMINDERS.text(SQL)),
        client.prepare(queries::WITHDRAW_RESOLVED_REMINDERS.text(SQL)),
    )?;
    Ok(Statements {
        event,
        object,
        remove_object,
        drift,
        history,
        cancel_reminders,
        resolved_reminders,
    })
}
