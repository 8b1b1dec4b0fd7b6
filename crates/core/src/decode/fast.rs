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

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::data::Counted;
use super::kept::KEPT_STATUS;
use super::object::{FieldsV1, KubeObject, ManagedFieldsEntry, ObjectSpec};
use super::raw::Scanned;
use super::tree::Node;
use super::DataMap;
use drift_model::OwnerReference;

mod view;

pub(crate) use view::spec_view;

/// A ConfigMap's text with its `data` object cut out (`{}` in its place): made when the scan
/// read and counted that object ([`super::raw::DataSpan::counted`]) and it is a large part of
/// the text, so the one pass reads only the rest (BENCHMARKS.md, issue 28: large objects).
pub(super) struct Cut<'a> {
    text: String,
    data: &'a str,
    counted: Counted,
}

/// [`Cut`] of `text`, when the scan read its `data` and copying the rest costs less than
/// reading that object again (a copy costs a small part of a read per byte: an eighth is far
/// on the safe side). Made before the kind is known: a Secret, or a ConfigMap with
/// `binaryData`, then goes the general way on `text`, and the copy was for nothing.
pub(super) fn cut_data<'a>(text: &'a str, scanned: &Scanned) -> Option<Cut<'a>> {
    let span = scanned.data?;
    let counted = span.counted?;
    let data = text.get(span.start..span.end)?;
    let rest = text.len() - data.len();
    if data.len().saturating_mul(8) < rest {
        return None;
    }
    let mut cut = String::with_capacity(rest + 2);
    cut.push_str(text.get(..span.start)?);
    cut.push_str("{}");
    cut.push_str(text.get(span.end..)?);
    Some(Cut {
        text: cut,
        data,
        counted,
    })
}

/// The object in `text` (valid JSON), or `None` for the general path; with it the kept members
/// of its `status` as a tree borrowed from the text read (`None` for no status or `null`),
/// which the shape check reads and writes to the kept text (`shape::checked_with`): the
/// object's own `status` is `Null`. With `cut` ([`cut_data`] of `text`), its text is read
/// instead, and the `data` taken from it.
///
/// The cut text parses exactly when `text` does: the object cut out is a whole JSON value that
/// the scan checked, in the place of another (`{}`); the one `data` member as written is the
/// one cut (a key written with an escape sends the object the general way, below, which reads
/// `text`).
pub(super) fn parse<'a>(
    text: &'a str,
    scanned: Scanned,
    cut: Option<&'a Cut<'a>>,
) -> Option<(KubeObject, Option<Node<'a>>)> {
    let (text, data) = match cut {
        Some(cut) => (cut.text.as_str(), Some(DataAt::Cut(cut.data, cut.counted))),
        None => (
            text,
            scanned.data.map(|span| DataAt::Span(span.start, span.end)),
        ),
    };
    // The spec's place is the scan's only in the text it scanned (a cut one is another).
    let spec_at = if cut.is_none() { scanned.spec } else { None };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let root = RootSeed {
        text,
        data,
        spec: spec_at,
    }
    .deserialize(&mut deserializer)
    .ok()?;
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
        // To be parsed now (and a number out of range named): the general path.
        Some(_) if !(scanned.compact && scanned.plain_numbers) => return None,
        Some(SpecRead::Raw(raw)) => ObjectSpec::from_raw(raw),
        Some(SpecRead::Viewed(text, view)) => {
            let spec = ObjectSpec::from_read_text(text);
            spec.keep_view(view);
            spec
        }
    };
    let object = KubeObject {
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
        status: Value::Null,
        kept_status: Default::default(),
        status_skipped_bytes,
        data,
        // `binaryData` (a value to hash) sends the object the general way.
        binary_data: false,
    };
    Some((object, status))
}

/// What the pass keeps of the top level.
#[derive(Default)]
struct Root<'de> {
    api_version: Option<String>,
    kind: Option<String>,
    metadata: Option<Meta>,
    spec: Option<SpecRead<'de>>,
    status: Option<Node<'de>>,
    status_skipped_bytes: usize,
    /// `data` as its text, checked to be an object of strings (else the pass fails: the
    /// general path words it).
    data: Option<Option<DataMap>>,
    /// `stringData` or `binaryData` present (values to hash).
    has_values: bool,
}

/// How the pass read the spec.
enum SpecRead<'de> {
    /// As its text, jumped over.
    Raw(Box<RawValue>),
    /// Read for its view ([`view`]), its text taken from where the scan saw it.
    Viewed(&'de str, Value),
}

