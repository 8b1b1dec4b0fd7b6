//! The shape of what the drift classes read from an object, checked before anything is kept, and
//! the bounds of what one object may cost. A value of the wrong type (a string `spec`, an object
//! `conditions`, a string or out-of-range traffic `percent`, a negative `generation`) or an object
//! over a bound is an [`Error::InvalidObject`] naming the JSON path and, for a bound, the limit:
//! the Broker dead-letters it (`400`) instead of the engine guessing.
//!
//! Kubernetes validates these fields on write, so a real object always passes; the checks exist
//! for forged or broken senders (ingest is open unless OIDC or a token is configured). The bounds
//! sit well above what real objects carry, at or below Kubernetes' own limits where it has them.

use serde_json::{Map, Value};

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::object::{
    json, json_text, parse_general, parse_unchecked, scan_text, type_name, ObjectSpec,
};
use super::raw::{self, Members};
use super::tree::Tree;
use super::{Error, KubeObject};

/// Most `managedFields` entries (one per field manager and subresource; real objects have a few).
pub(crate) const MAX_MANAGED_FIELDS: usize = 128;
/// Most labels on one object.
pub(crate) const MAX_LABELS: usize = 256;
/// Most bytes of annotations (keys and values), Kubernetes' own limit.
pub(crate) const MAX_ANNOTATION_BYTES: usize = 256 * 1024;
/// Most bytes of a ConfigMap's `data` and `binaryData`, Kubernetes' own limit.
pub(crate) const MAX_DATA_BYTES: usize = 1024 * 1024;
/// Most bytes of a `spec`, as JSON (the state keeps it whole). etcd refuses objects over 1.5 MiB,
/// so a real spec of this size is already extraordinary.
pub(crate) const MAX_SPEC_BYTES: usize = 1024 * 1024;
/// Most owner references.
pub(crate) const MAX_OWNERS: usize = 64;
/// Most entries in a status or traffic list the classes read (conditions, traffic targets,
/// container statuses, containers).
pub(crate) const MAX_LIST_ITEMS: usize = 1000;
/// Longest string in a condition (Kubernetes caps a condition's message at 32768 characters).
pub(crate) const MAX_CONDITION_TEXT: usize = 32 * 1024;
/// Most bytes of labels (keys and values). Kubernetes allows 317-byte keys and 63-byte values;
/// 256 such labels fit.
pub(crate) const MAX_LABEL_BYTES: usize = 128 * 1024;
/// Most bytes of `status` (its keys and strings, and 8 per other value), of which the state keeps
/// the parts the classes read.
pub(crate) const MAX_STATUS_BYTES: usize = 512 * 1024;
/// Most bytes of owner references (all their strings together).
pub(crate) const MAX_OWNER_BYTES: usize = 64 * 1024;
/// Longest object name (a DNS subdomain) and other names the state keeps: kind, apiVersion,
/// uid, resourceVersion, a field manager and its subresource (Kubernetes caps a field manager at
/// 128 characters).
pub(crate) const MAX_NAME_BYTES: usize = 253;
/// Longest namespace (a DNS label).
pub(crate) const MAX_NAMESPACE_BYTES: usize = 63;

/// A JSON path in an error message (`data.status.conditions[2].reason`), put together only when
/// a check fails: the checks run on every event, the messages almost never.
#[derive(Clone, Copy)]
struct At<'a> {
    base: &'a str,
    index: Option<usize>,
    key: Option<&'a str>,
}

impl<'a> At<'a> {
    fn new(base: &'a str) -> At<'a> {
        At {
            base,
            index: None,
            key: None,
        }
    }

    /// The item `index` of this list (a path names at most one item).
    fn item(self, index: usize) -> At<'a> {
        At {
            index: Some(index),
            ..self
        }
    }

    /// The member `key` of this object (or of its item).
    fn member(self, key: &'a str) -> At<'a> {
        At {
            key: Some(key),
            ..self
        }
    }
}

impl std::fmt::Display for At<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.base)?;
        if let Some(index) = self.index {
            write!(formatter, "[{index}]")?;
        }
        if let Some(key) = self.key {
            write!(formatter, ".{key}")?;
        }
        Ok(())
    }
}

/// Parses a Kubernetes object (hashing Secret values), checks the fields the classes read and the
/// bounds of what it may cost, and serializes its `spec` once for the state.
pub fn parse_object(value: Value) -> Result<KubeObject, Error> {
    checked(parse_unchecked(value)?)
}

