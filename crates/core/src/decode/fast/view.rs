//! A spec's view in one pass: the parts the shape checks and a Pod's state read (`traffic`,
//! `replicas`, the containers' names and images, `containers` and `template.spec.containers`),
//! the rest jumped over. A part of an unexpected type is kept whole, as the level-by-level
//! reader (`shape::spec_view_general`) keeps it, so the view of a spec object is one pass (the
//! check then names the part); tests hold the two to the same result. The one exception: a
//! repeated member is read every time it appears, where the level-by-level reader reads only
//! the last, so an earlier one that `Value` cannot read (serde_json's raw-value token with a
//! value that is not JSON text) fails this pass, and the object goes the general way.

use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::decode::raw::Key;

/// The view of the spec in `text`; `None` when it is not a JSON object, or has a part `Value`
/// cannot read (see the module's docs).
pub(crate) fn spec_view(text: &str) -> Option<Value> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let view = SpecView.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(view)
}

/// The view of a spec object read by `deserializer` (an error for another type).
pub(super) struct SpecView;

impl<'de> DeserializeSeed<'de> for SpecView {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_map(Part::Level(Level::Spec))
    }
}

/// Which object a view is read from: the spec, a pod template, or a pod spec.
#[derive(Clone, Copy)]
enum Level {
    Spec,
    Template,
    PodSpec,
}

/// A part of the view, read as what it should be, or whole when it is another type.
#[derive(Clone, Copy)]
enum Part {
    /// An object at this level: its kept members.
    Level(Level),
    /// A containers list: each container cut to its name and image.
    Containers,
    /// One container: its `name` and `image`.
    Container,
}

impl<'de> DeserializeSeed<'de> for Part {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// A value whole, as `serde_json::Value` reads it (serde_json's raw-value token included).
fn whole<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
    Value::deserialize(deserializer)
}

impl<'de> Visitor<'de> for Part {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let level = match self {
            Part::Level(level) => Some(level),
            Part::Container => None,
            Part::Containers => return whole(MapAccessDeserializer::new(access)),
        };
        let mut view = Map::new();
        while let Some(Key(key)) = access.next_key::<Key<'de>>()? {
            let part = match (level, &*key) {
                (Some(Level::Spec), "traffic" | "replicas") | (None, "name" | "image") => {
                    view.insert(key.into_owned(), access.next_value::<Value>()?);
                    continue;
                }
                (Some(Level::Spec | Level::PodSpec), "containers") => Part::Containers,
                (Some(Level::Spec), "template") => Part::Level(Level::Template),
                (Some(Level::Template), "spec") => Part::Level(Level::PodSpec),
                _ => {
                    access.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            view.insert(key.into_owned(), access.next_value_seed(part)?);
        }
        Ok(Value::Object(view))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        if !matches!(self, Part::Containers) {
            return whole(SeqAccessDeserializer::new(access));
        }
        let mut containers = Vec::with_capacity(access.size_hint().unwrap_or(2));
        while let Some(container) = access.next_element_seed(Part::Container)? {
            containers.push(container);
        }
        Ok(Value::Array(containers))
    }

    // Scalars are never the part expected: kept whole, as `Value` keeps them.
    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        whole(deserializer)
    }
}
