//! A drift's page on the dashboard: its diff, actor, failing condition chain, hint, history and
//! delivery status, and the form that silences it. The form carries only the drift's id, a
//! duration (one of [`SILENCE_DURATIONS`]) and a comment; the silence's matchers are the stored
//! drift's own, so no field of a forged form can widen it.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;

use super::super::drifts::{detail as drift_detail, DriftDetail};
use super::super::report::escape_html as esc;
use super::super::silences::add_silence;
use super::super::{audit, blocking, ApiState};
use super::{bad_parameter, class_of, error_page, page, urlencode};
use crate::error::ApiError;
use drift_core::remediate::{Action, Approval, Mode};
use drift_model::time::format_time;
use drift_model::{Drift, DriftState, Silence};

/// The durations the silence form offers, and the only ones it takes.
const SILENCE_DURATIONS: &[(&str, u64)] = &[
    ("1h", 3600),
    ("4h", 4 * 3600),
    ("24h", 24 * 3600),
    ("7d", 7 * 24 * 3600),
];

/// The duration the form selects first.
const DEFAULT_SILENCE_DURATION: &str = "4h";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DetailQuery {
    silenced: Option<String>,
    remediated: Option<String>,
}

pub(super) async fn detail(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    query: Result<Query<DetailQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Ok(Query(query)) = query else {
        return Ok(bad_parameter(
            "A drift's page takes silenced and remediated, set by its forms.",
        ));
    };
    let Some(DriftDetail {
        drift,
        history,
        remediations,
        deliveries,
    }) = drift_detail(&state, &id).await?
    else {
        return Ok((
            StatusCode::NOT_FOUND,
            // The id is not repeated: the page never shows a value it cannot use.
            Html(page("Not found", "<p>No drift by that id.</p>")),
        )
            .into_response());
    };
    let evidence = &drift.evidence;
    let mut body = format!(
        "<h1><span class=\"{sev}\">{sev}</span> {class}: {kind} {ns}/{name}</h1>{notice}<p>{summary}</p><table>\
<tr><th>State</th><td>{state}</td></tr><tr><th>Cluster</th><td>{cluster}</td></tr><tr><th>Since</th><td>{since}</td></tr>\
<tr><th>Fired</th><td>{fired}</td></tr><tr><th>Resolved</th><td>{resolved}</td></tr><tr><th>Service</th><td>{service}</td></tr>\
<tr><th>Changed by</th><td id=\"actor\">{actor}</td></tr></table>",
        sev = drift.severity.as_str(),
        class = esc(&class_of(&drift)),
        kind = esc(&drift.kind),
        ns = esc(&drift.namespace),
        name = esc(&drift.name),
        notice = if query.silenced.is_some() { "<p><strong>Silenced.</strong> New notifications for this drift are muted.</p>" } else { "" },
        summary = esc(&evidence.summary),
        state = drift.state.as_str(),
        cluster = super::super::report::cluster_html(&drift.cluster),
        since = format_time(drift.since),
        fired = drift.fired_at.map(format_time).unwrap_or_else(|| "—".into()),
        resolved = match (&drift.resolved_at, &drift.resolution) {
            (Some(at), Some(reason)) => format!("{} ({})", format_time(*at), esc(reason)),
            _ => "—".to_string(),
        },
        service = esc(drift.owner.service.as_deref().unwrap_or("—")),
        actor = esc(&drift_model::text::actor_text(&drift).unwrap_or_else(|| "—".into())),
    );
    body.push_str(&condition_chain(evidence));
    body.push_str(&super::split::split_bars(evidence));
    if !evidence.changes.is_empty() {
        body.push_str("<h2>What changed</h2><table id=\"diff\"><tr><th>Path</th><th>Before</th><th>After</th></tr>");
        let show = |value: &Option<serde_json::Value>| {
            value
                .as_ref()
                .map(|v| drift_core::classify::evidence::diff::bounded(v).to_string())
                .unwrap_or_else(|| "∅".into())
        };
        for change in &evidence.changes {
            body.push_str(&format!(
                "<tr><td><code>{}</code></td><td><code>{}</code></td><td><code>{}</code></td></tr>",
                esc(&change.path),
                esc(&show(&change.before)),
                esc(&show(&change.after))
            ));
        }
        body.push_str("</table>");
    }
    if let Some(hint) = &evidence.hint {
        body.push_str(&format!(
            "<h2>How to fix</h2><pre id=\"hint\">{}</pre>",
            esc(hint)
        ));
    }
    body.push_str("<h2>History</h2><table><tr><th>At</th><th>From</th><th>To</th></tr>");
    for entry in &history {
        body.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            format_time(entry.at),
            esc(entry.from.as_deref().unwrap_or("—")),
            esc(&entry.to)
        ));
    }
    body.push_str("</table>");
    if !remediations.is_empty() {
        body.push_str(&remediation_table(&remediations));
    }
    body.push_str(&repair_form(&state, &drift, query.remediated.is_some()));
    body.push_str("<h2>Deliveries</h2><table id=\"deliveries\"><tr><th>Channel</th><th>Kind</th><th>State</th><th>Attempts</th><th>Last error</th><th>Queued</th></tr>");
    for delivery in &deliveries {
        body.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&delivery.channel),
            esc(&delivery.kind),
            esc(&delivery.state),
            delivery.attempts,
            esc(delivery.last_error.as_deref().unwrap_or("")),
            format_time(delivery.created_at)
        ));
    }
    body.push_str("</table>");
    let durations: String = SILENCE_DURATIONS
        .iter()
        .map(|(duration, _)| {
            let selected = if *duration == DEFAULT_SILENCE_DURATION {
                " selected"
            } else {
                ""
            };
            format!("<option{selected}>{duration}</option>")
        })
        .collect();
    body.push_str(&format!(
        "<h2>Silence</h2><form method=\"post\" action=\"/ui/silences\"><input type=\"hidden\" name=\"drift\" value=\"{id}\">\
<label>for <select name=\"duration\">{durations}</select></label> \
<label>comment <input name=\"comment\" size=\"40\"></label> <button>Silence this drift</button></form>\
<p class=\"muted\">Mutes new notifications of {class} for {kind} {ns}/{name} in cluster {cluster}.</p>",
        id = esc(&drift.id),
        class = esc(&class_of(&drift)),
        kind = esc(&drift.kind),
        ns = esc(&drift.namespace),
        name = esc(&drift.name),
        cluster = esc(&drift.cluster),
    ));
    // Whether there are any, not all of them: the page reads one stored silence at most.
    let configured = state.pipeline.rules().silences().len();
    let reader = super::super::audit(&state)?;
    let (stored, more) = super::super::blocking(move || reader.silences_page(None, 1)).await?;
    if configured > 0 || !stored.is_empty() {
        body.push_str(&format!(
            "<p class=\"muted\">{configured} configured silence(s){}; see <code>/api/v1/silences</code>.</p>",
            match (stored.len(), more.is_some()) {
                (0, _) => "",
                (_, false) => " and 1 created through the API",
                (_, true) => " and more created through the API",
            }
        ));
    }
    Ok(Html(page(&format!("{} {}", class_of(&drift), drift.name), &body)).into_response())
}

