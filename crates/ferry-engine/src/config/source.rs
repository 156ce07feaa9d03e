//! Where a job's changes come from (`job.sourceType`): a Kudu table (the
//! default, `job.sourceMasterAddresses`) or a Kafka changelog topic
//! (`job.sourceBootstrapServers`, `job.sourceTopic`, `job.sourceFormat`,
//! start and stop offsets, the bad-record policy) applied to the Kudu
//! table `job.tableName` on `job.sinkMasterAddresses`. Validated into
//! [`SourceConfig`]; the Kafka connector itself lives in `ferry-kafka`.

use super::error::ConfigError;
use super::job::{invalid, Values};
use super::key::ConfigKey;
use super::key_source::{
    BOUNDED_MODE_NAMES, ERROR_POLICY_NAMES, SOURCE_FORMAT_NAMES, SOURCE_TYPE_NAMES,
    STARTUP_MODE_NAMES,
};
use super::sink::{enum_value, refuse_set, topic_name};

/// `job.sourceType` and what goes with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceConfig {
    /// A Kudu table on `job.sourceMasterAddresses`.
    #[default]
    Kudu,
    /// A Kafka changelog topic.
    Kafka(KafkaSourceConfig),
}

/// `job.sourceStartupMode`: where partitions start without a restore point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartupMode {
    Earliest,
    Latest,
    /// The consumer group's committed offsets (earliest where none).
    GroupOffsets,
    /// The first record at or after this epoch millisecond.
    Timestamp(u64),
}

/// `job.sourceBoundedMode`: where partitions stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundedMode {
    Unbounded,
    /// The partitions' ends when the job started.
    Latest,
    /// Before the first record after this epoch millisecond.
    Timestamp(u64),
}

/// `job.sourceErrorPolicy`: what happens to a record that cannot be
/// decoded or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorPolicy {
    Fail,
    Skip,
    DeadLetter,
}

/// A Kafka changelog source's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KafkaSourceConfig {
    /// `job.sourceBootstrapServers`, trimmed, comma-separated.
    pub bootstrap_servers: String,
    /// `job.sourceTopic`.
    pub topic: String,
    /// `job.sourceFormat`, as its key value (`debezium-json`, `upsert-json`, `json`).
    pub format: &'static str,
    pub startup: StartupMode,
    pub bounded: BoundedMode,
    /// `job.sourceGroupId`, if given (else `ferry-<job.name>`).
    pub group_id: Option<String>,
    pub error_policy: ErrorPolicy,
    /// `job.sourceDeadLetterTopic` (required with `dead-letter`).
    pub dead_letter_topic: Option<String>,
}

/// The Kafka source's keys, which a Kudu source refuses.
const KAFKA_KEYS: [ConfigKey; 10] = [
    ConfigKey::SourceBootstrapServers,
    ConfigKey::SourceTopic,
    ConfigKey::SourceFormat,
    ConfigKey::SourceStartupMode,
    ConfigKey::SourceStartupTimestampMillis,
    ConfigKey::SourceBoundedMode,
    ConfigKey::SourceBoundedTimestampMillis,
    ConfigKey::SourceGroupId,
    ConfigKey::SourceErrorPolicy,
    ConfigKey::SourceDeadLetterTopic,
];

