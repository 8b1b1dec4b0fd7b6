//! Text for a terminal or a CI log: one line per finding, its diff and fix indented under it,
//! then the summary line. Messages and hints are kept to one line each.

use super::{change_line, one_line, rule_line, summary_line};
use crate::check::Report;

/// Text for a terminal or a CI log.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    for (object, finding) in report.findings() {
        out.push_str(&format!(
            "{:<9} {:<18} {}: {}\n",
            finding.severity.as_str().to_uppercase(),
            finding.class,
            object.reference(),
            one_line(&finding.message)
        ));
        for change in &finding.diff {
            out.push_str(&format!(
                "          {}\n",
                change_line(change, &|text| text.to_string())
            ));
        }
        if let Some(hint) = &finding.hint {
            out.push_str(&format!("          fix: {}\n", one_line(hint)));
        }
    }
    for rule in &report.rules {
        out.push_str(&format!(
            "{:<9} {:<18} {}\n",
            "RULE",
            rule.name,
            rule_line(rule)
        ));
        for (object, error) in &rule.errors {
            out.push_str(&format!(
                "          could not evaluate on {object}: {}\n",
                one_line(error)
            ));
        }
    }
    for source in &report.defaults {
        let used = report.findings().any(|(_, finding)| {
            finding.diff.iter().any(|entry| {
                entry
                    .desired_from
                    .as_deref()
                    .is_some_and(|from| from.contains(source.config_map.as_str()))
            })
        });
        if used && !source.found {
            out.push_str(&format!(
                "{:<9} {:<18} {}: not in the live snapshot, so Knative's built-in defaults were used; list it with the snapshot (`kubectl get configmaps -A`) if the cluster changes them\n",
                "NOTE", "defaults", source.config_map
            ));
        }
        for note in &source.notes {
            out.push_str(&format!(
                "{:<9} {:<18} {}: {}\n",
                "NOTE",
                "defaults",
                source.config_map,
                one_line(note)
            ));
        }
    }
    out.push_str(&summary_line(report));
    out.push('\n');
    out
}
