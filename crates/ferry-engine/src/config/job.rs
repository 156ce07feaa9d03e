//! The job's own keys (`job.*`) and the validated, typed [`JobConfig`]
//! (step two of configuration).
//!
//! Every value is parsed by its key's parser, defaults are filled in, and
//! the cross-key rules of each section live in that section's file.
//! Unlike the reference job, intervals, timeouts, sizes and counts must be
//! positive (its parser accepts `0` or negative values and fails later, or
//! never).

use std::num::NonZeroUsize;
use std::time::Duration;

use super::connectors::{Connectors, SinkKind, SourceKind, SINK_TYPE, SOURCE_TYPE};
use super::error::ConfigError;
use super::ha::{ha_job_id, HaConfig, LeasePlace, DEFAULT_LEASE_TABLE};
use super::map::Config;
use super::option::{ConfigOption, ValueError};
use super::parse;
use super::reader::ReaderConfig;
use super::restart::RestartConfig;
use super::section::Section;
use super::security::KerberosConfig;
use super::shards::{SHARD, SHARDS, SHARD_TABLETS_OVER};
use super::spec::{KeyOrigin::Reference, ValueKind};
use super::tables::{
    TableSelection, RENAME_SINK_TABLE, SCHEMA_EVOLUTION, TABLE_DISCOVERY_INTERVAL, TABLE_PATTERN,
};
use super::writer::WriterConfig;
use super::{ENGINE_KEYS, ENGINE_SECTIONS};
use crate::checkpoint::{JobId, StorageLocation};
use crate::shard::ShardSpec;

