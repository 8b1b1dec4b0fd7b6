//! Route: drift transitions + the `routes:` config → notifications to queue. Pure: no I/O, no
//! clock (time comes in).
//!
//! Routes are evaluated in order; the first match wins unless it says `continue`. Without any
//! route, every drift of severity warning or critical goes to every channel (an `info` drift, such
//! as an ordinary label edited by hand, is recorded but sent only by a route that matches it:
//! zero noise by default). A notification is queued for a transition people
//! should hear about (a drift fired, or a firing drift resolved, if the route sends resolves);
//! silenced drifts queue nothing. Each notification carries its route's group key (drifts of one
//! group due together go out as one digest), its `groupWait` (its own send time, which the
//! writer's [`Pacer`] moves to its group's message, as `groupInterval` spaces them) and its
//! `repeatInterval` (reminders while the drift keeps firing). Alertmanager channels always get
//! resolves (an alert without a resolve stays firing in Alertmanager until it times out) and
//! expand to one notification per Alertmanager instance, so one instance being down never blocks
//! the others.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::classify::Rules;
use drift_model::remediation::Attempt;
use drift_model::{glob_match, Notice, NoticeKind, Silence};
use drift_model::{Drift, DriftState, Millis, Severity, Transition};

mod pace;
pub use pace::Pacer;

/// A route's `groupInterval` when it names none: a group's notifications after one of its
/// messages wait up to a minute and go out together (Alertmanager's default is 5 min; a drift
/// is rarer and more pressing than a metric alert, as the 10 s `groupWait` already says).
pub const DEFAULT_GROUP_INTERVAL: Duration = Duration::from_secs(60);

/// A notification to queue for one channel endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    /// The channel endpoint (`name`, or `name#index` for multi-endpoint channels).
    pub channel: String,
    /// Drifts with the same key, due together, are sent as one message.
    pub group_key: String,
    /// Its own send time (transition time + `groupWait`); the writer's [`Pacer`] moves it to
    /// its group's message, earlier when it joins one that is waiting.
    pub not_before: Millis,
    /// The route that queued it (its index; the route of no routes is last): routes that share
    /// an endpoint are paced apart.
    pub route: usize,
    /// How long the group's notifications wait after one of its messages (`groupInterval`;
    /// zero for a channel of alert state, which groups alerts itself).
    pub group_interval: Duration,
    /// Reminder interval while firing (`None`: no reminders).
    pub repeat_after: Option<Duration>,
    /// What to send.
    pub notice: Notice,
}

/// The silences created through the API, by id. With the configured ones (`rules.silences`),
/// [`Silences::mutes`] is the one place that decides whether a drift is silenced. Keyed by id,
/// so a lookup does not scan them (a shard reads them all back every few seconds); the writer
/// removes expired ones ([`Silences::expired`]) before it adds one, so they stay within twice
/// the cap on active ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Silences {
    created: std::collections::BTreeMap<String, Silence>,
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
        self.created.insert(id, silence);
    }

    /// Removes a silence created through the API; false when there was none with this id.
    pub fn remove(&mut self, id: &str) -> bool {
        self.created.remove(id).is_some()
    }

    /// How many silences created through the API are active (not expired) at `now`.
    pub fn active_count(&self, now: Millis) -> usize {
        self.created
            .values()
            .filter(|silence| silence.is_active(now))
            .count()
    }

    /// True when the silence with this id was created through the API and is active at `now`.
    pub fn is_active(&self, id: &str, now: Millis) -> bool {
        self.created
            .get(id)
            .is_some_and(|silence| silence.is_active(now))
    }

    /// True when a silence with this id was created through the API.
    pub fn contains(&self, id: &str) -> bool {
        self.created.contains_key(id)
    }

    /// The ids of the silences created through the API that have expired at `now`: they mute
    /// nothing any more and are removed from the store.
    pub fn expired(&self, now: Millis) -> Vec<String> {
        self.created
            .iter()
            .filter(|(_, silence)| !silence.is_active(now))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// True when a configured silence or one created through the API mutes `drift` at `now`.
    pub(crate) fn mutes(&self, rules: &Rules, drift: &Drift, now: Millis) -> bool {
        rules
            .silences()
            .iter()
            .chain(self.created.values())
            .any(|silence| silence.matches(drift, now))
    }
}

