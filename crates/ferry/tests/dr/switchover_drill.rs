//! `ferry drill --switchover` against two real Kudu clusters (issue 33,
//! item 5): a writer on the source pauses when the drill says so; the
//! drill cuts over to the sink, runs the reverse job (which carries the
//! rows written on the new primary during the hold back to the old
//! source), cuts back and runs the original direction again, in its own
//! process. The report has both switches drained, equal, RPO 0, no
//! snapshot and a measured write outage; after the writer resumes, both
//! clusters are equal. Refusals: no running job at `--jobmanager` (exit
//! 1, nothing changed, the report says so) and a job with a lease (exit 2).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_fixtures::{free_port, read_all};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, TableBuilder};

const TABLE: &str = "switchover_drill";

/// Writes to `client`'s table until stopped, pausing while `paused`:
/// the application that the drill tells to stop and resume.
fn writer(
    client: KuduClient,
    paused: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    next: Arc<AtomicI64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let table = client.open_table(TABLE).await.expect("open");
        let mut session = client
            .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
            .expect("session");
        while !stop.load(Ordering::SeqCst) {
            if paused.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            let k = next.fetch_add(1, Ordering::SeqCst);
            let mut r = table.new_row();
            r.set_i64("id", k).unwrap();
            r.set_str("s", &format!("row {k}")).unwrap();
            session.apply(Operation::insert(&table, r)).await.unwrap();
            if k % 3 == 0 && k > 0 {
                let mut r = table.new_row();
                r.set_i64("id", k - 1).unwrap();
                r.set_str("s", &format!("updated {k}")).unwrap();
                session.apply(Operation::update(&table, r)).await.unwrap();
            }
            session.flush().await.expect("flush");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

fn options(source: &str, sink: &str, chk: &str, rest: u16, metrics: u16) -> Vec<String> {
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
        chk,
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
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switchover_drill_switches_back_and_reports_rpo_and_outage() {
    let clusters = crate::verify_clusters();
    let (a, b) = (&clusters.0, &clusters.1);
    let (am, bm) = (a.master_addrs_joined(), b.master_addrs_joined());
    let ca = KuduClient::new(&a.master_addrs()).expect("client a");
    let cb = KuduClient::new(&b.master_addrs()).expect("client b");
    let builder = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(1);
    ca.create_table(&builder).await.expect("create");
    let (paused, stop, next) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicI64::new(0)),
    );
    let app = writer(ca.clone(), paused.clone(), stop.clone(), next.clone());

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk").to_string_lossy().into_owned();
    let (rest, metrics) = (free_port(), free_port());
    let opts = options(&am, &bm, &chk, rest, metrics);
    let mut forward = crate::ferry()
        .args(["run"])
        .args(&opts)
        .rest_at(rest)
        .spawn();
    let id = forward
        .wait_line_async(Duration::from_secs(60), |l| {
            l.strip_prefix("Job has been submitted with JobID ")
                .map(|s| s.trim().to_string())
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    let report_path = dir.path().join("drill.json");
    let mut args: Vec<String> = [
        "drill",
        "--switchover",
        "--jobmanager",
        &format!("127.0.0.1:{rest}"),
        "--job-id",
        &id,
        "--savepointPath",
        &dir.path().join("sp").to_string_lossy(),
        "--quiet-period",
        "1",
        "--hold",
        "2 s",
        "--report",
        &report_path.to_string_lossy(),
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(opts.clone());
    let drill = crate::ferry().args(&args).rest_at(rest).spawn();

    // The application stops writing to A when told.
    drill
        .wait_line_async(Duration::from_secs(60), |l| {
            l.contains("Drill: stop the application's writes to")
                .then_some(())
        })
        .await;
    paused.store(true, Ordering::SeqCst);
    // B is the primary: the application writes there.
    drill
        .wait_line_async(Duration::from_secs(180), |l| {
            l.contains("is the primary now").then_some(())
        })
        .await;
    let status = forward.wait_exit(Duration::from_secs(30));
    assert!(
        status.success(),
        "the forward job's process ended with {status}"
    );
    let tb = cb.open_table(TABLE).await.expect("open b");
    let mut session = cb
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
        .expect("session");
    for n in 0..30 {
        let mut r = tb.new_row();
        r.set_i64("id", 5_000_000 + n).unwrap();
        r.set_str("s", &format!("written on b {n}")).unwrap();
        session.apply(Operation::insert(&tb, r)).await.unwrap();
    }
    let mut r = tb.new_row();
    r.set_i64("id", 1).unwrap();
    session.apply(Operation::delete(&tb, r)).await.unwrap();
    session.flush().await.expect("flush b");

    let report: serde_json::Value = drill
        .wait_line_async(Duration::from_secs(240), |l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .filter(|v| v.get("switches").is_some())
        })
        .await;
    // A is the primary again: the application resumes there.
    let resumed_at = next.load(Ordering::SeqCst);
    paused.store(false, Ordering::SeqCst);
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["jobId"], id.as_str());
    assert_eq!(report["rpoMs"], 0, "{report}");
    let steps: Vec<&str> = report["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["step"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        steps,
        ["cutover", "reverseStart", "hold", "cutBack", "forwardStart"],
        "{report}"
    );
    let hold = &report["steps"][2]["ms"];
    assert!(hold.as_u64() >= Some(2_000), "{report}");
    let switches = report["switches"].as_array().expect("switches");
    assert_eq!(switches.len(), 2, "{report}");
    let mut outage = 0;
    for s in switches {
        assert_eq!(
            (
                &s["equal"],
                &s["drained"],
                &s["rpoMs"],
                &s["snapshotWindows"]
            ),
            (
                &serde_json::json!(true),
                &serde_json::json!(true),
                &serde_json::json!(0),
                &serde_json::json!(0)
            ),
            "{report}"
        );
        let ms = s["writeOutageMs"].as_u64().expect("outage");
        assert!(ms > 0 && ms < 180_000, "{report}");
        outage += ms;
        let path = s["cutoverReport"].as_str().expect("path");
        assert!(std::path::Path::new(path).exists(), "{path}");
    }
    assert_eq!(report["writeOutageMs"].as_u64(), Some(outage));
    assert!(switches[0]["from"].as_str().unwrap().starts_with(&am));
    assert!(switches[1]["from"].as_str().unwrap().starts_with(&bm));
    let (rev, fin) = (&report["reverseJobId"], &report["finalJobId"]);
    assert!(rev.is_string() && fin.is_string() && rev != fin, "{report}");
    assert_ne!(fin.as_str(), Some(id.as_str()));
    assert!(
        report["finalState"]
            .as_str()
            .is_some_and(|s| s.contains("again")),
        "{report}"
    );
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).expect("report file"))
            .expect("report JSON");
    assert_eq!(written, report);

    // The rows written on B during the hold came back to A, and the
    // original direction runs: A's new writes reach B.
    let on_a = read_all(&ca, TABLE).await;
    assert!(on_a.contains_key(&5_000_029), "the hold's writes reached A");
    assert!(!on_a.contains_key(&1), "the hold's delete reached A");
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    app.await.expect("writer");
    assert!(
        next.load(Ordering::SeqCst) > resumed_at,
        "the writer resumed"
    );
    wait_equal(&ca, &cb, Duration::from_secs(60)).await;
    let live = drill.get_json(&format!("/ferry/jobs/{}/live", fin.as_str().unwrap()));
    assert_eq!(live["totals"]["snapshot_windows"], 0, "{live}");
    drop(drill);
    ca.delete_table(TABLE).await.expect("drop a");
    cb.delete_table(TABLE).await.expect("drop b");
}

