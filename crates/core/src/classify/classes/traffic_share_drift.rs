//! `traffic_share_drift`: the requests a Route's Revisions actually served (Prometheus' count of
//! queue-proxy's requests over `traffic.window`) are not split as the Route declares in
//! `status.traffic`: a Revision's observed share is more than `traffic.tolerancePercent` from its
//! percent, a 0 % Revision serves more than that, or a Revision with declared traffic serves
//! nothing while others serve. The API server says one thing, the data plane (KIngress, the
//! VirtualService, the activator) does another.
//!
//! Judged on the Route when an observation arrives (the engine's `TrafficBook`) and when the
//! Route changes. No verdict (an open drift stays as it is) without an observation, with fewer
//! than `traffic.minRequests` requests in the window, with no series at all (in OpenTelemetry
//! releases request metrics are off by default: no series is not "no traffic"), or while the
//! window may still hold requests of an earlier split. A Route whose declared split changed
//! after the observation resolves its drift: the old evidence is about a split no longer
//! declared, and the next whole window judges the new one.

use std::collections::BTreeMap;

use super::*;
use crate::classify::evidence::hint::{namespace_flag, shell_quote};
use crate::classify::traffic::{declared_split, RouteTraffic};

/// The class's id.
pub const ID: &str = "traffic_share_drift";

/// A Revision with declared traffic that serves nothing is a finding only when it should have
/// served at least this many requests of the window's: below it, zero is what chance gives a
/// small share (a 1 % canary of 100 requests serves none a third of the time).
const MIN_EXPECTED_FOR_NOTHING: f64 = 5.0;

/// The class.
pub(crate) struct TrafficShareDrift;

/// One Revision's side of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Share {
    pub revision: String,
    pub declared: f64,
    pub observed: f64,
    pub requests: f64,
}

/// What the comparison concluded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Nothing to conclude; an open drift stays.
    Unknown(&'static str),
    /// The split served is the one declared.
    Matches,
    /// It is not: the problems, and every Revision's shares.
    Differs(Vec<String>, Vec<Share>),
}

/// Compares a declared split (percent per Revision) with requests served per Revision.
pub(crate) fn compare(
    declared: &BTreeMap<String, f64>,
    requests: &BTreeMap<String, f64>,
    tolerance: f64,
    min_requests: u64,
) -> Verdict {
    if declared.is_empty() {
        return Verdict::Unknown("the Route declares no traffic");
    }
    if requests.is_empty() {
        return Verdict::Unknown("no request series for the Route's Revisions");
    }
    let total: f64 = requests.values().copied().filter(|n| *n > 0.0).sum();
    if total < min_requests as f64 {
        return Verdict::Unknown("fewer requests in the window than traffic.minRequests");
    }
    let mut revisions: Vec<&String> = declared.keys().chain(requests.keys()).collect();
    revisions.sort();
    revisions.dedup();
    let mut problems = Vec::new();
    let mut shares = Vec::new();
    for revision in revisions {
        let want = declared.get(revision).copied().unwrap_or(0.0);
        let served = requests.get(revision).copied().unwrap_or(0.0).max(0.0);
        let have = served / total * 100.0;
        if want > 0.0 && served == 0.0 && want / 100.0 * total >= MIN_EXPECTED_FOR_NOTHING {
            problems.push(format!(
                "{revision} declares {}% and served nothing",
                percent(want)
            ));
        } else if want == 0.0 && have > tolerance {
            problems.push(format!(
                "{revision} declares 0% and served {}%",
                percent(have)
            ));
        } else if (have - want).abs() > tolerance {
            problems.push(format!(
                "{revision} declares {}% and served {}%",
                percent(want),
                percent(have)
            ));
        }
        shares.push(Share {
            revision: revision.clone(),
            declared: want,
            observed: have,
            requests: served,
        });
    }
    if problems.is_empty() {
        Verdict::Matches
    } else {
        Verdict::Differs(problems, shares)
    }
}

/// A percent as the evidence shows it: whole, or with one decimal below 10 (a small canary).
fn percent(value: f64) -> String {
    let rounded = if value < 10.0 {
        (value * 10.0).round() / 10.0
    } else {
        value.round()
    };
    format!("{rounded}")
}

