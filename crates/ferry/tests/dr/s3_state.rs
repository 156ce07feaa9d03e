//! State on an object store (issue 11, item 1), against a real S3 server
//! (`s3s-fs`, started by the test kit) and real Kudu clusters:
//!
//! - a job with checkpoints and savepoints on `s3://` is killed with
//!   SIGKILL; a truncated `_metadata`, a directory without `_metadata` and a
//!   `_metadata` with a flipped byte are then planted in the bucket (through
//!   the S3 API); the newest *complete* checkpoint is chosen past them, each
//!   skipped with a warning naming it; the job resumes from it, and after
//!   the writer stops the sink equals the source cell by cell; a SIGTERM
//!   then stops it with a savepoint on `s3://`;
//! - the S3 server is down for a few seconds while the job runs: checkpoints
//!   fail (in seconds, not minutes), the job restarts and waits, nothing
//!   ferry prints or serves holds the secret, and once the server is back
//!   the job checkpoints again and the sink equals the source;
//! - wrong credentials, an unknown bucket and an unreachable endpoint each
//!   stop `ferry run` at start with exit code 1 and a message naming the
//!   location, and the secret key appears in no output.

use ferry_engine::checkpoint::{
    CheckpointStore, JobId, SkipReason, StorageLocation, StoreResolver,
};
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::Workload;
use ferry_testkit::S3Server;
use kudu_client::{KuduClient, TableBuilder};
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TABLE: &str = "s3_state";
const BUCKET: &str = "ferry-state";
const CHECKPOINTS: &str = "s3://ferry-state/prod/checkpoints";
const SAVEPOINTS: &str = "s3://ferry-state/prod/savepoints";

fn s3_server(name: &str) -> S3Server {
    let name = format!("{name}-{}", std::process::id());
    let server = S3Server::start(&name).expect("s3s-fs (run scripts/test once to install it)");
    server.create_bucket(BUCKET).expect("bucket");
    server
}

/// Starts `ferry run` with checkpoints and savepoints in the bucket, its
/// stderr in `log`. The S3 settings come as `-D` keys, or (`via_env`) as
/// `AWS_*` variables.
fn start_ferry(
    s3: &S3Server,
    src: &str,
    dst: &str,
    resume: Option<&str>,
    via_env: bool,
    log: &Path,
) -> FerryProcess {
    let mut cmd = crate::ferry().args([
        "run",
        "--job.sourceMasterAddresses",
        src,
        "--job.sinkMasterAddresses",
        dst,
        "--job.tableName",
        TABLE,
        "--job.checkpointsDirectory",
        CHECKPOINTS,
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "500",
        "--savepointPath",
        SAVEPOINTS,
        "--metrics.kudu.pollIntervalMillis",
        "0",
        "-p",
        "2",
    ]);
    if via_env {
        cmd = cmd
            .env("AWS_ENDPOINT_URL", s3.endpoint())
            .env("AWS_ACCESS_KEY_ID", s3.access_key())
            .env("AWS_SECRET_ACCESS_KEY", s3.secret_key());
    } else {
        cmd = cmd
            .arg(format!("-Ds3.endpoint={}", s3.endpoint()))
            .arg(format!("-Ds3.access-key={}", s3.access_key()))
            .arg(format!("-Ds3.secret-key={}", s3.secret_key()));
    }
    if let Some(path) = resume {
        cmd = cmd.args(["-s", path]);
    }
    cmd.log_level("info").free_ports().stderr_file(log).start()
}

/// The job id `f` printed.
fn job_of(f: &FerryProcess) -> JobId {
    f.job_id().parse().expect("job id")
}

