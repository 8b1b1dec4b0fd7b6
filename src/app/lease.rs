//! Standby and takeover on a shared (PostgreSQL) store: a replica stands by until it holds its
//! shard's writer lease, then becomes the writer; a lease keeper renews the lease and ends the
//! writer role the moment it can no longer be sure it holds it, and the replica stands by again.
//!
//! The lease is a row with an expiry and a fencing epoch (`store::postgres::lease` says why not
//! an advisory lock). Invariants kept here:
//! * State is loaded only after the lease is taken and the writer's store is fenced on it, so
//!   the new writer sees every commit of the one before, and a commit of the one before that
//!   lands later fails.
//! * A writer gives the role up by itself before a standby can take it: it stops when no renewal
//!   reached the database for `ttl - renewInterval` (measured on its monotonic clock, from when
//!   the last successful renewal *started*), which is before the lease expires for anyone else.
//!   A pause (SIGSTOP, a frozen VM) is caught the same way on waking. Losing the lease turns
//!   readiness false and events `503` at once, stops the writer role (its relays, resync and
//!   reload too; a commit in the meantime is fenced and fails), and the replica stands by again
//!   in the same process, its metrics (the loss counted) intact.
//! * A graceful stop releases the lease only after the writer stopped, so a standby takes over
//!   at once without waiting out the ttl, and never while the last commit is in flight.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::writer::WriterRole;
use super::Shared;
use crate::metrics::{ShardLabel, ShardReasonLabel};
use drift_store::{Error, Leases, WriterLease};

/// How often the keeper looks at the lease's state between renewals.
const WATCH_INTERVAL: Duration = Duration::from_millis(200);

type SharedLeases = Arc<Mutex<Box<dyn Leases>>>;
/// The writer's health, once it runs (a fenced commit sets its `lease_lost`).
type WriterHealth = Arc<std::sync::OnceLock<Arc<crate::pipeline::Health>>>;

/// The writer role of a replica on a shared store, with its lease.
pub(super) struct Role {
    writer: WriterRole,
    elected: Elected,
    /// Cancelled by the keeper when the lease is lost.
    lost: CancellationToken,
    /// Set when the role was given up with the lease still held: released on stop all the same.
    release: Arc<std::sync::atomic::AtomicBool>,
}

/// A lease held, and the keeper renewing it.
pub(super) struct Elected {
    lease: WriterLease,
    leases: SharedLeases,
    keeper_stop: CancellationToken,
    keeper: tokio::task::JoinHandle<()>,
    shared: Shared,
}

impl Role {
    /// Stops the writer, then gives the lease up (unless it was lost).
    async fn stop(self) {
        self.writer.stop().await;
        let elected = self.elected;
        elected.keeper_stop.cancel();
        let _ = elected.keeper.await;
        let shard = elected.lease.shard.clone();
        held(&elected.shared, &shard, false);
        if self.lost.is_cancelled() && !self.release.load(Ordering::SeqCst) {
            return;
        }
        let (leases, lease) = (elected.leases, elected.lease);
        let released = tokio::task::spawn_blocking(move || lock(&leases).release(&lease)).await;
        match released {
            Ok(Ok(())) => tracing::info!(message = "Released the writer lease.", shard = %shard),
            Ok(Err(error)) => {
                tracing::warn!(message = "Could not release the writer lease; a standby takes over when it expires.", shard = %shard, %error)
            }
            Err(error) => tracing::warn!(message = "Could not release the writer lease.", %error),
        }
    }
}

fn lock(leases: &SharedLeases) -> std::sync::MutexGuard<'_, Box<dyn Leases>> {
    leases
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn held(shared: &Shared, shard: &str, holds: bool) {
    shared
        .metrics
        .writer_lease_held
        .get_or_create(&ShardLabel {
            shard: shard.to_string(),
        })
        .set(i64::from(holds));
}