fn split_text<'a>(shares: impl Iterator<Item = (&'a str, String)>) -> String {
    shares
        .map(|(revision, value)| format!("{revision}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The evidence of a split that differs: the facts the API and the dashboard draw from
/// (`declared`, `observed`, `requests` as `revision=value` lists; `shares` as JSON), the query
/// and its window, and where to look.
fn found(
    route: &ObjectState,
    traffic: &RouteTraffic,
    problems: &[String],
    shares: &[Share],
) -> Evidence {
    let window = crate::classify::traffic::promql_duration(std::time::Duration::from_millis(
        u64::try_from(traffic.window_ms).unwrap_or(0),
    ));
    let mut found = evidence(format!(
        "{} serves a split other than the one it declares (requests over the last {window}): {}",
        route.reference(),
        problems.join("; ")
    ));
    let facts = &mut found.facts;
    facts.insert(
        "declared".into(),
        split_text(
            shares
                .iter()
                .map(|share| (share.revision.as_str(), percent(share.declared))),
        ),
    );
    facts.insert(
        "observed".into(),
        split_text(
            shares
                .iter()
                .map(|share| (share.revision.as_str(), percent(share.observed))),
        ),
    );
    facts.insert(
        "requests".into(),
        split_text(shares.iter().map(|share| {
            (
                share.revision.as_str(),
                format!("{}", share.requests.round()),
            )
        })),
    );
    let json: Vec<serde_json::Value> = shares
        .iter()
        .map(|share| {
            serde_json::json!({
                "revision": share.revision,
                "declaredPercent": share.declared,
                "observedPercent": (share.observed * 10.0).round() / 10.0,
                "requests": share.requests.round(),
            })
        })
        .collect();
    facts.insert("shares".into(), serde_json::Value::Array(json).to_string());
    facts.insert("window".into(), window);
    facts.insert("query".into(), traffic.query.to_string());
    facts.insert(
        "tolerancePercent".into(),
        percent(traffic.tolerance_percent),
    );
    let namespace = namespace_flag(&route.namespace);
    let name = shell_quote(&route.name);
    found.hint = Some(format!(
        "The Route's status is what Knative programmed; the data plane routes otherwise. Compare the weights of the VirtualService net-istio made from its KIngress: kubectl{namespace} get virtualservices.networking.istio.io -l networking.internal.knative.dev/ingress={name} -o yaml; then the KIngress: kubectl{namespace} get ingresses.networking.internal.knative.dev {name} -o yaml. A Revision that serves nothing may be held behind the activator (scaled to zero): kubectl{namespace} get podautoscalers.autoscaling.internal.knative.dev"
    ));
    found
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: ID,
    english: "Served traffic share drift",
    chinese: "实际流量份额漂移",
    severity: Severity::Warning,
};

impl DriftClass for TrafficShareDrift {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn defaults(&self) -> ClassDefaults {
        // As traffic_drift's: a split moving on purpose settles within it.
        ClassDefaults {
            enabled: true,
            grace: secs(120),
            grace_follows_default: true,
        }
    }

    fn reassessable(&self) -> bool {
        // Read off the Route and the latest observation alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let route = context.after;
        // Cheap for every other object: the book answers `None` before any lookup.
        let Some(traffic) = context.traffic else {
            return Vec::new();
        };
        if !route.is_kind(SERVING, "Route") || route.is_going_away() {
            return Vec::new();
        }
        match judge(route, traffic) {
            Judgement::SplitChanged => vec![Assessment::clear(
                route,
                "the Route's declared split changed: judged again over a whole window under the new one",
            )],
            Judgement::None => Vec::new(),
            Judgement::Verdict(Verdict::Unknown(_)) => Vec::new(),
            Judgement::Verdict(Verdict::Matches) => vec![Assessment::clear(
                route,
                "the served split is within tolerance of the declared one",
            )],
            Judgement::Verdict(Verdict::Differs(problems, shares)) => vec![Assessment::holds(
                route,
                found(route, traffic, &problems, &shares),
            )],
        }
    }
}

/// What the latest observation tells of a Route.
enum Judgement {
    /// The split declared now is not the one observed under: nothing the observation says holds.
    SplitChanged,
    /// The window may still hold requests of an earlier split.
    None,
    /// The comparison's.
    Verdict(Verdict),
}

fn judge(route: &ObjectState, traffic: &RouteTraffic) -> Judgement {
    if declared_split(route) != traffic.declared {
        return Judgement::SplitChanged;
    }
    if !traffic.window_under_split() {
        return Judgement::None;
    }
    Judgement::Verdict(compare(
        &traffic.declared.split,
        &traffic.requests,
        traffic.tolerance_percent,
        traffic.min_requests,
    ))
}

/// True when the latest observation gives the Route a verdict (its drift holds or clears):
/// the engine resolves an open drift that has had none for a while (`engine/traffic.rs`).
pub(crate) fn concludes(route: &ObjectState, traffic: &RouteTraffic) -> bool {
    !matches!(
        judge(route, traffic),
        Judgement::None | Judgement::Verdict(Verdict::Unknown(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs
            .iter()
            .map(|(revision, value)| (revision.to_string(), *value))
            .collect()
    }

    #[test]
    fn a_ninety_ten_route_serving_fifty_fifty_differs() {
        let declared = split(&[("hello-00001", 90.0), ("hello-00002", 10.0)]);
        let requests = split(&[("hello-00001", 600.0), ("hello-00002", 600.0)]);
        let Verdict::Differs(problems, shares) = compare(&declared, &requests, 15.0, 100) else {
            panic!("no finding");
        };
        assert_eq!(
            problems,
            [
                "hello-00001 declares 90% and served 50%",
                "hello-00002 declares 10% and served 50%"
            ]
        );
        assert_eq!(shares[0].observed, 50.0);
        assert_eq!(shares[1].declared, 10.0);
        assert_eq!(shares[1].requests, 600.0);
    }

    #[test]
    fn within_tolerance_matches_and_its_edge_is_inclusive() {
        let declared = split(&[("a", 90.0), ("b", 10.0)]);
        assert_eq!(
            compare(&declared, &split(&[("a", 800.0), ("b", 200.0)]), 15.0, 100),
            Verdict::Matches
        );
        // 75/25 is exactly 15 points off: not more than the tolerance.
        assert_eq!(
            compare(&declared, &split(&[("a", 750.0), ("b", 250.0)]), 15.0, 100),
            Verdict::Matches
        );
        assert!(matches!(
            compare(&declared, &split(&[("a", 740.0), ("b", 260.0)]), 15.0, 100),
            Verdict::Differs(..)
        ));
    }

    #[test]
    fn too_few_requests_or_no_series_give_no_verdict() {
        let declared = split(&[("a", 90.0), ("b", 10.0)]);
        assert!(matches!(
            compare(&declared, &split(&[("a", 49.0), ("b", 50.0)]), 15.0, 100),
            Verdict::Unknown(_)
        ));
        assert!(matches!(
            compare(&declared, &BTreeMap::new(), 15.0, 100),
            Verdict::Unknown(_)
        ));
        // Series that count nothing are no traffic to judge.
        assert!(matches!(
            compare(&declared, &split(&[("a", 0.0), ("b", 0.0)]), 15.0, 1),
            Verdict::Unknown(_)
        ));
        assert!(matches!(
            compare(&BTreeMap::new(), &split(&[("a", 500.0)]), 15.0, 100),
            Verdict::Unknown(_)
        ));
    }

    #[test]
    fn a_zero_percent_revision_serving_more_than_the_tolerance_differs() {
        // A tagged 0 % target, and a Revision the status does not name at all.
        let declared = split(&[("a", 100.0), ("tagged", 0.0)]);
        let Verdict::Differs(problems, _) = compare(
            &declared,
            &split(&[("a", 700.0), ("tagged", 300.0)]),
            15.0,
            100,
        ) else {
            panic!("no finding");
        };
        assert_eq!(
            problems,
            [
                "a declares 100% and served 70%",
                "tagged declares 0% and served 30%"
            ]
        );
        let Verdict::Differs(problems, _) = compare(
            &split(&[("a", 100.0)]),
            &split(&[("a", 800.0), ("old", 200.0)]),
            15.0,
            100,
        ) else {
            panic!("no finding");
        };
        assert_eq!(
            problems,
            [
                "a declares 100% and served 80%",
                "old declares 0% and served 20%"
            ]
        );
        // Within the tolerance, a 0 % Revision's few requests (a tag's own URL) are fine.
        assert_eq!(
            compare(
                &declared,
                &split(&[("a", 900.0), ("tagged", 100.0)]),
                15.0,
                100
            ),
            Verdict::Matches
        );
    }

    #[test]
    fn a_declared_revision_serving_nothing_differs_when_it_should_have_served() {
        // 10 % within a 15-point tolerance, but none of its expected 100 requests.
        let declared = split(&[("a", 90.0), ("b", 10.0)]);
        let Verdict::Differs(problems, _) =
            compare(&declared, &split(&[("a", 1000.0), ("b", 0.0)]), 15.0, 100)
        else {
            panic!("no finding");
        };
        assert_eq!(problems, ["b declares 10% and served nothing"]);
        // Absent series count as nothing served too.
        assert!(matches!(
            compare(&declared, &split(&[("a", 1000.0)]), 15.0, 100),
            Verdict::Differs(..)
        ));
        // A 1 % canary of 200 requests (2 expected) serving none is chance, not a finding.
        assert_eq!(
            compare(
                &split(&[("a", 99.0), ("b", 1.0)]),
                &split(&[("a", 200.0)]),
                15.0,
                100
            ),
            Verdict::Matches
        );
    }

    #[test]
    fn percents_show_whole_or_with_one_decimal_when_small() {
        assert_eq!(percent(50.0), "50");
        assert_eq!(percent(33.333), "33");
        assert_eq!(percent(2.46), "2.5");
        assert_eq!(percent(0.0), "0");
    }
}
