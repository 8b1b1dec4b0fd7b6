//! The statements both backends run, in PostgreSQL's words (see `sql/mod.rs` for how SQLite's
//! are derived): the writer's (its load, its commit, its housekeeping), the outbox's (claims,
//! settlements) and the audit reader's.

use super::Query;

/// The columns of an outbox row, in the order `decode::outbox_row` reads them.
macro_rules! outbox_columns {
    () => {
        "id, channel, drift_id, kind, group_key, payload, created_at, not_before, repeat_after_ms, attempts, next_attempt_at, state, last_error, finished_at, message_id, claimed_by"
    };
}

/// The columns of a delivery, in the order `decode::delivery` reads them.
macro_rules! delivery_columns {
    () => {
        "id, channel, drift_id, kind, state, attempts, last_error, created_at, next_attempt_at, finished_at"
    };
}

/// The rows a relay of the shard in parameter `$n` may send: its shard's and those without one.
/// A bound NULL (no shard assigned) sees every row. PostgreSQL only (see `sql/mod.rs`).
macro_rules! served_by {
    ($n:literal) => {
        concat!(
            "{shard: AND ($",
            $n,
            "::text IS NULL OR shard = $",
            $n,
            "::text OR shard IS NULL)}"
        )
    };
}

// ---- The writer: load ------------------------------------------------------------------------

/// Every stored object (tombstones included): its cluster and body.
pub(crate) static OBJECTS: Query = Query::new("SELECT cluster, body FROM objects");

/// The open drifts' bodies.
pub(crate) static OPEN_DRIFTS: Query =
    Query::new("SELECT body FROM drifts WHERE state != 'resolved'");

/// The silences created through the API, by creation time, then id.
pub(crate) static SILENCES: Query =
    Query::new("SELECT id, body, created_at FROM silences ORDER BY created_at, id");

/// A page of the silences created through the API in [`SILENCES`]' order: those after the
/// cursor (`$1` the creation time, `$2` the id; the first page passes a time before every
/// silence), at most `$3` of them.
pub(crate) static SILENCES_PAGE: Query = Query::new(
    "SELECT id, body, created_at FROM silences
     WHERE created_at > $1 OR (created_at = $1 AND id > $2)
     ORDER BY created_at, id LIMIT $3",
);

/// Whether an event key was committed: with the same `sent_at`, or one stored before version 6
/// (`sent_at` 0, which stands for any). Two lookups rather than `sent_at IN ($1, 0)`, for which
/// SQLite builds a temporary table of the two values on every execution. (A key asked with
/// time 0 is found by both: one row is the answer.)
pub(crate) static IS_DUPLICATE: Query = Query::new(
    "SELECT 1 FROM events WHERE sent_at = $1 AND source = $2 AND id = $3
     UNION ALL SELECT 1 FROM events WHERE sent_at = 0 AND source = $2 AND id = $3
     LIMIT 1",
);

// ---- The writer: a round's commit ------------------------------------------------------------

/// An event key (a redelivery's is already there).
pub(crate) static INSERT_EVENT: Query = Query::new(
    "INSERT INTO events (sent_at, source, id, received_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT DO NOTHING",
);

/// An object's state.
pub(crate) static UPSERT_OBJECT: Query = Query::new(
    "INSERT INTO objects (cluster, uid, kind, namespace, name, body) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (cluster, uid) DO UPDATE SET kind = excluded.kind, namespace = excluded.namespace,
     name = excluded.name, body = excluded.body",
);

/// An object forgotten.
pub(crate) static DELETE_OBJECT: Query =
    Query::new("DELETE FROM objects WHERE cluster = $1 AND uid = $2");

/// A drift's row.
pub(crate) static UPSERT_DRIFT: Query = Query::new(
    "INSERT INTO drifts (id, class, state, severity, cluster, namespace, kind, name, uid, since, fired_at, resolved_at, body, api_group)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
     ON CONFLICT (id) DO UPDATE SET state = excluded.state, severity = excluded.severity,
     fired_at = excluded.fired_at, resolved_at = excluded.resolved_at, body = excluded.body",
);

/// A drift's move.
pub(crate) static INSERT_HISTORY: Query = Query::new(
    "INSERT INTO drift_history (drift_id, from_state, to_state, at, evidence) VALUES ($1, $2, $3, $4, $5)",
);

/// A remediation attempt (`$5`: its body, `rows::AttemptRow`).
pub(crate) static INSERT_REMEDIATION: Query = Query::new(
    "INSERT INTO remediations (drift_id, cluster, at, outcome, body) VALUES ($1, $2, $3, $4, $5)",
);

