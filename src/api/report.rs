//! The drift report: open drifts, counts by class, API group family and namespace, and time to
//! resolve, rendered as JSON, Markdown or HTML ([`build`] and the renderers are pure: the route
//! reads the store and passes the time in), and its route `GET /api/v1/report`. With `group`
//! (a family or one of its groups, `model::group`), every part covers only drifts of objects in
//! those API groups; the store filters.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::drifts::groups_of;
use super::{audit, blocking, query_error, ApiState};
use crate::error::ApiError;
use drift_model::time::format_time;
use drift_model::{group, Drift, Millis};

/// Time-to-resolve figures of one class.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResolveStats {
    /// Drifts that fired and resolved in the window.
    pub count: usize,
    /// Median seconds from firing to resolved.
    pub median_seconds: f64,
    /// 90th percentile.
    pub p90_seconds: f64,
}

/// An open drift, as listed.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OpenDrift {
    /// Drift id.
    pub id: String,
    /// Class.
    pub class: String,
    /// Severity.
    pub severity: String,
    /// pending or firing.
    pub state: String,
    /// Cluster.
    pub cluster: String,
    /// `Kind/namespace/name`.
    pub object: String,
    /// Summary.
    pub summary: String,
    /// First seen (RFC 3339).
    pub since: String,
}

/// The API groups a report covers (its `group` filter).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GroupScope {
    /// The filter as given: a family id or a group.
    pub filter: String,
    /// The groups it selects (`core` for the core group).
    pub groups: Vec<String>,
}

/// The report.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// When it was made.
    pub generated_at: String,
    /// Start of the time-to-resolve window.
    pub window_start: String,
    /// The API groups covered (`null`: all).
    pub group: Option<GroupScope>,
    /// Open drifts, most severe first.
    pub open: Vec<OpenDrift>,
    /// Open drifts per class.
    pub open_by_class: BTreeMap<String, usize>,
    /// Open drifts per API group family (`Serving`, `Eventing`, …, `Other`).
    pub open_by_group: BTreeMap<String, usize>,
    /// Open drifts per namespace.
    pub open_by_namespace: BTreeMap<String, usize>,
    /// Time to resolve per class, over the window.
    pub time_to_resolve: BTreeMap<String, ResolveStats>,
}

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The family name a drift's object is counted under (`Other` for a group of no family).
pub(crate) fn family_name(api_version: &str) -> &'static str {
    group::family_of(group::api_group(api_version))
        .map_or(group::OTHER_FAMILY, |family| family.name)
}

/// Builds the report (`group`: the filter the drifts were read with, if any).
pub fn build(
    open: &[Drift],
    resolved: &[Drift],
    window_start: Millis,
    now: Millis,
    group: Option<GroupScope>,
) -> Report {
    let mut open_sorted: Vec<&Drift> = open.iter().collect();
    open_sorted.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.since.cmp(&b.since))
            .then(a.id.cmp(&b.id))
    });
    let mut open_by_class = BTreeMap::new();
    let mut open_by_namespace = BTreeMap::new();
    let mut open_by_group = BTreeMap::new();
    for drift in open {
        *open_by_class.entry(drift.class.clone()).or_insert(0) += 1;
        *open_by_group
            .entry(family_name(&drift.api_version).to_string())
            .or_insert(0) += 1;
        *open_by_namespace
            .entry(drift.namespace.clone())
            .or_insert(0) += 1;
    }
    let mut durations: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for drift in resolved {
        if let (Some(fired), Some(resolved_at)) = (drift.fired_at, drift.resolved_at) {
            durations
                .entry(drift.class.clone())
                .or_default()
                .push((resolved_at - fired).max(0) as f64 / 1000.0);
        }
    }
    let time_to_resolve = durations
        .into_iter()
        .map(|(class, mut values)| {
            values.sort_by(|a, b| a.total_cmp(b));
            let stats = ResolveStats {
                count: values.len(),
                median_seconds: percentile(&values, 0.5),
                p90_seconds: percentile(&values, 0.9),
            };
            (class, stats)
        })
        .collect();
    Report {
        generated_at: format_time(now),
        window_start: format_time(window_start),
        group,
        open: open_sorted
            .into_iter()
            .map(|drift| OpenDrift {
                id: drift.id.clone(),
                class: drift.class.clone(),
                severity: drift.severity.as_str().to_string(),
                state: drift.state.as_str().to_string(),
                cluster: drift.cluster.clone(),
                object: format!("{}/{}/{}", drift.kind, drift.namespace, drift.name),
                summary: drift.evidence.summary.clone(),
                since: format_time(drift.since),
            })
            .collect(),
        open_by_class,
        open_by_group,
        open_by_namespace,
        time_to_resolve,
    }
}

