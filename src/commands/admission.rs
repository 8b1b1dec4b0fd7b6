//! `drift-sentinel admission export`: team invariants as ValidatingAdmissionPolicy and
//! ValidatingAdmissionPolicyBinding YAML (`drift_core::admission` decides; this writes). A rule
//! the API server cannot judge as the sink does is named with its reason and is not written;
//! the exit code is then 1 unless `--skip-unexportable`.
//!
//! Output: one YAML stream on standard output, or with `--out DIR` (new or empty) one file per
//! policy (`<policy>.yaml`: the policy and its binding) and a `kustomization.yaml` that makes
//! the directory a kustomize Component (`k8s/components/admission/` is one, written by this
//! command from the shipped example rules).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use drift_core::admission::{export, manifests, protect_managed, Action, Options, Policy};
use drift_core::classify::restorable::to_yaml;

/// What `admission export` was asked to do.
pub struct ExportArgs {
    /// Rules files and config files, in order.
    pub files: Vec<PathBuf>,
    /// Only these rules (none: all).
    pub only: Vec<String>,
    /// What the bindings do.
    pub action: Action,
    /// Add the `--protect-managed` policy.
    pub protect_managed: bool,
    /// Users let through by it besides the defaults.
    pub allowed_users: Vec<String>,
    /// The API server's minor version.
    pub minor: u32,
    /// The cluster the policies are for.
    pub cluster: Option<String>,
    /// Write the exportable rules and exit 0 when others are not.
    pub skip_unexportable: bool,
    /// The directory to write to (standard output when absent).
    pub out: Option<PathBuf>,
}

/// Parses `1.30` (or `v1.30`, `1.30.2`) into its minor version.
pub fn minor_version(text: &str) -> Result<u32, String> {
    let trimmed = text.trim().trim_start_matches('v');
    let mut parts = trimmed.split('.');
    match (
        parts.next(),
        parts.next().and_then(|minor| minor.parse::<u32>().ok()),
    ) {
        (Some("1"), Some(minor)) => Ok(minor),
        _ => Err(format!("{text:?} is not a Kubernetes version such as 1.30")),
    }
}

/// Runs the command.
pub fn run(args: ExportArgs) -> ExitCode {
    if args.minor < drift_core::admission::OLDEST_MINOR {
        eprintln!(
            "error: --kubernetes-version 1.{}: ValidatingAdmissionPolicy v1 needs Kubernetes 1.{} or later",
            args.minor,
            drift_core::admission::OLDEST_MINOR
        );
        return ExitCode::from(2);
    }
    if args.files.is_empty() && !args.protect_managed {
        eprintln!(
            "error: nothing to export: give --invariants FILE, --config FILE or --protect-managed"
        );
        return ExitCode::from(2);
    }
    let mut rules = Vec::new();
    for file in &args.files {
        match drift_core::config::load_rules_file(file) {
            Ok(loaded) => rules.extend(loaded),
            Err(error) => {
                // The loader's words are a config's; this file may be a rules file.
                let shown = match &error {
                    drift_core::config::Error::Read { path, source } => {
                        format!("cannot read {}: {source}", path.display())
                    }
                    drift_core::config::Error::Syntax(detail) => {
                        format!("not valid YAML: {detail}")
                    }
                    other => other.to_string(),
                };
                eprintln!("error: rules: {shown}");
                return ExitCode::from(2);
            }
        }
    }
    if !args.only.is_empty() {
        if let Some(missing) = args
            .only
            .iter()
            .find(|name| !rules.iter().any(|rule| &&rule.name == name))
        {
            eprintln!("error: --rule {missing}: no rule of that name in the files given");
            return ExitCode::from(2);
        }
        rules.retain(|rule| args.only.contains(&rule.name));
    }
    for user in &args.allowed_users {
        if user.starts_with("system:serviceaccounts:") || user == "system:serviceaccounts" {
            eprintln!(
                "warning: --allow {user} is a group; the policy compares user names \
                 (system:serviceaccount:NAMESPACE:NAME)"
            );
        }
    }
    let options = Options {
        action: args.action,
        minor: args.minor,
        cluster: args.cluster.clone(),
    };
    let mut exported = export(&rules, &options);
    for refusal in &exported.refused {
        eprintln!(
            "{}: rule {}: not exportable: {}",
            if args.skip_unexportable {
                "warning"
            } else {
                "error"
            },
            refusal.rule,
            refusal.reason
        );
    }
    for note in &exported.notes {
        eprintln!("note: {note}");
    }
    for rule in &exported.other_clusters {
        eprintln!("note: rule {rule} selects other clusters; not exported");
    }
    if !exported.refused.is_empty() && !args.skip_unexportable {
        eprintln!("nothing written: give --skip-unexportable to write the other rules");
        return ExitCode::from(1);
    }
    if args.protect_managed {
        exported.policies.push(protect_managed(&args.allowed_users));
    }
    let written = match &args.out {
        None => to_stdout(&exported.policies, args.action),
        Some(out) => to_directory(out, &exported.policies, args.action),
    };
    match written {
        Ok(()) => {
            let count = |n: usize, one: &str, many: &str| {
                format!("{n} {}", if n == 1 { one } else { many })
            };
            eprintln!(
                "{} written{} ({} not exportable), validationActions {:?}; needs Kubernetes 1.{}+",
                count(exported.policies.len(), "policy", "policies"),
                args.out
                    .as_ref()
                    .map_or(String::new(), |out| format!(" to {}", out.display())),
                count(exported.refused.len(), "rule", "rules"),
                args.action.validation_actions(),
                drift_core::admission::OLDEST_MINOR
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}

fn documents(policy: &Policy, action: Action) -> Result<String, String> {
    let mut text = String::new();
    for (index, manifest) in manifests(policy, action).iter().enumerate() {
        if index > 0 {
            text.push_str("---\n");
        }
        text.push_str(&to_yaml(manifest)?);
    }
    Ok(text)
}

fn to_stdout(policies: &[Policy], action: Action) -> Result<(), String> {
    let mut text = String::new();
    for policy in policies {
        text.push_str("---\n");
        text.push_str(&documents(policy, action)?);
    }
    print!("{text}");
    Ok(())
}

fn to_directory(out: &Path, policies: &[Policy], action: Action) -> Result<(), String> {
    match std::fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(format!(
                    "{}: not empty; write into a new or empty directory",
                    out.display()
                ));
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(out).map_err(|error| format!("{}: {error}", out.display()))?;
        }
        Err(error) => return Err(format!("{}: {error}", out.display())),
    }
    let mut files = Vec::new();
    for policy in policies {
        let file = format!("{}.yaml", policy.name);
        let path = out.join(&file);
        std::fs::write(&path, documents(policy, action)?)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        files.push(file);
    }
    let mut kustomization = String::from(
        "# Written by `drift-sentinel admission export` (README: \"Stop it at the door\");\n\
         # regenerate it into an emptied directory rather than edit it.\n\
         apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
    );
    if files.is_empty() {
        // Nothing to add: still a Component kustomize builds.
        kustomization.push_str("resources: []\n");
    } else {
        kustomization.push_str("resources:\n");
        for file in files {
            kustomization.push_str(&format!("  - {file}\n"));
        }
    }
    let path = out.join("kustomization.yaml");
    std::fs::write(&path, kustomization).map_err(|error| format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_kubernetes_writes_them() {
        assert_eq!(minor_version("1.30"), Ok(30));
        assert_eq!(minor_version("v1.31.2"), Ok(31));
        assert!(minor_version("2.0").is_err());
        assert!(minor_version("1").is_err());
    }
}
