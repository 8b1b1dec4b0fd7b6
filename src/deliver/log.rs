//! The `log` channel: each notice as one JSON log line. The embedded default, needing no
//! external service; also what `replay` users read.

use super::render::{Markup, Placement, Style};
use super::{BoxFuture, Channel, Message, Outcome};

/// Prints notices to the log.
pub(crate) struct LogChannel {
    name: String,
    style: Style,
}

impl LogChannel {
    /// A log channel.
    pub(crate) fn new(name: &str, style: Style) -> LogChannel {
        LogChannel {
            name: name.to_string(),
            style,
        }
    }
}

impl Channel for LogChannel {
    fn name(&self) -> &str {
        &self.name
    }

    fn type_name(&self) -> &'static str {
        "log"
    }

    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            for notice in &message.notices {
                let drift = &notice.drift;
                tracing::warn!(
                    message = "Drift alert.",
                    channel = %self.name,
                    notification_id = %message.id,
                    alert = %self.style.title(notice),
                    state = notice.kind.as_str(),
                    class = %drift.class,
                    severity = drift.severity.as_str(),
                    cluster = %drift.cluster,
                    kind = %drift.kind,
                    namespace = %drift.namespace,
                    name = %drift.name,
                    summary = %drift.evidence.summary,
                    actor = drift_model::text::actor_text(drift).unwrap_or_default(),
                    diff = super::render::diff_lines(
                        &drift.evidence.changes,
                        10,
                        Markup::Plain,
                        Placement::Text,
                    )
                    .join("; "),
                    hint = drift.evidence.hint.clone().unwrap_or_default(),
                    remediation = notice
                        .remediation
                        .as_deref()
                        .map(|attempt| self.style.remediation_text(attempt))
                        .unwrap_or_default(),
                );
            }
            Outcome::Delivered
        })
    }
}
