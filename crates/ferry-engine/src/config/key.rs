//! The catalog of the job's configuration keys (`job.*`, `reader.*`,
//! `writer.*`), kept as data.
//!
//! Every key the job understands is one [`ConfigKey`] variant, and
//! everything a person needs to know about it (exact name, required or
//! default, value kind, one-line doc, whether it comes from the reference
//! job or is ferry's own) is one [`KeySpec`] row of a static table. The
//! validation in [`super::JobConfig::from_raw`] and the binary's parsers,
//! `--help` and generated docs all read that table, so they cannot drift
//! apart.

use std::fmt;
use std::str::FromStr;

use super::error::ConfigError;
use super::key_security;
use super::key_sink;
use super::key_source;
use super::key_tables;
use super::spec::{closest_name, KeyDefault, KeyOrigin, KeySpec, ValueKind};

/// The valid names for `reader.replicaSelection`.
pub(crate) const REPLICA_SELECTION_NAMES: &[&str] = &["CLOSEST_REPLICA", "LEADER_ONLY"];
/// The valid names for `writer.flushMode`.
pub(crate) const FLUSH_MODE_NAMES: &[&str] =
    &["AUTO_FLUSH_BACKGROUND", "AUTO_FLUSH_SYNC", "MANUAL_FLUSH"];

/// One configuration key of a replication job.
///
/// Names, defaults and meanings follow Apache Kudu's Flink replication job
/// (`job.*`, `reader.*`, `writer.*`) except for the keys whose
/// [`origin`](ConfigKey::origin) is [`KeyOrigin::Ferry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ConfigKey {
    /// `job.sourceMasterAddresses`
    SourceMasterAddresses,
    /// `job.sinkMasterAddresses`
    SinkMasterAddresses,
    /// `job.tableName`
    TableName,
    /// `job.checkpointsDirectory`
    CheckpointsDirectory,
    /// `job.discoveryIntervalSeconds`
    DiscoveryIntervalSeconds,
    /// `job.checkpointingIntervalMillis`
    CheckpointingIntervalMillis,
    /// `job.createTable`
    CreateTable,
    /// `job.tableSuffix`
    TableSuffix,
    /// `job.sinkTableName` (ferry only)
    SinkTableName,
    /// `job.restoreOwner`
    RestoreOwner,
    /// `job.checkpointsRetained` (ferry only)
    CheckpointsRetained,
    /// `job.name` (ferry only)
    JobName,
    /// `job.periodicSavepointInterval` (ferry only; Flink operator alias)
    PeriodicSavepointInterval,
    /// `job.periodicSavepointsRetained` (ferry only; Flink operator alias)
    PeriodicSavepointsRetained,
    /// `job.stateReplicas` (ferry only)
    StateReplicas,
    /// `job.positionTable` (ferry only)
    PositionTable,
    /// `job.tablePattern` (ferry only)
    TablePattern,
    /// `job.tableDiscoveryIntervalSeconds` (ferry only)
    TableDiscoveryIntervalSeconds,
    /// `job.schemaEvolution` (ferry only)
    SchemaEvolution,
    /// `job.renameSinkTable` (ferry only)
    RenameSinkTable,
    /// `job.sinkType` (ferry only)
    SinkType,
    /// `job.sinkBootstrapServers` (ferry only)
    SinkBootstrapServers,
    /// `job.sinkTopic` (ferry only)
    SinkTopic,
    /// `job.sinkFormat` (ferry only)
    SinkFormat,
    /// `job.sinkDeliveryGuarantee` (ferry only)
    SinkDeliveryGuarantee,
    /// `job.sinkTransactionalIdPrefix` (ferry only)
    SinkTransactionalIdPrefix,
    /// `job.sinkProgressTopic` (ferry only)
    SinkProgressTopic,
    /// `job.sinkTopicPartitions` (ferry only)
    SinkTopicPartitions,
    /// `job.sinkTopicReplicationFactor` (ferry only)
    SinkTopicReplicationFactor,
    /// `job.sourceType` (ferry only)
    SourceType,
    /// `job.sourceBootstrapServers` (ferry only)
    SourceBootstrapServers,
    /// `job.sourceTopic` (ferry only)
    SourceTopic,
    /// `job.sourceFormat` (ferry only)
    SourceFormat,
    /// `job.sourceStartupMode` (ferry only)
    SourceStartupMode,
    /// `job.sourceStartupTimestampMillis` (ferry only)
    SourceStartupTimestampMillis,
    /// `job.sourceBoundedMode` (ferry only)
    SourceBoundedMode,
    /// `job.sourceBoundedTimestampMillis` (ferry only)
    SourceBoundedTimestampMillis,
    /// `job.sourceGroupId` (ferry only)
    SourceGroupId,
    /// `job.sourceErrorPolicy` (ferry only)
    SourceErrorPolicy,
    /// `job.sourceDeadLetterTopic` (ferry only)
    SourceDeadLetterTopic,
    /// `reader.batchSizeBytes`
    BatchSizeBytes,
    /// `reader.splitSizeBytes`
    SplitSizeBytes,
    /// `reader.scanRequestTimeout`
    ScanRequestTimeout,
    /// `reader.prefetching`
    Prefetching,
    /// `reader.keepAlivePeriodMs`
    KeepAlivePeriodMs,
    /// `reader.replicaSelection`
    ReplicaSelection,
    /// `reader.quietTabletMaxSkips` (ferry only)
    QuietTabletMaxSkips,
    /// `writer.flushMode`
    FlushMode,
    /// `writer.operationTimeout`
    OperationTimeout,
    /// `writer.maxBufferSize`
    MaxBufferSize,
    /// `writer.flushInterval`
    FlushInterval,
    /// `writer.ignoreNotFound`
    IgnoreNotFound,
    /// `writer.ignoreDuplicate`
    IgnoreDuplicate,
    /// `restart-strategy.type` (Flink)
    RestartStrategyType,
    /// `restart-strategy.fixed-delay.attempts` (Flink)
    FixedDelayAttempts,
    /// `restart-strategy.fixed-delay.delay` (Flink)
    FixedDelayDelay,
    /// `restart-strategy.failure-rate.max-failures-per-interval` (Flink)
    FailureRateMaxFailures,
    /// `restart-strategy.failure-rate.failure-rate-interval` (Flink)
    FailureRateInterval,
    /// `restart-strategy.failure-rate.delay` (Flink)
    FailureRateDelay,
    /// `restart-strategy.exponential-delay.initial-backoff` (Flink)
    ExponentialInitialBackoff,
    /// `restart-strategy.exponential-delay.max-backoff` (Flink)
    ExponentialMaxBackoff,
    /// `restart-strategy.exponential-delay.backoff-multiplier` (Flink)
    ExponentialMultiplier,
    /// `restart-strategy.exponential-delay.reset-backoff-threshold` (Flink)
    ExponentialResetThreshold,
    /// `restart-strategy.exponential-delay.jitter-factor` (Flink)
    ExponentialJitter,
    /// `restart-strategy.exponential-delay.attempts-before-reset-backoff` (Flink)
    ExponentialAttempts,
    /// `execution.checkpointing.tolerable-failed-checkpoints` (Flink)
    TolerableFailedCheckpoints,
    /// `high-availability.type` (Flink's key; ferry's `lease` value)
    HaType,
    /// `high-availability.storageDir` (Flink)
    HaStorageDir,
    /// `high-availability.cluster-id` (Flink)
    HaClusterId,
    /// `high-availability.lease-duration` (ferry only)
    HaLeaseDuration,
    /// `high-availability.renew-interval` (ferry only)
    HaRenewInterval,
    /// `security.kerberos.login.principal` (Flink)
    KerberosPrincipal,
    /// `security.kerberos.login.keytab` (Flink)
    KerberosKeytab,
    /// `security.kerberos.login.use-ticket-cache` (Flink)
    KerberosUseTicketCache,
    /// `reader.kerberosPrincipal` (ferry only)
    SourceKerberosPrincipal,
    /// `reader.kerberosKeytab` (ferry only)
    SourceKerberosKeytab,
    /// `reader.saslProtocolName` (ferry only)
    SourceSaslProtocolName,
    /// `writer.kerberosPrincipal` (ferry only)
    SinkKerberosPrincipal,
    /// `writer.kerberosKeytab` (ferry only)
    SinkKerberosKeytab,
    /// `writer.saslProtocolName` (ferry only)
    SinkSaslProtocolName,
}