/// [`parse_object`] from the object's JSON text, as an event carries it: what the HTTP workers
/// run for every event (the text is parsed only as far as the pipeline reads it).
pub fn parse_object_text(text: &str) -> Result<KubeObject, Error> {
    let scanned = scan_text(text)?;
    if scanned.needs_full_check() {
        // A number that may be out of range or an escape that may be a lone surrogate: the
        // whole text is parsed once, so such a text is refused wherever it holds one, as the
        // tree parser refused it (the parts that are skipped, or parsed only later, would not).
        serde_json::from_str::<Value>(text).map_err(|error| {
            Error::InvalidJson(format!(
                "data: {}",
                super::cloudevent::short(&error.to_string())
            ))
        })?;
    }
    // One pass for the common shape; the level-by-level read for everything else.
    let cut = super::fast::cut_data(text, &scanned);
    match super::fast::parse(text, scanned, cut.as_ref()) {
        Some((object, Some(status))) => checked_with(object, &status),
        Some((object, None)) => checked_with(object, &Value::Null),
        None => checked(parse_general(text, scanned)?),
    }
}

/// Checks that `text` is one JSON value the tree parser takes (nesting within its bound, numbers
/// in range, escaped surrogates in pairs) without building it unless the scan says only a parse
/// can tell: the data of an event of a type not handled, which nothing else reads.
pub(crate) fn check_json(text: &str) -> Result<(), Error> {
    let scanned = scan_text(text)?;
    let checked = if scanned.needs_full_check() {
        serde_json::from_str::<Value>(text).map(|_| ())
    } else {
        serde_json::from_str::<serde::de::IgnoredAny>(text).map(|_| ())
    };
    checked.map_err(|error| {
        Error::InvalidJson(format!(
            "data: {}",
            super::cloudevent::short(&error.to_string())
        ))
    })
}

/// The checks of an object whose `status` is its own tree (the general path's).
pub(super) fn checked(mut object: KubeObject) -> Result<KubeObject, Error> {
    let status = std::mem::take(&mut object.status);
    checked_with(object, &status)
}

/// The checks and bounds of `object`, whose `status` (as much of it as the state keeps) is
/// `status`: the general path's tree or the fast path's borrowed one ([`Tree`]). Its kept text
/// is written here, on the HTTP worker, and the tree freed (the object's own `status` is `Null`
/// from here on).
pub(super) fn checked_with<T: Tree>(
    mut object: KubeObject,
    status: &T,
) -> Result<KubeObject, Error> {
    check_types(&object, status)?;
    let status_bytes = status
        .json_bytes(MAX_STATUS_BYTES)
        .saturating_add(object.status_skipped_bytes);
    check_bounds(&object, object.spec.text().len(), status_bytes)?;
    object.kept_status = status.kept_status();
    Ok(object)
}

/// The parts of `spec` the shape checks read, as a value: `traffic`, `replicas`, the
/// containers' names and images (`containers`, `template.spec.containers`). The spec's tree when
/// it is parsed already; else these parts alone are parsed from its text, so an unchanged spec
/// is never built into a tree on the HTTP worker. A part of the wrong type is kept whole, for
/// the check to name.
fn spec_view(spec: &ObjectSpec) -> Result<Cow<'_, Value>, Error> {
    // Made by the decoder's pass (or the tree, when it is parsed already).
    if let Some(value) = spec.view() {
        return Ok(Cow::Borrowed(value));
    }
    // One pass for a spec object.
    if let Some(view) = super::fast::spec_view(spec.text()) {
        return Ok(Cow::Owned(view));
    }
    spec_view_general(spec.text()).map(Cow::Owned)
}

/// [`spec_view`] level by level: every shape, a part of the wrong type kept whole.
pub(super) fn spec_view_general(text: &str) -> Result<Value, Error> {
    let Some(members) = Members::of(text) else {
        return json_text(text, "data.spec");
    };
    let mut view = Map::new();
    for key in ["traffic", "replicas"] {
        if let Some(part) = members.get(key) {
            view.insert(key.to_string(), json(part, &format!("data.spec.{key}"))?);
        }
    }
    if let Some(part) = members.get("containers") {
        view.insert(
            "containers".to_string(),
            containers_view(part, "data.spec.containers")?,
        );
    }
    if let Some(template) = members.get("template") {
        let value = match Members::of(template.get()) {
            None => json(template, "data.spec.template")?,
            Some(template) => {
                let mut kept = Map::new();
                if let Some(inner) = template.get("spec") {
                    let inner = match Members::of(inner.get()) {
                        None => json(inner, "data.spec.template.spec")?,
                        Some(inner) => {
                            let mut kept = Map::new();
                            if let Some(part) = inner.get("containers") {
                                kept.insert(
                                    "containers".to_string(),
                                    containers_view(part, "data.spec.template.spec.containers")?,
                                );
                            }
                            Value::Object(kept)
                        }
                    };
                    kept.insert("spec".to_string(), inner);
                }
                Value::Object(kept)
            }
        };
        view.insert("template".to_string(), value);
    }
    Ok(Value::Object(view))
}

