//! Schema changes through the `ferry` binary against two real clusters
//! (issue 13), each made on the source while a writer runs and ferry
//! replicates: a nullable column added, a NOT NULL column with a default
//! added, a column dropped, a column renamed, a range partition added.
//! After each the sink's schema equals the source's (columns in the same
//! order, every attribute, the range partitions) and the rows are equal
//! cell by cell. A type change (a column dropped and re-added with another
//! type) fails the job of one table with a message naming the column;
//! after the same change is made on the sink by hand, a restart from the
//! newest checkpoint resumes. A process killed between the schema read and
//! the sink ALTER (`FERRY_FAILPOINT=schema.before-sink-alter`, which
//! aborts like kill -9) restarts from its newest checkpoint correctly.

use std::sync::Arc;
use std::time::Duration;

use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::live::{load_rows, schema_differences, wait_caught_up};
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::{Workload, WorkloadOptions, WorkloadStats};
use ferry_fixtures::{nullable, small_schema_with};
use ferry_testkit::MiniCluster;
use kudu_client::write::OpType;
use kudu_client::{AlterTableBuilder, ColumnSchema, DataType, KuduClient, TableBuilder, Value};

/// Bound on waiting for a job to catch up (a hang, not a timing check).
const CATCH_UP: Duration = Duration::from_secs(90);
/// The upper bound of the table's first range; later ranges start here.
const FIRST_RANGE_END: i64 = 1_000_000;
/// Rows written after a type change (inside the first range, far above
/// any key a writer uses).
const RETYPED_ROWS: std::ops::Range<i64> = 500_000..500_100;

struct Env {
    clusters: Arc<(MiniCluster, MiniCluster)>,
    source: KuduClient,
    sink: KuduClient,
    dir: tempfile::TempDir,
}

fn env() -> Env {
    let clusters = tokio::task::block_in_place(crate::two_clusters);
    let source = KuduClient::new(&clusters.0.master_addrs()).expect("source client");
    let sink = KuduClient::new(&clusters.1.master_addrs()).expect("sink client");
    Env {
        clusters,
        source,
        sink,
        dir: tempfile::tempdir().expect("tmp"),
    }
}

impl Env {
    fn chk(&self) -> std::path::PathBuf {
        self.dir.path().join("chk")
    }

