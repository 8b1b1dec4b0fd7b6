//! The words and commands a fleet divergence is reported with: a one-sentence [`summary`], a
//! runnable [`hint`] (`kubectl` commands that align the members, quoted so a pasted hint runs
//! nothing else), and the [`values_fact`] that carries every member's value.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::compare::{value_text, Divergence};
use super::{FleetObject, VERSION_LABEL, WHOLE_OBJECT};
use drift_model::text::shell_quote;

/// One sentence about an object's divergences: which paths, which clusters hold which value.
/// `scope` names what was compared: `fleet group prod`, or `the snapshots` for `compare`.
pub fn summary(object: &FleetObject, scope: &str, divergences: &[Divergence]) -> String {
    let what = object.key();
    let Some(first) = divergences.first() else {
        return format!("{what} is alike across {scope}");
    };
    if first.path == WHOLE_OBJECT {
        let mut text = format!(
            "{what} is missing from {} in {scope}",
            first.missing().join(", ")
        );
        if divergences.len() > 1 {
            text.push_str(&format!(
                ", and differs where present: {}",
                paths_text(&divergences[1..])
            ));
        }
        return text;
    }
    format!("{what} differs across {scope}: {}", paths_text(divergences))
}

/// `/data/a is "1" in x; "2" in y` for the first few paths, then how many more.
fn paths_text(divergences: &[Divergence]) -> String {
    const SHOWN: usize = 3;
    let mut parts: Vec<String> = divergences
        .iter()
        .take(SHOWN)
        .map(|divergence| format!("{} is {}", divergence.path, divergence.describe()))
        .collect();
    if divergences.len() > SHOWN {
        parts.push(format!("{} more path(s)", divergences.len() - SHOWN));
    }
    parts.join(", ")
}

/// How the hint's commands name the object: `kubectl --context X{namespace} VERB {resource}
/// {name}`.
struct Target<'a> {
    object: &'a FleetObject,
    resource: String,
    namespace: String,
}

impl<'a> Target<'a> {
    fn of(object: &'a FleetObject) -> Target<'a> {
        Target {
            object,
            resource: format!(
                "{}{}",
                object.kind.to_lowercase(),
                match object.group() {
                    "" => String::new(),
                    group => format!(".{group}"),
                }
            ),
            namespace: if object.namespace.is_empty() {
                String::new()
            } else {
                format!(" -n {}", shell_quote(&object.namespace))
            },
        }
    }

    /// `kubectl --context {cluster}{namespace} {verb} {resource} {name}`.
    fn kubectl(&self, cluster: &str, verb: &str) -> String {
        // Cluster and object names come from events: quoted, so a pasted hint runs nothing else.
        format!(
            "kubectl --context {}{} {verb} {} {}",
            shell_quote(cluster),
            self.namespace,
            self.resource,
            shell_quote(&self.object.name)
        )
    }

    /// A runnable copy of the object from `source` into `cluster`, without what the API server
    /// set in `source` (its uid, version, timestamps, managers, owners, status), which `apply`
    /// would refuse or carry over wrongly.
    fn copy(&self, source: &str, cluster: &str) -> String {
        // A core Service's addresses and node ports are allocated per cluster: `apply` would
        // refuse another cluster's.
        let allocated = if self.object.kind == "Service" && self.object.group().is_empty() {
            ",.spec.clusterIP,.spec.clusterIPs,.spec.healthCheckNodePort,.spec.ports[]?.nodePort"
        } else {
            ""
        };
        format!(
            "{} -o json | jq 'del(.metadata.uid,.metadata.resourceVersion,.metadata.creationTimestamp,.metadata.generation,.metadata.managedFields,.metadata.ownerReferences,.status{allocated})' | kubectl --context {} apply -f -",
            self.kubectl(source, "get"),
            shell_quote(cluster)
        )
    }

    /// True for a component of Knative itself (its install namespaces), whose version label
    /// names the Knative release; elsewhere `app.kubernetes.io/version` is the app's own.
    fn is_knative_component(&self) -> bool {
        self.object.namespace.starts_with("knative-")
    }

    /// True when the values at a `data` path are hashes, never values (a Secret's data, a
    /// ConfigMap's `binaryData`): a patch carrying one would write the hash as the value.
    fn hashed(&self, values: &[Option<&Value>]) -> bool {
        self.object.kind == "Secret"
            || values.iter().flatten().any(|value| {
                value.as_str().is_some_and(|text| {
                    text.strip_prefix("sha256:").is_some_and(|hex| {
                        hex.len() == 12 && hex.bytes().all(|byte| byte.is_ascii_hexdigit())
                    })
                })
            })
    }

    /// A runnable copy of one hashed `data` key from `source` into `cluster`: the value is read
    /// from `source` itself, since the service keeps only its hash.
    fn copy_key(&self, key: &str, source: &str, cluster: &str) -> String {
        // A ConfigMap's hashed values are its `binaryData`; a Secret's are its `data`.
        let field = if self.object.kind == "Secret" {
            "data"
        } else {
            "binaryData"
        };
        let key_json = Value::String(key.to_string()).to_string();
        let filter = format!("{{{field}: {{{key_json}: .{field}[{key_json}]}}}}");
        format!(
            "copy key {key} from cluster {source}: {} --type merge -p \"$({} -o json | jq -c '{}')\"",
            self.kubectl(cluster, "patch"),
            self.kubectl(source, "get"),
            filter.replace('\'', "'\\''")
        )
    }
}

/// One step of a hint: a line of its own, a key of a per-cluster merge patch, or a spec path
/// to align by hand.
enum Fix<'a> {
    Line(String),
    Patch {
        cluster: &'a str,
        sections: Vec<String>,
        key: String,
        value: Option<Value>,
    },
    Edit {
        cluster: &'a str,
        path: &'a str,
    },
}