/// A containers list cut to each container's `name` and `image` (a list or container of the
/// wrong type kept whole).
fn containers_view(text: &RawValue, path: &str) -> Result<Value, Error> {
    let Some(items) = raw::elements(text) else {
        return json(text, path);
    };
    let mut kept = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let Some(container) = Members::of(item.get()) else {
            kept.push(json(item, &format!("{path}[{index}]"))?);
            continue;
        };
        let mut fields = Map::new();
        for key in ["name", "image"] {
            if let Some(part) = container.get(key) {
                fields.insert(
                    key.to_string(),
                    json(part, &format!("{path}[{index}].{key}"))?,
                );
            }
        }
        kept.push(Value::Object(fields));
    }
    Ok(Value::Array(kept))
}

fn invalid(path: impl std::fmt::Display, what: impl std::fmt::Display) -> Error {
    Error::InvalidObject(format!("{path}: {what}"))
}

/// Checks the bounds of one object's metadata (sizes that the state would keep).
fn check_bounds(object: &KubeObject, spec_bytes: usize, status_bytes: usize) -> Result<(), Error> {
    let over = |path: At<'_>, count: usize, limit: usize, unit: &str| {
        invalid(
            path,
            format!("{count} {unit}, more than the limit of {limit}"),
        )
    };
    let name = |path: At<'_>, value: &str, limit: usize| {
        if value.len() > limit {
            Err(over(path, value.len(), limit, "bytes"))
        } else {
            Ok(())
        }
    };
    name(At::new("data.metadata.name"), &object.name, MAX_NAME_BYTES)?;
    name(
        At::new("data.metadata.namespace"),
        &object.namespace,
        MAX_NAMESPACE_BYTES,
    )?;
    name(At::new("data.metadata.uid"), &object.uid, MAX_NAME_BYTES)?;
    name(
        At::new("data.metadata.resourceVersion"),
        &object.resource_version,
        MAX_NAME_BYTES,
    )?;
    name(At::new("data.kind"), &object.kind, MAX_NAME_BYTES)?;
    name(
        At::new("data.apiVersion"),
        &object.api_version,
        MAX_NAME_BYTES,
    )?;
    for (index, entry) in object.managed_fields.iter().enumerate() {
        let path = At::new("data.metadata.managedFields").item(index);
        name(path.member("manager"), &entry.manager, MAX_NAME_BYTES)?;
        name(path.member("operation"), &entry.operation, MAX_NAME_BYTES)?;
        name(
            path.member("subresource"),
            &entry.subresource,
            MAX_NAME_BYTES,
        )?;
        if let Some(time) = &entry.time {
            name(path.member("time"), time, MAX_NAME_BYTES)?;
        }
    }
    if object.managed_fields.len() > MAX_MANAGED_FIELDS {
        return Err(over(
            At::new("data.metadata.managedFields"),
            object.managed_fields.len(),
            MAX_MANAGED_FIELDS,
            "entries",
        ));
    }
    if object.labels.len() > MAX_LABELS {
        return Err(over(
            At::new("data.metadata.labels"),
            object.labels.len(),
            MAX_LABELS,
            "labels",
        ));
    }
    let label_bytes: usize = object
        .labels
        .iter()
        .map(|(key, value)| key.len() + value.len())
        .sum();
    if label_bytes > MAX_LABEL_BYTES {
        return Err(over(
            At::new("data.metadata.labels"),
            label_bytes,
            MAX_LABEL_BYTES,
            "bytes",
        ));
    }
    let owner_bytes: usize = object
        .owner_references
        .iter()
        .map(|owner| {
            owner.api_version.len() + owner.kind.len() + owner.name.len() + owner.uid.len()
        })
        .sum();
    if owner_bytes > MAX_OWNER_BYTES {
        return Err(over(
            At::new("data.metadata.ownerReferences"),
            owner_bytes,
            MAX_OWNER_BYTES,
            "bytes",
        ));
    }
    if status_bytes > MAX_STATUS_BYTES {
        return Err(invalid(
            "data.status",
            format!("more than the limit of {MAX_STATUS_BYTES} bytes"),
        ));
    }
    let annotation_bytes: usize = object
        .annotations
        .iter()
        .map(|(key, value)| key.len() + value.len())
        .sum();
    if annotation_bytes > MAX_ANNOTATION_BYTES {
        return Err(over(
            At::new("data.metadata.annotations"),
            annotation_bytes,
            MAX_ANNOTATION_BYTES,
            "bytes",
        ));
    }
    if object.owner_references.len() > MAX_OWNERS {
        return Err(over(
            At::new("data.metadata.ownerReferences"),
            object.owner_references.len(),
            MAX_OWNERS,
            "entries",
        ));
    }
    if let Some(data) = &object.data {
        // Counted without building the map (a repeated key was folded when it was read).
        if data.counted_bytes() > MAX_DATA_BYTES {
            return Err(over(
                At::new("data.data"),
                data.counted_bytes(),
                MAX_DATA_BYTES,
                "bytes",
            ));
        }
    }
    if spec_bytes > MAX_SPEC_BYTES {
        return Err(over(
            At::new("data.spec"),
            spec_bytes,
            MAX_SPEC_BYTES,
            "bytes of JSON",
        ));
    }
    Ok(())
}

