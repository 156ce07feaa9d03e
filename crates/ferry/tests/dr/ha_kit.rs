//! What the HA drills share (`standby`, `zookeeper_ha`, `kube_ha`,
//! `region_loss`): `ferry` processes of one job, their output, and the
//! job's checkpoints read back as evidence of who wrote what.

use ferry_engine::checkpoint::{
    decode_metadata, CheckpointStore, JobId, JobState, StorageLocation,
};
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::free_port;
use ferry_fixtures::process::FerryProcess;
use kudu_client::KuduClient;
use std::num::NonZeroUsize;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `high-availability.type lease` in its default place with the drills'
/// short timing: a 2 s lease renewed every 500 ms.
pub(crate) const LEASE_KEYS: [&str; 6] = [
    "--high-availability.type",
    "lease",
    "--high-availability.lease-duration",
    "2s",
    "--high-availability.renew-interval",
    "500ms",
];

/// The wall clock in ms since the epoch (checkpoints' `created_at_ms`).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `ferry <verb>` of the job (`run`, `standby`, `failover`) with `extra`,
/// logging at info level to `err`.
pub(crate) fn spawn(verb: &str, job_args: &[String], extra: &[&str], err: &Path) -> FerryProcess {
    crate::ferry()
        .arg(verb)
        .args(job_args)
        .args(extra)
        .rest_port(free_port())
        .log_level("info")
        .stderr_file(err)
        .spawn()
}

/// Waits for a stdout line of `ferry` containing `needle`.
pub(crate) async fn stdout_line(ferry: &FerryProcess, needle: &str, within: Duration) -> String {
    ferry
        .wait_line_async(within, |l| l.contains(needle).then(|| l.to_string()))
        .await
}

/// The checkpoint store of a local checkpoints directory.
pub(crate) fn local_store(dir: &Path) -> CheckpointStore {
    CheckpointStore::open_local(
        &StorageLocation::local(dir).expect("loc"),
        NonZeroUsize::new(1000).expect("n"),
    )
}

/// Waits until the newest complete checkpoint of `job` is of exactly
/// `generation` and its window ends past `ts` (every change before `ts`
/// is in the sink).
pub(crate) async fn caught_up(
    store: &CheckpointStore,
    job: &JobId,
    generation: u64,
    ts: u64,
    within: Duration,
) -> JobState {
    let deadline = Instant::now() + within;
    loop {
        let latest = store.latest_complete(job).await.expect("list");
        if let Some(c) = latest.checkpoint {
            if c.state.generation == generation
                && c.state.last_end_timestamp.is_some_and(|t| t.raw() > ts)
            {
                return c.state;
            }
        }
        assert!(
            Instant::now() < deadline,
            "generation {generation} never caught up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every valid checkpoint state in a local job directory.
pub(crate) fn checkpoints_in(job_dir: &Path) -> Vec<JobState> {
    let Ok(entries) = std::fs::read_dir(job_dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("_metadata")).ok())
        .map(|bytes| decode_metadata(&bytes).expect("valid checkpoint"))
        .collect()
}

/// Asserts that the sink table equals the source table cell by cell.
pub(crate) async fn assert_sink_equals_source(source: &KuduClient, sink: &KuduClient, table: &str) {
    let diff = compare_tables(source, sink, table, table).await;
    assert!(diff.is_equal(), "{diff}");
}

/// Polls `done` every 100 ms until it holds or `within` passes.
pub(crate) async fn wait_for(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done()
}
