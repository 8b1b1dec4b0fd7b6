//! Cluster names: which names are tracked, and the escaped form the dashboard shows beside one.
//!
//! A cluster name is an event's `cluster` extension, `defaultCluster`, a `clusters` value or
//! `resync.cluster`; every tracked object, drift, route and silence carries it. Two names that
//! look alike on a page must not be two clusters, and a name must not pass for a fleet drift's.
//! A name is refused unless:
//!
//! 1. it holds 1 to 253 bytes (a DNS subdomain's length);
//! 2. each character is printable ASCII other than space (`!` to `~`: EKS context names are
//!    ARNs, with `:` and `/`), or a non-ASCII character that Unicode's identifier profile allows
//!    (UTS #39 `Identifier_Status=Allowed`: letters, digits and marks of scripts in current use;
//!    no symbols, no compatibility forms) and that is not default-ignorable (zero-width joiners,
//!    which that profile allows in some scripts, render as nothing);
//! 3. its letters are at most UTS #39 "Highly Restrictive": one script, or Latin with Han and
//!    Japanese kana, Han and Bopomofo, or Han and Hangul (`生产-eu` is a name, `prod-еu` with a
//!    Cyrillic `е` is not);
//! 4. it does not start with `fleet:` (in any case): fleet drifts are filed under
//!    `fleet:<group>`, so an event naming such a cluster could pass for one.
//!
//! Whitespace, control characters (C0, DEL, C1) and format characters (bidi controls, zero-width
//! space, soft hyphen) all fail rule 2. Whole-script look-alikes (an all-Cyrillic `рrоd` that is
//! not mixed) pass these rules, as they pass browsers' IDN checks; the dashboard shows every
//! non-ASCII name with its [`escaped`] form beside it, so such a name is told apart on the page.

use unicode_script::{Script, UnicodeScript};
use unicode_security::{GeneralSecurityProfile, RestrictionLevel, RestrictionLevelDetection};

/// Longest cluster name in bytes: a DNS subdomain's length.
pub const MAX_BYTES: usize = 253;

/// The prefix reserved for fleet drifts' cluster field (`fleet:<group>`); the fleet module's
/// `CLUSTER_PREFIX` is this one (decode sits below classify).
pub const RESERVED_PREFIX: &str = "fleet:";

/// Why a cluster name (or a glob over names) is refused; the text names the character and its
/// position (1-based, in characters) but never repeats the name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// No characters.
    #[error("must not be empty")]
    Empty,
    /// Over [`MAX_BYTES`].
    #[error("is {0} bytes, more than the limit of {MAX_BYTES}")]
    TooLong(usize),
    /// A control character, a space or other whitespace.
    #[error("holds {point}, a control or whitespace character, at character {position}: a name is printed characters only", point = code_point(*.0), position = .1)]
    NotPrintable(char, usize),
    /// A default-ignorable code point: renders as nothing (zero-width, bidi controls, ...).
    #[error("holds {point}, an invisible character, at character {position}", point = code_point(*.0), position = .1)]
    Invisible(char, usize),
    /// A non-ASCII character outside Unicode's identifier profile (a symbol, a compatibility
    /// form, a character of a historic script).
    #[error("holds {point}, a character not allowed in identifiers (Unicode UTS #39), at character {position}", point = code_point(*.0), position = .1)]
    NotIdentifier(char, usize),
    /// Letters of scripts that UTS #39's "Highly Restrictive" level does not allow together.
    #[error("mixes the scripts {0}: a name of mixed scripts can look like another (as a Cyrillic \"е\" looks like a Latin \"e\")")]
    MixedScripts(String),
    /// Starts with [`RESERVED_PREFIX`].
    #[error("starts with {RESERVED_PREFIX:?}, reserved for fleet drifts (fleet:<group>)")]
    Reserved,
}

/// Checks a cluster name against the rules of the module documentation.
pub fn check(name: &str) -> Result<(), NameError> {
    check_text(name)
}

