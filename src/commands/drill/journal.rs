//! The drill journal (`--journal PATH`): every drill that may have changed the cluster and is not
//! yet put back, with what it needs to be put back (the object as kept, the injection, the
//! object as the injection left it). Written before each injection and after it, removed when
//! the drill ends; a run that is killed leaves it for `drill --recover`, which completes the
//! restores. The file is replaced whole and synced (a crash leaves the old or the new one). A
//! run holds an exclusive lock on `PATH.lock` for as long as it lives (the system lets it go
//! when the process ends, however it ends): two runs never share a journal.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use drift_core::drill::{Inject, Target};

/// One drill that may have changed its target.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry {
    /// The drill's name (and its run number in a chaos run).
    pub drill: String,
    /// The API server it was injected through: `--recover` acts on no other.
    pub server: String,
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `namespace`.
    pub namespace: String,
    /// `name`.
    pub name: String,
    /// The injection, as in the catalog (`{"mergePatch": …}`, `{"jsonPatch": […]}`,
    /// `{"delete": true}`, `{"create": …}`).
    pub inject: Value,
    /// The object as read before the injection (absent for a create).
    pub kept: Option<Value>,
    /// The object as the injection left it (the API server's answer), once known: absent while
    /// the injection is in flight (it may or may not have landed).
    pub injected: Option<Value>,
}

impl Entry {
    /// The entry for a drill about to inject.
    pub(crate) fn new(
        drill: &str,
        server: &str,
        target: &Target,
        inject: &Inject,
        kept: Option<&Value>,
    ) -> Entry {
        let inject = match inject {
            Inject::MergePatch(patch) => serde_json::json!({"mergePatch": patch}),
            Inject::JsonPatch(ops) => serde_json::json!({"jsonPatch": ops}),
            Inject::Delete => serde_json::json!({"delete": true}),
            Inject::Create(object) => serde_json::json!({"create": object}),
        };
        Entry {
            drill: drill.to_string(),
            server: server.to_string(),
            api_version: target.api_version.clone(),
            kind: target.kind.clone(),
            namespace: target.namespace.clone(),
            name: target.name.clone(),
            inject,
            kept: kept.cloned(),
            injected: None,
        }
    }

    /// The target.
    pub(crate) fn target(&self) -> Target {
        Target {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    /// The injection, or why the entry's is not one.
    pub(crate) fn injection(&self) -> Result<Inject, String> {
        let members = self.inject.as_object().filter(|members| members.len() == 1);
        match members.and_then(|members| members.iter().next()) {
            Some((key, patch)) if key == "mergePatch" => Ok(Inject::MergePatch(patch.clone())),
            Some((key, Value::Array(ops))) if key == "jsonPatch" => {
                Ok(Inject::JsonPatch(ops.clone()))
            }
            Some((key, Value::Bool(true))) if key == "delete" => Ok(Inject::Delete),
            Some((key, object)) if key == "create" => Ok(Inject::Create(object.clone())),
            _ => Err(format!(
                "drill {}: the journal's injection is not one of mergePatch, jsonPatch, delete, create",
                self.drill
            )),
        }
    }

    fn same_drill(&self, other: &Entry) -> bool {
        self.drill == other.drill && self.target() == other.target()
    }
}

/// The file's format: 2 since entries name their API server.
const VERSION: u32 = 2;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    version: u32,
    open: Vec<Entry>,
}

/// The journal file and what it holds.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    open: Vec<Entry>,
    /// Held for the journal's life.
    _lock: std::fs::File,
}

