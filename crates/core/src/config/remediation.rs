//! `remediation:`: which firing drifts drift-sentinel may repair itself, how, and with which
//! rails. Off unless set: the default install changes nothing in the cluster.
//!
//! The section is the wire format; [`RemediationConfig::compile`] turns it into the planner's
//! [`Policy`](crate::remediate::Policy), which knows nothing of YAML. What each action may apply
//! to is the planner's table ([`crate::remediate::Action::classes`]), so the config and the
//! planner cannot disagree on it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;

use super::{de_duration, Error, ResyncConfig, ResyncMode};
use crate::classify::classes;
use crate::remediate::{Action, Approval, Budget, Fight, Mode, Policy, Rule, RuleMatch};

/// The whole section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemediationConfig {
    /// `off` (default), `dryRun` (record the exact request, send nothing) or `apply`.
    #[serde(default)]
    pub mode: ModeConfig,
    /// At most this many actions in any window of this length, across every rule.
    #[serde(default)]
    pub budget: BudgetConfig,
    /// When the same fields come back this often after a revert: stop and escalate.
    #[serde(default)]
    pub fight: FightConfig,
    /// The rules, in order: the first that matches a drift decides.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
}

/// `remediation.mode`. YAML 1.1 readers (and this config's) take an unquoted `off` for the
/// boolean `false`: both mean off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ModeConfig {
    /// Nothing is planned or sent.
    #[default]
    Off,
    /// Plans are recorded with the exact request; nothing is sent.
    DryRun,
    /// Plans are sent.
    Apply,
}

/// `remediation.budget`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetConfig {
    /// Actions allowed per window.
    #[serde(default = "default_budget_actions")]
    pub actions: u32,
    /// The window.
    #[serde(default = "default_hour", deserialize_with = "de_duration")]
    pub per: Duration,
}

impl Default for BudgetConfig {
    fn default() -> BudgetConfig {
        BudgetConfig {
            actions: default_budget_actions(),
            per: default_hour(),
        }
    }
}

/// `remediation.fight`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FightConfig {
    /// How often the same fields may be set back after a revert.
    #[serde(default = "default_fight_times")]
    pub times: u32,
    /// Within this window.
    #[serde(default = "default_hour", deserialize_with = "de_duration")]
    pub within: Duration,
}

impl Default for FightConfig {
    fn default() -> FightConfig {
        FightConfig {
            times: default_fight_times(),
            within: default_hour(),
        }
    }
}

/// One rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleConfig {
    /// Unique; recorded with every attempt.
    pub name: String,
    /// Which drifts.
    #[serde(rename = "match")]
    pub matcher: MatchConfig,
    /// `revert`, `rollback`, `restore` or `deleteOrphan`.
    pub action: String,
    /// `auto` or `manual`; unset: `manual` (nothing is sent until someone approves it).
    #[serde(default)]
    pub approval: Option<String>,
    /// Least time between two actions on one object.
    #[serde(default = "default_cooldown", deserialize_with = "de_duration")]
    pub cooldown: Duration,
}

/// `remediation.rules[].match`: every given matcher must match.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchConfig {
    /// Class ids (required: a rule repairs named classes, never "any drift").
    #[serde(default)]
    pub classes: Vec<String>,
    /// Kinds (`Service`, or `Service.serving.knative.dev` for one group).
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Namespace globs.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Labels the object must carry with these values.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Cluster name globs.
    #[serde(default)]
    pub clusters: Vec<String>,
}

impl<'de> Deserialize<'de> for ModeConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Flag(bool),
            Word(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Flag(false) => Ok(ModeConfig::Off),
            Raw::Word(word) if word == "off" => Ok(ModeConfig::Off),
            Raw::Word(word) if word == "dryRun" => Ok(ModeConfig::DryRun),
            Raw::Word(word) if word == "apply" => Ok(ModeConfig::Apply),
            Raw::Flag(true) => Err(serde::de::Error::custom(
                "expected off, dryRun or apply, got true (YAML reads an unquoted on, yes or true \
                 as true)",
            )),
            Raw::Word(word) => Err(serde::de::Error::custom(format!(
                "expected off, dryRun or apply, got {word:?}"
            ))),
        }
    }
}

fn default_budget_actions() -> u32 {
    20
}
fn default_fight_times() -> u32 {
    3
}
fn default_hour() -> Duration {
    Duration::from_secs(3600)
}
fn default_cooldown() -> Duration {
    Duration::from_secs(600)
}

