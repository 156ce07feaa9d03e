//! Tests of step two ([`JobConfig::from_raw`]); reading the command line
//! and TOML files is tested in the `ferry` binary. Modelled on the reference job's parser tests (each required key missing,
//! defaults, checkpoint vs discovery interval, every reader and writer key,
//! bad and empty enum values) plus ferry's extra rules.

use std::num::{NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::checkpoint::StorageLocation;

const REQUIRED: [(ConfigKey, &str); 4] = [
    (ConfigKey::SourceMasterAddresses, "src-1:7051,src-2:7051"),
    (ConfigKey::SinkMasterAddresses, "sink-1:7051"),
    (ConfigKey::TableName, "orders"),
    (
        ConfigKey::CheckpointsDirectory,
        "/var/lib/ferry/checkpoints",
    ),
];

fn minimal() -> RawConfig {
    let mut raw = RawConfig::new();
    for (key, value) in REQUIRED {
        raw.set(key, value);
    }
    raw
}

fn with(key: ConfigKey, value: &str) -> RawConfig {
    let mut raw = minimal();
    raw.set(key, value);
    raw
}

fn parse(raw: &RawConfig) -> JobConfig {
    match JobConfig::from_raw(raw) {
        Ok(config) => config,
        Err(e) => panic!("expected a valid config, got: {e}"),
    }
}

fn reject(raw: &RawConfig) -> ConfigError {
    match JobConfig::from_raw(raw) {
        Ok(config) => panic!("expected an error, got {config:?}"),
        Err(e) => e,
    }
}

/// The error names the key and the value, and says `hint`.
fn assert_names(err: &ConfigError, key: ConfigKey, value: &str, hint: &str) {
    let msg = err.to_string();
    assert_eq!(err.key(), Some(key.name()), "{msg}");
    assert!(msg.contains(&format!("'{}'", key.name())), "{msg}");
    assert!(msg.contains(&format!("'{value}'")), "{msg}");
    assert!(msg.contains(hint), "expected {hint:?} in: {msg}");
}

#[test]
fn defaults() {
    let c = parse(&minimal());
    assert_eq!(c.source_master_addresses, ["src-1:7051", "src-2:7051"]);
    assert_eq!(c.sink_master_addresses, ["sink-1:7051"]);
    assert_eq!(c.table_name, "orders");
    assert_eq!(
        c.checkpoints_directory,
        StorageLocation::Local(PathBuf::from("/var/lib/ferry/checkpoints"))
    );
    assert_eq!(c.discovery_interval, Duration::from_secs(600));
    assert_eq!(c.checkpointing_interval, Duration::from_millis(60_000));
    assert!(!c.create_table);
    assert_eq!(c.table_suffix, "");
    assert_eq!(c.sink_table_name(), "orders");
    assert!(!c.restore_owner);
    assert_eq!(c.checkpoints_retained, NonZeroUsize::new(3).expect("3"));
    assert_eq!(c.job_name, "ferry-replication-orders");

    assert_eq!(c.reader.batch_size_bytes, 20 * 1024 * 1024);
    assert_eq!(c.reader.split_size_bytes, None);
    assert_eq!(c.reader.scan_request_timeout, Duration::from_millis(30_000));
    assert!(!c.reader.prefetching);
    assert_eq!(c.reader.keep_alive_period, Duration::from_millis(15_000));
    assert_eq!(c.reader.replica_selection, ReplicaSelection::ClosestReplica);
    assert_eq!(c.reader.quiet_tablet_max_skips, 30);

    assert_eq!(c.writer.flush_mode, FlushMode::AutoFlushBackground);
    assert_eq!(c.writer.operation_timeout, Duration::from_millis(30_000));
    assert_eq!(
        c.writer.max_buffer_size,
        NonZeroUsize::new(1000).expect("1000")
    );
    assert_eq!(c.writer.flush_interval, Duration::from_millis(1000));
    assert!(!c.writer.ignore_not_found);
    assert!(!c.writer.ignore_duplicate);
}

#[test]
fn each_required_key_missing() {
    for (missing, _) in REQUIRED {
        let mut raw = minimal();
        raw.remove(missing);
        let err = reject(&raw);
        if missing == ConfigKey::TableName {
            // job.tablePattern could stand in: both keys are named.
            assert!(matches!(err, ConfigError::NoTables), "{err:?}");
            assert!(err.to_string().contains("'job.tablePattern'"), "{err}");
        } else {
            assert!(
                matches!(err, ConfigError::MissingRequired { key } if key == missing),
                "{err:?}"
            );
        }
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("No data for required key '{}'", missing.name())),
            "{msg}"
        );
    }
    // With nothing given, the first required key in catalog order is named.
    let err = reject(&RawConfig::new());
    assert_eq!(err.key(), Some("job.sourceMasterAddresses"));
}

