//! Interned names: the field managers, operations and subresources the objects' stamps share.

/// A field manager's name, an operation or a subresource: one shared copy for every state that
/// names it ([`Names`]).
pub type Name = std::sync::Arc<str>;

/// The managers' names, operations and subresources of every tracked object, one copy each.
///
/// A cluster has a few dozen field managers (`kubectl-edit`, `controller`, `argocd-controller`,
/// ...), and every object names several in its `managedFields`: interned, a state's stamps
/// point at one shared copy instead of allocating their strings on every event (issue 28).
/// The set is bounded: a sender that invents a manager name per event fills it, it then keeps
/// only the names some state still uses, and a name that does not fit is simply not shared.
#[derive(Debug, Default)]
pub(crate) struct Names {
    set: std::collections::HashSet<Name>,
    /// Names not shared since the set was last pruned: it is pruned again only after as many
    /// misses as it holds, so pruning a set full of names in use costs O(1) per name amortized.
    misses: usize,
}

/// How many distinct names [`Names`] shares at most.
const MAX_NAMES: usize = 4096;

impl Names {
    /// The shared copy of `text`.
    pub(crate) fn get(&mut self, text: &str) -> Name {
        if let Some(name) = self.set.get(text) {
            return Name::clone(name);
        }
        let name = Name::from(text);
        if self.set.len() >= MAX_NAMES {
            self.misses += 1;
            if self.misses < MAX_NAMES {
                return name;
            }
            // Names no state uses any more (only the set holds them) make room.
            self.set
                .retain(|name| std::sync::Arc::strong_count(name) > 1);
            self.misses = 0;
        }
        if self.set.len() < MAX_NAMES {
            self.set.insert(Name::clone(&name));
        }
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_shared_and_the_set_stays_bounded() {
        let mut names = Names::default();
        let first = names.get("kubectl-edit");
        let again = names.get("kubectl-edit");
        assert!(Name::ptr_eq(&first, &again));
        assert_eq!(&*again, "kubectl-edit");
        // A flood of invented names fills the set; names still in use stay shared, the others
        // make room, and a name that does not fit is still given (unshared).
        let kept: Vec<Name> = (0..MAX_NAMES / 2)
            .map(|i| names.get(&format!("kept-{i}")))
            .collect();
        for i in 0..MAX_NAMES * 3 {
            let name = names.get(&format!("junk-{i}"));
            assert_eq!(&*name, format!("junk-{i}"));
        }
        assert!(names.set.len() <= MAX_NAMES);
        assert!(Name::ptr_eq(&names.get("kubectl-edit"), &first));
        assert!(Name::ptr_eq(&names.get("kept-7"), &kept[7]));
        // Pruned: the junk is gone, so a new name is shared again.
        assert!(names.set.len() < MAX_NAMES);
        let new = names.get("argocd-controller");
        assert!(Name::ptr_eq(&names.get("argocd-controller"), &new));
    }
}