/// The sentence that says which API groups a report covers (empty for all); plain text.
fn scope_text(report: &Report) -> String {
    match &report.group {
        None => String::new(),
        Some(scope) => format!(" API group {}: {}.", scope.filter, scope.groups.join(", ")),
    }
}

/// Human-readable duration.
pub(crate) fn duration_text(seconds: f64) -> String {
    let seconds = seconds.round() as i64;
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// Text for a Markdown table cell, escaped as `check`'s Markdown report escapes its cells
/// (`check/render/markdown.rs`, which this layer cannot import): no line break (a `<br>`), pipes
/// escaped, and no raw HTML, since a report is read where Markdown renders inline HTML (a
/// pull-request comment, a wiki) and object names, cluster names and summaries are anyone's.
fn markdown_cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        // `[text](url)` and `![alt](url)`: a link or an image (loaded where the report is read)
        // from anyone's value.
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace("\r\n", "<br>")
        .replace(['\n', '\r'], "<br>")
}

/// The report as Markdown.
pub fn markdown(report: &Report) -> String {
    let mut out = format!(
        "# Drift report\n\nGenerated {}.{} {} open drift(s).\n\n## Open drifts\n\n",
        report.generated_at,
        markdown_cell(&scope_text(report)),
        report.open.len()
    );
    if report.open.is_empty() {
        out.push_str("None.\n");
    } else {
        out.push_str("| Severity | State | Class | Cluster | Object | Since | Summary |\n|---|---|---|---|---|---|---|\n");
        for drift in &report.open {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                drift.severity,
                drift.state,
                markdown_cell(&drift.class),
                markdown_cell(&drift.cluster),
                markdown_cell(&drift.object),
                drift.since,
                markdown_cell(&drift.summary)
            ));
        }
    }
    out.push_str("\n## Open drifts by class\n\n| Class | Open |\n|---|---|\n");
    for (class, count) in &report.open_by_class {
        out.push_str(&format!("| {} | {count} |\n", markdown_cell(class)));
    }
    out.push_str("\n## Open drifts by API group\n\n| API group | Open |\n|---|---|\n");
    for (family, count) in &report.open_by_group {
        out.push_str(&format!("| {} | {count} |\n", markdown_cell(family)));
    }
    out.push_str("\n## Open drifts by namespace\n\n| Namespace | Open |\n|---|---|\n");
    for (namespace, count) in &report.open_by_namespace {
        out.push_str(&format!("| {} | {count} |\n", markdown_cell(namespace)));
    }
    out.push_str(&format!(
        "\n## Time to resolve (since {})\n\n| Class | Resolved | Median | p90 |\n|---|---|---|---|\n",
        report.window_start
    ));
    for (class, stats) in &report.time_to_resolve {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            markdown_cell(class),
            stats.count,
            duration_text(stats.median_seconds),
            duration_text(stats.p90_seconds)
        ));
    }
    // Object and server text may hold control characters: shown, never emitted raw.
    drift_model::text::show_controls(&out).into_owned()
}

