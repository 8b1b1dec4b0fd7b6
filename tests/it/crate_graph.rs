//! What each crate of the workspace may depend on, read from Cargo's own resolution
//! (`cargo tree`, normal dependencies, features as a build of that crate alone resolves them):
//! the core crates hold no I/O crate (no async runtime, HTTP server or client, database or
//! Kubernetes client), and the store depends on the model's types, never on the engine's crates
//! or the config. ARCHITECTURE.md's crate map says why.

use std::collections::BTreeSet;
use std::process::Command;

/// The packages in `package`'s normal dependency tree, itself included.
fn tree(package: &str) -> BTreeSet<String> {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            package,
        ])
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let names: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect();
    // The scan reads the tree: the package itself and its serde are in it.
    assert!(names.contains(package), "{package}: {names:?}");
    names
}

/// The I/O crates none of the core crates may hold.
const IO_CRATES: &[&str] = &[
    "tokio",
    "axum",
    "hyper",
    "hyper-util",
    "reqwest",
    "tower",
    "rusqlite",
    "libsqlite3-sys",
    "tokio-postgres",
    "postgres-protocol",
    "kube",
    "kube-client",
    "k8s-openapi",
    "rustls",
    "mio",
];

#[test]
fn the_core_crates_hold_no_io_crate() {
    for package in ["drift-model", "drift-cel", "drift-core"] {
        let names = tree(package);
        assert!(names.contains("serde_json"), "{package}: {names:?}");
        let held: Vec<&&str> = IO_CRATES
            .iter()
            .filter(|name| names.contains(**name))
            .collect();
        assert!(held.is_empty(), "{package} depends on {held:?}");
    }
}

#[test]
fn the_store_knows_the_model_but_not_the_engine_or_the_config() {
    let names = tree("drift-store");
    assert!(names.contains("drift-model"));
    assert!(names.contains("rusqlite") && names.contains("tokio-postgres"));
    for forbidden in ["drift-core", "drift-cel", "drift-sentinel"] {
        assert!(
            !names.contains(forbidden),
            "drift-store depends on {forbidden}"
        );
    }
}

#[test]
fn the_model_is_the_floor() {
    let names = tree("drift-model");
    for crate_of_ours in ["drift-cel", "drift-core", "drift-store", "drift-sentinel"] {
        assert!(
            !names.contains(crate_of_ours),
            "drift-model depends on {crate_of_ours}"
        );
    }
    let cel = tree("drift-cel");
    for crate_of_ours in ["drift-core", "drift-store", "drift-sentinel"] {
        assert!(
            !cel.contains(crate_of_ours),
            "drift-cel depends on {crate_of_ours}"
        );
    }
}
