//! Admission: what `POST /` lets in and how fast its body must arrive.
//!
//! The writer queue (`server.queueCapacity`) bounds events waiting to be committed, but every
//! request is read and decoded before it reaches the queue, so without a cap the memory of an
//! overloaded sink grows with the number of senders. Requests share a budget of
//! `server.inFlightBytes` (by default [`drift_core::config::IN_FLIGHT_BODIES`] times
//! `server.bodyLimitBytes`), and each holds **the bytes of its body that actually arrived**, from
//! their arrival until the request is answered. A request is refused before its body is read
//! (`503` with `Retry-After`, which the Broker retries) when the bytes others hold leave no room
//! for its declared `content-length` (or for anything at all, when it is chunked); a body that
//! runs the budget dry while it arrives is refused then. A sender that declares a large body and
//! sends little holds little, so it cannot lock valid senders out.
//!
//! A body must also keep pace: it gets `server.bodyReadTimeout` from the moment the handler starts
//! reading it, plus one second for every `server.bodyMinBytesPerSecond` bytes received (Apache's
//! `mod_reqtimeout` rule: `body=10,MinRate=…`). A sender that falls behind is cut off with `408`
//! and the connection is closed. A declared `content-length` over `server.bodyLimitBytes` is a
//! `413` before anything is read; a chunked body that grows past it is a `413` when it does. All
//! of these are `ApiError`s, so the answer is JSON `{code, message}` like every other.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use http_body::Frame;

use super::{ApiError, Unavailable};

/// How fast a request body must arrive (`server.bodyReadTimeout`,
/// `server.bodyMinBytesPerSecond`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyPace {
    /// Time a body gets before the minimum rate counts, and the longest it may pause between
    /// two pieces.
    pub grace: Duration,
    /// Each this many bytes received earn the body one more second.
    pub min_bytes_per_second: u64,
}

impl Default for BodyPace {
    fn default() -> Self {
        BodyPace {
            grace: drift_core::config::DEFAULT_BODY_READ_TIMEOUT,
            min_bytes_per_second: drift_core::config::DEFAULT_BODY_MIN_BYTES_PER_SECOND,
        }
    }
}

impl BodyPace {
    /// How long a body that has received `bytes` may have been arriving.
    fn allowance(&self, bytes: usize) -> Duration {
        let rate = self.min_bytes_per_second.max(1) as f64;
        self.grace
            .saturating_add(Duration::from_secs_f64(bytes as f64 / rate))
    }
}

/// The shared budget of the ingest route.
#[derive(Clone)]
pub struct Admission {
    budget: Arc<Budget>,
    body_limit: usize,
    pace: BodyPace,
}

impl Admission {
    /// A budget of `in_flight` bytes for requests of at most `body_limit` bytes, whose bodies
    /// must keep `pace`.
    pub fn new(body_limit: usize, in_flight: usize, pace: BodyPace) -> Admission {
        Admission {
            budget: Arc::new(Budget {
                limit: in_flight.max(body_limit),
                held: AtomicUsize::new(0),
            }),
            body_limit,
            pace,
        }
    }
}

/// Bytes held by requests, out of `limit`.
struct Budget {
    limit: usize,
    held: AtomicUsize,
}

impl Budget {
    fn available(&self) -> usize {
        self.limit.saturating_sub(self.held.load(Ordering::Acquire))
    }

    /// Takes `bytes` if they fit.
    fn take(&self, bytes: usize) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        // Never below zero: every give-back matches a take of the same reservation.
        let _ = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                Some(held.saturating_sub(bytes))
            });
    }
}

/// One request's share of the budget, returned when the last holder (the body being read, the
/// middleware waiting for the answer) lets go.
struct Reservation {
    budget: Arc<Budget>,
    bytes: AtomicUsize,
}

impl Reservation {
    fn grow(&self, bytes: usize) -> bool {
        if self.budget.take(bytes) {
            self.bytes.fetch_add(bytes, Ordering::AcqRel);
            true
        } else {
            false
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(*self.bytes.get_mut());
    }
}

/// Why reading a body stopped; the handler turns it into its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// More than `server.bodyLimitBytes`: `413`.
    #[error("request body exceeds the limit of {0} bytes")]
    TooLarge(usize),
    /// The in-flight budget ran dry while the body arrived: `503`.
    #[error("too much request data in flight")]
    Overloaded,
    /// The body fell below the minimum rate: `408`.
    #[error("request body arrived too slowly")]
    TooSlow,
}

impl BodyError {
    /// The answer to a request whose body stopped for this reason. The rest of the body is
    /// never read, so the connection is closed after the answer.
    pub(crate) fn answer(self) -> ApiError {
        let error = match self {
            BodyError::TooLarge(limit) => ApiError::too_large(limit),
            BodyError::Overloaded => ApiError::unavailable_for(Unavailable::InFlightBytes),
            BodyError::TooSlow => ApiError::body_too_slow(),
        };
        error.closing()
    }
}

