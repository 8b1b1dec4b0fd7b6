//! Durations in the config: strings such as `30s`, `5m`, `1h30m`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Deserializes a duration string.
pub(crate) fn de_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    drift_model::time::parse_duration(&text).map_err(serde::de::Error::custom)
}

/// Deserializes an optional duration string.
pub(crate) fn de_opt_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    text.map(|text| drift_model::time::parse_duration(&text).map_err(serde::de::Error::custom))
        .transpose()
}
