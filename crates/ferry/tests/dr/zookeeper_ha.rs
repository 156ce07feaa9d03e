//! ZooKeeper HA (issue 32, item 1): `high-availability.type zookeeper`
//! against a real ZooKeeper 3.9 server (ferry-testkit, standalone), two
//! real Kudu clusters and the real `ferry` binary. The lease records are
//! read back from ZooKeeper as generation evidence.
//!
//! - `kill_9_of_the_leader`: an active `ferry run` and a `ferry standby`
//!   under a writer; the active is killed with SIGKILL; the standby claims
//!   generation 2 in ZooKeeper and continues; sink == source after.
//! - `a_resumed_leader_is_fenced`: the active is paused (SIGSTOP), the
//!   standby takes over while changes arrive, the active resumes (SIGCONT):
//!   it is fenced by generation 2, writes no further row and no checkpoint.
//! - `zookeeper_stopped_for_20_s`: the server itself is stopped for 20 s
//!   under a writer: the leader keeps its fence while its lease is valid
//!   and stops writing when it cannot renew; never two writers (no
//!   checkpoints of two generations interleave). Its own server, as it
//!   stops it.
//! - `the_job_runs_again_after_a_zookeeper_outage`: the same outage with
//!   a standby; the job runs again by itself afterwards (the outage lasts
//!   `FERRY_HA_OUTAGE_SECS`, 20 s by default; `bench/ha-outage` runs it
//!   for 2 minutes).
//! - `an_unreachable_quorum_is_named`: `ferry run` against a quorum where
//!   nothing listens fails naming it, having written nothing.
//!
//! Each takeover prints its RTO. The kill and pause tests share one
//! ZooKeeper server and the standby tests' Kudu clusters (tables of their
//! own, one cluster id each).

use crate::ha_kit::{checkpoints_in, now_ms, spawn, stdout_line, wait_for};
use ferry_engine::checkpoint::{JobId, JobState};
use ferry_engine::config::JobConfig;
use ferry_engine::lease::{LeaseBackend, LeaseRecord};
use ferry_fixtures::free_port;
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use ferry_fixtures::Shared;
use ferry_testkit::{MiniCluster, ZooKeeperServer};
use kudu_client::{KuduClient, TableBuilder};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const OPS_PER_SEC: u32 = 200;
const LEASE: &str = "2s";
const RENEW: &str = "500ms";
const ROOT: &str = "/ferry-tests";

static ZOOKEEPER: Shared<ZooKeeperServer> = Shared::new();

/// The ZooKeeper server the kill and pause tests share.
pub(crate) fn shared_zookeeper() -> Arc<ZooKeeperServer> {
    ZOOKEEPER.get(|| {
        ZooKeeperServer::start(&format!("dr-{}", std::process::id()))
            .expect("ZooKeeper (run scripts/test once to install its jars)")
    })
}