crate::config_section! {
    /// The job's own keys, most of them the reference job's.
    pub static JOB_KEYS = Section::job("job");
    /// `job.sourceMasterAddresses`.
    pub const SOURCE_MASTER_ADDRESSES: ConfigOption<Vec<String>> = masters("job.sourceMasterAddresses")
        .derived("none; required with job.sourceType=kudu")
        .doc("Masters of the source Kudu cluster, comma-separated host:port.");
    /// `job.sinkMasterAddresses`.
    pub const SINK_MASTER_ADDRESSES: ConfigOption<Vec<String>> = masters("job.sinkMasterAddresses")
        .derived("none; required with job.sinkType=kudu (the default)")
        .doc("Masters of the sink Kudu cluster, comma-separated host:port.");
    /// `job.tableName`.
    pub const TABLE_NAME: ConfigOption<Vec<String>> = ConfigOption::new("job.tableName", ValueKind::Text, super::tables::table_names, parse::print_list)
        .origin(Reference)
        .derived("none; job.tableName or job.tablePattern is needed")
        .blank_means_default()
        .doc("Source table to replicate, or a comma-separated list of tables (a list is a ferry extension). At least one of job.tableName and job.tablePattern.");
    /// `job.checkpointsDirectory`.
    pub const CHECKPOINTS_DIRECTORY: ConfigOption<StorageLocation> = ConfigOption::new("job.checkpointsDirectory", ValueKind::Location, parse::location, parse::print_location)
        .origin(Reference)
        .doc("Where checkpoints are kept (<dir>/<job-id>/chk-<N>/_metadata): a path, file:// URI, or s3://bucket/prefix (gs://, az:// where built in; see the s3.* keys).");
    /// `job.discoveryIntervalSeconds`.
    pub const DISCOVERY_INTERVAL_SECONDS: ConfigOption<Duration> = ConfigOption::seconds("job.discoveryIntervalSeconds")
        .origin(Reference)
        .default_value("600")
        .doc("How often a new diff-scan window is opened.");
    /// `job.checkpointingIntervalMillis`.
    pub const CHECKPOINTING_INTERVAL_MILLIS: ConfigOption<Duration> = ConfigOption::millis("job.checkpointingIntervalMillis")
        .origin(Reference)
        .default_value("60000")
        .doc("How often a checkpoint is taken; must be below the discovery interval.");
    /// `job.createTable`.
    pub const CREATE_TABLE: ConfigOption<bool> = ConfigOption::flag("job.createTable")
        .origin(Reference)
        .default_value("false")
        .doc("Create the sink table (schema and partitioning of the source) if it is absent.");
    /// `job.tableSuffix`.
    pub const TABLE_SUFFIX: ConfigOption<String> = ConfigOption::any_text("job.tableSuffix")
        .origin(Reference)
        .default_value("")
        .doc("Appended to the table name to name the sink table.");
    /// `job.sinkTableName`.
    pub const SINK_TABLE_NAME: ConfigOption<String> = ConfigOption::trimmed("job.sinkTableName")
        .derived("<job.tableName><job.tableSuffix>")
        .blank_means_default()
        .doc("The sink table's whole name, when it is not the source table's name plus a suffix (e.g. a reverse job after a cutover copies <name>_copy back to <name>). Not together with a non-empty job.tableSuffix.");
    /// `job.restoreOwner`.
    pub const RESTORE_OWNER: ConfigOption<bool> = ConfigOption::flag("job.restoreOwner")
        .origin(Reference)
        .default_value("false")
        .doc("With job.createTable, give the sink table the source table's owner.");
    /// `job.checkpointsRetained`.
    pub const CHECKPOINTS_RETAINED: ConfigOption<NonZeroUsize> = ConfigOption::count("job.checkpointsRetained")
        .default_value("3")
        .doc("How many completed checkpoints to keep; older ones are deleted.");
    /// `job.name`.
    pub const JOB_NAME: ConfigOption<String> = ConfigOption::text("job.name")
        .derived("ferry-replication-<job.tableName>")
        .doc("Job name shown in the REST API and metrics.");
    /// `job.periodicSavepointInterval`; `None` when 0 (off).
    pub const PERIODIC_SAVEPOINT_INTERVAL: ConfigOption<Option<Duration>> = ConfigOption::new("job.periodicSavepointInterval", ValueKind::Duration, optional_duration, print_optional_duration)
        .default_value("0")
        .aliases(&["kubernetes.operator.periodic.savepoint.interval"])
        .doc("Take a savepoint this often (Flink duration, e.g. '10 min'), into the savepoint directory (--savepointPath), else <job.checkpointsDirectory>/savepoints; 0 = off. A failed one is logged and counted, never fails the job.");
    /// `job.periodicSavepointsRetained`.
    pub const PERIODIC_SAVEPOINTS_RETAINED: ConfigOption<NonZeroUsize> = ConfigOption::count("job.periodicSavepointsRetained")
        .default_value("10")
        .aliases(&["kubernetes.operator.savepoint.history.max.count"])
        .doc("How many periodic savepoints of this replication to keep (older ones are deleted; user savepoints never are).");
    /// `job.stateReplicas`.
    pub const STATE_REPLICAS: ConfigOption<Vec<StorageLocation>> = ConfigOption::new("job.stateReplicas", ValueKind::Locations, replicas, print_replicas)
        .default_value("")
        .doc("Replica locations (comma-separated) every completed checkpoint and savepoint is copied to, as <replica>/<job-id>/chk-<N> and <replica>/savepoints/savepoint-*; empty = none.");
    /// `job.positionTable`; `None` (set empty) turns the sink position off.
    pub const POSITION_TABLE: ConfigOption<Option<String>> = ConfigOption::new("job.positionTable", ValueKind::Text, position_table, print_position_table)
        .default_value("ferry_positions")
        .doc("Table on the sink cluster where ferry records how far each sink table is (created if missing), so a restore from an older checkpoint or savepoint resumes where the sink is. Empty turns it off: UNSAFE, such a restore may then bring back rows the source deleted.");
    /// `job.cutsTable`; `None` (set empty) publishes no cuts.
    pub const CUTS_TABLE: ConfigOption<Option<String>> = ConfigOption::new("job.cutsTable", ValueKind::Text, position_table, print_position_table)
        .default_value("ferry_cuts")
        .doc("Table on the sink cluster where a Kudu sink publishes, every window, a consistent cut: a source instant and a sink hybrid time at which every sink table of the job reflects it, for snapshot reads of the standby (docs/dr.md, \"Consistent reads on the standby\"). Created if missing; needs job.positionTable. With it the tables' windows open together (a slow table holds the others' next window). Empty turns it off.");
    /// `job.verifyInterval`; `None` when 0 (off).
    pub const VERIFY_INTERVAL: ConfigOption<Option<Duration>> = ConfigOption::new("job.verifyInterval", ValueKind::Duration, optional_duration, print_optional_duration)
        .default_value("0")
        .doc("Continuous verify: every table of the running job is verified against its source once per this interval (Flink duration, e.g. '10 min'), one table at a time (a turn every interval / tables), each at its newest cut (source at the last window end, sink at that end's sink time: no false differences while the job writes), with the tablet servers' checksums as `ferry verify`; results in the ferry_table_verify_* metrics. Kudu to Kudu only. 0 = off.");
    /// `job.verifyBudgetRanges`.
    pub const VERIFY_BUDGET_RANGES: ConfigOption<NonZeroUsize> = ConfigOption::count("job.verifyBudgetRanges")
        .default_value("1")
        .doc("Continuous verify's budget: key ranges (about 64 MiB of data each) checksummed at the same time on each side; one verification runs at a time.");
    /// `job.verifyRepair`.
    pub const VERIFY_REPAIR: ConfigOption<bool> = ConfigOption::flag("job.verifyRepair")
        .default_value("false")
        .doc("Continuous verify repairs what it finds, as `ferry verify --repair`, from the source's current rows (never older ones than the job may have written since). Needs job.verifyInterval.");
    /// `job.cutsRetention`.
    pub const CUTS_RETENTION: ConfigOption<Duration> = ConfigOption::new("job.cutsRetention", ValueKind::Duration, positive_duration, parse::print_duration)
        .default_value("7 d")
        .doc("How far back (in source time, from the newest cut) the job keeps its cuts in job.cutsTable; older ones are deleted. The default matches Kudu's default --tablet_history_max_age_sec: a cut older than the sink's history cannot be read anyway.");
}

