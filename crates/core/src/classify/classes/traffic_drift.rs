//! `traffic_drift`: the traffic a Service or Route actually serves (`status.traffic`) is not the
//! traffic its spec asks for, beyond `tolerancePercent` per Revision; or a tag is missing; or the
//! served percents do not add up to 100. Also: a Route owned by a Service whose `spec.traffic` no
//! longer matches the Service's (someone edited the Route by hand).
//!
//! Spec targets are resolved as Knative resolves them: `latestRevision: true` (the default when
//! no `revisionName` is given) means the Service's, or the named Configuration's,
//! `latestReadyRevisionName`. No verdict is given while the status is older than the spec
//! (`generation_lag` covers that) and any open drift clears during a gradual rollout, when the
//! split moves on purpose.

use std::collections::BTreeMap;

use serde_json::Value;

use super::*;
use crate::classify::evidence::hint::{describe, shell_quote};

/// The class.
pub(crate) struct TrafficDrift;

#[derive(Debug, Clone, PartialEq)]
struct Target {
    tag: Option<String>,
    revision: Option<String>,
    configuration: Option<String>,
    latest: bool,
    percent: f64,
}

fn targets(value: Option<&Value>) -> Vec<Target> {
    let Some(Value::Array(items)) = value else {
        return Vec::new();
    };
    items
        .iter()
        .map(|item| {
            let text = |key: &str| {
                item.get(key)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            };
            let revision = text("revisionName");
            let latest = item
                .get("latestRevision")
                .and_then(Value::as_bool)
                .unwrap_or(revision.is_none());
            Target {
                tag: text("tag"),
                revision,
                configuration: text("configurationName"),
                latest,
                percent: item.get("percent").and_then(Value::as_f64).unwrap_or(0.0),
            }
        })
        .collect()
}

fn is_rolling_out(object: &ObjectState) -> bool {
    object
        .conditions()
        .iter()
        .any(|condition| condition.reason == "RolloutInProgress" && condition.status == "Unknown")
}

impl TrafficDrift {
    fn resolve(
        &self,
        context: &Context<'_>,
        object: &ObjectState,
        target: &Target,
    ) -> Option<String> {
        if !target.latest {
            return target.revision.clone();
        }
        let latest_ready = |owner: &ObjectState| {
            owner
                .status_field("latestReadyRevisionName")
                .and_then(|name| name.as_str().map(str::to_string))
        };
        if object.kind == "Service" {
            return latest_ready(object);
        }
        let configuration = target.configuration.as_deref()?;
        let owner = context.graph.live_by_name(
            &object.cluster,
            SERVING,
            "Configuration",
            &object.namespace,
            configuration,
        )?;
        latest_ready(owner)
    }

    fn status_vs_spec(&self, context: &Context<'_>, object: &ObjectState) -> Option<Assessment> {
        if object.generation.unwrap_or(0) > object.observed_generation().unwrap_or(0) {
            return None;
        }
        if is_rolling_out(object) {
            return Some(Assessment::clear(object, "gradual rollout in progress"));
        }
        let wanted = targets(object.spec.pointer("/traffic").as_ref());
        if wanted.is_empty() {
            return None;
        }
        let tolerance = context.rules.class(self.id()).tolerance_percent;
        let mut spec_percent: BTreeMap<String, f64> = BTreeMap::new();
        let mut spec_tags: BTreeMap<String, String> = BTreeMap::new();
        for target in &wanted {
            let revision = self.resolve(context, object, target)?;
            *spec_percent.entry(revision.clone()).or_default() += target.percent;
            if let Some(tag) = &target.tag {
                spec_tags.insert(tag.clone(), revision);
            }
        }
        let served = targets(object.status_field("traffic").as_ref());
        let mut status_percent: BTreeMap<String, f64> = BTreeMap::new();
        let mut status_tags: BTreeMap<String, String> = BTreeMap::new();
        for target in &served {
            let revision = target.revision.clone().unwrap_or_default();
            *status_percent.entry(revision.clone()).or_default() += target.percent;
            if let Some(tag) = &target.tag {
                status_tags.insert(tag.clone(), revision);
            }
        }
        let mut problems = Vec::new();
        let mut revisions: Vec<&String> =
            spec_percent.keys().chain(status_percent.keys()).collect();
        revisions.sort();
        revisions.dedup();
        for revision in revisions {
            let want = spec_percent.get(revision).copied().unwrap_or(0.0);
            let have = status_percent.get(revision).copied().unwrap_or(0.0);
            if (want - have).abs() > tolerance {
                problems.push(format!("{revision}: spec {want}% vs served {have}%"));
            }
        }
        for (tag, revision) in &spec_tags {
            match status_tags.get(tag) {
                None => problems.push(format!("tag {tag} is missing from status")),
                Some(actual) if actual != revision => problems.push(format!(
                    "tag {tag} points to {actual}, spec says {revision}"
                )),
                _ => {}
            }
        }
        let total: f64 = status_percent.values().sum();
        if served.is_empty() {
            problems.push("no traffic is served (status.traffic is empty)".to_string());
        } else if (total - 100.0).abs() > 0.5 {
            problems.push(format!("served percents add up to {total}, not 100"));
        }
        if problems.is_empty() {
            return Some(Assessment::clear(object, "served traffic matches spec"));
        }
        let mut found = evidence(format!(
            "{} serves traffic other than its spec: {}",
            object.reference(),
            problems.join("; ")
        ));
        found.facts.insert("spec".into(), split_text(&spec_percent));
        found
            .facts
            .insert("served".into(), split_text(&status_percent));
        found.hint = Some(if object.kind == "Service" {
            let mut command = format!(
                "kn service update {} --namespace {}",
                shell_quote(&object.name),
                shell_quote(&object.namespace)
            );
            for target in &wanted {
                let name = if target.latest {
                    "@latest".to_string()
                } else {
                    target.revision.clone().unwrap_or_default()
                };
                command.push_str(&format!(
                    " --traffic {}",
                    shell_quote(&format!("{name}={}", target.percent))
                ));
            }
            for target in &wanted {
                if let (Some(tag), Some(revision)) = (&target.tag, &target.revision) {
                    command.push_str(&format!(
                        " --tag {}",
                        shell_quote(&format!("{revision}={tag}"))
                    ));
                }
            }
            format!(
                "{}  # re-applies the spec split; check why it was not served with: {}",
                command,
                describe(
                    &object.api_version,
                    "Route",
                    &object.namespace,
                    &object.name
                )
            )
        } else {
            describe(
                &object.api_version,
                &object.kind,
                &object.namespace,
                &object.name,
            )
        });
        Some(Assessment::holds(object, found))
    }

