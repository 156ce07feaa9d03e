//! A Kafka sink's keys (`job.sinkBootstrapServers`, `job.sinkTopic`,
//! `job.sinkFormat`, `job.sinkDeliveryGuarantee`, …) and
//! [`KafkaSinkConfig`].

use std::time::Duration;

use ferry_engine::choice;
use ferry_engine::config::{
    values, Config, ConfigError, ConfigOption, JobConfig, Section, SinkKind, ValueError, ValueKind,
    CHECKPOINTING_INTERVAL_MILLIS,
};

use super::{brokers, one_topic, refuse_set, topic};

choice! {
    /// `job.sinkFormat`: how a change becomes a Kafka record.
    pub enum RecordFormat {
        /// `debezium-json`: a Debezium-style envelope (`op`, `before`,
        /// `after`, `source`).
        DebeziumJson = "debezium-json",
        /// `upsert-json`: the row as value, a tombstone for a delete.
        UpsertJson = "upsert-json",
    }
}

choice! {
    /// `job.sinkDeliveryGuarantee` (Flink's `sink.delivery-guarantee`).
    pub enum DeliveryGuarantee {
        /// Records are handed to the producer and not waited for.
        None = "none",
        /// A batch counts as written once every record was acknowledged.
        AtLeastOnce = "at-least-once",
        /// Kafka transactions committed with ferry's progress.
        ExactlyOnce = "exactly-once",
    }
}

ferry_engine::config_section! {
    /// A Kafka sink's keys (with `job.sinkType=kafka`).
    pub static KAFKA_SINK_KEYS = Section::job("Kafka sink");
    /// `job.sinkBootstrapServers`.
    pub const SINK_BOOTSTRAP_SERVERS: ConfigOption<String> = brokers("job.sinkBootstrapServers")
        .derived("none; required with job.sinkType=kafka")
        .doc("Kafka brokers to bootstrap from, comma-separated host:port (Kafka's bootstrap.servers).");
    /// `job.sinkTopic`.
    pub const SINK_TOPIC: ConfigOption<String> = ConfigOption::new("job.sinkTopic", ValueKind::Text, topic, String::clone)
        .default_value("{table}")
        .doc("Kafka topic the records go to; {table} is replaced by the source table's name (characters Kafka does not allow become _). Without {table} every table of the job goes to one topic.");
    /// `job.sinkFormat`.
    pub const SINK_FORMAT: ConfigOption<RecordFormat> = ConfigOption::choice("job.sinkFormat")
        .default_value("debezium-json")
        .doc("Record format on Kafka: debezium-json (an envelope with op, before/after and source) or upsert-json (key and row; a delete is a tombstone).");
    /// `job.sinkDeliveryGuarantee`.
    pub const SINK_DELIVERY_GUARANTEE: ConfigOption<DeliveryGuarantee> = ConfigOption::choice("job.sinkDeliveryGuarantee")
        .default_value("at-least-once")
        .doc("none (records may be lost on a crash), at-least-once (a batch counts as written once the brokers acknowledged every record; replays after a crash repeat records) or exactly-once (Kafka transactions committed with each checkpoint: read_committed consumers see every change once; docs/kafka.md).");
    /// `job.sinkTransactionalIdPrefix`.
    pub const SINK_TRANSACTIONAL_ID_PREFIX: ConfigOption<String> = ConfigOption::trimmed("job.sinkTransactionalIdPrefix")
        .derived("job.name")
        .blank_means_default()
        .doc("Prefix of the Kafka transactional ids of an exactly-once sink (Flink's sink.transactional-id-prefix); unique per job.");
    /// `job.sinkProgressTopic`.
    pub const SINK_PROGRESS_TOPIC: ConfigOption<String> = ConfigOption::new("job.sinkProgressTopic", ValueKind::Text, progress_topic, String::clone)
        .derived("<transactional id prefix>_progress")
        .blank_means_default()
        .doc("Compacted topic where an exactly-once sink commits each table's progress in the same transaction as its records (created if missing); a restore continues from it.");
    /// `job.sinkTopicPartitions`.
    pub const SINK_TOPIC_PARTITIONS: ConfigOption<u32> = topic_setting("job.sinkTopicPartitions")
        .doc("Partitions of a topic ferry creates (0: the broker's num.partitions). An existing topic is used as it is.");
    /// `job.sinkTopicReplicationFactor`.
    pub const SINK_TOPIC_REPLICATION_FACTOR: ConfigOption<u32> = topic_setting("job.sinkTopicReplicationFactor")
        .doc("Replication factor of a topic ferry creates (0: the broker's default.replication.factor).");
    /// `job.sinkWatermarks`.
    pub const SINK_WATERMARKS: ConfigOption<bool> = ConfigOption::flag("job.sinkWatermarks")
        .default_value("true")
        .doc("Write a watermark record to every partition of the topic each window: key {\"ferry_watermark\":<partition>}, header ferry.watermark, the source time every change before it in the partition is up to (docs/kafka.md, \"Time on the topic\"); false writes none. Every record carries its window end in the headers ferry.window_end and ferry.window_end_ms either way.");
}

