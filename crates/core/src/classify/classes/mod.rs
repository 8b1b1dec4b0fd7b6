//! The drift classes: one file each, one line each in [`REGISTRY`].
//!
//! A class looks at the object an event just changed (with its previous state and the rest of
//! the graph) and says, for each object it is responsible for, whether its condition holds now
//! ([`Finding::Holds`] with evidence) or not ([`Finding::Clear`]). The engine turns those
//! assessments into pending/firing/resolved transitions; a class never deals with time, grace or
//! state itself. Class ids are public (labels, metrics, config): never rename one.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::graph::Graph;
use super::rules::{
    ClassSettings, RuleSet, Rules, DEFAULT_PILEUP_THRESHOLD, DEFAULT_TOLERANCE_PERCENT,
};
use super::state::ObjectState;
use crate::decode::{Action, KubeObject};
pub use drift_model::class::{ClassCatalog, ClassInfo};
use drift_model::{Drift, DriftSlot, Evidence, Millis, ObjectKey, Severity};

/// What a class needs to know about the change being applied.
pub struct Context<'a> {
    /// The object after the event (a tombstone for deletes).
    pub after: &'a ObjectState,
    /// The object before the event; `None` on first sight (the baseline).
    pub before: Option<&'a ObjectState>,
    /// add / update / delete.
    pub action: Action,
    /// The full decoded object (for `managedFields` tries).
    pub object: &'a KubeObject,
    /// Every tracked object, `after` included.
    pub graph: &'a Graph,
    /// Rules in force.
    pub rules: &'a Rules,
    /// Open drifts.
    pub drifts: &'a HashMap<DriftSlot, Drift>,
    /// The cluster's event source is blind (resync found changes no event delivered), if it is.
    pub source_blind: Option<&'a SourceBlind>,
    /// The event's time.
    pub now: Millis,
    /// The other field manager, when remediation stopped acting on `after`'s object for a fight
    /// (`remediation_fight`).
    pub fight: Option<&'a str>,
    /// The latest observation of served traffic, when `after` is a Route the engine has one for
    /// (`traffic_share_drift`).
    pub traffic: Option<&'a crate::classify::traffic::RouteTraffic>,
    /// The event's attribution, built by the first class that asks ([`Context::attribute`]).
    pub attributor: std::cell::OnceCell<crate::classify::evidence::Attributor<'a>>,
}

/// A spec to read values from by JSON pointer (see [`Context::after_spec_values`]).
pub(crate) enum SpecValues<'a> {
    /// Parsed already.
    Tree(&'a serde_json::Value),
    /// Its JSON text (checked when it was decoded or restored), and its tree once a pointer
    /// needed the parser (an escaped member name on the way): parsed once for every pointer.
    Text(
        std::borrow::Cow<'a, str>,
        std::cell::OnceCell<serde_json::Value>,
    ),
}

impl SpecValues<'_> {
    /// The value at `pointer`, as `after_spec().pointer(pointer)` finds it.
    pub(crate) fn at(&self, pointer: &str) -> Option<serde_json::Value> {
        match self {
            SpecValues::Tree(tree) => tree.pointer(pointer).cloned(),
            SpecValues::Text(text, tree) => match crate::decode::raw::pointer(text, pointer) {
                Some(found) => found.and_then(|part| serde_json::from_str(part).ok()),
                // An escaped member name on the way: the parser answers (a text that did not
                // parse reads as `null`, as `after_spec` reads it).
                None => tree
                    .get_or_init(|| serde_json::from_str(text).unwrap_or(serde_json::Value::Null))
                    .pointer(pointer)
                    .cloned(),
            },
        }
    }
}