#[test]
fn every_key_set_explicitly() {
    let pairs = [
        ("job.sourceMasterAddresses", "s1:7051, s2:7051"),
        ("job.sinkMasterAddresses", "k1:7051"),
        ("job.tableName", "t"),
        ("job.checkpointsDirectory", "file:///tmp/ferry-ckpt"),
        ("job.discoveryIntervalSeconds", "20"),
        ("job.checkpointingIntervalMillis", "5000"),
        ("job.createTable", "true"),
        ("job.tableSuffix", "_copy"),
        // Empty: derived (a name here would conflict with the suffix).
        ("job.sinkTableName", ""),
        ("job.restoreOwner", "TRUE"),
        ("job.checkpointsRetained", "5"),
        ("job.name", "my-job"),
        ("kubernetes.operator.periodic.savepoint.interval", "10 min"),
        ("kubernetes.operator.savepoint.history.max.count", "4"),
        ("job.stateReplicas", "/tmp/dr1, file:///tmp/dr2"),
        ("job.positionTable", "dr_positions"),
        ("job.tablePattern", "t_[0-9]+"),
        ("job.tableDiscoveryIntervalSeconds", "7"),
        ("job.schemaEvolution", "false"),
        ("job.renameSinkTable", "true"),
        ("reader.batchSizeBytes", "65536"),
        ("reader.splitSizeBytes", "1024"),
        ("reader.scanRequestTimeout", "1234"),
        ("reader.prefetching", "true"),
        ("reader.keepAlivePeriodMs", "777"),
        ("reader.replicaSelection", "LEADER_ONLY"),
        ("reader.quietTabletMaxSkips", "7"),
        ("writer.flushMode", "MANUAL_FLUSH"),
        ("writer.operationTimeout", "4321"),
        ("writer.maxBufferSize", "64"),
        ("writer.flushInterval", "250"),
        ("writer.ignoreNotFound", "false"),
        ("writer.ignoreDuplicate", "false"),
        ("restart-strategy", "fixeddelay"),
        ("restart-strategy.fixed-delay.attempts", "3"),
        ("restart-strategy.fixed-delay.delay", "10 s"),
        (
            "restart-strategy.failure-rate.max-failures-per-interval",
            "4",
        ),
        (
            "restart-strategy.failure-rate.failure-rate-interval",
            "5 min",
        ),
        ("restart-strategy.failure-rate.delay", "2s"),
        (
            "restart-strategy.exponential-delay.initial-backoff",
            "500 ms",
        ),
        ("restart-strategy.exponential-delay.max-backoff", "30 s"),
        ("restart-strategy.exponential-delay.backoff-multiplier", "2"),
        (
            "restart-strategy.exponential-delay.reset-backoff-threshold",
            "10 min",
        ),
        ("restart-strategy.exponential-delay.jitter-factor", "0"),
        (
            "restart-strategy.exponential-delay.attempts-before-reset-backoff",
            "7",
        ),
        ("execution.checkpointing.tolerable-failed-checkpoints", "2"),
        ("high-availability.type", "lease"),
        ("high-availability.storageDir", "/tmp/ferry-ha"),
        ("high-availability.cluster-id", "orders"),
        ("high-availability.lease-duration", "6 s"),
        ("high-availability.renew-interval", "2 s"),
    ];
    // The Kafka sink's and source's keys are set in config::sink's and
    // config::source's tests: a Kudu sink or source refuses them (the
    // kinds and the defaults aside).
    let kafka_only = [
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
        // Kerberos keys name files that must exist: config::security's tests.
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
    assert_eq!(pairs.len() + kafka_only.len(), ConfigKey::all().len());
    let c = JobConfig::from_named_pairs(pairs).expect("valid");
    assert_eq!(
        c.restart.strategy(),
        crate::restart::RestartStrategy::FixedDelay {
            attempts: 3,
            delay: Duration::from_secs(10)
        }
    );
    assert_eq!(c.restart.tolerable_failed_checkpoints, 2);
    assert_eq!(c.restart.initial_backoff, Duration::from_millis(500));
    assert_eq!(c.restart.backoff_multiplier.0, 2.0);
    assert_eq!(c.source_master_addresses, ["s1:7051", "s2:7051"]);
    assert_eq!(
        c.checkpoints_directory.as_local_path(),
        Some(std::path::Path::new("/tmp/ferry-ckpt"))
    );
    assert_eq!(c.discovery_interval, Duration::from_secs(20));
    assert_eq!(c.checkpointing_interval, Duration::from_millis(5000));
    assert!(c.create_table && c.restore_owner);
    assert_eq!(c.sink_table_name(), "t_copy");
    assert_eq!(c.checkpoints_retained.get(), 5);
    assert_eq!(c.job_name, "my-job");
    assert_eq!(
        c.periodic_savepoint_interval,
        Some(Duration::from_secs(600))
    );
    assert_eq!(c.periodic_savepoints_retained.get(), 4);
    assert_eq!(c.state_replicas.len(), 2);
    assert_eq!(c.position_table.as_deref(), Some("dr_positions"));
    assert_eq!(c.reader.batch_size_bytes, 65536);
    assert_eq!(c.reader.split_size_bytes, NonZeroU64::new(1024));
    assert_eq!(c.reader.scan_request_timeout, Duration::from_millis(1234));
    assert!(c.reader.prefetching);
    assert_eq!(c.reader.keep_alive_period, Duration::from_millis(777));
    assert_eq!(c.reader.replica_selection, ReplicaSelection::LeaderOnly);
    assert_eq!(c.reader.quiet_tablet_max_skips, 7);
    assert_eq!(c.writer.flush_mode, FlushMode::ManualFlush);
    assert_eq!(c.writer.operation_timeout, Duration::from_millis(4321));
    assert_eq!(c.writer.max_buffer_size.get(), 64);
    assert_eq!(c.writer.flush_interval, Duration::from_millis(250));
    // The only accepted value of the ignore keys (`true` is refused, below).
    assert!(!c.writer.ignore_not_found && !c.writer.ignore_duplicate);
}

#[test]
fn ignore_keys_refuse_true_and_say_why() {
    for (key, op) in [
        (ConfigKey::IgnoreNotFound, "DELETE_IGNORE"),
        (ConfigKey::IgnoreDuplicate, "UPSERT_IGNORE"),
    ] {
        let err = reject(&with(key, "true"));
        assert!(matches!(err, ConfigError::Unsupported { .. }), "{err:?}");
        assert_eq!(err.key(), Some(key.name()));
        let msg = err.to_string();
        assert!(msg.contains(&format!("'{key}=true'")), "{msg}");
        assert!(msg.contains(op) && msg.contains("set it to false"), "{msg}");
        let c = parse(&with(key, "false"));
        assert!(!c.writer.ignore_not_found && !c.writer.ignore_duplicate);
    }
}

#[test]
fn checkpoint_interval_must_be_below_discovery_interval() {
    let mut raw = minimal();
    raw.set(ConfigKey::DiscoveryIntervalSeconds, "10");

    raw.set(ConfigKey::CheckpointingIntervalMillis, "9999");
    assert_eq!(
        parse(&raw).checkpointing_interval,
        Duration::from_millis(9999)
    );

    for (checkpointing, discovery) in [("10000", "10"), ("20000", "10")] {
        raw.set(ConfigKey::CheckpointingIntervalMillis, checkpointing);
        raw.set(ConfigKey::DiscoveryIntervalSeconds, discovery);
        let err = reject(&raw);
        assert!(
            matches!(err, ConfigError::CheckpointIntervalTooLong { .. }),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "Checkpointing interval ({checkpointing} ms) must be < discovery interval (10000 ms)."
            )),
            "{msg}"
        );
        assert!(msg.contains("'job.checkpointingIntervalMillis'"), "{msg}");
        assert!(
            msg.contains("'job.discoveryIntervalSeconds' (now 10)"),
            "{msg}"
        );
    }

    // The default checkpoint interval (60 s) against a short discovery.
    let err = reject(&with(ConfigKey::DiscoveryIntervalSeconds, "60"));
    assert!(
        err.to_string().starts_with(
            "Checkpointing interval (60000 ms) must be < discovery interval (60000 ms)."
        ),
        "{err}"
    );
}

