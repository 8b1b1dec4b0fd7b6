//! Issue 28's two cost figures as phases of `bench-loadgen run`: CPU per event as the world grows
//! (`flatness`: 1,000, 10,000 and 100,000 tracked objects, the same status churn on the same 800
//! of them) and status churn on large objects (`large`: the world's largest Pod, a ConfigMap with
//! about 200 KB of `data`, a Route as the small reference). Benchmark-only code.
//!
//! Both drive the sink with the driver's own closed-loop client ([`Lanes`]): each connection owns
//! a fixed set of objects and sends their events in order, one request at a time, each with a
//! fresh CloudEvent id and a `resourceVersion` drawn from one counter of the whole run, so every
//! event is newer than its object's last and none is implausibly far ahead of the cluster's
//! newest (no duplicate, stale or implausible event; the report counts outcomes to show it). CPU
//! per event is the server's utime+stime (`/proc/<pid>/stat`) over a run divided by its events.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::client::{Conn, Rng};
use crate::world::{self, Fixtures, Mode, Object, OBJECTS_PER_APP, STEPS};
use crate::{
    clock_ticks, cpu_ticks, load_objects, loadavg, log, metric, percentile, scrape, start_ceiling,
    start_sink, status_kib, Result, RunArgs, Sink,
};

/// The flatness phase loads apps from this index on (as the memory phase does), so the churned
/// objects are the first ones loaded at every size.
const FLAT_FIRST_APP: usize = 10_000;
/// The large-object phase's apps (every fourth from here: the ones with 40 more env vars).
const LARGE_FIRST_APP: usize = 20_000;
/// The no-change classes' second set of apps (distinct objects from the status-churn Pods).
const TOUCHED_FIRST_APP: usize = 60_000;
/// Steps of a no-change cycle: only a manager's time moves, so four are as good as twenty (and
/// 64 ConfigMaps times 20 templates of 220 KB would be 280 MB in the driver).
const TOUCH_STEPS: usize = 4;
/// The time bound of every large-object run (each is bounded by its count first).
const LIMIT: Duration = Duration::from_secs(300);

/// The options of the two phases (part of `run`'s arguments).
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct PhaseArgs {
    /// Flatness: world sizes (distinct tracked objects), a fresh sink for each.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000usize, 10_000, 100_000])]
    pub(crate) flat_sizes: Vec<usize>,
    /// Flatness: objects whose status churns (the first ones loaded, the same at every size).
    #[arg(long, default_value_t = 800)]
    pub(crate) flat_churn_objects: usize,
    /// Flatness: seconds of each measured run (after 3 s of warm-up).
    #[arg(long, default_value_t = 15)]
    pub(crate) flat_duration: u64,
    /// Large objects: measured events of each object class.
    #[arg(long, default_value_t = 20_000)]
    pub(crate) large_events: u64,
    /// Large objects: distinct objects of each class (one per connection).
    #[arg(long, default_value_t = 64)]
    pub(crate) large_copies: usize,
    /// Large objects: bytes of the ConfigMap's `data` (as JSON).
    #[arg(long, default_value_t = 200_000)]
    pub(crate) configmap_bytes: usize,
}

/// The run's one `resourceVersion` counter (above the loaders' `1`).
static RESOURCE_VERSION: AtomicU64 = AtomicU64::new(1_000);

/// A request with its placeholders' offsets, filled in place.
#[derive(Clone)]
struct Prepared {
    object: usize,
    request: Vec<u8>,
    id_at: usize,
    rv_at: usize,
    body: usize,
}

impl Prepared {
    fn new(object: usize, request: Vec<u8>) -> Result<Prepared> {
        let find = |needle: &str| {
            request
                .windows(needle.len())
                .position(|window| window == needle.as_bytes())
                .ok_or_else(|| format!("no {needle} in a request template"))
        };
        let (id_at, rv_at) = (find(world::ID_PLACE)?, find(world::RV_PLACE)?);
        let body = world::body_len(&request);
        Ok(Prepared {
            object,
            request,
            id_at,
            rv_at,
            body,
        })
    }

    fn fill(&mut self, id: &str) {
        let rv = format!("{:015}", RESOURCE_VERSION.fetch_add(1, Ordering::Relaxed));
        self.request[self.id_at..self.id_at + id.len()].copy_from_slice(id.as_bytes());
        self.request[self.rv_at..self.rv_at + rv.len()].copy_from_slice(rv.as_bytes());
    }
}

