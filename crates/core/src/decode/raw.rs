//! A JSON object read one level deep: its members as borrowed, unparsed JSON texts. What lets
//! decode parse only the parts of an event the pipeline reads (BENCHMARKS.md, issue 28): a
//! member nobody reads (most of `status`, unknown fields) is skipped by the scanner and never
//! becomes a tree, and `managedFields`' field tries stay text until attribution asks.

use std::borrow::Cow;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::data::Counted;

/// The members of one JSON object, in document order, each value as its JSON text.
pub(crate) struct Members<'a>(pub Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Members<'a> {
    /// Reads `text` as an object; `None` when it is JSON of another type (or not JSON).
    pub(crate) fn of(text: &'a str) -> Option<Members<'a>> {
        serde_json::from_str(text).ok()
    }

    /// The value of `key`: the last one when the object repeats it (JSON's usual last-wins, as
    /// a `serde_json::Map` keeps it).
    pub(crate) fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0
            .iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| *value)
    }
}

/// The first of `names` that appears twice (the first whose second appearance comes first), if
/// any: a structured event's members, whose attributes may not repeat.
pub(crate) fn first_repeated<'a>(names: &[&'a str]) -> Option<&'a str> {
    // Events have a dozen members: pairwise is cheaper than building a set. A forged one with
    // thousands would make pairwise quadratic: a set then.
    if names.len() <= 16 {
        return names
            .iter()
            .enumerate()
            .find_map(|(index, name)| names[..index].contains(name).then_some(*name));
    }
    let mut seen = std::collections::HashSet::with_capacity(names.len());
    names.iter().find(|name| !seen.insert(**name)).copied()
}

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::with_capacity(access.size_hint().unwrap_or(8));
                while let Some(Key(key)) = access.next_key::<Key<'de>>()? {
                    let value = access.next_value::<&'de RawValue>()?;
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// The JSON text of member `key` of `text`, which must be a valid JSON document (a stored
/// status, a `RawValue`): the last one when the object repeats it, as [`Members::get`] answers;
/// `None` for another type or no such member. Values are jumped over, not parsed (the classes
/// read a status field or two per class on every event; parsing every member to find one was
/// most of it). An escaped key, and what the jump finds out of place (a missing value, text
/// after the object), are answered by [`Members`] instead; other invalid text gets some answer,
/// never a panic.
pub(crate) fn member<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    match jump_to_member(text.as_bytes(), key.as_bytes()) {
        Some(found) => found.and_then(|(start, end)| text.get(start..end)),
        None => Members::of(text)?.get(key).map(RawValue::get),
    }
}

/// [`member`]'s jump: `Some(found)` when the text was read to its end, `found` being the byte
/// range of the last value named `key`; `None` when [`Members`] must answer.
fn jump_to_member(bytes: &[u8], key: &[u8]) -> Option<Option<(usize, usize)>> {
    let mut found = None;
    walk_members(bytes, |name, start, end| {
        if name == key {
            found = Some((start, end));
        }
        true
    })?;
    Some(found)
}

/// Reads an object's members in document order, each as its name (unescaped only when it has
/// no escape) and its value's byte range, until `visit` says stop (`false`): `Some(())` when
/// the text was read as an object (or is valid JSON of another type: nothing visited), `None`
/// when [`Members`] must answer (an escaped name, text out of place).
fn walk_members<'b>(
    bytes: &'b [u8],
    mut visit: impl FnMut(&'b [u8], usize, usize) -> bool,
) -> Option<()> {
    let mut at = skip_space(bytes, 0);
    match bytes.get(at) {
        Some(b'{') => at += 1,
        // Valid JSON of another type.
        Some(_) => return Some(()),
        None => return None,
    }
    at = skip_space(bytes, at);
    if bytes.get(at) == Some(&b'}') {
        return (skip_space(bytes, at + 1) == bytes.len()).then_some(());
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let name_end = string_end(bytes, at + 1)?;
        let name = bytes.get(at + 1..name_end - 1)?;
        if name.contains(&b'\\') {
            return None;
        }
        at = skip_space(bytes, name_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_space(bytes, at + 1);
        let end = value_end(bytes, start)?;
        if end == start {
            return None;
        }
        if !visit(name, start, end) {
            return Some(());
        }
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            // The object is the whole document.
            Some(b'}') if skip_space(bytes, at + 1) == bytes.len() => return Some(()),
            _ => return None,
        }
    }
}

