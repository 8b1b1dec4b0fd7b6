//! `image_drift`: a Knative-managed Deployment or Pod (label `serving.knative.dev/revision`) runs
//! a container image other than its Revision's, or a Revision's resolved digest changed.
//!
//! The Revision's image is `status.containerStatuses[name].imageDigest` (matched by container
//! name), else the legacy `status.imageDigest`, else the spec image (registries listed in
//! `registries-skipping-tag-resolving` leave the digest empty). Knative sets the Deployment's
//! container image to exactly that value, so any other value was written by someone else.
//! Knative's own `queue-proxy` sidecar is not part of the Revision spec and is not compared.

use serde_json::Value;

use super::*;
use crate::classify::evidence::hint::{namespace_flag, shell_quote};

/// The class.
pub(crate) struct ImageDrift;

/// Expected image per container name, from a Revision.
fn revision_images(revision: &ObjectState) -> Vec<(String, String)> {
    let spec = revision.spec_view();
    let Some(Value::Array(containers)) = spec.get("containers") else {
        return Vec::new();
    };
    let status = revision.status.value();
    let statuses = status
        .get("containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let legacy = status.get("imageDigest").and_then(Value::as_str);
    containers
        .iter()
        .enumerate()
        .filter_map(|(index, container)| {
            let name = container
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("user-container")
                .to_string();
            let spec_image = container.get("image").and_then(Value::as_str)?;
            let digest = statuses
                .iter()
                .find(|status| status.get("name").and_then(Value::as_str) == Some(name.as_str()))
                .and_then(|status| status.get("imageDigest").and_then(Value::as_str))
                .filter(|digest| !digest.is_empty())
                .or(if index == 0 {
                    legacy.filter(|digest| !digest.is_empty())
                } else {
                    None
                });
            Some((name, digest.unwrap_or(spec_image).to_string()))
        })
        .collect()
}

fn digests(revision: &ObjectState) -> Vec<(String, String)> {
    revision
        .status_field("containerStatuses")
        .as_ref()
        .and_then(Value::as_array)
        .map(|statuses| {
            statuses
                .iter()
                .filter_map(|status| {
                    let name = status.get("name").and_then(Value::as_str)?;
                    let digest = status
                        .get("imageDigest")
                        .and_then(Value::as_str)
                        .filter(|d| !d.is_empty())?;
                    Some((name.to_string(), digest.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Which of a Revision's digest fields kept their text from `before` to `after`:
/// `(containerStatuses, imageDigest)`. The same text is the same value, so the digests read
/// from it are equal without parsing either; most Revision events are status churn that
/// leaves both as they were. (One answer differs from comparing parsed digests: a status naming
/// one container twice with two digests, which the API server's unique container names rule
/// out, no longer reads as a digest change on every event.)
fn same_digest_texts(before: &ObjectState, after: &ObjectState) -> (bool, bool) {
    // A kept status with the same text (most events: status churn in fields not kept) holds
    // the same digests, without reading either for them.
    if before.status == after.status {
        return (true, true);
    }
    let (was, is) = (digest_texts(before), digest_texts(after));
    (was.0 == is.0, was.1 == is.1)
}

/// `status.containerStatuses` and `status.imageDigest` as texts, read in one pass over the
/// status (the last of a repeated member, as a parse keeps it).
fn digest_texts(revision: &ObjectState) -> (Option<&str>, Option<&str>) {
    let Some(members) = crate::decode::raw::member_texts(revision.status.text()) else {
        // An escaped member name, or a status that is not an object: one read per field.
        return (
            revision.status_text("containerStatuses"),
            revision.status_text("imageDigest"),
        );
    };
    let last = |key: &str| {
        members
            .iter()
            .rev()
            .find(|(name, _)| *name == key)
            .map(|(_, value)| *value)
    };
    (last("containerStatuses"), last("imageDigest"))
}

fn workload_images(workload: &ObjectState) -> Vec<(usize, String, String)> {
    let spec = workload.spec_view();
    let containers = if workload.kind == "Pod" {
        spec.get("containers")
    } else {
        spec.pointer("/template/spec/containers")
    };
    containers
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .enumerate()
                .filter_map(|(index, container)| {
                    Some((
                        index,
                        container.get("name")?.as_str()?.to_string(),
                        container.get("image")?.as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl ImageDrift {
    fn workload(&self, context: &Context<'_>, workload: &ObjectState) -> Option<Assessment> {
        if workload.is_going_away() {
            return None;
        }
        let revision = revision_of(context.graph, workload)?;
        if revision.deleted {
            return None;
        }
        let expected = revision_images(revision);
        if expected.is_empty() {
            return None;
        }
        let running = workload_images(workload);
        let mut changes = Vec::new();
        let mut patch = Vec::new();
        for (name, want) in &expected {
            if let Some((index, _, have)) = running
                .iter()
                .find(|(_, running_name, _)| running_name == name)
            {
                if have != want {
                    let path = if workload.kind == "Pod" {
                        format!("/spec/containers/{index}/image")
                    } else {
                        format!("/spec/template/spec/containers/{index}/image")
                    };
                    changes.push(drift_model::FieldChange {
                        path: path.clone(),
                        before: Some(Value::String(want.clone())),
                        after: Some(Value::String(have.clone())),
                    });
                    patch.push(serde_json::json!({"op": "replace", "path": path, "value": want}));
                }
            }
        }
        if changes.is_empty() {
            return Some(Assessment::clear(
                workload,
                "running image matches the Revision",
            ));
        }
        let first = &changes[0];
        let mut found = evidence(format!(
            "{} runs {} but its Revision {} specifies {}",
            workload.reference(),
            first
                .after
                .as_ref()
                .and_then(Value::as_str)
                .unwrap_or_default(),
            revision.name,
            first
                .before
                .as_ref()
                .and_then(Value::as_str)
                .unwrap_or_default()
        ));
        found.changes = changes;
        found.facts.insert("revision".into(), revision.name.clone());
        found.hint = Some(if workload.kind == "Pod" {
            format!(
                "kubectl{} delete pod {}  # the Revision's Deployment recreates it with the right image",
                namespace_flag(&workload.namespace),
                shell_quote(&workload.name)
            )
        } else {
            format!(
                "kubectl{} patch deployment {} --type=json -p {}",
                namespace_flag(&workload.namespace),
                shell_quote(&workload.name),
                shell_quote(&Value::Array(patch).to_string())
            )
        });
        Some(Assessment::holds(workload, found))
    }

    /// `same_statuses`: whether `status.containerStatuses` kept its text since the event
    /// before (`None` without one).
    fn revision(
        &self,
        context: &Context<'_>,
        revision: &ObjectState,
        same_statuses: Option<bool>,
    ) -> Option<Assessment> {
        if revision.is_going_away() {
            return None;
        }
        let open = context.open_drift(revision, self.id());
        // With no drift open, the digests are compared with the event before: with none, or
        // with the same text, nothing changed (this spares parsing the digests twice).
        if open.is_none() && same_statuses != Some(false) {
            return None;
        }
        let current = digests(revision);
        let original: Vec<(String, String)> = match open {
            Some(drift) => drift
                .evidence
                .facts
                .iter()
                .filter_map(|(key, value)| {
                    key.strip_prefix("originalDigest/")
                        .map(|name| (name.to_string(), value.clone()))
                })
                .collect(),
            None => context.before.map(digests).unwrap_or_default(),
        };
        let changed: Vec<(&String, &String, &String)> = original
            .iter()
            .filter_map(|(name, was)| {
                current
                    .iter()
                    .find(|(current_name, _)| current_name == name)
                    .filter(|(_, now)| now != was)
                    .map(|(_, now)| (name, was, now))
            })
            .collect();
        if changed.is_empty() {
            return open.map(|_| Assessment::clear(revision, "Revision digest restored"));
        }
        let (name, was, now) = changed[0];
        let mut found = evidence(format!(
            "{} container {name} digest changed from {was} to {now}; Revisions are immutable and Knative resolves a digest once",
            revision.reference()
        ));
        for (name, was) in &original {
            found
                .facts
                .insert(format!("originalDigest/{name}"), was.clone());
        }
        found.changes = changed
            .iter()
            .map(|(name, was, now)| drift_model::FieldChange {
                path: format!("/status/containerStatuses/{name}/imageDigest"),
                before: Some(Value::String((*was).clone())),
                after: Some(Value::String((*now).clone())),
            })
            .collect();
        found.severity = Some(Severity::Critical);
        Some(Assessment::holds(revision, found))
    }
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "image_drift",
    english: "Image drift",
    chinese: "镜像漂移",
    severity: Severity::Critical,
};

impl DriftClass for ImageDrift {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            grace: secs(60),
            grace_follows_default: false,
        }
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        if is_revision_workload(object) {
            // The running images are in the workload's spec and the expected ones in its
            // Revision, whose own events re-check its workloads: an event that left the
            // workload's spec as it was (status churn, most of a busy cluster's events) cannot
            // change this class's finding, and is not worth parsing the spec for.
            // (Which Revision it belongs to is in its labels; a rules change re-assesses every
            // object, see `Engine::set_rules`.)
            if let Some(before) = context.before {
                if before.spec.same_text(&object.spec)
                    && before.labels == object.labels
                    && before.is_going_away() == object.is_going_away()
                {
                    return Vec::new();
                }
            }
            return self.workload(context, object).into_iter().collect();
        }
        if object.is_kind(SERVING, "Revision") {
            let same = context
                .before
                .map(|before| same_digest_texts(before, object));
            let mut verdicts: Vec<Assessment> = self
                .revision(context, object, same.map(|(statuses, _)| statuses))
                .into_iter()
                .collect();
            // Its workloads are re-checked only when what they must run moved: the Revision's
            // spec or its resolved digests (status churn of a Revision is frequent, and each
            // re-check parses every workload's spec).
            if let (Some(before), Some((same_statuses, same_legacy))) = (context.before, same) {
                let legacy = |revision: &ObjectState| revision.status_field("imageDigest");
                if before.spec.same_text(&object.spec)
                    && (same_statuses || digests(before) == digests(object))
                    && (same_legacy || legacy(before) == legacy(object))
                    && before.is_going_away() == object.is_going_away()
                {
                    return verdicts;
                }
            }
            for child in context.graph.children(&object.key()) {
                if is_revision_workload(child) {
                    verdicts.extend(self.workload(context, child));
                }
            }
            return verdicts;
        }
        Vec::new()
    }
}
