//! Micro-benchmarks of the per-event work, stage by stage (BENCHMARKS.md, "Stages and their
//! budgets"), on the same real-shaped ApiServerSource events `bench/run.sh` sends (built from
//! `tests/fixtures/knative/` by `bench/loadgen/world.rs`):
//!
//! * `decode`: an HTTP request's headers and body to an event (binary and structured mode);
//! * `apply`: `Engine::apply` alone (begin, apply, commit of the journal), the engine's state
//!   update and the classes' verdicts, without taking the round's changes;
//! * `classify`: the same plus what the writer takes of the round's changes for the store
//!   (`Engine::staged`, the drifts, moves and history copied; the objects are encoded from the
//!   engine's state, which `commit` measures), and with the ten shipped invariants
//!   (`classify_invariants`);
//! * `diff`: the spec diff behind a finding;
//! * `route`: the writer's routing of transitions to outbox rows (`route::Router` and the rows'
//!   ids) over every transition two cycles of the world make;
//! * `commit`: one writer round's batch (about 40 events) committed to a SQLite file, as the
//!   service opens it (WAL, `synchronous=FULL`), in `target/tmp`.
//!
//! Each stage's function names its budget: a split of the end-to-end target (half the bare
//! ceiling, about 55 µs of CPU per event in all), explained in BENCHMARKS.md.
//!
//! Run: `cargo bench --bench pipeline` (not part of `cargo test`'s default run); one stage:
//! `cargo bench --bench pipeline -- commit`; each benchmark once: `-- --test`.

#[path = "../bench/loadgen/world.rs"]
#[allow(dead_code)]
mod world;
#[path = "pipeline/writer.rs"]
mod writer;

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use drift_core::classify::{Engine, ObjectState, Rules};
use drift_core::decode::{decode_request, ApiServerEvent, ClusterNames, Decoded};

use world::{Fixtures, Mode, Object};

fn fixtures() -> Fixtures {
    match Fixtures::load(Path::new(env!("CARGO_MANIFEST_DIR"))) {
        Ok(fixtures) => fixtures,
        Err(error) => panic!("fixtures: {error}"),
    }
}

/// Splits a raw HTTP/1.1 request into its headers and body.
fn split(request: &[u8]) -> (http::HeaderMap, Vec<u8>) {
    let at = request
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or(request.len());
    let head = String::from_utf8_lossy(&request[..at]);
    let mut headers = http::HeaderMap::new();
    for line in head.lines().skip(1) {
        if let Some((name, value)) = line.split_once(':') {
            if let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(name.trim().as_bytes()),
                http::HeaderValue::from_str(value.trim()),
            ) {
                headers.insert(name, value);
            }
        }
    }
    (headers, request[(at + 4).min(request.len())..].to_vec())
}

fn http_request(mode: Mode, verb: &str, object: &Object, rv: u64) -> (http::HeaderMap, Vec<u8>) {
    let template = world::request(mode, verb, object, world::ID_PLACE, world::RV_PLACE);
    let mut filled = Vec::new();
    let id = format!("00000000-0000-4000-a000-{rv:012}");
    world::fill(&template, &id, &format!("{rv:015}"), &mut filled);
    split(&filled)
}

fn decoded(mode: Mode, verb: &str, object: &Object, rv: u64) -> ApiServerEvent {
    let (headers, body) = http_request(mode, verb, object, rv);
    decode_one(&headers, &body)
}

fn decode_one(headers: &http::HeaderMap, body: &[u8]) -> ApiServerEvent {
    match decode_request(headers, body, &clusters()).map(|mut events| events.remove(0)) {
        Ok(Decoded::ApiServer(event)) => *event,
        other => panic!("not an ApiServerSource event: {other:?}"),
    }
}

fn clusters() -> ClusterNames {
    ClusterNames {
        default: "bench".into(),
        by_source: Default::default(),
    }
}

fn rules() -> Arc<Rules> {
    let config = match drift_core::config::load_str("", &|_| None) {
        Ok(config) => config,
        Err(error) => panic!("config: {error}"),
    };
    Arc::new(config.rules.compile())
}

/// The default rules with the ten shipped team invariants (`examples/invariants/knative.yaml`).
fn rules_with_invariants() -> Arc<Rules> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/invariants/knative.yaml");
    let invariants = match drift_core::config::load_rules_file(&path) {
        Ok(invariants) => invariants,
        Err(error) => panic!("invariants: {error}"),
    };
    let rules = match Arc::try_unwrap(rules()) {
        Ok(rules) => rules,
        Err(_) => panic!("rules are shared"),
    };
    Arc::new(rules.with_invariants(invariants))
}

/// The states one object goes through in its 20-step script (second cycle, steady state).
fn states(mut object: Object) -> Vec<Object> {
    for step in 0..world::STEPS {
        object.step(step);
    }
    (0..world::STEPS)
        .map(|step| {
            object.step(step);
            object.clone()
        })
        .collect()
}

