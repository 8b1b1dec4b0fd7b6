//! `export --last-good`: a restorable manifest of every tracked object, from the store, one
//! YAML file each (a backup the team can `kubectl apply`; see `classify::restorable`).
//!
//! Reads the configured store (SQLite file or PostgreSQL) without writing to it (no file
//! created, no migration: `drift_store::read_objects`), so it may run beside the service, and
//! streams it: live objects are written as they are read. `OUT` must be new or empty, so a
//! restore from it never applies a file of an older export. Files go to `OUT/<cluster>/<namespace>/<kind>[.<group>]-<name>.yaml`
//! (`_cluster` for cluster-scoped objects); every part of the path is reduced to letters,
//! digits, `.`, `_` and `-` first, so a forged name cannot write outside `OUT`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use drift_core::classify::restorable::{manifest, to_yaml};
use drift_core::classify::ObjectState;
use drift_model::DriftState;

/// Which tracked objects to export.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// Only this cluster's.
    pub cluster: Option<String>,
    /// Only this namespace's.
    pub namespace: Option<String>,
    /// Only this kind (`Service`, any case), or `Kind.group` (`Service.serving.knative.dev`).
    pub kind: Option<String>,
    /// Deleted objects too (their state as the delete event showed it), while they are
    /// remembered (6 hours after the delete); one per name, the latest, and none whose name a
    /// live object has again.
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
    #[error("{store}: {source}")]
    Store {
        /// Which store (`store.path`'s file, or `store.url`).
        store: String,
        /// Why.
        #[source]
        source: drift_store::Error,
    },
    /// The output directory holds files already: a restore from it would apply old ones too.
    #[error("{}: not empty; export into a new or empty directory", path.display())]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
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
            ExportError::Store { .. } => "store",
            ExportError::NotEmpty { .. } => "not_empty",
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
    /// Objects left out, by reason (`owned`, `pod`, `secret`, `binary_data`, `trimmed`,
    /// `replaced`).
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
            let line = format!(
                "wrote {} manifest{} to {}{}",
                summary.written,
                if summary.written == 1 { "" } else { "s" },
                if to_stdout(out) {
                    "standard output".to_string()
                } else {
                    out.display().to_string()
                },
                if skipped.is_empty() {
                    String::new()
                } else {
                    format!("; left out: {}", skipped.join(", "))
                }
            );
            // With the manifests on standard output, the summary goes beside the warnings.
            if to_stdout(out) {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
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
        "secret" => "Secrets (values kept as hashes only)",
        "binary_data" => "ConfigMaps with binaryData (kept as hashes only)",
        "trimmed" => "deleted objects whose tombstone kept no spec",
        "replaced" => "deleted objects whose name a live or a later-deleted object has",
        _ => "for another reason",
    }
}

fn run(config: Option<&PathBuf>, filter: &Filter, out: &Path) -> Result<Summary, ExportError> {
    let config = super::load_config(config).map_err(ExportError::Config)?;
    let store = match &config.store.url {
        Some(_) => "the PostgreSQL store (store.url)".to_string(),
        None => config.store.path.display().to_string(),
    };
    let options = crate::app::store_options(&config.store);
    let created = if to_stdout(out) { false } else { prepare(out)? };
    let mut export = Export::new((!to_stdout(out)).then_some(out));
    // Live objects are written as they are read (the store may hold more than fits beside the
    // service); deleted ones wait until every live name is known.
    let mut deleted = Vec::new();
    let drifts = drift_store::read_objects(&options, &mut |_, body| {
        let object = drift_core::classify::stored::decode(body)?;
        if !filter.selects(&object) {
            return Ok(());
        }
        if object.deleted {
            deleted.push(object);
        } else {
            export.write(&object);
        }
        Ok(())
    })
    .map_err(|source| {
        if created {
            // Nothing was read: leave no empty directory behind (it is empty: `prepare`).
            let _ = std::fs::remove_dir(out);
        }
        ExportError::Store { store, source }
    })?;
    deleted.sort_by(|a, b| (&a.last_seen, &a.uid).cmp(&(&b.last_seen, &b.uid)));
    for object in deleted.iter().rev() {
        if export.named.contains(&name_of(object)) {
            *export.summary.skipped.entry("replaced").or_default() += 1;
        } else {
            export.write(object);
        }
    }
    export.flush();
    let Export {
        summary,
        failed,
        written,
        ..
    } = export;
    if let Some(error) = failed {
        return Err(error);
    }
    for drift in drifts
        .iter()
        .filter(|drift| drift.state == DriftState::Firing)
    {
        if let Some((what, path)) = written.get(&(drift.cluster.clone(), drift.uid.clone())) {
            eprintln!(
                "warning: {what} has a firing {} drift: {} holds its state as last seen, drifted values included",
                drift.class,
                path.as_ref()
                    .map_or("its document".to_string(), |path| path.display().to_string())
            );
        }
    }
    Ok(summary)
}

/// `--out -`: one YAML stream on standard output (`kubectl exec POD -- drift-sentinel export ...
/// > backup.yaml` from an image without a shell or `tar`).
fn to_stdout(out: &Path) -> bool {
    out == Path::new("-")
}

