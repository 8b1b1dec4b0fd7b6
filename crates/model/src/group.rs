//! API groups as people think of them: families of Kubernetes API groups (Serving, Eventing,
//! Networking, Operator, Kubernetes). The one place that defines them: the drift API's and the
//! dashboard's `group` filter, the report and the dashboard's overview all take them from here.
//!
//! A filter names a family by its id (`eventing`, any case) or one exact group of a family
//! (`messaging.knative.dev`); the core group, whose `apiVersion` has no group part (`v1`), is
//! written `core`. A group of no family (`batch`, a custom resource's) is counted as "Other" and
//! cannot be filtered on.

/// A family of API groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupFamily {
    /// The id a filter takes (`eventing`), lower case.
    pub id: &'static str,
    /// The name people read (`Eventing`).
    pub name: &'static str,
    /// Its API groups, as written in `apiVersion` (`""` is the core group).
    pub groups: &'static [&'static str],
}

/// Every family, in the order pages show them.
pub const FAMILIES: &[GroupFamily] = &[
    GroupFamily {
        id: "serving",
        name: "Serving",
        groups: &["serving.knative.dev"],
    },
    GroupFamily {
        id: "eventing",
        name: "Eventing",
        groups: &[
            "eventing.knative.dev",
            "messaging.knative.dev",
            "flows.knative.dev",
            "sources.knative.dev",
            "sinks.knative.dev",
        ],
    },
    GroupFamily {
        id: "networking",
        name: "Networking",
        groups: &[
            "networking.internal.knative.dev",
            "autoscaling.internal.knative.dev",
        ],
    },
    GroupFamily {
        id: "operator",
        name: "Operator",
        groups: &["operator.knative.dev"],
    },
    GroupFamily {
        id: "kubernetes",
        name: "Kubernetes",
        groups: &["", "apps"],
    },
];

/// How a filter and a page write the core group (`apiVersion: v1`, whose group is empty).
pub(crate) const CORE_GROUP: &str = "core";

/// The name pages show for groups of no family.
pub const OTHER_FAMILY: &str = "Other";

/// The group part of an `apiVersion` (`""` for the core group's `v1`).
pub fn api_group(api_version: &str) -> &str {
    match api_version.split_once('/') {
        Some((group, _)) => group,
        None => "",
    }
}

/// The family a group belongs to, if any.
pub fn family_of(group: &str) -> Option<&'static GroupFamily> {
    FAMILIES
        .iter()
        .find(|family| family.groups.contains(&group))
}

/// A family by its id, any case.
pub fn family(id: &str) -> Option<&'static GroupFamily> {
    FAMILIES
        .iter()
        .find(|family| family.id.eq_ignore_ascii_case(id))
}

/// How a group is written in a filter and on a page (`core` for the core group).
pub fn group_label(group: &str) -> &str {
    if group.is_empty() {
        CORE_GROUP
    } else {
        group
    }
}

/// The API groups a `group` filter's value selects: every group of a family (by id, any case),
/// or one group of a family as written by [`group_label`]; `None` for any other value.
pub fn groups_selected_by(value: &str) -> Option<Vec<&'static str>> {
    if let Some(family) = family(value) {
        return Some(family.groups.to_vec());
    }
    FAMILIES
        .iter()
        .flat_map(|family| family.groups.iter())
        .find(|group| group_label(group) == value)
        .map(|group| vec![*group])
}

/// Every value a `group` filter takes: the family ids, then each family's groups.
pub fn filter_values() -> Vec<&'static str> {
    FAMILIES
        .iter()
        .map(|family| family.id)
        .chain(
            FAMILIES
                .iter()
                .flat_map(|family| family.groups.iter().map(|group| group_label(group))),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_exact_groups_select_groups() {
        assert_eq!(
            groups_selected_by("eventing").unwrap(),
            [
                "eventing.knative.dev",
                "messaging.knative.dev",
                "flows.knative.dev",
                "sources.knative.dev",
                "sinks.knative.dev"
            ]
        );
        assert_eq!(
            groups_selected_by("Networking").unwrap(),
            groups_selected_by("networking").unwrap()
        );
        assert_eq!(
            groups_selected_by("sources.knative.dev").unwrap(),
            ["sources.knative.dev"]
        );
        assert_eq!(groups_selected_by("core").unwrap(), [""]);
        assert_eq!(groups_selected_by("kubernetes").unwrap(), ["", "apps"]);
        for unknown in [
            "",
            "batch",
            "knative",
            "SERVING.knative.dev",
            "v1",
            "serving ",
        ] {
            assert_eq!(groups_selected_by(unknown), None, "{unknown:?}");
        }
        // Every value offered is taken, and no group is in two families.
        for value in filter_values() {
            assert!(groups_selected_by(value).is_some(), "{value}");
        }
        let groups: Vec<&str> = FAMILIES
            .iter()
            .flat_map(|f| f.groups.iter().copied())
            .collect();
        let mut unique = groups.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), groups.len());
    }

    #[test]
    fn the_group_of_an_api_version() {
        assert_eq!(api_group("eventing.knative.dev/v1"), "eventing.knative.dev");
        assert_eq!(api_group("v1"), "");
        assert_eq!(family_of(api_group("apps/v1")).unwrap().name, "Kubernetes");
        assert_eq!(family_of(api_group("v1")).unwrap().id, "kubernetes");
        assert_eq!(family_of("batch"), None);
    }
}
