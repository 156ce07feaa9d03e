//! Restoring an older state is exact (issue 11, item 6): while a mixed
//! insert/upsert/update/delete writer runs on an all-types table, `ferry
//! run` takes a savepoint early, and is then killed with SIGKILL several
//! times (once right after it decided where to continue, inside the window
//! it re-reads), each time restarted from that same early savepoint — so each
//! restart meets a sink that is further than the state it restores. The
//! sink position (docs/semantics.md, "Restoring an older state") makes the
//! job continue from where the sink is; at the end sink == source, cell by
//! cell.
//!
//! The test can fail: with `OLDER_STATE_WITHOUT_POSITION=1` the job runs
//! with `--job.positionTable ""` (the unsafe opt-out), each restart replays
//! one wide window from the savepoint, rows inserted, copied and deleted
//! since then are not reported by its diff scan, and the comparison finds
//! them in the sink.

use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use kudu_client::{KuduClient, TableBuilder};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TABLE: &str = "older_state";
/// Restarts from the early savepoint.
const RESTARTS: usize = 5;
/// The iteration whose run is killed right after its resume decision.
const QUICK_KILL: usize = 2;

/// A `ferry run` of the test, with its job id and its log file (every
/// run's log is read at the end).
struct Ferry {
    process: FerryProcess,
    job_id: JobId,
    log: PathBuf,
}

struct Setup {
    src: String,
    dst: String,
    chk: PathBuf,
    logs: PathBuf,
    with_position: bool,
    runs: usize,
}

impl Setup {
    fn start(&mut self, resume: Option<&str>) -> Ferry {
        let mut cmd = crate::ferry().args([
            "run",
            "--job.sourceMasterAddresses",
            &self.src,
            "--job.sinkMasterAddresses",
            &self.dst,
            "--job.tableName",
            TABLE,
            "--job.createTable",
            "true",
            "--job.checkpointsDirectory",
            &self.chk.to_string_lossy(),
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "300",
            "--rest.address",
            "127.0.0.1",
            "-p",
            "2",
        ]);
        if !self.with_position {
            cmd = cmd.args(["--job.positionTable", ""]);
        }
        if let Some(path) = resume {
            cmd = cmd.args(["-s", path]);
        }
        self.runs += 1;
        let log = self.logs.join(format!("ferry-{}.log", self.runs));
        let process = cmd
            .log_level("warn,ferry_engine=info")
            .free_ports()
            .stderr_file(&log)
            .start();
        let job_id = process.job_id().parse().expect("job id");
        Ferry {
            process,
            job_id,
            log,
        }
    }
}

