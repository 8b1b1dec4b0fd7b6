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

/// Text with every control character but tab and line feed (C0, DEL, C1) written as its
/// `\u0000`-style escape, as JSON writes it: what every human-readable output (the dashboard's
/// HTML, `check`'s text and Markdown, the API's Markdown report) does to object and server text,
/// so a raw NUL cannot hide and an ESC cannot rewrite the terminal or CI log that prints it.
pub fn show_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|character| character.is_control() && !matches!(character, '\t' | '\n'))
    {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for character in text.chars() {
        if character.is_control() && !matches!(character, '\t' | '\n') {
            out.push_str(&format!("\\u{:04x}", u32::from(character)));
        } else {
            out.push(character);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_shown_as_escapes_but_tabs_and_line_feeds_stay() {
        assert_eq!(super::show_controls("a\tb\nc"), "a\tb\nc");
        assert_eq!(
            super::show_controls("evil\u{1b}]0;x\u{7}\u{0}\r\u{7f}\u{85}"),
            "evil\\u001b]0;x\\u0007\\u0000\\u000d\\u007f\\u0085"
        );
    }
}