/// The members of a JSON object's text, in document order, as names and value texts, jumped
/// over as [`member`] jumps: `None` for another type, an escaped name or text out of place
/// (then [`Members`] reads it). The values are not checked: on a text that was not checked as
/// JSON (a structured request's body, `cloudevent::fast_structured`), the caller parses each
/// value it keeps, or has its reader check it.
pub(crate) fn member_texts(text: &str) -> Option<Vec<(&str, &str)>> {
    let bytes = text.as_bytes();
    if bytes.get(skip_space(bytes, 0)) != Some(&b'{') {
        return None;
    }
    let mut members = Vec::new();
    let mut whole = true;
    walk_members(bytes, |name, start, end| {
        match (std::str::from_utf8(name).ok(), text.get(start..end)) {
            (Some(name), Some(value)) => members.push((name, value)),
            _ => whole = false,
        }
        whole
    })?;
    whole.then_some(members)
}

/// The elements of a JSON array's text (valid JSON, checked when it was decoded), jumped over
/// as [`pointer`] jumps: `None` for another type or text out of place.
pub(crate) fn element_texts(text: &str) -> Option<Vec<&str>> {
    let mut elements = Vec::new();
    let mut whole = true;
    walk_elements(text.as_bytes(), |start, end| {
        match text.get(start..end) {
            Some(element) => elements.push(element),
            None => whole = false,
        }
        whole
    })?;
    whole.then_some(elements)
}

/// The text of the value at `pointer` in the JSON `text`, found as `serde_json::Value::pointer`
/// finds it in the parsed tree (RFC 6901: `~1` reads `/`, `~0` reads `~`; an array index is
/// digits without a leading zero or sign): `Some(None)` when there is no such value, `None`
/// when only the parser can tell (an escaped member name, text out of place). The values on
/// the way are jumped over, not parsed: a class that reads two fields of a spec does not build
/// a tree of the whole spec.
pub(crate) fn pointer<'a>(text: &'a str, pointer: &str) -> Option<Option<&'a str>> {
    if pointer.is_empty() {
        return Some(Some(text));
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Some(None);
    };
    let mut value = text;
    for segment in rest.split('/') {
        let segment = if segment.contains('~') {
            Cow::Owned(segment.replace("~1", "/").replace("~0", "~"))
        } else {
            Cow::Borrowed(segment)
        };
        let bytes = value.as_bytes();
        let found = match bytes.get(skip_space(bytes, 0)) {
            Some(b'{') => jump_to_member(bytes, segment.as_bytes())?,
            Some(b'[') => match array_index(&segment) {
                Some(index) => jump_to_element(bytes, index)?,
                None => None,
            },
            Some(_) => None,
            None => return None,
        };
        let Some((start, end)) = found else {
            return Some(None);
        };
        value = value.get(start..end)?;
    }
    Some(Some(value))
}

/// An array index as `serde_json`'s pointer reads one.
fn array_index(segment: &str) -> Option<usize> {
    if segment.starts_with('+') || (segment.starts_with('0') && segment.len() != 1) {
        return None;
    }
    segment.parse().ok()
}

