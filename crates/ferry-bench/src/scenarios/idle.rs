//! `idle-cycle`: what one diff window costs when nothing changed, on
//! tables of 1 M, 4 M and 16 M rows by default. ferry replicates each table (snapshot, then
//! 1-second windows); once it is steady the bench counts K windows and
//! reads, per window: ferry's own `took_ms`, the rows the source returned
//! and walked (tablet counters `scanner_rows_returned` /
//! `scanner_rows_scanned`), bytes read from disk, and the CPU the source
//! tablet servers and ferry spent. It shows whether a window costs what
//! changed or what exists.
//!
//! Besides the per-window means (counters and CPU read before and after
//! the K windows), every window is kept: its `took_ms`, the rows ferry
//! read (its `ferry_rows_read_total`), and the CPU the source tablet
//! servers (and of it the LLVM compiles), ferry and the sink spent between
//! the previous window's completion and its own. Each size's tables are
//! dropped on both clusters before the next size is loaded.

use super::{prepare_source, settle, Ctx};
use crate::data;
use crate::ferry::{Ferry, WindowDone};
use crate::kudu::Cluster;
use crate::procs::cpu_seconds_of;
use crate::report::Report;
use crate::report::{f0, f1, f2, percentile, Table};
use anyhow::{bail, Result};
use kudu_client::KuduClient;
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const COUNTERS: &[&str] = &[
    "scanner_rows_returned",
    "scanner_rows_scanned",
    "scanner_bytes_returned",
    "scanner_bytes_scanned_from_disk",
    "scanner_cells_scanned_from_disk",
    "scans_started",
];

/// Default table sizes of idle-cycle and memory.
pub const DEFAULT_SIZES: [u64; 3] = [1_000_000, 4_000_000, 16_000_000];

/// ferry's counters read at each window (from its metrics endpoint).
const FERRY_ROWS_READ: &str = "ferry_rows_read_total";
const FERRY_SCANS_SKIPPED: &str = "ferry_table_tablet_scans_skipped_total";

