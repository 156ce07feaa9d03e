//! Throttling against real Kudu: a job started with a read limit copies
//! its snapshot no faster than the limit; a lower limit of its table set
//! through REST slows it down at once, and lifting both with `ferry
//! throttle` lets the rest go at full speed; the sink then equals the source. The limits and
//! the time spent throttled show in the live JSON and in Prometheus.

use super::operations::{text, Fixture};
use ferry_fixtures::process::FerryProcess;
use serde_json::Value;
use std::time::{Duration, Instant};

const TABLE: &str = "throttled_copy";
const ROWS: i64 = 20_000;

/// Rows the job has read so far.
fn rows_read(job: &FerryProcess) -> u64 {
    job.live()["totals"]["rows_read"].as_u64().unwrap_or(0)
}

/// Rows read per second over `span`, from the job's counter.
fn rate_over(job: &FerryProcess, span: Duration) -> (f64, u64) {
    let (r0, t0) = (rows_read(job), Instant::now());
    std::thread::sleep(span);
    let r1 = rows_read(job);
    ((r1 - r0) as f64 / t0.elapsed().as_secs_f64(), r1)
}

fn ferry_throttle(job: &FerryProcess, args: &[&str]) -> std::process::Output {
    let id = job.job_id();
    let jm = job.jobmanager();
    let mut all = vec!["throttle", "-m", &jm, &id];
    all.extend_from_slice(args);
    crate::ferry().args(all).output()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_limit_holds_the_snapshot_back_and_changes_live() {
    let f = Fixture::new(TABLE, ROWS).await;
    let job = tokio::task::block_in_place(|| {
        f.start_job(&[
            "--throttle.read.snapshot.rowsPerSecond",
            "2000",
            // Small scan batches: the limit is paid batch by batch.
            "--reader.batchSizeBytes",
            "4096",
        ])
    });
    let id = job.job_id();
    let path = format!("/ferry/jobs/{id}/throttle");
    let shown = job.get_json(&path);
    assert_eq!(
        shown["job"]["read"]["snapshot"]["rowsPerSecond"], 2000,
        "{shown}"
    );
    assert_eq!(shown["job"]["read"]["diff"]["rowsPerSecond"], 0, "{shown}");

    // Under 2 000 rows/s (a batch or two of slack, the start's ramp).
    let deadline = Instant::now() + Duration::from_secs(60);
    while rows_read(&job) == 0 {
        assert!(Instant::now() < deadline, "nothing read: {}", job.live());
        std::thread::sleep(Duration::from_millis(100));
    }
    let (limited, _) = rate_over(&job, Duration::from_secs(3));
    assert!(
        (1_000.0..=2_600.0).contains(&limited),
        "{limited} rows/s under a 2000 rows/s limit"
    );

    // Lowered through REST for the table: a quarter of the rate (the
    // job's 2 000 still applies, the table's 500 is the tighter).
    let (status, body) = job.http(
        "PATCH",
        &path,
        Some(r#"{"table": "throttled_copy", "read": {"snapshot": {"rowsPerSecond": 500}}}"#),
    );
    assert_eq!(status, 200, "{body}");
    let now: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        now["tables"][TABLE]["read"]["snapshot"]["rowsPerSecond"], 500,
        "{now}"
    );
    assert_eq!(
        now["job"]["read"]["snapshot"]["rowsPerSecond"], 2000,
        "{now}"
    );
    // The batches in flight are paid at the old rate; then the new one.
    std::thread::sleep(Duration::from_secs(1));
    let (lowered, read) = rate_over(&job, Duration::from_secs(4));
    assert!(
        lowered <= 900.0,
        "{lowered} rows/s under a 500 rows/s limit"
    );
    let left = ROWS as u64 - read;
    assert!(
        left >= 5_000,
        "only {left} rows left: the test needs more rows"
    );

    // Bad requests are refused naming the field; an unknown table too.
    let (status, body) = job.http(
        "PATCH",
        &path,
        Some(r#"{"read": {"snapshot": {"rowsPerSecond": -3}}}"#),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("read.snapshot.rowsPerSecond"), "{body}");
    let (status, body) = job.http("PATCH", &path, Some(r#"{"table": "nope", "read": {}}"#));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("nope"), "{body}");
    let bad = ferry_throttle(&job, &["--read-snapshot-rows", "-5"]);
    assert_eq!(bad.status.code(), Some(2), "{:?}", text(&bad));

    // Lifted with the CLI, the table's and the job's: the rest (at 500
    // rows/s ≥ 10 s) goes fast.
    let lifted_at = Instant::now();
    let out = ferry_throttle(&job, &["--table", TABLE, "--read-snapshot-rows", "0"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains("Table throttled_copy"), "{stdout}");
    let out = ferry_throttle(&job, &["--read-snapshot-rows", "0"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("read snapshot") && l.contains("unlimited")),
        "{stdout}"
    );
    let deadline = lifted_at + Duration::from_secs(8);
    while job.live()["last_end_timestamp"].as_u64().unwrap_or(0) == 0 {
        assert!(
            Instant::now() < deadline,
            "{left} rows not copied within 8 s of lifting the limit: {}",
            job.live()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Shown: `ferry throttle` alone, the live JSON, Prometheus.
    let out = ferry_throttle(&job, &[]);
    let (stdout, _) = text(&out);
    assert!(
        out.status.success() && stdout.contains("Throttled so far: reading"),
        "{stdout}"
    );
    let live = job.live();
    let slept = live["throttle"]["throttledReadSeconds"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(slept > 1.0, "{live}");
    let metrics = job.metrics_text();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("ferry_throttle_limit{")
                && l.contains(r#"direction="read",window="snapshot",unit="rows",table="""#)
                && l.ends_with(" 0.0")),
        "{metrics}"
    );
    assert!(
        metrics.contains("ferry_throttled_seconds_total{"),
        "{metrics}"
    );

    let diff =
        ferry_fixtures::compare::compare_tables(&f.client, &f.client, TABLE, &f.copy()).await;
    assert!(diff.is_equal(), "{diff:?}");
    assert_eq!(diff.source_rows, ROWS as usize);
}
