//! What an expression reads of `object` and of `oldObject`, found in its tree at compile time,
//! so that an evaluation binds only those parts of the object (see [`Fields`]).

use std::collections::BTreeMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// The parts of an object an expression reads, as a tree of field names: a node marked `whole`
/// reads everything below it. Only these parts are bound for an evaluation (a Service's whole
/// spec is not converted for a rule that reads one annotation); an expression that reads
/// `object` other than through field selections reads it whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    whole: bool,
    children: BTreeMap<String, Fields>,
}

static WHOLE: Fields = Fields {
    whole: true,
    children: BTreeMap::new(),
};

impl Fields {
    /// Every field.
    pub(crate) fn everything() -> Fields {
        WHOLE.clone()
    }

    /// True when nothing is read.
    pub fn is_empty(&self) -> bool {
        !self.whole && self.children.is_empty()
    }

    fn add(&mut self, path: &[&str]) {
        if self.whole {
            return;
        }
        match path.split_first() {
            None => {
                self.whole = true;
                self.children.clear();
            }
            Some((first, rest)) => self
                .children
                .entry(first.to_string())
                .or_default()
                .add(rest),
        }
    }

    /// Adds what `other` reads.
    pub fn merge(&mut self, other: &Fields) {
        if self.whole {
            return;
        }
        if other.whole {
            *self = Fields::everything();
            return;
        }
        for (key, fields) in &other.children {
            self.children.entry(key.clone()).or_default().merge(fields);
        }
    }

    /// True when the field `key` (or all of them) is read.
    pub fn reads(&self, key: &str) -> bool {
        self.child(key).is_some()
    }

    /// What is read below the field `key`, if it is read at all.
    pub fn child(&self, key: &str) -> Option<&Fields> {
        if self.whole {
            Some(&WHOLE)
        } else {
            self.children.get(key)
        }
    }

    /// True when everything below this node is read.
    pub fn is_whole(&self) -> bool {
        self.whole
    }

    /// The names of the fields read below this node (none when it is read whole).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.children.keys().map(String::as_str)
    }

    /// The fields read below this node, by name (none when it is read whole).
    pub(crate) fn children(&self) -> impl Iterator<Item = (&str, &Fields)> {
        self.children
            .iter()
            .map(|(key, fields)| (key.as_str(), fields))
    }
}

/// Adds to `object` and `old` the fields each is read through: every field selection chain
/// that starts at the variable (`object.spec.template.metadata.annotations`) reads the subtree
/// at its end; the variable used any other way reads it whole.
pub(crate) fn read_fields(node: &IdedExpr, object: &mut Fields, old: &mut Fields) {
    let mut path = Vec::new();
    let mut at = node;
    while let Expr::Select(select) = &at.expr {
        path.push(select.field.as_str());
        at = &select.operand;
    }
    if let Expr::Ident(name) = &at.expr {
        path.reverse();
        match name.as_str() {
            "object" => object.add(&path),
            "oldObject" => old.add(&path),
            _ => {}
        }
        return;
    }
    match &node.expr {
        Expr::Select(select) => read_fields(&select.operand, object, old),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                read_fields(target, object, old);
            }
            for arg in &call.args {
                read_fields(arg, object, old);
            }
        }
        Expr::List(list) => {
            for element in &list.elements {
                read_fields(element, object, old);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    read_fields(&entry.key, object, old);
                    read_fields(&entry.value, object, old);
                }
            }
        }
        Expr::Comprehension(comprehension) => {
            for part in [
                &comprehension.iter_range,
                &comprehension.accu_init,
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ] {
                read_fields(part, object, old);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
