//! Channels and relays against receivers that implement each destination's contract.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use drift_core::config::load_str;
use drift_model::{Actor, Drift, DriftState, Evidence, FieldChange, OwnerChain, Severity};
use drift_model::{Notice, NoticeKind};
use drift_sentinel::deliver::relay::{Limits, Relay, SharedOutbox};
use drift_sentinel::metrics::Metrics;
use drift_store::testing::TestStore;
use drift_store::{Batch, NewOutbox, Outbox, OutboxState, Store};
use serde_json::{json, Value};

use crate::receivers::{self, FakeClock, Receiver, Scripted};

fn start_clock() -> FakeClock {
    Arc::new(std::sync::atomic::AtomicI64::new(
        chrono::Utc::now().timestamp_millis(),
    ))
}

fn drift(index: usize, state: DriftState) -> Drift {
    Drift {
        id: format!("drift{index:04}"),
        class: "traffic_drift".into(),
        rule: None,
        severity: Severity::Critical,
        state,
        cluster: "prod".into(),
        uid: format!("uid-{index}"),
        api_version: "serving.knative.dev/v1".into(),
        kind: "Service".into(),
        namespace: "payments".into(),
        name: format!("checkout-{index}"),
        labels: Default::default(),
        owner: OwnerChain { service: Some(format!("checkout-{index}")), configuration: None, revision: None },
        evidence: Evidence {
            summary: format!("Service/payments/checkout-{index} serves traffic other than its spec: checkout-00007: spec 100% vs served 80% <b>&"),
            changes: vec![FieldChange { path: "/spec/traffic/0/percent".into(), before: Some(json!(100)), after: Some(json!(80)) }],
            actor: Some(Actor { manager: "kubectl-edit".into(), operation: "Update".into(), subresource: String::new(),
                                time: Some("2026-11-29T10:00:00Z".into()), user: Some("jane@example.com".into()), trusted: false }),
            hint: Some(format!("kn service update checkout-{index} --namespace payments --traffic @latest=100")),
            severity: None,
            facts: Default::default(),
        },
        since: 1_700_000_000_000,
        fire_at: 1_700_000_000_000,
        fired_at: Some(1_700_000_000_000),
        resolved_at: (state == DriftState::Resolved).then_some(1_700_000_600_000),
        resolution: (state == DriftState::Resolved).then(|| "served traffic matches spec".to_string()),
    }
}

fn row(channel: &str, index: usize, kind: NoticeKind, group: &str, at: i64) -> NewOutbox {
    let state = if kind == NoticeKind::Resolved {
        DriftState::Resolved
    } else {
        DriftState::Firing
    };
    let notice = Notice {
        kind,
        drift: drift(index, state),
        at,
        resend: 0,
        remediation: None,
    };
    NewOutbox {
        id: format!("ntf_{channel}_{index}_{}", kind.as_str()),
        channel: channel.to_string(),
        drift_id: notice.drift.id.clone(),
        group_key: group.to_string(),
        notice,
        created_at: at,
        not_before: at,
        repeat_after_ms: None,
    }
}

fn queue(store: &TestStore, rows: Vec<NewOutbox>) {
    let mut store = store.clone();
    // Drift rows so reminders can check whether their drift still fires.
    let drifts = rows.iter().map(|row| row.notice.drift.clone()).collect();
    store
        .commit(&Batch {
            events: vec![],
            drifts,
            outbox: rows,
            ..Default::default()
        })
        .unwrap();
}

struct Harness {
    relay: Relay,
    store: TestStore,
    clock: FakeClock,
}

fn limits() -> Limits {
    Limits {
        max_attempts: 5,
        max_age: std::time::Duration::from_secs(24 * 3600),
        min_backoff: std::time::Duration::from_secs(2),
        max_backoff: std::time::Duration::from_secs(60),
    }
}

