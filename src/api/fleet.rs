//! The fleet view: `GET /api/v1/fleet` (JSON, `wire::fleet`) and the dashboard's `/ui/fleet`
//! (per group, a table per compared object: a row per path, a column per member cluster, the
//! differing values highlighted). Both read the snapshot the pipeline's writer publishes
//! (`pipeline::fleet_view`), never its queue: readers neither wait behind ingest nor delay it.

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::report::escape_html as esc;
use super::ApiState;
use crate::error::ApiError;
use drift_core::classify::fleet::{value_text, GroupView, WHOLE_OBJECT};
use drift_model::time::format_time;
use drift_model::wire::fleet::{
    FleetDriftRef, FleetGroupView, FleetMemberView, FleetObjectView, FleetRowView, FleetView,
};

/// The query of the fleet view and page: `?group=NAME` shows that group only.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FleetQuery {
    /// Only this group.
    pub group: Option<String>,
}

/// Which answer of a snapshot to render: the API's JSON or the page's body.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Format {
    Json,
    Html,
}

/// The fleet view (only `group` when set) rendered as `format`, from the snapshot the writer
/// publishes (`pipeline::fleet_view`): no read goes through the writer's queue. Each snapshot
/// renders each (format, group) once, however many readers ask; a group the config does not
/// have is rendered per request (a short answer) and not kept.
pub(crate) async fn rendered(
    state: &ApiState,
    group: Option<String>,
    format: Format,
) -> Result<std::sync::Arc<str>, ApiError> {
    let snapshot = state.pipeline.fleet_view().await;
    let render = move |groups: &[GroupView], only: Option<&str>| match format {
        Format::Json => serde_json::to_string(&wire(groups)).unwrap_or_default(),
        Format::Html => html(groups, only),
    };
    let known = match &group {
        None => true,
        Some(name) => snapshot.groups.iter().any(|view| &view.group.name == name),
    };
    if !known {
        return Ok(render(&[], group.as_deref()).into());
    }
    let key = format!("{format:?}:{}", group.as_deref().unwrap_or("*"));
    snapshot
        .rendered(key, move |snapshot| {
            let chosen: Vec<GroupView> = match &group {
                None => return render(&snapshot.groups, None),
                Some(name) => snapshot
                    .groups
                    .iter()
                    .filter(|view| &view.group.name == name)
                    .cloned()
                    .collect(),
            };
            render(&chosen, group.as_deref())
        })
        .await
        .ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal error",
            )
        })
}

/// The view as the API shows it.
pub(crate) fn wire(groups: &[GroupView]) -> FleetView {
    FleetView {
        groups: groups
            .iter()
            .map(|view| {
                let objects: Vec<FleetObjectView> = view
                    .objects
                    .iter()
                    .map(|object| FleetObjectView {
                        key: object.object.key(),
                        api_version: object.object.api_version.clone(),
                        kind: object.object.kind.clone(),
                        namespace: object.object.namespace.clone(),
                        name: object.object.name.clone(),
                        divergent: object.divergent(),
                        not_reported: object.not_reported.clone(),
                        drift: object.drift.as_ref().map(|(id, state)| FleetDriftRef {
                            id: id.clone(),
                            state: state.as_str(),
                        }),
                        rows: object
                            .rows
                            .iter()
                            .map(|row| {
                                let cells = || view.members.iter().zip(&row.values);
                                FleetRowView {
                                    path: row.path.clone(),
                                    differs: row.differs,
                                    // A member that never reported the object has no value.
                                    values: cells()
                                        .filter(|(_, cell)| cell.reported)
                                        .map(|(member, cell)| {
                                            (
                                                member.cluster.clone(),
                                                cell.value.clone().unwrap_or(Value::Null),
                                            )
                                        })
                                        .collect(),
                                    highlighted: cells()
                                        .filter(|(_, cell)| cell.highlighted)
                                        .map(|(member, _)| member.cluster.clone())
                                        .collect(),
                                }
                            })
                            .collect(),
                    })
                    .collect();
                FleetGroupView {
                    name: view.group.name.clone(),
                    clusters: view.group.clusters.clone(),
                    severity: view.group.severity.as_str(),
                    grace_seconds: view.group.grace.as_secs(),
                    members: view
                        .members
                        .iter()
                        .map(|member| FleetMemberView {
                            cluster: member.cluster.clone(),
                            last_event: member.last_event.map(format_time),
                        })
                        .collect(),
                    divergent: view.divergent,
                    truncated: view.truncated,
                    objects,
                }
            })
            .collect(),
    }
}

