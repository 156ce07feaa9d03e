//! Step two of configuration: the validated, typed [`JobConfig`].
//!
//! Every value is parsed according to its catalog entry, defaults are filled
//! in, and the cross-key rules live here, once. Unlike the reference job,
//! intervals, timeouts, sizes and counts must be positive (its parser accepts
//! `0` or negative values and fails later, or never).

use std::fmt;
use std::num::{NonZeroU64, NonZeroUsize};
use std::str::FromStr;
use std::time::Duration;

use super::error::ConfigError;
use super::ha::{ha_job_id, HaConfig};
use super::key::{ConfigKey, FLUSH_MODE_NAMES, REPLICA_SELECTION_NAMES};
use super::raw::RawConfig;
use super::restart::RestartConfig;
use super::security::KerberosConfig;
use super::sink::SinkConfig;
use super::source::SourceConfig;
use crate::checkpoint::{JobId, StorageLocation};

/// Which replica of a tablet the reader scans (`reader.replicaSelection`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReplicaSelection {
    /// `CLOSEST_REPLICA`: a replica on the local host if any, else any one.
    #[default]
    ClosestReplica,
    /// `LEADER_ONLY`: always the leader.
    LeaderOnly,
}

impl ReplicaSelection {
    /// The name used in configuration (`CLOSEST_REPLICA`, `LEADER_ONLY`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaSelection::ClosestReplica => REPLICA_SELECTION_NAMES[0],
            ReplicaSelection::LeaderOnly => REPLICA_SELECTION_NAMES[1],
        }
    }
}

impl fmt::Display for ReplicaSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ReplicaSelection {
    type Err = ConfigError;

    /// Accepts the configuration names, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            ReplicaSelection::ClosestReplica,
            ReplicaSelection::LeaderOnly,
        ]
        .into_iter()
        .find(|v| v.as_str().eq_ignore_ascii_case(s.trim()))
        .ok_or_else(|| ConfigError::InvalidEnum {
            key: ConfigKey::ReplicaSelection,
            value: s.to_string(),
            valid: REPLICA_SELECTION_NAMES,
        })
    }
}

/// Flush mode of the sink write session (`writer.flushMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlushMode {
    /// `AUTO_FLUSH_BACKGROUND`: buffer and flush in the background.
    #[default]
    AutoFlushBackground,
    /// `AUTO_FLUSH_SYNC`: every operation is sent and awaited on its own.
    AutoFlushSync,
    /// `MANUAL_FLUSH`: buffer until the sink flushes explicitly (every
    /// `writer.maxBufferSize` rows and at the end of each scan batch).
    ManualFlush,
}

impl FlushMode {
    /// The name used in configuration (`AUTO_FLUSH_BACKGROUND`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            FlushMode::AutoFlushBackground => FLUSH_MODE_NAMES[0],
            FlushMode::AutoFlushSync => FLUSH_MODE_NAMES[1],
            FlushMode::ManualFlush => FLUSH_MODE_NAMES[2],
        }
    }
}

impl fmt::Display for FlushMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FlushMode {
    type Err = ConfigError;

    /// Accepts the configuration names, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            FlushMode::AutoFlushBackground,
            FlushMode::AutoFlushSync,
            FlushMode::ManualFlush,
        ]
        .into_iter()
        .find(|v| v.as_str().eq_ignore_ascii_case(s.trim()))
        .ok_or_else(|| ConfigError::InvalidEnum {
            key: ConfigKey::FlushMode,
            value: s.to_string(),
            valid: FLUSH_MODE_NAMES,
        })
    }
}

