//! Kubernetes HA (issue 32, item 1) against a real `kube-apiserver` with
//! its etcd (ferry-testkit's `KubeServer`, one for the module, RBAC on) and
//! two real Kudu clusters; `ferry` processes play the pods (`POD_NAME`,
//! the namespace and a kubeconfig of the RBAC-bound identity `ferry`).
//! The tests take turns on the server (one holds [`TURN`] at a time): one
//! of them stops it.
//!
//! - `kill_9_of_the_leader`: `ferry run` holds the Lease while a mixed
//!   writer runs; it is killed with SIGKILL, `ferry standby` takes over
//!   (generation 2 in the Lease's `leaseTransitions`, its pod in
//!   `holderIdentity`), and the sink equals the source after.
//! - `a_resumed_leader_writes_nothing`: the leader is frozen with SIGSTOP,
//!   the standby takes over while changes arrive, the leader is thawed:
//!   it exits fenced with no further row or checkpoint.
//! - `api_server_outage`: the API server is stopped for 20 s
//!   (`FERRY_HA_OUTAGE_SECS`; `bench/ha-outage` runs 2 minutes) under a
//!   writer: the leader keeps replicating while its lease is valid and
//!   stops writing when it cannot renew (no checkpoint of its generation
//!   after its renew deadline), the standby never claims while the
//!   server is away (no two writers) and neither process exits; once the
//!   server is back the job runs again and the sink equals the source.
//! - `missing_rbac_permission`: an identity that may only read leases
//!   gets a message naming the verb, the resource, the namespace and
//!   itself; nothing is written (no Lease, no sink table, no checkpoint).

use crate::ha_kit::{checkpoints_in, now_ms, stdout_line};
use ferry_engine::checkpoint::{CheckpointStore, JobId, JobState};
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use ferry_fixtures::{free_port, Shared};
use ferry_kube::{lease_name, KubeLease, KubeSettings};
use ferry_testkit::kube::{Identity, NAMESPACE};
use ferry_testkit::{KubeServer, MiniCluster};
use kudu_client::{KuduClient, TableBuilder};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const OPS_PER_SEC: u32 = 200;
/// Flink's Kubernetes keys, scaled down: a 6 s lease renewed every 2 s,
/// the leader writing at most 4 s past its last renewal.
const LEASE_S: u64 = 6;
const RENEW_DEADLINE: &str = "4 s";
const RETRY: &str = "2 s";

static KUBE: Shared<KubeServer> = Shared::new();
/// One test at a time on the shared API server.
pub(crate) static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub(crate) fn kube() -> Arc<KubeServer> {
    KUBE.get(|| {
        KubeServer::start(&format!("dr-{}", std::process::id()))
            .expect("kube-apiserver and etcd (run scripts/test once to build them)")
    })
}

/// The Kubernetes HA keys of the drills (namespace and Flink's timing).
pub(crate) fn kube_args() -> Vec<String> {
    let lease = format!("{LEASE_S} s");
    [
        "--high-availability.type",
        "kubernetes",
        "--kubernetes.namespace",
        NAMESPACE,
        "--high-availability.kubernetes.leader-election.lease-duration",
        &lease,
        "--high-availability.kubernetes.leader-election.renew-deadline",
        RENEW_DEADLINE,
        "--high-availability.kubernetes.leader-election.retry-period",
        RETRY,
    ]
    .map(String::from)
    .to_vec()
}

struct Setup {
    kube: Arc<KubeServer>,
    clusters: Arc<(MiniCluster, MiniCluster)>,
    source: KuduClient,
    sink: KuduClient,
    table: String,
    dir: tempfile::TempDir,
    job_args: Vec<String>,
    job: JobId,
}

impl Setup {
    async fn new(table: &str) -> Setup {
        let kube = tokio::task::block_in_place(kube);
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
        job_args.extend(kube_args());
        let job = ferry_engine::config::ha_job_id(&format!("ferry-replication-{table}"));
        Setup {
            kube,
            clusters: clusters.clone(),
            source,
            sink,
            table: table.to_string(),
            dir,
            job_args,
            job,
        }
    }