/// What a query value keeps as it is: letters, digits and the other unreserved characters of
/// RFC 3986 (`-`, `.`, `_`, `~`).
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes text for a query value or a path segment (escape the result for HTML too).
pub(crate) fn url_component(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, QUERY_VALUE).to_string()
}

/// Escapes text for HTML, and shows control characters as `\u0000`-style escapes: the one
/// function every dashboard page and the HTML report escape object and server text with, so no
/// page can forget either.
pub(crate) fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Tabs and line breaks are text; every other control character (C0, DEL, C1), bidi
            // control, zero-width character and separator is shown as its escape, as JSON
            // writes it: invisible on the page (or reordering what is read around it), and
            // the reader must see that it is there (`drift_model::text::is_hidden`).
            hidden if drift_model::text::is_hidden(hidden) => {
                out.push_str(&format!("\\u{:04x}", u32::from(hidden)));
            }
            other => out.push(other),
        }
    }
    out
}

/// A cluster name for a page: escaped, and, when it is not printable ASCII, followed by its
/// code-point form (`prod-еu (prod-\u{435}u)`), so that two names that look alike (a Cyrillic
/// `е` for a Latin `e`, an invisible character) read differently. Ingest refuses such names
/// since issue 27; names stored before, and names of one non-Latin script, are shown this way.
pub(crate) fn cluster_html(name: &str) -> String {
    match drift_core::decode::cluster_name::escaped(name) {
        None => escape_html(name),
        Some(code_points) => format!(
            "{} <code class=\"cluster-code-points\" title=\"not ASCII: the name's code points\">({})</code>",
            escape_html(name),
            escape_html(&code_points)
        ),
    }
}