/// Waits until `job` has a complete checkpoint numbered `at_least` or
/// more (and, if given, one whose window ends after `after`).
async fn wait_for_checkpoint(
    store: &CheckpointStore,
    f: &mut FerryProcess,
    job: &JobId,
    at_least: u64,
    after: Option<u64>,
) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        f.assert_running("while checkpointing");
        assert!(
            Instant::now() < deadline,
            "no checkpoint {at_least}+ of {job}:\n{}",
            f.output_text()
        );
        let latest = store.latest_complete(job).await.expect("list checkpoints");
        if let Some(c) = latest.checkpoint {
            let late_enough =
                after.is_none_or(|t| c.state.last_end_timestamp.is_some_and(|e| e.raw() > t));
            if c.id >= at_least && late_enough {
                return c.id;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Captures the test's own tracing output (the warnings of
/// `latest_complete`).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

/// Plants three damaged checkpoints above `newest` in `job`'s directory,
/// through the S3 API: a truncated `_metadata`, a directory without one,
/// and a `_metadata` with one flipped byte.
async fn plant_damage(store: &CheckpointStore, job: &JobId, newest: u64) -> [u64; 3] {
    let s = store.store();
    let paths = store.paths();
    let good = s
        .get(&paths.checkpoint_metadata(job, newest))
        .await
        .expect("read")
        .expect("newest _metadata");
    let (truncated, missing, flipped) = (newest + 1, newest + 2, newest + 3);
    s.put(
        &paths.checkpoint_metadata(job, truncated),
        good.slice(..good.len() / 2),
    )
    .await
    .expect("plant truncated");
    s.put(
        &paths
            .checkpoint_dir(job, missing)
            .child("state-0")
            .expect("key"),
        bytes::Bytes::from_static(b"partial"),
    )
    .await
    .expect("plant incomplete");
    let mut bad = good.to_vec();
    let middle = bad.len() / 2;
    bad[middle] ^= 0x40;
    s.put(&paths.checkpoint_metadata(job, flipped), bad.into())
        .await
        .expect("plant flipped");
    [truncated, missing, flipped]
}

/// `ferry failover --dry-run` against the damaged bucket picks checkpoint
/// `newest`, never one of `damaged`, and warns about each of them.
fn failover_dry_run_skips_the_damage(
    s3: &S3Server,
    src: &str,
    dst: &str,
    job: &JobId,
    newest: u64,
    damaged: &[u64],
) {
    let out = crate::ferry()
        .args(["failover", "--dry-run", "--json", "--job-id"])
        .arg(job.to_string())
        .args(["--job.sourceMasterAddresses", src])
        .args(["--job.sinkMasterAddresses", dst])
        .args(["--job.tableName", TABLE])
        .args(["--job.checkpointsDirectory", CHECKPOINTS])
        .arg(format!("-Ds3.endpoint={}", s3.endpoint()))
        .arg(format!("-Ds3.access-key={}", s3.access_key()))
        .arg(format!("-Ds3.secret-key={}", s3.secret_key()))
        .output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    let path = report["found"]["path"].as_str().unwrap_or_default();
    assert_eq!(
        path,
        format!("{CHECKPOINTS}/{job}/chk-{newest}"),
        "{report}"
    );
    for id in damaged {
        let dir = format!("{CHECKPOINTS}/{job}/chk-{id}");
        assert!(stderr.contains(&dir), "a warning names {dir}:\n{stderr}");
    }
    assert!(
        !stdout.contains(s3.secret_key()) && !stderr.contains(s3.secret_key()),
        "the secret key was printed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_resumes_from_the_newest_complete_checkpoint_in_the_bucket() {
    let started = Instant::now();
    let s3 = s3_server("s3-state");
    let (src, dst) = tokio::task::block_in_place(ferry_fixtures::two_clusters);
    let source = KuduClient::new(&src.master_addrs()).expect("source client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("sink client");
    for client in [&source, &sink] {
        let b = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
            .add_hash_partitions(&["id"], 3, 0)
            .num_replicas(3);
        client.create_table(&b).await.expect("create table");
    }
    let logs = tempfile::tempdir().expect("logs");
    let resolver = ferry_fixtures::s3::resolver(&s3);
    let store = CheckpointStore::open(
        &StorageLocation::parse(CHECKPOINTS).expect("location"),
        NonZeroUsize::MIN,
        resolver.clone(),
    )
    .expect("open the bucket");
    let (src_addrs, dst_addrs) = (src.master_addrs_joined(), dst.master_addrs_joined());
    let writer = Workload::start(source.clone(), TABLE, 300, 7);

    // Run 1 (S3 settings as -D keys): a few checkpoints, then SIGKILL.
    let log1 = logs.path().join("ferry-1.log");
    let mut f = start_ferry(&s3, &src_addrs, &dst_addrs, None, false, &log1);
    let job1 = job_of(&f);
    let newest = wait_for_checkpoint(&store, &mut f, &job1, 6, None).await;
    f.kill9();
    let run1 = f.output_text();
    let newest = store
        .latest_complete(&job1)
        .await
        .expect("list")
        .checkpoint
        .expect("a checkpoint")
        .id
        .max(newest);
    eprintln!(
        "[s3] run 1 killed at checkpoint {newest} (+{:?})",
        started.elapsed()
    );

    // Damage above the newest complete checkpoint, in the bucket.
    let [truncated, missing, flipped] = plant_damage(&store, &job1, newest).await;
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer({
            let c = captured.clone();
            move || c.clone()
        })
        .with_ansi(false)
        .finish();
    let latest = {
        let _guard = tracing::subscriber::set_default(subscriber);
        store.latest_complete(&job1).await.expect("list")
    };
    let chosen = latest.checkpoint.expect("a complete checkpoint");
    assert_eq!(
        chosen.id, newest,
        "the newest complete one, past the damage"
    );
    let skipped: Vec<(u64, bool)> = latest
        .skipped
        .iter()
        .map(|s| (s.id, matches!(s.reason, SkipReason::MissingMetadata)))
        .collect();
    assert_eq!(
        skipped,
        [(flipped, false), (missing, true), (truncated, false)],
        "{:?}",
        latest.skipped
    );
    let warnings = captured.text();
    for id in [truncated, missing, flipped] {
        let dir = format!("{CHECKPOINTS}/{job1}/chk-{id}");
        assert!(
            warnings
                .lines()
                .any(|l| l.contains("WARN") && l.contains(&dir)),
            "no warning naming {dir}:\n{warnings}"
        );
    }
    let pointer = chosen.location.to_uri();
    assert!(pointer.starts_with(CHECKPOINTS), "{pointer}");
    failover_dry_run_skips_the_damage(
        &s3,
        &src_addrs,
        &dst_addrs,
        &job1,
        newest,
        &[truncated, missing, flipped],
    );

    // Run 2 (S3 settings from AWS_* variables) resumes from it.
    let log2 = logs.path().join("ferry-2.log");
    let mut f = start_ferry(&s3, &src_addrs, &dst_addrs, Some(&pointer), true, &log2);
    let job2 = job_of(&f);
    let port = f.rest();
    let checkpoints = tokio::task::block_in_place(|| {
        ferry_fixtures::http::get_json(port, &format!("/jobs/{job2}/checkpoints"))
    });
    assert!(
        checkpoints.to_string().contains(&pointer),
        "restored from {pointer}: {checkpoints}"
    );
    wait_for_checkpoint(&store, &mut f, &job2, 4, None).await;
    // A savepoint through REST to another s3:// target, as a CronJob would.
    let target = format!("{SAVEPOINTS}-rest");
    let rest_savepoint = tokio::task::block_in_place(|| rest_savepoint(port, &job2, &target));
    assert!(rest_savepoint.starts_with(&target), "{rest_savepoint}");
    store
        .load(&rest_savepoint)
        .await
        .expect("load the REST savepoint");
    // Secrets appear in no REST answer.
    for path in [
        format!("/jobs/{job2}"),
        format!("/jobs/{job2}/config"),
        format!("/jobs/{job2}/checkpoints"),
        format!("/jobs/{job2}/checkpoints/config"),
        "/config".to_string(),
        "/ferry/overview".to_string(),
    ] {
        let (_, body) =
            tokio::task::block_in_place(|| ferry_fixtures::http::http("GET", port, &path, None));
        assert!(!body.contains(s3.secret_key()), "secret in {path}");
    }
    let stats = writer.stop().await;
    assert_eq!(stats.failed, 0, "{stats:?}");
    assert!(stats.applied > 100, "{stats:?}");
    let stopped_at = source.server_clock().await.expect("clock").raw();
    wait_for_checkpoint(&store, &mut f, &job2, 1, Some(stopped_at)).await;
    let diff = compare_tables(&source, &sink, TABLE, TABLE).await;
    assert!(diff.is_equal(), "{diff}");
    eprintln!(
        "[s3] sink == source after {} ops (+{:?})",
        stats.applied,
        started.elapsed()
    );

    // SIGTERM: stop with a savepoint, written to the bucket.
    f.sigterm();
    let status = tokio::task::block_in_place(|| f.wait_exit(Duration::from_secs(120)));
    let log = f.output_text();
    assert!(status.success(), "{status}:\n{log}");
    let line = log
        .lines()
        .find(|l| l.contains("Savepoint completed. Path: "))
        .unwrap_or_else(|| panic!("no savepoint line:\n{log}"));
    let savepoint = line.rsplit(' ').next().unwrap_or_default();
    assert!(savepoint.starts_with(SAVEPOINTS), "{line}");
    let loaded = store.load(savepoint).await.expect("load the savepoint");
    assert_eq!(loaded.state.job_id, job2);

    // The secret key never appears in ferry's output.
    for text in [run1, log] {
        assert!(!text.contains(s3.secret_key()), "secret in ferry's output");
    }
    eprintln!("[s3] done in {:?}", started.elapsed());
}

/// `POST /jobs/:id/savepoints` with `target`, polled until it completes;
/// returns the savepoint's location.
fn rest_savepoint(port: u16, job: &JobId, target: &str) -> String {
    let body = format!("{{\"target-directory\": \"{target}\", \"cancel-job\": false}}");
    let (code, answer) = ferry_fixtures::http::http(
        "POST",
        port,
        &format!("/jobs/{job}/savepoints"),
        Some(&body),
    );
    assert_eq!(code, 202, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("json");
    let trigger = answer["request-id"]
        .as_str()
        .expect("request-id")
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status =
            ferry_fixtures::http::get_json(port, &format!("/jobs/{job}/savepoints/{trigger}"));
        if status["status"]["id"] == "COMPLETED" {
            return status["operation"]["location"]
                .as_str()
                .unwrap_or_else(|| panic!("no location: {status}"))
                .to_string();
        }
        assert!(Instant::now() < deadline, "savepoint not done: {status}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `ferry run` with checkpoints on `location` and the given S3 settings;
/// returns (exit code, stderr, elapsed).
fn run_expecting_failure(location: &str, settings: &[String]) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let out = crate::ferry()
        .args([
            "run",
            // Never reached: the checkpoint store is checked first.
            "--job.sourceMasterAddresses",
            "127.0.0.1:1",
            "--job.sinkMasterAddresses",
            "127.0.0.1:1",
            "--job.tableName",
            TABLE,
            "--job.checkpointsDirectory",
            location,
            "--rest.port",
            &ferry_fixtures::free_port().to_string(),
            "--metrics.port",
            "0",
        ])
        .args(settings)
        .log_level("debug")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text, started.elapsed())
}

#[test]
fn bad_credentials_unknown_bucket_and_unreachable_endpoint_fail_at_start() {
    let s3 = s3_server("s3-bad");
    let wrong_secret = "wrong-secret-0123456789abcdef";
    let dead_endpoint = format!("http://127.0.0.1:{}", ferry_fixtures::free_port());
    let keys = |endpoint: &str, secret: &str| {
        vec![
            format!("-Ds3.endpoint={endpoint}"),
            format!("-Ds3.access-key={}", s3.access_key()),
            format!("-Ds3.secret-key={secret}"),
        ]
    };
    let cases = [
        (
            CHECKPOINTS.to_string(),
            keys(&s3.endpoint(), wrong_secret),
            "access denied",
        ),
        (
            "s3://no-such-bucket/prod/checkpoints".to_string(),
            keys(&s3.endpoint(), s3.secret_key()),
            "does not exist",
        ),
        (
            CHECKPOINTS.to_string(),
            keys(&dead_endpoint, s3.secret_key()),
            "cannot reach",
        ),
    ];
    for (location, settings, why) in cases {
        let (code, text, took) = run_expecting_failure(&location, &settings);
        eprintln!("[s3] {why}: exit {code:?} in {took:?}: {}", text.trim());
        assert_eq!(code, Some(1), "{text}");
        assert!(
            text.contains(&format!("cannot use checkpoint storage {location}")),
            "{text}"
        );
        assert!(text.contains(why), "{text}");
        assert!(!text.contains(wrong_secret), "secret in the output: {text}");
        assert!(
            !text.contains(s3.secret_key()),
            "secret in the output: {text}"
        );
        assert!(took < Duration::from_secs(30), "took {took:?}");
    }

    // The right settings pass the same check (the test's own resolver).
    let resolver = ferry_fixtures::s3::resolver(&s3);
    let rt = ferry_fixtures::runtime();
    rt.block_on(async {
        resolver
            .probe(&StorageLocation::parse(CHECKPOINTS).expect("location"))
            .await
            .expect("the bucket answers");
        let store = resolver
            .open(&StorageLocation::parse(CHECKPOINTS).expect("location"))
            .expect("open");
        store
            .put(
                &StorageLocation::parse(&format!("{CHECKPOINTS}/probe"))
                    .expect("location")
                    .key(),
                bytes::Bytes::from_static(b"x"),
            )
            .await
            .expect("write with the right key");
    });
}

/// The engine's `StateStore` contract holds on the real server: create-only
/// writes (`If-None-Match: *`), read-after-write, recursive segment-aware
/// listing, idempotent delete, atomic replace. The "one of many racing
/// creators wins" check is left out: s3s-fs does not make the conditional
/// PUT atomic against a concurrent writer (AWS S3 does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_s3_store_keeps_the_state_store_contract() {
    let s3 = s3_server("s3-conform");
    let location = StorageLocation::parse("s3://ferry-state/conformance").expect("location");
    let store = ferry_fixtures::s3::resolver(&s3)
        .open(&location)
        .expect("open");
    ferry_engine::checkpoint::conformance::run_without_races(store, location.key()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_outage_fails_checkpoints_and_the_job_recovers_when_it_returns() {
    let mut s3 = s3_server("s3-outage");
    let (src, dst) = tokio::task::block_in_place(ferry_fixtures::two_clusters);
    let source = KuduClient::new(&src.master_addrs()).expect("source client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("sink client");
    for client in [&source, &sink] {
        let b = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
            .add_hash_partitions(&["id"], 3, 0)
            .num_replicas(3);
        client.create_table(&b).await.expect("create table");
    }
    let logs = tempfile::tempdir().expect("logs");
    let store = CheckpointStore::open(
        &StorageLocation::parse(CHECKPOINTS).expect("location"),
        NonZeroUsize::MIN,
        ferry_fixtures::s3::resolver(&s3),
    )
    .expect("open the bucket");
    let writer = Workload::start(source.clone(), TABLE, 300, 9);
    let log = logs.path().join("ferry.log");
    let (src_addrs, dst_addrs) = (src.master_addrs_joined(), dst.master_addrs_joined());
    let mut f = start_ferry(&s3, &src_addrs, &dst_addrs, None, false, &log);
    let job = job_of(&f);
    let before = wait_for_checkpoint(&store, &mut f, &job, 2, None).await;

    tokio::task::block_in_place(|| s3.stop()).expect("stop s3");
    tokio::time::sleep(Duration::from_secs(6)).await;
    f.assert_running("during the outage");
    let port = f.rest();
    let (_, exceptions) = tokio::task::block_in_place(|| {
        ferry_fixtures::http::http("GET", port, &format!("/jobs/{job}/exceptions"), None)
    });
    assert!(
        exceptions.contains("s3://ferry-state/prod/checkpoints"),
        "the failed checkpoint names its location: {exceptions}"
    );
    assert!(!exceptions.contains(s3.secret_key()), "secret in REST");
    let shown: String = exceptions.chars().take(700).collect();
    eprintln!("[s3] exceptions during the outage: {shown}");
    tokio::task::block_in_place(|| s3.restart()).expect("restart s3");

    wait_for_checkpoint(&store, &mut f, &job, before + 1, None).await;
    let stats = writer.stop().await;
    assert_eq!(stats.failed, 0, "{stats:?}");
    let stopped_at = source.server_clock().await.expect("clock").raw();
    wait_for_checkpoint(&store, &mut f, &job, 1, Some(stopped_at)).await;
    let diff = compare_tables(&source, &sink, TABLE, TABLE).await;
    assert!(diff.is_equal(), "{diff}");
    f.kill9();
    let text = f.output_text();
    assert!(!text.contains(s3.secret_key()), "secret in ferry's output");
    eprintln!("[s3] outage survived; {} ops", stats.applied);
}
