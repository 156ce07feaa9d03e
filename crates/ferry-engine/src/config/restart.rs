//! The restart keys (`restart-strategy.*`,
//! `execution.checkpointing.tolerable-failed-checkpoints`): Flink's names,
//! defaults and duration syntax, validated into [`RestartConfig`].

use std::time::Duration;

use super::error::ConfigError;
use super::map::Config;
use super::option::{ConfigOption, ValueError};
use super::parse::{decimal, print_decimal, u32_at_least, Decimal};
use super::section::Section;
use super::spec::{KeyOrigin::Flink, ValueKind};
use crate::restart::RestartStrategy;

/// The valid names for `restart-strategy.type` (Flink's spellings).
const RESTART_STRATEGY_NAMES: &[&str] = &[
    "exponential-delay",
    "fixed-delay",
    "failure-rate",
    "none",
    "exponentialdelay",
    "fixeddelay",
    "failurerate",
    "off",
    "disable",
];

crate::config_section! {
    /// Flink's restart keys.
    pub static RESTART_KEYS = Section::job("restart-strategy");
    /// `restart-strategy.type`, normalised to `exponential-delay`,
    /// `fixed-delay`, `failure-rate` or `none`.
    pub const RESTART_STRATEGY_TYPE: ConfigOption<&'static str> = ConfigOption::new("restart-strategy.type", ValueKind::Enum(RESTART_STRATEGY_NAMES), strategy_kind, print_str)
        .origin(Flink)
        .default_value("exponential-delay")
        .aliases(&["restart-strategy"])
        .doc("What a job does after a transient failure (timeouts, unavailable servers, leader changes, storage errors): restart from its newest complete checkpoint with exponential-delay, fixed-delay or failure-rate backoff, or fail at once (none).");
    /// `restart-strategy.fixed-delay.attempts`.
    pub const FIXED_DELAY_ATTEMPTS: ConfigOption<u32> = count::<0>("restart-strategy.fixed-delay.attempts", ValueKind::CountOrZero)
        .default_value("1")
        .doc("fixed-delay: restarts allowed in the job's life.");
    /// `restart-strategy.fixed-delay.delay`.
    pub const FIXED_DELAY_DELAY: ConfigOption<Duration> = ConfigOption::duration("restart-strategy.fixed-delay.delay")
        .origin(Flink)
        .default_value("1 s")
        .doc("fixed-delay: wait before each restart.");
    /// `restart-strategy.failure-rate.max-failures-per-interval`.
    pub const FAILURE_RATE_MAX_FAILURES: ConfigOption<u32> = count::<1>("restart-strategy.failure-rate.max-failures-per-interval", ValueKind::Count)
        .default_value("1")
        .doc("failure-rate: failures tolerated within the interval before the job fails.");
    /// `restart-strategy.failure-rate.failure-rate-interval`.
    pub const FAILURE_RATE_INTERVAL: ConfigOption<Duration> = ConfigOption::duration("restart-strategy.failure-rate.failure-rate-interval")
        .origin(Flink)
        .default_value("1 min")
        .doc("failure-rate: the sliding interval failures are counted in.");
    /// `restart-strategy.failure-rate.delay`.
    pub const FAILURE_RATE_DELAY: ConfigOption<Duration> = ConfigOption::duration("restart-strategy.failure-rate.delay")
        .origin(Flink)
        .default_value("1 s")
        .doc("failure-rate: wait before each restart.");
    /// `restart-strategy.exponential-delay.initial-backoff`.
    pub const EXPONENTIAL_INITIAL_BACKOFF: ConfigOption<Duration> = ConfigOption::duration("restart-strategy.exponential-delay.initial-backoff")
        .origin(Flink)
        .default_value("1 s")
        .doc("exponential-delay: the first wait.");
    /// `restart-strategy.exponential-delay.max-backoff`.
    pub const EXPONENTIAL_MAX_BACKOFF: ConfigOption<Duration> = ConfigOption::duration("restart-strategy.exponential-delay.max-backoff")
        .origin(Flink)
        .default_value("1 min")
        .doc("exponential-delay: the longest wait.");
    /// `restart-strategy.exponential-delay.backoff-multiplier`.
    pub const EXPONENTIAL_MULTIPLIER: ConfigOption<Decimal> = ConfigOption::new("restart-strategy.exponential-delay.backoff-multiplier", ValueKind::Number, multiplier, print_decimal)
        .origin(Flink)
        .default_value("1.5")
        .doc("exponential-delay: growth of the wait per failure (at least 1).");
    /// `restart-strategy.exponential-delay.reset-backoff-threshold`.
    pub const EXPONENTIAL_RESET_THRESHOLD: ConfigOption<Duration> = ConfigOption::duration("restart-strategy.exponential-delay.reset-backoff-threshold")
        .origin(Flink)
        .default_value("1 h")
        .doc("exponential-delay: running this long without a failure resets the wait to initial-backoff.");
    /// `restart-strategy.exponential-delay.jitter-factor`.
    pub const EXPONENTIAL_JITTER: ConfigOption<Decimal> = ConfigOption::new("restart-strategy.exponential-delay.jitter-factor", ValueKind::Number, jitter, print_decimal)
        .origin(Flink)
        .default_value("0.1")
        .doc("exponential-delay: random share (0 to 1) added to or taken from each wait.");
    /// `restart-strategy.exponential-delay.attempts-before-reset-backoff`.
    pub const EXPONENTIAL_ATTEMPTS: ConfigOption<u32> = count::<1>("restart-strategy.exponential-delay.attempts-before-reset-backoff", ValueKind::Count)
        .default_value("2147483647")
        .doc("exponential-delay: restarts allowed without a reset before the job fails.");
    /// `execution.checkpointing.tolerable-failed-checkpoints`.
    pub const TOLERABLE_FAILED_CHECKPOINTS: ConfigOption<u32> = count::<0>("execution.checkpointing.tolerable-failed-checkpoints", ValueKind::CountOrZero)
        .default_value("0")
        .doc("Consecutive failed checkpoints tolerated; one more restarts the job (restart-strategy.*). Replication never goes past the newest complete checkpoint's window either way.");
}