fn prepare(object: usize, verb: &str, value: &Object) -> Result<Prepared> {
    let request = world::request(Mode::Binary, verb, value, world::ID_PLACE, world::RV_PLACE);
    Prepared::new(object, request)
}

/// A way to move an object one step: [`Object::status_step`] or [`Object::touch_step`].
type Stepper = fn(&mut Object, usize) -> world::Op;

/// A large-object class: name, what its updates change, its objects, the steps of its cycle and
/// how one step moves an object.
type Class = (&'static str, &'static str, Vec<Object>, usize, Stepper);

/// Updates of `objects` made by `stepper`: one cycle of `steps` run first (steady state), the
/// next kept, step by step across the objects (an object's events stay in order).
fn churn(objects: &mut [Object], steps: usize, stepper: Stepper) -> Result<Vec<Prepared>> {
    for step in 0..steps {
        for object in objects.iter_mut() {
            stepper(object, step);
        }
    }
    let mut out = Vec::with_capacity(objects.len() * steps);
    for step in 0..steps {
        for (index, object) in objects.iter_mut().enumerate() {
            stepper(object, step);
            out.push(prepare(index, "update", object)?);
        }
    }
    Ok(out)
}

/// One connection and the templates of the objects it owns, with its place among them (kept
/// across runs, so a warm-up and the measured run continue one sequence).
struct Lane {
    conn: Conn,
    templates: Vec<Prepared>,
    next: usize,
    rng: Rng,
}

impl Lane {
    fn send(&mut self, quota: u64, deadline: Instant) -> (Vec<u64>, u64, u64) {
        let (mut latencies, mut non_202, mut errors) = (Vec::new(), 0, 0);
        let count = self.templates.len();
        for _ in 0..quota {
            if Instant::now() >= deadline {
                break;
            }
            let id = self.rng.id();
            let template = &mut self.templates[self.next % count];
            self.next += 1;
            template.fill(&id);
            let sent = Instant::now();
            match self.conn.roundtrip(&template.request) {
                Ok((202, _)) => {}
                Ok(_) => non_202 += 1,
                Err(_) => errors += 1,
            }
            latencies.push(sent.elapsed().as_micros() as u64);
        }
        (latencies, non_202, errors)
    }
}

/// The closed-loop client: connection `c` of `C` owns the objects with `object % C == c`.
struct Lanes(Vec<Lane>);

#[derive(Debug, Default)]
struct Churn {
    requests: u64,
    non_202: u64,
    errors: u64,
    seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
}

impl Lanes {
    fn new(addr: SocketAddr, templates: &[Prepared], connections: usize) -> Lanes {
        let connections = connections.max(1);
        let mut lanes: Vec<Lane> = (0..connections)
            .map(|c| Lane {
                conn: Conn::new(addr),
                templates: Vec::new(),
                next: 0,
                rng: Rng::new(7_000 + c as u64),
            })
            .collect();
        for template in templates {
            lanes[template.object % connections]
                .templates
                .push(template.clone());
        }
        lanes.retain(|lane| !lane.templates.is_empty());
        Lanes(lanes)
    }

    /// Sends until `count` requests were answered or `limit` has passed, whichever comes first.
    fn run(&mut self, count: u64, limit: Duration) -> Churn {
        let lanes = self.0.len().max(1) as u64;
        let started = Instant::now();
        let deadline = started + limit;
        let results: Vec<(Vec<u64>, u64, u64)> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .0
                .iter_mut()
                .enumerate()
                .map(|(index, lane)| {
                    let quota = count / lanes + u64::from((index as u64) < count % lanes);
                    scope.spawn(move || lane.send(quota, deadline))
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|handle| handle.join().ok())
                .collect()
        });
        let seconds = started.elapsed().as_secs_f64();
        let mut all = Vec::new();
        let mut churn = Churn {
            seconds,
            ..Churn::default()
        };
        for (latencies, non_202, errors) in results {
            all.extend(latencies);
            churn.non_202 += non_202;
            churn.errors += errors;
        }
        all.sort_unstable();
        churn.requests = all.len() as u64;
        churn.p50_ms = percentile(&all, 50.0) as f64 / 1000.0;
        churn.p99_ms = percentile(&all, 99.0) as f64 / 1000.0;
        churn
    }
}