/// How the source table is scanned (`reader.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderConfig {
    /// `reader.batchSizeBytes`: bytes per scan batch (Kudu's wire field is
    /// 32-bit, hence `u32`).
    pub batch_size_bytes: u32,
    /// `reader.splitSizeBytes`: target split size; `None` (configured as
    /// `-1`) means one split per tablet.
    pub split_size_bytes: Option<NonZeroU64>,
    /// `reader.scanRequestTimeout`.
    pub scan_request_timeout: Duration,
    /// `reader.prefetching`: keep the next scan request in flight while a
    /// batch is handed on.
    pub prefetching: bool,
    /// `reader.keepAlivePeriodMs`.
    pub keep_alive_period: Duration,
    /// `reader.replicaSelection`.
    pub replica_selection: ReplicaSelection,
    /// `reader.quietTabletMaxSkips`: diff windows in a row a tablet proven
    /// unchanged may go without a scan (0: never skip).
    pub quiet_tablet_max_skips: u32,
}

/// How rows are written to the sink (`writer.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriterConfig {
    /// `writer.flushMode`.
    pub flush_mode: FlushMode,
    /// `writer.operationTimeout`.
    pub operation_timeout: Duration,
    /// `writer.maxBufferSize`: operations buffered before a flush.
    pub max_buffer_size: NonZeroUsize,
    /// `writer.flushInterval`.
    pub flush_interval: Duration,
    /// `writer.ignoreNotFound`: always `false` (`true` is refused, see
    /// docs/semantics.md); kept for the reference job's command lines.
    pub ignore_not_found: bool,
    /// `writer.ignoreDuplicate`: always `false`, like `ignore_not_found`.
    pub ignore_duplicate: bool,
}

/// A validated replication job configuration.
///
/// Only [`JobConfig::from_raw`] builds one (the struct is
/// `#[non_exhaustive]`), so holding a `JobConfig` means every rule held.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobConfig {
    /// `job.sourceMasterAddresses`, split on commas and trimmed.
    pub source_master_addresses: Vec<String>,
    /// `job.sinkMasterAddresses`, split on commas and trimmed.
    pub sink_master_addresses: Vec<String>,
    /// `job.tableName`: the source table.
    pub table_name: String,
    /// `job.checkpointsDirectory`.
    pub checkpoints_directory: StorageLocation,
    /// `job.discoveryIntervalSeconds`: how often a new window opens.
    pub discovery_interval: Duration,
    /// `job.checkpointingIntervalMillis`; always below `discovery_interval`.
    pub checkpointing_interval: Duration,
    /// `job.createTable`.
    pub create_table: bool,
    /// `job.tableSuffix`.
    pub table_suffix: String,
    /// `job.sinkTableName` (ferry only): the sink table's whole name when
    /// given (then `table_suffix` is empty); see [`JobConfig::sink_table_name`].
    pub sink_table: Option<String>,
    /// `job.restoreOwner`.
    pub restore_owner: bool,
    /// `job.checkpointsRetained` (ferry only).
    pub checkpoints_retained: NonZeroUsize,
    /// `job.name` (ferry only).
    pub job_name: String,
    /// `job.periodicSavepointInterval` (ferry only): `None` when 0 (off).
    pub periodic_savepoint_interval: Option<Duration>,
    /// `job.periodicSavepointsRetained` (ferry only).
    pub periodic_savepoints_retained: NonZeroUsize,
    /// `job.stateReplicas` (ferry only): where completed checkpoints and
    /// savepoints are copied; distinct, none equal to the checkpoints
    /// directory.
    pub state_replicas: Vec<StorageLocation>,
    /// `job.positionTable` (ferry only): the sink position table; `None`
    /// (the key set empty) turns the sink position off.
    pub position_table: Option<String>,
    /// `reader.*`.
    pub reader: ReaderConfig,
    /// `writer.*`.
    pub writer: WriterConfig,
    /// `restart-strategy.*` and
    /// `execution.checkpointing.tolerable-failed-checkpoints`.
    pub restart: RestartConfig,
    /// `high-availability.*`.
    pub ha: HaConfig,
    /// Which source tables the job replicates: `job.tableName` (one name
    /// or a comma-separated list) and `job.tablePattern`.
    pub tables: TableSelection,
    /// `job.schemaEvolution` (ferry only): follow source schema changes on
    /// the sink at window boundaries.
    pub schema_evolution: bool,
    /// `job.tableDiscoveryIntervalSeconds` (ferry only): how often the job
    /// looks for new and dropped source tables.
    pub table_discovery_interval: Duration,
    /// `job.renameSinkTable` (ferry only): rename the sink table when the
    /// source table is renamed (keeping `job.tableSuffix`).
    pub rename_sink_table: bool,
    /// `job.sinkType` and the Kafka sink keys (ferry only).
    pub sink: SinkConfig,
    /// `job.sourceType` and the Kafka source keys (ferry only).
    pub source: SourceConfig,
    /// `security.kerberos.login.*` and the per-cluster Kerberos keys.
    pub kerberos: KerberosConfig,
}