fn harness(channel_yaml: &str, clock: &FakeClock, limits: Limits) -> Harness {
    let config =
        load_str(&format!("channels:\n{channel_yaml}"), &|_| None).expect("channel config");
    let reader = Arc::clone(clock);
    let channel_clock = Arc::clone(clock);
    let mut channels = drift_sentinel::deliver::build_channels(
        &config.channels,
        Some("https://drift.example.com"),
        &drift_core::classify::classes::catalog(),
        Arc::new(move || channel_clock.load(Ordering::SeqCst)),
    )
    .unwrap();
    let store = TestStore::new();
    let outbox: SharedOutbox = Arc::new(Mutex::new(Box::new(store.clone())));
    let relay = Relay::new(
        channels.remove(0),
        limits,
        outbox,
        Arc::new(move || reader.load(Ordering::SeqCst)),
        Arc::new(Metrics::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    Harness {
        relay,
        store,
        clock: Arc::clone(clock),
    }
}

impl Harness {
    /// Runs rounds, jumping the clock to each next due time, until `seconds` have passed.
    async fn drive(&mut self, seconds: i64) {
        let end = self.clock.load(Ordering::SeqCst) + seconds * 1000;
        for _ in 0..10_000 {
            let now = self.clock.load(Ordering::SeqCst);
            if now >= end {
                break;
            }
            match self.relay.round(now).await.unwrap() {
                None => {}
                Some(next) => self.clock.store(next.clamp(now + 1, end), Ordering::SeqCst),
            }
        }
    }

    fn rows(&self, state: OutboxState) -> Vec<drift_store::OutboxRow> {
        let mut store = self.store.clone();
        store.rows(Some(state), 10_000).unwrap()
    }
}

// ---- DingTalk ------------------------------------------------------------------------------------

const DING_SECRET: &str = "SEC0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd";

fn ding_yaml(receiver: &Receiver, token: &str, secret: &str) -> String {
    format!(
        "  - name: ops\n    type: dingtalk\n    language: zh\n    url: {}/robot/send?access_token={token}\n    secret: {secret}\n    atMobiles: ['13800000000']\n    keyword: 漂移\n",
        receiver.base
    )
}

#[tokio::test]
async fn dingtalk_gets_signed_markdown_with_mentions_and_idempotency_key() {
    let clock = start_clock();
    let receiver =
        receivers::dingtalk(Arc::clone(&clock), "good", Some(DING_SECRET), Some("漂移")).await;
    let mut h = harness(&ding_yaml(&receiver, "good", DING_SECRET), &clock, limits());
    queue(
        &h.store,
        vec![row(
            "ops",
            1,
            NoticeKind::Firing,
            "g1",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(5).await;
    let accepted = receiver.accepted();
    assert_eq!(accepted.len(), 1, "{:?}", receiver.answers());
    let message = &accepted[0];
    assert_eq!(message["msgUuid"], "ntf_ops_1_firing");
    let text = message["markdown"]["text"].as_str().unwrap();
    assert!(text.contains("流量漂移（traffic_drift）"), "{text}");
    assert!(
        text.contains("kubectl-edit (Update), jane@example.com"),
        "{text}"
    );
    assert!(text.contains("/spec/traffic/0/percent: 100 → 80"), "{text}");
    assert!(text.contains("kn service update checkout-1"), "{text}");
    assert!(
        text.ends_with("@13800000000"),
        "the mention must be in the text: {text}"
    );
    assert_eq!(message["at"]["atMobiles"], json!(["13800000000"]));
    assert_eq!(h.rows(OutboxState::Delivered).len(), 1);
}

#[tokio::test]
async fn dingtalk_burst_stays_within_20_a_minute_by_merging_into_digests() {
    let clock = start_clock();
    let receiver = receivers::dingtalk(Arc::clone(&clock), "good", Some(DING_SECRET), None).await;
    let mut h = harness(
        &ding_yaml(&receiver, "good", DING_SECRET).replace("    keyword: 漂移\n", ""),
        &clock,
        limits(),
    );
    let now = h.clock.load(Ordering::SeqCst);
    // 60 drifts in 60 different groups, all due now.
    queue(
        &h.store,
        (0..60)
            .map(|index| row("ops", index, NoticeKind::Firing, &format!("g{index}"), now))
            .collect(),
    );
    h.drive(300).await;
    assert_eq!(
        h.rows(OutboxState::Delivered).len(),
        60,
        "every drift reaches the robot"
    );
    assert!(
        receiver.max_in_window(60_000) <= 20,
        "never more than 20 a minute"
    );
    assert!(
        !receiver
            .answers()
            .iter()
            .any(|(_, body)| body.contains("130101")),
        "never throttled"
    );
    let messages = receiver.accepted();
    assert!(
        messages.len() < 60,
        "the backlog was merged: {} messages",
        messages.len()
    );
    assert!(messages.iter().any(|message| message["markdown"]["title"]
        .as_str()
        .unwrap()
        .contains("漂移汇总")));
}

#[tokio::test]
async fn dingtalk_errors_inside_http_200_are_classified() {
    let clock = start_clock();
    let receiver = receivers::dingtalk(Arc::clone(&clock), "good", Some(DING_SECRET), None).await;
    let yaml = ding_yaml(&receiver, "good", DING_SECRET).replace("    keyword: 漂移\n", "");
    let mut h = harness(&yaml, &clock, limits());
    // System busy twice, then the contract answers 0: retried with backoff, delivered once.
    receiver.script(Scripted::json(
        200,
        json!({"errcode": -1, "errmsg": "系统繁忙"}),
    ));
    receiver.script(Scripted::json(
        200,
        json!({"errcode": -1, "errmsg": "系统繁忙"}),
    ));
    queue(
        &h.store,
        vec![row(
            "ops",
            1,
            NoticeKind::Firing,
            "g",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(1).await;
    let pending = h.rows(OutboxState::Pending);
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].attempts, 1);
    assert!(pending[0]
        .last_error
        .as_deref()
        .unwrap()
        .contains("errcode -1"));
    h.drive(120).await;
    assert_eq!(h.rows(OutboxState::Delivered).len(), 1);
    assert_eq!(receiver.accepted().len(), 1);

    // A bad token is permanent: rejected after one attempt, visible with its reason.
    let bad = receivers::dingtalk(Arc::clone(&clock), "good", Some(DING_SECRET), None).await;
    let mut h = harness(
        &ding_yaml(&bad, "revoked", DING_SECRET).replace("    keyword: 漂移\n", ""),
        &clock,
        limits(),
    );
    queue(
        &h.store,
        vec![row(
            "ops",
            2,
            NoticeKind::Firing,
            "g",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(600).await;
    let rejected = h.rows(OutboxState::Rejected);
    assert_eq!(rejected.len(), 1);
    assert_eq!(
        rejected[0].last_error.as_deref(),
        Some("DingTalk errcode 300001: token is not exist")
    );
    assert_eq!(bad.requests(), 1);
}

#[tokio::test]
async fn dingtalk_signature_mismatch_is_resigned_once_then_rejected() {
    let clock = start_clock();
    let receiver = receivers::dingtalk(Arc::clone(&clock), "good", Some(DING_SECRET), None).await;
    let yaml = ding_yaml(&receiver, "good", "SECwrong").replace("    keyword: 漂移\n", "");
    let mut h = harness(&yaml, &clock, limits());
    queue(
        &h.store,
        vec![row(
            "ops",
            1,
            NoticeKind::Firing,
            "g",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(600).await;
    assert_eq!(receiver.requests(), 2, "one re-sign, then give up");
    assert_eq!(h.rows(OutboxState::Rejected).len(), 1);
}

#[tokio::test]
async fn dingtalk_throttle_pauses_the_robot_for_ten_minutes() {
    let clock = start_clock();
    let receiver = receivers::dingtalk(Arc::clone(&clock), "good", None, None).await;
    let yaml = format!(
        "  - name: ops\n    type: dingtalk\n    url: {}/robot/send?access_token=good\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    receiver.script(Scripted::json(
        200,
        json!({"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute"}),
    ));
    let start = h.clock.load(Ordering::SeqCst);
    queue(
        &h.store,
        vec![row("ops", 1, NoticeKind::Firing, "g", start)],
    );
    h.drive(599).await;
    assert_eq!(
        receiver.requests(),
        1,
        "nothing is sent during the lock-out"
    );
    h.drive(60).await;
    assert_eq!(receiver.accepted().len(), 1);
    let delivered = h.rows(OutboxState::Delivered);
    assert_eq!(delivered.len(), 1);
    assert_eq!(
        delivered[0].attempts, 1,
        "a throttle is not counted as a failed attempt"
    );
}

#[tokio::test]
async fn dingtalk_body_is_kept_under_20000_bytes_with_a_note() {
    let clock = start_clock();
    let receiver = receivers::dingtalk(Arc::clone(&clock), "good", None, None).await;
    let yaml = format!(
        "  - name: ops\n    type: dingtalk\n    url: {}/robot/send?access_token=good\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    let mut big = row(
        "ops",
        1,
        NoticeKind::Firing,
        "g",
        h.clock.load(Ordering::SeqCst),
    );
    big.notice.drift.evidence.summary = "漂移".repeat(6000);
    queue(&h.store, vec![big]);
    h.drive(5).await;
    let accepted = receiver.accepted();
    assert_eq!(accepted.len(), 1, "{:?}", receiver.answers());
    assert!(accepted[0].to_string().len() <= 20_000);
    assert!(accepted[0]["markdown"]["text"]
        .as_str()
        .unwrap()
        .contains("message truncated"));
}

// ---- Slack -----------------------------------------------------------------------------------------

#[tokio::test]
async fn slack_gets_escaped_block_kit_and_429_retry_after_is_honoured() {
    let clock = start_clock();
    let receiver = receivers::slack(Arc::clone(&clock)).await;
    let yaml = format!(
        "  - name: chat\n    type: slack\n    url: {}/services/T000/B000/XXXX\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    let mut scripted = Scripted::json(429, json!("rate_limited"));
    scripted.retry_after = Some(30);
    scripted.body = "rate_limited".into();
    receiver.script(scripted);
    let now = h.clock.load(Ordering::SeqCst);
    queue(
        &h.store,
        (0..3)
            .map(|index| row("chat", index, NoticeKind::Firing, &format!("g{index}"), now))
            .collect(),
    );
    h.drive(29).await;
    assert_eq!(receiver.requests(), 1, "paused for Retry-After");
    h.drive(60).await;
    assert_eq!(h.rows(OutboxState::Delivered).len(), 3);
    assert!(
        receiver.max_in_window(1000) <= 1,
        "about one message a second"
    );
    assert!(
        !receiver
            .answers()
            .iter()
            .skip(1)
            .any(|(status, _)| *status != 200),
        "{:?}",
        receiver.answers()
    );
    let message = &receiver.accepted()[0];
    let all = message.to_string();
    assert!(
        all.contains("&lt;b&gt;&amp;"),
        "control characters escaped: {all}"
    );
    assert!(!all.contains("<b>"));
    // Three groups due at once against one message a second: one digest.
    assert!(
        message["text"]
            .as_str()
            .unwrap()
            .starts_with("[DIGEST] 3 drifts (3 firing, 0 resolved)"),
        "{all}"
    );
    assert_eq!(receiver.accepted().len(), 1);
    // A single drift gets the full layout: fields, diff in a code block, and the hint.
    queue(
        &h.store,
        vec![row(
            "chat",
            9,
            NoticeKind::Firing,
            "g9",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(5).await;
    let single = receiver.accepted()[1].to_string();
    assert!(
        single.contains("[FIRING] traffic_drift on Service payments/checkout-9 (prod)"),
        "{single}"
    );
    assert!(
        single.contains("```/spec/traffic/0/percent: 100 → 80```"),
        "{single}"
    );
    assert!(
        single.contains("*Changed by*\\nkubectl-edit (Update), jane@example.com"),
        "{single}"
    );
}

#[tokio::test]
async fn slack_permanent_errors_are_rejected() {
    let clock = start_clock();
    let receiver = receivers::slack(Arc::clone(&clock)).await;
    let yaml = format!(
        "  - name: chat\n    type: slack\n    url: {}/services/T000/B000/GONE\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    queue(
        &h.store,
        vec![row(
            "chat",
            1,
            NoticeKind::Firing,
            "g",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(60).await;
    let rejected = h.rows(OutboxState::Rejected);
    assert_eq!(rejected.len(), 1);
    assert_eq!(
        rejected[0].last_error.as_deref(),
        Some("HTTP 404: no_service")
    );
}

// ---- Feishu ------------------------------------------------------------------------------------------

#[tokio::test]
async fn feishu_gets_a_signed_card_and_its_rate_limit_holds() {
    let clock = start_clock();
    let receiver = receivers::feishu(Arc::clone(&clock), Some("demo_secret_1234")).await;
    let yaml = format!("  - name: lark\n    type: feishu\n    url: {}/open-apis/bot/v2/hook/abc\n    secret: demo_secret_1234\n", receiver.base);
    let mut h = harness(&yaml, &clock, limits());
    let now = h.clock.load(Ordering::SeqCst);
    queue(
        &h.store,
        (0..12)
            .map(|index| row("lark", index, NoticeKind::Firing, &format!("g{index}"), now))
            .collect(),
    );
    h.drive(30).await;
    assert_eq!(h.rows(OutboxState::Delivered).len(), 12);
    assert!(receiver.max_in_window(1000) <= 5);
    assert!(
        receiver
            .answers()
            .iter()
            .all(|(_, body)| body.contains("\"code\":0")),
        "{:?}",
        receiver.answers()
    );
    let card = &receiver.accepted()[0]["card"];
    assert_eq!(card["header"]["template"], "red");
    // A wrong secret: re-signed once, then rejected.
    let wrong = receivers::feishu(Arc::clone(&clock), Some("other")).await;
    let yaml = format!("  - name: lark\n    type: feishu\n    url: {}/open-apis/bot/v2/hook/abc\n    secret: demo_secret_1234\n", wrong.base);
    let mut h = harness(&yaml, &clock, limits());
    queue(
        &h.store,
        vec![row(
            "lark",
            1,
            NoticeKind::Firing,
            "g",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(60).await;
    assert_eq!(wrong.requests(), 2);
    assert!(h.rows(OutboxState::Rejected)[0]
        .last_error
        .as_deref()
        .unwrap()
        .starts_with("Feishu code 19021"));
}

// ---- WeCom ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn wecom_gets_markdown_under_4096_bytes_and_bad_keys_are_rejected() {
    let clock = start_clock();
    let receiver = receivers::wecom(Arc::clone(&clock), "k1").await;
    let yaml = format!("  - name: wx\n    type: wecom\n    language: zh\n    url: {}/cgi-bin/webhook/send?key=k1\n", receiver.base);
    let mut h = harness(&yaml, &clock, limits());
    let now = h.clock.load(Ordering::SeqCst);
    // One group of 8 drifts does not fit WeCom's 4096 bytes whole: each message carries as many
    // as fit, every drift is shown in full somewhere, and none is cut off and called delivered.
    queue(
        &h.store,
        (0..8)
            .map(|index| row("wx", index, NoticeKind::Firing, "same", now))
            .collect(),
    );
    h.drive(10).await;
    let accepted = receiver.accepted();
    assert!(
        accepted.len() > 1 && accepted.len() < 8,
        "{:?}",
        receiver.answers()
    );
    let mut shown = std::collections::BTreeSet::new();
    for message in &accepted {
        let content = message["markdown"]["content"].as_str().unwrap();
        assert!(content.len() <= 4096);
        assert!(!content.contains("已截断"), "nothing truncated: {content}");
        for index in 0..8 {
            if content.contains(&format!("Service payments/checkout-{index}（prod）")) {
                shown.insert(index);
            }
        }
    }
    assert_eq!(shown.len(), 8, "every drift appears whole in some message");
    assert!(accepted[0]["markdown"]["content"]
        .as_str()
        .unwrap()
        .contains("漂移汇总"));
    assert_eq!(h.rows(OutboxState::Delivered).len(), 8);
    let other = receivers::wecom(Arc::clone(&clock), "k1").await;
    let yaml = format!(
        "  - name: wx\n    type: wecom\n    url: {}/cgi-bin/webhook/send?key=wrong\n",
        other.base
    );
    let mut h = harness(&yaml, &clock, limits());
    queue(
        &h.store,
        vec![row(
            "wx",
            1,
            NoticeKind::Firing,
            "g",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(60).await;
    assert!(h.rows(OutboxState::Rejected)[0]
        .last_error
        .as_deref()
        .unwrap()
        .starts_with("WeCom errcode 93000"));
}

// ---- Webhook -------------------------------------------------------------------------------------------

const WHSEC: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

#[tokio::test]
async fn webhook_is_signed_retried_with_the_same_id_and_carries_the_public_json() {
    let clock = start_clock();
    let receiver = receivers::webhook(Arc::clone(&clock), WHSEC).await;
    let yaml = format!(
        "  - name: hook\n    type: webhook\n    url: {}/hook\n    secret: {WHSEC}\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    receiver.script(Scripted {
        status: 500,
        retry_after: None,
        body: "boom".into(),
    });
    receiver.script(Scripted {
        status: 503,
        retry_after: Some(7),
        body: "busy".into(),
    });
    let start = h.clock.load(Ordering::SeqCst);
    queue(
        &h.store,
        vec![row("hook", 1, NoticeKind::Firing, "g", start)],
    );
    h.drive(300).await;
    assert_eq!(h.rows(OutboxState::Delivered).len(), 1);
    let requests = receiver.log.lock().unwrap().requests.clone();
    assert_eq!(requests.len(), 3);
    let ids: Vec<String> = requests
        .iter()
        .map(|(headers, _)| {
            headers
                .iter()
                .find(|(name, _)| name == "webhook-id")
                .unwrap()
                .1
                .clone()
        })
        .collect();
    assert!(
        ids.iter().all(|id| id == "ntf_hook_1_firing"),
        "the same webhook-id on every retry: {ids:?}"
    );
    assert_eq!(receiver.duplicates(), 0, "delivered once");
    let body = &receiver.accepted()[0];
    assert_eq!(body["type"], "drift.firing");
    let drift = &body["data"][0];
    for key in [
        "id",
        "class",
        "state",
        "severity",
        "cluster",
        "namespace",
        "kind",
        "name",
        "service",
        "summary",
        "diff",
        "actor",
        "firstSeen",
        "lastSeen",
    ] {
        assert!(!drift[key].is_null(), "webhook JSON lacks {key}: {drift}");
    }
    assert_eq!(drift["state"], "firing");
    assert_eq!(
        drift["diff"][0],
        // The wire-format addition of the restructure: every entry says what happened.
        json!({"path": "/spec/traffic/0/percent", "op": "replace", "before": 100, "after": 80})
    );
    assert_eq!(drift["actor"]["manager"], "kubectl-edit");
    assert_eq!(
        drift["url"],
        "https://drift.example.com/ui/drifts/drift0001"
    );
}

/// A queued notification whose stored notice cannot be read (a damaged row, or one written by
/// hand) is rejected at once, with the reason in its audit trail, and the rows due with it still
/// go out.
#[tokio::test]
async fn an_unreadable_notification_is_rejected_and_holds_up_no_other() {
    let clock = start_clock();
    let receiver = receivers::webhook(Arc::clone(&clock), WHSEC).await;
    let yaml = format!(
        "  - name: hook\n    type: webhook\n    url: {}/hook\n    secret: {WHSEC}\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    let now = h.clock.load(Ordering::SeqCst);
    queue(
        &h.store,
        (0..3)
            .map(|index| row("hook", index, NoticeKind::Firing, &format!("g{index}"), now))
            .collect(),
    );
    rusqlite::Connection::open(h.store.path())
        .unwrap()
        .execute_batch(
            r#"UPDATE outbox SET payload = '{"kind":"firing"}' WHERE id = 'ntf_hook_1_firing'"#,
        )
        .unwrap();
    h.drive(5).await;
    let mut delivered: Vec<String> = h
        .rows(OutboxState::Delivered)
        .into_iter()
        .map(|row| row.queued.id)
        .collect();
    delivered.sort();
    assert_eq!(delivered, ["ntf_hook_0_firing", "ntf_hook_2_firing"]);
    let sent = receiver.accepted();
    assert!(
        !sent.is_empty()
            && sent
                .iter()
                .all(|body| !body.to_string().contains("drift0001")),
        "{sent:?}"
    );
    let trail = drift_store::AuditRead::deliveries_of(&h.store, "drift0001").unwrap();
    let [rejected] = &trail[..] else {
        panic!("{trail:?}")
    };
    assert_eq!(rejected.state, "rejected");
    let reason = "unreadable notification: missing field `drift` at line 1 column 17";
    assert_eq!(rejected.last_error.as_deref(), Some(reason));
    let attempts: Vec<(&str, &str)> = rejected
        .attempt_log
        .iter()
        .map(|attempt| (attempt.state.as_str(), attempt.detail.as_str()))
        .collect();
    assert_eq!(attempts, [("rejected", reason)]);
}

#[tokio::test]
async fn attempt_and_age_caps_expire_rows_visibly() {
    let clock = start_clock();
    let receiver = receivers::webhook(Arc::clone(&clock), WHSEC).await;
    let yaml = format!(
        "  - name: hook\n    type: webhook\n    url: {}/hook\n    secret: {WHSEC}\n",
        receiver.base
    );
    let mut h = harness(
        &yaml,
        &clock,
        Limits {
            max_attempts: 3,
            ..limits()
        },
    );
    for _ in 0..10 {
        receiver.script(Scripted {
            status: 502,
            retry_after: None,
            body: "bad gateway".into(),
        });
    }
    queue(
        &h.store,
        vec![row(
            "hook",
            1,
            NoticeKind::Firing,
            "g",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(3600).await;
    let expired = h.rows(OutboxState::Expired);
    assert_eq!(expired.len(), 1);
    assert_eq!(receiver.requests(), 3);
    assert!(expired[0]
        .last_error
        .as_deref()
        .unwrap()
        .starts_with("attempt cap reached; last error: HTTP 502"));
    // Age cap: a row older than maxAge is expired without being sent.
    let mut h = harness(
        &yaml,
        &clock,
        Limits {
            max_age: std::time::Duration::from_secs(60),
            ..limits()
        },
    );
    let old = h.clock.load(Ordering::SeqCst) - 120_000;
    queue(&h.store, vec![row("hook", 2, NoticeKind::Firing, "g", old)]);
    h.drive(5).await;
    assert_eq!(
        h.rows(OutboxState::Expired)[0].last_error.as_deref(),
        Some("age cap reached before delivery")
    );
}

#[tokio::test]
async fn reminders_repeat_while_firing_and_stop_when_resolved() {
    let clock = start_clock();
    let receiver = receivers::webhook(Arc::clone(&clock), WHSEC).await;
    let yaml = format!(
        "  - name: hook\n    type: webhook\n    url: {}/hook\n    secret: {WHSEC}\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    let mut first = row(
        "hook",
        1,
        NoticeKind::Firing,
        "g",
        h.clock.load(Ordering::SeqCst),
    );
    first.repeat_after_ms = Some(3_600_000);
    queue(&h.store, vec![first]);
    h.drive(2 * 3600 + 60).await;
    let bodies = receiver.accepted();
    assert_eq!(bodies.len(), 3, "first message plus two hourly reminders");
    assert_eq!(bodies[1]["data"][0]["reminder"], true);
    // The drift resolves: the next reminder is dropped, not sent.
    let mut resolved = drift(1, DriftState::Resolved);
    resolved.id = "drift0001".into();
    let mut store = h.store.clone();
    store
        .commit(&Batch {
            events: vec![],
            drifts: vec![resolved],
            outbox: vec![],
            ..Default::default()
        })
        .unwrap();
    h.drive(3600).await;
    assert_eq!(receiver.accepted().len(), 3);
    assert!(
        h.rows(OutboxState::Pending).is_empty(),
        "the reminder was withdrawn"
    );
    assert!(
        h.rows(OutboxState::Expired).is_empty(),
        "a withdrawn reminder is not a lost alert"
    );
}

/// A firing warning that turns critical (`Transition::is_escalation`) is sent again, and its
/// reminders, at the new severity, replace the warning's: one reminder an hour, not two.
#[tokio::test]
async fn an_escalation_is_sent_and_its_reminders_replace_the_warnings() {
    let clock = start_clock();
    let receiver = receivers::webhook(Arc::clone(&clock), WHSEC).await;
    let yaml = format!(
        "  - name: hook\n    type: webhook\n    url: {}/hook\n    secret: {WHSEC}\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    let mut warning = row(
        "hook",
        1,
        NoticeKind::Firing,
        "g",
        h.clock.load(Ordering::SeqCst),
    );
    warning.notice.drift.severity = Severity::Warning;
    warning.notice.drift.fired_at = Some(warning.notice.at);
    warning.repeat_after_ms = Some(3_600_000);
    assert!(!warning.notice.is_escalation());
    queue(&h.store, vec![warning.clone()]);
    h.drive(3600 + 60).await;
    assert_eq!(receiver.accepted().len(), 2, "the warning and one reminder");
    // The engine's escalation: the same drift, critical, at a later transition.
    let mut critical = warning;
    critical.id = "ntf_hook_1_escalated".into();
    critical.notice.drift.severity = Severity::Critical;
    critical.notice.at = h.clock.load(Ordering::SeqCst);
    critical.created_at = critical.notice.at;
    critical.not_before = critical.notice.at;
    assert!(critical.notice.is_escalation());
    queue(&h.store, vec![critical]);
    h.drive(60).await;
    let bodies = receiver.accepted();
    assert_eq!(bodies.len(), 3, "the escalation is sent");
    assert_eq!(bodies[2]["data"][0]["severity"], "critical");
    assert_eq!(bodies[2]["data"][0]["reminder"], false);
    // Two hours on: the critical one's two reminders; the warning's were withdrawn.
    h.drive(2 * 3600).await;
    let bodies = receiver.accepted();
    let severities: Vec<&str> = bodies[3..]
        .iter()
        .map(|body| body["data"][0]["severity"].as_str().unwrap())
        .collect();
    assert_eq!(severities, ["critical", "critical"]);
}

/// An escalation and the warning's due reminder in one message: the escalation withdraws the
/// warning's reminders, and the reminder sent with it starts no new chain at the old severity
/// (the relay queues none for it, `relay::follow_ups`; the stores also queue follow-ups only of
/// rows the settlement found, and the withdrawal deleted that one).
#[tokio::test]
async fn an_escalation_sent_with_a_due_warning_reminder_keeps_only_its_own_reminders() {
    let clock = start_clock();
    let receiver = receivers::webhook(Arc::clone(&clock), WHSEC).await;
    let yaml = format!(
        "  - name: hook\n    type: webhook\n    url: {}/hook\n    secret: {WHSEC}\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    let start = h.clock.load(Ordering::SeqCst);
    let mut warning = row("hook", 1, NoticeKind::Firing, "g", start);
    warning.notice.drift.severity = Severity::Warning;
    warning.notice.drift.fired_at = Some(start);
    warning.repeat_after_ms = Some(3_600_000);
    queue(&h.store, vec![warning.clone()]);
    h.drive(60).await;
    assert_eq!(receiver.accepted().len(), 1, "the warning");
    // An hour and a second on, before any round: the warning's reminder is due (the older row,
    // first in the message), and the escalation comes.
    let at = start + 3_601_000;
    h.clock.store(at, Ordering::SeqCst);
    let mut critical = warning;
    critical.id = "ntf_hook_1_escalated".into();
    critical.notice.drift.severity = Severity::Critical;
    critical.notice.at = at;
    critical.created_at = at;
    critical.not_before = at;
    // The critical route reminds more often (every half hour).
    critical.repeat_after_ms = Some(1_800_000);
    assert!(critical.notice.is_escalation());
    queue(&h.store, vec![critical]);
    h.drive(60).await;
    let bodies = receiver.accepted();
    assert_eq!(bodies.len(), 2, "one message for both");
    let mut sent: Vec<(String, bool)> = bodies[1]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|notice| {
            (
                notice["severity"].as_str().unwrap().to_string(),
                notice["reminder"].as_bool().unwrap(),
            )
        })
        .collect();
    sent.sort();
    assert_eq!(
        sent,
        [
            ("critical".to_string(), false),
            ("warning".to_string(), true)
        ],
        "the escalation and the due reminder went out together"
    );
    // Two hours on: the critical one's four reminders, and no chain of the warning's.
    h.drive(2 * 3600).await;
    let bodies = receiver.accepted();
    let later: Vec<&str> = bodies[2..]
        .iter()
        .flat_map(|body| body["data"].as_array().unwrap().iter())
        .map(|notice| notice["severity"].as_str().unwrap())
        .collect();
    assert_eq!(later, ["critical", "critical", "critical", "critical"]);
}

#[tokio::test]
async fn a_resolve_waits_for_its_firing_notice() {
    let clock = start_clock();
    let receiver = receivers::webhook(Arc::clone(&clock), WHSEC).await;
    let yaml = format!(
        "  - name: hook\n    type: webhook\n    url: {}/hook\n    secret: {WHSEC}\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    receiver.script(Scripted {
        status: 500,
        retry_after: None,
        body: "down".into(),
    });
    let start = h.clock.load(Ordering::SeqCst);
    queue(
        &h.store,
        vec![row("hook", 1, NoticeKind::Firing, "g", start)],
    );
    h.drive(1).await;
    // The drift resolves while its firing notice waits for a retry.
    queue(
        &h.store,
        vec![row(
            "hook",
            1,
            NoticeKind::Resolved,
            "g",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(120).await;
    let types: Vec<String> = receiver
        .accepted()
        .iter()
        .map(|body| body["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(types, ["drift.firing", "drift.resolved"], "in order");
}

/// A webhook channel to a receiver, notifications expiring after a minute.
async fn webhook_with_age_cap_of_a_minute() -> (Harness, receivers::Receiver) {
    let clock = start_clock();
    let receiver = receivers::webhook(Arc::clone(&clock), WHSEC).await;
    let yaml = format!(
        "  - name: hook\n    type: webhook\n    url: {}/hook\n    secret: {WHSEC}\n",
        receiver.base
    );
    let limits = Limits {
        max_age: std::time::Duration::from_secs(60),
        ..limits()
    };
    (harness(&yaml, &clock, limits), receiver)
}

/// Drift `index` resolves in the store (its queued reminders stay queued).
fn stop_firing(store: &TestStore, index: usize) {
    let mut store = store.clone();
    store
        .commit(&Batch {
            drifts: vec![drift(index, DriftState::Resolved)],
            ..Default::default()
        })
        .unwrap();
}

#[tokio::test]
async fn one_round_expires_withdraws_holds_and_sends_each_row_as_alone() {
    // One round with every kind of check at once (the relay reads them together): an expired
    // row, two reminders of a drift that stopped firing, a resolve behind its pending firing
    // notice, and a firing notice of its own.
    let (mut h, receiver) = webhook_with_age_cap_of_a_minute().await;
    let now = h.clock.load(Ordering::SeqCst);
    let mut second = row("hook", 2, NoticeKind::Repeat, "g2", now);
    second.id = "ntf_hook_2_repeat_b".into();
    queue(
        &h.store,
        vec![
            row("hook", 1, NoticeKind::Firing, "g1", now - 120_000),
            row("hook", 2, NoticeKind::Repeat, "g2", now),
            second,
            row("hook", 3, NoticeKind::Firing, "g3", now),
            row("hook", 3, NoticeKind::Resolved, "g3", now + 1),
            row("hook", 4, NoticeKind::Firing, "g4", now),
        ],
    );
    // Drift 2 stopped firing after its reminders were queued.
    stop_firing(&h.store, 2);
    // The store fails mid-round: nothing is sent, nothing is lost; the next round does it all.
    h.store.set_failing(true);
    assert!(h.relay.round(now).await.is_err());
    h.store.set_failing(false);
    assert_eq!(receiver.accepted().len(), 0);
    assert_eq!(h.rows(OutboxState::Pending).len(), 6);
    h.drive(120).await;
    let sent: Vec<(String, String)> = receiver
        .accepted()
        .iter()
        .flat_map(|body| {
            body["data"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| vec![body["data"].clone()])
        })
        .map(|notice| {
            (
                notice["id"].as_str().unwrap_or_default().to_string(),
                notice["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let expired = h.rows(OutboxState::Expired);
    assert_eq!(expired.len(), 1, "{sent:?}");
    assert_eq!(expired[0].queued.drift_id, "drift0001");
    assert!(h.rows(OutboxState::Pending).is_empty(), "{sent:?}");
    assert!(
        !sent.iter().any(|(drift, _)| drift == "drift0002"),
        "a stopped drift's reminders are withdrawn: {sent:?}"
    );
    let third: Vec<&str> = sent
        .iter()
        .filter(|(drift, _)| drift == "drift0003")
        .map(|(_, state)| state.as_str())
        .collect();
    assert_eq!(third, ["firing", "resolved"], "{sent:?}");
    assert!(
        sent.iter().any(|(drift, _)| drift == "drift0004"),
        "{sent:?}"
    );
}

#[tokio::test]
async fn a_reminder_past_the_age_cap_of_a_drift_that_stopped_is_withdrawn_not_lost() {
    let (mut h, receiver) = webhook_with_age_cap_of_a_minute().await;
    let old = h.clock.load(Ordering::SeqCst) - 120_000;
    // Drift 1 still fires, drift 2 stopped: both reminders are past the cap.
    queue(
        &h.store,
        vec![
            row("hook", 1, NoticeKind::Repeat, "g1", old),
            row("hook", 2, NoticeKind::Repeat, "g2", old),
        ],
    );
    stop_firing(&h.store, 2);
    h.drive(5).await;
    assert_eq!(receiver.accepted().len(), 0);
    let expired = h.rows(OutboxState::Expired);
    assert_eq!(expired.len(), 1, "only the firing drift's reminder is lost");
    assert_eq!(expired[0].queued.drift_id, "drift0001");
    assert!(h.rows(OutboxState::Pending).is_empty());
}

// ---- CloudEvents ---------------------------------------------------------------------------------------

#[tokio::test]
async fn cloudevents_are_typed_per_state() {
    let clock = start_clock();
    let receiver = receivers::cloudevents_sink().await;
    let yaml = format!(
        "  - name: broker\n    type: cloudevents\n    url: {}/\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    let now = h.clock.load(Ordering::SeqCst);
    queue(
        &h.store,
        vec![
            row("broker", 1, NoticeKind::Firing, "g", now),
            row("broker", 1, NoticeKind::Resolved, "g", now + 1),
        ],
    );
    h.drive(5).await;
    let events = receiver.accepted();
    assert_eq!(
        events.len(),
        2,
        "one CloudEvent per drift: {:?}",
        receiver.answers()
    );
    assert_eq!(events[0]["type"], "dev.driftsentinel.drift.firing");
    assert_eq!(events[0]["id"], "ntf_broker_1_firing");
    assert_eq!(events[0]["data"]["class"], "traffic_drift");
    assert_eq!(events[1]["type"], "dev.driftsentinel.drift.resolved");
    assert_eq!(events[1]["data"]["state"], "resolved");
}

#[allow(dead_code)]
fn unused(_: Value) {}

#[tokio::test]
async fn a_retried_message_keeps_its_idempotency_key_even_when_new_drifts_join_its_group() {
    let clock = start_clock();
    let receiver = receivers::webhook(Arc::clone(&clock), WHSEC).await;
    let yaml = format!(
        "  - name: hook\n    type: webhook\n    url: {}/hook\n    secret: {WHSEC}\n",
        receiver.base
    );
    let mut h = harness(&yaml, &clock, limits());
    // The first attempt of A fails (the receiver may or may not have processed it).
    receiver.script(Scripted {
        status: 503,
        retry_after: None,
        body: "busy".into(),
    });
    let start = h.clock.load(Ordering::SeqCst);
    queue(
        &h.store,
        vec![row("hook", 1, NoticeKind::Firing, "group", start)],
    );
    h.drive(1).await;
    // B joins A's group before A's retry is due.
    queue(
        &h.store,
        vec![row(
            "hook",
            2,
            NoticeKind::Firing,
            "group",
            h.clock.load(Ordering::SeqCst),
        )],
    );
    h.drive(120).await;
    assert_eq!(h.rows(OutboxState::Delivered).len(), 2);
    let ids: Vec<String> = receiver
        .log
        .lock()
        .unwrap()
        .requests
        .iter()
        .map(|(headers, _)| {
            headers
                .iter()
                .find(|(name, _)| name == "webhook-id")
                .unwrap()
                .1
                .clone()
        })
        .collect();
    assert_eq!(
        ids.iter().filter(|id| *id == "ntf_hook_1_firing").count(),
        2,
        "A is retried under its first key: {ids:?}"
    );
    assert!(
        ids.contains(&"ntf_hook_2_firing".to_string()),
        "B goes in its own message: {ids:?}"
    );
}

// ---- Hostile values in chat messages ---------------------------------------------------------------
//
// Whoever can edit a watched object controls much of what a message shows: a ConfigMap's keys and
// values, an image name, the names of things, the user recorded as the last modifier. Each value
// below tries to add a heading, a masked link, an image, a mention or HTML to the ops channel, or
// to close a code block. A message must show each value, on one line, and none of that structure.

const HOSTILE_SUMMARY: &str = "config changed\n# Pwned\n[Click to fix](https://evil.example/login) ![p](https://evil.example/p.png) <at user_id=\"all\">所有人</at> <at id=all></at> <@U123> @all <!channel> <font color=\"warning\">red</font> <https://evil.example/auto>";
const HOSTILE_PATH: &str = "/data/key\n# Key heading";
const HOSTILE_IMAGE: &str = "gcr.io/app:1```\n# Injected\n```\n[link](https://evil.example)";
const HOSTILE_USER: &str = "jane <@U123> @all\n> quoted";
const HOSTILE_HINT: &str =
    "kubectl edit x\n```\n# Hint heading\n```\n[x](https://evil.example) @所有人";
const HOSTILE_CLUSTER: &str = "prod\n## Cluster heading";
const HOSTILE_SERVICE: &str = "checkout\n- [svc](https://evil.example) @here";

/// The values a hostile drift carries, in the order [`hostile_drift`] uses them.
const HOSTILE_VALUES: [&str; 7] = [
    HOSTILE_SUMMARY,
    HOSTILE_PATH,
    HOSTILE_IMAGE,
    HOSTILE_USER,
    HOSTILE_HINT,
    HOSTILE_CLUSTER,
    HOSTILE_SERVICE,
];

/// A firing drift whose values are hostile, or (with `benign`) the same drift with harmless
/// values of the same shape.
fn hostile_drift(benign: bool) -> Drift {
    let value = |text: &str| {
        if benign {
            "harmless".to_string()
        } else {
            text.to_string()
        }
    };
    let mut drift = drift(1, DriftState::Firing);
    drift.cluster = value(HOSTILE_CLUSTER);
    drift.owner.service = Some(value(HOSTILE_SERVICE));
    drift.evidence.summary = value(HOSTILE_SUMMARY);
    drift.evidence.hint = Some(value(HOSTILE_HINT));
    if let Some(actor) = drift.evidence.actor.as_mut() {
        actor.user = Some(value(HOSTILE_USER));
    }
    drift.evidence.changes = vec![
        FieldChange {
            path: if benign {
                "/data/key".into()
            } else {
                HOSTILE_PATH.into()
            },
            before: Some(json!("1")),
            after: Some(json!(value(HOSTILE_SUMMARY))),
        },
        FieldChange {
            path: "/spec/template/spec/containers/0/image".into(),
            before: Some(json!("gcr.io/app:1")),
            after: Some(json!(value(HOSTILE_IMAGE))),
        },
    ];
    drift
}

/// Sends one drift through a channel to its receiver and returns the message it accepted.
async fn deliver_one(
    channel_yaml: &str,
    receiver: &Receiver,
    clock: &FakeClock,
    drift: Drift,
) -> Value {
    let before = receiver.accepted().len();
    let mut h = harness(channel_yaml, clock, limits());
    let channel = channel_yaml
        .split("name: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string();
    let notice = Notice {
        kind: NoticeKind::Firing,
        drift,
        at: h.clock.load(Ordering::SeqCst),
        resend: 0,
        remediation: None,
    };
    let at = notice.at;
    queue(
        &h.store,
        vec![NewOutbox {
            id: format!("ntf_{channel}_{}", before + 1),
            channel,
            drift_id: notice.drift.id.clone(),
            group_key: "g".into(),
            notice,
            created_at: at,
            not_before: at,
            repeat_after_ms: None,
        }],
    );
    h.drive(5).await;
    let accepted = receiver.accepted();
    assert_eq!(accepted.len(), before + 1, "{:?}", receiver.answers());
    accepted[before].clone()
}

/// What a person sees: zero-width characters are invisible.
fn visible(text: &str) -> String {
    text.replace('\u{200B}', "")
}

/// A value as a message shows it: line breaks as `\n`, on one line.
fn shown(value: &str) -> String {
    value.replace('\n', "\\n")
}

/// Checks a Markdown message (DingTalk, WeCom, Feishu) built from a hostile drift against the
/// same message built from a harmless one.
fn assert_inert_markdown(hostile: &str, benign: &str, own_html: &[&str]) {
    let effects = receivers::markdown_effects(hostile);
    let expected = receivers::markdown_effects(benign);
    assert_eq!(
        effects.headings.len(),
        expected.headings.len(),
        "only the message's own headings: {:?}\n{hostile}",
        effects.headings
    );
    assert!(
        effects
            .links
            .iter()
            .all(|link| link.starts_with("https://drift.example.com/ui/drifts/")),
        "only the dashboard link: {:?}\n{hostile}",
        effects.links
    );
    assert!(
        effects
            .html
            .iter()
            .all(|html| own_html.contains(&html.as_str())),
        "no HTML from values: {:?}\n{hostile}",
        effects.html
    );
    assert_eq!(
        effects.code_blocks.len(),
        expected.code_blocks.len(),
        "no code block opened or closed by a value\n{hostile}"
    );
    for (block, benign_block) in effects.code_blocks.iter().zip(&expected.code_blocks) {
        assert_eq!(
            block.lines().count(),
            benign_block.lines().count(),
            "each value on one line inside a code block: {block:?}"
        );
    }
    assert_eq!(
        hostile.lines().count(),
        benign.lines().count(),
        "values add no line\n{hostile}"
    );
    assert_eq!(
        receivers::wecom_mentions(hostile),
        Vec::<String>::new(),
        "{hostile}"
    );
    assert_eq!(
        receivers::feishu_mentions(hostile),
        Vec::<String>::new(),
        "{hostile}"
    );
    assert_eq!(
        receivers::group_mentions(hostile),
        Vec::<String>::new(),
        "{hostile}"
    );
    let seen = visible(hostile);
    for value in HOSTILE_VALUES {
        assert!(
            seen.contains(&shown(value)),
            "the message shows {value:?}:\n{hostile}"
        );
    }
}

#[tokio::test]
async fn dingtalk_shows_hostile_values_without_their_markup() {
    let clock = start_clock();
    let receiver =
        receivers::dingtalk(Arc::clone(&clock), "good", Some(DING_SECRET), Some("漂移")).await;
    let yaml = ding_yaml(&receiver, "good", DING_SECRET);
    let hostile = deliver_one(&yaml, &receiver, &clock, hostile_drift(false)).await;
    let benign = deliver_one(&yaml, &receiver, &clock, hostile_drift(true)).await;
    let text = hostile["markdown"]["text"].as_str().unwrap();
    assert_inert_markdown(text, benign["markdown"]["text"].as_str().unwrap(), &[]);
    // The Chinese template is intact, and only the configured people are mentioned.
    assert!(
        text.contains("流量漂移（traffic_drift）") && text.contains("**修改者**"),
        "{text}"
    );
    assert_eq!(
        hostile["at"],
        json!({"atMobiles": ["13800000000"], "atUserIds": [], "isAtAll": false})
    );
    let title = hostile["markdown"]["title"].as_str().unwrap();
    assert!(!title.contains('\n'), "the title is one line: {title:?}");
}

#[tokio::test]
async fn wecom_shows_hostile_values_without_their_markup() {
    let clock = start_clock();
    let receiver = receivers::wecom(Arc::clone(&clock), "k1").await;
    let yaml = format!("  - name: wx\n    type: wecom\n    language: zh\n    url: {}/cgi-bin/webhook/send?key=k1\n", receiver.base);
    let hostile = deliver_one(&yaml, &receiver, &clock, hostile_drift(false)).await;
    let benign = deliver_one(&yaml, &receiver, &clock, hostile_drift(true)).await;
    let content = hostile["markdown"]["content"].as_str().unwrap();
    assert_inert_markdown(
        content,
        benign["markdown"]["content"].as_str().unwrap(),
        &["<font color=\"warning\">", "</font>"],
    );
    assert!(
        content.contains("**修改者**") && content.contains("【告警】"),
        "{content}"
    );
}

#[tokio::test]
async fn feishu_shows_hostile_values_without_their_markup() {
    let clock = start_clock();
    let receiver = receivers::feishu(Arc::clone(&clock), None).await;
    let yaml = format!("  - name: lark\n    type: feishu\n    language: zh\n    url: {}/open-apis/bot/v2/hook/abc\n", receiver.base);
    let hostile = deliver_one(&yaml, &receiver, &clock, hostile_drift(false)).await;
    let benign = deliver_one(&yaml, &receiver, &clock, hostile_drift(true)).await;
    let content = hostile["card"]["elements"][0]["text"]["content"]
        .as_str()
        .unwrap();
    let benign_content = benign["card"]["elements"][0]["text"]["content"]
        .as_str()
        .unwrap();
    assert_inert_markdown(content, benign_content, &[]);
    // The diff and the hint stay in their code blocks: an image name cannot close one.
    let blocks = receivers::markdown_effects(content).code_blocks;
    assert_eq!(blocks.len(), 2, "{content}");
    assert!(
        visible(&blocks[0]).contains(&shown(HOSTILE_IMAGE)),
        "{blocks:?}"
    );
    assert!(
        visible(&blocks[1]).contains(&shown(HOSTILE_HINT)),
        "{blocks:?}"
    );
    let header = hostile["card"]["header"]["title"]["content"]
        .as_str()
        .unwrap();
    assert!(!header.contains('\n'), "the header is one line: {header:?}");
}

#[tokio::test]
async fn slack_shows_hostile_values_without_their_markup() {
    let clock = start_clock();
    let receiver = receivers::slack(Arc::clone(&clock)).await;
    let yaml = format!(
        "  - name: chat\n    type: slack\n    url: {}/services/T000/B000/XXXX\n",
        receiver.base
    );
    let hostile = deliver_one(&yaml, &receiver, &clock, hostile_drift(false)).await;
    clock.fetch_add(2000, Ordering::SeqCst);
    let benign = deliver_one(&yaml, &receiver, &clock, hostile_drift(true)).await;
    let texts = |message: &Value| -> Vec<String> {
        let mut texts = vec![message["text"].as_str().unwrap().to_string()];
        for block in message["blocks"].as_array().unwrap() {
            texts.extend(block["text"]["text"].as_str().map(str::to_string));
            for field in block["fields"].as_array().into_iter().flatten() {
                texts.extend(field["text"].as_str().map(str::to_string));
            }
        }
        texts
    };
    let (hostile_texts, benign_texts) = (texts(&hostile), texts(&benign));
    assert_eq!(hostile_texts.len(), benign_texts.len());
    for (text, benign_text) in hostile_texts.iter().zip(&benign_texts) {
        // `&`, `<` and `>` stay escaped: the only `<…>` is the dashboard link.
        assert!(
            receivers::slack_specials(text)
                .iter()
                .all(|special| special.starts_with("<https://drift.example.com/ui/drifts/")),
            "{text}"
        );
        assert_eq!(
            receivers::group_mentions(text),
            Vec::<String>::new(),
            "{text}"
        );
        assert_eq!(
            text.lines().count(),
            benign_text.lines().count(),
            "values add no line: {text}"
        );
        // A code block opens and closes only where the message puts its fences.
        assert_eq!(
            text.matches("```").count(),
            benign_text.matches("```").count(),
            "{text}"
        );
    }
    let seen = visible(&hostile.to_string())
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    for value in HOSTILE_VALUES {
        let value = serde_json::to_string(&shown(value)).unwrap();
        assert!(
            seen.contains(value.trim_matches('"')),
            "the message shows {value}:\n{seen}"
        );
    }
}

// ---- Alertmanager: an escalation ------------------------------------------------------------------

/// A real Alertmanager (Debian's `prometheus-alertmanager`), its configuration `config`, no
/// cluster; a watchdog shell stops it when its stdin closes (at drop, or however the test ends).
struct RealAlertmanager {
    url: String,
    watchdog: std::process::Child,
    _dir: tempfile::TempDir,
}

impl RealAlertmanager {
    async fn start(config: &str) -> RealAlertmanager {
        let binary = ["/usr/bin/prometheus-alertmanager", "/usr/bin/alertmanager"]
            .into_iter()
            .find(|path| std::path::Path::new(path).exists())
            .expect("prometheus-alertmanager must be installed (scripts/test.sh installs it)");
        let client = reqwest::Client::new();
        // A port taken between choosing it and the bind is given up for another.
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("am.yml"), config).unwrap();
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let log = dir.path().join("am.log");
            let watchdog = std::process::Command::new("sh")
                .arg("-c")
                .arg(r#"log=$1; shift; "$@" 2>"$log" & pid=$!; cat >/dev/null; kill "$pid"; wait "$pid""#)
                .arg("alertmanager-watchdog")
                .arg(&log)
                .arg(binary)
                .arg(format!("--config.file={}", dir.path().join("am.yml").display()))
                .arg(format!("--storage.path={}", dir.path().join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--cluster.listen-address=")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let am = RealAlertmanager {
                url: format!("http://127.0.0.1:{port}"),
                watchdog,
                _dir: dir,
            };
            for _ in 0..240 {
                let ready = client.get(format!("{}/-/ready", am.url)).send().await;
                if ready.is_ok_and(|response| response.status().is_success()) {
                    return am;
                }
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if text.contains("address already in use") {
                    break;
                }
                assert!(
                    !text.contains("level=error"),
                    "Alertmanager did not start:\n{text}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
        }
        panic!("Alertmanager did not become ready");
    }
}

impl Drop for RealAlertmanager {
    fn drop(&mut self) {
        drop(self.watchdog.stdin.take());
        let _ = self.watchdog.wait();
    }
}

/// An escalated drift is two alerts to Alertmanager (`severity` is an identity label): the
/// inhibit rule README gives mutes the warning one while the critical one fires, so its lapse
/// is not notified as RESOLVED. README's own text is the configuration tested.
#[tokio::test]
async fn the_documented_inhibit_rule_mutes_the_warning_alert_of_an_escalated_drift() {
    use drift_sentinel::deliver::{Channel, Message, Outcome};
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("# alertmanager.yml\n")
        .expect("README gives the inhibit rule");
    let rule = &readme[start..];
    let rule = &rule[..rule.find("```").unwrap()];
    assert!(rule.contains("inhibit_rules:"), "{rule}");
    let config = format!("route:\n  receiver: nobody\nreceivers:\n  - name: nobody\n{rule}");
    let am = RealAlertmanager::start(&config).await;
    let channel = drift_sentinel::deliver::alertmanager::Alertmanager::new(
        "am",
        reqwest::Client::new(),
        drift_core::config::Secret::new(am.url.clone()),
        std::time::Duration::from_secs(60),
        None,
    );
    let now = chrono::Utc::now().timestamp_millis();
    let mut warning = row("am", 1, NoticeKind::Firing, "g", now - 3_600_000).notice;
    warning.drift.severity = Severity::Warning;
    warning.drift.fired_at = Some(warning.at);
    let mut critical = warning.clone();
    critical.drift.severity = Severity::Critical;
    critical.at = now;
    assert!(critical.is_escalation());
    for (id, notice) in [("warning", warning), ("escalation", critical)] {
        let message = Message {
            id: id.into(),
            notices: vec![notice],
            now,
            omitted: 0,
        };
        assert_eq!(channel.send(&message).await, Outcome::Delivered);
    }
    // The API marks each alert as it answers (silences and inhibitions); the inhibitor learns of
    // the critical alert from Alertmanager's alert feed, so it is asked until it has.
    let client = reqwest::Client::new();
    let mut states = Vec::new();
    for _ in 0..240 {
        let alerts: Value = client
            .get(format!("{}/api/v2/alerts", am.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        states = alerts
            .as_array()
            .unwrap()
            .iter()
            .map(|alert| {
                (
                    alert["labels"]["severity"].as_str().unwrap().to_string(),
                    alert["status"]["state"].as_str().unwrap().to_string(),
                    alert["status"]["inhibitedBy"]
                        .as_array()
                        .map_or(0, Vec::len),
                )
            })
            .collect();
        states.sort();
        if states
            .iter()
            .any(|(severity, state, _)| severity == "warning" && state == "suppressed")
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert_eq!(
        states,
        [
            ("critical".to_string(), "active".to_string(), 0),
            ("warning".to_string(), "suppressed".to_string(), 1),
        ]
    );
}
