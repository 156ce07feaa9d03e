//! Kudu → Kafka against a real Kafka 4.x broker (KRaft) and a real Kudu
//! cluster: `ferry run --job.sinkType kafka` streams an every-type table
//! that a mixed workload keeps changing, is killed with SIGKILL at random
//! moments and restarted from its newest checkpoint (at-least-once,
//! upsert-json); the topic, folded by key, equals the source table cell by
//! cell. Then a fresh job writes the Debezium-style format to a second
//! topic, which folds to the same table.
//!
//! Exactly-once (a second test): the same through kill -9 restarts with
//! `job.sinkDeliveryGuarantee=exactly-once`; a `read_committed` consumer
//! folds the topic to the source and sees no row's record of one window
//! twice.

use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use ferry_testkit::MiniCluster;
use kudu_client::{KuduClient, TableBuilder, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;
use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::time::Duration;

const TABLE: &str = "events";
const PARTITIONS: i32 = 3;

fn ferry_args(
    master: &str,
    kafka: &str,
    chk: &std::path::Path,
    extra: &[&str],
    resume: Option<&str>,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "--job.sourceMasterAddresses",
        master,
        "--job.tableName",
        TABLE,
        "--job.checkpointsDirectory",
        &chk.to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
        "--reader.batchSizeBytes",
        "65536",
        "--job.sinkType",
        "kafka",
        "--job.sinkBootstrapServers",
        kafka,
        "-p",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    if let Some(path) = resume {
        args.extend(["-s".to_string(), path.to_string()]);
    }
    args
}

/// A source cell as the sink formats write it (docs/kafka.md).
fn cell(value: &Value, scale: u8) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => json!(b),
        Value::Int8(n) => json!(n),
        Value::Int16(n) => json!(n),
        Value::Int32(n) => json!(n),
        Value::Int64(n) => json!(n),
        // A FLOAT is written in its own shortest form (it reads back into
        // the same f32), not widened to f64 digits.
        Value::Float(f) if f.is_finite() => {
            serde_json::from_str(&serde_json::to_string(f).expect("float")).expect("float")
        }
        Value::Double(f) if f.is_finite() => json!(f),
        Value::Float(f) => json!(special(f64::from(*f))),
        Value::Double(f) => json!(special(*f)),
        Value::Decimal(unscaled) => json!(kudu_client::Decimal::new(*unscaled, 38, scale)
            .expect("a DECIMAL value")
            .to_string()),
        Value::String(s) => json!(s),
        Value::Binary(b) => json!(base64(b)),
        Value::UnixtimeMicros(us) => json!(us),
        Value::Date(d) => json!(d),
        other => panic!("no JSON form known for {other:?}"),
    }
}

fn special(f: f64) -> &'static str {
    if f.is_nan() {
        "NaN"
    } else if f > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    }
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            out.push(if i <= c.len() {
                char::from(A[((n >> (18 - 6 * i)) & 63) as usize])
            } else {
                '='
            });
        }
    }
    out
}

/// The source table as JSON rows keyed by id.
async fn source_rows(client: &KuduClient) -> BTreeMap<i64, Json> {
    let table = client.open_table(TABLE).await.expect("open");
    let schema = table.schema().clone();
    ferry_fixtures::read_all(client, TABLE)
        .await
        .into_iter()
        .map(|(id, values)| {
            let mut row = Map::new();
            for (col, v) in schema.columns().iter().zip(&values) {
                row.insert(col.name().to_string(), cell(v, col.scale()));
            }
            (id, Json::Object(row))
        })
        .collect()
}

/// Records that repeat the record before them of the same key (a replay
/// after a restart, at-least-once).
fn repeated(records: &[(Json, Option<Json>)]) -> usize {
    let mut last: BTreeMap<i64, &Option<Json>> = BTreeMap::new();
    records
        .iter()
        .filter(|(key, value)| last.insert(key_id(key), value) == Some(value))
        .count()
}

fn key_id(key: &Json) -> i64 {
    key["id"].as_i64().expect("id in key")
}

