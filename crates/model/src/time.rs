//! Time: the one module that reads the wall clock, and the one place times are written and read
//! as text. Everything else takes "now" as an argument (the pure core) or through a [`Clock`]
//! (the writer, the relays, the API), so tests control time.
//!
//! Architecture invariant: only this module reads the wall clock (`SystemTime::now`,
//! `Utc::now`). `Instant` (a monotonic stopwatch for durations in metrics) is not a clock of
//! dates and may be used anywhere.

use std::sync::Arc;
use std::time::Duration;

use crate::Millis;

/// A source of "now" in milliseconds; injectable so tests control time.
pub type Clock = Arc<dyn Fn() -> Millis + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(now_millis)
}

fn now_millis() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Milliseconds as RFC 3339 with milliseconds, in UTC (`2026-11-29T10:00:05.000Z`).
pub fn format_time(at: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(at)
        .map(|time| time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| at.to_string())
}

/// Milliseconds as RFC 3339 with a `+00:00` offset (`2026-11-29T10:00:05.123+00:00`), as silence
/// expiries made from the dashboard have always been written.
pub fn format_time_offset(at: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(at)
        .map(|time| time.to_rfc3339())
        .unwrap_or_else(|| at.to_string())
}

/// An RFC 3339 time as milliseconds; `None` when it is not one.
pub fn parse_time(text: &str) -> Option<Millis> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|time| time.timestamp_millis())
}

/// A duration in milliseconds, saturating (durations from config fit comfortably).
pub fn millis(duration: Duration) -> Millis {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A span of time as people read it, to the two largest units: `9d 23h`, `2h 5m`, `45s`, `0s`
/// (a negative span as its length: the caller says "ago").
pub fn format_span(span: Millis) -> String {
    let seconds = span.unsigned_abs() / 1000;
    let (days, hours, minutes) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60);
    match (days, hours, minutes) {
        (0, 0, 0) => format!("{seconds}s"),
        (0, 0, _) => format!("{minutes}m"),
        (0, _, 0) => format!("{hours}h"),
        (0, _, _) => format!("{hours}h {minutes}m"),
        (_, 0, _) => format!("{days}d"),
        _ => format!("{days}d {hours}h"),
    }
}

/// Why a text is not a duration. The message quotes the text as given and says what would do.
#[derive(Debug, thiserror::Error)]
pub enum DurationError {
    /// Not a duration `humantime` reads (`30s`, `5m`, `1h30m`, `250ms`).
    #[error("invalid duration {text:?} ({source}); use e.g. \"30s\" or \"5m\"")]
    Invalid {
        /// The text as given (untrimmed).
        text: String,
        /// What `humantime` found wrong.
        #[source]
        source: humantime::DurationError,
    },
}

impl DurationError {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            DurationError::Invalid { .. } => "invalid_duration",
        }
    }
}

/// Parses a duration such as `30s`, `5m`, `1h30m` or `250ms`.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    humantime::parse_duration(text.trim()).map_err(|source| DurationError::Invalid {
        text: text.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_to_their_two_largest_units() {
        let cases = [
            (0, "0s"),
            (45_000, "45s"),
            (-45_000, "45s"),
            (125_000, "2m"),
            (2 * 3_600_000 + 300_000, "2h 5m"),
            (3_600_000, "1h"),
            (14 * 86_400_000, "14d"),
            (10 * 86_400_000 - 3_600_000 - 1, "9d 22h"),
        ];
        for (span, text) in cases {
            assert_eq!(format_span(span), text, "{span}");
        }
    }

    #[test]
    fn a_duration_that_does_not_parse_keeps_its_message_and_kind() {
        assert_eq!(parse_duration(" 5m ").unwrap(), Duration::from_secs(300));
        let error = parse_duration("soon").unwrap_err();
        assert_eq!(error.kind(), "invalid_duration");
        assert_eq!(
            error.to_string(),
            "invalid duration \"soon\" (expected number at 0); use e.g. \"30s\" or \"5m\""
        );
        assert!(std::error::Error::source(&error).is_some());
    }
}