    fn route_vs_service(&self, context: &Context<'_>, route: &ObjectState) -> Option<Assessment> {
        let owner = route
            .controller_owner()
            .filter(|owner| owner.kind == "Service")?;
        let service = context.graph.by_uid(&route.cluster, &owner.uid)?;
        if service.is_going_away()
            || service.generation.unwrap_or(0) > service.observed_generation().unwrap_or(0)
        {
            return None;
        }
        let service_traffic = service.spec.pointer("/traffic");
        let route_traffic = route.spec.pointer("/traffic");
        let expected: Vec<Target> = targets(service_traffic.as_ref())
            .into_iter()
            .map(|mut target| {
                if target.revision.is_none() {
                    target.configuration = Some(service.name.clone());
                }
                target
            })
            .collect();
        let actual = targets(route_traffic.as_ref());
        if expected.is_empty() || expected == actual {
            return Some(Assessment::clear(route, "Route spec matches its Service"));
        }
        let mut found = evidence(format!(
            "{} spec.traffic no longer matches its Service {}: someone edited the Route; the Service controller should restore it",
            route.reference(),
            service.name
        ));
        found.changes = vec![drift_model::FieldChange {
            path: "/spec/traffic".into(),
            before: service_traffic,
            after: route_traffic,
        }];
        found.severity = Some(Severity::Critical);
        found.hint = Some(describe(
            &route.api_version,
            &route.kind,
            &route.namespace,
            &route.name,
        ));
        Some(Assessment::holds(route, found))
    }
}

fn split_text(split: &BTreeMap<String, f64>) -> String {
    split
        .iter()
        .map(|(revision, percent)| format!("{revision}={percent}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "traffic_drift",
    english: "Traffic drift",
    chinese: "流量漂移",
    severity: Severity::Critical,
};

impl DriftClass for TrafficDrift {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn applies_to_snapshot(&self) -> bool {
        true
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            grace: secs(120),
            grace_follows_default: true,
        }
    }

    fn reassessable(&self) -> bool {
        // The condition is read off the current state alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        if !object.is_knative_serving() || object.is_going_away() {
            return Vec::new();
        }
        let mut verdicts = Vec::new();
        match object.kind.as_str() {
            "Service" => {
                verdicts.extend(self.status_vs_spec(context, object));
                // The Service's Route has the Service's name.
                if let Some(route) = context.graph.live_by_name(
                    &object.cluster,
                    SERVING,
                    "Route",
                    &object.namespace,
                    &object.name,
                ) {
                    verdicts.extend(self.route_vs_service(context, route));
                }
            }
            "Route" => {
                // A Route owned by a Service is judged against the Service; its own status is
                // judged through the Service (which mirrors it) to avoid two alerts for one split.
                if object
                    .controller_owner()
                    .is_some_and(|owner| owner.kind == "Service")
                {
                    verdicts.extend(self.route_vs_service(context, object));
                } else {
                    verdicts.extend(self.status_vs_spec(context, object));
                }
            }
            _ => {}
        }
        verdicts
    }
}