impl Context<'_> {
    /// Who changed `pointer` in this event (see [`crate::classify::evidence::attribute`]).
    pub(crate) fn attribute(&self, pointer: &str) -> Option<drift_model::Actor> {
        self.attributor
            .get_or_init(|| crate::classify::evidence::Attributor::new(self.object))
            .attribute(pointer, self.before, self.rules)
    }

    /// The after state's spec, parsed: the event's own spec, already parsed by the decoder,
    /// when the state keeps the spec whole (every kind but Pods, whose spec is trimmed), else
    /// parsed from the state.
    pub(crate) fn after_spec(&self) -> std::borrow::Cow<'_, serde_json::Value> {
        let is_pod = self.after.api_version == "v1" && self.after.kind == "Pod";
        if !is_pod && self.object.uid == self.after.uid {
            std::borrow::Cow::Borrowed(self.object.spec.value())
        } else {
            std::borrow::Cow::Owned(self.after.spec.value())
        }
    }

    /// The after state's spec as JSON text: the event's own text when the state keeps the spec
    /// whole (every kind but Pods, whose spec is trimmed), else unpacked from the state.
    pub(crate) fn after_spec_text(&self) -> std::borrow::Cow<'_, str> {
        let is_pod = self.after.api_version == "v1" && self.after.kind == "Pod";
        if !is_pod && self.object.uid == self.after.uid {
            std::borrow::Cow::Borrowed(self.object.spec.text())
        } else {
            self.after.spec.text()
        }
    }

    /// The after state's spec for reading a few values ([`SpecValues::at`]): its tree when
    /// something parsed it already, else its text, which is read only as far as each value (an
    /// open edit's revert check reads a field or two of a spec on every event of its object).
    pub(crate) fn after_spec_values(&self) -> SpecValues<'_> {
        let is_pod = self.after.api_version == "v1" && self.after.kind == "Pod";
        if !is_pod && self.object.uid == self.after.uid {
            match self.object.spec.parsed() {
                Some(tree) => SpecValues::Tree(tree),
                None => SpecValues::Text(
                    std::borrow::Cow::Borrowed(self.object.spec.text()),
                    std::cell::OnceCell::new(),
                ),
            }
        } else {
            SpecValues::Text(self.after.spec.text(), std::cell::OnceCell::new())
        }
    }

    /// The open drift of a class on an object, if any.
    pub(crate) fn open_drift(&self, subject: &ObjectState, class: &str) -> Option<&Drift> {
        self.open_rule_drift(subject, class, None)
    }

    /// The open drift of one rule of a class (`invariant`) on an object, if any. Asked without
    /// building a slot: classes ask on most events, and most find nothing open.
    pub(crate) fn open_rule_drift(
        &self,
        subject: &ObjectState,
        class: &str,
        rule: Option<&str>,
    ) -> Option<&Drift> {
        let slot = drift_model::SlotRef {
            cluster: &subject.cluster,
            uid: &subject.uid,
            class,
            rule,
        };
        self.drifts.get(&slot as &dyn drift_model::SlotKey)
    }
}

/// A cluster's event source is blind: a complete resync pass found changes the events never
/// delivered, and no event arrived since the pass before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceBlind {
    /// Changes (and deletions) the pass found that no event had delivered.
    pub missed: usize,
    /// When the last event arrived (or the previous pass ended, if none ever did).
    pub quiet_since: Millis,
}

/// The verdict of a class for one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// The condition holds, with evidence.
    Holds(Box<Evidence>),
    /// The condition does not hold; the reason is recorded when an open drift resolves. Most
    /// reasons are fixed texts, and most clear verdicts resolve nothing: not copied to be dropped.
    Clear(Cow<'static, str>),
    /// The class could not tell (a rule's expression failed on this object): an open drift
    /// stays as it is, and the failure is counted per rule.
    Failed {
        /// Stable kind for metrics (`evaluation`, `budget`).
        kind: &'static str,
        /// What failed.
        error: String,
    },
}

/// A class's verdict about one object (`subject`, which need not be the changed object).
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    /// The object the drift is about.
    pub subject: ObjectKey,
    /// The rule, for a class whose findings are per rule (`invariant`).
    pub rule: Option<String>,
    /// Holds or clear.
    pub finding: Finding,
    /// When the verdict changes by the clock alone (a certificate nearing its `notAfter`):
    /// the engine judges `subject` with this class again then, with no event.
    pub judge_again: JudgeAgain,
}

/// Whether a verdict changes with time alone, and when ([`Assessment::judge_again`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum JudgeAgain {
    /// The verdict is about state alone: only an event changes it (every class but those that
    /// judge by the clock). The engine keeps nothing for it.
    #[default]
    Untimed,
    /// Judge the subject with this class again at this time, with or without an event (the
    /// next threshold it crosses); replaces the time an earlier verdict asked for.
    At(Millis),
    /// A clock-judged verdict that no passing time changes (no expiry known, or past the last
    /// threshold): the engine forgets the time an earlier verdict asked for.
    Never,
}

