//! The architecture inside each crate, checked by reading its sources: the top-level modules
//! import down their layers, no import cycle among the files of one module, and the "only X
//! knows Y" invariants of ARCHITECTURE.md hold by grep across the workspace. A failure names
//! the import, the cycle or the file that breaks the rule. (What each crate may depend on is
//! Cargo's to enforce, and `crate_graph.rs` checks the I/O crates stay out of the core.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every crate of the workspace, by the folder of its sources (relative to the root): the
/// service's own `src/` and each member crate's.
const CRATES: &[&str] = &[
    "src",
    "crates/model/src",
    "crates/cel/src",
    "crates/core/src",
    "crates/store/src",
];

/// Every `.rs` file of one crate, as (path relative to its sources, code without comment
/// lines).
fn crate_files(sources: &str) -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                out.push(path);
            }
        }
    }
    let base = root().join(sources);
    let mut paths = Vec::new();
    walk(&base, &mut paths);
    // Unit tests moved beside their code (`tests.rs`, or `tests/` inside a module's folder) are
    // tests, as a trailing `mod tests` is: they may read fixtures and spawn threads.
    paths.retain(|path| {
        path.file_name().is_none_or(|name| name != "tests.rs")
            && !path
                .strip_prefix(&base)
                .unwrap()
                .components()
                .any(|part| part.as_os_str() == "tests")
    });
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(&base)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&path).unwrap();
            // A file's unit tests (`#[cfg(test)] mod tests`, last in the file) may read fixtures:
            // only the code counts. Other `#[cfg(test)]` items are code and are scanned.
            let code_part = ["#[cfg(test)]\nmod ", "#[cfg(test)]\npub(crate) mod "]
                .iter()
                .filter_map(|start| text.find(start))
                .min()
                .map_or(text.as_str(), |at| &text[..at]);
            let code: String = code_part
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .map(|line| format!("{line}\n"))
                .collect();
            (relative, code)
        })
        .collect()
}

/// Every `.rs` file of the workspace's crates, as (path relative to the workspace root, code).
fn files() -> Vec<(String, String)> {
    CRATES
        .iter()
        .flat_map(|sources| {
            crate_files(sources)
                .into_iter()
                .map(move |(path, code)| (format!("{sources}/{path}"), code))
        })
        .collect()
}

/// The identifiers that follow `prefix` in `code` (`crate::` → `model`, `classify`, ...), and the
/// names inside a following `{...}` group.
fn names_after(code: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // The first segment of every path in the group, nested groups included
            // (`{model::{A, B}, time::X}` names `model` and `time`).
            let mut depth = 0;
            let mut at_start = true;
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => at_start = true,
                    c if at_start && (c.is_alphanumeric() || c == '_') => name.push(c),
                    _ => {
                        if !name.is_empty() {
                            names.push(std::mem::take(&mut name));
                        }
                        if !c.is_whitespace() {
                            at_start = false;
                        }
                    }
                }
            }
            if !name.is_empty() {
                names.push(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.push(name);
            }
        }
    }
    names
}

fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let start = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(cycle) = visit(next, edges, state, stack) {
                        return Some(cycle);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if !state.contains_key(node) {
            if let Some(cycle) = visit(node, edges, &mut state, &mut Vec::new()) {
                return Some(cycle);
            }
        }
    }
    None
}

/// The layers of ARCHITECTURE.md inside each crate that has several top-level modules, top
/// first: a module may import only modules of lower rows of its own crate. (Between crates,
/// Cargo enforces the direction: a crate cannot name one it does not depend on.)
const LAYERS: &[(&str, &[&[&str]])] = &[
    (
        "src",
        &[
            &["commands"],
            &["app"],
            &["api", "check", "cluster", "reload", "replay", "traffic"],
            &["ingest"],
            &["error"],
            &["pipeline"],
            &["deliver"],
            &["metrics", "telemetry"],
        ],
    ),
    (
        "crates/core/src",
        &[
            &["admission"],
            &["config", "drill"],
            &["remediate"],
            &["route"],
            &["classify"],
            &["manifest"],
            &["decode"],
        ],
    ),
];

fn layer_of(layers: &[&[&str]], module: &str) -> Option<usize> {
    layers.iter().position(|row| row.contains(&module))
}

