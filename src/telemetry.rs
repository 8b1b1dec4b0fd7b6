//! Logging: JSON lines on stdout, level from `RUST_LOG` (default `info`).
//!
//! Every log line about an event carries `ce_id`, `ce_type`, `cluster`, `kind`, `namespace` and
//! `name`. Webhook URLs, tokens and Secret values are never logged: config secrets are
//! [`drift_core::config::Secret`] values whose `Debug`/`Display` redact.

use tracing_subscriber::EnvFilter;

/// Installs the global JSON subscriber. Safe to call more than once (later calls do nothing).
pub(crate) fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_env_filter(filter)
        .with_writer(std::io::stdout)
        .try_init();
}
