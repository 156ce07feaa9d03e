//! Schema following through the `ferry` binary against two real clusters
//! (issue 13), with a writer running: each supported ALTER of the source
//! (nullable column, NOT NULL column with a default, dropped column,
//! renamed column, new range partition with its own hash schema) reaches
//! the sink, whose schema then equals the source's attribute by attribute
//! and whose rows equal the source's; a type change stops the job with a
//! message naming the column, and a restart after the sink is fixed by
//! hand resumes; a kill -9 between reading the schema and altering the
//! sink (failpoint `schema.before-sink-alter`) is repaired by a restart
//! from the newest checkpoint.

use std::num::NonZeroUsize;
use std::path::Path;
use std::time::Duration;

use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::live::{load_rows, schema_differences, wait_caught_up};
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use ferry_fixtures::{key, nullable};
use ferry_testkit::MiniCluster;
use kudu_client::write::OpType;
use kudu_client::{
    AlterTableBuilder, ColumnSchema, DataType, KuduClient, Row, Schema, TableBuilder,
};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const TABLE: &str = "sc";
const CATCH_UP: Duration = Duration::from_secs(90);
/// Upper bound of the range partition the table starts with; the test adds
/// [SPLIT, 2 * SPLIT).
const SPLIT: i64 = 1_000_000;

struct Env {
    src: MiniCluster,
    dst: MiniCluster,
    source: KuduClient,
    sink: KuduClient,
    dir: tempfile::TempDir,
    store: CheckpointStore,
}

impl Env {
    fn new() -> Env {
        let (src, dst) = ferry_fixtures::two_clusters();
        let source = KuduClient::new(&src.master_addrs()).expect("source client");
        let sink = KuduClient::new(&dst.master_addrs()).expect("sink client");
        let dir = tempfile::tempdir().expect("tmp");
        let store = CheckpointStore::open_local(
            &StorageLocation::local(&dir.path().join("chk")).expect("location"),
            NonZeroUsize::MIN,
        );
        Env {
            src,
            dst,
            source,
            sink,
            dir,
            store,
        }
    }