#[test]
fn non_positive_numbers_are_rejected() {
    let positive = [
        ConfigKey::DiscoveryIntervalSeconds,
        ConfigKey::CheckpointingIntervalMillis,
        ConfigKey::CheckpointsRetained,
        ConfigKey::BatchSizeBytes,
        ConfigKey::ScanRequestTimeout,
        ConfigKey::KeepAlivePeriodMs,
        ConfigKey::OperationTimeout,
        ConfigKey::MaxBufferSize,
        ConfigKey::FlushInterval,
    ];
    for key in positive {
        for value in ["0", "-1", "-5000"] {
            let err = reject(&with(key, value));
            assert!(matches!(err, ConfigError::OutOfRange { .. }), "{err:?}");
            assert_names(&err, key, value, "must be greater than 0");
        }
    }
}

#[test]
fn unparsable_numbers_are_rejected() {
    let numeric = [
        ConfigKey::DiscoveryIntervalSeconds,
        ConfigKey::CheckpointingIntervalMillis,
        ConfigKey::CheckpointsRetained,
        ConfigKey::BatchSizeBytes,
        ConfigKey::SplitSizeBytes,
        ConfigKey::ScanRequestTimeout,
        ConfigKey::KeepAlivePeriodMs,
        ConfigKey::OperationTimeout,
        ConfigKey::MaxBufferSize,
        ConfigKey::FlushInterval,
    ];
    for key in numeric {
        for value in [
            "abc",
            "",
            "1.5",
            "10s",
            "99999999999999999999999999999999999999999",
        ] {
            let err = reject(&with(key, value));
            assert!(matches!(err, ConfigError::InvalidNumber { .. }), "{err:?}");
            assert_names(&err, key, value, "expected a whole number");
        }
    }
    // Surrounding whitespace is fine.
    assert_eq!(
        parse(&with(ConfigKey::FlushInterval, " 250 "))
            .writer
            .flush_interval,
        Duration::from_millis(250)
    );
}

