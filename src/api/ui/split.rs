//! A served-traffic finding (`traffic_share_drift`) drawn on its drift page: the split the Route
//! declares and the split its requests really took, as two stacked bars per Revision in inline
//! SVG (no script, as every page here), from the evidence's `shares` fact.

use serde_json::Value;

use super::super::report::escape_html as esc;

/// The evidence fact holding the shares: a JSON array of `{revision, declaredPercent,
/// observedPercent, requests}` (the class's evidence, kept as text like every fact).
pub(super) const SHARES_FACT: &str = "shares";

/// Most Revisions drawn (a Route splits between a handful; a forged fact is cut).
const MOST: usize = 12;
/// Fills for the Revisions, in order; the legend repeats them.
const FILLS: [&str; 8] = [
    "#3b6fb6", "#e07b39", "#4e9a5b", "#b64b6e", "#7a5cb8", "#c2a13a", "#3a9fa8", "#8a8a8a",
];
const BAR_LEFT: f64 = 90.0;
const BAR_WIDTH: f64 = 500.0;
const BAR_HEIGHT: f64 = 26.0;

/// One Revision's share, read leniently: a missing or non-numeric member draws as 0 (the fact
/// comes from the cluster's metrics and the store; it never fails a page).
struct Share {
    revision: String,
    declared: f64,
    observed: f64,
    requests: Option<f64>,
}

fn shares(evidence: &drift_model::Evidence) -> Vec<Share> {
    let Some(Ok(Value::Array(items))) = evidence
        .facts
        .get(SHARES_FACT)
        .map(|text| serde_json::from_str::<Value>(text))
    else {
        return Vec::new();
    };
    let percent = |item: &Value, key: &str| {
        item.get(key)
            .and_then(Value::as_f64)
            .filter(|value| value.is_finite())
            .map_or(0.0, |value| value.clamp(0.0, 100.0))
    };
    items
        .iter()
        .take(MOST)
        .map(|item| Share {
            revision: item
                .get("revision")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string(),
            declared: percent(item, "declaredPercent"),
            observed: percent(item, "observedPercent"),
            requests: item.get("requests").and_then(Value::as_f64),
        })
        .collect()
}

/// Which of a Share's percents a bar draws.
type ShareValue = fn(&Share) -> f64;