/// The source tables a job replicates.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TableSelection {
    /// Tables named in `job.tableName` (in order, no duplicates).
    pub names: Vec<String>,
    /// `job.tablePattern`: a regular expression a whole source table name
    /// must match.
    pub pattern: Option<String>,
}

impl TableSelection {
    /// `job.tableName` (one name or a comma-separated list, trimmed, no
    /// duplicates) and `job.tablePattern` (a valid regex); at least one.
    fn from_values(v: &Values<'_>) -> Result<Self, ConfigError> {
        let mut names: Vec<String> = Vec::new();
        if let Some(value) = v.optional(ConfigKey::TableName) {
            for name in value.split(',').map(str::trim) {
                if name.is_empty() {
                    return Err(invalid(
                        ConfigKey::TableName,
                        value,
                        "has an empty entry in the comma-separated list",
                    ));
                }
                if names.iter().any(|n| n == name) {
                    return Err(invalid(
                        ConfigKey::TableName,
                        value,
                        &format!("table '{name}' is listed twice; list each table once"),
                    ));
                }
                names.push(name.to_owned());
            }
        }
        let pattern = match v.optional(ConfigKey::TablePattern) {
            Some(value) => {
                let pattern = value.trim().to_owned();
                if let Err(e) = anchored_regex(&pattern) {
                    return Err(invalid(
                        ConfigKey::TablePattern,
                        value,
                        &format!("not a valid regular expression: {e}"),
                    ));
                }
                Some(pattern)
            }
            None => None,
        };
        if names.is_empty() && pattern.is_none() {
            return Err(ConfigError::NoTables);
        }
        Ok(TableSelection { names, pattern })
    }

    /// `job.tablePattern` compiled to match whole table names, if given.
    /// The pattern was checked by [`JobConfig::from_raw`]; an error here
    /// means the selection was built some other way.
    pub fn pattern_regex(&self) -> Result<Option<regex::Regex>, regex::Error> {
        self.pattern.as_deref().map(anchored_regex).transpose()
    }

    /// Whether `name` is selected: named in `job.tableName` or matching
    /// `job.tablePattern` (whole name).
    pub fn selects(&self, name: &str, pattern: Option<&regex::Regex>) -> bool {
        self.names.iter().any(|n| n == name) || pattern.is_some_and(|p| p.is_match(name))
    }

    /// Whether the job replicates exactly one named table (and no pattern).
    pub fn is_single(&self) -> bool {
        self.names.len() == 1 && self.pattern.is_none()
    }
}

