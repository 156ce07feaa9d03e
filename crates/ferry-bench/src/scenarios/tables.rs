//! `tables`: what idle tables cost in one job. N small tables (2 hash
//! tablets, 100 rows, one replica) on a source of 3 tablet servers, one
//! job replicating them all with 1-second windows; once every table is past
//! its snapshot and the job is steady, the bench measures a fixed period
//! and reports, per idle table per window: the CPU of the source tablet
//! servers (from /proc, minus the same period with no job), of the source
//! master, and of ferry; and ferry's RSS. The counts run in ascending
//! order on one pair of clusters: the tables of a count are the first N,
//! created (in parallel) before its run.

use super::Ctx;
use crate::kudu::Cluster;
use crate::procs::{cpu_seconds, cpu_seconds_of, proc_memory};
use crate::report::{f0, f1, f2, Table};
use anyhow::{bail, Result};
use futures::StreamExt;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, KuduClient, Schema, TableBuilder};
use serde::Serialize;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Rows per table.
const ROWS: i64 = 100;
/// Tablets per table (hash buckets).
const TABLETS: u32 = 2;
/// Tables created at once.
const CREATING: usize = 8;

/// One count's figures.
#[derive(Debug, Clone, Serialize)]
pub struct TablesRun {
    pub tables: usize,
    /// Seconds from ferry's start until every table completed a window
    /// after its snapshot.
    pub steady_after_s: f64,
    pub measured_s: f64,
    /// Windows completed (over all tables) in the measured period.
    pub windows: usize,
    /// Windows per table per second (1.0: every table kept its 1-s cadence).
    pub windows_per_table_s: f64,
    pub source_tservers_cores: f64,
    pub source_tservers_baseline_cores: f64,
    pub source_master_cores: f64,
    pub ferry_cores: f64,
    pub ferry_rss_mib: f64,
    /// Per idle table per window (total windows of the period).
    pub source_tservers_cpu_ms_per_table_window: f64,
    pub source_master_cpu_ms_per_table_window: f64,
    pub ferry_cpu_ms_per_table_window: f64,
    pub ferry_rss_kib_per_table: f64,
    /// Tablet scans ferry left out as quiet in the period, per window.
    pub skipped_per_window: Option<f64>,
}

pub async fn run(ctx: &Ctx, counts: &[usize], seconds: u64) -> Result<PathBuf> {
    let mut report = ctx.report(
        "tables",
        json!({"counts": counts, "seconds_measured": seconds, "rows_per_table": ROWS,
               "tablets_per_table": TABLETS, "replicas": 1, "discovery_interval_s": 1, "checkpointing_interval_ms": 500,
               "tservers_per_cluster": ctx.tservers}),
    )?;
    let (src, dst) = ctx.clusters("tables", &mut report).await?;
    let client = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let sink = KuduClient::new(&dst.masters.split(',').collect::<Vec<_>>())?;
    // New tables' MemRowSets flushed within a second, so the flushes are
    // over before the baseline and the measurement.
    src.set_tserver_flag("flush_threshold_secs", "1").await?;
    report.command("kudu tserver set_flag <each source tablet server> flush_threshold_secs 1");
    let mut runs = Vec::new();
    let mut created = 0;
    for &n in counts {
        let started = Instant::now();
        // The sink tables too (empty): ferry would create them one by one.
        let (a, b) = tokio::join!(
            create_tables(&client, created, n, ROWS),
            create_tables(&sink, created, n, 0)
        );
        a?;
        b?;
        created = created.max(n);
        println!(
            "  {n} tables on the source (created in {:.1} s)",
            started.elapsed().as_secs_f64()
        );
        runs.push(measure(ctx, &src, &dst, n, seconds, &mut report).await?);
    }
    report.command(format!(
        "# ferry-bench (in process): tables many_0000.. created through kudu-client on both clusters, {CREATING} at a time per cluster: INT64 key id, INT64 v; {TABLETS} hash tablets; 1 replica; {ROWS} rows each on the source"
    ));
    report.tables.push(tables_table(&runs, seconds));
    report.result("runs", &runs);
    report.note("CPU from /proc/<pid>/stat of the source tablet servers, the source master and ferry over the measured period; the tablet servers' baseline is the same length of time with no job running, just before ferry started, and is subtracted in the per-table figures. A window is one table's window (ferry logs `window completed` per table).");
    drop(src);
    drop(dst);
    report.finish(&ctx.results_dir, &ctx.monitor)
}