/// Checks a glob over cluster names (`shard.clusters`, `fleet.groups[].clusters`) by the same
/// rules: `*` and `?` are printable ASCII, so a glob that passes can only match valid names'
/// characters, and one that starts with `fleet:` would match no event's cluster.
pub fn check_glob(pattern: &str) -> Result<(), NameError> {
    check_text(pattern)
}

fn check_text(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_BYTES {
        return Err(NameError::TooLong(name.len()));
    }
    let mut ascii = true;
    for (index, character) in name.chars().enumerate() {
        let position = index + 1;
        if character.is_ascii_graphic() {
            continue;
        }
        ascii = false;
        if character.is_control() || character.is_whitespace() {
            return Err(NameError::NotPrintable(character, position));
        }
        if default_ignorable(character) {
            return Err(NameError::Invisible(character, position));
        }
        if !character.identifier_allowed() {
            return Err(NameError::NotIdentifier(character, position));
        }
    }
    if name
        .get(..RESERVED_PREFIX.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(RESERVED_PREFIX))
    {
        return Err(NameError::Reserved);
    }
    // Printable ASCII is restriction level `ASCIIOnly`, the lowest (its letters and digits are
    // all identifier characters, its punctuation is left out below): every event's cluster name
    // is checked, and nearly all are ASCII, so their letters are not copied and looked up.
    if ascii {
        return Ok(());
    }
    // Restriction levels are defined over identifier characters: ASCII punctuation (Common
    // script, mixing with anything) is left out of the test, letters and digits are kept.
    let letters: String = name
        .chars()
        .filter(|character| !character.is_ascii() || character.is_ascii_alphanumeric())
        .collect();
    if letters.as_str().detect_restriction_level() > RestrictionLevel::HighlyRestrictive {
        return Err(NameError::MixedScripts(scripts_of(&letters)));
    }
    Ok(())
}

/// The name with every character that is not printable ASCII written as `\u{…}`, or `None` when
/// the name is printable ASCII already: what the dashboard shows beside a name, so that
/// `prod-еu` (Cyrillic `е`) reads `prod-\u{435}u` and cannot pass for `prod-eu`.
pub fn escaped(name: &str) -> Option<String> {
    if name.chars().all(|character| character.is_ascii_graphic()) {
        return None;
    }
    let mut out = String::with_capacity(name.len() * 2);
    for character in name.chars() {
        if character.is_ascii_graphic() {
            out.push(character);
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(character)));
        }
    }
    Some(out)
}

/// `U+0435`.
fn code_point(character: char) -> String {
    format!("U+{:04X}", u32::from(character))
}

/// The scripts of a name's letters, in order of appearance, e.g. `Latin, Cyrillic`.
fn scripts_of(letters: &str) -> String {
    let mut scripts: Vec<&'static str> = Vec::new();
    for character in letters.chars() {
        let script = character.script();
        if matches!(script, Script::Common | Script::Inherited | Script::Unknown) {
            continue;
        }
        let name = script.full_name();
        if !scripts.contains(&name) {
            scripts.push(name);
        }
    }
    scripts.join(", ")
}