/// Creates `out` (true), or accepts it when it is an empty directory (false).
fn prepare(out: &Path) -> Result<bool, ExportError> {
    let write = |source| ExportError::Write {
        path: out.to_path_buf(),
        source,
    };
    match std::fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(ExportError::NotEmpty {
                    path: out.to_path_buf(),
                });
            }
            Ok(false)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(out).map_err(write).map(|()| true)
        }
        Err(error) => Err(write(error)),
    }
}

/// An object's name as a restore would take it: two objects with one are one object.
fn name_of(object: &ObjectState) -> (String, String, String, String, String) {
    (
        object.cluster.clone(),
        object.group().to_string(),
        object.kind.clone(),
        object.namespace.clone(),
        object.name.clone(),
    )
}

/// An export under way: what it wrote, where, and the first failure (after which it writes
/// nothing more).
struct Export<'a> {
    /// The directory, or `None` for standard output.
    out: Option<&'a Path>,
    /// Standard output, when the manifests go there.
    stdout: std::io::BufWriter<std::io::Stdout>,
    summary: Summary,
    /// The names of the objects written (live ones first, then the newest tombstone of a name).
    named: HashSet<(String, String, String, String, String)>,
    /// The files written so far.
    paths: HashSet<PathBuf>,
    /// (cluster, uid) → (the object as the warnings name it, its file if it has one).
    written: HashMap<(String, String), (String, Option<PathBuf>)>,
    failed: Option<ExportError>,
}

impl<'a> Export<'a> {
    fn new(out: Option<&'a Path>) -> Export<'a> {
        Export {
            out,
            stdout: std::io::BufWriter::new(std::io::stdout()),
            summary: Summary::default(),
            named: HashSet::new(),
            paths: HashSet::new(),
            written: HashMap::new(),
            failed: None,
        }
    }

    /// Flushes standard output (a failure to is this export's failure).
    fn flush(&mut self) {
        if self.failed.is_none() {
            if let Err(source) = std::io::Write::flush(&mut self.stdout) {
                self.failed = Some(ExportError::Write {
                    path: PathBuf::from("-"),
                    source,
                });
            }
        }
    }

    fn write(&mut self, object: &ObjectState) {
        if self.failed.is_some() {
            return;
        }
        if let Err(error) = self.try_write(object) {
            self.failed = Some(error);
        }
    }

    fn try_write(&mut self, object: &ObjectState) -> Result<(), ExportError> {
        let body = match manifest(object) {
            Ok(body) => body,
            Err(reason) => {
                *self.summary.skipped.entry(reason.kind()).or_default() += 1;
                return Ok(());
            }
        };
        let what = format!(
            "{} {}/{} in cluster {}",
            object.kind, object.namespace, object.name, object.cluster
        );
        let yaml = to_yaml(&body).map_err(|detail| ExportError::Yaml {
            what: what.clone(),
            detail,
        })?;
        let path = match self.out {
            Some(out) => {
                let path = file_for(out, object, &self.paths);
                write_new(&path, &yaml)?;
                self.paths.insert(path.clone());
                Some(path)
            }
            None => {
                let document = format!("---\n{yaml}");
                std::io::Write::write_all(&mut self.stdout, document.as_bytes()).map_err(
                    |source| ExportError::Write {
                        path: PathBuf::from("-"),
                        source,
                    },
                )?;
                None
            }
        };
        self.summary.written += 1;
        self.named.insert(name_of(object));
        self.written
            .insert((object.cluster.clone(), object.uid.clone()), (what, path));
        Ok(())
    }
}

/// Writes `text` to a new file at `path` (its directories created): never through a link or
/// over a file someone put there meanwhile.
fn write_new(path: &Path, text: &str) -> Result<(), ExportError> {
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ExportError::Write { path, source }
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(failed(parent))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(failed(path))?;
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(failed(path))
}

/// `out/<cluster>/<namespace>/<kind>[.<group>]-<name>.yaml`, each part made safe; the uid is
/// added when another object of this export has that file (two names that differ only in unsafe
/// characters), and a name too long for a file is cut and marked with a hash of it.
fn file_for(out: &Path, object: &ObjectState, used: &HashSet<PathBuf>) -> PathBuf {
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
    let plain = dir.join(file_name(&format!(
        "{}-{}",
        safe(&kind),
        safe(&object.name)
    )));
    if used.contains(&plain) {
        dir.join(file_name(&format!(
            "{}-{}-{}",
            safe(&kind),
            safe(&object.name),
            safe(&object.uid)
        )))
    } else {
        plain
    }
}

/// `stem.yaml`, at most [`MAX_FILE_NAME`] bytes: a longer stem is cut and ends in a hash of it.
fn file_name(stem: &str) -> String {
    let limit = MAX_FILE_NAME - ".yaml".len();
    if stem.len() <= limit {
        return format!("{stem}.yaml");
    }
    let hash = drift_core::decode::object::hash_value(stem);
    // `stem` is ASCII (see `safe`): any cut is at a character boundary.
    let keep = limit - hash.len() - 1;
    format!("{}-{hash}.yaml", &stem[..keep])
}

/// The longest file name written (most file systems allow 255 bytes).
const MAX_FILE_NAME: usize = 200;

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
