//! `ferry run` refuses bad configuration with exit code 2 and a message
//! that names the offending key and value (one test per rule).

const REQUIRED: [(&str, &str); 4] = [
    ("job.sourceMasterAddresses", "127.0.0.1:7051"),
    ("job.sinkMasterAddresses", "127.0.0.2:7051"),
    ("job.tableName", "t"),
    ("job.checkpointsDirectory", "/tmp/ferry-cli-test"),
];

fn ferry(args: &[&str]) -> (i32, String) {
    let out = crate::ferry().args(args).output();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run_with(extra: &[&str], skip: Option<&str>) -> (i32, String) {
    let mut args = vec!["run".to_string()];
    for (k, v) in REQUIRED {
        if Some(k) != skip {
            args.push(format!("--{k}"));
            args.push(v.to_string());
        }
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    ferry(&refs)
}

#[test]
fn each_missing_required_key_is_named() {
    for (key, _) in REQUIRED {
        let (code, err) = run_with(&[], Some(key));
        assert_eq!(code, 2, "{key}: {err}");
        assert!(
            err.contains(&format!("No data for required key '{key}'")),
            "{key}: {err}"
        );
    }
}

#[test]
fn checkpoint_interval_must_be_below_discovery_interval() {
    for ms in ["5000", "6000"] {
        let (code, err) = run_with(
            &[
                "--job.discoveryIntervalSeconds",
                "5",
                "--job.checkpointingIntervalMillis",
                ms,
            ],
            None,
        );
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(&format!(
                "Checkpointing interval ({ms} ms) must be < discovery interval (5000 ms)."
            )),
            "{err}"
        );
    }
}

#[test]
fn bad_enum_values_list_the_valid_ones() {
    let (code, err) = run_with(&["--writer.flushMode", "SOMETIMES"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("SOMETIMES"), "{err}");
    for valid in ["AUTO_FLUSH_BACKGROUND", "AUTO_FLUSH_SYNC", "MANUAL_FLUSH"] {
        assert!(err.contains(valid), "{err}");
    }
    let (code, err) = run_with(&["--reader.replicaSelection", ""], None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("CLOSEST_REPLICA") && err.contains("LEADER_ONLY"),
        "{err}"
    );
}

#[test]
fn non_positive_intervals_and_sizes_are_refused() {
    for (key, value) in [
        ("job.discoveryIntervalSeconds", "0"),
        ("job.checkpointingIntervalMillis", "-1"),
        ("reader.batchSizeBytes", "0"),
        ("writer.maxBufferSize", "0"),
        ("writer.flushInterval", "-5"),
    ] {
        let (code, err) = run_with(&[&format!("--{key}"), value], None);
        assert_eq!(code, 2, "{key}={value}: {err}");
        assert!(
            err.contains(key) && err.contains(value),
            "{key}={value}: {err}"
        );
    }
}

#[test]
fn negative_or_non_numeric_throttle_limits_are_refused() {
    for (key, value) in [
        ("throttle.read.snapshot.rowsPerSecond", "-1"),
        ("throttle.write.diff.rowsPerSecond", "fast"),
        ("throttle.read.diff.bytesPerSecond", "-64mb"),
        ("throttle.write.snapshot.bytesPerSecond", "3 parsecs"),
    ] {
        let (code, err) = run_with(&[&format!("--{key}"), value], None);
        assert_eq!(code, 2, "{key}={value}: {err}");
        assert!(
            err.contains(key) && err.contains(value),
            "{key}={value}: {err}"
        );
    }
}

#[test]
fn unknown_keys_and_bad_flags_are_usage_errors() {
    let (code, err) = run_with(&["--job.tableNmae", "x"], None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("job.tableNmae") && err.contains("job.tableName"),
        "suggests: {err}"
    );
    let (code, err) = run_with(&["--parallelism", "0"], None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--parallelism") && err.contains("'0'"),
        "{err}"
    );
    let (code, err) = run_with(&["--config", "/nonexistent/ferry.toml"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/ferry.toml"), "{err}");
}

#[test]
fn config_file_values_are_overridden_by_flags() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("job.toml");
    std::fs::write(
        &file,
        "[job]\ndiscoveryIntervalSeconds = 5\ncheckpointingIntervalMillis = 9000\n",
    )
    .expect("write");
    let path = file.to_string_lossy().into_owned();
    let (code, err) = run_with(&["--config", &path], None);
    assert_eq!(code, 2, "file value is validated: {err}");
    assert!(err.contains("Checkpointing interval (9000 ms)"), "{err}");
}

#[test]
fn help_lists_every_key_with_its_default() {
    let out = crate::ferry().args(["run", "--help"]).output();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for key in ferry_engine::config::ENGINE_KEYS.specs() {
        assert!(
            text.contains(&format!("--{}", key.name)),
            "missing {}",
            key.name
        );
    }
    assert!(
        text.contains("[600]") && text.contains("[60000]"),
        "defaults shown"
    );
}

#[test]
fn ignore_keys_are_refused_with_the_reason() {
    for (key, op) in [
        ("writer.ignoreNotFound", "DELETE_IGNORE"),
        ("writer.ignoreDuplicate", "UPSERT_IGNORE"),
    ] {
        let (code, err) = run_with(&[&format!("--{key}"), "true"], None);
        assert_eq!(code, 2, "{key}: {err}");
        assert!(
            err.contains(&format!("'{key}=true' is not supported")) && err.contains(op),
            "{key}: {err}"
        );
    }
}

#[test]
fn process_keys_are_checked_like_job_keys() {
    let (code, err) = run_with(&["--rest.port", "http"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'http' for rest.port"), "{err}");
    let (code, err) = run_with(&["--rest.port=1", "-Drest.bind-port=2"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'rest.port' is given more than once"), "{err}");
    let (code, err) = ferry(&["server", "--metrics.kudu.pollIntervalMillis", "5"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("metrics.kudu.pollIntervalMillis") && err.contains("per-job key"),
        "{err}"
    );
}

#[test]
fn kafka_sink_keys_are_checked() {
    // A Kafka sink needs its brokers and takes no sink Kudu cluster.
    let (code, err) = run_with(
        &["--job.sinkType", "kafka"],
        Some("job.sinkMasterAddresses"),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("No data for required key 'job.sinkBootstrapServers'"),
        "{err}"
    );
    let (code, err) = run_with(
        &[
            "--job.sinkType",
            "kafka",
            "--job.sinkBootstrapServers",
            "b:9092",
        ],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("job.sinkMasterAddresses"), "{err}");
    // A Kafka key on a Kudu sink, a bad format, a progress topic per table,
    // exactly-once with a checkpoint interval longer than a transaction may
    // stay open.
    for (extra, needle) in [
        (["--job.sinkTopic", "t"], "job.sinkTopic"),
        (["--job.sinkType", "kafak"], "kudu, kafka"),
    ] {
        let (code, err) = run_with(&extra, None);
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
    }
    for (key, value, needle) in [
        ("--job.sinkFormat", "avro", "debezium-json, upsert-json"),
        (
            "--job.sinkProgressTopic",
            "p.{table}",
            "job.sinkProgressTopic",
        ),
        (
            "--job.sinkDeliveryGuarantee",
            "exactly-once",
            "job.checkpointingIntervalMillis",
        ),
        ("--job.sinkBootstrapServers", "no-port", "'no-port'"),
    ] {
        let mut extra = vec!["--job.sinkType", "kafka", key, value];
        if key != "--job.sinkBootstrapServers" {
            extra.extend(["--job.sinkBootstrapServers", "b:9092"]);
        }
        if value == "exactly-once" {
            extra.extend([
                "--job.checkpointingIntervalMillis",
                "600000",
                "--job.discoveryIntervalSeconds",
                "3600",
            ]);
        }
        let (code, err) = run_with(&extra, Some("job.sinkMasterAddresses"));
        assert_eq!(code, 2, "{key}={value}: {err}");
        assert!(err.contains(needle), "{key}={value}: {err}");
    }
}

#[test]
fn zookeeper_ha_needs_a_quorum_and_its_sasl_a_login() {
    let (code, err) = run_with(&["--high-availability.type", "zookeeper"], None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("No data for required key 'high-availability.zookeeper.quorum'"),
        "{err}"
    );
    let (code, err) = run_with(
        &[
            "--high-availability.type",
            "zookeeper",
            "--high-availability.zookeeper.quorum",
            "zk1",
        ],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("'zk1' for key 'high-availability.zookeeper.quorum'"),
        "{err}"
    );
    let (code, err) = run_with(
        &[
            "--high-availability.type",
            "zookeeper",
            "--high-availability.zookeeper.quorum",
            "zk1:2181",
            "--security.kerberos.login.contexts",
            "Client",
        ],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("'Client' for key 'security.kerberos.login.contexts'"),
        "{err}"
    );
    assert!(err.contains("security.kerberos.login.principal"), "{err}");
}
