//! Shell-style wildcards, as routes, scopes, silences and watched ConfigMaps use them.

/// Shell-style wildcard match: `*` is any run of characters, `?` one character.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    // Routes, scopes and rules match on every event: ASCII (nearly every pattern and name) is
    // matched byte by byte with no allocation; otherwise by characters, so `?` is one character.
    if pattern.is_ascii() && text.is_ascii() {
        return matches(pattern.as_bytes(), text.as_bytes());
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    matches(&pattern, &text)
}

/// The match over units of one kind (bytes of ASCII text, or characters).
fn matches<T: Copy + PartialEq + From<u8>>(pattern: &[T], text: &[T]) -> bool {
    let (any, one) = (T::from(b'*'), T::from(b'?'));
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == one || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == any {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    while p < pattern.len() && pattern[p] == any {
        p += 1;
    }
    p == pattern.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match(
            "knative-serving/config-*",
            "knative-serving/config-autoscaler"
        ));
        assert!(!glob_match(
            "knative-serving/config-*",
            "knative-serving/other"
        ));
        assert!(glob_match("team-?", "team-a"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        // `?` is one character, not one byte, when either side is not ASCII.
        assert!(glob_match("团队-?", "团队-甲"));
        assert!(glob_match("team-?", "team-甲"));
        assert!(!glob_match("team-??", "team-甲"));
        assert!(glob_match("*甲", "team-甲"));
        assert!(!glob_match("team-?", "team-ab"));
    }
}
