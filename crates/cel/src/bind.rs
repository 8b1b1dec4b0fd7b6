//! The object an expression is evaluated on, as CEL sees it: the fields of the Kubernetes object
//! borrowed from the engine's state (an [`ObjectView`]), converted to CEL values without copying
//! its strings, and only in the parts the expressions read (see [`Fields`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use cel::Context;

use drift_model::{OwnerReference, Pairs};

use crate::budget;
use crate::fields::Fields;

/// The variables of one evaluation: the object (and the one before), borrowed.
pub struct Bindings<'v> {
    context: Context<'v, 'v>,
}

impl Bindings<'static> {
    /// An object with every part present and empty, to probe an expression's result type.
    pub(crate) fn sample() -> Bindings<'static> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        static EMPTY_OBJECT: OnceLock<serde_json::Value> = OnceLock::new();
        static NO_PAIRS: OnceLock<Pairs> = OnceLock::new();
        let no_pairs = NO_PAIRS.get_or_init(Pairs::new);
        let spec = EMPTY_OBJECT.get_or_init(|| serde_json::json!({}));
        let view = ObjectView {
            api_version: "v1",
            kind: "Sample",
            name: "sample",
            namespace: "default",
            uid: "sample",
            resource_version: "1",
            generation: Some(1),
            creation_timestamp: None,
            deletion_timestamp: None,
            labels: no_pairs,
            annotations: no_pairs,
            owners: &[],
            spec,
            status: spec,
            data: Some(&EMPTY),
        };
        Bindings::new(&view, None, &Fields::everything(), &Fields::everything())
    }
}

impl<'v> Bindings<'v> {
    /// Binds `object`, and `oldObject`: the object before an update, `null` when there is none
    /// (its first sight, a re-assessment), as Kubernetes' admission CEL binds it on create.
    /// Only the parts the expressions read are bound (`object_fields`, `old_fields`: what
    /// [`Expression::fields`](crate::Expression::fields) says, merged over the expressions
    /// evaluated).
    pub fn new(
        object: &ObjectView<'v>,
        old: Option<&ObjectView<'v>>,
        object_fields: &Fields,
        old_fields: &Fields,
    ) -> Bindings<'v> {
        let mut context = Context::with_env(Arc::clone(crate::env()));
        budget::install(&mut context);
        // The string functions the crate does itself (they charge through `budget`).
        crate::strings::install(&mut context);
        context.add_variable_as_val("object", object.to_val(object_fields));
        match old {
            Some(old) => context.add_variable_as_val("oldObject", old.to_val(old_fields)),
            None => context.add_variable_as_val("oldObject", Box::new(CelNull)),
        }
        Bindings { context }
    }

    /// Variables given as JSON values, as the API server binds an admission request's
    /// (`object`, `oldObject`, `request`, `variables`, ...): every value converted whole;
    /// `object` and `oldObject` are null unless given.
    pub fn json(variables: &[(&str, &'v serde_json::Value)]) -> Bindings<'v> {
        let mut context = Context::with_env(Arc::clone(crate::env()));
        budget::install(&mut context);
        crate::strings::install(&mut context);
        for name in ["object", "oldObject"] {
            context.add_variable_as_val(name, Box::new(CelNull));
        }
        for (name, value) in variables {
            context.add_variable_as_val(*name, json(value));
        }
        Bindings { context }
    }

    /// The context an expression resolves in: the variables and the budget's functions.
    pub(crate) fn context(&self) -> &Context<'v, 'v> {
        &self.context
    }
}

/// An object as an expression sees it: the fields of the Kubernetes object, borrowed.
pub struct ObjectView<'v> {
    /// `apiVersion`.
    pub api_version: &'v str,
    /// `kind`.
    pub kind: &'v str,
    /// `metadata.name`.
    pub name: &'v str,
    /// `metadata.namespace` (empty: cluster-scoped, left out).
    pub namespace: &'v str,
    /// `metadata.uid`.
    pub uid: &'v str,
    /// `metadata.resourceVersion`.
    pub resource_version: &'v str,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<&'v str>,
    /// `metadata.deletionTimestamp`.
    pub deletion_timestamp: Option<&'v str>,
    /// `metadata.labels` (always present, maybe empty).
    pub labels: &'v Pairs,
    /// `metadata.annotations` (always present, maybe empty).
    pub annotations: &'v Pairs,
    /// `metadata.ownerReferences`.
    pub owners: &'v [OwnerReference],
    /// `spec` (`null`: left out).
    pub spec: &'v serde_json::Value,
    /// `status` (`null`: left out).
    pub status: &'v serde_json::Value,
    /// `data`.
    pub data: Option<&'v BTreeMap<String, String>>,
}

fn text<'v>(value: &'v str) -> Box<dyn Val + 'v> {
    Box::new(CelString::from(value))
}

fn string_map<'v>(map: impl Iterator<Item = (&'v str, &'v str)>) -> Box<dyn Val + 'v> {
    let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = map
        .map(|(key, value)| (CelMapKey::from(key), text(value)))
        .collect();
    Box::new(CelMap::from(entries))
}

