//! The class registry is the one list of class ids: every class has its names, the README's class
//! table lists exactly the registry with each class's built-in defaults, and config validation,
//! `check` and the renderers take their ids from it.

use drift_core::classify::classes::{self, REGISTRY};

#[test]
fn every_class_has_a_name_in_english_and_chinese() {
    let mut seen = std::collections::BTreeSet::new();
    for class in REGISTRY {
        let names = class.info();
        assert_eq!(names.id, class.id());
        assert!(
            seen.insert(class.id()),
            "{} is registered twice",
            class.id()
        );
        assert!(
            !names.english.trim().is_empty(),
            "{} has no English name",
            class.id()
        );
        assert!(
            names
                .chinese
                .chars()
                .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
            "{} has no Chinese name: {:?}",
            class.id(),
            names.chinese
        );
    }
}

fn grace_text(grace: std::time::Duration) -> String {
    let seconds = grace.as_secs();
    if seconds > 0 && seconds.is_multiple_of(60) {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}

#[test]
fn the_readme_class_table_is_the_registry() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .split("## Drift classes")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README has a Drift classes section");
    let rows: Vec<(String, String)> = section
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let id = cells[0]
                .trim_start_matches("| `")
                .trim_end_matches('`')
                .to_string();
            let defaults = cells
                .last()
                .unwrap()
                .trim_end_matches(" |")
                .trim()
                .to_string();
            (id, defaults)
        })
        .collect();
    let expected: Vec<(String, String)> = REGISTRY
        .iter()
        .map(|class| {
            let defaults = class.defaults();
            (
                class.id().to_string(),
                format!(
                    "{} / {}",
                    class.info().severity.as_str(),
                    grace_text(defaults.grace)
                ),
            )
        })
        .collect();
    assert_eq!(rows, expected);
}

#[test]
fn the_catalog_renderers_read_is_the_registry() {
    let catalog = classes::catalog();
    let ids: Vec<&str> = catalog.iter().map(|class| class.id).collect();
    assert_eq!(ids, classes::ids().collect::<Vec<_>>());
    for class in REGISTRY {
        assert_eq!(catalog.by_id(class.id()), Some(class.info()));
    }
    assert_eq!(catalog.by_id("no_such_class"), None);
}

#[test]
fn config_the_api_and_check_take_their_ids_from_the_registry() {
    for id in classes::ids() {
        let yaml = format!("rules:\n  classes:\n    {id}: {{enabled: true}}\n");
        drift_core::config::load_str(&yaml, &|_| None)
            .unwrap_or_else(|error| panic!("{id}: {error}"));
    }
    let snapshot = drift_sentinel::check::snapshot_classes();
    assert!(!snapshot.is_empty());
    for id in &snapshot {
        assert!(classes::is_known(id), "{id}");
    }
    assert_eq!(
        snapshot,
        [
            "generation_lag",
            "not_ready",
            "revision_not_ready",
            "traffic_drift",
            "revision_pileup",
            "event_delivery_broken",
            "scale_unreachable",
            "operator_upgrade_stuck",
            "pipeline_broken",
            "invariant"
        ]
    );
}
