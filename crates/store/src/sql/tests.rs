//! Statements written once read right in each dialect.

use super::queries::{DUE, INSERT_OUTBOX, PENDING_CHANNELS, SETTLE};
use super::*;

#[test]
fn sqlite_numbers_its_parameters_without_casts_and_drops_the_shards() {
    assert_eq!(
        SETTLE.text(Dialect::Sqlite),
        "UPDATE outbox SET state = ?2, next_attempt_at = ?3,
     attempts = attempts + CASE WHEN ?4 THEN 1 ELSE 0 END,
     last_error = ?5, finished_at = ?6, message_id = COALESCE(message_id, ?7),
     claimed_by = NULL, claimed_until = NULL
     WHERE id = ?1 AND state = 'pending'
     AND CASE WHEN ?4 THEN claimed_by IS NOT NULL AND claimed_by = ?8
         ELSE claimed_by IS NULL OR claimed_until <= ?9
              OR (?8 IS NOT NULL AND claimed_by = ?8) END"
    );
    assert!(SETTLE.text(Dialect::Postgres).ends_with(
        "OR ($8::text IS NOT NULL AND claimed_by = $8::text) END\n     RETURNING shard"
    ));
    assert_eq!(
        INSERT_OUTBOX.text(Dialect::Sqlite),
        "INSERT INTO outbox (id, channel, drift_id, kind, group_key, payload, created_at, not_before, repeat_after_ms, next_attempt_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?8) ON CONFLICT DO NOTHING"
    );
    assert_eq!(
        INSERT_OUTBOX.text(Dialect::Postgres),
        "INSERT INTO outbox (id, channel, drift_id, kind, group_key, payload, created_at, not_before, repeat_after_ms, next_attempt_at, shard)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $8, $10) ON CONFLICT DO NOTHING"
    );
    assert_eq!(
        PENDING_CHANNELS.text(Dialect::Sqlite),
        "SELECT id, channel FROM outbox WHERE state = 'pending'"
    );
    assert_eq!(
        PENDING_CHANNELS.text(Dialect::Postgres),
        "SELECT id, channel FROM outbox WHERE state = 'pending'
     AND ($1::text IS NULL OR shard = $1::text)"
    );
    let due = DUE.text(Dialect::Postgres);
    assert!(
        due.contains("AND ($5::text IS NULL OR shard = $5::text OR shard IS NULL)\n"),
        "{due}"
    );
    let due = DUE.text(Dialect::Sqlite);
    assert!(!due.contains("shard") && !due.contains('$') && due.ends_with("LIMIT ?4"));
}

#[test]
fn a_statement_is_rendered_once_per_dialect() {
    assert!(std::ptr::eq(
        DUE.text(Dialect::Sqlite),
        DUE.text(Dialect::Sqlite)
    ));
    assert_eq!(Dialect::Sqlite.param(12), "?12");
    assert_eq!(Dialect::Postgres.greatest(&["a", "b"]), "GREATEST(a, b)");
}
