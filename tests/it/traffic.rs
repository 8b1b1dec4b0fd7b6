//! Served traffic against a real Prometheus (issue 32, `traffic_share_drift`): Debian's
//! `prometheus` (scripts/test.sh installs it) started on a temporary directory and a free port,
//! scraping every second exporters this test runs, one per queue-proxy "pod", that serve the
//! request counter in the text format of each Knative era: OpenCensus' `revision_request_count`
//! with its labels (<= 1.18), and OpenTelemetry's `kn_serving_invocation_duration_seconds`
//! histogram with the `otel_scope_*` labels and the revision only on `target_info` (>= 1.21,
//! scraped). Counters grow at chosen rates from the exporter's start. The real service runs
//! in-process with short `interval`, `window` and grace, and Route events from the verbatim
//! rguske Route fixture, its split set to 90/10 with a tagged 0 % target.
//!
//! Every wait is for a condition with a generous deadline (the machine may be loaded); nothing
//! asserts a duration. Quiet cases are judged on the same observations as a case that fires:
//! when the drifting Route fires, the others have been judged over a whole window too.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::response::IntoResponse;
use serde_json::{json, Value};

use crate::support::{fixture_yaml, merge, structured_event};

/// Longest wait for any condition.
const DEADLINE: Duration = Duration::from_secs(300);

/// The queue-proxy metrics of one Revision's pod, in one era's format.
#[derive(Clone, Copy)]
enum Era {
    /// Knative <= 1.18: OpenCensus' Prometheus exporter on :9091.
    OpenCensus,
    /// Knative >= 1.21: OpenTelemetry's Prometheus exporter (`request-metrics-protocol:
    /// prometheus`), the revision a resource attribute on `target_info`.
    OtelScrape,
}

struct Pod {
    service: &'static str,
    revision: &'static str,
    /// Requests per second.
    rate: f64,
}

/// The exposition of `pod` after `seconds`: a counter at `rate × seconds`, split 9:1 between
/// response codes 200 and 500 (the presets sum them).
fn exposition(era: Era, pod: &Pod, seconds: f64) -> String {
    let total = (pod.rate * seconds).floor();
    let errors = (total / 10.0).floor();
    let ok = total - errors;
    let pod_name = format!("{}-deployment-6f7d9c8b5d-x2k4q", pod.revision);
    match era {
        Era::OpenCensus => {
            let mut text = String::from(
                "# HELP revision_request_count The number of requests that are routed to queue-proxy\n# TYPE revision_request_count counter\n",
            );
            for (code, class, count) in [("200", "2xx", ok), ("500", "5xx", errors)] {
                text.push_str(&format!(
                    "revision_request_count{{configuration_name=\"{service}\",container_name=\"queue-proxy\",namespace_name=\"myapp\",pod_name=\"{pod_name}\",response_code=\"{code}\",response_code_class=\"{class}\",revision_name=\"{revision}\",route_tag=\"\",service_name=\"{service}\"}} {count}\n",
                    service = pod.service,
                    revision = pod.revision,
                ));
            }
            text
        }
        Era::OtelScrape => {
            let scope = "otel_scope_name=\"knative.dev/serving/pkg/queue\",otel_scope_schema_url=\"\",otel_scope_version=\"\"";
            let mut text = String::from(
                "# HELP kn_serving_invocation_duration_seconds The duration of task execution.\n# TYPE kn_serving_invocation_duration_seconds histogram\n",
            );
            for (code, count) in [("200", ok), ("500", errors)] {
                let labels = format!("http_response_status_code=\"{code}\",{scope}");
                for (le, share) in [("0.005", 0.2), ("0.05", 0.7), ("0.5", 0.95), ("+Inf", 1.0)] {
                    text.push_str(&format!(
                        "kn_serving_invocation_duration_seconds_bucket{{{labels},le=\"{le}\"}} {}\n",
                        (count * share).floor()
                    ));
                }
                text.push_str(&format!(
                    "kn_serving_invocation_duration_seconds_sum{{{labels}}} {}\nkn_serving_invocation_duration_seconds_count{{{labels}}} {count}\n",
                    count * 0.012
                ));
            }
            text.push_str(&format!(
                "# HELP target_info Target metadata\n# TYPE target_info gauge\ntarget_info{{k8s_namespace_name=\"myapp\",k8s_pod_name=\"{pod_name}\",kn_configuration_name=\"{service}\",kn_revision_name=\"{revision}\",kn_service_name=\"{service}\",service_instance_id=\"{pod_name}\",service_name=\"queue-proxy\",service_version=\"v1.21.0\"}} 1\n",
                service = pod.service,
                revision = pod.revision,
            ));
            text
        }
    }
}

/// Starts one exporter per pod; returns their `host:port`s.
async fn exporters(era: Era, pods: Vec<Pod>) -> Vec<String> {
    let mut addresses = Vec::new();
    for pod in pods {
        addresses.push(exporter(era, pod).await.0);
    }
    addresses
}

