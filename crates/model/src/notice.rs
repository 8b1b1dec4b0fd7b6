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
}

impl NoticeKind {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Firing => "firing",
            NoticeKind::Resolved => "resolved",
            NoticeKind::Repeat => "repeat",
        }
    }

    /// Parses [`NoticeKind::as_str`] output.
    pub fn parse(text: &str) -> Option<NoticeKind> {
        match text {
            "firing" => Some(NoticeKind::Firing),
            "resolved" => Some(NoticeKind::Resolved),
            "repeat" => Some(NoticeKind::Repeat),
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
}
