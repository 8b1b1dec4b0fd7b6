//! Local receivers that implement each destination's documented contract (see
//! `docs`-level notes in each channel module): they verify signatures and tokens, enforce size
//! caps and rate limits, and answer with the vendor's real error codes, inside HTTP 200 where the
//! vendor does that. They share a test-controlled clock with the relay so rate limits are checked
//! against the same time the sender sees. A test can queue scripted answers to simulate outages.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

/// The shared fake clock (milliseconds).
pub(crate) type FakeClock = Arc<AtomicI64>;

pub(crate) fn now(clock: &FakeClock) -> i64 {
    clock.load(Ordering::SeqCst)
}

/// A scripted answer: HTTP status, headers, body.
#[derive(Clone, Debug)]
pub(crate) struct Scripted {
    pub status: u16,
    pub retry_after: Option<u64>,
    pub body: String,
}

impl Scripted {
    pub(crate) fn json(status: u16, body: Value) -> Scripted {
        Scripted {
            status,
            retry_after: None,
            body: body.to_string(),
        }
    }
}

/// What a receiver saw.
#[derive(Default, Debug)]
pub(crate) struct Log {
    /// Accepted messages (bodies).
    pub accepted: Vec<Value>,
    /// Every request (headers as text pairs, body), accepted or not.
    pub requests: Vec<(Vec<(String, String)>, String)>,
    /// Times of accepted or rate-counted requests (fake clock).
    pub sends: Vec<i64>,
    /// Answers returned (status, body), in order.
    pub answers: Vec<(u16, String)>,
    /// Idempotency keys seen more than once.
    pub duplicates: usize,
    seen_keys: std::collections::HashSet<String>,
    /// Scripted answers that take precedence over the contract.
    pub script: VecDeque<Scripted>,
    /// Until when the receiver answers "throttled" (DingTalk's 10-minute lock-out).
    pub locked_until: i64,
}

#[derive(Clone)]
pub(crate) struct Receiver {
    pub log: Arc<Mutex<Log>>,
    pub base: String,
}

