//! The dashboard's overview, at the top of `/ui`: the drifts firing now as coloured tiles by
//! severity, bars by API group family and by namespace (the busiest few), and a chart of the
//! drifts that fired and resolved per day over the last [`DAYS`] days. Pure: the route reads the
//! counts from the store ([`drift_store::AuditRead::firing_counts`] and
//! [`drift_store::AuditRead::moves_per_day`], which count in the store and read no drift's
//! body) and passes them in with the time from the injected clock. The overview counts every
//! firing drift, whatever the list's filters; a namespace's count sums it over the clusters.
//!
//! Everything is HTML and an inline SVG: no script, no image or font from anywhere, so the
//! dashboard's Content-Security-Policy (`default-src 'none'; style-src 'unsafe-inline'`) holds.
//! The chart is an image to assistive technology (`role="img"`) named by its `<title>` and
//! described, every number included, by its `<desc>`; each bar carries its own `<title>` and
//! its number as text. Namespaces come from the cluster: every one is escaped.

use std::collections::BTreeMap;

use super::report::{escape_html as esc, url_component};
use drift_model::time::format_time;
use drift_model::{group, Millis, Severity};
use drift_store::{DayMoves, FiringCount, DAY_MILLIS};

/// Days the chart shows, today (UTC) the last of them.
pub(crate) const DAYS: usize = 14;

/// Namespaces shown by name; the rest are summed up in one line.
pub(crate) const TOP_NAMESPACES: usize = 8;

/// The start of the chart's first day: midnight UTC, [`DAYS`] − 1 days before today's.
pub(crate) fn window_start(now: Millis) -> Millis {
    now.div_euclid(DAY_MILLIS) * DAY_MILLIS - DAY_MILLIS * (DAYS as i64 - 1)
}

/// What the overview shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    /// Firing drifts in all.
    pub firing: u64,
    /// Firing drifts per severity, most severe first (every severity, zeros included).
    pub by_severity: Vec<(Severity, u64)>,
    /// Firing drifts per family: (filter id, name, count), every family in its order, then
    /// `Other` (id `None`: it cannot be filtered on) when some drift is of no family.
    pub by_family: Vec<(Option<&'static str>, &'static str, u64)>,
    /// The namespaces with the most firing drifts (most first, then by name).
    pub top_namespaces: Vec<(String, u64)>,
    /// The other namespaces: how many, and their firing drifts.
    pub other_namespaces: (usize, u64),
    /// Fired and resolved per day, oldest first.
    pub days: Vec<DayMoves>,
}

/// Sums the store's counts into the overview.
pub fn build(counts: &[FiringCount], days: Vec<DayMoves>) -> Overview {
    let mut by_severity: BTreeMap<Severity, u64> = BTreeMap::new();
    let mut by_family: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut other_family = 0;
    let mut by_namespace: BTreeMap<&str, u64> = BTreeMap::new();
    let mut firing = 0;
    for count in counts {
        firing += count.count;
        if let Some(severity) = Severity::parse(&count.severity) {
            *by_severity.entry(severity).or_insert(0) += count.count;
        }
        match group::family_of(&count.group) {
            Some(family) => *by_family.entry(family.id).or_insert(0) += count.count,
            None => other_family += count.count,
        }
        *by_namespace.entry(&count.namespace).or_insert(0) += count.count;
    }
    let mut families: Vec<(Option<&'static str>, &'static str, u64)> = group::FAMILIES
        .iter()
        .map(|family| {
            (
                Some(family.id),
                family.name,
                by_family.get(family.id).copied().unwrap_or(0),
            )
        })
        .collect();
    if other_family > 0 {
        families.push((None, group::OTHER_FAMILY, other_family));
    }
    let mut namespaces: Vec<(String, u64)> = by_namespace
        .into_iter()
        .map(|(namespace, count)| (namespace.to_string(), count))
        .collect();
    namespaces.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let rest = namespaces.split_off(namespaces.len().min(TOP_NAMESPACES));
    Overview {
        firing,
        by_severity: Severity::ALL
            .iter()
            .rev()
            .map(|severity| (*severity, by_severity.get(severity).copied().unwrap_or(0)))
            .collect(),
        by_family: families,
        top_namespaces: namespaces,
        other_namespaces: (rest.len(), rest.iter().map(|(_, count)| count).sum()),
        days,
    }
}