/// A run of `lanes` with the CPU time of process `pid` measured around it; with `sink`, the
/// outcomes, commits and drift transitions from its `/metrics` too.
fn measure(
    pid: u32,
    sink: Option<SocketAddr>,
    lanes: &mut Lanes,
    count: u64,
    limit: Duration,
) -> Result<Value> {
    let ticks = clock_ticks();
    let metrics_before = sink.map(scrape).unwrap_or_default();
    let load_before = loadavg();
    let cpu_before = cpu_ticks(pid)?;
    let churn = lanes.run(count, limit);
    let cpu = (cpu_ticks(pid)? - cpu_before) as f64 / ticks;
    let events = churn.requests.max(1) as f64;
    let mut out = json!({
        "events": churn.requests, "seconds": churn.seconds,
        "events_per_second": churn.requests as f64 / churn.seconds.max(1e-9),
        "cpu_seconds": cpu, "cpu_us_per_event": cpu * 1e6 / events,
        "cpu_cores": cpu / churn.seconds.max(1e-9),
        "non_202": churn.non_202, "errors": churn.errors,
        "p50_ms": churn.p50_ms, "p99_ms": churn.p99_ms,
        "load_before": load_before, "load_after": loadavg(),
    });
    if let Some(addr) = sink {
        let after = scrape(addr);
        let delta = |name: &str, label: Option<&str>| {
            metric(&after, name, label) - metric(&metrics_before, name, label)
        };
        let mut outcomes = json!({});
        for outcome in ["applied", "stale", "duplicate", "ignored"] {
            outcomes[outcome] = json!(delta(
                "drift_sentinel_events_total",
                Some(&format!("outcome=\"{outcome}\""))
            ));
        }
        out["outcomes"] = outcomes;
        out["commits_per_event"] =
            json!(delta("drift_sentinel_store_commits_total", None) / events);
        out["transitions_per_event"] =
            json!(delta("drift_sentinel_drift_transitions_total", None) / events);
        out["implausible_versions"] = json!(delta(
            "drift_sentinel_implausible_resource_versions_total",
            None
        ));
    }
    Ok(out)
}

fn mean_body(templates: &[Prepared]) -> f64 {
    templates.iter().map(|t| t.body as f64).sum::<f64>() / templates.len().max(1) as f64
}

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or(f64::NAN)
}

// ---------------------------------------------------------------------------------------------
// Flatness

/// For each world size: a fresh sink, that many distinct objects loaded (add events of whole
/// apps, as the memory phase loads them), then the same status-only churn of the first
/// `flat_churn_objects` of them for `flat_duration` seconds at saturation.
pub(crate) fn flatness(args: &RunArgs, fixtures: &Fixtures, receiver: SocketAddr) -> Result<Value> {
    let options = &args.phase;
    let churned = options.flat_churn_objects;
    if options.flat_sizes.iter().any(|&size| size < churned) {
        return Err(format!(
            "--flat-sizes must all be at least --flat-churn-objects ({churned})"
        ));
    }
    let mut objects: Vec<Object> = (0..churned.div_ceil(OBJECTS_PER_APP))
        .flat_map(|app| world::app(fixtures, FLAT_FIRST_APP + app))
        .take(churned)
        .collect();
    let templates = churn(&mut objects, STEPS, Object::status_step)?;
    let mut rows = Vec::new();
    // The first size once more at the end: the difference is the run's own drift.
    let again = options.flat_sizes.first().copied();
    for (round, &size) in options.flat_sizes.iter().chain(again.iter()).enumerate() {
        log(&format!("flatness: {size} objects"));
        let sink = start_sink(args, &format!("sink-flat-{size}"), args.port, receiver)?;
        let started = Instant::now();
        let (loaded, failed) = load_objects(
            sink.addr,
            fixtures,
            FLAT_FIRST_APP,
            size.div_ceil(OBJECTS_PER_APP),
            size,
            8,
        );
        let load_seconds = started.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_secs(1));
        let tracked = metric(&scrape(sink.addr), "drift_sentinel_tracked_objects", None);
        let rss = status_kib(sink.proc.pid(), "VmRSS");
        let mut lanes = Lanes::new(sink.addr, &templates, args.connections);
        lanes.run(u64::MAX, Duration::from_secs(3));
        let measured = measure(
            sink.proc.pid(),
            Some(sink.addr),
            &mut lanes,
            u64::MAX,
            Duration::from_secs(options.flat_duration),
        );
        sink.proc.stop(Duration::from_secs(25));
        let mut row = measured?;
        log(&format!(
            "flatness: {size} objects: {:.0} events/s, {:.0} µs of CPU per event",
            number(&row["events_per_second"]),
            number(&row["cpu_us_per_event"])
        ));
        row["world_objects"] = json!(size);
        row["tracked_objects"] = json!(tracked);
        row["rss_kib_loaded"] = json!(rss);
        row["load"] = json!({"seconds": load_seconds, "accepted": loaded, "failed": failed});
        row["repeat"] = json!(round == options.flat_sizes.len());
        rows.push(row);
    }
    let repeat = rows.pop();
    let costs: Vec<f64> = rows
        .iter()
        .map(|row| number(&row["cpu_us_per_event"]))
        .collect();
    let max = costs.iter().copied().fold(f64::MIN, f64::max);
    let min = costs.iter().copied().fold(f64::MAX, f64::min);
    Ok(json!({
        "churned_objects": churned,
        "events_per_cycle": templates.len(),
        "body_bytes_mean": mean_body(&templates),
        "connections": args.connections,
        "duration_seconds": options.flat_duration,
        "sizes": rows,
        "first_size_again": repeat,
        "cpu_us_per_event_max_over_min": max / min,
        "cpu_tick_seconds": 1.0 / clock_ticks(),
        "target": "per-event cost within 15 % across 1k, 10k and 100k tracked objects (max/min ≤ 1.15)",
    }))
}

