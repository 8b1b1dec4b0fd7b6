//! A stateful fake Kubernetes cluster on loopback, for end-to-end tests of the real binary: it
//! serves the Kubernetes API over a set of objects and behaves as an ApiServerSource and a
//! Broker, sending the sink one CloudEvent per committed write. Unlike the scripted
//! `fake_apiserver.rs`, it answers whatever is asked, as the API server would.
//!
//! The API (facts in `../shared/reference/kubernetes-writes.md`): `GET` an object (or a
//! collection, unfiltered and in one page), `PATCH` with `application/merge-patch+json` (a
//! `metadata.resourceVersion` in the patch is a precondition: `409 Conflict`) or
//! `application/json-patch+json` (a failed `test` or a missing path: `422 Invalid` with the
//! API server's fixed message), any other type `415`; `DELETE` with `DeleteOptions`
//! preconditions (`409`), answered with a `Success` Status as for custom resources; `POST` to
//! the collection (`201`, or `409 AlreadyExists`). Every request needs the bearer token of the
//! kubeconfig it writes (`401`); failures are `Status` bodies shaped as the API server's.
//! `?fieldManager=` (else the User-Agent's prefix) names the writer in `managedFields`;
//! `?dryRun=All` (`dryRun: ["All"]` in `DeleteOptions`) answers without writing. Every write
//! gets a new `resourceVersion` from one counter; a write that changes nothing is no write.
//!
//! The controllers (`fake_cluster/controllers.rs`) react to every write with writes of their
//! own: Eventing's Broker and Trigger status, `observedGeneration`, and, when turned on,
//! Serving's repair of a Revision's Deployment. The Broker (`fake_cluster/events.rs`) delivers
//! the events in commit order, one at a time, retrying as Knative's does.
//!
//! Not reproduced: `PUT`, server-side apply, strategic merge patch (built-in kinds take it;
//! here it is `415` like for custom resources), the `/status` and `/scale` subresources over
//! HTTP (use [`FakeCluster::set_status`]), label and field selectors, pagination and watches,
//! finalizers and garbage collection (a delete removes the object at once, owners or not),
//! validation beyond identity fields (Knative's webhooks' included: `creator` may change).
//! Admission policies (`install_policies`) are judged on the API's creates and patches as the
//! API server judges them (`fake_cluster/admission.rs`), by `drift_core::admission::evaluate`.

mod admission;
mod api;
mod controllers;
mod events;
mod fields;
mod patch;
mod store;
mod webhooks;
pub(crate) mod world;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use serde_json::Value;

use store::{Part, State};

pub(crate) use store::USER;
pub(crate) use world::{drill_world, DIGEST};

/// The running fake cluster; its server, Broker and pending repairs stop when it is dropped.
pub(crate) struct FakeCluster {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    delivered: Arc<events::Delivered>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        if let Ok(state) = self.state.lock() {
            for repair in &state.repairs {
                repair.abort();
            }
        }
    }
}

impl FakeCluster {
    /// Serves `objects` (each as given, with a fresh `resourceVersion` and a uid if it has
    /// none), sends the sink at `sink_base_url` an `add` event for each, in order, lets the
    /// Eventing controllers reconcile (a consistent world needs no write), and returns once
    /// every event so far has been delivered or refused.
    pub(crate) async fn start(sink_base_url: &str, objects: Vec<Value>) -> FakeCluster {
        let cluster = FakeCluster::serve(sink_base_url, objects).await;
        cluster.settled().await;
        cluster
    }