impl JobConfig {
    /// Validates a raw configuration: parses every value, fills defaults,
    /// checks ranges and the cross-key rules. Reports the first problem, in
    /// catalog order (required keys first).
    pub fn from_raw(raw: &RawConfig) -> Result<Self, ConfigError> {
        let v = Values { raw };
        let source = SourceConfig::from_values(&v)?;
        let source_master_addresses = match source {
            SourceConfig::Kudu => v.masters(ConfigKey::SourceMasterAddresses)?,
            SourceConfig::Kafka(_) => Vec::new(),
        };
        let sink = SinkConfig::from_values(&v)?;
        if let (SourceConfig::Kafka(_), SinkConfig::Kafka(_)) = (&source, &sink) {
            return Err(invalid(
                ConfigKey::SinkType,
                "kafka",
                "a Kafka source writes a Kudu table (job.tableName on job.sinkMasterAddresses); Kafka to Kafka is not a ferry job",
            ));
        }
        let sink_master_addresses = match sink {
            SinkConfig::Kudu => v.masters(ConfigKey::SinkMasterAddresses)?,
            SinkConfig::Kafka(_) => Vec::new(),
        };
        let tables = TableSelection::from_values(&v)?;
        let table_name = tables.names.join(",");
        let checkpoints_directory = v.location(ConfigKey::CheckpointsDirectory)?;
        let config = JobConfig {
            source_master_addresses,
            sink_master_addresses,
            discovery_interval: Duration::from_secs(
                v.positive(ConfigKey::DiscoveryIntervalSeconds)?,
            ),
            checkpointing_interval: v.millis(ConfigKey::CheckpointingIntervalMillis)?,
            create_table: v.boolean(ConfigKey::CreateTable)?,
            table_suffix: v.required_value(ConfigKey::TableSuffix)?.to_string(),
            sink_table: v
                .optional(ConfigKey::SinkTableName)
                .map(|t| t.trim().to_owned()),
            restore_owner: v.boolean(ConfigKey::RestoreOwner)?,
            checkpoints_retained: v.count(ConfigKey::CheckpointsRetained)?,
            job_name: match v.value(ConfigKey::JobName)? {
                Some(_) => v.text(ConfigKey::JobName)?,
                None => format!(
                    "ferry-replication-{}",
                    match (&tables.names[..], &tables.pattern) {
                        ([], Some(pattern)) => pattern.as_str(),
                        _ => table_name.as_str(),
                    }
                ),
            },
            periodic_savepoint_interval: v
                .optional_duration(ConfigKey::PeriodicSavepointInterval)?,
            periodic_savepoints_retained: v.count(ConfigKey::PeriodicSavepointsRetained)?,
            state_replicas: v.replicas(&checkpoints_directory)?,
            position_table: Some(v.required_value(ConfigKey::PositionTable)?.trim())
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
            table_name,
            reader: ReaderConfig {
                batch_size_bytes: v.batch_size()?,
                split_size_bytes: v.split_size()?,
                scan_request_timeout: v.millis(ConfigKey::ScanRequestTimeout)?,
                prefetching: v.boolean(ConfigKey::Prefetching)?,
                keep_alive_period: v.millis(ConfigKey::KeepAlivePeriodMs)?,
                replica_selection: v.required_value(ConfigKey::ReplicaSelection)?.parse()?,
                quiet_tablet_max_skips: v.count_or_zero_u32(ConfigKey::QuietTabletMaxSkips)?,
            },
            writer: WriterConfig {
                flush_mode: v.required_value(ConfigKey::FlushMode)?.parse()?,
                operation_timeout: v.millis(ConfigKey::OperationTimeout)?,
                max_buffer_size: v.count(ConfigKey::MaxBufferSize)?,
                flush_interval: v.millis(ConfigKey::FlushInterval)?,
                ignore_not_found: v.boolean(ConfigKey::IgnoreNotFound)?,
                ignore_duplicate: v.boolean(ConfigKey::IgnoreDuplicate)?,
            },
            restart: RestartConfig::from_values(&v)?,
            checkpoints_directory,
            ha: HaConfig::from_values(&v)?,
            kerberos: KerberosConfig::from_values(&v)?,
            tables,
            schema_evolution: v.boolean(ConfigKey::SchemaEvolution)?,
            table_discovery_interval: Duration::from_secs(
                v.positive(ConfigKey::TableDiscoveryIntervalSeconds)?,
            ),
            rename_sink_table: v.boolean(ConfigKey::RenameSinkTable)?,
            sink,
            source,
        };
        // Cross-key rule, as in the reference job: the next window opens only
        // after a checkpoint completes once the current window's splits are
        // done, so a checkpoint interval at or above the discovery interval
        // would stretch every window. Equal is rejected too.
        if config.checkpointing_interval >= config.discovery_interval {
            return Err(ConfigError::CheckpointIntervalTooLong {
                checkpointing_ms: config.checkpointing_interval.as_millis(),
                discovery_ms: config.discovery_interval.as_millis(),
            });
        }
        if let Some(sink) = &config.sink_table {
            if !config.tables.is_single() {
                return Err(invalid(
                    ConfigKey::SinkTableName,
                    sink,
                    &format!(
                        "needs exactly one table in {} and no {}: with several tables each sink table is named <source name>{}; remove {}",
                        ConfigKey::TableName,
                        ConfigKey::TablePattern,
                        ConfigKey::TableSuffix,
                        ConfigKey::SinkTableName
                    ),
                ));
            }
            if !config.table_suffix.is_empty() {
                return Err(invalid(
                    ConfigKey::SinkTableName,
                    sink,
                    &format!(
                        "cannot be combined with {}='{}': give the sink table's whole name in {} and leave {} empty",
                        ConfigKey::TableSuffix,
                        config.table_suffix,
                        ConfigKey::SinkTableName,
                        ConfigKey::TableSuffix
                    ),
                ));
            }
        }
        refuse_ignore_keys(&config.writer)?;
        Ok(config)
    }

