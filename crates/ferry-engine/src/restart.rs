//! The restart strategy: whether, and after how long, a job that hit a
//! transient failure restarts from its newest complete checkpoint.
//!
//! The strategies and their settings are Flink's (`restart-strategy.type`
//! and `restart-strategy.<type>.*`), with Flink's defaults:
//!
//! - `exponential-delay` (the default, as in Flink with checkpointing on):
//!   the delay starts at `initial-backoff` and grows by
//!   `backoff-multiplier` up to `max-backoff`, with ± `jitter-factor`
//!   randomness; after the job ran `reset-backoff-threshold` without a
//!   failure the delay starts over. It gives up only after
//!   `attempts-before-reset-backoff` restarts without such a reset.
//! - `fixed-delay`: at most `attempts` restarts in the job's life, each
//!   after `delay`.
//! - `failure-rate`: restarts after `delay` unless more than
//!   `max-failures-per-interval` failures happened within
//!   `failure-rate-interval`.
//! - `none`: every failure ends the job.
//!
//! [`RestartBackoff`] is the decision state; it reads time only from its
//! callers, so it is tested without sleeping.

use std::time::{Duration, Instant};

/// A configured restart strategy.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RestartStrategy {
    /// `none`: never restart.
    None,
    /// `fixed-delay`.
    FixedDelay {
        /// Restarts allowed in the job's life.
        attempts: u32,
        /// Wait before each restart.
        delay: Duration,
    },
    /// `failure-rate`.
    FailureRate {
        /// Failures tolerated within `interval`.
        max_failures_per_interval: u32,
        /// The sliding window the failures are counted in.
        interval: Duration,
        /// Wait before each restart.
        delay: Duration,
    },
    /// `exponential-delay`.
    ExponentialDelay {
        /// The first delay.
        initial_backoff: Duration,
        /// The largest delay.
        max_backoff: Duration,
        /// Growth of the delay per failure (at least 1).
        multiplier: f64,
        /// Running this long without a failure resets the delay.
        reset_threshold: Duration,
        /// Random share of the delay added or taken away (0 to 1).
        jitter: f64,
        /// Restarts allowed between two resets.
        attempts_before_reset: u32,
    },
}

impl RestartStrategy {
    /// The strategy's name as `restart-strategy.type` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            RestartStrategy::None => "none",
            RestartStrategy::FixedDelay { .. } => "fixed-delay",
            RestartStrategy::FailureRate { .. } => "failure-rate",
            RestartStrategy::ExponentialDelay { .. } => "exponential-delay",
        }
    }
}

/// What to do about one failure.
#[derive(Debug, Clone, PartialEq)]
pub enum RestartDecision {
    /// Restart after this delay.
    RestartAfter(Duration),
    /// Do not restart; the text says why (for the job's failure message).
    GiveUp(String),
}

/// The strategy's state across a job's failures.
#[derive(Debug)]
pub struct RestartBackoff {
    strategy: RestartStrategy,
    /// Restarts granted so far (fixed-delay: in total; exponential: since
    /// the last reset).
    attempts: u32,
    /// Failure times within the failure-rate interval.
    recent: Vec<Instant>,
    /// The current exponential delay (before jitter).
    backoff: Option<Duration>,
    last_failure: Option<Instant>,
    rng: u64,
}