impl SourceConfig {
    /// Validates `job.sourceType` and the keys of the chosen kind.
    pub(super) fn from_values(v: &Values<'_>) -> Result<Self, ConfigError> {
        let kind = enum_value(v, ConfigKey::SourceType, SOURCE_TYPE_NAMES)?;
        if kind == "kudu" {
            refuse_set(
                v,
                &KAFKA_KEYS,
                "it is a Kafka source key and job.sourceType is kudu; set job.sourceType=kafka or remove the key",
            )?;
            v.required_value(ConfigKey::SourceMasterAddresses)?;
            return Ok(SourceConfig::Kudu);
        }
        if let Some(value) = v.optional(ConfigKey::SourceMasterAddresses) {
            return Err(ConfigError::Unsupported {
                key: ConfigKey::SourceMasterAddresses,
                value: value.to_string(),
                reason:
                    "a Kafka source (job.sourceType=kafka) reads no Kudu cluster; remove the key",
            });
        }
        let bootstrap_servers =
            super::sink::bootstrap_servers(v, ConfigKey::SourceBootstrapServers)?;
        if v.optional(ConfigKey::SourceTopic).is_none() {
            return Err(ConfigError::MissingRequired {
                key: ConfigKey::SourceTopic,
            });
        }
        let topic = topic_name(v, ConfigKey::SourceTopic)?;
        if topic.contains("{table}") {
            return Err(invalid(
                ConfigKey::SourceTopic,
                &topic,
                "names one topic ({table} is for sink topics)",
            ));
        }
        let format = enum_value(v, ConfigKey::SourceFormat, SOURCE_FORMAT_NAMES)?;
        let millis = |key: ConfigKey, mode: ConfigKey| -> Result<u64, ConfigError> {
            if v.optional(key).is_none() {
                return Err(invalid(
                    mode,
                    "timestamp",
                    &format!("needs {key} (epoch milliseconds)"),
                ));
            }
            let (n, value) = v.integer(key)?;
            u64::try_from(n).map_err(|_| ConfigError::OutOfRange {
                key,
                value: value.to_string(),
                expected: "epoch milliseconds, 0 or more".to_string(),
            })
        };
        let startup = match enum_value(v, ConfigKey::SourceStartupMode, STARTUP_MODE_NAMES)? {
            "latest-offset" => StartupMode::Latest,
            "group-offsets" => StartupMode::GroupOffsets,
            "timestamp" => StartupMode::Timestamp(millis(
                ConfigKey::SourceStartupTimestampMillis,
                ConfigKey::SourceStartupMode,
            )?),
            _ => StartupMode::Earliest,
        };
        let bounded = match enum_value(v, ConfigKey::SourceBoundedMode, BOUNDED_MODE_NAMES)? {
            "latest-offset" => BoundedMode::Latest,
            "timestamp" => BoundedMode::Timestamp(millis(
                ConfigKey::SourceBoundedTimestampMillis,
                ConfigKey::SourceBoundedMode,
            )?),
            _ => BoundedMode::Unbounded,
        };
        let error_policy = match enum_value(v, ConfigKey::SourceErrorPolicy, ERROR_POLICY_NAMES)? {
            "skip" => ErrorPolicy::Skip,
            "dead-letter" => ErrorPolicy::DeadLetter,
            _ => ErrorPolicy::Fail,
        };
        let dead_letter_topic = match v.optional(ConfigKey::SourceDeadLetterTopic) {
            Some(_) => Some(topic_name(v, ConfigKey::SourceDeadLetterTopic)?),
            None => None,
        };
        if error_policy == ErrorPolicy::DeadLetter && dead_letter_topic.is_none() {
            return Err(invalid(
                ConfigKey::SourceErrorPolicy,
                "dead-letter",
                &format!("needs {}", ConfigKey::SourceDeadLetterTopic),
            ));
        }
        Ok(SourceConfig::Kafka(KafkaSourceConfig {
            bootstrap_servers,
            topic,
            format,
            startup,
            bounded,
            group_id: v
                .optional(ConfigKey::SourceGroupId)
                .map(|g| g.trim().to_string()),
            error_policy,
            dead_letter_topic,
        }))
    }

    /// The effective value of one of this module's keys (`None` for the
    /// others).
    pub(super) fn value_of(&self, key: ConfigKey) -> Option<String> {
        if key == ConfigKey::SourceType {
            return Some(
                match self {
                    SourceConfig::Kudu => "kudu",
                    SourceConfig::Kafka(_) => "kafka",
                }
                .to_string(),
            );
        }
        if !KAFKA_KEYS.contains(&key) {
            return None;
        }
        let SourceConfig::Kafka(k) = self else {
            return key.default_value().map(str::to_string);
        };
        Some(match key {
            ConfigKey::SourceBootstrapServers => k.bootstrap_servers.clone(),
            ConfigKey::SourceTopic => k.topic.clone(),
            ConfigKey::SourceFormat => k.format.to_string(),
            ConfigKey::SourceStartupMode => match k.startup {
                StartupMode::Earliest => "earliest-offset",
                StartupMode::Latest => "latest-offset",
                StartupMode::GroupOffsets => "group-offsets",
                StartupMode::Timestamp(_) => "timestamp",
            }
            .to_string(),
            ConfigKey::SourceStartupTimestampMillis => match k.startup {
                StartupMode::Timestamp(t) => t.to_string(),
                _ => return None,
            },
            ConfigKey::SourceBoundedMode => match k.bounded {
                BoundedMode::Unbounded => "unbounded",
                BoundedMode::Latest => "latest-offset",
                BoundedMode::Timestamp(_) => "timestamp",
            }
            .to_string(),
            ConfigKey::SourceBoundedTimestampMillis => match k.bounded {
                BoundedMode::Timestamp(t) => t.to_string(),
                _ => return None,
            },
            ConfigKey::SourceGroupId => k.group_id.clone()?,
            ConfigKey::SourceErrorPolicy => match k.error_policy {
                ErrorPolicy::Fail => "fail",
                ErrorPolicy::Skip => "skip",
                ErrorPolicy::DeadLetter => "dead-letter",
            }
            .to_string(),
            ConfigKey::SourceDeadLetterTopic => k.dead_letter_topic.clone()?,
            _ => return None,
        })
    }