fn table_name(i: usize) -> String {
    format!("many_{i:04}")
}

/// Creates tables `from..to` with `rows` rows each.
async fn create_tables(client: &KuduClient, from: usize, to: usize, rows: i64) -> Result<()> {
    let results: Vec<Result<()>> = futures::stream::iter(from..to)
        .map(|i| create_one(client, i, rows))
        .buffer_unordered(CREATING)
        .collect()
        .await;
    results.into_iter().collect()
}

async fn create_one(client: &KuduClient, i: usize, rows: i64) -> Result<()> {
    let name = table_name(i);
    let schema = Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()?,
        ColumnSchema::builder("v", DataType::Int64)
            .nullable(true)
            .build()?,
    ])?;
    let b = TableBuilder::new(&name, schema)
        .add_hash_partitions(&["id"], TABLETS, 0)
        .num_replicas(1);
    client.create_table(&b).await?;
    let table = client.open_table(&name).await?;
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))?;
    for id in 0..rows {
        let mut r = table.new_row();
        r.set_i64("id", id)?;
        r.set_i64("v", id)?;
        s.apply(Operation::insert(&table, r)).await?;
    }
    s.flush().await?;
    Ok(())
}

/// Runs one job over the first `n` tables and measures its steady state.
// Long: baseline, start, steady wait, measured period and figures are one
// sequence whose readings (CPU, windows, skips) pair up across it.
async fn measure(
    ctx: &Ctx,
    src: &Cluster,
    dst: &Cluster,
    n: usize,
    seconds: u64,
    report: &mut crate::report::Report,
) -> Result<TablesRun> {
    let src_ts = src.tserver_pids();
    let master: Vec<u32> = src
        .pids()
        .into_iter()
        .filter(|p| !src_ts.contains(p))
        .collect();
    let period = Duration::from_secs(seconds);
    // The new tables' flushes and compactions first.
    super::settle(&src.pids(), Duration::from_secs(120)).await;
    let b0 = (cpu_seconds_of(&src_ts), Instant::now());
    tokio::time::sleep(period.min(Duration::from_secs(10))).await;
    let baseline = (cpu_seconds_of(&src_ts) - b0.0) / b0.1.elapsed().as_secs_f64();
    let work = report.work_dir.clone();
    // The pattern takes every table created so far: the first `n`.
    let mut o = ctx.ferry_options(src, dst, &table_name(0), &work, &format!("tables-{n}"));
    o.discovery_s = Some(1);
    o.checkpointing_ms = Some(500);
    o.extra.extend([
        "--job.tablePattern".into(),
        "many_[0-9]{4}".into(),
        "--job.createTable".into(),
        "true".into(),
    ]);
    let ferry = crate::ferry::Ferry::start(&o, &ctx.monitor)?;
    report.command(ferry.command.clone());
    // Every table: its snapshot, then two windows.
    let steady = ferry
        .wait_windows(3 * n, Duration::from_secs(120 + n as u64))
        .await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cpu = || {
        (
            cpu_seconds_of(&src_ts),
            cpu_seconds_of(&master),
            cpu_seconds(ferry.pid()).unwrap_or(0.0),
        )
    };
    let skipped = || async {
        let addr = ferry.metrics_addr.as_ref()?;
        let body = crate::kudu::http_get(addr, "/metrics").await.ok()?;
        Some(sum_of(&body, "ferry_table_tablet_scans_skipped_total"))
    };
    let (w0, c0, s0, t0) = (ferry.windows_len(), cpu(), skipped().await, Instant::now());
    tokio::time::sleep(period).await;
    let (w1, c1, s1, t1) = (ferry.windows_len(), cpu(), skipped().await, Instant::now());
    let rss = proc_memory(ferry.pid()).map_or(0.0, |m| m.0);
    if !ferry.alive() {
        bail!(
            "ferry exited during the measurement (log {})",
            ferry.log.display()
        );
    }
    ferry.stop().await?;
    let secs = (t1 - t0).as_secs_f64();
    let windows = w1 - w0;
    let per_window = |cpu_s: f64| cpu_s * 1000.0 / windows.max(1) as f64;
    let source = c1.0 - c0.0;
    let r = TablesRun {
        tables: n,
        steady_after_s: steady.at_s,
        measured_s: secs,
        windows,
        windows_per_table_s: windows as f64 / n as f64 / secs,
        source_tservers_cores: source / secs,
        source_tservers_baseline_cores: baseline,
        source_master_cores: (c1.1 - c0.1) / secs,
        ferry_cores: (c1.2 - c0.2) / secs,
        ferry_rss_mib: rss,
        source_tservers_cpu_ms_per_table_window: per_window((source - baseline * secs).max(0.0)),
        source_master_cpu_ms_per_table_window: per_window(c1.1 - c0.1),
        ferry_cpu_ms_per_table_window: per_window(c1.2 - c0.2),
        ferry_rss_kib_per_table: rss * 1024.0 / n as f64,
        skipped_per_window: s0.zip(s1).map(|(a, b)| (b - a) / windows.max(1) as f64),
    };
    println!(
        "  {n} tables: source tablet servers {:.2} cores (baseline {:.2}), master {:.2}, ferry {:.2} cores, {:.0} MiB; {:.2} ms source CPU per idle table per window; {:.2} windows per table per second",
        r.source_tservers_cores,
        baseline,
        r.source_master_cores,
        r.ferry_cores,
        rss,
        r.source_tservers_cpu_ms_per_table_window,
        r.windows_per_table_s
    );
    Ok(r)
}

