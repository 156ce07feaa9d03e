//! A Kafka changelog source's keys (`job.sourceBootstrapServers`,
//! `job.sourceTopic`, `job.sourceFormat`, start and stop offsets, the
//! bad-record policy) and [`KafkaSourceConfig`]: a changelog topic applied
//! to the Kudu table `job.tableName` on `job.sinkMasterAddresses`.

use ferry_engine::choice;
use ferry_engine::config::{
    values, AnyOption, Config, ConfigError, ConfigOption, JobConfig, Section, SourceKind,
    ValueError, ValueKind,
};

use super::{brokers, one_topic, refuse_set, topic};

/// The valid names for `job.sourceFormat`.
const SOURCE_FORMAT_NAMES: &[&str] = &["debezium-json", "upsert-json", "json"];

choice! {
    /// `job.sourceStartupMode`'s names (Flink's `scan.startup.mode`); see
    /// [`StartupMode`].
    pub enum StartupName {
        /// `earliest-offset`.
        Earliest = "earliest-offset",
        /// `latest-offset`.
        Latest = "latest-offset",
        /// `group-offsets`.
        GroupOffsets = "group-offsets",
        /// `timestamp`.
        Timestamp = "timestamp",
    }
}

choice! {
    /// `job.sourceBoundedMode`'s names (Flink's `scan.bounded.mode`); see
    /// [`BoundedMode`].
    pub enum BoundedName {
        /// `unbounded`.
        Unbounded = "unbounded",
        /// `latest-offset`.
        Latest = "latest-offset",
        /// `timestamp`.
        Timestamp = "timestamp",
    }
}

choice! {
    /// `job.sourceErrorPolicy`: what happens to a record that cannot be
    /// decoded or written.
    pub enum ErrorPolicy {
        /// The job fails, naming topic, partition and offset.
        Fail = "fail",
        /// The record is counted and left out.
        Skip = "skip",
        /// The record goes to `job.sourceDeadLetterTopic`.
        DeadLetter = "dead-letter",
    }
}

