//! The rewrite that makes every evaluation pay for its work: at compile time the tree gets calls
//! to the budget's internal functions (see `budget`) around every comprehension's range and
//! loop condition, every value that grows (`+`, `replace`, `join`, `format`), every operand a
//! function scans, compares or copies; `matches` becomes `@ds_matches` (a literal pattern,
//! compiled with the rule) or `@ds_matches_dynamic` (a pattern computed from the object), and
//! `indexOf`, `lastIndexOf`, `replace`, `split` and `join` become the handlers of `strings`. What a literal or a number costs is bounded by the source and left alone.

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::CelInt;

use crate::budget::{
    CHARGE, CHARGE_LIST, CHARGE_TEXT, LIVE, MATCHES, MATCHES_DYNAMIC, RANGE, SIZED,
};
use crate::check::{static_type, Static};
use crate::strings::REWRITTEN;

/// What a regular expression match costs beyond one node, charged before the comprehension
/// iterates (the search itself is charged by its handler, by the text's length).
const MATCHES_COST: u64 = 100;
/// Functions whose result is charged for its size.
const GROWING: &[&str] = &["_+_", "replace", "join", "format"];
/// Functions whose work grows with the strings they are given (a scan, a copy, a count of
/// characters): every operand that is not a literal is charged for its length.
const SCANNING: &[&str] = &[
    "contains",
    "indexOf",
    "lastIndexOf",
    "split",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "charAt",
    "substring",
    "startsWith",
    "endsWith",
    "size",
    "reverse",
    "strings.quote",
    "matches",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "string",
    "bytes",
];

/// The tree rewritten so that every evaluation is charged; the calls it adds take ids above the
/// tree's own.
pub(crate) fn instrumented(root: &IdedExpr) -> IdedExpr {
    let mut next_id = max_id(root) + 1;
    instrument(root.clone(), &mut next_id)
}

fn max_id(node: &IdedExpr) -> u64 {
    let mut highest = node.id;
    visit(node, &mut |child| highest = highest.max(child.id));
    highest
}

fn visit(node: &IdedExpr, each: &mut dyn FnMut(&IdedExpr)) {
    each(node);
    match &node.expr {
        Expr::Select(select) => visit(&select.operand, each),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                visit(target, each);
            }
            for arg in &call.args {
                visit(arg, each);
            }
        }
        Expr::List(list) => list
            .elements
            .iter()
            .for_each(|element| visit(element, each)),
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    visit(&entry.key, each);
                    visit(&entry.value, each);
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
                visit(part, each);
            }
        }
        _ => {}
    }
}

/// What one pass of a comprehension's body costs: its nodes, a regular expression more, a
/// nested comprehension as its range (the nested one charges its own iterations).
fn body_cost(node: &IdedExpr) -> u64 {
    let own = match &node.expr {
        Expr::Call(call) if call.func_name == "matches" => 1 + MATCHES_COST,
        _ => 1,
    };
    let children: u64 = match &node.expr {
        Expr::Select(select) => body_cost(&select.operand),
        Expr::Call(call) => {
            call.target.as_deref().map_or(0, body_cost)
                + call.args.iter().map(body_cost).sum::<u64>()
        }
        Expr::List(list) => list.elements.iter().map(body_cost).sum(),
        Expr::Map(map) => map
            .entries
            .iter()
            .map(|entry| match &entry.expr {
                EntryExpr::MapEntry(entry) => body_cost(&entry.key) + body_cost(&entry.value),
                EntryExpr::StructField(_) => 0,
            })
            .sum(),
        Expr::Comprehension(comprehension) => {
            body_cost(&comprehension.iter_range) + body_cost(&comprehension.accu_init)
        }
        _ => 0,
    };
    own + children
}

fn call(id: &mut u64, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    *id += 1;
    IdedExpr {
        id: *id,
        expr: Expr::Call(CallExpr {
            func_name: name.to_string(),
            target: None,
            args,
        }),
    }
}

