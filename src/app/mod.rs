//! Wiring: config → store → engine → pipeline writer → HTTP server, and the shutdown sequence.
//!
//! SIGTERM (or SIGINT) turns readiness false and makes new events `503` (the Broker retries them
//! on another pod or later), lets in-flight requests finish and their commits land, and exits
//! within `server.drainTimeout`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::ingest;
use crate::metrics::Metrics;
use crate::pipeline::{self, Pipeline};
use drift_core::config::{Config, ResyncMode};
use drift_core::decode::ClusterNames;

mod lease;
#[cfg(feature = "cluster")]
mod remediation;
mod stranded;
mod writer;

/// A running server, for tests and `main`.
pub struct Server {
    /// The bound address.
    pub addr: SocketAddr,
    /// Cancel to start a graceful shutdown.
    pub shutdown: CancellationToken,
    /// Completes when the server has drained and the writer has stopped.
    pub done: tokio::task::JoinHandle<()>,
    /// Why the service stopped on its own, when it did: it took the writer lease but could not
    /// start as the writer. `run` exits non-zero with this, so the pod restarts.
    pub failure: Arc<std::sync::Mutex<Option<String>>>,
}

/// Cluster naming from the config.
pub(crate) fn cluster_names(config: &Config) -> ClusterNames {
    ClusterNames {
        default: config.default_cluster.clone(),
        by_source: config.clusters.clone(),
    }
}

/// What the parts of a running service share: the config, the clock, the metrics and the
/// flags of its lifecycle.
#[derive(Clone)]
struct Shared {
    config: Arc<Config>,
    /// The config file, for hot reload (`None`: the all-defaults config, no file).
    config_file: Option<crate::reload::Watched>,
    metrics: Arc<Metrics>,
    clock: drift_model::time::Clock,
    /// Cancelled to stop the service (a signal, or a writer that cannot start).
    shutdown: CancellationToken,
    /// Cancelled after the HTTP drain: the writer role stops (its last commit lands) and gives
    /// its lease up.
    role_stop: CancellationToken,
    /// Set when the service stops: readiness false, new events `503`.
    draining: Arc<AtomicBool>,
    /// Whether the writer role still holds its lease (lost while a writer role that lost it
    /// stops; its time runs out between renewals).
    lease: Arc<ingest::LeaseGate>,
    /// The writer's routes while this replica is the writer.
    active: Arc<std::sync::RwLock<Option<ingest::Routes>>>,
    /// This process, as the owner of outbox claims and the writer lease.
    identity: Arc<Identity>,
    /// Why the service stopped on its own.
    failure: Arc<std::sync::Mutex<Option<String>>>,
}

impl Shared {
    /// Stops the service because of `reason` (it exits non-zero).
    fn fail(&self, reason: String) {
        self.draining.store(true, Ordering::SeqCst);
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(reason);
        }
        self.shutdown.cancel();
    }
}