/// A replica on a shared store until `shared.role_stop`: stands by, is the writer while it
/// holds the lease, and stands by again when it loses it.
pub(super) async fn replica(
    shared: Shared,
    parts: Option<(drift_store::Opened, Box<dyn Leases>)>,
    standby: crate::ingest::Standby,
) {
    let shard = shared.config.shard.name.clone();
    // Every series of the shard from the start, at 0: a rate or `changes()` over them counts
    // the first takeover and the first loss too.
    shared
        .metrics
        .writer_lease_takeovers
        .get_or_create(&ShardLabel {
            shard: shard.clone(),
        })
        .inc_by(0);
    for reason in ["taken_over", "unrenewed", "commit_unknown"] {
        shared
            .metrics
            .writer_lease_losses
            .get_or_create(&ShardReasonLabel {
                shard: shard.clone(),
                reason: reason.to_string(),
            })
            .inc_by(0);
    }
    let mut parts = parts;
    loop {
        let (opened, leases) = match parts.take() {
            Some(parts) => parts,
            None => match reopen(&shared, &standby).await {
                Some(parts) => parts,
                None => return,
            },
        };
        let role = match stand_by(&shared, opened, leases, &standby).await {
            Some(Turn::Writer(role)) => *role,
            Some(Turn::Retry) => {
                // Not at once: the same failure would come back every retry interval.
                tokio::select! {
                    _ = shared.role_stop.cancelled() => return,
                    _ = tokio::time::sleep(shared.config.store.lease.ttl) => {}
                }
                continue;
            }
            None => return,
        };
        let lost = tokio::select! {
            _ = shared.role_stop.cancelled() => false,
            _ = role.lost.cancelled() => true,
        };
        if !lost {
            role.stop().await;
            return;
        }
        // The standby answers from now on; the fenced writer role stops behind it.
        set_reason(
            &standby,
            format!("shard {shard}: lost the writer lease; standing by"),
        );
        if let Ok(mut active) = shared.active.write() {
            *active = None;
        }
        // At once, and again when the role has stopped (its last round may still set them).
        shared.metrics.clear_writer_gauges();
        role.stop().await;
        shared.lease.set_lost(false);
        tracing::info!(message = "The writer role stopped; standing by for the lease again.", shard = %shard);
    }
}

/// Opens the store again for the next writer role (the last one took its connections along);
/// retries until it can, or `None` once the service stops.
async fn reopen(
    shared: &Shared,
    standby: &crate::ingest::Standby,
) -> Option<(drift_store::Opened, Box<dyn Leases>)> {
    let mut last: Option<String> = None;
    held(shared, &shared.config.shard.name, false);
    loop {
        let config = Arc::clone(&shared.config);
        let opened = tokio::task::spawn_blocking(move || super::open_store(&config)).await;
        match opened {
            Ok(Ok(mut opened)) => {
                if let Some(leases) = opened.leases.take() {
                    return Some((opened, leases));
                }
                tracing::error!(message = "The store has no writer leases; cannot stand by.");
                return None;
            }
            Ok(Err(error)) => {
                let reason = format!(
                    "shard {}: cannot reach the store {} to take the writer lease: {error}",
                    shared.config.shard.name,
                    shared.config.store.location()
                );
                if last.as_deref() != Some(reason.as_str()) {
                    tracing::warn!(message = "Standing by.", reason = %reason);
                    last = Some(reason.clone());
                }
                set_reason(standby, reason);
            }
            Err(error) => tracing::warn!(message = "Opening the store failed.", %error),
        }
        tokio::select! {
            _ = shared.role_stop.cancelled() => return None,
            _ = tokio::time::sleep(shared.config.store.lease.retry_interval) => {}
        }
    }
}