#[test]
fn too_large_numbers_are_rejected() {
    let err = reject(&with(ConfigKey::BatchSizeBytes, "4294967296"));
    assert_names(
        &err,
        ConfigKey::BatchSizeBytes,
        "4294967296",
        "must be at most 4294967295",
    );
    assert_eq!(
        parse(&with(ConfigKey::BatchSizeBytes, "4294967295"))
            .reader
            .batch_size_bytes,
        u32::MAX
    );
    let err = reject(&with(ConfigKey::OperationTimeout, "18446744073709551616"));
    assert_names(
        &err,
        ConfigKey::OperationTimeout,
        "18446744073709551616",
        "must be at most",
    );
}

#[test]
fn split_size_minus_one_means_one_split_per_tablet() {
    assert_eq!(
        parse(&with(ConfigKey::SplitSizeBytes, "-1"))
            .reader
            .split_size_bytes,
        None
    );
    assert_eq!(
        parse(&with(ConfigKey::SplitSizeBytes, "1048576"))
            .reader
            .split_size_bytes,
        NonZeroU64::new(1_048_576)
    );
    for value in ["0", "-2", "-1024"] {
        let err = reject(&with(ConfigKey::SplitSizeBytes, value));
        assert_names(
            &err,
            ConfigKey::SplitSizeBytes,
            value,
            "or -1 for one split per tablet",
        );
    }
}

