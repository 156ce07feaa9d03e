//! Live tables through the `ferry` binary against two real clusters
//! (issue 13): one job replicating twenty tables picked by
//! `job.tablePattern` while tables come and go; a job of a list of tables
//! stopped with a savepoint and resumed; a source table renamed while it
//! is replicated, and a savepoint refused on a re-created table of the
//! same name.

use std::sync::Arc;
use std::time::Duration;

use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::live::{
    compare_all, create_varied_table, create_varied_tables, load_rows, prom_label_values,
    prom_sample, wait_caught_up,
};
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use ferry_testkit::MiniCluster;
use kudu_client::KuduClient;

/// Bound on waiting for a job to catch up (a hang, not a timing check).
const CATCH_UP: Duration = Duration::from_secs(90);

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
    /// `ferry run`'s options shared by the tests (short intervals), then
    /// `more`.
    fn args(&self, more: &[&str]) -> Vec<String> {
        let chk = self.dir.path().join("chk");
        let mut a: Vec<String> = [
            "--job.sourceMasterAddresses",
            &self.clusters.0.master_addrs_joined(),
            "--job.sinkMasterAddresses",
            &self.clusters.1.master_addrs_joined(),
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
            "3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(more.iter().map(|s| s.to_string()));
        a
    }

    fn start(&self, more: &[&str]) -> FerryProcess {
        crate::ferry()
            .arg("run")
            .args(self.args(more))
            .free_ports()
            .start()
    }
}

fn same_names(names: &[String]) -> Vec<(String, String)> {
    names.iter().map(|n| (n.clone(), n.clone())).collect()
}

async fn assert_all_equal(env: &Env, names: &[String]) {
    let bad = compare_all(&env.source, &env.sink, &same_names(names)).await;
    let report: Vec<String> = bad.iter().map(|(n, d)| format!("{n}: {d}")).collect();
    assert!(report.is_empty(), "tables differ:\n{}", report.join("\n"));
}