// ---------------------------------------------------------------------------------------------
// Large objects

/// A fresh sink with `large_copies` each of a Route (the reference), the world's largest Pod
/// (twice: one set takes status-only updates of its script, the other no-change updates) and a
/// ConfigMap with `configmap_bytes` of `data` (no-change updates: it has no status); then
/// `large_events` updates of each class in turn, the Route again last (the run's drift). The same
/// requests to the bare ceiling give what receiving the bytes costs.
pub(crate) fn large_objects(
    args: &RunArgs,
    fixtures: &Fixtures,
    receiver: SocketAddr,
) -> Result<Value> {
    let options = &args.phase;
    let copies = options.large_copies.max(1);
    let connections = args.connections.min(copies);
    let mut world_largest_pod = 0;
    for app in 0..4 {
        world_largest_pod =
            world_largest_pod.max(prepare(0, "add", &world::app(fixtures, app)[6])?.body);
    }
    let apps = |first: usize, at: usize| -> Vec<Object> {
        (0..copies)
            .map(|copy| world::app(fixtures, first + 4 * copy).swap_remove(at))
            .collect()
    };
    let config_maps = (0..copies)
        .map(|copy| world::config_map(TOUCHED_FIRST_APP + 4 * copy, options.configmap_bytes))
        .collect();
    let status: Stepper = Object::status_step;
    let touch: Stepper = Object::touch_step;
    // (name, what changes, objects, steps of the cycle, how one step moves an object)
    let mut classes: Vec<Class> = vec![
        (
            "Route",
            "status: conditions' times",
            apps(LARGE_FIRST_APP, 2),
            STEPS,
            status,
        ),
        (
            "Pod",
            "status: conditions' times, restartCount every fifth step",
            apps(LARGE_FIRST_APP, 6),
            STEPS,
            status,
        ),
        (
            "Pod, no change",
            "only kubelet's managedFields time",
            apps(TOUCHED_FIRST_APP, 6),
            TOUCH_STEPS,
            touch,
        ),
        (
            "ConfigMap",
            "only Argo CD's managedFields time",
            config_maps,
            TOUCH_STEPS,
            touch,
        ),
    ];
    let mut adds = Vec::new();
    let mut updates = Vec::new();
    for (_, _, objects, steps, stepper) in &mut classes {
        adds.push(
            objects
                .iter()
                .enumerate()
                .map(|(index, object)| prepare(index, "add", object))
                .collect::<Result<Vec<_>>>()?,
        );
        updates.push(churn(objects, *steps, *stepper)?);
    }

    log("large objects: drift-sentinel");
    let sink = start_sink(args, "sink-large", args.port, receiver)?;
    let measured = large_on_sink(&sink, &classes, &adds, &updates, connections, options);
    sink.proc.stop(Duration::from_secs(25));
    let (state_bytes, sink_runs) = measured?;
    let last = classes.len();

    log("large objects: ceiling");
    let (ceiling, ceiling_addr) = start_ceiling(args, args.port + 1)?;
    let mut ceiling_runs = Vec::new();
    for update in &updates {
        let mut lanes = Lanes::new(ceiling_addr, update, connections);
        lanes.run(2 * copies as u64, LIMIT);
        match measure(ceiling.pid(), None, &mut lanes, options.large_events, LIMIT) {
            Ok(run) => ceiling_runs.push(run),
            Err(error) => {
                ceiling.stop(Duration::from_secs(5));
                return Err(error);
            }
        }
    }
    ceiling.stop(Duration::from_secs(5));

    let reference_cpu = (number(&sink_runs[0]["cpu_us_per_event"])
        + number(&sink_runs[last]["cpu_us_per_event"]))
        / 2.0;
    let reference_body = mean_body(&updates[0]);
    let mut rows = Vec::new();
    for (class, (kind, change, _, steps, _)) in classes.iter().enumerate() {
        let body = mean_body(&updates[class]);
        let cpu = if class == 0 {
            reference_cpu
        } else {
            number(&sink_runs[class]["cpu_us_per_event"])
        };
        let ceiling_cpu = number(&ceiling_runs[class]["cpu_us_per_event"]);
        rows.push(json!({
            "kind": kind,
            "change": format!("resourceVersion and {change}"),
            "cycle_steps": steps,
            "body_bytes": body,
            "state_bytes_per_object": state_bytes[class],
            "size_ratio_to_reference": body / reference_body,
            "cpu_us_per_event": cpu,
            "cpu_ratio_to_reference": cpu / reference_cpu,
            "cpu_us_per_kib_above_reference": if class == 0 { Value::Null } else {
                json!((cpu - reference_cpu) / ((body - reference_body) / 1024.0)) },
            "ceiling_cpu_us_per_event": ceiling_cpu,
            "sink_minus_ceiling_us": cpu - ceiling_cpu,
            "sink": sink_runs[class],
            "ceiling": ceiling_runs[class],
        }));
    }
    rows[0]["sink_again_last"] = sink_runs[last].clone();
    Ok(json!({
        "copies_per_class": copies,
        "connections": connections,
        "events_per_class": options.large_events,
        "world_largest_pod_body_bytes": world_largest_pod,
        "cpu_tick_seconds": 1.0 / clock_ticks(),
        "classes": rows,
        "target": "a 19 KB Pod and a 200 KB ConfigMap cost in proportion to what changed, not to their size, when only status churns",
    }))
}