impl Receiver {
    pub(crate) fn script(&self, answer: Scripted) {
        self.log.lock().unwrap().script.push_back(answer);
    }
    pub(crate) fn accepted(&self) -> Vec<Value> {
        self.log.lock().unwrap().accepted.clone()
    }
    pub(crate) fn answers(&self) -> Vec<(u16, String)> {
        self.log.lock().unwrap().answers.clone()
    }
    pub(crate) fn requests(&self) -> usize {
        self.log.lock().unwrap().requests.len()
    }
    pub(crate) fn duplicates(&self) -> usize {
        self.log.lock().unwrap().duplicates
    }
    /// The most sends inside any window of `window_ms`.
    pub(crate) fn max_in_window(&self, window_ms: i64) -> usize {
        let sends = self.log.lock().unwrap().sends.clone();
        sends
            .iter()
            .map(|start| {
                sends
                    .iter()
                    .filter(|at| **at >= *start && **at < start + window_ms)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }
}

async fn serve(router: Router, log: Arc<Mutex<Log>>) -> Receiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Receiver { log, base }
}

fn answer(log: &Arc<Mutex<Log>>, status: u16, retry_after: Option<u64>, body: String) -> Response {
    log.lock().unwrap().answers.push((status, body.clone()));
    let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
    if let Some(seconds) = retry_after {
        response.headers_mut().insert("retry-after", seconds.into());
    }
    response
}

fn record(log: &Arc<Mutex<Log>>, headers: &HeaderMap, body: &Bytes) -> Option<Scripted> {
    let mut log = log.lock().unwrap();
    let pairs = headers
        .iter()
        .map(|(name, value)| {
            (
                name.to_string(),
                value.to_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    log.requests
        .push((pairs, String::from_utf8_lossy(body).to_string()));
    log.script.pop_front()
}

fn count_recent(log: &Log, now: i64, window_ms: i64) -> usize {
    log.sends.iter().filter(|at| **at > now - window_ms).count()
}

fn note_key(log: &mut Log, key: &str) {
    if !log.seen_keys.insert(key.to_string()) {
        log.duplicates += 1;
    }
}

fn hmac_b64(key: &[u8], message: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
    mac.update(message);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

// ---- DingTalk ---------------------------------------------------------------------------------

#[derive(Clone)]
struct DingState {
    log: Arc<Mutex<Log>>,
    clock: FakeClock,
    token: String,
    secret: Option<String>,
    keyword: Option<String>,
}

/// DingTalk custom robot: `POST /robot/send?access_token=…[&timestamp&sign]`.
pub(crate) async fn dingtalk(
    clock: FakeClock,
    token: &str,
    secret: Option<&str>,
    keyword: Option<&str>,
) -> Receiver {
    let log = Arc::new(Mutex::new(Log::default()));
    let state = DingState {
        log: Arc::clone(&log),
        clock: Arc::clone(&clock),
        token: token.into(),
        secret: secret.map(str::to_string),
        keyword: keyword.map(str::to_string),
    };
    let router = Router::new()
        .route("/robot/send", post(dingtalk_send))
        .with_state(state);
    serve(router, log).await
}

async fn dingtalk_send(
    State(state): State<DingState>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let err = |code: i64, message: &str| {
        answer(
            &state.log,
            200,
            None,
            json!({"errcode": code, "errmsg": message}).to_string(),
        )
    };
    if let Some(scripted) = record(&state.log, &headers, &body) {
        return answer(
            &state.log,
            scripted.status,
            scripted.retry_after,
            scripted.body,
        );
    }
    let now = now(&state.clock);
    if query.get("access_token") != Some(&state.token) {
        return err(300001, "token is not exist");
    }
    if let Some(secret) = &state.secret {
        let (Some(timestamp), Some(sign)) = (query.get("timestamp"), query.get("sign")) else {
            return err(310000, "sign not match");
        };
        let Ok(timestamp) = timestamp.parse::<i64>() else {
            return err(310000, "invalid timestamp");
        };
        if (timestamp - now).abs() > 3_600_000 {
            return err(310000, "invalid timestamp");
        }
        // `Query` has already URL-decoded the value, as DingTalk's server does.
        if *sign
            != hmac_b64(
                secret.as_bytes(),
                format!("{timestamp}\n{secret}").as_bytes(),
            )
        {
            return err(310000, "sign not match");
        }
    }
    if body.len() > 20_000 {
        return err(460101, "message too long, exceed 20000 bytes");
    }
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return err(400105, "不支持的消息类型");
    };
    if message["msgtype"] != "markdown"
        || !message["markdown"]["title"].is_string()
        || !message["markdown"]["text"].is_string()
    {
        return err(400105, "不支持的消息类型");
    }
    if let Some(keyword) = &state.keyword {
        let text = format!(
            "{}{}",
            message["markdown"]["title"], message["markdown"]["text"]
        );
        if !text.contains(keyword.as_str()) {
            return err(310000, "keywords not in content");
        }
    }
    {
        let mut log = state.log.lock().unwrap();
        if now < log.locked_until {
            drop(log);
            return err(130101, "send too fast, exceed 20 times per minute");
        }
        if count_recent(&log, now, 60_000) >= 20 {
            log.locked_until = now + 600_000;
            drop(log);
            return err(130101, "send too fast, exceed 20 times per minute");
        }
        log.sends.push(now);
        if let Some(id) = message["msgUuid"].as_str() {
            note_key(&mut log, id);
        }
        log.accepted.push(message);
    }
    err(0, "ok")
}

// ---- Slack ---------------------------------------------------------------------------------------

#[derive(Clone)]
struct SlackState {
    log: Arc<Mutex<Log>>,
    clock: FakeClock,
}

/// Slack incoming webhook: `POST /services/T000/B000/XXXX`.
pub(crate) async fn slack(clock: FakeClock) -> Receiver {
    let log = Arc::new(Mutex::new(Log::default()));
    let state = SlackState {
        log: Arc::clone(&log),
        clock: Arc::clone(&clock),
    };
    let router = Router::new()
        .route("/services/{a}/{b}/{c}", post(slack_send))
        .with_state(state);
    serve(router, log).await
}

fn slack_blocks_valid(message: &Value) -> bool {
    let Some(text) = message["text"].as_str() else {
        return false;
    };
    if text.is_empty() {
        return false;
    }
    let blocks = message["blocks"].as_array().cloned().unwrap_or_default();
    if blocks.len() > 50 {
        return false;
    }
    blocks.iter().all(|block| match block["type"].as_str() {
        Some("header") => {
            block["text"]["type"] == "plain_text"
                && block["text"]["text"]
                    .as_str()
                    .is_some_and(|t| !t.is_empty() && t.chars().count() <= 150)
        }
        Some("section") => {
            let text_ok = block.get("text").is_none_or(|text| {
                text["text"]
                    .as_str()
                    .is_some_and(|t| !t.is_empty() && t.chars().count() <= 3000)
            });
            let fields = block["fields"].as_array().cloned().unwrap_or_default();
            text_ok
                && fields.len() <= 10
                && fields.iter().all(|field| {
                    field["text"]
                        .as_str()
                        .is_some_and(|t| t.chars().count() <= 2000)
                })
        }
        Some("context") => block["elements"]
            .as_array()
            .is_some_and(|elements| elements.len() <= 10),
        _ => false,
    })
}

async fn slack_send(
    State(state): State<SlackState>,
    Path((a, b, c)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(scripted) = record(&state.log, &headers, &body) {
        return answer(
            &state.log,
            scripted.status,
            scripted.retry_after,
            scripted.body,
        );
    }
    if (a.as_str(), b.as_str(), c.as_str()) != ("T000", "B000", "XXXX") {
        return answer(&state.log, 404, None, "no_service".into());
    }
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return answer(&state.log, 400, None, "invalid_payload".into());
    };
    if !slack_blocks_valid(&message) {
        return answer(&state.log, 400, None, "invalid_blocks".into());
    }
    let now = now(&state.clock);
    let mut log = state.log.lock().unwrap();
    if count_recent(&log, now, 1000) >= 1 {
        drop(log);
        return answer(&state.log, 429, Some(1), "rate_limited".into());
    }
    log.sends.push(now);
    log.accepted.push(message);
    drop(log);
    answer(&state.log, 200, None, "ok".into())
}

// ---- Feishu --------------------------------------------------------------------------------------

#[derive(Clone)]
struct FeishuState {
    log: Arc<Mutex<Log>>,
    clock: FakeClock,
    secret: Option<String>,
}

/// Feishu custom bot: `POST /open-apis/bot/v2/hook/{token}`.
pub(crate) async fn feishu(clock: FakeClock, secret: Option<&str>) -> Receiver {
    let log = Arc::new(Mutex::new(Log::default()));
    let state = FeishuState {
        log: Arc::clone(&log),
        clock: Arc::clone(&clock),
        secret: secret.map(str::to_string),
    };
    let router = Router::new()
        .route("/open-apis/bot/v2/hook/{token}", post(feishu_send))
        .with_state(state);
    serve(router, log).await
}

async fn feishu_send(
    State(state): State<FeishuState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = |code: i64, msg: &str| {
        answer(
            &state.log,
            200,
            None,
            json!({"code": code, "msg": msg, "data": {}}).to_string(),
        )
    };
    if let Some(scripted) = record(&state.log, &headers, &body) {
        return answer(
            &state.log,
            scripted.status,
            scripted.retry_after,
            scripted.body,
        );
    }
    if body.len() > 20 * 1024 {
        return answer(
            &state.log,
            400,
            None,
            json!({"code": 9499, "msg": "Bad Request", "data": {}}).to_string(),
        );
    }
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return answer(
            &state.log,
            400,
            None,
            json!({"code": 9499, "msg": "Bad Request", "data": {}}).to_string(),
        );
    };
    let now = now(&state.clock);
    if let Some(secret) = &state.secret {
        let timestamp = message["timestamp"]
            .as_str()
            .and_then(|t| t.parse::<i64>().ok());
        let valid = timestamp.is_some_and(|timestamp| {
            (timestamp * 1000 - now).abs() <= 3_600_000
                && message["sign"].as_str()
                    == Some(hmac_b64(format!("{timestamp}\n{secret}").as_bytes(), b"").as_str())
        });
        if !valid {
            return reply(
                19021,
                "sign match fail or timestamp is not within one hour from current time",
            );
        }
    }
    if message["msg_type"] != "interactive" || !message["card"]["elements"].is_array() {
        return answer(
            &state.log,
            400,
            None,
            json!({"code": 9499, "msg": "Bad Request", "data": {}}).to_string(),
        );
    }
    let mut log = state.log.lock().unwrap();
    if count_recent(&log, now, 1000) >= 5 || count_recent(&log, now, 60_000) >= 100 {
        drop(log);
        return reply(
            11232,
            "frequency limited psm[lark.oapi.app_platform_runtime]appID[1]",
        );
    }
    log.sends.push(now);
    log.accepted.push(message);
    drop(log);
    reply(0, "success")
}

// ---- WeCom -----------------------------------------------------------------------------------------

#[derive(Clone)]
struct WecomState {
    log: Arc<Mutex<Log>>,
    clock: FakeClock,
    key: String,
}

/// WeCom group robot: `POST /cgi-bin/webhook/send?key=…`.
pub(crate) async fn wecom(clock: FakeClock, key: &str) -> Receiver {
    let log = Arc::new(Mutex::new(Log::default()));
    let state = WecomState {
        log: Arc::clone(&log),
        clock: Arc::clone(&clock),
        key: key.into(),
    };
    let router = Router::new()
        .route("/cgi-bin/webhook/send", post(wecom_send))
        .with_state(state);
    serve(router, log).await
}

async fn wecom_send(
    State(state): State<WecomState>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = |code: i64, msg: &str| {
        answer(
            &state.log,
            200,
            None,
            json!({"errcode": code, "errmsg": msg}).to_string(),
        )
    };
    if let Some(scripted) = record(&state.log, &headers, &body) {
        return answer(
            &state.log,
            scripted.status,
            scripted.retry_after,
            scripted.body,
        );
    }
    if query.get("key") != Some(&state.key) {
        return reply(93000, "invalid webhook url, hint: [1] from ip: 127.0.0.1");
    }
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return reply(40008, "invalid message type");
    };
    let Some(content) = message["markdown"]["content"].as_str() else {
        return reply(40008, "invalid message type");
    };
    if content.len() > 4096 {
        return reply(
            40058,
            "markdown.content exceed max length 4096. invalid Request Parameter",
        );
    }
    let now = now(&state.clock);
    let mut log = state.log.lock().unwrap();
    if count_recent(&log, now, 60_000) >= 20 {
        drop(log);
        return reply(45009, "api freq out of limit");
    }
    log.sends.push(now);
    log.accepted.push(message);
    drop(log);
    reply(0, "ok")
}

// ---- Standard Webhooks ---------------------------------------------------------------------------

#[derive(Clone)]
struct WebhookState {
    log: Arc<Mutex<Log>>,
    clock: FakeClock,
    secret: String,
}

/// A Standard Webhooks receiver that verifies `webhook-signature` as the spec's libraries do.
pub(crate) async fn webhook(clock: FakeClock, secret: &str) -> Receiver {
    let log = Arc::new(Mutex::new(Log::default()));
    let state = WebhookState {
        log: Arc::clone(&log),
        clock: Arc::clone(&clock),
        secret: secret.into(),
    };
    let router = Router::new()
        .route("/hook", post(webhook_send))
        .with_state(state);
    serve(router, log).await
}

async fn webhook_send(
    State(state): State<WebhookState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(scripted) = record(&state.log, &headers, &body) {
        return answer(
            &state.log,
            scripted.status,
            scripted.retry_after,
            scripted.body,
        );
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let (id, timestamp, signatures) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    let Ok(timestamp_s) = timestamp.parse::<i64>() else {
        return answer(&state.log, 400, None, "missing webhook-timestamp".into());
    };
    if (timestamp_s * 1000 - now(&state.clock)).abs() > 5 * 60 * 1000 {
        return answer(&state.log, 400, None, "timestamp too old or too new".into());
    }
    let key = base64::engine::general_purpose::STANDARD
        .decode(state.secret.trim_start_matches("whsec_"))
        .unwrap();
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(&body);
    let expected = format!("v1,{}", hmac_b64(&key, &signed));
    if !signatures.split(' ').any(|candidate| candidate == expected) {
        return answer(&state.log, 401, None, "signature mismatch".into());
    }
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut log = state.log.lock().unwrap();
    note_key(&mut log, &id);
    log.accepted.push(message);
    drop(log);
    answer(&state.log, 204, None, String::new())
}

// ---- CloudEvents (a Broker ingress) ---------------------------------------------------------------

#[derive(Clone)]
struct CeState {
    log: Arc<Mutex<Log>>,
}

/// A Broker ingress: parses the request with the CloudEvents SDK and answers 202.
pub(crate) async fn cloudevents_sink() -> Receiver {
    let log = Arc::new(Mutex::new(Log::default()));
    let state = CeState {
        log: Arc::clone(&log),
    };
    let router = Router::new().route("/", post(ce_send)).with_state(state);
    serve(router, log).await
}

async fn ce_send(State(state): State<CeState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(scripted) = record(&state.log, &headers, &body) {
        return answer(
            &state.log,
            scripted.status,
            scripted.retry_after,
            scripted.body,
        );
    }
    match cloudevents::binding::http::to_event(&headers, body.to_vec()) {
        Ok(event) => {
            use cloudevents::AttributesReader;
            let data = match event.data() {
                Some(cloudevents::Data::Json(value)) => value.clone(),
                Some(cloudevents::Data::Binary(bytes)) => {
                    serde_json::from_slice(bytes).unwrap_or(Value::Null)
                }
                Some(cloudevents::Data::String(text)) => {
                    serde_json::from_str(text).unwrap_or(Value::Null)
                }
                None => Value::Null,
            };
            let mut log = state.log.lock().unwrap();
            note_key(&mut log, event.id());
            log.accepted.push(
                json!({"id": event.id(), "type": event.ty(), "source": event.source().to_string(),
                                      "subject": event.subject(), "data": data}),
            );
            drop(log);
            answer(&state.log, 202, None, String::new())
        }
        Err(error) => answer(&state.log, 400, None, error.to_string()),
    }
}

// ---- What a destination makes of a message's markup ------------------------------------------------
//
// The vendors' renderers are not public; each documents its syntax (../shared/reference/
// alert-channels.md and the channel modules). A CommonMark parser stands in for the Markdown
// renderers of DingTalk, WeCom and Feishu (`lark_md`), and each vendor's mention and link syntax
// is read as its documentation describes it.

/// The structure a Markdown text has once rendered.
#[derive(Debug, Default)]
pub(crate) struct MarkdownEffects {
    /// The text of every heading.
    pub headings: Vec<String>,
    /// The destination of every link, autolink and image.
    pub links: Vec<String>,
    /// Raw HTML, inline or block (WeCom's `<font>`, Feishu's `<at>`, ...).
    pub html: Vec<String>,
    /// The content of every code block.
    pub code_blocks: Vec<String>,
}

/// Parses `text` as CommonMark (with tables and strikethrough, as the vendors' flavours have).
pub(crate) fn markdown_effects(text: &str) -> MarkdownEffects {
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
    let mut effects = MarkdownEffects::default();
    let mut heading: Option<String> = None;
    let mut code: Option<String> = None;
    for event in Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => effects.headings.extend(heading.take()),
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => effects.links.push(dest_url.to_string()),
            Event::Start(Tag::CodeBlock(_)) => code = Some(String::new()),
            Event::End(TagEnd::CodeBlock) => effects.code_blocks.extend(code.take()),
            Event::Html(html) | Event::InlineHtml(html) => effects.html.push(html.to_string()),
            Event::Text(text) | Event::Code(text) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&text);
                }
                if let Some(code) = code.as_mut() {
                    code.push_str(&text);
                }
            }
            _ => {}
        }
    }
    effects
}

