//! The write guard against a real cluster: while ferry replicates a busy
//! source, its own writes to the sink raise nothing; rows written to the
//! sink table directly are counted as foreign writes
//! (`ferry_sink_foreign_writes_total`, `…_suspected`, and `kudu.
//! sink_foreign_writes` in `/ferry/jobs/:id/live`).

use ferry_fixtures::http::{get_json, http};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, KuduTable, TableBuilder};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FOREIGN: u64 = 7;

fn scrape(port: u16, name: &str) -> Option<f64> {
    let (status, body) = http("GET", port, "/metrics", None);
    assert_eq!(status, 200);
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains("table_name=\"g_copy\""))
        .find_map(|l| l.rsplit_once(' ')?.1.parse().ok())
}

async fn upsert(client: &KuduClient, table: &KuduTable, ids: impl Iterator<Item = i64>, v: &str) {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for id in ids {
        let mut r = table.new_row();
        r.set_i64("id", id).expect("id");
        r.set_str("v", v).expect("v");
        s.apply(Operation::upsert(table, r)).await.expect("apply");
    }
    s.flush().await.expect("flush");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_writes_to_the_sink_are_foreign_and_ferrys_own_are_not() {
    // The cluster the binary's tests share: tables of their own (the
    // guard counts per sink table).
    let cluster = tokio::task::block_in_place(crate::cluster);
    let masters = cluster.master_addrs_joined();
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let b = TableBuilder::new("g", ferry_fixtures::small_schema())
        .add_hash_partitions(&["id"], 3, 0)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
    let source = client.open_table("g").await.expect("open");
    upsert(&client, &source, 0..2_000, "initial").await;

    let dir = tempfile::tempdir().expect("tmp");
    let mut ferry = crate::ferry()
        .args([
            "run",
            "--job.sourceMasterAddresses",
            &masters,
            "--job.sinkMasterAddresses",
            &masters,
            "--job.tableName",
            "g",
            "--job.tableSuffix",
            "_copy",
            "--job.createTable",
            "true",
            "--job.checkpointsDirectory",
            &dir.path().join("chk").to_string_lossy(),
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "300",
            "--metrics.kudu.pollIntervalMillis",
            "300",
            "-p",
            "2",
        ])
        .free_ports()
        .start();
    let id = ferry.job_id();
    let (rest, metrics) = (ferry.rest(), ferry.metrics());
    let guard = |live: &serde_json::Value| live["kudu"]["sink_foreign_writes"].clone();

    // A writer keeps the source (and so ferry's writes to the sink) busy.
    let running = Arc::new(AtomicBool::new(true));
    let writer = {
        let (client, table, running) = (client.clone(), source.clone(), running.clone());
        tokio::spawn(async move {
            let mut n = 0i64;
            while running.load(Ordering::Relaxed) {
                upsert(
                    &client,
                    &table,
                    (0..50).map(|i| (n * 50 + i) % 3_000),
                    &format!("v{n}"),
                )
                .await;
                n += 1;
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        })
    };
    // Ferry's own writes, over many polls: nothing foreign.
    let started = Instant::now();
    let mut polls = 0;
    while started.elapsed() < Duration::from_secs(8) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let live = get_json(rest, &format!("/ferry/jobs/{id}/live"));
        assert_eq!(
            guard(&live)["total"],
            0,
            "ferry's own writes counted: {live}"
        );
        assert_eq!(guard(&live)["suspected"], false, "{live}");
        polls = guard(&live)["polls"].as_u64().unwrap_or(0);
    }
    assert!(polls >= 5, "the sink was polled {polls} times");
    let upserted = get_json(rest, &format!("/ferry/jobs/{id}/live"))["totals"]["rows_upserted"]
        .as_u64()
        .unwrap_or(0);
    assert!(upserted > 2_000, "ferry wrote only {upserted} rows");
    assert_eq!(
        scrape(metrics, "ferry_sink_foreign_writes_total"),
        Some(0.0)
    );
    assert_eq!(
        scrape(metrics, "ferry_sink_foreign_writes_suspected"),
        Some(0.0)
    );

    // Rows written to the sink table directly, while ferry keeps writing.
    let sink = client.open_table("g_copy").await.expect("open sink");
    upsert(
        &client,
        &sink,
        (0..FOREIGN as i64).map(|i| 1_000_000 + i),
        "foreign",
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let live = loop {
        let live = get_json(rest, &format!("/ferry/jobs/{id}/live"));
        if guard(&live)["total"].as_u64() >= Some(FOREIGN) {
            break live;
        }
        assert!(Instant::now() < deadline, "foreign writes not seen: {live}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(guard(&live)["total"], FOREIGN, "{live}");
    assert_eq!(guard(&live)["suspected"], true, "{live}");
    assert_eq!(
        scrape(metrics, "ferry_sink_foreign_writes_suspected"),
        Some(1.0)
    );
    // Ferry's writes after them add nothing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        scrape(metrics, "ferry_sink_foreign_writes_total"),
        Some(FOREIGN as f64)
    );

    running.store(false, Ordering::Relaxed);
    writer.await.expect("writer");
    ferry.kill9();
}
