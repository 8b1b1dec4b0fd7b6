//! The object graph: compact object states plus the indexes the classes need to find relatives.
//!
//! Relations come from controller `ownerReferences` and from Knative's labels
//! (`serving.knative.dev/configurationUID` on Revisions, `serving.knative.dev/revisionUID` on
//! Deployments and Pods), so a child is found even when its owner reference was edited away.
//! Deleted objects stay as tombstones for a while so late events and orphans can be recognised.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use super::state::ObjectState;
use drift_model::{Millis, ObjectKey, OwnerChain};

/// Name-based identity: (cluster, group, kind, namespace, name), as one text of the parts each
/// behind its length (`7:default`), so no part's content can make two keys equal (a forged
/// event's name may hold any character): one allocation per tracked object instead of five.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct NameKey(Box<str>);

impl NameKey {
    /// The name key of these coordinates.
    fn new(cluster: &str, group: &str, kind: &str, namespace: &str, name: &str) -> NameKey {
        let parts = [cluster, group, kind, namespace, name];
        let mut key = String::with_capacity(parts.iter().map(|part| part.len() + 4).sum());
        for part in parts {
            // Writing to a `String` cannot fail.
            let _ = write!(key, "{}:", part.len());
            key.push_str(part);
        }
        NameKey(key.into_boxed_str())
    }

    /// The name key of an object.
    pub(crate) fn of(object: &ObjectState) -> NameKey {
        NameKey::new(
            &object.cluster,
            object.group(),
            &object.kind,
            &object.namespace,
            &object.name,
        )
    }
}

/// Objects and their relations.
#[derive(Debug, Default)]
pub struct Graph {
    objects: HashMap<ObjectKey, ObjectState>,
    by_name: HashMap<NameKey, Box<str>>,
    children: HashMap<ObjectKey, BTreeSet<String>>,
    tombstones: BTreeSet<(Millis, ObjectKey)>,
    /// Triggers by the Broker their `eventing.knative.dev/broker` label names: (cluster,
    /// namespace, Broker name) → Trigger uids. Eventing's webhook sets the label from
    /// `spec.broker`; a Broker's change of readiness re-assesses its Triggers through it.
    triggers: HashMap<(String, String, String), BTreeSet<String>>,
    /// Objects per cluster name (a handful of names), to tell which clusters are tracked.
    clusters: HashMap<String, usize>,
    /// The sum of the objects' [`ObjectState::weight`].
    bytes: usize,
}

const CONFIGURATION_UID: &str = "serving.knative.dev/configurationUID";
const TRIGGER_BROKER: &str = "eventing.knative.dev/broker";
const REVISION_UID: &str = "serving.knative.dev/revisionUID";

impl Graph {
    /// Number of objects, tombstones included.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// An object by key.
    pub fn get(&self, key: &ObjectKey) -> Option<&ObjectState> {
        self.objects.get(key)
    }

    /// An object by cluster and uid.
    pub fn by_uid(&self, cluster: &str, uid: &str) -> Option<&ObjectState> {
        self.objects.get(&ObjectKey {
            cluster: cluster.to_string(),
            uid: uid.to_string(),
        })
    }

