//! The writer role: the pipeline's writer over the store, the relays that deliver its outbox, the
//! resync loop and the config reload, and the routes that serve them. A replica has it from its
//! start (SQLite) or from when it took the writer lease (PostgreSQL), with the served-traffic
//! poller that feeds its writer; stopping it lets the last commit land before the relays stop.

use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use super::{release_stale_claims, start_resync, Shared};
use crate::ingest::{self, AppState};
use crate::pipeline::{self, Pipeline};

/// A running writer role.
pub(super) struct WriterRole {
    pub(super) pipeline: Pipeline,
    store_background: Box<dyn Send>,
    relays: Vec<tokio::task::JoinHandle<()>>,
    relay_stop: CancellationToken,
    resync: Option<tokio::task::JoinHandle<()>>,
    /// Stops resync and the remediation sender.
    resync_stop: CancellationToken,
    /// The remediation sender (`remediation.mode: apply`).
    remediation: Option<tokio::task::JoinHandle<()>>,
    /// The served-traffic poller (`traffic.prometheus.url`), stopped with resync.
    traffic: Option<tokio::task::JoinHandle<()>>,
    /// Stops the config reload thread of this role.
    reload_stop: CancellationToken,
    metrics: Arc<crate::metrics::Metrics>,
    /// How many objects the writer loaded, and how long loading took (the takeover's cost).
    pub(super) loaded: (usize, std::time::Duration),
}

impl WriterRole {
    /// Loads the state from the store, starts the writer, the relays, resync and reload, and
    /// routes requests to them (`shared.active`).
    pub(super) async fn start(
        shared: &Shared,
        opened: drift_store::Opened,
    ) -> anyhow::Result<WriterRole> {
        let config = &shared.config;
        let clock = shared.clock.clone();
        let metrics = &shared.metrics;
        let drift_store::Opened {
            writer: store,
            outbox,
            audit,
            background: store_background,
            leases: _,
        } = opened;
        let channel_configs = config.effective_channels();
        let router = config.router();
        let outbox_notify = Arc::new(tokio::sync::Notify::new());
        let rules =
            Arc::new(crate::reload::load_rules(config).context("loading baseline manifests")?);
        crate::reload::warn_expired_silences(config, clock());
        let settings = pipeline::Settings {
            router,
            outbox_notify: Arc::clone(&outbox_notify),
            queue_capacity: config.server.queue_capacity,
            dedup_retention: config.store.dedup_retention,
            audit_retention: config.store.retention,
            heartbeat_interval: std::time::Duration::from_secs(5),
            capacity: config.limits.capacity(),
            max_active_silences: config.limits.max_active_silences,
            shard: Arc::new(config.shard.clone()),
            remediation: Arc::new(
                config
                    .remediation
                    .compile(&config.resync, &config.default_cluster)
                    .context("the remediation: section")?,
            ),
            traffic_observed: config.traffic.enabled(),
        };
        let policy = &settings.remediation;
        match policy.mode {
            drift_core::remediate::Mode::Off => tracing::info!(message = "Remediation off."),
            mode => tracing::info!(
                message = "Remediation on.",
                mode = mode.as_str(),
                rules = policy.rules.len(),
                cluster = policy.cluster.as_deref().unwrap_or(""),
            ),
        }
        // Loading reads every tracked object: off the async runtime, so a standby's health
        // checks keep their answers while it takes over.
        let started = std::time::Instant::now();
        let (writer_clock, writer_metrics) = (clock.clone(), Arc::clone(metrics));
        let pipeline = tokio::task::spawn_blocking(move || {
            Pipeline::start(store, rules, settings, writer_clock, writer_metrics)
        })
        .await
        .context("loading state from the store")?
        .context("loading state from the store")?;
        let loaded = (pipeline.object_count(), started.elapsed());
        // The API's end of the resync loop; it refuses requests until the loop attaches to it.
        let resync_control = Arc::new(pipeline::ResyncControl::new());
        let sender_audit = Arc::clone(&audit);
        let api = crate::api::router(crate::api::ApiState {
            audit: Some(audit),
            token: config
                .api
                .token
                .as_ref()
                .map(drift_core::config::Secret::trimmed),
            pipeline: pipeline.clone(),
            clock: clock.clone(),
            public_url: config.public_url.clone(),
            resync: Arc::clone(&resync_control),
        });
        let state = AppState {
            ingest_auth: match (&config.auth.oidc, &config.auth.bearer_token) {
                (Some(oidc), _) => crate::ingest::auth::IngestAuth::Oidc(Arc::new(
                    crate::ingest::auth::OidcVerifier::new(oidc.clone())?,
                )),
                (None, Some(token)) => crate::ingest::auth::IngestAuth::Static(token.trimmed()),
                (None, None) => crate::ingest::auth::IngestAuth::Open,
            },
            pipeline: pipeline.clone(),
            clusters: Arc::new(super::cluster_names(config)),
            metrics: Arc::clone(metrics),
            draining: Arc::clone(&shared.draining),
            body_limit: config.server.body_limit_bytes,
            in_flight_limit: config.server.in_flight_limit(),
            body_pace: ingest::admission::BodyPace {
                grace: config.server.body_read_timeout,
                min_bytes_per_second: config.server.body_min_bytes_per_second,
            },
            shard: Arc::new(config.shard.clone()),
            lease: Arc::clone(&shared.lease),
        };
        let routes = ingest::router(state, api, config.server.request_timeout);
        let outbox: crate::deliver::relay::SharedOutbox = Arc::new(std::sync::Mutex::new(outbox));
        let channels = crate::deliver::build_channels(
            &channel_configs,
            config.public_url.as_deref(),
            &drift_core::classify::classes::catalog(),
            clock.clone(),
        )
        .context("building HTTP clients for channels")?;
        {
            // Notifications queued for a channel that was since removed or renamed have no relay:
            // end them visibly instead of leaving them pending forever. In a shard, only the
            // shard's own (its outbox handle is the shard's: see `open_store`).
            let known: Vec<String> = channels
                .iter()
                .map(|channel| channel.name().to_string())
                .collect();
            let now = clock();
            let mut guard = outbox
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match guard.expire_unknown_channels(&known, now) {
                Ok(0) => {}
                Ok(count) => tracing::warn!(
                    message = "Expired notifications of channels no longer configured.",
                    count
                ),
                Err(error) => {
                    tracing::warn!(message = "Could not check the outbox for removed channels.", %error)
                }
            }
        }
        let relay_stop = CancellationToken::new();
        release_stale_claims(&outbox, &shared.identity);
        let identity = shared.identity.owner_prefix();
        let mut relays = Vec::new();
        for channel in channels {
            let owning = channel_configs.iter().find(|candidate| {
                channel.name() == candidate.name
                    || channel.name().starts_with(&format!("{}#", candidate.name))
            });
            let send_timeout = owning
                .map(|candidate| candidate.timeout)
                .unwrap_or(std::time::Duration::from_secs(10));
            let limits = owning
                .map(|candidate| crate::deliver::relay::Limits {
                    max_attempts: candidate.max_attempts,
                    max_age: candidate.max_age,
                    min_backoff: candidate.min_backoff,
                    max_backoff: candidate.max_backoff,
                })
                .context("channel without config")?;
            let relay = crate::deliver::relay::Relay::new(
                channel,
                limits,
                Arc::clone(&outbox),
                clock.clone(),
                Arc::clone(metrics),
                Arc::clone(&outbox_notify),
            )
            .with_claims(&identity, send_timeout);
            relays.push(tokio::spawn(relay.run(relay_stop.clone())));
        }
        relays.push(tokio::spawn(crate::deliver::relay::watch_outbox(
            Arc::clone(&outbox),
            clock.clone(),
            Arc::clone(metrics),
            relay_stop.clone(),
        )));
        let resync_stop = CancellationToken::new();
        let resync = start_resync(
            config,
            &pipeline,
            metrics,
            resync_control,
            resync_stop.clone(),
        )
        .await?;
        let remediation =
            super::start_remediation(config, &pipeline, sender_audit, resync_stop.clone()).await?;
        let traffic = crate::traffic::Poller::new(config, pipeline.clone(), Arc::clone(metrics))?
            .map(|poller| tokio::spawn(poller.run(resync_stop.clone())));
        let reload_stop = shared.shutdown.child_token();
        if let Some(watched) = &shared.config_file {
            crate::reload::spawn(
                watched.clone(),
                pipeline.clone(),
                Arc::clone(metrics),
                clock.clone(),
                reload_stop.clone(),
            );
        }
        // From now on every request goes to the writer's routes (a lease lost while the state
        // loaded stays lost: the replica stops this role at once).
        if let Ok(mut active) = shared.active.write() {
            *active = Some(routes);
        }
        Ok(WriterRole {
            pipeline,
            store_background,
            relays,
            relay_stop,
            resync,
            resync_stop,
            remediation,
            traffic,
            reload_stop,
            loaded,
            metrics: Arc::clone(metrics),
        })
    }