impl RemediationConfig {
    /// Checks the section (every error names its key path) and compiles it into the planner's
    /// policy. `resync` says which cluster the service can write to: the one it lists.
    pub fn compile(&self, resync: &ResyncConfig, default_cluster: &str) -> Result<Policy, Error> {
        let mode = match self.mode {
            ModeConfig::Off => Mode::Off,
            ModeConfig::DryRun => Mode::DryRun,
            ModeConfig::Apply => Mode::Apply,
        };
        if self.budget.actions == 0 {
            return Err(Error::invalid(
                "remediation.budget.actions",
                "must be at least 1 (mode: off turns remediation off)",
            ));
        }
        if self.budget.per.is_zero() {
            return Err(Error::invalid("remediation.budget.per", "must be positive"));
        }
        if self.fight.times < 2 {
            return Err(Error::invalid(
                "remediation.fight.times",
                "must be at least 2 (one edit coming back once is a person correcting a revert, \
                 not a fight)",
            ));
        }
        if self.fight.within.is_zero() {
            return Err(Error::invalid(
                "remediation.fight.within",
                "must be positive",
            ));
        }
        // The one cluster the Kubernetes client reaches: resync's (`resync.cluster`, else
        // `defaultCluster`). A dry run sends nothing, so it needs no client, but it judges as
        // apply would: only that cluster's drifts.
        if mode == Mode::Apply && !self.rules.is_empty() && resync.enabled == ResyncMode::Off {
            return Err(Error::invalid(
                "remediation.mode",
                "apply needs the Kubernetes client that resync uses, and resync.enabled is \
                 false: turn resync on, or use mode: dryRun (which sends nothing)",
            ));
        }
        let cluster = Some(
            resync
                .cluster
                .clone()
                .filter(|name| !name.trim().is_empty())
                .unwrap_or_else(|| default_cluster.to_string()),
        );
        let mut names = BTreeSet::new();
        let mut rules = Vec::with_capacity(self.rules.len());
        for (index, rule) in self.rules.iter().enumerate() {
            let key = format!("remediation.rules[{index}]");
            if rule.name.trim().is_empty() {
                return Err(Error::invalid(format!("{key}.name"), "must not be empty"));
            }
            if !names.insert(rule.name.as_str()) {
                return Err(Error::invalid(
                    format!("{key}.name"),
                    format!("{:?} names an earlier rule too", rule.name),
                ));
            }
            rules.push(compile_rule(&key, rule, cluster.as_deref())?);
        }
        Ok(Policy {
            mode,
            budget: Budget {
                actions: self.budget.actions,
                per: self.budget.per,
            },
            fight: Fight {
                times: self.fight.times,
                within: self.fight.within,
            },
            cluster,
            rules,
        })
    }
}

fn compile_rule(key: &str, rule: &RuleConfig, cluster: Option<&str>) -> Result<Rule, Error> {
    let action = Action::parse(&rule.action).ok_or_else(|| {
        Error::invalid(
            format!("{key}.action"),
            format!(
                "unknown action {:?}; one of {}",
                rule.action,
                Action::ALL
                    .iter()
                    .map(|action| action.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    let matcher = &rule.matcher;
    if matcher.classes.is_empty() {
        return Err(Error::invalid(
            format!("{key}.match.classes"),
            format!(
                "must name at least one class ({} applies to {})",
                action.as_str(),
                action.classes().join(", ")
            ),
        ));
    }
    for (index, class) in matcher.classes.iter().enumerate() {
        let at = format!("{key}.match.classes[{index}]");
        if !classes::is_known(class) {
            return Err(Error::invalid(at, format!("unknown class {class:?}")));
        }
        if !action.classes().contains(&class.as_str()) {
            return Err(Error::invalid(
                at,
                format!(
                    "{} cannot repair {class}: it applies to {} only{}",
                    action.as_str(),
                    action.classes().join(", "),
                    if Action::for_class(class).is_none() {
                        " (no action repairs this class: Knative's controllers do, or a person \
                         must decide)"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    let approval = match rule.approval.as_deref() {
        None | Some("manual") => Approval::Manual,
        Some("auto") => Approval::Auto,
        Some(other) => {
            return Err(Error::invalid(
                format!("{key}.approval"),
                format!("unknown approval {other:?}; auto or manual"),
            ))
        }
    };
    if action == Action::DeleteOrphan && approval == Approval::Auto {
        return Err(Error::invalid(
            format!("{key}.approval"),
            "deleteOrphan deletes an object: manual approval only",
        ));
    }
    for (index, kind) in matcher.kinds.iter().enumerate() {
        let (name, group) = kind.split_once('.').unwrap_or((kind, ""));
        if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_uppercase()) {
            return Err(Error::invalid(
                format!("{key}.match.kinds[{index}]"),
                format!("{kind:?} is not a kind (Service, or Service.serving.knative.dev)"),
            ));
        }
        if kind.contains('.') && group.is_empty() {
            return Err(Error::invalid(
                format!("{key}.match.kinds[{index}]"),
                format!("{kind:?} has an empty group"),
            ));
        }
        if action == Action::Rollback
            && !(name == "Service" && matches!(group, "" | "serving.knative.dev"))
        {
            return Err(Error::invalid(
                format!("{key}.match.kinds[{index}]"),
                "rollback pins a Knative Service's traffic: Service (serving.knative.dev) only",
            ));
        }
        if name == "Secret" && matches!(group, "" | "core") {
            return Err(Error::invalid(
                format!("{key}.match.kinds[{index}]"),
                "Secrets are never remediated",
            ));
        }
    }
    for (index, glob) in matcher.clusters.iter().enumerate() {
        if let Some(cluster) = cluster {
            if !drift_model::glob::glob_match(glob, cluster) {
                return Err(Error::invalid(
                    format!("{key}.match.clusters[{index}]"),
                    format!(
                        "{glob:?} does not match {cluster:?}, the one cluster the service can \
                         write to (resync's); the rule would never act"
                    ),
                ));
            }
        }
    }
    Ok(Rule {
        name: rule.name.clone(),
        matcher: RuleMatch {
            classes: matcher.classes.clone(),
            kinds: matcher.kinds.clone(),
            namespaces: matcher.namespaces.clone(),
            labels: matcher.labels.clone(),
            clusters: matcher.clusters.clone(),
        },
        action,
        approval,
        cooldown: rule.cooldown,
    })
}