fn writer(env: &Env, table: &str, seed: u64) -> Workload {
    Workload::start_with(
        env.source.clone(),
        table,
        WorkloadOptions {
            ops_per_sec: 100,
            seed,
            first_id: 10_000,
            key_floor: 0,
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_tables_by_pattern_with_tables_created_and_dropped() {
    let env = env();
    let mut names = create_varied_tables(&env.source, "lt_", 20).await;
    for n in &names {
        load_rows(&env.source, n, 0..200).await;
    }
    // A table the pattern must not take (the match is on the whole name).
    create_varied_table(&env.source, "xlt_00", 0).await;
    let mut ferry = env.start(&["--job.tablePattern", "lt_.*"]);
    let writers: Vec<Workload> = names[..4]
        .iter()
        .enumerate()
        .map(|(i, n)| writer(&env, n, i as u64))
        .collect();
    wait_caught_up(&env.source, ferry.metrics(), &names, CATCH_UP).await;

    // A new matching table mid-run, and a source table dropped.
    create_varied_table(&env.source, "lt_20", 3).await;
    load_rows(&env.source, "lt_20", 0..150).await;
    names.push("lt_20".to_string());
    env.source.delete_table("lt_07").await.expect("drop lt_07");
    names.retain(|n| n != "lt_07");
    tokio::time::sleep(Duration::from_secs(2)).await;
    for w in writers {
        let stats = w.stop().await;
        assert!(stats.applied > 0, "the writer wrote: {stats:?}");
    }
    wait_caught_up(&env.source, ferry.metrics(), &names, CATCH_UP).await;
    ferry.assert_running("when a table was dropped");
    assert_all_equal(&env, &names).await;
    assert!(
        !env.sink.table_exists("xlt_00").await.expect("exists"),
        "a table outside the pattern was replicated"
    );

    let text = ferry.metrics_text();
    let labelled = prom_label_values(&text, "ferry_table_lag_seconds", "table_name");
    for n in &names {
        assert!(
            labelled.contains(n),
            "no ferry_table_lag_seconds for {n}: {labelled:?}"
        );
        assert!(
            prom_sample(
                &text,
                "ferry_table_last_end_timestamp_seconds",
                "table_name",
                n
            )
            .is_some(),
            "no ferry_table_last_end_timestamp_seconds for {n}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_of_tables_resumes_from_a_savepoint() {
    let env = env();
    let names: Vec<String> = ["ml_a", "ml_b", "ml_c"].map(String::from).to_vec();
    for (i, n) in names.iter().enumerate() {
        create_varied_table(&env.source, n, i + 1).await;
        load_rows(&env.source, n, 0..300).await;
    }
    let mut ferry = env.start(&["--job.tableName", "ml_a,ml_b,ml_c"]);
    wait_caught_up(&env.source, ferry.metrics(), &names, CATCH_UP).await;
    assert_all_equal(&env, &names).await;
    let sp = ferry.stop_with_savepoint(&env.dir.path().join("sp"));

    // Changes while no job runs: new rows, rewritten rows.
    for n in &names {
        load_rows(&env.source, n, 250..600).await;
    }
    let ferry = env.start(&["--job.tableName", "ml_a,ml_b,ml_c", "-s", &sp]);
    wait_caught_up(&env.source, ferry.metrics(), &names, CATCH_UP).await;
    assert_all_equal(&env, &names).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_source_table_is_followed_and_a_recreated_one_refused() {
    let env = env();
    create_varied_table(&env.source, "rn_src", 0).await;
    load_rows(&env.source, "rn_src", 0..200).await;
    let mut ferry = env.start(&["--job.tableName", "rn_src"]);
    let w = writer(&env, "rn_src", 7);
    wait_caught_up(
        &env.source,
        ferry.metrics(),
        &["rn_src".to_string()],
        CATCH_UP,
    )
    .await;

    let t = env.source.open_table("rn_src").await.expect("open");
    env.source
        .rename_table(&t, "rn_new")
        .await
        .expect("rename the source table");
    // Rows written after the rename, under the new name.
    load_rows(&env.source, "rn_new", 5_000..5_200).await;
    let stats = w.stop().await;
    assert!(stats.applied > 0, "{stats:?}");
    let renamed = vec!["rn_new".to_string()];
    wait_caught_up(&env.source, ferry.metrics(), &renamed, CATCH_UP).await;
    ferry.assert_running("on a rename");
    // The sink keeps its name (job.renameSinkTable is false).
    let diff = compare_tables(&env.source, &env.sink, "rn_new", "rn_src").await;
    assert!(diff.is_equal(), "{diff}");
    let labels = prom_label_values(
        &ferry.metrics_text(),
        "ferry_table_last_end_timestamp_seconds",
        "table_name",
    );
    assert!(
        labels.contains(&"rn_new".to_string()) && !labels.contains(&"rn_src".to_string()),
        "metrics show the current name: {labels:?}"
    );
    // So do the REST API's (and the web page's) table rows.
    let (status, body) = ferry.http("GET", &format!("/ferry/jobs/{}/live", ferry.job_id()), None);
    assert_eq!(status, 200, "{body}");
    let live: serde_json::Value = serde_json::from_str(&body).expect("live JSON");
    let rows: Vec<(&str, &str)> = live["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| {
            (
                t["tableName"].as_str().unwrap_or(""),
                t["sinkTable"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(rows, [("rn_new", "rn_src")], "REST shows the current name");

    // A different table under the same name is not the savepoint's table.
    let sp = ferry.stop_with_savepoint(&env.dir.path().join("sp"));
    env.source.delete_table("rn_new").await.expect("drop");
    create_varied_table(&env.source, "rn_new", 0).await;
    load_rows(&env.source, "rn_new", 0..10).await;
    let mut again = env.start(&["--job.tableName", "rn_new", "-s", &sp]);
    let status = again.wait_exit(Duration::from_secs(60));
    let err = again.stderr_text();
    assert_eq!(status.code(), Some(1), "a fatal error: {status:?}\n{err}");
    assert!(err.contains("rn_new"), "the message names the table: {err}");
    assert!(
        err.to_lowercase().contains("savepoint"),
        "the message says what to do about the savepoint: {err}"
    );
    // Nothing was written to the sink for the new table.
    let sink_rows = ferry_fixtures::read_all(&env.sink, "rn_src").await;
    assert!(sink_rows.contains_key(&5_100), "the old rows stay");
}
