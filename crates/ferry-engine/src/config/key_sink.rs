//! Catalog rows of the keys choosing the job's sink kind and describing a
//! Kafka sink (`job.sinkType`, `job.sinkBootstrapServers`, `job.sinkTopic`,
//! …), kept apart so `key.rs` stays readable. [`super::key`] puts them in
//! its catalog; [`super::sink`] validates them.

use super::spec::{KeyDefault, KeyOrigin, KeySpec, ValueKind};

/// The valid names for `job.sinkType`.
pub(crate) const SINK_TYPE_NAMES: &[&str] = &["kudu", "kafka"];
/// The valid names for `job.sinkFormat`.
pub(crate) const SINK_FORMAT_NAMES: &[&str] = &["debezium-json", "upsert-json"];
/// The valid names for `job.sinkDeliveryGuarantee` (Flink's
/// `sink.delivery-guarantee` values).
pub(crate) const DELIVERY_GUARANTEE_NAMES: &[&str] = &["none", "at-least-once", "exactly-once"];

/// `job.sinkType`.
pub(super) const SINK_TYPE: KeySpec = KeySpec::new(
    "job.sinkType",
    KeyDefault::Value("kudu"),
    ValueKind::Enum(SINK_TYPE_NAMES),
    KeyOrigin::Ferry,
    "Where the changes go: kudu (a sink table on job.sinkMasterAddresses) or kafka (records on job.sinkTopic of job.sinkBootstrapServers; docs/kafka.md).",
);

/// `job.sinkBootstrapServers`.
pub(super) const SINK_BOOTSTRAP_SERVERS: KeySpec = KeySpec::new(
    "job.sinkBootstrapServers",
    KeyDefault::Derived("none; required with job.sinkType=kafka"),
    ValueKind::HttpAddresses,
    KeyOrigin::Ferry,
    "Kafka brokers to bootstrap from, comma-separated host:port (Kafka's bootstrap.servers).",
);

/// `job.sinkTopic`.
pub(super) const SINK_TOPIC: KeySpec = KeySpec::new(
    "job.sinkTopic",
    KeyDefault::Value("{table}"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Kafka topic the records go to; {table} is replaced by the source table's name (characters Kafka does not allow become _). Without {table} every table of the job goes to one topic.",
);

/// `job.sinkFormat`.
pub(super) const SINK_FORMAT: KeySpec = KeySpec::new(
    "job.sinkFormat",
    KeyDefault::Value("debezium-json"),
    ValueKind::Enum(SINK_FORMAT_NAMES),
    KeyOrigin::Ferry,
    "Record format on Kafka: debezium-json (an envelope with op, before/after and source) or upsert-json (key and row; a delete is a tombstone).",
);

/// `job.sinkDeliveryGuarantee`.
pub(super) const SINK_DELIVERY_GUARANTEE: KeySpec = KeySpec::new(
    "job.sinkDeliveryGuarantee",
    KeyDefault::Value("at-least-once"),
    ValueKind::Enum(DELIVERY_GUARANTEE_NAMES),
    KeyOrigin::Ferry,
    "none (records may be lost on a crash), at-least-once (a batch counts as written once the brokers acknowledged every record; replays after a crash repeat records) or exactly-once (Kafka transactions committed with each checkpoint: read_committed consumers see every change once; docs/kafka.md).",
);

/// `job.sinkTransactionalIdPrefix`.
pub(super) const SINK_TRANSACTIONAL_ID_PREFIX: KeySpec = KeySpec::new(
    "job.sinkTransactionalIdPrefix",
    KeyDefault::Derived("job.name"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Prefix of the Kafka transactional ids of an exactly-once sink (Flink's sink.transactional-id-prefix); unique per job.",
);

/// `job.sinkProgressTopic`.
pub(super) const SINK_PROGRESS_TOPIC: KeySpec = KeySpec::new(
    "job.sinkProgressTopic",
    KeyDefault::Derived("<transactional id prefix>_progress"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Compacted topic where an exactly-once sink commits each table's progress in the same transaction as its records (created if missing); a restore continues from it.",
);

/// `job.sinkTopicPartitions`.
pub(super) const SINK_TOPIC_PARTITIONS: KeySpec = KeySpec::new(
    "job.sinkTopicPartitions",
    KeyDefault::Value("0"),
    ValueKind::CountOrZero,
    KeyOrigin::Ferry,
    "Partitions of a topic ferry creates (0: the broker's num.partitions). An existing topic is used as it is.",
);

/// `job.sinkTopicReplicationFactor`.
pub(super) const SINK_TOPIC_REPLICATION_FACTOR: KeySpec = KeySpec::new(
    "job.sinkTopicReplicationFactor",
    KeyDefault::Value("0"),
    ValueKind::CountOrZero,
    KeyOrigin::Ferry,
    "Replication factor of a topic ferry creates (0: the broker's default.replication.factor).",
);