/// `GET /api/v1/fleet`.
pub(super) async fn get_fleet(
    State(state): State<ApiState>,
    query: Result<Query<FleetQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(super::query_error)?;
    let body = rendered(&state, query.group, Format::Json).await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response())
}

/// The body of `/ui/fleet` (`only`: the `?group=` asked for): per group, its members and a
/// table per compared object, divergent objects first, only the cells that differ from what
/// most members hold highlighted, and `not reported` for a member that never reported the
/// object. Every value comes from a cluster and is escaped.
pub(crate) fn html(groups: &[GroupView], only: Option<&str>) -> String {
    let mut body = String::from("<h1>Fleet</h1>");
    if let (Some(_), true) = (only, groups.is_empty()) {
        // The dashboard never repeats a value it cannot use (README): the name asked for is
        // not shown back.
        body.push_str(
            "<p class=\"muted\">No fleet group by that name: <a href=\"/ui/fleet\">every group</a>.</p>",
        );
        return body;
    }
    if groups.is_empty() {
        body.push_str(
            "<p class=\"muted\">No fleet groups: set <code>fleet.groups</code> in the config \
             to compare clusters that should be alike.</p>",
        );
        return body;
    }
    for view in groups {
        let group = &view.group;
        body.push_str(&format!(
            "<section class=\"fleet-group\" id=\"group-{name}\"><h2><a href=\"/ui/fleet?group={link}\">{name}</a></h2><p class=\"muted\">clusters {globs} · {severity} after {grace} · {divergent} of {objects} object(s) differ</p>",
            name = esc(&group.name),
            link = esc(&group.name),
            globs = esc(&group.clusters.join(", ")),
            severity = group.severity.as_str(),
            grace = super::report::duration_text(group.grace.as_secs_f64()),
            divergent = view.divergent,
            objects = view.objects.len() + view.truncated,
        ));
        if view.truncated > 0 {
            body.push_str(&format!(
                "<p class=\"muted\">{} more object(s) not shown (at most {} per group, divergent ones first).</p>",
                view.truncated,
                drift_core::classify::fleet::MAX_VIEW_OBJECTS
            ));
        }
        body.push_str("<table class=\"members\"><tr><th>Member</th><th>Last event</th></tr>");
        for member in &view.members {
            body.push_str(&format!(
                "<tr><td>{}</td><td>{}</td></tr>",
                super::report::cluster_html(&member.cluster),
                member
                    .last_event
                    .map(format_time)
                    .unwrap_or_else(|| "—".into())
            ));
        }
        body.push_str("</table>");
        // Divergent objects come first already (the engine's view orders them so).
        for object in &view.objects {
            let key = object.object.key();
            let drift = match &object.drift {
                Some((id, state)) => format!(
                    " <a class=\"{state}\" href=\"/ui/drifts/{id}\">{state}</a>",
                    state = state.as_str(),
                    id = esc(id)
                ),
                None => String::new(),
            };
            body.push_str(&format!(
                "<h3>{}{drift}</h3><table class=\"fleet\" data-object=\"{}\"><tr><th>Path</th>",
                esc(&key),
                esc(&key)
            ));
            for member in &view.members {
                body.push_str(&format!(
                    "<th>{}</th>",
                    super::report::cluster_html(&member.cluster)
                ));
            }
            body.push_str("</tr>");
            for row in &object.rows {
                let path = if row.path == WHOLE_OBJECT {
                    "(object)".to_string()
                } else {
                    row.path.clone()
                };
                body.push_str(&format!(
                    "<tr{}><td><code>{}</code></td>",
                    if row.differs {
                        " class=\"differs\""
                    } else {
                        ""
                    },
                    esc(&path)
                ));
                for (member, cell) in view.members.iter().zip(&row.values) {
                    if !cell.reported {
                        body.push_str(&format!(
                            "<td data-cluster=\"{}\" class=\"unreported\"><em>not reported</em></td>",
                            esc(&member.cluster)
                        ));
                        continue;
                    }
                    body.push_str(&format!(
                        "<td data-cluster=\"{}\"{}><code>{}</code></td>",
                        esc(&member.cluster),
                        if cell.highlighted {
                            " class=\"diff\""
                        } else {
                            ""
                        },
                        esc(&value_text(cell.value.as_ref()))
                    ));
                }
                body.push_str("</tr>");
            }
            body.push_str("</table>");
        }
        body.push_str("</section>");
    }
    body
}
