//! The object decoder's fast path: one pass over an event's object into the parts the pipeline
//! keeps (BENCHMARKS.md, issue 28), where the general path ([`super::object`]) reads the object
//! level by level (a pass over the bytes per level). It takes the common shape only: every
//! member of the expected type, a ConfigMap's `data` of strings, no values to hash (a Secret's,
//! `binaryData`). Anything else (a value of the wrong type, a missing name, a Secret) returns
//! `None` and goes the general way, which
//! accepts the same objects, builds the same [`KubeObject`] and words every error; a test holds
//! the two paths to the same result on real objects.
//!
//! Members keep JSON's last-wins for a repeated key, as the general path does.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::kept::KEPT_STATUS;
use super::object::{FieldsV1, KubeObject, ManagedFieldsEntry, ObjectSpec};
use super::raw::Scanned;
use super::DataMap;
use drift_model::OwnerReference;

/// The object in `text` (valid JSON), or `None` for the general path.
pub(super) fn parse(text: &str, scanned: Scanned) -> Option<KubeObject> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let root = RootSeed.deserialize(&mut deserializer).ok()?;
    // Nothing after the object (a binary-mode body was not read as JSON before this pass).
    deserializer.end().ok()?;
    let Root {
        api_version,
        kind,
        metadata,
        spec,
        status,
        status_skipped_bytes,
        data,
        has_values,
    } = root;
    let api_version = api_version.filter(|text| !text.is_empty())?;
    let kind = kind.filter(|text| !text.is_empty())?;
    // Values to hash (a Secret's, `binaryData`, `stringData`) are the general path's.
    if api_version == "v1" && kind == "Secret" || has_values {
        return None;
    }
    // A ConfigMap keeps its `data` (none or `null`: no values); any other kind's is not read.
    let data = (api_version == "v1" && kind == "ConfigMap").then(|| {
        std::sync::Arc::new(
            data.flatten()
                .unwrap_or_else(|| DataMap::from_map(BTreeMap::new())),
        )
    });
    let Meta {
        name,
        namespace,
        uid,
        resource_version,
        generation,
        creation_timestamp,
        deletion_timestamp,
        labels,
        annotations,
        owner_references,
        managed_fields,
    } = metadata?;
    let name = name.filter(|text| !text.is_empty())?;
    let uid = uid.filter(|text| !text.is_empty())?;
    let resource_version = resource_version
        .filter(|text| !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()))?;
    let spec = match spec {
        None => ObjectSpec::default(),
        Some(raw) if scanned.compact && scanned.plain_numbers => ObjectSpec::from_raw(raw),
        // To be parsed now (and a number out of range named): the general path.
        Some(_) => return None,
    };
    Some(KubeObject {
        api_version,
        kind,
        name,
        namespace: namespace.unwrap_or_default(),
        uid,
        resource_version,
        generation,
        creation_timestamp,
        deletion_timestamp,
        labels: labels.unwrap_or_default(),
        annotations: annotations.unwrap_or_default(),
        owner_references: owner_references.unwrap_or_default(),
        managed_fields: managed_fields.unwrap_or_default(),
        spec,
        status: status.unwrap_or(Value::Null),
        kept_status: Default::default(),
        status_skipped_bytes,
        data,
        // `binaryData` (a value to hash) sends the object the general way.
        binary_data: false,
    })
}

/// What the pass keeps of the top level.
#[derive(Default)]
struct Root {
    api_version: Option<String>,
    kind: Option<String>,
    metadata: Option<Meta>,
    spec: Option<Box<RawValue>>,
    status: Option<Value>,
    status_skipped_bytes: usize,
    /// `data` as its text, checked to be an object of strings (else the pass fails: the
    /// general path words it).
    data: Option<Option<DataMap>>,
    /// `stringData` or `binaryData` present (values to hash).
    has_values: bool,
}

struct RootSeed;

impl<'de> DeserializeSeed<'de> for RootSeed {
    type Value = Root;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Root, D::Error> {
        deserializer.deserialize_map(RootSeed)
    }
}