/// Refuses what cannot fit at once, and makes the body reserve its bytes as they arrive and
/// keep its pace; `next` answers the admitted request.
pub(crate) async fn admit<F, Fut>(admission: &Admission, request: Request, next: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    // The body's exact size when known (hyper takes it from `content-length`), else the header.
    let declared = request
        .body()
        .size_hint()
        .exact()
        .and_then(|bytes| usize::try_from(bytes).ok())
        .or_else(|| {
            request
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|value| value.to_str().ok())
                .and_then(|text| text.trim().parse::<usize>().ok())
        });
    if declared.is_some_and(|bytes| bytes > admission.body_limit) {
        return ApiError::too_large(admission.body_limit).into_response();
    }
    // Room for the declared body, or for any byte at all when it is chunked; nothing is reserved
    // yet (the body reserves what arrives).
    if admission.budget.available() < declared.unwrap_or(1).max(1) {
        return ApiError::unavailable_for(Unavailable::InFlightBytes).into_response();
    }
    let reservation = Arc::new(Reservation {
        budget: Arc::clone(&admission.budget),
        bytes: AtomicUsize::new(0),
    });
    let (parts, body) = request.into_parts();
    let body = Body::new(AdmittedBody {
        inner: body,
        reservation: Arc::clone(&reservation),
        limit: admission.body_limit,
        pace: admission.pace,
        received: 0,
        deadline: None,
        failed: false,
    });
    let response = next(Request::from_parts(parts, body)).await;
    // The bytes stay reserved until the request is answered: decoded events live that long.
    drop(reservation);
    response
}

/// A request body that reserves its bytes from the budget as they arrive, stops at the body
/// limit and keeps the pace.
struct AdmittedBody {
    inner: Body,
    reservation: Arc<Reservation>,
    limit: usize,
    pace: BodyPace,
    received: usize,
    /// Started on the first read: the moment the body must have arrived by.
    deadline: Option<(tokio::time::Instant, Pin<Box<tokio::time::Sleep>>)>,
    failed: bool,
}

impl AdmittedBody {
    fn fail(&mut self, error: BodyError) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        self.failed = true;
        Poll::Ready(Some(Err(axum::Error::new(error))))
    }
}

impl HttpBody for AdmittedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        if this.deadline.is_none() {
            let started = tokio::time::Instant::now();
            let sleep = Box::pin(tokio::time::sleep_until(started + this.pace.allowance(0)));
            this.deadline = Some((started, sleep));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let length = data.len();
                    this.received = this.received.saturating_add(length);
                    if this.received > this.limit {
                        return this.fail(BodyError::TooLarge(this.limit));
                    }
                    if !this.reservation.grow(length) {
                        return this.fail(BodyError::Overloaded);
                    }
                    if let Some((started, sleep)) = &mut this.deadline {
                        // The pace earned so far, but never more than `grace` after the last
                        // bytes: a body that sends most of itself fast and then stalls would
                        // otherwise keep its share of the budget for minutes.
                        let paced = *started + this.pace.allowance(this.received);
                        let gap = tokio::time::Instant::now() + this.pace.grace;
                        sleep.as_mut().reset(paced.min(gap));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                let late = match &mut this.deadline {
                    Some((_, sleep)) => sleep.as_mut().poll(cx).is_ready(),
                    None => false,
                };
                if late {
                    this.fail(BodyError::TooSlow)
                } else {
                    Poll::Pending
                }
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_allows_the_grace_plus_a_second_per_min_rate() {
        let pace = BodyPace {
            grace: Duration::from_secs(10),
            min_bytes_per_second: 1000,
        };
        assert_eq!(pace.allowance(0), Duration::from_secs(10));
        assert_eq!(pace.allowance(5000), Duration::from_secs(15));
        // A byte every two seconds earns half a millisecond a byte: cut off soon after the grace.
        assert!(pace.allowance(6) < Duration::from_secs(11));
        let zero = BodyPace {
            grace: Duration::from_secs(1),
            min_bytes_per_second: 0,
        };
        assert_eq!(zero.allowance(1), Duration::from_secs(2));
    }

    #[test]
    fn the_budget_never_goes_past_its_limit_nor_below_zero() {
        let budget = Arc::new(Budget {
            limit: 100,
            held: AtomicUsize::new(0),
        });
        let first = Reservation {
            budget: Arc::clone(&budget),
            bytes: AtomicUsize::new(0),
        };
        assert!(first.grow(60));
        let second = Reservation {
            budget: Arc::clone(&budget),
            bytes: AtomicUsize::new(0),
        };
        assert!(!second.grow(41));
        assert!(second.grow(40));
        assert_eq!(budget.available(), 0);
        drop(first);
        assert_eq!(budget.available(), 60);
        drop(second);
        assert_eq!(budget.available(), 100);
    }
}
