//! The dashboard (`/ui`): server-rendered HTML, no build step, no JavaScript. The front page
//! opens with an overview (firing drifts by severity, API group family and namespace, and a chart
//! of drifts fired and resolved per day: [`super::overview`]) above the drifts with filters
//! (state, class, severity, API group, namespace, cluster); a drift's page shows its diff, actor,
//! failing condition chain, hint, history and delivery status, and a form to silence it; and
//! the report. Pages refresh themselves every 15 seconds. With `api.token` set, the page takes
//! the token once as `?token=` and keeps it in an HttpOnly, SameSite=Strict cookie (`Secure` when
//! served over HTTPS).
//!
//! The front page also shows resync (the pass running, the last pass and its counts) with a
//! "Re-check now" button that starts a pass as `POST /api/v1/resync` does.
//!
//! The silence form and the re-check button are the two writes. A browser's cross-origin post is
//! refused before anything else looks at it ([`super::browser`]), with or without a token. The
//! silence form carries only the drift's id, a duration and a comment: the silence's matchers are
//! the stored drift's own (class, cluster, namespace, kind, name), so no field of a forged form
//! can widen it, and the duration is one of the form's choices. The re-check button carries
//! nothing: a forged one could only start a pass, which the origin check refuses too.

use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

mod drift_page;
mod split;

use super::drifts::{filter, DriftQuery};
use super::overview;
use super::report::{build_report, cluster_html, escape_html as esc};
use super::{audit, blocking, ApiState};
use crate::error::ApiError;
use crate::ingest::auth::{bearer, same_secret};
use crate::pipeline::{ResyncStatus, ResyncTrigger, StartError};
use drift_model::time::format_time;
use drift_model::{group, Drift};

/// The `/ui` routes.
pub fn routes(state: ApiState) -> Router<ApiState> {
    Router::new()
        .route("/", get(index))
        .route("/drifts/{id}", get(drift_page::detail))
        .route("/silences", post(drift_page::silence))
        .route("/remediate", post(drift_page::remediate))
        .route("/resync", post(resync))
        .route("/report", get(report))
        .route("/fleet", get(fleet))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        // Outermost: a cross-origin write is refused whatever cookie it carries.
        .layer(middleware::from_fn_with_state(state, refuse_cross_origin))
}

/// A dashboard page that says what went wrong (`message` is escaped here).
fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = format!(
        "<h1>{}</h1><p>{}</p><p><a href=\"/ui\">Back to the drifts</a></p>",
        esc(title),
        esc(message)
    );
    (status, Html(document(title, &body, false))).into_response()
}

async fn refuse_cross_origin(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    match super::browser::same_origin(&request, state.public_url.as_deref()) {
        Ok(()) => next.run(request).await,
        Err(reason) => {
            tracing::warn!(message = "Refused a cross-origin write.", path = %request.uri().path(), reason);
            error_page(
                StatusCode::FORBIDDEN,
                "Refused",
                &format!("This form must be sent from the dashboard itself: {reason}."),
            )
        }
    }
}

const COOKIE: &str = "ds_token";

fn cookie_token(request: &Request) -> Option<String> {
    let cookies = request.headers().get(header::COOKIE)?.to_str().ok()?;
    cookies
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
}

async fn require_token(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    let Some(expected) = state.token.clone() else {
        return next.run(request).await;
    };
    let from_query = request
        .uri()
        .query()
        .and_then(|query| {
            query
                .split('&')
                .find_map(|pair| pair.strip_prefix("token="))
        })
        .map(|value| {
            percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .to_string()
        });
    if let Some(given) = from_query {
        if same_secret(&given, expected.expose()) {
            // Keep the token out of the address bar and history.
            let path = request.uri().path().to_string();
            let mut response = Redirect::to(&format!(
                "/ui{}",
                if path == "/" { String::new() } else { path }
            ))
            .into_response();
            // `Secure` over HTTPS keeps the browser from sending the token over plain HTTP; over
            // plain HTTP (a port-forward, a local run) the cookie could not be set with it.
            let secure = if super::browser::served_over_https(
                request.headers(),
                state.public_url.as_deref(),
            ) {
                "; Secure"
            } else {
                ""
            };
            if let Ok(cookie) = HeaderValue::from_str(&format!(
                "{COOKIE}={given}; HttpOnly; SameSite=Strict; Path=/ui{secure}"
            )) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            return response;
        }
    }
    let ok = bearer(request.headers()).is_some_and(|given| same_secret(given, expected.expose()))
        || cookie_token(&request).is_some_and(|given| same_secret(&given, expected.expose()));
    if ok {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            Html(page(
                "Sign in",
                "<p>This dashboard needs the API token: open <code>/ui?token=…</code>.</p>",
            )),
        )
            .into_response()
    }
}

