//! The region-loss drill (issue 33): the case DR exists for. The active
//! keeps its state on the primary region's S3 server and replicates it to
//! a bucket on a second S3 server (other credentials, reached through
//! `s3.bucket.<bucket>.*`); the lease lives on the sink cluster (the
//! default `kudu:ferry_ha`). Then the primary region goes: its S3 server
//! stops, the source cluster's daemons are killed and the active is
//! `kill -9`ed. The warm standby in the DR region claims the lease, with
//! fencing on, from the sink cluster and starts from the DR replica; once
//! the source cluster's daemons are back (Kudu keeps the history) it
//! continues by diff windows, and the sink equals the source cell by cell.
//! Then the same without a standby: `ferry failover --from <DR bucket>`
//! takes over from the new active (the primary store still gone).

use ferry_engine::checkpoint::{CheckpointStore, JobId, JobState, StorageLocation};
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::free_port;
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::Workload;
use ferry_testkit::{DaemonKind, MiniCluster, S3Server};
use kudu_client::{KuduClient, TableBuilder};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const TABLE: &str = "region_loss";
const PRIMARY_CHK: &str = "s3://prod-state/ferry";
const DR_STATE: &str = "s3://dr-state/ferry";

fn spawn(verb: &str, args: &[String], extra: &[&str], err: PathBuf) -> FerryProcess {
    crate::ferry()
        .arg(verb)
        .args(args)
        .args(extra)
        .rest_port(free_port())
        .log_level("info")
        .stderr_file(&err)
        .spawn()
}

