//! Issue 28's two cost figures as phases of `bench-loadgen run`: CPU per event as the world grows
//! (`flatness`: 1,000, 10,000 and 100,000 tracked objects, the same status churn on the same 800
//! of them) and status churn on large objects (`large`: the world's largest Pod, a ConfigMap with
//! about 200 KB of `data`, a Route as the small reference). Benchmark-only code.
//!
//! Both drive the sink with the driver's own closed-loop client ([`Lanes`]): each connection owns
//! a fixed set of objects and sends their events in order, one request at a time, each with a
//! fresh CloudEvent id, the moment it is sent as its CloudEvent `time` and a `resourceVersion`
//! drawn from one counter of the whole run, so every event is newer than its object's last and
//! none is implausibly far ahead of the cluster's newest (no duplicate, stale or implausible
//! event; the report counts outcomes to show it). CPU per event is the server's utime+stime
//! (`/proc/<pid>/stat`) over a run divided by its events.
//!
//! What is compared (world sizes, object classes) is measured in interleaved rounds, each round
//! taking the candidates in a rotated order, so a change of the shared machine's background load
//! during the phase falls on all of them alike; each figure is the sum over its rounds, and the
//! spread of the rounds is reported beside it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::client::{Clock, Conn, Rng};
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
/// Flatness: port offsets from --port of the sinks (--port + 1 is the ceiling's, + 9 the
/// webhook receiver's).
const FLAT_PORTS: [u16; 8] = [0, 2, 3, 4, 5, 6, 7, 8];

