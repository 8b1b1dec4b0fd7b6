//! Wiring: config → store → engine → pipeline writer → HTTP server, and the shutdown sequence.
//!
//! SIGTERM (or SIGINT) turns readiness false and makes new events `503` (the Broker retries them
//! on another pod or later), lets in-flight requests finish and their commits land, and exits
//! within `server.drainTimeout`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ResyncMode};
use crate::decode::ClusterNames;
use crate::ingest::{self, AppState};
use crate::metrics::Metrics;
use crate::pipeline::{self, Pipeline};

/// A running server, for tests and `main`.
pub struct Server {
    /// The bound address.
    pub addr: SocketAddr,
    /// Cancel to start a graceful shutdown.
    pub shutdown: CancellationToken,
    /// Completes when the server has drained and the writer has stopped.
    pub done: tokio::task::JoinHandle<()>,
}

/// Cluster naming from the config.
pub(crate) fn cluster_names(config: &Config) -> ClusterNames {
    ClusterNames {
        default: config.default_cluster.clone(),
        by_source: config.clusters.clone(),
    }
}

/// Starts the service on `addr` and returns once it listens.
pub async fn start(
    config: Config,
    config_path: Option<PathBuf>,
    addr: SocketAddr,
) -> anyhow::Result<Server> {
    let metrics = Arc::new(Metrics::new());
    // One clock for the writer, the relays, the channels (re-signing) and the API.
    let clock = crate::time::system_clock();
    let opened = crate::store::open(&config.store)
        .with_context(|| format!("opening store {}", config.store.location()))?;
    let crate::store::Opened {
        writer: store,
        outbox,
        audit,
        background: store_background,
    } = opened;
    let mut channel_configs = config.channels.clone();
    if channel_configs.is_empty() {
        channel_configs.push(crate::config::ChannelConfig::log("log"));
    }
    let router = crate::route::Router::new(&config.routes, &channel_configs);
    let outbox_notify = Arc::new(tokio::sync::Notify::new());
    let rules = Arc::new(crate::reload::load_rules(&config).context("loading baseline manifests")?);
    crate::reload::warn_expired_silences(&config, clock());
    let pipeline = Pipeline::start(
        store,
        rules,
        pipeline::Settings {
            router,
            outbox_notify: Arc::clone(&outbox_notify),
            queue_capacity: config.server.queue_capacity,
            dedup_retention: config.store.dedup_retention,
            audit_retention: config.store.retention,
            heartbeat_interval: std::time::Duration::from_secs(5),
            capacity: config.limits.capacity(),
        },
        clock.clone(),
        Arc::clone(&metrics),
    )
    .context("loading state from the store")?;
    let draining = Arc::new(AtomicBool::new(false));
    // The API's end of the resync loop; it refuses requests until the loop attaches to it.
    let resync_control = Arc::new(pipeline::ResyncControl::new());
    let api = crate::api::router(crate::api::ApiState {
        audit: Some(audit),
        token: config.api.token.clone(),
        pipeline: pipeline.clone(),
        clock: clock.clone(),
        public_url: config.public_url.clone(),
        resync: Arc::clone(&resync_control),
    });
    let state = AppState {
        ingest_auth: match (&config.auth.oidc, &config.auth.bearer_token) {
            (Some(oidc), _) => crate::ingest::auth::IngestAuth::Oidc(Arc::new(
                crate::ingest::auth::OidcVerifier::new(oidc.clone()).map_err(anyhow::Error::msg)?,
            )),
            (None, Some(token)) => crate::ingest::auth::IngestAuth::Static(token.clone()),
            (None, None) => crate::ingest::auth::IngestAuth::Open,
        },
        pipeline: pipeline.clone(),
        clusters: Arc::new(cluster_names(&config)),
        metrics: Arc::clone(&metrics),
        draining: Arc::clone(&draining),
        body_limit: config.server.body_limit_bytes,
        in_flight_limit: config.server.in_flight_limit(),
        body_pace: ingest::admission::BodyPace {
            grace: config.server.body_read_timeout,
            min_bytes_per_second: config.server.body_min_bytes_per_second,
        },
    };
    let connection_limits = ingest::ConnectionLimits {
        header_read_timeout: config.server.header_read_timeout,
        idle_timeout: config.server.idle_timeout,
        max_connections: config.server.max_connections,
    };
    warn_if_files_run_out(connection_limits.max_connections);
    let router = ingest::router(state, api, config.server.request_timeout);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let outbox: crate::deliver::relay::SharedOutbox = Arc::new(std::sync::Mutex::new(outbox));
    let channels = crate::deliver::build_channels(
        &channel_configs,
        config.public_url.as_deref(),
        clock.clone(),
    )
    .context("building HTTP clients for channels")?;
    {
        // Notifications queued for a channel that was since removed or renamed have no relay:
        // end them visibly instead of leaving them pending forever.
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
    let identity = Identity::of_this_process();
    release_stale_claims(&outbox, &identity);
    let identity = identity.owner_prefix();
    let mut relays = Vec::new();
    for channel in channels {
        let send_timeout = channel_configs
            .iter()
            .find(|candidate| {
                channel.name() == candidate.name
                    || channel.name().starts_with(&format!("{}#", candidate.name))
            })
            .map(|candidate| candidate.timeout)
            .unwrap_or(std::time::Duration::from_secs(10));
        let settings = channel_configs
            .iter()
            .find(|candidate| {
                channel.name() == candidate.name
                    || channel.name().starts_with(&format!("{}#", candidate.name))
            })
            .map(|candidate| crate::deliver::relay::Limits {
                max_attempts: candidate.max_attempts,
                max_age: candidate.max_age,
                min_backoff: candidate.min_backoff,
                max_backoff: candidate.max_backoff,
            })
            .context("channel without config")?;
        let relay = crate::deliver::relay::Relay::new(
            channel,
            settings,
            Arc::clone(&outbox),
            clock.clone(),
            Arc::clone(&metrics),
            Arc::clone(&outbox_notify),
        )
        .with_claims(&identity, send_timeout);
        relays.push(tokio::spawn(relay.run(relay_stop.clone())));
    }
    relays.push(tokio::spawn(crate::deliver::relay::watch_outbox(
        Arc::clone(&outbox),
        clock.clone(),
        Arc::clone(&metrics),
        relay_stop.clone(),
    )));
    let resync_stop = CancellationToken::new();
    let resync = start_resync(
        &config,
        &pipeline,
        &metrics,
        resync_control,
        resync_stop.clone(),
    )
    .await?;
    if let Some(path) = config_path {
        crate::reload::spawn(
            path,
            pipeline.clone(),
            Arc::clone(&metrics),
            clock.clone(),
            shutdown.clone(),
        );
    }
    let drain_timeout = config.server.drain_timeout;
    let server_shutdown = shutdown.clone();
    let server_metrics = Arc::clone(&metrics);
    let done = tokio::spawn(async move {
        let graceful = server_shutdown.clone();
        let mut serve = tokio::spawn(async move {
            ingest::serve(
                listener,
                router,
                connection_limits,
                server_metrics,
                async move { graceful.cancelled().await },
            )
            .await
        });
        tokio::select! {
            // The server's own graceful shutdown waits for the same token, so with no request in
            // flight both branches are ready at once: the shutdown branch must win (draining
            // set, the drain logged), not whichever `select!` would pick at random.
            biased;
            _ = server_shutdown.cancelled() => {
                draining.store(true, Ordering::SeqCst);
                tracing::info!(message = "Shutting down: draining in-flight requests.", drain_timeout = ?drain_timeout);
                if tokio::time::timeout(drain_timeout, &mut serve).await.is_err() {
                    tracing::warn!(message = "Drain timeout reached; closing remaining connections.");
                    serve.abort();
                }
            }
            result = &mut serve => {
                if let Ok(Err(error)) = result {
                    tracing::error!(message = "HTTP server failed.", %error);
                }
            }
        }
        resync_stop.cancel();
        if let Some(resync) = resync {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), resync).await;
        }
        let writer = pipeline.clone();
        let _ = tokio::task::spawn_blocking(move || {
            writer.shutdown();
            drop(store_background);
        })
        .await;
        // Deliveries in flight finish their attempt; anything unsent stays in the outbox.
        relay_stop.cancel();
        for relay in relays {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), relay).await;
        }
        tracing::info!(message = "Stopped.");
    });
    tracing::info!(message = "Listening.", %addr);
    Ok(Server {
        addr,
        shutdown,
        done,
    })
}