/// A Flink count of at least `MIN`.
const fn count<const MIN: u32>(name: &'static str, kind: ValueKind) -> ConfigOption<u32> {
    ConfigOption::new(name, kind, u32_at_least::<MIN>, print_u32).origin(Flink)
}

fn print_u32(n: &u32) -> String {
    n.to_string()
}

fn print_str(s: &&'static str) -> String {
    s.to_string()
}

/// Flink's spellings of the strategy names, normalised.
fn strategy_kind(value: &str) -> Result<&'static str, ValueError> {
    Ok(match value.trim().to_ascii_lowercase().as_str() {
        "exponential-delay" | "exponentialdelay" => "exponential-delay",
        "fixed-delay" | "fixeddelay" => "fixed-delay",
        "failure-rate" | "failurerate" => "failure-rate",
        "none" | "off" | "disable" => "none",
        _ => {
            return Err(ValueError::NotOneOf(&[
                "exponential-delay",
                "fixed-delay",
                "failure-rate",
                "none",
            ]))
        }
    })
}

fn multiplier(value: &str) -> Result<Decimal, ValueError> {
    decimal(value, 1.0, 1000.0)
}

fn jitter(value: &str) -> Result<Decimal, ValueError> {
    decimal(value, 0.0, 1.0)
}

/// Every restart setting, whichever strategy is chosen (so the effective
/// configuration can be printed and read back).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestartConfig {
    /// `restart-strategy.type`, normalised to `exponential-delay`,
    /// `fixed-delay`, `failure-rate` or `none`.
    pub kind: &'static str,
    /// `restart-strategy.fixed-delay.attempts`.
    pub fixed_delay_attempts: u32,
    /// `restart-strategy.fixed-delay.delay`.
    pub fixed_delay: Duration,
    /// `restart-strategy.failure-rate.max-failures-per-interval`.
    pub failure_rate_max_failures: u32,
    /// `restart-strategy.failure-rate.failure-rate-interval`.
    pub failure_rate_interval: Duration,
    /// `restart-strategy.failure-rate.delay`.
    pub failure_rate_delay: Duration,
    /// `restart-strategy.exponential-delay.initial-backoff`.
    pub initial_backoff: Duration,
    /// `restart-strategy.exponential-delay.max-backoff`.
    pub max_backoff: Duration,
    /// `restart-strategy.exponential-delay.backoff-multiplier`.
    pub backoff_multiplier: Decimal,
    /// `restart-strategy.exponential-delay.reset-backoff-threshold`.
    pub reset_backoff_threshold: Duration,
    /// `restart-strategy.exponential-delay.jitter-factor`.
    pub jitter_factor: Decimal,
    /// `restart-strategy.exponential-delay.attempts-before-reset-backoff`.
    pub attempts_before_reset_backoff: u32,
    /// `execution.checkpointing.tolerable-failed-checkpoints`.
    pub tolerable_failed_checkpoints: u32,
}