/// [`pointer`]'s jump into an array (valid JSON, checked when it was decoded): `Some(found)`,
/// `found` being the byte range of element `index`; `None` for text out of place.
fn jump_to_element(bytes: &[u8], index: usize) -> Option<Option<(usize, usize)>> {
    let mut found = None;
    let mut position = 0;
    walk_elements(bytes, |start, end| {
        if position == index {
            found = Some((start, end));
            return false;
        }
        position += 1;
        true
    })?;
    Some(found)
}

/// Reads an array's elements in order, each as its byte range, until `visit` says stop
/// (`false`): `Some(())` when the text was read as an array, `None` for another type or text
/// out of place.
fn walk_elements(bytes: &[u8], mut visit: impl FnMut(usize, usize) -> bool) -> Option<()> {
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    if bytes.get(at) == Some(&b']') {
        return (skip_space(bytes, at + 1) == bytes.len()).then_some(());
    }
    loop {
        let end = value_end(bytes, at)?;
        if end == at {
            return None;
        }
        if !visit(at, end) {
            return Some(());
        }
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            // The array is the whole text.
            Some(b']') if skip_space(bytes, at + 1) == bytes.len() => return Some(()),
            _ => return None,
        }
    }
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        at += 1;
    }
    at
}

/// The index of the first `"` or `\\` in `bytes` at or after `at`, if any.
///
/// Most strings of an object are short (keys, names, a condition's type): the first 32 bytes
/// are searched a word at a time, and memchr's vector search, whose set-up costs more than a
/// short string, takes over beyond them (BENCHMARKS.md, issue 28, eighteenth round).
#[inline]
pub(crate) fn quote_or_backslash(bytes: &[u8], at: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);
    // The bytes of `word` that are zero have their high bit set; a byte above a zero byte may
    // be flagged too (a borrow), never one below, so the lowest flag is exact.
    let zero_bytes = |word: u64| word.wrapping_sub(ONES) & !word & HIGHS;
    let rest = bytes.get(at..)?;
    let mut offset = 0;
    while offset < 32 {
        let Some(word) = rest.get(offset..).and_then(|tail| tail.first_chunk::<8>()) else {
            // Fewer than 8 bytes left.
            let tail = rest.get(offset..)?;
            return tail
                .iter()
                .position(|byte| matches!(byte, b'"' | b'\\'))
                .map(|found| at + offset + found);
        };
        // Little-endian: the lowest flag is the first byte in memory.
        let word = u64::from_le_bytes(*word);
        let found = zero_bytes(word ^ QUOTES) | zero_bytes(word ^ BACKSLASHES);
        if found != 0 {
            return Some(at + offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    memchr::memchr2(b'"', b'\\', rest.get(offset..)?).map(|found| at + offset + found)
}

/// Where the string whose body starts at `at` ends (after its closing quote).
fn string_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        at = quote_or_backslash(bytes, at)? + 1;
        if bytes.get(at - 1) == Some(&b'"') {
            return Some(at);
        }
        // An escape: the escaped character is skipped whole.
        at += 1;
    }
}