/// Rewrites the tree so that every evaluation is charged (see the module docs).
fn instrument(node: IdedExpr, id: &mut u64) -> IdedExpr {
    let IdedExpr { id: own, expr } = node;
    let expr = match expr {
        Expr::Select(mut select) => {
            select.operand = Box::new(instrument(*select.operand, id));
            Expr::Select(select)
        }
        Expr::Call(mut inner) => {
            // `text.matches('literal')` (or `matches(text, 'literal')`): the pattern compiled
            // once (it was checked when the rule compiled). With a pattern computed at
            // evaluation (from the object), `@ds_matches_dynamic`: charged for compiling it,
            // compiled under a small limit, and cached, refusals too.
            if inner.func_name == "matches" {
                let literal =
                    |node: &IdedExpr| matches!(&node.expr, Expr::Literal(LiteralValue::String(_)));
                let operands = match (inner.target.take(), inner.args.len()) {
                    (Some(target), 1) => {
                        let fixed = literal(&inner.args[0]);
                        Some((vec![*target, inner.args.remove(0)], fixed))
                    }
                    (None, 2) => {
                        let fixed = literal(&inner.args[1]);
                        Some((std::mem::take(&mut inner.args), fixed))
                    }
                    (target, _) => {
                        inner.target = target;
                        None
                    }
                };
                if let Some((operands, fixed)) = operands {
                    let mut operands: Vec<IdedExpr> = operands
                        .into_iter()
                        .map(|operand| instrument(operand, id))
                        .collect();
                    // The match scans the text (and the search is charged by the handler).
                    let text = operands.remove(0);
                    operands.insert(0, call(id, CHARGE, vec![text]));
                    return IdedExpr {
                        id: own,
                        expr: Expr::Call(CallExpr {
                            func_name: if fixed { MATCHES } else { MATCHES_DYNAMIC }.to_string(),
                            target: None,
                            args: operands,
                        }),
                    };
                }
            }
            // `text.indexOf(..)`, `lastIndexOf`, `replace`, `split`: done by our handlers, which
            // charge their work before they do it (see `strings`); the receiver becomes the
            // first argument, as with `matches`.
            if let Some((_, internal)) = REWRITTEN.iter().find(|(name, _)| *name == inner.func_name)
            {
                if let Some(target) = inner.target.take() {
                    let args = std::iter::once(*target)
                        .chain(std::mem::take(&mut inner.args))
                        .map(|operand| instrument(operand, id))
                        .collect();
                    return IdedExpr {
                        id: own,
                        expr: Expr::Call(CallExpr {
                            func_name: (*internal).to_string(),
                            target: None,
                            args,
                        }),
                    };
                }
            }
            inner.target = inner.target.map(|target| Box::new(instrument(*target, id)));
            inner.args = inner
                .args
                .into_iter()
                .map(|arg| instrument(arg, id))
                .collect();
            // Work that grows with an operand is charged for the operand's size: a scan of the
            // receiver string, `in` over a list, comparing two lists or maps.
            let name = inner.func_name.as_str();
            // A literal is bounded by the source, and an operand the tree shows to be a number
            // or a bool (`int(...)`, `size(...)`, a comparison) costs one step: neither is
            // charged (each charge is a function call of its own).
            let literal = |node: &IdedExpr| {
                matches!(node.expr, Expr::Literal(_))
                    || matches!(
                        static_type(node, &[]),
                        Some(Static::Int | Static::UInt | Static::Double | Static::Bool)
                    )
            };
            if SCANNING.contains(&name) {
                let text = |node: IdedExpr, id: &mut u64| {
                    if literal(&node) {
                        node
                    } else {
                        call(id, CHARGE_TEXT, vec![node])
                    }
                };
                inner.target = inner.target.map(|target| Box::new(text(*target, id)));
                inner.args = std::mem::take(&mut inner.args)
                    .into_iter()
                    .map(|arg| text(arg, id))
                    .collect();
            } else if name == "_[_]" && inner.args.len() == 2 && !literal(&inner.args[1]) {
                // A key is hashed (a string key for its length); the container is not copied.
                let key = inner.args.remove(1);
                inner.args.push(call(id, CHARGE_TEXT, vec![key]));
            } else if name == "@in" && inner.args.len() == 2 {
                // The needle is hashed or compared; a list container is scanned.
                let container = inner.args.remove(1);
                let needle = inner.args.remove(0);
                let needle = if literal(&needle) {
                    needle
                } else {
                    call(id, CHARGE_TEXT, vec![needle])
                };
                let container = if matches!(container.expr, Expr::List(_)) {
                    container
                } else {
                    call(id, CHARGE_LIST, vec![container])
                };
                inner.args = vec![needle, container];
            } else if matches!(name, "_==_" | "_!=_")
                // Against a literal, a comparison is as short as the literal.
                && !inner
                    .args
                    .iter()
                    .any(|operand| matches!(operand.expr, Expr::Literal(_)))
            {
                inner.args = std::mem::take(&mut inner.args)
                    .into_iter()
                    .map(|operand| call(id, CHARGE, vec![operand]))
                    .collect();
            }
            // `@result + [item]`, the step of `map` and `filter`, is left as it is: the crate
            // builds it in place (the item is charged as a list literal's element).
            let appends = matches!(
                inner.args.first().map(|arg| &arg.expr),
                Some(Expr::Ident(name)) if name.starts_with('@')
            );
            let growing = GROWING.contains(&inner.func_name.as_str()) && !appends;
            let rebuilt = IdedExpr {
                id: own,
                expr: Expr::Call(inner),
            };
            if growing {
                return call(id, SIZED, vec![rebuilt]);
            }
            return rebuilt;
        }
        Expr::List(mut list) => {
            // A list literal holds copies of its elements.
            list.elements = list
                .elements
                .into_iter()
                .map(|element| {
                    let literal = matches!(element.expr, Expr::Literal(_));
                    let element = instrument(element, id);
                    if literal {
                        element
                    } else {
                        call(id, CHARGE, vec![element])
                    }
                })
                .collect();
            Expr::List(list)
        }
        Expr::Map(mut map) => {
            // A map literal holds copies of its keys and values.
            let copied = |node: IdedExpr, id: &mut u64| {
                let literal = matches!(node.expr, Expr::Literal(_));
                let node = instrument(node, id);
                if literal {
                    node
                } else {
                    call(id, CHARGE, vec![node])
                }
            };
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(entry) = &mut entry.expr {
                    entry.key = copied(std::mem::take(&mut entry.key), id);
                    entry.value = copied(std::mem::take(&mut entry.value), id);
                }
            }
            Expr::Map(map)
        }
        Expr::Comprehension(comprehension) => {
            let ComprehensionExpr {
                iter_range,
                iter_var,
                iter_var2,
                accu_var,
                accu_init,
                loop_cond,
                loop_step,
                result,
            } = *comprehension;
            let cost = body_cost(&loop_cond) + body_cost(&loop_step);
            let iter_range = instrument(iter_range, id);
            *id += 1;
            let cost_literal = IdedExpr {
                id: *id,
                expr: Expr::Literal(LiteralValue::Int(CelInt::from(
                    i64::try_from(cost).unwrap_or(i64::MAX),
                ))),
            };
            let iter_range = call(id, RANGE, vec![iter_range, cost_literal]);
            let loop_cond_is_literal = matches!(loop_cond.expr, Expr::Literal(_));
            let loop_cond = instrument(loop_cond, id);
            // A literal condition is left alone: `map` and `filter` are recognised by it and
            // built in place (their steps fail at once when the budget is spent).
            let loop_cond = if loop_cond_is_literal {
                loop_cond
            } else {
                call(id, LIVE, vec![loop_cond])
            };
            Expr::Comprehension(Box::new(ComprehensionExpr {
                iter_range,
                iter_var,
                iter_var2,
                accu_var,
                accu_init: instrument(accu_init, id),
                loop_cond,
                loop_step: instrument(loop_step, id),
                result: instrument(result, id),
            }))
        }
        other => other,
    };
    IdedExpr { id: own, expr }
}