    /// The newest object of that name (possibly a tombstone).
    pub(crate) fn by_name(
        &self,
        cluster: &str,
        group: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<&ObjectState> {
        let key = NameKey::new(cluster, group, kind, namespace, name);
        let uid = self.by_name.get(&key)?;
        self.by_uid(cluster, uid)
    }

    /// The live (not deleted) object of that name.
    pub(crate) fn live_by_name(
        &self,
        cluster: &str,
        group: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<&ObjectState> {
        self.by_name(cluster, group, kind, namespace, name)
            .filter(|object| !object.deleted)
    }

    /// Children of an object (by owner reference or Knative uid label), tombstones included.
    pub fn children(&self, parent: &ObjectKey) -> Vec<&ObjectState> {
        let Some(uids) = self.children.get(parent) else {
            return Vec::new();
        };
        uids.iter()
            .filter_map(|uid| self.by_uid(&parent.cluster, uid))
            .collect()
    }

    /// The Triggers (tombstones included) whose `eventing.knative.dev/broker` label names
    /// `broker`.
    pub(crate) fn triggers_of(&self, broker: &ObjectState) -> Vec<&ObjectState> {
        let key = (
            broker.cluster.clone(),
            broker.namespace.clone(),
            broker.name.clone(),
        );
        let Some(uids) = self.triggers.get(&key) else {
            return Vec::new();
        };
        uids.iter()
            .filter_map(|uid| self.by_uid(&broker.cluster, uid))
            .collect()
    }

    /// About how many bytes the objects take (the sum of their [`ObjectState::weight`]).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Objects (tombstones included) tracked under `cluster`.
    pub(crate) fn count_in(&self, cluster: &str) -> usize {
        self.clusters.get(cluster).copied().unwrap_or(0)
    }

    /// The most objects any one cluster has.
    pub fn largest_cluster(&self) -> usize {
        self.clusters.values().copied().max().unwrap_or(0)
    }

    /// Number of cluster names with at least one object.
    pub(crate) fn cluster_count(&self) -> usize {
        self.clusters.len()
    }

    /// The cluster names that have tracked objects.
    pub fn clusters(&self) -> impl Iterator<Item = &str> {
        self.clusters.keys().map(String::as_str)
    }

    /// Every object (iteration order unspecified).
    pub fn iter(&self) -> impl Iterator<Item = &ObjectState> {
        self.objects.values()
    }

    /// Inserts or replaces an object; returns the previous state.
    pub fn insert(&mut self, object: ObjectState) -> Option<ObjectState> {
        let key = object.key();
        // The name index must already name this object (two live objects of one name, which
        // only forged or reordered events make, take the full path as before).
        let named = || {
            self.by_name.get(&NameKey::of(&object)).map(AsRef::as_ref) == Some(object.uid.as_str())
        };
        if self
            .objects
            .get(&key)
            .is_some_and(|current| same_relations(current, &object))
            && named()
        {
            if let Some(current) = self.objects.get_mut(&key) {
                // Most events (status churn) leave every index as it was: only the weight
                // moves; the relations indexes are neither rebuilt nor allocated for.
                self.bytes = (self.bytes + object.weight()).saturating_sub(current.weight());
                return Some(std::mem::replace(current, object));
            }
        }
        let old = self.objects.remove(&key);
        if let Some(old) = &old {
            self.unindex(old);
        }
        self.index(&object);
        self.objects.insert(key, object);
        old
    }

    /// Removes an object; returns it.
    pub fn remove(&mut self, key: &ObjectKey) -> Option<ObjectState> {
        let old = self.objects.remove(key)?;
        self.unindex(&old);
        Some(old)
    }

    /// When the oldest tombstone last seen at or after `from` was last seen.
    pub(crate) fn first_tombstone_from(&self, from: Millis) -> Option<Millis> {
        let least = ObjectKey {
            cluster: String::new(),
            uid: String::new(),
        };
        self.tombstones
            .range((from, least)..)
            .next()
            .map(|(seen, _)| *seen)
    }

    /// Tombstones last seen before `cutoff`, oldest first.
    pub(crate) fn tombstones_before(&self, cutoff: Millis) -> Vec<ObjectKey> {
        self.tombstones
            .iter()
            .take_while(|(seen, _)| *seen < cutoff)
            .map(|(_, key)| key.clone())
            .collect()
    }

    /// The Knative owner chain, from labels or from the object's own kind; what an object's
    /// labels leave out is read off its owners (net-istio's VirtualServices carry only the route
    /// labels, its DestinationRules none: they sit under their Service through the KIngress and
    /// Route, or the ServerlessService).
    pub(crate) fn owner_chain(&self, object: &ObjectState) -> OwnerChain {
        let mut chain = Self::own_chain(object);
        let mut current = object;
        for _ in 0..3 {
            if chain.service.is_some() {
                break;
            }
            let owner = current
                .controller_owner()
                .and_then(|owner| self.by_uid(&object.cluster, &owner.uid))
                .or_else(|| {
                    let route = current.label("serving.knative.dev/route")?;
                    let namespace = current
                        .label("serving.knative.dev/routeNamespace")
                        .unwrap_or(&current.namespace);
                    self.by_name(
                        &object.cluster,
                        "serving.knative.dev",
                        "Route",
                        namespace,
                        route,
                    )
                });
            let Some(owner) = owner.filter(|owner| owner.uid != object.uid) else {
                break;
            };
            let above = Self::own_chain(owner);
            chain.service = chain.service.or(above.service);
            chain.configuration = chain.configuration.or(above.configuration);
            chain.revision = chain.revision.or(above.revision);
            current = owner;
        }
        chain
    }

    /// [`Graph::owner_chain`] from the object alone.
    fn own_chain(object: &ObjectState) -> OwnerChain {
        let label = |key: &str| object.label(key).map(str::to_string);
        let mut chain = OwnerChain {
            service: label("serving.knative.dev/service"),
            configuration: label("serving.knative.dev/configuration"),
            revision: label("serving.knative.dev/revision"),
        };
        if object.is_knative_serving() {
            match object.kind.as_str() {
                "Service" => chain.service = Some(object.name.clone()),
                "Configuration" => chain.configuration = Some(object.name.clone()),
                "Revision" => chain.revision = Some(object.name.clone()),
                _ => {}
            }
        }
        chain
    }

    fn parents(object: &ObjectState) -> Vec<String> {
        let mut parents: Vec<String> = object
            .owners
            .iter()
            .map(|owner| owner.uid.clone())
            .collect();
        for label in [CONFIGURATION_UID, REVISION_UID] {
            // A Revision carries its own configurationUID; a Deployment carries revisionUID.
            if let Some(uid) = object.label(label) {
                if !(label == REVISION_UID && object.is_kind("serving.knative.dev", "Revision")) {
                    parents.push(uid.to_string());
                }
            }
        }
        parents.sort();
        parents.dedup();
        parents
    }

    fn index(&mut self, object: &ObjectState) {
        self.bytes += object.weight();
        count_up(&mut self.clusters, &object.cluster);

        let name_key = NameKey::of(object);
        // A late tombstone must not hide a live object that re-used the name.
        let live_other = self
            .by_name
            .get(&name_key)
            .filter(|uid| uid.as_ref() != object.uid.as_str())
            .and_then(|uid| self.by_uid(&object.cluster, uid))
            .is_some_and(|other| !other.deleted);
        if !(object.deleted && live_other) {
            self.by_name.insert(name_key, object.uid.as_str().into());
        }
        for parent in Self::parents(object) {
            self.children
                .entry(ObjectKey {
                    cluster: object.cluster.clone(),
                    uid: parent,
                })
                .or_default()
                .insert(object.uid.clone());
        }
        if let Some(key) = Self::trigger_key(object) {
            self.triggers
                .entry(key)
                .or_default()
                .insert(object.uid.clone());
        }
        if object.deleted {
            self.tombstones.insert((object.last_seen, object.key()));
        }
    }

    fn trigger_key(object: &ObjectState) -> Option<(String, String, String)> {
        if !object.is_kind("eventing.knative.dev", "Trigger") {
            return None;
        }
        let broker = object.label(TRIGGER_BROKER)?;
        Some((
            object.cluster.clone(),
            object.namespace.clone(),
            broker.to_string(),
        ))
    }

    fn unindex(&mut self, object: &ObjectState) {
        self.bytes = self.bytes.saturating_sub(object.weight());

        count_down(&mut self.clusters, &object.cluster);
        let name_key = NameKey::of(object);
        if self.by_name.get(&name_key).map(AsRef::as_ref) == Some(object.uid.as_str()) {
            self.by_name.remove(&name_key);
        }
        for parent in Self::parents(object) {
            let parent_key = ObjectKey {
                cluster: object.cluster.clone(),
                uid: parent,
            };
            if let Some(set) = self.children.get_mut(&parent_key) {
                set.remove(&object.uid);
                if set.is_empty() {
                    self.children.remove(&parent_key);
                }
            }
        }
        if let Some(key) = Self::trigger_key(object) {
            if let Some(set) = self.triggers.get_mut(&key) {
                set.remove(&object.uid);
                if set.is_empty() {
                    self.triggers.remove(&key);
                }
            }
        }
        if object.deleted {
            self.tombstones.remove(&(object.last_seen, object.key()));
        }
    }
}

/// True when `after` is indexed exactly as `before` is: same name, same relations (owners and
/// the labels [`Graph::parents`] and the Trigger index read), neither a tombstone.
fn same_relations(before: &ObjectState, after: &ObjectState) -> bool {
    !before.deleted
        && !after.deleted
        && before.cluster == after.cluster
        && before.name == after.name
        && before.namespace == after.namespace
        && before.kind == after.kind
        && before.group() == after.group()
        && before.owners == after.owners
        && before.labels == after.labels
}

/// Adds one to `name`'s count (allocating the name only the first time).
fn count_up(counts: &mut HashMap<String, usize>, name: &str) {
    match counts.get_mut(name) {
        Some(count) => *count += 1,
        None => {
            counts.insert(name.to_string(), 1);
        }
    }
}

/// Takes one from `name`'s count, forgetting the name at zero.
fn count_down(counts: &mut HashMap<String, usize>, name: &str) {
    if let Some(count) = counts.get_mut(name) {
        *count -= 1;
        if *count == 0 {
            counts.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NameKey;

    #[test]
    fn name_keys_of_different_coordinates_never_collide() {
        let key = NameKey::new("prod", "serving.knative.dev", "Service", "ns", "x");
        assert_eq!(
            key,
            NameKey::new("prod", "serving.knative.dev", "Service", "ns", "x")
        );
        for other in [
            NameKey::new("prod", "serving.knative.dev", "Service", "n", "sx"),
            NameKey::new("prod", "serving.knative.dev", "Service", "ns\u{0}", "x"),
            NameKey::new("prod", "serving.knative.dev", "Service", "ns", "2:x"),
            NameKey::new("prod", "", "Service", "ns", "x"),
            NameKey::new("prod2", "serving.knative.dev", "Service", "ns", "x"),
        ] {
            assert_ne!(key, other);
        }
        assert_ne!(
            NameKey::new("a", "", "K", "1:b", ""),
            NameKey::new("a", "", "K", "", "1:b")
        );
    }
}