/// The `<…>` sequences a Slack mrkdwn text holds: mentions (`<@U123>`, `<!channel>`,
/// `<#C123>`) and links (`<url|label>`), which Slack renders as such.
pub(crate) fn slack_specials(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        let tail = &rest[start..];
        let end = tail.find('>').map_or(tail.len(), |end| end + 1);
        found.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    found
}

/// WeCom markdown mentions: `<@userid>`.
pub(crate) fn wecom_mentions(content: &str) -> Vec<String> {
    content
        .match_indices("<@")
        .map(|(start, _)| {
            let tail = &content[start + 2..];
            tail[..tail.find('>').unwrap_or(tail.len())].to_string()
        })
        .collect()
}

/// Feishu mentions: `<at user_id="…">`, `<at id=…>`, `<at email=…>`.
pub(crate) fn feishu_mentions(content: &str) -> Vec<String> {
    content
        .match_indices("<at")
        .filter(|(start, _)| {
            content[start + 3..]
                .chars()
                .next()
                .is_some_and(|next| next == '>' || next.is_whitespace())
        })
        .map(|(start, _)| content[start..].chars().take(40).collect())
        .collect()
}

/// Mention words that notify a whole group on some service when written as text (`@all`,
/// `@所有人`, Slack's `@channel`/`@here`, `@everyone`).
pub(crate) fn group_mentions(text: &str) -> Vec<String> {
    ["@all", "@所有人", "@channel", "@here", "@everyone"]
        .iter()
        .filter(|word| text.contains(*word))
        .map(|word| word.to_string())
        .collect()
}