    /// As [`FakeCluster::start`], but returns at once, its events still on their way (for a
    /// sink that needs the cluster's address to start: they are retried until it answers).
    pub(crate) async fn serve(sink_base_url: &str, objects: Vec<Value>) -> FakeCluster {
        let (outbox, queue) = tokio::sync::mpsc::unbounded_channel();
        let shared = Arc::new(Mutex::new(State {
            objects: BTreeMap::new(),
            version: 0,
            requests: Vec::new(),
            writes: 0,
            queued: 0,
            outbox,
            repair: None,
            repairs: Vec::new(),
            policies: Vec::new(),
        }));
        {
            let mut state = shared.lock().unwrap();
            for object in objects {
                let stored = state.put(object);
                state.emit("add", &stored);
            }
            controllers::react(&shared, &mut state, "", None, None, "");
        }
        let delivered = Arc::new(events::Delivered::default());
        let broker = tokio::spawn(events::run(
            sink_base_url.to_string(),
            queue,
            Arc::clone(&delivered),
        ));
        let served = Arc::clone(&shared);
        let app = axum::Router::new().fallback(move |request: Request<Body>| {
            let shared = Arc::clone(&served);
            async move { api::handle(&shared, request).await }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeCluster {
            addr,
            state: shared,
            delivered,
            tasks: vec![broker, server],
        }
    }

    /// The API server's base URL (`http://127.0.0.1:PORT`).
    pub(crate) fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Writes `dir/kubeconfig`, whose context `context` points here with the token it requires.
    pub(crate) fn kubeconfig(&self, dir: &Path, context: &str) -> PathBuf {
        crate::fake_apiserver::kubeconfig(self.addr, dir, context)
    }

    /// The object at API path `path` (`/apis/serving.knative.dev/v1/namespaces/drills/services/hello`).
    pub(crate) fn object(&self, path: &str) -> Option<Value> {
        self.state.lock().unwrap().objects.get(path).cloned()
    }

    /// Every API request received, authorized or not: method, and path with its query.
    pub(crate) fn requests(&self) -> Vec<(String, String)> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Writes committed since start: the API's and the controllers' reactions (not the seeds).
    pub(crate) fn writes(&self) -> usize {
        self.state.lock().unwrap().writes
    }

    /// Events the sink accepted (`2xx`), seeds' `add` events included.
    pub(crate) fn events_sent(&self) -> usize {
        self.delivered
            .accepted
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Events refused for good (an answer the Broker does not retry, or retries given up):
    /// `type subject: answer`.
    pub(crate) fn refused(&self) -> Vec<String> {
        self.delivered.refused.lock().unwrap().clone()
    }

    /// Waits until every event queued so far has been delivered or refused (a bounded wait:
    /// the Broker gives an event up after a minute).
    pub(crate) async fn settled(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let queued = self.state.lock().unwrap().queued;
            if self.delivered.ended() >= queued {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the fake Broker has not delivered {queued} events: {:?}",
                self.refused()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stores `object` as it is (a new `resourceVersion`, a uid if it has none) without a write,
    /// an event or any controller's reaction: a change the ApiServerSource never saw.
    pub(crate) fn put(&self, object: Value) -> Value {
        self.state.lock().unwrap().put(object)
    }

    /// Merges `patch` (RFC 7386) into the status of the object at `path` as its controller
    /// writes it (`/status`, manager `controller`, `mtchannel-broker` or
    /// `kube-controller-manager`): a write with its event and the reactions it causes. The
    /// object as stored; `None` when there is none or nothing changed.
    pub(crate) fn set_status(&self, path: &str, patch: Value) -> Option<Value> {
        let mut state = self.state.lock().unwrap();
        let before = state.objects.get(path).cloned()?;
        let mut after = before.clone();
        patch::merge(&mut after["status"], &patch);
        let manager = controllers::status_manager(&before);
        let stored = state.commit(path, Some(after), manager, Part::Status)?;
        controllers::react(
            &self.state,
            &mut state,
            path,
            Some(&before),
            Some(&stored),
            manager,
        );
        Some(stored)
    }

    /// Installs admission policies (replacing those installed), each bound with `action`: from
    /// now on the API's writes pass them as the API server's do.
    pub(crate) fn install_policies(
        &self,
        policies: Vec<drift_core::admission::Policy>,
        action: drift_core::admission::Action,
    ) {
        self.state.lock().unwrap().policies = policies
            .into_iter()
            .map(|policy| (policy, action))
            .collect();
    }

    /// Turns on Serving's repair of Revisions' Deployments: a first container's image changed
    /// by any manager but `controller` is put back `delay` later, by `controller`.
    pub(crate) fn repair_deployments(&self, delay: Duration) {
        self.state.lock().unwrap().repair = Some(delay);
    }
}
