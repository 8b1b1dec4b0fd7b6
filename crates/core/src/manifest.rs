//! Manifests: Kubernetes objects read from multi-document YAML (or JSON) files, a directory of
//! them, or standard input, with where each object came from. The one loader behind `check`
//! (both sides) and `rules.baselineDir` (the desired manifests of `baseline_drift`).
//!
//! Input is bounded: [`MAX_FILE_BYTES`] per file, [`MAX_TOTAL_BYTES`] in all, [`MAX_DEPTH`]
//! directory levels, and a node budget per file, so a hot-reloaded directory cannot exhaust
//! memory. Nothing here panics on input: every bad input is an [`Error`] naming the file and
//! document. Parsing ([`Manifests::add_yaml`]) is pure; only [`load`] reads files.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::decode::object::{api_group, type_name};

/// Largest file read, in bytes (64 MiB).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Largest total read for one side (baseline or live), in bytes (256 MiB).
pub(crate) const MAX_TOTAL_BYTES: u64 = 256 * 1024 * 1024;
/// Deepest directory nesting followed (a guard against symlink loops).
pub(crate) const MAX_DEPTH: usize = 32;

/// The identity of a desired object: (group, kind, namespace, name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManifestKey {
    /// API group (empty for core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty when unset or cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ManifestKey {
    /// `Kind.group/namespace/name` (`Kind/namespace/name` for the core group): unambiguous, a
    /// Knative Service is never confused with a core Service.
    pub fn reference(&self) -> String {
        format_reference(&self.group, &self.kind, &self.namespace, &self.name)
    }
}

impl fmt::Display for ManifestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// `Kind.group/namespace/name`, or `Kind/namespace/name` for the core group.
pub fn format_reference(group: &str, kind: &str, namespace: &str, name: &str) -> String {
    let kind = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    if namespace.is_empty() {
        format!("{kind}/{name}")
    } else {
        format!("{kind}/{namespace}/{name}")
    }
}

/// The key of a manifest or live object.
pub fn manifest_key(object: &Value) -> Option<ManifestKey> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let name = object.pointer("/metadata/name")?.as_str()?;
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(ManifestKey {
        group: api_group(api_version).to_string(),
        kind: kind.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    })
}

/// Why manifests could not be loaded: bad input, with the file and document it is in.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read (missing, unreadable, not UTF-8).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file, or all files together, are over the size limit.
    #[error("{path}: {what} is over the limit of {limit} bytes")]
    TooLarge {
        /// The file or directory.
        path: String,
        /// What is too large.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// A directory holds no `.yaml`, `.yml` or `.json` file.
    #[error("{path}: no .yaml, .yml or .json files")]
    NoFiles {
        /// The directory.
        path: String,
    },
    /// A file is not valid YAML.
    #[error("{file}{}: not valid YAML: {message}", .document.map(|n| format!(" document {n}")).unwrap_or_default())]
    Syntax {
        /// The file.
        file: String,
        /// The document (1-based) the error is in, when the parser says where.
        document: Option<usize>,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A document is not a Kubernetes object.
    #[error("{origin}: {message}")]
    Invalid {
        /// Where.
        origin: Origin,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Read { .. } => "read",
            Error::TooLarge { .. } => "too_large",
            Error::NoFiles { .. } => "no_files",
            Error::Syntax { .. } => "syntax",
            Error::Invalid { .. } => "invalid",
        }
    }
}

/// Where an object was read: file, document (1-based, counting empty ones as a person would),
/// its first line, and the item index inside a `List`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file.
    pub file: String,
    /// The document, 1-based.
    pub document: usize,
    /// The line the document starts on, 1-based (0 when unknown).
    pub line: usize,
    /// The index in the `items` of a `List` document.
    pub item: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} document {}", self.file, self.document)?;
        if self.line > 0 {
            write!(f, " (line {})", self.line)?;
        }
        if let Some(item) = self.item {
            write!(f, " items[{item}]")?;
        }
        Ok(())
    }
}

/// One object as read.
#[derive(Debug, Clone)]
pub struct Document {
    /// The object as JSON.
    pub value: Value,
    /// Where it was read.
    pub origin: Origin,
}

/// Objects read from YAML files, keyed by (group, kind, namespace, name), with where each came
/// from: multi-document files, `List` kinds flattened, empty documents skipped, room for a whole
/// cluster dump in one document, and origins for error messages. `kustomize.config.k8s.io` documents
/// (`kustomization.yaml`) are skipped: they are build instructions, not objects.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    objects: BTreeMap<ManifestKey, Document>,
    duplicates: Vec<(ManifestKey, Origin, Origin)>,
}

impl Manifests {
    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// True when there is no object.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// An object by key.
    pub fn get(&self, key: &ManifestKey) -> Option<&Document> {
        self.objects.get(key)
    }

