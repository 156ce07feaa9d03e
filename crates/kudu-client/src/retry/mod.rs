//! Deadlines and exponential backoff with jitter, acting on the one
//! classification of errors, [`Error::retry_action`].
//!
//! Retry state lives here, outside the RPC messages: a call is an immutable
//! request plus a [`Retrier`] that counts attempts against one deadline. The
//! final error names the operation, the attempts, the elapsed time and the
//! last cause, so nothing retries silently or forever.

use crate::error::{Error, RetryAction};
use rand::Rng;
use std::time::{Duration, Instant};

/// Default deadline for one client operation.
pub(crate) const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Randomised exponential backoff: attempt `n` sleeps
/// `U(0.5, 1) * min(base * 2^n, max)`, so early retries are quick and later
/// ones spread out.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
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
    pub(crate) fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max,
            attempt: 0,
        }
    }

    /// The next sleep, with jitter.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let exp = self.base.saturating_mul(1u32 << self.attempt.min(16));
        self.attempt = self.attempt.saturating_add(1);
        let capped = exp.min(self.max);
        let factor: f64 = rand::thread_rng().gen_range(0.5..=1.0);
        capped.mul_f64(factor)
    }
}

/// Counts attempts of one operation against one deadline.
#[derive(Debug)]
pub(crate) struct Retrier {
    operation: String,
    start: Instant,
    deadline: Instant,
    attempts: u32,
    backoff: Backoff,
    /// Why the last retried attempt failed, named if a later one times out.
    last_cause: Option<String>,
}

impl Retrier {
    /// Starts the clock for `operation` with `timeout`.
    pub(crate) fn new(operation: impl Into<String>, timeout: Duration) -> Self {
        let start = Instant::now();
        Retrier {
            operation: operation.into(),
            start,
            deadline: start + timeout,
            attempts: 0,
            backoff: Backoff::default(),
            last_cause: None,
        }
    }

    /// The operation's deadline.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Time left before the deadline (zero when past it).
    pub(crate) fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Attempts made so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Records the start of an attempt.
    pub(crate) fn begin_attempt(&mut self) {
        self.attempts += 1;
    }

    /// Decides about a failed attempt: `Ok(())` after sleeping as the error
    /// deserves (the caller then retries), or the error to return — the
    /// original one if retrying cannot help, else a `TimedOut` naming it. An
    /// attempt that timed out ran into this operation's deadline: the
    /// `TimedOut` then names the operation and the previous attempt's cause.
    pub(crate) async fn on_error(&mut self, err: Error) -> Result<(), Error> {
        let action = err.retry_action();
        if action == RetryAction::Fail {
            if let Error::TimedOut { .. } = err {
                let this = err.to_string();
                return Err(self.timed_out(match &self.last_cause {
                    Some(before) => format!("{this} (previous attempt: {before})"),
                    None => this,
                }));
            }
            return Err(err);
        }
        let delay = match action {
            // Stale routing usually resolves at once; a short pause avoids
            // hammering a master that is mid-election.
            RetryAction::RefreshAndRetry if self.attempts <= 1 => Duration::ZERO,
            _ => self.backoff.next_delay(),
        };
        if Instant::now() + delay >= self.deadline {
            return Err(self.timed_out(err.to_string()));
        }
        tracing::debug!(operation = %self.operation, attempt = self.attempts, ?delay, error = %err, "retrying");
        self.last_cause = Some(err.to_string());
        tokio::time::sleep(delay).await;
        Ok(())
    }

    /// The error for running out of time, naming the last cause.
    pub(crate) fn timed_out(&self, last: String) -> Error {
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

    #[tokio::test]
    async fn a_timed_out_attempt_names_the_operation_and_the_cause_before() {
        let mut r = Retrier::new("write to tablet t", Duration::from_secs(5));
        r.begin_attempt();
        r.on_error(Error::ConnectionClosed {
            addr: "ts:1".into(),
            reason: "reset".into(),
        })
        .await
        .expect("retried");
        r.begin_attempt();
        let err = r
            .on_error(Error::TimedOut {
                operation: "Write on ts:2".into(),
                attempts: 1,
                elapsed: Duration::from_secs(5),
                last: "no answer".into(),
            })
            .await
            .expect_err("out of time");
        let text = err.to_string();
        assert!(
            text.starts_with("write to tablet t timed out after 2 attempt(s)"),
            "{text}"
        );
        assert!(text.contains("Write on ts:2 timed out"), "{text}");
        assert!(
            text.contains("previous attempt: connection to ts:1 closed: reset"),
            "{text}"
        );
    }
}