/// Most links of a condition chain shown, and most characters of one message.
const CHAIN_LINKS: usize = 32;
const CHAIN_MESSAGE_CHARS: usize = 2000;

/// The failing condition chain of a drift (`facts["conditionChain"]`, see
/// [`drift_model::CONDITION_CHAIN_FACT`]) as an ordered list, or nothing when the evidence has
/// none or it is not a JSON array. Every value comes from the cluster and is escaped; a field
/// that is missing or not a string shows as absent.
fn condition_chain(evidence: &drift_model::Evidence) -> String {
    let Some(links) = evidence
        .facts
        .get(drift_model::CONDITION_CHAIN_FACT)
        .and_then(|text| serde_json::from_str::<Vec<serde_json::Value>>(text).ok())
        .filter(|links| !links.is_empty())
    else {
        return String::new();
    };
    let mut html =
        String::from("<h2>Failing condition chain</h2><ol class=\"chain\" id=\"condition-chain\">");
    for link in links.iter().take(CHAIN_LINKS) {
        let field = |key: &str| link.get(key).and_then(|value| value.as_str()).unwrap_or("");
        let object = match (field("namespace"), field("name")) {
            ("", name) => esc(name),
            (namespace, name) => format!("{}/{}", esc(namespace), esc(name)),
        };
        let mut item = format!("<li><strong>{}</strong> {object}", esc(field("kind")));
        if !field("condition").is_empty() || !field("status").is_empty() {
            item.push_str(&format!(
                ": <code>{}={}</code>",
                esc(field("condition")),
                esc(field("status"))
            ));
        }
        if !field("reason").is_empty() {
            item.push_str(&format!(" <em>{}</em>", esc(field("reason"))));
        }
        let message = field("message");
        if !message.is_empty() {
            let mut shown: String = message.chars().take(CHAIN_MESSAGE_CHARS).collect();
            if shown.len() < message.len() {
                shown.push('…');
            }
            item.push_str(&format!(" <span class=\"muted\">— {}</span>", esc(&shown)));
        }
        item.push_str("</li>");
        html.push_str(&item);
    }
    if links.len() > CHAIN_LINKS {
        html.push_str(&format!(
            "<li class=\"muted\">and {} more</li>",
            links.len() - CHAIN_LINKS
        ));
    }
    html.push_str("</ol>");
    html
}

