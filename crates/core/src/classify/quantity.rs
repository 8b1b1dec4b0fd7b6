//! Kubernetes resource quantities (`500m`, `0.5`, `1Gi`, `1e3`), compared by value: the API
//! server stores a quantity in its canonical form, so `1000m` in Git is `1` live and the two
//! must compare equal. Pure; a text that is not a quantity is `None` and is compared as text.

/// Nano-units per unit: Kubernetes keeps quantities to nine decimal places.
const NANO: i128 = 1_000_000_000;

/// The value of a quantity in nano-units, or `None` when the text is not a quantity (or is too
/// large to hold).
pub(crate) fn nano_units(text: &str) -> Option<i128> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole
            .chars()
            .chain(fraction.chars())
            .all(|c| c.is_ascii_digit())
        || fraction.len() > 9
    {
        return None;
    }
    // The mantissa in nano-units.
    let mut value: i128 = 0;
    for digit in whole.chars().chain(fraction.chars()) {
        value = value
            .checked_mul(10)?
            .checked_add(i128::from(digit.to_digit(10)?))?;
    }
    value = value.checked_mul(10_i128.pow(9 - fraction.len() as u32))?;
    let scaled = match suffix {
        "" => Some(value),
        "n" => value.checked_div(NANO),
        "u" => value.checked_div(1_000_000),
        "m" => value.checked_div(1_000),
        "k" => value.checked_mul(1_000),
        "M" => value.checked_mul(1_000_000),
        "G" => value.checked_mul(1_000_000_000),
        "T" => value.checked_mul(10_i128.pow(12)),
        "P" => value.checked_mul(10_i128.pow(15)),
        "E" => value.checked_mul(10_i128.pow(18)),
        "Ki" => value.checked_mul(1 << 10),
        "Mi" => value.checked_mul(1 << 20),
        "Gi" => value.checked_mul(1 << 30),
        "Ti" => value.checked_mul(1 << 40),
        "Pi" => value.checked_mul(1 << 50),
        "Ei" => value.checked_mul(1 << 60),
        exponent => {
            let power: i32 = exponent
                .strip_prefix(['e', 'E'])?
                .parse()
                .ok()
                .filter(|power: &i32| power.abs() <= 18)?;
            if power >= 0 {
                value.checked_mul(10_i128.pow(power.unsigned_abs()))
            } else {
                value.checked_div(10_i128.pow(power.unsigned_abs()))
            }
        }
    }?;
    Some(if negative { -scaled } else { scaled })
}

/// True when the JSON pointer is a container's resource quantity
/// (`.../resources/requests/cpu`, `.../resources/limits/memory`).
pub(crate) fn is_quantity_path(path: &str) -> bool {
    let mut parts = path.rsplit('/');
    let _name = parts.next();
    matches!(parts.next(), Some("requests" | "limits")) && parts.next() == Some("resources")
}

/// Two quantities (JSON strings or numbers) with the same value.
pub(crate) fn same_quantity(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    let value = |v: &serde_json::Value| match v {
        serde_json::Value::String(text) => nano_units(text),
        serde_json::Value::Number(number) => nano_units(&number.to_string()),
        _ => None,
    };
    matches!((value(a), value(b)), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_and_written_forms_are_equal() {
        for (a, b) in [
            ("1000m", "1"),
            ("0.5", "500m"),
            ("1024Mi", "1Gi"),
            ("1e3", "1k"),
            ("100M", "100000k"),
            ("+1", "1"),
        ] {
            assert_eq!(nano_units(a), nano_units(b), "{a} = {b}");
            assert!(nano_units(a).is_some(), "{a}");
        }
        assert_ne!(nano_units("1G"), nano_units("1Gi"));
        assert!(same_quantity(&json!(1), &json!("1000m")));
        assert!(!same_quantity(&json!("200M"), &json!("256Mi")));
        for bad in ["", "m", "1.2.3", "ten", "1Xi", "1e99", "0.0000000001"] {
            assert_eq!(nano_units(bad), None, "{bad}");
        }
    }

    #[test]
    fn quantity_paths_are_resource_requests_and_limits() {
        assert!(is_quantity_path(
            "/spec/template/spec/containers/0/resources/limits/cpu"
        ));
        assert!(is_quantity_path("/spec/resources/requests/memory"));
        assert!(!is_quantity_path("/spec/template/spec/containers/0/image"));
        assert!(!is_quantity_path("/data/limits/cpu"));
    }
}
