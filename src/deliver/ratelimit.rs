//! Sliding-window rate limits per destination endpoint.
//!
//! DingTalk and WeCom allow 20 messages in any minute and punish more with a 10-minute lock-out;
//! Feishu 5 a second and 100 a minute; Slack about one a second. A token bucket (GCRA, as in the
//! `governor` crate) with a burst of 20 lets about 40 through in the first minute, so these limits
//! are kept exactly with a log of send times: a message may go when, for every window, fewer than
//! `count` sends happened in the last `window`.

use std::collections::VecDeque;

use super::RateWindow;
use drift_model::Millis;

/// The send log of one endpoint.
#[derive(Debug, Clone)]
pub(crate) struct RateLimiter {
    windows: Vec<RateWindow>,
    sent: VecDeque<Millis>,
}

impl RateLimiter {
    /// A limiter for these windows (none: unlimited).
    pub(crate) fn new(windows: Vec<RateWindow>) -> RateLimiter {
        RateLimiter {
            windows,
            sent: VecDeque::new(),
        }
    }

    fn window_ms(window: &RateWindow) -> Millis {
        i64::try_from(window.window.as_millis()).unwrap_or(i64::MAX)
    }

    /// How many messages may go at `now`.
    pub(crate) fn available(&mut self, now: Millis) -> usize {
        let longest = self.windows.iter().map(Self::window_ms).max().unwrap_or(0);
        while self.sent.front().is_some_and(|at| *at <= now - longest) {
            self.sent.pop_front();
        }
        self.windows
            .iter()
            .map(|window| {
                let start = now - Self::window_ms(window);
                let used = self.sent.iter().filter(|at| **at > start).count();
                window.count.saturating_sub(used)
            })
            .min()
            .unwrap_or(usize::MAX)
    }

    /// When the next message may go, if none may go at `now`.
    pub(crate) fn next_slot(&mut self, now: Millis) -> Millis {
        if self.available(now) > 0 {
            return now;
        }
        self.windows
            .iter()
            .filter_map(|window| {
                let start = now - Self::window_ms(window);
                let inside: Vec<Millis> =
                    self.sent.iter().copied().filter(|at| *at > start).collect();
                if inside.len() < window.count {
                    return None;
                }
                // The send that must leave the window before one more fits.
                inside
                    .get(inside.len() - window.count)
                    .map(|at| at + Self::window_ms(window) + 1)
            })
            .max()
            .unwrap_or(now)
    }

    /// Records a send.
    pub(crate) fn record(&mut self, now: Millis) {
        self.sent.push_back(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn never_more_than_count_in_any_window() {
        let mut limiter = RateLimiter::new(vec![RateWindow {
            count: 20,
            window: Duration::from_secs(60),
        }]);
        let mut sends = Vec::new();
        let mut now = 0;
        while now < 300_000 {
            if limiter.available(now) > 0 {
                limiter.record(now);
                sends.push(now);
            } else {
                now = limiter.next_slot(now);
                continue;
            }
            now += 100;
        }
        for (index, start) in sends.iter().enumerate() {
            let in_window = sends[index..]
                .iter()
                .take_while(|at| **at < start + 60_000)
                .count();
            assert!(
                in_window <= 20,
                "{in_window} sends in the minute from {start}"
            );
        }
        assert!(
            sends.len() >= 95,
            "keeps sending at the limit: {}",
            sends.len()
        );
    }

    #[test]
    fn several_windows_combine() {
        let mut limiter = RateLimiter::new(vec![
            RateWindow {
                count: 5,
                window: Duration::from_secs(1),
            },
            RateWindow {
                count: 100,
                window: Duration::from_secs(60),
            },
        ]);
        for _ in 0..5 {
            limiter.record(0);
        }
        assert_eq!(limiter.available(500), 0);
        assert_eq!(limiter.next_slot(500), 1_001);
        assert_eq!(limiter.available(1_001), 5);
    }
}