    /// `ferry run`'s options for `table` (short intervals), then `more`.
    fn args(&self, table: &str, more: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = [
            "--job.sourceMasterAddresses",
            &self.clusters.0.master_addrs_joined(),
            "--job.sinkMasterAddresses",
            &self.clusters.1.master_addrs_joined(),
            "--job.tableName",
            table,
            "--job.createTable",
            "true",
            "--job.checkpointsDirectory",
            &self.chk().to_string_lossy(),
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
        a.extend(more.iter().map(|s| s.to_string()));
        a
    }

    fn start(&self, table: &str, more: &[&str], env: &[(&str, &str)]) -> FerryProcess {
        crate::ferry()
            .arg("run")
            .args(self.args(table, more))
            .envs(env)
            .free_ports()
            .start()
    }

    /// The newest complete checkpoint of job `id`, as a `-s` argument.
    async fn newest_checkpoint(&self, id: &str) -> String {
        crate::newest_checkpoint(&self.chk(), id).await
    }

    /// Waits until the job has every change so far, then asserts that the
    /// sink's schema and rows equal the source's.
    async fn assert_in_sync(&self, ferry: &mut FerryProcess, table: &str, after: &str) {
        wait_caught_up(
            &self.source,
            ferry.metrics(),
            &[table.to_string()],
            CATCH_UP,
        )
        .await;
        ferry.assert_running(&format!("after {after}"));
        let schema = schema_differences(&self.source, &self.sink, table, table).await;
        assert!(
            schema.is_empty(),
            "sink schema != source schema after {after}:\n{}",
            schema.join("\n")
        );
        let rows = compare_tables(&self.source, &self.sink, table, table).await;
        assert!(rows.is_equal(), "rows differ after {after}: {rows}");
    }

    async fn alter(&self, client: &KuduClient, table: &str, b: AlterTableBuilder) {
        let t = client.open_table(table).await.expect("open for alter");
        client
            .alter_table(&t, &b)
            .await
            .unwrap_or_else(|e| panic!("alter {table}: {e}"));
    }
}

/// A writer on `table` inserting from `first_id` (it opens the table, so
/// it writes the table's current columns).
fn writer(env: &Env, table: &str, first_id: i64, seed: u64) -> Workload {
    Workload::start_with(
        env.source.clone(),
        table,
        WorkloadOptions {
            ops_per_sec: 150,
            seed,
            first_id,
            key_floor: 0,
        },
    )
}

async fn stop(w: Workload) -> WorkloadStats {
    let stats = w.stop().await;
    assert!(stats.applied > 0, "the writer wrote: {stats:?}");
    stats
}

/// Key `id`, `v` STRING, `qty` INT32, `price` DOUBLE (nullable);
/// hash(id) 2 buckets × range(id) [0, FIRST_RANGE_END).
async fn create(client: &KuduClient, name: &str) {
    let schema = small_schema_with(vec![
        nullable("qty", DataType::Int32),
        nullable("price", DataType::Double),
    ]);
    let bound = |v: i64| {
        let mut r = kudu_client::Row::new(&schema);
        r.set_i64("id", v).expect("bound");
        r
    };
    let b = TableBuilder::new(name, schema.clone())
        .add_hash_partitions(&["id"], 2, 0)
        .set_range_partition_columns(&["id"])
        .add_range_partition_with_bounds(
            (OpType::RangeLowerBound, bound(0)),
            (OpType::RangeUpperBound, bound(FIRST_RANGE_END)),
        )
        .num_replicas(1);
    client
        .create_table(&b)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_changes_follow_the_source_while_a_writer_runs() {
    let env = env();
    let t = "sc_follow";
    create(&env.source, t).await;
    load_rows(&env.source, t, 0..300).await;
    let mut ferry = env.start(t, &[], &[]);
    // Rows compare equal only while nothing writes: each writer is stopped
    // before a comparison.
    let w = writer(&env, t, 10_000, 1);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stats = stop(w).await;
    env.assert_in_sync(&mut ferry, t, "the snapshot").await;
    let mut w = writer(&env, t, stats.next_id, 100);

    // Each change is made while the writer runs; the writer is then
    // replaced by one that sees the new schema (its old table handle
    // cannot write a dropped or renamed column), and stopped only for the
    // comparison.
    let changes: Vec<(&str, AlterTableBuilder)> = vec![
        (
            "adding a nullable column",
            AlterTableBuilder::new().add_column(nullable("note", DataType::String)),
        ),
        (
            "adding a NOT NULL column with a default",
            AlterTableBuilder::new().add_column(
                ColumnSchema::builder("level", DataType::Int64)
                    .nullable(false)
                    .default_value(Value::Int64(7))
                    .comment("added NOT NULL with a default")
                    .build()
                    .expect("level"),
            ),
        ),
        (
            "dropping a column",
            AlterTableBuilder::new().drop_column("price"),
        ),
        (
            "renaming a column",
            AlterTableBuilder::new().rename_column("note", "remark"),
        ),
    ];
    for (seed, (what, change)) in (2..).zip(changes) {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        env.alter(&env.source, t, change).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let stats = stop(w).await;
        env.assert_in_sync(&mut ferry, t, what).await;
        w = writer(&env, t, stats.next_id, seed);
    }

    // A range partition: added while the writer runs, then written to.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let table = env.source.open_table(t).await.expect("open");
    let (mut lo, mut hi) = (table.new_row(), table.new_row());
    lo.set_i64("id", FIRST_RANGE_END).expect("lo");
    hi.set_i64("id", 2 * FIRST_RANGE_END).expect("hi");
    env.alter(
        &env.source,
        t,
        AlterTableBuilder::new().add_range_partition(lo, hi),
    )
    .await;
    load_rows(&env.source, t, FIRST_RANGE_END..FIRST_RANGE_END + 200).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop(w).await;
    env.assert_in_sync(&mut ferry, t, "adding a range partition")
        .await;
    let in_new_range = ferry_fixtures::read_all(&env.sink, t)
        .await
        .range(FIRST_RANGE_END..)
        .count();
    assert_eq!(in_new_range, 200, "rows of the new range on the sink");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_change_stops_the_job_and_a_fixed_sink_resumes() {
    let env = env();
    let t = "sc_type";
    create(&env.source, t).await;
    load_rows(&env.source, t, 0..300).await;
    let mut ferry = env.start(t, &[], &[]);
    let w = writer(&env, t, 10_000, 11);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stats = stop(w).await;
    env.assert_in_sync(&mut ferry, t, "the snapshot").await;

    // Kudu changes a type by a drop and an add of the same name: a new
    // column id under an old name.
    let retyped = || nullable("qty", DataType::String);
    env.alter(&env.source, t, AlterTableBuilder::new().drop_column("qty"))
        .await;
    env.alter(
        &env.source,
        t,
        AlterTableBuilder::new().add_column(retyped()),
    )
    .await;
    // Keys no writer touches (it upserts and updates keys below its
    // newest insert), so any of them on the sink was written after the
    // type change.
    load_rows(&env.source, t, RETYPED_ROWS).await;
    let status = ferry.wait_exit(CATCH_UP);
    let err = ferry.stderr_text();
    assert_eq!(status.code(), Some(1), "{status:?}: {err}");
    assert!(err.contains("qty"), "the message names the column: {err}");
    assert!(err.contains(t), "the message names the table: {err}");
    let rows_after_change = ferry_fixtures::read_all(&env.sink, t)
        .await
        .range(RETYPED_ROWS)
        .count();
    assert_eq!(
        rows_after_change, 0,
        "rows were written with a mismatched schema"
    );

    // The operator makes the same change on the sink, then restarts.
    env.alter(&env.sink, t, AlterTableBuilder::new().drop_column("qty"))
        .await;
    env.alter(&env.sink, t, AlterTableBuilder::new().add_column(retyped()))
        .await;
    let chk = env.newest_checkpoint(&ferry.job_id()).await;
    let mut ferry = env.start(t, &["-s", &chk], &[]);
    let w = writer(&env, t, stats.next_id, 12);
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop(w).await;
    env.assert_in_sync(&mut ferry, t, "the restart with a fixed sink")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_schema_read_and_sink_alter_restarts_correctly() {
    let env = env();
    let t = "sc_kill";
    create(&env.source, t).await;
    load_rows(&env.source, t, 0..300).await;
    let mut ferry = env.start(t, &[], &[("FERRY_FAILPOINT", "schema.before-sink-alter")]);
    let w = writer(&env, t, 10_000, 21);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stats = stop(w).await;
    env.assert_in_sync(&mut ferry, t, "the snapshot").await;
    let w = writer(&env, t, stats.next_id, 23);

    env.alter(
        &env.source,
        t,
        AlterTableBuilder::new().add_column(nullable("note", DataType::String)),
    )
    .await;
    // The next window's schema read sees the change; the process aborts
    // before the sink ALTER.
    let status = ferry.wait_exit(CATCH_UP);
    assert!(!status.success(), "the failpoint aborted the process");
    let sink_cols: Vec<String> = env
        .sink
        .open_table(t)
        .await
        .expect("open sink")
        .schema()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    assert!(
        !sink_cols.iter().any(|c| c == "note"),
        "the sink was altered before the failpoint: {sink_cols:?}"
    );

    let chk = env.newest_checkpoint(&ferry.job_id()).await;
    let stats = stop(w).await;
    let w = writer(&env, t, stats.next_id, 22);
    let mut ferry = env.start(t, &["-s", &chk], &[]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop(w).await;
    env.assert_in_sync(&mut ferry, t, "the restart after the kill")
        .await;
}
