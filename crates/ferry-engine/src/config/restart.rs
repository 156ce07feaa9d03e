//! The restart keys (`restart-strategy.*`,
//! `execution.checkpointing.tolerable-failed-checkpoints`): Flink's names,
//! defaults and duration syntax, validated into [`RestartConfig`].

use std::time::Duration;

use super::error::ConfigError;
use super::job::Values;
use super::key::ConfigKey;
use crate::restart::RestartStrategy;

/// A decimal setting (`backoff-multiplier`, `jitter-factor`), compared by
/// its bits so configs stay `Eq`.
#[derive(Clone, Copy, Debug)]
pub struct Decimal(pub f64);

impl PartialEq for Decimal {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Decimal {}

/// Every restart setting, whichever strategy is chosen (so the effective
/// configuration can be printed and read back).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestartConfig {
    /// `restart-strategy.type`, normalised to `exponential-delay`,
    /// `fixed-delay`, `failure-rate` or `none`.
    pub kind: &'static str,
    pub fixed_delay_attempts: u32,
    pub fixed_delay: Duration,
    pub failure_rate_max_failures: u32,
    pub failure_rate_interval: Duration,
    pub failure_rate_delay: Duration,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub backoff_multiplier: Decimal,
    pub reset_backoff_threshold: Duration,
    pub jitter_factor: Decimal,
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

    pub(super) fn from_values(v: &Values<'_>) -> Result<Self, ConfigError> {
        let duration = |key| parse_duration(key, v.required_value(key)?);
        let count = |key, min: u32| {
            let value = v.required_value(key)?;
            let n: u32 = value
                .trim()
                .parse()
                .map_err(|_| ConfigError::InvalidNumber {
                    key,
                    value: value.to_string(),
                })?;
            if n < min {
                return Err(ConfigError::OutOfRange {
                    key,
                    value: value.to_string(),
                    expected: format!("must be at least {min}"),
                });
            }
            Ok(n)
        };
        let decimal = |key, min: f64, max: f64| {
            let value = v.required_value(key)?;
            let x: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite())
                .ok_or_else(|| ConfigError::InvalidValue {
                    key,
                    value: value.to_string(),
                    reason: "expected a decimal number".to_string(),
                })?;
            if !(min..=max).contains(&x) {
                return Err(ConfigError::OutOfRange {
                    key,
                    value: value.to_string(),
                    expected: format!("must be between {min} and {max}"),
                });
            }
            Ok(Decimal(x))
        };
        let config = RestartConfig {
            kind: strategy_kind(v.required_value(ConfigKey::RestartStrategyType)?)?,
            fixed_delay_attempts: count(ConfigKey::FixedDelayAttempts, 0)?,
            fixed_delay: duration(ConfigKey::FixedDelayDelay)?,
            failure_rate_max_failures: count(ConfigKey::FailureRateMaxFailures, 1)?,
            failure_rate_interval: duration(ConfigKey::FailureRateInterval)?,
            failure_rate_delay: duration(ConfigKey::FailureRateDelay)?,
            initial_backoff: duration(ConfigKey::ExponentialInitialBackoff)?,
            max_backoff: duration(ConfigKey::ExponentialMaxBackoff)?,
            backoff_multiplier: decimal(ConfigKey::ExponentialMultiplier, 1.0, 1000.0)?,
            reset_backoff_threshold: duration(ConfigKey::ExponentialResetThreshold)?,
            jitter_factor: decimal(ConfigKey::ExponentialJitter, 0.0, 1.0)?,
            attempts_before_reset_backoff: count(ConfigKey::ExponentialAttempts, 1)?,
            tolerable_failed_checkpoints: count(ConfigKey::TolerableFailedCheckpoints, 0)?,
        };
        if config.max_backoff < config.initial_backoff {
            return Err(ConfigError::OutOfRange {
                key: ConfigKey::ExponentialMaxBackoff,
                value: v
                    .required_value(ConfigKey::ExponentialMaxBackoff)?
                    .to_string(),
                expected: format!(
                    "must be at least restart-strategy.exponential-delay.initial-backoff ({:?})",
                    config.initial_backoff
                ),
            });
        }
        Ok(config)
    }

    /// The value of one restart key, as it would be written in a config
    /// file (`None` for keys that are not restart keys).
    pub(super) fn value_of(&self, key: ConfigKey) -> Option<String> {
        let ms = format_duration;
        Some(match key {
            ConfigKey::RestartStrategyType => self.kind.to_string(),
            ConfigKey::FixedDelayAttempts => self.fixed_delay_attempts.to_string(),
            ConfigKey::FixedDelayDelay => ms(self.fixed_delay),
            ConfigKey::FailureRateMaxFailures => self.failure_rate_max_failures.to_string(),
            ConfigKey::FailureRateInterval => ms(self.failure_rate_interval),
            ConfigKey::FailureRateDelay => ms(self.failure_rate_delay),
            ConfigKey::ExponentialInitialBackoff => ms(self.initial_backoff),
            ConfigKey::ExponentialMaxBackoff => ms(self.max_backoff),
            ConfigKey::ExponentialMultiplier => self.backoff_multiplier.0.to_string(),
            ConfigKey::ExponentialResetThreshold => ms(self.reset_backoff_threshold),
            ConfigKey::ExponentialJitter => self.jitter_factor.0.to_string(),
            ConfigKey::ExponentialAttempts => self.attempts_before_reset_backoff.to_string(),
            ConfigKey::TolerableFailedCheckpoints => self.tolerable_failed_checkpoints.to_string(),
            _ => return None,
        })
    }
}