/// Budget: 15 µs per event of the benchmark's mean body (5.6 KB).
fn decode(c: &mut Criterion) {
    let fixtures = fixtures();
    let app = world::app(&fixtures, 0);
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Elements(1));
    // The Revision (about 4 KB), the Pod (about 16 KB with this app's larger environment) and
    // the large-object phase's ConfigMap (200 KB of `data`).
    let config_map = world::config_map(0, 200_000);
    for (label, object) in [
        ("revision", &app[3]),
        ("pod", &app[6]),
        ("configmap", &config_map),
    ] {
        for (mode, mode_name) in [(Mode::Binary, "binary"), (Mode::Structured, "structured")] {
            let (headers, body) = http_request(mode, "update", object, 7);
            let names = clusters();
            group.bench_function(format!("{mode_name}/{label}_{}B", body.len()), |b| {
                b.iter(|| decode_request(black_box(&headers), black_box(&body), &names))
            });
            // The floor beside it: one validating read of the same body, nothing kept: the bytes
            // checked as UTF-8, then as JSON syntax (`IgnoredAny` bounds no depth and checks no
            // number's range and no surrogate pair, which the sink also does): a lower bound of
            // what checking an acknowledged body costs.
            group.bench_function(format!("floor/{mode_name}/{label}_{}B", body.len()), |b| {
                b.iter(|| {
                    std::str::from_utf8(black_box(&body))
                        .map(serde_json::from_str::<serde::de::IgnoredAny>)
                })
            });
        }
    }
    group.finish();
}

/// One benchmark of `engine` applying `cycle`'s events in turn, each with the next
/// `resourceVersion` (and taking the round's changes when `take_changes`).
fn bench_cycle(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    label: &str,
    mut engine: Engine,
    cycle: &[ApiServerEvent],
    take_changes: bool,
) {
    let mut rv = 10u64;
    group.bench_function(label, |b| {
        b.iter_batched(
            || {
                rv += 1;
                let mut event = cycle[(rv % cycle.len() as u64) as usize].clone();
                if let Some(object) = event.object.as_mut() {
                    object.resource_version = format!("{rv:015}");
                }
                event
            },
            |event| {
                engine.begin();
                let outcome = engine.apply(&event, 1_000);
                // What the writer copies of the changes (`pipeline::take_changes`: the objects
                // are encoded in place, the rest copied into its batch).
                let staged = take_changes.then(|| {
                    let staged = engine.staged();
                    (
                        staged.objects.len(),
                        staged.removed_objects.to_vec(),
                        staged
                            .drifts
                            .iter()
                            .map(|&drift| drift.clone())
                            .collect::<Vec<_>>(),
                        staged.transitions.to_vec(),
                        staged.history.to_vec(),
                    )
                });
                engine.commit();
                (outcome, staged)
            },
            BatchSize::SmallInput,
        )
    });
}

/// `Engine::apply` alone, on `classify`'s events. Budget: 8 µs per status-only event, 30 µs per
/// spec edit.
fn apply(c: &mut Criterion) {
    classify_with(c, "apply", rules(), false);
}

/// `Engine::apply` and what the writer takes of the changes. Budget: 10 µs per status-only
/// event, 35 µs per spec edit (about 14 µs per event over the benchmark's mix).
fn classify(c: &mut Criterion) {
    classify_with(c, "classify", rules(), true);
    // The same events with the ten shipped team invariants (BENCHMARKS.md, issue 17).
    classify_with(c, "classify_invariants", rules_with_invariants(), true);
}