fn page(title: &str, body: &str) -> String {
    document(title, body, true)
}

/// A page; `refresh`: whether it reloads itself every 15 seconds (not an error page, whose
/// address may be the form's, which a reload would fetch with `GET`).
fn document(title: &str, body: &str, refresh: bool) -> String {
    let refresh = if refresh {
        "<meta http-equiv=\"refresh\" content=\"15\">"
    } else {
        ""
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">{refresh}\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{} · drift-sentinel</title><style>\
body{{font-family:system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}}header{{background:#1d3557;color:#fff;padding:.8rem 1.5rem}}\
header a{{color:#fff;margin-right:1rem;text-decoration:none}}main{{padding:1rem 1.5rem}}table{{border-collapse:collapse;width:100%;background:#fff}}\
td,th{{border-bottom:1px solid #e3e6ea;padding:.4rem .6rem;text-align:left;vertical-align:top}}th{{background:#eef1f5}}\
.critical{{color:#b00020;font-weight:600}}.warning{{color:#b36b00;font-weight:600}}.info{{color:#37699e}}\
.firing{{background:#fde8ea}}.pending{{background:#fff7e0}}pre{{background:#fff;border:1px solid #e3e6ea;padding:.6rem;overflow:auto}}\
form.filters label{{margin-right:.8rem}}.muted{{color:#69727d}}\
.tiles{{display:flex;gap:.8rem;flex-wrap:wrap;margin:.4rem 0 1rem}}.tile{{display:block;min-width:8.5rem;padding:.7rem 1rem;border-radius:6px;color:#fff;text-decoration:none;font-size:1.05rem}}\
.tile .n{{display:block;font-size:2rem;font-weight:700;line-height:1.1}}.tile-critical{{background:#b00020}}.tile-warning{{background:#b36b00}}.tile-info{{background:#37699e}}\
.tile.zero{{background:#e3e6ea;color:#4a525b}}.panels{{display:flex;gap:1rem;flex-wrap:wrap;align-items:flex-start;margin-bottom:1.2rem}}\
.panel{{background:#fff;border:1px solid #e3e6ea;border-radius:6px;padding:.6rem .9rem;flex:1 1 16rem}}.panel.chart{{flex:3 1 30rem}}.panel h2{{font-size:1rem;margin:.2rem 0 .5rem}}\
table.bars td,table.bars th{{border:0;padding:.2rem .4rem;background:none;font-weight:normal}}table.bars td.n{{text-align:right;font-weight:600}}\
.barcell{{width:45%}}.bar{{display:inline-block;height:.7rem;background:#5c7ea8;border-radius:2px}}\
.chart svg{{width:100%;height:auto;max-width:760px}}table.fleet{{margin-bottom:1rem}}table.fleet tr.differs td.diff{{background:#fde8ea;font-weight:600}}table.fleet td.unreported{{color:#888}}\
table.members{{width:auto;margin-bottom:.6rem}}ol.chain li{{margin:.3rem 0}}</style></head><body><header><strong>drift-sentinel</strong> \
<a href=\"/ui\">Drifts</a><a href=\"/ui?state=resolved\">Resolved</a><a href=\"/ui/report\">Report</a><a href=\"/ui/fleet\">Fleet</a></header><main>{}</main></body></html>",
        esc(title),
        body
    )
}

fn select(name: &str, current: Option<&str>, options: &[&str]) -> String {
    let labelled: Vec<(&str, &str)> = options.iter().map(|option| (*option, *option)).collect();
    select_labelled(name, current, &labelled)
}

/// A `<select>` whose options are (value, label) pairs.
fn select_labelled(name: &str, current: Option<&str>, options: &[(&str, &str)]) -> String {
    let mut html = format!("<label>{name} <select name=\"{name}\"><option value=\"\">any</option>");
    for (value, label) in options {
        let selected = if current == Some(*value) {
            " selected"
        } else {
            ""
        };
        html.push_str(&format!(
            "<option value=\"{}\"{selected}>{}</option>",
            esc(value),
            esc(label)
        ));
    }
    html.push_str("</select></label>");
    html
}