    /// The Kafka settings, for a Kafka source.
    pub fn kafka(&self) -> Option<&KafkaSourceConfig> {
        match self {
            SourceConfig::Kafka(k) => Some(k),
            SourceConfig::Kudu => None,
        }
    }
}

impl KafkaSourceConfig {
    /// The consumer group of job `job_name`.
    pub fn group_id_for(&self, job_name: &str) -> String {
        self.group_id
            .clone()
            .unwrap_or_else(|| format!("ferry-{job_name}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::JobConfig;

    fn kafka(pairs: &[(&str, &str)]) -> Result<JobConfig, ConfigError> {
        let mut all = vec![
            ("job.sinkMasterAddresses", "k1:7051"),
            ("job.tableName", "orders"),
            ("job.checkpointsDirectory", "/tmp/ferry-source-config"),
            ("job.sourceType", "kafka"),
        ];
        all.extend_from_slice(pairs);
        JobConfig::from_named_pairs(all)
    }

    #[test]
    fn a_kafka_source_needs_brokers_and_a_topic_and_no_source_masters() {
        let err = kafka(&[("job.sourceTopic", "cdc")]).expect_err("no brokers");
        assert!(
            err.to_string().contains("job.sourceBootstrapServers"),
            "{err}"
        );
        let err = kafka(&[("job.sourceBootstrapServers", "a:9092")]).expect_err("no topic");
        assert!(err.to_string().contains("job.sourceTopic"), "{err}");
        let err = kafka(&[
            ("job.sourceBootstrapServers", "a:9092"),
            ("job.sourceTopic", "cdc"),
            ("job.sourceMasterAddresses", "m:7051"),
        ])
        .expect_err("source masters");
        assert!(
            err.to_string().contains("job.sourceMasterAddresses"),
            "{err}"
        );
        let cfg = kafka(&[
            ("job.sourceBootstrapServers", "a:9092"),
            ("job.sourceTopic", "cdc"),
        ])
        .expect("valid");
        let k = cfg.source.kafka().expect("kafka");
        assert_eq!(k.startup, StartupMode::Earliest);
        assert_eq!(k.bounded, BoundedMode::Unbounded);
        assert_eq!(k.error_policy, ErrorPolicy::Fail);
        assert_eq!(
            k.group_id_for(&cfg.job_name),
            format!("ferry-{}", cfg.job_name)
        );
    }

    #[test]
    fn kafka_source_values_are_checked_and_named() {
        let base = [
            ("job.sourceBootstrapServers", "a:9092"),
            ("job.sourceTopic", "cdc"),
        ];
        for (pair, needle) in [
            (("job.sourceFormat", "avro"), "job.sourceFormat"),
            (
                ("job.sourceStartupMode", "timestamp"),
                "job.sourceStartupTimestampMillis",
            ),
            (
                ("job.sourceBoundedMode", "timestamp"),
                "job.sourceBoundedTimestampMillis",
            ),
            (
                ("job.sourceErrorPolicy", "dead-letter"),
                "job.sourceDeadLetterTopic",
            ),
            (("job.sourceTopic", "a b"), "job.sourceTopic"),
            (("job.sinkType", "kafka"), "job.sinkType"),
        ] {
            let mut pairs = base.to_vec();
            pairs.retain(|(k, _)| *k != pair.0);
            pairs.push(pair);
            let err = kafka(&pairs).expect_err("refused");
            assert!(err.to_string().contains(needle), "{pair:?}: {err}");
        }
        let err = JobConfig::from_named_pairs([
            ("job.sourceMasterAddresses", "m1:7051"),
            ("job.sinkMasterAddresses", "k1:7051"),
            ("job.tableName", "orders"),
            ("job.checkpointsDirectory", "/tmp/x"),
            ("job.sourceTopic", "t"),
        ])
        .expect_err("kafka key on a kudu source");
        assert!(err.to_string().contains("job.sourceTopic"), "{err}");
    }

    #[test]
    fn effective_values_round_trip() {
        let cfg = kafka(&[
            ("job.sourceBootstrapServers", "a:9092"),
            ("job.sourceTopic", "cdc"),
            ("job.sourceStartupMode", "timestamp"),
            ("job.sourceStartupTimestampMillis", "1700000000000"),
            ("job.sourceErrorPolicy", "dead-letter"),
            ("job.sourceDeadLetterTopic", "cdc.dlq"),
        ])
        .expect("valid");
        let pairs: Vec<(String, String)> = cfg
            .effective_values()
            .into_iter()
            .map(|(k, v)| (k.name().to_string(), v))
            .collect();
        let again = JobConfig::from_named_pairs(
            pairs
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .expect("round trip");
        assert_eq!(again, cfg);
    }
}
