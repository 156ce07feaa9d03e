//! Shared helpers for the replication tests: the every-type table (schema
//! from `ferry-fixtures`), a random change generator, full-table
//! comparison, and a job started in-process between two real clusters.

#![allow(dead_code)]

use ferry_engine::checkpoint::{CheckpointStore, JobState};
use ferry_engine::config::{JobConfig, RECOPY_EXPIRED_TABLETS};
use ferry_engine::{Job, JobHandle, JobOptions, RestorePoint};
use ferry_kudu::{KuduSink, KuduSource};
use ferry_testkit::MiniCluster;
use kudu_client::write::{FlushMode, Operation, Session, SessionOptions};
use kudu_client::{KuduClient, KuduTable, Row, TableBuilder, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

pub const TABLE: &str = "repl";

pub use ferry_fixtures::{all_types_schema, read_all, two_clusters};

/// Creates the every-type table (4 hash buckets, RF 3) on `client`.
pub async fn create_table(client: &KuduClient, name: &str) -> KuduTable {
    let b = TableBuilder::new(name, all_types_schema())
        .add_hash_partitions(&["id"], 4, 0)
        .num_replicas(3);
    client.create_table(&b).await.expect("create table");
    client.open_table(name).await.expect("open table")
}

/// A row with random values (about 1 in 8 cells NULL) for key `id`.
pub fn random_row(rng: &mut StdRng, table: &KuduTable, id: i64) -> Row {
    let mut row = table.new_row();
    row.set_i64("id", id).expect("id");
    let schema = table.schema().clone();
    for (i, c) in schema.columns().iter().enumerate().skip(1) {
        if rng.gen_ratio(1, 8) {
            row.set_null(i).expect("null");
            continue;
        }
        let v: Value = match c.name() {
            "b" => Value::Bool(rng.gen()),
            "i8" => Value::Int8(rng.gen()),
            "i16" => Value::Int16(rng.gen()),
            "i32" => Value::Int32(rng.gen()),
            "i64" => Value::Int64(if rng.gen_ratio(1, 10) {
                i64::MIN
            } else {
                rng.gen()
            }),
            "f" => Value::Float(rng.gen_range(-1e6..1e6)),
            "d" => Value::Double(rng.gen_range(-1e12..1e12)),
            "dec9" => Value::Decimal(rng.gen_range(-999_999_999..=999_999_999)),
            "dec18" => {
                Value::Decimal(rng.gen_range(-999_999_999_999_999_999..=999_999_999_999_999_999))
            }
            "dec38" => Value::Decimal(if rng.gen_ratio(1, 10) {
                99_999_999_999_999_999_999_999_999_999_999_999_999
            } else {
                rng.gen_range(-10i128.pow(30)..10i128.pow(30))
            }),
            "s" => Value::String(
                (0..rng.gen_range(0..40))
                    .map(|_| rng.gen_range('a'..='z'))
                    .collect(),
            ),
            "bin" => Value::Binary((0..rng.gen_range(0..40)).map(|_| rng.gen()).collect()),
            "vc" => Value::String(
                (0..rng.gen_range(0..=ferry_fixtures::VARCHAR_LEN))
                    .map(|_| rng.gen_range('a'..='z'))
                    .collect(),
            ),
            "ts" => Value::UnixtimeMicros(rng.gen_range(0..4_000_000_000_000_000)),
            "dt" => Value::Date(rng.gen_range(-100_000..100_000)),
            other => panic!("unexpected column {other}"),
        };
        row.set(i, &v).expect("set");
    }
    row
}

pub fn background_session(client: &KuduClient) -> Session {
    client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session")
}

/// Inserts rows `0..n`.
pub async fn load(client: &KuduClient, table: &KuduTable, n: i64, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut session = background_session(client);
    for id in 0..n {
        session
            .apply(Operation::insert(table, random_row(&mut rng, table, id)))
            .await
            .expect("apply");
    }
    session.flush().await.expect("flush");
    session.close().await.expect("close");
}

/// Applies `ops` random inserts, updates (some to NULL), upserts and
/// deletes over keys `0..key_space`, spread over `duration`.
pub async fn churn(
    client: &KuduClient,
    table: &KuduTable,
    ops: usize,
    key_space: i64,
    duration: Duration,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut session = background_session(client);
    let started = Instant::now();
    for n in 0..ops {
        let id = rng.gen_range(0..key_space);
        let op = match rng.gen_range(0..100) {
            0..=29 => Operation::upsert(table, random_row(&mut rng, table, id)),
            30..=49 => Operation::insert_ignore(table, random_row(&mut rng, table, id)),
            50..=74 => {
                let mut row = table.new_row();
                row.set_i64("id", id).expect("id");
                if rng.gen_bool(0.3) {
                    row.set_null("s").expect("null");
                    row.set_null("i32").expect("null");
                } else {
                    row.set_i32("i32", rng.gen()).expect("i32");
                    row.set_str("s", "updated").expect("s");
                }
                Operation::update_ignore(table, row)
            }
            _ => {
                let mut row = table.new_row();
                row.set_i64("id", id).expect("id");
                Operation::delete_ignore(table, row)
            }
        };
        session.apply(op).await.expect("apply");
        // Pace the ops over `duration` so several windows see changes.
        if n % 200 == 0 {
            let due = duration.mul_f64(n as f64 / ops as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
    }
    session.flush().await.expect("flush");
    session.close().await.expect("close");
}

/// Asserts the two tables hold the same rows, naming the first difference.
pub async fn assert_same(source: &KuduClient, sink: &KuduClient, name: &str) -> usize {
    let a = read_all(source, name).await;
    let b = read_all(sink, name).await;
    if a != b {
        let missing = a
            .keys()
            .filter(|k| !b.contains_key(k))
            .take(5)
            .collect::<Vec<_>>();
        let extra = b
            .keys()
            .filter(|k| !a.contains_key(k))
            .take(5)
            .collect::<Vec<_>>();
        let differ = a
            .iter()
            .filter(|(k, v)| b.get(k).is_some_and(|w| w != *v))
            .map(|(k, _)| *k)
            .take(5)
            .collect::<Vec<_>>();
        panic!(
            "sink != source: {} vs {} rows; missing in sink {missing:?}, extra in sink {extra:?}, different {differ:?}",
            a.len(),
            b.len()
        );
    }
    a.len()
}

pub fn job_config(
    source: &MiniCluster,
    sink: &MiniCluster,
    checkpoints: &std::path::Path,
    discovery_s: u64,
    extra: &[&str],
) -> JobConfig {
    let mut args = vec![
        "--job.sourceMasterAddresses".to_string(),
        source.master_addrs_joined(),
        "--job.sinkMasterAddresses".into(),
        sink.master_addrs_joined(),
        "--job.tableName".into(),
        TABLE.into(),
        "--job.checkpointsDirectory".into(),
        checkpoints.to_string_lossy().into_owned(),
        "--job.discoveryIntervalSeconds".into(),
        discovery_s.to_string(),
        "--job.checkpointingIntervalMillis".into(),
        "500".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    // `--key value` pairs, as `ferry run` takes them.
    let pairs = args
        .chunks(2)
        .map(|kv| (kv[0].trim_start_matches("--"), kv[1].as_str()));
    JobConfig::from_named_pairs(pairs).expect("valid config")
}

/// Starts the job in-process.
pub async fn start_job(
    cfg: &JobConfig,
    savepoints: Option<&std::path::Path>,
    restore: Option<JobState>,
    parallelism: usize,
) -> JobHandle {
    let source = KuduClient::new(&cfg.source_master_addresses).expect("source client");
    let sink = KuduClient::new(&cfg.sink_master_addresses).expect("sink client");
    let store = CheckpointStore::open_local(&cfg.checkpoints_directory, cfg.checkpoints_retained);
    let options = JobOptions::new(parallelism).default_savepoint_dir(
        savepoints.map(|p| ferry_engine::checkpoint::StorageLocation::local(p).expect("location")),
    );
    let restore = restore.map(|state| RestorePoint {
        location: "(test)".into(),
        state,
    });
    // As `KuduTables::connect` pairs them.
    let sink = KuduSink::from_config(sink, source.clone(), cfg);
    let recopy = cfg.reader.keys.get(&RECOPY_EXPIRED_TABLETS).expect("key");
    let source = KuduSource::new(source, cfg.table_name.clone(), cfg.reader.clone())
        .with_recopy(recopy.then(|| sink.keys()));
    Job::start(cfg, restore, source, sink, store, options)
        .await
        .expect("job starts")
}

/// Waits until `windows_completed` reaches `n` (or panics after `timeout`).
pub async fn wait_windows(job: &JobHandle, n: u64, timeout: Duration) {
    let start = Instant::now();
    loop {
        let m = job.metrics().snapshot();
        if m.windows_completed >= n {
            return;
        }
        if let ferry_engine::JobStatus::Failed { error } = job.status() {
            panic!("job failed: {error}");
        }
        assert!(
            start.elapsed() < timeout,
            "only {} of {n} windows after {timeout:?}: {m:?}",
            m.windows_completed
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