/// A comma-separated list of Kudu masters (reference job key).
const fn masters(name: &'static str) -> ConfigOption<Vec<String>> {
    ConfigOption::new(
        name,
        ValueKind::MasterAddresses,
        parse_masters,
        parse::print_list,
    )
    .origin(Reference)
}

fn parse_masters(value: &str) -> Result<Vec<String>, ValueError> {
    if value.trim().is_empty() {
        return Err(ValueError::Invalid(
            "must list at least one master (host:port)".to_string(),
        ));
    }
    let masters = parse::list(value)?;
    if let Some(bad) = masters.iter().find(|m| m.contains(char::is_whitespace)) {
        return Err(ValueError::Invalid(format!(
            "master '{bad}' contains whitespace"
        )));
    }
    Ok(masters)
}

/// A Flink duration; `0` means off (`None`).
fn optional_duration(value: &str) -> Result<Option<Duration>, ValueError> {
    let d = parse::parse_duration(value)?;
    Ok((!d.is_zero()).then_some(d))
}

fn print_optional_duration(d: &Option<Duration>) -> String {
    d.map_or_else(|| "0".to_string(), parse::format_duration)
}

/// Comma-separated locations, each parsed, none twice (empty: none).
fn replicas(value: &str) -> Result<Vec<StorageLocation>, ValueError> {
    if value.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut replicas: Vec<StorageLocation> = Vec::new();
    for entry in parse::list(value)? {
        let location = StorageLocation::parse(&entry)
            .map_err(|e| ValueError::Invalid(format!("replica '{entry}': {}", e.reason)))?;
        if replicas.contains(&location) {
            return Err(ValueError::Invalid(format!(
                "replica '{entry}' is listed twice"
            )));
        }
        replicas.push(location);
    }
    Ok(replicas)
}

#[allow(clippy::ptr_arg)] // the printer of a `Vec` key
fn print_replicas(replicas: &Vec<StorageLocation>) -> String {
    let uris: Vec<String> = replicas.iter().map(StorageLocation::to_uri).collect();
    uris.join(",")
}

/// A Flink duration above zero.
fn positive_duration(value: &str) -> Result<Duration, ValueError> {
    let d = parse::parse_duration(value)?;
    if d.is_zero() {
        return Err(ValueError::Invalid("must be above 0".to_string()));
    }
    Ok(d)
}

fn position_table(value: &str) -> Result<Option<String>, ValueError> {
    Ok(Some(value.trim())
        .filter(|t| !t.is_empty())
        .map(str::to_owned))
}

fn print_position_table(table: &Option<String>) -> String {
    table.clone().unwrap_or_default()
}