impl RestartBackoff {
    /// A fresh state for `strategy`.
    pub fn new(strategy: RestartStrategy) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9E37_79B9_7F4A_7C15);
        Self::with_seed(strategy, seed)
    }

    fn with_seed(strategy: RestartStrategy, seed: u64) -> Self {
        RestartBackoff {
            strategy,
            attempts: 0,
            recent: Vec::new(),
            backoff: None,
            last_failure: None,
            rng: seed | 1,
        }
    }

    /// Decides about a failure that happened at `now`.
    pub fn on_failure(&mut self, now: Instant) -> RestartDecision {
        let since_last = self.last_failure.map(|t| now.saturating_duration_since(t));
        self.last_failure = Some(now);
        match self.strategy.clone() {
            RestartStrategy::None => {
                RestartDecision::GiveUp("restart-strategy.type is none".to_string())
            }
            RestartStrategy::FixedDelay { attempts, delay } => {
                if self.attempts >= attempts {
                    return RestartDecision::GiveUp(format!(
                        "the fixed-delay restart strategy allows {attempts} restart(s) and all were used"
                    ));
                }
                self.attempts += 1;
                RestartDecision::RestartAfter(delay)
            }
            RestartStrategy::FailureRate {
                max_failures_per_interval,
                interval,
                delay,
            } => {
                self.recent
                    .retain(|t| now.saturating_duration_since(*t) < interval);
                self.recent.push(now);
                if self.recent.len() > max_failures_per_interval as usize {
                    return RestartDecision::GiveUp(format!(
                        "{} failures within {:?} exceed the failure-rate restart strategy's {max_failures_per_interval}",
                        self.recent.len(),
                        interval
                    ));
                }
                RestartDecision::RestartAfter(delay)
            }
            RestartStrategy::ExponentialDelay {
                initial_backoff,
                max_backoff,
                multiplier,
                reset_threshold,
                jitter,
                attempts_before_reset,
            } => {
                // Running `reset_threshold` past the last restart's delay
                // without a failure starts the backoff over.
                let reset = match (since_last, self.backoff) {
                    (Some(gap), Some(b)) => gap >= reset_threshold.saturating_add(b),
                    _ => true,
                };
                let backoff = if reset {
                    self.attempts = 0;
                    initial_backoff
                } else {
                    self.backoff
                        .map(|b| b.mul_f64(multiplier.max(1.0)))
                        .unwrap_or(initial_backoff)
                        .min(max_backoff)
                };
                if self.attempts >= attempts_before_reset {
                    return RestartDecision::GiveUp(format!(
                        "{} restart(s) without a reset exceed the exponential-delay restart strategy's attempts-before-reset-backoff ({attempts_before_reset})",
                        self.attempts
                    ));
                }
                self.attempts += 1;
                self.backoff = Some(backoff);
                RestartDecision::RestartAfter(self.jittered(backoff, jitter))
            }
        }
    }

    /// `backoff` ± up to `jitter` of itself.
    fn jittered(&mut self, backoff: Duration, jitter: f64) -> Duration {
        let jitter = jitter.clamp(0.0, 1.0);
        if jitter == 0.0 {
            return backoff;
        }
        // xorshift64*: enough randomness to spread restarts apart.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let unit = (r >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        backoff.mul_f64(1.0 + jitter * (2.0 * unit - 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn exponential(attempts_before_reset: u32, jitter: f64) -> RestartStrategy {
        RestartStrategy::ExponentialDelay {
            initial_backoff: secs(1),
            max_backoff: secs(60),
            multiplier: 2.0,
            reset_threshold: secs(3600),
            jitter,
            attempts_before_reset,
        }
    }

    fn delay(d: RestartDecision) -> Duration {
        match d {
            RestartDecision::RestartAfter(d) => d,
            RestartDecision::GiveUp(why) => panic!("gave up: {why}"),
        }
    }

    #[test]
    fn exponential_delay_grows_to_its_maximum_and_resets_after_a_quiet_hour() {
        let mut b = RestartBackoff::with_seed(exponential(u32::MAX, 0.0), 7);
        let t0 = Instant::now();
        let delays: Vec<u64> = (0..9)
            .map(|i| delay(b.on_failure(t0 + secs(i))).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        // Quiet for longer than threshold + the last delay: back to 1 s.
        let later = t0 + secs(8 + 3600 + 61);
        assert_eq!(delay(b.on_failure(later)), secs(1));
        // Quiet for less: keeps growing.
        assert_eq!(delay(b.on_failure(later + secs(100))), secs(2));
    }

    #[test]
    fn exponential_delay_gives_up_after_its_attempts() {
        let mut b = RestartBackoff::with_seed(exponential(2, 0.0), 7);
        let t0 = Instant::now();
        delay(b.on_failure(t0));
        delay(b.on_failure(t0 + secs(1)));
        match b.on_failure(t0 + secs(2)) {
            RestartDecision::GiveUp(why) => {
                assert!(why.contains("attempts-before-reset-backoff (2)"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn jitter_stays_within_its_share() {
        let mut b = RestartBackoff::with_seed(exponential(u32::MAX, 0.5), 99);
        let t0 = Instant::now();
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..200 {
            // A failure every 2 h resets, so every delay is 1 s ± 50 %.
            let d = delay(b.on_failure(t0 + secs(i * 7200)));
            assert!(
                d >= Duration::from_millis(500) && d <= Duration::from_millis(1500),
                "{d:?}"
            );
            seen.insert(d.as_millis() / 100);
        }
        assert!(seen.len() > 3, "jitter varies the delay: {seen:?}");
    }

    #[test]
    fn fixed_delay_counts_restarts_over_the_whole_life() {
        let mut b = RestartBackoff::new(RestartStrategy::FixedDelay {
            attempts: 2,
            delay: secs(3),
        });
        let t0 = Instant::now();
        assert_eq!(delay(b.on_failure(t0)), secs(3));
        assert_eq!(delay(b.on_failure(t0 + secs(10_000))), secs(3));
        assert!(matches!(
            b.on_failure(t0 + secs(20_000)),
            RestartDecision::GiveUp(_)
        ));
    }

    #[test]
    fn failure_rate_counts_failures_in_a_sliding_interval() {
        let mut b = RestartBackoff::new(RestartStrategy::FailureRate {
            max_failures_per_interval: 2,
            interval: secs(60),
            delay: secs(1),
        });
        let t0 = Instant::now();
        delay(b.on_failure(t0));
        delay(b.on_failure(t0 + secs(30)));
        // The first failure left the interval: still two within 60 s.
        delay(b.on_failure(t0 + secs(61)));
        match b.on_failure(t0 + secs(62)) {
            RestartDecision::GiveUp(why) => assert!(why.contains("3 failures"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn none_never_restarts() {
        let mut b = RestartBackoff::new(RestartStrategy::None);
        assert!(matches!(
            b.on_failure(Instant::now()),
            RestartDecision::GiveUp(_)
        ));
    }
}
