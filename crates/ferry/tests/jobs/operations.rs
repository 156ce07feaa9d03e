//! The operations surface against real Kudu (source and sink tables on one
//! single-tablet-server cluster, told apart by `job.tableSuffix`). Each
//! test uses its own table on the cluster the binary's tests share and
//! starts its own `ferry run` process (see [`Fixture`]) and checks one
//! behaviour:
//!
//! - REST: Flink's shapes for a running job; Flink's error bodies and codes
//!   for bad input.
//! - Prometheus: every documented name; the enumerator gauges advance and
//!   settle between windows; the tablet servers' write counters.
//! - The web page in headless Chromium.
//! - Savepoints: the periodic-savepoint script (curl + jq); `ferry stop
//!   --savepointPath`; `ferry run -s` resuming from the script's savepoint;
//!   `ferry cancel` keeping checkpoints.
//! - `ferry stop --drain-check`: refuses while a writer is active, passes
//!   once writes stopped.
//! - Session mode: `ferry server` runs submitted jobs (`ferry list` /
//!   `cancel`), answers a bad submission with a usage error, stops on
//!   SIGTERM.

use ferry_fixtures::process::FerryProcess;
use ferry_testkit::MiniCluster;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, KuduTable, TableBuilder};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_fixtures::http::{get_json, http};

async fn create_table(client: &KuduClient, name: &str) -> KuduTable {
    let b = TableBuilder::new(name, ferry_fixtures::small_schema())
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
    client.open_table(name).await.expect("open")
}

async fn upsert_rows(client: &KuduClient, table: &KuduTable, ids: std::ops::Range<i64>) {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for id in ids {
        let mut r = table.new_row();
        r.set_i64("id", id).expect("id");
        r.set_str("v", &format!("value {id}")).expect("v");
        s.apply(Operation::upsert(table, r)).await.expect("apply");
    }
    s.flush().await.expect("flush");
}

/// Rows in `name`; 0 while it does not exist (a job creates its sink table
/// once it runs, after `ferry run` printed the job id).
async fn count_rows(client: &KuduClient, name: &str) -> usize {
    let table = match client.open_table(name).await {
        Ok(table) => table,
        Err(kudu_client::Error::TableNotFound(_)) => return 0,
        Err(e) => panic!("open {name}: {e}"),
    };
    let mut scanner = client.scan_builder(&table).build().expect("scanner");
    let mut n = 0;
    while let Some(batch) = scanner.next_batch().await.expect("scan") {
        n += batch.num_rows();
    }
    n
}

/// Waits until the job's first window completed (lastEndTimestamp > 0).
fn wait_replicating(job: &FerryProcess) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = job.live();
        assert_eq!(v["state"], "RUNNING", "{v}");
        if v["last_end_timestamp"].as_u64().unwrap_or(0) > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "no window completed: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ferry(args: &[&str]) -> Output {
    crate::ferry().args(args).output()
}