/// The report as a standalone HTML page.
pub fn html(report: &Report) -> String {
    let mut rows = String::new();
    for drift in &report.open {
        rows.push_str(&format!(
            "<tr class=\"sev-{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape_html(&drift.severity),
            escape_html(&drift.severity),
            escape_html(&drift.state),
            escape_html(&drift.class),
            cluster_html(&drift.cluster),
            escape_html(&drift.object),
            escape_html(&drift.since),
            escape_html(&drift.summary)
        ));
    }
    let counts = |map: &BTreeMap<String, usize>| {
        map.iter()
            .map(|(key, count)| format!("<tr><td>{}</td><td>{count}</td></tr>", escape_html(key)))
            .collect::<String>()
    };
    let resolve: String = report
        .time_to_resolve
        .iter()
        .map(|(class, stats)| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape_html(class),
                stats.count,
                duration_text(stats.median_seconds),
                duration_text(stats.p90_seconds)
            )
        })
        .collect();
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Drift report</title>\
<style>body{{font-family:system-ui,sans-serif;margin:2rem}}table{{border-collapse:collapse;margin-bottom:1.5rem}}\
td,th{{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}}.sev-critical td:first-child{{color:#b00020;font-weight:bold}}\
.sev-warning td:first-child{{color:#b36b00}}</style></head><body>\
<h1>Drift report</h1><p>Generated {}.{} {} open drift(s).</p>\
<h2>Open drifts</h2><table><tr><th>Severity</th><th>State</th><th>Class</th><th>Cluster</th><th>Object</th><th>Since</th><th>Summary</th></tr>{rows}</table>\
<h2>Open drifts by class</h2><table><tr><th>Class</th><th>Open</th></tr>{}</table>\
<h2>Open drifts by API group</h2><table><tr><th>API group</th><th>Open</th></tr>{}</table>\
<h2>Open drifts by namespace</h2><table><tr><th>Namespace</th><th>Open</th></tr>{}</table>\
<h2>Time to resolve (since {})</h2><table><tr><th>Class</th><th>Resolved</th><th>Median</th><th>p90</th></tr>{resolve}</table>\
</body></html>",
        escape_html(&report.generated_at),
        escape_html(&scope_text(report)),
        report.open.len(),
        counts(&report.open_by_class),
        counts(&report.open_by_group),
        counts(&report.open_by_namespace),
        escape_html(&report.window_start),
    )
}

// ---- The route ------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReportQuery {
    format: Option<String>,
    window: Option<String>,
    group: Option<String>,
}

/// Builds the report from the store; `group`: a `group` filter's value, already checked with
/// [`groups_of`] (a value it refuses is a `400` here too).
pub(crate) async fn build_report(
    state: &ApiState,
    window: std::time::Duration,
    group: Option<&str>,
) -> Result<Report, ApiError> {
    let groups = group.map(groups_of).transpose()?;
    let scope = group
        .zip(groups.as_ref())
        .map(|(filter, groups)| GroupScope {
            filter: filter.to_string(),
            groups: groups
                .iter()
                .map(|group| group::group_label(group).to_string())
                .collect(),
        });
    let reader = audit(state)?;
    let now = (state.clock)();
    let start = now - i64::try_from(window.as_millis()).unwrap_or(i64::MAX / 2);
    let (open, resolved) = blocking(move || {
        Ok((
            reader.open_drifts(groups.as_deref())?,
            reader.resolved_since(start, groups.as_deref())?,
        ))
    })
    .await?;
    Ok(build(&open, &resolved, start, now, scope))
}

pub(super) async fn report(
    State(state): State<ApiState>,
    query: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(query_error)?;
    let window = match &query.window {
        Some(text) => drift_model::time::parse_duration(text).map_err(|message| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("window: {message}"),
            )
        })?,
        None => std::time::Duration::from_secs(30 * 24 * 3600),
    };
    let report = build_report(&state, window, query.group.as_deref()).await?;
    Ok(match query.format.as_deref().unwrap_or("json") {
        "json" => Json(serde_json::to_value(&report).unwrap_or(Value::Null)).into_response(),
        "markdown" => (
            [(header::CONTENT_TYPE, "text/markdown; charset=utf-8")],
            markdown(&report),
        )
            .into_response(),
        "html" => (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            html(&report),
        )
            .into_response(),
        other => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("format: {other:?} is not json, markdown or html"),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_cells_carry_no_raw_html_and_stay_in_their_row() {
        let hostile = "<img src=x onerror=alert(1)>\n# heading | <script>alert(2)</script> [l](http://e) ![i](http://e/i.png)";
        let report = Report {
            generated_at: "2026-01-01T00:00:00Z".into(),
            window_start: "2025-12-01T00:00:00Z".into(),
            group: Some(GroupScope {
                filter: hostile.into(),
                groups: vec![hostile.into()],
            }),
            open: vec![OpenDrift {
                id: "d1".into(),
                class: "config_drift".into(),
                severity: "warning".into(),
                state: "firing".into(),
                cluster: hostile.into(),
                object: format!("ConfigMap/{hostile}/x"),
                summary: hostile.into(),
                since: "2026-01-01T00:00:00Z".into(),
            }],
            open_by_class: BTreeMap::from([(hostile.to_string(), 1)]),
            open_by_group: BTreeMap::from([(hostile.to_string(), 1)]),
            open_by_namespace: BTreeMap::from([(hostile.to_string(), 1)]),
            time_to_resolve: BTreeMap::from([(
                hostile.to_string(),
                ResolveStats {
                    count: 1,
                    median_seconds: 1.0,
                    p90_seconds: 1.0,
                },
            )]),
        };
        let text = markdown(&report);
        for raw in ["<img", "<script", "</script", "[l](", "![i]("] {
            assert!(!text.contains(raw), "{raw} in:\n{text}");
        }
        assert!(
            text.contains("&lt;img src=x onerror=alert(1)&gt;<br># heading \\| &lt;script&gt;"),
            "{text}"
        );
        // Every row of a table is one line: the hostile values neither end a row nor add one.
        let rows = text.lines().filter(|line| line.starts_with('|')).count();
        assert_eq!(rows, 2 + 1 + 2 + 1 + 2 + 1 + 2 + 1 + 2 + 1, "{text}");
    }
}