ferry_engine::config_section! {
    /// A Kafka changelog source's keys (with `job.sourceType=kafka`).
    pub static KAFKA_SOURCE_KEYS = Section::job("Kafka source");
    /// `job.sourceBootstrapServers`.
    pub const SOURCE_BOOTSTRAP_SERVERS: ConfigOption<String> = brokers("job.sourceBootstrapServers")
        .derived("none; required with job.sourceType=kafka")
        .doc("Kafka brokers of a Kafka source, comma-separated host:port.");
    /// `job.sourceTopic`.
    pub const SOURCE_TOPIC: ConfigOption<String> = ConfigOption::new("job.sourceTopic", ValueKind::Text, source_topic, String::clone)
        .derived("none; required with job.sourceType=kafka")
        .blank_means_default()
        .doc("The changelog topic a Kafka source reads (every partition, in parallel).");
    /// `job.sourceFormat`, as its key value.
    pub const SOURCE_FORMAT: ConfigOption<&'static str> = ConfigOption::new("job.sourceFormat", ValueKind::Enum(SOURCE_FORMAT_NAMES), source_format, print_str)
        .default_value("debezium-json")
        .doc("Record format of the changelog topic: debezium-json (op c/r/u upserts after, d deletes), upsert-json (a value upserts, a tombstone deletes the key) or json (each value a row to upsert).");
    /// `job.sourceStartupMode`.
    pub const SOURCE_STARTUP_MODE: ConfigOption<StartupName> = ConfigOption::choice("job.sourceStartupMode")
        .default_value("earliest-offset")
        .doc("Where a Kafka source starts without a restore point (Flink's scan.startup.mode): earliest-offset, latest-offset, group-offsets (job.sourceGroupId's committed offsets; earliest where none) or timestamp (job.sourceStartupTimestampMillis).");
    /// `job.sourceStartupTimestampMillis`.
    pub const SOURCE_STARTUP_TIMESTAMP: ConfigOption<u64> = epoch_millis("job.sourceStartupTimestampMillis")
        .derived("none; required with job.sourceStartupMode=timestamp")
        .doc("Epoch milliseconds: with job.sourceStartupMode=timestamp, each partition starts at its first record at or after it.");
    /// `job.sourceBoundedMode`.
    pub const SOURCE_BOUNDED_MODE: ConfigOption<BoundedName> = ConfigOption::choice("job.sourceBoundedMode")
        .default_value("unbounded")
        .doc("Where a Kafka source stops (Flink's scan.bounded.mode): unbounded (never), latest-offset (the partitions' ends when the job started) or timestamp (job.sourceBoundedTimestampMillis); a bounded job ends FINISHED once everything up to there is written.");
    /// `job.sourceBoundedTimestampMillis`.
    pub const SOURCE_BOUNDED_TIMESTAMP: ConfigOption<u64> = epoch_millis("job.sourceBoundedTimestampMillis")
        .derived("none; required with job.sourceBoundedMode=timestamp")
        .doc("Epoch milliseconds: with job.sourceBoundedMode=timestamp, each partition stops before its first record after it.");
    /// `job.sourceGroupId`.
    pub const SOURCE_GROUP_ID: ConfigOption<String> = ConfigOption::trimmed("job.sourceGroupId")
        .derived("ferry-<job.name>")
        .blank_means_default()
        .doc("Consumer group a Kafka source commits its offsets to after each checkpoint, for monitoring (ferry's own position is in its checkpoints), and reads with group-offsets.");
    /// `job.sourceErrorPolicy`.
    pub const SOURCE_ERROR_POLICY: ConfigOption<ErrorPolicy> = ConfigOption::choice("job.sourceErrorPolicy")
        .default_value("fail")
        .doc("A record that cannot be decoded or written (bad JSON, wrong type, missing key, a Kudu row error): fail (the job fails, naming topic/partition/offset), skip (counted) or dead-letter (sent to job.sourceDeadLetterTopic with that context in headers).");
    /// `job.sourceDeadLetterTopic`.
    pub const SOURCE_DEAD_LETTER_TOPIC: ConfigOption<String> = ConfigOption::new("job.sourceDeadLetterTopic", ValueKind::Text, topic, String::clone)
        .derived("none; required with job.sourceErrorPolicy=dead-letter")
        .blank_means_default()
        .doc("Topic (on job.sourceBootstrapServers) that receives the records job.sourceErrorPolicy=dead-letter sets aside.");
}

fn source_topic(value: &str) -> Result<String, ValueError> {
    one_topic(value, "names one topic ({table} is for sink topics)")
}

fn source_format(value: &str) -> Result<&'static str, ValueError> {
    let wanted = value.trim().to_ascii_lowercase();
    SOURCE_FORMAT_NAMES
        .iter()
        .copied()
        .find(|n| *n == wanted)
        .ok_or(ValueError::NotOneOf(SOURCE_FORMAT_NAMES))
}

fn print_str(s: &&'static str) -> String {
    s.to_string()
}

/// Epoch milliseconds, 0 or more; blank: not given.
const fn epoch_millis(name: &'static str) -> ConfigOption<u64> {
    ConfigOption::new(name, ValueKind::CountOrZero, parse_epoch_millis, print_u64)
        .blank_means_default()
}

fn parse_epoch_millis(value: &str) -> Result<u64, ValueError> {
    let n = values::integer(value)?;
    u64::try_from(n)
        .map_err(|_| ValueError::OutOfRange("epoch milliseconds, 0 or more".to_string()))
}

fn print_u64(n: &u64) -> String {
    n.to_string()
}

/// A timestamp mode's timestamp key, which it needs.
fn timestamp(
    keys: &Config,
    key: &ConfigOption<u64>,
    mode: &dyn AnyOption,
) -> Result<u64, ConfigError> {
    keys.get_optional(key)?.ok_or_else(|| {
        ConfigError::invalid(
            mode.spec(),
            "timestamp",
            ValueError::Invalid(format!("needs {key} (epoch milliseconds)")),
        )
    })
}