/// The figure, or nothing when the evidence has no shares.
pub(super) fn split_bars(evidence: &drift_model::Evidence) -> String {
    let shares = shares(evidence);
    if shares.is_empty() {
        return String::new();
    }
    let mut svg = format!(
        "<svg viewBox=\"0 0 600 {height}\" role=\"img\" aria-label=\"Declared and served traffic per Revision\">",
        height = 2.0 * BAR_HEIGHT + 30.0
    );
    let rows: [(&str, ShareValue); 2] = [
        ("Declared", |share| share.declared),
        ("Served", |share| share.observed),
    ];
    for (row, (label, value)) in rows.iter().enumerate() {
        let y = 10.0 + row as f64 * (BAR_HEIGHT + 10.0);
        svg.push_str(&format!(
            "<text x=\"0\" y=\"{}\" font-size=\"13\">{label}</text>",
            y + BAR_HEIGHT * 0.7
        ));
        svg.push_str(&format!(
            "<rect x=\"{BAR_LEFT}\" y=\"{y}\" width=\"{BAR_WIDTH}\" height=\"{BAR_HEIGHT}\" fill=\"#eee\"/>"
        ));
        // Shares that add up past 100 % (rounding, a forged fact) are drawn within the bar.
        let mut x = BAR_LEFT;
        for (index, share) in shares.iter().enumerate() {
            let width = (value(share) / 100.0 * BAR_WIDTH).min(BAR_LEFT + BAR_WIDTH - x);
            if width <= 0.0 {
                continue;
            }
            svg.push_str(&format!(
                "<rect class=\"share\" data-revision=\"{revision}\" x=\"{x:.1}\" y=\"{y}\" width=\"{width:.1}\" height=\"{BAR_HEIGHT}\" fill=\"{fill}\"><title>{revision}: {percent:.1}%</title></rect>",
                revision = esc(&share.revision),
                fill = FILLS[index % FILLS.len()],
                percent = value(share),
            ));
            if width >= 44.0 {
                svg.push_str(&format!(
                    "<text x=\"{:.1}\" y=\"{}\" font-size=\"12\" fill=\"#fff\">{:.0}%</text>",
                    x + 4.0,
                    y + BAR_HEIGHT * 0.68,
                    value(share)
                ));
            }
            x += width;
        }
    }
    svg.push_str("</svg>");
    let mut legend = String::from("<ul class=\"legend\">");
    for (index, share) in shares.iter().enumerate() {
        legend.push_str(&format!(
            "<li><span style=\"color:{fill}\">■</span> <code>{revision}</code>: declared {declared:.0}%, served {observed:.1}%{requests}</li>",
            fill = FILLS[index % FILLS.len()],
            revision = esc(&share.revision),
            declared = share.declared,
            observed = share.observed,
            requests = share
                .requests
                .filter(|requests| requests.is_finite() && *requests >= 0.0)
                .map(|requests| format!(" ({requests:.0} requests)"))
                .unwrap_or_default(),
        ));
    }
    legend.push_str("</ul>");
    let caption = match (evidence.facts.get("query"), evidence.facts.get("window")) {
        (Some(query), window) => format!(
            "<figcaption>Served: Prometheus{} <code>{}</code></figcaption>",
            window
                .map(|window| format!(" over {}", esc(window)))
                .unwrap_or_default(),
            esc(query)
        ),
        (None, _) => String::new(),
    };
    format!(
        "<h2>Declared and served traffic</h2><figure class=\"chart\" id=\"traffic-split\">{svg}{legend}{caption}</figure>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(shares: &str) -> drift_model::Evidence {
        let mut evidence = drift_model::Evidence::default();
        evidence.facts.insert(SHARES_FACT.into(), shares.into());
        evidence.facts.insert(
            "query".into(),
            "sum by (revision_name) (increase(revision_request_count[10m]))".into(),
        );
        evidence.facts.insert("window".into(), "10m".into());
        evidence
    }

    #[test]
    fn a_90_10_route_serving_50_50_draws_both_splits() {
        let html = split_bars(&evidence(
            r#"[{"revision":"hello-00001","declaredPercent":90,"observedPercent":50,"requests":600},
                {"revision":"hello-00002","declaredPercent":10,"observedPercent":50,"requests":600}]"#,
        ));
        // Declared: 450 and 50 wide; served: 250 and 250, side by side from the bar's left.
        for rect in [
            "data-revision=\"hello-00001\" x=\"90.0\" y=\"10\" width=\"450.0\"",
            "data-revision=\"hello-00002\" x=\"540.0\" y=\"10\" width=\"50.0\"",
            "data-revision=\"hello-00001\" x=\"90.0\" y=\"46\" width=\"250.0\"",
            "data-revision=\"hello-00002\" x=\"340.0\" y=\"46\" width=\"250.0\"",
        ] {
            assert!(html.contains(rect), "{rect} in {html}");
        }
        assert!(
            html.contains("<code>hello-00002</code>: declared 10%, served 50.0% (600 requests)")
        );
        assert!(html.contains(
            "over 10m <code>sum by (revision_name) (increase(revision_request_count[10m]))</code>"
        ));
        assert!(!html.contains("<script"));
    }

    #[test]
    fn names_are_escaped_and_bad_facts_draw_nothing_or_within_the_bar() {
        let html = split_bars(&evidence(
            r#"[{"revision":"<b>x</b>","declaredPercent":300,"observedPercent":"lots"},
                {"revision":"y","declaredPercent":50,"observedPercent":-4}]"#,
        ));
        assert!(html.contains("&lt;b&gt;x&lt;/b&gt;") && !html.contains("<b>x</b>"));
        // 300 % is drawn as the whole bar, and nothing is left for the next Revision.
        assert!(html.contains("x=\"90.0\" y=\"10\" width=\"500.0\""));
        assert!(!html.contains("data-revision=\"y\" x=\"590.0\" y=\"10\""));
        assert_eq!(split_bars(&evidence("not json")), "");
        assert_eq!(split_bars(&evidence("{}")), "");
        assert_eq!(split_bars(&drift_model::Evidence::default()), "");
    }
}
