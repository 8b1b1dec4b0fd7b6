//! The HTTP server: an accept loop that serves each connection with hyper's HTTP/1.1 server,
//! under a cap on open connections and hyper's header-read timer.
//!
//! * **Header read and idle timeouts.** hyper's own header-read timer
//!   (`http1::Builder::header_read_timeout`, driven by tokio) closes a connection whose request head
//!   is not complete in time. hyper starts it as soon as it waits for a head, so on its own it
//!   would also close a kept-alive connection idle for that long; [`HeadTimer`] gives it the two
//!   phases of Go's `net/http` server instead: the first request's head must be complete within
//!   `server.headerReadTimeout` of the accept; on a kept-alive connection the next request has
//!   `server.idleTimeout` to begin and, from its first byte, `server.headerReadTimeout` to
//!   finish its head. hyper 1 has no idle timeout of its own (hyperium/hyper#2355).
//! * **The connection cap.** At most `server.maxConnections` connections are open. A connection
//!   accepted at the cap makes room by closing one: the connection that has waited longest
//!   without a request in flight (idle, or still sending its head), else the one whose request
//!   body has been arriving longest (nothing of it has reached the writer; the sender retries),
//!   both at once; else, when every request has its body, the oldest connection after its
//!   answer. Half-open connections and trickling bodies therefore cannot lock out `/healthz` or
//!   the Broker, and the process holds a bounded number of sockets.
//! * **HTTP/1.1 only.** Knative's dispatchers, kubelet probes and Prometheus speak HTTP/1.1. An
//!   HTTP/2 (h2c) connection is not served: hyper-util's protocol detection waits for the first
//!   bytes without a timeout, and HTTP/2 has no header-read timer.
//! * **Graceful shutdown.** When `shutdown` completes the listener is closed, connections without a
//!   request in flight are closed, and the others are closed after their answer (keep-alive
//!   off); `serve` returns when all are closed. Dropping the returned future closes them all.
//!
//! Request bodies are [`super::admission`]'s: their budget, their limit and their pace.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use http_body::Frame;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::metrics::{Metrics, ReasonLabel};

/// What the server allows a connection (`server.headerReadTimeout`, `server.idleTimeout`,
/// `server.maxConnections`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time for a request head: from the accept for the first request, from its first byte for
    /// the next ones.
    pub header_read_timeout: Duration,
    /// Time a kept-alive connection may wait for its next request to begin.
    pub idle_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: drift_core::config::DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: drift_core::config::DEFAULT_IDLE_TIMEOUT,
            max_connections: drift_core::config::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Serves `switch` on `listener` until `shutdown` completes, then lets the requests in flight
/// finish (see the module documentation).
pub async fn serve(
    listener: TcpListener,
    switch: super::Switch,
    limits: ConnectionLimits,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let registry = Arc::new(Registry::default());
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let stop = CancellationToken::new();
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    // Out of file descriptors, most likely: wait instead of spinning.
                    tracing::warn!(message = "Could not accept a connection.", %error);
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            },
        };
        let permit = match Arc::clone(&slots).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // At the cap: tell one connection to close (`Registry::make_room`) and take its
                // slot once it is gone; meanwhile new connections wait in the listen backlog.
                registry.make_room();
                tokio::select! {
                    biased;
                    () = &mut shutdown => break,
                    permit = Arc::clone(&slots).acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                }
            }
        };
        metrics.http_connections_opened.inc();
        let connection = registry.add();
        connections.spawn(run_connection(
            stream,
            switch.clone(),
            limits,
            connection,
            Arc::clone(&registry),
            stop.clone(),
            permit,
            Arc::clone(&metrics),
        ));
    }
    drop(listener);
    stop.cancel();
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Accept errors that concern one connection only (as `axum::serve` treats them).
fn is_connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// One open connection, as the accept loop and the head timer see it.
struct Connection {
    id: u64,
    /// Requests being handled: from the complete head until the answer's body is sent.
    in_flight: AtomicUsize,
    /// Requests whose body is still arriving.
    receiving: AtomicUsize,
    /// The tick at which it last had no request in flight (its accept, or its last answer);
    /// the smallest idle one is closed first at the cap.
    idle_since: AtomicU64,
    /// Reads that returned bytes, so the head timer sees a request begin.
    reads: AtomicU64,
    /// Whether a request head has been read on it.
    served: AtomicBool,
    /// Set when it was told to close.
    closing: AtomicBool,
    close: Notify,
    ticks: Arc<AtomicU64>,
}

impl Connection {
    /// How much closing it now would cost: nothing (no request), a request still receiving its
    /// body (the sender retries it), or an answer (so it is closed only after the answer).
    fn keeps(&self) -> Keeps {
        let in_flight = self.in_flight.load(Ordering::Acquire);
        if in_flight == 0 {
            Keeps::Nothing
        } else if self.receiving.load(Ordering::Acquire) >= in_flight {
            Keeps::PartialBody
        } else {
            Keeps::Answer
        }
    }
}

