//! A policy evaluated on one request the way the API server evaluates it (`k8s.io/apiserver`
//! `pkg/admission/plugin/policy/validating`): the resource rules (a subresource matches only a
//! rule that names it), the namespace and object selectors (the object or the old one), the
//! match conditions in order, the variables, then the validation with its message. What the
//! tests of `admission export` judge the exported policies with, on admission variables built
//! as the API server builds them.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::Policy;
use crate::classify::invariants::{Bindings, Expression, Returns};

/// One admission request, as the API server gives it to a policy.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// `CREATE`, `UPDATE`, `DELETE`.
    pub operation: String,
    /// The resource's group (`""` for the core group), version and plural.
    pub group: String,
    /// Its version.
    pub version: String,
    /// Its plural.
    pub resource: String,
    /// The object's kind.
    pub kind: String,
    /// The subresource written (`status`, `scale`), empty for the main resource.
    pub sub_resource: String,
    /// The object's name.
    pub name: String,
    /// Its namespace (empty for a cluster-scoped object).
    pub namespace: String,
    /// The namespace's labels (the API server sets `kubernetes.io/metadata.name`).
    pub namespace_labels: BTreeMap<String, String>,
    /// Who writes.
    pub username: String,
    /// Their groups.
    pub groups: Vec<String>,
    /// The object after the change (none on DELETE).
    pub object: Option<Value>,
    /// The stored object (none on CREATE).
    pub old_object: Option<Value>,
}

/// What the policy does with the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Its constraints or a match condition leave the request out.
    NotMatched,
    /// The validation holds.
    Allowed,
    /// The validation fails, with the message the client sees.
    Refused(String),
    /// An expression failed (the exported policies' `failurePolicy: Ignore` lets it through).
    Failed(String),
}

impl Request {
    /// `request` as the policy's expressions see it: the `AdmissionRequest` without the
    /// objects, empty fields absent.
    fn variable(&self) -> Value {
        let mut request = Map::new();
        request.insert(
            "uid".to_string(),
            json!("00000000-0000-0000-0000-000000000000"),
        );
        let group_kind = json!({"group": self.group, "version": self.version, "kind": self.kind});
        let resource =
            json!({"group": self.group, "version": self.version, "resource": self.resource});
        request.insert("kind".to_string(), group_kind.clone());
        request.insert("resource".to_string(), resource.clone());
        request.insert("requestKind".to_string(), group_kind);
        request.insert("requestResource".to_string(), resource);
        if !self.sub_resource.is_empty() {
            request.insert("subResource".to_string(), json!(self.sub_resource));
            request.insert("requestSubResource".to_string(), json!(self.sub_resource));
        }
        if !self.name.is_empty() {
            request.insert("name".to_string(), json!(self.name));
        }
        if !self.namespace.is_empty() {
            request.insert("namespace".to_string(), json!(self.namespace));
        }
        request.insert("operation".to_string(), json!(self.operation));
        let mut user = Map::new();
        user.insert("username".to_string(), json!(self.username));
        if !self.groups.is_empty() {
            user.insert("groups".to_string(), json!(self.groups));
        }
        request.insert("userInfo".to_string(), Value::Object(user));
        request.insert("dryRun".to_string(), json!(false));
        Value::Object(request)
    }
}

fn one_of(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

fn matches_rules(policy: &Policy, request: &Request) -> bool {
    policy.resource_rules.iter().any(|rule| {
        let resource = if request.sub_resource.is_empty() {
            one_of(&rule.resources, &request.resource)
        } else {
            rule.resources.iter().any(|name| {
                name == &format!("{}/{}", request.resource, request.sub_resource)
                    || name == &format!("*/{}", request.sub_resource)
                    || name == &format!("{}/*", request.resource)
                    || name == "*/*"
            })
        };
        // A request without a namespace is for a cluster-scoped object.
        let scope = rule.scope != Some("Namespaced") || !request.namespace.is_empty();
        scope
            && one_of(&rule.operations, &request.operation)
            && one_of(&rule.groups, &request.group)
            && one_of(&rule.versions, &request.version)
            && resource
    })
}

fn labels_match(object: Option<&Value>, wanted: &BTreeMap<String, String>) -> bool {
    let Some(object) = object.filter(|object| !object.is_null()) else {
        return false;
    };
    let labels = object.pointer("/metadata/labels");
    wanted.iter().all(|(key, value)| {
        labels
            .and_then(|labels| labels.get(key))
            .and_then(Value::as_str)
            == Some(value.as_str())
    })
}

/// `policy`'s decision on `request`.
pub fn evaluate(policy: &Policy, request: &Request) -> Decision {
    if !matches_rules(policy, request) {
        return Decision::NotMatched;
    }
    if !request.namespace.is_empty() {
        let name = request
            .namespace_labels
            .get("kubernetes.io/metadata.name")
            .map(String::as_str)
            .unwrap_or_default();
        if (!policy.namespaces.is_empty() && !policy.namespaces.iter().any(|n| n == name))
            || policy.excluded_namespaces.iter().any(|n| n == name)
        {
            return Decision::NotMatched;
        }
    }
    if !policy.object_labels.is_empty()
        && !labels_match(request.object.as_ref(), &policy.object_labels)
        && !labels_match(request.old_object.as_ref(), &policy.object_labels)
    {
        return Decision::NotMatched;
    }
    let null = Value::Null;
    let object = request.object.as_ref().unwrap_or(&null);
    let old_object = request.old_object.as_ref().unwrap_or(&null);
    let request_variable = request.variable();
    let compile = |source: &str, returns| {
        Expression::compile_admission(source, returns).map_err(|error| error.to_string())
    };
    let base: Vec<(&str, &Value)> = vec![
        ("object", object),
        ("oldObject", old_object),
        ("request", &request_variable),
    ];
    for condition in &policy.match_conditions {
        let outcome = compile(&condition.expression, Returns::Bool).and_then(|expression| {
            expression
                .holds(&Bindings::json(&base))
                .map_err(|error| error.to_string())
        });
        match outcome {
            Ok(true) => {}
            Ok(false) => return Decision::NotMatched,
            Err(error) => return Decision::Failed(format!("{}: {error}", condition.name)),
        }
    }
    let mut variables = Map::new();
    for variable in &policy.variables {
        let bound = Value::Object(variables.clone());
        let mut with = base.clone();
        with.push(("variables", &bound));
        let value = compile(&variable.expression, Returns::Any).and_then(|expression| {
            expression
                .json(&Bindings::json(&with))
                .map_err(|error| error.to_string())
        });
        match value {
            Ok(value) => {
                variables.insert(variable.name.clone(), value);
            }
            Err(error) => return Decision::Failed(format!("{}: {error}", variable.name)),
        }
    }
    let variables = Value::Object(variables);
    let mut with = base;
    with.push(("variables", &variables));
    let bindings = Bindings::json(&with);
    let verdict = compile(&policy.expression, Returns::Bool).and_then(|expression| {
        expression
            .holds(&bindings)
            .map_err(|error| error.to_string())
    });
    match verdict {
        Ok(true) => Decision::Allowed,
        Ok(false) => {
            let computed = policy.message_expression.as_deref().and_then(|source| {
                compile(source, Returns::String)
                    .ok()?
                    .text(&bindings)
                    .ok()
                    .filter(|text| !text.is_empty() && !text.contains('\n'))
            });
            Decision::Refused(
                computed
                    .or_else(|| policy.message.clone())
                    .unwrap_or_else(|| format!("failed expression: {}", policy.expression)),
            )
        }
        Err(error) => Decision::Failed(error),
    }
}