    /// Convenience: [`RawConfig::from_named_pairs`] then
    /// [`JobConfig::from_raw`], e.g.
    /// `JobConfig::from_named_pairs([("job.tableName", "orders"), …])`.
    pub fn from_named_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ConfigError> {
        Self::from_raw(&RawConfig::from_named_pairs(pairs)?)
    }

    /// The sink table: `job.sinkTableName`, else `job.tableName` +
    /// `job.tableSuffix`.
    pub fn sink_table_name(&self) -> String {
        match &self.sink_table {
            Some(name) => name.clone(),
            None => format!("{}{}", self.table_name, self.table_suffix),
        }
    }

    /// Where the HA lease lives: `high-availability.storageDir`, else the
    /// checkpoints directory.
    pub fn ha_storage_dir(&self) -> &StorageLocation {
        self.ha
            .storage_dir
            .as_ref()
            .unwrap_or(&self.checkpoints_directory)
    }

    /// The job id of an HA job: derived from `high-availability.cluster-id`
    /// (default `job.name`), see [`super::ha_job_id`].
    pub fn ha_job_id(&self) -> JobId {
        ha_job_id(self.ha.cluster_id.as_deref().unwrap_or(&self.job_name))
    }

    /// Every key with its effective value (given or default), in catalog
    /// order, as it would be written in a config file. Useful to log the
    /// configuration a job actually runs with; feeding it back to
    /// [`JobConfig::from_raw`] yields an equal config.
    pub fn effective_values(&self) -> Vec<(ConfigKey, String)> {
        let ms = |d: Duration| d.as_millis().to_string();
        ConfigKey::all()
            .iter()
            .map(|&key| {
                let value = match key {
                    ConfigKey::SourceMasterAddresses => self.source_master_addresses.join(","),
                    ConfigKey::SinkMasterAddresses => self.sink_master_addresses.join(","),
                    ConfigKey::TableName => self.table_name.clone(),
                    ConfigKey::CheckpointsDirectory => self.checkpoints_directory.to_string(),
                    ConfigKey::DiscoveryIntervalSeconds => {
                        self.discovery_interval.as_secs().to_string()
                    }
                    ConfigKey::CheckpointingIntervalMillis => ms(self.checkpointing_interval),
                    ConfigKey::CreateTable => self.create_table.to_string(),
                    ConfigKey::TableSuffix => self.table_suffix.clone(),
                    ConfigKey::SinkTableName => self.sink_table.clone().unwrap_or_default(),
                    ConfigKey::RestoreOwner => self.restore_owner.to_string(),
                    ConfigKey::CheckpointsRetained => self.checkpoints_retained.to_string(),
                    ConfigKey::JobName => self.job_name.clone(),
                    ConfigKey::PeriodicSavepointInterval => self
                        .periodic_savepoint_interval
                        .map_or_else(|| "0".to_string(), super::restart::format_duration),
                    ConfigKey::PeriodicSavepointsRetained => {
                        self.periodic_savepoints_retained.to_string()
                    }
                    ConfigKey::StateReplicas => self
                        .state_replicas
                        .iter()
                        .map(StorageLocation::to_uri)
                        .collect::<Vec<_>>()
                        .join(","),
                    ConfigKey::PositionTable => self.position_table.clone().unwrap_or_default(),
                    ConfigKey::TablePattern => self.tables.pattern.clone().unwrap_or_default(),
                    ConfigKey::TableDiscoveryIntervalSeconds => {
                        self.table_discovery_interval.as_secs().to_string()
                    }
                    ConfigKey::SchemaEvolution => self.schema_evolution.to_string(),
                    ConfigKey::RenameSinkTable => self.rename_sink_table.to_string(),
                    ConfigKey::BatchSizeBytes => self.reader.batch_size_bytes.to_string(),
                    ConfigKey::SplitSizeBytes => match self.reader.split_size_bytes {
                        Some(n) => n.to_string(),
                        None => "-1".to_string(),
                    },
                    ConfigKey::ScanRequestTimeout => ms(self.reader.scan_request_timeout),
                    ConfigKey::Prefetching => self.reader.prefetching.to_string(),
                    ConfigKey::KeepAlivePeriodMs => ms(self.reader.keep_alive_period),
                    ConfigKey::ReplicaSelection => self.reader.replica_selection.to_string(),
                    ConfigKey::QuietTabletMaxSkips => {
                        self.reader.quiet_tablet_max_skips.to_string()
                    }
                    ConfigKey::FlushMode => self.writer.flush_mode.to_string(),
                    ConfigKey::OperationTimeout => ms(self.writer.operation_timeout),
                    ConfigKey::MaxBufferSize => self.writer.max_buffer_size.to_string(),
                    ConfigKey::FlushInterval => ms(self.writer.flush_interval),
                    ConfigKey::IgnoreNotFound => self.writer.ignore_not_found.to_string(),
                    ConfigKey::IgnoreDuplicate => self.writer.ignore_duplicate.to_string(),
                    other => self
                        .restart
                        .value_of(other)
                        .or_else(|| self.ha.value_of(other))
                        .or_else(|| self.sink.value_of(other))
                        .or_else(|| self.source.value_of(other))
                        .or_else(|| self.kerberos.value_of(other))
                        .unwrap_or_default(),
                };
                (key, value)
            })
            .collect()
    }
}

