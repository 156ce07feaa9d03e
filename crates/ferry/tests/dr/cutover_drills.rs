//! Cutover drills against two real Kudu clusters, with the real binary
//! (issue 12, acceptance):
//!
//! - **planned**: a writer changes the source while the job replicates;
//!   the writer stops; `ferry cutover --start-reverse` stops the job with a
//!   drain, verifies, reports equal with RPO 0 and runs the reverse job in
//!   the same process. That job takes no snapshot (its own metrics say
//!   so); writes on the new primary reach the old source; `ferry verify`
//!   of the reverse direction says equal.
//! - **unplanned**: a writer logs every operation with the source
//!   client's hybrid times before and after it; the source cluster is
//!   killed under it and the job process is killed too; `ferry failover
//!   --report` prints the RPO; the source comes back; `ferry verify
//!   --source-time now --sink-time <the position's sink time>` lists
//!   exactly the keys written after the last window end (operations whose
//!   time brackets the window end, or whose outcome is unknown, may be
//!   either way).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_fixtures::process::{output_text, FerryProcess};
use ferry_fixtures::workload::Workload;
use ferry_fixtures::{free_port, read_all};
use ferry_kudu::position::PositionTable;
use ferry_testkit::DaemonKind;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, KuduTable, Row, TableBuilder};

const TABLE: &str = "orders";

/// The all-types table on `client`'s cluster: HASH(id) 3 × RANGE(id)
/// [0, 10 000 000), one replica.
async fn create_table(client: &KuduClient) -> KuduTable {
    let schema = ferry_fixtures::all_types_schema();
    let (mut lo, mut hi) = (Row::new(&schema), Row::new(&schema));
    lo.set_i64("id", 0).expect("lo");
    hi.set_i64("id", 10_000_000).expect("hi");
    let b = TableBuilder::new(TABLE, schema)
        .add_hash_partitions(&["id"], 3, 0)
        .set_range_partition_columns(&["id"])
        .add_range_partition(lo, hi)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
    client.open_table(TABLE).await.expect("open")
}

