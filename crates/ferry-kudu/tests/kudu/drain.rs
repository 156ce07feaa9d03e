//! Stop with drain between two real Kudu clusters: requested at any moment
//! around a window opening, it ends the job FINISHED between windows, with
//! a savepoint that holds no split in progress and a sink equal to the
//! source as of the savepoint's last window end. A drain that cannot
//! finish in time fails the request and leaves the job running.

use crate::common::*;
use ferry_engine::checkpoint::CheckpointStore;
use ferry_engine::{ControlError, JobStatus, StopMode};
use ferry_fixtures::read_at;
use kudu_client::write::Operation;
use kudu_client::{HybridTime, KuduClient, KuduTable};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Keeps changing rows (upserts, updates, deletes over `0..key_space`)
/// until `running` is cleared.
fn spawn_writer(
    client: KuduClient,
    table: KuduTable,
    key_space: i64,
    running: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(11);
        let mut session = background_session(&client);
        let mut ops = 0u64;
        while running.load(Ordering::Relaxed) {
            for _ in 0..20 {
                let id = rng.gen_range(0..key_space);
                let op = if rng.gen_ratio(1, 5) {
                    let mut key = table.new_row();
                    key.set_i64("id", id).expect("id");
                    Operation::delete_ignore(&table, key)
                } else {
                    Operation::upsert(&table, random_row(&mut rng, &table, id))
                };
                session.apply(op).await.expect("apply");
                ops += 1;
            }
            session.flush().await.expect("flush");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        session.flush().await.expect("flush");
        ops
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_with_drain_around_a_window_opening_ends_between_windows() {
    let (src, dst) = two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let table = create_table(&source, TABLE).await;
    create_table(&sink, TABLE).await;
    load(&source, &table, 3_000, 21).await;
    let running = Arc::new(AtomicBool::new(true));
    let writer = spawn_writer(source.clone(), table.clone(), 4_000, running.clone());

    let dir = tempfile::tempdir().expect("tmp");
    let savepoints = dir.path().join("savepoints");
    // Windows open every second.
    let cfg = job_config(&src, &dst, &dir.path().join("chk"), 1, &[]);
    let store = CheckpointStore::open_local(&cfg.checkpoints_directory, cfg.checkpoints_retained);
    let mut restore = None;
    // How long before the next window is due the stop is requested
    // (negative: after it opened), one job per value, each resuming from
    // the previous one's savepoint.
    for lead_ms in [120i64, 40, 15, 5, 0, -5, -30] {
        let job = start_job(&cfg, Some(&savepoints), restore.take(), 2).await;
        wait_windows(&job, 2, Duration::from_secs(120)).await;
        // Wait for a window to complete; the next opens one discovery
        // interval after that one opened.
        let seen = job.metrics().snapshot().windows_completed;
        let deadline = Instant::now() + Duration::from_secs(30);
        let completed = loop {
            let m = job.metrics().snapshot();
            if m.windows_completed > seen {
                break m;
            }
            assert!(Instant::now() < deadline, "no window completed: {m:?}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let due_in = 1_000 - completed.last_window_duration_ms.min(1_000) as i64;
        let wait = (due_in - lead_ms).max(0) as u64;
        tokio::time::sleep(Duration::from_millis(wait)).await;

        let path = job
            .stop(StopMode::drain(None, Duration::from_secs(60)))
            .await
            .unwrap_or_else(|e| panic!("lead {lead_ms} ms: drain failed: {e}"));
        let status = tokio::time::timeout(Duration::from_secs(30), job.wait())
            .await
            .unwrap_or_else(|_| panic!("lead {lead_ms} ms: the job still runs"));
        assert_eq!(
            status,
            JobStatus::Finished {
                savepoint: path.clone()
            },
            "lead {lead_ms} ms"
        );
        let state = store.load(&path).await.expect("load savepoint").state;
        assert!(
            state.window.is_none() && state.unassigned.is_empty() && state.pending.is_empty(),
            "lead {lead_ms} ms: the savepoint holds a window in progress: {:?}, {} unassigned, {} pending",
            state.window,
            state.unassigned.len(),
            state.pending.len()
        );
        let end = state.last_end_timestamp.expect("a completed window");
        let expected = read_at(&source, TABLE, Some(HybridTime::from_raw(end.raw()))).await;
        let copied = read_all(&sink, TABLE).await;
        assert!(
            expected == copied,
            "lead {lead_ms} ms: sink ({} rows) != source as of the last window end ({} rows)",
            copied.len(),
            expected.len()
        );
        restore = Some(state);
    }
    running.store(false, Ordering::Relaxed);
    let ops = writer.await.expect("writer");
    assert!(ops > 1_000, "the writer kept changing rows ({ops} ops)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_drain_that_cannot_finish_in_time_leaves_the_job_running() {
    let (src, dst) = two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let table = create_table(&source, TABLE).await;
    create_table(&sink, TABLE).await;
    load(&source, &table, 50_000, 22).await;

    let dir = tempfile::tempdir().expect("tmp");
    let savepoints = dir.path().join("savepoints");
    let cfg = job_config(&src, &dst, &dir.path().join("chk"), 1, &[]);
    let job = start_job(&cfg, Some(&savepoints), None, 1).await;
    // The snapshot of 50 000 rows takes longer than a millisecond; a drain
    // waits for it.
    let err = job
        .stop(StopMode::drain(None, Duration::from_millis(1)))
        .await
        .expect_err("the drain cannot finish in 1 ms");
    assert!(matches!(err, ControlError::DrainTimeout(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with("drain: the open window did not finish within"),
        "{err}"
    );
    assert_eq!(job.status(), JobStatus::Running);
    // The job went on and can still be drained.
    let path = job
        .stop(StopMode::drain(None, Duration::from_secs(120)))
        .await
        .expect("drained stop");
    assert!(matches!(job.wait().await, JobStatus::Finished { .. }));
    let store = CheckpointStore::open_local(&cfg.checkpoints_directory, cfg.checkpoints_retained);
    let state = store.load(&path).await.expect("load").state;
    assert!(state.pending.is_empty() && state.unassigned.is_empty() && state.window.is_none());
    assert_eq!(assert_same(&source, &sink, TABLE).await, 50_000);
}