/// The copy was fresh (checkpoints every 300 ms, replicated at once):
/// its age when the holder was lost is below the lease duration (2 s),
/// which a wait for the lease would have added.
fn assert_fresh_copy(line: &str) {
    let age: u64 = line
        .split("lost: ")
        .nth(1)
        .and_then(|rest| rest.split(" ms").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no age in '{line}'"));
    assert!(
        age < 2_000,
        "the RPO printed includes the lease wait: {line}"
    );
}

async fn stdout_line(ferry: &FerryProcess, needle: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        if let Some(line) = ferry
            .stdout_lines()
            .into_iter()
            .find(|l| l.contains(needle))
        {
            return line;
        }
        assert!(
            Instant::now() < deadline,
            "no '{needle}' line within {within:?}; stderr:\n{}",
            ferry.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The job's keys with its checkpoints in `chk` (and replicas, if any):
/// the primary S3 server by `s3.*`, the DR one by `s3.bucket.dr-state.*`.
fn job_args(
    src: &MiniCluster,
    dst: &MiniCluster,
    primary: &S3Server,
    dr: &S3Server,
    chk: &str,
    replica: Option<&str>,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "--job.sourceMasterAddresses",
        &src.master_addrs_joined(),
        "--job.sinkMasterAddresses",
        &dst.master_addrs_joined(),
        "--job.tableName",
        TABLE,
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        chk,
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
    ]
    .iter()
    .chain(&crate::ha_kit::LEASE_KEYS)
    .map(|s| s.to_string())
    .collect();
    if let Some(r) = replica {
        args.extend(["--job.stateReplicas".to_string(), r.to_string()]);
    }
    args.extend([
        format!("-Ds3.endpoint={}", primary.endpoint()),
        format!("-Ds3.access-key={}", primary.access_key()),
        format!("-Ds3.secret-key={}", primary.secret_key()),
        format!("-Ds3.bucket.dr-state.endpoint={}", dr.endpoint()),
        format!("-Ds3.bucket.dr-state.access-key={}", dr.access_key()),
        format!("-Ds3.bucket.dr-state.secret-key={}", dr.secret_key()),
    ]);
    args
}

/// Waits until the DR store holds a complete checkpoint of `generation`
/// whose window end is past `ts`.
async fn dr_caught_up(
    store: &CheckpointStore,
    job: &JobId,
    generation: u64,
    ts: u64,
    within: Duration,
) -> JobState {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(latest) = store.latest_complete(job).await {
            if let Some(c) = latest.checkpoint {
                if c.state.generation == generation
                    && c.state.last_end_timestamp.is_some_and(|t| t.raw() > ts)
                {
                    return c.state;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "generation {generation} never reached the DR store past {ts}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_standby_takes_over_from_the_dr_bucket_when_the_primary_region_is_lost() {
    // One tablet server each: the sink's default replication factor must
    // fit the lease table it creates.
    let (mut src, dst) = tokio::task::block_in_place(|| {
        let a = std::thread::spawn(|| MiniCluster::builder().tservers(1).start());
        let b = std::thread::spawn(|| {
            MiniCluster::builder()
                .tservers(1)
                .master_flag("--default_num_replicas=1")
                .start()
        });
        (
            a.join().expect("thread").expect("source"),
            b.join().expect("thread").expect("sink"),
        )
    });
    let pid = std::process::id();
    let mut primary = S3Server::start(&format!("rl-primary-{pid}")).expect("s3s-fs");
    let dr = S3Server::start(&format!("rl-dr-{pid}")).expect("s3s-fs");
    primary.create_bucket("prod-state").expect("bucket");
    dr.create_bucket("dr-state").expect("bucket");
    assert_ne!(primary.secret_key(), dr.secret_key(), "other credentials");

    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let b = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(1);
    source.create_table(&b).await.expect("create");
    let dir = tempfile::tempdir().expect("tmp");
    let job = ferry_engine::config::ha_job_id(&format!("ferry-replication-{TABLE}"));
    let dr_store = CheckpointStore::open(
        &StorageLocation::parse(DR_STATE).expect("loc"),
        NonZeroUsize::new(1000).expect("n"),
        ferry_fixtures::s3::resolver(&dr),
    )
    .expect("store");

    let active_args = job_args(&src, &dst, &primary, &dr, PRIMARY_CHK, Some(DR_STATE));
    let mut active = spawn("run", &active_args, &[], dir.path().join("active.err"));
    stdout_line(&active, "JobID", Duration::from_secs(60)).await;
    let writer = Workload::start(source.clone(), TABLE, 200, 33);
    let t0 = source.server_clock().await.expect("clock").raw();
    dr_caught_up(&dr_store, &job, 1, t0, Duration::from_secs(90)).await;

    // The DR side's standby: state from the DR bucket, its own checkpoints
    // there too once it is active.
    let standby_args = job_args(&src, &dst, &primary, &dr, DR_STATE, None);
    let standby = spawn(
        "standby",
        &standby_args,
        &["--from", DR_STATE],
        dir.path().join("standby.err"),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        standby.stdout_lines().is_empty(),
        "the standby waits while the active renews; stderr:\n{}",
        standby.stderr_text()
    );
    assert!(
        standby.stderr_text().contains("lease at kudu:ferry_ha/"),
        "the lease is on the sink cluster; stderr:\n{}",
        standby.stderr_text()
    );

    // The primary region is lost: its object store, the source cluster,
    // the active.
    tokio::task::block_in_place(|| {
        primary.stop().expect("stop primary s3");
        src.kill(DaemonKind::TabletServer, 0).expect("kill tserver");
        src.kill(DaemonKind::Master, 0).expect("kill master");
    });
    active.signal(libc::SIGKILL);
    let stats = writer.stop().await;
    assert!(stats.applied > 200, "changes flowed: {stats:?}");

    let newest = stdout_line(&standby, "Newest: ", Duration::from_secs(30)).await;
    assert!(newest.contains(DR_STATE), "from the DR replica: {newest}");
    let rpo = stdout_line(&standby, "RPO of this copy", Duration::from_secs(5)).await;
    assert!(rpo.contains("when the last holder was lost"), "{rpo}");
    assert_fresh_copy(&rpo);

    // The source region's cluster comes back with its history; the new
    // active continues by diff windows from the replicated state.
    tokio::task::block_in_place(|| {
        src.start(DaemonKind::Master, 0).expect("start master");
        src.start(DaemonKind::TabletServer, 0)
            .expect("start tserver");
    });
    stdout_line(&standby, "JobID", Duration::from_secs(60)).await;
    let after = source.server_clock().await.expect("clock").raw();
    let state = dr_caught_up(&dr_store, &job, 2, after, Duration::from_secs(120)).await;
    assert_eq!(state.job_id, job, "same job id");
    let diff = compare_tables(&source, &sink, TABLE, TABLE).await;
    assert!(diff.is_equal(), "{diff}");

    // Without a standby: the new active dies too, and `ferry failover`
    // (the primary store still gone) claims the next generation on the
    // sink cluster and starts from the DR bucket.
    let mut standby = standby;
    standby.signal(libc::SIGKILL);
    let writer = Workload::start(source.clone(), TABLE, 200, 34);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let stats = writer.stop().await;
    assert!(stats.applied > 100, "changes flowed: {stats:?}");
    let failover = spawn(
        "failover",
        &standby_args,
        &["--from", DR_STATE],
        dir.path().join("failover.err"),
    );
    let newest = stdout_line(&failover, "Newest: ", Duration::from_secs(30)).await;
    assert!(newest.contains(DR_STATE), "from the DR replica: {newest}");
    // Started 2 s after the kill, then a lease duration of waiting: the
    // copy's age is still taken at the holder's last renewal.
    let rpo = stdout_line(&failover, "RPO of this copy", Duration::from_secs(5)).await;
    assert_fresh_copy(&rpo);
    assert!(
        failover
            .stderr_text()
            .contains("of the lease at kudu:ferry_ha/"),
        "fenced through the sink cluster's lease; stderr:\n{}",
        failover.stderr_text()
    );
    let after = source.server_clock().await.expect("clock").raw();
    dr_caught_up(&dr_store, &job, 3, after, Duration::from_secs(120)).await;
    let diff = compare_tables(&source, &sink, TABLE, TABLE).await;
    assert!(diff.is_equal(), "{diff}");
}