/// Unicode's `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt, Unicode 15.1): characters
/// that render as nothing. Most are also outside the identifier profile; the profile allows
/// U+200C and U+200D (zero-width non-joiner and joiner) for some scripts, which a name refuses.
fn default_ignorable(character: char) -> bool {
    const RANGES: &[(char, char)] = &[
        ('\u{00AD}', '\u{00AD}'),
        ('\u{034F}', '\u{034F}'),
        ('\u{061C}', '\u{061C}'),
        ('\u{115F}', '\u{1160}'),
        ('\u{17B4}', '\u{17B5}'),
        ('\u{180B}', '\u{180F}'),
        ('\u{200B}', '\u{200F}'),
        ('\u{202A}', '\u{202E}'),
        ('\u{2060}', '\u{206F}'),
        ('\u{3164}', '\u{3164}'),
        ('\u{FE00}', '\u{FE0F}'),
        ('\u{FEFF}', '\u{FEFF}'),
        ('\u{FFA0}', '\u{FFA0}'),
        ('\u{FFF0}', '\u{FFF8}'),
        ('\u{1BCA0}', '\u{1BCA3}'),
        ('\u{1D173}', '\u{1D17A}'),
        ('\u{E0000}', '\u{E0FFF}'),
    ];
    RANGES
        .iter()
        .any(|&(first, last)| (first..=last).contains(&character))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_use_pass() {
        for name in [
            "prod",
            "prod-eu",
            "east-1",
            "gke_project_europe-west1_prod",
            "arn:aws:eks:eu-west-1:123456789012:cluster/prod",
            "kind-kind",
            "a",
            "生产-eu",
            "продакшн",
            "ελλάδα-1",
            "本番-クラスタ",
            "프로덕션-1",
            "café-prod",
            &"x".repeat(MAX_BYTES),
        ] {
            assert_eq!(check(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn each_refused_class_says_why() {
        let cases: &[(&str, &str)] = &[
            ("", "must not be empty"),
            (
                "prod\neu",
                "holds U+000A, a control or whitespace character, at character 5",
            ),
            ("prod\u{7f}", "U+007F, a control"),
            ("prod\u{85}", "U+0085, a control"),
            ("prod eu", "U+0020, a control or whitespace"),
            ("prod\u{a0}eu", "U+00A0, a control or whitespace"),
            ("prod\u{3000}", "U+3000, a control or whitespace"),
            (
                "prod\u{200b}eu",
                "holds U+200B, an invisible character, at character 5",
            ),
            ("prod\u{200d}eu", "U+200D, an invisible"),
            ("prod\u{202e}ue", "U+202E, an invisible"),
            ("prod\u{2066}", "U+2066, an invisible"),
            (
                "\u{feff}prod",
                "U+FEFF, an invisible character, at character 1",
            ),
            ("prod\u{ad}eu", "U+00AD, an invisible"),
            ("prod-\u{e0041}", "U+E0041, an invisible"),
            (
                "prod\u{2024}eu",
                "U+2024, a character not allowed in identifiers",
            ),
            ("prod-\u{1f600}", "U+1F600, a character not allowed"),
            ("ｐrod", "U+FF50, a character not allowed"),
            ("prod-\u{435}u", "mixes the scripts Latin, Cyrillic"),
            ("\u{440}rod", "mixes the scripts Cyrillic, Latin"),
            ("prod-\u{3b1}", "mixes the scripts Latin, Greek"),
            ("fleet:prod", "starts with \"fleet:\", reserved"),
            ("FLEET:prod", "reserved for fleet drifts"),
        ];
        for (name, reason) in cases {
            let error = check(name).expect_err(name).to_string();
            assert!(error.contains(reason), "{name:?}: {error}");
        }
        assert_eq!(
            check(&"x".repeat(MAX_BYTES + 1)),
            Err(NameError::TooLong(MAX_BYTES + 1))
        );
        // `fleet` without the colon, or later in the name, is a name like any other.
        assert_eq!(check("fleet-prod"), Ok(()));
        assert_eq!(check("prod-fleet:a"), Ok(()));
    }

    #[test]
    fn globs_follow_the_same_rules() {
        assert_eq!(check_glob("east-*"), Ok(()));
        assert_eq!(check_glob("prod-??"), Ok(()));
        assert_eq!(check_glob("*"), Ok(()));
        assert!(check_glob("fleet:*").is_err());
        assert!(check_glob("east-*\u{200b}").is_err());
        assert!(check_glob("pr\u{43e}d-*").is_err());
    }

    #[test]
    fn escaped_tells_look_alikes_apart() {
        assert_eq!(escaped("prod-eu"), None);
        assert_eq!(escaped("prod-\u{435}u").as_deref(), Some("prod-\\u{435}u"));
        assert_ne!(escaped("prod-\u{435}u"), escaped("prod-\u{65}u"));
        assert_eq!(escaped("a\u{200b}b").as_deref(), Some("a\\u{200b}b"));
        assert_eq!(escaped("a b\n").as_deref(), Some("a\\u{20}b\\u{a}"));
        assert_eq!(escaped("生产").as_deref(), Some("\\u{751f}\\u{4ea7}"));
    }
}
