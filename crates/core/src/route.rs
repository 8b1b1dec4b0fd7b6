//! Route: drift transitions + the `routes:` config → notifications to queue. Pure: no I/O, no
//! clock (time comes in).
//!
//! Routes are evaluated in order; the first match wins unless it says `continue`. Without any
//! route, every drift of severity warning or critical goes to every channel (an `info` drift, such
//! as an ordinary label edited by hand, is recorded but sent only by a route that matches it:
//! zero noise by default). A notification is queued for a transition people
//! should hear about (a drift fired, or a firing drift resolved, if the route sends resolves);
//! silenced drifts queue nothing. Each notification carries its route's group key (drifts of one
//! group due together go out as one digest), its `groupWait` (the earliest send time) and its
//! `repeatInterval` (reminders while the drift keeps firing). Alertmanager channels always get
//! resolves (an alert without a resolve stays firing in Alertmanager until it times out) and
//! expand to one notification per Alertmanager instance, so one instance being down never blocks
//! the others.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::classify::Rules;
use crate::config::{ChannelConfig, ChannelKind, RouteConfig};
use drift_model::{glob_match, Notice, NoticeKind, Silence};
use drift_model::{Drift, DriftState, Millis, Severity, Transition};

/// A notification to queue for one channel endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    /// The channel endpoint (`name`, or `name#index` for multi-endpoint channels).
    pub channel: String,
    /// Drifts with the same key, due together, are sent as one message.
    pub group_key: String,
    /// Earliest send time (transition time + `groupWait`).
    pub not_before: Millis,
    /// Reminder interval while firing (`None`: no reminders).
    pub repeat_after: Option<Duration>,
    /// What to send.
    pub notice: Notice,
}

/// The silences created through the API, by id. With the configured ones (`rules.silences`),
/// [`Silences::mutes`] is the one place that decides whether a drift is silenced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Silences {
    created: Vec<(String, Silence)>,
}

impl Silences {
    /// The silences created through the API.
    pub fn new(created: impl IntoIterator<Item = (String, Silence)>) -> Silences {
        Silences {
            created: created.into_iter().collect(),
        }
    }

    /// Adds a silence created through the API.
    pub fn add(&mut self, id: String, silence: Silence) {
        self.created.push((id, silence));
    }

    /// Removes a silence created through the API; false when there was none with this id.
    pub fn remove(&mut self, id: &str) -> bool {
        let before = self.created.len();
        self.created.retain(|(known, _)| known != id);
        self.created.len() != before
    }

    /// True when a silence with this id was created through the API.
    pub fn contains(&self, id: &str) -> bool {
        self.created.iter().any(|(known, _)| known == id)
    }

    /// True when a configured silence or one created through the API mutes `drift` at `now`.
    pub fn mutes(&self, rules: &Rules, drift: &Drift, now: Millis) -> bool {
        rules
            .silences()
            .iter()
            .chain(self.created.iter().map(|(_, silence)| silence))
            .any(|silence| silence.matches(drift, now))
    }
}

/// Compiled routes and the channel endpoints they address.
#[derive(Debug, Clone)]
pub struct Router {
    routes: Vec<RouteConfig>,
    endpoints: BTreeMap<String, Vec<String>>,
    always_resolve: BTreeMap<String, bool>,
    default_route: RouteConfig,
}

impl Router {
    /// Compiles routes against the configured channels.
    pub fn new(routes: &[RouteConfig], channels: &[ChannelConfig]) -> Router {
        let mut endpoints = BTreeMap::new();
        let mut always_resolve = BTreeMap::new();
        for channel in channels {
            let names = match &channel.kind {
                ChannelKind::Alertmanager { urls, .. } if urls.len() > 1 => (0..urls.len())
                    .map(|index| format!("{}#{index}", channel.name))
                    .collect(),
                _ => vec![channel.name.clone()],
            };
            endpoints.insert(channel.name.clone(), names);
            always_resolve.insert(
                channel.name.clone(),
                matches!(channel.kind, ChannelKind::Alertmanager { .. }),
            );
        }
        let default_route = RouteConfig {
            matcher: Default::default(),
            channels: channels
                .iter()
                .map(|channel| channel.name.clone())
                .collect(),
            continue_matching: false,
            group_wait: Duration::from_secs(10),
            group_by: vec!["cluster".into(), "namespace".into(), "class".into()],
            repeat_interval: Duration::from_secs(4 * 3600),
            send_resolved: true,
        };
        Router {
            routes: routes.to_vec(),
            endpoints,
            always_resolve,
            default_route,
        }
    }