fn top_module(path: &str) -> String {
    let first = path.split('/').next().unwrap_or(path);
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn the_top_level_modules_of_each_crate_import_down_their_layers() {
    let mut scanned = 0;
    for (sources, layers) in LAYERS {
        let files = crate_files(sources);
        let modules: BTreeSet<String> = files
            .iter()
            .map(|(path, _)| top_module(path))
            .filter(|name| name != "main" && name != "lib")
            .collect();
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (path, code) in &files {
            let from = top_module(path);
            if !modules.contains(&from) {
                continue;
            }
            for to in names_after(code, "crate::") {
                if to != from && modules.contains(&to) {
                    edges.entry(from.clone()).or_default().insert(to);
                }
            }
        }
        assert!(
            edges.len() >= layers.len() - 1,
            "the scan found the modules of {sources}: {edges:?}"
        );
        assert_eq!(find_cycle(&edges), None, "{sources}: {edges:#?}");
        for module in &modules {
            assert!(
                layer_of(layers, module).is_some(),
                "{sources}/{module} has no layer in LAYERS"
            );
        }
        for (from, targets) in &edges {
            for to in targets {
                assert!(
                    layer_of(layers, to) > layer_of(layers, from),
                    "{sources}: {from} imports {to}, which is not on a lower layer"
                );
            }
        }
        scanned += 1;
    }
    assert_eq!(scanned, LAYERS.len());
}

#[test]
fn no_import_cycle_among_the_files_of_a_module() {
    let mut checked = 0;
    for sources in CRATES {
        let files = crate_files(sources);
        // Every folder, and the crate's own root (its `lib.rs` plays the part of `mod.rs`).
        let mut directories: BTreeSet<String> = files
            .iter()
            .filter_map(|(path, _)| path.rsplit_once('/').map(|(dir, _)| dir.to_string()))
            .collect();
        directories.insert(String::new());
        for dir in directories {
            let (prefix, root_file, module_path) = if dir.is_empty() {
                (String::new(), "lib.rs".to_string(), "crate::".to_string())
            } else {
                (
                    format!("{dir}/"),
                    format!("{dir}/mod.rs"),
                    format!("crate::{}::", dir.replace('/', "::")),
                )
            };
            // Siblings: the files and folders directly inside `dir`, except its root file.
            // Each with its files' code, and whether `super::` in that file is `dir` (a direct
            // file, or a sub-folder's `mod.rs`).
            let mut siblings: BTreeMap<String, Vec<(bool, &str)>> = BTreeMap::new();
            for (path, code) in &files {
                let Some(inside) = path.strip_prefix(&prefix) else {
                    continue;
                };
                if *path == root_file || (dir.is_empty() && path == "main.rs") {
                    continue;
                }
                let name = inside.split('/').next().unwrap().trim_end_matches(".rs");
                let super_is_dir = !inside.contains('/') || inside == format!("{name}/mod.rs");
                siblings
                    .entry(name.to_string())
                    .or_default()
                    .push((super_is_dir, code));
            }
            // Items the root file re-exports from a sibling (`pub use engine::Engine;`).
            let mut exported: BTreeMap<String, String> = BTreeMap::new();
            if let Some((_, root)) = files.iter().find(|(path, _)| *path == root_file) {
                for sibling in siblings.keys() {
                    for prefix in ["pub use ", "pub(crate) use "] {
                        for item in names_after(root, &format!("{prefix}{sibling}::")) {
                            exported.insert(item, sibling.clone());
                        }
                    }
                }
            }
            let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (name, codes) in &siblings {
                for (super_is_dir, code) in codes {
                    let mut used = names_after(code, &module_path);
                    if *super_is_dir {
                        used.extend(names_after(code, "super::"));
                    }
                    for item in used {
                        let target = if siblings.contains_key(&item) {
                            Some(item.clone())
                        } else {
                            exported.get(&item).cloned()
                        };
                        if let Some(target) = target.filter(|target| target != name) {
                            edges.entry(name.clone()).or_default().insert(target);
                        }
                    }
                }
            }
            checked += 1;
            assert_eq!(
                find_cycle(&edges),
                None,
                "files of {sources}/{dir}: {edges:#?}"
            );
        }
    }
    assert!(checked >= 20, "module folders scanned: {checked}");
}

/// The files whose code mentions `needle` (not as the tail of a longer name: `cel::` is not
/// found in `drift_cel::`).
fn mentioning(needle: &str) -> Vec<String> {
    let starts_a_name = |code: &str| {
        code.match_indices(needle).any(|(at, _)| {
            !code[..at]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    };
    files()
        .into_iter()
        .filter(|(_, code)| starts_a_name(code))
        .map(|(path, _)| path)
        .collect()
}

fn only_in(needle: &str, allowed: &[&str]) {
    let found = mentioning(needle);
    assert!(
        !found.is_empty(),
        "{needle} is used somewhere (the scan works)"
    );
    let outside: Vec<&String> = found
        .iter()
        .filter(|path| !allowed.iter().any(|prefix| path.starts_with(prefix)))
        .collect();
    assert!(
        outside.is_empty(),
        "{needle} outside {allowed:?}: {outside:?}"
    );
}

#[test]
fn only_x_knows_y() {
    only_in("axum", &["src/ingest/", "src/api/", "src/error.rs"]);
    only_in("hyper", &["src/ingest/"]);
    only_in(
        "reqwest",
        &[
            "src/deliver/",
            "src/ingest/auth.rs",
            "src/commands/drill/sink.rs",
            "src/traffic/",
        ],
    );
    only_in("rusqlite", &["crates/store/"]);
    only_in("tokio_postgres", &["crates/store/"]);
    only_in("SELECT ", &["crates/store/"]);
    only_in("INSERT ", &["crates/store/"]);
    only_in("kube::", &["src/cluster/"]);
    only_in("cel::", &["crates/cel/"]);
    only_in("SystemTime::now", &["crates/model/src/time.rs"]);
    for wall_clock in [
        "Utc::now",
        "Local::now",
        "UNIX_EPOCH.elapsed",
        "Instant::now().elapsed",
    ] {
        assert!(mentioning(wall_clock).is_empty(), "{wall_clock}");
    }
}

#[test]
fn the_pure_core_does_no_io_and_reads_no_clock() {
    for module in [
        "crates/model/",
        "crates/cel/",
        "crates/core/src/decode/",
        "crates/core/src/classify/",
        "crates/core/src/route.rs",
    ] {
        for needle in [
            "std::fs",
            "std::io",
            "use std::{",
            "tokio",
            "std::net",
            "std::thread",
            "Instant::now",
            "std::env",
            "new_v4",
            "rand::",
        ] {
            let offending: Vec<String> = mentioning(needle)
                .into_iter()
                .filter(|path| path.starts_with(module))
                .collect();
            assert!(offending.is_empty(), "{needle} in {offending:?}");
        }
    }
}

#[test]
fn delivery_never_imports_the_engine() {
    // The renderers name classes from the catalogue (drift-model's `ClassCatalog`) and cut
    // values with drift-model's `diff::bounded`: delivery changes with neither the engine nor
    // its classes. Every path into drift-core counts, in a `{...}` group too.
    let deliver: Vec<(String, String)> = files()
        .into_iter()
        .filter(|(path, _)| path.starts_with("src/deliver/"))
        .collect();
    assert!(deliver.len() > 5, "the scan sees the deliver module");
    let mut reached = BTreeSet::new();
    for (path, code) in &deliver {
        for module in names_after(code, "drift_core::") {
            assert_ne!(module, "classify", "{path} imports drift_core::classify");
            reached.insert(module);
        }
    }
    assert!(
        reached.contains("config"),
        "the scan reads the imports: {reached:?}"
    );
}

#[test]
fn the_engine_names_no_fleet_special_case() {
    // Fleet drifts are judged by their own evaluator (`classify/fleet/`); the engine reaches it
    // through `engine/fleet.rs` alone and otherwise asks `DriftClass::about_a_group`.
    let naming: Vec<String> = mentioning("FLEET_DIVERGENCE")
        .into_iter()
        .filter(|path| path.starts_with("crates/core/src/classify/engine/"))
        .collect();
    assert_eq!(naming, ["crates/core/src/classify/engine/fleet.rs"]);
}
