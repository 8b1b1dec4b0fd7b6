//! How a drift's object and actor are named in messages, the dashboard and reports.

use super::Drift;

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn object_path(drift: &Drift) -> String {
    if drift.namespace.is_empty() {
        drift.name.clone()
    } else {
        format!("{}/{}", drift.namespace, drift.name)
    }
}

/// `kubectl-edit (Update), jane, 2023-...`: who changed the object, when the evidence says.
pub fn actor_text(drift: &Drift) -> Option<String> {
    let actor = drift.evidence.actor.as_ref()?;
    let mut text = format!("{} ({})", actor.manager, actor.operation);
    if let Some(user) = &actor.user {
        text.push_str(&format!(", {user}"));
    }
    if let Some(time) = &actor.time {
        text.push_str(&format!(", {time}"));
    }
    Some(text)
}

/// Quotes a string for a POSIX shell.
pub fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}