/// `ferry run` options of a job `source` → `sink`.
fn job_options(source: &str, sink: &str, chk: &Path, rest: u16, metrics: u16) -> Vec<String> {
    [
        "--job.sourceMasterAddresses",
        source,
        "--job.sinkMasterAddresses",
        sink,
        "--job.tableName",
        TABLE,
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        &chk.to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
        "--rest.port",
        &rest.to_string(),
        "--metrics.port",
        &metrics.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `ferry <args>` (`run`, or `cutover` running the reverse job),
/// started; its REST API (the forward job's port, reused by the reverse
/// job) is on `rest`.
fn spawn(args: &[String], rest: u16) -> FerryProcess {
    crate::ferry().args(args).rest_at(rest).spawn()
}

/// The job id of a "Job has been submitted" line.
fn job_id(line: &str) -> Option<String> {
    line.strip_prefix("Job has been submitted with JobID ")
        .map(|id| id.trim().to_string())
}

/// Runs `ferry args` to completion off the runtime's threads.
async fn ferry(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || crate::ferry().args(&args).output())
        .await
        .expect("join")
}

fn text(o: &Output) -> String {
    output_text(o)
}

/// Waits until `table` holds the same rows on both clusters.
async fn wait_equal(a: &KuduClient, b: &KuduClient, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let (x, y) = (read_all(a, TABLE).await, read_all(b, TABLE).await);
        if x == y {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the tables still differ after {timeout:?} ({} vs {} rows)",
            x.len(),
            y.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planned_cutover_reverses_without_a_snapshot() {
    let (a, b) = ferry_fixtures::two_clusters();
    let (am, bm) = (a.master_addrs_joined(), b.master_addrs_joined());
    let ca = KuduClient::new(&a.master_addrs()).expect("client a");
    let cb = KuduClient::new(&b.master_addrs()).expect("client b");
    create_table(&ca).await;
    let writer = Workload::start(ca.clone(), TABLE, 200, 12);

    let dir = tempfile::tempdir().expect("tmp");
    let (rest, metrics) = (free_port(), free_port());
    let options = job_options(&am, &bm, &dir.path().join("chk"), rest, metrics);
    let mut args = vec!["run".to_string()];
    args.extend(options.clone());
    let mut forward = spawn(&args, rest);
    let id = forward
        .wait_line_async(Duration::from_secs(60), job_id)
        .await;
    // Let the snapshot and a few diff windows pass under the writer.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let stats = writer.stop().await;
    assert!(stats.applied > 200, "{stats:?}");

    let report_path = dir.path().join("cutover.json");
    let mut args: Vec<String> = [
        "cutover",
        "--jobmanager",
        &format!("127.0.0.1:{rest}"),
        "--job-id",
        &id,
        "--savepointPath",
        &dir.path().join("sp").to_string_lossy(),
        "--report",
        &report_path.to_string_lossy(),
        "--quiet-period",
        "1",
        "--start-reverse",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(options.clone());
    let cutover = spawn(&args, rest);
    let report: serde_json::Value = cutover
        .wait_line_async(Duration::from_secs(180), |l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .filter(|v| v.get("cutoverTime").is_some())
        })
        .await;
    assert_eq!(report["equal"], true, "{report}");
    assert_eq!(report["drained"], true, "{report}");
    assert_eq!(report["rpoMs"], 0, "{report}");
    assert_eq!(report["jobId"], id.as_str());
    assert!(report_path.exists());
    let status = forward.wait_exit(Duration::from_secs(120));
    assert!(status.success(), "the forward job ended with {status}");

    // The reverse job runs in the cutover process: the new primary (b)
    // takes writes, the old source (a) receives them.
    let reverse_id = cutover
        .wait_line_async(Duration::from_secs(60), job_id)
        .await;
    assert_ne!(reverse_id, id);
    let tb = cb.open_table(TABLE).await.expect("open b");
    let keys: Vec<i64> = read_all(&cb, TABLE).await.keys().copied().collect();
    assert!(keys.len() > 100);
    let mut session = cb
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
        .expect("session");
    for n in 0..50 {
        let mut r = tb.new_row();
        r.set_i64("id", 5_000_000 + n).unwrap();
        r.set_str("s", &format!("new on b {n}")).unwrap();
        session.apply(Operation::insert(&tb, r)).await.unwrap();
    }
    for (n, k) in keys.iter().take(20).enumerate() {
        let mut r = tb.new_row();
        r.set_i64("id", *k).unwrap();
        r.set_str("s", &format!("updated on b {n}")).unwrap();
        session.apply(Operation::update(&tb, r)).await.unwrap();
    }
    for k in keys.iter().skip(20).take(10) {
        let mut r = tb.new_row();
        r.set_i64("id", *k).unwrap();
        session.apply(Operation::delete(&tb, r)).await.unwrap();
    }
    session.flush().await.expect("flush b");
    wait_equal(&ca, &cb, Duration::from_secs(90)).await;
    let copied = read_all(&ca, TABLE).await;
    assert_eq!(
        copied.get(&5_000_049).map(|v| v.len()),
        Some(16),
        "the rows written on the new primary reached the old source"
    );

    // No snapshot: the reverse job started with a diff window and read only
    // the changed rows, never the new primary's whole table.
    let live = cutover.get_json(&format!("/ferry/jobs/{reverse_id}/live"));
    let totals = &live["totals"];
    assert_eq!(totals["snapshot_windows"], 0, "{live}");
    assert!(totals["windows_completed"].as_u64() >= Some(1), "{live}");
    let read = totals["rows_read"].as_u64().expect("rows_read");
    assert!(
        read <= 80,
        "the reverse job read {read} rows for 80 changes: a full scan of the new primary ({} rows)? {live}",
        keys.len()
    );

    // The reverse direction verifies equal, at the times the running
    // reverse job's sink position records.
    let mut args: Vec<String> = ["verify", "--json"].iter().map(|s| s.to_string()).collect();
    args.extend([
        "--job.sourceMasterAddresses".to_string(),
        bm.clone(),
        "--job.sinkMasterAddresses".to_string(),
        am.clone(),
        "--job.tableName".to_string(),
        TABLE.to_string(),
        "--job.checkpointsDirectory".to_string(),
        dir.path().join("chk").to_string_lossy().into_owned(),
    ]);
    let out = ferry(args).await;
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("verify JSON");
    assert_eq!(v["equal"], true, "{v}");
    drop(cutover);
}

/// One operation of the logging writer: the key it wrote, and the source
/// client's latest hybrid time before it and after its acknowledgement
/// (`None`: not acknowledged, so it may or may not have landed).
#[derive(Debug, Clone, Copy)]
struct Logged {
    id: i64,
    before: u64,
    after: Option<u64>,
}

/// Writes one operation per flush (fresh inserts and updates of existing
/// keys, each with a value no earlier operation wrote) until `stop`,
/// logging each one.
async fn logged_writer(client: KuduClient, stop: Arc<AtomicBool>) -> Vec<Logged> {
    let table = client.open_table(TABLE).await.expect("open");
    let mut log = Vec::new();
    let mut session = client
        .new_session_with(
            SessionOptions::default()
                .flush_mode(FlushMode::ManualFlush)
                .operation_timeout(Duration::from_secs(3)),
        )
        .expect("session");
    let mut n: i64 = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let (id, op) = if n % 3 == 0 {
            (n / 3 % 1000, "update")
        } else {
            (1_000 + n, "insert")
        };
        let mut r = table.new_row();
        r.set_i64("id", id).unwrap();
        r.set_i64("i64", n).unwrap();
        let op = match op {
            "update" => Operation::update_ignore(&table, r),
            _ => Operation::insert(&table, r),
        };
        let before = client.last_propagated_timestamp().map_or(0, |t| t.raw());
        let applied = session.apply(op).await.is_ok() && session.flush().await.is_ok();
        let after = applied
            .then(|| client.last_propagated_timestamp().map(|t| t.raw()))
            .flatten();
        log.push(Logged { id, before, after });
        if !applied {
            // A session after an error may hold the failed operation.
            session = client
                .new_session_with(
                    SessionOptions::default()
                        .flush_mode(FlushMode::ManualFlush)
                        .operation_timeout(Duration::from_secs(3)),
                )
                .expect("session");
            tokio::time::sleep(Duration::from_millis(200)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unplanned_failover_lists_the_rows_written_after_the_last_window() {
    let (mut a, b) = ferry_fixtures::two_clusters();
    let (am, bm) = (a.master_addrs_joined(), b.master_addrs_joined());
    let ca = KuduClient::new(&a.master_addrs()).expect("client a");
    let cb = KuduClient::new(&b.master_addrs()).expect("client b");
    let table = create_table(&ca).await;
    {
        let mut s = ca
            .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
            .expect("session");
        for id in 0..1000 {
            let mut r = table.new_row();
            r.set_i64("id", id).unwrap();
            s.apply(Operation::insert(&table, r)).await.unwrap();
        }
        s.flush().await.expect("load");
    }

    let dir = tempfile::tempdir().expect("tmp");
    let (rest, metrics) = (free_port(), free_port());
    let options = job_options(&am, &bm, &dir.path().join("chk"), rest, metrics);
    let mut args = vec!["run".to_string()];
    args.extend(options.clone());
    let mut job = spawn(&args, rest);
    job.wait_line_async(Duration::from_secs(60), job_id).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(logged_writer(ca.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(6)).await;

    // The source cluster dies under the writer and the job.
    tokio::task::block_in_place(|| {
        for i in 0..3 {
            a.kill(DaemonKind::TabletServer, i).expect("kill tserver");
        }
        a.kill(DaemonKind::Master, 0).expect("kill master");
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let log = writer.await.expect("writer");
    job.kill9();

    // With the source gone, both commands report the RPO of failing over
    // now.
    let mut args = vec!["failover".to_string(), "--report".to_string()];
    args.extend(options.clone());
    let out = ferry(args).await;
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        printed.contains("Data RPO of a failover now:"),
        "{}",
        text(&out)
    );
    let mut args = vec!["cutover".to_string(), "--unplanned".to_string()];
    args.extend(options.clone());
    let out = ferry(args).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("RPO of an unplanned failover now"),
        "{}",
        text(&out)
    );

    tokio::task::block_in_place(|| a.start_all()).expect("source back");
    let position = PositionTable::lookup(&cb, "ferry_positions", TABLE)
        .await
        .expect("position lookup")
        .expect("a position record");
    let last_end = position.last_end.expect("a completed window").raw();
    let sink_time = position.last_end_sink_time.expect("a sink time");

    let mut args: Vec<String> = [
        "verify",
        "--source-time",
        "now",
        "--sink-time",
        &sink_time.to_string(),
        "--json",
        "--max-listed",
        "1000000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(options.clone());
    let out = ferry(args).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("verify JSON");
    let listed: BTreeSet<i64> = report["listed"]
        .as_array()
        .expect("listed")
        .iter()
        .map(|d| d["key"]["id"].as_i64().expect("key id"))
        .collect();

    // What the log says: keys certainly written after the window end, and
    // keys that may have been.
    let mut after = BTreeSet::new();
    let mut maybe = BTreeSet::new();
    let mut ops: BTreeMap<i64, Vec<Logged>> = BTreeMap::new();
    for op in &log {
        ops.entry(op.id).or_default().push(*op);
        // Its time T: before < T <= after; in the sink iff T < last_end.
        match op.after {
            Some(_) if op.before >= last_end => {
                after.insert(op.id);
            }
            Some(t) if t < last_end => {}
            // Straddles the window end, or not acknowledged.
            _ => {
                maybe.insert(op.id);
            }
        }
    }
    assert!(
        !after.is_empty(),
        "the writer wrote nothing after the last window end"
    );
    let missed: Vec<_> = after.difference(&listed).collect();
    assert!(
        missed.is_empty(),
        "written after the window end but not listed: {missed:?}"
    );
    let wrong: Vec<_> = listed
        .iter()
        .filter(|k| !after.contains(k) && !maybe.contains(k))
        .map(|k| (k, ops.get(k)))
        .collect();
    assert!(
        wrong.is_empty(),
        "listed but written before the window end (last end {last_end}): {wrong:?}"
    );
    assert_eq!(report["truncated"], false);
}