impl Assessment {
    /// The condition holds on `subject`.
    pub fn holds(subject: &ObjectState, evidence: Evidence) -> Assessment {
        Assessment {
            subject: subject.key(),
            rule: None,
            finding: Finding::Holds(Box::new(evidence)),
            judge_again: JudgeAgain::Untimed,
        }
    }

    /// The condition is clear on `subject`.
    pub fn clear(subject: &ObjectState, reason: impl Into<Cow<'static, str>>) -> Assessment {
        Assessment {
            subject: subject.key(),
            rule: None,
            finding: Finding::Clear(reason.into()),
            judge_again: JudgeAgain::Untimed,
        }
    }

    /// This verdict, to be judged again as `when` says (see [`JudgeAgain`]).
    pub(crate) fn judged_again(mut self, when: JudgeAgain) -> Assessment {
        self.judge_again = when;
        self
    }

    /// This verdict about one rule of the class.
    pub(crate) fn for_rule(mut self, rule: &str) -> Assessment {
        self.rule = Some(rule.to_string());
        self
    }
}

/// A class's built-in defaults, overridable under `rules.classes.<id>`.
#[derive(Debug, Clone, Copy)]
pub struct ClassDefaults {
    /// Runs unless disabled.
    pub enabled: bool,
    /// Default grace.
    pub grace: Duration,
    /// Whether `rules.defaults.grace` overrides `grace` (false for classes whose grace has a
    /// meaning of its own, such as immediate change-based classes).
    pub grace_follows_default: bool,
}

/// One drift class.
pub trait DriftClass: Sync {
    /// Its catalogue entry: id, names in English and Chinese, default severity.
    fn info(&self) -> &'static ClassInfo;
    /// The public id.
    fn id(&self) -> &'static str {
        self.info().id
    }
    /// Built-in defaults.
    fn defaults(&self) -> ClassDefaults;
    /// Verdicts for the objects this change concerns.
    fn assess(&self, context: &Context<'_>) -> Vec<Assessment>;
    /// True when the condition can be found again from the objects' current state alone (no
    /// `before`, no event): a pending episode may then live in memory only, since a restart
    /// re-assesses the restored objects (see the engine's module docs). Classes about a change
    /// (an edit, a delete, a digest that moved) keep the default, `false`: theirs are recorded
    /// as soon as they open.
    fn reassessable(&self) -> bool {
        false
    }
    /// True when the class is about state alone and so applies to a snapshot: `check` runs it
    /// on the live objects. Classes about a change, or needing a history or the workloads, keep
    /// the default, `false`.
    fn applies_to_snapshot(&self) -> bool {
        false
    }
    /// True when the class's drifts are about a group of clusters (one object's copies across
    /// them), not about one tracked object: their own evaluator settles them, and no clean-up of
    /// an object (a delete, a forgotten tombstone, a rehome, a disabled rule) touches them.
    /// Every class but `fleet_divergence` keeps the default, `false`.
    fn about_a_group(&self) -> bool {
        false
    }
    /// True when a re-judge without an event (after a reload, after a restart) settles the
    /// class's verdicts both ways, clears included: the verdict reads only what is kept of the
    /// object, what the rules say and other tracked objects (Knative's defaults ConfigMaps), so
    /// the re-judge finds the same verdict an event would, and a drift the rules no longer see
    /// resolves then, not at the object's next event. The class then need not judge an open
    /// drift again on an event that changed nothing it reads. Evidence that only an event
    /// carries (who made the change: the kept `managedFields` have no field sets) the class
    /// carries over from the open drift. Classes whose verdict comes from events keep the
    /// default, `false`: a re-judge opens their drifts but clears none.
    fn rejudged_both_ways(&self) -> bool {
        false
    }
    /// True when a firing drift whose severity rises is told again (an escalation: a move from
    /// firing to firing). Only for a class whose severity rises on purpose, once per threshold
    /// (`certificate_expiring`: warning, then critical as `notAfter` nears); a class whose
    /// severity moves with the object (`scale_unreachable` between one replica and none,
    /// `manual_edit` between a label and a spec edit) keeps the default, `false`: its drift is
    /// updated in place, or every flap would be a notification.
    fn escalates(&self) -> bool {
        false
    }
}

/// [`DriftClass::escalates`] of the class with this id (`false` for an unknown id).
pub(crate) fn escalates(id: &str) -> bool {
    REGISTRY
        .iter()
        .any(|class| class.id() == id && class.escalates())
}

