//! Faults survived (issue 17): the real `ferry` binary replicates an
//! every-type table under a mixed workload between two real clusters while
//! one fault is injected — sink tablet servers hung, the sink cluster down,
//! source tablet servers and a master crashing in turn, a network partition
//! between ferry and the sink, the checkpoint directory read-only. During
//! each fault ferry is also killed with SIGKILL once and restarted from its
//! newest complete checkpoint, as an operator (or systemd) would.
//!
//! Each test asserts that ferry never exited on its own during the fault,
//! and that after the fault the sink equals the source cell by cell. Needs
//! root (namespaces, nftables, mounts).

// Test code: a failed unwrap is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::process::{tail, FerryCommand, FerryProcess};
use ferry_fixtures::workload::{Workload, WorkloadStats};
use ferry_testkit::fault::{NetNs, SmallFs};
use ferry_testkit::{DaemonKind, MiniCluster};
use kudu_client::{KuduClient, TableBuilder};
use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TABLE: &str = "faulty";
/// Workload rate: modest, since two tests (four clusters) share two cores.
const OPS_PER_SEC: u32 = 150;
/// How long the job may take to catch up once a fault is over.
const CATCH_UP: Duration = Duration::from_secs(150);

/// Blocking cluster operations from async test code.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

async fn create_table(client: &KuduClient) {
    let b = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 3, 0)
        .num_replicas(3);
    client.create_table(&b).await.expect("create table");
}

/// Everything one test runs: clusters, clients, checkpoint store, ferry,
/// and what it observed.
struct Harness {
    name: &'static str,
    src: MiniCluster,
    dst: MiniCluster,
    source: KuduClient,
    sink: KuduClient,
    checkpoints: PathBuf,
    store: CheckpointStore,
    logs: tempfile::TempDir,
    netns: Option<NetNs>,
    /// Its job id is known once ferry printed it (after it reached both
    /// clusters, which may be down when it starts).
    ferry: Option<FerryProcess>,
    /// The job of the run before the current one (restarts fall back to
    /// its checkpoints).
    prev_job: Option<JobId>,
    runs: usize,
    /// REST states seen while watching (RUNNING, RESTARTING, ...).
    states: BTreeSet<String>,
    started: Instant,
}

impl Harness {
    /// Clusters, the table on both sides, and a checkpoint directory
    /// (`checkpoints`, or a new temporary one).
    async fn new(
        name: &'static str,
        source_masters: usize,
        checkpoints: Option<PathBuf>,
    ) -> Harness {
        let started = Instant::now();
        let (src, dst) = blocking(|| ferry_fixtures::two_clusters_with(source_masters));
        let source = KuduClient::new(&src.master_addrs()).expect("source client");
        let sink = KuduClient::new(&dst.master_addrs()).expect("sink client");
        create_table(&source).await;
        create_table(&sink).await;
        let logs = tempfile::tempdir().expect("log dir");
        let checkpoints = checkpoints.unwrap_or_else(|| logs.path().join("chk"));
        let store = CheckpointStore::open_local(
            &StorageLocation::local(&checkpoints).expect("checkpoint location"),
            NonZeroUsize::MIN,
        );
        eprintln!(
            "[{name}] source {} sink {} (subnet {}), ferry logs under {}",
            src.master_addrs_joined(),
            dst.master_addrs_joined(),
            dst.subnet(),
            logs.path().display()
        );
        Harness {
            name,
            src,
            dst,
            source,
            sink,
            checkpoints,
            store,
            logs,
            netns: None,
            ferry: None,
            prev_job: None,
            runs: 0,
            states: BTreeSet::new(),
            started,
        }
    }

    fn say(&self, what: &str) {
        eprintln!(
            "[{} +{:>5.1}s] {what}",
            self.name,
            self.started.elapsed().as_secs_f64()
        );
    }