impl<'de> Visitor<'de> for RootSeed {
    type Value = Root;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Root, A::Error> {
        let mut root = Root::default();
        while let Some(key) = access.next_key::<&'de str>()? {
            match key {
                "apiVersion" => root.api_version = access.next_value()?,
                "kind" => root.kind = access.next_value()?,
                "metadata" => root.metadata = Some(access.next_value_seed(MetaSeed)?),
                "spec" => root.spec = Some(access.next_value::<Box<RawValue>>()?),
                "status" => {
                    let (status, skipped) = access.next_value_seed(StatusSeed)?;
                    root.status = status;
                    root.status_skipped_bytes = skipped;
                }
                "data" => {
                    root.data = Some(
                        access
                            .next_value::<Option<&'de RawValue>>()?
                            .map(DataMap::from_raw)
                            .transpose()
                            .map_err(serde::de::Error::custom)?,
                    );
                }
                "stringData" | "binaryData" => {
                    access.next_value::<IgnoredAny>()?;
                    root.has_values = true;
                }
                _ => {
                    access.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(root)
    }
}

/// What the pass keeps of `metadata`.
#[derive(Default)]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<String>,
    deletion_timestamp: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
    managed_fields: Option<Vec<ManagedFieldsEntry>>,
}

struct MetaSeed;

impl<'de> DeserializeSeed<'de> for MetaSeed {
    type Value = Meta;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Meta, D::Error> {
        deserializer.deserialize_map(MetaSeed)
    }
}

impl<'de> Visitor<'de> for MetaSeed {
    type Value = Meta;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Meta, A::Error> {
        let mut meta = Meta::default();
        while let Some(key) = access.next_key::<&'de str>()? {
            match key {
                "name" => meta.name = access.next_value()?,
                "namespace" => meta.namespace = access.next_value()?,
                "uid" => meta.uid = access.next_value()?,
                "resourceVersion" => meta.resource_version = access.next_value()?,
                "generation" => meta.generation = access.next_value()?,
                "creationTimestamp" => meta.creation_timestamp = access.next_value()?,
                "deletionTimestamp" => meta.deletion_timestamp = access.next_value()?,
                "labels" => meta.labels = access.next_value()?,
                "annotations" => meta.annotations = access.next_value()?,
                "ownerReferences" => meta.owner_references = access.next_value()?,
                "managedFields" => {
                    meta.managed_fields = access.next_value_seed(Nullable(EntriesSeed))?;
                }
                _ => {
                    access.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(meta)
    }
}

/// `null` or what the inner seed reads.
struct Nullable<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Nullable<S> {
    type Value = Option<S::Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Nullable<S> {
    type Value = Option<S::Value>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("null or a value")
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(deserializer).map(Some)
    }
}

/// `managedFields`: the entries, each trie kept as text.
struct EntriesSeed;

impl<'de> DeserializeSeed<'de> for EntriesSeed {
    type Value = Vec<ManagedFieldsEntry>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(EntriesSeed)
    }
}

impl<'de> Visitor<'de> for EntriesSeed {
    type Value = Vec<ManagedFieldsEntry>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(4));
        while let Some(entry) = access.next_element_seed(EntrySeed)? {
            entries.push(entry);
        }
        Ok(entries)
    }
}

struct EntrySeed;

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = ManagedFieldsEntry;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(EntrySeed)
    }
}

impl<'de> Visitor<'de> for EntrySeed {
    type Value = ManagedFieldsEntry;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut manager: Option<String> = None;
        let mut operation: Option<String> = None;
        let mut subresource: Option<String> = None;
        let mut time: Option<String> = None;
        let mut fields: Option<Box<RawValue>> = None;
        while let Some(key) = access.next_key::<&'de str>()? {
            match key {
                "manager" => manager = access.next_value()?,
                "operation" => operation = access.next_value()?,
                "subresource" => subresource = access.next_value()?,
                "time" => time = access.next_value()?,
                "fieldsV1" => fields = Some(access.next_value()?),
                _ => {
                    access.next_value::<IgnoredAny>()?;
                }
            }
        }
        let fields = match fields {
            None => FieldsV1::default(),
            Some(raw) if raw.get() == "null" || raw.get().starts_with('{') => {
                FieldsV1::from_raw(raw)
            }
            // Not an object: the general path names it.
            Some(_) => return Err(serde::de::Error::custom("fieldsV1 is not an object")),
        };
        Ok(ManagedFieldsEntry {
            manager: manager.unwrap_or_default(),
            operation: operation.unwrap_or_default(),
            subresource: subresource.unwrap_or_default(),
            time,
            fields,
        })
    }
}

/// `status`: the members in [`KEPT_STATUS`] as values, and the bytes of the rest.
struct StatusSeed;

impl<'de> DeserializeSeed<'de> for StatusSeed {
    type Value = (Option<Value>, usize);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer
            .deserialize_option(Nullable(KeptSeed))
            .map(|kept| match kept {
                Some((status, skipped)) => (Some(status), skipped),
                None => (None, 0),
            })
    }
}

struct KeptSeed;

impl<'de> DeserializeSeed<'de> for KeptSeed {
    type Value = (Value, usize);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(KeptSeed)
    }
}