/// One route as the router runs it: compiled from `routes:` by the config, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Which drifts it takes.
    pub matcher: Matcher,
    /// The channels (by name) it sends to.
    pub channels: Vec<String>,
    /// Go on to the next routes after this one matched.
    pub continue_matching: bool,
    /// How long a group's first message waits for more of the group (the ones that come
    /// meanwhile join it).
    pub group_wait: Duration,
    /// How long after one of a group's messages its next notifications wait (together).
    pub group_interval: Duration,
    /// What groups drifts into one message.
    pub group_by: Vec<GroupBy>,
    /// Reminders while firing (zero: none).
    pub repeat_interval: Duration,
    /// Send resolves too.
    pub send_resolved: bool,
}

impl Route {
    /// The route every drift of severity warning or critical takes when no route is
    /// configured: every channel, grouped by cluster, namespace and class, reminded every 4 h.
    pub(crate) fn default_to(channels: Vec<String>) -> Route {
        Route {
            matcher: Matcher::default(),
            channels,
            continue_matching: false,
            group_wait: Duration::from_secs(10),
            group_interval: DEFAULT_GROUP_INTERVAL,
            group_by: vec![GroupBy::Cluster, GroupBy::Namespace, GroupBy::Class],
            repeat_interval: Duration::from_secs(4 * 3600),
            send_resolved: true,
        }
    }
}

/// Which drifts a route takes; an empty list takes every value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matcher {
    /// Class ids.
    pub classes: Vec<String>,
    /// Rule name globs (`invariant` drifts; a route that sets this matches no other class).
    pub rules: Vec<String>,
    /// The lowest severity taken.
    pub min_severity: Option<Severity>,
    /// Cluster name globs.
    pub clusters: Vec<String>,
    /// Namespace globs.
    pub namespaces: Vec<String>,
    /// Kinds.
    pub kinds: Vec<String>,
    /// Object labels that must be present with these values.
    pub labels: BTreeMap<String, String>,
}

/// A field of a drift that groups notifications into one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// The cluster name.
    Cluster,
    /// The namespace.
    Namespace,
    /// The class id.
    Class,
    /// The rule of an `invariant` drift.
    Rule,
    /// The severity.
    Severity,
    /// The object's kind.
    Kind,
    /// The object's name.
    Name,
    /// The Knative Service the object belongs to.
    Service,
}

impl GroupBy {
    /// Every field, in the order the config's docs list them.
    pub const ALL: [GroupBy; 8] = [
        GroupBy::Cluster,
        GroupBy::Namespace,
        GroupBy::Class,
        GroupBy::Rule,
        GroupBy::Severity,
        GroupBy::Kind,
        GroupBy::Name,
        GroupBy::Service,
    ];

    /// The field's name in `groupBy` (and in the group key).
    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Cluster => "cluster",
            GroupBy::Namespace => "namespace",
            GroupBy::Class => "class",
            GroupBy::Rule => "rule",
            GroupBy::Severity => "severity",
            GroupBy::Kind => "kind",
            GroupBy::Name => "name",
            GroupBy::Service => "service",
        }
    }

    /// The field named `name`.
    pub fn parse(name: &str) -> Option<GroupBy> {
        GroupBy::ALL
            .into_iter()
            .find(|field| field.as_str() == name)
    }
}

/// A channel as routing sees it: its name, its endpoints, and whether it always hears
/// resolves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The channel's name.
    pub name: String,
    /// Its endpoints: `name` alone, or `name#index` for a channel of several instances (each
    /// gets its own notification, so one instance being down never blocks the others).
    pub endpoints: Vec<String>,
    /// Resolves go out whatever the route says (Alertmanager: an alert without its resolve
    /// stays firing there until it times out).
    pub always_resolve: bool,
}

/// Compiled routes and the channel endpoints they address.
#[derive(Debug, Clone)]
pub struct Router {
    routes: Vec<Route>,
    endpoints: BTreeMap<String, Vec<String>>,
    always_resolve: BTreeMap<String, bool>,
    default_route: Route,
}

