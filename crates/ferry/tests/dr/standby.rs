//! Warm standby with fencing (issue 11, item 5), against two real Kudu
//! clusters and the real `ferry` binary.
//!
//! - `kill_9_of_the_active`: an active `ferry run` holding the lease is
//!   killed with SIGKILL while a mixed writer runs; `ferry standby` takes
//!   over from the replicated state (the DR directory the active itself
//!   fills through `job.stateReplicas`: the standby restores `--from` it,
//!   and what it restores is the newest checkpoint the active had
//!   replicated before it died, which may be older than what the sink
//!   holds: the sink position makes that exact) under the same job id, and
//!   after the writer stops the sink equals the source cell by cell.
//! - `takeover_with_lease_and_state_on_s3`: the same takeover with the
//!   checkpoints and the lease in a bucket of a real S3 server (s3s-fs) and
//!   the replica in a second bucket of it; the standby restores from that.
//! - `a_resumed_active_writes_nothing`: the active is paused with SIGSTOP,
//!   the standby takes over while new changes arrive, then the active is
//!   resumed: it stops its job fenced and stands by, wrote no further row
//!   (its own count of rows written equals the count before the pause,
//!   when it was idle) and no
//!   checkpoint (every generation-1 checkpoint was taken before the
//!   resume); the sink equals the source.
//! - `two_jobs_with_one_cluster_id_are_refused`: a second job under the
//!   first one's cluster id stops with exit code 2 and writes nothing.

use crate::ha_kit::{checkpoints_in, now_ms, spawn, stdout_line};
use ferry_engine::checkpoint::{CheckpointStore, JobId, JobState, StorageLocation};
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use ferry_objstore::ObjectStoreResolver;
use ferry_testkit::{MiniCluster, S3Server};
use kudu_client::{KuduClient, TableBuilder};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const OPS_PER_SEC: u32 = 200;
const LEASE: &str = "2s";
const RENEW: &str = "500ms";
/// The S3 variant's replica: a second bucket (one endpoint per process).
const S3_REPLICA: &str = "s3://ferry-replica/dr";

/// Everything both tests need: clusters, a table, directories, job keys.
struct Setup {
    /// The bucket's resolver when the checkpoints are on S3.
    s3: Option<(S3Server, Arc<ObjectStoreResolver>)>,
    clusters: Arc<(MiniCluster, MiniCluster)>,
    source: KuduClient,
    sink: KuduClient,
    table: String,
    dir: tempfile::TempDir,
    job_args: Vec<String>,
    job: JobId,
    /// The active's `job.stateReplicas`, where the standby restores from.
    replica: String,
}

impl Setup {
    async fn new(table: &str) -> Setup {
        Self::with_store(table, None).await
    }

    /// With the checkpoints (and the lease) in a bucket of a real S3 server.
    async fn on_s3(table: &str) -> Setup {
        let s3 = S3Server::start(&format!("standby-{}", std::process::id()))
            .expect("s3s-fs (run scripts/test once to install it)");
        s3.create_bucket("ferry-dr").expect("bucket");
        s3.create_bucket("ferry-replica").expect("bucket");
        let resolver = ferry_fixtures::s3::resolver(&s3);
        let mut s =
            Self::with_store(table, Some(("s3://ferry-dr/prod/checkpoints", S3_REPLICA))).await;
        s.job_args.extend([
            // The lease in the bucket too (the default is a table on the
            // sink cluster).
            "--high-availability.storageDir".to_string(),
            "s3://ferry-dr/prod/checkpoints".to_string(),
            format!("-Ds3.endpoint={}", s3.endpoint()),
            format!("-Ds3.access-key={}", s3.access_key()),
            format!("-Ds3.secret-key={}", s3.secret_key()),
        ]);
        s.s3 = Some((s3, resolver));
        s
    }

