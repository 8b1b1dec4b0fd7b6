//! JUnit XML, for CI systems that show test results: one test case per object checked, one
//! failure per finding at or above `fail_on`; and, with team invariants, a second suite with one
//! test case per rule, failed when an object breaks it at or above `fail_on`. Every text and attribute goes through
//! [`xml_escape`], so the output is well-formed XML 1.0 whatever the findings say.

use super::{change_line, one_line};
use crate::check::Report;

/// JUnit XML: test suite `drift-sentinel check` (or `compare`, the report's command), one `<testcase>` per object checked, one
/// `<failure>` per finding at or above `fail_on`; findings below it go to `<system-out>`.
pub(crate) fn render_junit(report: &Report) -> String {
    let failed_objects = report
        .objects
        .iter()
        .filter(|object| {
            object
                .findings
                .iter()
                .any(|finding| finding.severity >= report.fail_on)
        })
        .count();
    let tests = report.objects.len();
    let failed_rules = report
        .rules
        .iter()
        .filter(|rule| rule.broken > 0 && rule.severity >= report.fail_on)
        .count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"drift-sentinel {}\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n",
        report.command,
        tests + report.rules.len(),
        failed_objects + failed_rules
    ));
    out.push_str(&format!(
        "  <testsuite name=\"drift-sentinel {}\" tests=\"{tests}\" failures=\"{failed_objects}\" errors=\"0\" skipped=\"0\" time=\"0\">\n",
        report.command
    ));
    for object in &report.objects {
        let classname = if object.group.is_empty() {
            object.kind.clone()
        } else {
            format!("{}.{}", object.kind, object.group)
        };
        let name = if object.namespace.is_empty() {
            object.name.clone()
        } else {
            format!("{}/{}", object.namespace, object.name)
        };
        out.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"0\"",
            xml_escape(&classname),
            xml_escape(&name)
        ));
        if object.findings.is_empty() {
            out.push_str("/>\n");
            continue;
        }
        out.push_str(">\n");
        let mut below = String::new();
        for finding in &object.findings {
            let mut body = format!("{}\n", finding.message);
            for change in &finding.diff {
                body.push_str(&format!(
                    "{}\n",
                    change_line(change, &|text| text.to_string())
                ));
            }
            if let Some(hint) = &finding.hint {
                body.push_str(&format!("fix: {hint}\n"));
            }
            if finding.severity >= report.fail_on {
                out.push_str(&format!(
                    "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
                    xml_escape(&finding.class),
                    xml_escape(&format!(
                        "{} {}: {}",
                        finding.severity.as_str(),
                        finding.class,
                        one_line(&finding.message)
                    )),
                    xml_escape(&body)
                ));
            } else {
                below.push_str(&format!(
                    "{} {}: {}",
                    finding.severity.as_str(),
                    finding.class,
                    body
                ));
            }
        }
        if !below.is_empty() {
            out.push_str(&format!(
                "      <system-out>{}</system-out>\n",
                xml_escape(&below)
            ));
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n");
    if !report.rules.is_empty() {
        render_rules(report, failed_rules, &mut out);
    }
    out.push_str("</testsuites>\n");
    out
}

/// The suite of team invariants: one test case per rule; its failure lists the objects that
/// break it, and objects it could not be evaluated on go to `<system-err>`.
fn render_rules(report: &Report, failed_rules: usize, out: &mut String) {
    out.push_str(&format!(
        "  <testsuite name=\"drift-sentinel invariants\" tests=\"{}\" failures=\"{failed_rules}\" errors=\"0\" skipped=\"0\" time=\"0\">\n",
        report.rules.len()
    ));
    for rule in &report.rules {
        out.push_str(&format!(
            "    <testcase classname=\"invariant\" name=\"{}\" time=\"0\">\n",
            xml_escape(&rule.name)
        ));
        let broken: Vec<String> = report
            .findings()
            .filter(|(_, finding)| finding.rule.as_deref() == Some(rule.name.as_str()))
            .map(|(object, finding)| format!("{}: {}\n", object.reference(), finding.message))
            .collect();
        let summary = super::rule_line(rule);
        if !broken.is_empty() && rule.severity >= report.fail_on {
            out.push_str(&format!(
                "      <failure type=\"invariant\" message=\"{}\">{}</failure>\n",
                xml_escape(&format!(
                    "{} {}: {summary}",
                    rule.severity.as_str(),
                    rule.name
                )),
                xml_escape(&broken.concat())
            ));
        } else {
            let mut text = format!("{summary}\n");
            if !rule.description.is_empty() {
                text.push_str(&format!("{}\n", rule.description));
            }
            text.push_str(&broken.concat());
            out.push_str(&format!(
                "      <system-out>{}</system-out>\n",
                xml_escape(&text)
            ));
        }
        if !rule.errors.is_empty() {
            let errors: String = rule
                .errors
                .iter()
                .map(|(object, error)| format!("could not evaluate on {object}: {error}\n"))
                .collect();
            out.push_str(&format!(
                "      <system-err>{}</system-err>\n",
                xml_escape(&errors)
            ));
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n");
}

/// Escapes text for XML content and attribute values; drops characters XML 1.0 forbids.
pub(crate) fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            xml_escape("a<b & \"c\" 'd'\u{1}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;\u{FFFD}"
        );
    }
}