    /// `ferry <verb>` as pod `pod` with `identity`'s kubeconfig (from the
    /// environment, as in a pod), logging at info level.
    fn spawn(&self, verb: &str, pod: &str, identity: Identity, extra: &[&str]) -> FerryProcess {
        crate::ferry()
            .arg(verb)
            .args(&self.job_args)
            .args(extra)
            .env("POD_NAME", pod)
            .env(
                "KUBECONFIG",
                self.kube.kubeconfig(identity).to_string_lossy(),
            )
            .rest_port(free_port())
            .log_level("info")
            .stderr_file(&self.dir.path().join(format!("{pod}.err")))
            .spawn()
    }

    fn chk(&self) -> PathBuf {
        self.dir.path().join("chk")
    }

    fn chk_arg(&self) -> String {
        self.chk().to_string_lossy().to_string()
    }

    /// The job's Lease, read as the admin.
    fn lease(&self) -> KubeLease {
        KubeLease::new(KubeSettings {
            namespace: NAMESPACE.to_string(),
            config_file: Some(self.kube.kubeconfig(Identity::Admin)),
            lease_name: lease_name(
                &format!("ferry-replication-{}", self.table),
                &self.job.to_string(),
            ),
            lease_duration: Duration::from_secs(LEASE_S),
            call_timeout: Duration::from_secs(5),
        })
    }

    /// The Lease's (generation, holder).
    async fn holder(&self) -> Option<(u64, String)> {
        let record = self
            .lease()
            .newest()
            .await
            .map_err(|f| f.error)
            .expect("read the Lease");
        record.map(|r| (r.generation, r.owner))
    }

    fn store(&self) -> CheckpointStore {
        crate::ha_kit::local_store(&self.chk())
    }

    /// Waits until a complete checkpoint of `generation` ends past `ts`.
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

    /// Every valid checkpoint state of the job.
    fn all_checkpoints(&self) -> Vec<JobState> {
        checkpoints_in(&self.chk().join(self.job.to_string()))
    }
}

