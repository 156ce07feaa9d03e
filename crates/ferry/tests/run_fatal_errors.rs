//! `ferry run` against a real cluster: fatal problems stop the job with exit
//! code 1 and a message that says what to do; `job.createTable` creates the
//! sink table (here on the same cluster, told apart by `job.tableSuffix`).

use ferry_testkit::MiniCluster;
use kudu_client::{KuduClient, TableBuilder};
use std::process::{Command, Stdio};
use std::time::Duration;

fn ferry(masters: &str, table: &str, chk: &std::path::Path, extra: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
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
        .env("FERRY_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ferry")
}

fn finish(child: std::process::Child) -> (i32, String) {
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn fatal_errors_and_create_table() {
    let c = MiniCluster::builder().tservers(1).start().expect("cluster");
    let masters = c.master_addrs_joined();
    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");

    let (code, err) = finish(ferry(&masters, "no_such_table", &chk, &[]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no_such_table"), "{err}");

    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let schema = ferry_fixtures::small_schema();
    client
        .create_table(
            &TableBuilder::new("src", schema)
                .add_hash_partitions(&["id"], 2, 0)
                .num_replicas(1),
        )
        .await
        .expect("create");

    // The sink table (src_copy) does not exist and createTable is off.
    let (code, err) = finish(ferry(
        &masters,
        "src",
        &chk,
        &["--job.tableSuffix", "_copy"],
    ));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("src_copy") && err.contains("--job.createTable true"),
        "{err}"
    );

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
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = child.wait().expect("wait");
    assert!(
        status.success(),
        "SIGTERM without --savepointPath cancels cleanly: {status:?}"
    );
    let copy = client.open_table("src_copy").await.expect("open copy");
    assert_eq!(copy.partition_schema().hash_schema()[0].num_buckets(), 2);

    // With --savepointPath, SIGTERM stops with a savepoint like `flink stop`.
    let sp = dir.path().join("savepoints");
    let child = ferry(
        &masters,
        "src",
        &chk,
        &[
            "--job.tableSuffix",
            "_copy",
            "--savepointPath",
            &sp.to_string_lossy(),
        ],
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
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
