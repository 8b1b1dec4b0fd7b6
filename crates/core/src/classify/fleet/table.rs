//! The cluster-by-cluster table of one compared object in the fleet view: a row per path, a
//! cell per member, every differing path marked and the cells that differ from the majority
//! highlighted.

use std::collections::BTreeMap;

use serde_json::Value;

use super::compare::{differing_paths, leaves, same_leaf, Held};
use super::{PRESENT, WHOLE_OBJECT};

/// Most rows of one object in the fleet view (the leaves of a large spec are many).
pub(crate) const MAX_ROWS: usize = 200;

/// One member's cell in a row of the fleet view.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Its value (`None`: absent, or not reported).
    pub value: Option<Value>,
    /// False when the member never reported the object (shown `not reported`, never
    /// highlighted).
    pub reported: bool,
    /// True when the cell differs from what most members hold (every compared cell of a row
    /// without a majority).
    pub highlighted: bool,
}

/// One row of an object's cluster-by-cluster table: a path, each member's cell there, and
/// whether the members that report the object differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// JSON pointer ([`WHOLE_OBJECT`] for the row that says which members hold the object).
    pub path: String,
    /// Each member's cell, in member order.
    pub values: Vec<Cell>,
    /// True when the members do not all hold the same value.
    pub differs: bool,
}

/// The cells of a row whose compared members are `compared` (indexes into `values`):
/// highlighted where they differ from the consensus, all of them without one.
fn highlight(path: &str, values: &[Option<&Value>], compared: &[usize]) -> Vec<bool> {
    let mut groups: Vec<(Option<&Value>, usize)> = Vec::new();
    for &index in compared {
        let value = values[index];
        match groups
            .iter_mut()
            .find(|(held, _)| same_leaf(path, *held, value))
        {
            Some((_, count)) => *count += 1,
            None => groups.push((value, 1)),
        }
    }
    let most = groups.iter().map(|(_, count)| *count).max().unwrap_or(0);
    let mut leaders = groups.iter().filter(|(_, count)| *count == most);
    let consensus = match (leaders.next(), leaders.next()) {
        (Some((value, _)), None) => Some(*value),
        _ => None,
    };
    let mut out = vec![false; values.len()];
    for &index in compared {
        out[index] = match consensus {
            Some(consensus) => !same_leaf(path, values[index], consensus),
            None => true,
        };
    }
    out
}

/// The cluster-by-cluster table of one object: every compared path any member holds (up to
/// [`MAX_ROWS`], differing rows first so none is cut), with the [`WHOLE_OBJECT`] row first
/// when a member is known to lack the object. Every differing path is marked, however many
/// (the alert's [`MAX_DIVERGENCES`](super::MAX_DIVERGENCES) does not cap the table). A member
/// that lacks the object shows absent on every row; one that never reported it shows `not
/// reported` and takes no part in the comparison.
pub fn rows(members: &[(String, Held)], ignore_paths: &[String]) -> Vec<Row> {
    // Per member: None (not reported), Some(None) (missing), Some(Some(leaves)).
    let flat: Vec<Option<Option<BTreeMap<String, Value>>>> = members
        .iter()
        .map(|(_, held)| match held {
            Held::Copy(view) => Some(Some(leaves(view, ignore_paths))),
            Held::Missing => Some(None),
            Held::NotReported => None,
        })
        .collect();
    let reported: Vec<usize> = (0..flat.len()).filter(|&i| flat[i].is_some()).collect();
    let holding: Vec<usize> = (0..flat.len())
        .filter(|&i| matches!(flat[i], Some(Some(_))))
        .collect();
    let mut rows = Vec::new();
    let present = Value::String(PRESENT.to_string());
    if reported.len() >= 2 && !holding.is_empty() && holding.len() < reported.len() {
        let values: Vec<Option<&Value>> = flat
            .iter()
            .map(|cell| matches!(cell, Some(Some(_))).then_some(&present))
            .collect();
        let highlighted = highlight(WHOLE_OBJECT, &values, &reported);
        rows.push(Row {
            path: WHOLE_OBJECT.to_string(),
            values: (0..flat.len())
                .map(|i| Cell {
                    value: values[i].cloned(),
                    reported: flat[i].is_some(),
                    highlighted: highlighted[i],
                })
                .collect(),
            differs: true,
        });
    }
    let maps: Vec<&BTreeMap<String, Value>> = flat.iter().flatten().flatten().collect();
    let differing = differing_paths(&maps);
    let mut alike: Vec<&String> = maps.iter().flat_map(|leaves| leaves.keys()).collect();
    alike.sort();
    alike.dedup();
    alike.retain(|path| differing.binary_search(path).is_err());
    let marked = differing.iter().map(|path| (*path, true));
    let unmarked = alike.into_iter().map(|path| (path, false));
    for (path, differs) in marked.chain(unmarked) {
        if rows.len() >= MAX_ROWS {
            break;
        }
        let values: Vec<Option<&Value>> = flat
            .iter()
            .map(|cell| match cell {
                Some(Some(leaves)) => leaves.get(path),
                _ => None,
            })
            .collect();
        // Only the members holding a copy are compared at a path; a missing copy is shown on
        // the whole-object row.
        let highlighted = if differs {
            highlight(path, &values, &holding)
        } else {
            vec![false; values.len()]
        };
        rows.push(Row {
            path: path.clone(),
            values: (0..flat.len())
                .map(|i| Cell {
                    value: values[i].cloned(),
                    reported: flat[i].is_some(),
                    highlighted: highlighted[i],
                })
                .collect(),
            differs,
        });
    }
    rows
}
