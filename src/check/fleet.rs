//! [`compare`]: snapshots of clusters that should be alike (staging and the prods it promotes
//! to), compared object by object with the service's own fleet comparison
//! (`classify::fleet`), reported as a [`Report`] in `check`'s formats and exit codes.
//!
//! With `fleet.groups` in the config, each group compares the objects it names among the
//! snapshots its cluster globs match (a snapshot's cluster name is its file stem, or `--name`).
//! Without, every snapshot is compared with every other, over the objects a person deploys that
//! any of them holds: Knative objects and the ConfigMaps `config_drift` watches, leaving out what
//! a controller made (an object with a controller `ownerReference`: Revisions, a Service's Route,
//! a Broker's channel), whose names and content are each cluster's own. Pure and deterministic.

use std::collections::BTreeMap;

use super::normalize::decode_live;
use super::report::{DiffEntry, Finding, ObjectReport, Report};
use super::Error;
use drift_core::classify::fleet::{self, Divergence, FleetGroup, FleetObject};
use drift_core::classify::{classes, ObjectState, Rules};
use drift_core::manifest::Manifests;
use drift_model::Severity;

/// The name of the group `compare` makes of every snapshot when the config has none.
pub(crate) const ALL_SNAPSHOTS: &str = "snapshots";

/// Compares the snapshots (cluster name, objects) under the config's fleet groups, or all with
/// all when it has none. Fails on bad input: two snapshots of one name, an object defined twice
/// in a snapshot or one the decoder rejects, a snapshot holding no object its groups compare,
/// or groups none of which holds two snapshots.
pub fn compare(
    snapshots: &[(String, Manifests)],
    rules: &Rules,
    fail_on: Severity,
) -> Result<Report, Error> {
    let mut parsed: Vec<(&str, BTreeMap<String, ObjectState>)> = Vec::new();
    for (cluster, manifests) in snapshots {
        if parsed.iter().any(|(name, _)| name == cluster) {
            return Err(Error::Fleet(format!(
                "two snapshots are named {cluster:?}; name them apart with --name"
            )));
        }
        if let Some((key, first, second)) = manifests.duplicates().first() {
            return Err(Error::Duplicate {
                object: key.reference(),
                first: Box::new(first.clone()),
                second: Box::new(second.clone()),
            });
        }
        let mut objects = BTreeMap::new();
        for (key, document) in manifests.iter() {
            let object = decode_live(key, &document.value).map_err(|source| Error::Invalid {
                origin: document.origin.clone(),
                source,
            })?;
            let state = ObjectState::from_object(cluster, &object, 0);
            objects.insert(FleetObject::of(&state).key(), state);
        }
        parsed.push((cluster, objects));
    }
    let configured = rules.fleet_groups();
    let implicit;
    let groups: &[FleetGroup] = if configured.is_empty() {
        implicit = [FleetGroup {
            name: ALL_SNAPSHOTS.to_string(),
            clusters: vec!["*".to_string()],
            compare: Vec::new(),
            ignore_paths: Vec::new(),
            severity: rules.class(classes::FLEET_DIVERGENCE).severity,
            grace: std::time::Duration::ZERO,
        }];
        &implicit
    } else {
        configured
    };
    let selects = |group: &FleetGroup, state: &ObjectState| {
        if configured.is_empty() {
            (state.is_knative()
                || state.is_kind("", "ConfigMap")
                    && rules.is_watched_config_map(&state.namespace, &state.name))
                && !fleet::made_by_knative_runtime(state)
        } else {
            group.selects(state)
        }
    };
    // A snapshot that holds objects, but none of a kind one of its groups compares, is a wrong
    // dump (another kind, another resource list): compared as it is, every object would be
    // reported missing from it. An empty snapshot is compared: a cluster that holds none of the
    // objects has them all missing, which is what the report says.
    for (cluster, objects) in &parsed {
        let mine: Vec<&FleetGroup> = groups
            .iter()
            .filter(|group| group.has_member(cluster))
            .collect();
        let holds_a_compared_kind = |group: &FleetGroup| {
            objects.values().any(|state| {
                if configured.is_empty() {
                    selects(group, state)
                } else {
                    group
                        .compare
                        .iter()
                        .any(|entry| entry.may_select(&state.api_version, &state.kind))
                }
            })
        };
        if !objects.is_empty() && mine.iter().any(|group| !holds_a_compared_kind(group)) {
            return Err(Error::Fleet(format!(
                "snapshot {cluster:?} holds no object of a kind that {} compares ({} object(s) in it); \
                 check that it is a dump of the compared kinds (kubectl get ... -A -o yaml)",
                if configured.is_empty() {
                    "compare (Knative objects and watched ConfigMaps)".to_string()
                } else {
                    format!(
                        "fleet group {}",
                        mine.iter()
                            .map(|group| group.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
                objects.len()
            )));
        }
    }
    let compared_key = |key: &str| rules.is_fleet_compared_key(key);
    let bookkeeping = |key: &str| rules.is_bookkeeping_key(key);
    let mut reports: BTreeMap<(String, String, String, String), ObjectReport> = BTreeMap::new();
    let mut compared_any = false;
    for group in groups {
        // Members in the order the snapshots were given: on a tie, `desired` shows the first
        // one's value, and the hint names every direction.
        let members: Vec<&(&str, BTreeMap<String, ObjectState>)> = parsed
            .iter()
            .filter(|(cluster, _)| group.has_member(cluster))
            .collect();
        if members.len() < 2 {
            continue;
        }
        compared_any = true;
        let mut objects: BTreeMap<&String, &ObjectState> = BTreeMap::new();
        for (_, held) in &members {
            for (key, state) in held {
                if selects(group, state) {
                    objects.entry(key).or_insert(state);
                }
            }
        }
        for (key, state) in objects {
            let object = FleetObject::of(state);
            let views: Vec<(String, Option<serde_json::Value>)> = members
                .iter()
                .map(|(cluster, held)| {
                    (
                        cluster.to_string(),
                        held.get(key)
                            .map(|copy| fleet::comparable(copy, &compared_key, &bookkeeping)),
                    )
                })
                .collect();
            let divergences = fleet::compare(&views, &group.ignore_paths);
            let report = reports
                .entry((
                    object.namespace.clone(),
                    object.kind.clone(),
                    object.name.clone(),
                    object.group().to_string(),
                ))
                .or_insert_with(|| ObjectReport {
                    group: object.group().to_string(),
                    api_version: object.api_version.clone(),
                    kind: object.kind.clone(),
                    namespace: object.namespace.clone(),
                    name: object.name.clone(),
                    findings: Vec::new(),
                });
            if !divergences.is_empty() {
                report.findings.push(finding(group, &object, &divergences));
            }
        }
    }
    if !compared_any {
        return Err(Error::Fleet(format!(
            "no fleet group holds two of the snapshots ({}); check fleet.groups[].clusters \
             against the snapshots' names",
            parsed
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(Report {
        objects: reports.into_values().collect(),
        rules: Vec::new(),
        // Clusters are compared with each other as they are, so no Knative default is read.
        defaults: Vec::new(),
        fail_on,
        command: "compare",
    })
}

/// The `compare` entries of the config's fleet groups that no listed resource (`apiVersion`,
/// `kind`: what `--live-cluster` lists, `resync.resources`) can hold, as `group: apiVersion
/// kind namespace/name`: objects of those kinds are never read from the clusters, so they are
/// not compared (rather than reported missing everywhere).
pub(crate) fn uncovered_entries(rules: &Rules, listed: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for group in rules.fleet_groups() {
        for entry in &group.compare {
            if !listed
                .iter()
                .any(|(api_version, kind)| entry.may_select(api_version, kind))
            {
                out.push(format!(
                    "{}: {} {} {}/{}",
                    group.name, entry.api_version, entry.kind, entry.namespace, entry.name
                ));
            }
        }
    }
    out
}

/// The finding of one group about one object: the service's summary and hint, and a diff entry
/// per path with every cluster's value.
fn finding(group: &FleetGroup, object: &FleetObject, divergences: &[Divergence]) -> Finding {
    Finding {
        class: classes::FLEET_DIVERGENCE.to_string(),
        rule: (group.name != ALL_SNAPSHOTS).then(|| group.name.clone()),
        severity: group.severity,
        message: fleet::summary(
            object,
            &if group.name == ALL_SNAPSHOTS {
                "the snapshots".to_string()
            } else {
                format!("fleet group {}", group.name)
            },
            divergences,
        ),
        diff: divergences
            .iter()
            .map(|divergence| {
                let majority = divergence.majority().cloned();
                DiffEntry {
                    path: divergence.path.clone(),
                    live: divergence
                        .values
                        .iter()
                        .map(|(_, value)| value)
                        .find(|value| **value != majority)
                        .cloned()
                        .flatten(),
                    desired: majority,
                    desired_from: None,
                    clusters: divergence.values.clone(),
                }
            })
            .collect(),
        hint: fleet::hint(object, divergences),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_entries_no_listed_resource_holds_are_named() {
        let group = FleetGroup {
            name: "prod".into(),
            clusters: vec!["*".into()],
            compare: vec![
                fleet::Compared {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespace: "knative-serving".into(),
                    name: "config-*".into(),
                },
                fleet::Compared {
                    api_version: "networking.internal.knative.dev/*".into(),
                    kind: "Certificate".into(),
                    namespace: "*".into(),
                    name: "*".into(),
                },
            ],
            ignore_paths: Vec::new(),
            severity: Severity::Warning,
            grace: std::time::Duration::ZERO,
        };
        let rules = Rules::default().with_fleet(vec![group]);
        let listed = [
            ("v1".to_string(), "ConfigMap".to_string()),
            ("serving.knative.dev/v1".to_string(), "Service".to_string()),
        ];
        assert_eq!(
            uncovered_entries(&rules, &listed),
            ["prod: networking.internal.knative.dev/* Certificate */*"]
        );
    }
}