/// Checks the types of the fields the classes read (`status` as [`checked_with`] has it).
fn check_types<T: Tree>(object: &KubeObject, status: &T) -> Result<(), Error> {
    if object.generation.is_some_and(|generation| generation < 0) {
        return Err(invalid("data.metadata.generation", "must not be negative"));
    }
    let view = spec_view(&object.spec)?;
    let spec = match view.as_ref() {
        Value::Null => None,
        spec @ Value::Object(_) => Some(spec),
        other => {
            return Err(invalid(
                "data.spec",
                format!("expected an object, got {}", type_name(other)),
            ))
        }
    };
    let status = if status.is_null() {
        None
    } else if status.is_object() {
        Some(status)
    } else {
        return Err(invalid(
            "data.status",
            format!("expected an object, got {}", status.type_name()),
        ));
    };
    if let Some(spec) = spec {
        traffic(spec, At::new("data.spec.traffic"))?;
        count(spec, "replicas", At::new("data.spec.replicas"))?;
        containers(spec.member("containers"), At::new("data.spec.containers"))?;
        if let Some(template) = spec.member("template") {
            let template = object_at(template, At::new("data.spec.template"))?;
            if let Some(inner) = template.member("spec") {
                let inner = object_at(inner, At::new("data.spec.template.spec"))?;
                containers(
                    inner.member("containers"),
                    At::new("data.spec.template.spec.containers"),
                )?;
            }
        }
    }
    // A Pod's state keeps only what the view holds of its spec (its containers' names and
    // images): the writer takes it from here instead of reading the spec again.
    if let Cow::Owned(view) = view {
        if object.api_version == "v1" && object.kind == "Pod" {
            object.spec.keep_view(view);
        }
    }
    if let Some(status) = status {
        let status_at = At::new("data.status");
        count(
            status,
            "observedGeneration",
            status_at.member("observedGeneration"),
        )?;
        for key in [
            "actualReplicas",
            "desiredReplicas",
            "replicas",
            "readyReplicas",
            "availableReplicas",
            "updatedReplicas",
        ] {
            count(status, key, status_at.member(key))?;
        }
        for key in [
            "latestCreatedRevisionName",
            "latestReadyRevisionName",
            "url",
            "imageDigest",
        ] {
            text(status, key, status_at.member(key), usize::MAX)?;
        }
        traffic(status, At::new("data.status.traffic"))?;
        conditions(status.member("conditions"))?;
        let statuses_at = At::new("data.status.containerStatuses");
        if let Some(statuses) = list(status.member("containerStatuses"), statuses_at)? {
            for (index, item) in statuses.iter().enumerate() {
                let path = statuses_at.item(index);
                let item = object_at(item, path)?;
                for key in ["name", "image", "imageID", "imageDigest"] {
                    text(item, key, path.member(key), usize::MAX)?;
                }
            }
        }
    }
    Ok(())
}

