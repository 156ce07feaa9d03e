//! Tests of step two ([`JobConfig::from_raw`]); reading the command line
//! and TOML files is tested in the `ferry` binary. Modelled on the reference job's parser tests (each required key missing,
//! defaults, checkpoint vs discovery interval, every reader and writer key,
//! bad and empty enum values) plus ferry's extra rules.

use std::num::{NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::checkpoint::StorageLocation;

const REQUIRED: [(&dyn AnyOption, &str); 4] = [
    (&SOURCE_MASTER_ADDRESSES, "src-1:7051,src-2:7051"),
    (&SINK_MASTER_ADDRESSES, "sink-1:7051"),
    (&TABLE_NAME, "orders"),
    (&CHECKPOINTS_DIRECTORY, "/var/lib/ferry/checkpoints"),
];

fn minimal() -> Config {
    let mut raw = Config::new();
    for (key, value) in REQUIRED {
        raw.set(key, value);
    }
    raw
}

fn with(key: &dyn AnyOption, value: &str) -> Config {
    let mut raw = minimal();
    raw.set(key, value);
    raw
}

fn parse(raw: &Config) -> JobConfig {
    match JobConfig::from_config(raw) {
        Ok(config) => config,
        Err(e) => panic!("expected a valid config, got: {e}"),
    }
}

fn reject(raw: &Config) -> ConfigError {
    match JobConfig::from_config(raw) {
        Ok(config) => panic!("expected an error, got {config:?}"),
        Err(e) => e,
    }
}

/// The error names the key and the value, and says `hint`.
fn assert_names(err: &ConfigError, key: &dyn AnyOption, value: &str, hint: &str) {
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
    assert_eq!(c.reader.quiet_tablet_max_skips, 3600);
    assert!(c.reader.keys.get(&RECOPY_EXPIRED_TABLETS).unwrap());
    assert_eq!(
        c.reader.keys.get(&HISTORY_MAX_AGE_SEC).unwrap(),
        Duration::from_secs(7 * 86_400)
    );
    assert_eq!(c.reader.keys.get(&DIFF_SCAN_BUDGET).unwrap().0, 0.0);
    assert_eq!(
        c.reader.keys.get(&MAX_LAG).unwrap(),
        Duration::from_secs(30)
    );

    assert_eq!(c.writer.flush_mode, FlushMode::AutoFlushBackground);
    assert_eq!(c.writer.operation_timeout, Duration::from_millis(30_000));
    assert_eq!(
        c.writer.max_buffer_size,
        NonZeroUsize::new(1000).expect("1000")
    );
    assert_eq!(c.writer.flush_interval, Duration::from_millis(1000));
    assert!(!c.writer.ignore_not_found);
    assert!(!c.writer.ignore_duplicate);
    assert!(c.throttle.is_unlimited());
}

#[test]
fn throttle_limits_refuse_negative_and_non_numeric_values_naming_the_key() {
    for (key, value, hint) in [
        (&THROTTLE_READ_SNAPSHOT_ROWS, "-1", "must be from 0"),
        (&THROTTLE_WRITE_DIFF_ROWS, "fast", "expected a whole number"),
        (
            &THROTTLE_READ_DIFF_BYTES,
            "-5mb",
            "expected a whole number of bytes",
        ),
        (
            &THROTTLE_WRITE_SNAPSHOT_BYTES,
            "12 parsecs",
            "unknown unit 'parsecs'",
        ),
    ] {
        assert_names(&reject(&with(key, value)), key, value, hint);
    }
    let c = parse(&with(&THROTTLE_READ_DIFF_BYTES, " 2 MB "));
    assert_eq!(c.throttle.read.diff.bytes_per_second, 2 << 20);
    assert_eq!(c.keys.raw(&THROTTLE_READ_DIFF_BYTES), Some("2097152"));
}

#[test]
fn each_required_key_missing() {
    for (missing, _) in REQUIRED {
        let mut raw = minimal();
        raw.remove(missing);
        let err = reject(&raw);
        if missing.name() == TABLE_NAME.name() {
            // job.tablePattern could stand in: both keys are named.
            assert!(matches!(err, ConfigError::NoTables), "{err:?}");
            assert!(err.to_string().contains("'job.tablePattern'"), "{err}");
        } else {
            assert!(
                matches!(err, ConfigError::MissingRequired { key } if key == missing.name()),
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
    let err = reject(&Config::new());
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
        ("job.cutsTable", "dr_cuts"),
        ("job.cutsRetention", "2 d"),
        ("job.verifyInterval", "10 min"),
        ("job.verifyBudgetRanges", "3"),
        ("job.verifyRepair", "true"),
        ("job.tablePattern", "t_[0-9]+"),
        ("job.tableDiscoveryIntervalSeconds", "7"),
        ("job.schemaEvolution", "false"),
        ("job.renameSinkTable", "true"),
        ("job.shards", "3"),
        // Above 0 refuses job.verifyInterval (set above): config::shards' tests.
        ("job.shardTabletsOver", "0"),
        ("reader.batchSizeBytes", "65536"),
        ("reader.splitSizeBytes", "1024"),
        ("reader.scanRequestTimeout", "1234"),
        ("reader.prefetching", "true"),
        ("reader.keepAlivePeriodMs", "777"),
        ("reader.replicaSelection", "LEADER_ONLY"),
        ("reader.quietTabletMaxSkips", "7"),
        ("reader.tabletMetricsEndpoint", "prometheus"),
        ("reader.recopyExpiredTablets", "false"),
        ("reader.maxInFlightBytes", "33554432"),
        ("reader.historyMaxAgeSec", "900"),
        ("reader.diffScanBudget", "1.5"),
        ("reader.maxLag", "45 s"),
        ("writer.flushMode", "MANUAL_FLUSH"),
        ("writer.operationTimeout", "4321"),
        ("writer.maxBufferSize", "64"),
        ("writer.flushInterval", "250"),
        ("writer.ignoreNotFound", "false"),
        ("writer.ignoreDuplicate", "false"),
        ("writer.requestSizeBytes", "65536"),
        ("throttle.read.snapshot.rowsPerSecond", "2000"),
        ("throttle.read.snapshot.bytesPerSecond", "64mb"),
        ("throttle.read.diff.rowsPerSecond", "300"),
        ("throttle.read.diff.bytesPerSecond", "4 KiB"),
        ("throttle.write.snapshot.rowsPerSecond", "1000"),
        ("throttle.write.snapshot.bytesPerSecond", "1048576"),
        ("throttle.write.diff.rowsPerSecond", "0"),
        ("throttle.write.diff.bytesPerSecond", "1g"),
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
        ("high-availability.zookeeper.quorum", "zk1:2181,zk2:2181"),
        ("high-availability.zookeeper.path.root", "/ha"),
        ("high-availability.zookeeper.client.session-timeout", "30 s"),
        (
            "high-availability.zookeeper.client.connection-timeout",
            "10 s",
        ),
        ("high-availability.zookeeper.client.retry-wait", "2 s"),
        ("high-availability.zookeeper.client.max-retry-attempts", "5"),
        ("high-availability.zookeeper.client.acl", "creator"),
        ("zookeeper.sasl.disable", "true"),
        ("zookeeper.sasl.service-name", "zookeeper"),
        ("zookeeper.sasl.login-context-name", "Client"),
        ("kubernetes.namespace", "ferry-prod"),
        ("kubernetes.config.file", "/etc/ferry/kubeconfig"),
        (
            "high-availability.kubernetes.leader-election.lease-duration",
            "20 s",
        ),
        (
            "high-availability.kubernetes.leader-election.renew-deadline",
            "12 s",
        ),
        (
            "high-availability.kubernetes.leader-election.retry-period",
            "4 s",
        ),
    ];
    // The connector kinds' keys are set in the Kafka crate's tests (a Kudu
    // sink or source refuses Kafka keys); Kerberos keys name files that
    // must exist: config::security's tests.
    let elsewhere = [
        SINK_TYPE.name(),
        SOURCE_TYPE.name(),
        // Makes the config a shard's: config::shards' tests.
        SHARD.name(),
        LOGIN_PRINCIPAL.name(),
        LOGIN_KEYTAB.name(),
        LOGIN_USE_TICKET_CACHE.name(),
        LOGIN_CONTEXTS.name(),
        SOURCE_PRINCIPAL.name(),
        SOURCE_KEYTAB.name(),
        SOURCE_SERVICE_NAME.name(),
        SINK_PRINCIPAL.name(),
        SINK_KEYTAB.name(),
        SINK_SERVICE_NAME.name(),
    ];
    assert_eq!(pairs.len() + elsewhere.len(), ENGINE_KEYS.keys().count());
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
    assert_eq!((c.shards, c.shard_tablets_over, c.shard), (3, 0, None));
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
    assert_eq!(c.cuts_table.as_deref(), Some("dr_cuts"));
    assert_eq!(c.cuts_retention, Duration::from_secs(2 * 86_400));
    assert_eq!(c.verify_interval, Some(Duration::from_secs(600)));
    assert_eq!(c.verify_budget_ranges.get(), 3);
    assert!(c.verify_repair);
    assert_eq!(c.reader.batch_size_bytes, 65536);
    assert_eq!(c.reader.split_size_bytes, NonZeroU64::new(1024));
    assert_eq!(c.reader.scan_request_timeout, Duration::from_millis(1234));
    assert!(c.reader.prefetching);
    assert_eq!(c.reader.keep_alive_period, Duration::from_millis(777));
    assert_eq!(c.reader.replica_selection, ReplicaSelection::LeaderOnly);
    assert_eq!(c.reader.quiet_tablet_max_skips, 7);
    assert_eq!(
        c.reader.keys.get(&TABLET_METRICS_ENDPOINT).unwrap(),
        TabletMetricsEndpoint::Prometheus
    );
    assert!(!c.reader.keys.get(&RECOPY_EXPIRED_TABLETS).unwrap());
    assert_eq!(c.reader.keys.get(&MAX_IN_FLIGHT_BYTES).unwrap(), 32 << 20);
    assert_eq!(
        c.reader.keys.get(&HISTORY_MAX_AGE_SEC).unwrap(),
        Duration::from_secs(900)
    );
    assert_eq!(c.reader.keys.get(&DIFF_SCAN_BUDGET).unwrap().0, 1.5);
    assert_eq!(
        c.reader.keys.get(&MAX_LAG).unwrap(),
        Duration::from_secs(45)
    );
    assert_eq!(c.writer.flush_mode, FlushMode::ManualFlush);
    assert_eq!(c.writer.operation_timeout, Duration::from_millis(4321));
    assert_eq!(c.writer.max_buffer_size.get(), 64);
    assert_eq!(c.writer.flush_interval, Duration::from_millis(250));
    assert_eq!(c.writer.keys.get(&REQUEST_SIZE_BYTES).ok(), Some(65536));
    let t = c.throttle;
    assert_eq!(
        (
            t.read.snapshot.rows_per_second,
            t.read.snapshot.bytes_per_second
        ),
        (2000, 64 << 20)
    );
    assert_eq!(
        (t.read.diff.rows_per_second, t.read.diff.bytes_per_second),
        (300, 4096)
    );
    assert_eq!(
        (
            t.write.snapshot.rows_per_second,
            t.write.snapshot.bytes_per_second
        ),
        (1000, 1 << 20)
    );
    assert_eq!(
        (t.write.diff.rows_per_second, t.write.diff.bytes_per_second),
        (0, 1 << 30)
    );
    // The only accepted value of the ignore keys (`true` is refused, below).
    assert!(!c.writer.ignore_not_found && !c.writer.ignore_duplicate);
}

#[test]
fn ignore_keys_refuse_true_and_say_why() {
    for (key, op) in [
        (&IGNORE_NOT_FOUND, "DELETE_IGNORE"),
        (&IGNORE_DUPLICATE, "UPSERT_IGNORE"),
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
    raw.set(&DISCOVERY_INTERVAL_SECONDS, "10");

    raw.set(&CHECKPOINTING_INTERVAL_MILLIS, "9999");
    assert_eq!(
        parse(&raw).checkpointing_interval,
        Duration::from_millis(9999)
    );

    for (checkpointing, discovery) in [("10000", "10"), ("20000", "10")] {
        raw.set(&CHECKPOINTING_INTERVAL_MILLIS, checkpointing);
        raw.set(&DISCOVERY_INTERVAL_SECONDS, discovery);
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
    let err = reject(&with(&DISCOVERY_INTERVAL_SECONDS, "60"));
    assert!(
        err.to_string().starts_with(
            "Checkpointing interval (60000 ms) must be < discovery interval (60000 ms)."
        ),
        "{err}"
    );
}

#[test]
fn non_positive_numbers_are_rejected() {
    let positive: [&dyn AnyOption; 9] = [
        &DISCOVERY_INTERVAL_SECONDS,
        &CHECKPOINTING_INTERVAL_MILLIS,
        &CHECKPOINTS_RETAINED,
        &BATCH_SIZE_BYTES,
        &SCAN_REQUEST_TIMEOUT,
        &KEEP_ALIVE_PERIOD_MS,
        &OPERATION_TIMEOUT,
        &MAX_BUFFER_SIZE,
        &FLUSH_INTERVAL,
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
    let numeric: [&dyn AnyOption; 10] = [
        &DISCOVERY_INTERVAL_SECONDS,
        &CHECKPOINTING_INTERVAL_MILLIS,
        &CHECKPOINTS_RETAINED,
        &BATCH_SIZE_BYTES,
        &SPLIT_SIZE_BYTES,
        &SCAN_REQUEST_TIMEOUT,
        &KEEP_ALIVE_PERIOD_MS,
        &OPERATION_TIMEOUT,
        &MAX_BUFFER_SIZE,
        &FLUSH_INTERVAL,
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
        parse(&with(&FLUSH_INTERVAL, " 250 ")).writer.flush_interval,
        Duration::from_millis(250)
    );
}

#[test]
fn too_large_numbers_are_rejected() {
    let err = reject(&with(&BATCH_SIZE_BYTES, "4294967296"));
    assert_names(
        &err,
        &BATCH_SIZE_BYTES,
        "4294967296",
        "must be at most 4294967295",
    );
    assert_eq!(
        parse(&with(&BATCH_SIZE_BYTES, "4294967295"))
            .reader
            .batch_size_bytes,
        u32::MAX
    );
    let err = reject(&with(&OPERATION_TIMEOUT, "18446744073709551616"));
    assert_names(
        &err,
        &OPERATION_TIMEOUT,
        "18446744073709551616",
        "must be at most",
    );
}

#[test]
fn split_size_minus_one_means_one_split_per_tablet() {
    assert_eq!(
        parse(&with(&SPLIT_SIZE_BYTES, "-1"))
            .reader
            .split_size_bytes,
        None
    );
    assert_eq!(
        parse(&with(&SPLIT_SIZE_BYTES, "1048576"))
            .reader
            .split_size_bytes,
        NonZeroU64::new(1_048_576)
    );
    for value in ["0", "-2", "-1024"] {
        let err = reject(&with(&SPLIT_SIZE_BYTES, value));
        assert_names(
            &err,
            &SPLIT_SIZE_BYTES,
            value,
            "or -1 for one split per tablet",
        );
    }
}

#[test]
fn booleans() {
    let bools: [&dyn AnyOption; 5] = [
        &CREATE_TABLE,
        &RESTORE_OWNER,
        &PREFETCHING,
        &IGNORE_NOT_FOUND,
        &IGNORE_DUPLICATE,
    ];
    for key in bools {
        for value in ["yes", "1", "", "tru"] {
            let err = reject(&with(key, value));
            assert!(matches!(err, ConfigError::InvalidBool { .. }), "{err:?}");
            assert_names(&err, key, value, "expected true or false");
        }
    }
    assert!(parse(&with(&CREATE_TABLE, "True")).create_table);
    assert!(!parse(&with(&CREATE_TABLE, "FALSE")).create_table);
}

#[test]
fn bad_or_empty_replica_selection() {
    for value in ["CLOSEST", "", "leader"] {
        let err = reject(&with(&REPLICA_SELECTION, value));
        assert!(matches!(err, ConfigError::InvalidEnum { .. }), "{err:?}");
        assert_names(
            &err,
            &REPLICA_SELECTION,
            value,
            "expected one of CLOSEST_REPLICA, LEADER_ONLY",
        );
    }
    assert_eq!(
        parse(&with(&REPLICA_SELECTION, "leader_only"))
            .reader
            .replica_selection,
        ReplicaSelection::LeaderOnly
    );
}

#[test]
fn quiet_tablet_skips_are_a_count_from_zero() {
    let key = &QUIET_TABLET_MAX_SKIPS;
    assert_eq!(parse(&with(key, "0")).reader.quiet_tablet_max_skips, 0);
    let err = reject(&with(key, "-1"));
    assert!(matches!(err, ConfigError::OutOfRange { .. }), "{err:?}");
    assert_names(&err, key, "-1", "must be from 0 to 4294967295");
    let err = reject(&with(key, "many"));
    assert!(matches!(err, ConfigError::InvalidNumber { .. }), "{err:?}");
}

#[test]
fn the_diff_scan_budget_is_a_rate_from_zero() {
    let key = &DIFF_SCAN_BUDGET;
    assert_eq!(
        parse(&with(key, "0.25")).reader.keys.get(key).unwrap().0,
        0.25
    );
    let err = reject(&with(key, "-1"));
    assert!(matches!(err, ConfigError::OutOfRange { .. }), "{err:?}");
    assert_names(&err, key, "-1", "must be between 0 and 1000000");
    let err = reject(&with(key, "often"));
    assert_names(&err, key, "often", "expected a decimal number");
    let err = reject(&with(&MAX_LAG, "soon"));
    assert_names(&err, &MAX_LAG, "soon", "expected a duration");
}

#[test]
fn bad_or_empty_flush_mode() {
    for value in ["AUTO_FLUSH", "", "sync"] {
        let err = reject(&with(&FLUSH_MODE, value));
        assert!(matches!(err, ConfigError::InvalidEnum { .. }), "{err:?}");
        assert_names(
            &err,
            &FLUSH_MODE,
            value,
            "expected one of AUTO_FLUSH_BACKGROUND, AUTO_FLUSH_SYNC, MANUAL_FLUSH",
        );
    }
    for (value, mode) in [
        ("AUTO_FLUSH_BACKGROUND", FlushMode::AutoFlushBackground),
        ("AUTO_FLUSH_SYNC", FlushMode::AutoFlushSync),
        ("manual_flush", FlushMode::ManualFlush),
    ] {
        assert_eq!(parse(&with(&FLUSH_MODE, value)).writer.flush_mode, mode);
        assert_eq!(mode.as_str().parse::<FlushMode>().ok(), Some(mode));
    }
}

#[test]
fn text_and_address_values() {
    let err = reject(&with(&TABLE_NAME, ""));
    assert!(matches!(err, ConfigError::NoTables), "{err:?}");
    let err = reject(&with(&JOB_NAME, "  "));
    assert_names(&err, &JOB_NAME, "  ", "must not be empty");

    for (value, hint) in [
        ("", "at least one master"),
        ("a:7051,,b:7051", "empty entry"),
        ("a:7051,", "empty entry"),
        ("a 7051", "contains whitespace"),
    ] {
        let err = reject(&with(&SINK_MASTER_ADDRESSES, value));
        assert!(matches!(err, ConfigError::InvalidValue { .. }), "{err:?}");
        assert_names(&err, &SINK_MASTER_ADDRESSES, value, hint);
    }
    // A suffix may be empty or anything.
    assert_eq!(
        parse(&with(&TABLE_SUFFIX, "_dr")).sink_table_name(),
        "orders_dr"
    );
}

#[test]
fn the_sink_table_name_is_given_whole_or_derived_never_both() {
    let c = parse(&with(&SINK_TABLE_NAME, "orders_back"));
    assert_eq!(c.sink_table_name(), "orders_back");
    assert_eq!(c.table_name, "orders");
    // Empty means derived (how effective_values writes the default).
    let c = parse(&with(&SINK_TABLE_NAME, " "));
    assert_eq!(c.sink_table, None);
    assert_eq!(c.sink_table_name(), "orders");
    // With a suffix: which name is meant is unclear, so it is refused.
    let mut raw = with(&SINK_TABLE_NAME, "orders_back");
    raw.set(&TABLE_SUFFIX, "_dr");
    let err = reject(&raw);
    assert_names(
        &err,
        &SINK_TABLE_NAME,
        "orders_back",
        "job.tableSuffix='_dr'",
    );
    // Both forms survive effective_values.
    for raw in [with(&SINK_TABLE_NAME, "x"), with(&TABLE_SUFFIX, "_dr")] {
        let c = parse(&raw);
        let again = JobConfig::from_named_pairs(
            c.effective_values()
                .iter()
                .map(|(k, v)| (*k, v.as_str()))
                .collect::<Vec<_>>(),
        )
        .expect("round trip");
        assert_eq!(again.sink_table_name(), c.sink_table_name());
    }
}

#[test]
fn checkpoints_directory_forms() {
    let c = parse(&with(&CHECKPOINTS_DIRECTORY, "file:///data/ferry/ckpt"));
    assert_eq!(
        c.checkpoints_directory,
        StorageLocation::Local(PathBuf::from("/data/ferry/ckpt"))
    );
    let c = parse(&with(&CHECKPOINTS_DIRECTORY, "s3://bucket/ckpt/"));
    assert_eq!(c.checkpoints_directory.to_uri(), "s3://bucket/ckpt");
    let err = reject(&with(&CHECKPOINTS_DIRECTORY, "hdfs://nn/ckpt"));
    assert_names(
        &err,
        &CHECKPOINTS_DIRECTORY,
        "hdfs://nn/ckpt",
        "not supported",
    );
    let err = reject(&with(&CHECKPOINTS_DIRECTORY, ""));
    assert_names(&err, &CHECKPOINTS_DIRECTORY, "", "empty");
}

#[test]
fn checkpoints_retained_and_job_name() {
    assert_eq!(
        parse(&with(&CHECKPOINTS_RETAINED, "1"))
            .checkpoints_retained
            .get(),
        1
    );
    let err = reject(&with(&CHECKPOINTS_RETAINED, "0"));
    assert_names(&err, &CHECKPOINTS_RETAINED, "0", "must be greater than 0");
    assert_eq!(parse(&with(&JOB_NAME, "dr-orders")).job_name, "dr-orders");
}

#[test]
fn effective_values_round_trip() {
    let c = parse(&with(&SPLIT_SIZE_BYTES, "4096"));
    let values = c.effective_values();
    let raw = ENGINE_KEYS
        .config_from_pairs(values.iter().map(|(k, v)| (*k, v.as_str())))
        .expect("known keys");
    assert_eq!(parse(&raw), c);
    let given = minimal();
    let values: std::collections::HashMap<_, _> =
        parse(&given).effective_values().into_iter().collect();
    // Every key is there: given, or with its literal default; only the
    // derived defaults nobody gave are left out.
    for (_, key) in ENGINE_KEYS.keys() {
        let value = values.get(key.name());
        match (given.raw(key), key.spec().default_value()) {
            (Some(v), _) => assert!(value.is_some(), "{} = {v}", key.name()),
            (None, Some(default)) => assert_eq!(value.map(String::as_str), Some(default)),
            (None, None) => assert_eq!(value, None, "{}", key.name()),
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
    assert_eq!(values["job.periodicSavepointInterval"], "30 s");
    assert_eq!(values["job.stateReplicas"], "file:///tmp/dr");
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
fn the_cuts_table_has_defaults_an_off_switch_and_a_positive_retention() {
    let base = [
        ("job.sourceMasterAddresses", "a:7051"),
        ("job.sinkMasterAddresses", "b:7051"),
        ("job.tableName", "t"),
        ("job.checkpointsDirectory", "/tmp/chk"),
    ];
    let c = JobConfig::from_named_pairs(base).expect("valid");
    assert_eq!(c.cuts_table.as_deref(), Some("ferry_cuts"));
    assert_eq!(c.cuts_retention, Duration::from_secs(7 * 86_400));
    let off = JobConfig::from_named_pairs(base.into_iter().chain([("job.cutsTable", "")]))
        .expect("valid");
    assert_eq!(off.cuts_table, None);
    let err = JobConfig::from_named_pairs(base.into_iter().chain([("job.cutsRetention", "0")]))
        .expect_err("zero retention")
        .to_string();
    assert!(err.contains("job.cutsRetention"), "{err}");
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
    let mut raw = with(&TABLE_NAME, " a , b,c ");
    raw.set(&TABLE_PATTERN, "sales_.*");
    raw.set(&TABLE_DISCOVERY_INTERVAL, "5");
    raw.set(&SCHEMA_EVOLUTION, "false");
    raw.set(&RENAME_SINK_TABLE, "true");
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
            .map(|(k, v)| (*k, v.as_str()))
            .collect::<Vec<_>>(),
    )
    .expect("round trip");
    assert_eq!(again, c);
}

#[test]
fn a_pattern_alone_selects_tables() {
    let mut raw = minimal();
    raw.remove(&TABLE_NAME);
    raw.set(&TABLE_PATTERN, "orders_[0-9]+");
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
    let c = parse(&with(&TABLE_NAME, "a,b"));
    assert!(c.tables.selects("a", None));
    assert!(c.tables.selects("b", None));
    assert!(!c.tables.selects("ab", None));
}

#[test]
fn duplicate_or_empty_table_names_are_refused() {
    let err = reject(&with(&TABLE_NAME, "a, b ,a"));
    assert_names(&err, &TABLE_NAME, "a, b ,a", "table 'a' is listed twice");
    let err = reject(&with(&TABLE_NAME, "a,,b"));
    assert_names(&err, &TABLE_NAME, "a,,b", "empty entry");
}

#[test]
fn an_invalid_pattern_is_refused_naming_the_key() {
    let err = reject(&with(&TABLE_PATTERN, "orders_(["));
    assert_names(
        &err,
        &TABLE_PATTERN,
        "orders_([",
        "not a valid regular expression",
    );
}

#[test]
fn the_table_discovery_interval_is_positive() {
    for value in ["0", "-3"] {
        let err = reject(&with(&TABLE_DISCOVERY_INTERVAL, value));
        assert_names(&err, &TABLE_DISCOVERY_INTERVAL, value, "greater than 0");
    }
    let err = reject(&with(&SCHEMA_EVOLUTION, "yes"));
    assert!(matches!(err, ConfigError::InvalidBool { .. }), "{err:?}");
    let err = reject(&with(&RENAME_SINK_TABLE, "1"));
    assert!(matches!(err, ConfigError::InvalidBool { .. }), "{err:?}");
}

#[test]
fn the_sink_table_name_needs_exactly_one_table() {
    let mut raw = with(&TABLE_NAME, "a,b");
    raw.set(&SINK_TABLE_NAME, "x");
    let err = reject(&raw);
    assert_names(&err, &SINK_TABLE_NAME, "x", "exactly one table");
    let mut raw = with(&TABLE_PATTERN, "a.*");
    raw.set(&SINK_TABLE_NAME, "x");
    let err = reject(&raw);
    assert_names(&err, &SINK_TABLE_NAME, "x", "job.tablePattern");
    // One named table: fine.
    assert_eq!(parse(&with(&SINK_TABLE_NAME, "x")).sink_table_name(), "x");
}

#[test]
fn sections_are_well_formed_and_names_unique() {
    let mut names = Vec::new();
    for (section, key) in ENGINE_KEYS.keys() {
        assert!(
            [
                "job",
                "reader",
                "writer",
                "throttle",
                "restart-strategy",
                "execution",
                "high-availability",
                "zookeeper",
                "kubernetes",
                "security"
            ]
            .contains(&key.spec().section()),
            "{} is in section {}",
            key.name(),
            key.spec().section()
        );
        assert!(!key.spec().doc.is_empty(), "{}", key.name());
        assert_eq!(section.scope, Scope::Job, "{}", key.name());
        // A literal default parses, and prints back as written.
        if let Some(default) = key.spec().default_value() {
            assert_eq!(
                key.normalize(default).as_deref(),
                Ok(default),
                "{}",
                key.name()
            );
        }
        names.push(key.name());
        names.extend(key.spec().aliases);
    }
    for name in &names {
        let (_, key) = ENGINE_KEYS.lookup(name).expect("found");
        assert!(key.spec().answers_to(name));
    }
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count);
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
        let (_, key) = ENGINE_KEYS.lookup(name).expect("known key");
        let spec = key.spec();
        assert_eq!(spec.origin, KeyOrigin::Reference, "{name}");
        assert_eq!(spec.default_value(), *default, "{name}");
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
        assert_eq!(spec.is_required(), required, "{name}");
    }
    let reference = ENGINE_KEYS
        .specs()
        .filter(|s| s.origin == KeyOrigin::Reference)
        .count();
    assert_eq!(reference, expected.len());
}

#[test]
fn ferry_only_keys_are_marked() {
    let ferry: Vec<_> = ENGINE_KEYS
        .specs()
        .filter(|s| s.origin == KeyOrigin::Ferry)
        .map(|s| s.name)
        .collect();
    // The Kafka connectors' keys are marked in ferry-kafka's tests.
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
            "job.cutsTable",
            "job.verifyInterval",
            "job.verifyBudgetRanges",
            "job.verifyRepair",
            "job.cutsRetention",
            "job.tablePattern",
            "job.tableDiscoveryIntervalSeconds",
            "job.schemaEvolution",
            "job.renameSinkTable",
            "job.shards",
            "job.shardTabletsOver",
            "job.shard",
            "job.sinkType",
            "job.sourceType",
            "reader.quietTabletMaxSkips",
            "reader.tabletMetricsEndpoint",
            "reader.maxInFlightBytes",
            "reader.recopyExpiredTablets",
            "reader.historyMaxAgeSec",
            "reader.diffScanBudget",
            "reader.maxLag",
            "writer.requestSizeBytes",
            "throttle.read.snapshot.rowsPerSecond",
            "throttle.read.snapshot.bytesPerSecond",
            "throttle.read.diff.rowsPerSecond",
            "throttle.read.diff.bytesPerSecond",
            "throttle.write.snapshot.rowsPerSecond",
            "throttle.write.snapshot.bytesPerSecond",
            "throttle.write.diff.rowsPerSecond",
            "throttle.write.diff.bytesPerSecond",
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
    assert_eq!(CHECKPOINTS_RETAINED.spec().default_value(), Some("3"));
    assert_eq!(JOB_NAME.spec().default_value(), None);
    assert!(!JOB_NAME.spec().is_required());
    assert_eq!(
        JOB_NAME.spec().default_doc(),
        "ferry-replication-<job.tableName>"
    );
}

#[test]
fn suggestions_and_unknown_or_duplicate_pairs() {
    let suggest = |name| ENGINE_KEYS.suggest(name);
    assert_eq!(suggest("job.tablename"), Some("job.tableName"));
    assert_eq!(suggest("job.tableNmae"), Some("job.tableName"));
    assert_eq!(suggest("tableName"), Some("job.tableName"));
    assert_eq!(suggest("reader.batchSize"), Some("reader.batchSizeBytes"));
    assert_eq!(suggest("writer.flushmode"), Some("writer.flushMode"));
    assert_eq!(suggest("completely.unrelated.thing"), None);

    let raw = ENGINE_KEYS
        .config_from_pairs([("job.tableName", "t"), ("job.tableSuffix", "")])
        .expect("valid");
    assert_eq!(raw.raw(&TABLE_NAME), Some("t"));
    assert_eq!(raw.raw(&TABLE_SUFFIX), Some(""));
    let err = ENGINE_KEYS
        .config_from_pairs([("job.tablename", "t")])
        .unwrap_err();
    assert!(
        err.to_string().contains("did you mean 'job.tableName'?"),
        "{err}"
    );
    let err = ENGINE_KEYS
        .config_from_pairs([("job.tableName", "a"), ("job.tableName", "b")])
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::DuplicateKey {
                key: "job.tableName",
                ..
            }
        ),
        "{err}"
    );
    // An alias is the same key.
    let err = ENGINE_KEYS
        .config_from_pairs([
            ("restart-strategy", "none"),
            ("restart-strategy.type", "none"),
        ])
        .unwrap_err();
    assert!(matches!(err, ConfigError::DuplicateKey { .. }), "{err}");
}

#[test]
fn a_key_read_where_it_is_used_is_checked_with_the_job() {
    // Every key of every engine section is checked when the config is
    // built, so reading one later cannot fail on a bad value.
    let err = reject(&with(&QUIET_TABLET_MAX_SKIPS, "-2"));
    assert_names(&err, &QUIET_TABLET_MAX_SKIPS, "-2", "must be from 0");
    let c = parse(&with(&QUIET_TABLET_MAX_SKIPS, " 4 "));
    assert_eq!(c.reader.keys.get(&QUIET_TABLET_MAX_SKIPS).ok(), Some(4));
    assert_eq!(c.reader.keys.raw(&QUIET_TABLET_MAX_SKIPS), Some("4"));
    assert_eq!(
        c.writer.keys.get(&FLUSH_MODE).ok(),
        Some(FlushMode::AutoFlushBackground)
    );
}

#[test]
fn scan_batches_fit_the_in_flight_budget() {
    let fit = |raw: &Config, p: usize| parse(raw).reader.fit_in_flight(p);
    const MIB: u32 = 1 << 20;
    // 12 MiB over 2 batches per pipeline.
    assert_eq!(fit(&minimal(), 1), 6 * MIB);
    assert_eq!(fit(&minimal(), 2), 3 * MIB);
    assert_eq!(fit(&minimal(), 8), MIB, "never below 1 MiB");
    assert_eq!(fit(&with(&BATCH_SIZE_BYTES, "65536"), 2), 65536);
    let big = with(&MAX_IN_FLIGHT_BYTES, "1073741824");
    assert_eq!(fit(&big, 2), 20 * MIB, "never above reader.batchSizeBytes");
}
