//! Where a job's changes go (`job.sinkType`): a Kudu sink table (the
//! default, `job.sinkMasterAddresses` and the table keys) or a Kafka topic
//! (`job.sinkBootstrapServers`, `job.sinkTopic`, `job.sinkFormat`,
//! `job.sinkDeliveryGuarantee`, …). Validated into [`SinkConfig`]; the
//! Kafka connector itself lives in the `ferry-kafka` crate, so the engine
//! holds only these settings, as data.

use super::error::ConfigError;
use super::job::{invalid, Values};
use super::key::ConfigKey;
use super::key_sink::{DELIVERY_GUARANTEE_NAMES, SINK_FORMAT_NAMES, SINK_TYPE_NAMES};

/// `job.sinkType` and what goes with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SinkConfig {
    /// A Kudu table on `job.sinkMasterAddresses`.
    #[default]
    Kudu,
    /// Records on Kafka topics.
    Kafka(KafkaSinkConfig),
}

/// `job.sinkFormat`: how a change becomes a Kafka record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordFormat {
    /// `debezium-json`: a Debezium-style envelope (`op`, `before`,
    /// `after`, `source`).
    DebeziumJson,
    /// `upsert-json`: the row as value, a tombstone for a delete.
    UpsertJson,
}

impl RecordFormat {
    /// The key value naming it.
    pub fn name(self) -> &'static str {
        match self {
            RecordFormat::DebeziumJson => "debezium-json",
            RecordFormat::UpsertJson => "upsert-json",
        }
    }
}

/// `job.sinkDeliveryGuarantee` (Flink's `sink.delivery-guarantee`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryGuarantee {
    /// Records are handed to the producer and not waited for.
    None,
    /// A batch counts as written once every record was acknowledged.
    AtLeastOnce,
    /// Kafka transactions committed with ferry's progress.
    ExactlyOnce,
}

impl DeliveryGuarantee {
    /// The key value naming it.
    pub fn name(self) -> &'static str {
        match self {
            DeliveryGuarantee::None => "none",
            DeliveryGuarantee::AtLeastOnce => "at-least-once",
            DeliveryGuarantee::ExactlyOnce => "exactly-once",
        }
    }
}

/// A Kafka sink's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KafkaSinkConfig {
    /// `job.sinkBootstrapServers`, trimmed, comma-separated.
    pub bootstrap_servers: String,
    /// `job.sinkTopic`: the topic, `{table}` standing for the table name.
    pub topic: String,
    /// `job.sinkFormat`.
    pub format: RecordFormat,
    /// `job.sinkDeliveryGuarantee`.
    pub delivery: DeliveryGuarantee,
    /// `job.sinkTransactionalIdPrefix`, if given (else `job.name`).
    pub transactional_id_prefix: Option<String>,
    /// `job.sinkProgressTopic`, if given: where an exactly-once sink
    /// commits each table's progress (else [`KafkaSinkConfig::progress_topic_for`]).
    pub progress_topic: Option<String>,
    /// The producer's `transaction.timeout.ms` for exactly-once: three
    /// checkpoint intervals, at least a minute, at most the brokers'
    /// default `transaction.max.timeout.ms` (15 minutes).
    pub transaction_timeout: std::time::Duration,
    /// `job.sinkTopicPartitions`: 0 = the broker's default.
    pub topic_partitions: u32,
    /// `job.sinkTopicReplicationFactor`: 0 = the broker's default.
    pub topic_replication_factor: u32,
}

/// The Kafka sink's keys, which a Kudu sink refuses.
const KAFKA_KEYS: [ConfigKey; 8] = [
    ConfigKey::SinkBootstrapServers,
    ConfigKey::SinkTopic,
    ConfigKey::SinkFormat,
    ConfigKey::SinkDeliveryGuarantee,
    ConfigKey::SinkTransactionalIdPrefix,
    ConfigKey::SinkProgressTopic,
    ConfigKey::SinkTopicPartitions,
    ConfigKey::SinkTopicReplicationFactor,
];

