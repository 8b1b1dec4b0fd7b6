//! A Markdown report for a pull-request comment: a verdict, the summary line and a table of at
//! most [`MARKDOWN_ROWS`] findings. Every cell is escaped, so no finding can break the table or
//! inject raw HTML.

use super::{change_line, defaults_notes, one_line, rule_line, summary_line};
use crate::check::Report;

/// Most rows a Markdown report lists (a pull-request comment holds 65,536 characters).
const MARKDOWN_ROWS: usize = 100;

/// A Markdown report for a pull-request comment.
pub(crate) fn render_markdown(report: &Report) -> String {
    let mut out = String::new();
    let verdict = if report.failed() { "failed" } else { "passed" };
    out.push_str(&format!(
        "### drift-sentinel {} {verdict}\n\n",
        report.command
    ));
    out.push_str(&format!("{}\n", md_text(&summary_line(report))));
    for (config_map, note) in defaults_notes(report) {
        out.push_str(&format!(
            "\n> Note: {}: {}\n",
            md_code(&config_map),
            md_text(&note)
        ));
    }
    if !report.rules.is_empty() {
        out.push_str("\n| Invariant | Outcome |\n|---|---|\n");
        for rule in &report.rules {
            out.push_str(&format!(
                "| {} | {} |\n",
                md_code(&rule.name),
                md_text(&rule_line(rule))
            ));
        }
    }
    let total = report.findings().count();
    if total == 0 {
        return out;
    }
    out.push_str("\n| Severity | Object | Class | Finding | Fix |\n");
    out.push_str("|---|---|---|---|---|\n");
    for (object, finding) in report.findings().take(MARKDOWN_ROWS) {
        let severity = if finding.severity >= report.fail_on {
            format!("**{}**", finding.severity.as_str())
        } else {
            finding.severity.as_str().to_string()
        };
        let mut cell = md_text(&finding.message);
        for change in finding.diff.iter().take(5) {
            cell.push_str(&format!("<br>{}", change_line(change, &md_code)));
        }
        if finding.diff.len() > 5 {
            cell.push_str(&format!("<br>… {} more", finding.diff.len() - 5));
        }
        out.push_str(&format!(
            "| {severity} | {} | {} | {cell} | {} |\n",
            md_code(&object.reference()),
            md_code(&finding.class),
            // One code span per command of a hint of several.
            finding
                .hint
                .as_deref()
                .map(|hint| hint
                    .lines()
                    .filter(|line| !line.trim().is_empty())
                    .map(md_code)
                    .collect::<Vec<_>>()
                    .join("<br>"))
                .unwrap_or_default()
        ));
    }
    if total > MARKDOWN_ROWS {
        out.push_str(&format!(
            "\n{} more findings: run `drift-sentinel {} --format text` for all of them.\n",
            total - MARKDOWN_ROWS,
            report.command
        ));
    }
    // Object and server text may hold control characters: shown, never emitted raw.
    drift_model::text::show_controls(&out).into_owned()
}

/// Text for a Markdown table cell: no line breaks, pipes escaped, no raw HTML.
pub(crate) fn md_text(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        // `[text](url)` and `![alt](url)`: a link or an image (loaded where the report is read)
        // from anyone's value.
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace("\r\n", "<br>")
        .replace(['\n', '\r'], "<br>")
}

/// An inline code span for a table cell, fenced with enough backticks for its content.
fn md_code(text: &str) -> String {
    let text = one_line(text).replace('|', "\\|");
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest + 1);
    if longest > 0 {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(md_code("a|b"), "`a\\|b`");
        assert_eq!(md_code("a`b"), "`` a`b ``");
        assert_eq!(md_text("x|y\n<z>"), "x\\|y<br>&lt;z&gt;");
        assert_eq!(md_text("![i](http://e)"), "!\\[i\\](http://e)");
    }
}