/// The options of the two phases (part of `run`'s arguments).
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct PhaseArgs {
    /// Flatness: world sizes (distinct tracked objects), a fresh sink for each (at most 8; all
    /// run at once on consecutive ports from --port, skipping --port + 1).
    #[arg(long, value_delimiter = ',', default_values_t = [1_000usize, 10_000, 100_000])]
    pub(crate) flat_sizes: Vec<usize>,
    /// Flatness: objects whose status churns (the first ones loaded, the same at every size).
    #[arg(long, default_value_t = 800)]
    pub(crate) flat_churn_objects: usize,
    /// Flatness: measured seconds per size, split into the rounds (each after 1 s of warm-up).
    #[arg(long, default_value_t = 15)]
    pub(crate) flat_duration: u64,
    /// Rounds of both phases: each round measures every size (class) once, in a rotated order.
    #[arg(long, default_value_t = 5)]
    pub(crate) rounds: u32,
    /// Large objects: measured events of each object class, split into the rounds.
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
    time_at: usize,
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
        let (id_at, time_at, rv_at) = (
            find(world::ID_PLACE)?,
            find(world::TIME_PLACE)?,
            find(world::RV_PLACE)?,
        );
        let body = world::body_len(&request);
        Ok(Prepared {
            object,
            request,
            id_at,
            time_at,
            rv_at,
            body,
        })
    }

    fn fill(&mut self, id: &str, time: &str) {
        let rv = format!("{:015}", RESOURCE_VERSION.fetch_add(1, Ordering::Relaxed));
        self.request[self.id_at..self.id_at + id.len()].copy_from_slice(id.as_bytes());
        self.request[self.time_at..self.time_at + time.len()].copy_from_slice(time.as_bytes());
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
    clock: Clock,
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
            template.fill(&id, self.clock.now());
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

impl Lanes {
    fn new(addr: SocketAddr, templates: &[Prepared], connections: usize) -> Lanes {
        let connections = connections.max(1);
        let mut lanes: Vec<Lane> = (0..connections)
            .map(|c| Lane {
                conn: Conn::new(addr),
                templates: Vec::new(),
                next: 0,
                rng: Rng::new(7_000 + c as u64),
                clock: Clock::new(),
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
    fn run(&mut self, count: u64, limit: Duration) -> Sample {
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
        let mut sample = Sample {
            seconds: started.elapsed().as_secs_f64(),
            ..Sample::default()
        };
        for (latencies, non_202, errors) in results {
            sample.latencies_us.extend(latencies);
            sample.non_202 += non_202;
            sample.errors += errors;
        }
        sample.events = sample.latencies_us.len() as u64;
        sample
    }
}

/// What one or more measured runs against one server gave (summed over rounds by [`Sample::add`]).
#[derive(Debug, Default)]
struct Sample {
    events: u64,
    seconds: f64,
    cpu_seconds: f64,
    non_202: u64,
    errors: u64,
    latencies_us: Vec<u64>,
    /// Deltas of the sink's counters, by metric (and label), when it was a sink.
    metrics: Option<[f64; 7]>,
    /// CPU µs per event of each round.
    rounds: Vec<f64>,
    load_before: String,
    load_after: String,
}

/// The counters [`Sample::metrics`] holds, as (metric, label).
const COUNTERS: [(&str, Option<&str>); 7] = [
    ("drift_sentinel_events_total", Some("outcome=\"applied\"")),
    ("drift_sentinel_events_total", Some("outcome=\"stale\"")),
    ("drift_sentinel_events_total", Some("outcome=\"duplicate\"")),
    ("drift_sentinel_events_total", Some("outcome=\"ignored\"")),
    ("drift_sentinel_store_commits_total", None),
    ("drift_sentinel_drift_transitions_total", None),
    ("drift_sentinel_implausible_resource_versions_total", None),
];

impl Sample {
    fn cpu_us_per_event(&self) -> f64 {
        self.cpu_seconds * 1e6 / self.events.max(1) as f64
    }

    /// Adds a later round's sample.
    fn add(&mut self, round: Sample) {
        if self.rounds.is_empty() {
            self.load_before = round.load_before.clone();
        }
        self.rounds.push(round.cpu_us_per_event());
        self.events += round.events;
        self.seconds += round.seconds;
        self.cpu_seconds += round.cpu_seconds;
        self.non_202 += round.non_202;
        self.errors += round.errors;
        self.latencies_us.extend(round.latencies_us);
        self.metrics = match (self.metrics, round.metrics) {
            (Some(mut sum), Some(more)) => {
                for (total, value) in sum.iter_mut().zip(more) {
                    *total += value;
                }
                Some(sum)
            }
            (None, more) => more,
            (sum, None) => sum,
        };
        self.load_after = round.load_after;
    }

    fn json(&mut self) -> Value {
        self.latencies_us.sort_unstable();
        let ms = |p: f64| percentile(&self.latencies_us, p) as f64 / 1000.0;
        let events = self.events.max(1) as f64;
        let spread =
            |pick: fn(f64, f64) -> f64, start: f64| self.rounds.iter().copied().fold(start, pick);
        let mut out = json!({
            "events": self.events, "seconds": self.seconds,
            "events_per_second": self.events as f64 / self.seconds.max(1e-9),
            "cpu_seconds": self.cpu_seconds, "cpu_us_per_event": self.cpu_us_per_event(),
            "cpu_cores": self.cpu_seconds / self.seconds.max(1e-9),
            "rounds_cpu_us_per_event": self.rounds,
            "rounds_min_cpu_us_per_event": spread(f64::min, f64::MAX),
            "rounds_max_cpu_us_per_event": spread(f64::max, f64::MIN),
            "non_202": self.non_202, "errors": self.errors,
            "p50_ms": ms(50.0), "p99_ms": ms(99.0),
            "load_before": self.load_before, "load_after": self.load_after,
        });
        if let Some(metrics) = self.metrics {
            out["outcomes"] = json!({"applied": metrics[0], "stale": metrics[1],
                "duplicate": metrics[2], "ignored": metrics[3]});
            out["commits_per_event"] = json!(metrics[4] / events);
            out["transitions_per_event"] = json!(metrics[5] / events);
            out["implausible_versions"] = json!(metrics[6]);
        }
        out
    }
}

/// A run of `lanes` with the CPU time of process `pid` measured around it; with `sink`, the
/// deltas of its counters ([`COUNTERS`]) from its `/metrics` too.
fn measure(
    pid: u32,
    sink: Option<SocketAddr>,
    lanes: &mut Lanes,
    count: u64,
    limit: Duration,
) -> Result<Sample> {
    let ticks = clock_ticks();
    let metrics_before = sink.map(scrape).unwrap_or_default();
    let load_before = loadavg();
    let cpu_before = cpu_ticks(pid)?;
    let mut sample = lanes.run(count, limit);
    sample.cpu_seconds = (cpu_ticks(pid)? - cpu_before) as f64 / ticks;
    sample.load_before = load_before;
    sample.load_after = loadavg();
    if let Some(addr) = sink {
        let after = scrape(addr);
        let mut deltas = [0.0; 7];
        for (delta, (name, label)) in deltas.iter_mut().zip(COUNTERS) {
            *delta = metric(&after, name, label) - metric(&metrics_before, name, label);
        }
        sample.metrics = Some(deltas);
    }
    Ok(sample)
}

fn mean_body(templates: &[Prepared]) -> f64 {
    templates.iter().map(|t| t.body as f64).sum::<f64>() / templates.len().max(1) as f64
}

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or(f64::NAN)
}

/// Round `round`'s order of `count` candidates: all of them, starting at `round % count`.
fn rotated(round: u32, count: usize) -> impl Iterator<Item = usize> {
    (0..count).map(move |at| (round as usize + at) % count.max(1))
}

// ---------------------------------------------------------------------------------------------
// Flatness

/// One world size's sink, loaded.
struct World {
    size: usize,
    sink: Sink,
    lanes: Lanes,
    facts: Value,
    sample: Sample,
}

/// For each world size: a fresh sink (all of them at once, on their own ports), that many
/// distinct objects loaded (add events of whole apps, as the memory phase loads them), 3 s of the
/// churn as warm-up; then `rounds` rounds, each giving every size 1 s of warm-up and
/// `flat_duration / rounds` seconds measured of the same status-only churn of the first
/// `flat_churn_objects` objects at saturation.
pub(crate) fn flatness(args: &RunArgs, fixtures: &Fixtures, receiver: SocketAddr) -> Result<Value> {
    let options = &args.phase;
    let churned = options.flat_churn_objects;
    if options.flat_sizes.iter().any(|&size| size < churned) {
        return Err(format!(
            "--flat-sizes must all be at least --flat-churn-objects ({churned})"
        ));
    }
    if options.flat_sizes.len() > FLAT_PORTS.len() {
        return Err(format!("at most {} --flat-sizes", FLAT_PORTS.len()));
    }
    let mut objects: Vec<Object> = (0..churned.div_ceil(OBJECTS_PER_APP))
        .flat_map(|app| world::app(fixtures, FLAT_FIRST_APP + app))
        .take(churned)
        .collect();
    let templates = churn(&mut objects, STEPS, Object::status_step)?;
    let mut worlds = Vec::new();
    let measured = flatness_rounds(args, fixtures, receiver, &templates, &mut worlds);
    for world in worlds.drain(..) {
        world.sink.proc.stop(Duration::from_secs(25));
    }
    let mut rows = measured?;
    let costs: Vec<f64> = rows
        .iter()
        .map(|row| number(&row["cpu_us_per_event"]))
        .collect();
    let max = costs.iter().copied().fold(f64::MIN, f64::max);
    let min = costs.iter().copied().fold(f64::MAX, f64::min);
    for row in &mut rows {
        row["cpu_ratio_to_min"] = json!(number(&row["cpu_us_per_event"]) / min);
    }
    Ok(json!({
        "churned_objects": churned,
        "events_per_cycle": templates.len(),
        "body_bytes_mean": mean_body(&templates),
        "connections": args.connections,
        "duration_seconds": options.flat_duration,
        "rounds": options.rounds,
        "sizes": rows,
        "cpu_us_per_event_max_over_min": max / min,
        "cpu_tick_seconds": 1.0 / clock_ticks(),
        "target": "per-event cost within 15 % across 1k, 10k and 100k tracked objects (max/min ≤ 1.15)",
    }))
}

/// Starts and loads every size's sink into `worlds` (the caller stops them), then measures.
fn flatness_rounds(
    args: &RunArgs,
    fixtures: &Fixtures,
    receiver: SocketAddr,
    templates: &[Prepared],
    worlds: &mut Vec<World>,
) -> Result<Vec<Value>> {
    let options = &args.phase;
    for (&size, offset) in options.flat_sizes.iter().zip(FLAT_PORTS) {
        log(&format!("flatness: loading {size} objects"));
        let sink = start_sink(
            args,
            &format!("sink-flat-{size}"),
            args.port + offset,
            receiver,
        )?;
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
        let facts = json!({
            "world_objects": size, "tracked_objects": tracked,
            "rss_kib_loaded": status_kib(sink.proc.pid(), "VmRSS"),
            "load": {"seconds": load_seconds, "accepted": loaded, "failed": failed},
        });
        let mut lanes = Lanes::new(sink.addr, templates, args.connections);
        lanes.run(u64::MAX, Duration::from_secs(3));
        worlds.push(World {
            size,
            sink,
            lanes,
            facts,
            sample: Sample::default(),
        });
    }
    let rounds = options.rounds.max(1);
    let slice = Duration::from_secs_f64(options.flat_duration as f64 / f64::from(rounds));
    for round in 0..rounds {
        for at in rotated(round, worlds.len()) {
            let world = &mut worlds[at];
            world.lanes.run(u64::MAX, Duration::from_secs(1));
            let sample = measure(
                world.sink.proc.pid(),
                Some(world.sink.addr),
                &mut world.lanes,
                u64::MAX,
                slice,
            )?;
            log(&format!(
                "flatness: round {round}, {} objects: {:.0} µs of CPU per event",
                world.size,
                sample.cpu_us_per_event()
            ));
            world.sample.add(sample);
        }
    }
    Ok(worlds
        .iter_mut()
        .map(|world| {
            let mut row = world.sample.json();
            if let (Some(row), Some(facts)) = (row.as_object_mut(), world.facts.as_object()) {
                row.extend(facts.clone());
            }
            row
        })
        .collect())
}

// ---------------------------------------------------------------------------------------------
// Large objects

/// A fresh sink with `large_copies` each of a Route (the reference), the world's largest Pod
/// (twice: one set takes status-only updates of its script, the other no-change updates) and a
/// ConfigMap with `configmap_bytes` of `data` (no-change updates: it has no status); then
/// `large_events` updates of each class in interleaved rounds. The same requests to the bare
/// ceiling, in the same rounds, give what receiving the bytes costs.
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
    let state_bytes = large_adds(&sink, &adds, connections);
    let measured = state_bytes.and_then(|state_bytes| {
        let lanes = updates
            .iter()
            .map(|update| Lanes::new(sink.addr, update, connections))
            .collect();
        large_rounds(&sink.proc, Some(sink.addr), lanes, &classes, options)
            .map(|samples| (state_bytes, samples))
    });
    sink.proc.stop(Duration::from_secs(25));
    let (state_bytes, mut sink_samples) = measured?;

    log("large objects: ceiling");
    let (ceiling, ceiling_addr) = start_ceiling(args, args.port + 1, false)?;
    let lanes = updates
        .iter()
        .map(|update| Lanes::new(ceiling_addr, update, connections))
        .collect();
    let measured = large_rounds(&ceiling, None, lanes, &classes, options);
    ceiling.stop(Duration::from_secs(5));
    let mut ceiling_samples = measured?;

    let reference_cpu = sink_samples[0].cpu_us_per_event();
    let reference_body = mean_body(&updates[0]);
    let mut rows = Vec::new();
    for (class, (kind, change, _, steps, _)) in classes.iter().enumerate() {
        let body = mean_body(&updates[class]);
        let cpu = sink_samples[class].cpu_us_per_event();
        let ceiling_cpu = ceiling_samples[class].cpu_us_per_event();
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
            "sink": sink_samples[class].json(),
            "ceiling": ceiling_samples[class].json(),
        }));
    }
    Ok(json!({
        "copies_per_class": copies,
        "connections": connections,
        "events_per_class": options.large_events,
        "rounds": options.rounds,
        "world_largest_pod_body_bytes": world_largest_pod,
        "cpu_tick_seconds": 1.0 / clock_ticks(),
        "classes": rows,
        "target": "a 19 KB Pod and a 200 KB ConfigMap cost in proportion to what changed, not to their size, when only status churns",
    }))
}