/// [`DriftClass::about_a_group`] of the class with this id (`false` for an unknown id).
pub(crate) fn about_a_group(id: &str) -> bool {
    REGISTRY
        .iter()
        .any(|class| class.about_a_group() && class.id() == id)
}

/// [`DriftClass::rejudged_both_ways`] of the class with this id (`false` for an unknown id).
pub(crate) fn rejudged_both_ways(id: &str) -> bool {
    REGISTRY
        .iter()
        .any(|class| class.id() == id && class.rejudged_both_ways())
}

/// [`DriftClass::reassessable`] of the class with this id (`false` for an unknown id).
pub fn reassessable(id: &str) -> bool {
    REGISTRY
        .iter()
        .any(|class| class.id() == id && class.reassessable())
}

mod baseline_drift;
mod certificate_expiring;
mod config_drift;
mod event_delivery_broken;
mod fleet_divergence;
mod generation_lag;
mod image_drift;
mod invariant;
mod manual_edit;
mod mesh_security_drift;
mod not_ready;
mod operator_upgrade_stuck;
mod orphan;
mod pipeline_broken;
mod remediation_fight;
mod replica_drift;
mod revision_not_ready;
mod revision_pileup;
mod scale_unreachable;
mod traffic_drift;
mod traffic_share_drift;
mod unexpected_delete;

/// Every class, in evaluation order.
pub static REGISTRY: &[&dyn DriftClass] = &[
    &generation_lag::GenerationLag,
    &not_ready::NotReady,
    &revision_not_ready::RevisionNotReady,
    &traffic_drift::TrafficDrift,
    &image_drift::ImageDrift,
    &manual_edit::ManualEdit,
    &config_drift::ConfigDrift,
    &revision_pileup::RevisionPileup,
    &replica_drift::ReplicaDrift,
    &unexpected_delete::UnexpectedDelete,
    &orphan::Orphan,
    &baseline_drift::BaselineDrift,
    &event_delivery_broken::EventDeliveryBroken,
    &scale_unreachable::ScaleUnreachable,
    &operator_upgrade_stuck::OperatorUpgradeStuck,
    &pipeline_broken::PipelineBroken,
    &invariant::InvariantBroken,
    &fleet_divergence::FleetDivergence,
    &remediation_fight::RemediationFight,
    &mesh_security_drift::MeshSecurityDrift,
    &traffic_share_drift::TrafficShareDrift,
    &certificate_expiring::CertificateExpiring,
];

pub(crate) use pipeline_broken::part_problem as pipeline_part_problem;

/// True when `after` reads as `before` did to other objects' verdicts: its happy condition's
/// status, whether it is going away, and a PodAutoscaler's shortfall. When it does not, the
/// engine re-evaluates the objects that depend on it.
pub(crate) fn same_health(before: &ObjectState, after: &ObjectState) -> bool {
    before.is_going_away() == after.is_going_away()
        && scale_unreachable::short_of(before).is_some()
            == scale_unreachable::short_of(after).is_some()
        // Equal texts hold equal conditions, read alike: most status writes leave them as they
        // were (a Revision's replica counts), and parsing both was most of this check.
        && ((before.is_knative() == after.is_knative()
            && before.status_text("conditions") == after.status_text("conditions"))
            || happy(before) == happy(after))
}

/// The status of an object's happy condition (Knative's kinds only).
fn happy(object: &ObjectState) -> Option<String> {
    if !object.is_knative() {
        return None;
    }
    let conditions = object.conditions();
    crate::classify::kinds::happy_condition(&conditions).map(|happy| happy.status.clone())
}

/// The id of the class of fleet groups' differences (`fleet.groups`).
pub use fleet_divergence::ID as FLEET_DIVERGENCE;
/// The id of the class of team invariants (`rules.invariants`).
pub use invariant::{ID as INVARIANT, REVERT_FIELDS_FACT};
/// The id of the class the router sends to every channel.
pub use pipeline_broken::ID as PIPELINE_BROKEN;
/// The id of the class of remediation fights, and the `facts` key naming the other manager.
pub use remediation_fight::{ID as REMEDIATION_FIGHT, MANAGER_FACT as FIGHT_MANAGER_FACT};
/// Whether the latest observation gives a Route a verdict (the engine's staleness bound).
pub(crate) use traffic_share_drift::concludes as traffic_share_concludes;
/// The id of the class of served traffic against the Route's split (`traffic:`).
pub use traffic_share_drift::ID as TRAFFIC_SHARE_DRIFT;