    /// Stops resync and the remediation sender, then the writer (its last commit lands), then the relays (deliveries in
    /// flight finish their attempt; anything unsent stays in the outbox).
    pub(super) async fn stop(self) {
        self.reload_stop.cancel();
        self.resync_stop.cancel();
        if let Some(resync) = self.resync {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), resync).await;
        }
        if let Some(traffic) = self.traffic {
            // A query under way is dropped at the stop; nothing of it is half-written.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), traffic).await;
        }
        // A send under way finishes and its outcome is kept before the writer stops; past the
        // grace the attempt stays `sending`, which the next start ends as unknown.
        if let Some(mut sender) = self.remediation {
            if tokio::time::timeout(std::time::Duration::from_secs(10), &mut sender)
                .await
                .is_err()
            {
                sender.abort();
            }
        }
        let writer = self.pipeline.clone();
        let background = self.store_background;
        let _ = tokio::task::spawn_blocking(move || {
            writer.shutdown();
            drop(background);
        })
        .await;
        self.relay_stop.cancel();
        for mut relay in self.relays {
            // A relay still sending after its grace is aborted, not left running: a later writer
            // role of this process claims under the same owner name, and two relays behind one
            // owner would not keep each other's rows apart.
            if tokio::time::timeout(std::time::Duration::from_secs(5), &mut relay)
                .await
                .is_err()
            {
                relay.abort();
            }
        }
        self.metrics.clear_writer_gauges();
    }
}