/// The report's table: one column per count.
fn tables_table(runs: &[TablesRun], seconds: u64) -> Table {
    let mut t = Table::new(
        &format!("tables: idle tables in one job (1-s windows), {seconds} s measured per count"),
        &["measure"],
    );
    t.header = std::iter::once("measure".to_string())
        .chain(runs.iter().map(|r| format!("{} tables", r.tables)))
        .collect();
    let row = |name: &str, f: &dyn Fn(&TablesRun) -> String| -> Vec<String> {
        std::iter::once(name.to_string())
            .chain(runs.iter().map(f))
            .collect()
    };
    t.row(row("windows per table per second", &|r| {
        f2(r.windows_per_table_s)
    }));
    t.row(row("source tablet servers (cores)", &|r| {
        f2(r.source_tservers_cores)
    }));
    t.row(row("  of which with no job (baseline)", &|r| {
        f2(r.source_tservers_baseline_cores)
    }));
    t.row(row("source master (cores)", &|r| f2(r.source_master_cores)));
    t.row(row("ferry (cores)", &|r| f2(r.ferry_cores)));
    t.row(row("ferry RSS (MiB)", &|r| f0(r.ferry_rss_mib)));
    t.row(row(
        "source tablet-server CPU per idle table per window (ms, minus baseline)",
        &|r| f2(r.source_tservers_cpu_ms_per_table_window),
    ));
    t.row(row("source master CPU per table per window (ms)", &|r| {
        f2(r.source_master_cpu_ms_per_table_window)
    }));
    t.row(row("ferry CPU per table per window (ms)", &|r| {
        f2(r.ferry_cpu_ms_per_table_window)
    }));
    t.row(row("ferry RSS per table (KiB)", &|r| {
        f0(r.ferry_rss_kib_per_table)
    }));
    t.row(row("tablet scans left out as quiet, per window", &|r| {
        r.skipped_per_window.map_or("-".into(), f2)
    }));
    t.row(row("steady after (s)", &|r| f1(r.steady_after_s)));
    t
}

/// The sum of every series of `name` in a Prometheus text exposition.
fn sum_of(body: &str, name: &str) -> f64 {
    body.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '{']))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