/// Where the value starting at `at` ends.
fn value_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at + 1),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match bytes.get(at)? {
                    b'"' => {
                        at = string_end(bytes, at + 1)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        // A number, `true`, `false` or `null`: to the next delimiter.
        _ => {
            while !matches!(
                bytes.get(at),
                None | Some(b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
            ) {
                at += 1;
            }
            Some(at)
        }
    }
}

/// A member name, borrowed from the input unless it holds an escape.
pub(crate) struct Key<'a>(pub(crate) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(text.to_string())))
            }

            fn visit_string<E>(self, text: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// The elements of a JSON array as their JSON texts; `None` for another type.
pub(crate) fn elements(raw: &RawValue) -> Option<Vec<&RawValue>> {
    serde_json::from_str(raw.get()).ok()
}

/// Deepest nesting a document may have: what serde_json's parser allows (127), so a document
/// is refused alike whether a part of it is parsed into a tree or only scanned (the scanner
/// that skips a member has no limit of its own).
pub(crate) const MAX_DEPTH: usize = 127;

/// True when the JSON text is `null`.
pub(crate) fn is_null(raw: &RawValue) -> bool {
    raw.get() == "null"
}

/// What one pass over a JSON text found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scanned {
    /// No whitespace outside strings: the text can be kept as it is.
    pub compact: bool,
    /// No number with an exponent and no run of 300 or more digits: every number fits an
    /// `f64`, so no part of the text can fail to parse later for a number out of range.
    pub plain_numbers: bool,
    /// No `\u` escape in any string, but those of a `data` object the scan read itself
    /// ([`DataSpan::counted`]), whose pairs it checked. The scanner that skips members does not
    /// check that an escaped surrogate has its pair (the tree parser refuses a lone one), so a
    /// text with escapes is checked whole (see [`Scanned::needs_full_check`]).
    pub no_unicode_escapes: bool,
    /// Where the top-level member `data` (a ConfigMap's values) is, when its value is an object
    /// and no other top-level member is named `data` as written (BENCHMARKS.md, issue 28: large
    /// objects).
    pub data: Option<DataSpan>,
    /// Where the top-level member `spec` is (its value's first and past-last byte), when its
    /// value is an object and no other top-level member is named `spec` as written: the
    /// one-pass reader reads it for its view and takes its text from here, instead of reading
    /// it a second time (BENCHMARKS.md, issue 28).
    pub spec: Option<(usize, usize)>,
}

/// Where a ConfigMap's `data` object is in the scanned text, and what the scan found in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DataSpan {
    pub start: usize,
    pub end: usize,
    /// The object checked and counted by the scan ([`Counted::scan`]), which then read no other
    /// flag in it: its whitespace makes the text not compact, its `\u` escapes were checked
    /// (surrogates in pairs) so they ask for no full check, and it holds no number. `None`
    /// when the scan left it to the one-pass reader, which checks and counts it as it reads
    /// it, taking its text from here instead of reading it twice.
    pub counted: Option<Counted>,
}

impl Scanned {
    /// True when only a full parse can tell whether every part of the text parses: a number
    /// that may be out of range, or a `\u` escape that may be a lone surrogate. The tree parser
    /// refused such a text wherever the number or escape was; parts that are only skipped would
    /// not, and parts parsed later (a spec, a field trie) would fail then, silently.
    pub(crate) fn needs_full_check(&self) -> bool {
        !self.plain_numbers || !self.no_unicode_escapes
    }
}