/// The steps that bring every member of one divergence to `toward` (`None`: absent).
fn fixes_toward<'a>(
    target: &Target<'_>,
    divergence: &'a Divergence,
    toward: Option<&Value>,
) -> Vec<Fix<'a>> {
    let segments = drift_model::pointer::pointer_segments(&divergence.path);
    let source = divergence
        .values
        .iter()
        .find(|(_, value)| value.as_ref() == toward)
        .map(|(cluster, _)| cluster.as_str());
    let values: Vec<Option<&Value>> = divergence.values.iter().map(|(_, v)| v.as_ref()).collect();
    let mut fixes = Vec::new();
    for (cluster, value) in &divergence.values {
        if value.as_ref() == toward {
            continue;
        }
        let fix = match segments.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            // A release is upgraded as a whole; a patched label would only hide the skew.
            ["metadata", "labels", label] if *label == VERSION_LABEL => Fix::Line(match toward {
                Some(Value::String(version)) if target.is_knative_component() => {
                    format!("upgrade Knative in {cluster} to {version}")
                }
                Some(Value::String(version)) => {
                    format!("deploy version {version} of it in {cluster}")
                }
                _ => format!(
                    "check the Knative release of {cluster}: it is labelled {} where {} carries no {VERSION_LABEL} label",
                    value_text(value.as_ref()),
                    source.unwrap_or("the others")
                ),
            }),
            ["data", key] if toward.is_some() && target.hashed(&values) => match source {
                Some(source) => Fix::Line(target.copy_key(key, source, cluster)),
                None => continue,
            },
            ["data", key] => Fix::Patch {
                cluster,
                sections: vec!["data".to_string()],
                key: key.to_string(),
                value: toward.cloned(),
            },
            ["metadata", section, key] => Fix::Patch {
                cluster,
                sections: vec!["metadata".to_string(), section.to_string()],
                key: key.to_string(),
                value: toward.cloned(),
            },
            _ => Fix::Edit {
                cluster,
                path: &divergence.path,
            },
        };
        fixes.push(fix);
    }
    fixes
}

/// The fixes as command lines: single lines first, then one merge patch per cluster, then one
/// edit per cluster naming its spec paths.
fn render_fixes(target: &Target<'_>, fixes: Vec<Fix<'_>>) -> Vec<String> {
    let mut lines = Vec::new();
    let mut patches: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    let mut edits: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for fix in fixes {
        match fix {
            Fix::Line(line) => lines.push(line),
            Fix::Patch {
                cluster,
                sections,
                key,
                value,
            } => insert_patch(
                patches.entry(cluster).or_default(),
                &sections.iter().map(String::as_str).collect::<Vec<_>>(),
                &key,
                &value,
            ),
            Fix::Edit { cluster, path } => edits.entry(cluster).or_default().push(path),
        }
    }
    for (cluster, patch) in patches {
        lines.push(format!(
            "{} --type merge -p '{}'",
            target.kubectl(cluster, "patch"),
            Value::Object(patch).to_string().replace('\'', "'\\''")
        ));
    }
    for (cluster, paths) in edits {
        lines.push(format!(
            "{}  # align {}",
            target.kubectl(cluster, "edit"),
            paths.join(", ")
        ));
    }
    lines
}