use KeyDefault::{Derived, Required, Value};
use KeyOrigin::{Ferry, Flink, Reference};

/// The valid names for `restart-strategy.type` (Flink's spellings).
pub(crate) const RESTART_STRATEGY_NAMES: &[&str] = &[
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

/// The valid names for `high-availability.type`.
pub(crate) const HA_TYPE_NAMES: &[&str] = &["none", "lease"];

// The catalog. Row i describes ALL[i]; a unit test checks the two line up.
const CATALOG: &[(ConfigKey, KeySpec)] = &[
    (
        ConfigKey::SourceMasterAddresses,
        KeySpec::new(
            "job.sourceMasterAddresses",
            Derived("none; required with job.sourceType=kudu"),
            ValueKind::MasterAddresses,
            Reference,
            "Masters of the source Kudu cluster, comma-separated host:port.",
        ),
    ),
    (
        ConfigKey::SinkMasterAddresses,
        KeySpec::new(
            "job.sinkMasterAddresses",
            Derived("none; required with job.sinkType=kudu (the default)"),
            ValueKind::MasterAddresses,
            Reference,
            "Masters of the sink Kudu cluster, comma-separated host:port.",
        ),
    ),
    (
        ConfigKey::TableName,
        KeySpec::new(
            "job.tableName",
            Derived("none; job.tableName or job.tablePattern is needed"),
            ValueKind::Text,
            Reference,
            "Source table to replicate, or a comma-separated list of tables (a list is a ferry extension). At least one of job.tableName and job.tablePattern.",
        ),
    ),
    (
        ConfigKey::CheckpointsDirectory,
        KeySpec::new(
            "job.checkpointsDirectory",
            Required,
            ValueKind::Location,
            Reference,
            "Where checkpoints are kept (<dir>/<job-id>/chk-<N>/_metadata): a path, file:// URI, or s3://bucket/prefix (gs://, az:// where built in; see the s3.* keys).",
        ),
    ),
    (
        ConfigKey::DiscoveryIntervalSeconds,
        KeySpec::new(
            "job.discoveryIntervalSeconds",
            Value("600"),
            ValueKind::Seconds,
            Reference,
            "How often a new diff-scan window is opened.",
        ),
    ),
    (
        ConfigKey::CheckpointingIntervalMillis,
        KeySpec::new(
            "job.checkpointingIntervalMillis",
            Value("60000"),
            ValueKind::Millis,
            Reference,
            "How often a checkpoint is taken; must be below the discovery interval.",
        ),
    ),
    (
        ConfigKey::CreateTable,
        KeySpec::new(
            "job.createTable",
            Value("false"),
            ValueKind::Bool,
            Reference,
            "Create the sink table (schema and partitioning of the source) if it is absent.",
        ),
    ),
    (
        ConfigKey::TableSuffix,
        KeySpec::new(
            "job.tableSuffix",
            Value(""),
            ValueKind::Text,
            Reference,
            "Appended to the table name to name the sink table.",
        ),
    ),
    (
        ConfigKey::SinkTableName,
        KeySpec::new(
            "job.sinkTableName",
            Derived("<job.tableName><job.tableSuffix>"),
            ValueKind::Text,
            Ferry,
            "The sink table's whole name, when it is not the source table's name plus a suffix (e.g. a reverse job after a cutover copies <name>_copy back to <name>). Not together with a non-empty job.tableSuffix.",
        ),
    ),
    (
        ConfigKey::RestoreOwner,
        KeySpec::new(
            "job.restoreOwner",
            Value("false"),
            ValueKind::Bool,
            Reference,
            "With job.createTable, give the sink table the source table's owner.",
        ),
    ),
    (
        ConfigKey::CheckpointsRetained,
        KeySpec::new(
            "job.checkpointsRetained",
            Value("3"),
            ValueKind::Count,
            Ferry,
            "How many completed checkpoints to keep; older ones are deleted.",
        ),
    ),
    (
        ConfigKey::JobName,
        KeySpec::new(
            "job.name",
            Derived("ferry-replication-<job.tableName>"),
            ValueKind::Text,
            Ferry,
            "Job name shown in the REST API and metrics.",
        ),
    ),
    (
        ConfigKey::PeriodicSavepointInterval,
        KeySpec::new(
            "job.periodicSavepointInterval",
            Value("0"),
            ValueKind::Duration,
            Ferry,
            "Take a savepoint this often (Flink duration, e.g. '10 min'), into the savepoint directory (--savepointPath), else <job.checkpointsDirectory>/savepoints; 0 = off. A failed one is logged and counted, never fails the job.",
        )
        .with_aliases(&["kubernetes.operator.periodic.savepoint.interval"]),
    ),
    (
        ConfigKey::PeriodicSavepointsRetained,
        KeySpec::new(
            "job.periodicSavepointsRetained",
            Value("10"),
            ValueKind::Count,
            Ferry,
            "How many periodic savepoints of this replication to keep (older ones are deleted; user savepoints never are).",
        )
        .with_aliases(&["kubernetes.operator.savepoint.history.max.count"]),
    ),
    (
        ConfigKey::StateReplicas,
        KeySpec::new(
            "job.stateReplicas",
            Value(""),
            ValueKind::Locations,
            Ferry,
            "Replica locations (comma-separated) every completed checkpoint and savepoint is copied to, as <replica>/<job-id>/chk-<N> and <replica>/savepoints/savepoint-*; empty = none.",
        ),
    ),
    (
        ConfigKey::PositionTable,
        KeySpec::new(
            "job.positionTable",
            Value("ferry_positions"),
            ValueKind::Text,
            Ferry,
            "Table on the sink cluster where ferry records how far each sink table is (created if missing), so a restore from an older checkpoint or savepoint resumes where the sink is. Empty turns it off: UNSAFE, such a restore may then bring back rows the source deleted.",
        ),
    ),
    (ConfigKey::TablePattern, key_tables::TABLE_PATTERN),
    (
        ConfigKey::TableDiscoveryIntervalSeconds,
        key_tables::TABLE_DISCOVERY_INTERVAL,
    ),
    (ConfigKey::SchemaEvolution, key_tables::SCHEMA_EVOLUTION),
    (ConfigKey::RenameSinkTable, key_tables::RENAME_SINK_TABLE),
    (ConfigKey::SinkType, key_sink::SINK_TYPE),
    (ConfigKey::SinkBootstrapServers, key_sink::SINK_BOOTSTRAP_SERVERS),
    (ConfigKey::SinkTopic, key_sink::SINK_TOPIC),
    (ConfigKey::SinkFormat, key_sink::SINK_FORMAT),
    (
        ConfigKey::SinkDeliveryGuarantee,
        key_sink::SINK_DELIVERY_GUARANTEE,
    ),
    (
        ConfigKey::SinkTransactionalIdPrefix,
        key_sink::SINK_TRANSACTIONAL_ID_PREFIX,
    ),
    (ConfigKey::SinkProgressTopic, key_sink::SINK_PROGRESS_TOPIC),
    (ConfigKey::SinkTopicPartitions, key_sink::SINK_TOPIC_PARTITIONS),
    (
        ConfigKey::SinkTopicReplicationFactor,
        key_sink::SINK_TOPIC_REPLICATION_FACTOR,
    ),
    (ConfigKey::SourceType, key_source::SOURCE_TYPE),
    (ConfigKey::SourceBootstrapServers, key_source::SOURCE_BOOTSTRAP_SERVERS),
    (ConfigKey::SourceTopic, key_source::SOURCE_TOPIC),
    (ConfigKey::SourceFormat, key_source::SOURCE_FORMAT),
    (ConfigKey::SourceStartupMode, key_source::SOURCE_STARTUP_MODE),
    (ConfigKey::SourceStartupTimestampMillis, key_source::SOURCE_STARTUP_TIMESTAMP),
    (ConfigKey::SourceBoundedMode, key_source::SOURCE_BOUNDED_MODE),
    (ConfigKey::SourceBoundedTimestampMillis, key_source::SOURCE_BOUNDED_TIMESTAMP),
    (ConfigKey::SourceGroupId, key_source::SOURCE_GROUP_ID),
    (ConfigKey::SourceErrorPolicy, key_source::SOURCE_ERROR_POLICY),
    (ConfigKey::SourceDeadLetterTopic, key_source::SOURCE_DEAD_LETTER_TOPIC),
    (
        ConfigKey::BatchSizeBytes,
        KeySpec::new(
            "reader.batchSizeBytes",
            Value("20971520"),
            ValueKind::Bytes,
            Reference,
            "Bytes a tablet server returns per scan batch (20 MiB by default).",
        ),
    ),
    (
        ConfigKey::SplitSizeBytes,
        KeySpec::new(
            "reader.splitSizeBytes",
            Value("-1"),
            ValueKind::Bytes,
            Reference,
            "Target bytes per split; -1 means one split per tablet.",
        ),
    ),
    (
        ConfigKey::ScanRequestTimeout,
        KeySpec::new(
            "reader.scanRequestTimeout",
            Value("30000"),
            ValueKind::Millis,
            Reference,
            "Timeout of one scan request.",
        ),
    ),
    (
        ConfigKey::Prefetching,
        KeySpec::new(
            "reader.prefetching",
            Value("false"),
            ValueKind::Bool,
            Reference,
            "Request the next scan batch as soon as one is handed on, while the writer works; costs one more scan batch of memory per pipeline.",
        ),
    ),
    (
        ConfigKey::KeepAlivePeriodMs,
        KeySpec::new(
            "reader.keepAlivePeriodMs",
            Value("15000"),
            ValueKind::Millis,
            Reference,
            "How often an idle open scanner is kept alive on its tablet server.",
        ),
    ),
    (
        ConfigKey::ReplicaSelection,
        KeySpec::new(
            "reader.replicaSelection",
            Value("CLOSEST_REPLICA"),
            ValueKind::Enum(REPLICA_SELECTION_NAMES),
            Reference,
            "Which replica of a tablet to scan.",
        ),
    ),
    (
        ConfigKey::QuietTabletMaxSkips,
        KeySpec::new(
            "reader.quietTabletMaxSkips",
            Value("30"),
            ValueKind::CountOrZero,
            Ferry,
            "Diff windows in a row that may skip a tablet whose write counters prove it unchanged (read from the tablet servers' /metrics after a safe-time barrier at the window's end); every tablet is still scanned at least every N+1 windows. 0 scans every tablet every window.",
        ),
    ),
    (
        ConfigKey::FlushMode,
        KeySpec::new(
            "writer.flushMode",
            Value("AUTO_FLUSH_BACKGROUND"),
            ValueKind::Enum(FLUSH_MODE_NAMES),
            Reference,
            "Flush mode of the sink write session. AUTO_FLUSH_SYNC sends and awaits every row on its own; MANUAL_FLUSH sends only when the sink flushes: every writer.maxBufferSize rows and at the end of each scan batch (writer.flushInterval unused).",
        ),
    ),
    (
        ConfigKey::OperationTimeout,
        KeySpec::new(
            "writer.operationTimeout",
            Value("30000"),
            ValueKind::Millis,
            Reference,
            "Timeout of one write operation.",
        ),
    ),
    (
        ConfigKey::MaxBufferSize,
        KeySpec::new(
            "writer.maxBufferSize",
            Value("1000"),
            ValueKind::Count,
            Reference,
            "Operations buffered by the write session before it starts a flush; while earlier flushes are still in flight the buffer keeps filling, up to 1.5 MiB of rows. A scan batch is written whole (AUTO_FLUSH_BACKGROUND): in requests of at least this many rows and 1.5 MiB per tablet, 7 MiB at most.",
        ),
    ),
    (
        ConfigKey::FlushInterval,
        KeySpec::new(
            "writer.flushInterval",
            Value("1000"),
            ValueKind::Millis,
            Reference,
            "Longest time a buffered operation waits before a background flush.",
        ),
    ),
    (
        ConfigKey::IgnoreNotFound,
        KeySpec::new(
            "writer.ignoreNotFound",
            Value("false"),
            ValueKind::Bool,
            Reference,
            "Only false is accepted: deletes are always DELETE_IGNORE, so a replayed delete of an absent row is already harmless (docs/semantics.md).",
        ),
    ),
    (
        ConfigKey::IgnoreDuplicate,
        KeySpec::new(
            "writer.ignoreDuplicate",
            Value("false"),
            ValueKind::Bool,
            Reference,
            "Only false is accepted: rows are always written as UPSERT_IGNORE, which never fails on a present row (docs/semantics.md).",
        ),
    ),
    (
        ConfigKey::RestartStrategyType,
        KeySpec::new(
            "restart-strategy.type",
            Value("exponential-delay"),
            ValueKind::Enum(RESTART_STRATEGY_NAMES),
            Flink,
            "What a job does after a transient failure (timeouts, unavailable servers, leader changes, storage errors): restart from its newest complete checkpoint with exponential-delay, fixed-delay or failure-rate backoff, or fail at once (none).",
        )
        .with_aliases(&["restart-strategy"]),
    ),
    (
        ConfigKey::FixedDelayAttempts,
        KeySpec::new(
            "restart-strategy.fixed-delay.attempts",
            Value("1"),
            ValueKind::CountOrZero,
            Flink,
            "fixed-delay: restarts allowed in the job's life.",
        ),
    ),
    (
        ConfigKey::FixedDelayDelay,
        KeySpec::new(
            "restart-strategy.fixed-delay.delay",
            Value("1 s"),
            ValueKind::Duration,
            Flink,
            "fixed-delay: wait before each restart.",
        ),
    ),
    (
        ConfigKey::FailureRateMaxFailures,
        KeySpec::new(
            "restart-strategy.failure-rate.max-failures-per-interval",
            Value("1"),
            ValueKind::Count,
            Flink,
            "failure-rate: failures tolerated within the interval before the job fails.",
        ),
    ),
    (
        ConfigKey::FailureRateInterval,
        KeySpec::new(
            "restart-strategy.failure-rate.failure-rate-interval",
            Value("1 min"),
            ValueKind::Duration,
            Flink,
            "failure-rate: the sliding interval failures are counted in.",
        ),
    ),
    (
        ConfigKey::FailureRateDelay,
        KeySpec::new(
            "restart-strategy.failure-rate.delay",
            Value("1 s"),
            ValueKind::Duration,
            Flink,
            "failure-rate: wait before each restart.",
        ),
    ),
    (
        ConfigKey::ExponentialInitialBackoff,
        KeySpec::new(
            "restart-strategy.exponential-delay.initial-backoff",
            Value("1 s"),
            ValueKind::Duration,
            Flink,
            "exponential-delay: the first wait.",
        ),
    ),
    (
        ConfigKey::ExponentialMaxBackoff,
        KeySpec::new(
            "restart-strategy.exponential-delay.max-backoff",
            Value("1 min"),
            ValueKind::Duration,
            Flink,
            "exponential-delay: the longest wait.",
        ),
    ),
    (
        ConfigKey::ExponentialMultiplier,
        KeySpec::new(
            "restart-strategy.exponential-delay.backoff-multiplier",
            Value("1.5"),
            ValueKind::Number,
            Flink,
            "exponential-delay: growth of the wait per failure (at least 1).",
        ),
    ),
    (
        ConfigKey::ExponentialResetThreshold,
        KeySpec::new(
            "restart-strategy.exponential-delay.reset-backoff-threshold",
            Value("1 h"),
            ValueKind::Duration,
            Flink,
            "exponential-delay: running this long without a failure resets the wait to initial-backoff.",
        ),
    ),
    (
        ConfigKey::ExponentialJitter,
        KeySpec::new(
            "restart-strategy.exponential-delay.jitter-factor",
            Value("0.1"),
            ValueKind::Number,
            Flink,
            "exponential-delay: random share (0 to 1) added to or taken from each wait.",
        ),
    ),
    (
        ConfigKey::ExponentialAttempts,
        KeySpec::new(
            "restart-strategy.exponential-delay.attempts-before-reset-backoff",
            Value("2147483647"),
            ValueKind::Count,
            Flink,
            "exponential-delay: restarts allowed without a reset before the job fails.",
        ),
    ),
    (
        ConfigKey::TolerableFailedCheckpoints,
        KeySpec::new(
            "execution.checkpointing.tolerable-failed-checkpoints",
            Value("0"),
            ValueKind::CountOrZero,
            Flink,
            "Consecutive failed checkpoints tolerated; one more restarts the job (restart-strategy.*). Replication never goes past the newest complete checkpoint's window either way.",
        ),
    ),
    (
        ConfigKey::HaType,
        KeySpec::new(
            "high-availability.type",
            Value("none"),
            ValueKind::Enum(HA_TYPE_NAMES),
            Flink,
            "none: one instance, no fencing. lease: the active instance renews a lease object in high-availability.storageDir; `ferry standby` takes over when it lapses, and an instance that lost it stops before its next checkpoint or row (docs/dr.md).",
        )
        .with_aliases(&["high-availability"]),
    ),
    (
        ConfigKey::HaStorageDir,
        KeySpec::new(
            "high-availability.storageDir",
            Derived("job.checkpointsDirectory"),
            ValueKind::Location,
            Flink,
            "Where the lease lives (<dir>/<job-id>/_lease/); every instance of the job must see the same store.",
        ),
    ),
    (
        ConfigKey::HaClusterId,
        KeySpec::new(
            "high-availability.cluster-id",
            Derived("job.name"),
            ValueKind::Text,
            Flink,
            "With high-availability.type lease: the job id is derived from it (as Flink's application mode does), so the active and its standbys agree on it.",
        ),
    ),
    (
        ConfigKey::HaLeaseDuration,
        KeySpec::new(
            "high-availability.lease-duration",
            Value("5 s"),
            ValueKind::Duration,
            Ferry,
            "A standby takes over after the lease went this long without a renewal; the active stops writing a fifth of it earlier.",
        ),
    ),
    (
        ConfigKey::HaRenewInterval,
        KeySpec::new(
            "high-availability.renew-interval",
            Value("1 s"),
            ValueKind::Duration,
            Ferry,
            "How often the active renews its lease (at most a third of the lease duration).",
        ),
    ),
    (ConfigKey::KerberosPrincipal, key_security::LOGIN_PRINCIPAL),
    (ConfigKey::KerberosKeytab, key_security::LOGIN_KEYTAB),
    (ConfigKey::KerberosUseTicketCache, key_security::LOGIN_USE_TICKET_CACHE),
    (ConfigKey::SourceKerberosPrincipal, key_security::SOURCE_PRINCIPAL),
    (ConfigKey::SourceKerberosKeytab, key_security::SOURCE_KEYTAB),
    (ConfigKey::SourceSaslProtocolName, key_security::SOURCE_SERVICE_NAME),
    (ConfigKey::SinkKerberosPrincipal, key_security::SINK_PRINCIPAL),
    (ConfigKey::SinkKerberosKeytab, key_security::SINK_KEYTAB),
    (ConfigKey::SinkSaslProtocolName, key_security::SINK_SERVICE_NAME),
];

const ALL: &[ConfigKey] = &[
    ConfigKey::SourceMasterAddresses,
    ConfigKey::SinkMasterAddresses,
    ConfigKey::TableName,
    ConfigKey::CheckpointsDirectory,
    ConfigKey::DiscoveryIntervalSeconds,
    ConfigKey::CheckpointingIntervalMillis,
    ConfigKey::CreateTable,
    ConfigKey::TableSuffix,
    ConfigKey::SinkTableName,
    ConfigKey::RestoreOwner,
    ConfigKey::CheckpointsRetained,
    ConfigKey::JobName,
    ConfigKey::PeriodicSavepointInterval,
    ConfigKey::PeriodicSavepointsRetained,
    ConfigKey::StateReplicas,
    ConfigKey::PositionTable,
    ConfigKey::TablePattern,
    ConfigKey::TableDiscoveryIntervalSeconds,
    ConfigKey::SchemaEvolution,
    ConfigKey::RenameSinkTable,
    ConfigKey::SinkType,
    ConfigKey::SinkBootstrapServers,
    ConfigKey::SinkTopic,
    ConfigKey::SinkFormat,
    ConfigKey::SinkDeliveryGuarantee,
    ConfigKey::SinkTransactionalIdPrefix,
    ConfigKey::SinkProgressTopic,
    ConfigKey::SinkTopicPartitions,
    ConfigKey::SinkTopicReplicationFactor,
    ConfigKey::SourceType,
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
    ConfigKey::BatchSizeBytes,
    ConfigKey::SplitSizeBytes,
    ConfigKey::ScanRequestTimeout,
    ConfigKey::Prefetching,
    ConfigKey::KeepAlivePeriodMs,
    ConfigKey::ReplicaSelection,
    ConfigKey::QuietTabletMaxSkips,
    ConfigKey::FlushMode,
    ConfigKey::OperationTimeout,
    ConfigKey::MaxBufferSize,
    ConfigKey::FlushInterval,
    ConfigKey::IgnoreNotFound,
    ConfigKey::IgnoreDuplicate,
    ConfigKey::RestartStrategyType,
    ConfigKey::FixedDelayAttempts,
    ConfigKey::FixedDelayDelay,
    ConfigKey::FailureRateMaxFailures,
    ConfigKey::FailureRateInterval,
    ConfigKey::FailureRateDelay,
    ConfigKey::ExponentialInitialBackoff,
    ConfigKey::ExponentialMaxBackoff,
    ConfigKey::ExponentialMultiplier,
    ConfigKey::ExponentialResetThreshold,
    ConfigKey::ExponentialJitter,
    ConfigKey::ExponentialAttempts,
    ConfigKey::TolerableFailedCheckpoints,
    ConfigKey::HaType,
    ConfigKey::HaStorageDir,
    ConfigKey::HaClusterId,
    ConfigKey::HaLeaseDuration,
    ConfigKey::HaRenewInterval,
    ConfigKey::KerberosPrincipal,
    ConfigKey::KerberosKeytab,
    ConfigKey::KerberosUseTicketCache,
    ConfigKey::SourceKerberosPrincipal,
    ConfigKey::SourceKerberosKeytab,
    ConfigKey::SourceSaslProtocolName,
    ConfigKey::SinkKerberosPrincipal,
    ConfigKey::SinkKerberosKeytab,
    ConfigKey::SinkSaslProtocolName,
];

impl ConfigKey {
    /// Every key, in catalog order (required keys first, then by section).
    pub fn all() -> &'static [ConfigKey] {
        ALL
    }

    /// Every key's catalog row, in catalog order.
    pub fn specs() -> impl Iterator<Item = &'static KeySpec> {
        CATALOG.iter().map(|(_, spec)| spec)
    }

    /// The catalog row of this key.
    pub fn spec(self) -> &'static KeySpec {
        // The enum has no explicit discriminants, so `self as usize` is its
        // position in ALL and in CATALOG (checked by a unit test).
        &CATALOG[self as usize].1
    }

    /// Exact key name, e.g. `job.tableName`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The key's section: `job`, `reader`, `writer`, `restart-strategy`,
    /// `execution` or `high-availability`.
    pub fn section(self) -> &'static str {
        self.spec().section()
    }

    /// Whether the job refuses to start without this key.
    pub fn is_required(self) -> bool {
        self.spec().is_required()
    }

    /// The literal default, if the key has one. Required keys and keys whose
    /// default is derived from other keys (see [`ConfigKey::default_doc`])
    /// return `None`.
    pub fn default_value(self) -> Option<&'static str> {
        self.spec().default_value()
    }

    /// The default as shown in help: `required`, the literal value (quoted
    /// when empty), or how it is derived.
    pub fn default_doc(self) -> String {
        self.spec().default_doc()
    }

    /// The kind of value the key takes.
    pub fn kind(self) -> ValueKind {
        self.spec().kind
    }

    /// One-line description.
    pub fn doc(self) -> &'static str {
        self.spec().doc
    }

    /// Whether the key comes from the reference job or is ferry's own.
    pub fn origin(self) -> KeyOrigin {
        self.spec().origin
    }

    /// The known key closest to `name`, if any is close enough to be a
    /// plausible typo (case differences are free).
    pub fn suggest(name: &str) -> Option<ConfigKey> {
        let best = closest_name(name, ALL.iter().map(|k| k.name()))?;
        ALL.iter().copied().find(|k| k.name() == best)
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ConfigKey {
    type Err = ConfigError;

    /// Exact, case-sensitive lookup; an unknown name yields
    /// [`ConfigError::UnknownKey`] with the nearest known key.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL.iter()
            .copied()
            .find(|k| k.spec().answers_to(s))
            .ok_or_else(|| ConfigError::UnknownKey {
                key: s.to_string(),
                suggestion: ConfigKey::suggest(s),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_rows_line_up_with_the_enum() {
        assert_eq!(CATALOG.len(), ALL.len());
        for (i, key) in ALL.iter().enumerate() {
            assert_eq!(CATALOG[i].0, *key, "catalog row {i}");
            assert_eq!(*key as usize, i, "{key:?} position");
            assert!(
                [
                    "job",
                    "reader",
                    "writer",
                    "restart-strategy",
                    "execution",
                    "high-availability",
                    "security"
                ]
                .contains(&key.section()),
                "{} is in section {}",
                key.name(),
                key.section()
            );
            assert!(!key.doc().is_empty());
        }
    }

    #[test]
    fn names_are_unique_and_round_trip() {
        for key in ConfigKey::all() {
            assert_eq!(key.name().parse::<ConfigKey>().ok(), Some(*key));
            assert_eq!(key.to_string(), key.name());
        }
        let mut names: Vec<_> = ConfigKey::all().iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ConfigKey::all().len());
    }

    #[test]
    fn reference_names_and_defaults() {
        // Straight from the reference job's parser
        // (docs/reference-job.md#configuration-keys).
        let expected: &[(&str, Option<&str>)] = &[
            ("job.sourceMasterAddresses", None),
            ("job.sinkMasterAddresses", None),
            ("job.tableName", None),
            ("job.checkpointsDirectory", None),
            ("job.discoveryIntervalSeconds", Some("600")),
            ("job.checkpointingIntervalMillis", Some("60000")),
            ("job.createTable", Some("false")),
            ("job.tableSuffix", Some("")),
            ("job.restoreOwner", Some("false")),
            ("reader.batchSizeBytes", Some("20971520")),
            ("reader.splitSizeBytes", Some("-1")),
            ("reader.scanRequestTimeout", Some("30000")),
            ("reader.prefetching", Some("false")),
            ("reader.keepAlivePeriodMs", Some("15000")),
            ("reader.replicaSelection", Some("CLOSEST_REPLICA")),
            ("writer.flushMode", Some("AUTO_FLUSH_BACKGROUND")),
            ("writer.operationTimeout", Some("30000")),
            ("writer.maxBufferSize", Some("1000")),
            ("writer.flushInterval", Some("1000")),
            ("writer.ignoreNotFound", Some("false")),
            ("writer.ignoreDuplicate", Some("false")),
        ];
        for (name, default) in expected {
            let key: ConfigKey = name.parse().expect("known key");
            assert_eq!(key.origin(), KeyOrigin::Reference, "{name}");
            assert_eq!(key.default_value(), *default, "{name}");
            // ferry made job.tableName optional (job.tablePattern may replace
            // it) and the master addresses required with a Kudu sink or
            // source only.
            let required = default.is_none()
                && ![
                    "job.tableName",
                    "job.sinkMasterAddresses",
                    "job.sourceMasterAddresses",
                ]
                .contains(name);
            assert_eq!(key.is_required(), required, "{name}");
        }
        let reference = ConfigKey::all()
            .iter()
            .filter(|k| k.origin() == KeyOrigin::Reference)
            .count();
        assert_eq!(reference, expected.len());
    }

    #[test]
    fn ferry_only_keys_are_marked() {
        let ferry: Vec<_> = ConfigKey::all()
            .iter()
            .filter(|k| k.origin() == KeyOrigin::Ferry)
            .map(|k| k.name())
            .collect();
        assert_eq!(
            ferry,
            [
                "job.sinkTableName",
                "job.checkpointsRetained",
                "job.name",
                "job.periodicSavepointInterval",
                "job.periodicSavepointsRetained",
                "job.stateReplicas",
                "job.positionTable",
                "job.tablePattern",
                "job.tableDiscoveryIntervalSeconds",
                "job.schemaEvolution",
                "job.renameSinkTable",
                "job.sinkType",
                "job.sinkBootstrapServers",
                "job.sinkTopic",
                "job.sinkFormat",
                "job.sinkDeliveryGuarantee",
                "job.sinkTransactionalIdPrefix",
                "job.sinkProgressTopic",
                "job.sinkTopicPartitions",
                "job.sinkTopicReplicationFactor",
                "job.sourceType",
                "job.sourceBootstrapServers",
                "job.sourceTopic",
                "job.sourceFormat",
                "job.sourceStartupMode",
                "job.sourceStartupTimestampMillis",
                "job.sourceBoundedMode",
                "job.sourceBoundedTimestampMillis",
                "job.sourceGroupId",
                "job.sourceErrorPolicy",
                "job.sourceDeadLetterTopic",
                "reader.quietTabletMaxSkips",
                "high-availability.lease-duration",
                "high-availability.renew-interval",
                "reader.kerberosPrincipal",
                "reader.kerberosKeytab",
                "reader.saslProtocolName",
                "writer.kerberosPrincipal",
                "writer.kerberosKeytab",
                "writer.saslProtocolName"
            ]
        );
        assert_eq!(ConfigKey::CheckpointsRetained.default_value(), Some("3"));
        assert_eq!(ConfigKey::JobName.default_value(), None);
        assert!(!ConfigKey::JobName.is_required());
        assert_eq!(
            ConfigKey::JobName.default_doc(),
            "ferry-replication-<job.tableName>"
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(
            ConfigKey::suggest("job.tablename"),
            Some(ConfigKey::TableName)
        );
        assert_eq!(
            ConfigKey::suggest("job.tableNmae"),
            Some(ConfigKey::TableName)
        );
        assert_eq!(ConfigKey::suggest("tableName"), Some(ConfigKey::TableName));
        assert_eq!(
            ConfigKey::suggest("reader.batchSize"),
            Some(ConfigKey::BatchSizeBytes)
        );
        assert_eq!(
            ConfigKey::suggest("writer.flushmode"),
            Some(ConfigKey::FlushMode)
        );
        assert_eq!(ConfigKey::suggest("completely.unrelated.thing"), None);
    }
}
