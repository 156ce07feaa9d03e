//! The high-availability keys (`high-availability.*`): whether the job
//! holds a lease (so a `ferry standby` can take it over and a stale active
//! fences itself), where the lease lives, and its timing. Validated into
//! [`HaConfig`]; the lease protocol itself is in [`crate::lease`].

use std::time::Duration;

use super::error::ConfigError;
use super::job::Values;
use super::key::{ConfigKey, HA_TYPE_NAMES};
use super::restart::{format_duration, parse_duration};
use crate::checkpoint::{JobId, StorageLocation};

/// `high-availability.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HaKind {
    /// One instance, no lease, no fencing.
    #[default]
    None,
    /// A lease object in the HA storage directory (see [`crate::lease`]).
    Lease,
}

/// The validated `high-availability.*` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HaConfig {
    /// `high-availability.type`.
    pub kind: HaKind,
    /// `high-availability.storageDir`, if given (else the checkpoints
    /// directory; see [`super::JobConfig::ha_storage_dir`]).
    pub storage_dir: Option<StorageLocation>,
    /// `high-availability.cluster-id`, if given (else `job.name`).
    pub cluster_id: Option<String>,
    /// `high-availability.lease-duration`.
    pub lease_duration: Duration,
    /// `high-availability.renew-interval`.
    pub renew_interval: Duration,
}

impl HaConfig {
    pub(super) fn from_values(v: &Values<'_>) -> Result<Self, ConfigError> {
        let kind_value = v.required_value(ConfigKey::HaType)?;
        let kind = match kind_value.trim().to_ascii_lowercase().as_str() {
            "none" | "null" => HaKind::None,
            "lease" => HaKind::Lease,
            _ => {
                return Err(ConfigError::InvalidEnum {
                    key: ConfigKey::HaType,
                    value: kind_value.to_string(),
                    valid: HA_TYPE_NAMES,
                })
            }
        };
        let storage_dir = match v.optional(ConfigKey::HaStorageDir) {
            Some(value) => {
                Some(
                    StorageLocation::parse(value).map_err(|e| ConfigError::InvalidValue {
                        key: ConfigKey::HaStorageDir,
                        value: value.to_string(),
                        reason: e.reason,
                    })?,
                )
            }
            None => None,
        };
        let cluster_id = v.optional(ConfigKey::HaClusterId).map(str::to_string);
        let duration = |key| parse_duration(key, v.required_value(key)?);
        let lease_duration = duration(ConfigKey::HaLeaseDuration)?;
        let renew_interval = duration(ConfigKey::HaRenewInterval)?;
        if lease_duration < Duration::from_millis(500) {
            return Err(ConfigError::OutOfRange {
                key: ConfigKey::HaLeaseDuration,
                value: v.required_value(ConfigKey::HaLeaseDuration)?.to_string(),
                expected: "must be at least 500 ms".to_string(),
            });
        }
        // Three renewals per lease: one slow store call does not fence.
        if renew_interval.is_zero() || renew_interval * 3 > lease_duration {
            return Err(ConfigError::OutOfRange {
                key: ConfigKey::HaRenewInterval,
                value: v.required_value(ConfigKey::HaRenewInterval)?.to_string(),
                expected: format!(
                    "must be greater than 0 and at most a third of high-availability.lease-duration ({})",
                    format_duration(lease_duration)
                ),
            });
        }
        Ok(HaConfig {
            kind,
            storage_dir,
            cluster_id,
            lease_duration,
            renew_interval,
        })
    }

    /// The value of one HA key as it would be written in a config file
    /// (`None` for other keys and for derived defaults left unset).
    pub(super) fn value_of(&self, key: ConfigKey) -> Option<String> {
        Some(match key {
            ConfigKey::HaType => match self.kind {
                HaKind::None => "none".to_string(),
                HaKind::Lease => "lease".to_string(),
            },
            ConfigKey::HaStorageDir => self.storage_dir.as_ref()?.to_string(),
            ConfigKey::HaClusterId => self.cluster_id.clone()?,
            ConfigKey::HaLeaseDuration => format_duration(self.lease_duration),
            ConfigKey::HaRenewInterval => format_duration(self.renew_interval),
            _ => return None,
        })
    }

    /// How long before the lease would lapse the active stops writing: a
    /// fifth of the lease duration. It absorbs clock-rate differences
    /// between the instances and the time from a fence check to the end of
    /// the write it let through (docs/dr.md, "Timing assumptions").
    pub fn safety_margin(&self) -> Duration {
        self.lease_duration / 5
    }
}

/// The job id an HA job runs under, derived from its cluster id (as Flink's
/// application mode derives a fixed job id from `high-availability.cluster-id`),
/// so the active and its standbys agree on it without talking. 128-bit
/// FNV-1a: stable across builds and platforms.
pub fn ha_job_id(cluster_id: &str) -> JobId {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut hash = OFFSET;
    for byte in "ferry-ha:".bytes().chain(cluster_id.bytes()) {
        hash ^= u128::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    JobId::from_bytes(hash.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::JobConfig;

    fn config(extra: &[(&str, &str)]) -> Result<JobConfig, ConfigError> {
        let mut pairs = vec![
            ("job.sourceMasterAddresses", "a:7051"),
            ("job.sinkMasterAddresses", "b:7051"),
            ("job.tableName", "t"),
            ("job.checkpointsDirectory", "/tmp/chk"),
        ];
        pairs.extend_from_slice(extra);
        JobConfig::from_named_pairs(pairs)
    }

    #[test]
    fn defaults_are_off_with_five_second_leases() {
        let c = config(&[]).expect("valid");
        assert_eq!(c.ha.kind, HaKind::None);
        assert_eq!(c.ha.lease_duration, Duration::from_secs(5));
        assert_eq!(c.ha.renew_interval, Duration::from_secs(1));
        assert_eq!(c.ha_storage_dir(), &c.checkpoints_directory);
        assert_eq!(c.ha_job_id(), ha_job_id("ferry-replication-t"));
    }

    #[test]
    fn lease_settings_and_refusals() {
        let c = config(&[
            ("high-availability.type", "lease"),
            ("high-availability.storageDir", "/tmp/ha"),
            ("high-availability.cluster-id", "orders-dr"),
            ("high-availability.lease-duration", "3 s"),
            ("high-availability.renew-interval", "500 ms"),
        ])
        .expect("valid");
        assert_eq!(c.ha.kind, HaKind::Lease);
        assert_eq!(c.ha_storage_dir().to_string(), "/tmp/ha");
        assert_eq!(c.ha_job_id(), ha_job_id("orders-dr"));
        assert_ne!(ha_job_id("orders-dr"), ha_job_id("orders-dr2"));
        assert_eq!(c.ha.safety_margin(), Duration::from_millis(600));
        let again = JobConfig::from_named_pairs(
            c.effective_values()
                .iter()
                .map(|(k, v)| (k.name(), v.as_str())),
        )
        .expect("round trip");
        assert_eq!(again, c);

        let err = config(&[("high-availability.type", "zookeeper")]).expect_err("enum");
        assert!(err.to_string().contains("high-availability.type"), "{err}");
        let err = config(&[("high-availability.renew-interval", "2 s")]).expect_err("too slow");
        assert!(err.to_string().contains("at most a third"), "{err}");
    }
}
