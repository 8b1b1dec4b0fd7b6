//! The fleet view: `GET /api/v1/fleet` (JSON, `wire::fleet`) and the dashboard's `/ui/fleet`
//! (per group, a table per compared object: a row per path, a column per member cluster, the
//! differing values highlighted). Both ask the pipeline's writer, which owns the engine's state,
//! for the view between two rounds; the event path does no work for it.

use axum::extract::{Query, State};
use axum::Json;
use serde_json::Value;

use super::report::escape_html as esc;
use super::{no_query, ApiState, NoQuery};
use crate::classify::fleet::{value_text, GroupView, WHOLE_OBJECT};
use crate::ingest::ApiError;
use crate::time::format_time;
use crate::wire::fleet::{
    FleetDriftRef, FleetGroupView, FleetMemberView, FleetObjectView, FleetRowView, FleetView,
};

/// The engine's fleet view, from the writer.
pub(crate) async fn view(state: &ApiState) -> Result<Vec<GroupView>, ApiError> {
    let receiver = state
        .pipeline
        .fleet()
        .map_err(|error| ApiError::unavailable(&error))?;
    receiver
        .await
        .map_err(|_| ApiError::unavailable(&crate::pipeline::Error::Stopped))
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
                        divergent: object.rows.iter().any(|row| row.differs),
                        drift: object.drift.as_ref().map(|(id, state)| FleetDriftRef {
                            id: id.clone(),
                            state: state.as_str(),
                        }),
                        rows: object
                            .rows
                            .iter()
                            .map(|row| FleetRowView {
                                path: row.path.clone(),
                                differs: row.differs,
                                values: view
                                    .members
                                    .iter()
                                    .zip(&row.values)
                                    .map(|(member, value)| {
                                        (
                                            member.cluster.clone(),
                                            value.clone().unwrap_or(Value::Null),
                                        )
                                    })
                                    .collect(),
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
                    divergent: objects.iter().filter(|object| object.divergent).count(),
                    objects,
                }
            })
            .collect(),
    }
}

/// `GET /api/v1/fleet`.
pub(super) async fn get_fleet(
    State(state): State<ApiState>,
    query: Result<Query<NoQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<FleetView>, ApiError> {
    no_query(query)?;
    Ok(Json(wire(&view(&state).await?)))
}

/// The body of `/ui/fleet`: per group, its members and a table per compared object, divergent
/// objects first. Every value comes from a cluster and is escaped.
pub(crate) fn html(groups: &[GroupView]) -> String {
    let mut body = String::from("<h1>Fleet</h1>");
    if groups.is_empty() {
        body.push_str(
            "<p class=\"muted\">No fleet groups: set <code>fleet.groups</code> in the config \
             to compare clusters that should be alike.</p>",
        );
        return body;
    }
    for view in groups {
        let group = &view.group;
        let divergent = view
            .objects
            .iter()
            .filter(|object| object.rows.iter().any(|row| row.differs))
            .count();
        body.push_str(&format!(
            "<section class=\"fleet-group\" id=\"group-{name}\"><h2>{name}</h2><p class=\"muted\">clusters {globs} · {severity} after {grace}s · {divergent} of {objects} object(s) differ</p>",
            name = esc(&group.name),
            globs = esc(&group.clusters.join(", ")),
            severity = group.severity.as_str(),
            grace = group.grace.as_secs(),
            objects = view.objects.len(),
        ));
        body.push_str("<table class=\"members\"><tr><th>Member</th><th>Last event</th></tr>");
        for member in &view.members {
            body.push_str(&format!(
                "<tr><td>{}</td><td>{}</td></tr>",
                esc(&member.cluster),
                member
                    .last_event
                    .map(format_time)
                    .unwrap_or_else(|| "—".into())
            ));
        }
        body.push_str("</table>");
        let mut objects: Vec<_> = view.objects.iter().collect();
        // Divergent objects first, each group of them in key order.
        objects.sort_by_key(|object| !object.rows.iter().any(|row| row.differs));
        for object in objects {
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
                body.push_str(&format!("<th>{}</th>", esc(&member.cluster)));
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
                for (member, value) in view.members.iter().zip(&row.values) {
                    body.push_str(&format!(
                        "<td data-cluster=\"{}\"{}><code>{}</code></td>",
                        esc(&member.cluster),
                        if row.differs { " class=\"diff\"" } else { "" },
                        esc(&value_text(value.as_ref()))
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