#[test]
fn booleans() {
    let bools = [
        ConfigKey::CreateTable,
        ConfigKey::RestoreOwner,
        ConfigKey::Prefetching,
        ConfigKey::IgnoreNotFound,
        ConfigKey::IgnoreDuplicate,
    ];
    for key in bools {
        for value in ["yes", "1", "", "tru"] {
            let err = reject(&with(key, value));
            assert!(matches!(err, ConfigError::InvalidBool { .. }), "{err:?}");
            assert_names(&err, key, value, "expected true or false");
        }
    }
    assert!(parse(&with(ConfigKey::CreateTable, "True")).create_table);
    assert!(!parse(&with(ConfigKey::CreateTable, "FALSE")).create_table);
}

#[test]
fn bad_or_empty_replica_selection() {
    for value in ["CLOSEST", "", "leader"] {
        let err = reject(&with(ConfigKey::ReplicaSelection, value));
        assert!(matches!(err, ConfigError::InvalidEnum { .. }), "{err:?}");
        assert_names(
            &err,
            ConfigKey::ReplicaSelection,
            value,
            "expected one of CLOSEST_REPLICA, LEADER_ONLY",
        );
    }
    assert_eq!(
        parse(&with(ConfigKey::ReplicaSelection, "leader_only"))
            .reader
            .replica_selection,
        ReplicaSelection::LeaderOnly
    );
}

#[test]
fn quiet_tablet_skips_are_a_count_from_zero() {
    let key = ConfigKey::QuietTabletMaxSkips;
    assert_eq!(parse(&with(key, "0")).reader.quiet_tablet_max_skips, 0);
    let err = reject(&with(key, "-1"));
    assert!(matches!(err, ConfigError::OutOfRange { .. }), "{err:?}");
    assert_names(&err, key, "-1", "must be from 0 to 4294967295");
    let err = reject(&with(key, "many"));
    assert!(matches!(err, ConfigError::InvalidNumber { .. }), "{err:?}");
}

#[test]
fn bad_or_empty_flush_mode() {
    for value in ["AUTO_FLUSH", "", "sync"] {
        let err = reject(&with(ConfigKey::FlushMode, value));
        assert!(matches!(err, ConfigError::InvalidEnum { .. }), "{err:?}");
        assert_names(
            &err,
            ConfigKey::FlushMode,
            value,
            "expected one of AUTO_FLUSH_BACKGROUND, AUTO_FLUSH_SYNC, MANUAL_FLUSH",
        );
    }
    for (value, mode) in [
        ("AUTO_FLUSH_BACKGROUND", FlushMode::AutoFlushBackground),
        ("AUTO_FLUSH_SYNC", FlushMode::AutoFlushSync),
        ("manual_flush", FlushMode::ManualFlush),
    ] {
        assert_eq!(
            parse(&with(ConfigKey::FlushMode, value)).writer.flush_mode,
            mode
        );
        assert_eq!(mode.as_str().parse::<FlushMode>().ok(), Some(mode));
    }
}

