//! Tests of reading the command line, `-D` and TOML files (moved here from
//! the engine with the parsing) and of `ferry run`'s argument handling.

use std::time::Duration;

use ferry_engine::config::{
    ConfigError, FlushMode, JobConfig, ReplicaSelection, CREATE_TABLE, DISCOVERY_INTERVAL_SECONDS,
    FLUSH_MODE, JOB_NAME, PREFETCHING, SOURCE_MASTER_ADDRESSES, SPLIT_SIZE_BYTES, TABLE_NAME,
    TABLE_SUFFIX,
};

use super::*;
use crate::process_opts::METRICS_PORT;
use crate::run_args::{from_submission, parse, RunArgs, RunCommand, UsageError};

const JOB: &dyn AnyOption = &TABLE_NAME;

/// Parses command-line style `--key value` / `--key=value` arguments
/// (no `run` flags) into a map.
fn from_args(args: &[&str]) -> Result<Settings, SettingsError> {
    let mut cli = Settings::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i];
        let next = args.get(i + 1).copied();
        i += 1;
        let Some(body) = arg.strip_prefix("--").filter(|b| !b.is_empty()) else {
            return Err(SettingsError::UnexpectedArgument {
                arg: arg.to_string(),
            });
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        if cli.insert_flag(name, inline, next)? {
            i += 1;
        }
    }
    Ok(cli)
}

fn run(args: &[&str]) -> Result<RunArgs, UsageError> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    match parse(&args)? {
        RunCommand::Run(run) => Ok(*run),
        RunCommand::Help => panic!("not help"),
    }
}

const REQUIRED: [&str; 8] = [
    "--job.sourceMasterAddresses",
    "s:7051",
    "--job.sinkMasterAddresses",
    "k:7051",
    "--job.tableName",
    "t",
    "--job.checkpointsDirectory",
    "/tmp/c",
];

fn run_with(extra: &[&str]) -> Result<RunArgs, UsageError> {
    let mut args = REQUIRED.to_vec();
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn cli_space_and_equals_forms() {
    let raw = from_args(&[
        "--job.tableName",
        "t1",
        "--job.sourceMasterAddresses=a:7051,b:7051",
        "--reader.splitSizeBytes",
        "-1",
        "--job.tableSuffix=",
        "--writer.flushMode=MANUAL_FLUSH",
    ])
    .expect("valid args");
    assert_eq!(raw.get(JOB), Some("t1"));
    assert_eq!(raw.get(&SOURCE_MASTER_ADDRESSES), Some("a:7051,b:7051"));
    // A negative number is a value, not a key.
    assert_eq!(raw.get(&SPLIT_SIZE_BYTES), Some("-1"));
    assert_eq!(raw.get(&TABLE_SUFFIX), Some(""));
    assert_eq!(raw.get(&FLUSH_MODE), Some("MANUAL_FLUSH"));
    // `=` inside the value is kept.
    let raw = from_args(&["--job.name=a=b"]).expect("valid");
    assert_eq!(raw.get(&JOB_NAME), Some("a=b"));
}

#[test]
fn bare_boolean_flag_means_true() {
    let raw = from_args(&["--job.createTable", "--reader.prefetching"]).expect("valid args");
    assert_eq!(raw.get(&CREATE_TABLE), Some("true"));
    assert_eq!(raw.get(&PREFETCHING), Some("true"));
}

#[test]
fn missing_value_for_non_boolean() {
    let err = from_args(&["--job.tableName"]).unwrap_err();
    assert!(matches!(
        err,
        SettingsError::MissingValue {
            key: "job.tableName",
            ..
        }
    ));
    assert!(err.to_string().contains("--job.tableName"), "{err}");
    let err = from_args(&["--job.tableName", "--job.createTable"]).unwrap_err();
    assert!(matches!(err, SettingsError::MissingValue { .. }), "{err}");
    let err = from_args(&["--rest.port"]).unwrap_err();
    assert!(
        err.to_string().contains("--rest.port (expected <port>)"),
        "{err}"
    );
}

/// The tablet servers come from the Kudu client now: an old configuration
/// that names the masters' web UIs is refused, with the key named.
#[test]
fn removed_master_web_ui_keys_are_refused_by_name() {
    for key in [
        "metrics.kudu.sourceMasterHttpAddresses",
        "metrics.kudu.sinkMasterHttpAddresses",
    ] {
        let flag = format!("--{key}");
        let err = from_args(&[flag.as_str(), "m1:8051"]).unwrap_err();
        assert!(
            matches!(err, SettingsError::RemovedKey { key: k, .. } if k == key),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&format!("'{key}' was removed")), "{msg}");
        assert!(msg.contains("tablet-server list"), "{msg}");
        let toml = format!("\"{key}\" = \"m1:8051\"\n");
        let err = Settings::from_toml_str(&toml).unwrap_err();
        assert!(err.to_string().contains(key), "{err}");
    }
}