impl SinkConfig {
    /// Validates `job.sinkType` and the keys of the chosen kind. Kafka keys
    /// given to a Kudu sink are refused, so a typo in `job.sinkType` is not
    /// silently a Kudu job.
    pub(super) fn from_values(v: &Values<'_>) -> Result<Self, ConfigError> {
        let kind = enum_value(v, ConfigKey::SinkType, SINK_TYPE_NAMES)?;
        if kind == "kudu" {
            refuse_set(
                v,
                &KAFKA_KEYS,
                "it is a Kafka sink key and job.sinkType is kudu; set job.sinkType=kafka or remove the key",
            )?;
            // The Kudu sink needs its cluster (checked here, where the kind
            // is known; the key's own row cannot say "required").
            v.required_value(ConfigKey::SinkMasterAddresses)?;
            return Ok(SinkConfig::Kudu);
        }
        if let Some(value) = v.optional(ConfigKey::SinkMasterAddresses) {
            return Err(ConfigError::Unsupported {
                key: ConfigKey::SinkMasterAddresses,
                value: value.to_string(),
                reason: "a Kafka sink (job.sinkType=kafka) writes no Kudu cluster; remove the key",
            });
        }
        let servers = bootstrap_servers(v, ConfigKey::SinkBootstrapServers)?;
        let topic = topic_name(v, ConfigKey::SinkTopic)?;
        let progress_topic = match v.optional(ConfigKey::SinkProgressTopic) {
            None => None,
            Some(_) => {
                let t = topic_name(v, ConfigKey::SinkProgressTopic)?;
                if t.contains("{table}") || t.is_empty() {
                    return Err(invalid(
                        ConfigKey::SinkProgressTopic,
                        &t,
                        "must name one topic (no {table})",
                    ));
                }
                Some(t)
            }
        };
        let format = match enum_value(v, ConfigKey::SinkFormat, SINK_FORMAT_NAMES)? {
            "upsert-json" => RecordFormat::UpsertJson,
            _ => RecordFormat::DebeziumJson,
        };
        let delivery = match enum_value(
            v,
            ConfigKey::SinkDeliveryGuarantee,
            DELIVERY_GUARANTEE_NAMES,
        )? {
            "none" => DeliveryGuarantee::None,
            "exactly-once" => DeliveryGuarantee::ExactlyOnce,
            _ => DeliveryGuarantee::AtLeastOnce,
        };
        let interval = v.millis(ConfigKey::CheckpointingIntervalMillis)?;
        if delivery == DeliveryGuarantee::ExactlyOnce && interval * 2 > MAX_TRANSACTION_TIMEOUT {
            return Err(invalid(
                ConfigKey::CheckpointingIntervalMillis,
                &interval.as_millis().to_string(),
                "exactly-once to Kafka commits a transaction every checkpoint, and brokers abort one open longer than transaction.max.timeout.ms (15 minutes by default): use at most 450000 ms",
            ));
        }
        let transaction_timeout =
            (interval * 3).clamp(MIN_TRANSACTION_TIMEOUT, MAX_TRANSACTION_TIMEOUT);
        let small = |key| -> Result<u32, ConfigError> {
            let (n, value) = v.integer(key)?;
            u32::try_from(n).map_err(|_| ConfigError::OutOfRange {
                key,
                value: value.to_string(),
                expected: "must be 0 (the broker's default) or a positive count".to_string(),
            })
        };
        Ok(SinkConfig::Kafka(KafkaSinkConfig {
            bootstrap_servers: servers,
            topic,
            format,
            delivery,
            transactional_id_prefix: v
                .optional(ConfigKey::SinkTransactionalIdPrefix)
                .map(|p| p.trim().to_string()),
            progress_topic,
            transaction_timeout,
            topic_partitions: small(ConfigKey::SinkTopicPartitions)?,
            topic_replication_factor: small(ConfigKey::SinkTopicReplicationFactor)?,
        }))
    }