/// On the sink: each class's adds (its state bytes per object from the metrics), then each
/// class's updates, a warm-up and `large_events` measured, the Route again last.
fn large_on_sink(
    sink: &Sink,
    classes: &[Class],
    adds: &[Vec<Prepared>],
    updates: &[Vec<Prepared>],
    connections: usize,
    options: &PhaseArgs,
) -> Result<(Vec<f64>, Vec<Value>)> {
    let state_bytes = || {
        metric(
            &scrape(sink.addr),
            "drift_sentinel_tracked_state_bytes",
            None,
        )
    };
    let mut per_object = Vec::new();
    for add in adds {
        let before = state_bytes();
        let answer = Lanes::new(sink.addr, add, connections).run(add.len() as u64, LIMIT);
        if answer.non_202 + answer.errors > 0 {
            return Err("large objects: an add event was not accepted".into());
        }
        std::thread::sleep(Duration::from_millis(300));
        per_object.push((state_bytes() - before) / add.len() as f64);
    }
    let mut lanes: Vec<Lanes> = updates
        .iter()
        .map(|update| Lanes::new(sink.addr, update, connections))
        .collect();
    let mut runs = Vec::new();
    // The Route first and last: the difference is the run's own drift.
    for class in (0..classes.len()).chain([0]) {
        let warm_up = 2 * classes[class].2.len() as u64;
        lanes[class].run(warm_up, LIMIT);
        let run = measure(
            sink.proc.pid(),
            Some(sink.addr),
            &mut lanes[class],
            options.large_events,
            LIMIT,
        )?;
        log(&format!(
            "large objects: {}: {:.0} µs of CPU per event",
            classes[class].0,
            number(&run["cpu_us_per_event"])
        ));
        runs.push(run);
    }
    Ok((per_object, runs))
}

// ---------------------------------------------------------------------------------------------
// Report

