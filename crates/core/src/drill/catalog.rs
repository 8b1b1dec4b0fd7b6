//! A drill catalog (`drills:` YAML), validated into [`Catalog`]: unknown keys refused, every
//! mistake named by its key path (`drills[2].inject`), never a Secret, exactly one injection per
//! drill, an expectation of a known class or of a rule.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::classify::classes;

/// A catalog that does not load: what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not YAML of the catalog's shape (an unknown key, a wrong type).
    #[error("the drill catalog: {0}")]
    Syntax(String),
    /// A value that is not allowed, at `path`.
    #[error("{path}: {message}")]
    Invalid {
        /// The key path (`drills[0].target.kind`).
        path: String,
        /// Why.
        message: String,
    },
}

impl Error {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Syntax(_) => "syntax",
            Error::Invalid { .. } => "invalid",
        }
    }

    fn invalid(path: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The object a drill acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// The namespace (drills act in labelled namespaces only, so always one).
    pub namespace: String,
    /// The name.
    pub name: String,
}

/// What a drill does to its target.
#[derive(Debug, Clone, PartialEq)]
pub enum Inject {
    /// A JSON merge patch (RFC 7386).
    MergePatch(Value),
    /// A JSON patch (RFC 6902).
    JsonPatch(Vec<Value>),
    /// Delete the target.
    Delete,
    /// Create the target from this object.
    Create(Value),
}

/// What must be seen, and how soon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// The drift class, or `invariant` for a rule.
    pub class: String,
    /// The team invariant's name, for a rule.
    pub rule: Option<String>,
    /// How long the drift may take to fire.
    pub within: Duration,
    /// The severity it must have, if said.
    pub severity: Option<String>,
}

/// What happens after the drift was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Put back what was injected, and wait for the drift to resolve (the default).
    Restore,
    /// Wait (at most this long) for the object to be repaired by someone else (remediation,
    /// Knative, GitOps) and the drift to resolve.
    ExpectRepaired(Duration),
    /// Leave it as injected.
    Keep,
}

/// One drill.
#[derive(Debug, Clone, PartialEq)]
pub struct Drill {
    /// Its name (unique in the catalog).
    pub name: String,
    /// The object.
    pub target: Target,
    /// The injection.
    pub inject: Inject,
    /// The expectation.
    pub expect: Expect,
    /// The end.
    pub then: Then,
    /// Other objects the drill is expected to disturb (in the target's namespace): a deleted
    /// Service's Trigger loses its subscriber. Chaos keeps one drill open on them too, and a
    /// drift on them during the drill is the drill's, not a false alert.
    pub affects: Vec<Target>,
}

