//! `ferry run` with the keys that change how rows are read and written
//! (`reader.prefetching`, `writer.flushMode=MANUAL_FLUSH` with a buffer far
//! smaller than a scan batch) replicates a table completely on a real
//! cluster, snapshot and diff windows alike.

use ferry_fixtures::process::FerryProcess;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, KuduTable, TableBuilder};
use std::time::{Duration, Instant};

async fn upsert(client: &KuduClient, table: &KuduTable, ids: std::ops::Range<i64>) {
    let options = SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground);
    let mut session = client.new_session_with(options).expect("session");
    for id in ids {
        let mut row = table.new_row();
        row.set_i64("id", id).expect("id");
        row.set_str("v", &format!("value-{id}")).expect("v");
        session
            .apply(Operation::upsert(table, row))
            .await
            .expect("apply");
    }
    session.close().await.expect("flush");
}

async fn count(client: &KuduClient, name: &str) -> usize {
    let Ok(table) = client.open_table(name).await else {
        return 0;
    };
    let mut scanner = client.scan_builder(&table).build().expect("scanner");
    let mut rows = 0;
    while let Some(batch) = scanner.next_batch().await.expect("scan") {
        rows += batch.len();
    }
    rows
}

async fn wait_for_rows(client: &KuduClient, name: &str, n: usize, ferry: &mut FerryProcess) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        ferry.assert_running("early");
        let rows = count(client, name).await;
        if rows == n {
            return;
        }
        assert!(Instant::now() < deadline, "{rows} of {n} rows in {name}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetching_and_manual_flush_replicate_everything() {
    // The cluster the binary's tests share: tables of their own.
    let c = crate::cluster();
    let masters = c.master_addrs_joined();
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let schema = ferry_fixtures::small_schema();
    client
        .create_table(
            &TableBuilder::new("keys_src", schema)
                .add_hash_partitions(&["id"], 2, 0)
                .num_replicas(1),
        )
        .await
        .expect("create");
    let src = client.open_table("keys_src").await.expect("open");
    upsert(&client, &src, 0..5000).await;

    let dir = tempfile::tempdir().expect("tmp");
    let mut ferry = crate::ferry()
        .args([
            "run",
            "--job.sourceMasterAddresses",
            &masters,
            "--job.sinkMasterAddresses",
            &masters,
            "--job.tableName",
            "keys_src",
            "--job.tableSuffix",
            "_copy",
            "--job.createTable",
            "--job.checkpointsDirectory",
            &dir.path().join("chk").to_string_lossy(),
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "300",
            "--reader.prefetching",
            "--reader.batchSizeBytes=16384",
            "--writer.flushMode",
            "MANUAL_FLUSH",
            "--writer.maxBufferSize",
            "50",
            "--rest.port=0",
            "-Dmetrics.port=0",
            "-p",
            "2",
        ])
        .spawn();
    wait_for_rows(&client, "keys_src_copy", 5000, &mut ferry).await;
    // Diff windows too.
    upsert(&client, &src, 5000..6500).await;
    wait_for_rows(&client, "keys_src_copy", 6500, &mut ferry).await;
    ferry.kill9();
}
