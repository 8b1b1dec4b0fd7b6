//! The writer's rounds on the bench world, for the `route` and `commit` benchmarks: the world's
//! events applied in rounds of [`ROUND`] as `src/pipeline/writer/` applies them (apply each
//! event, keep the key of one that changed something durable, fire what is due, take the
//! changes, route the transitions to outbox rows), and what each round hands on: its transitions
//! and the store batch the writer commits.

use std::sync::Arc;

use drift_core::classify::{stored, Engine, Outcome, Rules};
use drift_core::decode::ApiServerEvent;
use drift_core::route::{Router, Silences};
use drift_model::{DriftState, Millis, Transition};
use drift_store::{Batch, EventKey, NewOutbox, ObjectRecord};

use crate::world::{self, Fixtures, Mode};

/// Events per round: the writer's mean group commit under the benchmark's load (39.3 events per
/// commit in BENCHMARKS.md's run).
pub(crate) const ROUND: usize = 40;

/// The writer's clock at the first round (2026-11-29T10:00:00Z, the world's event time).
const T0: Millis = 1_795_946_400_000;

/// The config of the route and commit benchmarks: two channels (an Alertmanager pair, so a
/// critical drift queues three rows) and two routes, one with a matcher that continues, and a
/// configured silence; the rules are the defaults otherwise.
const CONFIG: &str = r#"
channels:
  - {name: hook, type: webhook, url: "http://127.0.0.1:9/hook"}
  - {name: am, type: alertmanager, urls: ["http://127.0.0.1:9/0", "http://127.0.0.1:9/1"]}
routes:
  - match: {severity: critical, class: [manual_edit, image_drift, traffic_drift]}
    channels: [am]
    continue: true
    groupBy: [cluster, namespace]
  - channels: [hook]
    groupWait: 0s
rules:
  silences:
    - matchers: {namespace: "team-02", class: not_ready}
      comment: the benchmark's third app is being migrated
"#;

/// One round's results.
pub(crate) struct Round {
    /// The transitions the round's events and timers made, in order.
    pub transitions: Vec<Transition>,
    /// What the writer commits for the round.
    pub batch: Batch,
}

/// The router and the rules of [`CONFIG`].
pub(crate) fn routing() -> (Router, Arc<Rules>) {
    let config = match drift_core::config::load_str(CONFIG, &|_| None) {
        Ok(config) => config,
        Err(error) => panic!("bench config: {error}"),
    };
    (
        drift_core::config::router(&config.routes, &config.channels),
        Arc::new(config.rules.compile()),
    )
}

/// Two cycles of `apps` apps of the world (as `bench-loadgen gen --replay` writes them), decoded.
pub(crate) fn events(fixtures: &Fixtures, apps: usize) -> Vec<ApiServerEvent> {
    let templates = world::cycle(fixtures, apps, Mode::Binary);
    let mut events = Vec::with_capacity(2 * templates.len());
    let mut filled = Vec::new();
    for cycle in 0..2u64 {
        for (index, template) in templates.iter().enumerate() {
            let id = format!("00000000-0000-4000-a{cycle:03}-{index:012}");
            let rv = format!("{:015}", 1_000_000 * (cycle + 1) + index as u64);
            world::fill(&template.request, &id, &rv, &mut filled);
            let (headers, body) = crate::split(&filled);
            events.push(crate::decode_one(&headers, &body));
        }
    }
    events
}

/// The rounds of `events`, ten seconds apart (the world's pending drifts stay pending).
pub(crate) fn rounds(
    events: &[ApiServerEvent],
    rules: &Arc<Rules>,
    router: &Router,
    silences: &Silences,
) -> Vec<Round> {
    let mut engine = Engine::new(Arc::clone(rules));
    let mut now = T0;
    let mut rounds = Vec::new();
    for chunk in events.chunks(ROUND) {
        engine.begin();
        let mut batch = Batch::default();
        for event in chunk {
            let writes = engine.journaled_writes();
            if engine.apply(event, now) == Outcome::Applied && engine.journaled_writes() != writes {
                // Sent as received: keys in send order, as an adapter's `time` gives them.
                let key = EventKey {
                    sent_at: now,
                    source: event.source.clone(),
                    id: event.id.clone(),
                };
                batch.events.push((key, now));
            }
        }
        engine.tick(now);
        let changes = engine.staged();
        batch.objects = changes
            .objects
            .iter()
            .map(|object| ObjectRecord {
                cluster: object.cluster.clone(),
                uid: object.uid.clone(),
                kind: object.kind.clone(),
                namespace: object.namespace.clone(),
                name: object.name.clone(),
                body: match stored::encode(object) {
                    Ok(body) => body,
                    Err(error) => panic!("object body: {error}"),
                },
            })
            .collect();
        batch.removed_objects = changes.removed_objects.to_vec();
        batch.drifts = changes.drifts.iter().map(|&drift| drift.clone()).collect();
        batch.history = changes.history.to_vec();
        batch.outbox = outbox_rows(router, rules, silences, changes.transitions);
        batch.resolved_reminders = changes
            .transitions
            .iter()
            .filter(|transition| {
                transition.drift.state == DriftState::Resolved
                    && transition.drift.fired_at.is_some()
            })
            .map(|transition| transition.drift.id.clone())
            .collect();
        let transitions = changes.transitions.to_vec();
        engine.commit();
        rounds.push(Round { transitions, batch });
        now += 10_000;
    }
    rounds
}

/// The writer's routing of a round's transitions (`Writer::queue_notifications`, without its
/// metrics): the writer's own function, each call with a new pacer (every group's first
/// notification).
pub(crate) fn outbox_rows(
    router: &Router,
    rules: &Rules,
    silences: &Silences,
    transitions: &[Transition],
) -> Vec<NewOutbox> {
    let mut pacer = drift_core::route::Pacer::new();
    drift_sentinel::pipeline::outbox_rows(router, rules, silences, &mut pacer, transitions, |_| {})
}

/// `batch` as a later round would write it: its event keys and outbox ids made new with `pass`
/// (the store ignores a key or a notification it holds, which would make the commit a no-op);
/// objects and drift rows are upserts either way.
pub(crate) fn again(batch: &Batch, pass: u64) -> Batch {
    Batch {
        events: batch
            .events
            .iter()
            .map(|(key, at)| {
                let id = format!("{}-{pass}", key.id);
                let source = key.source.clone();
                // A later pass is sent later (a day per pass): its keys follow the earlier ones.
                let later = i64::try_from(pass).unwrap_or(0).saturating_mul(86_400_000);
                let sent_at = key.sent_at.saturating_add(later);
                (
                    EventKey {
                        sent_at,
                        source,
                        id,
                    },
                    *at,
                )
            })
            .collect(),
        objects: batch.objects.clone(),
        removed_objects: batch.removed_objects.clone(),
        drifts: batch.drifts.clone(),
        history: batch.history.clone(),
        remediations: batch.remediations.clone(),
        settled_remediations: batch.settled_remediations.clone(),
        outbox: batch
            .outbox
            .iter()
            .map(|row| NewOutbox {
                id: format!("{}-{pass}", row.id),
                ..row.clone()
            })
            .collect(),
        cancel_reminders: batch.cancel_reminders.clone(),
        resolved_reminders: batch.resolved_reminders.clone(),
        silences: batch.silences.clone(),
    }
}
