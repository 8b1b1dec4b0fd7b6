//! The ApiServerSource and the Broker: each committed write becomes the CloudEvent a Resource
//! mode ApiServerSource sends (`dev.knative.apiserver.resource.add|update|delete`, the object
//! as data, the `apiversion`/`kind`/`name`/`namespace` extensions, `knativearrivaltime` from
//! the Broker's ingress), delivered in binary mode to the sink one at a time, in commit order.
//! As the Broker does (`knative-eventing.md` 3.1), a `2xx` ends a delivery; a connection error,
//! a `5xx`, `404`, `408`, `409` or `429` is retried with the same `id` after an exponential
//! backoff; any other answer is refused for good (dead-lettered). Retries stop after a bound,
//! so a sink that never comes up fails a test instead of hanging it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use super::store::{now, plural, Outgoing};

/// The `source` attribute: the in-cluster API server URL, as the adapter sends it.
pub(crate) const SOURCE: &str = "https://10.96.0.1:443";

/// The first retry's delay (Knative's default `backoffDelay` is 0.2 s; shrunk for tests).
const FIRST_BACKOFF: Duration = Duration::from_millis(25);
/// The longest delay between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How long one event is retried before it is given up.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// What the Broker has done so far.
#[derive(Default)]
pub(crate) struct Delivered {
    /// Events the sink accepted (`2xx`).
    pub accepted: AtomicUsize,
    /// Events refused for good or given up: `type subject: answer`.
    pub refused: Mutex<Vec<String>>,
}

impl Delivered {
    /// Events whose delivery has ended, either way.
    pub(crate) fn ended(&self) -> usize {
        self.accepted.load(Ordering::SeqCst) + self.refused.lock().unwrap().len()
    }
}

/// The CloudEvent (structured form) a Resource mode ApiServerSource sends for `verb` on
/// `object`, with a fresh `id` and times of now.
pub(crate) fn event(verb: &str, object: &Value) -> Value {
    let id = uuid::Uuid::new_v4().to_string();
    let mut event = crate::support::structured_event(&id, verb, object);
    let time = now();
    // The adapter guesses the plural as the API server does (`createSelfLink`).
    event["subject"] = json!(format!(
        "/apis/{}/namespaces/{}/{}/{}",
        object["apiVersion"].as_str().unwrap_or_default(),
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        plural(object["kind"].as_str().unwrap_or_default()),
        object["metadata"]["name"].as_str().unwrap_or_default()
    ));
    event["source"] = json!(SOURCE);
    event["time"] = json!(time);
    event["knativearrivaltime"] = json!(time);
    event
}

/// Delivers every queued event to `sink`, in order, until the queue closes.
pub(crate) async fn run(
    sink: String,
    mut queue: UnboundedReceiver<Outgoing>,
    delivered: std::sync::Arc<Delivered>,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    while let Some((verb, object)) = queue.recv().await {
        let event = event(verb, &object);
        match deliver(&client, &sink, &event).await {
            Ok(()) => {
                delivered.accepted.fetch_add(1, Ordering::SeqCst);
            }
            Err(answer) => delivered.refused.lock().unwrap().push(format!(
                "{} {}: {answer}",
                event["type"].as_str().unwrap_or_default(),
                event["subject"].as_str().unwrap_or_default()
            )),
        }
    }
}

/// One event's delivery with the Broker's retries: `Err` with the last answer when refused.
async fn deliver(client: &reqwest::Client, sink: &str, event: &Value) -> Result<(), String> {
    let body = serde_json::to_vec(&event["data"]).expect("json");
    let started = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    loop {
        let mut request = client.post(sink).body(body.clone());
        for (name, value) in crate::support::binary_headers(event) {
            request = request.header(name, value);
        }
        let answer = match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                if (200..300).contains(&status) {
                    return Ok(());
                }
                let text = response.text().await.unwrap_or_default();
                let retried = status >= 500 || matches!(status, 404 | 408 | 409 | 429);
                if !retried {
                    return Err(format!("{status} {text}"));
                }
                format!("{status} {text}")
            }
            Err(error) => error.to_string(),
        };
        if started.elapsed() > GIVE_UP_AFTER {
            return Err(format!("given up after {GIVE_UP_AFTER:?}: {answer}"));
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