impl<'de> Visitor<'de> for KeptSeed {
    type Value = (Value, usize);

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut kept = Map::new();
        let mut skipped = 0usize;
        while let Some(key) = access.next_key::<&'de str>()? {
            if KEPT_STATUS.contains(&key) {
                kept.insert(key.to_string(), access.next_value::<Value>()?);
            } else {
                let raw = access.next_value::<&'de RawValue>()?;
                skipped = skipped.saturating_add(key.len() + raw.get().len());
            }
        }
        Ok((Value::Object(kept), skipped))
    }
}

/// The parts of a spec the shape checks read (see `shape::spec_view`), in one pass; `None` when a
/// part has another type (the general way keeps it whole, for the check to name).
pub(crate) fn spec_view(text: &str) -> Option<Value> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    SpecViewSeed.deserialize(&mut deserializer).ok()
}

/// Which object a view is read from: the spec, a pod template, or a pod spec.
#[derive(Clone, Copy)]
enum Level {
    Spec,
    Template,
    PodSpec,
}

struct SpecViewSeed;

impl<'de> DeserializeSeed<'de> for SpecViewSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_map(ViewSeed(Level::Spec))
    }
}

struct ViewSeed(Level);

impl<'de> DeserializeSeed<'de> for ViewSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ViewSeed {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut view = Map::new();
        while let Some(key) = access.next_key::<&'de str>()? {
            match (self.0, key) {
                (Level::Spec, "traffic" | "replicas") => {
                    view.insert(key.to_string(), access.next_value::<Value>()?);
                }
                (Level::Spec | Level::PodSpec, "containers") => {
                    view.insert(key.to_string(), access.next_value_seed(ContainersSeed)?);
                }
                (Level::Spec, "template") => {
                    view.insert(
                        key.to_string(),
                        access.next_value_seed(ViewSeed(Level::Template))?,
                    );
                }
                (Level::Template, "spec") => {
                    view.insert(
                        key.to_string(),
                        access.next_value_seed(ViewSeed(Level::PodSpec))?,
                    );
                }
                _ => {
                    access.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(view))
    }
}

/// A containers list cut to each container's `name` and `image`.
struct ContainersSeed;

impl<'de> DeserializeSeed<'de> for ContainersSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ContainersSeed {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut containers = Vec::with_capacity(access.size_hint().unwrap_or(2));
        while let Some(container) = access.next_element_seed(ContainerSeed)? {
            containers.push(container);
        }
        Ok(Value::Array(containers))
    }
}

struct ContainerSeed;

impl<'de> DeserializeSeed<'de> for ContainerSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ContainerSeed {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = access.next_key::<&'de str>()? {
            if key == "name" || key == "image" {
                fields.insert(key.to_string(), access.next_value::<Value>()?);
            } else {
                access.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Value::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::object::parse_general;
    use crate::decode::raw::scan;

    mod certificates;

    /// Every object of the Knative fixtures (real objects and ones derived from Knative's
    /// sources), as the API server would send it: with a uid and a resourceVersion.
    fn fixtures() -> Vec<Value> {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/knative");
        let mut files = vec![root];
        let mut objects = Vec::new();
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(
                    std::fs::read_dir(&path)
                        .unwrap()
                        .map(|entry| entry.unwrap().path()),
                );
                continue;
            }
            if path.extension().is_none_or(|extension| extension != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let Ok(documents) = serde_saphyr::from_multiple::<Value>(&text) else {
                continue;
            };
            for mut document in documents {
                let items = match document.get_mut("items").map(Value::take) {
                    Some(Value::Array(items)) => items,
                    _ => vec![document],
                };
                for mut object in items {
                    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
                    else {
                        continue;
                    };
                    metadata.entry("uid").or_insert_with(|| "u-1".into());
                    metadata
                        .entry("resourceVersion")
                        .or_insert_with(|| "17".into());
                    objects.push(object);
                }
            }
        }
        objects
    }