#[test]
fn text_and_address_values() {
    let err = reject(&with(ConfigKey::TableName, ""));
    assert!(matches!(err, ConfigError::NoTables), "{err:?}");
    let err = reject(&with(ConfigKey::JobName, "  "));
    assert_names(&err, ConfigKey::JobName, "  ", "must not be empty");

    for (value, hint) in [
        ("", "at least one master"),
        ("a:7051,,b:7051", "empty entry"),
        ("a:7051,", "empty entry"),
        ("a 7051", "contains whitespace"),
    ] {
        let err = reject(&with(ConfigKey::SinkMasterAddresses, value));
        assert!(matches!(err, ConfigError::InvalidValue { .. }), "{err:?}");
        assert_names(&err, ConfigKey::SinkMasterAddresses, value, hint);
    }
    // A suffix may be empty or anything.
    assert_eq!(
        parse(&with(ConfigKey::TableSuffix, "_dr")).sink_table_name(),
        "orders_dr"
    );
}

#[test]
fn the_sink_table_name_is_given_whole_or_derived_never_both() {
    let c = parse(&with(ConfigKey::SinkTableName, "orders_back"));
    assert_eq!(c.sink_table_name(), "orders_back");
    assert_eq!(c.table_name, "orders");
    // Empty means derived (how effective_values writes the default).
    let c = parse(&with(ConfigKey::SinkTableName, " "));
    assert_eq!(c.sink_table, None);
    assert_eq!(c.sink_table_name(), "orders");
    // With a suffix: which name is meant is unclear, so it is refused.
    let mut raw = with(ConfigKey::SinkTableName, "orders_back");
    raw.set(ConfigKey::TableSuffix, "_dr");
    let err = reject(&raw);
    assert_names(
        &err,
        ConfigKey::SinkTableName,
        "orders_back",
        "job.tableSuffix='_dr'",
    );
    // Both forms survive effective_values.
    for raw in [
        with(ConfigKey::SinkTableName, "x"),
        with(ConfigKey::TableSuffix, "_dr"),
    ] {
        let c = parse(&raw);
        let again = JobConfig::from_named_pairs(
            c.effective_values()
                .iter()
                .map(|(k, v)| (k.name(), v.as_str()))
                .collect::<Vec<_>>(),
        )
        .expect("round trip");
        assert_eq!(again.sink_table_name(), c.sink_table_name());
    }
}

#[test]
fn checkpoints_directory_forms() {
    let c = parse(&with(
        ConfigKey::CheckpointsDirectory,
        "file:///data/ferry/ckpt",
    ));
    assert_eq!(
        c.checkpoints_directory,
        StorageLocation::Local(PathBuf::from("/data/ferry/ckpt"))
    );
    let c = parse(&with(ConfigKey::CheckpointsDirectory, "s3://bucket/ckpt/"));
    assert_eq!(c.checkpoints_directory.to_uri(), "s3://bucket/ckpt");
    let err = reject(&with(ConfigKey::CheckpointsDirectory, "hdfs://nn/ckpt"));
    assert_names(
        &err,
        ConfigKey::CheckpointsDirectory,
        "hdfs://nn/ckpt",
        "not supported",
    );
    let err = reject(&with(ConfigKey::CheckpointsDirectory, ""));
    assert_names(&err, ConfigKey::CheckpointsDirectory, "", "empty");
}

#[test]
fn checkpoints_retained_and_job_name() {
    assert_eq!(
        parse(&with(ConfigKey::CheckpointsRetained, "1"))
            .checkpoints_retained
            .get(),
        1
    );
    let err = reject(&with(ConfigKey::CheckpointsRetained, "0"));
    assert_names(
        &err,
        ConfigKey::CheckpointsRetained,
        "0",
        "must be greater than 0",
    );
    assert_eq!(
        parse(&with(ConfigKey::JobName, "dr-orders")).job_name,
        "dr-orders"
    );
}