#[test]
fn unknown_key_suggests_nearest() {
    let err = from_args(&["--job.tablename", "t"]).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            &err,
            SettingsError::UnknownKey { key, suggestion: Some("job.tableName") } if key == "job.tablename"
        ),
        "{err:?}"
    );
    assert!(msg.contains("'job.tablename'"), "{msg}");
    assert!(msg.contains("did you mean 'job.tableName'?"), "{msg}");
    let err = from_args(&["--zzz=1"]).unwrap_err();
    assert!(err.to_string().contains("see --help"), "{err}");
    // Process keys and their aliases are suggested too.
    let err = from_args(&["--rest.prot=1"]).unwrap_err();
    assert!(err.to_string().contains("'rest.port'"), "{err}");
}

#[test]
fn positional_and_single_dash_arguments_are_rejected() {
    for bad in ["t1", "-job.tableName", "--", "--=x"] {
        let err = from_args(&[bad]).unwrap_err();
        match bad {
            "--=x" => assert!(matches!(err, SettingsError::UnknownKey { .. }), "{err}"),
            _ => assert!(
                matches!(err, SettingsError::UnexpectedArgument { .. }),
                "{bad}: {err}"
            ),
        }
    }
    for bad in ["t1", "-job.tableName", "--"] {
        let err = run_with(&[bad]).unwrap_err();
        assert!(
            err.to_string().contains("unexpected argument"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn duplicate_on_command_line_is_rejected() {
    let err = from_args(&["--job.tableName=a", "--job.tableName", "b"]).unwrap_err();
    assert!(matches!(
        err,
        SettingsError::DuplicateKey {
            key: "job.tableName",
            ..
        }
    ));
    assert!(err.to_string().contains("'job.tableName'"), "{err}");
    // An alias is the same key.
    let err = run_with(&["--rest.port=1", "-Drest.bind-port=2"]).unwrap_err();
    assert!(err.to_string().contains("'rest.port'"), "{err}");
}

#[test]
fn toml_flat_and_nested_shapes_agree() {
    let flat = Settings::from_toml_str(
        r#"
        "job.tableName" = "t"
        "job.discoveryIntervalSeconds" = 30
        "job.createTable" = true
        "reader.replicaSelection" = "LEADER_ONLY"
        "metrics.port" = 9300
        "#,
    )
    .expect("flat TOML");
    let nested = Settings::from_toml_str(
        r#"
        [job]
        tableName = "t"
        discoveryIntervalSeconds = 30
        createTable = true

        [reader]
        replicaSelection = "LEADER_ONLY"

        [metrics]
        port = 9300
        "#,
    )
    .expect("nested TOML");
    let dotted = Settings::from_toml_str(
        r#"
        job.tableName = "t"
        job.discoveryIntervalSeconds = 30
        job.createTable = true
        reader.replicaSelection = "LEADER_ONLY"
        metrics.port = 9300
        "#,
    )
    .expect("dotted TOML");
    assert_eq!(flat, nested);
    assert_eq!(flat, dotted);
    assert_eq!(flat.get(&DISCOVERY_INTERVAL_SECONDS), Some("30"));
    assert_eq!(flat.get(&CREATE_TABLE), Some("true"));
    assert_eq!(flat.get(&METRICS_PORT), Some("9300"));
}

#[test]
fn toml_process_keys_and_aliases() {
    let s = Settings::from_toml_str(
        "\"metrics.port\" = 9300\n[rest]\nbind-port = 8090\n[job]\ntableName = \"t\"\n",
    )
    .expect("toml");
    let opts = crate::process_opts::ProcessOptions::from_config(s.config()).expect("valid");
    assert_eq!(opts.server.rest_port.port, 8090);
    assert_eq!(opts.server.metrics_port.port, 9300);
    assert_eq!(s.job().raw(&TABLE_NAME), Some("t"));
    assert_eq!(s.job().iter().count(), 1);
}

#[test]
fn toml_errors() {
    let err = Settings::from_toml_str("[job]\ntableNam = \"t\"").unwrap_err();
    assert!(
        err.to_string().contains("did you mean 'job.tableName'?"),
        "{err}"
    );
    let err =
        Settings::from_toml_str("\"job.tableName\" = \"a\"\n[job]\ntableName = \"b\"").unwrap_err();
    assert!(
        matches!(
            err,
            SettingsError::DuplicateKey {
                key: "job.tableName",
                ..
            }
        ),
        "{err}"
    );
    let err = Settings::from_toml_str("[job]\ntableName = [\"a\"]").unwrap_err();
    assert!(
        matches!(&err, SettingsError::UnsupportedTomlValue { key, found: "array", .. } if key == "job.tableName"),
        "{err}"
    );
    let err = Settings::from_toml_str("job.tableName = ").unwrap_err();
    assert!(matches!(err, SettingsError::InvalidToml { .. }), "{err}");
    assert!(err.to_string().contains("not valid TOML"), "{err}");
}

#[test]
fn toml_file_read_errors_name_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope.toml");
    let err = Settings::from_toml_file(&missing).unwrap_err();
    assert!(matches!(err, SettingsError::ReadFile { .. }));
    assert!(err.to_string().contains("nope.toml"), "{err}");

    let file = dir.path().join("job.toml");
    std::fs::write(&file, "[job]\ntableName = 5.5\n").expect("write");
    let err = Settings::from_toml_file(&file).unwrap_err();
    assert!(err.to_string().contains("job.toml"), "{err}");
    assert!(err.to_string().contains("float"), "{err}");
}

#[test]
fn command_line_overrides_file() {
    let file = Settings::from_toml_str("[job]\ntableName = \"from_file\"\ntableSuffix = \"_f\"")
        .expect("toml");
    let cli = from_args(&["--job.tableName", "from_cli"]).expect("args");
    let merged = file.overridden_by(cli);
    assert_eq!(merged.get(JOB), Some("from_cli"));
    assert_eq!(merged.get(&TABLE_SUFFIX), Some("_f"));
}

#[test]
fn command_line_wins_over_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("job.toml");
    std::fs::write(
        &path,
        r#"
        [job]
        sourceMasterAddresses = "file-src:7051"
        sinkMasterAddresses = "file-sink:7051"
        tableName = "from_file"
        checkpointsDirectory = "/tmp/file-ckpt"
        discoveryIntervalSeconds = 30

        [writer]
        flushMode = "AUTO_FLUSH_SYNC"

        [rest]
        port = 8090
        "#,
    )
    .expect("write");
    let c = run(&[
        "--config",
        path.to_str().expect("utf-8 path"),
        "--job.tableName",
        "from_cli",
        "--writer.flushMode=MANUAL_FLUSH",
        "--job.checkpointingIntervalMillis",
        "1000",
        "-Drest.port=8091",
    ])
    .expect("valid");
    assert_eq!(c.process.server.rest_port.port, 8091);
    let c = c.config;
    assert_eq!(c.table_name, "from_cli");
    assert_eq!(c.writer.flush_mode, FlushMode::ManualFlush);
    // Untouched file values survive.
    assert_eq!(c.source_master_addresses, ["file-src:7051"]);
    assert_eq!(c.discovery_interval, Duration::from_secs(30));
    assert_eq!(c.checkpointing_interval, Duration::from_millis(1000));
    assert_eq!(c.job_name, "ferry-replication-from_cli");
}

#[test]
fn both_toml_shapes_give_the_same_config() {
    let flat = r#"
        "job.sourceMasterAddresses" = "s:7051"
        "job.sinkMasterAddresses" = "k:7051"
        "job.tableName" = "t"
        "job.checkpointsDirectory" = "file:///tmp/ckpt"
        "job.discoveryIntervalSeconds" = 20
        "job.checkpointingIntervalMillis" = 2000
        "job.createTable" = true
        "reader.splitSizeBytes" = -1
        "reader.replicaSelection" = "LEADER_ONLY"
        "writer.maxBufferSize" = 10
    "#;
    let nested = r#"
        [job]
        sourceMasterAddresses = "s:7051"
        sinkMasterAddresses = "k:7051"
        tableName = "t"
        checkpointsDirectory = "file:///tmp/ckpt"
        discoveryIntervalSeconds = 20
        checkpointingIntervalMillis = 2000
        createTable = true

        [reader]
        splitSizeBytes = -1
        replicaSelection = "LEADER_ONLY"

        [writer]
        maxBufferSize = 10
    "#;
    let parse = |text: &str| {
        let settings = Settings::from_toml_str(text).expect("toml");
        JobConfig::from_config(&settings.job()).expect("valid")
    };
    let (a, b) = (parse(flat), parse(nested));
    assert_eq!(a, b);
    assert!(a.create_table);
    assert_eq!(a.writer.max_buffer_size.get(), 10);
    assert_eq!(a.reader.replica_selection, ReplicaSelection::LeaderOnly);
}

#[test]
fn toml_file_end_to_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("job.toml");
    std::fs::write(
        &path,
        "[job]\nsourceMasterAddresses = \"s:7051\"\nsinkMasterAddresses = \"k:7051\"\n\
         tableName = \"t\"\ncheckpointsDirectory = \"/tmp/c\"\ncheckpointingIntervalMillis = 0\n",
    )
    .expect("write");
    let err = run(&["--config", path.to_str().expect("utf-8")]).unwrap_err();
    let UsageError::Config(err) = err else {
        panic!("{err:?}")
    };
    assert!(matches!(err, ConfigError::OutOfRange { .. }), "{err:?}");
    assert_eq!(err.key(), Some("job.checkpointingIntervalMillis"));
    assert!(err.to_string().contains("must be greater than 0"), "{err}");
}

#[test]
fn dynamic_properties_are_process_keys_only() {
    let r = run_with(&[
        "-D",
        "metrics.reporter.prom.port=9999",
        "--rest.bind-port",
        "8082",
    ])
    .expect("valid");
    assert_eq!(r.process.server.metrics_port.port, 9999);
    assert_eq!(r.process.server.rest_port.port, 8082);
    assert!(r.process.server.rest_port.explicit);
    let err = run_with(&["-Djob.tableName=x"]).unwrap_err();
    assert!(err.to_string().contains("not a process option"), "{err}");
    let err = run_with(&["-Drest.port"]).unwrap_err();
    assert!(err.to_string().contains("expected -Dkey=value"), "{err}");
    let err = run_with(&["--rest.port", "http"]).unwrap_err();
    assert!(err.to_string().contains("'http' for rest.port"), "{err}");
}

#[test]
fn run_flags() {
    let r = run_with(&[
        "-p=3",
        "-s",
        "/tmp/sp",
        "--savepointPath",
        "/tmp/sps",
        "-m",
        "h:1",
        "-d",
    ])
    .expect("valid");
    assert_eq!(r.parallelism, 3);
    assert_eq!(r.from_savepoint.as_deref(), Some("/tmp/sp"));
    assert_eq!(r.savepoint_dir.as_deref(), Some("/tmp/sps"));
    assert_eq!(r.jobmanager.as_deref(), Some("h:1"));
    assert!(r.detached);
    for bad in ["0", "1025", "x"] {
        let err = run_with(&["--parallelism", bad]).unwrap_err();
        assert!(err.to_string().contains(&format!("'{bad}'")), "{err}");
    }
    let err = run_with(&["--config"]).unwrap_err();
    assert!(err.to_string().contains("--config needs a value"), "{err}");
    let args = vec!["--job.tableName".to_string(), "--help".to_string()];
    assert!(matches!(parse(&args), Ok(RunCommand::Help)));
}

#[test]
fn submission_args_reproduce_the_job() {
    let r = run_with(&[
        "--reader.prefetching",
        "--metrics.kudu.pollIntervalMillis=0",
        "-p",
        "2",
    ])
    .expect("valid");
    let body = r.submission().expect("body");
    let again = from_submission(&body).expect("valid");
    assert_eq!(again.config, r.config);
    assert_eq!(again.parallelism, 2);
    assert_eq!(again.process.kudu, r.process.kudu);
}

#[test]
fn a_submission_is_the_key_map_as_given_with_locations_made_absolute() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = std::env::current_dir().expect("cwd");
    let r = run(&[
        "--job.sourceMasterAddresses",
        "s:7051",
        "--job.sinkMasterAddresses",
        "k:7051",
        "--job.tableName",
        "t",
        "--job.checkpointsDirectory",
        "relative/chk",
        "--writer.flushMode=manual_flush",
        "--rest.port=8099",
        "-Ds3.secret-key=very-secret",
        "-Ds3.access-key=id",
        "-p",
        "3",
        "--savepointPath",
        dir.path().to_str().expect("utf-8"),
    ])
    .expect("valid");
    let body = r.submission().expect("body");
    let json = serde_json::to_value(&body).expect("json");
    // Values as given; the relative location made absolute.
    assert_eq!(json["config"]["writer.flushMode"], "manual_flush");
    assert_eq!(
        json["config"]["job.checkpointsDirectory"],
        cwd.join("relative/chk").to_str().expect("utf-8")
    );
    // Process keys (and their secrets) stay with the client.
    assert!(json["config"].get("rest.port").is_none(), "{json}");
    assert!(!json.to_string().contains("very-secret"), "{json}");
    assert_eq!(json["parallelism"], 3);
    assert!(json["savepoint_path"]
        .as_str()
        .is_some_and(|p| p.starts_with("file:///")));
    // The server refuses a process key, and validates like `ferry run`.
    let mut bad = body.clone();
    bad.config.insert("s3.secret-key".into(), "x".into());
    let err = from_submission(&bad).unwrap_err().to_string();
    assert!(
        err.contains("s3.secret-key") && err.contains("process key"),
        "{err}"
    );
    let mut bad = body.clone();
    bad.config
        .insert("job.discoveryIntervalSeconds".into(), "0".into());
    let err = from_submission(&bad).unwrap_err().to_string();
    assert!(
        err.contains("job.discoveryIntervalSeconds") && err.contains("'0'"),
        "{err}"
    );
    let mut bad = body;
    bad.config.insert("job.tableNmae".into(), "x".into());
    let err = from_submission(&bad).unwrap_err().to_string();
    assert!(err.contains("did you mean 'job.tableName'?"), "{err}");
}