/// Warns when the process may run out of file descriptors before it reaches
/// `server.maxConnections` (the soft `RLIMIT_NOFILE`, read from `/proc/self/limits` on Linux):
/// `accept` would then fail while the cap still allows connections.
fn warn_if_files_run_out(max_connections: usize) {
    /// Descriptors the process needs besides connections: the store's files, the channels'
    /// connections, the runtime's own.
    const OTHER_FILES: usize = 64;
    let Ok(limits) = std::fs::read_to_string("/proc/self/limits") else {
        return;
    };
    let soft = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|value| value.parse::<usize>().ok());
    if let Some(soft) = soft {
        if soft < max_connections.saturating_add(OTHER_FILES) {
            tracing::warn!(
                message = "The open-file limit is below server.maxConnections plus what the process needs besides; lower server.maxConnections or raise the limit.",
                open_file_limit = soft,
                max_connections,
            );
        }
    }
}

/// This process as the owner of outbox claims: `{instance}/{pid}/{start}`, unique among the
/// processes that share a store. `instance` is the pod's name (`POD_NAME`, from the downward
/// API), else the host's name; `start` tells apart two runs that got the same pid.
struct Identity {
    instance: String,
    pid: u32,
    start: String,
}

impl Identity {
    fn of_this_process() -> Identity {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|name| name.trim().to_string());
        let instance = std::env::var("POD_NAME")
            .ok()
            .or(host)
            .or_else(|| std::env::var("HOSTNAME").ok())
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| "local".to_string())
            .replace('/', "_");
        let start = uuid::Uuid::new_v4().simple().to_string();
        Identity {
            instance,
            pid: std::process::id(),
            start: start[..8].to_string(),
        }
    }

    /// The prefix of this process's claim owners (each relay adds its channel).
    fn owner_prefix(&self) -> String {
        format!("{}/{}/{}", self.instance, self.pid, self.start)
    }

    /// True when `owner` is a process of this instance that no longer runs: an earlier run of
    /// this pod (a restarted container often gets the same pid) or a process whose pid is gone.
    /// Claims of other instances are left to lapse.
    fn is_gone(&self, owner: &str) -> bool {
        let mut parts = owner.splitn(3, '/');
        let (Some(instance), Some(pid)) = (parts.next(), parts.next()) else {
            return false;
        };
        if instance != self.instance {
            return false;
        }
        match pid.parse::<u32>() {
            Ok(pid) if pid == self.pid => true,
            Ok(pid) => !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            Err(_) => false,
        }
    }
}