/// The rows `ferry` says its generation wrote (its last stderr line).
fn rows_written(err: &str) -> u64 {
    err.lines()
        .find_map(|l| l.split("rows written by this instance: ").nth(1))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no rows-written line in stderr:\n{err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_the_leader() {
    // The Setup holds the shared server while this test waits its turn.
    let s = Setup::new("kube_kill").await;
    let _turn = TURN.lock().await;
    let writer = Workload::start(s.source.clone(), &s.table, OPS_PER_SEC, 31);
    let mut leader = s.spawn("run", "ferry-0", Identity::Ferry, &[]);
    let line = stdout_line(&leader, "JobID", Duration::from_secs(60)).await;
    assert!(line.ends_with(&s.job.to_string()), "{line}");
    s.caught_up(1, s.clock().await, Duration::from_secs(90))
        .await;
    let (generation, owner) = s.holder().await.expect("a Lease");
    assert_eq!(generation, 1);
    assert!(owner.starts_with("ferry-0/"), "holderIdentity {owner}");

    let standby = s.spawn(
        "standby",
        "ferry-1",
        Identity::Ferry,
        &["--from", &s.chk_arg()],
    );
    tokio::time::sleep(Duration::from_secs(LEASE_S + 2)).await;
    assert!(
        standby.stdout_lines().is_empty(),
        "the standby must wait while the leader renews; stderr:\n{}",
        standby.stderr_text()
    );

    leader.signal(libc::SIGKILL);
    let killed = Instant::now();
    let line = stdout_line(&standby, "JobID", Duration::from_secs(40)).await;
    assert!(line.ends_with(&s.job.to_string()), "same job id: {line}");
    let rto = stdout_line(&standby, "RTO: ", Duration::from_secs(40)).await;
    eprintln!(
        "kube kill -9 takeover: {rto} ({:?} from the kill)",
        killed.elapsed()
    );
    let (generation, owner) = s.holder().await.expect("a Lease");
    assert_eq!(generation, 2, "leaseTransitions counts the takeover");
    assert!(owner.starts_with("ferry-1/"), "holderIdentity {owner}");

    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = writer.stop().await;
    assert!(stats.applied > 500, "changes flowed: {stats:?}");
    let stopped = s.clock().await;
    s.caught_up(2, stopped, Duration::from_secs(90)).await;
    s.assert_sink_equals_source().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resumed_leader_writes_nothing() {
    // The Setup holds the shared server while this test waits its turn.
    let s = Setup::new("kube_pause").await;
    let _turn = TURN.lock().await;
    let writer = Workload::start(s.source.clone(), &s.table, OPS_PER_SEC, 32);
    let mut leader = s.spawn("run", "ferry-0", Identity::Ferry, &[]);
    stdout_line(&leader, "JobID", Duration::from_secs(60)).await;
    let standby = s.spawn(
        "standby",
        "ferry-1",
        Identity::Ferry,
        &["--from", &s.chk_arg()],
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    // An idle leader: no write can be in flight at the pause.
    let first = writer.stop().await;
    s.caught_up(1, s.clock().await, Duration::from_secs(90))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let live =
        tokio::task::block_in_place(|| leader.get_json(&format!("/ferry/jobs/{}/live", s.job)));
    let t = &live["totals"];
    let before_pause =
        t["rows_upserted"].as_u64().unwrap_or(0) + t["rows_deleted"].as_u64().unwrap_or(0);
    assert!(before_pause > 0, "the leader replicated rows");

    leader.signal(libc::SIGSTOP);
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
    let rto = stdout_line(&standby, "RTO: ", Duration::from_secs(60)).await;
    eprintln!("kube SIGSTOP takeover: {rto}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let resumed_at = now_ms();
    leader.signal(libc::SIGCONT);

    // The resumed leader stops its job, fenced, having written nothing,
    // and stands by (it may win the lease again later).
    tokio::task::block_in_place(|| {
        leader.wait_stderr("standing by for the lease", Duration::from_secs(30))
    });
    let err = leader.stderr_text();
    assert!(
        err.contains("fenced") || err.contains("lease lost"),
        "stderr:\n{err}"
    );
    assert_eq!(rows_written(&err), before_pause, "no row after the pause");
    assert!(
        leader.exit_status().is_none(),
        "it stands by, not exits:\n{err}"
    );

    tokio::time::sleep(Duration::from_secs(2)).await;
    let stats = writer.stop().await;
    assert!(
        stats.applied > 200,
        "changes flowed during the takeover: {stats:?}"
    );
    s.caught_up(2, s.clock().await, Duration::from_secs(90))
        .await;
    let states = s.all_checkpoints();
    for st in states.iter().filter(|st| st.generation == 1) {
        assert!(
            st.created_at_ms < resumed_at,
            "checkpoint {} of generation 1 written after the resume",
            st.checkpoint_id
        );
    }
    s.assert_sink_equals_source().await;
    assert_eq!(s.holder().await.map(|h| h.0), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn api_server_outage() {
    // The Setup holds the shared server while this test waits its turn.
    let s = Setup::new("kube_outage").await;
    let _turn = TURN.lock().await;
    let writer = Workload::start(s.source.clone(), &s.table, OPS_PER_SEC, 34);
    let mut pods = vec![
        (
            "run",
            "ferry-0",
            s.spawn("run", "ferry-0", Identity::Ferry, &[]),
        ),
        (
            "standby",
            "ferry-1",
            s.spawn(
                "standby",
                "ferry-1",
                Identity::Ferry,
                &["--from", &s.chk_arg()],
            ),
        ),
    ];
    stdout_line(&pods[0].2, "JobID", Duration::from_secs(60)).await;
    s.caught_up(1, s.clock().await, Duration::from_secs(90))
        .await;

    let stopped_at = now_ms();
    let outage = crate::ha_outage();
    s.kube.stop_api().expect("stop the API server");
    tokio::time::sleep(outage).await;
    // While the server is away: the leader wrote while its lease was valid
    // and nothing after its renew deadline; nobody else wrote.
    let deadline_ms = stopped_at + 4_000 + 1_000;
    let states = s.all_checkpoints();
    assert!(
        states
            .iter()
            .any(|st| st.generation == 1 && st.created_at_ms > stopped_at),
        "the leader kept going while its lease was valid"
    );
    for st in &states {
        assert_eq!(
            st.generation, 1,
            "no other generation while the server is away"
        );
        assert!(
            st.created_at_ms <= deadline_ms,
            "checkpoint {} written {} ms after the API server stopped",
            st.checkpoint_id,
            st.created_at_ms - stopped_at
        );
    }
    tokio::task::block_in_place(|| s.kube.restart_api()).expect("restart the API server");
    let back = Instant::now();

    // Nobody gave up: neither pod's process exited during the outage (a
    // fenced leader stands by, a standby never exits on a coordination
    // error), so nothing needs a restart to run the job again.
    for (verb, pod, process) in &mut pods {
        process.assert_running(&format!("{pod} ({verb}) after the outage"));
    }
    let state = s
        .caught_up(2, s.clock().await, Duration::from_secs(120))
        .await;
    eprintln!(
        "kube outage of {outage:?}: generation 2 running {:?} after the API server came back",
        back.elapsed()
    );
    let (generation, _) = s.holder().await.expect("a Lease");
    assert_eq!(generation, state.generation);
    let stats = writer.stop().await;
    assert!(stats.applied > 1000, "changes flowed: {stats:?}");
    s.caught_up(2, s.clock().await, Duration::from_secs(90))
        .await;
    s.assert_sink_equals_source().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn missing_rbac_permission() {
    // The Setup holds the shared server while this test waits its turn.
    let s = Setup::new("kube_rbac").await;
    let _turn = TURN.lock().await;
    // A refused claim is a coordination error: the instance names it and
    // keeps trying (an operator fixes the Role without restarting it).
    let mut reader = s.spawn("run", "ferry-0", Identity::Reader, &[]);
    tokio::task::block_in_place(|| {
        reader.wait_stderr("missing RBAC permission", Duration::from_secs(60))
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    let err = reader.stderr_text();
    assert!(reader.exit_status().is_none(), "it keeps trying:\n{err}");
    reader.kill9();
    assert!(
        err.contains(&format!(
            "missing RBAC permission: user \"ferry-reader\" may not create leases (coordination.k8s.io) in namespace '{NAMESPACE}'"
        )),
        "stderr:\n{err}"
    );
    assert_eq!(
        err.matches("missing RBAC permission").count(),
        1,
        "said once:\n{err}"
    );
    assert_eq!(s.holder().await, None, "no Lease written");
    assert!(s.all_checkpoints().is_empty(), "no checkpoint");
    assert!(
        !s.sink.table_exists(&s.table).await.expect("list"),
        "no sink table created"
    );
    // An API server that is not there is named as such.
    let bad = s.dir.path().join("kubeconfig-nowhere");
    let text = std::fs::read_to_string(s.kube.kubeconfig(Identity::Ferry)).expect("kubeconfig");
    let dead = format!("https://127.0.0.1:{}", free_port());
    std::fs::write(&bad, text.replace(&s.kube.server_url(), &dead)).expect("write");
    let out = crate::ferry()
        .arg("run")
        .args(&s.job_args)
        .args(["--kubernetes.config.file", &bad.to_string_lossy()])
        .env("KUBECONFIG", "/nonexistent")
        .rest_port(free_port())
        .output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    assert!(
        err.contains(&format!(
            "the Kubernetes API server at {dead} is unreachable"
        )),
        "stderr:\n{err}"
    );
}
