//! [`FailureLog`]: an instance that waits out a coordination outage retries
//! every few hundred milliseconds; its log says each distinct failure once
//! a minute (with how many repeats it held back), not once per retry.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often one failure is logged again while it repeats.
pub const LOG_FAILURE_EVERY: Duration = Duration::from_secs(60);

/// Distinct failures kept; more are forgotten (then logged again).
const KEEP: usize = 32;

/// Decides which repeated failures to log.
#[derive(Debug)]
pub struct FailureLog {
    every: Duration,
    seen: HashMap<String, Seen>,
}

#[derive(Debug)]
struct Seen {
    logged_at: Instant,
    held_back: u64,
}

impl Default for FailureLog {
    fn default() -> Self {
        Self::new(LOG_FAILURE_EVERY)
    }
}

impl FailureLog {
    /// Logs each distinct message at most once per `every`.
    pub fn new(every: Duration) -> Self {
        FailureLog {
            every,
            seen: HashMap::new(),
        }
    }

    /// `Some(n)` when `message` should be logged now (`n`: repeats held
    /// back since it was last logged), `None` when it was logged less than
    /// the period ago.
    pub fn due(&mut self, message: &str) -> Option<u64> {
        let now = Instant::now();
        if let Some(seen) = self.seen.get_mut(message) {
            if now.saturating_duration_since(seen.logged_at) < self.every {
                seen.held_back += 1;
                return None;
            }
            let held_back = seen.held_back;
            *seen = Seen {
                logged_at: now,
                held_back: 0,
            };
            return Some(held_back);
        }
        if self.seen.len() >= KEEP {
            self.seen.clear();
        }
        self.seen.insert(
            message.to_string(),
            Seen {
                logged_at: now,
                held_back: 0,
            },
        );
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_distinct_failure_once_per_period() {
        let mut log = FailureLog::new(Duration::from_millis(40));
        assert_eq!(log.due("store down"), Some(0));
        assert_eq!(log.due("store down"), None);
        assert_eq!(log.due("store down"), None);
        // Another failure is news.
        assert_eq!(log.due("access denied"), Some(0));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(log.due("store down"), Some(2));
        assert_eq!(log.due("store down"), None);
    }
}