    /// `ferry run` on TABLE with short intervals, from `resume` if given.
    fn start(&self, resume: Option<&str>, env: &[(&str, &str)]) -> FerryProcess {
        let chk = self.dir.path().join("chk");
        let mut args: Vec<String> = [
            "--job.sourceMasterAddresses",
            &self.src.master_addrs_joined(),
            "--job.sinkMasterAddresses",
            &self.dst.master_addrs_joined(),
            "--job.tableName",
            TABLE,
            "--job.createTable",
            "true",
            "--job.checkpointsDirectory",
            &chk.to_string_lossy(),
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "500",
            "--job.tableDiscoveryIntervalSeconds",
            "1",
            "-p",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(r) = resume {
            args.extend(["-s".to_string(), r.to_string()]);
        }
        FerryProcess::start(FERRY, &args, env, self.logs())
    }

    fn logs(&self) -> &Path {
        self.dir.path()
    }

    /// The newest complete checkpoint of the run with job id `job`, if it
    /// took one.
    async fn newest_checkpoint(&self, job: &str) -> Option<String> {
        let id: JobId = job.parse().expect("job id");
        let latest = self.store.latest_complete(&id).await.expect("list");
        latest.checkpoint.map(|c| c.location.to_uri())
    }

    async fn alter(&self, client: &KuduClient, b: AlterTableBuilder) {
        let t = client.open_table(TABLE).await.expect("open");
        client.alter_table(&t, &b).await.expect("alter");
    }

    /// Stops the writer, waits for the job to pass the source's clock and
    /// asserts the sink's schema and rows equal the source's.
    async fn settle(&self, ferry: &FerryProcess, writer: Workload, after: &str) -> i64 {
        let stats = writer.stop().await;
        wait_caught_up(&self.source, ferry.metrics, &[TABLE.to_string()], CATCH_UP).await;
        let schema = schema_differences(&self.source, &self.sink, TABLE, TABLE).await;
        assert!(
            schema.is_empty(),
            "after {after}: schemas differ: {schema:#?}"
        );
        let diff = compare_tables(&self.source, &self.sink, TABLE, TABLE).await;
        assert!(diff.is_equal(), "after {after}: {diff}");
        stats.next_id
    }
}

fn schema() -> Schema {
    Schema::new(vec![
        key("id", DataType::Int64),
        nullable("v", DataType::String),
        nullable("kind", DataType::Int32),
        nullable("gone", DataType::Double),
        nullable("old_name", DataType::Int64),
    ])
    .expect("schema")
}

async fn create(client: &KuduClient) {
    let s = schema();
    let bound = |v: Option<i64>| {
        let mut r = Row::new(&s);
        if let Some(v) = v {
            r.set_i64("id", v).expect("bound");
        }
        r
    };
    let b = TableBuilder::new(TABLE, s.clone())
        .add_hash_partitions(&["id"], 2, 0)
        .set_range_partition_columns(&["id"])
        .add_range_partition_with_bounds(
            (OpType::RangeLowerBound, bound(None)),
            (OpType::RangeUpperBound, bound(Some(SPLIT))),
        );
    client.create_table(&b).await.expect("create");
}

/// A writer on the table's current schema, inserting from `first_id`
/// (writers are replaced after each ALTER: a session keeps the schema it
/// opened the table with).
fn writer(env: &Env, first_id: i64, seed: u64) -> Workload {
    Workload::start_with(
        env.source.clone(),
        TABLE,
        WorkloadOptions {
            ops_per_sec: 150,
            seed,
            first_id,
            key_floor: 0,
        },
    )
}

fn column(b: kudu_client::schema::ColumnSchemaBuilder) -> ColumnSchema {
    b.build().expect("column")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_changes_follow_the_source_while_a_writer_runs() {
    let env = Env::new();
    create(&env.source).await;
    load_rows(&env.source, TABLE, 0..500).await;
    let ferry = env.start(None, &[]);
    let mut next = env
        .settle(&ferry, writer(&env, 1_000, 1), "the snapshot")
        .await;

    let steps: Vec<(&str, AlterTableBuilder)> = vec![
        (
            "adding a nullable column",
            AlterTableBuilder::new().add_column(nullable("added", DataType::String)),
        ),
        (
            "adding a NOT NULL column with a default",
            AlterTableBuilder::new().add_column(column(
                ColumnSchema::builder("required", DataType::Int32)
                    .nullable(false)
                    .default_value(7i32),
            )),
        ),
        (
            "dropping a column",
            AlterTableBuilder::new().drop_column("gone"),
        ),
        (
            "renaming a column",
            AlterTableBuilder::new().rename_column("old_name", "new_name"),
        ),
    ];
    for (i, (what, alter)) in steps.into_iter().enumerate() {
        let w = writer(&env, next, 10 + i as u64);
        tokio::time::sleep(Duration::from_secs(1)).await;
        env.alter(&env.source, alter).await;
        let old = w.stop().await;
        // Rows on the new schema after the change.
        let w = writer(&env, old.next_id.max(next), 20 + i as u64);
        tokio::time::sleep(Duration::from_secs(2)).await;
        next = env.settle(&ferry, w, what).await;
    }

    // A new range partition with its own hash schema, and rows in it.
    let w = writer(&env, next, 30);
    let t = env.source.open_table(TABLE).await.expect("open");
    let bound = |v: i64| {
        let mut r = Row::new(t.schema());
        r.set_i64("id", v).expect("bound");
        r
    };
    env.alter(
        &env.source,
        AlterTableBuilder::new().add_range_with_hash_schema(
            (OpType::RangeLowerBound, bound(SPLIT)),
            (OpType::RangeUpperBound, bound(2 * SPLIT)),
            &[(&["id"][..], 3, 5)],
        ),
    )
    .await;
    load_rows(&env.source, TABLE, SPLIT..SPLIT + 300).await;
    env.settle(&ferry, w, "adding a range partition").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_change_stops_the_job_and_a_fixed_sink_resumes() {
    let env = Env::new();
    create(&env.source).await;
    load_rows(&env.source, TABLE, 0..300).await;
    let mut ferry = env.start(None, &[]);
    let next = env
        .settle(&ferry, writer(&env, 1_000, 2), "the snapshot")
        .await;

    // Same name, another type: a new column to Kudu, not a change ferry
    // can make on the sink without losing its values.
    env.alter(&env.source, AlterTableBuilder::new().drop_column("kind"))
        .await;
    env.alter(
        &env.source,
        AlterTableBuilder::new().add_column(nullable("kind", DataType::String)),
    )
    .await;
    load_rows(&env.source, TABLE, next..next + 100).await;
    let status = ferry.wait_exit(Duration::from_secs(90));
    let err = ferry.stderr_text();
    assert!(!status.success(), "the job went on: {err}");
    assert!(err.contains("kind"), "the message names the column: {err}");
    let before = ferry_fixtures::read_all(&env.sink, TABLE).await;
    assert!(
        !before.contains_key(&next),
        "nothing is written with a mismatched schema"
    );

    // The operator's fix: the sink column gets the source's new type.
    env.alter(&env.sink, AlterTableBuilder::new().drop_column("kind"))
        .await;
    env.alter(
        &env.sink,
        AlterTableBuilder::new().add_column(nullable("kind", DataType::String)),
    )
    .await;
    let resume = env
        .newest_checkpoint(&ferry.job_id)
        .await
        .expect("a checkpoint before the type change");
    let ferry = env.start(Some(&resume), &[]);
    env.settle(&ferry, writer(&env, next + 100, 3), "the sink was fixed")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_schema_read_and_sink_alter_is_repaired_on_restart() {
    let env = Env::new();
    create(&env.source).await;
    load_rows(&env.source, TABLE, 0..300).await;
    let ferry = env.start(None, &[]);
    let next = env
        .settle(&ferry, writer(&env, 1_000, 4), "the snapshot")
        .await;
    let first = env
        .newest_checkpoint(&ferry.job_id)
        .await
        .expect("a checkpoint after the snapshot");
    drop(ferry);

    // The process aborts right before the sink ALTER the change needs.
    let mut ferry = env.start(
        Some(&first),
        &[("FERRY_FAILPOINT", "schema.before-sink-alter")],
    );
    let w = writer(&env, next, 5);
    env.alter(
        &env.source,
        AlterTableBuilder::new()
            .add_column(nullable("late", DataType::Int64))
            .drop_column("gone"),
    )
    .await;
    let status = ferry.wait_exit(Duration::from_secs(90));
    assert!(
        !status.success(),
        "the failpoint aborts the process: {}",
        ferry.stderr_text()
    );
    let sink = env.sink.open_table(TABLE).await.expect("open sink");
    assert!(
        sink.schema().columns().iter().all(|c| c.name() != "late"),
        "the sink was altered before the failpoint"
    );
    let stats = w.stop().await;

    // The aborted run may have taken checkpoints before the change.
    let resume = env.newest_checkpoint(&ferry.job_id).await.unwrap_or(first);
    let ferry = env.start(Some(&resume), &[]);
    env.settle(&ferry, writer(&env, stats.next_id, 6), "the restart")
        .await;
}