/// What a connection holds that closing it would cut off, cheapest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Keeps {
    Nothing,
    PartialBody,
    Answer,
}

#[derive(Default)]
struct Registry {
    connections: Mutex<HashMap<u64, Arc<Connection>>>,
    next_id: AtomicU64,
    /// A logical clock for "waited longest": bumped whenever a connection opens or goes idle.
    ticks: Arc<AtomicU64>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Connection>>> {
        self.connections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn add(&self) -> Arc<Connection> {
        let connection = Arc::new(Connection {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            in_flight: AtomicUsize::new(0),
            receiving: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.ticks.fetch_add(1, Ordering::Relaxed)),
            reads: AtomicU64::new(0),
            served: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            close: Notify::new(),
            ticks: Arc::clone(&self.ticks),
        });
        self.lock().insert(connection.id, Arc::clone(&connection));
        connection
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Tells one connection to close (see the module documentation): the one idle the longest,
    /// else the one whose request body has been arriving the longest, else the one whose request
    /// began first, after its answer. O(open connections), and only at the cap.
    fn make_room(&self) {
        let connections = self.lock();
        let victim = connections
            .values()
            .filter(|connection| !connection.closing.load(Ordering::Acquire))
            .min_by_key(|connection| {
                (
                    connection.keeps(),
                    connection.idle_since.load(Ordering::Acquire),
                )
            });
        if let Some(victim) = victim {
            victim.closing.store(true, Ordering::Release);
            victim.close.notify_one();
        }
    }
}

/// Removes a connection from the registry when its task ends, however it ends.
struct Registered {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.remove(self.id);
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_connection(
    stream: TcpStream,
    switch: super::Switch,
    limits: ConnectionLimits,
    connection: Arc<Connection>,
    registry: Arc<Registry>,
    stop: CancellationToken,
    permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
) {
    let registered = Registered {
        registry,
        id: connection.id,
    };
    let io = TokioIo::new(CountingStream {
        inner: stream,
        connection: Arc::clone(&connection),
    });
    let service = {
        let connection = Arc::clone(&connection);
        hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let guard = InFlight::enter(&connection);
            let request = request.map(|body| Body::new(RequestBody::new(body, &connection)));
            let switch = switch.clone();
            async move {
                let response = switch.answer(request).await;
                // The request stays in flight until its answer's body has been sent.
                Ok::<_, Infallible>(response.map(|body| {
                    Body::new(AnswerBody {
                        inner: body,
                        _in_flight: guard,
                    })
                }))
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(HeadTimer {
            connection: Arc::clone(&connection),
            header_read: limits.header_read_timeout,
            idle: limits.idle_timeout,
        })
        .header_read_timeout(limits.header_read_timeout);
    // Boxed, so that dropping it below closes the socket before the slot is released.
    let mut served = Box::pin(builder.serve_connection(io, service));
    let mut told: Option<&'static str> = None;
    let reason = loop {
        tokio::select! {
            result = served.as_mut() => break match (result, told) {
                (_, Some(reason)) => reason,
                (Ok(()), None) => "closed",
                (Err(error), None) if error.is_timeout() => "timeout",
                (Err(_), None) => "error",
            },
            () = connection.close.notified(), if told.is_none() => {
                told = Some("cap");
                if connection.keeps() < Keeps::Answer {
                    break "cap";
                }
                served.as_mut().graceful_shutdown();
            }
            () = stop.cancelled(), if told.is_none() => {
                // Draining lets every request that began finish, bodies still arriving included.
                told = Some("shutdown");
                if connection.keeps() == Keeps::Nothing {
                    break "shutdown";
                }
                served.as_mut().graceful_shutdown();
            }
        }
    };
    metrics
        .http_connections_closed
        .get_or_create(&ReasonLabel {
            reason: reason.to_string(),
        })
        .inc();
    // Closed (the socket with the future), out of the registry, and only then its slot free.
    drop(served);
    drop(registered);
    drop(permit);
}

/// A request in flight on a connection; dropped with its answer's body. hyper writes and
/// flushes the answer's last bytes in the same poll in which it drops the body, so a connection
/// closed as idle afterwards loses nothing unless its client stopped reading (the kernel's send
/// buffer full): such a client gets a cut answer, which for `POST /` the Broker retries.
struct InFlight {
    connection: Arc<Connection>,
}

impl InFlight {
    fn enter(connection: &Arc<Connection>) -> InFlight {
        connection.served.store(true, Ordering::Release);
        connection.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight {
            connection: Arc::clone(connection),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let connection = &self.connection;
        if connection.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            let tick = connection.ticks.fetch_add(1, Ordering::Relaxed);
            connection.idle_since.store(tick, Ordering::Release);
        }
    }
}

/// An answer's body, which keeps its request in flight until it is sent (or dropped).
struct AnswerBody {
    inner: Body,
    _in_flight: InFlight,
}

impl HttpBody for AnswerBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A request's body, counted as receiving on its connection until it ends (or is dropped).
struct RequestBody {
    inner: Incoming,
    receiving: Option<Arc<Connection>>,
}

impl RequestBody {
    fn new(inner: Incoming, connection: &Arc<Connection>) -> RequestBody {
        let receiving = (!inner.is_end_stream()).then(|| {
            connection.receiving.fetch_add(1, Ordering::AcqRel);
            Arc::clone(connection)
        });
        RequestBody { inner, receiving }
    }

    fn received(&mut self) {
        if let Some(connection) = self.receiving.take() {
            connection.receiving.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for RequestBody {
    fn drop(&mut self) {
        self.received();
    }
}

impl HttpBody for RequestBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            Poll::Pending => false,
        };
        if ended {
            self.received();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The TCP stream, counting the reads that return bytes.
struct CountingStream {
    inner: TcpStream,
    connection: Arc<Connection>,
}

impl AsyncRead for CountingStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.connection.reads.fetch_add(1, Ordering::AcqRel);
        }
        polled
    }
}

impl AsyncWrite for CountingStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// hyper's timer for one connection. hyper asks it for one sleep per request head it waits for
/// (`now + header_read`) and closes the connection when the sleep ends first; this timer decides
/// when that is (see the module documentation).
#[derive(Clone)]
struct HeadTimer {
    connection: Arc<Connection>,
    header_read: Duration,
    idle: Duration,
}

impl hyper::rt::Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HeadSleep {
            sleep: Box::pin(tokio::time::sleep(duration)),
            awaiting_first_byte: None,
        })
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        if !self.connection.served.load(Ordering::Acquire) {
            // The first request: its head is due `header_read` after the accept.
            return Box::pin(HeadSleep {
                sleep: Box::pin(tokio::time::sleep_until(deadline.into())),
                awaiting_first_byte: None,
            });
        }
        // A kept-alive connection waits for its next request: `idle` for the first byte.
        Box::pin(HeadSleep {
            sleep: Box::pin(tokio::time::sleep(self.idle)),
            awaiting_first_byte: Some(FirstByte {
                connection: Arc::clone(&self.connection),
                reads: self.connection.reads.load(Ordering::Acquire),
                header_read: self.header_read,
            }),
        })
    }