    /// Variants the fast path must read alike or leave to the general path: nulls, repeated
    /// members, wrong types, a Secret.
    fn variants(object: &Value) -> Vec<String> {
        let text = object.to_string();
        let mut out = vec![text.clone()];
        out.push(text.replacen("{", r#"{"status":null,"#, 1));
        out.push(text.replacen("{", r#"{"spec":{"a":1},"#, 1));
        out.push(text.replacen(
            r#""metadata":{"#,
            r#""metadata":{"labels":null,"generation":1.5,"#,
            1,
        ));
        out.push(text.replacen(
            r#""metadata":{"#,
            r#""metadata":{"managedFields":[{"manager":"m","fieldsV1":[1]}],"#,
            1,
        ));
        out.push(text.replacen(r#""metadata":{"#, r#""metadata":{"name":"","#, 1));
        out.push(text.replacen(r#""kind":"#, r#""data":{"k":"v"},"kind":"#, 1));
        out.push(text.replacen(r#""kind":"#, r#""data":null,"kind":"#, 1));
        out.push(text.replacen(r#""kind":"#, r#""data":{"k":1},"kind":"#, 1));
        out.push(text.replacen(r#""kind":"#, r#""data":{"k":"a","k":"b\u00e9"},"kind":"#, 1));
        out.push(text.replacen(r#""kind":"#, r#""binaryData":{"b":"AAE="},"kind":"#, 1));
        out.push(text.replacen(
            r#""kind":"#,
            r#""status":{"replicas":"two","x":[1,2]},"kind":"#,
            1,
        ));
        out
    }

    /// What the tree parser refused anywhere in an object is refused still, in a member that is
    /// only skipped (an unkept status member, a field trie) as in one that is parsed later (the
    /// spec): a number out of range and a lone surrogate (the skipping scanner checks neither).
    #[test]
    fn what_the_tree_parser_refused_anywhere_is_refused() {
        let object = |inside: &str| {
            let (trie, status) = match inside.strip_prefix("trie:") {
                Some(trie) => (trie, "0"),
                None => ("{}", inside),
            };
            format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","uid":"u","resourceVersion":"1","managedFields":[{{"manager":"m","fieldsV1":{{"f:x":{trie}}}}}]}},"spec":{{"containers":[]}},"status":{{"unkept":{status}}}}}"#
            )
        };
        assert!(crate::decode::parse_object_text(&object("0")).is_ok());
        for bad in [
            "1e400",
            &"9".repeat(400),
            r#""\ud800a""#,
            r#""\udc00""#,
            "trie:1e400",
            r#"trie:{"x":"\ud800"}"#,
        ] {
            let text = object(bad);
            let error = crate::decode::parse_object_text(&text).unwrap_err();
            assert_eq!(error.kind(), "invalid_json", "{text}: {error}");
        }
        // The same inside the spec, which is kept as text and parsed only when read.
        let spec = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":"u","resourceVersion":"1"},"spec":{"x":"\ud800a"}}"#;
        assert!(crate::decode::parse_object_text(spec).is_err());
        // A proper pair and Go's escapes are fine.
        let fine = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":"u","resourceVersion":"1"},"spec":{"x":"\ud83d\ude00 \u003c"}}"#;
        let object = crate::decode::parse_object_text(fine).unwrap();
        assert_eq!(object.spec.value()["x"], "😀 <");
    }

    #[test]
    fn the_fast_path_reads_real_objects_as_the_general_path_does() {
        let mut objects = fixtures();
        // ConfigMaps as Knative's are (`config-autoscaler`), and Secrets, which go the general way.
        for kind in ["ConfigMap", "Secret"] {
            objects.push(serde_json::json!({
                "apiVersion": "v1", "kind": kind,
                "metadata": {"name": "config-autoscaler", "namespace": "knative-serving",
                    "uid": "u-2", "resourceVersion": "9",
                    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
                "data": {"enable-scale-to-zero": "false", "_example": "# a long\n# comment"}
            }));
        }
        assert!(objects.len() >= 40, "{} fixture objects", objects.len());
        let (mut fast_count, mut total, mut config_maps) = (0, 0, 0);
        for object in &objects {
            for text in variants(object) {
                total += 1;
                let scanned = scan(&text).unwrap();
                let general = parse_general(&text, scanned);
                if let Some(fast) = parse(&text, scanned) {
                    fast_count += 1;
                    config_maps += usize::from(fast.data.is_some());
                    let general = general.unwrap_or_else(|error| {
                        panic!("the fast path took what the general one refuses ({error}): {text}")
                    });
                    assert_eq!(fast, general, "{text}");
                    assert_eq!(fast.spec.raw().get(), general.spec.raw().get());
                    assert_eq!(fast.status_skipped_bytes, general.status_skipped_bytes);
                }
            }
        }
        // The spec's view in one pass equals the level-by-level one.
        for object in &objects {
            let Some(spec) = object.get("spec") else {
                continue;
            };
            let text = spec.to_string();
            if let Some(view) = spec_view(&text) {
                let raw = RawValue::from_string(text.clone()).unwrap();
                let general = crate::decode::shape::spec_view_general(&raw).unwrap();
                assert_eq!(view, general, "{text}");
            }
        }
        // ConfigMaps go the fast way, with or without their data.
        assert!(
            config_maps >= 3,
            "{config_maps} ConfigMaps took the fast path"
        );
        // Most real objects go the fast way (the rest: Secrets, the broken variants).
        assert!(
            fast_count * 2 > total,
            "{fast_count} of {total} took the fast path"
        );
    }
}