#[test]
fn a_switchover_drill_without_a_running_job_changes_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk").to_string_lossy().into_owned();
    let report = dir.path().join("drill.json");
    let port = free_port();
    let opts = options("127.0.0.1:1", "127.0.0.1:2", &chk, free_port(), free_port());
    let mut args: Vec<String> = [
        "drill",
        "--switchover",
        "--jobmanager",
        &format!("127.0.0.1:{port}"),
        "--job-id",
        "00112233445566778899aabbccddeeff",
        "--report",
        &report.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(opts.clone());
    let out = crate::ferry().args(&args).output();
    let text = ferry_fixtures::process::output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("cannot reach the ferry REST API"), "{text}");
    assert!(text.contains("Switchover drill: FAILED"), "{text}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("JSON");
    assert_eq!(written["ok"], false);
    assert!(written["steps"].as_array().is_some_and(|s| s.is_empty()));
    assert!(
        written["finalState"]
            .as_str()
            .is_some_and(|s| s.contains("still runs")),
        "{written}"
    );

    // A job with a lease: its standby would take the stopped job over.
    let mut args: Vec<String> = [
        "drill",
        "--switchover",
        "--job-id",
        "00112233445566778899aabbccddeeff",
        "--high-availability.type",
        "lease",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(opts);
    let out = crate::ferry().args(&args).output();
    let text = ferry_fixtures::process::output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("high-availability.type lease") && text.contains("ferry cutover"),
        "{text}"
    );
}
