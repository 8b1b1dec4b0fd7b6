//! The fuzz targets' committed seed corpus (`fuzz/seeds/<target>/`), replayed on stable in every
//! `cargo test`: the same harness functions cargo-fuzz runs (`fuzz/src/harness.rs`), so a crash
//! the fuzzer once found and that was saved as a seed can never come back unnoticed. Longer runs
//! need nightly and cargo-fuzz: `scripts/fuzz.sh` (README, "Fuzzing").

// The fuzz crate's own module: its items are `pub` for the fuzz targets.
#[path = "../../fuzz/src/harness.rs"]
#[allow(dead_code, unreachable_pub)]
mod harness;

use std::path::PathBuf;
use std::time::{Duration, Instant};

fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap_or_else(|error| panic!("{}: {error}", directory.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).expect("seed readable");
            (path, bytes)
        })
        .collect()
}

/// Runs one input on a thread with a small stack (a quarter of the main thread's 8 MiB): an
/// unbounded recursion overflows here first, and a slow input fails on time.
fn run_bounded(target: &'static str, name: String, input: Vec<u8>) {
    let started = Instant::now();
    let handle = std::thread::Builder::new()
        .name(format!("{target}:{name}"))
        .stack_size(2 * 1024 * 1024)
        .spawn(move || harness::run(target, &input))
        .expect("spawn");
    handle
        .join()
        .unwrap_or_else(|_| panic!("fuzz target {target} panicked on {name}"));
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "fuzz target {target} took {took:?} on {name}"
    );
}

#[test]
fn every_target_has_seeds_and_survives_them() {
    for target in harness::TARGETS {
        let inputs = seeds(target);
        assert!(
            inputs.len() >= 3,
            "fuzz/seeds/{target} holds at least a few seeds"
        );
        for (path, bytes) in inputs {
            run_bounded(target, path.display().to_string(), bytes);
        }
    }
}

#[test]
fn every_target_survives_hostile_shapes() {
    let deep_json = |depth: usize| {
        let mut text = Vec::with_capacity(depth * 2);
        text.extend(std::iter::repeat_n(b'[', depth));
        text.extend(std::iter::repeat_n(b']', depth));
        text
    };
    let deep_objects = |depth: usize| {
        let mut text = Vec::new();
        for _ in 0..depth {
            text.extend_from_slice(br#"{"a":"#);
        }
        text.extend_from_slice(b"1");
        text.extend(std::iter::repeat_n(b'}', depth));
        text
    };
    let huge_array = {
        let mut text = b"[".to_vec();
        for index in 0..200_000 {
            if index > 0 {
                text.push(b',');
            }
            text.push(b'0');
        }
        text.push(b']');
        text
    };
    let mut cases: Vec<(&'static str, String, Vec<u8>)> = Vec::new();
    for target in ["parse_object", "managed_fields", "diff"] {
        cases.push((target, "100k nested arrays".into(), deep_json(100_000)));
        cases.push((target, "10k nested objects".into(), deep_objects(10_000)));
        cases.push((target, "200k-element array".into(), huge_array.clone()));
        cases.push((
            target,
            "invalid UTF-8".into(),
            b"{\"a\":\"\xff\xfe\"}".to_vec(),
        ));
    }
    for (mode, prefix) in [(0u8, "binary"), (1, "structured"), (2, "batch")] {
        let head: &[u8] = if mode == 0 {
            b"ce-specversion: 1.0\nce-id: 1\nce-source: /s\nce-type: dev.knative.apiserver.resource.add\n\n"
        } else {
            b""
        };
        for (what, body) in [
            ("100k nested arrays", deep_json(100_000)),
            ("10k nested objects", deep_objects(10_000)),
            ("200k-element array", huge_array.clone()),
            ("invalid UTF-8", b"[\"\xff\"]".to_vec()),
        ] {
            let mut input = vec![mode];
            input.extend_from_slice(head);
            input.extend_from_slice(&body);
            cases.push(("decode_request", format!("{prefix}: {what}"), input));
        }
    }
    let yaml_deep = |depth: usize| {
        let mut text = b"x: ".to_vec();
        text.extend(deep_json(depth));
        text
    };
    cases.push((
        "config",
        "100k nested flow sequences".into(),
        yaml_deep(100_000),
    ));
    let mut block = String::new();
    for level in 0..2_000 {
        block.push_str(&" ".repeat(level));
        block.push_str("a:\n");
    }
    cases.push((
        "config",
        "2k nested block mappings".into(),
        block.into_bytes(),
    ));
    let mut laughs = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        let previous = level - 1;
        laughs.push_str(&format!(
            "a{level}: &a{level} [*a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}]\n"
        ));
    }
    cases.push(("config", "billion laughs".into(), laughs.into_bytes()));
    cases.push((
        "config",
        "invalid UTF-8".into(),
        b"defaultCluster: \xff\n".to_vec(),
    ));
    for (target, name, input) in cases {
        run_bounded(target, name, input);
    }
}