/// The hint for an object some members lack: add it where it is missing (from Git, or a copy
/// from a member that holds it); when no more members hold it than lack it, deleting it from
/// the holders is named as the other way.
fn missing_hint(target: &Target<'_>, whole: &Divergence, lines: &mut Vec<String>) {
    let missing = whole.missing();
    let holding: Vec<&str> = whole
        .values
        .iter()
        .filter(|(_, value)| value.is_some())
        .map(|(cluster, _)| cluster.as_str())
        .collect();
    let Some(source) = holding.first() else {
        return;
    };
    let both_ways = holding.len() <= missing.len();
    if both_ways {
        lines.push(format!(
            "{} is in {} but not in {}: add it to {} or delete it from {}",
            target.object.key(),
            holding.join(", "),
            missing.join(", "),
            missing.join(", "),
            holding.join(", ")
        ));
    }
    for cluster in &missing {
        lines.push(format!(
            "add it to {cluster} from Git, or copy it from {source}: {}",
            target.copy(source, cluster)
        ));
    }
    if both_ways {
        for cluster in &holding {
            lines.push(format!(
                "or delete it from {cluster}: {}",
                target.kubectl(cluster, "delete")
            ));
        }
    }
}

/// A runnable fix, each command naming a cluster by `kubectl --context <cluster>` (cluster
/// names are taken to be kubectl context names). Per path, the members that do not hold the
/// value most members hold are aligned to it: a merge patch of the differing `data` keys,
/// labels and annotations; an upgrade of Knative for a version skew; a copy of the key from a
/// member that holds it for a hashed value (a Secret's data, a ConfigMap's `binaryData`: the
/// service keeps only hashes, which a patch would write as values); an edit for spec fields.
/// A path without a majority (a tie) gets no single direction: every way is named. A missing
/// object: see [`missing_hint`].
pub fn hint(object: &FleetObject, divergences: &[Divergence]) -> Option<String> {
    let target = Target::of(object);
    let mut lines = Vec::new();
    let mut fixes = Vec::new();
    for divergence in divergences {
        if divergence.path == WHOLE_OBJECT {
            missing_hint(&target, divergence, &mut lines);
            continue;
        }
        match divergence.consensus() {
            Some(toward) => fixes.extend(fixes_toward(&target, divergence, toward)),
            None => {
                lines.push(format!(
                    "no majority for {} ({}): align either way",
                    divergence.path,
                    divergence.describe()
                ));
                for (index, (value, _)) in divergence.holders().into_iter().enumerate() {
                    for (line_index, line) in
                        render_fixes(&target, fixes_toward(&target, divergence, value))
                            .into_iter()
                            .enumerate()
                    {
                        lines.push(if index > 0 && line_index == 0 {
                            format!("or {line}")
                        } else {
                            line
                        });
                    }
                }
            }
        }
    }
    lines.extend(render_fixes(&target, fixes));
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// Sets `key` under the nested `sections` of a merge patch (`null` removes it).
fn insert_patch(
    patch: &mut Map<String, Value>,
    sections: &[&str],
    key: &str,
    value: &Option<Value>,
) {
    let mut map = patch;
    for section in sections {
        let entry = map
            .entry(section.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(inner) = entry else {
            return;
        };
        map = inner;
    }
    map.insert(key.to_string(), value.clone().unwrap_or(Value::Null));
}

/// Longest string value the `values` fact carries (in characters); a longer one is cut and
/// ends in `…`, as [`value_text`] shows values elsewhere: a drift's facts travel in every
/// alert and API answer.
pub(super) const MAX_FACT_VALUE: usize = 200;

/// The divergences as a JSON fact: `[{"path", "values": {cluster: value or null}}]`, what the
/// API, the dashboard and the messages read to show which cluster holds which value. Long
/// string values are cut to [`MAX_FACT_VALUE`] characters.
pub(crate) fn values_fact(divergences: &[Divergence]) -> String {
    let bounded = |value: &Option<Value>| match value {
        Some(Value::String(text)) if text.chars().count() > MAX_FACT_VALUE => {
            let mut short: String = text.chars().take(MAX_FACT_VALUE).collect();
            short.push('…');
            Value::String(short)
        }
        Some(value) => value.clone(),
        None => Value::Null,
    };
    Value::Array(
        divergences
            .iter()
            .map(|divergence| {
                let values: Map<String, Value> = divergence
                    .values
                    .iter()
                    .map(|(cluster, value)| (cluster.clone(), bounded(value)))
                    .collect();
                serde_json::json!({"path": divergence.path, "values": values})
            })
            .collect(),
    )
    .to_string()
}