#[test]
fn effective_values_round_trip() {
    let c = parse(&with(ConfigKey::SplitSizeBytes, "4096"));
    let mut raw = RawConfig::new();
    for (key, value) in c.effective_values() {
        raw.set(key, value);
    }
    assert_eq!(parse(&raw), c);
    let defaults = parse(&minimal());
    let values = defaults.effective_values();
    assert_eq!(values.len(), ConfigKey::all().len());
    for (key, value) in values {
        if let Some(default) = key.default_value() {
            assert_eq!(value, default, "{key}");
        }
    }
}

#[test]
fn periodic_savepoints_and_state_replicas() {
    let with = |extra: &[(&str, &str)]| {
        let mut pairs = vec![
            ("job.sourceMasterAddresses", "s:7051"),
            ("job.sinkMasterAddresses", "k:7051"),
            ("job.tableName", "t"),
            ("job.checkpointsDirectory", "/tmp/ckpt"),
        ];
        pairs.extend_from_slice(extra);
        JobConfig::from_named_pairs(pairs)
    };
    let c = with(&[]).expect("defaults");
    assert_eq!(c.periodic_savepoint_interval, None);
    assert_eq!(c.periodic_savepoints_retained.get(), 10);
    assert!(c.state_replicas.is_empty());
    let c = with(&[
        ("job.periodicSavepointInterval", "30 s"),
        ("job.periodicSavepointsRetained", "2"),
        ("job.stateReplicas", "/tmp/dr"),
    ])
    .expect("valid");
    assert_eq!(c.periodic_savepoint_interval, Some(Duration::from_secs(30)));
    let values: std::collections::HashMap<_, _> = c.effective_values().into_iter().collect();
    assert_eq!(values[&ConfigKey::PeriodicSavepointInterval], "30 s");
    assert_eq!(values[&ConfigKey::StateReplicas], "file:///tmp/dr");
    assert_eq!(
        with(&[("job.periodicSavepointInterval", "0")])
            .expect("off")
            .periodic_savepoint_interval,
        None
    );
    for (key, value, why) in [
        (
            "job.periodicSavepointInterval",
            "soon",
            "expected a duration",
        ),
        ("job.periodicSavepointsRetained", "0", "greater than 0"),
        ("job.stateReplicas", "/tmp/dr,,/tmp/x", "empty entry"),
        ("job.stateReplicas", "/tmp/dr,/tmp/dr/", "listed twice"),
        (
            "job.stateReplicas",
            "file:///tmp/ckpt",
            "job.checkpointsDirectory itself",
        ),
        ("job.stateReplicas", "hdfs:///dr", "replica 'hdfs:///dr'"),
    ] {
        let err = with(&[(key, value)]).expect_err(value).to_string();
        assert!(err.contains(key) && err.contains(why), "{value}: {err}");
    }
}

#[test]
fn the_position_table_has_a_default_and_an_unsafe_off_switch() {
    let base = [
        ("job.sourceMasterAddresses", "a:7051"),
        ("job.sinkMasterAddresses", "b:7051"),
        ("job.tableName", "t"),
        ("job.checkpointsDirectory", "/tmp/chk"),
    ];
    let c = JobConfig::from_named_pairs(base).expect("valid");
    assert_eq!(c.position_table.as_deref(), Some("ferry_positions"));
    let off = JobConfig::from_named_pairs(base.into_iter().chain([("job.positionTable", " ")]))
        .expect("valid");
    assert_eq!(off.position_table, None);
}

#[test]
fn table_defaults() {
    let c = parse(&minimal());
    assert_eq!(c.tables.names, ["orders"]);
    assert_eq!(c.tables.pattern, None);
    assert!(c.tables.is_single());
    assert!(c.schema_evolution);
    assert!(!c.rename_sink_table);
    assert_eq!(c.table_discovery_interval, Duration::from_secs(30));
}

