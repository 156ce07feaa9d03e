//! The replication job between two real Kudu clusters: snapshot of every
//! column type, continuous random changes, stop with savepoint and resume
//! without a new snapshot, tablet server restarts on both sides, and the
//! window metrics.

use crate::common::*;
use ferry_engine::checkpoint::CheckpointStore;
use ferry_engine::JobStatus;
use ferry_testkit::{DaemonKind, MiniCluster};
use kudu_client::KuduClient;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn snapshot_copies_every_type() {
    let (src, dst) = two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let table = create_table(&source, TABLE).await;
    create_table(&sink, TABLE).await;
    load(&source, &table, 100_000, 1).await;

    let dir = tempfile::tempdir().expect("tmp");
    let cfg = job_config(&src, &dst, &dir.path().join("chk"), 1, &[]);
    let job = start_job(&cfg, None, None, 2).await;
    wait_windows(&job, 1, Duration::from_secs(120)).await;
    let m = job.metrics().snapshot();
    assert!(m.rows_read >= 100_000, "{m:?}");
    assert!(m.last_end_timestamp_ms > 0);
    let n = assert_same(&source, &sink, TABLE).await;
    assert_eq!(n, 100_000);
    job.cancel().await;
    assert_eq!(job.wait().await, JobStatus::Canceled);
    // Cancel keeps the checkpoints.
    let chk = dir.path().join("chk").join(job.job_id().to_string());
    let kept = std::fs::read_dir(&chk).expect("checkpoints kept").count();
    assert!(
        (1..=3).contains(&kept),
        "{kept} checkpoints under {}",
        chk.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn continuous_changes_converge_and_windows_chain() {
    let (src, dst) = two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let table = create_table(&source, TABLE).await;
    create_table(&sink, TABLE).await;
    load(&source, &table, 5_000, 2).await;

    let dir = tempfile::tempdir().expect("tmp");
    let cfg = job_config(&src, &dst, &dir.path().join("chk"), 1, &[]);
    let job = start_job(&cfg, None, None, 3).await;
    wait_windows(&job, 1, Duration::from_secs(60)).await;

    // Sample the metrics while changes flow.
    let sampler = {
        let job = job.clone();
        tokio::spawn(async move {
            let mut samples = Vec::new();
            for _ in 0..300 {
                samples.push(job.metrics().snapshot());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            samples
        })
    };
    // Rows inserted and deleted within one window must not reach the sink.
    {
        let mut s = background_session(&source);
        for id in 1_000_000..1_000_200 {
            let mut rng = rand::SeedableRng::seed_from_u64(id as u64);
            s.apply(kudu_client::write::Operation::insert(
                &table,
                random_row(&mut rng, &table, id),
            ))
            .await
            .expect("insert");
        }
        for id in 1_000_000..1_000_200 {
            let mut k = table.new_row();
            k.set_i64("id", id).expect("id");
            s.apply(kudu_client::write::Operation::delete(&table, k))
                .await
                .expect("delete");
        }
        s.flush().await.expect("flush");
    }
    churn(&source, &table, 20_000, 8_000, Duration::from_secs(10), 3).await;
    let stopped_at = source.server_clock().await.expect("clock").epoch_millis();
    let samples = sampler.await.expect("sampler");

    // One more window after the generator stopped.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while job.metrics().snapshot().last_end_timestamp_ms <= stopped_at {
        assert!(
            std::time::Instant::now() < deadline,
            "no window after the changes stopped"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_same(&source, &sink, TABLE).await;

    // lastEndTimestamp only moves forward, and moves on each window.
    let mut last = 0;
    let mut advanced = 0;
    for s in &samples {
        assert!(
            s.last_end_timestamp_ms >= last,
            "lastEndTimestamp went back: {last} -> {}",
            s.last_end_timestamp_ms
        );
        if s.last_end_timestamp_ms > last {
            advanced += 1;
        }
        last = s.last_end_timestamp_ms;
    }
    assert!(
        advanced >= 5,
        "lastEndTimestamp advanced only {advanced} times in 15 s"
    );
    // Between windows every split count is 0.
    let idle = samples
        .iter()
        .filter(|s| s.pending_count == 0 && s.unassigned_count == 0 && s.pending_removal_count == 0)
        .count();
    assert!(idle > 0, "split counts never returned to 0");
    assert!(
        samples
            .iter()
            .any(|s| s.pending_count > 0 || s.pending_removal_count > 0 || s.unassigned_count > 0)
            || idle == samples.len()
    );
    job.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_with_savepoint_then_resume_without_a_new_snapshot() {
    let (src, dst) = two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let table = create_table(&source, TABLE).await;
    create_table(&sink, TABLE).await;
    load(&source, &table, 20_000, 4).await;

    let dir = tempfile::tempdir().expect("tmp");
    let savepoints = dir.path().join("savepoints");
    let cfg = job_config(&src, &dst, &dir.path().join("chk"), 1, &[]);
    let job = start_job(&cfg, Some(&savepoints), None, 2).await;
    wait_windows(&job, 2, Duration::from_secs(60)).await;
    let path = job.stop_with_savepoint(None).await.expect("savepoint");
    assert!(matches!(job.wait().await, JobStatus::Finished { .. }));
    let file = path.strip_prefix("file://").unwrap_or(&path).to_string();
    assert!(
        std::path::Path::new(&file).join("_metadata").is_file(),
        "{path}"
    );
    let name = std::path::Path::new(&file)
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with(&format!("savepoint-{}-", &job.job_id().to_string()[..6])),
        "{name}"
    );

    // Changes while the job is down.
    churn(&source, &table, 2_000, 30_000, Duration::from_secs(1), 5).await;

    let store = CheckpointStore::open_local(&cfg.checkpoints_directory, cfg.checkpoints_retained);
    let state = store.load(&path).await.expect("load savepoint").state;
    assert!(
        state.last_end_timestamp.is_some(),
        "the snapshot was done before the stop"
    );
    let resumed = start_job(&cfg, None, Some(state), 2).await;
    let before = resumed.metrics().snapshot();
    assert!(
        before.last_end_timestamp_ms > 0,
        "restored lastEndTimestamp"
    );
    wait_windows(&resumed, 1, Duration::from_secs(60)).await;
    let m = resumed.metrics().snapshot();
    assert_eq!(
        m.snapshot_windows, 0,
        "the resumed job took no new snapshot: {m:?}"
    );
    assert!(
        m.rows_read < 20_000,
        "read {} rows: a re-snapshot would read all",
        m.rows_read
    );
    assert_same(&source, &sink, TABLE).await;
    resumed.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tserver_restarts_on_both_sides_are_survived() {
    let (mut src, mut dst) = two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let table = create_table(&source, TABLE).await;
    create_table(&sink, TABLE).await;
    load(&source, &table, 10_000, 6).await;

    let dir = tempfile::tempdir().expect("tmp");
    let cfg = job_config(
        &src,
        &dst,
        &dir.path().join("chk"),
        1,
        &["--writer.operationTimeout", "60000"],
    );
    let job = start_job(&cfg, None, None, 2).await;
    wait_windows(&job, 1, Duration::from_secs(60)).await;

    let churn_task = {
        let source = source.clone();
        let table = table.clone();
        tokio::spawn(async move {
            churn(&source, &table, 10_000, 12_000, Duration::from_secs(12), 7).await
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    tokio::task::block_in_place(|| src.restart(DaemonKind::TabletServer, 1))
        .expect("restart source tserver");
    tokio::time::sleep(Duration::from_secs(2)).await;
    tokio::task::block_in_place(|| dst.restart(DaemonKind::TabletServer, 2))
        .expect("restart sink tserver");
    churn_task.await.expect("churn");
    let stopped_at = source.server_clock().await.expect("clock").epoch_millis();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while job.metrics().snapshot().last_end_timestamp_ms <= stopped_at {
        if let JobStatus::Failed { error } = job.status() {
            panic!("job failed: {error}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no window after the restarts: {:?}",
            job.metrics().snapshot()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(job.status(), JobStatus::Running);
    assert_same(&source, &sink, TABLE).await;
    job.cancel().await;
}

/// A job resumed after the source's history ran out: with
/// `reader.recopyExpiredTablets=false` the table stops with advice; by
/// default each tablet is copied again at the window end, the rows deleted
/// while the job was down are deleted from the sink, and the job streams on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resuming_past_the_history_window_recopies_or_fails_with_advice() {
    let src = MiniCluster::builder()
        .tservers(1)
        .tserver_flag("--tablet_history_max_age_sec=3")
        .start()
        .expect("source");
    let dst = MiniCluster::builder().tservers(1).start().expect("sink");
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    for c in [&source, &sink] {
        let b = kudu_client::TableBuilder::new(TABLE, all_types_schema())
            .add_hash_partitions(&["id"], 2, 0)
            .num_replicas(1);
        c.create_table(&b).await.expect("create");
    }
    let table = source.open_table(TABLE).await.expect("open");
    load(&source, &table, 1_000, 8).await;
    let dir = tempfile::tempdir().expect("tmp");
    let savepoints = dir.path().join("sp");
    let cfg = job_config(&src, &dst, &dir.path().join("chk"), 1, &[]);
    let job = start_job(&cfg, Some(&savepoints), None, 1).await;
    wait_windows(&job, 2, Duration::from_secs(60)).await;
    let path = job.stop_with_savepoint(None).await.expect("savepoint");
    // Down for longer than the source keeps history.
    tokio::time::sleep(Duration::from_secs(8)).await;
    churn(&source, &table, 100, 2_000, Duration::from_millis(100), 9).await;
    let store = CheckpointStore::open_local(&cfg.checkpoints_directory, cfg.checkpoints_retained);
    let state = store.load(&path).await.expect("load").state;
    let no_recopy = ["--reader.recopyExpiredTablets", "false"];
    let strict = job_config(&src, &dst, &dir.path().join("chk"), 1, &no_recopy);
    let resumed = start_job(&strict, None, Some(state.clone()), 1).await;
    let status = tokio::time::timeout(Duration::from_secs(60), resumed.wait())
        .await
        .expect("job ends");
    let JobStatus::Failed { error } = status else {
        panic!("expected a failure, got {status:?}")
    };
    assert!(error.contains("snapshot too old"), "{error}");
    assert!(
        error.contains("start a fresh job"),
        "says what to do: {error}"
    );

    let resumed = start_job(&cfg, None, Some(state), 2).await;
    wait_windows(&resumed, 2, Duration::from_secs(60)).await;
    let table_view = &resumed.tables()[0];
    assert_eq!(
        table_view.tablets_recopied, 2,
        "both tablets: {table_view:?}"
    );
    assert!(
        table_view.rows_deleted > 0,
        "rows deleted while down: {table_view:?}"
    );
    assert_same(&source, &sink, TABLE).await;
    // Diff windows follow the re-copy.
    churn(&source, &table, 200, 2_000, Duration::from_millis(500), 10).await;
    let done = resumed.tables()[0].windows_completed;
    wait_windows(&resumed, done + 2, Duration::from_secs(60)).await;
    assert_same(&source, &sink, TABLE).await;
    assert_eq!(resumed.tables()[0].tablets_recopied, 2);
    resumed.cancel().await;
}