/// Releases the outbox claims of earlier runs of this instance, so their unsent rows go out at
/// once instead of when the claims lapse.
fn release_stale_claims(outbox: &crate::deliver::relay::SharedOutbox, identity: &Identity) {
    let mut guard = outbox
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let owners = match guard.claim_owners() {
        Ok(owners) => owners,
        Err(error) => {
            tracing::warn!(message = "Could not read the outbox claims.", %error);
            return;
        }
    };
    for owner in owners.iter().filter(|owner| identity.is_gone(owner)) {
        match guard.release(owner) {
            Ok(count) if count > 0 => tracing::info!(
                message = "Released the outbox claims of an earlier run.",
                owner = %owner,
                count
            ),
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(message = "Could not release old outbox claims.", %error)
            }
        }
    }
}

/// Whether resync runs with this config (see [`crate::config::ResyncMode`]).
pub(crate) fn resync_enabled(config: &Config) -> bool {
    match config.resync.enabled {
        ResyncMode::On => true,
        ResyncMode::Off => false,
        ResyncMode::Auto => {
            config.resync.kubeconfig.is_some()
                || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        }
    }
}

/// Starts the resync task when the config asks for it. An explicit `enabled: true` that cannot
/// reach a cluster configuration fails the start; `auto` logs and runs without resync.
#[cfg(feature = "cluster")]
async fn start_resync(
    config: &Config,
    pipeline: &Pipeline,
    metrics: &Arc<Metrics>,
    control: Arc<pipeline::ResyncControl>,
    stop: CancellationToken,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    use crate::cluster::{resync, Cluster, Resource};
    if !resync_enabled(config) {
        // Say why, once: `auto` outside a pod ignores $KUBECONFIG, which surprises people.
        let why = match config.resync.enabled {
            ResyncMode::Off => "resync.enabled is false",
            _ => {
                "resync.enabled is auto, and this is not a pod and resync.kubeconfig is not set \
                 ($KUBECONFIG and ~/.kube/config are used only with resync.enabled: true)"
            }
        };
        tracing::info!(message = "Resync off.", why);
        return Ok(None);
    }
    let settings = &config.resync;
    let cluster =
        match Cluster::connect(settings.kubeconfig.as_deref(), settings.context.as_deref()).await {
            Ok(cluster) => cluster,
            Err(error) if settings.enabled == ResyncMode::On => {
                return Err(anyhow::Error::new(error).context("resync.enabled is true"));
            }
            Err(error) => {
                metrics
                    .resync_errors
                    .get_or_create(&crate::metrics::KindLabel::new(error.kind()))
                    .inc();
                tracing::error!(message = "Resync is off: no cluster configuration.", %error);
                return Ok(None);
            }
        };
    let resources = settings
        .listed()
        .map(|(_, resource)| Resource::new(resource))
        .collect::<Result<Vec<_>, _>>()
        .context("resync.resources")?;
    tracing::info!(
        message = "Resync on.",
        cluster = %cluster.description,
        interval = ?settings.interval,
        resources = resources.len(),
    );
    let resync = resync::Resync::new(
        cluster,
        pipeline.clone(),
        Arc::clone(metrics),
        crate::time::system_clock(),
        resync::Settings {
            interval: settings.interval,
            page_size: settings.page_size,
            cluster: settings
                .cluster
                .clone()
                .unwrap_or_else(|| config.default_cluster.clone()),
            resources,
            min_backoff: resync::MIN_BACKOFF,
        },
    )
    .with_control(control);
    Ok(Some(tokio::spawn(resync.run(stop))))
}

#[cfg(not(feature = "cluster"))]
async fn start_resync(
    config: &Config,
    _pipeline: &Pipeline,
    _metrics: &Arc<Metrics>,
    _control: Arc<pipeline::ResyncControl>,
    _stop: CancellationToken,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    if !resync_enabled(config) {
        return Ok(None);
    }
    if config.resync.enabled == ResyncMode::On {
        anyhow::bail!("resync.enabled is true, but this build has no `cluster` feature");
    }
    tracing::warn!(message = "Resync is off: this build has no `cluster` feature.");
    Ok(None)
}

/// Runs the service until SIGTERM or SIGINT.
pub async fn run(config: Config, config_path: Option<PathBuf>) -> anyhow::Result<()> {
    let port = match std::env::var("PORT") {
        Ok(text) => text
            .parse::<u16>()
            .with_context(|| format!("PORT={text:?} is not a port number"))?,
        Err(_) => config.server.port,
    };
    let addr = SocketAddr::from(([0, 0, 0, 0], port));
    let server = start(config, config_path, addr).await?;
    let shutdown = server.shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        shutdown.cancel();
    });
    server.done.await.context("server task")?;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