/// Flink's spellings of the strategy names, normalised.
fn strategy_kind(value: &str) -> Result<&'static str, ConfigError> {
    Ok(match value.trim().to_ascii_lowercase().as_str() {
        "exponential-delay" | "exponentialdelay" => "exponential-delay",
        "fixed-delay" | "fixeddelay" => "fixed-delay",
        "failure-rate" | "failurerate" => "failure-rate",
        "none" | "off" | "disable" => "none",
        _ => {
            return Err(ConfigError::InvalidEnum {
                key: ConfigKey::RestartStrategyType,
                value: value.to_string(),
                valid: &["exponential-delay", "fixed-delay", "failure-rate", "none"],
            })
        }
    })
}

/// A duration in Flink's syntax: a whole number and an optional unit
/// (`ms`, `s`, `min`, `h`, `d` and their long forms), milliseconds when
/// the unit is left out.
pub fn parse_duration(key: ConfigKey, value: &str) -> Result<Duration, ConfigError> {
    let invalid = |reason: &str| ConfigError::InvalidValue {
        key,
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let text = value.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let n: u64 = number
        .parse()
        .map_err(|_| invalid("expected a duration such as '500 ms', '10 s', '1 min' or '1 h'"))?;
    let millis_per_unit: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
        "m" | "min" | "minute" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        _ => return Err(invalid("unknown unit; use ms, s, min, h or d")),
    };
    n.checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| invalid("too long"))
}

/// A duration in Flink's syntax, in the largest whole unit.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("min", 60_000),
        ("s", 1_000),
    ] {
        if ms > 0 && ms.is_multiple_of(size) {
            return format!("{} {unit}", ms / size);
        }
    }
    format!("{ms} ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_duration_syntax() {
        let key = ConfigKey::FixedDelayDelay;
        let ms = |s| parse_duration(key, s).map(|d| d.as_millis()).ok();
        assert_eq!(ms("250"), Some(250));
        assert_eq!(ms("500 ms"), Some(500));
        assert_eq!(ms("10s"), Some(10_000));
        assert_eq!(ms(" 1 min "), Some(60_000));
        assert_eq!(ms("2 minutes"), Some(120_000));
        assert_eq!(ms("1 h"), Some(3_600_000));
        assert_eq!(ms("1 d"), Some(86_400_000));
        let err = parse_duration(key, "5 parsecs").expect_err("unit");
        assert_eq!(
            err.to_string(),
            "invalid value '5 parsecs' for key 'restart-strategy.fixed-delay.delay': unknown unit; use ms, s, min, h or d"
        );
        assert!(parse_duration(key, "-1 s").is_err());
        for text in ["0 ms", "250 ms", "90 s", "1 min", "2 h", "3 d"] {
            let d = parse_duration(key, text).expect("parses");
            assert_eq!(format_duration(d), text);
        }
        assert!(parse_duration(key, "s").is_err());
    }
}