/// One measured idle window, and what was spent between the previous
/// window's completion and its own.
#[derive(Debug, Clone, Serialize)]
pub struct IdleWindow {
    /// 1-based among the measured windows.
    pub n: usize,
    /// Seconds since ferry started, when its completion was logged.
    pub at_s: f64,
    pub end_ht: u64,
    pub took_ms: u64,
    /// Windows that completed in this interval (1, unless two completed
    /// within one 20 ms poll; the figures then cover both).
    pub completed: usize,
    pub interval_s: f64,
    /// Rows ferry read in the interval (`None`: no metrics endpoint).
    pub rows_read: Option<f64>,
    /// Tablet scans ferry left out as quiet in the interval.
    pub tablet_scans_skipped: Option<f64>,
    pub source_tservers_cpu_ms: f64,
    /// Of which LLVM compiles logged in the interval (a compile can be
    /// logged just after its window completed: the sum over all windows is
    /// exact, the split between neighbours is not).
    pub source_codegen_cpu_ms: f64,
    pub source_codegen_compiles: u64,
    /// The no-job baseline over the same interval.
    pub source_baseline_cpu_ms: f64,
    pub ferry_cpu_ms: f64,
    pub sink_tservers_cpu_ms: f64,
    /// ferry's VmRSS when the window completed.
    pub ferry_rss_mib: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct IdleRun {
    pub rows: u64,
    pub windows: usize,
    pub took_ms_p50: f64,
    pub took_ms_p90: f64,
    pub took_ms_max: f64,
    /// Mean time between window completions.
    pub cadence_s: f64,
    /// Per window: tablet counters summed over the source's tablets.
    pub per_window: BTreeMap<String, f64>,
    pub source_tservers_cpu_ms_per_window: f64,
    /// Of which LLVM compiles of row projectors (from the tablet servers'
    /// `--codegen_time_compilation` log lines).
    pub source_codegen_cpu_ms_per_window: f64,
    pub source_codegen_compiles_per_window: f64,
    /// The source tablet servers' CPU with no job running, over the same time.
    pub source_idle_baseline_cpu_ms_per_window: f64,
    /// Codegen cache queries and hits on the source, per window.
    pub source_code_cache_queries_per_window: f64,
    pub source_code_cache_hits_per_window: f64,
    pub ferry_cpu_ms_per_window: f64,
    pub sink_tservers_cpu_ms_per_window: f64,
    /// The diff scans apart from compiles: total − codegen − baseline.
    pub source_diff_scans_cpu_ms_per_window: f64,
    pub snapshot_s: f64,
    pub ferry_peak_rss_mib: f64,
    /// Every measured window.
    pub windows_detail: Vec<IdleWindow>,
}

pub fn label(rows: u64) -> String {
    if rows.is_multiple_of(1_000_000) {
        format!("{}m", rows / 1_000_000)
    } else if rows.is_multiple_of(1_000) {
        format!("{}k", rows / 1_000)
    } else {
        rows.to_string()
    }
}

pub async fn run(ctx: &Ctx, sizes: &[u64], windows: usize) -> Result<PathBuf> {
    let mut report = ctx.report(
        "idle-cycle",
        json!({"sizes": sizes, "windows_measured": windows, "discovery_interval_s": 1, "checkpointing_interval_ms": 500,
               "tablets": data::TABLETS, "tservers_per_cluster": ctx.tservers, "replicas": 1}),
    )?;
    let (src, dst) = ctx.clusters("idle", &mut report).await?;
    let sc = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let quiet: Vec<u32> = src.pids().into_iter().chain(dst.pids()).collect();
    let mut runs = Vec::new();
    for (i, &rows) in sizes.iter().enumerate() {
        let r = measure_size(&src, &dst, &sc, rows, windows, ctx, &mut report, &quiet).await?;
        runs.push(r);
        if i + 1 < sizes.len() {
            // The next size starts on clusters holding only its own table.
            let table = format!("bench_{}", label(rows));
            for (c, side) in [(&src, "source"), (&dst, "sink")] {
                if let Err(e) = data::drop_table(&c.masters, &table).await {
                    println!("  (could not drop {table} on the {side}: {e:#})");
                }
            }
        }
    }
    report.tables.push(idle_table(sizes, windows, &runs));
    report.result("runs", &runs);
    report.note("Counters are the source tablet servers' JSON /metrics tablet counters (summed over the table's 6 tablets), read before and after the measured windows and divided by their number. CPU is from /proc/<pid>/stat of the daemons and of ferry.");
    report.note("Kudu 1.17 tablet servers JIT-compile (LLVM) a row projector for each MemRowSet scan; the code cache key includes the address of the projection's read-default values, and a diff scan's projection always carries the virtual IS_DELETED column with a default, so every diff scan of every tablet misses the cache and compiles again (src/kudu/codegen/row_projector.cc, RowProjectorFunctions::EncodeKey). The compile runs on a compiler_manager thread, off the scan's path (its CPU is read from the tablet servers' --codegen_time_compilation log lines), but costs source CPU per tablet per window. The hidden tablet server flag --mrs_use_codegen=false avoids it (try --source-tserver-flag=--mrs_use_codegen=false).");
    report.note("Each source table was loaded, then flushed to disk (no MemRowSet data) as a long-lived table would be, before ferry started. Each size's tables are dropped on both clusters before the next size is loaded.");
    report.note("results.runs[].windows_detail keeps every measured window: took_ms, rows ferry read (ferry_rows_read_total, scraped from ferry's metrics endpoint once per window, which costs ferry well under a millisecond), tablet scans left out as quiet, and the CPU of the source tablet servers (and of it LLVM compiles), ferry and the sink since the previous window completed (/proc CPU times, read when the bench sees the window complete, polling every 20 ms: 10 ms resolution per window, while the per-window means above are exact).");
    drop(src);
    drop(dst);
    report.finish(&ctx.results_dir, &ctx.monitor)
}

/// One table size: load the source, start ferry, let it settle, then measure
/// `windows` idle windows.
#[allow(clippy::too_many_arguments)]
async fn measure_size(
    src: &Cluster,
    dst: &Cluster,
    sc: &KuduClient,
    rows: u64,
    windows: usize,
    ctx: &Ctx,
    report: &mut Report,
    quiet: &[u32],
) -> Result<IdleRun> {
    let work = report.work_dir.clone();
    let table = format!("bench_{}", label(rows));
    let prepared = prepare_source(src, sc, &table, rows, report, quiet).await?;
    report.command(data::create_table(&dst.masters, &table).await?);
    // What the source costs with no job at all.
    let src_pids = src.tserver_pids();
    let b0 = (cpu_seconds_of(&src_pids), std::time::Instant::now());
    tokio::time::sleep(Duration::from_secs(10)).await;
    let baseline_cores = (cpu_seconds_of(&src_pids) - b0.0) / b0.1.elapsed().as_secs_f64();
    let mut o = ctx.ferry_options(src, dst, &table, &work, &format!("idle-{}", label(rows)));
    o.discovery_s = Some(1);
    o.checkpointing_ms = Some(500);
    let ferry = Ferry::start(&o, &ctx.monitor)?;
    report.command(ferry.command.clone());
    let snap = ferry
        .wait_windows(1, Duration::from_secs(120 + rows / 2_000))
        .await?;
    println!(
        "  {table}: snapshot in {:.1} s; letting the clusters settle ...",
        snap.at_s
    );
    // Warm up, and let the sink's post-snapshot work calm down.
    ferry.wait_windows(4, Duration::from_secs(60)).await?;
    settle(&dst.pids(), Duration::from_secs(90)).await;
    let r = measure_windows(
        src,
        dst,
        ferry,
        &table,
        rows,
        windows,
        &snap,
        baseline_cores,
    )
    .await?;
    println!(
        "  {table}: idle window p50 {:.0} ms, source CPU {:.0} ms/window, rows returned {:.0}/window, scanner_rows_scanned {:.0}/window",
        r.took_ms_p50,
        r.source_tservers_cpu_ms_per_window,
        r.per_window["scanner_rows_returned"],
        r.per_window["scanner_rows_scanned"]
    );
    report.result(&format!("source_{}", label(rows)), &prepared);
    Ok(r)
}
/// Brackets `windows` idle windows with counter, CPU and log marks, stops
/// ferry, and turns the differences into per-window figures.
#[allow(clippy::too_many_arguments)]
async fn measure_windows(
    src: &Cluster,
    dst: &Cluster,
    ferry: Ferry,
    table: &str,
    rows: u64,
    windows: usize,
    snap: &WindowDone,
    baseline_cores: f64,
) -> Result<IdleRun> {
    let k0 = ferry.windows_len();
    ferry.wait_windows(k0 + 1, Duration::from_secs(30)).await?;
    let c0 = src.table_counters(table, COUNTERS).await?;
    let cc0 = src.code_cache().await?;
    let marks = src.log_marks();
    let mut step_marks = marks.clone();
    let cpu_now = || {
        (
            cpu_seconds_of(&src.tserver_pids()),
            ferry.cpu_s(),
            cpu_seconds_of(&dst.tserver_pids()),
        )
    };
    let mut counters = ferry_counters(&ferry).await;
    let cpu0 = cpu_now();
    let k1 = k0 + 1;
    let end = k1 + windows;
    let deadline = Instant::now() + Duration::from_secs(30 + 10 * windows as u64);
    let mut detail: Vec<IdleWindow> = Vec::with_capacity(windows);
    let (mut seen, mut prev_cpu) = (k1, cpu0);
    while seen < end {
        let n = ferry.windows_len();
        if n <= seen {
            if !ferry.alive() {
                bail!(
                    "ferry exited during the idle windows (log {})",
                    ferry.log.display()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "ferry completed {} of {windows} idle windows in time (log {})",
                    seen - k1,
                    ferry.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let cpu = cpu_now();
        let (compiles, gen) = src.codegen_advance(&mut step_marks);
        let now_counters = ferry_counters(&ferry).await;
        let all = ferry.windows();
        let upto = n.min(end);
        let (w, prev_at) = (&all[upto - 1], all[seen - 1].at_s);
        let delta = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
        let interval_s = w.at_s - prev_at;
        detail.push(IdleWindow {
            n: upto - k1,
            at_s: w.at_s,
            end_ht: w.end_ht,
            took_ms: w.took_ms,
            completed: upto - seen,
            interval_s,
            rows_read: delta(now_counters.0, counters.0),
            tablet_scans_skipped: delta(now_counters.1, counters.1),
            source_tservers_cpu_ms: (cpu.0 - prev_cpu.0) * 1000.0,
            source_codegen_cpu_ms: gen * 1000.0,
            source_codegen_compiles: compiles,
            source_baseline_cpu_ms: baseline_cores * interval_s * 1000.0,
            ferry_cpu_ms: (cpu.1 - prev_cpu.1) * 1000.0,
            sink_tservers_cpu_ms: (cpu.2 - prev_cpu.2) * 1000.0,
            ferry_rss_mib: w.rss_mib,
        });
        (seen, prev_cpu, counters) = (upto, cpu, now_counters);
    }
    let cpu1 = prev_cpu;
    let (compiles, gen_cpu) = src.codegen_since(&marks);
    let c1 = src.table_counters(table, COUNTERS).await?;
    let cc1 = src.code_cache().await?;
    let all = ferry.windows();
    let last = all[end - 1].clone();
    let measured = &all[k1..end];
    if measured.iter().any(|w| w.snapshot) {
        bail!("a snapshot window among the idle ones");
    }
    let first_at = all[k1 - 1].at_s;
    let mut took: Vec<f64> = measured.iter().map(|w| w.took_ms as f64).collect();
    took.sort_by(|a, b| a.total_cmp(b));
    let n = windows as f64;
    let per_window: BTreeMap<String, f64> = COUNTERS
        .iter()
        .map(|c| {
            (
                c.to_string(),
                (c1.get(*c).unwrap_or(&0.0) - c0.get(*c).unwrap_or(&0.0)) / n,
            )
        })
        .collect();
    let hwm = snap.hwm_mib.unwrap_or(0.0);
    let usage = ferry.stop().await?;
    let source_total = (cpu1.0 - cpu0.0) * 1000.0 / n;
    let source_codegen = gen_cpu * 1000.0 / n;
    let source_baseline = baseline_cores * 1000.0 * (last.at_s - first_at) / n;
    let r = IdleRun {
        rows,
        windows,
        took_ms_p50: percentile(&took, 50.0),
        took_ms_p90: percentile(&took, 90.0),
        took_ms_max: took.last().copied().unwrap_or(f64::NAN),
        cadence_s: (last.at_s - first_at) / n,
        per_window,
        source_tservers_cpu_ms_per_window: source_total,
        source_codegen_cpu_ms_per_window: source_codegen,
        source_codegen_compiles_per_window: compiles as f64 / n,
        source_idle_baseline_cpu_ms_per_window: source_baseline,
        source_diff_scans_cpu_ms_per_window: source_total - source_codegen - source_baseline,
        source_code_cache_queries_per_window: (cc1.0 - cc0.0) / n,
        source_code_cache_hits_per_window: (cc1.1 - cc0.1) / n,
        ferry_cpu_ms_per_window: (cpu1.1 - cpu0.1) * 1000.0 / n,
        sink_tservers_cpu_ms_per_window: (cpu1.2 - cpu0.2) * 1000.0 / n,
        snapshot_s: snap.at_s,
        ferry_peak_rss_mib: hwm.max(usage.peak_rss_mib),
        windows_detail: detail,
    };
    Ok(r)
}

/// ferry's rows read and quiet tablet scans left out so far (`None` each
/// when it serves no metrics or the scrape failed).
async fn ferry_counters(ferry: &Ferry) -> (Option<f64>, Option<f64>) {
    let Some(addr) = &ferry.metrics_addr else {
        return (None, None);
    };
    match crate::ferry::scrape_metrics(addr, &[FERRY_ROWS_READ, FERRY_SCANS_SKIPPED]).await {
        Ok(m) => (
            m.get(FERRY_ROWS_READ).copied(),
            m.get(FERRY_SCANS_SKIPPED).copied(),
        ),
        Err(_) => (None, None),
    }
}

/// The report's table: one column per table size.
fn idle_table(sizes: &[u64], windows: usize, runs: &[IdleRun]) -> Table {
    let mut t = Table::new(
        &format!("idle-cycle: diff windows with no changes (job.discoveryIntervalSeconds=1), {windows} windows per size"),
        &["measure (per window)", &format!("{} rows", f0(sizes[0] as f64))],
    );
    t.header = std::iter::once("measure (per window)".to_string())
        .chain(runs.iter().map(|r| format!("{} rows", f0(r.rows as f64))))
        .collect();
    let row = |name: &str, f: &dyn Fn(&IdleRun) -> String| -> Vec<String> {
        std::iter::once(name.to_string())
            .chain(runs.iter().map(f))
            .collect()
    };
    t.row(row("window took_ms p50", &|r| f0(r.took_ms_p50)));
    t.row(row("window took_ms p90 / max", &|r| {
        format!("{} / {}", f0(r.took_ms_p90), f0(r.took_ms_max))
    }));
    t.row(row("time between windows (s)", &|r| f2(r.cadence_s)));
    t.row(row("rows returned by the diff scans", &|r| {
        f0(r.per_window["scanner_rows_returned"])
    }));
    t.row(row(
        "rows scanned on the source (scanner_rows_scanned)",
        &|r| f0(r.per_window["scanner_rows_scanned"]),
    ));
    t.row(row("bytes read from disk on the source", &|r| {
        f0(r.per_window["scanner_bytes_scanned_from_disk"])
    }));
    t.row(row("scans started", &|r| f1(r.per_window["scans_started"])));
    t.row(row("source tablet servers CPU (ms)", &|r| {
        f1(r.source_tservers_cpu_ms_per_window)
    }));
    t.row(row("  of which LLVM compiles of row projectors", &|r| {
        format!(
            "{} ({} compiles)",
            f1(r.source_codegen_cpu_ms_per_window),
            f1(r.source_codegen_compiles_per_window)
        )
    }));
    t.row(row("  same time with no job running (baseline)", &|r| {
        f1(r.source_idle_baseline_cpu_ms_per_window)
    }));
    t.row(row(
        "  diff scans without codegen (total − codegen − baseline)",
        &|r| f1(r.source_diff_scans_cpu_ms_per_window),
    ));
    t.row(row(
        "  diff scans without codegen, per million rows",
        &|r| f1(r.source_diff_scans_cpu_ms_per_window * 1e6 / r.rows as f64),
    ));
    t.row(row("codegen cache queries / hits on the source", &|r| {
        format!(
            "{} / {}",
            f1(r.source_code_cache_queries_per_window),
            f1(r.source_code_cache_hits_per_window)
        )
    }));
    t.row(row("ferry CPU (ms)", &|r| f1(r.ferry_cpu_ms_per_window)));
    t.row(row("sink tablet servers CPU (ms)", &|r| {
        f1(r.sink_tservers_cpu_ms_per_window)
    }));
    t.row(row("tablet scans left out as quiet", &|r| {
        let skipped: Option<f64> = r
            .windows_detail
            .iter()
            .map(|w| w.tablet_scans_skipped)
            .sum();
        skipped.map_or("-".into(), |s| f1(s / r.windows as f64))
    }));
    t.row(row("snapshot before the idle windows (s)", &|r| {
        f1(r.snapshot_s)
    }));
    t.row(row("ferry peak RSS (MiB)", &|r| f0(r.ferry_peak_rss_mib)));
    t
}
