//! Notices: what a notification says, a drift as it was at one of its transitions.

use super::{Drift, Millis};

/// Why a notification exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    /// The drift fired.
    Firing,
    /// The drift resolved after firing.
    Resolved,
    /// A reminder: the drift is still firing.
    Repeat,
    /// A remediation attempt on the drift ended (applied, dry run, refused, conflict, failed).
    Remediation,
}

impl NoticeKind {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Firing => "firing",
            NoticeKind::Resolved => "resolved",
            NoticeKind::Repeat => "repeat",
            NoticeKind::Remediation => "remediation",
        }
    }

    /// Parses [`NoticeKind::as_str`] output.
    pub fn parse(text: &str) -> Option<NoticeKind> {
        match text {
            "firing" => Some(NoticeKind::Firing),
            "resolved" => Some(NoticeKind::Resolved),
            "repeat" => Some(NoticeKind::Repeat),
            "remediation" => Some(NoticeKind::Remediation),
            _ => None,
        }
    }
}

/// The content of a notification: the drift as it was at the transition.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// Firing, resolved or a reminder.
    pub kind: NoticeKind,
    /// The drift at that moment.
    pub drift: Drift,
    /// When the transition happened.
    pub at: Millis,
    /// How many times this notice was re-sent (Alertmanager resolve repeats).
    pub resend: u32,
    /// The attempt a [`NoticeKind::Remediation`] notice is about.
    pub remediation: Option<Box<crate::remediation::Attempt>>,
}

impl Notice {
    /// True for the firing notice of an escalation: the drift fired before this notice's
    /// transition (its severity rose while it fired; see `Transition::is_escalation`).
    pub fn is_escalation(&self) -> bool {
        self.kind == NoticeKind::Firing && self.drift.fired_at.is_some_and(|fired| fired < self.at)
    }
}
