//! JSON pointers (RFC 6901), as the paths of field changes use them.

/// Appends `/segment` to a JSON pointer, escaping `~` and `/`.
pub fn push_pointer(base: &str, segment: &str) -> String {
    let escaped = segment.replace('~', "~0").replace('/', "~1");
    format!("{base}/{escaped}")
}

/// Splits a JSON pointer into unescaped segments.
pub fn pointer_segments(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
        .collect()
}