/// Every class id, in evaluation order: the one list config validation, `check`, the API, the
/// renderers and the docs take their class ids from.
pub fn ids() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|class| class.id())
}

/// True for the id of a class in [`REGISTRY`].
pub fn is_known(id: &str) -> bool {
    REGISTRY.iter().any(|class| class.id() == id)
}

/// Every class's catalogue entry, for whoever names classes without judging (the renderers).
pub fn catalog() -> ClassCatalog {
    ClassCatalog::new(REGISTRY.iter().map(|class| class.info()).collect())
}

/// The class with this id.
pub fn by_id(id: &str) -> Option<&'static dyn DriftClass> {
    REGISTRY.iter().copied().find(|class| class.id() == id)
}

/// Every class's built-in settings; `default_grace` (`rules.defaults.grace`) replaces the grace
/// of the classes that follow the shared default.
pub(crate) fn default_settings(
    default_grace: Option<Duration>,
) -> BTreeMap<&'static str, ClassSettings> {
    REGISTRY
        .iter()
        .map(|class| {
            let defaults = class.defaults();
            let settings = ClassSettings {
                enabled: defaults.enabled,
                severity: class.info().severity,
                grace: default_grace
                    .filter(|_| defaults.grace_follows_default)
                    .unwrap_or(defaults.grace),
                tolerance_percent: DEFAULT_TOLERANCE_PERCENT,
                threshold: DEFAULT_PILEUP_THRESHOLD,
            };
            (class.id(), settings)
        })
        .collect()
}

impl Default for Rules {
    /// Every class with its built-in settings, the default trusted managers and watched
    /// ConfigMaps: what an empty `rules:` section compiles to. (Here, not in `rules.rs`: the
    /// rules know nothing of the classes.)
    fn default() -> Self {
        Rules::new(RuleSet::with_classes(default_settings(None)))
    }
}

pub use crate::classify::kinds::SERVING;

/// True for a Knative-managed child: its controller owner is a Knative kind (a Route's KIngress,
/// a Revision's Deployment, a Trigger's Subscription, a Broker's Channel).
pub fn is_knative_child(object: &ObjectState) -> bool {
    object.controller_owner().is_some_and(|owner| {
        crate::decode::object::is_knative_group(crate::decode::object::api_group(
            &owner.api_version,
        ))
    }) || object.label("serving.knative.dev/revision").is_some()
        && !object.is_kind(SERVING, "Revision")
}

/// True for a Knative-managed Deployment or Pod (label `serving.knative.dev/revision`).
pub(crate) fn is_revision_workload(object: &ObjectState) -> bool {
    object.label("serving.knative.dev/revision").is_some()
        && (object.is_kind("apps", "Deployment") || object.is_kind("", "Pod"))
}

/// The Revision a Deployment or Pod belongs to, by uid label, else by name.
pub(crate) fn revision_of<'a>(graph: &'a Graph, object: &ObjectState) -> Option<&'a ObjectState> {
    if let Some(uid) = object.label("serving.knative.dev/revisionUID") {
        if let Some(revision) = graph.by_uid(&object.cluster, uid) {
            return Some(revision);
        }
    }
    let name = object.label("serving.knative.dev/revision")?;
    graph.by_name(
        &object.cluster,
        SERVING,
        "Revision",
        &object.namespace,
        name,
    )
}

/// Builds evidence with a summary.
pub fn evidence(summary: impl Into<String>) -> Evidence {
    Evidence {
        summary: summary.into(),
        ..Evidence::default()
    }
}

/// Seconds as a `Duration`.
pub(crate) const fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// Classes whose drift about a deleted object holds beyond the tombstone's retention: a
/// removed STRICT PeerAuthentication leaves mTLS weak until something restores it, so its
/// tombstone is kept (one per such drift) until the drift resolves.
pub(crate) fn keeps_tombstone(class: &str) -> bool {
    class == mesh_security_drift::ID
}

/// Classes whose drift stays open after its object is deleted (they are about the deletion), and
/// `fleet_divergence`, whose drift is about a group and no tracked object (one under its key,
/// `fleet:<group>`, could only come from a forged event).
pub(crate) fn survives_delete(class: &str) -> bool {
    matches!(
        class,
        "unexpected_delete" | "pipeline_broken" | fleet_divergence::ID | mesh_security_drift::ID
    )
}