/// A remediation attempt's new outcome (`$2`) and body (`$3`), by its `seq` (`$1`), only from
/// the outcome it is known to have (`$4`): a claim moves only a `planned` row, a settle only a
/// `sending` one, so neither can undo a later move.
pub(crate) static SETTLE_REMEDIATION: Query =
    Query::new("UPDATE remediations SET outcome = $2, body = $3 WHERE seq = $1 AND outcome = $4");

/// A notification to deliver; one already queued under its id is left as it is. PostgreSQL's
/// row carries the shard that queued it.
pub(crate) static INSERT_OUTBOX: Query = Query::new(
    "INSERT INTO outbox (id, channel, drift_id, kind, group_key, payload, created_at, not_before, repeat_after_ms, next_attempt_at{shard:, shard})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $8{shard:, $10}) ON CONFLICT DO NOTHING",
);

/// A drift's pending reminders, withdrawn (on every channel).
pub(crate) static CANCEL_REMINDERS: Query =
    Query::new("DELETE FROM outbox WHERE drift_id = $1 AND kind = 'repeat' AND state = 'pending'");

/// A resolved drift's pending reminders that no relay holds, withdrawn (on every channel); a
/// claimed one, even under a lapsed claim, is left to the relay that sends it, which first reads
/// the drift's state.
pub(crate) static WITHDRAW_RESOLVED_REMINDERS: Query = Query::new(
    "DELETE FROM outbox WHERE drift_id = $1 AND kind = 'repeat' AND state = 'pending' AND claimed_by IS NULL",
);

/// A silence created through the API.
pub(crate) static INSERT_SILENCE: Query =
    Query::new("INSERT INTO silences (id, body, created_at) VALUES ($1, $2, $3)");

/// A silence removed through the API.
pub(crate) static DELETE_SILENCE: Query = Query::new("DELETE FROM silences WHERE id = $1");

// ---- The writer: housekeeping ----------------------------------------------------------------

/// The tiny write that proves the store writable.
pub(crate) static HEARTBEAT: Query = Query::new(
    "INSERT INTO heartbeat (id, at) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET at = excluded.at",
);

/// Event keys received before `$1`.
pub(crate) static PRUNE_EVENTS: Query = Query::new("DELETE FROM events WHERE received_at < $1");

/// Audit retention, in order: resolved drifts before `$1` with their remediation attempts and moves, finished
/// deliveries before `$1` with their attempts.
pub(crate) static PRUNE_AUDIT: [Query; 5] = [
    Query::new(
        "DELETE FROM remediations WHERE drift_id IN (SELECT id FROM drifts WHERE state = 'resolved' AND resolved_at < $1)",
    ),
    Query::new(
        "DELETE FROM drift_history WHERE drift_id IN (SELECT id FROM drifts WHERE state = 'resolved' AND resolved_at < $1)",
    ),
    Query::new("DELETE FROM drifts WHERE state = 'resolved' AND resolved_at < $1"),
    Query::new(
        "DELETE FROM delivery_attempts WHERE outbox_id IN (SELECT id FROM outbox WHERE state != 'pending' AND finished_at < $1)",
    ),
    Query::new("DELETE FROM outbox WHERE state != 'pending' AND finished_at < $1"),
];

// ---- The outbox ------------------------------------------------------------------------------

/// A channel's pending rows due at `$2` that `$3` may claim, oldest first, at most `$4`; of
/// shard `$5`.
pub(crate) static DUE: Query = Query::new(concat!(
    "SELECT ",
    outbox_columns!(),
    " FROM outbox WHERE channel = $1 AND state = 'pending'
     AND next_attempt_at <= $2
     AND (claimed_by IS NULL OR claimed_by = $3 OR claimed_until <= $2)",
    served_by!(5),
    "
     ORDER BY created_at, id LIMIT $4"
));