impl Router {
    /// The router of `routes` over `destinations`.
    pub fn new(routes: Vec<Route>, destinations: &[Destination]) -> Router {
        let mut endpoints = BTreeMap::new();
        let mut always_resolve = BTreeMap::new();
        for destination in destinations {
            endpoints.insert(destination.name.clone(), destination.endpoints.clone());
            always_resolve.insert(destination.name.clone(), destination.always_resolve);
        }
        let default_route = Route::default_to(
            destinations
                .iter()
                .map(|destination| destination.name.clone())
                .collect(),
        );
        Router {
            routes,
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
        let kind = match transition.drift.state {
            DriftState::Firing => NoticeKind::Firing,
            _ => NoticeKind::Resolved,
        };
        self.queue(
            &transition.drift,
            kind,
            transition.at,
            None,
            rules,
            silences,
            now,
        )
    }

    /// Notifications of a remediation attempt that ended at `at` on `drift` (as it is then): on
    /// the drift's routes, like its firing, but never to a channel of alert state (Alertmanager:
    /// an alert is state, an attempt an event that would only re-assert it).
    pub fn route_remediation(
        &self,
        drift: &Drift,
        attempt: &Attempt,
        at: Millis,
        rules: &Rules,
        silences: &Silences,
    ) -> Vec<Queued> {
        self.queue(
            drift,
            NoticeKind::Remediation,
            at,
            Some(Box::new(attempt.clone())),
            rules,
            silences,
            at,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn queue(
        &self,
        drift: &Drift,
        kind: NoticeKind,
        at: Millis,
        remediation: Option<Box<Attempt>>,
        rules: &Rules,
        silences: &Silences,
        now: Millis,
    ) -> Vec<Queued> {
        if silences.mutes(rules, drift, now) {
            return Vec::new();
        }
        let mut matched: Vec<(usize, &Route)> = Vec::new();
        let default_route = (self.routes.len(), &self.default_route);
        if self.routes.is_empty() {
            if drift.severity > Severity::Info {
                matched.push(default_route);
            }
        } else {
            for (index, route) in self.routes.iter().enumerate() {
                if route_matches(route, drift) {
                    matched.push((index, route));
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
                .any(|(_, route)| std::ptr::eq(*route, &self.default_route))
        {
            matched.push(default_route);
        }
        let mut queued = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (index, route) in matched {
            for channel in &route.channels {
                let alert_state = self.always_resolve.get(channel).copied().unwrap_or(false);
                let resolve_ok = route.send_resolved || alert_state;
                if kind == NoticeKind::Resolved && !resolve_ok {
                    continue;
                }
                if kind == NoticeKind::Remediation && alert_state {
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
                        not_before: at.saturating_add(wait),
                        route: index,
                        // Alertmanager groups and paces alerts itself; an alert's state (a
                        // resolve above all) should reach it when it happens.
                        group_interval: if alert_state {
                            Duration::ZERO
                        } else {
                            route.group_interval
                        },
                        // An attempt is told once: no reminders of it.
                        repeat_after: (kind != NoticeKind::Remediation
                            && !route.repeat_interval.is_zero())
                        .then_some(route.repeat_interval),
                        notice: Notice {
                            kind,
                            drift: drift.clone(),
                            at,
                            resend: 0,
                            remediation: remediation.clone(),
                        },
                    });
                }
            }
        }
        queued
    }
}

fn route_matches(route: &Route, drift: &Drift) -> bool {
    let matcher = &route.matcher;
    if !matcher.classes.is_empty() && !matcher.classes.contains(&drift.class) {
        return false;
    }
    if let Some(minimum) = matcher.min_severity {
        if drift.severity < minimum {
            return false;
        }
    }
    let globs = |patterns: &[String], value: &str| {
        patterns.is_empty() || patterns.iter().any(|p| glob_match(p, value))
    };
    if !globs(&matcher.clusters, &drift.cluster) || !globs(&matcher.namespaces, &drift.namespace) {
        return false;
    }
    if !matcher.rules.is_empty()
        && !drift.rule.as_deref().is_some_and(|rule| {
            matcher
                .rules
                .iter()
                .any(|pattern| glob_match(pattern, rule))
        })
    {
        return false;
    }
    if !matcher.kinds.is_empty() && !matcher.kinds.contains(&drift.kind) {
        return false;
    }
    matcher
        .labels
        .iter()
        .all(|(key, value)| drift.labels.get(key) == Some(value))
}

fn group_key(route: &Route, drift: &Drift, kind: NoticeKind) -> String {
    let mut parts = vec![kind.as_str().to_string()];
    for field in &route.group_by {
        let value = match field {
            GroupBy::Cluster => drift.cluster.clone(),
            GroupBy::Namespace => drift.namespace.clone(),
            GroupBy::Class => drift.class.clone(),
            GroupBy::Rule => drift.rule.clone().unwrap_or_default(),
            GroupBy::Severity => drift.severity.as_str().to_string(),
            GroupBy::Kind => drift.kind.clone(),
            GroupBy::Name => drift.name.clone(),
            GroupBy::Service => drift.owner.service.clone().unwrap_or_default(),
        };
        parts.push(format!("{}={value}", field.as_str()));
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
mod tests;
