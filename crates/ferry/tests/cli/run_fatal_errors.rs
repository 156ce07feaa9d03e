//! `ferry run` against a real cluster: fatal problems stop the job with exit
//! code 1 and a message that says what to do; `job.createTable` creates the
//! sink table (here on the same cluster, told apart by `job.tableSuffix`);
//! SIGTERM cancels, or stops with a savepoint when there is a savepoint path.

use crate::cluster;
use ferry_fixtures::process::FerryProcess;
use kudu_client::{KuduClient, TableBuilder};
use std::time::Duration;

fn ferry(masters: &str, table: &str, chk: &std::path::Path, extra: &[&str]) -> FerryProcess {
    crate::ferry()
        .args([
            "run",
            "--job.sourceMasterAddresses",
            masters,
            "--job.sinkMasterAddresses",
            masters,
            "--job.tableName",
            table,
            "--job.checkpointsDirectory",
            &chk.to_string_lossy(),
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "500",
        ])
        .args(extra)
        .free_ports()
        .spawn()
}

fn finish(mut ferry: FerryProcess) -> (i32, String) {
    let status = ferry.wait_exit(Duration::from_secs(120));
    (status.code().unwrap_or(-1), ferry.stderr_text())
}

/// Creates the small table `name` (2 hash buckets, 1 replica).
async fn create_small(client: &KuduClient, name: &str) {
    client
        .create_table(
            &TableBuilder::new(name, ferry_fixtures::small_schema())
                .add_hash_partitions(&["id"], 2, 0)
                .num_replicas(1),
        )
        .await
        .expect("create");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_source_table_is_fatal_and_named() {
    let c = cluster();
    let masters = c.master_addrs_joined();
    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");

    let (code, err) = finish(ferry(&masters, "no_such_table", &chk, &[]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no_such_table"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_sink_without_create_table_is_fatal_and_says_how_to_fix_it() {
    let c = cluster();
    let masters = c.master_addrs_joined();
    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    create_small(&client, "nosink").await;

    // The sink table (nosink_copy) does not exist and createTable is off.
    let (code, err) = finish(ferry(
        &masters,
        "nosink",
        &chk,
        &["--job.tableSuffix", "_copy"],
    ));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("nosink_copy") && err.contains("--job.createTable true"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn create_table_makes_the_sink_and_sigterm_cancels_cleanly() {
    let c = cluster();
    let masters = c.master_addrs_joined();
    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    create_small(&client, "src").await;

    // With createTable the job creates it and keeps running until stopped.
    let mut child = ferry(
        &masters,
        "src",
        &chk,
        &["--job.tableSuffix", "_copy", "--job.createTable", "true"],
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !client.table_exists("src_copy").await.expect("list") {
        assert!(
            std::time::Instant::now() < deadline,
            "sink table never created"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    child.sigterm();
    let status = child.wait_exit(Duration::from_secs(60));
    assert!(
        status.success(),
        "SIGTERM without --savepointPath cancels cleanly: {status:?}"
    );
    let copy = client.open_table("src_copy").await.expect("open copy");
    assert_eq!(copy.partition_schema().hash_schema()[0].num_buckets(), 2);
}

/// Like `flink stop`.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_with_a_savepoint_path_stops_with_a_savepoint() {
    let c = cluster();
    let masters = c.master_addrs_joined();
    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    create_small(&client, "sp").await;
    create_small(&client, "sp_copy").await;

    // With --savepointPath, SIGTERM stops with a savepoint like `flink stop`.
    let sp = dir.path().join("savepoints");
    let mut child = ferry(
        &masters,
        "sp",
        &chk,
        &[
            "--job.tableSuffix",
            "_copy",
            "--savepointPath",
            &sp.to_string_lossy(),
        ],
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    child.sigterm();
    let status = child.wait_exit(Duration::from_secs(60));
    let stdout = child.stdout_text();
    assert!(status.success(), "{stdout} {}", child.stderr_text());
    let path = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Savepoint completed. Path: "))
        .unwrap_or_else(|| panic!("no savepoint line in {stdout}"));
    let path = path.trim().trim_start_matches("file://");
    assert!(
        std::path::Path::new(path).join("_metadata").is_file(),
        "{path}"
    );
}
