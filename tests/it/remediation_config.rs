//! The `remediation:` section's validation through `load_str`, as `config validate` and the
//! service's start run it: every mistake names its key path.

use drift_core::config::load_str;

/// `load_str`'s error for a config with this `remediation:` section.
fn config_error(section: &str) -> String {
    let yaml = format!("remediation:\n{}", indent(section));
    load_str(&yaml, &|_| None)
        .map(|_| "accepted".to_string())
        .unwrap_or_else(|error| error.to_string())
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}

#[test]
fn the_config_names_the_key_of_every_mistake() {
    let rule = |body: &str| format!("rules:\n- name: r\n{}", indent(body));
    for (section, wanted) in [
        (
            rule("match: {classes: [generation_lag]}\naction: revert\n"),
            "remediation.rules[0].match.classes[0]: revert cannot repair generation_lag: it applies to manual_edit, config_drift, baseline_drift, invariant only (no action repairs this class",
        ),
        (
            rule("match: {classes: [manual_edt]}\naction: revert\n"),
            "remediation.rules[0].match.classes[0]: unknown class \"manual_edt\"",
        ),
        (
            rule("match: {classes: [orphan]}\naction: deleteOrphan\napproval: auto\n"),
            "remediation.rules[0].approval: deleteOrphan deletes an object: manual approval only",
        ),
        (
            rule("match: {classes: []}\naction: rollback\n"),
            "remediation.rules[0].match.classes: must name at least one class (rollback applies to revision_not_ready, not_ready)",
        ),
        (
            rule("match: {classes: [manual_edit], kinds: [Secret]}\naction: revert\n"),
            "remediation.rules[0].match.kinds[0]: Secrets are never remediated",
        ),
        (
            rule("match: {classes: [manual_edit], clusters: [prod-*]}\naction: revert\n"),
            "remediation.rules[0].match.clusters[0]: \"prod-*\" does not match \"default\"",
        ),
        (
            rule("match: {classes: [manual_edit]}\naction: undo\n"),
            "remediation.rules[0].action: unknown action \"undo\"; one of revert, rollback, restore, deleteOrphan",
        ),
        (
            rule("match: {classes: [manual_edit]}\naction: revert\napproval: sometimes\n"),
            "remediation.rules[0].approval: unknown approval \"sometimes\"",
        ),
        (
            rule("match: {classes: [manual_edit], kind: [Service]}\naction: revert\n"),
            "remediation.rules[0].match.kind: unknown field `kind`, expected one of `classes`, `kinds`",
        ),
        (
            rule("match: {classes: [revision_not_ready], kinds: [Route]}\naction: rollback\n"),
            "remediation.rules[0].match.kinds[0]: rollback pins a Knative Service's traffic",
        ),
        (
            "budget: {actions: 0}\n".to_string(),
            "remediation.budget.actions: must be at least 1",
        ),
        (
            "fight: {times: 1}\n".to_string(),
            "remediation.fight.times: must be at least 2",
        ),
        (
            format!(
                "{}- name: r\n  match: {{classes: [orphan]}}\n  action: deleteOrphan\n",
                rule("match: {classes: [manual_edit]}\naction: revert\n")
            ),
            "remediation.rules[1].name: \"r\" names an earlier rule too",
        ),
    ] {
        let error = config_error(&section);
        assert!(
            error.starts_with(wanted),
            "for\n{section}\nwanted {wanted:?}\ngot    {error:?}"
        );
    }
    // Valid rules with mode off load, `off` unquoted (YAML reads it as false) or quoted.
    for mode in ["off", "\"off\"", "false"] {
        assert_eq!(
            config_error(&format!(
                "mode: {mode}\n{}",
                rule("match: {classes: [manual_edit]}\naction: revert\n")
            )),
            "accepted",
            "mode: {mode}"
        );
    }
    assert!(config_error("mode: true\n")
        .starts_with("remediation.mode: expected off, dryRun or apply, got true"));
}

#[test]
fn every_mode_loads_and_one_that_acts_needs_the_kubernetes_client() {
    let rules = "rules:\n- name: r\n  match: {classes: [manual_edit]}\n  action: revert\n";
    assert_eq!(config_error(&format!("mode: dryRun\n{rules}")), "accepted");
    assert_eq!(config_error(&format!("mode: apply\n{rules}")), "accepted");
    // A dry run needs no client: resync may be off.
    assert!(load_str(
        "resync: {enabled: false}\nremediation:\n  mode: dryRun\n  rules:\n  - name: r\n    match: {classes: [manual_edit]}\n    action: revert\n",
        &|_| None,
    )
    .is_ok());
    let error = load_str(
        "resync: {enabled: false}\nremediation:\n  mode: apply\n  rules:\n  - name: r\n    match: {classes: [manual_edit]}\n    action: revert\n",
        &|_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("remediation.mode: apply needs the Kubernetes client that resync uses"),
        "{error}"
    );
}