fn progress_topic(value: &str) -> Result<String, ValueError> {
    one_topic(value, "must name one topic (no {table})")
}

/// A setting of topics ferry creates: 0 means the broker's default.
const fn topic_setting(name: &'static str) -> ConfigOption<u32> {
    ConfigOption::new(
        name,
        ValueKind::CountOrZero,
        broker_default_or_count,
        print_u32,
    )
    .default_value("0")
}

fn broker_default_or_count(value: &str) -> Result<u32, ValueError> {
    let n = values::integer(value)?;
    u32::try_from(n).map_err(|_| {
        ValueError::OutOfRange("must be 0 (the broker's default) or a positive count".to_string())
    })
}

fn print_u32(n: &u32) -> String {
    n.to_string()
}

impl RecordFormat {
    /// The key value naming it.
    pub fn name(self) -> &'static str {
        self.as_str()
    }
}

impl DeliveryGuarantee {
    /// The key value naming it.
    pub fn name(self) -> &'static str {
        self.as_str()
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
    pub transaction_timeout: Duration,
    /// `job.sinkTopicPartitions`: 0 = the broker's default.
    pub topic_partitions: u32,
    /// `job.sinkTopicReplicationFactor`: 0 = the broker's default.
    pub topic_replication_factor: u32,
    /// `job.sinkWatermarks`.
    pub watermarks: bool,
}

/// The smallest and largest `transaction.timeout.ms` an exactly-once sink
/// uses (the largest: brokers' default `transaction.max.timeout.ms`).
const MIN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(900);

impl KafkaSinkConfig {
    /// The Kafka sink of `job`, when its `job.sinkType` is `kafka` (`None`
    /// for a Kudu sink, which refuses the Kafka sink's keys so a typo in
    /// `job.sinkType` is not silently a Kudu job).
    pub fn from_config(keys: &Config, job: &JobConfig) -> Result<Option<Self>, ConfigError> {
        if job.sink != SinkKind::Kafka {
            refuse_set(
                keys,
                KAFKA_SINK_KEYS.keys,
                "it is a Kafka sink key and job.sinkType is kudu; set job.sinkType=kafka or remove the key",
            )?;
            return Ok(None);
        }
        let bootstrap_servers = keys.get(&SINK_BOOTSTRAP_SERVERS)?;
        let topic = keys.get(&SINK_TOPIC)?;
        let progress_topic = keys.get_optional(&SINK_PROGRESS_TOPIC)?;
        let format = keys.get(&SINK_FORMAT)?;
        let delivery = keys.get(&SINK_DELIVERY_GUARANTEE)?;
        let interval = job.checkpointing_interval;
        if delivery == DeliveryGuarantee::ExactlyOnce && interval * 2 > MAX_TRANSACTION_TIMEOUT {
            return Err(ConfigError::invalid(
                CHECKPOINTING_INTERVAL_MILLIS.spec(),
                &interval.as_millis().to_string(),
                ValueError::Invalid("exactly-once to Kafka commits a transaction every checkpoint, and brokers abort one open longer than transaction.max.timeout.ms (15 minutes by default): use at most 450000 ms".to_string()),
            ));
        }
        Ok(Some(KafkaSinkConfig {
            bootstrap_servers,
            topic,
            format,
            delivery,
            transactional_id_prefix: keys.get_optional(&SINK_TRANSACTIONAL_ID_PREFIX)?,
            progress_topic,
            transaction_timeout: (interval * 3)
                .clamp(MIN_TRANSACTION_TIMEOUT, MAX_TRANSACTION_TIMEOUT),
            topic_partitions: keys.get(&SINK_TOPIC_PARTITIONS)?,
            topic_replication_factor: keys.get(&SINK_TOPIC_REPLICATION_FACTOR)?,
            watermarks: keys.get(&SINK_WATERMARKS)?,
        }))
    }

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