    /// Notifications for one transition at `now`.
    pub fn route(
        &self,
        transition: &Transition,
        rules: &Rules,
        silences: &Silences,
        now: Millis,
    ) -> Vec<Queued> {
        if !transition.is_notifiable() {
            return Vec::new();
        }
        let drift = &transition.drift;
        if silences.mutes(rules, drift, now) {
            return Vec::new();
        }
        let kind = match drift.state {
            DriftState::Firing => NoticeKind::Firing,
            _ => NoticeKind::Resolved,
        };
        let mut matched: Vec<&RouteConfig> = Vec::new();
        if self.routes.is_empty() {
            if drift.severity > Severity::Info {
                matched.push(&self.default_route);
            }
        } else {
            for route in &self.routes {
                if route_matches(route, drift) {
                    matched.push(route);
                    if !route.continue_matching {
                        break;
                    }
                }
            }
        }
        // drift-sentinel's own event path broken: every channel hears it, whatever the routes
        // say (nothing else will be reported until it is repaired).
        if drift.class == crate::classify::classes::PIPELINE_BROKEN
            && !matched
                .iter()
                .any(|route| std::ptr::eq(*route, &self.default_route))
        {
            matched.push(&self.default_route);
        }
        let mut queued = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for route in matched {
            for channel in &route.channels {
                let resolve_ok = route.send_resolved
                    || self.always_resolve.get(channel).copied().unwrap_or(false);
                if kind == NoticeKind::Resolved && !resolve_ok {
                    continue;
                }
                for endpoint in self.endpoints.get(channel).cloned().unwrap_or_default() {
                    // A drift reaches an endpoint once, even when several routes name it.
                    if !seen.insert(endpoint.clone()) {
                        continue;
                    }
                    let wait = i64::try_from(route.group_wait.as_millis()).unwrap_or(i64::MAX);
                    queued.push(Queued {
                        channel: endpoint,
                        group_key: group_key(route, drift, kind),
                        not_before: transition.at.saturating_add(wait),
                        repeat_after: (!route.repeat_interval.is_zero())
                            .then_some(route.repeat_interval),
                        notice: Notice {
                            kind,
                            drift: drift.clone(),
                            at: transition.at,
                            resend: 0,
                        },
                    });
                }
            }
        }
        queued
    }
}

fn route_matches(route: &RouteConfig, drift: &Drift) -> bool {
    let matcher = &route.matcher;
    if !matcher.class.is_empty() && !matcher.class.contains(&drift.class) {
        return false;
    }
    if let Some(minimum) = matcher.severity.as_deref().and_then(Severity::parse) {
        if drift.severity < minimum {
            return false;
        }
    }
    let globs = |patterns: &[String], value: &str| {
        patterns.is_empty() || patterns.iter().any(|p| glob_match(p, value))
    };
    if !globs(&matcher.cluster, &drift.cluster) || !globs(&matcher.namespace, &drift.namespace) {
        return false;
    }
    if !matcher.rule.is_empty()
        && !drift
            .rule
            .as_deref()
            .is_some_and(|rule| matcher.rule.iter().any(|pattern| glob_match(pattern, rule)))
    {
        return false;
    }
    if !matcher.kind.is_empty() && !matcher.kind.contains(&drift.kind) {
        return false;
    }
    matcher
        .labels
        .iter()
        .all(|(key, value)| drift.labels.get(key) == Some(value))
}

fn group_key(route: &RouteConfig, drift: &Drift, kind: NoticeKind) -> String {
    let mut parts = vec![kind.as_str().to_string()];
    for field in &route.group_by {
        let value = match field.as_str() {
            "cluster" => drift.cluster.clone(),
            "namespace" => drift.namespace.clone(),
            "class" => drift.class.clone(),
            "rule" => drift.rule.clone().unwrap_or_default(),
            "severity" => drift.severity.as_str().to_string(),
            "kind" => drift.kind.clone(),
            "name" => drift.name.clone(),
            "service" => drift.owner.service.clone().unwrap_or_default(),
            _ => String::new(),
        };
        parts.push(format!("{field}={value}"));
    }
    parts.join(",")
}

