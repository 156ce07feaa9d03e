//! State replication to a DR store (issue 11, item 3), end to end: the
//! real `ferry` binary replicates an every-type table between two real
//! Kudu clusters under a mixed workload, with `job.stateReplicas` naming a
//! DR location and periodic savepoints on. The test reads the replica's
//! lag from Prometheus and `/ferry/jobs/:id/live`, then takes the DR store
//! away for 30 s: copies to it fail (failures counted, lag grows) while the
//! Kudu replication keeps going (`lastEndTimestamp` advances); once the
//! store is back the replica catches up (it holds the newest checkpoint,
//! lag small again). At the end the sink equals the source cell by cell.
//!
//! The DR store is a real S3 server (`s3s-fs`, started by the test kit);
//! the outage stops its process and starts it again on the same port and
//! data. Checkpoints stay on local disk (one S3 endpoint per process).
//!
//! A second test drives `ferry state mirror` (no Kudu).

use ferry_engine::checkpoint::{
    CheckpointStore, JobId, JobState, SnapshotKind, StateKey, StorageLocation, StoreResolver,
};
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::http::http;
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::Workload;
use ferry_testkit::S3Server;
use kudu_client::{KuduClient, TableBuilder};
use serde_json::Value;
use std::num::NonZeroUsize;
use std::path::Path;
use std::time::{Duration, Instant};

const TABLE: &str = "replicated";
const OPS_PER_SEC: u32 = 150;
const OUTAGE: Duration = Duration::from_secs(30);
const BUCKET: &str = "ferry-dr";
const REPLICA: &str = "s3://ferry-dr/replica";

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// The job's `/ferry/jobs/:id/live`.
fn live(ferry: &FerryProcess) -> Value {
    blocking(|| ferry.live())
}

/// The first replica's part of it.
fn replica(ferry: &FerryProcess) -> Value {
    live(ferry)["replicas"][0].clone()
}

/// `ferry_state_replica_<name>` for this job's replica.
fn scrape(ferry: &FerryProcess, name: &str) -> f64 {
    let (status, body) = blocking(|| http("GET", ferry.metrics(), "/metrics", None));
    assert_eq!(status, 200);
    let family = format!("ferry_state_replica_{name}{{");
    let job = ferry.job_id();
    body.lines()
        .find(|l| l.starts_with(&family) && l.contains(&job) && l.contains("replica=\""))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_else(|| panic!("no {family} in:\n{body}"))
}

fn start_ferry(src: &str, dst: &str, chk: &Path, s3: &S3Server) -> FerryProcess {
    crate::ferry()
        .args(["run", "--job.sourceMasterAddresses", src])
        .args(["--job.sinkMasterAddresses", dst, "--job.tableName", TABLE])
        .args(["--job.checkpointsDirectory", &chk.to_string_lossy()])
        .args(["--job.discoveryIntervalSeconds", "1"])
        .args(["--job.checkpointingIntervalMillis", "300"])
        .args(["--job.stateReplicas", REPLICA])
        .arg(format!("-Ds3.endpoint={}", s3.endpoint()))
        .arg(format!("-Ds3.access-key={}", s3.access_key()))
        .arg(format!("-Ds3.secret-key={}", s3.secret_key()))
        .args(["--job.periodicSavepointInterval", "3 s"])
        .args(["--job.periodicSavepointsRetained", "2"])
        .args(["-p", "3"])
        .log_level("info")
        .free_ports()
        .start()
}

async fn create_table(client: &KuduClient) {
    let b = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 3, 0)
        .num_replicas(3);
    client.create_table(&b).await.expect("create table");
}

