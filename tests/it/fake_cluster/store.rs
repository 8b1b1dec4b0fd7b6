//! The fake cluster's objects and how one write is committed, as the API server's generic store
//! does it: server-owned metadata kept or set (`uid`, `creationTimestamp`, `generation`), the
//! Knative webhooks' `creator`/`lastModifier`, `managedFields`, a new `resourceVersion` from
//! one counter, `generation` bumped on a spec change, and the watch event the write causes
//! queued for the Broker. A write that changes nothing is not committed (no new
//! resourceVersion, no event), as in Kubernetes.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::fields;

/// The user the fake API server authenticates every request as (the token is the same for all
/// clients), as Knative's webhooks stamp it.
pub(crate) const USER: &str = "system:serviceaccount:drills:fake-cluster-client";

/// One watch event for the Broker: `add`, `update` or `delete`, and the object it carries.
pub(crate) type Outgoing = (&'static str, Value);

/// The objects and the counters.
pub(crate) struct State {
    /// Every object, by its API path.
    pub objects: BTreeMap<String, Value>,
    /// The last resourceVersion handed out.
    pub version: u64,
    /// Every API request received: method and path with query.
    pub requests: Vec<(String, String)>,
    /// Writes committed (API writes and the controllers' reactions).
    pub writes: usize,
    /// Events queued for the Broker so far.
    pub queued: usize,
    /// The Broker's queue, in commit order.
    pub outbox: UnboundedSender<Outgoing>,
    /// Knative's Deployment repair, when on: its delay.
    pub repair: Option<std::time::Duration>,
    /// Repairs scheduled, aborted when the cluster is dropped.
    pub repairs: Vec<tokio::task::AbortHandle>,
    /// Admission policies and what their bindings do (`FakeCluster::install_policies`).
    pub policies: Vec<(drift_core::admission::Policy, drift_core::admission::Action)>,
}

/// Which part of an object a write goes to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Part {
    /// Everything but status (status is kept from the stored object).
    Main,
    /// Status only (`/status`).
    Status,
}

/// Now, as Kubernetes writes times (seconds).
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The group of an `apiVersion` (`""` for the core group).
pub(crate) fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// The resource name Kubernetes guesses from a kind (`meta.UnsafeGuessKindToResource`).
pub(crate) fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with("endpoints") {
        lower
    } else if lower.ends_with('s') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// The API path of an object (`/api/v1/...` or `/apis/<group>/<version>/...`).
pub(crate) fn path_of(api_version: &str, kind: &str, namespace: &str, name: &str) -> String {
    let prefix = if group(api_version).is_empty() {
        format!("/api/{api_version}")
    } else {
        format!("/apis/{api_version}")
    };
    let resource = plural(kind);
    if namespace.is_empty() {
        format!("{prefix}/{resource}/{name}")
    } else {
        format!("{prefix}/namespaces/{namespace}/{resource}/{name}")
    }
}

/// The API path of `object`.
pub(crate) fn object_path(object: &Value) -> String {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
    path_of(
        &text(&object["apiVersion"]),
        &text(&object["kind"]),
        &text(&object["metadata"]["namespace"]),
        &text(&object["metadata"]["name"]),
    )
}

/// A fresh uid.
pub(crate) fn uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The Knative groups whose webhooks stamp `<group>/creator` and `<group>/lastModifier`.
fn stamped_group(api_version: &str) -> Option<&str> {
    let group = group(api_version);
    matches!(group, "serving.knative.dev" | "eventing.knative.dev").then_some(group)
}

impl State {
    /// Commits `after` (`None`: a delete) at `path` as a write by `manager` to `part`, and
    /// queues its event. The object as stored (for a delete, as last seen, with the delete's
    /// resourceVersion), or `None` when the write changed nothing.
    pub(crate) fn commit(
        &mut self,
        path: &str,
        after: Option<Value>,
        manager: &str,
        part: Part,
    ) -> Option<Value> {
        let before = self.objects.get(path).cloned();
        let Some(mut object) = after else {
            let mut gone = before?;
            self.objects.remove(path);
            self.version += 1;
            gone["metadata"]["resourceVersion"] = json!(self.version.to_string());
            self.writes += 1;
            self.emit("delete", &gone);
            return Some(gone);
        };
        let time = now();
        let api_version = object["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match &before {
            None => {
                let metadata = &mut object["metadata"];
                if metadata["uid"].as_str().is_none_or(str::is_empty) {
                    metadata["uid"] = json!(uid());
                }
                metadata["creationTimestamp"] = json!(time);
                if !group(&api_version).is_empty() {
                    metadata["generation"] = json!(1);
                }
                if let Some(group) = stamped_group(&api_version) {
                    for key in ["creator", "lastModifier"] {
                        metadata["annotations"][format!("{group}/{key}")] = json!(USER);
                    }
                }
            }
            Some(stored) => {
                for key in ["uid", "creationTimestamp", "generation", "managedFields"] {
                    match stored["metadata"].get(key) {
                        Some(value) => object["metadata"][key] = value.clone(),
                        None => {
                            if let Some(metadata) = object["metadata"].as_object_mut() {
                                metadata.remove(key);
                            }
                        }
                    }
                }
                let kept = match part {
                    Part::Main => "status",
                    Part::Status => "spec",
                };
                match stored.get(kept) {
                    Some(value) => object[kept] = value.clone(),
                    None => {
                        if let Some(members) = object.as_object_mut() {
                            members.remove(kept);
                        }
                    }
                }
                if part == Part::Status {
                    object["metadata"] = stored["metadata"].clone();
                }
                let spec_changed = stored.get("spec") != object.get("spec");
                if spec_changed && part == Part::Main {
                    if let Some(group) = stamped_group(&api_version) {
                        object["metadata"]["annotations"][format!("{group}/lastModifier")] =
                            json!(USER);
                    }
                    if let Some(generation) = stored["metadata"]["generation"].as_i64() {
                        object["metadata"]["generation"] = json!(generation + 1);
                    }
                }
            }
        }
        let changed = fields::record(
            before.as_ref(),
            &mut object,
            manager,
            part == Part::Status,
            &time,
        );
        if !changed && before.is_some() {
            return None;
        }
        self.version += 1;
        object["metadata"]["resourceVersion"] = json!(self.version.to_string());
        self.objects.insert(path.to_string(), object.clone());
        self.writes += 1;
        self.emit(if before.is_some() { "update" } else { "add" }, &object);
        Some(object)
    }

    /// Stores `object` as it is, with a new resourceVersion (and a uid if it has none), without
    /// a write or an event: a seed, or a change the watch never saw.
    pub(crate) fn put(&mut self, mut object: Value) -> Value {
        if object["metadata"]["uid"].as_str().is_none_or(str::is_empty) {
            object["metadata"]["uid"] = json!(uid());
        }
        self.version += 1;
        object["metadata"]["resourceVersion"] = json!(self.version.to_string());
        self.objects.insert(object_path(&object), object.clone());
        object
    }

    /// Queues the watch event `verb` of `object` for the Broker.
    pub(crate) fn emit(&mut self, verb: &'static str, object: &Value) {
        self.queued += 1;
        // The Broker's task ends only with the cluster; a send after that has nobody to tell.
        let _ = self.outbox.send((verb, object.clone()));
    }
}