/// When a channel's next pending row is due for `$2`: a row another relay holds is due for it
/// only once that claim lapses. Of shard `$3`. Read along the `outbox_due` index: the first row
/// `$2` may take, and before it only the rows others hold (a held row is due no earlier than its
/// own time, so none after that first row can be due sooner). A whole-channel `MIN` visited every
/// pending row, and paced notifications keep many pending.
pub(crate) static NEXT_DUE: Query = Query::new(concat!(
    "WITH first AS (
       SELECT next_attempt_at AS due FROM outbox WHERE channel = $1 AND state = 'pending'
       AND (claimed_by IS NULL OR claimed_by = $2 OR claimed_until IS NULL OR claimed_until <= next_attempt_at)",
    served_by!(3),
    " ORDER BY next_attempt_at LIMIT 1)
     SELECT MIN(due) FROM (
       SELECT due FROM first
       UNION ALL
       SELECT claimed_until FROM outbox WHERE channel = $1 AND state = 'pending'
       AND claimed_by IS NOT NULL AND claimed_by <> $2 AND claimed_until > next_attempt_at",
    served_by!(3),
    " AND next_attempt_at < COALESCE((SELECT due FROM first), 9223372036854775807)) AS dues"
));

/// Claims row `$1` for `$2` until `$3` if it is pending and claimable at `$5`, for message `$4`:
/// a row without a message gets it; a row that went out in another message (a process that
/// died after claiming it) is left to that message's resend, under its own idempotency key.
pub(crate) static CLAIM: Query = Query::new(
    "UPDATE outbox SET claimed_by = $2, claimed_until = $3, message_id = $4
     WHERE id = $1 AND state = 'pending'
     AND (claimed_by IS NULL OR claimed_by = $2 OR claimed_until <= $5)
     AND (message_id IS NULL OR message_id = $4)",
);

/// Settles row `$1`: an attempt (`$4`) only if its owner `$8` holds it; a decision taken without
/// sending only if no one else holds it at `$9`. The claim ends. PostgreSQL answers the row's
/// shard (its reminders are that shard's too).
pub(crate) static SETTLE: Query = Query::new(
    "UPDATE outbox SET state = $2, next_attempt_at = $3,
     attempts = attempts + CASE WHEN $4::boolean THEN 1 ELSE 0 END,
     last_error = $5, finished_at = $6, message_id = COALESCE(message_id, $7),
     claimed_by = NULL, claimed_until = NULL
     WHERE id = $1 AND state = 'pending'
     AND CASE WHEN $4::boolean THEN claimed_by IS NOT NULL AND claimed_by = $8::text
         ELSE claimed_by IS NULL OR claimed_until <= $9
              OR ($8::text IS NOT NULL AND claimed_by = $8::text) END{shard:
     RETURNING shard}",
);

/// An attempt's record.
pub(crate) static INSERT_ATTEMPT: Query = Query::new(
    "INSERT INTO delivery_attempts (outbox_id, at, state, detail, duration_ms)
     VALUES ($1, $2, $3, $4, $5)",
);

/// Ends every claim of `$1`.
pub(crate) static RELEASE: Query = Query::new(
    "UPDATE outbox SET claimed_by = NULL, claimed_until = NULL
     WHERE claimed_by = $1 AND state = 'pending'",
);

/// The owners holding claims.
pub(crate) static CLAIM_OWNERS: Query = Query::new(
    "SELECT DISTINCT claimed_by FROM outbox WHERE claimed_by IS NOT NULL AND state = 'pending'
     ORDER BY claimed_by",
);

/// Whether a firing notice of drift `$1` queued before `$3` is still pending on channel `$2`.
pub(crate) static FIRING_PENDING_BEFORE: Query = Query::new(
    "SELECT 1 FROM outbox WHERE drift_id = $1 AND channel = $2 AND kind = 'firing'
     AND state = 'pending' AND created_at < $3 LIMIT 1",
);

/// The pending rows and their channels; PostgreSQL's of shard `$1` only (when one is
/// assigned): another shard's channels are not this one's to know, and rows without a shard may
/// be any shard's.
pub(crate) static PENDING_CHANNELS: Query = Query::new(
    "SELECT id, channel FROM outbox WHERE state = 'pending'{shard:
     AND ($1::text IS NULL OR shard = $1::text)}",
);

/// Whether drift `$1` has a pending reminder on channel `$2` that `$3` may withdraw at `$4`,
/// message `$5`'s rows (if any) aside.
pub(crate) static CHANNEL_REMINDER_PENDING: Query = Query::new(
    "SELECT 1 FROM outbox WHERE drift_id = $1 AND channel = $2 AND kind = 'repeat' AND state = 'pending'
     AND (claimed_by IS NULL OR claimed_by = $3 OR claimed_until <= $4)
     AND ($5::text IS NULL OR message_id IS NULL OR message_id <> $5::text) LIMIT 1",
);