/// The ZooKeeper HA keys of a job whose cluster id is `cluster`.
pub(crate) fn zk_args(quorum: &str, cluster: &str) -> Vec<String> {
    [
        "--high-availability.type",
        "zookeeper",
        "--high-availability.zookeeper.quorum",
        quorum,
        "--high-availability.zookeeper.path.root",
        ROOT,
        "--high-availability.cluster-id",
        cluster,
        "--high-availability.lease-duration",
        LEASE,
        "--high-availability.renew-interval",
        RENEW,
        // Fail a call to a stopped server quickly: the lease is 2 s.
        "--high-availability.zookeeper.client.connection-timeout",
        "1 s",
        "--high-availability.zookeeper.client.retry-wait",
        "200 ms",
        "--high-availability.zookeeper.client.max-retry-attempts",
        "1",
        "--high-availability.zookeeper.client.session-timeout",
        "4 s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

struct Setup {
    clusters: Arc<(MiniCluster, MiniCluster)>,
    source: KuduClient,
    sink: KuduClient,
    table: String,
    dir: tempfile::TempDir,
    job_args: Vec<String>,
    job: JobId,
    quorum: String,
}

impl Setup {
    async fn new(table: &str, quorum: &str) -> Setup {
        let clusters = tokio::task::block_in_place(crate::standby_clusters);
        let (src, dst) = (&clusters.0, &clusters.1);
        let source = KuduClient::new(&src.master_addrs()).expect("client");
        let sink = KuduClient::new(&dst.master_addrs()).expect("client");
        let b = TableBuilder::new(table, ferry_fixtures::all_types_schema())
            .add_hash_partitions(&["id"], 3, 0)
            .num_replicas(3);
        source.create_table(&b).await.expect("create");
        let dir = tempfile::tempdir().expect("tmp");
        let chk = dir.path().join("chk").to_string_lossy().to_string();
        let mut job_args: Vec<String> = [
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
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "300",
            "-p",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        job_args.extend(zk_args(quorum, table));
        Setup {
            clusters: clusters.clone(),
            source,
            sink,
            table: table.to_string(),
            dir,
            job_args,
            job: ferry_engine::config::ha_job_id(table),
            quorum: quorum.to_string(),
        }
    }

    fn chk(&self) -> PathBuf {
        self.dir.path().join("chk")
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The job's lease in ZooKeeper, as another process would open it.
    fn lease(&self) -> ferry_zk::ZooKeeperLease {
        let config = JobConfig::from_named_pairs([
            ("job.sourceMasterAddresses", "a:7051"),
            ("job.sinkMasterAddresses", "b:7051"),
            ("job.tableName", "t"),
            ("job.checkpointsDirectory", "/unused"),
            ("high-availability.type", "zookeeper"),
            ("high-availability.zookeeper.quorum", self.quorum.as_str()),
            ("high-availability.zookeeper.path.root", ROOT),
        ])
        .expect("config");
        let zk = config.ha.zookeeper.expect("zookeeper settings");
        ferry_zk::ZooKeeperLease::new(zk, &self.table, &self.job).expect("lease")
    }

    async fn newest_record(&self) -> LeaseRecord {
        self.lease()
            .newest()
            .await
            .expect("read the lease")
            .expect("a lease record")
    }

    /// Every checkpoint state of the job.
    fn checkpoints(&self) -> Vec<JobState> {
        checkpoints_in(&self.chk().join(self.job.to_string()))
    }

    /// Waits until a checkpoint of `generation` has a window end past `ts`.
    async fn caught_up(&self, generation: u64, ts: u64, within: Duration) -> JobState {
        let deadline = Instant::now() + within;
        loop {
            let newest = self
                .checkpoints()
                .into_iter()
                .filter(|c| c.generation == generation)
                .filter(|c| c.last_end_timestamp.is_some_and(|t| t.raw() > ts))
                .max_by_key(|c| c.checkpoint_id);
            if let Some(state) = newest {
                return state;
            }
            assert!(
                Instant::now() < deadline,
                "generation {generation} never caught up"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn clock(&self) -> u64 {
        self.source.server_clock().await.expect("clock").raw()
    }

    async fn assert_sink_equals_source(&self) {
        let _ = &self.clusters;
        crate::ha_kit::assert_sink_equals_source(&self.source, &self.sink, &self.table).await;
    }
}

/// The RTO line a takeover printed, echoed into the test's output.
async fn report_rto(standby: &FerryProcess, what: &str) -> String {
    let line = stdout_line(standby, "RTO: ", Duration::from_secs(60)).await;
    eprintln!("zookeeper HA, {what}: {line}");
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_the_leader() {
    let zk = tokio::task::block_in_place(shared_zookeeper);
    let s = Setup::new("zk_kill", &zk.connect_string()).await;
    let writer = Workload::start(s.source.clone(), &s.table, OPS_PER_SEC, 31);
    let mut active = spawn("run", &s.job_args, &[], &s.log("active.err"));
    let line = stdout_line(&active, "JobID", Duration::from_secs(60)).await;
    assert!(line.ends_with(&s.job.to_string()), "{line}");
    s.caught_up(1, s.clock().await, Duration::from_secs(90))
        .await;
    let held = s.newest_record().await;
    assert_eq!(held.generation, 1, "{held:?}");
    assert!(
        held.owner.ends_with(&format!("/{}", active.pid())),
        "{held:?}"
    );

    let chk = s.chk().to_string_lossy().to_string();
    let standby = spawn(
        "standby",
        &s.job_args,
        &["--from", &chk],
        &s.log("standby.err"),
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        standby.stdout_lines().is_empty(),
        "the standby must wait while the leader renews; stderr:\n{}",
        standby.stderr_text()
    );
    let renewed = s.newest_record().await;
    assert!(
        renewed.generation == 1 && renewed.seq > held.seq,
        "the leader renews in ZooKeeper: {held:?} then {renewed:?}"
    );

    active.signal(libc::SIGKILL);
    let line = stdout_line(&standby, "JobID", Duration::from_secs(30)).await;
    assert!(line.ends_with(&s.job.to_string()), "same job id: {line}");
    report_rto(&standby, "kill -9 of the leader").await;
    let taken = s.newest_record().await;
    assert_eq!(taken.generation, 2, "{taken:?}");
    assert!(
        taken.owner.ends_with(&format!("/{}", standby.pid())),
        "{taken:?}"
    );

    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = writer.stop().await;
    assert!(stats.applied > 500, "changes flowed: {stats:?}");
    let stopped = s.clock().await;
    s.caught_up(2, stopped, Duration::from_secs(90)).await;
    s.assert_sink_equals_source().await;
    drop(zk);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resumed_leader_is_fenced() {
    let zk = tokio::task::block_in_place(shared_zookeeper);
    let s = Setup::new("zk_pause", &zk.connect_string()).await;
    let writer = Workload::start(s.source.clone(), &s.table, OPS_PER_SEC, 32);
    let mut active = spawn("run", &s.job_args, &[], &s.log("active.err"));
    stdout_line(&active, "JobID", Duration::from_secs(60)).await;
    let chk = s.chk().to_string_lossy().to_string();
    let standby = spawn(
        "standby",
        &s.job_args,
        &["--from", &chk],
        &s.log("standby.err"),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Let the leader become idle: no write can be in flight at the pause.
    let first = writer.stop().await;
    s.caught_up(1, s.clock().await, Duration::from_secs(90))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rows = |port: u16| {
        let live = tokio::task::block_in_place(|| {
            ferry_fixtures::http::get_json(port, &format!("/ferry/jobs/{}/live", s.job))
        });
        let t = &live["totals"];
        t["rows_upserted"].as_u64().unwrap_or(0) + t["rows_deleted"].as_u64().unwrap_or(0)
    };
    let before_pause = rows(active.rest());
    assert!(before_pause > 0, "the leader replicated rows");

    active.signal(libc::SIGSTOP);
    let writer = Workload::start_with(
        s.source.clone(),
        &s.table,
        WorkloadOptions {
            ops_per_sec: OPS_PER_SEC,
            seed: 33,
            first_id: first.next_id,
            key_floor: 0,
        },
    );
    report_rto(&standby, "SIGSTOP of the leader").await;
    let taken = s.newest_record().await;
    assert_eq!(taken.generation, 2, "{taken:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let resumed_at = now_ms();
    active.signal(libc::SIGCONT);

    // The resumed leader learns of generation 2 and stops writing.
    stderr_says(
        &active,
        "rows written by this instance: ",
        Duration::from_secs(30),
    )
    .await;
    let err = active.stderr_text();
    assert!(err.contains("fenced: "), "stderr:\n{err}");
    let written = err
        .lines()
        .find_map(|l| l.split("rows written by this instance: ").nth(1))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no rows-written line in stderr:\n{err}"));
    assert_eq!(written, before_pause, "no row after the pause");
    // Generation 1 never wrote to ZooKeeper again either.
    let newest = s.newest_record().await;
    assert_eq!(newest.generation, 2, "{newest:?}");

    tokio::time::sleep(Duration::from_secs(2)).await;
    let stats = writer.stop().await;
    assert!(stats.applied > 200, "changes flowed: {stats:?}");
    let stopped = s.clock().await;
    s.caught_up(2, stopped, Duration::from_secs(90)).await;
    for st in s.checkpoints().iter().filter(|st| st.generation == 1) {
        assert!(
            st.created_at_ms < resumed_at,
            "checkpoint {} of generation 1 written after the resume",
            st.checkpoint_id
        );
    }
    s.assert_sink_equals_source().await;
    drop(standby);
    drop(zk);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zookeeper_stopped_for_20_s() {
    // Its own server: stopping the shared one would fail the others.
    let mut zk = tokio::task::block_in_place(|| {
        ZooKeeperServer::start(&format!("outage-{}", std::process::id())).expect("ZooKeeper")
    });
    let s = Setup::new("zk_outage", &zk.connect_string()).await;
    let writer = Workload::start(s.source.clone(), &s.table, OPS_PER_SEC, 34);
    let active = spawn("run", &s.job_args, &[], &s.log("active.err"));
    stdout_line(&active, "JobID", Duration::from_secs(60)).await;
    s.caught_up(1, s.clock().await, Duration::from_secs(90))
        .await;

    let stopped_at = now_ms();
    tokio::task::block_in_place(|| zk.stop()).expect("stop ZooKeeper");
    // Within the lease the leader keeps writing: a checkpoint of
    // generation 1 completes after the stop...
    let written_after_stop = wait_for(Duration::from_secs(10), || {
        s.checkpoints()
            .iter()
            .any(|c| c.generation == 1 && c.created_at_ms > stopped_at)
    })
    .await;
    assert!(
        written_after_stop,
        "the leader stopped before its lease ran out"
    );
    // ...and once it cannot renew, it stops writing by itself (the job's
    // own fence check or the renewer notices first).
    stderr_says(&active, "was not renewed in time", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(18)).await;
    let fence_closed_by = stopped_at + 2_000;
    let late: Vec<u64> = s
        .checkpoints()
        .iter()
        .filter(|c| c.created_at_ms > fence_closed_by + 500)
        .map(|c| c.checkpoint_id)
        .collect();
    assert!(
        late.is_empty(),
        "checkpoints written without a renewable lease: {late:?}"
    );
    tokio::task::block_in_place(|| zk.restart()).expect("start ZooKeeper");
    // The lease still says generation 1: nobody claimed while the server
    // was away, so no second writer could have started.
    let record = s.newest_record().await;
    assert_eq!(record.generation, 1, "{record:?}");
    writer.stop().await;
    drop(active);
}

/// The availability half of the outage drill: an active and a standby,
/// ZooKeeper stopped for [`crate::ha_outage`] (20 s) under a writer and
/// started again; the job must run again by itself (one of them claims a
/// new generation and checkpoints again) and never with two writers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_job_runs_again_after_a_zookeeper_outage() {
    let mut zk = tokio::task::block_in_place(|| {
        ZooKeeperServer::start(&format!("again-{}", std::process::id())).expect("ZooKeeper")
    });
    let s = Setup::new("zk_again", &zk.connect_string()).await;
    let writer = Workload::start(s.source.clone(), &s.table, OPS_PER_SEC, 35);
    let active = spawn("run", &s.job_args, &[], &s.log("active.err"));
    stdout_line(&active, "JobID", Duration::from_secs(60)).await;
    let chk = s.chk().to_string_lossy().to_string();
    let standby = spawn(
        "standby",
        &s.job_args,
        &["--from", &chk],
        &s.log("standby.err"),
    );
    s.caught_up(1, s.clock().await, Duration::from_secs(90))
        .await;

    let outage = crate::ha_outage();
    tokio::task::block_in_place(|| zk.stop()).expect("stop ZooKeeper");
    tokio::time::sleep(outage).await;
    let back = Instant::now();
    let back_ms = now_ms();
    tokio::task::block_in_place(|| zk.restart()).expect("start ZooKeeper");
    // Someone claims a new generation and checkpoints again by itself.
    let resumed = wait_for(Duration::from_secs(60), || {
        s.checkpoints()
            .iter()
            .any(|c| c.generation >= 2 && c.created_at_ms > back_ms)
    })
    .await;
    assert!(
        resumed,
        "no checkpoint after ZooKeeper came back;\nactive:\n{}\nstandby:\n{}",
        active.stderr_text(),
        standby.stderr_text()
    );
    eprintln!(
        "zookeeper HA, after a {outage:?} outage: running again {:?} after the server's return",
        back.elapsed()
    );
    let record = s.newest_record().await;
    assert!(record.generation >= 2, "{record:?}");
    writer.stop().await;
    let stopped = s.clock().await;
    let state = s
        .caught_up(record.generation, stopped, Duration::from_secs(90))
        .await;
    assert_eq!(state.job_id, s.job);
    // Never two writers: each generation's checkpoints end before the
    // next generation's first one.
    let mut by_generation = std::collections::BTreeMap::<u64, (u64, u64)>::new();
    for c in s.checkpoints() {
        let span = by_generation
            .entry(c.generation)
            .or_insert((c.created_at_ms, c.created_at_ms));
        span.0 = span.0.min(c.created_at_ms);
        span.1 = span.1.max(c.created_at_ms);
    }
    let spans: Vec<_> = by_generation.into_iter().collect();
    for pair in spans.windows(2) {
        assert!(
            pair[0].1 .1 < pair[1].1 .0,
            "generations {} and {} overlap: {spans:?}",
            pair[0].0,
            pair[1].0
        );
    }
    s.assert_sink_equals_source().await;
    drop((active, standby));
}

/// Waits until `ferry` logged `needle` (running or not).
async fn stderr_says(ferry: &FerryProcess, needle: &str, within: Duration) {
    let said = wait_for(within, || ferry.stderr_text().contains(needle)).await;
    assert!(
        said,
        "no {needle:?} on stderr within {within:?}:\n{}",
        ferry.stderr_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreachable_quorum_is_named() {
    let quorum = format!("127.0.0.1:{}", free_port());
    let s = Setup::new("zk_unreachable", &quorum).await;
    let started = Instant::now();
    let mut run = spawn("run", &s.job_args, &[], &s.log("run.err"));
    let status = run.wait_exit(Duration::from_secs(30));
    let err = run.stderr_text();
    assert_eq!(status.code(), Some(1), "stderr:\n{err}");
    assert!(
        err.contains(&format!("zookeeper://{quorum}{ROOT}/zk_unreachable/")),
        "the message names the quorum and the lease: {err}"
    );
    eprintln!(
        "unreachable quorum reported after {:?}: {}",
        started.elapsed(),
        err.lines().last().unwrap_or_default()
    );
    assert!(s.checkpoints().is_empty(), "no checkpoint written");
    assert!(
        !s.sink.table_exists(&s.table).await.expect("list"),
        "no sink table created"
    );
}