/// The object's text, and where its `data` object ([`Scanned::data`]) and its `spec` object
/// ([`Scanned::spec`]) are.
struct RootSeed<'de> {
    text: &'de str,
    data: Option<DataAt<'de>>,
    spec: Option<(usize, usize)>,
}

/// Where the pass finds a ConfigMap's `data`.
#[derive(Clone, Copy)]
enum DataAt<'a> {
    /// At these bytes of the text read: checked and counted as it is read, its text taken from
    /// there.
    Span(usize, usize),
    /// Cut out of the text read (`{}` in its place): this text, read and counted by the scan.
    Cut(&'a str, Counted),
}

impl<'de> DeserializeSeed<'de> for RootSeed<'de> {
    type Value = Root<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Root<'de>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RootSeed<'de> {
    type Value = Root<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Root<'de>, A::Error> {
        let mut root = Root::default();
        let mut data_at = self.data;
        let mut spec_at = self.spec;
        while let Some(key) = access.next_key::<&'de str>()? {
            match key {
                "apiVersion" => root.api_version = access.next_value()?,
                "kind" => root.kind = access.next_value()?,
                "metadata" => root.metadata = Some(access.next_value_seed(MetaSeed)?),
                "spec" => {
                    root.spec = Some(match spec_at.take() {
                        // The one member named so, an object (the scan found it): read once,
                        // for its view, its text taken from where the scan saw it. The text is
                        // used only when the whole pass succeeds, so the two agree on where it
                        // is (`raw::scan`).
                        Some((start, end)) => {
                            let view = access.next_value_seed(view::SpecView)?;
                            let text = self
                                .text
                                .get(start..end)
                                .filter(|text| text.starts_with('{') && text.ends_with('}'))
                                .ok_or_else(|| {
                                    serde::de::Error::custom("spec is not where the scan saw it")
                                })?;
                            SpecRead::Viewed(text, view)
                        }
                        None => SpecRead::Raw(access.next_value::<Box<RawValue>>()?),
                    });
                }
                "status" => {
                    let (status, skipped) = access.next_value_seed(StatusSeed)?;
                    root.status = status;
                    root.status_skipped_bytes = skipped;
                }
                "data" => {
                    root.data = Some(match data_at.take() {
                        Some(DataAt::Cut(text, counted)) => {
                            access.next_value::<IgnoredAny>()?;
                            Some(
                                DataMap::from_counted(text, counted)
                                    .map_err(serde::de::Error::custom)?,
                            )
                        }
                        // The scan found this object (the one member named so): checked and
                        // counted as it is read, its text taken from where the scan saw it,
                        // not skipped here to be read again.
                        Some(DataAt::Span(start, end)) => {
                            let counted = access.next_value_seed(CountedSeed)?;
                            let text = self.text.get(start..end).ok_or_else(|| {
                                serde::de::Error::custom("data is not where the scan saw it")
                            })?;
                            Some(
                                DataMap::from_counted(text, counted)
                                    .map_err(serde::de::Error::custom)?,
                            )
                        }
                        None => access
                            .next_value::<Option<&'de RawValue>>()?
                            .map(DataMap::from_raw)
                            .transpose()
                            .map_err(serde::de::Error::custom)?,
                    });
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

/// A ConfigMap's `data` object, checked and counted in the object's pass.
struct CountedSeed;

impl<'de> DeserializeSeed<'de> for CountedSeed {
    type Value = Counted;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Counted, D::Error> {
        Counted::read(deserializer)
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

/// `status`: the members in [`KEPT_STATUS`] as a tree borrowed from the text, and the bytes of
/// the rest.
struct StatusSeed;

impl<'de> DeserializeSeed<'de> for StatusSeed {
    type Value = (Option<Node<'de>>, usize);

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
    type Value = (Node<'de>, usize);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(KeptSeed)
    }
}

impl<'de> Visitor<'de> for KeptSeed {
    type Value = (Node<'de>, usize);

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut kept = Vec::new();
        let mut skipped = 0usize;
        while let Some(key) = access.next_key::<&'de str>()? {
            if KEPT_STATUS.contains(&key) {
                kept.push((Cow::Borrowed(key), access.next_value::<Node<'de>>()?));
            } else {
                let raw = access.next_value::<&'de RawValue>()?;
                skipped = skipped.saturating_add(key.len() + raw.get().len());
            }
        }
        Ok((Node::object(kept), skipped))
    }
}

#[cfg(test)]
mod tests;
