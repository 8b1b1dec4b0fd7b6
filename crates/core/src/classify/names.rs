//! Interned names: the field managers, operations and subresources the objects' stamps share.

/// A field manager's name, an operation or a subresource: one shared copy for every state that
/// names it ([`Names`]).
pub type Name = std::sync::Arc<str>;

/// The managers' names, operations and subresources of every tracked object, one copy each.
///
/// A cluster has a few dozen field managers (`kubectl-edit`, `controller`, `argocd-controller`,
/// ...), and every object names several in its `managedFields`: interned, a state's stamps
/// point at one shared copy instead of allocating their strings on every event (issue 28).
/// The set is bounded in count and bytes: a name longer than the API server allows a field
/// manager (128 characters) is not shared; a sender that invents a manager name per event fills
/// the set, it then keeps only the names some state still uses, and a name that does not fit
/// is simply not shared.
#[derive(Debug, Default)]
pub(crate) struct Names {
    set: std::collections::HashSet<Name>,
    /// Names not shared since the set was last pruned: it is pruned again only after as many
    /// misses as it holds, so pruning a set full of names in use costs O(1) per name amortized.
    misses: usize,
    /// How often the set was pruned (for tests).
    #[cfg(test)]
    prunes: usize,
}

/// How many distinct names [`Names`] shares at most.
const MAX_NAMES: usize = 4096;

/// The longest name [`Names`] shares: the API server refuses a longer `fieldManager`
/// (`k8s.io/apiserver` `ValidateFieldManager`), so a longer one is forged; with [`MAX_NAMES`]
/// the set holds at most 512 KiB of names.
const MAX_NAME_LEN: usize = 128;

impl Names {
    /// The shared copy of `text`.
    pub(crate) fn get(&mut self, text: &str) -> Name {
        if let Some(name) = self.set.get(text) {
            return Name::clone(name);
        }
        let name = Name::from(text);
        if text.len() > MAX_NAME_LEN {
            return name;
        }
        if self.set.len() >= MAX_NAMES {
            self.misses += 1;
            if self.misses < MAX_NAMES {
                return name;
            }
            // Names no state uses any more (only the set holds them) make room.
            self.set
                .retain(|name| std::sync::Arc::strong_count(name) > 1);
            self.misses = 0;
            #[cfg(test)]
            {
                self.prunes += 1;
            }
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
    fn a_name_is_shared() {
        let mut names = Names::default();
        let first = names.get("kubectl-edit");
        let again = names.get("kubectl-edit");
        assert!(Name::ptr_eq(&first, &again));
        assert_eq!(&*again, "kubectl-edit");
        assert_eq!(names.set.len(), 1);
    }

    #[test]
    fn a_name_longer_than_a_field_manager_may_be_is_not_kept() {
        let mut names = Names::default();
        let long = "m".repeat(MAX_NAME_LEN + 1);
        let name = names.get(&long);
        assert_eq!(&*name, long);
        assert!(!Name::ptr_eq(&name, &names.get(&long)));
        assert!(names.set.is_empty());
        let longest = "m".repeat(MAX_NAME_LEN);
        assert!(Name::ptr_eq(&names.get(&longest), &names.get(&longest)));
    }

    #[test]
    fn a_full_set_of_names_in_use_stays_full_and_is_pruned_once_per_set_of_misses() {
        let mut names = Names::default();
        let in_use: Vec<Name> = (0..MAX_NAMES)
            .map(|i| names.get(&format!("used-{i}")))
            .collect();
        assert_eq!(names.set.len(), MAX_NAMES);
        // A flood of new names while every shared one is in use: none is shared, the set stays
        // at its bound, and it is pruned (uselessly) once per MAX_NAMES misses, not per miss.
        for i in 0..MAX_NAMES * 2 {
            let text = format!("junk-{i}");
            let name = names.get(&text);
            assert_eq!(&*name, text);
            assert!(!Name::ptr_eq(&name, &names.get(&text)));
            assert_eq!(names.set.len(), MAX_NAMES);
        }
        // Two `get`s per name: 4 * MAX_NAMES misses, so four prunes.
        assert_eq!(names.prunes, 4);
        assert!(Name::ptr_eq(&names.get("used-7"), &in_use[7]));
        // Once the names fall out of use, the next prune makes room and new names are shared.
        drop(in_use);
        for i in 0..MAX_NAMES {
            let _ = names.get(&format!("later-{i}"));
        }
        assert!(names.set.len() < MAX_NAMES);
        let new = names.get("argocd-controller");
        assert!(Name::ptr_eq(&names.get("argocd-controller"), &new));
    }
}