/// The reference job's session flags `writer.ignoreNotFound` and
/// `writer.ignoreDuplicate` would make a write session drop "row not found"
/// and "row already present" errors. ferry's operations cannot raise either
/// (deletes are DELETE_IGNORE, writes UPSERT_IGNORE, so that replaying a
/// batch after a restart is harmless), and turning the ignore ops off would
/// break those replays. `true` would promise a choice that does not exist,
/// so only the default is accepted.
fn refuse_ignore_keys(writer: &WriterConfig) -> Result<(), ConfigError> {
    let refusals = [
        (
            ConfigKey::IgnoreNotFound,
            writer.ignore_not_found,
            "ferry writes every delete as DELETE_IGNORE, which never reports a missing row \
             (replayed deletes must not fail the job); remove the key or set it to false",
        ),
        (
            ConfigKey::IgnoreDuplicate,
            writer.ignore_duplicate,
            "ferry writes every row as UPSERT_IGNORE, which never reports a present row \
             (replayed writes must not fail the job); remove the key or set it to false",
        ),
    ];
    match refusals.into_iter().find(|(_, on, _)| *on) {
        Some((key, _, reason)) => Err(ConfigError::Unsupported {
            key,
            value: "true".to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Typed access to raw values with defaults applied.
pub(super) struct Values<'a> {
    raw: &'a RawConfig,
}

impl Values<'_> {
    /// The given value, else the literal default, else `None`; a missing
    /// required key is an error.
    fn value(&self, key: ConfigKey) -> Result<Option<&str>, ConfigError> {
        match self.raw.get(key).or(key.default_value()) {
            Some(v) => Ok(Some(v)),
            None if key.is_required() => Err(ConfigError::MissingRequired { key }),
            None => Ok(None),
        }
    }

    /// The given value of a key whose default is derived; empty counts as
    /// not given (how [`JobConfig::effective_values`] writes such a default).
    pub(super) fn optional(&self, key: ConfigKey) -> Option<&str> {
        self.raw.get(key).filter(|v| !v.trim().is_empty())
    }

    /// Whether the key was given a non-empty value.
    pub(super) fn given(&self, key: ConfigKey) -> bool {
        self.optional(key).is_some()
    }

    pub(super) fn required_value(&self, key: ConfigKey) -> Result<&str, ConfigError> {
        self.value(key)?.ok_or(ConfigError::MissingRequired { key })
    }

    pub(super) fn text(&self, key: ConfigKey) -> Result<String, ConfigError> {
        let value = self.required_value(key)?;
        if value.trim().is_empty() {
            return Err(invalid(key, value, "must not be empty"));
        }
        Ok(value.to_string())
    }

    fn masters(&self, key: ConfigKey) -> Result<Vec<String>, ConfigError> {
        let value = self.required_value(key)?;
        let masters: Vec<String> = value.split(',').map(|m| m.trim().to_string()).collect();
        if value.trim().is_empty() {
            return Err(invalid(
                key,
                value,
                "must list at least one master (host:port)",
            ));
        }
        if masters.iter().any(|m| m.is_empty()) {
            return Err(invalid(
                key,
                value,
                "has an empty entry in the comma-separated list",
            ));
        }
        if let Some(bad) = masters.iter().find(|m| m.contains(char::is_whitespace)) {
            return Err(invalid(
                key,
                value,
                &format!("master '{bad}' contains whitespace"),
            ));
        }
        Ok(masters)
    }

    fn location(&self, key: ConfigKey) -> Result<StorageLocation, ConfigError> {
        let value = self.required_value(key)?;
        StorageLocation::parse(value).map_err(|e| invalid(key, value, &e.reason))
    }

    /// A Flink duration; `0` means off (`None`).
    fn optional_duration(&self, key: ConfigKey) -> Result<Option<Duration>, ConfigError> {
        let d = super::restart::parse_duration(key, self.required_value(key)?)?;
        Ok((!d.is_zero()).then_some(d))
    }

    /// `job.stateReplicas`: comma-separated locations, each parsed, no
    /// duplicates, none equal to the checkpoints directory (a replica there
    /// would be the primary itself).
    fn replicas(&self, primary: &StorageLocation) -> Result<Vec<StorageLocation>, ConfigError> {
        let key = ConfigKey::StateReplicas;
        let value = self.required_value(key)?;
        if value.trim().is_empty() {
            return Ok(Vec::new());
        }
        let mut replicas: Vec<StorageLocation> = Vec::new();
        for entry in value.split(',').map(str::trim) {
            if entry.is_empty() {
                return Err(invalid(
                    key,
                    value,
                    "has an empty entry in the comma-separated list",
                ));
            }
            let location = StorageLocation::parse(entry)
                .map_err(|e| invalid(key, value, &format!("replica '{entry}': {}", e.reason)))?;
            if location == *primary {
                return Err(invalid(
                    key,
                    value,
                    &format!("replica '{entry}' is job.checkpointsDirectory itself"),
                ));
            }
            if replicas.contains(&location) {
                return Err(invalid(
                    key,
                    value,
                    &format!("replica '{entry}' is listed twice"),
                ));
            }
            replicas.push(location);
        }
        Ok(replicas)
    }

    pub(super) fn flag(&self, key: ConfigKey) -> Result<bool, ConfigError> {
        self.boolean(key)
    }

    fn boolean(&self, key: ConfigKey) -> Result<bool, ConfigError> {
        let value = self.required_value(key)?;
        match value.trim() {
            v if v.eq_ignore_ascii_case("true") => Ok(true),
            v if v.eq_ignore_ascii_case("false") => Ok(false),
            _ => Err(ConfigError::InvalidBool {
                key,
                value: value.to_string(),
            }),
        }
    }

    pub(super) fn integer(&self, key: ConfigKey) -> Result<(i128, &str), ConfigError> {
        let value = self.required_value(key)?;
        // i128 so every u64 and i64 parses and range checks stay exact.
        value
            .trim()
            .parse::<i128>()
            .map(|n| (n, value))
            .map_err(|_| ConfigError::InvalidNumber {
                key,
                value: value.to_string(),
            })
    }

    /// A whole number greater than zero.
    fn positive(&self, key: ConfigKey) -> Result<u64, ConfigError> {
        let (n, value) = self.integer(key)?;
        if n < 1 {
            return Err(out_of_range(
                key,
                value,
                "must be greater than 0".to_string(),
            ));
        }
        u64::try_from(n)
            .map_err(|_| out_of_range(key, value, format!("must be at most {}", u64::MAX)))
    }

    pub(super) fn millis(&self, key: ConfigKey) -> Result<Duration, ConfigError> {
        self.positive(key).map(Duration::from_millis)
    }

    fn count(&self, key: ConfigKey) -> Result<NonZeroUsize, ConfigError> {
        let n = self.positive(key)?;
        usize::try_from(n)
            .ok()
            .and_then(NonZeroUsize::new)
            .ok_or_else(|| {
                out_of_range(
                    key,
                    &n.to_string(),
                    format!("must be at most {}", usize::MAX),
                )
            })
    }

    /// A whole number from 0 to `u32::MAX`.
    fn count_or_zero_u32(&self, key: ConfigKey) -> Result<u32, ConfigError> {
        let (n, value) = self.integer(key)?;
        u32::try_from(n)
            .map_err(|_| out_of_range(key, value, format!("must be from 0 to {}", u32::MAX)))
    }

    /// Kudu's scan request carries the batch size as a 32-bit field.
    fn batch_size(&self) -> Result<u32, ConfigError> {
        let key = ConfigKey::BatchSizeBytes;
        let n = self.positive(key)?;
        u32::try_from(n)
            .map_err(|_| out_of_range(key, &n.to_string(), format!("must be at most {}", u32::MAX)))
    }

    fn split_size(&self) -> Result<Option<NonZeroU64>, ConfigError> {
        let key = ConfigKey::SplitSizeBytes;
        let (n, value) = self.integer(key)?;
        if n == -1 {
            return Ok(None);
        }
        u64::try_from(n)
            .ok()
            .and_then(NonZeroU64::new)
            .map(Some)
            .ok_or_else(|| {
                out_of_range(
                    key,
                    value,
                    "must be greater than 0, or -1 for one split per tablet".to_string(),
                )
            })
    }
}

/// The regex anchored so it must match the whole table name (a pattern
/// `orders_.*` must not select `old_orders_1`).
fn anchored_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
}

fn out_of_range(key: ConfigKey, value: &str, expected: String) -> ConfigError {
    ConfigError::OutOfRange {
        key,
        value: value.to_string(),
        expected,
    }
}

pub(super) fn invalid(key: ConfigKey, value: &str, reason: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}