/// Each class's adds; its state bytes per object from the sink's metrics.
fn large_adds(sink: &Sink, adds: &[Vec<Prepared>], connections: usize) -> Result<Vec<f64>> {
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
    Ok(per_object)
}

/// Each class's warm-up (two events per object), then `rounds` rounds of `large_events / rounds`
/// measured events of every class, in a rotated order.
fn large_rounds(
    server: &crate::Proc,
    sink: Option<SocketAddr>,
    mut lanes: Vec<Lanes>,
    classes: &[Class],
    options: &PhaseArgs,
) -> Result<Vec<Sample>> {
    for (lanes, class) in lanes.iter_mut().zip(classes) {
        lanes.run(2 * class.2.len() as u64, LIMIT);
    }
    let rounds = options.rounds.max(1);
    let mut samples: Vec<Sample> = classes.iter().map(|_| Sample::default()).collect();
    for round in 0..rounds {
        for class in rotated(round, classes.len()) {
            let count = options.large_events / u64::from(rounds)
                + u64::from(u64::from(round) < options.large_events % u64::from(rounds));
            let sample = measure(server.pid(), sink, &mut lanes[class], count, LIMIT)?;
            if sink.is_some() {
                log(&format!(
                    "large objects: round {round}, {}: {:.0} µs of CPU per event",
                    classes[class].0,
                    sample.cpu_us_per_event()
                ));
            }
            samples[class].add(sample);
        }
    }
    Ok(samples)
}

