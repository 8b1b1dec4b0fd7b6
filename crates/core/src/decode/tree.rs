//! A JSON tree whose strings borrow from the text it was read from: the fast path's kept
//! `status`, checked and written to its kept text on the HTTP worker without a `Value` built
//! and freed for it (a `String` per key and string, B-tree nodes per object: about a fifth of a
//! Revision's decode; BENCHMARKS.md, issue 28).
//!
//! It reads, checks and writes as a `Value` does: an object keeps the last of a repeated key
//! and writes its members in key order, numbers are serde_json's, and the shape checks read
//! either through [`Tree`]. Tests hold the two to the same kept texts and the same errors.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Number, Value};

use super::kept::{self, Serialized, CONDITION_TIMES};
use super::raw::Key;

/// A JSON value whose strings borrow from the text unless they hold an escape.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    /// Members in key order, each key once (the last of a repeated one), as a `Map` keeps them.
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

impl<'a> Node<'a> {
    /// An object of `members` in document order: sorted by key, the last of a repeated key
    /// kept (JSON's usual last-wins, as `serde_json::Map` keeps it).
    pub(crate) fn object(mut members: Vec<(Cow<'a, str>, Node<'a>)>) -> Node<'a> {
        if members.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
            // Stable: of equal keys the later stays later, and replaces the one before it.
            members.sort_by(|left, right| left.0.cmp(&right.0));
            let mut unique: Vec<(Cow<'a, str>, Node<'a>)> = Vec::with_capacity(members.len());
            for member in members {
                match unique.last_mut() {
                    Some(last) if last.0 == member.0 => *last = member,
                    _ => unique.push(member),
                }
            }
            members = unique;
        }
        Node::Object(members)
    }
}

impl<'de> Deserialize<'de> for Node<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

/// With serde_json's `raw_value` feature (on in this workspace), `Value` reads an object whose
/// first key is this as the JSON text in its string value, not as an object (and refuses one
/// with more members). A `Node` would read it as an object: such an object fails here, so the
/// fast path gives the whole object to the general path, which reads it as before.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, flag: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(flag))
    }

    fn visit_i64<E>(self, number: i64) -> Result<Node<'de>, E> {
        Ok(Node::Number(number.into()))
    }

    fn visit_u64<E>(self, number: u64) -> Result<Node<'de>, E> {
        Ok(Node::Number(number.into()))
    }

    fn visit_f64<E>(self, number: f64) -> Result<Node<'de>, E> {
        // As `Value` reads it: JSON has no NaN or infinity, so this is never `Null`.
        Ok(Number::from_f64(number).map_or(Node::Null, Node::Number))
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(text.to_string())))
    }

    fn visit_string<E>(self, text: String) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(text)))
    }

    fn visit_none<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node<'de>, D::Error> {
        Node::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Node<'de>, A::Error> {
        let mut items = Vec::with_capacity(access.size_hint().unwrap_or(0));
        while let Some(item) = access.next_element()? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Node<'de>, A::Error> {
        let mut members = Vec::with_capacity(access.size_hint().unwrap_or(0));
        while let Some(Key(key)) = access.next_key::<Key<'de>>()? {
            if members.is_empty() && key == RAW_VALUE_TOKEN {
                return Err(serde::de::Error::custom(
                    "an object that serde_json reads as raw JSON: left to `Value`",
                ));
            }
            members.push((key, access.next_value()?));
        }
        Ok(Node::object(members))
    }
}

/// Written as `Value` writes the same value (its members in key order).
impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Null => serializer.serialize_unit(),
            Node::Bool(flag) => serializer.serialize_bool(*flag),
            Node::Number(number) => number.serialize(serializer),
            Node::String(text) => serializer.serialize_str(text),
            Node::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (key, value) in members {
                    map.serialize_entry(key.as_ref(), value)?;
                }
                map.end()
            }
        }
    }
}

/// The compact JSON text, as `Value`'s `Display` writes it (what an error quotes).
impl fmt::Display for Node<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        formatter.write_str(&text)
    }
}

