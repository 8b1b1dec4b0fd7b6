//! The rows of the shared statements ([`super::queries`]) as the store's types, from either
//! backend's rows ([`Row`]).

use super::Row;
use crate::outbox::Unreadable;
use crate::rows::{decode_drift, decode_evidence, decode_notice, decode_silence};
use crate::{
    AttemptView, DeliveryView, Error, FiringCount, HistoryEntry, NewOutbox, OutboxRow, OutboxState,
    OutboxStats, StoredSilence,
};
use drift_model::{Drift, DriftState};

/// A count as the store's types have it (a database answers a signed integer).
fn count(value: i64) -> u64 {
    value.max(0).unsigned_abs()
}

/// An attempt count.
fn attempts(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

/// A row of `SELECT outbox_columns!()`: the queued notification with its delivery state, or,
/// when its payload cannot be read, what the relay needs to end it.
pub(crate) fn outbox_row<R: Row + ?Sized>(row: &R) -> Result<Result<OutboxRow, Unreadable>, Error> {
    let notice = match decode_notice(row.text(5)?) {
        Ok(notice) => notice,
        Err(error) => {
            return Ok(Err(Unreadable {
                id: row.text(0)?.to_string(),
                created_at: row.int(6)?,
                error,
            }))
        }
    };
    Ok(Ok(OutboxRow {
        queued: NewOutbox {
            id: row.text(0)?.to_string(),
            channel: row.text(1)?.to_string(),
            drift_id: row.text(2)?.to_string(),
            group_key: row.text(4)?.to_string(),
            notice,
            created_at: row.int(6)?,
            not_before: row.int(7)?,
            repeat_after_ms: row.opt_int(8)?,
        },
        attempts: attempts(row.int(9)?),
        next_attempt_at: row.int(10)?,
        state: OutboxState::parse(row.text(11)?).unwrap_or(OutboxState::Pending),
        last_error: row.opt_text(12)?.map(str::to_string),
        finished_at: row.opt_int(13)?,
        message_id: row.opt_text(14)?.map(str::to_string),
        claimed_by: row.opt_text(15)?.map(str::to_string),
    }))
}

/// An outbox row that must be readable (the API's and tests' listing): one whose notice cannot
/// be read is a corrupt row.
pub(crate) fn readable_outbox_row<R: Row + ?Sized>(row: &R) -> Result<OutboxRow, Error> {
    outbox_row(row)?.map_err(|unreadable| Error::Corrupt {
        table: "outbox",
        source: unreadable.error,
    })
}

/// A row of `SELECT delivery_columns!()`, without its attempts.
pub(crate) fn delivery<R: Row + ?Sized>(row: &R) -> Result<DeliveryView, Error> {
    Ok(DeliveryView {
        id: row.text(0)?.to_string(),
        channel: row.text(1)?.to_string(),
        drift_id: row.text(2)?.to_string(),
        kind: row.text(3)?.to_string(),
        state: row.text(4)?.to_string(),
        attempts: attempts(row.int(5)?),
        last_error: row.opt_text(6)?.map(str::to_string),
        created_at: row.int(7)?,
        next_attempt_at: row.int(8)?,
        finished_at: row.opt_int(9)?,
        attempt_log: Vec::new(),
    })
}

/// A row of [`super::queries::ATTEMPTS_OF`]: the delivery it belongs to and the attempt.
pub(crate) fn attempt<R: Row + ?Sized>(row: &R) -> Result<(String, AttemptView), Error> {
    Ok((
        row.text(0)?.to_string(),
        AttemptView {
            at: row.int(1)?,
            state: row.text(2)?.to_string(),
            detail: row.text(3)?.to_string(),
            duration_ms: row.int(4)?,
        },
    ))
}

/// Each attempt into its delivery's log, in the order given.
pub(crate) fn attach_attempts(
    deliveries: &mut [DeliveryView],
    attempts: Vec<(String, AttemptView)>,
) {
    for (outbox_id, attempt) in attempts {
        if let Some(delivery) = deliveries.iter_mut().find(|d| d.id == outbox_id) {
            delivery.attempt_log.push(attempt);
        }
    }
}

/// A row of [`super::queries::HISTORY`].
pub(crate) fn history_entry<R: Row + ?Sized>(row: &R) -> Result<HistoryEntry, Error> {
    Ok(HistoryEntry {
        from: row.opt_text(0)?.map(str::to_string),
        to: row.text(1)?.to_string(),
        at: row.int(2)?,
        evidence: row.opt_text(3)?.map(decode_evidence).transpose()?,
    })
}

/// A row of [`super::queries::REMEDIATIONS`].
pub(crate) fn remediation<R: Row + ?Sized>(
    row: &R,
) -> Result<drift_model::remediation::Attempt, Error> {
    crate::rows::decode_attempt(row.text(0)?)
}

/// A row of [`super::queries::REMEDIATIONS_BY_OUTCOME`].
pub(crate) fn numbered_remediation<R: Row + ?Sized>(
    row: &R,
) -> Result<(i64, drift_model::remediation::Attempt), Error> {
    Ok((row.int(0)?, crate::rows::decode_attempt(row.text(1)?)?))
}

/// A row of [`super::queries::SILENCES`].
pub(crate) fn silence<R: Row + ?Sized>(row: &R) -> Result<StoredSilence, Error> {
    Ok(StoredSilence {
        id: row.text(0)?.to_string(),
        silence: decode_silence(row.text(1)?)?,
        created_at: row.int(2)?,
    })
}

/// The drift whose body is column `index`.
pub(crate) fn drift<R: Row + ?Sized>(row: &R, index: usize) -> Result<Drift, Error> {
    decode_drift(row.text(index)?)
}

/// A row of [`super::queries::FIRING_COUNTS`].
pub(crate) fn firing_count<R: Row + ?Sized>(row: &R) -> Result<FiringCount, Error> {
    Ok(FiringCount {
        severity: row.text(0)?.to_string(),
        group: row.text(1)?.to_string(),
        namespace: row.text(2)?.to_string(),
        count: count(row.int(3)?),
    })
}

/// A row of [`super::queries::MOVES_PER_DAY`]: (day index, fired, resolved).
pub(crate) fn day_moves<R: Row + ?Sized>(row: &R) -> Result<(i64, u64, u64), Error> {
    Ok((row.int(0)?, count(row.int(1)?), count(row.int(2)?)))
}

/// A stored drift state (`drifts.state`).
pub(crate) fn drift_state(text: &str) -> Option<DriftState> {
    match text {
        "pending" => Some(DriftState::Pending),
        "firing" => Some(DriftState::Firing),
        "resolved" => Some(DriftState::Resolved),
        _ => None,
    }
}

/// The outbox figures from [`super::queries::PENDING_STATS`]'s row and the counts of rejected
/// and expired rows.
pub(crate) fn stats<R: Row + ?Sized>(
    pending: &R,
    rejected: i64,
    expired: i64,
) -> Result<OutboxStats, Error> {
    Ok(OutboxStats {
        pending: pending.int(0)?,
        oldest_pending: pending.opt_int(1)?,
        rejected,
        expired,
    })
}
