//! Schema following between two real Kudu clusters: while a writer keeps
//! writing to the source and the job replicates, the source table is
//! altered (nullable column added, NOT NULL column with a default added,
//! column dropped, column renamed, default/comment changed, range partition
//! added); after each change the sink must have the same schema (names,
//! types, nullability, defaults, storage attributes, comments, ranges) and
//! the same rows. A type change stops the job with a message naming the
//! column; once the sink is fixed by hand, a restart from the newest
//! checkpoint resumes.

use crate::common::{assert_same, start_job, wait_windows};
use ferry_engine::checkpoint::CheckpointStore;
use ferry_engine::config::JobConfig;
use ferry_engine::{JobHandle, JobStatus};
use ferry_testkit::MiniCluster;
use kudu_client::schema::{Compression, Encoding};
use kudu_client::write::Operation;
use kudu_client::{
    AlterTableBuilder, ColumnDelta, ColumnSchema, DataType, KuduClient, KuduTable, Schema,
    TableBuilder, Value,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The first range partition holds keys [0, RANGE); a later one
/// [RANGE, 2 * RANGE).
const RANGE: i64 = 1_000_000;

fn config(
    source: &MiniCluster,
    sink: &MiniCluster,
    table: &str,
    chk: &std::path::Path,
    discovery_s: u64,
) -> JobConfig {
    let pairs = [
        ("job.sourceMasterAddresses", source.master_addrs_joined()),
        ("job.sinkMasterAddresses", sink.master_addrs_joined()),
        ("job.tableName", table.to_string()),
        (
            "job.checkpointsDirectory",
            chk.to_string_lossy().into_owned(),
        ),
        ("job.discoveryIntervalSeconds", discovery_s.to_string()),
        ("job.checkpointingIntervalMillis", "500".to_string()),
    ];
    JobConfig::from_named_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str()))).expect("valid config")
}

/// id INT64 key, v STRING, n INT32; hash(id) 2 buckets inside one range
/// partition [0, RANGE). The sink gets an identical table.
async fn create_tables(source: &KuduClient, sink: &KuduClient, name: &str) -> KuduTable {
    let schema = Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()
            .expect("id"),
        ColumnSchema::builder("v", DataType::String)
            .nullable(true)
            .build()
            .expect("v"),
        ColumnSchema::builder("n", DataType::Int32)
            .nullable(true)
            .build()
            .expect("n"),
    ])
    .expect("schema");
    let mut lower = schema.new_row();
    lower.set_i64("id", 0).expect("lower");
    let mut upper = schema.new_row();
    upper.set_i64("id", RANGE).expect("upper");
    let b = TableBuilder::new(name, schema)
        .add_hash_partitions(&["id"], 2, 0)
        .set_range_partition_columns(&["id"])
        .add_range_partition(lower, upper)
        .num_replicas(3);
    source.create_table(&b).await.expect("create source table");
    let table = source.open_table(name).await.expect("open source table");
    let copy = source
        .table_builder_like(&table, name)
        .await
        .expect("sink builder");
    sink.create_table(&copy).await.expect("create sink table");
    table
}

/// A value of column `c`'s type.
fn value_for(rng: &mut StdRng, c: &ColumnSchema) -> Option<Value> {
    Some(match c.data_type() {
        DataType::Int32 => Value::Int32(rng.gen()),
        DataType::Int64 => Value::Int64(rng.gen()),
        DataType::String => Value::String(format!("s{}", rng.gen::<u32>())),
        DataType::Bool => Value::Bool(rng.gen()),
        DataType::Double => Value::Double(rng.gen_range(-1e6..1e6)),
        _ => return None,
    })
}

/// A writer that upserts and deletes rows of the source table, re-opening
/// it every round so columns added meanwhile get written too. Writes that
/// race with an ALTER may fail; the writer re-opens and goes on.
struct Writer {
    stop: Arc<AtomicBool>,
    pause: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    /// Keys are drawn from [0, max_key).
    max_key: Arc<AtomicI64>,
    task: tokio::task::JoinHandle<()>,
}