/// What the shape checks read of a JSON tree: a `Value` (the general path's) or a [`Node`] (the
/// fast path's status).
pub(crate) trait Tree: fmt::Display + Sized {
    /// "a string", "an object", ... as [`super::object::type_name`] says it.
    fn type_name(&self) -> &'static str;
    fn is_null(&self) -> bool;
    fn is_bool(&self) -> bool;
    fn is_object(&self) -> bool;
    /// The member `key` of an object (`None` for another type).
    fn member(&self, key: &str) -> Option<&Self>;
    /// An array's items (`None` for another type).
    fn items(&self) -> Option<&[Self]>;
    fn text(&self) -> Option<&str>;
    fn number(&self) -> Option<&Number>;
    /// Calls `each` with every member of an object, in key order; false for another type.
    fn for_each_member<'s>(&'s self, each: &mut dyn FnMut(&'s str, &'s Self)) -> bool;
    /// The bytes of the keys and strings, plus 8 for every other value, counted until `limit`
    /// is passed (then some number above it): what a value costs, without serializing it.
    fn json_bytes(&self, limit: usize) -> usize {
        let mut total = 0usize;
        let mut stack = vec![self];
        while let Some(value) = stack.pop() {
            if let Some(text) = value.text() {
                total += text.len();
            } else if let Some(items) = value.items() {
                total += 8;
                stack.extend(items);
            } else {
                total += 8;
                value.for_each_member(&mut |key, item| {
                    total += key.len();
                    stack.push(item);
                });
            }
            if total > limit {
                break;
            }
        }
        total
    }
    /// The kept members of a status (this), as the state keeps them (`null` when none).
    fn kept_status(&self) -> Serialized;
}

impl Tree for Value {
    fn type_name(&self) -> &'static str {
        super::object::type_name(self)
    }

    fn is_null(&self) -> bool {
        self.is_null()
    }

    fn is_bool(&self) -> bool {
        self.is_boolean()
    }

    fn is_object(&self) -> bool {
        self.is_object()
    }

    fn member(&self, key: &str) -> Option<&Value> {
        self.as_object()?.get(key)
    }

    fn items(&self) -> Option<&[Value]> {
        self.as_array().map(Vec::as_slice)
    }

    fn text(&self) -> Option<&str> {
        self.as_str()
    }

    fn number(&self) -> Option<&Number> {
        self.as_number()
    }

    fn for_each_member<'s>(&'s self, each: &mut dyn FnMut(&'s str, &'s Value)) -> bool {
        let Some(map) = self.as_object() else {
            return false;
        };
        for (key, item) in map {
            each(key, item);
        }
        true
    }

    fn kept_status(&self) -> Serialized {
        match self {
            Value::Object(map) => {
                kept::kept_status(map).map_or_else(Serialized::default, Serialized::from_raw)
            }
            _ => Serialized::default(),
        }
    }
}

impl Tree for Node<'_> {
    fn type_name(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Number(_) => "a number",
            Node::String(_) => "a string",
            Node::Array(_) => "an array",
            Node::Object(_) => "an object",
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Node::Null)
    }

    fn is_bool(&self) -> bool {
        matches!(self, Node::Bool(_))
    }

    fn is_object(&self) -> bool {
        matches!(self, Node::Object(_))
    }

    fn member(&self, key: &str) -> Option<&Self> {
        match self {
            Node::Object(members) => members
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value),
            _ => None,
        }
    }

    fn items(&self) -> Option<&[Self]> {
        match self {
            Node::Array(items) => Some(items),
            _ => None,
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            Node::String(text) => Some(text),
            _ => None,
        }
    }

    fn number(&self) -> Option<&Number> {
        match self {
            Node::Number(number) => Some(number),
            _ => None,
        }
    }

    fn for_each_member<'s>(&'s self, each: &mut dyn FnMut(&'s str, &'s Self)) -> bool {
        let Node::Object(members) = self else {
            return false;
        };
        for (key, item) in members {
            each(key, item);
        }
        true
    }

    fn kept_status(&self) -> Serialized {
        let Node::Object(members) = self else {
            return Serialized::default();
        };
        if !members.iter().any(|(key, _)| kept::is_kept(key)) {
            return Serialized::default();
        }
        // Serializing a tree of strings, numbers and string-keyed objects cannot fail.
        serde_json::value::to_raw_value(&Kept(members))
            .map_or_else(|_| Serialized::default(), Serialized::from_raw)
    }
}

/// The kept members of a status, in key order, as `kept::kept_status` writes a `Map`'s.
struct Kept<'n, 'a>(&'n [(Cow<'a, str>, Node<'a>)]);

impl Serialize for Kept<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.0.iter().filter(|(key, _)| kept::is_kept(key)) {
            match value {
                Node::Array(items) if key == "conditions" => {
                    map.serialize_entry(key.as_ref(), &Conditions(items))?
                }
                _ => map.serialize_entry(key.as_ref(), value)?,
            }
        }
        map.end()
    }
}

/// `status.conditions` without the write times of each condition.
struct Conditions<'n, 'a>(&'n [Node<'a>]);

impl Serialize for Conditions<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            match item {
                Node::Object(members) => seq.serialize_element(&Condition(members))?,
                other => seq.serialize_element(other)?,
            }
        }
        seq.end()
    }
}

struct Condition<'n, 'a>(&'n [(Cow<'a, str>, Node<'a>)]);

impl Serialize for Condition<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.0 {
            if !CONDITION_TIMES.contains(&key.as_ref()) {
                map.serialize_entry(key.as_ref(), value)?;
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests;
