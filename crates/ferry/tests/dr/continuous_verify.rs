//! Continuous verify (issue 33, item 4) with the real binary and real
//! clusters: a job with `job.verifyInterval` 2 s under a writer reports no
//! difference while it writes (each table is verified at its own cut);
//! a row planted directly on the sink (an extra one) and one deleted from
//! it (a missing one) are reported by `ferry_table_verify_*` within about
//! one interval; with `job.verifyRepair` they are repaired, and the sink
//! equals the source afterwards, cell by cell.

use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::Workload;
use ferry_testkit::MiniCluster;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, TableBuilder};
use std::sync::Arc;
use std::time::{Duration, Instant};

const INTERVAL_SECS: u64 = 2;

/// `ferry_table_verify_<name>` of the job's table, if it is there yet.
fn metric(job: &FerryProcess, name: &str) -> Option<f64> {
    let text = tokio::task::block_in_place(|| job.metrics_text());
    let family = format!("ferry_table_verify_{name}{{");
    text.lines()
        .find(|l| l.starts_with(&family))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
}

/// Waits (at most `limit`) until `metric` satisfies `ok`; returns when.
async fn until(job: &FerryProcess, name: &str, limit: Duration, ok: impl Fn(f64) -> bool) {
    let deadline = Instant::now() + limit;
    loop {
        if metric(job, name).is_some_and(&ok) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "ferry_table_verify_{name} not as expected within {limit:?}: {:?}\n{}",
            metric(job, name),
            job.output_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Upserts (`v` given) or deletes key `id` of `table` directly.
async fn write(client: &KuduClient, table: &str, id: i64, v: Option<&str>) {
    let t = client.open_table(table).await.expect("open");
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushSync))
        .expect("session");
    let mut row = t.new_row();
    row.set_i64("id", id).expect("id");
    let op = match v {
        Some(v) => {
            row.set_str("v", v).expect("v");
            Operation::upsert(&t, row)
        }
        None => Operation::delete(&t, row),
    };
    s.apply(op).await.expect("apply");
    s.flush().await.expect("flush");
}

/// A running job under a writer, with the clusters it needs held.
struct Running {
    job: FerryProcess,
    writer: Workload,
    source: KuduClient,
    sink: KuduClient,
    _clusters: Arc<(MiniCluster, MiniCluster)>,
    _dir: tempfile::TempDir,
}

/// Starts a job of `table` with continuous verify (and repair if asked)
/// under a writer; returns once a first verification found it equal.
async fn start(table: &str, repair: bool) -> Running {
    let cl = tokio::task::block_in_place(crate::standby_clusters);
    let (a, b) = (cl.0.master_addrs_joined(), cl.1.master_addrs_joined());
    let source = KuduClient::new(&cl.0.master_addrs()).expect("client");
    let sink = KuduClient::new(&cl.1.master_addrs()).expect("client");
    let builder = TableBuilder::new(table, ferry_fixtures::small_schema())
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(1);
    source.create_table(&builder).await.expect("create");
    // A row the writer never touches (its keys are positive).
    write(&source, table, -2, Some("kept")).await;
    let writer = Workload::start(source.clone(), table, 100, 7);
    let dir = tempfile::tempdir().expect("tmp");
    let job = crate::ferry()
        .args(["run", "--job.sourceMasterAddresses", &a])
        .args(["--job.sinkMasterAddresses", &b, "--job.tableName", table])
        .args(["--job.checkpointsDirectory", &dir.path().to_string_lossy()])
        .args(["--job.createTable", "true"])
        .args(["--job.discoveryIntervalSeconds", "1"])
        .args(["--job.checkpointingIntervalMillis", "300"])
        .args(["--job.verifyInterval", &format!("{INTERVAL_SECS} s")])
        .args(["--job.verifyRepair", if repair { "true" } else { "false" }])
        .free_ports()
        .start();
    // Verified while the writer runs: no false difference.
    until(&job, "runs_total", Duration::from_secs(60), |n| n >= 2.0).await;
    assert_eq!(
        metric(&job, "differences_found_total"),
        Some(0.0),
        "{}",
        job.output_text()
    );
    Running {
        job,
        writer,
        source,
        sink,
        _clusters: cl,
        _dir: dir,
    }
}

/// Plants an extra row on the sink and deletes one it should hold.
async fn plant(sink: &KuduClient, table: &str) {
    write(sink, table, -1, Some("planted")).await;
    write(sink, table, -2, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_difference_is_reported_within_one_interval() {
    let table = "cv_report";
    let r = start(table, false).await;
    plant(&r.sink, table).await;
    let planted = Instant::now();
    // The next window's cut holds the planted rows; the next turn finds them.
    until(&r.job, "differences", Duration::from_secs(30), |n| n >= 2.0).await;
    let took = planted.elapsed();
    assert!(
        took <= Duration::from_secs(INTERVAL_SECS + 8),
        "found after {took:?}"
    );
    assert_eq!(metric(&r.job, "repaired_total"), Some(0.0));
    r.writer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_repair_the_planted_difference_is_repaired() {
    let table = "cv_repair";
    let r = start(table, true).await;
    plant(&r.sink, table).await;
    until(&r.job, "repaired_total", Duration::from_secs(30), |n| {
        n >= 2.0
    })
    .await;
    assert!(metric(&r.job, "differences_found_total").is_some_and(|n| n >= 2.0));
    let Running {
        writer,
        source,
        sink,
        job,
        _clusters,
        _dir,
    } = r;
    writer.stop().await;
    // Once the job has copied the writer's last rows, sink == source.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let diff = compare_tables(&source, &sink, table, table).await;
        if diff.is_equal() {
            break;
        }
        assert!(Instant::now() < deadline, "{diff}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(job);
}
