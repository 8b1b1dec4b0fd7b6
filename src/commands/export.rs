//! `export --last-good`: a restorable manifest of every tracked object, from the store, one
//! YAML file each (a backup the team can `kubectl apply`; see `classify::restorable`).
//!
//! Reads the configured store (SQLite file or PostgreSQL) as the service left it; it may run
//! beside the service. Files go to `OUT/<cluster>/<namespace>/<kind>[.<group>]-<name>.yaml`
//! (`_cluster` for cluster-scoped objects); every part of the path is reduced to letters,
//! digits, `.`, `_` and `-` first, so a forged name cannot write outside `OUT`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use drift_core::classify::restorable::{manifest, to_yaml};
use drift_core::classify::ObjectState;
use drift_model::{Drift, DriftState};

/// Which tracked objects to export.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// Only this cluster's.
    pub cluster: Option<String>,
    /// Only this namespace's.
    pub namespace: Option<String>,
    /// Only this kind (`Service`, any case), or `Kind.group` (`Service.serving.knative.dev`).
    pub kind: Option<String>,
    /// Deleted objects too (their state as last seen before the delete), while they are
    /// remembered (6 hours after the delete).
    pub deleted: bool,
}

impl Filter {
    fn selects(&self, object: &ObjectState) -> bool {
        (self.deleted || !object.deleted)
            && self
                .cluster
                .as_ref()
                .is_none_or(|cluster| *cluster == object.cluster)
            && self
                .namespace
                .as_ref()
                .is_none_or(|namespace| *namespace == object.namespace)
            && self
                .kind
                .as_ref()
                .is_none_or(|kind| match kind.split_once('.') {
                    Some((kind, group)) => {
                        kind.eq_ignore_ascii_case(&object.kind) && group == object.group()
                    }
                    None => kind.eq_ignore_ascii_case(&object.kind),
                })
    }
}

/// Why the export stopped; printed after `drift-sentinel export: `.
#[derive(Debug, thiserror::Error)]
enum ExportError {
    /// The config did not load.
    #[error("{0}")]
    Config(#[source] super::LoadConfigError),
    /// The store did not open or read.
    #[error("the store: {0}")]
    Store(#[source] drift_store::Error),
    /// A file or directory could not be written.
    #[error("{}: {source}", path.display())]
    Write {
        /// What was being written.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A manifest did not serialize (never for a JSON value; named rather than unwrapped).
    #[error("{what}: {detail}")]
    Yaml {
        /// The object.
        what: String,
        /// The serializer's message.
        detail: String,
    },
}

impl ExportError {
    /// A stable, bounded label.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the label a count of these failures would use; tested"
        )
    )]
    fn kind(&self) -> &'static str {
        match self {
            ExportError::Config(_) => "config",
            ExportError::Store(_) => "store",
            ExportError::Write { .. } => "write",
            ExportError::Yaml { .. } => "yaml",
        }
    }
}

/// What an export did.
#[derive(Debug, Default, PartialEq, Eq)]
struct Summary {
    /// Manifests written.
    written: usize,
    /// Objects left out, by reason (`owned`, `pod`, `secret`, `trimmed`).
    skipped: BTreeMap<&'static str, usize>,
}

/// Runs the export; prints what it wrote (exit 0) or why it stopped (exit 2).
pub fn last_good(config: Option<&PathBuf>, filter: &Filter, out: &Path) -> ExitCode {
    match run(config, filter, out) {
        Ok(summary) => {
            let skipped: Vec<String> = summary
                .skipped
                .iter()
                .map(|(reason, count)| format!("{count} {}", reason_text(reason)))
                .collect();
            println!(
                "wrote {} manifest{} to {}{}",
                summary.written,
                if summary.written == 1 { "" } else { "s" },
                out.display(),
                if skipped.is_empty() {
                    String::new()
                } else {
                    format!("; left out: {}", skipped.join(", "))
                }
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("drift-sentinel export: {error}");
            ExitCode::from(2)
        }
    }
}

fn reason_text(reason: &str) -> &'static str {
    match reason {
        "owned" => "owned by a controller that re-creates them",
        "pod" => "Pods (kept trimmed)",
        "trimmed" => "deleted objects whose tombstone kept no spec",
        _ => "Secrets (values kept as hashes only)",
    }
}