impl Writer {
    fn start(client: KuduClient, name: String, seed: u64) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let pause = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let max_key = Arc::new(AtomicI64::new(5_000));
        let task = {
            let (stop, pause, paused, rounds, max_key) = (
                stop.clone(),
                pause.clone(),
                paused.clone(),
                rounds.clone(),
                max_key.clone(),
            );
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed);
                while !stop.load(Ordering::SeqCst) {
                    if pause.load(Ordering::SeqCst) {
                        paused.store(true, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                    paused.store(false, Ordering::SeqCst);
                    let Ok(table) = client.open_table(&name).await else {
                        continue;
                    };
                    let mut session = client.new_session();
                    let max = max_key.load(Ordering::SeqCst);
                    for _ in 0..100 {
                        // Half the keys in the newest range when there are two.
                        let id = if max > RANGE && rng.gen_bool(0.5) {
                            rng.gen_range(RANGE..RANGE + 5_000)
                        } else {
                            rng.gen_range(0..5_000)
                        };
                        let mut row = table.new_row();
                        row.set_i64("id", id).expect("id");
                        let op = if rng.gen_ratio(1, 10) {
                            Operation::delete_ignore(&table, row)
                        } else {
                            for (i, c) in table.schema().columns().iter().enumerate().skip(1) {
                                if c.is_nullable() && rng.gen_ratio(1, 8) {
                                    row.set_null(i).expect("null");
                                } else if let Some(v) = value_for(&mut rng, c) {
                                    row.set(i, &v).expect("set");
                                }
                            }
                            Operation::upsert(&table, row)
                        };
                        if session.apply(op).await.is_err() {
                            break;
                        }
                    }
                    let _ = session.flush().await;
                    let _ = session.close().await;
                    rounds.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        Writer {
            stop,
            pause,
            paused,
            rounds,
            max_key,
            task,
        }
    }

    /// Waits until the writer wrote at least `n` more rounds.
    async fn wait_rounds(&self, n: u64) {
        let start = self.rounds.load(Ordering::SeqCst);
        let t = Instant::now();
        while self.rounds.load(Ordering::SeqCst) < start + n {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "the writer is stuck"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn pause(&self) {
        self.pause.store(true, Ordering::SeqCst);
        let t = Instant::now();
        while !self.paused.load(Ordering::SeqCst) {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "the writer does not pause"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn resume(&self) {
        self.paused.store(false, Ordering::SeqCst);
        self.pause.store(false, Ordering::SeqCst);
    }

    async fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("writer task");
    }
}

/// Everything of a column that the sink must copy (the id is the sink's
/// own).
fn column_attrs(c: &ColumnSchema) -> String {
    format!(
        "{} {} key={} nullable={} default={:?} encoding={:?} compression={:?} block_size={:?} comment={:?}",
        c.name(),
        c.type_display(),
        c.is_key(),
        c.is_nullable(),
        c.default_value(),
        c.encoding(),
        c.compression(),
        c.block_size(),
        c.comment(),
    )
}

/// Asserts the sink table's schema and range partitions equal the source's.
async fn assert_same_schema(source: &KuduClient, sink: &KuduClient, name: &str) {
    let a = source.open_table(name).await.expect("open source");
    let b = sink.open_table(name).await.expect("open sink");
    let cols = |t: &KuduTable| {
        t.schema()
            .columns()
            .iter()
            .map(column_attrs)
            .collect::<Vec<_>>()
    };
    assert_eq!(cols(&b), cols(&a), "sink columns != source columns");
    let ra = source.range_partitions(&a).await.expect("source ranges");
    let rb = sink.range_partitions(&b).await.expect("sink ranges");
    assert_eq!(rb, ra, "sink ranges != source ranges");
}

/// Pauses the writer, waits until the job replicated everything written
/// (two more windows: the second opens after the pause), checks schema and
/// rows, and lets the writer go on.
async fn caught_up(
    job: &JobHandle,
    writer: &Writer,
    source: &KuduClient,
    sink: &KuduClient,
    name: &str,
) {
    writer.pause().await;
    let done = job.metrics().snapshot().windows_completed;
    wait_windows(job, done + 2, Duration::from_secs(180)).await;
    assert_same_schema(source, sink, name).await;
    assert_same(source, sink, name).await;
    writer.resume();
}

async fn alter(client: &KuduClient, name: &str, b: AlterTableBuilder) {
    let table = client.open_table(name).await.expect("open for alter");
    client.alter_table(&table, &b).await.expect("alter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn source_changes_are_followed_while_a_writer_writes() {
    const NAME: &str = "evo";
    let (src, dst) = crate::common::two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    create_tables(&source, &sink, NAME).await;

    let dir = tempfile::tempdir().expect("tmp");
    let cfg = config(&src, &dst, NAME, &dir.path().join("chk"), 1);
    let writer = Writer::start(source.clone(), NAME.into(), 1);
    writer.wait_rounds(5).await;
    let job = start_job(&cfg, None, None, 2).await;
    wait_windows(&job, 1, Duration::from_secs(120)).await;
    caught_up(&job, &writer, &source, &sink, NAME).await;

    // A nullable column with a comment and storage attributes.
    alter(
        &source,
        NAME,
        AlterTableBuilder::new().add_column(
            ColumnSchema::builder("c1", DataType::String)
                .nullable(true)
                .encoding(Encoding::Dict)
                .compression(Compression::Lz4)
                .block_size(16384)
                .comment("added nullable")
                .build()
                .expect("c1"),
        ),
    )
    .await;
    writer.wait_rounds(5).await;
    caught_up(&job, &writer, &source, &sink, NAME).await;

    // A NOT NULL column with a default.
    alter(
        &source,
        NAME,
        AlterTableBuilder::new().add_column(
            ColumnSchema::builder("c2", DataType::Int64)
                .nullable(false)
                .default_value(7i64)
                .encoding(Encoding::BitShuffle)
                .comment("added not null")
                .build()
                .expect("c2"),
        ),
    )
    .await;
    writer.wait_rounds(5).await;
    caught_up(&job, &writer, &source, &sink, NAME).await;

    // Drop a column.
    alter(&source, NAME, AlterTableBuilder::new().drop_column("n")).await;
    writer.wait_rounds(5).await;
    caught_up(&job, &writer, &source, &sink, NAME).await;

    // Rename a column (followed by id: the sink column keeps its data).
    alter(
        &source,
        NAME,
        AlterTableBuilder::new().rename_column("v", "v2"),
    )
    .await;
    writer.wait_rounds(5).await;
    caught_up(&job, &writer, &source, &sink, NAME).await;

    // Change a default and a comment.
    alter(
        &source,
        NAME,
        AlterTableBuilder::new().alter_column(
            ColumnDelta::new("c2")
                .default_value(42i64)
                .comment("new comment"),
        ),
    )
    .await;
    writer.wait_rounds(5).await;
    caught_up(&job, &writer, &source, &sink, NAME).await;

    // Add a range partition and write into it.
    let table = source.open_table(NAME).await.expect("open");
    let mut lower = table.new_row();
    lower.set_i64("id", RANGE).expect("lower");
    let mut upper = table.new_row();
    upper.set_i64("id", 2 * RANGE).expect("upper");
    alter(
        &source,
        NAME,
        AlterTableBuilder::new().add_range_partition(lower, upper),
    )
    .await;
    writer.max_key.store(2 * RANGE, Ordering::SeqCst);
    writer.wait_rounds(5).await;
    caught_up(&job, &writer, &source, &sink, NAME).await;
    let rows = crate::common::read_all(&sink, NAME).await;
    assert!(
        rows.keys().any(|k| *k >= RANGE),
        "rows of the added range reached the sink"
    );

    writer.finish().await;
    assert_eq!(job.status(), JobStatus::Running);
    job.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_type_change_stops_the_job_and_a_fixed_sink_resumes() {
    const NAME: &str = "evo_type";
    let (src, dst) = crate::common::two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    create_tables(&source, &sink, NAME).await;

    let dir = tempfile::tempdir().expect("tmp");
    let cfg = config(&src, &dst, NAME, &dir.path().join("chk"), 1);
    let writer = Writer::start(source.clone(), NAME.into(), 2);
    writer.wait_rounds(5).await;
    let job = start_job(&cfg, None, None, 2).await;
    wait_windows(&job, 1, Duration::from_secs(120)).await;
    caught_up(&job, &writer, &source, &sink, NAME).await;

    // "n" keeps its name but becomes a STRING (a new column id).
    let n_string = || {
        ColumnSchema::builder("n", DataType::String)
            .nullable(true)
            .build()
            .expect("n")
    };
    alter(&source, NAME, AlterTableBuilder::new().drop_column("n")).await;
    alter(
        &source,
        NAME,
        AlterTableBuilder::new().add_column(n_string()),
    )
    .await;
    writer.wait_rounds(5).await;

    let t = Instant::now();
    let error = loop {
        if let JobStatus::Failed { error } = job.status() {
            break error;
        }
        assert!(
            t.elapsed() < Duration::from_secs(180),
            "the job did not stop on a type change: {:?}",
            job.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        error.contains("'n'"),
        "the message names the column: {error}"
    );
    let sink_n = sink
        .open_table(NAME)
        .await
        .expect("open sink")
        .schema()
        .column_by_name("n")
        .map(|c| c.data_type());
    assert_eq!(sink_n, Some(DataType::Int32), "the sink was not altered");

    // The operator applies the same change to the sink, then restarts from
    // the newest checkpoint.
    alter(&sink, NAME, AlterTableBuilder::new().drop_column("n")).await;
    alter(&sink, NAME, AlterTableBuilder::new().add_column(n_string())).await;
    let store = CheckpointStore::open_local(&cfg.checkpoints_directory, cfg.checkpoints_retained);
    let state = store
        .latest_complete(&job.job_id())
        .await
        .expect("checkpoints")
        .checkpoint
        .expect("a checkpoint before the stop")
        .state;
    let resumed = start_job(&cfg, None, Some(state), 2).await;
    wait_windows(&resumed, 1, Duration::from_secs(120)).await;
    writer.wait_rounds(5).await;
    caught_up(&resumed, &writer, &source, &sink, NAME).await;
    writer.finish().await;
    assert_eq!(resumed.status(), JobStatus::Running);
    resumed.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_column_added_and_one_dropped_inside_one_window() {
    const NAME: &str = "evo_window";
    let (src, dst) = crate::common::two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    create_tables(&source, &sink, NAME).await;

    // Long windows, so both ALTERs below very likely fall inside one diff
    // window; the assertions hold either way.
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = config(&src, &dst, NAME, &dir.path().join("chk"), 10);
    let writer = Writer::start(source.clone(), NAME.into(), 3);
    writer.wait_rounds(5).await;
    let job = start_job(&cfg, None, None, 2).await;
    wait_windows(&job, 1, Duration::from_secs(120)).await;
    // Right after a window completed, the next one has just begun.
    let done = job.metrics().snapshot().windows_completed;
    wait_windows(&job, done + 1, Duration::from_secs(120)).await;
    writer.wait_rounds(3).await;
    alter(
        &source,
        NAME,
        AlterTableBuilder::new().add_column(
            ColumnSchema::builder("c", DataType::Int64)
                .nullable(true)
                .build()
                .expect("c"),
        ),
    )
    .await;
    writer.wait_rounds(3).await;
    alter(&source, NAME, AlterTableBuilder::new().drop_column("n")).await;
    writer.wait_rounds(3).await;
    caught_up(&job, &writer, &source, &sink, NAME).await;
    let rows = crate::common::read_all(&sink, NAME).await;
    assert!(
        rows.values()
            .any(|r| r.last().is_some_and(|v| !v.is_null())),
        "values of the added column reached the sink"
    );
    writer.finish().await;
    job.cancel().await;
}