/// Stands by until this replica holds the writer lease of its shard, then starts the writer
/// role; `None` when the service stopped first (or the role could not start: the service then
/// stops with the reason).
async fn stand_by(
    shared: &Shared,
    mut opened: drift_store::Opened,
    leases: Box<dyn Leases>,
    standby: &crate::ingest::Standby,
) -> Option<Turn> {
    let shared = shared.clone();
    let config = &shared.config;
    let shard = config.shard.name.clone();
    let holder = shared.identity.owner_prefix();
    let lease_settings = config.store.lease.clone();
    let ttl_ms = drift_model::Millis::try_from(lease_settings.ttl.as_millis()).unwrap_or(10_000);
    let leases: SharedLeases = Arc::new(Mutex::new(leases));
    held(&shared, &shard, false);
    set_reason(standby, format!("shard {shard}: taking the writer lease"));
    tracing::info!(message = "Standing by for the writer lease.", shard = %shard, holder = %holder);
    let mut last_seen: Option<String> = None;
    let (lease, acquired_from) = loop {
        if shared.role_stop.is_cancelled() {
            return None;
        }
        // The lease's expiry is computed from this moment: the keeper's deadline counts from it
        // too, however long the acquisition then waits.
        let attempted_at = Instant::now();
        let now = (shared.clock)();
        let attempt = {
            let (leases, shard, holder) = (Arc::clone(&leases), shard.clone(), holder.clone());
            tokio::task::spawn_blocking(move || {
                let mut leases = lock(&leases);
                let before = leases.holder(&shard)?;
                let taken = leases.acquire(&shard, &holder, now, ttl_ms)?;
                Ok::<_, Error>((before, taken))
            })
            .await
        };
        let seen = match attempt {
            Ok(Ok((before, Some(lease)))) => {
                if before.is_some() {
                    shared
                        .metrics
                        .writer_lease_takeovers
                        .get_or_create(&ShardLabel {
                            shard: shard.clone(),
                        })
                        .inc();
                }
                tracing::info!(
                    message = "Took the writer lease; loading state.",
                    shard = %shard,
                    epoch = lease.epoch,
                    previous = before.as_ref().map(|before| before.holder.as_str()).unwrap_or("none"),
                );
                break (lease, attempted_at);
            }
            Ok(Ok((before, None))) => match before {
                Some(before) => format!(
                    "shard {shard}: the writer is {} (its lease runs until {})",
                    before.holder,
                    drift_model::time::format_time_offset(before.expires_at)
                ),
                None => format!("shard {shard}: the writer lease is being taken"),
            },
            Ok(Err(error)) => format!(
                "shard {shard}: cannot reach the store {} to take the writer lease: {error}",
                config.store.location()
            ),
            Err(error) => format!("shard {shard}: taking the writer lease failed: {error}"),
        };
        // Log when the situation changes, not every retry.
        let situation = seen
            .split(" (its lease")
            .next()
            .unwrap_or(&seen)
            .to_string();
        if last_seen.as_deref() != Some(situation.as_str()) {
            tracing::info!(message = "Standing by.", reason = %seen);
            last_seen = Some(situation);
        }
        set_reason(standby, seen);
        tokio::select! {
            _ = shared.role_stop.cancelled() => return None,
            _ = tokio::time::sleep(lease_settings.retry_interval) => {}
        }
    };
    // Fence before loading: from here on, a commit of this writer fails once another replica
    // takes over, and loading sees every commit of the writer before.
    if let Err(error) = opened.writer.fence(lease.clone()) {
        shared.fail(format!("could not fence the writer on its lease: {error}"));
        return None;
    }
    let keeper_stop = CancellationToken::new();
    let lost = CancellationToken::new();
    let release = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The keeper runs while the state loads: a long load must not cost the lease. Once the
    // writer runs, its health tells the keeper when a commit was fenced.
    let health: WriterHealth = Arc::new(std::sync::OnceLock::new());
    // A new lease, nothing lost yet; the acquisition counts as the first renewal (see `keep`).
    // Set before the writer's routes can answer, and not again when the role starts: a loss the
    // keeper finds while the state loads stays in force.
    shared.lease.set_lost(false);
    shared
        .lease
        .hold_until(acquired_from + renewal_deadline(&lease_settings));
    let keeper = tokio::spawn(keep(
        shared.clone(),
        lease.clone(),
        Arc::clone(&leases),
        Arc::clone(&health),
        KeeperSignals {
            stop: keeper_stop.clone(),
            lost: lost.clone(),
            release: Arc::clone(&release),
        },
        acquired_from,
    ));
    let writer = match WriterRole::start(&shared, opened).await {
        Ok(writer) => writer,
        Err(error) => {
            keeper_stop.cancel();
            let _ = keeper.await;
            let release = Arc::clone(&leases);
            let given = lease.clone();
            let _ = tokio::task::spawn_blocking(move || lock(&release).release(&given)).await;
            held(&shared, &shard, false);
            // The store failing while the state loads (the database restarting) is waited out
            // as a standby; anything else (a baseline manifest, a channel's client) is the
            // config's, and stops the service.
            let from_store = error.chain().any(|cause| {
                cause
                    .downcast_ref::<drift_store::Error>()
                    .is_some_and(|error| matches!(error.kind(), "postgres" | "unavailable"))
            });
            let reason = format!(
                "took the writer lease of shard {shard} but could not start as the writer: {error:#}"
            );
            if !from_store {
                shared.fail(reason);
                return None;
            }
            tracing::error!(message = "Could not load the state; standing by to try again.", reason = %reason);
            set_reason(standby, format!("shard {shard}: {reason}"));
            return Some(Turn::Retry);
        }
    };
    let _ = health.set(Arc::clone(writer.pipeline.health()));
    held(&shared, &shard, true);
    tracing::info!(
        message = "Became the writer.",
        shard = %shard,
        epoch = lease.epoch,
        objects = writer.loaded.0,
        load_ms = u64::try_from(writer.loaded.1.as_millis()).unwrap_or(u64::MAX),
    );
    Some(Turn::Writer(Box::new(Role {
        writer,
        elected: Elected {
            lease,
            leases,
            keeper_stop,
            keeper,
            shared,
        },
        lost,
        release,
    })))
}

/// Between the keeper and its role: `stop` ends the keeper, `lost` is cancelled by it when the
/// role must end, and `release` says the lease is still this replica's to give up.
struct KeeperSignals {
    stop: CancellationToken,
    lost: CancellationToken,
    release: Arc<std::sync::atomic::AtomicBool>,
}

/// What a turn of standing by ended in.
enum Turn {
    /// This replica is the writer.
    Writer(Box<Role>),
    /// It took the lease but could not start (the store failed); it stands by again.
    Retry,
}