fn record<'v>(fields: Vec<(&'static str, Box<dyn Val + 'v>)>) -> Box<dyn Val + 'v> {
    let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = fields
        .into_iter()
        .map(|(key, value)| (CelMapKey::from(key), value))
        .collect();
    Box::new(CelMap::from(entries))
}

impl<'v> ObjectView<'v> {
    fn to_val(&self, fields: &Fields) -> Box<dyn Val + 'v> {
        let mut top = vec![
            ("apiVersion", text(self.api_version)),
            ("kind", text(self.kind)),
        ];
        if fields.child("metadata").is_some() {
            top.push(("metadata", self.metadata()));
        }
        if let Some(spec) = fields.child("spec").filter(|_| !self.spec.is_null()) {
            top.push(("spec", pruned(self.spec, spec)));
        }
        if let Some(status) = fields.child("status").filter(|_| !self.status.is_null()) {
            top.push(("status", pruned(self.status, status)));
        }
        if let (Some(data), Some(_)) = (self.data, fields.child("data")) {
            top.push((
                "data",
                string_map(
                    data.iter()
                        .map(|(key, value)| (key.as_str(), value.as_str())),
                ),
            ));
        }
        record(top)
    }

    fn metadata(&self) -> Box<dyn Val + 'v> {
        let mut metadata = vec![
            ("name", text(self.name)),
            ("uid", text(self.uid)),
            ("resourceVersion", text(self.resource_version)),
            ("labels", string_map(self.labels.iter())),
            ("annotations", string_map(self.annotations.iter())),
        ];
        if !self.namespace.is_empty() {
            metadata.push(("namespace", text(self.namespace)));
        }
        if let Some(generation) = self.generation {
            metadata.push(("generation", Box::new(CelInt::from(generation))));
        }
        if let Some(created) = self.creation_timestamp {
            metadata.push(("creationTimestamp", text(created)));
        }
        if let Some(deleted) = self.deletion_timestamp {
            metadata.push(("deletionTimestamp", text(deleted)));
        }
        if !self.owners.is_empty() {
            let owners: Vec<Box<dyn Val + 'v>> = self
                .owners
                .iter()
                .map(|owner| {
                    record(vec![
                        ("apiVersion", text(&owner.api_version)),
                        ("kind", text(&owner.kind)),
                        ("name", text(&owner.name)),
                        ("uid", text(&owner.uid)),
                        ("controller", Box::new(CelBool::from(owner.controller))),
                    ])
                })
                .collect();
            metadata.push(("ownerReferences", Box::new(CelList::from(owners))));
        }
        record(metadata)
    }
}

/// The parts of a JSON value that `fields` reads, as CEL sees them (see [`json`]).
fn pruned<'v>(value: &'v serde_json::Value, fields: &Fields) -> Box<dyn Val + 'v> {
    match value {
        serde_json::Value::Object(entries) if !fields.is_whole() => {
            let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = fields
                .children()
                .filter_map(|(key, below)| {
                    entries
                        .get_key_value(key)
                        .map(|(key, value)| (CelMapKey::from(key.as_str()), pruned(value, below)))
                })
                .collect();
            Box::new(CelMap::from(entries))
        }
        _ => json(value),
    }
}

/// A JSON value as CEL sees it, borrowed: integers stay `int` (as Kubernetes' CEL has them),
/// numbers beyond `int` are `uint` or `double`.
fn json<'v>(value: &'v serde_json::Value) -> Box<dyn Val + 'v> {
    match value {
        serde_json::Value::Null => Box::new(CelNull),
        serde_json::Value::Bool(value) => Box::new(CelBool::from(*value)),
        serde_json::Value::Number(number) => {
            if let Some(int) = number.as_i64() {
                Box::new(CelInt::from(int))
            } else if let Some(uint) = number.as_u64() {
                Box::new(CelUInt::from(uint))
            } else {
                Box::new(CelDouble::from(number.as_f64().unwrap_or(f64::NAN)))
            }
        }
        serde_json::Value::String(value) => text(value),
        serde_json::Value::Array(items) => {
            Box::new(CelList::from(items.iter().map(json).collect::<Vec<_>>()))
        }
        serde_json::Value::Object(entries) => {
            let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = entries
                .iter()
                .map(|(key, value)| (CelMapKey::from(key.as_str()), json(value)))
                .collect();
            Box::new(CelMap::from(entries))
        }
    }
}

/// An object for the tests: a namespaced `kind` with this spec and labels, nothing else.
#[cfg(test)]
pub(crate) fn sample_view<'v>(
    kind: &'v str,
    spec: &'v serde_json::Value,
    labels: &BTreeMap<String, String>,
) -> ObjectView<'v> {
    // Test objects live for the test process; the view borrows its labels.
    let labels: &'v Pairs = Box::leak(Box::new(Pairs::from(labels)));
    ObjectView {
        api_version: "v1",
        kind,
        name: "d",
        namespace: "n",
        uid: "u",
        resource_version: "1",
        generation: Some(1),
        creation_timestamp: None,
        deletion_timestamp: None,
        labels,
        annotations: labels,
        owners: &[],
        spec,
        status: &serde_json::Value::Null,
        data: None,
    }
}

#[cfg(test)]
mod tests;