#[cfg(test)]
mod spec_values_tests {
    use super::SpecValues;
    use serde_json::{json, Value};

    fn text(spec: &str) -> SpecValues<'_> {
        SpecValues::Text(std::borrow::Cow::Borrowed(spec), std::cell::OnceCell::new())
    }

    /// The text answers as the tree does, jumping where it can and parsing (once) where a
    /// member name is escaped.
    #[test]
    fn a_spec_text_answers_as_its_tree() {
        let spec = r#"{"template": {"spec": {"containers": [{"name": "a", "image": "x:1"}],
            "x\u0041": {"b": [1, null]}}}, "traffic": [{"percent": 100}]}"#;
        let tree: Value = serde_json::from_str(spec).unwrap();
        let pointers = [
            "",
            "/traffic/0/percent",
            "/template/spec/containers/0/image",
            "/template/spec/containers/1",
            "/template/spec/xA/b/0",
            "/template/spec/xA/b/1",
            "/absent",
        ];
        let from_text = text(spec);
        for pointer in pointers {
            assert_eq!(
                from_text.at(pointer),
                tree.pointer(pointer).cloned(),
                "{pointer}"
            );
            assert_eq!(
                SpecValues::Tree(&tree).at(pointer),
                tree.pointer(pointer).cloned()
            );
        }
        let SpecValues::Text(_, parsed) = &from_text else {
            unreachable!("built as text")
        };
        assert!(
            parsed.get().is_some(),
            "the escaped name sent one pointer to the parser"
        );
        // Jumped only: no tree built.
        let jumped = text(spec);
        assert_eq!(jumped.at("/traffic/0/percent"), Some(json!(100)));
        let SpecValues::Text(_, parsed) = &jumped else {
            unreachable!("built as text")
        };
        assert!(parsed.get().is_none());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// The first Revision of a real `kn`-made Service (Knative's VS Code extension's test data).
    fn revision() -> Value {
        let list: Value = serde_json::from_str(include_str!(
            "../../../../../tests/fixtures/knative/serving/redhat-developer-vscode-knative__test-servingTree-singleServiceRevisionList.json"
        ))
        .expect("fixture");
        list["items"][0].clone()
    }

    fn state(object: &Value) -> ObjectState {
        let object = crate::decode::shape::parse_object(object.clone()).expect("object");
        ObjectState::from_object("prod", &object, 0)
    }

    #[test]
    fn health_changes_only_with_what_other_verdicts_read() {
        let before = revision();
        let same = |after: &Value| same_health(&state(&before), &state(after));
        // Replica counts move, the conditions stay: the same health.
        let mut replicas = before.clone();
        replicas["status"]["actualReplicas"] = json!(3);
        assert!(same(&replicas));
        // Another condition than the happy one moves (its text differs): still the same.
        let mut active = before.clone();
        active["status"]["conditions"][0]["status"] = json!("True");
        assert!(same(&active));
        // The happy condition moves: not the same, whichever way.
        let mut not_ready = before.clone();
        not_ready["status"]["conditions"][2]["status"] = json!("False");
        assert_eq!(not_ready["status"]["conditions"][2]["type"], "Ready");
        assert!(!same(&not_ready));
        assert!(!same_health(&state(&not_ready), &state(&before)));
        // Going away is health too.
        let mut deleting = before.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2020-07-24T00:00:00Z");
        assert!(!same(&deleting));
    }

    #[test]
    fn a_pod_autoscalers_shortfall_is_health_with_its_conditions_unchanged() {
        // A real PodAutoscaler (derived from Knative's sources) scaling from 1 to 3 pods.
        let scaling: Value = serde_saphyr::from_str(include_str!(
            "../../../../../tests/fixtures/knative/derived/podautoscaler-scaling-up.yaml"
        ))
        .expect("fixture");
        let mut caught_up = scaling.clone();
        caught_up["status"]["actualScale"] = json!(3);
        let (short, whole) = (state(&scaling), state(&caught_up));
        assert!(scale_unreachable::short_of(&short).is_some());
        assert_eq!(
            short.status_text("conditions"),
            whole.status_text("conditions")
        );
        assert!(!same_health(&short, &whole));
        assert!(!same_health(&whole, &short));
        // One pod more, still short: the same health.
        let mut closer = scaling.clone();
        closer["status"]["actualScale"] = json!(2);
        assert!(same_health(&short, &state(&closer)));
    }
}
