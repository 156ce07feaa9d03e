//! When the source's history runs out (issue 34 item 4): tables whose own
//! retention (`kudu.table.history_max_age_sec`, 12 s) is shorter than the
//! time the job was down have their tablets copied again at the window end
//! — the rows deleted meanwhile deleted from the sink — while the others go
//! on with diff windows; a re-copy killed midway is finished by the
//! restarted job.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry_fixtures::live::{
    compare_all, create_varied_table, load_rows, prom_sample, wait_caught_up,
};
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use ferry_testkit::MiniCluster;
use kudu_client::{AlterTableBuilder, KuduClient};

/// Bound on waiting for a job to catch up (a hang, not a timing check).
const CATCH_UP: Duration = Duration::from_secs(90);

/// The short tables' own history retention. The re-copy reads the source
/// at the resumed window's end, so that end must stay within it from the
/// window's opening to the re-copy's start, and across the kill and
/// restart of the second test.
const HISTORY_S: u64 = 12;

/// How long the job stays down: past the short history.
const DOWN: Duration = Duration::from_secs(HISTORY_S + 3);

struct Env {
    clusters: Arc<(MiniCluster, MiniCluster)>,
    source: KuduClient,
    sink: KuduClient,
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let clusters = tokio::task::block_in_place(crate::two_clusters);
        Env {
            source: KuduClient::new(&clusters.0.master_addrs()).expect("source client"),
            sink: KuduClient::new(&clusters.1.master_addrs()).expect("sink client"),
            clusters,
            dir: tempfile::tempdir().expect("tmp"),
        }
    }

    fn chk(&self) -> std::path::PathBuf {
        self.dir.path().join("chk")
    }

    /// `ferry run`'s options for `tables`, checkpoints every
    /// `checkpoint_ms`, then `more`.
    fn args(&self, tables: &str, checkpoint_ms: u32, more: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = [
            "--job.sourceMasterAddresses",
            &self.clusters.0.master_addrs_joined(),
            "--job.sinkMasterAddresses",
            &self.clusters.1.master_addrs_joined(),
            "--job.tableName",
            tables,
            "--job.createTable",
            "true",
            "--job.checkpointsDirectory",
            &self.chk().to_string_lossy(),
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            &checkpoint_ms.to_string(),
            "-p",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(more.iter().map(|s| s.to_string()));
        a
    }

    fn start(&self, tables: &str, more: &[&str]) -> FerryProcess {
        crate::ferry()
            .arg("run")
            .args(self.args(tables, 200, more))
            .free_ports()
            .start()
    }

    /// Tables `names` (3 hash tablets each) with `rows` rows, replicated
    /// by a job stopped with a savepoint; returns the savepoint.
    async fn replicated_then_stopped(&self, names: &[String], rows: i64) -> String {
        for n in names {
            create_varied_table(&self.source, n, 0).await;
            load_rows(&self.source, n, 0..rows).await;
        }
        let mut ferry = self.start(&names.join(","), &[]);
        wait_caught_up(&self.source, ferry.metrics(), names, CATCH_UP).await;
        // Drained: the savepoint is taken between windows, so the resumed
        // job's first window ends when it opens. (One holding an open
        // window resumes it with its old end, which a re-copy cannot read
        // once the history is past it: docs/operations.md.)
        ferry.stop_drained(&self.dir.path().join("sp"))
    }

    /// Keeps `table`'s history `HISTORY_S` seconds from now on.
    async fn shorten_history(&self, table: &str) {
        let t = self.source.open_table(table).await.expect("open");
        let keep = AlterTableBuilder::new()
            .set_extra_config("kudu.table.history_max_age_sec", HISTORY_S.to_string());
        self.source
            .alter_table(&t, &keep)
            .await
            .expect("shorten the history");
    }

    /// Inserts, updates and deletes on `table` for 2 s.
    async fn write_while_down(&self, table: &str, seed: u64) {
        let w = Workload::start_with(
            self.source.clone(),
            table,
            WorkloadOptions {
                ops_per_sec: 200,
                seed,
                first_id: 10_000,
                key_floor: 0,
            },
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let stats = w.stop().await;
        assert!(stats.applied > 0, "{table}: {stats:?}");
    }

    async fn assert_all_equal(&self, names: &[String]) {
        let pairs: Vec<(String, String)> = names.iter().map(|n| (n.clone(), n.clone())).collect();
        let bad = compare_all(&self.source, &self.sink, &pairs).await;
        let report: Vec<String> = bad.iter().map(|(n, d)| format!("{n}: {d}")).collect();
        assert!(report.is_empty(), "tables differ:\n{}", report.join("\n"));
    }
}

fn recopied(text: &str, table: &str) -> f64 {
    prom_sample(
        text,
        "ferry_table_tablets_recopied_total",
        "table_name",
        table,
    )
    .unwrap_or_else(|| panic!("no ferry_table_tablets_recopied_total for {table}:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_past_its_history_is_recopied_while_the_other_streams() {
    let env = Env::new();
    let names: Vec<String> = ["hx_short", "hx_long"].map(String::from).to_vec();
    let sp = env.replicated_then_stopped(&names, 400).await;
    env.shorten_history("hx_short").await;
    // Down past hx_short's history, with deletes and new rows on both.
    for (i, n) in names.iter().enumerate() {
        env.write_while_down(n, 40 + i as u64).await;
    }
    tokio::time::sleep(DOWN).await;
    let resumed = env.start("hx_short,hx_long", &["-s", &sp]);
    wait_caught_up(&env.source, resumed.metrics(), &names, CATCH_UP).await;
    env.assert_all_equal(&names).await;
    let text = resumed.metrics_text();
    assert_eq!(
        recopied(&text, "hx_short"),
        3.0,
        "each of hx_short's 3 tablets"
    );
    assert_eq!(recopied(&text, "hx_long"), 0.0, "hx_long kept its history");
    for n in &names {
        let headroom = prom_sample(
            &text,
            "ferry_table_history_headroom_seconds",
            "table_name",
            n,
        )
        .unwrap_or_else(|| panic!("no history headroom for {n}"));
        assert!(
            headroom > 600_000.0,
            "{n}: the default 7 days minus a lag: {headroom}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recopy_killed_midway_is_finished_by_the_restarted_job() {
    let env = Env::new();
    let names = vec!["hk".to_string()];
    let sp = env.replicated_then_stopped(&names, 40_000).await;
    env.shorten_history("hk").await;
    env.write_while_down("hk", 50).await;
    tokio::time::sleep(DOWN).await;
    // Tiny scan batches (the re-copy takes ~300) and a checkpoint every
    // 50 ms; the job dies at the 100th batch, like kill -9.
    let small = ["-s", &sp, "--reader.batchSizeBytes", "1024"];
    let mut doomed = crate::ferry()
        .arg("run")
        .args(env.args("hk", 50, &small))
        .env(ferry_engine::failpoint::ENV, "recopy.batch@100")
        .free_ports()
        .start();
    let status = doomed.wait_exit(CATCH_UP);
    let err = doomed.stderr_text();
    assert!(
        err.contains("failpoint 'recopy.batch' hit"),
        "{status:?}\n{err}"
    );
    let newest = crate::newest_checkpoint(&env.chk(), &doomed.job_id()).await;
    let resumed_midway = split_progress(&env.chk(), &newest).await;
    assert!(
        resumed_midway > 0,
        "the newest checkpoint records no re-copy part-way done"
    );
    let restarted = env.start("hk", &["-s", &newest, "--reader.batchSizeBytes", "1024"]);
    wait_caught_up(&env.source, restarted.metrics(), &names, CATCH_UP).await;
    env.assert_all_equal(&names).await;
    let text = restarted.metrics_text();
    assert!(
        recopied(&text, "hk") >= 1.0,
        "the restarted job went on re-copying"
    );
}

/// Splits of the open window that `checkpoint` records part-way done.
async fn split_progress(chk: &Path, checkpoint: &str) -> usize {
    use ferry_engine::checkpoint::{CheckpointStore, StorageLocation};
    let store = CheckpointStore::open_local(
        &StorageLocation::local(chk).expect("loc"),
        std::num::NonZeroUsize::MIN,
    );
    let state = store.load(checkpoint).await.expect("load").state;
    state
        .tables
        .iter()
        .flat_map(|t| t.pending.iter().chain(&t.unassigned))
        .filter(|s| s.resume_key.is_some())
        .count()
}