    /// The effective value of one of this module's keys (`None` for the
    /// others, and for a Kafka key of a Kudu sink).
    pub(super) fn value_of(&self, key: ConfigKey) -> Option<String> {
        if key == ConfigKey::SinkType {
            return Some(
                match self {
                    SinkConfig::Kudu => "kudu",
                    SinkConfig::Kafka(_) => "kafka",
                }
                .to_string(),
            );
        }
        if !KAFKA_KEYS.contains(&key) {
            return None;
        }
        let SinkConfig::Kafka(k) = self else {
            // A Kudu sink's Kafka keys keep their defaults.
            return key.default_value().map(str::to_string);
        };
        Some(match key {
            ConfigKey::SinkBootstrapServers => k.bootstrap_servers.clone(),
            ConfigKey::SinkTopic => k.topic.clone(),
            ConfigKey::SinkFormat => k.format.name().to_string(),
            ConfigKey::SinkDeliveryGuarantee => k.delivery.name().to_string(),
            ConfigKey::SinkTransactionalIdPrefix => k.transactional_id_prefix.clone()?,
            ConfigKey::SinkProgressTopic => k.progress_topic.clone()?,
            ConfigKey::SinkTopicPartitions => k.topic_partitions.to_string(),
            ConfigKey::SinkTopicReplicationFactor => k.topic_replication_factor.to_string(),
            _ => return None,
        })
    }

    /// The Kafka settings, for a Kafka sink.
    pub fn kafka(&self) -> Option<&KafkaSinkConfig> {
        match self {
            SinkConfig::Kafka(k) => Some(k),
            SinkConfig::Kudu => None,
        }
    }
}

impl KafkaSinkConfig {
    /// The topic of source table `table`: `{table}` replaced by its name,
    /// characters Kafka does not allow in topic names replaced by `_`.
    pub fn topic_for(&self, table: &str) -> String {
        let safe: String = table
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let topic = self.topic.replace("{table}", &safe);
        // Kafka's limit on topic names.
        topic.chars().take(249).collect()
    }

    /// The transactional-id prefix of job `job_name`'s exactly-once sink.
    pub fn transactional_id_prefix_for(&self, job_name: &str) -> String {
        self.transactional_id_prefix
            .clone()
            .unwrap_or_else(|| job_name.to_string())
    }

    /// The progress topic of job `job_name`'s exactly-once sink: the key's,
    /// else `<prefix>_progress` (one per job, so no other job's open
    /// transaction can hide this job's commits from a restore).
    pub fn progress_topic_for(&self, job_name: &str) -> String {
        match &self.progress_topic {
            Some(t) => t.clone(),
            None => {
                let prefix = self.transactional_id_prefix_for(job_name);
                let safe = KafkaSinkConfig {
                    topic: "{table}_progress".to_string(),
                    ..self.clone()
                };
                safe.topic_for(&prefix)
            }
        }
    }
}

/// The smallest and largest `transaction.timeout.ms` an exactly-once sink
/// uses (the largest: brokers' default `transaction.max.timeout.ms`).
const MIN_TRANSACTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
const MAX_TRANSACTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(900);

