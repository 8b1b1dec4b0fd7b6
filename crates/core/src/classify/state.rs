//! Compact per-object state: what the drift classes and the diff need, not whole objects.
//!
//! Kept per (cluster, uid). Specs of Knative kinds and Deployments are kept whole because a
//! manual edit can touch any field and its diff needs the "before"; status is cut down to the
//! fields the classes read; Pods keep only their containers' names and images; the
//! `last-applied-configuration` annotation is replaced by a hash (it duplicates the spec and can
//! be larger than it); `managedFields` keep only who/when, since attribution reads the full
//! entries from the incoming event.

use serde_json::{Map, Value};

pub(crate) use super::spec::Spec;
pub(crate) use crate::decode::kept::Serialized;
use crate::decode::object::{api_group, hash_value};
use crate::decode::{DataMap, KubeObject, OwnerReference};
use drift_model::{Millis, ObjectKey, Pairs};

pub use super::names::Name;
pub(crate) use super::names::Names;

mod conditions;

/// Who last wrote what, per `managedFields` entry (without the field trie).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerStamp {
    /// Field manager.
    pub manager: Name,
    /// `Apply` or `Update`.
    pub operation: Name,
    /// Subresource, empty for the main resource.
    pub subresource: Name,
    /// Last write time.
    pub time: Option<String>,
}

/// The status fields the classes read, serialized (by the decoder's shape check, or as stored).
pub(crate) type Status = Serialized;