    /// Every object, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&ManifestKey, &Document)> {
        self.objects.iter()
    }

    /// Objects defined more than once: (key, first, later). The later definition wins.
    pub fn duplicates(&self) -> &[(ManifestKey, Origin, Origin)] {
        &self.duplicates
    }

    /// Adds the objects of one YAML (or JSON) file.
    pub fn add_yaml(&mut self, file: &str, text: &str) -> Result<(), Error> {
        let options = serde_saphyr::options! {
            with_snippet: false,
            // A cluster dump is one large document: the default budget (250,000 nodes) is meant
            // for config files. The file size limit bounds the work instead.
            budget: serde_saphyr::budget! {
                max_nodes: 32_000_000,
                max_events: 64_000_000,
                max_documents: 100_000,
            },
        };
        let documents: Vec<serde_saphyr::Spanned<Value>> =
            serde_saphyr::from_multiple_with_options(text, options).map_err(|error| {
                let document = error
                    .location()
                    .map(|location| document_number(text, location.line()));
                Error::Syntax {
                    file: file.to_string(),
                    document,
                    message: error.without_snippet().to_string(),
                }
            })?;
        for spanned in documents {
            let line = usize::try_from(spanned.referenced.line()).unwrap_or(0);
            let origin = Origin {
                file: file.to_string(),
                document: document_number(text, spanned.referenced.line()),
                line,
                item: None,
            };
            self.add_document(spanned.value, origin)?;
        }
        Ok(())
    }

    /// Adds one object read from elsewhere (a live cluster), with where it came from.
    pub fn add_object(&mut self, object: Value, origin: Origin) -> Result<(), Error> {
        self.add_document(object, origin)
    }

    /// Keeps the objects `keep` accepts; returns the references of the others.
    pub fn retain(&mut self, mut keep: impl FnMut(&Value) -> bool) -> Vec<String> {
        let mut dropped = Vec::new();
        self.objects.retain(|key, document| {
            let kept = keep(&document.value);
            if !kept {
                dropped.push(key.reference());
            }
            kept
        });
        dropped
    }

    /// Keeps only the objects in `namespace` (a check scoped to one namespace compares only
    /// that namespace's desired objects).
    pub fn retain_namespace(&mut self, namespace: &str) {
        self.objects.retain(|key, _| key.namespace == namespace);
        self.duplicates
            .retain(|(key, _, _)| key.namespace == namespace);
    }

    fn add_document(&mut self, document: Value, origin: Origin) -> Result<(), Error> {
        if document.is_null() {
            return Ok(());
        }
        let kind = document
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind.ends_with("List") {
            if let Some(Value::Array(items)) = document.get("items") {
                for (index, item) in items.iter().enumerate() {
                    let origin = Origin {
                        item: Some(origin.item.unwrap_or(index)),
                        ..origin.clone()
                    };
                    self.add_document(item.clone(), origin)?;
                }
                return Ok(());
            }
        }
        let api_version = document
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if api_group(api_version) == "kustomize.config.k8s.io" {
            // A kustomization is build instructions, not an object in the cluster.
            return Ok(());
        }
        if let Some(message) = shape_problem(&document) {
            return Err(Error::Invalid { origin, message });
        }
        let Some(key) = manifest_key(&document) else {
            return Err(Error::Invalid {
                origin,
                message: "needs apiVersion, kind and metadata.name".to_string(),
            });
        };
        if let Some(previous) = self.objects.get(&key) {
            self.duplicates
                .push((key.clone(), previous.origin.clone(), origin.clone()));
        }
        self.objects.insert(
            key,
            Document {
                value: document,
                origin,
            },
        );
        Ok(())
    }
}

/// What keeps a document from being a Kubernetes object, if anything.
fn shape_problem(document: &Value) -> Option<String> {
    let Value::Object(map) = document else {
        return Some(format!(
            "a document must be a mapping with apiVersion, kind and metadata.name, got {}",
            type_name(document)
        ));
    };
    fn text(value: Option<&Value>) -> Option<&str> {
        value.and_then(Value::as_str).filter(|s| !s.is_empty())
    }
    let mut missing = Vec::new();
    if text(map.get("apiVersion")).is_none() {
        missing.push("apiVersion");
    }
    if text(map.get("kind")).is_none() {
        missing.push("kind");
    }
    match map.get("metadata") {
        Some(Value::Object(metadata)) => {
            if text(metadata.get("name")).is_none() {
                missing.push("metadata.name");
            }
            match metadata.get("namespace") {
                None | Some(Value::Null) | Some(Value::String(_)) => {}
                Some(Value::Bool(_)) => {
                    return Some(
                        "metadata.namespace must be a string, got a boolean (YAML reads an unquoted y, n, yes, no, on or off as one: quote it)"
                            .to_string(),
                    )
                }
                Some(other) => {
                    return Some(format!(
                        "metadata.namespace must be a string, got {}",
                        type_name(other)
                    ))
                }
            }
        }
        _ => missing.push("metadata.name"),
    }
    if missing.is_empty() {
        None
    } else {
        Some(format!(
            "not a Kubernetes object: missing {} (needs apiVersion, kind and metadata.name)",
            missing.join(", ")
        ))
    }
}