/// The overview as an HTML section (its styles are the dashboard's; see `ui::document`).
pub fn html(overview: &Overview) -> String {
    let mut out = format!(
        "<section id=\"overview\" aria-labelledby=\"overview-title\"><h1 id=\"overview-title\">Overview</h1>\
<p class=\"muted\">{} drift(s) firing now, in every cluster (the filters below apply to the list only).</p><div class=\"tiles\">",
        overview.firing
    );
    for (severity, count) in &overview.by_severity {
        let name = severity.as_str();
        out.push_str(&format!(
            "<a class=\"tile tile-{name}{zero}\" id=\"tile-{name}\" href=\"/ui?state=firing&amp;severity={name}\">\
<span class=\"n\">{count}</span> {name}</a>",
            zero = if *count == 0 { " zero" } else { "" },
        ));
    }
    out.push_str("</div><div class=\"panels\"><div class=\"panel\"><h2>By API group</h2><table class=\"bars\" id=\"by-group\">");
    let family_max = overview
        .by_family
        .iter()
        .map(|(_, _, count)| *count)
        .max()
        .unwrap_or(0);
    for (id, name, count) in &overview.by_family {
        let label = match id {
            Some(id) => format!(
                "<a href=\"/ui?state=firing&amp;group={}\">{}</a>",
                esc(id),
                esc(name)
            ),
            None => esc(name),
        };
        out.push_str(&bar_row(&label, *count, family_max));
    }
    out.push_str("</table></div><div class=\"panel\"><h2>By namespace</h2><table class=\"bars\" id=\"by-namespace\">");
    let namespace_max = overview
        .top_namespaces
        .first()
        .map(|(_, count)| *count)
        .unwrap_or(0);
    if overview.top_namespaces.is_empty() {
        out.push_str("<tr><td class=\"muted\">Nothing is firing.</td></tr>");
    }
    for (namespace, count) in &overview.top_namespaces {
        let label = if namespace.is_empty() {
            "<span class=\"muted\">(cluster-scoped)</span>".to_string()
        } else {
            format!(
                "<a href=\"/ui?state=firing&amp;namespace={}\">{}</a>",
                esc(&url_component(namespace)),
                esc(namespace)
            )
        };
        out.push_str(&bar_row(&label, *count, namespace_max));
    }
    let (others, other_count) = overview.other_namespaces;
    if others > 0 {
        out.push_str(&format!(
            "<tr><td colspan=\"3\" class=\"muted\">and {others} more namespace(s) with {other_count} firing drift(s)</td></tr>"
        ));
    }
    out.push_str(&format!(
        "</table></div><div class=\"panel chart\"><h2>Fired and resolved per day</h2>{}</div></div></section>",
        chart_svg(&overview.days)
    ));
    out
}

/// One row of a bar table: label (HTML), count, and a bar as long as its share of `max` (at
/// least 1 % when the count is not zero, none when it is).
fn bar_row(label: &str, count: u64, max: u64) -> String {
    // A count that is not zero always shows, however small its share.
    let percent = (count * 100)
        .checked_div(max)
        .unwrap_or(0)
        .max(u64::from(count > 0));
    format!(
        "<tr><th scope=\"row\">{label}</th><td class=\"n\">{count}</td>\
<td class=\"barcell\"><span class=\"bar\" style=\"width:{percent}%\"></span></td></tr>"
    )
}

/// A day as `YYYY-MM-DD` (UTC).
fn day_text(start: Millis) -> String {
    format_time(start).chars().take(10).collect()
}

/// Chart geometry, in the SVG's own units.
const WIDTH: u64 = 640;
const HEIGHT: u64 = 240;
const LEFT: u64 = 40;
const RIGHT: u64 = 10;
const TOP: u64 = 34;
const BOTTOM: u64 = 30;
const FIRED_COLOUR: &str = "#c62828";
const RESOLVED_COLOUR: &str = "#2e7d32";