/// The compact state of one object.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectState {
    /// Cluster name.
    pub cluster: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Namespace (empty when cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Newest `resourceVersion` applied.
    pub resource_version: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<String>,
    /// `metadata.deletionTimestamp` (deletion in progress).
    pub deletion_timestamp: Option<String>,
    /// Labels.
    pub labels: Pairs,
    /// Annotations (large ones hashed).
    pub annotations: Pairs,
    /// Owner references.
    pub owners: Vec<OwnerReference>,
    /// Field managers and their last write times.
    pub managers: Vec<ManagerStamp>,
    /// `spec` (trimmed for Pods), serialized.
    pub spec: Spec,
    /// The status fields the classes read, serialized.
    pub status: Status,
    /// ConfigMap values or Secret value hashes (shared with the event's object, or kept from
    /// the previous state when the event repeats its text).
    pub data: Option<std::sync::Arc<DataMap>>,
    /// A ConfigMap with `binaryData`: `data` holds those values' hashes beside its own, so the
    /// state cannot give the object back (`restorable`).
    pub binary_data: bool,
    /// True once a delete event was seen (kept as a tombstone for a while).
    pub deleted: bool,
    /// True when a resync list created this object and no event has been applied to it since:
    /// a list under another cluster name (resync's corrected name) then moves it.
    pub listed: bool,
    /// Set when `resource_version` is implausibly far ahead of every other version of its
    /// cluster (`resource_version.rs`): the last version before it, which later events are
    /// ordered against, so one forged version cannot freeze the object.
    pub confirmed_resource_version: Option<String>,
    /// When the source sent the event that made this state (its CloudEvent `time`); none for a
    /// listed state. What a later event's send time is compared with (`ordering::sent_after`).
    pub sent_at: Option<Millis>,
    /// When this process first saw the object.
    pub first_seen: Millis,
    /// When the newest event for the object was applied.
    pub last_seen: Millis,
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What one object costs beyond its strings: the struct, its hash map slots, the graph's indexes
/// (BENCHMARKS.md, issue 28: 3.9 KB of RSS per object whose packed spec, texts and strings come
/// to some 1.8 KB).
const OBJECT_OVERHEAD_BYTES: usize = 2048;

impl ObjectState {
    /// About how many bytes of memory this state takes: its strings, its texts (the spec as
    /// packed), and a fixed overhead. The bound `limits.maxStateBytes` is checked against the sum.
    pub fn weight(&self) -> usize {
        // The text as received (escapes and all) plus what its map takes once parsed, both
        // counted from the text: a state's weight does not change when a class parses its values.
        let map = |data: &DataMap| -> usize {
            data.text().len() + data.counted_bytes() + 48 * data.counted_entries()
        };
        // A `Pairs` is its text and two offsets of four bytes per entry.
        let pairs = |pairs: &Pairs| -> usize { pairs.text_len() + 8 * pairs.len() };
        OBJECT_OVERHEAD_BYTES
            + self.cluster.len()
            + self.uid.len()
            + self.api_version.len()
            + self.kind.len()
            + self.namespace.len()
            + self.name.len()
            + self.resource_version.len()
            + pairs(&self.labels)
            + pairs(&self.annotations)
            + self.data.as_deref().map_or(0, map)
            + self
                .owners
                .iter()
                .map(|owner| {
                    owner.api_version.len() + owner.kind.len() + owner.name.len() + owner.uid.len()
                })
                .sum::<usize>()
            + self
                .managers
                .iter()
                .map(|stamp| {
                    stamp.manager.len()
                        + stamp.operation.len()
                        + stamp.subresource.len()
                        + stamp.time.as_ref().map_or(0, String::len)
                })
                .sum::<usize>()
            + self.spec.packed_len()
            + self.status.text().len()
    }

    /// Builds the compact state of a decoded object.
    pub fn from_object(cluster: &str, object: &KubeObject, now: Millis) -> ObjectState {
        ObjectState::from_object_after(cluster, object, now, None, &mut Names::default())
    }

    /// [`ObjectState::from_object`] for an object whose state was `previous`: a spec that
    /// repeats the previous one's text is kept as it was packed, not packed again; the managers'
    /// names are shared through `names`.
    pub(crate) fn from_object_after(
        cluster: &str,
        object: &KubeObject,
        now: Millis,
        previous: Option<&ObjectState>,
        names: &mut Names,
    ) -> ObjectState {
        let annotations = if object
            .annotations
            .get(LAST_APPLIED)
            .is_some_and(|applied| !applied.starts_with("sha256:"))
        {
            Pairs::from(&object.annotations)
                .map_values(|key, value| (key == LAST_APPLIED).then(|| hash_value(value)))
        } else {
            Pairs::from(&object.annotations)
        };
        let is_pod = object.api_version == "v1" && object.kind == "Pod";
        let spec = if is_pod {
            // The containers' names and images, read in one pass (the decoder's view, else
            // `fast::spec_view`) without building the rest of a Pod's spec (most of an 18 KB
            // Pod); the whole spec's tree only for a spec that is not an object or has a part
            // `Value` cannot read.
            let view = match object.spec.view() {
                Some(view) => std::borrow::Cow::Borrowed(view),
                None => crate::decode::fast::spec_view(object.spec.text()).map_or_else(
                    || std::borrow::Cow::Borrowed(object.spec.value()),
                    std::borrow::Cow::Owned,
                ),
            };
            let trimmed = trim_pod_spec(&view);
            match previous {
                // A `Value` always serializes (its map keys are strings).
                Some(previous) => serde_json::to_string(&trimmed).map_or_else(
                    |_| Spec::from_value(&trimmed),
                    |text| Spec::from_text_after(&text, &previous.spec),
                ),
                None => Spec::from_value(&trimmed),
            }
        } else {
            // The event's own text (see `ObjectSpec`): kept, not written again.
            match previous {
                Some(previous) => Spec::from_text_after(object.spec.text(), &previous.spec),
                None => Spec::from_text(object.spec.text()),
            }
        };
        // Written on the HTTP worker by the shape check.
        let status = object.kept_status.clone();
        ObjectState {
            cluster: cluster.to_string(),
            uid: object.uid.clone(),
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            resource_version: object.resource_version.clone(),
            generation: object.generation,
            creation_timestamp: object.creation_timestamp.clone(),
            deletion_timestamp: object.deletion_timestamp.clone(),
            labels: Pairs::from(&object.labels),
            annotations,
            owners: object.owner_references.clone(),
            managers: object
                .managed_fields
                .iter()
                .map(|entry| ManagerStamp {
                    manager: names.get(&entry.manager),
                    operation: names.get(&entry.operation),
                    subresource: names.get(&entry.subresource),
                    time: entry.time.clone(),
                })
                .collect(),
            spec,
            status,
            data: object.data.clone(),
            binary_data: object.binary_data,
            deleted: false,
            listed: false,
            confirmed_resource_version: None,
            sent_at: None,
            first_seen: now,
            last_seen: now,
        }
    }

    /// True when `other` has the same content as `self` in everything but what moves on every
    /// write without changing what the object is: `resourceVersion`, `lastSeen` and the managers'
    /// write times (a status write moves its manager's time even when only dropped fields, such
    /// as condition timestamps, changed).
    ///
    /// The engine does not write a state that has the same content as the previous one (most
    /// events are such status churn); when the event changes no drift either, the writer commits
    /// nothing for it, not even its (`time`, `source`, `id`) key. Memory then runs ahead of the
    /// store only in those three fields, and after a restart the restored object carries an older
    /// `resourceVersion` and older write times:
    /// * a redelivered event applies the same content again, so it changes nothing;
    /// * an event never committed whose version lies between the stored and the newest applied
    ///   one (which the running process would have dropped as stale) is applied instead: it is a
    ///   state the object really had, delivered late, and the next event supersedes it;
    /// * actor attribution, which prefers the owner whose write time moved, may count a time as
    ///   moved that had moved in an unwritten event; the owners of a changed field are read from
    ///   the event itself, so only the choice among several owners of one field can differ.
    ///
    /// The send time (`sent_at`) is treated like `lastSeen`: after a restart it may be older than
    /// the newest applied event's, together with the `resourceVersion` written with it, so the
    /// state and its send time still belong together.
    ///
    /// Every content change (spec, kept status, labels, annotations, owners, managers, data,
    /// deletion) is still written in the transaction that answers its event.
    pub(crate) fn same_content(&self, other: &ObjectState) -> bool {
        // Destructured so that a new field has to be placed on one side or the other.
        let ObjectState {
            cluster,
            uid,
            api_version,
            kind,
            namespace,
            name,
            resource_version: _,
            generation,
            creation_timestamp,
            deletion_timestamp,
            labels,
            annotations,
            owners,
            managers,
            spec,
            status,
            data,
            binary_data,
            deleted,
            listed,
            confirmed_resource_version,
            sent_at: _,
            first_seen,
            last_seen: _,
        } = self;
        // The spec's text, not its value: a text that differs with an equal value (another
        // sender's key order) is written again, which costs a write and changes nothing.
        spec.same_text(&other.spec)
            && *status == other.status
            && *data == other.data
            && *binary_data == other.binary_data
            && *labels == other.labels
            && *annotations == other.annotations
            && *deleted == other.deleted
            && *listed == other.listed
            && *confirmed_resource_version == other.confirmed_resource_version
            && *generation == other.generation
            && *deletion_timestamp == other.deletion_timestamp
            && *owners == other.owners
            && managers.len() == other.managers.len()
            && managers.iter().zip(&other.managers).all(|(left, right)| {
                left.manager == right.manager
                    && left.operation == right.operation
                    && left.subresource == right.subresource
            })
            && *first_seen == other.first_seen
            && *creation_timestamp == other.creation_timestamp
            && *api_version == other.api_version
            && *kind == other.kind
            && *namespace == other.namespace
            && *name == other.name
            && *uid == other.uid
            && *cluster == other.cluster
    }

    /// The object as the decoder would give it, rebuilt from the compact state: what the engine
    /// applies as the final state of an object that disappeared without a delete event (resync).
    /// `managedFields` keep their managers but not their field tries, which the state does not
    /// hold.
    pub(crate) fn to_object(&self) -> KubeObject {
        KubeObject {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            generation: self.generation,
            creation_timestamp: self.creation_timestamp.clone(),
            deletion_timestamp: self.deletion_timestamp.clone(),
            labels: self.labels.to_map(),
            annotations: self.annotations.to_map(),
            owner_references: self.owners.clone(),
            managed_fields: self
                .managers
                .iter()
                .map(|stamp| crate::decode::object::ManagedFieldsEntry {
                    manager: stamp.manager.to_string(),
                    operation: stamp.operation.to_string(),
                    subresource: stamp.subresource.to_string(),
                    time: stamp.time.clone(),
                    fields: Default::default(),
                })
                .collect(),
            spec: crate::decode::ObjectSpec::from_raw(self.spec.raw()),
            // As the shape check leaves an object: the kept text, no tree. The state's text as it
            // is (a stored text is not written again by today's serializer).
            status: Value::Null,
            kept_status: self.status.clone(),
            status_skipped_bytes: 0,
            data: self.data.clone(),
            binary_data: self.binary_data,
        }
    }

    /// The version later events are ordered against: the confirmed one while the newest is
    /// implausible, else the newest.
    pub(crate) fn ordering_version(&self) -> &str {
        self.confirmed_resource_version
            .as_deref()
            .unwrap_or(&self.resource_version)
    }

    /// The key of this object.
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            cluster: self.cluster.clone(),
            uid: self.uid.clone(),
        }
    }

    /// The API group.
    pub fn group(&self) -> &str {
        api_group(&self.api_version)
    }

    /// True for `serving.knative.dev` kinds.
    pub(crate) fn is_knative_serving(&self) -> bool {
        self.group() == "serving.knative.dev"
    }

    /// True for any Knative kind (a `*.knative.dev` group: Serving, Eventing, the internals,
    /// the operator, extensions).
    pub fn is_knative(&self) -> bool {
        crate::decode::object::is_knative_group(self.group())
    }

    /// True when the object is of this group and kind (`is_kind(SERVING, "Service")` is a
    /// Knative Service, not a core one).
    pub fn is_kind(&self, group: &str, kind: &str) -> bool {
        self.kind == kind && self.group() == group
    }

    /// The controller owner reference.
    pub(crate) fn controller_owner(&self) -> Option<&OwnerReference> {
        self.owners.iter().find(|owner| owner.controller)
    }

    /// A label value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }

    /// An annotation value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key)
    }

    /// The spec cut to what the image checks read: `traffic`, `replicas`, and the containers'
    /// names and images (`containers`, `template.spec.containers`), read in one pass without
    /// building the rest of the spec (a Deployment's is mostly environment and probes); the
    /// whole spec when a part has an unexpected type, so readers find what they found before.
    pub(crate) fn spec_view(&self) -> Value {
        let text = self.spec.text();
        crate::decode::fast::spec_view(&text).unwrap_or_else(|| self.spec.value())
    }

    /// A status field, parsed (the status is kept serialized: one jump over it per field read;
    /// parse the whole status with [`Serialized::value`] only to read many of its fields).
    pub(crate) fn status_field(&self, key: &str) -> Option<Value> {
        // Only the member asked for is parsed; the rest of the text is jumped over (several
        // classes read one field each on every event).
        serde_json::from_str(self.status_text(key)?).ok()
    }

    /// The JSON text of `status.<key>`, unparsed: two states whose texts are equal have equal
    /// [`ObjectState::status_field`]s (a class comparing a field across versions tells most
    /// unchanged ones this way, without parsing either).
    pub(crate) fn status_text(&self, key: &str) -> Option<&str> {
        crate::decode::raw::member(self.status.text(), key)
    }

    /// `status.observedGeneration`.
    pub(crate) fn observed_generation(&self) -> Option<i64> {
        self.status_field("observedGeneration")
            .as_ref()
            .and_then(Value::as_i64)
    }

    /// A condition by type.
    pub fn condition(&self, condition_type: &str) -> Option<Condition> {
        self.conditions()
            .into_iter()
            .find(|condition| condition.condition_type == condition_type)
    }

    /// All conditions, in status order.
    pub fn conditions(&self) -> Vec<Condition> {
        crate::decode::raw::member(self.status.text(), "conditions")
            .map(conditions::parse)
            .unwrap_or_default()
    }

    /// True when a deletion is in progress or done.
    pub(crate) fn is_going_away(&self) -> bool {
        self.deleted || self.deletion_timestamp.is_some()
    }

    /// A short `kind/namespace/name` reference for messages.
    pub fn reference(&self) -> String {
        if self.namespace.is_empty() {
            format!("{}/{}", self.kind, self.name)
        } else {
            format!("{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// One status condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `type`.
    pub condition_type: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `reason`.
    pub reason: String,
    /// `message`.
    pub message: String,
    /// Empty (error), `Warning` or `Info`.
    pub severity: String,
}

impl Condition {
    /// The condition as findings say it: `Type=Status (Reason): message`, reason and message
    /// only when set.
    pub fn describe(&self) -> String {
        let mut text = format!("{}={}", self.condition_type, self.status);
        if !self.reason.is_empty() {
            text.push_str(&format!(" ({})", self.reason));
        }
        if !self.message.is_empty() {
            text.push_str(&format!(": {}", self.message));
        }
        text
    }
}

fn trim_pod_spec(spec: &Value) -> Value {
    let containers = spec
        .get("containers")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|container| {
                    let mut kept = Map::new();
                    for key in ["name", "image"] {
                        if let Some(value) = container.get(key) {
                            kept.insert(key.to_string(), value.clone());
                        }
                    }
                    Value::Object(kept)
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    serde_json::json!({ "containers": containers })
}
