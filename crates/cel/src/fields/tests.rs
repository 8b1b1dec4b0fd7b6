//! Tests of the field-read analysis: which subtrees of `object` and `oldObject` an expression
//! reads.

use super::*;
use crate::{Expression, Returns};

fn fields(source: &str) -> (Fields, Fields) {
    let expression = Expression::compile(source, Returns::Bool).unwrap();
    let (object, old) = expression.fields();
    (object.clone(), old.clone())
}

#[test]
fn an_expression_reads_the_subtrees_its_selections_reach() {
    let (object, old) = fields(
        "has(object.spec.delivery) && object.spec.template.spec.containers.all(c, c.image != '') \
         && object.metadata.annotations['a/b'] == 'x' && oldObject == null",
    );
    let mut expected = Fields::default();
    expected.add(&["spec", "delivery"]);
    expected.add(&["spec", "template", "spec", "containers"]);
    expected.add(&["metadata", "annotations"]);
    assert_eq!(object, expected);
    assert_eq!(old, Fields::everything());
    // `object` used whole reads everything.
    let (object, _) = fields("size(object) > 0");
    assert_eq!(object, Fields::everything());
}