    /// `store`: the checkpoints directory and the replica, when not local.
    async fn with_store(table: &str, store: Option<(&str, &str)>) -> Setup {
        let clusters = tokio::task::block_in_place(crate::standby_clusters);
        let (src, dst) = (&clusters.0, &clusters.1);
        let source = KuduClient::new(&src.master_addrs()).expect("client");
        let sink = KuduClient::new(&dst.master_addrs()).expect("client");
        let b = TableBuilder::new(table, ferry_fixtures::all_types_schema())
            .add_hash_partitions(&["id"], 3, 0)
            .num_replicas(3);
        source.create_table(&b).await.expect("create");
        let dir = tempfile::tempdir().expect("tmp");
        let (chk, replica) = match store {
            Some((chk, replica)) => (chk.to_string(), replica.to_string()),
            None => (
                dir.path().join("chk").to_string_lossy().to_string(),
                dir.path().join("dr").to_string_lossy().to_string(),
            ),
        };
        let job_args: Vec<String> = [
            "--job.sourceMasterAddresses",
            &src.master_addrs_joined(),
            "--job.sinkMasterAddresses",
            &dst.master_addrs_joined(),
            "--job.tableName",
            table,
            "--job.createTable",
            "true",
            "--job.checkpointsDirectory",
            &chk,
            "--job.checkpointsRetained",
            "1000",
            "--job.stateReplicas",
            &replica,
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "300",
            "--high-availability.type",
            "lease",
            "--high-availability.lease-duration",
            LEASE,
            "--high-availability.renew-interval",
            RENEW,
            "-p",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let job = ferry_engine::config::ha_job_id(&format!("ferry-replication-{table}"));
        Setup {
            s3: None,
            clusters: clusters.clone(),
            source,
            sink,
            table: table.to_string(),
            dir,
            job_args,
            job,
            replica,
        }
    }

    fn chk(&self) -> PathBuf {
        self.dir.path().join("chk")
    }

    fn store(&self) -> CheckpointStore {
        if let Some((_, resolver)) = &self.s3 {
            let loc = StorageLocation::parse("s3://ferry-dr/prod/checkpoints").expect("loc");
            return CheckpointStore::open(
                &loc,
                NonZeroUsize::new(1000).expect("n"),
                resolver.clone(),
            )
            .expect("store");
        }
        CheckpointStore::open_local(
            &StorageLocation::local(&self.chk()).expect("loc"),
            NonZeroUsize::new(1000).expect("n"),
        )
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Waits until a complete checkpoint of generation `generation` has a
    /// window end past `ts` (every change before `ts` is in the sink).
    async fn caught_up(&self, generation: u64, ts: u64, within: Duration) -> JobState {
        crate::ha_kit::caught_up(&self.store(), &self.job, generation, ts, within).await
    }

    async fn clock(&self) -> u64 {
        self.source.server_clock().await.expect("clock").raw()
    }

    async fn assert_sink_equals_source(&self) {
        let _ = &self.clusters;
        crate::ha_kit::assert_sink_equals_source(&self.source, &self.sink, &self.table).await;
    }

    /// Every checkpoint state of the job in the primary directory.
    fn all_checkpoints(&self) -> Vec<JobState> {
        checkpoints_in(&self.chk().join(self.job.to_string()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_the_active() {
    let s = Setup::new("standby_kill").await;
    let writer = Workload::start(s.source.clone(), &s.table, OPS_PER_SEC, 21);
    let mut active = spawn("run", &s.job_args, &[], &s.log("active.err"));
    let line = stdout_line(&active, "JobID", Duration::from_secs(60)).await;
    assert!(line.ends_with(&s.job.to_string()), "{line}");
    let t0 = s.clock().await;
    s.caught_up(1, t0, Duration::from_secs(90)).await;

    let dr = s.dir.path().join("dr");
    assert_eq!(s.replica, dr.to_string_lossy(), "the active's replica");
    let standby = spawn(
        "standby",
        &s.job_args,
        &["--from", &s.replica],
        &s.log("standby.err"),
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        standby.stdout_lines().is_empty(),
        "the standby must wait while the active renews; stderr:\n{}",
        standby.stderr_text()
    );

    active.signal(libc::SIGKILL);
    let primary_newest = s
        .store()
        .latest_complete(&s.job)
        .await
        .expect("list")
        .checkpoint
        .map(|c| c.id);
    let line = stdout_line(&standby, "JobID", Duration::from_secs(30)).await;
    assert!(line.ends_with(&s.job.to_string()), "same job id: {line}");
    let newest = stdout_line(&standby, "Newest: ", Duration::from_secs(5)).await;
    assert!(
        newest.contains(&s.replica),
        "restored from the replica: {newest}"
    );
    stdout_line(&standby, "RTO: ", Duration::from_secs(30)).await;
    // What the standby restored is the newest checkpoint the dead active
    // had replicated (generation 1), at most as new as its primary's.
    let restored_id: u64 = newest
        .split("/chk-")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("checkpoint number in {newest}"));
    let replicated_newest = checkpoints_in(&dr.join(s.job.to_string()))
        .iter()
        .filter(|st| st.generation == 1)
        .map(|st| st.checkpoint_id)
        .max();
    assert_eq!(
        replicated_newest,
        Some(restored_id),
        "restored chk-{restored_id}, the replica's newest of the active"
    );
    assert!(
        primary_newest.is_some_and(|p| restored_id <= p),
        "restored chk-{restored_id}, primary had {primary_newest:?}"
    );

    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = writer.stop().await;
    assert!(stats.applied > 500, "changes flowed: {stats:?}");
    let stopped = s.clock().await;
    let state = s.caught_up(2, stopped, Duration::from_secs(90)).await;
    assert_eq!(state.job_id, s.job);
    s.assert_sink_equals_source().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn takeover_with_lease_and_state_on_s3() {
    let s = Setup::on_s3("standby_s3").await;
    let writer = Workload::start(s.source.clone(), &s.table, OPS_PER_SEC, 24);
    let mut active = spawn("run", &s.job_args, &[], &s.log("active.err"));
    stdout_line(&active, "JobID", Duration::from_secs(60)).await;
    s.caught_up(1, s.clock().await, Duration::from_secs(90))
        .await;
    let standby = spawn(
        "standby",
        &s.job_args,
        &["--from", S3_REPLICA],
        &s.log("standby.err"),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    active.signal(libc::SIGKILL);
    let line = stdout_line(&standby, "JobID", Duration::from_secs(30)).await;
    assert!(line.ends_with(&s.job.to_string()), "same job id: {line}");
    let newest = stdout_line(&standby, "Newest: ", Duration::from_secs(5)).await;
    assert!(
        newest.contains(&format!("{S3_REPLICA}/")),
        "restored from the replica bucket: {newest}"
    );
    stdout_line(&standby, "RTO: ", Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    writer.stop().await;
    let stopped = s.clock().await;
    s.caught_up(2, stopped, Duration::from_secs(90)).await;
    s.assert_sink_equals_source().await;
    assert!(!standby
        .stderr_text()
        .contains(s.s3.as_ref().map_or("-", |(srv, _)| srv.secret_key())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resumed_active_writes_nothing() {
    let s = Setup::new("standby_pause").await;
    let writer = Workload::start(s.source.clone(), &s.table, OPS_PER_SEC, 22);
    let mut active = spawn("run", &s.job_args, &[], &s.log("active.err"));
    stdout_line(&active, "JobID", Duration::from_secs(60)).await;
    let standby = spawn(
        "standby",
        &s.job_args,
        &["--from", &s.chk().to_string_lossy()],
        &s.log("standby.err"),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Let the active become idle: no write can be in flight at the pause.
    let first = writer.stop().await;
    let t1 = s.clock().await;
    s.caught_up(1, t1, Duration::from_secs(90)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rows = |port: u16| {
        let live = tokio::task::block_in_place(|| {
            ferry_fixtures::http::get_json(port, &format!("/ferry/jobs/{}/live", s.job))
        });
        let t = &live["totals"];
        t["rows_upserted"].as_u64().unwrap_or(0) + t["rows_deleted"].as_u64().unwrap_or(0)
    };
    let before_pause = rows(active.rest());
    assert!(before_pause > 0, "the active replicated rows");

    active.signal(libc::SIGSTOP);
    let writer = Workload::start_with(
        s.source.clone(),
        &s.table,
        WorkloadOptions {
            ops_per_sec: OPS_PER_SEC,
            seed: 23,
            first_id: first.next_id,
            key_floor: 0,
        },
    );
    stdout_line(&standby, "RTO: ", Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let resumed_at = now_ms();
    active.signal(libc::SIGCONT);

    // The resumed active stops its job on its own, fenced, having written
    // nothing, and stands by (it may win the lease again later).
    tokio::task::block_in_place(|| {
        active.wait_stderr("standing by for the lease", Duration::from_secs(30))
    });
    let err = active.stderr_text();
    assert!(err.contains("fenced: "), "stderr:\n{err}");
    let written = err
        .lines()
        .find_map(|l| l.split("rows written by this instance: ").nth(1))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no rows-written line in stderr:\n{err}"));
    assert_eq!(written, before_pause, "no row after the pause");

    tokio::time::sleep(Duration::from_secs(2)).await;
    let stats = writer.stop().await;
    assert!(
        stats.applied > 200,
        "changes flowed during the takeover: {stats:?}"
    );
    let stopped = s.clock().await;
    s.caught_up(2, stopped, Duration::from_secs(90)).await;
    let states = s.all_checkpoints();
    assert!(states.iter().any(|st| st.generation == 2));
    for st in states.iter().filter(|st| st.generation == 1) {
        assert!(
            st.created_at_ms < resumed_at,
            "checkpoint {} of generation 1 written after the resume",
            st.checkpoint_id
        );
    }
    s.assert_sink_equals_source().await;
    active.assert_running("standing by");
    active.kill9();
    drop(standby);
}

/// Two jobs given one `high-availability.cluster-id` (issue 32, bad
/// input): while job A holds and renews the lease, job B — another table —
/// started with `ferry run` or `ferry standby` stops with exit code 2,
/// naming the key and both jobs, and writes nothing (no sink table, no
/// checkpoint, no lease record); A goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_jobs_with_one_cluster_id_are_refused() {
    let a = Setup::new("ha_twin_a").await;
    let b = Setup::new("ha_twin_b").await;
    let shared = ["--high-availability.cluster-id", "twins"];
    let mut active = spawn("run", &a.job_args, &shared, &a.log("a.err"));
    stdout_line(&active, "JobID", Duration::from_secs(60)).await;
    for (verb, extra) in [("run", vec![]), ("standby", vec!["--from", &b.replica])] {
        let mut other = spawn(
            verb,
            &b.job_args,
            &[&shared[..], &extra[..]].concat(),
            &b.log(&format!("{verb}.err")),
        );
        let status = other.wait_exit(Duration::from_secs(60));
        let err = other.stderr_text();
        assert_eq!(status.code(), Some(2), "ferry {verb}: {status}\n{err}");
        for part in [
            "high-availability.cluster-id",
            "held by another job",
            "tables ha_twin_a",
            "tables ha_twin_b",
        ] {
            assert!(err.contains(part), "ferry {verb} says {part:?}:\n{err}");
        }
    }
    assert!(
        b.sink.open_table("ha_twin_b").await.is_err(),
        "job B created no sink table"
    );
    assert!(
        !b.chk().exists() || std::fs::read_dir(b.chk()).expect("chk").count() == 0,
        "job B wrote no checkpoint"
    );
    // Job A still holds generation 1: B never claimed the lease.
    active.assert_running("job A after job B was refused");
    let t = a.clock().await;
    let job_a = ferry_engine::config::ha_job_id("twins");
    crate::ha_kit::caught_up(&a.store(), &job_a, 1, t, Duration::from_secs(60)).await;
    active.sigterm();
    active.wait_exit(Duration::from_secs(60));
}
