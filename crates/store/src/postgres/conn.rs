//! One PostgreSQL connection, used synchronously.
//!
//! Why tokio-postgres and not the sync `postgres` crate: the store's traits are synchronous and
//! are called from the writer's thread, from `spawn_blocking` (relays, API) and also from async
//! code (`store::open` runs inside `app::start`, and the audit reader is dropped with the
//! router). The `postgres` crate builds a tokio runtime inside every client and enters it on each
//! call and on drop, which panics on a thread that is already inside a runtime. Here the
//! connection's I/O (`tokio_postgres::Connection`) runs on a thread of its own with its own
//! current-thread runtime, and the client's futures, which only talk to that task over channels
//! and need no reactor, are polled to completion on the calling thread ([`wait`]). A call blocks
//! its caller like a SQLite call does, from any thread, and dropping a [`Conn`] only closes a
//! channel (the I/O thread then ends by itself).
//!
//! A connection that the server closed (a restart, a failover, an idle timeout) is opened again
//! on the next call, so a store outlives a database restart the way the SQLite file outlives
//! nothing of the kind; the call that found it closed fails and its caller retries as it does
//! for any store error.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use tokio_postgres::Client;

use crate::Error;

/// The backend's name in errors and metrics.
pub(super) const BACKEND: &str = "postgres";

impl From<tokio_postgres::Error> for Error {
    fn from(error: tokio_postgres::Error) -> Error {
        // tokio-postgres never puts the connection's password in an error: it carries the
        // server's message or an I/O or TLS error. Its own words are often only the kind ("error
        // performing TLS handshake"), the reason is in its sources ("invalid peer certificate:
        // UnknownIssuer"): the message says both.
        let mut message = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            source = cause.source();
        }
        Error::Backend {
            backend: BACKEND,
            source: message.into(),
        }
    }
}

/// A backend error of our own words (never containing the URL).
pub(super) fn backend_error(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: BACKEND,
        source: message.into().into(),
    }
}

/// What a connection is opened with: the parsed options and the TLS setup.
#[derive(Clone)]
pub struct Target {
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
}

impl Target {
    /// Parses a `postgres://` URL, with an optional password that wins over the URL's and an
    /// optional PEM file of extra CA certificates. Errors never repeat the URL.
    pub fn new(
        url: &str,
        password: Option<&str>,
        ca_file: Option<&std::path::Path>,
    ) -> Result<Target, Error> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|error| backend_error(format!("store.url: {error}")))?;
        if let Some(password) = password {
            config.password(password);
        }
        if config.get_application_name().is_none() {
            config.application_name("drift-sentinel");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        {
            // No NOTICE per existing table from the schema's `CREATE ... IF NOT EXISTS` at every
            // start. And a session that stops talking inside a transaction (its process paused,
            // its node lost, cut off by the network) must not keep the writer lease's row locked
            // for longer than a lease: the server ends it after 5 s idle in a transaction, and
            // no lock is waited for longer than 10 s. (`store migrate`, whose one transaction
            // waits while it reads SQLite, turns the first off for itself.)
            // First, so settings of the URL's own `options` come later and win.
            let defaults = "-c client_min_messages=warning \
                            -c idle_in_transaction_session_timeout=5s -c lock_timeout=10s";
            let options = match config.get_options() {
                Some(own) => format!("{defaults} {own}"),
                None => defaults.to_string(),
            };
            config.options(&options);
        }
        // A peer that vanished is noticed in seconds, not after the kernel's two hours of
        // keepalive silence or a quarter hour of retransmissions.
        config.keepalives(true);
        config.keepalives_idle(std::time::Duration::from_secs(5));
        config.keepalives_interval(std::time::Duration::from_secs(2));
        config.keepalives_retries(3);
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(std::time::Duration::from_secs(15));
        }
        Ok(Target {
            config,
            tls: tls(ca_file)?,
        })
    }

    /// Uses `password` when the URL has none (the `PGPASSWORD` of `store migrate`).
    pub fn password_if_missing(mut self, password: Option<String>) -> Target {
        if self.config.get_password().is_none() {
            if let Some(password) = password {
                self.config.password(password);
            }
        }
        self
    }

    /// A description for messages: hosts, port and database, never user or password.
    pub fn describe(&self) -> String {
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .map(|host| match host {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => format!("[{}]", path.display()),
            })
            .collect();
        format!(
            "postgres://{}/{}",
            hosts.join(","),
            self.config.get_dbname().unwrap_or("")
        )
    }

    /// Opens a connection.
    pub(super) fn connect(&self) -> Result<Client, Error> {
        let (sender, receiver) = std::sync::mpsc::channel();
        let config = self.config.clone();
        let tls = self.tls.clone();
        std::thread::Builder::new()
            .name("drift-postgres".to_string())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = sender.send(Err(Error::Io(error)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match config.connect(tls).await {
                        Ok((client, connection)) => {
                            let _ = sender.send(Ok(client));
                            // Runs until the client is dropped or the server goes away.
                            if let Err(error) = connection.await {
                                tracing::warn!(message = "PostgreSQL connection ended.", %error);
                            }
                        }
                        Err(error) => {
                            let _ = sender.send(Err(Error::from(error)));
                        }
                    }
                });
            })?;
        receiver
            .recv()
            .unwrap_or_else(|_| Err(backend_error("the connection thread ended")))
    }
}

/// TLS through rustls on ring: the Mozilla roots, plus the certificates of `ca_file`. The
/// server's certificate and name are always verified when TLS is used (`sslmode=require`, or
/// `prefer` with a server that offers TLS).
fn tls(
    ca_file: Option<&std::path::Path>,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        use rustls::pki_types::pem::PemObject;
        let certificates = rustls::pki_types::CertificateDer::pem_file_iter(path)
            .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
            .map_err(|error| backend_error(format!("store.caFile {}: {error}", path.display())))?;
        if certificates.is_empty() {
            return Err(backend_error(format!(
                "store.caFile {}: no certificate in it",
                path.display()
            )));
        }
        for certificate in certificates {
            roots.add(certificate).map_err(|error| {
                backend_error(format!("store.caFile {}: {error}", path.display()))
            })?;
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|error| backend_error(format!("TLS setup: {error}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// One connection, opened again when the server closed it.
pub(crate) struct Conn {
    target: Target,
    client: Option<Client>,
}

impl Conn {
    /// Opens the connection now, so a wrong URL or password fails at start.
    pub(crate) fn open(target: &Target) -> Result<Conn, Error> {
        let client = target.connect()?;
        Ok(Conn {
            target: target.clone(),
            client: Some(client),
        })
    }

    /// The client, connected again if the server closed it.
    pub(crate) fn client(&mut self) -> Result<&mut Client, Error> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            self.client = Some(self.target.connect()?);
        }
        self.client
            .as_mut()
            .ok_or_else(|| backend_error("no connection"))
    }
}

/// Polls `future` to completion on this thread. The futures of a tokio-postgres client only wait
/// for messages from the connection task (on its own thread, see [`Target::connect`]), so they
/// need no runtime here: the thread parks until that task wakes it.
pub(crate) fn wait<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}