// ---------------------------------------------------------------------------------------------
// Report

/// The two phases' tables, each present only when its phase ran.
pub(crate) fn markdown(report: &Value) -> String {
    let mut out = String::new();
    let flat = &report["flatness"];
    if let Some(sizes) = flat["sizes"].as_array() {
        out.push_str(&format!(
            "\nFlatness: status-only churn of the same {} objects ({} events per cycle, mean body {:.0} B), {} connections, {} s per size in {} interleaved rounds (each after 1 s of warm-up); a fresh sink per size.\n\n",
            flat["churned_objects"], flat["events_per_cycle"], number(&flat["body_bytes_mean"]),
            flat["connections"], flat["duration_seconds"], flat["rounds"]
        ));
        out.push_str("| tracked objects | events/s | CPU µs per event | × the least | rounds, min–max µs | cores | p50 / p99 ms | commits per event | applied / stale / duplicate | RSS loaded |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for row in sizes {
            out.push_str(&format!(
                "| {:.0} | {:.0} | {:.0} | {:.2} | {:.0}–{:.0} | {:.2} | {:.1} / {:.1} | {:.3} | {:.0} / {:.0} / {:.0} | {:.0} MiB |\n",
                number(&row["tracked_objects"]),
                number(&row["events_per_second"]),
                number(&row["cpu_us_per_event"]),
                number(&row["cpu_ratio_to_min"]),
                number(&row["rounds_min_cpu_us_per_event"]),
                number(&row["rounds_max_cpu_us_per_event"]),
                number(&row["cpu_cores"]),
                number(&row["p50_ms"]),
                number(&row["p99_ms"]),
                number(&row["commits_per_event"]),
                number(&row["outcomes"]["applied"]),
                number(&row["outcomes"]["stale"]),
                number(&row["outcomes"]["duplicate"]),
                number(&row["rss_kib_loaded"]) / 1024.0,
            ));
        }
        let ratio = number(&flat["cpu_us_per_event_max_over_min"]);
        out.push_str(&format!(
            "\n| measure | value | target |\n|---|---|---|\n| CPU µs per event, max / min over the sizes | **{ratio:.2}** | ≤ 1.15 ({}) |\n",
            if ratio <= 1.15 { "met" } else { "not met" }
        ));
    }
    let large = &report["large_objects"];
    if let Some(classes) = large["classes"].as_array() {
        out.push_str(&format!(
            "\nLarge objects: {} events of each class over {} objects of it ({} connections) in {} interleaved rounds; the Route is the reference. The world's largest Pod is {} B. Target: cost in proportion to what changed, not to size (compare the two × Route columns).\n\n",
            large["events_per_class"], large["copies_per_class"], large["connections"],
            large["rounds"], large["world_largest_pod_body_bytes"]
        ));
        out.push_str("| object | what changes | body bytes | × Route | sink CPU µs per event | × Route | rounds, min–max µs | µs per KiB above the Route | ceiling CPU µs per event | sink − ceiling µs | events/s | commits per event |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for row in classes {
            out.push_str(&format!(
                "| {} | {} | {:.0} | {:.1} | {:.0} | {:.2} | {:.0}–{:.0} | {} | {:.0} | {:.0} | {:.0} | {:.3} |\n",
                row["kind"].as_str().unwrap_or_default(),
                row["change"].as_str().unwrap_or_default(),
                number(&row["body_bytes"]),
                number(&row["size_ratio_to_reference"]),
                number(&row["cpu_us_per_event"]),
                number(&row["cpu_ratio_to_reference"]),
                number(&row["sink"]["rounds_min_cpu_us_per_event"]),
                number(&row["sink"]["rounds_max_cpu_us_per_event"]),
                row["cpu_us_per_kib_above_reference"]
                    .as_f64()
                    .map_or("—".to_string(), |v| format!("{v:.1}")),
                number(&row["ceiling_cpu_us_per_event"]),
                number(&row["sink_minus_ceiling_us"]),
                number(&row["sink"]["events_per_second"]),
                number(&row["sink"]["commits_per_event"]),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prepared_request_is_filled_in_place_with_the_time_it_is_sent() {
        let fixtures = Fixtures::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|error| panic!("fixtures: {error}"));
        let mut prepared = match prepare(0, "update", &world::app(&fixtures, 0)[6]) {
            Ok(prepared) => prepared,
            Err(error) => panic!("{error}"),
        };
        let length = prepared.request.len();
        let mut clock = Clock::new();
        for id in [
            "0badcafe-0000-4000-a000-000000000001",
            "0badcafe-0000-4000-a000-000000000002",
        ] {
            let time = clock.now().to_string();
            prepared.fill(id, &time);
            let text = String::from_utf8_lossy(&prepared.request).to_string();
            assert_eq!(prepared.request.len(), length);
            assert!(text.contains(&format!("\r\nce-id: {id}\r\n")));
            assert!(text.contains(&format!("\r\nce-time: {time}\r\n")));
            assert!(!text.contains(world::TIME_PLACE) && !text.contains(world::RV_PLACE));
            assert!(text.contains(&format!("Content-Length: {}\r\n", prepared.body)));
            assert_eq!(world::body_len(&prepared.request), prepared.body);
        }
    }
}
