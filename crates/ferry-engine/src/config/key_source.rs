//! Catalog rows of the keys choosing the job's source kind and describing
//! a Kafka changelog source (`job.sourceType`, `job.sourceBootstrapServers`,
//! `job.sourceTopic`, …), kept apart so `key.rs` stays readable.
//! [`super::key`] puts them in its catalog; [`super::source`] validates
//! them. Names follow Flink's Kafka connector options where one exists
//! (`scan.startup.mode` → `job.sourceStartupMode`, with its values).

use super::spec::{KeyDefault, KeyOrigin, KeySpec, ValueKind};

/// The valid names for `job.sourceType`.
pub(crate) const SOURCE_TYPE_NAMES: &[&str] = &["kudu", "kafka"];
/// The valid names for `job.sourceFormat`.
pub(crate) const SOURCE_FORMAT_NAMES: &[&str] = &["debezium-json", "upsert-json", "json"];
/// The valid names for `job.sourceStartupMode` (Flink's `scan.startup.mode`).
pub(crate) const STARTUP_MODE_NAMES: &[&str] = &[
    "earliest-offset",
    "latest-offset",
    "group-offsets",
    "timestamp",
];
/// The valid names for `job.sourceBoundedMode` (Flink's `scan.bounded.mode`).
pub(crate) const BOUNDED_MODE_NAMES: &[&str] = &["unbounded", "latest-offset", "timestamp"];
/// The valid names for `job.sourceErrorPolicy`.
pub(crate) const ERROR_POLICY_NAMES: &[&str] = &["fail", "skip", "dead-letter"];

pub(super) const SOURCE_TYPE: KeySpec = KeySpec::new(
    "job.sourceType",
    KeyDefault::Value("kudu"),
    ValueKind::Enum(SOURCE_TYPE_NAMES),
    KeyOrigin::Ferry,
    "Where the changes come from: kudu (job.tableName on job.sourceMasterAddresses) or kafka (a changelog topic applied to the Kudu table job.tableName on job.sinkMasterAddresses; docs/kafka.md).",
);

pub(super) const SOURCE_BOOTSTRAP_SERVERS: KeySpec = KeySpec::new(
    "job.sourceBootstrapServers",
    KeyDefault::Derived("none; required with job.sourceType=kafka"),
    ValueKind::HttpAddresses,
    KeyOrigin::Ferry,
    "Kafka brokers of a Kafka source, comma-separated host:port.",
);

pub(super) const SOURCE_TOPIC: KeySpec = KeySpec::new(
    "job.sourceTopic",
    KeyDefault::Derived("none; required with job.sourceType=kafka"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "The changelog topic a Kafka source reads (every partition, in parallel).",
);

pub(super) const SOURCE_FORMAT: KeySpec = KeySpec::new(
    "job.sourceFormat",
    KeyDefault::Value("debezium-json"),
    ValueKind::Enum(SOURCE_FORMAT_NAMES),
    KeyOrigin::Ferry,
    "Record format of the changelog topic: debezium-json (op c/r/u upserts after, d deletes), upsert-json (a value upserts, a tombstone deletes the key) or json (each value a row to upsert).",
);

pub(super) const SOURCE_STARTUP_MODE: KeySpec = KeySpec::new(
    "job.sourceStartupMode",
    KeyDefault::Value("earliest-offset"),
    ValueKind::Enum(STARTUP_MODE_NAMES),
    KeyOrigin::Ferry,
    "Where a Kafka source starts without a restore point (Flink's scan.startup.mode): earliest-offset, latest-offset, group-offsets (job.sourceGroupId's committed offsets; earliest where none) or timestamp (job.sourceStartupTimestampMillis).",
);

pub(super) const SOURCE_STARTUP_TIMESTAMP: KeySpec = KeySpec::new(
    "job.sourceStartupTimestampMillis",
    KeyDefault::Derived("none; required with job.sourceStartupMode=timestamp"),
    ValueKind::CountOrZero,
    KeyOrigin::Ferry,
    "Epoch milliseconds: with job.sourceStartupMode=timestamp, each partition starts at its first record at or after it.",
);

pub(super) const SOURCE_BOUNDED_MODE: KeySpec = KeySpec::new(
    "job.sourceBoundedMode",
    KeyDefault::Value("unbounded"),
    ValueKind::Enum(BOUNDED_MODE_NAMES),
    KeyOrigin::Ferry,
    "Where a Kafka source stops (Flink's scan.bounded.mode): unbounded (never), latest-offset (the partitions' ends when the job started) or timestamp (job.sourceBoundedTimestampMillis); a bounded job ends FINISHED once everything up to there is written.",
);

pub(super) const SOURCE_BOUNDED_TIMESTAMP: KeySpec = KeySpec::new(
    "job.sourceBoundedTimestampMillis",
    KeyDefault::Derived("none; required with job.sourceBoundedMode=timestamp"),
    ValueKind::CountOrZero,
    KeyOrigin::Ferry,
    "Epoch milliseconds: with job.sourceBoundedMode=timestamp, each partition stops before its first record after it.",
);

pub(super) const SOURCE_GROUP_ID: KeySpec = KeySpec::new(
    "job.sourceGroupId",
    KeyDefault::Derived("ferry-<job.name>"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Consumer group a Kafka source commits its offsets to after each checkpoint, for monitoring (ferry's own position is in its checkpoints), and reads with group-offsets.",
);

pub(super) const SOURCE_ERROR_POLICY: KeySpec = KeySpec::new(
    "job.sourceErrorPolicy",
    KeyDefault::Value("fail"),
    ValueKind::Enum(ERROR_POLICY_NAMES),
    KeyOrigin::Ferry,
    "A record that cannot be decoded or written (bad JSON, wrong type, missing key, a Kudu row error): fail (the job fails, naming topic/partition/offset), skip (counted) or dead-letter (sent to job.sourceDeadLetterTopic with that context in headers).",
);

pub(super) const SOURCE_DEAD_LETTER_TOPIC: KeySpec = KeySpec::new(
    "job.sourceDeadLetterTopic",
    KeyDefault::Derived("none; required with job.sourceErrorPolicy=dead-letter"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Topic (on job.sourceBootstrapServers) that receives the records job.sourceErrorPolicy=dead-letter sets aside.",
);