/// The filters the dashboard takes, in its own words: a bad filter gets a page that says what the
/// dashboard takes, never the value given (the page is HTML; a value could be markup).
fn bad_filter(field: Option<&str>) -> Response {
    let what = match field {
        Some("state") => "state must be open, pending, firing or resolved.".to_string(),
        Some("class") => format!(
            "class must be a drift class: {}.",
            drift_core::classify::classes::REGISTRY
                .iter()
                .map(|class| class.id())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some("severity") => format!(
            "severity must be one of {}.",
            drift_model::SEVERITIES.join(", ")
        ),
        Some("group") => format!(
            "group must be an API group family or one of its groups: {}.",
            drift_model::group::filter_values().join(", ")
        ),
        Some(other) => format!("{other} is not valid."),
        None => "The address holds a parameter this page does not take, or one it cannot read. \
                 The drift list takes state, class, severity, group, cluster and namespace."
            .to_string(),
    };
    error_page(StatusCode::BAD_REQUEST, "Invalid filter", &what)
}

/// A page other than the drift list given a parameter it does not take (or cannot read): the
/// page says what it takes, in its own words, never the value given.
pub(super) fn bad_parameter(takes: &str) -> Response {
    let what = format!(
        "The address holds a parameter this page does not take, or one it cannot read. {takes}"
    );
    error_page(StatusCode::BAD_REQUEST, "Invalid filter", &what)
}

async fn index(
    State(state): State<ApiState>,
    query: Result<Query<DriftQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Ok(Query(mut query)) = query else {
        return Ok(bad_filter(None));
    };
    for field in [
        &mut query.state,
        &mut query.class,
        &mut query.severity,
        &mut query.cluster,
        &mut query.namespace,
        &mut query.group,
    ] {
        if field.as_deref() == Some("") {
            *field = None;
        }
    }
    if query.state.is_none() {
        query.state = Some("open".to_string());
    }
    let filter = match filter(&query) {
        Ok(filter) => filter,
        Err(invalid) => return Ok(bad_filter(Some(invalid.field))),
    };
    let reader = audit(&state)?;
    let chart_start = overview::window_start((state.clock)());
    let (drifts, counts, days) = blocking(move || {
        Ok((
            reader.drifts(&filter)?.0,
            reader.firing_counts()?,
            reader.moves_per_day(chart_start, overview::DAYS)?,
        ))
    })
    .await?;
    let mut body = overview::html(&overview::build(&counts, days));
    body.push_str(&resync_panel(&state.resync.status()));
    body.push_str(&format!(
        "<h1>Drifts</h1><form class=\"filters\" method=\"get\" action=\"/ui\">{}{}{}{}<label>namespace <input name=\"namespace\" value=\"{}\"></label>\
<label>cluster <input name=\"cluster\" value=\"{}\"></label><button>Filter</button></form><p class=\"muted\">{} drift(s){}</p>",
        select("state", query.state.as_deref(), &["open", "pending", "firing", "resolved"]),
        // Classes by their English names; the value is the id the API takes.
        select_labelled(
            "class",
            query.class.as_deref(),
            &drift_core::classify::classes::REGISTRY
                .iter()
                .map(|class| (class.id(), class.info().english))
                .collect::<Vec<_>>(),
        ),
        select("severity", query.severity.as_deref(), drift_model::SEVERITIES),
        group_select(query.group.as_deref()),
        esc(query.namespace.as_deref().unwrap_or_default()),
        esc(query.cluster.as_deref().unwrap_or_default()),
        drifts.len(),
        // The filter is one the API takes (checked above), so it is safe in the address.
        query.group.as_deref().map_or(String::new(), |group| format!(
            " · <a href=\"/ui/report?group={}\">report of these API groups</a>",
            esc(&super::report::url_component(group))
        )),
    ));
    body.push_str("<table id=\"drifts\"><tr><th>Severity</th><th>State</th><th>Class</th><th>API group</th><th>Object</th><th>Cluster</th><th>Since</th><th>Summary</th></tr>");
    for drift in &drifts {
        body.push_str(&row(drift));
    }
    body.push_str("</table>");
    Ok(Html(page("Drifts", &body)).into_response())
}

/// The resync panel: the pass running or the last one, and the button that starts one now.
fn resync_panel(status: &ResyncStatus) -> String {
    let mut html = String::from(
        "<section class=\"panel\" id=\"resync\" aria-labelledby=\"resync-title\"><h2 id=\"resync-title\">Resync</h2>",
    );
    if !status.enabled {
        html.push_str(
            "<p class=\"muted\">Resync is off: no cluster access is configured \
             (<code>resync.enabled</code>, <code>resync.kubeconfig</code>).</p></section>",
        );
        return html;
    }
    let started_by = |trigger: ResyncTrigger| match trigger {
        ResyncTrigger::Schedule => "on schedule",
        ResyncTrigger::Api => "on request",
    };
    if let Some(running) = &status.running {
        html.push_str(&format!(
            "<p id=\"resync-running\"><strong>Running</strong> since {} ({}): {} of {} resource(s) listed, {} object(s) so far.</p>",
            format_time(running.started_at),
            started_by(running.trigger),
            running.resources_done,
            running.resources,
            running.listed,
        ));
    }
    match &status.last {
        Some(pass) => {
            let errors = if pass.errors.is_empty() {
                String::new()
            } else {
                format!(
                    "; errors: {}",
                    esc(&pass
                        .errors
                        .iter()
                        .map(|(kind, count)| format!("{kind} ×{count}"))
                        .collect::<Vec<_>>()
                        .join(", "))
                )
            };
            html.push_str(&format!(
                "<p id=\"resync-last\">Last pass <strong>{outcome}</strong> at {at} ({by}): {listed} listed, {missed} missed, {deleted} deleted, {drifts} drift(s) found{errors}.</p>",
                outcome = pass.outcome.as_str(),
                at = format_time(pass.finished_at),
                by = started_by(pass.trigger),
                listed = pass.listed,
                missed = pass.missed,
                deleted = pass.deleted,
                drifts = pass.drifts_found_total(),
            ));
            if let Some(error) = &pass.first_error {
                html.push_str(&format!(
                    "<p class=\"muted\" id=\"resync-error\">First error: {}</p>",
                    esc(error)
                ));
            }
        }
        None if status.running.is_none() => {
            html.push_str("<p class=\"muted\" id=\"resync-last\">No pass has ended yet.</p>");
        }
        None => {}
    }
    if let Some(next) = status.next_at {
        html.push_str(&format!(
            "<p class=\"muted\">Next scheduled pass at {}.</p>",
            format_time(next)
        ));
    }
    let button = if status.running.is_some() {
        "<button disabled>Re-check running…</button>"
    } else {
        "<button>Re-check now</button>"
    };
    html.push_str(&format!(
        "<form method=\"post\" action=\"/ui/resync\" id=\"resync-form\">{button}</form></section>"
    ));
    html
}

/// The "Re-check now" button: starts a resync pass, then back to the front page, which shows it
/// running.
async fn resync(State(state): State<ApiState>) -> Response {
    match super::resync::start(&state) {
        Ok(_) => Redirect::to("/ui").into_response(),
        Err(StartError::Off) => error_page(
            StatusCode::CONFLICT,
            "Not started",
            "Resync is off: no cluster access is configured (resync.enabled, resync.kubeconfig).",
        ),
        Err(StartError::Stopped) => error_page(
            StatusCode::CONFLICT,
            "Not started",
            "Resync has stopped: the service is shutting down or its resync loop ended (see the log).",
        ),
        Err(StartError::Running(_)) => error_page(
            StatusCode::CONFLICT,
            "Not started",
            "A resync pass is already running; the front page shows its progress.",
        ),
    }
}

/// The API group filter: the families, then each family's groups.
fn group_select(current: Option<&str>) -> String {
    let mut html = String::from(
        "<label>group <select name=\"group\"><option value=\"\">any</option><optgroup label=\"Families\">",
    );
    let option = |value: &str, label: &str| {
        let selected = if current == Some(value) {
            " selected"
        } else {
            ""
        };
        format!(
            "<option value=\"{}\"{selected}>{}</option>",
            esc(value),
            esc(label)
        )
    };
    for family in group::FAMILIES {
        html.push_str(&option(family.id, family.name));
    }
    html.push_str("</optgroup><optgroup label=\"API groups\">");
    for family in group::FAMILIES {
        for api_group in family.groups {
            let label = group::group_label(api_group);
            html.push_str(&option(label, label));
        }
    }
    html.push_str("</optgroup></select></label>");
    html
}

/// The class as the dashboard shows it: `invariant rule-name` for a team invariant's drift.
fn class_of(drift: &Drift) -> String {
    match &drift.rule {
        Some(rule) => format!("{} {rule}", drift.class),
        None => drift.class.clone(),
    }
}

fn row(drift: &Drift) -> String {
    let api_group = group::api_group(&drift.api_version);
    format!(
        "<tr class=\"{state}\"><td class=\"{sev}\">{sev}</td><td>{state}</td><td>{class}</td><td title=\"{group}\">{family}</td><td><a href=\"/ui/drifts/{id}\">{kind} {ns}/{name}</a></td><td>{cluster}</td><td>{since}</td><td>{summary}</td></tr>",
        state = drift.state.as_str(),
        sev = drift.severity.as_str(),
        class = esc(&class_of(drift)),
        group = esc(group::group_label(api_group)),
        family = esc(super::report::family_name(&drift.api_version)),
        id = esc(&drift.id),
        kind = esc(&drift.kind),
        ns = esc(&drift.namespace),
        name = esc(&drift.name),
        cluster = cluster_html(&drift.cluster),
        since = format_time(drift.since),
        summary = esc(&drift.evidence.summary),
    )
}

fn urlencode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The fleet page: the view the writer published, as [`super::fleet::html`] shows it.
async fn fleet(
    State(state): State<ApiState>,
    query: Result<Query<super::fleet::FleetQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Ok(Query(query)) = query else {
        return Ok(bad_parameter(
            "The fleet page takes group, the name of a fleet group.",
        ));
    };
    let body = super::fleet::rendered(&state, query.group, super::fleet::Format::Html).await?;
    Ok(Html(page("Fleet", &body)).into_response())
}

/// The dashboard report's query: only the API group.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportQuery {
    group: Option<String>,
}

