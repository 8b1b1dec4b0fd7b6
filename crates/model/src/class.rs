//! What a drift class is called and how loud it is by default: its entry in the catalogue. The
//! engine's classes each carry one; whoever only names classes (the renderers, the dashboard,
//! the docs) reads the catalogue and never the engine.

use crate::Severity;

/// One drift class as people read about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassInfo {
    /// The public id (`manual_edit`): drift ids, routes, silences and the API use it.
    pub id: &'static str,
    /// Its name in English (`Manual edit`).
    pub english: &'static str,
    /// Its name in Simplified Chinese (`手动修改`).
    pub chinese: &'static str,
    /// Its severity unless `rules.classes` says otherwise.
    pub severity: Severity,
}

/// Every class's [`ClassInfo`], in the registry's order.
#[derive(Debug, Clone, Default)]
pub struct ClassCatalog {
    classes: Vec<&'static ClassInfo>,
}

impl ClassCatalog {
    /// A catalogue of these classes.
    pub fn new(classes: Vec<&'static ClassInfo>) -> ClassCatalog {
        ClassCatalog { classes }
    }

    /// The class with this id.
    pub fn by_id(&self, id: &str) -> Option<&'static ClassInfo> {
        self.classes.iter().copied().find(|class| class.id == id)
    }

    /// Every class, in the registry's order.
    pub fn iter(&self) -> impl Iterator<Item = &'static ClassInfo> + '_ {
        self.classes.iter().copied()
    }
}