/// Waits until a checkpoint of `f`'s job records a completed window ending
/// after `after` (raw hybrid time).
async fn window_completed_after(store: &CheckpointStore, f: &Ferry, after: u64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let latest = store.latest_complete(&f.job_id).await.expect("list");
        let done = latest
            .checkpoint
            .is_some_and(|c| c.state.last_end_timestamp.is_some_and(|t| t.raw() > after));
        if done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no window completed after {after} within {within:?}; see {}",
            f.log.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether `f`'s log says it continued from the sink position.
fn says_resumed(log: &Path) -> bool {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains("continuing from the sink position")
}

/// Waits until `f` logged that it continued from the sink position.
async fn resumed_at_position(f: &Ferry, within: Duration) {
    let deadline = Instant::now() + within;
    while !says_resumed(&f.log) {
        assert!(
            Instant::now() < deadline,
            "no resume from the sink position; see {}",
            f.log.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Takes a savepoint into `dir` through the REST API; returns its path.
fn savepoint(f: &Ferry, dir: &Path) -> String {
    let id = f.job_id.to_string();
    let (status, body) = f.process.http(
        "POST",
        &format!("/jobs/{id}/savepoints"),
        Some(&format!("{{\"target-directory\":\"{}\"}}", dir.display())),
    );
    assert_eq!(status, 202, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let req = v["request-id"].as_str().expect("request-id").to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = f.process.get_json(&format!("/jobs/{id}/savepoints/{req}"));
        if v["status"]["id"] == "COMPLETED" {
            return v["operation"]["location"]
                .as_str()
                .expect("location")
                .to_string();
        }
        assert!(Instant::now() < deadline, "savepoint never completed: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

async fn clock(client: &KuduClient) -> u64 {
    client.server_clock().await.expect("clock").raw()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarts_from_an_early_savepoint_end_with_sink_equal_to_source() {
    let with_position = std::env::var_os("OLDER_STATE_WITHOUT_POSITION").is_none();
    let started = Instant::now();
    let (src, dst) = ferry_fixtures::two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let b = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 4, 0)
        .num_replicas(3);
    source.create_table(&b).await.expect("create");

    let writer = Workload::start_with(
        source.clone(),
        TABLE,
        WorkloadOptions {
            ops_per_sec: 3_000,
            seed: 6,
            first_id: 0,
            key_floor: 0,
        },
    );
    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let store = CheckpointStore::open_local(
        &StorageLocation::local(&chk).expect("location"),
        NonZeroUsize::MIN,
    );
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).expect("logs dir");
    let mut setup = Setup {
        src: src.master_addrs_joined(),
        dst: dst.master_addrs_joined(),
        chk,
        logs,
        with_position,
        runs: 0,
    };

    // First run: the snapshot and a window, then the early savepoint.
    let mut f = setup.start(None);
    let t = clock(&source).await;
    window_completed_after(&store, &f, t, Duration::from_secs(60)).await;
    let early = savepoint(&f, &dir.path().join("savepoints"));
    eprintln!("early savepoint: {early}");

    // Each run goes several windows past the savepoint before the kill, so
    // the sink is always further than the savepoint it is restarted from.
    // One run (the third) is killed as soon as it has decided where to
    // continue, inside the re-read window: the next one resumes from there.
    for i in 0..RESTARTS {
        if i == QUICK_KILL && with_position {
            resumed_at_position(&f, Duration::from_secs(30)).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        } else {
            let t = clock(&source).await;
            window_completed_after(&store, &f, t, Duration::from_secs(60)).await;
            tokio::time::sleep(Duration::from_millis(2_000 + 500 * i as u64)).await;
        }
        f.process.kill9();
        f = setup.start(Some(&early));
    }

    // The last run keeps going: stop the writer and let it catch up.
    let t = clock(&source).await;
    window_completed_after(&store, &f, t, Duration::from_secs(60)).await;
    let stats = writer.stop().await;
    assert_eq!(stats.failed, 0, "the source has no fault: {stats:?}");
    assert!(stats.deletes > 1_000, "deletes flowed: {stats:?}");
    let stopped = clock(&source).await;
    window_completed_after(&store, &f, stopped, Duration::from_secs(90)).await;
    f.process.kill9();

    let resumed = (2..=setup.runs)
        .filter(|run| says_resumed(&setup.logs.join(format!("ferry-{run}.log"))))
        .count();
    let diff = ferry_fixtures::compare::compare_tables(&source, &sink, TABLE, TABLE).await;
    eprintln!(
        "older state: position {}, {} restarts from the early savepoint ({resumed} resumed at the sink position), {} changes, source {} rows, sink {} rows, {} extra, {} missing, {} differing, {:?}",
        if with_position { "on" } else { "OFF" },
        RESTARTS,
        stats.applied,
        diff.source_rows,
        diff.sink_rows,
        diff.extra_in_sink,
        diff.missing_in_sink,
        diff.differing_rows,
        started.elapsed()
    );
    assert!(diff.is_equal(), "{diff}");
    if with_position {
        assert_eq!(
            resumed,
            RESTARTS,
            "every restart continued from the sink position (logs in {})",
            setup.logs.display()
        );
    }
}