/// A validated catalog.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Catalog {
    /// Its drills, in order.
    pub drills: Vec<Drill>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    drills: Vec<DrillFile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DrillFile {
    name: String,
    target: TargetFile,
    inject: InjectFile,
    expect: ExpectFile,
    #[serde(default)]
    then: Option<Value>,
    #[serde(default)]
    affects: Vec<AffectsFile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AffectsFile {
    api_version: String,
    kind: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TargetFile {
    api_version: String,
    kind: String,
    #[serde(default)]
    namespace: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InjectFile {
    #[serde(default)]
    merge_patch: Option<Value>,
    #[serde(default)]
    json_patch: Option<Vec<Value>>,
    #[serde(default)]
    delete: bool,
    #[serde(default)]
    create: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExpectFile {
    #[serde(default)]
    class: Option<String>,
    #[serde(default)]
    rule: Option<String>,
    within: String,
    #[serde(default)]
    severity: Option<String>,
}

/// The catalog in `text` (YAML).
pub fn parse(text: &str) -> Result<Catalog, Error> {
    let file: CatalogFile =
        serde_saphyr::from_str(text).map_err(|error| Error::Syntax(error.to_string()))?;
    let mut names = BTreeSet::new();
    let mut drills = Vec::with_capacity(file.drills.len());
    for (index, drill) in file.drills.into_iter().enumerate() {
        let at = format!("drills[{index}]");
        if drill.name.trim().is_empty() || drill.name.len() > 63 {
            return Err(Error::invalid(
                format!("{at}.name"),
                "must be 1 to 63 characters",
            ));
        }
        if !names.insert(drill.name.clone()) {
            return Err(Error::invalid(
                format!("{at}.name"),
                format!("another drill is named {:?}", drill.name),
            ));
        }
        let target = target(drill.target, &format!("{at}.target"))?;
        let inject = inject(drill.inject, &target, &at)?;
        let expect = expect(drill.expect, &at)?;
        let then = then(drill.then, &at)?;
        let mut affects = Vec::with_capacity(drill.affects.len());
        for (position, other) in drill.affects.into_iter().enumerate() {
            affects.push(self::target(
                TargetFile {
                    api_version: other.api_version,
                    kind: other.kind,
                    namespace: target.namespace.clone(),
                    name: other.name,
                },
                &format!("{at}.affects[{position}]"),
            )?);
        }
        drills.push(Drill {
            name: drill.name,
            target,
            inject,
            expect,
            then,
            affects,
        });
    }
    Ok(Catalog { drills })
}

fn target(file: TargetFile, at: &str) -> Result<Target, Error> {
    for (key, value) in [
        ("apiVersion", &file.api_version),
        ("kind", &file.kind),
        ("name", &file.name),
        ("namespace", &file.namespace),
    ] {
        if value.trim().is_empty() {
            return Err(Error::invalid(
                format!("{at}.{key}"),
                "is required (drills act on namespaced objects, in namespaces labelled \
                 drift-sentinel.dev/drills: \"allowed\")",
            ));
        }
    }
    let version_ok = {
        let (group, version) = file
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", file.api_version.as_str()));
        !version.is_empty()
            && version.bytes().all(|byte| byte.is_ascii_alphanumeric())
            && group
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b".-".contains(&byte))
    };
    if !version_ok {
        return Err(Error::invalid(
            format!("{at}.apiVersion"),
            format!(
                "{:?} is not an apiVersion (group/version, or v1)",
                file.api_version
            ),
        ));
    }
    let kind_ok = file
        .kind
        .bytes()
        .next()
        .is_some_and(|byte| byte.is_ascii_alphabetic())
        && file.kind.bytes().all(|byte| byte.is_ascii_alphanumeric());
    if !kind_ok {
        return Err(Error::invalid(
            format!("{at}.kind"),
            format!("{:?} is not a kind", file.kind),
        ));
    }
    // However the kind is spelt: the core group's `secrets` resource is never drilled.
    let core = !file.api_version.contains('/');
    if core && file.kind.eq_ignore_ascii_case("Secret") {
        return Err(Error::invalid(
            format!("{at}.kind"),
            "Secrets are never drilled",
        ));
    }
    if CLUSTER_SCOPED
        .iter()
        .any(|kind| kind.eq_ignore_ascii_case(&file.kind))
    {
        return Err(Error::invalid(
            format!("{at}.kind"),
            format!(
                "{} is cluster-scoped: drills act on objects in namespaces that allow them",
                file.kind
            ),
        ));
    }
    if !dns_name(&file.name, 253, true) {
        return Err(Error::invalid(
            format!("{at}.name"),
            format!("{:?} is not a Kubernetes object name", file.name),
        ));
    }
    if !dns_name(&file.namespace, 63, false) {
        return Err(Error::invalid(
            format!("{at}.namespace"),
            format!("{:?} is not a namespace name", file.namespace),
        ));
    }
    Ok(Target {
        api_version: file.api_version,
        kind: file.kind,
        namespace: file.namespace,
        name: file.name,
    })
}

/// `metadata` members a drill may not write: the target's identity and what the server sets.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "ownerReferences",
    "selfLink",
];

/// Kinds that live outside namespaces (a drill acts in a namespace that allows drills).
const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "Node",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "StorageClass",
    "PriorityClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "APIService",
    "ClusterDomainClaim",
    "KnativeServing",
    "KnativeEventing",
];

/// A DNS-1123 name: lowercase letters, digits and `-` (and `.` between labels when `dots`),
/// starting and ending with a letter or digit, at most `max` characters.
fn dns_name(name: &str, max: usize, dots: bool) -> bool {
    let allowed = |byte: u8| {
        byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-' || (dots && byte == b'.')
    };
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= max
        && bytes.iter().all(|byte| allowed(*byte))
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && !name.contains("..")
}

fn inject(file: InjectFile, target: &Target, at: &str) -> Result<Inject, Error> {
    let path = format!("{at}.inject");
    let given = usize::from(file.merge_patch.is_some())
        + usize::from(file.json_patch.is_some())
        + usize::from(file.delete)
        + usize::from(file.create.is_some());
    if given != 1 {
        return Err(Error::invalid(
            path,
            "exactly one of mergePatch, jsonPatch, delete: true or create",
        ));
    }
    if let Some(patch) = file.merge_patch {
        if patch.as_object().is_none_or(|members| members.is_empty()) {
            return Err(Error::invalid(
                format!("{path}.mergePatch"),
                "must be a non-empty object",
            ));
        }
        if let Some(metadata) = patch.get("metadata") {
            let Some(members) = metadata.as_object() else {
                return Err(Error::invalid(
                    format!("{path}.mergePatch.metadata"),
                    "must be an object (labels, annotations)",
                ));
            };
            if let Some(key) = members
                .keys()
                .find(|key| SERVER_METADATA.contains(&key.as_str()))
            {
                return Err(Error::invalid(
                    format!("{path}.mergePatch.metadata.{key}"),
                    "cannot rename, move or rewrite the target's identity",
                ));
            }
        }
        if let Some(empty) = empty_object(&patch, String::new()) {
            return Err(Error::invalid(
                format!("{path}.mergePatch{empty}"),
                "an empty object changes nothing (a merge patch leaves what it does not name)",
            ));
        }
        return Ok(Inject::MergePatch(patch));
    }
    if let Some(ops) = file.json_patch {
        if ops.is_empty() {
            return Err(Error::invalid(
                format!("{path}.jsonPatch"),
                "has no operation",
            ));
        }
        if ops
            .iter()
            .all(|op| op.get("op").and_then(Value::as_str) == Some("test"))
        {
            return Err(Error::invalid(
                format!("{path}.jsonPatch"),
                "only test operations: it injects nothing",
            ));
        }
        for (position, op) in ops.iter().enumerate() {
            let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
            let pointer = op.get("path").and_then(Value::as_str).unwrap_or("");
            if matches!(kind, "add" | "replace" | "test") && op.get("value").is_none() {
                return Err(Error::invalid(
                    format!("{path}.jsonPatch[{position}].value"),
                    format!("{kind} needs a value"),
                ));
            }
            let tokens: Vec<&str> = pointer.split('/').skip(1).collect();
            let identity = match tokens.as_slice() {
                ["metadata"] => true,
                ["metadata", key, ..] => SERVER_METADATA.contains(key),
                _ => false,
            };
            if identity {
                return Err(Error::invalid(
                    format!("{path}.jsonPatch[{position}].path"),
                    format!(
                        "{pointer:?} rewrites the target's identity (name, namespace, uid, \
                         versions): patch its labels, annotations or spec"
                    ),
                ));
            }
            if !matches!(kind, "add" | "remove" | "replace" | "test") {
                return Err(Error::invalid(
                    format!("{path}.jsonPatch[{position}].op"),
                    format!(
                        "{kind:?}: use add, remove, replace or test (move and copy cannot be \
                         restored field by field)"
                    ),
                ));
            }
            if !pointer.starts_with('/') {
                return Err(Error::invalid(
                    format!("{path}.jsonPatch[{position}].path"),
                    format!("{pointer:?} must be a JSON pointer into the object"),
                ));
            }
        }
        return Ok(Inject::JsonPatch(ops));
    }
    if file.delete {
        return Ok(Inject::Delete);
    }
    let object = file.create.unwrap_or_default();
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let same = text("/apiVersion") == Some(target.api_version.as_str())
        && text("/kind") == Some(target.kind.as_str())
        && text("/metadata/name") == Some(target.name.as_str())
        && text("/metadata/namespace").is_none_or(|namespace| namespace == target.namespace);
    if !same {
        return Err(Error::invalid(
            format!("{path}.create"),
            "must be the target object (its apiVersion, kind, metadata.name and namespace)",
        ));
    }
    Ok(Inject::Create(object))
}

fn expect(file: ExpectFile, at: &str) -> Result<Expect, Error> {
    let path = format!("{at}.expect");
    let class = match (file.class, file.rule.as_ref()) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(path, "class or rule, not both"));
        }
        (None, None) => return Err(Error::invalid(path, "needs a class or a rule")),
        (None, Some(_)) => classes::INVARIANT.to_string(),
        (Some(class), None) => {
            if !classes::is_known(&class) {
                return Err(Error::invalid(
                    format!("{path}.class"),
                    format!("unknown class {class:?}"),
                ));
            }
            class
        }
    };
    let within = duration(&file.within, &format!("{path}.within"))?;
    if let Some(severity) = &file.severity {
        if !drift_model::SEVERITIES.contains(&severity.as_str()) {
            return Err(Error::invalid(
                format!("{path}.severity"),
                format!(
                    "unknown severity {severity:?}; use one of {}",
                    drift_model::SEVERITIES.join(", ")
                ),
            ));
        }
    }
    Ok(Expect {
        class,
        rule: file.rule,
        within,
        severity: file.severity,
    })
}

