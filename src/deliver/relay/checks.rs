//! What a relay's round reads of the store before it sends: whether each due reminder's drift
//! still fires (a reminder of one that stopped is withdrawn, never counted as lost) and whether
//! each resolve waits for its firing notice (a resolve never overtakes it).

use std::collections::{HashMap, HashSet};

use drift_model::{DriftState, Millis, NoticeKind};
use drift_store::{Outbox, OutboxRow};

/// Due rows whose checks one blocking task reads: the outbox, which every relay of the process
/// shares, is free between tasks.
pub(super) const PER_TASK: usize = 64;

/// What a round does with a due row.
pub(super) enum Check {
    Send,
    /// A resolve waiting for its firing notice.
    Held,
    /// A reminder for a drift no longer firing, withdrawn.
    Withdrawn,
}

/// What [`judge`] reads of each row: its kind, drift, endpoint and when it was queued.
pub(super) fn of(rows: &[OutboxRow]) -> Vec<(NoticeKind, String, String, Millis)> {
    rows.iter()
        .map(|row| {
            (
                row.queued.notice.kind,
                row.queued.drift_id.clone(),
                row.queued.channel.clone(),
                row.queued.created_at,
            )
        })
        .collect()
}

/// The checks of `rows` (kind, drift, endpoint, queued at), in order: each drift's state read
/// once, each stopped drift's reminders withdrawn once.
pub(super) fn judge(
    outbox: &mut dyn Outbox,
    rows: Vec<(NoticeKind, String, String, Millis)>,
    owner: &str,
    now: Millis,
) -> Result<Vec<Check>, drift_store::Error> {
    let mut states: HashMap<String, Option<DriftState>> = HashMap::new();
    let mut withdrawn: HashSet<(String, String)> = HashSet::new();
    let mut verdicts = Vec::with_capacity(rows.len());
    for (kind, drift_id, endpoint, created) in rows {
        let verdict = match kind {
            NoticeKind::Repeat => {
                let state = match states.get(&drift_id) {
                    Some(state) => *state,
                    None => {
                        let state = outbox.drift_state(&drift_id)?;
                        states.insert(drift_id.clone(), state);
                        state
                    }
                };
                if state == Some(DriftState::Firing) {
                    Check::Send
                } else {
                    if withdrawn.insert((drift_id.clone(), endpoint.clone())) {
                        outbox.cancel_reminders(&drift_id, &endpoint, owner, now, None)?;
                    }
                    Check::Withdrawn
                }
            }
            NoticeKind::Resolved
                if outbox.firing_pending_before(&drift_id, &endpoint, created)? =>
            {
                Check::Held
            }
            _ => Check::Send,
        };
        verdicts.push(verdict);
    }
    Ok(verdicts)
}
