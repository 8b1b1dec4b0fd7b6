//! Text for a terminal or a CI log: one line per finding, its diff and fix indented under it,
//! then the summary line. Messages are kept to one line each; a hint of several commands (a fleet
//! divergence's, one per cluster to align) gets one line per command.

use super::{change_line, defaults_notes, one_line, rule_line, summary_line};
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
            for (index, line) in hint
                .lines()
                .filter(|line| !line.trim().is_empty())
                .enumerate()
            {
                let lead = if index == 0 { "fix:" } else { "    " };
                out.push_str(&format!("          {lead} {}\n", one_line(line)));
            }
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
    for (config_map, note) in defaults_notes(report) {
        out.push_str(&format!(
            "{:<9} {:<18} {config_map}: {}\n",
            "NOTE",
            "defaults",
            one_line(&note)
        ));
    }
    out.push_str(&summary_line(report));
    out.push('\n');
    // Object and server text may hold control characters: shown, never emitted raw.
    drift_model::text::show_controls(&out).into_owned()
}