/// `value` when it is an object.
fn object_at<'a, T: Tree>(value: &'a T, path: At<'_>) -> Result<&'a T, Error> {
    if value.is_object() {
        Ok(value)
    } else {
        Err(invalid(
            path,
            format!("expected an object, got {}", value.type_name()),
        ))
    }
}

/// An optional list of at most [`MAX_LIST_ITEMS`].
fn list<'a, T: Tree>(value: Option<&'a T>, path: At<'_>) -> Result<Option<&'a [T]>, Error> {
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok(None);
    };
    match value.items() {
        Some(items) if items.len() > MAX_LIST_ITEMS => Err(invalid(
            path,
            format!(
                "{} entries, more than the limit of {MAX_LIST_ITEMS}",
                items.len()
            ),
        )),
        Some(items) => Ok(Some(items)),
        None => Err(invalid(
            path,
            format!("expected an array, got {}", value.type_name()),
        )),
    }
}

/// An optional string of at most `limit` bytes (`object` is an object).
fn text<T: Tree>(object: &T, key: &str, path: At<'_>, limit: usize) -> Result<(), Error> {
    let Some(value) = object.member(key).filter(|value| !value.is_null()) else {
        return Ok(());
    };
    match value.text() {
        Some(text) if text.len() > limit => Err(invalid(
            path,
            format!("{} bytes, more than the limit of {limit}", text.len()),
        )),
        Some(_) => Ok(()),
        None => Err(invalid(
            path,
            format!("expected a string, got {}", value.type_name()),
        )),
    }
}

/// An optional count: a non-negative integer (`object` is an object).
fn count<T: Tree>(object: &T, key: &str, path: At<'_>) -> Result<(), Error> {
    let Some(value) = object.member(key).filter(|value| !value.is_null()) else {
        return Ok(());
    };
    match value.number() {
        // Kubernetes' counts are int64: a larger one cannot be real and would not be read as one.
        Some(number) if number.as_i64().is_some_and(|n| n >= 0) => Ok(()),
        Some(_) => Err(invalid(
            path,
            "expected a non-negative integer of at most 2^63-1",
        )),
        None => Err(invalid(
            path,
            format!("expected a non-negative integer, got {}", value.type_name()),
        )),
    }
}

/// Traffic targets: objects whose `percent` is an integer from 0 to 100 (`object` is an
/// object).
fn traffic<T: Tree>(object: &T, path: At<'_>) -> Result<(), Error> {
    let Some(targets) = list(object.member("traffic"), path)? else {
        return Ok(());
    };
    for (index, target) in targets.iter().enumerate() {
        let at = path.item(index);
        let target = object_at(target, at)?;
        if let Some(percent) = target.member("percent").filter(|value| !value.is_null()) {
            let in_range = percent
                .number()
                .and_then(serde_json::Number::as_u64)
                .is_some_and(|p| p <= 100);
            if !in_range {
                return Err(invalid(
                    at.member("percent"),
                    format!("expected an integer from 0 to 100, got {percent}"),
                ));
            }
        }
        for key in ["revisionName", "configurationName", "tag", "url"] {
            text(target, key, at.member(key), usize::MAX)?;
        }
        if let Some(latest) = target.member("latestRevision") {
            if !latest.is_null() && !latest.is_bool() {
                return Err(invalid(
                    at.member("latestRevision"),
                    format!("expected a boolean, got {}", latest.type_name()),
                ));
            }
        }
    }
    Ok(())
}

/// Conditions: objects with a string `type`, and string `status`, `reason`, `message`, `severity`.
fn conditions<T: Tree>(value: Option<&T>) -> Result<(), Error> {
    let path = At::new("data.status.conditions");
    let Some(items) = list(value, path)? else {
        return Ok(());
    };
    for (index, item) in items.iter().enumerate() {
        let at = path.item(index);
        let item = object_at(item, at)?;
        for key in [
            "type",
            "status",
            "reason",
            "message",
            "severity",
            "lastTransitionTime",
        ] {
            text(item, key, at.member(key), MAX_CONDITION_TEXT)?;
        }
    }
    Ok(())
}

/// Containers: objects with string `name` and `image`.
fn containers<T: Tree>(value: Option<&T>, path: At<'_>) -> Result<(), Error> {
    let Some(items) = list(value, path)? else {
        return Ok(());
    };
    for (index, item) in items.iter().enumerate() {
        let at = path.item(index);
        let item = object_at(item, at)?;
        for key in ["name", "image"] {
            text(item, key, at.member(key), usize::MAX)?;
        }
    }
    Ok(())
}