    fn now(&self) -> std::time::Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// The sleep behind one wait for a request head.
struct HeadSleep {
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// Set while a kept-alive connection waits for the first byte of its next request.
    awaiting_first_byte: Option<FirstByte>,
}

struct FirstByte {
    connection: Arc<Connection>,
    /// The connection's read count when the wait began.
    reads: u64,
    header_read: Duration,
}

impl Future for HeadSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        // hyper polls this whenever a read leaves the head incomplete, so the first byte of the
        // next request is seen as it arrives: from then on the head has `header_read`.
        let begun = this
            .awaiting_first_byte
            .as_ref()
            .is_some_and(|first| first.connection.reads.load(Ordering::Acquire) != first.reads);
        if begun {
            if let Some(first) = this.awaiting_first_byte.take() {
                this.sleep
                    .as_mut()
                    .reset(tokio::time::Instant::now() + first.header_read);
            }
        }
        this.sleep.as_mut().poll(cx)
    }
}

impl hyper::rt::Sleep for HeadSleep {}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(registry: &Registry) -> Arc<Connection> {
        let connection = registry.add();
        connection.in_flight.store(1, Ordering::Release);
        connection
    }

    #[test]
    fn room_is_made_by_idle_connections_then_partial_bodies_then_answers() {
        let registry = Registry::default();
        let first_busy = busy(&registry);
        let idle_old = registry.add();
        let receiving = busy(&registry);
        receiving.receiving.store(1, Ordering::Release);
        let second_busy = busy(&registry);
        let idle_new = registry.add();
        let told = |connection: &Arc<Connection>| connection.closing.load(Ordering::Acquire);
        registry.make_room();
        assert!(told(&idle_old) && !told(&idle_new) && !told(&first_busy));
        registry.make_room();
        assert!(told(&idle_new) && !told(&receiving) && !told(&first_busy));
        registry.make_room();
        assert!(told(&receiving) && !told(&first_busy));
        registry.make_room();
        assert!(told(&first_busy) && !told(&second_busy));
        registry.make_room();
        assert!(told(&second_busy));
        // Nobody left to tell: nothing happens.
        registry.make_room();
        registry.remove(idle_old.id);
        assert_eq!(registry.lock().len(), 4);
    }

    #[test]
    fn a_connection_is_idle_from_its_last_answer() {
        let registry = Registry::default();
        let connection = registry.add();
        let opened = connection.idle_since.load(Ordering::Acquire);
        let request = InFlight::enter(&connection);
        assert!(connection.served.load(Ordering::Acquire));
        assert_eq!(connection.in_flight.load(Ordering::Acquire), 1);
        drop(request);
        assert_eq!(connection.in_flight.load(Ordering::Acquire), 0);
        assert!(connection.idle_since.load(Ordering::Acquire) > opened);
    }
}
