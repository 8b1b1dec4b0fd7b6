//! Tests of the bindings: an object bound in part (the fields an expression reads) is judged as
//! the whole one.

use std::collections::BTreeMap;

use super::*;
use crate::{Expression, Fields, Returns};

#[test]
fn a_pruned_object_judges_as_the_whole_one() {
    let spec = serde_json::json!({
        "template": {"metadata": {"annotations": {"a": "1"}},
                     "spec": {"containers": [{"image": "x:1", "env": [{"name": "A", "value": "1"}]}]}},
        "traffic": [{"percent": 100}]
    });
    let empty = BTreeMap::new();
    let view = sample_view("Service", &spec, &empty);
    for source in [
        "has(object.spec.template.metadata.annotations.a)",
        "has(object.spec.delivery)",
        "object.spec.template.spec.containers.all(c, c.image.endsWith(':1'))",
        "object.spec.traffic[0].percent == 100",
        "!has(object.status)",
        "object.spec.template.metadata.annotations.size() == 1",
    ] {
        let expression = Expression::compile(source, Returns::Bool).unwrap();
        let (reads, _) = expression.fields();
        let whole = Bindings::new(&view, None, &Fields::everything(), &Fields::default());
        let pruned = Bindings::new(&view, None, reads, &Fields::default());
        assert_eq!(
            expression.holds(&pruned),
            expression.holds(&whole),
            "{source}"
        );
        assert_eq!(
            expression.holds(&whole),
            Ok(!source.contains("delivery")),
            "{source}"
        );
    }
}