/// Polls `f` every 500 ms for up to `within`.
async fn until(
    ferry: &mut FerryProcess,
    what: &str,
    within: Duration,
    mut f: impl FnMut(&FerryProcess) -> bool,
) {
    let deadline = Instant::now() + within;
    loop {
        ferry.assert_running("on its own");
        if f(ferry) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out: {what}; live: {}",
            live(ferry)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dr_store_outage_delays_the_replica_not_the_replication() {
    let (src, dst) = blocking(ferry_fixtures::two_clusters);
    let source = KuduClient::new(&src.master_addrs()).expect("source client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("sink client");
    create_table(&source).await;
    create_table(&sink).await;
    let logs = tempfile::tempdir().expect("dir");
    let chk = logs.path().join("chk");
    let mut dr = S3Server::start(&format!("dr-{}", std::process::id()))
        .expect("s3s-fs (run scripts/test once to install it)");
    dr.create_bucket(BUCKET).expect("bucket");
    let secret = dr.secret_key().to_string();

    let workload = Workload::start(source.clone(), TABLE, OPS_PER_SEC, 11);
    let mut ferry = start_ferry(
        &src.master_addrs_joined(),
        &dst.master_addrs_joined(),
        &chk,
        &dr,
    );
    until(
        &mut ferry,
        "replicating, replica caught up",
        Duration::from_secs(120),
        |f| {
            let live = live(f);
            let r = &live["replicas"][0];
            u(&live["last_end_timestamp"]) > 0 && u(&r["statesCopied"]) > 3 && r["failures"] == 0
        },
    )
    .await;
    assert_eq!(replica(&ferry)["location"], REPLICA);
    let lag = scrape(&ferry, "lag_seconds");
    assert!(lag < 5.0, "lag before the outage: {lag} s");
    assert!(scrape(&ferry, "last_success_timestamp_ms") > 0.0);

    // The DR store's server goes away for 30 s.
    blocking(|| dr.stop()).expect("stop the DR server");
    let down_at = Instant::now();
    let end_before = u(&live(&ferry)["last_end_timestamp"]);
    until(
        &mut ferry,
        "copies to the replica fail",
        Duration::from_secs(10),
        |f| u(&replica(f)["failures"]) > 0,
    )
    .await;
    let early = replica(&ferry);
    tokio::time::sleep(OUTAGE.saturating_sub(down_at.elapsed())).await;
    ferry.assert_running("during the outage");
    let late = live(&ferry);
    let r = &late["replicas"][0];
    eprintln!("during the outage: {early} then {r}");
    assert_eq!(r["behind"], true);
    assert!(
        u(&r["failures"]) > u(&early["failures"]),
        "failures keep being counted"
    );
    assert!(
        u(&r["lagMs"]) >= 20_000,
        "the lag grows during the outage: {r}"
    );
    assert!(u(&r["lagMs"]) > u(&early["lagMs"]));
    let error = r["lastError"].as_str().expect("the failure");
    assert!(error.contains(REPLICA), "{error}");
    assert!(!late.to_string().contains(&secret), "no secret in REST");
    assert!(scrape(&ferry, "lag_seconds") >= 20.0);
    assert!(scrape(&ferry, "failures_total") >= u(&r["failures"]) as f64);
    // Kudu replication went on.
    assert!(
        u(&late["last_end_timestamp"]) > end_before + 15_000,
        "lastEndTimestamp advanced during the outage: {end_before} -> {}",
        late["last_end_timestamp"]
    );
    assert_eq!(late["state"], "RUNNING");

    // Back on the same port, with its data: the replica catches up,
    // newest first.
    blocking(|| dr.restart()).expect("restart the DR server");
    let job: JobId = ferry.job_id().parse().expect("job id");
    let primary = CheckpointStore::open_local(
        &StorageLocation::local(&chk).expect("location"),
        NonZeroUsize::MIN,
    );
    let newest_at_return = primary
        .latest_complete(&job)
        .await
        .expect("primary")
        .checkpoint
        .expect("a checkpoint")
        .id;
    until(
        &mut ferry,
        "the replica caught up",
        Duration::from_secs(30),
        |f| {
            let r = replica(f);
            r["behind"] == false && u(&r["lagMs"]) < 5_000
        },
    )
    .await;
    let dr_view = ferry_fixtures::s3::resolver(&dr);
    let replica_loc = StorageLocation::parse(REPLICA).expect("location");
    let replica = CheckpointStore::open(&replica_loc, NonZeroUsize::MIN, dr_view.clone())
        .expect("replica store");
    let on_replica = replica
        .latest_complete(&job)
        .await
        .expect("replica")
        .checkpoint
        .expect("a checkpoint on the replica");
    assert!(
        on_replica.id >= newest_at_return,
        "the replica has the newest checkpoint: {} < {newest_at_return}",
        on_replica.id
    );
    let bucket = dr_view.open(&replica_loc).expect("bucket");
    let savepoints: Vec<StateKey> = bucket
        .list(&replica_loc.key().child("savepoints").expect("key"))
        .await
        .expect("replica savepoints")
        .into_iter()
        .filter(|k| k.file_name() == Some("_metadata"))
        .collect();
    let (_, metrics_body) = blocking(|| http("GET", ferry.metrics(), "/metrics", None));
    assert!(!metrics_body.contains(&secret), "no secret in metrics");
    assert!(
        (1..=3).contains(&savepoints.len()),
        "periodic savepoints replicated, retention applied: {savepoints:?}"
    );

    // Periodic savepoints: shown as Flink shows savepoints, and counted.
    let stats = blocking(|| ferry.get_json(&format!("/jobs/{}/checkpoints", ferry.job_id())));
    // (Flink's history shows only the newest 10, mostly checkpoints at a
    // 300 ms interval; `latest.savepoint` is the newest savepoint.)
    let latest = &stats["latest"]["savepoint"];
    assert_eq!(latest["is_savepoint"], true);
    assert_eq!(latest["checkpoint_type"], "SAVEPOINT");
    assert!(latest["external_path"]
        .as_str()
        .is_some_and(|p| p.contains("/savepoints/savepoint-")));
    let live = live(&ferry);
    assert!(
        live["savepoints"].as_array().is_some_and(|s| s.len() >= 5),
        "{live}"
    );
    assert!(u(&live["periodic_savepoints"]["completed"]) >= 5, "{live}");
    assert_eq!(live["periodic_savepoints"]["failed"], 0);
    let last = live["periodic_savepoints"]["last_path"]
        .as_str()
        .expect("path");
    assert!(
        last.starts_with(&format!("file://{}/savepoints/savepoint-", chk.display())),
        "{last}"
    );

    // Writer stops; ferry catches up; sink == source.
    let stats = workload.stop().await;
    let stopped_at = source.server_clock().await.expect("clock").raw();
    let caught_up = Instant::now() + Duration::from_secs(120);
    loop {
        let latest = primary
            .latest_complete(&job)
            .await
            .expect("primary")
            .checkpoint;
        if latest.is_some_and(|c| {
            c.state
                .last_end_timestamp
                .is_some_and(|t| t.raw() > stopped_at)
        }) {
            break;
        }
        assert!(Instant::now() < caught_up, "ferry did not catch up");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let diff = compare_tables(&source, &sink, TABLE, TABLE).await;
    eprintln!("{diff}; workload {stats:?}");
    assert!(diff.is_equal(), "{diff}");
    assert!(stats.applied > 1_000, "the workload ran: {stats:?}");
    drop(ferry);
    let _ = dr.destroy();
}

/// A state written with the engine's own store, as ferry writes it.
fn state(job: JobId, kind: SnapshotKind, id: u64) -> JobState {
    let mut s = JobState::new(
        job,
        kind,
        id,
        "t",
        vec!["a:7051".into()],
        vec!["b:7051".into()],
    );
    s.last_end_timestamp = Some(ferry_engine::SourceTime::from_raw(1_000 + id));
    s
}

fn mirror(args: &[&str]) -> (i32, String, String) {
    let out = crate::ferry().args(["state", "mirror"]).args(args).output();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn mirror_copies_complete_states_and_skips_broken_ones() {
    let dir = tempfile::tempdir().expect("dir");
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    let src_loc = StorageLocation::local(&src).expect("location");
    let store = CheckpointStore::open_local(&src_loc, NonZeroUsize::new(10).expect("10"));
    let job = JobId::random();
    for id in 1..=3 {
        store
            .write_checkpoint(&job, id, &state(job, SnapshotKind::Checkpoint, id))
            .await
            .expect("checkpoint");
    }
    let sp = store
        .write_savepoint(
            &src_loc.join("savepoints").expect("dir"),
            &state(job, SnapshotKind::Savepoint, 3),
        )
        .await
        .expect("savepoint");
    // Torn: a directory without _metadata. Damaged: a flipped byte, a
    // truncated file.
    let job_dir = src.join(job.to_string());
    std::fs::create_dir_all(job_dir.join("chk-4")).expect("torn");
    std::fs::write(job_dir.join("chk-4/part"), "x").expect("torn");
    let flip = job_dir.join("chk-2/_metadata");
    let mut bytes = std::fs::read(&flip).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&flip, bytes).expect("flip");
    let cut = job_dir.join("chk-1/_metadata");
    let bytes = std::fs::read(&cut).expect("read");
    std::fs::write(&cut, &bytes[..bytes.len() - 5]).expect("truncate");

    let (code, out, err) = mirror(&[&src.to_string_lossy(), &dst.to_string_lossy()]);
    assert_eq!(code, 0, "{out}{err}");
    for n in [1, 2, 4] {
        let path = format!("{}/chk-{n}", job_dir.display());
        assert!(
            err.contains(&format!("warning: skipped file://{path}")),
            "chk-{n} named:\n{err}"
        );
    }
    assert!(out.contains("2 copied"), "{out}");
    let dst_loc = StorageLocation::local(&dst).expect("location");
    let copy = CheckpointStore::open_local(&dst_loc, NonZeroUsize::MIN);
    let latest = copy
        .latest_complete(&job)
        .await
        .expect("read")
        .checkpoint
        .expect("chk-3");
    assert_eq!(latest.id, 3);
    let sp_name = sp.key().file_name().expect("name").to_string();
    let sp_copy = copy
        .load(&dst.join("savepoints").join(&sp_name).to_string_lossy())
        .await
        .expect("savepoint copied");
    assert_eq!(sp_copy.state.kind, SnapshotKind::Savepoint);
    assert!(!dst.join(job.to_string()).join("chk-1").exists());
    assert!(!dst.join(job.to_string()).join("chk-4").exists());

    // Again: nothing to do. A DST holding other bytes under a name: exit 1.
    let (code, out, _) = mirror(&[&src.to_string_lossy(), &dst.to_string_lossy()]);
    assert_eq!((code, out.as_str()), (0, ""));
    let other = dst.join(job.to_string()).join("chk-3/_metadata");
    let mut bytes = std::fs::read(&other).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&other, bytes).expect("write");
    let (code, _, err) = mirror(&[&src.to_string_lossy(), &dst.to_string_lossy()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("chk-3/_metadata"), "{err}");

    // Usage errors: 2.
    let (code, _, err) = mirror(&[&src.to_string_lossy()]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = mirror(&[&src.to_string_lossy(), "hdfs:///x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("DST"), "{err}");
}

#[tokio::test]
async fn mirror_watch_keeps_copying_until_terminated() {
    let dir = tempfile::tempdir().expect("dir");
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    let src_loc = StorageLocation::local(&src).expect("location");
    let store = CheckpointStore::open_local(&src_loc, NonZeroUsize::new(10).expect("10"));
    let job = JobId::random();
    std::fs::create_dir_all(&src).expect("src");
    let mut child = crate::ferry()
        .args(["state", "mirror", "--watch", "--interval", "0.2"])
        .args([src.to_string_lossy(), dst.to_string_lossy()])
        .spawn();
    for id in 1..=2 {
        store
            .write_checkpoint(&job, id, &state(job, SnapshotKind::Checkpoint, id))
            .await
            .expect("checkpoint");
        let copied = dst
            .join(job.to_string())
            .join(format!("chk-{id}/_metadata"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !copied.exists() {
            assert!(Instant::now() < deadline, "chk-{id} mirrored");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // SIGTERM: a clean stop.
    child.sigterm();
    let status = child.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn mirror_copies_to_s3_without_showing_the_secret() {
    let dir = tempfile::tempdir().expect("dir");
    let src = dir.path().join("src");
    let src_loc = StorageLocation::local(&src).expect("location");
    let store = CheckpointStore::open_local(&src_loc, NonZeroUsize::new(10).expect("10"));
    let job = JobId::random();
    for id in 1..=2 {
        store
            .write_checkpoint(&job, id, &state(job, SnapshotKind::Checkpoint, id))
            .await
            .expect("checkpoint");
    }
    let s3 = S3Server::start(&format!("mirror-{}", std::process::id())).expect("s3s-fs");
    s3.create_bucket(BUCKET).expect("bucket");
    let dst = "s3://ferry-dr/mirror";
    let endpoint = format!("-Ds3.endpoint={}", s3.endpoint());
    let access = format!("-Ds3.access-key={}", s3.access_key());
    let secret = format!("-Ds3.secret-key={}", s3.secret_key());
    let (code, out, err) = mirror(&[&endpoint, &access, &secret, &src.to_string_lossy(), dst]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 copied"), "{out}");
    let dst_loc = StorageLocation::parse(dst).expect("location");
    let copy = CheckpointStore::open(
        &dst_loc,
        NonZeroUsize::MIN,
        ferry_fixtures::s3::resolver(&s3),
    )
    .expect("store");
    let latest = copy.latest_complete(&job).await.expect("read").checkpoint;
    assert_eq!(latest.map(|c| c.id), Some(2));

    // Wrong secret: exit 1, the location named, the secret not shown.
    let wrong = "-Ds3.secret-key=not-the-right-secret-123";
    let (code, out, err) = mirror(&[&endpoint, &access, wrong, &src.to_string_lossy(), dst]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains(dst), "{err}");
    assert!(
        !err.contains("not-the-right-secret-123") && !out.contains("not-the-right"),
        "{err}"
    );
    // An unknown -D key is a usage error.
    let (code, _, err) = mirror(&["-Ds3.nope=1", &src.to_string_lossy(), dst]);
    assert_eq!(code, 2, "{err}");
    let _ = s3.destroy();
}
