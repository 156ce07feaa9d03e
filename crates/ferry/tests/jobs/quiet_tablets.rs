//! Quiet tablets (issue 16): a diff window leaves out the tablets whose
//! write counters prove them unchanged, and that must never cost a change.
//! A table of two range tablets ("A": ids below 1 000 000, "B": the rest,
//! one replica each) is written to through one tablet at a time while
//! `ferry run` replicates it with one-second windows:
//!
//! 1. changes to A only, for many windows (B is skipped: asserted on the
//!    skip counter), then to B, with `kill -9` of ferry right after and
//!    more changes to B while it is down, then A only again;
//! 2. changes to B, then at once `kill -9` of the tablet server that hosts
//!    B and a restart (its counters start over) while ferry runs.
//!
//! After each phase the sink equals the source row by row.

use std::time::Duration;

use ferry_fixtures::live::{prom_sample, wait_caught_up, wait_for};
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::{key, nullable};
use ferry_testkit::cluster::{DaemonKind, MiniCluster};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{DataType, KuduClient, KuduTable, Schema, TableBuilder};

const TABLE: &str = "quiet";
/// The first id of tablet B.
const B: i64 = 1_000_000;
const SKIPPED: &str = "ferry_table_tablet_scans_skipped_total";

fn schema() -> Schema {
    Schema::new(vec![
        key("id", DataType::Int64),
        nullable("v", DataType::Int64),
    ])
    .expect("schema")
}

async fn create(client: &KuduClient) -> KuduTable {
    let schema = schema();
    let mut split = kudu_client::Row::new(&schema);
    split.set_i64("id", B).expect("split");
    let b = TableBuilder::new(TABLE, schema)
        .set_range_partition_columns(&["id"])
        .add_split_row(split)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
    client.open_table(TABLE).await.expect("open")
}

/// Upserts `v = round` for ids `first..first + n` and deletes every
/// seventh of them: inserts, updates and deletes in one tablet.
async fn change(client: &KuduClient, table: &KuduTable, first: i64, n: i64, round: i64) {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for id in first..first + n {
        let mut r = table.new_row();
        r.set_i64("id", id).expect("id");
        r.set_i64("v", round).expect("v");
        s.apply(Operation::upsert(table, r)).await.expect("upsert");
    }
    for id in (first..first + n).step_by(7) {
        let mut r = table.new_row();
        r.set_i64("id", id + round % 7).expect("id");
        s.apply(Operation::delete_ignore(table, r))
            .await
            .expect("delete");
    }
    s.flush().await.expect("flush");
}

fn skipped(ferry: &FerryProcess) -> f64 {
    prom_sample(&ferry.metrics_text(), SKIPPED, "table_name", TABLE).unwrap_or(0.0)
}

/// Keeps changing tablet A for `windows` seconds (ferry's windows last
/// one second) while B stays quiet.
async fn only_a(client: &KuduClient, table: &KuduTable, windows: u64, round: &mut i64) {
    for _ in 0..windows * 4 {
        *round += 1;
        change(client, table, (*round % 50) * 20, 20, *round).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn start(src: &str, dst: &str, chk: &std::path::Path, resume: Option<&str>) -> FerryProcess {
    let mut args: Vec<String> = [
        "--job.sourceMasterAddresses",
        src,
        "--job.sinkMasterAddresses",
        dst,
        "--job.tableName",
        TABLE,
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        &chk.to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "400",
        // Never forced: every skip here rests on the counters' proof.
        "--reader.quietTabletMaxSkips",
        "1000000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(path) = resume {
        args.extend(["-s".to_string(), path.to_string()]);
    }
    crate::ferry().arg("run").args(args).free_ports().start()
}

async fn assert_equal(source: &KuduClient, sink: &KuduClient, ferry: &FerryProcess, what: &str) {
    wait_caught_up(
        source,
        ferry.metrics(),
        &[TABLE.to_string()],
        Duration::from_secs(90),
    )
    .await;
    let diff = ferry_fixtures::compare::compare_tables(source, sink, TABLE, TABLE).await;
    assert!(diff.is_equal(), "{what}: {diff}");
}

/// The tablet server index that hosts the tablet of `id`.
async fn host_of(client: &KuduClient, table: &KuduTable, cluster: &MiniCluster, id: i64) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let tablets = client
        .tablets_in_range(table, &[], &[], deadline)
        .await
        .expect("tablets");
    // Range-partitioned on id alone: the tablet whose start is at or
    // below the key (partition keys sort like the ids).
    let tablet = if id >= B { &tablets[1] } else { &tablets[0] };
    let addr = &tablet.leader().expect("a leader").addr;
    (0..3)
        .find(|&i| {
            cluster
                .daemon(DaemonKind::TabletServer, i)
                .is_ok_and(|d| &d.rpc_addr == addr)
        })
        .expect("the tablet's server is in the cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postponed_tablets_lose_no_change_through_crashes_and_counter_resets() {
    let (mut src, dst) = ferry_fixtures::two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let table = create(&source).await;
    change(&source, &table, 0, 500, 0).await;
    change(&source, &table, B, 500, 0).await;
    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let (s, d) = (src.master_addrs_joined(), dst.master_addrs_joined());
    let mut round = 0;

    // Phase 1: A only for a while; B must be skipped (proven quiet).
    let mut ferry = start(&s, &d, &chk, None);
    only_a(&source, &table, 6, &mut round).await;
    let before_b = wait_for("B to be skipped", Duration::from_secs(30), || async {
        let n = skipped(&ferry);
        (n >= 3.0).then_some(n)
    })
    .await;
    // Changes to B, a crash of ferry while they may be pending, more
    // changes to B while it is down.
    round += 1;
    change(&source, &table, B + 100, 200, round).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resume = crate::newest_checkpoint(&chk, &ferry.job_id()).await;
    ferry.kill9();
    round += 1;
    change(&source, &table, B + 250, 200, round).await;
    let mut ferry = start(&s, &d, &chk, Some(&resume));
    only_a(&source, &table, 5, &mut round).await;
    assert_equal(&source, &sink, &ferry, "after the crash").await;
    let after = wait_for("B to be skipped again", Duration::from_secs(30), || async {
        let n = skipped(&ferry);
        (n >= 3.0).then_some(n)
    })
    .await;
    eprintln!("phase 1: {before_b} tablet scans skipped before the crash, {after} after");

    // Phase 2: changes to B, then B's tablet server crashes and restarts
    // (its counters start over) before or while ferry reads them.
    let host = host_of(&source, &table, &src, B).await;
    round += 1;
    change(&source, &table, B + 50, 300, round).await;
    src.kill(DaemonKind::TabletServer, host)
        .expect("kill tserver");
    src.start(DaemonKind::TabletServer, host)
        .expect("restart tserver");
    round += 1;
    change(&source, &table, B + 400, 50, round).await;
    only_a(&source, &table, 5, &mut round).await;
    assert_equal(&source, &sink, &ferry, "after the tablet server restart").await;
    let last = skipped(&ferry);
    assert!(
        last > after,
        "quiet tablets are skipped again after the restart ({after} → {last})"
    );
    ferry.kill9();
}
