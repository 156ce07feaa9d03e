//! Crash loop: `ferry run` is killed with SIGKILL ten times at random
//! moments (during the snapshot and during diff windows) while changes keep
//! flowing, and restarted each time from its newest complete checkpoint.
//! At the end the sink equals the source row by row.

use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, KuduClient, KuduTable, Schema, TableBuilder};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

const TABLE: &str = "crashy";

fn schema() -> Schema {
    Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()
            .expect("id"),
        ColumnSchema::builder("v", DataType::Int64)
            .nullable(true)
            .build()
            .expect("v"),
        ColumnSchema::builder("s", DataType::String)
            .nullable(true)
            .build()
            .expect("s"),
    ])
    .expect("schema")
}

async fn create(client: &KuduClient) -> KuduTable {
    let b = TableBuilder::new(TABLE, schema())
        .add_hash_partitions(&["id"], 6, 0)
        .num_replicas(3);
    client.create_table(&b).await.expect("create");
    client.open_table(TABLE).await.expect("open")
}

fn row(table: &KuduTable, id: i64, v: Option<i64>) -> kudu_client::Row {
    let mut r = table.new_row();
    r.set_i64("id", id).expect("id");
    match v {
        Some(v) => {
            r.set_i64("v", v).expect("v");
            r.set_str("s", &format!("value {v}")).expect("s");
        }
        None => {
            r.set_null("v").expect("v");
        }
    }
    r
}

/// `ferry run` (from `resume` if given) and its job id.
fn start_ferry(
    src: &str,
    dst: &str,
    chk: &std::path::Path,
    resume: Option<&str>,
) -> (FerryProcess, JobId) {
    let mut cmd = crate::ferry().args([
        "run",
        "--job.sourceMasterAddresses",
        src,
        "--job.sinkMasterAddresses",
        dst,
        "--job.tableName",
        TABLE,
        "--job.checkpointsDirectory",
        &chk.to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
        "--reader.batchSizeBytes",
        "65536",
        "-p",
        "3",
    ]);
    if let Some(path) = resume {
        cmd = cmd.args(["-s", path]);
    }
    let ferry = cmd.free_ports().start();
    let id = ferry.job_id();
    let job_id: JobId = id.parse().unwrap_or_else(|_| panic!("no job id: {id:?}"));
    (ferry, job_id)
}

/// Returns once the newest complete checkpoint is inside the snapshot with
/// splits still to copy.
async fn wait_for_mid_snapshot_checkpoint(store: &CheckpointStore, job_id: &JobId) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            Instant::now() < deadline,
            "no checkpoint inside the snapshot within 90 s"
        );
        let latest = store.latest_complete(job_id).await.expect("list");
        if let Some(w) = latest.checkpoint.as_ref().and_then(|c| {
            let in_progress = !c.state.pending.is_empty() || !c.state.unassigned.is_empty();
            c.state.window.clone().filter(|_| in_progress)
        }) {
            assert!(
                w.is_snapshot(),
                "the snapshot ended before a checkpoint inside it: load more rows"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_kill_9_restarts_lose_nothing() {
    let (src, dst) = ferry_fixtures::two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let table = create(&source).await;
    create(&sink).await;
    // Large enough that the snapshot takes a moment to copy.
    let mut session = source
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for id in 0..150_000 {
        session
            .apply(Operation::insert(&table, row(&table, id, Some(id))))
            .await
            .expect("load");
    }
    session.flush().await.expect("flush");

    // Changes flow during the whole crash loop: new keys above the load,
    // upserts, updates and deletes anywhere.
    let churn = Workload::start_with(
        source.clone(),
        TABLE,
        WorkloadOptions {
            ops_per_sec: 2_000,
            seed: 11,
            first_id: 150_000,
            key_floor: 0,
        },
    );

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let store = CheckpointStore::open_local(
        &StorageLocation::local(&chk).expect("loc"),
        NonZeroUsize::MIN,
    );
    let (src_addrs, dst_addrs) = (src.master_addrs_joined(), dst.master_addrs_joined());
    let mut rng = StdRng::seed_from_u64(42);
    let mut resume: Option<String> = None;
    let mut restored_mid_snapshot = false;
    let mut restored_mid_diff = false;
    for i in 0..10 {
        let (mut f, job_id) = start_ferry(&src_addrs, &dst_addrs, &chk, resume.as_deref());
        if i == 0 {
            // The first kill waits for a checkpoint taken inside the
            // snapshot: a random moment misses it on a loaded machine.
            wait_for_mid_snapshot_checkpoint(&store, &job_id).await;
        } else {
            // Random moments: the snapshot's remainder, then diff windows.
            let wait = if i < 3 {
                rng.gen_range(150..600)
            } else {
                rng.gen_range(300..2500)
            };
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        f.kill9();
        let latest = store
            .latest_complete(&job_id)
            .await
            .expect("list checkpoints");
        if let Some(c) = latest.checkpoint {
            let in_progress = !c.state.pending.is_empty() || !c.state.unassigned.is_empty();
            match c.state.window {
                Some(w) if w.is_snapshot() && in_progress => restored_mid_snapshot = true,
                Some(w) if !w.is_snapshot() && in_progress => restored_mid_diff = true,
                _ => {}
            }
            resume = Some(c.location.to_uri());
        }
    }
    let stats = churn.stop().await;
    assert_eq!(stats.failed, 0, "the source has no fault: {stats:?}");
    let ops = stats.applied;
    assert!(ops > 1_000, "changes flowed: {stats:?}");
    assert!(
        restored_mid_snapshot,
        "at least one kill landed inside the snapshot"
    );

    // A last run catches up; wait for a window that ends after the churn.
    let stopped_at = source.server_clock().await.expect("clock");
    let (mut f, job_id) = start_ferry(&src_addrs, &dst_addrs, &chk, resume.as_deref());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "the final run never caught up");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let latest = store.latest_complete(&job_id).await.expect("list");
        let caught_up = latest.checkpoint.is_some_and(|c| {
            c.state
                .last_end_timestamp
                .is_some_and(|t| t.raw() > stopped_at.raw())
        });
        if caught_up {
            break;
        }
    }
    f.kill9();
    let diff = ferry_fixtures::compare::compare_tables(&source, &sink, TABLE, TABLE).await;
    assert!(diff.is_equal(), "{diff}");
    eprintln!("crash loop: {ops} changes, resumed mid-snapshot: {restored_mid_snapshot}, mid-diff: {restored_mid_diff}");
}