    /// Starts `ferry run` (resuming from `resume` if given) with short
    /// timeouts and windows, so recovery after a fault is quick.
    fn start_ferry(&mut self, resume: Option<&str>) {
        let mut cmd = FerryCommand::new(env!("CARGO_BIN_EXE_ferry"));
        let bind = match &self.netns {
            Some(ns) => {
                cmd = cmd.in_netns(ns);
                "0.0.0.0"
            }
            None => "127.0.0.1",
        };
        cmd = cmd.args([
            "run",
            "--job.sourceMasterAddresses",
            &self.src.master_addrs_joined(),
            "--job.sinkMasterAddresses",
            &self.dst.master_addrs_joined(),
            "--job.tableName",
            TABLE,
            "--job.checkpointsDirectory",
            &self.checkpoints.to_string_lossy(),
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "500",
            "--writer.operationTimeout",
            "5000",
            "--reader.scanRequestTimeout",
            "5000",
            "--restart-strategy.exponential-delay.initial-backoff",
            "500 ms",
            "--restart-strategy.exponential-delay.max-backoff",
            "5 s",
            "--rest.address",
            bind,
            "--metrics.kudu.pollIntervalMillis",
            "0",
            "-p",
            "2",
        ]);
        if let Some(path) = resume {
            cmd = cmd.args(["-s", path]);
        }
        self.runs += 1;
        let log = self.logs.path().join(format!("ferry-{}.log", self.runs));
        let ferry = cmd
            .log_level("warn,ferry_engine=info")
            .free_ports()
            .stderr_file(&log)
            .spawn();
        self.say(&format!(
            "ferry run #{} started (pid {}{})",
            self.runs,
            ferry.pid(),
            resume.map(|r| format!(", from {r}")).unwrap_or_default()
        ));
        self.ferry = Some(ferry);
    }

    fn ferry(&mut self) -> &mut FerryProcess {
        self.ferry.as_mut().expect("ferry started")
    }

    /// The current run's job id, once printed.
    fn job_id(&mut self) -> Option<JobId> {
        self.ferry().try_job_id().and_then(|id| id.parse().ok())
    }

    /// Panics (with the log's tail) if ferry has exited.
    fn assert_running(&mut self, when: &str) {
        self.ferry().assert_running(when);
    }

    /// SIGKILL, then a new `ferry run -s <newest complete checkpoint>`:
    /// the killed run's, or if it has none yet, its predecessor's.
    async fn kill_and_restart(&mut self) {
        self.assert_running("before the kill -9");
        let current = {
            self.ferry().kill9();
            self.job_id()
        };
        let mut found = None;
        for job in [current, self.prev_job].into_iter().flatten() {
            let latest = self
                .store
                .latest_complete(&job)
                .await
                .expect("list checkpoints");
            if let Some(c) = latest.checkpoint {
                found = Some((job, c));
                break;
            }
        }
        let (job, c) = found.expect("a complete checkpoint exists before the fault");
        self.prev_job = Some(job);
        let uri = c.location.to_uri();
        self.say(&format!(
            "killed ferry with SIGKILL; restarting from checkpoint {}",
            c.state.checkpoint_id
        ));
        self.start_ferry(Some(&uri));
    }

    /// The job's state from its REST API, if it answers.
    async fn rest_state(&mut self) -> Option<String> {
        let id = self.job_id()?;
        let (_, body) = self
            .ferry()
            .try_http("GET", &format!("/jobs/{id}/status"))?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["status"].as_str().map(str::to_string)
    }