/// The acceptance point of issue 30's keys: `writer.requestSizeBytes` is
/// one constant in ferry-engine/src/config/writer.rs (its consumer one line
/// in ferry-kudu's sink.rs), and nothing else names it, yet it is in `--help`,
/// docs/configuration.md, `--config` TOML and session mode, checked with
/// the key and the value named.
#[test]
fn a_key_added_as_one_constant_is_everywhere() {
    let key = &ferry_engine::config::REQUEST_SIZE_BYTES;
    let help = crate::run_args::help();
    let line = help
        .lines()
        .find(|l| l.contains("--writer.requestSizeBytes <bytes>"))
        .expect("in --help");
    assert!(
        line.contains("[1572864]") && line.contains("(ferry)"),
        "{line}"
    );
    // key_docs::docs_table_is_generated keeps the table equal to the keys.
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/configuration.md"
    ))
    .expect("docs/configuration.md");
    assert!(
        doc.contains("| `writer.requestSizeBytes` | 1572864 | `<bytes>` | ferry only |"),
        "not in docs/configuration.md"
    );
    assert_eq!(
        run_with(&[])
            .expect("valid")
            .config
            .writer
            .keys
            .get(key)
            .ok(),
        Some(1_572_864)
    );
    for (value, why) in [
        ("0", "must be greater than 0"),
        ("7340033", "must be at most 7340032"),
        ("lots", "expected a whole number"),
    ] {
        let err = run_with(&["--writer.requestSizeBytes", value])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'writer.requestSizeBytes'") && err.contains(&format!("'{value}'")),
            "{err}"
        );
        assert!(err.contains(why), "{err}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("job.toml");
    std::fs::write(
        &path,
        "[job]\nsourceMasterAddresses = \"s:7051\"\nsinkMasterAddresses = \"k:7051\"\n\
         tableName = \"t\"\ncheckpointsDirectory = \"/tmp/c\"\n[writer]\nrequestSizeBytes = 65536\n",
    )
    .expect("write");
    let r = run(&["--config", path.to_str().expect("utf-8")]).expect("valid");
    assert_eq!(r.config.writer.keys.get(key).ok(), Some(65_536));
    let body = r.submission().expect("body");
    assert_eq!(
        body.config
            .get("writer.requestSizeBytes")
            .map(String::as_str),
        Some("65536")
    );
    let again = from_submission(&body).expect("valid");
    assert_eq!(again.config.writer.keys.get(key).ok(), Some(65_536));
}

