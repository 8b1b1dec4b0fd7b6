//! `routes:`: which drifts go to which channels, grouped and repeated how.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::channels::{ChannelConfig, ChannelKind};
use super::de_duration;
use crate::route::{Destination, GroupBy, Matcher, Route, Router};
use drift_model::Severity;

/// One route: which drifts go to which channels, and how they are grouped and repeated.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteConfig {
    /// What the route matches (every given matcher must match).
    #[serde(default, rename = "match")]
    pub matcher: RouteMatch,
    /// Channels to send to.
    pub channels: Vec<String>,
    /// Keep evaluating later routes after a match.
    #[serde(default, rename = "continue")]
    pub continue_matching: bool,
    /// How long to wait for more drifts of the same group before sending one message.
    #[serde(default = "default_group_wait", deserialize_with = "de_duration")]
    pub group_wait: Duration,
    /// How long a group's notifications wait after one of its messages, to go out together
    /// (`0s`: each when due).
    #[serde(default = "default_group_interval", deserialize_with = "de_duration")]
    pub group_interval: Duration,
    /// Drift fields that form a group: `cluster`, `namespace`, `class`, `severity`, `kind`,
    /// `name`, `service`.
    #[serde(default = "default_group_by")]
    pub group_by: Vec<String>,
    /// Reminder interval while a drift keeps firing (`0s` = never).
    #[serde(default = "default_repeat_interval", deserialize_with = "de_duration")]
    pub repeat_interval: Duration,
    /// Send a message when a drift resolves.
    #[serde(default = "default_true")]
    pub send_resolved: bool,
}

fn default_group_wait() -> Duration {
    Duration::from_secs(10)
}
fn default_group_interval() -> Duration {
    crate::route::DEFAULT_GROUP_INTERVAL
}
fn default_group_by() -> Vec<String> {
    vec![
        "cluster".to_string(),
        "namespace".to_string(),
        "class".to_string(),
    ]
}
fn default_repeat_interval() -> Duration {
    Duration::from_secs(4 * 3600)
}
fn default_true() -> bool {
    true
}

/// Route matchers; absent matchers match everything.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteMatch {
    /// Class ids.
    #[serde(default)]
    pub class: Vec<String>,
    /// Rule name globs (`invariant` drifts; a route that sets this matches no other class).
    #[serde(default)]
    pub rule: Vec<String>,
    /// Minimum severity (`warning` matches warning and critical).
    #[serde(default)]
    pub severity: Option<String>,
    /// Cluster name globs.
    #[serde(default)]
    pub cluster: Vec<String>,
    /// Namespace globs.
    #[serde(default)]
    pub namespace: Vec<String>,
    /// Kinds.
    #[serde(default)]
    pub kind: Vec<String>,
    /// Object labels that must be present with these values.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl RouteConfig {
    /// The route as the router runs it (after validation: an unknown severity or `groupBy`
    /// field was refused there, naming its key).
    pub fn compile(&self) -> Route {
        let matcher = &self.matcher;
        Route {
            matcher: Matcher {
                classes: matcher.class.clone(),
                rules: matcher.rule.clone(),
                min_severity: matcher.severity.as_deref().and_then(Severity::parse),
                clusters: matcher.cluster.clone(),
                namespaces: matcher.namespace.clone(),
                kinds: matcher.kind.clone(),
                labels: matcher.labels.clone(),
            },
            channels: self.channels.clone(),
            continue_matching: self.continue_matching,
            group_wait: self.group_wait,
            group_interval: self.group_interval,
            group_by: self
                .group_by
                .iter()
                .filter_map(|field| GroupBy::parse(field))
                .collect(),
            repeat_interval: self.repeat_interval,
            send_resolved: self.send_resolved,
        }
    }
}

/// The router of `routes` over `channels`: the channels' endpoints (an Alertmanager channel of
/// several instances has one per instance) and the compiled routes.
pub fn router(routes: &[RouteConfig], channels: &[ChannelConfig]) -> Router {
    let destinations: Vec<Destination> = channels
        .iter()
        .map(|channel| Destination {
            name: channel.name.clone(),
            endpoints: match &channel.kind {
                ChannelKind::Alertmanager { urls, .. } if urls.len() > 1 => (0..urls.len())
                    .map(|index| format!("{}#{index}", channel.name))
                    .collect(),
                _ => vec![channel.name.clone()],
            },
            always_resolve: matches!(channel.kind, ChannelKind::Alertmanager { .. }),
        })
        .collect();
    Router::new(
        routes.iter().map(RouteConfig::compile).collect(),
        &destinations,
    )
}
