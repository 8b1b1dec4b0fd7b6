//! The writer's cost of one served-traffic observation (issue 32, BENCHMARKS.md "Issue 32: the
//! traffic poller's round"): an engine holding 2,000 Routes (the rguske Route fixture, renamed,
//! 90/10 between two Revisions), and one Prometheus answer with both Revisions' requests of each
//! Route, filed and judged as the writer's round does (`begin`, `observe_traffic`, `changes`,
//! `commit`). Three cases: the same requests as the last answer (a quiet fleet), requests that
//! changed for every Route (every Route busy), and the first answers (the Routes enter the book).
//!
//! Run: `cargo run --release -p drift-core --example traffic_round` (a timed run, not a test).

use std::sync::Arc;
use std::time::{Duration, Instant};

use drift_core::classify::traffic::{Observation, Served};
use drift_core::classify::{Engine, Rules};
use drift_core::decode::{decode_request, ClusterNames, Decoded};
use serde_json::{json, Value};

const ROUTES: usize = 2_000;
const ROUNDS: u32 = 50;

fn route_fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/knative/serving/rguske-github-io__knative-serving-unwrapped__route-knative-webapp.yaml"
    );
    let text = std::fs::read_to_string(path).expect("the Route fixture");
    serde_saphyr::from_str(&text).expect("YAML")
}

fn event(index: usize, route: &Value) -> Vec<u8> {
    let name = route["metadata"]["name"].as_str().unwrap_or_default();
    serde_json::to_vec(&json!({
        "specversion": "1.0",
        "id": format!("route-{index}"),
        "source": "https://10.96.0.1:443",
        "type": "dev.knative.apiserver.resource.add",
        "subject": format!("/apis/serving.knative.dev/v1/namespaces/myapp/routes/{name}"),
        "time": "2023-10-09T21:36:22Z",
        "datacontenttype": "application/json",
        "data": route,
    }))
    .expect("JSON")
}

fn observation(rate: f64) -> Observation {
    let mut series = Vec::with_capacity(ROUTES * 2);
    for index in 0..ROUTES {
        let service = format!("web-{index:05}");
        for (suffix, share) in [("00001", 0.9), ("00002", 0.1)] {
            series.push(Served {
                namespace: "myapp".into(),
                service: service.clone(),
                revision: format!("{service}-{suffix}"),
                requests: (rate * share).round(),
            });
        }
    }
    Observation {
        cluster: "default".into(),
        query: "sum by (namespace_name, service_name, revision_name) (increase(revision_request_count[600s]))".into(),
        window: Duration::from_secs(600),
        tolerance_percent: 15.0,
        min_requests: 100,
        series,
    }
}

fn round(engine: &mut Engine, observation: &Observation, now: i64) -> Duration {
    let started = Instant::now();
    engine.begin();
    engine.observe_traffic(observation, now);
    let changes = engine.changes();
    engine.commit();
    std::hint::black_box(changes);
    started.elapsed()
}

fn main() {
    let mut engine = Engine::new(Arc::new(Rules::default()));
    let clusters = ClusterNames {
        default: "default".into(),
        by_source: Default::default(),
    };
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "content-type",
        http::HeaderValue::from_static("application/cloudevents+json"),
    );
    let fixture = route_fixture();
    let mut now: i64 = 1_700_000_000_000;
    for index in 0..ROUTES {
        let service = format!("web-{index:05}");
        let mut route = fixture.clone();
        route["metadata"]["name"] = json!(service);
        route["metadata"]["namespace"] = json!("myapp");
        route["metadata"]["uid"] = json!(format!("6a3f0955-7515-421d-9d01-{index:012x}"));
        route["metadata"]["labels"]["serving.knative.dev/service"] = json!(service);
        let traffic = json!([
            {"revisionName": format!("{service}-00001"), "percent": 90, "latestRevision": false},
            {"revisionName": format!("{service}-00002"), "percent": 10, "latestRevision": true},
        ]);
        route["spec"]["traffic"] = traffic.clone();
        route["status"]["traffic"] = traffic;
        engine.begin();
        for decoded in decode_request(&headers, &event(index, &route), &clusters).expect("decodes")
        {
            if let Decoded::ApiServer(event) = decoded {
                engine.apply(&event, now);
            }
        }
        let _ = engine.changes();
        engine.commit();
    }
    // The first answers, then a whole window later: every Route judged under its split.
    let mut first = Duration::ZERO;
    for _ in 0..2 {
        first += round(&mut engine, &observation(1_000.0), now);
        now += 600_000;
    }
    assert_eq!(engine.traffic_routes(), ROUTES, "every Route filed");
    let mut same = Duration::ZERO;
    let mut changed = Duration::ZERO;
    for index in 0..ROUNDS {
        now += 60_000;
        same += round(&mut engine, &observation(1_000.0), now);
        now += 60_000;
        changed += round(
            &mut engine,
            &observation(1_000.0 + f64::from(index + 1) * 10.0),
            now,
        );
        // Back to the first answer's requests for the next "same" round.
        now += 60_000;
        round(&mut engine, &observation(1_000.0), now);
    }
    println!(
        "{ROUTES} Routes: first answers {:?}/round, same requests {:?}/round, changed requests {:?}/round",
        first / 2,
        same / ROUNDS,
        changed / ROUNDS
    );
}