impl RestartConfig {
    /// The chosen strategy with its settings.
    pub fn strategy(&self) -> RestartStrategy {
        match self.kind {
            "none" => RestartStrategy::None,
            "fixed-delay" => RestartStrategy::FixedDelay {
                attempts: self.fixed_delay_attempts,
                delay: self.fixed_delay,
            },
            "failure-rate" => RestartStrategy::FailureRate {
                max_failures_per_interval: self.failure_rate_max_failures,
                interval: self.failure_rate_interval,
                delay: self.failure_rate_delay,
            },
            _ => RestartStrategy::ExponentialDelay {
                initial_backoff: self.initial_backoff,
                max_backoff: self.max_backoff,
                multiplier: self.backoff_multiplier.0,
                reset_threshold: self.reset_backoff_threshold,
                jitter: self.jitter_factor.0,
                attempts_before_reset: self.attempts_before_reset_backoff,
            },
        }
    }

    pub(super) fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        let config = RestartConfig {
            kind: keys.get(&RESTART_STRATEGY_TYPE)?,
            fixed_delay_attempts: keys.get(&FIXED_DELAY_ATTEMPTS)?,
            fixed_delay: keys.get(&FIXED_DELAY_DELAY)?,
            failure_rate_max_failures: keys.get(&FAILURE_RATE_MAX_FAILURES)?,
            failure_rate_interval: keys.get(&FAILURE_RATE_INTERVAL)?,
            failure_rate_delay: keys.get(&FAILURE_RATE_DELAY)?,
            initial_backoff: keys.get(&EXPONENTIAL_INITIAL_BACKOFF)?,
            max_backoff: keys.get(&EXPONENTIAL_MAX_BACKOFF)?,
            backoff_multiplier: keys.get(&EXPONENTIAL_MULTIPLIER)?,
            reset_backoff_threshold: keys.get(&EXPONENTIAL_RESET_THRESHOLD)?,
            jitter_factor: keys.get(&EXPONENTIAL_JITTER)?,
            attempts_before_reset_backoff: keys.get(&EXPONENTIAL_ATTEMPTS)?,
            tolerable_failed_checkpoints: keys.get(&TOLERABLE_FAILED_CHECKPOINTS)?,
        };
        if config.max_backoff < config.initial_backoff {
            return Err(ConfigError::OutOfRange {
                key: EXPONENTIAL_MAX_BACKOFF.name(),
                value: keys
                    .text(&EXPONENTIAL_MAX_BACKOFF)
                    .unwrap_or_default()
                    .to_string(),
                expected: format!(
                    "must be at least restart-strategy.exponential-delay.initial-backoff ({:?})",
                    config.initial_backoff
                ),
            });
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_duration_errors_name_the_key() {
        let mut keys = Config::new();
        keys.set(&FIXED_DELAY_DELAY, "5 parsecs");
        let err = keys.get(&FIXED_DELAY_DELAY).expect_err("unit");
        assert_eq!(
            err.to_string(),
            "invalid value '5 parsecs' for key 'restart-strategy.fixed-delay.delay': unknown unit; use ms, s, min, h or d"
        );
    }
}