#[test]
fn per_bucket_s3_keys_reach_the_resolver_settings_and_bad_ones_are_named() {
    let run = run_with(&[
        "-Ds3.endpoint=http://127.0.0.1:9000",
        "-Ds3.bucket.dr-state.endpoint=http://127.0.0.2:9100",
        "-Ds3.bucket.dr-state.access-key=dr",
        "-Ds3.bucket.dr-state.secret-key=dr-secret",
    ])
    .expect("valid");
    let dr = run
        .process
        .s3
        .for_bucket("dr-state")
        .resolve()
        .expect("resolves");
    assert_eq!(dr.endpoint.as_deref(), Some("http://127.0.0.2:9100"));
    let primary = run
        .process
        .s3
        .for_bucket("chk")
        .resolve()
        .expect("resolves");
    assert_eq!(primary.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
    // The same in a config file, the command line winning.
    let file = Settings::from_toml_str("\"s3.bucket.dr.region\" = \"eu-west-1\"\n").expect("toml");
    let s3 = file
        .with_bucket_keys(ferry_objstore::S3Settings::default())
        .expect("valid");
    assert_eq!(s3.for_bucket("dr").region.as_deref(), Some("eu-west-1"));

    for (arg, says) in [
        (
            "-Ds3.bucket.dr.colour=x",
            "s3.bucket.dr.colour: unknown setting",
        ),
        (
            "-Ds3.bucket..endpoint=http://127.0.0.1:1",
            "s3.bucket..endpoint: the bucket name is empty",
        ),
    ] {
        let err = run_with(&[arg]).expect_err(arg);
        assert!(err.to_string().contains(says), "{arg}: {err}");
    }
    let err = run_with(&[
        "-Ds3.bucket.dr.secret-key=sekrit",
        "-Ds3.bucket.dr.secret-key=sekrit",
    ])
    .expect_err("twice");
    assert!(!err.to_string().contains("sekrit"), "{err}");
}
