//! Loading: YAML text → generic value → `${VAR}` interpolation on string values only (so an
//! environment value can never inject YAML structure) → typed [`Config`] with the key path of any
//! type error → semantic validation ([`super::validate`]).

use std::path::Path;

use super::{validate::validate, Config, Error};

/// Loads, interpolates and validates a configuration file.
pub fn load_file(path: &Path) -> Result<Config, Error> {
    load_file_text(path).map(|(config, _)| config)
}

/// [`load_file`], with the text the config was loaded from (what hot reload compares later
/// reads of the file with).
pub fn load_file_text(path: &Path) -> Result<(Config, String), Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config = load_str(&text, &|name| std::env::var(name).ok())?;
    Ok((config, text))
}

/// Loads a configuration from text, resolving `${VAR}` through `lookup_env`.
pub fn load_str(text: &str, lookup_env: &dyn Fn(&str) -> Option<String>) -> Result<Config, Error> {
    let mut value = parse(text)?;
    interpolate(&mut value, "", lookup_env)?;
    let config: Config = serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let path = if path == "." {
            "<root>".to_string()
        } else {
            path
        };
        Error::invalid(path, redact_urls(&error.into_inner().to_string()))
    })?;
    validate(&config)?;
    Ok(config)
}

/// The file's top-level sections as written, before `${VAR}` interpolation (so no secret is
/// read into them): what hot reload compares to tell which sections an edit changed.
pub fn sections(text: &str) -> Result<serde_json::Map<String, serde_json::Value>, Error> {
    match parse(text)? {
        serde_json::Value::Object(sections) => Ok(sections),
        // Not a mapping: `load_str` names the problem; nothing to compare.
        _ => Ok(serde_json::Map::new()),
    }
}

/// YAML text as a generic value, keys without a value removed.
fn parse(text: &str) -> Result<serde_json::Value, Error> {
    // An empty file (or one holding only comments) is the all-defaults configuration.
    let mut value: serde_json::Value = if text.trim().is_empty() {
        serde_json::Value::Object(Default::default())
    } else {
        serde_saphyr::from_str(text).map_err(|error| Error::Syntax(error.to_string()))?
    };
    if value.is_null() {
        value = serde_json::Value::Object(Default::default());
    }
    strip_nulls(&mut value);
    Ok(value)
}

/// Replaces URLs in an error message: webhook URLs carry tokens, and a type error quotes the
/// value it rejected.
pub(crate) fn redact_urls(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest
        .find("http://")
        .into_iter()
        .chain(rest.find("https://"))
        .min()
    {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '`')
            .unwrap_or(tail.len());
        out.push_str("<redacted URL>");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// A key with no value (`defaults:` followed only by comments) means "not set", as it does in
/// Kubernetes manifests.
fn strip_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, item| !item.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Replaces `${VAR}` in every string value; `$${` escapes a literal `${`.
fn interpolate(
    value: &mut serde_json::Value,
    path: &str,
    lookup_env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), Error> {
    match value {
        serde_json::Value::String(text) if text.contains("${") => {
            *text = interpolate_str(text, path, lookup_env)?;
        }
        serde_json::Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                interpolate(item, &format!("{path}[{index}]"), lookup_env)?;
            }
        }
        serde_json::Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                interpolate(item, &child, lookup_env)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn interpolate_str(
    text: &str,
    path: &str,
    lookup_env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Error> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        if let Some(escaped) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = escaped;
        } else if let Some(body) = tail.strip_prefix("${") {
            let end = body
                .find('}')
                .ok_or_else(|| Error::invalid(path, "unterminated ${...} reference".to_string()))?;
            let name = &body[..end];
            let valid =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(Error::invalid(
                    path,
                    format!("invalid environment variable name {name:?} in ${{...}}"),
                ));
            }
            let resolved = lookup_env(name).ok_or_else(|| Error::MissingEnv {
                path: path.to_string(),
                var: name.to_string(),
            })?;
            out.push_str(&resolved);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}
