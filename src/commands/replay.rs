//! `drift-sentinel replay`: recorded events through the engine, transitions printed.

use std::path::PathBuf;
use std::process::ExitCode;

/// `replay`: runs recorded CloudEvents through the engine with a clock driven by their own
/// times, and prints every transition (`json` for JSON lines).
pub fn run(config_path: Option<PathBuf>, inputs: &[PathBuf], json: bool, settle: &str) -> ExitCode {
    let fail = |message: String| {
        eprintln!("drift-sentinel replay: {message}");
        ExitCode::from(2)
    };
    let config = match super::load_config(config_path.as_ref()) {
        Ok(config) => config,
        Err(error) => return fail(error.to_string()),
    };
    let settle = match drift_model::time::parse_duration(settle) {
        Ok(duration) => i64::try_from(duration.as_millis()).unwrap_or(i64::MAX),
        Err(message) => return fail(format!("--settle: {message}")),
    };
    let rules = match crate::reload::load_rules(&config) {
        Ok(rules) => std::sync::Arc::new(rules),
        Err(error) => return fail(error.to_string()),
    };
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let entries = match std::fs::read_dir(input) {
                Ok(entries) => entries,
                Err(error) => return fail(format!("{}: {error}", input.display())),
            };
            let mut inside: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| {
                    path.extension()
                        .is_some_and(|ext| ext == "json" || ext == "jsonl")
                })
                .collect();
            inside.sort();
            files.extend(inside);
        } else {
            files.push(input.clone());
        }
    }
    let mut events = Vec::new();
    for file in &files {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(error) => return fail(format!("{}: {error}", file.display())),
        };
        match crate::replay::parse_file(&file.display().to_string(), &text) {
            Ok(parsed) => events.extend(parsed),
            Err(error) => return fail(error.to_string()),
        }
    }
    let clusters = crate::app::cluster_names(&config);
    match crate::replay::replay(&events, rules, &clusters, settle) {
        Ok(transitions) => {
            for transition in &transitions {
                if json {
                    println!("{}", crate::replay::transition_json(transition));
                } else {
                    println!("{}", crate::replay::transition_text(transition));
                }
            }
            ExitCode::SUCCESS
        }
        Err(error) => fail(error.to_string()),
    }
}