async fn report(
    State(state): State<ApiState>,
    query: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Ok(Query(query)) = query else {
        return Ok(bad_parameter(
            "The report takes group, an API group family or one of its groups.",
        ));
    };
    let group = query.group.filter(|group| !group.is_empty());
    if let Some(group) = &group {
        if super::drifts::groups_of(group).is_err() {
            return Ok(bad_filter(Some("group")));
        }
    }
    let report = build_report(
        &state,
        std::time::Duration::from_secs(30 * 24 * 3600),
        group.as_deref(),
    )
    .await?;
    Ok(Html(super::report::html(&report)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{FinishedPass, PassOutcome};

    #[test]
    fn the_resync_panel_shows_control_characters_of_the_servers_error_as_escapes() {
        let status = ResyncStatus {
            enabled: true,
            running: None,
            last: Some(FinishedPass {
                trigger: ResyncTrigger::Schedule,
                started_at: 0,
                finished_at: 10,
                outcome: PassOutcome::Incomplete,
                listed: 0,
                missed: 0,
                deleted: 0,
                drifts_found: Default::default(),
                rejected: 0,
                conflicts: 0,
                errors: [("api\u{1b}[2J".to_string(), 1)].into(),
                first_error: Some("configmaps: \u{1b}[31mforbidden\u{0}\u{9b}".to_string()),
            }),
            next_at: None,
            stopped: false,
        };
        let html = resync_panel(&status);
        assert!(
            !html.chars().any(char::is_control),
            "raw control character in {html:?}"
        );
        assert!(
            html.contains("configmaps: \\u001b[31mforbidden\\u0000\\u009b"),
            "{html}"
        );
        assert!(html.contains("api\\u001b[2J ×1"), "{html}");
    }

    #[test]
    fn every_page_escapes_control_characters_but_keeps_tabs_and_line_breaks() {
        assert_eq!(
            esc("a\u{0}b\u{1b}c\u{7f}d\te\nf\r<"),
            "a\\u0000b\\u001bc\\u007fd\te\nf\\u000d&lt;"
        );
        // A bidi override or isolate, a zero-width space and a line separator too (found in
        // the re-review: they reached the page raw); other non-ASCII text stays.
        assert_eq!(
            esc("a\u{202e}b\u{2066}c\u{200b}d\u{2028}e\u{2029}прод"),
            "a\\u202eb\\u2066c\\u200bd\\u2028e\\u2029прод"
        );
    }
}