/// The fired/resolved chart: an inline SVG, one pair of bars per day, each bar with its number
/// above it and a `<title>`, dates below, a legend with the totals, and a `<desc>` that says
/// every number in words.
pub(crate) fn chart_svg(days: &[DayMoves]) -> String {
    let fired_total: u64 = days.iter().map(|day| day.fired).sum();
    let resolved_total: u64 = days.iter().map(|day| day.resolved).sum();
    let max = days
        .iter()
        .map(|day| day.fired.max(day.resolved))
        .max()
        .unwrap_or(0)
        .max(1);
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let baseline = TOP + plot_height;
    let slot = plot_width as f64 / days.len().max(1) as f64;
    let bar_width = (slot * 0.36).floor().max(2.0);
    let (first, last) = (
        days.first()
            .map(|day| day_text(day.start))
            .unwrap_or_default(),
        days.last()
            .map(|day| day_text(day.start))
            .unwrap_or_default(),
    );
    let in_words = |pick: fn(&DayMoves) -> u64| {
        days.iter()
            .map(|day| pick(day).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"moves-chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
role=\"img\" aria-labelledby=\"moves-title moves-desc\" font-family=\"system-ui, sans-serif\" font-size=\"13\">\
<title id=\"moves-title\">Drifts fired and resolved per day, last {} days (UTC)</title>\
<desc id=\"moves-desc\">From {first} to {last}: {fired_total} fired and {resolved_total} resolved. \
Fired per day, oldest first: {}. Resolved per day: {}.</desc>",
        days.len(),
        in_words(|day| day.fired),
        in_words(|day| day.resolved),
    );
    // Legend, with the totals.
    svg.push_str(&format!(
        "<g class=\"legend\"><rect x=\"{LEFT}\" y=\"8\" width=\"12\" height=\"12\" fill=\"{FIRED_COLOUR}\"/>\
<text x=\"{}\" y=\"18\">fired ({fired_total})</text>\
<rect x=\"{}\" y=\"8\" width=\"12\" height=\"12\" fill=\"{RESOLVED_COLOUR}\"/>\
<text x=\"{}\" y=\"18\">resolved ({resolved_total})</text></g>",
        LEFT + 16,
        LEFT + 110,
        LEFT + 126,
    ));
    // Grid lines at zero, half and the largest count.
    let mut ticks = vec![0, max];
    if max >= 4 {
        ticks.insert(1, max / 2);
    }
    for tick in ticks {
        let y = baseline as f64 - plot_height as f64 * tick as f64 / max as f64;
        svg.push_str(&format!(
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#d5d9de\" stroke-width=\"1\"/>\
<text class=\"tick\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#69727d\">{tick}</text>",
            WIDTH - RIGHT,
            LEFT - 6,
            y + 4.0,
        ));
    }
    for (index, day) in days.iter().enumerate() {
        let date = day_text(day.start);
        let centre = LEFT as f64 + slot * (index as f64 + 0.5);
        svg.push_str(&format!("<g class=\"day\" data-day=\"{date}\">"));
        for (class, count, colour, x) in [
            ("fired", day.fired, FIRED_COLOUR, centre - bar_width - 1.0),
            ("resolved", day.resolved, RESOLVED_COLOUR, centre + 1.0),
        ] {
            let height = plot_height as f64 * count as f64 / max as f64;
            let y = baseline as f64 - height;
            svg.push_str(&format!(
                "<rect class=\"{class}\" data-count=\"{count}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar_width:.0}\" \
height=\"{height:.1}\" fill=\"{colour}\"><title>{date}: {count} {class}</title></rect>"
            ));
            if count > 0 {
                svg.push_str(&format!(
                    "<text class=\"count {class}\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"600\">{count}</text>",
                    x + bar_width / 2.0,
                    y - 3.0,
                ));
            }
        }
        // Month and day under the pair.
        svg.push_str(&format!(
            "<text class=\"date\" x=\"{centre:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#69727d\">{}</text></g>",
            baseline + 16,
            date.get(5..).unwrap_or(&date),
        ));
    }
    svg.push_str(&format!(
        "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{baseline}\" y2=\"{baseline}\" stroke=\"#69727d\" stroke-width=\"1\"/></svg>",
        WIDTH - RIGHT
    ));
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(severity: &str, group: &str, namespace: &str, count: u64) -> FiringCount {
        FiringCount {
            severity: severity.into(),
            group: group.into(),
            namespace: namespace.into(),
            count,
        }
    }

    #[test]
    fn the_window_ends_today_at_midnight_utc() {
        // 2026-11-29T10:00:05Z.
        let now = 1_795_946_405_000;
        let start = window_start(now);
        assert_eq!(format_time(start), "2026-11-16T00:00:00.000Z");
        assert_eq!(
            format_time(start + DAY_MILLIS * (DAYS as i64 - 1)),
            "2026-11-29T00:00:00.000Z"
        );
    }

    #[test]
    fn counts_sum_by_severity_family_and_namespace() {
        let counts = [
            count("critical", "eventing.knative.dev", "payments", 2),
            count("critical", "messaging.knative.dev", "payments", 1),
            count("warning", "serving.knative.dev", "shop", 3),
            count("warning", "", "knative-serving", 1),
            count("info", "batch", "jobs", 1),
            count("warning", "operator.knative.dev", "", 1),
        ];
        let overview = build(&counts, Vec::new());
        assert_eq!(overview.firing, 9);
        assert_eq!(
            overview.by_severity,
            [
                (Severity::Critical, 3),
                (Severity::Warning, 5),
                (Severity::Info, 1)
            ]
        );
        assert_eq!(
            overview.by_family,
            [
                (Some("serving"), "Serving", 3),
                (Some("eventing"), "Eventing", 3),
                (Some("networking"), "Networking", 0),
                (Some("operator"), "Operator", 1),
                (Some("kubernetes"), "Kubernetes", 1),
                (None, "Other", 1),
            ]
        );
        assert_eq!(
            overview.top_namespaces,
            [
                ("payments".to_string(), 3),
                ("shop".to_string(), 3),
                ("".to_string(), 1),
                ("jobs".to_string(), 1),
                ("knative-serving".to_string(), 1),
            ]
        );
        let page = html(&overview);
        assert!(page.contains("id=\"tile-critical\" href=\"/ui?state=firing&amp;severity=critical\"><span class=\"n\">3</span> critical</a>"), "{page}");
        assert!(page.contains("<a href=\"/ui?state=firing&amp;group=eventing\">Eventing</a></th><td class=\"n\">3</td>"), "{page}");
        assert!(page.contains("(cluster-scoped)"));
    }

    #[test]
    fn namespaces_past_the_top_are_summed_and_every_name_is_escaped() {
        let hostile = "<script>alert(1)</script>";
        let mut counts: Vec<FiringCount> = (0..12)
            .map(|index| count("warning", "", &format!("team-{index:02}"), 1))
            .collect();
        counts.push(count("critical", "", hostile, 5));
        let overview = build(&counts, Vec::new());
        assert_eq!(overview.top_namespaces.len(), TOP_NAMESPACES);
        assert_eq!(overview.top_namespaces[0], (hostile.to_string(), 5));
        assert_eq!(overview.other_namespaces, (5, 5));
        let page = html(&overview);
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("namespace=%3Cscript%3Ealert%281%29%3C%2Fscript%3E\""));
        assert!(page.contains("and 5 more namespace(s) with 5 firing drift(s)"));
    }

    #[test]
    fn the_chart_says_every_number_as_text() {
        let start = window_start(1_795_946_405_000);
        let days = drift_store::audit::dense_days(start, DAYS, [(0, 2, 0), (3, 5, 1), (13, 0, 4)]);
        let svg = chart_svg(&days);
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"));
        assert!(svg.contains("<title id=\"moves-title\">Drifts fired and resolved per day, last 14 days (UTC)</title>"));
        assert!(
            svg.contains("From 2026-11-16 to 2026-11-29: 7 fired and 5 resolved."),
            "{svg}"
        );
        assert!(
            svg.contains("Fired per day, oldest first: 2, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.")
        );
        assert!(svg.contains("fired (7)") && svg.contains("resolved (5)"));
        assert_eq!(svg.matches("<rect class=\"fired\"").count(), DAYS);
        assert_eq!(svg.matches("<rect class=\"resolved\"").count(), DAYS);
        // The bars' numbers, as text above them, are the data's.
        let labels: Vec<&str> = svg
            .split("<text class=\"count ")
            .skip(1)
            .map(|rest| {
                let text = rest.split('>').nth(1).unwrap_or("");
                text.split('<').next().unwrap_or("")
            })
            .collect();
        assert_eq!(labels, ["2", "5", "1", "4"]);
        assert!(svg.contains("<title>2026-11-19: 5 fired</title>"));
        assert!(svg.contains("data-day=\"2026-11-29\""));
        assert!(svg.contains(">11-29</text>"));
        // The tallest bar fills the plot; a zero is flat.
        assert!(svg.contains("data-count=\"5\" x=\"") && svg.contains("height=\"176.0\""));
        assert!(svg.contains("data-count=\"0\""));
        assert!(!svg.contains("<script") && !svg.contains("href"));
    }
}