/// Scans JSON text once, outside strings: refuses nesting deeper than [`MAX_DEPTH`], and says
/// whether the text is compact and its numbers plain, and where its `data` and `spec` objects
/// are ([`Scanned`]), reading the `data` object itself ([`Counted::scan`]) when it can. The text
/// need not have been checked yet (a binary-mode body is read by the one-pass reader after
/// this, which refuses what is not JSON): a string left open runs to the end, brackets that do
/// not balance only move the depth, and the spans are used only once the reader has read the
/// whole text (the `data` member, or `{}` in its place when the scan read it:
/// `fast::cut_data`; the `spec` member, read for its view).
pub(crate) fn scan(text: &str) -> Result<Scanned, String> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut scanned = Scanned {
        compact: true,
        plain_numbers: true,
        no_unicode_escapes: true,
        data: None,
        spec: None,
    };
    let mut digits = 0usize;
    let mut previous = 0u8;
    let mut at = 0usize;
    // The top-level `data` member: how many there are, and where the value of the first (an
    // object) starts and, once its closing brace brings the depth back to 1, ends.
    let (mut data_members, mut data_start, mut data_end) = (0usize, None, None);
    let mut data_counted = None;
    // The same for the top-level `spec` member (an object's end is where the depth comes back
    // to 1 after its start).
    let (mut spec_members, mut spec_start, mut spec_end) = (0usize, None, None);
    while let Some(&byte) = bytes.get(at) {
        at += 1;
        match byte {
            b'"' if depth == 1 && bytes.get(at..at + 5) == Some(b"spec\"") => {
                // Jumped over as any string; then a key if a colon follows. The bytes after it
                // are scanned as usual (whitespace, the object's own brackets).
                at += 5;
                if let Some(value) = value_after_colon(bytes, at) {
                    spec_members += 1;
                    if spec_members == 1 && bytes.get(value) == Some(&b'{') {
                        spec_start = Some(value);
                    }
                }
            }
            b'"' if depth == 1 && bytes.get(at..at + 5) == Some(b"data\"") => {
                // Jumped over as any string; then a key if a colon follows.
                at += 5;
                if let Some(next) = value_after_colon(bytes, at) {
                    data_members += 1;
                    if data_members == 1 && bytes.get(next) == Some(&b'{') {
                        data_start = Some(next);
                        // Read here, once, and jumped over (the flags it could move are
                        // `DataSpan::counted`'s); else scanned on as any object.
                        if let Some(read) = Counted::scan(bytes, next) {
                            // Whitespace around the colon, or inside.
                            scanned.compact &= next == at + 1 && !read.spaced;
                            data_end = Some(read.end);
                            data_counted = Some(read.counted);
                            at = read.end;
                            digits = 0;
                            previous = b'}';
                            continue;
                        }
                    }
                }
            }
            b'"' => {
                // To the closing quote, jumping from one quote or backslash to the next (most
                // of an object's bytes are inside strings: a ConfigMap's values, a Pod's
                // commands); an escaped character is skipped whole and `\u` is noted.
                loop {
                    let Some(found) = quote_or_backslash(bytes, at) else {
                        // Not closed (the parser closed every string before): to the end.
                        at = bytes.len();
                        break;
                    };
                    at = found + 1;
                    let found = bytes.get(found).copied();
                    if found == Some(b'"') {
                        break;
                    }
                    scanned.no_unicode_escapes &= bytes.get(at) != Some(&b'u');
                    at += 1;
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!(
                        "recursion limit exceeded: nested deeper than {MAX_DEPTH} levels"
                    ));
                }
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 1 && data_start.is_some() && data_end.is_none() {
                    data_end = Some(at);
                }
                if depth == 1 && spec_start.is_some() && spec_end.is_none() {
                    spec_end = Some(at);
                }
            }
            b' ' | b'\n' | b'\r' | b'\t' => scanned.compact = false,
            b'0'..=b'9' => {
                digits += 1;
                if digits >= 300 {
                    scanned.plain_numbers = false;
                }
            }
            // An exponent follows a digit or a decimal point (`true` and `false` hold an `e`
            // after a letter).
            b'e' | b'E' if previous.is_ascii_digit() || previous == b'.' => {
                scanned.plain_numbers = false;
            }
            _ => {}
        }
        if !byte.is_ascii_digit() {
            digits = 0;
        }
        previous = byte;
    }
    if spec_members == 1 {
        scanned.spec = spec_start.zip(spec_end);
    }
    if data_members == 1 {
        scanned.data = data_start.zip(data_end).map(|(start, end)| DataSpan {
            start,
            end,
            counted: data_counted,
        });
    }
    Ok(scanned)
}

/// Where the value after a member name ending before `at` starts, when a colon follows the
/// name (whitespace around it skipped); `None` when the string was not a member name.
fn value_after_colon(bytes: &[u8], mut at: usize) -> Option<usize> {
    while matches!(bytes.get(at), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        at += 1;
    }
    if bytes.get(at) != Some(&b':') {
        return None;
    }
    at += 1;
    while matches!(bytes.get(at), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        at += 1;
    }
    Some(at)
}

#[cfg(test)]
#[path = "tests/raw.rs"]
mod tests;

#[cfg(test)]
#[path = "tests/raw_pointer.rs"]
mod pointer_tests;
