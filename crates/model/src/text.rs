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

/// True for a character a reader cannot see but that changes what is shown: a control
/// character other than tab and line feed (C0, DEL, C1), a bidirectional control (U+061C,
/// U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069: they reorder the text around them), a
/// zero-width or invisible format character (U+00AD, U+180E, U+200B to U+200D, U+2060 to
/// U+2064, U+FEFF), or a line or paragraph separator (U+2028, U+2029: a line break some
/// readers take and others do not).
pub fn is_hidden(character: char) -> bool {
    (character.is_control() && !matches!(character, '\t' | '\n'))
        || matches!(
            character,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// Text with every [`is_hidden`] character written as its `\u0000`-style escape, as JSON writes
/// it: what every human-readable output (the dashboard's HTML, `check`'s text and Markdown, the
/// API's Markdown report) does to object and server text, so a raw NUL or a zero-width space
/// cannot hide, a bidi override cannot reorder what is read, and an ESC cannot rewrite the
/// terminal or CI log that prints it.
pub fn show_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for character in text.chars() {
        if is_hidden(character) {
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
        // Bidi controls, zero-width characters and separators are shown too; other
        // non-ASCII text is left as it is.
        assert_eq!(
            super::show_controls("a\u{202e}b\u{200b}c\u{2028}d\u{2066}é生"),
            "a\\u202eb\\u200bc\\u2028d\\u2066é生"
        );
    }
}