impl Journal {
    /// Opens the journal at `path` (absent or empty: nothing open) and locks it; an unreadable
    /// or foreign file, or one another run holds, is an error that says what to do.
    pub(crate) fn open(path: &Path) -> Result<Journal, String> {
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let lock_path = PathBuf::from(lock_path);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|error| format!("{}: {error}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(format!(
                    "{}: another drill run uses this journal (it holds {}): one run per journal \
                     at a time",
                    path.display(),
                    lock_path.display()
                ))
            }
            Err(std::fs::TryLockError::Error(error)) => {
                return Err(format!("{}: {error}", lock_path.display()))
            }
        }
        let open = match std::fs::read(path) {
            Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Vec::new(),
            Ok(bytes) => {
                let file: File = serde_json::from_slice(&bytes).map_err(|error| {
                    format!(
                        "{}: not a drill journal ({error}): read it, put back by hand what it \
                         names (README \"Drills\"), then remove it",
                        path.display()
                    )
                })?;
                if file.version != VERSION {
                    return Err(format!(
                        "{}: drill journal version {} (this drift-sentinel reads {VERSION}): \
                         recover with the drift-sentinel that wrote it, or put back by hand what \
                         it names",
                        path.display(),
                        file.version
                    ));
                }
                file.open
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(format!("{}: {error}", path.display())),
        };
        Ok(Journal {
            path: path.to_path_buf(),
            open,
            _lock: lock,
        })
    }

    /// The drills not put back.
    pub(crate) fn open_entries(&self) -> &[Entry] {
        &self.open
    }

    /// Records (or updates) `entry`, durably, before the caller goes on.
    pub(crate) fn put(&mut self, entry: Entry) -> Result<(), String> {
        let before = self.open.clone();
        match self.open.iter_mut().find(|open| open.same_drill(&entry)) {
            Some(open) => *open = entry,
            None => self.open.push(entry),
        }
        // Not written: not recorded either (a later write must not carry it).
        self.write().inspect_err(|_| self.open = before)
    }

    /// Forgets `entry`'s drill (put back, or nothing to put back).
    pub(crate) fn remove(&mut self, entry: &Entry) -> Result<(), String> {
        let before = self.open.clone();
        self.open.retain(|open| !open.same_drill(entry));
        self.write().inspect_err(|_| self.open = before)
    }

    fn write(&self) -> Result<(), String> {
        let fail = |error: std::io::Error| format!("{}: {error}", self.path.display());
        if self.open.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(fail(error)),
                _ => Ok(()),
            };
        }
        let text = serde_json::to_vec_pretty(&File {
            version: VERSION,
            open: self.open.clone(),
        })
        .map_err(|error| error.to_string())?;
        let mut temporary = self.path.clone().into_os_string();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        {
            use std::io::Write as _;
            let mut file = std::fs::File::create(&temporary).map_err(fail)?;
            file.write_all(&text).map_err(fail)?;
            file.sync_all().map_err(fail)?;
        }
        std::fs::rename(&temporary, &self.path).map_err(fail)?;
        // The rename is durable once the directory is.
        let directory = match self.path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if let Ok(directory) = std::fs::File::open(directory) {
            let _ = directory.sync_all();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            api_version: "serving.knative.dev/v1".into(),
            kind: "Service".into(),
            namespace: "drills".into(),
            name: "hello".into(),
        }
    }

    #[test]
    fn entries_survive_a_reopen_and_an_empty_journal_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.json");
        let mut journal = Journal::open(&path).unwrap();
        assert!(journal.open_entries().is_empty());
        let injects = [
            Inject::MergePatch(serde_json::json!({"spec": {"a": 1}})),
            Inject::JsonPatch(vec![serde_json::json!({"op": "remove", "path": "/spec/a"})]),
            Inject::Delete,
            Inject::Create(serde_json::json!({"kind": "ConfigMap"})),
        ];
        for (index, inject) in injects.iter().enumerate() {
            let mut entry = Entry::new(
                &format!("d{index}"),
                "https://10.0.0.1:6443",
                &target(),
                inject,
                Some(&serde_json::json!({"kept": index})),
            );
            journal.put(entry.clone()).unwrap();
            entry.injected = Some(serde_json::json!({"injected": index}));
            journal.put(entry).unwrap();
        }
        drop(journal);
        let reopened = Journal::open(&path).unwrap();
        assert_eq!(reopened.open_entries().len(), 4);
        for (entry, inject) in reopened.open_entries().iter().zip(&injects) {
            assert_eq!(&entry.injection().unwrap(), inject);
            assert!(entry.injected.is_some());
            assert_eq!(entry.target(), target());
        }
        let mut journal = reopened;
        for entry in journal.open_entries().to_vec() {
            journal.remove(&entry).unwrap();
        }
        assert!(!path.exists());
    }

    #[test]
    fn one_run_holds_a_journal_and_an_empty_file_is_an_empty_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.json");
        std::fs::write(&path, "\n").unwrap();
        let held = Journal::open(&path).unwrap();
        assert!(held.open_entries().is_empty());
        let error = Journal::open(&path).unwrap_err();
        assert!(
            error.contains("another drill run uses this journal"),
            "{error}"
        );
        drop(held);
        assert!(Journal::open(&path).is_ok());
    }

    #[test]
    fn a_foreign_file_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.json");
        std::fs::write(&path, "{\"drills\": []}").unwrap();
        let error = Journal::open(&path).unwrap_err();
        assert!(
            error.contains("not a drill journal") && error.contains("journal.json"),
            "{error}"
        );
        std::fs::write(&path, "{\"version\": 1, \"open\": []}").unwrap();
        assert!(Journal::open(&path).unwrap_err().contains("version 1"));
    }
}