/// Folds upsert-json records: a value replaces the row, a tombstone
/// deletes it.
fn fold_upserts(records: &[(Json, Option<Json>)]) -> BTreeMap<i64, Json> {
    let mut rows = BTreeMap::new();
    for (key, value) in records {
        match value {
            Some(v) => rows.insert(key_id(key), v.clone()),
            None => rows.remove(&key_id(key)),
        };
    }
    rows
}

/// Folds debezium-json records by `op`.
fn fold_debezium(records: &[(Json, Option<Json>)]) -> BTreeMap<i64, Json> {
    let mut rows = BTreeMap::new();
    for (key, value) in records {
        let envelope = value.as_ref().expect("a Debezium record has a value");
        assert_eq!(envelope["source"]["table"], TABLE);
        match envelope["op"].as_str() {
            Some("r" | "c") => rows.insert(key_id(key), envelope["after"].clone()),
            Some("d") => {
                assert_eq!(envelope["before"]["id"], key["id"]);
                rows.remove(&key_id(key))
            }
            other => panic!("unexpected op {other:?}"),
        };
    }
    rows
}

async fn topic_config(bootstrap: &str, topic: &str, name: &str) -> Option<String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin");
    let described = admin
        .describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new())
        .await
        .expect("describe");
    described
        .into_iter()
        .filter_map(Result::ok)
        .find_map(|r| r.get(name).and_then(|e| e.value.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kudu_to_kafka_through_kill_9_restarts_folds_to_the_source() {
    let kudu_start = std::thread::spawn(|| {
        MiniCluster::builder()
            .tservers(1)
            .start()
            .expect("Kudu cluster")
    });
    let broker = crate::broker();
    let cluster = kudu_start.join().expect("cluster thread");
    let bootstrap = broker.bootstrap();
    let master = cluster.master_addrs_joined();
    let source = KuduClient::new(&cluster.master_addrs()).expect("client");
    let builder = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 3, 0)
        .num_replicas(1);
    source.create_table(&builder).await.expect("create");

    // Rows before the first start (the snapshot), and changes all along.
    let workload = Workload::start_with(
        source.clone(),
        TABLE,
        WorkloadOptions {
            ops_per_sec: 1_500,
            seed: 5,
            first_id: 0,
            key_floor: 0,
        },
    );
    tokio::time::sleep(Duration::from_secs(4)).await;

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let store = CheckpointStore::open_local(
        &StorageLocation::local(&chk).expect("location"),
        NonZeroUsize::MIN,
    );
    let upsert = [
        "--job.sinkFormat",
        "upsert-json",
        "--job.sinkTopicPartitions",
        "3",
    ];
    let mut rng = StdRng::seed_from_u64(14);
    let mut resume: Option<String> = None;
    let mut restored = 0;
    for _ in 0..4 {
        let args = ferry_args(&master, &bootstrap, &chk, &upsert, resume.as_deref());
        let mut ferry = crate::run(&args, &[]);
        tokio::time::sleep(Duration::from_millis(rng.gen_range(700..3000))).await;
        ferry.kill9();
        let job: JobId = ferry.job_id().parse().expect("job id");
        if let Some(c) = store.latest_complete(&job).await.expect("list").checkpoint {
            resume = Some(c.location.to_uri());
            restored += 1;
        }
    }
    assert!(restored >= 2, "checkpoints were taken between kills");
    let stats = workload.stop().await;
    assert_eq!(stats.failed, 0, "{stats:?}");
    assert!(stats.deletes > 0 && stats.updates > 0, "{stats:?}");

    // A last run catches up with every change.
    let args = ferry_args(&master, &bootstrap, &chk, &upsert, resume.as_deref());
    let mut ferry = crate::run(&args, &[]);
    ferry_fixtures::live::wait_caught_up(
        &source,
        ferry.metrics(),
        &[TABLE.to_string()],
        Duration::from_secs(120),
    )
    .await;
    ferry.kill9();

    let expected = source_rows(&source).await;
    assert!(expected.len() > 1_000, "{} rows", expected.len());
    let read = tokio::task::spawn_blocking({
        let bootstrap = bootstrap.clone();
        move || crate::read_topic(&bootstrap, TABLE, PARTITIONS)
    })
    .await
    .expect("reader");
    // Watermarks in every partition, one per diff window, their times
    // never going back (a replay repeats the last one).
    for p in 0..PARTITIONS {
        let marks: Vec<u64> = read
            .watermarks
            .iter()
            .filter(|(q, _)| *q == p)
            .map(|(_, end)| *end)
            .collect();
        assert!(marks.len() >= 3, "{marks:?} in partition {p}");
        assert!(
            marks.windows(2).all(|w| w[0] <= w[1]),
            "{marks:?} in partition {p}"
        );
    }
    let records = read.records;
    let folded = fold_upserts(&records);
    eprintln!(
        "at-least-once: {} records, {} repeating the one before them (replays)",
        records.len(),
        repeated(&records)
    );
    assert_eq!(folded.len(), expected.len(), "row count");
    for (id, row) in &expected {
        assert_eq!(folded.get(id), Some(row), "row {id}");
    }
    assert!(
        records.iter().any(|(_, v)| v.is_none()),
        "deletes are tombstones"
    );
    assert_eq!(
        topic_config(&bootstrap, TABLE, "cleanup.policy")
            .await
            .as_deref(),
        Some("compact"),
        "the upsert topic was created compacted"
    );

    // A fresh job to a second topic in the Debezium-style format.
    let dbz_chk = dir.path().join("chk-dbz");
    let dbz = [
        "--job.sinkTopic",
        "dbz.{table}",
        "--job.sinkTopicPartitions",
        "3",
    ];
    let args = ferry_args(&master, &bootstrap, &dbz_chk, &dbz, None);
    let mut ferry = crate::run(&args, &[]);
    // Changes after its snapshot: creates and deletes in diff windows.
    let more = Workload::start_with(
        source.clone(),
        TABLE,
        WorkloadOptions {
            ops_per_sec: 1_000,
            seed: 6,
            first_id: stats.next_id,
            key_floor: 0,
        },
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let more = more.stop().await;
    assert_eq!(more.failed, 0, "{more:?}");
    ferry_fixtures::live::wait_caught_up(
        &source,
        ferry.metrics(),
        &[TABLE.to_string()],
        Duration::from_secs(120),
    )
    .await;
    ferry.kill9();
    let topic = format!("dbz.{TABLE}");
    let records = tokio::task::spawn_blocking({
        let bootstrap = bootstrap.clone();
        let topic = topic.clone();
        move || crate::read_topic(&bootstrap, &topic, PARTITIONS).records
    })
    .await
    .expect("reader");
    assert_eq!(fold_debezium(&records), source_rows(&source).await);
    for op in ["r", "c", "d"] {
        assert!(
            records
                .iter()
                .any(|(_, v)| v.as_ref().is_some_and(|v| v["op"] == op)),
            "no record with op {op}"
        );
    }
    assert_eq!(
        topic_config(&bootstrap, &topic, "cleanup.policy")
            .await
            .as_deref(),
        Some("delete")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kudu_to_kafka_exactly_once_through_kill_9_restarts() {
    let kudu_start = std::thread::spawn(|| {
        MiniCluster::builder()
            .tservers(1)
            .start()
            .expect("Kudu cluster")
    });
    let broker = crate::broker();
    let cluster = kudu_start.join().expect("cluster thread");
    let bootstrap = broker.bootstrap();
    let master = cluster.master_addrs_joined();
    let source = KuduClient::new(&cluster.master_addrs()).expect("client");
    let builder = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 3, 0)
        .num_replicas(1);
    source.create_table(&builder).await.expect("create");
    let workload = Workload::start_with(
        source.clone(),
        TABLE,
        WorkloadOptions {
            ops_per_sec: 1_500,
            seed: 8,
            first_id: 0,
            key_floor: 0,
        },
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let store = CheckpointStore::open_local(
        &StorageLocation::local(&chk).expect("location"),
        NonZeroUsize::MIN,
    );
    let eos = [
        "--job.sinkTopic",
        "eos.{table}",
        "--job.sinkTopicPartitions",
        "3",
        "--job.sinkDeliveryGuarantee",
        "exactly-once",
    ];
    // Small scan batches: many writes between two checkpoints, so a kill
    // lands among them (at-least-once would then repeat records).
    let args_for = |resume: Option<&str>| {
        let mut args = ferry_args(&master, &bootstrap, &chk, &eos, resume);
        if let Some(i) = args.iter().position(|a| a == "--reader.batchSizeBytes") {
            args[i + 1] = "2048".to_string();
        }
        args
    };
    let mut rng = StdRng::seed_from_u64(41);
    let mut resume: Option<String> = None;
    let mut restored = 0;
    let mut after_failpoint = false;
    let mut continued_from_commit = 0;
    for i in 0..6 {
        // Every other run dies right after a commit and before the
        // checkpoint that records it: the next run must continue from
        // the sink's commit, not from its older checkpoint.
        let failpoint = i % 2 == 1;
        let env: &[(&str, &str)] = if failpoint {
            &[("FERRY_FAILPOINT", "checkpoint.after-sink-commit@6")]
        } else {
            &[("FERRY_LOG", "info")]
        };
        let mut ferry = crate::run(&args_for(resume.as_deref()), env);
        if failpoint {
            let status = ferry.wait_exit(Duration::from_secs(60));
            assert!(!status.success(), "the failpoint aborts the run");
        } else {
            // On a loaded machine a run may take longer than the random
            // pause to restore: after a failpoint, give it time to say
            // where it continues from.
            let says = "continuing from the sink's last commit";
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while after_failpoint
                && !ferry.stderr_text().contains(says)
                && std::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tokio::time::sleep(Duration::from_millis(rng.gen_range(1500..4000))).await;
            if after_failpoint && ferry.stderr_text().contains(says) {
                continued_from_commit += 1;
            }
            ferry.kill9();
        }
        after_failpoint = failpoint;
        let job: JobId = ferry.job_id().parse().expect("job id");
        if let Some(c) = store.latest_complete(&job).await.expect("list").checkpoint {
            resume = Some(c.location.to_uri());
            restored += 1;
        }
    }
    assert!(
        continued_from_commit >= 1,
        "a run after a crash between commit and checkpoint continued from the commit"
    );
    assert!(restored >= 3, "checkpoints were taken between kills");
    let stats = workload.stop().await;
    assert_eq!(stats.failed, 0, "{stats:?}");

    // The last run catches up and stops with a savepoint (its last
    // transaction committed).
    let mut ferry = crate::run(&args_for(resume.as_deref()), &[]);
    ferry_fixtures::live::wait_caught_up(
        &source,
        ferry.metrics(),
        &[TABLE.to_string()],
        Duration::from_secs(120),
    )
    .await;
    ferry.stop_with_savepoint(&dir.path().join("sp"));

    let topic = format!("eos.{TABLE}");
    let records = tokio::task::spawn_blocking({
        let bootstrap = bootstrap.clone();
        let topic = topic.clone();
        move || crate::read_topic(&bootstrap, &topic, PARTITIONS).records
    })
    .await
    .expect("reader");
    let expected = source_rows(&source).await;
    assert!(expected.len() > 1_000, "{} rows", expected.len());
    assert_eq!(fold_debezium(&records), expected);
    // No record of a row in one window twice (a replay would repeat it).
    let mut seen = std::collections::BTreeSet::new();
    for (key, value) in &records {
        let end = value.as_ref().expect("value")["source"]["window_end"].clone();
        assert!(
            seen.insert((key_id(key), end.to_string())),
            "row {key} written twice in window ending {end}"
        );
    }
    eprintln!("exactly-once: {} records, none twice", records.len());
}
