//! Pacing end to end: the writer times each notification by its group (`groupWait` gathers a
//! group's first message, `groupInterval` spaces the next ones) and the relay sends the rows of
//! a group that are due together as one message. The app routes by the default route: every
//! channel, grouped by cluster, namespace and class, `groupWait` 10 s, `groupInterval` 1 min.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drift_model::{Millis, NoticeKind};
use drift_sentinel::deliver::relay::{Limits, Relay, SharedOutbox};
use drift_sentinel::deliver::{BoxFuture, Channel, Message, Outcome};
use drift_sentinel::metrics::Metrics;
use drift_store::{Outbox, OutboxState};
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::scenario::{changed, serving_config_map, written_by};
use crate::support::*;

const T0: Millis = 1_800_000_000_000;

/// The drift names each message carried, in order.
type Seen = Arc<Mutex<Vec<Vec<String>>>>;

/// The app's `log` channel as the relay sees it, recording each message's drifts.
struct Recording {
    seen: Seen,
}

impl Channel for Recording {
    fn name(&self) -> &str {
        "log"
    }
    fn type_name(&self) -> &'static str {
        "log"
    }
    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome> {
        let names = message
            .notices
            .iter()
            .map(|notice| notice.drift.name.clone())
            .collect();
        self.seen.lock().unwrap().push(names);
        Box::pin(async { Outcome::Delivered })
    }
}

/// `object` with a key added by `kubectl edit`: a `config_drift` that fires at once.
fn edited(object: &Value) -> Value {
    changed(object, |c| {
        c["data"]["edited-by-hand"] = json!("1");
        written_by(
            c,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:edited-by-hand": {}}}),
            "2023-10-09T22:00:00Z",
        );
    })
}

async fn send(app: &TestApp, id: &str, verb: &str, object: &Value) {
    let request = request(ContentMode::Binary, &structured_event(id, verb, object));
    let response = app.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 202, "{id}");
}

#[tokio::test]
async fn a_busy_group_gets_one_message_per_interval() {
    let now = Arc::new(AtomicI64::new(T0));
    let clock = {
        let now = Arc::clone(&now);
        Arc::new(move || now.load(Ordering::SeqCst))
    };
    let app = app_with(64, 4 * 1024 * 1024, clock.clone());
    let names = [
        "config-autoscaler",
        "config-defaults",
        "config-deployment",
        "config-gc",
    ];
    let objects: Vec<Value> = names
        .iter()
        .map(|name| serving_config_map(name, &format!("uid-{name}")))
        .collect();
    for (index, object) in objects.iter().enumerate() {
        send(&app, &format!("add-{index}"), "add", object).await;
    }
    // Edits at 1 s and 5 s: the first waits its 10 s groupWait, the second joins it. Edits at
    // 20 s and 40 s come after that message: they wait a minute from it (71 s), together.
    for (index, at) in [1_000, 5_000, 20_000, 40_000].into_iter().enumerate() {
        now.store(T0 + at, Ordering::SeqCst);
        send(
            &app,
            &format!("edit-{index}"),
            "update",
            &edited(&objects[index]),
        )
        .await;
    }
    let mut store = app.store.clone();
    let rows = store.rows(Some(OutboxState::Pending), 100).unwrap();
    let mut due: Vec<(String, Millis)> = rows
        .iter()
        .filter(|row| {
            row.queued.notice.kind == NoticeKind::Firing
                && row.queued.notice.drift.class == "config_drift"
        })
        .map(|row| (row.queued.notice.drift.name.clone(), row.queued.not_before))
        .collect();
    due.sort();
    assert_eq!(
        due,
        vec![
            ("config-autoscaler".to_string(), T0 + 11_000),
            ("config-defaults".to_string(), T0 + 11_000),
            ("config-deployment".to_string(), T0 + 71_000),
            ("config-gc".to_string(), T0 + 71_000),
        ]
    );
    // The relay sends each group's rows due together as one message, and nothing early.
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let outbox: SharedOutbox = Arc::new(Mutex::new(Box::new(app.store.clone())));
    let mut relay = Relay::new(
        Arc::new(Recording {
            seen: Arc::clone(&seen),
        }),
        Limits {
            max_attempts: 10,
            max_age: Duration::from_secs(3600),
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
        },
        outbox,
        clock,
        Arc::new(Metrics::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let config_drifts = |seen: &Seen| -> Vec<Vec<String>> {
        seen.lock()
            .unwrap()
            .iter()
            .map(|names| {
                names
                    .iter()
                    .filter(|name| name.starts_with("config-"))
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .filter(|names| !names.is_empty())
            .collect()
    };
    for at in [10_999, 11_000, 70_999, 71_000] {
        now.store(T0 + at, Ordering::SeqCst);
        relay.round(T0 + at).await.unwrap();
        relay.round(T0 + at).await.unwrap();
        let expected: Vec<Vec<&str>> = match at {
            10_999 => vec![],
            11_000 | 70_999 => vec![vec!["config-autoscaler", "config-defaults"]],
            _ => vec![
                vec!["config-autoscaler", "config-defaults"],
                vec!["config-deployment", "config-gc"],
            ],
        };
        assert_eq!(config_drifts(&seen), expected, "at {at} ms");
    }
    drop(app);
}