fn then(file: Option<Value>, at: &str) -> Result<Then, Error> {
    let wrong = || {
        Error::invalid(
            format!("{at}.then"),
            "use restore (the default), keep or {expectRepaired: {within: 5m}}",
        )
    };
    let Some(file) = file else {
        return Ok(Then::Restore);
    };
    match &file {
        Value::String(word) if word == "restore" => Ok(Then::Restore),
        Value::String(word) if word == "keep" => Ok(Then::Keep),
        Value::Object(members) if members.len() == 1 => {
            let repaired = members.get("expectRepaired").ok_or_else(wrong)?;
            let path = format!("{at}.then.expectRepaired.within");
            match repaired.as_object() {
                Some(inner) if inner.len() == 1 => match inner.get("within") {
                    Some(Value::String(within)) => {
                        Ok(Then::ExpectRepaired(duration(within, &path)?))
                    }
                    _ => Err(Error::invalid(path, "is required: a duration (5m)")),
                },
                _ => Err(Error::invalid(
                    path,
                    "is required, and is the only key: a duration (5m)",
                )),
            }
        }
        _ => Err(wrong()),
    }
}

/// The key path of the first empty object in a merge patch (`.metadata`), if any.
fn empty_object(patch: &Value, at: String) -> Option<String> {
    let members = patch.as_object()?;
    if members.is_empty() {
        return Some(at);
    }
    members
        .iter()
        .find_map(|(key, member)| empty_object(member, format!("{at}.{key}")))
}

fn duration(text: &str, path: &str) -> Result<Duration, Error> {
    let duration = drift_model::time::parse_duration(text)
        .map_err(|error| Error::invalid(path, error.to_string()))?;
    if duration.is_zero() {
        return Err(Error::invalid(path, "must be positive"));
    }
    Ok(duration)
}