#[test]
fn table_keys_set() {
    let mut raw = with(ConfigKey::TableName, " a , b,c ");
    raw.set(ConfigKey::TablePattern, "sales_.*");
    raw.set(ConfigKey::TableDiscoveryIntervalSeconds, "5");
    raw.set(ConfigKey::SchemaEvolution, "false");
    raw.set(ConfigKey::RenameSinkTable, "true");
    let c = parse(&raw);
    assert_eq!(c.tables.names, ["a", "b", "c"]);
    assert_eq!(c.tables.pattern.as_deref(), Some("sales_.*"));
    assert!(!c.tables.is_single());
    assert_eq!(c.table_discovery_interval, Duration::from_secs(5));
    assert!(!c.schema_evolution);
    assert!(c.rename_sink_table);
    // effective_values round-trips the selection.
    let again = JobConfig::from_named_pairs(
        c.effective_values()
            .iter()
            .map(|(k, v)| (k.name(), v.as_str()))
            .collect::<Vec<_>>(),
    )
    .expect("round trip");
    assert_eq!(again, c);
}

#[test]
fn a_pattern_alone_selects_tables() {
    let mut raw = minimal();
    raw.remove(ConfigKey::TableName);
    raw.set(ConfigKey::TablePattern, "orders_[0-9]+");
    let c = parse(&raw);
    assert!(c.tables.names.is_empty());
    assert_eq!(c.job_name, "ferry-replication-orders_[0-9]+");
    let re = c.tables.pattern_regex().expect("valid").expect("given");
    // Whole-name match: anchored on both ends.
    assert!(c.tables.selects("orders_12", Some(&re)));
    assert!(!c.tables.selects("old_orders_12", Some(&re)));
    assert!(!c.tables.selects("orders_12_copy", Some(&re)));
    assert!(!c.tables.selects("orders", Some(&re)));
}

#[test]
fn a_listed_table_is_selected_by_exact_name() {
    let c = parse(&with(ConfigKey::TableName, "a,b"));
    assert!(c.tables.selects("a", None));
    assert!(c.tables.selects("b", None));
    assert!(!c.tables.selects("ab", None));
}

#[test]
fn duplicate_or_empty_table_names_are_refused() {
    let err = reject(&with(ConfigKey::TableName, "a, b ,a"));
    assert_names(
        &err,
        ConfigKey::TableName,
        "a, b ,a",
        "table 'a' is listed twice",
    );
    let err = reject(&with(ConfigKey::TableName, "a,,b"));
    assert_names(&err, ConfigKey::TableName, "a,,b", "empty entry");
}

#[test]
fn an_invalid_pattern_is_refused_naming_the_key() {
    let err = reject(&with(ConfigKey::TablePattern, "orders_(["));
    assert_names(
        &err,
        ConfigKey::TablePattern,
        "orders_([",
        "not a valid regular expression",
    );
}

#[test]
fn the_table_discovery_interval_is_positive() {
    for value in ["0", "-3"] {
        let err = reject(&with(ConfigKey::TableDiscoveryIntervalSeconds, value));
        assert_names(
            &err,
            ConfigKey::TableDiscoveryIntervalSeconds,
            value,
            "greater than 0",
        );
    }
    let err = reject(&with(ConfigKey::SchemaEvolution, "yes"));
    assert!(matches!(err, ConfigError::InvalidBool { .. }), "{err:?}");
    let err = reject(&with(ConfigKey::RenameSinkTable, "1"));
    assert!(matches!(err, ConfigError::InvalidBool { .. }), "{err:?}");
}

#[test]
fn the_sink_table_name_needs_exactly_one_table() {
    let mut raw = with(ConfigKey::TableName, "a,b");
    raw.set(ConfigKey::SinkTableName, "x");
    let err = reject(&raw);
    assert_names(&err, ConfigKey::SinkTableName, "x", "exactly one table");
    let mut raw = with(ConfigKey::TablePattern, "a.*");
    raw.set(ConfigKey::SinkTableName, "x");
    let err = reject(&raw);
    assert_names(&err, ConfigKey::SinkTableName, "x", "job.tablePattern");
    // One named table: fine.
    assert_eq!(
        parse(&with(ConfigKey::SinkTableName, "x")).sink_table_name(),
        "x"
    );
}