/// The silence form: which drift, for how long, why. Other fields (the hidden matchers an older
/// page carried, or a forged form's) are ignored.
#[derive(Debug, Deserialize)]
pub(super) struct SilenceForm {
    drift: String,
    duration: String,
    comment: Option<String>,
}

pub(super) async fn silence(
    State(state): State<ApiState>,
    form: Result<Form<SilenceForm>, axum::extract::rejection::FormRejection>,
) -> Result<Response, ApiError> {
    let form = match form {
        Ok(Form(form)) => form,
        Err(error) if error.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return Ok(error_page(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Not silenced",
                "The form is larger than this server takes.",
            ));
        }
        Err(_) => {
            return Ok(error_page(
                StatusCode::BAD_REQUEST,
                "Not silenced",
                "The form needs a drift and a duration.",
            ));
        }
    };
    let Some(seconds) = SILENCE_DURATIONS
        .iter()
        .find(|(duration, _)| *duration == form.duration)
        .map(|(_, seconds)| *seconds)
    else {
        let choices: Vec<&str> = SILENCE_DURATIONS
            .iter()
            .map(|(duration, _)| *duration)
            .collect();
        return Ok(error_page(
            StatusCode::BAD_REQUEST,
            "Not silenced",
            &format!("The duration must be one of {}.", choices.join(", ")),
        ));
    };
    let reader = audit(&state)?;
    let id = form.drift.clone();
    let Some(drift) = blocking(move || reader.drift(&id)).await? else {
        return Ok(error_page(
            StatusCode::NOT_FOUND,
            "Not found",
            "No drift by that id.",
        ));
    };
    let mut matchers: std::collections::BTreeMap<String, String> = [
        ("class", &drift.class),
        ("cluster", &drift.cluster),
        ("namespace", &drift.namespace),
        ("kind", &drift.kind),
        ("name", &drift.name),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), value.clone()))
    .collect();
    // One rule's drift, not every invariant broken on the object.
    if let Some(rule) = &drift.rule {
        matchers.insert("rule".to_string(), rule.clone());
    }
    // Matchers are globs: a value holding `*` or `?` (a cluster name is any string an event
    // carries) would match other objects than this drift's.
    if matchers.values().any(|value| value.contains(['*', '?'])) {
        return Ok(error_page(
            StatusCode::BAD_REQUEST,
            "Not silenced",
            "This drift's names hold * or ?, which a silence reads as wildcards; silence it \
             through the API (POST /api/v1/silences) with matchers you choose.",
        ));
    }
    let expires = (state.clock)().saturating_add(drift_model::time::millis(
        std::time::Duration::from_secs(seconds),
    ));
    let silence = Silence {
        matchers,
        expires_at: Some(drift_model::time::format_time_offset(expires)),
        comment: form
            .comment
            .filter(|comment| !comment.trim().is_empty())
            .or(Some("silenced from the dashboard".into())),
    };
    if let Err(refused) = add_silence(&state, silence).await? {
        return Ok(error_page(
            StatusCode::CONFLICT,
            "Not silenced",
            &format!("{}.", refused.message()),
        ));
    }
    Ok(Redirect::to(&format!("/ui/drifts/{}?silenced=1", urlencode(&drift.id))).into_response())
}