fn run(config: Option<&PathBuf>, filter: &Filter, out: &Path) -> Result<Summary, ExportError> {
    let config = super::load_config(config).map_err(ExportError::Config)?;
    let mut opened =
        drift_store::open(&crate::app::store_options(&config.store)).map_err(ExportError::Store)?;
    let mut objects = Vec::new();
    let snapshot = opened
        .writer
        .load(&mut |_, body| {
            let object = drift_core::classify::stored::decode(body)?;
            if filter.selects(&object) {
                objects.push(object);
            }
            Ok(())
        })
        .map_err(ExportError::Store)?;
    objects.sort_by(|a, b| {
        (&a.cluster, &a.namespace, &a.kind, &a.name, &a.uid).cmp(&(
            &b.cluster,
            &b.namespace,
            &b.kind,
            &b.name,
            &b.uid,
        ))
    });
    write_all(&objects, &snapshot.drifts, out)
}

/// Writes a manifest per restorable object under `out`; warns on standard error about those
/// with a firing drift (their manifest holds the drifted values, as last seen).
fn write_all(
    objects: &[ObjectState],
    drifts: &[Drift],
    out: &Path,
) -> Result<Summary, ExportError> {
    let mut summary = Summary::default();
    for object in objects {
        let body = match manifest(object) {
            Ok(body) => body,
            Err(reason) => {
                *summary.skipped.entry(reason.kind()).or_default() += 1;
                continue;
            }
        };
        let path = file_for(out, object);
        let what = format!(
            "{} {}/{} in cluster {}",
            object.kind, object.namespace, object.name, object.cluster
        );
        let yaml = to_yaml(&body).map_err(|detail| ExportError::Yaml {
            what: what.clone(),
            detail,
        })?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| ExportError::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, yaml).map_err(|source| ExportError::Write {
            path: path.clone(),
            source,
        })?;
        summary.written += 1;
        for drift in drifts.iter().filter(|drift| {
            drift.state == DriftState::Firing
                && drift.cluster == object.cluster
                && drift.uid == object.uid
        }) {
            eprintln!(
                "warning: {what} has a firing {} drift: {} holds its state as last seen, drifted values included",
                drift.class,
                path.display()
            );
        }
    }
    Ok(summary)
}

/// `out/<cluster>/<namespace>/<kind>[.<group>]-<name>.yaml`, each part made safe; the uid is
/// added when two objects would share a file (two names that differ only in unsafe characters).
fn file_for(out: &Path, object: &ObjectState) -> PathBuf {
    let namespace = if object.namespace.is_empty() {
        "_cluster".to_string()
    } else {
        safe(&object.namespace)
    };
    let kind = match object.group() {
        "" => object.kind.to_ascii_lowercase(),
        group => format!("{}.{group}", object.kind.to_ascii_lowercase()),
    };
    let dir = out.join(safe(&object.cluster)).join(namespace);
    let plain = dir.join(format!("{}-{}.yaml", safe(&kind), safe(&object.name)));
    if plain.exists() {
        dir.join(format!(
            "{}-{}-{}.yaml",
            safe(&kind),
            safe(&object.name),
            safe(&object.uid)
        ))
    } else {
        plain
    }
}

/// `part` as one path component: letters, digits, `.`, `_` and `-` kept, anything else `_`;
/// never `.`, `..` or empty.
fn safe(part: &str) -> String {
    let cleaned: String = part
        .chars()
        .take(200)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() || cleaned.chars().all(|c| c == '.') {
        "_".repeat(cleaned.len().max(1))
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forged_name_stays_one_component_inside_the_output() {
        assert_eq!(safe("../../etc"), ".._.._etc");
        assert_eq!(safe(".."), "__");
        assert_eq!(safe(""), "_");
        assert_eq!(safe("hello-world.v2"), "hello-world.v2");
        assert_eq!(safe("a/b\\c d"), "a_b_c_d");
        assert!(!safe("..").contains('/'));
    }

    #[test]
    fn errors_have_stable_kinds() {
        let write = ExportError::Write {
            path: "x".into(),
            source: std::io::Error::other("full"),
        };
        assert_eq!(write.kind(), "write");
        assert_eq!(write.to_string(), "x: full");
        let yaml = ExportError::Yaml {
            what: "Service a/b".into(),
            detail: "d".into(),
        };
        assert_eq!(yaml.kind(), "yaml");
    }
}