/// The two phases' tables, each present only when its phase ran.
pub(crate) fn markdown(report: &Value) -> String {
    let mut out = String::new();
    let flat = &report["flatness"];
    if let Some(sizes) = flat["sizes"].as_array() {
        out.push_str(&format!(
            "\nFlatness: status-only churn of the same {} objects ({} events per cycle, mean body {:.0} B), {} connections, {} s per size after 3 s of warm-up; a fresh sink per size.\n\n",
            flat["churned_objects"], flat["events_per_cycle"], number(&flat["body_bytes_mean"]),
            flat["connections"], flat["duration_seconds"]
        ));
        out.push_str("| tracked objects | events/s | CPU µs per event | cores | p50 / p99 ms | commits per event | applied / stale / duplicate | RSS loaded | load avg before → after |\n|---|---|---|---|---|---|---|---|---|\n");
        for row in sizes {
            out.push_str(&format!(
                "| {:.0} | {:.0} | {:.0} | {:.2} | {:.1} / {:.1} | {:.3} | {:.0} / {:.0} / {:.0} | {:.0} MiB | {} → {} |\n",
                number(&row["tracked_objects"]),
                number(&row["events_per_second"]),
                number(&row["cpu_us_per_event"]),
                number(&row["cpu_cores"]),
                number(&row["p50_ms"]),
                number(&row["p99_ms"]),
                number(&row["commits_per_event"]),
                number(&row["outcomes"]["applied"]),
                number(&row["outcomes"]["stale"]),
                number(&row["outcomes"]["duplicate"]),
                number(&row["rss_kib_loaded"]) / 1024.0,
                row["load_before"].as_str().unwrap_or_default(),
                row["load_after"].as_str().unwrap_or_default(),
            ));
        }
        let ratio = number(&flat["cpu_us_per_event_max_over_min"]);
        out.push_str(&format!(
            "\n| measure | value | target |\n|---|---|---|\n| CPU µs per event, max / min over the sizes | **{ratio:.2}** | ≤ 1.15 ({}) |\n",
            if ratio <= 1.15 { "met" } else { "not met" }
        ));
        let again = &flat["first_size_again"];
        if again.is_object() {
            out.push_str(&format!(
                "| … the first size again, last (the run's drift) | {:.0} µs per event, {:.0} events/s | |\n",
                number(&again["cpu_us_per_event"]),
                number(&again["events_per_second"])
            ));
        }
    }
    let large = &report["large_objects"];
    if let Some(classes) = large["classes"].as_array() {
        out.push_str(&format!(
            "\nLarge objects: {} events of each class over {} objects of it ({} connections), status-only or no-change updates; the Route is the reference, measured first and last. The world's largest Pod is {} B.\n\n",
            large["events_per_class"], large["copies_per_class"], large["connections"],
            large["world_largest_pod_body_bytes"]
        ));
        out.push_str("| object | what changes | body bytes | × Route | sink CPU µs per event | × Route | µs per KiB above the Route | ceiling CPU µs per event | sink − ceiling µs | events/s | commits per event |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
        for row in classes {
            out.push_str(&format!(
                "| {} | {} | {:.0} | {:.1} | {:.0} | {:.2} | {} | {:.0} | {:.0} | {:.0} | {:.3} |\n",
                row["kind"].as_str().unwrap_or_default(),
                row["change"].as_str().unwrap_or_default(),
                number(&row["body_bytes"]),
                number(&row["size_ratio_to_reference"]),
                number(&row["cpu_us_per_event"]),
                number(&row["cpu_ratio_to_reference"]),
                row["cpu_us_per_kib_above_reference"]
                    .as_f64()
                    .map_or("—".to_string(), |v| format!("{v:.1}")),
                number(&row["ceiling_cpu_us_per_event"]),
                number(&row["sink_minus_ceiling_us"]),
                number(&row["sink"]["events_per_second"]),
                number(&row["sink"]["commits_per_event"]),
            ));
        }
        if let Some(route) = classes.first() {
            out.push_str(&format!(
                "\nRoute first / last: {:.0} / {:.0} µs per event (the run's drift). Target: cost in proportion to what changed, not to size: the figure beside it is the ratio to the Route against the size ratio.\n",
                number(&route["sink"]["cpu_us_per_event"]),
                number(&route["sink_again_last"]["cpu_us_per_event"]),
            ));
        }
    }
    out
}