/// `job.sourceStartupMode`: where partitions start without a restore point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartupMode {
    /// The partitions' first offsets.
    Earliest,
    /// The partitions' ends when the job starts.
    Latest,
    /// The consumer group's committed offsets (earliest where none).
    GroupOffsets,
    /// The first record at or after this epoch millisecond.
    Timestamp(u64),
}

/// `job.sourceBoundedMode`: where partitions stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundedMode {
    /// Never.
    Unbounded,
    /// The partitions' ends when the job started.
    Latest,
    /// Before the first record after this epoch millisecond.
    Timestamp(u64),
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
    /// `job.sourceStartupMode` (with its timestamp).
    pub startup: StartupMode,
    /// `job.sourceBoundedMode` (with its timestamp).
    pub bounded: BoundedMode,
    /// `job.sourceGroupId`, if given (else `ferry-<job.name>`).
    pub group_id: Option<String>,
    /// `job.sourceErrorPolicy`.
    pub error_policy: ErrorPolicy,
    /// `job.sourceDeadLetterTopic` (required with `dead-letter`).
    pub dead_letter_topic: Option<String>,
}

impl KafkaSourceConfig {
    /// The Kafka source of `job`, when its `job.sourceType` is `kafka`
    /// (`None` for a Kudu source, which refuses the Kafka source's keys).
    pub fn from_config(keys: &Config, job: &JobConfig) -> Result<Option<Self>, ConfigError> {
        if job.source != SourceKind::Kafka {
            refuse_set(
                keys,
                KAFKA_SOURCE_KEYS.keys,
                "it is a Kafka source key and job.sourceType is kudu; set job.sourceType=kafka or remove the key",
            )?;
            return Ok(None);
        }
        let bootstrap_servers = keys.get(&SOURCE_BOOTSTRAP_SERVERS)?;
        let topic = keys.get(&SOURCE_TOPIC)?;
        let format = keys.get(&SOURCE_FORMAT)?;
        let startup = match keys.get(&SOURCE_STARTUP_MODE)? {
            StartupName::Earliest => StartupMode::Earliest,
            StartupName::Latest => StartupMode::Latest,
            StartupName::GroupOffsets => StartupMode::GroupOffsets,
            StartupName::Timestamp => StartupMode::Timestamp(timestamp(
                keys,
                &SOURCE_STARTUP_TIMESTAMP,
                &SOURCE_STARTUP_MODE,
            )?),
        };
        let bounded = match keys.get(&SOURCE_BOUNDED_MODE)? {
            BoundedName::Unbounded => BoundedMode::Unbounded,
            BoundedName::Latest => BoundedMode::Latest,
            BoundedName::Timestamp => BoundedMode::Timestamp(timestamp(
                keys,
                &SOURCE_BOUNDED_TIMESTAMP,
                &SOURCE_BOUNDED_MODE,
            )?),
        };
        let error_policy = keys.get(&SOURCE_ERROR_POLICY)?;
        let dead_letter_topic = keys.get_optional(&SOURCE_DEAD_LETTER_TOPIC)?;
        if error_policy == ErrorPolicy::DeadLetter && dead_letter_topic.is_none() {
            return Err(ConfigError::invalid(
                SOURCE_ERROR_POLICY.spec(),
                "dead-letter",
                ValueError::Invalid(format!("needs {SOURCE_DEAD_LETTER_TOPIC}")),
            ));
        }
        Ok(Some(KafkaSourceConfig {
            bootstrap_servers,
            topic,
            format,
            startup,
            bounded,
            group_id: keys.get_optional(&SOURCE_GROUP_ID)?,
            error_policy,
            dead_letter_topic,
        }))
    }

    /// The consumer group of job `job_name`.
    pub fn group_id_for(&self, job_name: &str) -> String {
        self.group_id
            .clone()
            .unwrap_or_else(|| format!("ferry-{job_name}"))
    }
}