/// Refuses the first of `keys` given with a value other than its default
/// (a default spelled out, as effective_values writes it, is fine).
pub(super) fn refuse_set(
    v: &Values<'_>,
    keys: &[ConfigKey],
    reason: &'static str,
) -> Result<(), ConfigError> {
    let set = |k: ConfigKey| v.given(k) && v.optional(k).map(str::trim) != k.default_value();
    match keys.iter().copied().find(|&k| set(k)) {
        Some(key) => Err(ConfigError::Unsupported {
            key,
            value: v.optional(key).unwrap_or_default().to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// A brokers key's value (required): `host:port` entries, trimmed,
/// comma-joined.
pub(super) fn bootstrap_servers(v: &Values<'_>, key: ConfigKey) -> Result<String, ConfigError> {
    let given = v
        .optional(key)
        .ok_or(ConfigError::MissingRequired { key })?;
    let servers: Vec<&str> = given.split(',').map(str::trim).collect();
    if let Some(bad) = servers
        .iter()
        .find(|s| s.is_empty() || !s.contains(':') || s.contains(char::is_whitespace))
    {
        return Err(invalid(key, given, &format!("'{bad}' is not a host:port")));
    }
    Ok(servers.join(","))
}

/// A topic-name key's value, trimmed and checked (`{table}` allowed).
pub(super) fn topic_name(v: &Values<'_>, key: ConfigKey) -> Result<String, ConfigError> {
    let topic = v.text(key)?.trim().to_string();
    let without_placeholder = topic.replace("{table}", "");
    if let Some(c) = without_placeholder
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(invalid(
            key,
            &topic,
            &format!("'{c}' is not allowed in a Kafka topic name (letters, digits, '.', '_', '-'; {{table}} for the table name)"),
        ));
    }
    Ok(topic)
}

/// The key's value, case-insensitively one of `names` (returned as the
/// catalog spells it).
pub(super) fn enum_value(
    v: &Values<'_>,
    key: ConfigKey,
    names: &'static [&'static str],
) -> Result<&'static str, ConfigError> {
    let value = v.required_value(key)?;
    let wanted = value.trim().to_ascii_lowercase();
    names
        .iter()
        .copied()
        .find(|n| *n == wanted)
        .ok_or_else(|| ConfigError::InvalidEnum {
            key,
            value: value.to_string(),
            valid: names,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::JobConfig;

    fn kafka(pairs: &[(&str, &str)]) -> Result<JobConfig, ConfigError> {
        let mut all = vec![
            ("job.sourceMasterAddresses", "m1:7051"),
            ("job.tableName", "orders"),
            ("job.checkpointsDirectory", "/tmp/ferry-sink-config"),
            ("job.sinkType", "kafka"),
        ];
        all.extend_from_slice(pairs);
        JobConfig::from_named_pairs(all)
    }

    #[test]
    fn a_kafka_sink_needs_brokers_and_no_sink_masters() {
        let err = kafka(&[]).expect_err("no brokers");
        assert!(
            err.to_string().contains("job.sinkBootstrapServers"),
            "{err}"
        );
        let err = kafka(&[
            ("job.sinkBootstrapServers", "127.0.0.1:9092"),
            ("job.sinkMasterAddresses", "k1:7051"),
        ])
        .expect_err("sink masters");
        assert!(err.to_string().contains("job.sinkMasterAddresses"), "{err}");
        let cfg = kafka(&[("job.sinkBootstrapServers", " a:9092, b:9092 ")]).expect("valid");
        let k = cfg.sink.kafka().expect("kafka");
        assert_eq!(k.bootstrap_servers, "a:9092,b:9092");
        assert_eq!(k.format, RecordFormat::DebeziumJson);
        assert_eq!(k.delivery, DeliveryGuarantee::AtLeastOnce);
        assert!(cfg.sink_master_addresses.is_empty());
    }

    #[test]
    fn kafka_values_are_checked_and_named() {
        let base = ("job.sinkBootstrapServers", "a:9092");
        for (pair, needle) in [
            (("job.sinkFormat", "avro"), "job.sinkFormat"),
            (("job.sinkTopic", "bad topic"), "job.sinkTopic"),
            (
                ("job.sinkDeliveryGuarantee", "twice"),
                "job.sinkDeliveryGuarantee",
            ),
            (
                ("job.sinkProgressTopic", "p.{table}"),
                "job.sinkProgressTopic",
            ),
            (("job.sinkTopicPartitions", "-2"), "job.sinkTopicPartitions"),
        ] {
            let err = kafka(&[base, pair]).expect_err("refused");
            assert!(err.to_string().contains(needle), "{pair:?}: {err}");
        }
        let err = kafka(&[("job.sinkBootstrapServers", "nohost")]).expect_err("no port");
        assert!(err.to_string().contains("'nohost'"), "{err}");
    }

    #[test]
    fn kafka_keys_on_a_kudu_sink_are_refused() {
        let err = JobConfig::from_named_pairs([
            ("job.sourceMasterAddresses", "m1:7051"),
            ("job.sinkMasterAddresses", "k1:7051"),
            ("job.tableName", "orders"),
            ("job.checkpointsDirectory", "/tmp/x"),
            ("job.sinkTopic", "t"),
        ])
        .expect_err("kafka key on kudu");
        assert!(err.to_string().contains("job.sinkTopic"), "{err}");
    }

    #[test]
    fn effective_values_round_trip() {
        let cfg = kafka(&[
            ("job.sinkBootstrapServers", "a:9092"),
            ("job.sinkFormat", "upsert-json"),
            ("job.sinkTopic", "cdc.{table}"),
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
        let k = cfg.sink.kafka().expect("kafka");
        assert_eq!(k.topic_for("sales/2026 q1"), "cdc.sales_2026_q1");
    }
}
