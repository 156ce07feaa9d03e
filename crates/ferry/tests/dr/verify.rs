//! `ferry verify` (issue 12) through the real binary against real Kudu:
//! exit codes and JSON for equal tables, for three differences made
//! directly on the sink (named by key and kind, then repaired), and for bad
//! input; a verification of a running replication with a concurrent writer
//! (times from the sink position record) finds no false difference; the
//! REST operation (`POST/GET /ferry/jobs/:id/verify`), `/live` and the
//! `ferry_verify_*` metrics report it. A planned `ferry cutover` proves the
//! copy, writes its report and prints a reverse command that starts
//! without a snapshot.

use ferry_engine::checkpoint::{encode_metadata, JobId, JobState, SnapshotKind, WindowState};
use ferry_fixtures::http::{get_json, http};
use ferry_fixtures::process::{output_text as text, FerryProcess};
use ferry_fixtures::workload::Workload;
use ferry_testkit::MiniCluster;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, TableBuilder};
use serde_json::Value;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// The clusters the binary's tests share (tables of their own).
fn clusters() -> std::sync::Arc<(MiniCluster, MiniCluster)> {
    tokio::task::block_in_place(crate::verify_clusters)
}

/// `ferry <verb> <args>`, waited for.
fn ferry(verb: &str, args: &[&str]) -> Output {
    crate::ferry().arg(verb).args(args).output()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

/// The job options naming `table` on both clusters (same name).
fn job_options(source: &str, sink: &str, table: &str, chk: &Path) -> Vec<String> {
    [
        "--job.sourceMasterAddresses",
        source,
        "--job.sinkMasterAddresses",
        sink,
        "--job.tableName",
        table,
        "--job.checkpointsDirectory",
        &chk.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

async fn create(client: &KuduClient, name: &str, buckets: u32) {
    let b = TableBuilder::new(name, ferry_fixtures::small_schema())
        .add_hash_partitions(&["id"], buckets, 0)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
}

async fn write(client: &KuduClient, name: &str, ops: Vec<(char, i64, &str)>) {
    let table = client.open_table(name).await.expect("open");
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
        .expect("session");
    for (kind, id, v) in ops {
        let mut r = table.new_row();
        r.set_i64("id", id).expect("id");
        let op = match kind {
            'd' => Operation::delete(&table, r),
            _ => {
                r.set_str("v", v).expect("v");
                Operation::upsert(&table, r)
            }
        };
        s.apply(op).await.expect("apply");
    }
    s.flush().await.expect("flush");
}

#[test]
fn bad_input_is_refused_with_exit_code_2() {
    let dir = tempfile::tempdir().expect("tmp");
    let opts = job_options("127.0.0.1:1", "127.0.0.1:2", "t", &dir.path().join("chk"));
    let with = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        v.extend(opts.iter().cloned());
        v
    };
    for (extra, named) in [
        (&["--source-time", "yesterday"][..], "--source-time"),
        (&["--sink-time", "-5"][..], "--sink-time"),
        (&["--method", "fast"][..], "--method"),
        (&["-p", "0"][..], "for -p"),
        (&["-s", "/x", "--source-time", "5"][..], "--source-time"),
        (&["--jobmanager", "127.0.0.1:8081"][..], "--jobmanager"),
        (&["--no-such-flag"][..], "no-such-flag"),
    ] {
        let args = with(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = ferry("verify", &args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(named), "{extra:?} not named: {err}");
    }

    // A state with a window in progress is no proof of what the sink holds.
    let job: JobId = "00112233445566778899aabbccddeeff".parse().expect("id");
    let mut s = JobState::new(job, SnapshotKind::Savepoint, 3, "t", vec![], vec![]);
    s.last_end_timestamp = Some(ferry_engine::SourceTime::from_raw(600));
    s.window = Some(WindowState {
        start_timestamp: Some(ferry_engine::SourceTime::from_raw(600)),
        end_timestamp: ferry_engine::SourceTime::from_raw(700),
    });
    let sp = dir.path().join("sp");
    std::fs::create_dir_all(&sp).expect("mkdir");
    std::fs::write(sp.join("_metadata"), encode_metadata(&s).expect("encode")).expect("write");
    let args = with(&["-s", &sp.to_string_lossy()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = ferry("verify", &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("window in progress"),
        "{}",
        text(&o)
    );

    let o = ferry("verify", &["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("--sink-time T"));
    let o = ferry("cutover", &["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("--start-reverse"));
    let args = with(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = ferry("cutover", &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--job-id"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_differences_are_named_then_repaired() {
    let cl = clusters();
    let (a, b) = (cl.0.master_addrs_joined(), cl.1.master_addrs_joined());
    let source = KuduClient::new(&cl.0.master_addrs()).expect("client");
    let sink = KuduClient::new(&cl.1.master_addrs()).expect("client");
    // Different partitioning on the two sides: ranges need not line up.
    create(&source, "vt", 3).await;
    create(&sink, "vt", 2).await;
    let rows: Vec<(char, i64, String)> = (0..300).map(|i| ('u', i, format!("row {i}"))).collect();
    let rows: Vec<(char, i64, &str)> = rows.iter().map(|(k, i, v)| (*k, *i, v.as_str())).collect();
    write(&source, "vt", rows.clone()).await;
    write(&sink, "vt", rows).await;

    let dir = tempfile::tempdir().expect("tmp");
    let opts = job_options(&a, &b, "vt", &dir.path().join("chk"));
    let run = |extra: &[&str]| {
        let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        args.extend(["--source-time", "now", "--sink-time", "now"].map(String::from));
        args.extend(opts.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ferry("verify", &args)
    };

    let o = run(&["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = json(&o);
    assert_eq!(r["equal"], true, "{r}");
    assert_eq!(r["rowsCompared"], 300, "{r}");
    assert_eq!(r["differences"], 0, "{r}");

    // One update, one delete, one insert, directly on the sink.
    write(
        &sink,
        "vt",
        vec![('u', 5, "changed"), ('d', 7, ""), ('u', 1000, "stray")],
    )
    .await;
    for method in ["server", "client"] {
        let o = run(&["--json", "--method", method]);
        assert_eq!(o.status.code(), Some(1), "{method}: {}", text(&o));
        let r = json(&o);
        assert_eq!(r["equal"], false, "{r}");
        assert_eq!(r["differences"], 3, "{method}: {r}");
        assert_eq!(
            (&r["missing"], &r["extra"], &r["differing"]),
            (&Value::from(1), &Value::from(1), &Value::from(1)),
            "{method}: {r}"
        );
        let listed: Vec<(String, i64, Value)> = r["listed"]
            .as_array()
            .expect("listed")
            .iter()
            .map(|d| {
                (
                    d["kind"].as_str().unwrap_or_default().to_string(),
                    d["key"]["id"].as_i64().unwrap_or(-1),
                    d["columns"].clone(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("differs".into(), 5, serde_json::json!(["v"])),
                ("missing".into(), 7, Value::Null),
                ("extra".into(), 1000, Value::Null),
            ],
            "{method}: {r}"
        );
    }
    // The human summary names them too.
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for line in ["missing  {", "extra  {", "differs  {"] {
        assert!(out.contains(line), "no '{line}' in:\n{out}");
    }

    let o = run(&["--repair", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = json(&o);
    assert_eq!(r["equal"], true, "{r}");
    assert_eq!(r["repair"]["upserted"], 2, "{r}");
    assert_eq!(r["repair"]["deleted"], 1, "{r}");
    assert_eq!(r["repair"]["equalAfter"], true, "{r}");
    let o = run(&["--json"]);
    assert_eq!(o.status.code(), Some(0), "after the repair: {}", text(&o));

    // Unknown sink table: bad input.
    let o = run(&["--sink-table", "no_such_table"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no_such_table"));
    // No times and no position record for this table: told which flags.
    let args: Vec<&str> = opts.iter().map(String::as_str).collect();
    let o = ferry("verify", &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--source-time"));
}

/// Starts `ferry run` replicating `table` to `table_copy`.
fn start_job(source: &str, sink: &str, table: &str, chk: &Path) -> FerryProcess {
    crate::ferry()
        .arg("run")
        .args(job_options(source, sink, table, chk))
        .args([
            "--job.tableSuffix",
            "_copy",
            "--job.createTable",
            "true",
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "300",
            "--metrics.kudu.pollIntervalMillis",
            "500",
        ])
        .free_ports()
        .start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_verifies_equal_under_writes_also_over_rest() {
    let cl = clusters();
    let (a, b) = (cl.0.master_addrs_joined(), cl.1.master_addrs_joined());
    let source = KuduClient::new(&cl.0.master_addrs()).expect("client");
    create(&source, "live", 3).await;
    let writer = Workload::start(source.clone(), "live", 400, 12);

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let job = start_job(&a, &b, "live", &chk);
    let (rest, metrics) = (job.rest(), job.metrics());
    let id = job.job_id();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let live = get_json(rest, &format!("/ferry/jobs/{id}/live"));
        if live["totals"]["windows_completed"].as_u64().unwrap_or(0) >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "no windows: {live}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The CLI, with the job's own options and no times, twice while the
    // writer goes on.
    let mut args = job_options(&a, &b, "live", &chk);
    args.extend(["--job.tableSuffix", "_copy", "--json"].map(String::from));
    for round in 0..2 {
        let args = args.clone();
        let o = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            ferry("verify", &args)
        })
        .await
        .expect("join");
        assert_eq!(o.status.code(), Some(0), "round {round}: {}", text(&o));
        let r = json(&o);
        assert_eq!(r["equal"], true, "round {round}: {r}");
        assert!(r["rowsCompared"].as_u64().unwrap_or(0) > 0, "{r}");
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    // The REST operation.
    let (status, body) = http(
        "POST",
        rest,
        &format!("/ferry/jobs/{id}/verify"),
        Some(r#"{"parallelism": 2, "method": "server"}"#),
    );
    assert_eq!(status, 202, "{body}");
    let request: Value = serde_json::from_str(&body).expect("json");
    let request = request["request-id"]
        .as_str()
        .expect("request-id")
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    let done = loop {
        let v = get_json(rest, &format!("/ferry/jobs/{id}/verify/{request}"));
        assert!(v["progress"].is_object(), "{v}");
        if v["status"]["id"] == "COMPLETED" {
            break v;
        }
        assert!(Instant::now() < deadline, "still running: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(done["operation"]["equal"], true, "{done}");
    let live = get_json(rest, &format!("/ferry/jobs/{id}/live"));
    assert_eq!(live["verify"]["last_result"], 1, "{live}");
    assert_eq!(live["verify"]["request_id"], request.as_str(), "{live}");
    let (_, text_metrics) = http("GET", metrics, "/metrics", None);
    let line = text_metrics
        .lines()
        .find(|l| l.starts_with("ferry_verify_last_result{"))
        .unwrap_or_else(|| panic!("no ferry_verify_last_result in:\n{text_metrics}"));
    let value: f64 = line
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(-9.0);
    assert!(line.contains(&id) && value == 1.0, "{line}");
    assert!(text_metrics.contains("ferry_verify_rows_compared{"));
    assert!(text_metrics.contains("ferry_verify_rows_differing{"));
    assert!(text_metrics.contains("ferry_verify_last_timestamp_seconds{"));
    let (status, body) = http(
        "POST",
        rest,
        &format!("/ferry/jobs/{id}/verify"),
        Some(r#"{"method": "fast"}"#),
    );
    assert_eq!(status, 400, "{body}");

    let stats = writer.stop().await;
    assert!(stats.applied > 0, "{stats:?}");
    drop(job);
}

/// Waits until the job at `rest` completed `n` windows.
async fn windows(rest: u16, id: &str, n: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let live = get_json(rest, &format!("/ferry/jobs/{id}/live"));
        if live["totals"]["windows_completed"].as_u64().unwrap_or(0) >= n {
            return live;
        }
        assert!(Instant::now() < deadline, "not {n} windows: {live}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planned_cutover_proves_the_copy_and_the_reverse_job_needs_no_snapshot() {
    let cl = clusters();
    let (a, b) = (cl.0.master_addrs_joined(), cl.1.master_addrs_joined());
    let source = KuduClient::new(&cl.0.master_addrs()).expect("client");
    create(&source, "cut", 2).await;
    let rows: Vec<(char, i64, String)> = (0..200).map(|i| ('u', i, format!("row {i}"))).collect();
    let rows: Vec<(char, i64, &str)> = rows.iter().map(|(k, i, v)| (*k, *i, v.as_str())).collect();
    write(&source, "cut", rows).await;

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let mut job = start_job(&a, &b, "cut", &chk);
    let rest = job.rest();
    let id = job.job_id();
    windows(rest, &id, 2).await;

    let report_path = dir.path().join("cutover.json");
    let mut args: Vec<String> = [
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
        "--drain-timeout",
        "60",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(job_options(&a, &b, "cut", &chk));
    // The reverse job takes these too: without 1-s windows its second
    // window would open after the default 600 s, and the write below
    // would wait for it whenever the first window ended before the write.
    args.extend(
        [
            "--job.tableSuffix",
            "_copy",
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "300",
        ]
        .map(String::from),
    );
    let o = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ferry("cutover", &args)
    })
    .await
    .expect("join");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The drain steps come first, then one JSON line.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON in {stdout}"));
    let r: Value = serde_json::from_str(line).expect("json");
    assert_eq!(r["equal"], true, "{r}");
    assert_eq!(r["drained"], true, "{r}");
    assert_eq!(r["rpoMs"], 0, "{r}");
    assert_eq!(r["verify"]["rowsCompared"], 200, "{r}");
    assert_eq!(r["source"]["table"], "cut", "{r}");
    assert_eq!(r["sink"]["table"], "cut_copy", "{r}");
    assert!(r["cutoverTime"].as_u64().unwrap_or(0) > 0, "{r}");
    let saved: Value =
        serde_json::from_slice(&std::fs::read(&report_path).expect("report file")).expect("json");
    assert_eq!(saved["cutoverTime"], r["cutoverTime"]);
    assert_eq!(saved["finalEnd"], r["finalEnd"]);
    // The stopped job's process ends.
    job.wait_exit(Duration::from_secs(30));

    // The printed reverse command starts without a snapshot and copies a
    // write on the new primary back to the old source.
    let command = r["reverseCommand"].as_str().expect("reverseCommand");
    assert!(command.contains("--fromCutover"), "{command}");
    assert!(
        command.contains("--job.discoveryIntervalSeconds 1"),
        "{command}"
    );
    let reverse: Vec<String> = command
        .strip_prefix("ferry run ")
        .expect("ferry run")
        .split(' ')
        .map(String::from)
        .collect();
    let reverse_job = crate::ferry()
        .arg("run")
        .args(&reverse)
        .free_ports()
        .start();
    let rest2 = reverse_job.rest();
    let id2 = reverse_job.job_id();
    let sink = KuduClient::new(&cl.1.master_addrs()).expect("client");
    write(&sink, "cut_copy", vec![('u', 5000, "on the new primary")]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = ferry_fixtures::read_all(&source, "cut").await;
        if rows.contains_key(&5000) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the write did not reach the old source; the reverse job: {}",
            get_json(rest2, &format!("/ferry/jobs/{id2}/live"))
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let live = windows(rest2, &id2, 1).await;
    assert_eq!(live["totals"]["snapshot_windows"], 0, "{live}");
    drop(reverse_job);
}
