//! `ferry run` on every version pair: an every-type table under a mixed
//! writer (inserts, upserts, updates, deletes, NULLs in every column),
//! the process killed with SIGKILL after the snapshot and again soon after
//! its restart, each time restarted from its newest checkpoint; at the end the sink equals the source cell by
//! cell, read by an independent reader.

use std::time::{Duration, Instant};

use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::Workload;

use crate::pair_job::{create_every_type_table, for_each_pair, PairEnv, CATCH_UP};

/// Kills the job once its snapshot is in a checkpoint and a few diff
/// windows later; returns the checkpoint it resumes from.
async fn kill_after_the_snapshot(
    env: &PairEnv,
    ferry: &mut ferry_fixtures::process::FerryProcess,
) -> String {
    let id = ferry.job_id();
    let deadline = Instant::now() + CATCH_UP;
    loop {
        assert!(
            Instant::now() < deadline,
            "{}: no checkpoint after the snapshot",
            env.pair.label()
        );
        if let Some((_, true)) = env.newest_checkpoint(&id).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Into the diff windows, mid-window or between them.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    ferry.kill9();
    let (resume, after_snapshot) = env
        .newest_checkpoint(&id)
        .await
        .expect("a complete checkpoint");
    assert!(after_snapshot, "{}: {resume}", env.pair.label());
    resume
}

/// Kills a resumed job a moment after it started (mid-window or between
/// windows); returns the checkpoint to resume from next (its own newest,
/// else `previous`).
async fn kill_soon(env: &PairEnv, ferry: &mut FerryProcess, previous: String) -> String {
    tokio::time::sleep(Duration::from_millis(900)).await;
    ferry.kill9();
    match env.newest_checkpoint(&ferry.job_id()).await {
        Some((newer, _)) => newer,
        None => previous,
    }
}

#[test]
fn every_type_table_replicates_through_kill_9_restarts_on_every_pair() {
    for_each_pair(|env| async move {
        let label = env.pair.label();
        let t = env.pair.table("rep");
        create_every_type_table(&env.source, &t, 3).await;
        let writer = Workload::start(env.source.clone(), &t, 300, 31);
        // Rows for the snapshot to copy.
        tokio::time::sleep(Duration::from_secs(1)).await;

        let mut first = env.start(&t, &[]);
        let resume = kill_after_the_snapshot(&env, &mut first).await;
        let mut second = env.start(&t, &["-s", &resume]);
        let resume = kill_soon(&env, &mut second, resume).await;
        let mut last = env.start(&t, &["-s", &resume]);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let stats = writer.stop().await;
        assert_eq!(
            stats.failed, 0,
            "{label}: the source has no fault: {stats:?}"
        );
        assert!(
            stats.inserts > 100 && stats.updates > 0 && stats.deletes > 0,
            "{label}: a mixed workload: {stats:?}"
        );

        env.wait_caught_up(&mut last, &t).await;
        env.assert_equal(&t, "two kill -9 restarts").await;
        // The restarts resumed the window chain: no second snapshot.
        let live = last.live();
        assert_eq!(live["totals"]["snapshot_windows"], 0, "{label}: {live}");
    });
}