/// The action a `manual` remediation rule offers for a firing drift, as a form that approves it
/// (`POST /ui/remediate`, the same decision as the API's), or nothing.
fn repair_form(state: &ApiState, drift: &Drift, remediated: bool) -> String {
    let done = if remediated {
        "<p id=\"remediated\"><strong>Approved.</strong> The attempt is in the table above.</p>"
    } else {
        ""
    };
    let policy = state.pipeline.remediation();
    let Some(rule) = policy.rule_for(drift) else {
        return done.to_string();
    };
    if drift.state != DriftState::Firing || rule.approval != Approval::Manual {
        return done.to_string();
    }
    let (label, what) = match rule.action {
        Action::Revert => (
            "Revert",
            "puts the drifted fields back to their previous values",
        ),
        Action::Rollback => ("Roll back", "pins the traffic to the last Ready Revision"),
        Action::Restore => ("Restore", "re-creates the object as last seen"),
        Action::DeleteOrphan => ("Delete", "deletes the orphaned object (uid precondition)"),
    };
    let mode = match policy.mode {
        Mode::Apply => "The request is sent to the cluster.",
        _ => "Dry run: the exact request is recorded, nothing is sent.",
    };
    format!(
        "<h2>Repair</h2>{done}<form method=\"post\" action=\"/ui/remediate\" id=\"remediate\">\
<input type=\"hidden\" name=\"drift\" value=\"{id}\"><input type=\"hidden\" name=\"action\" value=\"{action}\">\
<label>approved by <input name=\"approvedBy\" required maxlength=\"200\" size=\"30\"></label> \
<button>{label}</button></form><p class=\"muted\">Rule {rule}: {label} {what}. {mode}</p>",
        id = esc(&drift.id),
        action = rule.action.as_str(),
        rule = esc(&rule.name),
    )
}

/// The approval form of [`repair_form`].
#[derive(Debug, Deserialize)]
pub(super) struct RepairForm {
    drift: String,
    action: String,
    #[serde(rename = "approvedBy")]
    approved_by: String,
}

/// Approves a `manual` rule's action from the drift's page: the API's decision
/// ([`crate::api::remediate::approve`]), then back to the page.
pub(super) async fn remediate(
    State(state): State<ApiState>,
    form: Result<Form<RepairForm>, axum::extract::rejection::FormRejection>,
) -> Result<Response, ApiError> {
    let Ok(Form(form)) = form else {
        return Ok(error_page(
            StatusCode::BAD_REQUEST,
            "Not approved",
            "The form needs a drift, an action and who approves.",
        ));
    };
    let approved =
        match crate::api::remediate::approval(&form.drift, &form.action, &form.approved_by) {
            Ok(approval) => crate::api::remediate::approve(&state, approval).await,
            Err(error) => Err(error),
        };
    match approved {
        Ok(_) => Ok(Redirect::to(&format!(
            "/ui/drifts/{}?remediated=1",
            urlencode(&form.drift)
        ))
        .into_response()),
        Err(error) => Ok(error_page(error.status(), "Not approved", error.message())),
    }
}

/// The drift's remediation attempts: what was (or would have been) sent, and how it ended.
fn remediation_table(attempts: &[drift_model::remediation::Attempt]) -> String {
    let mut table = String::from(
        "<h2>Remediation</h2><table id=\"remediations\"><tr><th>At</th><th>Mode</th><th>Action</th>\
<th>Rule</th><th>Outcome</th><th>Request</th><th>Why</th></tr>",
    );
    for attempt in attempts {
        let request = attempt
            .request
            .as_ref()
            .map(|request| {
                format!(
                    "<code>{} {}</code><br><code>{}</code>",
                    esc(&request.method),
                    esc(&request.path),
                    esc(&request.body)
                )
            })
            .unwrap_or_else(|| "—".into());
        table.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            format_time(attempt.at),
            esc(&attempt.mode),
            esc(&attempt.action),
            esc(&attempt.rule),
            attempt.outcome.as_str(),
            request,
            esc(attempt.detail.as_deref().unwrap_or("")),
        ));
    }
    table.push_str("</table>");
    table
}