/// A validated replication job configuration.
///
/// Only [`JobConfig::from_config`] builds one (the struct is
/// `#[non_exhaustive]`), so holding a `JobConfig` means every rule held.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobConfig {
    /// `job.sourceMasterAddresses`, split on commas and trimmed (empty for
    /// a Kafka source).
    pub source_master_addresses: Vec<String>,
    /// `job.sinkMasterAddresses`, split on commas and trimmed (empty for a
    /// Kafka sink).
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
    /// `job.cutsTable` (ferry only): where a Kudu sink publishes
    /// consistent cuts; `None` (the key set empty): nowhere.
    pub cuts_table: Option<String>,
    /// `job.cutsRetention` (ferry only): how long cuts are kept.
    pub cuts_retention: Duration,
    /// `job.verifyInterval` (ferry only): continuous verify, `None`: off.
    pub verify_interval: Option<Duration>,
    /// `job.verifyBudgetRanges` (ferry only).
    pub verify_budget_ranges: NonZeroUsize,
    /// `job.verifyRepair` (ferry only).
    pub verify_repair: bool,
    /// `reader.*`.
    pub reader: ReaderConfig,
    /// `writer.*`.
    pub writer: WriterConfig,
    /// `throttle.*` (ferry only): the job-wide limits it starts with.
    pub throttle: crate::throttle::Limits,
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
    /// `job.sinkType` (ferry only): the binary picks the sink connector by
    /// it; a Kafka sink's own settings are `ferry-kafka`'s.
    pub sink: SinkKind,
    /// `job.sourceType` (ferry only), like `sink`.
    pub source: SourceKind,
    /// `job.shards` (ferry only, at least 1): how many shards the job is
    /// cut into; fixed when the job is created.
    pub shards: u32,
    /// `job.shardTabletsOver` (ferry only): a table with more hash buckets
    /// than this is split over the shards; 0: none is.
    pub shard_tablets_over: u32,
    /// Which shard this configuration runs ([`JobConfig::for_shard`]);
    /// `None` for an unsharded job and for the whole job's configuration
    /// before it is split.
    pub shard: Option<ShardSpec>,
    /// `security.kerberos.login.*` and the per-cluster Kerberos keys.
    pub kerberos: KerberosConfig,
    /// Every engine key with its effective value in canonical form (see
    /// [`Config::effective`]); read a key the fields above do not carry
    /// with `keys.get(&KEY)`.
    pub keys: Config,
}

