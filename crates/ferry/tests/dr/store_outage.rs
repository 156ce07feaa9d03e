//! Nobody gives up (issue 32): an active `ferry run` and a `ferry standby`
//! keep their lease and state in a bucket of a real S3 server (s3s-fs),
//! a writer runs, and the S3 server is stopped for 20 s
//! (`FERRY_HA_OUTAGE_SECS`; `bench/ha-outage` runs 2 minutes). The active fences
//! itself and stands by (it does not exit), the standby never mistakes
//! the unreadable lease for a silent one (it does not claim during the
//! outage, nor exit); once the server is back, one of them claims the next
//! generation and runs again by itself within the lease duration and a few
//! seconds. Every generation was claimed by one process only, both
//! processes still run, and after the writer stops the sink equals the
//! source cell by cell (an independent reader).

use ferry_engine::checkpoint::{CheckpointStore, JobId, JobState, StorageLocation};
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::Workload;
use ferry_testkit::S3Server;
use kudu_client::{KuduClient, TableBuilder};
use std::num::NonZeroUsize;
use std::path::Path;
use std::time::{Duration, Instant};

const TABLE: &str = "store_outage";
const OPS_PER_SEC: u32 = 200;
/// Short, so the test is short: the active fences 2.4 s into the outage.
const LEASE: Duration = Duration::from_secs(3);
const STATE: &str = "s3://ferry-ha/prod/checkpoints";

fn spawn(verb: &str, job_args: &[String], extra: &[&str], err: &Path) -> FerryProcess {
    crate::ferry()
        .arg(verb)
        .args(job_args)
        .args(extra)
        .free_ports()
        .log_level("info")
        .stderr_file(err)
        .spawn()
}

/// The generations a process claimed, from its stderr.
fn claimed(process: &FerryProcess) -> Vec<u64> {
    process
        .stderr_text()
        .lines()
        .filter_map(|l| {
            let rest = l
                .split("holding generation ")
                .nth(1)
                .or_else(|| l.split("claimed generation ").nth(1))?;
            rest.split(' ').next()?.parse().ok()
        })
        .collect()
}

