//! Deadlines, exponential backoff with jitter, and the classification of
//! errors into "refresh and retry", "back off and retry" or "fail".
//!
//! Retry state lives here, outside the RPC messages: a call is an immutable
//! request plus a [`Retrier`] that counts attempts against one deadline. The
//! final error names the operation, the attempts, the elapsed time and the
//! last cause, so nothing retries silently or forever.

use crate::error::Error;
use rand::Rng;
use std::time::{Duration, Instant};

/// Default deadline for one client operation.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Randomised exponential backoff: attempt `n` sleeps
/// `U(0.5, 1) * min(base * 2^n, max)`, so early retries are quick and later
/// ones spread out.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Duration::from_millis(10), Duration::from_secs(2))
    }
}

impl Backoff {
    /// A backoff starting at `base` and capped at `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max,
            attempt: 0,
        }
    }

    /// The next sleep, with jitter.
    pub fn next_delay(&mut self) -> Duration {
        let exp = self.base.saturating_mul(1u32 << self.attempt.min(16));
        self.attempt = self.attempt.saturating_add(1);
        let capped = exp.min(self.max);
        let factor: f64 = rand::thread_rng().gen_range(0.5..=1.0);
        capped.mul_f64(factor)
    }
}

/// What to do with a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Routing was stale (not leader, tablet moved): refresh and retry soon.
    Refresh,
    /// The server is busy or unreachable: back off, then retry.
    Backoff,
    /// Retrying cannot help.
    Fail,
}

/// Classifies an error per the client retry rules.
pub fn classify(err: &Error) -> Action {
    match err {
        Error::NotLeaderMaster { .. }
        | Error::NotLeaderReplica { .. }
        | Error::TabletNotFound { .. } => Action::Refresh,
        Error::Io { .. } | Error::ConnectionClosed { .. } | Error::ServiceUnavailable { .. } => {
            Action::Backoff
        }
        e if e.is_retryable() => Action::Backoff,
        _ => Action::Fail,
    }
}

/// Counts attempts of one operation against one deadline.
#[derive(Debug)]
pub struct Retrier {
    operation: String,
    start: Instant,
    deadline: Instant,
    attempts: u32,
    backoff: Backoff,
}

impl Retrier {
    /// Starts the clock for `operation` with `timeout`.
    pub fn new(operation: impl Into<String>, timeout: Duration) -> Self {
        let start = Instant::now();
        Retrier {
            operation: operation.into(),
            start,
            deadline: start + timeout,
            attempts: 0,
            backoff: Backoff::default(),
        }
    }

    /// The operation's deadline.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Time left before the deadline (zero when past it).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Attempts made so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Records the start of an attempt.
    pub fn begin_attempt(&mut self) {
        self.attempts += 1;
    }

    /// Decides about a failed attempt: `Ok(())` after sleeping as the error
    /// deserves (the caller then retries), or the error to return — the
    /// original one if it is not retryable, else a `TimedOut` naming it.
    pub async fn on_error(&mut self, err: Error) -> Result<(), Error> {
        let action = classify(&err);
        if action == Action::Fail {
            return Err(err);
        }
        let delay = match action {
            // Stale routing usually resolves at once; a short pause avoids
            // hammering a master that is mid-election.
            Action::Refresh if self.attempts <= 1 => Duration::ZERO,
            _ => self.backoff.next_delay(),
        };
        if Instant::now() + delay >= self.deadline {
            return Err(self.timed_out(err.to_string()));
        }
        tracing::debug!(operation = %self.operation, attempt = self.attempts, ?delay, error = %err, "retrying");
        tokio::time::sleep(delay).await;
        Ok(())
    }

    /// The error for running out of time, naming the last cause.
    pub fn timed_out(&self, last: String) -> Error {
        Error::TimedOut {
            operation: self.operation.clone(),
            attempts: self.attempts,
            elapsed: self.start.elapsed(),
            last,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(100));
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(5) && first <= Duration::from_millis(10));
        for _ in 0..20 {
            assert!(b.next_delay() <= Duration::from_millis(100));
        }
        let late = b.next_delay();
        assert!(late >= Duration::from_millis(50), "{late:?}");
    }

    #[test]
    fn classification_follows_the_rules() {
        let not_leader = Error::NotLeaderMaster { addr: "m".into() };
        assert_eq!(classify(&not_leader), Action::Refresh);
        let busy = Error::ServiceUnavailable {
            addr: "t".into(),
            message: "throttled".into(),
        };
        assert_eq!(classify(&busy), Action::Backoff);
        assert_eq!(classify(&Error::TableNotFound("x".into())), Action::Fail);
    }

    #[tokio::test]
    async fn retrier_gives_up_at_the_deadline_with_the_cause() {
        let mut r = Retrier::new("open table", Duration::from_millis(50));
        let mut last = Ok(());
        for _ in 0..100 {
            r.begin_attempt();
            last = r
                .on_error(Error::ServiceUnavailable {
                    addr: "m:1".into(),
                    message: "busy".into(),
                })
                .await;
            if last.is_err() {
                break;
            }
        }
        let err = last.expect_err("gives up");
        let text = err.to_string();
        assert!(text.contains("open table timed out"), "{text}");
        assert!(text.contains("busy"), "{text}");
    }

    #[tokio::test]
    async fn fatal_errors_are_returned_unchanged() {
        let mut r = Retrier::new("x", Duration::from_secs(5));
        r.begin_attempt();
        let err = r
            .on_error(Error::InvalidArgument("bad".into()))
            .await
            .expect_err("no retry");
        assert!(matches!(err, Error::InvalidArgument(_)));
    }
}