/// A stable notification id: the same transition routed to the same endpoint always gets the
/// same id, which channels use as their idempotency key (DingTalk `msgUuid`, `webhook-id`).
pub fn notification_id(drift_id: &str, channel: &str, kind: &str, at: Millis) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in [drift_id, channel, kind] {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    hasher.update(at.to_be_bytes());
    let digest = hasher.finalize();
    let hex: String = digest[..10]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("ntf_{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_model::{Evidence, OwnerChain};

    fn drift(class: &str, severity: Severity, namespace: &str) -> Drift {
        Drift {
            id: format!("{class}-{namespace}"),
            class: class.into(),
            rule: None,
            severity,
            state: DriftState::Firing,
            cluster: "prod".into(),
            uid: "u".into(),
            api_version: "serving.knative.dev/v1".into(),
            kind: "Service".into(),
            namespace: namespace.into(),
            name: "web".into(),
            labels: [("team".to_string(), "payments".to_string())]
                .into_iter()
                .collect(),
            owner: OwnerChain::default(),
            evidence: Evidence::default(),
            since: 0,
            fire_at: 0,
            fired_at: Some(0),
            resolved_at: None,
            resolution: None,
        }
    }

    fn transition(drift: Drift, from: DriftState) -> Transition {
        Transition {
            drift,
            from: Some(from),
            at: 1_000,
        }
    }

    fn config(yaml: &str) -> crate::config::Config {
        crate::config::load_str(yaml, &|_| None).unwrap()
    }

    #[test]
    fn a_broken_own_event_path_reaches_every_channel_whatever_the_routes_say() {
        let config = config(concat!(
            "channels:\n  - {name: pager, type: log}\n  - {name: chat, type: log}\n",
            "routes:\n  - {match: {namespace: ['pay*']}, channels: [pager]}\n",
        ));
        let router = Router::new(&config.routes, &config.channels);
        let rules = Rules::default();
        let broken = router.route(
            &transition(
                drift(
                    crate::classify::classes::PIPELINE_BROKEN,
                    Severity::Critical,
                    "drift-sentinel",
                ),
                DriftState::Pending,
            ),
            &rules,
            &Silences::default(),
            1_000,
        );
        let names: Vec<&str> = broken.iter().map(|q| q.channel.as_str()).collect();
        assert_eq!(names, ["pager", "chat"]);
        // Any other class in that namespace matches no route and goes nowhere.
        let other = router.route(
            &transition(
                drift("not_ready", Severity::Critical, "drift-sentinel"),
                DriftState::Pending,
            ),
            &rules,
            &Silences::default(),
            1_000,
        );
        assert!(other.is_empty());
    }

    #[test]
    fn first_matching_route_wins_unless_continue() {
        let config = config(
            concat!(
                "channels:\n  - {name: pager, type: log}\n  - {name: chat, type: log}\n  - {name: audit, type: log}\n",
                "routes:\n  - {match: {severity: critical}, channels: [pager], continue: true, groupWait: 0s}\n",
                "  - {match: {namespace: ['pay*'], labels: {team: payments}}, channels: [chat]}\n",
                "  - {channels: [audit]}\n",
            ),
        );
        let router = Router::new(&config.routes, &config.channels);
        let rules = Rules::default();
        let critical = router.route(
            &transition(
                drift("traffic_drift", Severity::Critical, "payments"),
                DriftState::Pending,
            ),
            &rules,
            &Silences::default(),
            1_000,
        );
        let names: Vec<&str> = critical.iter().map(|q| q.channel.as_str()).collect();
        assert_eq!(names, ["pager", "chat"]);
        assert_eq!(critical[0].not_before, 1_000);
        assert_eq!(critical[1].not_before, 11_000, "default groupWait 10s");
        let warning = router.route(
            &transition(
                drift("manual_edit", Severity::Warning, "other"),
                DriftState::Pending,
            ),
            &rules,
            &Silences::default(),
            1_000,
        );
        assert_eq!(
            warning
                .iter()
                .map(|q| q.channel.as_str())
                .collect::<Vec<_>>(),
            ["audit"]
        );
    }

    #[test]
    fn resolves_follow_send_resolved_except_for_alertmanager() {
        let config = config(
            concat!(
                "channels:\n  - {name: chat, type: log}\n  - {name: am, type: alertmanager, urls: ['http://a:9093', 'http://b:9093']}\n",
                "routes:\n  - {channels: [chat, am], sendResolved: false}\n",
            ),
        );
        let router = Router::new(&config.routes, &config.channels);
        let mut resolved = drift("not_ready", Severity::Critical, "ns");
        resolved.state = DriftState::Resolved;
        let queued = router.route(
            &transition(resolved, DriftState::Firing),
            &Rules::default(),
            &Silences::default(),
            5_000,
        );
        let names: Vec<&str> = queued.iter().map(|q| q.channel.as_str()).collect();
        assert_eq!(names, ["am#0", "am#1"]);
        assert_eq!(queued[0].notice.kind, NoticeKind::Resolved);
    }

    #[test]
    fn silenced_and_pending_transitions_queue_nothing() {
        let config = config("channels:\n  - {name: chat, type: log}\nrules:\n  silences:\n    - matchers: {namespace: 'sandbox-*'}\n");
        let router = Router::new(&config.routes, &config.channels);
        let rules = config.rules.compile();
        assert!(router
            .route(
                &transition(
                    drift("not_ready", Severity::Critical, "sandbox-1"),
                    DriftState::Pending
                ),
                &rules,
                &Silences::default(),
                0
            )
            .is_empty());
        let mut pending = transition(
            drift("not_ready", Severity::Critical, "prod"),
            DriftState::Pending,
        );
        pending.drift.state = DriftState::Pending;
        pending.from = None;
        assert!(router
            .route(&pending, &rules, &Silences::default(), 0)
            .is_empty());
        assert_eq!(
            router
                .route(
                    &transition(
                        drift("not_ready", Severity::Critical, "prod"),
                        DriftState::Pending
                    ),
                    &rules,
                    &Silences::default(),
                    0
                )
                .len(),
            1
        );
    }
}