/// The value of an unlabelled gauge in a Prometheus exposition.
fn gauge(exposition: &str, name: &str) -> Option<f64> {
    exposition.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        let value = rest.strip_prefix("{}").unwrap_or(rest).strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// Waits until the newest complete checkpoint is of `generation` or later
/// and its window ends past `ts`.
async fn caught_up(store: &CheckpointStore, job: &JobId, generation: u64, ts: u64) -> JobState {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(latest) = store.latest_complete(job).await {
            if let Some(c) = latest.checkpoint {
                if c.state.generation >= generation
                    && c.state.last_end_timestamp.is_some_and(|t| t.raw() > ts)
                {
                    return c.state;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "generation {generation} never caught up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lease_store_outage_ends_with_one_writer_running_again() {
    let mut s3 = S3Server::start(&format!("outage-{}", std::process::id()))
        .expect("s3s-fs (run scripts/test once to install it)");
    s3.create_bucket("ferry-ha").expect("bucket");
    let store = CheckpointStore::open(
        &StorageLocation::parse(STATE).expect("location"),
        NonZeroUsize::new(1000).expect("n"),
        ferry_fixtures::s3::resolver(&s3),
    )
    .expect("store");
    let clusters = tokio::task::block_in_place(crate::standby_clusters);
    let (src, dst) = (&clusters.0, &clusters.1);
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let b = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 3, 0)
        .num_replicas(3);
    source.create_table(&b).await.expect("create");
    let dir = tempfile::tempdir().expect("tmp");
    let job_args: Vec<String> = [
        "--job.sourceMasterAddresses",
        &src.master_addrs_joined(),
        "--job.sinkMasterAddresses",
        &dst.master_addrs_joined(),
        "--job.tableName",
        TABLE,
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        STATE,
        "--job.checkpointsRetained",
        "1000",
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
        "--high-availability.type",
        "lease",
        "--high-availability.storageDir",
        STATE,
        "--high-availability.lease-duration",
        "3s",
        "--high-availability.renew-interval",
        "750ms",
        "-p",
        "2",
        &format!("-Ds3.endpoint={}", s3.endpoint()),
        &format!("-Ds3.access-key={}", s3.access_key()),
        &format!("-Ds3.secret-key={}", s3.secret_key()),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let job = ferry_engine::config::ha_job_id(&format!("ferry-replication-{TABLE}"));

    let writer = Workload::start(source.clone(), TABLE, OPS_PER_SEC, 41);
    let mut active = spawn("run", &job_args, &[], &dir.path().join("active.err"));
    active
        .wait_line_async(Duration::from_secs(60), |l| {
            l.contains("JobID").then_some(())
        })
        .await;
    let t0 = source.server_clock().await.expect("clock").raw();
    caught_up(&store, &job, 1, t0).await;
    let mut standby = spawn(
        "standby",
        &job_args,
        &["--from", STATE],
        &dir.path().join("standby.err"),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    tokio::task::block_in_place(|| s3.stop()).expect("stop s3");
    let outage = crate::ha_outage();
    tokio::time::sleep(outage).await;
    // The active fenced itself and stands by; nobody took over or exited.
    let err = active.stderr_text();
    assert!(err.contains("fenced: "), "active:\n{err}");
    assert!(err.contains("standing by for the lease"), "active:\n{err}");
    active.assert_running("during the outage");
    standby.assert_running("during the outage");
    assert!(
        !standby.stdout_text().contains("JobID"),
        "the standby took over an unreadable lease:\n{}",
        standby.output_text()
    );
    // Its REST API and metrics say so.
    let (status, metrics) =
        tokio::task::block_in_place(|| (active.job_status(), active.metrics_text()));
    assert_eq!(status, "SUSPENDED");
    assert_eq!(
        gauge(&metrics, "ferry_ha_standing_by"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        gauge(&metrics, "ferry_ha_generation"),
        Some(0.0),
        "{metrics}"
    );
    let gen1 = active.stderr_text();
    assert_eq!(claimed(&active), vec![1], "active:\n{gen1}");
    assert!(claimed(&standby).is_empty(), "{}", standby.stderr_text());

    tokio::task::block_in_place(|| s3.restart()).expect("restart s3");
    let back = Instant::now();
    // One of them runs again by itself: its takeover prints the RTO.
    let limit = LEASE + Duration::from_secs(12);
    let runner = loop {
        let ran: Vec<bool> = [&active, &standby]
            .iter()
            .map(|p| p.stdout_text().contains("RTO: "))
            .collect();
        match ran.iter().position(|r| *r) {
            Some(i) => break i,
            None => {
                assert!(
                    back.elapsed() < limit,
                    "nobody ran again within {limit:?} of the store's return:\nactive:\n{}\nstandby:\n{}",
                    active.output_text(),
                    standby.output_text()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    eprintln!(
        "lease store outage of {outage:?}: running again {} ms after the store's return (runner: {})",
        back.elapsed().as_millis(),
        ["active", "standby"][runner]
    );

    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = writer.stop().await;
    assert!(stats.applied > 1000, "changes flowed: {stats:?}");
    let stopped = source.server_clock().await.expect("clock").raw();
    let state = caught_up(&store, &job, 2, stopped).await;
    assert_eq!(state.job_id, job, "same job id");

    // Never two writers: every generation was claimed by one process, and
    // the newest state is the latest claimant's.
    let (a, b) = (claimed(&active), claimed(&standby));
    let mut all: Vec<u64> = a.iter().chain(&b).copied().collect();
    all.sort_unstable();
    let count = all.len();
    all.dedup();
    assert_eq!(
        all.len(),
        count,
        "a generation claimed twice: active {a:?}, standby {b:?}"
    );
    assert_eq!(
        all.last(),
        Some(&state.generation),
        "active {a:?}, standby {b:?}"
    );
    // Exactly one of them runs; the other still stands by.
    let rto_lines = |p: &FerryProcess| p.stdout_text().matches("RTO: ").count();
    assert_eq!(
        rto_lines(&active) + rto_lines(&standby),
        1,
        "one takeover after the outage:\nactive:\n{}\nstandby:\n{}",
        active.stdout_text(),
        standby.stdout_text()
    );
    let runner = [&active, &standby][runner];
    let metrics = tokio::task::block_in_place(|| runner.metrics_text());
    assert_eq!(
        gauge(&metrics, "ferry_ha_standing_by"),
        Some(0.0),
        "{metrics}"
    );
    assert_eq!(
        gauge(&metrics, "ferry_ha_generation"),
        Some(state.generation as f64),
        "{metrics}"
    );
    active.assert_running("after the outage");
    standby.assert_running("after the outage");

    let diff = compare_tables(&source, &sink, TABLE, TABLE).await;
    assert!(diff.is_equal(), "{diff}");
    active.kill9();
    standby.kill9();
}