/// The engine on one app's events: `Engine::apply` between `begin` and `commit`, as the writer
/// calls it, and with `take_changes` the round's changes taken as the writer takes them.
fn classify_with(c: &mut Criterion, name: &str, rules: Arc<Rules>, take_changes: bool) {
    let fixtures = fixtures();
    let app = world::app(&fixtures, 1);
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    let baseline = |engine: &mut Engine| {
        for object in &app {
            engine.begin();
            engine.apply(&decoded(Mode::Binary, "add", object, 1), 0);
            engine.commit();
        }
    };

    // Status-only updates: a Revision's 20 status writes (replica changes and condition times);
    // and the 20-step scripts of the Service, the Broker and the Trigger (mostly status writes,
    // a few spec changes), the kinds the shipped invariants select besides Revisions.
    for (label, index) in [
        ("status_only/revision", 3),
        ("status_only/pod", 6),
        ("script/service", 0),
        ("script/broker", 9),
        ("script/trigger", 10),
    ] {
        let cycle: Vec<ApiServerEvent> = states(app[index].clone())
            .iter()
            .map(|object| decoded(Mode::Binary, "update", object, 0))
            .collect();
        let mut engine = Engine::new(Arc::clone(&rules));
        baseline(&mut engine);
        bench_cycle(&mut group, label, engine, &cycle, take_changes);
    }

    // The large-object phase's ConfigMap (200 KB of `data`): updates that move only Argo CD's
    // write time (issue 28: cost in proportion to what changed, not to size).
    let mut config_map = world::config_map(0, 200_000);
    let cycle: Vec<ApiServerEvent> = (0..world::STEPS)
        .map(|step| {
            config_map.status_step(step);
            decoded(Mode::Binary, "update", &config_map, 0)
        })
        .collect();
    let mut engine = Engine::new(Arc::clone(&rules));
    engine.begin();
    engine.apply(&cycle[0], 0);
    engine.commit();
    bench_cycle(
        &mut group,
        "no_change/configmap",
        engine,
        &cycle,
        take_changes,
    );

    // Spec edits: the Service alternates between a kubectl-edit of an annotation (manual_edit
    // fires) and a trusted manager writing it back (it resolves).
    let service = states(app[0].clone());
    let edit = decoded(Mode::Binary, "update", &service[3], 0);
    let revert = decoded(Mode::Binary, "update", &service[5], 0);
    let mut engine = Engine::new(Arc::clone(&rules));
    baseline(&mut engine);
    // Even versions are the edit, odd ones the write-back.
    bench_cycle(
        &mut group,
        "spec_edit/service",
        engine,
        &[edit.clone(), revert.clone()],
        take_changes,
    );
    group.finish();
    if name != "classify" {
        return;
    }

    let mut group = c.benchmark_group("diff");
    group.throughput(Throughput::Elements(1));
    let state = |event: &ApiServerEvent| match &event.object {
        Some(object) => ObjectState::from_object("bench", object, 0),
        None => panic!("no object"),
    };
    let (before, after) = (state(&edit), state(&revert));
    group.bench_function("spec_diff/service", |b| {
        b.iter(|| {
            drift_core::classify::evidence::spec_diff(black_box(&before), black_box(&after), &rules)
        })
    });
    let deployment = states(app[5].clone());
    let (before, after) = (
        state(&decoded(Mode::Binary, "update", &deployment[4], 0)),
        state(&decoded(Mode::Binary, "update", &deployment[5], 0)),
    );
    group.bench_function("spec_diff/deployment", |b| {
        b.iter(|| {
            drift_core::classify::evidence::spec_diff(black_box(&before), black_box(&after), &rules)
        })
    });
    group.finish();
}

/// The writer's routing of every transition of two cycles of three apps in rounds of 40 (711:
/// about one per two events, most of them pending moves that route nothing), as each round
/// routes its own. Budget: 2 µs per transition (1 µs per event).
fn route(c: &mut Criterion) {
    let fixtures = fixtures();
    let (router, rules) = writer::routing();
    let silences = drift_core::route::Silences::default();
    let rounds = writer::rounds(&writer::events(&fixtures, 3), &rules, &router, &silences);
    let transitions: Vec<drift_model::Transition> = rounds
        .into_iter()
        .flat_map(|round| round.transitions)
        .collect();
    let mut group = c.benchmark_group("route");
    group.throughput(Throughput::Elements(transitions.len() as u64));
    group.bench_function(
        format!("bench_world/{}_transitions", transitions.len()),
        |b| b.iter(|| writer::outbox_rows(&router, &rules, &silences, black_box(&transitions))),
    );
    group.finish();
}

/// One writer round's batch committed to a SQLite store in a temporary directory under
/// `target/tmp` (a disk, not a tmpfs, so the commit's fsync is real): the rounds of two cycles
/// of three apps, committed once to fill the store, then again in turn with new event keys and
/// outbox ids. Budget: 2 ms per round of 40 events (its wall time, fsync included, bounds the
/// latency target), of which at most 400 µs of CPU (10 µs per event).
fn commit(c: &mut Criterion) {
    let fixtures = fixtures();
    let (router, rules) = writer::routing();
    let silences = drift_core::route::Silences::default();
    let rounds = writer::rounds(&writer::events(&fixtures, 3), &rules, &router, &silences);
    let dir = match tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")) {
        Ok(dir) => dir,
        Err(error) => panic!("temporary directory: {error}"),
    };
    let opened = match drift_store::open(&drift_store::Options::Sqlite {
        path: dir.path().join("bench.db"),
    }) {
        Ok(opened) => opened,
        Err(error) => panic!("store: {error}"),
    };
    // The checkpointer (`background`) runs beside the writer, as in the service.
    let drift_store::Opened {
        writer: mut store,
        background: _background,
        ..
    } = opened;
    for round in &rounds {
        if let Err(error) = store.commit(&round.batch) {
            panic!("commit: {error}");
        }
    }
    let events: usize = rounds.iter().map(|round| round.batch.events.len()).sum();
    let mut group = c.benchmark_group("commit");
    group.throughput(Throughput::Elements(1));
    let mut pass = 0u64;
    group.bench_function(
        format!(
            "sqlite/round_{}_events_{}_keyed",
            writer::ROUND,
            events / rounds.len()
        ),
        |b| {
            b.iter_batched(
                || {
                    pass += 1;
                    let round = &rounds[pass as usize % rounds.len()];
                    writer::again(&round.batch, pass)
                },
                |batch| match store.commit(&batch) {
                    Ok(()) => batch,
                    Err(error) => panic!("commit: {error}"),
                },
                BatchSize::PerIteration,
            )
        },
    );
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = decode, apply, classify, route, commit
}
criterion_main!(benches);