/// Starts the exporter of one pod; returns its `host:port` and the switch that takes it away
/// (set to false: it answers 503, as a pod gone, and Prometheus marks its series stale).
async fn exporter(era: Era, pod: Pod) -> (String, Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let pod = Arc::new(pod);
    let serving = Arc::new(AtomicBool::new(true));
    let switch = Arc::clone(&serving);
    let started = Instant::now();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let pod = Arc::clone(&pod);
            let serving = serving.load(Ordering::SeqCst);
            async move {
                if !serving {
                    return axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response();
                }
                (
                    [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                    exposition(era, &pod, started.elapsed().as_secs_f64()),
                )
                    .into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (address, switch)
}

/// A free loopback port (bound, then released for the server to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A throwaway Prometheus server. A watchdog shell starts it and stops it when its stdin closes:
/// at drop, or when the test process ends however it ends (the kernel closes the pipe).
struct Prometheus {
    url: String,
    watchdog: Option<Child>,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// A server scraping `targets`, once it has scraped each of them. A port taken between
    /// [`free_port`] and the server's bind is given up for another.
    async fn start(targets: &[String]) -> Prometheus {
        for _ in 0..5 {
            let prometheus = Prometheus::spawn(targets);
            if prometheus.wait_scraped(targets.len()).await {
                return prometheus;
            }
        }
        panic!("Prometheus found no free port in five tries");
    }

    fn spawn(targets: &[String]) -> Prometheus {
        let binary =
            std::env::var("PROMETHEUS_BIN").unwrap_or_else(|_| "/usr/bin/prometheus".into());
        assert!(
            std::path::Path::new(&binary).exists(),
            "{binary} is missing: install Debian's prometheus package (scripts/test.sh does)"
        );
        let dir = tempfile::tempdir().unwrap();
        let targets: Vec<String> = targets.iter().map(|target| format!("'{target}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: queue-proxy\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        let port = free_port();
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(r#"log=$1; shift; "$@" 2>"$log" & pid=$!; cat >/dev/null; kill "$pid"; wait "$pid""#)
            .arg("prometheus-watchdog")
            .arg(dir.path().join("prometheus.log"))
            .arg(&binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Prometheus {
            url: format!("http://127.0.0.1:{port}"),
            watchdog: Some(watchdog),
            dir,
        }
    }

    /// Waits until Prometheus is ready and has scraped every target at least once; false when
    /// it could not bind its port.
    async fn wait_scraped(&self, targets: usize) -> bool {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + DEADLINE;
        loop {
            let up = client
                .post(format!("{}/api/v1/query", self.url))
                .form(&[("query", "sum(up)")])
                .send()
                .await;
            if let Ok(response) = up {
                if let Ok(body) = response.json::<Value>().await {
                    let value = body["data"]["result"][0]["value"][1]
                        .as_str()
                        .unwrap_or("0");
                    if value.parse::<f64>().unwrap_or(0.0) >= targets as f64 {
                        return true;
                    }
                }
            }
            let log =
                std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default();
            if log.contains("address already in use") {
                return false;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus never scraped the exporters; its log:\n{}",
                std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stops the server and waits for it.
    fn stop(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            drop(watchdog.stdin.take());
            let _ = watchdog.wait();
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Route named after its Service with status (and spec) 90/10 between its two Revisions, and
/// a tagged 0 % target: the verbatim Route fixture, renamed.
fn route(service: &str) -> Value {
    let mut route = fixture_yaml(
        "serving/rguske-github-io__knative-serving-unwrapped__route-knative-webapp.yaml",
    );
    let (old, new) = (format!("{service}-00001"), format!("{service}-00002"));
    let traffic = json!([
        {"revisionName": old, "percent": 90, "latestRevision": false},
        {"revisionName": new, "percent": 10, "latestRevision": true},
        {"revisionName": new, "percent": 0, "latestRevision": false, "tag": "candidate"},
    ]);
    merge(
        &mut route,
        &json!({
            "metadata": {
                "name": service,
                "uid": format!("6a3f0955-7515-421d-9d01-{}", uid_tail(service)),
                "labels": {"serving.knative.dev/service": service},
            },
            "spec": {"traffic": traffic},
            "status": {"traffic": traffic},
        }),
    );
    route["metadata"]["ownerReferences"][0]["name"] = json!(service);
    route["metadata"]["ownerReferences"][0]["uid"] =
        json!(format!("0c2ac867-693d-4acc-80a2-{}", uid_tail(service)));
    route
}

/// Twelve hex digits that tell the test's Services apart in their uids.
fn uid_tail(service: &str) -> String {
    let sum: usize = service.bytes().map(usize::from).sum();
    format!("{sum:012x}")
}

struct Service {
    server: drift_sentinel::app::Server,
    client: reqwest::Client,
    dir: tempfile::TempDir,
}

impl Service {
    async fn start(prometheus_url: &str, preset: &str) -> Service {
        Service::start_with(&format!(
            "  prometheus: {{url: '{prometheus_url}', timeout: 5s}}\n  preset: {preset}\n"
        ))
        .await
    }

    /// The service with `traffic:` lines of its own besides the short interval and window.
    async fn start_with(traffic: &str) -> Service {
        Service::start_in(tempfile::tempdir().unwrap(), traffic).await
    }

    /// [`Service::start_with`] on the store in `dir` (a restart of one stopped with
    /// [`Service::stop_keeping_store`]).
    async fn start_in(dir: tempfile::TempDir, traffic: &str) -> Service {
        let yaml = format!(
            "store:\n  path: {db}\nrules:\n  classes:\n    traffic_share_drift: {{grace: 2s}}\n\
             traffic:\n{traffic}  interval: 1s\n  window: 15s\n  minRequests: 100\n",
            db = dir.path().join("traffic.db").display(),
        );
        let config = drift_core::config::load_str(&yaml, &|_| None).unwrap();
        let server = drift_sentinel::app::start(config, None, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        Service {
            server,
            client: reqwest::Client::new(),
            dir,
        }
    }

    async fn post_routes(&self, services: &[&str]) {
        for (index, service) in services.iter().enumerate() {
            let event = structured_event(&format!("traffic-{index}"), "add", &route(service));
            let response = self
                .client
                .post(format!("http://{}/", self.server.addr))
                .header("content-type", "application/cloudevents+json")
                .body(serde_json::to_vec(&event).unwrap())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 202, "{service}");
        }
    }

    /// The class's drifts in `state` (`open`, `resolved`, `firing`, ...).
    async fn drifts(&self, state: &str) -> Vec<Value> {
        let url = format!(
            "http://{}/api/v1/drifts?class=traffic_share_drift&state={state}",
            self.server.addr
        );
        let body: Value = self
            .client
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["items"].as_array().cloned().unwrap_or_default()
    }

    /// The dashboard's page of a drift.
    async fn page(&self, id: &str) -> String {
        self.client
            .get(format!("http://{}/ui/drifts/{id}", self.server.addr))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// A metric's value (the first series whose line starts with `prefix`), 0 when absent.
    async fn metric(&self, prefix: &str) -> f64 {
        self.reading(prefix).await.unwrap_or(0.0)
    }

    /// A metric's value, `None` when no series' line starts with `prefix`.
    async fn reading(&self, prefix: &str) -> Option<f64> {
        let text = self
            .client
            .get(format!("http://{}/metrics", self.server.addr))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find(|line| line.starts_with(prefix))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
    }

    /// Waits for the firing drift on `name`.
    async fn firing(&self, name: &str) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(drift) = self
                .drifts("firing")
                .await
                .into_iter()
                .find(|drift| drift["name"] == name)
            {
                return drift;
            }
            assert!(
                Instant::now() < deadline,
                "no firing traffic_share_drift on {name}; queries {}, errors {}",
                self.metric("drift_sentinel_traffic_queries_total").await,
                self.metric("drift_sentinel_traffic_query_errors_total")
                    .await,
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until `prefix`'s metric is at least `at_least`.
    async fn metric_reaches(&self, prefix: &str, at_least: f64) {
        let deadline = Instant::now() + DEADLINE;
        while self.metric(prefix).await < at_least {
            assert!(
                Instant::now() < deadline,
                "{prefix} never reached {at_least}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn stop(self) {
        self.stop_keeping_store().await;
    }

    /// Stops the service; returns the directory of its store, for a restart.
    async fn stop_keeping_store(self) -> tempfile::TempDir {
        self.server.shutdown.cancel();
        let _ = self.server.done.await;
        self.dir
    }

    /// Waits for `queries` more answers of Prometheus than now: web-b and web-c, judged on
    /// them too, must not drift at any later observation either.
    async fn more_queries(&self, queries: f64) {
        let queried = "drift_sentinel_traffic_queries_total";
        let now = self.metric(queried).await;
        self.metric_reaches(queried, now + queries).await;
    }
}

/// `revision=value,...` as pairs.
fn pairs(text: &str) -> Vec<(String, f64)> {
    text.split(',')
        .map(|pair| {
            let (revision, value) = pair.split_once('=').expect("revision=value");
            (revision.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

/// The finding shows both splits: declared 90/10 exactly, observed about 50/50.
fn assert_both_splits(drift: &Value, service: &str) {
    let facts = &drift["evidence"]["facts"];
    let (old, new) = (format!("{service}-00001"), format!("{service}-00002"));
    assert_eq!(facts["declared"], format!("{old}=90,{new}=10"), "{drift:#}");
    let observed = pairs(facts["observed"].as_str().unwrap());
    assert_eq!(observed.len(), 2, "{drift:#}");
    for (revision, share) in &observed {
        assert!([&old, &new].contains(&revision), "{drift:#}");
        assert!(
            (share - 50.0).abs() <= 5.0,
            "observed {share}% for {revision}: {drift:#}"
        );
    }
    let shares: Value = serde_json::from_str(facts["shares"].as_str().unwrap()).unwrap();
    assert_eq!(shares[0]["revision"], old.as_str());
    assert_eq!(shares[0]["declaredPercent"], 90.0);
    assert!(shares[0]["requests"].as_f64().unwrap() > 0.0);
    let summary = drift["evidence"]["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("{old} declares 90% and served")),
        "{summary}"
    );
    assert_eq!(drift["severity"], "warning");
    assert!(drift["evidence"]["hint"]
        .as_str()
        .unwrap()
        .contains("virtualservices.networking.istio.io"));
    assert_eq!(facts["window"], "15s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencensus_preset_fires_on_a_fifty_fifty_split_and_is_quiet_within_tolerance_or_with_few_requests(
) {
    let targets = exporters(
        Era::OpenCensus,
        vec![
            // Declared 90/10, served 50/50.
            Pod {
                service: "web-a",
                revision: "web-a-00001",
                rate: 20.0,
            },
            Pod {
                service: "web-a",
                revision: "web-a-00002",
                rate: 20.0,
            },
            // Served 85/15: 5 points from 90/10, within 15.
            Pod {
                service: "web-b",
                revision: "web-b-00001",
                rate: 34.0,
            },
            Pod {
                service: "web-b",
                revision: "web-b-00002",
                rate: 6.0,
            },
            // Served 50/50, but about 15 requests in the 15 s window: fewer than minRequests.
            Pod {
                service: "web-c",
                revision: "web-c-00001",
                rate: 0.5,
            },
            Pod {
                service: "web-c",
                revision: "web-c-00002",
                rate: 0.5,
            },
        ],
    )
    .await;
    let prometheus = Prometheus::start(&targets).await;
    let service = Service::start(&prometheus.url, "knative-1.18").await;
    service.post_routes(&["web-a", "web-b", "web-c"]).await;

    let drift = service.firing("web-a").await;
    assert_both_splits(&drift, "web-a");
    // The drift's page draws both splits: each Revision in the declared and the served bar.
    let page = service.page(drift["id"].as_str().unwrap()).await;
    assert!(page.contains("id=\"traffic-split\""), "{page}");
    for revision in ["web-a-00001", "web-a-00002"] {
        assert_eq!(
            page.matches(&format!("data-revision=\"{revision}\""))
                .count(),
            2,
            "{revision} in both bars: {page}"
        );
    }
    assert_eq!(
        service
            .reading("drift_sentinel_traffic_prometheus_up{cluster=\"default\"}")
            .await,
        Some(1.0)
    );
    let query = drift["evidence"]["facts"]["query"].as_str().unwrap();
    assert!(
        query.contains("increase(revision_request_count[15s])"),
        "{query}"
    );
    // web-b and web-c were judged on the same observations over a whole window: never even
    // pending (a pending drift of this class lives in memory, so the transitions tell).
    assert_eq!(
        service
            .metric("drift_sentinel_drift_transitions_total{class=\"traffic_share_drift\",state=\"pending\"}")
            .await,
        1.0
    );
    let names: Vec<Value> = service
        .drifts("open")
        .await
        .into_iter()
        .chain(service.drifts("resolved").await)
        .map(|drift| drift["name"].clone())
        .collect();
    assert_eq!(names, [json!("web-a")]);
    // Judged again on five more observations: still only web-a (a later pending web-b or web-c
    // would show here).
    service.more_queries(5.0).await;
    assert_eq!(
        service
            .metric("drift_sentinel_drift_transitions_total{class=\"traffic_share_drift\",state=\"pending\"}")
            .await,
        1.0
    );
    let open: Vec<Value> = service
        .drifts("open")
        .await
        .into_iter()
        .map(|drift| drift["name"].clone())
        .collect();
    assert_eq!(open, [json!("web-a")]);
    assert_eq!(
        service
            .metric("drift_sentinel_traffic_query_errors_total")
            .await,
        0.0
    );
    let store = service.stop_keeping_store().await;

    // Restarted with the traffic section off: nothing will judge the firing drift again, so
    // it resolves at once instead of reminding forever.
    let service = Service::start_in(store, "").await;
    let deadline = Instant::now() + DEADLINE;
    let resolved = loop {
        let resolved = service.drifts("resolved").await;
        if !resolved.is_empty() {
            break resolved;
        }
        assert!(Instant::now() < deadline, "the drift never resolved");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["id"], drift["id"]);
    assert_eq!(resolved[0]["resolution"], "served traffic not observed");
    assert!(service.drifts("open").await.is_empty());
    service.stop().await;

    // A query of one's own that Prometheus refuses: its error envelope (400 bad_data) counted.
    let service = Service::start_with(&format!(
        "  prometheus: {{url: '{}', timeout: 5s}}\n  query: 'sum by (namespace_name, revision_name) (increase(revision_request_count[{{window}}])'\n",
        prometheus.url
    ))
    .await;
    service
        .metric_reaches(
            "drift_sentinel_traffic_query_errors_total{kind=\"query_error\"}",
            1.0,
        )
        .await;
    assert_eq!(
        service
            .reading("drift_sentinel_traffic_prometheus_up{cluster=\"default\"}")
            .await,
        Some(0.0)
    );
    service.stop().await;

    // A Prometheus that is down: counted, never a finding.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let service = Service::start(&closed, "knative-1.18").await;
    service.post_routes(&["web-a", "web-b", "web-c"]).await;
    service
        .metric_reaches(
            "drift_sentinel_traffic_query_errors_total{kind=\"unreachable\"}",
            3.0,
        )
        .await;
    assert_eq!(
        service
            .reading("drift_sentinel_traffic_prometheus_up{cluster=\"default\"}")
            .await,
        Some(0.0)
    );
    assert_eq!(
        service.metric("drift_sentinel_traffic_queries_total").await,
        0.0
    );
    assert_eq!(
        service
            .metric("drift_sentinel_drift_transitions_total{class=\"traffic_share_drift\"")
            .await,
        0.0
    );
    assert!(service.drifts("open").await.is_empty());
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otel_scrape_preset_joins_target_info_and_a_prometheus_outage_leaves_the_finding_as_it_is()
{
    let targets = exporters(
        Era::OtelScrape,
        vec![
            Pod {
                service: "web-a",
                revision: "web-a-00001",
                rate: 20.0,
            },
            Pod {
                service: "web-a",
                revision: "web-a-00002",
                rate: 20.0,
            },
            Pod {
                service: "web-b",
                revision: "web-b-00001",
                rate: 35.0,
            },
            Pod {
                service: "web-b",
                revision: "web-b-00002",
                rate: 5.0,
            },
        ],
    )
    .await;
    let mut prometheus = Prometheus::start(&targets).await;
    let service = Service::start(&prometheus.url, "knative-1.21-scrape").await;
    service.post_routes(&["web-a", "web-b"]).await;

    let drift = service.firing("web-a").await;
    assert_both_splits(&drift, "web-a");
    let query = drift["evidence"]["facts"]["query"].as_str().unwrap();
    assert!(
        query.contains("increase(kn_serving_invocation_duration_seconds_count[15s]) * on (job, instance) group_left (k8s_namespace_name, kn_service_name, kn_revision_name) group by (job, instance, k8s_namespace_name, kn_service_name, kn_revision_name) (last_over_time(target_info[15s]))"),
        "{query}"
    );
    assert_eq!(
        service
            .metric("drift_sentinel_drift_transitions_total{class=\"traffic_share_drift\",state=\"pending\"}")
            .await,
        1.0,
        "web-b (87.5/12.5) is within tolerance"
    );
    service.more_queries(5.0).await;
    assert_eq!(
        service
            .metric("drift_sentinel_drift_transitions_total{class=\"traffic_share_drift\",state=\"pending\"}")
            .await,
        1.0,
        "web-b stays within tolerance at later observations"
    );

    // Prometheus goes away: the queries fail, are counted, and the finding stays as it is.
    prometheus.stop();
    let errors = "drift_sentinel_traffic_query_errors_total{kind=\"unreachable\"}";
    service.metric_reaches(errors, 2.0).await;
    assert_eq!(
        service
            .reading("drift_sentinel_traffic_prometheus_up{cluster=\"default\"}")
            .await,
        Some(0.0)
    );
    let firing = service.drifts("firing").await;
    assert_eq!(firing.len(), 1);
    assert_eq!(firing[0]["id"], drift["id"]);
    assert!(service.drifts("resolved").await.is_empty());
    service.stop().await;
}

/// An instant query's answer as value per `kn_revision_name`.
async fn per_revision(prometheus: &str, query: &str) -> std::collections::BTreeMap<String, f64> {
    let body: Value = reqwest::Client::new()
        .post(format!("{prometheus}/api/v1/query"))
        .form(&[("query", query)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["status"], "success", "{query}: {body}");
    body["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|sample| {
            (
                sample["metric"]["kn_revision_name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                sample["value"][1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otel_scrape_preset_keeps_the_requests_of_a_pod_gone_within_the_window() {
    let (stable, _) = exporter(
        Era::OtelScrape,
        Pod {
            service: "web-d",
            revision: "web-d-00001",
            rate: 36.0,
        },
    )
    .await;
    let (canary, canary_serving) = exporter(
        Era::OtelScrape,
        Pod {
            service: "web-d",
            revision: "web-d-00002",
            rate: 4.0,
        },
    )
    .await;
    let prometheus = Prometheus::start(&[stable, canary.clone()]).await;
    // The preset's query over a window far longer than the test: whatever the canary served
    // stays inside it.
    let config = drift_core::config::load_str(
        &format!(
            "traffic:\n  prometheus: {{url: '{}'}}\n  preset: knative-1.21-scrape\n  window: 10m\n",
            prometheus.url
        ),
        &|_| None,
    )
    .unwrap();
    let query = config.traffic.promql("default").unwrap();
    let deadline = Instant::now() + DEADLINE;
    while per_revision(&prometheus.url, &query)
        .await
        .get("web-d-00002")
        .is_none_or(|requests| *requests <= 0.0)
    {
        assert!(
            Instant::now() < deadline,
            "the canary never counted requests"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The canary's pod goes away (scaled to zero): its scrape fails and Prometheus marks its
    // series, target_info among them, stale.
    canary_serving.store(false, std::sync::atomic::Ordering::SeqCst);
    let gone = format!("up{{instance=\"{canary}\"}} == 0");
    let current_info = format!("target_info{{instance=\"{canary}\"}}");
    loop {
        let down = !per_revision(&prometheus.url, &gone).await.is_empty();
        if down
            && per_revision(&prometheus.url, &current_info)
                .await
                .is_empty()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never saw the canary go"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Joined with the current target_info, the requests it served in the window are lost.
    let current_join = "sum by (k8s_namespace_name, kn_service_name, kn_revision_name) (increase(kn_serving_invocation_duration_seconds_count[600s]) * on (job, instance) group_left (k8s_namespace_name, kn_service_name, kn_revision_name) target_info)";
    let lost = per_revision(&prometheus.url, current_join).await;
    assert!(lost.contains_key("web-d-00001"), "{lost:?}");
    assert!(!lost.contains_key("web-d-00002"), "{lost:?}");
    // The preset joins every target_info of the window: the canary keeps its requests.
    let kept = per_revision(&prometheus.url, &query).await;
    assert!(kept["web-d-00001"] > 0.0, "{kept:?}");
    assert!(
        kept.get("web-d-00002")
            .is_some_and(|requests| *requests > 0.0),
        "{kept:?}"
    );
}

// ---- the engine's side, on the scenario clock (no Prometheus) -----------------------------------

mod engine {
    use serde_json::json;

    use crate::scenario::{changed, check, route, Sim};
    use drift_core::classify::traffic::{Observation, Served};

    /// The fixture Route, its status split 90/10 (and a tagged 0 % target).
    fn ninety_ten() -> serde_json::Value {
        changed(&route(), |route| {
            route["status"]["traffic"] = json!([
                {"revisionName": "knative-webapp-00001", "percent": 90, "latestRevision": false},
                {"revisionName": "knative-webapp-00002", "percent": 10, "latestRevision": true},
                {"revisionName": "knative-webapp-00002", "percent": 0, "tag": "candidate"},
            ]);
        })
    }

    /// An observation of cluster `prod` (the scenarios' default) with a 10-minute window.
    fn served(requests: &[(&str, f64)]) -> Observation {
        Observation {
            cluster: "prod".into(),
            query: "sum by (namespace_name, service_name, revision_name) (increase(revision_request_count[600s]))".into(),
            window: std::time::Duration::from_secs(600),
            tolerance_percent: 15.0,
            min_requests: 100,
            series: requests
                .iter()
                .map(|(revision, requests)| Served {
                    namespace: "myapp".into(),
                    service: "knative-webapp".into(),
                    revision: revision.to_string(),
                    requests: *requests,
                })
                .collect(),
        }
    }

    const FIFTY_FIFTY: &[(&str, f64)] = &[
        ("knative-webapp-00001", 600.0),
        ("knative-webapp-00002", 600.0),
    ];

    #[test]
    fn fires_after_a_whole_window_under_the_split_and_its_grace() {
        let mut sim = Sim::new();
        sim.send("add", &ninety_ten());
        // The first observation that sees the split starts its window: no verdict yet (the
        // window may hold requests of an earlier split).
        sim.observe_traffic(&served(FIFTY_FIFTY));
        sim.wait(599);
        sim.observe_traffic(&served(FIFTY_FIFTY));
        check(sim.lines(), &[]);
        sim.wait(1);
        sim.observe_traffic(&served(FIFTY_FIFTY));
        sim.wait(119);
        check(
            sim.lines(),
            &["pending traffic_share_drift Route/knative-webapp"],
        );
        sim.wait(1);
        check(
            sim.lines(),
            &[
                "pending traffic_share_drift Route/knative-webapp",
                "firing traffic_share_drift Route/knative-webapp",
            ],
        );
        let facts = &sim.last("traffic_share_drift").drift.evidence.facts;
        assert_eq!(
            facts["declared"],
            "knative-webapp-00001=90,knative-webapp-00002=10"
        );
        assert_eq!(
            facts["observed"],
            "knative-webapp-00001=50,knative-webapp-00002=50"
        );
        assert_eq!(
            facts["requests"],
            "knative-webapp-00001=600,knative-webapp-00002=600"
        );
        assert_eq!(facts["window"], "600s");
        assert!(facts["query"].contains("revision_request_count[600s]"));
    }

    /// A Route whose drift fires (as above), returned with the simulator.
    fn firing() -> Sim {
        let mut sim = Sim::new();
        sim.send("add", &ninety_ten());
        sim.observe_traffic(&served(FIFTY_FIFTY));
        sim.wait(600);
        sim.observe_traffic(&served(FIFTY_FIFTY));
        sim.wait(120);
        check(
            sim.open(),
            &["traffic_share_drift firing Route/knative-webapp"],
        );
        sim
    }

    #[test]
    fn no_verdict_leaves_an_open_drift_as_it_is_and_a_matching_split_resolves_it() {
        let mut sim = firing();
        // Too few requests, then no series at all (request metrics switched off), then a
        // Prometheus outage (no observation): nothing to conclude, the finding stays.
        sim.wait(60);
        sim.observe_traffic(&served(&[
            ("knative-webapp-00001", 10.0),
            ("knative-webapp-00002", 10.0),
        ]));
        sim.wait(60);
        sim.observe_traffic(&served(&[]));
        sim.wait(3600);
        check(
            sim.open(),
            &["traffic_share_drift firing Route/knative-webapp"],
        );
        // The data plane is repaired: within tolerance, resolved.
        sim.observe_traffic(&served(&[
            ("knative-webapp-00001", 850.0),
            ("knative-webapp-00002", 150.0),
        ]));
        check(sim.open(), &[]);
        assert_eq!(
            sim.lines().last().unwrap(),
            "resolved traffic_share_drift Route/knative-webapp"
        );
    }

    #[test]
    fn a_new_declared_split_resolves_and_waits_for_a_whole_window_under_it() {
        let mut sim = firing();
        // A rollout to 50/50: the observation is about the old split.
        let rolled = changed(&ninety_ten(), |route| {
            route["metadata"]["resourceVersion"] = json!("7746700");
            route["status"]["traffic"][0]["percent"] = json!(50);
            route["status"]["traffic"][1]["percent"] = json!(50);
        });
        sim.send("update", &rolled);
        check(sim.open(), &[]);
        let resolved = sim.last("traffic_share_drift");
        assert!(resolved
            .drift
            .resolution
            .as_deref()
            .unwrap()
            .contains("declared split changed"));
        // Served 90/10 from now on: the window still mixes, so no verdict for a window.
        let old_split = &[
            ("knative-webapp-00001", 900.0),
            ("knative-webapp-00002", 100.0),
        ];
        sim.observe_traffic(&served(old_split));
        sim.wait(300);
        sim.observe_traffic(&served(old_split));
        sim.wait(3600);
        check(sim.open(), &[]);
        sim.observe_traffic(&served(old_split));
        check(
            sim.open(),
            &["traffic_share_drift pending Route/knative-webapp"],
        );
        assert!(sim
            .last("traffic_share_drift")
            .drift
            .evidence
            .summary
            .contains("knative-webapp-00001 declares 50% and served 90%"));
    }

    #[test]
    fn a_deleted_route_resolves_and_leaves_the_book() {
        let mut sim = firing();
        assert_eq!(sim.engine().traffic_routes(), 1);
        let gone = changed(&ninety_ten(), |route| {
            route["metadata"]["resourceVersion"] = json!("7746800");
        });
        sim.send("delete", &gone);
        check(sim.open(), &[]);
        assert_eq!(sim.engine().traffic_routes(), 0);
        // Its series still come (the pods drain): nothing is filed for a Route that is gone.
        sim.observe_traffic(&served(FIFTY_FIFTY));
        assert_eq!(sim.engine().traffic_routes(), 0);
        check(sim.open(), &[]);
    }

    #[test]
    fn other_clusters_and_other_objects_are_not_concerned() {
        let mut sim = Sim::new();
        sim.send("add", &ninety_ten());
        let mut elsewhere = served(FIFTY_FIFTY);
        elsewhere.cluster = "staging".into();
        sim.observe_traffic(&elsewhere);
        sim.wait(600);
        sim.observe_traffic(&elsewhere);
        sim.wait(600);
        assert_eq!(sim.engine().traffic_routes(), 0);
        check(sim.lines(), &[]);
    }

    #[test]
    fn several_series_of_one_revision_are_summed() {
        // A query of one's own that keeps the pod label: several rows per Revision.
        // 900 requests of 00001 in four pods' series, 100 of 00002: 90/10 as declared. Read as
        // the last row only, 225/100 would be 69/31 and fire.
        let rows = &[
            ("knative-webapp-00001", 225.0),
            ("knative-webapp-00001", 225.0),
            ("knative-webapp-00002", 100.0),
            ("knative-webapp-00001", 225.0),
            ("knative-webapp-00001", 225.0),
        ];
        let mut sim = Sim::new();
        sim.send("add", &ninety_ten());
        sim.observe_traffic(&served(rows));
        sim.wait(600);
        sim.observe_traffic(&served(rows));
        sim.wait(600);
        check(sim.lines(), &[]);
        // The sum is what a finding shows.
        let fifty_fifty = &[
            ("knative-webapp-00001", 300.0),
            ("knative-webapp-00001", 300.0),
            ("knative-webapp-00002", 600.0),
        ];
        sim.observe_traffic(&served(fifty_fifty));
        sim.wait(120);
        check(
            sim.open(),
            &["traffic_share_drift firing Route/knative-webapp"],
        );
        assert_eq!(
            sim.last("traffic_share_drift").drift.evidence.facts["requests"],
            "knative-webapp-00001=600,knative-webapp-00002=600"
        );
    }

    #[test]
    fn requests_of_a_revision_only_a_zero_percent_tag_names_are_left_out() {
        // Blue/green: 00003 is reachable on its tag's URL only, declared 0 %. Its requests hit
        // the same queue-proxy; counted, they would read as "00003 declares 0% and served 38%"
        // and shrink 00001 to 56 %.
        let blue_green = changed(&ninety_ten(), |route| {
            route["status"]["traffic"] = json!([
                {"revisionName": "knative-webapp-00001", "percent": 90, "latestRevision": false},
                {"revisionName": "knative-webapp-00002", "percent": 10, "latestRevision": false},
                {"revisionName": "knative-webapp-00003", "percent": 0, "tag": "candidate", "latestRevision": true},
            ]);
        });
        let rows = &[
            ("knative-webapp-00001", 900.0),
            ("knative-webapp-00002", 100.0),
            ("knative-webapp-00003", 600.0),
        ];
        let mut sim = Sim::new();
        sim.send("add", &blue_green);
        sim.observe_traffic(&served(rows));
        sim.wait(600);
        sim.observe_traffic(&served(rows));
        sim.wait(600);
        check(sim.lines(), &[]);
        // A Revision the status does not name at all still counts (an old one serving).
        let old = &[
            ("knative-webapp-00001", 900.0),
            ("knative-webapp-00002", 100.0),
            ("knative-webapp-00003", 600.0),
            ("knative-webapp-00000", 600.0),
        ];
        sim.observe_traffic(&served(old));
        sim.wait(120);
        check(
            sim.open(),
            &["traffic_share_drift firing Route/knative-webapp"],
        );
        let facts = &sim.last("traffic_share_drift").drift.evidence.facts;
        assert_eq!(
            facts["requests"],
            "knative-webapp-00000=600,knative-webapp-00001=900,knative-webapp-00002=100"
        );
    }

    #[test]
    fn an_open_drift_without_a_verdict_for_three_windows_resolves() {
        let mut sim = firing();
        // The Route's series stop for good (its Service deleted from the metrics' view, the
        // request metrics turned off): every observation gives no verdict.
        sim.wait(60);
        sim.observe_traffic(&served(&[]));
        sim.wait(1799);
        sim.observe_traffic(&served(&[]));
        check(
            sim.open(),
            &["traffic_share_drift firing Route/knative-webapp"],
        );
        sim.wait(1);
        sim.observe_traffic(&served(&[]));
        check(sim.open(), &[]);
        let resolved = sim.last("traffic_share_drift");
        let reason = resolved.drift.resolution.as_deref().unwrap();
        assert!(reason.starts_with("no observation for 1800s"), "{reason}");

        // After a restart the book is empty, and a Route whose series never come back is never
        // filed: its restored drift resolves all the same.
        let mut sim = firing();
        sim.restart();
        let mut elsewhere = served(FIFTY_FIFTY);
        for served in &mut elsewhere.series {
            served.service = "other".into();
            served.revision = served.revision.replace("knative-webapp", "other");
        }
        sim.observe_traffic(&elsewhere);
        sim.wait(1800);
        sim.observe_traffic(&elsewhere);
        check(sim.open(), &[]);
    }

    #[test]
    fn an_observation_judges_again_only_the_routes_whose_observation_changed() {
        use drift_core::classify::traffic::TrafficBook;
        let mut sim = Sim::new();
        sim.send("add", &ninety_ten());
        let graph = sim.engine().graph();
        let mut book = TrafficBook::default();
        let t0 = 1_000_000;
        // New, then not yet a whole window under the split: judged each time.
        assert_eq!(book.file(graph, &served(FIFTY_FIFTY), t0).len(), 1);
        assert_eq!(
            book.file(graph, &served(FIFTY_FIFTY), t0 + 600_000).len(),
            1
        );
        // The same requests under the same split: the verdict would be the same.
        assert!(book
            .file(graph, &served(FIFTY_FIFTY), t0 + 660_000)
            .is_empty());
        let other = &[
            ("knative-webapp-00001", 601.0),
            ("knative-webapp-00002", 600.0),
        ];
        assert_eq!(book.file(graph, &served(other), t0 + 720_000).len(), 1);
        assert!(book.file(graph, &served(other), t0 + 780_000).is_empty());
        assert_eq!(book.len(), 1);
    }

    #[test]
    fn after_a_restart_the_finding_stays_until_observations_judge_it_again() {
        let mut sim = firing();
        sim.restart();
        sim.wait(3600);
        check(
            sim.open(),
            &["traffic_share_drift firing Route/knative-webapp"],
        );
        // The book starts empty: a whole window after the first observation, judged again.
        let repaired = &[
            ("knative-webapp-00001", 900.0),
            ("knative-webapp-00002", 100.0),
        ];
        sim.observe_traffic(&served(repaired));
        check(
            sim.open(),
            &["traffic_share_drift firing Route/knative-webapp"],
        );
        sim.wait(600);
        sim.observe_traffic(&served(repaired));
        check(sim.open(), &[]);
    }
}

/// What the strict stand-in for Prometheus below accepts: exactly this query, and these tokens.
struct Expected {
    query: String,
    tokens: std::sync::Mutex<Vec<String>>,
}

impl Expected {
    fn accept(&self, tokens: &[&str]) {
        *self.tokens.lock().unwrap() = tokens.iter().map(|token| token.to_string()).collect();
    }
}

/// A stand-in for Prometheus' `/api/v1/query` that holds the poller to the API's contract: a
/// `POST` of an `application/x-www-form-urlencoded` body with the query and its timeout, and
/// the bearer token expected now. Anything else is refused as Prometheus (or a proxy in front of
/// it) refuses it.
async fn strict_prometheus(expected: Arc<Expected>) -> String {
    use axum::http::{HeaderMap, Method, StatusCode};
    let app = axum::Router::new().route(
        "/api/v1/query",
        axum::routing::any(
            move |method: Method, headers: HeaderMap, body: axum::body::Bytes| {
                let expected = Arc::clone(&expected);
                async move {
                    let header = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|value| value.to_str().ok())
                            .unwrap_or_default()
                            .to_string()
                    };
                    let authorization = header("authorization");
                    let accepted = expected
                        .tokens
                        .lock()
                        .unwrap()
                        .iter()
                        .any(|token| authorization == format!("Bearer {token}"));
                    if !accepted {
                        return (StatusCode::UNAUTHORIZED, "Unauthorized\n".to_string());
                    }
                    let wanted = vec![
                        ("query".to_string(), expected.query.clone()),
                        ("timeout".to_string(), "5s".to_string()),
                    ];
                    if method != Method::POST
                        || header("content-type") != "application/x-www-form-urlencoded"
                        || form_pairs(&String::from_utf8_lossy(&body)) != wanted
                    {
                        return (
                            StatusCode::BAD_REQUEST,
                            r#"{"status":"error","errorType":"bad_data","error":"unexpected request"}"#
                                .to_string(),
                        );
                    }
                    (
                        StatusCode::OK,
                        r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#
                            .to_string(),
                    )
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

/// `a=b&c=d` decoded as a form body is (`+` a space, `%XX` a byte).
fn form_pairs(text: &str) -> Vec<(String, String)> {
    let decode = |part: &str| {
        let bytes = part.as_bytes();
        let mut out = Vec::new();
        let mut index = 0;
        while index < bytes.len() {
            match bytes[index] {
                b'%' if index + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    index += 3;
                }
                b'+' => {
                    out.push(b' ');
                    index += 1;
                }
                byte => {
                    out.push(byte);
                    index += 1;
                }
            }
        }
        String::from_utf8(out).unwrap()
    };
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_is_a_form_post_with_the_bearer_token_read_from_its_file_at_every_query() {
    let expected = Arc::new(Expected {
        query: "sum by (k8s_namespace_name, kn_service_name, kn_revision_name) (increase(kn_serving_invocation_duration_seconds_count[15s]))".into(),
        tokens: std::sync::Mutex::new(vec!["first-token".into()]),
    });
    let url = strict_prometheus(Arc::clone(&expected)).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "first-token\n").unwrap();
    let service = Service::start_with(&format!(
        "  prometheus: {{url: '{url}/', bearerTokenFile: '{}', timeout: 5s}}\n  preset: knative-1.21-push\n",
        token_file.display()
    ))
    .await;
    let queries = "drift_sentinel_traffic_queries_total";
    service.metric_reaches(queries, 1.0).await;
    assert_eq!(
        service
            .reading("drift_sentinel_traffic_prometheus_up{cluster=\"default\"}")
            .await,
        Some(1.0)
    );
    // The kubelet rotates the token (both valid a while): the next queries send the new one,
    // which is then the only one the server takes.
    expected.accept(&["first-token", "second-token"]);
    // Replaced whole, as the kubelet does (it swaps a symlink): a plain rewrite truncates first,
    // and a query reading in between would send an empty token.
    let next = dir.path().join("token.next");
    std::fs::write(&next, "second-token\n").unwrap();
    std::fs::rename(&next, &token_file).unwrap();
    service
        .metric_reaches(queries, service.metric(queries).await + 1.0)
        .await;
    expected.accept(&["second-token"]);
    service
        .metric_reaches(queries, service.metric(queries).await + 2.0)
        .await;
    assert_eq!(
        service
            .metric("drift_sentinel_traffic_query_errors_total")
            .await,
        0.0
    );
    // A token the server no longer takes: a 401 that is not Prometheus' answer, counted.
    expected.accept(&["third-token"]);
    service
        .metric_reaches(
            "drift_sentinel_traffic_query_errors_total{kind=\"http_status\"}",
            1.0,
        )
        .await;
    // An empty file (a hand-made one being rewritten) is the file's error, and no query is
    // sent with `Bearer ` and nothing after it (the server would count another 401). The
    // poller runs one query at a time: once one failed on the file, every later one reads it.
    std::fs::write(&next, "\n").unwrap();
    std::fs::rename(&next, &token_file).unwrap();
    let token_file_errors = "drift_sentinel_traffic_query_errors_total{kind=\"token_file\"}";
    let statuses = "drift_sentinel_traffic_query_errors_total{kind=\"http_status\"}";
    service.metric_reaches(token_file_errors, 1.0).await;
    let before = service.metric(statuses).await;
    service
        .metric_reaches(
            token_file_errors,
            service.metric(token_file_errors).await + 2.0,
        )
        .await;
    assert_eq!(service.metric(statuses).await, before);
    service.stop().await;
}

/// `config validate` reads the files the poller reads at start: a CA bundle or token file that
/// is missing fails validation (exit 2, the key named), not the pod's start after it.
#[test]
fn config_validate_reads_the_traffic_sections_files() {
    let dir = tempfile::tempdir().unwrap();
    let validate = |extra: &str| {
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            format!(
                "traffic:\n  prometheus:\n    url: 'https://prometheus:9090'\n{extra}  preset: knative-1.18\n"
            ),
        )
        .unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_drift-sentinel"))
            .args(["config", "validate", &path.display().to_string()])
            .output()
            .unwrap()
    };
    let missing = dir.path().join("nowhere.crt");
    let output = validate(&format!("    caFile: {}\n", missing.display()));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("traffic.prometheus.caFile: cannot read"),
        "{stderr}"
    );
    let output = validate(&format!("    bearerTokenFile: {}\n", missing.display()));
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("traffic.prometheus.bearerTokenFile: cannot read"));
    let token = dir.path().join("token");
    // An empty file would fail every query (`token_file`): refused with its name.
    std::fs::write(&token, " \n").unwrap();
    let output = validate(&format!("    bearerTokenFile: {}\n", token.display()));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "traffic.prometheus.bearerTokenFile: {} is empty",
            token.display()
        )),
        "{stderr}"
    );
    std::fs::write(&token, "t0ken").unwrap();
    let output = validate(&format!("    bearerTokenFile: {}\n", token.display()));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