/// The 1-based document a line is in: each `---` starts a document, and content before the
/// first `---` is document 1.
fn document_number(text: &str, line: u64) -> usize {
    let mut number = 0;
    let mut open = false;
    for (index, content) in text.lines().enumerate() {
        if index as u64 >= line {
            break;
        }
        let marker = content == "---"
            || content.starts_with("--- ")
            || content.starts_with("---\t")
            || content.starts_with("---#");
        if marker {
            number += 1;
            open = true;
        } else if content == "..." || content.starts_with("... ") {
            open = false;
        } else {
            let trimmed = content.trim();
            let is_content =
                !trimmed.is_empty() && !trimmed.starts_with('#') && !content.starts_with('%');
            if is_content && !open {
                number += 1;
                open = true;
            }
        }
    }
    number.max(1)
}

// ---- Input -----------------------------------------------------------------------------------

/// Reads a file, a directory (every `.yaml`, `.yml` and `.json` below it, sorted, dot-names
/// skipped as in ConfigMap volumes), or standard input (`-`) into a snapshot.
pub fn load(path: &Path) -> Result<Manifests, Error> {
    let mut snapshot = Manifests::default();
    if path == Path::new("-") {
        let text = read_bounded(std::io::stdin().lock(), "<stdin>")?;
        snapshot.add_yaml("<stdin>", &text)?;
        return Ok(snapshot);
    }
    let mut files = Vec::new();
    collect_files(path, 0, true, &mut files)?;
    if files.is_empty() {
        return Err(Error::NoFiles {
            path: path.display().to_string(),
        });
    }
    let mut total: u64 = 0;
    for file in files {
        let name = file.display().to_string();
        let handle = std::fs::File::open(&file).map_err(|source| Error::Read {
            path: name.clone(),
            source,
        })?;
        let size = handle.metadata().map(|meta| meta.len()).unwrap_or(0);
        if size > MAX_FILE_BYTES {
            return Err(Error::TooLarge {
                path: name,
                what: "the file",
                limit: MAX_FILE_BYTES,
            });
        }
        let text = read_bounded(handle, &name)?;
        total = total.saturating_add(text.len() as u64);
        if total > MAX_TOTAL_BYTES {
            return Err(Error::TooLarge {
                path: path.display().to_string(),
                what: "the total of its files",
                limit: MAX_TOTAL_BYTES,
            });
        }
        snapshot.add_yaml(&name, &text)?;
    }
    Ok(snapshot)
}

/// Reads at most [`MAX_FILE_BYTES`] (a device or a growing file cannot exhaust memory).
fn read_bounded(reader: impl Read, name: &str) -> Result<String, Error> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| Error::Read {
            path: name.to_string(),
            source,
        })?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            path: name.to_string(),
            what: "the file",
            limit: MAX_FILE_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|error| Error::Read {
        path: name.to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                error.utf8_error().valid_up_to()
            ),
        ),
    })
}

fn collect_files(
    path: &Path,
    depth: usize,
    explicit: bool,
    out: &mut Vec<PathBuf>,
) -> Result<(), Error> {
    let read_error = |source| Error::Read {
        path: path.display().to_string(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(read_error)?;
    if !metadata.is_dir() {
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().to_string())
            .unwrap_or_default();
        if explicit || name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json")
        {
            out.push(path.to_path_buf());
        }
        return Ok(());
    }
    if depth > MAX_DEPTH {
        return Err(Error::Read {
            path: path.display().to_string(),
            source: std::io::Error::other(format!(
                "directories nested deeper than {MAX_DEPTH} levels (a symlink loop?)"
            )),
        });
    }
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(path).map_err(read_error)? {
        let entry = entry.map_err(read_error)?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            // Kubernetes ConfigMap volumes keep `..data` and timestamped directories; the
            // visible names are symlinks into them.
            continue;
        }
        entries.push(entry.path());
    }
    entries.sort();
    for entry in entries {
        collect_files(&entry, depth + 1, false, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_numbers_count_markers_and_leading_content() {
        let text = "# comment\n---\na: 1\n---\n---\nb: 2\n";
        assert_eq!(document_number(text, 3), 1);
        assert_eq!(document_number(text, 6), 3);
        assert_eq!(document_number("a: 1\n---\nb: 2\n", 3), 2);
        assert_eq!(document_number("a: 1\n", 1), 1);
    }

    #[test]
    fn list_items_and_shape_errors_name_their_place() {
        let mut snapshot = Manifests::default();
        snapshot
            .add_yaml(
                "live.yaml",
                "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: ns}\n",
            )
            .unwrap();
        assert_eq!(snapshot.len(), 1);
        let error = Manifests::default()
            .add_yaml(
                "x.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: Service\n",
            )
            .unwrap_err();
        assert_eq!(error.kind(), "invalid");
        assert_eq!(
            error.to_string(),
            "x.yaml document 2 (line 5): not a Kubernetes object: missing apiVersion, metadata.name (needs apiVersion, kind and metadata.name)"
        );
        let error = Manifests::default()
            .add_yaml("y.yaml", "a: 1\n---\nb: [1, 2\n")
            .unwrap_err();
        assert_eq!(error.kind(), "syntax");
        assert!(
            error
                .to_string()
                .starts_with("y.yaml document 2: not valid YAML: "),
            "{error}"
        );
    }
}