impl JobConfig {
    /// Validates a configuration: parses every engine key, fills defaults,
    /// checks ranges and the cross-key rules. Reports the first problem,
    /// required keys first. Keys of other crates' sections (Kafka, process
    /// keys) are left to them.
    pub fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        let connectors = Connectors::from_config(keys)?;
        let tables = TableSelection::from_config(keys)?;
        let table_name = tables.names.join(",");
        let checkpoints_directory = keys.get(&CHECKPOINTS_DIRECTORY)?;
        let config = JobConfig {
            source_master_addresses: connectors.source_master_addresses,
            sink_master_addresses: connectors.sink_master_addresses,
            discovery_interval: keys.get(&DISCOVERY_INTERVAL_SECONDS)?,
            checkpointing_interval: keys.get(&CHECKPOINTING_INTERVAL_MILLIS)?,
            create_table: keys.get(&CREATE_TABLE)?,
            table_suffix: keys.get(&TABLE_SUFFIX)?,
            sink_table: keys.get_optional(&SINK_TABLE_NAME)?,
            restore_owner: keys.get(&RESTORE_OWNER)?,
            checkpoints_retained: keys.get(&CHECKPOINTS_RETAINED)?,
            job_name: match keys.get_optional(&JOB_NAME)? {
                Some(name) => name,
                None => format!(
                    "ferry-replication-{}",
                    match (&tables.names[..], &tables.pattern) {
                        ([], Some(pattern)) => pattern.as_str(),
                        _ => table_name.as_str(),
                    }
                ),
            },
            periodic_savepoint_interval: keys.get(&PERIODIC_SAVEPOINT_INTERVAL)?,
            periodic_savepoints_retained: keys.get(&PERIODIC_SAVEPOINTS_RETAINED)?,
            state_replicas: state_replicas(keys, &checkpoints_directory)?,
            position_table: keys.get(&POSITION_TABLE)?,
            cuts_table: keys.get(&CUTS_TABLE)?,
            cuts_retention: keys.get(&CUTS_RETENTION)?,
            verify_interval: keys.get(&VERIFY_INTERVAL)?,
            verify_budget_ranges: keys.get(&VERIFY_BUDGET_RANGES)?,
            verify_repair: keys.get(&VERIFY_REPAIR)?,
            table_name,
            reader: ReaderConfig::from_config(keys)?,
            writer: WriterConfig::from_config(keys)?,
            throttle: super::throttle::limits(keys)?,
            restart: RestartConfig::from_config(keys)?,
            checkpoints_directory,
            ha: HaConfig::from_config(keys)?,
            kerberos: KerberosConfig::from_config(keys)?,
            tables,
            schema_evolution: keys.get(&SCHEMA_EVOLUTION)?,
            table_discovery_interval: keys.get(&TABLE_DISCOVERY_INTERVAL)?,
            rename_sink_table: keys.get(&RENAME_SINK_TABLE)?,
            sink: connectors.sink,
            source: connectors.source,
            shards: keys.get(&SHARDS)?,
            shard_tablets_over: keys.get(&SHARD_TABLETS_OVER)?,
            shard: None,
            keys: keys.effective(ENGINE_KEYS.keys().map(|(_, k)| k))?,
        };
        config.check_intervals()?;
        config.check_sink_table()?;
        config.check_shards()?;
        // Keys no field reads (read where they are used) are checked too.
        for section in ENGINE_SECTIONS {
            section.check(keys)?;
        }
        match keys.get_optional(&SHARD)? {
            Some(index) => config.for_shard(index),
            None => Ok(config),
        }
    }

    /// Convenience: the engine's keys from `(name, value)` pairs (see
    /// [`super::Registry::config_from_pairs`]) then
    /// [`JobConfig::from_config`], e.g.
    /// `JobConfig::from_named_pairs([("job.tableName", "orders"), …])`.
    pub fn from_named_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ConfigError> {
        Self::from_config(&ENGINE_KEYS.config_from_pairs(pairs)?)
    }

    /// Cross-key rule, as in the reference job: the next window opens only
    /// after a checkpoint completes once the current window's splits are
    /// done, so a checkpoint interval at or above the discovery interval
    /// would stretch every window. Equal is rejected too.
    fn check_intervals(&self) -> Result<(), ConfigError> {
        if self.checkpointing_interval >= self.discovery_interval {
            return Err(ConfigError::CheckpointIntervalTooLong {
                checkpointing_ms: self.checkpointing_interval.as_millis(),
                discovery_ms: self.discovery_interval.as_millis(),
            });
        }
        Ok(())
    }

    /// `job.sinkTableName` names one sink table: one source table, no
    /// suffix.
    fn check_sink_table(&self) -> Result<(), ConfigError> {
        let Some(sink) = &self.sink_table else {
            return Ok(());
        };
        let reason = if !self.tables.is_single() {
            format!(
                "needs exactly one table in {TABLE_NAME} and no {TABLE_PATTERN}: with several tables each sink table is named <source name>{TABLE_SUFFIX}; remove {SINK_TABLE_NAME}"
            )
        } else if !self.table_suffix.is_empty() {
            format!(
                "cannot be combined with {TABLE_SUFFIX}='{}': give the sink table's whole name in {SINK_TABLE_NAME} and leave {TABLE_SUFFIX} empty",
                self.table_suffix
            )
        } else {
            return Ok(());
        };
        Err(ConfigError::invalid(
            SINK_TABLE_NAME.spec(),
            sink,
            ValueError::Invalid(reason),
        ))
    }

    /// `job.shardTabletsOver` needs shards; continuous verify compares a
    /// table at one shard's sink time, which a table split over shards
    /// does not have.
    fn check_shards(&self) -> Result<(), ConfigError> {
        super::shards::check(self.shards, self.shard_tablets_over).map_err(|why| {
            ConfigError::invalid(
                SHARD_TABLETS_OVER.spec(),
                &self.shard_tablets_over.to_string(),
                why,
            )
        })?;
        // Tables are divided by the Kudu source's tables and tablets; a
        // Kafka source's topics are not (yet), so every shard would copy them.
        if self.shards > 1 && self.source == SourceKind::Kafka {
            return Err(ConfigError::invalid(
                SHARDS.spec(),
                &self.shards.to_string(),
                ValueError::Invalid(format!(
                    "a job whose source is Kafka ({SOURCE_TYPE} kafka) is not cut into shards: set {SHARDS} to 1"
                )),
            ));
        }
        // Only the Kudu sink keeps a position per shard of a split table.
        if self.shard_tablets_over > 0 && self.sink == SinkKind::Kafka {
            return Err(ConfigError::invalid(
                SHARD_TABLETS_OVER.spec(),
                &self.shard_tablets_over.to_string(),
                ValueError::Invalid(format!(
                    "tables are split over shards only into a Kudu sink ({SINK_TYPE} kudu); with a Kafka sink each table belongs to one shard: set {SHARD_TABLETS_OVER} to 0"
                )),
            ));
        }
        if self.verify_interval.is_some() && self.shard_tablets_over > 0 {
            return Err(ConfigError::invalid(
                VERIFY_INTERVAL.spec(),
                self.keys.raw(&VERIFY_INTERVAL).unwrap_or_default(),
                ValueError::Invalid(format!(
                    "cannot verify tables split over shards ({SHARD_TABLETS_OVER} = {}): each shard's part of a split table is at its own sink time; set {SHARD_TABLETS_OVER} to 0 or {VERIFY_INTERVAL} to 0",
                    self.shard_tablets_over
                )),
            ));
        }
        Ok(())
    }

    /// The configuration of shard `index` of this job (`job.shards`): the
    /// same keys with `high-availability.cluster-id` set to `<cluster-id or
    /// job.name>-shard-<index>` (so the shard has its own job id, checkpoint
    /// chain, savepoints and lease) and [`JobConfig::shard`] set. With more
    /// than one shard no consistent cuts are published (`job.cutsTable`):
    /// each shard's windows are its own, so no sink time holds every table
    /// of the job at one source instant. An index at or above `job.shards`,
    /// or a configuration that is a shard's already, is an error.
    pub fn for_shard(&self, index: u32) -> Result<JobConfig, ConfigError> {
        if let Some(shard) = self.shard {
            return Err(ConfigError::AlreadyAShard {
                shard,
                requested: index,
            });
        }
        let spec = ShardSpec::new(index, self.shards).ok_or(ConfigError::NoSuchShard {
            index,
            shards: self.shards,
        })?;
        let base = self.ha.cluster_id.as_deref().unwrap_or(&self.job_name);
        let mut shard = self.clone();
        // The keys keep the base cluster id and name the shard, so they
        // read back as this shard's configuration.
        shard.keys.set(&SHARD, index.to_string());
        shard.ha.cluster_id = Some(format!("{base}-shard-{index}"));
        if self.shards > 1 {
            shard.keys.set(&CUTS_TABLE, "");
            shard.cuts_table = None;
        }
        shard.shard = Some(spec);
        Ok(shard)
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
    /// table `ferry_ha` on the sink cluster when the sink is Kudu (the DR
    /// region's failure domain, docs/dr.md), else the checkpoints
    /// directory.
    pub fn ha_lease_place(&self) -> LeasePlace {
        match (&self.ha.storage_dir, self.sink) {
            (Some(place), _) => place.clone(),
            (None, SinkKind::Kudu) => LeasePlace::SinkTable(DEFAULT_LEASE_TABLE.to_string()),
            (None, SinkKind::Kafka) => LeasePlace::Store(self.checkpoints_directory.clone()),
        }
    }

    /// The job id of an HA job: derived from `high-availability.cluster-id`
    /// (default `job.name`), see [`super::ha_job_id`].
    pub fn ha_job_id(&self) -> JobId {
        ha_job_id(self.ha.cluster_id.as_deref().unwrap_or(&self.job_name))
    }

    /// Every engine key with its effective value (given or literal default)
    /// in canonical form, by name; keys with a derived default are left
    /// out unless given. Useful to log the configuration a job actually
    /// runs with; feeding it back to [`JobConfig::from_config`] yields an
    /// equal config.
    pub fn effective_values(&self) -> Vec<(&'static str, String)> {
        self.keys
            .iter()
            .map(|(name, value)| (name, value.to_string()))
            .collect()
    }
}

/// `job.stateReplicas`, none of them the checkpoints directory (a replica
/// there would be the primary itself).
fn state_replicas(
    keys: &Config,
    primary: &StorageLocation,
) -> Result<Vec<StorageLocation>, ConfigError> {
    let replicas = keys.get(&STATE_REPLICAS)?;
    let value = keys.raw(&STATE_REPLICAS).unwrap_or_default();
    let entries = value.split(',').map(str::trim);
    if let Some((entry, _)) = entries.zip(&replicas).find(|(_, r)| *r == primary) {
        return Err(ConfigError::invalid(
            STATE_REPLICAS.spec(),
            value,
            ValueError::Invalid(format!(
                "replica '{entry}' is job.checkpointsDirectory itself"
            )),
        ));
    }
    Ok(replicas)
}