/// Starts the service on `addr` and returns once it listens.
///
/// With a SQLite store the process is the writer at once. With a PostgreSQL store it first
/// stands by: it serves `/healthz` and `/metrics`, is not ready, and becomes the writer (loads
/// state, becomes ready) once it holds its shard's writer lease (see `lease.rs`).
pub async fn start(
    config: Config,
    config_file: Option<crate::reload::Watched>,
    addr: SocketAddr,
) -> anyhow::Result<Server> {
    let metrics = Arc::new(Metrics::new());
    // One clock for the writer, the relays, the channels (re-signing) and the API.
    let clock = drift_model::time::system_clock();
    // A shared store that cannot be reached now (the database restarting, a network blip) is
    // waited for as a standby, alive and not ready, like a writer that lost it; a SQLite file
    // that cannot be opened, or a store written by a newer binary, stops the start.
    let (opened, leases) = match open_store(&config) {
        Ok(mut opened) => {
            let leases = opened.leases.take();
            (Some(opened), leases)
        }
        Err(error) if config.store.url.is_some() && error.kind() == "postgres" => {
            tracing::error!(
                message = "Cannot open the store now; standing by until it can.",
                store = %config.store.location(),
                %error
            );
            (None, None)
        }
        Err(error) => {
            return Err(anyhow::Error::new(error))
                .with_context(|| format!("opening store {}", config.store.location()))
        }
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let addr = listener.local_addr()?;
    let connection_limits = ingest::ConnectionLimits {
        header_read_timeout: config.server.header_read_timeout,
        idle_timeout: config.server.idle_timeout,
        max_connections: config.server.max_connections,
    };
    warn_if_files_run_out(connection_limits.max_connections);
    let drain_timeout = config.server.drain_timeout;
    let shared = Shared {
        config: Arc::new(config),
        config_file,
        metrics: Arc::clone(&metrics),
        clock,
        shutdown: CancellationToken::new(),
        role_stop: CancellationToken::new(),
        draining: Arc::new(AtomicBool::new(false)),
        lease: Arc::new(ingest::LeaseGate::default()),
        active: Arc::new(std::sync::RwLock::new(None)),
        identity: Arc::new(Identity::of_this_process()),
        failure: Arc::new(std::sync::Mutex::new(None)),
    };
    let standby = ingest::Standby {
        reason: Arc::new(std::sync::RwLock::new(String::new())),
        metrics: Arc::clone(&metrics),
    };
    let switch = ingest::switch(standby.clone(), Arc::clone(&shared.active));
    // The writer role: at once on SQLite; on PostgreSQL, whenever this replica holds the lease.
    // Either task ends once `role_stop` is cancelled, with the role stopped.
    let replica: tokio::task::JoinHandle<()> = match (opened, leases) {
        (Some(opened), None) => {
            let role = writer::WriterRole::start(&shared, opened).await?;
            let stop = shared.role_stop.clone();
            tokio::spawn(async move {
                stop.cancelled().await;
                role.stop().await;
            })
        }
        (Some(opened), Some(leases)) => tokio::spawn(lease::replica(
            shared.clone(),
            Some((opened, leases)),
            standby,
        )),
        (None, _) => tokio::spawn(lease::replica(shared.clone(), None, standby)),
    };
    let role_stop = shared.role_stop.clone();
    let server_shutdown = shared.shutdown.clone();
    let server_metrics = Arc::clone(&metrics);
    let draining = Arc::clone(&shared.draining);
    let done = tokio::spawn(async move {
        let graceful = server_shutdown.clone();
        let mut serve = tokio::spawn(async move {
            ingest::serve(
                listener,
                switch,
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
        // A standby still waiting for the lease ends; a writer role stops (its last commit
        // lands), and then its lease is given up.
        server_shutdown.cancel();
        role_stop.cancel();
        let _ = replica.await;
        tracing::info!(message = "Stopped.");
    });
    tracing::info!(message = "Listening.", %addr);
    Ok(Server {
        addr,
        shutdown: shared.shutdown.clone(),
        done,
        failure: shared.failure,
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
pub(crate) struct Identity {
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

/// Whether resync runs with this config (see [`drift_core::config::ResyncMode`]).
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

/// Starts the remediation sender when `remediation.mode` is `apply`, on the cluster resync
/// reaches (its kubeconfig and context). Asked to write, it must reach a cluster: a missing
/// client configuration fails the start.
#[cfg(feature = "cluster")]
async fn start_remediation(
    config: &Config,
    pipeline: &Pipeline,
    audit: Arc<dyn drift_store::AuditRead>,
    stop: CancellationToken,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    if pipeline.remediation().mode != drift_core::remediate::Mode::Apply {
        return Ok(end_stranded(config, pipeline, audit));
    }
    let settings = &config.resync;
    let cluster = crate::cluster::Cluster::connect_for_writes(
        settings.kubeconfig.as_deref(),
        settings.context.as_deref(),
    )
    .await
    .context(
        "remediation.mode is apply and needs the Kubernetes client: set resync.kubeconfig (and \
         resync.context), or run in a pod",
    )?;
    let sender = remediation::Sender {
        cluster,
        cluster_name: pipeline
            .remediation()
            .cluster
            .clone()
            .unwrap_or_else(|| config.default_cluster.clone()),
        pipeline: pipeline.clone(),
        audit,
        stop,
    };
    Ok(Some(tokio::spawn(sender.run())))
}

#[cfg(not(feature = "cluster"))]
async fn start_remediation(
    config: &Config,
    pipeline: &Pipeline,
    audit: Arc<dyn drift_store::AuditRead>,
    _stop: CancellationToken,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    if pipeline.remediation().mode == drift_core::remediate::Mode::Apply {
        anyhow::bail!(
            "remediation.mode is apply, and this build has no Kubernetes client (feature cluster)"
        );
    }
    Ok(end_stranded(config, pipeline, audit))
}

/// Without a sender this start (mode not `apply`), the stored attempts of an earlier one that
/// were planned or in flight are ended now, on their own task, rather than left open.
fn end_stranded(
    config: &Config,
    pipeline: &Pipeline,
    audit: Arc<dyn drift_store::AuditRead>,
) -> Option<tokio::task::JoinHandle<()>> {
    let cluster = pipeline
        .remediation()
        .cluster
        .clone()
        .unwrap_or_else(|| config.default_cluster.clone());
    Some(tokio::spawn(stranded::end_stranded(
        pipeline.clone(),
        audit,
        cluster,
        true,
    )))
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
        drift_model::time::system_clock(),
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
pub async fn run(
    config: Config,
    config_file: Option<crate::reload::Watched>,
) -> anyhow::Result<()> {
    let port = match std::env::var("PORT") {
        Ok(text) => text
            .parse::<u16>()
            .with_context(|| format!("PORT={text:?} is not a port number"))?,
        Err(_) => config.server.port,
    };
    let addr = SocketAddr::from(([0, 0, 0, 0], port));
    let server = start(config, config_file, addr).await?;
    let shutdown = server.shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        shutdown.cancel();
    });
    server.done.await.context("server task")?;
    let failure = server
        .failure
        .lock()
        .map(|failure| failure.clone())
        .unwrap_or_default();
    match failure {
        Some(reason) => anyhow::bail!("{reason}"),
        None => Ok(()),
    }
}

/// Waits for SIGTERM or Ctrl-C. SIGHUP, which many daemons take as "reload", would end the
/// process without a drain by default: it is taken and logged instead (the config file is read
/// again every second anyway, so there is nothing for it to do).
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangup = signal(SignalKind::hangup()).ok();
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => loop {
                tokio::select! {
                    _ = terminate.recv() => return,
                    _ = tokio::signal::ctrl_c() => return,
                    Some(()) = async {
                        match hangup.as_mut() {
                            Some(hangup) => hangup.recv().await,
                            None => std::future::pending().await,
                        }
                    } => {
                        tracing::info!(
                            message = "SIGHUP ignored: the config file is read again every second, and a change to rules: or fleet: applies by itself; SIGTERM stops the service."
                        );
                    }
                }
            },
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

/// Where the configured store is: `store.url`'s PostgreSQL database when set, else the SQLite
/// file of `store.path`.
pub fn store_options(store: &drift_core::config::StoreConfig) -> drift_store::Options {
    match &store.url {
        Some(url) => drift_store::Options::Postgres {
            url: url.expose().to_string(),
            password: store
                .password
                .as_ref()
                .map(|password| password.expose().to_string()),
            ca_file: store.ca_file.clone(),
        },
        None => drift_store::Options::Sqlite {
            path: store.path.clone(),
        },
    }
}

/// Opens the configured store; in a shard, its writer and relays are the shard's (each shard
/// queues, sends and counts only its own notifications).
fn open_store(config: &Config) -> Result<drift_store::Opened, drift_store::Error> {
    let mut opened = drift_store::open(&store_options(&config.store))?;
    if config.shard.set {
        opened.assign_shard(&config.shard.name)?;
    }
    Ok(opened)
}