/// Withdraws drift `$1`'s pending reminders on channel `$2`, but those another relay than `$3`
/// holds at `$4` and those of message `$5` (if any), which are on their way in it.
pub(crate) static CANCEL_CHANNEL_REMINDERS: Query = Query::new(
    "DELETE FROM outbox WHERE drift_id = $1 AND channel = $2 AND kind = 'repeat' AND state = 'pending'
     AND (claimed_by IS NULL OR claimed_by = $3 OR claimed_until <= $4)
     AND ($5::text IS NULL OR message_id IS NULL OR message_id <> $5::text)",
);

/// A drift's state.
pub(crate) static DRIFT_STATE: Query = Query::new("SELECT state FROM drifts WHERE id = $1");

/// Pending rows and the oldest one's creation time, of shard `$1`.
pub(crate) static PENDING_STATS: Query = Query::new(concat!(
    "SELECT COUNT(*), MIN(created_at) FROM outbox WHERE state = 'pending'",
    served_by!(1)
));

/// Rows in state `$1`, of shard `$2`.
pub(crate) static COUNT_IN_STATE: Query = Query::new(concat!(
    "SELECT COUNT(*) FROM outbox WHERE state = $1",
    served_by!(2)
));

/// Rows in state `$1` (any if NULL), newest first, at most `$2`.
pub(crate) static ROWS: Query = Query::new(concat!(
    "SELECT ",
    outbox_columns!(),
    " FROM outbox WHERE ($1::text IS NULL OR state = $1::text) ORDER BY created_at DESC, id LIMIT $2"
));

// ---- The audit reader ------------------------------------------------------------------------

/// One drift's body.
pub(crate) static DRIFT: Query = Query::new("SELECT body FROM drifts WHERE id = $1");

/// A drift's moves, oldest first.
pub(crate) static HISTORY: Query = Query::new(
    "SELECT from_state, to_state, at, evidence FROM drift_history WHERE drift_id = $1 ORDER BY seq",
);

/// A drift's remediation attempts, oldest first.
pub(crate) static REMEDIATIONS: Query =
    Query::new("SELECT body FROM remediations WHERE drift_id = $1 ORDER BY seq");

/// One remediation attempt's outcome, by its `seq`.
pub(crate) static REMEDIATION_OUTCOME: Query =
    Query::new("SELECT outcome FROM remediations WHERE seq = $1");

/// Remediation attempts of one cluster (`$3`) with one outcome (`$1`), oldest first, at most
/// `$2`.
pub(crate) static REMEDIATIONS_BY_OUTCOME: Query = Query::new(
    "SELECT seq, body FROM remediations WHERE outcome = $1 AND cluster = $3 ORDER BY seq LIMIT $2",
);

/// A drift's deliveries, oldest first.
pub(crate) static DELIVERIES_OF: Query = Query::new(concat!(
    "SELECT ",
    delivery_columns!(),
    " FROM outbox WHERE drift_id = $1 ORDER BY created_at, id"
));

/// Every attempt of a drift's deliveries, in one query, each delivery's in order.
pub(crate) static ATTEMPTS_OF: Query = Query::new(
    "SELECT a.outbox_id, a.at, a.state, a.detail, a.duration_ms FROM delivery_attempts a
     JOIN outbox o ON o.id = a.outbox_id WHERE o.drift_id = $1 ORDER BY a.seq",
);

/// Deliveries in state `$1` (any if NULL) of channel `$2` (any if NULL), newest first, at most
/// `$3`.
pub(crate) static DELIVERIES: Query = Query::new(concat!(
    "SELECT ",
    delivery_columns!(),
    " FROM outbox
     WHERE ($1::text IS NULL OR state = $1::text) AND ($2::text IS NULL OR channel = $2::text)
     ORDER BY created_at DESC, id LIMIT $3"
));

/// Firing drifts counted by severity, API group and namespace.
pub(crate) static FIRING_COUNTS: Query = Query::new(
    "SELECT severity, api_group, namespace, COUNT(*) FROM drifts WHERE state = 'firing'
     GROUP BY severity, api_group, namespace ORDER BY severity, api_group, namespace",
);

/// Per day of `$3` milliseconds from `$1` until `$2`: the moves to `firing` (from anything
/// else) and the resolves after firing, counted over the days' history (`drift_history_at`).
pub(crate) static MOVES_PER_DAY: Query = Query::new(
    "SELECT (at - $1) / $3 AS day,
            COUNT(*) FILTER (WHERE to_state = 'firing' AND from_state IS DISTINCT FROM 'firing'),
            COUNT(*) FILTER (WHERE to_state = 'resolved' AND from_state IS NOT DISTINCT FROM 'firing')
     FROM drift_history WHERE at >= $1 AND at < $2 GROUP BY day",
);
