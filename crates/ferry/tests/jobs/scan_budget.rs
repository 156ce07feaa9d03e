//! The diff-scan budget (issue 34 item 2) against real Kudu: a table whose
//! every tablet is written all the time, replicated with one-second
//! windows and `reader.diffScanBudget` 0.25 scans per second per tablet
//! server, opens a window every 4 s or more instead of every second (a
//! written tablet's diff scan costs its server a compile), never more
//! than `reader.maxLag` apart; lastEndTimestamp stays the table's (every
//! tablet at one end), and the sink equals the source.

use super::operations::Fixture;
use ferry_fixtures::live::{prom_sample, wait_caught_up};
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::Workload;
use std::time::{Duration, Instant};

const TABLE: &str = "budgeted";

fn sample(job: &FerryProcess, metric: &str) -> Option<f64> {
    prom_sample(&job.metrics_text(), metric, "table_name", TABLE)
}

fn windows(job: &FerryProcess) -> f64 {
    sample(job, "ferry_table_windows_completed_total").unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diff_scan_budget_spaces_the_windows_within_the_lag_bound() {
    let f = Fixture::new(TABLE, 1_000).await;
    let job = tokio::task::block_in_place(|| {
        f.start_job(&["--reader.diffScanBudget", "0.25", "--reader.maxLag", "7 s"])
    });
    // Both tablets written in every window: none is proven quiet.
    let writer = Workload::start(f.client.clone(), TABLE, 200, 34);
    tokio::task::block_in_place(|| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while windows(&job) < 2.0 {
            assert!(Instant::now() < deadline, "no diff window: {}", job.live());
            std::thread::sleep(Duration::from_millis(200));
        }
    });

    // Over 16 s: one-second windows would complete ~15; the budget lets a
    // server serve one scan per 4 s (a window each 4 s with the two
    // tablets on two servers, 8 s on one: the lag bound then wins).
    let (w0, t0) = (windows(&job), Instant::now());
    let mut worst_lag = 0.0f64;
    let mut intervals = Vec::new();
    while t0.elapsed() < Duration::from_secs(16) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let text = job.metrics_text();
        if let Some(lag) = prom_sample(&text, "ferry_table_lag_seconds", "table_name", TABLE) {
            worst_lag = worst_lag.max(lag);
        }
        if let Some(i) = prom_sample(
            &text,
            "ferry_table_window_interval_seconds",
            "table_name",
            TABLE,
        ) {
            intervals.push(i);
        }
    }
    let completed = windows(&job) - w0;
    assert!(
        (1.0..=6.0).contains(&completed),
        "{completed} windows in 16 s (intervals {intervals:?})"
    );
    let paced = intervals.iter().copied().fold(0.0f64, f64::max);
    assert!(
        (3.5..=7.0).contains(&paced),
        "window intervals {intervals:?}: paced to the budget, within reader.maxLag"
    );
    // The lag bound holds, judged by the window before: a slower window
    // and a scrape's slack come on top.
    assert!(worst_lag <= 12.0, "lag reached {worst_lag} s");

    let stats = writer.stop().await;
    assert!(stats.applied > 2_000, "{stats:?}");
    let names = [TABLE.to_string()];
    wait_caught_up(&f.client, job.metrics(), &names, Duration::from_secs(30)).await;
    let diff =
        ferry_fixtures::compare::compare_tables(&f.client, &f.client, TABLE, &f.copy()).await;
    assert!(diff.is_equal(), "{diff:?}");
}