    /// Watches for `d`: ferry must stay up; REST states are recorded.
    async fn watch(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.assert_running("during the fault");
            if let Some(s) = self.rest_state().await {
                if self.states.insert(s.clone()) {
                    self.say(&format!("job state {s}"));
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.assert_running("during the fault");
    }

    /// Waits until the job has a complete checkpoint past hybrid time
    /// `after` (everything written before it is in the sink).
    async fn wait_replicated_past(&mut self, after: u64, within: Duration, what: &str) {
        let deadline = Instant::now() + within;
        loop {
            self.assert_running(what);
            let latest = match self.job_id() {
                Some(job) => self.store.latest_complete(&job).await.ok(),
                None => None,
            };
            let done = latest
                .and_then(|l| l.checkpoint)
                .is_some_and(|c| c.state.last_end_timestamp.is_some_and(|t| t.raw() > after));
            if done {
                return;
            }
            if Instant::now() > deadline {
                let log = self.ferry().stderr_text();
                panic!(
                    "{what}: no complete checkpoint past {after} within {within:?}; ferry log:\n{}",
                    tail(&log, 60)
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Starts the workload and ferry, and waits until the snapshot is done
    /// and a diff window is checkpointed (a checkpoint to restart from).
    async fn start_replicating(&mut self) -> Workload {
        let workload = Workload::start(self.source.clone(), TABLE, OPS_PER_SEC, 17);
        tokio::time::sleep(Duration::from_secs(2)).await;
        self.start_ferry(None);
        let now = self.source.server_clock().await.expect("clock").raw();
        self.wait_replicated_past(now, Duration::from_secs(90), "replicating before the fault")
            .await;
        self.say("replicating; fault begins");
        workload
    }

    /// Stops the workload, waits until ferry caught up, and compares.
    async fn finish(&mut self, workload: Workload) -> WorkloadStats {
        self.say("fault over; waiting for ferry to catch up");
        tokio::time::sleep(Duration::from_secs(5)).await;
        let stats = workload.stop().await;
        let stopped_at = self.source.server_clock().await.expect("clock").raw();
        self.wait_replicated_past(stopped_at, CATCH_UP, "catching up after the fault")
            .await;
        let diff = compare_tables(&self.source, &self.sink, TABLE, TABLE).await;
        self.assert_running("after the fault");
        let exceptions = self.exception_entries().await;
        self.say(&format!(
            "caught up; {diff}; workload {} applied, {} failed (last error: {:?}); states seen {:?}; exception history of the last run: {exceptions:?} entries",
            stats.applied, stats.failed, stats.last_error, self.states
        ));
        assert!(diff.is_equal(), "[{}] {diff}", self.name);
        assert!(stats.applied > 1_000, "the workload ran: {stats:?}");
        stats
    }

    /// Entries of the current run's REST exception history, if it answers.
    async fn exception_entries(&mut self) -> Option<u64> {
        let id = self.job_id()?;
        let (_, body) = self
            .ferry()
            .try_http("GET", &format!("/jobs/{id}/exceptions"))?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["exceptionHistory"]["entries"]
            .as_array()
            .map(|e| e.len() as u64)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Logs of every run, for the failure report.
            for i in 1..=self.runs {
                let log = self.logs.path().join(format!("ferry-{i}.log"));
                eprintln!(
                    "[{}] --- ferry run #{i} log (tail) ---\n{}",
                    self.name,
                    tail_of(&log, 30)
                );
            }
        }
        // Ferry first: it lives in the namespace and holds the clusters.
        self.ferry = None;
        self.netns = None;
    }
}

/// The last `n` lines of a log file.
fn tail_of(path: &Path, n: usize) -> String {
    tail(&std::fs::read_to_string(path).unwrap_or_default(), n)
}

/// (a) Every sink tablet server hung (SIGSTOP) for 5 minutes, then resumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sink_tablet_servers_hung_for_five_minutes() {
    let mut h = Harness::new("sink-hung", 1, None).await;
    let workload = h.start_replicating().await;
    blocking(|| h.dst.pause_all(DaemonKind::TabletServer)).expect("SIGSTOP sink tservers");
    h.say("sink tablet servers SIGSTOPped");
    h.watch(Duration::from_secs(150)).await;
    h.kill_and_restart().await;
    h.watch(Duration::from_secs(150)).await;
    blocking(|| h.dst.resume_all(DaemonKind::TabletServer)).expect("SIGCONT sink tservers");
    h.say("sink tablet servers resumed");
    h.finish(workload).await;
    assert!(
        h.states.contains("RESTARTING"),
        "the hang reached ferry: states {:?}",
        h.states
    );
}

/// (b) The whole sink cluster stopped for a minute and started again at
/// the same addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sink_cluster_stopped_and_started_again() {
    let mut h = Harness::new("sink-down", 1, None).await;
    let workload = h.start_replicating().await;
    blocking(|| h.dst.stop_all()).expect("stop sink cluster");
    h.say("sink cluster stopped");
    h.watch(Duration::from_secs(30)).await;
    h.kill_and_restart().await;
    h.watch(Duration::from_secs(30)).await;
    blocking(|| h.dst.start_all()).expect("start sink cluster");
    h.say("sink cluster started again");
    h.watch(Duration::from_secs(5)).await;
    h.finish(workload).await;
    assert!(
        h.states.contains("RESTARTING"),
        "the outage reached ferry: states {:?}",
        h.states
    );
}

/// (c) Source with 3 masters and 3 tablet servers, 3 replicas per tablet:
/// every 10 s for 2 minutes one tablet server is killed and restarted
/// (leaders move), and once the leader master is killed (an election).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn source_tablet_servers_and_leader_master_crash_in_turn() {
    let mut h = Harness::new("source-churn", 3, None).await;
    let workload = h.start_replicating().await;
    let fault_start = Instant::now();
    for round in 0..12usize {
        let tick = fault_start + Duration::from_secs(10 * (round as u64 + 1));
        let ts = round % 3;
        blocking(|| h.src.kill(DaemonKind::TabletServer, ts)).expect("kill tserver");
        h.watch(Duration::from_secs(2)).await;
        blocking(|| h.src.start(DaemonKind::TabletServer, ts)).expect("restart tserver");
        h.say(&format!("source ts-{ts} killed and restarted"));
        if round == 4 {
            let leader = blocking(|| h.src.leader_master()).expect("leader master");
            blocking(|| h.src.kill(DaemonKind::Master, leader)).expect("kill leader master");
            h.say(&format!("source leader master-{leader} killed"));
            h.watch(Duration::from_secs(3)).await;
            blocking(|| h.src.start(DaemonKind::Master, leader)).expect("restart master");
            let now_leader = blocking(|| {
                h.src
                    .wait_for(Duration::from_secs(30), "a leader master", |c| {
                        Ok(c.leader_master().is_ok())
                    })
                    .and_then(|()| h.src.leader_master())
            })
            .expect("a leader master after the election");
            h.say(&format!("source leader master is now master-{now_leader}"));
        }
        if round == 7 {
            h.kill_and_restart().await;
        }
        let left = tick.saturating_duration_since(Instant::now());
        h.watch(left).await;
    }
    blocking(|| {
        h.src
            .wait_for(Duration::from_secs(60), "all tservers live", |c| {
                Ok(c.tserver_status()?.iter().filter(|t| t.live).count() == 3)
            })
    })
    .expect("source healthy again");
    h.finish(workload).await;
}

/// (d) ferry in its own network namespace; its traffic to the sink's
/// subnet dropped for 2 minutes, then let through again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn network_partition_between_ferry_and_sink() {
    let mut h = Harness::new("partition", 1, None).await;
    h.netns = Some(NetNs::create().expect("network namespace"));
    let workload = h.start_replicating().await;
    let subnet = h.dst.subnet();
    h.netns
        .as_ref()
        .expect("netns")
        .partition(&subnet)
        .expect("partition");
    h.say(&format!("traffic to the sink ({subnet}) dropped"));
    h.watch(Duration::from_secs(60)).await;
    h.kill_and_restart().await;
    h.watch(Duration::from_secs(60)).await;
    h.netns.as_ref().expect("netns").heal().expect("heal");
    h.say("partition healed");
    h.finish(workload).await;
    assert!(
        h.states.contains("RESTARTING"),
        "the partition reached ferry: states {:?}",
        h.states
    );
}

/// (e) The checkpoint directory read-only for ~40 s, then writable again:
/// the job must not run ahead of what it could make durable (a row written
/// during the outage is not in the sink before the directory is writable),
/// and recovers afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn checkpoint_directory_read_only_for_a_while() {
    let fs = SmallFs::mount(64 << 20).expect("small filesystem");
    let mut h = Harness::new("chk-readonly", 1, Some(fs.path().join("chk"))).await;
    let workload = h.start_replicating().await;
    blocking(|| fs.make_unwritable()).expect("read-only");
    h.say("checkpoint directory read-only");
    h.watch(Duration::from_secs(5)).await;

    // A marker row, written after the last checkpoint could be taken.
    const MARKER: i64 = -1;
    let table = h.source.open_table(TABLE).await.expect("open");
    let mut row = table.new_row();
    row.set_i64("id", MARKER).expect("id");
    row.set_str("s", "written while checkpoints fail")
        .expect("s");
    h.source
        .new_session()
        .apply(kudu_client::write::Operation::upsert(&table, row))
        .await
        .expect("marker");
    h.say("marker row written to the source");

    h.watch(Duration::from_secs(15)).await;
    h.kill_and_restart().await;
    h.watch(Duration::from_secs(20)).await;
    let in_sink = ferry_fixtures::read_all(&h.sink, TABLE).await;
    assert!(
        !in_sink.contains_key(&MARKER),
        "the marker reached the sink while no checkpoint could be written"
    );
    blocking(|| fs.make_writable()).expect("writable");
    h.say("checkpoint directory writable again");
    h.finish(workload).await;
    let in_sink = ferry_fixtures::read_all(&h.sink, TABLE).await;
    assert!(
        in_sink.contains_key(&MARKER),
        "the marker reached the sink after recovery"
    );
    drop(h);
    drop(fs);
}