fn set_reason(standby: &crate::ingest::Standby, reason: String) {
    if let Ok(mut current) = standby.reason.write() {
        *current = reason;
    }
}

/// Renews the lease every `renewInterval` and cancels `lost` when it is lost: taken over (a
/// renewal or a commit was fenced) or not renewed in time (the database unreachable, the
/// process paused).
async fn keep(
    shared: Shared,
    lease: WriterLease,
    leases: SharedLeases,
    health: WriterHealth,
    signals: KeeperSignals,
    acquired_from: Instant,
) {
    let KeeperSignals {
        stop,
        lost: lost_token,
        release,
    } = signals;
    let settings = shared.config.store.lease.clone();
    let deadline = renewal_deadline(&settings);
    // The acquisition counts as the first renewal, from before its expiry was computed.
    let mut renewed_from = acquired_from;
    let mut next_renewal = Instant::now();
    let mut in_flight: Option<(
        Instant,
        tokio::task::JoinHandle<Result<drift_model::Millis, Error>>,
    )> = None;
    let mut warned = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(WATCH_INTERVAL) => {}
        }
        if in_flight
            .as_ref()
            .is_some_and(|(_, task)| task.is_finished())
        {
            if let Some((started, task)) = in_flight.take() {
                match task.await {
                    Ok(Ok(_)) => {
                        renewed_from = started;
                        shared.lease.hold_until(started + deadline);
                        warned = false;
                    }
                    Ok(Err(Error::LeaseLost { .. })) => {
                        return lost(
                            &shared,
                            &lease,
                            &lost_token,
                            "taken_over",
                            "another replica took the writer lease".to_string(),
                        );
                    }
                    Ok(Err(error)) => {
                        if !warned {
                            tracing::warn!(message = "Could not renew the writer lease; retrying.", shard = %lease.shard, %error);
                            warned = true;
                        }
                    }
                    Err(error) => tracing::warn!(message = "Lease renewal task failed.", %error),
                }
            }
        }
        if health
            .get()
            .is_some_and(|health| health.gave_up.load(Ordering::SeqCst))
        {
            // The lease is still this replica's: given up so the state is loaded again, and
            // released after the writer stopped so the next writer need not wait out the ttl.
            release.store(true, Ordering::SeqCst);
            return lost(
                &shared,
                &lease,
                &lost_token,
                "commit_unknown",
                "a commit's outcome could not be told: the state is loaded again".to_string(),
            );
        }
        if health
            .get()
            .is_some_and(|health| health.lease_lost.load(Ordering::SeqCst))
        {
            return lost(
                &shared,
                &lease,
                &lost_token,
                "taken_over",
                "a commit was fenced: another replica took the writer lease".to_string(),
            );
        }
        if renewed_from.elapsed() >= deadline {
            return lost(
                &shared,
                &lease,
                &lost_token,
                "unrenewed",
                format!(
                    "no renewal of the writer lease reached the database for {:.1}s (store.lease.ttl {}s): a standby may take over",
                    renewed_from.elapsed().as_secs_f64(),
                    settings.ttl.as_secs_f64()
                ),
            );
        }
        // After the deadline check: a replica that gave the role up must not extend the lease
        // it gave up. One renewal at a time: a renewal stuck on a dead connection is not repeated behind it.
        if in_flight.is_none() && Instant::now() >= next_renewal {
            let started = Instant::now();
            next_renewal = started + settings.renew_interval;
            let now = (shared.clock)();
            let (leases, held_lease) = (Arc::clone(&leases), lease.clone());
            in_flight = Some((
                started,
                tokio::task::spawn_blocking(move || lock(&leases).renew(&held_lease, now)),
            ));
        }
    }
}

/// How long after its last renewal (or its acquisition) a writer may act on its lease: a renewal
/// interval less than the ttl, so it gives up before the lease can expire for the others.
fn renewal_deadline(settings: &drift_core::config::LeaseConfig) -> Duration {
    settings.ttl.saturating_sub(settings.renew_interval)
}

fn lost(
    shared: &Shared,
    lease: &WriterLease,
    token: &CancellationToken,
    reason: &str,
    detail: String,
) {
    // Unready and refusing events first; the replica then stops the writer role.
    shared.lease.set_lost(true);
    shared
        .metrics
        .writer_lease_losses
        .get_or_create(&ShardReasonLabel {
            shard: lease.shard.clone(),
            reason: reason.to_string(),
        })
        .inc();
    held(shared, &lease.shard, false);
    tracing::error!(
        message = "Lost the writer lease: this replica stops writing and stands by.",
        shard = %lease.shard,
        epoch = lease.epoch,
        reason,
        detail = %detail,
    );
    token.cancel();
}