pub(crate) fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn has(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// CI sets `CI=true`: a missing tool is then a failure, not a skip.
fn require_tool(cmd: &str) -> bool {
    if has(cmd) {
        return true;
    }
    assert!(
        std::env::var("CI").is_err(),
        "{cmd} is not installed (scripts/lib/setup.sh installs it)"
    );
    eprintln!("SKIPPED part of the test: {cmd} is not installed (run scripts/lib/setup.sh's ensure_toolchain)");
    false
}

/// Every metric of the Prometheus text, by name + labels.
fn scrape(port: u16) -> Vec<(String, f64)> {
    let (status, body) = http("GET", port, "/metrics", None);
    assert_eq!(status, 200);
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn metric(samples: &[(String, f64)], name: &str, label: &str) -> f64 {
    samples
        .iter()
        .find(|(n, _)| (n == name || n.starts_with(&format!("{name}{{"))) && n.contains(label))
        .unwrap_or_else(|| panic!("no {name} with {label}"))
        .1
}

fn metadata_dir(location: &str) -> PathBuf {
    PathBuf::from(location.trim_start_matches("file://"))
}

/// A table of `rows` rows on the shared cluster, and where jobs keep
/// their checkpoints.
pub(crate) struct Fixture {
    _cluster: Arc<MiniCluster>,
    masters: String,
    pub(crate) client: KuduClient,
    table: KuduTable,
    table_name: &'static str,
    dir: tempfile::TempDir,
    chk: PathBuf,
}

impl Fixture {
    pub(crate) async fn new(table_name: &'static str, rows: i64) -> Fixture {
        let cluster = tokio::task::block_in_place(crate::cluster);
        let masters = cluster.master_addrs_joined();
        let client = KuduClient::new(&cluster.master_addrs()).expect("client");
        let table = create_table(&client, table_name).await;
        upsert_rows(&client, &table, 0..rows).await;
        let dir = tempfile::tempdir().expect("tmp");
        let chk = dir.path().join("chk");
        Fixture {
            _cluster: cluster,
            masters,
            client,
            table,
            table_name,
            dir,
            chk,
        }
    }

    /// The sink table, `<table>_copy`.
    pub(crate) fn copy(&self) -> String {
        format!("{}_copy", self.table_name)
    }

    /// `ferry run` replicating the table into `<table>_copy`.
    pub(crate) fn start_job(&self, extra: &[&str]) -> FerryProcess {
        crate::ferry()
            .args([
                "run",
                "--job.sourceMasterAddresses",
                &self.masters,
                "--job.sinkMasterAddresses",
                &self.masters,
                "--job.tableName",
                self.table_name,
                "--job.tableSuffix",
                "_copy",
                "--job.createTable",
                "true",
                "--job.checkpointsDirectory",
                &self.chk.to_string_lossy(),
                "--job.discoveryIntervalSeconds",
                "1",
                "--job.checkpointingIntervalMillis",
                "300",
                "--metrics.kudu.pollIntervalMillis",
                "500",
                "-p",
                "2",
            ])
            .args(extra)
            .free_ports()
            .start()
    }

    /// A started job that completed its first window.
    fn replicating_job(&self, extra: &[&str]) -> FerryProcess {
        let job = self.start_job(extra);
        wait_replicating(&job);
        job
    }
}

/// The fixture of most tests: 500 rows in `table`, a job replicating them
/// with a default savepoint directory.
async fn ops_job(table: &'static str) -> (Fixture, FerryProcess) {
    let f = Fixture::new(table, 500).await;
    let default_sp = f.dir.path().join("default-savepoints");
    let job = f.replicating_job(&["--savepointPath", &default_sp.to_string_lossy()]);
    (f, job)
}

/// A savepoint into `target` through the periodic-savepoint script (curl +
/// jq), or the same loop in Rust when those tools are missing; returns its
/// location.
fn periodic_savepoint(job: &FerryProcess, target: &str) -> String {
    if require_tool("curl") && require_tool("jq") {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/scripts/savepoint.sh"
        );
        let out = Command::new("bash")
            .args([script, &job.jobmanager(), target])
            .output()
            .expect("script");
        let (o, e) = text(&out);
        assert!(out.status.success(), "script failed: {o}{e}");
        return o.trim().to_string();
    }
    let id = job.get_json("/jobs")["jobs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (s, b) = job.http(
        "POST",
        &format!("/jobs/{id}/savepoints"),
        Some(&format!("{{\"target-directory\":\"{target}\"}}")),
    );
    assert_eq!(s, 202, "{b}");
    let req = serde_json::from_str::<Value>(&b).unwrap()["request-id"]
        .as_str()
        .unwrap()
        .to_string();
    loop {
        let v = job.get_json(&format!("/jobs/{id}/savepoints/{req}"));
        if v["status"]["id"] == "COMPLETED" {
            break v["operation"]["location"]
                .as_str()
                .expect("location")
                .to_string();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `ferry stop --savepointPath DIR JOB_ID`; asserts it succeeded and
/// returns the path it printed.
fn ferry_stop(job: &FerryProcess, stop_dir: &Path) -> String {
    let out = ferry(&[
        "stop",
        "--jobmanager",
        &job.jobmanager(),
        "--savepointPath",
        &stop_dir.to_string_lossy(),
        &job.job_id(),
    ]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    o.lines()
        .find_map(|l| l.strip_prefix("Savepoint completed. Path: "))
        .expect("path line")
        .to_string()
}

/// The first `errors` message of a Flink error body.
fn first_error(status: u16, body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{status}: {body}"));
    v["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("errors in {body}"))[0]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_reports_a_running_job_in_flink_shapes() {
    let (_f, job) = ops_job("ops_rest").await;
    let id = job.job_id();
    let jobs = get_json(job.rest(), "/jobs");
    assert_eq!(jobs["jobs"][0]["id"], id.as_str());
    assert_eq!(jobs["jobs"][0]["status"], "RUNNING");
    let overview = get_json(job.rest(), "/jobs/overview");
    assert_eq!(overview["jobs"][0]["jid"], id.as_str());
    assert_eq!(overview["jobs"][0]["name"], "ferry-replication-ops_rest");
    assert!(overview["jobs"][0]["start-time"].as_u64().unwrap() > 0);
    assert_eq!(overview["jobs"][0]["end-time"], -1);
    let details = get_json(job.rest(), &format!("/jobs/{id}"));
    assert_eq!(details["state"], "RUNNING");
    assert_eq!(details["vertices"].as_array().unwrap().len(), 2);
    assert_eq!(
        get_json(job.rest(), &format!("/jobs/{id}/status"))["status"],
        "RUNNING"
    );
    let cfg = get_json(job.rest(), &format!("/jobs/{id}/checkpoints/config"));
    assert_eq!(cfg["interval"], 300);
    assert_eq!(cfg["externalization"]["delete_on_cancellation"], false);
    assert_eq!(get_json(job.rest(), "/overview")["jobs-running"], 1);
    assert!(get_json(job.rest(), "/config")["flink-version"]
        .as_str()
        .unwrap()
        .starts_with("ferry"));
    let cps = get_json(job.rest(), &format!("/jobs/{id}/checkpoints"));
    assert!(cps["counts"]["completed"].as_u64().unwrap() >= 1, "{cps}");
    assert!(
        cps["latest"]["completed"]["external_path"]
            .as_str()
            .unwrap()
            .contains("chk-"),
        "{cps}"
    );
    assert!(!cps["history"].as_array().unwrap().is_empty());
    let config = get_json(job.rest(), &format!("/jobs/{id}/config"));
    let strategy = config["execution-config"]["restart-strategy"]
        .as_str()
        .unwrap_or_default();
    assert!(
        strategy.starts_with("Exponential delay restart: initial backoff 1000 ms"),
        "{config}"
    );
    assert_eq!(
        config["execution-config"]["user-config"]["restart-strategy.type"], "exponential-delay",
        "{config}"
    );
    assert_eq!(cfg["tolerable_failed_checkpoints"], 0);
    // No failure yet: Flink's empty exceptions body.
    let ex = get_json(job.rest(), &format!("/jobs/{id}/exceptions"));
    assert_eq!(ex["root-exception"], Value::Null, "{ex}");
    assert_eq!(ex["all-exceptions"], serde_json::json!([]), "{ex}");
    assert_eq!(ex["exceptionHistory"]["entries"], serde_json::json!([]));
    assert_eq!(ex["exceptionHistory"]["truncated"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_rejects_bad_input_with_flink_error_bodies() {
    let (_f, job) = ops_job("ops_bad_input").await;
    let id = job.job_id();
    let (s, b) = http(
        "GET",
        job.rest(),
        "/jobs/00000000000000000000000000000000",
        None,
    );
    assert_eq!(s, 404);
    assert!(first_error(s, &b).contains("not found"), "{b}");
    let (s, b) = http(
        "GET",
        job.rest(),
        "/jobs/00000000000000000000000000000000/exceptions",
        None,
    );
    assert_eq!(s, 404, "{b}");
    let (s, b) = http(
        "GET",
        job.rest(),
        &format!("/jobs/{id}/exceptions?maxExceptions=-2"),
        None,
    );
    assert_eq!(s, 400, "{b}");
    assert!(first_error(s, &b).contains("maxExceptions"), "{b}");
    let (s, b) = http("GET", job.rest(), "/jobs/not-a-job-id/status", None);
    assert_eq!(s, 400);
    assert!(first_error(s, &b).contains("not-a-job-id"), "{b}");
    let sp_path = format!("/jobs/{id}/savepoints");
    let (s, b) = http(
        "POST",
        job.rest(),
        &sp_path,
        Some("{\"target-directory\": "),
    );
    assert_eq!(s, 400, "{b}");
    assert!(
        first_error(s, &b).contains("SavepointTriggerRequestBody"),
        "{b}"
    );
    let (s, b) = http(
        "POST",
        job.rest(),
        &sp_path,
        Some(r#"{"target_directory": "/tmp/x"}"#),
    );
    assert_eq!(s, 400, "{b}");
    assert!(first_error(s, &b).contains("target_directory"), "{b}");
    let (s, b) = http(
        "POST",
        job.rest(),
        &sp_path,
        Some(r#"{"target-directory": "hdfs:///x"}"#),
    );
    assert_eq!(s, 400, "{b}");
    assert!(first_error(s, &b).contains("hdfs"), "{b}");
    let (s, b) = http(
        "PATCH",
        job.rest(),
        &format!("/jobs/{id}?mode=explode"),
        None,
    );
    assert_eq!(s, 400, "{b}");
    let (s, b) = http(
        "GET",
        job.rest(),
        &format!("{sp_path}/0123456789abcdef0123456789abcdef"),
        None,
    );
    assert_eq!(s, 404, "{b}");
    let (s, _) = http("GET", job.rest(), "/no/such/route", None);
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_exports_every_documented_name() {
    let (_f, job) = ops_job("ops_prom_names").await;
    let id = job.job_id();
    let first = scrape(job.metrics());
    let src = "operator_name=\"Source:_KuduSource\"";
    let sink = "operator_name=\"Sink:_Writer\"";
    let jl = format!("job_id=\"{id}\"");
    for name in [
        "flink_jobmanager_job_uptime",
        "flink_jobmanager_job_downtime",
        "flink_jobmanager_job_runningTime",
        "flink_jobmanager_job_restartingTime",
        "flink_jobmanager_job_numRestarts",
        "flink_jobmanager_job_fullRestarts",
        "flink_jobmanager_job_lastCheckpointDuration",
        "flink_jobmanager_job_lastCheckpointSize",
        "flink_jobmanager_job_numberOfCompletedCheckpoints",
        "flink_jobmanager_job_numberOfFailedCheckpoints",
        "flink_jobmanager_job_operator_coordinator_enumerator_lastEndTimestamp",
        "flink_jobmanager_job_operator_coordinator_enumerator_pendingCount",
        "flink_jobmanager_job_operator_coordinator_enumerator_unassignedCount",
        "flink_jobmanager_job_operator_coordinator_enumerator_pendingRemovalCount",
        "ferry_rows_read_total",
        "ferry_rows_upserted_total",
        "ferry_windows_completed_total",
        "ferry_restarts_total",
        "ferry_job_running",
        "ferry_job_restarting",
    ] {
        metric(&first, name, &jl);
        assert!(first.iter().any(|(n, _)| n.starts_with(name)
            && n.contains("job_name=\"ferry-replication-ops_prom_names\"")));
    }
    // A running job that never failed: up, not down, not restarting.
    assert!(metric(&first, "flink_jobmanager_job_uptime", &jl) > 0.0);
    assert_eq!(metric(&first, "flink_jobmanager_job_downtime", &jl), 0.0);
    assert_eq!(
        metric(&first, "flink_jobmanager_job_restartingTime", &jl),
        0.0
    );
    assert_eq!(metric(&first, "flink_jobmanager_job_numRestarts", &jl), 0.0);
    assert_eq!(metric(&first, "ferry_job_restarting", &jl), 0.0);
    metric(
        &first,
        "flink_taskmanager_job_task_operator_numRecordsOutPerSecond",
        src,
    );
    metric(
        &first,
        "flink_taskmanager_job_task_operator_numRecordsInPerSecond",
        sink,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_enumerator_gauges_advance_and_settle_between_windows() {
    let (_f, job) = ops_job("ops_prom_gauges").await;
    let id = job.job_id();
    let jl = format!("job_id=\"{id}\"");
    let last_end_1 = metric(
        &scrape(job.metrics()),
        "flink_jobmanager_job_operator_coordinator_enumerator_lastEndTimestamp",
        &jl,
    );
    assert!(last_end_1 > 1.6e12, "epoch ms: {last_end_1}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut advanced, mut idle) = (false, false);
    while !(advanced && idle) {
        assert!(
            Instant::now() < deadline,
            "advanced {advanced}, idle {idle}"
        );
        std::thread::sleep(Duration::from_millis(300));
        let again = scrape(job.metrics());
        let c = |n: &str| {
            metric(
                &again,
                &format!("flink_jobmanager_job_operator_coordinator_enumerator_{n}"),
                &jl,
            )
        };
        advanced |= c("lastEndTimestamp") > last_end_1;
        idle |= c("pendingCount") == 0.0
            && c("unassignedCount") == 0.0
            && c("pendingRemovalCount") == 0.0;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_exports_tablet_server_write_counters() {
    let (_f, job) = ops_job("ops_prom_tservers").await;
    // Polled every 500 ms.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = scrape(job.metrics());
        let find = |cluster: &str, table: &str| {
            m.iter()
                .find(|(n, _)| {
                    n.starts_with("ferry_kudu_table_rows_upserted{")
                        && n.contains(&format!("cluster=\"{cluster}\""))
                        && n.contains(&format!("table_name=\"{table}\""))
                })
                .map(|s| s.1)
        };
        if find("source", "ops_prom_tservers").unwrap_or(0.0) >= 500.0
            && find("sink", "ops_prom_tservers_copy").unwrap_or(0.0) >= 500.0
        {
            for kind in ["inserted", "updated", "deleted"] {
                assert!(
                    m.iter()
                        .any(|(n, _)| n.starts_with(&format!("ferry_kudu_table_rows_{kind}{{"))),
                    "{kind}"
                );
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no tablet server counters: {:?}",
            job.live()["kudu"]
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_page_shows_the_job_and_a_lag_chart() {
    if !require_tool("chromium") {
        return;
    }
    let (_f, job) = ops_job("ops_web").await;
    let id = job.job_id();
    // A few lag samples (one a second) for the chart.
    std::thread::sleep(Duration::from_secs(2));
    let profile = tempfile::tempdir().expect("profile");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            &format!("--user-data-dir={}", profile.path().display()),
            "--virtual-time-budget=3000",
            "--dump-dom",
            &format!("http://127.0.0.1:{}/", job.rest()),
        ])
        .output()
        .expect("chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains(&id),
        "job id on the page: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dom.contains("RUNNING"), "state on the page");
    let points: usize = dom
        .split("data-points=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|n| n.parse().ok())
        .expect("lag chart element");
    assert!(points >= 2, "lag chart has {points} points");
    assert!(dom.contains("<polyline"), "chart drawn");
    // The throttling card: the job's limits (unlimited here) and the time
    // spent throttled.
    assert!(dom.contains("<td>whole job</td>"), "throttle card");
    assert!(
        dom.contains("(throttled: reading 0.0 s, writing 0.0 s)"),
        "time throttled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn savepoint_script_writes_a_complete_savepoint() {
    let (f, job) = ops_job("ops_script").await;
    let target = format!(
        "file://{}",
        f.dir.path().join("script-savepoints").display()
    );
    let location = periodic_savepoint(&job, &target);
    assert!(location.starts_with(&target), "{location}");
    assert!(
        metadata_dir(&location).join("_metadata").is_file(),
        "{location}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn savepoint_script_writes_a_complete_savepoint_to_s3() {
    use ferry_engine::checkpoint::{CheckpointStore, SnapshotKind, StorageLocation};
    let s3 = ferry_testkit::S3Server::start(&format!("ops-{}", std::process::id()))
        .expect("s3s-fs (run scripts/test once to install it)");
    s3.create_bucket("ferry-ops").expect("bucket");
    let f = Fixture::new("ops_s3", 100).await;
    let job = f.replicating_job(&[
        &format!("-Ds3.endpoint={}", s3.endpoint()),
        &format!("-Ds3.access-key={}", s3.access_key()),
        &format!("-Ds3.secret-key={}", s3.secret_key()),
    ]);
    let target = "s3://ferry-ops/cron";
    let location = periodic_savepoint(&job, target);
    assert!(
        location.starts_with(&format!("{target}/savepoint-")),
        "{location}"
    );
    // Read back through the S3 API: complete and valid.
    let resolver = ferry_fixtures::s3::resolver(&s3);
    let base = StorageLocation::parse(target).expect("location");
    let store = CheckpointStore::open(&base, std::num::NonZeroUsize::MIN, resolver).expect("store");
    let loaded = store
        .load(&location)
        .await
        .expect("savepoint in the bucket");
    assert_eq!(loaded.state.kind, SnapshotKind::Savepoint);
    drop(job);
    let _ = s3.destroy();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_with_savepoint_prints_the_path_and_ends_the_process() {
    let (f, mut job) = ops_job("ops_stop").await;
    let stop_dir = f.dir.path().join("stop-savepoints");
    let path = ferry_stop(&job, &stop_dir);
    assert!(metadata_dir(&path).starts_with(&stop_dir), "{path}");
    assert!(metadata_dir(&path).join("_metadata").is_file());
    let status = job.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?} {}", job.stdout_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_from_a_savepoint_resumes_without_a_new_snapshot() {
    let (f, mut job) = ops_job("ops_resume").await;
    let target = format!(
        "file://{}",
        f.dir.path().join("script-savepoints").display()
    );
    let location = periodic_savepoint(&job, &target);
    ferry_stop(&job, &f.dir.path().join("stop-savepoints"));
    let status = job.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?} {}", job.stdout_text());

    upsert_rows(&f.client, &f.table, 500..600).await;
    let resumed = f.start_job(&["-s", &location]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while count_rows(&f.client, &f.copy()).await < 600 {
        assert!(Instant::now() < deadline, "resumed job did not catch up");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let cps = resumed.get_json(&format!("/jobs/{}/checkpoints", resumed.job_id()));
    assert_eq!(cps["counts"]["restored"], 1, "{cps}");
    assert_eq!(cps["latest"]["restored"]["is_savepoint"], true);
    assert_eq!(
        cps["latest"]["restored"]["external_path"]
            .as_str()
            .map(metadata_dir),
        Some(metadata_dir(&location))
    );
    let live = resumed.live();
    assert_eq!(
        live["totals"]["snapshot_windows"], 0,
        "resumed without a new snapshot: {live}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_the_job_and_keeps_its_checkpoints() {
    let (f, mut job) = ops_job("ops_cancel").await;
    let id = job.job_id();
    // At least one checkpoint to keep.
    let deadline = Instant::now() + Duration::from_secs(30);
    while get_json(job.rest(), &format!("/jobs/{id}/checkpoints"))["counts"]["completed"]
        .as_u64()
        .unwrap_or(0)
        == 0
    {
        assert!(Instant::now() < deadline, "no checkpoint completed");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = ferry(&["cancel", "-m", &job.jobmanager(), &id]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    assert!(o.contains(&format!("Cancelled job {id}.")), "{o}");
    let status = job.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    let kept: Vec<_> = std::fs::read_dir(f.chk.join(&id))
        .expect("job checkpoint dir")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name().to_string_lossy().starts_with("chk-")
                && e.path().join("_metadata").is_file()
        })
        .collect();
    assert!(!kept.is_empty(), "retained checkpoints after cancel");
}

/// `ferry stop --drain-check` with these timeouts, off the async runtime.
async fn drain_check_stop(job: &FerryProcess, extra: &[&str]) -> Output {
    let mut args: Vec<String> = ["stop", "-m", &job.jobmanager(), "--drain-check"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(job.job_id());
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ferry(&args)
    })
    .await
    .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_check_refuses_while_the_source_is_written() {
    let f = Fixture::new("drain_refuses", 200).await;
    let job = f.replicating_job(&[]);
    // A writer keeps the source busy.
    let running = Arc::new(AtomicBool::new(true));
    let writer = {
        let (client, table, running) = (f.client.clone(), f.table.clone(), running.clone());
        tokio::spawn(async move {
            let mut s = client
                .new_session_with(
                    SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground),
                )
                .expect("session");
            let mut id = 1000;
            while running.load(Ordering::Relaxed) {
                let mut r = table.new_row();
                r.set_i64("id", id).expect("id");
                r.set_str("v", "busy").expect("v");
                s.apply(Operation::upsert(&table, r)).await.expect("apply");
                s.flush().await.expect("flush");
                id += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let out = drain_check_stop(&job, &["--drain-timeout", "6", "--quiet-period", "2"]).await;
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(1), "refuses while written: {o}{e}");
    assert!(o.contains("[1/4]"), "{o}");
    assert!(
        e.contains("timed out")
            && e.contains("still being written")
            && e.contains("'drain_refuses'"),
        "{e}"
    );
    assert_eq!(job.job_status(), "RUNNING");
    running.store(false, Ordering::Relaxed);
    writer.await.expect("writer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_check_passes_once_writes_stopped_and_stops_with_savepoint() {
    let f = Fixture::new("drain_passes", 200).await;
    let mut job = f.replicating_job(&[]);
    upsert_rows(&f.client, &f.table, 1000..1100).await;
    let sp = f.dir.path().join("drained");
    let out = drain_check_stop(
        &job,
        &[
            "--drain-timeout",
            "90",
            "--quiet-period",
            "2",
            "-p",
            &sp.to_string_lossy(),
        ],
    )
    .await;
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    for step in [
        "[1/4]",
        "[2/4]",
        "[3/4]",
        "[4/4]",
        "Savepoint completed. Path: file://",
    ] {
        assert!(o.contains(step), "{step} in {o}");
    }
    let status = job.wait_exit(Duration::from_secs(30));
    assert!(status.success());
    assert_eq!(
        count_rows(&f.client, f.table_name).await,
        count_rows(&f.client, &f.copy()).await,
        "drained: sink equals source"
    );
}

/// A session-mode `ferry server` (stopped by SIGTERM in the tests).
fn start_server() -> FerryProcess {
    crate::ferry()
        .arg("server")
        .rest_port(ferry_fixtures::free_port())
        .arg(format!("-Dmetrics.port={}", ferry_fixtures::free_port()))
        .start_server()
}

/// `ferry run --jobmanager ... --detached` of `f`'s table into
/// `<table><suffix>`; returns the job id.
fn submit(server: &FerryProcess, f: &Fixture, suffix: &str) -> String {
    let out = ferry(&[
        "run",
        "--jobmanager",
        &server.jobmanager(),
        "--detached",
        "--job.sourceMasterAddresses",
        &f.masters,
        "--job.sinkMasterAddresses",
        &f.masters,
        "--job.tableName",
        f.table_name,
        "--job.tableSuffix",
        suffix,
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        &f.chk.to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
    ]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    o.trim().rsplit(' ').next().unwrap().to_string()
}

/// SIGTERM; the exit status.
fn terminate(server: &mut FerryProcess) -> std::process::ExitStatus {
    server.sigterm();
    server.wait_exit(Duration::from_secs(30))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_server_runs_submitted_jobs_listed_and_cancelled() {
    let f = Fixture::new("session_list", 200).await;
    let mut server = start_server();
    let a = submit(&server, &f, "_s1");
    let b = submit(&server, &f, "_s2");
    assert_ne!(a, b);
    let jm = server.jobmanager();
    let out = ferry(&["list", "-m", &jm]);
    let (o, _) = text(&out);
    assert!(
        o.contains(&a) && o.contains(&b) && o.contains("(RUNNING)"),
        "{o}"
    );
    let out = ferry(&["cancel", "-m", &jm, &a]);
    assert!(out.status.success(), "{:?}", text(&out));
    let out = ferry(&["list", "-m", &jm, "--all"]);
    let (o, _) = text(&out);
    assert!(
        o.contains(&format!("{a} : ferry-replication-session_list (CANCELED)")),
        "{o}"
    );
    terminate(&mut server);
}

#[test]
fn session_server_answers_a_bad_submission_with_a_usage_error() {
    let mut server = start_server();
    let out = ferry(&["run", "-m", &server.jobmanager(), "--job.tableName", "x"]);
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    terminate(&mut server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_server_stops_on_sigterm_and_cancels_its_jobs() {
    let f = Fixture::new("session_sigterm", 200).await;
    let mut server = start_server();
    submit(&server, &f, "_s2");
    let deadline = Instant::now() + Duration::from_secs(60);
    while count_rows(&f.client, "session_sigterm_s2").await == 0 {
        assert!(Instant::now() < deadline, "the submitted job wrote nothing");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let status = terminate(&mut server);
    assert!(status.success(), "{status:?}");
}
